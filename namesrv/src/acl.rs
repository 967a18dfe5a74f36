//! The NameServer's plain ACL (`acl_enable`, TOML; `aclEnable` accepted too): the rules
//! of a `plain_acl.yml` (the broker's file format, `ringmq_acl`), checked on every
//! request before it is processed (`AclRules::check_namesrv`: route changes need an
//! admin account, routes need PUB or SUB on the topic, everything else a valid
//! signature), the file's reload when it changes, and the refusal log.
//!
//! Invariants: a file that does not load at start-up fails the start; one that does not
//! load later keeps the rules in force (logged, counted); the file's stamp (length and
//! modification time) is looked at every `ACL_RELOAD_INTERVAL_MS` and its bytes read only
//! when the stamp changed, at most `ACL_FILE_BYTES_MAX` — a blocking read on the one
//! executor, bounded by that size and only on a change; at most one refusal log line per
//! refusal kind per `ACL_REFUSAL_LOG_INTERVAL_MS` (the others counted into the next).

use ringmq_acl::{AclRules, RefusalKind, ACL_FILE_BYTES_MAX};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// How often the file is looked at for a change (the broker's interval, Apache's 5 s).
pub const ACL_RELOAD_INTERVAL_MS: u64 = 5_000;
/// At most one log line per refusal kind in this long.
pub const ACL_REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;

const KINDS: usize = RefusalKind::ALL.len();

/// What identifies one version of the file.
type Stamp = (u64, Option<SystemTime>);

/// The loaded rules and their bookkeeping; lives on the NameServer's executor.
pub struct NamesrvAcl {
    path: PathBuf,
    rules: RefCell<AclRules>,
    stamp: Cell<Option<Stamp>>,
    pub refusals: Cell<u64>,
    pub file_loads: Cell<u64>,
    pub file_load_failures: Cell<u64>,
    logged_at: [Cell<Option<Instant>>; KINDS],
    unlogged: [Cell<u64>; KINDS],
}

fn stamp_of(path: &Path) -> std::io::Result<Stamp> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.len(), meta.modified().ok()))
}

/// Reads and parses the file: its stamp (taken before the read, so a write during the
/// read is seen again next time) and its rules.
fn load(path: &Path) -> Result<(Stamp, AclRules), String> {
    let stamp = stamp_of(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    file.take(ACL_FILE_BYTES_MAX + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > ACL_FILE_BYTES_MAX {
        return Err(format!("{}: larger than {ACL_FILE_BYTES_MAX} bytes", path.display()));
    }
    let rules = ringmq_acl::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((stamp, rules))
}

impl NamesrvAcl {
    /// Loads `path`; `Err` says why (the start fails).
    pub fn open(path: &Path) -> Result<Self, String> {
        let (stamp, rules) = load(path)?;
        tracing::info!(file = %path.display(), accounts = rules.accounts.len(), global_white = rules.global_white.len(), "NameServer ACL on: plain_acl.yml loaded");
        Ok(Self {
            path: path.to_path_buf(),
            rules: RefCell::new(rules),
            stamp: Cell::new(Some(stamp)),
            refusals: Cell::new(0),
            file_loads: Cell::new(1),
            file_load_failures: Cell::new(0),
            logged_at: Default::default(),
            unlogged: Default::default(),
        })
    }

    /// Re-reads the file when its stamp changed; a file that does not load keeps the
    /// rules in force (and is not tried again until it changes).
    pub fn reload(&self) {
        let stamp = match stamp_of(&self.path) {
            Ok(s) => s,
            Err(e) => {
                if self.stamp.take().is_some() {
                    tracing::warn!(file = %self.path.display(), error = %e, "plain_acl.yml is gone or unreadable: the rules loaded before stay in force");
                }
                return;
            }
        };
        if self.stamp.get() == Some(stamp) {
            return;
        }
        match load(&self.path) {
            Ok((stamp, rules)) => {
                tracing::info!(file = %self.path.display(), accounts = rules.accounts.len(), "plain_acl.yml changed: reloaded");
                *self.rules.borrow_mut() = rules;
                self.stamp.set(Some(stamp));
                self.file_loads.set(self.file_loads.get() + 1);
            }
            Err(e) => {
                self.stamp.set(Some(stamp));
                self.file_load_failures.set(self.file_load_failures.get() + 1);
                tracing::warn!(error = %e, "plain_acl.yml changed but does not load: the rules loaded before stay in force");
            }
        }
    }

    /// The NO_PERMISSION answer to `req`, when the rules refuse it.
    pub fn refusal(&self, req: &RemotingCommand, caller: &str) -> Option<RemotingCommand> {
        let remote: Option<IpAddr> = caller.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
        let refusal = self.rules.borrow().check_namesrv(req, remote).err()?;
        self.refusals.set(self.refusals.get() + 1);
        let i = refusal.kind.index();
        let now = Instant::now();
        let due = self.logged_at[i].get().is_none_or(|at| now.duration_since(at).as_millis() >= u128::from(ACL_REFUSAL_LOG_INTERVAL_MS));
        if due {
            let also = self.unlogged[i].replace(0);
            self.logged_at[i].set(Some(now));
            tracing::warn!(caller, code = req.code, kind = ?refusal.kind, remark = %refusal.remark, refused_unlogged_before = also, "NameServer ACL refused a request");
        } else {
            self.unlogged[i].set(self.unlogged[i].get() + 1);
        }
        Some(req.create_response(rs::NO_PERMISSION, Some(&refusal.remark)))
    }
}
