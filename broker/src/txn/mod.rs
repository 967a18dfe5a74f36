//! Transactional messages (RocketMQ's two-phase send): the rules and one shard's table
//! of open transactions. `shard/txn.rs` drives them (send, END_TRANSACTION, check-back,
//! rebuild at start-up); this module does no IO.
//!
//! A half message (property `TRAN_MSG=true` or sysFlag TRANSACTION_PREPARED) is stored
//! on the shard that owns the real queue the producer chose, in that shard's own
//! `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 (shard-local, invisible to clients) with
//! `REAL_TOPIC` / `REAL_QID`. Its identity is its position: the half queue offset
//! (`tranStateTableOffset`) and the physical offset (`commitLogOffset`); halves never
//! move (no put-back on check as Java does), so a check-back answer and the original
//! END_TRANSACTION name the same half.
//!
//! Resolving a half writes, in one synchronous step (no await between):
//! COMMIT — the real message (`preparedTransactionOffset` = the half's physical offset,
//! sysFlag COMMIT), then an op record; ROLLBACK — the op record only; DISCARD (checked
//! `transactionCheckMax` times) — the op record after a copy went to
//! `TRANS_CHECK_MAX_TIME_TOPIC`. Op records live in the shard's
//! `RMQ_SYS_TRANS_OP_HALF_TOPIC` queue 0: body = the half queue offset (Java's format),
//! tag `d`, key = the half queue offset (so a later duplicate finds the outcome through
//! the index), property `OP_OUTCOME_PROPERTY`.
//!
//! The table holds only open halves. Every half in the log is open (in the table) or
//! resolved (an op record, or — after a crash that tore the op off — a committed copy
//! found by `UNIQ_KEY` in the index): a half that is not in the table was resolved,
//! which is what makes END_TRANSACTION idempotent without remembering resolved ones.
//!
//! Crash safety: the table is saved as a snapshot (`transactionState`) that covers the
//! half and op queues up to `half_next` / `op_next`, written only once the CommitLog
//! prefix it describes is durable; at start-up the halves and ops past those points are
//! replayed from the ConsumeQueues (rebuilt from the CommitLog by store recovery).
//! Halves that come back open after a crash are `recovered`: before one is committed,
//! rolled back or checked, the index is asked whether a committed copy already exists.
//!
//! Invariants: at most `transaction_pending_max` open halves per shard (past it a half
//! is refused with SYSTEM_BUSY); a half is resolved at most once (the table entry is
//! removed in the same step as the records are appended); check counts only grow.

