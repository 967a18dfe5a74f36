//! A deterministic single-threaded scheduler with a simulated clock and timers: the
//! runtime the request layer runs on under simulation (DESIGN.md §2).
//!
//! Every choice comes from one PRNG seeded by the test: which ready task runs next
//! (the scheduler picks at random among them, so interleavings vary by seed), how long
//! each simulated IO takes. Time moves only when no task is ready: the clock jumps to
//! the earliest timer. So a run is a pure function of its seed and replays exactly.
//!
//! Tasks belong to a *group* (a broker incarnation, or the test's clients): a crash
//! drops every task of the broker's group at once, as SIGKILL would.
//!
//! Invariants checked on every poll (a violation panics naming the task and time):
//! - no task reads the clock more than `CLOCK_READS_PER_POLL_MAX` times in one poll,
//!   and none runs more than `IO_OPS_PER_POLL_MAX` simulated IOs in one poll: a loop
//!   that never awaits is caught instead of hanging the test;
//! - no task is polled more than `POLLS_PER_INSTANT_MAX` times without time moving
//!   (a task that keeps waking itself), and the whole run takes at most
//!   `STEPS_PER_INSTANT_MAX` polls at one instant (livelock);
//! - a `block_on` whose future can never complete (no task ready, no timer) panics.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

pub const CLOCK_READS_PER_POLL_MAX: u64 = 10_000;
pub const IO_OPS_PER_POLL_MAX: u64 = 100_000;
pub const POLLS_PER_INSTANT_MAX: u64 = 100_000;
pub const STEPS_PER_INSTANT_MAX: u64 = 5_000_000;
/// Wall-clock milliseconds at simulated time zero (2023-11-14).
pub const SIM_EPOCH_MS: i64 = 1_700_000_000_000;

pub type GroupId = u32;
/// The group of tasks that belong to no broker (the test's driver and clients).
pub const CLIENT_GROUP: GroupId = 0;

type Task = Pin<Box<dyn Future<Output = ()>>>;

struct TaskSlot {
    group: GroupId,
    future: Option<Task>,
    polls_this_instant: u64,
    instant_us: u64,
}

#[derive(Default)]
struct ReadyQueue {
    order: Vec<u64>,
    queued: BTreeSet<u64>,
}

struct TaskWaker {
    id: u64,
    ready: Arc<Mutex<ReadyQueue>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let mut q = self.ready.lock().expect("the simulator is single-threaded");
        if q.queued.insert(self.id) {
            q.order.push(self.id);
        }
    }
}

pub(crate) struct Exec {
    now_us: Cell<u64>,
    rng: RefCell<ChaCha8Rng>,
    tasks: RefCell<BTreeMap<u64, TaskSlot>>,
    ready: Arc<Mutex<ReadyQueue>>,
    timers: RefCell<BTreeMap<(u64, u64), Waker>>,
    next_timer: Cell<u64>,
    next_task: Cell<u64>,
    /// The last task group handed out (`new_group`): unique across simulated processes.
    next_group: Cell<GroupId>,
    current_group: Cell<GroupId>,
    current_task: Cell<u64>,
    clock_reads_this_poll: Cell<u64>,
    io_ops_this_poll: Cell<u64>,
    steps_this_instant: Cell<u64>,
    steps_total: Cell<u64>,
}

/// The simulator's scheduler; clones share it.
#[derive(Clone)]
pub struct SimExecutor {
    pub(crate) exec: Rc<Exec>,
}

