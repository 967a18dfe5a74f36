//! Request-reply (RocketMQ 4.6+) through a 2-shard broker with RingMQ's own client:
//! `Producer::request` / `request_with_callback` on one side, a push consumer that
//! answers with `Producer::reply` (SEND_REPLY_MESSAGE_V2) on the other.
//!
//! What it proves:
//! 1. a request gets its own reply (correlation id, body, reply topic `<cluster>_REPLY_TOPIC`,
//!    `ARRIVE_TIME`), sync and callback forms, and the request message the replier saw
//!    carries `CLUSTER` (stamped by the broker), `REPLY_TO_CLIENT` and `TTL`;
//! 2. a request nobody answers fails with `RequestTimeout` after its timeout, and leaves
//!    no pending slot behind;
//! 3. `storeReplyMessageEnable` true (the default): each reply is stored in the reply
//!    topic and the replier's answer names it; false (set at run time with
//!    UPDATE_BROKER_CONFIG): pushed only, nothing stored, the answer's msgId is "0";
//! 4. a reply for a requester that is not connected is SYSTEM_ERROR with Java's remark;
//! 5. the push reaches the requester whichever shard holds its connection, the reply
//!    topic's queue owner or the other one (`reply_reaches_a_requester_on_either_shard`:
//!    shard route mode, where a connection's shard is its port, with raw requesters).
//!
//! Every wait is bounded by `WAIT`; ordering comes from the events (a reply, an answer),
//! never from sleeping.

mod common;

use common::{create_topic, encode, Conn, Got};
use ringmq_broker::config::{BrokerConfig, RouteMode};
use ringmq_broker::launch;
use ringmq_broker::routing::queue_owner;
use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
use ringmq_client::message::properties::keys;
use ringmq_client::producer::{Producer, ProducerConfig, SendResult};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::SendMessageRequestHeaderV2;
use ringmq_client::remoting::heartbeat::{HeartbeatData, ProducerData};
use ringmq_client::request::reply_topic;
use ringmq_client::{ClientConfig, ClientError, Message, MessageExt};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bound on any single wait.
const WAIT: Duration = Duration::from_secs(20);
/// How often a wait looks again (the client's tasks run in between).
const POLL: Duration = Duration::from_millis(20);
const CLUSTER: &str = "DefaultCluster";
const TOPIC: &str = "RequestTopic";
/// A topic with no consumer: its requests time out.
const UNANSWERED: &str = "NobodyAnswers";
const QUEUES: i32 = 4;
/// The timeout of a request nobody answers.
const SHORT_TIMEOUT: Duration = Duration::from_millis(1_000);

fn broker_config(root: &std::path::Path, ns_addr: &str, route_mode: RouteMode) -> BrokerConfig {
    let mut config = BrokerConfig {
        store_root: root.to_path_buf(),
        listen_port: 0,
        shard_count: 2,
        broker_ip: Some("127.0.0.1".into()),
        broker_name: "broker-a".into(),
        cluster_name: CLUSTER.into(),
        namesrv_addrs: vec![ns_addr.to_string()],
        auto_create_topic: false,
        route_mode,
        // The consumer's shutdown waits for its suspended pulls: answer them sooner.
        pull_suspend_max_ms: 1_000,
        ..BrokerConfig::default()
    };
    common::sync_small_segments(&mut config);
    common::host_independent_disk_watermarks(&mut config.store);
    config
}

/// A NameServer and a 2-shard broker "broker-a" in `route_mode`, in a fresh store (the
/// directory lives as long as the returned guard).
fn start(route_mode: RouteMode) -> (namesrv::server::ServerHandle, launch::BrokerHandle, tempfile::TempDir) {
    let config = namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().expect("address"), ..Default::default() };
    let namesrv = namesrv::server::spawn(config).expect("namesrv starts");
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("store dir");
    let handle = launch::start(broker_config(root.path(), &namesrv.local_addr().to_string(), route_mode)).expect("broker starts");
    (namesrv, handle, root)
}

/// Polls `cond` on the executor, so the client's tasks run in between.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "{what}: not within {WAIT:?}");
        glommio::timer::sleep(POLL).await;
    }
}

/// What the replier saw and answered.
#[derive(Default)]
struct Replier {
    requests: RefCell<Vec<MessageExt>>,
    answers: RefCell<Vec<Result<SendResult, String>>>,
}

