//! The live page's numbers: every `LIVE_SAMPLE_INTERVAL_MS` the backend reads each
//! master's GET_BROKER_RUNTIME_INFO; this module turns two consecutive readings of the
//! cumulative counters (messages put and pulled, the send-latency histogram) into one
//! point of the charts — messages/s in and out, send latency p50 / p99 / mean over the
//! interval — and keeps the last `LIVE_POINTS_MAX` points. Pure: the backend feeds it
//! readings and the clock.
//!
//! Invariants: memory is bounded (`LIVE_POINTS_MAX` points, `LIVE_BROKERS_MAX`
//! brokers); a counter that went backwards (a restarted broker) contributes nothing
//! to that interval rather than a negative or huge rate; an interval with no sends has
//! no latency (a gap in the chart, not a zero).

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// How often the backend reads every master's runtime info.
pub const LIVE_SAMPLE_INTERVAL_MS: u64 = 1_000;
/// Chart points kept: 5 minutes at one a second.
pub const LIVE_POINTS_MAX: usize = 300;
/// Brokers sampled; past it the rest are listed as not sampled.
pub const LIVE_BROKERS_MAX: usize = 64;
/// Histogram buckets read from one runtime-info value.
const BUCKETS_MAX: usize = 64;

/// One broker's cumulative counters at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub at_ms: i64,
    pub put: u64,
    pub got: u64,
    /// Sends per latency bucket (`latencyBucketBoundsUs`, the last unbounded).
    pub send_buckets: Vec<u64>,
    pub send_sum_us: u64,
}

fn num(table: &BTreeMap<String, String>, key: &str) -> u64 {
    table.get(key).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

fn nums(text: Option<&String>) -> Vec<u64> {
    text.map(|t| t.split_whitespace().take(BUCKETS_MAX).map(|v| v.parse().unwrap_or(0)).collect()).unwrap_or_default()
}

impl Reading {
    pub fn from_runtime(at_ms: i64, table: &BTreeMap<String, String>) -> Self {
        Self {
            at_ms,
            put: num(table, "putMessageTimesTotal"),
            got: num(table, "getMessageTransferedMsgCount"),
            send_buckets: nums(table.get("sendLatencyBucketsUs")),
            send_sum_us: num(table, "sendLatencySumUs"),
        }
    }
}

/// Bucket bounds (µs) a broker reports, capped like the buckets.
pub fn bounds_of(table: &BTreeMap<String, String>) -> Vec<u64> {
    nums(table.get("latencyBucketBoundsUs"))
}

/// One chart point: the interval ending at `t` (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    pub t: i64,
    /// Messages stored per second, all brokers.
    pub in_rate: f64,
    /// Messages delivered to consumers per second.
    pub out_rate: f64,
    /// Sends answered in the interval.
    pub sends: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: Option<f64>,
}

/// The `q` quantile (0..=1) of a histogram: counts per bucket, `bounds` the upper bounds
/// of all but the last (unbounded) bucket; interpolated linearly inside the bucket, as
/// Prometheus' `histogram_quantile`. In the unbounded bucket: the last bound.
pub fn quantile(counts: &[u64], bounds: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        if c > 0 && (below + c) as f64 >= rank {
            let Some(&upper) = bounds.get(i) else { return bounds.last().map(|&b| b as f64) };
            let lower = if i == 0 { 0 } else { bounds.get(i - 1).copied().unwrap_or(0) };
            let within = ((rank - below as f64) / c as f64).clamp(0.0, 1.0);
            return Some(lower as f64 + (upper - lower) as f64 * within);
        }
        below += c;
    }
    bounds.last().map(|&b| b as f64)
}

/// A broker as the live page lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerNow {
    pub broker_name: String,
    pub addr: String,
    /// Runtime info's "10s 1min 10min" TPS texts, as the broker computes them.
    pub put_tps: String,
    pub get_tps: String,
    pub error: Option<String>,
}