use ringmq_client::message::properties::{keys, Properties};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Where half messages wait (RocketMQ's name); one queue (0) per shard.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where op records (a half resolved) go (RocketMQ's name); one queue (0) per shard.
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where halves checked `transactionCheckMax` times are moved (RocketMQ's name).
pub const CHECK_MAX_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Queues of `TRANS_CHECK_MAX_TIME_TOPIC` (Java's `TCMT_QUEUE_NUMS`).
pub const CHECK_MAX_TOPIC_QUEUE_NUMS: u32 = 1;
/// Tag of an op record (Java's `TransactionalMessageUtil.REMOVE_TAG`).
pub const OP_REMOVE_TAG: &str = "d";
/// Property of an op record naming the outcome (`commit`, `rollback`, `discard`).
pub const OP_OUTCOME_PROPERTY: &str = "ringmqTxnOutcome";

/// RocketMQ's `transactionTimeOut` default.
pub const TRANSACTION_TIMEOUT_MS_DEFAULT: u64 = 6_000;
/// RocketMQ 4's `transactionCheckInterval` default (RocketMQ 5 uses 30 s).
pub const TRANSACTION_CHECK_INTERVAL_MS_DEFAULT: u64 = 60_000;
/// RocketMQ's `transactionCheckMax` default.
pub const TRANSACTION_CHECK_MAX_DEFAULT: u32 = 15;
/// Open transactions per shard by default (an entry costs about 64 bytes).
pub const TRANSACTION_PENDING_MAX_DEFAULT: usize = 262_144;
/// Half messages one check pass reads before it yields to requests.
pub const CHECK_PASS_BUDGET: usize = 1024;
/// How often a changed table is saved.
pub const TXN_PERSIST_INTERVAL_MS: u64 = 1_000;

/// RocketMQ's `MessageSysFlag` transaction bits.
pub const SYSFLAG_TRANSACTION_MASK: i32 = 0x0C;
pub const SYSFLAG_TRANSACTION_NOT_TYPE: i32 = 0x00;
pub const SYSFLAG_TRANSACTION_PREPARED_TYPE: i32 = 0x04;
pub const SYSFLAG_TRANSACTION_COMMIT_TYPE: i32 = 0x08;
pub const SYSFLAG_TRANSACTION_ROLLBACK_TYPE: i32 = 0x0C;

/// `sys_flag` with its transaction bits replaced by `kind` (Java's `resetTransactionValue`).
pub fn reset_transaction_type(sys_flag: i32, kind: i32) -> i32 {
    (sys_flag & !SYSFLAG_TRANSACTION_MASK) | kind
}

/// Is this send a half message? `TRAN_MSG` parsed as Java's `Boolean.parseBoolean`, or
/// the prepared sysFlag (which Java would store invisible to consumers forever).
pub fn is_half(sys_flag: i32, properties: &str) -> bool {
    sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_PREPARED_TYPE
        || ringmq_client::message::properties::find(properties, keys::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Rollback,
    /// Checked `transactionCheckMax` times without an answer.
    Discard,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Commit => "commit",
            Outcome::Rollback => "rollback",
            Outcome::Discard => "discard",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "commit" => Some(Outcome::Commit),
            "rollback" => Some(Outcome::Rollback),
            "discard" => Some(Outcome::Discard),
            _ => None,
        }
    }

    /// END_TRANSACTION's `commitOrRollback`: COMMIT, ROLLBACK, or `None` for UNKNOWN (0).
    pub fn from_end_code(code: i32) -> Result<Option<Self>, String> {
        match code {
            SYSFLAG_TRANSACTION_COMMIT_TYPE => Ok(Some(Outcome::Commit)),
            SYSFLAG_TRANSACTION_ROLLBACK_TYPE => Ok(Some(Outcome::Rollback)),
            SYSFLAG_TRANSACTION_NOT_TYPE => Ok(None),
            other => Err(format!("commitOrRollback {other} is not 8 (commit), 12 (rollback) or 0 (unknown)")),
        }
    }
}

/// The properties a half message is stored with: the producer's, plus where it goes
/// (`REAL_TOPIC`, `REAL_QID`) and Java's `__transactionId__` (= UNIQ_KEY).
pub fn half_properties(properties: &str, real_topic: &str, real_queue: i32) -> String {
    let mut p = Properties::decode_str(properties);
    if let Some(uniq) = p.get(keys::UNIQ_KEY).filter(|u| !u.is_empty()).map(str::to_string) {
        let _ = p.set(keys::TRANSACTION_ID, &uniq);
    }
    // Names and values are plain: set cannot fail for these.
    let _ = p.set(keys::REAL_TOPIC, real_topic);
    let _ = p.set(keys::REAL_QID, &real_queue.to_string());
    p.encode()
}

/// Where a half message goes: real topic and queue, from its stored properties.
pub fn real_target(properties: &str) -> Option<(String, i32)> {
    let p = Properties::decode_str(properties);
    let topic = p.get(keys::REAL_TOPIC)?.to_string();
    let queue: i32 = p.get(keys::REAL_QID)?.trim().parse().ok()?;
    (queue >= 0 && !topic.is_empty()).then_some((topic, queue))
}

/// The properties of the committed message: the half's, less `REAL_TOPIC`,
/// `REAL_QID` and `TRAN_MSG` (Java's `endMessageTransaction`); tags, keys, UNIQ_KEY
/// (so the msgId), PGROUP and user properties kept.
pub fn committed_properties(half_properties: &str) -> String {
    let mut p = Properties::decode_str(half_properties);
    p.remove(keys::REAL_TOPIC);
    p.remove(keys::REAL_QID);
    p.remove(keys::TRAN_MSG);
    p.encode()
}

/// The properties of a half as sent to its producer in a check-back: the stored ones
/// with `TRANSACTION_CHECK_TIMES` = `checks`.
pub fn check_properties(half_properties: &str, checks: u32) -> String {
    let mut p = Properties::decode_str(half_properties);
    let _ = p.set(keys::TRANSACTION_CHECK_TIMES, &checks.to_string());
    p.encode()
}

/// The properties of the copy moved to `TRANS_CHECK_MAX_TIME_TOPIC`: the half's (its
/// real topic and queue kept, for the operator) without `TRAN_MSG`, so the copy is an
/// ordinary message there.
pub fn discarded_properties(half_properties: &str, checks: u32) -> String {
    let mut p = Properties::decode_str(half_properties);
    p.remove(keys::TRAN_MSG);
    let _ = p.set(keys::TRANSACTION_CHECK_TIMES, &checks.to_string());
    p.encode()
}

/// The properties of an op record for the half at `half_offset`.
pub fn op_properties(half_offset: u64, outcome: Outcome) -> String {
    let mut p = Properties::new();
    let _ = p.set(keys::TAGS, OP_REMOVE_TAG);
    let _ = p.set(keys::KEYS, &op_key(half_offset));
    let _ = p.set(OP_OUTCOME_PROPERTY, outcome.as_str());
    p.encode()
}

/// The index key of the op record for the half at `half_offset` (looked up as
/// `RMQ_SYS_TRANS_OP_HALF_TOPIC#<key>` in the shard's own index).
pub fn op_key(half_offset: u64) -> String {
    half_offset.to_string()
}

/// The op record body: the half queue offset in decimal (Java's op message body).
pub fn op_body(half_offset: u64) -> Vec<u8> {
    half_offset.to_string().into_bytes()
}

/// The half an op record resolves, and how (an op without the outcome property — never
/// written by RingMQ — counts as a rollback: it says "removed", not "delivered").
pub fn parse_op(body: &[u8], properties: &str) -> Option<(u64, Outcome)> {
    let offset: u64 = std::str::from_utf8(body).ok()?.trim().split(',').next()?.trim().parse().ok()?;
    let outcome = ringmq_client::message::properties::find(properties, OP_OUTCOME_PROPERTY).and_then(Outcome::parse).unwrap_or(Outcome::Rollback);
    Some((offset, outcome))
}

/// How long after its birth a half is first checked: `CHECK_IMMUNITY_TIME_IN_SECONDS`
/// (seconds; unparsable means `transactionTimeOut`, as Java's `getImmunityTime`), else
/// `transactionTimeOut`.
pub fn immunity_ms(properties: &str, transaction_timeout_ms: u64) -> u64 {
    match ringmq_client::message::properties::find(properties, keys::CHECK_IMMUNITY_TIME_IN_SECONDS) {
        Some(text) => match text.trim().parse::<i64>() {
            Ok(secs) if secs >= 0 => (secs as u64).saturating_mul(1000),
            _ => transaction_timeout_ms,
        },
        None => transaction_timeout_ms,
    }
}

/// Java's `rejectCommitOrRollback`: a producer's own END_TRANSACTION (not a check
/// answer) for a half with a custom immunity time, arriving after that time, is refused
/// (ILLEGAL_OPERATION) — the half waits for its check instead.
pub fn reject_late_end(from_check: bool, properties: &str, born_ms: i64, now_ms: i64, transaction_timeout_ms: u64) -> bool {
    if from_check || ringmq_client::message::properties::find(properties, keys::CHECK_IMMUNITY_TIME_IN_SECONDS).is_none_or(str::is_empty) {
        return false;
    }
    now_ms.saturating_sub(born_ms) > immunity_ms(properties, transaction_timeout_ms) as i64
}

/// What a check pass does with one open half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStep {
    /// Too young: the first check is due at this time (ms).
    Wait { due_ms: i64 },
    /// Ask the producer (this is check number `n`).
    Check { n: u32 },
    /// Checked `transactionCheckMax` times: move to `TRANS_CHECK_MAX_TIME_TOPIC`.
    Discard,
}

