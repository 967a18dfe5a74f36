//! The NameServer's network side: one glommio `LocalExecutor` (one core) that accepts
//! connections, answers remoting requests with `processor::process`, expires brokers
//! every `scan_interval_ms`, and — with `metrics_exporter_type = "prom"` — publishes a
//! metrics snapshot every `metrics_publish_interval_ms` for the Prometheus endpoint,
//! which runs on its own OS thread.
//!
//! Invariants:
//! - all state lives in one `RouteInfoManager` behind a `RefCell` on the executor's
//!   thread; no borrow is held across an await (`process` is synchronous);
//! - at most `connections_max` connections are served; more are closed on accept;
//! - per connection, at most one frame's bytes (bounded by `frame_limits`) plus one read
//!   chunk are buffered for reading, and responses are queued up to
//!   `write_queue_bytes_max` bytes (plus the response that crossed it) before the
//!   connection writes; while it writes it does not read, so a peer that does not read
//!   stalls only itself, and only for `write_timeout_ms`;
//! - a frame that does not decode closes its connection (after the responses to the
//!   frames before it) and touches nothing else; oneway requests and stray responses get
//!   no answer; answers use the request's serialize type;
//! - the listening socket is bound without `SO_REUSEPORT` (glommio's `bind` sets it), so
//!   a second server on a port in use fails instead of silently sharing it;
//! - metrics are plain integers on the executor's thread (`Shared::metrics`); the
//!   exporter thread only reads published snapshots, and publishing never waits for it
//!   (`Slot::publish` skips a round), so a scrape, slow or not, never delays a request;
//! - TLS (`tls.server.*`): the certificate files load before anything listens (a bad
//!   one fails the start); with a mode other than disabled each connection passes the
//!   port's `ServerEdge` (permissive / enforcing, bounded handshake) before it is
//!   served; changed files are reloaded every `TLS_RELOAD_INTERVAL_MS` on the blocking
//!   pool, for new connections; the socket timeouts hold under TLS too (set on the
//!   socket before the handshake).

use crate::acl::{NamesrvAcl, ACL_RELOAD_INTERVAL_MS};
use crate::config::{ConfigError, ServerConfig};
use crate::metrics::{self, NamesrvMetrics, Snapshot};
use crate::processor::process;
use crate::route::RouteInfoManager;
use bytes::BytesMut;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ringmq_client::net::tls::{Reload, ServerEdge, ServerTlsReloader, TLS_RELOAD_INTERVAL_MS};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};
use metrics_export::{Exporter, Slot};
use ringmq_client::remoting::codes::{request_code, response_code};
use ringmq_client::remoting::{CommandError, RemotingCommand};
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Pause after a failed accept (e.g. out of file descriptors) so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

