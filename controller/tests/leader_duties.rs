//! The leader's duties on three in-process nodes (one glommio executor, the in-memory
//! network; docs/design/controller.md §2.5, §3.8): heartbeats (904) are answered with
//! `leaseGranted=true` by the leader only, and never by a leader cut off from its
//! quorum; after the master goes silent and the leader is cut off, the new leader elects
//! the slave on its own no earlier than the heartbeat timeout after it took office (the
//! grace) nor after the master's last heartbeat; a designated switchover answers
//! `writableAfterMs`. Every wait polls with a deadline.

use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as req, response_code as rc};
use ringmq_client::remoting::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
    SyncStateSet,
};
use ringmq_client::remoting::RemotingCommand;
use ringmq_controller::raft::mem::{MemLogStore, MemRouter, MemStateMachine};
use ringmq_controller::raft::NodeId;
use ringmq_controller::{Controller, ControllerConfig};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

const HB_TIMEOUT_MS: u64 = 1000;
const HB_INTERVAL_MS: u64 = 100;
const DEADLINE_MS: u64 = 10_000;
const POLL_MS: u64 = 10;

type Nodes = Rc<Vec<Rc<Controller>>>;

async fn poll_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_millis(DEADLINE_MS), "{what}: not within {DEADLINE_MS} ms");
        glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

fn leader(nodes: &[Rc<Controller>], among: &[usize]) -> Option<usize> {
    let l = among.iter().copied().find(|&i| nodes[i].is_leader())?;
    among.iter().all(|&i| nodes[i].metrics().current_leader == Some(l as NodeId)).then_some(l)
}

fn heartbeat(id: i64) -> RemotingCommand {
    RemotingCommand::request(req::BROKER_HEARTBEAT).with_header(&BrokerHeartbeatRequestHeader {
        cluster_name: "c".into(),
        broker_addr: format!("127.0.0.1:{}", 1 + id),
        broker_name: "b".into(),
        broker_id: Some(id),
        epoch: Some(1),
        max_offset: Some(10),
        confirm_offset: None,
        heartbeat_timeout_mills: Some(HB_TIMEOUT_MS as i64),
        election_priority: None,
    })
}

fn check(resp: &RemotingCommand, code: i32, what: &str) {
    assert_eq!(resp.code, code, "{what}: remark {:?} ext {:?}", resp.remark, resp.ext_fields);
}

/// A fake broker heartbeating every node while `beating`.
struct Beater {
    beating: Cell<bool>,
    last: Cell<Option<Instant>>,
}

async fn beat_loop(nodes: Nodes, id: i64, b: Rc<Beater>) {
    loop {
        if b.beating.get() {
            b.last.set(Some(Instant::now()));
            for n in nodes.iter() {
                let n = n.clone();
                // Detached: a cut-off leader holds its answer until the lease round fails.
                glommio::spawn_local(async move {
                    n.handle(heartbeat(id)).await;
                })
                .detach();
            }
        }
        glommio::timer::sleep(Duration::from_millis(HB_INTERVAL_MS)).await;
    }
}

