//! The subcommands: each builds its requests, checks the answers and renders a table or
//! JSON. Names and flags are mqadmin's (`-n` NameServer, `-c` cluster, `-b` broker
//! address, `-t` topic, `-g` group, `-i` message id).

use clap::{Args, Subcommand};
use ringmq_client::instance::{ClientConfig, ClientInstance, PERM_READ, PERM_WRITE};
use ringmq_client::message::user::Message;
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::CreateTopicRequestHeader;
use ringmq_client::remoting::route::TopicRouteData;
use serde_json::{json, Value};
use crate::query::{self, MessageDetail};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// NameServer addresses, `host:port;host:port` (every command that reads routes or
    /// clusters needs it; the controller commands that only talk to `-a` do not).
    #[arg(short = 'n', long = "namesrvAddr")]
    pub namesrv: Option<String>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Sign every request with this ACL account (brokers with `aclEnable=true`) or user
    /// (brokers with `authenticationEnabled=true`: the username), as mqadmin does with
    /// the accessKey of its `tools.yml`.
    #[arg(long = "accessKey", requires = "secret_key")]
    pub access_key: Option<String>,
    /// The account's secret key, or the user's password (with `--accessKey`).
    #[arg(long = "secretKey", requires = "access_key")]
    pub secret_key: Option<String>,
    /// Connect with TLS (the NameServers' and brokers' `tls.server.mode` permissive or
    /// enforcing), as mqadmin with `-Dtls.enable=true`.
    #[arg(long)]
    pub tls: bool,
    /// PEM CA that signs the servers' certificates: they are checked when it is given
    /// (without it the connection is encrypted but the server not checked).
    #[arg(long = "tls-ca", requires = "tls")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// PEM client certificate, for servers with `tls.server.need.client.auth`.
    #[arg(long = "tls-cert", requires_all = ["tls", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM key of `--tls-cert` (unencrypted).
    #[arg(long = "tls-key", requires_all = ["tls", "tls_cert"])]
    pub tls_key: Option<std::path::PathBuf>,
}

impl Common {
    /// The client configuration these options give: the NameServers, with an account
    /// the credentials every request is signed with, with `--tls` TLS.
    pub fn client_config(&self, namesrvs: Vec<String>) -> ClientConfig {
        let mut client = ClientConfig::new(namesrvs);
        if let (Some(ak), Some(sk)) = (&self.access_key, &self.secret_key) {
            client.credentials = Some(ringmq_client::remoting::acl::Credentials::new(ak.clone(), sk.clone()));
        }
        client.tls = ringmq_client::net::tls::TlsClientSettings {
            enable: self.tls,
            trust_cert_path: self.tls_ca.clone(),
            cert_path: self.tls_cert.clone(),
            key_path: self.tls_key.clone(),
            ..Default::default()
        };
        client
    }
}