#[derive(Debug, Default)]
pub struct Live {
    points: VecDeque<Point>,
    last: BTreeMap<String, Reading>,
    brokers: Vec<BrokerNow>,
    bounds: Vec<u64>,
    error: Option<String>,
    not_sampled: usize,
}

/// One broker's answer in a sampling round: (broker name, address, runtime table).
pub type Answer = (String, String, Result<BTreeMap<String, String>, String>);

impl Live {
    /// A round in which the broker list itself could not be had (NameServer down).
    pub fn record_failure(&mut self, error: String) {
        self.error = Some(error);
        self.brokers.clear();
    }

    /// A sampling round at `now_ms`: one answer per master. Adds a point once a broker
    /// has two readings.
    pub fn record(&mut self, now_ms: i64, mut answers: Vec<Answer>) {
        self.error = None;
        self.not_sampled = answers.len().saturating_sub(LIVE_BROKERS_MAX);
        answers.truncate(LIVE_BROKERS_MAX);
        let mut point = Point { t: now_ms, in_rate: 0.0, out_rate: 0.0, sends: 0, p50_us: None, p99_us: None, mean_us: None };
        let mut buckets: Vec<u64> = Vec::new();
        let mut sum_us = 0u64;
        let mut any_interval = false;
        let mut seen = BTreeMap::new();
        self.brokers.clear();
        for (name, addr, answer) in answers {
            let table = match answer {
                Ok(t) => t,
                Err(e) => {
                    self.brokers.push(BrokerNow { broker_name: name, addr, put_tps: "-".into(), get_tps: "-".into(), error: Some(e) });
                    continue;
                }
            };
            if self.bounds.is_empty() {
                self.bounds = bounds_of(&table);
            }
            let get = |k: &str| table.get(k).cloned().unwrap_or_else(|| "-".into());
            self.brokers.push(BrokerNow { broker_name: name, addr: addr.clone(), put_tps: get("putTps"), get_tps: get("getTransferredTps"), error: None });
            let now = Reading::from_runtime(now_ms, &table);
            if let Some(prev) = self.last.get(&addr) {
                let dt_s = (now.at_ms - prev.at_ms) as f64 / 1000.0;
                let backwards = now.put < prev.put || now.got < prev.got || now.send_sum_us < prev.send_sum_us || now.send_buckets.iter().zip(&prev.send_buckets).any(|(a, b)| a < b);
                if dt_s > 0.0 && !backwards {
                    any_interval = true;
                    point.in_rate += (now.put - prev.put) as f64 / dt_s;
                    point.out_rate += (now.got - prev.got) as f64 / dt_s;
                    if buckets.len() < now.send_buckets.len() {
                        buckets.resize(now.send_buckets.len(), 0);
                    }
                    for (i, c) in now.send_buckets.iter().enumerate() {
                        buckets[i] += c - prev.send_buckets.get(i).copied().unwrap_or(0);
                    }
                    sum_us += now.send_sum_us - prev.send_sum_us;
                }
            }
            seen.insert(addr, now);
        }
        // Brokers that left the cluster are forgotten with their readings.
        self.last = seen;
        if !any_interval {
            return;
        }
        point.sends = buckets.iter().sum();
        if point.sends > 0 {
            point.p50_us = quantile(&buckets, &self.bounds, 0.5);
            point.p99_us = quantile(&buckets, &self.bounds, 0.99);
            point.mean_us = Some(sum_us as f64 / point.sends as f64);
        }
        if self.points.len() >= LIVE_POINTS_MAX {
            self.points.pop_front();
        }
        self.points.push_back(point);
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "intervalMs": LIVE_SAMPLE_INTERVAL_MS,
            "points": self.points,
            "brokers": self.brokers,
            "notSampled": self.not_sampled,
            "boundsUs": self.bounds,
            "error": self.error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [u64; 3] = [100, 1_000, 10_000];

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        // check(counts, q, expected)
        let check = |counts: &[u64], q: f64, want: Option<f64>| assert_eq!(quantile(counts, &BOUNDS, q), want, "{counts:?} q={q}");
        check(&[0, 0, 0, 0], 0.5, None);
        check(&[10, 0, 0, 0], 0.5, Some(50.0));
        check(&[10, 0, 0, 0], 1.0, Some(100.0));
        check(&[0, 10, 0, 0], 0.5, Some(550.0));
        check(&[50, 50, 0, 0], 0.5, Some(100.0));
        check(&[50, 50, 0, 0], 0.99, Some(100.0 + 900.0 * 0.98));
        check(&[0, 0, 0, 4], 0.5, Some(10_000.0));
        check(&[1, 0, 0, 99], 0.99, Some(10_000.0));
        check(&[1], 2.0, None);
        // More counts than bounds + 1: the extra buckets read as unbounded.
        check(&[0, 0, 0, 0, 7], 0.5, Some(10_000.0));
    }