/// A push consumer of `topics` that answers each request with "re: <body>".
async fn start_replier(client: &ClientConfig) -> (PushConsumer, Producer, Rc<Replier>) {
    let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-replier")).await.expect("replier producer starts");
    let seen = Rc::new(Replier::default());
    let mut config = PushConsumerConfig::new(client.clone(), "cg-replier");
    config.consume_from = ConsumeFrom::FirstOffset;
    config.rebalance_interval_ms = 1_000;
    config.pull_suspend_ms = 500;
    let mut consumer = PushConsumer::new(config);
    consumer.subscribe(TOPIC, "*").expect("subscribe");
    let (sink, replier) = (seen.clone(), producer.clone());
    consumer.register_concurrently(move |msgs| {
        for m in msgs {
            sink.requests.borrow_mut().push(m.clone());
            let (sink, replier, request) = (sink.clone(), replier.clone(), m.clone());
            glommio::spawn_local(async move {
                let body = format!("re: {}", String::from_utf8_lossy(&request.body));
                let answer = replier.reply(&request, body).await.map_err(|e| e.to_string());
                sink.answers.borrow_mut().push(answer);
            })
            .detach();
        }
        ConsumeStatus::Success
    });
    consumer.start().await.expect("replier consumer starts");
    (consumer, producer, seen)
}

#[test]
fn ringmq_requester_and_replier() {
    let (namesrv, handle, _root) = start(RouteMode::Host);
    let ns_addr = namesrv.local_addr().to_string();
    let broker = SocketAddr::from(([127, 0, 0, 1], handle.addr.port()));
    for topic in [TOPIC, UNANSWERED] {
        let r = Conn::open(broker).call(create_topic(topic, QUEUES));
        assert_eq!(r.code, rs::SUCCESS, "create {topic}: {:?}", r.remark);
    }
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("request-reply")
        .spawn(move || requests_and_replies(ns_addr, broker))
        .expect("executor starts")
        .join()
        .expect("the scenario");
    handle.stop();
    handle.join();
    namesrv.stop();
}

/// The reply topic's stored messages (its one queue's max offset).
fn stored_replies(broker: SocketAddr) -> i64 {
    let r = Conn::open(broker).call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", reply_topic(CLUSTER)).with_ext("queueId", "0"));
    assert_eq!(r.code, rs::SUCCESS, "GET_MAX_OFFSET of the reply topic: {:?}", r.remark);
    r.ext("offset").and_then(|o| o.parse().ok()).expect("offset")
}

fn set_store_replies(broker: SocketAddr, on: bool) {
    let r = Conn::open(broker).call(RemotingCommand::request(rq::UPDATE_BROKER_CONFIG).with_body(format!("storeReplyMessageEnable={on}").into_bytes()));
    assert_eq!(r.code, rs::SUCCESS, "UPDATE_BROKER_CONFIG: {:?}", r.remark);
}

fn check_reply(reply: &MessageExt, body: &str) {
    assert_eq!(String::from_utf8_lossy(&reply.body), format!("re: {body}"));
    assert_eq!(reply.topic, reply_topic(CLUSTER));
    assert_eq!(reply.property(keys::MSG_TYPE), Some("reply"));
    assert!(reply.property(keys::CORRELATION_ID).is_some_and(|c| c.len() == 36), "{reply:?}");
    assert!(reply.property(keys::REPLY_MESSAGE_ARRIVE_TIME).is_some() && reply.property(keys::PUSH_REPLY_TIME).is_some(), "{reply:?}");
}

