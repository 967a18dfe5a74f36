//! The requests of Apache RocketMQ's admin tools (mqadmin, rocketmq-dashboard):
//! GET_TOPIC_STATS_INFO, GET_CONSUME_STATS, GET_CONSUMER_CONNECTION_LIST,
//! QUERY_TOPIC_CONSUME_BY_WHO, GET_TOPIC_CONFIG and DELETE_SUBSCRIPTIONGROUP, answered
//! as Java's `AdminBrokerProcessor` answers them (codes, remarks, fastjson bodies).
//!
//! Queue offsets and consumer offsets are per shard (each shard owns its queues), so a
//! whole-broker answer is gathered as GET_BROKER_RUNTIME_INFO's is: the shard a request
//! arrived on asks every other shard with the same request marked `ringmqLocalOnly`
//! (stripped from client requests) and merges the answers. A per-shard answer is plain
//! JSON private to the broker; only the merged answer has RocketMQ's form.
//! Consumer connections and subscriptions need no hop: every shard holds a full replica.
//!
//! What RingMQ does not have is reported as zero: `topicPutTps`, `consumeTps` (no
//! per-topic TPS statistics); `pullOffset` is the committed offset (no separate pull
//! offsets). A store time that cannot be read (read error) is reported as 0 and logged.

use super::{error_response, ConnCtx, Shard};
use crate::routing::queue_owner;
use ringmq_client::remoting::admin::{ConsumeStats, GroupList, OffsetWrapper, TopicOffset, TopicStatsTable};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::heartbeat::{tags, MessageModel};
use std::collections::BTreeSet;
use std::rc::Rc;

/// Marks a per-shard sub-request (its value says which part is asked).
pub const LOCAL_ONLY_EXT: &str = "ringmqLocalOnly";
/// Topics of a per-shard GET_CONSUME_STATS, `;`-separated (as Java's `topicList`).
pub const TOPICS_EXT: &str = "ringmqTopics";
/// The caller (remote address) of a request that changes state, recorded by the shard
/// holding the connection so the shard that runs it (the metadata owner, for table
/// changes) can log who asked; stripped from client requests.
pub const CALLER_EXT: &str = "ringmqCaller";
/// Requests that change state: each is logged with its caller (`CALLER_EXT`).
pub const CALLER_LOGGED_CODES: [i32; 6] = [
    rq::UPDATE_AND_CREATE_TOPIC,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::UPDATE_BROKER_CONFIG,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
];
/// Who asked for `cmd`, for the log: the stamped caller, or "internal" for a request the
/// broker made itself (`call_internal`, never stamped).
pub(super) fn caller_of(cmd: &RemotingCommand) -> &str {
    cmd.ext(CALLER_EXT).unwrap_or("internal")
}

/// Separator of Java's `topicList` header field (GET_CONSUME_STATS).
const TOPIC_LIST_SEPARATOR: char = ';';

fn required<'a>(cmd: &'a RemotingCommand, key: &str) -> Result<&'a str, RemotingCommand> {
    match cmd.ext(key).map(str::trim) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(error_response(cmd, rs::INVALID_PARAMETER, format!("missing header field {key}"))),
    }
}

pub(super) fn json_response(cmd: &RemotingCommand, body: Vec<u8>) -> RemotingCommand {
    let mut r = cmd.create_response(rs::SUCCESS, None);
    r.body = body.into();
    r
}

fn topic_config_json(t: &crate::meta::topics::TopicConfig) -> Vec<u8> {
    // The same TopicConfig GET_ALL_TOPIC_CONFIG writes; `mappingDetail` is absent, as
    // fastjson omits a null.
    let mut c = ringmq_client::remoting::route::TopicConfig::new(&t.name);
    c.read_queue_nums = t.read_queue_nums as i32;
    c.write_queue_nums = t.write_queue_nums as i32;
    c.perm = t.perm as i32;
    c.order = t.order;
    c.topic_sys_flag = t.topic_sys_flag as i32;
    ringmq_client::remoting::json::to_json(&c)
}

