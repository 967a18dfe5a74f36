//! Deterministic simulation of transactional messages (issue 12; ARCHITECTURE.md,
//! `txn/` and `shard/txn.rs`): the production shard, connection, mesh and store code on
//! the simulator, with seeded producers that send half messages and end them in every
//! way a real client can — answered or oneway END_TRANSACTION, the same END twice,
//! two ENDs crossed (in flight at once), an END contradicting an answered one, or
//! UNKNOWN left to the check-back — a checker that answers CHECK_TRANSACTION_STATE with
//! each transaction's local truth, and crashes at random points (SimDisk drops, keeps
//! or tears unsynced writes; the op record of a commit can be torn off its committed
//! copy).
//!
//! Invariants:
//! - a rolled-back transaction is never delivered (so a half is never visible on its own);
//! - a committed one is delivered at most once; under sync flush exactly once once its
//!   half was acknowledged (the checker resolves whatever the crash left open);
//! - an END contradicting one answered SUCCESS on the same incarnation is refused
//!   (ILLEGAL_OPERATION); an END repeating it is answered SUCCESS;
//! - a check-back names a half that is open, with its UNIQ_KEY, real topic and queue;
//! - every request is answered (no timeout on a live connection); nothing spins (the
//!   scheduler's own checks); after the run no transaction is left open.
//!
//! `RINGMQ_TXN_SIM_SEEDS=N` runs N seeds (default 100); `RINGMQ_TXN_SIM_SEED=S` replays
//! one. A failure prints its seed.


