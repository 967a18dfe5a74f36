//! Acceptance of the RingMQ client (issue 4) against a RingMQ cluster in this process:
//! NameServer(s) on their own threads, two brokers ("broker-a", "broker-b", one shard
//! each), and the client on a glommio executor of its own.
//!
//! Scenarios: every send kind read back by the pull consumer; ordered messages keep
//! their order per queue while a second orderly consumer joins; three consumers split
//! eight queues and rebalance when one leaves; broadcasting delivers everything to
//! everyone; tag filters deliver exactly the matching messages; a producer routes
//! around a SIGKILLed broker (a child process) within its retry budget; a second
//! NameServer keeps routes served when the first stops.
//!
//! Tests run one at a time (`SERIAL`): each starts several executors and the 2-core CI
//! machine gives more stable timings that way. Every wait is bounded by `WAIT`.

mod common;

use common::ChildBroker;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::admin;
use ringmq_client::consumer::{
    ConsumeFrom, ConsumeOrderlyStatus, ConsumeStatus, MessageModel, MessageQueue, PullConsumer, PullConsumerConfig, PushConsumer,
    PushConsumerConfig,
};
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::{ClientConfig, ClientError, ClientInstance, Message, MessageExt};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
static SERIAL: Mutex<()> = Mutex::new(());

fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("RINGMQ_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_test_writer().try_init();
        }
    });
}


fn start_namesrv() -> namesrv::server::ServerHandle {
    let mut config = namesrv::config::ServerConfig::default();
    config.listen = "127.0.0.1:0".parse().expect("address");
    namesrv::server::spawn(config).expect("namesrv starts")
}

fn broker_config(name: &str, namesrvs: &[String], root: &Path) -> BrokerConfig {
    let mut config = BrokerConfig::default();
    config.store_root = root.to_path_buf();
    config.listen_port = 0; // the broker picks a free port; its handle says which
    config.shard_count = 1;
    config.broker_ip = Some("127.0.0.1".into());
    config.broker_name = name.into();
    config.namesrv_addrs = namesrvs.to_vec();
    config.register_interval_ms = 1_000;
    config.pull_suspend_max_ms = 1_000;
    config.store.flush_mode = FlushMode::Async;
    config.store.segment_bytes = 8 * 1024 * 1024;
    config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
    config.store.dirty_bytes_max = 8 * 1024 * 1024;
    // The host disk's own fill level must not decide the test.
    config.store.disk_max_used_ratio = 0.999;
    config.store.disk_force_clean_ratio = 0.999;
    config.store.disk_refuse_ratio = 0.9999;
    config
}

struct Cluster {
    namesrvs: Vec<Option<namesrv::server::ServerHandle>>,
    brokers: Vec<BrokerHandle>,
    root: tempfile::TempDir,
}

impl Cluster {
    fn start(namesrv_count: usize, broker_names: &[&str]) -> Self {
        init_logging();
        let namesrvs: Vec<_> = (0..namesrv_count).map(|_| Some(start_namesrv())).collect();
        let addrs: Vec<String> = namesrvs.iter().map(|n| n.as_ref().expect("namesrv").local_addr().to_string()).collect();
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let brokers = broker_names
            .iter()
            .map(|name| launch::start(broker_config(name, &addrs, &root.path().join(name))).expect("broker starts"))
            .collect();
        // A broker registers right after it starts, on its own task: wait until every
        // NameServer lists every broker, or a test that reads the cluster at once races it.
        for ns in &addrs {
            wait_registered(ns, broker_names);
        }
        Self { namesrvs, brokers, root }
    }

    /// One broker `name` with `shards` shards in shard route mode: its shard-brokers
    /// `<name>-s<i>` are what the NameServers list.
    fn start_shard_mode(namesrv_count: usize, name: &str, shards: usize) -> Self {
        init_logging();
        let namesrvs: Vec<_> = (0..namesrv_count).map(|_| Some(start_namesrv())).collect();
        let addrs: Vec<String> = namesrvs.iter().map(|n| n.as_ref().expect("namesrv").local_addr().to_string()).collect();
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let mut config = broker_config(name, &addrs, &root.path().join(name));
        config.shard_count = shards;
        config.route_mode = ringmq_broker::config::RouteMode::Shard;
        let broker = launch::start(config).expect("broker starts");
        let names: Vec<String> = (0..shards).map(|i| ringmq_broker::routing::shard_broker_name(name, i)).collect();
        for ns in &addrs {
            wait_registered(ns, &names.iter().map(String::as_str).collect::<Vec<_>>());
        }
        Self { namesrvs, brokers: vec![broker], root }
    }

    fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrvs.iter().flatten().map(|n| n.local_addr().to_string()).collect()
    }

    fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new(self.namesrv_addrs());
        c.client_ip = Some("127.0.0.1".parse().expect("ip"));
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for b in self.brokers.drain(..) {
            b.stop();
            b.join();
        }
        for n in self.namesrvs.iter_mut() {
            if let Some(n) = n.take() {
                n.stop();
            }
        }
    }
}

/// Runs `f` on a fresh glommio executor thread and returns its result (panics propagate).
fn on_executor<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("client-test")
        .spawn(move || async move { f().await })
        .expect("executor starts")
        .join()
        .expect("test body")
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_topic(config: &ClientConfig, topic: &str, queues_per_broker: i32) -> Vec<String> {
    let instance = ClientInstance::start(config.clone()).expect("admin instance");
    let masters = admin::create_topic_on_cluster(&instance, None, topic, queues_per_broker).await.expect("topic created");
    instance.shutdown().await;
    masters
}

/// Queries as mqadmin makes them: by id at the store host the offsetMsgId names (in
/// shard route mode, the shard's own port), and by key at every broker of the cluster
/// (each message found exactly once over all of them).
async fn query_by_id_and_key(client: &ClientConfig, sent: &[(String, String)]) {
    use ringmq_client::net::Connection;
    use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
    use ringmq_client::remoting::command::RemotingCommand;
    use ringmq_client::remoting::frame::SerializeType;
    let call = |addr: String, cmd: RemotingCommand| async move {
        let conn = Connection::connect(&addr, WAIT, SerializeType::Json, None).await.expect("connect");
        let r = conn.request(cmd, WAIT).await.expect("answer");
        conn.close();
        r
    };
    for (msg_id, offset_id) in sent.iter().take(6) {
        let (host, offset) = ringmq_client::msgid::decode_offset_msg_id(offset_id).expect("offsetMsgId decodes");
        let r = call(host.to_string(), RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", offset.to_string())).await;
        assert_eq!(r.code, rs::SUCCESS, "view {offset_id} at {host}: {:?}", r.remark);
        let found = ringmq_client::message::decode_messages(&r.body, "").expect("record decodes");
        assert_eq!(found.len(), 1);
        assert_eq!(&found[0].msg_id, msg_id, "the message {offset_id} names");
    }
    let instance = ClientInstance::start(client.clone()).expect("admin instance");
    let info = admin::cluster_info(&instance).await.expect("cluster info");
    instance.shutdown().await;
    let masters: Vec<String> = info.broker_addr_table.values().filter_map(|b| b.broker_addrs.get(&0).cloned()).collect();
    for (key, want) in [("key-3", 1usize), ("all", sent.len())] {
        let mut ids = Vec::new();
        for addr in &masters {
            let r = call(
                addr.clone(),
                RemotingCommand::request(rq::QUERY_MESSAGE)
                    .with_ext("topic", "KINDS")
                    .with_ext("key", key)
                    .with_ext("maxNum", "64")
                    .with_ext("beginTimestamp", "0")
                    .with_ext("endTimestamp", i64::MAX.to_string()),
            )
            .await;
            if r.code == rs::SUCCESS {
                ids.extend(ringmq_client::message::decode_messages(&r.body, "").expect("records").into_iter().map(|m| m.msg_id));
            }
        }
        ids.sort();
        let unique = ids.len();
        ids.dedup();
        assert_eq!((unique, ids.len()), (want, want), "key {key}: each message once over {masters:?}");
    }
}

fn push_config(client: &ClientConfig, group: &str) -> PushConsumerConfig {
    let mut c = PushConsumerConfig::new(client.clone(), group);
    c.consume_from = ConsumeFrom::FirstOffset;
    c.rebalance_interval_ms = 1_000;
    c.persist_offset_interval_ms = 200;
    c.lock_renew_interval_ms = 1_000;
    c.lock_retry_ms = 100;
    c.pull_suspend_ms = 500;
    c.suspend_current_queue_ms = 50;
    c.reconsume_delay_ms = 20;
    c
}

fn text(m: &MessageExt) -> String {
    String::from_utf8_lossy(&m.body).to_string()
}

#[test]
fn every_send_kind_reads_back_intact() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    every_send_kind(Cluster::start(1, &["broker-a", "broker-b"]));
}

