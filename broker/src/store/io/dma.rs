//! The production disk: glommio DMA files (O_DIRECT through io_uring).
//!
//! Reads, writes and syncs use O_DIRECT DMA files.
//!
//! glommio decides once per thread and device whether the device supports polled IO,
//! by reading the first block of the first DMA file opened there. When that file is
//! empty (a fresh store's `abort` file) the read "succeeds" at end of file, polled IO is
//! wrongly enabled, and later O_DIRECT reads fail with EOPNOTSUPP or their completions
//! are never reaped. `probe_device` therefore opens a one-block file of our own first.
//!
//! Directory operations (list, mkdir, remove, directory fsync, statvfs) have no
//! io_uring form glommio exposes: they run on the executor's blocking thread pool
//! (`spawn_blocking`), so a slow mkdir + directory fsync when a new ConsumeQueue or
//! index file is created never stalls the shard's requests. Every data read, write
//! and sync goes through the shard's io_uring ring.
//!
//! Test-only failure probe: `RINGMQ_FAILPOINTS="read_eio=<path substring>[,...]"` makes
//! every `read_at` on a file whose path contains the substring fail with EIO, as a bad
//! sector would (there is no device-mapper on CI hosts to make a real one). The
//! variable is parsed once, at broker start-up (`init_failpoints`), into a read-only
//! static; whether a file matches is decided when it is opened, so a read costs one
//! branch on a bool when the probe is unset. An unknown probe name is a start-up error.
//! Match on a path fragment such as `commitlog/00000000000000000000`: a ConsumeQueue's
//! first file has the same 20-digit name as shard 0's first segment.
//!
//! Invariant: only used from inside a glommio executor (DMA buffers come from it).

use super::{Disk, DiskFile, DiskSpace, IoBuf, IoError, BLOCK_BYTES};
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, Default)]
pub struct DmaDisk;

/// Runs a blocking filesystem call on the executor's blocking thread pool.
async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    glommio::executor().spawn_blocking(f).await
}

/// A DMA buffer. Shared (`Rc`) only while a write of it is in flight, so that the
/// group commit's 1 MiB buffers can go back to `POOL` instead of being unmapped and
/// faulted in again on every flush.
pub struct DmaBuf(Rc<DmaBuffer>);

impl Deref for DmaBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}
impl DerefMut for DmaBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        Rc::get_mut(&mut self.0).expect("a DmaBuf is unique outside a write").as_bytes_mut()
    }
}

/// Size of the pooled buffers: the group commit's write piece.
const POOL_BUF_BYTES: usize = 1024 * 1024;
/// Pooled buffers kept per thread (64 MiB).
const POOL_BUFS_MAX: usize = 64;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Rc<DmaBuffer>>> = const { std::cell::RefCell::new(Vec::new()) };
}
impl IoBuf for DmaBuf {}

pub struct DmaDiskFile {
    file: DmaFile,
    path: PathBuf,
    /// The `read_eio` failure probe matched this file when it was opened.
    fail_reads: bool,
    /// A zeroed buffer of `ZERO_CHUNK_BYTES`, made on first use and shared by every
    /// `write_zeros` (glommio's `write_rc_at` does not consume it).
    zeros: std::cell::OnceCell<Rc<DmaBuffer>>,
    /// Opened with O_DSYNC (`open_write_through`).
    write_through: bool,
}

const ZERO_CHUNK_BYTES: u64 = 1024 * 1024;
/// Zero writes in flight at once during pre-allocation.
const ZERO_WRITES_IN_FLIGHT_MAX: usize = 8;

fn glommio_err(op: &'static str, path: &Path, err: glommio::GlommioError<()>) -> IoError {
    // glommio's conversion to io::Error keeps only the kind of an EnhancedIoError's
    // source, not its OS error code: classify from the source, or ENOSPC would read as a
    // device failure (a full disk at pre-allocation must stay recoverable).
    let raw = match &err {
        glommio::GlommioError::EnhancedIoError { source, .. } => source.raw_os_error(),
        _ => None,
    };
    let io: std::io::Error = err.into();
    let mut error = IoError::from_std(op, path, &io);
    if let Some(code) = raw {
        error.kind = IoError::from_std(op, path, &std::io::Error::from_raw_os_error(code)).kind;
    }
    error
}

