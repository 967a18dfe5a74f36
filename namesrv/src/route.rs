//! `RouteInfoManager`: the NameServer's whole state (brokers, clusters, topic queues,
//! KV config). Pure state: no IO, no clock; every time is a `now_ms` parameter, so the
//! same calls give the same state.
//!
//! Semantics follow Apache RocketMQ 4.9's `RouteInfoManager` and `KVConfigManager`, with
//! the table maps ordered (BTreeMap) so answers are deterministic; from RocketMQ 5, each
//! `BrokerData` carries the `enableActingMaster` flag of its latest registration.
//!
//! Invariants (checked after every step by the unit tests' `check` helper):
//! - I1 (one place per address): an address is live (`broker_live`) iff it appears in
//!   exactly one `BrokerData`, under the broker name and id its live entry records;
//! - I2 (clusters are derived): `cluster_addr_table` is exactly `broker_addr_table`
//!   grouped by `BrokerData::cluster`; no empty set, no empty `BrokerData`;
//! - I3 (no dangling queues): every broker name in `topic_queue_table` has a
//!   `BrokerData`; no topic has an empty map;
//! - I4: `filter_server_table` keys are live addresses; `kv` has no empty namespace and
//!   `kv_entries` is the number of keys in it;
//! - bounds: at most `RouteLimits::brokers_max` live addresses, `topics_max` topics and
//!   `kv_entries_max` KV entries; a request that would pass one changes nothing.

use ringmq_client::remoting::route::{PERM_READ, PERM_WRITE};
use ringmq_client::remoting::route::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper, TopicRouteData, MASTER_ID,
};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Brokers not heard from for longer than this are removed (DESIGN.md §5).
pub const BROKER_EXPIRY_MS_DEFAULT: u64 = 120_000;
/// Live broker addresses the registry holds at most.
pub const BROKERS_MAX_DEFAULT: usize = 4096;
/// Topics the registry holds at most.
pub const TOPICS_MAX_DEFAULT: usize = 1_000_000;
/// KV config entries (over all namespaces) the registry holds at most.
pub const KV_ENTRIES_MAX_DEFAULT: usize = 100_000;

/// Bounds on the registry's size, so that no client can grow it without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteLimits {
    pub brokers_max: usize,
    pub topics_max: usize,
    pub kv_entries_max: usize,
}

impl Default for RouteLimits {
    fn default() -> Self {
        Self {
            brokers_max: BROKERS_MAX_DEFAULT,
            topics_max: TOPICS_MAX_DEFAULT,
            kv_entries_max: KV_ENTRIES_MAX_DEFAULT,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    #[error("{max} brokers are registered already; refusing {addr}")]
    BrokersFull { addr: String, max: usize },
    #[error("registering broker {addr} would exceed the maximum of {max} topics")]
    TopicsFull { addr: String, max: usize },
    #[error("the KV config holds its maximum of {max} entries")]
    KvFull { max: usize },
}

/// One REGISTER_BROKER request, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub cluster_name: String,
    pub broker_addr: String,
    pub broker_name: String,
    /// 0 = master.
    pub broker_id: i64,
    pub ha_server_addr: String,
    pub topic_config: TopicConfigSerializeWrapper,
    pub filter_server_list: Vec<String>,
    /// RocketMQ 5's `enableActingMaster` header (absent, from older brokers: false);
    /// the broker name's `BrokerData` takes the latest registration's value.
    pub enable_acting_master: bool,
}

/// What REGISTER_BROKER answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    /// For a slave whose master is live: the master's HA address and address.
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
    /// The registration was the address's first, or carried a data version other than
    /// the one last seen from it (for a master, its topic queues were then updated).
    pub topic_config_changed: bool,
}

/// A broker address removed by `scan_expired`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBroker {
    pub addr: String,
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub last_update_ms: u64,
}

/// Live-table entry: when an address was last heard from, and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BrokerLive {
    last_update_ms: u64,
    data_version: DataVersion,
    ha_server_addr: String,
    cluster_name: String,
    broker_name: String,
    broker_id: i64,
}

#[derive(Debug, Clone)]
pub struct RouteInfoManager {
    broker_expiry_ms: u64,
    limits: RouteLimits,
    /// topic -> broker name -> queues.
    topic_queue_table: BTreeMap<String, BTreeMap<String, QueueData>>,
    /// broker name -> cluster and addresses by id.
    broker_addr_table: BTreeMap<String, BrokerData>,
    /// cluster -> broker names (derived from `broker_addr_table`, I2).
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    /// broker address -> liveness.
    broker_live: BTreeMap<String, BrokerLive>,
    /// broker address -> its filter servers.
    filter_server_table: BTreeMap<String, Vec<String>>,
    /// namespace -> key -> value.
    kv: BTreeMap<String, BTreeMap<String, String>>,
    kv_entries: usize,
}

