//! Interop: an unmodified, independent RocketMQ remoting client — the crates.io package
//! `rocketmq-client-rust` — against a RingMQ cluster of our NameServer and one broker
//! (2 shards, sync flush), in both header encodings (JSON and ROCKETMQ binary; the
//! client picks one per `ClientRuntime` through its `RemotingCommandFactory`).
//!
//! Scenarios: producer (sync, async callback, oneway, batch; tags, keys, user
//! properties), lite-pull consumer in assign mode (every message read back intact;
//! offsets committed and queried on the broker), classic pull with a broker-side tag
//! filter, and a clustering push consumer subscribed to `TagA || TagB`.
//!
//! The client runs on its own Tokio runtime (a `RuntimeOwner` it requires), the broker
//! on its glommio shards and the NameServer on its own thread, all in this process.
//! Every wait is bounded. The NameServer is reached through a small observing proxy
//! that records the header encoding of each frame the client sends, so each test also
//! proves which encoding was on the wire.
//!
//! The broker has no listen-address setting (it binds every interface, as RocketMQ's
//! does); the tests connect to and advertise 127.0.0.1 only.

use bytes::BytesMut;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::runtime::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::{FrameLimits, SerializeType as RingSerializeType};
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultLitePullConsumer,
    DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, SendStatus, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_protocol::protocol::remoting_command_defaults::{RemotingCommandDefaults, RemotingCommandFactory};
use rocketmq_protocol::protocol::SerializeType;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Bound on any single wait for the cluster or the client.
const WAIT: Duration = Duration::from_secs(20);
const BROKER_NAME: &str = "broker-a";
const QUEUES: i32 = 4;

/// The client needs a Tokio runtime owner that outlives every client; dropping one
/// inside an async test would panic, so it lives for the whole process.
static CLIENT_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    RuntimeOwner::plan(RuntimeConfig { thread_name: "ringmq-interop-client".to_string(), ..Default::default() })
        .expect("client runtime configuration")
        .build()
        .expect("client runtime starts")
});

/// A client runtime whose every request uses `serialize_type` for its header.
fn client_runtime(scope: &'static str, serialize_type: SerializeType) -> Arc<ClientRuntime> {
    init_logging();
    let version = rocketmq_model::version::CURRENT_VERSION as i32;
    ClientRuntime::try_new_with_remoting_command_factory(
        CLIENT_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
        RemotingCommandFactory::new(RemotingCommandDefaults::new(version, serialize_type)),
    )
    .expect("client runtime")
}

/// `RINGMQ_TEST_LOG=debug` (an `EnvFilter`) shows the client's and broker's logs.
fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("RINGMQ_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_test_writer().try_init();
        }
    });
}

// ---------------------------------------------------------------------------------
// The cluster.

/// A TCP proxy on 127.0.0.1 that records the serialize type (the top byte of each
/// frame's second word) of every frame a client sends through it.
struct ObservingProxy {
    addr: SocketAddr,
    seen: Arc<Mutex<HashSet<u8>>>,
    stop: Arc<AtomicBool>,
}

