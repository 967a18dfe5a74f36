//! The users and ACLs a broker holds (`AuthTables`): the changes the AUTH_* request
//! codes make, with Apache's rules and messages (`AuthenticationMetadataManagerImpl`,
//! `AuthorizationMetadataManagerImpl`, `Local*MetadataProvider`), the list filters, and
//! the snapshot encoding (JSON: the same text is saved, replicated to the other shards
//! and sent to slaves).
//!
//! Invariants: at most `USERS_MAX` users and one ACL per user (an ACL's subject is an
//! existing user; deleting a user deletes its ACL); every change that changes something
//! raises `version` by one, a refused change changes nothing; `decode(encode(t)) == t`,
//! and `decode` checks a snapshot as strictly as the requests that built it, so a
//! damaged or hand-edited file is refused whole rather than half-loaded.

use super::info::{AclInfo, UserInfo};
use super::model::{self, Acl, ModelError, PolicyType, Resource, User, UserStatus, UserType};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Users one broker holds.
pub const USERS_MAX: usize = 10_000;
/// Largest snapshot decoded, bytes (`USERS_MAX` users each with a full ACL fit).
pub const AUTH_SNAPSHOT_BYTES_MAX: usize = 32 << 20;
/// The snapshot layout's version; a change of layout bumps it and keeps a decoder.
pub const AUTH_SNAPSHOT_FORMAT: u32 = 1;

/// Why a change was refused: Apache's message (answered as NO_PERMISSION, as Apache's
/// `handleAuthException` does) or a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TableError(pub String);

impl From<ModelError> for TableError {
    fn from(e: ModelError) -> Self {
        TableError(e.0)
    }
}

fn refuse<T>(reason: impl Into<String>) -> Result<T, TableError> {
    Err(TableError(reason.into()))
}

/// What an update of a user changes (Apache's `updateUser`: what is given replaces).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserUpdate {
    pub password: Option<String>,
    pub user_type: Option<UserType>,
    pub user_status: Option<UserStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthTables {
    /// Raised by every change; a replica takes a table only if it is not older.
    pub version: u64,
    users: BTreeMap<String, User>,
    /// By username (the subject `User:<name>`).
    acls: BTreeMap<String, Acl>,
}

/// The snapshot document.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Snapshot {
    format: u32,
    version: u64,
    users: Vec<UserInfo>,
    acls: Vec<AclInfo>,
}

impl AuthTables {
    pub fn user(&self, username: &str) -> Option<&User> {
        self.users.get(username)
    }

    pub fn acl(&self, username: &str) -> Option<&Acl> {
        self.acls.get(username)
    }

    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    pub fn acl_count(&self) -> usize {
        self.acls.len()
    }

    /// Apache's `createUser`: refused when the name is taken ("The user is existed").
    pub fn create_user(&mut self, user: User) -> Result<(), TableError> {
        model::check_username(&user.username)?;
        model::check_password(&user.password)?;
        if self.users.contains_key(&user.username) {
            return refuse("The user is existed");
        }
        if self.users.len() >= USERS_MAX {
            return refuse(format!("{USERS_MAX} users already: at most USERS_MAX"));
        }
        self.users.insert(user.username.clone(), user);
        self.version += 1;
        Ok(())
    }

    /// Apache's `updateUser`: refused for an unknown user ("The user is not exist"); a
    /// blank password leaves the old one.
    pub fn update_user(&mut self, username: &str, update: UserUpdate) -> Result<(), TableError> {
        let Some(old) = self.users.get(username) else { return refuse("The user is not exist") };
        let mut user = old.clone();
        if let Some(p) = update.password.filter(|p| !p.trim().is_empty()) {
            model::check_password(&p)?;
            user.password = p;
        }
        if let Some(t) = update.user_type {
            user.user_type = t;
        }
        if let Some(s) = update.user_status {
            user.user_status = s;
        }
        if &user != old {
            self.users.insert(username.to_string(), user);
            self.version += 1;
        }
        Ok(())
    }

    /// Apache's `deleteUser`: the user and its ACL; a user that is not there is no error.
    /// Returns whether anything was deleted.
    pub fn delete_user(&mut self, username: &str) -> bool {
        let gone = self.users.remove(username).is_some() | self.acls.remove(username).is_some();
        if gone {
            self.version += 1;
        }
        gone
    }

    /// Apache's `listUser`: users whose name contains `filter` (all for a blank one),
    /// by name.
    pub fn users(&self, filter: Option<&str>) -> Vec<&User> {
        let filter = filter.filter(|f| !f.trim().is_empty());
        self.users.values().filter(|u| filter.is_none_or(|f| u.username.contains(f))).collect()
    }