#[derive(Subcommand, Debug)]
#[allow(non_camel_case_types)]
#[command(rename_all = "verbatim")]
pub enum Command {
    /// List clusters and their brokers.
    clusterList {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
    },
    /// List topics known to the NameServer.
    topicList {
        #[command(flatten)]
        common: Common,
    },
    /// Print a topic's route.
    topicRoute {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
    },
    /// Create or update a topic on a broker (-b) or every master of a cluster (-c).
    updateTopic {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
        read_queue_nums: i32,
        #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
        write_queue_nums: i32,
        #[arg(short = 'p', long = "perm", default_value_t = PERM_READ | PERM_WRITE)]
        perm: i32,
        #[arg(short = 'o', long = "order", default_value_t = false)]
        order: bool,
    },
    /// Delete a topic from every master of a cluster and from the NameServers.
    deleteTopic {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'c', long = "clusterName")]
        cluster: String,
    },
    /// Print a broker's runtime information.
    brokerStatus {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: String,
    },
    /// Create or update a subscription group on a broker (-b) or every master of a cluster (-c).
    updateSubGroup {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "groupName")]
        group: String,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'q', long = "retryQueueNums", default_value_t = 1)]
        retry_queue_nums: i32,
        #[arg(short = 'r', long = "retryMaxTimes", default_value_t = 16)]
        retry_max_times: i32,
        #[arg(short = 'd', long = "consumeBroadcastEnable", default_value_t = true)]
        broadcast: bool,
    },
    /// List a producer group's connections on the brokers serving a topic.
    producerConnection {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "producerGroup")]
        group: String,
        #[arg(short = 't', long = "topic")]
        topic: String,
    },
    /// Send one message.
    sendMessage {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'p', long = "body")]
        body: String,
        #[arg(short = 'k', long = "key")]
        key: Option<String>,
        #[arg(short = 'c', long = "tags")]
        tags: Option<String>,
    },
    /// Per-queue min/max offsets and last update time of a topic, on every broker.
    topicStatus {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
    },
    /// A consumer group's progress: per queue, the broker's offset, the group's and the lag.
    consumerProgress {
        #[command(flatten)]
        common: Common,
        /// Without it, every subscription group of the cluster, one line each (mqadmin).
        #[arg(short = 'g', long = "groupName")]
        group: Option<String>,
        #[arg(short = 't', long = "topicName")]
        topic: Option<String>,
    },
    /// A consumer group's online clients and subscriptions.
    consumerConnection {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "consumerGroup")]
        group: String,
    },
    /// Delete a subscription group from a broker (-b) or every master of a cluster (-c).
    deleteSubGroup {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "groupName")]
        group: String,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        /// Also delete the group's consumer offsets.
        #[arg(short = 'r', long = "removeOffset", default_value_t = false)]
        remove_offset: bool,
    },
    /// Messages of a topic by key (the brokers' index), newest first per broker.
    queryMsgByKey {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'k', long = "msgKey")]
        key: String,
        /// At most this many messages per broker.
        #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
        max_num: i32,
    },
    /// A message's trace (its Pub and Sub records) from the trace topic, by message id.
    queryMsgTraceById {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'i', long = "msgId")]
        msg_id: String,
        #[arg(short = 't', long = "traceTopic", default_value = ringmq_client::trace::TRACE_TOPIC_DEFAULT)]
        trace_topic: String,
        /// Trace messages stored from (ms since the epoch).
        #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
        begin: i64,
        /// Trace messages stored until (ms since the epoch).
        #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
        end: i64,
        /// At most this many trace messages per broker.
        #[arg(short = 'c', long = "maxNum", default_value_t = 64)]
        max_num: i32,
    },
    /// Print a broker's configuration (broker.conf keys), one broker (-b) or a cluster (-c).
    getBrokerConfig {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
    },
    /// Change a broker setting (-k key, -v value) on a broker (-b) or a cluster (-c).
    updateBrokerConfig {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerAddr")]
        broker: Option<String>,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'k', long = "key")]
        key: String,
        #[arg(short = 'v', long = "value")]
        value: String,
    },
    /// Take write permission away from a broker in every NameServer (drain it).
    wipeWritePerm {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: String,
    },
    /// Give a broker write permission back in every NameServer.
    addWritePerm {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: String,
    },
    /// Print the message at a queue offset.
    queryMsgByOffset {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: String,
        #[arg(short = 'i', long = "queueId")]
        queue_id: i32,
        #[arg(short = 'o', long = "offset")]
        offset: i64,
    },
    /// Print every message of a topic (all brokers and queues), oldest first per queue.
    printMsg {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        /// Print bodies (as UTF-8, lossy).
        #[arg(short = 'd', long = "printBody", default_value_t = true)]
        print_body: bool,
        /// Stop after this many messages in all.
        #[arg(long = "limit", default_value_t = 10_000)]
        limit: usize,
    },
    /// Print a message by its offset message id (host and CommitLog offset); with -g and
    /// -d, have that client of the group consume it now (CONSUME_MESSAGE_DIRECTLY).
    queryMsgById {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'i', long = "msgId")]
        msg_id: String,
        #[arg(short = 'g', long = "consumerGroup", requires = "client_id")]
        group: Option<String>,
        #[arg(short = 'd', long = "clientId", requires = "group")]
        client_id: Option<String>,
    },
    /// Serve the web dashboard (clusters, topics, groups, live charts, messages, DLQ)
    /// until stopped; prints `listening on http://ADDR/` as its first line.
    dashboard {
        /// NameServer addresses, `host:port;host:port`.
        #[arg(short = 'n', long = "namesrvAddr")]
        namesrv: String,
        /// Address to serve on (port 0 picks a free one).
        #[arg(long = "listen", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Login token (16-256 printable characters); else RINGMQ_DASHBOARD_TOKEN
        /// (preferred: a flag shows in `ps`). Required off loopback; on loopback a
        /// random one is generated and its login link printed.
        #[arg(long = "token")]
        token: Option<String>,
        /// A Host name browsers may use besides the bound address (a reverse proxy's
        /// or a DNS name; `name` or `name:port`); repeatable. Any other Host gets 403.
        #[arg(long = "host-name")]
        host_name: Vec<String>,
    },
    #[command(flatten)]
    Ops(crate::ops::OpsCommand),
    /// RocketMQ 5's users and ACLs (`auth.rs`).
    #[command(flatten)]
    Auth(crate::auth::AuthCommand),
    /// RocketMQ 5's controller mode (`controller.rs`).
    #[command(flatten)]
    Controller(crate::controller::ControllerCommand),
}


/// `-n`'s NameServers, or the error a command ends with.
pub fn namesrv_list(namesrv: &str) -> Result<Vec<String>, String> {
    let namesrvs: Vec<String> = namesrv.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if namesrvs.is_empty() {
        return Err("-n needs at least one NameServer host:port".into());
    }
    Ok(namesrvs)
}

impl From<query::QueryError> for String {
    fn from(e: query::QueryError) -> String {
        e.to_string()
    }
}

pub(crate) type Outcome = Result<String, String>;

