//! Consumers keep reading from the slave when the master is gone (issue 13), with the
//! RingMQ client against real processes: a NameServer (in this process), an
//! ASYNC_MASTER and its SLAVE (child processes, 2 shards each, same broker name).
//!
//! 300 messages are sent to the master; a pull consumer reads the first 150 and commits;
//! once the slave caught up (and the committed offsets reached it), the master is
//! SIGKILLed. A new consumer of the same group (the master is still in the NameServer's
//! route: it is dropped only after 120 s) resumes from the committed offsets through the
//! slave — the client reads from a broker's slave while its master cannot be reached —
//! and reads the rest, then commits there. Bound asserted: the first message from the
//! slave arrives within `FAILOVER_BOUND` of the kill. The master then restarts (on new
//! ports): the slave — which has no `ha_master_address` and learns its master from the
//! NameServer's REGISTER_BROKER answer — reattaches and hands the offsets committed on
//! it to the master, which takes them where they are ahead.

mod common;

use common::{create_topic, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn};
use ringmq_client::consumer::{ConsumeFrom, PullConsumer, PullConsumerConfig};
use ringmq_client::instance::ClientConfig;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOPIC: &str = "HA_FAILOVER";
const QUEUES: i32 = 4;
const GROUP: &str = "cg-ha-failover";
const MESSAGES: usize = 300;
const FAILOVER_BOUND: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(30);

fn child(shards: usize, top: String) -> ChildConfig {
    ChildConfig {
        shard_count: shards,
        top,
        store: "flush = \"async\"\nflush_interval_ms = 50\nsegment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n".into(),
        env: Vec::new(),
    }
}


fn max_offsets(addr: SocketAddr) -> Vec<i64> {
    let mut c = Conn::open(addr);
    (0..QUEUES)
        .map(|q| {
            let r = c.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(50 + q));
            r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(-1)
        })
        .collect()
}

fn committed(addr: SocketAddr, q: i32) -> Option<i64> {
    let r = Conn::open(addr).call(
        RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET).with_ext("consumerGroup", GROUP).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(60),
    );
    (r.code == rs::SUCCESS).then(|| r.ext("offset").and_then(|o| o.parse().ok())).flatten()
}

fn id_of(body: &[u8]) -> usize {
    String::from_utf8_lossy(body).strip_prefix("failover ").and_then(|i| i.parse().ok()).expect("our body")
}

