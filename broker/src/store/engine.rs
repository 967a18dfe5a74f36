//! `Store`: one shard's storage engine — CommitLog, ConsumeQueues, IndexFile,
//! checkpoint — behind one owner.
//!
//! Appends (`put`) do no IO and never await: they encode the record into the
//! CommitLog's in-memory tail and add its ConsumeQueue and index entries. IO happens in
//! `flush` (group commit of the CommitLog), `flush_logics` (ConsumeQueues, index,
//! checkpoint), `prepare_next_segment`, reads, and retention. A driver (`flusher.rs` in
//! production, the test itself in simulation) decides when to call them.
//!
//! Architecture Invariant: a `put` acknowledged under sync flush (its `wait_durable`
//! resolved `Ok`) survives any crash: its bytes were written and fdatasynced.
//! Architecture Invariant: after an IO error on a write or sync the store is failed:
//! every later call returns `StoreError::Failed` and every waiter wakes with an error
//! (fsyncgate). A failed *read* (`get_messages`, `read_record`, `query_by_key`, the
//! time searches, ConsumeQueue reads, retention's lookups) is `StoreError::Read`
//! naming the file and offset: the store is not failed, the error is counted in
//! `StoreStats::read_errors`, and every other read and append goes on.
//! Architecture Invariant: `Inner` is borrowed only between awaits, never across one.
//!
//! This file holds what every concern shares (`Store`, `Inner`, failure, the index
//! hand-off, small accessors); each concern is an `impl Store` block of its own:
//! `write.rs` (put), `replica.rs` (a slave's appends and reads, re-seeding), `flush.rs`
//! (group commit, logics flush, checkpoint, the flusher's futures), `retention.rs`
//! (segment deletion, `delete_topic`), `read.rs` (pulls, read-ahead, prefetch),
//! `search.rs` (by offset, time or key), `watermark.rs` (disk usage), `open.rs`
//! (recovery) and `scrub.rs`. Their items are re-exported here: paths stay
//! `store::engine::*`.

use super::config::StoreConfig;
use super::consumequeue::{ConsumeQueue, CqEntry};
use super::error::StoreError;
use super::index::IndexService;
use super::io::{Clock, Disk};
use super::segmented::SegmentedLog;
use ringmq_client::hash::tag_hash_code;
use ringmq_client::message::properties::{self, keys};
use std::cell::RefCell;
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::task::Waker;

mod flush;
pub(crate) mod open;
mod read;
mod replica;
mod retention;
pub(crate) mod scrub;
mod search;
mod truncate;
mod watermark;
mod write;

pub use flush::{DurableWait, FlushWanted, LogicsWanted, LOGICS_FLUSHES_IN_FLIGHT_MAX};
pub use open::{open_store, RecoveryReport};
pub use read::{GetResult, GetStatus, CQ_PULL_BLOCKS_MAX, GET_MESSAGES_MAX, READ_AHEAD_PREFETCH_MAX, READ_AHEAD_WINDOW_BYTES, READ_SPAN_BYTES_MAX};
pub use replica::{AppendWait, ReplicatedAppend};
pub use retention::{clean_trigger, CleanTrigger};
pub use scrub::{ScrubFinding, ScrubStep};
pub use truncate::TRUNCATE_MARKER;
pub use write::{MessageToStore, PutResult};

/// Physical offsets carry the shard id in their top bits (DESIGN.md §3), so an
/// offsetMsgId routes to its shard with no table. 56 bits leave 64 PiB per shard.
pub const SHARD_SHIFT: u32 = 56;
pub const SHARD_COUNT_MAX: u16 = 128;
pub const LOCAL_MASK: u64 = (1 << SHARD_SHIFT) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub u16);

impl ShardId {
    pub fn phys(self, local: u64) -> u64 {
        debug_assert!(local <= LOCAL_MASK);
        ((self.0 as u64) << SHARD_SHIFT) | local
    }
    pub fn of_phys(phys: u64) -> ShardId {
        ShardId((phys >> SHARD_SHIFT) as u16)
    }
}

pub fn local_of(phys: u64) -> u64 {
    phys & LOCAL_MASK
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub flushes: u64,
    pub flushed_bytes: u64,
    pub records_put: u64,
    /// Reads the device failed (each answered with `StoreError::Read`).
    pub read_errors: u64,
    /// Group commit latency (`flush`: writes + fdatasync), as the flusher measured it.
    pub flush_latency: crate::metrics::Buckets,
    /// Used fraction of the store's filesystem at the last `check_disk` (per mille).
    pub disk_used_permille: u64,
    /// CommitLog bytes the background scrub re-read and checked.
    pub scrubbed_bytes: u64,
    /// Corrupt records the scrub found (each logged with file and offset).
    pub scrub_corrupt_records: u64,
    /// Times usage rose past `disk_max_used_ratio` or the refuse watermark (each
    /// crossing logged once, with its end).
    pub disk_watermark_crossings: u64,
}

