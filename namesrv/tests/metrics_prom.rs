//! The NameServer's Prometheus endpoint (`metrics_exporter_type = prom`, port 0): after a
//! broker registers two topics, one route is found and one is not, and a malformed
//! frame arrives on another connection, `GET /metrics` (a plain `TcpStream` request,
//! parsed as OpenMetrics text) shows each family with its type and the expected values;
//! counters do not go down between two scrapes; other paths answer 404; the endpoint
//! closes with the server. Off by default; a metrics port in use fails the start.
//!
//! Invariants: no fixed ports (both listeners bind port 0 and the handle reports them),
//! no sleeps for ordering — scrapes are polled until the published snapshot shows the
//! traffic, with a deadline.

mod common;

use common::{config, register, route, start, Conn};
use namesrv::server::spawn;
use namesrv::{MetricsExporter, ServerConfig, ServerError};
use ringmq_client::remoting::codes::response_code as rs;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a scrape may take to show traffic (publishing is every 50 ms here).
const WAIT: Duration = Duration::from_secs(20);
const BROKER: &str = "127.0.0.1:10911";

fn prom_config() -> ServerConfig {
    ServerConfig {
        metrics_exporter_type: MetricsExporter::Prom,
        metrics_prom_exporter_host: "127.0.0.1".into(),
        metrics_prom_exporter_port: 0,
        metrics_publish_interval_ms: 50,
        ..config()
    }
}

/// One HTTP/1.1 GET: (status line, body).
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

/// A parsed exposition: family name -> type, and series (name with labels) -> value.
#[derive(Debug)]
struct Scrape {
    types: BTreeMap<String, String>,
    values: BTreeMap<String, f64>,
    text: String,
}

impl Scrape {
    fn parse(text: String) -> Self {
        let mut types = BTreeMap::new();
        let mut values = BTreeMap::new();
        for line in text.lines() {
            if let Some(t) = line.strip_prefix("# TYPE ") {
                let (name, kind) = t.split_once(' ').expect("# TYPE name type");
                types.insert(name.to_string(), kind.to_string());
            } else if !line.starts_with('#') {
                let (series, v) = line.rsplit_once(' ').expect("series value");
                let v: f64 = v.parse().unwrap_or_else(|_| panic!("a number in `{line}`"));
                assert!(values.insert(series.to_string(), v).is_none(), "`{series}` twice");
            }
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        Self { types, values, text }
    }

    fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).copied()
    }
}

fn scrape(addr: SocketAddr) -> Scrape {
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    Scrape::parse(body)
}

