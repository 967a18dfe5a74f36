//! The IO seam (DESIGN.md §4): every byte the store reads or writes goes through
//! [`Disk`] and [`DiskFile`], and every timestamp through [`Clock`].
//!
//! Production implements the seam on glommio DMA files (`dma`), tests on an in-memory
//! disk with seeded faults (`sim`). The trait is kept narrow on purpose: a wide one
//! makes every fake re-implement everything.
//!
//! Architecture Invariant: `write_at` positions and lengths are multiples of
//! [`BLOCK_BYTES`] (O_DIRECT); both implementations assert it, so a misaligned write is
//! caught by the simulator long before it reaches a real disk.
//! Architecture Invariant: a write is durable only after a later `sync` on the same
//! file returned `Ok` (or, on a handle from `open_write_through`, once it returned
//! `Ok`); until then a crash may drop it, keep it, or tear it at a sector.

pub mod dma;
pub mod sim;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// O_DIRECT alignment for positions and lengths of writes.
pub const BLOCK_BYTES: u64 = 4096;
/// The unit a crash can tear a write at.
pub const SECTOR_BYTES: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoErrorKind {
    NotFound,
    /// ENOSPC: the device is full.
    NoSpace,
    /// EIO or any other failure of the device.
    Device,
    /// The simulated machine crashed; the handle is dead.
    Crashed,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{op} {path}: {kind:?}: {detail}")]
pub struct IoError {
    pub kind: IoErrorKind,
    pub op: &'static str,
    pub path: PathBuf,
    pub detail: String,
}

impl IoError {
    pub fn new(kind: IoErrorKind, op: &'static str, path: &Path, detail: impl Into<String>) -> Self {
        Self { kind, op, path: path.to_path_buf(), detail: detail.into() }
    }

    pub fn from_std(op: &'static str, path: &Path, err: &std::io::Error) -> Self {
        let kind = match err.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => IoErrorKind::NoSpace,
            _ if err.kind() == std::io::ErrorKind::NotFound => IoErrorKind::NotFound,
            _ => IoErrorKind::Device,
        };
        Self::new(kind, op, path, err.to_string())
    }
}

/// Space on the filesystem that holds the store, for disk watermarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    pub total_bytes: u64,
    pub free_bytes: u64,
}

impl DiskSpace {
    pub fn used_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return 1.0;
        }
        1.0 - self.free_bytes as f64 / self.total_bytes as f64
    }
}

/// An aligned buffer a write is issued from.
pub trait IoBuf: Deref<Target = [u8]> + DerefMut {}

/// A filesystem of files addressed by path.
#[allow(async_fn_in_trait)]
pub trait Disk: Clone + 'static {
    type File: DiskFile;

    /// Opens for read and write; `create` makes the file if it is missing.
    async fn open(&self, path: &Path, create: bool) -> Result<Self::File, IoError>;
    /// Like `open`, but every `write_at` is durable once it returns (O_DSYNC): a group
    /// commit is one IO instead of a write and then an fdatasync.
    async fn open_write_through(&self, path: &Path, create: bool) -> Result<Self::File, IoError>;
    /// File names (not paths) in `dir`, sorted; a missing directory is empty.
    async fn list(&self, dir: &Path) -> Result<Vec<String>, IoError>;
    async fn create_dir_all(&self, dir: &Path) -> Result<(), IoError>;
    /// Removes a file or an empty directory.
    async fn remove(&self, path: &Path) -> Result<(), IoError>;
    async fn exists(&self, path: &Path) -> Result<bool, IoError>;
    /// Makes a directory's entries (files created or removed in it) durable.
    async fn sync_dir(&self, dir: &Path) -> Result<(), IoError>;
    async fn space(&self, path: &Path) -> Result<DiskSpace, IoError>;
}

#[allow(async_fn_in_trait)]
pub trait DiskFile: 'static {
    type Buf: IoBuf;

    fn path(&self) -> &Path;
    /// Opened with `open_write_through`: a write needs no `sync` to be durable.
    fn write_through(&self) -> bool;
    /// A zeroed buffer of `len` bytes (a multiple of [`BLOCK_BYTES`]), aligned for
    /// `write_at` on this file.
    fn alloc_buf(&self, len: usize) -> Self::Buf;
    /// Like `alloc_buf` but with unspecified contents, for a caller that overwrites
    /// every byte (the group-commit copy: zeroing first would double memory traffic).
    fn alloc_buf_unzeroed(&self, len: usize) -> Self::Buf;
    /// Reads up to `len` bytes at `pos`; shorter only at end of file. Any alignment.
    async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>, IoError>;
    /// Writes the whole buffer at `pos`. `pos` and the buffer length are multiples of
    /// [`BLOCK_BYTES`].
    async fn write_at(&self, pos: u64, buf: Self::Buf) -> Result<(), IoError>;
    /// Writes `len` zero bytes at `pos` (both block-aligned): segment pre-allocation
    /// and zeroing past a truncated tail. One shared zero buffer, no per-call memset.
    async fn write_zeros(&self, pos: u64, len: u64) -> Result<(), IoError>;
    /// Reserves the file up to `len` bytes (fallocate): the range reads as zeros
    /// without being written. Durable once it returns.
    async fn allocate(&self, len: u64) -> Result<(), IoError>;
    /// fdatasync: every write before it is durable once it returns `Ok`.
    async fn sync(&self) -> Result<(), IoError>;
    async fn truncate(&self, len: u64) -> Result<(), IoError>;
    async fn size(&self) -> Result<u64, IoError>;
}

