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

use super::checkpoint::Checkpoint;
use super::config::{FlushMode, StoreConfig};
use super::consumequeue::{ConsumeQueue, CqEntry, ENTRY_BYTES};
use super::error::StoreError;
use super::index::{IndexError, IndexService};
use super::io::{align_down, align_up, Clock, Disk, DiskFile, IoError, IoErrorKind, BLOCK_BYTES};
use super::segmented::{ensure_segment, flush_log, log_accessor, read_log, read_log_into, FlushDone, SegmentedLog};
use ringmq_client::hash::tag_hash_code;
use ringmq_client::message::properties::{self, keys, Properties};
use ringmq_client::message::stored::{encode_blank, encode_parts, record_head, RecordHead, StoredMessage, StoredMessageView, BLANK_LEN_MIN_BYTES};
use std::cell::RefCell;
use hashbrown::{Equivalent, HashMap};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

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

/// Most messages one `get_messages` returns.
pub const GET_MESSAGES_MAX: usize = 1024;
/// Bytes read from disk in one piece during a cold read or a recovery scan.
pub const READ_SPAN_BYTES_MAX: u64 = 1024 * 1024;

/// A message as handed to the store by a request handler.
#[derive(Debug, Clone)]
pub struct MessageToStore<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: &'a str,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

/// One record of a replicated batch, checked: (offset in the batch, length, for a
/// message its topic, queue id and queue offset).
type ReplicaPlanItem = (usize, usize, Option<(String, i32, u64)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicatedAppend {
    /// Message records appended (blanks not counted).
    pub records: u64,
    /// Bytes of the batch appended (a prefix of whole records).
    pub bytes_consumed: usize,
    /// The log's end after the append (physical offset).
    pub end_phys: u64,
    /// What to wait on for durability (`wait_durable`).
    pub durable_ticket: u64,
    /// Store time of the last message record appended (0 if none was).
    pub last_store_timestamp_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutResult {
    pub phys_offset: u64,
    pub queue_offset: u64,
    pub size_bytes: u32,
    pub store_timestamp_ms: i64,
    /// Pass to `wait_durable` (sync flush): the local CommitLog end of the record.
    pub durable_ticket: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetStatus {
    Found,
    NoMatchedMessage,
    NoMessageInQueue,
    OffsetTooSmall,
    OffsetOverflowOne,
    OffsetOverflowBadly,
    /// The entries point at CommitLog data deleted by retention.
    OffsetFoundNull,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResult {
    pub status: GetStatus,
    pub next_offset: u64,
    pub min_offset: u64,
    pub max_offset: u64,
    /// Stored records, back to back, exactly as in the CommitLog.
    pub records: Vec<u8>,
    pub record_count: usize,
    /// A cold read ended in this read-ahead window's predecessor: reading it now, in the
    /// background (`Store::prefetch_window`), overlaps the disk with the next pull.
    pub prefetch_window: Option<u64>,
}

/// What recovery did, for the start-up log line and for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub unclean: bool,
    pub checkpoint_found: bool,
    pub scanned_from: u64,
    pub end_offset: u64,
    pub records_scanned: u64,
    pub truncated_bytes: u64,
    pub rebuilt_queues: usize,
    pub index_replayed: bool,
    /// Wall-clock milliseconds of each phase of the open, in order (the log shows them).
    pub phases_ms: Vec<(&'static str, i64)>,
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
}

type QueueKey = (String, i32);

/// The queues of a shard. A fixed hasher, so iteration order (the order ConsumeQueues
/// are flushed and recovered in) is the same in every run: a simulated run replays
/// exactly. Keys are topic names the broker accepted, not attacker-chosen at will.
pub(crate) type QueueMap<D> = HashMap<QueueKey, ConsumeQueue<D>, foldhash::fast::FixedState>;

/// Index keys held while the index service is out for a flush or query (about 100
/// bytes each): past this `put` answers `IndexBusy` and the producer retries.
pub const INDEX_PENDING_KEYS_MAX: usize = 262_144;
/// CommitLog bytes one cold read fetches at once (aligned): a pull of one queue's
/// records, interleaved with the other queues', then finds the others' records in
/// memory too, and one large O_DIRECT read replaces many small ones (issue 15).
pub const READ_AHEAD_WINDOW_BYTES: u64 = 2 * 1024 * 1024;

/// ConsumeQueue write + sync pairs in flight at once during a logics flush.
pub const LOGICS_FLUSHES_IN_FLIGHT_MAX: usize = 64;

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
}

/// Most read-ahead windows read in the background at once per shard.
pub const READ_AHEAD_PREFETCH_MAX: usize = 2;
/// Most ConsumeQueue blocks kept for pulls per shard (`Inner::cq_pull_blocks`; a block is
/// at most 16 Ki entries, 24 B each decoded: 24 MiB at the very most, ~6 MiB for pulls
/// of 1 024).
pub const CQ_PULL_BLOCKS_MAX: usize = 64;

/// Marks a read-ahead window as being read; unmarks it and wakes its waiters when
/// dropped, also when the reading future is dropped half-way.
struct LoadingWindow<'a, D: Disk> {
    inner: &'a RefCell<Inner<D>>,
    start: u64,
}

impl<'a, D: Disk> LoadingWindow<'a, D> {
    fn mark(inner: &'a RefCell<Inner<D>>, start: u64) -> Self {
        inner.borrow_mut().read_ahead_loading.push(start);
        Self { inner, start }
    }
}

impl<D: Disk> Drop for LoadingWindow<'_, D> {
    fn drop(&mut self) {
        let mut inner = self.inner.borrow_mut();
        inner.read_ahead_loading.retain(|s| *s != self.start);
        for w in inner.read_ahead_waiters.drain(..) {
            w.wake();
        }
    }
}

/// Ready once the window at `start` is no longer being read.
struct WindowLoaded<'a, D: Disk> {
    inner: &'a RefCell<Inner<D>>,
    start: u64,
}

impl<D: Disk> Future for WindowLoaded<'_, D> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        if !inner.read_ahead_loading.contains(&self.start) {
            return Poll::Ready(());
        }
        if !inner.read_ahead_waiters.iter().any(|w| w.will_wake(cx.waker())) {
            inner.read_ahead_waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
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

/// Looks a queue up by borrowed topic: hashes exactly as `(String, i32)` does, so the
/// append path allocates no key.
#[derive(Hash)]
struct QueueRef<'a>(&'a str, i32);

impl Equivalent<QueueKey> for QueueRef<'_> {
    fn equivalent(&self, key: &QueueKey) -> bool {
        self.0 == key.0 && self.1 == key.1
    }
}