/// Java's check decision: discard once checked `check_max` times; wait while younger
/// than its immunity time (a born time in the future — a clock step — counts as due,
/// as Java's `valueOfCurrentMinusBorn <= -1`); otherwise check.
pub fn check_step(checks: u32, born_ms: i64, immunity_ms: u64, now_ms: i64, check_max: u32) -> CheckStep {
    if checks >= check_max {
        return CheckStep::Discard;
    }
    let age_ms = now_ms.saturating_sub(born_ms);
    if age_ms >= 0 && age_ms <= immunity_ms as i64 {
        return CheckStep::Wait { due_ms: born_ms.saturating_add(immunity_ms as i64).saturating_add(1) };
    }
    CheckStep::Check { n: checks + 1 }
}

/// One open half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub phys: u64,
    pub size: u32,
    /// Check-backs sent so far.
    pub checks: u32,
    /// When its first check is due (ms); `None` until known (read from the record).
    pub first_check_ms: Option<i64>,
    /// Came back open after a crash: a committed copy may exist (ask the index first).
    pub recovered: bool,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TableError {
    #[error("{open} transactions are open on this shard (transaction_pending_max {max}): commit or roll back first")]
    Full { open: usize, max: usize },
    #[error("half message at queue offset {0} is already open")]
    Duplicate(u64),
}

