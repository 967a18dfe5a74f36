//! SendMessage (docs/design/pop-grpc.md §3.3; Apache
//! `proxy/grpc/v2/producer/SendMessageActivity.java` and `ProducerProcessor`): the
//! `GrpcValidator` checks, the queue choice (message group → Guava `consistentHash` of
//! Java's `String.hashCode`, else round robin over the writable queues), one
//! SEND_MESSAGE_V2 per message with Apache's properties, and the answer entries.
//!
//! Invariants: a request carries at most `SEND_MESSAGES_PER_REQUEST_MAX` messages, all of
//! one topic, all sent to one queue in order; nothing is sent unless every message
//! passed validation; a transactional half that was stored is recorded in the
//! transaction table before the answer leaves (its EndTransaction may follow at once).

use crate::backend::Target;
use crate::metadata::ClientMeta;
use crate::pb::{self, Code, Encoding, MessageType};
use crate::route::{validate_topic, write_queues, TopicMessageType};
use crate::server::Frontend;
use crate::status::{self, GrpcError};
use crate::txn::TxnData;
use ringmq_client::hash::java_string_hash;
use ringmq_client::message::properties::{keys, Properties};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::headers::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use ringmq_client::remoting::RemotingCommand;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

/// Most messages in one SendMessage request.
pub const SEND_MESSAGES_PER_REQUEST_MAX: usize = 1024;
/// Apache `ProxyConfig` limits.
pub const USER_PROPERTY_COUNT_MAX: usize = 128;
pub const USER_PROPERTY_BYTES_MAX: usize = 16 * 1024;
pub const MESSAGE_GROUP_BYTES_MAX: usize = 64;
pub const MAX_DELAY_MS_DEFAULT: i64 = 86_400_000;
/// Apache `ProxyConfig.maxTransactionRecoverySecond`.
pub const TRANSACTION_RECOVERY_SECONDS_MAX: i64 = 3600;
/// The default topic and its queue count a send header names (`TBW102`, 4).
const DEFAULT_TOPIC: &str = "TBW102";
const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// `MessageSysFlag`.
pub const COMPRESSED_FLAG: i32 = 0x1;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;

/// `MessageConst.STRING_HASH_SET`: property keys a client may not set.
pub const SYSTEM_PROPERTY_KEYS: &[&str] = &[
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK",
    "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
    "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
];
const SHARDING_KEY: &str = "__SHARDINGKEY";
const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
const BORN_HOST: &str = "__BORNHOST";
const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";

/// Guava `Hashing.consistentHash(long, int)` (jump consistent hash over Guava's LCG).
pub fn consistent_hash(input: i64, buckets: i32) -> i32 {
    assert!(buckets > 0, "consistent_hash needs buckets > 0, got {buckets}");
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        let next_double = (((state as u64 >> 33) as i32).wrapping_add(1)) as f64 / (1u64 << 31) as f64;
        let next = ((candidate as f64 + 1.0) / next_double) as i32;
        if next >= 0 && next < buckets {
            candidate = next;
        } else {
            return candidate;
        }
    }
}

/// The queue index of a message group among `buckets` writable queues.
pub fn message_group_queue(group: &str, buckets: i32) -> i32 {
    consistent_hash(java_string_hash(group) as i64, buckets)
}

fn has_control(s: &str) -> bool {
    // Guava's CharMatcher.javaIsoControl: U+0000–U+001F and U+007F–U+009F.
    s.chars().any(|c| c.is_control() && (c as u32) <= 0x9f)
}

fn bad(code: Code, message: impl Into<String>) -> GrpcError {
    GrpcError::new(code, message)
}

/// Apache `TopicMessageType.parseFromMessageProperty`.
pub fn message_type_of(props: &Properties) -> TopicMessageType {
    if props.get(keys::TRAN_MSG) == Some("true") {
        TopicMessageType::Transaction
    } else if props.get(keys::DELAY).is_some() || props.get(keys::TIMER_DELIVER_MS).is_some() || props.get(keys::TIMER_DELAY_SEC).is_some() || props.get(keys::TIMER_DELAY_MS).is_some() {
        TopicMessageType::Delay
    } else if props.get(SHARDING_KEY).is_some() {
        TopicMessageType::Fifo
    } else {
        TopicMessageType::Normal
    }
}

