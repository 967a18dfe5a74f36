//! Interop for issue 12: transactional messages with the unmodified crates.io
//! `rocketmq-client-rust` 1.0.0 — its `TransactionMQProducer` and a
//! `TransactionListener` — against a RingMQ NameServer and broker ("broker-a", two
//! shards, sync flush) in this process, in both header encodings.
//!
//! Sixteen messages are sent with `send_message_in_transaction`, spread by the client
//! over the topic's four queues (so over both shards; the producer's one connection
//! lives on one of them, so check-backs from the other shard cross the mesh). The
//! listener's `execute_local_transaction` answers by plan (passed as the send's `arg`):
//! COMMIT, ROLLBACK, UNKNOWN-then-COMMIT, UNKNOWN-then-ROLLBACK (four of each).
//! `check_local_transaction` answers UNKNOWN while a gate the test holds is closed, and
//! the plan's answer once the test opens it. The test proves:
//!
//! 1. committed messages (the immediate and the checked ones) are delivered exactly
//!    once: a push consumer of the same crate sees each once, and a full read of every
//!    queue with the crate's pull consumer finds each stored once, with body, keys,
//!    tags, msgId (UNIQ_KEY) and PGROUP intact and TRAN_MSG gone;
//! 2. rolled-back messages (immediate and checked) are never delivered nor stored;
//! 3. the UNKNOWN ones are resolved by the broker's check-back: the listener's
//!    `check_local_transaction` is called only for them, with the real topic, keys,
//!    body, transaction id (= the send's transactionId / UNIQ_KEY), the half's commit
//!    log offset and a growing TRANSACTION_CHECK_TIMES; an UNKNOWN check answer keeps
//!    the half open and it is checked again; the COMMIT answer commits, the ROLLBACK
//!    answer rolls back (broker counters: 16 halves, 8 commits, 8 rollbacks, 0 open);
//! 4. nothing is visible before its commit: with the gate closed and every UNKNOWN
//!    message checked at least once, the queues' max offsets sum to the four immediate
//!    commits, the pull read and the push consumer hold nothing of the UNKNOWN ones;
//!    after the gate opens, each checked commit is delivered only after its check
//!    answered COMMIT;
//! 5. GET_PRODUCER_CONNECTION_LIST (204) lists the producer's client id
//!    (`127.0.0.1@<instanceName>`) for its group. This crate's admin API
//!    (`examine_producer_connection_info`) is behind its `admin-read` feature, which
//!    this dev-dependency turns off (`default-features = false` in broker/Cargo.toml),
//!    so the request is a raw one; its body is decoded with the crate's own
//!    `ProducerConnection` type, as its admin API does.
//!
//! What the client does on the wire is recorded, not assumed: the clients reach the
//! broker only through a recording proxy (`common_interop`'s cluster with
//! `BrokerPath::Proxied`: the NameServer through a second proxy that rewrites the
//! broker address in its answers to the broker proxy's, a same-length byte
//! substitution). Each test checks the
//! CHECK_TRANSACTION_STATE (39) frames the broker sent (oneway, header fields naming
//! the half) and the END_TRANSACTION (37) frames the client sent: one per send with
//! `fromTransactionCheck=false` and the execution's answer (8, 12, or 0 for UNKNOWN),
//! and one per check with `fromTransactionCheck=true` — 0 while the gate was closed,
//! then the plan's answer — and that every frame the client sent used the test's
//! header encoding.
//!
//! The broker's transaction timings are short (`transaction_timeout_ms` and
//! `transaction_check_interval_ms` 1 s). The producer is given its topic up front
//! (`topics`, Java's `setTopics`): it fetches the route when it starts, so its first
//! heartbeat (1 s after start) reaches the broker and the broker has a producer
//! connection to check with; without it the client's next heartbeat is 30 s later.
//! The client's check-back environment needs no call of the test's own:
//! `TransactionMQProducer::start` runs `init_transaction_env` with the builder's
//! `check_thread_pool_*` sizes. Every wait is bounded.
//!
//! Owns: the scenario, this test's broker settings (the transaction timings), the
//! listener and its record (`Plan`, `Book`, `Listener`), and its raw requests
//! (`stored`, `counter`, `producer_connections`).

mod common_interop;

