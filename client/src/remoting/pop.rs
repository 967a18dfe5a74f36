//! POP consumption's wire formats (RocketMQ 5, issue 28): the request headers of
//! POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, PEEK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
//! NOTIFICATION and POLLING_INFO as Apache 5.3.3 names them
//! (`remoting/protocol/header/*`), the receipt handle's "extra info"
//! (`ExtraInfoUtil`: `ckQueueOffset popTime invisibleTime reviveQid retry brokerName
//! queueId [queueOffset]`, space-separated), the per-queue info strings of a POP answer
//! (`startOffsetInfo`, `msgOffsetInfo`, `orderCountInfo`), the POP retry topic names
//! (`KeyBuilder`), and the BATCH_ACK body (`BatchAck`, fastjson's short keys, the acked
//! offsets as a base64 `java.util.BitSet`).
//!
//! Invariants: decoders never panic and name what is wrong (`PopFormatError`);
//! `decode(encode(x)) == x` (proptest); every string Apache builds decodes to the same
//! values Apache's parser reads (table tests with Apache's own strings).

use super::command::ExtFields;
use super::headers::{ext_header, CommandHeader, ExtField, ExtValue, HeaderError};
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// `KeyBuilder.POP_ORDER_REVIVE_QUEUE`: the revive queue id an ordered POP's receipt
/// handle carries (ordered messages are not revived by checkpoints).
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// Offsets one receipt-handle info string may list (a POP answers at most 32 messages
/// per queue in Apache; bounded here so a hostile string cannot grow a table).
pub const INFO_OFFSETS_MAX: usize = 1024;
/// Entries (queues) one info string may list.
pub const INFO_ENTRIES_MAX: usize = 1024;
/// Bits a BATCH_ACK bit set may hold (offsets past a checkpoint's start).
pub const BATCH_ACK_BITS_MAX: usize = 64 * 1024;

ext_header! {
    /// POP_MESSAGE (200050) request.
    PopMessageRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        /// -1: every queue of the topic on this broker.
        queue_id: i32 = "queueId";
        max_msg_nums: i32 = "maxMsgNums";
        invisible_time: i64 = "invisibleTime";
        poll_time: i64 = "pollTime";
        born_time: i64 = "bornTime";
        /// `ConsumeInitMode`: 0 = MAX, 1 = MIN.
        init_mode: i32 = "initMode";
        exp_type: Option<String> = "expType";
        exp: Option<String> = "exp";
        order: bool = "order" | false;
        attempt_id: Option<String> = "attemptId";
    }
}

ext_header! {
    /// POP_MESSAGE answer; the body is the found messages, as PULL's.
    PopMessageResponseHeader {
        pop_time: i64 = "popTime" | 0;
        invisible_time: i64 = "invisibleTime" | 0;
        revive_qid: i32 = "reviveQid" | 0;
        rest_num: i64 = "restNum" | 0;
        start_offset_info: Option<String> = "startOffsetInfo";
        msg_offset_info: Option<String> = "msgOffsetInfo";
        order_count_info: Option<String> = "orderCountInfo";
    }
}

ext_header! {
    /// ACK_MESSAGE (200051) request.
    AckMessageRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        extra_info: String = "extraInfo";
        offset: i64 = "offset";
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) request.
    ChangeInvisibleTimeRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        extra_info: String = "extraInfo";
        offset: i64 = "offset";
        invisible_time: i64 = "invisibleTime";
    }
}

ext_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME answer (the new handle's pop time and revive queue).
    ChangeInvisibleTimeResponseHeader {
        pop_time: i64 = "popTime" | 0;
        invisible_time: i64 = "invisibleTime" | 0;
        revive_qid: i32 = "reviveQid" | 0;
    }
}

ext_header! {
    /// PEEK_MESSAGE (200052) request.
    PeekMessageRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        max_msg_nums: i32 = "maxMsgNums";
        consumer_group: String = "consumerGroup";
    }
}

ext_header! {
    /// NOTIFICATION (200054) request: long-poll until the queue has a message.
    NotificationRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        poll_time: i64 = "pollTime";
        born_time: i64 = "bornTime";
        order: bool = "order" | false;
        attempt_id: Option<String> = "attemptId";
    }
}