impl Default for RouteInfoManager {
    fn default() -> Self {
        Self::new(BROKER_EXPIRY_MS_DEFAULT, RouteLimits::default())
    }
}

impl RouteInfoManager {
    pub fn new(broker_expiry_ms: u64, limits: RouteLimits) -> Self {
        Self {
            broker_expiry_ms,
            limits,
            topic_queue_table: BTreeMap::new(),
            broker_addr_table: BTreeMap::new(),
            cluster_addr_table: BTreeMap::new(),
            broker_live: BTreeMap::new(),
            filter_server_table: BTreeMap::new(),
            kv: BTreeMap::new(),
            kv_entries: 0,
        }
    }

    pub fn broker_expiry_ms(&self) -> u64 {
        self.broker_expiry_ms
    }

    /// Registers (or refreshes) one broker address. A master's topic configs become the
    /// brokerName's queue data when its data version changed or it registered first.
    ///
    /// Address moves follow RocketMQ: the same address under another id of the same
    /// broker name moves (slave promoted to master); an address registered under another
    /// broker name is removed from there first; an address displaced from its id by a
    /// different one is dropped from the live table.
    pub fn register_broker(&mut self, reg: BrokerRegistration, now_ms: u64) -> Result<RegisterResult, RouteError> {
        let addr = reg.broker_addr.clone();
        if !self.broker_live.contains_key(&addr) && self.broker_live.len() >= self.limits.brokers_max {
            return Err(RouteError::BrokersFull { addr, max: self.limits.brokers_max });
        }
        if reg.broker_id == MASTER_ID {
            // Conservative: counts every topic not in the table, even if this
            // registration turns out not to change anything.
            let new_topics = reg
                .topic_config
                .topic_config_table
                .iter()
                .map(|(key, tc)| topic_name_of(key, &tc.topic_name))
                .filter(|t| !t.is_empty() && !self.topic_queue_table.contains_key(*t))
                .collect::<BTreeSet<_>>()
                .len();
            if self.topic_queue_table.len() + new_topics > self.limits.topics_max {
                return Err(RouteError::TopicsFull { addr, max: self.limits.topics_max });
            }
        }

        if self.broker_live.get(&addr).is_some_and(|l| l.broker_name != reg.broker_name) {
            self.remove_addr(&addr);
        }

        let mut register_first = false;
        let broker_data = self.broker_addr_table.entry(reg.broker_name.clone()).or_insert_with(|| {
            register_first = true;
            BrokerData { broker_name: reg.broker_name.clone(), ..BrokerData::default() }
        });
        // The same address under another id: a slave switched to master (or back).
        broker_data.broker_addrs.retain(|id, a| *a != addr || *id == reg.broker_id);
        // Apache's stale-master fence (`RouteInfoManager.java:275-291`): in controller
        // mode a broker registers with `stateVersion` = its master epoch, so a master that
        // has not learnt of a newer one cannot take back id 0 from the elected master.
        // Ignored, answered with an empty result, and its address leaves the live table.
        let fenced_by = broker_data
            .broker_addrs
            .get(&reg.broker_id)
            .filter(|old| **old != addr)
            .and_then(|old| self.broker_live.get(old).map(|live| (old.clone(), live.data_version.state_version)))
            .filter(|(_, old_state)| *old_state > reg.topic_config.data_version.state_version);
        if let Some((old, old_state)) = fenced_by {
            tracing::warn!(
                broker = %reg.broker_name, id = reg.broker_id, %addr, state_version = reg.topic_config.data_version.state_version, holder = %old, holder_state_version = old_state,
                "registration conflicts with the live broker holding this id at a higher stateVersion: ignored"
            );
            self.broker_live.remove(&addr);
            self.filter_server_table.remove(&addr);
            return Ok(RegisterResult::default());
        }
        let old_cluster = std::mem::replace(&mut broker_data.cluster, reg.cluster_name.clone());
        broker_data.enable_acting_master = reg.enable_acting_master;
        let displaced = broker_data.broker_addrs.insert(reg.broker_id, addr.clone());
        register_first |= displaced.is_none();
        if old_cluster != reg.cluster_name {
            if let Some(names) = self.cluster_addr_table.get_mut(&old_cluster) {
                names.remove(&reg.broker_name);
                if names.is_empty() {
                    self.cluster_addr_table.remove(&old_cluster);
                }
            }
        }
        self.cluster_addr_table.entry(reg.cluster_name.clone()).or_default().insert(reg.broker_name.clone());
        if let Some(other) = displaced.filter(|a| *a != addr) {
            self.broker_live.remove(&other);
            self.filter_server_table.remove(&other);
        }

        let changed = !self.broker_live.get(&addr).is_some_and(|l| l.data_version == reg.topic_config.data_version);
        if reg.broker_id == MASTER_ID && (changed || register_first) {
            for (key, tc) in &reg.topic_config.topic_config_table {
                let topic = topic_name_of(key, &tc.topic_name);
                if topic.is_empty() {
                    continue;
                }
                let qd = QueueData {
                    broker_name: reg.broker_name.clone(),
                    perm: tc.perm,
                    read_queue_nums: tc.read_queue_nums,
                    topic_sys_flag: tc.topic_sys_flag,
                    write_queue_nums: tc.write_queue_nums,
                };
                self.topic_queue_table.entry(topic.to_string()).or_default().insert(reg.broker_name.clone(), qd);
            }
        }

        self.broker_live.insert(
            addr.clone(),
            BrokerLive {
                last_update_ms: now_ms,
                data_version: reg.topic_config.data_version,
                ha_server_addr: reg.ha_server_addr,
                cluster_name: reg.cluster_name,
                broker_name: reg.broker_name.clone(),
                broker_id: reg.broker_id,
            },
        );
        if reg.filter_server_list.is_empty() {
            self.filter_server_table.remove(&addr);
        } else {
            self.filter_server_table.insert(addr, reg.filter_server_list);
        }

        let mut result =
            RegisterResult { topic_config_changed: changed || register_first, ..RegisterResult::default() };
        if reg.broker_id != MASTER_ID {
            let master = self.broker_addr_table.get(&reg.broker_name).and_then(|bd| bd.master_addr());
            if let Some((master, live)) = master.and_then(|m| self.broker_live.get(m).map(|l| (m, l))) {
                result.ha_server_addr = Some(live.ha_server_addr.clone());
                result.master_addr = Some(master.to_string());
            }
        }
        Ok(result)
    }

