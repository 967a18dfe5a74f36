//! Starting and stopping the broker: one pinned glommio executor per shard, the mesh
//! between them, the per-shard listener on the shared port (SO_REUSEPORT), the store's
//! background tasks, and a clean stop on SIGTERM / SIGINT.
//!
//! Architecture Invariant: the only state shared between shard threads is the stop
//! flag (an `AtomicBool` set by the signal handler) and what was loaded before they
//! started and never changes (the TLS configuration, `net::tls::TlsStart`); everything
//! else is owned by one executor and changes by message.
//! With `tls.server.mode` other than disabled each accepted connection passes the
//! shard's `ServerEdge` before it is served (client and replication ports alike).
//! Architecture Invariant: a shard that cannot start or whose store fails calls
//! `fatal()`: the process never serves with some shards missing.

use crate::config::BrokerConfig;
use crate::fatal::fatal;
use crate::net::conn;
use crate::rt::Glommio;
use crate::shard::mesh::{Batch, MESH_CHANNEL_BATCHES_MAX};
use crate::shard::Shard;
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
    #[error("metrics exporter cannot listen on {addr}: {source}")]
    Metrics { addr: String, source: std::io::Error },
    #[error("TLS: {0}")]
    Tls(#[from] ringmq_client::net::tls::TlsError),
}