/// The same with one 2-shard broker in shard route mode: two shard-brokers
/// (`broker-a-s0`, `broker-a-s1`), each reached directly; nothing is forwarded.
#[test]
fn shard_mode_every_send_kind_reads_back_intact() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start_shard_mode(1, "broker-a", 2);
    every_send_kind(cluster);
}

fn every_send_kind(cluster: Cluster) {
    let client = cluster.client_config();
    on_executor(move || async move {
        let masters = create_topic(&client, "KINDS", 4).await;
        assert_eq!(masters.len(), 2);
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-kinds")).await.expect("producer");
        let mut expected: BTreeMap<String, (String, Option<String>, Vec<String>)> = BTreeMap::new();
        let mut brokers_used = BTreeSet::new();
        let mut offset_ids: Vec<(String, String)> = Vec::new();
        // Sync sends with tags, keys and a user property.
        for i in 0..20 {
            let msg = Message::new("KINDS", format!("sync-{i}"))
                .with_tags(if i % 2 == 0 { "TagA" } else { "TagB" })
                .and_then(|m| m.with_keys([format!("key-{i}").as_str(), "all"]))
                .and_then(|m| m.with_property("user-prop", "wert-ü"))
                .expect("message");
            let r = producer.send(msg).await.expect("sync send");
            assert_eq!(r.msg_id.len(), 32, "UNIQ_KEY layout: {}", r.msg_id);
            let (ip, _) = ringmq_client::msgid::decode_v4(&r.msg_id, ringmq_client::msgid::now_ms()).expect("id decodes");
            assert_eq!(ip.to_string(), "127.0.0.1");
            brokers_used.insert(r.queue.broker_name.clone());
            offset_ids.push((r.msg_id.clone(), r.offset_msg_id.clone()));
            expected.insert(format!("sync-{i}"), (r.msg_id, Some(if i % 2 == 0 { "TagA" } else { "TagB" }.into()), vec![format!("key-{i}"), "all".into()]));
        }
        assert_eq!(brokers_used.len(), 2, "round-robin reaches both brokers");
        // Async sends with callbacks.
        let done: Rc<RefCell<Vec<Result<String, String>>>> = Rc::default();
        for i in 0..10 {
            let done = done.clone();
            producer.send_with_callback(Message::new("KINDS", format!("async-{i}")), move |r| {
                done.borrow_mut().push(r.map(|r| r.msg_id).map_err(|e| e.to_string()));
            });
        }
        wait_until("async callbacks", || done.borrow().len() == 10).await;
        assert!(done.borrow().iter().all(Result::is_ok), "{:?}", done.borrow());
        for i in 0..10 {
            expected.insert(format!("async-{i}"), (String::new(), None, vec![]));
        }
        // Oneway sends.
        for i in 0..5 {
            producer.send_oneway(Message::new("KINDS", format!("oneway-{i}"))).await.expect("oneway");
            expected.insert(format!("oneway-{i}"), (String::new(), None, vec![]));
        }
        // A batch: one queue, consecutive offsets.
        let batch: Vec<Message> = (0..10).map(|i| Message::new("KINDS", format!("batch-{i}"))).collect();
        let r = producer.send_batch(batch).await.expect("batch");
        assert_eq!(r.msg_id.split(',').count(), 10);
        for i in 0..10 {
            expected.insert(format!("batch-{i}"), (String::new(), None, vec![]));
        }
        // Ordered: one key, one queue, increasing offsets.
        let mut ordered_queue = None;
        let mut last_offset = -1;
        for i in 0..10 {
            let r = producer.send_ordered(Message::new("KINDS", format!("ordered-{i}")), "order-7").await.expect("ordered");
            assert!(ordered_queue.get_or_insert(r.queue.clone()) == &r.queue, "one key, one queue");
            assert!(r.queue_offset > last_offset);
            last_offset = r.queue_offset;
            expected.insert(format!("ordered-{i}"), (String::new(), None, vec![]));
        }
        // Oversize and bad messages are refused locally with a clear error.
        let big = Message::new("KINDS", vec![0u8; 4 * 1024 * 1024 + 1]);
        assert!(matches!(producer.send(big).await, Err(ClientError::MessageIllegal { .. })));
        assert!(matches!(producer.send(Message::new("bad topic", "x")).await, Err(ClientError::InvalidMessage(_))));
        let missing = producer.send(Message::new("NO_SUCH_TOPIC", "x")).await;
        assert!(matches!(&missing, Err(ClientError::NoRoute { .. })), "{missing:?}");
        assert!(missing.unwrap_err().to_string().contains("create it"));

        // Read everything back with the pull consumer.
        let mut pc_config = PullConsumerConfig::new(client.clone(), "cg-kinds");
        pc_config.consume_from = ConsumeFrom::FirstOffset;
        let consumer = PullConsumer::start(pc_config.clone()).await.expect("pull consumer");
        let queues = consumer.fetch_queues("KINDS").await.expect("queues");
        assert_eq!(queues.len(), 8);
        consumer.assign(&queues, "*").await.expect("assign");
        let mut got: HashMap<String, MessageExt> = HashMap::new();
        let deadline = Instant::now() + WAIT;
        while got.len() < expected.len() {
            assert!(Instant::now() < deadline, "read back {} of {}", got.len(), expected.len());
            let batch = consumer.poll(Duration::from_millis(500)).await.expect("poll");
            let mut last = BTreeMap::new();
            for m in batch {
                let q = (m.broker_name.clone(), m.queue_id);
                assert!(last.insert(q, m.queue_offset).map_or(true, |prev| prev < m.queue_offset), "offset order within a queue");
                assert!(got.insert(text(&m), m).is_none(), "no duplicates");
            }
        }
        for (body, (id, tags, keys)) in &expected {
            let m = &got[body];
            assert_eq!(m.topic, "KINDS");
            if !id.is_empty() {
                assert_eq!(&m.msg_id, id, "UNIQ_KEY survives for {body}");
            }
            assert_eq!(m.tags().map(str::to_string), *tags, "{body}");
            assert_eq!(m.keys().map(str::to_string).collect::<Vec<_>>(), *keys, "{body}");
            assert_eq!(m.born_host.ip().to_string(), "127.0.0.1");
        }
        assert_eq!(got["sync-3"].property("user-prop"), Some("wert-ü"));
        let ids: HashSet<&String> = got.values().map(|m| &m.msg_id).collect();
        assert_eq!(ids.len(), got.len(), "message ids are unique");
        // Commit, and a new consumer of the group resumes after everything.
        consumer.commit_all().await.expect("commit");
        let again = PullConsumer::start(pc_config).await.expect("second pull consumer");
        again.assign(&queues, "*").await.expect("assign");
        assert!(again.poll(Duration::from_millis(300)).await.expect("poll").is_empty());
        // Seek back to the beginning of the ordered queue: the 10 ordered messages again.
        let oq = ordered_queue.expect("ordered queue");
        again.seek_to_begin(&oq).await.expect("seek");
        let mut replay = Vec::new();
        while replay.len() < 10 {
            replay.extend(again.poll(Duration::from_secs(2)).await.expect("poll").into_iter().map(|m| text(&m)).filter(|b| b.starts_with("ordered")));
        }
        assert_eq!(replay, (0..10).map(|i| format!("ordered-{i}")).collect::<Vec<_>>());
        query_by_id_and_key(&client, &offset_ids).await;
        producer.shutdown().await;
        consumer.shutdown().await;
        again.shutdown().await;
    });
}

