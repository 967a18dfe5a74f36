//! RocketMQ 5's authentication and authorization (Apache's `auth` module,
//! `authenticationEnabled` / `authorizationEnabled`): users and ACLs (`model.rs`), their
//! tables and changes (`tables.rs`), the AUTH_* bodies (`info.rs`), what each request
//! needs (`request.rs`), and the decision for one request ([`check`]).
//!
//! The decision, as Apache's chains (`DefaultAuthenticationHandler`, then
//! `UserAuthorizationHandler` and `AclAuthorizationHandler`), each step skipped for a code
//! in its whitelist:
//! 1. authentication: the `AccessKey` names an existing, enabled user and the
//!    `Signature` is the request's HmacSHA1 with that user's password (the 4.x
//!    `AclClientRPCHook` signature, `ringmq_client::remoting::acl`, compared in constant
//!    time);
//! 2. the AUTH_* codes (user and ACL administration) need a Super user while
//!    authentication is on (stricter than Apache, where a Normal user granted
//!    `Cluster` Update may administer: here only a Super user does);
//! 3. authorization, per resource the request needs: a Super user passes; else the
//!    user's entries that match the resource, one of the actions and the caller's
//!    address, `Custom` policy first (`Default` only when no custom entry matches),
//!    ordered most specific resource first — a literal name, then prefixes longest
//!    first, then `Type:*`, then `*` — and at the same specificity `Deny` first; the
//!    first entry decides; none matching refuses.
//!
//! Deny at equal specificity: Apache's comparator means it ("the decision deny has
//! higher priority") but its `1`/`-1` sort Deny last, so its code lets Allow win a tie.
//! RingMQ does what the comment says.
//!
//! Invariant: a decision never panics on any request and reads only the tables given.

pub mod info;
pub mod model;
pub mod request;
pub mod tables;

use crate::{Refusal, RefusalKind};
use model::{PolicyType, User, UserStatus, UserType};
use request::Need;
use ringmq_client::remoting::acl as sign;
use ringmq_client::remoting::command::RemotingCommand;
use std::net::IpAddr;
use tables::AuthTables;

/// Request codes a whitelist names at most (`authenticationWhitelist`,
/// `authorizationWhitelist`).
pub const WHITELIST_CODES_MAX: usize = 1024;

/// The switches of Apache's `AuthConfig` that decide a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    pub authentication_enabled: bool,
    pub authorization_enabled: bool,
    /// Codes exempt from authentication.
    pub authentication_whitelist: Vec<i32>,
    /// Codes exempt from authorization.
    pub authorization_whitelist: Vec<i32>,
    /// The broker's cluster: what a CLUSTER-typed code names.
    pub cluster_name: String,
}

impl AuthSettings {
    pub fn enabled(&self) -> bool {
        self.authentication_enabled || self.authorization_enabled
    }
}

/// Apache's whitelist form: request codes separated by commas (blanks around them
/// trimmed, empty pieces dropped). Stricter than Apache (which compares strings, so a
/// typo exempts nothing, silently): a piece that is not a number is refused.
pub fn parse_whitelist(text: &str) -> Result<Vec<i32>, String> {
    let mut out = Vec::new();
    for piece in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let code = piece.parse::<i32>().map_err(|_| format!("`{piece}` is not a request code (a number such as 34 for HEART_BEAT)"))?;
        if out.len() >= WHITELIST_CODES_MAX {
            return Err(format!("more than WHITELIST_CODES_MAX ({WHITELIST_CODES_MAX}) codes"));
        }
        if !out.contains(&code) {
            out.push(code);
        }
    }
    Ok(out)
}

fn refuse<T>(kind: RefusalKind, remark: String) -> Result<T, Refusal> {
    Err(Refusal { kind, remark })
}