pub struct BrokerHandle {
    /// Shard 0's address: the broker's in host mode.
    pub addr: SocketAddr,
    /// Each shard's address (all equal to `addr` in host mode; `listen_port + i` in
    /// shard route mode).
    pub shard_addrs: Vec<SocketAddr>,
    pub shard_count: usize,
    /// Where `GET /metrics` is served (`metricsExporterType=PROM`), as bound.
    pub metrics_addr: Option<SocketAddr>,
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
    // Every certificate, key and CA file loads, or the start fails naming it.
    let tls = crate::net::tls::TlsStart::load(&config.tls)?;
    crate::store::io::dma::init_failpoints()?;
    let lock = lock_store_root(&config.store_root)?;
    let shard_count = if config.shard_count == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        config.shard_count
    };
    config.shard_count = shard_count;
    if config.route_mode == crate::config::RouteMode::Shard && config.broker_topic_enable {
        // Said once, not silently accepted: the topic keeps the host's name.
        tracing::warn!(
            broker_name = %config.broker_name,
            "brokerTopicEnable in shard route mode: the per-broker topic is named after the host ({}), not after each shard-broker (<brokerName>-s<i>); mqadmin clusterRT reaches it only through the shard-broker that owns its queue",
            config.broker_name
        );
    }
    let picked_port = config.listen_port == 0;
    // Held until every shard has bound its listeners (`net::ports`): released earlier,
    // another broker could pick the same port and share it through SO_REUSEPORT.
    let mut reservations = Vec::new();
    if picked_port {
        // Shard route mode: one port per shard, `listen_port + i`.
        let ports = if config.route_mode == crate::config::RouteMode::Shard { shard_count } else { 1 };
        let run = crate::net::ports::reserve_run(ports).map_err(StartError::Port)?;
        config.listen_port = run.first;
        reservations.push(run);
    }
    if config.role.is_master() && config.ha_listen_port == 0 && picked_port {
        // Tests: one free replication port per shard, consecutive.
        let run = crate::net::ports::reserve_run(shard_count).map_err(StartError::Port)?;
        config.ha_listen_port = run.first;
        reservations.push(run);
    }
    let ip: IpAddr = config.advertised_ip().into();
    let addr = SocketAddr::new(ip, config.listen_port);
    let stop = Arc::new(AtomicBool::new(false));
    let (published, metrics_addr) = match config.metrics_exporter_type {
        crate::config::MetricsExporter::Disable => (None, None),
        crate::config::MetricsExporter::Prom => {
            // Empty: this host only (not Apache's every interface): an open scrape endpoint
            // names every topic and group, so exposing it is the operator's choice.
            let host = if config.metrics_prom_exporter_host.is_empty() { "127.0.0.1" } else { config.metrics_prom_exporter_host.as_str() };
            let want = format!("{host}:{}", config.metrics_prom_exporter_port);
            let bind: SocketAddr = want.parse().map_err(|e| StartError::Config(format!("metricsPromExporterHost/Port {want}: {e}")))?;
            let published = crate::metrics::Published::new(shard_count);
            let shard_node_ids = match config.route_mode {
                crate::config::RouteMode::Host => Vec::new(),
                crate::config::RouteMode::Shard => (0..shard_count).map(|i| format!("{}:{}", crate::routing::shard_broker_name(&config.broker_name, i), config.broker_id)).collect(),
            };
            let node = crate::metrics::Node { cluster: config.cluster_name.clone(), node_id: format!("{}:{}", config.broker_name, config.broker_id), shard_node_ids };
            let auth = config.metrics_basic_auth().map_err(StartError::Config)?;
            let auth_note = if auth.is_some() { "basic auth required" } else { "no authentication (set metricsPromExporterBasicAuth=user:password to require it)" };
            let bound = crate::metrics::exporter::spawn(bind, node, published.clone(), stop.clone(), auth).map_err(|source| StartError::Metrics { addr: want, source })?;
            tracing::info!(metrics_addr = %bound, auth = auth_note, "Prometheus metrics at GET /metrics (metricsPromExporterHost empty binds 127.0.0.1 only)");
            (Some(published), Some(bound))
        }
    };
    let mesh = MeshBuilder::<Batch, _>::full(shard_count, MESH_CHANNEL_BATCHES_MAX);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<usize>();
    let (registered_tx, registered_rx) = std::sync::mpsc::channel::<()>();
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
        let registered = registered_tx.clone();
        let published = published.clone();
        let tls = tls.clone();
        let mut builder = LocalExecutorBuilder::new(placement).name(&format!("ringmq-shard-{shard}"));
        if config.spin_before_park_us > 0 {
            builder = builder.spin_before_park(Duration::from_micros(config.spin_before_park_us));
        }
        let shard_addr = SocketAddr::new(ip, config.shard_listen_port(shard));
        let handle = builder
            .spawn(move || async move { run_shard(shard, shard_count, config, mesh, stop, shard_addr, ready, registered, published, tls).await })
            .map_err(|e| StartError::Thread { shard, reason: e.to_string() })?;
        threads.push(handle);
    }
    drop(ready_tx);
    drop(registered_tx);
    for _ in 0..shard_count {
        if ready_rx.recv_timeout(Duration::from_secs(600)).is_err() {
            return Err(StartError::Thread { shard: usize::MAX, reason: "a shard did not become ready".into() });
        }
    }
    // Every listener is bound (a shard is ready only after its binds).
    drop(reservations);
    // The first registration round is bounded by one call timeout per NameServer; a
    // NameServer that is down delays the start by that much and is retried later.
    let round_bound_ms = crate::namesrv_client::NAMESRV_CALL_TIMEOUT_MS * (config.namesrv_addrs.len() as u64 + 1);
    // Host mode registers from the metadata owner; shard mode from every shard.
    let registering = if config.route_mode == crate::config::RouteMode::Shard { shard_count } else { 1 };
    let round_deadline = std::time::Instant::now() + Duration::from_millis(round_bound_ms);
    for _ in 0..registering {
        if registered_rx.recv_timeout(round_deadline.saturating_duration_since(std::time::Instant::now())).is_err() {
            tracing::warn!(bound_ms = round_bound_ms, "first NameServer registration round did not end in time: serving anyway");
            break;
        }
    }
    tracing::info!(%addr, shards = shard_count, route_mode = ?config.route_mode, store = %config.store_root.display(), flush = ?config.store.flush_mode, role = ?config.role, ha_port = config.ha_port_base(), "broker started");
    let shard_addrs = (0..shard_count).map(|i| SocketAddr::new(ip, config.shard_listen_port(i))).collect();
    Ok(BrokerHandle { addr, shard_addrs, shard_count, metrics_addr, stop, threads, _lock: lock })
}

