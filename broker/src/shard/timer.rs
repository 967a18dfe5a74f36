//! The shard's timer delivery (`schedule/timer.rs` owns the rules): each minute of the
//! wheel is read into memory when it begins, its timers are delivered in due order as
//! they fall due, and the minute is finished once every timer in it was delivered.
//!
//! Memory holds only the minutes that have begun and are not finished (normally one or
//! two; at most `TIMER_LOADED_MAX` timers — past that loading pauses until some are
//! delivered). Recorded progress (`timerOffset`: per bucket the ConsumeQueue offset
//! below which all was delivered, and the time up to which every minute is finished)
//! moves only when a finished minute's copies are flushed, and is persisted with the
//! delay progress; after a crash the unfinished minutes are read again and their timers
//! delivered again (at-least-once: at most a minute's worth of duplicates).
//!
//! Invariants: never a timer before its due time; a pass reads and delivers at most
//! `TIMER_PASS_BUDGET` timers each before the task yields (so a million timers falling
//! due at once never hold the shard); an idle pass sleeps until the next due time, at
//! most `DELIVERY_IDLE_POLL_MS` — it never spins.

use super::{OpenError, Shard};
use crate::meta::snapshot::SnapshotStore;
use crate::rt::Runtime;
use crate::schedule::timer::{timer_delivered, TimerWheel, TIMER_BUCKET_MS, TIMER_TOPIC};
use crate::store::error::StoreError;
use ringmq_client::message::stored::StoredMessageView;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

/// Timers read into memory at most (about 40 bytes each).
pub const TIMER_LOADED_MAX: usize = 1_000_000;
/// ConsumeQueue entries read per call while loading a minute.
const TIMER_LOAD_BATCH: u64 = 256;
/// Timers one pass reads into memory, and delivers, before it lets requests run (its
/// reads may all come from the in-memory tail and never suspend).
pub const TIMER_PASS_BUDGET: usize = 1024;

/// What one timer pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TimerPass {
    pub delivered: u64,
    /// The earliest due time in memory, if any.
    pub next_due_ms: Option<i64>,
    /// The pass stopped at its budget with more to read or deliver: go again at once.
    pub more: bool,
}

/// What survives a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerProgress {
    /// Bucket -> ConsumeQueue offset below which every timer was delivered durably.
    pub progress: BTreeMap<i32, u64>,
    /// Every minute that began before this wall-clock ms is finished (0: none yet).
    #[serde(rename = "processedMs")]
    pub processed_ms: i64,
}

/// In-memory state of the minutes being delivered.
#[derive(Debug, Default)]
pub struct TimerState {
    pub durable: TimerProgress,
    /// Start of the first minute not yet finished (ahead of `durable.processed_ms` by
    /// minutes whose copies wait for a flush).
    cursor_ms: i64,
    /// (due ms, bucket, ConsumeQueue offset) -> (physical offset, size).
    loaded: BTreeMap<(i64, i32, u64), (u64, u32)>,
    /// Bucket -> timers of it in `loaded`.
    loaded_count: BTreeMap<i32, usize>,
    /// Bucket -> next ConsumeQueue offset to read.
    loaded_upto: BTreeMap<i32, u64>,
    /// Bucket -> its next turn's timers begin here (stop loading).
    next_turn_at: BTreeMap<i32, u64>,
    /// Bucket -> the CommitLog end its copies need flushed.
    ticket: BTreeMap<i32, u64>,
    /// Finished minutes waiting for their copies' flush: (ticket, bucket, progress,
    /// the minute's end).
    pending: VecDeque<(u64, i32, u64, i64)>,
    pub dirty: bool,
}

impl TimerState {
    pub fn new(durable: TimerProgress) -> Self {
        Self { cursor_ms: durable.processed_ms, durable, ..Default::default() }
    }

    pub fn loaded_len(&self) -> usize {
        self.loaded.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&self.durable).expect("numbers encode")
    }
}

pub fn decode_progress(bytes: &[u8]) -> Result<TimerProgress, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("timer progress does not decode: {e}"))
}

/// The timer feature's state on one shard: the wheel's shape, the minutes being
/// delivered and the progress saved as `timerOffset`. Only this module touches it.
pub struct Timers<D: crate::store::io::Disk> {
    wheel: TimerWheel,
    state: RefCell<TimerState>,
    progress_store: SnapshotStore<D>,
}

impl<D: crate::store::io::Disk> Timers<D> {
    /// Loads the saved progress from `shard_meta_dir`.
    pub async fn open(disk: D, shard_meta_dir: &Path, shard: usize, timer_max_delay_sec: u64) -> Result<Self, OpenError> {
        let progress_store = SnapshotStore::new(disk, shard_meta_dir.to_path_buf(), "timerOffset");
        let progress = super::load(&progress_store, shard, "timer progress", decode_progress, Default::default).await?;
        Ok(Self { wheel: TimerWheel::new(timer_max_delay_sec), state: RefCell::new(TimerState::new(progress)), progress_store })
    }