pub async fn run(command: Command) -> Outcome {
    let common = match &command {
        Command::clusterList { common, .. }
        | Command::topicList { common }
        | Command::topicRoute { common, .. }
        | Command::updateTopic { common, .. }
        | Command::deleteTopic { common, .. }
        | Command::brokerStatus { common, .. }
        | Command::updateSubGroup { common, .. }
        | Command::producerConnection { common, .. }
        | Command::sendMessage { common, .. }
        | Command::topicStatus { common, .. }
        | Command::consumerProgress { common, .. }
        | Command::consumerConnection { common, .. }
        | Command::deleteSubGroup { common, .. }
        | Command::queryMsgByKey { common, .. }
        | Command::queryMsgTraceById { common, .. }
        | Command::queryMsgByOffset { common, .. }
        | Command::printMsg { common, .. }
        | Command::getBrokerConfig { common, .. }
        | Command::updateBrokerConfig { common, .. }
        | Command::wipeWritePerm { common, .. }
        | Command::addWritePerm { common, .. }
        | Command::queryMsgById { common, .. } => common.clone(),
        // Runs on its own threads (main.rs), never through here.
        Command::dashboard { .. } => return Err("dashboard runs from main".into()),
        Command::Ops(ops) => ops.common().clone(),
        Command::Auth(auth) => auth.common().clone(),
        Command::Controller(c) => c.common().clone(),
    };
    // A client instance needs a bootstrap list to start; a controller command without `-n`
    // gives it the controllers it talks to, and never asks it for a route.
    let namesrvs = match (&common.namesrv, &command) {
        (Some(n), _) => namesrv_list(n)?,
        (None, Command::Controller(c)) => c.controllers().ok_or_else(|| "this command reads the cluster from the NameServer: give -n host:port".to_string())?,
        (None, _) => return Err("-n needs at least one NameServer host:port".into()),
    };
    let client = common.client_config(namesrvs.clone());
    let instance = ClientInstance::start(client.clone()).map_err(|e| e.to_string())?;
    let result = dispatch(&instance, client, &namesrvs, common.json, command).await;
    instance.shutdown().await;
    result
}

pub(crate) async fn call(instance: &Rc<ClientInstance>, addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    Ok(query::call(instance, addr, cmd).await?)
}

/// Master addresses of `cluster`'s brokers.
async fn masters(instance: &Rc<ClientInstance>, cluster_name: &str) -> Result<Vec<String>, String> {
    Ok(query::masters(instance, cluster_name).await?)
}

pub(crate) async fn targets(instance: &Rc<ClientInstance>, broker: &Option<String>, cluster_name: &Option<String>) -> Result<Vec<String>, String> {
    match (broker, cluster_name) {
        (Some(b), None) => Ok(vec![b.clone()]),
        (None, Some(c)) => masters(instance, c).await,
        _ => Err("give exactly one of -b (a broker) or -c (a cluster)".into()),
    }
}

