//! Message traces, as Apache RocketMQ's client records them (`enableMsgTrace`): after
//! a send a `Pub` record, around a consume a `SubBefore` and a `SubAfter` record, sent
//! asynchronously in batches to the trace topic (`RMQ_SYS_TRACE_TOPIC` unless
//! configured), keyed by the traced messages' ids so `mqadmin queryMsgTraceById` (and
//! `ringmq-admin queryMsgTraceById`) finds them through the brokers' key index.
//!
//! `encoder` is Java's text format; this file builds the records from a send or a
//! consume (Java's `SendMessageTraceHookImpl`, `ConsumeMessageTraceHookImpl`) as plain
//! functions; `dispatcher` queues and sends them.
//!
//! Invariants: building a record never does IO and never fails a send or a consume;
//! a send is traced only when its broker answered `TRACE_ON` other than `false`
//! (Java's `SendResult.isTraceOn`), and a consumed message is left out when its
//! stored `TRACE_ON` property is `false`; a message sent to the trace topic itself is
//! never traced (a trace of a trace would never end).

pub mod dispatcher;
pub mod encoder;

pub use dispatcher::{TraceDispatcher, TraceRole};
pub use encoder::{decode, encode, MessageType, TraceBean, TraceContext, TraceDecodeError, TraceTransfer, TraceType};

use crate::message::properties::keys;
use crate::message::{Message, MessageExt};

/// Java's `TopicValidator.RMQ_SYS_TRACE_TOPIC`: the default trace topic.
pub const TRACE_TOPIC_DEFAULT: &str = "RMQ_SYS_TRACE_TOPIC";
/// Java's `MixAll.DEFAULT_TRACE_REGION_ID`: the region when a broker names none.
pub const REGION_DEFAULT: &str = "DefaultRegion";
/// Java's `MessageConst.PROPERTY_MSG_REGION` (a send answer's field, a stored property).
pub const MSG_REGION: &str = "MSG_REGION";
/// Java's `MessageConst.PROPERTY_TRACE_SWITCH` (a send answer's field, a stored property).
pub const TRACE_ON: &str = "TRACE_ON";

/// Java's `ConsumeReturnType`, whose ordinal a SubAfter record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeReturn {
    Success = 0,
    TimeOut = 1,
    Exception = 2,
    ReturnNull = 3,
    Failed = 4,
}

/// Tracing settings of a producer or push consumer (Java's `enableMsgTrace` and
/// `customizedTraceTopic`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceConfig {
    /// Record and send traces. Off by default, as in Java.
    pub enabled: bool,
    /// The trace topic; None: [`TRACE_TOPIC_DEFAULT`].
    pub topic: Option<String>,
}

impl TraceConfig {
    /// Tracing on, to the default topic.
    pub fn on() -> Self {
        Self { enabled: true, topic: None }
    }

    pub fn topic(&self) -> &str {
        self.topic.as_deref().unwrap_or(TRACE_TOPIC_DEFAULT)
    }
}

/// What a send's answer says about tracing: its broker's region and `TRACE_ON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendTraceAnswer {
    pub region_id: String,
    pub trace_on: bool,
}

impl SendTraceAnswer {
    /// Java's `processSendResponse`: an absent region is the default one, and only an
    /// explicit `false` turns tracing off.
    pub fn of(region: Option<&str>, trace_on: Option<&str>) -> Self {
        Self { region_id: region.filter(|r| !r.is_empty()).unwrap_or(REGION_DEFAULT).to_string(), trace_on: trace_on != Some("false") }
    }
}

/// What Java's `sendKernelImpl` calls the message's type.
pub fn message_type(msg: &Message) -> MessageType {
    let p = &msg.properties;
    if p.get(keys::TRAN_MSG) == Some("true") {
        MessageType::TransHalf
    } else if crate::message::user::DELIVERY_PROPERTIES.iter().any(|name| p.get(name).is_some()) {
        MessageType::Delay
    } else {
        MessageType::Normal
    }
}