#[derive(Debug, Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot start the executor: {0}")]
    Executor(#[source] io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics { addr: SocketAddr, source: io::Error },
    #[error("the server thread ended before it was listening")]
    StartAborted,
    #[error("plain ACL (acl_enable): {0}")]
    Acl(String),
    #[error("TLS: {0}")]
    Tls(#[from] ringmq_client::net::tls::TlsError),
    #[error("embedded controller: {0}")]
    Controller(Box<ringmq_controller::server::ServerError>),
}

/// Why one connection ended early.
#[derive(Debug, Error)]
enum ConnError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("malformed frame: {0}")]
    Malformed(#[source] CommandError),
    #[error("cannot encode a response: {0}")]
    Encode(#[source] CommandError),
}

/// State shared by the tasks of one server.
struct Shared {
    config: ServerConfig,
    rim: RefCell<RouteInfoManager>,
    metrics: RefCell<NamesrvMetrics>,
    connections: Cell<usize>,
    /// The plain ACL, when `acl_enable`.
    acl: Option<NamesrvAcl>,
    /// Time origin: the registry sees monotonic milliseconds since start.
    started: Instant,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// The metrics side of a running server: the endpoint's thread and the slot the
/// executor publishes into.
struct MetricsExport {
    exporter: Exporter,
    slot: Arc<Slot<Snapshot>>,
}

/// Starts the Prometheus endpoint when the config asks for one. `node_id` labels every
/// series (the RPC address the server listens on).
fn start_metrics(
    config: &ServerConfig,
    node_id: String,
    stop: &Arc<AtomicBool>,
) -> Result<Option<MetricsExport>, ServerError> {
    let Some(addr) = config.metrics_addr()? else { return Ok(None) };
    let slot: Arc<Slot<Snapshot>> = Arc::new(Slot::default());
    let read = slot.clone();
    let auth = config.metrics_basic_auth()?;
    let auth_note = if auth.is_some() { "basic auth required" } else { "no authentication (set metrics_prom_exporter_basic_auth to require it)" };
    let exporter = metrics_export::spawn(addr, "namesrv-metrics", stop.clone(), auth, move || {
        // Before the first publish (start-up only): an all-zero snapshot.
        metrics::render(&node_id, &read.latest().unwrap_or_default())
    })
    .map_err(|source| ServerError::Metrics { addr, source })?;
    tracing::info!(metrics_addr = %exporter.local_addr(), auth = auth_note, "Prometheus metrics at GET /metrics (an empty metrics_prom_exporter_host binds 127.0.0.1 only)");
    Ok(Some(MetricsExport { exporter, slot }))
}

/// The plain ACL when `acl_enable`, loaded before anything listens (a file that does not
/// load fails the start).
fn open_acl(config: &ServerConfig) -> Result<Option<NamesrvAcl>, ServerError> {
    match (&config.plain_acl_file, config.acl_enable) {
        (Some(path), true) => NamesrvAcl::open(path).map(Some).map_err(ServerError::Acl),
        _ => Ok(None),
    }
}

/// Serves on the calling thread until the process ends.
pub fn run(config: ServerConfig) -> Result<(), ServerError> {
    config.validate()?;
    // Runs on its own thread for as long as this function does.
    let _controller = config.controller.as_ref().map(crate::controller::start).transpose().map_err(ServerError::Controller)?;
    let acl = open_acl(&config)?;
    let tls = ServerTlsReloader::start(&config.tls)?;
    let listener = bind(config.listen)?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    // Never set: the process ends with the server.
    let stop = Arc::new(AtomicBool::new(false));
    let metrics = start_metrics(&config, local_addr.to_string(), &stop)?;
    let ex = LocalExecutorBuilder::new(Placement::Unbound)
        .name("namesrv")
        .make()
        .map_err(|e| ServerError::Executor(e.into()))?;
    let slot = metrics.as_ref().map(|m| m.slot.clone());
    ex.run(async move {
        serve(into_glommio(listener), config, acl, stop, slot, tls).await;
    });
    Ok(())
}

/// A server running on its own thread (tests, embedding).
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
    exporter: Option<Exporter>,
    /// The embedded controller, stopped after the name server.
    controller: Option<ringmq_controller::server::ControllerHandle>,
}

impl ServerHandle {
    /// The address it listens on (the real port when `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The embedded controller's address, when `enable_controller_in_namesrv`.
    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.controller.as_ref().map(|c| c.local_addr())
    }

    /// Where `GET /metrics` is served (the real port when configured with port 0);
    /// `None` when the exporter is disabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.exporter.as_ref().map(Exporter::local_addr)
    }

    /// Stops accepting, drops every connection and waits for the threads.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and returns.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        if std::net::TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            if let Err(e) = thread.join() {
                tracing::warn!(error = %e, "name server thread ended badly");
            }
        }
        // The exporter polls the same flag.
        if let Some(exporter) = self.exporter.take() {
            exporter.join();
        }
        if let Some(controller) = self.controller.take() {
            controller.stop();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts a server on a new thread and returns once it listens (and, when enabled, once
/// its metrics endpoint does).
pub fn spawn(config: ServerConfig) -> Result<ServerHandle, ServerError> {
    config.validate()?;
    let controller = config.controller.as_ref().map(crate::controller::start).transpose().map_err(ServerError::Controller)?;
    let acl = open_acl(&config)?;
    let tls = ServerTlsReloader::start(&config.tls)?;
    let listener = bind(config.listen)?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    let stop = Arc::new(AtomicBool::new(false));
    let metrics = start_metrics(&config, local_addr.to_string(), &stop)?;
    let (slot, exporter) = match metrics {
        Some(m) => (Some(m.slot), Some(m.exporter)),
        None => (None, None),
    };
    // Stops the exporter again when the executor does not start.
    let abort = |exporter: Option<Exporter>, e: ServerError| {
        stop.store(true, Ordering::SeqCst);
        if let Some(x) = exporter {
            x.join();
        }
        e
    };
    let (tx, rx) = mpsc::channel::<()>();
    let stop_flag = stop.clone();
    let thread = LocalExecutorBuilder::new(Placement::Unbound).name("namesrv").spawn(move || async move {
        let listener = into_glommio(listener);
        let _ = tx.send(());
        serve(listener, config, acl, stop_flag, slot, tls).await;
    });
    let thread = match thread {
        Ok(t) => t,
        Err(e) => return Err(abort(exporter, ServerError::Executor(e.into()))),
    };
    if rx.recv().is_err() {
        return Err(abort(exporter, ServerError::StartAborted));
    }
    Ok(ServerHandle { local_addr, stop, thread: Some(thread), exporter, controller })
}

/// Binds without SO_REUSEPORT, on the caller's thread (so a port in use is reported
/// before anything starts).
fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServerError> {
    std::net::TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })
}