    pub fn wheel(&self) -> &TimerWheel {
        &self.wheel
    }
}

impl<R: Runtime> Shard<R> {
    /// One timer pass: read the minutes that began, deliver what is due, finish the
    /// minutes that ended. Returns (timers delivered, the next due time if any).
    pub async fn timer_pass(&self) -> TimerPass {
        self.settle_timer_progress();
        let now = self.now_ms();
        let wheel = self.timers.wheel;
        let last = TimerWheel::bucket_start_ms(now);
        {
            let mut st = self.timers.state.borrow_mut();
            if st.cursor_ms == 0 {
                // First start: nothing can wait in a minute before now.
                st.cursor_ms = last;
                st.durable.processed_ms = last;
                st.dirty = true;
            }
            // After a stop (or a clock step) longer than a turn of the wheel, one turn
            // visits every bucket: each is read from its recorded progress, so the
            // timers of the minutes in between are found there (all due) — none lost.
            let oldest = last - (wheel.buckets - 1) * TIMER_BUCKET_MS;
            if st.cursor_ms < oldest {
                tracing::info!(shard = self.place.id, behind_ms = last - st.cursor_ms, "timer wheel catching up a whole turn");
                st.cursor_ms = oldest;
            }
        }
        // Load every begun, unfinished minute.
        let first = self.timers.state.borrow().cursor_ms;
        let mut bt = first;
        let mut load_budget = TIMER_PASS_BUDGET;
        while bt <= last && load_budget > 0 {
            self.load_timer_bucket(&wheel, bt, &mut load_budget).await;
            bt += TIMER_BUCKET_MS;
        }
        let mut more = load_budget == 0;
        // Deliver what is due, in due order.
        let mut delivered = 0;
        loop {
            let next = {
                let st = self.timers.state.borrow();
                st.loaded.iter().next().map(|(k, v)| (*k, *v))
            };
            let Some(((due, bucket, off), (phys, size))) = next else { break };
            if due > self.now_ms() {
                break;
            }
            if delivered as usize >= TIMER_PASS_BUDGET {
                more = true;
                break;
            }
            match self.deliver_timer(phys, size).await {
                Ok(ticket) => {
                    let mut st = self.timers.state.borrow_mut();
                    st.loaded.remove(&(due, bucket, off));
                    if let Some(c) = st.loaded_count.get_mut(&bucket) {
                        *c -= 1;
                    }
                    if let Some(t) = ticket {
                        let e = st.ticket.entry(bucket).or_insert(0);
                        *e = (*e).max(t);
                        delivered += 1;
                    }
                }
                Err(()) => break, // store busy or read error: next pass
            }
        }
        // Finish the minutes that ended and hold nothing undelivered, in order.
        let now = self.now_ms();
        loop {
            let mut st = self.timers.state.borrow_mut();
            let bt = st.cursor_ms;
            if bt + TIMER_BUCKET_MS > now {
                break;
            }
            let b = wheel.bucket_of(bt);
            let upto = st.loaded_upto.get(&b).copied();
            let complete = match st.next_turn_at.get(&b) {
                Some(_) => true,
                None => upto.is_some_and(|u| u >= self.store.max_offset(TIMER_TOPIC, b)),
            };
            let waiting = st.loaded_count.get(&b).is_some_and(|&c| c > 0);
            if !complete || waiting || upto.is_none() {
                break;
            }
            let progress = upto.unwrap_or(0);
            let ticket = st.ticket.remove(&b).unwrap_or(0);
            st.loaded_upto.remove(&b);
            st.next_turn_at.remove(&b);
            st.loaded_count.remove(&b);
            st.pending.push_back((ticket, b, progress, bt + TIMER_BUCKET_MS));
            st.cursor_ms = bt + TIMER_BUCKET_MS;
        }
        self.settle_timer_progress();
        let next_due_ms = self.timers.state.borrow().loaded.keys().next().map(|k| k.0);
        TimerPass { delivered, next_due_ms, more }
    }

