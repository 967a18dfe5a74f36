//! Retries, dead letters and delay levels (issue 11) through the RingMQ client against
//! a RingMQ broker in this process, with RocketMQ 4.9's semantics as the expectation:
//! - a clustering group's `%RETRY%<group>` topic is created by its heartbeat alone and
//!   is routable through the NameServer;
//! - a concurrent push consumer whose listener returns RECONSUME_LATER sees each failing
//!   message again with reconsume_times 1..=max (from the retry topic, with its original
//!   topic, keys and msgId), and then finds it in `%DLQ%<group>` (read with the pull
//!   consumer) with body, keys, tags and msgId intact; the failing messages do not hold
//!   the original queue's offset back (sent back = consumed);
//! - an orderly consumer retries a failing message locally up to the maximum, then
//!   hands it to the dead letter queue and consumes the next message of the queue; its
//!   fallback (Java's new message to `%RETRY%<group>` with reconsumeTimes at the
//!   maximum in the send header) lands in `%DLQ%<group>` too;
//! - a message sent with delay level 1 (1 s) arrives no earlier than 1 s after it was
//!   sent (to the store clock's millisecond) and no later than `DELAY_LATE_MAX` after
//!   that, with its original topic, queue, tags, keys and msgId.
//!
//! Setup as in `client_cluster.rs`: a NameServer and one broker ("broker-a", two shards,
//! so a send-back may have to find its message on the other shard) in this process,
//! the client on a glommio executor of its own. Tests run one at a time (`SERIAL`);
//! every wait is bounded by `WAIT`.

