//! RocketMQ 5's user and ACL subcommands (mqadmin's `tools/command/auth`): createUser,
//! updateUser, deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl,
//! listAcl, over the AUTH_* request codes with Apache's headers and JSON bodies
//! (`ringmq_acl::auth::info`). Names, flags and messages are mqadmin's; sign with
//! `--accessKey`/`--secretKey` as a Super user when the broker has authentication on.
//!
//! With `-c`, changes go to every master of the cluster (mqadmin also sends them to the
//! slaves; RingMQ's slaves take their master's users and ACLs and refuse changes) and
//! reads to the cluster's masters, as mqadmin's.
//!
//! Invariant: a command with neither or both of `-b` / `-c` is refused before any
//! request (`commands::targets`).

use crate::commands::{call, render, table, targets, Common, Outcome};
use clap::Subcommand;
use ringmq_acl::auth::info::{encode, AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
use ringmq_client::instance::ClientInstance;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use serde_json::json;
use std::rc::Rc;

#[derive(Subcommand, Debug)]
#[allow(non_camel_case_types)]
#[command(rename_all = "verbatim")]
pub enum AuthCommand {
    /// Create a user on a broker (-b) or every master of a cluster (-c).
    createUser {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'u', long = "username")]
        username: String,
        #[arg(short = 'p', long = "password")]
        password: String,
        /// Super or Normal (Normal when left out).
        #[arg(short = 't', long = "userType")]
        user_type: Option<String>,
    },
    /// Change a user's password, type or status (what is given).
    updateUser {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'u', long = "username")]
        username: String,
        #[arg(short = 'p', long = "password")]
        password: Option<String>,
        #[arg(short = 't', long = "userType")]
        user_type: Option<String>,
        /// enable or disable.
        #[arg(short = 's', long = "userStatus")]
        user_status: Option<String>,
    },
    /// Delete a user (and its ACL).
    deleteUser {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'u', long = "username")]
        username: String,
    },
    /// Print a user.
    getUser {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'u', long = "username")]
        username: String,
    },
    /// Print the users whose name contains the filter (all without one).
    listUser {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'f', long = "filter")]
        filter: Option<String>,
    },
    /// Create a subject's ACL entries (merged into an existing ACL, as Apache).
    createAcl {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        acl: AclArgs,
    },
    /// Update a subject's ACL entries (the same merge as createAcl, as Apache).
    updateAcl {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        acl: AclArgs,
    },
    /// Delete a subject's ACL, or one resource's entry of it (-r).
    deleteAcl {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        /// User:<name>.
        #[arg(short = 's', long = "subject")]
        subject: String,
        #[arg(short = 'r', long = "resources")]
        resource: Option<String>,
    },
    /// Print a subject's ACL.
    getAcl {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 's', long = "subject")]
        subject: String,
    },
    /// Print the ACLs whose subject contains -s, only entries whose resource contains -r.
    listAcl {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 's', long = "subject")]
        subject: Option<String>,
        #[arg(short = 'r', long = "resource")]
        resource: Option<String>,
    },
}

/// createAcl's and updateAcl's flags (mqadmin's).
#[derive(clap::Args, Debug, Clone)]
pub struct AclArgs {
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// User:<name>.
    #[arg(short = 's', long = "subject")]
    subject: String,
    /// Comma-separated: `*`, `Topic:*`, `Topic:prefix*`, `Topic:name`, `Group:..`, `Cluster:..`.
    #[arg(short = 'r', long = "resources")]
    resources: String,
    /// Comma-separated: All, Pub, Sub, Create, Update, Delete, Get, List.
    #[arg(short = 'a', long = "actions")]
    actions: String,
    /// Comma-separated addresses or CIDRs (any address when left out).
    #[arg(short = 'i', long = "sourceIp")]
    source_ip: Option<String>,
    /// Allow or Deny.
    #[arg(short = 'd', long = "decision")]
    decision: String,
}

impl AuthCommand {
    pub fn common(&self) -> &Common {
        match self {
            Self::createUser { common, .. }
            | Self::updateUser { common, .. }
            | Self::deleteUser { common, .. }
            | Self::getUser { common, .. }
            | Self::listUser { common, .. }
            | Self::createAcl { common, .. }
            | Self::updateAcl { common, .. }
            | Self::deleteAcl { common, .. }
            | Self::getAcl { common, .. }
            | Self::listAcl { common, .. } => common,
        }
    }
}

