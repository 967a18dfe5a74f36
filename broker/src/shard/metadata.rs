//! Topic and subscription-group metadata requests: UPDATE_AND_CREATE_TOPIC,
//! DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG, GET_TOPIC_CONFIG,
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP,
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_SUBSCRIPTIONGROUP_CONFIG, and the topic
//! table's replication to the other shards and the NameServers.
//!
//! Bodies are Java's classes as fastjson writes them (every field, sorted keys, Java's
//! defaults for what RingMQ does not keep), so strict decoders read them: GET_ALL_TOPIC_CONFIG
//! is `TopicConfigAndMappingSerializeWrapper` with `totalTopicNum`, the group answers are
//! `SubscriptionGroupConfig` / `SubscriptionGroupWrapper` (with `forbiddenTable` and
//! `totalGroupNum`), every `DataVersion` has `stateVersion`. Requests that change state
//! log their caller (`admin::CALLER_EXT`, stamped where the connection is).
//!
//! Invariant: the topic table changes only on `META_OWNER_SHARD`, which persists it
//! before answering and then broadcasts the new version to every replica. A created or
//! updated topic is registered with the NameServers before the answer, as Java does.
//! Invariant: host metadata has one writer: every change of the topic or group table
//! reads, modifies, saves and installs it under the metadata lock (bounded queue of
//! waiting writers), so concurrent creates all succeed and none is lost; no table or
//! snapshot store is ever taken out of the shard across an await.

use crate::meta::topics::{TopicConfig, TopicTable};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::CreateTopicRequestHeader;
use ringmq_client::remoting::route::{self, TopicConfigAndMappingSerializeWrapper, TopicConfigSerializeWrapper};
use std::collections::BTreeMap;
use std::cell::RefCell;
use std::rc::Rc;
use super::mesh::ShardEvent;
use super::admin::*;
use super::{error_response, ConnCtx, Shard};

/// RocketMQ's limit on queues per topic.
pub const TOPIC_QUEUE_NUMS_MAX: u32 = 1024;

/// A private header field of the broker's own group auto-creation: create, but never
/// replace a group an operator configured (stripped from client requests in `handle`).
pub(super) const CREATE_IF_ABSENT_EXT: &str = "_ringmqCreateGroupIfAbsent";

/// Most groups one shard auto-creates at once; past it a first contact goes on with
/// Java's defaults and the group is created at its next contact.
const GROUPS_CREATING_MAX: usize = 64;

/// The groups Java's `SubscriptionGroupManager` creates at start, so tools using them
/// (mqadmin's TOOLS_CONSUMER, the self test) work with `autoCreateSubscriptionGroup=false`.
pub(super) const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

/// A `SubscriptionGroupConfig` JSON body (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) as Java's
/// fastjson binds it: missing fields take Java's defaults, numbers may be strings. Any
/// `attributes` entry is refused as Java refuses it (no group attribute exists).
pub(super) fn group_from_json(body: &[u8]) -> Result<crate::meta::groups::SubscriptionGroupConfig, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("bad subscription group body: {e}"))?;
    let Some(name) = value.get("groupName").and_then(|v| v.as_str()) else {
        return Err("subscription group body has no groupName".into());
    };
    let mut config = crate::meta::groups::SubscriptionGroupConfig::new(name);
    let flag = |key: &str, default: bool| match value.get(key) {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => default,
    };
    let number = |key: &str, default: i64| match value.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(serde_json::Value::String(s)) => s.trim().parse().unwrap_or(default),
        _ => default,
    };
    let unsigned = |key: &str, default: i64| -> Result<i64, String> {
        let n = number(key, default);
        if n < 0 {
            return Err(format!("{key} {n} is negative"));
        }
        Ok(n)
    };
    config.consume_enable = flag("consumeEnable", config.consume_enable);
    config.consume_from_min_enable = flag("consumeFromMinEnable", config.consume_from_min_enable);
    config.consume_broadcast_enable = flag("consumeBroadcastEnable", config.consume_broadcast_enable);
    config.consume_message_orderly = flag("consumeMessageOrderly", config.consume_message_orderly);
    config.notify_consumer_ids_changed_enable = flag("notifyConsumerIdsChangedEnable", config.notify_consumer_ids_changed_enable);
    config.retry_queue_nums = unsigned("retryQueueNums", config.retry_queue_nums as i64)?.min(u32::MAX as i64) as u32;
    config.retry_max_times = unsigned("retryMaxTimes", config.retry_max_times as i64)?.min(u32::MAX as i64) as u32;
    config.broker_id = unsigned("brokerId", config.broker_id as i64)? as u64;
    config.which_broker_when_consume_slowly = unsigned("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly as i64)? as u64;
    config.consume_timeout_minute = unsigned("consumeTimeoutMinute", config.consume_timeout_minute as i64)?.min(u32::MAX as i64) as u32;
    config.group_sys_flag = number("groupSysFlag", 0).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    if let Some(policy) = value.get("groupRetryPolicy").filter(|p| !p.is_null()) {
        config.group_retry_policy_json = policy.to_string();
    }
    if let Some(attrs) = value.get("attributes").and_then(|a| a.as_object()).filter(|a| !a.is_empty()) {
        // Java: `AttributeUtil.alterCurrentAttributes` with `SubscriptionGroupAttributes.ALL`
        // empty refuses every key.
        let key = attrs.keys().next().map(|k| k.trim_start_matches(['+', '-'])).unwrap_or_default();
        return Err(format!("unsupported key: {key}"));
    }
    Ok(config)
}

