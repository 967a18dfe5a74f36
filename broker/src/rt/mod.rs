//! The runtime seam of the request layer (DESIGN.md §2), as `store::io` is the disk's:
//! everything a shard, a connection or the mesh needs from an executor — spawning a
//! task, sleeping, monotonic time, the disk and wall clock its store uses, and the
//! link to the other shards — goes through [`Runtime`].
//!
//! Production is [`Glommio`] (pinned executors, DMA files, glommio's channel mesh).
//! Tests run the very same shard code on `crate::sim`'s deterministic single-threaded
//! scheduler with the SimDisk, a simulated clock and simulated timers.
//!
//! Architecture Invariant: nothing in `shard/`, `net/conn.rs`, `meta/` or
//! `store/flusher.rs` calls glommio (or `std::time::Instant`/`SystemTime`) directly;
//! only `launch.rs` (process start-up, sockets) and this module's [`Glommio`] do.

pub mod chan;

use crate::store::io::dma::DmaDisk;
use crate::store::io::{Clock, Disk, SystemClock};
use ringmq_client::net::tls::ClientTls;
use ringmq_client::net::Connection;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::future::Future;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// An executor and the IO a shard runs on. Clones share one runtime.
pub trait Runtime: Clone + 'static {
    type Disk: Disk;
    type Clock: Clock;
    /// One shard's end of the mesh carrying `M` (the shard's batches in the broker;
    /// generic so this seam knows nothing of what shards say to each other).
    type Link<M: Send + 'static>: MeshLink<M>;

    fn disk(&self) -> Self::Disk;
    /// Wall-clock time (store timestamps, retention, lock expiry).
    fn clock(&self) -> Self::Clock;
    /// Runs `fut` as a task of its own on this shard's executor, detached.
    fn spawn(&self, fut: impl Future<Output = ()> + 'static);
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static;
    /// Monotonic time in microseconds (deadlines, latencies); never goes back.
    fn monotonic_us(&self) -> u64;
    /// One request/response exchange with a server outside this process (a
    /// NameServer) on a fresh connection, all within `timeout`.
    fn call_remote(&self, addr: &str, cmd: RemotingCommand, timeout: Duration) -> impl Future<Output = Result<RemotingCommand, String>> + 'static;
    /// The stamp of a small configuration file outside the store (`plain_acl.yml`),
    /// `Ok(None)` when it does not exist: polled to see whether it changed.
    fn conf_file_stamp(&self, path: &Path) -> impl Future<Output = Result<Option<ConfStamp>, String>> + 'static;
    /// Such a file's stamp and bytes; more than `max_bytes` is an error (nothing read).
    fn read_conf_file(&self, path: &Path, max_bytes: u64) -> impl Future<Output = Result<(ConfStamp, Vec<u8>), String>> + 'static;
}

/// What says a configuration file changed: its length and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfStamp {
    pub len: u64,
    pub modified_ns: u128,
}

