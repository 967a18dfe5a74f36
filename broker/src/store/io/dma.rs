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
    /// A zeroed buffer of `ZERO_CHUNK_BYTES`, made on first use and shared by every
    /// `write_zeros` (glommio's `write_rc_at` does not consume it).
    zeros: std::cell::OnceCell<Rc<DmaBuffer>>,
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

impl Disk for DmaDisk {
    type File = DmaDiskFile;

    async fn open(&self, path: &Path, create: bool) -> Result<DmaDiskFile, IoError> {
        if let Some(dir) = path.parent() {
            probe_device(dir).await?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .dma_open(path)
            .await
            .map_err(|e| glommio_err("open", path, e))?;
        Ok(DmaDiskFile { file, path: path.to_path_buf(), zeros: std::cell::OnceCell::new() })
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
    Ok(DiskSpace { total_bytes: stat.f_blocks as u64 * block, free_bytes: stat.f_bavail as u64 * block })
}

impl DiskFile for DmaDiskFile {
    type Buf = DmaBuf;

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
