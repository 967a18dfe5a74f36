//! Client management and metadata requests: HEART_BEAT, UNREGISTER_CLIENT,
//! GET_CONSUMER_LIST_BY_GROUP, UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER,
//! GET_ALL_TOPIC_CONFIG, GET_BROKER_RUNTIME_INFO.
//!
//! Bodies are Java's classes as fastjson writes them (every field, sorted keys, Java's
//! defaults for what RingMQ does not keep), so strict decoders read them: GET_ALL_TOPIC_CONFIG
//! is `TopicConfigAndMappingSerializeWrapper` with `totalTopicNum`, the group answers are
//! `SubscriptionGroupConfig` / `SubscriptionGroupWrapper` (with `forbiddenTable` and
//! `totalGroupNum`), every `DataVersion` has `stateVersion`. Requests that change state
//! log their caller (`admin_tools::CALLER_EXT`, stamped where the connection is).
//!
//! Invariant: the topic table changes only on `META_OWNER_SHARD`, which persists it
//! before answering and then broadcasts the new version to every replica. A created or
//! updated topic is registered with the NameServers before the answer, as Java does.
//! Invariant: host metadata has one writer: every change of the topic or group table
//! reads, modifies, saves and installs it under the metadata lock (bounded queue of
//! waiting writers), so concurrent creates all succeed and none is lost; no table or
//! snapshot store is ever taken out of the shard across an await.

use super::mesh::ShardEvent;
use super::{error_response, ConnCtx, Shard};
use crate::meta::topics::{TopicConfig, TopicTable};
use ringmq_client::remoting::bodies::{ConsumerList, JsonBody};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::CreateTopicRequestHeader;
use ringmq_client::remoting::heartbeat::HeartbeatData;
use ringmq_client::remoting::route::{self, TopicConfigAndMappingSerializeWrapper, TopicConfigSerializeWrapper};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Runtime-info counters that are summed over shards.
const SUMMED_COUNTERS: [&str; 33] = [
    "putMessageTimesTotal",
    "getMessageTransferedMsgCount",
    "requestsTotal",
    "forwardedOut",
    "forwardedIn",
    "suspendedPulls",
    "suspendedPullsRefusedTotal",
    "readErrorsTotal",
    "transactionOpen",
    "transactionHalfTotal",
    "transactionCommitTotal",
    "transactionRollbackTotal",
    "transactionCheckTotal",
    "transactionDiscardTotal",
    "transactionDuplicateEndTotal",
    "transactionExpiredTotal",
    "transactionCheckNoProducerTotal",
    "haSlaves",
    "haSlaveBehindBytes",
    "haBehindBytes",
    "storeMessagesTotal",
    "msgPutTotalTodayNow",
    "msgGetTotalTodayNow",
    "msgPutTotalTodayMorning",
    "msgPutTotalYesterdayMorning",
    "msgGetTotalTodayMorning",
    "msgGetTotalYesterdayMorning",
    "putMessageSizeTotal",
    "remainHowManyDataToFlush",
    "sendLatencySumUs",
    "scrubbedBytesTotal",
    "scrubCorruptRecordsTotal",
    "checkpointLagBytes",
];

/// Runtime info "a b c" TPS texts, summed component by component over the shards.
const TPS_VALUES: [&str; 3] = ["putTps", "getTransferredTps", "getTransferedTps"];

/// Runtime info values that are the maximum over the shards.
const MAXED_VALUES: [&str; 1] = ["haBehindMs"];

/// Runtime info histograms ("c0 c1 ... cN" counts per `latencyBucketBoundsUs` bucket, the
/// last one unbounded), summed bucket by bucket over the shards.
const BUCKET_VALUES: [&str; 1] = ["sendLatencyBucketsUs"];

/// Values the merged answer also carries per shard, as `shard.<id>.<key>`, so an
/// operator (the dashboard's cluster page) sees how load spreads over the shards. The
/// merged answer has `shardCount` × these extra keys; a local part has none.
const PER_SHARD_KEYS: [&str; 9] = [
    "putMessageTimesTotal",
    "getMessageTransferedMsgCount",
    "storeMessagesTotal",
    "putMessageSizeTotal",
    "remainHowManyDataToFlush",
    "commitLogDiskRatio",
    "suspendedPulls",
    "forwardedIn",
    "readErrorsTotal",
];

