//! Deterministic simulation of failover with epochs (issue 27 WP3; docs/design/
//! controller.md §3.3-3.5): three brokers in controller mode, the harness playing the
//! controller (`SimBroker::set_role`). A is master of epoch 1, B and C follow it;
//! producers send (SYNC: acknowledged once a slave confirmed); then A loses power or is
//! demoted while live, the harness promotes the slave holding the most (as an election
//! from the in-sync set would) at epoch 2, the other follows it, producers go on there;
//! A comes back (restart after a crash), follows the new master, is told to TRUNCATE
//! what it wrote past the new epoch's start, restarts to apply the cut (the harness
//! restarts every broker that asks), and catches up.
//!
//! Invariants:
//! - every send acknowledged (by A before the failover, or by the new master after it)
//!   is on the new master;
//! - once caught up, the three logs are byte for byte equal, shard by shard, and so are
//!   the three epoch histories;
//! - a broker restarted to apply a cut holds exactly its log up to the new master's
//!   epoch-2 start (or less, if it had less);
//! - a demoted master answers SERVICE_NOT_AVAILABLE to a send, never SUCCESS, from the
//!   moment it is fenced; nothing but SUCCESS, FLUSH_SLAVE_TIMEOUT,
//!   SLAVE_NOT_AVAILABLE, SYSTEM_BUSY or SERVICE_NOT_AVAILABLE is ever answered.
//!
//! And, once: a slave does not follow a master of an epoch below the one it knows, and
//! a master that sees a slave of a higher epoch fences itself.
//!
//! `RINGMQ_HA_EPOCH_SIM_SEEDS=N` runs N seeds (default 60); `RINGMQ_HA_EPOCH_SIM_SEED=S`
//! replays one.

mod common_sim;
use ringmq_broker::config::{BrokerConfig, BrokerRole};
use ringmq_broker::ha::Role;
use ringmq_broker::routing::queue_owner;
use ringmq_broker::sim::{RequestError, SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::{FlushMode, StoreConfig};
use ringmq_broker::store::engine::ShardId;
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

const TOPIC: &str = "HAE";
const QUEUES: u32 = 4;
const REQUEST_DEADLINE_MS: u64 = 20_000;
/// How long the run waits for every broker to catch up at the end.
const CATCH_UP_MS: u64 = 30_000;
/// How often the harness looks for a broker asking for a restart.
const WATCH_INTERVAL_MS: u64 = 20;

#[derive(Debug, Clone)]
struct Plan {
    shards: usize,
    sync_flush: bool,
    producers: usize,
    sends_per_producer: usize,
    /// A loses power (else: demoted while live).
    crash: bool,
    failover_after_ms: u64,
    /// The slaves stop following this long before the failover (0: they do not), so A
    /// writes records no slave has (stored on the master only), to be cut later.
    partition_ms: u64,
    /// allAck (§3.7): every member of the in-sync set the harness names confirms a send
    /// (A: {B, C}; the new master: the other slave). Else one slave confirms.
    all_ack: bool,
}

#[derive(Default)]
struct Model {
    /// (shard, body) of every send answered SUCCESS.
    acked: BTreeSet<(usize, Vec<u8>)>,
    violations: Vec<String>,
    refused: u64,
    truncation_restarts: u64,
    demoted_refusals: u64,
}

struct World {
    ex: SimExecutor,
    brokers: Vec<Rc<SimBroker>>,
    /// Index of the broker producers send to.
    master: Cell<usize>,
    /// The old master is fenced (or down): no SUCCESS from it for a send made since.
    a_fenced: Cell<bool>,
    /// Bumped at the failover: a request made before may go unanswered.
    failovers: Cell<u64>,
    plan: Plan,
    model: RefCell<Model>,
    producers_done: Cell<usize>,
    done: Cell<bool>,
    /// Shards where the promoted slave held less than the other (acknowledged sends
    /// there are not checked: that needs allAck, WP4).
    unchecked_shards: RefCell<BTreeSet<usize>>,
}

fn addr_of(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, i as u8 + 1], 10912))
}

