//! The NameServer's own metrics: what the server thread counts (`NamesrvMetrics`, plain
//! integers owned by the executor's thread — no atomics or locks on the request path),
//! the `Snapshot` it publishes every `metrics_publish_interval_ms` into a
//! `metrics_export::Slot`, and its Prometheus exposition (`render`), which the shared
//! `metrics_export` endpoint serves on its own thread.
//!
//! Names: Apache RocketMQ's NameServer exports no metrics of its own (its NamesrvConfig
//! has no metrics keys), so only the request latency histogram takes a RocketMQ 5 name —
//! the remoting layer's `rocketmq_rpc_latency` (milliseconds, by request code, as the
//! broker exports it); everything else is `ringmq_namesrv_*`. Every series carries
//! `node_type="namesrv"` and `node_id` (the address the NameServer listens on).
//!
//! Invariants:
//! - bounded labels: the request codes the processor serves (`SUPPORTED_REQUEST_CODES`)
//!   always have their own series, at most `OTHER_REQUEST_CODES_MAX` other codes do, and
//!   the rest count under `OVERFLOW_REQUEST_CODE` — so a client sending random codes
//!   cannot grow the exposition or push real codes out; response codes are the
//!   processor's own (a handful); clusters come from the route table (at most
//!   `brokers_max`);
//! - the server never waits for the exporter: `Slot::publish` skips a round instead;
//! - counters only grow while the server runs, so two scrapes never see one go down.

use crate::processor::SUPPORTED_REQUEST_CODES;
use crate::route::RouteInfoManager;
use metrics_export::prometheus_client::registry::Registry;
use metrics_export::{Buckets, Histograms, Labels, Values};
use ringmq_client::remoting::codes::{request_code as rc, response_code as rs};
use std::collections::BTreeMap;

/// Request codes the processor does not serve that still get their own series.
pub const OTHER_REQUEST_CODES_MAX: usize = 64;
/// The `request_code` label of every code beyond those.
pub const OVERFLOW_REQUEST_CODE: i32 = -1;

/// What the server thread counts. Lives in the executor's `Shared`; only that thread
/// touches it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamesrvMetrics {
    /// (request code label, response code) -> requests answered.
    requests: BTreeMap<(i32, i32), u64>,
    /// Request code label -> handling latency.
    latency: BTreeMap<i32, Buckets>,
    /// Codes outside `SUPPORTED_REQUEST_CODES` with their own label so far.
    other_codes: usize,
    registrations: u64,
    unregistered: u64,
    expired: u64,
    routes_found: u64,
    routes_not_found: u64,
    routes_failed: u64,
    bad_frames: u64,
    connections_refused: u64,
    /// The plain ACL's (`acl_enable`): requests refused, file loads, failed reloads.
    pub acl_refusals: u64,
    pub acl_file_loads: u64,
    pub acl_file_load_failures: u64,
}

impl NamesrvMetrics {
    /// One request handled in `us` microseconds and answered `response` (oneway
    /// requests too: they were handled, only the answer was not sent). `removed` is the
    /// number of live broker addresses the request took away (UNREGISTER_BROKER).
    pub fn on_request(&mut self, request: i32, response: i32, us: u64, removed: usize) {
        let code = self.code_label(request);
        *self.requests.entry((code, response)).or_default() += 1;
        self.latency.entry(code).or_default().observe(us);
        match request {
            rc::REGISTER_BROKER if response == rs::SUCCESS => self.registrations += 1,
            rc::UNREGISTER_BROKER => self.unregistered += removed as u64,
            rc::GET_ROUTEINFO_BY_TOPIC => match response {
                rs::SUCCESS => self.routes_found += 1,
                rs::TOPIC_NOT_EXIST => self.routes_not_found += 1,
                _ => self.routes_failed += 1,
            },
            _ => {}
        }
    }

    /// Broker addresses the expiry scan removed.
    pub fn on_expired(&mut self, brokers: usize) {
        self.expired += brokers as u64;
    }

    /// A frame that did not decode (its connection is closed).
    pub fn on_bad_frame(&mut self) {
        self.bad_frames += 1;
    }

    /// A connection closed on accept because `connections_max` were open.
    pub fn on_connection_refused(&mut self) {
        self.connections_refused += 1;
    }

    fn code_label(&mut self, code: i32) -> i32 {
        if SUPPORTED_REQUEST_CODES.contains(&code) || self.latency.contains_key(&code) {
            code
        } else if self.other_codes < OTHER_REQUEST_CODES_MAX {
            self.other_codes += 1;
            code
        } else {
            OVERFLOW_REQUEST_CODE
        }
    }

    /// The counters with the route table's and the server's gauges, for publishing.
    pub fn snapshot(&self, rim: &RouteInfoManager, connections: usize) -> Snapshot {
        Snapshot {
            counters: self.clone(),
            brokers_by_cluster: rim.live_brokers_by_cluster(),
            topics: rim.topic_count(),
            connections,
            tls_handshake_failures: 0,
            tls_plain_refusals: 0,
        }
    }
}

