//! `GlommioRaftRuntime`: openraft's `AsyncRuntime` on the current glommio executor
//! (docs/design/controller.md §1).
//!
//! Owns: how openraft spawns tasks (`glommio::spawn_local`, detached: openraft drops
//! join handles of tasks that must keep running, as tokio allows), sleeps and times out
//! (`glommio::timer::Timer`), reads the monotonic clock (`GlommioInstant`, a
//! `std::time::Instant` newtype) and makes one-shot channels (tokio's runtime-agnostic
//! `sync::oneshot`).
//!
//! Invariants: every method is called on a glommio executor thread (openraft is built
//! `singlethreaded`: its futures are `!Send` and stay on the executor that created the
//! `Raft`); no tokio runtime exists.

use openraft::async_runtime::AsyncOneshotSendExt;
use openraft::{AsyncRuntime, Instant};
use std::fmt;
use std::future::Future;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct GlommioRaftRuntime;

/// The monotonic clock openraft's timers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlommioInstant(pub std::time::Instant);

impl Add<Duration> for GlommioInstant {
    type Output = Self;
    fn add(self, rhs: Duration) -> Self {
        Self(self.0 + rhs)
    }
}
impl AddAssign<Duration> for GlommioInstant {
    fn add_assign(&mut self, rhs: Duration) {
        self.0 += rhs;
    }
}
impl Sub<Duration> for GlommioInstant {
    type Output = Self;
    fn sub(self, rhs: Duration) -> Self {
        Self(self.0 - rhs)
    }
}
impl Sub<GlommioInstant> for GlommioInstant {
    type Output = Duration;
    fn sub(self, rhs: Self) -> Duration {
        self.0.saturating_duration_since(rhs.0)
    }
}
impl SubAssign<Duration> for GlommioInstant {
    fn sub_assign(&mut self, rhs: Duration) {
        self.0 -= rhs;
    }
}
impl Instant for GlommioInstant {
    fn now() -> Self {
        Self(std::time::Instant::now())
    }
}

/// A detached task ended without a value (it panicked or was cancelled).
#[derive(Debug, thiserror::Error)]
#[error("raft task ended without a result (cancelled or panicked)")]
pub struct TaskLost;

/// A spawned task's handle; dropping it leaves the task running.
pub struct GlommioJoinHandle<T>(glommio::task::JoinHandle<T>);

impl<T> Future for GlommioJoinHandle<T> {
    type Output = Result<T, TaskLost>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|v| v.ok_or(TaskLost))
    }
}

/// `glommio::timer::Timer` with openraft's `()` output.
pub struct GlommioSleep(glommio::timer::Timer);

impl Future for GlommioSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("raft operation timed out")]
pub struct Elapsed;

/// A future raced against a timer.
pub struct GlommioTimeout<F> {
    future: Pin<Box<F>>,
    timer: glommio::timer::Timer,
}

impl<F: Future> Future for GlommioTimeout<F> {
    type Output = Result<F::Output, Elapsed>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut self.timer).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

pub struct OneshotSender<T>(tokio::sync::oneshot::Sender<T>);

impl<T> AsyncOneshotSendExt<T> for OneshotSender<T> {
    fn send(self, t: T) -> Result<(), T> {
        self.0.send(t)
    }
}

impl<T> fmt::Debug for OneshotSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneshotSender")
    }
}

fn until(deadline: GlommioInstant) -> Duration {
    deadline.0.saturating_duration_since(std::time::Instant::now())
}

impl AsyncRuntime for GlommioRaftRuntime {
    type JoinError = TaskLost;
    type JoinHandle<T: 'static> = GlommioJoinHandle<T>;
    type Sleep = GlommioSleep;
    type Instant = GlommioInstant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R>> = GlommioTimeout<T>;
    type ThreadLocalRng = rand::rngs::ThreadRng;
    type OneshotSender<T> = OneshotSender<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;
    type OneshotReceiver<T> = tokio::sync::oneshot::Receiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + 'static,
        T::Output: 'static,
    {
        GlommioJoinHandle(glommio::spawn_local(future).detach())
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        GlommioSleep(glommio::timer::Timer::new(duration))
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        GlommioSleep(glommio::timer::Timer::new(until(deadline)))
    }

    fn timeout<R, F: Future<Output = R>>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        GlommioTimeout { future: Box::pin(future), timer: glommio::timer::Timer::new(duration) }
    }

    fn timeout_at<R, F: Future<Output = R>>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        GlommioTimeout { future: Box::pin(future), timer: glommio::timer::Timer::new(until(deadline)) }
    }

    fn is_panic(_join_error: &Self::JoinError) -> bool {
        // glommio does not tell a panicked task from a cancelled one.
        false
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        rand::thread_rng()
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (OneshotSender(tx), rx)
    }
}