impl<R: crate::rt::Runtime> Shard<R> {
    /// Asks every other shard for its part of `cmd` (marked `LOCAL_ONLY_EXT = part`)
    /// and returns their JSON answers; a shard that fails makes the whole answer fail.
    pub(super) async fn gather(self: &Rc<Self>, cmd: &RemotingCommand, part: &str) -> Result<Vec<serde_json::Value>, RemotingCommand> {
        let mut parts = Vec::new();
        for shard in (0..self.place.count).filter(|&s| s != self.place.id) {
            let r = self.mesh.call(shard, cmd.clone().with_ext(LOCAL_ONLY_EXT, part)).await;
            if r.code != rs::SUCCESS {
                return Err(error_response(cmd, r.code, r.remark.unwrap_or_default()));
            }
            if r.body.is_empty() {
                // A part that only acts (offsets removed) answers no body.
                parts.push(serde_json::Value::Null);
                continue;
            }
            match serde_json::from_slice(&r.body) {
                Ok(v) => parts.push(v),
                Err(e) => return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("shard {shard} answered badly: {e}"))),
            }
        }
        Ok(parts)
    }

    /// Java's `getMessageStoreTimeStamp`, 0 when there is none or it cannot be read.
    async fn store_time_or_zero(&self, topic: &str, queue_id: i32, offset: u64) -> i64 {
        match self.store.store_time_at(topic, queue_id, offset).await {
            Ok(t) => t.unwrap_or(0).max(0),
            Err(e) => {
                tracing::warn!(shard = self.place.id, topic, queue_id, offset, error = %e, "store time not readable: reported as 0");
                0
            }
        }
    }

    /// GET_TOPIC_STATS_INFO: min/max offset and last store time of every queue.
    pub(super) async fn handle_topic_stats(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let topic = match required(cmd, "topic") {
            Ok(t) => t,
            Err(r) => return r,
        };
        let Some(config) = self.topic(topic) else {
            return error_response(cmd, rs::TOPIC_NOT_EXIST, format!("topic[{topic}] not exist"));
        };
        // This shard's queues as [queueId, min, max, lastUpdateTimestamp].
        let mut rows = Vec::new();
        for q in (0..config.read_queue_nums.max(config.write_queue_nums) as i32).filter(|&q| queue_owner(topic, q, self.place.count) == self.place.id) {
            let (min, max) = (self.store.min_offset(topic, q), self.store.max_offset(topic, q));
            let ts = if max > 0 { self.store_time_or_zero(topic, q, max - 1).await } else { 0 };
            rows.push(serde_json::json!([q, min, max, ts]));
        }
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            return json_response(cmd, serde_json::Value::Array(rows).to_string().into_bytes());
        }
        let others = match self.gather(cmd, "1").await {
            Ok(v) => v,
            Err(r) => return r,
        };
        let mut table = TopicStatsTable::default();
        let all = others.iter().filter_map(|v| v.as_array()).flatten().chain(rows.iter());
        for row in all {
            let n = |i: usize| row[i].as_i64().unwrap_or(0);
            let mq = self.client_queue(topic, n(0) as i32);
            table.offset_table.insert(mq, TopicOffset { min_offset: n(1), max_offset: n(2), last_update_timestamp: n(3) });
        }
        json_response(cmd, table.encode())
    }

    /// GET_CONSUME_STATS: per queue of each topic the group consumes, the queue's end and
    /// the group's committed offset (0 when none, as Java for a non-static topic).
    pub(super) async fn handle_consume_stats(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let group = match required(cmd, "consumerGroup") {
            Ok(g) => g,
            Err(r) => return r,
        };
        match cmd.ext(LOCAL_ONLY_EXT) {
            Some("topics") => {
                let topics: BTreeSet<String> = self.offsets.table.borrow().group_offsets(group).map(|(t, _, _)| t.to_string()).collect();
                return json_response(cmd, serde_json::json!(topics).to_string().into_bytes());
            }
            Some(_) => {
                let topics: Vec<&str> = cmd.ext(TOPICS_EXT).unwrap_or("").split(TOPIC_LIST_SEPARATOR).filter(|t| !t.is_empty()).collect();
                let rows = self.local_consume_rows(group, &topics).await;
                return json_response(cmd, serde_json::Value::Array(rows).to_string().into_bytes());
            }
            None => {}
        }
        // Which topics: Java's `getTopicsForCollectingConsumeStats`.
        let listed: Vec<String> = cmd.ext("topicList").unwrap_or("").split(TOPIC_LIST_SEPARATOR).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect();
        let mut topics: BTreeSet<String> = listed.iter().cloned().collect();
        if listed.is_empty() {
            match cmd.ext("topic").map(str::trim).filter(|t| !t.is_empty()) {
                Some(t) => {
                    topics.insert(t.to_string());
                }
                None => {
                    topics.extend(self.offsets.table.borrow().group_offsets(group).map(|(t, _, _)| t.to_string()));
                    let others = match self.gather(cmd, "topics").await {
                        Ok(v) => v,
                        Err(r) => return r,
                    };
                    topics.extend(others.iter().filter_map(|v| v.as_array()).flatten().filter_map(|t| t.as_str().map(str::to_string)));
                }
            }
            // An online group's offsets of topics it no longer subscribes to are left out.
            let consumers = self.clients.consumers.borrow();
            if let Some((info, _)) = consumers.online_group(group) {
                if !info.subscriptions.is_empty() {
                    topics.retain(|t| info.subscriptions.contains_key(t));
                }
            }
        }
        let known: Vec<String> = topics
            .into_iter()
            .filter(|t| {
                let known = self.topic(t).is_some();
                if !known {
                    tracing::warn!(topic = %t, group, "consume stats: topic config does not exist");
                }
                known
            })
            .collect();
        let names: Vec<&str> = known.iter().map(String::as_str).collect();
        let mut rows = self.local_consume_rows(group, &names).await;
        let scoped = cmd.clone().with_ext(TOPICS_EXT, names.join(";"));
        match self.gather(&scoped, "1").await {
            Ok(others) => rows.extend(others.into_iter().filter_map(|v| v.as_array().cloned()).flatten()),
            Err(r) => return r,
        }
        let mut stats = ConsumeStats::default();
        for row in rows {
            let n = |i: usize| row[i].as_i64().unwrap_or(0);
            let mq = self.client_queue(row[0].as_str().unwrap_or_default(), n(1) as i32);
            let w = OffsetWrapper { broker_offset: n(2), consumer_offset: n(3), last_timestamp: n(4), pull_offset: n(3) };
            stats.offset_table.insert(mq, w);
        }
        json_response(cmd, stats.encode())
    }

    /// This shard's queues of `topics` (read queues, as Java) as
    /// [topic, queueId, brokerOffset, consumerOffset, lastTimestamp].
    async fn local_consume_rows(&self, group: &str, topics: &[&str]) -> Vec<serde_json::Value> {
        let mut rows = Vec::new();
        for &topic in topics {
            let Some(config) = self.topic(topic) else { continue };
            for q in (0..config.read_queue_nums as i32).filter(|&q| queue_owner(topic, q, self.place.count) == self.place.id) {
                let broker_offset = self.store.max_offset(topic, q);
                let consumer_offset = self.offsets.table.borrow().query(group, topic, q).unwrap_or(0);
                let ts = if consumer_offset > 0 { self.store_time_or_zero(topic, q, consumer_offset - 1).await } else { 0 };
                rows.push(serde_json::json!([topic, q, broker_offset, consumer_offset, ts]));
            }
        }
        rows
    }

    /// GET_CONSUMER_CONNECTION_LIST: RocketMQ's `ConsumerConnection` of a group, or
    /// CONSUMER_NOT_ONLINE.
    pub(super) fn handle_consumer_connections(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let group = match required(cmd, "consumerGroup") {
            Ok(g) => g,
            Err(r) => return r,
        };
        let consumers = self.clients.consumers.borrow();
        let Some((info, clients)) = consumers.online_group(group) else {
            return error_response(cmd, rs::CONSUMER_NOT_ONLINE, format!("the consumer group[{group}] not online"));
        };
        let set: Vec<serde_json::Value> = clients
            .iter()
            .map(|(id, c)| {
                serde_json::json!({
                    "clientAddr": c.remote.map(|a| a.to_string()).unwrap_or_default(),
                    "clientId": id,
                    "language": c.language,
                    "version": c.version,
                })
            })
            .collect();
        let subscriptions: serde_json::Map<String, serde_json::Value> = info
            .subscriptions
            .iter()
            .map(|(topic, s)| {
                let v = serde_json::json!({
                    "classFilterMode": false,
                    "codeSet": s.codes,
                    "expressionType": s.expression_type,
                    "subString": s.sub_string,
                    "subVersion": s.sub_version,
                    "tagsSet": tags(&s.sub_string),
                    "topic": topic,
                });
                (topic.clone(), v)
            })
            .collect();
        let model = if info.broadcasting { MessageModel::Broadcasting } else { MessageModel::Clustering };
        let body = serde_json::json!({
            "connectionSet": set,
            "consumeFromWhere": info.consume_from_where.java_name(),
            "consumeType": info.consume_type.java_name(),
            "messageModel": model.java_name(),
            "subscriptionTable": subscriptions,
        });
        json_response(cmd, body.to_string().into_bytes())
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO: groups with a live subscriber of the topic and
    /// groups with offsets of it (on any shard).
    pub(super) async fn handle_consume_by_who(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let topic = match required(cmd, "topic") {
            Ok(t) => t,
            Err(r) => return r,
        };
        let mut groups = self.offsets.table.borrow().groups_of_topic(topic);
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            return json_response(cmd, serde_json::json!(groups).to_string().into_bytes());
        }
        groups.extend(self.clients.consumers.borrow().groups_subscribing(topic));
        match self.gather(cmd, "1").await {
            Ok(others) => groups.extend(others.iter().filter_map(|v| v.as_array()).flatten().filter_map(|g| g.as_str().map(str::to_string))),
            Err(r) => return r,
        }
        json_response(cmd, GroupList { group_list: groups.into_iter().collect() }.encode())
    }

    /// GET_TOPIC_CONFIG: RocketMQ's `TopicConfigAndQueueMapping` (no queue mapping here).
    pub(super) fn handle_topic_config(&self, cmd: &RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        let topic = match required(cmd, "topic") {
            Ok(t) => t,
            Err(r) => return r,
        };
        let Some(config) = self.topic(topic) else {
            tracing::debug!(topic, client = ?ctx.remote, "GET_TOPIC_CONFIG: no such topic");
            return error_response(cmd, rs::TOPIC_NOT_EXIST, format!("No topic in this broker. topic: {topic}"));
        };
        // Shard route mode: this shard-broker's queues of the topic.
        let mut config = config;
        config.read_queue_nums = self.client_queue_count(topic, config.read_queue_nums);
        config.write_queue_nums = self.client_queue_count(topic, config.write_queue_nums);
        json_response(cmd, topic_config_json(&config))
    }

    /// DELETE_SUBSCRIPTIONGROUP (metadata owner): removes the group's config (SUCCESS
    /// whether or not it existed, as Java) and, with `cleanOffset`, its offsets on every
    /// shard. The per-shard part (`LOCAL_ONLY_EXT`) only removes offsets.
    pub(super) async fn handle_delete_group(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let group = match required(cmd, "groupName") {
            Ok(g) => g,
            Err(r) => return r,
        };
        if let Err(e) = crate::meta::validate_group_name(group) {
            return error_response(cmd, rs::INVALID_PARAMETER, format!("groupName {group:?}: {e}"));
        }
        let clean = cmd.ext("cleanOffset").is_some_and(ringmq_client::remoting::json::de::parse_bool);
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            let removed = self.offsets.table.borrow_mut().remove_group(group);
            tracing::debug!(shard = self.place.id, group, removed, "consumer offsets of a deleted group removed");
            return cmd.create_response(rs::SUCCESS, None);
        }
        tracing::info!(group, clean_offset = clean, caller = caller_of(cmd), "delete subscription group");
        let now_ms = self.now_ms();
        match self.change_groups(cmd, |table| Ok(table.remove(group, now_ms).is_some())).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(group, "delete subscription group: no such group"),
            Err(r) => return r,
        }
        if clean {
            self.offsets.table.borrow_mut().remove_group(group);
            if let Err(r) = self.gather(cmd, "1").await {
                return r;
            }
        }
        cmd.create_response(rs::SUCCESS, None)
    }

    /// GET_BROKER_CONFIG: the configuration as RocketMQ broker.conf properties (Java's
    /// `properties2String`), and the `version` DataVersion Java sends with it (settings
    /// never change at runtime: counter 0, stamped at start-up).
    pub(super) fn handle_get_broker_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let mut text = String::new();
        for (k, v) in self.config().to_broker_conf() {
            text.push_str(&format!("{k}={v}\n"));
        }
        text.push_str(&format!("shardCount={}\n", self.place.count));
        let mut r = cmd.create_response(rs::SUCCESS, None);
        let version = ringmq_client::remoting::route::DataVersion { counter: 0, state_version: 0, timestamp: self.stats.started_ms() };
        r.ext_fields.insert("version".into(), String::from_utf8_lossy(&ringmq_client::remoting::json::to_json(&version)).into_owned());
        r.body = text.into_bytes().into();
        r
    }

    /// UPDATE_BROKER_CONFIG (on the metadata owner): runtime keys
    /// (`config::RUNTIME_CONF_KEYS`) are applied on every shard before the answer, and
    /// kept for the next start; a body naming any other key changes nothing and is
    /// refused naming it, with NO_PERMISSION (Java's code for a key that may not change
    /// at runtime). A new `brokerPermission` is told to the NameServers at once. Logged
    /// with the caller.
    pub(super) async fn handle_update_broker_config(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let caller = caller_of(cmd).to_string();
        let body = String::from_utf8_lossy(&cmd.body).into_owned();
        let pairs = match crate::config::parse_runtime_update(&body) {
            Ok(p) => p,
            Err(e) => {
                tracing::info!(caller, error = %e, "broker config update refused");
                let code = match e {
                    crate::config::RuntimeUpdateError::NotRuntime { .. } => rs::NO_PERMISSION,
                    crate::config::RuntimeUpdateError::Empty | crate::config::RuntimeUpdateError::Syntax(_) => rs::INVALID_PARAMETER,
                    crate::config::RuntimeUpdateError::BadValue { .. } => rs::SYSTEM_ERROR,
                };
                return error_response(cmd, code, e.to_string());
            }
        };
        let Some(meta) = &self.meta.stores else {
            crate::fatal::fatal(&format!("UPDATE_BROKER_CONFIG routed to shard {}, not the metadata owner", self.place.id));
        };
        let _writer = match meta.lock.lock() {
            Ok(w) => w.await,
            Err(e) => return error_response(cmd, rs::SYSTEM_BUSY, format!("broker config: {e}")),
        };
        // Kept first: a crash after this applies the change at the next start.
        let store = crate::meta::snapshot::SnapshotStore::new(self.rt.disk(), self.config().store_root.join("config"), super::RUNTIME_CONFIG_SNAPSHOT);
        let mut kept: Vec<(String, String)> = match store.load().await {
            Ok(Some(b)) => crate::config::parse_runtime_update(&String::from_utf8_lossy(&b)).unwrap_or_default(),
            Ok(None) => Vec::new(),
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("runtime config could not be read: {e}")),
        };
        for (k, v) in &pairs {
            kept.retain(|(kk, _)| kk != k);
            kept.push((k.clone(), v.clone()));
        }
        let text: String = kept.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        if let Err(e) = store.save(text.as_bytes()).await {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("runtime config could not be saved: {e}"));
        }
        let before = self.config();
        let event = super::mesh::ShardEvent::RuntimeConfig { pairs: pairs.clone() };
        self.mesh.broadcast_and_wait(event.clone()).await;
        self.apply_event(event);
        let after = self.config();
        tracing::info!(caller, keys = ?pairs, "broker config updated at runtime on every shard");
        if before.broker_permission != after.broker_permission {
            drop(_writer);
            // The NameServers take a registration's topic perms only when its data
            // version moved (Java bumps it here too).
            let now = self.now_ms();
            if let Err((code, e)) = self.update_topics(|t| {
                t.touch(now);
                Ok(())
            })
            .await
            {
                return error_response(cmd, code, e);
            }
            let shard = self.clone();
            self.rt.spawn(async move { shard.register_now().await });
        }
        cmd.create_response(rs::SUCCESS, None)
    }
}
