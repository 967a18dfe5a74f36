//! Interop: an unmodified, independent RocketMQ remoting client — the crates.io package
//! `rocketmq-client-rust` — against a RingMQ cluster of our NameServer and one broker
//! (2 shards, sync flush), in both header encodings (JSON and ROCKETMQ binary; the
//! client picks one per `ClientRuntime` through its `RemotingCommandFactory`).
//!
//! Scenarios: producer (sync, async callback, oneway, batch; tags, keys, user
//! properties), lite-pull consumer in assign mode (every message read back intact;
//! offsets committed and queried on the broker), classic pull with a broker-side tag
//! filter, and a clustering push consumer subscribed to `TagA || TagB`; then both
//! clients, the RocketMQ one and ours, on one cluster of two brokers.
//!
//! The client runs on its own Tokio runtime (a `RuntimeOwner` it requires), the broker
//! on its glommio shards and the NameServer on its own thread, all in this process.
//! Every wait is bounded. The cluster is `common_interop`'s with clients reaching the
//! broker directly (`BrokerPath::Direct`) and the NameServer through a recording proxy,
//! so each test also proves which header encoding was on the wire.
//!
//! Owns: the scenarios, and what they sent and expect back (`Expected`, `check_message`).

mod common_interop;

use common_interop::{
    bounded, broker_config, client_runtime, init_logging, label_of, on_glommio, property, push_consumer, raw_call, serialize_code,
    start_lite_pull_from_start, start_namesrv, start_producer, start_pull_consumer, test_both_encodings, BrokerPath, Cluster,
    QUEUES,
};
use ringmq_broker::launch;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use rocketmq_client_rust::{ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer, MQPushConsumer, SendStatus};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use ringmq_broker::config::RouteMode;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------
// The cluster: this test's own request.

impl Cluster {
    /// The offset the broker holds for (group, topic, queue), read with a raw request.
    fn broker_offset(&self, group: &str, topic: &str, broker: &str, queue_id: i32) -> Option<i64> {
        let r = raw_call(
            self.addr_of(broker),
            RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET)
                .with_ext("consumerGroup", group)
                .with_ext("topic", topic)
                .with_ext("queueId", queue_id.to_string())
                .with_ext("setZeroIfNotFound", "false"),
        );
        (r.code == rs::SUCCESS).then(|| r.ext("offset").and_then(|o| o.parse().ok())).flatten()
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
            ("color".to_string(), if i.is_multiple_of(2) { "red" } else { "blue" }.to_string()),
            ("seq".to_string(), i.to_string()),
            ("note".to_string(), format!("héllo wörld {i} = ok")),
        ]),
    }
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

// ---------------------------------------------------------------------------------
// Scenarios.

/// Producer (sync, async, oneway, batch) then lite-pull (assign mode) read-back with
/// offsets committed and queried, then a classic pull with a broker-side tag filter.
async fn produce_and_pull(serialize_type: SerializeType) {
    produce_and_pull_in(serialize_type, RouteMode::Host).await;
}

