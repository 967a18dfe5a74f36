//! Durability: the CommitLog's group commit (`flush`), segment pre-allocation, the
//! logics flush (every ConsumeQueue, the index, then the checkpoint), a clean `close`,
//! and the futures the flusher (`flusher.rs`) and waiting senders park on.
//!
//! Invariants: a `wait_durable` ticket resolves `Ok` only once its bytes were written
//! and fdatasynced; an IO error on a write or sync fails the store and wakes every
//! waiter with the error (fsyncgate), except ENOSPC while pre-allocating a segment
//! (appends are refused, `watermark.rs`) or while flushing ConsumeQueues (derived
//! data: their range stays dirty and the checkpoint does not move); a checkpoint is
//! written only after every queue and the index are synced up to its `logics_phys`,
//! with at most `LOGICS_FLUSHES_IN_FLIGHT_MAX` queue flushes in flight at once.

use super::*;
use crate::store::checkpoint::Checkpoint;
use crate::store::config::FlushMode;
use crate::store::index::IndexMark;
use crate::store::io::{IoError, IoErrorKind};
use crate::store::segmented::{ensure_segment, flush_log, log_accessor, FlushDone};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// ConsumeQueue write + sync pairs in flight at once during a logics flush.
pub const LOGICS_FLUSHES_IN_FLIGHT_MAX: usize = 64;

impl<D: Disk, C: Clock> Store<D, C> {
    /// Asks the flusher to flush what is dirty now (async flush otherwise waits for its
    /// interval): a SYNC_MASTER send needs its bytes durable here before a slave gets
    /// them.
    pub fn request_flush(&self) {
        let mut inner = self.inner.borrow_mut();
        inner.flush_requested = true;
        if let Some(waker) = inner.flusher_waker.take() {
            waker.wake();
        }
    }

    /// Resolves when the flusher has work: any dirty byte under sync flush, at least
    /// `flush_min_bytes` under async flush (the flusher also wakes on its interval), or
    /// when the flush interval changed at runtime (the flusher then sleeps the new one).
    pub fn flush_wanted(&self) -> FlushWanted<D> {
        FlushWanted { inner: self.inner.clone(), min_bytes: match self.config.flush_mode {
            FlushMode::Sync => 1,
            FlushMode::Async => self.config.flush_min_bytes,
        } }
    }

    /// Resolves once the CommitLog is durable up to `ticket`, or with the error that
    /// stopped the store.
    pub fn wait_durable(&self, ticket: u64) -> DurableWait<D> {
        DurableWait { inner: self.inner.clone(), ticket }
    }

    /// Records how long one group commit took (the flusher measures it on the runtime's
    /// monotonic clock).
    pub fn note_flush_latency_us(&self, us: u64) {
        self.inner.borrow_mut().stats.flush_latency.observe(us);
    }

    /// One group commit of the CommitLog: everything appended before it is written and
    /// synced. Wakes the waiters it covers. Always ends on a record boundary.
    pub async fn flush(&self) -> Result<Option<FlushDone>, StoreError> {
        self.check_alive()?;
        // `flush_log` picks its range on its first poll, before anything else runs, and
        // always covers everything appended: these describe exactly what it covers.
        let (records_before, write_before) = {
            let mut inner = self.inner.borrow_mut();
            inner.flush_requested = false;
            (inner.records_appended, inner.commitlog.write_pos)
        };
        let result = flush_log(&*self.inner, &commitlog_of, &self.disk, u64::MAX).await;
        match result {
            Ok(done) => {
                let mut inner = self.inner.borrow_mut();
                if let Some(done) = done {
                    debug_assert_eq!(done.to, write_before);
                    inner.records_flushed = records_before;
                    inner.stats.flushes += 1;
                    inner.stats.flushed_bytes += done.to - done.from;
                    crate::copy_probe::record(crate::copy_probe::Site::FlushStage, done.written_bytes as usize);
                }
                let flushed = inner.commitlog.flushed_pos;
                if flushed.saturating_sub(inner.checkpoint_logics_phys) >= self.config.checkpoint_lag_bytes_max / 2 {
                    if let Some(w) = inner.logics_waker.take() {
                        w.wake();
                    }
                }
                let covered: Vec<u64> = inner.waiters.range(..=flushed).map(|(k, _)| *k).collect();
                for key in covered {
                    if let Some(wakers) = inner.waiters.remove(&key) {
                        wakers.into_iter().for_each(Waker::wake);
                    }
                }
                Ok(done)
            }
            Err(e) => Err(self.on_write_error(e).await),
        }
    }