impl World {
    fn violation(&self, what: String) {
        self.model.borrow_mut().violations.push(format!("t={}ms: {what}", self.ex.now_us() / 1000));
    }

    async fn connect(&self, broker: usize) -> Option<SimClient> {
        let b = &self.brokers[broker];
        if !b.is_up() {
            return None;
        }
        let shard = self.ex.random(0..self.plan.shards as u64) as usize;
        b.connect(shard).map(|end| SimClient::new(self.ex.clone(), end))
    }

    /// Each shard's durable log bytes on broker `b` (empty while it is down).
    async fn logs(&self, b: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for s in self.brokers[b].shards() {
            let store = s.store();
            store.flush_all().await.ok();
            let len = store.flushed_offset() as usize;
            out.push(store.read_for_replica(ShardId(s.id() as u16).phys(0), len.max(1)).await.ok().flatten().unwrap_or_default());
        }
        out
    }

    fn ends(&self, b: usize) -> Vec<u64> {
        self.brokers[b].shards().iter().map(|s| s.store().write_offset()).collect()
    }

    fn histories(&self, b: usize) -> Vec<Option<Vec<(u64, u64)>>> {
        self.brokers[b].shards().iter().map(|s| s.epoch_history().map(|h| h.entries().iter().map(|e| (e.epoch, e.start_phys)).collect())).collect()
    }

    /// Where epoch 2 starts on each shard of the new master (physical offsets).
    fn epoch2_starts(&self) -> Vec<u64> {
        let m = &self.brokers[self.master.get()];
        m.shards().iter().map(|s| s.epoch_history().and_then(|h| h.entry(2)).map_or(u64::MAX, |e| e.start_phys)).collect()
    }
}

fn send_cmd(queue_id: i32, body: &[u8]) -> RemotingCommand {
    common_sim::send_v2(TOPIC, QUEUES, queue_id, body)
}

