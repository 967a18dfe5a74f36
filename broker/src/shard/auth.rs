//! The shard's RocketMQ 5 users and ACLs (`authenticationEnabled` /
//! `authorizationEnabled`; rules in `ringmq_acl::auth`): this shard's replica of the
//! tables, the check of every client request where it enters the shard, and the AUTH_*
//! request codes (Apache's `AdminBrokerProcessor` createUser … listAcl).
//!
//! Ownership, as the topic and group tables: the metadata owner loads the snapshot
//! (`authMetadata` under `<store>/config`, through the IO seam), makes the initial Super
//! users (`initAuthenticationUser`, `innerClientAuthenticationCredentials`) on a master,
//! and is the one writer: a change is read, modified, saved and installed under the
//! metadata lock, then sent to every shard (`ShardEvent::Auth`) before it is answered,
//! so every shard checks requests against its own copy. A slave takes its master's
//! tables (HA `META` kind `Auth`) and refuses AUTH_* changes.
//!
//! Invariants: with both switches off the request path pays one branch on config flags
//! (`Shard::handle`); a snapshot that exists but does not load fails the start (a
//! missing table would let `initAuthenticationUser` start over with one user, silently);
//! refusals are counted and logged as the plain ACL's (`acl.rs`, `ringmq_acl_refusals`);
//! a password is never logged.

use super::mesh::ShardEvent;
use super::{error_response, ConnCtx, OpenError, Shard};
use crate::routing::META_OWNER_SHARD;
use ringmq_acl::auth::info::{self, AclInfo, UserInfo};
use ringmq_acl::auth::model::{self, PolicyType, Resource, User, UserStatus, UserType};
use ringmq_acl::auth::request::codes;
use ringmq_acl::auth::tables::{AuthTables, TableError, UserUpdate};
use ringmq_acl::auth::{self as rules, AuthSettings};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::RefCell;
use std::rc::Rc;

/// The snapshot name of the users and ACLs (under `<store>/config`).
pub const AUTH_SNAPSHOT: &str = "authMetadata";

/// One shard's users and ACLs and the switches that use them.
#[derive(Default)]
pub struct ShardAuth {
    tables: RefCell<Rc<AuthTables>>,
    settings: RefCell<Rc<AuthSettings>>,
}

impl ShardAuth {
    pub fn tables(&self) -> Rc<AuthTables> {
        self.tables.borrow().clone()
    }

    fn install(&self, tables: AuthTables) {
        *self.tables.borrow_mut() = Rc::new(tables);
    }
}

impl<R: crate::rt::Runtime> Shard<R> {
    /// At open: the switches on every shard; on the metadata owner the snapshot, the
    /// initial Super users (a master's) and the first broadcast.
    pub(super) async fn open_auth(self: &Rc<Self>) -> Result<(), OpenError> {
        let config = self.config();
        let fail = |what: &'static str, reason: String| OpenError::Meta { shard: self.place.id, what, reason };
        let settings = config.auth_settings().map_err(|e| fail("auth settings", e))?;
        *self.clients.auth.settings.borrow_mut() = Rc::new(settings);
        let Some(meta) = &self.meta.stores else { return Ok(()) };
        let mut tables = match meta.auth.load_strict().await {
            Ok(Some(bytes)) => AuthTables::decode(&bytes).map_err(|e| fail("users and ACLs (authMetadata)", format!("{e} (fix or remove <store>/config/{AUTH_SNAPSHOT}.*)")))?,
            Ok(None) => AuthTables::default(),
            Err(e) => return Err(fail("users and ACLs (authMetadata)", e.to_string())),
        };
        if config.role.is_master() {
            let mut initial = Vec::new();
            if let Some((username, password)) = config.init_auth_user().map_err(|e| fail("initAuthenticationUser", e))? {
                initial.push((username, password, "initAuthenticationUser"));
            }
            if let Some(c) = config.inner_credentials().map_err(|e| fail("innerClientAuthenticationCredentials", e))? {
                initial.push((c.access_key, c.secret_key, "innerClientAuthenticationCredentials"));
            }
            let before = tables.version;
            for (username, password, key) in initial {
                // Apache's `initUser`: created when absent, a user of that name kept as it is.
                if tables.user(&username).is_none() {
                    tables.create_user(User { username: username.clone(), password, user_type: UserType::Super, user_status: UserStatus::Enable }).map_err(|e| fail("initial user", e.to_string()))?;
                    tracing::info!(user = %username, from = key, "Super user created at start-up");
                }
            }
            if tables.version != before {
                meta.auth.save(&tables.encode()).await.map_err(|e| fail("users and ACLs (authMetadata)", e.to_string()))?;
            }
        }
        let s = self.clients.auth.settings.borrow().clone();
        if s.enabled() {
            tracing::info!(authentication = s.authentication_enabled, authorization = s.authorization_enabled, users = tables.user_count(), acls = tables.acl_count(), "RocketMQ 5 auth on");
            if tables.user_count() == 0 && config.role.is_master() {
                tracing::warn!("authentication or authorization is on but there are no users: set initAuthenticationUser to create the first Super user");
            }
        }
        let encoded = tables.encode();
        self.clients.auth.install(tables);
        self.mesh.broadcast(ShardEvent::Auth { encoded });
        Ok(())
    }

