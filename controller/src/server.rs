//! One controller node as a server (docs/design/controller.md §2.6, §4): its own glommio
//! executor, the durable store under `controllerStorePath/raft`, Raft over remoting
//! (`raft::net`), and one listening port serving both brokers (the controller codes,
//! through `Controller::handle`) and peers (the private Raft codes −32 001..003).
//!
//! Owns: the listener and its connections, the start sequence (open store → start Raft →
//! `initialize` with every peer → leader duties → accept), and `ControllerHandle` for a
//! node started on its own thread (tests, the NameServer embedding).
//!
//! Invariants:
//! - at most `connections_max` connections are served; more are closed on accept;
//! - frames are decoded by the client crate's codec under `frame_limits` (a frame that
//!   does not decode closes its connection); answers use the request's serialize type;
//! - per connection at most `REQUESTS_IN_FLIGHT_MAX` requests are being handled (the
//!   reader stops reading until one ends) and at most `WRITE_QUEUE_MAX` answers wait
//!   for the writer; requests are handled concurrently (a Raft write waiting for its
//!   commit does not hold up a heartbeat or a vote on the same connection);
//! - Raft RPCs are answered only for connections from a configured peer's IP address
//!   (others get NO_PERMISSION); oneway requests and stray responses get no answer.
//! - TLS on the controller port is not wired yet (deviation, see the design doc).

use crate::controller::{Controller, ControllerConfig, ControllerError};
use crate::raft::file_store::{open_file_store, FileStoreError, StdDisk};
use crate::raft::net::{is_raft_rpc, serve_raft_rpc, PeerNetwork};
use crate::raft::runtime::GlommioRaftRuntime;
use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::Semaphore;
use glommio::{LocalExecutorBuilder, Placement};
use ringmq_client::remoting::codes::response_code as rc;
use ringmq_client::remoting::{FrameLimits, RemotingCommand};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Requests handled at once on one connection.
pub const REQUESTS_IN_FLIGHT_MAX: u64 = 256;
/// Answers waiting for a connection's writer.
pub const WRITE_QUEUE_MAX: usize = 256;
/// Bytes requested from the socket per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Connections served at once by default (brokers + peers + admin tools).
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// A connection silent this long is closed (brokers heartbeat every second).
pub const CONNECTION_IDLE_TIMEOUT_MS_DEFAULT: u64 = 120_000;
/// A write that cannot finish within this is abandoned and the connection closed.
pub const WRITE_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Pause after a failed accept so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Everything one node needs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub controller: ControllerConfig,
    /// `controllerStorePath`: the Raft files go to `<store_path>/raft`.
    pub store_path: PathBuf,
    /// The address to listen on (the node's own peer address, or a wildcard with its port).
    pub listen: SocketAddr,
    pub connections_max: usize,
    pub frame_limits: FrameLimits,
    pub connection_idle_timeout_ms: u64,
    pub write_timeout_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot start the executor: {0}")]
    Executor(String),
    #[error("controller store {path}: {source}")]
    Store { path: PathBuf, source: FileStoreError },
    #[error("controller store {path}: {source}")]
    StoreDir { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error("peer address {addr} does not resolve: {reason}")]
    Peer { addr: String, reason: String },
    #[error("the controller thread ended before it was listening")]
    StartAborted,
}

/// Why one connection ended early.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("malformed frame: {0}")]
    Malformed(#[source] ringmq_client::remoting::CommandError),
}

/// The IP addresses peers connect from (their configured addresses, resolved once).
fn peer_ips(config: &ControllerConfig) -> Result<BTreeSet<IpAddr>, ServerError> {
    let mut ips = BTreeSet::new();
    for addr in config.peers.values() {
        let resolved = addr.to_socket_addrs().map_err(|e| ServerError::Peer { addr: addr.clone(), reason: e.to_string() })?;
        ips.extend(resolved.map(|a| a.ip()));
    }
    Ok(ips)
}

fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServerError> {
    std::net::TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })
}

fn into_glommio(listener: std::net::TcpListener) -> TcpListener {
    // SAFETY: the descriptor is a bound, listening TCP socket that we own; ownership
    // moves to the glommio listener, which closes it.
    unsafe { TcpListener::from_raw_fd(listener.into_raw_fd()) }
}

struct Shared {
    controller: Rc<Controller>,
    config: NodeConfig,
    peer_ips: BTreeSet<IpAddr>,
    connections: Cell<usize>,
}

/// Opens the store and starts Raft (on the current glommio executor).
async fn start_controller(config: &NodeConfig) -> Result<Rc<Controller>, ServerError> {
    let dir = config.store_path.join("raft");
    let disk = StdDisk::open(&dir).map_err(|source| ServerError::StoreDir { path: dir.clone(), source })?;
    let (log, sm) = open_file_store::<GlommioRaftRuntime>(Arc::new(disk))
        .map_err(|source| ServerError::Store { path: dir.clone(), source })?;
    log.offload_io();
    let fresh = log.is_fresh();
    let controller = Controller::start(config.controller.clone(), PeerNetwork::default(), log, sm).await?;
    // Static membership: only a first boot initializes (a restarted node has its
    // membership in its log or snapshot; openraft would refuse it anyway).
    if fresh {
        controller.initialize().await?;
    }
    let controller = Rc::new(controller);
    controller.spawn_duties();
    Ok(controller)
}

