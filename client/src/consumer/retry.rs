//! Retries and dead letters, as RocketMQ 4.9's push consumer decides them: the pure
//! decisions (what to send back, with which delay level, what is consumed afterwards,
//! what is retried locally) and the messages and headers they produce. The IO is in
//! `kernel` (`send_message_back`, `send_retry_message`); `push` drives both.
//!
//! The policy (Java's `ConsumeMessageConcurrentlyService` / `...OrderlyService`):
//! - clustering groups also subscribe to `%RETRY%<group>` with `*`; a message pulled from
//!   there reaches the listener with its original topic (`RETRY_TOPIC`) and the
//!   reconsume count the broker stored;
//! - concurrent, clustering: every message of a batch the listener did not consume is
//!   sent back (CONSUMER_SEND_MSG_BACK) with the batch's delay level; sent back means
//!   consumed here (the broker owns the retry from then on); a message the broker
//!   refused is retried locally with its reconsume count + 1;
//! - concurrent, broadcasting: nothing is sent back (a retry topic is per group, not per
//!   member); the batch is retried locally (Java drops it after a log line; RingMQ keeps
//!   the "nothing skipped" promise of the local retry);
//! - orderly: the queue is suspended and the batch retried locally while a message's
//!   reconsume count is below the maximum; a message at the maximum goes to the dead
//!   letter queue (sent back with delay level `DELAY_LEVEL_DEAD_LETTER`, or else as
//!   Java's new message to `%RETRY%<group>` that a broker routes to `%DLQ%<group>`) and
//!   the queue moves past it.
//!
//! Invariant: a message counts as consumed only when the listener said so or a broker
//! acknowledged taking it back; every other failed message stays unacknowledged (the
//! commit point does not pass it) and is delivered again.

use crate::message::compression::{COMPRESSED_FLAG, COMPRESSION_TYPE_MASK};
use crate::message::properties::keys;
use crate::message::{Message, MessageExt};
use crate::remoting::headers::ConsumerSendMsgBackRequestHeader;

pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// A concurrent consumer's `max_reconsume_times` when unset (Java's 16). An orderly
/// consumer's unset maximum is unbounded (Java's `Integer.MAX_VALUE`).
pub const MAX_RECONSUME_TIMES_DEFAULT: i32 = 16;
/// Delay level "the broker decides": `3 + reconsumeTimes` (10 s, 30 s, 1 min, ...).
pub const DELAY_LEVEL_BROKER_DECIDES: i32 = 0;
/// Delay level "straight to the dead letter queue" (any negative level).
pub const DELAY_LEVEL_DEAD_LETTER: i32 = -1;
/// Java's orderly fallback delays its retry message by `this + reconsumeTimes` levels.
pub const RETRY_DELAY_LEVEL_BASE: i32 = 3;
/// How long a send-back may take before it counts as failed (Java's 5 s).
pub const SEND_BACK_TIMEOUT_MS: u64 = 5_000;
/// The producer group of Java's orderly fallback message (its inner producer).
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";

pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// Java's `resetRetryAndNamespace`: a message pulled from the group's retry topic gets
/// its original topic back from `RETRY_TOPIC`; any other message is left alone.
pub fn restore_original_topic(msg: &mut MessageExt, group_retry_topic: &str) {
    if msg.topic == group_retry_topic {
        if let Some(original) = msg.property(keys::RETRY_TOPIC) {
            msg.topic = original.to_string();
        }
    }
}

/// The CONSUMER_SEND_MSG_BACK header for `msg` (as Java's `consumerSendMessageBack`
/// fills it): the stored copy is found by its CommitLog offset; `originTopic` is the
/// topic the listener saw (the original one for a retried message).
pub fn send_back_header(group: &str, msg: &MessageExt, delay_level: i32, max_reconsume_times: i32) -> ConsumerSendMsgBackRequestHeader {
    ConsumerSendMsgBackRequestHeader {
        offset: msg.commit_log_offset,
        group: group.to_string(),
        delay_level,
        origin_msg_id: Some(msg.msg_id.clone()),
        origin_topic: Some(msg.topic.clone()),
        unit_mode: false,
        max_reconsume_times: Some(max_reconsume_times),
    }
}

