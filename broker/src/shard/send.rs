//! SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, run on the queue's owner.
//!
//! Each message is stored with its producer's address as born host, as Java does: the
//! connection's address when the send arrived on this shard, the `BORN_HOST_EXT` field
//! when another shard forwarded it.
//!
//! The single-message path allocates nothing per send of its own (its header is read
//! in place, the record is encoded straight into the CommitLog's tail, the response's
//! fields are written into its inline header buffer); `broker/tests/send_allocs.rs`
//! holds the whole request to its bound.
//!
//! Invariants: a message is acknowledged SUCCESS only once stored (and, under sync
//! flush, fdatasynced); every refusal is a response with a code and a remark that says
//! why; a store failure is fatal to the process, never answered as success.

use super::{error_response, Shard};
use crate::store::error::StoreError;
use crate::store::engine::{MessageToStore, PutResult};
use crate::store::config::FlushMode;
use crate::meta::topics::TopicConfig;
use ringmq_client::message::properties::{self, keys};
use ringmq_client::remoting::batch;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::SendMessageHeaderRef;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::rc::Rc;

/// Most messages in one SEND_BATCH_MESSAGE.
pub const BATCH_MESSAGES_MAX: usize = 4096;

const PERM_WRITE: u32 = 2;
const PERM_READ: u32 = 4;

pub use ringmq_client::msgid::{decode_offset_msg_id, offset_msg_id, OffsetMsgId};

/// What a send reads of its topic's config.
#[derive(Debug, Clone, Copy)]
pub(super) struct SendTopic {
    perm: u32,
    write_queue_nums: u32,
    order: bool,
}

fn writable_perm(perm: u32) -> bool {
    perm & PERM_WRITE != 0
}

pub fn readable(topic: &TopicConfig) -> bool {
    topic.perm & PERM_READ != 0
}


impl<R: crate::rt::Runtime> Shard<R> {
    /// What a send needs of its topic (perm, write queues, order), creating the topic
    /// when auto-creation is on. Copied out of the table: no `TopicConfig` clone.
    pub(super) async fn topic_for_send(self: &Rc<Self>, name: &str) -> Result<SendTopic, (i32, String)> {
        let facts = |shard: &Self| shard.meta.topics.borrow().get(name).map(|t| SendTopic { perm: t.perm, write_queue_nums: t.write_queue_nums, order: t.order });
        if let Some(topic) = facts(self) {
            return Ok(topic);
        }
        if !self.config().auto_create_topic {
            return Err((rs::TOPIC_NOT_EXIST, format!("topic[{name}] not exist, apply first please!")));
        }
        // Shard route mode: the default count on every shard-broker.
        self.ensure_topic(name, self.host_queue_count_for_client(self.config().default_topic_queue_nums)).await?;
        facts(self).ok_or((rs::SYSTEM_ERROR, format!("topic {name} created but not visible")))
    }