/// Hands a bound listener to glommio; must run on a glommio executor.
fn into_glommio(listener: std::net::TcpListener) -> TcpListener {
    // SAFETY: the descriptor is a bound, listening TCP socket that we own; ownership
    // moves to the glommio listener, which closes it.
    unsafe { TcpListener::from_raw_fd(listener.into_raw_fd()) }
}

/// The TLS configuration loaded at start and the reloader that follows its files.
type TlsStart = Option<(Arc<ringmq_client::net::tls::rustls::ServerConfig>, ServerTlsReloader)>;

async fn serve(listener: TcpListener, config: ServerConfig, acl: Option<NamesrvAcl>, stop: Arc<AtomicBool>, slot: Option<Arc<Slot<Snapshot>>>, tls: TlsStart) {
    let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::info!(
        addr = %local,
        broker_expiry_ms = config.broker_expiry_ms,
        scan_interval_ms = config.scan_interval_ms,
        "ringmq-namesrv listening on {local}"
    );
    let shared = Rc::new(Shared {
        rim: RefCell::new(RouteInfoManager::new(config.broker_expiry_ms, config.route_limits)),
        metrics: RefCell::new(NamesrvMetrics::default()),
        config,
        connections: Cell::new(0),
        acl,
        started: Instant::now(),
    });
    glommio::spawn_local(scan_loop(Rc::downgrade(&shared))).detach();
    if shared.acl.is_some() {
        glommio::spawn_local(acl_reload_loop(Rc::downgrade(&shared))).detach();
    }
    let edge = match tls {
        None => None,
        Some((tls_config, reloader)) => {
            let edge = Rc::new(ServerEdge::new("namesrv", shared.config.tls.mode, Some(tls_config)));
            glommio::spawn_local(reload_loop(Rc::downgrade(&edge), reloader)).detach();
            tracing::info!(mode = shared.config.tls.mode.as_str(), need_client_auth = shared.config.tls.need_client_auth.as_str(), "TLS on the name server port");
            Some(edge)
        }
    };
    if let Some(slot) = slot {
        glommio::spawn_local(publish_loop(Rc::downgrade(&shared), slot, edge.as_ref().map(Rc::downgrade))).detach();
    }
    loop {
        let accepted = listener.accept().await;
        if stop.load(Ordering::SeqCst) {
            tracing::info!(addr = %local, "name server stopping");
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
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let open = shared.connections.get();
        if open >= shared.config.connections_max {
            tracing::warn!(peer, connections_max = shared.config.connections_max, "too many connections; closing");
            shared.metrics.borrow_mut().on_connection_refused();
            continue;
        }
        shared.connections.set(open + 1);
        let conn_shared = shared.clone();
        let edge = edge.clone();
        glommio::spawn_local(async move {
            match serve_connection(stream, &conn_shared, &peer, edge.as_deref()).await {
                Ok(()) => tracing::debug!(peer, "connection closed"),
                Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::TimedOut => {
                    tracing::debug!(peer, "connection timed out; closed")
                }
                Err(e @ (ConnError::Malformed(_) | ConnError::Encode(_))) => {
                    tracing::warn!(peer, error = %e, "closing connection")
                }
                Err(e) => tracing::debug!(peer, error = %e, "connection ended"),
            }
            conn_shared.connections.set(conn_shared.connections.get().saturating_sub(1));
        })
        .detach();
    }
}

async fn scan_loop(shared: Weak<Shared>) {
    loop {
        let Some(interval_ms) = shared.upgrade().map(|s| s.config.scan_interval_ms) else { return };
        glommio::timer::sleep(Duration::from_millis(interval_ms)).await;
        let Some(s) = shared.upgrade() else { return };
        let expired = s.rim.borrow_mut().scan_expired(s.now_ms());
        s.metrics.borrow_mut().on_expired(expired.len());
        for e in expired {
            tracing::warn!(
                addr = e.addr,
                broker_name = e.broker_name,
                broker_id = e.broker_id,
                cluster = e.cluster_name,
                silent_ms = s.now_ms().saturating_sub(e.last_update_ms),
                "broker expired"
            );
        }
    }
}

/// Looks at the ACL file every `ACL_RELOAD_INTERVAL_MS` until the server ends.
async fn acl_reload_loop(shared: Weak<Shared>) {
    loop {
        glommio::timer::sleep(Duration::from_millis(ACL_RELOAD_INTERVAL_MS)).await;
        let Some(s) = shared.upgrade() else { return };
        if let Some(acl) = &s.acl {
            acl.reload();
        }
    }
}

/// Publishes a metrics snapshot now and every `metrics_publish_interval_ms` until the
/// server ends. Copying the counters costs a few kilobytes per interval (the maps are
/// bounded, see `metrics`); no borrow is held across the sleep.
async fn publish_loop(shared: Weak<Shared>, slot: Arc<Slot<Snapshot>>, edge: Option<Weak<ServerEdge>>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let mut snapshot = s.metrics.borrow().snapshot(&s.rim.borrow(), s.connections.get());
        if let Some(acl) = &s.acl {
            snapshot.counters.acl_refusals = acl.refusals.get();
            snapshot.counters.acl_file_loads = acl.file_loads.get();
            snapshot.counters.acl_file_load_failures = acl.file_load_failures.get();
        }
        // The TLS edge counts its refusals (`ringmq_namesrv_tls_*`).
        if let Some(edge) = edge.as_ref().and_then(Weak::upgrade) {
            snapshot.tls_handshake_failures = edge.handshake_failures();
            snapshot.tls_plain_refusals = edge.plain_refusals();
        }
        // Skipped if the exporter is reading the slot right now; the next round catches up.
        slot.publish(snapshot);
        let interval_ms = s.config.metrics_publish_interval_ms;
        drop(s);
        glommio::timer::sleep(Duration::from_millis(interval_ms)).await;
    }
}

