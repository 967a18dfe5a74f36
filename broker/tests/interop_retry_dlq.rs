//! Interop for issue 11: retries, dead letters and delay levels with the unmodified
//! crates.io `rocketmq-client-rust` 1.0.0 against a RingMQ NameServer and broker
//! ("broker-a", two shards, sync flush) in this process, in both header encodings.
//!
//! 1. A clustering push consumer (`max_reconsume_times = 2`) whose listener returns
//!    RECONSUME_LATER for the `bad-*` messages: the heartbeat alone creates
//!    `%RETRY%<group>` (in the broker's GET_ALL_TOPIC_CONFIG and routable through the
//!    NameServer before anything failed); each failing message is delivered with
//!    reconsumeTimes 0, 1, 2 (with its original topic, keys, tags and msgId), each
//!    retry no earlier than its delay level (3 + reconsumeTimes, as the client sends
//!    delayLevel 0), then it is found once in `%DLQ%<group>` with body, keys, tags and
//!    msgId (UNIQ_KEY) intact; the `good-*` messages are consumed once.
//! 2. Messages sent by the client's producer with delay level L arrive no earlier than
//!    L's delay after the send started and at most `DELAY_LATE_MAX` after it, with
//!    topic, queue, tags, keys, user properties and msgId intact; a level above the
//!    table is clamped to the last level; an undelayed message is not held.
//!
//! The broker's `message_delay_level` is short (`DELAY_LEVELS`) so the tests are fast,
//! with distinct values at the levels that matter, so timing shows which level the
//! broker used.
//!
//! What the client does on the wire is recorded, not assumed: the client reaches the
//! broker only through a recording proxy (`common_interop`'s cluster with
//! `BrokerPath::Proxied`: the NameServer is reached through a second proxy that
//! rewrites the broker address in its answers to the broker proxy's, a same-length
//! byte substitution), so each test checks the request codes and header
//! fields the client sent (HEART_BEAT 34, CONSUMER_SEND_MSG_BACK 36 with its
//! delayLevel / maxReconsumeTimes / originMsgId, PULL_MESSAGE 11 of the retry topic,
//! no fallback send to `%RETRY%`) and the broker's answers.
//!
//! What this client cannot do: its listener gets an immutable
//! `ConsumeConcurrentlyContext`, so it cannot ask for a per-batch delay level (every
//! send-back says delayLevel 0); its consumed `MessageExt::msg_id` is the broker's
//! offsetMsgId, so the send-back's `originMsgId` names the copy just consumed, not the
//! original message (Java's client sends the UNIQ_KEY).
//!
//! Found (fixed): the broker replaced the stored ORIGIN_MESSAGE_ID with each send-back's
//! `originMsgId` (RocketMQ 4.9 keeps the stored one): with this client the second retry
//! and the dead letter named the previous copy.
//! `json_headers_origin_message_id_is_kept_across_retries` pins it.
//!
//! Tests run one at a time (`SERIAL`: their timing bounds assume an unloaded broker);
//! every wait is bounded.
//!
//! Owns: the scenarios, this test's broker settings (`DELAY_LEVELS`) and timing
//! bounds, what a test sent and saw (`Sent`, `Delivery`), and its push consumer and
//! readers.

mod common_interop;