ext_header! {
    /// NOTIFICATION answer.
    NotificationResponseHeader {
        has_msg: bool = "hasMsg" | false;
        polling_full: bool = "pollingFull" | false;
    }
}

ext_header! {
    /// POLLING_INFO (200055) request.
    PollingInfoRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

ext_header! {
    /// POLLING_INFO answer: POP requests suspended on the queue.
    PollingInfoResponseHeader {
        polling_num: i32 = "pollingNum" | 0;
    }
}

/// A malformed POP string or body, naming the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopFormatError {
    #[error("extraInfo {text:?}: {why}")]
    ExtraInfo { text: String, why: String },
    #[error("{what} {text:?}: {why}")]
    Info { what: &'static str, text: String, why: String },
    #[error("batch ack: {0}")]
    BatchAck(String),
}

/// Which topic a handle's message came from (`ExtraInfoUtil`'s "0"/"1"/"2").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RetryKind {
    /// The topic itself.
    Normal,
    /// `%RETRY%{group}_{topic}` (`KeyBuilder.buildPopRetryTopicV1`).
    V1,
    /// `%RETRY%{group}+{topic}` (`buildPopRetryTopicV2`).
    V2,
}

impl RetryKind {
    /// What kind of topic `topic` is (`ExtraInfoUtil.getRetry(topic)`).
    pub fn of_topic(topic: &str) -> Self {
        if is_pop_retry_topic_v2(topic) {
            Self::V2
        } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            Self::V1
        } else {
            Self::Normal
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "0",
            Self::V1 => "1",
            Self::V2 => "2",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "0" => Some(Self::Normal),
            "1" => Some(Self::V1),
            "2" => Some(Self::V2),
            _ => None,
        }
    }

    /// The topic this kind names for `topic` and `group` (`ExtraInfoUtil.getRealTopic`).
    pub fn real_topic(self, topic: &str, group: &str) -> String {
        match self {
            Self::Normal => topic.to_string(),
            Self::V1 => pop_retry_topic_v1(topic, group),
            Self::V2 => pop_retry_topic_v2(topic, group),
        }
    }
}

/// `KeyBuilder.buildPopRetryTopicV1`: `%RETRY%{group}_{topic}`.
pub fn pop_retry_topic_v1(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}")
}

/// `KeyBuilder.buildPopRetryTopicV2`: `%RETRY%{group}+{topic}`.
pub fn pop_retry_topic_v2(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}")
}

/// `KeyBuilder.isPopRetryTopicV2`.
pub fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains('+')
}

/// A receipt handle's extra info (`ExtraInfoUtil.buildExtraInfo`), what ACK_MESSAGE and
/// CHANGE_MESSAGE_INVISIBLETIME carry back: where the checkpoint is and which message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// The first queue offset the POP's checkpoint covers.
    pub ck_queue_offset: i64,
    /// When the POP happened (ms since the epoch, broker clock).
    pub pop_time: i64,
    pub invisible_time: i64,
    /// The revive queue holding the checkpoint (`POP_ORDER_REVIVE_QUEUE` for ordered).
    pub revive_qid: i32,
    pub retry: RetryKind,
    pub broker_name: String,
    pub queue_id: i32,
    /// The message's own queue offset (Apache 5 adds it; 4.x handles have 7 fields).
    pub queue_offset: Option<i64>,
}