use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::admin;
use ringmq_client::consumer::kernel;
use ringmq_client::consumer::retry::{dlq_topic, orderly_retry_message, retry_topic};
use ringmq_client::consumer::{
    ConsumeFrom, ConsumeOrderlyStatus, ConsumeStatus, PullConsumer, PullConsumerConfig, PushConsumer, PushConsumerConfig,
};
use ringmq_client::message::properties::keys;
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::{ClientConfig, ClientInstance, Message, MessageExt};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
/// How late a delayed message may arrive after its due time: the broker's delivery
/// tick (100 ms idle poll), a delivery pass waiting for its previous copies to be
/// durable (up to the async flush interval, 500 ms: measured ~450 ms late for messages
/// due 1 ms after a pass), and scheduling on a loaded 2-core CI machine.
const DELAY_LATE_MAX: Duration = Duration::from_millis(2_000);
/// RocketMQ's level 1 in the default `messageDelayLevel`.
const LEVEL_1: Duration = Duration::from_secs(1);
/// A due time is the store timestamp (whole wall-clock ms, rounded down) plus the
/// level's delay, as in RocketMQ: a message stored at 12.9 ms is due at 1012 ms, up to
/// this much before 1 s after the send started by our (finer) clock.
const STORE_CLOCK_GRANULARITY: Duration = Duration::from_millis(1);
/// After a message reached the dead letter queue, how long we watch for a wrong extra
/// delivery (several retry delays at level 1).
const QUIET_AFTER_DLQ: Duration = Duration::from_millis(2_500);
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
    config.shard_count = 2;
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
    namesrv: Option<namesrv::server::ServerHandle>,
    broker: Option<BrokerHandle>,
    _root: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        init_logging();
        let namesrv = start_namesrv();
        let addrs = vec![namesrv.local_addr().to_string()];
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let broker = launch::start(broker_config("broker-a", &addrs, &root.path().join("broker-a"))).expect("broker starts");
        Self { namesrv: Some(namesrv), broker: Some(broker), _root: root }
    }

    fn client_config(&self) -> ClientConfig {
        let namesrv = self.namesrv.as_ref().expect("namesrv");
        let mut c = ClientConfig::new([namesrv.local_addr().to_string()]);
        c.client_ip = Some("127.0.0.1".parse().expect("ip"));
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(b) = self.broker.take() {
            b.stop();
            b.join();
        }
        if let Some(n) = self.namesrv.take() {
            n.stop();
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
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_topic(config: &ClientConfig, topic: &str, queues: i32) {
    let instance = ClientInstance::start(config.clone()).expect("admin instance");
    admin::create_topic_on_cluster(&instance, None, topic, queues).await.expect("topic created");
    instance.shutdown().await;
}

/// Waits until the NameServer routes `topic` (created by the broker, not by us).
async fn wait_for_route(config: &ClientConfig, topic: &str, why: &str) {
    let instance = ClientInstance::start(config.clone()).expect("instance");
    let deadline = Instant::now() + WAIT;
    loop {
        match instance.fetch_route(topic).await {
            Ok(route) if !route.read_queues.is_empty() => break,
            other => assert!(Instant::now() < deadline, "no route for {topic} within {WAIT:?} ({why}): {other:?}"),
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    instance.shutdown().await;
}

/// Reads every message of `topic` from its first offset until `count` are there.
async fn read_all(config: &ClientConfig, topic: &str, count: usize) -> Vec<MessageExt> {
    wait_for_route(config, topic, "created by the broker with its first message").await;
    let mut pc = PullConsumerConfig::new(config.clone(), "cg-reader");
    pc.consume_from = ConsumeFrom::FirstOffset;
    let reader = PullConsumer::start(pc).await.expect("pull consumer");
    let queues = reader.fetch_queues(topic).await.expect("queues");
    reader.assign(&queues, "*").await.expect("assign");
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < count {
        assert!(Instant::now() < deadline, "read {} of {count} messages from {topic}: {:?}", got.len(), bodies(&got));
        got.extend(reader.poll(Duration::from_millis(500)).await.expect("poll"));
    }
    glommio::timer::sleep(Duration::from_millis(300)).await;
    got.extend(reader.poll(Duration::from_millis(300)).await.expect("poll"));
    reader.shutdown().await;
    got
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

fn bodies(msgs: &[MessageExt]) -> Vec<String> {
    msgs.iter().map(text).collect()
}

/// One delivery as the listener saw it.
#[derive(Debug, Clone)]
struct Seen {
    body: String,
    topic: String,
    reconsume_times: i32,
    msg_id: String,
    keys: Vec<String>,
    tags: Option<String>,
}

impl Seen {
    fn of(m: &MessageExt) -> Self {
        Self {
            body: text(m),
            topic: m.topic.clone(),
            reconsume_times: m.reconsume_times,
            msg_id: m.msg_id.clone(),
            keys: m.keys().map(str::to_string).collect(),
            tags: m.tags().map(str::to_string),
        }
    }
}

/// What was sent: body → (msgId, key).
type Sent = BTreeMap<String, (String, String, String)>;

async fn send_tagged(producer: &Producer, topic: &str, names: &[String]) -> Sent {
    let mut sent = Sent::new();
    for name in names {
        let key = format!("key-{name}");
        let msg = Message::new(topic, name.clone()).with_tags("TagR").and_then(|m| m.with_keys([key.as_str()])).expect("message");
        let r = producer.send(msg).await.expect("send");
        sent.insert(name.clone(), (r.msg_id, key, r.offset_msg_id));
    }
    sent
}

/// Checks a dead-lettered copy against what was sent.
/// Whose id a dead letter's ORIGIN_MESSAGE_ID holds.
#[derive(Clone, Copy)]
enum Origin {
    /// Sent back by the broker (CONSUMER_SEND_MSG_BACK): the original's offsetMsgId.
    BrokerSendBack,
    /// The orderly consumer's own retry message (Java's fallback): the client sets it to
    /// the message's msgId (UNIQ_KEY).
    ClientRetryMessage,
}

fn check_dead_letter(m: &MessageExt, sent: &Sent, group: &str, original_topic: &str, origin: Origin) {
    let body = text(m);
    let (msg_id, key, offset_msg_id) = sent.get(&body).unwrap_or_else(|| panic!("unexpected body {body:?} in the DLQ"));
    assert_eq!(m.topic, dlq_topic(group), "{body}");
    assert_eq!(&m.msg_id, msg_id, "msgId (UNIQ_KEY) intact for {body}");
    assert_eq!(m.keys().collect::<Vec<_>>(), [key.as_str()], "keys intact for {body}");
    assert_eq!(m.tags(), Some("TagR"), "tags intact for {body}");
    assert_eq!(m.property(keys::RETRY_TOPIC), Some(original_topic), "RETRY_TOPIC names the original topic for {body}");
    // RocketMQ 4.9: a broker send-back names the original by its offsetMsgId and keeps
    // it across every retry; a client's retry message carries what the client set.
    let want = match origin {
        Origin::BrokerSendBack => offset_msg_id,
        Origin::ClientRetryMessage => msg_id,
    };
    assert_eq!(m.property(keys::ORIGIN_MESSAGE_ID), Some(want.as_str()), "ORIGIN_MESSAGE_ID names the original for {body}");
}

#[test]
fn failing_messages_are_retried_up_to_the_maximum_then_dead_lettered() {
    const GROUP: &str = "cg-dlq";
    const TOPIC: &str = "RETRY_DLQ";
    const MAX: u32 = 2;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, TOPIC, 2).await;
        let seen: Rc<RefCell<Vec<Seen>>> = Rc::default();
        let mut config = push_config(&client, GROUP);
        config.max_reconsume_times = Some(MAX);
        let mut consumer = PushConsumer::new(config);
        consumer.subscribe(TOPIC, "*").expect("subscribe");
        let s = seen.clone();
        consumer.register_concurrently_with_context(move |msgs, context| {
            s.borrow_mut().extend(msgs.iter().map(Seen::of));
            if msgs.iter().any(|m| text(m).starts_with("bad")) {
                context.delay_level_when_next_consume = 1; // 1 s per retry keeps the test short
                ConsumeStatus::ReconsumeLater
            } else {
                ConsumeStatus::Success
            }
        });
        consumer.start().await.expect("consumer");
        // The heartbeat alone creates the retry topic: nothing was sent back yet.
        wait_for_route(&client, &retry_topic(GROUP), "created by the consumer's heartbeat").await;
        wait_until("the retry queue assigned", || !consumer.assigned_retry_queues().is_empty()).await;

        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-dlq")).await.expect("producer");
        let names: Vec<String> = (0..3).flat_map(|i| [format!("good-{i}"), format!("bad-{i}")]).collect();
        let sent = send_tagged(&producer, TOPIC, &names).await;

        let deliveries = |body: &str| seen.borrow().iter().filter(|d| d.body == body).cloned().collect::<Vec<_>>();
        let all_delivered = || (0..3).all(|i| deliveries(&format!("bad-{i}")).len() > MAX as usize);
        wait_until("every failing message delivered 1 + max times", all_delivered).await;
        let dead = read_all(&client, &dlq_topic(GROUP), 3).await;
        glommio::timer::sleep(QUIET_AFTER_DLQ).await;

        for name in &names {
            let (msg_id, key, _) = &sent[name];
            let got = deliveries(name);
            let times: Vec<i32> = got.iter().map(|d| d.reconsume_times).collect();
            if name.starts_with("bad") {
                assert_eq!(times, (0..=MAX as i32).collect::<Vec<_>>(), "{name}: first delivery, then reconsume_times 1..=max, then none");
            } else {
                assert_eq!(times, [0], "{name} consumed once");
            }
            for d in &got {
                assert_eq!(d.topic, TOPIC, "{name}: a retried message reaches the listener with its original topic");
                assert_eq!(&d.msg_id, msg_id, "{name}: msgId kept across retries");
                assert_eq!(d.keys, [key.clone()], "{name}: keys kept across retries");
                assert_eq!(d.tags.as_deref(), Some("TagR"), "{name}: tags kept across retries");
            }
        }
        assert_eq!(dead.len(), 3, "each failing message once in the DLQ: {:?}", bodies(&dead));
        for m in &dead {
            assert!(text(m).starts_with("bad"), "{}", text(m));
            check_dead_letter(m, &sent, GROUP, TOPIC, Origin::BrokerSendBack);
            assert_eq!(m.reconsume_times, MAX as i32 + 1, "the dead-letter copy counts the last failure (RocketMQ: reconsumeTimes + 1)");
        }

        // Sent back = consumed: the original queues' offsets end past every message.
        consumer.persist_offsets().await;
        let pull = PullConsumer::start(PullConsumerConfig::new(client.clone(), GROUP)).await.expect("pull");
        let mut committed = 0;
        for q in pull.fetch_queues(TOPIC).await.expect("queues") {
            committed += pull.committed(&q).await.expect("committed").unwrap_or(0);
        }
        assert_eq!(committed, names.len() as i64, "offsets committed past the sent-back messages");
        pull.shutdown().await;
        consumer.shutdown().await;
        producer.shutdown().await;
    });
}

#[test]
fn orderly_consumer_dead_letters_after_the_maximum_and_moves_on() {
    const GROUP: &str = "cg-dlq-orderly";
    const TOPIC: &str = "RETRY_DLQ_ORDERLY";
    const MAX: u32 = 2;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, TOPIC, 1).await;
        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-dlq-orderly")).await.expect("producer");
        let names: Vec<String> = ["first", "bad", "after"].iter().map(|s| s.to_string()).collect();
        let sent = send_tagged(&producer, TOPIC, &names).await;

        let seen: Rc<RefCell<Vec<Seen>>> = Rc::default();
        let mut config = push_config(&client, GROUP);
        config.max_reconsume_times = Some(MAX);
        let mut consumer = PushConsumer::new(config);
        consumer.subscribe(TOPIC, "*").expect("subscribe");
        let s = seen.clone();
        consumer.register_orderly(move |msgs| {
            s.borrow_mut().extend(msgs.iter().map(Seen::of));
            if msgs.iter().any(|m| text(m) == "bad") {
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
            } else {
                ConsumeOrderlyStatus::Success
            }
        });
        consumer.start().await.expect("consumer");
        wait_until("the message after the failing one", || seen.borrow().iter().any(|d| d.body == "after")).await;
        let dead = read_all(&client, &dlq_topic(GROUP), 1).await;

        let order: Vec<(String, i32)> = seen.borrow().iter().map(|d| (d.body.clone(), d.reconsume_times)).collect();
        let want: Vec<(String, i32)> =
            [("first", 0), ("bad", 0), ("bad", 1), ("bad", 2), ("after", 0)].iter().map(|(b, t)| (b.to_string(), *t)).collect();
        assert_eq!(order, want, "local retries up to the maximum, then the queue moves on in order");
        assert_eq!(bodies(&dead), ["bad"], "the failing message, once, in the DLQ");
        check_dead_letter(&dead[0], &sent, GROUP, TOPIC, Origin::BrokerSendBack);

        consumer.persist_offsets().await;
        let pull = PullConsumer::start(PullConsumerConfig::new(client.clone(), GROUP)).await.expect("pull");
        let queues = pull.fetch_queues(TOPIC).await.expect("queues");
        assert_eq!(pull.committed(&queues[0]).await.expect("committed"), Some(3), "committed past the dead-lettered message");
        pull.shutdown().await;
        consumer.shutdown().await;
        producer.shutdown().await;
    });
}

