//! The replica's side of the log (issue 13): appending a master's records byte for
//! byte, re-seeding an empty store at a master's segment start, reading durable records
//! for a replica, and waiting for the log to grow.
//!
//! Invariants: a replicated batch is checked whole before anything is appended (record
//! framing, body CRC, physical offset, the torn-record rule, queue continuity), and
//! only a prefix of whole records is appended; a master hands a replica only bytes
//! below its durable end, so a restarted master is never behind its slaves.

use super::*;
use crate::store::consumequeue::ENTRY_BYTES;
use crate::store::io::{align_down, BLOCK_BYTES};
use ringmq_client::message::stored::{record_head, RecordHead, StoredMessageView, BLANK_LEN_MIN_BYTES};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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

impl<D: Disk, C: Clock> Store<D, C> {
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
        // First pass: check every record without changing anything.
        let plan = self.check_replicated(inner, bytes)?;
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
            if local == inner.commitlog_start {
                inner.earliest_record = Some((local, view.store_timestamp_ms()));
            }
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

    /// Checks a replicated batch whole, changing nothing: each record as recovery checks
    /// it, each message continuing its queue. The plan lists every record of the batch.
    fn check_replicated(&self, inner: &Inner<D>, bytes: &[u8]) -> Result<Vec<ReplicaPlanItem>, StoreError> {
        let log_start = inner.commitlog_start;
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
                    if n as u64 > self.config.record_bytes_limit() || pos + n as u64 + BLANK_LEN_MIN_BYTES as u64 > seg_end || at + n > bytes.len() {
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
        Ok(plan)
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
        let want = (end - local).min(max_bytes.max(1) as u64) as usize;
        let mut bytes = self.read_commitlog(phys_from, want).await?;
        // A first record longer than `max_bytes` goes alone: read it whole. (Reading
        // `record_bytes_limit()` every time instead would read up to 16 MiB per batch.)
        if let RecordHead::Blank(n) | RecordHead::Message(n) = record_head(&bytes) {
            if n > bytes.len() && n as u64 <= self.config.record_bytes_limit() && n as u64 <= end - local {
                bytes = self.read_commitlog(phys_from, n).await?;
            }
        }
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