/// A batch the listener did not consume, after the send-backs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Queue offsets now consumed (the broker took the messages back).
    pub consumed: Vec<i64>,
    /// Messages to deliver again locally, reconsume count + 1, in batch order.
    pub retry_locally: Vec<MessageExt>,
}

/// Java's `processConsumeResult` after RECONSUME_LATER: `sent_back[i]` says whether
/// the broker took `batch[i]` back (always false for broadcasting, which sends none).
pub fn settle_reconsume_later(batch: Vec<MessageExt>, sent_back: &[bool]) -> Settled {
    assert_eq!(batch.len(), sent_back.len(), "one send-back result per message");
    let mut settled = Settled { consumed: Vec::new(), retry_locally: Vec::new() };
    for (mut msg, sent) in batch.into_iter().zip(sent_back) {
        if *sent {
            settled.consumed.push(msg.queue_offset);
        } else {
            msg.reconsume_times = msg.reconsume_times.saturating_add(1);
            settled.retry_locally.push(msg);
        }
    }
    settled
}

/// What an orderly consumer does with one message of a suspended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderlyStep {
    /// Suspend the queue and deliver it again (reconsume count + 1).
    RetryLocally,
    /// It reached the maximum: to the dead letter queue, then move past it.
    SendToDeadLetter,
}

/// Java's `checkReconsumeTimes`: at `max_reconsume_times` local attempts the message goes.
pub fn orderly_step(reconsume_times: i32, max_reconsume_times: i32) -> OrderlyStep {
    if reconsume_times >= max_reconsume_times {
        OrderlyStep::SendToDeadLetter
    } else {
        OrderlyStep::RetryLocally
    }
}

/// Java's orderly `sendMessageBack`, the fallback when CONSUMER_SEND_MSG_BACK fails: a
/// new message to `%RETRY%<group>` with the original body, flag and properties plus
/// `RETRY_TOPIC`, `ORIGIN_MESSAGE_ID` (kept from the first retry on) and `DELAY`
/// = 3 + reconsumeTimes, sent with header reconsumeTimes = the message's count and
/// maxReconsumeTimes = the maximum: a broker stores it in `%DLQ%<group>` because
/// reconsumeTimes >= maxReconsumeTimes (RocketMQ's `handleRetryAndDLQ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryMessage {
    pub message: Message,
    /// Header `reconsumeTimes`.
    pub reconsume_times: i32,
    /// Header `maxReconsumeTimes`.
    pub max_reconsume_times: i32,
    /// Prefer a queue on this broker (the one that served the message).
    pub broker_name: String,
    /// Header `sysFlag`: 0, or the compression bits of a body that did not decompress
    /// (`MessageExt::body_is_compressed`), so the copy is not garbage to consumers.
    pub sys_flag: i32,
}

