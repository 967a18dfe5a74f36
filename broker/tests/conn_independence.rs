//! Answers on one connection are independent (ARCHITECTURE.md, "Connections"): a
//! request is answered when it is done, never held behind an earlier request on the
//! same connection. RocketMQ matches responses by opaque, and its consumers put the
//! pulls of every queue they own on one connection per broker, most of them suspended
//! by long polling on idle queues. If answers were serialized in arrival order, the
//! busy queue's pulls would wait behind those suspended pulls for their whole suspend
//! time (issue 22: commit 01de640 put the README's consumer seconds behind).
//!
//! The scenario, under the deterministic simulator (production `net::conn`, shard and
//! store code): one consumer connection holds suspended pulls on many idle queues,
//! re-issued as they time out, and pulls one busy queue in a loop; a producer on its
//! own connection sends to the busy queue at a steady rate. Invariant: every message
//! reaches the consumer within `DELIVERY_BOUND_MS` of its send being acknowledged, far
//! below the idle pulls' suspend time. A connection that answered in arrival order
//! fails it at once (the busy pull waits out an idle pull's 15 s). The simulator does
//! not model CPU time, so 01de640's cost (a run-queue round per request under load)
//! is caught by the real-process `pull_liveness.rs` instead. A failing seed prints and
//! replays with `RINGMQ_SIM_SEED=S`.

mod common_sim;

use common_sim::create_topic;
use ringmq_broker::config::{BrokerConfig, RouteMode};
use ringmq_broker::sim::{SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::{FlushMode, StoreConfig};
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeaderV2};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// Most simulated time from a send's acknowledgement to its message in a pull answer.
/// The idle pulls are suspended for `IDLE_SUSPEND_MS`, 30× longer: a busy pull held
/// behind one of them cannot pass.
const DELIVERY_BOUND_MS: u64 = 500;
const IDLE_SUSPEND_MS: i64 = 15_000;
const BUSY_SUSPEND_MS: i64 = 15_000;
const REQUEST_TIMEOUT_MS: u64 = 30_000;
const BUSY_TOPIC: &str = "Busy";
const IDLE_TOPIC: &str = "Idle";

#[derive(Debug, Clone, Copy)]
struct Case {
    shards: usize,
    route_mode: RouteMode,
    idle_queues: u32,
    messages: u32,
    send_interval_ms: u64,
}

fn config(case: &Case) -> BrokerConfig {
    let mut config =
        BrokerConfig { store_root: "/sim".into(), shard_count: case.shards, max_message_bytes: 4096, route_mode: case.route_mode, ..BrokerConfig::default() };
    config.store = StoreConfig::for_tests();
    config.store.flush_mode = FlushMode::Async;
    config.store.flush_interval_ms = 20;
    config.pull_suspend_max_ms = 30_000;
    config
}

fn send_cmd(topic: &str, queue_id: i32, body: Vec<u8>) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "PG".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 1,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(String::new()),
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: None,
    };
    RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(body)
}

fn pull_cmd(topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: "G".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x2,
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: None,
        sub_version: 1,
        expression_type: None,
        max_msg_bytes: None,
    };
    RemotingCommand::request(rq::PULL_MESSAGE).with_header(&h)
}

/// The idle pulls' targets, as (consumer connection, queue id): in host mode every
/// queue through the one address; in shard route mode every shard-broker's own queues
/// (numbered from 0 on each) through the connection to its own port.
fn idle_targets(case: &Case) -> Vec<(usize, i32)> {
    let brokers = if case.route_mode == RouteMode::Shard { case.shards } else { 1 };
    (0..brokers).flat_map(|b| (0..case.idle_queues as i32).map(move |q| (b, q))).collect()
}

