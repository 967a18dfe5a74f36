//! The shard's delay-level delivery (`schedule/` owns the rules): one task per shard
//! (which also runs the timer passes of `shard/timer.rs`)
//! walks every level's schedule queue in order, copies each message whose due time has
//! passed to its real queue, and records progress; GET_ALL_DELAY_OFFSET reports it.
//!
//! Delivery does not wait for its copies to be flushed (that would make every due
//! message late by up to a flush interval under async flush): a cursor moves at once,
//! while the recorded progress (`delayOffset`) moves only as the flushed CommitLog
//! passes the copies it covers (`delay_pending`, at most `DELAY_PENDING_MAX` entries;
//! past that a pass waits for the oldest).
//!
//! Invariants: a level's queue is delivered in order and a message never before its due
//! time; recorded progress (persisted every `DELAY_OFFSETS_PERSIST_INTERVAL_MS` and at
//! a clean stop) covers only durable copies, so a crash re-delivers at most the copies
//! not yet flushed or persisted, and loses none; the task sleeps
//! until the earliest due time or `DELIVERY_IDLE_POLL_MS`, never spins; a read error
//! skips the pass (retried on the next), a store failure is fatal.

use super::{error_response, OpenError, Shard};
use crate::meta::snapshot::SnapshotStore;
use crate::rt::Runtime;
use crate::schedule::{self, DelayLevels, DelayOffsets, DELAY_OFFSETS_PERSIST_INTERVAL_MS, DELIVERY_BATCH_MAX, DELIVERY_IDLE_POLL_MS, SCHEDULE_TOPIC};
use crate::store::engine::MessageToStore;
use crate::store::error::StoreError;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// Pause before retrying a due message the store refused (busy) or could not read.
pub const DELIVERY_RETRY_MS: u64 = 10;
/// Delivery passes whose copies may wait for a flush at once (each holds one entry per
/// level it moved).
pub const DELAY_PENDING_MAX: usize = 4096;

/// What one delivery pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassOutcome {
    pub delivered: u64,
    /// The store refused a copy for want of flushed space (busy): wait for a flush.
    pub store_busy: bool,
    /// The earliest due time still ahead (wall-clock ms), if any message waits.
    pub next_due_ms: Option<i64>,
}

/// The delay feature's state on one shard: the level table, how far delivery got
/// (`cursor`) and how far durable copies cover it (`offsets`, saved as `delayOffset`).
/// Reached only through its methods.
pub struct Delays<D: crate::store::io::Disk> {
    /// Delay levels (`messageDelayLevel`).
    levels: DelayLevels,
    /// Progress covered by durable copies (persisted as `delayOffset`).
    offsets: RefCell<DelayOffsets>,
    /// Next schedule-queue offset to deliver per level (ahead of `offsets` by the
    /// copies not yet flushed).
    cursor: RefCell<DelayOffsets>,
    /// (CommitLog end the copies need flushed, level, progress they complete), at most
    /// `DELAY_PENDING_MAX` before a pass waits for the oldest.
    pending: RefCell<VecDeque<(u64, usize, u64)>>,
    offsets_dirty: Cell<bool>,
    offsets_store: SnapshotStore<D>,
}

impl<D: crate::store::io::Disk> Delays<D> {
    /// Parses the level table and loads the saved progress from `shard_meta_dir`.
    pub async fn open(disk: D, shard_meta_dir: &Path, shard: usize, delay_levels: &str) -> Result<Self, OpenError> {
        let levels = DelayLevels::parse(delay_levels).map_err(|e| OpenError::Meta { shard, what: "delay levels", reason: e.to_string() })?;
        let offsets_store = SnapshotStore::new(disk, shard_meta_dir.to_path_buf(), "delayOffset");
        let offsets = super::load(&offsets_store, shard, "delay offsets", DelayOffsets::decode, Default::default).await?;
        Ok(Self {
            levels,
            cursor: RefCell::new(offsets.clone()),
            offsets: RefCell::new(offsets),
            pending: RefCell::new(VecDeque::new()),
            offsets_dirty: Cell::new(false),
            offsets_store,
        })
    }

