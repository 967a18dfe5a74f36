//! The admin's read side as data: every question the CLI tables and the dashboard ask a
//! cluster (brokers and their runtime info, topics and their queue offsets, consumer
//! progress, messages by key / id / time / queue offset), answered with typed values
//! instead of printed text. `commands.rs` renders them as mqadmin tables or JSON;
//! `dashboard/` serves them as JSON to the web UI.
//!
//! Invariants: one request per broker per question, each bounded by the client's
//! request timeout; nothing here retries or guesses; every list a function returns is
//! bounded by a `*_MAX` constant or by the caller's `max`; message bodies are copied up
//! to the caller's preview limit only (a compressed one is decompressed, at most
//! `DECOMPRESSED_BODY_BYTES_MAX`, then cut: operators read what the producer sent).

use ringmq_client::error::ClientError;
use ringmq_client::instance::ClientInstance;
use ringmq_client::message::compression::{plain_body, CompressionType, COMPRESSED_FLAG};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::admin::{ConsumeStats, GroupList, TopicStatsTable};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::PullMessageRequestHeader;
use ringmq_client::remoting::route::ClusterInfo;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// The consumer group the admin's own pulls name (it never commits an offset).
pub const ADMIN_PULL_GROUP: &str = "ringmq-admin";
/// Messages asked for per PULL_MESSAGE of a scan.
pub const PULL_BATCH_MAX: i32 = 32;
/// Prefix of dead-letter topics (`%DLQ%<group>`), as RocketMQ names them.
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";
/// Prefix of retry topics (`%RETRY%<group>`).
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request did not get an answer: the NameServer or broker is unreachable, timed
    /// out, or the client refused to send it.
    #[error("{0}")]
    Client(#[from] ClientError),
    /// A broker or NameServer answered with a failure code.
    #[error("{addr} answered request {request} with code {code}: {remark}")]
    Refused { addr: String, request: i32, code: i32, remark: String },
    /// A client error whose text does not name the broker, with the broker's address.
    #[error("{addr}: {source}")]
    At { addr: String, source: ClientError },
    /// The thing asked for does not exist (no message at that offset, unknown cluster).
    #[error("{0}")]
    NotFound(String),
    /// The question itself is wrong (a malformed message id).
    #[error("{0}")]
    BadInput(String),
    /// An answer that does not decode.
    #[error("{0}")]
    Decode(String),
}

pub type Result<T> = std::result::Result<T, QueryError>;

/// One request to `addr`; a non-SUCCESS answer is `Refused` with its code and remark.
pub async fn call(instance: &Rc<ClientInstance>, addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand> {
    let request = cmd.code;
    let r = instance.invoke(addr, cmd).await.map_err(|e| at(addr, e))?;
    if r.code != rs::SUCCESS {
        return Err(QueryError::Refused { addr: addr.to_string(), request, code: r.code, remark: r.remark.unwrap_or_default() });
    }
    Ok(r)
}

/// A client error that does not name its address gets it (the CLI's `addr: error`).
fn at(addr: &str, e: ClientError) -> QueryError {
    match e {
        ClientError::Connect { .. } | ClientError::ConnectionClosed { .. } | ClientError::Timeout { .. } | ClientError::ShutDown => QueryError::Client(e),
        source => QueryError::At { addr: addr.to_string(), source },
    }
}

pub async fn cluster_info(instance: &Rc<ClientInstance>) -> Result<ClusterInfo> {
    Ok(ringmq_client::admin::cluster_info(instance).await?)
}

/// Master addresses of `cluster_name`'s brokers.
pub async fn masters(instance: &Rc<ClientInstance>, cluster_name: &str) -> Result<Vec<String>> {
    let info = cluster_info(instance).await?;
    let names = info.cluster_addr_table.get(cluster_name).ok_or_else(|| QueryError::NotFound(format!("cluster {cluster_name} is not known to the NameServer")))?;
    Ok(names.iter().filter_map(|n| info.broker_addr_table.get(n)).filter_map(|b| b.broker_addrs.get(&0).cloned()).collect())
}

/// Every master address the NameServer knows, by broker name.
pub async fn all_masters(instance: &Rc<ClientInstance>) -> Result<BTreeMap<String, String>> {
    let info = cluster_info(instance).await?;
    Ok(info.broker_addr_table.iter().filter_map(|(name, b)| b.broker_addrs.get(&0).map(|a| (name.clone(), a.clone()))).collect())
}

/// GET_BROKER_RUNTIME_INFO's table (every value is a string, as Java's).
pub async fn runtime_table(instance: &Rc<ClientInstance>, addr: &str) -> Result<BTreeMap<String, String>> {
    let r = call(instance, addr, RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO)).await?;
    let v: Value = serde_json::from_slice(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: runtime info: {e}")))?;
    let table = v.get("table").and_then(Value::as_object).ok_or_else(|| QueryError::Decode(format!("{addr}: runtime info without a table")))?;
    Ok(table.iter().map(|(k, v)| (k.clone(), v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))).collect())
}

