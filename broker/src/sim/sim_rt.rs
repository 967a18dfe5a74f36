//! The simulator's implementation of the runtime seam: [`SimRt`] runs a shard on the
//! [`SimExecutor`], its store on the SimDisk with simulated IO latency
//! ([`SimIoDisk`]), its wall clock on simulated time ([`SimClock`], which a test may
//! jump), and its mesh over bounded in-memory channels ([`SimLink`]).
//!
//! Invariant: every IO takes simulated time drawn from the run's PRNG (0 to
//! `IO_LATENCY_MAX_US`), so requests interleave with each other's IO as on a real
//! device; every IO is counted against the running task's per-poll bound.

use super::executor::SimExecutor;
use crate::rt::chan;
use crate::rt::{MeshLink, Runtime};
use crate::shard::mesh::{Batch, MESH_CHANNEL_BATCHES_MAX};
use crate::store::io::sim::{SimBuf, SimDisk, SimFileHandle};
use crate::store::io::{Clock, Disk, DiskFile, DiskSpace, IoError};
use std::cell::Cell;
use std::future::Future;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// Longest simulated latency of one IO.
pub const IO_LATENCY_MAX_US: u64 = 400;

/// Wall-clock time on the simulator: the epoch plus simulated time plus any jumps.
#[derive(Clone)]
pub struct SimClock {
    ex: SimExecutor,
    jump_ms: Rc<Cell<i64>>,
}

impl SimClock {
    /// Moves the wall clock (not monotonic time) by `delta_ms`, as NTP might.
    pub fn jump_ms(&self, delta_ms: i64) {
        self.jump_ms.set(self.jump_ms.get() + delta_ms);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        super::executor::SIM_EPOCH_MS + (self.ex.now_us() / 1000) as i64 + self.jump_ms.get()
    }
    /// The simulator runs in UTC: a run must not depend on the host's time zone.
    fn utc_offset_ms(&self, _at_ms: i64) -> i64 {
        0
    }
}

/// The SimDisk with simulated latency on every operation.
#[derive(Clone)]
pub struct SimIoDisk {
    ex: SimExecutor,
    inner: SimDisk,
}

impl SimIoDisk {
    pub fn new(ex: SimExecutor, inner: SimDisk) -> Self {
        Self { ex, inner }
    }
    pub fn inner(&self) -> &SimDisk {
        &self.inner
    }
}

async fn latency(ex: &SimExecutor) {
    ex.note_io();
    // Half the operations complete at once (a cache hit, a fast device), half later.
    if ex.chance(500_000) {
        let us = ex.random(1..IO_LATENCY_MAX_US + 1);
        ex.sleep(Duration::from_micros(us)).await;
    }
}

pub struct SimIoFile {
    ex: SimExecutor,
    inner: SimFileHandle,
}

impl Disk for SimIoDisk {
    type File = SimIoFile;

    async fn open(&self, path: &Path, create: bool) -> Result<SimIoFile, IoError> {
        latency(&self.ex).await;
        Ok(SimIoFile { ex: self.ex.clone(), inner: self.inner.open(path, create).await? })
    }
    async fn open_write_through(&self, path: &Path, create: bool) -> Result<SimIoFile, IoError> {
        latency(&self.ex).await;
        Ok(SimIoFile { ex: self.ex.clone(), inner: self.inner.open_write_through(path, create).await? })
    }
    async fn list(&self, dir: &Path) -> Result<Vec<String>, IoError> {
        latency(&self.ex).await;
        self.inner.list(dir).await
    }
    async fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.create_dir_all(dir).await
    }
    async fn remove(&self, path: &Path) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.remove(path).await
    }
    async fn exists(&self, path: &Path) -> Result<bool, IoError> {
        latency(&self.ex).await;
        self.inner.exists(path).await
    }
    async fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.sync_dir(dir).await
    }
    async fn space(&self, path: &Path) -> Result<DiskSpace, IoError> {
        self.inner.space(path).await
    }
}

