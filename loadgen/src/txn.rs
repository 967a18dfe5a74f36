//! The transactional workload's pieces (`--transactional`): the message marker that says
//! whether a transaction is committed or rolled back, the producers' check listener, and
//! the commit-time table shared by the producer and consumer threads of one process.
//!
//! Commit-to-visible latency: a body carries the *half* send time (the first 8 bytes,
//! like every loadgen body), but the commit is issued only once the half is stored, so
//! its time travels out of band: the producer puts (UNIQ_KEY → µs) into `CommitTimes`
//! just before writing END_TRANSACTION, and the consumer takes the entry out when the
//! message arrives. The entry exists before the message can be visible (the broker
//! delivers nothing before END), so a committed message without one was delivered twice
//! or had no room in the table (`untracked` says which).
//!
//! Invariants: the table holds at most `COMMIT_TIMES_MAX` entries (an insert beyond is
//! refused and counted, never grows the map); an entry is removed when its message is
//! received; this is loadgen's table, not the broker's (a `Mutex` is fine here).

use crate::record::TxnStats;
use ringmq_client::transaction::{LocalTransactionState, TransactionListener};
use ringmq_client::{Message, MessageExt};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Commit times waiting for their message (about 2.6 s of backlog at 100 000 commits/s).
pub const COMMIT_TIMES_MAX: usize = 262_144;
/// User property on every transactional loadgen message: `commit` or `rollback`.
pub const OUTCOME_PROPERTY: &str = "loadgenTxn";
pub const OUTCOME_COMMIT: &str = "commit";
pub const OUTCOME_ROLLBACK: &str = "rollback";

/// Commit times (µs since the epoch) by message id, bounded.
#[derive(Debug)]
pub struct CommitTimes {
    map: Mutex<HashMap<String, u64>>,
    max: usize,
}

impl Default for CommitTimes {
    fn default() -> Self {
        Self::with_max(COMMIT_TIMES_MAX)
    }
}

impl CommitTimes {
    pub fn with_max(max: usize) -> Self {
        Self { map: Mutex::new(HashMap::new()), max }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `id`'s commit time; false (nothing stored) when the table is full or
    /// already holds `id`.
    pub fn insert(&self, id: &str, at_us: u64) -> bool {
        let mut m = self.lock();
        if m.len() >= self.max || m.contains_key(id) {
            return false;
        }
        m.insert(id.to_string(), at_us);
        true
    }

    /// Takes `id`'s commit time out of the table.
    pub fn take(&self, id: &str) -> Option<u64> {
        self.lock().remove(id)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

/// The outcome a message asks for (its `OUTCOME_PROPERTY`); None: not a transactional
/// loadgen message.
pub fn outcome_of(value: Option<&str>) -> Option<LocalTransactionState> {
    match value {
        Some(OUTCOME_COMMIT) => Some(LocalTransactionState::CommitMessage),
        Some(OUTCOME_ROLLBACK) => Some(LocalTransactionState::RollbackMessage),
        _ => None,
    }
}

/// Answers the broker's checks from the message's marker (an END that never arrived).
/// Loadgen ends every transaction itself, so checks are counted: more than none means
/// ENDs were lost or late.
pub struct Listener {
    pub checks: Arc<Mutex<TxnStats>>,
}

impl TransactionListener for Listener {
    fn execute_local_transaction(&self, msg: &Message, _arg: Option<&dyn Any>) -> LocalTransactionState {
        outcome_of(msg.properties.get(OUTCOME_PROPERTY)).unwrap_or(LocalTransactionState::Unknown)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checks.lock().unwrap_or_else(|e| e.into_inner()).checks_answered += 1;
        outcome_of(msg.property(OUTCOME_PROPERTY)).unwrap_or(LocalTransactionState::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_times_are_bounded_and_taken_once() {
        let t = CommitTimes::with_max(2);
        assert!(t.insert("a", 10));
        assert!(!t.insert("a", 11), "an id is recorded once");
        assert!(t.insert("b", 20));
        assert!(!t.insert("c", 30), "full: refused, not grown");
        assert_eq!(t.len(), 2);
        assert_eq!(t.take("a"), Some(10));
        assert_eq!(t.take("a"), None, "a second delivery finds nothing");
        assert!(t.insert("c", 30), "room again once taken");
        assert_eq!((t.take("b"), t.take("c"), t.len()), (Some(20), Some(30), 0));
        assert_eq!(CommitTimes::default().max, COMMIT_TIMES_MAX);
    }

    #[test]
    fn outcomes_follow_the_marker() {
        assert_eq!(outcome_of(Some("commit")), Some(LocalTransactionState::CommitMessage));
        assert_eq!(outcome_of(Some("rollback")), Some(LocalTransactionState::RollbackMessage));
        assert_eq!(outcome_of(Some("Commit")), None);
        assert_eq!(outcome_of(None), None);
        let l = Listener { checks: Arc::new(Mutex::new(TxnStats::new(0))) };
        let mut m = Message::new("t", "b");
        assert_eq!(l.execute_local_transaction(&m, None), LocalTransactionState::Unknown);
        m.set_property(OUTCOME_PROPERTY, OUTCOME_ROLLBACK).unwrap();
        assert_eq!(l.execute_local_transaction(&m, None), LocalTransactionState::RollbackMessage);
    }
}
