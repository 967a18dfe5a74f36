//! RocketMQ's `StoreStatsService` figures for GET_BROKER_RUNTIME_INFO: TPS over the last
//! 10 s, 1 min and 10 min (`putTps`, `getTransferredTps`, `getTotalTps`: "a b c") from a ring of
//! per-second samples of a shard's counters, and the day boundaries of the totals
//! (`msgPutTotalTodayMorning`, `...YesterdayMorning`), as mqadmin's brokerStatus and
//! clusterList read them.
//!
//! Invariant: at most `SAMPLES_MAX` samples (10 min + 1 at one per second).

use std::collections::VecDeque;

/// One sample per second, ten minutes and one.
pub const SAMPLES_MAX: usize = 601;
/// Windows of `putTps` and friends, in samples (seconds).
pub const TPS_WINDOWS: [usize; 3] = [10, 60, 600];
const DAY_MS: i64 = 86_400_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    pub at_ms: i64,
    /// Messages put.
    pub put: u64,
    /// Messages transferred to pullers.
    pub got: u64,
    /// Store lookups of pulls, found or not (Java's `getMessage` calls: its
    /// `getMessageTimesTotalFound` + `getMessageTimesTotalMiss`).
    pub lookups: u64,
}

#[derive(Debug, Default)]
pub struct CallStats {
    samples: VecDeque<Sample>,
    /// (day number, put total, got total) at the start of today and of yesterday.
    today_morning: Option<(i64, u64, u64)>,
    yesterday_morning: Option<(i64, u64, u64)>,
}

impl CallStats {
    pub fn sample(&mut self, s: Sample) {
        let day = s.at_ms.div_euclid(DAY_MS);
        match self.today_morning {
            None => self.today_morning = Some((day, 0, 0)),
            Some((d, ..)) if d < day => {
                self.yesterday_morning = self.today_morning;
                self.today_morning = Some((day, s.put, s.got));
            }
            _ => {}
        }
        if self.samples.len() == SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// Messages per second put and transferred over the last `window` samples; `None`
    /// until that many samples exist (Java answers "" then).
    pub fn tps(&self, window: usize) -> Option<(f64, f64)> {
        Some((self.rate(window, |s| s.put)?, self.rate(window, |s| s.got)?))
    }

    /// Per second of one counter over the last `window` samples; `None` until that many
    /// samples exist.
    fn rate(&self, window: usize, counter: impl Fn(&Sample) -> u64) -> Option<f64> {
        let last = self.samples.back()?;
        let before = self.samples.get(self.samples.len().checked_sub(window + 1)?)?;
        let secs = (last.at_ms - before.at_ms) as f64 / 1000.0;
        if secs <= 0.0 {
            return None;
        }
        Some(counter(last).saturating_sub(counter(before)) as f64 / secs)
    }

    /// "a b c" for the three windows, put (`true`) or transferred; a window without
    /// enough samples yet is 0.
    pub fn tps_text(&self, put: bool) -> String {
        TPS_WINDOWS
            .iter()
            .map(|&w| self.tps(w).map(|(p, g)| if put { p } else { g }).unwrap_or(0.0))
            .map(|v| format!("{v:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Java's `getTotalTps`: pull lookups per second, found plus missed (each pass of a
    /// suspended pull counts, as each of Java's `getMessage` calls does), "a b c" for
    /// the three windows, a window without enough samples yet 0 (Java's too). Written
    /// with two decimals like `putTps` (Java's `Double.toString`: a reader parses a
    /// double either way, and a merged text is written so too).
    pub fn lookups_tps_text(&self) -> String {
        TPS_WINDOWS.iter().map(|&w| format!("{:.2}", self.rate(w, |s| s.lookups).unwrap_or(0.0))).collect::<Vec<_>>().join(" ")
    }

    /// (put, got) totals at the start of today and of yesterday (0 before this run saw
    /// them).
    pub fn mornings(&self) -> ((u64, u64), (u64, u64)) {
        let t = self.today_morning.map(|(_, p, g)| (p, g)).unwrap_or_default();
        let y = self.yesterday_morning.map(|(_, p, g)| (p, g)).unwrap_or_default();
        (t, y)
    }
}

/// Sums "a b c" TPS texts component by component (shards of one broker).
pub fn add_tps_text(a: &str, b: &str) -> String {
    let parse = |s: &str| s.split_whitespace().map(|v| v.parse::<f64>().unwrap_or(0.0)).collect::<Vec<_>>();
    let (x, y) = (parse(a), parse(b));
    (0..x.len().max(y.len())).map(|i| format!("{:.2}", x.get(i).unwrap_or(&0.0) + y.get(i).unwrap_or(&0.0))).collect::<Vec<_>>().join(" ")
}

/// Sums texts of space-separated counts element by element (histogram buckets of the
/// shards of one broker); a value that does not parse counts as 0.
pub fn add_counts_text(a: &str, b: &str) -> String {
    let parse = |s: &str| s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
    let (x, y) = (parse(a), parse(b));
    (0..x.len().max(y.len())).map(|i| x.get(i).unwrap_or(&0).saturating_add(*y.get(i).unwrap_or(&0)).to_string()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tps_over_windows_and_day_boundaries() {
        let mut c = CallStats::default();
        assert_eq!(c.tps_text(true), "0.00 0.00 0.00");
        assert_eq!(c.lookups_tps_text(), "0.00 0.00 0.00");
        // 100 puts and 50 transfers per second, for 61 seconds, starting just before midnight.
        let start = DAY_MS * 3 - 30_000;
        for i in 0..=61u64 {
            c.sample(Sample { at_ms: start + i as i64 * 1000, put: i * 100, got: i * 50, lookups: i * 20 });
        }
        // check(window, expected (put, got) tps)
        let check = |w: usize, want: Option<(f64, f64)>| assert_eq!(c.tps(w), want, "window {w}");
        check(10, Some((100.0, 50.0)));
        check(60, Some((100.0, 50.0)));
        check(600, None);
        assert_eq!(c.tps_text(true), "100.00 100.00 0.00");
        assert_eq!(c.tps_text(false), "50.00 50.00 0.00");
        assert_eq!(c.lookups_tps_text(), "20.00 20.00 0.00");
        // Midnight fell at sample 30: today's morning is that total, yesterday's this run's start.
        assert_eq!(c.mornings(), ((3000, 1500), (0, 0)));
        // The ring is bounded.
        for i in 62..2000u64 {
            c.sample(Sample { at_ms: start + i as i64 * 1000, put: i * 100, got: i * 50, lookups: i * 20 });
        }
        assert_eq!(c.samples.len(), SAMPLES_MAX);
        assert_eq!(c.tps(600), Some((100.0, 50.0)));
    }

    #[test]
    fn tps_texts_add_up() {
        // check(a, b, sum)
        let check = |a: &str, b: &str, want: &str| assert_eq!(add_tps_text(a, b), want);
        check("1.50 2.00 3.00", "1.00 1.00 1.00", "2.50 3.00 4.00");
        check("", "1.00 1.00 1.00", "1.00 1.00 1.00");
        check("x 1", "1", "1.00 1.00");
    }

    #[test]
    fn count_texts_add_up() {
        // check(a, b, sum)
        let check = |a: &str, b: &str, want: &str| assert_eq!(add_counts_text(a, b), want);
        check("1 2 3", "10 0 1", "11 2 4");
        check("", "4 5", "4 5");
        check("x 1", "2", "2 1");
        check(&u64::MAX.to_string(), "1", &u64::MAX.to_string());
    }
}