    pub fn levels(&self) -> &DelayLevels {
        &self.levels
    }

    fn cursor(&self, level: usize) -> u64 {
        self.cursor.borrow().get(level)
    }

    /// Level `level` was delivered up to `next`; its copies are durable once the
    /// CommitLog is flushed to `ticket`.
    fn delivered(&self, level: usize, next: u64, ticket: u64) {
        self.cursor.borrow_mut().advance(level, next);
        self.pending.borrow_mut().push_back((ticket, level, next));
    }

    /// The flush to wait for when more than `DELAY_PENDING_MAX` passes wait for one.
    fn pending_over_bound(&self) -> Option<u64> {
        let pending = self.pending.borrow();
        (pending.len() > DELAY_PENDING_MAX).then(|| pending.front().map(|p| p.0)).flatten()
    }

    /// Records the progress whose copies the CommitLog flushed up to `flushed` covers.
    fn settle(&self, flushed: u64) {
        let mut pending = self.pending.borrow_mut();
        let mut offsets = self.offsets.borrow_mut();
        while pending.front().is_some_and(|p| p.0 <= flushed) {
            let (_, level, to) = pending.pop_front().expect("front exists");
            if offsets.advance(level, to) {
                self.offsets_dirty.set(true);
            }
        }
    }

    /// Saves the recorded progress if it changed; `shard` names it in the log.
    async fn persist(&self, flushed: u64, shard: usize) {
        self.settle(flushed);
        if !self.offsets_dirty.replace(false) {
            return;
        }
        let encoded = self.offsets.borrow().encode();
        if let Err(e) = self.offsets_store.save(&encoded).await {
            // Not fatal (a full disk must not stop the broker): progress only saves
            // re-delivery; it stays dirty and is saved on a later round.
            tracing::warn!(shard, error = %e, "delay offsets not saved; retried");
            self.offsets_dirty.set(true);
        }
    }

    pub fn offsets(&self) -> DelayOffsets {
        self.offsets.borrow().clone()
    }

    /// A slave takes its master's progress as its own (cursor included: a slave
    /// delivers nothing until it is promoted).
    fn replace(&self, theirs: DelayOffsets) {
        *self.cursor.borrow_mut() = theirs.clone();
        *self.offsets.borrow_mut() = theirs;
        self.offsets_dirty.set(true);
    }
}

