//! Request-reply (RocketMQ 4.6+), the broker's half: SEND_REPLY_MESSAGE (324) and
//! SEND_REPLY_MESSAGE_V2 (325), Java's `ReplyMessageProcessor`, and the `CLUSTER`
//! property a request message is stored with.
//!
//! A reply names its requester by client id (`REPLY_TO_CLIENT`, the requester's
//! instance); the broker pushes it to that client's connection with
//! PUSH_REPLY_MESSAGE_TO_CLIENT (326), waits for the client's answer, and, with
//! `storeReplyMessageEnable` (default true, as Apache), also stores it in its topic
//! (`<cluster>_REPLY_TOPIC`, which the metadata owner creates at start).
//!
//! Where it runs: on the shard that holds the requester's connection (`reply_route`,
//! from the producer table every shard replicates from heartbeats), so the push is a
//! local client call (`client_calls.rs`); the copy to store is an internal send routed
//! to its queue's owner like any other. A requester this shard's replica does not
//! know is answered where the reply arrived ("channel ... not found"); a forwarded
//! reply whose requester is not connected here (replicas that disagree) is answered
//! the same way, never forwarded again.
//!
//! The answer, as Java's: the push decides the code — SYSTEM_ERROR with Java's remark
//! when the requester is not connected, did not answer or refused; SUCCESS otherwise,
//! naming the stored copy (msgId, queueId, queueOffset) or, when nothing was stored
//! (off, or the store refused: Java logs it and still answers the push), msgId "0" and
//! queueOffset 0.
//!
//! Java's broker stamps `CLUSTER` on every message it stores; RingMQ stamps it only on
//! request messages (`REPLY_TO_CLIENT` set, not a reply), the only readers of it
//! (`createReplyMessage`), so an ordinary send stays allocation-free.
//!
//! Invariants: a reply is pushed at most once and stored at most once per
//! SEND_REPLY_MESSAGE (neither is retried here: the replier's producer retries, as
//! Java's); the push waits at most `REPLY_PUSH_TIMEOUT_MS` and its slot is bounded by
//! `CLIENT_CALLS_IN_FLIGHT_MAX` like every client call.

use super::client_calls::CLIENT_CALL_TIMEOUT_MS;
use super::{Shard, BORN_HOST_EXT};
use ringmq_client::message::properties::{self, keys, Properties};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::SendMessageHeaderRef;
use ringmq_client::request::REPLY_MESSAGE_FLAG;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// How long a push waits for the requester's answer (Java's `Broker2Client.callClient`).
pub const REPLY_PUSH_TIMEOUT_MS: u64 = CLIENT_CALL_TIMEOUT_MS;

/// Header field names of a send header: long (SEND_REPLY_MESSAGE) and V2's short ones.
const QUEUE_FIELDS: [&str; 2] = ["queueId", "e"];
const PROPERTIES_FIELDS: [&str; 2] = ["properties", "i"];

/// Whether a push reached the requester, and if not, the remark the replier gets.
type Pushed = Result<(), String>;

impl<R: crate::rt::Runtime> Shard<R> {
    /// The shard holding the connection of the reply's requester (`REPLY_TO_CLIENT`);
    /// `None` when it is unknown here (the reply is then answered where it arrived).
    pub(super) fn reply_route(&self, cmd: &RemotingCommand) -> Option<usize> {
        let properties = PROPERTIES_FIELDS.into_iter().find_map(|f| cmd.ext(f))?;
        let client_id = properties::find(properties, keys::REPLY_TO_CLIENT)?;
        let shard = self.clients.consumers.borrow().producer_conn_of(client_id)?.conn_shard;
        (shard < self.place.count).then_some(shard)
    }

    /// A request message's properties with `CLUSTER` set to this broker's cluster
    /// (Java's `SendMessageProcessor` stamps it); `None` for any other message, which is
    /// stored as it came.
    pub(super) fn stamp_request_cluster(&self, properties: &str) -> Option<String> {
        properties::find(properties, keys::REPLY_TO_CLIENT)?;
        if properties::find(properties, keys::MSG_TYPE) == Some(REPLY_MESSAGE_FLAG) {
            return None;
        }
        let cluster = self.config().cluster_name.clone();
        if properties::find(properties, keys::CLUSTER) == Some(cluster.as_str()) {
            return None;
        }
        let mut stamped = Properties::decode_str(properties);
        // A cluster name cannot hold the separators (the topic syntax forbids them).
        stamped.set(keys::CLUSTER, &cluster).ok()?;
        Some(stamped.encode())
    }

    /// SEND_REPLY_MESSAGE(_V2): checked as a send, pushed to the requester, stored when
    /// `storeReplyMessageEnable`, answered with the push's outcome. `remote`: the
    /// replier's address when the request arrived on this shard's socket.
    pub(super) async fn handle_reply(self: &Rc<Self>, cmd: &RemotingCommand, remote: Option<SocketAddr>) -> RemotingCommand {
        let mut header = match self.decode_send(cmd) {
            Ok(h) => h,
            Err(refusal) => return refusal,
        };
        if header.queue_id < 0 {
            // Java: any write queue of the topic.
            let queues = self.topic(header.topic).map_or(1, |t| t.write_queue_nums.max(1));
            header.queue_id = (self.rt.monotonic_us() % u64::from(queues)) as i32;
        }
        let queue_id = match self.admit_send(cmd, &header).await {
            Ok(q) => q,
            Err(refusal) => return refusal,
        };
        let born_host = remote.or_else(|| cmd.ext(BORN_HOST_EXT).and_then(|a| a.parse().ok())).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        let pushed = self.push_reply(cmd, &header, born_host).await;
        let stored = if self.config().store_reply_message_enable { self.store_reply(cmd, queue_id, born_host).await } else { None };
        self.reply_response(cmd, pushed, stored.as_ref(), queue_id)
    }

