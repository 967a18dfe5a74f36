//! Bodies of the admin answers keyed by message queue: `TopicStatsTable`
//! (GET_TOPIC_STATS_INFO) and `ConsumeStats` (GET_CONSUME_STATS), plus `GroupList`
//! (QUERY_TOPIC_CONSUME_BY_WHO).
//!
//! Java keeps these as `Map<MessageQueue, V>` and fastjson writes such a map with the
//! key object itself in key position, which is not JSON:
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5,..}}}`.
//! Admin tools (mqadmin, the dashboard) parse exactly that, so `encode` writes it;
//! `decode` accepts it (and the same map with the key objects quoted as strings).
//! Fields are in fastjson's sorted order; doubles are written as `0.0`, as fastjson.
//!
//! Invariants: nothing here panics on any input; the key-quoting pass is linear in its
//! input (brace pairs are matched once, up front) and its output is at most 2x + 2 per
//! key longer than its input.

use super::bodies::MessageQueue;
use super::json::de::{i64_lenient, null_default, vec_string_lenient};
use super::json::{from_json_lenient, quote_bare_int_keys, quote_object_keys, starts_with_object, to_json, BodyError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Java's `TopicOffset`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicOffset {
    #[serde(default, deserialize_with = "i64_lenient")]
    pub last_update_timestamp: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub max_offset: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub min_offset: i64,
}

/// Java's `OffsetWrapper`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetWrapper {
    #[serde(default, deserialize_with = "i64_lenient")]
    pub broker_offset: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub consumer_offset: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub last_timestamp: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub pull_offset: i64,
}

/// Java's `TopicStatsTable`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicStatsTable {
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
    pub topic_put_tps: f64,
}

/// Java's `ConsumeStats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumeStats {
    pub consume_tps: f64,
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

/// Java's `GroupList` (a `HashSet<String>` named `groupList`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupList {
    #[serde(default, deserialize_with = "vec_string_lenient")]
    pub group_list: Vec<String>,
}

impl GroupList {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// fastjson writes a double with at least one decimal (`0.0`, `1.5`); not finite: 0.0.
fn write_double(out: &mut Vec<u8>, v: f64) {
    let v = if v.is_finite() { v } else { 0.0 };
    out.extend_from_slice(to_json(&v).as_slice());
}

/// `{<mq>:<value>,...}` with each key the MessageQueue object, in `MessageQueue` order.
fn write_mq_map<V: Serialize>(out: &mut Vec<u8>, map: &BTreeMap<MessageQueue, V>) {
    out.push(b'{');
    for (i, (mq, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&to_json(mq));
        out.push(b':');
        out.extend_from_slice(&to_json(v));
    }
    out.push(b'}');
}

fn read_mq_map<V>(raw: BTreeMap<String, V>) -> Result<BTreeMap<MessageQueue, V>, BodyError> {
    raw.into_iter().map(|(k, v)| Ok((from_json_lenient::<MessageQueue>(k.as_bytes())?, v))).collect()
}

/// Parses a body whose maps may have object keys (see the module doc).
fn from_json_object_keys<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    if !starts_with_object(bytes) {
        return Err(BodyError::NotAnObject);
    }
    let quoted = quote_object_keys(bytes);
    let text = quote_bare_int_keys(&quoted);
    Ok(serde_json::from_slice(&text)?)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTopicStats {
    #[serde(default, deserialize_with = "null_default")]
    offset_table: BTreeMap<String, TopicOffset>,
    #[serde(default)]
    topic_put_tps: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConsumeStats {
    #[serde(default)]
    consume_tps: Option<f64>,
    #[serde(default, deserialize_with = "null_default")]
    offset_table: BTreeMap<String, OffsetWrapper>,
}

impl TopicStatsTable {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"offsetTable\":".to_vec();
        write_mq_map(&mut out, &self.offset_table);
        out.extend_from_slice(b",\"topicPutTps\":");
        write_double(&mut out, self.topic_put_tps);
        out.push(b'}');
        out
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawTopicStats = from_json_object_keys(body)?;
        Ok(Self { offset_table: read_mq_map(raw.offset_table)?, topic_put_tps: raw.topic_put_tps.unwrap_or(0.0) })
    }
}

impl ConsumeStats {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"consumeTps\":".to_vec();
        write_double(&mut out, self.consume_tps);
        out.extend_from_slice(b",\"offsetTable\":");
        write_mq_map(&mut out, &self.offset_table);
        out.push(b'}');
        out
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawConsumeStats = from_json_object_keys(body)?;
        Ok(Self { consume_tps: raw.consume_tps.unwrap_or(0.0), offset_table: read_mq_map(raw.offset_table)? })
    }
}


