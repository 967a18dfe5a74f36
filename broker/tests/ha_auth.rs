//! Replication authentication (`haAuthSecret`, issue 26; ARCHITECTURE.md, `shard/ha.rs`):
//! a master and a slave on the simulator, the production shard and replication code,
//! replication over in-memory pipes, each case with its own pair of secrets.
//!
//! Invariants checked: with the same secret on both the slave catches up byte for byte;
//! a slave with a wrong secret or none is refused, counted by the master
//! (`ha_auth_refusals`, `ringmq_shard_ha_auth_refusals`) and holds nothing; a slave with
//! a secret does not follow a master without one; a raw peer's HELLO without a proof
//! (or with a wrong AUTH) gets one REFUSE and not a byte of the log.

mod common_sim;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use ringmq_broker::config::{BrokerConfig, BrokerRole};
use ringmq_broker::ha::proto::{Frame, Hello, NONCE_BYTES, PROOF_BYTES};
use ringmq_broker::sim::{SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::StoreConfig;
use ringmq_broker::store::engine::ShardId;
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::SendMessageRequestHeaderV2;
use std::time::Duration;

const TOPIC: &str = "HA";
const SENDS: usize = 40;
const SECRET: &str = "replication-secret-0123";
const REQUEST_DEADLINE_MS: u64 = 20_000;
/// Long enough for several reconnect attempts (one per second) and for a slave that is
/// let in to catch up.
const SETTLE_MS: u64 = 8_000;
/// How long a raw peer listens: past the master's handshake timeout (10 s).
const RAW_LISTEN_MS: u64 = 15_000;

fn config(slave: bool, secret: Option<&str>) -> BrokerConfig {
    let mut config = BrokerConfig { store_root: "/sim".into(), shard_count: 2, max_message_bytes: 4096, ..BrokerConfig::default() };
    config.store = StoreConfig::for_tests();
    config.store.flush_interval_ms = 20;
    config.ha_auth_secret = secret.map(str::to_string);
    if slave {
        config.role = BrokerRole::Slave;
        config.broker_id = 1;
        config.ha_master_address = Some("127.0.0.1:10912".into());
    }
    config
}

fn send_cmd(queue_id: i32, body: &[u8]) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 { a: "PG".into(), b: TOPIC.into(), c: "TBW102".into(), d: 4, e: queue_id, f: 0, g: 1_700_000_000_000, h: 0, i: None, j: Some(0), k: false, l: None, m: false, n: None };
    RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(body.to_vec())
}

/// Each shard's durable log bytes on `b`.
async fn logs(b: &SimBroker) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for s in b.shards() {
        let store = s.store();
        store.flush_all().await.ok();
        let len = store.flushed_offset() as usize;
        out.push(store.read_for_replica(ShardId(s.id() as u16).phys(0), len.max(1)).await.ok().flatten().unwrap_or_default());
    }
    out
}

/// What one run saw once it settled.
#[derive(Debug)]
struct Outcome {
    master_bytes: usize,
    slave_logs_equal: bool,
    slave_bytes: usize,
    refusals: u64,
    slaves_attached: usize,
}

/// A master (with `master_secret`) takes `SENDS` messages while a slave (with
/// `slave_secret`) tries to follow it.
fn run(master_secret: Option<&str>, slave_secret: Option<&str>) -> Outcome {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(7);
    let master = SimBroker::new(ex.clone(), SimDisk::new(1), config(false, master_secret));
    let slave = SimBroker::new(ex.clone(), SimDisk::new(2), config(true, slave_secret));
    slave.replicate_from(master.clone());
    let ex2 = ex.clone();
    let outcome = ex.block_on(async move {
        let ex = ex2;
        master.start().await.expect("master starts");
        slave.start().await.expect("slave starts");
        let client = SimClient::new(ex.clone(), master.connect(0).expect("master up"));
        let r = client.request(common_sim::create_topic(TOPIC, 4), Duration::from_millis(REQUEST_DEADLINE_MS)).await.expect("create answered");
        assert_eq!(r.code, rs::SUCCESS);
        for n in 0..SENDS {
            let r = client.request(send_cmd((n % 4) as i32, format!("m{n}").as_bytes()), Duration::from_millis(REQUEST_DEADLINE_MS)).await.expect("send answered");
            assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        }
        ex.sleep(Duration::from_millis(SETTLE_MS)).await;
        let (m, s) = (logs(&master).await, logs(&slave).await);
        let outcome = Outcome {
            master_bytes: m.iter().map(Vec::len).sum(),
            slave_logs_equal: m == s,
            slave_bytes: s.iter().map(Vec::len).sum(),
            refusals: master.shards().iter().map(|s| s.ha_auth_refusals()).sum(),
            slaves_attached: master.shards().iter().map(|s| s.ha_slaves().len()).sum(),
        };
        master.crash();
        slave.crash();
        outcome
    });
    ex.shutdown();
    outcome
}