impl ExtraInfo {
    /// Apache's string: the fields joined by one space.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry.as_str(),
            self.broker_name,
            self.queue_id
        );
        if let Some(o) = self.queue_offset {
            s += &format!(" {o}");
        }
        s
    }

    /// Reads what `encode` (or Apache) wrote: 7 or 8 fields. Apache's accessors read a
    /// prefix; a handle the ack path needs whole is refused when shorter.
    pub fn decode(text: &str) -> Result<Self, PopFormatError> {
        let bad = |why: String| PopFormatError::ExtraInfo { text: text.chars().take(256).collect(), why };
        let f: Vec<&str> = text.split(' ').collect();
        if f.len() != 7 && f.len() != 8 {
            return Err(bad(format!("{} fields, expected 7 or 8", f.len())));
        }
        let int = |i: usize, name: &str| f[i].parse::<i64>().map_err(|_| bad(format!("{name} {:?} is not a number", f[i])));
        let small = |i: usize, name: &str| f[i].parse::<i32>().map_err(|_| bad(format!("{name} {:?} is not a number", f[i])));
        if f[5].is_empty() {
            return Err(bad("empty broker name".into()));
        }
        Ok(Self {
            ck_queue_offset: int(0, "ckQueueOffset")?,
            pop_time: int(1, "popTime")?,
            invisible_time: int(2, "invisibleTime")?,
            revive_qid: small(3, "reviveQid")?,
            retry: RetryKind::parse(f[4]).ok_or_else(|| bad(format!("retry flag {:?} is not 0, 1 or 2", f[4])))?,
            broker_name: f[5].to_string(),
            queue_id: small(6, "queueId")?,
            queue_offset: if f.len() == 8 { Some(int(7, "queueOffset")?) } else { None },
        })
    }

    /// `ExtraInfoUtil.isOrder`.
    pub fn is_order(&self) -> bool {
        self.revive_qid == POP_ORDER_REVIVE_QUEUE
    }
}

/// A per-queue info map key: `{retry}@{queueId}` (`getStartOffsetInfoMapKey`).
pub fn info_key(topic: &str, queue_id: i64) -> String {
    format!("{}@{queue_id}", RetryKind::of_topic(topic).as_str())
}

/// `startOffsetInfo` / `orderCountInfo`: `retry queueId value;...` (`buildStartOffsetInfo`,
/// `buildQueueIdOrderCountInfo`) as a map from `info_key` to the value.
pub fn encode_queue_values(entries: &[(&str, i32, i64)]) -> String {
    entries.iter().map(|(topic, q, v)| format!("{} {q} {v}", RetryKind::of_topic(topic).as_str())).collect::<Vec<_>>().join(";")
}

/// Parses `startOffsetInfo` or `orderCountInfo` (`parseStartOffsetInfo`, `parseOrderCountInfo`).
pub fn decode_queue_values(what: &'static str, text: &str) -> Result<BTreeMap<String, i64>, PopFormatError> {
    let bad = |why: String| PopFormatError::Info { what, text: text.chars().take(256).collect(), why };
    let mut out = BTreeMap::new();
    if text.is_empty() {
        return Ok(out);
    }
    for one in text.split(';') {
        let f: Vec<&str> = one.split(' ').collect();
        if f.len() != 3 {
            return Err(bad(format!("entry {one:?} has {} fields, expected 3", f.len())));
        }
        let v = f[2].parse::<i64>().map_err(|_| bad(format!("value {:?} is not a number", f[2])))?;
        if out.len() >= INFO_ENTRIES_MAX {
            return Err(bad(format!("more than {INFO_ENTRIES_MAX} entries")));
        }
        if out.insert(format!("{}@{}", f[0], f[1]), v).is_some() {
            return Err(bad(format!("duplicate entry {}@{}", f[0], f[1])));
        }
    }
    Ok(out)
}

/// `msgOffsetInfo`: `retry queueId o1,o2,...;...` (`buildMsgOffsetInfo`).
pub fn encode_msg_offsets(entries: &[(&str, i32, &[i64])]) -> String {
    entries
        .iter()
        .map(|(topic, q, offsets)| format!("{} {q} {}", RetryKind::of_topic(topic).as_str(), offsets.iter().map(i64::to_string).collect::<Vec<_>>().join(",")))
        .collect::<Vec<_>>()
        .join(";")
}