/// The request codes whose latency is runtime info's send latency.
const SEND_CODES: [i32; 3] = [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2, rq::SEND_BATCH_MESSAGE];

/// RocketMQ's limit on queues per topic.
pub const TOPIC_QUEUE_NUMS_MAX: u32 = 1024;

/// Java's `SubscriptionGroupWrapper` response header field: how many groups there are.
const TOTAL_GROUP_NUM_EXT: &str = "totalGroupNum";

/// A metadata table's version as Java's `DataVersion` (no state-machine version here).
pub(super) fn java_version(v: crate::meta::DataVersion) -> route::DataVersion {
    route::DataVersion { counter: v.counter as i64, state_version: 0, timestamp: v.timestamp_ms }
}

/// Java's `SubscriptionGroupConfig` as fastjson writes it: every field, keys sorted.
/// What RingMQ does not keep (orderly flag, retry policy, sys flag, consume timeout,
/// attributes; `consumeFromMinEnable`) is Java's default for a new group; `subscriptionDataSet`
/// is null in Java unless set, and fastjson omits nulls.
fn group_json(g: &crate::meta::groups::SubscriptionGroupConfig) -> serde_json::Value {
    // Written in sorted order so the bytes are fastjson's even if serde_json keeps
    // insertion order (its `preserve_order` feature may be on through another crate).
    serde_json::json!({
        "attributes": {},
        "brokerId": g.broker_id,
        "consumeBroadcastEnable": g.consume_broadcast_enable,
        "consumeEnable": g.consume_enable,
        "consumeFromMinEnable": true,
        "consumeMessageOrderly": false,
        "consumeTimeoutMinute": 15,
        "groupName": g.group_name,
        "groupRetryPolicy": { "type": "CUSTOMIZED" },
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": g.notify_consumer_ids_changed_enable,
        "retryMaxTimes": g.retry_max_times,
        "retryQueueNums": g.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": g.which_broker_when_consume_slowly,
    })
}

impl<R: crate::rt::Runtime> Shard<R> {
    /// HEART_BEAT: answered once every shard has applied it, so a consumer list or pull
    /// asked right after, on any shard, sees the client.
    pub(super) async fn handle_heartbeat(self: &Rc<Self>, cmd: &RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        let data = match HeartbeatData::decode(&cmd.body) {
            Ok(d) => d,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad heartbeat body: {e}")),
        };
        if !data.consumer_data_set.is_empty() || !data.producer_data_set.is_empty() {
            let origin = super::consumers::HeartbeatOrigin {
                conn_shard: self.place.id,
                conn_id: ctx.conn_id,
                remote: ctx.remote,
                language: cmd.language.clone(),
                version: cmd.version,
                at_ms: self.now_ms(),
            };
            // As RocketMQ: a clustering group's retry topic exists once its first
            // heartbeat is answered (consumers subscribe to it at once).
            for consumer in &data.consumer_data_set {
                if consumer.message_model == ringmq_client::remoting::heartbeat::MessageModel::Clustering {
                    let retry = super::sendback::retry_topic(&consumer.group_name);
                    if let Err((code, remark)) = self.ensure_topic(&retry, super::sendback::RETRY_QUEUE_NUMS).await {
                        return error_response(cmd, code, format!("retry topic {retry} could not be created: {remark}"));
                    }
                }
            }
            let event = ShardEvent::Heartbeat { client_id: data.client_id.clone(), data, origin };
            self.apply_event(event.clone());
            self.mesh.broadcast_and_wait(event).await;
        }
        cmd.create_response(rs::SUCCESS, None)
    }