/// Answers one request and counts it (code, answer, handling time, brokers removed).
/// `peer` (the client's address) is logged with the requests that change state.
fn handle(shared: &Shared, req: &RemotingCommand, peer: &str) -> RemotingCommand {
    let started = Instant::now();
    if let Some(refusal) = shared.acl.as_ref().and_then(|acl| acl.refusal(req, peer)) {
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        shared.metrics.borrow_mut().on_request(req.code, refusal.code, us, 0);
        return refusal;
    }
    let mut rim = shared.rim.borrow_mut();
    let live_before = rim.live_broker_count();
    let resp = process(&mut rim, req, shared.now_ms(), peer);
    let removed = if req.code == request_code::UNREGISTER_BROKER {
        live_before.saturating_sub(rim.live_broker_count())
    } else {
        0
    };
    drop(rim);
    let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.metrics.borrow_mut().on_request(req.code, resp.code, us, removed);
    resp
}

/// Reloads changed certificate files every `TLS_RELOAD_INTERVAL_MS` (reading them on the
/// blocking pool) until the server is gone.
async fn reload_loop(edge: Weak<ServerEdge>, mut reloader: ServerTlsReloader) {
    loop {
        glommio::timer::sleep(Duration::from_millis(TLS_RELOAD_INTERVAL_MS)).await;
        if edge.upgrade().is_none() {
            return;
        }
        let (polled, back) = glommio::executor()
            .spawn_blocking(move || {
                let polled = reloader.poll();
                (polled, reloader)
            })
            .await;
        reloader = back;
        let Some(edge) = edge.upgrade() else { return };
        match polled {
            Reload::Unchanged => {}
            Reload::Reloaded(config) => {
                edge.install(config);
                tracing::info!("TLS certificate files changed: new connections get the new certificate");
            }
            Reload::Failed(e) => tracing::warn!(error = %e, "TLS certificate files changed but do not load: keeping the certificate in force"),
        }
    }
}