    fn table(put: u64, got: u64, buckets: &str, sum: u64) -> BTreeMap<String, String> {
        [
            ("putMessageTimesTotal", put.to_string()),
            ("getMessageTransferedMsgCount", got.to_string()),
            ("sendLatencyBucketsUs", buckets.to_string()),
            ("sendLatencySumUs", sum.to_string()),
            ("latencyBucketBoundsUs", "100 1000 10000".to_string()),
            ("putTps", "1.00 2.00 3.00".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn answer(addr: &str, t: BTreeMap<String, String>) -> Answer {
        ("b".into(), addr.into(), Ok(t))
    }

    #[test]
    fn rates_and_latency_from_two_readings_of_two_brokers() {
        let mut live = Live::default();
        live.record(1_000, vec![answer("a:1", table(100, 0, "0 0 0 0", 0)), answer("b:1", table(0, 0, "", 0))]);
        assert!(live.points.is_empty(), "one reading is no interval");
        live.record(3_000, vec![answer("a:1", table(300, 50, "10 10 0 0", 6_000)), answer("b:1", table(100, 0, "0 0 0 0", 0))]);
        let p = live.points.back().expect("a point").clone();
        assert_eq!((p.t, p.in_rate, p.out_rate, p.sends), (3_000, 150.0, 25.0, 20));
        assert_eq!(p.p50_us, Some(100.0));
        assert_eq!(p.mean_us, Some(300.0));
        let json = live.to_json();
        assert_eq!(json["points"][0]["inRate"], 150.0);
        assert_eq!(json["brokers"][0]["putTps"], "1.00 2.00 3.00");
    }

    #[test]
    fn restarts_errors_and_bounds() {
        let mut live = Live::default();
        live.record(0, vec![answer("a:1", table(100, 100, "5", 5))]);
        // Restarted: every counter lower. No negative rate, no point from it.
        live.record(1_000, vec![answer("a:1", table(1, 1, "0", 0))]);
        assert!(live.points.is_empty());
        live.record(2_000, vec![answer("a:1", table(11, 1, "0", 0))]);
        assert_eq!(live.points.back().map(|p| (p.in_rate, p.p50_us)), Some((10.0, None)), "no sends: no latency");
        live.record(3_000, vec![("b".into(), "a:1".into(), Err("cannot connect".into()))]);
        assert_eq!(live.to_json()["brokers"][0]["error"], "cannot connect");
        live.record_failure("no NameServer answered".into());
        assert_eq!(live.to_json()["error"], "no NameServer answered");
        for i in 0..(LIVE_POINTS_MAX as i64 + 10) {
            live.record(10_000 + i * 1_000, vec![answer("a:1", table(i as u64, 0, "", 0))]);
        }
        assert_eq!(live.points.len(), LIVE_POINTS_MAX);
        let many: Vec<Answer> = (0..LIVE_BROKERS_MAX + 3).map(|i| answer(&format!("h:{i}"), table(0, 0, "", 0))).collect();
        live.record(1_000_000, many);
        assert_eq!(live.to_json()["notSampled"], 3);
        assert_eq!(live.brokers.len(), LIVE_BROKERS_MAX);
    }
}