/// Java's `SubscriptionGroupWrapper` response header field: how many groups there are.
const TOTAL_GROUP_NUM_EXT: &str = "totalGroupNum";

/// A metadata table's version as Java's `DataVersion` (no state-machine version here).
pub(super) fn java_version(v: crate::meta::DataVersion) -> route::DataVersion {
    route::DataVersion { counter: v.counter as i64, state_version: 0, timestamp: v.timestamp_ms }
}

/// Java's `SubscriptionGroupConfig` as fastjson writes it: every field, keys sorted.
/// `attributes` is always empty (Java's `SubscriptionGroupAttributes.ALL` has no key, so
/// no group can hold one); `subscriptionDataSet` is null in Java unless set, and fastjson
/// omits nulls.
fn group_json(g: &crate::meta::groups::SubscriptionGroupConfig) -> serde_json::Value {
    // Written in sorted order so the bytes are fastjson's even if serde_json keeps
    // insertion order (its `preserve_order` feature may be on through another crate).
    serde_json::json!({
        "attributes": {},
        "brokerId": g.broker_id,
        "consumeBroadcastEnable": g.consume_broadcast_enable,
        "consumeEnable": g.consume_enable,
        "consumeFromMinEnable": g.consume_from_min_enable,
        "consumeMessageOrderly": g.consume_message_orderly,
        "consumeTimeoutMinute": g.consume_timeout_minute,
        "groupName": g.group_name,
        "groupRetryPolicy": serde_json::from_str::<serde_json::Value>(&g.group_retry_policy_json).unwrap_or_else(|_| serde_json::json!({ "type": "CUSTOMIZED" })),
        "groupSysFlag": g.group_sys_flag,
        "notifyConsumerIdsChangedEnable": g.notify_consumer_ids_changed_enable,
        "retryMaxTimes": g.retry_max_times,
        "retryQueueNums": g.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": g.which_broker_when_consume_slowly,
    })
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
    c.attributes = t.attributes.clone();
    ringmq_client::remoting::json::to_json(&c)
}