#[test]
fn ordered_messages_keep_their_order_while_a_consumer_joins() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ordered_while_a_consumer_joins(Cluster::start(1, &["broker-a", "broker-b"]));
}

/// The same in shard route mode (queue locks taken through each shard-broker).
#[test]
fn shard_mode_ordered_messages_keep_their_order_while_a_consumer_joins() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ordered_while_a_consumer_joins(Cluster::start_shard_mode(1, "broker-a", 2));
}

fn ordered_while_a_consumer_joins(cluster: Cluster) {
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, "ORDERED", 4).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-ordered")).await.expect("producer");
        // (consumer, key, seq) in consumption order: one thread, so this order is real.
        let log: Rc<RefCell<Vec<(usize, u32, u32)>>> = Rc::default();
        let listener = |who: usize, log: Rc<RefCell<Vec<(usize, u32, u32)>>>| {
            move |msgs: &[MessageExt]| {
                for m in msgs {
                    let body = text(m);
                    let (key, seq) = body.split_once(':').expect("key:seq");
                    log.borrow_mut().push((who, key.parse().expect("key"), seq.parse().expect("seq")));
                }
                ConsumeOrderlyStatus::Success
            }
        };
        let mut a = PushConsumer::new(push_config(&client, "cg-ordered"));
        a.subscribe("ORDERED", "*").expect("subscribe");
        a.register_orderly(listener(0, log.clone()));
        a.start().await.expect("consumer a");
        const KEYS: u32 = 16;
        const TOTAL: u32 = 480;
        let mut b = PushConsumer::new(push_config(&client, "cg-ordered"));
        for i in 0..TOTAL {
            let key = i % KEYS;
            producer.send_ordered(Message::new("ORDERED", format!("{key}:{}", i / KEYS)), &format!("order-{key}")).await.expect("send");
            if i == TOTAL / 3 {
                wait_until("consumer a to catch up", || log.borrow().len() >= (TOTAL / 6) as usize).await;
                b.subscribe("ORDERED", "*").expect("subscribe");
                b.register_orderly(listener(1, log.clone()));
                b.start().await.expect("consumer b");
            }
            if i % 40 == 0 {
                glommio::timer::sleep(Duration::from_millis(20)).await;
            }
        }
        wait_until("every message consumed", || {
            let seen: HashSet<(u32, u32)> = log.borrow().iter().map(|(_, k, s)| (*k, *s)).collect();
            seen.len() == TOTAL as usize
        })
        .await;
        wait_until("the queues to be split", || a.assigned_queues().len() == 4 && b.assigned_queues().len() == 4).await;
        let log = log.borrow().clone();
        let mut last: HashMap<u32, u32> = HashMap::new();
        for (who, key, seq) in log.iter() {
            if let Some(prev) = last.insert(*key, *seq) {
                assert!(*seq > prev, "key {key}: seq {seq} after {prev} (consumer {who}): order broken or redelivered");
            }
        }
        let by_b = log.iter().filter(|(who, _, _)| *who == 1).count();
        assert!(by_b > 0, "the joining consumer took over some queues");
        eprintln!("ordered: {} consumed, {} by the consumer that joined", log.len(), by_b);
        producer.shutdown().await;
        a.shutdown().await;
        b.shutdown().await;
    });
}