#[test]
fn orderly_fallback_message_at_the_maximum_lands_in_the_dlq() {
    const GROUP: &str = "cg-dlq-fallback";
    const TOPIC: &str = "RETRY_DLQ_FALLBACK";
    const MAX: i32 = 2;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let client = cluster.client_config();
    on_executor(move || async move {
        create_topic(&client, TOPIC, 1).await;
        // A clustering member of the group makes its retry topic exist.
        let mut member = PushConsumer::new(push_config(&client, GROUP));
        member.subscribe(TOPIC, "NoSuchTag").expect("subscribe");
        member.register_concurrently(|_| ConsumeStatus::Success);
        member.start().await.expect("consumer");
        wait_for_route(&client, &retry_topic(GROUP), "created by the consumer's heartbeat").await;

        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-dlq-fallback")).await.expect("producer");
        let sent = send_tagged(&producer, TOPIC, &["fallback".to_string()]).await;
        let mut original = read_all(&client, TOPIC, 1).await.remove(0);
        original.reconsume_times = MAX; // as the orderly consumer has it after MAX local retries
        let reader = PullConsumer::start(PullConsumerConfig::new(client.clone(), "cg-sender")).await.expect("pull");
        kernel::send_retry_message(reader.instance(), &orderly_retry_message(GROUP, &original, MAX)).await.expect("fallback send");
        reader.shutdown().await;

        let dead = read_all(&client, &dlq_topic(GROUP), 1).await;
        assert_eq!(bodies(&dead), ["fallback"]);
        check_dead_letter(&dead[0], &sent, GROUP, TOPIC, Origin::ClientRetryMessage);
        assert_eq!(dead[0].reconsume_times, MAX, "the send header's reconsumeTimes is stored (RocketMQ's handleRetryAndDLQ)");
        member.shutdown().await;
        producer.shutdown().await;
    });
}