async fn producer(w: Rc<World>, actor: usize) {
    let mut conn: Option<(usize, SimClient)> = None;
    let mut n = 0;
    while n < w.plan.sends_per_producer {
        let target = w.master.get();
        if conn.as_ref().is_none_or(|(b, c)| *b != target || c.is_closed()) {
            conn = w.connect(target).await.map(|c| (target, c));
            if conn.is_none() {
                w.ex.sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        let Some((broker, client)) = conn.as_ref() else { continue };
        let broker = *broker;
        w.ex.sleep(Duration::from_micros(w.ex.random(0..3_000))).await;
        let body = format!("p{actor}-{n}-").into_bytes().into_iter().chain(std::iter::repeat_n(b'x', w.ex.random(0..700) as usize)).collect::<Vec<u8>>();
        n += 1;
        let queue = w.ex.random(0..QUEUES as u64) as i32;
        let failovers = w.failovers.get();
        let fenced_before = broker == 0 && w.a_fenced.get();
        match client.request(send_cmd(queue, &body), Duration::from_millis(REQUEST_DEADLINE_MS)).await {
            Ok(r) if r.code == rs::SUCCESS => {
                if fenced_before {
                    w.violation(format!("the demoted master answered SUCCESS to a send made after it was fenced ({actor}-{n})"));
                }
                w.model.borrow_mut().acked.insert((queue_owner(TOPIC, queue, w.plan.shards), body));
            }
            Ok(r) => {
                let allowed = [rs::FLUSH_SLAVE_TIMEOUT, rs::SLAVE_NOT_AVAILABLE, rs::SYSTEM_BUSY, rs::SERVICE_NOT_AVAILABLE];
                if !allowed.contains(&r.code) {
                    w.violation(format!("send answered {} ({:?})", r.code, r.remark));
                }
                if fenced_before && r.code != rs::SERVICE_NOT_AVAILABLE {
                    w.violation(format!("the demoted master answered {} ({:?}), not SERVICE_NOT_AVAILABLE", r.code, r.remark));
                }
                let mut m = w.model.borrow_mut();
                m.refused += 1;
                if broker == 0 && r.code == rs::SERVICE_NOT_AVAILABLE {
                    m.demoted_refusals += 1;
                }
            }
            Err(RequestError::Timeout) if w.failovers.get() == failovers => w.violation("send never answered on a live connection".into()),
            Err(_) => {}
        }
    }
    w.producers_done.set(w.producers_done.get() + 1);
}

/// Restarts (clean stop, start) every broker that took a TRUNCATE, checks the cut,
/// and has it follow the new master again; until the run is done.
async fn restarter(w: Rc<World>) {
    while !w.done.get() {
        w.ex.sleep(Duration::from_millis(WATCH_INTERVAL_MS)).await;
        for b in 0..w.brokers.len() {
            let broker = w.brokers[b].clone();
            if b == w.master.get() || !broker.is_up() || !broker.wants_restart() {
                continue;
            }
            let stopping = broker.shards();
            let starts = w.epoch2_starts();
            if let Err(e) = broker.stop().await {
                w.violation(format!("broker {b}: clean stop for the cut failed: {e}"));
                return;
            }
            // Read once stopped: a shard replicates (or takes its own TRUNCATE) until
            // then. Each shard takes its own; one not yet told is cut at a later restart.
            let before: Vec<u64> = stopping.iter().map(|s| s.store().write_offset()).collect();
            // A shard still replicating may append after the stop's last flush: that tail
            // is not durable, and is fetched again.
            let durable: Vec<u64> = stopping.iter().map(|s| s.store().flushed_offset()).collect();
            let cutting: Vec<bool> = stopping.iter().map(|s| s.ha_restart_wanted()).collect();
            drop(stopping);
            if let Err(e) = broker.start().await {
                w.violation(format!("broker {b}: restart to apply the cut failed: {e}"));
                return;
            }
            w.model.borrow_mut().truncation_restarts += 1;
            for (i, (after, before)) in w.ends(b).iter().zip(&before).enumerate() {
                let start = starts[i] - ShardId(i as u16).phys(0);
                let ok = if cutting[i] { *after == (*before).min(start) } else { (durable[i]..=*before).contains(after) };
                if !ok {
                    w.violation(format!("broker {b} shard {i}: log ends at {after} after the restart, was {before} (cut: {}, epoch-2 start {start})", cutting[i]));
                }
            }
            follow(&w, b).await;
        }
    }
}

async fn follow(w: &World, b: usize) {
    let m = w.master.get();
    let epoch = if w.failovers.get() == 0 { 1 } else { 2 };
    if let Err(e) = w.brokers[b].set_role(Role::Slave { epoch, master: addr_of(m) }, Some(w.brokers[m].clone())).await {
        w.violation(format!("broker {b}: could not follow the new master: {e}"));
    }
}

/// The failover: A down or fenced, the slave holding the most promoted at epoch 2, the
/// other slave and (once back) A follow it.
async fn failover(w: Rc<World>) {
    w.ex.sleep(Duration::from_millis(w.plan.failover_after_ms)).await;
    if w.plan.partition_ms > 0 {
        for b in 1..3 {
            if let Err(e) = w.brokers[b].set_role(Role::Fenced, None).await {
                w.violation(format!("stopping broker {b} from following failed: {e}"));
            }
        }
        w.ex.sleep(Duration::from_millis(w.plan.partition_ms)).await;
    }
    let a = w.brokers[0].clone();
    w.failovers.set(w.failovers.get() + 1);
    if w.plan.crash {
        a.crash();
    } else {
        if let Err(e) = a.set_role(Role::Fenced, None).await {
            w.violation(format!("fencing A failed: {e}"));
        }
        w.a_fenced.set(true);
        // A demoted master refuses a send at once.
        if let Some(c) = w.connect(0).await {
            match c.request(send_cmd(0, b"after-fence"), Duration::from_millis(REQUEST_DEADLINE_MS)).await {
                Ok(r) if r.code == rs::SERVICE_NOT_AVAILABLE => {}
                Ok(r) => w.violation(format!("a send to the fenced master answered {} ({:?})", r.code, r.remark)),
                Err(e) => w.violation(format!("a send to the fenced master got no answer: {e:?}")),
            }
        }
    }
    w.a_fenced.set(true);
    // The slave holding the most on every shard (ties: B); its log holds every send a
    // slave confirmed.
    let (eb, ec) = (w.ends(1), w.ends(2));
    let new_master = if ec.iter().zip(&eb).all(|(c, b)| c > b) { 2 } else { 1 };
    let other = 3 - new_master;
    // Without allAck one slave confirms a SYNC send: a shard where the other slave
    // holds more may have acknowledged sends only it has.
    for (i, (b, c)) in eb.iter().zip(&ec).enumerate() {
        let (mine, theirs) = if new_master == 1 { (b, c) } else { (c, b) };
        if mine < theirs && !w.plan.all_ack {
            w.unchecked_shards.borrow_mut().insert(i);
        }
    }
    if let Err(e) = w.brokers[new_master].set_role(Role::Master { epoch: 2 }, None).await {
        w.violation(format!("promoting broker {new_master} failed: {e}"));
        return;
    }
    w.master.set(new_master);
    if w.plan.all_ack {
        w.brokers[new_master].set_sync_state_set(Some([other as u64 + 1].into_iter().collect()));
    }
    follow(&w, other).await;
    if w.plan.crash {
        w.ex.sleep(Duration::from_millis(w.ex.random(0..100))).await;
        if let Err(e) = a.start().await {
            w.violation(format!("A's restart failed: {e}"));
            return;
        }
    }
    follow(&w, 0).await;
}

fn config(plan: &Plan, id: u64) -> BrokerConfig {
    let mut config = BrokerConfig { store_root: "/sim".into(), shard_count: plan.shards, max_message_bytes: 4096, ..BrokerConfig::default() };
    config.store = StoreConfig::for_tests();
    config.store.flush_mode = if plan.sync_flush { FlushMode::Sync } else { FlushMode::Async };
    config.store.flush_interval_ms = 20;
    config.sync_flush_timeout_ms = 500;
    config.role = BrokerRole::SyncMaster;
    config.broker_id = id;
    config.controller_mode = true;
    config
}

/// Bodies of every record on broker `b`, by shard.
async fn bodies(b: &SimBroker) -> BTreeSet<(usize, Vec<u8>)> {
    let mut out = BTreeSet::new();
    for s in b.shards() {
        let store = s.store();
        for q in 0..QUEUES as i32 {
            let (min, max) = (store.min_offset(TOPIC, q), store.max_offset(TOPIC, q));
            for e in store.cq_entries(TOPIC, q, min, max - min).await.unwrap_or_default() {
                if let Ok(Some(r)) = store.read_record(e.phys_offset, Some(e.size)).await {
                    if let Ok(v) = StoredMessageView::parse(&r) {
                        out.insert((s.id(), v.body().to_vec()));
                    }
                }
            }
        }
    }
    out
}

fn run_seed(seed: u64) -> (Vec<String>, String) {
    common_sim::init_seed_thread();
    let ex = SimExecutor::new(seed);
    let plan = Plan {
        shards: 1 + ex.random(0..2) as usize,
        sync_flush: ex.chance(400_000),
        producers: 1 + ex.random(0..3) as usize,
        sends_per_producer: 20 + ex.random(0..100) as usize,
        crash: ex.chance(500_000),
        failover_after_ms: 5 + ex.random(0..250),
        partition_ms: if ex.chance(500_000) { 1 + ex.random(0..100) } else { 0 },
        all_ack: ex.chance(500_000),
    };
    let brokers: Vec<_> = (0..3u64).map(|i| SimBroker::new(ex.clone(), SimDisk::new(seed.wrapping_mul(3).wrapping_add(i)), config(&plan, i + 1))).collect();
    let w = Rc::new(World {
        ex: ex.clone(),
        brokers,
        master: Cell::new(0),
        a_fenced: Cell::new(false),
        failovers: Cell::new(0),
        plan: plan.clone(),
        model: RefCell::new(Model::default()),
        producers_done: Cell::new(0),
        done: Cell::new(false),
        unchecked_shards: RefCell::new(BTreeSet::new()),
    });
    let w2 = w.clone();
    ex.block_on(async move {
        let w = w2;
        for b in &w.brokers {
            b.start().await.expect("broker starts");
        }
        w.brokers[0].set_role(Role::Master { epoch: 1 }, None).await.expect("A becomes master of epoch 1");
        if w.plan.all_ack {
            w.brokers[0].set_sync_state_set(Some([2, 3].into_iter().collect()));
        }
        for b in 1..3 {
            follow(&w, b).await;
        }
        {
            let c = w.connect(0).await.expect("A is up");
            let r = c.request(common_sim::create_topic(TOPIC, QUEUES), Duration::from_millis(REQUEST_DEADLINE_MS)).await.expect("create answered");
            assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        }
        // The slaves know the topic before anything can fail over to them.
        let deadline_us = w.ex.now_us() + CATCH_UP_MS * 1000;
        while !w.brokers[1..].iter().all(|b| b.shards().iter().all(|s| s.topic(TOPIC).is_some())) {
            assert!(w.ex.now_us() < deadline_us, "the topic did not reach the slaves");
            w.ex.sleep(Duration::from_millis(10)).await;
        }
        let done: Vec<_> = (0..w.plan.producers).map(|p| common_sim::spawn_actor(&w.ex, producer(w.clone(), p))).collect();
        let fo = common_sim::spawn_actor(&w.ex, failover(w.clone()));
        let rs_task = common_sim::spawn_actor(&w.ex, restarter(w.clone()));
        for d in done {
            d.await;
        }
        fo.await;
        // Caught up: every log equal to the new master's, every epoch history too.
        let deadline_us = w.ex.now_us() + CATCH_UP_MS * 1000;
        loop {
            let m = w.master.get();
            let want = w.logs(m).await;
            let mut equal = true;
            for b in 0..3 {
                equal &= w.brokers[b].is_up() && !w.brokers[b].wants_restart() && w.logs(b).await == want && w.histories(b) == w.histories(m);
            }
            if equal {
                break;
            }
            if w.ex.now_us() > deadline_us {
                let state: Vec<_> = (0..3).map(|b| (b, w.ends(b), w.histories(b), w.brokers[b].shards().iter().map(|s| (s.ha_role(), s.ha_slave_state())).collect::<Vec<_>>())).collect();
                w.violation(format!("not caught up within {CATCH_UP_MS} ms (master {m}): {state:?}"));
                break;
            }
            w.ex.sleep(Duration::from_millis(100)).await;
        }
        w.done.set(true);
        rs_task.await;
        let m = w.master.get();
        // The new master's epoch history: epoch 1 from the log start, epoch 2 after.
        for (i, h) in w.histories(m).iter().enumerate() {
            let epochs: Vec<u64> = h.iter().flatten().map(|e| e.0).collect();
            if epochs != [0, 1, 2] {
                w.violation(format!("shard {i}: the new master's epoch history is {h:?}"));
            }
        }
        let on_master = bodies(&w.brokers[m]).await;
        let unchecked = w.unchecked_shards.borrow().clone();
        let missing: Vec<_> = w.model.borrow().acked.iter().filter(|b| !unchecked.contains(&b.0) && !on_master.contains(*b)).map(|(s, b)| (*s, String::from_utf8_lossy(&b[..b.len().min(12)]).into_owned())).collect();
        if !missing.is_empty() {
            w.violation(format!("{} acknowledged sends are not on the new master: {missing:?}", missing.len()));
        }
    });
    ex.shutdown();
    let m = w.model.borrow();
    let summary = format!(
        "{plan:?}: {} acked, {} refused ({} by the demoted master), {} truncation restarts, new master {}, unchecked shards {:?}, t={} ms",
        m.acked.len(),
        m.refused,
        m.demoted_refusals,
        m.truncation_restarts,
        w.master.get(),
        w.unchecked_shards.borrow(),
        ex.now_us() / 1000
    );
    (m.violations.clone(), summary)
}

#[test]
fn failover_with_epochs_keeps_its_invariants_under_simulation() {
    let summaries = common_sim::run_seeds("RINGMQ_HA_EPOCH_SIM_SEED", "RINGMQ_HA_EPOCH_SIM_SEEDS", 60, run_seed);
    // The runs reach what they are for: cuts applied by a restart, and sends refused
    // by a demoted master.
    let count = |what: &str| summaries.iter().filter(|s| !s.contains(&format!(" 0 {what}")) && !s.contains(&format!("(0 {what}"))).count();
    let (cuts, refusals) = (count("truncation restarts"), count("by the demoted master"));
    let partial = summaries.iter().filter(|s| !s.contains("unchecked shards {}")).count();
    eprintln!("{} seeds: {cuts} with truncation restarts, {refusals} with sends refused by the demoted master, {partial} with shards whose acknowledged sends were not checked", summaries.len());
    if summaries.len() >= 30 {
        assert!(cuts > 0 && refusals > 0, "the seeds never truncated ({cuts}) or never refused ({refusals})");
    }
}

/// A slave that knows epoch 3 does not follow a master of epoch 1; a master of epoch 1
/// that sees a slave of epoch 2 fences itself and then refuses sends.
#[test]
fn lower_epochs_are_not_followed_and_a_stale_master_fences_itself() {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(7);
    let plan = Plan { shards: 1, sync_flush: false, producers: 0, sends_per_producer: 0, crash: false, failover_after_ms: 0, partition_ms: 0, all_ack: false };
    let stale = SimBroker::new(ex.clone(), SimDisk::new(1), config(&plan, 1));
    let ahead = SimBroker::new(ex.clone(), SimDisk::new(2), config(&plan, 2));
    let x = ex.clone();
    ex.block_on(async move {
        stale.start().await.unwrap();
        ahead.start().await.unwrap();
        stale.set_role(Role::Master { epoch: 1 }, None).await.unwrap();
        // Knows epoch 3 (told so): the epoch-1 master's WELCOME is not followed.
        ahead.set_role(Role::Slave { epoch: 3, master: addr_of(0) }, Some(stale.clone())).await.unwrap();
        x.sleep(Duration::from_millis(3_000)).await;
        assert!(!ahead.shards()[0].ha_slave_state().connected, "a slave of epoch 3 follows no epoch-1 master");
        assert_eq!(stale.shards()[0].ha_role(), Some(Role::Master { epoch: 1 }), "a slave of an empty log tells the master nothing of its epoch");
        // Promoted to epoch 2 and then pointed at the epoch-1 master: its HELLO carries
        // epoch 2, and the stale master fences itself.
        let other = SimBroker::new(x.clone(), SimDisk::new(3), config(&plan, 3));
        other.start().await.unwrap();
        other.set_role(Role::Master { epoch: 2 }, None).await.unwrap();
        let c = SimClient::new(x.clone(), other.connect(0).unwrap());
        let r = c.request(common_sim::create_topic(TOPIC, QUEUES), Duration::from_millis(REQUEST_DEADLINE_MS)).await.unwrap();
        assert_eq!(r.code, rs::SUCCESS);
        let r = c.request(send_cmd(0, b"epoch-2 record"), Duration::from_millis(REQUEST_DEADLINE_MS)).await.unwrap();
        assert_eq!(r.code, rs::SLAVE_NOT_AVAILABLE, "SYNC with no slave: stored on the master only");
        other.set_role(Role::Slave { epoch: 2, master: addr_of(0) }, Some(stale.clone())).await.unwrap();
        let deadline = x.now_us() + 5_000_000;
        while stale.shards()[0].ha_role() != Some(Role::Fenced) {
            assert!(x.now_us() < deadline, "the stale master did not fence itself");
            x.sleep(Duration::from_millis(10)).await;
        }
        let c = SimClient::new(x.clone(), stale.connect(0).unwrap());
        let r = c.request(send_cmd(0, b"to a fenced master"), Duration::from_millis(REQUEST_DEADLINE_MS)).await.unwrap();
        assert_eq!(r.code, rs::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    });
    ex.shutdown();
}