/// Parses `msgOffsetInfo` (`parseMsgOffsetInfo`).
pub fn decode_msg_offsets(text: &str) -> Result<BTreeMap<String, Vec<i64>>, PopFormatError> {
    let bad = |why: String| PopFormatError::Info { what: "msgOffsetInfo", text: text.chars().take(256).collect(), why };
    let mut out = BTreeMap::new();
    if text.is_empty() {
        return Ok(out);
    }
    for one in text.split(';') {
        let f: Vec<&str> = one.split(' ').collect();
        if f.len() != 3 {
            return Err(bad(format!("entry {one:?} has {} fields, expected 3", f.len())));
        }
        let offsets = f[2]
            .split(',')
            .take(INFO_OFFSETS_MAX + 1)
            .map(|o| o.parse::<i64>().map_err(|_| bad(format!("offset {o:?} is not a number"))))
            .collect::<Result<Vec<_>, _>>()?;
        if offsets.len() > INFO_OFFSETS_MAX || out.len() >= INFO_ENTRIES_MAX {
            return Err(bad(format!("more than {INFO_OFFSETS_MAX} offsets or {INFO_ENTRIES_MAX} entries")));
        }
        if out.insert(format!("{}@{}", f[0], f[1]), offsets).is_some() {
            return Err(bad(format!("duplicate entry {}@{}", f[0], f[1])));
        }
    }
    Ok(out)
}

/// A `java.util.BitSet` as fastjson writes it: `toByteArray()` (bit i in byte i/8, bit
/// i%8; trailing zero bytes dropped) in base64.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JavaBitSet(Vec<u8>);

impl JavaBitSet {
    pub fn from_bits(bits: impl IntoIterator<Item = usize>) -> Self {
        let mut bytes = Vec::new();
        for b in bits {
            assert!(b < BATCH_ACK_BITS_MAX, "bit {b} past BATCH_ACK_BITS_MAX");
            if bytes.len() <= b / 8 {
                bytes.resize(b / 8 + 1, 0);
            }
            bytes[b / 8] |= 1 << (b % 8);
        }
        Self(bytes)
    }

    /// The set bits, ascending.
    pub fn bits(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, byte)| (0..8).filter(move |b| byte & (1 << b) != 0).map(move |b| i * 8 + b))
    }

    fn trimmed(&self) -> &[u8] {
        let end = self.0.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        &self.0[..end]
    }
}

impl Serialize for JavaBitSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.trimmed()))
    }
}

impl<'de> Deserialize<'de> for JavaBitSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)?;
        if bytes.len() > BATCH_ACK_BITS_MAX / 8 {
            return Err(serde::de::Error::custom(format!("bit set of {} bytes, at most {}", bytes.len(), BATCH_ACK_BITS_MAX / 8)));
        }
        Ok(Self(bytes))
    }
}

/// One checkpoint's acks in a BATCH_ACK_MESSAGE body (`body/BatchAck`): the acked
/// messages are `start_offset + i` for every set bit i.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    pub consumer_group: String,
    #[serde(rename = "t", alias = "topic")]
    pub topic: String,
    /// "0", "1" or "2" (`RetryKind`).
    #[serde(rename = "r", alias = "retry")]
    pub retry: String,
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    #[serde(rename = "rq", alias = "reviveQueueId")]
    pub revive_queue_id: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    #[serde(rename = "it", alias = "invisibleTime")]
    pub invisible_time: i64,
    #[serde(rename = "b", alias = "bitSet", default)]
    pub bit_set: JavaBitSet,
}

/// BATCH_ACK_MESSAGE (200151) request body (`BatchAckMessageRequestBody`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAckMessageRequestBody {
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub acks: Vec<BatchAck>,
}

impl BatchAckMessageRequestBody {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a batch ack body serializes")
    }

    pub fn decode(body: &[u8]) -> Result<Self, PopFormatError> {
        serde_json::from_slice(body).map_err(|e| PopFormatError::BatchAck(e.to_string()))
    }
}