/// One successful send as traced. The send's result fields are passed one by one so
/// the producer builds no result twice.
pub struct SentMessage<'a> {
    pub msg: &'a Message,
    pub group: &'a str,
    pub broker_addr: &'a str,
    pub msg_id: &'a str,
    pub offset_msg_id: &'a str,
    /// When the attempt began and how long it took (ms).
    pub began_ms: i64,
    pub cost_ms: i64,
}

/// Java's `SendMessageTraceHookImpl`: the Pub record of a send, or None when the
/// broker turned tracing off or the message went to the trace topic.
pub fn pub_context(sent: &SentMessage<'_>, answer: &SendTraceAnswer, trace_topic: &str) -> Option<TraceContext> {
    if !answer.trace_on || sent.msg.topic.starts_with(trace_topic) {
        return None;
    }
    let mut ctx = TraceContext::new(TraceType::Pub, sent.began_ms);
    ctx.group_name = sent.group.to_string();
    ctx.region_id = answer.region_id.clone();
    ctx.cost_time = i32::try_from(sent.cost_ms).unwrap_or(i32::MAX);
    ctx.success = true;
    ctx.beans.push(TraceBean {
        topic: sent.msg.topic.clone(),
        msg_id: sent.msg_id.to_string(),
        offset_msg_id: sent.offset_msg_id.to_string(),
        tags: sent.msg.properties.get(keys::TAGS).unwrap_or("").to_string(),
        keys: sent.msg.properties.get(keys::KEYS).unwrap_or("").to_string(),
        store_host: sent.broker_addr.to_string(),
        store_time: sent.began_ms + sent.cost_ms / 2,
        body_length: i32::try_from(sent.msg.body.len()).unwrap_or(i32::MAX),
        msg_type: message_type(sent.msg),
        ..TraceBean::default()
    });
    Some(ctx)
}

/// Java's `consumeMessageBefore`: the SubBefore record of a batch handed to a
/// listener, or None when every message has tracing turned off.
pub fn sub_before(group: &str, msgs: &[MessageExt], request_id: String, now_ms: i64) -> Option<TraceContext> {
    let mut ctx = TraceContext::new(TraceType::SubBefore, now_ms);
    ctx.group_name = group.to_string();
    ctx.request_id = request_id;
    for m in msgs.iter().filter(|m| m.property(TRACE_ON) != Some("false")) {
        // Java takes the last message's region; a broker that stores none is the
        // default region (Java would drop the record, rocketmq-client-rust does this).
        ctx.region_id = m.property(MSG_REGION).unwrap_or(REGION_DEFAULT).to_string();
        ctx.beans.push(TraceBean {
            topic: m.topic.clone(),
            msg_id: m.msg_id.clone(),
            tags: m.tags().unwrap_or("").to_string(),
            keys: m.property(keys::KEYS).unwrap_or("").to_string(),
            store_time: m.store_timestamp_ms,
            body_length: i32::try_from(m.body.len()).unwrap_or(i32::MAX),
            retry_times: m.reconsume_times,
            ..TraceBean::default()
        });
    }
    (!ctx.beans.is_empty()).then_some(ctx)
}

