//! Deterministic simulation of master/slave replication (issue 13; ARCHITECTURE.md,
//! `ha/` and `shard/ha.rs`): a master and a slave broker, each on its own SimDisk, the
//! production shard, store and replication code on the simulator, replication over
//! in-memory pipes. Producers send to the master (single sends, random queues); the
//! master or the slave loses power at random points (unsynced writes dropped, kept or
//! torn) and restarts.
//!
//! Invariants:
//! - the slave's durable log is always a prefix of the master's: after every restart,
//!   and once caught up the two logs are byte for byte equal, with the same queues;
//! - SYNC_MASTER: every send answered SUCCESS is on the slave (checked after a final
//!   master power cut, the master not restarted); ASYNC_MASTER: whatever the slave holds
//!   is a prefix of what the master held;
//! - a SYNC_MASTER answers only SUCCESS, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (or
//!   a busy/unavailable store); no request goes unanswered on a live connection.
//!
//! `RINGMQ_HA_SIM_SEEDS=N` runs N seeds (default 60); `RINGMQ_HA_SIM_SEED=S` replays one.


mod common_sim;
use ringmq_broker::config::{BrokerConfig, BrokerRole};
use ringmq_broker::sim::{RequestError, SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::{FlushMode, StoreConfig};
use ringmq_broker::store::engine::ShardId;
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

const TOPIC: &str = "HA";
const QUEUES: u32 = 4;
const REQUEST_DEADLINE_MS: u64 = 20_000;
/// How long the run waits for the slave to catch up at the end.
const CATCH_UP_MS: u64 = 30_000;

#[derive(Debug, Clone)]
struct Plan {
    shards: usize,
    sync_master: bool,
    sync_flush: bool,
    producers: usize,
    sends_per_producer: usize,
    crashes: usize,
}

#[derive(Default)]
struct Model {
    /// Bodies answered SUCCESS by the master.
    acked: BTreeSet<Vec<u8>>,
    violations: Vec<String>,
    master_crashes: u64,
    slave_crashes: u64,
    refused: u64,
}

struct World {
    ex: SimExecutor,
    master: Rc<SimBroker>,
    slave: Rc<SimBroker>,
    plan: Plan,
    model: RefCell<Model>,
    master_epoch: Cell<u64>,
    producers_done: Cell<usize>,
}

impl World {
    fn violation(&self, what: String) {
        self.model.borrow_mut().violations.push(format!("t={}ms: {what}", self.ex.now_us() / 1000));
    }

    async fn connect_master(&self) -> SimClient {
        loop {
            if self.master.is_up() {
                let shard = self.ex.random(0..self.plan.shards as u64) as usize;
                if let Some(end) = self.master.connect(shard) {
                    return SimClient::new(self.ex.clone(), end);
                }
            }
            self.ex.sleep(Duration::from_millis(5)).await;
        }
    }
}

fn send_cmd(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
    common_sim::send_v2(topic, QUEUES, queue_id, body)
}

async fn producer(w: Rc<World>, actor: usize) {
    let mut client = w.connect_master().await;
    for n in 0..w.plan.sends_per_producer {
        if client.is_closed() {
            client = w.connect_master().await;
        }
        w.ex.sleep(Duration::from_micros(w.ex.random(0..3_000))).await;
        let body = format!("p{actor}-{n}-").into_bytes().into_iter().chain(std::iter::repeat_n(b'x', w.ex.random(0..700) as usize)).collect::<Vec<u8>>();
        let epoch = w.master_epoch.get();
        let queue = w.ex.random(0..QUEUES as u64) as i32;
        match client.request(send_cmd(TOPIC, queue, &body), Duration::from_millis(REQUEST_DEADLINE_MS)).await {
            Ok(r) if r.code == rs::SUCCESS => {
                w.model.borrow_mut().acked.insert(body);
            }
            Ok(r) => {
                let allowed = [rs::FLUSH_SLAVE_TIMEOUT, rs::SLAVE_NOT_AVAILABLE, rs::SYSTEM_BUSY, rs::SERVICE_NOT_AVAILABLE];
                if !allowed.contains(&r.code) || (!w.plan.sync_master && r.code != rs::SYSTEM_BUSY && r.code != rs::SERVICE_NOT_AVAILABLE) {
                    w.violation(format!("send answered {} ({:?})", r.code, r.remark));
                }
                w.model.borrow_mut().refused += 1;
            }
            Err(RequestError::Timeout) if w.master_epoch.get() == epoch => w.violation("send never answered on a live connection".into()),
            Err(_) => {}
        }
    }
    w.producers_done.set(w.producers_done.get() + 1);
}

async fn chaos(w: Rc<World>) {
    for _ in 0..w.plan.crashes {
        w.ex.sleep(Duration::from_millis(w.ex.random(1..200))).await;
        if w.producers_done.get() == w.plan.producers {
            break;
        }
        if w.ex.chance(500_000) {
            w.master_epoch.set(w.master_epoch.get() + 1);
            w.master.crash();
            w.model.borrow_mut().master_crashes += 1;
            w.ex.sleep(Duration::from_millis(w.ex.random(0..50))).await;
            if let Err(e) = w.master.start().await {
                w.violation(format!("master restart failed: {e}"));
                return;
            }
        } else {
            w.slave.crash();
            w.model.borrow_mut().slave_crashes += 1;
            w.ex.sleep(Duration::from_millis(w.ex.random(0..50))).await;
            if let Err(e) = w.slave.start().await {
                w.violation(format!("slave restart failed: {e}"));
                return;
            }
        }
        check_prefix(&w, "after a restart").await;
    }
}

/// Each shard's durable log bytes (from offset 0) on `b`.
async fn logs(b: &SimBroker) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for s in b.shards() {
        let store = s.store();
        store.flush_all().await.ok();
        let len = store.flushed_offset() as usize;
        let bytes = store.read_for_replica(ShardId(s.id() as u16).phys(0), len.max(1)).await.ok().flatten().unwrap_or_default();
        out.push(bytes);
    }
    out
}