/// Arrival times and messages a consumer saw.
type Arrivals = Rc<RefCell<Vec<(Instant, MessageExt)>>>;

/// Creates `topic` (2 queues) and a started push consumer of `group` on it that
/// records when each message arrived; returns once it holds both queues.
async fn recording_consumer(client: &ClientConfig, group: &str, topic: &str) -> (PushConsumer, Arrivals) {
    create_topic(client, topic, 2).await;
    let arrivals: Arrivals = Rc::default();
    let mut consumer = PushConsumer::new(push_config(client, group));
    consumer.subscribe(topic, "*").expect("subscribe");
    let a = arrivals.clone();
    consumer.register_concurrently(move |msgs| {
        let now = Instant::now();
        a.borrow_mut().extend(msgs.iter().map(|m| (now, m.clone())));
        ConsumeStatus::Success
    });
    consumer.start().await.expect("consumer");
    wait_until("queues assigned", || consumer.assigned_queues().len() == 2).await;
    (consumer, arrivals)
}

#[test]
fn a_message_with_delay_level_1_arrives_after_one_second() {
    const GROUP: &str = "cg-delay";
    const TOPIC: &str = "DELAYED";
    const COUNT: usize = 5;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let client = cluster.client_config();
    on_executor(move || async move {
        let (mut consumer, arrivals) = recording_consumer(&client, GROUP, TOPIC).await;

        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-delay")).await.expect("producer");
        // body → (send started, msgId, queue id, key)
        let mut sent: BTreeMap<String, (Instant, String, i32, String)> = BTreeMap::new();
        for i in 0..COUNT {
            let (body, key) = (format!("delayed-{i}"), format!("key-d{i}"));
            let msg = Message::new(TOPIC, body.clone())
                .with_tags("TagD")
                .and_then(|m| m.with_keys([key.as_str()]))
                .and_then(|m| m.with_delay_level(1))
                .expect("message");
            let started = Instant::now();
            let r = producer.send(msg).await.expect("send with delay level 1");
            sent.insert(body, (started, r.msg_id, r.queue.queue_id, key));
        }
        let now_started = Instant::now();
        producer.send(Message::new(TOPIC, "immediate")).await.expect("send");

        wait_until("every message", || arrivals.borrow().len() > COUNT).await;
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let arrivals = arrivals.borrow();
        assert_eq!(arrivals.len(), COUNT + 1, "each once: {:?}", arrivals.iter().map(|(_, m)| text(m)).collect::<Vec<_>>());
        let delays: Vec<Duration> =
            arrivals.iter().filter(|(_, m)| text(m) != "immediate").map(|(at, m)| at.duration_since(sent[&text(m)].0)).collect();
        eprintln!("delay level 1: arrived {:?} ..= {:?} after the send started", delays.iter().min(), delays.iter().max());
        for (at, m) in arrivals.iter() {
            let body = text(m);
            if body == "immediate" {
                let after = at.duration_since(now_started);
                assert!(after <= DELAY_LATE_MAX, "an undelayed message is not held: it arrived {after:?} after it was sent");
                continue;
            }
            let (started, msg_id, queue_id, key) = &sent[&body];
            let after = at.duration_since(*started);
            assert!(after + STORE_CLOCK_GRANULARITY >= LEVEL_1, "{body} arrived {after:?} after it was sent: before its 1 s delay");
            assert!(after <= LEVEL_1 + DELAY_LATE_MAX, "{body} arrived {after:?} after it was sent: over 1 s + {DELAY_LATE_MAX:?}");
            assert_eq!(m.topic, TOPIC, "{body}: original topic");
            assert_eq!(m.queue_id, *queue_id, "{body}: original queue");
            assert_eq!(&m.msg_id, msg_id, "{body}: msgId");
            assert_eq!(m.tags(), Some("TagD"), "{body}: tags");
            assert_eq!(m.keys().collect::<Vec<_>>(), [key.as_str()], "{body}: keys");
        }
        consumer.shutdown().await;
        producer.shutdown().await;
    });
}