    /// Java's `pushReplyMessage`: PUSH_REPLY_MESSAGE_TO_CLIENT with the reply's send
    /// header, born and store hosts, store time and `PUSH_REPLY_TIME`, to the requester's
    /// connection on this shard, and its answer.
    async fn push_reply(&self, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>, born_host: SocketAddr) -> Pushed {
        let properties = header.properties.unwrap_or_default();
        let Some(client_id) = properties::find(properties, keys::REPLY_TO_CLIENT) else {
            tracing::warn!("{} is null, can not reply message", keys::REPLY_TO_CLIENT);
            return Err(format!("reply message properties[{}] is null", keys::REPLY_TO_CLIENT));
        };
        let conn_id = {
            let consumers = self.clients.consumers.borrow();
            consumers.producer_conn_of(client_id).filter(|c| c.conn_shard == self.place.id).map(|c| c.conn_id)
        };
        let Some(conn_id) = conn_id else {
            let remark = format!("push reply message fail, channel of <{client_id}> not found.");
            tracing::warn!("{remark}");
            return Err(remark);
        };
        let now_ms = self.now_ms();
        let mut pushed_properties = Properties::decode_str(properties);
        pushed_properties.set(keys::PUSH_REPLY_TIME, &now_ms.to_string()).map_err(|e| e.to_string())?;
        let push = RemotingCommand::request(rq::PUSH_REPLY_MESSAGE_TO_CLIENT)
            .with_ext("producerGroup", header.producer_group)
            .with_ext("topic", header.topic)
            .with_ext("defaultTopic", header.default_topic)
            .with_ext("defaultTopicQueueNums", header.default_topic_queue_nums.to_string())
            .with_ext("queueId", header.queue_id.to_string())
            .with_ext("sysFlag", header.sys_flag.to_string())
            .with_ext("bornTimestamp", header.born_timestamp.to_string())
            .with_ext("flag", header.flag.to_string())
            .with_ext("properties", pushed_properties.encode())
            .with_ext("reconsumeTimes", header.reconsume_times.unwrap_or(0).to_string())
            .with_ext("unitMode", header.unit_mode.to_string())
            .with_ext("bornHost", born_host.to_string())
            .with_ext("storeHost", self.place.store_host.to_string())
            .with_ext("storeTimestamp", now_ms.to_string())
            .with_body(cmd.body.clone());
        // Java's remark, its missing space included.
        let failed = || format!("push reply message to {client_id}fail.");
        match self.call_client(conn_id, push, Duration::from_millis(REPLY_PUSH_TIMEOUT_MS)).await {
            Ok(answer) if answer.code == rs::SUCCESS => Ok(()),
            Ok(answer) => {
                tracing::warn!(client_id, code = answer.code, remark = ?answer.remark, "push reply message returned fail");
                Err(failed())
            }
            Err(e) => {
                tracing::warn!(client_id, error = %e, "push reply message failed");
                Err(failed())
            }
        }
    }

    /// Stores the reply in its topic through the queue's owner (an internal send with
    /// the replier's address as born host); the owner's answer, or `None` (logged) when
    /// it refused.
    async fn store_reply(self: &Rc<Self>, cmd: &RemotingCommand, queue_id: i32, born_host: SocketAddr) -> Option<RemotingCommand> {
        let code = if cmd.code == rq::SEND_REPLY_MESSAGE { rq::SEND_MESSAGE } else { rq::SEND_MESSAGE_V2 };
        let mut send = RemotingCommand::request(code);
        send.ext_fields = cmd.ext_fields.clone();
        if let Some(field) = QUEUE_FIELDS.into_iter().find(|f| cmd.ext(f).is_some()) {
            send.ext_fields.set_fmt(field, format_args!("{queue_id}"));
        }
        send.ext_fields.set_fmt(BORN_HOST_EXT, format_args!("{born_host}"));
        send.body = cmd.body.clone();
        let answer = self.call_internal(send).await;
        if answer.code == rs::SUCCESS {
            Some(answer)
        } else {
            tracing::warn!(code = answer.code, remark = ?answer.remark, "reply message not stored");
            None
        }
    }

    /// Java's `handlePushReplyResult` + `handlePutMessageResult`: the push's code, the
    /// stored copy's position when there is one.
    fn reply_response(&self, cmd: &RemotingCommand, pushed: Pushed, stored: Option<&RemotingCommand>, queue_id: i32) -> RemotingCommand {
        let mut response = match &pushed {
            Ok(()) => cmd.create_response(rs::SUCCESS, None),
            Err(remark) => cmd.create_response(rs::SYSTEM_ERROR, Some(remark)),
        };
        let ext = &mut response.ext_fields;
        match stored {
            Some(s) => {
                for field in ["msgId", "queueId", "queueOffset"] {
                    if let Some(v) = s.ext(field) {
                        ext.set(field, v);
                    }
                }
            }
            None if pushed.is_ok() => {
                // Java: "set to zero to avoid client decoding exception".
                ext.set_static("msgId", "0");
                ext.set_fmt("queueId", format_args!("{queue_id}"));
                ext.set_static("queueOffset", "0");
            }
            None => {}
        }
        ext.set_static("MSG_REGION", "DefaultRegion");
        ext.set_static("TRACE_ON", if self.config().trace_on { "true" } else { "false" });
        response
    }
}