/// A left-aligned table: header, then rows.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string() + "\n";
    let mut out = line(header.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

pub(crate) fn render(json: bool, value: Value, text: String) -> Outcome {
    if json {
        Ok(serde_json::to_string_pretty(&value).map_err(|e| e.to_string())? + "\n")
    } else {
        Ok(text)
    }
}


/// Runs one command: a table from each command to its handler, grouped by family, so
/// every command's family shows at a glance and each handler reads on its own. Offsets,
/// stats and consumer operations are `ops.rs`'s family; `dashboard` never comes here.
async fn dispatch(instance: &Rc<ClientInstance>, client: ClientConfig, namesrvs: &[String], json: bool, command: Command) -> Outcome {
    match command {
        // Clusters and brokers.
        Command::clusterList { cluster: only, .. } => cluster_list(instance, json, only).await,
        Command::brokerStatus { broker, .. } => broker_status(instance, json, broker).await,
        Command::getBrokerConfig { broker, cluster: cluster_name, .. } => get_broker_config(instance, json, broker, cluster_name).await,
        Command::updateBrokerConfig { broker, cluster: cluster_name, key, value, .. } => update_broker_config(instance, json, broker, cluster_name, key, value).await,
        Command::wipeWritePerm { broker_name, .. } => write_perm(instance, namesrvs, json, &broker_name, true).await,
        Command::addWritePerm { broker_name, .. } => write_perm(instance, namesrvs, json, &broker_name, false).await,
        // Topics.
        Command::topicList { .. } => topic_list(instance, json).await,
        Command::topicRoute { topic, .. } => topic_route(instance, topic).await,
        Command::updateTopic { topic, broker, cluster: cluster_name, read_queue_nums, write_queue_nums, perm, order, .. } => {
            update_topic(instance, json, topic, broker, cluster_name, read_queue_nums, write_queue_nums, perm, order).await
        }
        Command::deleteTopic { topic, cluster: cluster_name, .. } => delete_topic(instance, namesrvs, json, topic, cluster_name).await,
        Command::topicStatus { topic, .. } => topic_status(instance, json, topic).await,
        // Groups: subscription groups, consumers, producers.
        Command::updateSubGroup { group, broker, cluster: cluster_name, retry_queue_nums, retry_max_times, broadcast, .. } => {
            update_sub_group(instance, json, group, broker, cluster_name, retry_queue_nums, retry_max_times, broadcast).await
        }
        Command::deleteSubGroup { group, broker, cluster: cluster_name, remove_offset, .. } => delete_sub_group(instance, json, group, broker, cluster_name, remove_offset).await,
        Command::consumerProgress { group, topic, .. } => consumer_progress(instance, json, group, topic).await,
        Command::consumerConnection { group, .. } => consumer_connection(instance, json, group).await,
        Command::producerConnection { group, topic, .. } => producer_connection(instance, json, group, topic).await,
        // Messages.
        Command::sendMessage { topic, body, key, tags, .. } => send_message(client, json, topic, body, key, tags).await,
        Command::queryMsgByKey { topic, key, max_num, .. } => query_msg_by_key(instance, json, topic, key, max_num).await,
        Command::queryMsgTraceById { msg_id, trace_topic, begin, end, max_num, .. } => {
            let found = query::query_traces(instance, &trace_topic, &msg_id, max_num, (begin, end)).await?;
            for skipped in &found.undecodable {
                eprintln!("not a trace message, skipped: {skipped}");
            }
            render(json, json!(found.views), trace_table(&found.views))
        }
        Command::queryMsgByOffset { topic, broker_name, queue_id, offset, .. } => query_msg_by_offset(instance, json, topic, broker_name, queue_id, offset).await,
        Command::printMsg { topic, print_body, limit, .. } => print_msg(instance, json, topic, print_body, limit).await,
        Command::queryMsgById { msg_id, group: Some(group), client_id: Some(client_id), .. } => crate::ops::consume_directly(instance, json, &msg_id, &group, &client_id).await,
        Command::queryMsgById { msg_id, .. } => describe(json, &query::view_by_offset_id(instance, &msg_id, usize::MAX).await?),
        // Offsets, stats and consumer operations.
        Command::Ops(ops) => crate::ops::run(instance, json, ops).await,
        // Users and ACLs.
        Command::Auth(auth) => crate::auth::run(instance, json, auth).await,
        // Controller mode.
        Command::Controller(c) => crate::controller::run(instance, json, c).await,
        Command::dashboard { .. } => Err("dashboard runs from main".into()),
    }
}

// Clusters and brokers: the brokers' own state and settings (`write_perm` below is the
// NameServer side of the same family).

/// `clusterList`: one row per broker (address, version, TPS, disk) from the brokers' runtime
/// info, optionally of one cluster.
async fn cluster_list(instance: &Rc<ClientInstance>, json: bool, only: Option<String>) -> Outcome {
    let brokers = query::brokers(instance, only.as_deref()).await?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    for b in &brokers {
        let (in_tps, out_tps) = (b.tps_10s("putTps"), b.tps_10s("getTransferedTps"));
        rows.push(vec![b.cluster.clone(), b.broker_name.clone(), b.broker_id.to_string(), b.addr.clone(), b.get("brokerVersionDesc"), in_tps.clone(), out_tps.clone(), b.get("commitLogDiskRatio"), b.get("brokerActive")]);
        docs.push(json!({
            "cluster": b.cluster, "brokerName": b.broker_name, "brokerId": b.broker_id, "addr": b.addr, "version": b.get("brokerVersionDesc"),
            "inTps": in_tps, "outTps": out_tps, "space": b.get("commitLogDiskRatio"), "activated": b.get("brokerActive"),
            "putTotal": b.get("putMessageTimesTotal"), "getTotal": b.get("getMessageTransferedMsgCount")
        }));
    }
    render(json, json!(docs), table(&["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS", "#SPACE", "#ACTIVATED"], &rows))
}

/// `brokerStatus`: a broker's runtime table, one `key: value` line each.
async fn broker_status(instance: &Rc<ClientInstance>, json: bool, broker: String) -> Outcome {
    let t = query::runtime_table(instance, &broker).await?;
    let width = t.keys().map(String::len).max().unwrap_or(0);
    let text = t.iter().map(|(k, v)| format!("{k:<width$}: {v}\n")).collect();
    render(json, json!(t), text)
}

/// `getBrokerConfig`: GET_BROKER_CONFIG on each target; the `key=value` body as aligned
/// lines under a header per broker.
async fn get_broker_config(instance: &Rc<ClientInstance>, json: bool, broker: Option<String>, cluster_name: Option<String>) -> Outcome {
    let mut text = String::new();
    let mut docs = serde_json::Map::new();
    for addr in targets(instance, &broker, &cluster_name).await? {
        let r = call(instance, &addr, RemotingCommand::request(rq::GET_BROKER_CONFIG)).await?;
        let (t, v) = properties_section(&addr, &r.body);
        text += &t;
        docs.insert(addr, v);
    }
    render(json, Value::Object(docs), text)
}

/// A server's `key=value` properties body as mqadmin prints it (`====addr====`, then
/// `key  =  value` lines) and as a JSON object (getBrokerConfig, getControllerConfig).
pub(crate) fn properties_section(addr: &str, body: &[u8]) -> (String, Value) {
    let body = String::from_utf8_lossy(body);
    let mut text = format!("============{addr}============\n");
    let mut kv = serde_json::Map::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line.split_once('=').unwrap_or((line, ""));
        text += &format!("{:<50}=  {v}\n", k.trim());
        kv.insert(k.trim().to_string(), Value::String(v.to_string()));
    }
    (text, Value::Object(kv))
}

