//! `SegmentedLog`: an append-only byte space stored in fixed-size segment files,
//! shared by the CommitLog (records) and every ConsumeQueue (20-byte entries).
//!
//! Owns: the open segment handles, the append position, the durable position, and the
//! in-memory tail. Flushing is split in three so that appends keep arriving while a
//! flush's IO is in flight (group commit): `begin_flush` (no IO: picks the dirty range),
//! `flush_log` (async IO, no borrow held across an await), `end_flush` (no IO).
//!
//! Invariants:
//! - `flushed_pos <= write_pos`; everything below `flushed_pos` was written and synced.
//! - at most one flush is in flight per log (`flushing`).
//! - the tail holds at least `[align_down(flushed_pos), write_pos)`.
//! - with `preallocate`, a segment enters `files` only after it was written full of
//!   zeros and synced, so data is only ever written over pre-zeroed blocks.
//! - a segment is created by one task at a time (its claim in `preparing`); one whose
//!   pre-allocation ran out of space is removed before that claim is released, so the
//!   next claimant never finds its file deleted under it.

use super::io::{align_down, align_up, Disk, DiskFile, IoError, IoErrorKind, BLOCK_BYTES};
use super::config::Preallocate;
use super::error::StoreError;
use super::tail::TailBuffer;
use futures_util::future::try_join_all;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// Largest single write issued; a flush issues its writes concurrently.
pub const WRITE_CHUNK_BYTES: u64 = 1024 * 1024;

pub struct SegmentedLog<D: Disk> {
    pub dir: PathBuf,
    pub segment_bytes: u64,
    /// Added to a segment's local start to form its file name (the shard bits).
    pub name_offset: u64,
    pub files: BTreeMap<u64, Rc<D::File>>,
    pub write_pos: u64,
    pub flushed_pos: u64,
    pub tail: TailBuffer,
    pub keep_flushed_bytes: u64,
    /// `None` for logs whose files grow as they are written (ConsumeQueues).
    pub preallocate: Option<Preallocate>,
    /// Segment files are opened write-through (O_DSYNC): a flush is its writes alone,
    /// with no fdatasync after them.
    pub write_through: bool,
    pub flushing: bool,
    /// Segments being created right now, and who waits for them: the pre-allocator and
    /// a flush may both need the same segment, and only one may create it (a second
    /// zero pass could land on records the first flush already wrote).
    pub preparing: std::collections::BTreeSet<u64>,
    pub prepare_waiters: Vec<std::task::Waker>,
}

/// What one flush covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushDone {
    pub from: u64,
    pub to: u64,
    pub written_bytes: u64,
}

impl<D: Disk> SegmentedLog<D> {
    pub fn new(dir: PathBuf, segment_bytes: u64, name_offset: u64, chunk_bytes: usize, keep_flushed_bytes: u64, preallocate: Option<Preallocate>) -> Self {
        assert!(segment_bytes % BLOCK_BYTES == 0, "segment size must be block-aligned");
        Self {
            dir,
            segment_bytes,
            name_offset,
            files: BTreeMap::new(),
            write_pos: 0,
            flushed_pos: 0,
            tail: TailBuffer::new(0, chunk_bytes),
            keep_flushed_bytes,
            preallocate,
            write_through: false,
            flushing: false,
            preparing: std::collections::BTreeSet::new(),
            prepare_waiters: Vec::new(),
        }
    }

    pub fn segment_start(&self, pos: u64) -> u64 {
        align_down(pos, self.segment_bytes)
    }

    pub fn file_name(&self, start: u64) -> String {
        format!("{:020}", start + self.name_offset)
    }

    pub fn path_of(&self, start: u64) -> PathBuf {
        self.dir.join(self.file_name(start))
    }

    /// The local start a file name stands for, if it is a segment name of this log.
    pub fn parse_name(&self, name: &str) -> Option<u64> {
        if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let value: u64 = name.parse().ok()?;
        let local = value.checked_sub(self.name_offset)?;
        (local % self.segment_bytes == 0).then_some(local)
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.write_pos - self.flushed_pos
    }