impl ObservingProxy {
    fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy binds");
        listener.set_nonblocking(true).expect("nonblocking listener");
        let addr = listener.local_addr().expect("proxy address");
        let seen = Arc::new(Mutex::new(HashSet::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let Ok(server) = TcpStream::connect(upstream) else { continue };
                        let _ = client.set_nonblocking(false);
                        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { continue };
                        let seen = seen2.clone();
                        std::thread::spawn(move || observe_frames(client, server, seen));
                        std::thread::spawn(move || {
                            let (mut from, mut to) = (s2, c2);
                            let _ = std::io::copy(&mut from, &mut to);
                            let _ = to.shutdown(std::net::Shutdown::Both);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Self { addr, seen, stop }
    }

    fn seen(&self) -> HashSet<u8> {
        self.seen.lock().expect("proxy set").clone()
    }
}

impl Drop for ObservingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies client → server, parsing frame boundaries on the way.
fn observe_frames(mut from: TcpStream, mut to: TcpStream, seen: Arc<Mutex<HashSet<u8>>>) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&chunk[..n]).is_err() {
            break;
        }
        pending.extend_from_slice(&chunk[..n]);
        while pending.len() >= 8 {
            let len = u32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
            if pending.len() < 4 + len {
                break;
            }
            seen.lock().expect("proxy set").insert(pending[4]);
            pending.drain(..4 + len);
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

struct Cluster {
    broker: Option<BrokerHandle>,
    namesrv: Option<namesrv::server::ServerHandle>,
    proxy: ObservingProxy,
    _root: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let mut ns_config = namesrv::config::ServerConfig::default();
        ns_config.listen = "127.0.0.1:0".parse().expect("address");
        let namesrv = namesrv::server::spawn(ns_config).expect("namesrv starts");
        let ns_addr = namesrv.local_addr();
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp store");
        let mut config = BrokerConfig::default();
        config.store_root = root.path().to_path_buf();
        config.listen_port = 0; // the broker picks a free port; its handle says which
        config.shard_count = 2;
        config.broker_ip = Some("127.0.0.1".into());
        config.broker_name = BROKER_NAME.into();
        config.namesrv_addrs = vec![ns_addr.to_string()];
        config.register_interval_ms = 1_000;
        config.auto_create_topic = false;
        // This client's shutdown waits for its suspended pulls: answer them sooner.
        config.pull_suspend_max_ms = 2_000;
        config.store.flush_mode = FlushMode::Sync;
        config.store.segment_bytes = 8 * 1024 * 1024;
        config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
        config.store.dirty_bytes_max = 8 * 1024 * 1024;
        let broker = runtime::start(config).expect("broker starts");
        let proxy = ObservingProxy::start(ns_addr);
        Self { broker: Some(broker), namesrv: Some(namesrv), proxy, _root: root }
    }

    /// The NameServer address clients are given (through the observing proxy).
    fn namesrv_addr(&self) -> String {
        self.proxy.addr.to_string()
    }

    fn broker_addr(&self) -> SocketAddr {
        let port = self.broker.as_ref().expect("broker").addr.port();
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Creates `topic` through the broker's UPDATE_AND_CREATE_TOPIC request.
    fn create_topic(&self, topic: &str, queues: i32) {
        let r = raw_call(
            self.broker_addr(),
            RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
                .with_ext("topic", topic)
                .with_ext("defaultTopic", "TBW102")
                .with_ext("readQueueNums", queues.to_string())
                .with_ext("writeQueueNums", queues.to_string())
                .with_ext("perm", "6")
                .with_ext("topicFilterType", "SINGLE_TAG"),
        );
        assert_eq!(r.code, rs::SUCCESS, "create topic: {:?}", r.remark);
        // As with Java's broker, the NameServer has the route by the time the broker
        // answers: no wait for the next periodic registration.
        let ns = self.namesrv.as_ref().expect("namesrv").local_addr();
        let r = raw_call(ns, RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic));
        assert_eq!(r.code, rs::SUCCESS, "route right after creation: {:?}", r.remark);
    }

    /// The offset the broker holds for (group, topic, queue), read with a raw request.
    fn broker_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let r = raw_call(
            self.broker_addr(),
            RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET)
                .with_ext("consumerGroup", group)
                .with_ext("topic", topic)
                .with_ext("queueId", queue_id.to_string())
                .with_ext("setZeroIfNotFound", "false"),
        );
        (r.code == rs::SUCCESS).then(|| r.ext("offset").and_then(|o| o.parse().ok())).flatten()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            broker.stop();
            broker.join();
        }
        if let Some(namesrv) = self.namesrv.take() {
            namesrv.stop();
        }
    }
}

