//! The shard's plain ACL (`aclEnable`): its own copy of the `plain_acl.yml` rules
//! (the `ringmq-acl` crate), their reload when the file changes, the check of every client request
//! where it enters the shard (`Shard::handle`, before any forwarding: a forwarded request
//! is not checked again, internal and mesh calls never are), the refusal counter
//! (`ringmq_acl_refusals`) and the rate-limited refusal log (both shared with RocketMQ 5's
//! checks, `auth.rs`).
//!
//! Invariants: with `aclEnable` off the request path pays one branch on a config flag
//! (`Shard::handle`), nothing else; each shard reads and parses the file itself (no state
//! shared between shards); a file that does not load at start-up fails the start, a file
//! that does not load later keeps the previous rules (logged, with why); at most one log
//! line per refusal kind per `ACL_REFUSAL_LOG_INTERVAL_MS` per shard (the others counted
//! into the next line); the file is polled every `ACL_RELOAD_INTERVAL_MS`, its bytes read
//! only when its length or modification time changed.

use super::{error_response, ConnCtx, OpenError, Shard};
use ringmq_acl::{self as acl, AclRules, RefusalKind};
use crate::rt::{ConfStamp, Runtime};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// How often `plain_acl.yml` is looked at for a change (Apache's watcher: 5 s as well).
pub const ACL_RELOAD_INTERVAL_MS: u64 = 5_000;
/// At most one log line per refusal kind in this long, per shard.
pub const ACL_REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;

const KINDS: usize = RefusalKind::ALL.len();

/// One shard's ACL state; empty (no rules) while `aclEnable` is off.
#[derive(Default)]
pub struct ShardAcl {
    rules: RefCell<Rc<AclRules>>,
    stamp: Cell<Option<ConfStamp>>,
    refusals: Cell<u64>,
    file_loads: Cell<u64>,
    file_load_failures: Cell<u64>,
    /// Per refusal kind: when its last line was logged (monotonic µs) and refusals of
    /// that kind not logged since.
    logged_at_us: [Cell<Option<u64>>; KINDS],
    unlogged: [Cell<u64>; KINDS],
}

impl ShardAcl {
    pub fn refusals(&self) -> u64 {
        self.refusals.get()
    }

    pub fn file_loads(&self) -> u64 {
        self.file_loads.get()
    }

    pub fn file_load_failures(&self) -> u64 {
        self.file_load_failures.get()
    }

    fn install(&self, rules: AclRules, stamp: ConfStamp) {
        self.file_loads.set(self.file_loads.get() + 1);
        *self.rules.borrow_mut() = Rc::new(rules);
        self.stamp.set(Some(stamp));
    }
}

impl<R: Runtime> Shard<R> {
    /// At open with `aclEnable`: loads `plain_acl.yml` (failing the start when it does
    /// not load) and starts the reload poll.
    pub(super) async fn open_acl(self: &Rc<Self>) -> Result<(), OpenError> {
        let config = self.config();
        if !config.acl_enable {
            return Ok(());
        }
        let path = config.plain_acl_path();
        let fail = |reason: String| OpenError::Meta { shard: self.place.id, what: "plain_acl.yml (aclEnable=true)", reason };
        let (stamp, bytes) = self.rt.read_conf_file(&path, acl::ACL_FILE_BYTES_MAX).await.map_err(fail)?;
        let rules = acl::parse(&bytes).map_err(|e| fail(format!("{}: {e}", path.display())))?;
        if self.place.id == 0 {
            tracing::info!(file = %path.display(), accounts = rules.accounts.len(), global_white = rules.global_white.len(), "ACL on: plain_acl.yml loaded");
        }
        self.clients.acl.install(rules, stamp);
        let shard = self.clone();
        self.rt.spawn(async move {
            while !shard.store_stop.get() {
                shard.rt.sleep(Duration::from_millis(ACL_RELOAD_INTERVAL_MS)).await;
                shard.reload_acl().await;
            }
        });
        Ok(())
    }

    /// Re-reads `plain_acl.yml` when its stamp changed; a file that does not load
    /// keeps the rules in force.
    pub async fn reload_acl(&self) {
        let path = self.config().plain_acl_path();
        let acl = &self.clients.acl;
        let stamp = match self.rt.conf_file_stamp(&path).await {
            Ok(Some(stamp)) => stamp,
            Ok(None) => {
                if acl.stamp.take().is_some() {
                    tracing::warn!(shard = self.place.id, file = %path.display(), "plain_acl.yml is gone: the rules loaded before stay in force");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(shard = self.place.id, error = %e, "plain_acl.yml not readable: the rules loaded before stay in force");
                return;
            }
        };
        if acl.stamp.get() == Some(stamp) {
            return;
        }
        let loaded = self.rt.read_conf_file(&path, acl::ACL_FILE_BYTES_MAX).await.and_then(|(stamp, bytes)| acl::parse(&bytes).map(|r| (stamp, r)).map_err(|e| e.to_string()));
        match loaded {
            Ok((stamp, rules)) => {
                tracing::info!(shard = self.place.id, file = %path.display(), accounts = rules.accounts.len(), "plain_acl.yml changed: reloaded");
                acl.install(rules, stamp);
            }
            Err(e) => {
                // Not retried until the file changes again.
                acl.stamp.set(Some(stamp));
                acl.file_load_failures.set(acl.file_load_failures.get() + 1);
                tracing::warn!(shard = self.place.id, file = %path.display(), error = %e, "plain_acl.yml changed but does not load: the rules loaded before stay in force");
            }
        }
    }

    /// The refusal to answer `cmd` with, when the ACL refuses it (called only with
    /// `aclEnable`, for a request that arrived on this shard's socket).
    pub(super) fn acl_refusal(&self, cmd: &RemotingCommand, ctx: ConnCtx) -> Option<RemotingCommand> {
        let remote = ctx.remote.map(|a| a.ip());
        let rules = self.clients.acl.rules.borrow().clone();
        let refusal = rules.check(cmd, remote).err()?;
        Some(self.refused(cmd, ctx, refusal))
    }

    /// Counts and (rate-limited) logs a refusal of the plain ACL or of RocketMQ 5's
    /// checks (`auth.rs`), and makes its NO_PERMISSION answer.
    pub(super) fn refused(&self, cmd: &RemotingCommand, ctx: ConnCtx, refusal: ringmq_acl::Refusal) -> RemotingCommand {
        let acl = &self.clients.acl;
        acl.refusals.set(acl.refusals.get() + 1);
        let i = refusal.kind.index();
        let now = self.rt.monotonic_us();
        let due = acl.logged_at_us[i].get().is_none_or(|at| now.saturating_sub(at) >= ACL_REFUSAL_LOG_INTERVAL_MS * 1000);
        if due {
            let also = acl.unlogged[i].replace(0);
            acl.logged_at_us[i].set(Some(now));
            tracing::warn!(shard = self.place.id, caller = ?ctx.remote, code = cmd.code, kind = ?refusal.kind, remark = %refusal.remark, refused_unlogged_before = also, "ACL refused a request");
        } else {
            acl.unlogged[i].set(acl.unlogged[i].get() + 1);
        }
        error_response(cmd, rs::NO_PERMISSION, refusal.remark)
    }
}