async fn open_dma(path: &Path, create: bool, write_through: bool) -> Result<DmaDiskFile, IoError> {
    if let Some(dir) = path.parent() {
        probe_device(dir).await?;
    }
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(create);
    if write_through {
        // O_DIRECT | O_DSYNC: on overwritten (pre-zeroed) blocks ext4 completes the write
        // with a FUA or a cache flush, so the write is the whole group commit.
        options.custom_flags(libc::O_DSYNC);
    }
    let file = options.dma_open(path).await.map_err(|e| glommio_err("open", path, e))?;
    let fail_reads = failpoints().read_eio.iter().any(|fragment| path.to_string_lossy().contains(fragment.as_str()));
    Ok(DmaDiskFile { file, path: path.to_path_buf(), fail_reads, zeros: std::cell::OnceCell::new(), write_through })
}

impl Disk for DmaDisk {
    type File = DmaDiskFile;

    async fn open(&self, path: &Path, create: bool) -> Result<DmaDiskFile, IoError> {
        open_dma(path, create, false).await
    }

    async fn open_write_through(&self, path: &Path, create: bool) -> Result<DmaDiskFile, IoError> {
        open_dma(path, create, true).await
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>, IoError> {
        let dir = dir.to_path_buf();
        off_thread(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(IoError::from_std("list", &dir, &e)),
            };
            let mut names = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| IoError::from_std("list", &dir, &e))?;
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names)
        })
        .await
    }

    async fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        if dir.is_dir() {
            return Ok(()); // the common case: one stat, no thread hop
        }
        let dir = dir.to_path_buf();
        off_thread(move || std::fs::create_dir_all(&dir).map_err(|e| IoError::from_std("mkdir", &dir, &e))).await
    }

    async fn remove(&self, path: &Path) -> Result<(), IoError> {
        let path = path.to_path_buf();
        off_thread(move || {
            let result = if path.is_dir() { std::fs::remove_dir(&path) } else { std::fs::remove_file(&path) };
            result.map_err(|e| IoError::from_std("remove", &path, &e))
        })
        .await
    }

    async fn exists(&self, path: &Path) -> Result<bool, IoError> {
        Ok(path.exists())
    }

    async fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        let dir = dir.to_path_buf();
        off_thread(move || {
            let handle = std::fs::File::open(&dir).map_err(|e| IoError::from_std("open dir", &dir, &e))?;
            handle.sync_all().map_err(|e| IoError::from_std("sync dir", &dir, &e))
        })
        .await
    }

    async fn space(&self, path: &Path) -> Result<DiskSpace, IoError> {
        statvfs(path)
    }
}

/// The environment variable holding the failure probes.
pub const FAILPOINTS_ENV: &str = "RINGMQ_FAILPOINTS";

/// The armed failure probes (test-only; see the module comment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failpoints {
    /// Path fragments: reads of a file whose path contains one fail with EIO.
    pub read_eio: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{FAILPOINTS_ENV}: {0} (expected read_eio=<path substring>[,read_eio=...])")]
pub struct FailpointError(String);

impl Failpoints {
    /// Parses `name=value` items separated by commas; blanks are ignored.
    pub fn parse(spec: &str) -> Result<Self, FailpointError> {
        let mut out = Failpoints::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item.split_once('=') {
                Some(("read_eio", fragment)) if !fragment.is_empty() => out.read_eio.push(fragment.to_string()),
                Some(("read_eio", _)) => return Err(FailpointError("read_eio needs a non-empty path substring".into())),
                _ => return Err(FailpointError(format!("unknown failure probe {item:?}"))),
            }
        }
        Ok(out)
    }
}

static FAILPOINTS: std::sync::OnceLock<Failpoints> = std::sync::OnceLock::new();

/// Reads `RINGMQ_FAILPOINTS` once (later calls return the first result). Called at
/// start-up so that a bad value stops the broker before it serves anything.
pub fn init_failpoints() -> Result<&'static Failpoints, FailpointError> {
    if let Some(parsed) = FAILPOINTS.get() {
        return Ok(parsed);
    }
    let parsed = match std::env::var(FAILPOINTS_ENV) {
        Ok(spec) => Failpoints::parse(&spec)?,
        Err(_) => Failpoints::default(),
    };
    if !parsed.read_eio.is_empty() {
        tracing::warn!(read_eio = ?parsed.read_eio, "{FAILPOINTS_ENV} armed: reads of matching files fail with EIO (test-only probe)");
    }
    Ok(FAILPOINTS.get_or_init(|| parsed))
}

/// The armed probes; none if `init_failpoints` never ran or the variable is unset or
/// invalid (start-up refuses an invalid one, so it never gets here).
fn failpoints() -> &'static Failpoints {
    static NONE: Failpoints = Failpoints { read_eio: Vec::new() };
    FAILPOINTS.get().unwrap_or(&NONE)
}

