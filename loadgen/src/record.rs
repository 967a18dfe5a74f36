//! The measurements of one benchmark run, independent of the system measured (RingMQ,
//! rocketmq-broker, Redis Streams): the workload, per-interval counts and latency
//! histograms, and whole-run histograms. Writers (`omb`, `plot`, the summary table)
//! read only this.
//!
//! Invariants: latencies are microseconds in HDR histograms bounded by
//! `LATENCY_MAX_US` with 3 significant digits (values above saturate, never panic);
//! whole-run histograms exclude the warm-up; interval `elapsed_secs` are strictly
//! increasing. Transactional runs add `TxnStats` (half send, END, commit-to-visible,
//! rollbacks) folded the same way.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency recorded (60 s); larger values are clamped to it.
pub const LATENCY_MAX_US: u64 = 60_000_000;
pub const LATENCY_SIGFIG: u8 = 3;

pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_SIGFIG).expect("static histogram bounds are valid")
}

/// Records `us` (clamped into the histogram's range).
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, LATENCY_MAX_US));
}

/// What an acknowledged send promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Durability {
    /// Acknowledged after fdatasync (RingMQ/rocketmq sync flush, Redis appendfsync always).
    FsyncBeforeAck,
    /// Flushed within about a second (async flush, Redis appendfsync everysec).
    WithinOneSecond,
    /// Not on disk at all when acknowledged, and maybe never (no persistence).
    Memory,
}

impl Durability {
    pub fn label(self) -> &'static str {
        match self {
            Durability::FsyncBeforeAck => "fsync before ack",
            Durability::WithinOneSecond => "≤ 1 s",
            Durability::Memory => "memory",
        }
    }
}

/// The workload, as run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub name: String,
    pub message_bytes: usize,
    pub topics: usize,
    pub queues_per_topic: usize,
    pub producers: usize,
    pub consumers: usize,
    /// Sends (or batches) outstanding per producer.
    pub in_flight_per_producer: usize,
    /// Messages per send (1: single sends).
    pub batch_size: usize,
    /// "sync", "async" or "oneway".
    pub send_mode: String,
    /// Open-loop target (messages/s over all producers); None = as fast as possible.
    pub target_rate_per_sec: Option<f64>,
    pub duration_secs: u64,
    pub warmup_secs: u64,
}

/// What a transactional run measures besides sends and receipts (`--transactional`).
/// In a `RunRecord` histograms and counts exclude the warm-up like the others (the
/// engine reports failures of the whole run, warm-up and drain included, in `errors`).
#[derive(Debug, Clone)]
pub struct TxnStats {
    /// Share of transactions rolled back on purpose, in percent.
    pub rollback_percent: u32,
    /// Half send: from the (scheduled) start to the broker's answer.
    pub half_us: Histogram<u64>,
    /// END_TRANSACTION as a request: from issuing it to the broker's answer.
    pub end_us: Histogram<u64>,
    /// From issuing the commit (END_TRANSACTION) to the consumer receiving the message.
    pub commit_visible_us: Histogram<u64>,
    /// Transactions rolled back (and acknowledged) by the producer.
    pub rolled_back: u64,
    /// END_TRANSACTIONs that failed (the broker checks those halves later).
    pub end_failed: u64,
    /// Commits whose time could not be recorded: the commit-time table was full.
    pub untracked_commits: u64,
    /// CHECK_TRANSACTION_STATE answered by the producers' listeners.
    pub checks_answered: u64,
    /// Rolled-back messages a consumer received: a failure, always.
    pub rolled_back_received: u64,
    /// Committed messages received with no commit time in the table (a second
    /// delivery, or a commit the table had no room for).
    pub untimed_received: u64,
}

impl TxnStats {
    pub fn new(rollback_percent: u32) -> Self {
        Self {
            rollback_percent,
            half_us: new_latency_histogram(),
            end_us: new_latency_histogram(),
            commit_visible_us: new_latency_histogram(),
            rolled_back: 0,
            end_failed: 0,
            untracked_commits: 0,
            checks_answered: 0,
            rolled_back_received: 0,
            untimed_received: 0,
        }
    }

    /// Adds `o`'s histograms and counts.
    pub fn add(&mut self, o: &TxnStats) {
        self.half_us.add(&o.half_us).expect("same bounds");
        self.end_us.add(&o.end_us).expect("same bounds");
        self.commit_visible_us.add(&o.commit_visible_us).expect("same bounds");
        self.add_counts(o);
    }

    pub fn add_counts(&mut self, o: &TxnStats) {
        self.rolled_back += o.rolled_back;
        self.end_failed += o.end_failed;
        self.untracked_commits += o.untracked_commits;
        self.checks_answered += o.checks_answered;
        self.rolled_back_received += o.rolled_back_received;
        self.untimed_received += o.untimed_received;
    }
}

