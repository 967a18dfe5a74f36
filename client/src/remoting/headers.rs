//! Typed custom headers: views over a command's `extFields`, one struct per Java
//! `CommandCustomHeader`, with the Java field names as keys.
//!
//! Rules, as Java's `decodeCommandCustomHeader` applies them, loosened where clients
//! differ (DESIGN.md §6):
//! - a required (`@CFNotNull`) field that is missing is an error naming the field;
//! - numbers are parsed after trimming; an optional number that is empty counts as absent;
//! - booleans follow `Boolean.parseBoolean` (case-insensitive "true"), plus "1";
//! - unknown keys (signatures, `AccessKey`, RPC hints like `bname`) are ignored.
//!
//! `to_ext` writes every present field in canonical form, so
//! `from_ext(&h.to_ext()) == h` for every header (property-tested for the large ones).

use super::command::ExtFields;
use super::json::de::parse_bool;
use thiserror::Error;

/// Offending values are quoted in errors, cut to this many characters so that an error
/// about a 16 MiB header stays small.
pub const VALUE_IN_ERROR_MAX_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    #[error("required header field `{field}` is missing")]
    Missing { field: &'static str },
    #[error("header field `{field}` = {value:?} is not a valid {expected}")]
    Invalid { field: &'static str, value: String, expected: &'static str },
}

/// A typed header that reads itself from, and writes itself to, ext fields.
pub trait CommandHeader: Sized {
    fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError>;
    fn to_ext(&self) -> ExtFields;
}