/// Java's `ResetOffsetBody`: the offsets INVOKE_BROKER_TO_RESET_OFFSET chose, and the
/// body of the RESET_CONSUMER_CLIENT_OFFSET the broker pushes to the group's clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResetOffsetBody {
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResetOffset {
    #[serde(default, deserialize_with = "null_default")]
    offset_table: BTreeMap<String, i64>,
}

impl ResetOffsetBody {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"offsetTable\":".to_vec();
        write_mq_map(&mut out, &self.offset_table);
        out.push(b'}');
        out
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawResetOffset = from_json_object_keys(body)?;
        Ok(Self { offset_table: read_mq_map(raw.offset_table)? })
    }
}

/// Java's `CMResult`: what a listener answered to CONSUME_MESSAGE_DIRECTLY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum CmResult {
    CR_SUCCESS,
    CR_LATER,
    CR_ROLLBACK,
    CR_COMMIT,
    CR_THROW_EXCEPTION,
    CR_RETURN_NULL,
}

/// Java's `ConsumeMessageDirectlyResult` (the client's answer to
/// CONSUME_MESSAGE_DIRECTLY, passed back unchanged by the broker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeMessageDirectlyResult {
    #[serde(default)]
    pub auto_commit: bool,
    pub consume_result: Option<CmResult>,
    #[serde(default)]
    pub order: bool,
    #[serde(default)]
    pub remark: Option<String>,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub spent_time_mills: i64,
}

impl ConsumeMessageDirectlyResult {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// Java's `ProcessQueueInfo`: one queue of a consumer's running info.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessQueueInfo {
    pub cached_msg_count: i64,
    pub cached_msg_max_offset: i64,
    pub cached_msg_min_offset: i64,
    #[serde(rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i64,
    pub commit_offset: i64,
    /// Java's spelling.
    pub droped: bool,
    pub last_consume_timestamp: i64,
    pub last_lock_timestamp: i64,
    pub last_pull_timestamp: i64,
    pub locked: bool,
    pub transaction_msg_count: i64,
    pub transaction_msg_max_offset: i64,
    pub transaction_msg_min_offset: i64,
    pub try_unlock_times: i64,
}

/// Java's `ConsumerRunningInfo` (GET_CONSUMER_RUNNING_INFO, answered by the client):
/// its properties, subscriptions and per-queue progress.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumerRunningInfo {
    pub properties: BTreeMap<String, String>,
    pub subscription_set: Vec<super::heartbeat::SubscriptionData>,
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRunningInfo {
    #[serde(default, deserialize_with = "null_default")]
    properties: BTreeMap<String, serde_json::Value>,
    #[serde(default, deserialize_with = "null_default")]
    subscription_set: Vec<super::heartbeat::SubscriptionData>,
    #[serde(default, deserialize_with = "null_default")]
    mq_table: BTreeMap<String, ProcessQueueInfo>,
}

