//! Retention and topic deletion: expired CommitLog segments (and, under disk
//! pressure with `clean_file_forcibly`, the oldest unexpired ones) are deleted, then
//! the ConsumeQueue and index files that pointed only into them; `delete_topic` swaps
//! a topic's queues for empty ones and removes their files once a checkpoint no longer
//! counts them.
//!
//! When a pass runs and what it may delete is Apache RocketMQ's
//! `CleanCommitLogService.deleteExpiredFiles` (`clean_trigger`): at any of
//! `delete_when_hours` (local time) or above `disk_max_used_ratio`, expired segments;
//! above `disk_force_clean_ratio` (or `disk_refuse_ratio`) with `clean_file_forcibly`,
//! the oldest segments whatever their age; oldest first, stopping at the first segment
//! it may not delete, at most `delete_files_per_pass_max` per pass.
//!
//! Invariants: never deletes the active segment, nor a segment past the durable end or
//! the last checkpoint's `logics_phys`; never deletes an unexpired segment unless
//! `clean_file_forcibly` is on and usage, re-read before each such deletion, is above
//! the force-clean (or refuse) watermark; the log's start (`commitlog_start`) moves
//! before the file goes, and the read-ahead windows and pull blocks are dropped with
//! it; a deleted queue's files outlive the checkpoint that still counts their entries.

use super::*;
use crate::store::config::StoreConfig;
use crate::store::consumequeue::ENTRY_BYTES;
use crate::store::io::{local_hour_of_day, IoErrorKind};
use crate::store::segmented::{log_accessor, read_log};
use ringmq_client::message::stored::StoredMessageView;

/// Why a retention pass runs and how far it may go: Apache's `isTimeToDelete`,
/// `isSpaceToDelete` and `cleanAtOnce`, from the hour and the disk's used fraction.
/// Every comparison is strict (`>`), as Apache's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanTrigger {
    /// The local hour is one of `delete_when_hours`.
    pub at_hour: bool,
    /// Usage is above `disk_max_used_ratio`, `disk_force_clean_ratio` or
    /// `disk_refuse_ratio`: expired segments go at any hour.
    pub space_to_delete: bool,
    /// Usage is above the force-clean or refuse watermark and `clean_file_forcibly` is
    /// on: unexpired segments may go too, oldest first.
    pub clean_at_once: bool,
}

impl CleanTrigger {
    /// Whether the pass deletes anything at all (expired segments at least).
    pub fn runs(&self) -> bool {
        self.at_hour || self.space_to_delete
    }
}

/// Apache's `cleanImmediately`: usage past the watermark where unexpired segments may
/// be deleted (its warning level forces it too: appends are refused there).
fn clean_immediately(config: &StoreConfig, used_ratio: f64) -> bool {
    used_ratio > config.disk_force_clean_ratio || used_ratio > config.disk_refuse_ratio
}

/// What a pass at local hour `local_hour` (0–23) with `used_ratio` of the disk used may
/// do under `config`.
pub fn clean_trigger(config: &StoreConfig, local_hour: u32, used_ratio: f64) -> CleanTrigger {
    let immediately = clean_immediately(config, used_ratio);
    CleanTrigger {
        at_hour: config.delete_when_hours.contains(&local_hour),
        space_to_delete: immediately || used_ratio > config.disk_max_used_ratio,
        clean_at_once: immediately && config.clean_file_forcibly,
    }
}