/// `updateBrokerConfig`: UPDATE_BROKER_CONFIG of one `key=value` on each target; stops at the
/// first broker that refuses.
async fn update_broker_config(instance: &Rc<ClientInstance>, json: bool, broker: Option<String>, cluster_name: Option<String>, key: String, value: String) -> Outcome {
    let mut done = Vec::new();
    for addr in targets(instance, &broker, &cluster_name).await? {
        call(instance, &addr, RemotingCommand::request(rq::UPDATE_BROKER_CONFIG).with_body(format!("{key}={value}\n").into_bytes())).await?;
        done.push(addr);
    }
    let text = done.iter().map(|a| format!("update broker config success, {a}\n")).collect::<String>();
    render(json, json!({"key": key, "value": value, "brokers": done}), text)
}

// Topics: names, routes, creation and deletion, queue offsets.

/// `topicList`: the NameServer's topic names, one a line.
async fn topic_list(instance: &Rc<ClientInstance>, json: bool) -> Outcome {
    let topics = query::topic_list(instance).await?;
    let text = topics.iter().map(|t| format!("{t}\n")).collect();
    render(json, json!(topics), text)
}

/// `topicRoute`: the topic's route from the NameServer, in RocketMQ's JSON.
async fn topic_route(instance: &Rc<ClientInstance>, topic: String) -> Outcome {
    let r = instance
        .invoke_namesrv(RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic.clone()))
        .await
        .map_err(|e| e.to_string())?;
    if r.code != rs::SUCCESS {
        return Err(format!("no route for {topic}: code {} {}", r.code, r.remark.unwrap_or_default()));
    }
    let route = TopicRouteData::decode(&r.body).map_err(|e| e.to_string())?;
    let doc: Value = serde_json::from_slice(&route.encode_standard()).map_err(|e| e.to_string())?;
    // mqadmin prints the route as JSON either way.
    Ok(serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n")
}

/// `updateTopic`: UPDATE_AND_CREATE_TOPIC on each target; stops at the first broker that
/// refuses.
#[allow(clippy::too_many_arguments)]
async fn update_topic(instance: &Rc<ClientInstance>, json: bool, topic: String, broker: Option<String>, cluster_name: Option<String>, read_queue_nums: i32, write_queue_nums: i32, perm: i32, order: bool) -> Outcome {
    let header = CreateTopicRequestHeader {
        topic: topic.clone(),
        default_topic: "TBW102".into(),
        read_queue_nums,
        write_queue_nums,
        perm,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order,
        attributes: None,
    };
    let mut done = Vec::new();
    for addr in targets(instance, &broker, &cluster_name).await? {
        call(instance, &addr, RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC).with_header(&header)).await?;
        done.push(addr);
    }
    let text = done.iter().map(|a| format!("create topic to {a} success.\n")).collect::<String>();
    render(json, json!({"topic": topic, "brokers": done}), text)
}

