//! Metric families built from published snapshots: `Values` (counters or gauges) and
//! `Histograms` over the fixed latency buckets (`Buckets`, `LATENCY_BOUNDS_US`). A
//! renderer fills them from its snapshot, registers them in a `Registry` under their
//! names, and `encode`s the registry as OpenMetrics text.
//!
//! Invariants: the registry only encodes what the snapshot holds (no state lives here);
//! every histogram has the same bounds, so series of both processes can be added up.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Upper bounds of the latency buckets, in microseconds (the last bucket is +Inf).
pub const LATENCY_BOUNDS_US: [u64; 14] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000, 5_000_000];

/// A latency histogram: counts per bucket (not cumulative) and the sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Buckets {
    pub counts: [u64; LATENCY_BOUNDS_US.len() + 1],
    pub sum_us: u64,
}

impl Buckets {
    pub fn observe(&mut self, us: u64) {
        let i = LATENCY_BOUNDS_US.iter().position(|&b| us <= b).unwrap_or(LATENCY_BOUNDS_US.len());
        self.counts[i] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other` bucket by bucket (shards of one broker, codes of one family).
    pub fn add(&mut self, other: &Buckets) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }
}

/// Label pairs of one series, in exposition order.
pub type Labels = Vec<(String, String)>;

/// A family of values taken from snapshots (the registry only encodes it).
#[derive(Debug)]
pub struct Values {
    pub kind: MetricType,
    pub series: Vec<(Labels, f64)>,
}

impl Values {
    pub fn counter(series: Vec<(Labels, f64)>) -> Self {
        Self { kind: MetricType::Counter, series }
    }

    pub fn gauge(series: Vec<(Labels, f64)>) -> Self {
        Self { kind: MetricType::Gauge, series }
    }
}

impl EncodeMetric for Values {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, v) in &self.series {
            let mut e = encoder.encode_family(labels)?;
            match self.kind {
                MetricType::Counter => e.encode_counter::<(), _, u64>(&(*v as u64), None)?,
                _ => e.encode_gauge(v)?,
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        self.kind
    }
}

/// Latency histograms, one per label set.
#[derive(Debug)]
pub struct Histograms {
    /// Bucket bounds are microseconds; exposed in the unit of the metric's name
    /// (0.001 for milliseconds, 1.0 for microseconds).
    pub scale: f64,
    pub series: Vec<(Labels, Buckets)>,
}

impl EncodeMetric for Histograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, b) in &self.series {
            let mut buckets: Vec<(f64, u64)> =
                LATENCY_BOUNDS_US.iter().zip(b.counts.iter()).map(|(&ub, &c)| (ub as f64 * self.scale, c)).collect();
            buckets.push((f64::MAX, b.counts[LATENCY_BOUNDS_US.len()]));
            encoder.encode_family(labels)?.encode_histogram::<()>(
                b.sum_us as f64 * self.scale,
                b.count(),
                &buckets,
                None,
            )?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The OpenMetrics text of `registry` (ends with `# EOF`).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_place_observations() {
        // check(observations, expected non-zero buckets (index, count), sum)
        let check = |obs: &[u64], want: &[(usize, u64)], sum: u64| {
            let mut b = Buckets::default();
            obs.iter().for_each(|&o| b.observe(o));
            let got: Vec<(usize, u64)> =
                b.counts.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| (i, c)).collect();
            assert_eq!((got.as_slice(), b.sum_us), (want, sum), "{obs:?}");
        };
        check(&[], &[], 0);
        check(&[0, 50], &[(0, 2)], 50);
        check(&[51, 100, 101], &[(1, 2), (2, 1)], 252);
        check(&[10_000_000], &[(LATENCY_BOUNDS_US.len(), 1)], 10_000_000);
    }

    #[test]
    fn families_encode_as_openmetrics() {
        let l = |v: &str| -> Labels { vec![("k".into(), v.into())] };
        let mut b = Buckets::default();
        b.observe(120);
        b.observe(2_000);
        let mut other = Buckets::default();
        other.observe(10);
        b.add(&other);
        let mut reg = Registry::default();
        reg.register("c", "a counter", Values::counter(vec![(l("x"), 3.0)]));
        reg.register("g", "a gauge", Values::gauge(vec![(l("y"), 1.5)]));
        reg.register("h_ms", "a histogram", Histograms { scale: 0.001, series: vec![(l("z"), b)] });
        let text = encode(&reg);
        // check(a line the exposition must hold)
        let check = |line: &str| assert!(text.lines().any(|x| x == line), "missing `{line}` in:\n{text}");
        check("# TYPE c counter");
        check("c_total{k=\"x\"} 3");
        check("# TYPE g gauge");
        check("g{k=\"y\"} 1.5");
        check("# TYPE h_ms histogram");
        check("h_ms_count{k=\"z\"} 3");
        check("h_ms_bucket{le=\"0.05\",k=\"z\"} 1");
        check("h_ms_bucket{le=\"0.25\",k=\"z\"} 2");
        check("h_ms_bucket{le=\"+Inf\",k=\"z\"} 3");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