async fn requests_and_replies(ns_addr: String, broker: SocketAddr) {
    let mut client = ClientConfig::new([ns_addr]);
    client.client_ip = Some("127.0.0.1".parse().expect("ip"));
    let (mut consumer, replier, seen) = start_replier(&client).await;
    let requester = Producer::start(ProducerConfig::new(client.clone(), "pg-requester")).await.expect("requester starts");

    // 1. Sync requests, spread by round robin over the topic's queues (both shards).
    const SYNC: usize = 8;
    for i in 0..SYNC {
        let body = format!("ping {i}");
        let reply = requester.request(Message::new(TOPIC, body.clone()), WAIT).await.unwrap_or_else(|e| panic!("request {i}: {e}"));
        check_reply(&reply, &body);
    }
    // The callback form.
    let got: Rc<RefCell<Vec<Result<MessageExt, String>>>> = Rc::default();
    for i in 0..2 {
        let sink = got.clone();
        requester.request_with_callback(Message::new(TOPIC, format!("callback {i}")), WAIT, move |r| sink.borrow_mut().push(r.map_err(|e| e.to_string())));
    }
    wait_until("both callbacks", || got.borrow().len() == 2).await;
    let mut bodies: Vec<String> = got.borrow().iter().map(|r| String::from_utf8_lossy(&r.as_ref().expect("callback reply").body).into_owned()).collect();
    bodies.sort();
    assert_eq!(bodies, ["re: callback 0", "re: callback 1"]);
    let replied = SYNC + 2;
    wait_until("every reply answered to the replier", || seen.answers.borrow().len() == replied).await;
    for request in seen.requests.borrow().iter() {
        assert_eq!(request.property(keys::CLUSTER), Some(CLUSTER), "the broker stamps CLUSTER on a request");
        assert_eq!(request.property(keys::REPLY_TO_CLIENT), Some(requester.instance().client_id.as_str()));
        assert_eq!(request.property(keys::TTL), Some(WAIT.as_millis().to_string().as_str()));
    }
    let queues: std::collections::BTreeSet<i32> = seen.requests.borrow().iter().map(|m| m.queue_id).collect();
    assert_eq!(queues.len(), QUEUES as usize, "requests went to every queue (both shards)");

    // 3. Stored (the default): one reply topic message per reply, named in each answer.
    assert_eq!(stored_replies(broker), replied as i64, "every reply stored in the reply topic");
    for answer in seen.answers.borrow().iter() {
        let a = answer.as_ref().expect("the replier's send succeeds");
        assert_eq!(a.offset_msg_id.len(), 32, "a stored reply's answer names it: {a:?}");
        assert_eq!(a.queue.topic, reply_topic(CLUSTER));
    }
    // Off: pushed only.
    set_store_replies(broker, false);
    let reply = requester.request(Message::new(TOPIC, "not stored"), WAIT).await.expect("request with storing off");
    check_reply(&reply, "not stored");
    wait_until("the replier's answer", || seen.answers.borrow().len() == replied + 1).await;
    let last = seen.answers.borrow().last().cloned().expect("an answer").expect("pushed: SUCCESS");
    assert_eq!((last.offset_msg_id.as_str(), last.queue_offset), ("0", 0), "nothing stored: Java's msgId \"0\"");
    assert_eq!(stored_replies(broker), replied as i64, "nothing more stored");
    set_store_replies(broker, true);

    // 2. Nobody answers: RequestTimeout after the timeout, no slot left.
    let started = Instant::now();
    let r = requester.request(Message::new(UNANSWERED, "anyone?"), SHORT_TIMEOUT).await;
    assert!(matches!(&r, Err(ClientError::RequestTimeout { timeout_ms: 1_000, .. })), "{r:?}");
    assert!(started.elapsed() >= SHORT_TIMEOUT && started.elapsed() < WAIT, "{:?}", started.elapsed());
    assert_eq!(requester.instance().requests.len(), 0, "the timed-out request's slot is gone");

    // 4. A reply for a requester that is not connected.
    let mut header = common::send_header(&reply_topic(CLUSTER), 0);
    header.i = Some("MSG_TYPE\u{1}reply\u{2}CORRELATION_ID\u{1}x\u{2}REPLY_TO_CLIENT\u{1}127.0.0.1@gone\u{2}".into());
    let mut c = Conn::open(broker);
    let r = c.call(RemotingCommand::request(rq::SEND_REPLY_MESSAGE_V2).with_header(&header).with_body(b"late".to_vec()).with_opaque(5));
    assert_eq!(r.code, rs::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("push reply message fail, channel of <127.0.0.1@gone> not found."));
    assert_eq!(stored_replies(broker), replied as i64 + 1, "stored all the same, as Apache does");

    requester.shutdown().await;
    consumer.shutdown().await;
    replier.shutdown().await;
}

// ---------------------------------------------------------------------------------
// Placement: the requester's connection on each shard.