/// `deleteTopic`: from every master of the cluster first, then from every NameServer.
async fn delete_topic(instance: &Rc<ClientInstance>, namesrvs: &[String], json: bool, topic: String, cluster_name: String) -> Outcome {
    let brokers = masters(instance, &cluster_name).await?;
    for addr in &brokers {
        call(instance, addr, RemotingCommand::request(rq::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic.clone())).await?;
    }
    for ns in namesrvs {
        call(instance, ns, RemotingCommand::request(rq::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", topic.clone()).with_ext("clusterName", cluster_name.clone())).await?;
    }
    let text = format!("delete topic [{topic}] from cluster [{cluster_name}] success.\ndelete topic [{topic}] from NameServer success.\n");
    render(json, json!({"topic": topic, "brokers": brokers, "namesrvs": namesrvs}), text)
}

/// `topicStatus`: per-queue min/max offsets and last update, on every broker of the topic.
async fn topic_status(instance: &Rc<ClientInstance>, json: bool, topic: String) -> Outcome {
    let queues = query::topic_status(instance, &topic).await?;
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| vec![q.broker_name.clone(), q.queue_id.to_string(), q.min_offset.to_string(), q.max_offset.to_string(), human_ms(q.last_update_timestamp)])
        .collect();
    render(json, json!(queues), table(&["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"], &rows))
}

// Groups: subscription groups, consumer progress and connections, producer connections.

/// `updateSubGroup`: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with one config body on each target.
#[allow(clippy::too_many_arguments)]
async fn update_sub_group(instance: &Rc<ClientInstance>, json: bool, group: String, broker: Option<String>, cluster_name: Option<String>, retry_queue_nums: i32, retry_max_times: i32, broadcast: bool) -> Outcome {
    let body = json!({
        "groupName": group, "consumeEnable": true, "consumeFromMinEnable": true, "consumeBroadcastEnable": broadcast,
        "retryQueueNums": retry_queue_nums, "retryMaxTimes": retry_max_times, "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": true
    });
    let mut done = Vec::new();
    for addr in targets(instance, &broker, &cluster_name).await? {
        let cmd = RemotingCommand::request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(body.to_string().into_bytes());
        call(instance, &addr, cmd).await?;
        done.push(addr);
    }
    let text = done.iter().map(|a| format!("create subscription group to {a} success.\n")).collect::<String>();
    render(json, json!({"group": group, "brokers": done, "config": body}), text)
}

/// `deleteSubGroup`: DELETE_SUBSCRIPTIONGROUP on each target, with or without its offsets.
async fn delete_sub_group(instance: &Rc<ClientInstance>, json: bool, group: String, broker: Option<String>, cluster_name: Option<String>, remove_offset: bool) -> Outcome {
    let mut done = Vec::new();
    for addr in targets(instance, &broker, &cluster_name).await? {
        let cmd = RemotingCommand::request(rq::DELETE_SUBSCRIPTIONGROUP).with_ext("groupName", group.clone()).with_ext("cleanOffset", remove_offset.to_string());
        call(instance, &addr, cmd).await?;
        done.push(addr);
    }
    let text = done.iter().map(|a| format!("delete subscription group [{group}] from broker [{a}] success.\n")).collect::<String>();
    render(json, json!({"group": group, "brokers": done, "offsetsRemoved": remove_offset}), text)
}

/// `consumerProgress`: per queue, the broker's offset, the group's and the lag; an error
/// when no broker knows the group. Without a group, mqadmin's one line per group.
async fn consumer_progress(instance: &Rc<ClientInstance>, json: bool, group: Option<String>, topic: Option<String>) -> Outcome {
    let Some(group) = group else {
        let groups = query::all_groups_progress(instance).await?;
        let rows: Vec<Vec<String>> = groups
            .iter()
            .map(|g| vec![g.group.clone(), g.count.to_string(), g.version.clone(), g.consume_type.clone(), g.message_model.clone(), format!("{:.0}", g.consume_tps), g.diff_total.to_string()])
            .collect();
        let text = table(&["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"], &rows);
        return render(json, json!(groups), text);
    };
    let queues = query::consumer_progress(instance, &group, topic.as_deref()).await?;
    if queues.is_empty() {
        return Err(format!("no broker reports progress for consumer group {group}"));
    }
    let total_lag: i64 = queues.iter().map(|q| q.diff).sum();
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| vec![q.topic.clone(), q.broker_name.clone(), q.queue_id.to_string(), q.broker_offset.to_string(), q.consumer_offset.to_string(), q.diff.to_string(), human_ms(q.last_timestamp)])
        .collect();
    let mut text = table(&["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"], &rows);
    text += &format!("\nDiff Total: {total_lag}\n");
    render(json, json!({"queues": queues, "diffTotal": total_lag}), text)
}

/// `consumerConnection`: the group's online clients, then its subscriptions and consume
/// settings.
async fn consumer_connection(instance: &Rc<ClientInstance>, json: bool, group: String) -> Outcome {
    let v = query::consumer_connection(instance, &group).await?;
    let conns = v.get("connectionSet").and_then(Value::as_array).cloned().unwrap_or_default();
    let s = |c: &Value, k: &str| c.get(k).map(|x| x.as_str().map(String::from).unwrap_or_else(|| x.to_string())).unwrap_or_default();
    let rows: Vec<Vec<String>> = conns.iter().enumerate().map(|(i, c)| vec![format!("{:03}", i + 1), s(c, "clientId"), s(c, "clientAddr"), s(c, "language"), s(c, "version")]).collect();
    let mut text = table(&["#", "#ClientId", "#ClientAddr", "#Language", "#Version"], &rows);
    text += "\nBelow is subscription:\n";
    for (t, sub) in v.get("subscriptionTable").and_then(Value::as_object).into_iter().flatten() {
        text += &format!("{t}  {}\n", sub.get("subString").and_then(Value::as_str).unwrap_or("*"));
    }
    text += &format!("\nConsumeType: {}\nMessageModel: {}\nConsumeFromWhere: {}\n", s(&v, "consumeType"), s(&v, "messageModel"), s(&v, "consumeFromWhere"));
    render(json, v, text)
}

/// `producerConnection`: the producer group's connections on every master serving the topic.
async fn producer_connection(instance: &Rc<ClientInstance>, json: bool, group: String, topic: String) -> Outcome {
    let route = instance.fetch_route(&topic).await.map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    for addr in route.master_addrs.values() {
        let cmd = RemotingCommand::request(rq::GET_PRODUCER_CONNECTION_LIST).with_ext("producerGroup", group.clone());
        let r = call(instance, addr, cmd).await?;
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| format!("{addr}: {e}"))?;
        for c in v.get("connectionSet").and_then(Value::as_array).into_iter().flatten() {
            let s = |k: &str| c.get(k).map(|x| x.as_str().map(String::from).unwrap_or_else(|| x.to_string())).unwrap_or_default();
            rows.push(vec![format!("{:04}", rows.len() + 1), s("clientId"), s("clientAddr"), s("language"), s("version")]);
            docs.push(c.clone());
        }
    }
    render(json, json!(docs), table(&["#", "#ClientId", "#ClientAddr", "#Language", "#Version"], &rows))
}