/// One broker (master or slave) as the NameServer lists it, with its runtime info.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatus {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub addr: String,
    /// Empty when the broker did not answer (`error` says why).
    pub runtime: BTreeMap<String, String>,
    pub error: Option<String>,
}

impl BrokerStatus {
    /// A runtime value, "-" when absent (mqadmin prints that for a silent broker).
    pub fn get(&self, key: &str) -> String {
        self.runtime.get(key).cloned().unwrap_or_else(|| "-".into())
    }

    /// The first of a "10s 1min 10min" TPS text (mqadmin shows the 10-second one).
    pub fn tps_10s(&self, key: &str) -> String {
        self.get(key).split_whitespace().next().unwrap_or("-").to_string()
    }

    /// The per-shard values RingMQ's runtime info carries as `shard.<id>.<key>`, by
    /// shard id (empty for a broker that does not report them, e.g. Apache RocketMQ).
    pub fn shards(&self) -> BTreeMap<u32, BTreeMap<String, String>> {
        let mut shards: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
        for (k, v) in &self.runtime {
            let Some(rest) = k.strip_prefix("shard.") else { continue };
            let Some((id, key)) = rest.split_once('.') else { continue };
            let Ok(id) = id.parse::<u32>() else { continue };
            shards.entry(id).or_default().insert(key.to_string(), v.clone());
        }
        shards
    }
}

/// Every broker of every cluster (or of `only`), with its runtime info; a broker that
/// does not answer is listed with its error, not dropped.
pub async fn brokers(instance: &Rc<ClientInstance>, only: Option<&str>) -> Result<Vec<BrokerStatus>> {
    let info = cluster_info(instance).await?;
    let mut out = Vec::new();
    for (cluster_name, names) in &info.cluster_addr_table {
        if only.is_some_and(|c| c != cluster_name) {
            continue;
        }
        for name in names {
            let Some(b) = info.broker_addr_table.get(name) else { continue };
            for (id, addr) in &b.broker_addrs {
                let (runtime, error) = match runtime_table(instance, addr).await {
                    Ok(t) => (t, None),
                    Err(e) => (BTreeMap::new(), Some(e.to_string())),
                };
                out.push(BrokerStatus { cluster: cluster_name.clone(), broker_name: name.clone(), broker_id: *id, addr: addr.clone(), runtime, error });
            }
        }
    }
    Ok(out)
}

/// Every topic the NameServers know, sorted.
pub async fn topic_list(instance: &Rc<ClientInstance>) -> Result<Vec<String>> {
    let r = instance.invoke_namesrv(RemotingCommand::request(rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).await?;
    if r.code != rs::SUCCESS {
        return Err(QueryError::Refused { addr: "NameServer".into(), request: rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, code: r.code, remark: r.remark.unwrap_or_default() });
    }
    let v: Value = serde_json::from_slice(&r.body).map_err(|e| QueryError::Decode(format!("topic list: {e}")))?;
    let mut topics: Vec<String> = v.get("topicList").and_then(Value::as_array).map(|a| a.iter().filter_map(|t| t.as_str().map(String::from)).collect()).unwrap_or_default();
    topics.sort();
    Ok(topics)
}

/// One queue's offsets (GET_TOPIC_STATS_INFO).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOffsets {
    pub broker_name: String,
    pub queue_id: i32,
    pub min_offset: i64,
    pub max_offset: i64,
    pub last_update_timestamp: i64,
}

