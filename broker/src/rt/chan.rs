//! Runtime-agnostic channels between tasks of one shard: a bounded multi-producer
//! single-consumer queue and a oneshot. They use only wakers, so they work the same on
//! glommio and on the simulator's scheduler.
//!
//! Invariants: a bounded channel never holds more than its capacity; `recv` resolves
//! `None` once every sender is gone and the queue is empty; a sender's `send` resolves
//! `Err` once the receiver is gone (its value is returned, nothing is lost silently).
//! Wakers are kept one per waiting task and removed when the wait ends.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

struct State<T> {
    queue: VecDeque<T>,
    capacity: usize,
    senders: usize,
    receiver_alive: bool,
    recv_waker: Option<Waker>,
    /// Senders waiting for room, each under the id of its `Send` future.
    send_wakers: Vec<(u64, Waker)>,
    next_send_id: u64,
}

pub struct Sender<T> {
    state: Rc<RefCell<State<T>>>,
}

pub struct Receiver<T> {
    state: Rc<RefCell<State<T>>>,
}

/// A channel holding at most `capacity` values.
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "a bounded channel needs room for one value");
    let state = Rc::new(RefCell::new(State {
        queue: VecDeque::new(),
        capacity,
        senders: 1,
        receiver_alive: true,
        recv_waker: None,
        send_wakers: Vec::new(),
        next_send_id: 0,
    }));
    (Sender { state: state.clone() }, Receiver { state })
}

#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    Full(T),
    Closed(T),
}

impl<T> Sender<T> {
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let waker = {
            let mut s = self.state.borrow_mut();
            if !s.receiver_alive {
                return Err(TrySendError::Closed(value));
            }
            if s.queue.len() >= s.capacity {
                return Err(TrySendError::Full(value));
            }
            s.queue.push_back(value);
            s.recv_waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Waits for room; `Err(value)` when the receiver is gone.
    pub async fn send(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        let id = {
            let mut s = self.state.borrow_mut();
            s.next_send_id += 1;
            s.next_send_id
        };
        let wait = SendWait { state: &self.state, id };
        let result = std::future::poll_fn(|cx| {
            let v = value.take().expect("polled after completion");
            match self.try_send(v) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(TrySendError::Closed(v)) => Poll::Ready(Err(v)),
                Err(TrySendError::Full(v)) => {
                    value = Some(v);
                    let mut s = self.state.borrow_mut();
                    s.send_wakers.retain(|(i, _)| *i != id);
                    s.send_wakers.push((id, cx.waker().clone()));
                    Poll::Pending
                }
            }
        })
        .await;
        drop(wait);
        result
    }

    pub fn len(&self) -> usize {
        self.state.borrow().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_closed(&self) -> bool {
        !self.state.borrow().receiver_alive
    }
}

/// Removes a waiting sender's waker when its `send` ends or is dropped.
struct SendWait<'a, T> {
    state: &'a Rc<RefCell<State<T>>>,
    id: u64,
}

impl<T> Drop for SendWait<'_, T> {
    fn drop(&mut self) {
        self.state.borrow_mut().send_wakers.retain(|(i, _)| *i != self.id);
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.state.borrow_mut().senders += 1;
        Self { state: self.state.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.state.borrow_mut();
            s.senders -= 1;
            if s.senders == 0 {
                s.recv_waker.take()
            } else {
                None
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    pub fn recv(&self) -> impl Future<Output = Option<T>> + '_ {
        std::future::poll_fn(move |cx| self.poll_recv(cx))
    }

    pub fn try_recv(&self) -> Option<T> {
        let (value, wakers) = {
            let mut s = self.state.borrow_mut();
            let v = s.queue.pop_front();
            let w = if v.is_some() { std::mem::take(&mut s.send_wakers) } else { Vec::new() };
            (v, w)
        };
        wakers.into_iter().for_each(|(_, w)| w.wake());
        value
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(v) = self.try_recv() {
            return Poll::Ready(Some(v));
        }
        let mut s = self.state.borrow_mut();
        if s.senders == 0 {
            return Poll::Ready(None);
        }
        s.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let wakers = {
            let mut s = self.state.borrow_mut();
            s.receiver_alive = false;
            s.queue.clear();
            std::mem::take(&mut s.send_wakers)
        };
        wakers.into_iter().for_each(|(_, w)| w.wake());
    }
}

/// A one-value channel: the reply to one request.
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let state = Rc::new(RefCell::new(OneshotState { value: None, waker: None, sender_alive: true, receiver_alive: true }));
    (OneshotSender { state: state.clone() }, OneshotReceiver { state })
}

struct OneshotState<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_alive: bool,
    receiver_alive: bool,
}

pub struct OneshotSender<T> {
    state: Rc<RefCell<OneshotState<T>>>,
}

pub struct OneshotReceiver<T> {
    state: Rc<RefCell<OneshotState<T>>>,
}

impl<T> OneshotSender<T> {
    /// Whether the receiver is gone (nobody waits for the value any more).
    pub fn is_closed(&self) -> bool {
        !self.state.borrow().receiver_alive
    }