    /// A shard installs the tables the metadata owner sent.
    pub(super) fn apply_auth_event(&self, encoded: &[u8]) {
        match AuthTables::decode(encoded) {
            Ok(tables) => self.clients.auth.install(tables),
            Err(e) => crate::fatal::fatal(&format!("users and ACLs replica does not decode: {e}")),
        }
    }

    /// The answer refusing `cmd`, when RocketMQ 5's checks refuse it (called only with
    /// a switch on, for a request that arrived on this shard's socket).
    pub(super) fn auth_refusal(&self, cmd: &RemotingCommand, ctx: ConnCtx) -> Option<RemotingCommand> {
        let settings = self.clients.auth.settings.borrow().clone();
        let tables = self.clients.auth.tables();
        let refusal = rules::check(&settings, &tables, cmd, ctx.remote.map(|a| a.ip())).err()?;
        Some(self.refused(cmd, ctx, refusal))
    }

    /// The version of the users and ACLs to replicate (metadata owner): `None` until
    /// anything was ever made, so a slave of an older build keeps working with a master
    /// that has none. Cheap: the replication loop asks before every DATA frame.
    pub(super) fn auth_version(&self) -> Option<u64> {
        let version = self.clients.auth.tables.borrow().version;
        (self.meta.stores.is_some() && version > 0).then_some(version)
    }

    /// The snapshot to replicate, when `auth_version` has one.
    pub(super) fn auth_snapshot(&self) -> Option<Vec<u8>> {
        self.auth_version().map(|_| self.clients.auth.tables().encode())
    }

    /// A slave's metadata owner installs its master's tables: saved, then sent to every
    /// shard.
    pub(super) async fn apply_replicated_auth(self: &Rc<Self>, payload: &[u8]) -> Result<(), String> {
        let tables = AuthTables::decode(payload).map_err(|e| e.to_string())?;
        let Some(meta) = &self.meta.stores else { return Err("users and ACLs sent to a shard that does not own metadata".into()) };
        let _writer = meta.lock.lock().map_err(|e| e.to_string())?.await;
        meta.auth.save(payload).await.map_err(|e| e.to_string())?;
        self.clients.auth.install(tables);
        self.mesh.broadcast_and_wait(ShardEvent::Auth { encoded: payload.to_vec() }).await;
        Ok(())
    }

