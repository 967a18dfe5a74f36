//! The controller's durable Raft storage (docs/design/controller.md §2.6): the log, the
//! vote and the snapshots, in files under `controllerStorePath/raft/`, behind the narrow
//! `ControllerDisk` seam (DESIGN.md §4).
//!
//! Owns: `ControllerDisk` (append, sync, read, truncate, replace, remove, list) with the
//! std impl `StdDisk` and the crash-simulating `MemDisk`; the file formats; `FileLogStore`
//! (openraft's v2 `RaftLogStorage`); `FileSnapshots` (the hook `MemStateMachine` persists
//! its snapshots through) and `open_file_store`, which reads everything back at start.
//!
//! Formats:
//! - `log`: append-only records `u32 len (BE) | u32 crc32 (BE) | json(Entry)`;
//! - `vote.json`, `purged.json` (the last purged log id), `snapshot-<index>.json`
//!   (`{meta, data}`): each written whole by `replace` (tmp + fsync + rename + dir fsync).
//!
//! Invariants:
//! - an entry is synced before openraft's append callback fires (never acknowledged
//!   before it is durable);
//! - a torn or bad-CRC tail (a crash mid-append) is cut at open; it was never
//!   acknowledged, so dropping it is safe; records behind it are never read;
//! - log indexes in the file are consecutive; `truncate` cuts the file at the first
//!   removed record, `purge` records the purged id (`purged.json`) before it rewrites
//!   the log without the purged records, so a crash between the two only leaves
//!   records at or below the purged id, which open drops;
//! - a snapshot is durable before `MemStateMachine` reports it (built or installed);
//!   older snapshot files are removed only after the new one is in place;
//! - in a process (`offload_io`), every disk call of the log store runs on the glommio
//!   executor's blocking pool and no borrow of the store is held across it, so an fsync
//!   never stalls Raft heartbeats or requests; memory changes only after the disk call
//!   succeeded (openraft calls the store one operation at a time). Snapshot writes
//!   (one per 1000 entries) stay inline.

use super::mem::MemStateMachine;
use super::runtime::GlommioRaftRuntime;
use super::{ControllerTypes, NodeId};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AsyncRuntime, BasicNode, Entry, LogId, LogState, RaftLogReader, SnapshotMeta, StorageError, StorageIOError, Vote,
};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

type C<RT> = ControllerTypes<RT>;

/// The log file's name.
pub const LOG_FILE: &str = "log";
pub const VOTE_FILE: &str = "vote.json";
pub const PURGED_FILE: &str = "purged.json";
const SNAPSHOT_PREFIX: &str = "snapshot-";
const SNAPSHOT_SUFFIX: &str = ".json";
/// Bytes of a record's header (length + CRC).
pub const RECORD_HEADER_BYTES: usize = 8;
/// One log record's JSON at most: a controller entry is a few KB (an election record
/// lists at most 16 candidates); anything larger in the file is garbage.
pub const RECORD_LEN_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Files the storage keeps, by name, in one directory. `Send + Sync`: the file store
/// may run its calls on the executor's blocking pool.
pub trait ControllerDisk: Send + Sync {
    /// The whole file; `None` if it does not exist.
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Appends at the end (creating the file); durable only after `sync`.
    fn append(&self, name: &str, data: &[u8]) -> io::Result<()>;
    fn sync(&self, name: &str) -> io::Result<()>;
    /// Cuts the file to `len` bytes and syncs it.
    fn truncate(&self, name: &str, len: u64) -> io::Result<()>;
    /// Atomically and durably replaces the whole file (tmp + fsync + rename + dir fsync).
    fn replace(&self, name: &str, data: &[u8]) -> io::Result<()>;
    fn remove(&self, name: &str) -> io::Result<()>;
    fn list(&self) -> io::Result<Vec<String>>;
}

/// `ControllerDisk` on a directory of the real file system.
#[derive(Debug, Clone)]
pub struct StdDisk {
    dir: PathBuf,
}

impl StdDisk {
    /// Creates the directory if needed.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<Self> {
        fs::create_dir_all(dir.as_ref())?;
        Ok(Self { dir: dir.as_ref().to_path_buf() })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }
}

