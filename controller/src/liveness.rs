//! Broker liveness as this controller node saw it (docs/design/controller.md §2.5):
//! BROKER_HEARTBEAT (904) records, lease-grant rounds, and the pure rules of the
//! leader's automatic election (grace, master silence) and of `writableAfterMs`.
//!
//! Owns: `LivenessTable` (per (brokerName, brokerId): the monotonic arrival time of the
//! last heartbeat, its `heartbeatTimeoutMills`, epoch, offsets, priority — Apache's
//! `DefaultBrokerHeartbeatManager`), `LeaseRounds` (heartbeats waiting for the next
//! quorum leadership check), `should_elect` and `writable_after_ms`.
//!
//! Invariants:
//! - not replicated: every node records what reached it; only the leader acts on it;
//! - alive ⇔ `now − last ≤ timeout`, on the monotonic clock (`openraft::Instant`): a
//!   wall-clock jump changes nothing;
//! - bounded: at most `LIVENESS_ENTRIES_MAX` replicas and `LEASE_WAITERS_MAX` waiting
//!   heartbeats; beyond that a heartbeat is answered without being recorded / granted;
//! - a lease is granted only by a quorum check that began after the heartbeat arrived
//!   (a waiter joins `pending` before the round that answers it takes `pending`);
//! - the leader elects for a set only after leading for the set's heartbeat timeout
//!   (the grace) and after the master was silent for its timeout (§3.8's proof).

use crate::policy::{LiveInfo, Liveness};
use crate::state::{BROKER_SETS_MAX, REPLICAS_PER_SET_MAX};
use ringmq_client::remoting::controller::BrokerHeartbeatRequestHeader;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

/// Replicas the table remembers at most (every replica of every broker set).
pub const LIVENESS_ENTRIES_MAX: usize = BROKER_SETS_MAX * REPLICAS_PER_SET_MAX;
/// Apache's `controllerHeartBeatTimeoutMills` default, used when a heartbeat names none
/// and for a set this node has never heard from.
pub const HEARTBEAT_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Heartbeats waiting for a lease round at most.
pub const LEASE_WAITERS_MAX: usize = 4096;
/// One quorum leadership check per this interval at most (§2.5: one batched round per
/// Raft heartbeat tick).
pub const LEASE_ROUND_INTERVAL_MS: u64 = 100;
/// How often the leader looks for sets whose master went silent.
pub const ELECTION_SCAN_INTERVAL_MS: u64 = 100;
/// The ext field of a heartbeat answer granting the master lease (RingMQ).
pub const LEASE_GRANTED_EXT: &str = "leaseGranted";
/// The ext field naming when a designated master may take writes (RingMQ).
pub const WRITABLE_AFTER_EXT: &str = "writableAfterMs";

/// The last heartbeat of one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat<I> {
    pub cluster: String,
    pub address: String,
    /// When it arrived here (monotonic).
    pub last: I,
    pub timeout_ms: u64,
    pub epoch: i32,
    pub max_offset: i64,
    pub confirm_offset: i64,
    pub priority: i32,
}

/// Heartbeats by (brokerName, brokerId).
#[derive(Debug)]
pub struct LivenessTable<I> {
    beats: RefCell<BTreeMap<(String, i64), Beat<I>>>,
}

impl<I> Default for LivenessTable<I> {
    fn default() -> Self {
        Self { beats: RefCell::new(BTreeMap::new()) }
    }
}

impl<I: openraft::Instant> LivenessTable<I> {
    /// Records a heartbeat that arrived at `now`; `false` when the table is full and
    /// the replica is new to it.
    pub fn record(&self, h: &BrokerHeartbeatRequestHeader, id: i64, now: I) -> bool {
        let mut beats = self.beats.borrow_mut();
        let key = (h.broker_name.clone(), id);
        if !beats.contains_key(&key) && beats.len() >= LIVENESS_ENTRIES_MAX {
            return false;
        }
        let timeout_ms = h.heartbeat_timeout_mills.and_then(|t| u64::try_from(t).ok()).filter(|t| *t > 0);
        beats.insert(
            key,
            Beat {
                cluster: h.cluster_name.clone(),
                address: h.broker_addr.clone(),
                last: now,
                timeout_ms: timeout_ms.unwrap_or(HEARTBEAT_TIMEOUT_MS_DEFAULT),
                epoch: h.epoch.unwrap_or(0),
                max_offset: h.max_offset.unwrap_or(0),
                confirm_offset: h.confirm_offset.unwrap_or(0),
                priority: h.election_priority.unwrap_or(i32::MAX),
            },
        );
        true
    }