/// Apache `TopicMessageTypeValidator.validate`.
pub fn validate_message_type(topic_type: TopicMessageType, message_type: TopicMessageType) -> Result<(), GrpcError> {
    if message_type == TopicMessageType::Unspecified || (message_type != topic_type && topic_type != TopicMessageType::Mixed) {
        return Err(bad(
            Code::MessagePropertyConflictWithType,
            format!("topic message type is not match, topic message type is: {}, actual message type is: {}", topic_type.as_str(), message_type.as_str()),
        ));
    }
    Ok(())
}

/// Limits the send path applies.
#[derive(Debug, Clone, Copy)]
pub struct SendLimits {
    pub max_body_bytes: usize,
    pub max_delay_ms: i64,
}

/// One validated message: its body, sysFlag and properties (`buildMessageProperty`).
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    pub body: bytes::Bytes,
    pub sys_flag: i32,
    pub properties: Properties,
    pub reconsume_times: i32,
}

fn set(props: &mut Properties, key: &str, value: &str, code: Code) -> Result<(), GrpcError> {
    props.set(key, value).map_err(|e| bad(code, e.to_string()))
}

/// `SendMessageActivity.buildMessage` / `buildSysFlag` for one message.
pub fn build_message(msg: &pb::Message, producer_group: &str, peer: &str, limits: SendLimits, now_ms: i64) -> Result<Built, GrpcError> {
    let sys = msg.system_properties.clone().unwrap_or_default();
    if msg.body.is_empty() {
        return Err(bad(Code::MessageBodyEmpty, "message body cannot be empty"));
    }
    if msg.body.len() > limits.max_body_bytes {
        return Err(bad(Code::MessageBodyTooLarge, format!("message body cannot exceed the max {}", limits.max_body_bytes)));
    }
    if msg.user_properties.len() > USER_PROPERTY_COUNT_MAX {
        return Err(bad(Code::MessagePropertiesTooLarge, format!("too many user properties, max is {USER_PROPERTY_COUNT_MAX}")));
    }
    let mut props = Properties::new();
    let mut user_bytes = 0usize;
    // Sorted, so the stored properties do not depend on the map's order.
    let mut user: Vec<_> = msg.user_properties.iter().collect();
    user.sort();
    for (k, v) in user {
        if SYSTEM_PROPERTY_KEYS.contains(&k.as_str()) {
            return Err(bad(Code::IllegalMessagePropertyKey, format!("property is used by system: {k}")));
        }
        if has_control(k) {
            return Err(bad(Code::IllegalMessagePropertyKey, "the key of property cannot contain control character"));
        }
        if has_control(v) {
            return Err(bad(Code::IllegalMessagePropertyKey, "the value of property cannot contain control character"));
        }
        user_bytes += k.len() + v.len();
        set(&mut props, k, v, Code::IllegalMessagePropertyKey)?;
    }
    if let Some(tag) = sys.tag.as_deref().filter(|t| !t.is_empty()) {
        if tag.trim().is_empty() {
            return Err(bad(Code::IllegalMessageTag, "tag cannot be the char sequence of whitespace"));
        }
        if tag.contains('|') {
            return Err(bad(Code::IllegalMessageTag, "tag cannot contain '|'"));
        }
        if has_control(tag) {
            return Err(bad(Code::IllegalMessageTag, "tag cannot contain control character"));
        }
        user_bytes += tag.len();
        set(&mut props, keys::TAGS, tag, Code::IllegalMessageTag)?;
    }
    for key in &sys.keys {
        if !key.is_empty() && key.trim().is_empty() {
            return Err(bad(Code::IllegalMessageKey, "key cannot be the char sequence of whitespace"));
        }
        if has_control(key) {
            return Err(bad(Code::IllegalMessageKey, "key cannot contain control character"));
        }
        user_bytes += key.len();
    }
    if !sys.keys.is_empty() {
        set(&mut props, keys::KEYS, &sys.keys.join(" "), Code::IllegalMessageKey)?;
    }
    if user_bytes > USER_PROPERTY_BYTES_MAX {
        return Err(bad(Code::MessagePropertiesTooLarge, format!("the total size of user property is too large, max is {USER_PROPERTY_BYTES_MAX}")));
    }
    if sys.message_id.trim().is_empty() {
        return Err(bad(Code::IllegalMessageId, "message id cannot be empty"));
    }
    set(&mut props, keys::UNIQ_KEY, &sys.message_id, Code::IllegalMessageId)?;
    let message_type = MessageType::try_from(sys.message_type).unwrap_or(MessageType::Unspecified);
    let mut sys_flag = 0;
    if sys.body_encoding == Encoding::Gzip as i32 {
        sys_flag |= COMPRESSED_FLAG;
    }
    if message_type == MessageType::Transaction {
        sys_flag |= TRANSACTION_PREPARED_TYPE;
        set(&mut props, keys::TRAN_MSG, "true", Code::BadRequest)?;
        if let Some(d) = &sys.orphaned_transaction_recovery_duration {
            if d.seconds > TRANSACTION_RECOVERY_SECONDS_MAX {
                return Err(bad(Code::BadRequest, format!("the max transaction recovery time of message is too large, max is {TRANSACTION_RECOVERY_SECONDS_MAX}")));
            }
            set(&mut props, keys::CHECK_IMMUNITY_TIME_IN_SECONDS, &d.seconds.to_string(), Code::BadRequest)?;
        }
    }
    if let Some(t) = &sys.delivery_timestamp {
        let deliver_ms = t.seconds.saturating_mul(1000).saturating_add(t.nanos as i64 / 1_000_000);
        if limits.max_delay_ms > 0 && deliver_ms.saturating_sub(now_ms) > limits.max_delay_ms {
            return Err(bad(Code::IllegalDeliveryTime, format!("the max delay time of message is too large, max is {}", limits.max_delay_ms)));
        }
        set(&mut props, keys::TIMER_DELIVER_MS, &deliver_ms.to_string(), Code::IllegalDeliveryTime)?;
    }
    set(&mut props, keys::RECONSUME_TIME, &sys.delivery_attempt.unwrap_or(0).to_string(), Code::BadRequest)?;
    set(&mut props, keys::PGROUP, producer_group, Code::BadRequest)?;
    if let Some(group) = sys.message_group.as_deref().filter(|g| !g.is_empty()) {
        if group.trim().is_empty() {
            return Err(bad(Code::IllegalMessageGroup, "message group cannot be the char sequence of whitespace"));
        }
        if group.len() >= MESSAGE_GROUP_BYTES_MAX {
            return Err(bad(Code::IllegalMessageGroup, format!("message group exceed the max size {MESSAGE_GROUP_BYTES_MAX}")));
        }
        if has_control(group) {
            return Err(bad(Code::IllegalMessageGroup, "message group cannot contain control character"));
        }
        set(&mut props, SHARDING_KEY, group, Code::IllegalMessageGroup)?;
    }
    if let Some(trace) = sys.trace_context.as_deref().filter(|t| !t.is_empty()) {
        set(&mut props, TRACE_CONTEXT, trace, Code::BadRequest)?;
    }
    let born_host = if sys.born_host.trim().is_empty() { peer } else { sys.born_host.as_str() };
    if !born_host.trim().is_empty() {
        set(&mut props, BORN_HOST, born_host, Code::BadRequest)?;
    }
    if let Some(t) = sys.born_timestamp.as_ref().filter(|t| t.seconds > 0 || t.nanos > 0) {
        set(&mut props, BORN_TIMESTAMP, &(t.seconds * 1000 + t.nanos as i64 / 1_000_000).to_string(), Code::BadRequest)?;
    }
    Ok(Built { body: msg.body.clone().into(), sys_flag, properties: props, reconsume_times: sys.delivery_attempt.unwrap_or(0) })
}

