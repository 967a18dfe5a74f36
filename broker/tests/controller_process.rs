//! Controller mode end to end in one process (docs/design/controller.md §5 WP4): a
//! one-node controller (`ringmq_controller::server::spawn`) and brokers A and B of one
//! broker set (`launch::start`, controller mode, one shard, allAckInSyncStateSet). The
//! first start elects one master, which takes sends once the other joined its
//! SyncStateSet; stopping the master makes B master within the heartbeat timeout plus
//! a bound, and every acknowledged send is readable from B.
//!
//! No fixed ports (everything binds 127.0.0.1:0); every wait polls a condition with a
//! deadline.

mod common;

use common::{create_topic, pull, send, Conn};
use ringmq_broker::config::{BrokerConfig, BrokerRole};
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::controller::{GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader, SyncStateSet};
use ringmq_client::remoting::frame::SerializeType;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

const SET: &str = "b1";
const TOPIC: &str = "ControllerFailover";
/// The broker's heartbeat timeout: the controller elects this long after the last
/// heartbeat of a dead master (plus its grace), and a master's lease is this long.
const HEARTBEAT_TIMEOUT_MS: u64 = 2_000;
/// Start, registration, election and catch-up, each well inside this.
const STEP_BOUND: Duration = Duration::from_secs(30);
/// From the master's stop to B's first acknowledged send: the heartbeat timeout plus
/// the controller's scan, the notification, the promotion and the client's retries.
const FAILOVER_BOUND: Duration = Duration::from_millis(HEARTBEAT_TIMEOUT_MS + 8_000);
const SENDS: usize = 40;

fn eventually<T>(what: &str, bound: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One request on a fresh connection; `None` if the peer is gone or silent.
fn ask(addr: SocketAddr, cmd: RemotingCommand) -> Option<RemotingCommand> {
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    let mut c = Conn { s, buf: Default::default() };
    c.call_by(&cmd, Instant::now() + Duration::from_secs(3))
}

fn controller(dir: &std::path::Path) -> ringmq_controller::server::ControllerHandle {
    let port = TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let props = format!("controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\ncontrollerStorePath={}\n", dir.display());
    let config = ringmq_controller::config::ControllerFileConfig::from_properties(&props).expect("controller config");
    ringmq_controller::server::spawn(config.node_config()).expect("controller starts")
}

fn broker(dir: &std::path::Path, ctl: SocketAddr) -> BrokerHandle {
    let mut config = BrokerConfig {
        store_root: dir.to_path_buf(),
        listen_port: 0,
        shard_count: 1,
        broker_ip: Some("127.0.0.1".into()),
        cluster_name: "c".into(),
        broker_name: SET.into(),
        role: BrokerRole::SyncMaster,
        controller_mode: true,
        controller_addrs: vec![ctl.to_string()],
        broker_heartbeat_interval_ms: 300,
        controller_heartbeat_timeout_ms: HEARTBEAT_TIMEOUT_MS,
        sync_broker_metadata_period_ms: 500,
        sync_controller_metadata_period_ms: 2_000,
        check_sync_state_set_period_ms: 200,
        all_ack_in_sync_state_set: true,
        ha_max_time_slave_not_catchup_ms: 2_000,
        ..BrokerConfig::default()
    };
    common::host_independent_disk_watermarks(&mut config.store);
    launch::start(config).expect("broker starts")
}

fn local(h: &BrokerHandle) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], h.addr.port()))
}

/// The set's SyncStateSet as the controller holds it.
fn sync_state_set(ctl: SocketAddr) -> Option<(i64, Vec<i64>)> {
    let r = ask(ctl, RemotingCommand::request(rq::CONTROLLER_GET_REPLICA_INFO).with_header(&GetReplicaInfoRequestHeader { broker_name: SET.into() }))?;
    let h: GetReplicaInfoResponseHeader = r.header().ok()?;
    let set = SyncStateSet::decode(&r.body).ok()?;
    (r.code == rs::SUCCESS).then(|| (h.master_broker_id.unwrap_or(-1), set.sync_state_set))
}

/// A send to queue 0; `Some((queue offset, body))` once acknowledged.
fn send_one(addr: SocketAddr, n: usize) -> Option<(i64, Vec<u8>)> {
    let body = format!("controller-failover-{n}").into_bytes();
    let r = ask(addr, send(TOPIC, 0, &body, 100 + n as i32, SerializeType::Json))?;
    (r.code == rs::SUCCESS).then(|| (r.ext("queueOffset").and_then(|o| o.parse().ok()).expect("queueOffset"), body))
}

#[test]
fn failover_keeps_every_acknowledged_send() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmp");
    let (ctl_dir, a_dir, b_dir) = (tmp.path().join("ctl"), tmp.path().join("a"), tmp.path().join("b"));
    for d in [&ctl_dir, &a_dir, &b_dir] {
        std::fs::create_dir_all(d).expect("dir");
    }
    let node = controller(&ctl_dir);
    let ctl = node.local_addr();
    eventually("the one-node controller leads", STEP_BOUND, || {
        ask(ctl, RemotingCommand::request(rq::CONTROLLER_GET_METADATA_INFO)).filter(|r| r.ext_fields.get("isLeader") == Some("true"))
    });

    // A starts alone: it registers and elects itself.
    let a = broker(&a_dir, ctl);
    let a_addr = local(&a);
    eventually("A becomes master and creates the topic", STEP_BOUND, || ask(a_addr, create_topic(TOPIC, 1)).filter(|r| r.code == rs::SUCCESS));
    let (master_id, _) = eventually("the controller names A master", STEP_BOUND, || sync_state_set(ctl).filter(|(m, _)| *m > 0));

    // B joins as slave and, once caught up, the master's SyncStateSet.
    let b = broker(&b_dir, ctl);
    let b_addr = local(&b);
    let (_, members) = eventually("B joins the SyncStateSet", STEP_BOUND, || sync_state_set(ctl).filter(|(_, s)| s.len() == 2));
    assert!(members.contains(&master_id), "{members:?}");

    // Sends on A, each acknowledged by both members (allAck).
    let mut acked = Vec::new();
    for n in 0..SENDS {
        acked.push(eventually("a send on A is acknowledged", STEP_BOUND, || send_one(a_addr, n)));
    }

    // Stop the master: B takes sends within the timeout and a bound.
    let stopped = Instant::now();
    a.stop();
    a.join();
    for n in SENDS..SENDS + 5 {
        acked.push(eventually("B takes sends after A stopped", FAILOVER_BOUND, || send_one(b_addr, n)));
    }
    let failover = stopped.elapsed();
    assert!(failover <= FAILOVER_BOUND, "first acknowledged send on B {failover:?} after the stop");
    eprintln!("failover: first acknowledged send on B {failover:?} after A stopped");

    // Every acknowledged send, read back from B.
    let mut c = Conn::open(b_addr);
    for (offset, body) in &acked {
        let r = c.call(pull(TOPIC, 0, *offset, 7, SerializeType::Json));
        assert_eq!(r.code, rs::SUCCESS, "pull {offset} from B: {:?}", r.remark);
        let record = StoredMessageView::parse_verified(&r.body).expect("a stored record");
        assert_eq!((record.body(), record.queue_offset()), (&body[..], *offset), "acknowledged send at {offset} on B");
    }
    b.stop();
    b.join();
    node.stop();
}