/// One request over a fresh connection, answered within [`WAIT`].
fn raw_call(addr: SocketAddr, mut cmd: RemotingCommand) -> RemotingCommand {
    let mut stream = TcpStream::connect(addr).expect("connect to broker");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    cmd.opaque = 1;
    cmd.serialize_type = RingSerializeType::Json;
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("encode");
    stream.write_all(&out).expect("write request");
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).expect("decode response") {
            if r.is_response() && r.opaque == 1 {
                return r;
            }
            continue;
        }
        let n = stream.read(&mut chunk).expect("read response");
        assert!(n > 0, "broker closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

// ---------------------------------------------------------------------------------
// Messages.

/// What a test sent and expects to read back, keyed by body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    tag: String,
    keys: Vec<String>,
    props: BTreeMap<String, String>,
}

fn build(topic: &str, body: &str, expected: &Expected) -> Message {
    let mut builder = Message::builder().topic(topic).tags(expected.tag.as_str()).keys(expected.keys.clone()).body_slice(body.as_bytes());
    for (k, v) in &expected.props {
        builder = builder.raw_property(k.as_str(), v.as_str()).expect("user property");
    }
    builder.build().expect("message")
}

fn expected(i: usize, tag: &str) -> Expected {
    Expected {
        tag: tag.to_string(),
        keys: vec![format!("key-{i}"), format!("order-{}", i % 3)],
        props: BTreeMap::from([
            ("color".to_string(), if i % 2 == 0 { "red" } else { "blue" }.to_string()),
            ("seq".to_string(), i.to_string()),
            ("note".to_string(), format!("héllo wörld {i} = ok")),
        ]),
    }
}

fn property(msg: &MessageExt, name: &str) -> Option<String> {
    msg.get_properties().iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v.to_string())
}

/// Checks a consumed message against what was sent: body, tag, keys, user properties.
fn check_message(msg: &MessageExt, topic: &str, sent: &HashMap<String, Expected>) -> String {
    let body = String::from_utf8(msg.body().expect("a body").to_vec()).expect("utf-8 body");
    let want = sent.get(&body).unwrap_or_else(|| panic!("unexpected message {body:?}"));
    assert_eq!(msg.topic().as_str(), topic);
    assert_eq!(msg.tags().map(|t| t.to_string()).as_deref(), Some(want.tag.as_str()), "tag of {body}");
    let keys: Vec<String> = msg.get_keys().map(|k| k.as_str().split(' ').map(str::to_string).collect()).unwrap_or_default();
    assert_eq!(keys, want.keys, "keys of {body}");
    for (k, v) in &want.props {
        assert_eq!(property(msg, k).as_deref(), Some(v.as_str()), "property {k} of {body}");
    }
    assert!(property(msg, "UNIQ_KEY").is_some_and(|id| id.len() == 32), "client message id of {body}");
    assert_eq!(msg.born_host().ip(), std::net::IpAddr::from([127, 0, 0, 1]), "born host of {body}");
    assert_eq!(msg.store_host().ip(), std::net::IpAddr::from([127, 0, 0, 1]), "store host of {body}");
    body
}

async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap_or_else(|_| panic!("{what} did not finish within {WAIT:?}"))
}

