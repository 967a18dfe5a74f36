//! TLS on every port (issue 26; `ringmq_client::net::tls`, `broker/src/net/tls.rs`):
//! real brokers and NameServers in this process, certificates from the shared test PKI
//! (`ringmq_client::net::tls::gen::TestPki`: a CA, a server certificate for 127.0.0.1
//! and localhost, a client certificate, and one from a CA nobody trusts).
//!
//! Checked: the independent crates.io `rocketmq-client-rust` produces and consumes over
//! TLS against a broker and NameServer in `enforcing` mode; `enforcing` refuses a plain
//! client with "TLS required" and counts it; `permissive` serves a plain and a TLS client
//! on one port; `disabled` serves plain and fails a TLS handshake; a replaced
//! certificate is what a new connection sees while an open one goes on; a slave
//! replicates over TLS with its client certificate and, without one, is refused by a
//! master with `tls.server.need.client.auth=require` and holds nothing; the RingMQ client
//! sends and pulls over TLS.
//!
//! Invariants: no fixed ports (everything binds port 0); every wait is bounded by
//! `WAIT` and polls with a deadline; each test has its own certificates and cluster.

mod common_interop;

use bytes::BytesMut;
use common_interop::{bounded, broker_config, client_runtime, create_topic_cmd, ignore_disk_watermarks, on_glommio, send_cmd};
use ringmq_broker::config::{BrokerConfig, BrokerRole, MetricsExporter};
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_client::net::tls::gen::TestPki;
use ringmq_client::net::tls::rustls;
use ringmq_client::net::tls::{build_client_config, ClientAuth, ServerMode, TlsClientSettings, TlsServerSettings};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::{FrameLimits, SerializeType as RingSerializeType};
use rocketmq_client_rust::{ClientConfig as RmqClientConfig, ClientOptions, DefaultLitePullConsumer, DefaultMQProducer};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Bound on any single wait (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------
// The cluster.

/// A NameServer and one broker, both serving `server` TLS settings, the broker
/// registering over TLS (`useTLS`, the test CA trusted, the client certificate shown).
struct TlsCluster {
    broker: Option<BrokerHandle>,
    namesrv: Option<namesrv::server::ServerHandle>,
    _root: tempfile::TempDir,
}

fn outgoing(pki: &TestPki) -> TlsClientSettings {
    pki.client_settings(true)
}

impl TlsCluster {
    fn start(pki: &TestPki, server: TlsServerSettings, tweak: impl FnOnce(&mut BrokerConfig)) -> Self {
        Self::start_with(pki, server.clone(), server, tweak)
    }

    /// The NameServer with `ns_server`, the broker with `server`.
    fn start_with(pki: &TestPki, ns_server: TlsServerSettings, server: TlsServerSettings, tweak: impl FnOnce(&mut BrokerConfig)) -> Self {
        common_interop::init_logging();
        let ns_config = namesrv::config::ServerConfig {
            listen: "127.0.0.1:0".parse().expect("address"),
            tls: ns_server,
            metrics_exporter_type: namesrv::config::MetricsExporter::Prom,
            metrics_prom_exporter_host: "127.0.0.1".into(),
            metrics_prom_exporter_port: 0,
            ..Default::default()
        };
        let namesrv = namesrv::server::spawn(ns_config).expect("namesrv starts");
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp store");
        let mut config = broker_config(root.path().to_path_buf(), "broker-a", namesrv.local_addr().to_string());
        config.shard_count = 2;
        config.pull_suspend_max_ms = 2_000;
        ignore_disk_watermarks(&mut config);
        config.metrics_exporter_type = MetricsExporter::Prom;
        config.metrics_prom_exporter_host = "127.0.0.1".into();
        config.metrics_prom_exporter_port = 0;
        config.tls.server = server;
        config.tls.client = outgoing(pki);
        tweak(&mut config);
        let broker = launch::start(config).expect("broker starts");
        Self { broker: Some(broker), namesrv: Some(namesrv), _root: root }
    }

    fn broker_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.broker.as_ref().expect("broker").addr.port()))
    }

    fn namesrv_addr(&self) -> SocketAddr {
        self.namesrv.as_ref().expect("namesrv").local_addr()
    }

    /// A NameServer counter from its `/metrics`.
    fn namesrv_metric(&self, name: &str) -> f64 {
        metric_sum(self.namesrv.as_ref().and_then(|n| n.metrics_addr()).expect("NameServer metrics"), name)
    }

    /// A `ringmq_tls_*` counter summed over the shards, from `/metrics`.
    fn tls_metric(&self, name: &str) -> f64 {
        let addr = self.broker.as_ref().and_then(|b| b.metrics_addr).expect("metrics endpoint");
        metric_sum(addr, name)
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        if let Some(b) = self.broker.take() {
            b.stop();
            b.join();
        }
        if let Some(n) = self.namesrv.take() {
            n.stop();
        }
    }
}

