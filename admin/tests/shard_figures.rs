//! True numbers in shard route mode: a fixed-rate load against a 2-shard broker whose
//! shards are brokers of their own (`<name>-s0`, `<name>-s1`), and every view an
//! operator sums over brokers checked against what was sent: the dashboard's API (Live
//! rates, Cluster rows), `statsAll` (InTPS/OutTPS while the load runs), `clusterList`
//! and `brokerStatus` (put totals), `topicStatus` and `consumerProgress` (each queue
//! once, offsets adding up to the sent count) and `/metrics` (per shard-broker
//! `node_id`, summing to the sent count). Before the fix every shard-broker answered
//! with the host's figures, so each of these read twice the load.
//!
//! Owns: this scenario. Rates are compared within `RATE_TOLERANCE` of the rate actually
//! achieved (sent / elapsed, measured by the producer), counts exactly. No fixed
//! ports; every wait is bounded.

mod common;

use common::{admin, dashboard, http_with, ok, DASHBOARD_TOKEN};
use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
use ringmq_client::instance::ClientConfig;
use ringmq_client::message::user::Message;
use ringmq_client::producer::{Producer, ProducerConfig};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BROKER: &str = "broker-sf";
const TOPIC: &str = "SF_T";
/// A topic whose one message tells that the consumer's queues are assigned.
const WARM: &str = "SF_WARM";
const GROUP: &str = "SF_G";
/// Queues per shard-broker (`updateTopic -w`): 2 × 8 in all.
const QUEUES_PER_BROKER: usize = 8;
const RATE_PER_S: u64 = 200;
const LOAD: Duration = Duration::from_secs(9);
/// When, into the load, the rates are read.
const READ_RATES_AT: Duration = Duration::from_secs(6);
const RATE_TOLERANCE: f64 = 0.10;
const WAIT: Duration = Duration::from_secs(30);

fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ok(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn within(what: &str, got: f64, want: f64) {
    assert!((got - want).abs() <= want * RATE_TOLERANCE, "{what}: {got:.1} against {want:.1} actually sent per second (±{:.0} %)", RATE_TOLERANCE * 100.0);
}

/// What the load has done so far: messages sent, and when the first went.
#[derive(Default)]
struct Sent {
    count: AtomicU64,
    first_at: std::sync::Mutex<Option<Instant>>,
}

impl Sent {
    /// Messages per second since the first send.
    fn rate(&self) -> f64 {
        let first = self.first_at.lock().unwrap().expect("the load started");
        self.count.load(Ordering::SeqCst) as f64 / first.elapsed().as_secs_f64()
    }
}

/// Sends to `TOPIC` at `RATE_PER_S` for `LOAD` (catching up after a stall, so any long
/// window sees the rate), on its own executor thread.
fn load(namesrv: String, sent: Arc<Sent>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let producer = Producer::start(ProducerConfig::new(ClientConfig::new(vec![namesrv]), "sf-load")).await.expect("producer");
                let started = Instant::now();
                *sent.first_at.lock().unwrap() = Some(started);
                while started.elapsed() < LOAD {
                    let due = started.elapsed().as_millis() as u64 * RATE_PER_S / 1000 + 1;
                    while sent.count.load(Ordering::SeqCst) < due {
                        let n = sent.count.load(Ordering::SeqCst);
                        producer.send(Message::new(TOPIC, format!("load {n}").into_bytes())).await.expect("send");
                        sent.count.fetch_add(1, Ordering::SeqCst);
                    }
                    glommio::timer::sleep(Duration::from_millis(2)).await;
                }
                producer.shutdown().await;
            })
            .expect("load executor")
            .join()
            .expect("load thread");
    })
}

/// A push consumer of `GROUP` on `TOPIC` and `WARM` from the first offset, counting what
/// it is handed, until `stop`.
fn consumer(namesrv: String, stop: Arc<AtomicBool>, got: Arc<AtomicU64>, warm: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(move || async move {
                let mut config = PushConsumerConfig::new(ClientConfig::new(vec![namesrv]), GROUP);
                config.consume_from = ConsumeFrom::FirstOffset;
                config.rebalance_interval_ms = 500;
                config.persist_offset_interval_ms = 200;
                let mut consumer = PushConsumer::new(config);
                consumer.subscribe(TOPIC, "*").unwrap();
                consumer.subscribe(WARM, "*").unwrap();
                consumer.register_concurrently(move |msgs| {
                    for m in msgs {
                        if m.topic == WARM { &warm } else { &got }.fetch_add(1, Ordering::SeqCst);
                    }
                    ConsumeStatus::Success
                });
                consumer.start().await.expect("consumer starts");
                while !stop.load(Ordering::SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                consumer.shutdown().await;
            })
            .expect("consumer executor")
            .join()
            .expect("consumer thread");
    })
}