/// Answers PUSH_REPLY_MESSAGE_TO_CLIENT frames until the request's reply came; returns
/// the send's answer and the pushed reply.
fn raw_request(c: &mut Conn, queue_owner_port_queue: i32, client_id: &str, correlation_id: &str) -> (RemotingCommand, RemotingCommand) {
    let mut header: SendMessageRequestHeaderV2 = common::send_header(TOPIC, queue_owner_port_queue);
    header.a = format!("pg-{client_id}");
    header.i = Some(format!("CORRELATION_ID\u{1}{correlation_id}\u{2}REPLY_TO_CLIENT\u{1}{client_id}\u{2}TTL\u{1}20000\u{2}"));
    let send = RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(format!("raw {correlation_id}").into_bytes()).with_opaque(77);
    c.write(&encode(&send), 0);
    let deadline = Instant::now() + WAIT;
    let (mut answer, mut pushed) = (None, None);
    while answer.is_none() || pushed.is_none() {
        match c.read(deadline) {
            Got::Cmd(r) if r.is_response() && r.opaque == 77 => answer = Some(r),
            Got::Cmd(push) if push.code == rq::PUSH_REPLY_MESSAGE_TO_CLIENT => {
                c.write(&encode(&push.create_response(rs::SUCCESS, None)), 0);
                pushed = Some(push);
            }
            Got::Cmd(_) => {}
            got => panic!("{client_id}: {got:?} before the reply"),
        }
    }
    (answer.expect("answer"), pushed.expect("reply"))
}

#[test]
fn reply_reaches_a_requester_on_either_shard() {
    // Shard route mode: a connection to shard i's port is held by shard i.
    let (namesrv, handle, _root) = start(RouteMode::Shard);
    let ns_addr = namesrv.local_addr().to_string();
    let shard_addrs: Vec<SocketAddr> = handle.shard_addrs.iter().map(|a| SocketAddr::from(([127, 0, 0, 1], a.port()))).collect();
    // One queue per shard-broker (a create's count is per shard-broker in shard mode).
    let r = Conn::open(shard_addrs[0]).call(create_topic(TOPIC, 1));
    assert_eq!(r.code, rs::SUCCESS, "create: {:?}", r.remark);
    let reply_owner = queue_owner(&reply_topic(CLUSTER), 0, 2);

    let stop = Arc::new(AtomicBool::new(false));
    let replier_stop = stop.clone();
    let replier = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("replier")
        .spawn(move || async move {
            let mut client = ClientConfig::new([ns_addr]);
            client.client_ip = Some("127.0.0.1".parse().expect("ip"));
            let (mut consumer, producer, seen) = start_replier(&client).await;
            while !replier_stop.load(Ordering::Relaxed) {
                glommio::timer::sleep(POLL).await;
            }
            consumer.shutdown().await;
            producer.shutdown().await;
            let answers = seen.answers.borrow();
            assert_eq!(answers.len(), 2, "one reply per request: {answers:?}");
            assert!(answers.iter().all(Result::is_ok), "every reply pushed: {answers:?}");
        })
        .expect("executor starts");

    for shard in 0..2 {
        let client_id = format!("127.0.0.1@raw-{shard}");
        let mut c = Conn::open(shard_addrs[shard]);
        let heartbeat = HeartbeatData { client_id: client_id.clone(), producer_data_set: vec![ProducerData { group_name: format!("pg-{client_id}") }], consumer_data_set: vec![] };
        let r = c.call(RemotingCommand::request(rq::HEART_BEAT).with_body(heartbeat.encode()).with_opaque(3));
        assert_eq!(r.code, rs::SUCCESS, "heartbeat: {:?}", r.remark);
        let correlation_id = format!("corr-{shard}");
        let (answer, pushed) = raw_request(&mut c, 0, &client_id, &correlation_id);
        assert_eq!(answer.code, rs::SUCCESS, "the request is stored: {:?}", answer.remark);
        let props = pushed.ext("properties").unwrap_or_default();
        assert!(props.contains(&format!("CORRELATION_ID\u{1}{correlation_id}\u{2}")), "{props:?}");
        assert_eq!(pushed.ext("topic"), Some(reply_topic(CLUSTER).as_str()));
        assert_eq!(&pushed.body[..], format!("re: raw {correlation_id}").as_bytes());
        println!("requester on shard {shard}, reply topic's queue on shard {reply_owner}: replied");
    }
    stop.store(true, Ordering::Relaxed);
    replier.join().expect("the replier");
    handle.stop();
    handle.join();
    namesrv.stop();
}