    /// A full disk while pre-allocating a segment wrote no data: appends are refused
    /// until space is freed. Any other write or sync error fails the store.
    async fn on_write_error(&self, e: IoError) -> StoreError {
        if e.kind == IoErrorKind::NoSpace && e.op == "preallocate" {
            self.on_no_space(&e).await;
            return StoreError::NoSpace;
        }
        let err = StoreError::Io(e);
        self.fail(&err);
        err
    }

    /// Flushes until everything appended so far is durable.
    pub async fn flush_all(&self) -> Result<(), StoreError> {
        loop {
            let (dirty, flushing, flushed) = {
                let inner = self.inner.borrow();
                (inner.commitlog.dirty_bytes(), inner.commitlog.flushing, inner.commitlog.flushed_pos)
            };
            if dirty == 0 {
                return Ok(());
            }
            if flushing {
                // Another task's flush is in flight: wait until it moves the flushed end
                // (a yield loop would spin until its IO completes; found by ha_sim).
                self.wait_durable(flushed + 1).await?;
                continue;
            }
            self.flush().await?;
        }
    }

    /// Whether the segment after the active one should be pre-allocated now: the active
    /// one is more than half used and its successor does not exist yet.
    pub fn next_segment_wanted(&self) -> bool {
        let inner = self.inner.borrow();
        let log = &inner.commitlog;
        let start = log.segment_start(log.write_pos);
        inner.failed.is_none() && !log.files.contains_key(&(start + log.segment_bytes)) && (log.write_pos - start) * 2 >= log.segment_bytes
    }

    /// Pre-allocates (and pre-zeroes) the segment after the active one, if missing.
    pub async fn prepare_next_segment(&self) -> Result<bool, StoreError> {
        self.check_alive()?;
        let next = {
            let inner = self.inner.borrow();
            let log = &inner.commitlog;
            let next = log.segment_start(log.write_pos) + log.segment_bytes;
            if log.files.contains_key(&next) {
                return Ok(false);
            }
            next
        };
        match ensure_segment(&*self.inner, &commitlog_of, &self.disk, next).await {
            Ok(_) => Ok(true),
            Err(e) => Err(self.on_write_error(e).await),
        }
    }

    /// Resolves when the checkpoint is half of `checkpoint_lag_bytes_max` (or more)
    /// behind the durable log: the logics flusher then starts a pass without waiting
    /// for its interval.
    pub fn logics_wanted(&self) -> LogicsWanted<D> {
        LogicsWanted { inner: self.inner.clone(), lag_bytes: self.config.checkpoint_lag_bytes_max / 2 }
    }

    /// How far (bytes) the last checkpoint is behind the durable log.
    pub fn checkpoint_lag_bytes(&self) -> u64 {
        let inner = self.inner.borrow();
        inner.commitlog.flushed_pos.saturating_sub(inner.checkpoint_logics_phys)
    }

    /// Syncs every ConsumeQueue and the index, then writes the checkpoint.
    pub async fn flush_logics(&self) -> Result<(), StoreError> {
        self.check_alive()?;
        let result = self.flush_logics_inner().await;
        if let Err(e) = &result {
            // ConsumeQueues are derived from the CommitLog and a failed flush leaves their
            // range dirty (rewritten next round, the checkpoint not moved): a full disk
            // here waits for space, as pre-allocation does, instead of stopping the store.
            let no_space = match e {
                StoreError::NoSpace => true,
                StoreError::Io(io) => io.kind == IoErrorKind::NoSpace,
                _ => false,
            };
            if no_space {
                tracing::warn!(shard = self.shard.0, error = %e, "ConsumeQueue flush waits for disk space");
            } else if e.is_fatal() || matches!(e, StoreError::Index(_)) {
                self.fail(e);
            }
        }
        result
    }