    pub fn beat(&self, name: &str, id: i64) -> Option<Beat<I>> {
        self.beats.borrow().get(&(name.to_string(), id)).cloned()
    }

    /// The longest heartbeat timeout a replica of the set announced (the grace a new
    /// leader waits), or the default.
    pub fn set_timeout_ms(&self, name: &str) -> u64 {
        let beats = self.beats.borrow();
        let of_set = beats.range((name.to_string(), i64::MIN)..=(name.to_string(), i64::MAX));
        of_set.map(|(_, b)| b.timeout_ms).max().unwrap_or(HEARTBEAT_TIMEOUT_MS_DEFAULT)
    }

    /// Whether the replica is alive at `now`, and what it last said.
    pub fn live_at(&self, name: &str, id: i64, now: I) -> Option<LiveInfo> {
        let beats = self.beats.borrow();
        let b = beats.get(&(name.to_string(), id))?;
        (now - b.last <= Duration::from_millis(b.timeout_ms)).then_some(LiveInfo {
            epoch: b.epoch,
            max_offset: b.max_offset,
            priority: b.priority,
        })
    }

    /// Forgets a set's replicas (CLEAN_BROKER_DATA of the whole set).
    pub fn forget_set(&self, name: &str) {
        self.beats.borrow_mut().retain(|(n, _), _| n != name);
    }

    pub fn len(&self) -> usize {
        self.beats.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.beats.borrow().is_empty()
    }
}

impl<I: openraft::Instant> Liveness for LivenessTable<I> {
    fn live(&self, _cluster: &str, name: &str, id: i64) -> Option<LiveInfo> {
        self.live_at(name, id, I::now())
    }
}

/// What the leader knows about one set when it considers an automatic election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetView {
    /// The master, if the set has one.
    pub master: Option<i64>,
    /// 0 = never elected (brokers elect themselves first, as in Apache).
    pub master_epoch: i32,
    /// How long ago the master's last heartbeat arrived here (`None`: never heard).
    pub master_silent_ms: Option<u64>,
    /// The master's (or the set's) heartbeat timeout.
    pub timeout_ms: u64,
    /// How long this node has led (this term).
    pub led_for_ms: u64,
    /// Whether some electable replica is alive.
    pub candidate_alive: bool,
}

/// Whether the leader proposes `ElectMaster` for the set now (§2.5): never within the
/// grace (leading for less than the timeout); with a master, only once it has been
/// silent for longer than its timeout (never heard while leading past the grace counts
/// as silent that long); without one (cleared by an earlier election), once some
/// candidate is alive again.
pub fn should_elect(v: SetView) -> bool {
    if v.led_for_ms < v.timeout_ms {
        return false;
    }
    match v.master {
        Some(_) => v.master_silent_ms.is_none_or(|s| s > v.timeout_ms),
        None => v.master_epoch > 0 && v.candidate_alive,
    }
}

/// `writableAfterMs` of a designated election (§2.5): how long the old master's lease
/// may still run on this node's clock; the full timeout when this leader has not heard
/// it since it took office (`silent_ms_in_office = None`).
pub fn writable_after_ms(silent_ms_in_office: Option<u64>, timeout_ms: u64) -> u64 {
    silent_ms_in_office.map_or(timeout_ms, |s| timeout_ms.saturating_sub(s))
}

/// Heartbeats waiting for the next quorum leadership check.
#[derive(Default)]
pub struct LeaseRounds {
    pending: RefCell<Vec<tokio::sync::oneshot::Sender<bool>>>,
    wake: tokio::sync::Notify,
}