    /// `remote`: the producer's address when the send arrived on this shard's socket.
    pub(super) async fn handle_send(self: &Rc<Self>, cmd: &RemotingCommand, remote: Option<SocketAddr>) -> RemotingCommand {
        if !self.config().role.is_master() {
            // A slave's log holds its master's records only (RocketMQ's answer).
            return error_response(cmd, rs::SERVICE_NOT_AVAILABLE, "message store is slave mode, so putMessage is forbidden");
        }
        let header = match SendMessageHeaderRef::from_ext_any(&cmd.ext_fields) {
            Ok(h) => h,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad send header: {e}")),
        };
        if header.topic.starts_with(super::sendback::RETRY_TOPIC_PREFIX) && cmd.ext(super::sendback::SEND_BACK_EXT).is_none() {
            // The redirected copy is sent internally: it carries the born host along.
            let mut with_host = cmd.clone();
            if let Some(remote) = remote {
                with_host.ext_fields.set_fmt(super::BORN_HOST_EXT, format_args!("{remote}"));
            }
            if let Some(r) = self.redirect_to_dlq(&with_host, header.topic, header.reconsume_times.unwrap_or(0), header.max_reconsume_times).await {
                return r;
            }
        }
        let topic = match self.topic_for_send(header.topic).await {
            Ok(t) => t,
            Err((code, remark)) => return error_response(cmd, code, remark),
        };
        if !writable_perm(topic.perm) {
            return error_response(cmd, rs::NO_PERMISSION, format!("the topic[{}] sending message is forbidden", header.topic));
        }
        // A broker without write permission is avoided through its routes; only ordered
        // topics (whose producers cannot pick another queue) are refused here (Java).
        if self.config().broker_permission & crate::config::PERM_WRITE == 0 && topic.order {
            return error_response(cmd, rs::NO_PERMISSION, format!("the broker[{}] sending message is forbidden", self.place.store_host.ip()));
        }
        let queue_id = header.queue_id;
        if queue_id < 0 || queue_id as u32 >= topic.write_queue_nums {
            return error_response(
                cmd,
                rs::SYSTEM_ERROR,
                format!("request queueId[{queue_id}] is illegal, topic {} has {} write queues", header.topic, topic.write_queue_nums),
            );
        }
        let max_bytes = self.config().max_message_bytes;
        if cmd.body.len() as u64 > max_bytes && !(cmd.code == rq::SEND_BATCH_MESSAGE || header.batch) {
            return error_response(cmd, rs::MESSAGE_ILLEGAL, format!("message body size {} exceeds the maximum {max_bytes}", cmd.body.len()));
        }
        // The producer's address: the connection's, or stamped by the shard the request
        // arrived on (0.0.0.0:0 for a request made inside the broker).
        let born_host = remote
            .or_else(|| cmd.ext(super::BORN_HOST_EXT).and_then(|a| a.parse().ok()))
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        let base = MessageToStore {
            topic: header.topic,
            queue_id,
            flag: header.flag,
            body: &[],
            properties: "",
            sys_flag: header.sys_flag,
            born_timestamp_ms: header.born_timestamp,
            born_host,
            store_host: self.place.store_host,
            reconsume_times: header.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
        };
        let properties = header.properties.unwrap_or_default();
        // First and last message stored, and how many (a batch answers every id).
        let mut first: Option<PutResult> = None;
        let mut last: Option<PutResult> = None;
        let mut batch_ids: Option<String> = None;
        // The properties of a half message as stored (its transaction id answered).
        let mut half_properties = None;
        if cmd.code == rq::SEND_BATCH_MESSAGE || header.batch {
            let messages = match batch::decode(&cmd.body) {
                Ok(m) => m,
                Err(e) => return error_response(cmd, rs::MESSAGE_ILLEGAL, format!("bad batch body: {e}")),
            };
            if messages.is_empty() || messages.len() > BATCH_MESSAGES_MAX {
                return error_response(cmd, rs::MESSAGE_ILLEGAL, format!("a batch holds 1..={BATCH_MESSAGES_MAX} messages, got {}", messages.len()));
            }
            for m in &messages {
                if m.body.len() as u64 > max_bytes {
                    return error_response(cmd, rs::MESSAGE_ILLEGAL, format!("message body size {} exceeds the maximum {max_bytes}", m.body.len()));
                }
            }
            for m in &messages {
                let props = String::from_utf8_lossy(&m.properties);
                if crate::txn::is_half(header.sys_flag, &props) {
                    // As RocketMQ: a transaction is one message.
                    return error_response(cmd, rs::MESSAGE_ILLEGAL, "transactional messages cannot be batched (property TRAN_MSG in a batch)");
                }
                let timed = [
                    crate::schedule::timer::PROPERTY_TIMER_DELIVER_MS,
                    crate::schedule::timer::PROPERTY_TIMER_DELAY_SEC,
                    crate::schedule::timer::PROPERTY_TIMER_DELAY_MS,
                ]
                .iter()
                .any(|t| properties::find(&props, t).is_some());
                if timed || matches!(self.delays.levels().level_of(properties::find(&props, keys::DELAY)), Ok(Some(_)) | Err(_)) {
                    // As RocketMQ: a batch is stored as it is, so it cannot wait.
                    return error_response(cmd, rs::MESSAGE_ILLEGAL, "delayed messages cannot be batched (property DELAY in a batch)");
                }
            }
            let mut ids = String::new();
            for m in &messages {
                let props = String::from_utf8_lossy(&m.properties);
                let msg = MessageToStore { body: &m.body, properties: &props, flag: m.flag, ..base.clone() };
                match self.put(&msg) {
                    Ok(r) => {
                        if !ids.is_empty() {
                            ids.push(',');
                        }
                        let _ = std::fmt::Write::write_fmt(&mut ids, format_args!("{}", OffsetMsgId(self.place.store_host, r.phys_offset)));
                        first.get_or_insert(r);
                        last = Some(r);
                    }
                    // Earlier messages of the batch are stored but not acknowledged:
                    // the producer retries the whole batch (at-least-once).
                    Err(resp) => return error_response(cmd, resp.0, resp.1),
                }
            }
            batch_ids = Some(ids);
        } else if crate::txn::is_half(header.sys_flag, properties) {
            // A half message waits, invisible, in this shard's half queue until its
            // producer ends the transaction (`shard/txn.rs`).
            match self.put_half(header.topic, queue_id, MessageToStore { body: &cmd.body, ..base }, properties) {
                Ok((r, stored)) => {
                    first = Some(r);
                    last = Some(r);
                    half_properties = Some(stored);
                }
                Err((code, remark)) => return error_response(cmd, code, remark),
            }
        } else {
            let level = match self.delays.levels().level_of(properties::find(properties, keys::DELAY)) {
                Ok(level) => level,
                Err(e) => return error_response(cmd, rs::MESSAGE_ILLEGAL, e),
            };
            // A delayed message waits in this shard's schedule queue of its level
            // (this shard owns its target queue) until `run_delivery` copies it there.
            let now_ms = self.now_ms();
            let (timer_due, untimed) = match self.timers.wheel().due_ms(properties, now_ms) {
                Ok(Some(due)) if due > now_ms => (Some(due), Cow::Borrowed(properties)),
                // Due already: delivered at once, without the timer request.
                Ok(Some(_)) => (None, Cow::Owned(crate::schedule::timer::strip_timer_properties(properties))),
                Ok(None) => (None, Cow::Borrowed(properties)),
                Err(e) => return error_response(cmd, rs::MESSAGE_ILLEGAL, e),
            };
            let properties: &str = &untimed;
            let scheduled;
            let msg = match (timer_due, level) {
                // A timer waits in the wheel bucket of the minute it is due in; one whose
                // time has passed goes to its queue at once (RocketMQ 5).
                (Some(due), _) => {
                    scheduled = crate::schedule::timer::timer_properties(properties, header.topic, queue_id, due);
                    MessageToStore {
                        topic: crate::schedule::timer::TIMER_TOPIC,
                        queue_id: self.timers.wheel().bucket_of(due),
                        body: &cmd.body,
                        properties: &scheduled,
                        ..base
                    }
                }
                (None, Some(level)) => {
                    scheduled = crate::schedule::schedule_properties(properties, header.topic, queue_id);
                    MessageToStore { topic: crate::schedule::SCHEDULE_TOPIC, queue_id: (level - 1) as i32, body: &cmd.body, properties: &scheduled, ..base }
                }
                (None, None) => MessageToStore { body: &cmd.body, properties, ..base },
            };
            match self.put(&msg) {
                Ok(r) => {
                    first = Some(r);
                    last = Some(r);
                }
                Err(resp) => return error_response(cmd, resp.0, resp.1),
            }
        }
        let (Some(first), Some(last)) = (first, last) else {
            return error_response(cmd, rs::SYSTEM_ERROR, "no message stored");
        };
        self.waiters.notify(header.topic, queue_id);
        if self.config().store.flush_mode == FlushMode::Sync {
            if let Err(e) = self.store.wait_durable(last.durable_ticket).await {
                crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id));
            }
        }
        // SYNC_MASTER: the message is stored here either way; the code says whether a
        // slave has it (RocketMQ's FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE statuses).
        let (code, remark) = if self.config().role == crate::config::BrokerRole::SyncMaster {
            match self.wait_replicated(last.durable_ticket).await {
                Ok(()) => (rs::SUCCESS, None),
                Err((code, remark)) => (code, Some(remark)),
            }
        } else {
            (rs::SUCCESS, None)
        };
        // `SendMessageResponseHeader`'s fields, written in place (keys are static, values
        // go to the header's inline buffer).
        let mut response = cmd.create_response(code, remark.as_deref());
        let ext = &mut response.ext_fields;
        match &batch_ids {
            Some(ids) => ext.set("msgId", ids),
            None => ext.set_fmt("msgId", format_args!("{}", OffsetMsgId(self.place.store_host, first.phys_offset))),
        }
        ext.set_fmt("queueId", format_args!("{queue_id}"));
        ext.set_fmt("queueOffset", format_args!("{}", first.queue_offset as i64));
        if let Some(transaction_id) = properties::find(half_properties.as_deref().unwrap_or(properties), keys::UNIQ_KEY) {
            ext.set("transactionId", transaction_id);
        }
        ext.set_static("MSG_REGION", "DefaultRegion");
        ext.set_static("TRACE_ON", "true");
        response
    }

    /// Appends one message; maps store refusals to response codes.
    pub(super) fn put(&self, msg: &MessageToStore<'_>) -> Result<PutResult, (i32, String)> {
        match self.store.put(msg) {
            Ok(r) => {
                self.stats.on_put(msg.topic, msg.body.len());
                Ok(r)
            }
            Err(e @ (StoreError::Busy { .. } | StoreError::IndexBusy { .. } | StoreError::CheckpointBusy { .. })) => Err((rs::SYSTEM_BUSY, format!("[PC_SYNCHRONIZED] broker busy: {e}"))),
            Err(e @ (StoreError::DiskFull { .. } | StoreError::NoSpace)) => Err((rs::SERVICE_NOT_AVAILABLE, e.to_string())),
            Err(e @ (StoreError::TooLarge { .. } | StoreError::Illegal(_))) => Err((rs::MESSAGE_ILLEGAL, e.to_string())),
            Err(e) => crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(host: &str, phys: u64, expected: &str) {
        let addr: SocketAddr = host.parse().unwrap();
        assert_eq!(offset_msg_id(&addr, phys), expected);
        assert_eq!(decode_offset_msg_id(expected), Some((addr, phys)));
    }

    #[test]
    fn offset_msg_ids_match_rocketmq() {
        // Java: MessageDecoder.createMessageId(127.0.0.1:10911, 0) = 7F00000100002A9F0000000000000000
        check("127.0.0.1:10911", 0, "7F00000100002A9F0000000000000000");
        check("10.1.2.3:10911", 1 << 56 | 4096, "0A01020300002A9F0100000000001000");
        assert_eq!(decode_offset_msg_id("xyz"), None);
        assert_eq!(decode_offset_msg_id("ZZ00000100002A9F0000000000000000"), None);
    }
}
