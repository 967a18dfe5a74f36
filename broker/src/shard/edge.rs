//! Shard route mode at the shard's edge (`RouteMode::Shard`, ARCHITECTURE.md "Route
//! modes"): shard i is broker `<brokerName>-s<i>` on port `listen_port + i`, and its
//! queues 0..k are the host queues it owns (`routing::shard_queue_to_host`). A client
//! request is rewritten into host terms once, where it arrives (`edge_in`), and its
//! answer back into the shard-broker's terms (`edge_out`); everything between — the
//! store, offsets, locks, forwarding for control requests — sees host terms only.
//!
//! Invariants:
//! - in host mode both functions change nothing;
//! - a request naming a queue this shard-broker does not have is refused, never run
//!   on another queue (a lock request's queues of other brokers are left out);
//! - a queue in any answer a client reads is named in shard-broker terms (broker name
//!   of its owner shard, that shard's queue id), so clients that merge answers from
//!   several brokers (mqadmin topicStatus, consumerProgress) see each queue once.

use super::{error_response, Shard};
use crate::config::RouteMode;
use crate::routing::{host_queue_to_shard, shard_broker_name, shard_queue_count, shard_queue_to_host};
use ringmq_client::remoting::bodies::{JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;

/// What the answer to a rewritten request needs rewriting in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EdgeReply {
    Unchanged,
    /// A send's `queueId` (host → this shard's).
    SendQueue,
    /// LOCK_BATCH_MQ's `lockOKMQSet`.
    LockSet,
}

/// A shard asking another to register with the NameServers now (shard route mode,
/// after a topic change); accepted only from the mesh, never from a client.
pub(super) const REGISTER_NOW_INTERNAL: i32 = -31_001;

/// Header fields naming a topic and a queue: full names, then SEND_MESSAGE_V2's.
const TOPIC_FIELDS: [&str; 2] = ["topic", "b"];
const QUEUE_FIELDS: [&str; 2] = ["queueId", "e"];

impl<R: crate::rt::Runtime> Shard<R> {
    pub fn route_mode(&self) -> RouteMode {
        self.config().route_mode
    }

    /// The broker name clients know this shard by.
    pub fn client_broker_name(&self) -> String {
        match self.route_mode() {
            RouteMode::Host => self.config().broker_name.clone(),
            RouteMode::Shard => shard_broker_name(&self.config().broker_name, self.place.id),
        }
    }

    /// Host queue `host_queue` of `topic` as clients name it.
    pub fn client_queue(&self, topic: &str, host_queue: i32) -> MessageQueue {
        match self.route_mode() {
            RouteMode::Host => MessageQueue { broker_name: self.config().broker_name.clone(), queue_id: host_queue, topic: topic.to_string() },
            RouteMode::Shard => {
                let (owner, local) = host_queue_to_shard(topic, host_queue, self.place.count);
                MessageQueue { broker_name: shard_broker_name(&self.config().broker_name, owner), queue_id: local, topic: topic.to_string() }
            }
        }
    }

    /// How many of a topic's `host_count` queues clients see on this broker.
    pub fn client_queue_count(&self, topic: &str, host_count: u32) -> u32 {
        match self.route_mode() {
            RouteMode::Host => host_count,
            RouteMode::Shard => shard_queue_count(topic, host_count, self.place.id, self.place.count),
        }
    }

    /// Queues per topic a client asks for (UPDATE_AND_CREATE_TOPIC, auto-creation) as
    /// host queues: in shard mode the count is per shard-broker, and every shard-broker
    /// of the host gets it.
    pub fn host_queue_count_for_client(&self, per_broker: u32) -> u32 {
        match self.route_mode() {
            RouteMode::Host => per_broker,
            RouteMode::Shard => per_broker.saturating_mul(self.place.count as u32),
        }
    }

    /// Registers with the NameServers now, after a topic change, and returns once the
    /// round has ended: in shard mode every shard re-registers (each announces its own
    /// queues), so a client that created a topic can route to every shard-broker at once.
    /// The caller has already made every shard hold the new table (`update_topics`).
    pub async fn register_now(self: &std::rc::Rc<Self>) {
        self.register_all(false).await;
        if self.route_mode() == RouteMode::Shard {
            for shard in (0..self.place.count).filter(|&s| s != self.place.id) {
                let r = self.mesh.call(shard, RemotingCommand::request(REGISTER_NOW_INTERNAL)).await;
                if r.code != rs::SUCCESS {
                    tracing::warn!(shard, code = r.code, remark = ?r.remark, "shard did not re-register: the periodic round will");
                }
            }
        }
    }