async fn scenario() {
    let router = MemRouter::default();
    let peers: BTreeMap<NodeId, String> = (0..3).map(|id| (id, format!("127.0.0.1:{}", 9878 + id))).collect();
    let mut nodes = Vec::new();
    for id in 0..3u64 {
        let config = ControllerConfig { node_id: id, peers: peers.clone(), write_wait_ms: 2000, ..ControllerConfig::default() };
        let c = Controller::start(config, router.network(id), MemLogStore::default(), MemStateMachine::default()).await.expect("start");
        router.add(id, c.raft().clone());
        let c = Rc::new(c);
        c.spawn_duties();
        nodes.push(c);
    }
    for n in &nodes {
        n.initialize().await.expect("initialize");
    }
    let nodes: Nodes = Rc::new(nodes);
    let all = [0, 1, 2];
    poll_until("first leader", || leader(&nodes, &all).is_some()).await;
    let l = leader(&nodes, &all).expect("leader");

    // Broker set "b": brokers 1 and 2 heartbeat every node; 1 elects itself; SSS {1, 2}.
    for id in [1, 2] {
        let apply = RemotingCommand::request(req::CONTROLLER_APPLY_BROKER_ID).with_header(&ApplyBrokerIdRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            applied_broker_id: id,
            register_check_code: format!("127.0.0.1:{};1", 1 + id),
        });
        check(&nodes[l].handle(apply).await, rc::SUCCESS, "1013");
    }
    let beaters: Vec<Rc<Beater>> = (0..2).map(|_| Rc::new(Beater { beating: Cell::new(true), last: Cell::new(None) })).collect();
    for (i, b) in beaters.iter().enumerate() {
        glommio::spawn_local(beat_loop(nodes.clone(), i as i64 + 1, b.clone())).detach();
    }
    let elect = |id: i64, designate: bool| {
        RemotingCommand::request(req::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            designate_elect: designate,
            invoke_time: None,
        })
    };
    check(&nodes[l].handle(elect(1, false)).await, rc::SUCCESS, "1002 first election");
    let alter = |master: i64, epoch: i32, set: Vec<i64>, sss_epoch: i32| {
        RemotingCommand::request(req::CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_header(&AlterSyncStateSetRequestHeader { broker_name: "b".into(), master_broker_id: master, master_epoch: epoch, invoke_time: None })
            .with_body(SyncStateSet { sync_state_set: set, sync_state_set_epoch: sss_epoch }.encode())
    };
    let start = Instant::now();
    loop {
        let r = nodes[l].handle(alter(1, 1, vec![1, 2], 1)).await;
        if r.code == rc::SUCCESS {
            break;
        }
        assert!(start.elapsed() < Duration::from_millis(DEADLINE_MS), "1001: {:?}", r.remark);
        glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
    }

    // The new master's heartbeat with its epoch start offsets: recorded once, for epoch 1.
    let with_starts = heartbeat(1).with_ext("epochStartOffsets", "0,4096");
    check(&nodes[l].handle(with_starts).await, rc::SUCCESS, "904 with epochStartOffsets");
    let starts = nodes[l].read_state(|s| s.set("b").map(|b| b.epoch_starts.clone())).expect("set");
    assert_eq!(starts.into_iter().collect::<Vec<_>>(), vec![(1, vec![0, 4096])]);
    // Malformed, or from a replica that is not the master: ignored, still answered.
    check(&nodes[l].handle(heartbeat(1).with_ext("epochStartOffsets", "x")).await, rc::SUCCESS, "malformed offsets");
    check(&nodes[l].handle(heartbeat(2).with_ext("epochStartOffsets", "7")).await, rc::SUCCESS, "offsets from a slave");
    assert_eq!(nodes[l].read_state(|s| s.set("b").map(|b| b.epoch_starts.len())), Some(1));

    // Lease: the leader grants, a follower does not.
    let granted = nodes[l].handle(heartbeat(1)).await;
    check(&granted, rc::SUCCESS, "904 on the leader");
    assert_eq!(granted.remark.as_deref(), Some("Heart beat success"));
    assert_eq!(granted.ext("leaseGranted"), Some("true"));
    let f = all.iter().copied().find(|&i| i != l).expect("follower");
    let follower = nodes[f].handle(heartbeat(1)).await;
    check(&follower, rc::SUCCESS, "904 on a follower");
    assert_eq!(follower.ext("leaseGranted"), None);
    // A heartbeat without brokerId is refused (2005), as Apache's processor does.
    let mut bad = heartbeat(1);
    bad.ext_fields.remove("brokerId");
    check(&nodes[l].handle(bad).await, rc::CONTROLLER_INVALID_REQUEST, "904 without brokerId");

    // The master goes silent and the leader is cut off from the others.
    beaters[0].beating.set(false);
    let last_master_hb = beaters[0].last.get().expect("master heartbeat sent");
    router.isolate(l as NodeId, true);
    // The cut-off old leader may still think it leads, but never grants a lease.
    let cut = nodes[l].handle(heartbeat(2)).await;
    assert_eq!(cut.ext("leaseGranted"), None, "a leader cut off from its quorum granted a lease");
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != l).collect();
    // The first poll that sees a new leader: at most one poll after it took office.
    poll_until("new leader", || others.iter().any(|&i| nodes[i].is_leader())).await;
    let took_office = Instant::now();
    let l2 = others.iter().copied().find(|&i| nodes[i].is_leader()).expect("new leader");
    poll_until("automatic election of broker 2", || nodes[l2].read_state(|s| s.set("b").and_then(|b| b.master)) == Some(2)).await;
    let elected = Instant::now();
    let after_hb = elected.duration_since(last_master_hb);
    let after_office = elected.duration_since(took_office);
    eprintln!("elected {after_hb:?} after the master's last heartbeat, {after_office:?} after n{l2} was seen leading");
    assert!(after_hb >= Duration::from_millis(HB_TIMEOUT_MS), "elected {after_hb:?} after the last heartbeat");
    // `took_office` is at most one poll (plus scheduling) after the new leader took
    // office; the leader counts its grace from its own, later or equal, observation.
    assert!(
        after_office + Duration::from_millis(2 * POLL_MS) >= Duration::from_millis(HB_TIMEOUT_MS),
        "elected {after_office:?} after the leader change, within the {HB_TIMEOUT_MS} ms grace"
    );
    let record = nodes[l2].read_state(|s| s.set("b").and_then(|b| b.history.back().cloned())).expect("history");
    assert_eq!((record.trigger, record.old_master, record.new_master, record.master_epoch), (ringmq_controller::cmd::Trigger::Controller, Some(1), Some(2), 2));

    // Planned switchover back to broker 1 (alive again, back in the SSS): the answer
    // carries how long broker 2's lease may still run.
    beaters[0].beating.set(true);
    let start = Instant::now();
    loop {
        let r = nodes[l2].handle(alter(2, 2, vec![1, 2], 3)).await;
        if r.code == rc::SUCCESS {
            break;
        }
        assert!(start.elapsed() < Duration::from_millis(DEADLINE_MS), "1001 back: {:?}", r.remark);
        glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
    }
    let switched = nodes[l2].handle(elect(1, true)).await;
    check(&switched, rc::SUCCESS, "designated 1002");
    let w: u64 = switched.ext("writableAfterMs").expect("writableAfterMs").parse().expect("number");
    assert!(w <= HB_TIMEOUT_MS && w + 3 * HB_INTERVAL_MS >= HB_TIMEOUT_MS, "writableAfterMs {w}: broker 2 heartbeats every {HB_INTERVAL_MS} ms");
    router.isolate(l as NodeId, false);
    for n in nodes.iter() {
        n.shutdown().await;
    }
}

#[test]
fn leases_grace_and_automatic_election() {
    let ex = glommio::LocalExecutorBuilder::default().make().expect("executor");
    ex.run(scenario());
}
