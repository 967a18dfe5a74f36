//! The driver of a shard's store on the shard's runtime (glommio in production, the
//! simulator in tests): the group-commit loop, the
//! segment pre-allocator, the logics (ConsumeQueue/index/checkpoint) flusher, the
//! disk watcher, the optional scrub and retention (`clean_expired` every `CLEAN_INTERVAL_MS`), each a task
//! on the shard's executor.
//!
//! Group commit: under sync flush the loop flushes as soon as anything is dirty; the
//! appends that arrive while a flush is in flight are covered by the next one, so one
//! fdatasync acknowledges every append before it. Under async flush it waits for
//! `flush_min_bytes` or `flush_interval_ms`, whichever comes first; the interval is
//! the one in force (`Store::runtime_config`, changed by UPDATE_BROKER_CONFIG's
//! `flushIntervalCommitLog`), read before every wait.
//!
//! Invariant: a store failure ends every loop and calls `on_fatal` once; the broker
//! exits the process rather than leave a shard serving without a store.

use super::config::FlushMode;
use super::engine::Store;
use super::io::{Clock, Disk};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// What the store's background tasks need from an executor. The store defines it and
/// the broker's runtimes (`rt::Runtime`, glommio and the simulator) provide it, so the
/// store depends on nothing above it.
pub trait StoreExecutor: Clone + 'static {
    /// Runs `fut` as a task of its own, detached.
    fn spawn(&self, fut: impl Future<Output = ()> + 'static);
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> + 'static;
    /// Monotonic time in microseconds; never goes back.
    fn monotonic_us(&self) -> u64;
}

/// How often ConsumeQueues, the index and the checkpoint are synced (sooner when the
/// checkpoint falls half of `checkpoint_lag_bytes_max` behind: `Store::logics_wanted`).
pub const LOGICS_FLUSH_INTERVAL_MS: u64 = 1000;
/// How often the pre-allocator and the disk watcher look.
pub const SEGMENT_CHECK_INTERVAL_MS: u64 = 50;
/// How often retention runs (expired segments at the delete hour, or one segment per
/// round above the force-clean watermark).
pub const CLEAN_INTERVAL_MS: u64 = 10_000;
pub const DISK_CHECK_INTERVAL_MS: u64 = 1000;
/// How often the background scrub (`scrub_bytes_per_sec > 0`) reads its next slice.
pub const SCRUB_INTERVAL_MS: u64 = 100;

/// Starts the store's background tasks on the runtime's executor. They stop when
/// `stop` is set (the caller then calls `Store::close`) or the store fails.
pub fn spawn_store_tasks<E: StoreExecutor, D: Disk, C: Clock>(rt: E, store: Store<D, C>, stop: Rc<Cell<bool>>, on_fatal: Rc<dyn Fn(String)>) {
    let s = store.clone();
    let st = stop.clone();
    let fatal = on_fatal.clone();
    let r = rt.clone();
    rt.spawn(async move {
        while !st.get() {
            match s.config().flush_mode {
                FlushMode::Sync => {
                    futures_lite::future::or(s.flush_wanted(), r.sleep(Duration::from_millis(100))).await;
                }
                FlushMode::Async => {
                    let interval = Duration::from_millis(s.runtime_config().flush_interval_ms.max(1));
                    futures_lite::future::or(s.flush_wanted(), r.sleep(interval)).await;
                }
            }
            let started_us = r.monotonic_us();
            let flushed = s.flush().await;
            if let Ok(Some(_)) = &flushed {
                s.note_flush_latency_us(r.monotonic_us().saturating_sub(started_us));
            }
            match flushed {
                // Someone else's flush is in flight (a clean stop's, a replica test's):
                // wait for it rather than asking again at once (that would spin).
                Ok(None) if s.is_flushing() => {
                    let _ = s.wait_durable(s.flushed_offset() + 1).await;
                }
                Ok(_) => {}
                Err(e) => {
                    if e.is_fatal() && s.failure().is_some() {
                        fatal(e.to_string());
                        return;
                    }
                    tracing::warn!(error = %e, "flush failed; retried");
                    r.sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });

    let s = store.clone();
    let st = stop.clone();
    let fatal = on_fatal.clone();
    let r = rt.clone();
    rt.spawn(async move {
        while !st.get() {
            if s.next_segment_wanted() {
                if let Err(e) = s.prepare_next_segment().await {
                    if s.failure().is_some() {
                        fatal(e.to_string());
                        return;
                    }
                }
            }
            r.sleep(Duration::from_millis(SEGMENT_CHECK_INTERVAL_MS)).await;
        }
    });

    let rate = store.config().scrub_bytes_per_sec;
    if rate > 0 {
        let s = store.clone();
        let st = stop.clone();
        let r = rt.clone();
        rt.spawn(async move {
            // A slice every `SCRUB_INTERVAL_MS` holds the rate; a read error is logged
            // and counted by the store, and the next slice goes on.
            let slice_bytes = (rate * SCRUB_INTERVAL_MS / 1000).max(1);
            while !st.get() && s.failure().is_none() {
                let _ = s.scrub_step(slice_bytes).await;
                r.sleep(Duration::from_millis(SCRUB_INTERVAL_MS)).await;
            }
        });
    }

    let s = store.clone();
    let st = stop.clone();
    let r = rt.clone();
    rt.spawn(async move {
        let mut last_disk_check_us = r.monotonic_us();
        let mut last_clean_us = r.monotonic_us();
        let mut failed_last = false;
        while !st.get() {
            let interval = r.sleep(Duration::from_millis(LOGICS_FLUSH_INTERVAL_MS));
            if failed_last {
                // A failed pass (disk full) leaves the lag as it was: waking early again
                // would retry at once, in a loop.
                interval.await;
            } else {
                futures_lite::future::or(interval, s.logics_wanted()).await;
            }
            failed_last = false;
            if let Err(e) = s.flush_logics().await {
                if s.failure().is_some() {
                    on_fatal(e.to_string());
                    return;
                }
                failed_last = true;
            }
            let now_us = r.monotonic_us();
            if now_us.saturating_sub(last_disk_check_us) >= DISK_CHECK_INTERVAL_MS * 1000 {
                last_disk_check_us = now_us;
                let _ = s.check_disk().await;
            }
            if now_us.saturating_sub(last_clean_us) >= CLEAN_INTERVAL_MS * 1000 {
                last_clean_us = now_us;
                // Retention (Apache's CleanCommitLogService, run every cleanResourceInterval):
                // expired segments at `delete_when_hours` or above `disk_max_used_ratio`,
                // unexpired ones above `disk_force_clean_ratio` with `clean_file_forcibly`;
                // at most `delete_files_per_pass_max` per round.
                match s.clean_expired().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(segments = n, "retention deleted commitlog segments"),
                    Err(e) if s.failure().is_some() => {
                        on_fatal(e.to_string());
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "retention pass failed; retried next round"),
                }
            }
        }
    });
}