    async fn flush_logics_inner(&self) -> Result<(), StoreError> {
        let (logics_phys, records_below, keys, doomed) = {
            let mut inner = self.inner.borrow_mut();
            if inner.logics_flushing {
                return Ok(());
            }
            inner.logics_flushing = true;
            // Every record below the CommitLog's durable end already has its entries in
            // the queues' tails, because `put` adds both at once.
            let phys = inner.commitlog.flushed_pos;
            let doomed = std::mem::take(&mut inner.queues_deleted);
            (phys, inner.records_flushed, inner.queues.keys().cloned().collect::<Vec<_>>(), doomed)
        };
        let result = async {
            // Every dirty queue's write + sync in flight together (bounded): one after
            // another, thousands of queues held the checkpoint seconds behind the log.
            use futures_util::stream::{StreamExt, TryStreamExt};
            futures_util::stream::iter(keys.iter().map(|key| flush_queue(&self.inner, &self.disk, key)))
                .buffer_unordered(LOGICS_FLUSHES_IN_FLIGHT_MAX)
                .try_collect::<Vec<()>>()
                .await?;
            let mut index = self.take_index().await;
            let flushed = index.flush().await;
            // Read before the index goes back: puts waiting in `index_pending` are not
            // durable yet.
            let index_mark = index.durable_mark();
            self.return_index(index);
            flushed?;
            self.write_checkpoint(logics_phys, records_below, index_mark).await
        }
        .await;
        match result {
            // Their entries are no longer counted by a durable checkpoint: now they go.
            Ok(()) => self.remove_deleted_queues(doomed).await,
            // Kept for the next flush (the checkpoint may not have been written).
            Err(_) => self.inner.borrow_mut().queues_deleted.extend(doomed),
        }
        self.inner.borrow_mut().logics_flushing = false;
        result
    }

    async fn write_checkpoint(&self, logics_phys: u64, records_below_logics: u64, index_mark: Option<IndexMark>) -> Result<(), StoreError> {
        let path = self.dir.join("checkpoint");
        // Bound first: a borrow in the match scrutinee would live across the await.
        let existing = self.inner.borrow().checkpoint_file.clone();
        let file = match existing {
            Some(f) => f,
            None => Rc::new(self.disk.open(&path, true).await?),
        };
        let checkpoint = {
            let mut inner = self.inner.borrow_mut();
            inner.checkpoint_file = Some(file.clone());
            inner.checkpoint_sequence += 1;
            Checkpoint {
                sequence: inner.checkpoint_sequence,
                commitlog_phys: inner.commitlog.flushed_pos.max(logics_phys),
                logics_phys,
                records_below_logics,
                timestamp_ms: self.clock.now_ms(),
                index_mark,
                index_mark_known: true,
            }
        };
        checkpoint.store(&*file).await?;
        self.inner.borrow_mut().checkpoint_logics_phys = logics_phys;
        Ok(())
    }

    /// Flushes everything, writes the checkpoint and removes the abort file.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.flush_all().await?;
        self.flush_logics().await?;
        let abort = self.dir.join("abort");
        if self.disk.exists(&abort).await? {
            self.disk.remove(&abort).await?;
        }
        self.disk.sync_dir(&self.dir).await?;
        Ok(())
    }
}

async fn flush_queue<D: Disk>(cell: &RefCell<Inner<D>>, disk: &D, key: &QueueKey) -> Result<(), StoreError> {
    // Queues are never removed from the map, so the projection cannot fail.
    let get = log_accessor(|inner: &mut Inner<D>| &mut inner.queues.get_mut(key).expect("queues are never removed").log);
    flush_log(cell, &get, disk, u64::MAX).await?;
    Ok(())
}

/// Future returned by [`Store::flush_wanted`].
pub struct FlushWanted<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    min_bytes: u64,
}

impl<D: Disk> Future for FlushWanted<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        let dirty = inner.commitlog.dirty_bytes();
        if inner.failed.is_some() || dirty >= self.min_bytes || (inner.flush_requested && dirty > 0) {
            return Poll::Ready(());
        }
        if inner.flush_interval_changed {
            // Taken by the one flusher that waits on this future.
            inner.flush_interval_changed = false;
            return Poll::Ready(());
        }
        inner.flusher_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Future returned by [`Store::logics_wanted`].
pub struct LogicsWanted<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    lag_bytes: u64,
}

impl<D: Disk> Future for LogicsWanted<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        let lag = inner.commitlog.flushed_pos.saturating_sub(inner.checkpoint_logics_phys);
        if inner.failed.is_some() || (lag >= self.lag_bytes && !inner.logics_flushing) {
            return Poll::Ready(());
        }
        inner.logics_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Future returned by [`Store::wait_durable`].
pub struct DurableWait<D: Disk> {
    inner: Rc<RefCell<Inner<D>>>,
    ticket: u64,
}

impl<D: Disk> Future for DurableWait<D> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut inner = self.inner.borrow_mut();
        if let Some(reason) = &inner.failed {
            return Poll::Ready(Err(StoreError::Failed(reason.clone())));
        }
        if inner.commitlog.flushed_pos >= self.ticket {
            return Poll::Ready(Ok(()));
        }
        inner.waiters.entry(self.ticket).or_default().push(cx.waker().clone());
        Poll::Pending
    }
}
