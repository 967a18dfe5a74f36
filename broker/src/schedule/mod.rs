//! Delay levels (RocketMQ's `messageDelayLevel`): the level table, where a delayed
//! message waits, when it is due, what it looks like once delivered, and each shard's
//! delivery progress (`delayOffset`).
//!
//! A message sent with `DELAY = L` is stored, on the shard that owns its target queue,
//! in that shard's `SCHEDULE_TOPIC_XXXX` queue `L - 1` with `REAL_TOPIC` / `REAL_QID`;
//! the shard's delivery task for level L copies it to its real queue once
//! `store timestamp + delay(L)` has passed (`shard/delay.rs` drives it). The schedule
//! queues are shard-local: every shard has its own, nothing is shared across cores.
//!
//! Invariants: each level's queue is consumed in order (its messages are due in store
//! order, one delay per level); the persisted offset of a level never passes a
//! delivered copy that is not yet durable, so after a crash nothing due is lost and at
//! most the copies made since the last persist are delivered again (at-least-once);
//! all of it is rebuildable from the CommitLog (the schedule queues are ConsumeQueues).

pub mod timer;

use ringmq_client::message::properties::{keys, Properties};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// The system topic delayed messages wait in (RocketMQ's name).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// RocketMQ's default `messageDelayLevel`.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
/// Most levels a table may have (RocketMQ's table has 18; the schedule topic's queue
/// ids are `level - 1`).
pub const DELAY_LEVELS_MAX: usize = 64;
/// Messages of one level one delivery pass copies before it yields (large enough that
/// a busy executor's scheduling rounds do not limit delivery: 256 per pass and level).
pub const DELIVERY_BATCH_MAX: usize = 256;
/// How often changed delivery offsets are persisted.
pub const DELAY_OFFSETS_PERSIST_INTERVAL_MS: u64 = 1_000;
/// Longest sleep of an idle level's task: a message stored meanwhile is found within it.
pub const DELIVERY_IDLE_POLL_MS: u64 = 100;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum DelayError {
    #[error("messageDelayLevel: `{0}` is not a duration (a number followed by s, m, h or d)")]
    BadLevel(String),
    #[error("messageDelayLevel: {0} levels (1..={DELAY_LEVELS_MAX} allowed)")]
    Count(usize),
}

/// The delay of each level, level 1 first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayLevels {
    delays_ms: Vec<u64>,
}

impl DelayLevels {
    /// Parses RocketMQ's syntax: space-separated `<n>s|m|h|d`.
    pub fn parse(text: &str) -> Result<Self, DelayError> {
        let mut delays_ms = Vec::new();
        for item in text.split_whitespace() {
            let (number, unit_ms) = match item.as_bytes().last() {
                Some(b's') => (&item[..item.len() - 1], 1_000),
                Some(b'm') => (&item[..item.len() - 1], 60_000),
                Some(b'h') => (&item[..item.len() - 1], 3_600_000),
                Some(b'd') => (&item[..item.len() - 1], 86_400_000),
                _ => return Err(DelayError::BadLevel(item.to_string())),
            };
            let n: u64 = number.parse().map_err(|_| DelayError::BadLevel(item.to_string()))?;
            delays_ms.push(n.checked_mul(unit_ms).ok_or_else(|| DelayError::BadLevel(item.to_string()))?);
        }
        if delays_ms.is_empty() || delays_ms.len() > DELAY_LEVELS_MAX {
            return Err(DelayError::Count(delays_ms.len()));
        }
        Ok(Self { delays_ms })
    }

    pub fn count(&self) -> usize {
        self.delays_ms.len()
    }

    /// The level a `DELAY` value asks for: `None` for no delay (absent, 0 or negative
    /// — RocketMQ sends those at once); levels past the table clamp to the last.
    pub fn level_of(&self, delay_property: Option<&str>) -> Result<Option<usize>, String> {
        let Some(raw) = delay_property else { return Ok(None) };
        let level: i64 = raw.trim().parse().map_err(|_| format!("DELAY `{raw}` is not a delay level (1..={})", self.count()))?;
        if level <= 0 {
            return Ok(None);
        }
        Ok(Some((level as usize).min(self.count())))
    }

    pub fn delay_ms(&self, level: usize) -> u64 {
        self.delays_ms[level - 1]
    }

    /// When a message of `level` stored at `store_ms` is due. As RocketMQ's
    /// `correctDeliverTimestamp`: a due time further away than one whole delay (the wall
    /// clock stepped back) means "now", so a clock step never holds a message longer
    /// than its delay.
    pub fn due_ms(&self, level: usize, store_ms: i64, now_ms: i64) -> i64 {
        let delay = self.delay_ms(level) as i64;
        let due = store_ms.saturating_add(delay);
        if due > now_ms.saturating_add(delay) {
            now_ms
        } else {
            due
        }
    }
}