type QueueKey = (String, i32);

/// The queues of a shard. A fixed hasher, so iteration order (the order ConsumeQueues
/// are flushed and recovered in) is the same in every run: a simulated run replays
/// exactly. Keys are topic names the broker accepted, not attacker-chosen at will.
pub(crate) type QueueMap<D> = HashMap<QueueKey, ConsumeQueue<D>, foldhash::fast::FixedState>;

/// Index keys held while the index service is out for a flush or query (about 100
/// bytes each): past this `put` answers `IndexBusy` and the producer retries.
pub const INDEX_PENDING_KEYS_MAX: usize = 262_144;

struct Inner<D: Disk> {
    commitlog: SegmentedLog<D>,
    queues: QueueMap<D>,
    /// Taken out while a flush or query of the index is in flight; puts made meanwhile
    /// wait in `index_pending` (at most `INDEX_PENDING_KEYS_MAX` keys plus one message's:
    /// past that `put` answers `Busy`), and tasks that need the index wait in
    /// `index_waiters` until it is returned.
    index: Option<IndexService<D>>,
    /// (key hash, physical offset, store time).
    index_pending: Vec<(i32, u64, i64)>,
    index_waiters: Vec<std::task::Waker>,
    scratch: Vec<u8>,
    failed: Option<String>,
    /// Appends refused because the disk passed its refuse watermark or ran out.
    disk_full: Option<(u32, u32)>,
    /// Usage is past `disk_max_used_ratio` (logged when it starts and when it ends).
    disk_above_max_used: bool,
    /// The settings a running broker changed (`set_runtime_config`: retention,
    /// watermarks, flush interval); `None`: the store's own configuration.
    runtime_config: Option<Rc<StoreConfig>>,
    /// The flush interval changed: the flusher wakes to sleep the new one.
    flush_interval_changed: bool,
    waiters: BTreeMap<u64, Vec<Waker>>,
    checkpoint_sequence: u64,
    checkpoint_file: Option<Rc<D::File>>,
    logics_flushing: bool,
    /// The logics flusher waiting for its interval; woken early when the checkpoint
    /// falls half of `checkpoint_lag_bytes_max` behind the durable log.
    logics_waker: Option<Waker>,
    stats: StoreStats,
    /// The flusher waiting for work (woken by `put`).
    flusher_waker: Option<Waker>,
    /// Tasks waiting for the log to grow (replication senders; a handful per shard).
    pub(crate) append_wakers: Vec<Waker>,
    /// Someone needs the log durable now (a SYNC_MASTER send): the flusher flushes
    /// whatever is dirty without waiting for its interval or `flush_min_bytes`.
    pub(crate) flush_requested: bool,
    /// Records appended over the store's life (= the sum of the queues' max offsets).
    records_appended: u64,
    /// Records below the CommitLog's durable end.
    records_flushed: u64,
    /// Cold CommitLog windows (`READ_AHEAD_WINDOW_BYTES` each, oldest first, at most
    /// `StoreConfig::read_ahead_windows_max`); emptied whenever the log's start moves.
    read_ahead: std::collections::VecDeque<(u64, Rc<Vec<u8>>)>,
    /// Windows being read now (their starts): a second reader of one waits for it
    /// instead of reading it again (8 queues tailing one log want the same window at
    /// once). At most one per pull in progress plus `READ_AHEAD_PREFETCH_MAX`.
    read_ahead_loading: Vec<u64>,
    /// Readers waiting for a window in `read_ahead_loading`.
    read_ahead_waiters: Vec<Waker>,
    /// Prefetches in progress (`prefetch_window`).
    read_ahead_prefetching: usize,
    /// ConsumeQueue blocks pulls read lately (queue, first offset, entries), oldest
    /// first, at most `CQ_PULL_BLOCKS_MAX`: a pull reads 4x the entries it takes (so a
    /// filter finds matches), and the queue's next pulls take the rest from here rather
    /// than reading them again from disk in their latency path (measured on W3's catch-up:
    /// ~1.3 ms per pull waiting for its entries). Entries below a queue's end never
    /// change; a deleted topic's blocks are dropped with it.
    cq_pull_blocks: std::collections::VecDeque<(QueueKey, u64, Rc<Vec<CqEntry>>)>,
    /// Where the background scrub goes on (local CommitLog position).
    scrub_pos: u64,
    /// `logics_phys` of the last checkpoint written: retention never deletes past it.
    checkpoint_logics_phys: u64,
    /// Queues of deleted topics whose files the next logics flush removes, after its
    /// checkpoint (which no longer counts their entries) is durable.
    queues_deleted: Vec<ConsumeQueue<D>>,
    /// Where the log begins (local): 0, the end of the last segment retention deleted,
    /// or where a re-seeded replica began. Not the first file: the segment holding the
    /// start may not be created yet (its bytes still only in the tail) while the next
    /// one is already pre-allocated.
    commitlog_start: u64,
    /// (local position, store time) of the record at `commitlog_start` — runtime info's
    /// `earliestMessageTimeStamp` without a disk read per request. Set where that record
    /// comes to be known: an append at the log's start (put or replica), retention moving
    /// the start (it reads the new first record anyway), open. Trusted only while its
    /// position is `commitlog_start` (`earliest_message_time`).
    earliest_record: Option<(u64, i64)>,
}