/// Apache's `StringUtils.split(text, ',')` with each piece trimmed: empty pieces dropped.
fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// Sends `cmd` to each target, printing mqadmin's "`verb` to `addr` success." lines.
async fn change(instance: &Rc<ClientInstance>, json: bool, verb: &str, targets: Vec<String>, cmd: impl Fn() -> RemotingCommand) -> Outcome {
    let mut done = Vec::new();
    for addr in targets {
        call(instance, &addr, cmd()).await?;
        done.push(addr);
    }
    let text = done.iter().map(|a| format!("{verb} to {a} success.\n")).collect::<String>();
    render(json, json!({ "brokers": done }), text)
}

/// Users as mqadmin prints them (its password column included, as Apache's tool does).
fn users_table(users: &[(String, UserInfo)]) -> String {
    let rows: Vec<Vec<String>> = users
        .iter()
        .map(|(_, u)| [&u.username, &u.password, &u.user_type, &u.user_status].iter().map(|v| v.as_deref().unwrap_or_default().to_string()).collect())
        .collect();
    table(&["#UserName", "#Password", "#UserType", "#UserStatus"], &rows)
}

fn users_json(users: &[(String, UserInfo)]) -> serde_json::Value {
    json!(users.iter().map(|(addr, u)| json!({"broker": addr, "username": u.username, "password": u.password, "userType": u.user_type, "userStatus": u.user_status})).collect::<Vec<_>>())
}

/// ACLs as mqadmin prints them: one line per entry (a subject without entries on its own).
fn acls_table(acls: &[(String, AclInfo)]) -> String {
    let mut rows = Vec::new();
    for (_, acl) in acls {
        let subject = acl.subject.clone().unwrap_or_default();
        let policies = acl.policies.as_deref().unwrap_or_default();
        if policies.is_empty() {
            rows.push(vec![subject.clone(), String::new(), String::new(), String::new(), String::new(), String::new()]);
        }
        for p in policies {
            for e in p.entries.as_deref().unwrap_or_default() {
                let joined = |v: &Option<Vec<String>>| v.as_deref().unwrap_or_default().join(",");
                rows.push(vec![subject.clone(), p.policy_type.clone().unwrap_or_default(), e.resource.clone().unwrap_or_default(), joined(&e.actions), joined(&e.source_ips), e.decision.clone().unwrap_or_default()]);
            }
        }
    }
    table(&["#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"], &rows)
}

