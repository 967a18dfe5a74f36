//! Opening a shard's store: recovery (DESIGN.md §3).
//!
//! 1. An `abort` file present means the last stop was unclean; it is (re)created now
//!    and removed only by a clean `close`.
//! 2. The checkpoint (newest valid copy) says where the CommitLog, the ConsumeQueues
//!    and the index were known durable; without one, everything is scanned.
//! 3. ConsumeQueue entries at or past the replay point are cut; then every record from
//!    the scan start to the end is verified (magic, lengths, body CRC, physical offset)
//!    and its queue and index entries are re-added past their persisted end.
//! 4. The first bad or empty position `E` is the end of the log only if nothing but
//!    zeros follows past one group-commit window (`torn_window_bytes`): a torn tail.
//!    Data beyond that window means a record in the middle is bad: start-up stops with
//!    an error naming the file and offset, unless `allow_truncate_corrupt`.
//! 5. A queue whose entries do not line up with the records (deleted or damaged files)
//!    is rebuilt from the whole CommitLog. Every entry kept from before the replay point
//!    is checked first (physical offset inside this shard's log and below the replay
//!    point, strictly increasing, a plausible record size): a queue with one bad entry
//!    is rebuilt. This reads every ConsumeQueue file once at start-up (20 bytes per
//!    message).
//!
//! 6. A pending cut (`truncate.rs`, controller mode) ends the log there whatever
//!    follows, through step 4's `allow_truncate_corrupt` path; the report names it and
//!    the caller removes the marker.
//!
//! Invariant: after `open_store` returns, the bytes past the end within one window are
//! zero on disk, so the next recovery cannot mistake stale garbage for a torn tail.

use super::*;
use crate::store::checkpoint::Checkpoint;
use crate::store::consumequeue::ENTRY_BYTES;
use crate::store::io::{align_down, align_up, DiskFile, IoError, BLOCK_BYTES};
use crate::store::segmented::{log_accessor, read_log};
use ringmq_client::message::stored::{record_head, RecordHead, StoredMessageView, BLANK_LEN_MIN_BYTES};
// Ordered sets: which queues are rebuilt, in which order, is the same in every run.
use std::collections::BTreeSet;

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
    /// A pending cut's marker was found (its local offset): the log ends there unless it
    /// already ended before. The marker stays until `Store::clear_truncate_marker`.
    pub pending_cut: Option<u64>,
    /// Wall-clock milliseconds of each phase of the open, in order (the log shows them).
    pub phases_ms: Vec<(&'static str, i64)>,
}

/// Bytes read per piece while scanning.
const SCAN_READ_BYTES: u64 = 4 * 1024 * 1024;