thread_local! {
    /// Devices whose polled-IO support this thread has probed correctly.
    static PROBED_DEVICES: std::cell::RefCell<std::collections::HashSet<u64>> = std::cell::RefCell::new(Default::default());
}

/// Makes glommio's per-thread polled-IO probe for `dir`'s device read real data: a
/// one-block file is written with std, opened as a DMA file (the probe reads it), and
/// removed.
async fn probe_device(dir: &Path) -> Result<(), IoError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else { return Ok(()) };
    let dev = meta.dev();
    if PROBED_DEVICES.with(|p| p.borrow().contains(&dev)) {
        return Ok(());
    }
    let probe = dir.join(format!(".ringmq-iopoll-probe-{}", std::process::id()));
    std::fs::write(&probe, vec![0xA5u8; BLOCK_BYTES as usize]).map_err(|e| IoError::from_std("probe", &probe, &e))?;
    let opened = DmaFile::open(&probe).await;
    let _ = std::fs::remove_file(&probe);
    match opened {
        Ok(file) => {
            let _ = file.close().await;
        }
        Err(e) => return Err(glommio_err("probe", &probe, e)),
    }
    PROBED_DEVICES.with(|p| p.borrow_mut().insert(dev));
    Ok(())
}

/// Total and available bytes of the filesystem holding `path`.
pub fn statvfs(path: &Path) -> Result<DiskSpace, IoError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| IoError::new(super::IoErrorKind::Device, "statvfs", path, "path has NUL"))?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and stat a valid out pointer.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(IoError::from_std("statvfs", path, &std::io::Error::last_os_error()));
    }
    let block = stat.f_frsize as u64;
    Ok(disk_space_of(stat.f_blocks as u64 * block, stat.f_bfree as u64 * block, stat.f_bavail as u64 * block))
}

/// The space the broker can use, as `df` and Apache's `UtilAll.getDiskPartitionSpaceUsedPercent`
/// count it: what is used plus what this process may still write. Blocks that are free but
/// not available (root's reserve, or a host that caps a large filesystem's usable part) are
/// left out; counting them as total made a disk with 66 % in use (`df`) read 88 %, and the
/// 90 % write watermark then refused sends on a machine with 25 GB still free.
pub fn disk_space_of(blocks_bytes: u64, free_bytes: u64, available_bytes: u64) -> DiskSpace {
    let used_bytes = blocks_bytes.saturating_sub(free_bytes);
    DiskSpace { total_bytes: used_bytes.saturating_add(available_bytes), free_bytes: available_bytes }
}

impl DiskFile for DmaDiskFile {
    type Buf = DmaBuf;

    fn write_through(&self) -> bool {
        self.write_through
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn alloc_buf(&self, len: usize) -> DmaBuf {
        let mut buf = self.file.alloc_dma_buffer(len);
        buf.as_bytes_mut().fill(0);
        DmaBuf(Rc::new(buf))
    }

    fn alloc_buf_unzeroed(&self, len: usize) -> DmaBuf {
        if len == POOL_BUF_BYTES {
            if let Some(buf) = POOL.with(|p| p.borrow_mut().pop()) {
                return DmaBuf(buf);
            }
        }
        DmaBuf(Rc::new(self.file.alloc_dma_buffer(len)))
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>, IoError> {
        if self.fail_reads {
            let eio = std::io::Error::from_raw_os_error(libc::EIO);
            let mut error = IoError::from_std("read", &self.path, &eio);
            error.detail = format!("{} (failure probe {FAILPOINTS_ENV} read_eio)", error.detail);
            return Err(error);
        }
        let result = self.file.read_at(pos, len).await.map_err(|e| glommio_err("read", &self.path, e))?;
        Ok(result.to_vec())
    }

    async fn write_at(&self, pos: u64, buf: DmaBuf) -> Result<(), IoError> {
        assert!(pos % BLOCK_BYTES == 0, "write_at: unaligned position {pos} in {}", self.path.display());
        let len = buf.0.len();
        assert!(len as u64 % BLOCK_BYTES == 0, "write_at: unaligned length {len}");
        let shared = buf.0;
        let written = self.file.write_rc_at(shared.clone(), pos).await.map_err(|e| glommio_err("write", &self.path, e))?;
        if shared.len() == POOL_BUF_BYTES && Rc::strong_count(&shared) == 1 {
            POOL.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < POOL_BUFS_MAX {
                    pool.push(shared);
                }
            });
        }
        if written != len {
            // O_DIRECT short writes mean the device is full or failing; never retry.
            return Err(IoError::new(
                super::IoErrorKind::NoSpace,
                "write",
                &self.path,
                format!("short write: {written} of {len} bytes"),
            ));
        }
        Ok(())
    }

