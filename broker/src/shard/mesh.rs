//! Cross-shard messaging over the runtime's mesh link (in production glommio's
//! bounded lock-free SPSC channels, one per ordered pair of shards).
//!
//! A shard never touches another shard's state: it sends a request (a whole
//! `RemotingCommand`, answered by the owner exactly as if it had arrived on the owner's
//! own socket) or an event (applied by every shard to its replica), and replies come
//! back the same way.
//!
//! Batching: envelopes for one peer collect in an outbox and leave as one `Vec` after
//! the current task yields, so a burst of forwards costs one cross-core wake-up
//! instead of one per message (tens of microseconds each on a VM).
//!
//! Invariants: every request gets exactly one response (the owner answers errors as
//! responses); at most `forward_batch_max` envelopes per batch; the mesh channels are
//! bounded (`MESH_CHANNEL_BATCHES_MAX`), so a slow peer applies backpressure.

use crate::rt::chan::{self, OneshotSender};
use crate::rt::{MeshLink, Runtime};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::heartbeat::HeartbeatData;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// Batches in flight per ordered pair of shards.
pub const MESH_CHANNEL_BATCHES_MAX: usize = 1024;
/// Envelopes per batch by default (`forward_batch_max` in the broker config).
pub const OUTBOX_ENVELOPES_MAX: usize = 256;

/// Something every shard applies to its own replica.
#[derive(Debug, Clone)]
pub enum ShardEvent {
    /// The topic table changed (sent by the metadata owner): the encoded snapshot.
    Topics { version: u64, encoded: Vec<u8> },
    /// The subscription group table changed (sent by the metadata owner).
    Groups { version: u64, encoded: Vec<u8> },
    /// A client's heartbeat, with the connection it came on.
    Heartbeat { client_id: String, data: HeartbeatData, origin: super::consumers::HeartbeatOrigin },
    /// A client's connection closed or went idle.
    ClientGone { client_id: String },
    /// A server request (CHECK_TRANSACTION_STATE) for a connection the receiving shard
    /// holds; sent to that shard only (`Mesh::send_event`).
    Push { conn_id: u64, cmd: RemotingCommand },
    /// A slave's master replication address (port of shard 0), as the NameServer named
    /// it to the metadata owner; every shard connects to its own port from there.
    HaMaster { addr: std::net::SocketAddr },
    /// RocketMQ 5's users and ACLs changed (sent by the metadata owner): the snapshot.
    Auth { encoded: Vec<u8> },
    /// UPDATE_BROKER_CONFIG: runtime keys (checked by `config::parse_runtime_update`)
    /// every shard applies to its configuration.
    RuntimeConfig { pairs: Vec<(String, String)> },
    /// Controller mode (sent by shard 0's `ReplicasManager` driver): a role, SyncStateSet
    /// or lease decision every shard applies (`replicas.rs`).
    Controller(super::replicas::ControllerEvent),
}

#[derive(Debug)]
pub enum Envelope {
    Request { id: u64, cmd: RemotingCommand },
    Response { id: u64, cmd: RemotingCommand },
    Event(ShardEvent),
    /// An event the sender waits on: the receiver applies it, then answers `id`.
    SyncEvent { id: u64, event: ShardEvent },
}

pub type Batch = Vec<Envelope>;

pub struct Mesh<R: Runtime> {
    rt: R,
    /// Envelopes per batch (`forward_batch_max`).
    batch_max: usize,
    self_id: usize,
    senders: R::Link<Batch>,
    outbox: RefCell<Vec<Vec<Envelope>>>,
    scheduled: RefCell<Vec<bool>>,
    pending: RefCell<HashMap<u64, OneshotSender<RemotingCommand>>>,
    next_id: Cell<u64>,
}

impl<R: Runtime> Mesh<R> {
    pub fn new(rt: R, senders: R::Link<Batch>, batch_max: usize) -> Rc<Self> {
        assert!(batch_max > 0, "a mesh batch holds at least one envelope");
        let n = senders.peer_count();
        let self_id = senders.peer_id();
        Rc::new(Self {
            rt,
            batch_max,
            self_id,
            senders,
            outbox: RefCell::new((0..n).map(|_| Vec::new()).collect()),
            scheduled: RefCell::new(vec![false; n]),
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
        })
    }

    pub fn self_id(&self) -> usize {
        self.self_id
    }

    pub fn shard_count(&self) -> usize {
        self.senders.peer_count()
    }

    fn enqueue(self: &Rc<Self>, to: usize, envelope: Envelope) {
        assert_ne!(to, self.self_id, "a shard never sends to itself over the mesh");
        self.outbox.borrow_mut()[to].push(envelope);
        let full = self.outbox.borrow()[to].len() >= self.batch_max;
        if full || !self.scheduled.borrow()[to] {
            self.scheduled.borrow_mut()[to] = true;
            let mesh = self.clone();
            self.rt.spawn(async move {
                if !full {
                    // Let the rest of this scheduling round add to the batch.
                    futures_lite::future::yield_now().await;
                }
                mesh.scheduled.borrow_mut()[to] = false;
                let batch = std::mem::take(&mut mesh.outbox.borrow_mut()[to]);
                if !batch.is_empty() && mesh.senders.send_to(to, batch).await.is_err() {
                    crate::fatal::fatal(&format!("shard {} lost its channel to shard {to}", mesh.self_id));
                }
            });
        }
    }

    /// Sends `cmd` to shard `to` and waits for its response.
    pub async fn call(self: &Rc<Self>, to: usize, cmd: RemotingCommand) -> RemotingCommand {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = chan::oneshot();
        self.pending.borrow_mut().insert(id, tx);
        self.enqueue(to, Envelope::Request { id, cmd });
        match rx.await {
            Some(response) => response,
            None => crate::fatal::fatal("mesh reply channel closed"),
        }
    }

    pub fn respond(self: &Rc<Self>, to: usize, id: u64, cmd: RemotingCommand) {
        self.enqueue(to, Envelope::Response { id, cmd });
    }

    /// Completes a `call` with the response that came back.
    pub fn complete(&self, id: u64, cmd: RemotingCommand) {
        let sender = self.pending.borrow_mut().remove(&id);
        match sender {
            Some(tx) => tx.send(cmd),
            None => tracing::warn!(id, "response for an unknown cross-shard request"),
        }
    }

    /// Sends `event` to every other shard and waits until each has applied it: what a
    /// client was told succeeded is then visible on every shard (read-your-writes for
    /// topic creates and heartbeats).
    pub async fn broadcast_and_wait(self: &Rc<Self>, event: ShardEvent) {
        let mut acks = Vec::new();
        for to in (0..self.shard_count()).filter(|&to| to != self.self_id) {
            let id = self.next_id.get();
            self.next_id.set(id + 1);
            let (tx, rx) = chan::oneshot();
            self.pending.borrow_mut().insert(id, tx);
            self.enqueue(to, Envelope::SyncEvent { id, event: event.clone() });
            acks.push(rx);
        }
        for ack in acks {
            if ack.await.is_none() {
                crate::fatal::fatal("mesh acknowledgement channel closed");
            }
        }
    }

    /// Sends `event` to shard `to` only.
    pub fn send_event(self: &Rc<Self>, to: usize, event: ShardEvent) {
        self.enqueue(to, Envelope::Event(event));
    }

    /// Sends `event` to every other shard.
    pub fn broadcast(self: &Rc<Self>, event: ShardEvent) {
        for to in 0..self.shard_count() {
            if to != self.self_id {
                self.enqueue(to, Envelope::Event(event.clone()));
            }
        }
    }
}
