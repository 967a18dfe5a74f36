//! The shard's transactional messages (`txn/` owns the rules and the table): half
//! sends, END_TRANSACTION, the check-back pass, the saved state and its rebuild at
//! start-up.
//!
//! Everything about one half happens on the shard that owns its real queue (the half
//! is stored there, and END_TRANSACTION is routed there by the shard bits of its
//! `commitLogOffset`), so the table has one owner and no lock.
//!
//! Invariants: a half is resolved at most once — the table entry is checked and removed
//! in the same synchronous step that appends the committed copy and/or the op record
//! (no await between), so duplicate and crossed END_TRANSACTIONs produce one copy at
//! most; a half that came back open after a crash is resolved only after the index has
//! been asked whether a committed copy (`preparedTransactionOffset` = the half) already
//! exists; the saved table covers only a durable CommitLog prefix; check passes read at
//! most `CHECK_PASS_BUDGET` halves before yielding and sleep
//! `transaction_check_interval_ms` between passes.

use super::{error_response, OpenError, Shard};
use crate::rt::Runtime;
use crate::store::engine::{MessageToStore, PutResult, ShardId};
use crate::store::config::FlushMode;
use crate::txn::{self, CheckStep, Outcome, Pending, TxnSnapshot, TxnTable, CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC};
use ringmq_client::message::properties::{self, keys, Properties};
use ringmq_client::message::stored::{StoredMessage, StoredMessageView};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader, SendMessageRequestHeaderV2};
use crate::meta::snapshot::SnapshotStore;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// CQ entries or op records read per step while rebuilding at start-up.
const REBUILD_BATCH_MAX: u64 = 256;
/// Records a committed-copy or op lookup in the index returns at most.
const LOOKUP_RESULTS_MAX: usize = 32;
/// Longest the check-back task sleeps before it reads `transactionCheckInterval` again
/// (an UPDATE_BROKER_CONFIG may have shortened it).
const TXN_CHECK_INTERVAL_RECHECK_MS: u64 = 1000;

/// What the shard counts about transactions (GET_BROKER_RUNTIME_INFO).
#[derive(Debug, Default)]
pub struct TxnCounters {
    pub halves: Cell<u64>,
    pub commits: Cell<u64>,
    pub rollbacks: Cell<u64>,
    pub checks: Cell<u64>,
    pub discards: Cell<u64>,
    /// END_TRANSACTIONs for a half already resolved (retries, crossed answers).
    pub duplicate_ends: Cell<u64>,
    /// Halves dropped because retention deleted their record.
    pub expired: Cell<u64>,
    /// Check passes that found no live producer for a half's group.
    pub checks_without_producer: Cell<u64>,
}

/// The transaction feature's state on one shard: its open transactions, their
/// snapshot (`transactionState`), counters and the UNIQ_KEY source for halves sent
/// without one. Only this module touches it.
pub struct Transactions<D: crate::store::io::Disk> {
    table: RefCell<TxnTable>,
    store: SnapshotStore<D>,
    counters: TxnCounters,
    ids: ringmq_client::msgid::MsgIdGenerator,
}

impl<D: crate::store::io::Disk> Transactions<D> {
    /// Loads the saved table from `shard_meta_dir` and rebuilds the open transactions
    /// from it and `store` (`rebuild`).
    pub async fn open<C: crate::store::io::Clock>(
        disk: D,
        shard_meta_dir: &Path,
        shard: usize,
        store: &crate::store::engine::Store<D, C>,
        pending_max: usize,
        ids: ringmq_client::msgid::MsgIdGenerator,
    ) -> Result<Self, OpenError> {
        let snapshots = SnapshotStore::new(disk, shard_meta_dir.to_path_buf(), "transactionState");
        let snapshot = super::load(&snapshots, shard, "transaction state", |b| TxnSnapshot::decode(b).map(Some), || None).await?;
        let table = rebuild(store, shard, snapshot, pending_max).await?;
        Ok(Self { table: RefCell::new(table), store: snapshots, counters: TxnCounters::default(), ids })
    }
}