    /// GET_PRODUCER_CONNECTION_LIST: RocketMQ's `ProducerConnection` JSON for a group.
    pub(super) fn handle_producer_connections(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(group) = cmd.ext("producerGroup") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field producerGroup");
        };
        let conns = self.clients.consumers.borrow().producer_conns(group);
        if conns.is_empty() {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("the producer group[{group}] not exist"));
        }
        let set: Vec<serde_json::Value> = conns
            .iter()
            .map(|c| {
                serde_json::json!({
                    "clientId": c.client_id,
                    "clientAddr": c.remote.map(|a| a.to_string()).unwrap_or_default(),
                    "language": c.language,
                    "version": c.version,
                })
            })
            .collect();
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = serde_json::json!({ "connectionSet": set }).to_string().into_bytes().into();
        r
    }

    pub(super) async fn handle_unregister_client(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(client_id) = cmd.ext("clientID") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field clientID");
        };
        let event = ShardEvent::ClientGone { client_id: client_id.to_string() };
        self.apply_event(event.clone());
        self.mesh.broadcast_and_wait(event).await;
        cmd.create_response(rs::SUCCESS, None)
    }

    pub(super) fn handle_consumer_list(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(group) = cmd.ext("consumerGroup") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field consumerGroup");
        };
        let members = self.clients.consumers.borrow().members(group);
        if members.is_empty() {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("no consumer for this group, {group}"));
        }
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = ConsumerList { consumer_id_list: members }.encode().into();
        r
    }

    pub(super) async fn handle_create_topic(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let header: CreateTopicRequestHeader = match cmd.header() {
            Ok(h) => h,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad create-topic header: {e}")),
        };
        // The system topics the broker makes itself (TRANS_CHECK_MAX_TIME_TOPIC) come
        // with a private field clients cannot set (stripped in `handle`).
        let broker_made = cmd.ext(super::SYSTEM_TOPIC_EXT).is_some() && crate::meta::topics::BROKER_CREATED_SYSTEM_TOPICS.contains(&header.topic.as_str());
        let name_ok = if broker_made { crate::meta::topics::check_topic_syntax(&header.topic) } else { crate::meta::topics::validate_topic_name(&header.topic) };
        if let Err(e) = name_ok {
            return error_response(cmd, rs::INVALID_PARAMETER, e.to_string());
        }
        let queues_ok = |n: i32| n > 0 && n as u32 <= TOPIC_QUEUE_NUMS_MAX;
        if !queues_ok(header.read_queue_nums) || !queues_ok(header.write_queue_nums) {
            return error_response(cmd, rs::INVALID_PARAMETER, format!("queue numbers must be in 1..={TOPIC_QUEUE_NUMS_MAX}"));
        }
        if !(0..=7).contains(&header.perm) {
            return error_response(cmd, rs::INVALID_PARAMETER, format!("perm {} is not a permission (2 write, 4 read, 6 rw)", header.perm));
        }
        // A retry topic the broker creates for a group takes the group's
        // `retryQueueNums` when the group is configured here (the metadata owner holds
        // the group table).
        let retry_queues = cmd
            .ext(super::sendback::RETRY_OF_GROUP_EXT)
            .and_then(|g| self.meta.groups.borrow().get(g).map(|c| c.retry_queue_nums.clamp(1, TOPIC_QUEUE_NUMS_MAX)));
        let config = TopicConfig {
            name: header.topic.clone(),
            read_queue_nums: retry_queues.unwrap_or(header.read_queue_nums as u32),
            write_queue_nums: retry_queues.unwrap_or(header.write_queue_nums as u32),
            perm: header.perm as u32,
            order: header.order,
            topic_sys_flag: header.topic_sys_flag.unwrap_or(0) as u32,
        };
        let now_ms = self.now_ms();
        if let Err((code, e)) = self.update_topics(|table| table.upsert(config, now_ms).map(|_| ()).map_err(|e| e.to_string())).await {
            return error_response(cmd, code, e);
        }
        let caller = super::admin_tools::caller_of(cmd);
        tracing::info!(topic = %header.topic, read = header.read_queue_nums, write = header.write_queue_nums, perm = header.perm, caller, "topic created or updated");
        // As Java's broker (`registerIncrementBrokerData`): tell the NameServers before
        // answering, so a client that created the topic can route to it at once rather
        // than after the next periodic registration. Bounded per NameServer by
        // `NAMESRV_CALL_TIMEOUT_MS`; a failure is logged, the periodic round retries.
        self.register_now().await;
        cmd.create_response(rs::SUCCESS, None)
    }

    /// DELETE_TOPIC_IN_BROKER, as Java's `deleteTopic`: a blank or system topic is
    /// INVALID_PARAMETER with Java's remarks; a topic that is not here is SUCCESS (nothing
    /// to delete: `mqadmin deleteTopic` asks every broker of the cluster). The topic's
    /// consume queues and every group's offsets of it go too, on every shard: created
    /// again, its queues start at 0. Its records stay in the CommitLog until retention.
    pub(super) async fn handle_delete_topic(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(topic) = cmd.ext("topic").map(str::trim).filter(|t| !t.is_empty()) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "The specified topic is blank.");
        };
        if cmd.ext(super::admin_tools::LOCAL_ONLY_EXT).is_some() {
            return match self.delete_topic_data(topic).await {
                Ok((queues, offsets)) => {
                    let mut r = cmd.create_response(rs::SUCCESS, None);
                    r.body = serde_json::json!([queues, offsets]).to_string().into_bytes().into();
                    r
                }
                Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e),
            };
        }
        let caller = super::admin_tools::caller_of(cmd);
        if crate::meta::topics::is_system_topic(topic) {
            tracing::info!(topic, caller, "topic deletion refused: a system topic");
            return error_response(cmd, rs::INVALID_PARAMETER, format!("The topic[{topic}] is conflict with system topic."));
        }
        let now_ms = self.now_ms();
        let removed = self.update_topics(|table| table.remove(topic, now_ms).map(|_| ()).ok_or_else(|| format!("topic[{topic}] not exist"))).await;
        // Java's deleteTopic: the topic's consume queues and every group's offsets of it
        // go too, on every shard (also when the table no longer had it: a delete that
        // failed half-way is finished by repeating it).
        let (mut queues, mut offsets) = match self.delete_topic_data(topic).await {
            Ok(v) => v,
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, e),
        };
        match self.gather(cmd, "data").await {
            Ok(parts) => {
                for p in parts {
                    queues += p[0].as_u64().unwrap_or(0) as usize;
                    offsets += p[1].as_u64().unwrap_or(0) as usize;
                }
            }
            Err(r) => return r,
        }
        match removed {
            Ok(()) => tracing::info!(topic, existed = true, caller, queues, offsets, "topic deleted from the broker: config, consume queues, consumer offsets"),
            // Not here (the change was refused before anything was written).
            Err((rs::INVALID_PARAMETER, _)) => tracing::info!(topic, existed = false, caller, queues, offsets, "topic deleted from the broker"),
            Err((code, e)) => return error_response(cmd, code, e),
        }
        cmd.create_response(rs::SUCCESS, None)
    }

    /// This shard's part of a topic deletion: its consume queues and its groups'
    /// offsets of the topic. Returns (queues, offsets) removed.
    async fn delete_topic_data(&self, topic: &str) -> Result<(usize, usize), String> {
        let offsets = self.offsets.table.borrow_mut().remove_topic(topic);
        let queues = self.store.delete_topic(topic).await.map_err(|e| format!("shard {}: consume queues of {topic} not deleted: {e}", self.place.id))?;
        Ok((queues, offsets))
    }

    /// The one writer of the topic table (metadata owner only): under the metadata
    /// lock, applies `change` to the current table, persists it, installs it and
    /// broadcasts it. `Err((code, remark))`: INVALID_PARAMETER when `change` refused,
    /// SYSTEM_BUSY when too many writers wait, SYSTEM_ERROR when it was not saved.
    pub(super) async fn update_topics(self: &Rc<Self>, change: impl FnOnce(&mut TopicTable) -> Result<(), String>) -> Result<(), (i32, String)> {
        let Some(meta) = &self.meta.stores else {
            crate::fatal::fatal(&format!("topic table change routed to shard {}, not the metadata owner", self.place.id));
        };
        let _writer = meta.lock.lock().map_err(|e| (rs::SYSTEM_BUSY, format!("topic table: {e}")))?.await;
        let mut table = self.meta.topics.borrow().clone();
        change(&mut table).map_err(|e| (rs::INVALID_PARAMETER, e))?;
        let encoded = table.encode().map_err(|e| (rs::SYSTEM_ERROR, e.to_string()))?;
        meta.topics.save(&encoded).await.map_err(|e| (rs::SYSTEM_ERROR, format!("topic table could not be saved: {e}")))?;
        *self.meta.topics.borrow_mut() = table;
        // Answered only once every shard holds the new table: a client that created a
        // topic can send to it through any shard at once (read-your-writes).
        let event = self.topics_event();
        self.mesh.broadcast_and_wait(event).await;
        Ok(())
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is RocketMQ's
    /// `SubscriptionGroupConfig` JSON; missing fields take RocketMQ's defaults.
    pub(super) async fn handle_create_group(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let value: serde_json::Value = match serde_json::from_slice(&cmd.body) {
            Ok(v) => v,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad subscription group body: {e}")),
        };
        let Some(name) = value.get("groupName").and_then(|v| v.as_str()) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "subscription group body has no groupName");
        };
        let mut config = crate::meta::groups::SubscriptionGroupConfig::new(name);
        let flag = |key: &str, default: bool| match value.get(key) {
            Some(serde_json::Value::Bool(b)) => *b,
            Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => default,
        };
        let number = |key: &str, default: u64| match value.get(key) {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(default),
            Some(serde_json::Value::String(s)) => s.trim().parse().unwrap_or(default),
            _ => default,
        };
        config.consume_enable = flag("consumeEnable", config.consume_enable);
        config.consume_broadcast_enable = flag("consumeBroadcastEnable", config.consume_broadcast_enable);
        config.notify_consumer_ids_changed_enable = flag("notifyConsumerIdsChangedEnable", config.notify_consumer_ids_changed_enable);
        config.retry_queue_nums = number("retryQueueNums", config.retry_queue_nums as u64) as u32;
        config.retry_max_times = number("retryMaxTimes", config.retry_max_times as u64) as u32;
        config.broker_id = number("brokerId", config.broker_id);
        config.which_broker_when_consume_slowly = number("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly);
        let now_ms = self.now_ms();
        let summary = format!("retryQueueNums={} retryMaxTimes={} consumeEnable={}", config.retry_queue_nums, config.retry_max_times, config.consume_enable);
        match self.change_groups(cmd, |table| table.upsert(config, now_ms).map(|()| true).map_err(|e| (rs::INVALID_PARAMETER, e.to_string()))).await {
            Ok(_) => {
                tracing::info!(group = name, config = %summary, caller = super::admin_tools::caller_of(cmd), "subscription group created or updated");
                cmd.create_response(rs::SUCCESS, None)
            }
            Err(r) => r,
        }
    }

    /// The one way the subscription group table changes (metadata owner): under the
    /// metadata lock, `change` edits a copy (returning whether it changed anything, or
    /// the code and remark to refuse with); a changed copy is saved, then installed.
    /// Returns whether it changed.
    pub(super) async fn change_groups(
        &self,
        cmd: &RemotingCommand,
        change: impl FnOnce(&mut crate::meta::groups::GroupTable) -> Result<bool, (i32, String)>,
    ) -> Result<bool, RemotingCommand> {
        let Some(meta) = &self.meta.stores else {
            crate::fatal::fatal(&format!("subscription group change routed to shard {}, not the metadata owner", self.place.id));
        };
        let _writer = match meta.lock.lock() {
            Ok(wait) => wait.await,
            Err(e) => return Err(error_response(cmd, rs::SYSTEM_BUSY, format!("subscription groups: {e}"))),
        };
        let mut table = self.meta.groups.borrow().clone();
        match change(&mut table) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err((code, remark)) => return Err(error_response(cmd, code, remark)),
        }
        let encoded = table.encode().map_err(|e| error_response(cmd, rs::SYSTEM_ERROR, e.to_string()))?;
        if let Err(e) = meta.groups.save(&encoded).await {
            return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("subscription groups could not be saved: {e}")));
        }
        *self.meta.groups.borrow_mut() = table;
        Ok(true)
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (metadata owner): Java's `SubscriptionGroupWrapper`
    /// (`forbiddenTable` is empty: RingMQ has no per-topic read bans) and `totalGroupNum`.
    /// The whole table whatever paging fields the request has, as a Java broker with
    /// `enableSplitMetadata=false` (its default) answers.
    pub(super) fn handle_all_group_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let groups = self.meta.groups.borrow();
        let table: serde_json::Map<String, serde_json::Value> = groups
            .groups
            .values()
            .map(|g| (g.group_name.clone(), group_json(g)))
            .collect();
        let version = serde_json::to_value(java_version(groups.version())).unwrap_or_default();
        let body = serde_json::json!({
            "dataVersion": version,
            "forbiddenTable": {},
            "subscriptionGroupTable": table,
        });
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.ext_fields.insert(TOTAL_GROUP_NUM_EXT.into(), groups.groups.len().to_string());
        r.body = body.to_string().into_bytes().into();
        r
    }

    pub(super) fn topics_event(&self) -> ShardEvent {
        let table = self.meta.topics.borrow();
        match table.encode() {
            Ok(encoded) => ShardEvent::Topics { version: table.version().counter, encoded },
            Err(e) => crate::fatal::fatal(&format!("topic table does not encode: {e}")),
        }
    }

    /// GET_SUBSCRIPTIONGROUP_CONFIG (metadata owner): one group's config as RocketMQ's
    /// `SubscriptionGroupConfig` JSON, or SUBSCRIPTION_GROUP_NOT_EXIST (26).
    pub(super) fn handle_group_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(name) = cmd.ext("group") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field group");
        };
        let groups = self.meta.groups.borrow();
        let Some(g) = groups.get(name) else {
            tracing::debug!(group = name, "GET_SUBSCRIPTIONGROUP_CONFIG: no such group");
            // Java's remark, word for word.
            return error_response(cmd, rs::SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker");
        };
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = group_json(g).to_string().into_bytes().into();
        r
    }

    /// Sends this shard's topic table to every other shard (at start-up).
    pub fn broadcast_topics(self: &Rc<Self>) {
        let event = self.topics_event();
        self.mesh.broadcast(event);
    }

    /// The topic table in RocketMQ's wire form (GET_ALL_TOPIC_CONFIG, REGISTER_BROKER).
    pub fn topic_config_wrapper(&self) -> TopicConfigSerializeWrapper {
        let table = self.meta.topics.borrow();
        let mut topic_config_table = BTreeMap::new();
        for t in table.topics.values() {
            // Shard route mode: this shard-broker's queues; a topic it has none of is
            // not its to announce.
            let (read, write) = (self.client_queue_count(&t.name, t.read_queue_nums), self.client_queue_count(&t.name, t.write_queue_nums));
            if self.route_mode() == crate::config::RouteMode::Shard && read == 0 && write == 0 {
                continue;
            }
            let mut c = route::TopicConfig::new(&t.name);
            c.read_queue_nums = read as i32;
            c.write_queue_nums = write as i32;
            c.perm = t.perm as i32;
            c.order = t.order;
            c.topic_sys_flag = t.topic_sys_flag as i32;
            topic_config_table.insert(t.name.clone(), c);
        }
        TopicConfigSerializeWrapper { data_version: java_version(table.version()), topic_config_table }
    }

    /// GET_ALL_TOPIC_CONFIG: Java's `TopicConfigAndMappingSerializeWrapper` and
    /// `totalTopicNum`. The whole table whatever paging fields the request has, as a Java
    /// broker with `enableSplitMetadata=false` (its default) answers; a paging client
    /// stops once it holds `totalTopicNum` topics.
    pub(super) fn handle_all_topic_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let TopicConfigSerializeWrapper { data_version, topic_config_table } = self.topic_config_wrapper();
        let total = topic_config_table.len();
        let body = TopicConfigAndMappingSerializeWrapper {
            data_version,
            // No static topics: the mapping table never changes after start-up.
            mapping_data_version: route::DataVersion { counter: 0, state_version: 0, timestamp: self.stats.started_ms() },
            topic_config_table,
            ..Default::default()
        };
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.ext_fields.insert(route::TOTAL_TOPIC_NUM_EXT.into(), total.to_string());
        r.body = body.encode().into();
        r
    }

    /// GET_BROKER_RUNTIME_INFO: a `{"table":{...}}` of string values, as Java's
    /// `KVTable`. Counters are summed over every shard (asked over the mesh with a
    /// scoped request); `shardId` names the shard that answered.
    pub(super) async fn handle_runtime_info(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let mut table = self.runtime_table();
        let mut per_shard = BTreeMap::new();
        if cmd.ext(super::admin_tools::LOCAL_ONLY_EXT).is_none() {
            let others = match self.gather(cmd, "1").await {
                Ok(others) => others,
                Err(r) => return r,
            };
            for key in PER_SHARD_KEYS {
                per_shard.insert(format!("shard.{}.{key}", self.place.id), table.get(key).cloned().unwrap_or_default());
            }
            for v in others {
                let id = v["table"]["shardId"].as_str().unwrap_or("?").to_string();
                for key in PER_SHARD_KEYS {
                    per_shard.insert(format!("shard.{id}.{key}"), v["table"][key].as_str().unwrap_or_default().to_string());
                }
                for key in SUMMED_COUNTERS {
                    let theirs = v["table"][key].as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    let ours = table.get(key).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    table.insert(key, (ours + theirs).to_string());
                }
                for key in TPS_VALUES {
                    let theirs = v["table"][key].as_str().unwrap_or_default();
                    let ours = table.get(key).cloned().unwrap_or_default();
                    table.insert(key, crate::metrics::stats::add_tps_text(&ours, theirs));
                }
                for key in MAXED_VALUES {
                    let theirs = v["table"][key].as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    let ours = table.get(key).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    table.insert(key, ours.max(theirs).to_string());
                }
                for key in BUCKET_VALUES {
                    let theirs = v["table"][key].as_str().unwrap_or_default();
                    let ours = table.get(key).cloned().unwrap_or_default();
                    table.insert(key, crate::metrics::stats::add_counts_text(&ours, theirs));
                }
            }
        }
        let mut table: BTreeMap<String, String> = table.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        table.extend(per_shard);
        let body = serde_json::json!({ "table": table });
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = body.to_string().into_bytes().into();
        r
    }

    fn runtime_table(&self) -> BTreeMap<&'static str, String> {
        let mut table = BTreeMap::new();
        let c = self.counters();
        table.insert("brokerVersionDesc", "RingMQ ".to_string() + env!("CARGO_PKG_VERSION"));
        table.insert("shardCount", self.place.count.to_string());
        table.insert("shardId", self.place.id.to_string());
        table.insert("bootTimestamp", self.stats.started_ms().to_string());
        table.insert("commitLogMinOffset", self.store.log_start().to_string());
        table.insert("commitLogMaxOffset", self.store.write_offset().to_string());
        table.insert("commitLogFlushedOffset", self.store.flushed_offset().to_string());
        table.insert("putMessageTimesTotal", c.messages_put.get().to_string());
        // RocketMQ's StoreStatsService figures (mqadmin brokerStatus / clusterList).
        {
            let stats = self.stats.call_stats();
            table.insert("putTps", stats.tps_text(true));
            let got = stats.tps_text(false);
            table.insert("getTransferredTps", got.clone());
            // Older mqadmin (clusterList) reads this spelling.
            table.insert("getTransferedTps", got);
            let ((put_today, got_today), (put_yesterday, got_yesterday)) = stats.mornings();
            table.insert("msgPutTotalTodayMorning", put_today.to_string());
            table.insert("msgPutTotalYesterdayMorning", put_yesterday.to_string());
            table.insert("msgGetTotalTodayMorning", got_today.to_string());
            table.insert("msgGetTotalYesterdayMorning", got_yesterday.to_string());
        }
        table.insert("msgPutTotalTodayNow", c.messages_put.get().to_string());
        table.insert("msgGetTotalTodayNow", c.messages_pulled.get().to_string());
        table.insert("putMessageSizeTotal", c.bytes_put.get().to_string());
        // Send latency (request arrival on this shard's socket to answer, forwarding
        // included), cumulative since start: a poller derives per-interval percentiles
        // from the difference of two samples, as Prometheus does with histograms.
        {
            let sends = self.stats.latency_of(&SEND_CODES);
            table.insert("sendLatencyBucketsUs", sends.counts.iter().map(u64::to_string).collect::<Vec<_>>().join(" "));
            table.insert("sendLatencySumUs", sends.sum_us.to_string());
            table.insert("latencyBucketBoundsUs", crate::metrics::LATENCY_BOUNDS_US.iter().map(u64::to_string).collect::<Vec<_>>().join(" "));
        }
        table.insert("commitLogDiskRatio", format!("{:.4}", self.store.stats().disk_used_permille as f64 / 1000.0));
        table.insert("remainHowManyDataToFlush", self.store.dirty_bytes().to_string());
        table.insert("brokerActive", "true".to_string());
        let up_s = (self.now_ms() - self.stats.started_ms()).max(0) / 1000;
        table.insert("runtime", format!("[ {} days, {} hours, {} minutes, {} seconds ]", up_s / 86_400, up_s / 3_600 % 24, up_s / 60 % 60, up_s % 60));
        table.insert("getMessageTransferedMsgCount", c.messages_pulled.get().to_string());
        table.insert("requestsTotal", c.requests.get().to_string());
        table.insert("forwardedOut", c.forwarded_out.get().to_string());
        table.insert("forwardedIn", c.forwarded_in.get().to_string());
        table.insert("consumerGroups", self.clients.consumers.borrow().group_count().to_string());
        table.insert("producerGroups", self.clients.consumers.borrow().producer_group_count().to_string());
        table.insert("flushDiskType", format!("{:?}", self.config().store.flush_mode));
        table.insert("refusingWrites", self.store.refusing_writes().to_string());
        table.insert("suspendedPulls", self.waiters.suspended().to_string());
        table.insert("suspendedPullsRefusedTotal", self.waiters.refused_total().to_string());
        table.insert("readErrorsTotal", self.store.stats().read_errors.to_string());
        table.insert("scrubbedBytesTotal", self.store.stats().scrubbed_bytes.to_string());
        table.insert("scrubCorruptRecordsTotal", self.store.stats().scrub_corrupt_records.to_string());
        table.insert("checkpointLagBytes", self.store.checkpoint_lag_bytes().to_string());
        let t = self.txn_counters();
        table.insert("transactionOpen", self.open_transactions().to_string());
        table.insert("transactionHalfTotal", t.halves.get().to_string());
        table.insert("transactionCommitTotal", t.commits.get().to_string());
        table.insert("transactionRollbackTotal", t.rollbacks.get().to_string());
        table.insert("transactionCheckTotal", t.checks.get().to_string());
        table.insert("transactionDiscardTotal", t.discards.get().to_string());
        table.insert("transactionDuplicateEndTotal", t.duplicate_ends.get().to_string());
        table.insert("transactionExpiredTotal", t.expired.get().to_string());
        table.insert("transactionCheckNoProducerTotal", t.checks_without_producer.get().to_string());
        // Replication: on a master, its slaves and how far the furthest behind is (bytes
        // of this shard's log not yet confirmed received); on a slave, how far it is
        // behind its master's end as last heard.
        let end = self.store.write_offset();
        let slaves = self.ha_slaves();
        table.insert("haSlaves", slaves.len().to_string());
        table.insert("haSlaveBehindBytes", slaves.iter().map(|(_, p)| end.saturating_sub(p.received)).max().unwrap_or(0).to_string());
        let s = self.ha_slave_state();
        let behind = if s.connected { crate::store::engine::local_of(s.master_end_phys).saturating_sub(end) } else { 0 };
        table.insert("haBehindBytes", behind.to_string());
        // How stale a slave's view is: the age of the newest record it holds while its
        // master has more (master's store clock vs this host's: same host in the
        // benchmarks; across hosts it includes their clock difference).
        let behind_ms = if behind > 0 && s.newest_store_ms > 0 { (self.now_ms() - s.newest_store_ms).max(0) } else { 0 };
        table.insert("haBehindMs", behind_ms.to_string());
        table.insert("storeMessagesTotal", self.store.messages_total().to_string());
        table.insert("haMasterConnected", s.connected.to_string());
        table
    }
}
