//! The Prometheus endpoint of a broker process (`metricsExporterType=PROM`): after sends,
//! pulls and a committed offset, `GET /metrics` shows RocketMQ 5's series with the
//! expected values (messages and bytes in and out per topic, consumer lag per group and
//! topic, request latency per code, storage size) and RingMQ's per-shard series (group
//! commit latency histogram, recovery time); other paths answer 404. The runtime info
//! carries RocketMQ's StoreStatsService keys (putTps, msgPutTotalTodayNow, ...). The endpoint runs
//! on its own thread: a scraper that connects and never sends a request does not delay
//! the broker's answers. Under load (a sender running), every scrape parses — each
//! sample has its family's `# TYPE` — and no counter goes down between scrapes.
//! With `metricsPromExporterBasicAuth` and no `metricsPromExporterHost`, the endpoint
//! binds 127.0.0.1 and answers 401 (with a Basic challenge) without the credentials or
//! with wrong ones, 200 with them; GET_BROKER_CONFIG never returns the secret.

mod common;

use common::{create_topic, pull_header, pull_with, read_log, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const TOPIC: &str = "METRICS_T";
const WAIT: Duration = Duration::from_secs(20);

fn metrics_addr(b: &ChildBroker) -> SocketAddr {
    let log = read_log(&b.logs[0]);
    let line = log.lines().find(|l| l.contains("metrics_addr=")).expect("exporter line");
    let at = line.find("metrics_addr=").unwrap() + "metrics_addr=".len();
    line[at..].split_whitespace().next().and_then(|a| a.parse().ok()).expect("an address")
}

fn get(addr: SocketAddr, path: &str) -> (String, String) {
    get_with(addr, path, "")
}

/// `extra`: header lines, each ending in CRLF. Returns the head's lines after the status
/// line too when asked through `get_head`.
fn get_with(addr: SocketAddr, path: &str, extra: &str) -> (String, String) {
    let (head, body) = get_head(addr, path, extra);
    (head.lines().next().unwrap_or_default().to_string(), body)
}

fn get_head(addr: SocketAddr, path: &str, extra: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").expect("http response");
    (head.to_string(), body.to_string())
}

#[test]
fn metrics_endpoint_binds_loopback_by_default_and_checks_basic_auth() {
    let dir = temp_dir();
    let cfg = ChildConfig {
        shard_count: 1,
        top: "broker_name = \"broker-a\"\nmetrics_exporter_type = \"prom\"\nmetrics_prom_exporter_port = 0\nmetrics_prom_exporter_basic_auth = \"prom:scrape-s3cret\"\n".into(),
        store: "segment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n".into(),
        env: Vec::new(),
    };
    let broker = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &cfg);
    let addr = metrics_addr(&broker);
    assert!(addr.ip().is_loopback(), "an empty metricsPromExporterHost binds 127.0.0.1, not every interface: {addr}");
    let (head, body) = get_head(addr, "/metrics", "");
    assert!(head.starts_with("HTTP/1.1 401 Unauthorized") && head.contains("WWW-Authenticate: Basic realm=\"ringmq-metrics\""), "{head}");
    assert!(!body.contains("rocketmq_"), "{body}");
    // "prom:wrong" and "prom:scrape-s3cret" in base64.
    assert_eq!(get_with(addr, "/metrics", "Authorization: Basic cHJvbTp3cm9uZw==\r\n").0, "HTTP/1.1 401 Unauthorized");
    let (status, body) = get_with(addr, "/metrics", "Authorization: Basic cHJvbTpzY3JhcGUtczNjcmV0\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("rocketmq_topic_number"), "{body}");
    let mut c = Conn::open(broker.addr);
    let conf = c.call(RemotingCommand::request(rq::GET_BROKER_CONFIG));
    assert_eq!(conf.code, rs::SUCCESS);
    let text = String::from_utf8_lossy(&conf.body).to_string();
    assert!(text.contains("metricsPromExporterPort") && !text.contains("scrape-s3cret") && !text.contains("metricsPromExporterBasicAuth"), "{text}");
}

/// The value of the series whose line starts with `prefix` (name and labels).
fn value(body: &str, prefix: &str) -> Option<f64> {
    body.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

#[test]
fn metrics_endpoint_reports_traffic_lag_latency_and_storage() {
    let dir = temp_dir();
    let cfg = ChildConfig {
        shard_count: 2,
        top: "broker_name = \"broker-m\"\nmetrics_exporter_type = \"prom\"\nmetrics_prom_exporter_host = \"127.0.0.1\"\nmetrics_prom_exporter_port = 0\n".into(),
        store: "flush = \"sync\"\nsegment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n".into(),
        env: Vec::new(),
    };
    let broker = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &cfg);
    let addr = metrics_addr(&broker);
    // A scraper that connects and says nothing holds the exporter, not the broker.
    let _silent = TcpStream::connect(addr).expect("connect");
    let mut c = Conn::open(broker.addr);
    assert_eq!(c.call(create_topic(TOPIC, 2)).code, rs::SUCCESS);
    for i in 0..10 {
        let r = c.call(send_with(send_header(TOPIC, i % 2), b"0123456789", 10 + i, SerializeType::RocketMq));
        assert_eq!(r.code, rs::SUCCESS);
    }
    let mut h = pull_header(TOPIC, 0, 0);
    h.max_msg_nums = 32;
    assert_eq!(c.call(pull_with(&h, 100, SerializeType::RocketMq)).code, rs::SUCCESS);
    let commit = RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "CG_M")
        .with_ext("topic", TOPIC)
        .with_ext("queueId", "1")
        .with_ext("commitOffset", "2")
        .with_opaque(101);
    assert_eq!(c.call(commit).code, rs::SUCCESS);
    let l = "cluster=\"DefaultCluster\",node_type=\"broker\",node_id=\"broker-m:0\"";
    // check(series prefix, expected value) once the shards have published (≤ 1 s).
    let deadline = Instant::now() + WAIT;
    let body = loop {
        let (status, body) = get(addr, "/metrics");
        assert!(status.contains("200"), "{status}");
        let lag = value(&body, &format!("rocketmq_consumer_lag_messages{{{l},consumer_group=\"CG_M\",topic=\"{TOPIC}\"}}"));
        if value(&body, &format!("rocketmq_messages_in_total{{{l},topic=\"{TOPIC}\"}}")) == Some(10.0) && lag == Some(3.0) {
            break body;
        }
        assert!(Instant::now() < deadline, "metrics never showed the traffic:\n{body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let check = |prefix: String, want: f64| assert_eq!(value(&body, &prefix), Some(want), "{prefix} in:\n{body}");
    check(format!("rocketmq_throughput_in_total{{{l},topic=\"{TOPIC}\"}}"), 100.0);
    check(format!("rocketmq_messages_out_total{{{l},topic=\"{TOPIC}\"}}"), 5.0);
    assert!(value(&body, &format!("rocketmq_topic_number{{{l}}}")).is_some_and(|n| n >= 1.0), "{body}");
    // Every send was timed under its request code (10 = SEND_MESSAGE; the test's header is V2: 310).
    let sends = value(&body, &format!("rocketmq_rpc_latency_count{{{l},protocol_type=\"remoting\",request_code=\"310\"}}")).expect("send latency");
    assert_eq!(sends, 10.0);
    assert!(value(&body, &format!("rocketmq_storage_size{{{l}}}")).is_some_and(|v| v > 0.0), "{body}");
    // Sync flush: every send was a group commit on one of the two shards.
    let commits: f64 = (0..2).filter_map(|s| value(&body, &format!("ringmq_group_commit_latency_us_count{{{l},shard=\"{s}\"}}"))).sum();
    assert!(commits >= 1.0, "{body}");
    assert!(value(&body, &format!("ringmq_shard_recovery_ms{{{l},shard=\"0\"}}")).is_some(), "{body}");
    assert!(body.ends_with("# EOF\n"));
    // GET_BROKER_RUNTIME_INFO carries Java's StoreStatsService keys, summed over shards.
    let rt = common::runtime_info(&mut Conn::open(broker.addr));
    assert_eq!(rt["msgPutTotalTodayNow"], "10", "{rt:?}");
    assert_eq!(rt["putMessageSizeTotal"], "100");
    assert_eq!(rt["msgGetTotalTodayNow"], "5");
    for key in ["putTps", "getTransferredTps", "getTransferedTps"] {
        let parts: Vec<f64> = rt[key].as_str().unwrap().split(' ').map(|v| v.parse().expect("a number")).collect();
        assert_eq!(parts.len(), 3, "{key}: {:?}", rt[key]);
    }
    assert!(rt["runtime"].as_str().unwrap().starts_with("[ 0 days, 0 hours, "), "{:?}", rt["runtime"]);
    assert_eq!(rt["brokerActive"], "true");
    let (status, _) = get(addr, "/other");
    assert!(status.contains("404"), "{status}");

    // Under load: scrapes while a sender runs parse (every sample's family has a
    // `# TYPE`), and no counter ever goes down from one scrape to the next.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (stop, broker_addr) = (stop.clone(), broker.addr);
        std::thread::spawn(move || {
            let mut c = Conn::open(broker_addr);
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let r = c.call(send_with(send_header(TOPIC, (sent % 2) as i32), b"load", 1000 + (sent % 1000) as i32, SerializeType::RocketMq));
                assert_eq!(r.code, rs::SUCCESS);
                sent += 1;
            }
            sent
        })
    };
    let mut previous: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    let mut scrapes = 0;
    let load_deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < load_deadline || scrapes < 3 {
        let (status, body) = get(addr, "/metrics");
        assert!(status.contains("200"), "{status}");
        let typed: std::collections::BTreeMap<&str, &str> =
            body.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_once(' ')).collect();
        for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (series, v) = line.rsplit_once(' ').expect("name{labels} value");
            let v: f64 = v.parse().unwrap_or_else(|_| panic!("value of {line}"));
            let name = series.split('{').next().unwrap();
            let family = typed.keys().filter(|f| name.starts_with(**f)).max_by_key(|f| f.len()).unwrap_or_else(|| panic!("no # TYPE for {line}"));
            let counter = matches!(typed[family], "counter" | "histogram") && !name.ends_with("_created");
            if counter {
                if let Some(before) = previous.get(series) {
                    assert!(v >= *before, "counter {series} went down: {before} -> {v}");
                }
                previous.insert(series.to_string(), v);
            }
        }
        scrapes += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = sender.join().expect("sender");
    assert!(sent > 0 && previous.len() > 10, "sent {sent}, {} counter series", previous.len());
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = get(addr, "/metrics");
        if value(&body, &format!("rocketmq_messages_in_total{{{l},topic=\"{TOPIC}\"}}")) == Some(10.0 + sent as f64) {
            break;
        }
        assert!(Instant::now() < deadline, "messages in never reached {}:\n{body}", 10 + sent);
        std::thread::sleep(Duration::from_millis(100));
    }
    broker.stop();
}