// Messages: sending one, and reading stored ones back (by key, by queue offset, all).

/// `sendMessage`: one message through a producer of its own, shut down before the answer
/// is rendered.
async fn send_message(client: ClientConfig, json: bool, topic: String, body: String, key: Option<String>, tags: Option<String>) -> Outcome {
    let producer = Producer::start(ProducerConfig::new(client, "ringmq-admin-producer")).await.map_err(|e| e.to_string())?;
    let mut msg = Message::new(topic.clone(), body.into_bytes());
    if let Some(t) = &tags {
        msg = msg.with_tags(t).map_err(|e| e.to_string())?;
    }
    if let Some(k) = &key {
        msg = msg.with_keys([k.as_str()]).map_err(|e| e.to_string())?;
    }
    let sent = producer.send(msg).await;
    producer.shutdown().await;
    let r = sent.map_err(|e| e.to_string())?;
    let row = vec![r.queue.broker_name.clone(), r.queue.queue_id.to_string(), "SEND_OK".to_string(), r.msg_id.clone(), r.offset_msg_id.clone()];
    let doc = json!({"brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "queueOffset": r.queue_offset, "sendStatus": "SEND_OK", "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id});
    render(json, doc, table(&["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"], &[row]))
}

/// `queryMsgByKey`: the brokers' index lookup, newest first per broker.
async fn query_msg_by_key(instance: &Rc<ClientInstance>, json: bool, topic: String, key: String, max_num: i32) -> Outcome {
    let found = query::query_by_key(instance, &topic, &key, max_num, usize::MAX).await?;
    let rows: Vec<Vec<String>> = found.iter().map(|m| vec![m.offset_msg_id.clone(), m.queue_id.to_string(), m.queue_offset.to_string()]).collect();
    let docs: Vec<Value> = found.iter().map(|m| json!({"offsetMsgId": m.offset_msg_id, "queueId": m.queue_id, "queueOffset": m.queue_offset, "body": m.body})).collect();
    render(json, json!(docs), table(&["#Message ID", "#QID", "#Offset"], &rows))
}

