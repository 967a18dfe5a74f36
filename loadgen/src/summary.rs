//! The end-of-run summary table (Markdown, also readable in a terminal): throughput,
//! send and end-to-end latency percentiles, errors — one row per run, labelled with
//! the system, its configuration and its durability. Transactional runs add a second
//! table (half send, END, commit-to-visible) and, beside a plain row of the same
//! workload shape and durability, the ratios.

use crate::record::RunRecord;
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// p50 / p90 / p99 / p99.9 / max in ms, or "-" when nothing was recorded.
pub fn percentiles_ms(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "-".into();
    }
    let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
    format!("{:.2} / {:.2} / {:.2} / {:.2} / {:.2}", q(0.50), q(0.90), q(0.99), q(0.999), h.max() as f64 / 1000.0)
}

pub fn table(runs: &[RunRecord]) -> String {
    let mut out = String::new();
    out.push_str("| system | config | durability | sent msg/s | MiB/s | recv msg/s | send p50/p90/p99/p99.9/max (ms) | end-to-end p50/p90/p99/p99.9/max (ms) | errors |\n");
    out.push_str("|---|---|---|---:|---:|---:|---|---|---|\n");
    for r in runs {
        let errors = if r.errors.is_empty() {
            "0".to_string()
        } else {
            r.errors.iter().map(|(what, n)| format!("{n} {what}")).collect::<Vec<_>>().join("; ")
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.1} | {:.0} | {} | {} | {} |",
            r.system,
            r.config,
            r.durability.label(),
            r.send_rate_per_sec(),
            r.send_mib_per_sec(),
            r.receive_rate_per_sec(),
            percentiles_ms(&r.send_latency_us),
            percentiles_ms(&r.e2e_latency_us),
            errors
        );
    }
    out
}

fn q_ms(h: &Histogram<u64>, p: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(p) as f64 / 1000.0
    }
}

