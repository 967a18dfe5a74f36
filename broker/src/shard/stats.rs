//! `ShardStats`: every statistic one shard keeps about its own traffic — the request,
//! put and pull counters, the per-code latency and per-topic traffic of
//! `metrics::ShardMetrics`, the per-second samples behind the runtime info's TPS
//! (`metrics::stats::CallStats`) and the minute/hour/day windows behind
//! VIEW_BROKER_STATS_DATA (`metrics::windows`).
//!
//! Owner: the shard; handlers reach it only through these methods (`Shard::stats`).
//! Invariants: counters only grow; the windows are sampled at most once per
//! `STATS_SAMPLE_INTERVAL_MS`; every figure is this shard's alone (summing over
//! shards is the reader's job).

use crate::metrics::stats::{CallStats, Sample};
use crate::metrics::windows::{StatsName, StatsWindows, WindowSum};
use crate::metrics::{Buckets, ShardMetrics, TopicTraffic};
use std::cell::{Cell, Ref, RefCell};

/// How often a shard samples its counters into the windows (the minute window's step).
pub const STATS_SAMPLE_INTERVAL_MS: i64 = crate::metrics::windows::WINDOWS[0].0;

#[derive(Debug, Default)]
pub struct ShardCounters {
    pub requests: Cell<u64>,
    pub forwarded_out: Cell<u64>,
    pub forwarded_in: Cell<u64>,
    pub messages_put: Cell<u64>,
    pub messages_pulled: Cell<u64>,
    /// Store lookups of pulls, found or not: each pass of a suspended pull counts
    /// (`getTotalTps`).
    pub pull_lookups: Cell<u64>,
    /// Body bytes of the messages put (`putMessageSizeTotal`).
    pub bytes_put: Cell<u64>,
}

fn bump(c: &Cell<u64>, n: u64) {
    c.set(c.get() + n);
}

pub struct ShardStats {
    counters: ShardCounters,
    /// Traffic and request latency, published as a `metrics::Snapshot`.
    metrics: RefCell<ShardMetrics>,
    /// Per-second samples of the put/pull counters (runtime info TPS).
    call_stats: RefCell<CallStats>,
    /// Minute/hour/day samples of the traffic counters (VIEW_BROKER_STATS_DATA).
    windows: RefCell<StatsWindows>,
    windows_sampled_ms: Cell<i64>,
    started_ms: i64,
    /// How long the store took to open (recovery included), ms.
    recovery_ms: u64,
}

impl ShardStats {
    pub fn new(started_ms: i64, recovery_ms: u64) -> Self {
        Self {
            counters: ShardCounters::default(),
            metrics: RefCell::new(ShardMetrics::default()),
            call_stats: RefCell::new(CallStats::default()),
            windows: RefCell::new(StatsWindows::default()),
            windows_sampled_ms: Cell::new(i64::MIN / 2),
            started_ms,
            recovery_ms,
        }
    }

    pub fn counters(&self) -> &ShardCounters {
        &self.counters
    }
    pub fn started_ms(&self) -> i64 {
        self.started_ms
    }
    pub fn recovery_ms(&self) -> u64 {
        self.recovery_ms
    }

    /// A request arrived on this shard's socket.
    pub fn on_request_arrived(&self) {
        bump(&self.counters.requests, 1);
    }
    /// A request was answered; `us` from its arrival.
    pub fn on_request_done(&self, code: i32, us: u64) {
        self.metrics.borrow_mut().on_request(code, us);
    }
    pub fn on_forwarded_out(&self) {
        bump(&self.counters.forwarded_out, 1);
    }
    pub fn on_forwarded_in(&self) {
        bump(&self.counters.forwarded_in, 1);
    }
    /// A client's message was put.
    pub fn on_put(&self, topic: &str, body_bytes: usize) {
        bump(&self.counters.messages_put, 1);
        bump(&self.counters.bytes_put, body_bytes as u64);
        self.metrics.borrow_mut().on_put(topic, body_bytes);
    }
    /// The broker put a copy of its own (a delayed or timed message coming due).
    pub fn on_copy_put(&self) {
        bump(&self.counters.messages_put, 1);
    }
    /// A pull looked in the store (whatever it found).
    pub fn on_pull_lookup(&self) {
        bump(&self.counters.pull_lookups, 1);
    }
    /// A pull answered `messages` (`bytes` of records) from `topic` (for `group`).
    pub fn on_pulled(&self, topic: Option<&str>, group: Option<&str>, messages: usize, bytes: usize) {
        bump(&self.counters.messages_pulled, messages as u64);
        if let Some(topic) = topic {
            let mut m = self.metrics.borrow_mut();
            m.on_pull(topic, messages, bytes);
            if let Some(group) = group {
                m.on_group_pull(topic, group, messages, bytes);
            }
        }
    }

    /// One per-second sample for the TPS, and the windows when the minute step is due.
    pub fn sample(&self, now_ms: i64) {
        let c = &self.counters;
        self.call_stats.borrow_mut().sample(Sample { at_ms: now_ms, put: c.messages_put.get(), got: c.messages_pulled.get(), lookups: c.pull_lookups.get() });
        if now_ms - self.windows_sampled_ms.get() < STATS_SAMPLE_INTERVAL_MS {
            return;
        }
        self.windows_sampled_ms.set(now_ms);
        let counters = self.metrics.borrow().stats_counters();
        self.windows.borrow_mut().tick(now_ms, counters);
    }

    /// This shard's minute/hour/day part of one key, `None` if it never counted it.
    pub fn windows_of(&self, name: StatsName, key: &str, now_ms: i64) -> Option<[WindowSum; 3]> {
        let live = self.metrics.borrow().stats_counter(name, key)?;
        let windows = self.windows.borrow().windows(name, key, live, now_ms);
        // Counted but not sampled yet: everything since the shard started.
        Some(windows.unwrap_or([WindowSum { sum: live.value, times: live.times, span_ms: now_ms - self.started_ms }; 3]))
    }

    pub fn call_stats(&self) -> Ref<'_, CallStats> {
        self.call_stats.borrow()
    }
    pub fn latency_of(&self, codes: &[i32]) -> Buckets {
        self.metrics.borrow().rpc_of(codes)
    }
    pub fn topics(&self) -> Vec<(String, TopicTraffic)> {
        self.metrics.borrow().topics()
    }
    pub fn rpc(&self) -> Vec<(i32, Buckets)> {
        self.metrics.borrow().rpc()
    }
}