/// Runs a node on the calling thread until the process ends.
pub fn run(config: NodeConfig) -> Result<(), ServerError> {
    let peer_ips = peer_ips(&config.controller)?;
    let listener = bind(config.listen)?;
    let ex = LocalExecutorBuilder::new(Placement::Unbound)
        .name("controller")
        .make()
        .map_err(|e| ServerError::Executor(e.to_string()))?;
    ex.run(async move {
        let controller = start_controller(&config).await?;
        serve(into_glommio(listener), controller, config, peer_ips, Arc::new(AtomicBool::new(false))).await;
        Ok(())
    })
}

/// A node running on its own thread.
#[derive(Debug)]
pub struct ControllerHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

impl ControllerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting and waits for the thread.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.stop.store(true, Ordering::SeqCst);
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        if std::net::TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            if let Err(e) = thread.join() {
                tracing::warn!(error = %e, "controller thread ended badly");
            }
        }
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts a node on a new thread; returns once it listens (its store is open and Raft
/// started), or with the reason it did not start.
pub fn spawn(config: NodeConfig) -> Result<ControllerHandle, ServerError> {
    let peer_ips = peer_ips(&config.controller)?;
    let listener = bind(config.listen)?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = stop.clone();
    let (tx, rx) = mpsc::channel::<Result<(), ServerError>>();
    let thread = LocalExecutorBuilder::new(Placement::Unbound)
        .name("controller")
        .spawn(move || async move {
            let controller = match start_controller(&config).await {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let _ = tx.send(Ok(()));
            serve(into_glommio(listener), controller.clone(), config, peer_ips, stop_flag).await;
            controller.shutdown().await;
        })
        .map_err(|e| ServerError::Executor(e.to_string()))?;
    match rx.recv() {
        Ok(Ok(())) => Ok(ControllerHandle { local_addr, stop, thread: Some(thread) }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(ServerError::StartAborted),
    }
}

async fn serve(
    listener: TcpListener,
    controller: Rc<Controller>,
    config: NodeConfig,
    peer_ips: BTreeSet<IpAddr>,
    stop: Arc<AtomicBool>,
) {
    let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::info!(addr = %local, node = controller.node_id(), "ringmq-controller listening on {local}");
    let shared = Rc::new(Shared { controller, config, peer_ips, connections: Cell::new(0) });
    loop {
        let accepted = listener.accept().await;
        if stop.load(Ordering::SeqCst) {
            tracing::info!(addr = %local, "controller stopping");
            return;
        }
        let stream = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await;
                continue;
            }
        };
        let peer = stream.peer_addr().ok();
        let open = shared.connections.get();
        if open >= shared.config.connections_max {
            tracing::warn!(?peer, connections_max = shared.config.connections_max, "too many connections; closing");
            continue;
        }
        shared.connections.set(open + 1);
        let conn_shared = shared.clone();
        glommio::spawn_local(async move {
            if let Err(e) = serve_connection(stream, &conn_shared, peer).await {
                tracing::debug!(?peer, error = %e, "controller connection ended");
            }
            conn_shared.connections.set(conn_shared.connections.get().saturating_sub(1));
        })
        .detach();
    }
}

/// Answers one request.
async fn answer(shared: &Shared, req: &RemotingCommand, peer: Option<SocketAddr>) -> RemotingCommand {
    if is_raft_rpc(req.code) {
        if !peer.is_some_and(|p| shared.peer_ips.contains(&p.ip())) {
            return req.create_response(rc::NO_PERMISSION, Some("raft RPCs are answered for configured peers only"));
        }
        return serve_raft_rpc(shared.controller.raft(), req).await;
    }
    shared.controller.handle(req.clone()).await
}

async fn serve_connection(stream: TcpStream, shared: &Rc<Shared>, peer: Option<SocketAddr>) -> Result<(), ConnError> {
    stream.set_read_timeout(Some(Duration::from_millis(shared.config.connection_idle_timeout_ms))).map_err(io::Error::from)?;
    stream.set_write_timeout(Some(Duration::from_millis(shared.config.write_timeout_ms))).map_err(io::Error::from)?;
    stream.set_nodelay(true).map_err(io::Error::from)?;
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<RemotingCommand>(WRITE_QUEUE_MAX);
    let writer_task = glommio::spawn_local(async move {
        let mut out = BytesMut::new();
        while let Some(resp) = rx.recv().await {
            out.clear();
            if let Err(e) = resp.encode(&mut out) {
                tracing::warn!(code = resp.code, error = %e, "cannot encode a controller answer");
                continue;
            }
            if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
    });
    let tx = Rc::new(tx);
    let in_flight = Rc::new(Semaphore::new(REQUESTS_IN_FLIGHT_MAX));
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut input = BytesMut::new();
    let result = 'read: loop {
        loop {
            let req = match RemotingCommand::decode(&mut input, &shared.config.frame_limits) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => break 'read Err(ConnError::Malformed(e)),
            };
            if req.is_response() {
                continue;
            }
            let Ok(permit) = in_flight.acquire_static_permit(1).await else { break 'read Ok(()) };
            let shared = shared.clone();
            let tx = tx.clone();
            glommio::spawn_local(async move {
                let resp = answer(&shared, &req, peer).await;
                if !req.is_oneway() {
                    let _ = tx.send(resp).await;
                }
                drop(permit);
            })
            .detach();
        }
        let n = match reader.read(&mut chunk).await {
            Ok(n) => n,
            Err(e) => break Err(e.into()),
        };
        if n == 0 {
            break Ok(());
        }
        input.extend_from_slice(&chunk[..n]);
    };
    // Answers still being computed hold their own sender; the writer ends after them.
    drop(tx);
    writer_task.await;
    result
}
