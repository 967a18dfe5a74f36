//! Starting and stopping the broker: one pinned glommio executor per shard, the mesh
//! between them, the per-shard listener on the shared port (SO_REUSEPORT), the store's
//! background tasks, and a clean stop on SIGTERM / SIGINT.
//!
//! Architecture Invariant: the only state shared between shard threads is the stop
//! flag (an `AtomicBool` set by the signal handler); everything else is owned by one
//! executor and changes by message.
//! Architecture Invariant: a shard that cannot start or whose store fails calls
//! `fatal()`: the process never serves with some shards missing.

use crate::config::BrokerConfig;
use crate::fatal::fatal;
use crate::meta::offsets::ConsumerOffsetTable;
use crate::meta::snapshot::SnapshotStore;
use crate::meta::topics::TopicTable;
use crate::net::conn;
use crate::shard::mesh::{Batch, Envelope, Mesh, MESH_CHANNEL_BATCHES_MAX};
use crate::shard::Shard;
use crate::store::engine::{open_store, ShardId};
use crate::store::flusher::spawn_store_tasks;
use crate::store::io::dma::DmaDisk;
use crate::store::io::{Disk, SystemClock};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// How often shards look at the stop flag.
pub const STOP_POLL_INTERVAL_MS: u64 = 50;
/// How often dirty consumer offsets are persisted.
pub const OFFSETS_PERSIST_INTERVAL_MS: u64 = 5_000;

#[derive(Debug, Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("store root {path}: {source}")]
    StoreRoot { path: PathBuf, source: std::io::Error },
    #[error("store root {0} is locked by another broker process")]
    Locked(PathBuf),
    #[error("could not start shard thread {shard}: {reason}")]
    Thread { shard: usize, reason: String },
    #[error("no free port for the listener: {0}")]
    Port(std::io::Error),
    #[error(transparent)]
    Failpoints(#[from] crate::store::io::dma::FailpointError),
}

pub struct BrokerHandle {
    pub addr: SocketAddr,
    pub shard_count: usize,
    stop: Arc<AtomicBool>,
    threads: Vec<glommio::ExecutorJoinHandle<()>>,
    _lock: std::fs::File,
}

impl BrokerHandle {
    /// Asks every shard to stop (flush, checkpoint, remove the abort file).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Waits for every shard to finish.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn lock_store_root(root: &std::path::Path) -> Result<std::fs::File, StartError> {
    use std::os::unix::io::AsRawFd;
    std::fs::create_dir_all(root).map_err(|source| StartError::StoreRoot { path: root.into(), source })?;
    let path = root.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StartError::StoreRoot { path: path.clone(), source })?;
    // SAFETY: flock on a valid open descriptor.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(StartError::Locked(root.into()));
    }
    Ok(file)
}

/// Starts the broker; returns once every shard's thread is running.
pub fn start(mut config: BrokerConfig) -> Result<BrokerHandle, StartError> {
    config.validate().map_err(|e| StartError::Config(e.to_string()))?;
    crate::store::io::dma::init_failpoints()?;
    let lock = lock_store_root(&config.store_root)?;
    let shard_count = if config.shard_count == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        config.shard_count
    };
    config.shard_count = shard_count;
    if config.listen_port == 0 {
        // Every shard binds the same port: pick it once.
        let probe = std::net::TcpListener::bind(("0.0.0.0", 0)).map_err(StartError::Port)?;
        config.listen_port = probe.local_addr().map_err(StartError::Port)?.port();
    }
    let ip: IpAddr = config.advertised_ip().into();
    let addr = SocketAddr::new(ip, config.listen_port);
    let stop = Arc::new(AtomicBool::new(false));
    let mesh = MeshBuilder::<Batch, _>::full(shard_count, MESH_CHANNEL_BATCHES_MAX);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<usize>();
    let mut threads = Vec::new();
    for shard in 0..shard_count {
        let placement = match &config.cpu_list {
            Some(cpus) if !cpus.is_empty() => Placement::Fixed(cpus[shard % cpus.len()]),
            _ if shard_count <= std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) => Placement::Fixed(shard),
            _ => Placement::Unbound,
        };
        let config = config.clone();
        let mesh = mesh.clone();
        let stop = stop.clone();
        let ready = ready_tx.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("ringmq-shard-{shard}"))
            .spawn(move || async move { run_shard(shard, shard_count, config, mesh, stop, addr, ready).await })
            .map_err(|e| StartError::Thread { shard, reason: e.to_string() })?;
        threads.push(handle);
    }
    drop(ready_tx);
    for _ in 0..shard_count {
        if ready_rx.recv_timeout(Duration::from_secs(600)).is_err() {
            return Err(StartError::Thread { shard: usize::MAX, reason: "a shard did not become ready".into() });
        }
    }
    tracing::info!(%addr, shards = shard_count, store = %config.store_root.display(), flush = ?config.store.flush_mode, "broker started");
    Ok(BrokerHandle { addr, shard_count, stop, threads, _lock: lock })
}