mod common_sim;
use ringmq_broker::config::{BrokerConfig, RouteMode};
use ringmq_broker::sim::{RequestError, SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::{FlushMode, StoreConfig};
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::message::properties::Properties;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::{EndTransactionRequestHeader, PullMessageRequestHeader, SendMessageRequestHeaderV2};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

const TOPIC: &str = "TXN";
const QUEUES: u32 = 4;
const GROUP: &str = "PG_SIM";
const REQUEST_DEADLINE_MS: u64 = 20_000;
/// How long the run waits for the checker to resolve what is left open.
const SETTLE_MS: u64 = 30_000;
const COMMIT: i32 = 8;
const ROLLBACK: i32 = 12;

#[derive(Debug, Clone)]
struct Plan {
    shards: usize,
    sync_flush: bool,
    producers: usize,
    txns_per_producer: usize,
    crashes: usize,
    /// Shard route mode: half sends and pulls go to their queue's shard-broker in its
    /// queue ids (translated in `World::call`).
    shard_mode: bool,
}

/// One transaction as the test knows it.
#[derive(Debug, Clone)]
struct Txn {
    commit: bool,
    /// (physical offset, half queue offset, incarnation) once the half was acknowledged.
    half: Option<(u64, i64, u64)>,
}

#[derive(Default)]
struct Model {
    txns: BTreeMap<usize, Txn>,
    violations: Vec<String>,
    ends: u64,
    duplicate_ends: u64,
    crossed: u64,
    contradictions_refused: u64,
    checks_answered: u64,
    crashes: u64,
}

struct World {
    ex: SimExecutor,
    broker: Rc<SimBroker>,
    plan: Plan,
    model: RefCell<Model>,
    next_id: Cell<usize>,
    epoch: Cell<u64>,
    producers_done: Cell<usize>,
    stop_checker: Cell<bool>,
}

impl World {
    fn violation(&self, what: String) {
        self.model.borrow_mut().violations.push(format!("t={}ms: {what}", self.ex.now_us() / 1000));
    }

    async fn connect(&self) -> SimClient {
        loop {
            if self.broker.is_up() {
                let shard = self.ex.random(0..self.plan.shards as u64) as usize;
                if let Some(end) = self.broker.connect(shard) {
                    return SimClient::new(self.ex.clone(), end);
                }
            }
            self.ex.sleep(Duration::from_millis(5)).await;
        }
    }

    /// One request; a timeout on a connection that stayed up is a violation. The
    /// incarnation it was answered in comes back with the answer.
    async fn call(&self, client: &SimClient, mut cmd: RemotingCommand) -> Option<(RemotingCommand, u64)> {
        let epoch = self.epoch.get();
        let code = cmd.code;
        let timeout = Duration::from_millis(REQUEST_DEADLINE_MS);
        let answer = match self.shard_broker_of(&mut cmd) {
            None => client.request(cmd, timeout).await,
            // Shard route mode: the queue's own shard-broker, over a connection of its own.
            Some((shard, topic)) => match self.broker.connect(shard) {
                Some(end) => SimClient::new(self.ex.clone(), end).request(cmd, timeout).await.map(|mut r| {
                    if let Some(local) = r.ext("queueId").and_then(|q| q.parse::<i32>().ok()) {
                        let host = ringmq_broker::routing::shard_queue_to_host(&topic, local, shard, self.plan.shards);
                        r.ext_fields.insert("queueId".into(), host.to_string());
                    }
                    r
                }),
                None => Err(RequestError::Lost),
            },
        };
        match answer {
            Ok(r) => (self.epoch.get() == epoch).then_some((r, epoch)),
            Err(RequestError::Timeout) if self.epoch.get() == epoch => {
                self.violation(format!("request code {code} never answered on a live connection"));
                None
            }
            Err(_) => None,
        }
    }
}

impl World {
    /// Shard route mode: rewrites a queue request (a send, a pull) into its owner
    /// shard-broker's queue id and names that shard; a topic creation asks for a
    /// per-shard-broker count. `None`: send it as it is.
    fn shard_broker_of(&self, cmd: &mut RemotingCommand) -> Option<(usize, String)> {
        if !self.plan.shard_mode {
            return None;
        }
        let n = self.plan.shards;
        if cmd.code == rq::UPDATE_AND_CREATE_TOPIC {
            for field in ["readQueueNums", "writeQueueNums"] {
                if let Some(q) = cmd.ext(field).and_then(|v| v.parse::<u32>().ok()) {
                    cmd.ext_fields.insert(field.into(), q.div_ceil(n as u32).to_string());
                }
            }
            return None;
        }
        let (topic_field, queue_field) = match cmd.code {
            rq::SEND_MESSAGE_V2 => ("b", "e"),
            rq::PULL_MESSAGE => ("topic", "queueId"),
            _ => return None,
        };
        let topic = cmd.ext(topic_field)?.to_string();
        let host: i32 = cmd.ext(queue_field)?.parse().ok()?;
        let (owner, local) = ringmq_broker::routing::host_queue_to_shard(&topic, host, n);
        cmd.ext_fields.insert(queue_field.into(), local.to_string());
        Some((owner, topic))
    }
}

fn uniq(id: usize) -> String {
    format!("SIMTXN{id:06}")
}

fn half_cmd(w: &World, id: usize, queue: i32) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: GROUP.into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: QUEUES as i32,
        e: queue,
        f: if w.ex.chance(500_000) { 0x04 } else { 0 },
        g: ringmq_broker::sim::executor::SIM_EPOCH_MS + (w.ex.now_us() / 1000) as i64,
        h: 0,
        i: Some(format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}UNIQ_KEY\u{1}{}\u{2}TAGS\u{1}t\u{2}", uniq(id))),
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: None,
    };
    RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(format!("txn-{id}").into_bytes())
}

fn end_cmd(id: usize, phys: u64, half_offset: i64, code: i32, from_check: bool) -> RemotingCommand {
    let h = EndTransactionRequestHeader {
        producer_group: GROUP.into(),
        tran_state_table_offset: half_offset,
        commit_log_offset: phys as i64,
        commit_or_rollback: code,
        from_transaction_check: from_check,
        msg_id: uniq(id),
        transaction_id: Some(uniq(id)),
    };
    RemotingCommand::request(rq::END_TRANSACTION).with_header(&h)
}

