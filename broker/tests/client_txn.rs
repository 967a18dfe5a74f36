//! RingMQ's own transactional producer (`ringmq_client::transaction`) end to end against
//! a real broker: a NameServer and broker "broker-a" (two shards, sync flush, short
//! transaction timings: `transaction_timeout_ms` and `transaction_check_interval_ms`
//! 1 s) in this process, the client on a glommio executor of its own, a push consumer
//! of the same crate recording every delivery.
//!
//! Eight messages go through `send_message_in_transaction`, spread by the producer's
//! round robin over the topic's four queues (both shards, so some checks come from the
//! shard that does not hold the producer's connection). The listener's
//! `execute_local_transaction` answers by plan, keyed by the id the send passes as its
//! `arg`: COMMIT, ROLLBACK, UNKNOWN-then-COMMIT, UNKNOWN-then-ROLLBACK. Its
//! `check_local_transaction` answers UNKNOWN while a gate the test holds is closed, and
//! the plan's second answer once the test opens it. The test proves:
//!
//! 1. COMMIT at execution: delivered exactly once; ROLLBACK: never delivered or stored;
//! 2. UNKNOWN: the broker checks back, and only those messages: our check listener gets
//!    the half with its real topic and queue, keys, tags, body, transaction id (the
//!    send's), PGROUP, TRAN_MSG and a growing TRANSACTION_CHECK_TIMES, never before
//!    `transactionTimeOut`; an UNKNOWN answer keeps it open and it is checked again;
//!    the COMMIT answer delivers it (only after the answer), the ROLLBACK answer drops
//!    it;
//! 3. nothing is visible before its commit: with the gate closed and every UNKNOWN
//!    message checked at least once, the queues' max offsets count only the commits so
//!    far and the consumer has nothing else;
//! 4. a message sent with `send_half_message` is ended with `end_transaction_request`
//!    (answered END): COMMIT is answered Ok, a second END with the opposite state is
//!    the broker's ILLEGAL_OPERATION as an error, a repeat of the first is Ok again;
//! 5. the broker's counters agree (halves, commits, rollbacks, checks sent = checks the
//!    listener saw, nothing discarded, no check without a producer), and a full read of
//!    every queue finds each committed message once, as sent and no longer a half.
//!
//! Every wait is bounded by `WAIT`; ordering is shown by the events themselves (a check
//! the listener saw, a delivery, a counter), never by sleeping.

mod common;

use common::{runtime_info, sync_small_segments, Broker, Conn};
use ringmq_broker::store::engine::ShardId;
use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PullConsumer, PullConsumerConfig, PushConsumer, PushConsumerConfig};
use ringmq_client::message::properties::keys;
use ringmq_client::msgid::decode_offset_msg_id;
use ringmq_client::producer::{ProducerConfig, SendResult};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::transaction::{send_transaction_id, LocalTransactionState, TransactionListener, TransactionProducer};
use ringmq_client::{ClientConfig, ClientError, Message, MessageExt};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use LocalTransactionState::{CommitMessage, RollbackMessage, Unknown};

/// Bound on any single wait.
const WAIT: Duration = Duration::from_secs(15);
/// How often a wait looks again (the client's tasks run in between).
const POLL: Duration = Duration::from_millis(20);
const TOPIC: &str = "ClientTxn";
const QUEUES: i32 = 4;
const GROUP: &str = "pg-client-txn";
/// Messages sent with `send_message_in_transaction` (two of each plan).
const MESSAGES: usize = 8;
/// The id of the message sent with `send_half_message` and ended by request.
const HALF_ID: usize = MESSAGES;
/// The broker's `transactionTimeOut` and `transactionCheckInterval` here.
const TXN_TIMEOUT_MS: u64 = 1_000;
const TXN_CHECK_INTERVAL_MS: u64 = 1_000;

/// Message `id`'s local transaction: its answer at execution, and its answer to a check
/// once the gate is open. (`HALF_ID` is never executed; were it checked, it commits.)
fn plan(id: usize) -> (LocalTransactionState, LocalTransactionState) {
    [(CommitMessage, CommitMessage), (RollbackMessage, RollbackMessage), (Unknown, CommitMessage), (Unknown, RollbackMessage)][id % 4]
}

fn body_of(id: usize) -> String {
    format!("client txn {id}")
}

fn keys_of(id: usize) -> [String; 2] {
    [format!("txn-key-{id}"), "client-txn".to_string()]
}

fn tag_of(id: usize) -> &'static str {
    ["TagA", "TagB"][id % 2]
}