impl LeaseRounds {
    /// Waits for the next round that begins after this call; `true` if it confirmed
    /// this node's leadership with a quorum.
    pub async fn wait_grant(&self) -> bool {
        let rx = {
            let mut pending = self.pending.borrow_mut();
            if pending.len() >= LEASE_WAITERS_MAX {
                return false;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            pending.push(tx);
            rx
        };
        self.wake.notify_one();
        rx.await.unwrap_or(false)
    }

    /// Waits until some heartbeat waits for a round.
    pub async fn wanted(&self) {
        if self.pending.borrow().is_empty() {
            self.wake.notified().await;
        }
    }

    /// Takes the waiters a round about to begin answers.
    pub fn take(&self) -> Vec<tokio::sync::oneshot::Sender<bool>> {
        std::mem::take(&mut *self.pending.borrow_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(master: Option<i64>, epoch: i32, silent: Option<u64>, led: u64, alive: bool) -> SetView {
        SetView { master, master_epoch: epoch, master_silent_ms: silent, timeout_ms: 1000, led_for_ms: led, candidate_alive: alive }
    }

    fn check(v: SetView, expected: bool) {
        assert_eq!(should_elect(v), expected, "{v:?}");
    }

    #[test]
    fn automatic_election_rules() {
        // Within the grace: never, however long the master is silent.
        check(view(Some(1), 1, Some(5000), 999, true), false);
        check(view(Some(1), 1, None, 0, true), false);
        // Past the grace: a silent master (longer than its timeout) is replaced ...
        check(view(Some(1), 1, Some(1001), 1000, true), true);
        check(view(Some(1), 1, None, 1000, true), true);
        // ... even when nobody can take over (the master is cleared, 2004).
        check(view(Some(1), 1, Some(1001), 5000, false), true);
        // A master heard within its timeout stays.
        check(view(Some(1), 1, Some(1000), 5000, true), false);
        check(view(Some(1), 1, Some(0), 5000, true), false);
        // No master: elect once a candidate is alive, but never a set that was never
        // elected (its brokers elect themselves).
        check(view(None, 2, None, 5000, true), true);
        check(view(None, 2, None, 5000, false), false);
        check(view(None, 0, None, 5000, true), false);
    }

    #[test]
    fn writable_after() {
        let cases = [(None, 1000, 1000), (Some(0), 1000, 1000), (Some(300), 1000, 700), (Some(1000), 1000, 0), (Some(5000), 1000, 0)];
        for (silent, timeout, want) in cases {
            assert_eq!(writable_after_ms(silent, timeout), want, "{silent:?} {timeout}");
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct T(u64);
    impl std::ops::Add<Duration> for T {
        type Output = T;
        fn add(self, d: Duration) -> T {
            T(self.0 + d.as_millis() as u64)
        }
    }
    impl std::ops::AddAssign<Duration> for T {
        fn add_assign(&mut self, d: Duration) {
            self.0 += d.as_millis() as u64;
        }
    }
    impl std::ops::Sub<Duration> for T {
        type Output = T;
        fn sub(self, d: Duration) -> T {
            T(self.0 - d.as_millis() as u64)
        }
    }
    impl std::ops::SubAssign<Duration> for T {
        fn sub_assign(&mut self, d: Duration) {
            self.0 -= d.as_millis() as u64;
        }
    }
    impl std::ops::Sub<T> for T {
        type Output = Duration;
        fn sub(self, o: T) -> Duration {
            Duration::from_millis(self.0.saturating_sub(o.0))
        }
    }
    impl openraft::Instant for T {
        fn now() -> T {
            T(0)
        }
    }

    fn hb(name: &str, timeout: Option<i64>) -> BrokerHeartbeatRequestHeader {
        BrokerHeartbeatRequestHeader {
            cluster_name: "c".into(),
            broker_addr: "10.0.0.1:10911".into(),
            broker_name: name.into(),
            broker_id: Some(1),
            epoch: Some(3),
            max_offset: Some(100),
            confirm_offset: None,
            heartbeat_timeout_mills: timeout,
            election_priority: None,
        }
    }

    #[test]
    fn alive_until_the_timeout_on_the_monotonic_clock() {
        let table = LivenessTable::<T>::default();
        assert!(table.record(&hb("b", Some(1000)), 1, T(10_000)));
        let live = |at: u64| table.live_at("b", 1, T(at)).is_some();
        assert!(live(10_000) && live(11_000), "alive up to and at the timeout");
        assert!(!live(11_001), "dead past it");
        assert_eq!(table.live_at("b", 1, T(10_500)), Some(LiveInfo { epoch: 3, max_offset: 100, priority: i32::MAX }));
        assert_eq!(table.set_timeout_ms("b"), 1000);
        assert_eq!(table.set_timeout_ms("other"), HEARTBEAT_TIMEOUT_MS_DEFAULT);
        // No timeout (or a nonsense one) in the heartbeat: Apache's default.
        table.record(&hb("c", Some(-5)), 1, T(0));
        assert_eq!(table.beat("c", 1).map(|b| b.timeout_ms), Some(HEARTBEAT_TIMEOUT_MS_DEFAULT));
        table.forget_set("b");
        assert_eq!(table.len(), 1);
    }
}
