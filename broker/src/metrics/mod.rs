//! Metrics: what a shard counts (`ShardMetrics`, owned by the shard — plain integers,
//! no atomics on the request path), the `Snapshot` each shard publishes every
//! `METRICS_PUBLISH_INTERVAL_MS`, and their Prometheus exposition (`render`, with
//! RocketMQ 5's metric names and labels where they exist, `ringmq_*` per-shard series
//! otherwise). `exporter.rs` serves it over HTTP; the endpoint, the publish slot and the
//! metric families are the `metrics-export` crate's, shared with the NameServer.
//!
//! Invariants: a shard never waits for the exporter — it publishes with `try_lock` and
//! skips a round if the exporter is reading that slot; every map is bounded (topics by
//! the topic table, request codes by `RPC_CODES_MAX`, lag entries by the offset table);
//! a scrape reads at most one snapshot per shard, at most one publish interval old.

pub mod exporter;
pub mod stats;
pub mod windows;

pub use metrics_export::{Buckets, LATENCY_BOUNDS_US};
use metrics_export::prometheus_client::metrics::MetricType;
use metrics_export::prometheus_client::registry::Registry;
use metrics_export::{Histograms, Labels, Slot, Values};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How often a shard publishes its snapshot.
pub const METRICS_PUBLISH_INTERVAL_MS: u64 = 1_000;
/// Distinct request codes with their own latency histogram per shard; others are
/// counted under code -1.
pub const RPC_CODES_MAX: usize = 256;
/// Messages and bytes in and out of one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicTraffic {
    pub messages_in: u64,
    pub bytes_in: u64,
    pub messages_out: u64,
    pub bytes_out: u64,
}

/// What a shard counts as it serves requests.
/// On the request path: a fixed fast hasher (keys are topic names the broker accepted
/// and request codes, not attacker-chosen at will).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// (topic, consumer group) pairs counted per shard for GROUP_GET_* stats; later pairs
/// are not counted.
pub const GROUP_TOPIC_KEYS_MAX: usize = 8192;

/// What one group pulled from one topic: messages, record bytes, pull responses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTraffic {
    pub messages: u64,
    pub bytes: u64,
    pub pulls: u64,
}

#[derive(Debug, Default)]
pub struct ShardMetrics {
    topics: FastMap<String, TopicTraffic>,
    rpc: FastMap<i32, Buckets>,
    /// topic → group → traffic (two levels: a pull looks its pair up without building
    /// the `topic@group` key); at most `GROUP_TOPIC_KEYS_MAX` pairs in all.
    groups: FastMap<String, FastMap<String, GroupTraffic>>,
    group_pairs: usize,
}

impl ShardMetrics {
    /// A message stored (body bytes).
    pub fn on_put(&mut self, topic: &str, body_bytes: usize) {
        let t = self.topic(topic);
        t.messages_in += 1;
        t.bytes_in += body_bytes as u64;
    }

    /// Messages delivered by a pull (record bytes).
    pub fn on_pull(&mut self, topic: &str, messages: usize, bytes: usize) {
        let t = self.topic(topic);
        t.messages_out += messages as u64;
        t.bytes_out += bytes as u64;
    }

    /// Messages a pull of `group` delivered from `topic`.
    pub fn on_group_pull(&mut self, topic: &str, group: &str, messages: usize, bytes: usize) {
        let known = self.groups.get(topic).is_some_and(|g| g.contains_key(group));
        if !known {
            if self.group_pairs >= GROUP_TOPIC_KEYS_MAX {
                return;
            }
            self.group_pairs += 1;
            self.groups.entry(topic.to_string()).or_default().insert(group.to_string(), GroupTraffic::default());
        }
        let Some(g) = self.groups.get_mut(topic).and_then(|m| m.get_mut(group)) else { return };
        g.messages += messages as u64;
        g.bytes += bytes as u64;
        g.pulls += 1;
    }

    /// The cumulative counters behind VIEW_BROKER_STATS_DATA. A put counts one update
    /// per message (`avgpt` of TOPIC_PUT_NUMS is 1); a pull one per response.
    pub fn stats_counters(&self) -> Vec<(windows::StatsName, String, windows::Counter)> {
        use windows::{Counter, StatsName as N};
        let mut out = Vec::with_capacity(self.topics.len() * 2 + self.group_pairs * 2);
        for (t, v) in &self.topics {
            out.push((N::TopicPutNums, t.clone(), Counter { value: v.messages_in, times: v.messages_in }));
            out.push((N::TopicPutSize, t.clone(), Counter { value: v.bytes_in, times: v.messages_in }));
        }
        for (t, groups) in &self.groups {
            for (g, v) in groups {
                let key = format!("{t}@{g}");
                out.push((N::GroupGetNums, key.clone(), Counter { value: v.messages, times: v.pulls }));
                out.push((N::GroupGetSize, key, Counter { value: v.bytes, times: v.pulls }));
            }
        }
        out
    }

