//! Long polling: pulls that found nothing wait here, on the shard that owns their
//! queue, until a message arrives for it or their suspend timeout passes.
//!
//! Invariant: at most `WAITERS_PER_QUEUE_MAX` suspended pulls per queue; past that a
//! pull is answered at once (PULL_NOT_FOUND) instead of holding more memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

pub const WAITERS_PER_QUEUE_MAX: usize = 4096;

type QueueKey = (String, i32);

#[derive(Default)]
pub struct PullWaiters {
    waiters: RefCell<HashMap<QueueKey, Vec<Waker>>>,
    /// Bumped per queue on every notify, so a waiter can tell it was woken.
    epochs: RefCell<HashMap<QueueKey, u64>>,
}

impl PullWaiters {
    /// Wakes every pull waiting on the queue.
    pub fn notify(&self, topic: &str, queue_id: i32) {
        let key = (topic.to_string(), queue_id);
        let wakers = self.waiters.borrow_mut().remove(&key);
        *self.epochs.borrow_mut().entry(key).or_default() += 1;
        if let Some(wakers) = wakers {
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    fn epoch(&self, key: &QueueKey) -> u64 {
        self.epochs.borrow().get(key).copied().unwrap_or(0)
    }

    /// Resolves at the first `notify` of the queue after this call (so create it before
    /// looking at the queue, and no arrival is missed), or `false` at once if too many
    /// pulls wait.
    pub fn wait(self: &Rc<Self>, topic: &str, queue_id: i32) -> NextArrival {
        let key = (topic.to_string(), queue_id);
        let start_epoch = self.epoch(&key);
        NextArrival { waiters: self.clone(), key, start_epoch, registered: false }
    }
}

pub struct NextArrival {
    waiters: Rc<PullWaiters>,
    key: QueueKey,
    start_epoch: u64,
    registered: bool,
}

impl Future for NextArrival {
    /// `true` when woken by an arrival, `false` when refused for lack of room.
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.waiters.epoch(&self.key) != self.start_epoch {
            return Poll::Ready(true);
        }
        let waiters = self.waiters.clone();
        let mut map = waiters.waiters.borrow_mut();
        let list = map.entry(self.key.clone()).or_default();
        if !self.registered && list.len() >= WAITERS_PER_QUEUE_MAX {
            return Poll::Ready(false);
        }
        list.push(cx.waker().clone());
        self.registered = true;
        Poll::Pending
    }
}