    /// WIPE_WRITE_PERM_OF_BROKER (`wipe`) / ADD_WRITE_PERM_OF_BROKER: clears the write bit
    /// of, or sets read+write on, every queue set `broker_name` serves (Java's
    /// `operateWritePermOfBroker`). Kept until the broker registers a changed topic
    /// table (as in Java: an unchanged registration does not rewrite queue data), so an
    /// operator can drain a broker before taking it down. Returns the topics touched.
    pub fn operate_write_perm(&mut self, broker_name: &str, wipe: bool) -> usize {
        let mut touched = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(qd) = queues.get_mut(broker_name) {
                qd.perm = if wipe { qd.perm & !PERM_WRITE } else { PERM_READ | PERM_WRITE };
                touched += 1;
            }
        }
        touched
    }

    /// Removes a broker address (UNREGISTER_BROKER). Only an address registered under
    /// `broker_name` is removed (Java removes by id, which after a master switch could
    /// remove the new master); `cluster_name` and `broker_id` are informational.
    /// Returns whether anything was removed.
    pub fn unregister_broker(
        &mut self,
        cluster_name: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> bool {
        let _ = (cluster_name, broker_id);
        if self.broker_live.get(broker_addr).is_some_and(|l| l.broker_name == broker_name) {
            self.remove_addr(broker_addr);
            true
        } else {
            false
        }
    }

    /// Removes every address not heard from for more than `broker_expiry_ms`
    /// (exactly `broker_expiry_ms` is still live) and returns them.
    pub fn scan_expired(&mut self, now_ms: u64) -> Vec<ExpiredBroker> {
        let expired: Vec<ExpiredBroker> = self
            .broker_live
            .iter()
            .filter(|(_, l)| now_ms.saturating_sub(l.last_update_ms) > self.broker_expiry_ms)
            .map(|(addr, l)| ExpiredBroker {
                addr: addr.clone(),
                cluster_name: l.cluster_name.clone(),
                broker_name: l.broker_name.clone(),
                broker_id: l.broker_id,
                last_update_ms: l.last_update_ms,
            })
            .collect();
        for e in &expired {
            self.remove_addr(&e.addr);
        }
        expired
    }

    /// Removes a live address everywhere; a broker name left without addresses takes
    /// its cluster membership and topic queues with it.
    fn remove_addr(&mut self, addr: &str) {
        let Some(live) = self.broker_live.remove(addr) else { return };
        self.filter_server_table.remove(addr);
        let Some(bd) = self.broker_addr_table.get_mut(&live.broker_name) else { return };
        bd.broker_addrs.retain(|_, a| a != addr);
        if !bd.broker_addrs.is_empty() {
            return;
        }
        let cluster = bd.cluster.clone();
        self.broker_addr_table.remove(&live.broker_name);
        if let Some(names) = self.cluster_addr_table.get_mut(&cluster) {
            names.remove(&live.broker_name);
            if names.is_empty() {
                self.cluster_addr_table.remove(&cluster);
            }
        }
        self.topic_queue_table.retain(|_, queues| {
            queues.remove(&live.broker_name);
            !queues.is_empty()
        });
    }

    /// Whether `data_version` differs from the one last registered by `broker_addr`
    /// (true for an unknown address).
    pub fn is_topic_config_changed(&self, broker_addr: &str, data_version: &DataVersion) -> bool {
        !self.broker_live.get(broker_addr).is_some_and(|l| l.data_version == *data_version)
    }

    /// QUERY_DATA_VERSION: whether the broker's topic config changed and the version we
    /// hold. An unchanged answer counts as a heartbeat.
    pub fn query_data_version(
        &mut self,
        broker_addr: &str,
        data_version: &DataVersion,
        now_ms: u64,
    ) -> (bool, Option<DataVersion>) {
        let changed = self.is_topic_config_changed(broker_addr, data_version);
        let live = self.broker_live.get_mut(broker_addr);
        if let Some(l) = live {
            if !changed {
                l.last_update_ms = now_ms;
            }
            (changed, Some(l.data_version))
        } else {
            (changed, None)
        }
    }

    /// The route of a topic: its queue data per broker name and every address of those
    /// broker names. `None` when the topic is unknown.
    pub fn route_for_topic(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let broker_datas: Vec<BrokerData> =
            queues.keys().filter_map(|name| self.broker_addr_table.get(name)).cloned().collect();
        if broker_datas.is_empty() {
            return None;
        }
        let filter_server_table = broker_datas
            .iter()
            .flat_map(|bd| bd.broker_addrs.values())
            .filter_map(|a| self.filter_server_table.get(a).map(|f| (a.clone(), f.clone())))
            .collect();
        Some(TopicRouteData {
            broker_datas,
            filter_server_table,
            order_topic_conf: None,
            queue_datas: queues.values().cloned().collect(),
        })
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    /// Every topic with queues, sorted.
    pub fn all_topics(&self) -> Vec<String> {
        self.topic_queue_table.keys().cloned().collect()
    }

    /// Topics with queues on a broker name of `cluster`, sorted.
    pub fn topics_by_cluster(&self, cluster: &str) -> Vec<String> {
        let Some(names) = self.cluster_addr_table.get(cluster) else { return Vec::new() };
        self.topic_queue_table
            .iter()
            .filter(|(_, queues)| queues.keys().any(|n| names.contains(n)))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Forgets a topic's queues (a master re-adds them when its data version changes).
    pub fn delete_topic(&mut self, topic: &str) -> bool {
        self.topic_queue_table.remove(topic).is_some()
    }

    /// Whether `broker_addr` is a live broker address.
    pub fn is_known_broker(&self, broker_addr: &str) -> bool {
        self.broker_live.contains_key(broker_addr)
    }

    /// Number of live broker addresses.
    pub fn live_broker_count(&self) -> usize {
        self.broker_live.len()
    }

    /// Live broker addresses per cluster, sorted by cluster name (metrics). A cluster is
    /// its broker names' (I2), so at most `brokers_max` entries; they add up to
    /// `live_broker_count` (I1).
    pub fn live_brokers_by_cluster(&self) -> Vec<(String, usize)> {
        let mut by_cluster: BTreeMap<&str, usize> = BTreeMap::new();
        for data in self.broker_addr_table.values() {
            *by_cluster.entry(data.cluster.as_str()).or_default() += data.broker_addrs.len();
        }
        by_cluster.into_iter().map(|(c, n)| (c.to_string(), n)).collect()
    }

    /// Number of topics with queues.
    pub fn topic_count(&self) -> usize {
        self.topic_queue_table.len()
    }

    /// Sets a KV config value; returns the previous one.
    pub fn put_kv(&mut self, namespace: &str, key: &str, value: &str) -> Result<Option<String>, RouteError> {
        let exists = self.kv.get(namespace).is_some_and(|m| m.contains_key(key));
        if !exists && self.kv_entries >= self.limits.kv_entries_max {
            return Err(RouteError::KvFull { max: self.limits.kv_entries_max });
        }
        let old = self.kv.entry(namespace.to_string()).or_default().insert(key.to_string(), value.to_string());
        if old.is_none() {
            self.kv_entries += 1;
        }
        Ok(old)
    }

    pub fn get_kv(&self, namespace: &str, key: &str) -> Option<&str> {
        self.kv.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes a KV config value; returns whether it existed.
    pub fn delete_kv(&mut self, namespace: &str, key: &str) -> bool {
        let Some(m) = self.kv.get_mut(namespace) else { return false };
        let removed = m.remove(key).is_some();
        if m.is_empty() {
            self.kv.remove(namespace);
        }
        if removed {
            self.kv_entries -= 1;
        }
        removed
    }

    /// Every key of a namespace; `None` when it has none.
    pub fn kv_list(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.kv.get(namespace)
    }
}

/// A topic config's name, or its table key when the name is empty.
fn topic_name_of<'a>(key: &'a str, name: &'a str) -> &'a str {
    if name.is_empty() {
        key
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::route::{TopicConfig, PERM_READ, PERM_WRITE};

    const A0: &str = "127.0.0.1:10911";
    const A1: &str = "127.0.0.1:10921";
    const B0: &str = "127.0.0.2:10911";
    const C: &str = "DefaultCluster";

    fn topics(version: i64, list: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: version, state_version: 0, timestamp: 1_700_000_000_000 },
            topic_config_table: list
                .iter()
                .map(|(t, q)| {
                    (t.to_string(), TopicConfig { read_queue_nums: *q, write_queue_nums: *q, ..TopicConfig::new(t) })
                })
                .collect(),
        }
    }

    fn reg(name: &str, addr: &str, id: i64, tc: TopicConfigSerializeWrapper) -> BrokerRegistration {
        BrokerRegistration {
            cluster_name: C.into(),
            broker_addr: addr.into(),
            broker_name: name.into(),
            broker_id: id,
            ha_server_addr: format!("{addr}-ha"),
            topic_config: tc,
            filter_server_list: Vec::new(),
            enable_acting_master: false,
        }
    }

    fn qd(name: &str, q: i32) -> QueueData {
        QueueData {
            broker_name: name.into(),
            perm: PERM_READ | PERM_WRITE,
            read_queue_nums: q,
            topic_sys_flag: 0,
            write_queue_nums: q,
        }
    }

    fn bd(name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        BrokerData {
            broker_addrs: addrs.iter().map(|(i, a)| (*i, a.to_string())).collect(),
            broker_name: name.into(),
            cluster: C.into(),
            ..BrokerData::default()
        }
    }

    fn route(brokers: Vec<BrokerData>, queues: Vec<QueueData>) -> Option<TopicRouteData> {
        Some(TopicRouteData { broker_datas: brokers, queue_datas: queues, ..TopicRouteData::default() })
    }

    /// Checks the module's invariants, then that `topic` routes to `expected`.
    fn check(rim: &RouteInfoManager, topic: &str, expected: Option<TopicRouteData>) {
        // I1
        let mut seen = BTreeSet::new();
        for (name, data) in &rim.broker_addr_table {
            assert_eq!(&data.broker_name, name);
            assert!(!data.broker_addrs.is_empty(), "empty BrokerData {name}");
            for (id, addr) in &data.broker_addrs {
                assert!(seen.insert(addr.clone()), "{addr} appears twice");
                let live = rim.broker_live.get(addr).unwrap_or_else(|| panic!("{addr} not live"));
                assert_eq!((&live.broker_name, live.broker_id), (name, *id), "{addr}'s live entry");
            }
        }
        assert_eq!(seen, rim.broker_live.keys().cloned().collect(), "live addresses");
        // I2
        let mut clusters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (name, data) in &rim.broker_addr_table {
            clusters.entry(data.cluster.clone()).or_default().insert(name.clone());
        }
        assert_eq!(clusters, rim.cluster_addr_table, "cluster table");
        // I3
        for (t, queues) in &rim.topic_queue_table {
            assert!(!queues.is_empty(), "topic {t} has no queues");
            for name in queues.keys() {
                assert!(rim.broker_addr_table.contains_key(name), "topic {t} names unknown broker {name}");
            }
        }
        // I4
        assert!(rim.filter_server_table.keys().all(|a| rim.broker_live.contains_key(a)));
        assert!(rim.kv.values().all(|m| !m.is_empty()));
        assert_eq!(rim.kv_entries, rim.kv.values().map(BTreeMap::len).sum::<usize>());
        // The metrics' views agree with the tables.
        let by_cluster = rim.live_brokers_by_cluster();
        assert_eq!(by_cluster.iter().map(|(_, n)| n).sum::<usize>(), rim.live_broker_count());
        assert!(by_cluster.iter().all(|(c, n)| *n > 0 && rim.cluster_addr_table.contains_key(c)), "{by_cluster:?}");
        assert_eq!(rim.topic_count(), rim.all_topics().len());
        assert_eq!(rim.route_for_topic(topic), expected, "route of {topic}");
    }

    /// broker-a master + slave, broker-b master; T1 on both, T2 on broker-a only.
    fn two_brokers() -> RouteInfoManager {
        let mut rim = RouteInfoManager::default();
        let r = rim.register_broker(reg("broker-a", A0, 0, topics(1, &[("T1", 4), ("T2", 2)])), 1_000).unwrap();
        assert_eq!(r, RegisterResult { topic_config_changed: true, ..RegisterResult::default() });
        let r = rim.register_broker(reg("broker-a", A1, 1, topics(1, &[("T1", 4), ("T2", 2)])), 1_000).unwrap();
        assert_eq!(
            r,
            RegisterResult {
                ha_server_addr: Some(format!("{A0}-ha")),
                master_addr: Some(A0.into()),
                topic_config_changed: true
            }
        );
        rim.register_broker(reg("broker-b", B0, 0, topics(7, &[("T1", 8)])), 2_000).unwrap();
        rim
    }

    #[test]
    fn routes_of_two_broker_names() {
        let rim = two_brokers();
        check(
            &rim,
            "T1",
            route(
                vec![bd("broker-a", &[(0, A0), (1, A1)]), bd("broker-b", &[(0, B0)])],
                vec![qd("broker-a", 4), qd("broker-b", 8)],
            ),
        );
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0), (1, A1)])], vec![qd("broker-a", 2)]));
        check(&rim, "T3", None);
        assert_eq!(rim.all_topics(), ["T1", "T2"]);
        assert_eq!(rim.topics_by_cluster(C), ["T1", "T2"]);
        assert!(rim.topics_by_cluster("other").is_empty());
        let info = rim.cluster_info();
        assert_eq!(info.cluster_addr_table[C], ["broker-a".to_string(), "broker-b".to_string()].into());
        assert_eq!(info.broker_addr_table["broker-a"], bd("broker-a", &[(0, A0), (1, A1)]));
    }

    #[test]
    fn slave_topic_configs_are_ignored_and_queues_follow_data_version() {
        let mut rim = two_brokers();
        // A slave's topics never become queues.
        let r = rim.register_broker(reg("broker-a", A1, 1, topics(2, &[("T9", 1)])), 3_000).unwrap();
        assert!(r.topic_config_changed);
        check(&rim, "T9", None);
        // Same data version from the master: nothing changes, even with new content.
        let r = rim.register_broker(reg("broker-a", A0, 0, topics(1, &[("T2", 5)])), 3_000).unwrap();
        assert!(!r.topic_config_changed);
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0), (1, A1)])], vec![qd("broker-a", 2)]));
        // New version: queue data updated (topics the broker dropped stay, as in Java).
        let r = rim.register_broker(reg("broker-a", A0, 0, topics(2, &[("T2", 5)])), 3_000).unwrap();
        assert!(r.topic_config_changed);
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0), (1, A1)])], vec![qd("broker-a", 5)]));
        check(
            &rim,
            "T1",
            route(
                vec![bd("broker-a", &[(0, A0), (1, A1)]), bd("broker-b", &[(0, B0)])],
                vec![qd("broker-a", 4), qd("broker-b", 8)],
            ),
        );
    }

    #[test]
    fn acting_master_flag_follows_the_latest_registration() {
        let mut rim = two_brokers();
        let acting = BrokerRegistration { enable_acting_master: true, ..reg("broker-b", B0, 0, topics(1, &[("T1", 8)])) };
        rim.register_broker(acting, 3_000).unwrap();
        let acting_b = BrokerData { enable_acting_master: true, ..bd("broker-b", &[(0, B0)]) };
        check(&rim, "T1", route(vec![bd("broker-a", &[(0, A0), (1, A1)]), acting_b], vec![qd("broker-a", 4), qd("broker-b", 8)]));
        let json = String::from_utf8(rim.route_for_topic("T1").unwrap().encode_standard()).unwrap();
        assert!(json.contains(r#""cluster":"DefaultCluster","enableActingMaster":false}"#), "{json}");
        assert!(json.contains(r#""enableActingMaster":true}"#), "{json}");
        rim.register_broker(reg("broker-b", B0, 0, topics(1, &[("T1", 8)])), 4_000).unwrap();
        check(&rim, "T1", route(vec![bd("broker-a", &[(0, A0), (1, A1)]), bd("broker-b", &[(0, B0)])], vec![qd("broker-a", 4), qd("broker-b", 8)]));
    }

    #[test]
    fn expiry_at_120_seconds() {
        let mut rim = two_brokers();
        // broker-a last heard at 1_000, broker-b at 2_000.
        assert!(rim.scan_expired(121_000).is_empty());
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0), (1, A1)])], vec![qd("broker-a", 2)]));
        // The slave refreshes; the master goes quiet.
        rim.register_broker(reg("broker-a", A1, 1, topics(1, &[])), 100_000).unwrap();
        let gone = rim.scan_expired(121_001);
        assert_eq!(gone.iter().map(|e| e.addr.as_str()).collect::<Vec<_>>(), [A0]);
        assert_eq!((gone[0].broker_name.as_str(), gone[0].broker_id, gone[0].last_update_ms), ("broker-a", 0, 1_000));
        // The slave still serves broker-a's queues.
        check(&rim, "T2", route(vec![bd("broker-a", &[(1, A1)])], vec![qd("broker-a", 2)]));
        // A slave's registration without a live master gets no master address.
        let r = rim.register_broker(reg("broker-a", A1, 1, topics(1, &[])), 121_500).unwrap();
        assert_eq!((r.master_addr, r.ha_server_addr), (None, None));
        let gone = rim.scan_expired(122_001);
        assert_eq!(gone.iter().map(|e| e.addr.as_str()).collect::<Vec<_>>(), [B0]);
        check(&rim, "T1", route(vec![bd("broker-a", &[(1, A1)])], vec![qd("broker-a", 4)]));
        assert_eq!(rim.scan_expired(241_500).len(), 0);
        assert_eq!(rim.scan_expired(241_501).len(), 1);
        check(&rim, "T1", None);
        check(&rim, "T2", None);
        assert!(rim.cluster_info().cluster_addr_table.is_empty());
        assert_eq!(rim.live_broker_count(), 0);
    }

    #[test]
    fn unregister() {
        let mut rim = two_brokers();
        assert!(!rim.unregister_broker(C, A0, "broker-b", 0), "wrong broker name");
        assert!(!rim.unregister_broker(C, "10.0.0.9:1", "broker-a", 0), "unknown address");
        assert!(rim.unregister_broker(C, B0, "broker-b", 0));
        check(&rim, "T1", route(vec![bd("broker-a", &[(0, A0), (1, A1)])], vec![qd("broker-a", 4)]));
        assert!(!rim.unregister_broker(C, B0, "broker-b", 0), "twice");
        assert!(rim.unregister_broker(C, A0, "broker-a", 0));
        check(&rim, "T1", route(vec![bd("broker-a", &[(1, A1)])], vec![qd("broker-a", 4)]));
        assert!(rim.unregister_broker(C, A1, "broker-a", 1));
        check(&rim, "T1", None);
        assert!(rim.all_topics().is_empty());
        assert!(rim.cluster_info().broker_addr_table.is_empty());
    }

    #[test]
    fn address_moves() {
        let mut rim = two_brokers();
        // Slave promoted: A1 registers as id 0, displacing A0 (dropped from the live table).
        let r = rim.register_broker(reg("broker-a", A1, 0, topics(1, &[("T2", 2)])), 5_000).unwrap();
        assert!(!r.topic_config_changed, "same data version, id 0 already held");
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 2)]));
        // The old master's late unregister does not remove the new one.
        assert!(!rim.unregister_broker(C, A0, "broker-a", 0));
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 2)]));
        // An address re-registering under another broker name leaves the first one.
        rim.register_broker(reg("broker-c", B0, 0, topics(1, &[("T3", 1)])), 6_000).unwrap();
        check(&rim, "T1", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 4)]));
        check(&rim, "T3", route(vec![bd("broker-c", &[(0, B0)])], vec![qd("broker-c", 1)]));
        // A broker name moving to another cluster moves in the cluster table.
        let mut moved = reg("broker-c", B0, 0, topics(1, &[]));
        moved.cluster_name = "Other".into();
        rim.register_broker(moved, 7_000).unwrap();
        assert_eq!(rim.topics_by_cluster("Other"), ["T3"]);
        assert_eq!(rim.topics_by_cluster(C), ["T1", "T2"]);
        assert_eq!(rim.live_brokers_by_cluster(), [(C.to_string(), 1), ("Other".to_string(), 1)]);
        check(
            &rim,
            "T3",
            route(vec![BrokerData { cluster: "Other".into(), ..bd("broker-c", &[(0, B0)]) }], vec![qd("broker-c", 1)]),
        );
    }

    #[test]
    fn a_master_of_an_older_state_version_cannot_take_back_id_0() {
        let versioned = |state: i64| TopicConfigSerializeWrapper { data_version: DataVersion { state_version: state, ..topics(1, &[]).data_version }, ..topics(1, &[("T2", 2)]) };
        let mut rim = two_brokers();
        // Controller mode: A1 elected master of epoch 2 (A0 was master of epoch 1).
        rim.register_broker(reg("broker-a", A1, 0, versioned(2)), 5_000).unwrap();
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 2)]));
        // The old master, still believing it leads epoch 1, is ignored.
        let r = rim.register_broker(reg("broker-a", A0, 0, versioned(1)), 6_000).unwrap();
        assert_eq!(r, RegisterResult::default());
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 2)]));
        // Once it knows epoch 2 it registers as a slave (its controller id) and is routed.
        rim.register_broker(reg("broker-a", A0, 2, versioned(2)), 7_000).unwrap();
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1), (2, A0)])], vec![qd("broker-a", 2)]));
        // A slave registered at id 2 that then claims id 0 with a stale epoch leaves the
        // route altogether (Apache drops its live entry), the elected master stays.
        rim.register_broker(reg("broker-a", A0, 0, versioned(1)), 8_000).unwrap();
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A1)])], vec![qd("broker-a", 2)]));
        // An equal or higher stateVersion takes the id (a newer election).
        rim.register_broker(reg("broker-a", A0, 0, versioned(3)), 9_000).unwrap();
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0)])], vec![qd("broker-a", 2)]));
    }

    #[test]
    fn delete_topic_and_filter_servers() {
        let mut rim = two_brokers();
        assert!(rim.delete_topic("T2"));
        assert!(!rim.delete_topic("T2"));
        check(&rim, "T2", None);
        let mut with_filters = reg("broker-b", B0, 0, topics(7, &[]));
        with_filters.filter_server_list = vec!["10.0.0.1:1".into()];
        rim.register_broker(with_filters, 3_000).unwrap();
        let r = rim.route_for_topic("T1").unwrap();
        assert_eq!(r.filter_server_table, [(B0.to_string(), vec!["10.0.0.1:1".to_string()])].into());
        check(&rim, "T2", None);
        rim.register_broker(reg("broker-b", B0, 0, topics(7, &[])), 3_000).unwrap();
        assert!(rim.route_for_topic("T1").unwrap().filter_server_table.is_empty());
    }

    #[test]
    fn query_data_version_refreshes_liveness() {
        let mut rim = two_brokers();
        let v1 = DataVersion { counter: 1, state_version: 0, timestamp: 1_700_000_000_000 };
        assert_eq!(rim.query_data_version(A0, &v1, 100_000), (false, Some(v1)));
        let v2 = DataVersion { counter: 2, ..v1 };
        assert_eq!(rim.query_data_version(A0, &v2, 110_000), (true, Some(v1)));
        assert_eq!(rim.query_data_version("10.9.9.9:1", &v1, 110_000), (true, None));
        // A0 was refreshed at 100_000 (not at 110_000, which reported a change).
        let gone: Vec<String> = rim.scan_expired(220_000).into_iter().map(|e| e.addr).collect();
        assert_eq!(gone, [A1, B0]);
        check(&rim, "T2", route(vec![bd("broker-a", &[(0, A0)])], vec![qd("broker-a", 2)]));
    }

    #[test]
    fn kv_config() {
        let mut rim = RouteInfoManager::new(
            BROKER_EXPIRY_MS_DEFAULT,
            RouteLimits { kv_entries_max: 2, ..RouteLimits::default() },
        );
        assert_eq!(rim.put_kv("ns", "k1", "v1"), Ok(None));
        assert_eq!(rim.put_kv("ns", "k1", "v2"), Ok(Some("v1".into())));
        assert_eq!(rim.put_kv("other", "k", "x"), Ok(None));
        assert_eq!(rim.put_kv("ns", "k2", "v"), Err(RouteError::KvFull { max: 2 }));
        assert_eq!(rim.put_kv("ns", "k1", "v3"), Ok(Some("v2".into())), "overwriting is allowed when full");
        assert_eq!(rim.get_kv("ns", "k1"), Some("v3"));
        assert_eq!(rim.get_kv("ns", "k2"), None);
        assert_eq!(rim.get_kv("nope", "k1"), None);
        assert_eq!(rim.kv_list("ns"), Some(&[("k1".to_string(), "v3".to_string())].into()));
        assert!(rim.delete_kv("other", "k"));
        assert!(!rim.delete_kv("other", "k"));
        assert_eq!(rim.kv_list("other"), None);
        assert_eq!(rim.put_kv("ns", "k2", "v"), Ok(None));
        check(&rim, "T", None);
    }

    #[test]
    fn limits_refuse_without_changing_anything() {
        let limits = RouteLimits { brokers_max: 2, topics_max: 2, ..RouteLimits::default() };
        let mut rim = RouteInfoManager::new(BROKER_EXPIRY_MS_DEFAULT, limits);
        rim.register_broker(reg("broker-a", A0, 0, topics(1, &[("T1", 1), ("T2", 1)])), 0).unwrap();
        let err = rim.register_broker(reg("broker-b", B0, 0, topics(1, &[("T3", 1)])), 0);
        assert_eq!(err, Err(RouteError::TopicsFull { addr: B0.into(), max: 2 }));
        check(&rim, "T3", None);
        assert_eq!(rim.live_broker_count(), 1);
        rim.register_broker(reg("broker-b", B0, 0, topics(1, &[("T1", 3)])), 0).unwrap();
        let err = rim.register_broker(reg("broker-a", A1, 1, topics(1, &[])), 0);
        assert_eq!(err, Err(RouteError::BrokersFull { addr: A1.into(), max: 2 }));
        // A known address may always refresh.
        rim.register_broker(reg("broker-b", B0, 0, topics(1, &[])), 10).unwrap();
        check(
            &rim,
            "T1",
            route(
                vec![bd("broker-a", &[(0, A0)]), bd("broker-b", &[(0, B0)])],
                vec![qd("broker-a", 1), qd("broker-b", 3)],
            ),
        );
    }

    #[test]
    fn topic_name_falls_back_to_key() {
        let mut rim = RouteInfoManager::default();
        let mut tc = topics(1, &[("T1", 2)]);
        tc.topic_config_table.get_mut("T1").unwrap().topic_name.clear();
        tc.topic_config_table.insert(String::new(), TopicConfig::new(""));
        rim.register_broker(reg("broker-a", A0, 0, tc), 0).unwrap();
        check(&rim, "T1", route(vec![bd("broker-a", &[(0, A0)])], vec![qd("broker-a", 2)]));
        assert_eq!(rim.all_topics(), ["T1"]);
    }
}