fn message(id: usize) -> Message {
    let [k1, k2] = keys_of(id);
    Message::new(TOPIC, body_of(id)).with_tags(tag_of(id)).and_then(|m| m.with_keys([k1.as_str(), k2.as_str()])).expect("message")
}

/// The id a body names (a body nobody sent fails the test).
fn id_of(m: &MessageExt) -> usize {
    let body = String::from_utf8_lossy(&m.body);
    body.strip_prefix("client txn ").and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("a message nobody sent: {body:?}"))
}

// ---------------------------------------------------------------------------------
// The listener and what it saw.

/// One call of `check_local_transaction`.
#[derive(Debug, Clone)]
struct Checked {
    /// From the keys: the listener decides by them, as an application would.
    id: Option<usize>,
    msg: MessageExt,
    gate_open: bool,
    answer: LocalTransactionState,
    /// Just before the answer was returned (the client sends its END after that).
    answered_at: Instant,
}

#[derive(Default)]
struct Book {
    /// Closed: every check answers UNKNOWN.
    gate_open: Cell<bool>,
    /// Each `execute_local_transaction` call: the message and the send's `arg`.
    executed: RefCell<Vec<(Message, Option<usize>)>>,
    checks: RefCell<Vec<Checked>>,
}

struct Listener(Rc<Book>);

impl TransactionListener for Listener {
    fn execute_local_transaction(&self, msg: &Message, arg: Option<&dyn Any>) -> LocalTransactionState {
        let id = arg.and_then(|a| a.downcast_ref::<usize>()).copied();
        self.0.executed.borrow_mut().push((msg.clone(), id));
        id.map_or(Unknown, |id| plan(id).0)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let id = msg.keys().find_map(|k| k.strip_prefix("txn-key-")).and_then(|i| i.parse().ok());
        let gate_open = self.0.gate_open.get();
        let answer = match (gate_open, id) {
            (true, Some(id)) => plan(id).1,
            _ => Unknown,
        };
        self.0.checks.borrow_mut().push(Checked { id, msg: msg.clone(), gate_open, answer, answered_at: Instant::now() });
        answer
    }
}

/// One send: what the broker answered, and when the send began.
struct Sent {
    result: SendResult,
    started: Instant,
}

impl Sent {
    /// The half's CommitLog offset (inside its offsetMsgId).
    fn phys(&self) -> i64 {
        let (_, phys) = decode_offset_msg_id(&self.result.offset_msg_id).expect("an offsetMsgId");
        phys as i64
    }
}

// ---------------------------------------------------------------------------------
// The broker, seen through raw requests.

/// A GET_BROKER_RUNTIME_INFO counter (summed over shards).
fn counter(broker: SocketAddr, key: &str) -> u64 {
    let table = runtime_info(&mut Conn::open(broker));
    table.get(key).and_then(|v| v.as_str()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("runtime info {key}: {table:?}"))
}

/// The sum of the topic's queues' max offsets (GET_MAX_OFFSET): what they hold.
fn stored(broker: SocketAddr) -> i64 {
    let mut conn = Conn::open(broker);
    (0..QUEUES)
        .map(|q| {
            let get = RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string());
            let r = conn.call(get.with_opaque(100 + q));
            assert_eq!(r.code, rs::SUCCESS, "GET_MAX_OFFSET {TOPIC}/{q}: {:?}", r.remark);
            r.ext("offset").and_then(|o| o.parse::<i64>().ok()).expect("offset")
        })
        .sum()
}

/// Polls `cond` on the executor, so the client's tasks run in between; fails the test
/// after `WAIT`.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "{what}: not within {WAIT:?}");
        glommio::timer::sleep(POLL).await;
    }
}

// ---------------------------------------------------------------------------------
// The scenario.

#[test]
fn transactional_producer_commits_rolls_back_and_answers_checks() {
    let namesrv =
        namesrv::server::spawn(namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().expect("address"), ..Default::default() })
            .expect("namesrv starts");
    let ns_addr = namesrv.local_addr().to_string();
    let broker_ns = ns_addr.clone();
    let broker = Broker::start(
        move |config| {
            config.broker_name = "broker-a".into();
            config.namesrv_addrs = vec![broker_ns];
            config.auto_create_topic = false;
            // The consumer's shutdown waits for its suspended pulls: answer them sooner.
            config.pull_suspend_max_ms = 1_000;
            config.transaction_timeout_ms = TXN_TIMEOUT_MS;
            config.transaction_check_interval_ms = TXN_CHECK_INTERVAL_MS;
            sync_small_segments(config);
            // The disk is shared with other builds: disk watermarks are not tested here.
            config.store.disk_max_used_ratio = 1.0;
            config.store.disk_force_clean_ratio = 1.0;
            config.store.disk_refuse_ratio = 1.0;
        },
        &[(TOPIC, QUEUES)],
    );
    let broker_addr = broker.addr;
    let started = Instant::now();
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("client-txn")
        .spawn(move || scenario(ns_addr, broker_addr))
        .expect("executor starts")
        .join()
        .expect("the scenario");
    println!("client_txn: scenario took {:?}", started.elapsed());
    drop(broker);
    namesrv.stop();
}

