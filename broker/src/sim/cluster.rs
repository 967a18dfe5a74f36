//! A simulated broker process: its shards on one [`SimExecutor`], its store on one
//! SimDisk, connections over in-memory pipes served by the production `net::conn`,
//! and a crash that drops every task of the process at once (SIGKILL) and loses what
//! the disk had not synced — then a restart that recovers, as the real process does.
//!
//! And [`SimClient`]: a raw remoting client over a pipe that pairs every response
//! with its request by opaque and reports a response nobody waits for (answered twice,
//! or never asked) as a violation.

use super::executor::{GroupId, SimExecutor, CLIENT_GROUP};
use super::pipe::{duplex, PipeEnd};
use super::sim_rt::{sim_mesh, SimRt};
use crate::config::BrokerConfig;
use crate::net::conn;
use crate::rt::chan::{self, OneshotSender};
use crate::rt::Runtime;
use crate::shard::Shard;
use crate::store::io::sim::SimDisk;
use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Bytes buffered per direction of a simulated socket.
pub const PIPE_CAPACITY_BYTES: usize = 256 * 1024;
/// Frames a simulated client queues for writing.
pub const CLIENT_WRITE_QUEUE_MAX: usize = 4096;

pub struct SimBroker {
    pub ex: SimExecutor,
    pub disk: SimDisk,
    pub clock_jump_ms: Rc<Cell<i64>>,
    pub config: Rc<BrokerConfig>,
    group: Cell<GroupId>,
    shards: RefCell<Vec<Rc<Shard<SimRt>>>>,
    next_conn: Cell<u64>,
    /// Incarnations started (1 after the first start).
    incarnation: Cell<u64>,
    /// A slave's master: every incarnation's shards replicate from it (in controller
    /// mode, whichever it is at each connection attempt: `set_role` changes it).
    master: RefCell<Option<Rc<SimBroker>>>,
}

impl SimBroker {
    pub fn new(ex: SimExecutor, disk: SimDisk, config: BrokerConfig) -> Rc<Self> {
        Rc::new(Self {
            ex,
            disk,
            clock_jump_ms: Rc::new(Cell::new(0)),
            config: Rc::new(config),
            group: Cell::new(CLIENT_GROUP),
            shards: RefCell::new(Vec::new()),
            next_conn: Cell::new(0),
            incarnation: Cell::new(0),
            master: RefCell::new(None),
        })
    }

    /// Makes this (slave) broker replicate from `master`: shard i of every incarnation
    /// keeps a connection to the master's shard i (`Shard::run_replication`).
    pub fn replicate_from(&self, master: Rc<SimBroker>) {
        *self.master.borrow_mut() = Some(master);
    }

    /// Opens a replication connection to `shard` of this (master) broker, served by the
    /// production `Shard::serve_replica`.
    pub fn connect_replica(&self, shard: usize) -> Option<PipeEnd> {
        let target = self.shards.borrow().get(shard).cloned()?;
        let (client, server) = duplex(PIPE_CAPACITY_BYTES);
        let conn_id = self.next_conn.get() + 1;
        self.next_conn.set(conn_id);
        self.ex.spawn_in(Some(self.group.get()), target.serve_replica(server, conn_id, None));
        Some(client)
    }

    pub fn is_up(&self) -> bool {
        !self.shards.borrow().is_empty()
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation.get()
    }

    pub fn shards(&self) -> Vec<Rc<Shard<SimRt>>> {
        self.shards.borrow().clone()
    }