/// Scrapes until `ready` holds, or fails after `WAIT`.
fn scrape_until(addr: SocketAddr, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = scrape(addr);
        if ready(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "metrics never showed the traffic:\n{}", s.text);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn metrics_endpoint_counts_registrations_routes_and_bad_frames() {
    let server = start(prom_config());
    let maddr = server.metrics_addr().expect("exporter enabled");
    assert_ne!(maddr.port(), 0);
    assert_ne!(maddr, server.local_addr());
    let l = format!("node_type=\"namesrv\",node_id=\"{}\"", server.local_addr());

    // A scraper that connects and says nothing holds the exporter, not the server.
    let silent = TcpStream::connect(maddr).expect("connect");
    let mut conn = Conn::connect(server.local_addr());
    assert_eq!(conn.call(register("broker-a", BROKER, 0, &["TopicA", "TopicB"])).code, rs::SUCCESS);
    assert_eq!(conn.call(route("TopicA", 401)).code, rs::SUCCESS);
    assert_eq!(conn.call(route("Nope", 401)).code, rs::TOPIC_NOT_EXIST);
    // A frame whose JSON header does not decode, on its own connection.
    let mut bad = Conn::connect(server.local_addr());
    bad.stream.write_all(&[0, 0, 0, 6, 0, 0, 0, 2, b'[', b']']).expect("write");
    bad.expect_closed();
    drop(silent);

    let not_found = format!("ringmq_namesrv_route_requests_total{{{l},result=\"not_found\"}}");
    let bad_frames = format!("ringmq_namesrv_bad_frames_total{{{l}}}");
    let first = scrape_until(maddr, |s| s.get(&not_found) == Some(1.0) && s.get(&bad_frames) == Some(1.0));

    // check(family, type)
    let check_type = |family: &str, kind: &str| {
        assert_eq!(first.types.get(family).map(String::as_str), Some(kind), "{family} in:\n{}", first.text)
    };
    check_type("ringmq_namesrv_requests", "counter");
    check_type("rocketmq_rpc_latency", "histogram");
    check_type("ringmq_namesrv_brokers", "gauge");
    check_type("ringmq_namesrv_broker_registrations", "counter");
    check_type("ringmq_namesrv_brokers_removed", "counter");
    check_type("ringmq_namesrv_topics", "gauge");
    check_type("ringmq_namesrv_route_requests", "counter");
    check_type("ringmq_namesrv_connections", "gauge");
    check_type("ringmq_namesrv_connections_refused", "counter");
    check_type("ringmq_namesrv_bad_frames", "counter");

    // check(series, expected value)
    let check = |series: String, want: f64| assert_eq!(first.get(&series), Some(want), "{series} in:\n{}", first.text);
    check(format!("ringmq_namesrv_brokers{{{l},cluster=\"DefaultCluster\"}}"), 1.0);
    check(format!("ringmq_namesrv_broker_registrations_total{{{l}}}"), 1.0);
    check(format!("ringmq_namesrv_brokers_removed_total{{{l},reason=\"unregistered\"}}"), 0.0);
    check(format!("ringmq_namesrv_brokers_removed_total{{{l},reason=\"expired\"}}"), 0.0);
    check(format!("ringmq_namesrv_route_requests_total{{{l},result=\"found\"}}"), 1.0);
    check(format!("ringmq_namesrv_route_requests_total{{{l},result=\"error\"}}"), 0.0);
    // Per request code (103 REGISTER_BROKER, 105 GET_ROUTEINFO_BY_TOPIC) and answer (17 TOPIC_NOT_EXIST).
    check(format!("ringmq_namesrv_requests_total{{{l},request_code=\"103\",response_code=\"0\"}}"), 1.0);
    check(format!("ringmq_namesrv_requests_total{{{l},request_code=\"105\",response_code=\"0\"}}"), 1.0);
    check(format!("ringmq_namesrv_requests_total{{{l},request_code=\"105\",response_code=\"17\"}}"), 1.0);
    check(format!("rocketmq_rpc_latency_count{{{l},protocol_type=\"remoting\",request_code=\"105\"}}"), 2.0);
    check(
        format!("rocketmq_rpc_latency_bucket{{le=\"+Inf\",{l},protocol_type=\"remoting\",request_code=\"105\"}}"),
        2.0,
    );
    // The bad connection was closed in the same step that counted its frame.
    check(format!("ringmq_namesrv_connections{{{l}}}"), 1.0);
    check(format!("ringmq_namesrv_connections_refused_total{{{l}}}"), 0.0);
    let topics = first.get(&format!("ringmq_namesrv_topics{{{l}}}")).expect("topics");
    assert!(topics >= 2.0, "{}", first.text);

    // More traffic; the next scrape's counters are all at least the first's.
    assert_eq!(conn.call(route("Nope", 401)).code, rs::TOPIC_NOT_EXIST);
    let second = scrape_until(maddr, |s| s.get(&not_found) == Some(2.0));
    let counter = |series: &str| {
        let family = series.split('{').next().unwrap_or(series);
        let family = family
            .strip_suffix("_total")
            .or_else(|| ["_count", "_sum", "_bucket"].iter().find_map(|x| family.strip_suffix(x)))
            .unwrap_or(family);
        matches!(first.types.get(family).map(String::as_str), Some("counter" | "histogram"))
    };
    let mut compared = 0;
    for (series, v) in first.values.iter().filter(|(s, _)| counter(s)) {
        let now = second.get(series).unwrap_or_else(|| panic!("{series} gone in:\n{}", second.text));
        assert!(now >= *v, "{series} went down: {v} -> {now}");
        compared += 1;
    }
    assert!(compared >= 20, "{compared} counter series compared");
    assert_eq!(
        second.get(&format!("rocketmq_rpc_latency_count{{{l},protocol_type=\"remoting\",request_code=\"105\"}}")),
        Some(3.0)
    );

    let (status, _) = get(maddr, "/other");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _) = get(maddr, "/");
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    server.stop();
    assert!(TcpStream::connect(maddr).is_err(), "the endpoint closes with the server");
}

#[test]
fn exporter_is_off_by_default_and_a_taken_port_fails_the_start() {
    let server = start(config());
    assert_eq!(server.metrics_addr(), None);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let err = spawn(ServerConfig { metrics_prom_exporter_port: port, ..prom_config() }).unwrap_err();
    assert!(matches!(err, ServerError::Metrics { addr, .. } if addr.port() == port), "{err}");

    // The failed start released the RPC port it had bound first.
    let rpc_addr = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
    let err = spawn(ServerConfig { listen: rpc_addr, metrics_prom_exporter_port: port, ..prom_config() }).unwrap_err();
    assert!(matches!(err, ServerError::Metrics { .. }), "{err}");
    std::net::TcpListener::bind(rpc_addr).expect("the RPC port is free again");
}