async fn run_shard(
    id: usize,
    count: usize,
    config: BrokerConfig,
    mesh: MeshBuilder<Batch, glommio::channels::channel_mesh::Full>,
    stop: Arc<AtomicBool>,
    store_host: SocketAddr,
    ready: std::sync::mpsc::Sender<usize>,
) {
    let config = Rc::new(config);
    let dir = config.store_root.join(format!("shard-{id}"));
    let (store, report) = match open_store(DmaDisk, SystemClock, dir.clone(), ShardId(id as u16), config.store.clone()).await {
        Ok(v) => v,
        Err(e) => fatal(&format!("shard {id}: store did not open: {e}")),
    };
    tracing::info!(shard = id, unclean = report.unclean, end = report.end_offset, records = report.records_scanned, "store open");
    let store_stop = Rc::new(Cell::new(false));
    spawn_store_tasks(store.clone(), store_stop.clone(), Rc::new(|e: String| fatal(&e)));

    let meta_dir = config.store_root.join("config");
    let topics_store = SnapshotStore::new(DmaDisk, meta_dir.clone(), "topics");
    let topics = match topics_store.load().await {
        Ok(Some(bytes)) => TopicTable::decode(&bytes).unwrap_or_else(|e| fatal(&format!("topic table does not decode: {e}"))),
        Ok(None) => TopicTable::with_defaults(config.default_topic_queue_nums),
        Err(e) => fatal(&format!("topic table could not be read: {e}")),
    };
    let offsets_store = Rc::new(SnapshotStore::new(DmaDisk, dir.join("config"), "consumerOffset"));
    let offsets = match offsets_store.load().await {
        Ok(Some(bytes)) => ConsumerOffsetTable::decode(&bytes).unwrap_or_else(|e| fatal(&format!("consumer offsets do not decode: {e}"))),
        Ok(None) => ConsumerOffsetTable::default(),
        Err(e) => fatal(&format!("consumer offsets could not be read: {e}")),
    };

    let (senders, mut receivers) = match mesh.join().await {
        Ok(v) => v,
        Err(e) => fatal(&format!("shard {id} could not join the mesh: {e}")),
    };
    let mesh = Mesh::new(senders);
    let shard = Shard::new(id, count, config.clone(), store.clone(), mesh.clone(), topics, offsets, store_host);
    if id == crate::routing::META_OWNER_SHARD {
        *shard.topics_store.borrow_mut() = Some(topics_store);
        let groups_store = SnapshotStore::new(DmaDisk, meta_dir.clone(), "subscriptionGroup");
        match groups_store.load().await {
            Ok(Some(bytes)) => {
                *shard.groups.borrow_mut() =
                    crate::meta::groups::GroupTable::decode(&bytes).unwrap_or_else(|e| fatal(&format!("subscription groups do not decode: {e}")))
            }
            Ok(None) => {}
            Err(e) => fatal(&format!("subscription groups could not be read: {e}")),
        }
        *shard.groups_store.borrow_mut() = Some(groups_store);
    }
    for (peer, stream) in receivers.streams() {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(batch) = stream.recv().await {
                for envelope in batch {
                    match envelope {
                        Envelope::Request { id, cmd } => {
                            let shard = shard.clone();
                            glommio::spawn_local(async move {
                                let response = shard.handle_forwarded(cmd).await;
                                shard.mesh.respond(peer, id, response);
                            })
                            .detach();
                        }
                        Envelope::Response { id, cmd } => shard.mesh.complete(id, cmd),
                        Envelope::Event(event) => shard.apply_event(event),
                    }
                }
            }
        })
        .detach();
    }
    if id == crate::routing::META_OWNER_SHARD {
        shard.broadcast_topics();
        crate::namesrv_client::spawn_registration(shard.clone(), stop.clone());
    }

    // Offsets persistence.
    {
        let shard = shard.clone();
        let offsets_store = offsets_store.clone();
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(OFFSETS_PERSIST_INTERVAL_MS)).await;
                persist_offsets(&shard, &offsets_store).await;
            }
        })
        .detach();
    }

    let listener = match glommio::net::TcpListener::bind(SocketAddr::new(config.listen_ip(), config.listen_port)) {
        Ok(l) => l,
        Err(e) => fatal(&format!("shard {id}: cannot listen on port {}: {e}", config.listen_port)),
    };
    let _ = ready.send(id);
    let next_conn = Cell::new((id as u64) << 48);
    let conns = Rc::new(Cell::new(0usize));
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            while !stop.load(Ordering::SeqCst) {
                glommio::timer::sleep(Duration::from_millis(STOP_POLL_INTERVAL_MS)).await;
            }
            None
        })
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                if conns.get() >= config.connections_per_shard_max {
                    tracing::warn!(shard = id, max = config.connections_per_shard_max, "connection limit reached: refusing a connection");
                    drop(stream);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                next_conn.set(next_conn.get() + 1);
                let conn_id = next_conn.get();
                let shard = shard.clone();
                let conns = conns.clone();
                conns.set(conns.get() + 1);
                glommio::spawn_local(async move {
                    conn::serve(shard, stream, conn_id).await;
                    conns.set(conns.get() - 1);
                })
                .detach();
            }
            Some(Err(e)) => {
                tracing::warn!(shard = id, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    // Clean stop: no new connections; persist offsets; flush and checkpoint the store.
    drop(listener);
    if id == crate::routing::META_OWNER_SHARD {
        crate::namesrv_client::unregister_all(&shard).await;
    }
    persist_offsets(&shard, &offsets_store).await;
    store_stop.set(true);
    if let Err(e) = store.close().await {
        fatal(&format!("shard {id}: store did not close cleanly: {e}"));
    }
    tracing::info!(shard = id, "shard stopped cleanly");
}

async fn persist_offsets<D: Disk>(shard: &Rc<Shard>, store: &SnapshotStore<D>) {
    let encoded = {
        let mut offsets = shard.offsets.borrow_mut();
        if !offsets.take_dirty() {
            return;
        }
        match offsets.encode() {
            Ok(bytes) => bytes,
            Err(e) => fatal(&format!("shard {}: consumer offsets do not encode: {e}", shard.id)),
        }
    };
    if let Err(e) = store.save(&encoded).await {
        fatal(&format!("shard {}: consumer offsets could not be saved: {e}", shard.id));
    }
}

/// Installs SIGTERM / SIGINT handlers that set the broker's stop flag.
pub fn stop_on_signals(flag: Arc<AtomicBool>) -> std::io::Result<()> {
    signal_hook::flag::register(signal_hook::consts::SIGTERM, flag.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, flag)?;
    Ok(())
}
