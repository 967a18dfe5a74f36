//! Disk watermarks: `check_disk` re-reads the filesystem's usage, warns past
//! `disk_max_used_ratio`, refuses appends past `disk_refuse_ratio` (Apache's
//! `diskSpaceWarningLevelRatio`) and accepts them again once usage is back at or below
//! `disk_force_clean_ratio`, as Apache's `isSpaceToDelete` marks the disk OK only
//! there (between the two it leaves the mark as it was, so appends do not flap while
//! retention frees space); a full disk met while pre-allocating a segment refuses them
//! too (`on_no_space`). Comparisons are strict (`>`), as Apache's.
//!
//! Invariant: a full disk is not a store failure: appends are answered `DiskFull` while
//! `Inner::disk_full` is set, and everything else goes on.

use super::*;
use crate::store::io::IoError;

impl<D: Disk, C: Clock> Store<D, C> {
    /// Re-reads disk usage: warns, refuses appends past `disk_refuse_ratio`, and lets
    /// them resume once usage is back at or below `disk_force_clean_ratio`. Returns the
    /// used ratio.
    pub async fn check_disk(&self) -> Result<f64, StoreError> {
        let space = self.disk.space(&self.dir).await?;
        let ratio = space.used_ratio();
        let cfg = self.runtime_config();
        let refuse = cfg.disk_refuse_ratio;
        let mut inner = self.inner.borrow_mut();
        inner.stats.disk_used_permille = (ratio * 1000.0) as u64;
        // Each condition is logged when it starts and when it ends, never once per
        // check while it holds; crossings are counted for the metrics.
        if ratio > refuse {
            if inner.disk_full.is_none() {
                inner.stats.disk_watermark_crossings += 1;
                tracing::warn!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk above the refuse watermark: refusing appends");
            }
            inner.disk_full = Some(((ratio * 100.0) as u32, (refuse * 100.0) as u32));
        } else if ratio <= cfg.disk_force_clean_ratio && inner.disk_full.take().is_some() {
            tracing::info!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk space available again: accepting appends");
        }
        let above_max_used = ratio > cfg.disk_max_used_ratio;
        if above_max_used != inner.disk_above_max_used {
            inner.disk_above_max_used = above_max_used;
            if above_max_used {
                inner.stats.disk_watermark_crossings += 1;
                tracing::warn!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk above diskMaxUsedSpaceRatio: expired segments are deleted at any hour");
            } else {
                tracing::info!(shard = self.shard.0, used_percent = (ratio * 100.0) as u32, "disk back below diskMaxUsedSpaceRatio: expired segments wait for deleteWhen");
            }
        }
        Ok(ratio)
    }

    pub fn refusing_writes(&self) -> bool {
        self.inner.borrow().disk_full.is_some()
    }

    pub(super) async fn on_no_space(&self, e: &IoError) {
        tracing::warn!(shard = self.shard.0, error = %e, "disk full: refusing appends until space is freed");
        let refuse_percent = (self.runtime_config().disk_refuse_ratio * 100.0) as u32;
        self.inner.borrow_mut().disk_full = Some((100, refuse_percent));
        // The half-written segment was removed by `segmented::ensure_segment` while it
        // still held the segment's claim (removing it here raced the next claimant).
    }
}