#[test]
fn three_consumers_split_eight_queues_and_rebalance_when_one_leaves() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(1, &["broker-a", "broker-b"]);
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, "SPLIT", 4).await;
        let received: Rc<RefCell<Vec<(usize, String)>>> = Rc::default();
        let mut consumers = Vec::new();
        for who in 0..3 {
            let mut c = PushConsumer::new(push_config(&client, "cg-split"));
            c.subscribe("SPLIT", "*").expect("subscribe");
            let received = received.clone();
            c.register_concurrently(move |msgs| {
                received.borrow_mut().extend(msgs.iter().map(|m| (who, text(m))));
                ConsumeStatus::Success
            });
            c.start().await.expect("consumer");
            consumers.push(c);
        }
        let shares = |cs: &[PushConsumer]| cs.iter().map(|c| c.assigned_queues()).collect::<Vec<Vec<MessageQueue>>>();
        let is_partition = |shares: &[Vec<MessageQueue>]| {
            let all: BTreeSet<&MessageQueue> = shares.iter().flatten().collect();
            all.len() == 8 && shares.iter().map(Vec::len).sum::<usize>() == 8
        };
        wait_until("3 members to split 8 queues", || {
            let s = shares(&consumers);
            let mut sizes: Vec<usize> = s.iter().map(Vec::len).collect();
            sizes.sort();
            is_partition(&s) && sizes == [2, 3, 3]
        })
        .await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-split")).await.expect("producer");
        for i in 0..80 {
            producer.send(Message::new("SPLIT", format!("m-{i}"))).await.expect("send");
        }
        wait_until("80 messages consumed", || received.borrow().iter().map(|(_, b)| b).collect::<HashSet<_>>().len() == 80).await;
        let consumers_used: HashSet<usize> = received.borrow().iter().map(|(w, _)| *w).collect();
        assert_eq!(consumers_used.len(), 3, "every member consumed its share");
        // One leaves: the other two take its queues.
        let mut leaving = consumers.pop().expect("third consumer");
        leaving.shutdown().await;
        wait_until("2 members to split 8 queues", || {
            let s = shares(&consumers);
            is_partition(&s) && s.iter().all(|q| q.len() == 4)
        })
        .await;
        for i in 80..160 {
            producer.send(Message::new("SPLIT", format!("m-{i}"))).await.expect("send");
        }
        wait_until("160 messages consumed", || received.borrow().iter().map(|(_, b)| b).collect::<HashSet<_>>().len() == 160).await;
        let late: Vec<usize> = received
            .borrow()
            .iter()
            .filter(|(_, b)| b.trim_start_matches("m-").parse::<u32>().expect("seq") >= 80)
            .map(|(w, _)| *w)
            .collect();
        assert!(late.len() >= 80 && late.iter().all(|w| *w < 2), "only the remaining members consume after the leave");
        producer.shutdown().await;
        for mut c in consumers {
            c.shutdown().await;
        }
    });
}