    /// The live counter of one stats key.
    pub fn stats_counter(&self, name: windows::StatsName, key: &str) -> Option<windows::Counter> {
        use windows::{Counter, StatsName as N};
        match name {
            N::TopicPutNums => self.topics.get(key).map(|v| Counter { value: v.messages_in, times: v.messages_in }),
            N::TopicPutSize => self.topics.get(key).map(|v| Counter { value: v.bytes_in, times: v.messages_in }),
            N::GroupGetNums | N::GroupGetSize => {
                // Java's key is `topic@group`; a group name has no '@', a topic may not either.
                let (topic, group) = key.rsplit_once('@')?;
                let v = self.groups.get(topic)?.get(group)?;
                Some(if name == N::GroupGetNums { Counter { value: v.messages, times: v.pulls } } else { Counter { value: v.bytes, times: v.pulls } })
            }
        }
    }

    /// A request answered after `us` microseconds.
    pub fn on_request(&mut self, code: i32, us: u64) {
        let code = if self.rpc.contains_key(&code) || self.rpc.len() < RPC_CODES_MAX { code } else { -1 };
        self.rpc.entry(code).or_default().observe(us);
    }

    fn topic(&mut self, topic: &str) -> &mut TopicTraffic {
        // Topics are those the broker accepted (bounded by its topic table); the name is
        // copied only the first time.
        if !self.topics.contains_key(topic) {
            self.topics.insert(topic.to_string(), TopicTraffic::default());
        }
        self.topics.get_mut(topic).expect("present")
    }

    pub fn topics(&self) -> Vec<(String, TopicTraffic)> {
        self.topics.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    pub fn rpc(&self) -> Vec<(i32, Buckets)> {
        self.rpc.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// The latency histograms of `codes` added together (runtime info's send latency).
    pub fn rpc_of(&self, codes: &[i32]) -> Buckets {
        let mut sum = Buckets::default();
        for b in codes.iter().filter_map(|c| self.rpc.get(c)) {
            sum.add(b);
        }
        sum
    }
}

/// One shard's published state.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub shard: usize,
    pub topics: Vec<(String, TopicTraffic)>,
    /// (consumer group, topic, messages behind) over this shard's queues.
    pub lag: Vec<(String, String, u64)>,
    pub rpc: Vec<(i32, Buckets)>,
    /// Group commits (CommitLog flush: write + fdatasync).
    pub flush: Buckets,
    pub storage_bytes: u64,
    pub flush_behind_bytes: u64,
    pub disk_used_ratio: f64,
    pub forwarded_out: u64,
    pub forwarded_in: u64,
    pub suspended_pulls: u64,
    pub recovery_ms: u64,
    /// Topics and subscription groups of the table replica: reported by the metadata
    /// owner only in host route mode (0 elsewhere), by every shard-broker in shard mode.
    pub topic_count: u64,
    pub group_count: u64,
    pub ha_slaves: u64,
    pub ha_behind_bytes: u64,
    /// How far the checkpoint is behind the durable CommitLog (what a crash re-reads).
    pub checkpoint_lag_bytes: u64,
    pub scrubbed_bytes: u64,
    pub scrub_corrupt_records: u64,
    pub disk_watermark_crossings: u64,
    /// Requests refused by the plain ACL (`aclEnable`), per shard that held the connection.
    pub acl_refusals: u64,
    /// `plain_acl.yml` loads that took effect (the one at start-up included) and changed
    /// files that did not load (the rules in force kept), per shard.
    pub acl_file_loads: u64,
    pub acl_file_load_failures: u64,
    /// Replication connections refused for want of authentication (`haAuthSecret`).
    pub ha_auth_refusals: u64,
    /// TLS handshakes that failed on this shard's client and replication ports.
    pub tls_handshake_failures: u64,
    /// Plain connections refused by this shard's ports (`tls.server.mode=enforcing`).
    pub tls_plain_refusals: u64,
}

/// One slot per shard, written by that shard only, read by the exporter.
#[derive(Debug)]
pub struct Published {
    slots: Vec<Slot<Snapshot>>,
}

impl Published {
    pub fn new(shards: usize) -> Arc<Self> {
        Arc::new(Self { slots: (0..shards).map(|_| Slot::default()).collect() })
    }