/// Java's `consumeMessageAfter`: the SubAfter record matching `before`, for a batch of
/// `batch_len` messages that ended at `now_ms`.
pub fn sub_after(before: &TraceContext, batch_len: usize, result: ConsumeReturn, now_ms: i64) -> TraceContext {
    let mut ctx = TraceContext::new(TraceType::SubAfter, now_ms);
    ctx.region_id = before.region_id.clone();
    ctx.group_name = before.group_name.clone();
    ctx.request_id = before.request_id.clone();
    ctx.success = result == ConsumeReturn::Success;
    let per_message = (now_ms - before.time_stamp) / batch_len.max(1) as i64;
    ctx.cost_time = i32::try_from(per_message).unwrap_or(i32::MAX);
    ctx.context_code = result as i32;
    ctx.beans = before.beans.clone();
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(id: &str, props: &[(&str, &str)]) -> MessageExt {
        let mut all = vec![(keys::UNIQ_KEY, id)];
        all.extend_from_slice(props);
        crate::consumer::retry::tests::msg("T", 0, 3, &all)
    }

    #[test]
    fn send_answers_as_java_reads_them() {
        // check(region field, TRACE_ON field, expected)
        let check = |r: Option<&str>, t: Option<&str>, want: (&str, bool)| {
            let a = SendTraceAnswer::of(r, t);
            assert_eq!((a.region_id.as_str(), a.trace_on), want, "{r:?} {t:?}");
        };
        check(None, None, ("DefaultRegion", true));
        check(Some(""), Some("true"), ("DefaultRegion", true));
        check(Some("eu"), Some("false"), ("eu", false));
        check(Some("eu"), Some("junk"), ("eu", true));
    }

    #[test]
    fn pub_record_of_a_send() {
        let msg = Message::new("Orders", "body").with_tags("TagA").unwrap().with_keys(["k1", "k2"]).unwrap();
        let sent = SentMessage { msg: &msg, group: "PG", broker_addr: "10.0.0.1:10911", msg_id: "ID", offset_msg_id: "OFF", began_ms: 1000, cost_ms: 7 };
        let on = SendTraceAnswer::of(Some("DefaultRegion"), Some("true"));
        let ctx = pub_context(&sent, &on, TRACE_TOPIC_DEFAULT).unwrap();
        let expected = "Pub\u{1}1000\u{1}DefaultRegion\u{1}PG\u{1}Orders\u{1}ID\u{1}TagA\u{1}k1 k2\u{1}10.0.0.1:10911\u{1}4\u{1}7\u{1}0\u{1}OFF\u{1}true\u{2}";
        let t = encode(&ctx);
        assert_eq!(t.data, expected);
        assert_eq!(t.keys.iter().map(String::as_str).collect::<Vec<_>>(), ["ID", "k1", "k2"]);
        assert!(pub_context(&sent, &SendTraceAnswer::of(None, Some("false")), TRACE_TOPIC_DEFAULT).is_none(), "TRACE_ON=false");
        let to_traces = Message::new(TRACE_TOPIC_DEFAULT, "x");
        assert!(pub_context(&SentMessage { msg: &to_traces, ..sent }, &on, TRACE_TOPIC_DEFAULT).is_none(), "a trace is not traced");
        let mut delayed = Message::new("Orders", "b");
        delayed.set_property(keys::DELAY, "3").unwrap();
        assert_eq!(message_type(&delayed), MessageType::Delay);
    }

    #[test]
    fn sub_records_of_a_consume() {
        let batch = [received("A", &[("KEYS", "k"), ("TAGS", "t")]), received("B", &[(TRACE_ON, "false")]), received("C", &[(MSG_REGION, "eu")])];
        let before = sub_before("CG", &batch, "REQ".into(), 100).unwrap();
        assert_eq!(before.beans.iter().map(|b| b.msg_id.as_str()).collect::<Vec<_>>(), ["A", "C"], "TRACE_ON=false left out");
        assert_eq!(before.region_id, "eu");
        assert_eq!(encode(&before).data.matches("SubBefore\u{1}100\u{1}eu\u{1}CG\u{1}REQ\u{1}").count(), 2);
        let after = sub_after(&before, batch.len(), ConsumeReturn::Failed, 130);
        assert_eq!((after.cost_time, after.success, after.context_code, after.request_id.as_str()), (10, false, 4, "REQ"));
        assert_eq!(encode(&after).data.split(FIELD_SPLITOR_STR).next().unwrap(), "SubAfter\u{1}REQ\u{1}A\u{1}10\u{1}false\u{1}k\u{1}4\u{1}130\u{1}CG");
        assert!(sub_before("CG", &batch[1..2], "R".into(), 1).is_none(), "nothing to trace");
    }

    const FIELD_SPLITOR_STR: &str = "\u{2}";
}