/// Per-queue min/max offsets of `topic` on every broker serving it.
pub async fn topic_status(instance: &Rc<ClientInstance>, topic: &str) -> Result<Vec<QueueOffsets>> {
    let route = instance.fetch_route(topic).await?;
    let mut out = Vec::new();
    for addr in route.master_addrs.values() {
        let r = call(instance, addr, RemotingCommand::request(rq::GET_TOPIC_STATS_INFO).with_ext("topic", topic)).await?;
        let stats = TopicStatsTable::decode(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: {e}")))?;
        out.extend(stats.offset_table.iter().map(|(mq, o)| QueueOffsets {
            broker_name: mq.broker_name.clone(),
            queue_id: mq.queue_id,
            min_offset: o.min_offset,
            max_offset: o.max_offset,
            last_update_timestamp: o.last_update_timestamp,
        }));
    }
    Ok(out)
}

/// One queue of a consumer group's progress (GET_CONSUME_STATS).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueProgress {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub broker_offset: i64,
    pub consumer_offset: i64,
    /// Messages behind: broker offset − consumer offset, never negative.
    pub diff: i64,
    pub last_timestamp: i64,
}

/// A group's progress on every master (of `topic` only, when given). A broker that
/// never saw the group answers a failure and contributes nothing; an unreachable one is
/// an error.
pub async fn consumer_progress(instance: &Rc<ClientInstance>, group: &str, topic: Option<&str>) -> Result<Vec<QueueProgress>> {
    Ok(consume_stats(instance, group, topic).await?.0)
}

/// `consumer_progress` and the group's consume TPS summed over the masters.
pub async fn consume_stats(instance: &Rc<ClientInstance>, group: &str, topic: Option<&str>) -> Result<(Vec<QueueProgress>, f64)> {
    let (mut out, mut tps) = (Vec::new(), 0.0);
    for addr in all_masters(instance).await?.values() {
        let mut cmd = RemotingCommand::request(rq::GET_CONSUME_STATS).with_ext("consumerGroup", group);
        if let Some(t) = topic {
            cmd = cmd.with_ext("topic", t);
        }
        let r = instance.invoke(addr, cmd).await.map_err(|e| at(addr, e))?;
        if r.code != rs::SUCCESS {
            continue;
        }
        let stats = ConsumeStats::decode(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: {e}")))?;
        tps += stats.consume_tps;
        out.extend(stats.offset_table.iter().map(|(mq, o)| QueueProgress {
            topic: mq.topic.clone(),
            broker_name: mq.broker_name.clone(),
            queue_id: mq.queue_id,
            broker_offset: o.broker_offset,
            consumer_offset: o.consumer_offset,
            diff: (o.broker_offset - o.consumer_offset).max(0),
            last_timestamp: o.last_timestamp,
        }));
    }
    Ok((out, tps))
}

/// One row of `consumerProgress` without `-g`: a group's online clients and backlog
/// (mqadmin's `GroupConsumeInfo`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupConsumeInfo {
    pub group: String,
    /// Online clients (0 when none is connected).
    pub count: usize,
    /// The first client's version, as mqadmin prints it ("OFFLINE" with none).
    pub version: String,
    pub consume_type: String,
    pub message_model: String,
    pub consume_tps: f64,
    pub diff_total: i64,
}

/// Every subscription group of the cluster with its clients and backlog.
pub async fn all_groups_progress(instance: &Rc<ClientInstance>) -> Result<Vec<GroupConsumeInfo>> {
    let mut out = Vec::new();
    for group in subscription_groups(instance).await? {
        let (queues, consume_tps) = consume_stats(instance, &group, None).await?;
        let conn = consumer_connection(instance, &group).await.ok();
        let field = |k: &str| conn.as_ref().and_then(|c| c.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
        let clients = conn.as_ref().and_then(|c| c.get("connectionSet")).and_then(Value::as_array).cloned().unwrap_or_default();
        let version = clients.first().and_then(|c| c.get("version")).map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()));
        out.push(GroupConsumeInfo {
            group,
            count: clients.len(),
            version: version.unwrap_or_else(|| "OFFLINE".into()),
            consume_type: field("consumeType"),
            message_model: field("messageModel"),
            consume_tps,
            diff_total: queues.iter().map(|q| q.diff).sum(),
        });
    }
    Ok(out)
}