impl<D: Disk, C: Clock> Store<D, C> {
    /// One retention pass (`clean_trigger` says whether it runs): deletes CommitLog
    /// segments oldest first — expired ones (newest record older than
    /// `file_reserved_hours`), and unexpired ones only while `clean_at_once` holds for
    /// the usage re-read before each — stopping at the first it may not delete, after
    /// `delete_files_per_pass_max`, or at the active segment or anything the checkpoint
    /// does not cover; then the ConsumeQueue and index files that only pointed into
    /// them. Returns the number of segments deleted.
    pub async fn clean_expired(&self) -> Result<usize, StoreError> {
        self.check_alive()?;
        let now_ms = self.clock.now_ms();
        let local_hour = local_hour_of_day(now_ms, self.clock.utc_offset_ms(now_ms));
        let mut used_ratio = self.disk.space(&self.dir).await?.used_ratio();
        // The retention settings now (UPDATE_BROKER_CONFIG may have changed them).
        let cfg = self.runtime_config();
        let trigger = clean_trigger(&cfg, local_hour, used_ratio);
        if !trigger.runs() {
            return Ok(0);
        }
        let cutoff_ms = now_ms - cfg.file_reserved_hours as i64 * 3_600_000;
        let mut deleted = 0;
        while deleted < cfg.delete_files_per_pass_max as usize {
            let (start, file, path) = {
                let inner = self.inner.borrow();
                let log = &inner.commitlog;
                let Some((&start, file)) = log.files.iter().next() else { break };
                let end = start + log.segment_bytes;
                let limit = inner.commitlog.flushed_pos.min(inner.checkpoint_logics_phys);
                if end > limit || end > log.segment_start(log.write_pos) {
                    break;
                }
                (start, file.clone(), log.path_of(start))
            };
            let next_phys = self.shard.phys(start + self.config.segment_bytes);
            let next_first_ms = match self.read_record(next_phys, None).await? {
                Some(bytes) => StoredMessageView::parse(&bytes).map(|v| v.store_timestamp_ms()).ok(),
                None => None,
            };
            let newest_ms = next_first_ms.unwrap_or(i64::MAX);
            let expired = newest_ms < cutoff_ms;
            if !expired {
                // Apache deletes up to a whole batch of unexpired files once usage passed
                // the watermark; usage is re-read here so that no more of what the
                // operator asked to keep goes than brings it back under.
                if deleted > 0 {
                    used_ratio = self.disk.space(&self.dir).await?.used_ratio();
                }
                if !(cfg.clean_file_forcibly && clean_immediately(&cfg, used_ratio)) {
                    break;
                }
            }
            drop(file);
            {
                let mut inner = self.inner.borrow_mut();
                inner.commitlog.files.remove(&start);
                inner.commitlog_start = inner.commitlog_start.max(start + self.config.segment_bytes);
                // The record just read is the log's first now (runtime info's earliest
                // message); unreadable, the earliest time is unknown (-1) until open.
                if let Some(ms) = next_first_ms {
                    inner.earliest_record = Some((start + self.config.segment_bytes, ms));
                }
                inner.read_ahead.clear();
                inner.cq_pull_blocks.clear();
            }
            self.disk.remove(&path).await?;
            tracing::info!(
                shard = self.shard.0,
                file = %path.display(),
                expired,
                used_percent = (used_ratio * 100.0) as u32,
                "deleted commitlog segment"
            );
            deleted += 1;
        }
        if deleted > 0 {
            self.disk.sync_dir(&Self::commitlog_dir(&self.dir)).await?;
            self.trim_logics().await?;
        } else if trigger.space_to_delete {
            // Apache's "disk space will be full soon, but delete file failed".
            tracing::warn!(
                shard = self.shard.0,
                used_percent = (used_ratio * 100.0) as u32,
                clean_file_forcibly = cfg.clean_file_forcibly,
                "disk above its retention watermark but no segment could be deleted"
            );
        }
        Ok(deleted)
    }