/// The properties a delayed message is stored with: the original ones plus where it
/// goes (`REAL_TOPIC`, `REAL_QID`); `DELAY` stays (it names the level).
pub fn schedule_properties(properties: &str, real_topic: &str, real_queue: i32) -> String {
    let mut p = Properties::decode_str(properties);
    // Names and values are plain: set cannot fail for these.
    let _ = p.set(keys::REAL_TOPIC, real_topic);
    let _ = p.set(keys::REAL_QID, &real_queue.to_string());
    p.encode()
}

/// Where a delayed message goes and the properties it is delivered with (`DELAY`
/// removed, as RocketMQ's `messageTimeup`; everything else — tags, keys, UNIQ_KEY, so
/// the msgId — kept). `None` if the stored message does not say where it goes.
pub fn delivered(properties: &str) -> Option<(String, i32, String)> {
    let mut p = Properties::decode_str(properties);
    let topic = p.get(keys::REAL_TOPIC)?.to_string();
    let queue: i32 = p.get(keys::REAL_QID)?.trim().parse().ok()?;
    p.remove(keys::DELAY);
    Some((topic, queue, p.encode()))
}

/// A shard's delivery progress: per level, the next schedule-queue offset to deliver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayOffsets {
    #[serde(rename = "offsetTable")]
    pub offsets: BTreeMap<usize, u64>,
}

impl DelayOffsets {
    pub fn get(&self, level: usize) -> u64 {
        self.offsets.get(&level).copied().unwrap_or(0)
    }

    /// Records progress; offsets only move forward.
    pub fn advance(&mut self, level: usize, to: u64) -> bool {
        let current = self.offsets.entry(level).or_insert(0);
        if to > *current {
            *current = to;
            true
        } else {
            false
        }
    }

    /// RocketMQ's `DelayOffsetSerializeWrapper` JSON (what GET_ALL_DELAY_OFFSET answers).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a map of numbers encodes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("delay offsets do not decode: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(table: &str, expected: Result<&[u64], &str>) {
        match (DelayLevels::parse(table), expected) {
            (Ok(levels), Ok(ms)) => assert_eq!(levels.delays_ms, ms, "{table}"),
            (Err(e), Err(word)) => assert!(e.to_string().contains(word), "{table}: {e}"),
            (got, want) => panic!("{table}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn level_tables_parse_like_rocketmq() {
        check("1s 5s 10s", Ok(&[1_000, 5_000, 10_000]));
        check("1m 2h 1d", Ok(&[60_000, 7_200_000, 86_400_000]));
        check("  1s   2s ", Ok(&[1_000, 2_000]));
        check("", Err("0 levels"));
        check("1x", Err("`1x`"));
        check("s", Err("`s`"));
        check("99999999999999999999d", Err("not a duration"));
        let default = DelayLevels::parse(DEFAULT_DELAY_LEVELS).unwrap();
        assert_eq!(default.count(), 18);
        assert_eq!(default.delay_ms(18), 7_200_000);
    }

    #[test]
    fn levels_clamp_and_due_times_correct_clock_steps() {
        let l = DelayLevels::parse("1s 5s").unwrap();
        for (raw, want) in [(None, Ok(None)), (Some("0"), Ok(None)), (Some("-1"), Ok(None)), (Some("1"), Ok(Some(1))), (Some("7"), Ok(Some(2)))] {
            assert_eq!(l.level_of(raw), want, "{raw:?}");
        }
        assert!(l.level_of(Some("x")).is_err());
        // (level, store, now) -> due
        for (level, store, now, due) in [(1, 1_000, 1_000, 2_000), (2, 1_000, 9_000, 6_000), (1, 10_000, 1_000, 1_000), (1, 1_500, 1_000, 1_000), (1, 900, 1_000, 1_900)] {
            assert_eq!(l.due_ms(level, store, now), due, "level {level} store {store} now {now}");
        }
    }

    #[test]
    fn delivered_messages_go_where_they_were_sent_without_their_delay() {
        let p = schedule_properties("TAGS\u{1}a\u{2}DELAY\u{1}3\u{2}UNIQ_KEY\u{1}u1\u{2}", "T", 5);
        let (topic, queue, props) = delivered(&p).unwrap();
        assert_eq!((topic.as_str(), queue), ("T", 5));
        let back = Properties::decode_str(&props);
        assert_eq!((back.get("TAGS"), back.get("UNIQ_KEY"), back.get("DELAY")), (Some("a"), Some("u1"), None));
        assert_eq!(delivered("TAGS\u{1}a\u{2}"), None);
        let mut o = DelayOffsets::default();
        assert!(o.advance(3, 10) && !o.advance(3, 9));
        assert_eq!(DelayOffsets::decode(&o.encode()).unwrap(), o);
        assert_eq!(String::from_utf8(o.encode()).unwrap(), r#"{"offsetTable":{"3":10}}"#);
    }
}