/// GET_CONSUMER_CONNECTION_LIST from the first master that knows the group online (the
/// answer as the broker sent it: clients, subscriptions, consume type and model).
pub async fn consumer_connection(instance: &Rc<ClientInstance>, group: &str) -> Result<Value> {
    let mut last_error = None;
    for addr in all_masters(instance).await?.values() {
        match call(instance, addr, RemotingCommand::request(rq::GET_CONSUMER_CONNECTION_LIST).with_ext("consumerGroup", group)).await {
            Ok(r) => return serde_json::from_slice(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: {e}"))),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| QueryError::NotFound("no broker in the cluster".into())))
}

/// The consumer groups with offsets on or subscriptions to `topic`, from every master
/// serving it (QUERY_TOPIC_CONSUME_BY_WHO).
pub async fn groups_of_topic(instance: &Rc<ClientInstance>, topic: &str) -> Result<BTreeSet<String>> {
    let route = instance.fetch_route(topic).await?;
    let mut groups = BTreeSet::new();
    for addr in route.master_addrs.values() {
        let r = call(instance, addr, RemotingCommand::request(rq::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", topic)).await?;
        groups.extend(GroupList::decode(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: {e}")))?.group_list);
    }
    Ok(groups)
}

/// Subscription groups configured on every master (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
pub async fn subscription_groups(instance: &Rc<ClientInstance>) -> Result<BTreeSet<String>> {
    let mut groups = BTreeSet::new();
    for addr in all_masters(instance).await?.values() {
        let r = call(instance, addr, RemotingCommand::request(rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).await?;
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| QueryError::Decode(format!("{addr}: subscription groups: {e}")))?;
        groups.extend(v.get("subscriptionGroupTable").and_then(Value::as_object).into_iter().flat_map(|t| t.keys().cloned()));
    }
    Ok(groups)
}

/// One message property, in stored order.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Property {
    pub name: String,
    pub value: String,
}

/// A stored message as an operator reads it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageDetail {
    /// Store host + CommitLog offset: the id VIEW_MESSAGE_BY_ID takes.
    pub offset_msg_id: String,
    /// The producer's id (`UNIQ_KEY`), empty when it set none.
    pub msg_id: String,
    pub topic: String,
    pub tags: String,
    pub keys: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub reconsume_times: i32,
    pub born_timestamp: i64,
    pub store_timestamp: i64,
    pub born_host: String,
    pub store_host: String,
    /// As stored: a compressed body's `COMPRESSED_FLAG` and type bits are kept.
    pub sys_flag: i32,
    pub properties: Vec<Property>,
    /// The body as UTF-8 (lossy), decompressed, cut at the preview limit.
    pub body: String,
    /// The body's length as the producer sent it (decompressed).
    pub body_bytes: usize,
    pub body_truncated: bool,
    /// How the stored body is compressed (`zlib`, `lz4`, `zstd`, or `unknown`), None
    /// when it is not.
    pub body_compression: Option<&'static str>,
    /// The body's length as stored.
    pub stored_body_bytes: usize,
    /// Why a compressed body could not be decompressed; `body` then shows it as stored.
    pub body_error: Option<String>,
}

/// A stored body as an operator reads it.
pub struct ShownBody<'a> {
    /// The producer's bytes, or the stored ones when they do not decompress.
    pub bytes: Cow<'a, [u8]>,
    /// See `MessageDetail::body_compression`.
    pub compression: Option<&'static str>,
    /// See `MessageDetail::body_error`.
    pub error: Option<String>,
}

/// The body of stored record `v`, decompressed when it is compressed.
pub fn shown_body<'a>(v: &StoredMessageView<'a>) -> ShownBody<'a> {
    let stored = v.body();
    let compression = (v.sys_flag() & COMPRESSED_FLAG != 0).then(|| CompressionType::from_sys_flag(v.sys_flag()).map_or("unknown", CompressionType::name));
    match plain_body(v.sys_flag(), stored) {
        Ok(bytes) => ShownBody { bytes, compression, error: None },
        Err(e) => ShownBody { bytes: Cow::Borrowed(stored), compression, error: Some(e.to_string()) },
    }
}

impl MessageDetail {
    /// `body_preview_max` bytes of the body at most (cut on a character boundary).
    pub fn of(v: &StoredMessageView<'_>, body_preview_max: usize) -> Self {
        let props_text = String::from_utf8_lossy(v.properties_bytes()).into_owned();
        let properties: Vec<Property> = props_text
            .split('\u{2}')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (name, value) = kv.split_once('\u{1}').unwrap_or((kv, ""));
                Property { name: name.to_string(), value: value.to_string() }
            })
            .collect();
        let prop = |k: &str| properties.iter().find(|p| p.name == k).map(|p| p.value.clone()).unwrap_or_default();
        let ShownBody { bytes: body, compression, error } = shown_body(v);
        let shown = &body[..body.len().min(body_preview_max)];
        let mut text = String::from_utf8_lossy(shown).into_owned();
        let truncated = shown.len() < body.len();
        if truncated && text.ends_with('\u{FFFD}') {
            // A multi-byte character cut in half reads as a replacement: drop it.
            text.pop();
        }
        Self {
            offset_msg_id: ringmq_client::msgid::offset_msg_id(&v.store_host(), v.physical_offset() as u64),
            msg_id: prop("UNIQ_KEY"),
            topic: v.topic().unwrap_or("?").to_string(),
            tags: prop("TAGS"),
            keys: prop("KEYS"),
            queue_id: v.queue_id(),
            queue_offset: v.queue_offset(),
            commit_log_offset: v.physical_offset(),
            reconsume_times: v.reconsume_times(),
            born_timestamp: v.born_timestamp_ms(),
            store_timestamp: v.store_timestamp_ms(),
            born_host: v.born_host().to_string(),
            store_host: v.store_host().to_string(),
            sys_flag: v.sys_flag(),
            properties,
            body: text,
            body_bytes: body.len(),
            body_truncated: truncated,
            body_compression: compression,
            stored_body_bytes: v.body().len(),
            body_error: error,
        }
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.iter().find(|p| p.name == name).map(|p| p.value.as_str())
    }

    /// Properties as mqadmin prints them: `k=v, k=v`.
    pub fn properties_text(&self) -> String {
        self.properties.iter().map(|p| format!("{}={}", p.name, p.value)).collect::<Vec<_>>().join(", ")
    }
}