    /// The one writer of the users and ACLs (metadata owner): `change` edits a copy under
    /// the metadata lock; a changed copy is saved, installed and sent to every shard
    /// before the answer. A refusal is NO_PERMISSION with Apache's message (Apache's
    /// `handleAuthException`).
    async fn change_auth(self: &Rc<Self>, cmd: &RemotingCommand, what: &str, change: impl FnOnce(&mut AuthTables) -> Result<(), TableError>) -> RemotingCommand {
        let Some(meta) = &self.meta.stores else {
            crate::fatal::fatal(&format!("users and ACLs change routed to shard {}, not the metadata owner", self.place.id));
        };
        let _writer = match meta.lock.lock() {
            Ok(wait) => wait.await,
            Err(e) => return error_response(cmd, rs::SYSTEM_BUSY, format!("users and ACLs: {e}")),
        };
        let mut tables = (*self.clients.auth.tables()).clone();
        let before = tables.version;
        if let Err(e) = change(&mut tables) {
            tracing::info!(request = cmd.code, what, reason = %e, caller = super::admin::caller_of(cmd), "users and ACLs change refused");
            return error_response(cmd, rs::NO_PERMISSION, e.0);
        }
        if tables.version != before {
            let encoded = tables.encode();
            if let Err(e) = meta.auth.save(&encoded).await {
                return error_response(cmd, rs::SYSTEM_ERROR, format!("users and ACLs could not be saved: {e}"));
            }
            self.clients.auth.install(tables);
            self.mesh.broadcast_and_wait(ShardEvent::Auth { encoded }).await;
            tracing::info!(request = cmd.code, what, caller = super::admin::caller_of(cmd), "users and ACLs changed");
        }
        cmd.create_response(rs::SUCCESS, None)
    }

