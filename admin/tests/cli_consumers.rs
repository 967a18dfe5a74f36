//! `ringmq-admin`'s consumer operations against a live NameServer + broker (2 shards, in
//! this process) with a live RingMQ push consumer on its own executor thread:
//! consumerStatus (GET_CONSUMER_RUNNING_INFO answered by the consumer), queryMsgById -g -d
//! (CONSUME_MESSAGE_DIRECTLY: the consumer's listener really runs), statsAll
//! (VIEW_BROKER_STATS_DATA), consumeMessage, and resetOffsetByTime both ways — with the
//! consumer online (the broker pushes RESET_CONSUMER_CLIENT_OFFSET and the consumer
//! delivers the topic again) and offline (CONSUMER_NOT_ONLINE, the CLI commits offsets
//! itself).

mod common;

use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
use ringmq_client::instance::ClientConfig;
use ringmq_client::message::user::Message;
use ringmq_client::producer::{Producer, ProducerConfig};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "OPS_T";
const GROUP: &str = "OPS_G";
const MESSAGES: usize = 8;

use common::{admin, ok};

fn cluster() -> common::Cluster {
    common::cluster("broker-ops")
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ok(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The group's committed offsets summed over the topic's queues (consumerProgress).
fn committed_total(n: &str) -> i64 {
    let (code, out, _) = admin(&["consumerProgress", "-n", n, "-g", GROUP, "-t", TOPIC, "--json"]);
    if code != 0 {
        return -1;
    }
    let v: Value = serde_json::from_str(&out).unwrap_or_default();
    v["queues"].as_array().map(|q| q.iter().map(|r| r["consumerOffset"].as_i64().unwrap_or(0)).sum()).unwrap_or(-1)
}

/// A push consumer of `GROUP` from the first offset; every body it is handed is
/// recorded. Sends `MESSAGES` first (keys `k<i>`). Runs until `stop`.
fn start_consumer(namesrv: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Vec<String>>>) -> (std::thread::JoinHandle<()>, String, Vec<String>) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let client = ClientConfig::new(vec![namesrv]);
                let producer = Producer::start(ProducerConfig::new(client.clone(), "ops-producer")).await.expect("producer");
                let mut ids = Vec::new();
                for i in 0..MESSAGES {
                    let msg = Message::new(TOPIC, format!("body-{i}").into_bytes()).with_keys([format!("k{i}").as_str()]).unwrap();
                    ids.push(producer.send(msg).await.expect("send").offset_msg_id);
                }
                producer.shutdown().await;
                let mut config = PushConsumerConfig::new(client, GROUP);
                config.consume_from = ConsumeFrom::FirstOffset;
                config.rebalance_interval_ms = 500;
                config.persist_offset_interval_ms = 200;
                let mut consumer = PushConsumer::new(config);
                consumer.subscribe(TOPIC, "*").unwrap();
                consumer.register_concurrently(move |msgs| {
                    seen.lock().unwrap().extend(msgs.iter().map(|m| String::from_utf8_lossy(&m.body).into_owned()));
                    ConsumeStatus::Success
                });
                consumer.start().await.expect("consumer starts");
                tx.send((consumer.client_id().expect("started"), ids)).unwrap();
                while !stop.load(Ordering::SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                consumer.shutdown().await;
            })
            .expect("executor")
            .join()
            .expect("consumer thread");
    });
    let (client_id, ids) = rx.recv_timeout(Duration::from_secs(60)).expect("the consumer starts");
    (handle, client_id, ids)
}