fn inc(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Rebuilds one shard's open transactions at start-up: the saved table, then the
/// halves and op records the store holds past the points it covers.
pub(super) async fn rebuild<D: crate::store::io::Disk, C: crate::store::io::Clock>(
    store: &crate::store::engine::Store<D, C>,
    shard: usize,
    snapshot: Option<TxnSnapshot>,
    max: usize,
) -> Result<TxnTable, OpenError> {
    let fail = |reason: String| OpenError::Meta { shard, what: "transaction state", reason };
    let snapshot = snapshot.unwrap_or_default();
    let mut table = TxnTable::from_snapshot(&snapshot, max);
    let (half_min, half_max) = (store.min_offset(HALF_TOPIC, 0), store.max_offset(HALF_TOPIC, 0));
    let expired = table.expire_below(half_min);
    if snapshot.half_next > half_max {
        // The snapshot is written only after the log it describes is durable, so this
        // is a damaged or truncated store (allow_truncate_corrupt): the halves past the
        // end are gone.
        tracing::warn!(shard, saved = snapshot.half_next, end = half_max, "transaction state is ahead of the half queue; halves past its end dropped");
        let gone: Vec<u64> = table.range_from(half_max, usize::MAX).into_iter().map(|(k, _)| k).collect();
        for k in gone {
            table.remove(k);
        }
    }
    let mut from = snapshot.half_next.max(half_min);
    let mut replayed_halves = 0u64;
    while from < half_max {
        let entries = store.cq_entries(HALF_TOPIC, 0, from, REBUILD_BATCH_MAX).await.map_err(|e| fail(e.to_string()))?;
        if entries.is_empty() {
            break;
        }
        for (i, e) in entries.iter().enumerate() {
            let pending = Pending { phys: e.phys_offset, size: e.size, checks: 0, first_check_ms: None, recovered: true };
            // Rebuilding may pass transaction_pending_max (it only refuses new halves).
            let _ = table.insert(from + i as u64, pending);
        }
        replayed_halves += entries.len() as u64;
        from += entries.len() as u64;
    }
    let (op_min, op_max) = (store.min_offset(OP_TOPIC, 0), store.max_offset(OP_TOPIC, 0));
    let mut from = snapshot.op_next.max(op_min);
    let mut replayed_ops = 0u64;
    while from < op_max {
        let entries = store.cq_entries(OP_TOPIC, 0, from, REBUILD_BATCH_MAX).await.map_err(|e| fail(e.to_string()))?;
        if entries.is_empty() {
            break;
        }
        let records = futures_util::future::join_all(entries.iter().map(|e| store.read_record(e.phys_offset, Some(e.size)))).await;
        for record in records {
            let Some(record) = record.map_err(|e| fail(e.to_string()))? else { continue };
            let Ok(view) = StoredMessageView::parse(&record) else { continue };
            if let Some((half, _)) = txn::parse_op(view.body(), &String::from_utf8_lossy(view.properties_bytes())) {
                table.remove(half);
            }
        }
        replayed_ops += entries.len() as u64;
        from += entries.len() as u64;
    }
    tracing::info!(shard, open = table.len(), replayed_halves, replayed_ops, expired, "transactions rebuilt");
    // What was rebuilt is saved on the first persist round.
    table.mark_dirty();
    Ok(table)
}

/// A half read back and checked against what a request names.
struct Half {
    record: Vec<u8>,
}

impl Half {
    fn view(&self) -> StoredMessageView<'_> {
        StoredMessageView::parse(&self.record).expect("parsed when read")
    }
    fn properties(&self) -> String {
        String::from_utf8_lossy(self.view().properties_bytes()).into_owned()
    }
}