/// One shard's open transactions, by half queue offset.
#[derive(Debug)]
pub struct TxnTable {
    open: BTreeMap<u64, Pending>,
    max: usize,
    dirty: bool,
}

impl TxnTable {
    pub fn new(max: usize) -> Self {
        assert!(max > 0, "transaction_pending_max is validated positive");
        Self { open: BTreeMap::new(), max, dirty: false }
    }

    /// Whether one more half fits.
    pub fn check_room(&self) -> Result<(), TableError> {
        if self.open.len() >= self.max {
            return Err(TableError::Full { open: self.open.len(), max: self.max });
        }
        Ok(())
    }

    pub fn insert(&mut self, half_offset: u64, pending: Pending) -> Result<(), TableError> {
        if self.open.contains_key(&half_offset) {
            return Err(TableError::Duplicate(half_offset));
        }
        self.open.insert(half_offset, pending);
        self.dirty = true;
        Ok(())
    }

    pub fn get(&self, half_offset: u64) -> Option<Pending> {
        self.open.get(&half_offset).copied()
    }

    /// Resolves a half: it leaves the table (the caller appends its records in the same
    /// step).
    pub fn remove(&mut self, half_offset: u64) -> Option<Pending> {
        let removed = self.open.remove(&half_offset);
        self.dirty |= removed.is_some();
        removed
    }

    pub fn update(&mut self, half_offset: u64, f: impl FnOnce(&mut Pending)) {
        if let Some(p) = self.open.get_mut(&half_offset) {
            let before = *p;
            f(p);
            assert!(p.checks >= before.checks, "check counts only grow");
            assert_eq!((p.phys, p.size), (before.phys, before.size), "a half never moves");
            self.dirty |= *p != before;
        }
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Up to `max` open halves from queue offset `from` on, in order.
    pub fn range_from(&self, from: u64, max: usize) -> Vec<(u64, Pending)> {
        self.open.range(from..).take(max).map(|(k, v)| (*k, *v)).collect()
    }

    /// Drops halves below `min_offset` (their records were deleted by retention).
    pub fn expire_below(&mut self, min_offset: u64) -> usize {
        let keep = self.open.split_off(&min_offset);
        let dropped = std::mem::replace(&mut self.open, keep).len();
        self.dirty |= dropped > 0;
        dropped
    }

    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// The snapshot of this table, covering the half and op queues below the given
    /// offsets.
    pub fn snapshot(&self, half_next: u64, op_next: u64) -> TxnSnapshot {
        TxnSnapshot {
            half_next,
            op_next,
            open: self.open.iter().map(|(&offset, p)| OpenHalf { offset, phys: p.phys, size: p.size, checks: p.checks }).collect(),
        }
    }

    /// The table a snapshot describes; every half in it is `recovered`.
    pub fn from_snapshot(snapshot: &TxnSnapshot, max: usize) -> Self {
        let mut table = Self::new(max);
        for h in &snapshot.open {
            table.open.insert(h.offset, Pending { phys: h.phys, size: h.size, checks: h.checks, first_check_ms: None, recovered: true });
        }
        table
    }
}

/// An open half as the snapshot records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenHalf {
    pub offset: u64,
    pub phys: u64,
    pub size: u32,
    pub checks: u32,
}

/// A shard's saved transaction state (`shard-<i>/config/transactionState`): the open
/// halves as of the half queue below `half_next` and the op queue below `op_next`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnSnapshot {
    pub half_next: u64,
    pub op_next: u64,
    pub open: Vec<OpenHalf>,
}