/// Decodes the concatenated records of a QUERY_MESSAGE or PULL_MESSAGE answer.
pub fn decode_records(addr: &str, bytes: &[u8], body_preview_max: usize) -> Result<Vec<MessageDetail>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let v = StoredMessageView::parse_verified(&bytes[at..]).map_err(|e| QueryError::Decode(format!("{addr}: record {at}: {e}")))?;
        at += v.total_size();
        out.push(MessageDetail::of(&v, body_preview_max));
    }
    Ok(out)
}

/// Messages of `topic` whose key (KEYS or UNIQ_KEY) is `key`, at most `max_num` per
/// broker, from every master serving the topic (the brokers' index).
pub async fn query_by_key(instance: &Rc<ClientInstance>, topic: &str, key: &str, max_num: i32, body_preview_max: usize) -> Result<Vec<MessageDetail>> {
    query_by_key_between(instance, topic, key, max_num, (0, i64::MAX), body_preview_max).await
}

/// `query_by_key` for messages stored within `stored_ms` (begin, end; ms since the epoch).
pub async fn query_by_key_between(instance: &Rc<ClientInstance>, topic: &str, key: &str, max_num: i32, stored_ms: (i64, i64), body_preview_max: usize) -> Result<Vec<MessageDetail>> {
    let route = instance.fetch_route(topic).await?;
    let mut out = Vec::new();
    for addr in route.master_addrs.values() {
        let cmd = RemotingCommand::request(rq::QUERY_MESSAGE)
            .with_ext("topic", topic)
            .with_ext("key", key)
            .with_ext("maxNum", max_num.max(1).to_string())
            .with_ext("beginTimestamp", stored_ms.0.to_string())
            .with_ext("endTimestamp", stored_ms.1.to_string());
        let r = instance.invoke(addr, cmd).await.map_err(|e| at(addr, e))?;
        if r.code != rs::SUCCESS {
            continue; // QUERY_NOT_FOUND: none on this broker
        }
        out.extend(decode_records(addr, &r.body, body_preview_max)?);
    }
    Ok(out)
}

/// One trace record of a message, as `queryMsgTraceById` shows it (Java's `TraceView`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TraceView {
    /// The record's type: `Pub`, `SubBefore`, `SubAfter`, `EndTransaction`, `Recall`.
    pub msg_type: String,
    pub group_name: String,
    /// Who sent the trace: the trace message's born host, without its port (Java's
    /// `getBornHostString`).
    pub client_host: String,
    pub time_stamp: i64,
    pub cost_time: i32,
    /// `success` or `failed`.
    pub status: String,
    pub msg_id: String,
    pub offset_msg_id: String,
    pub topic: String,
    pub tags: String,
    pub keys: String,
    pub store_host: String,
}

