//! Interop of the admin surface: the unmodified crates.io `rocketmq-client-rust` admin API
//! (`DefaultMQAdminExt`, feature `admin-full`) drives a RingMQ NameServer and a 2-shard
//! broker (`common_interop::Cluster`, in this process, ephemeral ports, temp store) through
//! every admin request code RingMQ answers, decoding each answer with that client's own
//! serde types (Java's shapes) and checking the values, not only that it decoded:
//!
//! - NameServer: GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
//!   GET_TOPICS_BY_CLUSTER, GET_ROUTEINFO_BY_TOPIC, WIPE_WRITE_PERM_OF_BROKER (205),
//!   ADD_WRITE_PERM_OF_BROKER (327), DELETE_TOPIC_IN_NAMESRV, PUT_KV_CONFIG,
//!   GET_KV_CONFIG, GET_KVLIST_BY_NAMESPACE, DELETE_KV_CONFIG;
//! - broker: UPDATE_AND_CREATE_TOPIC (17), GET_ALL_TOPIC_CONFIG (21), GET_TOPIC_CONFIG
//!   (351), GET_TOPIC_STATS_INFO (202), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
//!   GET_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
//!   DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST
//!   (203), GET_PRODUCER_CONNECTION_LIST, QUERY_TOPIC_CONSUME_BY_WHO (300),
//!   GET_BROKER_CONFIG (26), UPDATE_BROKER_CONFIG (25: a start-up key refused; runtime
//!   keys taken, `defaultTopicQueueNums` shaping the next auto-created topic),
//!   GET_BROKER_RUNTIME_INFO (28, with the keys brokerStatus and exporters read:
//!   `getTotalTps`, `earliestMessageTimeStamp`, `dispatchBehindBytes`,
//!   `pageCacheLockTimeMills`), DELETE_TOPIC_IN_BROKER, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE,
//!   SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX_OFFSET, GET_MIN_OFFSET, UPDATE_CONSUMER_OFFSET (an
//!   admin's offset change), INVOKE_BROKER_TO_RESET_OFFSET (222) with the group offline
//!   (CONSUMER_NOT_ONLINE) and online (the client's push consumer rewinds: every message
//!   is received again and the committed offsets end at the queues' ends).
//!
//! In shard route mode (`shard_mode_figures`): the commands mqadmin users run most
//! (clusterList, brokerStatus, topicStatus, consumerProgress, statsAll,
//! resetOffsetByTime) against the two shard-brokers, every queue once and every sum the
//! messages sent, not once per shard-broker.
//!
//! Also checked: every request that changes state is logged with its caller's address
//! (the broker's and NameServer's logs are captured by this binary's global subscriber).
//!
//! Owns: the admin scenario and its expectations. The cluster, client runtime and bounded
//! waits are `common_interop`'s. Every wait has a deadline; nothing sleeps for ordering.

mod common_interop;

use common_interop::{bounded, client_runtime, ignore_disk_watermarks, push_consumer, BrokerPath, Cluster, BROKER_NAME, QUEUES};
use ringmq_broker::config::RouteMode;
use ringmq_broker::routing::queue_owner;
use rocketmq_client_rust::{
    BrokerAdmin, ClientConfig, ClientError, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumerAdmin, DefaultMQAdminExt,
    DefaultMQProducer, DefaultMQPushConsumer, MQClientException, MQPushConsumer, OffsetAdmin, RouteAdmin, SendStatus, TopicAdmin,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::topic::TopicConfig;
use rocketmq_protocol::protocol::admin::consume_stats::ConsumeStats;
use rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData;
use rocketmq_protocol::protocol::subscription::subscription_group_config::SubscriptionGroupConfig;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);
const CLUSTER: &str = "DefaultCluster";
/// The admin client's per-call timeout (ms) where its API takes one.
const CALL_MS: u64 = 5_000;
/// Java's response codes the checks name.
const TOPIC_NOT_EXIST: i32 = 17;
const NO_PERMISSION: i32 = 16;
const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
const CONSUMER_NOT_ONLINE: i32 = 206;
/// The online reset's messages: consumed before the reset, then more consumed too.
const RESET_FIRST: usize = 20;
const RESET_MORE: usize = 30;
/// How long rocketmq-client-rust's push consumer waits, after stopping the reset queues,
/// for the pulls in flight before it takes the new offsets (its `RESET_OFFSET_MAX_WAIT`).
const CLIENT_RESET_SETTLE: Duration = Duration::from_secs(10);
/// `defaultTopicQueueNums` set at runtime: more than the 4 queues the client sends an
/// unknown topic's first message to (its own `defaultTopicQueueNums`), so that message
/// lands on a queue the new topic has.
const AUTO_QUEUES: u32 = 6;

// ---------------------------------------------------------------------------------
// Captured logs: the broker and NameServer run in this process, so one global
// subscriber sees what they log. (`RINGMQ_TEST_LOG` then has no effect in this binary.)

static LOG: LazyLock<Mutex<Vec<u8>>> = LazyLock::new(|| Mutex::new(Vec::new()));

struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock().map_err(|_| std::io::Error::other("log buffer poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::new("warn,ringmq_broker=info,namesrv=info");
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(|| LogWriter).try_init();
    });
}

fn logs() -> String {
    String::from_utf8_lossy(&LOG.lock().expect("log buffer")).to_string()
}

/// `(what, words)`: some log line holds every word and a caller on 127.0.0.1.
fn check_logged(cases: &[(&str, &[&str])]) {
    let log = logs();
    for (what, words) in cases {
        let found = log.lines().any(|l| words.iter().all(|w| l.contains(w)) && l.contains("caller=\"127.0.0.1:"));
        assert!(found, "{what} is logged with its caller ({words:?}):\n{log}");
    }
}

// ---------------------------------------------------------------------------------
// Small helpers.

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The response code a refusal carried: the client keeps it either as a broker error's
/// code or in the `MQClientException` it wraps, depending on the call.
fn response_code(e: &ClientError) -> Option<i32> {
    e.broker_response_code().or_else(|| e.source_ref::<MQClientException>().map(MQClientException::response_code))
}

/// Expects `result` to be the broker's (or NameServer's) refusal with `code` and, where
/// the client keeps the remark (`Some`), a remark containing `remark`. (On some paths the
/// client keeps only the code: its `broker_operation_failed` drops the text. The remarks
/// themselves are checked byte for byte in `admin_codes.rs`.)
fn check_refused<T: std::fmt::Debug>(what: &str, result: Result<T, ClientError>, code: i32, remark: Option<&str>) {
    let e = result.expect_err(what);
    let kept = e.source_ref::<MQClientException>().and_then(MQClientException::error_message).map(str::to_string);
    assert_eq!(response_code(&e), Some(code), "{what}: {e} {kept:?}");
    if let Some(remark) = remark {
        assert!(kept.as_deref().is_some_and(|k| k.contains(remark)), "{what}: remark {kept:?}, wanted {remark:?}");
    }
}

/// `(topic, (read, write, perm))` as a `TopicConfig`'s values.
fn queue_shape(c: &TopicConfig) -> (u32, u32, u32) {
    (c.read_queue_nums, c.write_queue_nums, c.perm)
}

/// A started admin client, the way mqadmin sets one up (NameServer address only).
async fn start_admin(cluster: &Cluster, serialize_type: SerializeType) -> DefaultMQAdminExt {
    let mut admin = DefaultMQAdminExt::new(client_runtime("admin", serialize_type));
    admin.set_namesrv_addr(cluster.namesrv_addr());
    bounded("admin start", admin.start()).await.expect("admin starts");
    admin
}