impl TxnSnapshot {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("numbers encode")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("transaction state does not decode: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> String {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.set(k, v).unwrap();
        }
        p.encode()
    }

    fn check_is_half(sys_flag: i32, pairs: &[(&str, &str)], expected: bool) {
        assert_eq!(is_half(sys_flag, &props(pairs)), expected, "sysFlag {sys_flag} {pairs:?}");
    }

    #[test]
    fn half_messages_are_recognised_as_java_does() {
        check_is_half(0, &[], false);
        check_is_half(0, &[("TRAN_MSG", "true")], true);
        check_is_half(0, &[("TRAN_MSG", "TRUE")], true);
        check_is_half(0, &[("TRAN_MSG", "false")], false);
        check_is_half(0, &[("TRAN_MSG", "yes")], false);
        check_is_half(0x04, &[], true);
        check_is_half(0x04 | 0x01, &[], true);
        check_is_half(0x08, &[], false);
        check_is_half(0x0C, &[], false);
        check_is_half(0x02, &[("TAGS", "a")], false);
    }

    fn check_props(got: String, expected: &[(&str, &str)]) {
        let got = Properties::decode_str(&got);
        let mut got: Vec<(String, String)> = got.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut want: Vec<(String, String)> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn properties_through_a_transaction() {
        let sent = props(&[("TRAN_MSG", "true"), ("PGROUP", "pg"), ("UNIQ_KEY", "U1"), ("TAGS", "t"), ("KEYS", "k1 k2"), ("x", "y")]);
        let half = half_properties(&sent, "T", 3);
        check_props(
            half.clone(),
            &[("TRAN_MSG", "true"), ("PGROUP", "pg"), ("UNIQ_KEY", "U1"), ("TAGS", "t"), ("KEYS", "k1 k2"), ("x", "y"), ("REAL_TOPIC", "T"), ("REAL_QID", "3"), ("__transactionId__", "U1")],
        );
        assert_eq!(real_target(&half), Some(("T".to_string(), 3)));
        check_props(committed_properties(&half), &[("PGROUP", "pg"), ("UNIQ_KEY", "U1"), ("TAGS", "t"), ("KEYS", "k1 k2"), ("x", "y"), ("__transactionId__", "U1")]);
        let checked = check_properties(&half, 2);
        assert_eq!(Properties::decode_str(&checked).get("TRANSACTION_CHECK_TIMES"), Some("2"));
        let discarded = discarded_properties(&half, 15);
        let d = Properties::decode_str(&discarded);
        assert_eq!((d.get("TRAN_MSG"), d.get("REAL_TOPIC"), d.get("TRANSACTION_CHECK_TIMES")), (None, Some("T"), Some("15")));
        // No UNIQ_KEY: no transaction id.
        check_props(half_properties("", "T", 0), &[("REAL_TOPIC", "T"), ("REAL_QID", "0")]);
        assert_eq!(real_target(&props(&[("REAL_TOPIC", "T"), ("REAL_QID", "-1")])), None);
        assert_eq!(real_target(&props(&[("REAL_QID", "1")])), None);
        assert_eq!(real_target(&props(&[("REAL_TOPIC", "T"), ("REAL_QID", "x")])), None);
    }

    #[test]
    fn op_records_round_trip_and_tolerate_java_bodies() {
        for (offset, outcome) in [(0, Outcome::Commit), (7, Outcome::Rollback), (u64::MAX, Outcome::Discard)] {
            assert_eq!(parse_op(&op_body(offset), &op_properties(offset, outcome)), Some((offset, outcome)));
        }
        // Java 5 batches offsets in one op body; an op without the outcome is a removal.
        assert_eq!(parse_op(b"12,13,14", ""), Some((12, Outcome::Rollback)));
        assert_eq!(parse_op(b"x", ""), None);
        assert_eq!(parse_op(&[0xff, 0xfe], ""), None);
        assert_eq!(parse_op(b"", ""), None);
        let p = Properties::decode_str(&op_properties(5, Outcome::Commit));
        assert_eq!((p.get("TAGS"), p.get("KEYS")), (Some("d"), Some("5")));
    }

    #[test]
    fn end_codes() {
        assert_eq!(Outcome::from_end_code(8), Ok(Some(Outcome::Commit)));
        assert_eq!(Outcome::from_end_code(12), Ok(Some(Outcome::Rollback)));
        assert_eq!(Outcome::from_end_code(0), Ok(None));
        assert!(Outcome::from_end_code(4).unwrap_err().contains("commitOrRollback 4"));
        assert_eq!(reset_transaction_type(0x04 | 0x01, SYSFLAG_TRANSACTION_COMMIT_TYPE), 0x09);
        assert_eq!(reset_transaction_type(0x0C, SYSFLAG_TRANSACTION_NOT_TYPE), 0);
    }

    fn check_immunity(pairs: &[(&str, &str)], timeout_ms: u64, expected_ms: u64) {
        assert_eq!(immunity_ms(&props(pairs), timeout_ms), expected_ms, "{pairs:?}");
    }

    #[test]
    fn immunity_times_as_java_get_immunity_time() {
        check_immunity(&[], 6_000, 6_000);
        check_immunity(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "30")], 6_000, 30_000);
        check_immunity(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "0")], 6_000, 0);
        check_immunity(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "x")], 6_000, 6_000);
        check_immunity(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "-1")], 6_000, 6_000);
        check_immunity(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "99999999999999999")], 1, u64::MAX);
        let p = props(&[("CHECK_IMMUNITY_TIME_IN_SECONDS", "10")]);
        // (from_check, props, born, now) -> rejected
        for (from_check, properties, born, now, want) in [
            (false, p.as_str(), 0, 10_000, false),
            (false, p.as_str(), 0, 10_001, true),
            (true, p.as_str(), 0, 99_000, false),
            (false, "", 0, 99_000, false),
        ] {
            assert_eq!(reject_late_end(from_check, properties, born, now, 6_000), want, "{from_check} {properties:?} {born} {now}");
        }
    }

    fn check_step_case(checks: u32, born: i64, now: i64, expected: CheckStep) {
        assert_eq!(check_step(checks, born, 6_000, now, 15), expected, "checks {checks} born {born} now {now}");
    }

    #[test]
    fn check_decisions_follow_java() {
        check_step_case(0, 1_000, 1_000, CheckStep::Wait { due_ms: 7_001 });
        check_step_case(0, 1_000, 7_000, CheckStep::Wait { due_ms: 7_001 });
        check_step_case(0, 1_000, 7_001, CheckStep::Check { n: 1 });
        check_step_case(14, 1_000, 99_000, CheckStep::Check { n: 15 });
        check_step_case(15, 1_000, 99_000, CheckStep::Discard);
        check_step_case(15, 1_000, 1_000, CheckStep::Discard);
        // Born in the future (the clock stepped back): checked, as Java.
        check_step_case(0, 10_000, 1_000, CheckStep::Check { n: 1 });
        check_step_case(0, i64::MAX, i64::MIN, CheckStep::Check { n: 1 });
    }

    fn pending(phys: u64) -> Pending {
        Pending { phys, size: 100, checks: 0, first_check_ms: None, recovered: false }
    }

    #[test]
    fn the_table_is_bounded_and_resolves_once() {
        let mut t = TxnTable::new(2);
        assert!(!t.take_dirty());
        t.insert(0, pending(10)).unwrap();
        assert_eq!(t.insert(0, pending(10)), Err(TableError::Duplicate(0)));
        t.insert(1, pending(20)).unwrap();
        assert_eq!(t.check_room(), Err(TableError::Full { open: 2, max: 2 }));
        assert!(t.take_dirty());
        assert_eq!(t.remove(0).map(|p| p.phys), Some(10));
        assert_eq!(t.remove(0), None, "a half is resolved at most once");
        assert!(t.take_dirty());
        assert_eq!(t.remove(7), None);
        assert!(!t.take_dirty(), "removing nothing changes nothing");
        t.check_room().unwrap();
        t.update(1, |p| p.checks = 3);
        assert_eq!(t.get(1).unwrap().checks, 3);
        assert!(t.take_dirty());
        t.insert(5, pending(50)).unwrap();
        assert_eq!(t.range_from(2, 10).iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![5]);
        assert_eq!(t.expire_below(5), 1);
        assert_eq!(t.len(), 1);
    }

    #[test]
    #[should_panic(expected = "check counts only grow")]
    fn check_counts_never_shrink() {
        let mut t = TxnTable::new(4);
        t.insert(0, Pending { checks: 2, ..pending(1) }).unwrap();
        t.update(0, |p| p.checks = 1);
    }

    #[test]
    fn snapshots_round_trip_and_mark_halves_recovered() {
        let mut t = TxnTable::new(8);
        t.insert(3, Pending { checks: 2, first_check_ms: Some(5), ..pending(30) }).unwrap();
        t.insert(9, pending(90)).unwrap();
        let s = t.snapshot(10, 4);
        let back = TxnSnapshot::decode(&s.encode()).unwrap();
        assert_eq!(back, s);
        let r = TxnTable::from_snapshot(&back, 8);
        assert_eq!(r.get(3), Some(Pending { phys: 30, size: 100, checks: 2, first_check_ms: None, recovered: true }));
        assert_eq!(r.len(), 2);
        assert!(TxnSnapshot::decode(b"{").is_err());
    }
}