/// Waits until the NameServer serves `topic`'s route with all its queues.
async fn await_route(producer: &mut DefaultMQProducer, topic: &str) -> Vec<MessageQueue> {
    let deadline = Instant::now() + WAIT;
    loop {
        let last = producer.fetch_publish_message_queues(topic).await;
        if let Ok(queues) = &last {
            if queues.len() == QUEUES as usize {
                return queues.clone();
            }
        }
        assert!(Instant::now() < deadline, "route of {topic} not served within {WAIT:?}: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------------------------
// Scenarios.

/// Producer (sync, async, oneway, batch) then lite-pull (assign mode) read-back with
/// offsets committed and queried, then a classic pull with a broker-side tag filter.
async fn produce_and_pull(serialize_type: SerializeType, label: &'static str) {
    let cluster = Cluster::start();
    let topic = format!("InteropPull{label}");
    cluster.create_topic(&topic, QUEUES);

    let mut producer = DefaultMQProducer::builder(client_runtime("producer", serialize_type))
        .producer_group(format!("PG-{label}"))
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    await_route(&mut producer, &topic).await;

    let mut sent: HashMap<String, Expected> = HashMap::new();
    let mut next_offset: HashMap<i32, u64> = HashMap::new();
    let mut i = 0usize;

    // Sync sends: status, ids and per-queue offsets.
    for _ in 0..8 {
        let want = expected(i, if i % 2 == 0 { "TagA" } else { "TagB" });
        let body = format!("sync {i}");
        let r = bounded("sync send", producer.send_with_timeout(build(&topic, &body, &want), 5_000))
            .await
            .expect("sync send")
            .expect("a send result");
        assert_eq!(r.send_status, SendStatus::SendOk);
        assert!(r.msg_id.as_ref().is_some_and(|id| id.len() == 32), "msg id {:?}", r.msg_id);
        let offset_id = r.offset_msg_id.clone().expect("offsetMsgId");
        assert!(offset_id.len() == 32 && offset_id.starts_with("7F000001"), "offsetMsgId {offset_id}");
        let mq = r.message_queue.clone().expect("message queue");
        assert_eq!(mq.topic().as_str(), topic);
        assert_eq!(mq.broker_name().as_str(), BROKER_NAME);
        let next = next_offset.entry(mq.queue_id()).or_default();
        assert_eq!(r.queue_offset, *next, "queue offset on queue {}", mq.queue_id());
        *next += 1;
        sent.insert(body, want);
        i += 1;
    }
    assert!(next_offset.len() > 1, "sends spread over queues: {next_offset:?}");

    // Async sends: every callback reports success.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..4 {
        let want = expected(i, "TagA");
        let body = format!("async {i}");
        let tx = tx.clone();
        producer
            .send_with_callback_timeout(
                build(&topic, &body, &want),
                move |result, error| {
                    let outcome = match (result, error) {
                        (Some(r), None) => Ok((r.send_status, r.msg_id.as_ref().map(|id| id.to_string()))),
                        (_, e) => Err(format!("{e:?}")),
                    };
                    let _ = tx.send(outcome);
                },
                5_000,
            )
            .await
            .expect("async send accepted");
        sent.insert(body, want);
        i += 1;
    }
    for _ in 0..4 {
        let outcome = bounded("async callback", rx.recv()).await.expect("a callback");
        let (status, id) = outcome.expect("async send succeeded");
        assert_eq!(status, SendStatus::SendOk);
        assert!(id.is_some_and(|id| id.len() == 32));
    }

    // Oneway sends: no answer; they show up when pulled.
    for _ in 0..2 {
        let want = expected(i, "TagB");
        let body = format!("oneway {i}");
        bounded("oneway send", producer.send_oneway(build(&topic, &body, &want))).await.expect("oneway send");
        sent.insert(body, want);
        i += 1;
    }

    // A batch: one request, three messages, one id per message.
    let mut batch = Vec::new();
    for _ in 0..3 {
        let want = expected(i, "TagC");
        let body = format!("batch {i}");
        batch.push(build(&topic, &body, &want));
        sent.insert(body, want);
        i += 1;
    }
    let r = bounded("batch send", producer.send_batch(batch)).await.expect("batch send");
    assert_eq!(r.send_status, SendStatus::SendOk);
    let ids = r.msg_id.clone().expect("batch ids");
    assert_eq!(ids.as_str().split(',').count(), 3, "one id per batched message: {ids}");
    producer.shutdown().await;

    // Lite pull, assign mode: every message back, intact.
    let group = format!("CG-{label}");
    let consumer = DefaultLitePullConsumer::builder(client_runtime("lite-pull", serialize_type))
        .consumer_group(group.as_str())
        .name_server_addr(cluster.namesrv_addr())
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        // The client's shutdown waits for its suspended pulls: keep them short.
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .auto_commit(false)
        .build()
        .expect("lite pull consumer");
    consumer.set_sub_expression_for_assign(&topic, "*").await.expect("sub expression");
    bounded("lite pull start", consumer.start()).await.expect("lite pull starts");
    let queues = bounded("fetch queues", consumer.fetch_message_queues(&topic)).await.expect("queues");
    assert_eq!(queues.len(), QUEUES as usize);
    consumer.assign(queues.clone()).await.expect("assign");
    for q in &queues {
        consumer.seek(q, 0).await.expect("seek to 0");
    }
    let mut got: HashMap<String, (i32, i64)> = HashMap::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < sent.len() {
        assert!(Instant::now() < deadline, "read back {} of {} messages: missing {:?}", got.len(), sent.len(), {
            let mut missing: Vec<_> = sent.keys().filter(|b| !got.contains_key(*b)).collect();
            missing.sort();
            missing
        });
        for msg in consumer.poll_with_timeout(500).await {
            let body = check_message(&msg, &topic, &sent);
            assert!(got.insert(body.clone(), (msg.queue_id(), msg.queue_offset())).is_none(), "{body} delivered twice");
        }
    }
    // Per queue, offsets 0..n with no gap.
    let mut per_queue: HashMap<i32, Vec<i64>> = HashMap::new();
    for (q, offset) in got.values() {
        per_queue.entry(*q).or_default().push(*offset);
    }
    for (q, offsets) in &mut per_queue {
        offsets.sort_unstable();
        assert_eq!(*offsets, (0..offsets.len() as i64).collect::<Vec<_>>(), "offsets of queue {q}");
    }

    // Commit the next offset of every queue; the broker holds it, the client reads it back.
    let commit: HashMap<MessageQueue, i64> =
        queues.iter().map(|q| (q.clone(), per_queue.get(&q.queue_id()).map_or(0, |o| o.len() as i64))).collect();
    consumer.commit_sync_with_map(commit.clone(), true).await;
    for (q, offset) in &commit {
        let deadline = Instant::now() + WAIT;
        while cluster.broker_offset(&group, &topic, q.queue_id()) != Some(*offset) {
            assert!(Instant::now() < deadline, "broker offset of queue {} not {offset}", q.queue_id());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(bounded("committed", consumer.committed(q)).await.expect("committed"), *offset);
        assert_eq!(bounded("max offset", consumer.max_offset(q)).await.expect("max offset"), *offset);
        assert_eq!(bounded("min offset", consumer.min_offset(q)).await.expect("min offset"), 0);
    }
    consumer.shutdown().await;

    // Classic pull with a tag expression: the broker filters.
    #[allow(deprecated)]
    let pull = rocketmq_client_rust::DefaultMQPullConsumer::builder(client_runtime("classic-pull", serialize_type))
        .consumer_group(format!("CG2-{label}"))
        .name_server_addr(cluster.namesrv_addr())
        .consumer_pull_timeout(Duration::from_secs(5))
        .broker_suspend_max_time(Duration::from_secs(1))
        .consumer_timeout_when_suspend(Duration::from_secs(3))
        .build()
        .expect("pull consumer");
    bounded("pull start", pull.start()).await.expect("pull consumer starts");
    let mut matched = 0;
    for q in &queues {
        let r = bounded("pull", pull.pull(q, "TagA || TagC", 0, 32)).await.expect("pull");
        for msg in r.msg_found_list().unwrap_or_default() {
            check_message(msg, &topic, &sent);
            let t = msg.tags().expect("tag").to_string();
            assert!(t == "TagA" || t == "TagC", "filtered by tag: {t}");
            matched += 1;
        }
        assert_eq!(r.next_begin_offset(), commit[q] as u64, "next offset past filtered messages");
    }
    let want_a = sent.values().filter(|e| e.tag == "TagA" || e.tag == "TagC").count();
    assert_eq!(matched, want_a, "every TagA/TagC message, nothing else");
    pull.shutdown().await.expect("pull shutdown");

    let seen = cluster.proxy.seen();
    let code = match serialize_type {
        SerializeType::JSON => 0,
        SerializeType::ROCKETMQ => 1,
    };
    assert_eq!(seen, HashSet::from([code]), "header encodings the client sent to the NameServer");
}

/// A clustering push consumer subscribed to `TagA || TagB` gets exactly those.
async fn push_with_tag_subscription(serialize_type: SerializeType, label: &'static str) {
    let cluster = Cluster::start();
    let topic = format!("InteropPush{label}");
    cluster.create_topic(&topic, QUEUES);
    let group = format!("PushCG-{label}");

    let mut producer = DefaultMQProducer::builder(client_runtime("push-producer", serialize_type))
        .producer_group(format!("PushPG-{label}"))
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    await_route(&mut producer, &topic).await;

    let received: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime("push", serialize_type))
        .consumer_group(group.as_str())
        .name_server_addr(cluster.namesrv_addr())
        .message_model(MessageModel::Clustering)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(2)
        .pull_batch_size(8)
        .build();
    consumer.subscribe(topic.as_str(), "TagA || TagB").await.expect("subscribe");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        let mut sink = sink.lock().expect("sink");
        for msg in msgs {
            let body = String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string();
            sink.push((msg.tags().map(|t| t.to_string()).unwrap_or_default(), body));
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts");

    let mut want = Vec::new();
    for i in 0..12 {
        let t = ["TagA", "TagB", "TagC"][i % 3];
        let body = format!("push {i}");
        let msg = Message::builder().topic(topic.as_str()).tags(t).body_slice(body.as_bytes()).build().expect("message");
        let r = bounded("send", producer.send_with_timeout(msg, 5_000)).await.expect("send").expect("result");
        assert_eq!(r.send_status, SendStatus::SendOk);
        if t != "TagC" {
            want.push((t.to_string(), body));
        }
    }
    producer.shutdown().await;

    let deadline = Instant::now() + WAIT;
    while received.lock().expect("sink").len() < want.len() {
        assert!(Instant::now() < deadline, "push consumer got {:?} of {want:?}", received.lock().expect("sink"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Nothing else arrives (a TagC message, or a duplicate).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut got = received.lock().expect("sink").clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "exactly the TagA and TagB messages");

    // The consumer's offsets reach the broker, past every message: a filtered message
    // at a queue's end is passed once an empty pull answers with the next offset.
    let deadline = Instant::now() + WAIT;
    loop {
        let total: i64 = (0..QUEUES).map(|q| cluster.broker_offset(&group, &topic, q).unwrap_or(0)).sum();
        if total == 12 {
            break;
        }
        assert!(Instant::now() < deadline, "committed offsets sum to {total}, not 12");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bounded("push consumer shutdown", consumer.shutdown()).await;

    let code = match serialize_type {
        SerializeType::JSON => 0,
        SerializeType::ROCKETMQ => 1,
    };
    assert_eq!(cluster.proxy.seen(), HashSet::from([code]), "header encodings the client sent to the NameServer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_produce_and_pull() {
    produce_and_pull(SerializeType::JSON, "Json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_headers_produce_and_pull() {
    produce_and_pull(SerializeType::ROCKETMQ, "Bin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_push_consumer_tag_subscription() {
    push_with_tag_subscription(SerializeType::JSON, "Json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_headers_push_consumer_tag_subscription() {
    push_with_tag_subscription(SerializeType::ROCKETMQ, "Bin").await;
}

// ---------------------------------------------------------------------------------
// Both clients on one two-broker cluster.

/// Runs `f` on a glommio executor thread (the RingMQ client's runtime) and waits.
fn on_glommio<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("ringmq-client")
        .spawn(move || async move { f().await })
        .expect("executor starts")
        .join()
        .expect("RingMQ client side")
}

/// The RocketMQ client and the RingMQ client produce to and consume from the same
/// cluster of one NameServer and two brokers: each reads what the other sent, with
/// tags, keys, properties and message ids intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ringmq_and_rocketmq_clients_share_a_two_broker_cluster() {
    init_logging();
    let mut ns_config = namesrv::config::ServerConfig::default();
    ns_config.listen = "127.0.0.1:0".parse().expect("address");
    let namesrv = namesrv::server::spawn(ns_config).expect("namesrv starts");
    let ns_addr = namesrv.local_addr().to_string();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp store");
    let mut brokers = Vec::new();
    for name in ["broker-a", "broker-b"] {
        let mut config = BrokerConfig::default();
        config.store_root = root.path().join(name);
        config.listen_port = 0; // the broker picks a free port; its handle says which
        config.shard_count = 1;
        config.broker_ip = Some("127.0.0.1".into());
        config.broker_name = name.into();
        config.namesrv_addrs = vec![ns_addr.clone()];
        config.register_interval_ms = 1_000;
        config.pull_suspend_max_ms = 1_000;
        config.store.segment_bytes = 8 * 1024 * 1024;
        config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
        config.store.dirty_bytes_max = 8 * 1024 * 1024;
        brokers.push(runtime::start(config).expect("broker starts"));
    }
    let topic = "InteropBoth";
    let ringmq_client = {
        let mut c = ringmq_client::ClientConfig::new([ns_addr.clone()]);
        c.client_ip = Some("127.0.0.1".parse().expect("ip"));
        c
    };
    {
        let c = ringmq_client.clone();
        tokio::task::spawn_blocking(move || {
            on_glommio(move || async move {
                let admin = ringmq_client::ClientInstance::start(c).expect("admin");
                let masters = ringmq_client::admin::create_topic_on_cluster(&admin, None, topic, QUEUES).await.expect("topic");
                assert_eq!(masters.len(), 2);
                admin.shutdown().await;
            })
        })
        .await
        .expect("topic creation");
    }

    // 1. The RocketMQ producer sends 16 messages.
    let mut sent: HashMap<String, Expected> = HashMap::new();
    let mut producer = DefaultMQProducer::builder(client_runtime("both-producer", SerializeType::JSON))
        .producer_group("PG-both")
        .name_server_addr(ns_addr.clone())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    let deadline = Instant::now() + WAIT;
    while producer.fetch_publish_message_queues(topic).await.map(|q| q.len()).unwrap_or(0) != 2 * QUEUES as usize {
        assert!(Instant::now() < deadline, "route of both brokers");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 0..16 {
        let want = expected(i, if i % 2 == 0 { "TagA" } else { "TagB" });
        let body = format!("from-rocketmq {i}");
        let r = bounded("send", producer.send_with_timeout(build(topic, &body, &want), 5_000)).await.expect("send").expect("result");
        assert_eq!(r.send_status, SendStatus::SendOk);
        sent.insert(body, want);
    }
    producer.shutdown().await;

    // 2. The RingMQ client reads them back and sends 16 of its own.
    let rocketmq_sent = sent.clone();
    let c = ringmq_client.clone();
    let ringmq_sent: HashMap<String, (String, String)> = tokio::task::spawn_blocking(move || {
        on_glommio(move || async move {
            use ringmq_client::consumer::{ConsumeFrom, PullConsumer, PullConsumerConfig};
            let mut pc = PullConsumerConfig::new(c.clone(), "CG-ringmq-reads");
            pc.consume_from = ConsumeFrom::FirstOffset;
            let consumer = PullConsumer::start(pc).await.expect("RingMQ pull consumer");
            let queues = consumer.fetch_queues(topic).await.expect("queues");
            assert_eq!(queues.len(), 2 * QUEUES as usize);
            consumer.assign(&queues, "*").await.expect("assign");
            let mut got = HashSet::new();
            let deadline = Instant::now() + WAIT;
            while got.len() < rocketmq_sent.len() {
                assert!(Instant::now() < deadline, "RingMQ read {} of {}", got.len(), rocketmq_sent.len());
                for m in consumer.poll(Duration::from_millis(300)).await.expect("poll") {
                    let body = String::from_utf8(m.body.to_vec()).expect("utf-8");
                    let want = &rocketmq_sent[&body];
                    assert_eq!(m.tags(), Some(want.tag.as_str()), "{body}");
                    assert_eq!(m.keys().map(str::to_string).collect::<Vec<_>>(), want.keys, "{body}");
                    for (k, v) in &want.props {
                        assert_eq!(m.property(k), Some(v.as_str()), "{k} of {body}");
                    }
                    assert_eq!(m.msg_id.len(), 32, "the RocketMQ client's UNIQ_KEY");
                    assert!(got.insert(body));
                }
            }
            consumer.shutdown().await;
            let producer = ringmq_client::producer::Producer::start(ringmq_client::producer::ProducerConfig::new(c, "PG-ringmq"))
                .await
                .expect("RingMQ producer");
            let mut mine = HashMap::new();
            for i in 0..16 {
                let body = format!("from-ringmq {i}");
                let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
                let msg = ringmq_client::Message::new(topic, body.clone()).with_tags(tag).expect("tag").with_keys([format!("key-{i}").as_str()]).expect("keys");
                let r = if i < 8 { producer.send(msg).await } else { producer.send_ordered(msg, "order-1").await }.expect("RingMQ send");
                mine.insert(body, (r.msg_id, tag.to_string()));
            }
            producer.shutdown().await;
            mine
        })
    })
    .await
    .expect("RingMQ side");

    // 3. The RocketMQ lite-pull consumer reads the RingMQ client's messages.
    let consumer = DefaultLitePullConsumer::builder(client_runtime("both-lite-pull", SerializeType::JSON))
        .consumer_group("CG-rocketmq-reads")
        .name_server_addr(ns_addr.clone())
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .auto_commit(false)
        .build()
        .expect("lite pull consumer");
    consumer.set_sub_expression_for_assign(topic, "*").await.expect("sub expression");
    bounded("lite pull start", consumer.start()).await.expect("lite pull starts");
    let queues = bounded("fetch queues", consumer.fetch_message_queues(topic)).await.expect("queues");
    assert_eq!(queues.len(), 2 * QUEUES as usize);
    consumer.assign(queues.clone()).await.expect("assign");
    for q in &queues {
        consumer.seek(q, 0).await.expect("seek to 0");
    }
    let mut got = HashSet::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < sent.len() + ringmq_sent.len() {
        assert!(Instant::now() < deadline, "RocketMQ read {} of {}", got.len(), sent.len() + ringmq_sent.len());
        for msg in consumer.poll_with_timeout(500).await {
            let body = String::from_utf8(msg.body().expect("a body").to_vec()).expect("utf-8");
            if let Some((id, tag)) = ringmq_sent.get(&body) {
                assert_eq!(property(&msg, "UNIQ_KEY").as_deref(), Some(id.as_str()), "RingMQ's id of {body}");
                assert_eq!(msg.tags().map(|t| t.to_string()).as_deref(), Some(tag.as_str()));
                assert_eq!(msg.born_host().ip(), std::net::IpAddr::from([127, 0, 0, 1]));
            } else {
                check_message(&msg, topic, &sent);
            }
            assert!(got.insert(body.clone()), "{body} twice");
        }
    }
    consumer.shutdown().await;
    for b in brokers {
        b.stop();
        b.join();
    }
    namesrv.stop();
}