/// A started producer of `group` that has `topic`'s route and heartbeats every 10 s (the
/// client's minimum, not its 30 s default: the broker learns of it well within `WAIT`).
async fn start_producer(cluster: &Cluster, serialize_type: SerializeType, group: &str, topic: &str) -> DefaultMQProducer {
    let mut config = ClientConfig::default();
    config.set_heartbeat_broker_interval(10_000);
    let mut producer = DefaultMQProducer::builder(client_runtime("producer", serialize_type))
        .client_config(config)
        .producer_group(group)
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    common_interop::await_route(&mut producer, topic).await;
    producer
}

/// One sent message: its broker and queue, offset, ids and keys.
#[derive(Debug, Clone)]
struct Sent {
    body: String,
    key: String,
    broker: String,
    queue_id: i32,
    queue_offset: u64,
    offset_msg_id: String,
}

/// Sends `n` messages `"<prefix> i"` with tag `TagA` and key `"<prefix>-key-i"`.
async fn send(producer: &mut DefaultMQProducer, topic: &str, prefix: &str, n: usize) -> Vec<Sent> {
    let mut sent = Vec::new();
    for i in 0..n {
        let (body, key) = (format!("{prefix} {i}"), format!("{prefix}-key-{i}"));
        let msg = Message::builder().topic(topic).tags("TagA").keys(vec![key.clone()]).body_slice(body.as_bytes()).build().expect("message");
        let r = bounded("send", producer.send_with_timeout(msg, 5_000)).await.expect("send").expect("a send result");
        assert_eq!(r.send_status, SendStatus::SendOk);
        let mq = r.message_queue.clone().expect("message queue");
        sent.push(Sent { body, key, broker: mq.broker_name().to_string(), queue_id: mq.queue_id(), queue_offset: r.queue_offset, offset_msg_id: r.offset_msg_id.clone().expect("offsetMsgId") });
    }
    sent
}

/// Messages per queue id.
fn per_queue(sent: &[Sent]) -> BTreeMap<i32, i64> {
    let mut counts: BTreeMap<i32, i64> = (0..QUEUES).map(|q| (q, 0)).collect();
    for s in sent {
        *counts.entry(s.queue_id).or_default() += 1;
    }
    counts
}

// ---------------------------------------------------------------------------------
// The scenario: one cluster, one admin client, the steps below in order.

/// What the steps share. Names carry the header encoding's label, so the two tests (run
/// concurrently, each with its own cluster) never share a log line.
struct Ctx {
    cluster: Cluster,
    serialize_type: SerializeType,
    admin: DefaultMQAdminExt,
    /// The broker's address, as the NameServer gives it.
    broker: String,
    /// 4 queues, read-write: the traffic.
    topic: String,
    /// Created, then deleted.
    topic2: String,
    /// The push consumer's group.
    group: String,
    /// Created, then deleted.
    doomed: String,
    kv_namespace: String,
}

async fn admin_codes(serialize_type: SerializeType) {
    capture_logs();
    let started = Instant::now();
    let label = common_interop::label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, ignore_disk_watermarks);
    let admin = start_admin(&cluster, serialize_type).await;
    let mut c = Ctx {
        broker: format!("127.0.0.1:{}", cluster.broker_addr().port()),
        cluster,
        serialize_type,
        admin,
        topic: format!("AdminT{label}"),
        topic2: format!("AdminT2{label}"),
        group: format!("AdminCG{label}"),
        doomed: format!("AdminDoomed{label}"),
        kv_namespace: format!("AdminNs{label}"),
    };
    cluster_info(&c).await;
    topics(&c).await;
    kv_config(&c).await;
    write_perm(&c).await;
    groups(&c).await;
    let (mut producer, first) = messages(&c).await;
    let stored = consumption(&c, &mut producer, first).await;
    producer.shutdown().await;
    let reset_put = online_reset(&c).await;
    broker_info(&c, &stored, stored.len() + reset_put).await;
    delete_topic(&c).await;
    caller_logged(&c);
    bounded("admin shutdown", c.admin.shutdown()).await;
    let encoding = common_interop::serialize_code(serialize_type);
    assert_eq!(c.cluster.encodings_seen(), [encoding], "header encodings the clients sent to the NameServer");
    eprintln!("admin interop ({label}) took {:?}", started.elapsed());
}

/// GET_BROKER_CLUSTER_INFO (NameServer): the broker, its cluster and its address.
async fn cluster_info(c: &Ctx) {
    let info = bounded("cluster info", c.admin.examine_broker_cluster_info()).await.expect("cluster info");
    let clusters: BTreeMap<String, BTreeSet<String>> = info
        .cluster_addr_table
        .iter()
        .flatten()
        .map(|(cluster, names)| (cluster.to_string(), names.iter().map(|n| n.to_string()).collect()))
        .collect();
    assert_eq!(clusters, BTreeMap::from([(CLUSTER.to_string(), BTreeSet::from([BROKER_NAME.to_string()]))]));
    let brokers = info.broker_addr_table.as_ref().expect("brokerAddrTable");
    let data = brokers.get(BROKER_NAME).expect("broker-a in the cluster info");
    assert_eq!((data.cluster(), data.broker_addrs().get(&0).map(|a| a.to_string())), (CLUSTER, Some(c.broker.clone())));
}

/// UPDATE_AND_CREATE_TOPIC (17), then each topic everywhere: the NameServer's topic
/// lists and route, GET_ALL_TOPIC_CONFIG (21) and GET_TOPIC_CONFIG (351).
async fn topics(c: &Ctx) {
    let admin = &c.admin;
    // (topic, (readQueueNums, writeQueueNums, perm)).
    let wanted: Vec<(&str, (u32, u32, u32))> = vec![(c.topic.as_str(), (4, 4, 6)), (c.topic2.as_str(), (2, 3, 4))];
    for (name, (r, w, perm)) in &wanted {
        let config = TopicConfig::with_perm(*name, *r, *w, *perm);
        bounded("create topic", admin.create_and_update_topic_config(c.broker.clone().into(), config)).await.expect("topic created");
    }
    let list = bounded("topic list", admin.fetch_all_topic_list()).await.expect("topic list");
    let by_cluster = bounded("topics by cluster", admin.fetch_topics_by_cluster(CLUSTER.into())).await.expect("topics by cluster");
    let none = bounded("topics by cluster", admin.fetch_topics_by_cluster("NoSuchCluster".into())).await.expect("topics by cluster");
    assert!(none.topic_list.is_empty(), "{none:?}");
    let all = bounded("all topic config", admin.get_all_topic_config(c.broker.clone().into(), CALL_MS)).await.expect("GET_ALL_TOPIC_CONFIG decodes");
    let table = all.topic_config_table().expect("topicConfigTable");
    let version = all.data_version().expect("dataVersion");
    assert!(version.counter() >= 2 && version.timestamp() > 0 && version.state_version() == 0, "dataVersion {version:?}");
    for (name, shape) in &wanted {
        assert!(list.topic_list.iter().any(|t| t.as_str() == *name), "{name} in {:?}", list.topic_list);
        assert!(by_cluster.topic_list.iter().any(|t| t.as_str() == *name), "{name} in {:?}", by_cluster.topic_list);
        let entry = table.get(*name).unwrap_or_else(|| panic!("{name} in GET_ALL_TOPIC_CONFIG"));
        assert_eq!((entry.topic_name.as_deref(), queue_shape(entry)), (Some(*name), *shape), "GET_ALL_TOPIC_CONFIG {name}");
        let one = bounded("topic config", admin.examine_topic_config(c.broker.clone().into(), (*name).into())).await.expect("GET_TOPIC_CONFIG");
        assert_eq!(one, *entry, "GET_TOPIC_CONFIG {name} equals its GET_ALL_TOPIC_CONFIG entry");
        let route = bounded("route", admin.examine_topic_route_info((*name).into())).await.expect("route").expect("a route");
        let queues: Vec<_> = route.queue_datas.iter().map(|q| (q.broker_name.to_string(), q.read_queue_nums, q.write_queue_nums, q.perm)).collect();
        assert_eq!(queues, vec![(BROKER_NAME.to_string(), shape.0, shape.1, shape.2)], "route of {name}");
    }
    let missing = admin.examine_topic_config(c.broker.clone().into(), "NoSuchTopic".into()).await;
    check_refused("GET_TOPIC_CONFIG of no topic", missing, TOPIC_NOT_EXIST, Some("NoSuchTopic"));
}