impl<R: Runtime> Shard<R> {
    /// Stores a half message (the send is on this shard: it owns the real queue).
    /// Returns what was stored and the properties the producer is answered from (a
    /// UNIQ_KEY is added when the producer sent none: the committed copy is found
    /// again by it after a crash).
    pub(super) fn put_half(&self, real_topic: &str, real_queue: i32, base: MessageToStore<'_>, properties: &str) -> Result<(PutResult, String), (i32, String)> {
        if self.config().reject_transaction_message {
            return Err((rs::NO_PERMISSION, format!("the broker[{}] sending transaction message is forbidden", self.config().broker_name)));
        }
        let delayed = [keys::DELAY, keys::TIMER_DELIVER_MS, keys::TIMER_DELAY_SEC, keys::TIMER_DELAY_MS]
            .iter()
            .any(|k| properties::find(properties, k).is_some_and(|v| !v.trim().is_empty() && v.trim() != "0"));
        if delayed {
            return Err((rs::MESSAGE_ILLEGAL, "transactional messages cannot be delayed or timed (property DELAY or TIMER_*)".into()));
        }
        self.txns.table.borrow().check_room().map_err(|e| (rs::SYSTEM_BUSY, e.to_string()))?;
        let owned;
        let properties = if properties::find(properties, keys::UNIQ_KEY).is_none_or(str::is_empty) {
            let mut p = Properties::decode_str(properties);
            let _ = p.set(keys::UNIQ_KEY, &self.txns.ids.next_at(self.now_ms()));
            owned = p.encode();
            owned.as_str()
        } else {
            properties
        };
        let half_properties = txn::half_properties(properties, real_topic, real_queue);
        let msg = MessageToStore {
            topic: HALF_TOPIC,
            queue_id: 0,
            properties: &half_properties,
            sys_flag: txn::reset_transaction_type(base.sys_flag, txn::SYSFLAG_TRANSACTION_NOT_TYPE),
            ..base
        };
        let r = self.put(&msg)?;
        let first_check_ms = base.born_timestamp_ms.saturating_add(txn::immunity_ms(&half_properties, self.config().transaction_timeout_ms) as i64);
        let pending = Pending { phys: r.phys_offset, size: r.size_bytes, checks: 0, first_check_ms: Some(first_check_ms), recovered: false };
        if let Err(e) = self.txns.table.borrow_mut().insert(r.queue_offset, pending) {
            crate::fatal::fatal(&format!("shard {}: a new half message collides with an open one: {e}", self.place.id));
        }
        inc(&self.txns.counters.halves);
        Ok((r, half_properties))
    }