impl ConsumerRunningInfo {
    /// fastjson's form: sorted fields, object keys in `mqTable`, empty `mqPopTable`,
    /// `statusTable` and `userConsumerInfo` (RingMQ keeps no per-topic consume RT/TPS).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"mqPopTable\":{},\"mqTable\":".to_vec();
        write_mq_map(&mut out, &self.mq_table);
        out.extend_from_slice(b",\"properties\":");
        out.extend_from_slice(&to_json(&self.properties));
        out.extend_from_slice(b",\"statusTable\":{},\"subscriptionSet\":");
        out.extend_from_slice(&to_json(&self.subscription_set));
        out.extend_from_slice(b",\"userConsumerInfo\":{}}");
        out
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let raw: RawRunningInfo = from_json_object_keys(body)?;
        let properties = raw
            .properties
            .into_iter()
            .map(|(k, v)| (k, match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }))
            .collect();
        Ok(Self { properties, subscription_set: raw.subscription_set, mq_table: read_mq_map(raw.mq_table)? })
    }
}

/// Java's `BrokerStatsItem`: a counter over one window (`sum`, per-second `tps`, and
/// `avgpt` = sum per update).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    pub avgpt: f64,
    pub sum: i64,
    pub tps: f64,
}

/// Java's `BrokerStatsData` (VIEW_BROKER_STATS_DATA): one stats key over the last
/// minute, hour and day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    pub stats_day: BrokerStatsItem,
    pub stats_hour: BrokerStatsItem,
    pub stats_minute: BrokerStatsItem,
}

impl BrokerStatsData {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mq(topic: &str, broker: &str, id: i32) -> MessageQueue {
        MessageQueue { broker_name: broker.into(), queue_id: id, topic: topic.into() }
    }

    fn check(input: &str, expected: &str) {
        let got = quote_object_keys(input.as_bytes());
        assert_eq!(std::str::from_utf8(&got).unwrap(), expected, "quoting {input:?}");
    }