pub async fn run(instance: &Rc<ClientInstance>, json: bool, command: AuthCommand) -> Outcome {
    match command {
        AuthCommand::createUser { broker, cluster, username, password, user_type, .. } => {
            let info = UserInfo { username: Some(username.clone()), password: Some(password), user_type, user_status: None };
            let to = targets(instance, &broker, &cluster).await?;
            change(instance, json, "create user", to, || RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", username.clone()).with_body(encode(&info))).await
        }
        AuthCommand::updateUser { broker, cluster, username, password, user_type, user_status, .. } => {
            let info = UserInfo { username: Some(username.clone()), password, user_type, user_status };
            let to = targets(instance, &broker, &cluster).await?;
            change(instance, json, "update user", to, || RemotingCommand::request(rq::AUTH_UPDATE_USER).with_ext("username", username.clone()).with_body(encode(&info))).await
        }
        AuthCommand::deleteUser { broker, cluster, username, .. } => {
            let to = targets(instance, &broker, &cluster).await?;
            change(instance, json, "delete user", to, || RemotingCommand::request(rq::AUTH_DELETE_USER).with_ext("username", username.clone())).await
        }
        AuthCommand::getUser { broker, cluster, username, .. } => {
            let mut users = Vec::new();
            for addr in targets(instance, &broker, &cluster).await? {
                let r = call(instance, &addr, RemotingCommand::request(rq::AUTH_GET_USER).with_ext("username", username.clone())).await?;
                if !r.body.is_empty() {
                    users.push((addr.clone(), UserInfo::decode(&r.body).map_err(|e| format!("{addr}: {e}"))?));
                }
            }
            if users.is_empty() {
                return Err(format!("user {username} not found"));
            }
            render(json, users_json(&users), users_table(&users))
        }
        AuthCommand::listUser { broker, cluster, filter, .. } => {
            let mut users = Vec::new();
            for addr in targets(instance, &broker, &cluster).await? {
                let mut cmd = RemotingCommand::request(rq::AUTH_LIST_USER);
                if let Some(f) = &filter {
                    cmd = cmd.with_ext("filter", f.clone());
                }
                let r = call(instance, &addr, cmd).await?;
                if !r.body.is_empty() {
                    users.extend(UserInfo::decode_list(&r.body).map_err(|e| format!("{addr}: {e}"))?.into_iter().map(|u| (addr.clone(), u)));
                }
            }
            render(json, users_json(&users), users_table(&users))
        }
        AuthCommand::createAcl { acl, .. } => put_acl(instance, json, "create acl", rq::AUTH_CREATE_ACL, acl).await,
        AuthCommand::updateAcl { acl, .. } => put_acl(instance, json, "update acl", rq::AUTH_UPDATE_ACL, acl).await,
        AuthCommand::deleteAcl { broker, cluster, subject, resource, .. } => {
            let to = targets(instance, &broker, &cluster).await?;
            change(instance, json, "delete acl", to, || {
                let cmd = RemotingCommand::request(rq::AUTH_DELETE_ACL).with_ext("subject", subject.clone());
                match &resource {
                    Some(r) => cmd.with_ext("resource", r.trim()),
                    None => cmd,
                }
            })
            .await
        }
        AuthCommand::getAcl { broker, cluster, subject, .. } => {
            let mut acls = Vec::new();
            for addr in targets(instance, &broker, &cluster).await? {
                let r = call(instance, &addr, RemotingCommand::request(rq::AUTH_GET_ACL).with_ext("subject", subject.clone())).await?;
                if !r.body.is_empty() {
                    acls.push((addr.clone(), AclInfo::decode(&r.body).map_err(|e| format!("{addr}: {e}"))?));
                }
            }
            render(json, json!(acls.iter().map(|(a, acl)| json!({"broker": a, "acl": acl})).collect::<Vec<_>>()), acls_table(&acls))
        }
        AuthCommand::listAcl { broker, cluster, subject, resource, .. } => {
            let mut acls = Vec::new();
            for addr in targets(instance, &broker, &cluster).await? {
                let mut cmd = RemotingCommand::request(rq::AUTH_LIST_ACL);
                if let Some(s) = &subject {
                    cmd = cmd.with_ext("subjectFilter", s.clone());
                }
                if let Some(r) = &resource {
                    cmd = cmd.with_ext("resourceFilter", r.clone());
                }
                let r = call(instance, &addr, cmd).await?;
                if !r.body.is_empty() {
                    acls.extend(AclInfo::decode_list(&r.body).map_err(|e| format!("{addr}: {e}"))?.into_iter().map(|a| (addr.clone(), a)));
                }
            }
            render(json, json!(acls.iter().map(|(a, acl)| json!({"broker": a, "acl": acl})).collect::<Vec<_>>()), acls_table(&acls))
        }
    }
}

/// createAcl / updateAcl: one Custom policy of one entry per resource, as mqadmin's
/// `AclInfo.of(subject, resources, actions, sourceIps, decision)`.
async fn put_acl(instance: &Rc<ClientInstance>, json: bool, verb: &str, code: i32, a: AclArgs) -> Outcome {
    let (actions, source_ips) = (list(&a.actions), a.source_ip.as_deref().map(list).filter(|l| !l.is_empty()));
    let entries = list(&a.resources)
        .into_iter()
        .map(|resource| PolicyEntryInfo { resource: Some(resource), actions: Some(actions.clone()), source_ips: source_ips.clone(), decision: Some(a.decision.trim().to_string()) })
        .collect();
    let info = AclInfo { subject: Some(a.subject.trim().to_string()), policies: Some(vec![PolicyInfo { policy_type: None, entries: Some(entries) }]) };
    let to = targets(instance, &a.broker, &a.cluster).await?;
    change(instance, json, verb, to, || RemotingCommand::request(code).with_ext("subject", a.subject.trim()).with_body(encode(&info))).await
}