/// Reads until `want` distinct ids — and every id of `need` — were seen (or the
/// deadline), commits, returns the ids and when the first message came.
async fn read(ns: String, want: usize, need: BTreeSet<usize>, from: ConsumeFrom) -> (BTreeSet<usize>, Option<Instant>) {
    let mut client = ClientConfig::new([ns]);
    client.client_ip = Some("127.0.0.1".parse().unwrap());
    let mut config = PullConsumerConfig::new(client, GROUP);
    config.consume_from = from;
    let consumer = PullConsumer::start(config).await.expect("consumer starts");
    let began = Instant::now();
    let queues = loop {
        match consumer.fetch_queues(TOPIC).await {
            Ok(q) if !q.is_empty() => break q,
            _ => {
                assert!(began.elapsed() < WAIT, "no route for {TOPIC}");
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    consumer.assign(&queues, "*").await.expect("assign");
    let mut seen = BTreeSet::new();
    let mut first = None;
    while seen.len() < want || !need.is_subset(&seen) {
        assert!(began.elapsed() < WAIT, "read {} of {want} ({} of the {} needed) within {WAIT:?}", seen.len(), need.intersection(&seen).count(), need.len());
        match consumer.poll(Duration::from_millis(300)).await {
            Ok(msgs) => {
                if !msgs.is_empty() && first.is_none() {
                    first = Some(Instant::now());
                }
                seen.extend(msgs.iter().map(|m| id_of(&m.body)));
            }
            // The master is gone: the first attempts fail, then reads go to the slave.
            Err(_) => glommio::timer::sleep(Duration::from_millis(50)).await,
        }
    }
    let commit_began = Instant::now();
    while consumer.commit_all().await.is_err() {
        assert!(commit_began.elapsed() < WAIT, "offsets not committed");
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    consumer.shutdown().await;
    (seen, first)
}

fn on_client_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("client thread")
}

#[test]
fn consumers_read_from_the_slave_when_the_master_is_gone() {
    let namesrv = namesrv::server::spawn(namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).expect("namesrv");
    let ns = namesrv.local_addr().to_string();
    let dir = temp_dir();
    let named = |extra: &str| format!("broker_name = \"broker-ha\"\nnamesrv_addrs = [\"{ns}\"]\n{extra}");
    let mut master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &child(2, named("role = \"async_master\"\n")));
    // No ha_master_address: the slave learns its master from the NameServer (and
    // learns it again when the master comes back on another port).
    let slave_top = named("role = \"slave\"\nbroker_id = 1\nslave_read_enable = true\nregister_interval_ms = 500\n");
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &child(2, slave_top));
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut c = Conn::open(master.addr);
    for id in 0..MESSAGES {
        let r = c.call(send_with(send_header(TOPIC, (id % QUEUES as usize) as i32), format!("failover {id}").as_bytes(), 100 + id as i32, SerializeType::RocketMq));
        assert_eq!(r.code, rs::SUCCESS);
    }
    // Half is consumed through the master and committed.
    let ns1 = ns.clone();
    let (first_half, _) = on_client_thread(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).spawn(move || read(ns1, MESSAGES / 2, BTreeSet::new(), ConsumeFrom::FirstOffset)).unwrap().join().unwrap()
    });
    // The slave holds every message and the committed offsets.
    let deadline = Instant::now() + WAIT;
    loop {
        let offsets_there = (0..QUEUES).all(|q| committed(slave.addr, q).is_some() == committed(master.addr, q).is_some() && committed(slave.addr, q) >= committed(master.addr, q));
        if max_offsets(master.addr) == max_offsets(slave.addr) && offsets_there {
            break;
        }
        assert!(Instant::now() < deadline, "slave not caught up: master {:?}, slave {:?}", max_offsets(master.addr), max_offsets(slave.addr));
        std::thread::sleep(Duration::from_millis(50));
    }
    let committed_before: Vec<Option<i64>> = (0..QUEUES).map(|q| committed(master.addr, q)).collect();
    master.kill();
    let killed = Instant::now();
    // A new consumer of the group resumes through the slave and reads everything the
    // first one did not commit.
    let ns2 = ns.clone();
    let need: BTreeSet<usize> = (0..MESSAGES).filter(|i| !first_half.contains(i)).collect();
    let remaining = need.len();
    let (second, first_at) = on_client_thread(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).spawn(move || read(ns2, 1, need, ConsumeFrom::FirstOffset)).unwrap().join().unwrap()
    });
    let failover = first_at.expect("read from the slave").duration_since(killed);
    assert!(failover < FAILOVER_BOUND, "first message from the slave {failover:?} after the kill (bound {FAILOVER_BOUND:?})");
    let again = second.intersection(&first_half).count();
    // Offsets committed on the slave moved past what the master had.
    let committed_after: Vec<Option<i64>> = (0..QUEUES).map(|q| committed(slave.addr, q)).collect();
    assert!(committed_after.iter().zip(&committed_before).any(|(a, b)| a > b), "offsets committed on the slave: before {committed_before:?}, after {committed_after:?}");
    // The master comes back (a new replication port, named by the NameServer): the
    // slave reattaches and hands over the offsets committed on it; the master takes
    // them (the higher offset wins).
    let restarted = Instant::now();
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &child(2, named("role = \"async_master\"\nregister_interval_ms = 500\n")));
    let deadline = Instant::now() + WAIT;
    loop {
        let on_master: Vec<Option<i64>> = (0..QUEUES).map(|q| committed(master.addr, q)).collect();
        if on_master.iter().zip(&committed_after).all(|(m, s)| m >= s) {
            break;
        }
        assert!(Instant::now() < deadline, "offsets committed on the slave never reached the restarted master: master {on_master:?}, slave {committed_after:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let reconciled = restarted.elapsed();
    println!(
        "ha_failover summary: {} read via the master; master SIGKILLed; first message via the slave after {failover:?}; {remaining} read there ({again} re-read); \
         master restarted, slave offsets reconciled on it {reconciled:?} after the restart",
        first_half.len()
    );
    master.stop();
    slave.stop();
    namesrv.stop();
}
