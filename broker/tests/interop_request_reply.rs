//! Interop for issue 24 item 6: request-reply with the unmodified crates.io
//! `rocketmq-client-rust` 1.0.0 as the requester — its `DefaultMQProducer::request` —
//! against a RingMQ NameServer and broker ("broker-a", two shards, sync flush) in this
//! process, in both header encodings; RingMQ's own client answers (a push consumer whose
//! listener replies with `Producer::reply`, on a glommio thread of its own).
//!
//! The requester uses `request_with_callback`, not `request`: the crate's `request`
//! loses any reply that reaches it before it has started waiting, so a fast replier
//! makes it time out with the reply in hand (against Apache's broker as well; seen here
//! with the reply pushed ~1 ms after the request's SEND answer). From its source
//! (rocketmq-client-rust 1.0.0): `request` registers the future, awaits the send, and
//! only then calls `wait_response_message`
//! (src/producer/producer_impl/default_mq_producer_impl/send.rs:1595-1647), which
//! starts listening with `notify.notified()` and, on timeout, returns `None` without
//! looking at a stored reply (src/producer/request_response_future.rs:87-95); the push
//! handler removes the future from the holder and completes it with
//! `put_response_message` (src/implementation/client_remoting_processor.rs:306-318),
//! whose `notify_waiters()` (request_response_future.rs:97-104) stores no permit for
//! a later `notified()` (Tokio's documented semantics). Java's `RequestResponseFuture`
//! uses a CountDownLatch, which has no such window. With a callback the push handler
//! calls it directly (`on_success`), so the reply is delivered whatever the timing (the
//! crate also calls back once with nothing when the send is acknowledged, send.rs:1575-1577,
//! which the test ignores).
//!
//! The test proves:
//! 1. each request gets its own reply (body, the reply topic
//!    `DefaultCluster_REPLY_TOPIC`), so the crate's client id, correlation id and TTL
//!    came through, the broker stamped `CLUSTER` on the request (the replier builds the
//!    reply topic from it) and the crate took our PUSH_REPLY_MESSAGE_TO_CLIENT;
//! 2. on the wire (recording proxy in front of the broker): the replier sent one
//!    SEND_REPLY_MESSAGE_V2 (325) per request, each answered SUCCESS, and the broker sent
//!    one PUSH_REPLY_MESSAGE_TO_CLIENT (326) per request to the requester, whose client
//!    answered each SUCCESS; the requester's frames used the test's header encoding.
//!
//! Every wait is bounded by `WAIT`.
//!
//! Owns: the scenario and the RingMQ replier's thread.

mod common_interop;

use common_interop::{bounded, client_runtime, serialize_code, test_both_encodings, BrokerPath, Cluster, QUEUES};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use rocketmq_client_rust::DefaultMQProducer;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bound on any single wait.
const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "InteropRequest";
const REQUESTS: usize = 6;
/// Each request's timeout (ms), as the crate's `request` takes it.
const REQUEST_TIMEOUT_MS: u64 = 15_000;

test_both_encodings!(rocketmq_requester_json, rocketmq_requester_binary, scenario);

