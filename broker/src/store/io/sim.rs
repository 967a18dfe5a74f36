//! An in-memory disk for deterministic simulation tests, driven by a seeded PRNG.
//!
//! Model: each file has the image a reader sees (`current`) and the image that would
//! survive a power cut (`durable`). A write changes `current` and is queued as pending;
//! `sync` makes `durable = current`. `crash()` rebuilds every file from `durable` plus,
//! for each pending write, a choice made by the PRNG: dropped, kept, or torn (a random
//! subset of its sectors kept). File creation, removal and truncation are durable at
//! once (ext4 journals metadata; the interesting failures are in data).
//!
//! Faults: EIO on write / sync / read and bit flips on read, each with a probability
//! per million operations, and ENOSPC once the files' total length would pass
//! `capacity_bytes`. Every random choice comes from one PRNG seeded by the test, so a
//! failing seed replays exactly.
//!
//! Invariant: handles opened before a crash fail with `IoErrorKind::Crashed`.

use super::{Disk, DiskFile, DiskSpace, IoBuf, IoError, IoErrorKind, BLOCK_BYTES, SECTOR_BYTES};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Fault probabilities, in events per million operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultConfig {
    pub write_eio_per_million: u32,
    pub sync_eio_per_million: u32,
    pub read_eio_per_million: u32,
    pub read_bitflip_per_million: u32,
    pub capacity_bytes: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            write_eio_per_million: 0,
            sync_eio_per_million: 0,
            read_eio_per_million: 0,
            read_bitflip_per_million: 0,
            capacity_bytes: u64::MAX,
        }
    }
}

/// Counters a test can assert on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    pub writes: u64,
    pub write_bytes: u64,
    pub syncs: u64,
    pub reads: u64,
    pub crashes: u64,
}

#[derive(Debug, Default)]
struct SimFile {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
}

struct SimState {
    rng: ChaCha8Rng,
    seed: u64,
    generation: u64,
    files: BTreeMap<PathBuf, SimFile>,
    dirs: BTreeSet<PathBuf>,
    faults: FaultConfig,
    stats: SimStats,
    /// Data operations (write, sync) left before a power cut: the probe that crashes
    /// "at every point" of a multi-IO operation. `None` = never.
    crash_countdown: Option<u64>,
}

impl SimState {
    fn roll(&mut self, per_million: u32) -> bool {
        per_million > 0 && self.rng.gen_range(0..1_000_000) < per_million
    }
    /// See [`SimDisk::crash`].
    fn crash(&mut self) {
        let state = self;
        state.generation += 1;
        state.stats.crashes += 1;
        for file in state.files.values_mut() {
            let mut image = std::mem::take(&mut file.durable);
            for (pos, data) in file.pending.drain(..) {
                let choice = state.rng.gen_range(0..3);
                let sectors = data.len().div_ceil(SECTOR_BYTES as usize);
                for sector in 0..sectors {
                    let keep = match choice {
                        0 => false,
                        1 => true,
                        _ => state.rng.gen_bool(0.5),
                    };
                    if !keep {
                        continue;
                    }
                    let from = sector * SECTOR_BYTES as usize;
                    let to = (from + SECTOR_BYTES as usize).min(data.len());
                    let at = pos as usize + from;
                    if image.len() < at + (to - from) {
                        image.resize(at + (to - from), 0);
                    }
                    image[at..at + (to - from)].copy_from_slice(&data[from..to]);
                }
            }
            file.current = image.clone();
            file.durable = image;
        }
    }

    /// Counts down the armed power cut; `true` when it fires now.
    fn crash_due(&mut self) -> bool {
        match self.crash_countdown {
            Some(0) => {
                self.crash_countdown = None;
                self.crash();
                true
            }
            Some(n) => {
                self.crash_countdown = Some(n - 1);
                false
            }
            None => false,
        }
    }

    fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.current.len() as u64).sum()
    }
}

/// A simulated disk; clones share the same state.
#[derive(Clone)]
pub struct SimDisk {
    state: Rc<RefCell<SimState>>,
}

impl SimDisk {
    pub fn new(seed: u64) -> Self {
        Self::with_faults(seed, FaultConfig::default())
    }

    pub fn with_faults(seed: u64, faults: FaultConfig) -> Self {
        let state = SimState {
            rng: ChaCha8Rng::seed_from_u64(seed),
            seed,
            generation: 0,
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            faults,
            stats: SimStats::default(),
            crash_countdown: None,
        };
        Self { state: Rc::new(RefCell::new(state)) }
    }

    pub fn seed(&self) -> u64 {
        self.state.borrow().seed
    }

    pub fn set_faults(&self, faults: FaultConfig) {
        self.state.borrow_mut().faults = faults;
    }