/// mqadmin's `printMessageTrace`: each Pub record under its own header, then the
/// SubAfter records grouped by consumer group (groups in name order; Java's map order
/// is a hash's), with Java's column widths.
pub fn trace_table(views: &[query::TraceView]) -> String {
    let line = |cells: [&str; 6]| format!("{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n", cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]);
    let row = |kind: &str, v: &query::TraceView| {
        line([kind, &v.group_name, &v.client_host, &ringmq_client::msgid::utc_date_time(v.time_stamp), &format!("{}ms", v.cost_time), &v.status])
    };
    let mut out = String::new();
    let mut subs: BTreeMap<&str, Vec<&query::TraceView>> = BTreeMap::new();
    for v in views {
        match v.msg_type.as_str() {
            "Pub" => {
                out += &line(["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]);
                out += &row("Pub", v);
                out.push('\n');
            }
            "SubAfter" => subs.entry(v.group_name.as_str()).or_default().push(v),
            _ => {}
        }
    }
    for group in subs.values() {
        out += &line(["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]);
        for v in group {
            out += &row("Sub", v);
        }
        out.push('\n');
    }
    out
}

/// `queryMsgByOffset`: one pull at the offset on the named broker's master, described like
/// `queryMsgById`.
async fn query_msg_by_offset(instance: &Rc<ClientInstance>, json: bool, topic: String, broker_name: String, queue_id: i32, offset: i64) -> Outcome {
    let route = instance.fetch_route(&topic).await.map_err(|e| e.to_string())?;
    let addr = route.master_addrs.get(&broker_name).ok_or_else(|| format!("broker {broker_name} does not serve {topic}"))?;
    let (records, _) = query::pull(instance, addr, &topic, queue_id, offset, 1).await?;
    let found = query::decode_records(addr, &records, usize::MAX)?;
    let m = found.first().ok_or_else(|| format!("no message at {topic}/{broker_name}/{queue_id} offset {offset}"))?;
    describe(json, m)
}

/// `printMsg`: every queue of the topic scanned from offset 0, oldest first per queue,
/// until `limit` messages in all.
async fn print_msg(instance: &Rc<ClientInstance>, json: bool, topic: String, print_body: bool, limit: usize) -> Outcome {
    let route = instance.fetch_route(&topic).await.map_err(|e| e.to_string())?;
    let mut text = String::new();
    let mut docs = Vec::new();
    for q in &route.read_queues {
        if docs.len() >= limit {
            break;
        }
        let Some(addr) = route.master_addrs.get(&q.broker_name) else { continue };
        let scan = query::Scan { from: 0, max: limit - docs.len(), until_ms: None, body_preview_max: usize::MAX };
        for m in query::scan_queue(instance, addr, &topic, q.queue_id, scan).await? {
            let (id, body) = (&m.offset_msg_id, &m.body);
            text += &if print_body { format!("MSGID: {id} QUEUE: {}/{} OFFSET: {} BODY: {body}\n", q.broker_name, q.queue_id, m.queue_offset) } else { format!("MSGID: {id} QUEUE: {}/{} OFFSET: {}\n", q.broker_name, q.queue_id, m.queue_offset) };
            docs.push(json!({"msgId": id, "brokerName": q.broker_name, "queueId": q.queue_id, "queueOffset": m.queue_offset, "body": if print_body { Value::String(body.clone()) } else { Value::Null }}));
        }
    }
    render(json, json!(docs), text)
}

/// WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER on every NameServer.
async fn write_perm(instance: &Rc<ClientInstance>, namesrvs: &[String], json: bool, broker_name: &str, wipe: bool) -> Outcome {
    let (code, field, verb) = if wipe { (rq::WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", "wipe") } else { (rq::ADD_WRITE_PERM_OF_BROKER, "addTopicCount", "add") };
    let mut text = String::new();
    let mut docs = Vec::new();
    for ns in namesrvs {
        let r = call(instance, ns, RemotingCommand::request(code).with_ext("brokerName", broker_name)).await?;
        let count: i64 = r.ext(field).and_then(|c| c.parse().ok()).unwrap_or(0);
        text += &format!("{verb} write perm of broker[{broker_name}] in name server[{ns}] OK, {count}\n");
        docs.push(json!({"namesrv": ns, "topics": count}));
    }
    render(json, json!({"broker": broker_name, "wipe": wipe, "namesrvs": docs}), text)
}

/// A time in ms since the epoch as mqadmin prints one (`timeMillisToHumanString2`,
/// `yyyy-MM-dd HH:mm:ss,SSS`), in UTC as RingMQ's tools print every time; empty for
/// none (0 or less). JSON output keeps the number.
fn human_ms(ms: i64) -> String {
    if ms <= 0 {
        return String::new();
    }
    format!("{},{:03}", ringmq_client::msgid::utc_date_time(ms), ms.rem_euclid(1000))
}

/// A stored message as mqadmin prints one (queryMsgById, queryMsgByOffset).
fn describe(json: bool, m: &MessageDetail) -> Outcome {
    let fields = vec![
        ("OffsetID", m.offset_msg_id.clone()),
        ("Topic", m.topic.clone()),
        ("Tags", m.tags.clone()),
        ("Keys", m.keys.clone()),
        ("Queue ID", m.queue_id.to_string()),
        ("Queue Offset", m.queue_offset.to_string()),
        ("CommitLog Offset", m.commit_log_offset.to_string()),
        ("Reconsume Times", m.reconsume_times.to_string()),
        ("Born Timestamp", human_ms(m.born_timestamp)),
        ("Store Timestamp", human_ms(m.store_timestamp)),
        ("Born Host", m.born_host.clone()),
        ("Store Host", m.store_host.clone()),
        ("System Flag", m.sys_flag.to_string()),
        ("Properties", m.properties_text()),
        ("Message Body", m.body.clone()),
    ];
    // Only for a compressed body, so plain messages print exactly as mqadmin's.
    let compression = m.body_compression.map(|c| match &m.body_error {
        None => ("Body Compression", format!("{c}, {} bytes stored, {} bytes decompressed", m.stored_body_bytes, m.body_bytes)),
        Some(e) => ("Body Compression", format!("{c}, {} bytes stored; shown as stored: {e}", m.stored_body_bytes)),
    });
    let fields: Vec<(&str, String)> = fields.into_iter().chain(compression).collect();
    let text = fields.iter().map(|(k, v)| format!("{k:<20}: {v}\n")).collect();
    let doc: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), Value::String(v))).collect();
    render(json, Value::Object(doc), text)
}

/// PULL_MESSAGE of up to `max` messages of one queue from `offset` (`query::pull`; the
/// admin reads, it never commits). Returns the records and the next offset.
pub(crate) async fn pull(instance: &Rc<ClientInstance>, addr: &str, topic: &str, queue_id: i32, offset: i64, max: i32) -> Result<(Vec<u8>, Option<i64>), String> {
    Ok(query::pull(instance, addr, topic, queue_id, offset, max).await?)
}

#[cfg(test)]
mod tests {
    use super::human_ms;

    #[test]
    fn times_print_as_mqadmin_dates() {
        // check(ms, printed)
        let check = |ms: i64, want: &str| assert_eq!(human_ms(ms), want, "{ms}");
        check(0, "");
        check(-5, "");
        check(1, "1970-01-01 00:00:00,001");
        check(1_764_806_400_123, "2025-12-04 00:00:00,123");
        check(1_798_761_599_999, "2026-12-31 23:59:59,999");
    }
}
