//! Request-reply (RocketMQ 4.6+), the client's half: the requests an instance waits
//! replies for, the PUSH_REPLY_MESSAGE_TO_CLIENT a broker sends when a reply arrives,
//! and Java's `MessageUtil.createReplyMessage` for the replier.
//!
//! The protocol, as Java's `DefaultMQProducerImpl.request` and `ReplyMessageProcessor`:
//! the requester stamps `CORRELATION_ID` (a UUID), `REPLY_TO_CLIENT` (its client id) and
//! `TTL` (its timeout, ms) on a plain send; the broker that stores it adds `CLUSTER`. The
//! replier builds a message for `<CLUSTER>_REPLY_TOPIC` carrying those properties and
//! `MSG_TYPE=reply`, which the producer sends with SEND_REPLY_MESSAGE_V2; the broker
//! pushes it to the connection of `REPLY_TO_CLIENT`, whose instance completes the
//! request of that correlation id.
//!
//! Pending requests live in their instance (Java keeps one table per process: its
//! `REPLY_TO_CLIENT` is the process's instance; here every producer has its own).
//!
//! Invariants:
//! - at most `PENDING_REQUESTS_MAX` requests wait per instance; one more is refused
//!   before anything is sent;
//! - a request's slot is removed however its wait ends (reply, timeout, error, or the
//!   waiting future dropped): a drop guard owns it, so no sweeper is needed and a late
//!   reply finds nothing and is dropped;
//! - a reply completes at most one request (the slot is taken out of the table).