fn commitlog_of<D: Disk>(inner: &mut Inner<D>) -> &mut SegmentedLog<D> {
    &mut inner.commitlog
}

/// One shard's store. Clones share the same state (one owner: the shard).
pub struct Store<D: Disk, C: Clock> {
    inner: Rc<RefCell<Inner<D>>>,
    disk: D,
    clock: C,
    config: Rc<StoreConfig>,
    shard: ShardId,
    dir: PathBuf,
}

impl<D: Disk, C: Clock> Clone for Store<D, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            disk: self.disk.clone(),
            clock: self.clock.clone(),
            config: self.config.clone(),
            shard: self.shard,
            dir: self.dir.clone(),
        }
    }
}

fn tag_hash_of(props: &str) -> i64 {
    properties::find(props, keys::TAGS).map(tag_hash_code).unwrap_or(0)
}

/// `topic#key` for UNIQ_KEY and for each KEYS token.
/// The index hashes of a record's keys (`topic#UNIQ_KEY` and `topic#<word>` for each
/// word of `KEYS`), computed without building the joined strings.
fn index_keys<'a>(topic: &str, props: &'a str) -> impl Iterator<Item = i32> + 'a {
    let prefix = super::index::topic_hash_prefix(topic);
    let uniq = properties::find(props, keys::UNIQ_KEY);
    let words = properties::find(props, keys::KEYS).unwrap_or("").split(' ').filter(|k| !k.is_empty());
    uniq.into_iter().chain(words).map(move |k| super::index::topic_key_hash(prefix, k))
}

impl<D: Disk, C: Clock> Store<D, C> {
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The configuration in force: the store's own, with the settings a running broker
    /// changed (`set_runtime_config`).
    pub fn runtime_config(&self) -> Rc<StoreConfig> {
        self.inner.borrow().runtime_config.clone().unwrap_or_else(|| self.config.clone())
    }