/// Every send kind, lite and classic pull, offsets — through a 2-shard broker in
/// `route_mode` (shard mode: two shard-brokers, each queue reached on its own shard).
async fn produce_and_pull_in(serialize_type: SerializeType, route_mode: RouteMode) {
    let label = label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, |c| c.route_mode = route_mode);
    let brokers = cluster.broker_names();
    let topic = format!("InteropPull{label}");
    cluster.create_routed_topic(&topic, QUEUES);

    let mut producer = start_producer(&cluster, serialize_type, "producer", format!("PG-{label}"), &topic).await;

    let mut sent: HashMap<String, Expected> = HashMap::new();
    let mut next_offset: HashMap<(String, i32), u64> = HashMap::new();
    let mut i = 0usize;

    // Sync sends: status, ids and per-queue offsets.
    for _ in 0..8 {
        let want = expected(i, if i.is_multiple_of(2) { "TagA" } else { "TagB" });
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
        assert!(brokers.contains(&mq.broker_name().to_string()), "broker {} of {brokers:?}", mq.broker_name());
        let next = next_offset.entry((mq.broker_name().to_string(), mq.queue_id())).or_default();
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
    let (consumer, queues) = start_lite_pull_from_start(cluster.namesrv_addr(), serialize_type, "lite-pull", &group, &topic).await;
    assert_eq!(queues.len(), QUEUES as usize * brokers.len());
    let mut got: HashMap<String, ((String, i32), i64)> = HashMap::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < sent.len() {
        assert!(Instant::now() < deadline, "read back {} of {} messages: missing {:?}", got.len(), sent.len(), {
            let mut missing: Vec<_> = sent.keys().filter(|b| !got.contains_key(*b)).collect();
            missing.sort();
            missing
        });
        for msg in consumer.poll_with_timeout(500).await {
            let body = check_message(&msg, &topic, &sent);
            assert!(got.insert(body.clone(), ((msg.broker_name().to_string(), msg.queue_id()), msg.queue_offset())).is_none(), "{body} delivered twice");
        }
    }
    // Per queue, offsets 0..n with no gap.
    let mut per_queue: HashMap<(String, i32), Vec<i64>> = HashMap::new();
    for (q, offset) in got.values() {
        per_queue.entry(q.clone()).or_default().push(*offset);
    }
    for (q, offsets) in &mut per_queue {
        offsets.sort_unstable();
        assert_eq!(*offsets, (0..offsets.len() as i64).collect::<Vec<_>>(), "offsets of queue {q:?}");
    }

    // Commit the next offset of every queue; the broker holds it, the client reads it back.
    let commit: HashMap<MessageQueue, i64> =
        queues.iter().map(|q| (q.clone(), per_queue.get(&(q.broker_name().to_string(), q.queue_id())).map_or(0, |o| o.len() as i64))).collect();
    consumer.commit_sync_with_map(commit.clone(), true).await;
    for (q, offset) in &commit {
        let deadline = Instant::now() + WAIT;
        while cluster.broker_offset(&group, &topic, q.broker_name(), q.queue_id()) != Some(*offset) {
            assert!(Instant::now() < deadline, "broker offset of queue {} not {offset}", q.queue_id());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(bounded("committed", consumer.committed(q)).await.expect("committed"), *offset);
        assert_eq!(bounded("max offset", consumer.max_offset(q)).await.expect("max offset"), *offset);
        assert_eq!(bounded("min offset", consumer.min_offset(q)).await.expect("min offset"), 0);
    }
    consumer.shutdown().await;

    // Classic pull with a tag expression: the broker filters.
    let pull = start_pull_consumer(&cluster, serialize_type, "classic-pull", format!("CG2-{label}")).await;
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

    assert_eq!(cluster.encodings_seen(), [serialize_code(serialize_type)], "header encodings the client sent to the NameServer");
}

/// A clustering push consumer subscribed to `TagA || TagB` gets exactly those.
async fn push_with_tag_subscription(serialize_type: SerializeType) {
    push_with_tag_subscription_in(serialize_type, RouteMode::Host).await;
}

async fn push_with_tag_subscription_in(serialize_type: SerializeType, route_mode: RouteMode) {
    let label = label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, |c| c.route_mode = route_mode);
    let brokers = cluster.broker_names();
    let topic = format!("InteropPush{label}");
    cluster.create_routed_topic(&topic, QUEUES);
    let group = format!("PushCG-{label}");

    let mut producer = start_producer(&cluster, serialize_type, "push-producer", format!("PushPG-{label}"), &topic).await;

    let received: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let mut consumer = push_consumer(&cluster, serialize_type, "push", &group).build();
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
        let total: i64 =
            brokers.iter().flat_map(|b| (0..QUEUES).map(move |q| (b, q))).map(|(b, q)| cluster.broker_offset(&group, &topic, b, q).unwrap_or(0)).sum();
        if total == 12 {
            break;
        }
        assert!(Instant::now() < deadline, "committed offsets sum to {total}, not 12");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bounded("push consumer shutdown", consumer.shutdown()).await;

    assert_eq!(cluster.encodings_seen(), [serialize_code(serialize_type)], "header encodings the client sent to the NameServer");
}

