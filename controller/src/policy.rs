//! Master election policy: a port of Apache's `elect/impl/DefaultElectPolicy.java`.
//!
//! Owns: the choice of a new master among a broker set's replicas, given what the leader
//! knows about each one's liveness (`Liveness`).
//!
//! Invariants: pure and deterministic (ties are broken by the smaller broker id, where
//! Apache's `TreeSet` keeps whichever came first); only alive replicas are elected; the
//! SyncStateSet is tried first, every replica only when unclean election is enabled
//! (the caller passes `all_replicas = None` otherwise); a designated broker is elected
//! only if eligible, else nobody; an alive old master is kept unless another broker is
//! designated.

use std::collections::BTreeSet;

/// What a heartbeat told the leader about one replica (`BrokerLiveInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveInfo {
    pub epoch: i32,
    pub max_offset: i64,
    /// Lower is preferred (`brokerElectionPriority`, default `i32::MAX`).
    pub priority: i32,
}

/// The leader's view of which replicas are alive (`BrokerValidPredicate` +
/// `BrokerLiveInfoGetter`).
pub trait Liveness {
    fn live(&self, cluster: &str, name: &str, id: i64) -> Option<LiveInfo>;
}

/// WP1 has no heartbeats yet (they arrive in WP2): every registered replica counts as
/// alive, with no epoch or offset information.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllAlive;

impl Liveness for AllAlive {
    fn live(&self, _cluster: &str, _name: &str, _id: i64) -> Option<LiveInfo> {
        Some(LiveInfo { epoch: 0, max_offset: 0, priority: i32::MAX })
    }
}

/// `DefaultElectPolicy.elect`: the SyncStateSet first, then (unclean election) every
/// replica.
pub fn elect(
    cluster: &str,
    name: &str,
    sync_state_set: &BTreeSet<i64>,
    all_replicas: Option<&BTreeSet<i64>>,
    old_master: Option<i64>,
    prefer: Option<i64>,
    liveness: &dyn Liveness,
) -> Option<i64> {
    try_elect(cluster, name, sync_state_set, old_master, prefer, liveness)
        .or_else(|| all_replicas.and_then(|all| try_elect(cluster, name, all, old_master, prefer, liveness)))
}

fn try_elect(
    cluster: &str,
    name: &str,
    brokers: &BTreeSet<i64>,
    old_master: Option<i64>,
    prefer: Option<i64>,
    liveness: &dyn Liveness,
) -> Option<i64> {
    let alive: Vec<(i64, LiveInfo)> =
        brokers.iter().filter_map(|&id| liveness.live(cluster, name, id).map(|info| (id, info))).collect();
    if alive.is_empty() {
        return None;
    }
    let contains = |id: i64| alive.iter().any(|(a, _)| *a == id);
    if let Some(old) = old_master {
        if contains(old) && (prefer.is_none() || prefer == Some(old)) {
            return Some(old);
        }
    }
    if let Some(p) = prefer {
        return contains(p).then_some(p);
    }
    // Epoch desc, max offset desc, priority asc (Apache's comparator), then id asc.
    alive
        .iter()
        .min_by(|(ia, a), (ib, b)| {
            b.epoch.cmp(&a.epoch).then(b.max_offset.cmp(&a.max_offset)).then(a.priority.cmp(&b.priority)).then(ia.cmp(ib))
        })
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Table(BTreeMap<i64, LiveInfo>);

    impl Liveness for Table {
        fn live(&self, _c: &str, _n: &str, id: i64) -> Option<LiveInfo> {
            self.0.get(&id).copied()
        }
    }

    struct Case {
        sss: &'static [i64],
        all: Option<&'static [i64]>,
        old: Option<i64>,
        prefer: Option<i64>,
        /// (id, epoch, max offset, priority) of the alive replicas.
        alive: &'static [(i64, i32, i64, i32)],
    }

    fn check(case: Case, expected: Option<i64>) {
        let live = Table(case.alive.iter().map(|&(id, epoch, max_offset, priority)| (id, LiveInfo { epoch, max_offset, priority })).collect());
        let sss: BTreeSet<i64> = case.sss.iter().copied().collect();
        let all: Option<BTreeSet<i64>> = case.all.map(|a| a.iter().copied().collect());
        assert_eq!(elect("c", "b", &sss, all.as_ref(), case.old, case.prefer, &live), expected);
    }

    #[test]
    fn default_elect_policy_cases() {
        // Alive old master is kept.
        check(Case { sss: &[1, 2], all: None, old: Some(1), prefer: None, alive: &[(1, 1, 10, 0), (2, 1, 20, 0)] }, Some(1));
        // Dead old master: the largest epoch, then offset, wins.
        check(Case { sss: &[1, 2, 3], all: None, old: Some(1), prefer: None, alive: &[(2, 1, 20, 0), (3, 1, 30, 0)] }, Some(3));
        check(Case { sss: &[1, 2, 3], all: None, old: Some(1), prefer: None, alive: &[(2, 2, 20, 0), (3, 1, 30, 0)] }, Some(2));
        // Equal epoch and offset: lower priority value wins, then the smaller id.
        check(Case { sss: &[1, 2, 3], all: None, old: Some(1), prefer: None, alive: &[(2, 1, 30, 5), (3, 1, 30, 1)] }, Some(3));
        check(Case { sss: &[1, 2, 3], all: None, old: Some(1), prefer: None, alive: &[(2, 1, 30, 1), (3, 1, 30, 1)] }, Some(2));
        // Only the SyncStateSet is electable while unclean election is off.
        check(Case { sss: &[1], all: None, old: Some(1), prefer: None, alive: &[(2, 1, 99, 0)] }, None);
        // Unclean election on: every replica.
        check(Case { sss: &[1], all: Some(&[1, 2]), old: Some(1), prefer: None, alive: &[(2, 1, 99, 0)] }, Some(2));
        // A designated broker wins if eligible, even over an alive old master ...
        check(Case { sss: &[1, 2], all: None, old: Some(1), prefer: Some(2), alive: &[(1, 1, 10, 0), (2, 1, 5, 0)] }, Some(2));
        // ... and nobody is elected if it is not.
        check(Case { sss: &[1, 2], all: None, old: Some(1), prefer: Some(3), alive: &[(1, 1, 10, 0), (3, 1, 5, 0)] }, None);
        // Nobody alive.
        check(Case { sss: &[1, 2], all: Some(&[1, 2, 3]), old: Some(1), prefer: None, alive: &[] }, None);
    }
}