    /// Rewrites a client's request into host terms (shard mode); the refusal to send
    /// back when it names a queue this shard-broker does not have.
    pub(super) fn edge_in(&self, cmd: &mut RemotingCommand) -> Result<EdgeReply, RemotingCommand> {
        if self.route_mode() == RouteMode::Host {
            return Ok(EdgeReply::Unchanged);
        }
        match cmd.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE | rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => {
                self.queue_in(cmd, true)?;
                Ok(EdgeReply::SendQueue)
            }
            code if super::is_queue_read(code) => {
                self.queue_in(cmd, false)?;
                Ok(EdgeReply::Unchanged)
            }
            rq::UPDATE_AND_CREATE_TOPIC => {
                for field in ["readQueueNums", "writeQueueNums"] {
                    if let Some(n) = cmd.ext(field).and_then(|v| v.trim().parse::<u32>().ok()) {
                        cmd.ext_fields.insert(field.into(), self.host_queue_count_for_client(n).to_string());
                    }
                }
                Ok(EdgeReply::Unchanged)
            }
            rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => {
                let mut body = match LockBatchRequestBody::decode(&cmd.body) {
                    Ok(b) => b,
                    // The handler answers a body that does not decode.
                    Err(_) => return Ok(EdgeReply::Unchanged),
                };
                // A queue is its broker's to lock (RocketMQ clients send each broker its
                // own queues): one naming another broker is left out, so it is neither
                // granted nor released here — never applied to this host's queue of the
                // same number.
                let mine = self.client_broker_name();
                let host_name = self.config().broker_name.clone();
                body.mq_set.retain(|mq| mq.broker_name == mine);
                for mq in &mut body.mq_set {
                    mq.queue_id = shard_queue_to_host(&mq.topic, mq.queue_id, self.place.id, self.place.count);
                    mq.broker_name = host_name.clone();
                }
                cmd.body = body.encode().into();
                Ok(if cmd.code == rq::LOCK_BATCH_MQ { EdgeReply::LockSet } else { EdgeReply::Unchanged })
            }
            // A key lives on the shards owning the topic's queues, and a client asks
            // every broker of the topic's route: each shard-broker answers for itself.
            rq::QUERY_MESSAGE => {
                cmd.ext_fields.insert(super::admin::LOCAL_ONLY_EXT.into(), "1".into());
                Ok(EdgeReply::Unchanged)
            }
            _ => Ok(EdgeReply::Unchanged),
        }
    }

    /// A topic + queue request: this shard-broker's queue → the host queue. Allocates
    /// nothing on the way through (the send path's allocation bound, `send_allocs`).
    fn queue_in(&self, cmd: &mut RemotingCommand, send: bool) -> Result<(), RemotingCommand> {
        let Some(queue_field) = QUEUE_FIELDS.into_iter().find(|f| cmd.ext(f).is_some()) else { return Ok(()) };
        let Some(topic) = TOPIC_FIELDS.into_iter().find_map(|f| cmd.ext(f)) else { return Ok(()) };
        let Ok(local) = cmd.ext(queue_field).unwrap_or_default().trim().parse::<i32>() else {
            // The handler refuses a queue id that is not a number.
            return Ok(());
        };
        if local < 0 {
            return Ok(());
        }
        let host_count = self.meta.topics.borrow().get(topic).map(|t| if send { t.write_queue_nums } else { t.read_queue_nums.max(t.write_queue_nums) });
        if let Some(host_count) = host_count {
            let count = self.client_queue_count(topic, host_count);
            if local as u32 >= count {
                let what = if send { "write" } else { "read" };
                let remark = format!("request queueId[{local}] is illegal, topic {topic} has {count} {what} queues on broker {}", self.client_broker_name());
                return Err(error_response(cmd, rs::SYSTEM_ERROR, remark));
            }
        }
        let host = shard_queue_to_host(topic, local, self.place.id, self.place.count);
        cmd.ext_fields.set_fmt(queue_field, format_args!("{host}"));
        Ok(())
    }

    /// Rewrites the answer to a request `edge_in` rewrote.
    pub(super) fn edge_out(&self, reply: EdgeReply, response: &mut RemotingCommand) {
        if response.code != rs::SUCCESS {
            return;
        }
        match reply {
            EdgeReply::Unchanged => {}
            EdgeReply::SendQueue => {
                let Some(host) = response.ext("queueId").and_then(|q| q.parse::<i32>().ok()) else { return };
                // The shard's queue id does not depend on the topic (`host_queue_to_shard`).
                let local = host.max(0) as usize / self.place.count;
                response.ext_fields.set_fmt("queueId", format_args!("{local}"));
            }
            EdgeReply::LockSet => {
                let Ok(mut body) = LockBatchResponseBody::decode(&response.body) else { return };
                for mq in &mut body.lock_ok_mq_set {
                    if mq.broker_name == self.config().broker_name {
                        *mq = self.client_queue(&mq.topic, mq.queue_id);
                    }
                }
                response.body = body.encode().into();
            }
        }
    }
}
