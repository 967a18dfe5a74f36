//! Message traces end to end (issue 24 item 7): a broker with `traceTopicEnable` makes
//! and routes the trace topic (and one without does not); a RingMQ producer and push
//! consumer with tracing on record Pub, SubBefore and SubAfter records; and
//! `ringmq-admin queryMsgTraceById` finds them by the message id through the brokers'
//! key index and prints mqadmin's columns.
//!
//! Invariants: no fixed ports (NameServer and a 2-shard broker in this process, port 0);
//! nothing waits on a sleep for ordering: the traces are flushed by shutting the clients
//! down (the dispatcher sends every queued record before `shutdown` returns), and the
//! consume is awaited as a condition with a deadline.

mod common;

use common::{admin, ok};
use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
use ringmq_client::instance::ClientConfig;
use ringmq_client::message::user::Message;
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::trace::TraceConfig;
use serde_json::Value;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

const TOPIC: &str = "TRACED_T";
const PRODUCER_GROUP: &str = "trace-producer";
const CONSUMER_GROUP: &str = "trace-consumer";
/// How long the cluster may take to register a topic or deliver a message.
const WAIT_MAX: Duration = Duration::from_secs(30);

fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The topic's route from the NameServer (GET_ROUTEINFO_BY_TOPIC), or None.
fn route(n: &str, topic: &str) -> Option<Value> {
    let (code, out, _) = admin(&["topicRoute", "-n", n, "-t", topic]);
    (code == 0).then(|| serde_json::from_str(&out).unwrap_or_else(|e| panic!("{topic}: {e}: {out}")))
}

fn read_queues(route: &Value) -> i64 {
    route["queueDatas"].as_array().map(|q| q.iter().map(|d| d["readQueueNums"].as_i64().unwrap_or(0)).sum()).unwrap_or(0)
}

#[test]
fn trace_topic_follows_the_broker_config() {
    // traceTopicEnable=false (Apache's default): no trace topic.
    let off = common::cluster("broker-trace-off");
    eventually("the broker registers", || admin(&["clusterList", "-n", &off.namesrv]).1.contains("broker-trace-off"));
    assert!(route(&off.namesrv, "RMQ_SYS_TRACE_TOPIC").is_none(), "no trace topic when traceTopicEnable=false");
    let conf = ok(&["getBrokerConfig", "-n", &off.namesrv, "-b", &off.broker]);
    assert!(conf.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["traceTopicEnable", "=", "false"]), "{conf}");
    drop(off);

    // On, with msgTraceTopicName: that topic, 1 queue, read-write, routed.
    let on = common::cluster_with("broker-trace-on", |c| {
        c.trace_topic_enable = true;
        c.msg_trace_topic_name = "MyTraceTopic".into();
    });
    eventually("the trace topic is routed", || route(&on.namesrv, "MyTraceTopic").is_some());
    let r = route(&on.namesrv, "MyTraceTopic").unwrap();
    assert_eq!(read_queues(&r), 1, "{r}");
    assert_eq!(r["queueDatas"][0]["perm"], 6, "read-write: {r}");
    assert!(route(&on.namesrv, "RMQ_SYS_TRACE_TOPIC").is_none(), "only the configured name");
    let conf = ok(&["getBrokerConfig", "-n", &on.namesrv, "-b", &on.broker]);
    for (key, value) in [("traceTopicEnable", "true"), ("msgTraceTopicName", "MyTraceTopic")] {
        assert!(conf.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == [key, "=", value]), "{key}: {conf}");
    }
}

/// Sends one traced message, consumes it with a traced push consumer, shuts both down
/// (flushing their traces); returns the message id.
fn send_and_consume(namesrv: String) -> String {
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let client = ClientConfig::new(vec![namesrv]);
                let mut pc = ProducerConfig::new(client.clone(), PRODUCER_GROUP);
                pc.trace = TraceConfig::on();
                let producer = Producer::start(pc).await.expect("producer");
                let msg = Message::new(TOPIC, &b"traced body"[..]).with_tags("TagA").unwrap().with_keys(["order-1"]).unwrap();
                let sent = producer.send(msg).await.expect("send");
                assert!(sent.trace_on, "the broker answers TRACE_ON=true (traceOn default)");
                producer.shutdown().await;

                let mut cc = PushConsumerConfig::new(client, CONSUMER_GROUP);
                cc.consume_from = ConsumeFrom::FirstOffset;
                cc.trace = TraceConfig::on();
                let consumed = Rc::new(Cell::new(false));
                let mut consumer = PushConsumer::new(cc);
                consumer.subscribe(TOPIC, "*").unwrap();
                let seen = consumed.clone();
                let id = sent.msg_id.clone();
                consumer.register_concurrently(move |msgs| {
                    if msgs.iter().any(|m| m.msg_id == id) {
                        seen.set(true);
                    }
                    ConsumeStatus::Success
                });
                consumer.start().await.expect("consumer");
                let deadline = Instant::now() + WAIT_MAX;
                while !consumed.get() {
                    assert!(Instant::now() < deadline, "the traced message was not consumed");
                    glommio::timer::sleep(Duration::from_millis(20)).await;
                }
                // Shutdown sends the consumer's queued SubBefore/SubAfter records.
                consumer.shutdown().await;
                sent.msg_id
            })
            .expect("executor")
            .join()
            .expect("client thread")
    })
    .join()
    .expect("client thread")
}