/// Java's `TraceView.decodeFromTraceTransData`: the records of one trace message about
/// `msg_id` (a trace message holds the records of several messages).
pub fn trace_views(msg_id: &str, trace_message: &MessageDetail) -> std::result::Result<Vec<TraceView>, ringmq_client::trace::TraceDecodeError> {
    let client_host = trace_message.born_host.rsplit_once(':').map_or(trace_message.born_host.as_str(), |(ip, _)| ip);
    let records = ringmq_client::trace::decode(&trace_message.body)?;
    Ok(records
        .into_iter()
        .filter_map(|ctx| {
            let bean = ctx.beans.into_iter().next().filter(|b| b.msg_id == msg_id)?;
            Some(TraceView {
                msg_type: ctx.trace_type.name().to_string(),
                group_name: ctx.group_name,
                client_host: client_host.to_string(),
                time_stamp: ctx.time_stamp,
                cost_time: ctx.cost_time,
                status: if ctx.success { "success" } else { "failed" }.to_string(),
                msg_id: bean.msg_id,
                offset_msg_id: bean.offset_msg_id,
                topic: bean.topic,
                tags: bean.tags,
                keys: bean.keys,
                store_host: bean.store_host,
            })
        })
        .collect())
}

/// What `query_traces` found: the records about the message, and the trace messages
/// that did not decode (offset id and why), skipped so one bad message hides nothing.
#[derive(Debug, Clone, Default)]
pub struct TraceQuery {
    pub views: Vec<TraceView>,
    pub undecodable: Vec<String>,
}

/// mqadmin's `queryMsgTraceById`: the trace messages keyed by `msg_id` in `trace_topic`
/// (at most `max_num` per broker, stored within `stored_ms`), decoded; the records of
/// other messages they hold are left out.
pub async fn query_traces(instance: &Rc<ClientInstance>, trace_topic: &str, msg_id: &str, max_num: i32, stored_ms: (i64, i64)) -> Result<TraceQuery> {
    let found = query_by_key_between(instance, trace_topic, msg_id, max_num, stored_ms, usize::MAX).await?;
    let mut out = TraceQuery::default();
    for m in &found {
        match trace_views(msg_id, m) {
            Ok(views) => out.views.extend(views),
            Err(e) => out.undecodable.push(format!("{}: {e}", m.offset_msg_id)),
        }
    }
    Ok(out)
}