/// The transaction table and comparisons; empty when no run is transactional.
pub fn txn_sections(runs: &[RunRecord]) -> String {
    let txn_runs: Vec<&RunRecord> = runs.iter().filter(|r| r.txn.is_some()).collect();
    if txn_runs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nTransactions (send latency above = half send + END_TRANSACTION answered; end-to-end = from the half send):\n\n\
         | system | config | durability | committed msg/s | rolled back msg/s | half send p50/p90/p99/p99.9/max (ms) | END (answered) p50/p90/p99/p99.9/max (ms) | commit→visible p50/p90/p99/p99.9/max (ms) | checks answered |\n\
         |---|---|---|---:|---:|---|---|---|---:|\n",
    );
    for r in &txn_runs {
        let t = r.txn.as_ref().expect("filtered");
        let secs = r.measured_secs.max(1e-9);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} |",
            r.system,
            r.config,
            r.durability.label(),
            r.send_rate_per_sec(),
            t.rolled_back as f64 / secs,
            percentiles_ms(&t.half_us),
            percentiles_ms(&t.end_us),
            percentiles_ms(&t.commit_visible_us),
            t.checks_answered
        );
    }
    for t in &txn_runs {
        let same_shape = |p: &&RunRecord| {
            p.txn.is_none()
                && p.workload.message_bytes == t.workload.message_bytes
                && p.workload.producers == t.workload.producers
                && p.workload.consumers == t.workload.consumers
                && p.workload.in_flight_per_producer == t.workload.in_flight_per_producer
                && p.workload.duration_secs == t.workload.duration_secs
                && p.workload.target_rate_per_sec == t.workload.target_rate_per_sec
        };
        let Some(p) = runs.iter().find(same_shape) else { continue };
        if p.durability != t.durability {
            let _ = writeln!(out, "\nNo ratio: the plain row is \"{}\" and the transactional row \"{}\".", p.durability.label(), t.durability.label());
            continue;
        }
        let tx = t.txn.as_ref().expect("filtered");
        let ratio = if p.send_rate_per_sec() > 0.0 { t.send_rate_per_sec() / p.send_rate_per_sec() } else { 0.0 };
        let _ = write!(
            out,
            "\nTransactional vs plain (same workload, both \"{}\"):\n\n\
             - throughput: {ratio:.2}x ({:.0} commits/s vs {:.0} msg/s)\n\
             - send latency p50 / p99: {:.2} / {:.2} ms (half + END) vs {:.2} / {:.2} ms ({:.2}x / {:.2}x)\n",
            t.durability.label(),
            t.send_rate_per_sec(),
            p.send_rate_per_sec(),
            q_ms(&t.send_latency_us, 0.5),
            q_ms(&t.send_latency_us, 0.99),
            q_ms(&p.send_latency_us, 0.5),
            q_ms(&p.send_latency_us, 0.99),
            q_ms(&t.send_latency_us, 0.5) / q_ms(&p.send_latency_us, 0.5).max(1e-9),
            q_ms(&t.send_latency_us, 0.99) / q_ms(&p.send_latency_us, 0.99).max(1e-9),
        );
        if !p.e2e_latency_us.is_empty() && !t.e2e_latency_us.is_empty() {
            let _ = writeln!(
                out,
                "- end-to-end p50 / p99: {:.2} / {:.2} ms (from the half send) vs {:.2} / {:.2} ms",
                q_ms(&t.e2e_latency_us, 0.5),
                q_ms(&t.e2e_latency_us, 0.99),
                q_ms(&p.e2e_latency_us, 0.5),
                q_ms(&p.e2e_latency_us, 0.99)
            );
        }
        if !tx.commit_visible_us.is_empty() {
            let _ = writeln!(out, "- commit→visible p50 / p99: {:.2} / {:.2} ms", q_ms(&tx.commit_visible_us, 0.5), q_ms(&tx.commit_visible_us, 0.99));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{new_latency_histogram, record_us};

    fn check(values_us: &[u64], expected: &str) {
        let mut h = new_latency_histogram();
        for v in values_us {
            record_us(&mut h, *v);
        }
        assert_eq!(percentiles_ms(&h), expected);
    }

    fn run(txn: bool, sent: u64, latency_us: u64) -> RunRecord {
        let w = crate::record::Workload {
            name: "e2e-1024".into(),
            message_bytes: 1024,
            topics: 1,
            queues_per_topic: 8,
            producers: 2,
            consumers: 1,
            in_flight_per_producer: 64,
            batch_size: 1,
            send_mode: if txn { "transactional".into() } else { "sync".into() },
            target_rate_per_sec: None,
            duration_secs: 1,
            warmup_secs: 0,
        };
        let mut r = RunRecord::new("RingMQ", if txn { "txn" } else { "plain" }, crate::record::Durability::WithinOneSecond, w);
        r.txn = txn.then(|| crate::record::TxnStats::new(0));
        let mut i = crate::record::IntervalStats::new(1.0, 1.0, false);
        i.sent = sent;
        record_us(&mut i.send_latency_us, latency_us);
        record_us(&mut i.e2e_latency_us, latency_us * 2);
        if txn {
            record_us(&mut i.txn.commit_visible_us, 700);
            i.txn.rolled_back = 5;
        }
        r.push_interval(i);
        r
    }

    #[test]
    fn transactions_get_their_own_table_and_ratios() {
        assert_eq!(txn_sections(&[run(false, 100, 1000)]), "", "nothing for plain runs");
        let text = txn_sections(&[run(false, 1000, 1000), run(true, 400, 2000)]);
        assert!(text.contains("| RingMQ | txn | ≤ 1 s | 400 | 5 | - | - | 0.70 / 0.70 / 0.70 / 0.70 / 0.70 | 0 |"), "{text}");
        assert!(text.contains("- throughput: 0.40x (400 commits/s vs 1000 msg/s)"), "{text}");
        assert!(text.contains("- send latency p50 / p99: 2.00 / 2.00 ms (half + END) vs 1.00 / 1.00 ms (2.00x / 2.00x)"), "{text}");
        assert!(text.contains("- end-to-end p50 / p99: 4.00 / 4.00 ms (from the half send) vs 2.00 / 2.00 ms"), "{text}");
        assert!(text.contains("- commit→visible p50 / p99: 0.70 / 0.70 ms"), "{text}");
        let mut sync = run(false, 1000, 1000);
        sync.durability = crate::record::Durability::FsyncBeforeAck;
        assert!(txn_sections(&[sync, run(true, 400, 2000)]).contains("No ratio"));
    }

    #[test]
    fn percentile_cells() {
        check(&[], "-");
        check(&[1000], "1.00 / 1.00 / 1.00 / 1.00 / 1.00");
        check(&(1..=1000).map(|i| i * 10).collect::<Vec<_>>(), "5.00 / 9.01 / 9.90 / 9.99 / 10.01");
    }
}