impl<D: Disk, C: Clock> Store<D, C> {
    pub fn shard(&self) -> ShardId {
        self.shard
    }
    pub fn config(&self) -> &StoreConfig {
        &self.config
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

    /// Appends a message. No IO: durable after a covering `flush` (see `wait_durable`).
    pub fn put(&self, msg: &MessageToStore<'_>) -> Result<PutResult, StoreError> {
        self.check_alive()?;
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        if let Some((used_percent, refuse_percent)) = inner.disk_full {
            return Err(StoreError::DiskFull { used_percent, refuse_percent });
        }
        if msg.topic.is_empty() || msg.topic.len() > ringmq_client::message::stored::TOPIC_LEN_MAX_BYTES {
            return Err(StoreError::Illegal(format!("topic length {} not in 1..=127", msg.topic.len())));
        }
        if msg.queue_id < 0 {
            return Err(StoreError::Illegal(format!("queue id {} is negative", msg.queue_id)));
        }
        if msg.properties.len() > i16::MAX as usize {
            return Err(StoreError::Illegal(format!("properties are {} bytes (max 32767)", msg.properties.len())));
        }
        if msg.properties.as_bytes().contains(&0) {
            // Recovery reads NUL in properties as a torn write (the body CRC does not
            // cover them).
            return Err(StoreError::Illegal("properties contain a NUL byte".into()));
        }
        let size = ringmq_client::message::stored::encoded_len(
            msg.topic.len(),
            msg.body.len(),
            msg.properties.len(),
            &msg.born_host,
            &msg.store_host,
        ) as u64;
        if size > self.config.record_bytes_max {
            return Err(StoreError::TooLarge { size_bytes: size, max_bytes: self.config.record_bytes_max });
        }
        let dirty = inner.commitlog.dirty_bytes();
        if dirty + size > self.config.dirty_bytes_max {
            return Err(StoreError::Busy { dirty_bytes: dirty, max_bytes: self.config.dirty_bytes_max });
        }
        let lag = inner.commitlog.write_pos.saturating_sub(inner.checkpoint_logics_phys);
        if lag + size > self.config.checkpoint_lag_bytes_max {
            if let Some(w) = inner.logics_waker.take() {
                w.wake();
            }
            return Err(StoreError::CheckpointBusy { lag_bytes: lag, max_bytes: self.config.checkpoint_lag_bytes_max });
        }
        if inner.index.is_none() && inner.index_pending.len() >= INDEX_PENDING_KEYS_MAX {
            return Err(StoreError::IndexBusy { pending_keys: inner.index_pending.len(), max_keys: INDEX_PENDING_KEYS_MAX });
        }
        let key = QueueRef(msg.topic, msg.queue_id);
        if !inner.queues.contains_key(&key) {
            let cq = ConsumeQueue::new(
                self.cq_dir(msg.topic, msg.queue_id),
                msg.topic,
                msg.queue_id,
                self.config.cq_entries_per_file,
                self.config.cq_tail_entries,
            );
            inner.queues.insert((msg.topic.to_string(), msg.queue_id), cq);
        }
        // Roll: a record never straddles segments, and every segment ends with a blank
        // record of at least 8 bytes.
        let log = &mut inner.commitlog;
        let seg_end = log.segment_start(log.write_pos) + log.segment_bytes;
        if log.write_pos + size + BLANK_LEN_MIN_BYTES as u64 > seg_end {
            let blank_len = (seg_end - log.write_pos) as usize;
            let mut blank = vec![0u8; blank_len];
            encode_blank(&mut blank);
            log.append(&blank);
        }
        let local = log.write_pos;
        let cq = inner.queues.get_mut(&key).expect("queue inserted above");
        let queue_offset = cq.max_offset();
        // Never 0: recovery reads a zero store time as a torn record.
        let store_timestamp_ms = self.clock.now_ms().max(1);
        let record = StoredMessage {
            queue_id: msg.queue_id,
            flag: msg.flag,
            queue_offset: queue_offset as i64,
            physical_offset: self.shard.phys(local) as i64,
            sys_flag: msg.sys_flag,
            born_timestamp_ms: msg.born_timestamp_ms,
            born_host: msg.born_host,
            store_timestamp_ms,
            store_host: msg.store_host,
            reconsume_times: msg.reconsume_times,
            prepared_transaction_offset: msg.prepared_transaction_offset,
            body: Vec::new(),
            topic: String::new(),
            properties: String::new(),
        };
        // Encoded straight into the tail: the body's one copy on the append path. A
        // record that would straddle two tail chunks (one per MiB at most) goes through
        // the scratch buffer.
        let encode = |mut out: &mut [u8]| encode_parts(&record, msg.body, msg.topic, msg.properties, &mut out);
        if !inner.commitlog.append_in_place(size as usize, encode) {
            inner.scratch.clear();
            encode_parts(&record, msg.body, msg.topic, msg.properties, &mut inner.scratch);
            debug_assert_eq!(inner.scratch.len() as u64, size);
            crate::copy_probe::record(crate::copy_probe::Site::RecordScratch, inner.scratch.len());
            inner.commitlog.append(&inner.scratch);
        }
        crate::copy_probe::record(crate::copy_probe::Site::TailAppend, size as usize);
        let tag_hash = tag_hash_of(msg.properties);
        cq.append(CqEntry { phys_offset: self.shard.phys(local), size: size as u32, tag_hash });
        for k in index_keys(msg.topic, msg.properties) {
            match inner.index.as_mut() {
                Some(index) => index.put_hash(k, self.shard.phys(local), store_timestamp_ms),
                None => inner.index_pending.push((k, self.shard.phys(local), store_timestamp_ms)),
            }
        }
        inner.stats.records_put += 1;
        inner.records_appended += 1;
        inner.append_wakers.drain(..).for_each(Waker::wake);
        let wake = match self.config.flush_mode {
            FlushMode::Sync => true,
            FlushMode::Async => inner.commitlog.dirty_bytes() >= self.config.flush_min_bytes,
        };
        if wake {
            if let Some(waker) = inner.flusher_waker.take() {
                waker.wake();
            }
        }
        Ok(PutResult {
            phys_offset: self.shard.phys(local),
            queue_offset,
            size_bytes: size as u32,
            store_timestamp_ms,
            durable_ticket: local + size,
        })
    }

    /// Appends records replicated from a master (issue 13): `bytes` are whole records
    /// (messages and end-of-segment blanks) exactly as the master's CommitLog holds them
    /// from physical offset `phys_from`, which must be this log's end. Each record is
    /// checked as recovery checks it (lengths, body CRC, its physical offset, the
    /// torn-record rule) and that it continues its queue (its queue offset is the
    /// queue's next); then it is appended byte for byte and dispatched to its
    /// ConsumeQueue and the index, as a put would. Nothing is appended unless every
    /// record checks; of a batch that checks, the longest prefix of whole records the
    /// dirty-bytes budget allows is appended (`bytes_consumed`), `Busy` if not even one
    /// record fits. Never awaits; the flusher makes it durable as any append.
    pub fn append_replicated(&self, phys_from: u64, bytes: &[u8]) -> Result<ReplicatedAppend, StoreError> {
        self.check_alive()?;
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        if let Some((used_percent, refuse_percent)) = inner.disk_full {
            return Err(StoreError::DiskFull { used_percent, refuse_percent });
        }
        if ShardId::of_phys(phys_from) != self.shard || local_of(phys_from) != inner.commitlog.write_pos {
            return Err(StoreError::ReplicaGap { expected: self.shard.phys(inner.commitlog.write_pos), got: phys_from });
        }
        let dirty = inner.commitlog.dirty_bytes();
        let log_start = inner.commitlog_start;
        // First pass: check every record without changing anything.
        let mut plan: Vec<ReplicaPlanItem> = Vec::new();
        let mut next_queue_offsets: std::collections::HashMap<(String, i32), u64> = std::collections::HashMap::new();
        let (mut at, mut pos) = (0usize, inner.commitlog.write_pos);
        let diverged = |reason: String| StoreError::ReplicaDiverged { offset: 0, reason };
        while at < bytes.len() {
            let seg_end = inner.commitlog.segment_start(pos) + inner.commitlog.segment_bytes;
            match record_head(&bytes[at..]) {
                RecordHead::Blank(n) => {
                    if pos + n as u64 != seg_end || at + n > bytes.len() {
                        return Err(StoreError::ReplicaDiverged { offset: self.shard.phys(pos), reason: format!("blank record of {n} bytes does not end segment at {seg_end}") });
                    }
                    plan.push((at, n, None));
                    at += n;
                    pos += n as u64;
                }
                RecordHead::Message(n) => {
                    if n as u64 > self.config.record_bytes_max || pos + n as u64 + BLANK_LEN_MIN_BYTES as u64 > seg_end || at + n > bytes.len() {
                        return Err(StoreError::ReplicaDiverged { offset: self.shard.phys(pos), reason: format!("record of {n} bytes does not fit (segment end {seg_end}, batch {})", bytes.len() - at) });
                    }
                    let view = StoredMessageView::parse_verified(&bytes[at..at + n]).map_err(|e| diverged(e.to_string()))?;
                    if view.physical_offset() as u64 != self.shard.phys(pos) || view.store_timestamp_ms() == 0 || view.properties_bytes().contains(&0) {
                        return Err(StoreError::ReplicaDiverged { offset: self.shard.phys(pos), reason: format!("record says physical offset {} (or is torn)", view.physical_offset()) });
                    }
                    let topic = view.topic().map_err(|e| diverged(e.to_string()))?.to_string();
                    let key = (topic, view.queue_id());
                    let queue_offset = view.queue_offset().max(0) as u64;
                    let expected = match (next_queue_offsets.get(&key), inner.queues.get(&key)) {
                        (Some(&o), _) => o,
                        (None, Some(q)) => q.max_offset(),
                        // A log that no longer starts at 0 (re-seeded, or cut by
                        // retention) meets queues whose start lies below it.
                        (None, None) if log_start > 0 => queue_offset,
                        (None, None) => 0,
                    };
                    if queue_offset != expected {
                        return Err(StoreError::ReplicaDiverged {
                            offset: self.shard.phys(pos),
                            reason: format!("{}/{}: queue offset {queue_offset}, this replica's next is {expected}", key.0, key.1),
                        });
                    }
                    next_queue_offsets.insert(key.clone(), queue_offset + 1);
                    plan.push((at, n, Some((key.0, key.1, queue_offset))));
                    at += n;
                    pos += n as u64;
                }
                RecordHead::Empty | RecordHead::Invalid => {
                    return Err(StoreError::ReplicaDiverged { offset: self.shard.phys(pos), reason: "not a record".into() });
                }
            }
        }
        let mut records = 0u64;
        let mut consumed = 0usize;
        let mut last_store_timestamp_ms = 0i64;
        for (at, n, queue) in plan {
            if dirty + (at + n) as u64 > self.config.dirty_bytes_max {
                if consumed == 0 {
                    return Err(StoreError::Busy { dirty_bytes: dirty, max_bytes: self.config.dirty_bytes_max });
                }
                break;
            }
            consumed = at + n;
            let local = inner.commitlog.write_pos;
            let record = &bytes[at..at + n];
            inner.commitlog.append(record);
            let Some((topic, queue_id, queue_offset)) = queue else { continue };
            let view = StoredMessageView::parse(record).expect("checked above");
            let props = String::from_utf8_lossy(view.properties_bytes()).into_owned();
            let key = (topic.clone(), queue_id);
            if !inner.queues.contains_key(&key) {
                let mut cq = ConsumeQueue::new(self.cq_dir(&topic, queue_id), &topic, queue_id, self.config.cq_entries_per_file, self.config.cq_tail_entries);
                if queue_offset > 0 {
                    // Starts mid-queue (checked above: the log starts past 0). The
                    // entries below are holes; the sum of max offsets stays the count
                    // the checkpoint records.
                    let start = queue_offset * ENTRY_BYTES;
                    let block = align_down(start, BLOCK_BYTES);
                    cq.log.reset_at(start, &vec![0u8; (start - block) as usize]);
                    cq.log.flushed_pos = block;
                    cq.min_offset = queue_offset;
                    inner.records_appended += queue_offset;
                }
                inner.queues.insert(key.clone(), cq);
            }
            let cq = inner.queues.get_mut(&key).expect("queue inserted above");
            cq.append(CqEntry { phys_offset: self.shard.phys(local), size: n as u32, tag_hash: tag_hash_of(&props) });
            for k in index_keys(&topic, &props) {
                match inner.index.as_mut() {
                    Some(index) => index.put_hash(k, self.shard.phys(local), view.store_timestamp_ms()),
                    None => inner.index_pending.push((k, self.shard.phys(local), view.store_timestamp_ms())),
                }
            }
            inner.stats.records_put += 1;
            inner.records_appended += 1;
            records += 1;
            last_store_timestamp_ms = view.store_timestamp_ms();
        }
        if let Some(waker) = inner.flusher_waker.take() {
            waker.wake();
        }
        inner.append_wakers.drain(..).for_each(Waker::wake);
        let end = inner.commitlog.write_pos;
        Ok(ReplicatedAppend { records, bytes_consumed: consumed, end_phys: self.shard.phys(end), durable_ticket: end, last_store_timestamp_ms })
    }

    /// Makes this empty store a replica that starts at physical offset `phys_start` (a
    /// segment start of its master's log, above 0): the master no longer holds what lies
    /// below, so the replica's log, like the master's after retention, begins there.
    /// Refused unless the store holds nothing (no record, no queue).
    pub async fn reseed_at(&self, phys_start: u64) -> Result<(), StoreError> {
        self.check_alive()?;
        let local = local_of(phys_start);
        let refuse = |reason: &str| Err(StoreError::ReseedRefused { offset: phys_start, reason: reason.to_string() });
        let stale: Vec<(u64, PathBuf)> = {
            let inner = self.inner.borrow();
            let log = &inner.commitlog;
            if ShardId::of_phys(phys_start) != self.shard {
                return refuse("not an offset of this shard");
            }
            if local == 0 || !local.is_multiple_of(log.segment_bytes) {
                return refuse("not a segment start above 0");
            }
            if log.write_pos != 0 || inner.records_appended != 0 || !inner.queues.is_empty() {
                return refuse("the store holds records (only an empty store is re-seeded: move its directory away first)");
            }
            if log.flushing || !log.preparing.is_empty() {
                return refuse("a flush or segment creation is in flight; try again");
            }
            log.files.keys().map(|&s| (s, log.path_of(s))).collect()
        };
        // Empty pre-allocated segments below the new start would read as a log of zeros.
        if !stale.is_empty() {
            for (start, path) in stale {
                self.inner.borrow_mut().commitlog.files.remove(&start);
                self.disk.remove(&path).await?;
            }
            self.disk.sync_dir(&Self::commitlog_dir(&self.dir)).await?;
        }
        let mut inner = self.inner.borrow_mut();
        if inner.commitlog.write_pos != 0 {
            return refuse("records arrived while re-seeding");
        }
        inner.commitlog.reset_at(local, &[]);
        inner.commitlog_start = local;
        inner.read_ahead.clear();
        inner.cq_pull_blocks.clear();
        Ok(())
    }

    /// Asks the flusher to flush what is dirty now (async flush otherwise waits for its
    /// interval): a SYNC_MASTER send needs its bytes durable here before a slave gets
    /// them.
    pub fn request_flush(&self) {
        let mut inner = self.inner.borrow_mut();
        inner.flush_requested = true;
        if let Some(waker) = inner.flusher_waker.take() {
            waker.wake();
        }
    }

    /// Resolves once the log's end is past `local_end` (or the store failed).
    pub fn wait_appended(&self, local_end: u64) -> AppendWait<D> {
        AppendWait { inner: self.inner.clone(), after: local_end }
    }

    /// Up to `max_bytes` of whole durable records of this CommitLog from physical offset
    /// `phys_from` (a record boundary), for a replica: `None` when `phys_from` is below
    /// the oldest segment (deleted by retention: the replica must be re-seeded), empty
    /// when nothing is past it. Cut at the last whole record; a record longer than
    /// `max_bytes` is returned alone.
    pub async fn read_for_replica(&self, phys_from: u64, max_bytes: usize) -> Result<Option<Vec<u8>>, StoreError> {
        if ShardId::of_phys(phys_from) != self.shard {
            return Ok(None);
        }
        let local = local_of(phys_from);
        if local < self.commitlog_min() {
            return Ok(None);
        }
        // Only what is durable here: a slave never holds bytes this master could lose in
        // a crash, so a restarted master is never behind its slaves.
        let end = self.flushed_offset();
        if local >= end {
            return Ok(Some(Vec::new()));
        }
        let want = (end - local).min(max_bytes.max(self.config.record_bytes_max as usize) as u64) as usize;
        let mut bytes = self.read_commitlog(phys_from, want).await?;
        // Keep whole records only.
        let mut at = 0usize;
        while at < bytes.len() {
            let n = match record_head(&bytes[at..]) {
                RecordHead::Blank(n) | RecordHead::Message(n) => n,
                RecordHead::Empty | RecordHead::Invalid => break,
            };
            if at + n > bytes.len() || (at > 0 && at + n > max_bytes) {
                break;
            }
            at += n;
        }
        bytes.truncate(at);
        Ok(Some(bytes))
    }

    /// Resolves when the flusher has work: any dirty byte under sync flush, at least
    /// `flush_min_bytes` under async flush (the flusher also wakes on its interval).
    /// Resolves when the checkpoint is half of `checkpoint_lag_bytes_max` (or more)
    /// behind the durable log: the logics flusher then starts a pass without waiting
    /// for its interval.
    pub fn logics_wanted(&self) -> LogicsWanted<D> {
        LogicsWanted { inner: self.inner.clone(), lag_bytes: self.config.checkpoint_lag_bytes_max / 2 }
    }

    /// How far (bytes) the last checkpoint is behind the durable log.
    pub fn checkpoint_lag_bytes(&self) -> u64 {
        let inner = self.inner.borrow();
        inner.commitlog.flushed_pos.saturating_sub(inner.checkpoint_logics_phys)
    }

    pub fn flush_wanted(&self) -> FlushWanted<D> {
        FlushWanted { inner: self.inner.clone(), min_bytes: match self.config.flush_mode {
            FlushMode::Sync => 1,
            FlushMode::Async => self.config.flush_min_bytes,
        } }
    }

    /// Whether the segment after the active one should be pre-allocated now: the active
    /// one is more than half used and its successor does not exist yet.
    pub fn next_segment_wanted(&self) -> bool {
        let inner = self.inner.borrow();
        let log = &inner.commitlog;
        let start = log.segment_start(log.write_pos);
        inner.failed.is_none() && !log.files.contains_key(&(start + log.segment_bytes)) && (log.write_pos - start) * 2 >= log.segment_bytes
    }

    /// Re-reads disk usage: warns, refuses appends past `disk_refuse_ratio`, and lets
    /// them resume once usage falls back. Returns the used ratio.
    pub async fn check_disk(&self) -> Result<f64, StoreError> {
        let space = self.disk.space(&self.dir).await?;
        let ratio = space.used_ratio();
        let refuse = self.config.disk_refuse_ratio;
        let mut inner = self.inner.borrow_mut();
        inner.stats.disk_used_permille = (ratio * 1000.0) as u64;
        if ratio >= refuse {
            if inner.disk_full.is_none() {
                tracing::warn!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk above the refuse watermark: refusing appends");
            }
            inner.disk_full = Some(((ratio * 100.0) as u32, (refuse * 100.0) as u32));
        } else {
            if inner.disk_full.take().is_some() {
                tracing::info!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk space available again: accepting appends");
            }
            if ratio >= self.config.disk_warn_ratio {
                tracing::warn!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk above the warning watermark");
            }
        }
        Ok(ratio)
    }

    /// Records how long one group commit took (the flusher measures it on the runtime's
    /// monotonic clock).
    pub fn note_flush_latency_us(&self, us: u64) {
        self.inner.borrow_mut().stats.flush_latency.observe(us);
    }

    pub fn refusing_writes(&self) -> bool {
        self.inner.borrow().disk_full.is_some()
    }

    /// Resolves once the CommitLog is durable up to `ticket`, or with the error that
    /// stopped the store.
    pub fn wait_durable(&self, ticket: u64) -> DurableWait<D> {
        DurableWait { inner: self.inner.clone(), ticket }
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

    /// One group commit of the CommitLog: everything appended before it is written and
    /// synced. Wakes the waiters it covers. Always ends on a record boundary.
    pub async fn flush(&self) -> Result<Option<FlushDone>, StoreError> {
        self.check_alive()?;
        // `flush_log` picks its range on its first poll, before anything else runs, and
        // always covers everything appended: these describe exactly what it covers.
        let (records_before, write_before) = {
            let mut inner = self.inner.borrow_mut();
            inner.flush_requested = false;
            (inner.records_appended, inner.commitlog.write_pos)
        };
        let result = flush_log(&*self.inner, &commitlog_of, &self.disk, u64::MAX).await;
        match result {
            Ok(done) => {
                let mut inner = self.inner.borrow_mut();
                if let Some(done) = done {
                    debug_assert_eq!(done.to, write_before);
                    inner.records_flushed = records_before;
                    inner.stats.flushes += 1;
                    inner.stats.flushed_bytes += done.to - done.from;
                    crate::copy_probe::record(crate::copy_probe::Site::FlushStage, done.written_bytes as usize);
                }
                let flushed = inner.commitlog.flushed_pos;
                if flushed.saturating_sub(inner.checkpoint_logics_phys) >= self.config.checkpoint_lag_bytes_max / 2 {
                    if let Some(w) = inner.logics_waker.take() {
                        w.wake();
                    }
                }
                let covered: Vec<u64> = inner.waiters.range(..=flushed).map(|(k, _)| *k).collect();
                for key in covered {
                    if let Some(wakers) = inner.waiters.remove(&key) {
                        wakers.into_iter().for_each(Waker::wake);
                    }
                }
                Ok(done)
            }
            Err(e) => Err(self.on_write_error(e).await),
        }
    }

    /// A full disk while pre-allocating a segment wrote no data: appends are refused
    /// until space is freed. Any other write or sync error fails the store.
    async fn on_write_error(&self, e: IoError) -> StoreError {
        if e.kind == IoErrorKind::NoSpace && e.op == "preallocate" {
            self.on_no_space(&e).await;
            return StoreError::NoSpace;
        }
        let err = StoreError::Io(e);
        self.fail(&err);
        err
    }

    async fn on_no_space(&self, e: &IoError) {
        tracing::warn!(shard = self.shard.0, error = %e, "disk full: refusing appends until space is freed");
        self.inner.borrow_mut().disk_full = Some((100, (self.config.disk_refuse_ratio * 100.0) as u32));
        // The half-written segment was removed by `segmented::ensure_segment` while it
        // still held the segment's claim (removing it here raced the next claimant).
    }

    /// Flushes until everything appended so far is durable.
    pub async fn flush_all(&self) -> Result<(), StoreError> {
        loop {
            let (dirty, flushing, flushed) = {
                let inner = self.inner.borrow();
                (inner.commitlog.dirty_bytes(), inner.commitlog.flushing, inner.commitlog.flushed_pos)
            };
            if dirty == 0 {
                return Ok(());
            }
            if flushing {
                // Another task's flush is in flight: wait until it moves the flushed end
                // (a yield loop would spin until its IO completes; found by ha_sim).
                self.wait_durable(flushed + 1).await?;
                continue;
            }
            self.flush().await?;
        }
    }

    /// Pre-allocates (and pre-zeroes) the segment after the active one, if missing.
    pub async fn prepare_next_segment(&self) -> Result<bool, StoreError> {
        self.check_alive()?;
        let next = {
            let inner = self.inner.borrow();
            let log = &inner.commitlog;
            let next = log.segment_start(log.write_pos) + log.segment_bytes;
            if log.files.contains_key(&next) {
                return Ok(false);
            }
            next
        };
        match ensure_segment(&*self.inner, &commitlog_of, &self.disk, next).await {
            Ok(_) => Ok(true),
            Err(e) => Err(self.on_write_error(e).await),
        }
    }

    /// Syncs every ConsumeQueue and the index, then writes the checkpoint.
    pub async fn flush_logics(&self) -> Result<(), StoreError> {
        self.check_alive()?;
        let result = self.flush_logics_inner().await;
        if let Err(e) = &result {
            // ConsumeQueues are derived from the CommitLog and a failed flush leaves their
            // range dirty (rewritten next round, the checkpoint not moved): a full disk
            // here waits for space, as pre-allocation does, instead of stopping the store.
            let no_space = match e {
                StoreError::NoSpace => true,
                StoreError::Io(io) => io.kind == IoErrorKind::NoSpace,
                _ => false,
            };
            if no_space {
                tracing::warn!(shard = self.shard.0, error = %e, "ConsumeQueue flush waits for disk space");
            } else if e.is_fatal() || matches!(e, StoreError::Index(_)) {
                self.fail(e);
            }
        }
        result
    }

    async fn flush_logics_inner(&self) -> Result<(), StoreError> {
        let (logics_phys, records_below, keys, doomed) = {
            let mut inner = self.inner.borrow_mut();
            if inner.logics_flushing {
                return Ok(());
            }
            inner.logics_flushing = true;
            // Every record below the CommitLog's durable end already has its entries in
            // the queues' tails, because `put` adds both at once.
            let phys = inner.commitlog.flushed_pos;
            let doomed = std::mem::take(&mut inner.queues_deleted);
            (phys, inner.records_flushed, inner.queues.keys().cloned().collect::<Vec<_>>(), doomed)
        };
        let result = async {
            // Every dirty queue's write + sync in flight together (bounded): one after
            // another, thousands of queues held the checkpoint seconds behind the log.
            use futures_util::stream::{StreamExt, TryStreamExt};
            futures_util::stream::iter(keys.iter().map(|key| flush_queue(&self.inner, &self.disk, key)))
                .buffer_unordered(LOGICS_FLUSHES_IN_FLIGHT_MAX)
                .try_collect::<Vec<()>>()
                .await?;
            let mut index = self.take_index().await;
            let flushed = index.flush().await;
            // Read before the index goes back: puts waiting in `index_pending` are not
            // durable yet.
            let index_mark = index.durable_mark();
            self.return_index(index);
            flushed?;
            self.write_checkpoint(logics_phys, records_below, index_mark).await
        }
        .await;
        match result {
            // Their entries are no longer counted by a durable checkpoint: now they go.
            Ok(()) => self.remove_deleted_queues(doomed).await,
            // Kept for the next flush (the checkpoint may not have been written).
            Err(_) => self.inner.borrow_mut().queues_deleted.extend(doomed),
        }
        self.inner.borrow_mut().logics_flushing = false;
        result
    }

    async fn write_checkpoint(&self, logics_phys: u64, records_below_logics: u64, index_mark: Option<super::index::IndexMark>) -> Result<(), StoreError> {
        let path = self.dir.join("checkpoint");
        // Bound first: a borrow in the match scrutinee would live across the await.
        let existing = self.inner.borrow().checkpoint_file.clone();
        let file = match existing {
            Some(f) => f,
            None => Rc::new(self.disk.open(&path, true).await?),
        };
        let checkpoint = {
            let mut inner = self.inner.borrow_mut();
            inner.checkpoint_file = Some(file.clone());
            inner.checkpoint_sequence += 1;
            Checkpoint {
                sequence: inner.checkpoint_sequence,
                commitlog_phys: inner.commitlog.flushed_pos.max(logics_phys),
                logics_phys,
                records_below_logics,
                timestamp_ms: self.clock.now_ms(),
                index_mark,
                index_mark_known: true,
            }
        };
        checkpoint.store(&*file).await?;
        self.inner.borrow_mut().checkpoint_logics_phys = logics_phys;
        Ok(())
    }

    /// Flushes everything, writes the checkpoint and removes the abort file.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.flush_all().await?;
        self.flush_logics().await?;
        let abort = self.dir.join("abort");
        if self.disk.exists(&abort).await? {
            self.disk.remove(&abort).await?;
        }
        self.disk.sync_dir(&self.dir).await?;
        Ok(())
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

    // ---- retention ----

    /// Deletes expired CommitLog segments (older than `file_reserved_hours`) at the
    /// `delete_when_hour` (UTC), or the oldest segment regardless of age when disk usage
    /// passed `disk_force_clean_ratio`; then the ConsumeQueue files and index files that
    /// only pointed into them. Never deletes the active segment or anything not yet
    /// covered by the checkpoint. Returns the number of segments deleted.
    pub async fn clean_expired(&self) -> Result<usize, StoreError> {
        self.check_alive()?;
        let now_ms = self.clock.now_ms();
        let at_hour = ((now_ms / 3_600_000).rem_euclid(24)) as u32 == self.config.delete_when_hour;
        let ratio = self.disk.space(&self.dir).await?.used_ratio();
        let force = ratio >= self.config.disk_force_clean_ratio;
        if !at_hour && !force {
            return Ok(0);
        }
        let cutoff_ms = now_ms - self.config.file_reserved_hours as i64 * 3_600_000;
        let mut deleted = 0;
        loop {
            let (start, file, path) = {
                let inner = self.inner.borrow();
                let log = &inner.commitlog;
                let Some((&start, file)) = log.files.iter().next() else { break };
                let end = start + log.segment_bytes;
                let limit = inner.commitlog.flushed_pos.min(inner.checkpoint_logics_phys);
                if end > limit || end > log.segment_start(log.write_pos) {
                    break;
                }
                (start, file.clone(), log.path_of(start))
            };
            let next_phys = self.shard.phys(start + self.config.segment_bytes);
            let newest_ms = match self.read_record(next_phys, None).await? {
                Some(bytes) => StoredMessageView::parse(&bytes).map(|v| v.store_timestamp_ms()).unwrap_or(i64::MAX),
                None => i64::MAX,
            };
            let expired = newest_ms < cutoff_ms;
            if !(expired || (force && deleted == 0)) {
                break;
            }
            drop(file);
            {
                let mut inner = self.inner.borrow_mut();
                inner.commitlog.files.remove(&start);
                inner.commitlog_start = inner.commitlog_start.max(start + self.config.segment_bytes);
                inner.read_ahead.clear();
                inner.cq_pull_blocks.clear();
            }
            self.disk.remove(&path).await?;
            tracing::info!(shard = self.shard.0, file = %path.display(), expired, force, "deleted commitlog segment");
            deleted += 1;
        }
        if deleted > 0 {
            self.disk.sync_dir(&Self::commitlog_dir(&self.dir)).await?;
            self.trim_logics().await?;
        }
        Ok(deleted)
    }

    /// Deletes `topic`'s queues (Java's `deleteTopics`): each is replaced by an empty
    /// queue (offsets start again at 0 if the topic is created again), a checkpoint is
    /// written that no longer counts their entries, then their files are removed. The
    /// records stay in the CommitLog until retention; their index entries too.
    ///
    /// Everything appended is made durable first, so that the new checkpoint lies past
    /// every record of the topic and recovery never dispatches them again. A crash
    /// between the checkpoint and the file removal is found at the next start (queues
    /// and checkpoint disagree) and answered by rebuilding the queues from the log,
    /// which brings the deleted queues back (invisible: the topic is gone from the
    /// topic table). Returns the number of queues deleted.
    pub async fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        self.check_alive()?;
        let deleted = loop {
            self.flush_all().await?;
            let mut inner = self.inner.borrow_mut();
            // Swapped only when nothing appended is still volatile: every entry removed
            // then counts a durable record (`records_flushed`).
            if inner.commitlog.dirty_bytes() != 0 || inner.commitlog.flushing {
                continue;
            }
            let keys: Vec<QueueKey> = inner.queues.keys().filter(|(t, _)| t == topic).cloned().collect();
            inner.cq_pull_blocks.retain(|((t, _), _, _)| t != topic);
            for key in &keys {
                let fresh = ConsumeQueue::new(self.cq_dir(topic, key.1), topic, key.1, self.config.cq_entries_per_file, self.config.cq_tail_entries);
                let q = std::mem::replace(inner.queues.get_mut(key).expect("key listed above"), fresh);
                inner.records_appended = inner.records_appended.saturating_sub(q.max_offset());
                inner.records_flushed = inner.records_flushed.saturating_sub(q.max_offset());
                inner.queues_deleted.push(q);
            }
            break keys.len();
        };
        if deleted > 0 {
            // Removes the files once its checkpoint is written (or the next flush does).
            self.flush_logics().await?;
            tracing::info!(shard = self.shard.0, topic, queues = deleted, "topic's consume queues deleted");
        }
        Ok(deleted)
    }

    /// Removes the files of queues `delete_topic` replaced: called after a checkpoint
    /// that no longer counts their entries.
    /// A failure is not the store's (the queues are already out of use): it is logged
    /// and the removal retried by the next flush.
    async fn remove_deleted_queues(&self, doomed: Vec<ConsumeQueue<D>>) {
        let mut failed = Vec::new();
        for q in doomed {
            let mut result = Ok(());
            for start in q.log.files.keys() {
                match self.disk.remove(&q.log.path_of(*start)).await {
                    Ok(()) => {}
                    Err(e) if e.kind == IoErrorKind::NotFound => {}
                    Err(e) => result = Err(e),
                }
            }
            // A queue that never reached a file has no directory to sync.
            if result.is_ok() && !q.log.files.is_empty() {
                result = match self.disk.sync_dir(&q.log.dir).await {
                    Err(e) if e.kind != IoErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                };
            }
            if let Err(e) = result {
                tracing::warn!(shard = self.shard.0, topic = %q.topic, queue = q.queue_id, error = %e, "deleted queue's files not removed; retried");
                failed.push(q);
            }
        }
        self.inner.borrow_mut().queues_deleted.extend(failed);
    }

    /// Advances every queue's minimum past entries whose records were deleted, removes
    /// their wholly dead files, and drops index files that point only below the log.
    async fn trim_logics(&self) -> Result<(), StoreError> {
        let min_phys = self.shard.phys(self.commitlog_min());
        for key in self.queues() {
            let get = log_accessor(|inner: &mut Inner<D>| &mut inner.queues.get_mut(&key).expect("queues are never removed").log);
            let (mut lo, mut hi) = {
                let inner = self.inner.borrow();
                let q = &inner.queues[&key];
                (q.min_offset, q.max_offset())
            };
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let bytes = self.note_read(read_log(&*self.inner, &get, mid * ENTRY_BYTES, ENTRY_BYTES as usize).await)?;
                if bytes.len() == ENTRY_BYTES as usize && CqEntry::decode(&bytes).phys_offset < min_phys {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let dead: Vec<(u64, PathBuf)> = {
                let mut inner = self.inner.borrow_mut();
                let q = inner.queues.get_mut(&key).expect("queues are never removed");
                q.min_offset = lo;
                let live_from = q.log.segment_start(lo * ENTRY_BYTES);
                let active = q.log.segment_start(q.log.write_pos);
                let dead: Vec<u64> = q.log.files.keys().copied().filter(|&s| s < live_from && s < active).collect();
                dead.into_iter().map(|s| {
                    q.log.files.remove(&s);
                    (s, q.log.path_of(s))
                }).collect()
            };
            for (_, path) in dead {
                self.disk.remove(&path).await?;
            }
        }
        let mut index = self.take_index().await;
        let result = index.delete_files_before(min_phys).await;
        self.return_index(index);
        result?;
        Ok(())
    }

    // ---- reads ----

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

    /// ConsumeQueue entries `[from, from + count)` (clamped to what exists).
    pub async fn cq_entries(&self, topic: &str, queue_id: i32, from: u64, count: u64) -> Result<Vec<CqEntry>, StoreError> {
        let key = (topic.to_string(), queue_id);
        let (from, to) = {
            let inner = self.inner.borrow();
            let Some(q) = inner.queues.get(&key) else { return Ok(Vec::new()) };
            let from = from.max(q.min_offset);
            (from, (from + count).min(q.max_offset()))
        };
        if from >= to {
            return Ok(Vec::new());
        }
        // The queue exists (checked above) and queues are never removed.
        let get = log_accessor(|inner: &mut Inner<D>| &mut inner.queues.get_mut(&key).expect("queues are never removed").log);
        let bytes = self.note_read(read_log(&*self.inner, &get, from * ENTRY_BYTES, ((to - from) * ENTRY_BYTES) as usize).await)?;
        Ok(bytes.chunks_exact(ENTRY_BYTES as usize).map(CqEntry::decode).collect())
    }

    /// `cq_entries` for a pull (`Inner::cq_pull_blocks`): the block holding `offset` with
    /// at least `wanted` entries from there, as (block, index of `offset` in it).
    async fn cq_entries_for_pull(&self, topic: &str, queue_id: i32, offset: u64, scan: u64, wanted: usize) -> Result<(Rc<Vec<CqEntry>>, usize), StoreError> {
        {
            let inner = self.inner.borrow();
            let hit = inner.cq_pull_blocks.iter().find(|((t, q), from, block)| *q == queue_id && t == topic && offset >= *from && offset < from + block.len() as u64);
            if let Some((_, from, block)) = hit {
                let skip = (offset - from) as usize;
                if block.len() - skip >= wanted {
                    return Ok((block.clone(), skip));
                }
            }
        }
        let block = Rc::new(self.cq_entries(topic, queue_id, offset, scan).await?);
        // Only a block with entries left over for a later pull is kept: a tailing pull's
        // few entries are not (no allocation, no scan of the blocks on that path).
        if block.len() > wanted {
            let mut inner = self.inner.borrow_mut();
            inner.cq_pull_blocks.retain(|((t, q), _, _)| !(*q == queue_id && t == topic));
            if inner.cq_pull_blocks.len() >= CQ_PULL_BLOCKS_MAX {
                inner.cq_pull_blocks.pop_front();
            }
            inner.cq_pull_blocks.push_back(((topic.to_string(), queue_id), offset, block.clone()));
        }
        Ok((block, 0))
    }

    /// Reads `len` CommitLog bytes at a physical offset of this shard.
    /// Exactly `[phys, phys + len)`: point reads (a record by offset, a key query's
    /// hits, a time search's probes) and the replica's own large sequential reads.
    async fn read_commitlog(&self, phys: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        self.note_read(read_log(&*self.inner, &commitlog_of, local_of(phys), len).await)
    }

    /// A queue's pull reads through here: a cold range comes through the read-ahead
    /// windows, since consumers read queues forward and the queues' records lie
    /// interleaved in the log (point reads do not use them: a time search's probes would
    /// each pull in 2 MiB for one record).
    ///
    /// Appends the records `picks` (in log order, all inside the span `[phys, phys +
    /// len)`) to `out`, each CRC-checked; returns how many bytes it appended.
    ///
    /// A cold span (below the tail, one or two read-ahead windows) is copied record by
    /// record out of the windows, so the records of other queues lying between the picked
    /// ones are never copied: a queue read back among 8 busy ones has a span that is
    /// mostly theirs, and copying it whole then squeezing it cost 8 bytes moved per byte
    /// served (measured: 64 % of the shard thread in memmove on W3's cold read). A warm
    /// span (in the tail, or windows off) is read whole into `out` and squeezed in place.
    ///
    /// `prefetch` is set to the window after the last one a cold span used, when that
    /// window lies whole below the durable end and is neither held nor being read.
    async fn read_records_into(&self, phys: u64, len: usize, picks: &[CqEntry], out: &mut Vec<u8>, prefetch: &mut Option<u64>) -> Result<usize, StoreError> {
        let local = local_of(phys);
        let end = local + len as u64;
        let cold = {
            let inner = self.inner.borrow();
            self.config.read_ahead_windows_max > 0 && end <= inner.commitlog.tail.base() && len as u64 <= READ_AHEAD_WINDOW_BYTES && len > 0
        };
        let first = out.len();
        if cold {
            // A span is at most READ_AHEAD_WINDOW_BYTES long, so it lies in at most two
            // windows: `low` from `low_start`, and `high` right behind it.
            let low_start = align_down(local, READ_AHEAD_WINDOW_BYTES);
            let high_start = low_start + READ_AHEAD_WINDOW_BYTES;
            let low_end = end.min(high_start);
            // A window that stops short (a segment missing inside it, the files' end) or
            // whose read failed sends the span down the plain read, which says exactly
            // what is there, or names the failing record's own file and offset.
            let low = self.read_ahead_window(low_start, low_end).await.ok().filter(|w| low_start + w.len() as u64 >= low_end);
            let high = match (&low, end > high_start) {
                (Some(_), true) => self.read_ahead_window(high_start, end).await.ok().filter(|w| high_start + w.len() as u64 >= end),
                _ => None,
            };
            if let Some(low) = low.filter(|_| end <= high_start || high.is_some()) {
                out.reserve(picks.iter().map(|e| e.size as usize).sum());
                for e in picks {
                    let at = local_of(e.phys_offset);
                    let rec_end = at + e.size as u64;
                    assert!(at >= local && rec_end <= end, "read_records_into: record {at}+{} outside span {local}..{end}", e.size);
                    let from = out.len();
                    if at < high_start {
                        out.extend_from_slice(&low[(at - low_start) as usize..(rec_end.min(high_start) - low_start) as usize]);
                    }
                    if rec_end > high_start {
                        let high = high.as_ref().expect("a span past its first window has its second");
                        out.extend_from_slice(&high[(at.max(high_start) - high_start) as usize..(rec_end - high_start) as usize]);
                    }
                    self.verify_record(&out[from..], e)?;
                }
                let next = if end <= high_start { high_start } else { high_start + READ_AHEAD_WINDOW_BYTES };
                if self.worth_prefetching(next) {
                    *prefetch = Some(next);
                }
                return Ok(out.len() - first);
            }
        }
        // A span whole in the tail: each record copied straight out of it.
        let in_tail = {
            let inner = self.inner.borrow();
            let tail = &inner.commitlog.tail;
            if tail.contains(local, len as u64) && end <= inner.commitlog.write_pos {
                for e in picks {
                    let at = local_of(e.phys_offset);
                    assert!(at >= local && at + e.size as u64 <= end, "read_records_into: record {at}+{} outside span {local}..{end}", e.size);
                    let from = out.len();
                    out.resize(from + e.size as usize, 0);
                    tail.copy_to(at, &mut out[from..]);
                }
                true
            } else {
                false
            }
        };
        if in_tail {
            let mut from = first;
            for e in picks {
                self.verify_record(&out[from..from + e.size as usize], e)?;
                from += e.size as usize;
            }
            return Ok(out.len() - first);
        }
        let got = self.note_read(read_log_into(&*self.inner, &commitlog_of, local, len, out).await)?;
        let mut write = first;
        for e in picks {
            let at = (e.phys_offset - phys) as usize;
            let size = e.size as usize;
            if at + size > got {
                return Err(StoreError::Corrupt { file: self.dir.join("commitlog"), offset: e.phys_offset, reason: "short read".into() });
            }
            let from = first + at;
            self.verify_record(&out[from..from + size], e)?;
            out.copy_within(from..from + size, write);
            write += size;
        }
        out.truncate(write);
        Ok(write - first)
    }

    fn verify_record(&self, bytes: &[u8], e: &CqEntry) -> Result<(), StoreError> {
        match StoredMessageView::parse_verified(bytes) {
            Ok(_) => Ok(()),
            Err(err) => Err(StoreError::Corrupt { file: self.dir.join("commitlog"), offset: e.phys_offset, reason: err.to_string() }),
        }
    }

    /// The read-ahead window starting at `start` (aligned to `READ_AHEAD_WINDOW_BYTES`)
    /// holding at least `[start, need_end)` where the log has it, from the cache or
    /// read now. Only bytes below the durable end when it was read
    /// are kept (bytes past it on disk may still change), so a cached window never
    /// serves stale data; the log below the durable end never changes in place.
    async fn read_ahead_window(&self, start: u64, need_end: u64) -> Result<Rc<Vec<u8>>, StoreError> {
        loop {
            // A window read while the durable end lay inside it is shorter: read it again
            // when more of it is wanted now.
            if let Some((_, hit)) = self.inner.borrow().read_ahead.iter().find(|(s, w)| *s == start && start + w.len() as u64 >= need_end) {
                return Ok(hit.clone());
            }
            if !self.inner.borrow().read_ahead_loading.contains(&start) {
                break;
            }
            WindowLoaded { inner: &self.inner, start }.await;
        }
        let durable_end = self.inner.borrow().commitlog.flushed_pos;
        let loading = LoadingWindow::mark(&self.inner, start);
        let mut bytes = read_log(&*self.inner, &commitlog_of, start, READ_AHEAD_WINDOW_BYTES as usize).await?;
        bytes.truncate(durable_end.saturating_sub(start) as usize);
        let window = (start, Rc::new(bytes));
        let mut inner = self.inner.borrow_mut();
        inner.read_ahead.retain(|(s, _)| *s != start);
        if inner.read_ahead.len() >= self.config.read_ahead_windows_max {
            inner.read_ahead.pop_front();
        }
        inner.read_ahead.push_back(window.clone());
        drop(inner);
        drop(loading);
        Ok(window.1)
    }

    /// Whether the window at `start` is whole below the durable end and the tail, and
    /// neither held nor being read, with room for one more prefetch.
    fn worth_prefetching(&self, start: u64) -> bool {
        let inner = self.inner.borrow();
        let end = start + READ_AHEAD_WINDOW_BYTES;
        self.config.read_ahead_windows_max > 1
            && end <= inner.commitlog.flushed_pos
            && end <= inner.commitlog.tail.base()
            && inner.read_ahead_prefetching < READ_AHEAD_PREFETCH_MAX
            && !inner.read_ahead_loading.contains(&start)
            && !inner.read_ahead.iter().any(|(s, w)| *s == start && w.len() as u64 == READ_AHEAD_WINDOW_BYTES)
    }

    /// Reads the window at `start` into the read-ahead cache, unless it is there, being
    /// read, or not worth it any more (`worth_prefetching`). A failed read is dropped
    /// here: the pull that needs the bytes reads them again and reports the error.
    pub async fn prefetch_window(&self, start: u64) {
        if !self.worth_prefetching(start) {
            return;
        }
        /// Counts the prefetch out again also when its task is dropped half-way.
        struct Prefetching<'a, D: Disk>(&'a RefCell<Inner<D>>);
        impl<D: Disk> Drop for Prefetching<'_, D> {
            fn drop(&mut self) {
                self.0.borrow_mut().read_ahead_prefetching -= 1;
            }
        }
        self.inner.borrow_mut().read_ahead_prefetching += 1;
        let _counted = Prefetching(&*self.inner);
        let _ = self.read_ahead_window(start, start + READ_AHEAD_WINDOW_BYTES).await;
    }