impl DiskFile for SimIoFile {
    type Buf = SimBuf;

    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn write_through(&self) -> bool {
        self.inner.write_through()
    }
    fn alloc_buf(&self, len: usize) -> SimBuf {
        self.inner.alloc_buf(len)
    }
    fn alloc_buf_unzeroed(&self, len: usize) -> SimBuf {
        self.inner.alloc_buf_unzeroed(len)
    }
    async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>, IoError> {
        latency(&self.ex).await;
        self.inner.read_at(pos, len).await
    }
    async fn write_at(&self, pos: u64, buf: SimBuf) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.write_at(pos, buf).await
    }
    async fn write_zeros(&self, pos: u64, len: u64) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.write_zeros(pos, len).await
    }
    async fn allocate(&self, len: u64) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.allocate(len).await
    }
    async fn sync(&self) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.sync().await
    }
    async fn truncate(&self, len: u64) -> Result<(), IoError> {
        latency(&self.ex).await;
        self.inner.truncate(len).await
    }
    async fn size(&self) -> Result<u64, IoError> {
        self.inner.size().await
    }
}

/// One shard's end of the simulated mesh: bounded channels to every other shard.
pub struct SimLink<M> {
    me: usize,
    to: Vec<Option<chan::Sender<M>>>,
}

impl<M: 'static> MeshLink<M> for SimLink<M> {
    fn peer_id(&self) -> usize {
        self.me
    }
    fn peer_count(&self) -> usize {
        self.to.len()
    }
    async fn send_to(&self, to: usize, msg: M) -> Result<(), ()> {
        match &self.to[to] {
            Some(tx) => tx.send(msg).await.map_err(|_| ()),
            None => Err(()),
        }
    }
}

/// A full mesh of `n` shards: each shard's link, and each shard's receivers as
/// `(from_peer, receiver)`.
pub fn sim_mesh(n: usize) -> (Vec<SimLink<Batch>>, Vec<Vec<(usize, chan::Receiver<Batch>)>>) {
    let mut links: Vec<SimLink<Batch>> = (0..n).map(|me| SimLink { me, to: (0..n).map(|_| None).collect() }).collect();
    let mut receivers: Vec<Vec<(usize, chan::Receiver<Batch>)>> = (0..n).map(|_| Vec::new()).collect();
    for from in 0..n {
        for to in 0..n {
            if from != to {
                let (tx, rx) = chan::bounded(MESH_CHANNEL_BATCHES_MAX);
                links[from].to[to] = Some(tx);
                receivers[to].push((from, rx));
            }
        }
    }
    (links, receivers)
}

/// The runtime of one simulated shard.
#[derive(Clone)]
pub struct SimRt {
    pub ex: SimExecutor,
    pub disk: SimIoDisk,
    pub clock: SimClock,
}

impl SimRt {
    pub fn new(ex: SimExecutor, disk: SimDisk, clock_jump_ms: Rc<Cell<i64>>) -> Self {
        Self { disk: SimIoDisk::new(ex.clone(), disk), clock: SimClock { ex: ex.clone(), jump_ms: clock_jump_ms }, ex }
    }
}

impl Runtime for SimRt {
    type Disk = SimIoDisk;
    type Clock = SimClock;
    type Link<M: Send + 'static> = SimLink<M>;

    fn disk(&self) -> SimIoDisk {
        self.disk.clone()
    }
    fn clock(&self) -> SimClock {
        self.clock.clone()
    }
    fn spawn(&self, fut: impl Future<Output = ()> + 'static) {
        self.ex.spawn_in(None, fut);
    }
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static {
        self.ex.sleep(duration)
    }
    fn monotonic_us(&self) -> u64 {
        self.ex.note_clock_read();
        self.ex.now_us()
    }
    fn call_remote(&self, addr: &str, _cmd: ringmq_client::remoting::command::RemotingCommand, _timeout: Duration) -> impl Future<Output = Result<ringmq_client::remoting::command::RemotingCommand, String>> + 'static {
        // A simulated shard reaches nothing outside the simulation: refused, not faked.
        let refusal = format!("{addr}: the simulator has no servers outside the broker");
        async move { Err(refusal) }
    }
    fn conf_file_stamp(&self, path: &std::path::Path) -> impl Future<Output = Result<Option<crate::rt::ConfStamp>, String>> + 'static {
        // Nothing outside the SimDisk exists in a simulation: refused, not faked.
        let refusal = format!("{}: the simulator has no configuration files", path.display());
        async move { Err(refusal) }
    }
    fn read_conf_file(&self, path: &std::path::Path, _max_bytes: u64) -> impl Future<Output = Result<(crate::rt::ConfStamp, Vec<u8>), String>> + 'static {
        let refusal = format!("{}: the simulator has no configuration files", path.display());
        async move { Err(refusal) }
    }
}