use common_interop::{
    bounded, ignore_disk_watermarks, label_of, push_consumer, raw_call, serialize_code, start_lite_pull_from_start, start_producer,
    wait_until, BrokerPath, Cluster, QUEUES,
};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::route::TopicConfigAndMappingSerializeWrapper;
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, SendStatus,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(40);
/// The broker's `messageDelayLevel` in these tests: 18 levels, level L = `DELAY_S[L-1]`
/// seconds. Level 3 (a first retry) is 1 s, level 4 (a second retry) 2 s, level 18
/// (the last, where higher levels clamp) 3 s.
const DELAY_LEVELS: &str = "1s 2s 1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 3s";
const DELAY_S: [u64; 18] = [1, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3];
/// The consumer's `max_reconsume_times`.
const MAX_RECONSUME: i32 = 2;
/// How late a delayed message may arrive after its due time (send start + delay):
/// the broker's delivery tick, its wake-up of the consumer's suspended pull, the
/// client's hand-off to its consume threads, and a loaded 2-core machine.
const DELAY_LATE_MAX: Duration = Duration::from_millis(1_500);
/// How late a retry may arrive after its due time (the previous delivery + the delay
/// of level 3 + reconsumeTimes): the same, plus the client's send-back round trip
/// after its listener returned.
const RETRY_LATE_MAX: Duration = Duration::from_millis(1_500);
/// The store clock has whole milliseconds: a message stored at 12.9 ms is due at
/// 1012 ms, up to this much before "send start + delay" by our (finer) clock.
const STORE_CLOCK_GRANULARITY: Duration = Duration::from_millis(1);
/// After the dead-letter copies are found, how long we watch for a wrong extra delivery
/// (longer than any retry delay of the table plus its bound).
const QUIET_AFTER_DLQ: Duration = Duration::from_millis(3_500);
/// Held across awaits, so an async lock (each test has its own runtime; a panic does
/// not poison it).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// This test's broker: the short delay table.
fn start_cluster() -> Cluster {
    Cluster::start(BrokerPath::Proxied, |config| {
        config.message_delay_level = DELAY_LEVELS.into();
        ignore_disk_watermarks(config);
    })
}

/// Raw requests only this test makes.
impl Cluster {
    /// The broker's topic table (GET_ALL_TOPIC_CONFIG): name → (read, write, perm).
    fn broker_topics(&self) -> BTreeMap<String, (i32, i32, i32)> {
        let r = raw_call(self.broker_addr(), RemotingCommand::request(rq::GET_ALL_TOPIC_CONFIG));
        assert_eq!(r.code, rs::SUCCESS, "GET_ALL_TOPIC_CONFIG: {:?}", r.remark);
        let wrapper = TopicConfigAndMappingSerializeWrapper::decode(&r.body).expect("topic config body");
        wrapper.topic_config_table.into_iter().map(|(name, c)| (name, (c.read_queue_nums, c.write_queue_nums, c.perm))).collect()
    }
}