#[test]
fn the_same_secret_on_both_lets_the_slave_catch_up() {
    let o = run(Some(SECRET), Some(SECRET));
    assert!(o.master_bytes > 0 && o.slave_logs_equal, "{o:?}");
    assert_eq!((o.refusals, o.slaves_attached), (0, 2), "{o:?}");
    // Secrets off on both: replication as before authentication existed.
    let o = run(None, None);
    assert!(o.master_bytes > 0 && o.slave_logs_equal && o.refusals == 0, "{o:?}");
}

#[test]
fn a_wrong_or_missing_secret_is_refused_and_gets_nothing() {
    for (what, slave_secret) in [("wrong secret", Some("another-secret-4567")), ("no secret", None)] {
        let o = run(Some(SECRET), slave_secret);
        assert!(o.master_bytes > 0, "{what}: {o:?}");
        assert_eq!((o.slave_bytes, o.slaves_attached), (0, 0), "{what}: the slave holds nothing: {o:?}");
        // Both shards refused at every reconnect (one a second).
        assert!(o.refusals >= 2 * (SETTLE_MS / 1000 - 1), "{what}: refusals counted: {o:?}");
    }
}

#[test]
fn a_slave_with_a_secret_does_not_follow_a_master_without_one() {
    let o = run(None, Some(SECRET));
    assert!(o.master_bytes > 0, "{o:?}");
    assert_eq!(o.slave_bytes, 0, "{o:?}");
}

/// Every byte the master sends a raw peer until it closes (bounded by the test's time).
async fn exchange(ex: &SimExecutor, master: &SimBroker, send: Vec<Vec<u8>>) -> Vec<u8> {
    let mut end = master.connect_replica(0).expect("master up");
    for frame in send {
        end.write_all(&frame).await.expect("written");
    }
    let mut got = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = end.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
    };
    futures_lite::future::or(read, async {
        ex.sleep(Duration::from_millis(RAW_LISTEN_MS)).await;
    })
    .await;
    got
}

fn encode(frame: Frame) -> Vec<u8> {
    let mut out = Vec::new();
    frame.encode(&mut out);
    out
}

#[test]
fn a_raw_peer_without_the_proof_gets_one_refuse_and_no_log_byte() {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(11);
    let master = SimBroker::new(ex.clone(), SimDisk::new(3), config(false, Some(SECRET)));
    let ex2 = ex.clone();
    ex.block_on(async move {
        let ex = ex2;
        master.start().await.expect("master starts");
        let client = SimClient::new(ex.clone(), master.connect(0).expect("master up"));
        let r = client.request(common_sim::create_topic(TOPIC, 4), Duration::from_millis(REQUEST_DEADLINE_MS)).await.expect("create answered");
        assert_eq!(r.code, rs::SUCCESS);
        let hello = |nonce: Option<[u8; NONCE_BYTES]>| Hello { shard: 0, shard_count: 2, segment_bytes: StoreConfig::for_tests().segment_bytes, last_epoch: 0, last_epoch_start_phys: 0, end_phys: 0, auth_nonce: nonce, controller_broker_id: None };
        let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
            ("HELLO without proof", vec![encode(Frame::Hello(hello(None)))], "the slave sent no proof"),
            ("wrong AUTH", vec![encode(Frame::Hello(hello(Some([5; NONCE_BYTES])))), encode(Frame::Auth { slave_proof: [0; PROOF_BYTES] })], "wrong proof"),
            ("ACK instead of HELLO", vec![encode(Frame::Ack { received_phys: u64::MAX, durable_phys: u64::MAX })], "replication authentication failed"),
            ("a frame too large to be a HELLO", vec![vec![0, 1, 0, 0, 1]], "replication authentication failed"),
            ("silence", vec![], "no answer within"),
        ];
        for (i, (what, send, reason)) in cases.into_iter().enumerate() {
            let got = exchange(&ex, &master, send).await;
            let mut frames = Vec::new();
            let mut rest = &got[..];
            while let Ok(Some((frame, used))) = Frame::decode(rest) {
                frames.push(frame);
                rest = &rest[used..];
            }
            assert!(rest.is_empty(), "{what}: undecodable bytes {rest:?}");
            // After a HELLO with a nonce the master sends its CHALLENGE (no log byte).
            frames.retain(|f| !matches!(f, Frame::Challenge { .. }));
            match &frames[..] {
                [Frame::Refuse { reason: r }] => assert!(r.contains(reason), "{what}: {r}"),
                other => panic!("{what}: expected one REFUSE, got {other:?}"),
            }
            assert_eq!(master.shards()[0].ha_auth_refusals(), i as u64 + 1, "{what}");
            assert!(master.shards()[0].ha_slaves().is_empty(), "{what}");
        }
        master.crash();
    });
    ex.shutdown();
}