impl SimExecutor {
    pub fn new(seed: u64) -> Self {
        Self {
            exec: Rc::new(Exec {
                now_us: Cell::new(0),
                rng: RefCell::new(ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_0F_5C4E_D01E)),
                tasks: RefCell::new(BTreeMap::new()),
                ready: Arc::new(Mutex::new(ReadyQueue::default())),
                timers: RefCell::new(BTreeMap::new()),
                next_timer: Cell::new(0),
                next_task: Cell::new(1),
                next_group: Cell::new(CLIENT_GROUP),
                current_group: Cell::new(CLIENT_GROUP),
                current_task: Cell::new(0),
                clock_reads_this_poll: Cell::new(0),
                io_ops_this_poll: Cell::new(0),
                steps_this_instant: Cell::new(0),
                steps_total: Cell::new(0),
            }),
        }
    }

    /// Simulated microseconds since the start.
    pub fn now_us(&self) -> u64 {
        self.exec.now_us.get()
    }

    pub fn steps(&self) -> u64 {
        self.exec.steps_total.get()
    }

    /// Tasks alive now.
    pub fn task_count(&self) -> usize {
        self.exec.tasks.borrow().len()
    }

    /// A number from the run's PRNG in `range`.
    pub fn random(&self, range: std::ops::Range<u64>) -> u64 {
        self.exec.rng.borrow_mut().gen_range(range)
    }

    /// `true` with probability `per_million` / 1e6.
    pub fn chance(&self, per_million: u32) -> bool {
        self.random(0..1_000_000) < per_million as u64
    }

    /// Spawns `fut` into the group of the task running now (or `group` when given).
    /// A task group no other process of this run uses (a broker incarnation is one).
    pub fn new_group(&self) -> GroupId {
        let g = self.exec.next_group.get() + 1;
        self.exec.next_group.set(g);
        g
    }

    pub fn spawn_in(&self, group: Option<GroupId>, fut: impl Future<Output = ()> + 'static) {
        let id = self.exec.next_task.get();
        self.exec.next_task.set(id + 1);
        let group = group.unwrap_or(self.exec.current_group.get());
        let slot = TaskSlot { group, future: Some(Box::pin(fut)), polls_this_instant: 0, instant_us: self.now_us() };
        self.exec.tasks.borrow_mut().insert(id, slot);
        self.wake(id);
    }

    fn wake(&self, id: u64) {
        let mut q = self.exec.ready.lock().expect("single-threaded");
        if q.queued.insert(id) {
            q.order.push(id);
        }
    }

    /// Drops every task of `group` (a crash of that broker incarnation).
    pub fn kill_group(&self, group: GroupId) {
        assert_ne!(group, self.exec.current_group.get(), "a task group cannot kill itself");
        let doomed: Vec<TaskSlot> = {
            let mut tasks = self.exec.tasks.borrow_mut();
            let ids: Vec<u64> = tasks.iter().filter(|(_, t)| t.group == group).map(|(&id, _)| id).collect();
            ids.into_iter().filter_map(|id| tasks.remove(&id)).collect()
        };
        // Dropped outside the borrow: a future's destructor may spawn or wake.
        drop(doomed);
    }

    /// Drops every task and timer: the end of a run. Tasks hold the runtime that holds
    /// them (a shard's background loops, its connections), so without this a finished
    /// run would keep its whole simulated disk alive.
    pub fn shutdown(&self) {
        let all: Vec<TaskSlot> = std::mem::take(&mut *self.exec.tasks.borrow_mut()).into_values().collect();
        drop(all);
        // Destructors may have spawned; drop those too.
        let again: Vec<TaskSlot> = std::mem::take(&mut *self.exec.tasks.borrow_mut()).into_values().collect();
        drop(again);
        self.exec.timers.borrow_mut().clear();
        let mut q = self.exec.ready.lock().expect("single-threaded");
        q.order.clear();
        q.queued.clear();
    }

    /// Sleeps for `duration` of simulated time.
    pub fn sleep(&self, duration: Duration) -> SimSleep {
        SimSleep { exec: self.exec.clone(), deadline_us: self.now_us() + duration.as_micros() as u64, key: None }
    }

    pub(crate) fn note_clock_read(&self) {
        let n = self.exec.clock_reads_this_poll.get() + 1;
        self.exec.clock_reads_this_poll.set(n);
        assert!(
            n <= CLOCK_READS_PER_POLL_MAX,
            "task {} read the clock {n} times in one poll at t={} µs without awaiting: a spin",
            self.exec.current_task.get(),
            self.now_us()
        );
    }

    pub(crate) fn note_io(&self) {
        let n = self.exec.io_ops_this_poll.get() + 1;
        self.exec.io_ops_this_poll.set(n);
        assert!(n <= IO_OPS_PER_POLL_MAX, "task {} ran {n} IOs in one poll at t={} µs: a spin", self.exec.current_task.get(), self.now_us());
    }

    fn pick_ready(&self) -> Option<u64> {
        let mut q = self.exec.ready.lock().expect("single-threaded");
        if q.order.is_empty() {
            return None;
        }
        let at = self.exec.rng.borrow_mut().gen_range(0..q.order.len());
        let id = q.order.swap_remove(at);
        q.queued.remove(&id);
        Some(id)
    }

    /// Moves time to the earliest timer and wakes every timer due then; `false` when
    /// no timer is pending.
    fn advance_to_next_timer(&self) -> bool {
        let Some((&(deadline, _), _)) = self.exec.timers.borrow().iter().next() else { return false };
        if deadline > self.now_us() {
            self.exec.now_us.set(deadline);
            self.exec.steps_this_instant.set(0);
        }
        let due: Vec<Waker> = {
            let mut timers = self.exec.timers.borrow_mut();
            let later = timers.split_off(&(self.now_us() + 1, 0));
            std::mem::replace(&mut *timers, later).into_values().collect()
        };
        due.into_iter().for_each(Waker::wake);
        true
    }

    fn poll_task(&self, id: u64) {
        let (group, mut future) = {
            let mut tasks = self.exec.tasks.borrow_mut();
            let Some(slot) = tasks.get_mut(&id) else { return }; // finished or killed
            let now = self.now_us();
            if slot.instant_us != now {
                slot.instant_us = now;
                slot.polls_this_instant = 0;
            }
            slot.polls_this_instant += 1;
            assert!(
                slot.polls_this_instant <= POLLS_PER_INSTANT_MAX,
                "task {id} was polled {} times at t={now} µs without time moving: it keeps waking itself",
                slot.polls_this_instant
            );
            (slot.group, slot.future.take().expect("a task is not polled re-entrantly"))
        };
        let waker = Waker::from(Arc::new(TaskWaker { id, ready: self.exec.ready.clone() }));
        let mut cx = Context::from_waker(&waker);
        self.exec.current_group.set(group);
        self.exec.current_task.set(id);
        self.exec.clock_reads_this_poll.set(0);
        self.exec.io_ops_this_poll.set(0);
        let done = future.as_mut().poll(&mut cx).is_ready();
        self.exec.current_group.set(CLIENT_GROUP);
        self.exec.current_task.set(0);
        let mut tasks = self.exec.tasks.borrow_mut();
        if done {
            tasks.remove(&id);
        } else if let Some(slot) = tasks.get_mut(&id) {
            slot.future = Some(future);
        } else {
            // Killed while it ran (its own group was killed by another task): drop.
            drop(tasks);
            drop(future);
        }
    }

    /// Runs every task until `fut` completes; returns its output.
    pub fn block_on<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> T {
        let out: Rc<RefCell<Option<T>>> = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.spawn_in(Some(CLIENT_GROUP), async move {
            *slot.borrow_mut() = Some(fut.await);
        });
        loop {
            if let Some(v) = out.borrow_mut().take() {
                return v;
            }
            match self.pick_ready() {
                Some(id) => {
                    self.poll_task(id);
                    let steps = self.exec.steps_this_instant.get() + 1;
                    self.exec.steps_this_instant.set(steps);
                    self.exec.steps_total.set(self.exec.steps_total.get() + 1);
                    assert!(steps <= STEPS_PER_INSTANT_MAX, "{steps} polls at t={} µs without time moving: a livelock", self.now_us());
                }
                None => {
                    if !self.advance_to_next_timer() {
                        panic!("deadlock at t={} µs: no task is ready and no timer is pending", self.now_us());
                    }
                }
            }
        }
    }
}