/// The stored record with offset message id `id` (VIEW_MESSAGE_BY_ID at the host it
/// names), as the broker sent it.
pub async fn view_record(instance: &Rc<ClientInstance>, id: &str) -> Result<Vec<u8>> {
    let (host, offset) = ringmq_client::msgid::decode_offset_msg_id(id).ok_or_else(|| QueryError::BadInput(format!("{id} is not an offset message id (host + CommitLog offset)")))?;
    let addr = host.to_string();
    let r = call(instance, &addr, RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", offset.to_string())).await?;
    Ok(r.body.to_vec())
}

/// The message with offset message id `id`.
pub async fn view_by_offset_id(instance: &Rc<ClientInstance>, id: &str, body_preview_max: usize) -> Result<MessageDetail> {
    let record = view_record(instance, id).await?;
    let v = StoredMessageView::parse_verified(&record).map_err(|e| QueryError::Decode(format!("message {id}: {e}")))?;
    Ok(MessageDetail::of(&v, body_preview_max))
}

/// PULL_MESSAGE of up to `max` messages of one queue from `offset` (no consumer group
/// state: the admin reads, it never commits). Returns the records and the next offset.
pub async fn pull(instance: &Rc<ClientInstance>, addr: &str, topic: &str, queue_id: i32, offset: i64, max: i32) -> Result<(Vec<u8>, Option<i64>)> {
    let header = PullMessageRequestHeader {
        consumer_group: ADMIN_PULL_GROUP.into(),
        topic: topic.to_string(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: None,
        sub_version: 0,
        expression_type: None,
        max_msg_bytes: None,
    };
    let r = instance.invoke(addr, RemotingCommand::request(rq::PULL_MESSAGE).with_header(&header)).await.map_err(|e| at(addr, e))?;
    let next = r.ext("nextBeginOffset").and_then(|n| n.parse().ok());
    match r.code {
        rs::SUCCESS => Ok((r.body.to_vec(), next)),
        rs::PULL_NOT_FOUND | rs::PULL_RETRY_IMMEDIATELY | rs::PULL_OFFSET_MOVED => Ok((Vec::new(), next)),
        code => Err(QueryError::Refused { addr: addr.to_string(), request: rq::PULL_MESSAGE, code, remark: r.remark.unwrap_or_default() }),
    }
}

/// What `scan_queue` reads: up to `max` messages from queue offset `from` on, stopping
/// early at one stored after `until_ms`, bodies cut at `body_preview_max` bytes.
#[derive(Debug, Clone, Copy)]
pub struct Scan {
    pub from: i64,
    pub max: usize,
    pub until_ms: Option<i64>,
    pub body_preview_max: usize,
}

/// Messages of one queue, oldest first (see `Scan`), following a queue start that
/// retention moved.
pub async fn scan_queue(instance: &Rc<ClientInstance>, addr: &str, topic: &str, queue_id: i32, scan: Scan) -> Result<Vec<MessageDetail>> {
    let Scan { from, max, until_ms, body_preview_max } = scan;
    let mut out = Vec::new();
    let mut offset = from;
    while out.len() < max {
        let want = (max - out.len()).min(PULL_BATCH_MAX as usize) as i32;
        let (records, next) = pull(instance, addr, topic, queue_id, offset, want).await?;
        if records.is_empty() {
            match next {
                Some(n) if n > offset => {
                    offset = n;
                    continue;
                }
                _ => break,
            }
        }
        for m in decode_records(addr, &records, body_preview_max)? {
            offset = m.queue_offset + 1;
            if until_ms.is_some_and(|u| m.store_timestamp > u) {
                return Ok(out);
            }
            out.push(m);
            if out.len() >= max {
                break;
            }
        }
    }
    Ok(out)
}

/// Messages of `topic` stored in `[begin_ms, end_ms]`: on each readable queue the first
/// offset at or after `begin_ms` (SEARCH_OFFSET_BY_TIMESTAMP), then pulls from there;
/// at most `max` in all, sorted by store time.
pub async fn query_by_time(instance: &Rc<ClientInstance>, topic: &str, begin_ms: i64, end_ms: i64, max: usize, body_preview_max: usize) -> Result<Vec<MessageDetail>> {
    let route = instance.fetch_route(topic).await?;
    let mut out = Vec::new();
    for q in &route.read_queues {
        if out.len() >= max {
            break;
        }
        let Some(addr) = route.master_addrs.get(&q.broker_name) else { continue };
        let start = ringmq_client::consumer::kernel::search_offset(instance, q, begin_ms).await.map_err(|e| at(addr, e))?;
        let scan = Scan { from: start, max: max - out.len(), until_ms: Some(end_ms), body_preview_max };
        let found = scan_queue(instance, addr, topic, q.queue_id, scan).await?;
        out.extend(found.into_iter().filter(|m| m.store_timestamp >= begin_ms));
    }
    out.sort_by_key(|m| (m.store_timestamp, m.commit_log_offset));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::message::compression::compress;
    use ringmq_client::message::stored::StoredMessage;

    /// A stored record with `sys_flag` and `body`, shown with a 16-byte preview:
    /// check(sys_flag, stored body, expected (body, body_bytes, compression, error?)).
    fn check(sys_flag: i32, stored: Vec<u8>, expected: (&str, usize, Option<&str>, bool)) {
        let stored_len = stored.len();
        let mut raw = Vec::new();
        StoredMessage { sys_flag, body: stored, topic: "T".into(), ..Default::default() }.encode_into(&mut raw);
        let v = StoredMessageView::parse_verified(&raw).unwrap();
        let m = MessageDetail::of(&v, 16);
        assert_eq!((m.body.as_str(), m.body_bytes, m.body_compression, m.body_error.is_some()), expected, "sysFlag {sys_flag:#x}");
        assert_eq!((m.stored_body_bytes, m.sys_flag), (stored_len, sys_flag), "stored facts as stored");
    }

    #[test]
    fn compressed_bodies_are_shown_decompressed() {
        let original = "operators read this, not zlib ".repeat(200);
        let n = original.len();
        for codec in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
            check(codec.sys_flag_bits(), compress(codec, 5, original.as_bytes()).unwrap(), ("operators read t", n, Some(codec.name()), false));
        }
        check(0, original.clone().into_bytes(), ("operators read t", n, None, false));
        check(0x301, b"garbage, not zlib".to_vec(), ("garbage, not zli", 17, Some("zlib"), true));
        check(0x501, b"unknown type".to_vec(), ("unknown type", 12, Some("unknown"), true));
    }
}