    #[test]
    fn quoting_cases() {
        check("", "");
        check("{}", "{}");
        check(r#"{"a":{"b":1}}"#, r#"{"a":{"b":1}}"#);
        check(r#"{{"a":1}:2}"#, r#"{"{\"a\":1}":2}"#);
        check(r#"{"m":{{"q":0}:{"x":1}, {"q":1} :{"x":2}}}"#, r#"{"m":{"{\"q\":0}":{"x":1}, "{\"q\":1}" :{"x":2}}}"#);
        check(r#"[{"a":1},{"b":2}]"#, r#"[{"a":1},{"b":2}]"#);
        check(r#"{"s":"{{\"x\":1}:2}"}"#, r#"{"s":"{{\"x\":1}:2}"}"#);
        check(r#"{{"a":1}"#, r#"{{"a":1}"#);
        check(r#"{{"a":"}"}:1}"#, r#"{"{\"a\":\"}\"}":1}"#);
        check("{{{{", "{{{{");
    }

    #[test]
    fn topic_stats_wire_form() {
        let mut t = TopicStatsTable::default();
        t.offset_table.insert(mq("T", "broker-a", 1), TopicOffset { last_update_timestamp: 7, max_offset: 5, min_offset: 0 });
        t.offset_table.insert(mq("T", "broker-a", 0), TopicOffset::default());
        let text = String::from_utf8(t.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":7,"maxOffset":5,"minOffset":0}},"topicPutTps":0.0}"#
        );
        assert_eq!(TopicStatsTable::decode(text.as_bytes()).unwrap(), t);
        assert!(TopicStatsTable::decode(b"[]").is_err());
        assert!(TopicStatsTable::decode(br#"{"offsetTable":{{"queueId":0}:{}}}"#).is_err(), "a key without topic");
        assert_eq!(TopicStatsTable::decode(b"{}").unwrap(), TopicStatsTable::default());
    }

    #[test]
    fn consume_stats_wire_form() {
        let mut s = ConsumeStats::default();
        s.offset_table.insert(mq("T", "b", 0), OffsetWrapper { broker_offset: 3, consumer_offset: 2, last_timestamp: 9, pull_offset: 2 });
        let text = String::from_utf8(s.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":9,"pullOffset":2}}}"#
        );
        assert_eq!(ConsumeStats::decode(text.as_bytes()).unwrap(), s);
        let g = GroupList { group_list: vec!["a".into(), "b".into()] };
        assert_eq!(String::from_utf8(g.encode()).unwrap(), r#"{"groupList":["a","b"]}"#);
    }

    #[test]
    fn reset_offset_and_client_answers_wire_form() {
        let mut r = ResetOffsetBody::default();
        r.offset_table.insert(mq("T", "b", 1), 7);
        r.offset_table.insert(mq("T", "b", 0), 0);
        let text = String::from_utf8(r.encode()).unwrap();
        assert_eq!(text, r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:0,{"brokerName":"b","queueId":1,"topic":"T"}:7}}"#);
        assert_eq!(ResetOffsetBody::decode(text.as_bytes()).unwrap(), r);
        // Java's client answer, as fastjson writes it.
        let java = br#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}"#;
        let d = ConsumeMessageDirectlyResult::decode(java).unwrap();
        assert_eq!((d.consume_result, d.auto_commit, d.spent_time_mills, d.remark.clone()), (Some(CmResult::CR_SUCCESS), true, 3, None));
        assert_eq!(ConsumeMessageDirectlyResult::decode(&d.encode()).unwrap(), d);
        let mut info = ConsumerRunningInfo::default();
        info.properties.insert("PROP_CONSUME_TYPE".into(), "CONSUME_PASSIVELY".into());
        info.subscription_set.push(super::super::heartbeat::SubscriptionData::new("T", "*", 1));
        info.mq_table.insert(mq("T", "b", 0), ProcessQueueInfo { commit_offset: 5, cached_msg_count: 2, ..Default::default() });
        let text = String::from_utf8(info.encode()).unwrap();
        assert!(text.starts_with(r#"{"mqPopTable":{},"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"cachedMsgCount":2,"#), "{text}");
        assert!(text.contains(r#""cachedMsgSizeInMiB":0"#) && text.contains(r#""droped":false"#), "{text}");
        assert_eq!(ConsumerRunningInfo::decode(text.as_bytes()).unwrap(), info);
        // Java writes numbers and booleans in properties too.
        let java = br#"{"properties":{"PROP_CONSUMEORDERLY":false,"PROP_THREADPOOL_CORE_SIZE":20},"subscriptionSet":[],"mqTable":{}}"#;
        let d = ConsumerRunningInfo::decode(java).unwrap();
        assert_eq!(d.properties["PROP_CONSUMEORDERLY"], "false");
        assert_eq!(d.properties["PROP_THREADPOOL_CORE_SIZE"], "20");
        let stats = BrokerStatsData { stats_minute: BrokerStatsItem { avgpt: 1.0, sum: 60, tps: 1.0 }, ..Default::default() };
        assert_eq!(
            String::from_utf8(stats.encode()).unwrap(),
            r#"{"statsDay":{"avgpt":0.0,"sum":0,"tps":0.0},"statsHour":{"avgpt":0.0,"sum":0,"tps":0.0},"statsMinute":{"avgpt":1.0,"sum":60,"tps":1.0}}"#
        );
        assert_eq!(BrokerStatsData::decode(&stats.encode()).unwrap(), stats);
    }

    proptest! {
        #[test]
        fn quoting_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = quote_object_keys(&bytes);
            let _ = ConsumeStats::decode(&bytes);
        }

        #[test]
        fn stats_roundtrip(entries in proptest::collection::vec((".{0,6}", ".{0,6}", any::<i32>(), any::<i64>()), 0..5)) {
            let mut t = TopicStatsTable::default();
            for (topic, broker, q, v) in entries {
                t.offset_table.insert(mq(&topic, &broker, q), TopicOffset { last_update_timestamp: v, max_offset: v, min_offset: 0 });
            }
            prop_assert_eq!(TopicStatsTable::decode(&t.encode()).unwrap(), t);
        }
    }
}
