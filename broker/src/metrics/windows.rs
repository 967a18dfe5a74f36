//! RocketMQ's `StatsItem` windows for VIEW_BROKER_STATS_DATA (mqadmin statsAll): per
//! stats key, the sum, per-second rate and sum per update over the last minute, hour
//! and day, from samples of the shard's cumulative counters (`ShardMetrics`) taken as
//! Java takes them — every 10 s (kept 7: a minute), every 10 min (7: an hour), every
//! hour (25: a day).
//!
//! A window's figures are the live counter minus the oldest sample the window keeps, so
//! a key is visible from its first message on (Java waits for the next sample).
//!
//! Invariants: at most `STATS_KEYS_MAX` keys per shard (later keys are not tracked, and
//! said so once in the log); at most 7 + 7 + 25 samples per key.

use std::collections::{HashMap, VecDeque};

/// Keys (a topic, or `topic@group`) tracked per shard and stats name.
pub const STATS_KEYS_MAX: usize = 8192;
/// (sample interval ms, samples kept) of the minute, hour and day windows.
pub const WINDOWS: [(i64, usize); 3] = [(10_000, 7), (600_000, 7), (3_600_000, 25)];

/// The stats names RingMQ keeps (Java's `BrokerStatsManager` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatsName {
    TopicPutNums,
    TopicPutSize,
    GroupGetNums,
    GroupGetSize,
}

impl StatsName {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "TOPIC_PUT_NUMS" => Self::TopicPutNums,
            "TOPIC_PUT_SIZE" => Self::TopicPutSize,
            "GROUP_GET_NUMS" => Self::GroupGetNums,
            "GROUP_GET_SIZE" => Self::GroupGetSize,
            _ => return None,
        })
    }
}

/// A counter: its total and the number of updates that made it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    pub value: u64,
    pub times: u64,
}

/// One window's figures: what was added, in how many updates, over how long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowSum {
    pub sum: u64,
    pub times: u64,
    pub span_ms: i64,
}

#[derive(Debug, Default)]
struct Item {
    /// Per window: (at ms, counter) samples, oldest first.
    rings: [VecDeque<(i64, Counter)>; 3],
    /// When each window was last sampled.
    last_ms: [i64; 3],
}

#[derive(Debug, Default)]
pub struct StatsWindows {
    items: HashMap<(StatsName, String), Item>,
    full_logged: bool,
}

impl StatsWindows {
    /// Samples every counter whose window is due at `now_ms`. A key seen for the first
    /// time starts from zero (counters start at zero when the shard starts).
    pub fn tick(&mut self, now_ms: i64, counters: impl IntoIterator<Item = (StatsName, String, Counter)>) {
        for (name, key, counter) in counters {
            let len = self.items.len();
            let item = match self.items.get_mut(&(name, key.clone())) {
                Some(i) => i,
                None => {
                    if len >= STATS_KEYS_MAX {
                        if !self.full_logged {
                            self.full_logged = true;
                            tracing::warn!(keys = STATS_KEYS_MAX, "broker stats: key limit reached; later topics and groups are not tracked");
                        }
                        continue;
                    }
                    let mut item = Item::default();
                    for (w, ring) in item.rings.iter_mut().enumerate() {
                        ring.push_back((now_ms, Counter::default()));
                        item.last_ms[w] = now_ms;
                    }
                    self.items.entry((name, key)).or_insert(item)
                }
            };
            for (w, (every_ms, keep)) in WINDOWS.iter().enumerate() {
                if now_ms - item.last_ms[w] < *every_ms {
                    continue;
                }
                let ring = &mut item.rings[w];
                if ring.len() == *keep {
                    ring.pop_front();
                }
                ring.push_back((now_ms, counter));
                item.last_ms[w] = now_ms;
            }
        }
    }

