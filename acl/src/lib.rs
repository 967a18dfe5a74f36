//! Access control as Apache RocketMQ does it, in two generations: RocketMQ 5's users and
//! ACLs (`authenticationEnabled` / `authorizationEnabled`) in [`auth`], and, here and in
//! `file.rs`, `addr.rs`, `resource.rs`, the 4.x plain ACL.
//!
//! RocketMQ 4.x plain ACL (`aclEnable=true`): the rules of a `plain_acl.yml`
//! ([`AclRules`], parsed by `file.rs`, address patterns in `addr.rs`) and the decision
//! for one request ([`AclRules::check`]), as Apache's `PlainPermissionManager.validate`
//! over `PlainAccessValidator.parse`'s resources (`resource.rs`).
//!
//! Decision order (Apache's): the caller's address in `globalWhiteRemoteAddresses` →
//! allowed; no `AccessKey` → refused; an unknown access key → refused; the caller in
//! the account's `whiteRemoteAddress` → allowed (no signature, no permission check);
//! the `Signature` (`ringmq_client::remoting::acl`) wrong → refused; a send to the trace
//! topic → allowed; an admin request code from a non-admin account → refused; then each
//! resource: its own `topicPerms` / `groupPerms` entry, else the account's default
//! (an admin account with no entries at all may do anything), checked as Java's
//! `Permission.checkPermission` (DENY wins; the needed bit must be owned).
//!
//! This is a rules crate (`ringmq-acl`, shared by the broker and the NameServer): it
//! knows nothing of shards, runtimes or IO; the caller reads the file and owns the
//! loaded rules (the broker's owner, their reload and the refusal counter, is its
//! `shard/acl.rs`).
//! Invariant: `check` never panics on any request and allocates nothing for a request
//! from a globally white-listed address.

pub mod addr;
pub mod namesrv;
pub mod auth;
pub mod file;
pub mod resource;

use addr::AddrPattern;
use resource::Resource;
use ringmq_client::remoting::acl as sign;
use ringmq_client::remoting::command::RemotingCommand;
use std::collections::HashMap;
use std::net::IpAddr;
use thiserror::Error;

pub use file::{parse, ACL_ACCOUNTS_MAX, ACL_FILE_BYTES_MAX};

/// Java's `Permission` bits.
pub const DENY: u8 = 1;
pub const ANY: u8 = 1 << 1;
pub const PUB: u8 = 1 << 2;
pub const SUB: u8 = 1 << 3;

/// The trace topic a traced client sends to: Apache lets PUB to it through unchecked.
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AclError {
    #[error("plain_acl.yml: {0}")]
    File(String),
    #[error("remote address pattern `{pattern}`: {reason}")]
    Address { pattern: String, reason: String },
}

/// Java's `Permission.parsePermFromString`: PUB, SUB, PUB|SUB, SUB|PUB, anything else
/// (DENY, absent, unknown) DENY.
pub fn parse_perm(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB") | Some("SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// Java's `Permission.checkPermission`.
pub fn check_permission(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

pub fn perm_name(perm: u8) -> &'static str {
    match perm {
        PUB => "PUB",
        SUB => "SUB",
        p if p == PUB | SUB => "PUB|SUB",
        _ => "DENY",
    }
}

/// One account of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub access_key: String,
    pub secret_key: String,
    pub white: AddrPattern,
    pub admin: bool,
    pub default_topic_perm: u8,
    pub default_group_perm: u8,
    /// By topic name.
    pub topic_perms: HashMap<String, u8>,
    /// By group name (Apache keys them by `%RETRY%<group>`: the same thing).
    pub group_perms: HashMap<String, u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclRules {
    pub global_white: Vec<AddrPattern>,
    pub accounts: HashMap<String, Account>,
}

/// Why a request was refused: one rate-limited log line per reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    NoAccessKey,
    UnknownAccessKey,
    BadSignature,
    NotAdmin,
    NoPermission,
    BadRequest,
    /// RocketMQ 5 (`auth`): the user exists but is disabled.
    UserDisabled,
}

impl RefusalKind {
    pub const ALL: [RefusalKind; 7] = [Self::NoAccessKey, Self::UnknownAccessKey, Self::BadSignature, Self::NotAdmin, Self::NoPermission, Self::BadRequest, Self::UserDisabled];
    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    /// The answer's remark (Apache's wording).
    pub remark: String,
}

fn refuse(kind: RefusalKind, remark: String) -> Result<(), Refusal> {
    Err(Refusal { kind, remark })
}

impl AclRules {
    /// Whether the caller at `remote` may send `cmd` (`None`: an address unknown, which
    /// matches no white list).
    pub fn check(&self, cmd: &RemotingCommand, remote: Option<IpAddr>) -> Result<(), Refusal> {
        let Some(account) = self.authenticate(cmd, remote)? else { return Ok(()) };
        let needed = match resource::resources(cmd) {
            Ok(r) => r,
            Err(e) => return refuse(RefusalKind::BadRequest, e),
        };
        if needed.iter().any(|(r, p)| *p == PUB && matches!(r, Resource::Topic(t) if t == RMQ_SYS_TRACE_TOPIC)) {
            return Ok(());
        }
        account.check_perm(cmd.code, &needed)
    }

    /// The first steps of Apache's decision, shared by the broker's and the NameServer's
    /// checks: `Ok(None)` when the caller's address is white-listed (globally, or for the
    /// account it names: no signature or permission is checked then), `Ok(Some)` the
    /// account whose signature the request carries.
    pub fn authenticate(&self, cmd: &RemotingCommand, remote: Option<IpAddr>) -> Result<Option<&Account>, Refusal> {
        if let Some(ip) = remote {
            if self.global_white.iter().any(|p| p.matches(ip)) {
                return Ok(None);
            }
        }
        let Some(ak) = cmd.ext(sign::ACCESS_KEY) else {
            return Err(Refusal { kind: RefusalKind::NoAccessKey, remark: "No accessKey is configured".into() });
        };
        let Some(account) = self.accounts.get(ak) else {
            return Err(Refusal { kind: RefusalKind::UnknownAccessKey, remark: format!("No acl config for {ak}") });
        };
        if remote.is_some_and(|ip| account.white.matches(ip)) {
            return Ok(None);
        }
        if !sign::signature_matches(cmd, &account.secret_key) {
            return Err(Refusal { kind: RefusalKind::BadSignature, remark: format!("Check signature failed for accessKey={ak}") });
        }
        Ok(Some(account))
    }
}

impl Account {
    /// Java's `PlainPermissionManager.checkPerm`.
    pub fn check_perm(&self, code: i32, needed: &[(Resource<'_>, u8)]) -> Result<(), Refusal> {
        if resource::is_admin_code(code) && !self.admin {
            return refuse(RefusalKind::NotAdmin, format!("Need admin permission for request code={code}, but accessKey={} is not", self.access_key));
        }
        if self.admin && self.topic_perms.is_empty() && self.group_perms.is_empty() {
            return Ok(());
        }
        for (resource, perm) in needed {
            let owned = match resource {
                Resource::Topic(t) => self.topic_perms.get(t.as_ref()).copied().unwrap_or(self.default_topic_perm),
                Resource::Group(g) => self.group_perms.get(g.as_ref()).copied().unwrap_or(self.default_group_perm),
            };
            if !check_permission(*perm, owned) {
                return refuse(RefusalKind::NoPermission, format!("No default permission for {resource} (needs {}, accessKey={} has {})", perm_name(*perm), self.access_key, perm_name(owned)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