    /// AUTH_* codes: changes on the metadata owner (routed there), reads from this
    /// shard's copy.
    pub(super) async fn handle_auth(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let invalid = |remark: String| error_response(cmd, rs::INVALID_PARAMETER, remark);
        let header = |key: &str| cmd.ext(key).map(str::trim).filter(|v| !v.is_empty());
        // Apache's `isNotSuperUserLogin`: a request naming a user (`AccessKey`) that is not
        // a Super user may not make, change or delete a Super user. With authentication on
        // only Super users get here (`rules::check`); this is the rule without it.
        let caller = cmd.ext(ringmq_client::remoting::acl::ACCESS_KEY).filter(|a| !a.is_empty()).map(str::to_string);
        let not_super = move |t: &AuthTables| caller.as_deref().is_some_and(|a| t.user(a).is_none_or(|u| u.user_type != UserType::Super));
        match cmd.code {
            codes::AUTH_CREATE_USER | codes::AUTH_UPDATE_USER => {
                let Some(username) = header("username") else { return invalid("The username is blank".into()) };
                let mut body = match UserInfo::decode(&cmd.body) {
                    Ok(b) => b,
                    Err(e) => return invalid(e.to_string()),
                };
                // Apache: the header's name wins over the body's.
                body.username = Some(username.to_string());
                if cmd.code == codes::AUTH_CREATE_USER {
                    let user = match body.to_new_user() {
                        Ok(u) => u,
                        Err(e) => return invalid(e.to_string()),
                    };
                    if user.user_type == UserType::Super && not_super(&self.clients.auth.tables()) {
                        return error_response(cmd, rs::SYSTEM_ERROR, "The super user can only be create by super user");
                    }
                    return self.change_auth(cmd, "create user", |t| t.create_user(user)).await;
                }
                let update = match (body.parsed_type(), body.parsed_status()) {
                    (Ok(user_type), Ok(user_status)) => UserUpdate { password: body.password.clone(), user_type, user_status },
                    (Err(e), _) | (_, Err(e)) => return invalid(e.to_string()),
                };
                if update.user_type == Some(UserType::Super) && not_super(&self.clients.auth.tables()) {
                    return error_response(cmd, rs::SYSTEM_ERROR, "The super user can only be update by super user");
                }
                self.change_auth(cmd, "update user", |t| {
                    if t.user(username).is_some_and(|u| u.user_type == UserType::Super) && not_super(t) {
                        return Err(TableError("The super user can only be update by super user".into()));
                    }
                    t.update_user(username, update)
                })
                .await
            }
            codes::AUTH_DELETE_USER => {
                let Some(username) = header("username") else { return error_response(cmd, rs::NO_PERMISSION, "username can not be blank") };
                let username = username.to_string();
                self.change_auth(cmd, "delete user", move |t| {
                    if t.user(&username).is_some_and(|u| u.user_type == UserType::Super) && not_super(t) {
                        return Err(TableError("The super user can only be update by super user".into()));
                    }
                    t.delete_user(&username);
                    Ok(())
                })
                .await
            }
            codes::AUTH_GET_USER => {
                let Some(username) = header("username") else { return invalid("The username is blank".into()) };
                let mut r = cmd.create_response(rs::SUCCESS, None);
                if let Some(user) = self.clients.auth.tables().user(username) {
                    r.body = info::encode(&UserInfo::of(user)).into();
                }
                r
            }
            codes::AUTH_LIST_USER => {
                let tables = self.clients.auth.tables();
                let users: Vec<UserInfo> = tables.users(cmd.ext("filter")).into_iter().map(UserInfo::of).collect();
                let mut r = cmd.create_response(rs::SUCCESS, None);
                if !users.is_empty() {
                    r.body = info::encode(&users).into();
                }
                r
            }
            codes::AUTH_CREATE_ACL | codes::AUTH_UPDATE_ACL => {
                let body = match AclInfo::decode(&cmd.body) {
                    Ok(b) => b,
                    Err(e) => return invalid(e.to_string()),
                };
                let acl = match body.to_acl(header("subject")) {
                    Ok(a) => a,
                    Err(e) => return invalid(e.to_string()),
                };
                self.change_auth(cmd, "create or update ACL", |t| t.put_acl(acl)).await
            }
            codes::AUTH_DELETE_ACL => {
                let username = match model::parse_subject(header("subject").unwrap_or_default()) {
                    Ok(u) => u,
                    Err(e) => return invalid(e.to_string()),
                };
                let policy_type = match header("policyType").map(|p| PolicyType::parse(p).ok_or(p)) {
                    None => None,
                    Some(Ok(p)) => Some(p),
                    Some(Err(p)) => return invalid(format!("policyType `{p}` is unknown (known: Custom, Default)")),
                };
                let resource = match header("resource").map(Resource::parse) {
                    None => None,
                    Some(Ok(r)) => Some(r),
                    Some(Err(e)) => return invalid(e.to_string()),
                };
                self.change_auth(cmd, "delete ACL", |t| t.delete_acl(&username, policy_type, resource.as_ref())).await
            }
            codes::AUTH_GET_ACL => {
                let username = match model::parse_subject(header("subject").unwrap_or_default()) {
                    Ok(u) => u,
                    Err(e) => return invalid(e.to_string()),
                };
                let tables = self.clients.auth.tables();
                if tables.user(&username).is_none() {
                    return error_response(cmd, rs::NO_PERMISSION, "The subject is not exist.");
                }
                let mut r = cmd.create_response(rs::SUCCESS, None);
                if let Some(acl) = tables.acl(&username) {
                    r.body = info::encode(&AclInfo::of(acl)).into();
                }
                r
            }
            codes::AUTH_LIST_ACL => {
                let tables = self.clients.auth.tables();
                let acls: Vec<AclInfo> = tables.acls(cmd.ext("subjectFilter"), cmd.ext("resourceFilter")).iter().map(AclInfo::of).collect();
                let mut r = cmd.create_response(rs::SUCCESS, None);
                if !acls.is_empty() {
                    r.body = info::encode(&acls).into();
                }
                r
            }
            code => error_response(cmd, rs::REQUEST_CODE_NOT_SUPPORTED, format!("request code {code} not supported")),
        }
    }
}

/// Where an AUTH_* code runs: changes on the metadata owner, reads where they arrive.
pub(super) fn auth_route(code: i32) -> Option<usize> {
    codes::CHANGES.contains(&code).then_some(META_OWNER_SHARD)
}