#[test]
fn broadcast_delivers_every_message_to_every_consumer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(1, &["broker-a", "broker-b"]);
    let client = cluster.client_config();
    let offsets_dir = cluster.root.path().join("offsets");
    on_executor(move || async move {
        create_topic(&client, "BCAST", 4).await;
        let received: Rc<RefCell<Vec<HashSet<String>>>> = Rc::new(RefCell::new(vec![HashSet::new(); 3]));
        let mut consumers = Vec::new();
        for who in 0..3 {
            let mut config = push_config(&client, "cg-bcast");
            config.model = MessageModel::Broadcasting;
            config.client.instance_name = Some(format!("bcast-{who}"));
            config.offset_store_dir = offsets_dir.clone();
            let mut c = PushConsumer::new(config);
            c.subscribe("BCAST", "*").expect("subscribe");
            let received = received.clone();
            c.register_concurrently(move |msgs| {
                received.borrow_mut()[who].extend(msgs.iter().map(text));
                ConsumeStatus::Success
            });
            c.start().await.expect("consumer");
            consumers.push(c);
        }
        wait_until("every member to read all 8 queues", || consumers.iter().all(|c| c.assigned_queues().len() == 8)).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-bcast")).await.expect("producer");
        for i in 0..60 {
            producer.send(Message::new("BCAST", format!("b-{i}"))).await.expect("send");
        }
        wait_until("every member to get all 60", || received.borrow().iter().all(|s| s.len() == 60)).await;
        for mut c in consumers {
            c.shutdown().await;
        }
        producer.shutdown().await;
        // Offsets were kept locally, one file per member, covering all 60 messages.
        for who in 0..3 {
            let path: PathBuf = offsets_dir.join("cg-bcast").join(format!("bcast-{who}.json"));
            let body: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).expect("offset file")).expect("json");
            let total: i64 = body["offsets"].as_array().expect("offsets").iter().map(|e| e["offset"].as_i64().expect("offset")).sum();
            assert_eq!(total, 60, "{}", path.display());
        }
    });
}

#[test]
fn tag_filters_deliver_exactly_the_matching_messages() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(1, &["broker-a", "broker-b"]);
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, "TAGS", 2).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-tags")).await.expect("producer");
        let tags = ["TagA", "TagB", "TagC", "Aa", "BB"]; // "Aa" and "BB" share a Java hash code
        for i in 0..100 {
            let tag = tags[i % tags.len()];
            producer.send(Message::new("TAGS", format!("{tag}-{i}")).with_tags(tag).expect("tag")).await.expect("send");
        }
        let received: Rc<RefCell<Vec<String>>> = Rc::default();
        let mut c = PushConsumer::new(push_config(&client, "cg-tags"));
        c.subscribe("TAGS", "TagA || TagC || Aa").expect("subscribe");
        let r2 = received.clone();
        c.register_concurrently(move |msgs| {
            r2.borrow_mut().extend(msgs.iter().map(|m| format!("{}|{}", m.tags().unwrap_or(""), text(m))));
            ConsumeStatus::Success
        });
        c.start().await.expect("consumer");
        wait_until("60 matching messages", || received.borrow().len() >= 60).await;
        glommio::timer::sleep(Duration::from_millis(500)).await;
        let got = received.borrow().clone();
        assert_eq!(got.len(), 60, "exactly the matching messages, once each");
        for entry in &got {
            let (tag, body) = entry.split_once('|').expect("tag|body");
            assert!(["TagA", "TagC", "Aa"].contains(&tag), "{entry}");
            assert!(body.starts_with(tag), "{entry}");
        }
        // The pull consumer filters the same way.
        let mut pc = PullConsumerConfig::new(client.clone(), "cg-tags-pull");
        pc.consume_from = ConsumeFrom::FirstOffset;
        let pull = PullConsumer::start(pc).await.expect("pull consumer");
        let queues = pull.fetch_queues("TAGS").await.expect("queues");
        pull.assign(&queues, "BB").await.expect("assign");
        let mut bb = Vec::new();
        let deadline = Instant::now() + WAIT;
        while bb.len() < 20 && Instant::now() < deadline {
            bb.extend(pull.poll(Duration::from_millis(300)).await.expect("poll"));
        }
        assert_eq!(bb.len(), 20);
        assert!(bb.iter().all(|m| m.tags() == Some("BB")), "a hash collision never reaches the application");
        c.shutdown().await;
        pull.shutdown().await;
        producer.shutdown().await;
    });
}