fn heartbeat(client_id: &str) -> RemotingCommand {
    let body = format!(r#"{{"clientID":"{client_id}","consumerDataSet":[],"producerDataSet":[{{"groupName":"{GROUP}"}}]}}"#);
    RemotingCommand::request(rq::HEART_BEAT).with_body(body.into_bytes())
}

/// Checks an END's answer. Under async flush a crash after the half was acknowledged
/// may have lost it: then "not found" is the right answer on a later incarnation.
fn check_end(w: &World, id: usize, what: &str, answered: Option<(RemotingCommand, u64)>, want: i32) {
    if let Some((r, epoch)) = answered {
        let half_epoch = w.model.borrow().txns.get(&id).and_then(|t| t.half).map(|h| h.2);
        let half_may_be_lost = !w.plan.sync_flush && half_epoch != Some(epoch);
        if half_may_be_lost && r.code == rs::SYSTEM_ERROR && r.remark.as_deref().is_some_and(|m| m.starts_with("Find prepared transaction message failed")) {
            return;
        }
        if r.code != want {
            w.violation(format!("txn {id}: {what}: code {} ({:?}), expected {want}", r.code, r.remark));
        }
    }
}

async fn producer(w: Rc<World>, actor: usize) {
    let mut client = w.connect().await;
    for _ in 0..w.plan.txns_per_producer {
        if client.is_closed() {
            client = w.connect().await;
        }
        w.ex.sleep(Duration::from_micros(w.ex.random(0..8_000))).await;
        let id = w.next_id.get();
        w.next_id.set(id + 1);
        let commit = w.ex.chance(600_000);
        w.model.borrow_mut().txns.insert(id, Txn { commit, half: None });
        let queue = w.ex.random(0..QUEUES as u64) as i32;
        let Some((r, epoch)) = w.call(&client, half_cmd(&w, id, queue)).await else { continue };
        if r.code != rs::SUCCESS {
            // Refused (busy, disk): the producer would roll back; nothing to check.
            continue;
        }
        let (Some(msg_id), Some(half_offset)) = (r.ext("msgId"), r.ext("queueOffset").and_then(|o| o.parse::<i64>().ok())) else {
            w.violation(format!("txn {id}: half answer without msgId/queueOffset"));
            continue;
        };
        let phys = u64::from_str_radix(&msg_id[16..], 16).unwrap_or(0);
        if r.ext("queueId") != Some(queue.to_string().as_str()) || r.ext("transactionId") != Some(uniq(id).as_str()) {
            w.violation(format!("txn {id}: half answered queueId {:?} transactionId {:?}", r.ext("queueId"), r.ext("transactionId")));
        }
        w.model.borrow_mut().txns.get_mut(&id).expect("recorded").half = Some((phys, half_offset, epoch));
        let truth = if commit { COMMIT } else { ROLLBACK };
        let other = if commit { ROLLBACK } else { COMMIT };
        // The local transaction takes a while.
        w.ex.sleep(Duration::from_micros(w.ex.random(0..2_000))).await;
        w.model.borrow_mut().ends += 1;
        match w.ex.random(0..10) {
            0..=2 => {
                let a = w.call(&client, end_cmd(id, phys, half_offset, truth, false)).await;
                check_end(&w, id, "END", a, rs::SUCCESS);
            }
            3 | 4 => client.oneway(end_cmd(id, phys, half_offset, truth, false)).await,
            5 => {
                // The same END twice (a client retry).
                let first = w.call(&client, end_cmd(id, phys, half_offset, truth, false)).await;
                let ok = first.as_ref().is_some_and(|(r, _)| r.code == rs::SUCCESS);
                check_end(&w, id, "END", first, rs::SUCCESS);
                let second = w.call(&client, end_cmd(id, phys, half_offset, truth, false)).await;
                if ok && second.is_some() {
                    w.model.borrow_mut().duplicate_ends += 1;
                }
                check_end(&w, id, "repeated END", second, rs::SUCCESS);
            }
            6 => {
                // Two ENDs in flight at once (the producer's and a check answer racing).
                let other_client = w.connect().await;
                let (a, b) = futures_lite::future::zip(
                    w.call(&client, end_cmd(id, phys, half_offset, truth, false)),
                    w.call(&other_client, end_cmd(id, phys, half_offset, truth, true)),
                )
                .await;
                w.model.borrow_mut().crossed += 1;
                check_end(&w, id, "crossed END a", a, rs::SUCCESS);
                check_end(&w, id, "crossed END b", b, rs::SUCCESS);
            }
            7 => {
                // An END contradicting one answered SUCCESS.
                let first = w.call(&client, end_cmd(id, phys, half_offset, truth, false)).await;
                let first_epoch = first.as_ref().filter(|(r, _)| r.code == rs::SUCCESS).map(|(_, e)| *e);
                check_end(&w, id, "END", first, rs::SUCCESS);
                let second = w.call(&client, end_cmd(id, phys, half_offset, other, false)).await;
                if let (Some(e1), Some((r, e2))) = (first_epoch, &second) {
                    if e1 == *e2 {
                        if r.code == rs::ILLEGAL_OPERATION {
                            w.model.borrow_mut().contradictions_refused += 1;
                        } else {
                            w.violation(format!("txn {id}: contradicting END answered {} ({:?})", r.code, r.remark));
                        }
                    }
                }
                if first_epoch.is_none() {
                    // Unknown whether the first took: the truth stays the first answer's;
                    // a contradiction that won would show as a wrong delivery below,
                    // so do not send one.
                }
            }
            8 => {
                // UNKNOWN: left to the check-back.
                let a = w.call(&client, end_cmd(id, phys, half_offset, 0, false)).await;
                check_end(&w, id, "UNKNOWN END", a, rs::SUCCESS);
            }
            _ => {} // no END at all (the producer died): the check-back resolves it
        }
        let _ = actor;
    }
    w.producers_done.set(w.producers_done.get() + 1);
}

/// Answers every check-back with the transaction's truth.
async fn checker(w: Rc<World>) {
    let mut n = 0u64;
    let mut client = w.connect().await;
    let _ = w.call(&client, heartbeat("checker@0")).await;
    let mut last_heartbeat_us = w.ex.now_us();
    while !w.stop_checker.get() {
        w.ex.sleep(Duration::from_millis(20)).await;
        if client.is_closed() {
            n += 1;
            client = w.connect().await;
            let _ = w.call(&client, heartbeat(&format!("checker@{n}"))).await;
            last_heartbeat_us = w.ex.now_us();
            continue;
        }
        if w.ex.now_us() - last_heartbeat_us > 5_000_000 {
            let _ = w.call(&client, heartbeat(&format!("checker@{n}"))).await;
            last_heartbeat_us = w.ex.now_us();
        }
        for push in client.take_pushes() {
            if push.code != rq::CHECK_TRANSACTION_STATE {
                w.violation(format!("unexpected server request {}", push.code));
                continue;
            }
            let phys: Option<u64> = push.ext("commitLogOffset").and_then(|o| o.parse().ok());
            let half_offset: Option<i64> = push.ext("tranStateTableOffset").and_then(|o| o.parse().ok());
            let view = StoredMessageView::parse(&push.body);
            let (Some(phys), Some(half_offset), Ok(view)) = (phys, half_offset, view) else {
                w.violation("a check-back without offsets or message".into());
                continue;
            };
            let props = Properties::decode(view.properties_bytes()).unwrap_or_default();
            let id: Option<usize> = props.get("UNIQ_KEY").and_then(|u| u.strip_prefix("SIMTXN")).and_then(|n| n.parse().ok());
            let Some(id) = id else {
                w.violation(format!("check-back for a message we did not send: {:?}", props.get("UNIQ_KEY")));
                continue;
            };
            if view.topic().ok() != Some(TOPIC) || push.ext("msgId") != Some(uniq(id).as_str()) {
                w.violation(format!("txn {id}: check-back names topic {:?} msgId {:?}", view.topic(), push.ext("msgId")));
            }
            let commit = match w.model.borrow().txns.get(&id) {
                Some(t) => t.commit,
                None => {
                    w.violation(format!("check-back for txn {id} never sent"));
                    continue;
                }
            };
            w.model.borrow_mut().checks_answered += 1;
            let cmd = end_cmd(id, phys, half_offset, if commit { COMMIT } else { ROLLBACK }, true);
            if w.ex.chance(500_000) {
                client.oneway(cmd).await;
            } else {
                let a = w.call(&client, cmd).await;
                check_end(&w, id, "check answer", a, rs::SUCCESS);
            }
        }
    }
}

async fn chaos(w: Rc<World>) {
    for _ in 0..w.plan.crashes {
        w.ex.sleep(Duration::from_millis(w.ex.random(1..150))).await;
        if w.producers_done.get() == w.plan.producers {
            break;
        }
        crash_restart(&w).await;
    }
}

async fn crash_restart(w: &World) {
    w.epoch.set(w.epoch.get() + 1);
    w.broker.crash();
    w.model.borrow_mut().crashes += 1;
    w.ex.sleep(Duration::from_millis(w.ex.random(0..50))).await;
    if let Err(e) = w.broker.start().await {
        w.violation(format!("restart failed: {e}"));
    }
}

fn open_transactions(w: &World) -> usize {
    w.broker.shards().iter().map(|s| s.open_transactions()).sum()
}

/// Waits until the checker resolved everything open (bounded).
async fn settle(w: &World) {
    let deadline_us = w.ex.now_us() + SETTLE_MS * 1000;
    while open_transactions(w) > 0 && w.ex.now_us() < deadline_us {
        w.ex.sleep(Duration::from_millis(100)).await;
    }
    if open_transactions(w) > 0 {
        let open: Vec<_> = w.broker.shards().iter().map(|s| (s.id(), s.open_halves(8))).collect();
        w.violation(format!("{} transactions still open {SETTLE_MS} ms after the run (check-backs answered): {open:?}", open_transactions(w)));
    }
}

/// Every copy in the real topic: UNIQ_KEY -> (copies, prepared offsets, sysFlags).
async fn drain(w: &World) -> BTreeMap<String, Vec<(i64, i32, i32)>> {
    let client = w.connect().await;
    let mut copies: BTreeMap<String, Vec<(i64, i32, i32)>> = BTreeMap::new();
    for q in 0..QUEUES as i32 {
        let mut offset = 0i64;
        loop {
            let h = PullMessageRequestHeader {
                consumer_group: "VERIFY".into(),
                topic: TOPIC.into(),
                queue_id: q,
                queue_offset: offset,
                max_msg_nums: 32,
                sys_flag: 0,
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: None,
                sub_version: 1,
                expression_type: None,
                max_msg_bytes: None,
            };
            let Some((r, _)) = w.call(&client, RemotingCommand::request(rq::PULL_MESSAGE).with_header(&h)).await else {
                w.violation("drain: pull unanswered".into());
                return copies;
            };
            if r.code != rs::SUCCESS {
                break;
            }
            let mut at = 0;
            while at < r.body.len() {
                let Ok(v) = StoredMessageView::parse(&r.body[at..]) else {
                    w.violation(format!("drain: {TOPIC}/{q}: a record that does not parse"));
                    return copies;
                };
                at += v.total_size();
                let props = Properties::decode(v.properties_bytes()).unwrap_or_default();
                let key = props.get("UNIQ_KEY").unwrap_or("?").to_string();
                copies.entry(key).or_default().push((v.prepared_transaction_offset(), v.sys_flag(), v.queue_id()));
                offset = v.queue_offset() + 1;
            }
        }
    }
    copies
}

fn config(plan: &Plan) -> BrokerConfig {
    let mut config = BrokerConfig {
        store_root: "/sim".into(),
        shard_count: plan.shards,
        max_message_bytes: 4096,
        route_mode: if plan.shard_mode { RouteMode::Shard } else { RouteMode::Host },
        ..BrokerConfig::default()
    };
    config.store = StoreConfig::for_tests();
    config.store.flush_mode = if plan.sync_flush { FlushMode::Sync } else { FlushMode::Async };
    config.store.flush_interval_ms = 20;
    config.transaction_timeout_ms = 200;
    config.transaction_check_interval_ms = 300;
    config.transaction_check_max = 1_000_000;
    config
}

fn run_seed(seed: u64) -> (Vec<String>, String) {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(seed);
    let plan = Plan {
        shards: 1 + ex.random(0..3) as usize,
        sync_flush: ex.chance(600_000),
        producers: 1 + ex.random(0..3) as usize,
        txns_per_producer: 10 + ex.random(0..60) as usize,
        crashes: ex.random(0..3) as usize,
        shard_mode: ex.chance(400_000),
    };
    let broker = SimBroker::new(ex.clone(), SimDisk::new(seed), config(&plan));
    let w = Rc::new(World {
        ex: ex.clone(),
        broker,
        plan: plan.clone(),
        model: RefCell::new(Model::default()),
        next_id: Cell::new(0),
        epoch: Cell::new(0),
        producers_done: Cell::new(0),
        stop_checker: Cell::new(false),
    });
    let w2 = w.clone();
    ex.block_on(async move {
        let w = w2;
        w.broker.start().await.expect("first start");
        {
            let c = w.connect().await;
            let create = common_sim::create_topic(TOPIC, QUEUES);
            let r = w.call(&c, create).await.expect("create answered");
            assert_eq!(r.0.code, rs::SUCCESS);
        }
        let done: Vec<_> = (0..w.plan.producers).map(|p| common_sim::spawn_actor(&w.ex, producer(w.clone(), p))).collect();
        let crx = common_sim::spawn_actor(&w.ex, chaos(w.clone()));
        let krx = common_sim::spawn_actor(&w.ex, checker(w.clone()));
        for d in done {
            d.await;
        }
        crx.await;
        settle(&w).await;
        // A last crash with everything resolved: nothing comes back open or twice.
        crash_restart(&w).await;
        settle(&w).await;
        w.stop_checker.set(true);
        krx.await;
        let copies = drain(&w).await;
        let m = w.model.borrow();
        let mut problems = Vec::new();
        for (id, t) in &m.txns {
            let found = copies.get(&uniq(*id)).cloned().unwrap_or_default();
            match (t.commit, t.half) {
                (false, _) if !found.is_empty() => problems.push(format!("txn {id}: rolled back but delivered {} times", found.len())),
                (true, _) if found.len() > 1 => problems.push(format!("txn {id}: committed and delivered {} times", found.len())),
                (true, Some((phys, _, _))) if w.plan.sync_flush && found.is_empty() => {
                    problems.push(format!("txn {id}: committed (half at {phys} acknowledged under sync flush) but never delivered"))
                }
                _ => {}
            }
            for &(prepared, sys_flag, _) in &found {
                if sys_flag & 0x0C != 0x08 || t.half.is_some_and(|(phys, _, _)| w.plan.sync_flush && prepared != phys as i64) {
                    problems.push(format!("txn {id}: copy with sysFlag {sys_flag:#x} preparedTransactionOffset {prepared} (half {:?})", t.half));
                }
            }
        }
        for key in copies.keys() {
            if !key.starts_with("SIMTXN") {
                problems.push(format!("a copy nobody sent: {key}"));
            }
        }
        drop(m);
        for p in problems {
            w.violation(p);
        }
    });
    ex.shutdown();
    let m = w.model.borrow();
    let summary = format!(
        "{plan:?}: {} transactions, {} ends, {} repeated, {} crossed, {} contradictions refused, {} check answers, {} crashes, t={} ms",
        m.txns.len(),
        m.ends,
        m.duplicate_ends,
        m.crossed,
        m.contradictions_refused,
        m.checks_answered,
        m.crashes,
        ex.now_us() / 1000
    );
    (m.violations.clone(), summary)
}

#[test]
fn transactions_keep_their_invariants_under_simulation() {
    let summaries = common_sim::run_seeds("RINGMQ_TXN_SIM_SEED", "RINGMQ_TXN_SIM_SEEDS", 100, run_seed);
    let number_before = |summary: &str, word: &str| summary.split(word).next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    let transactions: u64 = summaries.iter().map(|s| number_before(s, " transactions, ")).sum();
    // The last crash of every run is the final check's; the others hit the workload.
    let crashes: u64 = summaries.iter().map(|s| number_before(s, " crashes, t=").saturating_sub(1)).sum();
    eprintln!("{transactions} transactions, {crashes} crashes during the workload");
}