#[allow(clippy::too_many_arguments)] // one call site (start), each argument a distinct piece of the shard's wiring
async fn run_shard(
    id: usize,
    count: usize,
    config: BrokerConfig,
    mesh: MeshBuilder<Batch, glommio::channels::channel_mesh::Full>,
    stop: Arc<AtomicBool>,
    store_host: SocketAddr,
    ready: std::sync::mpsc::Sender<usize>,
    registered: std::sync::mpsc::Sender<()>,
    published: Option<Arc<crate::metrics::Published>>,
    tls: crate::net::tls::TlsStart,
) {
    let config = Rc::new(config);
    let (shard_tls, tls_reloader) = match tls.for_shard(config.role.is_master()) {
        Ok(v) => v,
        Err(e) => fatal(&format!("shard {id}: TLS: {e}")),
    };
    let shard_tls = Rc::new(shard_tls);
    let (senders, mut receivers) = match mesh.join().await {
        Ok(v) => v,
        Err(e) => fatal(&format!("shard {id} could not join the mesh: {e}")),
    };
    let shard = match Shard::open(Glommio::with_outgoing_tls(shard_tls.outgoing.clone()), id, count, config.clone(), senders, store_host).await {
        Ok(shard) => shard,
        Err(e) => fatal(&e.to_string()),
    };
    for (peer, stream) in receivers.streams() {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(batch) = stream.recv().await {
                shard.receive_batch(peer, batch);
            }
        })
        .detach();
    }
    start_replication(&shard, &config, id, stop.clone(), &shard_tls);
    if config.controller_mode && id == crate::routing::META_OWNER_SHARD {
        glommio::spawn_local(shard.clone().run_replicas()).detach();
    }
    if let Some(reloader) = tls_reloader {
        glommio::spawn_local(shard_tls.clone().reload_task(reloader, stop.clone(), id, id == 0)).detach();
    }
    if let Some(published) = published {
        // Publishing never waits on the exporter (`Published::publish` uses try_lock).
        let (shard, stop, shard_tls) = (shard.clone(), stop.clone(), shard_tls.clone());
        glommio::spawn_local(async move {
            while !stop.load(Ordering::SeqCst) {
                let mut snapshot = shard.metrics_snapshot();
                // The TLS edges live here, beside the listeners, not in the shard.
                snapshot.tls_handshake_failures = shard_tls.handshake_failures();
                snapshot.tls_plain_refusals = shard_tls.plain_refusals();
                published.publish(snapshot);
                glommio::timer::sleep(Duration::from_millis(crate::metrics::METRICS_PUBLISH_INTERVAL_MS)).await;
            }
        })
        .detach();
    }
    let port = config.shard_listen_port(id);
    let listener = match glommio::net::TcpListener::bind(SocketAddr::new(config.listen_ip(), port)) {
        Ok(l) => l,
        Err(e) => fatal(&format!("shard {id}: cannot listen on port {port}: {e}")),
    };
    // Shard route mode: every shard is a broker of its own and registers itself.
    let registers = id == crate::routing::META_OWNER_SHARD || config.route_mode == crate::config::RouteMode::Shard;
    if registers {
        // After the bind: the NameServer hands out this address only once it accepts.
        shard.spawn_registration(stop.clone(), registered);
    }
    let _ = ready.send(id);
    let next_conn = Cell::new((id as u64) << 48);
    let conns = Rc::new(Cell::new(0usize));
    loop {
        let accepted = accept_until_stop(&listener, &stop).await;
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
                let edge = shard_tls.client_port.clone();
                glommio::spawn_local(async move {
                    let remote = stream.peer_addr().ok();
                    match edge {
                        // tls.server.mode=disabled: the socket itself, as before TLS.
                        None => conn::serve(shard, stream, remote, conn_id).await,
                        Some(edge) => {
                            if let Some(stream) = edge.accept(stream, remote).await {
                                conn::serve(shard, stream, remote, conn_id).await;
                            }
                        }
                    }
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
    if registers {
        shard.unregister_all().await;
    }
    if let Err(e) = shard.close().await {
        fatal(&format!("shard {id}: store did not close cleanly: {e}"));
    }
    tracing::info!(shard = id, "shard stopped cleanly");
}

/// The next connection on `listener`, or `None` once the stop flag is set (checked every
/// `STOP_POLL_INTERVAL_MS`).
async fn accept_until_stop(listener: &glommio::net::TcpListener, stop: &AtomicBool) -> Option<std::io::Result<glommio::net::TcpStream>> {
    futures_lite::future::or(async { Some(listener.accept().await.map_err(std::io::Error::from)) }, async {
        while !stop.load(Ordering::SeqCst) {
            glommio::timer::sleep(Duration::from_millis(STOP_POLL_INTERVAL_MS)).await;
        }
        None
    })
    .await
}

/// A master shard listens for its slaves on `ha_port_base + id`; a slave shard keeps a
/// connection to its master's shard `id` (master replication port + id; the master is
/// `ha_master_address` or the one the NameServer names).
/// Controller mode: both (a shard's role changes at run time; the slave task idles
/// unless `Slave`, a non-master refuses HELLO).
fn start_replication(shard: &Rc<Shard<Glommio>>, config: &BrokerConfig, id: usize, stop: Arc<AtomicBool>, tls: &crate::net::tls::ShardTls) {
    if config.role.is_master() || config.controller_mode {
        let port = config.ha_port_base() as usize + id;
        let Ok(port) = u16::try_from(port) else { fatal(&format!("shard {id}: replication port {port} is out of range")) };
        let listener = match glommio::net::TcpListener::bind(SocketAddr::new(config.listen_ip(), port)) {
            Ok(l) => l,
            // A SYNC_MASTER cannot honour its role without slaves: stop. An ASYNC_MASTER
            // serves on without them, saying so loudly (set ha_listen_port to a free port).
            Err(e) if config.role == crate::config::BrokerRole::SyncMaster || config.controller_mode => fatal(&format!("shard {id}: cannot listen for slaves on port {port}: {e}")),
            Err(e) => {
                tracing::error!(shard = id, port, error = %e, "cannot listen for slaves (ha_listen_port + shard): no slave can attach to this ASYNC_MASTER shard");
                return;
            }
        };
        if id == 0 && config.ha_auth_secret().is_none() {
            tracing::warn!(port, "haAuthSecret is not set: any peer that reaches the replication ports can read the whole CommitLog and confirm SYNC_MASTER sends (README, Replication)");
        }
        let shard = shard.clone();
        let edge = tls.replication.clone();
        glommio::spawn_local(async move {
            let mut next = 0u64;
            loop {
                let accepted = accept_until_stop(&listener, &stop).await;
                match accepted {
                    None => break,
                    Some(Ok(stream)) => {
                        let _ = stream.set_nodelay(true);
                        next += 1;
                        let peer = stream.peer_addr().ok();
                        let (shard, edge) = (shard.clone(), edge.clone());
                        glommio::spawn_local(async move {
                            match edge {
                                None => shard.serve_replica(stream, next, peer).await,
                                // With tls.server.need.client.auth=require a slave without a
                                // valid certificate fails here: it never reaches HELLO.
                                Some(edge) => {
                                    if let Some(stream) = edge.accept(stream, peer).await {
                                        shard.serve_replica(stream, next, peer).await;
                                    }
                                }
                            }
                        })
                        .detach();
                    }
                    Some(Err(e)) => {
                        tracing::warn!(shard = id, error = %e, "replication accept failed");
                        glommio::timer::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        })
        .detach();
    }
    if !config.role.is_master() || config.controller_mode {
        // The target is read at each attempt: a slave may learn (or relearn) its
        // master from the NameServer while running.
        let target_of = shard.clone();
        let outgoing = tls.outgoing.clone();
        let connect = move || {
            let target = target_of.ha_master_target();
            let outgoing = outgoing.clone();
            async move {
                let target = target?;
                let s = glommio::net::TcpStream::connect(target).await.ok()?;
                let _ = s.set_nodelay(true);
                match outgoing {
                    None => Some(ringmq_client::net::tls::MaybeTls::Plain(s)),
                    Some(tls) => match tls.connect(&target.to_string(), s).await {
                        Ok(s) => Some(s),
                        Err(e) => {
                            tracing::warn!(shard = id, master = %target, error = %e, "TLS handshake with the master failed (useTLS, tls.client.*); retrying");
                            None
                        }
                    },
                }
            }
        };
        glommio::spawn_local(shard.clone().run_replication(connect)).detach();
    }
}

/// Installs SIGTERM / SIGINT handlers that set the broker's stop flag.
pub fn stop_on_signals(flag: Arc<AtomicBool>) -> std::io::Result<()> {
    signal_hook::flag::register(signal_hook::consts::SIGTERM, flag.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, flag)?;
    Ok(())
}