/// The body of `GET target` from `addr` (the dashboard, with its token, or the
/// metrics endpoint).
fn get(addr: &str, target: &str) -> String {
    let (status, head, body) = http_with(addr, "GET", target, &[&format!("Host: {addr}"), &format!("Authorization: Bearer {DASHBOARD_TOKEN}")], "");
    assert_eq!(status, 200, "GET {target}: {head}");
    body
}

/// `/metrics` series `name` with `topic="<topic>"`: (node_id, value) per line.
fn series(metrics: &str, name: &str, topic: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&format!("topic=\"{topic}\"")))
        .map(|l| {
            let node = l.split("node_id=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or_default().to_string();
            let value = l.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
            (node, value)
        })
        .collect()
}

#[test]
fn every_view_counts_each_message_once_in_shard_route_mode() {
    let c = common::cluster_with(BROKER, |config| {
        config.route_mode = ringmq_broker::config::RouteMode::Shard;
        config.metrics_exporter_type = ringmq_broker::config::MetricsExporter::Prom;
        config.metrics_prom_exporter_host = "127.0.0.1".into();
        config.metrics_prom_exporter_port = 0;
    });
    let n = c.namesrv.as_str();
    let shard_brokers = [format!("{BROKER}-s0"), format!("{BROKER}-s1")];
    eventually("both shard-brokers register", || {
        let list = admin(&["clusterList", "-n", n]).1;
        shard_brokers.iter().all(|b| list.contains(b.as_str())).then_some(())
    });
    for topic in [TOPIC, WARM] {
        ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", topic, "-r", &QUEUES_PER_BROKER.to_string(), "-w", &QUEUES_PER_BROKER.to_string()]);
    }
    eventually("the topics are routed", || {
        let list = admin(&["topicList", "-n", n]).1;
        [TOPIC, WARM].iter().all(|t| list.lines().any(|l| l == *t)).then_some(())
    });

    let stop = Arc::new(AtomicBool::new(false));
    let (got, warm) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let consuming = consumer(n.to_string(), stop.clone(), got.clone(), warm.clone());
    // The consumer is assigned its queues once a message of the other topic reaches it.
    ok(&["sendMessage", "-n", n, "-t", WARM, "-p", "warm-up"]);
    eventually("the consumer is assigned its queues", || (warm.load(Ordering::SeqCst) >= 1).then_some(()));
    let dash = dashboard(n);
    let d = dash.addr.as_str();
    eventually("the dashboard samples both shard-brokers", || {
        let s: Value = serde_json::from_str(&get(d, "/api/stats")).ok()?;
        (s["brokers"].as_array()?.len() == 2).then_some(())
    });

    // While the load runs: the rates.
    let sent = Arc::new(Sent::default());
    let loading = load(n.to_string(), sent.clone());
    let at = Instant::now() + READ_RATES_AT;
    while Instant::now() < at {
        std::thread::sleep(Duration::from_millis(100));
    }
    let rate = sent.rate();
    let stats = json(&["statsAll", "-n", n, "-t", TOPIC]);
    let row = stats.as_array().and_then(|rows| rows.iter().find(|r| r["group"] == GROUP)).unwrap_or_else(|| panic!("statsAll has {GROUP}: {stats}"));
    within("statsAll InTPS", row["inTps"].as_f64().unwrap(), rate);
    within("statsAll OutTPS", row["outTps"].as_f64().unwrap(), rate);
    let live: Value = serde_json::from_str(&get(d, "/api/stats")).unwrap();
    let points = live["points"].as_array().expect("points");
    let last: Vec<f64> = points.iter().rev().take(3).map(|p| p["inRate"].as_f64().unwrap_or(0.0)).collect();
    assert_eq!(last.len(), 3, "three live points into the load: {live}");
    within("dashboard Live in rate (last 3 points)", last.iter().sum::<f64>() / 3.0, rate);
    loading.join().expect("load");
    let sent_total = sent.count.load(Ordering::SeqCst);
    eventually("the consumer gets every message", || (got.load(Ordering::SeqCst) >= sent_total).then_some(()));

    // Totals: every view counts each message once.
    let puts = sent_total as i64 + 1; // and the warm-up message
    let brokers = json(&["clusterList", "-n", n]);
    let rows = brokers.as_array().expect("clusterList rows");
    let names: BTreeSet<&str> = rows.iter().filter_map(|r| r["brokerName"].as_str()).collect();
    assert_eq!(names, shard_brokers.iter().map(String::as_str).collect(), "{brokers}");
    let put_total: i64 = rows.iter().map(|r| r["putTotal"].as_str().and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1)).sum();
    assert_eq!(put_total, puts, "clusterList put totals summed over the shard-brokers: {brokers}");
    let mut own_puts = 0;
    for r in rows {
        let status = json(&["brokerStatus", "-n", n, "-b", r["addr"].as_str().unwrap()]);
        let num = |k: &str| status[k].as_str().and_then(|v| v.parse::<i64>().ok()).unwrap_or_else(|| panic!("{k}: {status}"));
        own_puts += num("putMessageTimesTotal");
        assert_eq!(num("host.putMessageTimesTotal"), puts, "the host's figure, labelled so: {status}");
        assert!(status.as_object().unwrap().keys().all(|k| !k.starts_with("shard.")), "no per-shard keys under a shard-broker: {status}");
        assert_eq!(status["routeMode"], "shard", "{status}");
    }
    assert_eq!(own_puts, puts, "brokerStatus putMessageTimesTotal summed over the shard-brokers");

    let status = json(&["topicStatus", "-n", n, "-t", TOPIC]);
    let queues = status.as_array().expect("topicStatus rows");
    let distinct: BTreeSet<(String, i64)> = queues.iter().map(|q| (q["brokerName"].as_str().unwrap().to_string(), q["queueId"].as_i64().unwrap())).collect();
    assert_eq!((queues.len(), distinct.len()), (2 * QUEUES_PER_BROKER, 2 * QUEUES_PER_BROKER), "each queue once: {status}");
    assert_eq!(queues.iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum::<i64>(), sent_total as i64, "{status}");

    let progress = eventually("the group's offsets are committed", || {
        let p = json(&["consumerProgress", "-n", n, "-g", GROUP, "-t", TOPIC]);
        (p["diffTotal"] == 0).then_some(p)
    });
    let queues = progress["queues"].as_array().expect("queues");
    let distinct: BTreeSet<(String, String, i64)> =
        queues.iter().map(|q| (q["topic"].as_str().unwrap().to_string(), q["brokerName"].as_str().unwrap().to_string(), q["queueId"].as_i64().unwrap())).collect();
    assert_eq!((queues.len(), distinct.len()), (2 * QUEUES_PER_BROKER, 2 * QUEUES_PER_BROKER), "each queue once: {progress}");
    assert_eq!(queues.iter().map(|q| q["brokerOffset"].as_i64().unwrap()).sum::<i64>(), sent_total as i64, "{progress}");
    let all = json(&["consumerProgress", "-n", n]);
    let line = all.as_array().and_then(|g| g.iter().find(|g| g["group"] == GROUP)).unwrap_or_else(|| panic!("{GROUP} listed: {all}"));
    assert_eq!(line["diffTotal"], 0, "{all}");

    let cluster: Value = serde_json::from_str(&get(d, "/api/cluster")).unwrap();
    let rows = cluster["brokers"].as_array().expect("brokers");
    assert_eq!(rows.len(), 2, "{cluster}");
    assert!(rows.iter().all(|r| r["shards"].as_array().is_some_and(Vec::is_empty)), "a shard-broker lists no other shard's figures: {cluster}");
    let dash_puts: i64 = rows.iter().map(|r| r["putTotal"].as_str().and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1)).sum();
    assert_eq!(dash_puts, puts, "{cluster}");

    let metrics_addr = c._broker.metrics_addr.expect("metrics endpoint").to_string();
    let metrics = eventually("/metrics shows every message", || {
        let text = get(&metrics_addr, "/metrics");
        let ins = series(&text, "rocketmq_messages_in_total", TOPIC);
        (ins.iter().map(|(_, v)| v).sum::<f64>() == sent_total as f64).then_some(text)
    });
    let ins = series(&metrics, "rocketmq_messages_in_total", TOPIC);
    let nodes: BTreeSet<&str> = ins.iter().map(|(node, _)| node.as_str()).collect();
    assert_eq!(nodes, shard_brokers.iter().map(|b| format!("{b}:0")).collect::<BTreeSet<_>>().iter().map(String::as_str).collect(), "one series per shard-broker: {ins:?}");
    let outs: f64 = series(&metrics, "rocketmq_messages_out_total", TOPIC).iter().map(|(_, v)| v).sum();
    assert_eq!(outs, sent_total as f64, "messages out summed over the shard-brokers");

    stop.store(true, Ordering::SeqCst);
    consuming.join().expect("consumer");
}
