//! Test-visible counters of user-space copies of message bytes on the send path, one
//! per place a body is copied (`Site`), so a test can assert how many copies of a body
//! a SEND_MESSAGE_V2 costs (`broker/tests/send_allocs.rs`) and a new copy shows up.
//!
//! Counted in bytes: a test divides a site's bytes by what that site copies per message
//! (frame bytes on the socket side, record bytes on the store side).
//!
//! Invariant: off unless a test calls `enable`; while off, `record` is one relaxed load
//! of a flag that is never written, so shard cores never share a written cache line
//! through it (thread-per-core). On, the counters are process-wide atomics: tests run
//! one shard.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A place on the send path where message bytes are copied in user space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// Received bytes copied within the connection's frame buffer (`net/conn.rs`): the
    /// socket reads straight into the buffer, so only the start of a frame still
    /// arriving is moved when the buffer is renewed.
    NetRead = 0,
    /// A record encoded into a scratch buffer before it reaches the CommitLog's tail.
    RecordScratch = 1,
    /// A record's bytes written into the CommitLog's tail (`store/engine/write.rs` `put`).
    TailAppend = 2,
    /// Tail bytes copied into the DMA write buffers of a CommitLog flush.
    FlushStage = 3,
}

pub const SITES: [Site; 4] = [Site::NetRead, Site::RecordScratch, Site::TailAppend, Site::FlushStage];

static ENABLED: AtomicBool = AtomicBool::new(false);
static BYTES: [AtomicU64; SITES.len()] = [const { AtomicU64::new(0) }; SITES.len()];

/// Counts `bytes` copied at `site` (a no-op unless enabled).
#[inline]
pub fn record(site: Site, bytes: usize) {
    if ENABLED.load(Ordering::Relaxed) {
        BYTES[site as usize].fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Starts counting, for the rest of the process.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Bytes copied so far at each site, indexed by `Site as usize`.
pub fn snapshot() -> [u64; SITES.len()] {
    std::array::from_fn(|i| BYTES[i].load(Ordering::Relaxed))
}