impl fmt::Display for RetryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check<T: PartialEq + fmt::Debug>(got: T, expected: T) {
        assert_eq!(got, expected);
    }

    #[test]
    fn extra_info_reads_apache_strings() {
        let handle = |retry, queue_offset| ExtraInfo {
            ck_queue_offset: 100,
            pop_time: 1_700_000_000_000,
            invisible_time: 60_000,
            revive_qid: 3,
            retry,
            broker_name: "broker-a".into(),
            queue_id: 2,
            queue_offset,
        };
        // ExtraInfoUtil.buildExtraInfo(100, 1700000000000L, 60000, 3, topic, "broker-a", 2[, 105])
        check(ExtraInfo::decode("100 1700000000000 60000 3 0 broker-a 2"), Ok(handle(RetryKind::Normal, None)));
        check(ExtraInfo::decode("100 1700000000000 60000 3 1 broker-a 2 105"), Ok(handle(RetryKind::V1, Some(105))));
        check(ExtraInfo::decode("100 1700000000000 60000 3 2 broker-a 2 105"), Ok(handle(RetryKind::V2, Some(105))));
        check(handle(RetryKind::V2, Some(105)).encode(), "100 1700000000000 60000 3 2 broker-a 2 105".to_string());
        let err = |text: &str, why: &str| Err(PopFormatError::ExtraInfo { text: text.into(), why: why.into() });
        check(ExtraInfo::decode("100 1 2 3 0 b"), err("100 1 2 3 0 b", "6 fields, expected 7 or 8"));
        check(ExtraInfo::decode("x 1 2 3 0 b 1"), err("x 1 2 3 0 b 1", "ckQueueOffset \"x\" is not a number"));
        check(ExtraInfo::decode("1 1 2 3 7 b 1"), err("1 1 2 3 7 b 1", "retry flag \"7\" is not 0, 1 or 2"));
        check(ExtraInfo::decode("1 1 2 3 0  1"), err("1 1 2 3 0  1", "empty broker name"));
        check(ExtraInfo::decode(""), err("", "1 fields, expected 7 or 8"));
        assert!(ExtraInfo::decode("1 1 2 999 0 b 1").expect("ordered").is_order());
    }

    #[test]
    fn retry_topics_are_keybuilders() {
        check(pop_retry_topic_v1("T", "G"), "%RETRY%G_T".to_string());
        check(pop_retry_topic_v2("T", "G"), "%RETRY%G+T".to_string());
        check(RetryKind::of_topic("T"), RetryKind::Normal);
        check(RetryKind::of_topic("%RETRY%G_T"), RetryKind::V1);
        check(RetryKind::of_topic("%RETRY%G"), RetryKind::V1);
        check(RetryKind::of_topic("%RETRY%G+T"), RetryKind::V2);
        check(RetryKind::V2.real_topic("T", "G"), "%RETRY%G+T".to_string());
        check(info_key("%RETRY%G_T", 3), "1@3".to_string());
    }

    #[test]
    fn info_strings_read_as_apache_parses_them() {
        check(encode_queue_values(&[("T", 0, 5), ("%RETRY%G+T", 1, 7)]), "0 0 5;2 1 7".to_string());
        check(decode_queue_values("startOffsetInfo", "0 0 5;2 1 7"), Ok([("0@0".to_string(), 5), ("2@1".to_string(), 7)].into()));
        check(decode_queue_values("startOffsetInfo", ""), Ok(BTreeMap::new()));
        check(
            decode_queue_values("orderCountInfo", "0 0 5;0 0 6"),
            Err(PopFormatError::Info { what: "orderCountInfo", text: "0 0 5;0 0 6".into(), why: "duplicate entry 0@0".into() }),
        );
        check(
            decode_queue_values("startOffsetInfo", "0 0"),
            Err(PopFormatError::Info { what: "startOffsetInfo", text: "0 0".into(), why: "entry \"0 0\" has 2 fields, expected 3".into() }),
        );
        check(encode_msg_offsets(&[("T", 0, &[5, 6, 9]), ("%RETRY%G_T", 2, &[1])]), "0 0 5,6,9;1 2 1".to_string());
        check(decode_msg_offsets("0 0 5,6,9;1 2 1"), Ok([("0@0".to_string(), vec![5, 6, 9]), ("1@2".to_string(), vec![1])].into()));
        check(
            decode_msg_offsets("0 0 5,x"),
            Err(PopFormatError::Info { what: "msgOffsetInfo", text: "0 0 5,x".into(), why: "offset \"x\" is not a number".into() }),
        );
        let long = format!("0 0 {}", vec!["1"; INFO_OFFSETS_MAX + 1].join(","));
        assert!(decode_msg_offsets(&long).is_err(), "bounded");
    }

    #[test]
    fn batch_ack_bodies_are_fastjsons() {
        // What Apache's BatchAckTest writes: BitSet {0, 2, 9} is bytes [0b101, 0b10], "BQI=".
        let ack = BatchAck {
            consumer_group: "G".into(),
            topic: "T".into(),
            retry: "0".into(),
            start_offset: 100,
            queue_id: 1,
            revive_queue_id: 2,
            pop_time: 1_700_000_000_000,
            invisible_time: 30_000,
            bit_set: JavaBitSet::from_bits([0, 2, 9]),
        };
        let body = BatchAckMessageRequestBody { broker_name: "broker-a".into(), acks: vec![ack.clone()] };
        let text = String::from_utf8(body.encode()).expect("utf8");
        assert!(text.contains(r#""b":"BQI=""#), "{text}");
        assert!(text.contains(r#""so":100"#) && text.contains(r#""brokerName":"broker-a""#), "{text}");
        check(BatchAckMessageRequestBody::decode(text.as_bytes()), Ok(body));
        // fastjson's alternate (long) names are read too.
        let long = r#"{"brokerName":"b","acks":[{"consumerGroup":"G","topic":"T","retry":"1","startOffset":7,"queueId":0,"reviveQueueId":0,"popTime":1,"invisibleTime":2,"bitSet":"AQ=="}]}"#;
        let got = BatchAckMessageRequestBody::decode(long.as_bytes()).expect("decodes");
        check(got.acks[0].bit_set.bits().collect::<Vec<_>>(), vec![0]);
        check(got.acks[0].retry.as_str(), "1");
        assert!(BatchAckMessageRequestBody::decode(br#"{"acks":[{"b":"!!"}]}"#).is_err());
        assert!(BatchAckMessageRequestBody::decode(b"[").is_err());
    }

    #[test]
    fn headers_use_apaches_field_names() {
        let mut ext = ExtFields::new();
        for (k, v) in [("consumerGroup", "G"), ("topic", "T"), ("queueId", "-1"), ("maxMsgNums", "32"), ("invisibleTime", "60000"), ("pollTime", "20000"), ("bornTime", "5"), ("initMode", "0"), ("order", "true")] {
            ext.set_str(k, v);
        }
        let h = PopMessageRequestHeader::from_ext(&ext).expect("decodes");
        check((h.queue_id, h.max_msg_nums, h.invisible_time, h.order, h.exp_type.clone()), (-1, 32, 60_000, true, None));
        check(PopMessageRequestHeader::from_ext(&h.to_ext()).expect("round trip"), h);
        let mut missing = ExtFields::new();
        missing.set_str("consumerGroup", "G");
        assert!(AckMessageRequestHeader::from_ext(&missing).is_err(), "a required field missing is an error");
    }

    proptest! {
        #[test]
        fn extra_info_round_trips(ck in any::<i64>(), pt in any::<i64>(), it in any::<i64>(), rq in any::<i32>(), r in 0u8..3, name in "[a-zA-Z0-9_-]{1,20}", q in any::<i32>(), qo in proptest::option::of(any::<i64>())) {
            let retry = [RetryKind::Normal, RetryKind::V1, RetryKind::V2][r as usize];
            let info = ExtraInfo { ck_queue_offset: ck, pop_time: pt, invisible_time: it, revive_qid: rq, retry, broker_name: name, queue_id: q, queue_offset: qo };
            prop_assert_eq!(ExtraInfo::decode(&info.encode()), Ok(info));
        }

        #[test]
        fn decoders_never_panic(s in ".{0,200}") {
            let _ = ExtraInfo::decode(&s);
            let _ = decode_queue_values("startOffsetInfo", &s);
            let _ = decode_msg_offsets(&s);
            let _ = BatchAckMessageRequestBody::decode(s.as_bytes());
        }

        #[test]
        fn bit_sets_round_trip(bits in proptest::collection::btree_set(0usize..4096, 0..64)) {
            let set = JavaBitSet::from_bits(bits.iter().copied());
            let json = serde_json::to_string(&set).expect("serializes");
            let back: JavaBitSet = serde_json::from_str(&json).expect("deserializes");
            prop_assert_eq!(back.bits().collect::<Vec<_>>(), bits.into_iter().collect::<Vec<_>>());
        }
    }
}
