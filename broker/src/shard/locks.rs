//! Queue locks for orderly consumption: LOCK_BATCH_MQ / UNLOCK_BATCH_MQ.
//!
//! The lock table of a consumer group lives on the group's owner shard
//! (`routing::group_owner`), so one batch request is answered by one shard. A lock
//! expires `LOCK_EXPIRY_MS` after its holder last renewed it (RocketMQ's
//! REBALANCE_LOCK_MAX_LIVE_TIME), after which another client may take it.
//!
//! Invariants: at most one live holder per (group, topic, queue); at most
//! `LOCKS_MAX` entries (expired entries are reclaimed first; past the bound new locks
//! are refused, which the client retries).

use super::{error_response, Shard};
use ringmq_client::remoting::bodies::{JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::collections::HashMap;

pub const LOCK_EXPIRY_MS: i64 = 60_000;
pub const LOCKS_MAX: usize = 1_000_000;
/// Queues per batch request.
pub const LOCK_BATCH_QUEUES_MAX: usize = 4096;

type LockKey = (String, String, i32);

#[derive(Debug, Default)]
pub struct LockTable {
    locks: HashMap<LockKey, (String, i64)>,
}

impl LockTable {
    /// Locks (or renews) every queue it can for `client`; returns those it holds.
    pub fn lock(&mut self, group: &str, client: &str, queues: &[MessageQueue], now_ms: i64) -> Vec<MessageQueue> {
        if self.locks.len() >= LOCKS_MAX {
            self.locks.retain(|_, (_, at)| now_ms - *at <= LOCK_EXPIRY_MS);
        }
        let mut granted = Vec::new();
        for mq in queues {
            let key = (group.to_string(), mq.topic.clone(), mq.queue_id);
            let ok = match self.locks.get(&key) {
                Some((holder, at)) => holder == client || now_ms - at > LOCK_EXPIRY_MS,
                None => self.locks.len() < LOCKS_MAX,
            };
            if ok {
                self.locks.insert(key, (client.to_string(), now_ms));
                granted.push(mq.clone());
            }
        }
        granted
    }

    /// Releases the queues `client` holds.
    pub fn unlock(&mut self, group: &str, client: &str, queues: &[MessageQueue]) {
        for mq in queues {
            let key = (group.to_string(), mq.topic.clone(), mq.queue_id);
            if self.locks.get(&key).is_some_and(|(holder, _)| holder == client) {
                self.locks.remove(&key);
            }
        }
    }
}

/// The group named in a lock or unlock body (used to route the request).
pub fn lock_request_group(body: &[u8]) -> Option<String> {
    LockBatchRequestBody::decode(body).ok().map(|b| b.consumer_group)
}

impl<R: crate::rt::Runtime> Shard<R> {
    pub(super) fn handle_lock_batch(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let body = match LockBatchRequestBody::decode(&cmd.body) {
            Ok(b) if b.mq_set.len() <= LOCK_BATCH_QUEUES_MAX => b,
            Ok(b) => return error_response(cmd, rs::INVALID_PARAMETER, format!("{} queues in one lock request (max {LOCK_BATCH_QUEUES_MAX})", b.mq_set.len())),
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad lock body: {e}")),
        };
        let granted = self.clients.locks.borrow_mut().lock(&body.consumer_group, &body.client_id, &body.mq_set, self.now_ms());
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = LockBatchResponseBody { lock_ok_mq_set: granted }.encode().into();
        r
    }

    pub(super) fn handle_unlock_batch(&self, cmd: &RemotingCommand) -> RemotingCommand {
        match LockBatchRequestBody::decode(&cmd.body) {
            Ok(b) => {
                self.clients.locks.borrow_mut().unlock(&b.consumer_group, &b.client_id, &b.mq_set);
                cmd.create_response(rs::SUCCESS, None)
            }
            Err(e) => error_response(cmd, rs::INVALID_PARAMETER, format!("bad unlock body: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue { broker_name: "b".into(), queue_id: q, topic: "t".into() }
    }

    /// Steps of (client, queues, now_ms, expected granted queues).
    fn check(steps: &[(&str, &[i32], i64, &[i32])]) {
        let mut table = LockTable::default();
        for (client, queues, now, expected) in steps {
            let qs: Vec<MessageQueue> = queues.iter().map(|&q| mq(q)).collect();
            let got: Vec<i32> = table.lock("g", client, &qs, *now).iter().map(|m| m.queue_id).collect();
            assert_eq!(&got, expected, "{client} at {now}");
        }
    }

    #[test]
    fn one_holder_per_queue_until_expiry() {
        check(&[("a", &[0, 1], 0, &[0, 1]), ("b", &[1, 2], 10, &[2])]);
        check(&[("a", &[0], 0, &[0]), ("a", &[0], 30_000, &[0]), ("b", &[0], 80_000, &[])]);
        check(&[("a", &[0], 0, &[0]), ("b", &[0], LOCK_EXPIRY_MS + 1, &[0])]);
    }

    #[test]
    fn unlock_releases_only_own_locks() {
        let mut t = LockTable::default();
        t.lock("g", "a", &[mq(0)], 0);
        t.unlock("g", "b", &[mq(0)]);
        assert!(t.lock("g", "b", &[mq(0)], 1).is_empty());
        t.unlock("g", "a", &[mq(0)]);
        assert_eq!(t.lock("g", "b", &[mq(0)], 2).len(), 1);
    }
}