    /// UPDATE_BROKER_CONFIG: takes from `config` the settings a running store may change
    /// — retention and disk watermarks (`fileReservedTime`, `deleteWhen`, the disk
    /// ratios, `cleanFileForciblyEnable`, `deleteFileBatchMax`: the next retention pass
    /// and disk check use them) and `flush_interval_ms` (`flushIntervalCommitLog`: the
    /// flusher wakes now and sleeps the new interval). Every other field stays the
    /// store's own: the geometry and the record bound describe what is on disk.
    pub fn set_runtime_config(&self, config: &StoreConfig) {
        let mut next = (*self.config).clone();
        next.file_reserved_hours = config.file_reserved_hours;
        next.delete_when_hours = config.delete_when_hours.clone();
        next.disk_max_used_ratio = config.disk_max_used_ratio;
        next.disk_force_clean_ratio = config.disk_force_clean_ratio;
        next.disk_refuse_ratio = config.disk_refuse_ratio;
        next.clean_file_forcibly = config.clean_file_forcibly;
        next.delete_files_per_pass_max = config.delete_files_per_pass_max;
        next.flush_interval_ms = config.flush_interval_ms;
        let mut inner = self.inner.borrow_mut();
        let before = inner.runtime_config.as_ref().map_or(self.config.flush_interval_ms, |c| c.flush_interval_ms);
        if before != next.flush_interval_ms {
            inner.flush_interval_changed = true;
            if let Some(waker) = inner.flusher_waker.take() {
                waker.wake();
            }
        }
        inner.runtime_config = Some(Rc::new(next));
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> StoreStats {
        self.inner.borrow().stats
    }

    fn commitlog_dir(dir: &Path) -> PathBuf {
        dir.join("commitlog")
    }

    fn cq_dir(&self, topic: &str, queue_id: i32) -> PathBuf {
        self.dir.join("consumequeue").join(topic).join(queue_id.to_string())
    }

    /// Counts and logs a failed read on its way to the caller; other results pass.
    /// Every read path returns through here, so `read_errors` counts each once.
    fn note_read<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e @ StoreError::Read { .. }) = &result {
            self.inner.borrow_mut().stats.read_errors += 1;
            tracing::warn!(shard = self.shard.0, error = %e, "read failed; the store goes on serving other data");
        }
        result
    }

    fn check_alive(&self) -> Result<(), StoreError> {
        match &self.inner.borrow().failed {
            Some(reason) => Err(StoreError::Failed(reason.clone())),
            None => Ok(()),
        }
    }

    /// Marks the store failed and wakes every waiter (they will see the failure).
    fn fail(&self, err: &StoreError) {
        let mut inner = self.inner.borrow_mut();
        if inner.failed.is_none() {
            tracing::error!(shard = self.shard.0, error = %err, "store failed; it accepts nothing more");
            inner.failed = Some(err.to_string());
        }
        for (_, wakers) in std::mem::take(&mut inner.waiters) {
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    pub fn flushed_offset(&self) -> u64 {
        self.inner.borrow().commitlog.flushed_pos
    }

    /// Messages appended over the store's life: the sum of its queues' max offsets (a
    /// master and its replica count the same for the same log).
    pub fn messages_total(&self) -> u64 {
        self.inner.borrow().records_appended
    }

    pub fn write_offset(&self) -> u64 {
        self.inner.borrow().commitlog.write_pos
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.inner.borrow().commitlog.dirty_bytes()
    }

    pub fn is_flushing(&self) -> bool {
        self.inner.borrow().commitlog.flushing
    }

    pub fn has_waiters(&self) -> bool {
        !self.inner.borrow().waiters.is_empty()
    }

    pub fn failure(&self) -> Option<String> {
        self.inner.borrow().failed.clone()
    }

    /// Where this log begins (local offset): 0, or the start of its oldest segment once
    /// retention deleted older ones, or where a re-seeded replica began.
    pub fn log_start(&self) -> u64 {
        self.commitlog_min()
    }

    /// Store time of the log's first record (Java's `getEarliestMessageTime`, a message
    /// of any topic, system ones included); `None` when the log is empty, or when
    /// retention could not read the record now first (Java answers -1 then too).
    pub fn earliest_message_time(&self) -> Option<i64> {
        let inner = self.inner.borrow();
        let start = inner.commitlog_start;
        inner.earliest_record.filter(|&(at, _)| at == start && inner.commitlog.write_pos > start).map(|(_, ms)| ms)
    }

    fn commitlog_min(&self) -> u64 {
        self.inner.borrow().commitlog_start
    }

    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let inner = self.inner.borrow();
        let mut ids: Vec<i32> = inner.queues.keys().filter(|(t, _)| t == topic).map(|(_, q)| *q).collect();
        ids.sort_unstable();
        ids
    }

    /// Every (topic, queue id) that has a ConsumeQueue.
    pub fn queues(&self) -> Vec<(String, i32)> {
        let mut all: Vec<_> = self.inner.borrow().queues.keys().cloned().collect();
        all.sort();
        all
    }

    pub fn min_offset(&self, topic: &str, queue_id: i32) -> u64 {
        let inner = self.inner.borrow();
        inner.queues.get(&(topic.to_string(), queue_id)).map(|q| q.min_offset).unwrap_or(0)
    }

    pub fn max_offset(&self, topic: &str, queue_id: i32) -> u64 {
        let inner = self.inner.borrow();
        inner.queues.get(&(topic.to_string(), queue_id)).map(|q| q.max_offset()).unwrap_or(0)
    }

    /// Takes the index service out, waiting (registered, not spinning) while another
    /// task holds it.
    async fn take_index(&self) -> IndexService<D> {
        std::future::poll_fn(|cx| {
            let mut inner = self.inner.borrow_mut();
            match inner.index.take() {
                Some(index) => std::task::Poll::Ready(index),
                None => {
                    inner.index_waiters.push(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        })
        .await
    }

    fn return_index(&self, mut index: IndexService<D>) {
        let waiters = {
            let mut inner = self.inner.borrow_mut();
            for (hash, phys, ts) in inner.index_pending.drain(..) {
                index.put_hash(hash, phys, ts);
            }
            inner.index = Some(index);
            std::mem::take(&mut inner.index_waiters)
        };
        waiters.into_iter().for_each(std::task::Waker::wake);
    }
}