/// Wall-clock time for store timestamps and retention. Injected so that simulation
/// tests control time.
pub trait Clock: Clone + 'static {
    fn now_ms(&self) -> i64;
    /// Offset of the host's local time zone from UTC at instant `at_ms` (east
    /// positive, daylight saving included), in milliseconds. Retention's `deleteWhen`
    /// hours are local hours, as Apache's `Calendar.getInstance()`.
    fn utc_offset_ms(&self, at_ms: i64) -> i64;
}

/// Hour of day (0–23) at `now_ms` in a zone `utc_offset_ms` east of UTC.
pub fn local_hour_of_day(now_ms: i64, utc_offset_ms: i64) -> u32 {
    const HOUR_MS: i64 = 3_600_000;
    (now_ms + utc_offset_ms).div_euclid(HOUR_MS).rem_euclid(24) as u32
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    /// The C library's local zone (`TZ`, else `/etc/localtime`) at `at_ms`: asked on
    /// every call, so a daylight-saving change is followed as Java's Calendar does.
    /// A time the C library cannot convert counts as UTC.
    fn utc_offset_ms(&self, at_ms: i64) -> i64 {
        let secs = at_ms.div_euclid(1000) as libc::time_t;
        // SAFETY: `tm` is plain data that `localtime_r` fills; both pointers are valid
        // for the call and `localtime_r` keeps neither.
        unsafe {
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&secs, &mut tm).is_null() {
                return 0;
            }
            tm.tm_gmtoff as i64 * 1000
        }
    }
}

/// A clock that moves only when told to, in a time zone a test sets (UTC unless
/// told otherwise).
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: std::rc::Rc<std::cell::Cell<i64>>,
    utc_offset_ms: std::rc::Rc<std::cell::Cell<i64>>,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        Self { now_ms: std::rc::Rc::new(std::cell::Cell::new(start_ms)), ..Self::default() }
    }
    /// Puts the clock in a fixed zone `offset_ms` east of UTC.
    pub fn set_utc_offset_ms(&self, offset_ms: i64) {
        self.utc_offset_ms.set(offset_ms);
    }
    pub fn set_ms(&self, now_ms: i64) {
        self.now_ms.set(now_ms);
    }
    pub fn advance_ms(&self, delta_ms: i64) {
        self.now_ms.set(self.now_ms.get() + delta_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.get()
    }
    fn utc_offset_ms(&self, _at_ms: i64) -> i64 {
        self.utc_offset_ms.get()
    }
}

pub fn is_block_aligned(value: u64) -> bool {
    value % BLOCK_BYTES == 0
}

pub fn align_down(value: u64, align: u64) -> u64 {
    value - value % align
}

pub fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's zone offset is a real one: within ±14 h, in whole quarter hours, and
    /// the same for two instants a second apart (no zone changes its offset every second).
    #[test]
    fn system_clock_reports_the_hosts_zone_offset() {
        let clock = SystemClock;
        let now_ms = clock.now_ms();
        let offset_ms = clock.utc_offset_ms(now_ms);
        assert!(offset_ms.abs() <= 14 * 3_600_000 && offset_ms % (15 * 60_000) == 0, "{offset_ms}");
        assert_eq!(clock.utc_offset_ms(now_ms + 1000), offset_ms);
        // With TZ=UTC (CI) or any zone, the local hour is UTC's shifted by it.
        assert_eq!(local_hour_of_day(now_ms, offset_ms), local_hour_of_day(now_ms + offset_ms, 0));
    }

    #[test]
    fn manual_clock_keeps_the_zone_a_test_sets() {
        let clock = ManualClock::new(5);
        assert_eq!(clock.utc_offset_ms(5), 0, "UTC unless told otherwise");
        clock.set_utc_offset_ms(-5 * 3_600_000);
        assert_eq!((clock.now_ms(), clock.utc_offset_ms(5)), (5, -5 * 3_600_000));
    }
}
