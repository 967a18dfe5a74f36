//! Store errors. `Io` and `Failed` are fatal for the shard's store (fsyncgate: never
//! retry a failed write or sync and pretend); the rest are answers to a caller.
//!
//! Invariant: a failed *read* is `Read`, never `Io`: it names the file and the offset
//! in it, leaves the store serving (the bytes on disk are unchanged, and a consumer
//! re-pulls, so exiting would only turn one bad sector into a crash loop), and is
//! counted in `StoreStats::read_errors`. Only writes and syncs stop the store.

use super::io::IoError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("I/O failure, store stopped: {0}")]
    Io(#[from] IoError),
    #[error("read error in {} at offset {offset}: {source}", .file.display())]
    Read { file: PathBuf, offset: u64, source: IoError },
    #[error("store stopped after an earlier failure: {0}")]
    Failed(String),
    #[error("corrupt record in {file} at offset {offset}: {reason}")]
    Corrupt { file: PathBuf, offset: u64, reason: String },
    #[error("message too large: {size_bytes} bytes (max {max_bytes})")]
    TooLarge { size_bytes: u64, max_bytes: u64 },
    #[error("invalid message: {0}")]
    Illegal(String),
    #[error("store busy: {dirty_bytes} bytes waiting for flush (max {max_bytes})")]
    Busy { dirty_bytes: u64, max_bytes: u64 },
    /// Index keys waiting while the index is flushed reached their bound.
    #[error("{pending_keys} index keys wait for the index flush (max {max_keys})")]
    IndexBusy { pending_keys: usize, max_keys: usize },
    /// The CommitLog ran `checkpoint_lag_bytes_max` past the durable checkpoint: the
    /// logics flush is behind.
    #[error("checkpoint {lag_bytes} bytes behind the log (max {max_bytes}): ConsumeQueue flush catching up")]
    CheckpointBusy { lag_bytes: u64, max_bytes: u64 },
    #[error("disk full: {used_percent}% used, writes refused above {refuse_percent}%")]
    DiskFull { used_percent: u32, refuse_percent: u32 },
    #[error("no space left on device while writing; free space and restart")]
    NoSpace,
    /// A replicated batch does not start at this log's end.
    #[error("replicated batch starts at {got}, this log ends at {expected}")]
    ReplicaGap { expected: u64, got: u64 },
    /// A replicated record does not continue this log (bad record, wrong offsets):
    /// master and replica hold different histories.
    #[error("replicated record at {offset} does not continue this log: {reason}")]
    ReplicaDiverged { offset: u64, reason: String },
    /// A replica can be re-seeded (started mid-log) only while it holds nothing.
    #[error("cannot re-seed this store at {offset}: {reason}")]
    ReseedRefused { offset: u64, reason: String },
    #[error("store is already open by another process: {0}")]
    Locked(String),
    #[error(transparent)]
    Config(#[from] super::config::ConfigError),
    #[error(transparent)]
    Index(#[from] super::index::IndexError),
}

impl StoreError {
    /// Whether the store must stop (and the process crash and recover).
    pub fn is_fatal(&self) -> bool {
        matches!(self, StoreError::Io(_) | StoreError::Failed(_) | StoreError::NoSpace)
    }
}
