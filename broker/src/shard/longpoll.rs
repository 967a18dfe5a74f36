//! Long polling: pulls that found nothing wait here, on the shard that owns their
//! queue, until a message arrives for it or their suspend timeout passes.
//!
//! A waiter is registered when it is created (before the pull looks at its queue, so
//! no arrival in between is missed) and deregistered when it is dropped — whether it
//! was woken, timed out, or its request was abandoned. Only live waiters are ever held.
//!
//! Invariants: at most `waiters_per_queue_max` waiters per queue and
//! `waiters_per_shard_max` per shard; past either a pull is refused at once (its
//! handler answers PULL_NOT_FOUND) and counted, never queued; a queue's entry exists
//! only while it has waiters, so idle queues cost nothing.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Suspended pulls on one queue (RocketMQ holds them without a bound; a bound keeps a
/// misbehaving client from holding a shard's memory).
pub const WAITERS_PER_QUEUE_MAX: usize = 4096;
/// Suspended pulls on one shard, over all its queues.
pub const WAITERS_PER_SHARD_MAX: usize = 65_536;

#[derive(Default)]
struct QueueWaiters {
    /// Bumped on every arrival: a waiter that saw another epoch was woken.
    epoch: u64,
    wakers: BTreeMap<u64, Option<Waker>>,
}

/// Why a pull could not be suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    QueueFull,
    ShardFull,
}

pub struct PullWaiters {
    per_queue_max: usize,
    per_shard_max: usize,
    /// topic -> queue id -> waiters (nested so an arrival looks up by `&str`).
    queues: RefCell<HashMap<String, HashMap<i32, QueueWaiters>>>,
    suspended: Cell<usize>,
    refused_total: Cell<u64>,
    next_id: Cell<u64>,
}

impl Default for PullWaiters {
    fn default() -> Self {
        Self::with_limits(WAITERS_PER_QUEUE_MAX, WAITERS_PER_SHARD_MAX)
    }
}

impl PullWaiters {
    pub fn with_limits(per_queue_max: usize, per_shard_max: usize) -> Self {
        Self {
            per_queue_max,
            per_shard_max,
            queues: RefCell::new(HashMap::new()),
            suspended: Cell::new(0),
            refused_total: Cell::new(0),
            next_id: Cell::new(0),
        }
    }

    /// Waiters registered now (suspended pulls).
    pub fn suspended(&self) -> usize {
        self.suspended.get()
    }

    /// Pulls answered at once because a bound was reached.
    pub fn refused_total(&self) -> u64 {
        self.refused_total.get()
    }

    /// Queues that have at least one waiter.
    pub fn queues_waited_on(&self) -> usize {
        self.queues.borrow().values().map(HashMap::len).sum()
    }