struct Scanner<F: DiskFile> {
    files: BTreeMap<u64, Rc<F>>,
    segment_bytes: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<F: DiskFile> Scanner<F> {
    fn new(files: BTreeMap<u64, Rc<F>>, segment_bytes: u64) -> Self {
        Self { files, segment_bytes, buf: Vec::new(), buf_start: 0 }
    }

    /// Up to `len` bytes at `pos` within `pos`'s segment (short at the file's end).
    async fn bytes_at(&mut self, pos: u64, len: u64) -> Result<&[u8], IoError> {
        let buf_end = self.buf_start + self.buf.len() as u64;
        if !(pos >= self.buf_start && pos + len <= buf_end) {
            let seg = align_down(pos, self.segment_bytes);
            let Some(file) = self.files.get(&seg) else {
                self.buf.clear();
                self.buf_start = pos;
                return Ok(&self.buf[..]);
            };
            let want = len.max(SCAN_READ_BYTES).min(seg + self.segment_bytes - pos);
            self.buf = file.read_at(pos - seg, want as usize).await?;
            self.buf_start = pos;
        }
        let at = (pos - self.buf_start) as usize;
        let end = (at + len as usize).min(self.buf.len());
        Ok(&self.buf[at..end])
    }

    /// The last non-zero byte in `[from, to)` (every segment it spans), if any.
    async fn last_nonzero_in(&mut self, from: u64, to: u64) -> Result<Option<u64>, IoError> {
        let mut last = None;
        let starts: Vec<u64> = self.files.keys().copied().filter(|&s| s + self.segment_bytes > from && s < to).collect();
        for seg in starts {
            let file = self.files[&seg].clone();
            let size = file.size().await?.min(self.segment_bytes);
            let mut at = from.max(seg) - seg;
            let end = (to - seg).min(size);
            while at < end {
                let n = SCAN_READ_BYTES.min(end - at);
                let bytes = file.read_at(at, n as usize).await?;
                if let Some(i) = bytes.iter().rposition(|&b| b != 0) {
                    last = Some(seg + at + i as u64);
                }
                if (bytes.len() as u64) < n {
                    break;
                }
                at += n;
            }
        }
        Ok(last)
    }

    /// The first non-zero byte in the probe regions at or after `from`: the
    /// `probe_bytes` from `from` within its segment, and the first block of every later
    /// segment. Bounded (no read of the rest of a 1 GiB pre-allocated segment), yet it
    /// finds any record written at or after `from`: records are written back to back
    /// from each segment's start and none is longer than `record_bytes_limit()`, so if
    /// anything was written past `from + probe_bytes`, a record header (never zero)
    /// starts inside the probe, and a later segment that holds records starts with one.
    async fn first_record_bytes_from(&mut self, from: u64, probe_bytes: u64) -> Result<Option<u64>, IoError> {
        let starts: Vec<u64> = self.files.keys().copied().filter(|s| s + self.segment_bytes > from).collect();
        for seg in starts {
            let file = self.files[&seg].clone();
            let size = file.size().await?.min(self.segment_bytes);
            let at = from.max(seg) - seg;
            let probe_end = if from > seg { (at + probe_bytes).min(size) } else { BLOCK_BYTES.min(size) };
            let mut cursor = at;
            while cursor < probe_end {
                let n = SCAN_READ_BYTES.min(probe_end - cursor);
                let bytes = file.read_at(cursor, n as usize).await?;
                if let Some(i) = bytes.iter().position(|&b| b != 0) {
                    return Ok(Some(seg + cursor + i as u64));
                }
                if (bytes.len() as u64) < n {
                    break;
                }
                cursor += n;
            }
        }
        Ok(None)
    }
}

enum ScanEnd {
    /// Zeros: nothing was written here.
    Empty,
    /// No segment file holds this position.
    NoFile,
    Bad(String),
}

/// Wall-clock phases of the open, for the log: where start-up time goes.
struct Phases {
    start_ms: i64,
}

impl Phases {
    /// Records the phase `name` as ending at `now_ms`; the next one starts there.
    fn end(&mut self, report: &mut RecoveryReport, name: &'static str, now_ms: i64) {
        report.phases_ms.push((name, now_ms - self.start_ms));
        self.start_ms = now_ms;
    }
}

/// Where the scan starts and what it re-adds (local CommitLog offsets).
struct ReplayFrom {
    /// The first record read: the lowest of the points below and the checkpoint's
    /// durable CommitLog end (records past it are verified).
    scan: u64,
    /// Records from here get their ConsumeQueue entries again.
    cq: u64,
    /// Records from here get their index entries again.
    index: u64,
}

/// Opens (recovering if needed) the store of one shard under `dir`.
pub async fn open_store<D: Disk, C: Clock>(
    disk: D,
    clock: C,
    dir: PathBuf,
    shard: ShardId,
    config: StoreConfig,
) -> Result<(Store<D, C>, RecoveryReport), StoreError> {
    config.validate()?;
    assert!(shard.0 < SHARD_COUNT_MAX, "shard id {} out of range", shard.0);
    let mut report = RecoveryReport::default();
    let mut phases = Phases { start_ms: clock.now_ms() };
    let checkpoint = mark_abort_and_load_checkpoint(&disk, &dir, &mut report).await?;
    phases.end(&mut report, "abort_and_checkpoint", clock.now_ms());
    report.checkpoint_found = checkpoint.is_some();
    report.pending_cut = super::truncate::read_marker(&disk, &dir).await?;

    let commitlog_dir = Store::<D, C>::commitlog_dir(&dir);
    let (commitlog, mut sizes) = open_commitlog(&disk, commitlog_dir, shard, &config).await?;
    let first_segment = commitlog.files.keys().next().copied().unwrap_or(0);
    phases.end(&mut report, "segments", clock.now_ms());

    let (index, index_from, index_scan_from) = open_index(&disk, &dir, &config, report.unclean, checkpoint, first_segment, clock.now_ms()).await?;
    let mut queues = load_queues(&disk, &dir, &config).await?;
    let has_data = sizes.values().any(|&s| s > 0);
    let (cq_from, damaged, dropped) = recover_queues(&disk, &mut queues, shard, &config, checkpoint, first_segment, has_data).await?;
    report.rebuilt_queues = dropped;
    let verify_from = checkpoint.map(|c| c.commitlog_phys).unwrap_or(first_segment).max(first_segment);
    let replay = ReplayFrom { scan: verify_from.min(cq_from).min(index_scan_from), cq: cq_from, index: index_from };
    report.scanned_from = replay.scan;
    report.index_replayed = index_from < verify_from;

    let store = Store {
        inner: Rc::new(RefCell::new(recovering_inner(commitlog, queues, index, checkpoint, first_segment))),
        disk: disk.clone(),
        clock,
        config: Rc::new(config),
        shard,
        dir: dir.clone(),
    };
    phases.end(&mut report, "index_and_queues", store.clock.now_ms());

    let files = store.inner.borrow().commitlog.files.clone();
    let mut scanner = Scanner::new(files, store.config.segment_bytes);
    let (scan_end, how, rebuild) = replay_log(&store, &mut scanner, &replay, &sizes, damaged).await?;
    report.records_scanned = store.stats().records_put;
    // A pending cut at or below the end gives up what follows it, as a corrupt record
    // would under allow_truncate_corrupt: nothing past it is checked. At the end too: a
    // cut interrupted by a power cut may have zeroed what follows it only in part.
    let cut = report.pending_cut.filter(|&c| c <= scan_end);
    let end = cut.unwrap_or(scan_end);
    let truncating_corrupt = match cut {
        Some(_) => {
            tracing::warn!(shard = shard.0, cut = shard.phys(end), end = shard.phys(scan_end), "applying the pending cut: the records past it are not on this broker's master");
            true
        }
        None => check_end(&store, &mut scanner, end, &how, checkpoint).await?,
    };
    report.end_offset = end;
    phases.end(&mut report, "scan", store.clock.now_ms());

    // After a clean stop that ended on zeros nothing was written past the end (every
    // flush completed and wrote zeros after it in its last block). After a crash, or a
    // bad record, the window may hold torn or stale records: zeroed below, or a stale
    // record with a valid CRC could come back after a later crash.
    let mut written_end = if report.unclean || matches!(how, ScanEnd::Bad(_)) {
        // Only up to the last byte written: usually one torn flush, not the whole window
        // (zeroing 64 MiB of a fallocated segment costs seconds of extent conversions).
        scanner.last_nonzero_in(end, end + store.config.torn_window_bytes()).await?.map(|at| at + 1).unwrap_or(end)
    } else {
        end
    };
    if cut.is_some() {
        // Zeroed up to the last byte the given-up records (and a torn write after them)
        // left, within the cut's segment; later segments are removed.
        let data_end = scanner.last_nonzero_in(end, scan_end + store.config.torn_window_bytes()).await?.map(|at| at + 1).unwrap_or(end);
        let segment_end = give_up_past_end(&store, &mut scanner, &mut sizes, end).await?;
        written_end = written_end.max(data_end.min(segment_end));
    } else if truncating_corrupt {
        written_end = written_end.max(give_up_past_end(&store, &mut scanner, &mut sizes, end).await?);
    }
    report.truncated_bytes = written_end - end;

    // Queues that did not line up are rebuilt from the start of the log.
    if !rebuild.is_empty() {
        report.rebuilt_queues = rebuild.len();
        rebuild_queues(&store, &scanner, &sizes, first_segment, &rebuild).await?;
    }

    // Position the CommitLog at `end`, zero what lies past it within one window, and
    // drop segments that were never completely pre-allocated.
    let prefix = last_block(&store, &mut scanner, end).await?;
    drop_unfinished_segments(&store, &sizes, end).await?;
    phases.end(&mut report, "probe_and_rebuild", store.clock.now_ms());
    settle_log(&store, end, &prefix, written_end, first_segment).await?;
    phases.end(&mut report, "zero_and_flush", store.clock.now_ms());
    if report.unclean {
        tracing::info!(shard = shard.0, end, scanned_from = replay.scan, records = report.records_scanned, phases_ms = ?report.phases_ms, "recovered after an unclean stop");
    } else {
        tracing::info!(shard = shard.0, end, scanned_from = replay.scan, phases_ms = ?report.phases_ms, "store opened after a clean stop");
    }
    note_earliest_record(&store).await;
    // Counters describe this run, not recovery.
    store.inner.borrow_mut().stats = StoreStats::default();
    Ok((store, report))
}

/// Reads the store time of the log's first record once (`Store::earliest_message_time`).
/// A failed read does not fail the open: the time is then unknown until an append or
/// retention sets it.
async fn note_earliest_record<D: Disk, C: Clock>(store: &Store<D, C>) {
    let start = store.log_start();
    if store.write_offset() <= start {
        return;
    }
    match store.read_record(store.shard.phys(start), None).await {
        Ok(Some(bytes)) => {
            if let Ok(view) = StoredMessageView::parse(&bytes) {
                store.inner.borrow_mut().earliest_record = Some((start, view.store_timestamp_ms()));
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(shard = store.shard.0, error = %e, "the log's first record could not be read: its store time stays unknown"),
    }
}

/// Notes whether the last stop was unclean (an `abort` file left over; else one is
/// created now, which only a clean `close` removes) and loads the newest valid
/// checkpoint.
async fn mark_abort_and_load_checkpoint<D: Disk>(disk: &D, dir: &Path, report: &mut RecoveryReport) -> Result<Option<Checkpoint>, StoreError> {
    disk.create_dir_all(dir).await?;
    let abort = dir.join("abort");
    report.unclean = disk.exists(&abort).await?;
    if !report.unclean {
        disk.open(&abort, true).await?;
        disk.sync_dir(dir).await?;
    }
    Ok(Checkpoint::load(disk, &dir.join("checkpoint")).await?)
}

/// The CommitLog's segment files, opened, and their sizes. A short segment holding
/// records is extended first (`extend_truncated_tail`).
async fn open_commitlog<D: Disk>(disk: &D, commitlog_dir: PathBuf, shard: ShardId, config: &StoreConfig) -> Result<(SegmentedLog<D>, BTreeMap<u64, u64>), StoreError> {
    let mut commitlog = SegmentedLog::<D>::new(commitlog_dir.clone(), config.segment_bytes, shard.phys(0), 1024 * 1024, config.tail_cache_bytes, Some(config.preallocate));
    commitlog.write_through = config.write_through();
    let mut sizes = BTreeMap::new();
    for name in disk.list(&commitlog_dir).await? {
        let Some(start) = commitlog.parse_name(&name) else {
            tracing::warn!(file = %commitlog_dir.join(&name).display(), "ignoring unexpected file in commitlog directory");
            continue;
        };
        let path = commitlog.path_of(start);
        let file = if config.write_through() { disk.open_write_through(&path, false).await? } else { disk.open(&path, false).await? };
        sizes.insert(start, file.size().await?);
        commitlog.files.insert(start, Rc::new(file));
    }
    extend_truncated_tail(&commitlog, &mut sizes, config.segment_bytes).await?;
    Ok((commitlog, sizes))
}

/// The index (repaired to the checkpoint's mark after a crash where it can be), and
/// where its entries are re-added from: (first record re-indexed, where the scan must
/// start for it).
async fn open_index<D: Disk>(
    disk: &D,
    dir: &Path,
    config: &StoreConfig,
    unclean: bool,
    checkpoint: Option<Checkpoint>,
    first_segment: u64,
    now_ms: i64,
) -> Result<(IndexService<D>, u64, u64), StoreError> {
    let index_mark = checkpoint.and_then(|c| c.index_mark);
    let index = IndexService::open_at_mark(disk.clone(), dir.join("index"), config.index.clone(), !unclean, index_mark, now_ms).await?;
    // Records at or past `index_from` get their index entries again. After an unclean
    // stop where the index discarded its newest file, it reports a record boundary (the
    // start of that file). After a clean stop, or a crash where the newest file was
    // repaired to the checkpoint's mark, it reports "one past the last key it holds",
    // which need not be a boundary; but the `flush_logics` of that checkpoint flushed
    // the index with every record below `logics_phys`, so the scan may start there and
    // skip what the index already has.
    let index_raw = local_of(index.replay_from_phys());
    let logics_phys = checkpoint.map(|c| c.logics_phys).unwrap_or(0);
    // No index files although the checkpoint does not say the index was empty: they
    // were deleted, and everything is indexed again.
    let index_empty_at_checkpoint = checkpoint.is_some_and(|c| c.index_mark_known && c.index_mark.is_none());
    let index_files_lost = index.file_count() == 0 && !index_empty_at_checkpoint;
    let (index_from, index_scan_from) = if (unclean && !index.repaired_to_mark() && index.file_count() > 0) || index_files_lost {
        (index_raw, index_raw)
    } else {
        (index_raw.max(logics_phys), logics_phys)
    };
    let index_from = index_from.max(first_segment);
    let index_scan_from = index_scan_from.max(first_segment);
    Ok((index, index_from, index_scan_from))
}

/// Every ConsumeQueue under `consumequeue/`, loaded from its files.
async fn load_queues<D: Disk>(disk: &D, dir: &Path, config: &StoreConfig) -> Result<QueueMap<D>, StoreError> {
    let mut queues: QueueMap<D> = QueueMap::default();
    let cq_root = dir.join("consumequeue");
    for topic in disk.list(&cq_root).await? {
        for qid_name in disk.list(&cq_root.join(&topic)).await? {
            let Ok(queue_id) = qid_name.parse::<i32>() else { continue };
            let mut cq = ConsumeQueue::new(cq_root.join(&topic).join(&qid_name), &topic, queue_id, config.cq_entries_per_file, config.cq_tail_entries);
            cq.load(disk).await?;
            queues.insert((topic.clone(), queue_id), cq);
        }
    }
    Ok(queues)
}

/// Brings the queues back to the checkpoint's replay point, before the scan re-adds
/// entries past it. Returns where the scan re-adds queue entries from, the queues whose
/// kept entries are damaged (rebuilt after the scan), and how many queues were dropped
/// whole because they do not match the checkpoint (all of them, or 0).
async fn recover_queues<D: Disk>(
    disk: &D,
    queues: &mut QueueMap<D>,
    shard: ShardId,
    config: &StoreConfig,
    checkpoint: Option<Checkpoint>,
    first_segment: u64,
    has_data: bool,
) -> Result<(u64, BTreeSet<QueueKey>, usize), StoreError> {
    // Queue entries are cut at the checkpoint's replay point (all of them without a
    // checkpoint), even below the first segment: an entry for a record that never
    // became durable must not survive because its segment was never created.
    let cut_phys = checkpoint.map(|c| c.logics_phys).unwrap_or(0);
    let mut cq_from = cut_phys.max(first_segment);
    if queues.is_empty() && has_data {
        // The whole consumequeue directory is gone: rebuild every queue.
        cq_from = first_segment;
    }

    // Cut queue entries at or past the replay point; they are re-added by the scan.
    for cq in queues.values_mut() {
        cut_queue(disk, cq, shard.phys(cut_phys)).await?;
    }
    // Entries kept from before the replay point must be plausible; a queue with a bad
    // one (garbage written over it, a damaged file) is rebuilt after the scan.
    let mut damaged: BTreeSet<QueueKey> = BTreeSet::new();
    for (key, cq) in queues.iter() {
        if let Some(why) = queue_damage(cq, shard.phys(0), shard.phys(cut_phys), config.record_bytes_limit()).await? {
            tracing::warn!(topic = %key.0, queue = key.1, reason = %why, "consume queue entry is damaged: the queue will be rebuilt");
            damaged.insert(key.clone());
        }
    }
    // Every record below the replay point has exactly one entry: if the queues hold
    // fewer (files deleted) or more, rebuild them all from the start of the log.
    let mut dropped = 0;
    if let Some(cp) = checkpoint {
        let entries: u64 = queues.values().map(|q| q.max_offset()).sum();
        if entries != cp.records_below_logics {
            tracing::warn!(entries, expected = cp.records_below_logics, "consume queues do not match the checkpoint: rebuilding all of them");
            for cq in queues.values() {
                for name in disk.list(&cq.log.dir).await? {
                    disk.remove(&cq.log.dir.join(name)).await?;
                }
            }
            dropped = queues.len();
            queues.clear();
            damaged.clear();
            cq_from = first_segment;
        }
    }
    Ok((cq_from, damaged, dropped))
}

/// The shared state of a store being recovered: the log, queues and index as opened,
/// counters at zero (the scan counts the records).
fn recovering_inner<D: Disk>(commitlog: SegmentedLog<D>, queues: QueueMap<D>, index: IndexService<D>, checkpoint: Option<Checkpoint>, first_segment: u64) -> Inner<D> {
    Inner {
        commitlog,
        queues,
        index: Some(index),
        index_pending: Vec::new(),
        index_waiters: Vec::new(),
        scratch: Vec::new(),
        failed: None,
        disk_full: None,
        disk_above_max_used: false,
        runtime_config: None,
        flush_interval_changed: false,
        waiters: BTreeMap::new(),
        checkpoint_sequence: checkpoint.map(|c| c.sequence).unwrap_or(0),
        checkpoint_file: None,
        logics_flushing: false,
        logics_waker: None,
        read_ahead: std::collections::VecDeque::new(),
        read_ahead_loading: Vec::new(),
        read_ahead_waiters: Vec::new(),
        read_ahead_prefetching: 0,
        cq_pull_blocks: std::collections::VecDeque::new(),
        scrub_pos: 0,
        stats: StoreStats::default(),
        flusher_waker: None,
        append_wakers: Vec::new(),
        flush_requested: false,
        records_appended: 0,
        records_flushed: 0,
        queues_deleted: Vec::new(),
        checkpoint_logics_phys: 0,
        commitlog_start: first_segment,
        earliest_record: None,
    }
}

/// Sets the record counters to what the queues hold (the sum of their max offsets):
/// every record recovered is durable.
fn count_recovered_records<D: Disk, C: Clock>(store: &Store<D, C>, total: u64) {
    let mut inner = store.inner.borrow_mut();
    inner.records_appended = total;
    inner.records_flushed = total;
}

/// Scans the log from `replay.scan`, re-adding each valid record's queue entry (from
/// `replay.cq`) and index keys (from `replay.index`). Returns where the log ends, why
/// it ends there, and the queues to rebuild (`damaged` and those whose entries did not
/// line up with the records).
async fn replay_log<D: Disk, C: Clock>(
    store: &Store<D, C>,
    scanner: &mut Scanner<D::File>,
    replay: &ReplayFrom,
    sizes: &BTreeMap<u64, u64>,
    damaged: BTreeSet<QueueKey>,
) -> Result<(u64, ScanEnd, BTreeSet<QueueKey>), StoreError> {
    let mut rebuild: BTreeSet<QueueKey> = damaged;
    let (end, how) = scan(store, scanner, replay.scan, sizes, &mut |store, pos, view| {
        dispatch(store, pos, view, replay.cq, replay.index, &mut rebuild, None);
    })
    .await?;
    let total: u64 = store.inner.borrow().queues.values().map(|q| q.max_offset()).sum();
    count_recovered_records(store, total);
    Ok((end, how, rebuild))
}

/// Whether the log may end at `end`: a bad record or a hole there is a torn tail only
/// if nothing was written past one write window; anything beyond it stops start-up
/// with an error naming the file and offset, unless `allow_truncate_corrupt`, and so
/// does a log that ends before the checkpoint's durable offset. Returns whether the log
/// is cut at a corrupt record (what follows is given up).
async fn check_end<D: Disk, C: Clock>(store: &Store<D, C>, scanner: &mut Scanner<D::File>, end: u64, how: &ScanEnd, checkpoint: Option<Checkpoint>) -> Result<bool, StoreError> {
    let window = store.config.torn_window_bytes();
    let end_file = store.inner.borrow().commitlog.path_of(align_down(end, store.config.segment_bytes));
    // One longest record past the window: enough to see any record written there.
    let probe_bytes = store.config.record_bytes_limit() + BLOCK_BYTES;
    let beyond = scanner.first_record_bytes_from(end + window, probe_bytes).await?;
    let bad_reason = match (how, beyond) {
        (_, Some(at)) => Some(format!(
            "{}; valid-looking data follows at offset {} past the last write window ({} bytes)",
            match how {
                ScanEnd::Bad(r) => r.clone(),
                _ => "the log has a hole".into(),
            },
            store.shard.phys(at),
            window
        )),
        _ => None,
    };
    let truncating_corrupt = bad_reason.is_some();
    if let Some(reason) = bad_reason {
        let err = StoreError::Corrupt { file: end_file.clone(), offset: store.shard.phys(end), reason };
        if !store.config.allow_truncate_corrupt {
            return Err(err);
        }
        tracing::error!(error = %err, "allow_truncate_corrupt is set: truncating the CommitLog here, losing what follows");
    } else if let ScanEnd::Bad(reason) = how {
        tracing::warn!(file = %end_file.display(), offset = store.shard.phys(end), %reason, "torn tail inside the last write window: truncated");
    }
    if let Some(cp) = checkpoint {
        if end < cp.commitlog_phys && !store.config.allow_truncate_corrupt {
            return Err(StoreError::Corrupt {
                file: end_file,
                offset: store.shard.phys(end),
                reason: format!("the log ends before the checkpoint's durable offset {}", store.shard.phys(cp.commitlog_phys)),
            });
        }
    }
    Ok(truncating_corrupt)
}

/// Gives up everything past `end` (a corrupt record with data after it, under
/// `allow_truncate_corrupt`). Queue entries below the checkpoint that point there are
/// cut (else pulls fail on them forever), and the records there are zeroed or removed
/// (else the next recovery finds them past the new end and refuses to start, or
/// truncates again, losing what was acknowledged since): the later segments go here,
/// and the returned offset is how far the caller zeroes.
async fn give_up_past_end<D: Disk, C: Clock>(store: &Store<D, C>, scanner: &mut Scanner<D::File>, sizes: &mut BTreeMap<u64, u64>, end: u64) -> Result<u64, StoreError> {
    let end_segment = align_down(end, store.config.segment_bytes);
    let mut queues = std::mem::take(&mut store.inner.borrow_mut().queues);
    for cq in queues.values_mut() {
        cut_queue(&store.disk, cq, store.shard.phys(end)).await?;
    }
    let total: u64 = queues.values().map(|q| q.max_offset()).sum();
    store.inner.borrow_mut().queues = queues;
    count_recovered_records(store, total);
    let later: Vec<u64> = sizes.keys().copied().filter(|&s| s > end_segment).collect();
    for start in later {
        let path = store.inner.borrow().commitlog.path_of(start);
        store.inner.borrow_mut().commitlog.files.remove(&start);
        scanner.files.remove(&start);
        sizes.remove(&start);
        store.disk.remove(&path).await?;
    }
    store.disk.sync_dir(&Store::<D, C>::commitlog_dir(&store.dir)).await?;
    Ok(end_segment + store.config.segment_bytes)
}

/// Rebuilds the queues in `rebuild` from the start of the log: their files are removed
/// and a second scan re-adds their entries only (index entries are not added again).
async fn rebuild_queues<D: Disk, C: Clock>(
    store: &Store<D, C>,
    scanner: &Scanner<D::File>,
    sizes: &BTreeMap<u64, u64>,
    first_segment: u64,
    rebuild: &BTreeSet<QueueKey>,
) -> Result<(), StoreError> {
    for key in rebuild {
        tracing::warn!(topic = %key.0, queue = key.1, "consume queue inconsistent with the commitlog: rebuilding");
        let dir = store.cq_dir(&key.0, key.1);
        for name in store.disk.list(&dir).await? {
            store.disk.remove(&dir.join(name)).await?;
        }
        let fresh = ConsumeQueue::new(dir, &key.0, key.1, store.config.cq_entries_per_file, store.config.cq_tail_entries);
        store.inner.borrow_mut().queues.insert(key.clone(), fresh);
    }
    let total: u64 = store.inner.borrow().queues.iter().filter(|(k, _)| !rebuild.contains(*k)).map(|(_, q)| q.max_offset()).sum();
    let mut fresh_scanner = Scanner::new(scanner.files.clone(), store.config.segment_bytes);
    let mut ignored = BTreeSet::new();
    scan(store, &mut fresh_scanner, first_segment, sizes, &mut |store, pos, view| {
        dispatch(store, pos, view, 0, u64::MAX, &mut ignored, Some(rebuild));
    })
    .await?;
    let rebuilt: u64 = store.inner.borrow().queues.iter().filter(|(k, _)| rebuild.contains(*k)).map(|(_, q)| q.max_offset()).sum();
    count_recovered_records(store, total + rebuilt);
    Ok(())
}

/// The bytes of the log's last block below `end` (the CommitLog is positioned there
/// with them).
async fn last_block<D: Disk, C: Clock>(store: &Store<D, C>, scanner: &mut Scanner<D::File>, end: u64) -> Result<Vec<u8>, StoreError> {
    let block = align_down(end, BLOCK_BYTES);
    let prefix = if end > block { scanner.bytes_at(block, end - block).await?.to_vec() } else { Vec::new() };
    if prefix.len() as u64 != end - block {
        let end_file = store.inner.borrow().commitlog.path_of(align_down(end, store.config.segment_bytes));
        return Err(StoreError::Corrupt { file: end_file, offset: store.shard.phys(end), reason: "short read of the last block".into() });
    }
    Ok(prefix)
}

/// Removes the segments at or past `end`'s whose pre-allocation did not finish (short
/// files); a short segment below it is corrupt.
async fn drop_unfinished_segments<D: Disk, C: Clock>(store: &Store<D, C>, sizes: &BTreeMap<u64, u64>, end: u64) -> Result<(), StoreError> {
    let segment_bytes = store.config.segment_bytes;
    let end_segment = align_down(end, segment_bytes);
    for (&start, &size) in sizes {
        if start >= end_segment && size < segment_bytes {
            tracing::warn!(segment = start, size, "removing a segment whose pre-allocation did not finish");
            let path = store.inner.borrow().commitlog.path_of(start);
            store.inner.borrow_mut().commitlog.files.remove(&start);
            store.disk.remove(&path).await?;
        } else if start < end_segment && size < segment_bytes {
            return Err(StoreError::Corrupt {
                file: store.inner.borrow().commitlog.path_of(start),
                offset: store.shard.phys(start),
                reason: format!("segment is {size} bytes, expected {segment_bytes}"),
            });
        }
    }
    Ok(())
}

/// Positions the CommitLog at `end` (its last block `prefix`), zeroes what was written
/// past it up to `written_end`, rewrites the partial last block, and brings the queues,
/// the index and the checkpoint in line with the log.
async fn settle_log<D: Disk, C: Clock>(store: &Store<D, C>, end: u64, prefix: &[u8], written_end: u64, first_segment: u64) -> Result<(), StoreError> {
    let block = align_down(end, BLOCK_BYTES);
    store.inner.borrow_mut().commitlog.reset_at(end, prefix);
    if written_end > end {
        zero_range(store, align_up(end, BLOCK_BYTES), written_end).await?;
    }
    // Rewrite the partial last block (zeros after `end`) before anything else.
    store.inner.borrow_mut().commitlog.flushed_pos = block;
    store.flush().await?;
    if first_segment > 0 {
        // Retention deleted the log's start: queue minimums follow it.
        store.trim_logics().await?;
    }
    store.flush_logics().await?;
    Ok(())
}

/// Why `cq`'s newest entries are implausible, if they are: each entry of the queue's
/// last file must point inside this shard's log below `upper_phys`, at increasing
/// offsets, with a size a record can have. Only the last file is read, so start-up
/// costs the same at any store size; an entry damaged in an older file is caught when
/// it is read (every read checks the record's CRC and physical offset) or by the scrub.
async fn queue_damage<D: Disk>(cq: &ConsumeQueue<D>, lower_phys: u64, upper_phys: u64, record_bytes_max: u64) -> Result<Option<String>, IoError> {
    let end = cq.max_offset() * ENTRY_BYTES;
    let last_start = cq.log.segment_start(end.saturating_sub(1));
    let mut previous: Option<u64> = None;
    for (&start, file) in cq.log.files.range(last_start..) {
        if start >= end {
            break;
        }
        let len = (end - start).min(cq.log.segment_bytes);
        // Below the tail's base from the file, the rest from the tail: a queue just cut
        // at the replay point keeps its partial last block only in memory (the file was
        // shortened to the block boundary), and reading it from the file alone called
        // every cut queue "short" and rebuilt it from the whole log.
        let disk_len = len.min(cq.log.tail.base().saturating_sub(start));
        let mut bytes = file.read_at(0, disk_len as usize).await?;
        if bytes.len() as u64 == disk_len && disk_len < len {
            bytes.extend_from_slice(&cq.log.tail.read(start + disk_len, (len - disk_len) as usize));
        }
        if (bytes.len() as u64) < len {
            return Ok(Some(format!("file {start:020} is short: {} of {len} bytes", bytes.len())));
        }
        for (i, raw) in bytes.chunks_exact(ENTRY_BYTES as usize).enumerate() {
            let e = CqEntry::decode(raw);
            let offset = start / ENTRY_BYTES + i as u64;
            if offset < cq.min_offset {
                // Below the queue's start (holes of a re-seeded replica's queue).
                continue;
            }
            if e.phys_offset < lower_phys || e.phys_offset >= upper_phys {
                return Ok(Some(format!("entry {offset}: commitlog offset {} outside [{lower_phys}, {upper_phys})", e.phys_offset)));
            }
            if (e.size as u64) < BLANK_LEN_MIN_BYTES as u64 || e.size as u64 > record_bytes_max {
                return Ok(Some(format!("entry {offset}: size {}", e.size)));
            }
            if previous.is_some_and(|p| e.phys_offset <= p) {
                return Ok(Some(format!("entry {offset}: commitlog offset {} not after the previous entry's", e.phys_offset)));
            }
            previous = Some(e.phys_offset);
        }
    }
    Ok(None)
}

/// Whether `file` holds a non-zero byte in `[from, to)`.
async fn holds_data<F: DiskFile>(file: &F, from: u64, to: u64) -> Result<bool, IoError> {
    let mut at = from;
    while at < to {
        let bytes = file.read_at(at, SCAN_READ_BYTES.min(to - at) as usize).await?;
        if bytes.iter().any(|&b| b != 0) {
            return Ok(true);
        }
        if bytes.is_empty() {
            break;
        }
        at += bytes.len() as u64;
    }
    Ok(false)
}

/// A crash cannot shorten a segment: each is registered only once pre-allocated to its
/// full size. A short segment that holds records, with nothing written after it, was
/// truncated by something else (a copy, a damaged file system): extend it with zeros,
/// keeping every byte it has, so that the scan treats the lost bytes like any torn tail
/// (truncated inside the last write window, refused beyond it). Left short, it would be
/// taken for an unfinished pre-allocation and deleted with its records.
async fn extend_truncated_tail<D: Disk>(log: &SegmentedLog<D>, sizes: &mut BTreeMap<u64, u64>, segment_bytes: u64) -> Result<(), IoError> {
    if !sizes.values().any(|&size| size > 0 && size < segment_bytes) {
        return Ok(()); // the normal case: nothing to read
    }
    let mut truncated = None;
    for (&start, &size) in sizes.iter().rev() {
        let file = &log.files[&start];
        if holds_data(&**file, 0, size.min(segment_bytes)).await? {
            truncated = (size < segment_bytes).then_some((start, size));
            break;
        }
    }
    let Some((start, size)) = truncated else { return Ok(()) };
    let file = log.files[&start].clone();
    tracing::warn!(file = %log.path_of(start).display(), size, segment_bytes, "commitlog segment is short but holds records (truncated?): extending it with zeros");
    let block = align_down(size, BLOCK_BYTES);
    if block < size {
        let partial = file.read_at(block, (size - block) as usize).await?;
        let mut buf = file.alloc_buf(BLOCK_BYTES as usize);
        buf[..partial.len()].copy_from_slice(&partial);
        file.write_at(block, buf).await?;
    }
    let from = align_up(size, BLOCK_BYTES);
    file.write_zeros(from, segment_bytes - from).await?;
    file.sync().await?;
    sizes.insert(start, segment_bytes);
    Ok(())
}

async fn cut_queue<D: Disk>(disk: &D, cq: &mut ConsumeQueue<D>, cut_phys: u64) -> Result<(), StoreError> {
    // Entries are in CommitLog order within a queue: binary search the first entry at
    // or past the cut.
    let cell = RefCell::new(std::mem::replace(cq, ConsumeQueue::new(cq.log.dir.clone(), &cq.topic, cq.queue_id, cq.log.segment_bytes / ENTRY_BYTES, 0)));
    let get = log_accessor(|q: &mut ConsumeQueue<D>| &mut q.log);
    let (mut lo, mut hi) = { let q = cell.borrow(); (q.min_offset, q.max_offset()) };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let bytes = read_log(&cell, &get, mid * ENTRY_BYTES, ENTRY_BYTES as usize).await?;
        if bytes.len() < ENTRY_BYTES as usize || CqEntry::decode(&bytes).phys_offset >= cut_phys {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut q = cell.into_inner();
    if lo < q.max_offset() {
        let new_end = lo * ENTRY_BYTES;
        let block = align_down(new_end, BLOCK_BYTES);
        let prefix = {
            let c = RefCell::new(q);
            let p = read_log(&c, &get, block, (new_end - block) as usize).await?;
            q = c.into_inner();
            p
        };
        // Drop files past the new end and shorten the last one to the block boundary;
        // the partial block is rewritten (zeros after the end) by the next flush.
        let seg = q.log.segment_start(new_end);
        let later: Vec<u64> = q.log.files.keys().copied().filter(|&s| s > seg).collect();
        for s in later {
            q.log.files.remove(&s);
            disk.remove(&q.log.path_of(s)).await?;
        }
        if let Some(file) = q.log.files.get(&seg) {
            file.truncate(block - seg).await?;
        }
        q.log.reset_at(new_end, &prefix);
        q.log.flushed_pos = block;
    }
    *cq = q;
    Ok(())
}

async fn zero_range<D: Disk, C: Clock>(store: &Store<D, C>, from: u64, to: u64) -> Result<(), StoreError> {
    let to = align_up(to, BLOCK_BYTES);
    let (files, segment_bytes) = {
        let inner = store.inner.borrow();
        (inner.commitlog.files.clone(), inner.commitlog.segment_bytes)
    };
    // Per segment: the zeros in one go (the disk keeps several writes in flight), then
    // one sync; not a sync per MiB.
    let mut at = from;
    while at < to {
        let seg = align_down(at, segment_bytes);
        let piece_end = to.min(seg + segment_bytes);
        if let Some(file) = files.get(&seg) {
            file.write_zeros(at - seg, piece_end - at).await?;
            file.sync().await?;
        }
        at = piece_end;
    }
    Ok(())
}

/// Scans records from `from`; calls `on_record` for each valid one. Returns the end
/// position and why the scan stopped there.
async fn scan<D: Disk, C: Clock>(
    store: &Store<D, C>,
    scanner: &mut Scanner<D::File>,
    from: u64,
    sizes: &BTreeMap<u64, u64>,
    on_record: &mut dyn FnMut(&Store<D, C>, u64, &StoredMessageView<'_>),
) -> Result<(u64, ScanEnd), StoreError> {
    let segment_bytes = store.config.segment_bytes;
    let mut pos = from;
    loop {
        let seg = align_down(pos, segment_bytes);
        let seg_end = seg + segment_bytes;
        if !scanner.files.contains_key(&seg) || sizes.get(&seg).copied().unwrap_or(0) < segment_bytes {
            return Ok((pos, ScanEnd::NoFile));
        }
        let head = scanner.bytes_at(pos, 8).await?;
        if head.len() < 8 {
            return Ok((pos, ScanEnd::Bad("short read".into())));
        }
        match record_head(head) {
            RecordHead::Empty => return Ok((pos, ScanEnd::Empty)),
            RecordHead::Blank(n) => {
                if pos + n as u64 != seg_end {
                    return Ok((pos, ScanEnd::Bad(format!("blank record of {n} bytes does not end its segment"))));
                }
                pos = seg_end;
            }
            RecordHead::Message(n) => {
                if n as u64 > store.config.record_bytes_limit() || pos + n as u64 + BLANK_LEN_MIN_BYTES as u64 > seg_end {
                    return Ok((pos, ScanEnd::Bad(format!("record length {n} does not fit its segment"))));
                }
                let bytes = scanner.bytes_at(pos, n as u64).await?;
                let view = match StoredMessageView::parse_verified(bytes) {
                    Ok(v) => v,
                    Err(e) => return Ok((pos, ScanEnd::Bad(e.to_string()))),
                };
                if view.physical_offset() as u64 != store.shard.phys(pos) {
                    return Ok((pos, ScanEnd::Bad(format!("record says physical offset {}", view.physical_offset()))));
                }
                // The body CRC does not cover the header or the properties: a torn write
                // that zeroed those sectors would pass it. Every record the store writes
                // has a store time and properties without NUL (`Store::put` refuses
                // them), so zeros there mean a torn record.
                if view.store_timestamp_ms() == 0 || view.properties_bytes().contains(&0) {
                    return Ok((pos, ScanEnd::Bad("torn record: zeroed store time or properties".into())));
                }
                let view_copy = view;
                on_record(store, pos, &view_copy);
                pos += n as u64;
            }
            RecordHead::Invalid => return Ok((pos, ScanEnd::Bad("bad magic code or length".into()))),
        }
    }
}

fn dispatch<D: Disk, C: Clock>(
    store: &Store<D, C>,
    pos: u64,
    view: &StoredMessageView<'_>,
    cq_from: u64,
    index_from: u64,
    rebuild: &mut BTreeSet<QueueKey>,
    only: Option<&BTreeSet<QueueKey>>,
) {
    let Ok(topic) = view.topic() else { return };
    let key = (topic.to_string(), view.queue_id());
    let phys = store.shard.phys(pos);
    let mut inner = store.inner.borrow_mut();
    inner.stats.records_put += 1;
    let props = String::from_utf8_lossy(view.properties_bytes());
    if pos >= cq_from && only.is_none_or(|o| o.contains(&key)) && !rebuild.contains(&key) {
        let queue_offset = view.queue_offset().max(0) as u64;
        if !inner.queues.contains_key(&key) {
            let cq = ConsumeQueue::new(store.cq_dir(topic, view.queue_id()), topic, view.queue_id(), store.config.cq_entries_per_file, store.config.cq_tail_entries);
            inner.queues.insert(key.clone(), cq);
            if only.is_some() || queue_offset > 0 {
                // Starting mid-queue: everything before was deleted by retention (full
                // rebuild) or is missing (incremental replay: rebuild).
                let cq = inner.queues.get_mut(&key).expect("just inserted");
                if only.is_some() {
                    let start = queue_offset * ENTRY_BYTES;
                    let block = align_down(start, BLOCK_BYTES);
                    cq.log.reset_at(start, &vec![0u8; (start - block) as usize]);
                    cq.log.flushed_pos = block;
                    cq.min_offset = queue_offset;
                }
            }
        }
        let cq = inner.queues.get_mut(&key).expect("inserted above");
        if cq.max_offset() == queue_offset {
            cq.append(CqEntry { phys_offset: phys, size: view.total_size() as u32, tag_hash: tag_hash_of(&props) });
        } else if only.is_none() {
            rebuild.insert(key.clone());
        }
    }
    if pos >= index_from && only.is_none() {
        let ts = view.store_timestamp_ms();
        let Inner { index, index_pending, .. } = &mut *inner;
        for k in index_keys(topic, &props) {
            match index.as_mut() {
                Some(index) => index.put_hash(k, phys, ts),
                None => index_pending.push((k, phys, ts)),
            }
        }
    }
}