fn conf_stamp(path: &Path) -> Result<Option<ConfStamp>, String> {
    match std::fs::metadata(path) {
        Ok(m) => {
            let modified_ns = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            Ok(Some(ConfStamp { len: m.len(), modified_ns }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Reads a small file off the shard thread's hot path (blocking std IO on glommio's
/// blocking pool): a configuration file may live on any filesystem, where O_DIRECT (the
/// store's DMA files) may not be allowed.
fn read_conf(path: &Path, max_bytes: u64) -> Result<(ConfStamp, Vec<u8>), String> {
    use std::io::Read;
    let stamp = conf_stamp(path)?.ok_or_else(|| format!("{}: no such file", path.display()))?;
    if stamp.len > max_bytes {
        return Err(format!("{}: {} bytes, more than {max_bytes}", path.display(), stamp.len));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::with_capacity(stamp.len as usize);
    // One byte past the bound tells a file that grew since its stamp.
    file.take(max_bytes + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!("{}: more than {max_bytes} bytes", path.display()));
    }
    Ok((stamp, bytes))
}

/// One shard's end of the bounded channels to every other shard.
pub trait MeshLink<M>: 'static {
    /// This shard's id.
    fn peer_id(&self) -> usize;
    /// Shards in the mesh, this one included.
    fn peer_count(&self) -> usize;
    /// Sends one batch to shard `to`, waiting while its channel is full; `Err` when
    /// the peer is gone.
    fn send_to(&self, to: usize, msg: M) -> impl Future<Output = Result<(), ()>>;
}

/// The production runtime: the current thread's glommio executor, and the TLS of the
/// shard's own outgoing connections (`useTLS`; `None`: plain).
#[derive(Debug, Clone, Default)]
pub struct Glommio {
    outgoing_tls: Option<Rc<ClientTls>>,
}

impl Glommio {
    /// The runtime of a shard whose calls to NameServers go over `tls` when given.
    pub fn with_outgoing_tls(tls: Option<Rc<ClientTls>>) -> Self {
        Self { outgoing_tls: tls }
    }
}

fn process_start() -> std::time::Instant {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *START.get_or_init(std::time::Instant::now)
}

impl Runtime for Glommio {
    type Disk = DmaDisk;
    type Clock = SystemClock;
    type Link<M: Send + 'static> = glommio::channels::channel_mesh::Senders<M>;

    fn disk(&self) -> DmaDisk {
        DmaDisk
    }
    fn clock(&self) -> SystemClock {
        SystemClock
    }
    fn spawn(&self, fut: impl Future<Output = ()> + 'static) {
        glommio::spawn_local(fut).detach();
    }
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static {
        async move {
            glommio::timer::sleep(duration).await;
        }
    }
    fn monotonic_us(&self) -> u64 {
        process_start().elapsed().as_micros() as u64
    }
    fn call_remote(&self, addr: &str, cmd: RemotingCommand, timeout: Duration) -> impl Future<Output = Result<RemotingCommand, String>> + 'static {
        let addr = addr.to_string();
        let rt = self.clone();
        async move {
            let started_us = rt.monotonic_us();
            let conn = Connection::connect_with(&addr, timeout, SerializeType::Json, None, rt.outgoing_tls.as_deref()).await.map_err(|e| e.to_string())?;
            let spent = Duration::from_micros(rt.monotonic_us().saturating_sub(started_us));
            let answer = conn.request(cmd, timeout.saturating_sub(spent)).await.map_err(|e| e.to_string());
            conn.close();
            answer
        }
    }
    fn conf_file_stamp(&self, path: &Path) -> impl Future<Output = Result<Option<ConfStamp>, String>> + 'static {
        let path = path.to_path_buf();
        async move { glommio::executor().spawn_blocking(move || conf_stamp(&path)).await }
    }
    fn read_conf_file(&self, path: &Path, max_bytes: u64) -> impl Future<Output = Result<(ConfStamp, Vec<u8>), String>> + 'static {
        let path = path.to_path_buf();
        async move { glommio::executor().spawn_blocking(move || read_conf(&path, max_bytes)).await }
    }
}

impl<M: Send + 'static> MeshLink<M> for glommio::channels::channel_mesh::Senders<M> {
    fn peer_id(&self) -> usize {
        glommio::channels::channel_mesh::Senders::peer_id(self)
    }
    fn peer_count(&self) -> usize {
        self.nr_consumers()
    }
    async fn send_to(&self, to: usize, msg: M) -> Result<(), ()> {
        glommio::channels::channel_mesh::Senders::send_to(self, to, msg).await.map_err(|_| ())
    }
}

/// Every runtime drives a store's background tasks (`store::flusher`).
impl<R: Runtime> crate::store::flusher::StoreExecutor for R {
    fn spawn(&self, fut: impl Future<Output = ()> + 'static) {
        Runtime::spawn(self, fut)
    }
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static {
        Runtime::sleep(self, duration)
    }
    fn monotonic_us(&self) -> u64 {
        Runtime::monotonic_us(self)
    }
}

/// Resolves with `fut`'s output, or `None` once `duration` has passed.
pub async fn timeout<R: Runtime, T>(rt: &R, duration: Duration, fut: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        rt.sleep(duration).await;
        None
    })
    .await
}