    pub fn store_host(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 10911))
    }

    /// Starts (or restarts) the process: recovery of every shard, then the mesh.
    pub async fn start(self: &Rc<Self>) -> Result<(), String> {
        assert!(!self.is_up(), "start of a broker that is running");
        let incarnation = self.incarnation.get() + 1;
        self.incarnation.set(incarnation);
        // Unique across brokers: a crash of one must not take another's tasks.
        let group = self.ex.new_group();
        self.group.set(group);
        let (done_tx, done_rx) = chan::oneshot();
        let me = self.clone();
        self.ex.spawn_in(Some(group), async move {
            let count = me.config.shard_count;
            let (links, receivers) = sim_mesh(count);
            let mut shards = Vec::new();
            for (id, link) in links.into_iter().enumerate() {
                let rt = SimRt::new(me.ex.clone(), me.disk.clone(), me.clock_jump_ms.clone());
                match Shard::open(rt, id, count, me.config.clone(), link, me.store_host()).await {
                    Ok(s) => shards.push(s),
                    Err(e) => {
                        done_tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
            for (shard, incoming) in shards.iter().zip(receivers) {
                for (peer, rx) in incoming {
                    let shard = shard.clone();
                    shard.rt().clone().spawn(async move {
                        while let Some(batch) = rx.recv().await {
                            shard.receive_batch(peer, batch);
                        }
                    });
                }
            }
            if me.master.borrow().is_some() || me.config.controller_mode {
                for shard in &shards {
                    let (me, id) = (me.clone(), shard.id());
                    let connect = move || {
                        let master = me.master.borrow().clone();
                        let end = master.and_then(|m| m.connect_replica(id));
                        async move { end }
                    };
                    shard.rt().clone().spawn(shard.clone().run_replication(connect));
                }
            }
            *me.shards.borrow_mut() = shards;
            done_tx.send(Ok(()));
        });
        done_rx.await.unwrap_or_else(|| Err("broker start was abandoned".into()))
    }

    /// SIGKILL and power cut: every task of the process is dropped, every open
    /// connection closes, unsynced writes are dropped, kept or torn.
    pub fn crash(&self) {
        self.ex.kill_group(self.group.get());
        self.shards.borrow_mut().clear();
        self.disk.crash();
    }

    /// A clean stop: offsets persisted, stores flushed and checkpointed, then every
    /// task of the process is dropped.
    pub async fn stop(&self) -> Result<(), String> {
        let shards = self.shards();
        for s in &shards {
            s.close().await?;
        }
        self.ex.kill_group(self.group.get());
        self.shards.borrow_mut().clear();
        Ok(())
    }

    /// Plays the controller (controller mode): gives every shard `role`, inside this
    /// broker's task group (tasks a promotion starts die with the process), and for a
    /// slave makes `master` the broker it connects to.
    pub async fn set_role(&self, role: crate::ha::Role, master: Option<Rc<SimBroker>>) -> Result<(), String> {
        if let Some(m) = master {
            *self.master.borrow_mut() = Some(m);
        }
        let (done_tx, done_rx) = chan::oneshot();
        let shards = self.shards();
        self.ex.spawn_in(Some(self.group.get()), async move {
            for shard in shards {
                if let Err(e) = shard.set_role(role).await {
                    done_tx.send(Err(format!("shard {}: {e}", shard.id())));
                    return;
                }
            }
            done_tx.send(Ok(()));
        });
        done_rx.await.unwrap_or_else(|| Err("the broker went down during the role change".into()))
    }

    /// Plays the controller's SyncStateSet (allAck): every shard's in-sync members.
    pub fn set_sync_state_set(&self, members: Option<std::collections::BTreeSet<u64>>) {
        for s in self.shards() {
            s.set_sync_state_set(members.clone());
        }
    }

    /// Whether a shard took a TRUNCATE and waits for the restart that applies it.
    pub fn wants_restart(&self) -> bool {
        self.shards().iter().any(|s| s.ha_restart_wanted())
    }

    /// Opens a connection to `shard` (as SO_REUSEPORT would place it).
    pub fn connect(&self, shard: usize) -> Option<PipeEnd> {
        let target = self.shards.borrow().get(shard).cloned()?;
        let (client, server) = duplex(PIPE_CAPACITY_BYTES);
        let conn_id = ((shard as u64) << 48) | (self.next_conn.get() + 1);
        self.next_conn.set(self.next_conn.get() + 1);
        let remote = SocketAddr::from(([10, 0, 0, 1], 40_000 + (conn_id % 20_000) as u16));
        self.ex.spawn_in(Some(self.group.get()), async move {
            conn::serve(target, server, Some(remote), conn_id).await;
        });
        Some(client)
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// The connection closed first (the broker crashed or closed it).
    Lost,
    /// No response within the timeout on a live connection.
    Timeout,
}

/// A raw remoting client on one simulated connection.
pub struct SimClient {
    ex: SimExecutor,
    out: chan::Sender<Vec<u8>>,
    pending: Rc<RefCell<BTreeMap<i32, OneshotSender<RemotingCommand>>>>,
    next_opaque: Cell<i32>,
    closed: Rc<Cell<bool>>,
    /// Responses nobody waited for, as text: each one is a broken invariant.
    pub violations: Rc<RefCell<Vec<String>>>,
    /// Server requests other than NOTIFY_CONSUMER_IDS_CHANGED (CHECK_TRANSACTION_STATE),
    /// oldest first; at most `CLIENT_PUSHES_MAX` kept (more are dropped, as a client
    /// with a full check queue drops them).
    pushes: Rc<RefCell<std::collections::VecDeque<RemotingCommand>>>,
}

/// Server requests a `SimClient` keeps until taken.
pub const CLIENT_PUSHES_MAX: usize = 4096;

impl SimClient {
    pub fn new(ex: SimExecutor, end: PipeEnd) -> Self {
        let (mut reader, mut writer) = futures_lite::io::split(end);
        let (out, out_rx) = chan::bounded::<Vec<u8>>(CLIENT_WRITE_QUEUE_MAX);
        ex.spawn_in(Some(CLIENT_GROUP), async move {
            while let Some(frame) = out_rx.recv().await {
                if writer.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let pending: Rc<RefCell<BTreeMap<i32, OneshotSender<RemotingCommand>>>> = Rc::default();
        let closed = Rc::new(Cell::new(false));
        let violations: Rc<RefCell<Vec<String>>> = Rc::default();
        let pushes: Rc<RefCell<std::collections::VecDeque<RemotingCommand>>> = Rc::default();
        let (p, c, v, q) = (pending.clone(), closed.clone(), violations.clone(), pushes.clone());
        ex.spawn_in(Some(CLIENT_GROUP), async move {
            let limits = FrameLimits::default();
            let mut buf = BytesMut::new();
            let mut chunk = vec![0u8; 64 * 1024];
            'read: loop {
                loop {
                    match RemotingCommand::decode(&mut buf, &limits) {
                        Ok(Some(cmd)) if cmd.is_response() => {
                            let waiter = p.borrow_mut().remove(&cmd.opaque);
                            match waiter {
                                Some(tx) => tx.send(cmd),
                                None => v.borrow_mut().push(format!("response to opaque {} that no request waits for (code {}, remark {:?})", cmd.opaque, cmd.code, cmd.remark)),
                            }
                        }
                        Ok(Some(push)) => {
                            let mut q = q.borrow_mut();
                            if push.code != ringmq_client::remoting::codes::request_code::NOTIFY_CONSUMER_IDS_CHANGED && q.len() < CLIENT_PUSHES_MAX {
                                q.push_back(push);
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            v.borrow_mut().push(format!("undecodable frame from the broker: {e}"));
                            break 'read;
                        }
                    }
                }
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            c.set(true);
            // Every request still waiting learns that its connection is gone.
            p.borrow_mut().clear();
        });
        Self { ex, out, pending, next_opaque: Cell::new(1), closed, violations, pushes }
    }

    /// The server requests received since the last call, oldest first.
    pub fn take_pushes(&self) -> Vec<RemotingCommand> {
        self.pushes.borrow_mut().drain(..).collect()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Sends `cmd` (its opaque replaced) and waits at most `timeout` for the answer.
    pub async fn request(&self, mut cmd: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, RequestError> {
        if self.closed.get() {
            return Err(RequestError::Lost);
        }
        let opaque = self.next_opaque.get();
        self.next_opaque.set(opaque.wrapping_add(1).max(1));
        cmd.opaque = opaque;
        let mut frame = BytesMut::new();
        cmd.encode(&mut frame).expect("the simulator's requests encode");
        let (tx, rx) = chan::oneshot();
        self.pending.borrow_mut().insert(opaque, tx);
        if self.out.send(frame.to_vec()).await.is_err() {
            self.pending.borrow_mut().remove(&opaque);
            return Err(RequestError::Lost);
        }
        let rt_sleep = self.ex.sleep(timeout);
        let answer = futures_lite::future::or(async { Some(rx.await) }, async {
            rt_sleep.await;
            None
        })
        .await;
        match answer {
            Some(Some(r)) => Ok(r),
            Some(None) => Err(RequestError::Lost),
            None => {
                self.pending.borrow_mut().remove(&opaque);
                Err(if self.closed.get() { RequestError::Lost } else { RequestError::Timeout })
            }
        }
    }

    /// Sends a oneway request (no answer expected).
    pub async fn oneway(&self, mut cmd: RemotingCommand) {
        let opaque = self.next_opaque.get();
        self.next_opaque.set(opaque.wrapping_add(1).max(1));
        cmd.opaque = opaque;
        let mut frame = BytesMut::new();
        cmd.encode(&mut frame).expect("the simulator's requests encode");
        let _ = self.out.send(frame.to_vec()).await;
    }
}