    /// Apache's `createAcl` and `updateAcl` (the same in Apache): the subject must be a
    /// user; its ACL is created, or merged with what it has (`Acl::update_policies`).
    pub fn put_acl(&mut self, acl: Acl) -> Result<(), TableError> {
        if !self.users.contains_key(&acl.username) {
            return refuse(format!("The subject of {} is not exist.", model::subject_key(&acl.username)));
        }
        let merged = match self.acls.get(&acl.username) {
            Some(old) => {
                let mut merged = old.clone();
                merged.update_policies(acl.policies);
                merged
            }
            None => acl,
        };
        if merged.entry_count() > model::POLICY_ENTRIES_MAX {
            return refuse(format!("{} would hold {} policy entries: at most POLICY_ENTRIES_MAX ({})", model::subject_key(&merged.username), merged.entry_count(), model::POLICY_ENTRIES_MAX));
        }
        if self.acls.get(&merged.username) != Some(&merged) {
            self.acls.insert(merged.username.clone(), merged);
            self.version += 1;
        }
        Ok(())
    }

    /// Apache's `deleteAcl(subject, policyType, resource)`: without a resource the whole
    /// ACL; with one, that entry of the policy of `policy_type` (Custom when not given);
    /// an ACL left without entries goes. Refused when the user or its ACL is not there.
    pub fn delete_acl(&mut self, username: &str, policy_type: Option<PolicyType>, resource: Option<&Resource>) -> Result<(), TableError> {
        if !self.users.contains_key(username) {
            return refuse("The subject is not exist.");
        }
        let Some(old) = self.acls.get(username) else { return refuse("The acl is not exist.") };
        let mut acl = old.clone();
        if let Some(resource) = resource {
            acl.delete_entry(policy_type.unwrap_or(PolicyType::Custom), resource);
        }
        if resource.is_none() || acl.policies.is_empty() {
            self.acls.remove(username);
            self.version += 1;
        } else if &acl != old {
            self.acls.insert(username.to_string(), acl);
            self.version += 1;
        }
        Ok(())
    }

    /// Apache's `listAcl`: ACLs whose subject key contains `subject_filter`; with a
    /// `resource_filter` (and a subject key that does not contain it), only entries
    /// whose resource key contains it, and only ACLs left with some.
    pub fn acls(&self, subject_filter: Option<&str>, resource_filter: Option<&str>) -> Vec<Acl> {
        let subject_filter = subject_filter.filter(|f| !f.trim().is_empty());
        let resource_filter = resource_filter.filter(|f| !f.trim().is_empty());
        let mut out = Vec::new();
        for acl in self.acls.values() {
            let key = model::subject_key(&acl.username);
            if subject_filter.is_some_and(|f| !key.contains(f)) {
                continue;
            }
            let mut acl = acl.clone();
            if let Some(f) = resource_filter.filter(|f| !key.contains(f)) {
                for policy in &mut acl.policies {
                    policy.entries.retain(|e| e.resource.key().contains(f));
                }
                acl.policies.retain(|p| !p.entries.is_empty());
            }
            if !acl.policies.is_empty() {
                out.push(acl);
            }
        }
        out
    }

    /// The snapshot of these tables (JSON, users and ACLs in name order).
    pub fn encode(&self) -> Vec<u8> {
        let snapshot = Snapshot {
            format: AUTH_SNAPSHOT_FORMAT,
            version: self.version,
            users: self.users.values().map(UserInfo::of).collect(),
            acls: self.acls.values().map(AclInfo::of).collect(),
        };
        super::info::encode(&snapshot)
    }