    pub fn stats(&self) -> SimStats {
        self.state.borrow().stats
    }

    /// A power cut: unsynced writes are dropped, kept or torn, and every open handle
    /// dies.
    pub fn crash(&self) {
        self.state.borrow_mut().crash();
    }

    /// Arms a power cut just before the `ops`-th next data operation (write or sync;
    /// 0 = the very next one): that operation and every later one through an old
    /// handle fail as `Crashed`. Disarmed by the crash or by `None`.
    pub fn crash_after_ops(&self, ops: Option<u64>) {
        self.state.borrow_mut().crash_countdown = ops;
    }

    /// Flips one bit of a file, durably, as media corruption would.
    pub fn flip_bit(&self, path: &Path, byte_offset: u64, bit: u8) {
        let mut state = self.state.borrow_mut();
        let file = state.files.get_mut(path).expect("flip_bit: no such file");
        let at = byte_offset as usize;
        file.current[at] ^= 1 << bit;
        if at < file.durable.len() {
            file.durable[at] ^= 1 << bit;
        }
    }

    /// Overwrites bytes of a file durably (test setup: garbage, torn tails).
    pub fn write_raw(&self, path: &Path, pos: u64, bytes: &[u8]) {
        let mut state = self.state.borrow_mut();
        let file = state.files.entry(path.to_path_buf()).or_default();
        let end = pos as usize + bytes.len();
        for image in [&mut file.current, &mut file.durable] {
            if image.len() < end {
                image.resize(end, 0);
            }
            image[pos as usize..end].copy_from_slice(bytes);
        }
    }

    /// The current bytes of a file, if it exists.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.state.borrow().files.get(path).map(|f| f.current.clone())
    }

    /// Every file path, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.state.borrow().files.keys().cloned().collect()
    }
}

pub struct SimBuf(Vec<u8>);

impl Deref for SimBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}
impl DerefMut for SimBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}
impl IoBuf for SimBuf {}

pub struct SimFileHandle {
    disk: SimDisk,
    path: PathBuf,
    generation: u64,
    /// Writes are durable when they return (O_DSYNC).
    write_through: bool,
}

impl SimFileHandle {
    fn check_alive(&self, op: &'static str) -> Result<(), IoError> {
        if self.disk.state.borrow().generation != self.generation {
            return Err(IoError::new(IoErrorKind::Crashed, op, &self.path, "handle from before a crash"));
        }
        Ok(())
    }
}

impl Disk for SimDisk {
    type File = SimFileHandle;

    async fn open(&self, path: &Path, create: bool) -> Result<SimFileHandle, IoError> {
        let mut state = self.state.borrow_mut();
        if !state.files.contains_key(path) {
            if !create {
                return Err(IoError::new(IoErrorKind::NotFound, "open", path, "no such file"));
            }
            state.files.insert(path.to_path_buf(), SimFile::default());
        }
        Ok(SimFileHandle { disk: self.clone(), path: path.to_path_buf(), generation: state.generation, write_through: false })
    }

    async fn open_write_through(&self, path: &Path, create: bool) -> Result<SimFileHandle, IoError> {
        let mut handle = self.open(path, create).await?;
        handle.write_through = true;
        Ok(handle)
    }

    async fn list(&self, dir: &Path) -> Result<Vec<String>, IoError> {
        let state = self.state.borrow();
        let mut names = BTreeSet::new();
        for path in state.files.keys().chain(state.dirs.iter()) {
            if path.parent() == Some(dir) {
                if let Some(name) = path.file_name() {
                    names.insert(name.to_string_lossy().into_owned());
                }
            }
        }
        Ok(names.into_iter().collect())
    }

    async fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        let mut state = self.state.borrow_mut();
        let mut current = Some(dir);
        while let Some(d) = current {
            if d.as_os_str().is_empty() {
                break;
            }
            state.dirs.insert(d.to_path_buf());
            current = d.parent();
        }
        Ok(())
    }

    async fn remove(&self, path: &Path) -> Result<(), IoError> {
        let mut state = self.state.borrow_mut();
        if state.files.remove(path).is_some() || state.dirs.remove(path) {
            Ok(())
        } else {
            Err(IoError::new(IoErrorKind::NotFound, "remove", path, "no such file"))
        }
    }

    async fn exists(&self, path: &Path) -> Result<bool, IoError> {
        let state = self.state.borrow();
        Ok(state.files.contains_key(path) || state.dirs.contains(path))
    }

    async fn sync_dir(&self, _dir: &Path) -> Result<(), IoError> {
        // Metadata is durable at once in this model.
        Ok(())
    }

    async fn space(&self, _path: &Path) -> Result<DiskSpace, IoError> {
        let state = self.state.borrow();
        let total = state.faults.capacity_bytes;
        Ok(DiskSpace { total_bytes: total, free_bytes: total.saturating_sub(state.used_bytes()) })
    }
}