#[test]
fn timer_messages_arrive_at_their_time_and_too_distant_ones_are_refused() {
    const GROUP: &str = "cg-timer";
    const TOPIC: &str = "TIMED";
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::start();
    let client = cluster.client_config();
    on_executor(move || async move {
        let (mut consumer, arrivals) = recording_consumer(&client, GROUP, TOPIC).await;

        let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-timer")).await.expect("producer");
        let epoch_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as u64;
        // body -> (send started, how long after it the timer is due, msgId)
        let mut sent: BTreeMap<String, (Instant, Duration, String)> = BTreeMap::new();
        // Absolute times are read right before their send: read up front, the sends
        // before them (slow on a loaded CI machine) ate into the expected delay.
        let cases: [(&str, &dyn Fn() -> ringmq_client::message::Delivery, Duration); 4] = [
            ("after-1500ms", &|| ringmq_client::message::Delivery::AfterMs(1_500), Duration::from_millis(1_500)),
            ("after-1s", &|| ringmq_client::message::Delivery::AfterSecs(1), Duration::from_secs(1)),
            ("at-plus-2s", &|| ringmq_client::message::Delivery::AtMs(epoch_ms() + 2_000), Duration::from_millis(1_990)),
            ("at-in-the-past", &|| ringmq_client::message::Delivery::AtMs(epoch_ms() - 60_000), Duration::ZERO),
        ];
        for (body, delivery, due_after) in cases {
            let msg = Message::new(TOPIC, body).with_delivery(delivery()).expect("message");
            let started = Instant::now();
            let r = producer.send(msg).await.expect("send a timer");
            sent.insert(body.to_string(), (started, due_after, r.msg_id));
        }
        // Past the broker's timerMaxDelaySec (3 days by default): refused, naming the limit.
        let too_far = Message::new(TOPIC, "too-far").with_delivery(ringmq_client::message::Delivery::AfterSecs(4 * 86_400)).expect("message");
        let refused = producer.send(too_far).await.expect_err("a timer past the maximum delay is refused");
        assert!(refused.to_string().contains("timerMaxDelaySec"), "the refusal names the limit: {refused}");

        wait_until("every timer", || arrivals.borrow().len() >= sent.len()).await;
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let arrivals = arrivals.borrow();
        assert_eq!(arrivals.len(), sent.len(), "each once: {:?}", arrivals.iter().map(|(_, m)| text(m)).collect::<Vec<_>>());
        for (at, m) in arrivals.iter() {
            let body = text(m);
            let (started, due_after, msg_id) = &sent[&body];
            let after = at.duration_since(*started);
            eprintln!("timer {body}: arrived {after:?} after its send (due after {due_after:?})");
            assert!(after + STORE_CLOCK_GRANULARITY >= *due_after, "{body} arrived {after:?} after its send: before its time");
            assert!(after <= *due_after + DELAY_LATE_MAX, "{body} arrived {after:?} after its send: over {due_after:?} + {DELAY_LATE_MAX:?}");
            assert_eq!((m.topic.as_str(), &m.msg_id), (TOPIC, msg_id), "{body}: topic and msgId kept");
            assert_eq!(m.property("TIMER_DELAY_MS").or(m.property("TIMER_DELAY_SEC")).or(m.property("TIMER_DELIVER_MS")), None, "{body}: not timed again");
        }
        consumer.shutdown().await;
        producer.shutdown().await;
    });
}