    pub fn append(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.tail.end(), self.write_pos);
        self.tail.append(bytes);
        self.write_pos += bytes.len() as u64;
    }

    /// `TailBuffer::append_in_place` for the log: `false` (nothing appended) when the
    /// bytes would straddle two tail chunks.
    pub fn append_in_place(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        debug_assert_eq!(self.tail.end(), self.write_pos);
        let done = self.tail.append_in_place(len, fill);
        if done {
            self.write_pos += len as u64;
        }
        done
    }

    /// Restarts the log at `pos` with `block_prefix` = the bytes of
    /// `[align_down(pos), pos)` (recovery).
    pub fn reset_at(&mut self, pos: u64, block_prefix: &[u8]) {
        let base = align_down(pos, BLOCK_BYTES);
        assert_eq!(base + block_prefix.len() as u64, pos, "block prefix must end at pos");
        self.tail.reset(base);
        self.tail.append(block_prefix);
        self.write_pos = pos;
        self.flushed_pos = pos;
    }

    /// Picks the range the next flush writes: `[from, to)` with `from` block-aligned.
    /// Marks the log as flushing. `None` when clean or when a flush is in flight.
    pub fn begin_flush(&mut self, max_bytes: u64) -> Option<(u64, u64)> {
        if self.flushing || self.write_pos == self.flushed_pos {
            return None;
        }
        let from = align_down(self.flushed_pos, BLOCK_BYTES);
        let to = self.write_pos.min(from.saturating_add(max_bytes.max(BLOCK_BYTES)));
        debug_assert!(to > self.flushed_pos);
        self.flushing = true;
        Some((from, to))
    }

    pub fn end_flush(&mut self, to: Option<u64>) {
        assert!(self.flushing, "end_flush without begin_flush");
        self.flushing = false;
        if let Some(to) = to {
            self.flushed_pos = self.flushed_pos.max(to);
            let keep_from = align_down(self.flushed_pos.saturating_sub(self.keep_flushed_bytes), BLOCK_BYTES);
            self.tail.trim_before(keep_from.min(align_down(self.flushed_pos, BLOCK_BYTES)));
        }
    }
}

/// Helps closures that project an owner onto one of its logs infer a higher-ranked
/// signature.
pub fn log_accessor<D: Disk, O, G>(get: G) -> G
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    get
}

/// Opens (creating, and pre-zeroing when the log preallocates) the segment starting at
/// `start`, and registers it.
pub async fn ensure_segment<D: Disk, O, G>(
    cell: &RefCell<O>,
    get: &G,
    disk: &D,
    start: u64,
) -> Result<Rc<D::File>, IoError>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    let (path, dir, segment_bytes, preallocate, write_through) = loop {
        let claimed = {
            let mut owner = cell.borrow_mut();
            let log = get(&mut owner);
            if let Some(file) = log.files.get(&start) {
                return Ok(file.clone());
            }
            if log.preparing.insert(start) {
                Some((log.path_of(start), log.dir.clone(), log.segment_bytes, log.preallocate, log.write_through))
            } else {
                None
            }
        };
        match claimed {
            Some(v) => break v,
            // Another task is creating it: wait until it finishes, then look again.
            None => PrepareDone { cell, get, start }.await,
        }
    };
    let result = create_segment(disk, &path, &dir, segment_bytes, preallocate, write_through).await;
    if let Err(e) = &result {
        if e.kind == IoErrorKind::NoSpace {
            // The half-written segment is removed to free its space while this task still
            // holds the claim: removed after it, the removal raced a task that claimed
            // the segment next and had just opened the file, whose size check then failed
            // with NotFound and stopped the store (recovery_files' full-disk test, under
            // load).
            if let Err(removal) = disk.remove(&path).await {
                tracing::warn!(path = %path.display(), error = %removal, "half-written segment not removed");
            }
        }
    }
    let mut owner = cell.borrow_mut();
    let log = get(&mut owner);
    log.preparing.remove(&start);
    for waker in log.prepare_waiters.drain(..) {
        waker.wake();
    }
    let file = Rc::new(result?);
    Ok(log.files.entry(start).or_insert(file).clone())
}

/// Resolves once `start` is no longer being created.
struct PrepareDone<'c, O, G> {
    cell: &'c RefCell<O>,
    get: &'c G,
    start: u64,
}

impl<D: Disk, O, G> std::future::Future for PrepareDone<'_, O, G>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let mut owner = self.cell.borrow_mut();
        let log = (self.get)(&mut owner);
        if !log.preparing.contains(&self.start) {
            return std::task::Poll::Ready(());
        }
        log.prepare_waiters.push(cx.waker().clone());
        std::task::Poll::Pending
    }
}

async fn create_segment<D: Disk>(
    disk: &D,
    path: &std::path::Path,
    dir: &std::path::Path,
    segment_bytes: u64,
    preallocate: Option<Preallocate>,
    write_through: bool,
) -> Result<D::File, IoError> {
    // Errors here happen before any data is written: tagged so that the store can tell
    // a full disk at pre-allocation (recoverable) from a failed data write (fatal).
    let tag = |e: IoError| IoError { op: "preallocate", ..e };
    disk.create_dir_all(dir).await.map_err(tag)?;
    let file = if write_through { disk.open_write_through(path, true).await } else { disk.open(path, true).await }.map_err(tag)?;
    match preallocate {
        Some(Preallocate::Zero) => {
            let size = file.size().await.map_err(tag)?;
            let from = align_down(size.min(segment_bytes), BLOCK_BYTES);
            file.write_zeros(from, segment_bytes - from).await.map_err(tag)?;
            file.sync().await.map_err(tag)?;
        }
        Some(Preallocate::Fallocate) => file.allocate(segment_bytes).await.map_err(tag)?,
        None => {}
    }
    disk.sync_dir(dir).await.map_err(tag)?;
    Ok(file)
}

