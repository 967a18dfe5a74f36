//! The admin tools' per-queue figures: GET_TOPIC_STATS_INFO and GET_CONSUME_STATS,
//! answered as Java's `AdminBrokerProcessor` answers them (codes, remarks, fastjson
//! bodies), each gathered over the shards (`admin::Shard::gather_broker_figures`) since
//! every shard owns its queues and their offsets; in shard route mode a shard-broker
//! answers for the queues it owns, each named once in its own terms.
//!
//! What RingMQ does not have is reported as zero: `topicPutTps`, `consumeTps` (no
//! per-topic TPS statistics); `pullOffset` is the committed offset (no separate pull
//! offsets). A store time that cannot be read (read error) is reported as 0 and logged.

use crate::routing::queue_owner;
use ringmq_client::remoting::admin::{ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::collections::BTreeSet;
use std::rc::Rc;
use super::admin::*;
use super::{error_response, Shard};

/// Separator of Java's `topicList` header field (GET_CONSUME_STATS).
const TOPIC_LIST_SEPARATOR: char = ';';

impl<R: crate::rt::Runtime> Shard<R> {
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
        let others = match self.gather_broker_figures(cmd, "1").await {
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
                    // Which topics the group consumed, on any shard (also in shard
                    // route mode: a shard-broker then reports its own queues of them, so
                    // a group that committed only elsewhere still shows its lag here).
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
        match self.gather_broker_figures(&scoped, "1").await {
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
}