#[test]
fn query_msg_trace_by_id_shows_pub_and_sub() {
    let c = common::cluster_with("broker-traced", |c| c.trace_topic_enable = true);
    let n = c.namesrv.as_str();
    eventually("the trace topic is routed", || route(n, "RMQ_SYS_TRACE_TOPIC").is_some());
    ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2"]);
    eventually("the topic is routed", || route(n, TOPIC).is_some());
    let msg_id = send_and_consume(c.namesrv.clone());

    let out = ok(&["queryMsgTraceById", "-n", n, "-i", &msg_id]);
    let lines: Vec<&str> = out.lines().collect();
    // mqadmin's layout: a header per Pub record, then one header per consumer group.
    let header_at = |first: &str, second: &str| lines.iter().position(|l| l.split_whitespace().take(2).eq([first, second]));
    let pub_header = header_at("#Type", "#ProducerGroup").unwrap_or_else(|| panic!("no Pub header:\n{out}"));
    let pub_row: Vec<&str> = lines[pub_header + 1].split_whitespace().collect();
    assert_eq!((pub_row[0], pub_row[1], pub_row[2]), ("Pub", PRODUCER_GROUP, "127.0.0.1"), "{out}");
    assert!(pub_row[5].ends_with("ms") && pub_row[6] == "success", "{out}");
    assert_eq!(lines[pub_header].split_whitespace().collect::<Vec<_>>(), ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]);
    let sub_header = header_at("#Type", "#ConsumerGroup").unwrap_or_else(|| panic!("no Sub header:\n{out}"));
    let sub_row: Vec<&str> = lines[sub_header + 1].split_whitespace().collect();
    assert_eq!((sub_row[0], sub_row[1], sub_row[6]), ("Sub", CONSUMER_GROUP, "success"), "{out}");
    // Java's column widths: "%-10s %-20s ...".
    assert!(lines[pub_header + 1].starts_with(&format!("{:<10} {:<20} ", "Pub", PRODUCER_GROUP)), "{out}");

    // As JSON: every record about the message, SubBefore included, with its fields.
    let views: Value = serde_json::from_str(&ok(&["queryMsgTraceById", "-n", n, "-i", &msg_id, "--json"])).unwrap();
    let kinds: Vec<&str> = views.as_array().unwrap().iter().map(|v| v["msgType"].as_str().unwrap()).collect();
    for kind in ["Pub", "SubBefore", "SubAfter"] {
        assert_eq!(kinds.iter().filter(|k| **k == kind).count(), 1, "{kind}: {views}");
    }
    let pub_view = views.as_array().unwrap().iter().find(|v| v["msgType"] == "Pub").unwrap();
    assert_eq!((pub_view["topic"].as_str(), pub_view["tags"].as_str(), pub_view["keys"].as_str()), (Some(TOPIC), Some("TagA"), Some("order-1")), "{pub_view}");
    assert_eq!(pub_view["msgId"], msg_id.as_str());

    // The trace messages are keyed by the message's keys too (Java's transKey).
    let by_key = ok(&["queryMsgByKey", "-n", n, "-t", "RMQ_SYS_TRACE_TOPIC", "-k", "order-1"]);
    assert!(by_key.lines().count() >= 2, "{by_key}");
    // Another id finds nothing; a wrong trace topic is the broker's error.
    assert_eq!(ok(&["queryMsgTraceById", "-n", n, "-i", "0A0B0C0D00002A9F0000000000000000"]), "");
    let (code, _, err) = admin(&["queryMsgTraceById", "-n", n, "-i", &msg_id, "-t", "NoSuchTraceTopic"]);
    assert_eq!(code, 1, "{err}");
}