/// A clustering push consumer with `MessageSelector::by_sql` (rocketmq-client-rust,
/// unmodified) on a broker with `enablePropertyFilter=true`: its start asks
/// CHECK_CLIENT_CONFIG, its heartbeat carries the SQL92 subscription, and it receives
/// exactly the messages the expression selects over their properties.
async fn push_with_sql92_subscription(serialize_type: SerializeType) {
    let label = label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, |c| c.enable_property_filter = true);
    let topic = format!("InteropSql{label}");
    cluster.create_routed_topic(&topic, QUEUES);
    let group = format!("SqlCG-{label}");

    let mut producer = start_producer(&cluster, serialize_type, "sql-producer", format!("SqlPG-{label}"), &topic).await;

    let received: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let mut consumer = push_consumer(&cluster, serialize_type, "sql", &group).build();
    let selector = rocketmq_client_rust::MessageSelector::by_sql("TAGS IN ('TagA', 'TagB') AND n >= 6");
    consumer.subscribe_with_selector(topic.as_str(), Some(selector)).await.expect("subscribe by SQL92");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        let mut sink = sink.lock().expect("sink");
        for msg in msgs {
            sink.push(String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string());
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts (CHECK_CLIENT_CONFIG answered SUCCESS)");

    let mut want = Vec::new();
    for i in 0..18 {
        let t = ["TagA", "TagB", "TagC"][i % 3];
        let body = format!("sql {i}");
        let msg = Message::builder()
            .topic(topic.as_str())
            .tags(t)
            .body_slice(body.as_bytes())
            .raw_property("n", i.to_string())
            .expect("property n")
            .build()
            .expect("message");
        let r = bounded("send", producer.send_with_timeout(msg, 5_000)).await.expect("send").expect("result");
        assert_eq!(r.send_status, SendStatus::SendOk);
        if t != "TagC" && i >= 6 {
            want.push(body);
        }
    }
    producer.shutdown().await;

    let deadline = Instant::now() + WAIT;
    while received.lock().expect("sink").len() < want.len() {
        assert!(Instant::now() < deadline, "SQL92 push consumer got {:?} of {want:?}", received.lock().expect("sink"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Nothing else arrives (an unselected message, or a duplicate).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut got = received.lock().expect("sink").clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "exactly the messages `TAGS IN ('TagA', 'TagB') AND n >= 6` selects");
    bounded("push consumer shutdown", consumer.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_push_consumer_sql92_subscription() {
    push_with_sql92_subscription(SerializeType::JSON).await;
}

test_both_encodings!(json_headers_produce_and_pull, binary_headers_produce_and_pull, produce_and_pull);
/// Ordered messages: a selector keeps each key on one queue, an orderly push consumer
/// (queue locks taken through each broker of the route) sees every key's messages in
/// send order.
async fn ordered_in(serialize_type: SerializeType, route_mode: RouteMode) {
    let label = label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, |c| c.route_mode = route_mode);
    let topic = format!("InteropOrdered{label}");
    cluster.create_routed_topic(&topic, QUEUES);
    let group = format!("OrderCG-{label}");
    let mut producer = start_producer(&cluster, serialize_type, "ordered-producer", format!("OrderPG-{label}"), &topic).await;

    const KEYS: usize = 6;
    const PER_KEY: usize = 10;
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut consumer = push_consumer(&cluster, serialize_type, "ordered-push", &group).build();
    consumer.subscribe(topic.as_str(), "*").await.expect("subscribe");
    consumer.register_message_listener_orderly(move |msgs: &[&MessageExt], _: &mut rocketmq_client_rust::ConsumeOrderlyContext| {
        let mut sink = sink.lock().expect("sink");
        for msg in msgs {
            let body = String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string();
            let (key, seq) = body.split_once(':').expect("key:seq");
            sink.push((key.parse().expect("key"), seq.parse().expect("seq")));
        }
        Ok(rocketmq_client_rust::ConsumeOrderlyStatus::Success)
    });
    bounded("orderly consumer start", consumer.start()).await.expect("orderly consumer starts");

    let mut queue_of_key: HashMap<usize, (String, i32)> = HashMap::new();
    for seq in 0..PER_KEY {
        for key in 0..KEYS {
            let msg = Message::builder().topic(topic.as_str()).body_slice(format!("{key}:{seq}").as_bytes()).build().expect("message");
            let selector = |queues: &[MessageQueue], _: &Message, key: &usize| queues.get(key % queues.len()).cloned();
            let r = bounded("ordered send", producer.send_with_selector_timeout(msg, selector, key, 5_000)).await.expect("send").expect("result");
            assert_eq!(r.send_status, SendStatus::SendOk);
            let mq = r.message_queue.clone().expect("queue");
            let q = (mq.broker_name().to_string(), mq.queue_id());
            assert_eq!(queue_of_key.entry(key).or_insert_with(|| q.clone()), &q, "key {key} stays on one queue");
        }
    }
    producer.shutdown().await;
    let brokers: std::collections::HashSet<&String> = queue_of_key.values().map(|(b, _)| b).collect();
    assert_eq!(brokers.len(), cluster.broker_names().len(), "keys spread over every broker: {queue_of_key:?}");

    let deadline = Instant::now() + WAIT;
    while seen.lock().expect("sink").len() < KEYS * PER_KEY {
        assert!(Instant::now() < deadline, "orderly consumer got {} of {}", seen.lock().expect("sink").len(), KEYS * PER_KEY);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bounded("orderly consumer shutdown", consumer.shutdown()).await;
    let seen = seen.lock().expect("sink").clone();
    for key in 0..KEYS {
        let order: Vec<usize> = seen.iter().filter(|(k, _)| *k == key).map(|(_, s)| *s).collect();
        assert_eq!(order, (0..PER_KEY).collect::<Vec<_>>(), "key {key} consumed in send order, once each");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_mode_binary_headers_ordered() {
    ordered_in(SerializeType::ROCKETMQ, RouteMode::Shard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_ordered() {
    ordered_in(SerializeType::JSON, RouteMode::Host).await;
}

// Shard route mode: the unmodified client against a 2-shard broker registered as two
// shard-brokers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_mode_binary_headers_produce_and_pull() {
    produce_and_pull_in(SerializeType::ROCKETMQ, RouteMode::Shard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_mode_json_headers_push_consumer_tag_subscription() {
    push_with_tag_subscription_in(SerializeType::JSON, RouteMode::Shard).await;
}

test_both_encodings!(
    json_headers_push_consumer_tag_subscription,
    binary_headers_push_consumer_tag_subscription,
    push_with_tag_subscription
);

// ---------------------------------------------------------------------------------
// Both clients on one two-broker cluster.

/// The RocketMQ client and the RingMQ client produce to and consume from the same
/// cluster of one NameServer and two brokers: each reads what the other sent, with
/// tags, keys, properties and message ids intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ringmq_and_rocketmq_clients_share_a_two_broker_cluster() {
    init_logging();
    let namesrv = start_namesrv();
    let ns_addr = namesrv.local_addr().to_string();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp store");
    let mut brokers = Vec::new();
    for name in ["broker-a", "broker-b"] {
        let mut config = broker_config(root.path().join(name), name, ns_addr.clone());
        config.shard_count = 1;
        config.pull_suspend_max_ms = 1_000;
        brokers.push(launch::start(config).expect("broker starts"));
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
                let msg = ringmq_client::Message::new(topic, body.clone())
                    .with_tags(tag)
                    .expect("tag")
                    .with_keys([format!("key-{i}").as_str()])
                    .expect("keys");
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
    let (consumer, queues) =
        start_lite_pull_from_start(ns_addr.clone(), SerializeType::JSON, "both-lite-pull", "CG-rocketmq-reads", topic).await;
    assert_eq!(queues.len(), 2 * QUEUES as usize);
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