async fn serve_connection(stream: TcpStream, shared: &Shared, peer: &str, edge: Option<&ServerEdge>) -> Result<(), ConnError> {
    let config = &shared.config;
    // On the socket, so they bound the TLS handshake and every TLS read and write too.
    stream.set_read_timeout(Some(Duration::from_millis(config.connection_idle_timeout_ms))).map_err(io::Error::from)?;
    stream.set_write_timeout(Some(Duration::from_millis(config.write_timeout_ms))).map_err(io::Error::from)?;
    stream.set_nodelay(true).map_err(io::Error::from)?;
    match edge {
        None => serve_stream(stream, shared, peer).await,
        Some(edge) => match edge.accept(stream, peer.parse().ok()).await {
            Some(stream) => serve_stream(stream, shared, peer).await,
            // Refused (counted and logged by the edge) or gone before a byte.
            None => Ok(()),
        },
    }
}

async fn serve_stream<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, shared: &Shared, peer: &str) -> Result<(), ConnError> {
    let config = &shared.config;
    let mut chunk = vec![0u8; config.read_chunk_bytes];
    let mut input = BytesMut::new();
    let mut out = BytesMut::new();
    loop {
        loop {
            let req = match RemotingCommand::decode(&mut input, &config.frame_limits) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    shared.metrics.borrow_mut().on_bad_frame();
                    if !out.is_empty() {
                        // Best effort: the peer is about to lose the connection anyway.
                        let _ = stream.write_all(&out).await;
                    }
                    return Err(ConnError::Malformed(e));
                }
            };
            if req.is_response() {
                tracing::debug!(opaque = req.opaque, code = req.code, "ignoring a response sent to the name server");
                continue;
            }
            let resp = handle(shared, &req, peer);
            if req.is_oneway() {
                continue;
            }
            encode_response(&req, &resp, &mut out)?;
            if out.len() >= config.write_queue_bytes_max {
                flush(&mut stream, &mut out, config.write_queue_bytes_max).await?;
            }
        }
        flush(&mut stream, &mut out, config.write_queue_bytes_max).await?;
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        input.extend_from_slice(&chunk[..n]);
    }
}

/// Appends `resp`; one too large for a frame is answered SYSTEM_ERROR instead.
fn encode_response(req: &RemotingCommand, resp: &RemotingCommand, out: &mut BytesMut) -> Result<(), ConnError> {
    if let Err(e) = resp.encode(out) {
        tracing::warn!(code = req.code, error = %e, "cannot encode a response");
        let fallback = req.create_response(response_code::SYSTEM_ERROR, Some(&e.to_string()));
        fallback.encode(out).map_err(ConnError::Encode)?;
    }
    Ok(())
}

/// Writes the queued responses; gives back memory a large response made the queue take.
async fn flush<S: AsyncWrite + Unpin>(stream: &mut S, out: &mut BytesMut, write_queue_bytes_max: usize) -> Result<(), ConnError> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    // Over TLS: out of the session's buffer onto the socket (a no-op on a plain one).
    stream.flush().await?;
    out.clear();
    if out.capacity() > 2 * write_queue_bytes_max {
        *out = BytesMut::new();
    }
    Ok(())
}
