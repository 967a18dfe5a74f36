//! Who owns what: one pure function per kind of state (DESIGN.md §2).
//!
//! Architecture Invariant: ownership depends only on its arguments and the shard
//! count, so every shard computes the same owner with no table and no messages.

use ringmq_client::hash::java_string_hash;

/// The shard that owns global metadata (topic and subscription-group tables).
pub const META_OWNER_SHARD: usize = 0;

fn spread(name: &str) -> u64 {
    // Java's hash, made non-negative; mixed so that similar names do not cluster.
    let h = java_string_hash(name) as u32 as u64;
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32
}

/// The shard owning queue `queue_id` of `topic`: queues of a topic go round-robin
/// from a topic-dependent start, so queue 0 of every topic does not land on shard 0.
pub fn queue_owner(topic: &str, queue_id: i32, shard_count: usize) -> usize {
    assert!(shard_count > 0, "shard_count must be positive");
    ((spread(topic) + queue_id.max(0) as u64) % shard_count as u64) as usize
}

/// The shard owning a consumer group's state.
pub fn group_owner(group: &str, shard_count: usize) -> usize {
    assert!(shard_count > 0, "shard_count must be positive");
    (spread(group) % shard_count as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(topic: &str, shard_count: usize, expected_spread_ok: bool) {
        let owners: Vec<usize> = (0..shard_count as i32 * 4).map(|q| queue_owner(topic, q, shard_count)).collect();
        for (q, &o) in owners.iter().enumerate() {
            assert!(o < shard_count);
            assert_eq!(o, queue_owner(topic, q as i32, shard_count), "pure");
        }
        // Consecutive queues land on consecutive shards: an even spread.
        let mut counts = vec![0; shard_count];
        owners.iter().for_each(|&o| counts[o] += 1);
        assert_eq!(counts.iter().all(|&c| c == 4), expected_spread_ok, "{topic} over {shard_count}: {counts:?}");
    }

    #[test]
    fn queues_spread_evenly() {
        check("TopicTest", 1, true);
        check("TopicTest", 2, true);
        check("orders", 3, true);
        check("%RETRY%group", 16, true);
    }

    #[test]
    fn queue_zero_of_many_topics_is_not_all_on_shard_zero() {
        let on_zero = (0..64).filter(|i| queue_owner(&format!("topic-{i}"), 0, 4) == 0).count();
        assert!(on_zero < 32, "{on_zero} of 64 topics put queue 0 on shard 0");
    }

    #[test]
    fn groups_have_one_owner() {
        for n in 1..8 {
            assert!(group_owner("GID_demo", n) < n);
        }
    }
}