    /// Reads the new timers of the minute starting at `bt` into memory.
    /// Reads at most `budget` timers (decremented).
    async fn load_timer_bucket(&self, wheel: &TimerWheel, bt: i64, budget: &mut usize) {
        let b = wheel.bucket_of(bt);
        while *budget > 0 {
            let from = {
                let st = self.timers.state.borrow();
                if st.next_turn_at.contains_key(&b) || st.loaded.len() >= TIMER_LOADED_MAX {
                    return;
                }
                st.loaded_upto.get(&b).copied().unwrap_or_else(|| st.durable.progress.get(&b).copied().unwrap_or(0))
            };
            let from = from.max(self.store.min_offset(TIMER_TOPIC, b));
            self.timers.state.borrow_mut().loaded_upto.insert(b, from);
            if from >= self.store.max_offset(TIMER_TOPIC, b) {
                return;
            }
            let entries = match self.store.cq_entries(TIMER_TOPIC, b, from, TIMER_LOAD_BATCH.min(*budget as u64)).await {
                Ok(e) if !e.is_empty() => e,
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(shard = self.place.id, bucket = b, error = %e, "timer bucket not read; retried on the next pass");
                    return;
                }
            };
            let mut next = from;
            for entry in entries {
                let due = match self.store.read_record(entry.phys_offset, Some(entry.size)).await {
                    Ok(Some(r)) => StoredMessageView::parse(&r).ok().and_then(|v| timer_delivered(&String::from_utf8_lossy(v.properties_bytes())).map(|d| d.0)),
                    Ok(None) => None,
                    Err(e) => {
                        // Returned, not retried here: the same read would fail again at
                        // once, and this loop would spin.
                        tracing::warn!(shard = self.place.id, bucket = b, error = %e, "timer not read; retried on the next pass");
                        return;
                    }
                };
                let mut st = self.timers.state.borrow_mut();
                match due {
                    // The bucket's next turn begins here: this turn is all read.
                    Some(d) if d >= bt + TIMER_BUCKET_MS => {
                        st.next_turn_at.insert(b, next);
                        st.loaded_upto.insert(b, next);
                        return;
                    }
                    Some(d) => {
                        st.loaded.insert((d, b, next), (entry.phys_offset, entry.size));
                        *st.loaded_count.entry(b).or_insert(0) += 1;
                    }
                    None => {} // gone (retention) or not a timer: nothing to deliver
                }
                next += 1;
                st.loaded_upto.insert(b, next);
                *budget = budget.saturating_sub(1);
            }
        }
    }

    /// Copies one due timer to its real queue; the copy's durable ticket, or `None`
    /// when there was nothing to deliver. `Err` when the pass should stop (retried).
    async fn deliver_timer(&self, phys: u64, size: u32) -> Result<Option<u64>, ()> {
        let record = match self.store.read_record(phys, Some(size)).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(shard = self.place.id, error = %e, "timer not read; retried on the next pass");
                return Err(());
            }
        };
        let Ok(view) = StoredMessageView::parse(&record) else { return Ok(None) };
        let Some((_, topic, queue_id, properties)) = timer_delivered(&String::from_utf8_lossy(view.properties_bytes())) else { return Ok(None) };
        let msg = self.delivered_copy(&view, &topic, queue_id, &properties);
        if self.config().controller_mode && !self.is_master() {
            // Demoted during this pass: retried by the next master's own pass.
            return Err(());
        }
        match self.store.put(&msg) {
            Ok(put) => {
                self.stats.on_copy_put();
                self.waiters.notify(&topic, queue_id);
                Ok(Some(put.durable_ticket))
            }
            Err(StoreError::Busy { .. } | StoreError::IndexBusy { .. } | StoreError::CheckpointBusy { .. } | StoreError::DiskFull { .. } | StoreError::NoSpace) => Err(()),
            Err(e @ (StoreError::TooLarge { .. } | StoreError::Illegal(_))) => {
                tracing::warn!(shard = self.place.id, error = %e, "timer message cannot be delivered; skipped");
                Ok(None)
            }
            Err(e) => crate::fatal::fatal(&format!("store of shard {} failed delivering a timer: {e}", self.place.id)),
        }
    }

    /// Records the finished minutes whose copies the flushed CommitLog now covers.
    pub(super) fn settle_timer_progress(&self) {
        let flushed = self.store.flushed_offset();
        let mut st = self.timers.state.borrow_mut();
        while st.pending.front().is_some_and(|p| p.0 <= flushed) {
            let (_, b, progress, end_ms) = st.pending.pop_front().expect("front exists");
            st.durable.progress.insert(b, progress);
            st.durable.processed_ms = st.durable.processed_ms.max(end_ms);
            st.dirty = true;
        }
    }

    /// Saves the timer progress if it changed.
    pub async fn persist_timer_progress(&self) {
        self.settle_timer_progress();
        let encoded = {
            let mut st = self.timers.state.borrow_mut();
            if !st.dirty {
                return;
            }
            st.dirty = false;
            st.encode()
        };
        if let Err(e) = self.timers.progress_store.save(&encoded).await {
            // Not fatal (a full disk must not stop the broker): progress only saves
            // re-delivery; it stays dirty and is saved on a later round.
            tracing::warn!(shard = self.place.id, error = %e, "timer progress not saved; retried");
            self.timers.state.borrow_mut().dirty = true;
        }
    }

    /// Timers held in memory now (the minutes being delivered).
    pub fn timers_loaded(&self) -> usize {
        self.timers.state.borrow().loaded_len()
    }
}