impl<R: Runtime> Shard<R> {
    /// Runs delay-level delivery until the shard stops or is no longer the master it
    /// was in `generation` (`role.rs`).
    pub(super) async fn run_delivery(self: Rc<Self>, generation: u64) {
        let mut last_persist_us = self.rt.monotonic_us();
        while self.master_tasks_run(generation) {
            let outcome = self.deliver_pass().await;
            let timers = self.timer_pass().await;
            let now_ms = self.now_ms();
            let idle_ms = DELIVERY_IDLE_POLL_MS as i64;
            let next_due = match (outcome.next_due_ms, timers.next_due_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait_ms = match next_due {
                _ if outcome.delivered > 0 || timers.delivered > 0 || timers.more => 0,
                // Something is due but nothing was delivered (the store is busy or a
                // read failed): back off instead of trying again at once.
                Some(due) => (due - now_ms).clamp(DELIVERY_RETRY_MS as i64, idle_ms),
                None => idle_ms,
            };
            let now_us = self.rt.monotonic_us();
            if now_us.saturating_sub(last_persist_us) >= DELAY_OFFSETS_PERSIST_INTERVAL_MS * 1000 {
                last_persist_us = now_us;
                self.persist_delay_offsets().await;
                self.persist_timer_progress().await;
            }
            if outcome.store_busy {
                // Refused for want of flushed space: go again as soon as the flush that
                // frees it completes (a fixed sleep would lose every race for the space
                // to producers that retry at once, and due messages would starve).
                let end = self.store.write_offset();
                let _ = crate::rt::timeout(&self.rt, Duration::from_millis(DELIVERY_IDLE_POLL_MS), self.store.wait_durable(end)).await;
            } else if wait_ms > 0 {
                self.rt.sleep(Duration::from_millis(wait_ms as u64)).await;
            } else {
                // Delivered a batch: let requests run before the next one.
                futures_lite::future::yield_now().await;
            }
        }
    }

    /// One pass over every level: delivers what is due (at most `DELIVERY_BATCH_MAX`
    /// per level) and moves each level's cursor; the recorded progress follows the
    /// flushed CommitLog (`settle_delay_progress`).
    pub async fn deliver_pass(&self) -> PassOutcome {
        self.delays.settle(self.store.flushed_offset());
        let mut outcome = PassOutcome::default();
        for level in 1..=self.delays.levels().count() {
            let queue = (level - 1) as i32;
            let from = self.delays.cursor(level).max(self.store.min_offset(SCHEDULE_TOPIC, queue));
            if from >= self.store.max_offset(SCHEDULE_TOPIC, queue) {
                continue;
            }
            let entries = match self.store.cq_entries(SCHEDULE_TOPIC, queue, from, DELIVERY_BATCH_MAX as u64).await {
                Ok(e) if !e.is_empty() => e,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(shard = self.place.id, level, error = %e, "delay level not read; retried on the next pass");
                    continue;
                }
            };
            let mut next = from;
            // The CommitLog end the copies of this level need flushed (0: none made).
            let mut ticket = 0;
            // A level's messages fall due in order: read the head alone, and once it is
            // due read the rest of the batch concurrently (under load they are cold,
            // O_DIRECT reads: one at a time, their latency would bound delivery).
            let head_due = match self.store.read_record(entries[0].phys_offset, Some(entries[0].size)).await {
                Ok(Some(r)) => StoredMessageView::parse(&r).map(|v| self.delays.levels().due_ms(level, v.store_timestamp_ms(), self.now_ms()) <= self.now_ms()).unwrap_or(true),
                _ => true, // gone, unreadable or no record: handled below
            };
            let records = if head_due {
                futures_util::future::join_all(entries.iter().map(|e| self.store.read_record(e.phys_offset, Some(e.size)))).await
            } else {
                vec![self.store.read_record(entries[0].phys_offset, Some(entries[0].size)).await]
            };
            for record in records {
                let record = match record {
                    Ok(Some(r)) => r,
                    Ok(None) => {
                        // Gone (retention) or not a record: nothing to deliver.
                        next += 1;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(shard = self.place.id, level, error = %e, "delayed message not read; retried on the next pass");
                        break;
                    }
                };
                let Ok(view) = StoredMessageView::parse(&record) else {
                    next += 1;
                    continue;
                };
                let now_ms = self.now_ms();
                let due_ms = self.delays.levels().due_ms(level, view.store_timestamp_ms(), now_ms);
                if due_ms > now_ms {
                    outcome.next_due_ms = Some(outcome.next_due_ms.map_or(due_ms, |d: i64| d.min(due_ms)));
                    break;
                }
                let properties = String::from_utf8_lossy(view.properties_bytes());
                let Some((topic, queue_id, delivered_properties)) = schedule::delivered(&properties) else {
                    tracing::warn!(shard = self.place.id, level, offset = next, "delayed message without REAL_TOPIC/REAL_QID skipped");
                    next += 1;
                    continue;
                };
                let msg = self.delivered_copy(&view, &topic, queue_id, &delivered_properties);
                if self.config().controller_mode && !self.is_master() {
                    // Demoted during this pass (it awaited reads): no copy of a slave's own.
                    break;
                }
                match self.store.put(&msg) {
                    Ok(put) => {
                        ticket = put.durable_ticket;
                        self.stats.on_copy_put();
                        self.waiters.notify(&topic, queue_id);
                        outcome.delivered += 1;
                        next += 1;
                    }
                    Err(e @ (StoreError::Busy { .. } | StoreError::IndexBusy { .. } | StoreError::CheckpointBusy { .. })) => {
                        tracing::debug!(shard = self.place.id, level, error = %e, "delayed delivery waits for a flush");
                        outcome.store_busy = true;
                        break;
                    }
                    Err(e @ (StoreError::DiskFull { .. } | StoreError::NoSpace)) => {
                        tracing::debug!(shard = self.place.id, level, error = %e, "delayed delivery waits for disk space");
                        break;
                    }
                    Err(e @ (StoreError::TooLarge { .. } | StoreError::Illegal(_))) => {
                        tracing::warn!(shard = self.place.id, level, error = %e, "delayed message cannot be delivered; skipped");
                        next += 1;
                    }
                    Err(e) => crate::fatal::fatal(&format!("store of shard {} failed delivering a delayed message: {e}", self.place.id)),
                }
            }
            if next > from {
                self.delays.delivered(level, next, ticket);
            }
        }
        // Bounded: past `DELAY_PENDING_MAX` waiting entries, wait for the oldest's flush.
        if let Some(ticket) = self.delays.pending_over_bound() {
            if let Err(e) = self.store.wait_durable(ticket).await {
                crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id));
            }
        }
        self.delays.settle(self.store.flushed_offset());
        outcome
    }

    /// A waiting message (delayed or timed) as it is delivered to its real queue: its
    /// own body, flags, born info and reconsume count, stored by this broker.
    pub(super) fn delivered_copy<'a>(&self, view: &StoredMessageView<'a>, topic: &'a str, queue_id: i32, properties: &'a str) -> MessageToStore<'a> {
        MessageToStore {
            topic,
            queue_id,
            flag: view.flag(),
            body: view.body(),
            properties,
            sys_flag: view.sys_flag(),
            born_timestamp_ms: view.born_timestamp_ms(),
            born_host: view.born_host(),
            store_host: self.place.store_host,
            reconsume_times: view.reconsume_times(),
            prepared_transaction_offset: 0,
        }
    }

    /// Saves the delivery progress if it changed.
    pub async fn persist_delay_offsets(&self) {
        self.delays.persist(self.store.flushed_offset(), self.place.id).await;
    }

    pub fn delay_offsets(&self) -> DelayOffsets {
        self.delays.offsets()
    }

    /// A slave installs its master's delivery progress and saves it (a slave runs no
    /// delivery task, which saves it on a master).
    pub(super) async fn replace_delay_offsets(&self, theirs: DelayOffsets) {
        self.delays.replace(theirs);
        self.persist_delay_offsets().await;
    }

    /// GET_ALL_DELAY_OFFSET: RocketMQ's `DelayOffsetSerializeWrapper`. Levels are per
    /// shard here, so the table holds each level's offsets summed over shards (what a
    /// monitor wants: messages delivered per level), and `shardOffsetTables` each
    /// shard's own (what a slave of that shard needs).
    pub(super) async fn handle_all_delay_offset(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        if cmd.ext("ringmqLocalOnly").is_some() {
            let mut r = cmd.create_response(rs::SUCCESS, None);
            r.body = self.delay_offsets().encode().into();
            return r;
        }
        let mut tables = vec![(self.place.id, self.delay_offsets())];
        // Shard route mode: a shard-broker's own (a tool sums brokers; ARCHITECTURE.md
        // "Route modes", Figures).
        let others = if self.route_mode() == crate::config::RouteMode::Shard { 0 } else { self.place.count };
        for shard in (0..others).filter(|&s| s != self.place.id) {
            let r = self.mesh.call(shard, cmd.clone().with_ext("ringmqLocalOnly", "1")).await;
            match DelayOffsets::decode(&r.body) {
                Ok(t) if r.code == rs::SUCCESS => tables.push((shard, t)),
                _ => return error_response(cmd, rs::SYSTEM_ERROR, format!("shard {shard} did not report its delay offsets")),
            }
        }
        tables.sort_by_key(|(s, _)| *s);
        let mut total = DelayOffsets::default();
        for (_, t) in &tables {
            for (&level, &offset) in &t.offsets {
                *total.offsets.entry(level).or_insert(0) += offset;
            }
        }
        let per_shard: Vec<serde_json::Value> = tables.iter().map(|(_, t)| serde_json::json!(t.offsets)).collect();
        let body = serde_json::json!({ "offsetTable": total.offsets, "shardOffsetTables": per_shard });
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = body.to_string().into_bytes().into();
        r
    }
}
