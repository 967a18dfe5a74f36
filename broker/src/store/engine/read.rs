//! Pulls: a queue's ConsumeQueue entries (and the blocks of them kept for the next
//! pull), its records out of the tail, the read-ahead windows or the files, and the
//! background prefetch of the next window.
//!
//! Invariants: every record handed out is CRC-checked; a cached window holds only bytes
//! that were below the durable end when it was read (the log never changes there), at
//! most `read_ahead_windows_max` windows of `READ_AHEAD_WINDOW_BYTES`, at most
//! `READ_AHEAD_PREFETCH_MAX` read in the background, and one reader per window (the
//! others wait for it); a failed read is `StoreError::Read`, counted by `note_read`,
//! and never fails the store.

use super::*;
use crate::store::consumequeue::ENTRY_BYTES;
use crate::store::io::align_down;
use crate::store::segmented::{log_accessor, read_log, read_log_into};
use ringmq_client::message::stored::StoredMessageView;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Most messages one `get_messages` returns.
pub const GET_MESSAGES_MAX: usize = 1024;

/// Bytes read from disk in one piece during a cold read or a recovery scan.
pub const READ_SPAN_BYTES_MAX: u64 = 1024 * 1024;

/// CommitLog bytes one cold read fetches at once (aligned): a pull of one queue's
/// records, interleaved with the other queues', then finds the others' records in
/// memory too, and one large O_DIRECT read replaces many small ones (issue 15).
pub const READ_AHEAD_WINDOW_BYTES: u64 = 2 * 1024 * 1024;

/// Most read-ahead windows read in the background at once per shard.
pub const READ_AHEAD_PREFETCH_MAX: usize = 2;

/// Most ConsumeQueue blocks kept for pulls per shard (`Inner::cq_pull_blocks`; a block is
/// at most 16 Ki entries, 24 B each decoded: 24 MiB at the very most, ~6 MiB for pulls
/// of 1 024).
pub const CQ_PULL_BLOCKS_MAX: usize = 64;

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

impl<D: Disk, C: Clock> Store<D, C> {
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
    pub(super) async fn read_commitlog(&self, phys: u64, len: usize) -> Result<Vec<u8>, StoreError> {
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
}