/// What the exporter renders: a copy, so a scrape never reads the live counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub counters: NamesrvMetrics,
    /// Live broker addresses per cluster.
    pub brokers_by_cluster: Vec<(String, usize)>,
    pub topics: usize,
    pub connections: usize,
    /// TLS handshakes that failed on the port (`tls.server.mode` permissive or
    /// enforcing; counted by the port's `ServerEdge`, copied in at publish).
    pub tls_handshake_failures: u64,
    /// Plain connections refused by `tls.server.mode=enforcing`.
    pub tls_plain_refusals: u64,
}

/// The OpenMetrics text of one snapshot; `node_id` labels every series.
pub fn render(node_id: &str, s: &Snapshot) -> String {
    let base = |extra: &[(&str, String)]| -> Labels {
        let mut l: Labels = vec![("node_type".into(), "namesrv".into()), ("node_id".into(), node_id.to_string())];
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        l
    };
    let one = |v: u64| vec![(base(&[]), v as f64)];
    let c = &s.counters;
    let mut reg = Registry::default();
    // Counter names carry `_total` in the exposition; the registry adds it.
    reg.register(
        "ringmq_namesrv_requests",
        "Requests handled, per request code and response code",
        Values::counter(
            c.requests
                .iter()
                .map(|((req, resp), n)| {
                    (base(&[("request_code", req.to_string()), ("response_code", resp.to_string())]), *n as f64)
                })
                .collect(),
        ),
    );
    reg.register(
        "rocketmq_rpc_latency",
        "Request handling latency in milliseconds (request decoded to response built), per request code",
        Histograms {
            scale: 0.001,
            series: c
                .latency
                .iter()
                .map(|(code, b)| {
                    (base(&[("protocol_type", "remoting".into()), ("request_code", code.to_string())]), *b)
                })
                .collect(),
        },
    );
    reg.register(
        "ringmq_namesrv_brokers",
        "Live broker addresses, per cluster",
        Values::gauge(
            s.brokers_by_cluster.iter().map(|(cl, n)| (base(&[("cluster", cl.clone())]), *n as f64)).collect(),
        ),
    );
    reg.register(
        "ringmq_namesrv_broker_registrations",
        "REGISTER_BROKER requests accepted (brokers re-register every 30 s as their heartbeat)",
        Values::counter(one(c.registrations)),
    );
    reg.register(
        "ringmq_namesrv_brokers_removed",
        "Broker addresses removed, by reason: UNREGISTER_BROKER or silent past broker_expiry_ms",
        Values::counter(vec![
            (base(&[("reason", "unregistered".into())]), c.unregistered as f64),
            (base(&[("reason", "expired".into())]), c.expired as f64),
        ]),
    );
    reg.register("ringmq_namesrv_topics", "Topics with queues in the route table", Values::gauge(one(s.topics as u64)));
    reg.register(
        "ringmq_namesrv_route_requests",
        "GET_ROUTEINFO_BY_TOPIC requests, by result: found, not_found (TOPIC_NOT_EXIST) or error",
        Values::counter(vec![
            (base(&[("result", "found".into())]), c.routes_found as f64),
            (base(&[("result", "not_found".into())]), c.routes_not_found as f64),
            (base(&[("result", "error".into())]), c.routes_failed as f64),
        ]),
    );
    reg.register(
        "ringmq_namesrv_connections",
        "Open client and broker connections",
        Values::gauge(one(s.connections as u64)),
    );
    reg.register(
        "ringmq_namesrv_connections_refused",
        "Connections closed on accept because connections_max were open",
        Values::counter(one(c.connections_refused)),
    );
    reg.register(
        "ringmq_namesrv_tls_handshake_failures",
        "TLS handshakes that failed (bad or missing client certificate, protocol errors, timeouts)",
        Values::counter(one(s.tls_handshake_failures)),
    );
    reg.register(
        "ringmq_namesrv_tls_plain_refusals",
        "Plain (not TLS) connections refused by tls.server.mode=enforcing",
        Values::counter(one(s.tls_plain_refusals)),
    );
    reg.register(
        "ringmq_namesrv_bad_frames",
        "Frames that did not decode (each closed its connection)",
        Values::counter(one(c.bad_frames)),
    );
    reg.register(
        "ringmq_namesrv_acl_refusals",
        "Requests refused by the plain ACL (acl_enable): no or unknown access key, bad signature, not admin, no permission",
        Values::counter(one(c.acl_refusals)),
    );
    reg.register("ringmq_namesrv_acl_file_loads", "plain_acl.yml loads that took effect (start-up included)", Values::counter(one(c.acl_file_loads)));
    reg.register(
        "ringmq_namesrv_acl_file_load_failures",
        "Changed plain_acl.yml files that did not load (the rules in force were kept)",
        Values::counter(one(c.acl_file_load_failures)),
    );
    metrics_export::encode(&reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_code_labels_are_bounded() {
        let mut m = NamesrvMetrics::default();
        // Unsupported codes take their own label until OTHER_REQUEST_CODES_MAX are held.
        for code in 0..OTHER_REQUEST_CODES_MAX as i32 + 10 {
            m.on_request(50_000 + code, rs::REQUEST_CODE_NOT_SUPPORTED, 1, 0);
        }
        // check(request code, expected label)
        let mut check = |code: i32, label: i32| assert_eq!(m.code_label(code), label, "code {code}");
        check(50_000, 50_000);
        check(50_000 + OTHER_REQUEST_CODES_MAX as i32 - 1, 50_000 + OTHER_REQUEST_CODES_MAX as i32 - 1);
        check(50_000 + OTHER_REQUEST_CODES_MAX as i32, OVERFLOW_REQUEST_CODE);
        check(7, OVERFLOW_REQUEST_CODE);
        // Served codes keep their own label whatever clients sent before.
        for code in SUPPORTED_REQUEST_CODES {
            check(code, code);
        }
        assert_eq!(m.latency.len(), OTHER_REQUEST_CODES_MAX + 1);
        assert_eq!(m.latency[&OVERFLOW_REQUEST_CODE].count(), 10);
    }

    #[test]
    fn counts_and_renders() {
        let mut m = NamesrvMetrics::default();
        // (request, response, latency us, brokers removed)
        let requests = [
            (rc::REGISTER_BROKER, rs::SUCCESS, 40, 0),
            (rc::REGISTER_BROKER, rs::SYSTEM_ERROR, 40, 0),
            (rc::GET_ROUTEINFO_BY_TOPIC, rs::SUCCESS, 120, 0),
            (rc::GET_ROUTEINFO_BY_TOPIC, rs::TOPIC_NOT_EXIST, 30, 0),
            (rc::GET_ROUTEINFO_BY_TOPIC, rs::TOPIC_NOT_EXIST, 30, 0),
            (rc::GET_ROUTEINFO_BY_TOPIC, rs::SYSTEM_ERROR, 30, 0),
            (rc::UNREGISTER_BROKER, rs::SUCCESS, 10, 1),
            (rc::UNREGISTER_BROKER, rs::SUCCESS, 10, 0),
        ];
        for (req, resp, us, removed) in requests {
            m.on_request(req, resp, us, removed);
        }
        m.on_expired(2);
        m.on_bad_frame();
        m.on_connection_refused();
        let s = Snapshot {
            counters: m,
            brokers_by_cluster: vec![("C1".into(), 2), ("C2".into(), 1)],
            topics: 5,
            connections: 3,
            tls_handshake_failures: 2,
            tls_plain_refusals: 3,
        };
        let text = render("10.0.0.1:9876", &s);
        let l = "node_type=\"namesrv\",node_id=\"10.0.0.1:9876\"";
        // check(a line the exposition must hold)
        let check = |line: String| assert!(text.lines().any(|x| x == line), "missing `{line}` in:\n{text}");
        check("# TYPE ringmq_namesrv_requests counter".into());
        check(format!("ringmq_namesrv_requests_total{{{l},request_code=\"103\",response_code=\"0\"}} 1"));
        check(format!("ringmq_namesrv_requests_total{{{l},request_code=\"105\",response_code=\"17\"}} 2"));
        check("# TYPE rocketmq_rpc_latency histogram".into());
        check(format!("rocketmq_rpc_latency_count{{{l},protocol_type=\"remoting\",request_code=\"105\"}} 4"));
        check(format!(
            "rocketmq_rpc_latency_bucket{{le=\"0.05\",{l},protocol_type=\"remoting\",request_code=\"105\"}} 3"
        ));
        check(format!("ringmq_namesrv_brokers{{{l},cluster=\"C1\"}} 2.0"));
        check(format!("ringmq_namesrv_brokers{{{l},cluster=\"C2\"}} 1.0"));
        check(format!("ringmq_namesrv_broker_registrations_total{{{l}}} 1"));
        check(format!("ringmq_namesrv_brokers_removed_total{{{l},reason=\"unregistered\"}} 1"));
        check(format!("ringmq_namesrv_brokers_removed_total{{{l},reason=\"expired\"}} 2"));
        check(format!("ringmq_namesrv_topics{{{l}}} 5.0"));
        check(format!("ringmq_namesrv_route_requests_total{{{l},result=\"found\"}} 1"));
        check(format!("ringmq_namesrv_route_requests_total{{{l},result=\"not_found\"}} 2"));
        check(format!("ringmq_namesrv_route_requests_total{{{l},result=\"error\"}} 1"));
        check(format!("ringmq_namesrv_connections{{{l}}} 3.0"));
        check(format!("ringmq_namesrv_connections_refused_total{{{l}}} 1"));
        check(format!("ringmq_namesrv_bad_frames_total{{{l}}} 1"));
        check(format!("ringmq_namesrv_tls_handshake_failures_total{{{l}}} 2"));
        check(format!("ringmq_namesrv_tls_plain_refusals_total{{{l}}} 3"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