    async fn write_zeros(&self, pos: u64, len: u64) -> Result<(), IoError> {
        assert!(pos % BLOCK_BYTES == 0 && len % BLOCK_BYTES == 0, "write_zeros: unaligned {pos}+{len}");
        let zeros = self
            .zeros
            .get_or_init(|| {
                let mut buf = self.file.alloc_dma_buffer(ZERO_CHUNK_BYTES as usize);
                buf.as_bytes_mut().fill(0);
                Rc::new(buf)
            })
            .clone();
        let mut pieces = Vec::new();
        let mut at = pos;
        while at < pos + len {
            let n = ZERO_CHUNK_BYTES.min(pos + len - at);
            pieces.push((at, n));
            at += n;
        }
        for batch in pieces.chunks(ZERO_WRITES_IN_FLIGHT_MAX) {
            let writes = batch.iter().map(|&(at, n)| {
                let zeros = zeros.clone();
                async move {
                    let written = if n == ZERO_CHUNK_BYTES {
                        self.file.write_rc_at(zeros, at).await
                    } else {
                        let mut buf = self.file.alloc_dma_buffer(n as usize);
                        buf.as_bytes_mut().fill(0);
                        self.file.write_at(buf, at).await
                    }
                    .map_err(|e| glommio_err("write", &self.path, e))?;
                    if written as u64 != n {
                        return Err(IoError::new(super::IoErrorKind::NoSpace, "write", &self.path, format!("short write: {written} of {n} bytes")));
                    }
                    Ok(())
                }
            });
            futures_util::future::try_join_all(writes).await?;
        }
        Ok(())
    }

    async fn allocate(&self, len: u64) -> Result<(), IoError> {
        self.file.pre_allocate(len, false).await.map_err(|e| glommio_err("allocate", &self.path, e))?;
        self.file.fdatasync().await.map_err(|e| glommio_err("allocate", &self.path, e))
    }

    async fn sync(&self) -> Result<(), IoError> {
        self.file.fdatasync().await.map_err(|e| glommio_err("sync", &self.path, e))
    }

    async fn truncate(&self, len: u64) -> Result<(), IoError> {
        self.file.truncate(len).await.map_err(|e| glommio_err("truncate", &self.path, e))
    }

    async fn size(&self) -> Result<u64, IoError> {
        self.file.file_size().await.map_err(|e| glommio_err("size", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failpoints_parse_names_and_refuse_unknown_ones() {
        assert_eq!(Failpoints::parse("").unwrap(), Failpoints::default());
        let parsed = Failpoints::parse(" read_eio=commitlog/00000000000000000000 , read_eio=index ").unwrap();
        assert_eq!(parsed.read_eio, vec!["commitlog/00000000000000000000".to_string(), "index".to_string()]);
        let unknown = Failpoints::parse("write_eio=x").unwrap_err().to_string();
        assert!(unknown.contains("unknown failure probe \"write_eio=x\""), "{unknown}");
        assert!(Failpoints::parse("read_eio=").is_err());
        assert!(Failpoints::parse("read_eio").is_err());
    }
}

#[cfg(test)]
mod disk_space_tests {
    use super::disk_space_of;

    const GB: u64 = 1_000_000_000;

    fn check(blocks: u64, free: u64, available: u64, expected_used_percent: u64) {
        let space = disk_space_of(blocks, free, available);
        let percent = (space.used_ratio() * 100.0).round() as u64;
        assert_eq!(percent, expected_used_percent, "blocks {blocks} free {free} available {available}: {space:?}");
        assert_eq!(space.free_bytes, available);
    }

    #[test]
    fn used_ratio_counts_only_space_this_process_may_write() {
        // The CI machine's root: 252 GB of blocks, 192 GB free, 31 GB available (df says 66 %).
        check(252 * GB, 192 * GB, 31 * GB, 66);
        // ext4 with the usual 5 % root reserve.
        check(100 * GB, 50 * GB, 45 * GB, 53);
        check(100 * GB, 100 * GB, 100 * GB, 0);
        check(100 * GB, 0, 0, 100);
        // Reserve bigger than free (root wrote into it): nothing available, all used.
        check(100 * GB, 3 * GB, 0, 100);
        // Nonsense from a broken filesystem never underflows.
        check(0, 10 * GB, 10 * GB, 0);
        check(0, 0, 0, 100);
    }
}