impl ControllerDisk for StdDisk {
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.path(name)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let existed = self.path(name).exists();
        OpenOptions::new().create(true).append(true).open(self.path(name))?.write_all(data)?;
        if !existed {
            // A new file's directory entry must be durable as well as its bytes.
            self.sync_dir()?;
        }
        Ok(())
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        OpenOptions::new().append(true).open(self.path(name))?.sync_data()
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(self.path(name))?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn replace(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let tmp = self.path(&format!("{name}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.path(name))?;
        self.sync_dir()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.path(name)) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }
}

#[derive(Debug, Default, Clone)]
struct MemFile {
    /// What survives a crash.
    durable: Vec<u8>,
    /// What reads see.
    current: Vec<u8>,
}

/// An in-memory `ControllerDisk` for tests: `crash` drops every unsynced byte, or (with
/// a seed) keeps a random prefix of the unsynced tail of appended files, as a torn write.
#[derive(Debug, Default, Clone)]
pub struct MemDisk {
    files: Arc<Mutex<BTreeMap<String, MemFile>>>,
}

impl MemDisk {
    fn files(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, MemFile>> {
        // A test thread that panicked while holding it leaves the map as it was.
        self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A crash: every file goes back to what was synced; with `tear_seed`, a file whose
    /// unsynced bytes were appended after its synced ones keeps a pseudo-random prefix of
    /// them (a torn append).
    pub fn crash(&self, tear_seed: Option<u64>) {
        let mut rng = tear_seed.unwrap_or(0) | 1;
        let mut next = move || {
            // xorshift64: deterministic per seed, no dependency.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut files = self.files();
        for f in files.values_mut() {
            let mut kept = f.durable.clone();
            if tear_seed.is_some() && f.current.len() > f.durable.len() && f.current.starts_with(&f.durable) {
                let extra = &f.current[f.durable.len()..];
                let n = (next() % (extra.len() as u64 + 1)) as usize;
                kept.extend_from_slice(&extra[..n]);
            }
            f.current = kept.clone();
            f.durable = kept;
        }
        files.retain(|_, f| !(f.durable.is_empty() && f.current.is_empty()));
    }

    /// Flips one byte of a file (a bad sector), durably.
    pub fn corrupt(&self, name: &str, at: usize) {
        if let Some(f) = self.files().get_mut(name) {
            if at < f.current.len() {
                f.current[at] ^= 0xff;
                f.durable = f.current.clone();
            }
        }
    }

    pub fn file_len(&self, name: &str) -> usize {
        self.files().get(name).map_or(0, |f| f.current.len())
    }

    pub fn is_empty(&self) -> bool {
        self.files().is_empty()
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, name.to_string())
}

impl ControllerDisk for MemDisk {
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        Ok(self.files().get(name).map(|f| f.current.clone()))
    }

    fn append(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.files().entry(name.to_string()).or_default().current.extend_from_slice(data);
        Ok(())
    }

    fn sync(&self, name: &str) -> io::Result<()> {
        let mut files = self.files();
        let f = files.get_mut(name).ok_or_else(|| not_found(name))?;
        f.durable = f.current.clone();
        Ok(())
    }

    fn truncate(&self, name: &str, len: u64) -> io::Result<()> {
        let mut files = self.files();
        let f = files.get_mut(name).ok_or_else(|| not_found(name))?;
        f.current.truncate(len as usize);
        f.durable = f.current.clone();
        Ok(())
    }

    fn replace(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.files().insert(name.to_string(), MemFile { durable: data.to_vec(), current: data.to_vec() });
        Ok(())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.files().remove(name);
        Ok(())
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.files().keys().cloned().collect())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FileStoreError {
    #[error("{file}: {source}")]
    Io { file: String, source: io::Error },
    #[error("{file} does not decode: {source}")]
    Decode { file: String, source: serde_json::Error },
    #[error("log record at byte {offset} has index {found}, expected {expected} (the log is not consecutive)")]
    Gap { offset: usize, found: u64, expected: u64 },
}

fn io_err(file: &str) -> impl FnOnce(io::Error) -> FileStoreError + '_ {
    move |source| FileStoreError::Io { file: file.to_string(), source }
}

/// One record: header + JSON.
pub fn encode_record(json: &[u8], out: &mut Vec<u8>) {
    // Entries are bounded far below u32 (RECORD_LEN_MAX_BYTES); a larger one is a bug.
    let len = u32::try_from(json.len()).expect("log record larger than 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(json).to_be_bytes());
    out.extend_from_slice(json);
}

/// The records of a log file: each record's JSON and where it starts, and the length
/// of the valid prefix (anything after it is a torn or corrupt tail).
pub fn decode_records(bytes: &[u8]) -> (Vec<(usize, &[u8])>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= RECORD_HEADER_BYTES {
        let len = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        let crc = u32::from_be_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        if len > RECORD_LEN_MAX_BYTES || bytes.len() - at - RECORD_HEADER_BYTES < len {
            break;
        }
        let json = &bytes[at + RECORD_HEADER_BYTES..at + RECORD_HEADER_BYTES + len];
        if crc32fast::hash(json) != crc {
            break;
        }
        records.push((at, json));
        at += RECORD_HEADER_BYTES + len;
    }
    (records, at)
}

struct LogInner<RT: AsyncRuntime> {
    disk: Arc<dyn ControllerDisk>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    /// index → (byte offset of its record, entry).
    log: BTreeMap<u64, (u64, Entry<C<RT>>)>,
    /// Bytes of the log file.
    end: u64,
    /// Run disk calls on the glommio executor's blocking pool (`offload_io`).
    offload: bool,
}

/// openraft's log store over a `ControllerDisk`.
pub struct FileLogStore<RT: AsyncRuntime = GlommioRaftRuntime> {
    inner: Rc<RefCell<LogInner<RT>>>,
}

impl<RT: AsyncRuntime> Clone for FileLogStore<RT> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<RT: AsyncRuntime> Debug for FileLogStore<RT> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileLogStore")
    }
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    /// The `ControllerState` JSON.
    data: String,
}

/// Persists `MemStateMachine` snapshots as `snapshot-<index>.json`.
pub struct FileSnapshots {
    disk: Arc<dyn ControllerDisk>,
}

fn snapshot_name(meta: &SnapshotMeta<NodeId, BasicNode>) -> String {
    format!("{SNAPSHOT_PREFIX}{:020}{SNAPSHOT_SUFFIX}", meta.last_log_id.map_or(0, |l| l.index))
}

fn snapshot_files(disk: &dyn ControllerDisk) -> io::Result<Vec<String>> {
    Ok(disk
        .list()?
        .into_iter()
        .filter(|n| n.starts_with(SNAPSHOT_PREFIX) && n.ends_with(SNAPSHOT_SUFFIX))
        .collect())
}

impl FileSnapshots {
    /// Writes the snapshot durably, then removes the older ones.
    pub fn save(&self, meta: &SnapshotMeta<NodeId, BasicNode>, data: &[u8]) -> Result<(), StorageError<NodeId>> {
        let e = |err: &dyn std::error::Error| {
            StorageIOError::write_snapshot(Some(meta.signature()), openraft::AnyError::error(err.to_string()))
        };
        let text = String::from_utf8(data.to_vec()).map_err(|err| e(&err))?;
        let json = serde_json::to_vec(&StoredSnapshot { meta: meta.clone(), data: text }).map_err(|err| e(&err))?;
        let name = snapshot_name(meta);
        self.disk.replace(&name, &json).map_err(|err| e(&err))?;
        for old in snapshot_files(&*self.disk).map_err(|err| e(&err))? {
            if old != name {
                self.disk.remove(&old).map_err(|err| e(&err))?;
            }
        }
        Ok(())
    }
}

/// Opens (or creates) the storage on `disk`: the log store, and the state machine
/// restored from the newest snapshot (entries after it are re-applied by openraft once
/// they are committed again).
pub fn open_file_store<RT: AsyncRuntime>(
    disk: Arc<dyn ControllerDisk>,
) -> Result<(FileLogStore<RT>, MemStateMachine), FileStoreError> {
    let vote = match disk.read(VOTE_FILE).map_err(io_err(VOTE_FILE))? {
        None => None,
        Some(b) => Some(serde_json::from_slice(&b).map_err(|source| FileStoreError::Decode { file: VOTE_FILE.into(), source })?),
    };
    let last_purged: Option<LogId<NodeId>> = match disk.read(PURGED_FILE).map_err(io_err(PURGED_FILE))? {
        None => None,
        Some(b) => serde_json::from_slice(&b).map_err(|source| FileStoreError::Decode { file: PURGED_FILE.into(), source })?,
    };
    let bytes = disk.read(LOG_FILE).map_err(io_err(LOG_FILE))?.unwrap_or_default();
    let (records, valid) = decode_records(&bytes);
    let mut log = BTreeMap::new();
    let mut cut = valid;
    let mut expected: Option<u64> = None;
    for (offset, json) in records {
        let entry: Entry<C<RT>> = match serde_json::from_slice(json) {
            Ok(e) => e,
            Err(e) => {
                // A record whose CRC matches but whose JSON does not decode was written
                // by a different version or is garbage: the tail from here is cut.
                tracing::warn!(offset, error = %e, "controller raft log: undecodable record; cutting the log here");
                cut = offset;
                break;
            }
        };
        let index = entry.log_id.index;
        if let Some(want) = expected {
            if index != want {
                return Err(FileStoreError::Gap { offset, found: index, expected: want });
            }
        }
        expected = Some(index + 1);
        if last_purged.is_some_and(|p| index <= p.index) {
            continue;
        }
        log.insert(index, (offset as u64, entry));
    }
    if cut < bytes.len() {
        tracing::warn!(kept = cut, dropped = bytes.len() - cut, "controller raft log: cutting a torn or corrupt tail");
        disk.truncate(LOG_FILE, cut as u64).map_err(io_err(LOG_FILE))?;
    }
    let mut sm = MemStateMachine::default();
    if let Some(name) = snapshot_files(&*disk).map_err(io_err("snapshots"))?.pop() {
        let b = disk.read(&name).map_err(io_err(&name))?.unwrap_or_default();
        let stored: StoredSnapshot =
            serde_json::from_slice(&b).map_err(|source| FileStoreError::Decode { file: name.clone(), source })?;
        let state =
            serde_json::from_str(&stored.data).map_err(|source| FileStoreError::Decode { file: name.clone(), source })?;
        sm = MemStateMachine::restored(stored.meta, state, stored.data.into_bytes());
    }
    sm.set_persist(Rc::new(FileSnapshots { disk: disk.clone() }));
    let inner = LogInner { disk, vote, committed: None, last_purged, log, end: cut as u64, offload: false };
    Ok((FileLogStore { inner: Rc::new(RefCell::new(inner)) }, sm))
}

impl<RT: AsyncRuntime> FileLogStore<RT> {
    /// From now on, disk calls (appends, syncs, vote and purge writes) run on the
    /// current glommio executor's blocking pool, so an fsync does not stall the
    /// executor (Raft heartbeats, lease rounds, requests). Call it on that executor.
    pub fn offload_io(&self) {
        self.inner.borrow_mut().offload = true;
    }