/// A scalar that travels as an ext field value.
pub trait ExtValue: Sized {
    /// Whether an empty value of an optional field means "unset": clients leave
    /// optional numbers empty, while an empty string is a legitimate value.
    const EMPTY_IS_ABSENT: bool = true;
    fn parse_ext(field: &'static str, raw: &str) -> Result<Self, HeaderError>;
    fn to_ext_string(&self) -> String;
}

fn invalid(field: &'static str, raw: &str, expected: &'static str) -> HeaderError {
    HeaderError::Invalid { field, value: raw.chars().take(VALUE_IN_ERROR_MAX_CHARS).collect(), expected }
}

impl ExtValue for String {
    const EMPTY_IS_ABSENT: bool = false;
    fn parse_ext(_field: &'static str, raw: &str) -> Result<Self, HeaderError> {
        Ok(raw.to_string())
    }
    fn to_ext_string(&self) -> String {
        self.clone()
    }
}

macro_rules! ext_int {
    ($($ty:ty),*) => {$(
        impl ExtValue for $ty {
            fn parse_ext(field: &'static str, raw: &str) -> Result<Self, HeaderError> {
                raw.trim().parse().map_err(|_| invalid(field, raw, stringify!($ty)))
            }
            fn to_ext_string(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
ext_int!(i32, i64);

impl ExtValue for bool {
    fn parse_ext(_field: &'static str, raw: &str) -> Result<Self, HeaderError> {
        Ok(parse_bool(raw))
    }
    fn to_ext_string(&self) -> String {
        self.to_string()
    }
}

/// How a field's presence is handled: `T` is required, `Option<T>` optional.
pub trait ExtField: Sized {
    fn read(ext: &ExtFields, field: &'static str) -> Result<Self, HeaderError>;
    fn write(&self, ext: &mut ExtFields, field: &'static str);
}

macro_rules! ext_field {
    ($($ty:ty),*) => {$(
        impl ExtField for $ty {
            fn read(ext: &ExtFields, field: &'static str) -> Result<Self, HeaderError> {
                match ext.get(field) {
                    Some(raw) => <$ty>::parse_ext(field, raw),
                    None => Err(HeaderError::Missing { field }),
                }
            }
            fn write(&self, ext: &mut ExtFields, field: &'static str) {
                ext.set(field, &self.to_ext_string());
            }
        }

        impl ExtField for Option<$ty> {
            fn read(ext: &ExtFields, field: &'static str) -> Result<Self, HeaderError> {
                match ext.get(field) {
                    Some(raw) if <$ty>::EMPTY_IS_ABSENT && raw.trim().is_empty() => Ok(None),
                    Some(raw) => <$ty>::parse_ext(field, raw).map(Some),
                    None => Ok(None),
                }
            }
            fn write(&self, ext: &mut ExtFields, field: &'static str) {
                if let Some(v) = self {
                    ext.set(field, &v.to_ext_string());
                }
            }
        }
    )*};
}
ext_field!(String, i32, i64, bool);

/// Declares a header struct. `field: T = "javaName"` is required when `T` is a scalar,
/// optional when it is an `Option`; `= "javaName" | default` makes an absent field take
/// `default` (Java primitives with an initializer).
macro_rules! ext_header {
    ($(#[$m:meta])* $name:ident {
        $($(#[$fm:meta])* $field:ident : $ty:ty = $key:literal $(| $default:expr)?;)*
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $field: $ty,)* }

        impl $name {
            /// Every ext key this header reads.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            pub fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError> {
                Ok(Self { $($field: ext_header!(@read ext, $key, $ty $(, $default)?),)* })
            }

            pub fn to_ext(&self) -> ExtFields {
                let mut ext = ExtFields::new();
                $(ExtField::write(&self.$field, &mut ext, $key);)*
                ext
            }
        }

        impl CommandHeader for $name {
            fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError> {
                $name::from_ext(ext)
            }
            fn to_ext(&self) -> ExtFields {
                $name::to_ext(self)
            }
        }
    };
    (@read $ext:ident, $key:literal, $ty:ty) => {
        <$ty as ExtField>::read($ext, $key)?
    };
    (@read $ext:ident, $key:literal, $ty:ty, $default:expr) => {
        match $ext.get($key) {
            None => $default,
            Some(raw) => <$ty as ExtValue>::parse_ext($key, raw)?,
        }
    };
}
// Other header modules (`controller.rs`) declare their headers with the same rules.
pub(crate) use ext_header;

ext_header! {
    /// SEND_MESSAGE (long names).
    SendMessageRequestHeader {
        producer_group: String = "producerGroup";
        topic: String = "topic";
        default_topic: String = "defaultTopic";
        default_topic_queue_nums: i32 = "defaultTopicQueueNums";
        queue_id: i32 = "queueId";
        sys_flag: i32 = "sysFlag";
        born_timestamp: i64 = "bornTimestamp";
        flag: i32 = "flag";
        properties: Option<String> = "properties";
        reconsume_times: Option<i32> = "reconsumeTimes";
        unit_mode: bool = "unitMode" | false;
        max_reconsume_times: Option<i32> = "maxReconsumeTimes";
        batch: bool = "batch" | false;
        broker_name: Option<String> = "brokerName";
    }
}

ext_header! {
    /// SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: the same fields under one-letter names,
    /// which Java chose to speed up its JSON parsing.
    SendMessageRequestHeaderV2 {
        /// producerGroup
        a: String = "a";
        /// topic
        b: String = "b";
        /// defaultTopic
        c: String = "c";
        /// defaultTopicQueueNums
        d: i32 = "d";
        /// queueId
        e: i32 = "e";
        /// sysFlag
        f: i32 = "f";
        /// bornTimestamp
        g: i64 = "g";
        /// flag
        h: i32 = "h";
        /// properties
        i: Option<String> = "i";
        /// reconsumeTimes
        j: Option<i32> = "j";
        /// unitMode
        k: bool = "k" | false;
        /// maxReconsumeTimes
        l: Option<i32> = "l";
        /// batch
        m: bool = "m" | false;
        /// brokerName
        n: Option<String> = "n";
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            max_reconsume_times: v2.l,
            batch: v2.m,
            broker_name: v2.n,
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        Self {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: v1.unit_mode,
            l: v1.max_reconsume_times,
            m: v1.batch,
            n: v1.broker_name,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads either form. The request code does not settle it (clients send
    /// SEND_BATCH_MESSAGE with either), so the keys do: long names win when present.
    pub fn from_ext_any(ext: &ExtFields) -> Result<Self, HeaderError> {
        if ext.contains_key("producerGroup") || !ext.contains_key("a") {
            Self::from_ext(ext)
        } else {
            SendMessageRequestHeaderV2::from_ext(ext).map(Self::from)
        }
    }
}

/// A send header read in place: text fields borrow the command's ext fields (no
/// `String` per field), for the broker's send path. Same rules and errors as
/// `SendMessageRequestHeader::from_ext_any` (property-tested against it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMessageHeaderRef<'a> {
    pub producer_group: &'a str,
    pub topic: &'a str,
    pub default_topic: &'a str,
    pub default_topic_queue_nums: i32,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    pub properties: Option<&'a str>,
    pub reconsume_times: Option<i32>,
    pub unit_mode: bool,
    pub max_reconsume_times: Option<i32>,
    pub batch: bool,
    pub broker_name: Option<&'a str>,
}

/// The ext keys of a send header, long (SEND_MESSAGE) then short (V2) names, in
/// `SendMessageHeaderRef`'s field order.
const SEND_KEYS: [[&str; 14]; 2] = [
    [
        "producerGroup",
        "topic",
        "defaultTopic",
        "defaultTopicQueueNums",
        "queueId",
        "sysFlag",
        "bornTimestamp",
        "flag",
        "properties",
        "reconsumeTimes",
        "unitMode",
        "maxReconsumeTimes",
        "batch",
        "brokerName",
    ],
    ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"],
];

impl<'a> SendMessageHeaderRef<'a> {
    /// Reads either form; the keys decide, as in `SendMessageRequestHeader::from_ext_any`.
    pub fn from_ext_any(ext: &'a ExtFields) -> Result<Self, HeaderError> {
        let keys = if ext.contains_key("producerGroup") || !ext.contains_key("a") { &SEND_KEYS[0] } else { &SEND_KEYS[1] };
        let text = |i: usize| ext.get(keys[i]).ok_or(HeaderError::Missing { field: keys[i] });
        let opt_text = |i: usize| ext.get(keys[i]);
        fn num<T: ExtValue>(ext: &ExtFields, key: &'static str) -> Result<T, HeaderError> {
            match ext.get(key) {
                Some(raw) => T::parse_ext(key, raw),
                None => Err(HeaderError::Missing { field: key }),
            }
        }
        fn opt_num<T: ExtValue>(ext: &ExtFields, key: &'static str) -> Result<Option<T>, HeaderError> {
            match ext.get(key) {
                Some(raw) if raw.trim().is_empty() => Ok(None),
                Some(raw) => T::parse_ext(key, raw).map(Some),
                None => Ok(None),
            }
        }
        let flag_or_false = |i: usize| ext.get(keys[i]).map_or(false, parse_bool);
        // Fields in declaration order, so the first missing one is the one reported.
        Ok(Self {
            producer_group: text(0)?,
            topic: text(1)?,
            default_topic: text(2)?,
            default_topic_queue_nums: num(ext, keys[3])?,
            queue_id: num(ext, keys[4])?,
            sys_flag: num(ext, keys[5])?,
            born_timestamp: num(ext, keys[6])?,
            flag: num(ext, keys[7])?,
            properties: opt_text(8),
            reconsume_times: opt_num(ext, keys[9])?,
            unit_mode: flag_or_false(10),
            max_reconsume_times: opt_num(ext, keys[11])?,
            batch: flag_or_false(12),
            broker_name: opt_text(13),
        })
    }

    pub fn to_owned(&self) -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: self.producer_group.to_string(),
            topic: self.topic.to_string(),
            default_topic: self.default_topic.to_string(),
            default_topic_queue_nums: self.default_topic_queue_nums,
            queue_id: self.queue_id,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            flag: self.flag,
            properties: self.properties.map(str::to_string),
            reconsume_times: self.reconsume_times,
            unit_mode: self.unit_mode,
            max_reconsume_times: self.max_reconsume_times,
            batch: self.batch,
            broker_name: self.broker_name.map(str::to_string),
        }
    }
}

ext_header! {
    SendMessageResponseHeader {
        msg_id: String = "msgId";
        queue_id: i32 = "queueId";
        queue_offset: i64 = "queueOffset";
        transaction_id: Option<String> = "transactionId";
        batch_uniq_id: Option<String> = "batchUniqId";
    }
}

ext_header! {
    PullMessageRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        queue_offset: i64 = "queueOffset";
        max_msg_nums: i32 = "maxMsgNums";
        sys_flag: i32 = "sysFlag";
        commit_offset: i64 = "commitOffset";
        suspend_timeout_millis: i64 = "suspendTimeoutMillis";
        subscription: Option<String> = "subscription";
        sub_version: i64 = "subVersion";
        expression_type: Option<String> = "expressionType";
        max_msg_bytes: Option<i32> = "maxMsgBytes";
    }
}

ext_header! {
    PullMessageResponseHeader {
        suggest_which_broker_id: i64 = "suggestWhichBrokerId";
        next_begin_offset: i64 = "nextBeginOffset";
        min_offset: i64 = "minOffset";
        max_offset: i64 = "maxOffset";
    }
}

ext_header! {
    QueryConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound";
    }
}

ext_header! {
    /// Answer to QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP.
    OffsetResponseHeader {
        offset: i64 = "offset";
    }
}

ext_header! {
    UpdateConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: String = "topic";
        queue_id: i32 = "queueId";
        commit_offset: i64 = "commitOffset";
    }
}

ext_header! {
    GetMaxOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        committed: bool = "committed" | true;
    }
}

ext_header! {
    GetMinOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

ext_header! {
    GetEarliestMsgStoretimeRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
    }
}

ext_header! {
    GetEarliestMsgStoretimeResponseHeader {
        timestamp: i64 = "timestamp";
    }
}

ext_header! {
    SearchOffsetRequestHeader {
        topic: String = "topic";
        queue_id: i32 = "queueId";
        timestamp: i64 = "timestamp";
    }
}

ext_header! {
    ViewMessageRequestHeader {
        /// Physical offset in the CommitLog (decoded from an offsetMsgId).
        offset: i64 = "offset";
        topic: Option<String> = "topic";
    }
}

ext_header! {
    QueryMessageRequestHeader {
        topic: String = "topic";
        key: String = "key";
        max_num: i32 = "maxNum";
        begin_timestamp: i64 = "beginTimestamp";
        end_timestamp: i64 = "endTimestamp";
    }
}

ext_header! {
    QueryMessageResponseHeader {
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp";
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset";
    }
}

ext_header! {
    /// CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to consume back
    /// to the broker that stored it, found by its CommitLog `offset`. The broker stores a
    /// copy in `%RETRY%<group>` (reconsumeTimes + 1, delayed by `delayLevel`: 0 = the
    /// broker's choice, 3 + reconsumeTimes) or, when reconsumeTimes reached
    /// `maxReconsumeTimes` (absent: the group's retryMaxTimes) or `delayLevel` < 0, in
    /// `%DLQ%<group>`.
    ConsumerSendMsgBackRequestHeader {
        offset: i64 = "offset";
        group: String = "group";
        delay_level: i32 = "delayLevel";
        origin_msg_id: Option<String> = "originMsgId";
        origin_topic: Option<String> = "originTopic";
        unit_mode: bool = "unitMode" | false;
        max_reconsume_times: Option<i32> = "maxReconsumeTimes";
    }
}

ext_header! {
    GetConsumerListByGroupRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

ext_header! {
    NotifyConsumerIdsChangedRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

ext_header! {
    UnregisterClientRequestHeader {
        client_id: String = "clientID";
        producer_group: Option<String> = "producerGroup";
        consumer_group: Option<String> = "consumerGroup";
    }
}

ext_header! {
    EndTransactionRequestHeader {
        producer_group: String = "producerGroup";
        tran_state_table_offset: i64 = "tranStateTableOffset";
        commit_log_offset: i64 = "commitLogOffset";
        commit_or_rollback: i32 = "commitOrRollback";
        from_transaction_check: bool = "fromTransactionCheck" | false;
        msg_id: String = "msgId";
        transaction_id: Option<String> = "transactionId";
    }
}

ext_header! {
    /// CHECK_TRANSACTION_STATE (39), broker to producer (oneway): "is the local
    /// transaction of this half message committed?". The body is the half message in
    /// the stored layout with its real topic and queue; the producer answers with
    /// END_TRANSACTION naming the same `tranStateTableOffset` and `commitLogOffset`,
    /// `fromTransactionCheck = true`.
    CheckTransactionStateRequestHeader {
        topic: Option<String> = "topic";
        tran_state_table_offset: i64 = "tranStateTableOffset";
        commit_log_offset: i64 = "commitLogOffset";
        msg_id: Option<String> = "msgId";
        transaction_id: Option<String> = "transactionId";
        offset_msg_id: Option<String> = "offsetMsgId";
        broker_name: Option<String> = "brokerName";
    }
}

ext_header! {
    /// UPDATE_AND_CREATE_TOPIC.
    CreateTopicRequestHeader {
        topic: String = "topic";
        default_topic: String = "defaultTopic";
        read_queue_nums: i32 = "readQueueNums";
        write_queue_nums: i32 = "writeQueueNums";
        perm: i32 = "perm";
        topic_filter_type: String = "topicFilterType";
        topic_sys_flag: Option<i32> = "topicSysFlag";
        order: bool = "order" | false;
        attributes: Option<String> = "attributes";
    }
}

ext_header! {
    /// DELETE_TOPIC_IN_BROKER / DELETE_TOPIC_IN_NAMESRV.
    DeleteTopicRequestHeader {
        topic: String = "topic";
    }
}

ext_header! {
    GetTopicsByClusterRequestHeader {
        cluster: String = "cluster";
    }
}

ext_header! {
    RegisterBrokerRequestHeader {
        broker_name: String = "brokerName";
        broker_addr: String = "brokerAddr";
        cluster_name: String = "clusterName";
        ha_server_addr: String = "haServerAddr";
        broker_id: i64 = "brokerId";
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis";
        enable_acting_master: Option<bool> = "enableActingMaster";
        compressed: bool = "compressed" | false;
        body_crc32: i32 = "bodyCrc32" | 0;
    }
}

ext_header! {
    RegisterBrokerResponseHeader {
        ha_server_addr: Option<String> = "haServerAddr";
        master_addr: Option<String> = "masterAddr";
    }
}

ext_header! {
    UnregisterBrokerRequestHeader {
        broker_name: String = "brokerName";
        broker_addr: String = "brokerAddr";
        cluster_name: String = "clusterName";
        broker_id: i64 = "brokerId";
    }
}

ext_header! {
    /// QUERY_DATA_VERSION (the body carries the DataVersion).
    QueryDataVersionRequestHeader {
        broker_name: String = "brokerName";
        broker_addr: String = "brokerAddr";
        cluster_name: String = "clusterName";
        broker_id: i64 = "brokerId";
    }
}

ext_header! {
    GetRouteInfoRequestHeader {
        topic: String = "topic";
        /// Newer clients ask for standard JSON regardless of their version.
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly";
    }
}

ext_header! {
    /// PUT_KV_CONFIG (value required), GET_KV_CONFIG / DELETE_KV_CONFIG (value absent).
    KvConfigRequestHeader {
        namespace: String = "namespace";
        key: String = "key";
        value: Option<String> = "value";
    }
}

ext_header! {
    GetKvConfigResponseHeader {
        value: Option<String> = "value";
    }
}

ext_header! {
    GetKvListByNamespaceRequestHeader {
        namespace: String = "namespace";
    }
}

ext_header! {
    /// GET_CONSUME_STATS.
    GetConsumeStatsRequestHeader {
        consumer_group: String = "consumerGroup";
        topic: Option<String> = "topic";
    }
}

ext_header! {
    /// GET_CONSUMER_CONNECTION_LIST.
    GetConsumerConnectionListRequestHeader {
        consumer_group: String = "consumerGroup";
    }
}

ext_header! {
    /// GET_TOPIC_STATS_INFO.
    GetTopicStatsInfoRequestHeader {
        topic: String = "topic";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(input: &[(&str, &str)], expected: Result<H, HeaderError>) {
        assert_eq!(H::from_ext(&ext(input)), expected, "decoding {input:?}");
    }

    fn send_v1() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "PG".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("TAGS\u{1}A\u{2}".into()),
            ..Default::default()
        }
    }

    const V1_FIELDS: &[(&str, &str)] = &[
        ("producerGroup", "PG"),
        ("topic", "T"),
        ("defaultTopic", "TBW102"),
        ("defaultTopicQueueNums", "4"),
        ("queueId", "3"),
        ("sysFlag", "0"),
        ("bornTimestamp", "1700000000000"),
        ("flag", "0"),
        ("properties", "TAGS\u{1}A\u{2}"),
    ];

    #[test]
    fn send_message_header_cases() {
        check(V1_FIELDS, Ok(send_v1()));
        let with = |extra: &[(&'static str, &'static str)]| [V1_FIELDS, extra].concat();
        check(
            &with(&[("unitMode", "true"), ("batch", "1")]),
            Ok(SendMessageRequestHeader { unit_mode: true, batch: true, ..send_v1() }),
        );
        check(
            &with(&[("unitMode", "TRUE"), ("batch", "yes")]),
            Ok(SendMessageRequestHeader { unit_mode: true, ..send_v1() }),
        );
        check(&with(&[("unitMode", "0"), ("batch", "false")]), Ok(send_v1()));
        check(
            &with(&[("reconsumeTimes", " 2 "), ("maxReconsumeTimes", "")]),
            Ok(SendMessageRequestHeader { reconsume_times: Some(2), ..send_v1() }),
        );
        check(&with(&[("AccessKey", "ak"), ("Signature", "sig"), ("OnsChannel", "ALIYUN")]), Ok(send_v1()));
        check(
            &with(&[("brokerName", "b1")]),
            Ok(SendMessageRequestHeader { broker_name: Some("b1".into()), ..send_v1() }),
        );
        check::<SendMessageRequestHeader>(&V1_FIELDS[1..], Err(HeaderError::Missing { field: "producerGroup" }));
        check::<SendMessageRequestHeader>(
            &with(&[("queueId", "x")]),
            Err(HeaderError::Invalid { field: "queueId", value: "x".into(), expected: "i32" }),
        );
        check::<SendMessageRequestHeader>(
            &with(&[("reconsumeTimes", "99999999999")]),
            Err(HeaderError::Invalid { field: "reconsumeTimes", value: "99999999999".into(), expected: "i32" }),
        );
        // The borrowed view reads every case the same, errors included.
        let cases = [
            with(&[("unitMode", "TRUE"), ("batch", "yes"), ("reconsumeTimes", " 2 "), ("maxReconsumeTimes", "")]),
            V1_FIELDS[1..].to_vec(),
            with(&[("queueId", "x")]),
            with(&[("bornTimestamp", "")]),
            vec![("a", "PG"), ("b", "T"), ("c", "TBW102"), ("d", "4"), ("e", "3"), ("f", "0"), ("h", "0"), ("k", "1")],
        ];
        for case in cases {
            let e = ext(&case);
            assert_eq!(SendMessageHeaderRef::from_ext_any(&e).map(|r| r.to_owned()), SendMessageRequestHeader::from_ext_any(&e), "{case:?}");
        }
    }

    #[test]
    fn v2_short_names_and_conversion() {
        let v2 = ext(&[
            ("a", "PG"),
            ("b", "T"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "3"),
            ("f", "0"),
            ("g", "1700000000000"),
            ("h", "0"),
            ("i", "TAGS\u{1}A\u{2}"),
        ]);
        let parsed = SendMessageRequestHeaderV2::from_ext(&v2).unwrap();
        assert_eq!(SendMessageRequestHeader::from(parsed.clone()), send_v1());
        assert_eq!(SendMessageRequestHeaderV2::from(send_v1()), parsed);
        assert_eq!(SendMessageRequestHeader::from_ext_any(&v2), Ok(send_v1()));
        assert_eq!(SendMessageRequestHeader::from_ext_any(&ext(V1_FIELDS)), Ok(send_v1()));
        let mut canonical = v2.clone();
        canonical.extend(ext(&[("k", "false"), ("m", "false")]));
        assert_eq!(parsed.to_ext(), canonical);
        let mut missing = v2;
        missing.remove("g");
        assert_eq!(SendMessageRequestHeader::from_ext_any(&missing), Err(HeaderError::Missing { field: "g" }));
    }

    #[test]
    fn other_header_cases() {
        check(
            &[("topic", "T"), ("queueId", "1")],
            Ok(GetMaxOffsetRequestHeader { topic: "T".into(), queue_id: 1, committed: true }),
        );
        check(
            &[("topic", "T"), ("queueId", "1"), ("committed", "false")],
            Ok(GetMaxOffsetRequestHeader { topic: "T".into(), queue_id: 1, committed: false }),
        );
        check(
            &[("topic", "T"), ("queueId", "1"), ("timestamp", "-5")],
            Ok(SearchOffsetRequestHeader { topic: "T".into(), queue_id: 1, timestamp: -5 }),
        );
        check::<SearchOffsetRequestHeader>(
            &[("topic", "T"), ("queueId", "1")],
            Err(HeaderError::Missing { field: "timestamp" }),
        );
        check(&[("offset", "123")], Ok(ViewMessageRequestHeader { offset: 123, topic: None }));
        check(
            &[("clientID", "c@1")],
            Ok(UnregisterClientRequestHeader { client_id: "c@1".into(), ..Default::default() }),
        );
        check(&[("topic", "T")], Ok(GetRouteInfoRequestHeader { topic: "T".into(), accept_standard_json_only: None }));
        check(
            &[("topic", "T"), ("acceptStandardJsonOnly", "true")],
            Ok(GetRouteInfoRequestHeader { topic: "T".into(), accept_standard_json_only: Some(true) }),
        );
        check(
            &[
                ("brokerName", "b"),
                ("brokerAddr", "1.2.3.4:10911"),
                ("clusterName", "c"),
                ("haServerAddr", "1.2.3.4:10912"),
                ("brokerId", "0"),
            ],
            Ok(RegisterBrokerRequestHeader {
                broker_name: "b".into(),
                broker_addr: "1.2.3.4:10911".into(),
                cluster_name: "c".into(),
                ha_server_addr: "1.2.3.4:10912".into(),
                ..Default::default()
            }),
        );
        check(
            &[
                ("topic", "T"),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", "8"),
                ("writeQueueNums", "8"),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
            ],
            Ok(CreateTopicRequestHeader {
                topic: "T".into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 8,
                write_queue_nums: 8,
                perm: 6,
                topic_filter_type: "SINGLE_TAG".into(),
                ..Default::default()
            }),
        );
        check(
            &[("offset", "9"), ("group", "G"), ("delayLevel", "0"), ("originMsgId", "ID"), ("maxReconsumeTimes", "16")],
            Ok(ConsumerSendMsgBackRequestHeader {
                offset: 9,
                group: "G".into(),
                origin_msg_id: Some("ID".into()),
                max_reconsume_times: Some(16),
                ..Default::default()
            }),
        );
        check::<ConsumerSendMsgBackRequestHeader>(
            &[("offset", "9"), ("group", "G")],
            Err(HeaderError::Missing { field: "delayLevel" }),
        );
        let long = "9".repeat(1000);
        match OffsetResponseHeader::from_ext(&ext(&[("offset", &long)])) {
            Err(HeaderError::Invalid { value, .. }) => assert_eq!(value.len(), VALUE_IN_ERROR_MAX_CHARS),
            other => panic!("{other:?}"),
        }
    }

    fn arb_pull() -> impl Strategy<Value = PullMessageRequestHeader> {
        (
            (".{0,12}", ".{0,12}", any::<i32>(), any::<i64>(), any::<i32>(), any::<i32>()),
            (
                any::<i64>(),
                any::<i64>(),
                proptest::option::of(".{0,20}"),
                any::<i64>(),
                proptest::option::of("TAG|SQL92"),
                proptest::option::of(any::<i32>()),
            ),
        )
            .prop_map(|((cg, t, q, qo, mm, sf), (co, st, sub, sv, et, mb))| PullMessageRequestHeader {
                consumer_group: cg,
                topic: t,
                queue_id: q,
                queue_offset: qo,
                max_msg_nums: mm,
                sys_flag: sf,
                commit_offset: co,
                suspend_timeout_millis: st,
                subscription: sub,
                sub_version: sv,
                expression_type: et,
                max_msg_bytes: mb,
            })
    }

    fn arb_send_back() -> impl Strategy<Value = ConsumerSendMsgBackRequestHeader> {
        (
            any::<i64>(),
            ".{0,12}",
            any::<i32>(),
            proptest::option::of(".{0,32}"),
            proptest::option::of(".{0,12}"),
            any::<bool>(),
            proptest::option::of(any::<i32>()),
        )
            .prop_map(|(offset, group, delay_level, origin_msg_id, origin_topic, unit_mode, max_reconsume_times)| {
                ConsumerSendMsgBackRequestHeader { offset, group, delay_level, origin_msg_id, origin_topic, unit_mode, max_reconsume_times }
            })
    }

    fn arb_send() -> impl Strategy<Value = SendMessageRequestHeader> {
        (
            (".{0,12}", ".{0,12}", ".{0,12}", any::<i32>(), any::<i32>(), any::<i32>(), any::<i64>()),
            (
                any::<i32>(),
                proptest::option::of(".{0,30}"),
                proptest::option::of(any::<i32>()),
                any::<bool>(),
                proptest::option::of(any::<i32>()),
                any::<bool>(),
                proptest::option::of(".{0,10}"),
            ),
        )
            .prop_map(|((pg, t, dt, dq, q, sf, bt), (f, p, rt, um, mrt, b, bn))| SendMessageRequestHeader {
                producer_group: pg,
                topic: t,
                default_topic: dt,
                default_topic_queue_nums: dq,
                queue_id: q,
                sys_flag: sf,
                born_timestamp: bt,
                flag: f,
                properties: p,
                reconsume_times: rt,
                unit_mode: um,
                max_reconsume_times: mrt,
                batch: b,
                broker_name: bn,
            })
    }

    proptest! {
        #[test]
        fn send_roundtrip(h in arb_send()) {
            prop_assert_eq!(SendMessageRequestHeader::from_ext(&h.to_ext()), Ok(h.clone()));
            let v2 = SendMessageRequestHeaderV2::from(h.clone());
            prop_assert_eq!(SendMessageRequestHeaderV2::from_ext(&v2.to_ext()), Ok(v2.clone()));
            prop_assert_eq!(SendMessageRequestHeader::from_ext_any(&v2.to_ext()), Ok(h.clone()));
            for ext in [h.to_ext(), v2.to_ext()] {
                prop_assert_eq!(SendMessageHeaderRef::from_ext_any(&ext).map(|r| r.to_owned()), SendMessageRequestHeader::from_ext_any(&ext));
            }
        }

        #[test]
        fn send_back_roundtrip(h in arb_send_back()) {
            prop_assert_eq!(ConsumerSendMsgBackRequestHeader::from_ext(&h.to_ext()), Ok(h));
        }

        #[test]
        fn pull_roundtrip(h in arb_pull()) {
            prop_assert_eq!(PullMessageRequestHeader::from_ext(&h.to_ext()), Ok(h));
        }

        #[test]
        fn small_headers_roundtrip(a in ".{0,10}", n in any::<i32>(), l in any::<i64>(), b in any::<bool>()) {
            let h = PullMessageResponseHeader { suggest_which_broker_id: l, next_begin_offset: l, min_offset: -l, max_offset: 0 };
            prop_assert_eq!(PullMessageResponseHeader::from_ext(&h.to_ext()), Ok(h));
            let h = SendMessageResponseHeader { msg_id: a.clone(), queue_id: n, queue_offset: l, transaction_id: None, batch_uniq_id: Some(a.clone()) };
            prop_assert_eq!(SendMessageResponseHeader::from_ext(&h.to_ext()), Ok(h));
            let h = QueryMessageRequestHeader { topic: a.clone(), key: a.clone(), max_num: n, begin_timestamp: l, end_timestamp: l };
            prop_assert_eq!(QueryMessageRequestHeader::from_ext(&h.to_ext()), Ok(h));
            let h = UpdateConsumerOffsetRequestHeader { consumer_group: a.clone(), topic: a.clone(), queue_id: n, commit_offset: l };
            prop_assert_eq!(UpdateConsumerOffsetRequestHeader::from_ext(&h.to_ext()), Ok(h));
            let h = RegisterBrokerRequestHeader { broker_name: a.clone(), broker_addr: a.clone(), cluster_name: a.clone(),
                ha_server_addr: a, broker_id: l, heartbeat_timeout_millis: Some(l), enable_acting_master: Some(b), compressed: b, body_crc32: n };
            prop_assert_eq!(RegisterBrokerRequestHeader::from_ext(&h.to_ext()), Ok(h));
        }
    }
}