use common_interop::{
    bounded, client_runtime, ignore_disk_watermarks, label_of, property, push_consumer, raw_call, serialize_code, start_pull_consumer,
    test_both_encodings, wait_until, BrokerPath, Cluster, WireFrame, QUEUES,
};
use ringmq_broker::store::engine::ShardId;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use rocketmq_client_rust::{
    ClientConfig, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, LocalTransactionState, MQPushConsumer, SendStatus,
    TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::body::producer_connection::ProducerConnection;
use rocketmq_protocol::protocol::{RemotingDeserializable, SerializeType};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(30);
/// Transactional messages per test (four of each plan).
const MESSAGES: usize = 16;
/// The broker's `transactionTimeOut` and `transactionCheckInterval` in these tests.
const TXN_TIMEOUT_MS: u64 = 1_000;
const TXN_CHECK_INTERVAL_MS: u64 = 1_000;

/// END_TRANSACTION's `commitOrRollback` values (RocketMQ's `MessageSysFlag`).
const END_COMMIT: &str = "8";
const END_ROLLBACK: &str = "12";
const END_UNKNOWN: &str = "0";

/// This test's broker: short transaction timings.
fn start_cluster() -> Cluster {
    Cluster::start(BrokerPath::Proxied, |config| {
        config.transaction_timeout_ms = TXN_TIMEOUT_MS;
        config.transaction_check_interval_ms = TXN_CHECK_INTERVAL_MS;
        ignore_disk_watermarks(config);
    })
}

/// Raw requests only this test makes.
impl Cluster {
    /// The sum of the max offsets of `topic`'s queues (GET_MAX_OFFSET): what they hold.
    fn stored(&self, topic: &str) -> i64 {
        (0..QUEUES)
            .map(|q| {
                let r = raw_call(
                    self.broker_addr(),
                    RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", topic).with_ext("queueId", q.to_string()),
                );
                assert_eq!(r.code, rs::SUCCESS, "GET_MAX_OFFSET {topic}/{q}: {:?}", r.remark);
                r.ext("offset").and_then(|o| o.parse::<i64>().ok()).expect("offset")
            })
            .sum()
    }

    /// A GET_BROKER_RUNTIME_INFO counter.
    fn counter(&self, key: &str) -> u64 {
        let r = raw_call(self.broker_addr(), RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO));
        assert_eq!(r.code, rs::SUCCESS, "GET_BROKER_RUNTIME_INFO: {:?}", r.remark);
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("runtime info is JSON");
        v["table"][key].as_str().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("runtime info {key}: {v}"))
    }

    /// GET_PRODUCER_CONNECTION_LIST (204) for `group`, decoded with the client crate's
    /// `ProducerConnection` (what its `examine_producer_connection_info` returns).
    fn producer_connections(&self, group: &str) -> Option<ProducerConnection> {
        let r = raw_call(self.broker_addr(), RemotingCommand::request(rq::GET_PRODUCER_CONNECTION_LIST).with_ext("producerGroup", group));
        (r.code == rs::SUCCESS).then(|| ProducerConnection::decode(&r.body).expect("a ProducerConnection body"))
    }
}

// ---------------------------------------------------------------------------------
// Messages and the transaction listener.

/// What message `id`'s local transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Commit,
    Rollback,
    /// UNKNOWN at execution; the check answers COMMIT once the gate is open.
    UnknownThenCommit,
    /// UNKNOWN at execution; the check answers ROLLBACK once the gate is open.
    UnknownThenRollback,
}

impl Plan {
    fn of(id: usize) -> Self {
        [Plan::Commit, Plan::Rollback, Plan::UnknownThenCommit, Plan::UnknownThenRollback][id % 4]
    }

    fn at_execution(self) -> LocalTransactionState {
        match self {
            Plan::Commit => LocalTransactionState::CommitMessage,
            Plan::Rollback => LocalTransactionState::RollbackMessage,
            Plan::UnknownThenCommit | Plan::UnknownThenRollback => LocalTransactionState::Unknown,
        }
    }

    /// The answer to a check once the gate is open.
    fn at_check(self) -> LocalTransactionState {
        match self {
            Plan::Commit | Plan::UnknownThenCommit => LocalTransactionState::CommitMessage,
            Plan::Rollback | Plan::UnknownThenRollback => LocalTransactionState::RollbackMessage,
        }
    }

