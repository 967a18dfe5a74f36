//! Timer messages (RocketMQ 5: `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`):
//! when one is due, where it waits, what it looks like once delivered.
//!
//! The pending set lives on disk: a timed message is stored, on the shard that owns its
//! target queue, in that shard's `rmq_sys_wheel_timer` queue for the minute it is due
//! in — a wheel of `buckets` one-minute ConsumeQueues covering `timerMaxDelaySec` —
//! with `REAL_TOPIC`, `REAL_QID` and its due time (`TIMER_OUT_MS`). Only the minutes that
//! have begun are read into memory (`shard/timer.rs`), so a million timers pending for
//! days cost no memory until their minute comes.
//!
//! Invariants: a bucket holds timers due in one minute of one turn of the wheel (the
//! wheel spans two minutes more than the longest delay, so a bucket's next turn cannot
//! begin filling before its current turn is over); a timer whose time has passed is
//! delivered at once and never waits in the wheel.

use ringmq_client::message::properties::{keys, Properties};

/// The system topic timers wait in (not creatable or readable by clients).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Width of one wheel bucket.
pub const TIMER_BUCKET_MS: i64 = 60_000;
/// RocketMQ's default `timerMaxDelaySec` (3 days).
pub const TIMER_MAX_DELAY_SEC_DEFAULT: u64 = 3 * 86_400;
/// Longest `timerMaxDelaySec` accepted (about 40 days: 57 602 buckets).
pub const TIMER_MAX_DELAY_SEC_LIMIT: u64 = 40 * 86_400;
/// The due time a timer waits with, in wall-clock ms.
pub const PROPERTY_TIMER_OUT_MS: &str = "TIMER_OUT_MS";
pub const PROPERTY_TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
pub const PROPERTY_TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
pub const PROPERTY_TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerWheel {
    pub max_delay_ms: i64,
    pub buckets: i64,
}

impl TimerWheel {
    pub fn new(max_delay_sec: u64) -> Self {
        let max_delay_ms = (max_delay_sec.min(TIMER_MAX_DELAY_SEC_LIMIT) * 1000) as i64;
        Self { max_delay_ms, buckets: max_delay_ms / TIMER_BUCKET_MS + 2 }
    }

    /// The due time a message asks for, if it asks (`None`: not a timer message).
    /// Errors name the property and, for a delay too long, the limit.
    pub fn due_ms(&self, properties: &str, now_ms: i64) -> Result<Option<i64>, String> {
        // Byte searches, no decode: this runs on every send.
        let number = |name: &str| -> Result<Option<i64>, String> {
            match ringmq_client::message::properties::find(properties, name) {
                None => Ok(None),
                Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| format!("timer property {name} = `{v}` is not a number")),
            }
        };
        let due = if let Some(at) = number(PROPERTY_TIMER_DELIVER_MS)? {
            at
        } else if let Some(sec) = number(PROPERTY_TIMER_DELAY_SEC)? {
            now_ms.saturating_add(sec.saturating_mul(1000))
        } else if let Some(ms) = number(PROPERTY_TIMER_DELAY_MS)? {
            now_ms.saturating_add(ms)
        } else {
            return Ok(None);
        };
        // Saturating: a client's value may be anything an i64 holds.
        if due.saturating_sub(now_ms) > self.max_delay_ms {
            return Err(format!(
                "timer message due in {} ms exceeds the maximum delay of {} s (timerMaxDelaySec)",
                due.saturating_sub(now_ms),
                self.max_delay_ms / 1000
            ));
        }
        Ok(Some(due))
    }

    /// Start of the minute `t` is in.
    pub fn bucket_start_ms(t_ms: i64) -> i64 {
        t_ms - t_ms.rem_euclid(TIMER_BUCKET_MS)
    }

    /// The wheel bucket (queue id) for timers due at `due_ms`.
    pub fn bucket_of(&self, due_ms: i64) -> i32 {
        (due_ms.div_euclid(TIMER_BUCKET_MS).rem_euclid(self.buckets)) as i32
    }
}

/// Properties without the timer request (a timer due already is stored as it is,
/// not timed again if it is ever re-sent).
pub fn strip_timer_properties(properties: &str) -> String {
    let mut p = Properties::decode_str(properties);
    for name in [PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS] {
        p.remove(name);
    }
    p.encode()
}

/// The properties a timer waits with: the original ones, where it goes, and when.
pub fn timer_properties(properties: &str, real_topic: &str, real_queue: i32, due_ms: i64) -> String {
    let mut p = Properties::decode_str(properties);
    let _ = p.set(keys::REAL_TOPIC, real_topic);
    let _ = p.set(keys::REAL_QID, &real_queue.to_string());
    let _ = p.set(PROPERTY_TIMER_OUT_MS, &due_ms.to_string());
    p.encode()
}