async fn scenario(ns_addr: String, broker: SocketAddr) {
    let mut client = ClientConfig::new([ns_addr]);
    client.client_ip = Some("127.0.0.1".parse().expect("ip"));

    // A push consumer of the topic, recording every delivery.
    let deliveries: Rc<RefCell<Vec<(Instant, MessageExt)>>> = Rc::default();
    let mut config = PushConsumerConfig::new(client.clone(), "cg-client-txn");
    config.consume_from = ConsumeFrom::FirstOffset;
    config.rebalance_interval_ms = 1_000;
    config.pull_suspend_ms = 500;
    let mut consumer = PushConsumer::new(config);
    consumer.subscribe(TOPIC, "*").expect("subscribe");
    let sink = deliveries.clone();
    consumer.register_concurrently(move |msgs| {
        let at = Instant::now();
        sink.borrow_mut().extend(msgs.iter().map(|m| (at, m.clone())));
        ConsumeStatus::Success
    });
    consumer.start().await.expect("push consumer starts");
    let delivered_ids = || deliveries.borrow().iter().map(|(_, m)| id_of(m)).collect::<Vec<_>>();

    // The transactional producer. Its first send fetches the route and heartbeats, so
    // the broker knows the group's connection before any half is stored.
    let book = Rc::new(Book::default());
    let mut config = ProducerConfig::new(client.clone(), GROUP);
    config.send_timeout_ms = 5_000;
    let producer = TransactionProducer::start(config, Rc::new(Listener(book.clone()))).await.expect("transaction producer starts");

    let mut sent: BTreeMap<usize, Sent> = BTreeMap::new();
    for id in 0..MESSAGES {
        let started = Instant::now();
        let r = producer.send_message_in_transaction(message(id), Some(&id)).await.expect("send in transaction");
        assert_eq!(r.local_state, plan(id).0, "{id}: the listener's answer");
        assert!(r.end.is_ok(), "{id}: END_TRANSACTION written: {:?}", r.end);
        let s = &r.send_result;
        assert_eq!(s.msg_id.len(), 32, "{id}: UNIQ_KEY {}", s.msg_id);
        assert_eq!(send_transaction_id(s), s.msg_id, "{id}: the transaction id is the UNIQ_KEY");
        assert_eq!((s.queue.topic.as_str(), s.queue.broker_name.as_str()), (TOPIC, "broker-a"), "{id}");
        sent.insert(id, Sent { result: r.send_result, started });
    }
    let queues_used: BTreeSet<i32> = sent.values().map(|s| s.result.queue.queue_id).collect();
    assert_eq!(queues_used.len(), QUEUES as usize, "sends spread over every queue (both shards)");
    // The listener ran once per send, with the send's arg and the half's ids.
    let executed = book.executed.borrow().clone();
    assert_eq!(executed.len(), MESSAGES, "execute_local_transaction once per send");
    for (msg, arg) in &executed {
        let id = arg.unwrap_or_else(|| panic!("the send's arg reaches the listener: {msg:?}"));
        let s = &sent[&id].result;
        assert_eq!((msg.topic.as_str(), &msg.body[..]), (TOPIC, body_of(id).as_bytes()), "{id}");
        assert_eq!(msg.properties.keys().collect::<Vec<_>>(), keys_of(id), "{id}");
        assert_eq!(msg.properties.get(keys::UNIQ_KEY), Some(s.msg_id.as_str()), "{id}");
        assert_eq!(msg.properties.get(keys::TRANSACTION_ID), Some(send_transaction_id(s)), "{id}");
        assert_eq!(msg.properties.get(keys::TRAN_MSG), Some("true"), "{id}");
        assert_eq!(msg.properties.get(keys::PGROUP), Some(GROUP), "{id}");
    }

    // 4. A half sent on its own, ended by answered ENDs.
    let started = Instant::now();
    let half = producer.send_half_message(message(HALF_ID)).await.expect("half message");
    producer.end_transaction_request(&half, CommitMessage).await.expect("END (commit) answered SUCCESS");
    let contradiction = producer.end_transaction_request(&half, RollbackMessage).await;
    assert!(
        matches!(&contradiction, Err(ClientError::Broker { code: rs::ILLEGAL_OPERATION, .. })),
        "a rollback after the commit is the broker's ILLEGAL_OPERATION: {contradiction:?}"
    );
    producer.end_transaction_request(&half, CommitMessage).await.expect("the same END again is answered SUCCESS");
    assert_eq!(book.executed.borrow().len(), MESSAGES, "send_half_message runs no local transaction");
    sent.insert(HALF_ID, Sent { result: half, started });

    let ids = |pick: fn(usize) -> bool| -> Vec<usize> { sent.keys().copied().filter(|id| pick(*id)).collect() };
    let committed_at_once = ids(|id| id == HALF_ID || plan(id).0 == CommitMessage);
    let unknown = ids(|id| id != HALF_ID && plan(id).0 == Unknown);
    let committed = ids(|id| plan(id).1 == CommitMessage);

    // 3. Gate closed: every UNKNOWN one is checked (and answered UNKNOWN) at least once
    // and stays open; nothing of it is stored or delivered.
    wait_until("a first check of every UNKNOWN message", || {
        let checks = book.checks.borrow();
        unknown.iter().all(|id| checks.iter().any(|c| c.id == Some(*id)))
    })
    .await;
    wait_until("the commits so far delivered", || committed_at_once.iter().all(|id| delivered_ids().contains(id))).await;
    assert_eq!(stored(broker), committed_at_once.len() as i64, "the queues hold only the commits so far");
    let early = delivered_ids();
    assert!(early.iter().all(|id| committed_at_once.contains(id)), "delivered before any check answered: {early:?}");
    assert_eq!(counter(broker, "transactionOpen"), unknown.len() as u64, "the UNKNOWN ones stay open");
    assert!(book.checks.borrow().iter().all(|c| !c.gate_open && c.answer == Unknown));

    // 2. Open the gate: the next checks answer by plan.
    book.gate_open.set(true);
    wait_until("every committed message delivered", || committed.iter().all(|id| delivered_ids().contains(id))).await;
    wait_until("every transaction resolved on the broker", || counter(broker, "transactionOpen") == 0).await;
    // Every check the broker sent reached the listener (one sent just before the
    // resolving END arrived may still be on its way).
    wait_until("every check the broker sent seen by the listener", || {
        counter(broker, "transactionCheckTotal") == book.checks.borrow().len() as u64
    })
    .await;

    let checks = book.checks.borrow().clone();
    for c in &checks {
        let id = c.id.unwrap_or_else(|| panic!("a check for a message nobody sent: {c:?}"));
        assert!(unknown.contains(&id), "only the UNKNOWN ones are checked: {c:?}");
        let s = &sent[&id];
        let m = &c.msg;
        assert_eq!((m.topic.as_str(), m.queue_id), (TOPIC, s.result.queue.queue_id), "the real topic and queue: {c:?}");
        assert_eq!((m.tags(), &m.body[..]), (Some(tag_of(id)), body_of(id).as_bytes()), "{c:?}");
        assert_eq!(m.keys().collect::<Vec<_>>(), keys_of(id), "{c:?}");
        assert_eq!(m.transaction_id(), send_transaction_id(&s.result), "the check's transaction id: {c:?}");
        assert_eq!((m.property(keys::PGROUP), m.property(keys::TRAN_MSG)), (Some(GROUP), Some("true")), "{c:?}");
        assert_eq!(m.commit_log_offset, s.phys(), "the check names the half: {c:?}");
    }
    for id in &unknown {
        let mine: Vec<&Checked> = checks.iter().filter(|c| c.id == Some(*id)).collect();
        let times: Vec<Option<&str>> = mine.iter().map(|c| c.msg.property(keys::TRANSACTION_CHECK_TIMES)).collect();
        let want: Vec<String> = (1..=mine.len()).map(|n| n.to_string()).collect();
        assert_eq!(times, want.iter().map(|n| Some(n.as_str())).collect::<Vec<_>>(), "TRANSACTION_CHECK_TIMES of {id}'s checks");
        // Not before transactionTimeOut (the broker's clock against the born time; 5 ms
        // for the wall clock against this monotonic one).
        let first = mine[0].answered_at.duration_since(sent[id].started);
        assert!(first + Duration::from_millis(5) >= Duration::from_millis(TXN_TIMEOUT_MS), "{id}: first checked {first:?} after its send");
        // UNKNOWN while the gate was closed, checked again, then the plan's answer (a
        // check the broker sent before the resolving END arrived may repeat it).
        let gated = mine.iter().take_while(|c| !c.gate_open).count();
        assert!(gated >= 1 && mine[..gated].iter().all(|c| c.answer == Unknown), "{id}: {mine:#?}");
        assert!(mine.len() > gated, "{id}: checked again after an UNKNOWN answer: {mine:#?}");
        assert!(mine[gated..].iter().all(|c| c.gate_open && c.answer == plan(*id).1), "{id}: answered by plan once open: {mine:#?}");
    }
    let check_shards: BTreeSet<u16> = checks.iter().map(|c| ShardId::of_phys(c.msg.commit_log_offset as u64).0).collect();
    assert_eq!(check_shards.len(), 2, "checks came from both shards (one does not hold the producer's connection)");

    // 1, 2. Delivered exactly once: each committed message once, nothing else; a checked
    // commit only after its check answered COMMIT.
    let got = deliveries.borrow().clone();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, m) in &got {
        *counts.entry(id_of(m)).or_default() += 1;
    }
    let once: BTreeMap<usize, usize> = committed.iter().map(|id| (*id, 1)).collect();
    assert_eq!(counts, once, "push deliveries: each committed message once, nothing else");
    for id in unknown.iter().filter(|id| plan(**id).1 == CommitMessage) {
        let commit_at = checks.iter().find(|c| c.id == Some(*id) && c.answer == CommitMessage).expect("a COMMIT answer").answered_at;
        let delivered_at = got.iter().find(|(_, m)| id_of(m) == *id).expect("delivered").0;
        assert!(delivered_at >= commit_at, "{id} delivered before its check answered COMMIT");
    }

    // 5. The broker's account.
    let total = MESSAGES as u64 + 1;
    assert_eq!(counter(broker, "transactionHalfTotal"), total);
    assert_eq!(counter(broker, "transactionCommitTotal"), committed.len() as u64);
    assert_eq!(counter(broker, "transactionRollbackTotal"), total - committed.len() as u64);
    assert_eq!(counter(broker, "transactionDiscardTotal"), 0);
    assert_eq!(counter(broker, "transactionCheckNoProducerTotal"), 0, "the producer's connection was known to both shards");
    assert!(counter(broker, "transactionDuplicateEndTotal") >= 2, "the contradicting and the repeated END");
    // What the queues hold: each committed message once, as sent.
    let held = stored(broker);
    assert_eq!(held, committed.len() as i64, "the queues hold the committed messages");
    let mut config = PullConsumerConfig::new(client, "cg-client-txn-reader");
    config.consume_from = ConsumeFrom::FirstOffset;
    let reader = PullConsumer::start(config).await.expect("pull consumer");
    reader.assign(&reader.fetch_queues(TOPIC).await.expect("queues"), "*").await.expect("assign");
    let mut read = Vec::new();
    let began = Instant::now();
    while (read.len() as i64) < held {
        assert!(began.elapsed() < WAIT, "read {} of {held} stored messages", read.len());
        read.extend(reader.poll(Duration::from_millis(300)).await.expect("poll"));
    }
    reader.shutdown().await;
    let mut stored_counts: BTreeMap<usize, usize> = BTreeMap::new();
    for m in &read {
        let id = id_of(m);
        let s = &sent[&id].result;
        *stored_counts.entry(id).or_default() += 1;
        assert_eq!((m.topic.as_str(), m.queue_id), (TOPIC, s.queue.queue_id), "{id}: the real topic and queue");
        assert_eq!(m.keys().collect::<Vec<_>>(), keys_of(id), "{id}");
        assert_eq!((m.tags(), m.msg_id.as_str()), (Some(tag_of(id)), s.msg_id.as_str()), "{id}: tags and msgId kept");
        assert_eq!((m.property(keys::PGROUP), m.property(keys::TRAN_MSG)), (Some(GROUP), None), "{id}: a committed copy is no half");
    }
    assert_eq!(stored_counts, once, "stored: each committed message once, nothing else");

    consumer.shutdown().await;
    producer.shutdown().await;
    println!(
        "client_txn: {} committed delivered once, {} rolled back never, {} checks ({} answered UNKNOWN)",
        committed.len(),
        total as usize - committed.len(),
        checks.len(),
        checks.iter().filter(|c| c.answer == Unknown).count()
    );
}