/// A simulated timer; deregisters when dropped.
pub struct SimSleep {
    exec: Rc<Exec>,
    deadline_us: u64,
    key: Option<(u64, u64)>,
}

impl Future for SimSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.exec.now_us.get() >= self.deadline_us {
            if let Some(key) = self.key.take() {
                self.exec.timers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(k) => k,
            None => {
                let seq = self.exec.next_timer.get();
                self.exec.next_timer.set(seq + 1);
                let k = (self.deadline_us, seq);
                self.key = Some(k);
                k
            }
        };
        self.exec.timers.borrow_mut().insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for SimSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.exec.timers.borrow_mut().remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_moves_only_when_idle_and_runs_replay() {
        let trace = |seed: u64| {
            let ex = SimExecutor::new(seed);
            let log = Rc::new(RefCell::new(Vec::new()));
            for i in 0..5u64 {
                let (ex2, log) = (ex.clone(), log.clone());
                ex.spawn_in(None, async move {
                    ex2.sleep(Duration::from_millis(10 * (i % 2))).await;
                    log.borrow_mut().push((i, ex2.now_us()));
                });
            }
            let ex2 = ex.clone();
            ex.block_on(async move { ex2.sleep(Duration::from_millis(50)).await });
            assert_eq!(ex.now_us(), 50_000);
            let v = log.borrow().clone();
            v
        };
        assert_eq!(trace(1), trace(1));
        let t = trace(1);
        assert!(t.iter().all(|&(i, at)| at == 10_000 * (i % 2)), "{t:?}");
    }

    #[test]
    #[should_panic(expected = "deadlock")]
    fn a_future_that_can_never_complete_is_reported() {
        let ex = SimExecutor::new(0);
        ex.block_on(std::future::pending::<()>());
    }

    #[test]
    #[should_panic(expected = "keeps waking itself")]
    fn a_task_that_wakes_itself_forever_is_caught() {
        let ex = SimExecutor::new(0);
        ex.block_on(async {
            loop {
                futures_lite::future::yield_now().await;
            }
        });
    }

    #[test]
    fn killing_a_group_drops_its_tasks_only() {
        let ex = SimExecutor::new(3);
        let ran = Rc::new(Cell::new(0));
        for group in [1, 2] {
            let (ex2, ran) = (ex.clone(), ran.clone());
            ex.spawn_in(Some(group), async move {
                ex2.sleep(Duration::from_secs(1)).await;
                ran.set(ran.get() + group);
            });
        }
        let ex2 = ex.clone();
        ex.block_on(async move {
            ex2.kill_group(1);
            ex2.sleep(Duration::from_secs(2)).await;
        });
        assert_eq!(ran.get(), 2);
        assert_eq!(ex.task_count(), 0);
    }
}