/// The slave's log is a prefix of the master's, shard by shard.
async fn check_prefix(w: &World, when: &str) -> bool {
    // The slave first: it keeps replicating while the master is read, and the master's
    // durable log only grows, so a slave read before it must be a prefix of it.
    let s = logs(&w.slave).await;
    let m = logs(&w.master).await;
    let mut equal = true;
    for (i, (m, s)) in m.iter().zip(&s).enumerate() {
        if s.len() > m.len() || m[..s.len()] != s[..] {
            w.violation(format!("{when}: shard {i}: the slave's log ({} bytes) is not a prefix of the master's ({} bytes)", s.len(), m.len()));
        }
        equal &= s.len() == m.len();
    }
    equal
}

fn config(plan: &Plan, slave: bool) -> BrokerConfig {
    let mut config = BrokerConfig { store_root: "/sim".into(), shard_count: plan.shards, max_message_bytes: 4096, ..BrokerConfig::default() };
    config.store = StoreConfig::for_tests();
    config.store.flush_mode = if plan.sync_flush { FlushMode::Sync } else { FlushMode::Async };
    config.store.flush_interval_ms = 20;
    config.sync_flush_timeout_ms = 500;
    if slave {
        config.role = BrokerRole::Slave;
        config.broker_id = 1;
        config.ha_master_address = Some("127.0.0.1:10912".into());
    } else {
        config.role = if plan.sync_master { BrokerRole::SyncMaster } else { BrokerRole::AsyncMaster };
    }
    config
}