    /// Deletes `topic`'s queues (Java's `deleteTopics`): each is replaced by an empty
    /// queue (offsets start again at 0 if the topic is created again), a checkpoint is
    /// written that no longer counts their entries, then their files are removed. The
    /// records stay in the CommitLog until retention; their index entries too.
    ///
    /// Everything appended is made durable first, so that the new checkpoint lies past
    /// every record of the topic and recovery never dispatches them again. A crash
    /// between the checkpoint and the file removal is found at the next start (queues
    /// and checkpoint disagree) and answered by rebuilding the queues from the log,
    /// which brings the deleted queues back (invisible: the topic is gone from the
    /// topic table). Returns the number of queues deleted.
    pub async fn delete_topic(&self, topic: &str) -> Result<usize, StoreError> {
        self.check_alive()?;
        let deleted = loop {
            self.flush_all().await?;
            let mut inner = self.inner.borrow_mut();
            // Swapped only when nothing appended is still volatile: every entry removed
            // then counts a durable record (`records_flushed`).
            if inner.commitlog.dirty_bytes() != 0 || inner.commitlog.flushing {
                continue;
            }
            let keys: Vec<QueueKey> = inner.queues.keys().filter(|(t, _)| t == topic).cloned().collect();
            inner.cq_pull_blocks.retain(|((t, _), _, _)| t != topic);
            for key in &keys {
                let fresh = ConsumeQueue::new(self.cq_dir(topic, key.1), topic, key.1, self.config.cq_entries_per_file, self.config.cq_tail_entries);
                let q = std::mem::replace(inner.queues.get_mut(key).expect("key listed above"), fresh);
                inner.records_appended = inner.records_appended.saturating_sub(q.max_offset());
                inner.records_flushed = inner.records_flushed.saturating_sub(q.max_offset());
                inner.queues_deleted.push(q);
            }
            break keys.len();
        };
        if deleted > 0 {
            // Removes the files once its checkpoint is written (or the next flush does).
            self.flush_logics().await?;
            tracing::info!(shard = self.shard.0, topic, queues = deleted, "topic's consume queues deleted");
        }
        Ok(deleted)
    }

    /// Removes the files of queues `delete_topic` replaced: called after a checkpoint
    /// that no longer counts their entries.
    /// A failure is not the store's (the queues are already out of use): it is logged
    /// and the removal retried by the next flush.
    pub(super) async fn remove_deleted_queues(&self, doomed: Vec<ConsumeQueue<D>>) {
        let mut failed = Vec::new();
        for q in doomed {
            let mut result = Ok(());
            for start in q.log.files.keys() {
                match self.disk.remove(&q.log.path_of(*start)).await {
                    Ok(()) => {}
                    Err(e) if e.kind == IoErrorKind::NotFound => {}
                    Err(e) => result = Err(e),
                }
            }
            // A queue that never reached a file has no directory to sync.
            if result.is_ok() && !q.log.files.is_empty() {
                result = match self.disk.sync_dir(&q.log.dir).await {
                    Err(e) if e.kind != IoErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                };
            }
            if let Err(e) = result {
                tracing::warn!(shard = self.shard.0, topic = %q.topic, queue = q.queue_id, error = %e, "deleted queue's files not removed; retried");
                failed.push(q);
            }
        }
        self.inner.borrow_mut().queues_deleted.extend(failed);
    }