impl<R: crate::rt::Runtime> Shard<R> {
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
        // RocketMQ 5's attributes (`+message.type=FIFO,...`), refused as Java refuses
        // them; applied to the topic's current ones under the metadata lock.
        let modification = match crate::meta::attributes::parse(header.attributes.as_deref().unwrap_or("")) {
            Ok(m) => m,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, e),
        };
        let mut config = TopicConfig {
            name: header.topic.clone(),
            read_queue_nums: retry_queues.unwrap_or(header.read_queue_nums as u32),
            write_queue_nums: retry_queues.unwrap_or(header.write_queue_nums as u32),
            perm: header.perm as u32,
            order: header.order,
            topic_sys_flag: header.topic_sys_flag.unwrap_or(0) as u32,
            attributes: BTreeMap::new(),
        };
        let now_ms = self.now_ms();
        let change = |table: &mut TopicTable| {
            let current = table.get(&config.name).map(|t| t.attributes.clone());
            config.attributes = crate::meta::attributes::alter(current.is_none(), &current.unwrap_or_default(), &modification)?;
            table.upsert(config, now_ms).map(|_| ()).map_err(|e| e.to_string())
        };
        if let Err((code, e)) = self.update_topics(change).await {
            return error_response(cmd, code, e);
        }
        let caller = super::admin::caller_of(cmd);
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
        if cmd.ext(super::admin::LOCAL_ONLY_EXT).is_some() {
            return match self.delete_topic_data(topic).await {
                Ok((queues, offsets)) => {
                    let mut r = cmd.create_response(rs::SUCCESS, None);
                    r.body = serde_json::json!([queues, offsets]).to_string().into_bytes().into();
                    r
                }
                Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e),
            };
        }
        let caller = super::admin::caller_of(cmd);
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
    /// `SubscriptionGroupConfig` JSON; missing fields take RocketMQ's defaults. With
    /// `CREATE_IF_ABSENT_EXT` (the broker's own auto-creation, `autoCreateSubscriptionGroup`)
    /// an existing group is left as it is.
    pub(super) async fn handle_create_group(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let config = match group_from_json(&cmd.body) {
            Ok(c) => c,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, e),
        };
        let name = config.group_name.clone();
        let only_if_absent = cmd.ext(CREATE_IF_ABSENT_EXT).is_some();
        let now_ms = self.now_ms();
        let summary = format!("retryQueueNums={} retryMaxTimes={} consumeEnable={}", config.retry_queue_nums, config.retry_max_times, config.consume_enable);
        let change = |table: &mut crate::meta::groups::GroupTable| {
            if only_if_absent && table.get(&name).is_some() {
                return Ok(false);
            }
            table.upsert(config, now_ms).map(|()| true).map_err(|e| (rs::INVALID_PARAMETER, e.to_string()))
        };
        match self.change_groups(cmd, change).await {
            Ok(changed) => {
                if changed {
                    tracing::info!(group = %name, config = %summary, auto = only_if_absent, caller = super::admin::caller_of(cmd), "subscription group created or updated");
                }
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
        // Answered once every shard holds the new table: pulls, heartbeats and sends back
        // on every shard read their group's settings from their own replica.
        let event = self.groups_event();
        self.mesh.broadcast_and_wait(event).await;
        Ok(true)
    }

    pub(super) fn groups_event(&self) -> ShardEvent {
        let table = self.meta.groups.borrow();
        match table.encode() {
            Ok(encoded) => ShardEvent::Groups { version: table.version().counter, encoded },
            Err(e) => crate::fatal::fatal(&format!("subscription group table does not encode: {e}")),
        }
    }

    /// This shard's replica of a group's settings. A group Java's broker creates for
    /// itself at start (`SYSTEM_GROUPS`) exists whether or not the table holds it.
    pub(super) fn group_config(&self, group: &str) -> Option<crate::meta::groups::SubscriptionGroupConfig> {
        match self.meta.groups.borrow().get(group) {
            Some(g) => Some(g.clone()),
            None => SYSTEM_GROUPS.contains(&group).then(|| crate::meta::groups::SubscriptionGroupConfig::new(group)),
        }
    }

    /// Java's `findSubscriptionGroupConfig`: the group's settings, created with Java's
    /// defaults on the metadata owner first if it is not known and
    /// `autoCreateSubscriptionGroup` is on; `None` when it does not exist and may not be
    /// made. While this shard is already creating the group (a burst of first pulls),
    /// the others go on with Java's defaults, which is what the creation stores, rather
    /// than queueing a creation each behind the metadata lock.
    pub(super) async fn find_or_create_group(self: &Rc<Self>, group: &str) -> Result<Option<crate::meta::groups::SubscriptionGroupConfig>, (i32, String)> {
        use crate::meta::groups::SubscriptionGroupConfig;
        if let Some(g) = self.group_config(group) {
            return Ok(Some(g));
        }
        if !self.config().auto_create_subscription_group {
            return Ok(None);
        }
        if !self.is_master() {
            // A slave's group table is its master's copy: it creates nothing, and a
            // group its master will create on first contact goes on with Java's
            // defaults here (Java's slave also auto-creates, in its own table, which
            // the master's next sync replaces).
            return Ok(Some(SubscriptionGroupConfig::new(group)));
        }
        {
            let mut creating = self.meta.groups_creating.borrow_mut();
            if creating.contains(group) || creating.len() >= GROUPS_CREATING_MAX {
                return Ok(Some(SubscriptionGroupConfig::new(group)));
            }
            creating.insert(group.to_string());
        }
        // Unmarked however this ends, also when the request is dropped mid-creation (a
        // connection closed): a mark left behind would stop this shard creating the group.
        struct Creating<'a>(&'a RefCell<std::collections::BTreeSet<String>>, &'a str);
        impl Drop for Creating<'_> {
            fn drop(&mut self) {
                self.0.borrow_mut().remove(self.1);
            }
        }
        let _creating = Creating(&self.meta.groups_creating, group);
        let mut create = RemotingCommand::request(ringmq_client::remoting::codes::request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_ext(CREATE_IF_ABSENT_EXT, "1");
        create.body = serde_json::json!({ "groupName": group }).to_string().into_bytes().into();
        let r = self.call_internal(create).await;
        match r {
            r if r.code == rs::SUCCESS => Ok(Some(self.group_config(group).unwrap_or_else(|| SubscriptionGroupConfig::new(group)))),
            r => Err((r.code, r.remark.unwrap_or_default())),
        }
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

    pub(super) fn topics_event(&self) -> ShardEvent {
        let table = self.meta.topics.borrow();
        match table.encode() {
            Ok(encoded) => ShardEvent::Topics { version: table.version().counter, encoded },
            Err(e) => crate::fatal::fatal(&format!("topic table does not encode: {e}")),
        }
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
            // not its to announce, except a group's retry topic (with no queues here):
            // admin tools find a group's brokers by its retry topic's route (mqadmin
            // consumerProgress asks each for the group's consume stats), and every
            // shard-broker holds some of the group's offsets.
            let (read, write) = (self.client_queue_count(&t.name, t.read_queue_nums), self.client_queue_count(&t.name, t.write_queue_nums));
            let retry = t.name.starts_with(super::sendback::RETRY_TOPIC_PREFIX);
            if self.route_mode() == crate::config::RouteMode::Shard && read == 0 && write == 0 && !retry {
                continue;
            }
            let mut c = route::TopicConfig::new(&t.name);
            c.read_queue_nums = read as i32;
            c.write_queue_nums = write as i32;
            c.perm = t.perm as i32;
            c.order = t.order;
            c.topic_sys_flag = t.topic_sys_flag as i32;
            c.attributes = t.attributes.clone();
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
}