/// RocketMQ's properties string: `name \x01 value \x02` repeated.
fn decode_properties(s: &str) -> BTreeMap<String, String> {
    s.split('\u{2}').filter_map(|kv| kv.split_once('\u{1}')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

// ---------------------------------------------------------------------------------
// Messages.

/// One delivery as the listener (or a reader) saw it.
#[derive(Debug, Clone)]
struct Delivery {
    at: Instant,
    body: String,
    topic: String,
    queue_id: i32,
    reconsume_times: i32,
    msg_id: String,
    props: BTreeMap<String, String>,
    tags: Option<String>,
    keys: Vec<String>,
}

impl Delivery {
    fn of(msg: &MessageExt, at: Instant) -> Self {
        Self {
            at,
            body: String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string(),
            topic: msg.topic().to_string(),
            queue_id: msg.queue_id(),
            reconsume_times: msg.reconsume_times(),
            msg_id: msg.msg_id().to_string(),
            props: msg.get_properties().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            tags: msg.tags().map(|t| t.to_string()),
            keys: msg.get_keys().map(|k| k.as_str().split(' ').map(str::to_string).collect()).unwrap_or_default(),
        }
    }

    fn prop(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str)
    }
}

/// What a test sent, keyed by body.
#[derive(Debug, Clone)]
struct Sent {
    started: Instant,
    msg_id: String,
    /// The broker's id of the stored message (store host + commit log offset).
    offset_msg_id: String,
    queue_id: i32,
    tag: String,
    keys: Vec<String>,
    note: String,
}

fn message(topic: &str, body: &str, tag: &str, keys: &[String], note: &str, delay_level: Option<i32>) -> Message {
    let mut b = Message::builder().topic(topic).tags(tag).keys(keys.to_vec()).body_slice(body.as_bytes());
    b = b.raw_property("note", note).expect("user property");
    if let Some(level) = delay_level {
        b = b.delay_level(level);
    }
    b.build().expect("message")
}

async fn send(cluster: &Cluster, producer: &mut DefaultMQProducer, topic: &str, body: &str, tag: &str, delay_level: Option<i32>) -> Sent {
    let keys = vec![format!("key-{body}"), "interop".to_string()];
    let note = format!("héllo {body} = ok");
    let started = Instant::now();
    let r = bounded("send", producer.send_with_timeout(message(topic, body, tag, &keys, &note, delay_level), 5_000))
        .await
        .unwrap_or_else(|e| {
            let answers: Vec<_> =
                [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2].into_iter().flat_map(|c| cluster.broker_proxy().exchanges(c)).collect();
            panic!("send of {body} failed: {e}; the sends on the wire and their answers: {answers:#?}")
        })
        .expect("a send result");
    assert_eq!(r.send_status, SendStatus::SendOk, "{body}");
    let msg_id = r.msg_id.as_ref().map(|id| id.to_string()).expect("msgId");
    assert_eq!(msg_id.len(), 32, "{body}: UNIQ_KEY {msg_id}");
    let queue_id = r.message_queue.as_ref().expect("message queue").queue_id();
    let offset_msg_id = r.offset_msg_id.clone().expect("offsetMsgId");
    Sent { started, msg_id, offset_msg_id, queue_id, tag: tag.to_string(), keys, note }
}

/// Body, tags, keys, user property and msgId (UNIQ_KEY) as sent.
fn check_intact(d: &Delivery, sent: &Sent, what: &str) {
    let body = &d.body;
    assert_eq!(d.tags.as_deref(), Some(sent.tag.as_str()), "{what}: tags of {body}");
    assert_eq!(d.keys, sent.keys, "{what}: keys of {body}");
    assert_eq!(d.prop("note"), Some(sent.note.as_str()), "{what}: user property of {body}");
    assert_eq!(d.prop("UNIQ_KEY"), Some(sent.msg_id.as_str()), "{what}: msgId (UNIQ_KEY) of {body}");
}

/// A clustering push consumer whose listener records every delivery and returns
/// RECONSUME_LATER for bodies starting with `bad`.
async fn start_push_consumer(
    cluster: &Cluster,
    serialize_type: SerializeType,
    group: &str,
    topic: &str,
) -> (DefaultMQPushConsumer, Arc<Mutex<Vec<Delivery>>>) {
    let seen: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let sink = seen.clone();
    let mut consumer =
        push_consumer(cluster, serialize_type, "push", group).consume_message_batch_max_size(1).max_reconsume_times(MAX_RECONSUME).build();
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        let now = Instant::now();
        let mut fail = false;
        let mut sink = sink.lock().expect("sink");
        for msg in msgs {
            let d = Delivery::of(msg, now);
            fail |= d.body.starts_with("bad");
            sink.push(d);
        }
        Ok(if fail { ConsumeConcurrentlyStatus::ReconsumeLater } else { ConsumeConcurrentlyStatus::ConsumeSuccess })
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts");
    (consumer, seen)
}

/// Waits until the client has pulled (through the proxy) each of `queues` of `topic`.
async fn await_pulls(cluster: &Cluster, topic: &str, queues: i32) {
    wait_until(&format!("pulls of every queue of {topic}"), || {
        let pulled: std::collections::BTreeSet<String> = cluster
            .broker_proxy()
            .exchanges(rq::PULL_MESSAGE)
            .into_iter()
            .filter(|(req, _)| req.ext.get("topic").map(String::as_str) == Some(topic))
            .filter_map(|(req, _)| req.ext.get("queueId").cloned())
            .collect();
        pulled.len() == queues as usize
    })
    .await;
}

/// Reads every message of `topic` from offset 0 with a lite-pull consumer (assign mode)
/// until `count` are there, then briefly for any extra.
async fn read_topic(cluster: &Cluster, serialize_type: SerializeType, group: String, topic: &str, count: usize) -> Vec<Delivery> {
    let (consumer, _) = start_lite_pull_from_start(cluster.namesrv_addr(), serialize_type, "lite-pull", &group, topic).await;
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < count {
        assert!(
            Instant::now() < deadline,
            "read {} of {count} from {topic}: {:?}",
            got.len(),
            got.iter().map(|d: &Delivery| &d.body).collect::<Vec<_>>()
        );
        for msg in consumer.poll_with_timeout(500).await {
            got.push(Delivery::of(&msg, Instant::now()));
        }
    }
    for msg in consumer.poll_with_timeout(700).await {
        got.push(Delivery::of(&msg, Instant::now()));
    }
    consumer.shutdown().await;
    got
}

// ---------------------------------------------------------------------------------
// 1. Retries and dead letters.

/// With `check_origin`, also that every retry copy and the dead letter keep the
/// original message's ORIGIN_MESSAGE_ID (RocketMQ 4.9's consumerSendMsgBack keeps the
/// stored property and sets the stored message's own id only when there is none).
async fn retried_then_dead_lettered(serialize_type: SerializeType, check_origin: bool) {
    let label = label_of(serialize_type);
    let cluster = start_cluster();
    let topic = format!("InteropRetry{label}");
    let group = format!("RetryCG-{label}");
    let retry_topic = format!("%RETRY%{group}");
    let dlq_topic = format!("%DLQ%{group}");
    cluster.create_topic(&topic, QUEUES);
    assert!(!cluster.broker_topics().contains_key(&retry_topic), "no retry topic before the consumer");
    assert!(!cluster.namesrv_routes(&retry_topic), "no route for the retry topic before the consumer");

    // The heartbeat alone creates the retry topic: nothing was sent yet.
    let started = Instant::now();
    let (mut consumer, seen) = start_push_consumer(&cluster, serialize_type, &group, &topic).await;
    wait_until("the retry topic in GET_ALL_TOPIC_CONFIG", || cluster.broker_topics().contains_key(&retry_topic)).await;
    assert_eq!(cluster.broker_topics()[&retry_topic], (1, 1, 6), "{retry_topic}: 1 read / 1 write queue, perm rw");
    wait_until("the retry topic routed by the NameServer", || cluster.namesrv_routes(&retry_topic)).await;
    let heartbeats = cluster.broker_proxy().exchanges(rq::HEART_BEAT);
    assert!(!heartbeats.is_empty(), "the consumer sent a heartbeat");
    assert!(
        heartbeats.iter().all(|(_, a)| a.as_ref().is_some_and(|a| a.code == rs::SUCCESS)),
        "heartbeats answered SUCCESS: {heartbeats:?}"
    );
    for code in [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2, rq::SEND_BATCH_MESSAGE, rq::CONSUMER_SEND_MSG_BACK] {
        assert!(cluster.broker_proxy().exchanges(code).is_empty(), "nothing sent before the retry topic existed (code {code})");
    }
    let retry_topic_after = started.elapsed();
    // The client pulls the retry queue once it has its route (before anything failed).
    await_pulls(&cluster, &topic, QUEUES).await;
    await_pulls(&cluster, &retry_topic, 1).await;
    let retry_pulled_after = started.elapsed();
    eprintln!(
        "[{label}] retry topic created {retry_topic_after:?} after the consumer started; its queue pulled after {retry_pulled_after:?}"
    );

    let mut producer = start_producer(&cluster, serialize_type, "producer", format!("RetryPG-{label}"), &topic).await;
    let names: Vec<String> = (0..3).flat_map(|i| [format!("good-{i}"), format!("bad-{i}")]).collect();
    let mut sent: HashMap<String, Sent> = HashMap::new();
    for name in &names {
        sent.insert(name.clone(), send(&cluster, &mut producer, &topic, name, "TagR", None).await);
    }
    producer.shutdown().await;

    let deliveries = |body: &str| seen.lock().expect("seen").iter().filter(|d| d.body == body).cloned().collect::<Vec<_>>();
    wait_until("every failing message delivered 1 + max times", || {
        (0..3).all(|i| deliveries(&format!("bad-{i}")).len() > MAX_RECONSUME as usize)
    })
    .await;
    let dead = read_topic(&cluster, serialize_type, format!("DlqReader-{label}"), &dlq_topic, 3).await;
    tokio::time::sleep(QUIET_AFTER_DLQ).await;
    bounded("push consumer shutdown", consumer.shutdown()).await;

    // Deliveries: 0..=max for the failing ones, once for the others; intact each time.
    for name in &names {
        let s = &sent[name];
        let got = deliveries(name);
        let times: Vec<i32> = got.iter().map(|d| d.reconsume_times).collect();
        if name.starts_with("bad") {
            assert_eq!(times, (0..=MAX_RECONSUME).collect::<Vec<_>>(), "{name}: first delivery, then reconsumeTimes 1..=max, then none");
            let gaps: Vec<Duration> = got.windows(2).map(|w| w[1].at.duration_since(w[0].at)).collect();
            eprintln!("[{label}] {name}: delivered {} times, reconsumeTimes {times:?}, gaps {gaps:?}", got.len());
            for (i, gap) in gaps.iter().enumerate() {
                // Retry i+1 was sent back with reconsumeTimes i and delayLevel 0: level 3 + i.
                let delay = Duration::from_secs(DELAY_S[2 + i]);
                assert!(
                    *gap + STORE_CLOCK_GRANULARITY >= delay,
                    "{name}: retry {} came {gap:?} after the previous delivery, before level {}'s {delay:?}",
                    i + 1,
                    3 + i
                );
                assert!(
                    *gap <= delay + RETRY_LATE_MAX,
                    "{name}: retry {} came {gap:?} after the previous delivery: over {delay:?} + {RETRY_LATE_MAX:?}",
                    i + 1
                );
            }
        } else {
            assert_eq!(times, [0], "{name}: consumed once");
        }
        for d in &got {
            assert_eq!(d.topic, topic, "{name}: a retried message reaches the listener with its original topic");
            check_intact(d, s, "delivery");
        }
    }

    // The dead letters: each failing message once, intact.
    let mut dead_bodies: Vec<&str> = dead.iter().map(|d| d.body.as_str()).collect();
    dead_bodies.sort_unstable();
    assert_eq!(dead_bodies, ["bad-0", "bad-1", "bad-2"], "each failing message once in {dlq_topic}");
    for d in &dead {
        assert_eq!(d.topic, dlq_topic);
        check_intact(d, &sent[&d.body], "dead letter");
        assert_eq!(d.prop("RETRY_TOPIC"), Some(topic.as_str()), "{}: RETRY_TOPIC names the original topic", d.body);
        assert_eq!(d.reconsume_times, MAX_RECONSUME + 1, "{}: RocketMQ stores reconsumeTimes + 1 in the dead-letter copy", d.body);
        assert!(d.prop("DELAY").is_none(), "{}: a dead letter is stored at once, with no delay level: {:?}", d.body, d.props);
        eprintln!(
            "[{label}] dead letter {}: msgId {} ORIGIN_MESSAGE_ID {:?} properties {:?}",
            d.body,
            d.msg_id,
            d.prop("ORIGIN_MESSAGE_ID"),
            d.props
        );
    }

    // On the wire: one CONSUMER_SEND_MSG_BACK per failed delivery, delayLevel 0 (the
    // listener cannot set one: the client hands it an immutable context), the
    // consumer's maxReconsumeTimes, each answered SUCCESS; no fallback send to the
    // retry topic.
    let backs = cluster.broker_proxy().exchanges(rq::CONSUMER_SEND_MSG_BACK);
    assert_eq!(backs.len(), 3 * (MAX_RECONSUME as usize + 1), "one send-back per failed delivery: {backs:#?}");
    for (req, answer) in &backs {
        assert_eq!(req.ext.get("group"), Some(&group), "{req:?}");
        assert_eq!(req.ext.get("delayLevel").map(String::as_str), Some("0"), "{req:?}");
        assert_eq!(req.ext.get("maxReconsumeTimes"), Some(&MAX_RECONSUME.to_string()), "{req:?}");
        let answer = answer.as_ref().unwrap_or_else(|| panic!("no answer to {req:?}"));
        assert_eq!(answer.code, rs::SUCCESS, "send-back answered {:?}", answer.remark);
    }
    // This client's originMsgId is the (offset) msgId of the copy it consumed.
    let mut origin_ids: Vec<&String> = backs.iter().filter_map(|(req, _)| req.ext.get("originMsgId")).collect();
    let mut failed_ids: Vec<String> =
        seen.lock().expect("seen").iter().filter(|d| d.body.starts_with("bad")).map(|d| d.msg_id.clone()).collect();
    origin_ids.sort();
    failed_ids.sort();
    assert_eq!(origin_ids, failed_ids.iter().collect::<Vec<_>>(), "originMsgId of each send-back: the consumed copy's msgId");
    eprintln!("[{label}] CONSUMER_SEND_MSG_BACK headers: {:#?}", backs.iter().map(|(r, _)| &r.ext).collect::<Vec<_>>());
    let fallback: Vec<_> = [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2, rq::SEND_BATCH_MESSAGE]
        .into_iter()
        .flat_map(|c| cluster.broker_proxy().exchanges(c))
        .filter(|(req, _)| {
            [req.ext.get("topic"), req.ext.get("b")].into_iter().flatten().any(|t| t.starts_with("%RETRY%") || t.starts_with("%DLQ%"))
        })
        .collect();
    assert!(fallback.is_empty(), "no send to a retry or DLQ topic (the client's fallback): {fallback:?}");
    let encodings = cluster.encodings_seen();
    assert_eq!(encodings, [serialize_code(serialize_type)], "header encodings the client sent");
    let codes: std::collections::BTreeSet<i32> =
        cluster.broker_proxy().frames().iter().filter(|f| f.to_server && !f.response).map(|f| f.code).collect();
    eprintln!("[{label}] request codes the clients sent the broker: {codes:?}");

    if check_origin {
        // This client's originMsgId is the id of the copy it consumed (its MessageExt's
        // msgId is the broker's offsetMsgId, not UNIQ_KEY as in Java's client), so only
        // a broker that keeps the stored ORIGIN_MESSAGE_ID names the original message.
        for i in 0..3 {
            let name = format!("bad-{i}");
            let original = &sent[&name].offset_msg_id;
            let got = deliveries(&name);
            assert_eq!(&got[0].msg_id, original, "{name}: the first delivery is the stored original");
            for d in &got[1..] {
                assert_eq!(
                    d.prop("ORIGIN_MESSAGE_ID"),
                    Some(original.as_str()),
                    "{name}: retry with reconsumeTimes {} names the original message",
                    d.reconsume_times
                );
            }
            let dead = dead.iter().find(|d| d.body == name).expect("dead letter");
            assert_eq!(dead.prop("ORIGIN_MESSAGE_ID"), Some(original.as_str()), "{name}: the dead letter names the original message");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_failing_messages_are_retried_then_dead_lettered() {
    let _serial = SERIAL.lock().await;
    retried_then_dead_lettered(SerializeType::JSON, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_headers_failing_messages_are_retried_then_dead_lettered() {
    let _serial = SERIAL.lock().await;
    retried_then_dead_lettered(SerializeType::ROCKETMQ, false).await;
}

/// Pins a broker bug this test found (fixed): CONSUMER_SEND_MSG_BACK set ORIGIN_MESSAGE_ID from
/// each request's `originMsgId` header, replacing the one the stored copy carries, where
/// RocketMQ 4.9 keeps the stored one (`isBlank(originMsgId) ? msgExt.getMsgId() :
/// originMsgId`, the header field unused). This client sends the consumed copy's own
/// offsetMsgId, so the second retry names the first retry copy and the dead letter the
/// last retry copy instead of the original message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_origin_message_id_is_kept_across_retries() {
    let _serial = SERIAL.lock().await;
    retried_then_dead_lettered(SerializeType::JSON, true).await;
}

// ---------------------------------------------------------------------------------
// 2. Delay levels.

async fn delayed_messages_arrive_on_time(serialize_type: SerializeType) {
    let label = label_of(serialize_type);
    let cluster = start_cluster();
    let topic = format!("InteropDelay{label}");
    let group = format!("DelayCG-{label}");
    cluster.create_topic(&topic, QUEUES);
    let (mut consumer, seen) = start_push_consumer(&cluster, serialize_type, &group, &topic).await;
    await_pulls(&cluster, &topic, QUEUES).await;
    let mut producer = start_producer(&cluster, serialize_type, "producer", format!("DelayPG-{label}"), &topic).await;

    // (body, level asked, level expected): 1 (1 s), 2 (2 s), 18 (the last, 3 s), and
    // 25, above the table, clamped to 18; then undelayed messages.
    let plan: Vec<(String, Option<i32>, Option<usize>)> = [(1, 1), (2, 2), (18, 18), (25, 18)]
        .into_iter()
        .flat_map(|(asked, level)| (0..2).map(move |i| (format!("level{asked}-{i}"), Some(asked), Some(level))))
        .chain((0..2).map(|i| (format!("now-{i}"), None, None)))
        .collect();
    let mut sent: HashMap<String, (Sent, Option<usize>)> = HashMap::new();
    for (body, asked, level) in &plan {
        sent.insert(body.clone(), (send(&cluster, &mut producer, &topic, body, "TagD", *asked).await, *level));
    }
    producer.shutdown().await;

    wait_until("every message", || seen.lock().expect("seen").len() >= plan.len()).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    bounded("push consumer shutdown", consumer.shutdown()).await;
    let got = seen.lock().expect("seen").clone();
    let mut bodies: Vec<&str> = got.iter().map(|d| d.body.as_str()).collect();
    bodies.sort_unstable();
    let mut want: Vec<&str> = plan.iter().map(|(b, _, _)| b.as_str()).collect();
    want.sort_unstable();
    assert_eq!(bodies, want, "each message once");
    let mut figures = Vec::new();
    for d in &got {
        let (s, level) = &sent[&d.body];
        let after = d.at.duration_since(s.started);
        let due = Duration::from_secs(level.map_or(0, |l| DELAY_S[l - 1]));
        figures.push((d.body.clone(), after));
        assert!(after + STORE_CLOCK_GRANULARITY >= due, "{} arrived {after:?} after its send started: before its {due:?} delay", d.body);
        assert!(after <= due + DELAY_LATE_MAX, "{} arrived {after:?} after its send started: over {due:?} + {DELAY_LATE_MAX:?}", d.body);
        assert_eq!(d.topic, topic, "{}: original topic", d.body);
        assert_eq!(d.queue_id, s.queue_id, "{}: original queue", d.body);
        assert_eq!(d.reconsume_times, 0, "{}", d.body);
        check_intact(d, s, "delayed delivery");
    }
    figures.sort();
    eprintln!("[{label}] arrival after the send started: {figures:?}");
    if let Some(d) = got.iter().find(|d| d.body.starts_with("level1-")) {
        eprintln!("[{label}] a delivered delayed message's properties: {:?}", d.props);
    }
    // On the wire: each send carried the level asked for (unclamped) in DELAY.
    let sends: Vec<_> = [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2].into_iter().flat_map(|c| cluster.broker_proxy().exchanges(c)).collect();
    eprintln!("[{label}] sends on the wire: codes {:?}", sends.iter().map(|(r, _)| r.code).collect::<std::collections::BTreeSet<_>>());
    for (body, asked, _) in &plan {
        let uniq = &sent[body].0.msg_id;
        let props = sends
            .iter()
            .filter_map(|(req, answer)| {
                let p = req.ext.get("properties").or_else(|| req.ext.get("i"))?;
                let map = decode_properties(p);
                (map.get("UNIQ_KEY") == Some(uniq) && answer.as_ref().is_some_and(|a| a.code == rs::SUCCESS)).then_some(map)
            })
            .next()
            .unwrap_or_else(|| panic!("the successful send of {body} on the wire"));
        assert_eq!(props.get("DELAY"), asked.map(|l| l.to_string()).as_ref(), "{body}: DELAY on the wire");
    }
    assert_eq!(cluster.encodings_seen(), [serialize_code(serialize_type)], "header encodings the client sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_headers_delay_levels() {
    let _serial = SERIAL.lock().await;
    delayed_messages_arrive_on_time(SerializeType::JSON).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_headers_delay_levels() {
    let _serial = SERIAL.lock().await;
    delayed_messages_arrive_on_time(SerializeType::ROCKETMQ).await;
}
