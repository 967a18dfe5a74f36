//! Who owns what: one pure function per kind of state (DESIGN.md §2).
//!
//! Architecture Invariant: ownership depends only on its arguments and the shard
//! count, so every shard computes the same owner with no table and no messages.
//! Architecture Invariant: shard route mode renames queues, never moves them: shard
//! i's queue k is the k-th host queue that i owns, so stores, offsets and locks are the
//! same in both modes and a broker can switch modes across a restart.

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

// ---------------------------------------------------------------------------------
// Shard route mode (`RouteMode::Shard`): shard i is a broker of its own whose queues
// 0..k are the topic's queues that shard i owns, in order. Storage, offsets and locks
// stay keyed by the host's queue ids; only the edge (`shard/edge.rs`) translates.

/// The first host queue id shard `shard` owns of `topic` (all its queues are that plus
/// multiples of `shard_count`).
fn first_owned(topic: &str, shard: usize, shard_count: usize) -> u64 {
    let n = shard_count as u64;
    (shard as u64 + n - spread(topic) % n) % n
}

/// Shard mode: the host queue id of shard `shard`'s queue `local`.
pub fn shard_queue_to_host(topic: &str, local: i32, shard: usize, shard_count: usize) -> i32 {
    assert!(shard < shard_count, "shard {shard} of {shard_count}");
    let host = first_owned(topic, shard, shard_count) + local.max(0) as u64 * shard_count as u64;
    i32::try_from(host).unwrap_or(i32::MAX)
}

/// Shard mode: (owning shard, its queue id) of the host queue `host`.
pub fn host_queue_to_shard(topic: &str, host: i32, shard_count: usize) -> (usize, i32) {
    assert!(shard_count > 0, "shard_count must be positive");
    (queue_owner(topic, host, shard_count), (host.max(0) as u64 / shard_count as u64) as i32)
}

/// Shard mode: how many of a topic's `host_count` queues shard `shard` owns.
pub fn shard_queue_count(topic: &str, host_count: u32, shard: usize, shard_count: usize) -> u32 {
    assert!(shard < shard_count, "shard {shard} of {shard_count}");
    let first = first_owned(topic, shard, shard_count);
    if first >= host_count as u64 {
        0
    } else {
        ((host_count as u64 - first - 1) / shard_count as u64 + 1) as u32
    }
}

/// Shard mode: the broker name shard `shard` registers with (`<brokerName>-s<i>`).
pub fn shard_broker_name(broker_name: &str, shard: usize) -> String {
    format!("{broker_name}-s{shard}")
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

    /// (topic, host queue count, shard count): every host queue is exactly one shard's
    /// queue, the shard's queues are 0..count in order, and both maps invert.
    fn check_shard_mode(topic: &str, host_count: u32, shard_count: usize) {
        let mut seen = vec![false; host_count as usize];
        for shard in 0..shard_count {
            let count = shard_queue_count(topic, host_count, shard, shard_count);
            for local in 0..count as i32 {
                let host = shard_queue_to_host(topic, local, shard, shard_count);
                assert!((0..host_count as i32).contains(&host), "{topic}: shard {shard} queue {local} -> {host}");
                assert_eq!(queue_owner(topic, host, shard_count), shard, "{topic}: host queue {host} owned by its shard");
                assert_eq!(host_queue_to_shard(topic, host, shard_count), (shard, local), "{topic}: inverse");
                assert!(!seen[host as usize], "{topic}: host queue {host} twice");
                seen[host as usize] = true;
            }
            // The next one past the shard's count is past the host's queues.
            assert!(shard_queue_to_host(topic, count as i32, shard, shard_count) >= host_count as i32);
        }
        assert!(seen.iter().all(|&s| s), "{topic}/{host_count}/{shard_count}: every host queue mapped");
    }

    #[test]
    fn shard_mode_queue_maps() {
        for (topic, host_count, shard_count) in [
            ("TopicTest", 8, 2),
            ("TopicTest", 8, 1),
            ("orders", 7, 3),
            ("%RETRY%group", 1, 4),
            ("x", 0, 2),
            ("benchmark", 64, 16),
            ("a", 3, 16),
        ] {
            check_shard_mode(topic, host_count, shard_count);
        }
        // One shard: the identity, as host mode.
        assert_eq!(shard_queue_to_host("t", 5, 0, 1), 5);
        assert_eq!(shard_broker_name("broker-a", 3), "broker-a-s3");
    }

    #[test]
    fn groups_have_one_owner() {
        for n in 1..8 {
            assert!(group_owner("GID_demo", n) < n);
        }
    }
}
