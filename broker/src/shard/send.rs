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

fn is_batch(cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>) -> bool {
    cmd.code == rq::SEND_BATCH_MESSAGE || header.batch
}

/// What a send is, decided before anything is stored.
enum SendKind<'p> {
    /// SEND_BATCH_MESSAGE: every message stored as it is.
    Batch(Vec<batch::BatchMessage>),
    /// A transactional half message.
    Half,
    /// A RocketMQ 5 timer due later.
    Timed { due_ms: i64 },
    /// A delay level (`DELAY`); its timer properties stripped if it had any.
    Delayed { level: usize, properties: Cow<'p, str> },
    /// Stored in its queue at once (a timer already due loses its timer properties).
    Plain { properties: Cow<'p, str> },
}

/// What a send stored: its first and last message, every id of a batch, and a half's
/// properties as stored (its transaction id is answered).
struct Stored {
    first: PutResult,
    last: PutResult,
    batch_ids: Option<String>,
    half_properties: Option<String>,
}


/// The answer to a send stored after the master lease ran out (controller mode,
/// `masterLeaseEnable`): it may be on this log only, so it is not acknowledged.
pub const LEASE_EXPIRED_REMARK: &str = "master lease expired (controller unreachable): not acknowledged";

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

    /// SEND_MESSAGE(_V2) and SEND_BATCH_MESSAGE, top to bottom: decode → classify
    /// (retry over its maximum / batch / half / delayed / timed / plain) → put → wait
    /// for durability and replication → answer. `remote`: the producer's address when
    /// the send arrived on this shard's socket.
    pub(super) async fn handle_send(self: &Rc<Self>, cmd: &RemotingCommand, remote: Option<SocketAddr>) -> RemotingCommand {
        match self.send(cmd, remote).await {
            Ok(answer) | Err(answer) => answer,
        }
    }

    async fn send(self: &Rc<Self>, cmd: &RemotingCommand, remote: Option<SocketAddr>) -> Result<RemotingCommand, RemotingCommand> {
        // Decode.
        let header = self.decode_send(cmd)?;
        // Classify: a retry past its maximum goes to the dead-letter queue instead.
        if let Some(answer) = self.redirect_retry(cmd, &header, remote).await {
            return Ok(answer);
        }
        let queue_id = self.admit_send(cmd, &header).await?;
        let properties = header.properties.unwrap_or_default();
        // A request (request-reply) names its cluster for the replier (`reply.rs`).
        let stamped = self.stamp_request_cluster(properties);
        let properties = stamped.as_deref().unwrap_or(properties);
        let kind = self.classify_send(cmd, &header, properties)?;
        // Put.
        let base = self.base_message(cmd, &header, remote);
        let stored = self.put_send(cmd, &header, base, kind)?;
        // Wait for durability (then wake long-polling pulls) and replication.
        let (code, remark) = self.wait_acknowledgeable(stored.last, header.topic, queue_id).await;
        // Answer.
        Ok(self.send_response(cmd, code, remark.as_deref(), queue_id, &stored, properties))
    }

    pub(super) fn decode_send<'c>(&self, cmd: &'c RemotingCommand) -> Result<SendMessageHeaderRef<'c>, RemotingCommand> {
        if !self.is_master() {
            // A slave's log holds its master's records only (RocketMQ's answer).
            return Err(error_response(cmd, rs::SERVICE_NOT_AVAILABLE, "message store is slave mode, so putMessage is forbidden"));
        }
        SendMessageHeaderRef::from_ext_any(&cmd.ext_fields).map_err(|e| error_response(cmd, rs::INVALID_PARAMETER, format!("bad send header: {e}")))
    }

    /// A client's send to a `%RETRY%` topic past its maximum reconsume count is stored
    /// in the group's dead-letter queue instead (`sendback.rs`); `None` otherwise.
    async fn redirect_retry(self: &Rc<Self>, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>, remote: Option<SocketAddr>) -> Option<RemotingCommand> {
        if !header.topic.starts_with(super::sendback::RETRY_TOPIC_PREFIX) || cmd.ext(super::sendback::SEND_BACK_EXT).is_some() {
            return None;
        }
        // The redirected copy is sent internally: it carries the born host along.
        let mut with_host = cmd.clone();
        if let Some(remote) = remote {
            with_host.ext_fields.set_fmt(super::BORN_HOST_EXT, format_args!("{remote}"));
        }
        self.redirect_to_dlq(&with_host, header.topic, header.reconsume_times.unwrap_or(0), header.max_reconsume_times).await
    }

    /// The topic exists (or is created), may be written, the queue is one of its write
    /// queues and the body fits: the queue id.
    pub(super) async fn admit_send(self: &Rc<Self>, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>) -> Result<i32, RemotingCommand> {
        let topic = self.topic_for_send(header.topic).await.map_err(|(code, remark)| error_response(cmd, code, remark))?;
        if !writable_perm(topic.perm) {
            return Err(error_response(cmd, rs::NO_PERMISSION, format!("the topic[{}] sending message is forbidden", header.topic)));
        }
        // A broker without write permission is avoided through its routes; only ordered
        // topics (whose producers cannot pick another queue) are refused here (Java).
        if self.config().broker_permission & crate::config::PERM_WRITE == 0 && topic.order {
            return Err(error_response(cmd, rs::NO_PERMISSION, format!("the broker[{}] sending message is forbidden", self.place.store_host.ip())));
        }
        let queue_id = header.queue_id;
        if queue_id < 0 || queue_id as u32 >= topic.write_queue_nums {
            return Err(error_response(
                cmd,
                rs::SYSTEM_ERROR,
                format!("request queueId[{queue_id}] is illegal, topic {} has {} write queues", header.topic, topic.write_queue_nums),
            ));
        }
        let max_bytes = self.config().max_message_bytes;
        if cmd.body.len() as u64 > max_bytes && !is_batch(cmd, header) {
            return Err(error_response(cmd, rs::MESSAGE_ILLEGAL, format!("message body size {} exceeds the maximum {max_bytes}", cmd.body.len())));
        }
        Ok(queue_id)
    }

    /// What kind of send this is, each refused here when it cannot be honoured.
    fn classify_send<'p>(&self, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>, properties: &'p str) -> Result<SendKind<'p>, RemotingCommand> {
        if is_batch(cmd, header) {
            return self.decode_batch(cmd, header).map(SendKind::Batch);
        }
        if crate::txn::is_half(header.sys_flag, properties) {
            return Ok(SendKind::Half);
        }
        let level = self.delays.levels().level_of(properties::find(properties, keys::DELAY)).map_err(|e| error_response(cmd, rs::MESSAGE_ILLEGAL, e))?;
        let now_ms = self.now_ms();
        Ok(match self.timers.wheel().due_ms(properties, now_ms).map_err(|e| error_response(cmd, rs::MESSAGE_ILLEGAL, e))? {
            // A timer waits in the wheel bucket of the minute it is due in (RocketMQ 5).
            Some(due_ms) if due_ms > now_ms => SendKind::Timed { due_ms },
            // Due already: goes to its queue at once, without the timer request.
            Some(_) => match level {
                Some(level) => SendKind::Delayed { level, properties: Cow::Owned(crate::schedule::timer::strip_timer_properties(properties)) },
                None => SendKind::Plain { properties: Cow::Owned(crate::schedule::timer::strip_timer_properties(properties)) },
            },
            None => match level {
                Some(level) => SendKind::Delayed { level, properties: Cow::Borrowed(properties) },
                None => SendKind::Plain { properties: Cow::Borrowed(properties) },
            },
        })
    }

    /// A batch's messages, each within the size bound; none transactional, delayed or
    /// timed (as RocketMQ: a batch is stored as it is).
    fn decode_batch(&self, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>) -> Result<Vec<batch::BatchMessage>, RemotingCommand> {
        let messages = batch::decode(&cmd.body).map_err(|e| error_response(cmd, rs::MESSAGE_ILLEGAL, format!("bad batch body: {e}")))?;
        if messages.is_empty() || messages.len() > BATCH_MESSAGES_MAX {
            return Err(error_response(cmd, rs::MESSAGE_ILLEGAL, format!("a batch holds 1..={BATCH_MESSAGES_MAX} messages, got {}", messages.len())));
        }
        let max_bytes = self.config().max_message_bytes;
        for m in &messages {
            if m.body.len() as u64 > max_bytes {
                return Err(error_response(cmd, rs::MESSAGE_ILLEGAL, format!("message body size {} exceeds the maximum {max_bytes}", m.body.len())));
            }
        }
        for m in &messages {
            let props = String::from_utf8_lossy(&m.properties);
            if crate::txn::is_half(header.sys_flag, &props) {
                // As RocketMQ: a transaction is one message.
                return Err(error_response(cmd, rs::MESSAGE_ILLEGAL, "transactional messages cannot be batched (property TRAN_MSG in a batch)"));
            }
            let timed = [crate::schedule::timer::PROPERTY_TIMER_DELIVER_MS, crate::schedule::timer::PROPERTY_TIMER_DELAY_SEC, crate::schedule::timer::PROPERTY_TIMER_DELAY_MS]
                .iter()
                .any(|t| properties::find(&props, t).is_some());
            if timed || matches!(self.delays.levels().level_of(properties::find(&props, keys::DELAY)), Ok(Some(_)) | Err(_)) {
                // As RocketMQ: a batch is stored as it is, so it cannot wait.
                return Err(error_response(cmd, rs::MESSAGE_ILLEGAL, "delayed messages cannot be batched (property DELAY in a batch)"));
            }
        }
        Ok(messages)
    }

    /// The fields every stored message of this send shares. The born host is the
    /// producer's address: the connection's, or stamped by the shard the request
    /// arrived on (0.0.0.0:0 for a request made inside the broker).
    fn base_message<'c>(&self, cmd: &'c RemotingCommand, header: &SendMessageHeaderRef<'c>, remote: Option<SocketAddr>) -> MessageToStore<'c> {
        let born_host = remote.or_else(|| cmd.ext(super::BORN_HOST_EXT).and_then(|a| a.parse().ok())).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        MessageToStore {
            topic: header.topic,
            queue_id: header.queue_id,
            flag: header.flag,
            body: &[],
            properties: "",
            sys_flag: header.sys_flag,
            born_timestamp_ms: header.born_timestamp,
            born_host,
            store_host: self.place.store_host,
            reconsume_times: header.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
        }
    }

    /// Stores the send as its kind says: a batch message by message, a half in the half
    /// queue, a delayed message in its level's schedule queue, a timer in its wheel
    /// bucket, anything else in its queue.
    fn put_send(&self, cmd: &RemotingCommand, header: &SendMessageHeaderRef<'_>, base: MessageToStore<'_>, kind: SendKind<'_>) -> Result<Stored, RemotingCommand> {
        let refuse = |(code, remark): (i32, String)| error_response(cmd, code, remark);
        let one = |r: PutResult| Stored { first: r, last: r, batch_ids: None, half_properties: None };
        match kind {
            SendKind::Batch(messages) => {
                let mut ids = String::new();
                let mut first = None;
                let mut last = None;
                for m in &messages {
                    let props = String::from_utf8_lossy(&m.properties);
                    let msg = MessageToStore { body: &m.body, properties: &props, flag: m.flag, ..base.clone() };
                    // Earlier messages of the batch are stored but not acknowledged: the
                    // producer retries the whole batch (at-least-once).
                    let r = self.put(&msg).map_err(refuse)?;
                    if !ids.is_empty() {
                        ids.push(',');
                    }
                    let _ = std::fmt::Write::write_fmt(&mut ids, format_args!("{}", OffsetMsgId(self.place.store_host, r.phys_offset)));
                    first.get_or_insert(r);
                    last = Some(r);
                }
                let (Some(first), Some(last)) = (first, last) else {
                    return Err(error_response(cmd, rs::SYSTEM_ERROR, "no message stored"));
                };
                Ok(Stored { first, last, batch_ids: Some(ids), half_properties: None })
            }
            // A half message waits, invisible, in this shard's half queue until its
            // producer ends the transaction (`shard/txn.rs`).
            SendKind::Half => {
                let properties = header.properties.unwrap_or_default();
                let (r, stored) = self.put_half(header.topic, header.queue_id, MessageToStore { body: &cmd.body, ..base }, properties).map_err(refuse)?;
                Ok(Stored { half_properties: Some(stored), ..one(r) })
            }
            SendKind::Timed { due_ms } => {
                let scheduled = crate::schedule::timer::timer_properties(header.properties.unwrap_or_default(), header.topic, header.queue_id, due_ms);
                let msg = MessageToStore {
                    topic: crate::schedule::timer::TIMER_TOPIC,
                    queue_id: self.timers.wheel().bucket_of(due_ms),
                    body: &cmd.body,
                    properties: &scheduled,
                    ..base
                };
                self.put(&msg).map(one).map_err(refuse)
            }
            // A delayed message waits in this shard's schedule queue of its level (this
            // shard owns its target queue) until `run_delivery` copies it there.
            SendKind::Delayed { level, properties } => {
                let scheduled = crate::schedule::schedule_properties(&properties, header.topic, header.queue_id);
                let msg = MessageToStore { topic: crate::schedule::SCHEDULE_TOPIC, queue_id: (level - 1) as i32, body: &cmd.body, properties: &scheduled, ..base };
                self.put(&msg).map(one).map_err(refuse)
            }
            SendKind::Plain { properties } => self.put(&MessageToStore { body: &cmd.body, properties: &properties, ..base }).map(one).map_err(refuse),
        }
    }

    /// Waits until the send may be acknowledged: durable under sync flush, and on a
    /// SYNC_MASTER confirmed by a slave. The message is stored here either way; the
    /// code says whether a slave has it (RocketMQ's FLUSH_SLAVE_TIMEOUT /
    /// SLAVE_NOT_AVAILABLE statuses).
    ///
    /// Pulls suspended on `topic`/`queue_id` are woken once the message is durable
    /// under sync flush (at once under async flush): a long-polling consumer is not
    /// handed a message before its producer can be acknowledged, as Apache 5 dispatches
    /// a SYNC_FLUSH CommitLog only up to the flushed position (`getConfirmOffset`).
    /// Only the wake-up waits: a pull that arrives during the group commit still reads
    /// the message (RingMQ's reads are not capped at the flushed offset yet), so this
    /// narrows the window rather than closing it. It keeps a replier's reply from
    /// overtaking the request's own SEND answer in the common case
    /// (`interop_request_reply.rs`). Not after replication: Apache does not wait for a
    /// slave either.
    async fn wait_acknowledgeable(&self, last: PutResult, topic: &str, queue_id: i32) -> (i32, Option<String>) {
        // The put just before ran in this generation (no await since).
        let generation = self.role_generation();
        let answer = self.wait_acknowledgeable_inner(last, topic, queue_id).await;
        if answer.0 == rs::SUCCESS && !self.lease_acknowledges() {
            // A master whose lease ran out may already have a successor (§3.8).
            return (rs::SERVICE_NOT_AVAILABLE, Some(LEASE_EXPIRED_REMARK.into()));
        }
        self.unless_demoted(generation, answer)
    }

    async fn wait_acknowledgeable_inner(&self, last: PutResult, topic: &str, queue_id: i32) -> (i32, Option<String>) {
        if self.config().store.flush_mode == FlushMode::Sync {
            if let Err(e) = self.store.wait_durable(last.durable_ticket).await {
                crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id));
            }
        }
        self.waiters.notify(topic, queue_id);
        let all_ack = self.config().controller_mode && self.config().all_ack_in_sync_state_set;
        if self.config().role != crate::config::BrokerRole::SyncMaster && !all_ack {
            return (rs::SUCCESS, None);
        }
        match self.wait_replicated(last.durable_ticket).await {
            Ok(()) => (rs::SUCCESS, None),
            Err((code, remark)) => (code, Some(remark)),
        }
    }

    /// `SendMessageResponseHeader`'s fields, written in place (keys are static, values
    /// go to the header's inline buffer).
    fn send_response(&self, cmd: &RemotingCommand, code: i32, remark: Option<&str>, queue_id: i32, stored: &Stored, properties: &str) -> RemotingCommand {
        let mut response = cmd.create_response(code, remark);
        let ext = &mut response.ext_fields;
        match &stored.batch_ids {
            Some(ids) => ext.set("msgId", ids),
            None => ext.set_fmt("msgId", format_args!("{}", OffsetMsgId(self.place.store_host, stored.first.phys_offset))),
        }
        ext.set_fmt("queueId", format_args!("{queue_id}"));
        ext.set_fmt("queueOffset", format_args!("{}", stored.first.queue_offset as i64));
        if let Some(transaction_id) = properties::find(stored.half_properties.as_deref().unwrap_or(properties), keys::UNIQ_KEY) {
            ext.set("transactionId", transaction_id);
        }
        ext.set_static("MSG_REGION", "DefaultRegion");
        ext.set_static("TRACE_ON", if self.config().trace_on { "true" } else { "false" });
        response
    }

    /// Appends one message; maps store refusals to response codes.
    pub(super) fn put(&self, msg: &MessageToStore<'_>) -> Result<PutResult, (i32, String)> {
        if self.config.borrow().controller_mode && !self.is_master() {
            // Checked here, at the put itself: a send that passed `decode_send` may
            // have awaited (retry redirect, topic creation) across a demotion.
            return Err((rs::SERVICE_NOT_AVAILABLE, super::role::DEMOTED_REMARK.into()));
        }
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