impl DiskFile for SimFileHandle {
    type Buf = SimBuf;

    fn write_through(&self) -> bool {
        self.write_through
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn alloc_buf(&self, len: usize) -> SimBuf {
        SimBuf(vec![0; len])
    }

    fn alloc_buf_unzeroed(&self, len: usize) -> SimBuf {
        // Poisoned, so that a caller relying on zeros is caught in simulation.
        SimBuf(vec![0xEE; len])
    }

    async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>, IoError> {
        self.check_alive("read")?;
        let mut guard = self.disk.state.borrow_mut();
        let state = &mut *guard;
        state.stats.reads += 1;
        if state.roll(state.faults.read_eio_per_million) {
            return Err(IoError::new(IoErrorKind::Device, "read", &self.path, "injected EIO"));
        }
        let file = state
            .files
            .get(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "read", &self.path, "file removed"))?;
        let start = (pos as usize).min(file.current.len());
        let end = (start + len).min(file.current.len());
        let mut out = file.current[start..end].to_vec();
        if !out.is_empty() && state.roll(state.faults.read_bitflip_per_million) {
            let at = state.rng.gen_range(0..out.len());
            let bit = state.rng.gen_range(0..8);
            out[at] ^= 1 << bit;
        }
        Ok(out)
    }

    async fn write_at(&self, pos: u64, buf: SimBuf) -> Result<(), IoError> {
        self.check_alive("write")?;
        assert!(pos % BLOCK_BYTES == 0, "write_at: unaligned position {pos} in {}", self.path.display());
        assert!(buf.0.len() as u64 % BLOCK_BYTES == 0, "write_at: unaligned length {}", buf.0.len());
        let mut guard = self.disk.state.borrow_mut();
        let state = &mut *guard;
        if state.crash_due() {
            return Err(IoError::new(IoErrorKind::Crashed, "write", &self.path, "power cut (crash_after_ops)"));
        }
        if state.roll(state.faults.write_eio_per_million) {
            return Err(IoError::new(IoErrorKind::Device, "write", &self.path, "injected EIO"));
        }
        let used = state.used_bytes();
        let file_len = state.files.get(&self.path).map(|f| f.current.len()).unwrap_or(0) as u64;
        let end = pos + buf.0.len() as u64;
        let growth = end.saturating_sub(file_len);
        if used + growth > state.faults.capacity_bytes {
            return Err(IoError::new(IoErrorKind::NoSpace, "write", &self.path, "injected ENOSPC"));
        }
        state.stats.writes += 1;
        state.stats.write_bytes += buf.0.len() as u64;
        let file = state
            .files
            .get_mut(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "write", &self.path, "file removed"))?;
        if file.current.len() < end as usize {
            file.current.resize(end as usize, 0);
        }
        file.current[pos as usize..end as usize].copy_from_slice(&buf.0);
        if self.write_through {
            // Durable on return, and only this range: other pending writes stay pending.
            if file.durable.len() < end as usize {
                file.durable.resize(end as usize, 0);
            }
            file.durable[pos as usize..end as usize].copy_from_slice(&buf.0);
            // An older pending write over the same range must not land after this one.
            for (p, data) in file.pending.iter_mut() {
                let (from, to) = (*p, *p + data.len() as u64);
                if from < end && pos < to {
                    let (a, b) = (from.max(pos), to.min(end));
                    data[(a - from) as usize..(b - from) as usize].copy_from_slice(&buf.0[(a - pos) as usize..(b - pos) as usize]);
                }
            }
        } else {
            file.pending.push((pos, buf.0));
        }
        Ok(())
    }

    async fn write_zeros(&self, pos: u64, len: u64) -> Result<(), IoError> {
        self.write_at(pos, SimBuf(vec![0; len as usize])).await
    }

    async fn allocate(&self, len: u64) -> Result<(), IoError> {
        self.check_alive("allocate")?;
        let mut guard = self.disk.state.borrow_mut();
        let state = &mut *guard;
        let used = state.used_bytes();
        let file_len = state.files.get(&self.path).map(|f| f.current.len()).unwrap_or(0) as u64;
        if used + len.saturating_sub(file_len) > state.faults.capacity_bytes {
            return Err(IoError::new(IoErrorKind::NoSpace, "allocate", &self.path, "injected ENOSPC"));
        }
        let file = state
            .files
            .get_mut(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "allocate", &self.path, "file removed"))?;
        // Metadata: durable at once in this model, like creation and truncation.
        if file.current.len() < len as usize {
            file.current.resize(len as usize, 0);
        }
        if file.durable.len() < len as usize {
            file.durable.resize(len as usize, 0);
        }
        Ok(())
    }

    async fn sync(&self) -> Result<(), IoError> {
        self.check_alive("sync")?;
        let mut guard = self.disk.state.borrow_mut();
        let state = &mut *guard;
        if state.crash_due() {
            return Err(IoError::new(IoErrorKind::Crashed, "sync", &self.path, "power cut (crash_after_ops)"));
        }
        if state.roll(state.faults.sync_eio_per_million) {
            return Err(IoError::new(IoErrorKind::Device, "sync", &self.path, "injected EIO"));
        }
        state.stats.syncs += 1;
        let file = state
            .files
            .get_mut(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "sync", &self.path, "file removed"))?;
        file.durable = file.current.clone();
        file.pending.clear();
        Ok(())
    }

    async fn truncate(&self, len: u64) -> Result<(), IoError> {
        self.check_alive("truncate")?;
        let mut state = self.disk.state.borrow_mut();
        let file = state
            .files
            .get_mut(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "truncate", &self.path, "file removed"))?;
        file.current.resize(len as usize, 0);
        file.durable.resize(len as usize, 0);
        for (pos, data) in file.pending.iter_mut() {
            let keep = (len.saturating_sub(*pos) as usize).min(data.len());
            data.truncate(keep);
        }
        Ok(())
    }

    async fn size(&self) -> Result<u64, IoError> {
        self.check_alive("size")?;
        let state = self.disk.state.borrow();
        let file = state
            .files
            .get(&self.path)
            .ok_or_else(|| IoError::new(IoErrorKind::NotFound, "size", &self.path, "file removed"))?;
        Ok(file.current.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;

    fn block(fill: u8) -> SimBuf {
        SimBuf(vec![fill; BLOCK_BYTES as usize])
    }

    #[test]
    fn synced_writes_survive_crash() {
        block_on(async {
            let disk = SimDisk::new(1);
            let f = disk.open(Path::new("/a"), true).await.unwrap();
            f.write_at(0, block(1)).await.unwrap();
            f.sync().await.unwrap();
            disk.crash();
            assert_eq!(f.size().await.unwrap_err().kind, IoErrorKind::Crashed);
            let f = disk.open(Path::new("/a"), false).await.unwrap();
            assert_eq!(f.read_at(0, 4096).await.unwrap(), vec![1; 4096]);
        });
    }

    #[test]
    fn unsynced_writes_are_dropped_kept_or_torn() {
        let mut outcomes = BTreeSet::new();
        for seed in 0..64 {
            block_on(async {
                let disk = SimDisk::new(seed);
                let f = disk.open(Path::new("/a"), true).await.unwrap();
                f.write_at(0, block(0)).await.unwrap();
                f.sync().await.unwrap();
                f.write_at(0, block(9)).await.unwrap();
                disk.crash();
                let bytes = disk.file_bytes(Path::new("/a")).unwrap();
                let kept = bytes.chunks(SECTOR_BYTES as usize).filter(|s| s[0] == 9).count();
                outcomes.insert(match kept {
                    0 => "dropped",
                    8 => "kept",
                    _ => "torn",
                });
            });
        }
        assert_eq!(outcomes.len(), 3, "seeds 0..64 should show every outcome: {outcomes:?}");
    }

    #[test]
    fn enospc_writes_nothing() {
        block_on(async {
            let faults = FaultConfig { capacity_bytes: 8192, ..FaultConfig::default() };
            let disk = SimDisk::with_faults(3, faults);
            let f = disk.open(Path::new("/a"), true).await.unwrap();
            f.write_at(0, SimBuf(vec![1; 8192])).await.unwrap();
            let err = f.write_at(8192, block(2)).await.unwrap_err();
            assert_eq!(err.kind, IoErrorKind::NoSpace);
            assert_eq!(f.size().await.unwrap(), 8192);
            // Overwriting in place needs no space.
            f.write_at(0, block(3)).await.unwrap();
        });
    }

    #[test]
    fn list_names_children_only() {
        block_on(async {
            let disk = SimDisk::new(4);
            disk.create_dir_all(Path::new("/s/cq/t")).await.unwrap();
            disk.open(Path::new("/s/x"), true).await.unwrap();
            disk.open(Path::new("/s/cq/t/0"), true).await.unwrap();
            assert_eq!(disk.list(Path::new("/s")).await.unwrap(), vec!["cq", "x"]);
            assert_eq!(disk.list(Path::new("/nope")).await.unwrap(), Vec::<String>::new());
        });
    }

    #[test]
    #[should_panic(expected = "unaligned position")]
    fn misaligned_write_is_caught() {
        block_on(async {
            let disk = SimDisk::new(5);
            let f = disk.open(Path::new("/a"), true).await.unwrap();
            let _ = f.write_at(100, block(1)).await;
        });
    }
}