use crate::error::ClientError;
use crate::message::properties::keys;
use crate::message::{Message, MessageExt, Properties};
use crate::remoting::codes::response_code as rs;
use crate::remoting::command::RemotingCommand;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Requests waiting for their reply, per client instance (Java bounds them only by
/// memory; a requester that never gets replies must not grow without bound).
pub const PENDING_REQUESTS_MAX: usize = 10_000;
/// `MixAll.REPLY_MESSAGE_FLAG`: the `MSG_TYPE` of a reply.
pub const REPLY_MESSAGE_FLAG: &str = "reply";
/// `MixAll.REPLY_TOPIC_POSTFIX`: a cluster's reply topic is `<cluster>_REPLY_TOPIC`.
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";

/// `MessageSysFlag.COMPRESSED_FLAG`: the body is compressed.
pub const COMPRESSED_FLAG: i32 = 0x1;

/// `MixAll.getReplyTopic`: the topic replies to requests stored in `cluster` go to.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}

/// Whether `properties` make a message a reply (sent with SEND_REPLY_MESSAGE_V2).
pub fn is_reply(properties: &Properties) -> bool {
    properties.get(keys::MSG_TYPE) == Some(REPLY_MESSAGE_FLAG)
}

/// Java's `MessageUtil.createReplyMessage`: a reply to `request` with `body`, for the
/// request's cluster's reply topic, carrying its correlation id, requester and TTL.
/// Refused when the request has no `CLUSTER` (the broker that stored it adds one).
pub fn create_reply_message(request: &MessageExt, body: impl Into<bytes::Bytes>) -> Result<Message, ClientError> {
    let Some(cluster) = request.property(keys::CLUSTER) else {
        return Err(ClientError::ReplyMessage(format!(
            "create reply message fail, requestMessage error, property[{}] is null.",
            keys::CLUSTER
        )));
    };
    let mut reply = Message::new(reply_topic(cluster), body);
    reply.set_property(keys::MSG_TYPE, REPLY_MESSAGE_FLAG)?;
    for name in [keys::CORRELATION_ID, keys::REPLY_TO_CLIENT, keys::TTL] {
        if let Some(value) = request.property(name) {
            reply.set_property(name, value)?;
        }
    }
    Ok(reply)
}

/// Java's `CorrelationIdUtil.createCorrelationId` (a random UUID, version 4 layout).
pub fn correlation_id() -> String {
    let hi = (u64::from(crate::producer::random_u32()) << 32) | u64::from(crate::producer::random_u32());
    let lo = (u64::from(crate::producer::random_u32()) << 32) | u64::from(crate::producer::random_u32());
    let hi = (hi & !0xF000) | 0x4000; // version 4
    let lo = (lo & !(0b11 << 62)) | (0b10 << 62); // IETF variant
    format!("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48, lo & 0xFFFF_FFFF_FFFF)
}

/// The requests of one instance waiting for replies, by correlation id.
#[derive(Default)]
pub struct PendingRequests {
    waiting: RefCell<HashMap<String, LocalSender<MessageExt>>>,
}

/// One waiting request: its reply arrives on `rx`; dropping it frees the slot.
pub struct PendingReply {
    table: Rc<PendingRequests>,
    correlation_id: String,
    rx: LocalReceiver<MessageExt>,
}

impl Drop for PendingReply {
    fn drop(&mut self) {
        self.table.waiting.borrow_mut().remove(&self.correlation_id);
    }
}

impl PendingReply {
    /// The reply, or `None` when `timeout` passes first.
    pub async fn wait(&self, timeout: Duration) -> Option<MessageExt> {
        let reply = async { self.rx.recv().await };
        let expired = async {
            glommio::timer::sleep(timeout).await;
            None
        };
        futures_lite::future::or(reply, expired).await
    }
}

impl PendingRequests {
    /// Registers a request before it is sent (its reply may come before the send's own
    /// answer). Refused past `PENDING_REQUESTS_MAX` or for a correlation id in use.
    pub fn register(self: &Rc<Self>, correlation_id: &str) -> Result<PendingReply, ClientError> {
        let mut waiting = self.waiting.borrow_mut();
        if waiting.len() >= PENDING_REQUESTS_MAX {
            return Err(ClientError::RequestsFull { max: PENDING_REQUESTS_MAX });
        }
        if waiting.contains_key(correlation_id) {
            return Err(ClientError::Config(format!("correlation id {correlation_id} is already waiting for a reply")));
        }
        // One slot: a request gets one reply; a second one with the same id is dropped.
        let (tx, rx) = local_channel::new_bounded(1);
        waiting.insert(correlation_id.to_string(), tx);
        Ok(PendingReply { table: self.clone(), correlation_id: correlation_id.to_string(), rx })
    }

    /// Hands a reply to the request of its correlation id; false when none waits (it
    /// timed out, or the reply is for another instance's request).
    pub fn complete(&self, reply: MessageExt) -> bool {
        let Some(id) = reply.property(keys::CORRELATION_ID) else { return false };
        let Some(tx) = self.waiting.borrow_mut().remove(id) else { return false };
        tx.try_send(reply).is_ok()
    }

    /// Requests waiting now.
    pub fn len(&self) -> usize {
        self.waiting.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// PUSH_REPLY_MESSAGE_TO_CLIENT's `ReplyMessageRequestHeader` as the reply it carries
/// (Java's `ClientRemotingProcessor.receiveReplyMessage`), with `ARRIVE_TIME` stamped.
pub fn decode_pushed_reply(cmd: &RemotingCommand, arrived_ms: i64) -> Result<MessageExt, String> {
    let num = |name: &str| -> Result<i64, String> {
        cmd.ext(name).unwrap_or("0").trim().parse::<i64>().map_err(|_| format!("header field {name} is not a number"))
    };
    let addr = |name: &str| -> Result<SocketAddr, String> {
        match cmd.ext(name).filter(|a| !a.is_empty()) {
            Some(a) => a.parse().map_err(|_| format!("parse {name} failed: {a}")),
            None => Ok(SocketAddr::from(([0, 0, 0, 0], 0))),
        }
    };
    let mut properties = Properties::decode_str(cmd.ext("properties").unwrap_or(""));
    properties.set(keys::REPLY_MESSAGE_ARRIVE_TIME, &arrived_ms.to_string()).map_err(|e| e.to_string())?;
    let sys_flag = num("sysFlag")? as i32;
    if sys_flag & COMPRESSED_FLAG != 0 {
        // Java decompresses; RingMQ has no decompressor (its producers never compress).
        tracing::warn!("reply message body is compressed: handed over as it came");
    }
    Ok(MessageExt {
        topic: cmd.ext("topic").unwrap_or("").to_string(),
        broker_name: String::new(),
        queue_id: num("queueId")? as i32,
        queue_offset: 0,
        commit_log_offset: 0,
        body: cmd.body.clone(),
        flag: num("flag")? as i32,
        sys_flag,
        born_timestamp_ms: num("bornTimestamp")?,
        born_host: addr("bornHost")?,
        store_timestamp_ms: num("storeTimestamp")?,
        store_host: addr("storeHost")?,
        reconsume_times: num("reconsumeTimes")? as i32,
        msg_id: properties.get(keys::UNIQ_KEY).unwrap_or("").to_string(),
        properties,
    })
}

/// Answers a PUSH_REPLY_MESSAGE_TO_CLIENT: SUCCESS once the reply is decoded (whether
/// or not a request still waits for it, as Java), SYSTEM_ERROR when it does not decode.
pub fn answer_pushed_reply(requests: &PendingRequests, cmd: &RemotingCommand) -> RemotingCommand {
    match decode_pushed_reply(cmd, crate::msgid::now_ms()) {
        Ok(reply) => {
            let id = reply.property(keys::CORRELATION_ID).unwrap_or("").to_string();
            if !requests.complete(reply) {
                tracing::warn!(correlation_id = id, "receive reply message, but not matched any request (timed out?)");
            }
            cmd.create_response(rs::SUCCESS, None)
        }
        Err(e) => {
            tracing::warn!(error = e, "reply message does not decode");
            cmd.create_response(rs::SYSTEM_ERROR, Some(&format!("process reply message fail: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::request_code as rq;

    /// A received message with `props`, made the way a pushed reply is decoded.
    fn request_message(props: &[(&str, &str)]) -> MessageExt {
        let mut properties = Properties::new();
        for (k, v) in props {
            properties.set(k, v).expect("property");
        }
        let cmd = RemotingCommand::request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT).with_ext("topic", "t").with_ext("properties", properties.encode());
        decode_pushed_reply(&cmd, 0).expect("decodes")
    }

    #[test]
    fn reply_messages_are_made_as_java_makes_them() {
        let req = request_message(&[("CLUSTER", "C1"), ("CORRELATION_ID", "id-1"), ("REPLY_TO_CLIENT", "1.2.3.4@x"), ("TTL", "3000"), ("TAGS", "a")]);
        let reply = create_reply_message(&req, &b"pong"[..]).unwrap();
        assert_eq!(reply.topic, "C1_REPLY_TOPIC");
        assert_eq!(&reply.body[..], b"pong");
        let got: Vec<(&str, &str)> = reply.properties.iter().collect();
        assert_eq!(got, vec![("MSG_TYPE", "reply"), ("CORRELATION_ID", "id-1"), ("REPLY_TO_CLIENT", "1.2.3.4@x"), ("TTL", "3000")]);
        assert!(is_reply(&reply.properties));
        let no_cluster = request_message(&[("CORRELATION_ID", "id-1")]);
        let err = create_reply_message(&no_cluster, &b"x"[..]).unwrap_err();
        assert!(err.to_string().contains("property[CLUSTER] is null"), "{err}");
    }

    #[test]
    fn correlation_ids_are_uuids() {
        let a = correlation_id();
        assert_eq!(a.len(), 36, "{a}");
        assert_eq!(a.as_bytes()[14], b'4', "{a}");
        assert_ne!(a, correlation_id());
    }

    #[test]
    fn pushed_replies_decode_and_complete_their_request_once() {
        glommio::LocalExecutor::default().run(async {
            let table = Rc::new(PendingRequests::default());
            let pending = table.register("id-1").unwrap();
            assert!(table.register("id-1").is_err(), "one waiter per correlation id");
            let push = RemotingCommand::request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT)
                .with_ext("topic", "C_REPLY_TOPIC")
                .with_ext("queueId", "0")
                .with_ext("sysFlag", "0")
                .with_ext("flag", "0")
                .with_ext("bornTimestamp", "5")
                .with_ext("bornHost", "10.0.0.1:4000")
                .with_ext("storeHost", "10.0.0.2:10911")
                .with_ext("storeTimestamp", "6")
                .with_ext("properties", "CORRELATION_ID\u{1}id-1\u{2}MSG_TYPE\u{1}reply\u{2}")
                .with_body(bytes::Bytes::from_static(b"pong"));
            assert_eq!(answer_pushed_reply(&table, &push).code, rs::SUCCESS);
            let reply = pending.wait(Duration::from_secs(1)).await.expect("completed");
            assert_eq!((&reply.body[..], reply.born_host.port(), reply.store_timestamp_ms), (&b"pong"[..], 4000, 6));
            assert!(reply.property(keys::REPLY_MESSAGE_ARRIVE_TIME).is_some());
            assert_eq!(table.len(), 0, "taken out when completed");
            // A late or unknown reply is answered SUCCESS and dropped.
            assert_eq!(answer_pushed_reply(&table, &push).code, rs::SUCCESS);
            let bad = RemotingCommand::request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT).with_ext("bornHost", "nonsense");
            assert_eq!(answer_pushed_reply(&table, &bad).code, rs::SYSTEM_ERROR);
        });
    }

    #[test]
    fn slots_are_freed_on_timeout_and_bounded() {
        glommio::LocalExecutor::default().run(async {
            let table = Rc::new(PendingRequests::default());
            let pending = table.register("t").unwrap();
            assert!(pending.wait(Duration::from_millis(1)).await.is_none());
            drop(pending);
            assert!(table.is_empty(), "a request that timed out leaves no slot");
            let held: Vec<PendingReply> = (0..PENDING_REQUESTS_MAX).map(|i| table.register(&i.to_string()).unwrap()).collect();
            assert!(matches!(table.register("one-more"), Err(ClientError::RequestsFull { .. })));
            drop(held);
            assert!(table.is_empty());
        });
    }
}