/// One group commit: writes the dirty range picked by `begin_flush` and syncs every
/// file it touched. On error the log stays un-advanced and the caller must treat the
/// store as failed.
pub async fn flush_log<D: Disk, O, G>(
    cell: &RefCell<O>,
    get: &G,
    disk: &D,
    max_bytes: u64,
) -> Result<Option<FlushDone>, IoError>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    let Some((from, to)) = get(&mut cell.borrow_mut()).begin_flush(max_bytes) else {
        return Ok(None);
    };
    let result = flush_range(cell, get, disk, from, to).await;
    let mut owner = cell.borrow_mut();
    let log = get(&mut owner);
    match result {
        Ok(written_bytes) => {
            log.end_flush(Some(to));
            Ok(Some(FlushDone { from, to, written_bytes }))
        }
        Err(e) => {
            log.end_flush(None);
            Err(e)
        }
    }
}

async fn flush_range<D: Disk, O, G>(
    cell: &RefCell<O>,
    get: &G,
    disk: &D,
    from: u64,
    to: u64,
) -> Result<u64, IoError>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    let end = align_up(to, BLOCK_BYTES);
    let segment_bytes = get(&mut cell.borrow_mut()).segment_bytes;
    let mut writes = Vec::new();
    let mut touched: Vec<Rc<D::File>> = Vec::new();
    let mut pos = from;
    while pos < end {
        let seg_start = align_down(pos, segment_bytes);
        let seg_end = seg_start + segment_bytes;
        let file = ensure_segment(cell, get, disk, seg_start).await?;
        let piece_end = end.min(seg_end).min(pos + WRITE_CHUNK_BYTES);
        let mut buf = file.alloc_buf_unzeroed((piece_end - pos) as usize);
        get(&mut cell.borrow_mut()).tail.copy_to(pos, &mut buf);
        writes.push((file.clone(), pos - seg_start, buf));
        if !touched.iter().any(|f| Rc::ptr_eq(f, &file)) {
            touched.push(file);
        }
        pos = piece_end;
    }
    let written: u64 = writes.iter().map(|(_, _, b)| b.len() as u64).sum();
    try_join_all(writes.into_iter().map(|(file, at, buf)| async move { file.write_at(at, buf).await })).await?;
    // A write-through file's writes were durable when they returned.
    try_join_all(touched.iter().filter(|f| !f.write_through()).map(|f| f.sync())).await?;
    Ok(written)
}

/// Reads `[pos, pos + len)` from the tail where it holds it and from the segment files
/// otherwise. Short only where the files end. A failed read is `StoreError::Read`
/// naming the segment file and the offset in it (never fatal: see `error.rs`).
pub async fn read_log<D: Disk, O, G>(
    cell: &RefCell<O>,
    get: &G,
    pos: u64,
    len: usize,
) -> Result<Vec<u8>, StoreError>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    let mut out = Vec::new();
    read_log_into(cell, get, pos, len, &mut out).await?;
    Ok(out)
}

/// `read_log` appending to `out` (a pull assembles its response body this way, with no
/// buffer per read). Returns the bytes appended; on error `out` holds a partial read.
pub async fn read_log_into<D: Disk, O, G>(
    cell: &RefCell<O>,
    get: &G,
    pos: u64,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<usize, StoreError>
where
    G: for<'a> Fn(&'a mut O) -> &'a mut SegmentedLog<D>,
{
    let first = out.len();
    if first > 0 {
        out.reserve(len);
    }
    let end = pos + len as u64;
    let mut at = pos;
    while at < end {
        let (file, seg_start, seg_end, tail_base) = {
            let mut owner = cell.borrow_mut();
            let log = get(&mut owner);
            let end = end.min(log.write_pos);
            if at >= end {
                break;
            }
            if at >= log.tail.base() {
                let n = (end - at) as usize;
                let start = out.len();
                out.resize(start + n, 0);
                log.tail.copy_to(at, &mut out[start..]);
                break;
            }
            let seg_start = log.segment_start(at);
            match log.files.get(&seg_start) {
                Some(f) => (f.clone(), seg_start, seg_start + log.segment_bytes, log.tail.base()),
                None => break,
            }
        };
        let piece_end = end.min(seg_end).min(tail_base);
        let bytes = file
            .read_at(at - seg_start, (piece_end - at) as usize)
            .await
            .map_err(|source| StoreError::Read { file: file.path().to_path_buf(), offset: at - seg_start, source })?;
        let got = bytes.len() as u64;
        if out.is_empty() && at == pos && out.capacity() < bytes.len() {
            // The read's first piece becomes the buffer when `out` has no room of its own
            // to reuse: a read-ahead window (one whole piece) is then copied once out of
            // the DMA buffer, not twice.
            *out = bytes;
            out.reserve((end - at).saturating_sub(got) as usize);
        } else {
            out.extend_from_slice(&bytes);
        }
        if got < piece_end - at {
            break;
        }
        at = piece_end;
    }
    Ok(out.len() - first)
}