    /// Runs `f` on the disk: inline, or on the blocking pool after `offload_io`.
    /// No borrow of the store is held while it runs.
    async fn io<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn ControllerDisk) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let (disk, offload) = {
            let inner = self.inner.borrow();
            (inner.disk.clone(), inner.offload)
        };
        if offload {
            glommio::executor().spawn_blocking(move || f(&*disk)).await
        } else {
            f(&*disk)
        }
    }

    /// Whether nothing was ever stored (no vote, no entry, no purge): a first boot.
    pub fn is_fresh(&self) -> bool {
        let inner = self.inner.borrow();
        inner.vote.is_none() && inner.log.is_empty() && inner.last_purged.is_none()
    }

    /// Every entry's log id, for convergence checks.
    pub fn log_ids(&self) -> Vec<LogId<NodeId>> {
        self.inner.borrow().log.values().map(|(_, e)| e.log_id).collect()
    }

    /// Appends and syncs `entries`; they are in memory only once durable. (`append`
    /// without openraft's callback, which only openraft can make: crash tests use it.)
    /// openraft calls the store one operation at a time, so the file's end does not
    /// move while the write runs.
    pub async fn append_synced(&self, entries: impl IntoIterator<Item = Entry<C<RT>>>) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut placed = Vec::new();
        let end = self.inner.borrow().end;
        for entry in entries {
            let json = serde_json::to_vec(&entry).map_err(io::Error::other)?;
            if json.len() > RECORD_LEN_MAX_BYTES {
                // Open would take it for garbage and cut it: refuse it before it is acknowledged.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("log entry {} is {} bytes, over RECORD_LEN_MAX_BYTES", entry.log_id, json.len()),
                ));
            }
            placed.push((end + buf.len() as u64, entry));
            encode_record(&json, &mut buf);
        }
        let len = buf.len() as u64;
        self.io(move |d| {
            d.append(LOG_FILE, &buf)?;
            d.sync(LOG_FILE)
        })
        .await?;
        let mut inner = self.inner.borrow_mut();
        inner.end += len;
        for (offset, entry) in placed {
            inner.log.insert(entry.log_id.index, (offset, entry));
        }
        Ok(())
    }
}

