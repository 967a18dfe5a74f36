//! The end-of-run summary table (Markdown, also readable in a terminal): throughput,
//! send and end-to-end latency percentiles, errors — one row per run, labelled with
//! the system, its configuration and its durability.

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

    #[test]
    fn percentile_cells() {
        check(&[], "-");
        check(&[1000], "1.00 / 1.00 / 1.00 / 1.00 / 1.00");
        check(&(1..=1000).map(|i| i * 10).collect::<Vec<_>>(), "5.00 / 9.01 / 9.90 / 9.99 / 10.01");
    }
}