/// What a waiting timer says: `(due ms, real topic, real queue, properties to deliver
/// with)` — the timer request properties removed (a copy is not timed again), tags,
/// keys, UNIQ_KEY (the msgId) and `TIMER_OUT_MS` kept.
pub fn timer_delivered(properties: &str) -> Option<(i64, String, i32, String)> {
    let mut p = Properties::decode_str(properties);
    let due: i64 = p.get(PROPERTY_TIMER_OUT_MS)?.trim().parse().ok()?;
    let topic = p.get(keys::REAL_TOPIC)?.to_string();
    let queue: i32 = p.get(keys::REAL_QID)?.trim().parse().ok()?;
    for name in [PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS] {
        p.remove(name);
    }
    Some((due, topic, queue, p.encode()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (properties, now) -> due or an error containing the word.
    fn check(properties: &str, now_ms: i64, expected: Result<Option<i64>, &str>) {
        let wheel = TimerWheel::new(3600);
        match (wheel.due_ms(properties, now_ms), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{properties:?}"),
            (Err(e), Err(word)) => assert!(e.contains(word), "{properties:?}: {e}"),
            (got, want) => panic!("{properties:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn due_times_follow_the_timer_properties() {
        check("TAGS\u{1}a\u{2}", 1_000, Ok(None));
        check("TIMER_DELIVER_MS\u{1}5000\u{2}", 1_000, Ok(Some(5_000)));
        check("TIMER_DELIVER_MS\u{1}500\u{2}", 1_000, Ok(Some(500)));
        check("TIMER_DELAY_SEC\u{1}3\u{2}", 1_000, Ok(Some(4_000)));
        check("TIMER_DELAY_MS\u{1}250\u{2}", 1_000, Ok(Some(1_250)));
        check("TIMER_DELAY_MS\u{1}x\u{2}", 1_000, Err("not a number"));
        check("TIMER_DELAY_SEC\u{1}3601\u{2}", 1_000, Err("3600 s"));
        check("TIMER_DELAY_SEC\u{1}3600\u{2}", 0, Ok(Some(3_600_000)));
        check("TIMER_DELIVER_MS\u{1}-9223372036854775808\u{2}", 1_000, Ok(Some(i64::MIN)));
        check("TIMER_DELIVER_MS\u{1}9223372036854775807\u{2}", -1_000, Err("timerMaxDelaySec"));
        check("TIMER_DELAY_SEC\u{1}-9223372036854775808\u{2}", 1_000, Ok(Some(i64::MIN + 1_000)));
    }

    proptest::proptest! {
        /// Whatever a client puts in its properties, the due time and the bucket are
        /// computed without a panic.
        #[test]
        fn any_properties_give_a_due_time_or_an_error(props in ".{0,64}", value in proptest::num::i64::ANY, now in proptest::num::i64::ANY) {
            let wheel = TimerWheel::new(3600);
            for name in [PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS] {
                let text = format!("{props}{name}\u{1}{value}\u{2}");
                if let Ok(Some(due)) = wheel.due_ms(&text, now) {
                    let b = wheel.bucket_of(due);
                    proptest::prop_assert!((0..wheel.buckets as i32).contains(&b));
                }
                let _ = wheel.due_ms(&props, now);
                let _ = timer_delivered(&text);
            }
        }
    }

    #[test]
    fn the_wheel_spans_two_buckets_more_than_the_longest_delay() {
        let w = TimerWheel::new(3600);
        assert_eq!(w.buckets, 62);
        assert_eq!(w.bucket_of(0), 0);
        assert_eq!(w.bucket_of(59_999), 0);
        assert_eq!(w.bucket_of(60_000), 1);
        assert_eq!(w.bucket_of(62 * 60_000), 0);
        assert_eq!(TimerWheel::bucket_start_ms(125_000), 120_000);
        let p = timer_properties("TIMER_DELAY_SEC\u{1}3\u{2}UNIQ_KEY\u{1}u\u{2}", "T", 2, 9_000);
        let (due, topic, queue, props) = timer_delivered(&p).unwrap();
        assert_eq!((due, topic.as_str(), queue), (9_000, "T", 2));
        let back = Properties::decode_str(&props);
        assert_eq!((back.get("TIMER_DELAY_SEC"), back.get("UNIQ_KEY")), (None, Some("u")));
    }
}