    fn checked(self) -> bool {
        matches!(self, Plan::UnknownThenCommit | Plan::UnknownThenRollback)
    }

    fn committed(self) -> bool {
        matches!(self, Plan::Commit | Plan::UnknownThenCommit)
    }
}

fn body_of(label: &str, id: usize) -> String {
    format!("txn {label} {id}")
}

fn keys_of(id: usize) -> Vec<String> {
    vec![format!("txn-key-{id}"), "interop-txn".to_string()]
}

fn tag_of(id: usize) -> &'static str {
    if id.is_multiple_of(2) {
        "TagA"
    } else {
        "TagB"
    }
}

/// The message id a body or a key names.
fn id_of_body(label: &str, body: &str) -> usize {
    body.strip_prefix(&format!("txn {label} ")).and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("a body nobody sent: {body:?}"))
}

fn id_of_keys(keys: &str) -> Option<usize> {
    keys.split(' ').find_map(|k| k.strip_prefix("txn-key-")).and_then(|i| i.parse().ok())
}

/// One call of `execute_local_transaction`, as the listener saw it.
#[derive(Debug, Clone)]
struct Executed {
    id: usize,
    topic: String,
    body: String,
    keys: Option<String>,
    transaction_id: Option<String>,
    uniq_key: Option<String>,
    arg: Option<Plan>,
}

/// One call of `check_local_transaction`, as the listener saw it.
#[derive(Debug, Clone)]
struct Checked {
    id: Option<usize>,
    topic: String,
    body: String,
    keys: Option<String>,
    tags: Option<String>,
    transaction_id: Option<String>,
    uniq_key: Option<String>,
    pgroup: Option<String>,
    tran_msg: Option<String>,
    check_times: Option<u32>,
    commit_log_offset: i64,
    queue_id: i32,
    gate_open: bool,
    answer: LocalTransactionState,
    /// Just before the answer was returned (the client sends END after that).
    answered_at: Instant,
}

#[derive(Default)]
struct Book {
    /// Closed: every check answers UNKNOWN.
    gate_open: AtomicBool,
    executed: Mutex<Vec<Executed>>,
    checks: Mutex<Vec<Checked>>,
}

impl Book {
    fn checks(&self) -> Vec<Checked> {
        self.checks.lock().expect("checks").clone()
    }
}

struct Listener {
    label: &'static str,
    book: Arc<Book>,
}