/// The SEND_MESSAGE_V2 request for one built message.
pub fn send_request(meta: &ClientMeta, topic: &str, producer_group: &str, broker: &str, queue_id: i32, built: &Built, now_ms: i64) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: producer_group.to_string(),
        b: topic.to_string(),
        c: DEFAULT_TOPIC.to_string(),
        d: DEFAULT_TOPIC_QUEUE_NUMS,
        e: queue_id,
        f: built.sys_flag,
        g: now_ms,
        h: 0,
        i: Some(built.properties.encode()),
        j: Some(built.reconsume_times),
        k: false,
        l: None,
        m: false,
        n: Some(broker.to_string()),
    };
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(built.body.clone());
    cmd.language = Cow::Borrowed(meta.language);
    cmd
}

/// The entry of one SEND_MESSAGE_V2 answer (`convertToSendMessageResponse`); `Err` for
/// an answer Apache turns into an exception (the whole RPC fails).
pub fn entry_of(answer: &RemotingCommand, message_id: &str) -> Result<pb::SendResultEntry, GrpcError> {
    let failed = |code: Code, name: &str| pb::SendResultEntry { status: Some(status::status(code, format!("send message failed, sendStatus={name}"))), ..Default::default() };
    match answer.code {
        rs::SUCCESS => {
            let h: SendMessageResponseHeader = answer.header().map_err(|e| bad(Code::InternalServerError, format!("send answer: {e}")))?;
            Ok(pb::SendResultEntry {
                status: Some(status::ok()),
                message_id: message_id.to_string(),
                // Design §3.3: the half's offsetMsgId, which names its broker and CommitLog offset.
                transaction_id: h.msg_id,
                offset: h.queue_offset,
                recall_handle: String::new(),
            })
        }
        rs::FLUSH_DISK_TIMEOUT => Ok(failed(Code::MasterPersistenceTimeout, "FLUSH_DISK_TIMEOUT")),
        rs::FLUSH_SLAVE_TIMEOUT => Ok(failed(Code::SlavePersistenceTimeout, "FLUSH_SLAVE_TIMEOUT")),
        rs::SLAVE_NOT_AVAILABLE => Ok(failed(Code::HaNotAvailable, "SLAVE_NOT_AVAILABLE")),
        _ => Err(GrpcError::from_response(answer)),
    }
}