    /// END_TRANSACTION (37), on the shard that holds the half.
    pub(super) async fn handle_end_transaction(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let h = match EndTransactionRequestHeader::from_ext(&cmd.ext_fields) {
            Ok(h) => h,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad END_TRANSACTION header: {e}")),
        };
        if !self.is_master() {
            return error_response(cmd, rs::SLAVE_NOT_AVAILABLE, "Message store is slave mode, so end transaction is forbidden.");
        }
        let outcome = match txn::Outcome::from_end_code(h.commit_or_rollback) {
            Ok(Some(o)) => o,
            Ok(None) => {
                tracing::info!(shard = self.place.id, group = %h.producer_group, offset = h.commit_log_offset, from_check = h.from_transaction_check, "producer left the transaction unknown; it will be checked");
                return cmd.create_response(rs::SUCCESS, Some("transaction state unknown: the half message stays open and will be checked"));
            }
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, e),
        };
        let (Ok(half_offset), Ok(phys)) = (u64::try_from(h.tran_state_table_offset), u64::try_from(h.commit_log_offset)) else {
            return error_response(cmd, rs::SYSTEM_ERROR, "Find prepared transaction message failed: negative tranStateTableOffset or commitLogOffset");
        };
        if ShardId::of_phys(phys).0 as usize != self.place.id {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("Find prepared transaction message failed: commitLogOffset {phys} is not on this broker"));
        }
        let size = self.txns.table.borrow().get(half_offset).filter(|p| p.phys == phys).map(|p| p.size);
        let half = match self.store.read_record(phys, size).await {
            Ok(Some(record)) if StoredMessageView::parse(&record).is_ok() => Half { record },
            Ok(_) => {
                tracing::warn!(shard = self.place.id, phys, half_offset, group = %h.producer_group, "END_TRANSACTION for no message (unknown or deleted half)");
                return error_response(cmd, rs::SYSTEM_ERROR, format!("Find prepared transaction message failed: no message at commitLogOffset {phys}"));
            }
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("Find prepared transaction message failed: {e}")),
        };
        let view = half.view();
        if view.topic_bytes() != HALF_TOPIC.as_bytes() {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("Find prepared transaction message failed: the message at commitLogOffset {phys} is not a half message"));
        }
        let props = half.properties();
        // Java's checkPrepareMessage, with its remarks.
        if properties::find(&props, keys::PGROUP) != Some(h.producer_group.as_str()) {
            return error_response(cmd, rs::SYSTEM_ERROR, "The producer group wrong");
        }
        if view.queue_offset() != h.tran_state_table_offset {
            return error_response(cmd, rs::SYSTEM_ERROR, "The transaction state table offset wrong");
        }
        if view.physical_offset() != h.commit_log_offset {
            return error_response(cmd, rs::SYSTEM_ERROR, "The commit log offset wrong");
        }
        if txn::reject_late_end(h.from_transaction_check, &props, view.born_timestamp_ms(), self.now_ms(), self.config().transaction_timeout_ms) {
            return error_response(cmd, rs::ILLEGAL_OPERATION, "END_TRANSACTION after the message's CHECK_IMMUNITY_TIME_IN_SECONDS: it waits for its check");
        }
        if self.txns.table.borrow().get(half_offset).is_some_and(|p| p.recovered) && self.settle_recovered(half_offset, &half).await {
            // It had been committed before the crash: nothing to do but say so.
        }
        let resolved = match outcome {
            Outcome::Commit => self.commit_half(half_offset, &half),
            _ => self.rollback_half(half_offset),
        };
        match resolved {
            Resolve::Done(ticket) => {
                let (group, from_check) = (&h.producer_group, h.from_transaction_check);
                tracing::debug!(shard = self.place.id, half_offset, phys, group = %group, from_check, outcome = outcome.as_str(), "transaction ended");
                if let (Some(ticket), FlushMode::Sync, false) = (ticket, self.config().store.flush_mode, cmd.is_oneway()) {
                    if let Err(e) = self.store.wait_durable(ticket).await {
                        crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id));
                    }
                }
                cmd.create_response(rs::SUCCESS, None)
            }
            Resolve::Refused(code, remark) => error_response(cmd, code, remark),
            Resolve::NotOpen => {
                inc(&self.txns.counters.duplicate_ends);
                let before = self.resolved_outcome(half_offset, &half).await;
                match before {
                    Some(b) if b == outcome => {
                        tracing::info!(shard = self.place.id, half_offset, phys, outcome = outcome.as_str(), from_check = h.from_transaction_check, "duplicate END_TRANSACTION: already done");
                        cmd.create_response(rs::SUCCESS, Some(&format!("transaction already ended ({})", b.as_str())))
                    }
                    Some(b) => {
                        tracing::warn!(shard = self.place.id, half_offset, phys, asked = outcome.as_str(), done = b.as_str(), from_check = h.from_transaction_check, "END_TRANSACTION contradicts how the transaction ended: ignored");
                        error_response(cmd, rs::ILLEGAL_OPERATION, format!("transaction already ended ({}); {} ignored", b.as_str(), outcome.as_str()))
                    }
                    None => {
                        tracing::warn!(shard = self.place.id, half_offset, phys, asked = outcome.as_str(), "END_TRANSACTION for a half no longer open (outcome not found)");
                        error_response(cmd, rs::ILLEGAL_OPERATION, format!("transaction at tranStateTableOffset {half_offset} already ended; {} ignored", outcome.as_str()))
                    }
                }
            }
        }
    }

    /// Commits the open half at `half_offset`: the real message, then the op record,
    /// and the table entry removed — one synchronous step.
    fn commit_half(&self, half_offset: u64, half: &Half) -> Resolve {
        let Some(pending) = self.txns.table.borrow().get(half_offset) else { return Resolve::NotOpen };
        let view = half.view();
        let props = half.properties();
        let Some((topic, queue_id)) = txn::real_target(&props) else {
            return Resolve::Refused(rs::SYSTEM_ERROR, format!("half message at {} names no REAL_TOPIC / REAL_QID", pending.phys));
        };
        let committed = txn::committed_properties(&props);
        let real = MessageToStore {
            topic: &topic,
            queue_id,
            flag: view.flag(),
            body: view.body(),
            properties: &committed,
            sys_flag: txn::reset_transaction_type(view.sys_flag(), txn::SYSFLAG_TRANSACTION_COMMIT_TYPE),
            born_timestamp_ms: view.born_timestamp_ms(),
            born_host: view.born_host(),
            store_host: self.place.store_host,
            reconsume_times: view.reconsume_times(),
            prepared_transaction_offset: pending.phys as i64,
        };
        let r = match self.put(&real) {
            Ok(r) => r,
            Err((code, remark)) => return Resolve::Refused(code, remark),
        };
        self.txns.table.borrow_mut().remove(half_offset);
        self.put_op(half_offset, Outcome::Commit);
        inc(&self.txns.counters.commits);
        self.waiters.notify(&topic, queue_id);
        Resolve::Done(Some(r.durable_ticket))
    }

    fn rollback_half(&self, half_offset: u64) -> Resolve {
        if self.txns.table.borrow().get(half_offset).is_none() {
            return Resolve::NotOpen;
        }
        match self.put(&self.op_message(half_offset, Outcome::Rollback, &txn::op_body(half_offset), &txn::op_properties(half_offset, Outcome::Rollback))) {
            Ok(r) => {
                self.txns.table.borrow_mut().remove(half_offset);
                inc(&self.txns.counters.rollbacks);
                Resolve::Done(Some(r.durable_ticket))
            }
            // The half stays open: a retry or the check-back ends it.
            Err((code, remark)) => Resolve::Refused(code, remark),
        }
    }

    fn op_message<'a>(&self, _half_offset: u64, _outcome: Outcome, body: &'a [u8], properties: &'a str) -> MessageToStore<'a> {
        MessageToStore {
            topic: OP_TOPIC,
            queue_id: 0,
            flag: 0,
            body,
            properties,
            sys_flag: 0,
            born_timestamp_ms: self.now_ms(),
            born_host: self.place.store_host,
            store_host: self.place.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    /// Appends the op record of a half already taken out of the table. A refusal (the
    /// store is busy or full) is logged, not undone: the table (saved) says resolved,
    /// and a committed copy is found through the index after a crash.
    fn put_op(&self, half_offset: u64, outcome: Outcome) {
        let (body, props) = (txn::op_body(half_offset), txn::op_properties(half_offset, outcome));
        if let Err((code, remark)) = self.put(&self.op_message(half_offset, outcome, &body, &props)) {
            tracing::warn!(shard = self.place.id, half_offset, outcome = outcome.as_str(), code, remark, "op record not written; the saved table carries the outcome");
        }
    }

    /// A half that came back open after a crash: if a committed copy of it exists (the
    /// op record was torn off), it is resolved as committed now. Returns whether it was.
    async fn settle_recovered(&self, half_offset: u64, half: &Half) -> bool {
        let committed = self.committed_copy_exists(half).await;
        let mut table = self.txns.table.borrow_mut();
        match table.get(half_offset) {
            Some(p) if p.recovered && committed => {
                table.remove(half_offset);
                drop(table);
                tracing::info!(shard = self.place.id, half_offset, "half found committed after a crash (its op record was lost); op record written");
                self.put_op(half_offset, Outcome::Commit);
                true
            }
            Some(p) if p.recovered => {
                table.update(half_offset, |p| p.recovered = false);
                false
            }
            _ => false,
        }
    }

    /// Whether the real topic holds the committed copy of `half` (found by UNIQ_KEY).
    async fn committed_copy_exists(&self, half: &Half) -> bool {
        let view = half.view();
        let props = half.properties();
        let (Some((topic, _)), Some(uniq)) = (txn::real_target(&props), properties::find(&props, keys::UNIQ_KEY)) else { return false };
        let phys = view.physical_offset();
        match self.store.query_by_key(&topic, uniq, LOOKUP_RESULTS_MAX, 0, i64::MAX).await {
            Ok(records) => records.iter().any(|r| {
                StoredMessageView::parse(r).is_ok_and(|v| {
                    v.prepared_transaction_offset() == phys && v.sys_flag() & txn::SYSFLAG_TRANSACTION_MASK == txn::SYSFLAG_TRANSACTION_COMMIT_TYPE
                })
            }),
            Err(e) => {
                tracing::warn!(shard = self.place.id, phys, error = %e, "committed-copy lookup failed; assumed absent");
                false
            }
        }
    }

    /// How a half that is no longer open ended: its op record, else a committed copy.
    async fn resolved_outcome(&self, half_offset: u64, half: &Half) -> Option<Outcome> {
        if let Ok(records) = self.store.query_by_key(OP_TOPIC, &txn::op_key(half_offset), LOOKUP_RESULTS_MAX, 0, i64::MAX).await {
            for r in &records {
                let Ok(v) = StoredMessageView::parse(r) else { continue };
                if let Some((offset, outcome)) = txn::parse_op(v.body(), &String::from_utf8_lossy(v.properties_bytes())) {
                    if offset == half_offset {
                        return Some(outcome);
                    }
                }
            }
        }
        self.committed_copy_exists(half).await.then_some(Outcome::Commit)
    }

    /// Runs check passes until the shard stops, `transactionCheckInterval` after the
    /// end of the one before (Java waits that long after each check): the interval in
    /// force, read at least every `TXN_CHECK_INTERVAL_RECHECK_MS`, so one changed at
    /// runtime governs the next pass (not only the one after it).
    pub(super) async fn run_txn_checks(self: Rc<Self>, generation: u64) {
        let mut last_pass_end_us = self.rt.monotonic_us();
        while self.master_tasks_run(generation) {
            let due_us = last_pass_end_us.saturating_add(self.config().transaction_check_interval_ms.saturating_mul(1000));
            let now_us = self.rt.monotonic_us();
            if now_us < due_us {
                self.rt.sleep(Duration::from_micros((due_us - now_us).min(TXN_CHECK_INTERVAL_RECHECK_MS * 1000))).await;
                continue;
            }
            self.txn_check_pass().await;
            last_pass_end_us = self.rt.monotonic_us();
        }
    }

    /// One pass over the open halves: asks producers about the ones due, moves the
    /// ones checked too often away.
    pub async fn txn_check_pass(self: &Rc<Self>) {
        let now_ms = self.now_ms();
        let half_min = self.store.min_offset(HALF_TOPIC, 0);
        let expired = self.txns.table.borrow_mut().expire_below(half_min);
        if expired > 0 {
            self.txns.counters.expired.set(self.txns.counters.expired.get() + expired as u64);
            tracing::warn!(shard = self.place.id, expired, "open transactions dropped: retention deleted their half messages");
        }
        let mut from = 0u64;
        loop {
            let batch = self.txns.table.borrow().range_from(from, txn::CHECK_PASS_BUDGET);
            let Some(&(last, _)) = batch.last() else { break };
            from = last + 1;
            for (half_offset, pending) in batch {
                if self.store_stop.get() {
                    return;
                }
                if pending.checks == 0 && pending.first_check_ms.is_some_and(|due| due > now_ms) {
                    continue;
                }
                self.check_one(half_offset, now_ms).await;
            }
            futures_lite::future::yield_now().await;
        }
    }

    async fn check_one(self: &Rc<Self>, half_offset: u64, now_ms: i64) {
        let Some(pending) = self.txns.table.borrow().get(half_offset) else { return };
        let half = match self.store.read_record(pending.phys, Some(pending.size)).await {
            Ok(Some(record)) if StoredMessageView::parse(&record).is_ok_and(|v| v.topic_bytes() == HALF_TOPIC.as_bytes()) => Half { record },
            Ok(_) => {
                if self.txns.table.borrow_mut().remove(half_offset).is_some() {
                    inc(&self.txns.counters.expired);
                    tracing::warn!(shard = self.place.id, half_offset, phys = pending.phys, "open half message is gone (deleted by retention): dropped");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(shard = self.place.id, half_offset, error = %e, "half message not read; checked on the next pass");
                return;
            }
        };
        if pending.recovered && self.settle_recovered(half_offset, &half).await {
            return;
        }
        let Some(pending) = self.txns.table.borrow().get(half_offset) else { return };
        let view = half.view();
        let props = half.properties();
        let born_ms = view.born_timestamp_ms();
        let immunity = txn::immunity_ms(&props, self.config().transaction_timeout_ms);
        match txn::check_step(pending.checks, born_ms, immunity, now_ms, self.config().transaction_check_max) {
            CheckStep::Wait { due_ms } => self.txns.table.borrow_mut().update(half_offset, |p| p.first_check_ms = Some(due_ms)),
            CheckStep::Discard => self.discard_half(half_offset, &half, pending.checks).await,
            CheckStep::Check { n } => {
                let reserved_ms = self.config().store.file_reserved_hours.saturating_mul(3_600_000) as i64;
                if now_ms.saturating_sub(view.store_timestamp_ms()) > reserved_ms {
                    // Java's needSkip (older than the retention), by the broker's own
                    // clock rather than the producer's born time.
                    if self.txns.table.borrow_mut().remove(half_offset).is_some() {
                        inc(&self.txns.counters.expired);
                        tracing::warn!(shard = self.place.id, half_offset, "open half message older than fileReservedTime: dropped");
                    }
                    return;
                }
                let group = properties::find(&props, keys::PGROUP).unwrap_or_default().to_string();
                let Some(check) = self.check_request(half_offset, &half, n) else {
                    tracing::warn!(shard = self.place.id, half_offset, "half message names no real topic; cannot be checked");
                    return;
                };
                if self.push_to_producer(&group, check, n as usize + half_offset as usize) {
                    self.txns.table.borrow_mut().update(half_offset, |p| p.checks = n);
                    inc(&self.txns.counters.checks);
                    tracing::debug!(shard = self.place.id, half_offset, group = %group, n, "transaction checked");
                } else {
                    // Not counted: the group is checked again at the next interval.
                    inc(&self.txns.counters.checks_without_producer);
                    tracing::debug!(shard = self.place.id, half_offset, group = %group, "no live producer of the group to check with; retried next interval");
                }
            }
        }
    }

    /// CHECK_TRANSACTION_STATE for the half at `half_offset`, check number `n`: the
    /// header Java's `sendCheckMessage` fills, and the half re-encoded with its real
    /// topic and queue.
    fn check_request(&self, half_offset: u64, half: &Half, n: u32) -> Option<RemotingCommand> {
        let view = half.view();
        let props = half.properties();
        let (topic, queue_id) = txn::real_target(&props)?;
        let mut message: StoredMessage = view.to_owned().ok()?;
        message.topic = topic.clone();
        message.queue_id = queue_id;
        message.properties = txn::check_properties(&props, n);
        let uniq = properties::find(&props, keys::UNIQ_KEY).map(str::to_string);
        let header = CheckTransactionStateRequestHeader {
            topic: Some(topic),
            tran_state_table_offset: half_offset as i64,
            commit_log_offset: view.physical_offset(),
            msg_id: uniq.clone(),
            transaction_id: uniq,
            offset_msg_id: Some(super::send::offset_msg_id(&self.place.store_host, view.physical_offset() as u64)),
            broker_name: Some(self.client_broker_name()),
        };
        Some(RemotingCommand::request(rq::CHECK_TRANSACTION_STATE).with_header(&header).with_body(message.encode()).oneway())
    }

    /// Sends a server request to one live producer of `group` (picked by `pick`);
    /// false when the group has none or its connection is not taking requests.
    fn push_to_producer(&self, group: &str, cmd: RemotingCommand, pick: usize) -> bool {
        let conns = self.clients.consumers.borrow().producer_conns(group);
        if conns.is_empty() {
            return false;
        }
        let conn = &conns[pick % conns.len()];
        if conn.conn_shard == self.place.id {
            self.push_local(conn.conn_id, cmd)
        } else if conn.conn_shard < self.place.count {
            self.mesh.send_event(conn.conn_shard, super::mesh::ShardEvent::Push { conn_id: conn.conn_id, cmd });
            true
        } else {
            false
        }
    }

    /// Queues a server request on one of this shard's connections.
    pub(super) fn push_local(&self, conn_id: u64, mut cmd: RemotingCommand) -> bool {
        self.sign_as_broker(&mut cmd);
        match self.clients.conns.borrow().get(&conn_id) {
            // A full queue means the client is not reading: checked again later.
            Some(tx) => tx.try_send(cmd).is_ok(),
            None => false,
        }
    }

    /// Moves a half checked `transactionCheckMax` times to `TRANS_CHECK_MAX_TIME_TOPIC`:
    /// resolved first (op record, out of the table), then copied, so an END arriving
    /// meanwhile finds it ended and it is never both committed and discarded.
    async fn discard_half(self: &Rc<Self>, half_offset: u64, half: &Half, checks: u32) {
        if self.txns.table.borrow_mut().remove(half_offset).is_none() {
            return;
        }
        self.put_op(half_offset, Outcome::Discard);
        inc(&self.txns.counters.discards);
        let view = half.view();
        let props = half.properties();
        tracing::error!(
            shard = self.place.id,
            half_offset,
            phys = view.physical_offset(),
            checks,
            real_topic = txn::real_target(&props).map(|t| t.0).unwrap_or_default(),
            "half message checked too many times: moved to TRANS_CHECK_MAX_TIME_TOPIC"
        );
        if let Err((code, remark)) = self.ensure_topic(CHECK_MAX_TOPIC, txn::CHECK_MAX_TOPIC_QUEUE_NUMS).await {
            tracing::error!(shard = self.place.id, half_offset, code, remark, "TRANS_CHECK_MAX_TIME_TOPIC not created; the discarded half stays only in the half queue");
            return;
        }
        let header = SendMessageRequestHeaderV2 {
            a: "CID_RMQ_SYS_TRANS".into(),
            b: CHECK_MAX_TOPIC.into(),
            c: "TBW102".into(),
            d: txn::CHECK_MAX_TOPIC_QUEUE_NUMS as i32,
            e: 0,
            f: txn::reset_transaction_type(view.sys_flag(), txn::SYSFLAG_TRANSACTION_NOT_TYPE),
            g: view.born_timestamp_ms(),
            h: view.flag(),
            i: Some(txn::discarded_properties(&props, checks)),
            j: Some(view.reconsume_times()),
            k: false,
            l: None,
            m: false,
            n: None,
        };
        let send = RemotingCommand::request(rq::SEND_MESSAGE_V2)
            .with_header(&header)
            .with_ext(super::BORN_HOST_EXT, view.born_host().to_string())
            .with_body(view.body().to_vec());
        let r = self.call_internal(send).await;
        if r.code != rs::SUCCESS {
            tracing::error!(shard = self.place.id, half_offset, code = r.code, remark = ?r.remark, "discarded half not copied to TRANS_CHECK_MAX_TIME_TOPIC");
        }
    }

    /// Saves the table every `TXN_PERSIST_INTERVAL_MS` while it changes (its own task:
    /// the save waits for a flush, which must not hold up delay delivery).
    pub(super) async fn run_txn_persist(self: Rc<Self>, generation: u64) {
        while self.master_tasks_run(generation) {
            self.rt.sleep(Duration::from_millis(txn::TXN_PERSIST_INTERVAL_MS)).await;
            self.persist_txn_state().await;
        }
    }

    /// Saves the table if it changed, once the CommitLog it describes is durable.
    pub async fn persist_txn_state(&self) {
        let (encoded, ticket) = {
            let mut table = self.txns.table.borrow_mut();
            if !table.take_dirty() {
                return;
            }
            let snapshot = table.snapshot(self.store.max_offset(HALF_TOPIC, 0), self.store.max_offset(OP_TOPIC, 0));
            (snapshot.encode(), self.store.write_offset())
        };
        if let Err(e) = self.store.wait_durable(ticket).await {
            crate::fatal::fatal(&format!("store of shard {} failed: {e}", self.place.id));
        }
        if let Err(e) = self.txns.store.save(&encoded).await {
            tracing::warn!(shard = self.place.id, error = %e, "transaction state not saved; retried");
            self.txns.table.borrow_mut().mark_dirty();
        }
    }

    pub fn open_transactions(&self) -> usize {
        self.txns.table.borrow().len()
    }

    /// Up to `max` open halves (half queue offset, state), oldest first.
    pub fn open_halves(&self, max: usize) -> Vec<(u64, txn::Pending)> {
        self.txns.table.borrow().range_from(0, max)
    }

    pub fn txn_counters(&self) -> &TxnCounters {
        &self.txns.counters
    }
}

/// What resolving an open half did.
enum Resolve {
    /// Appended; the ticket to wait on under sync flush.
    Done(Option<u64>),
    /// The store refused: the half stays open.
    Refused(i32, String),
    /// Not open (resolved before, or never): the duplicate path.
    NotOpen,
}
