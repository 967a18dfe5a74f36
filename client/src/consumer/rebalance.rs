//! Queue allocation within a consumer group: RocketMQ's `AllocateMessageQueueAveragely`,
//! so RingMQ and Java/Go/Rust RocketMQ consumers in one group agree on who reads what.
//!
//! Invariant: given the same sorted queue and member lists, every member computes a
//! disjoint share and the shares cover every queue (checked by a property test).

use crate::remoting::bodies::MessageQueue;

/// The queues `me` reads. `queues` and `members` need not be sorted (they are sorted
/// here, as every member must see the same order); `me` absent → nothing.
pub fn allocate_average(queues: &[MessageQueue], members: &[String], me: &str) -> Vec<MessageQueue> {
    let mut queues = queues.to_vec();
    queues.sort_by(|a, b| (&a.topic, &a.broker_name, a.queue_id).cmp(&(&b.topic, &b.broker_name, b.queue_id)));
    queues.dedup();
    let mut members = members.to_vec();
    members.sort();
    members.dedup();
    let Some(index) = members.iter().position(|m| m == me) else {
        return Vec::new();
    };
    let (q, c) = (queues.len(), members.len());
    if q == 0 {
        return Vec::new();
    }
    let rem = q % c;
    let average = if q <= c {
        1
    } else if rem > 0 && index < rem {
        q / c + 1
    } else {
        q / c
    };
    let start = if rem > 0 && index < rem { index * average } else { index * average + rem };
    let range = average.min(q.saturating_sub(start));
    (0..range).map(|i| queues[(start + i) % q].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qs(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue { broker_name: if i % 2 == 0 { "a" } else { "b" }.into(), queue_id: i / 2, topic: "t".into() }).collect()
    }

    fn check(queue_count: i32, member_count: usize, me: usize, expected: &[(&str, i32)]) {
        let members: Vec<String> = (0..member_count).map(|i| format!("c{i}")).collect();
        let got = allocate_average(&qs(queue_count), &members, &format!("c{me}"));
        let got: Vec<(&str, i32)> = got.iter().map(|q| (q.broker_name.as_str(), q.queue_id)).collect();
        assert_eq!(got, expected, "{queue_count} queues, {member_count} members, me c{me}");
    }

    #[test]
    fn matches_java_average_allocation() {
        // 8 queues (a0..a3, b0..b3 sorted), 3 members: 3 + 3 + 2.
        check(8, 3, 0, &[("a", 0), ("a", 1), ("a", 2)]);
        check(8, 3, 1, &[("a", 3), ("b", 0), ("b", 1)]);
        check(8, 3, 2, &[("b", 2), ("b", 3)]);
        // After one leaves: 4 + 4.
        check(8, 2, 0, &[("a", 0), ("a", 1), ("a", 2), ("a", 3)]);
        check(8, 2, 1, &[("b", 0), ("b", 1), ("b", 2), ("b", 3)]);
        // More members than queues: the last ones idle.
        check(2, 3, 0, &[("a", 0)]);
        check(2, 3, 1, &[("b", 0)]);
        check(2, 3, 2, &[]);
        check(0, 2, 0, &[]);
    }

    #[test]
    fn a_stranger_gets_nothing() {
        assert!(allocate_average(&qs(4), &["x".into()], "y").is_empty());
    }

    proptest! {
        #[test]
        fn shares_are_disjoint_and_cover_everything(queue_count in 0i32..64, member_count in 1usize..12) {
            let members: Vec<String> = (0..member_count).map(|i| format!("m{i:02}")).collect();
            let mut all: Vec<MessageQueue> = members.iter().flat_map(|m| allocate_average(&qs(queue_count), &members, m)).collect();
            prop_assert_eq!(all.len(), queue_count as usize);
            all.sort();
            all.dedup();
            prop_assert_eq!(all.len(), queue_count as usize);
        }
    }
}