/// RingMQ's replier on its own glommio thread until `stop`: answers each request with
/// "re: <body>"; counts the replies its broker acknowledged.
fn start_ringmq_replier(ns_addr: String, stop: Arc<AtomicBool>, replied: Arc<AtomicUsize>) -> glommio::ExecutorJoinHandle<()> {
    use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
    use ringmq_client::producer::{Producer, ProducerConfig};
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("ringmq-replier")
        .spawn(move || async move {
            let mut client = ringmq_client::ClientConfig::new([ns_addr]);
            client.client_ip = Some("127.0.0.1".parse().expect("ip"));
            let producer = Producer::start(ProducerConfig::new(client.clone(), "pg-ringmq-replier")).await.expect("replier producer");
            let mut config = PushConsumerConfig::new(client, "cg-ringmq-replier");
            config.consume_from = ConsumeFrom::FirstOffset;
            config.rebalance_interval_ms = 1_000;
            config.pull_suspend_ms = 500;
            let mut consumer = PushConsumer::new(config);
            consumer.subscribe(TOPIC, "*").expect("subscribe");
            let replier = producer.clone();
            consumer.register_concurrently(move |msgs| {
                for m in msgs {
                    let (replier, request, replied) = (replier.clone(), m.clone(), replied.clone());
                    glommio::spawn_local(async move {
                        let body = format!("re: {}", String::from_utf8_lossy(&request.body));
                        match replier.reply(&request, body).await {
                            Ok(_) => {
                                replied.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => eprintln!("reply failed: {e}"),
                        }
                    })
                    .detach();
                }
                ConsumeStatus::Success
            });
            consumer.start().await.expect("replier consumer starts");
            while !stop.load(Ordering::SeqCst) {
                glommio::timer::sleep(Duration::from_millis(20)).await;
            }
            consumer.shutdown().await;
            producer.shutdown().await;
        })
        .expect("replier thread")
}

async fn scenario(serialize_type: SerializeType) {
    let cluster = Cluster::start(BrokerPath::Proxied, common_interop::ignore_disk_watermarks);
    cluster.create_routed_topic(TOPIC, QUEUES);
    let stop = Arc::new(AtomicBool::new(false));
    let replied = Arc::new(AtomicUsize::new(0));
    let replier = start_ringmq_replier(cluster.namesrv_addr(), stop.clone(), replied.clone());

    let mut producer = DefaultMQProducer::builder(client_runtime("request-reply", serialize_type))
        .producer_group("pg-rocketmq-requester")
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    common_interop::await_route(&mut producer, TOPIC).await;
    for i in 0..REQUESTS {
        let body = format!("ping {i}");
        let msg = Message::builder().topic(TOPIC).body_slice(body.as_bytes()).build().expect("message");
        let started = Instant::now();
        // `request_with_callback`, not `request`: see the module doc (the crate's
        // `request` loses a reply that arrives before it starts waiting).
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<(String, String), String>>();
        let on_reply = move |reply: Option<&dyn MessageTrait>, error: Option<&rocketmq_client_rust::ClientError>| match (reply, error) {
            (Some(m), _) => {
                let got = String::from_utf8_lossy(m.get_body().map(|b| &b[..]).unwrap_or_default()).into_owned();
                let _ = tx.send(Ok((got, m.topic().to_string())));
            }
            (None, Some(e)) => {
                let _ = tx.send(Err(e.to_string()));
            }
            // The crate also calls back, with nothing, when the request's send is acknowledged.
            (None, None) => {}
        };
        bounded("request", producer.request_with_callback(msg, on_reply, REQUEST_TIMEOUT_MS)).await.unwrap_or_else(|e| panic!("request {i}: {e}"));
        let reply = bounded("reply", rx.recv()).await.expect("callback kept").unwrap_or_else(|e| {
            // What crossed the broker's proxy, in order (pulls and heartbeats left out).
            for f in cluster.broker_proxy().frames().iter().filter(|f| f.response || ![rq::PULL_MESSAGE, rq::HEART_BEAT].contains(&f.code)) {
                eprintln!("conn {} to_server {} response {} code {} opaque {} properties {:?}", f.conn, f.to_server, f.response, f.code, f.opaque, f.ext("properties").or(f.ext("i")));
            }
            panic!("request {i}: {e}")
        });
        assert_eq!(reply, (format!("re: {body}"), "DefaultCluster_REPLY_TOPIC".to_string()), "request {i}'s own reply");
        println!("request {i}: replied in {:?}", started.elapsed());
    }
    bounded("producer shutdown", producer.shutdown()).await;
    common_interop::wait_until("the replier's acknowledgements", || replied.load(Ordering::SeqCst) == REQUESTS).await;
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || replier.join().expect("replier thread")).await.expect("join");

    let proxy = cluster.broker_proxy();
    let replies = proxy.exchanges(rq::SEND_REPLY_MESSAGE_V2);
    assert_eq!(replies.len(), REQUESTS, "one SEND_REPLY_MESSAGE_V2 per request");
    for (sent, answer) in &replies {
        let answer = answer.as_ref().unwrap_or_else(|| panic!("SEND_REPLY_MESSAGE_V2 unanswered: {sent:?}"));
        assert_eq!(answer.code, rs::SUCCESS, "{answer:?}");
    }
    let pushes = proxy.requests(rq::PUSH_REPLY_MESSAGE_TO_CLIENT, false);
    assert_eq!(pushes.len(), REQUESTS, "one PUSH_REPLY_MESSAGE_TO_CLIENT per request");
    let frames = proxy.frames();
    for push in &pushes {
        let answer = frames.iter().find(|f| f.to_server && f.response && f.conn == push.conn && f.opaque == push.opaque);
        let answer = answer.unwrap_or_else(|| panic!("the requester did not answer {push:?}"));
        assert_eq!((answer.code, answer.serialize_type), (rs::SUCCESS, serialize_code(serialize_type)), "{answer:?}");
        assert!(push.ext("properties").is_some_and(|p| p.contains("CORRELATION_ID\u{1}")), "{push:?}");
    }
}