impl<RT: AsyncRuntime> RaftLogReader<C<RT>> for FileLogStore<RT> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<C<RT>>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().log.range(range).map(|(_, (_, e))| e.clone()).collect())
    }
}

impl<RT: AsyncRuntime> RaftLogStorage<C<RT>> for FileLogStore<RT> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C<RT>>, StorageError<NodeId>> {
        let inner = self.inner.borrow();
        let last = inner.log.values().next_back().map(|(_, e)| e.log_id).or(inner.last_purged);
        Ok(LogState { last_purged_log_id: inner.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let json = serde_json::to_vec(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.io(move |d| d.replace(VOTE_FILE, &json)).await.map_err(|e| StorageIOError::write_vote(&e))?;
        self.inner.borrow_mut().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError<NodeId>> {
        // Kept in memory only: openraft does not need it durable (a restarted node
        // learns the commit index from the leader and re-applies from its snapshot).
        self.inner.borrow_mut().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C<RT>>) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<C<RT>>>,
    {
        match self.append_synced(entries).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(StorageIOError::write_logs(&e).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let offset = self.inner.borrow().log.range(log_id.index..).next().map(|(_, (offset, _))| *offset);
        let Some(offset) = offset else { return Ok(()) };
        self.io(move |d| d.truncate(LOG_FILE, offset)).await.map_err(|e| StorageIOError::write_logs(&e))?;
        let mut inner = self.inner.borrow_mut();
        inner.log.split_off(&log_id.index);
        inner.end = offset;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let purged = serde_json::to_vec(&Some(log_id)).map_err(|e| StorageIOError::write_logs(&e))?;
        let mut buf = Vec::new();
        let mut log = BTreeMap::new();
        for (index, (_, entry)) in self.inner.borrow().log.range(log_id.index + 1..) {
            let json = serde_json::to_vec(entry).map_err(|e| StorageIOError::write_log_entry(entry.log_id, &e))?;
            log.insert(*index, (buf.len() as u64, entry.clone()));
            encode_record(&json, &mut buf);
        }
        let end = buf.len() as u64;
        // The purge point first: a crash before the rewrite leaves records at or below
        // it, which open drops.
        self.io(move |d| {
            d.replace(PURGED_FILE, &purged)?;
            d.replace(LOG_FILE, &buf)
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e))?;
        let mut inner = self.inner.borrow_mut();
        inner.last_purged = Some(log_id);
        inner.log = log;
        inner.end = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (bytes of a log file, expected (record JSONs, valid prefix length)).
    fn check(bytes: &[u8], expected: (&[&str], usize)) {
        let (records, valid) = decode_records(bytes);
        let got: Vec<&str> = records.iter().map(|(_, j)| std::str::from_utf8(j).unwrap()).collect();
        assert_eq!((got.as_slice(), valid), expected, "{bytes:?}");
    }

    fn records(jsons: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for j in jsons {
            encode_record(j.as_bytes(), &mut out);
        }
        out
    }

    #[test]
    fn torn_and_corrupt_tails_are_cut() {
        let two = records(&["{\"a\":1}", "{\"b\":22}"]);
        check(&[], (&[], 0));
        check(&two, (&["{\"a\":1}", "{\"b\":22}"], two.len()));
        // Torn inside the second header, inside its body.
        check(&two[..19], (&["{\"a\":1}"], 15));
        check(&two[..two.len() - 1], (&["{\"a\":1}"], 15));
        // A flipped body byte: the CRC refuses the record and everything after it.
        let mut bad = two.clone();
        bad[10] ^= 1;
        check(&bad, (&[], 0));
        let mut bad = two.clone();
        bad[two.len() - 1] ^= 1;
        check(&bad, (&["{\"a\":1}"], 15));
        // An absurd length is garbage, not a 4 GiB allocation.
        let mut huge = records(&["{}"]);
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        check(&huge, (&["{}"], 10));
    }

    proptest::proptest! {
        #[test]
        fn records_roundtrip_and_any_prefix_decodes_a_prefix(jsons in proptest::collection::vec("[a-z0-9]{0,40}", 0..8), cut in 0usize..400) {
            let refs: Vec<&str> = jsons.iter().map(String::as_str).collect();
            let bytes = records(&refs);
            let (all, valid) = decode_records(&bytes);
            proptest::prop_assert_eq!(valid, bytes.len());
            proptest::prop_assert_eq!(all.len(), jsons.len());
            let cut = cut.min(bytes.len());
            let (some, valid) = decode_records(&bytes[..cut]);
            proptest::prop_assert!(valid <= cut);
            for ((_, j), want) in some.iter().zip(&jsons) {
                proptest::prop_assert_eq!(*j, want.as_bytes());
            }
        }
    }
}