pub fn orderly_retry_message(group: &str, msg: &MessageExt, max_reconsume_times: i32) -> RetryMessage {
    let mut properties = msg.properties.clone();
    let origin = properties.get(keys::ORIGIN_MESSAGE_ID).filter(|v| !v.trim().is_empty()).map(str::to_string);
    // Values come from parsed properties or ids made of [0-9A-F]: never a separator.
    let set = |p: &mut crate::message::Properties, n: &str, v: &str| p.set(n, v).expect("no separators in ids, topics or numbers");
    set(&mut properties, keys::ORIGIN_MESSAGE_ID, origin.as_deref().unwrap_or(&msg.msg_id));
    set(&mut properties, keys::RETRY_TOPIC, &msg.topic);
    set(&mut properties, keys::DELAY, &RETRY_DELAY_LEVEL_BASE.saturating_add(msg.reconsume_times).to_string());
    properties.remove(keys::TRAN_MSG);
    properties.remove(keys::RECONSUME_TIME);
    properties.remove(keys::MAX_RECONSUME_TIMES);
    RetryMessage {
        message: Message { topic: retry_topic(group), body: msg.body.clone(), flag: msg.flag, properties },
        reconsume_times: msg.reconsume_times,
        max_reconsume_times,
        broker_name: msg.broker_name.clone(),
        sys_flag: if msg.body_is_compressed() { msg.sys_flag & (COMPRESSED_FLAG | COMPRESSION_TYPE_MASK) } else { 0 },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::message::Properties;
    use crate::remoting::command::ExtFields;

    /// A received message (also the trace tests' sample).
    pub(crate) fn msg(topic: &str, queue_offset: i64, reconsume_times: i32, props: &[(&str, &str)]) -> MessageExt {
        let mut properties = Properties::new();
        for (n, v) in props {
            properties.set(n, v).unwrap();
        }
        MessageExt {
            topic: topic.into(),
            broker_name: "broker-a".into(),
            queue_id: 0,
            queue_offset,
            commit_log_offset: 1_000 + queue_offset,
            body: bytes::Bytes::from(format!("body-{queue_offset}")),
            flag: 7,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_timestamp_ms: 0,
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times,
            msg_id: properties.get(keys::UNIQ_KEY).unwrap_or("OFFSET-ID").to_string(),
            properties,
        }
    }

    fn check_restore(topic: &str, props: &[(&str, &str)], expected_topic: &str) {
        let mut m = msg(topic, 0, 1, props);
        restore_original_topic(&mut m, "%RETRY%g");
        assert_eq!(m.topic, expected_topic, "{topic} {props:?}");
        assert_eq!(m.reconsume_times, 1, "the stored count is kept");
    }

    #[test]
    fn retried_messages_get_their_original_topic() {
        check_restore("%RETRY%g", &[("RETRY_TOPIC", "orders")], "orders");
        check_restore("%RETRY%g", &[], "%RETRY%g");
        check_restore("%RETRY%other", &[("RETRY_TOPIC", "orders")], "%RETRY%other");
        check_restore("orders", &[("RETRY_TOPIC", "elsewhere")], "orders");
        assert_eq!(retry_topic("g"), "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
    }

    fn check_header(m: &MessageExt, delay_level: i32, max: i32, expected: &[(&str, &str)]) {
        let ext = send_back_header("G", m, delay_level, max).to_ext();
        let want: ExtFields = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(ext, want);
        assert_eq!(ConsumerSendMsgBackRequestHeader::from_ext(&ext), Ok(send_back_header("G", m, delay_level, max)));
    }

    #[test]
    fn send_back_headers_carry_offset_ids_and_levels() {
        let fresh = msg("orders", 5, 0, &[("UNIQ_KEY", "ID5")]);
        let base = |level: &'static str, max: &'static str| {
            vec![
                ("offset", "1005"),
                ("group", "G"),
                ("delayLevel", level),
                ("originMsgId", "ID5"),
                ("originTopic", "orders"),
                ("unitMode", "false"),
                ("maxReconsumeTimes", max),
            ]
        };
        check_header(&fresh, DELAY_LEVEL_BROKER_DECIDES, MAX_RECONSUME_TIMES_DEFAULT, &base("0", "16"));
        check_header(&fresh, DELAY_LEVEL_DEAD_LETTER, 3, &base("-1", "3"));
        check_header(&fresh, 1, 2, &base("1", "2"));
        // A retried message: its own CommitLog offset, the restored topic, the same msgId.
        let mut retried = msg("%RETRY%G", 5, 1, &[("UNIQ_KEY", "ID5"), ("RETRY_TOPIC", "orders")]);
        restore_original_topic(&mut retried, "%RETRY%G");
        check_header(&retried, 0, 16, &base("0", "16"));
        // No UNIQ_KEY: the offset id stands in as originMsgId.
        let anonymous = msg("orders", 5, 0, &[]);
        let mut want = base("0", "16");
        want[3] = ("originMsgId", "OFFSET-ID");
        check_header(&anonymous, 0, 16, &want);
    }

    fn check_settle(batch: &[(i64, i32)], sent_back: &[bool], expected_consumed: &[i64], expected_retry: &[(i64, i32)]) {
        let batch: Vec<MessageExt> = batch.iter().map(|(o, t)| msg("t", *o, *t, &[])).collect();
        let settled = settle_reconsume_later(batch, sent_back);
        assert_eq!(settled.consumed, expected_consumed, "consumed");
        let retry: Vec<(i64, i32)> = settled.retry_locally.iter().map(|m| (m.queue_offset, m.reconsume_times)).collect();
        assert_eq!(retry, expected_retry, "retried locally");
    }

    #[test]
    fn refused_send_backs_fall_back_to_local_retry() {
        check_settle(&[(1, 0), (2, 0)], &[true, true], &[1, 2], &[]);
        check_settle(&[(1, 0), (2, 3)], &[false, false], &[], &[(1, 1), (2, 4)]);
        check_settle(&[(1, 0), (2, 0), (3, 5)], &[true, false, true], &[1, 3], &[(2, 1)]);
        check_settle(&[], &[], &[], &[]);
        check_settle(&[(9, i32::MAX)], &[false], &[], &[(9, i32::MAX)]);
    }

    fn check_orderly(reconsume_times: i32, max: i32, expected: OrderlyStep) {
        assert_eq!(orderly_step(reconsume_times, max), expected, "{reconsume_times} of {max}");
    }

    #[test]
    fn orderly_retries_locally_up_to_the_maximum() {
        check_orderly(0, 2, OrderlyStep::RetryLocally);
        check_orderly(1, 2, OrderlyStep::RetryLocally);
        check_orderly(2, 2, OrderlyStep::SendToDeadLetter);
        check_orderly(7, 2, OrderlyStep::SendToDeadLetter);
        check_orderly(0, 0, OrderlyStep::SendToDeadLetter);
        check_orderly(1_000_000, i32::MAX, OrderlyStep::RetryLocally);
    }

    fn check_retry_message(m: &MessageExt, expected_props: &[(&str, &str)]) {
        let r = orderly_retry_message("G", m, 3);
        assert_eq!(r.message.topic, "%RETRY%G");
        assert_eq!(r.message.body, m.body);
        assert_eq!(r.message.flag, m.flag);
        assert_eq!((r.reconsume_times, r.max_reconsume_times), (m.reconsume_times, 3));
        assert_eq!(r.broker_name, "broker-a");
        assert_eq!(r.message.properties.iter().collect::<Vec<_>>(), expected_props);
    }

    /// The copy's sysFlag: check(delivered sysFlag, expected header sysFlag). A body
    /// delivered decompressed travels plain; one still compressed keeps its bits.
    #[test]
    fn orderly_fallback_keeps_the_bits_of_a_body_still_compressed() {
        let check = |sys_flag: i32, expected: i32| {
            let mut m = msg("orders", 1, 3, &[]);
            m.sys_flag = sys_flag;
            assert_eq!(orderly_retry_message("G", &m, 3).sys_flag, expected, "{sys_flag:#x}");
        };
        check(0, 0);
        check(0x300, 0); // decompressed zlib: COMPRESSED_FLAG cleared
        check(0x4 | 0x300, 0);
        check(0x301, 0x301); // did not decompress
        check(0x4 | 0x201, 0x201);
        check(0x1, 0x1);
    }

    #[test]
    fn orderly_fallback_is_javas_retry_message() {
        check_retry_message(
            &msg("orders", 1, 3, &[("UNIQ_KEY", "ID1"), ("KEYS", "k"), ("TRAN_MSG", "true")]),
            &[("UNIQ_KEY", "ID1"), ("KEYS", "k"), ("ORIGIN_MESSAGE_ID", "ID1"), ("RETRY_TOPIC", "orders"), ("DELAY", "6")],
        );
        // Already a retry copy: the first msgId and the original topic are kept.
        let mut retried = msg("%RETRY%G", 1, 3, &[("UNIQ_KEY", "ID1"), ("ORIGIN_MESSAGE_ID", "ID0"), ("RETRY_TOPIC", "orders")]);
        restore_original_topic(&mut retried, "%RETRY%G");
        check_retry_message(
            &retried,
            &[("UNIQ_KEY", "ID1"), ("ORIGIN_MESSAGE_ID", "ID0"), ("RETRY_TOPIC", "orders"), ("DELAY", "6")],
        );
        check_retry_message(
            &msg("orders", 1, 3, &[("ORIGIN_MESSAGE_ID", " "), ("RECONSUME_TIME", "2"), ("MAX_RECONSUME_TIMES", "9")]),
            &[("ORIGIN_MESSAGE_ID", "OFFSET-ID"), ("RETRY_TOPIC", "orders"), ("DELAY", "6")],
        );
    }
}