/// One reporting interval (usually 1 s).
#[derive(Debug, Clone)]
pub struct IntervalStats {
    /// Seconds since the start of the run at the end of this interval.
    pub elapsed_secs: f64,
    pub interval_secs: f64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub send_failed: u64,
    pub received: u64,
    /// Messages sent and not yet received at the end of the interval (when known).
    pub backlog: Option<i64>,
    pub warmup: bool,
    /// Resident memory of the broker process at the end of the interval, when watched.
    pub broker_rss_kib: Option<u64>,
    pub send_latency_us: Histogram<u64>,
    pub e2e_latency_us: Histogram<u64>,
    /// Transactional runs: this interval's transaction figures (empty otherwise).
    pub txn: TxnStats,
}

impl IntervalStats {
    pub fn new(elapsed_secs: f64, interval_secs: f64, warmup: bool) -> Self {
        Self {
            elapsed_secs,
            interval_secs,
            sent: 0,
            sent_bytes: 0,
            send_failed: 0,
            received: 0,
            backlog: None,
            warmup,
            broker_rss_kib: None,
            send_latency_us: new_latency_histogram(),
            e2e_latency_us: new_latency_histogram(),
            txn: TxnStats::new(0),
        }
    }
}

/// Everything measured in one run of one system.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// "RingMQ", "rocketmq-broker (crates.io)", "Redis Streams", ...
    pub system: String,
    /// How it was configured, e.g. "sync flush, 1 shard" or "appendfsync always".
    pub config: String,
    pub durability: Durability,
    pub workload: Workload,
    pub intervals: Vec<IntervalStats>,
    /// Whole run, warm-up excluded.
    pub send_latency_us: Histogram<u64>,
    pub e2e_latency_us: Histogram<u64>,
    /// Measured (non-warm-up) seconds.
    pub measured_secs: f64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub send_failed: u64,
    pub received: u64,
    /// Receive errors, corrupt messages and the like, with a count each.
    pub errors: Vec<(String, u64)>,
    /// Transactional runs (`--transactional`): `sent` counts commits, and the send
    /// latency is the half send plus the answered END_TRANSACTION.
    pub txn: Option<TxnStats>,
}

impl RunRecord {
    pub fn new(system: &str, config: &str, durability: Durability, workload: Workload) -> Self {
        Self {
            system: system.to_string(),
            config: config.to_string(),
            durability,
            workload,
            intervals: Vec::new(),
            send_latency_us: new_latency_histogram(),
            e2e_latency_us: new_latency_histogram(),
            measured_secs: 0.0,
            sent: 0,
            sent_bytes: 0,
            send_failed: 0,
            received: 0,
            errors: Vec::new(),
            txn: None,
        }
    }

    /// Appends an interval and folds it into the whole-run figures unless warm-up.
    pub fn push_interval(&mut self, interval: IntervalStats) {
        if let Some(last) = self.intervals.last() {
            assert!(interval.elapsed_secs > last.elapsed_secs, "intervals must move forward");
        }
        if !interval.warmup {
            self.measured_secs += interval.interval_secs;
            self.sent += interval.sent;
            self.sent_bytes += interval.sent_bytes;
            self.send_failed += interval.send_failed;
            self.received += interval.received;
            self.send_latency_us.add(&interval.send_latency_us).expect("same bounds");
            self.e2e_latency_us.add(&interval.e2e_latency_us).expect("same bounds");
            if let Some(t) = self.txn.as_mut() {
                t.add(&interval.txn);
            }
        }
        self.intervals.push(interval);
    }

    pub fn send_rate_per_sec(&self) -> f64 {
        if self.measured_secs > 0.0 {
            self.sent as f64 / self.measured_secs
        } else {
            0.0
        }
    }

    pub fn send_mib_per_sec(&self) -> f64 {
        if self.measured_secs > 0.0 {
            self.sent_bytes as f64 / self.measured_secs / (1024.0 * 1024.0)
        } else {
            0.0
        }
    }

    pub fn receive_rate_per_sec(&self) -> f64 {
        if self.measured_secs > 0.0 {
            self.received as f64 / self.measured_secs
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            name: "t".into(),
            message_bytes: 1024,
            topics: 1,
            queues_per_topic: 8,
            producers: 1,
            consumers: 1,
            in_flight_per_producer: 1,
            batch_size: 1,
            send_mode: "sync".into(),
            target_rate_per_sec: None,
            duration_secs: 2,
            warmup_secs: 1,
        }
    }

    #[test]
    fn warmup_is_excluded_from_the_whole_run() {
        let mut r = RunRecord::new("x", "y", Durability::Memory, workload());
        for (i, warm) in [(1, true), (2, false), (3, false)] {
            let mut s = IntervalStats::new(i as f64, 1.0, warm);
            s.sent = 100;
            s.sent_bytes = 102_400;
            record_us(&mut s.send_latency_us, if warm { 50_000 } else { 100 });
            r.push_interval(s);
        }
        assert_eq!(r.sent, 200);
        assert_eq!(r.send_rate_per_sec(), 100.0);
        assert!(r.send_latency_us.max() < 200, "warm-up latency excluded");
        record_us(&mut r.send_latency_us, u64::MAX);
        assert_eq!(r.send_latency_us.max(), r.send_latency_us.highest_equivalent(LATENCY_MAX_US));
    }
}