/// A broker in a child process, so it can be SIGKILLed (the shared starter: port 0,
/// read back from its log).
fn start_child(name: &str, namesrvs: &[String], root: &Path) -> ChildBroker {
    std::fs::create_dir_all(root).expect("store dir");
    let config = common::ChildConfig {
        shard_count: 1,
        top: format!("namesrv_addrs = {namesrvs:?}\nbroker_name = \"{name}\"\nregister_interval_ms = 1000"),
        store: "segment_bytes = 8388608\nflush = \"async\"\ndirty_bytes_max = 8388608".into(),
        env: Vec::new(),
    };
    ChildBroker::start_up(root, &root.join("store"), &config)
}

#[test]
fn a_producer_routes_around_a_killed_broker_within_its_retry_budget() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(1, &["broker-a"]);
    let client = cluster.client_config();
    let mut child = start_child("broker-b", &cluster.namesrv_addrs(), &cluster.root.path().join("broker-b"));
    let child_addr = child.addr;
    let (killed_tx, killed_rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let body = std::thread::spawn(move || {
        on_executor(move || async move {
            let masters = create_topic(&client, "FAILOVER", 4).await;
            assert!(masters.contains(&child_addr.to_string()), "{masters:?}");
            let mut config = ProducerConfig::new(client.clone(), "pg-failover");
            config.send_timeout_ms = 3_000;
            config.retry_times_when_send_failed = 2;
            let producer = Producer::start(config).await.expect("producer");
            let mut before = BTreeSet::new();
            for i in 0..16 {
                before.insert(producer.send(Message::new("FAILOVER", format!("before-{i}"))).await.expect("send").queue.broker_name);
            }
            assert_eq!(before.len(), 2, "both brokers take sends before the kill");
            ready_tx.send(()).expect("ready");
            killed_rx.recv().expect("killed");
            let mut worst = Duration::ZERO;
            let mut after = BTreeMap::<String, usize>::new();
            for i in 0..64 {
                let started = Instant::now();
                let r = producer.send(Message::new("FAILOVER", format!("after-{i}"))).await;
                let took = started.elapsed();
                worst = worst.max(took);
                let r = r.unwrap_or_else(|e| panic!("send {i} after the kill failed: {e}"));
                *after.entry(r.queue.broker_name).or_default() += 1;
                assert!(took <= Duration::from_millis(3_000), "send {i} took {took:?}, over its budget");
            }
            assert_eq!(after.keys().collect::<Vec<_>>(), ["broker-a"], "{after:?}");
            eprintln!("failover: 64 sends after SIGKILL all stored on broker-a; slowest {worst:?}");
            producer.shutdown().await;
        })
    });
    ready_rx.recv_timeout(WAIT).expect("producer ready");
    child.kill();
    killed_tx.send(()).expect("signal");
    body.join().expect("test body");
}

#[test]
fn a_second_namesrv_keeps_routes_served_when_the_first_stops() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cluster = Cluster::start(2, &["broker-a", "broker-b"]);
    let client = cluster.client_config();
    assert_eq!(client.namesrv_addrs.len(), 2);
    let client2 = client.clone();
    on_executor(move || async move {
        create_topic(&client2, "NS_BEFORE", 2).await;
    });
    let first = cluster.namesrvs[0].take().expect("first namesrv");
    first.stop();
    on_executor(move || async move {
        // A topic created after the first NameServer stopped: the brokers register it
        // with the second, and clients that list both find it there.
        create_topic(&client, "NS_AFTER", 2).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-ns")).await.expect("producer");
        for topic in ["NS_BEFORE", "NS_AFTER"] {
            for i in 0..8 {
                producer.send(Message::new(topic, format!("{topic}-{i}"))).await.unwrap_or_else(|e| panic!("{topic}: {e}"));
            }
        }
        let mut pc = PullConsumerConfig::new(client.clone(), "cg-ns");
        pc.consume_from = ConsumeFrom::FirstOffset;
        let consumer = PullConsumer::start(pc).await.expect("consumer");
        let queues = consumer.fetch_queues("NS_AFTER").await.expect("route from the second NameServer");
        assert_eq!(queues.len(), 4);
        consumer.assign(&queues, "*").await.expect("assign");
        let mut n = 0;
        let deadline = Instant::now() + WAIT;
        while n < 8 && Instant::now() < deadline {
            n += consumer.poll(Duration::from_millis(300)).await.expect("poll").len();
        }
        assert_eq!(n, 8);
        producer.shutdown().await;
        consumer.shutdown().await;
    });
}

