//! Store configuration: every bound the store enforces, with its unit in its name.
//!
//! Invariant (by construction, `record_bytes_limit`): a segment holds at least one
//! maximal record plus the 8-byte blank that ends it, and one flush window holds at
//! least one maximal record, so recovery's torn-tail window (`dirty_bytes_max`) always
//! covers a whole write.

use super::index::IndexConfig;
use thiserror::Error;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

/// How a CommitLog segment is made ready before data is written into it.
/// Fastest background scrub: a scrub is meant to trickle, never to compete with pulls.
pub const SCRUB_BYTES_PER_SEC_MAX: u64 = GIB;

/// Most read-ahead windows a shard may keep (2 MiB each: 1 GiB).
pub const READ_AHEAD_WINDOWS_LIMIT: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preallocate {
    /// Write zeros over the whole segment and sync: data later overwrites written
    /// blocks, which makes each fdatasync about 3x cheaper on ext4. Costs one extra
    /// write of every byte: right for sync flush, where fdatasync dominates.
    Zero,
    /// fallocate the segment: no extra write, but each fdatasync must also commit the
    /// extent conversion. Right for async flush, where bandwidth dominates.
    Fallocate,
}

/// When an append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// After the group-commit flush that covers it (write + fdatasync).
    Sync,
    /// After the append; flushed every `flush_interval_ms` or at `flush_min_bytes`.
    Async,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub segment_bytes: u64,
    pub preallocate: Preallocate,
    pub flush_mode: FlushMode,
    pub flush_interval_ms: u64,
    pub flush_min_bytes: u64,
    /// Appended but unflushed bytes beyond which appends are refused as busy. One
    /// group commit writes all dirty bytes, so this is also the torn-tail window.
    pub dirty_bytes_max: u64,
    /// CommitLog bytes past the durable checkpoint beyond which appends are refused as
    /// busy; the logics flusher starts a pass early at half of it. Recovery after a
    /// crash re-reads at most this much, so it bounds start-up time (issue 15).
    pub checkpoint_lag_bytes_max: u64,
    /// CommitLog segments opened with O_DSYNC: each group commit is one write that is
    /// durable when it completes, instead of a write and then an fdatasync (two device
    /// round trips in sequence). `None` (the default) follows the flush mode: on under
    /// sync flush (the same durability, 1.5x the acks/s at one send in flight on the
    /// reference VM, `results/bench-guard/issue22-write-through.md`), off under async
    /// flush (where every background write would wait for the device).
    pub write_through: Option<bool>,
    /// Cold-read windows (`READ_AHEAD_WINDOW_BYTES`, 2 MiB each) kept per shard; 0 reads
    /// exactly what each pull asks for.
    pub read_ahead_windows_max: usize,
    /// Background scrub of sealed CommitLog segments (every record's CRC re-checked
    /// from the device), bytes per second; 0 = off. At most `SCRUB_BYTES_PER_SEC_MAX`.
    pub scrub_bytes_per_sec: u64,
    /// Flushed CommitLog bytes kept in memory for tail reads.
    pub tail_cache_bytes: u64,
    /// Largest encoded record accepted (and recognised as a record by recovery, the
    /// scrub and replicas), at most what the geometry holds: the store reads
    /// `record_bytes_limit()`.
    pub record_bytes_max: u64,
    /// ConsumeQueue entries per file (a multiple of 1024 so files are block-aligned).
    pub cq_entries_per_file: u64,
    /// ConsumeQueue entries each queue keeps in memory after they are flushed.
    pub cq_tail_entries: u64,
    pub index: IndexConfig,
    /// Age past which a sealed CommitLog segment is expired (Apache `fileReservedTime`),
    /// measured from its newest record's store time.
    pub file_reserved_hours: u64,
    /// Hours of day (0–23, in the host's local time zone, as Apache's `isItTimeToDo`
    /// reads `Calendar.getInstance()`) at which expired segments are deleted: any of
    /// them, as Apache's `deleteWhen=04;16` (at least one, at most 24).
    pub delete_when_hours: Vec<u32>,
    /// Used fraction of the disk above which expired segments are deleted at any hour,
    /// not only at `delete_when_hours` (Apache `diskMaxUsedSpaceRatio`, 75 %); also
    /// where the disk check starts warning. Never deletes an unexpired segment.
    pub disk_max_used_ratio: f64,
    /// Used fraction above which the oldest segments are deleted even if unexpired,
    /// when `clean_file_forcibly` (Apache `diskSpaceCleanForciblyRatio`, 85 %); appends
    /// refused at `disk_refuse_ratio` resume only once usage is back at or below it.
    pub disk_force_clean_ratio: f64,
    /// Used fraction above which appends are refused (Apache
    /// `diskSpaceWarningLevelRatio`, 90 %); also forces a clean as Apache's does.
    pub disk_refuse_ratio: f64,
    /// Whether disk pressure may delete unexpired segments (Apache
    /// `cleanFileForciblyEnable`, on). Off: only expired segments are ever deleted,
    /// whatever the disk's fill; appends are refused instead.
    pub clean_file_forcibly: bool,
    /// Most segments one retention pass deletes (Apache `deleteFileBatchMax`, 10); the
    /// next pass (`CLEAN_INTERVAL_MS` later) goes on.
    pub delete_files_per_pass_max: u32,
    /// Start even if a record in the middle of the log is corrupt, truncating there.
    pub allow_truncate_corrupt: bool,
}

impl StoreConfig {
    /// The longest record this store holds: `record_bytes_max`, and never more than a
    /// segment (less the 8-byte blank that ends it) or one flush window holds. Every
    /// record check of the store uses it.
    pub fn record_bytes_limit(&self) -> u64 {
        self.record_bytes_max.min(self.segment_bytes.saturating_sub(8)).min(self.dirty_bytes_max)
    }