    /// Minute, hour and day figures of `(name, key)` given its live counter; `None` if
    /// the key was never sampled.
    pub fn windows(&self, name: StatsName, key: &str, live: Counter, now_ms: i64) -> Option<[WindowSum; 3]> {
        let item = self.items.get(&(name, key.to_string()))?;
        Some(std::array::from_fn(|w| {
            let (at_ms, first) = item.rings[w].front().copied().unwrap_or((now_ms, live));
            WindowSum { sum: live.value.saturating_sub(first.value), times: live.times.saturating_sub(first.times), span_ms: (now_ms - at_ms).max(0) }
        }))
    }
}

/// Java's `BrokerStatsItem` of a window (merged over shards): `tps` per second of the
/// window (at least one second), `avgpt` the sum per update.
pub fn stats_item(w: WindowSum) -> ringmq_client::remoting::admin::BrokerStatsItem {
    let secs = (w.span_ms.max(1000)) as f64 / 1000.0;
    ringmq_client::remoting::admin::BrokerStatsItem {
        sum: w.sum as i64,
        tps: w.sum as f64 / secs,
        avgpt: if w.times > 0 { w.sum as f64 / w.times as f64 } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(value: u64, times: u64) -> Counter {
        Counter { value, times }
    }

    fn check(samples: &[(i64, u64)], live: u64, now_ms: i64, expected: [(u64, i64); 3]) {
        let mut s = StatsWindows::default();
        for &(at, v) in samples {
            s.tick(at, [(StatsName::TopicPutNums, "T".to_string(), c(v, v))]);
        }
        let got = s.windows(StatsName::TopicPutNums, "T", c(live, live), now_ms).expect("tracked");
        let got: Vec<(u64, i64)> = got.iter().map(|w| (w.sum, w.span_ms)).collect();
        assert_eq!(got, expected.to_vec(), "samples {samples:?} live {live} at {now_ms}");
    }

    #[test]
    fn windows_follow_javas_sampling() {
        // First sight: everything since zero.
        check(&[(0, 5)], 7, 500, [(7, 500), (7, 500), (7, 500)]);
        // Seven 10 s samples cover a minute; the eighth drops the oldest.
        let minute: Vec<(i64, u64)> = (0..=7).map(|i| (i * 10_000, i as u64 * 10)).collect();
        check(&minute, 75, 75_000, [(65, 65_000), (75, 75_000), (75, 75_000)]);
        // Sampled every 10 s for 80 min: the minute is the last minute, the hour ring
        // moves every 10 minutes (its oldest of 7 is 60 min back), the day keeps all.
        let long: Vec<(i64, u64)> = (0..=480).map(|i| (i * 10_000, i as u64)).collect();
        check(&long, 480, 4_800_000, [(6, 60_000), (360, 3_600_000), (480, 4_800_000)]);
    }

    #[test]
    fn keys_are_bounded_and_items_computed() {
        let mut s = StatsWindows::default();
        s.tick(0, (0..STATS_KEYS_MAX + 5).map(|i| (StatsName::GroupGetNums, format!("T@g{i}"), c(1, 1))));
        assert!(s.windows(StatsName::GroupGetNums, "T@g0", c(1, 1), 0).is_some());
        assert!(s.windows(StatsName::GroupGetNums, &format!("T@g{}", STATS_KEYS_MAX + 1), c(1, 1), 0).is_none());
        assert!(s.windows(StatsName::TopicPutNums, "T@g0", c(1, 1), 0).is_none(), "names are separate");
        let it = stats_item(WindowSum { sum: 120, times: 60, span_ms: 60_000 });
        assert_eq!((it.sum, it.tps, it.avgpt), (120, 2.0, 2.0));
        let it = stats_item(WindowSum { sum: 3, times: 0, span_ms: 10 });
        assert_eq!((it.tps, it.avgpt), (3.0, 0.0), "under a second counts as a second");
        assert_eq!(StatsName::parse("GROUP_GET_NUMS"), Some(StatsName::GroupGetNums));
        assert_eq!(StatsName::parse("BROKER_PUT_NUMS"), None);
    }
}
