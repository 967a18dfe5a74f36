//! Retention and topic deletion: expired (or, under disk pressure, the oldest)
//! CommitLog segments are deleted, then the ConsumeQueue and index files that pointed
//! only into them; `delete_topic` swaps a topic's queues for empty ones and removes
//! their files once a checkpoint no longer counts them.
//!
//! Invariants: never deletes the active segment, nor a segment past the durable end or
//! the last checkpoint's `logics_phys`; the log's start (`commitlog_start`) moves before
//! the file goes, and the read-ahead windows and pull blocks are dropped with it; a
//! deleted queue's files outlive the checkpoint that still counts their entries.

use super::*;
use crate::store::consumequeue::ENTRY_BYTES;
use crate::store::io::IoErrorKind;
use crate::store::segmented::{log_accessor, read_log};
use ringmq_client::message::stored::StoredMessageView;

impl<D: Disk, C: Clock> Store<D, C> {
    /// Deletes expired CommitLog segments (older than `file_reserved_hours`) at the
    /// any of `delete_when_hours` (UTC), or the oldest segment regardless of age when disk usage
    /// passed `disk_force_clean_ratio`; then the ConsumeQueue files and index files that
    /// only pointed into them. Never deletes the active segment or anything not yet
    /// covered by the checkpoint. Returns the number of segments deleted.
    pub async fn clean_expired(&self) -> Result<usize, StoreError> {
        self.check_alive()?;
        let now_ms = self.clock.now_ms();
        let at_hour = self.config.delete_when_hours.contains(&(((now_ms / 3_600_000).rem_euclid(24)) as u32));
        let ratio = self.disk.space(&self.dir).await?.used_ratio();
        let force = ratio >= self.config.disk_force_clean_ratio;
        if !at_hour && !force {
            return Ok(0);
        }
        let cutoff_ms = now_ms - self.config.file_reserved_hours as i64 * 3_600_000;
        let mut deleted = 0;
        loop {
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
            let newest_ms = match self.read_record(next_phys, None).await? {
                Some(bytes) => StoredMessageView::parse(&bytes).map(|v| v.store_timestamp_ms()).unwrap_or(i64::MAX),
                None => i64::MAX,
            };
            let expired = newest_ms < cutoff_ms;
            if !(expired || (force && deleted == 0)) {
                break;
            }
            drop(file);
            {
                let mut inner = self.inner.borrow_mut();
                inner.commitlog.files.remove(&start);
                inner.commitlog_start = inner.commitlog_start.max(start + self.config.segment_bytes);
                inner.read_ahead.clear();
                inner.cq_pull_blocks.clear();
            }
            self.disk.remove(&path).await?;
            tracing::info!(shard = self.shard.0, file = %path.display(), expired, force, "deleted commitlog segment");
            deleted += 1;
        }
        if deleted > 0 {
            self.disk.sync_dir(&Self::commitlog_dir(&self.dir)).await?;
            self.trim_logics().await?;
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