fn metric_sum(addr: SocketAddr, name: &str) -> f64 {
    let mut s = TcpStream::connect(addr).expect("connect metrics");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("metrics answer");
    text.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// Polls `cond` until it holds; fails the test after `WAIT`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn server_settings(pki: &TestPki, mode: ServerMode) -> TlsServerSettings {
    pki.server_settings(mode)
}

// ---------------------------------------------------------------------------------
// Raw requests, plain and over TLS (a rustls client on a std socket).

/// One remoting exchange on `s`: the answer to `cmd`, or why there was none.
fn exchange<S: Read + Write>(s: &mut S, buf: &mut BytesMut, mut cmd: RemotingCommand, opaque: i32) -> Result<RemotingCommand, String> {
    cmd.opaque = opaque;
    cmd.serialize_type = RingSerializeType::Json;
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("encode");
    s.write_all(&out).map_err(|e| format!("write: {e}"))?;
    s.flush().map_err(|e| format!("flush: {e}"))?;
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(r) = RemotingCommand::decode(buf, &FrameLimits::default()).map_err(|e| format!("decode: {e}"))? {
            if r.is_response() && r.opaque == opaque {
                return Ok(r);
            }
            continue;
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err("closed by the server".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

fn plain_call(addr: SocketAddr, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    exchange(&mut s, &mut BytesMut::new(), cmd, 1)
}

/// A TLS connection kept open across requests.
struct TlsConn {
    s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: BytesMut,
    next_opaque: i32,
}

impl TlsConn {
    fn open(addr: SocketAddr, settings: &TlsClientSettings) -> Result<Self, String> {
        let config = build_client_config(settings).expect("client TLS config");
        let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(WAIT)).expect("timeout");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let mut s = rustls::StreamOwned::new(rustls::ClientConnection::new(config, name).expect("session"), sock);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).map_err(|e| format!("handshake: {e}"))?;
        }
        Ok(Self { s, buf: BytesMut::new(), next_opaque: 1 })
    }

    /// The DER of the certificate the server showed.
    fn peer_leaf(&self) -> Vec<u8> {
        self.s.conn.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec()).expect("a server certificate")
    }

    fn call(&mut self, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
        self.next_opaque += 1;
        exchange(&mut self.s, &mut self.buf, cmd, self.next_opaque)
    }
}

fn tls_call(addr: SocketAddr, settings: &TlsClientSettings, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    TlsConn::open(addr, settings)?.call(cmd)
}

fn runtime_info() -> RemotingCommand {
    RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO)
}

fn runtime_value(r: &RemotingCommand, key: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("runtime info JSON");
    v["table"][key].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{key} in {v}"))
}

fn route(topic: &str) -> RemotingCommand {
    RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic)
}

fn pki() -> (tempfile::TempDir, TestPki) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let pki = TestPki::generate(dir.path()).expect("test certificates");
    (dir, pki)
}

// ---------------------------------------------------------------------------------
// The tests.