    /// Whether CommitLog segments are opened O_DSYNC (`write_through`, or the flush
    /// mode's default when unset).
    pub fn write_through(&self) -> bool {
        self.write_through.unwrap_or(self.flush_mode == FlushMode::Sync)
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            segment_bytes: GIB,
            preallocate: Preallocate::Zero,
            flush_mode: FlushMode::Async,
            flush_interval_ms: 500,
            flush_min_bytes: 4 * MIB,
            dirty_bytes_max: 64 * MIB,
            checkpoint_lag_bytes_max: 512 * MIB,
            write_through: None,
            read_ahead_windows_max: 64,
            scrub_bytes_per_sec: 0,
            tail_cache_bytes: 64 * MIB,
            record_bytes_max: 4 * MIB + 64 * KIB,
            cq_entries_per_file: 300 * 1024,
            cq_tail_entries: 1024,
            index: IndexConfig::default(),
            file_reserved_hours: 72,
            delete_when_hours: vec![4],
            disk_max_used_ratio: 0.75,
            disk_force_clean_ratio: 0.85,
            disk_refuse_ratio: 0.90,
            clean_file_forcibly: true,
            delete_files_per_pass_max: 10,
            allow_truncate_corrupt: false,
        }
    }
}

#[derive(Debug, Clone, Error, PartialEq)]
#[error("invalid store configuration: {0}")]
pub struct ConfigError(pub String);

impl StoreConfig {
    /// A small configuration for tests: 64 KiB segments, tiny index.
    pub fn for_tests() -> Self {
        Self {
            segment_bytes: 64 * KIB,
            flush_min_bytes: 8 * KIB,
            dirty_bytes_max: 32 * KIB,
            // Simulation tests drive flushes by hand and many never flush the logics.
            checkpoint_lag_bytes_max: 16 * MIB,
            tail_cache_bytes: 8 * KIB,
            record_bytes_max: 8 * KIB,
            cq_entries_per_file: 1024,
            cq_tail_entries: 16,
            index: IndexConfig { slot_count: 64, entries_max: 256 },
            ..Self::default()
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |m: String| Err(ConfigError(m));
        if self.segment_bytes % super::io::BLOCK_BYTES != 0 {
            return fail(format!("segment_bytes {} is not a multiple of 4096", self.segment_bytes));
        }
        if self.record_bytes_limit() < super::io::BLOCK_BYTES {
            return fail(format!(
                "segment_bytes {} and dirty_bytes_max {} leave records at most {} bytes (at least 4096 needed)",
                self.segment_bytes,
                self.dirty_bytes_max,
                self.record_bytes_limit()
            ));
        }
        if self.checkpoint_lag_bytes_max < 2 * self.dirty_bytes_max {
            return fail(format!(
                "checkpoint_lag_bytes_max {} must be at least twice dirty_bytes_max {}",
                self.checkpoint_lag_bytes_max, self.dirty_bytes_max
            ));
        }
        if self.scrub_bytes_per_sec > SCRUB_BYTES_PER_SEC_MAX {
            return fail(format!("scrub_bytes_per_sec {} is above {SCRUB_BYTES_PER_SEC_MAX}", self.scrub_bytes_per_sec));
        }
        if self.read_ahead_windows_max > READ_AHEAD_WINDOWS_LIMIT {
            return fail(format!("read_ahead_windows_max {} is above {READ_AHEAD_WINDOWS_LIMIT}", self.read_ahead_windows_max));
        }
        if self.cq_entries_per_file == 0 || self.cq_entries_per_file % 1024 != 0 {
            return fail(format!("cq_entries_per_file {} must be a positive multiple of 1024", self.cq_entries_per_file));
        }
        if self.delete_when_hours.is_empty() || self.delete_when_hours.len() > 24 {
            return fail(format!("delete_when_hours needs 1..=24 hours, got {}", self.delete_when_hours.len()));
        }
        if let Some(h) = self.delete_when_hours.iter().find(|&&h| h > 23) {
            return fail(format!("delete_when_hour {h} is not an hour of the day"));
        }
        let ratios = [
            ("disk_max_used_ratio", self.disk_max_used_ratio),
            ("disk_force_clean_ratio", self.disk_force_clean_ratio),
            ("disk_refuse_ratio", self.disk_refuse_ratio),
        ];
        if let Some((name, r)) = ratios.iter().find(|(_, r)| !(0.0..=1.0).contains(r)) {
            return fail(format!("{name} {r} is not a fraction in 0..=1"));
        }
        // Forced cleaning must start no later than appends are refused, or a full disk
        // would refuse writes while keeping what it could delete. `disk_max_used_ratio`
        // may lie above either (Apache's diskMaxUsedSpaceRatio=88 with the default 85):
        // it only widens when expired segments go.
        if self.disk_force_clean_ratio > self.disk_refuse_ratio {
            return fail(format!(
                "disk_force_clean_ratio {} must not exceed disk_refuse_ratio {}",
                self.disk_force_clean_ratio, self.disk_refuse_ratio
            ));
        }
        if self.delete_files_per_pass_max == 0 {
            return fail("delete_files_per_pass_max must be at least 1".into());
        }
        Ok(())
    }

    /// Bytes past a torn tail that recovery may find garbage in: one group commit
    /// (all dirty bytes) plus the blocks it starts and ends in.
    pub fn torn_window_bytes(&self) -> u64 {
        self.dirty_bytes_max + 2 * super::io::BLOCK_BYTES
    }
}