    /// Advances every queue's minimum past entries whose records were deleted, removes
    /// their wholly dead files, and drops index files that point only below the log.
    pub(super) async fn trim_logics(&self) -> Result<(), StoreError> {
        let min_phys = self.shard.phys(self.commitlog_min());
        for key in self.queues() {
            let get = log_accessor(|inner: &mut Inner<D>| &mut inner.queues.get_mut(&key).expect("queues are never removed").log);
            let (mut lo, mut hi) = {
                let inner = self.inner.borrow();
                let q = &inner.queues[&key];
                (q.min_offset, q.max_offset())
            };
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let bytes = self.note_read(read_log(&*self.inner, &get, mid * ENTRY_BYTES, ENTRY_BYTES as usize).await)?;
                if bytes.len() == ENTRY_BYTES as usize && CqEntry::decode(&bytes).phys_offset < min_phys {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let dead: Vec<(u64, PathBuf)> = {
                let mut inner = self.inner.borrow_mut();
                let q = inner.queues.get_mut(&key).expect("queues are never removed");
                q.min_offset = lo;
                let live_from = q.log.segment_start(lo * ENTRY_BYTES);
                let active = q.log.segment_start(q.log.write_pos);
                let dead: Vec<u64> = q.log.files.keys().copied().filter(|&s| s < live_from && s < active).collect();
                dead.into_iter().map(|s| {
                    q.log.files.remove(&s);
                    (s, q.log.path_of(s))
                }).collect()
            };
            for (_, path) in dead {
                self.disk.remove(&path).await?;
            }
        }
        let mut index = self.take_index().await;
        let result = index.delete_files_before(min_phys).await;
        self.return_index(index);
        result?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apache's `deleteExpiredFiles` decision, case by case, from
    /// `DefaultMessageStore.CleanCommitLogService` (isTimeToDelete, isSpaceToDelete,
    /// cleanAtOnce = cleanFileForciblyEnable && cleanImmediately) at its defaults:
    /// deleteWhen=04, diskMaxUsedSpaceRatio=75, diskSpaceCleanForciblyRatio=85,
    /// diskSpaceWarningLevelRatio=90. Every comparison is strict.
    #[test]
    fn clean_trigger_states_apaches_rules() {
        // (local hour, used ratio, cleanFileForciblyEnable) → (at_hour, space_to_delete, clean_at_once)
        let cases: &[(u32, f64, bool, (bool, bool, bool))] = &[
            (10, 0.50, true, (false, false, false)),  // nothing to do
            (4, 0.50, true, (true, false, false)),    // the hour: expired files only
            (10, 0.75, true, (false, false, false)),  // at diskMaxUsedSpaceRatio: not above
            (10, 0.76, true, (false, true, false)),   // above it: expired files at any hour
            (10, 0.85, true, (false, true, false)),   // at the forcibly ratio: not above
            (10, 0.86, true, (false, true, true)),    // above it: unexpired files too
            (10, 0.86, false, (false, true, false)),  // ... unless cleanFileForciblyEnable=false
            (4, 0.86, false, (true, true, false)),
            (10, 0.95, true, (false, true, true)),    // above the warning level
            (10, 0.95, false, (false, true, false)),  // never unexpired with forcibly off
        ];
        let config = StoreConfig::default();
        for &(hour, ratio, forcibly, (at_hour, space, at_once)) in cases {
            let config = StoreConfig { clean_file_forcibly: forcibly, ..config.clone() };
            let got = clean_trigger(&config, hour, ratio);
            let want = CleanTrigger { at_hour, space_to_delete: space, clean_at_once: at_once };
            assert_eq!(got, want, "hour {hour}, used {ratio}, forcibly {forcibly}");
            assert_eq!(got.runs(), at_hour || space);
        }
        // A forcibly ratio above diskMaxUsedSpaceRatio is no precondition: Apache's
        // diskMaxUsedSpaceRatio=88 with the default 85 forces at 86 %, and the warning
        // level forces on its own when set below the forcibly ratio.
        let high_max = StoreConfig { disk_max_used_ratio: 0.88, ..config.clone() };
        assert_eq!(clean_trigger(&high_max, 10, 0.86), CleanTrigger { at_hour: false, space_to_delete: true, clean_at_once: true });
        let low_warning = StoreConfig { disk_force_clean_ratio: 0.85, disk_refuse_ratio: 0.80, ..config.clone() };
        assert!(clean_trigger(&low_warning, 10, 0.81).clean_at_once);
        // deleteWhen=04;16: any listed hour.
        let two = StoreConfig { delete_when_hours: vec![4, 16], ..config };
        assert_eq!([3, 4, 15, 16, 17].map(|h| clean_trigger(&two, h, 0.0).at_hour), [false, true, false, true, false]);
    }

    /// Local hours as Java's `Calendar.getInstance().get(HOUR_OF_DAY)`: UTC shifted by
    /// the zone's offset, before and after midnight, east and west.
    #[test]
    fn local_hour_of_day_shifts_by_the_offset() {
        let hour_ms = 3_600_000i64;
        // (UTC ms, offset ms, local hour)
        let cases = [
            (4 * hour_ms, 0, 4),
            (20 * hour_ms, 8 * hour_ms, 4),                  // UTC 20:00 is 04:00 in UTC+8
            (9 * hour_ms, -5 * hour_ms, 4),                  // UTC 09:00 is 04:00 in UTC-5
            (4 * hour_ms, 8 * hour_ms, 12),
            (2 * hour_ms, -5 * hour_ms, 21),                 // the day before
            (3 * hour_ms + 59 * 60_000, 30 * 60_000, 4),     // UTC+0:30 zones
            (-hour_ms, 0, 23),                               // before the epoch
        ];
        for (now_ms, offset_ms, hour) in cases {
            assert_eq!(crate::store::io::local_hour_of_day(now_ms, offset_ms), hour, "{now_ms} {offset_ms}");
        }
    }
}