/// The NameServer's KV config: PUT_KV_CONFIG, GET_KV_CONFIG, GET_KVLIST_BY_NAMESPACE,
/// DELETE_KV_CONFIG.
async fn kv_config(c: &Ctx) {
    let (admin, ns, key) = (&c.admin, &c.kv_namespace, "ordered.topic");
    bounded("kv put", admin.create_and_update_kv_config(ns.clone().into(), key.into(), "broker-a:4".into())).await.expect("PUT_KV_CONFIG");
    let got = bounded("kv get", admin.get_kv_config(ns.clone().into(), key.into())).await.expect("GET_KV_CONFIG");
    assert_eq!(got.as_str(), "broker-a:4");
    let table = bounded("kv list", admin.get_kv_list_by_namespace(ns.clone().into())).await.expect("GET_KVLIST_BY_NAMESPACE");
    let table: BTreeMap<String, String> = table.table.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(table, BTreeMap::from([(key.to_string(), "broker-a:4".to_string())]));
    bounded("kv delete", admin.delete_kv_config(ns.clone().into(), key.into())).await.expect("DELETE_KV_CONFIG");
    // Now QUERY_NOT_FOUND, which this client turns into an empty value.
    let gone = bounded("kv get", admin.get_kv_config(ns.clone().into(), key.into())).await.expect("GET_KV_CONFIG");
    assert_eq!(gone.as_str(), "", "deleted");
}

/// WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327) on the NameServer:
/// every topic of the broker, and the route's permission follows. (Run before any
/// consumer: no new topic re-registers the broker's queues meanwhile.)
async fn write_perm(c: &Ctx) {
    let (admin, ns) = (&c.admin, c.cluster.namesrv_addr());
    let perm = |r: Option<TopicRouteData>| r.expect("a route").queue_datas[0].perm;
    let topics = bounded("topic list", admin.fetch_all_topic_list()).await.expect("topic list").topic_list.len() as i32;
    let wiped = bounded("wipe", admin.wipe_write_perm_of_broker(ns.clone().into(), BROKER_NAME.into())).await.expect("wipe write perm");
    assert_eq!(wiped, topics, "wipeTopicCount");
    assert_eq!(perm(admin.examine_topic_route_info(c.topic.clone().into()).await.expect("route")), 4, "write permission wiped");
    let added = bounded("add", admin.add_write_perm_of_broker(ns.into(), BROKER_NAME.into())).await.expect("add write perm");
    assert_eq!(added, topics, "addTopicCount");
    assert_eq!(perm(admin.examine_topic_route_info(c.topic.clone().into()).await.expect("route")), 6, "write permission back");
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_SUBSCRIPTIONGROUP_CONFIG,
/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG, DELETE_SUBSCRIPTIONGROUP (207).
async fn groups(c: &Ctx) {
    let admin = &c.admin;
    // (group, retryMaxTimes, retryQueueNums).
    for (name, retry_max, retry_queues) in [(c.group.as_str(), 5, 2), (c.doomed.as_str(), 16, 1)] {
        let mut g = SubscriptionGroupConfig::new(name.into());
        g.set_retry_max_times(retry_max);
        g.set_retry_queue_nums(retry_queues);
        g.set_consume_broadcast_enable(false);
        bounded("create group", admin.create_and_update_subscription_group_config(c.broker.clone().into(), g)).await.expect("group created");
        let got = bounded("group config", admin.examine_subscription_group_config(c.broker.clone().into(), name.into())).await.expect("group config");
        let shape = (got.group_name().to_string(), got.retry_max_times(), got.retry_queue_nums(), got.consume_broadcast_enable(), got.consume_enable());
        assert_eq!(shape, (name.to_string(), retry_max, retry_queues, false, true), "GET_SUBSCRIPTIONGROUP_CONFIG {name}");
    }
    let all = bounded("all groups", admin.get_all_subscription_group(c.broker.clone().into(), CALL_MS)).await.expect("GET_ALL_SUBSCRIPTIONGROUP_CONFIG decodes");
    for name in [&c.group, &c.doomed] {
        let g = all.subscription_group_table.get(name.as_str()).unwrap_or_else(|| panic!("{name} in GET_ALL_SUBSCRIPTIONGROUP_CONFIG"));
        assert_eq!(g.group_name().as_str(), name.as_str());
    }
    assert!(all.data_version.counter() >= 2, "groups dataVersion {:?}", all.data_version);
    bounded("delete group", admin.delete_subscription_group(c.broker.clone().into(), c.doomed.clone().into(), Some(true))).await.expect("group deleted");
    let gone = admin.examine_subscription_group_config(c.broker.clone().into(), c.doomed.clone().into()).await;
    check_refused("deleted group", gone, SUBSCRIPTION_GROUP_NOT_EXIST, Some("No group in this broker"));
}

/// A producer sends 12 messages; then GET_PRODUCER_CONNECTION_LIST,
/// GET_TOPIC_STATS_INFO (202), GET_MAX_OFFSET / GET_MIN_OFFSET /
/// SEARCH_OFFSET_BY_TIMESTAMP, VIEW_MESSAGE_BY_ID and QUERY_MESSAGE see exactly them.
async fn messages(c: &Ctx) -> (DefaultMQProducer, Vec<Sent>) {
    let (admin, topic) = (&c.admin, &c.topic);
    let producer_group = format!("AdminPG{}", common_interop::label_of(c.serialize_type));
    let mut producer = start_producer(&c.cluster, c.serialize_type, &producer_group, topic).await;
    let before = now_ms();
    let first = send(&mut producer, topic, "first", 12).await;
    let after = now_ms();

    // The live producer, once its heartbeat arrived.
    let deadline = Instant::now() + WAIT;
    let conns = loop {
        match admin.examine_producer_connection_info(producer_group.clone().into(), topic.clone().into()).await {
            Ok(conns) => break conns,
            Err(e) => assert!(Instant::now() < deadline, "producer connection not listed within {WAIT:?}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let listed: Vec<_> = conns.connection_set().iter().map(|c| (c.get_client_addr().starts_with("127.0.0.1:"), c.get_version() > 0)).collect();
    assert_eq!(listed, vec![(true, true)], "one producer connection: {conns:?}");

    // Per queue: min 0, max = what was sent there, last update the store time of its
    // newest message (0 if empty).
    let stats = bounded("topic stats", admin.examine_topic_stats(topic.clone().into(), None)).await.expect("GET_TOPIC_STATS_INFO decodes");
    let got: BTreeMap<i32, (i64, i64, bool)> = stats
        .get_offset_table()
        .iter()
        .map(|(mq, o)| {
            assert_eq!((mq.topic_str(), mq.broker_name().as_str()), (topic.as_str(), BROKER_NAME));
            let ts = o.get_last_update_timestamp();
            let ts_ok = if o.get_max_offset() > 0 { (before..=after).contains(&ts) } else { ts == 0 };
            (mq.queue_id(), (o.get_min_offset(), o.get_max_offset(), ts_ok))
        })
        .collect();
    let want: BTreeMap<i32, (i64, i64, bool)> = per_queue(&first).into_iter().map(|(q, n)| (q, (0, n, true))).collect();
    assert_eq!(got, want, "topic stats");
    let direct = bounded("topic stats", admin.examine_topic_stats(topic.clone().into(), Some(c.broker.clone().into()))).await.expect("topic stats");
    assert_eq!(direct.get_offset_table().len(), QUEUES as usize);

    for (q, n) in per_queue(&first) {
        let mq = MessageQueue::from_parts(topic.as_str(), BROKER_NAME, q);
        let max = bounded("max offset", admin.max_offset(c.broker.clone().into(), mq.clone(), CALL_MS)).await.expect("max offset");
        let min = bounded("min offset", admin.min_offset(c.broker.clone().into(), mq, CALL_MS)).await.expect("min offset");
        assert_eq!((min, max), (0, n), "min/max offset of queue {q}");
        let search = admin.search_offset(c.broker.clone().into(), topic.clone().into(), q, before as u64, CALL_MS);
        let found = bounded("search offset", search).await.expect("search offset");
        assert_eq!(found, 0, "the first message of queue {q} was stored at or after {before}");
    }

    // An offsetMsgId names the store host and physical offset (VIEW_MESSAGE_BY_ID); a key
    // finds its message through the index (QUERY_MESSAGE). Body, key, queue and offset.
    let check_message = |m: &MessageExt, s: &Sent| {
        let body = String::from_utf8_lossy(m.body().as_deref().unwrap_or_default()).to_string();
        let keys = m.get_keys().map(|k| k.to_string());
        assert_eq!((body, keys, m.queue_id(), m.queue_offset()), (s.body.clone(), Some(s.key.clone()), s.queue_id, s.queue_offset as i64));
    };
    for s in first.iter().step_by(5) {
        let m = bounded("view", admin.query_message(CLUSTER.into(), topic.clone().into(), s.offset_msg_id.clone().into())).await.expect("VIEW_MESSAGE_BY_ID");
        check_message(&m, s);
        let query = admin.query_message_by_key(None, topic.clone().into(), s.key.clone().into(), 32, 0, i64::MAX, "K".into(), None);
        let found = bounded("query by key", query).await.expect("QUERY_MESSAGE");
        assert_eq!(found.message_list().len(), 1, "one message with key {}", s.key);
        check_message(&found.message_list()[0], s);
    }
    (producer, first)
}

/// A push consumer of `group` consumes the first messages: GET_CONSUMER_CONNECTION_LIST
/// (203), GET_CONSUME_STATS (208), QUERY_TOPIC_CONSUME_BY_WHO (300); then it leaves,
/// more is sent and the admin rewinds a queue (UPDATE_CONSUMER_OFFSET): the stats' diff
/// is exactly the backlog. Returns every message stored.
async fn consumption(c: &Ctx, producer: &mut DefaultMQProducer, first: Vec<Sent>) -> Vec<Sent> {
    let (admin, topic, group) = (&c.admin, &c.topic, &c.group);
    let consumed = Arc::new(Mutex::new(0usize));
    let sink = consumed.clone();
    let mut consumer = push_consumer(&c.cluster, c.serialize_type, "admin-push", group).build();
    consumer.subscribe(topic.as_str(), "*").await.expect("subscribe");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        *sink.lock().expect("sink") += msgs.len();
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts");

    // The live consumer, its subscription and model.
    let deadline = Instant::now() + WAIT;
    let conn = loop {
        match admin.examine_consumer_connection_info(group.clone().into(), Some(c.broker.clone().into())).await {
            Ok(conn) => break conn,
            Err(e) => assert!(Instant::now() < deadline, "consumer connection not listed within {WAIT:?}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(conn.get_connection_set().len(), 1, "{conn:?}");
    let sub = conn.get_subscription_table().get(topic.as_str()).expect("subscription of the topic");
    assert_eq!((sub.topic.as_str(), sub.sub_string.as_str()), (topic.as_str(), "*"));
    assert_eq!(
        (format!("{:?}", conn.get_message_model()), format!("{:?}", conn.get_consume_type())),
        ("Some(Clustering)".to_string(), "Some(ConsumePassively)".to_string())
    );

    // As mqadmin asks it (the broker found through the group's retry topic): once the
    // consumer committed everything, no backlog. (The group's retry topic, which the
    // consumer also subscribes to, may be listed too: empty.)
    let deadline = Instant::now() + WAIT;
    loop {
        let stats = admin.examine_consume_stats(group.clone().into(), None, None, None, None).await;
        if let Ok(s) = &stats {
            let of_topic: Vec<_> = s.get_offset_table().iter().filter(|(mq, _)| mq.topic_str() == topic).map(|(_, w)| w).collect();
            let committed: i64 = of_topic.iter().map(|w| w.get_consumer_offset()).sum();
            if of_topic.len() == QUEUES as usize && committed == first.len() as i64 {
                assert_eq!(s.compute_total_diff(), 0, "{s:?}");
                break;
            }
        }
        assert!(Instant::now() < deadline, "consume stats never showed everything committed: {stats:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(*consumed.lock().expect("sink"), first.len());
    let who = bounded("consume by who", admin.query_topic_consume_by_who(topic.clone().into())).await.expect("QUERY_TOPIC_CONSUME_BY_WHO");
    assert_eq!(who.group_list.iter().map(|g| g.to_string()).collect::<HashSet<_>>(), HashSet::from([group.clone()]));

    bounded("push consumer shutdown", consumer.shutdown()).await;
    let gone = admin.examine_consumer_connection_info(group.clone().into(), Some(c.broker.clone().into())).await;
    check_refused("consumer connection of a group gone", gone, CONSUMER_NOT_ONLINE, None);
    let second = send(producer, topic, "second", 9).await;
    let q0 = MessageQueue::from_parts(topic.as_str(), BROKER_NAME, 0);
    bounded("update offset", admin.update_consume_offset(c.broker.clone().into(), group.clone().into(), q0, 0)).await.expect("UPDATE_CONSUMER_OFFSET");
    let stored: Vec<Sent> = first.iter().chain(second.iter()).cloned().collect();
    let backlog: Vec<Sent> = second.iter().chain(first.iter().filter(|s| s.queue_id == 0)).cloned().collect();
    let stats = admin.examine_consume_stats(group.clone().into(), Some(topic.clone().into()), None, Some(c.broker.clone().into()), None);
    let stats = bounded("consume stats", stats).await.expect("GET_CONSUME_STATS decodes");
    let got: BTreeMap<i32, (i64, i64)> =
        stats.get_offset_table().iter().map(|(mq, w)| (mq.queue_id(), (w.get_broker_offset(), w.get_broker_offset() - w.get_consumer_offset()))).collect();
    let want: BTreeMap<i32, (i64, i64)> = per_queue(&stored).into_iter().map(|(q, n)| (q, (n, per_queue(&backlog)[&q]))).collect();
    assert_eq!(got, want, "(brokerOffset, diff) per queue");
    assert_eq!(stats.compute_total_diff(), backlog.len() as i64);
    // VIEW_BROKER_STATS_DATA (315): the topic's puts, summed over the broker's shards.
    let puts = admin.view_broker_stats_data(c.broker.clone().into(), "TOPIC_PUT_NUMS".into(), topic.clone().into());
    let puts = bounded("broker stats", puts).await.expect("VIEW_BROKER_STATS_DATA");
    assert_eq!(puts.get_stats_minute().get_sum(), stored.len() as u64, "{puts:?}");
    // INVOKE_BROKER_TO_RESET_OFFSET (222) with the group offline: CONSUMER_NOT_ONLINE,
    // the answer on which mqadmin commits the offsets itself.
    let reset = admin.reset_offset_by_timestamp(None, topic.clone().into(), group.clone().into(), 0, true).await;
    check_refused("reset offset with no consumer online", reset, CONSUMER_NOT_ONLINE, None);
    stored
}

/// INVOKE_BROKER_TO_RESET_OFFSET (222) with the group's push consumer online: 20
/// messages consumed and committed, then 30 more; the admin rewinds the topic to before
/// the first. The broker answers every queue at 0 and pushes RESET_CONSUMER_CLIENT_OFFSET
/// (220); the consumer stops its queues, commits the new offsets and pulls again: it
/// receives all 50 again, and the broker's committed offsets end at the queues' ends
/// (not stuck at 0, nothing skipped). Returns how many messages it put.
async fn online_reset(c: &Ctx) -> usize {
    let label = common_interop::label_of(c.serialize_type);
    let (admin, topic, group) = (&c.admin, format!("AdminReset{label}"), format!("AdminResetCG{label}"));
    let config = TopicConfig::with_perm(topic.as_str(), QUEUES as u32, QUEUES as u32, 6);
    bounded("create topic", admin.create_and_update_topic_config(c.broker.clone().into(), config)).await.expect("topic created");
    let mut producer = start_producer(&c.cluster, c.serialize_type, &format!("AdminResetPG{label}"), &topic).await;
    let (mut consumer, received) = recording_push_consumer(&c.cluster, c.serialize_type, "admin-reset", &group, &topic).await;

    let before = now_ms();
    let mut sent = send(&mut producer, &topic, "reset-a", RESET_FIRST).await;
    consumed_and_committed(c, &topic, &group, &received, &sent, 0, WAIT).await;
    sent.extend(send(&mut producer, &topic, "reset-b", RESET_MORE).await);
    consumed_and_committed(c, &topic, &group, &received, &sent, 0, WAIT).await;
    let delivered = received.lock().expect("sink").len();

    let reset = admin.reset_offset_by_timestamp(None, topic.clone().into(), group.clone().into(), before as u64, true);
    let offsets = bounded("reset offset", reset).await.expect("INVOKE_BROKER_TO_RESET_OFFSET with the consumer online");
    let got: BTreeMap<(String, i32), u64> = offsets.iter().map(|(mq, o)| ((mq.broker_name().to_string(), mq.queue_id()), *o)).collect();
    let want: BTreeMap<(String, i32), u64> = (0..QUEUES).map(|q| ((BROKER_NAME.to_string(), q), 0)).collect();
    assert_eq!(got, want, "every queue rewound to its first message");
    consumed_and_committed(c, &topic, &group, &received, &sent, delivered, WAIT + CLIENT_RESET_SETTLE).await;

    bounded("push consumer shutdown", consumer.shutdown()).await;
    producer.shutdown().await;
    sent.len()
}

/// Waits (at most `bound`) until the consumer has received every body of `sent` in its
/// deliveries from the `from`-th on, and the broker's committed offsets of `topic` for
/// `group` are its queues' ends.
async fn consumed_and_committed(c: &Ctx, topic: &str, group: &str, received: &Mutex<Vec<String>>, sent: &[Sent], from: usize, bound: Duration) {
    let deadline = Instant::now() + bound;
    let bodies_wanted: BTreeSet<String> = sent.iter().map(|s| s.body.clone()).collect();
    let ends = per_queue(sent);
    loop {
        let bodies: BTreeSet<String> = received.lock().expect("sink").iter().skip(from).cloned().collect();
        let stats = c.admin.examine_consume_stats(group.into(), Some(topic.into()), None, Some(c.broker.clone().into()), None).await;
        let committed: Option<BTreeMap<i32, i64>> =
            stats.as_ref().ok().map(|s| s.get_offset_table().iter().filter(|(mq, _)| mq.topic_str() == topic).map(|(mq, w)| (mq.queue_id(), w.get_consumer_offset())).collect());
        if bodies == bodies_wanted && committed.as_ref() == Some(&ends) {
            return;
        }
        let missing: Vec<&String> = bodies_wanted.difference(&bodies).collect();
        assert!(Instant::now() < deadline, "within {bound:?}: bodies not received since delivery {from}: {missing:?}; committed {committed:?}, queue ends {ends:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// GET_BROKER_RUNTIME_INFO (28): counters exactly what was put and at least what was
/// consumed, TPS RocketMQ's "a b c" texts, the earliest message's store time, no
/// dispatch lag or put lock held. GET_BROKER_CONFIG (26): broker.conf keys with this
/// broker's values. UPDATE_BROKER_CONFIG (25): a key read only at start-up is refused,
/// its code and remark reach the client; runtime keys are applied, and
/// `defaultTopicQueueNums` is the queue count of the next auto-created topic.
/// `stored`: `c.topic`'s messages, the first the broker stored.
async fn broker_info(c: &Ctx, stored: &[Sent], put: usize) {
    let admin = &c.admin;
    let rt = bounded("runtime stats", admin.fetch_broker_runtime_stats(c.broker.clone().into())).await.expect("GET_BROKER_RUNTIME_INFO");
    let value = |k: &str| rt.table.get(k).map(|v| v.to_string()).unwrap_or_else(|| panic!("{k} in the runtime info: {:?}", rt.table));
    assert_eq!((value("msgPutTotalTodayNow"), value("putMessageTimesTotal")), (put.to_string(), put.to_string()), "messages put");
    let got: usize = value("msgGetTotalTodayNow").parse().expect("msgGetTotalTodayNow is a number");
    assert!(got >= 12, "the consumer's 12 messages were pulled: {got}");
    let tps = |key: &str| -> Vec<f64> { value(key).split(' ').map(|v| v.parse().unwrap_or_else(|_| panic!("{key} = {:?}", value(key)))).collect() };
    for key in ["putTps", "getTransferredTps", "getTotalTps"] {
        assert!(tps(key).len() == 3 && tps(key).iter().all(|t| *t >= 0.0), "{key} = {:?}", value(key));
    }
    // Pull lookups per second (Java's found + miss): the reset's consumer long-polled
    // every queue of both shards until just now.
    assert!(tps("getTotalTps")[0] > 0.0, "getTotalTps over the last 10 s = {:?}", value("getTotalTps"));
    assert!(value("brokerVersionDesc").starts_with("RingMQ"));
    // Appends dispatch to their ConsumeQueue in the same call and never wait on a lock.
    assert_eq!((value("dispatchBehindBytes"), value("pageCacheLockTimeMills")), ("0".to_string(), "0".to_string()));
    // The store time of the first message stored (no record came before `stored`): each
    // shard's first is looked up by its offsetMsgId. The merged answer is the minimum
    // over the shards (host route mode: one broker).
    let shards: usize = value("shardCount").parse().expect("shardCount is a number");
    let mut first_on_shard: BTreeMap<usize, i64> = BTreeMap::new();
    for s in stored {
        let shard = queue_owner(&c.topic, s.queue_id, shards);
        if !first_on_shard.contains_key(&shard) {
            let m = bounded("view", admin.query_message(CLUSTER.into(), c.topic.clone().into(), s.offset_msg_id.clone().into())).await.expect("VIEW_MESSAGE_BY_ID");
            first_on_shard.insert(shard, m.store_timestamp());
        }
    }
    assert_eq!(first_on_shard.len(), shards, "every shard holds some of {}", c.topic);
    let earliest: i64 = value("earliestMessageTimeStamp").parse().expect("earliestMessageTimeStamp is a number");
    let overall = first_on_shard.values().copied().min().unwrap_or(-1);
    assert_eq!(earliest, overall, "earliestMessageTimeStamp is the minimum over the shards; first store times per shard {first_on_shard:?}");

    let conf = bounded("broker config", admin.get_broker_config(c.broker.clone().into())).await.expect("GET_BROKER_CONFIG");
    let conf: BTreeMap<String, String> = conf.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let port = c.cluster.broker_addr().port().to_string();
    for (k, v) in [("brokerName", BROKER_NAME), ("brokerClusterName", CLUSTER), ("brokerId", "0"), ("listenPort", port.as_str()), ("flushDiskType", "SYNC_FLUSH")] {
        assert_eq!(conf.get(k).map(String::as_str), Some(v), "broker config {k}");
    }
    let update = admin.update_broker_config(c.broker.clone().into(), HashMap::from([("flushDiskType".into(), "ASYNC_FLUSH".into())])).await;
    check_refused("UPDATE_BROKER_CONFIG", update, NO_PERMISSION, Some("RingMQ cannot change `flushDiskType` at runtime"));
    // A runtime key is applied (on every shard) and read back.
    let update = admin.update_broker_config(c.broker.clone().into(), HashMap::from([("transactionCheckMax".into(), "9".into())])).await;
    update.expect("UPDATE_BROKER_CONFIG of a runtime key");
    let conf = bounded("broker config", admin.get_broker_config(c.broker.clone().into())).await.expect("GET_BROKER_CONFIG");
    assert_eq!(conf.iter().find(|(k, _)| k.as_str() == "transactionCheckMax").map(|(_, v)| v.to_string()), Some("9".to_string()));
    auto_created_topic(c).await;
}

/// UPDATE_BROKER_CONFIG of `defaultTopicQueueNums` (with `autoCreateTopicEnable`): taken,
/// read back by GET_BROKER_CONFIG, and a topic a producer creates by sending to it now
/// has that many queues.
async fn auto_created_topic(c: &Ctx) {
    let admin = &c.admin;
    let update = HashMap::from([("autoCreateTopicEnable".into(), "true".into()), ("defaultTopicQueueNums".into(), AUTO_QUEUES.to_string().into())]);
    bounded("update broker config", admin.update_broker_config(c.broker.clone().into(), update)).await.expect("UPDATE_BROKER_CONFIG of runtime keys");
    let conf = bounded("broker config", admin.get_broker_config(c.broker.clone().into())).await.expect("GET_BROKER_CONFIG");
    let conf: BTreeMap<String, String> = conf.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let read_back = (conf.get("autoCreateTopicEnable").map(String::as_str), conf.get("defaultTopicQueueNums").map(String::as_str));
    assert_eq!(read_back, (Some("true"), Some(AUTO_QUEUES.to_string().as_str())), "runtime keys read back");
    let label = common_interop::label_of(c.serialize_type);
    let topic = format!("AdminAuto{label}");
    // A producer that never saw the topic: it sends by the default topic's route.
    let mut producer = DefaultMQProducer::builder(client_runtime("auto-producer", c.serialize_type))
        .producer_group(format!("AdminAutoPG{label}"))
        .name_server_addr(c.cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    send(&mut producer, &topic, "auto", 1).await;
    producer.shutdown().await;
    let created = bounded("topic config", admin.examine_topic_config(c.broker.clone().into(), topic.clone().into())).await.expect("the auto-created topic");
    assert_eq!((created.read_queue_nums, created.write_queue_nums), (AUTO_QUEUES, AUTO_QUEUES), "{topic}: {created:?}");
}

/// deleteTopic = DELETE_TOPIC_IN_BROKER on every broker of the cluster, then
/// DELETE_TOPIC_IN_NAMESRV: the topic is gone from the broker and its route.
async fn delete_topic(c: &Ctx) {
    let (admin, topic2) = (&c.admin, &c.topic2);
    bounded("delete topic", admin.delete_topic(topic2.clone().into(), CLUSTER.into())).await.expect("topic deleted");
    let gone = admin.examine_topic_config(c.broker.clone().into(), topic2.clone().into()).await;
    check_refused("GET_TOPIC_CONFIG of a deleted topic", gone, TOPIC_NOT_EXIST, Some(topic2));
    let all = bounded("all topic config", admin.get_all_topic_config(c.broker.clone().into(), CALL_MS)).await.expect("GET_ALL_TOPIC_CONFIG");
    assert!(!all.topic_config_table().is_some_and(|t| t.contains_key(topic2.as_str())), "{topic2} left the broker's table");
    // No registration brings it back: the broker's table no longer has it, and one sent
    // before the deletion carries a version the NameServer has already seen.
    let route = bounded("route", admin.examine_topic_route_info(topic2.clone().into())).await.expect("route lookup");
    assert!(route.is_none(), "{topic2}'s route still served: {route:?}");
    let list = bounded("topic list", admin.fetch_all_topic_list()).await.expect("topic list");
    assert!(!list.topic_list.iter().any(|t| t.as_str() == topic2.as_str()), "{topic2} in {:?}", list.topic_list);
}

/// Every state change above is logged with the caller's address (before it was answered:
/// the log is written synchronously).
fn caller_logged(c: &Ctx) {
    let (t, t2, d, ns) = (c.topic.as_str(), c.topic2.as_str(), c.doomed.as_str(), c.kv_namespace.as_str());
    check_logged(&[
        ("topic creation", &["topic created or updated", t]),
        ("group creation", &["subscription group created or updated", d]),
        ("group deletion", &["delete subscription group", d]),
        ("broker config update", &["broker config update refused", "flushDiskType"]),
        ("topic deletion in the broker", &["topic deleted from the broker", t2]),
        ("write permission wiped", &["write permission of broker changed", "wipe=true"]),
        ("write permission added", &["write permission of broker changed", "wipe=false"]),
        ("topic deletion in the NameServer", &["topic deleted", t2]),
        ("KV config put", &["kv config put", ns]),
        ("KV config deletion", &["kv config deleted", ns]),
    ]);
}

common_interop::test_both_encodings!(json_headers_admin_codes, binary_headers_admin_codes, admin_codes);

// ---------------------------------------------------------------------------------
// Shard route mode: the commands mqadmin users run most, against shard-brokers.

/// Messages the shard-mode scenario sends (all it sends).
const FIGURES_SENT: usize = 40;

/// (brokerName, queueId) → a figure.
type PerQueue<T> = BTreeMap<(String, i32), T>;

/// Messages per (shard-broker, queue id), every queue of `brokers` listed.
fn per_broker_queue(sent: &[Sent], brokers: &[String]) -> PerQueue<i64> {
    let mut counts: PerQueue<i64> = brokers.iter().flat_map(|b| (0..QUEUES).map(move |q| ((b.clone(), q), 0))).collect();
    for s in sent {
        *counts.get_mut(&(s.broker.clone(), s.queue_id)).unwrap_or_else(|| panic!("{} queue {} is not a queue of the route", s.broker, s.queue_id)) += 1;
    }
    counts
}

/// Every (broker, queue) of `listed` once (a `PerQueue` would hide a repeat).
fn once_each<T: std::fmt::Debug>(what: &str, listed: Vec<((String, i32), T)>) -> PerQueue<T> {
    let n = listed.len();
    let table: PerQueue<T> = listed.into_iter().collect();
    assert_eq!(table.len(), n, "{what}: a queue listed twice: {table:?}");
    table
}

/// consumerProgress of `group` for `topic`: (brokerOffset, consumerOffset) per queue, as
/// mqadmin asks (no broker: every broker of the group's retry topic's route), and from
/// each shard-broker asked directly, which must name its own queues only (the queues of
/// both are then checked to be the same).
async fn progress(admin: &DefaultMQAdminExt, cluster: &Cluster, group: &str, topic: &str) -> Result<(PerQueue<(i64, i64)>, i64), String> {
    let stats = admin.examine_consume_stats(group.into(), Some(topic.into()), None, None, None).await.map_err(|e| e.to_string())?;
    let of_topic = |s: &ConsumeStats| -> Vec<((String, i32), (i64, i64))> {
        s.get_offset_table().iter().filter(|(mq, _)| mq.topic_str() == topic).map(|(mq, w)| ((mq.broker_name().to_string(), mq.queue_id()), (w.get_broker_offset(), w.get_consumer_offset()))).collect()
    };
    let merged = once_each("consumerProgress", of_topic(&stats));
    let mut direct = Vec::new();
    for name in cluster.broker_names() {
        let one = admin.examine_consume_stats(group.into(), Some(topic.into()), None, Some(cluster.addr_of(&name).to_string().into()), None);
        let one = bounded("consume stats", one).await.map_err(|e| e.to_string())?;
        let listed = of_topic(&one);
        let names: BTreeSet<&String> = listed.iter().map(|((b, _), _)| b).collect();
        assert!(names.iter().all(|b| **b == name), "GET_CONSUME_STATS of {name} names only its own queues: {listed:?}");
        direct.extend(listed);
    }
    let direct = once_each("GET_CONSUME_STATS per shard-broker", direct);
    let queues = |t: &PerQueue<(i64, i64)>| t.keys().cloned().collect::<Vec<_>>();
    if queues(&merged) != queues(&direct) {
        return Err(format!("consumerProgress lists {:?}, the shard-brokers {:?}", queues(&merged), queues(&direct)));
    }
    Ok((merged, stats.compute_total_diff()))
}

/// Waits (at most `bound`) until consumerProgress shows every queue at `want`
/// (brokerOffset, consumerOffset) and the consumer has received every body of `sent` in
/// its deliveries from the `from`-th on.
#[allow(clippy::too_many_arguments)]
async fn progress_reaches(admin: &DefaultMQAdminExt, cluster: &Cluster, group: &str, topic: &str, want: &PerQueue<(i64, i64)>, received: &Mutex<Vec<String>>, sent: &[Sent], from: usize, bound: Duration) {
    let deadline = Instant::now() + bound;
    let bodies_wanted: BTreeSet<String> = sent.iter().map(|s| s.body.clone()).collect();
    loop {
        let bodies: BTreeSet<String> = received.lock().expect("sink").iter().skip(from).cloned().collect();
        let got = progress(admin, cluster, group, topic).await;
        if bodies == bodies_wanted && got.as_ref().is_ok_and(|(t, _)| t == want) {
            return;
        }
        let missing = bodies_wanted.difference(&bodies).count();
        assert!(Instant::now() < deadline, "within {bound:?}: {missing} bodies not received since delivery {from}; consumerProgress {got:?}, wanted {want:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Shard route mode (what the shipped profiles use): the 2-shard broker is the brokers
/// `broker-a-s0` and `broker-a-s1`, and each answers the figures mqadmin sums over the
/// brokers of a cluster or route for itself only. `FIGURES_SENT` messages go to a topic
/// with 4 queues per shard-broker (8 in all) and a push consumer takes them; then, through
/// the client's admin API as mqadmin's commands call it:
/// - clusterList: exactly the two shard-brokers, each at its own address;
/// - brokerStatus: each one's put and get counts are its own queues' messages (summing
///   to what was sent), the host's under `host.<key>`, no `shard.<id>.<key>`;
/// - topicStatus and consumerProgress: each of the 8 queues once (each shard-broker
///   asked directly names only its own), offsets summing to what was sent;
/// - statsAll: TOPIC_PUT_NUMS and GROUP_GET_NUMS minute/hour/day sums, per shard-broker
///   its own, summing to what was sent (not twice it);
/// - resetOffsetByTime, the group online: every queue once, at 0, and the consumer gets
///   every message again; then offline (CONSUMER_NOT_ONLINE, so mqadmin's fallback
///   resetOffsetByTimestampOld): every queue once rolled back to 0, and consumerProgress
///   shows every consumer offset 0, the diff what was sent.
async fn shard_mode_figures(serialize_type: SerializeType) {
    capture_logs();
    let started = Instant::now();
    let label = common_interop::label_of(serialize_type);
    let cluster = Cluster::start(BrokerPath::Direct, |c| {
        ignore_disk_watermarks(c);
        c.route_mode = RouteMode::Shard;
    });
    let mut admin = start_admin(&cluster, serialize_type).await;
    let names = cluster.broker_names();
    assert_eq!(names, [format!("{BROKER_NAME}-s0"), format!("{BROKER_NAME}-s1")]);
    let addr = |name: &str| cluster.addr_of(name).to_string();
    let (topic, group) = (format!("ShardFigT{label}"), format!("ShardFigCG{label}"));

    // clusterList.
    let info = bounded("cluster info", admin.examine_broker_cluster_info()).await.expect("GET_BROKER_CLUSTER_INFO");
    let clusters: BTreeMap<String, BTreeSet<String>> =
        info.cluster_addr_table.iter().flatten().map(|(cluster, names)| (cluster.to_string(), names.iter().map(|n| n.to_string()).collect())).collect();
    assert_eq!(clusters, BTreeMap::from([(CLUSTER.to_string(), names.iter().cloned().collect())]), "clusterAddrTable");
    let brokers: BTreeMap<String, (String, BTreeMap<u64, String>)> = info
        .broker_addr_table
        .iter()
        .flatten()
        .map(|(name, d)| (name.to_string(), (d.cluster().to_string(), d.broker_addrs().iter().map(|(id, a)| (*id, a.to_string())).collect())))
        .collect();
    let want: BTreeMap<String, (String, BTreeMap<u64, String>)> = names.iter().map(|n| (n.clone(), (CLUSTER.to_string(), BTreeMap::from([(0, addr(n))])))).collect();
    assert_eq!(brokers, want, "brokerAddrTable");

    // updateTopic -c: 4 queues on every broker of the cluster.
    for name in &names {
        let config = TopicConfig::with_perm(topic.as_str(), QUEUES as u32, QUEUES as u32, 6);
        bounded("create topic", admin.create_and_update_topic_config(addr(name).into(), config)).await.expect("topic created");
    }
    for name in &names {
        let got = bounded("topic config", admin.examine_topic_config(addr(name).into(), topic.clone().into())).await.expect("GET_TOPIC_CONFIG");
        assert_eq!((got.read_queue_nums, got.write_queue_nums), (QUEUES as u32, QUEUES as u32), "{topic} on {name}");
    }
    let mut producer = common_interop::start_producer(&cluster, serialize_type, "figures-producer", format!("ShardFigPG{label}"), &topic).await;
    let (mut consumer, received) = recording_push_consumer(&cluster, serialize_type, "figures-push", &group, &topic).await;

    let before = now_ms();
    let sent = send(&mut producer, &topic, "fig", FIGURES_SENT).await;
    producer.shutdown().await;
    let ends = per_broker_queue(&sent, &names);
    let on_broker = |name: &str| -> i64 { ends.iter().filter(|((b, _), _)| b == name).map(|(_, n)| n).sum() };
    assert!(names.iter().all(|n| on_broker(n) > 0), "both shard-brokers hold some: {ends:?}");
    let all = FIGURES_SENT as i64;

    // consumerProgress: every message consumed and committed.
    let consumed: PerQueue<(i64, i64)> = ends.iter().map(|(q, n)| (q.clone(), (*n, *n))).collect();
    progress_reaches(&admin, &cluster, &group, &topic, &consumed, &received, &sent, 0, WAIT).await;
    let (_, diff) = progress(&admin, &cluster, &group, &topic).await.expect("consumerProgress");
    assert_eq!(diff, 0, "nothing left to consume");
    assert_eq!(received.lock().expect("sink").len(), FIGURES_SENT, "each message delivered once");

    // topicStatus: as mqadmin asks (the topic's route) and each shard-broker directly.
    let stats = bounded("topic stats", admin.examine_topic_stats(topic.clone().into(), None)).await.expect("GET_TOPIC_STATS_INFO");
    let got: PerQueue<(i64, i64)> = stats.get_offset_table().iter().map(|(mq, o)| ((mq.broker_name().to_string(), mq.queue_id()), (o.get_min_offset(), o.get_max_offset()))).collect();
    let want: PerQueue<(i64, i64)> = ends.iter().map(|(q, n)| (q.clone(), (0, *n))).collect();
    assert_eq!(got, want, "topicStatus: (minOffset, maxOffset) per queue");
    assert_eq!(got.values().map(|(_, max)| max).sum::<i64>(), all);
    for name in &names {
        let one = bounded("topic stats", admin.examine_topic_stats(topic.clone().into(), Some(addr(name).into()))).await.expect("GET_TOPIC_STATS_INFO");
        let listed: Vec<((String, i32), i64)> = one.get_offset_table().iter().map(|(mq, o)| ((mq.broker_name().to_string(), mq.queue_id()), o.get_max_offset())).collect();
        let want: PerQueue<i64> = ends.iter().filter(|((b, _), _)| b == name).map(|(q, n)| (q.clone(), *n)).collect();
        assert_eq!(once_each("GET_TOPIC_STATS_INFO", listed), want, "{name} answers its own queues only");
    }

    // brokerStatus: each shard-broker's own counts, the host's labelled.
    for name in &names {
        let rt = bounded("runtime stats", admin.fetch_broker_runtime_stats(addr(name).into())).await.expect("GET_BROKER_RUNTIME_INFO");
        let table: BTreeMap<String, String> = rt.table.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let num = |k: &str| -> i64 { table.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name}: {k} a number in {table:?}")) };
        let shard_keys: Vec<&String> = table.keys().filter(|k| k.starts_with("shard.")).collect();
        assert!(shard_keys.is_empty(), "{name}: no per-shard keys: {shard_keys:?}");
        assert_eq!(table.get("routeMode").map(String::as_str), Some("shard"), "{name}");
        let own = on_broker(name);
        let counts = (num("putMessageTimesTotal"), num("msgPutTotalTodayNow"), num("msgGetTotalTodayNow"));
        assert_eq!(counts, (own, own, own), "{name}: (putMessageTimesTotal, msgPutTotalTodayNow, msgGetTotalTodayNow) are its own");
        let host = (num("host.putMessageTimesTotal"), num("host.msgPutTotalTodayNow"), num("host.msgGetTotalTodayNow"));
        assert_eq!(host, (all, all, all), "{name}: the host's under host.<key>");
    }

    // statsAll: the topic's puts and the group's gets, per shard-broker its own.
    for name in &names {
        let own = on_broker(name) as u64;
        for (stats_name, key) in [("TOPIC_PUT_NUMS", topic.clone()), ("GROUP_GET_NUMS", format!("{topic}@{group}"))] {
            let data = admin.view_broker_stats_data(addr(name).into(), stats_name.into(), key.into());
            let data = bounded("broker stats", data).await.expect("VIEW_BROKER_STATS_DATA");
            let sums = (data.get_stats_minute().get_sum(), data.get_stats_hour().get_sum(), data.get_stats_day().get_sum());
            assert_eq!(sums, (own, own, own), "{name} {stats_name}: minute, hour, day sums");
        }
    }

    // resetOffsetByTime with the group online: every queue once, at 0; the consumer
    // rewinds and gets every message again.
    let delivered = received.lock().expect("sink").len();
    let reset = admin.reset_offset_by_timestamp(None, topic.clone().into(), group.clone().into(), before as u64, true);
    let offsets = bounded("reset offset", reset).await.expect("INVOKE_BROKER_TO_RESET_OFFSET with the consumer online");
    let got: PerQueue<u64> = offsets.iter().map(|(mq, o)| ((mq.broker_name().to_string(), mq.queue_id()), *o)).collect();
    let want: PerQueue<u64> = ends.keys().map(|q| (q.clone(), 0)).collect();
    assert_eq!(got, want, "every queue rewound to its first message");
    progress_reaches(&admin, &cluster, &group, &topic, &consumed, &received, &sent, delivered, WAIT + CLIENT_RESET_SETTLE).await;
    bounded("push consumer shutdown", consumer.shutdown()).await;

    // resetOffsetByTime with the group offline: CONSUMER_NOT_ONLINE, on which mqadmin
    // resets through resetOffsetByTimestampOld (consume stats, a timestamp search and an
    // offset update per queue of every broker of the route).
    let reset = admin.reset_offset_by_timestamp(None, topic.clone().into(), group.clone().into(), before as u64, true).await;
    check_refused("reset offset with no consumer online", reset, CONSUMER_NOT_ONLINE, None);
    let rollback = admin.reset_offset_by_timestamp_old(None, group.clone().into(), topic.clone().into(), before as u64, true);
    let rollback = bounded("reset offset (old)", rollback).await.expect("resetOffsetByTimestampOld");
    let listed: Vec<((String, i32), (i64, i64, i64))> =
        rollback.iter().map(|r| ((r.broker_name.to_string(), r.queue_id as i32), (r.broker_offset, r.consumer_offset, r.rollback_offset))).collect();
    let want: PerQueue<(i64, i64, i64)> = ends.iter().map(|(q, n)| (q.clone(), (*n, *n, 0))).collect();
    assert_eq!(once_each("resetOffsetByTimestampOld", listed), want, "(brokerOffset, consumerOffset, rollbackOffset) per queue");
    let (after, diff) = progress(&admin, &cluster, &group, &topic).await.expect("consumerProgress");
    let rewound: PerQueue<(i64, i64)> = ends.iter().map(|(q, n)| (q.clone(), (*n, 0))).collect();
    assert_eq!(after, rewound, "consumerProgress after the reset: (brokerOffset, consumerOffset) per queue");
    assert_eq!(diff, all, "the diff is everything sent");

    bounded("admin shutdown", admin.shutdown()).await;
    eprintln!("shard-mode admin figures ({label}) took {:?}", started.elapsed());
}

/// A started rocketmq-client-rust push consumer of `group` on `topic` that records
/// every body it is handed (as text), in arrival order.
async fn recording_push_consumer(cluster: &Cluster, serialize_type: SerializeType, scope: &'static str, group: &str, topic: &str) -> (DefaultMQPushConsumer, Arc<Mutex<Vec<String>>>) {
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = received.clone();
    let mut consumer = push_consumer(cluster, serialize_type, scope, group).build();
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        let bodies = msgs.iter().map(|m| String::from_utf8_lossy(m.body().as_deref().unwrap_or_default()).to_string());
        sink.lock().expect("sink").extend(bodies);
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts");
    (consumer, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_mode_binary_headers_mqadmin_figures() {
    shard_mode_figures(SerializeType::ROCKETMQ).await;
}