    /// Where this log begins (local offset): 0, or the start of its oldest segment once
    /// retention deleted older ones, or where a re-seeded replica began.
    pub fn log_start(&self) -> u64 {
        self.commitlog_min()
    }

    fn commitlog_min(&self) -> u64 {
        self.inner.borrow().commitlog_start
    }

    /// The stored record at `phys`, CRC-checked; `None` if retention deleted it or no
    /// record starts there.
    pub async fn read_record(&self, phys: u64, size: Option<u32>) -> Result<Option<Vec<u8>>, StoreError> {
        if ShardId::of_phys(phys) != self.shard {
            return Ok(None);
        }
        let local = local_of(phys);
        if local < self.commitlog_min() || local >= self.write_offset() {
            return Ok(None);
        }
        let size = match size {
            Some(s) => s as usize,
            None => {
                let head = self.read_commitlog(phys, 4).await?;
                if head.len() < 4 {
                    return Ok(None);
                }
                i32::from_be_bytes([head[0], head[1], head[2], head[3]]).max(0) as usize
            }
        };
        if size as u64 > self.config.record_bytes_max {
            return Ok(None);
        }
        let bytes = self.read_commitlog(phys, size).await?;
        match StoredMessageView::parse_verified(&bytes) {
            Ok(view) if view.physical_offset() as u64 == phys => Ok(Some(bytes)),
            Ok(_) => Ok(None),
            Err(e) => Err(StoreError::Corrupt {
                file: self.dir.join("commitlog"),
                offset: phys,
                reason: e.to_string(),
            }),
        }
    }