    /// Tables from a snapshot, checked whole: every user and ACL as a request would be,
    /// no name twice, every ACL's subject a user, the bounds.
    pub fn decode(bytes: &[u8]) -> Result<Self, TableError> {
        if bytes.len() > AUTH_SNAPSHOT_BYTES_MAX {
            return refuse(format!("auth snapshot of {} bytes: at most AUTH_SNAPSHOT_BYTES_MAX ({AUTH_SNAPSHOT_BYTES_MAX})", bytes.len()));
        }
        let snapshot: Snapshot = serde_json::from_slice(bytes).map_err(|e| TableError(format!("auth snapshot is not valid JSON of its layout: {e}")))?;
        if snapshot.format != AUTH_SNAPSHOT_FORMAT {
            return refuse(format!("auth snapshot layout {} is not known (this build reads {AUTH_SNAPSHOT_FORMAT})", snapshot.format));
        }
        if snapshot.users.len() > USERS_MAX {
            return refuse(format!("auth snapshot holds {} users: at most USERS_MAX ({USERS_MAX})", snapshot.users.len()));
        }
        let mut tables = AuthTables::default();
        for info in &snapshot.users {
            let user = info.to_new_user().map_err(|e| TableError(format!("auth snapshot: user {:?}: {e}", info.username)))?;
            if info.user_type.is_none() || info.user_status.is_none() {
                return refuse(format!("auth snapshot: user {:?} lacks its type or status", user.username));
            }
            tables.create_user(user).map_err(|e| TableError(format!("auth snapshot: {e}")))?;
        }
        for info in &snapshot.acls {
            let acl = info.to_acl(None).map_err(|e| TableError(format!("auth snapshot: ACL {:?}: {e}", info.subject)))?;
            if tables.acls.contains_key(&acl.username) {
                return refuse(format!("auth snapshot: two ACLs for {}", model::subject_key(&acl.username)));
            }
            tables.put_acl(acl).map_err(|e| TableError(format!("auth snapshot: {e}")))?;
        }
        tables.version = snapshot.version;
        Ok(tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::info::AclInfo;

    fn user(name: &str, t: UserType) -> User {
        User { username: name.into(), password: format!("{name}-password"), user_type: t, user_status: UserStatus::Enable }
    }

    fn acl(json: &str) -> Acl {
        AclInfo::decode(json.as_bytes()).unwrap().to_acl(None).unwrap()
    }

    /// The ACL of `name` written back as JSON, or "none".
    fn shown(t: &AuthTables, name: &str) -> String {
        t.acl(name).map_or("none".into(), |a| String::from_utf8(crate::auth::info::encode(&AclInfo::of(a))).unwrap())
    }

    #[test]
    fn users_change_as_apache() {
        let mut t = AuthTables::default();
        assert_eq!(t.create_user(user("alice", UserType::Normal)), Ok(()));
        assert_eq!(t.create_user(user("alice", UserType::Super)), Err(TableError("The user is existed".into())));
        assert_eq!(t.version, 1, "a refused change changes nothing");
        assert_eq!(t.update_user("bob", UserUpdate::default()), Err(TableError("The user is not exist".into())));
        // A blank password keeps the old one; type and status replace.
        t.update_user("alice", UserUpdate { password: Some(" ".into()), user_type: Some(UserType::Super), user_status: Some(UserStatus::Disable) }).unwrap();
        let a = t.user("alice").unwrap();
        assert_eq!((a.password.as_str(), a.user_type, a.user_status), ("alice-password", UserType::Super, UserStatus::Disable));
        assert_eq!(t.version, 2);
        t.update_user("alice", UserUpdate::default()).unwrap();
        assert_eq!(t.version, 2, "an update that changes nothing keeps the version");
        t.create_user(user("albert", UserType::Normal)).unwrap();
        t.create_user(user("bob", UserType::Normal)).unwrap();
        let names = |f: Option<&str>| t.users(f).iter().map(|u| u.username.clone()).collect::<Vec<_>>();
        assert_eq!(names(None), ["albert", "alice", "bob"]);
        assert_eq!(names(Some("al")), ["albert", "alice"]);
        assert_eq!(names(Some(" ")), ["albert", "alice", "bob"]);
        t.put_acl(acl(r#"{"subject":"User:bob","policies":[{"entries":[{"resource":"Topic:t","actions":["Pub"],"decision":"Allow"}]}]}"#)).unwrap();
        assert!(t.delete_user("bob"));
        assert_eq!((t.user("bob"), t.acl("bob")), (None, None), "the user's ACL goes with it");
        assert!(!t.delete_user("bob"), "deleting a missing user is no error and no change");
    }

    #[test]
    fn acls_change_as_apache() {
        let mut t = AuthTables::default();
        let a1 = r#"{"subject":"User:u","policies":[{"entries":[{"resource":"Topic:a","actions":["Pub"],"decision":"Allow"},{"resource":"Topic:b","actions":["Sub"],"decision":"Allow"}]}]}"#;
        assert_eq!(t.put_acl(acl(a1)), Err(TableError("The subject of User:u is not exist.".into())));
        t.create_user(user("u", UserType::Normal)).unwrap();
        t.put_acl(acl(a1)).unwrap();
        // A second create merges: Topic:a replaced, a Default policy added.
        t.put_acl(acl(r#"{"subject":"User:u","policies":[{"entries":[{"resource":"Topic:a","actions":["Sub"],"decision":"Deny"}]},{"policyType":"Default","entries":[{"resource":"*","actions":["All"],"decision":"Allow"}]}]}"#)).unwrap();
        assert_eq!(
            shown(&t, "u"),
            r#"{"policies":[{"entries":[{"actions":["Sub"],"decision":"Deny","resource":"Topic:a"},{"actions":["Sub"],"decision":"Allow","resource":"Topic:b"}],"policyType":"Custom"},{"entries":[{"actions":["All"],"decision":"Allow","resource":"*"}],"policyType":"Default"}],"subject":"User:u"}"#
        );
        let listed = |s: Option<&str>, r: Option<&str>| t.acls(s, r).iter().map(|a| String::from_utf8(crate::auth::info::encode(&AclInfo::of(a))).unwrap()).collect::<Vec<_>>();
        assert_eq!(listed(Some("User:x"), None).len(), 0);
        assert_eq!(listed(Some("u"), Some("Topic:b")), [r#"{"policies":[{"entries":[{"actions":["Sub"],"decision":"Allow","resource":"Topic:b"}],"policyType":"Custom"}],"subject":"User:u"}"#]);
        assert_eq!(listed(None, Some("Group:")).len(), 0, "no entry matches: the ACL is left out");
        // Deleting one entry, then the wrong policy type, then the whole ACL.
        let topic_a = Resource::parse("Topic:a").unwrap();
        t.delete_acl("u", None, Some(&topic_a)).unwrap();
        assert!(!shown(&t, "u").contains("Topic:a"));
        let v = t.version;
        t.delete_acl("u", Some(PolicyType::Default), Some(&Resource::parse("Topic:b").unwrap())).unwrap();
        assert_eq!(t.version, v, "no such entry in the Default policy: nothing changes");
        t.delete_acl("u", Some(PolicyType::Default), Some(&Resource::parse("*").unwrap())).unwrap();
        assert!(!shown(&t, "u").contains("Default"), "an emptied policy goes");
        t.delete_acl("u", None, Some(&Resource::parse("Topic:b").unwrap())).unwrap();
        assert_eq!(shown(&t, "u"), "none", "an ACL left without entries goes");
        assert_eq!(t.delete_acl("u", None, None), Err(TableError("The acl is not exist.".into())));
        assert_eq!(t.delete_acl("nobody", None, None), Err(TableError("The subject is not exist.".into())));
    }

    #[test]
    fn bounds_are_kept() {
        let mut t = AuthTables::default();
        t.create_user(user("u", UserType::Normal)).unwrap();
        let entries: Vec<String> = (0..model::POLICY_ENTRIES_MAX).map(|i| format!(r#"{{"resource":"Topic:t{i}","actions":["Pub"],"decision":"Allow"}}"#)).collect();
        t.put_acl(acl(&format!(r#"{{"subject":"User:u","policies":[{{"entries":[{}]}}]}}"#, entries.join(",")))).unwrap();
        let more = acl(r#"{"subject":"User:u","policies":[{"entries":[{"resource":"Topic:one-more","actions":["Pub"],"decision":"Allow"}]}]}"#);
        assert!(t.put_acl(more).unwrap_err().0.contains("POLICY_ENTRIES_MAX"));
        for i in 1..USERS_MAX {
            t.create_user(user(&format!("u{i}"), UserType::Normal)).unwrap();
        }
        assert!(t.create_user(user("too-many", UserType::Normal)).unwrap_err().0.contains("USERS_MAX"));
    }

    #[test]
    fn snapshots_refuse_what_requests_refuse() {
        let check = |text: &str, want: &str| {
            let e = AuthTables::decode(text.as_bytes()).unwrap_err();
            assert!(e.0.contains(want), "{text}: {e} lacks {want}");
        };
        let u = r#"{"username":"u","password":"p","userType":"Normal","userStatus":"enable"}"#;
        check("", "not valid JSON");
        check(r#"{"format":2,"version":1,"users":[],"acls":[]}"#, "layout 2 is not known");
        check(r#"{"format":1,"version":1,"users":[],"acls":[],"more":1}"#, "unknown field");
        check(&format!(r#"{{"format":1,"version":1,"users":[{u},{u}],"acls":[]}}"#), "The user is existed");
        check(r#"{"format":1,"version":1,"users":[{"username":"u","password":"p"}],"acls":[]}"#, "lacks its type or status");
        check(r#"{"format":1,"version":1,"users":[],"acls":[{"subject":"User:u","policies":[{"entries":[{"resource":"*","actions":["Pub"],"decision":"Allow"}]}]}]}"#, "The subject of User:u is not exist.");
        let a = r#"{"subject":"User:u","policies":[{"entries":[{"resource":"*","actions":["Pub"],"decision":"Allow"}]}]}"#;
        check(&format!(r#"{{"format":1,"version":1,"users":[{u}],"acls":[{a},{a}]}}"#), "two ACLs");
        let ok = AuthTables::decode(format!(r#"{{"format":1,"version":7,"users":[{u}],"acls":[{a}]}}"#).as_bytes()).unwrap();
        assert_eq!((ok.version, ok.user_count(), ok.acl_count()), (7, 1, 1));
    }
}
