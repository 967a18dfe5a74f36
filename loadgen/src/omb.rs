//! OpenMessaging-Benchmark-compatible results: a [`RunRecord`] as OMB's `TestResult`
//! JSON (camelCase fields, latencies in milliseconds as floats, rates per second, one
//! array element per measured interval), plus a `ringmq` object with what OMB has no
//! field for (system, config, durability, workload, totals, errors, machine facts and
//! the whole-run HDR histograms, V2-deflate serialized and base64-encoded).
//!
//! Invariants: warm-up intervals never appear in the per-interval arrays, and every
//! per-interval array (and `ringmq.intervalEndSecs`) has exactly one element per
//! measured interval, in order; every number written is finite (an empty histogram
//! reads as 0 ms); a results file is replaced atomically (temp file + rename) and is
//! never left half-written.

use crate::record::{IntervalStats, RunRecord};
use crate::report::{self, MachineInfo};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializeError, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Percentile levels (0–100) written to the `aggregated*LatencyQuantiles` maps.
pub const QUANTILE_PERCENTS: [f64; 18] =
    [1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 99.9995, 99.9999, 100.0];

/// Longest base64 text `decode_histogram` accepts (a full-range histogram deflates to
/// well under a MiB).
pub const HISTOGRAM_BASE64_BYTES_MAX: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OmbError {
    /// The results directory could not be created: check the path and permissions.
    #[error("create directory {path}: {source}")]
    CreateDir { path: PathBuf, source: std::io::Error },
    /// The results file could not be written or renamed into place; the old file (if
    /// any) is unchanged.
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    /// JSON serialization failed (a bug: every value written is plain data).
    #[error("serialize results: {0}")]
    Json(#[from] serde_json::Error),
    /// A histogram could not be serialized (a bug: it is written to memory).
    #[error("serialize histogram: {0}")]
    HistogramEncode(#[from] V2DeflateSerializeError),
    /// The text is not base64, or is longer than `HISTOGRAM_BASE64_BYTES_MAX`.
    #[error("histogram is not valid base64: {0}")]
    Base64(String),
    /// The bytes are not an HdrHistogram V2 (deflate) histogram.
    #[error("histogram does not decode: {0}")]
    HistogramDecode(#[from] hdrhistogram::serialization::DeserializeError),
}

/// Facts about the machine and the invocation, collected once per results file by the
/// caller (tests pass fixed values).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineFacts {
    pub kernel: String,
    pub cpu_model: String,
    /// Logical CPUs.
    pub cpu_count: usize,
    pub mem_total_kib: u64,
    /// The directory the systems measured kept their data in, and its filesystem.
    pub data_dir: String,
    pub filesystem: String,
    /// HEAD at run time, and the uncommitted paths then.
    pub git_commit: String,
    pub git_dirty_paths: usize,
    /// HEAD when the binary was built, and the uncommitted paths then.
    pub build_commit: String,
    pub build_dirty_paths: String,
    pub rustc: String,
    /// The exact command line, shell-quoted.
    pub command_line: String,
    /// When the facts were collected, e.g. "2025-01-31T12:00:00Z".
    pub utc: String,
}

impl MachineFacts {
    /// Collects the facts now, for data kept under `data_dir`.
    pub fn collect(data_dir: &Path) -> Self {
        Self::from_info(&MachineInfo::collect(data_dir, report::command_line()), report::utc_now())
    }

    /// The facts in `info` (as the store bench collects them), stamped `utc`.
    pub fn from_info(info: &MachineInfo, utc: String) -> Self {
        MachineFacts {
            kernel: info.kernel.clone(),
            cpu_model: info.cpu_model.clone(),
            cpu_count: info.cpu_count,
            mem_total_kib: info.mem_total_kib,
            data_dir: info.bench_dir.clone(),
            filesystem: info.bench_fs.clone(),
            git_commit: info.git_commit.clone(),
            git_dirty_paths: info.git_dirty_paths,
            build_commit: info.build_commit.clone(),
            build_dirty_paths: info.build_dirty_paths.clone(),
            rustc: info.rustc.clone(),
            command_line: info.command_line.clone(),
            utc,
        }
    }
}

/// Microseconds as milliseconds.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A finite float for JSON (serde_json writes NaN and infinities as `null`).
fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

fn per_sec(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        finite(count as f64 / secs)
    } else {
        0.0
    }
}

/// OMB's latency figures of one histogram, in OMB's order: avg, 50, 75, 95, 99, 99.9,
/// 99.99, max (ms).
fn latency_figures(h: &Histogram<u64>) -> [f64; 8] {
    if h.is_empty() {
        return [0.0; 8];
    }
    let q = |quantile: f64| ms(h.value_at_quantile(quantile));
    [finite(h.mean() / 1000.0), q(0.50), q(0.75), q(0.95), q(0.99), q(0.999), q(0.9999), ms(h.max())]
}

/// OMB's field suffixes, matching `latency_figures`.
const LATENCY_SUFFIXES: [&str; 8] = ["Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max"];

/// A percentile as Java's `Double.toString` writes it for these levels ("50.0", "99.9"),
/// the key OMB's `TreeMap<Double, Double>` serializes to.
fn percent_key(percent: f64) -> String {
    let s = format!("{percent}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

fn quantile_map(h: &Histogram<u64>) -> Value {
    let mut map = Map::new();
    for p in QUANTILE_PERCENTS {
        let value = if h.is_empty() { 0.0 } else { ms(h.value_at_quantile(p / 100.0)) };
        map.insert(percent_key(p), json!(value));
    }
    Value::Object(map)
}

/// Base64 of the V2-deflate serialization of `h`.
pub fn encode_histogram(h: &Histogram<u64>) -> Result<String, OmbError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes)?;
    Ok(BASE64.encode(bytes))
}

/// The histogram `encode_histogram` wrote (or any base64 HdrHistogram V2 / V2 deflate).
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, OmbError> {
    if text.len() > HISTOGRAM_BASE64_BYTES_MAX {
        return Err(OmbError::Base64(format!("{} bytes, more than {HISTOGRAM_BASE64_BYTES_MAX}", text.len())));
    }
    let bytes = BASE64.decode(text.trim()).map_err(|e| OmbError::Base64(e.to_string()))?;
    Ok(Deserializer::new().deserialize(&mut bytes.as_slice())?)
}

/// Messages sent and not yet received at the end of each interval: the recorded value,
/// or (like OMB) everything sent so far minus everything received so far, warm-up
/// included.
fn backlogs(intervals: &[IntervalStats]) -> Vec<i64> {
    let (mut sent, mut received) = (0i64, 0i64);
    intervals
        .iter()
        .map(|i| {
            sent = sent.saturating_add(i64::try_from(i.sent).unwrap_or(i64::MAX));
            received = received.saturating_add(i64::try_from(i.received).unwrap_or(i64::MAX));
            i.backlog.unwrap_or(sent.saturating_sub(received))
        })
        .collect()
}

/// One run as an OMB `TestResult` object with a `ringmq` object added.
pub fn to_omb_json(run: &RunRecord, facts: &MachineFacts) -> Result<Value, OmbError> {
    let w = &run.workload;
    let topics = w.topics.max(1);
    let measured: Vec<(&IntervalStats, i64)> = run.intervals.iter().zip(backlogs(&run.intervals)).filter(|(i, _)| !i.warmup).collect();

    let mut out = Map::new();
    out.insert("workload".into(), json!(w.name));
    out.insert("driver".into(), json!(run.system));
    out.insert("messageSize".into(), json!(w.message_bytes));
    out.insert("topics".into(), json!(w.topics));
    out.insert("partitions".into(), json!(w.queues_per_topic));
    out.insert("producersPerTopic".into(), json!(w.producers.div_ceil(topics)));
    out.insert("consumersPerTopic".into(), json!(w.consumers.div_ceil(topics)));
    let series = |f: &dyn Fn(&IntervalStats) -> f64| -> Value { json!(measured.iter().map(|(i, _)| f(i)).collect::<Vec<f64>>()) };
    out.insert("publishRate".into(), series(&|i| per_sec(i.sent, i.interval_secs)));
    out.insert("publishErrorRate".into(), series(&|i| per_sec(i.send_failed, i.interval_secs)));
    out.insert("consumeRate".into(), series(&|i| per_sec(i.received, i.interval_secs)));
    out.insert("backlog".into(), json!(measured.iter().map(|(_, b)| *b).collect::<Vec<i64>>()));

    let send: fn(&IntervalStats) -> &Histogram<u64> = |i| &i.send_latency_us;
    let e2e: fn(&IntervalStats) -> &Histogram<u64> = |i| &i.e2e_latency_us;
    for (prefix, pick) in [("publishLatency", send), ("endToEndLatency", e2e)] {
        let figures: Vec<[f64; 8]> = measured.iter().map(|(i, _)| latency_figures(pick(i))).collect();
        for (k, suffix) in LATENCY_SUFFIXES.iter().enumerate() {
            out.insert(format!("{prefix}{suffix}"), json!(figures.iter().map(|f| f[k]).collect::<Vec<f64>>()));
        }
    }
    for (prefix, h) in [("aggregatedPublishLatency", &run.send_latency_us), ("aggregatedEndToEndLatency", &run.e2e_latency_us)] {
        for (suffix, value) in LATENCY_SUFFIXES.iter().zip(latency_figures(h)) {
            out.insert(format!("{prefix}{suffix}"), json!(value));
        }
        out.insert(format!("{prefix}Quantiles"), quantile_map(h));
    }

    let errors: Vec<Value> = run.errors.iter().map(|(kind, count)| json!({ "kind": kind, "count": count })).collect();
    out.insert(
        "ringmq".into(),
        json!({
            "system": run.system,
            "config": run.config,
            "durability": run.durability.label(),
            "durabilityKind": run.durability,
            "workload": w,
            "intervalEndSecs": measured.iter().map(|(i, _)| finite(i.elapsed_secs)).collect::<Vec<f64>>(),
            "warmupIntervals": run.intervals.len() - measured.len(),
            "totals": {
                "sent": run.sent,
                "sentBytes": run.sent_bytes,
                "sendFailed": run.send_failed,
                "received": run.received,
                "measuredSecs": finite(run.measured_secs),
                "sendRatePerSec": finite(run.send_rate_per_sec()),
                "sendMibPerSec": finite(run.send_mib_per_sec()),
                "receiveRatePerSec": finite(run.receive_rate_per_sec()),
            },
            "errors": errors,
            "machine": facts,
            "histograms": {
                "encoding": "HdrHistogram V2 deflate, base64",
                "unit": "us",
                "publishLatency": encode_histogram(&run.send_latency_us)?,
                "endToEndLatency": encode_histogram(&run.e2e_latency_us)?,
            },
        }),
    );
    if let Some(t) = &run.txn {
        let ringmq = out.get_mut("ringmq").and_then(Value::as_object_mut).expect("just inserted");
        ringmq.insert(
            "transactions".into(),
            json!({
                "rollbackPercent": t.rollback_percent,
                "committed": run.sent,
                "rolledBack": t.rolled_back,
                "endFailed": t.end_failed,
                "untrackedCommits": t.untracked_commits,
                "checksAnswered": t.checks_answered,
                "rolledBackReceived": t.rolled_back_received,
                "untimedReceived": t.untimed_received,
                "sendLatency": "half send + END_TRANSACTION answered",
                "halfSendLatencyQuantiles": quantile_map(&t.half_us),
                "endTransactionLatencyQuantiles": quantile_map(&t.end_us),
                "commitToVisibleLatencyQuantiles": quantile_map(&t.commit_visible_us),
            }),
        );
        if let Some(h) = ringmq.get_mut("histograms").and_then(Value::as_object_mut) {
            h.insert("halfSendLatency".into(), json!(encode_histogram(&t.half_us)?));
            h.insert("endTransactionLatency".into(), json!(encode_histogram(&t.end_us)?));
            h.insert("commitToVisibleLatency".into(), json!(encode_histogram(&t.commit_visible_us)?));
        }
    }
    Ok(Value::Object(out))
}

/// The results file's JSON: `{"machine": facts, "runs": [TestResult, ...]}`.
pub fn results_json(runs: &[RunRecord], facts: &MachineFacts) -> Result<Value, OmbError> {
    let runs = runs.iter().map(|r| to_omb_json(r, facts)).collect::<Result<Vec<Value>, OmbError>>()?;
    Ok(json!({ "machine": facts, "runs": runs }))
}

/// Writes `runs` (one suite step, or several) to `path`, creating parent directories;
/// the file is replaced atomically.
pub fn write_results(path: &Path, runs: &[RunRecord], facts: &MachineFacts) -> Result<(), OmbError> {
    let mut text = serde_json::to_string_pretty(&results_json(runs, facts)?)?;
    text.push('\n');
    write_atomically(path, text.as_bytes())
}

/// Writes `bytes` to a temp file next to `path`, syncs it and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OmbError> {
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => {
            std::fs::create_dir_all(p).map_err(|source| OmbError::CreateDir { path: p.to_path_buf(), source })?;
            p
        }
        None => Path::new("."),
    };
    let werr = |source| OmbError::Write { path: path.to_path_buf(), source };
    let mut tmp = tempfile::Builder::new().prefix(".omb-").suffix(".tmp").tempfile_in(parent).map_err(werr)?;
    tmp.write_all(bytes).map_err(werr)?;
    tmp.as_file().sync_all().map_err(werr)?;
    tmp.persist(path).map_err(|e| werr(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{record_us, Durability, Workload};

    fn facts() -> MachineFacts {
        MachineFacts {
            kernel: "6.1.0-test".into(),
            cpu_model: "Test CPU @ 1 GHz".into(),
            cpu_count: 2,
            mem_total_kib: 4 * 1024 * 1024,
            data_dir: "/data".into(),
            filesystem: "ext4".into(),
            git_commit: "0123456789abcdef".into(),
            git_dirty_paths: 0,
            build_commit: "0123456789abcdef".into(),
            build_dirty_paths: "0".into(),
            rustc: "rustc 1.80.0".into(),
            command_line: "loadgen suite --out 'a b'".into(),
            utc: "2025-01-31T12:00:00Z".into(),
        }
    }

    fn workload() -> Workload {
        Workload {
            name: "1-topic-8-queues-1kb".into(),
            message_bytes: 1024,
            topics: 2,
            queues_per_topic: 8,
            producers: 3,
            consumers: 4,
            in_flight_per_producer: 32,
            batch_size: 1,
            send_mode: "async".into(),
            target_rate_per_sec: None,
            duration_secs: 2,
            warmup_secs: 1,
        }
    }

    /// One interval: (warm-up, sent, failed, received, backlog, send latency µs × count,
    /// end-to-end latency µs × count).
    type Spec = (bool, u64, u64, u64, Option<i64>, (u64, u64), (u64, u64));

    /// A run of 1 s intervals built from `specs`.
    fn run(specs: &[Spec]) -> RunRecord {
        let mut r = RunRecord::new("RingMQ", "sync flush, 1 shard", Durability::FsyncBeforeAck, workload());
        for (n, &(warmup, sent, failed, received, backlog, (send_us, send_n), (e2e_us, e2e_n))) in specs.iter().enumerate() {
            let mut s = IntervalStats::new(n as f64 + 1.0, 1.0, warmup);
            s.sent = sent;
            s.sent_bytes = sent * 1024;
            s.send_failed = failed;
            s.received = received;
            s.backlog = backlog;
            for _ in 0..send_n {
                record_us(&mut s.send_latency_us, send_us);
            }
            for _ in 0..e2e_n {
                record_us(&mut s.e2e_latency_us, e2e_us);
            }
            r.push_interval(s);
        }
        r.errors.push(("corrupt body".into(), 2));
        r
    }

    /// Checks that the OMB JSON of `run` has `expected` at each JSON pointer.
    fn check(run: &RunRecord, expected: &[(&str, Value)]) {
        let v = to_omb_json(run, &facts()).expect("encodes");
        for (pointer, want) in expected {
            assert_eq!(v.pointer(pointer), Some(want), "at {pointer}");
        }
    }

    #[test]
    fn omb_fields() {
        let steady = run(&[
            (true, 10, 0, 5, None, (50_000, 10), (90_000, 5)),
            (false, 1000, 1, 1000, None, (1000, 1000), (1500, 1000)),
            (false, 2000, 0, 1500, Some(7), (2000, 1000), (1800, 500)),
        ]);
        check(
            &steady,
            &[
                ("/workload", json!("1-topic-8-queues-1kb")),
                ("/driver", json!("RingMQ")),
                ("/messageSize", json!(1024)),
                ("/topics", json!(2)),
                ("/partitions", json!(8)),
                ("/producersPerTopic", json!(2)),
                ("/consumersPerTopic", json!(2)),
                // Warm-up dropped: one element per measured interval.
                ("/publishRate", json!([1000.0, 2000.0])),
                ("/publishErrorRate", json!([1.0, 0.0])),
                ("/consumeRate", json!([1000.0, 1500.0])),
                // Unknown backlog: cumulative sent − received, warm-up included.
                ("/backlog", json!([5, 7])),
                // 1000 values of 1000 µs: every figure 1.0 ms (below 2048 µs values are exact).
                ("/publishLatencyAvg", json!([1.0, 2.0])),
                ("/publishLatency50pct", json!([1.0, 2.0])),
                ("/publishLatency75pct", json!([1.0, 2.0])),
                ("/publishLatency95pct", json!([1.0, 2.0])),
                ("/publishLatency99pct", json!([1.0, 2.0])),
                ("/publishLatency999pct", json!([1.0, 2.0])),
                ("/publishLatency9999pct", json!([1.0, 2.0])),
                ("/publishLatencyMax", json!([1.0, 2.0])),
                ("/endToEndLatencyAvg", json!([1.5, 1.8])),
                ("/endToEndLatency50pct", json!([1.5, 1.8])),
                ("/endToEndLatencyMax", json!([1.5, 1.8])),
                // Whole run: 1000 × 1 ms and 1000 × 2 ms, warm-up's 50 ms excluded.
                ("/aggregatedPublishLatencyAvg", json!(1.5)),
                ("/aggregatedPublishLatency50pct", json!(1.0)),
                ("/aggregatedPublishLatency75pct", json!(2.0)),
                ("/aggregatedPublishLatency9999pct", json!(2.0)),
                ("/aggregatedPublishLatencyMax", json!(2.0)),
                ("/aggregatedPublishLatencyQuantiles/50.0", json!(1.0)),
                ("/aggregatedPublishLatencyQuantiles/99.9", json!(2.0)),
                ("/aggregatedPublishLatencyQuantiles/100.0", json!(2.0)),
                // 1000 × 1.5 ms and 500 × 1.8 ms.
                ("/aggregatedEndToEndLatency50pct", json!(1.5)),
                ("/aggregatedEndToEndLatency75pct", json!(1.8)),
                ("/aggregatedEndToEndLatencyMax", json!(1.8)),
                ("/aggregatedEndToEndLatencyQuantiles/1.0", json!(1.5)),
                ("/ringmq/system", json!("RingMQ")),
                ("/ringmq/config", json!("sync flush, 1 shard")),
                ("/ringmq/durability", json!("fsync before ack")),
                ("/ringmq/durabilityKind", json!("FsyncBeforeAck")),
                ("/ringmq/workload/queues_per_topic", json!(8)),
                ("/ringmq/workload/target_rate_per_sec", Value::Null),
                ("/ringmq/intervalEndSecs", json!([2.0, 3.0])),
                ("/ringmq/warmupIntervals", json!(1)),
                ("/ringmq/totals/sent", json!(3000)),
                ("/ringmq/totals/sentBytes", json!(3000 * 1024)),
                ("/ringmq/totals/sendFailed", json!(1)),
                ("/ringmq/totals/received", json!(2500)),
                ("/ringmq/totals/measuredSecs", json!(2.0)),
                ("/ringmq/totals/sendRatePerSec", json!(1500.0)),
                ("/ringmq/totals/sendMibPerSec", json!(1500.0 * 1024.0 / (1024.0 * 1024.0))),
                ("/ringmq/errors", json!([{ "kind": "corrupt body", "count": 2 }])),
                ("/ringmq/machine/kernel", json!("6.1.0-test")),
                ("/ringmq/machine/cpuCount", json!(2)),
                ("/ringmq/machine/filesystem", json!("ext4")),
                ("/ringmq/machine/commandLine", json!("loadgen suite --out 'a b'")),
                ("/ringmq/machine/utc", json!("2025-01-31T12:00:00Z")),
                ("/ringmq/histograms/unit", json!("us")),
            ],
        );
        // No samples at all: zeros, never NaN or null.
        let silent = run(&[(false, 0, 0, 0, None, (0, 0), (0, 0))]);
        check(
            &silent,
            &[
                ("/publishRate", json!([0.0])),
                ("/publishLatencyAvg", json!([0.0])),
                ("/publishLatencyMax", json!([0.0])),
                ("/aggregatedEndToEndLatencyAvg", json!(0.0)),
                ("/aggregatedEndToEndLatencyQuantiles/99.99", json!(0.0)),
                ("/ringmq/totals/sendRatePerSec", json!(0.0)),
            ],
        );
        // Only warm-up: empty arrays.
        let warm = run(&[(true, 5, 0, 5, None, (10, 1), (10, 1))]);
        check(&warm, &[("/publishRate", json!([])), ("/backlog", json!([])), ("/ringmq/intervalEndSecs", json!([]))]);
    }

    #[test]
    fn one_array_element_per_measured_interval() {
        let specs: Vec<Spec> = (0..7).map(|n| (n < 2, 100, 0, 100, None, (500, 10), (800, 10))).collect();
        let v = to_omb_json(&run(&specs), &facts()).expect("encodes");
        let arrays: Vec<(&String, usize)> =
            v.as_object().expect("object").iter().filter_map(|(k, v)| v.as_array().map(|a| (k, a.len()))).collect();
        // 3 rates + backlog + 2 × 8 latency series.
        assert_eq!(arrays.len(), 20, "{arrays:?}");
        for (k, len) in arrays {
            assert_eq!(len, 5, "{k}");
        }
    }

    #[test]
    fn quantile_keys_are_java_percent_doubles() {
        let v = to_omb_json(&run(&[(false, 1, 0, 1, None, (1000, 1), (1000, 1))]), &facts()).expect("encodes");
        for field in ["aggregatedPublishLatencyQuantiles", "aggregatedEndToEndLatencyQuantiles"] {
            let keys: Vec<&str> = v[field].as_object().expect("map").keys().map(String::as_str).collect();
            let mut expected: Vec<String> = QUANTILE_PERCENTS.iter().map(|&p| percent_key(p)).collect();
            expected.sort();
            assert_eq!(keys, expected, "{field}");
            assert!(keys.contains(&"99.99") && keys.contains(&"50.0") && keys.contains(&"100.0"));
            assert!(keys.iter().all(|k| k.parse::<f64>().is_ok()));
        }
    }

    #[test]
    fn histograms_round_trip() {
        let r = run(&[(false, 5, 0, 5, None, (1, 3), (59_999_000, 2)), (false, 5, 0, 5, None, (123_456, 7), (17, 1))]);
        let v = to_omb_json(&r, &facts()).expect("encodes");
        for (field, original) in [("publishLatency", &r.send_latency_us), ("endToEndLatency", &r.e2e_latency_us)] {
            let text = v["ringmq"]["histograms"][field].as_str().expect("string");
            let back = decode_histogram(text).expect("decodes");
            assert_eq!(&back, original, "{field}");
            assert_eq!(back.len(), original.len());
            assert_eq!(back.max(), original.max());
        }
        let empty = crate::record::new_latency_histogram();
        assert_eq!(decode_histogram(&encode_histogram(&empty).expect("encodes")).expect("decodes"), empty);
        assert!(matches!(decode_histogram("not base64!"), Err(OmbError::Base64(_))));
        assert!(matches!(decode_histogram(&BASE64.encode(b"not a histogram")), Err(OmbError::HistogramDecode(_))));
    }

    #[test]
    fn results_file_parses_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested/deeper/results.json");
        let runs = [
            run(&[(false, 10, 0, 10, None, (1000, 10), (2000, 10))]),
            run(&[(true, 10, 0, 10, None, (1000, 10), (2000, 10)), (false, 20, 0, 20, Some(0), (1500, 20), (2500, 20))]),
        ];
        write_results(&path, &runs, &facts()).expect("writes");
        // Rewriting replaces the file in place.
        write_results(&path, &runs, &facts()).expect("rewrites");
        let text = std::fs::read_to_string(&path).expect("reads");
        let v: Value = serde_json::from_str(&text).expect("parses");
        assert_eq!(v["machine"], serde_json::to_value(facts()).expect("facts"));
        assert_eq!(v["runs"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["runs"][1]["publishRate"], json!([20.0]));
        assert_eq!(v["runs"][1], to_omb_json(&runs[1], &facts()).expect("encodes"));
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().expect("parent"))
            .expect("lists")
            .filter_map(Result::ok)
            .filter(|e| e.file_name() != "results.json")
            .collect();
        assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    }

    #[test]
    fn facts_from_info_keep_every_field() {
        let info = MachineInfo::collect(Path::new("."), "loadgen x".into());
        let f = MachineFacts::from_info(&info, "2025-01-01T00:00:00Z".into());
        assert_eq!((f.kernel.as_str(), f.cpu_count, f.command_line.as_str()), (info.kernel.as_str(), info.cpu_count, "loadgen x"));
        assert_eq!(f.utc, "2025-01-01T00:00:00Z");
    }
}