    /// Up to `max_messages` records of a queue from `offset`, at most `max_bytes` in
    /// total (at least one record if any matches), skipping records whose tag hash
    /// `filter` rejects.
    pub async fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: u64,
        max_messages: usize,
        max_bytes: usize,
        filter: &dyn Fn(i64) -> bool,
    ) -> Result<GetResult, StoreError> {
        let max_messages = max_messages.clamp(1, GET_MESSAGES_MAX);
        let (min, max) = (self.min_offset(topic, queue_id), self.max_offset(topic, queue_id));
        let mut result =
            GetResult { status: GetStatus::NoMatchedMessage, next_offset: offset, min_offset: min, max_offset: max, records: Vec::new(), record_count: 0, prefetch_window: None };
        if max == 0 {
            result.status = GetStatus::NoMessageInQueue;
            result.next_offset = 0;
            return Ok(result);
        }
        if offset < min {
            result.status = GetStatus::OffsetTooSmall;
            result.next_offset = min;
            return Ok(result);
        }
        if offset == max {
            result.status = GetStatus::OffsetOverflowOne;
            return Ok(result);
        }
        if offset > max {
            result.status = GetStatus::OffsetOverflowBadly;
            result.next_offset = max;
            return Ok(result);
        }
        // Scan more entries than wanted so that a selective filter still finds matches,
        // but bounded.
        let scan = (max_messages as u64 * 4).max(64).min(16 * 1024);
        let (block, skip) = self.cq_entries_for_pull(topic, queue_id, offset, scan, max_messages).await?;
        let entries = &block[skip..];
        // Room for the answer at once: growing it span by span moved it again and again.
        result.records.reserve(entries.iter().take(max_messages).map(|e| e.size as usize).sum::<usize>().min(max_bytes));
        let commitlog_min = self.commitlog_min();
        let mut next = offset;
        let mut i = 0;
        while i < entries.len() && result.record_count < max_messages {
            let entry = entries[i];
            if local_of(entry.phys_offset) < commitlog_min {
                result.status = GetStatus::OffsetFoundNull;
                next += 1;
                i += 1;
                continue;
            }
            if !filter(entry.tag_hash) {
                next += 1;
                i += 1;
                continue;
            }
            if result.record_count > 0 && result.records.len() + entry.size as usize > max_bytes {
                break;
            }
            // Coalesce the following matching entries whose records lie close behind
            // (`entries[i..j]`, with a running byte count: linear in the entries).
            let mut j = i + 1;
            let span_start = entry.phys_offset;
            let mut span_end = entry.phys_offset + entry.size as u64;
            let mut taken_bytes = entry.size as usize;
            while j < entries.len() && result.record_count + (j - i) < max_messages {
                let e = entries[j];
                if !filter(e.tag_hash) {
                    break;
                }
                let end = e.phys_offset + e.size as u64;
                if e.phys_offset < span_end || end - span_start > READ_SPAN_BYTES_MAX || result.records.len() + taken_bytes + e.size as usize > max_bytes {
                    break;
                }
                span_end = end;
                taken_bytes += e.size as usize;
                j += 1;
            }
            // Only the picked records reach the response body (`read_records_into`).
            self.read_records_into(span_start, (span_end - span_start) as usize, &entries[i..j], &mut result.records, &mut result.prefetch_window).await?;
            result.record_count += j - i;
            next += (j - i) as u64;
            i = j;
        }
        result.next_offset = next;
        if result.record_count > 0 {
            result.status = GetStatus::Found;
        }
        Ok(result)
    }

    async fn store_timestamp_at(&self, entry: &CqEntry) -> Result<Option<i64>, StoreError> {
        Ok(match self.read_record(entry.phys_offset, Some(entry.size)).await? {
            Some(bytes) => StoredMessageView::parse(&bytes).ok().map(|v| v.store_timestamp_ms()),
            None => None,
        })
    }

    /// Store time of the message at `offset` of a queue (Java's
    /// `getMessageStoreTimeStamp`); `None` when that offset holds no readable message.
    pub async fn store_time_at(&self, topic: &str, queue_id: i32, offset: u64) -> Result<Option<i64>, StoreError> {
        if offset < self.min_offset(topic, queue_id) {
            return Ok(None);
        }
        let entries = self.cq_entries(topic, queue_id, offset, 1).await?;
        match entries.first() {
            Some(e) => self.store_timestamp_at(e).await,
            None => Ok(None),
        }
    }

    /// Store time of the oldest readable message of a queue.
    pub async fn earliest_store_time(&self, topic: &str, queue_id: i32) -> Result<Option<i64>, StoreError> {
        let min = self.min_offset(topic, queue_id);
        let entries = self.cq_entries(topic, queue_id, min, 1).await?;
        match entries.first() {
            Some(e) => self.store_timestamp_at(e).await,
            None => Ok(None),
        }
    }

    /// The first queue offset whose message was stored at or after `timestamp_ms`
    /// (the max offset if none), by binary search over store timestamps.
    pub async fn search_offset_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64) -> Result<u64, StoreError> {
        let (mut lo, mut hi) = (self.min_offset(topic, queue_id), self.max_offset(topic, queue_id));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let entries = self.cq_entries(topic, queue_id, mid, 1).await?;
            let Some(entry) = entries.first() else { break };
            match self.store_timestamp_at(entry).await? {
                Some(ts) if ts >= timestamp_ms => hi = mid,
                Some(_) => lo = mid + 1,
                None => lo = mid + 1,
            }
        }
        Ok(lo)
    }

    /// Records whose `topic#key` index entry matches, newest first, with the key
    /// checked on the record (index hash collisions are filtered out).
    pub async fn query_by_key(&self, topic: &str, key: &str, max_results: usize, begin_ms: i64, end_ms: i64) -> Result<Vec<Vec<u8>>, StoreError> {
        let index_key = format!("{topic}#{key}");
        let offsets = {
            // Queries read sealed index files from disk; the service is borrowed
            // immutably only for the call.
            let index = self.take_index().await;
            let found = index.query(&index_key, max_results.max(1) * 2, begin_ms, end_ms).await;
            self.return_index(index);
            self.note_read(found.map_err(|e| match e {
                IndexError::Read { file, offset, source } => StoreError::Read { file, offset, source },
                other => StoreError::Index(other),
            }))?
        };
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for phys in offsets {
            if out.len() >= max_results || !seen.insert(phys) {
                continue;
            }
            let Some(bytes) = self.read_record(phys, None).await? else { continue };
            let Ok(view) = StoredMessageView::parse(&bytes) else { continue };
            if view.topic_bytes() != topic.as_bytes() {
                continue;
            }
            let props = Properties::decode_str(&String::from_utf8_lossy(view.properties_bytes()));
            if props.get(keys::UNIQ_KEY) == Some(key) || props.keys().any(|k| k == key) {
                out.push(bytes);
            }
        }
        Ok(out)
    }
}