    /// Never blocks the shard: if the exporter holds the slot, this round is skipped.
    pub fn publish(&self, snapshot: Snapshot) {
        if let Some(slot) = self.slots.get(snapshot.shard) {
            slot.publish(snapshot);
        }
    }

    pub fn collect(&self) -> Vec<Arc<Snapshot>> {
        self.slots.iter().filter_map(Slot::latest).collect()
    }
}

/// Who this broker is, on every series (RocketMQ 5's common labels).
#[derive(Debug, Clone)]
pub struct Node {
    pub cluster: String,
    /// `<brokerName>:<brokerId>`: the one broker identity in host route mode.
    pub node_id: String,
    /// Shard route mode: shard i's own identity (`<brokerName>-s<i>:<brokerId>`), by
    /// shard id; empty in host route mode.
    pub shard_node_ids: Vec<String>,
}

impl Node {
    /// The identity whose figures shard `shard`'s snapshot is part of.
    fn of_shard(&self, shard: usize) -> &str {
        self.shard_node_ids.get(shard).map(String::as_str).unwrap_or(&self.node_id)
    }
}

/// The OpenMetrics text of all shards' snapshots. Broker-level series are summed over
/// the shards of one identity: the whole host in host route mode, each shard-broker
/// alone in shard route mode (so a sum over `node_id` counts every message once, as
/// for a cluster of brokers).
pub fn render(node: &Node, snaps: &[Arc<Snapshot>]) -> String {
    let base = |node_id: &str, extra: &[(&str, String)]| -> Labels {
        let mut l: Labels = vec![("cluster".into(), node.cluster.clone()), ("node_type".into(), "broker".into()), ("node_id".into(), node_id.to_string())];
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        l
    };
    let mut topics: BTreeMap<(&str, String), TopicTraffic> = BTreeMap::new();
    let mut lag: BTreeMap<(&str, String, String), u64> = BTreeMap::new();
    let mut rpc: BTreeMap<(&str, i32), Buckets> = BTreeMap::new();
    // Per identity: storage bytes, flush-behind bytes, topics, groups.
    let mut totals: BTreeMap<&str, [u64; 4]> = BTreeMap::new();
    for s in snaps {
        let id = node.of_shard(s.shard);
        for (t, v) in &s.topics {
            let e = topics.entry((id, t.clone())).or_default();
            e.messages_in += v.messages_in;
            e.bytes_in += v.bytes_in;
            e.messages_out += v.messages_out;
            e.bytes_out += v.bytes_out;
        }
        for (g, t, n) in &s.lag {
            *lag.entry((id, g.clone(), t.clone())).or_default() += n;
        }
        for (code, b) in &s.rpc {
            rpc.entry((id, *code)).or_default().add(b);
        }
        let t = totals.entry(id).or_default();
        t[0] += s.storage_bytes;
        t[1] += s.flush_behind_bytes;
        t[2] += s.topic_count;
        t[3] += s.group_count;
    }
    let mut reg = Registry::default();
    let per_topic = |f: fn(&TopicTraffic) -> u64| Values { kind: MetricType::Counter, series: topics.iter().map(|((id, t), v)| (base(id, &[("topic", t.clone())]), f(v) as f64)).collect() };
    // Counter names carry `_total` in the exposition; the registry adds it.
    reg.register("rocketmq_messages_in", "Messages stored, per topic", per_topic(|v| v.messages_in));
    reg.register("rocketmq_messages_out", "Messages delivered to consumers, per topic", per_topic(|v| v.messages_out));
    reg.register("rocketmq_throughput_in", "Message body bytes stored, per topic", per_topic(|v| v.bytes_in));
    reg.register("rocketmq_throughput_out", "Message bytes delivered to consumers, per topic", per_topic(|v| v.bytes_out));
    reg.register(
        "rocketmq_consumer_lag_messages",
        "Messages not yet consumed (queue max offset minus committed offset), per group and topic",
        Values { kind: MetricType::Gauge, series: lag.iter().map(|((id, g, t), n)| (base(id, &[("consumer_group", g.clone()), ("topic", t.clone())]), *n as f64)).collect() },
    );
    let gauge = |i: usize| Values { kind: MetricType::Gauge, series: totals.iter().map(|(id, t)| (base(id, &[]), t[i] as f64)).collect() };
    reg.register("rocketmq_storage_size", "CommitLog bytes held, all shards of the broker", gauge(0));
    reg.register("rocketmq_storage_flush_behind_bytes", "CommitLog bytes appended but not yet durable, all shards of the broker", gauge(1));
    reg.register("rocketmq_topic_number", "Topics", gauge(2));
    reg.register("rocketmq_consumer_group_number", "Subscription groups", gauge(3));
    reg.register(
        "rocketmq_rpc_latency",
        "Request handling latency in milliseconds, per request code",
        Histograms { scale: 0.001, series: rpc.iter().map(|((id, c), b)| (base(id, &[("protocol_type", "remoting".into()), ("request_code", c.to_string())]), *b)).collect() },
    );
    let per_shard = |kind: MetricType, f: fn(&Snapshot) -> f64| Values { kind, series: snaps.iter().map(|s| (base(node.of_shard(s.shard), &[("shard", s.shard.to_string())]), f(s))).collect() };
    reg.register(
        "ringmq_group_commit_latency_us",
        "CommitLog group commit (write + fdatasync) latency in microseconds, per shard",
        Histograms { scale: 1.0, series: snaps.iter().map(|s| (base(node.of_shard(s.shard), &[("shard", s.shard.to_string())]), s.flush)).collect() },
    );
    reg.register("ringmq_shard_flush_behind_bytes", "Dirty CommitLog bytes, per shard", per_shard(MetricType::Gauge, |s| s.flush_behind_bytes as f64));
    reg.register("ringmq_shard_storage_bytes", "CommitLog bytes held, per shard", per_shard(MetricType::Gauge, |s| s.storage_bytes as f64));
    reg.register("ringmq_shard_disk_used_ratio", "Used fraction of the store's filesystem, per shard", per_shard(MetricType::Gauge, |s| s.disk_used_ratio));
    reg.register("ringmq_shard_forwarded_out", "Requests forwarded to the owning shard, per shard", per_shard(MetricType::Counter, |s| s.forwarded_out as f64));
    reg.register("ringmq_shard_forwarded_in", "Requests received from other shards, per shard", per_shard(MetricType::Counter, |s| s.forwarded_in as f64));
    reg.register("ringmq_shard_suspended_pulls", "Long polls waiting, per shard", per_shard(MetricType::Gauge, |s| s.suspended_pulls as f64));
    reg.register("ringmq_shard_recovery_ms", "Store open and recovery time at start-up, per shard", per_shard(MetricType::Gauge, |s| s.recovery_ms as f64));
    reg.register("ringmq_shard_ha_slaves", "Slaves attached, per shard", per_shard(MetricType::Gauge, |s| s.ha_slaves as f64));
    reg.register("ringmq_shard_checkpoint_lag_bytes", "CommitLog bytes past the last checkpoint (what recovery after a crash re-reads), per shard", per_shard(MetricType::Gauge, |s| s.checkpoint_lag_bytes as f64));
    reg.register("ringmq_shard_scrubbed_bytes", "CommitLog bytes the background scrub re-read and checked, per shard", per_shard(MetricType::Counter, |s| s.scrubbed_bytes as f64));
    reg.register("ringmq_shard_scrub_corrupt_records", "Corrupt records the background scrub found, per shard", per_shard(MetricType::Counter, |s| s.scrub_corrupt_records as f64));
    reg.register("ringmq_shard_disk_watermark_crossings", "Times disk usage rose past diskMaxUsedSpaceRatio or the refuse watermark, per shard", per_shard(MetricType::Counter, |s| s.disk_watermark_crossings as f64));
    reg.register("ringmq_acl_file_loads", "plain_acl.yml loads that took effect (start-up included), per shard", per_shard(MetricType::Counter, |s| s.acl_file_loads as f64));
    reg.register("ringmq_acl_file_load_failures", "Changed plain_acl.yml files that did not load (the rules in force were kept), per shard", per_shard(MetricType::Counter, |s| s.acl_file_load_failures as f64));
    reg.register("ringmq_acl_refusals", "Requests refused by the ACL (aclEnable: no or unknown access key, bad signature, missing permission), per shard", per_shard(MetricType::Counter, |s| s.acl_refusals as f64));
    reg.register("ringmq_shard_ha_auth_refusals", "Replication connections refused because the peer did not prove haAuthSecret, per shard", per_shard(MetricType::Counter, |s| s.ha_auth_refusals as f64));
    reg.register("ringmq_tls_handshake_failures", "TLS handshakes that failed on the client and replication ports (bad or missing client certificate, protocol errors, timeouts), per shard", per_shard(MetricType::Counter, |s| s.tls_handshake_failures as f64));
    reg.register("ringmq_tls_plain_refusals", "Plain (not TLS) connections refused by tls.server.mode=enforcing, per shard", per_shard(MetricType::Counter, |s| s.tls_plain_refusals as f64));
    reg.register("ringmq_shard_ha_behind_bytes", "Replication bytes not yet confirmed by a slave (master) or not yet received (slave), per shard", per_shard(MetricType::Gauge, |s| s.ha_behind_bytes as f64));
    metrics_export::encode(&reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_sums_shards_and_names_series_as_rocketmq_does() {
        let node = Node { cluster: "C".into(), node_id: "broker-a:0".into(), shard_node_ids: Vec::new() };
        let mut a = ShardMetrics::default();
        a.on_put("T", 100);
        a.on_put("T", 50);
        a.on_pull("T", 2, 300);
        a.on_request(10, 120);
        let mut b = ShardMetrics::default();
        b.on_put("T", 10);
        b.on_request(10, 2_000_000);
        let mut flush = Buckets::default();
        flush.observe(700);
        let snaps = vec![
            Arc::new(Snapshot { shard: 0, topics: a.topics(), rpc: a.rpc(), lag: vec![("G".into(), "T".into(), 5)], flush, storage_bytes: 1000, ..Default::default() }),
            Arc::new(Snapshot { shard: 1, topics: b.topics(), rpc: b.rpc(), lag: vec![("G".into(), "T".into(), 2)], storage_bytes: 24, ..Default::default() }),
        ];
        let text = render(&node, &snaps);
        let l = "cluster=\"C\",node_type=\"broker\",node_id=\"broker-a:0\"";
        // check(a line the exposition must hold)
        let check = |line: String| assert!(text.lines().any(|x| x == line), "missing `{line}` in:\n{text}");
        check(format!("rocketmq_messages_in_total{{{l},topic=\"T\"}} 3"));
        check(format!("rocketmq_throughput_in_total{{{l},topic=\"T\"}} 160"));
        check(format!("rocketmq_messages_out_total{{{l},topic=\"T\"}} 2"));
        check(format!("rocketmq_throughput_out_total{{{l},topic=\"T\"}} 300"));
        check(format!("rocketmq_consumer_lag_messages{{{l},consumer_group=\"G\",topic=\"T\"}} 7.0"));
        check(format!("rocketmq_storage_size{{{l}}} 1024.0"));
        check(format!("rocketmq_rpc_latency_count{{{l},protocol_type=\"remoting\",request_code=\"10\"}} 2"));
        check(format!("rocketmq_rpc_latency_bucket{{le=\"0.25\",{l},protocol_type=\"remoting\",request_code=\"10\"}} 1"));
        check(format!("ringmq_group_commit_latency_us_bucket{{le=\"1000.0\",{l},shard=\"0\"}} 1"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn shard_route_mode_labels_each_shard_broker_on_its_own() {
        let node = Node { cluster: "C".into(), node_id: "broker-a:0".into(), shard_node_ids: vec!["broker-a-s0:0".into(), "broker-a-s1:0".into()] };
        let mut a = ShardMetrics::default();
        a.on_put("T", 100);
        let mut b = ShardMetrics::default();
        b.on_put("T", 10);
        b.on_put("T", 10);
        let snaps = vec![
            Arc::new(Snapshot { shard: 0, topics: a.topics(), storage_bytes: 1000, topic_count: 7, ..Default::default() }),
            Arc::new(Snapshot { shard: 1, topics: b.topics(), storage_bytes: 24, topic_count: 7, ..Default::default() }),
        ];
        let text = render(&node, &snaps);
        let check = |line: &str| assert!(text.lines().any(|x| x == line), "missing `{line}` in:\n{text}");
        let l = |id: &str| format!("cluster=\"C\",node_type=\"broker\",node_id=\"{id}\"");
        check(&format!("rocketmq_messages_in_total{{{},topic=\"T\"}} 1", l("broker-a-s0:0")));
        check(&format!("rocketmq_messages_in_total{{{},topic=\"T\"}} 2", l("broker-a-s1:0")));
        check(&format!("rocketmq_storage_size{{{}}} 1000.0", l("broker-a-s0:0")));
        check(&format!("rocketmq_topic_number{{{}}} 7.0", l("broker-a-s1:0")));
        check(&format!("ringmq_shard_storage_bytes{{{},shard=\"1\"}} 24.0", l("broker-a-s1:0")));
        assert!(!text.contains("node_id=\"broker-a:0\""), "no host identity in shard mode:\n{text}");
    }
}