fn props_of(msg: &dyn MessageTrait) -> BTreeMap<String, String> {
    msg.get_properties().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl TransactionListener for Listener {
    fn execute_local_transaction(&self, msg: &dyn MessageTrait, arg: Option<&(dyn Any + Send + Sync)>) -> LocalTransactionState {
        let body = String::from_utf8_lossy(msg.get_body().map(|b| b.as_ref()).unwrap_or_default()).to_string();
        let id = id_of_body(self.label, &body);
        let props = props_of(msg);
        let arg = arg.and_then(|a| a.downcast_ref::<Plan>()).copied();
        self.book.executed.lock().expect("executed").push(Executed {
            id,
            topic: msg.topic().to_string(),
            body,
            keys: msg.get_keys().map(|k| k.to_string()),
            transaction_id: msg.transaction_id().map(|t| t.to_string()),
            uniq_key: props.get("UNIQ_KEY").cloned(),
            arg,
        });
        arg.unwrap_or(Plan::of(id)).at_execution()
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let props = props_of(msg);
        let keys = msg.get_keys().map(|k| k.to_string());
        let id = keys.as_deref().and_then(id_of_keys);
        let gate_open = self.book.gate_open.load(Ordering::SeqCst);
        let answer = match (gate_open, id) {
            (true, Some(id)) => Plan::of(id).at_check(),
            _ => LocalTransactionState::Unknown,
        };
        self.book.checks.lock().expect("checks").push(Checked {
            id,
            topic: msg.topic().to_string(),
            body: String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string(),
            keys,
            tags: msg.tags().map(|t| t.to_string()),
            transaction_id: MessageTrait::transaction_id(msg).map(|t| t.to_string()),
            uniq_key: props.get("UNIQ_KEY").cloned(),
            pgroup: props.get("PGROUP").cloned(),
            tran_msg: props.get("TRAN_MSG").cloned(),
            check_times: props.get("TRANSACTION_CHECK_TIMES").and_then(|n| n.parse().ok()),
            commit_log_offset: msg.commit_log_offset(),
            queue_id: msg.queue_id(),
            gate_open,
            answer,
            answered_at: Instant::now(),
        });
        answer
    }
}

/// What one send in a transaction returned.
#[derive(Debug, Clone)]
struct Sent {
    plan: Plan,
    /// Just before the send began (the message's born time is later).
    started: Instant,
    msg_id: String,
    transaction_id: String,
    offset_msg_id: String,
    /// The half's commit log offset (inside the offsetMsgId).
    phys: i64,
    /// The half's queue offset (Java's tranStateTableOffset).
    queue_offset: u64,
    queue_id: i32,
}

/// The physical offset inside an offsetMsgId (host 4 + port 4 + offset 8 bytes, hex).
fn phys_of(offset_msg_id: &str) -> i64 {
    assert_eq!(offset_msg_id.len(), 32, "offsetMsgId {offset_msg_id:?}");
    i64::from_str_radix(&offset_msg_id[16..], 16).expect("hex offset")
}

/// One delivery to the push consumer.
#[derive(Debug, Clone)]
struct Delivery {
    at: Instant,
    body: String,
}

/// Reads every queue of `topic` from offset 0 with the crate's classic pull consumer.
#[allow(deprecated)]
async fn read_all(pull: &rocketmq_client_rust::DefaultMQPullConsumer, queues: &[MessageQueue]) -> Vec<MessageExt> {
    let mut all = Vec::new();
    for q in queues {
        let mut offset = 0i64;
        loop {
            let r = bounded("pull", pull.pull(q, "*", offset, 32)).await.expect("pull");
            let found = r.msg_found_list().unwrap_or_default();
            if found.is_empty() {
                break;
            }
            all.extend(found.iter().cloned());
            assert!(r.next_begin_offset() as i64 > offset, "pull moves forward on {q:?}");
            offset = r.next_begin_offset() as i64;
        }
    }
    all
}

// ---------------------------------------------------------------------------------
// The scenario.

async fn transactions(serialize_type: SerializeType) {
    let label = label_of(serialize_type);
    let cluster = start_cluster();
    let topic = format!("InteropTxn{label}");
    let group = format!("TxnPG-{label}");
    let instance = format!("txn-producer-{label}");
    cluster.create_routed_topic(&topic, QUEUES);

    // A push consumer of the topic, recording every delivery.
    let deliveries: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let sink = deliveries.clone();
    let mut consumer = push_consumer(&cluster, serialize_type, "txn-push", &format!("TxnCG-{label}")).build();
    consumer.subscribe(topic.as_str(), "*").await.expect("subscribe");
    consumer.register_message_listener_concurrently(move |msgs: &[&MessageExt], _: &ConsumeConcurrentlyContext| {
        let at = Instant::now();
        let mut sink = sink.lock().expect("deliveries");
        for msg in msgs {
            sink.push(Delivery { at, body: String::from_utf8_lossy(msg.body().as_deref().unwrap_or_default()).to_string() });
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    });
    bounded("push consumer start", consumer.start()).await.expect("push consumer starts");

    // The transactional producer, as a user sets it up: a listener, its group, its
    // topic up front (route fetched at start, so the first heartbeat reaches the broker).
    let book = Arc::new(Book::default());
    let client_config = ClientConfig::builder()
        .client_ip("127.0.0.1")
        .instance_name(instance.as_str())
        .namesrv_addr(cluster.namesrv_addr())
        .build()
        .expect("client config");
    let mut producer = TransactionMQProducer::builder(client_runtime("txn-producer", serialize_type))
        .client_config(client_config)
        .producer_group(group.as_str())
        .topics(vec![topic.as_str()])
        .send_msg_timeout(5_000)
        .transaction_listener(Listener { label, book: book.clone() })
        .check_thread_pool_min_size(1)
        .check_thread_pool_max_size(2)
        .build();
    bounded("transaction producer start", producer.start()).await.expect("transaction producer starts");

    // 5. The broker lists the producer's connection for its group.
    let client_id = format!("127.0.0.1@{instance}");
    let mut listed = None;
    wait_until("the producer group in GET_PRODUCER_CONNECTION_LIST", || {
        listed =
            cluster.producer_connections(&group).filter(|c| c.connection_set().iter().any(|c| c.get_client_id().as_str() == client_id));
        listed.is_some()
    })
    .await;
    let listed = listed.expect("listed");
    assert_eq!(listed.connection_set().len(), 1, "one producer connection: {listed:?}");
    let conn = listed.connection_set().iter().next().expect("a connection");
    assert!(conn.get_client_addr().starts_with("127.0.0.1:"), "client address {}", conn.get_client_addr());
    assert!(conn.get_version() > 0, "client version {}", conn.get_version());
    assert!(
        cluster.producer_connections("NoSuchGroup").is_none_or(|c| c.connection_set().is_empty()),
        "an unknown group has no connection"
    );

    // Send the 16 messages; each local transaction answers by its plan.
    let mut sent: BTreeMap<usize, Sent> = BTreeMap::new();
    for id in 0..MESSAGES {
        let plan = Plan::of(id);
        let started = Instant::now();
        let msg = Message::builder()
            .topic(topic.as_str())
            .tags(tag_of(id))
            .keys(keys_of(id))
            .body_slice(body_of(label, id).as_bytes())
            .build()
            .expect("message");
        let r = bounded("send in transaction", producer.send_message_in_transaction(msg, Some(plan))).await.expect("send in transaction");
        assert_eq!(r.local_transaction_state, Some(plan.at_execution()), "local state of {id}");
        let s = r.send_result.expect("a send result");
        assert_eq!(s.send_status, SendStatus::SendOk, "{id}");
        let msg_id = s.msg_id.as_ref().map(|m| m.to_string()).expect("msgId");
        assert_eq!(msg_id.len(), 32, "{id}: UNIQ_KEY {msg_id}");
        let transaction_id = s.transaction_id.clone().expect("the broker answers a transactionId");
        assert_eq!(transaction_id, msg_id, "{id}: transactionId is the UNIQ_KEY (as Java's broker answers)");
        let offset_msg_id = s.offset_msg_id.clone().expect("offsetMsgId");
        let mq = s.message_queue.clone().expect("message queue");
        assert_eq!(mq.topic().as_str(), topic);
        sent.insert(
            id,
            Sent {
                plan,
                started,
                phys: phys_of(&offset_msg_id),
                msg_id,
                transaction_id,
                offset_msg_id,
                queue_offset: s.queue_offset,
                queue_id: mq.queue_id(),
            },
        );
    }
    let queues_used: std::collections::BTreeSet<i32> = sent.values().map(|s| s.queue_id).collect();
    assert_eq!(queues_used.len(), QUEUES as usize, "sends spread over every queue (both shards)");
    let executed = book.executed.lock().expect("executed").clone();
    assert_eq!(executed.len(), MESSAGES, "execute_local_transaction once per send: {executed:#?}");
    for e in &executed {
        let s = &sent[&e.id];
        assert_eq!(e.topic, topic, "{e:?}");
        assert_eq!(e.body, body_of(label, e.id));
        assert_eq!(e.keys.as_deref(), Some(keys_of(e.id).join(" ").as_str()), "{e:?}");
        assert_eq!(e.arg, Some(s.plan), "the send's arg reaches the listener: {e:?}");
        assert_eq!(e.uniq_key.as_deref(), Some(s.msg_id.as_str()), "{e:?}");
        assert_eq!(e.transaction_id.as_deref(), Some(s.transaction_id.as_str()), "{e:?}");
    }
    let ids = |pred: fn(Plan) -> bool| -> Vec<usize> { sent.iter().filter(|(_, s)| pred(s.plan)).map(|(id, _)| *id).collect() };
    let immediate_commits = ids(|p| p == Plan::Commit);
    let unknown = ids(Plan::checked);
    let committed = ids(Plan::committed);

    // The pull consumer (the crate's classic one) reads the queues from offset 0.
    let pull = start_pull_consumer(&cluster, serialize_type, "txn-pull", format!("TxnReader-{label}")).await;
    let queues = bounded("queues", pull.fetch_subscribe_message_queues(&topic)).await.expect("queues");
    assert_eq!(queues.len(), QUEUES as usize);

    // 4. With the gate closed, every UNKNOWN one is checked (and answered UNKNOWN) at
    // least once, and the broker keeps it open: nothing of them is stored or delivered.
    wait_until("a first check of every UNKNOWN message", || {
        let checks = book.checks();
        unknown.iter().all(|id| checks.iter().any(|c| c.id == Some(*id)))
    })
    .await;
    wait_until("the immediate commits delivered", || {
        let got = deliveries.lock().expect("deliveries");
        immediate_commits.iter().all(|id| got.iter().any(|d| d.body == body_of(label, *id)))
    })
    .await;
    assert_eq!(cluster.stored(&topic), immediate_commits.len() as i64, "the queues hold only the immediate commits");
    let before: Vec<usize> = read_all(&pull, &queues)
        .await
        .iter()
        .map(|m| id_of_body(label, &String::from_utf8_lossy(m.body().as_deref().unwrap_or_default())))
        .collect();
    let mut before_sorted = before.clone();
    before_sorted.sort_unstable();
    assert_eq!(before_sorted, immediate_commits, "read before any check answered: only the immediate commits");
    let delivered_before: Vec<usize> = deliveries.lock().expect("deliveries").iter().map(|d| id_of_body(label, &d.body)).collect();
    assert!(
        delivered_before.iter().all(|id| immediate_commits.contains(id)),
        "delivered before the checks were answered: {delivered_before:?}"
    );
    assert!(book.checks().iter().all(|c| !c.gate_open && c.answer == LocalTransactionState::Unknown));

    // 3. Open the gate: the next checks answer by plan.
    book.gate_open.store(true, Ordering::SeqCst);
    wait_until("every committed message delivered", || {
        let got = deliveries.lock().expect("deliveries");
        committed.iter().all(|id| got.iter().any(|d| d.body == body_of(label, *id)))
    })
    .await;
    wait_until("every transaction resolved on the broker", || cluster.counter("transactionOpen") == 0).await;
    assert_eq!(cluster.counter("transactionHalfTotal"), MESSAGES as u64);
    assert_eq!(cluster.counter("transactionCommitTotal"), committed.len() as u64);
    assert_eq!(cluster.counter("transactionRollbackTotal"), (MESSAGES - committed.len()) as u64);
    assert_eq!(cluster.counter("transactionDiscardTotal"), 0);

    // Every check the broker sent has reached the listener and been answered (a check
    // sent just before a resolving END arrived may still be on its way).
    wait_until("every check answered", || {
        let n = book.checks().len();
        let ends = cluster
            .broker_proxy()
            .requests(rq::END_TRANSACTION, true)
            .iter()
            .filter(|f| f.ext("fromTransactionCheck") == Some("true"))
            .count();
        cluster.broker_proxy().requests(rq::CHECK_TRANSACTION_STATE, false).len() == n && ends == n
    })
    .await;

    // The checks the listener saw: only the UNKNOWN ones, with the right message.
    let checks = book.checks();
    for c in &checks {
        let id = c.id.unwrap_or_else(|| panic!("a check for a message nobody sent: {c:?}"));
        let s = &sent[&id];
        assert!(s.plan.checked(), "a message resolved at once was checked: {c:?}");
        assert_eq!(c.topic, topic, "the check names the real topic: {c:?}");
        assert_eq!(c.body, body_of(label, id), "{c:?}");
        assert_eq!(c.tags.as_deref(), Some(tag_of(id)), "{c:?}");
        assert_eq!(c.keys.as_deref(), Some(keys_of(id).join(" ").as_str()), "{c:?}");
        assert_eq!(c.transaction_id.as_deref(), Some(s.transaction_id.as_str()), "the check's transaction id: {c:?}");
        assert_eq!(c.uniq_key.as_deref(), Some(s.msg_id.as_str()), "{c:?}");
        assert_eq!(c.pgroup.as_deref(), Some(group.as_str()), "{c:?}");
        assert_eq!(c.tran_msg.as_deref(), Some("true"), "{c:?}");
        assert_eq!(c.commit_log_offset, s.phys, "the check names the half: {c:?}");
        assert_eq!(c.queue_id, s.queue_id, "the check names the real queue: {c:?}");
    }
    for id in &unknown {
        let mine: Vec<&Checked> = checks.iter().filter(|c| c.id == Some(*id)).collect();
        let times: Vec<Option<u32>> = mine.iter().map(|c| c.check_times).collect();
        let want: Vec<Option<u32>> = (1..=mine.len() as u32).map(Some).collect();
        assert_eq!(times, want, "TRANSACTION_CHECK_TIMES of {id}'s checks");
        // UNKNOWN while the gate was closed (at least once), then the plan's answer (a
        // check the broker sent before the resolving END arrived may repeat it).
        // Not checked before transactionTimeOut (the broker's clock against the
        // message's born time; 5 ms for the wall clock against this monotonic one).
        let first = mine[0].answered_at.duration_since(sent[id].started);
        assert!(first + Duration::from_millis(5) >= Duration::from_millis(TXN_TIMEOUT_MS), "{id}: first checked {first:?} after its send");
        let gated = mine.iter().take_while(|c| !c.gate_open).count();
        assert!(gated >= 1, "{id}: checked while the gate was closed: {mine:#?}");
        assert!(mine[..gated].iter().all(|c| c.answer == LocalTransactionState::Unknown), "{id}: {mine:#?}");
        assert!(mine.len() > gated, "{id}: checked again after an UNKNOWN check answer: {mine:#?}");
        assert!(
            mine[gated..].iter().all(|c| c.gate_open && c.answer == sent[id].plan.at_check()),
            "{id}: answered by plan once open: {mine:#?}"
        );
    }
    let check_shards: std::collections::BTreeSet<u16> = checks.iter().map(|c| ShardId::of_phys(c.commit_log_offset as u64).0).collect();
    assert_eq!(check_shards.len(), 2, "check-backs came from both shards (one of them is not the producer connection's)");

    // 1, 2. Delivered exactly once: the committed ones, each once; no rolled-back one.
    let got = deliveries.lock().expect("deliveries").clone();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for d in &got {
        *counts.entry(id_of_body(label, &d.body)).or_default() += 1;
    }
    let want: BTreeMap<usize, usize> = committed.iter().map(|id| (*id, 1)).collect();
    assert_eq!(counts, want, "push deliveries: each committed message once, nothing else");
    // A checked commit is delivered only after its check answered COMMIT.
    for id in ids(|p| p == Plan::UnknownThenCommit) {
        let commit_at = checks
            .iter()
            .find(|c| c.id == Some(id) && c.answer == LocalTransactionState::CommitMessage)
            .expect("a COMMIT answer")
            .answered_at;
        let delivered_at = got.iter().find(|d| d.body == body_of(label, id)).expect("delivered").at;
        assert!(delivered_at >= commit_at, "{id} delivered before its check answered COMMIT");
    }
    // What the queues hold: each committed message once, as the producer sent it.
    assert_eq!(cluster.stored(&topic), committed.len() as i64, "the queues hold the committed messages");
    let stored = read_all(&pull, &queues).await;
    let mut stored_counts: BTreeMap<usize, usize> = BTreeMap::new();
    for m in &stored {
        let body = String::from_utf8_lossy(m.body().as_deref().unwrap_or_default()).to_string();
        let id = id_of_body(label, &body);
        let s = &sent[&id];
        *stored_counts.entry(id).or_default() += 1;
        assert_eq!(m.topic().as_str(), topic);
        assert_eq!(m.queue_id(), s.queue_id, "{id}: the real queue");
        assert_eq!(m.tags().map(|t| t.to_string()).as_deref(), Some(tag_of(id)), "{id}");
        assert_eq!(m.get_keys().map(|k| k.to_string()), Some(keys_of(id).join(" ")), "{id}");
        assert_eq!(property(m, "UNIQ_KEY").as_deref(), Some(s.msg_id.as_str()), "{id}: msgId kept");
        assert_eq!(property(m, "PGROUP").as_deref(), Some(group.as_str()), "{id}");
        assert_eq!(property(m, "TRAN_MSG"), None, "{id}: a committed copy is no half");
        assert_eq!(m.prepared_transaction_offset(), s.phys, "{id}: preparedTransactionOffset names the half");
    }
    assert_eq!(stored_counts, want, "stored: each committed message once, nothing else");

    // On the wire: the broker's checks and the client's END_TRANSACTIONs.
    let check_frames = cluster.broker_proxy().requests(rq::CHECK_TRANSACTION_STATE, false);
    assert_eq!(check_frames.len(), checks.len(), "one listener call per CHECK_TRANSACTION_STATE the broker sent");
    for f in &check_frames {
        assert!(f.oneway, "CHECK_TRANSACTION_STATE is oneway: {f:?}");
        let (id, s) = sent
            .iter()
            .find(|(_, s)| f.ext("transactionId") == Some(s.transaction_id.as_str()))
            .unwrap_or_else(|| panic!("a check for no send: {f:?}"));
        assert!(s.plan.checked(), "{id}: {f:?}");
        assert_eq!(f.ext("msgId"), Some(s.msg_id.as_str()), "{f:?}");
        assert_eq!(f.ext("offsetMsgId"), Some(s.offset_msg_id.as_str()), "{f:?}");
        assert_eq!(f.ext("commitLogOffset"), Some(s.phys.to_string().as_str()), "{f:?}");
        assert_eq!(f.ext("tranStateTableOffset"), Some(s.queue_offset.to_string().as_str()), "{f:?}");
        assert_eq!(f.ext("topic"), Some(topic.as_str()), "{f:?}");
    }
    let end_frames = cluster.broker_proxy().requests(rq::END_TRANSACTION, true);
    for (id, s) in &sent {
        let mine: Vec<&WireFrame> = end_frames.iter().filter(|f| f.ext("msgId") == Some(s.msg_id.as_str())).collect();
        for f in &mine {
            assert!(f.oneway, "{id}: END_TRANSACTION is oneway (as Java's): {f:?}");
            assert_eq!(f.ext("producerGroup"), Some(group.as_str()), "{f:?}");
            assert_eq!(f.ext("commitLogOffset"), Some(s.phys.to_string().as_str()), "{f:?}");
            assert_eq!(f.ext("tranStateTableOffset"), Some(s.queue_offset.to_string().as_str()), "{f:?}");
            assert_eq!(f.ext("transactionId"), Some(s.transaction_id.as_str()), "{f:?}");
        }
        let first: Vec<&&WireFrame> = mine.iter().filter(|f| f.ext("fromTransactionCheck") == Some("false")).collect();
        let executed_code = match s.plan {
            Plan::Commit => END_COMMIT,
            Plan::Rollback => END_ROLLBACK,
            _ => END_UNKNOWN,
        };
        assert_eq!(first.len(), 1, "{id}: one END after the local execution: {mine:#?}");
        assert_eq!(first[0].ext("commitOrRollback"), Some(executed_code), "{id}: {mine:#?}");
        let from_checks: Vec<&str> = mine
            .iter()
            .filter(|f| f.ext("fromTransactionCheck") == Some("true"))
            .map(|f| f.ext("commitOrRollback").unwrap_or("?"))
            .collect();
        let answers: Vec<&str> = checks
            .iter()
            .filter(|c| c.id == Some(*id))
            .map(|c| match c.answer {
                LocalTransactionState::CommitMessage => END_COMMIT,
                LocalTransactionState::RollbackMessage => END_ROLLBACK,
                LocalTransactionState::Unknown => END_UNKNOWN,
            })
            .collect();
        assert_eq!(from_checks, answers, "{id}: one END per check, carrying the listener's answer");
        assert_eq!(first.len() + from_checks.len(), mine.len(), "{id}: fromTransactionCheck is true or false: {mine:#?}");
    }
    assert_eq!(cluster.encodings_seen(), vec![serialize_code(serialize_type)], "header encodings the clients sent");

    #[allow(deprecated)]
    bounded("pull shutdown", pull.shutdown()).await.expect("pull shutdown");
    bounded("push consumer shutdown", consumer.shutdown()).await;
    bounded("producer shutdown", producer.shutdown()).await;
    println!(
        "interop_txn {label}: {} committed delivered once, {} rolled back never, {} checks ({} answered UNKNOWN)",
        committed.len(),
        MESSAGES - committed.len(),
        checks.len(),
        checks.iter().filter(|c| c.answer == LocalTransactionState::Unknown).count()
    );
}

test_both_encodings!(
    json_headers_transactions_commit_rollback_and_check_back,
    binary_headers_transactions_commit_rollback_and_check_back,
    transactions
);