async fn flush_queue<D: Disk>(cell: &RefCell<Inner<D>>, disk: &D, key: &QueueKey) -> Result<(), StoreError> {
    // Queues are never removed from the map, so the projection cannot fail.
    let get = log_accessor(|inner: &mut Inner<D>| &mut inner.queues.get_mut(key).expect("queues are never removed").log);
    flush_log(cell, &get, disk, u64::MAX).await?;
    Ok(())
}

/// Future returned by [`Store::flush_wanted`].
pub struct FlushWanted<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    min_bytes: u64,
}

impl<D: Disk> Future for FlushWanted<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        let dirty = inner.commitlog.dirty_bytes();
        if inner.failed.is_some() || dirty >= self.min_bytes || (inner.flush_requested && dirty > 0) {
            return Poll::Ready(());
        }
        inner.flusher_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Future returned by [`Store::logics_wanted`].
pub struct LogicsWanted<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    lag_bytes: u64,
}

impl<D: Disk> Future for LogicsWanted<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        let lag = inner.commitlog.flushed_pos.saturating_sub(inner.checkpoint_logics_phys);
        if inner.failed.is_some() || (lag >= self.lag_bytes && !inner.logics_flushing) {
            return Poll::Ready(());
        }
        inner.logics_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Future returned by [`Store::wait_appended`].
pub struct AppendWait<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    after: u64,
}

impl<D: Disk> Future for AppendWait<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        if inner.failed.is_some() || inner.commitlog.write_pos > self.after {
            return Poll::Ready(());
        }
        // Bounded by the waiting tasks: the list is drained at every append.
        if !inner.append_wakers.iter().any(|w| w.will_wake(cx.waker())) {
            inner.append_wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Future returned by [`Store::wait_durable`].
pub struct DurableWait<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    ticket: u64,
}

impl<D: Disk> Future for DurableWait<D> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut inner = self.inner.borrow_mut();
        if let Some(reason) = &inner.failed {
            return Poll::Ready(Err(StoreError::Failed(reason.clone())));
        }
        if inner.commitlog.flushed_pos >= self.ticket {
            return Poll::Ready(Ok(()));
        }
        inner.waiters.entry(self.ticket).or_default().push(cx.waker().clone());
        Poll::Pending
    }
}

pub(crate) mod open;
pub use open::open_store;
pub(crate) mod scrub;
pub use scrub::{ScrubFinding, ScrubStep};