/// Runs one seed; returns the violations and a summary.
fn run(seed: u64, case: Case) -> (Vec<String>, String) {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(seed);
    let broker = SimBroker::new(ex.clone(), SimDisk::new(seed), config(&case));
    let violations: Rc<RefCell<Vec<String>>> = Rc::default();
    let latencies_ms: Rc<RefCell<Vec<u64>>> = Rc::default();
    let (v, lat, ex2) = (violations.clone(), latencies_ms.clone(), ex.clone());
    ex.block_on(async move {
        let ex = ex2;
        broker.start().await.expect("start");
        // One admin connection per shard-broker in shard mode (a create names a broker).
        let admin = SimClient::new(ex.clone(), broker.connect(0).expect("up"));
        let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
        for (name, queues) in [(BUSY_TOPIC, 1u32), (IDLE_TOPIC, case.idle_queues)] {
            let r = admin.request(create_topic(name, queues), timeout).await.expect("create answered");
            assert_eq!(r.code, rs::SUCCESS, "create {name}: {:?}", r.remark);
        }
        // The consumer's connection: one per broker it pulls from, as RocketMQ clients.
        let consumer: Vec<Rc<SimClient>> = (0..if case.route_mode == RouteMode::Shard { case.shards } else { 1 })
            .map(|s| Rc::new(SimClient::new(ex.clone(), broker.connect(s).expect("up"))))
            .collect();
        let producer = Rc::new(SimClient::new(ex.clone(), broker.connect(0).expect("up")));
        let done = Rc::new(Cell::new(false));
        // Idle queues: a suspended pull each, re-issued whenever one is answered.
        for (shard, queue_id) in idle_targets(&case) {
            let (c, done, v) = (consumer[shard].clone(), done.clone(), v.clone());
            ex.spawn_in(None, async move {
                while !done.get() {
                    match c.request(pull_cmd(IDLE_TOPIC, queue_id, 0, IDLE_SUSPEND_MS), timeout).await {
                        Ok(r) if r.code == rs::PULL_NOT_FOUND || r.code == rs::SUCCESS => {}
                        Ok(r) => {
                            v.borrow_mut().push(format!("idle pull of queue {queue_id}: code {} {:?}", r.code, r.remark));
                            return;
                        }
                        Err(e) => {
                            v.borrow_mut().push(format!("idle pull of queue {queue_id}: {e:?}"));
                            return;
                        }
                    }
                }
            });
        }
        // Let every idle pull reach the broker and suspend before the busy queue starts.
        ex.sleep(Duration::from_millis(200)).await;
        // When each message's send was acknowledged, by its body's sequence number.
        let acked_us: Rc<RefCell<BTreeMap<u32, u64>>> = Rc::default();
        let (p, acks, v2, ex_p) = (producer.clone(), acked_us.clone(), v.clone(), ex.clone());
        let messages = case.messages;
        let interval = Duration::from_millis(case.send_interval_ms);
        ex.spawn_in(None, async move {
            for seq in 0..messages {
                match p.request(send_cmd(BUSY_TOPIC, 0, seq.to_be_bytes().to_vec()), timeout).await {
                    Ok(r) if r.code == rs::SUCCESS => {
                        acks.borrow_mut().insert(seq, ex_p.now_us());
                    }
                    other => v2.borrow_mut().push(format!("send {seq}: {other:?}")),
                }
                ex_p.sleep(interval).await;
            }
        });
        // The busy queue's pull loop, on the consumer's connection to its owner.
        // Queue 0 of shard-broker 0 (host queue 0 in either mode).
        let (c, queue_id) = (consumer[0].clone(), 0);
        let mut offset = 0i64;
        let mut received = 0u32;
        while received < messages {
            let r = match c.request(pull_cmd(BUSY_TOPIC, queue_id, offset, BUSY_SUSPEND_MS), timeout).await {
                Ok(r) => r,
                Err(e) => {
                    v.borrow_mut().push(format!("busy pull at {offset}: {e:?}"));
                    break;
                }
            };
            let now_us = ex.now_us();
            match r.code {
                rs::SUCCESS => {
                    let mut at = 0;
                    while at < r.body.len() {
                        let view = StoredMessageView::parse(&r.body[at..]).expect("a stored record");
                        let body = view.body();
                        let seq = u32::from_be_bytes(body[..4].try_into().expect("4 bytes"));
                        // Acknowledged before its answer was read, unless both came at once.
                        let acked = acked_us.borrow().get(&seq).copied().unwrap_or(now_us);
                        let waited_ms = now_us.saturating_sub(acked) / 1000;
                        lat.borrow_mut().push(waited_ms);
                        if waited_ms > DELIVERY_BOUND_MS {
                            v.borrow_mut().push(format!("message {seq} reached the consumer {waited_ms} ms after its ack (bound {DELIVERY_BOUND_MS} ms)"));
                        }
                        received += 1;
                        at += view.total_size();
                    }
                }
                rs::PULL_NOT_FOUND => {}
                code => {
                    v.borrow_mut().push(format!("busy pull at {offset}: code {code} {:?}", r.remark));
                    break;
                }
            }
            offset = r.ext("nextBeginOffset").and_then(|s| s.parse().ok()).unwrap_or(offset);
        }
        done.set(true);
    });
    ex.shutdown();
    let mut lat = latencies_ms.borrow().clone();
    lat.sort_unstable();
    let max = lat.last().copied().unwrap_or(0);
    let p50 = lat.get(lat.len() / 2).copied().unwrap_or(0);
    let summary = format!("{case:?}: {} delivered, delivery p50 {p50} ms, max {max} ms, t={} ms", lat.len(), ex.now_us() / 1000);
    let v = violations.borrow().clone();
    (v, summary)
}

fn check(seed: u64, case: Case, expected_violations: usize) {
    let (violations, summary) = run(seed, case);
    if violations.len() != expected_violations {
        panic!("seed {seed} ({summary}): {} violations, expected {expected_violations} (replay: RINGMQ_SIM_SEED={seed}):\n{}", violations.len(), violations.join("\n"));
    }
    eprintln!("seed {seed}: {summary}");
}

const CASES: [Case; 4] = [
    Case { shards: 1, route_mode: RouteMode::Host, idle_queues: 16, messages: 300, send_interval_ms: 3 },
    Case { shards: 1, route_mode: RouteMode::Host, idle_queues: 64, messages: 200, send_interval_ms: 1 },
    // Host mode with 2 shards: half the pulls are forwarded to the other shard.
    Case { shards: 2, route_mode: RouteMode::Host, idle_queues: 16, messages: 300, send_interval_ms: 2 },
    Case { shards: 2, route_mode: RouteMode::Shard, idle_queues: 8, messages: 300, send_interval_ms: 2 },
];

#[test]
fn a_busy_queue_is_not_held_behind_suspended_pulls_on_its_connection() {
    let seeds: Vec<u64> = match std::env::var("RINGMQ_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RINGMQ_SIM_SEED is a number")],
        Err(_) => (0..6).collect(),
    };
    for seed in seeds {
        for case in CASES {
            check(seed, case, 0);
        }
    }
}