/// Whether `cmd` from `remote` may run under `settings` and `tables` (`Ok` also when
/// both switches are off).
pub fn check(settings: &AuthSettings, tables: &AuthTables, cmd: &RemotingCommand, remote: Option<IpAddr>) -> Result<(), Refusal> {
    if settings.authentication_enabled && !settings.authentication_whitelist.contains(&cmd.code) {
        let user = authenticate(tables, cmd)?;
        if request::codes::ALL.contains(&cmd.code) && user.user_type != UserType::Super {
            return refuse(RefusalKind::NotAdmin, format!("User:{} is not a Super user: only a Super user may manage users and ACLs (request code {})", user.username, cmd.code));
        }
    }
    if settings.authorization_enabled && !settings.authorization_whitelist.contains(&cmd.code) {
        authorize(tables, &settings.cluster_name, cmd, remote)?;
    }
    Ok(())
}

/// Apache's `DefaultAuthenticationHandler`: the request's user, when it proves it is
/// that user.
pub fn authenticate<'t>(tables: &'t AuthTables, cmd: &RemotingCommand) -> Result<&'t User, Refusal> {
    let Some(username) = cmd.ext(sign::ACCESS_KEY).filter(|u| !u.is_empty()) else {
        return refuse(RefusalKind::NoAccessKey, "username cannot be null.".into());
    };
    let Some(user) = tables.user(username) else {
        return refuse(RefusalKind::UnknownAccessKey, format!("User:{username} is not found."));
    };
    if user.user_status == UserStatus::Disable {
        return refuse(RefusalKind::UserDisabled, format!("User:{username} is disabled."));
    }
    if !sign::signature_matches(cmd, &user.password) {
        return refuse(RefusalKind::BadSignature, "check signature failed.".into());
    }
    Ok(user)
}

/// Apache's `UserAuthorizationHandler` then `AclAuthorizationHandler`, for every
/// resource `cmd` needs (`request::needs`).
pub fn authorize(tables: &AuthTables, cluster: &str, cmd: &RemotingCommand, remote: Option<IpAddr>) -> Result<(), Refusal> {
    let needs = match request::needs(cmd, cluster) {
        Ok(n) => n,
        Err(e) => return refuse(RefusalKind::BadRequest, e),
    };
    if needs.is_empty() {
        return Ok(());
    }
    let Some(username) = cmd.ext(sign::ACCESS_KEY).filter(|u| !u.is_empty()) else {
        return refuse(RefusalKind::NoAccessKey, "Authorization failed. Please verify your access rights and try again. (the request names no user: no AccessKey)".into());
    };
    let Some(user) = tables.user(username) else {
        return refuse(RefusalKind::UnknownAccessKey, format!("User:{username} not found."));
    };
    if user.user_status == UserStatus::Disable {
        return refuse(RefusalKind::UserDisabled, format!("User:{username} is disabled."));
    }
    if user.user_type == UserType::Super {
        return Ok(());
    }
    for need in &needs {
        acl_decision(tables, username, need, remote)?;
    }
    Ok(())
}

/// Apache's `AclAuthorizationHandler.handle` for one resource (module docs: the order).
pub fn acl_decision(tables: &AuthTables, username: &str, need: &Need<'_>, remote: Option<IpAddr>) -> Result<(), Refusal> {
    let refused = |detail: &str| {
        let from = remote.map_or_else(|| "an unknown address".to_string(), |ip| ip.to_string());
        refuse(RefusalKind::NoPermission, format!("User:{username} has no permission to access {} from {from}, {detail}", need.key()))
    };
    let Some(acl) = tables.acl(username) else { return refused("no matched policies.") };
    let matching = |policy_type| {
        acl.policy(policy_type)
            .into_iter()
            .flat_map(|p| p.entries.iter())
            .filter(|e| e.resource.matches(need.resource_type, &need.name) && e.matches_actions(need.actions) && e.matches_source(remote))
            .min_by_key(|e| e.order_key())
    };
    match matching(PolicyType::Custom).or_else(|| matching(PolicyType::Default)) {
        None => refused("no matched policies."),
        Some(e) if e.decision == model::Decision::Deny => refused("the decision is deny."),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