/// rocketmq-client-rust links aws-lc-rs as well as ring: its configurations take the
/// process default, so one is installed (RingMQ's name ring explicitly).
fn install_default_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn rocketmq_tls_config(pki: &TestPki) -> RmqClientConfig {
    let mut config = RmqClientConfig::default();
    config.set_use_tls(true);
    let mut tls = rocketmq_transport::api::TlsConfig::default();
    tls.client.auth_server = true;
    tls.client.trust_cert_path = Some(pki.ca_cert.display().to_string());
    config.set_tls_config(tls);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_client_rust_produces_and_consumes_over_tls_with_an_enforcing_cluster() {
    install_default_provider();
    let (_dir, pki) = pki();
    let cluster = TlsCluster::start(&pki, server_settings(&pki, ServerMode::Enforcing), |_| {});
    let topic = "TlsInterop";
    let r = tls_call(cluster.broker_addr(), &pki.client_settings(false), create_topic_cmd(topic)).expect("create over TLS");
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    // The broker registers over TLS: the NameServer (enforcing) routes the topic.
    wait_for("the route over TLS", || tls_call(cluster.namesrv_addr(), &pki.client_settings(false), route(topic)).map(|r| r.code == rs::SUCCESS).unwrap_or(false));

    let ns = format!("127.0.0.1:{}", cluster.namesrv_addr().port());
    let mut producer = DefaultMQProducer::builder(client_runtime("tls-producer", SerializeType::JSON))
        .client_config(rocketmq_tls_config(&pki))
        .producer_group("PG-tls-interop")
        .name_server_addr(ns.as_str())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    let mut sent = HashSet::new();
    for i in 0..8 {
        let body = format!("over-tls-{i}");
        let msg = Message::builder().topic(topic).body_slice(body.as_bytes()).build().expect("message");
        bounded("send over TLS", producer.send(msg)).await.expect("a send over TLS succeeds");
        sent.insert(body);
    }

    let consumer_config = rocketmq_tls_config(&pki);
    let consumer = DefaultLitePullConsumer::builder(client_runtime("tls-lite-pull", SerializeType::JSON))
        .client_options(ClientOptions::legacy(consumer_config))
        .name_server_addr(ns.as_str())
        .use_tls(true)
        .consumer_group("CG-tls-interop")
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .auto_commit(false)
        .build()
        .expect("lite pull consumer");
    consumer.set_sub_expression_for_assign(topic, "*").await.expect("sub expression");
    bounded("lite pull start", consumer.start()).await.expect("lite pull starts");
    let queues = bounded("fetch queues", consumer.fetch_message_queues(topic)).await.expect("queues");
    consumer.assign(queues.clone()).await.expect("assign");
    for q in &queues {
        consumer.seek(q, 0).await.expect("seek to 0");
    }
    let mut got = HashSet::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while got.len() < sent.len() {
        assert!(tokio::time::Instant::now() < deadline, "consumer read {} of {} over TLS", got.len(), sent.len());
        for m in consumer.poll_with_timeout(300).await {
            got.insert(String::from_utf8(m.get_body().map(|b| b.to_vec()).unwrap_or_default()).expect("utf-8"));
        }
    }
    assert_eq!(got, sent);
    consumer.shutdown().await;
    producer.shutdown().await;
    // Nothing above was plain: no refusal was counted.
    assert_eq!(cluster.tls_metric("ringmq_tls_plain_refusals"), 0.0);
}

#[test]
fn enforcing_refuses_plain_and_counts_it_permissive_serves_both_disabled_is_plain() {
    let (_dir, pki) = pki();
    let tls = pki.client_settings(false);

    // enforcing: TLS answers; a plain request is answered "TLS required" and closed.
    let cluster = TlsCluster::start(&pki, server_settings(&pki, ServerMode::Enforcing), |_| {});
    assert_eq!(tls_call(cluster.broker_addr(), &tls, runtime_info()).expect("TLS").code, rs::SUCCESS);
    for addr in [cluster.broker_addr(), cluster.namesrv_addr()] {
        let r = plain_call(addr, runtime_info()).expect("a plain client is told why");
        assert_eq!(r.code, rs::SYSTEM_ERROR, "{addr}");
        assert!(r.remark.as_deref().unwrap_or("").contains("TLS required"), "{addr}: {:?}", r.remark);
    }
    wait_for("ringmq_tls_plain_refusals ≥ 1", || cluster.tls_metric("ringmq_tls_plain_refusals") >= 1.0);
    wait_for("ringmq_namesrv_tls_plain_refusals ≥ 1", || cluster.namesrv_metric("ringmq_namesrv_tls_plain_refusals") >= 1.0);
    // A TLS client that does not trust the server's CA fails its handshake.
    let stranger = TlsClientSettings { trust_cert_path: Some(pki.stranger_cert.clone()), ..tls.clone() };
    assert!(tls_call(cluster.broker_addr(), &stranger, runtime_info()).is_err(), "an untrusted server certificate is refused by the client");
    drop(cluster);

    // permissive: one port, both kinds of client.
    let cluster = TlsCluster::start(&pki, server_settings(&pki, ServerMode::Permissive), |_| {});
    let cluster_info = || RemotingCommand::request(rq::GET_BROKER_CLUSTER_INFO);
    for (addr, request) in [(cluster.broker_addr(), &runtime_info as &dyn Fn() -> RemotingCommand), (cluster.namesrv_addr(), &cluster_info)] {
        let plain = plain_call(addr, request()).expect("plain on a permissive port");
        let over_tls = tls_call(addr, &tls, request()).expect("TLS on a permissive port");
        assert_eq!((plain.code, over_tls.code), (rs::SUCCESS, rs::SUCCESS), "{addr}: {:?} / {:?}", plain.remark, over_tls.remark);
    }
    assert_eq!(cluster.tls_metric("ringmq_tls_plain_refusals"), 0.0);
    drop(cluster);

    // disabled: plain, and a TLS hello is not a frame.
    let cluster = TlsCluster::start(&pki, TlsServerSettings::default(), |c| c.tls.client = TlsClientSettings::default());
    assert_eq!(plain_call(cluster.broker_addr(), runtime_info()).expect("plain").code, rs::SUCCESS);
    assert!(tls_call(cluster.broker_addr(), &tls, runtime_info()).is_err(), "a disabled port speaks no TLS");
}

#[test]
fn a_replaced_certificate_reaches_new_connections_and_open_ones_go_on() {
    let (_dir, pki) = pki();
    let cluster = TlsCluster::start(&pki, server_settings(&pki, ServerMode::Enforcing), |_| {});
    let tls = pki.client_settings(false);
    let mut open = TlsConn::open(cluster.broker_addr(), &tls).expect("TLS");
    assert_eq!(open.call(runtime_info()).expect("answer").code, rs::SUCCESS);
    let before = open.peer_leaf();
    pki.renew_server("ringmq-server-renewed").expect("renew");
    wait_for("a new connection to see the renewed certificate", || {
        TlsConn::open(cluster.broker_addr(), &tls).map(|c| c.peer_leaf() != before).unwrap_or(false)
    });
    // The new certificate chains to the same CA: a new client checks it and is served.
    let mut fresh = TlsConn::open(cluster.broker_addr(), &tls).expect("TLS with the new certificate");
    assert_eq!(fresh.call(runtime_info()).expect("answer").code, rs::SUCCESS);
    // The connection made before goes on with its session.
    assert_eq!(open.call(runtime_info()).expect("the open connection still answers").code, rs::SUCCESS);
    assert_eq!(open.peer_leaf(), before);
    // A broken file keeps the renewed certificate in force.
    let renewed = fresh.peer_leaf();
    std::fs::write(&pki.server_cert, "not a certificate").expect("break the file");
    std::thread::sleep(Duration::from_millis(ringmq_client::net::tls::TLS_RELOAD_INTERVAL_MS + 1_000));
    let after = TlsConn::open(cluster.broker_addr(), &tls).expect("still served");
    assert_eq!(after.peer_leaf(), renewed, "a file that does not load keeps the certificate in force");
}

/// A slave of `master` (learning it from the NameServer), TLS client settings `tls`.
fn start_slave(root: &std::path::Path, ns: SocketAddr, tls: TlsClientSettings) -> BrokerHandle {
    let mut config = broker_config(root.to_path_buf(), "broker-a", ns.to_string());
    config.shard_count = 2;
    config.role = BrokerRole::Slave;
    config.broker_id = 1;
    ignore_disk_watermarks(&mut config);
    config.tls.client = tls;
    launch::start(config).expect("slave starts")
}

#[test]
fn replication_over_tls_and_a_slave_without_a_client_certificate_gets_nothing() {
    let (_dir, pki) = pki();
    let mut server = server_settings(&pki, ServerMode::Enforcing);
    server.need_client_auth = ClientAuth::Require;
    // The NameServer does not require client certificates; the master's ports do.
    let cluster = TlsCluster::start_with(&pki, server_settings(&pki, ServerMode::Enforcing), server, |_| {});
    let with_cert = pki.client_settings(true);
    let master = cluster.broker_addr();
    // Client authentication holds on the client port too.
    assert!(tls_call(master, &pki.client_settings(false), runtime_info()).is_err(), "no client certificate, no answer");
    let stranger = TlsClientSettings { cert_path: Some(pki.stranger_cert.clone()), key_path: Some(pki.stranger_key.clone()), ..pki.client_settings(false) };
    assert!(tls_call(master, &stranger, runtime_info()).is_err(), "a certificate of another CA, no answer");
    let topic = "TlsReplicated";
    assert_eq!(tls_call(master, &with_cert, create_topic_cmd(topic)).expect("create").code, rs::SUCCESS);
    let mut conn = TlsConn::open(master, &with_cert).expect("TLS with a client certificate");
    for i in 0..20 {
        let r = conn.call(send_cmd("PG-tls", topic, format!("m{i}").as_bytes())).expect("send");
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    }
    let master_total = runtime_value(&conn.call(runtime_info()).expect("info"), "storeMessagesTotal");
    assert_eq!(master_total, 20);

    // A slave with TLS but no client certificate: its handshakes fail, it holds nothing.
    let failures_before = cluster.tls_metric("ringmq_tls_handshake_failures");
    let bad_root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("slave store");
    let bad = start_slave(bad_root.path(), cluster.namesrv_addr(), pki.client_settings(false));
    let bad_addr = SocketAddr::from(([127, 0, 0, 1], bad.addr.port()));
    wait_for("the master to refuse the slave's handshakes", || cluster.tls_metric("ringmq_tls_handshake_failures") >= failures_before + 4.0);
    // (The slaves' own ports are plain: only their connection to the master is TLS.)
    let slave_info = plain_call(bad_addr, runtime_info()).expect("the slave answers");
    assert_eq!(runtime_value(&slave_info, "storeMessagesTotal"), 0, "a refused slave holds nothing");
    assert_eq!(runtime_value(&conn.call(runtime_info()).expect("info"), "haSlaves"), 0, "and is not attached");
    bad.stop();
    bad.join();

    // With its client certificate the slave attaches and catches up over TLS.
    let good_root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("slave store");
    let good = start_slave(good_root.path(), cluster.namesrv_addr(), with_cert.clone());
    let good_addr = SocketAddr::from(([127, 0, 0, 1], good.addr.port()));
    wait_for("the slave to hold the master's messages", || {
        plain_call(good_addr, runtime_info()).map(|r| runtime_value(&r, "storeMessagesTotal") == master_total).unwrap_or(false)
    });
    // Every message went to one shard: the other shard's replica may still be attaching.
    wait_for("both shards' replicas to attach", || conn.call(runtime_info()).map(|r| runtime_value(&r, "haSlaves") == 2).unwrap_or(false));
    good.stop();
    good.join();
}

#[test]
fn the_ringmq_client_sends_and_pulls_over_tls() {
    let (_dir, pki) = pki();
    let cluster = TlsCluster::start(&pki, server_settings(&pki, ServerMode::Enforcing), |_| {});
    let topic = "TlsRingClient";
    assert_eq!(tls_call(cluster.broker_addr(), &pki.client_settings(false), create_topic_cmd(topic)).expect("create").code, rs::SUCCESS);
    wait_for("the route", || tls_call(cluster.namesrv_addr(), &pki.client_settings(false), route(topic)).map(|r| r.code == rs::SUCCESS).unwrap_or(false));
    let ns = cluster.namesrv_addr().to_string();
    let with_tls = pki.client_settings(true);
    let outcome = |tls: TlsClientSettings| {
        let ns = ns.clone();
        on_glommio(move || async move {
            let mut c = ringmq_client::ClientConfig { namesrv_addrs: vec![ns], ..Default::default() };
            c.tls = tls;
            let mut pc = ringmq_client::producer::ProducerConfig::new(c, "PG-ringmq-tls");
            pc.retry_times_when_send_failed = 0;
            let producer = ringmq_client::producer::Producer::start(pc).await.map_err(|e| e.to_string())?;
            let r = producer.send(ringmq_client::Message::new(topic, "sent over TLS")).await.map(|_| ()).map_err(|e| e.to_string());
            producer.shutdown().await;
            r
        })
    };
    outcome(with_tls).expect("the RingMQ client's send over TLS succeeds");
    assert_eq!(runtime_value(&tls_call(cluster.broker_addr(), &pki.client_settings(false), runtime_info()).expect("info"), "storeMessagesTotal"), 1);
    // Without TLS the client is told the port wants TLS.
    let err = outcome(TlsClientSettings::default()).expect_err("a plain client is refused");
    assert!(err.contains("TLS required") || err.contains("closed"), "{err}");
    // A CA file that does not exist stops the client's start with the setting named.
    let missing = TlsClientSettings { trust_cert_path: Some(pki.ca_cert.with_file_name("missing.pem")), ..pki.client_settings(false) };
    let err = outcome(missing).expect_err("a missing CA file");
    assert!(err.contains("tls.client.trustCertPath"), "{err}");
}

#[test]
fn bad_certificate_files_and_a_key_password_fail_the_start() {
    let (dir, pki) = pki();
    let start = |server: TlsServerSettings| {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("store");
        let mut config = broker_config(root.path().to_path_buf(), "broker-a", "127.0.0.1:1".into());
        config.shard_count = 1;
        config.tls.server = server;
        launch::start(config).map(|b| {
            b.stop();
            b.join();
        })
    };
    let missing = TlsServerSettings { cert_path: Some(dir.path().join("missing.pem")), ..server_settings(&pki, ServerMode::Enforcing) };
    let e = start(missing).expect_err("a missing certificate");
    assert!(e.to_string().contains("tls.server.certPath") && e.to_string().contains("missing.pem"), "{e}");
    let password = TlsServerSettings { key_password: Some("s3cret".into()), ..server_settings(&pki, ServerMode::Enforcing) };
    let e = start(password).expect_err("a key password");
    assert!(e.to_string().contains("tls.server.keyPassword"), "{e}");
    let mismatched = TlsServerSettings { key_path: Some(pki.client_key.clone()), ..server_settings(&pki, ServerMode::Enforcing) };
    let e = start(mismatched).expect_err("a key of another certificate");
    assert!(e.to_string().contains("the key must belong to the certificate"), "{e}");
    let ns = namesrv::server::spawn(namesrv::config::ServerConfig {
        listen: "127.0.0.1:0".parse().expect("address"),
        tls: TlsServerSettings { key_path: Some(dir.path().join("nope.pem")), ..server_settings(&pki, ServerMode::Permissive) },
        ..Default::default()
    });
    let e = ns.expect_err("the NameServer refuses a missing key");
    assert!(e.to_string().contains("tls.server.keyPath"), "{e}");
}