#[test]
fn consumer_operations_against_a_live_consumer() {
    let c = cluster();
    let n = c.namesrv.as_str();
    eventually("the broker registers", || admin(&["clusterList", "-n", n]).1.contains("broker-ops"));
    ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"]);
    eventually("the topic is routed", || admin(&["topicRoute", "-n", n, "-t", TOPIC]).0 == 0);

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (consumer, client_id, ids) = start_consumer(c.namesrv.clone(), stop.clone(), seen.clone());
    let count = |body: &str| seen.lock().unwrap().iter().filter(|b| *b == body).count();
    eventually("every message is consumed", || (0..MESSAGES).all(|i| count(&format!("body-{i}")) >= 1));
    eventually("offsets are committed", || committed_total(n) == MESSAGES as i64);

    // consumerProgress without -g: mqadmin's line per group; the live group (auto-created
    // by its heartbeat) with its one client, clustering, nothing behind.
    let groups = json(&["consumerProgress", "-n", n]);
    let row = groups.as_array().unwrap().iter().find(|g| g["group"] == GROUP).unwrap_or_else(|| panic!("{GROUP} missing: {groups}"));
    assert_eq!((&row["count"], &row["messageModel"], &row["diffTotal"]), (&serde_json::json!(1), &serde_json::json!("CLUSTERING"), &serde_json::json!(0)), "{row}");
    let table = ok(&["consumerProgress", "-n", n]);
    assert!(table.starts_with("#Group") && table.lines().any(|l| l.starts_with(GROUP)), "{table}");

    // consumerStatus: the consumer answers through the broker.
    let list = ok(&["consumerStatus", "-n", n, "-g", GROUP]);
    assert!(list.starts_with("#Index") && list.contains(&client_id), "{list}");
    let status = json(&["consumerStatus", "-n", n, "-g", GROUP, "-i", &client_id]);
    let one = &status[0];
    assert_eq!(one["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY", "{one}");
    assert_eq!(one["properties"]["consumerGroup"], GROUP);
    assert!(one["subscriptions"].as_array().unwrap().iter().any(|s| s["topic"] == TOPIC), "{one}");
    let queues = one["queues"].as_array().unwrap();
    assert_eq!(queues.iter().filter(|q| q["topic"] == TOPIC).count(), 4, "{one}");
    let unknown = admin(&["consumerStatus", "-n", n, "-g", GROUP, "-i", "10.9.9.9@nobody"]);
    assert_eq!(unknown.0, 1);
    assert!(unknown.2.contains("not online"), "{}", unknown.2);

    // queryMsgById -g -d: the listener runs once more for that message.
    let before = count("body-0");
    let direct = ok(&["queryMsgById", "-n", n, "-i", &ids[0], "-g", GROUP, "-d", &client_id]);
    assert!(direct.starts_with("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS"), "{direct}");
    assert_eq!(count("body-0"), before + 1);

    // statsAll: 8 in; the group pulled 8 (it may have pulled more by now: never fewer).
    let stats = json(&["statsAll", "-n", n, "-t", TOPIC]);
    let row = stats.as_array().unwrap().iter().find(|r| r["group"] == GROUP).cloned().unwrap_or_else(|| panic!("no {GROUP} row: {stats}"));
    assert_eq!((row["inMsg24Hour"].as_i64(), row["accumulation"].as_i64()), (Some(MESSAGES as i64), Some(0)), "{row}");
    assert!(row["outMsg24Hour"].as_i64().unwrap() >= MESSAGES as i64, "{row}");
    let text = ok(&["statsAll", "-n", n, "-t", TOPIC]);
    assert!(text.starts_with("#Topic") && text.contains("#OutMsg24Hour") && text.contains(GROUP), "{text}");

    // consumeMessage: every message once, with -c as the bound.
    let read = json(&["consumeMessage", "-n", n, "-t", TOPIC]);
    let mut bodies: Vec<&str> = read.as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    bodies.sort();
    assert_eq!(bodies, (0..MESSAGES).map(|i| format!("body-{i}")).collect::<Vec<_>>());
    assert_eq!(json(&["consumeMessage", "-n", n, "-t", TOPIC, "-c", "3"]).as_array().unwrap().len(), 3);

    // resetOffsetByTime online: to the beginning; the consumer is told and reads again.
    let out = ok(&["resetOffsetByTime", "-n", n, "-g", GROUP, "-t", TOPIC, "-s", "0"]);
    assert!(out.starts_with("start reset consumer offset by specified, group[OPS_G], topic[OPS_T], force[true]"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("broker-ops")).count(), 4, "{out}");
    eventually("the consumer delivers the topic again after the reset", || (1..MESSAGES).all(|i| count(&format!("body-{i}")) >= 2));

    // Offline: the CLI commits the offsets itself.
    stop.store(true, Ordering::SeqCst);
    consumer.join().expect("consumer stopped");
    eventually("the group goes offline", || admin(&["consumerConnection", "-n", n, "-g", GROUP]).0 != 0);
    let out = ok(&["resetOffsetByTime", "-n", n, "-g", GROUP, "-t", TOPIC, "-s", "1970-01-01#00:00:00:000"]);
    assert!(out.starts_with("rollback consumer offset by specified group[OPS_G]"), "{out}");
    assert_eq!(committed_total(n), 0, "every queue back at 0");
    let bad = admin(&["resetOffsetByTime", "-n", n, "-g", GROUP, "-t", TOPIC, "-s", "yesterday"]);
    assert_eq!(bad.0, 1);
    assert!(bad.2.contains("bad time"), "{}", bad.2);
}