fn run_seed(seed: u64) -> (Vec<String>, String) {
    common_sim::init_seed_thread();
    let ex = SimExecutor::new(seed);
    let plan = Plan {
        shards: 1 + ex.random(0..3) as usize,
        sync_master: ex.chance(600_000),
        sync_flush: ex.chance(400_000),
        producers: 1 + ex.random(0..3) as usize,
        sends_per_producer: 20 + ex.random(0..120) as usize,
        crashes: ex.random(0..4) as usize,
    };
    let master = SimBroker::new(ex.clone(), SimDisk::new(seed), config(&plan, false));
    let slave = SimBroker::new(ex.clone(), SimDisk::new(seed ^ 0x5a5a_5a5a), config(&plan, true));
    slave.replicate_from(master.clone());
    let w = Rc::new(World { ex: ex.clone(), master, slave, plan: plan.clone(), model: RefCell::new(Model::default()), master_epoch: Cell::new(0), producers_done: Cell::new(0) });
    let w2 = w.clone();
    ex.block_on(async move {
        let w = w2;
        w.master.start().await.expect("master starts");
        w.slave.start().await.expect("slave starts");
        {
            let c = w.connect_master().await;
            let create = common_sim::create_topic(TOPIC, QUEUES);
            let r = c.request(create, Duration::from_millis(REQUEST_DEADLINE_MS)).await.expect("create answered");
            assert_eq!(r.code, rs::SUCCESS);
        }
        let done: Vec<_> = (0..w.plan.producers).map(|p| common_sim::spawn_actor(&w.ex, producer(w.clone(), p))).collect();
        let crx = common_sim::spawn_actor(&w.ex, chaos(w.clone()));
        for d in done {
            d.await;
        }
        crx.await;
        // Caught up: the logs become equal.
        let deadline_us = w.ex.now_us() + CATCH_UP_MS * 1000;
        loop {
            if check_prefix(&w, "catching up").await {
                break;
            }
            if w.ex.now_us() > deadline_us {
                let slave_state: Vec<_> = w.slave.shards().iter().map(|s| (s.ha_slave_state(), s.store().write_offset(), s.store().flushed_offset())).collect();
                let master_state: Vec<_> = w.master.shards().iter().map(|s| (s.ha_slaves(), s.store().write_offset(), s.store().flushed_offset())).collect();
                w.violation(format!("the slave did not catch up within {CATCH_UP_MS} ms: slave {slave_state:?}, master {master_state:?}"));
                break;
            }
            w.ex.sleep(Duration::from_millis(100)).await;
        }
        // The final power cut of the master: what a SYNC_MASTER acknowledged is on the
        // slave (the master is not restarted).
        w.master.crash();
        if w.plan.sync_master {
            let mut on_slave = BTreeSet::new();
            for s in w.slave.shards() {
                let store = s.store();
                for q in 0..QUEUES as i32 {
                    let (min, max) = (store.min_offset(TOPIC, q), store.max_offset(TOPIC, q));
                    let entries = store.cq_entries(TOPIC, q, min, max - min).await.unwrap_or_default();
                    for e in entries {
                        if let Ok(Some(r)) = store.read_record(e.phys_offset, Some(e.size)).await {
                            if let Ok(v) = StoredMessageView::parse(&r) {
                                on_slave.insert(v.body().to_vec());
                            }
                        }
                    }
                }
            }
            let missing = w.model.borrow().acked.iter().filter(|b| !on_slave.contains(*b)).count();
            if missing > 0 {
                w.violation(format!("{missing} sends the SYNC_MASTER acknowledged are not on the slave"));
            }
        }
    });
    ex.shutdown();
    let m = w.model.borrow();
    let summary = format!(
        "{plan:?}: {} acked, {} refused, {} master crashes, {} slave crashes, t={} ms",
        m.acked.len(),
        m.refused,
        m.master_crashes,
        m.slave_crashes,
        ex.now_us() / 1000
    );
    (m.violations.clone(), summary)
}

#[test]
fn replication_keeps_its_invariants_under_simulation() {
    common_sim::run_seeds("RINGMQ_HA_SIM_SEED", "RINGMQ_HA_SIM_SEEDS", 60, run_seed);
}