/// The response status over the entries: their one code, or MULTIPLE_RESULTS.
pub fn overall_status(entries: &[pb::SendResultEntry]) -> pb::Status {
    let mut codes: Vec<i32> = entries.iter().map(|e| e.status.as_ref().map_or(0, |s| s.code)).collect();
    codes.sort_unstable();
    codes.dedup();
    match codes.as_slice() {
        [] => status::status(Code::InternalServerError, "send status is empty"),
        [one] => {
            let code = Code::try_from(*one).unwrap_or(Code::InternalServerError);
            status::status(code, code.as_str_name())
        }
        _ => status::status(Code::MultipleResults, "MULTIPLE_RESULTS"),
    }
}

/// SendMessage.
pub async fn send_message(fe: &Frontend, meta: &ClientMeta, req: pb::SendMessageRequest) -> Result<pb::SendMessageResponse, GrpcError> {
    let first = req.messages.first().ok_or_else(|| bad(Code::MessageCorrupted, "no message to send"))?;
    if req.messages.len() > SEND_MESSAGES_PER_REQUEST_MAX {
        return Err(bad(Code::BadRequest, format!("{} messages in one request; at most {SEND_MESSAGES_PER_REQUEST_MAX}", req.messages.len())));
    }
    let resource = first.topic.clone().unwrap_or_default();
    let topic = meta.resource_name(&resource);
    validate_topic(&topic)?;
    // Apache uses the topic as the producer group: check-backs find the producer by it.
    let producer_group = topic.clone();
    let now = fe.clock.now_ms();
    let limits = SendLimits { max_body_bytes: fe.config.max_message_bytes, max_delay_ms: fe.config.max_delay_ms };
    let mut built = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        if m.topic.as_ref() != Some(&resource) {
            return Err(bad(Code::MessageCorrupted, "topic in message is not same"));
        }
        built.push(build_message(m, &producer_group, &meta.peer, limits, now)?);
    }
    let view = fe.topic_view(&topic).await?;
    validate_message_type(view.message_type, message_type_of(&built[0].properties))?;
    let queues = write_queues(&view.route);
    if queues.is_empty() {
        return Err(bad(Code::Forbidden, "no writable queue"));
    }
    let group = if req.messages.len() == 1 { first.system_properties.as_ref().and_then(|s| s.message_group.as_deref()).filter(|g| !g.is_empty()) } else { None };
    let index = match group {
        Some(g) => message_group_queue(g, queues.len() as i32) as usize,
        None => fe.send_rr.fetch_add(1, Ordering::Relaxed) % queues.len(),
    };
    let (broker, queue_id) = &queues[index];
    let mut entries = Vec::with_capacity(built.len());
    for (m, b) in req.messages.iter().zip(&built) {
        let message_id = m.system_properties.as_ref().map(|s| s.message_id.as_str()).unwrap_or("");
        let answer = fe.call(Target::Broker(broker.clone()), send_request(meta, &topic, &producer_group, broker, *queue_id, b, fe.clock.now_ms())).await?;
        let entry = entry_of(&answer, message_id)?;
        if b.sys_flag & TRANSACTION_PREPARED_TYPE != 0 && answer.code == rs::SUCCESS {
            if let Some(data) = TxnData::of_half(broker, &entry) {
                fe.record_transaction(&producer_group, &entry.transaction_id, data);
            }
        }
        entries.push(entry);
    }
    Ok(pb::SendMessageResponse { status: Some(overall_status(&entries)), entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guava_consistent_hash_vectors() {
        // Guava HashingTest.testConsistentHash_linearCongruentialGeneratorCompatibility.
        let golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83];
        for (i, expected) in golden100.iter().enumerate() {
            assert_eq!(consistent_hash(i as i64, 100), *expected, "input {i}");
        }
        let cases = [(10863919174838991, 11, 6), (2016238256797177309, 11, 3), (1673758223894951030, 11, 5), (2, 100001, 80343), (2201, 100001, 22152), (2202, 100001, 15018)];
        for (input, buckets, expected) in cases {
            assert_eq!(consistent_hash(input, buckets), expected, "{input} over {buckets}");
        }
    }

    #[test]
    fn message_groups_use_java_hash_codes() {
        // A negative String.hashCode is sign-extended to a long, as Java's int → long.
        for g in ["group-a", "订单-42", "zzzzzzzzzz"] {
            let h = java_string_hash(g);
            assert_eq!(message_group_queue(g, 8), consistent_hash(h as i64, 8));
        }
        assert!(java_string_hash("zzzzzzzzzz") < 0, "the vector needs a negative hash");
        for n in 1..20 {
            let q = message_group_queue("group-a", n);
            assert!((0..n).contains(&q));
        }
    }

    #[test]
    fn message_types() {
        let p = |pairs: &[(&str, &str)]| {
            let mut p = Properties::new();
            for (k, v) in pairs {
                p.set(k, v).unwrap();
            }
            message_type_of(&p)
        };
        assert_eq!(p(&[]), TopicMessageType::Normal);
        assert_eq!(p(&[("TRAN_MSG", "true")]), TopicMessageType::Transaction);
        assert_eq!(p(&[("TIMER_DELIVER_MS", "1")]), TopicMessageType::Delay);
        assert_eq!(p(&[("__SHARDINGKEY", "g")]), TopicMessageType::Fifo);
        use TopicMessageType::*;
        let cases = [(Mixed, Fifo, true), (Normal, Normal, true), (Normal, Fifo, false), (Fifo, Normal, false), (Mixed, Unspecified, false), (Transaction, Transaction, true)];
        for (topic, msg, ok) in cases {
            assert_eq!(validate_message_type(topic, msg).is_ok(), ok, "{topic:?} {msg:?}");
        }
        assert_eq!(
            validate_message_type(Normal, Fifo).unwrap_err().message,
            "topic message type is not match, topic message type is: NORMAL, actual message type is: FIFO"
        );
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;

    fn check(code: i32, expected: Result<Code, Code>) {
        let mut answer = RemotingCommand::request(0).create_response(code, Some("remark"));
        answer.ext_fields.set_str("msgId", "AC11000100002A9F0000000000000001");
        answer.ext_fields.set_str("queueId", "1");
        answer.ext_fields.set_str("queueOffset", "9");
        let got = entry_of(&answer, "id").map(|e| Code::try_from(e.status.unwrap().code).unwrap()).map_err(|e| e.code);
        assert_eq!(got, expected, "remoting {code}");
    }

    #[test]
    fn send_answers() {
        check(rs::SUCCESS, Ok(Code::Ok));
        check(rs::FLUSH_DISK_TIMEOUT, Ok(Code::MasterPersistenceTimeout));
        check(rs::FLUSH_SLAVE_TIMEOUT, Ok(Code::SlavePersistenceTimeout));
        check(rs::SLAVE_NOT_AVAILABLE, Ok(Code::HaNotAvailable));
        check(rs::TOPIC_NOT_EXIST, Err(Code::TopicNotFound));
        check(rs::NO_PERMISSION, Err(Code::Forbidden));
        check(rs::SYSTEM_BUSY, Err(Code::TooManyRequests));
        check(rs::MESSAGE_ILLEGAL, Err(Code::BadRequest));
        check(rs::SYSTEM_ERROR, Err(Code::InternalServerError));
        let entry = |c: Code| pb::SendResultEntry { status: Some(status::status(c, "")), ..Default::default() };
        let overall = |codes: &[Code]| Code::try_from(overall_status(&codes.iter().map(|c| entry(*c)).collect::<Vec<_>>()).code).unwrap();
        assert_eq!(overall(&[]), Code::InternalServerError);
        assert_eq!(overall(&[Code::Ok, Code::Ok]), Code::Ok);
        assert_eq!(overall(&[Code::MasterPersistenceTimeout]), Code::MasterPersistenceTimeout);
        assert_eq!(overall(&[Code::Ok, Code::SlavePersistenceTimeout]), Code::MultipleResults);
    }

    proptest::proptest! {
        #[test]
        fn consistent_hash_stays_in_range(input in proptest::prelude::any::<i64>(), buckets in 1i32..10_000) {
            let b = consistent_hash(input, buckets);
            proptest::prop_assert!((0..buckets).contains(&b));
        }
    }
}