    /// Wakes every pull waiting on the queue. Costs one map lookup when none waits.
    pub fn notify(&self, topic: &str, queue_id: i32) {
        let wakers: Vec<Waker> = {
            let mut queues = self.queues.borrow_mut();
            let Some(q) = queues.get_mut(topic).and_then(|t| t.get_mut(&queue_id)) else { return };
            q.epoch += 1;
            q.wakers.values_mut().filter_map(Option::take).collect()
        };
        // Woken outside the borrow: a waker may run code that registers again.
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Registers a waiter for the next arrival on the queue, or refuses at once when a
    /// bound is reached.
    pub fn wait(self: &Rc<Self>, topic: &str, queue_id: i32) -> Result<NextArrival, Refused> {
        if self.suspended.get() >= self.per_shard_max {
            self.refused_total.set(self.refused_total.get() + 1);
            return Err(Refused::ShardFull);
        }
        let mut queues = self.queues.borrow_mut();
        let q = queues.entry(topic.to_string()).or_default().entry(queue_id).or_default();
        if q.wakers.len() >= self.per_queue_max {
            drop(queues);
            self.forget_if_empty(topic, queue_id);
            self.refused_total.set(self.refused_total.get() + 1);
            return Err(Refused::QueueFull);
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        q.wakers.insert(id, None);
        let start_epoch = q.epoch;
        drop(queues);
        self.suspended.set(self.suspended.get() + 1);
        Ok(NextArrival { waiters: self.clone(), topic: topic.to_string(), queue_id, id, start_epoch })
    }

    fn forget_if_empty(&self, topic: &str, queue_id: i32) {
        let mut queues = self.queues.borrow_mut();
        if let Some(t) = queues.get_mut(topic) {
            if t.get(&queue_id).is_some_and(|q| q.wakers.is_empty()) {
                t.remove(&queue_id);
            }
            if t.is_empty() {
                queues.remove(topic);
            }
        }
    }
}

/// Resolves at the first arrival on its queue after it was created; deregisters on drop.
pub struct NextArrival {
    waiters: Rc<PullWaiters>,
    topic: String,
    queue_id: i32,
    id: u64,
    start_epoch: u64,
}

impl Future for NextArrival {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut queues = self.waiters.queues.borrow_mut();
        let q = queues
            .get_mut(self.topic.as_str())
            .and_then(|t| t.get_mut(&self.queue_id))
            .expect("a live waiter's queue entry exists");
        if q.epoch != self.start_epoch {
            return Poll::Ready(());
        }
        q.wakers.insert(self.id, Some(cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for NextArrival {
    fn drop(&mut self) {
        {
            let mut queues = self.waiters.queues.borrow_mut();
            let removed = queues.get_mut(self.topic.as_str()).and_then(|t| t.get_mut(&self.queue_id)).and_then(|q| q.wakers.remove(&self.id));
            assert!(removed.is_some(), "a waiter deregisters exactly once");
        }
        self.waiters.suspended.set(self.waiters.suspended.get() - 1);
        self.waiters.forget_if_empty(&self.topic, self.queue_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::{block_on, poll_once};

    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// Start a waiter on queue q (of topic "t"); expect it registered or refused.
        Wait(i32, bool),
        /// Drop the waiter started at this step index.
        Drop(usize),
        Notify(i32),
        /// Expect the waiter started at this step index ready (woken) or not.
        Ready(usize, bool),
    }

    /// Runs steps against limits (per queue 2, per shard 3); then checks the counts
    /// (suspended, refused, queues with waiters).
    fn check(steps: &[Step], expected: (usize, u64, usize)) {
        let waiters = Rc::new(PullWaiters::with_limits(2, 3));
        let mut live: Vec<Option<NextArrival>> = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match *step {
                Step::Wait(q, ok) => {
                    let w = waiters.wait("t", q);
                    assert_eq!(w.is_ok(), ok, "step {i}: {step:?}");
                    live.push(w.ok());
                    continue;
                }
                Step::Drop(at) => live[at] = None,
                Step::Notify(q) => waiters.notify("t", q),
                Step::Ready(at, ready) => {
                    let w = live[at].as_mut().expect("waiter alive");
                    assert_eq!(block_on(poll_once(w)).is_some(), ready, "step {i}: {step:?}");
                }
            }
            live.push(None);
        }
        assert_eq!((waiters.suspended(), waiters.refused_total(), waiters.queues_waited_on()), expected, "{steps:?}");
        drop(live);
        assert_eq!(waiters.suspended(), 0);
        assert_eq!(waiters.queues_waited_on(), 0);
    }

    #[test]
    fn waiters_are_bounded_deregistered_and_woken() {
        use Step::*;
        check(&[Wait(0, true)], (1, 0, 1));
        // A timed-out (dropped) waiter leaves nothing behind: idle queues cost nothing.
        check(&[Wait(0, true), Drop(0)], (0, 0, 0));
        // Per-queue bound, refused at once and counted; room again after a drop.
        check(&[Wait(0, true), Wait(0, true), Wait(0, false), Drop(0), Wait(0, true)], (2, 1, 1));
        // Per-shard bound over queues.
        check(&[Wait(0, true), Wait(1, true), Wait(2, true), Wait(3, false)], (3, 1, 3));
        // An arrival wakes the queue's waiters only.
        check(&[Wait(0, true), Wait(1, true), Ready(0, false), Notify(0), Ready(0, true), Ready(1, false)], (2, 0, 2));
        // An arrival before the waiter was created does not count.
        check(&[Notify(0), Wait(0, true), Ready(1, false)], (1, 0, 1));
        // Thousands of rounds of waiters that time out never fill the queue's bound.
        let rounds: Vec<Step> = (0..3000).flat_map(|i| [Wait(0, true), Drop(2 * i)]).collect();
        check(&rounds, (0, 0, 0));
    }
}