    pub fn send(self, value: T) {
        let waker = {
            let mut s = self.state.borrow_mut();
            s.value = Some(value);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.state.borrow_mut();
            s.sender_alive = false;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for OneshotReceiver<T> {
    fn drop(&mut self) {
        self.state.borrow_mut().receiver_alive = false;
    }
}

impl<T> Future for OneshotReceiver<T> {
    /// `None` when the sender was dropped without sending.
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.state.borrow_mut();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if !s.sender_alive {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A FIFO async lock with a bounded queue of waiters: one writer at a time for state
/// whose update spans an await (the host metadata tables and their snapshots).
///
/// Invariants: at most one guard exists; waiters are served in arrival order; at most
/// `waiting_max` wait (more are refused at once with [`LockBusy`]); a waiter dropped
/// before it took the lock passes it on, so an abandoned request never wedges it.
pub struct Lock {
    state: Rc<RefCell<LockState>>,
}

struct LockState {
    owner: Option<u64>,
    queue: VecDeque<(u64, Option<Waker>)>,
    waiting_max: usize,
    next_id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many writers waiting")]
pub struct LockBusy;

pub struct LockGuard {
    state: Rc<RefCell<LockState>>,
}

pub struct LockWait {
    state: Rc<RefCell<LockState>>,
    id: u64,
    done: bool,
}

impl Lock {
    pub fn new(waiting_max: usize) -> Self {
        Self { state: Rc::new(RefCell::new(LockState { owner: None, queue: VecDeque::new(), waiting_max, next_id: 0 })) }
    }

    /// Waits for the lock, or is refused at once when `waiting_max` already wait.
    pub fn lock(&self) -> Result<LockWait, LockBusy> {
        let mut s = self.state.borrow_mut();
        let id = s.next_id;
        s.next_id += 1;
        if s.owner.is_none() && s.queue.is_empty() {
            s.owner = Some(id);
        } else if s.queue.len() >= s.waiting_max {
            return Err(LockBusy);
        } else {
            s.queue.push_back((id, None));
        }
        Ok(LockWait { state: self.state.clone(), id, done: false })
    }

    /// Writers waiting now.
    pub fn waiting(&self) -> usize {
        self.state.borrow().queue.len()
    }
}

fn pass_on(state: &Rc<RefCell<LockState>>) {
    let waker = {
        let mut s = state.borrow_mut();
        match s.queue.pop_front() {
            Some((next, waker)) => {
                s.owner = Some(next);
                waker
            }
            None => {
                s.owner = None;
                None
            }
        }
    };
    if let Some(w) = waker {
        w.wake();
    }
}

impl Future for LockWait {
    type Output = LockGuard;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LockGuard> {
        let mut s = self.state.borrow_mut();
        if s.owner == Some(self.id) {
            drop(s);
            self.done = true;
            return Poll::Ready(LockGuard { state: self.state.clone() });
        }
        let id = self.id;
        let slot = s.queue.iter_mut().find(|(i, _)| *i == id).expect("a waiting lock request is queued");
        slot.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for LockWait {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let granted = self.state.borrow().owner == Some(self.id);
        if granted {
            pass_on(&self.state);
        } else {
            self.state.borrow_mut().queue.retain(|(i, _)| *i != self.id);
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        pass_on(&self.state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_channel_holds_at_most_its_capacity_and_closes() {
        let (tx, rx) = bounded::<u32>(2);
        assert_eq!(tx.try_send(1), Ok(()));
        assert_eq!(tx.try_send(2), Ok(()));
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(tx.try_send(3), Ok(()));
        let tx2 = tx.clone();
        drop(tx);
        assert_eq!(futures_lite::future::block_on(rx.recv()), Some(2));
        drop(tx2);
        assert_eq!(futures_lite::future::block_on(rx.recv()), Some(3));
        assert_eq!(futures_lite::future::block_on(rx.recv()), None);
    }

    #[test]
    fn send_fails_once_the_receiver_is_gone() {
        let (tx, rx) = bounded::<u32>(1);
        drop(rx);
        assert_eq!(futures_lite::future::block_on(tx.send(7)), Err(7));
        assert!(tx.is_closed());
    }

    #[test]
    fn oneshot_delivers_or_reports_a_dropped_sender() {
        let (tx, rx) = oneshot::<u32>();
        tx.send(5);
        assert_eq!(futures_lite::future::block_on(rx), Some(5));
        let (tx, rx) = oneshot::<u32>();
        drop(tx);
        assert_eq!(futures_lite::future::block_on(rx), None);
    }

    #[test]
    fn lock_serves_in_order_bounds_waiters_and_survives_abandoned_waits() {
        use futures_lite::future::poll_once;
        let lock = Lock::new(2);
        let g1 = futures_lite::future::block_on(lock.lock().unwrap());
        let mut w2 = lock.lock().unwrap();
        let w3 = lock.lock().unwrap();
        assert_eq!(lock.lock().err(), Some(LockBusy));
        assert!(futures_lite::future::block_on(poll_once(&mut w2)).is_none());
        drop(g1);
        // w2 now owns it but is dropped before taking it: it passes on to w3.
        drop(w2);
        let g3 = futures_lite::future::block_on(w3);
        assert_eq!(lock.waiting(), 0);
        let mut w4 = lock.lock().unwrap();
        assert!(futures_lite::future::block_on(poll_once(&mut w4)).is_none());
        drop(g3);
        drop(futures_lite::future::block_on(w4));
        drop(futures_lite::future::block_on(lock.lock().unwrap()));
    }
}