#[test]
fn reconsume_later_redelivers_and_consume_from_a_timestamp_skips_older_messages() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start(1, &["broker-a", "broker-b"]);
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, "RETRY_TS", 2).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-retry")).await.expect("producer");
        for i in 0..10 {
            producer.send(Message::new("RETRY_TS", format!("old-{i}"))).await.expect("send");
        }
        glommio::timer::sleep(Duration::from_millis(50)).await;
        let cut_ms = ringmq_client::msgid::now_ms();
        glommio::timer::sleep(Duration::from_millis(50)).await;
        for i in 0..10 {
            producer.send(Message::new("RETRY_TS", format!("new-{i}"))).await.expect("send");
        }
        // Every message is refused once, then accepted: each arrives twice, the second
        // time with reconsume_times = 1; the committed offsets end past all of them.
        let deliveries: Rc<RefCell<Vec<(String, i32)>>> = Rc::default();
        let mut config = push_config(&client, "cg-retry");
        config.consume_from = ConsumeFrom::Timestamp(cut_ms);
        let mut c = PushConsumer::new(config);
        c.subscribe("RETRY_TS", "*").expect("subscribe");
        let d = deliveries.clone();
        c.register_concurrently(move |msgs| {
            let mut d = d.borrow_mut();
            d.extend(msgs.iter().map(|m| (text(m), m.reconsume_times)));
            if msgs[0].reconsume_times == 0 {
                ConsumeStatus::ReconsumeLater
            } else {
                ConsumeStatus::Success
            }
        });
        c.start().await.expect("consumer");
        wait_until("20 deliveries", || deliveries.borrow().len() >= 20).await;
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let got = deliveries.borrow().clone();
        assert_eq!(got.len(), 20, "{got:?}");
        assert!(got.iter().all(|(b, _)| b.starts_with("new-")), "consume-from-timestamp skipped the older messages: {got:?}");
        for i in 0..10 {
            let body = format!("new-{i}");
            let mut times: Vec<i32> = got.iter().filter(|(b, _)| *b == body).map(|(_, t)| *t).collect();
            times.sort();
            assert_eq!(times, [0, 1], "{body}");
        }
        c.persist_offsets().await;
        let pull = PullConsumer::start(PullConsumerConfig::new(client.clone(), "cg-retry")).await.expect("pull");
        let mut committed = 0;
        for q in pull.fetch_queues("RETRY_TS").await.expect("queues") {
            committed += pull.committed(&q).await.expect("committed").expect("an offset");
        }
        assert_eq!(committed, 20, "offsets committed past every message once all succeeded");
        c.shutdown().await;
        pull.shutdown().await;
        producer.shutdown().await;
    });
}

/// Polls GET_BROKER_CLUSTER_INFO on `namesrv` until every name in `names` is listed.
fn wait_registered(namesrv: &str, names: &[&str]) {
    use ringmq_client::remoting::codes::request_code as rq;
    use ringmq_client::remoting::command::RemotingCommand;
    use ringmq_client::remoting::route::ClusterInfo;
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let listed = (|| -> Option<ClusterInfo> {
            let mut out = bytes::BytesMut::new();
            RemotingCommand::request(rq::GET_BROKER_CLUSTER_INFO).with_opaque(1).encode(&mut out).ok()?;
            let mut s = std::net::TcpStream::connect(namesrv).ok()?;
            s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
            s.write_all(&out).ok()?;
            let mut buf = bytes::BytesMut::new();
            let mut chunk = [0u8; 16 * 1024];
            loop {
                if let Some(r) = RemotingCommand::decode(&mut buf, &Default::default()).ok()? {
                    return ClusterInfo::decode(&r.body).ok();
                }
                let n = s.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        })();
        if listed.is_some_and(|c| names.iter().all(|n| c.broker_addr_table.contains_key(*n))) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "brokers {names:?} never registered with {namesrv}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
