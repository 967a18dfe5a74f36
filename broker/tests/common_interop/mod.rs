//! Setup shared by the interop tests with the crates.io `rocketmq-client-rust` client
//! (`interop_rocketmq_client.rs`, `interop_retry_dlq.rs`, `interop_txn.rs`, `interop_admin.rs`,
//! `interop_compressed.rs`, `interop_acl.rs`, `interop_acl_clients.rs`, `interop_auth.rs`, `tls.rs`; each
//! `mod common_interop;`s this). It is apart from `tests/common/` because that module
//! is compiled into every test binary, and this one pulls in the RocketMQ client crates.
//!
//! Owns: the client's Tokio runtime owner and per-encoding `ClientRuntime`s, the
//! recording proxy (`RecordingProxy`: forwards whole frames, records each decoded, can
//! rewrite a same-length byte string in answers), the `Cluster` (a NameServer and one
//! broker "broker-a" with two shards and sync flush, in this process, clients reaching
//! the NameServer through a recording proxy and, with `BrokerPath::Proxied`, the broker
//! through a second one), raw requests (`raw_call`), bounded waits, the producer and
//! consumers as these tests set them up, `on_glommio` (the RingMQ client's side of a
//! test) and `test_both_encodings!` (one test per header encoding).
//!
//! Contract with the including file: it defines `const WAIT: Duration`, the bound on
//! every wait here (each test file keeps its own). Each test's own broker settings come
//! in through `Cluster::start`'s `tweak`; its own raw requests stay in its file (as an
//! `impl Cluster` block there).
//!
//! Invariants: no fixed ports (everything binds port 0, the tests connect to and
//! advertise 127.0.0.1 only: the broker has no listen-address setting and binds every
//! interface, as RocketMQ's does); every wait has a deadline.

// Each of the three test binaries uses a different part of this module.
#![allow(dead_code)]

use crate::WAIT;
use bytes::BytesMut;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::{FrameLimits, SerializeType as RingSerializeType};
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, DefaultLitePullConsumer, DefaultMQProducer, DefaultMQPushConsumer, DefaultMQPushConsumerBuilder, TelemetryHandle,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_protocol::protocol::remoting_command_defaults::{RemotingCommandDefaults, RemotingCommandFactory};
use rocketmq_protocol::protocol::SerializeType;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

pub const BROKER_NAME: &str = "broker-a";
/// Queues of every topic the tests create: with two shards, both hold some.
pub const QUEUES: i32 = 4;

// ---------------------------------------------------------------------------------
// The client's runtime.

/// The client needs a Tokio runtime owner that outlives every client; dropping one
/// inside an async test would panic, so it lives for the whole process.
static CLIENT_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    RuntimeOwner::plan(RuntimeConfig { thread_name: "ringmq-interop-client".to_string(), ..Default::default() })
        .expect("client runtime configuration")
        .build()
        .expect("client runtime starts")
});

/// A client runtime whose every request uses `serialize_type` for its header (the
/// client picks the encoding per `ClientRuntime`, through its `RemotingCommandFactory`).
pub fn client_runtime(scope: &'static str, serialize_type: SerializeType) -> Arc<ClientRuntime> {
    init_logging();
    let version = rocketmq_model::version::CURRENT_VERSION as i32;
    ClientRuntime::try_new_with_remoting_command_factory(
        CLIENT_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
        RemotingCommandFactory::new(RemotingCommandDefaults::new(version, serialize_type)),
    )
    .expect("client runtime")
}

/// `RINGMQ_TEST_LOG=debug` (an `EnvFilter`) shows the client's and broker's logs.
pub fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("RINGMQ_TEST_LOG") {
            let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_test_writer().try_init();
        }
    });
}

/// The suffix of a test's topic and group names, so the two encodings never share one.
pub fn label_of(serialize_type: SerializeType) -> &'static str {
    match serialize_type {
        SerializeType::JSON => "Json",
        SerializeType::ROCKETMQ => "Bin",
    }
}

/// Two tests, `$json` and `$binary`, each running `$scenario(serialize_type)` (an async
/// fn) with that header encoding: every scenario runs in both.
// Not every binary uses it (interop_retry_dlq's tests also take a lock).
#[allow(unused_macros)]
macro_rules! test_both_encodings {
    ($json:ident, $binary:ident, $scenario:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $json() {
            $scenario(rocketmq_protocol::protocol::SerializeType::JSON).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $binary() {
            $scenario(rocketmq_protocol::protocol::SerializeType::ROCKETMQ).await;
        }
    };
}
#[allow(unused_imports)]
pub(crate) use test_both_encodings;

/// The serialize-type byte a frame in this encoding carries (the top byte of its
/// second word), as the proxies record it.
pub fn serialize_code(serialize_type: SerializeType) -> u8 {
    match serialize_type {
        SerializeType::JSON => 0,
        SerializeType::ROCKETMQ => 1,
    }
}

// ---------------------------------------------------------------------------------
// The recording proxy: what the client does on the wire is recorded, not assumed.

/// One command that crossed a proxy, decoded.
#[derive(Debug, Clone)]
pub struct WireFrame {
    /// Connection number (per proxy): pairs a request with its answer.
    pub conn: usize,
    /// Client → server (a request, or an answer to a server's request).
    pub to_server: bool,
    pub serialize_type: u8,
    pub code: i32,
    pub opaque: i32,
    pub response: bool,
    pub oneway: bool,
    pub ext: BTreeMap<String, String>,
    pub remark: Option<String>,
}

impl WireFrame {
    pub fn ext(&self, name: &str) -> Option<&str> {
        self.ext.get(name).map(String::as_str)
    }
}

/// A TCP proxy on 127.0.0.1 that forwards whole frames, records each one decoded, and
/// can substitute one byte string for another of the same length in server → client
/// frames (so no frame length changes).
pub struct RecordingProxy {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<WireFrame>>>,
    stop: Arc<AtomicBool>,
}

type Rewrite = Option<Arc<(Vec<u8>, Vec<u8>)>>;

impl RecordingProxy {
    /// Takes a bound listener: the caller may need to choose its port (see `Cluster`).
    fn start(listener: TcpListener, upstream: SocketAddr, rewrite: Rewrite) -> Self {
        listener.set_nonblocking(true).expect("nonblocking listener");
        let addr = listener.local_addr().expect("proxy address");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log2, stop2) = (log.clone(), stop.clone());
        let conns = AtomicUsize::new(0);
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let Ok(server) = TcpStream::connect(upstream) else { continue };
                        let _ = client.set_nonblocking(false);
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { continue };
                        let conn = conns.fetch_add(1, Ordering::Relaxed);
                        let (l1, l2) = (log2.clone(), log2.clone());
                        std::thread::spawn(move || pump(client, server, true, conn, l1, None));
                        let rw = rewrite.clone();
                        std::thread::spawn(move || pump(s2, c2, false, conn, l2, rw));
                    }
                    // Nonblocking accept, so the thread sees `stop`: poll.
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Self { addr, log, stop }
    }

    pub fn frames(&self) -> Vec<WireFrame> {
        self.log.lock().expect("proxy log").clone()
    }

    /// Requests the client sent with `code`, each with the server's answer if any.
    pub fn exchanges(&self, code: i32) -> Vec<(WireFrame, Option<WireFrame>)> {
        let frames = self.frames();
        frames
            .iter()
            .filter(|f| f.to_server && !f.response && f.code == code)
            .map(|req| {
                let answer = frames.iter().find(|a| !a.to_server && a.response && a.conn == req.conn && a.opaque == req.opaque);
                (req.clone(), answer.cloned())
            })
            .collect()
    }

    /// Requests with `code` that crossed in one direction (server → client: the
    /// broker's own requests, such as transaction checks).
    pub fn requests(&self, code: i32, to_server: bool) -> Vec<WireFrame> {
        self.frames().into_iter().filter(|f| f.to_server == to_server && !f.response && f.code == code).collect()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` → `to` frame by frame, recording each frame and rewriting it if asked.
fn pump(mut from: TcpStream, mut to: TcpStream, to_server: bool, conn: usize, log: Arc<Mutex<Vec<WireFrame>>>, rewrite: Rewrite) {
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    'outer: loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&chunk[..n]);
        while pending.len() >= 4 {
            let len = u32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
            if pending.len() < 4 + len {
                break;
            }
            let mut frame: Vec<u8> = pending.drain(..4 + len).collect();
            if let Some(rw) = &rewrite {
                replace_all(&mut frame, &rw.0, &rw.1);
            }
            let mut buf = BytesMut::from(&frame[..]);
            if let Ok(Some(cmd)) = RemotingCommand::decode(&mut buf, &FrameLimits::default()) {
                log.lock().expect("proxy log").push(WireFrame {
                    conn,
                    to_server,
                    serialize_type: frame.get(4).copied().unwrap_or(0xff),
                    code: cmd.code,
                    opaque: cmd.opaque,
                    response: cmd.is_response(),
                    oneway: cmd.is_oneway(),
                    ext: cmd.ext_fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                    remark: cmd.remark.clone(),
                });
            }
            if to.write_all(&frame).is_err() {
                break 'outer;
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

fn replace_all(haystack: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len(), "a same-length substitution");
    let mut i = 0;
    while i + from.len() <= haystack.len() {
        if &haystack[i..i + from.len()] == from {
            haystack[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
}

// ---------------------------------------------------------------------------------
// The cluster.

/// How clients reach the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerPath {
    /// Straight to the broker (only the NameServer traffic is recorded).
    Direct,
    /// Through `Cluster::broker_proxy`: the NameServer proxy rewrites the broker address
    /// in its answers to the proxy's, so every client ↔ broker frame is recorded.
    Proxied,
}

pub struct Cluster {
    broker: Option<BrokerHandle>,
    namesrv: Option<namesrv::server::ServerHandle>,
    /// What clients are given as the NameServer.
    ns_proxy: RecordingProxy,
    broker_proxy: Option<RecordingProxy>,
    _root: tempfile::TempDir,
}

/// A NameServer on a free port of 127.0.0.1.
pub fn start_namesrv() -> namesrv::server::ServerHandle {
    start_namesrv_with(|_| {})
}

/// `start_namesrv`, configured further by `tweak`.
pub fn start_namesrv_with(tweak: impl FnOnce(&mut namesrv::config::ServerConfig)) -> namesrv::server::ServerHandle {
    let mut config = namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().expect("address"), ..Default::default() };
    tweak(&mut config);
    namesrv::server::spawn(config).expect("namesrv starts")
}

/// What every broker of these tests has: a free port (its handle says which),
/// 127.0.0.1 advertised, registration with `ns_addr` every second (so a new route is
/// served soon), a small store, and disk watermarks the host's own fill never
/// reaches (see `ignore_disk_watermarks`).
pub fn broker_config(store_root: PathBuf, name: &str, ns_addr: String) -> BrokerConfig {
    let mut config = BrokerConfig {
        store_root,
        listen_port: 0,
        broker_ip: Some("127.0.0.1".into()),
        broker_name: name.into(),
        namesrv_addrs: vec![ns_addr],
        register_interval_ms: 1_000,
        ..BrokerConfig::default()
    };
    config.store.segment_bytes = 8 * 1024 * 1024;
    config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
    config.store.dirty_bytes_max = 8 * 1024 * 1024;
    ignore_disk_watermarks(&mut config);
    config
}

/// The disk is shared with other builds (CI's host has been 93% used while these
/// tests ran, past the default 90% refuse watermark): for tests that do not test disk
/// watermarks, none is ever reached. `broker_config` applies it; a test of the
/// watermarks sets its own after.
pub fn ignore_disk_watermarks(config: &mut BrokerConfig) {
    config.store.disk_max_used_ratio = 1.0;
    config.store.disk_force_clean_ratio = 1.0;
    config.store.disk_refuse_ratio = 1.0;
}

impl Cluster {
    /// A NameServer and broker "broker-a" (2 shards, sync flush, no auto-created
    /// topics), the broker configured further by `tweak` (the test's own settings).
    pub fn start(path: BrokerPath, tweak: impl FnOnce(&mut BrokerConfig)) -> Self {
        Self::start_with_namesrv(path, |_| {}, tweak)
    }

    /// `start`, with the NameServer configured further by `namesrv_tweak`.
    pub fn start_with_namesrv(path: BrokerPath, namesrv_tweak: impl FnOnce(&mut namesrv::config::ServerConfig), tweak: impl FnOnce(&mut BrokerConfig)) -> Self {
        init_logging();
        let namesrv = start_namesrv_with(namesrv_tweak);
        let ns_addr = namesrv.local_addr();
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp store");
        let mut config = broker_config(root.path().to_path_buf(), BROKER_NAME, ns_addr.to_string());
        config.shard_count = 2;
        config.auto_create_topic = false;
        // This client's shutdown waits for its suspended pulls: answer them sooner.
        config.pull_suspend_max_ms = 2_000;
        config.store.flush_mode = FlushMode::Sync;
        tweak(&mut config);
        let broker = launch::start(config).expect("broker starts");
        let broker_port = broker.addr.port();
        let (ns_proxy, broker_proxy) = match path {
            BrokerPath::Direct => (RecordingProxy::start(TcpListener::bind("127.0.0.1:0").expect("proxy binds"), ns_addr, None), None),
            BrokerPath::Proxied => {
                // The broker proxy's port must have as many digits as the broker's, so
                // the NameServer proxy's substitution keeps every length.
                let listener = (0..100)
                    .map(|_| TcpListener::bind("127.0.0.1:0").expect("proxy binds"))
                    .find(|l| l.local_addr().expect("address").port().to_string().len() == broker_port.to_string().len())
                    .expect("a proxy port with as many digits as the broker's");
                let proxy_port = listener.local_addr().expect("address").port();
                let broker_proxy = RecordingProxy::start(listener, SocketAddr::from(([127, 0, 0, 1], broker_port)), None);
                let rewrite = (format!("127.0.0.1:{broker_port}").into_bytes(), format!("127.0.0.1:{proxy_port}").into_bytes());
                let listener = TcpListener::bind("127.0.0.1:0").expect("proxy binds");
                (RecordingProxy::start(listener, ns_addr, Some(Arc::new(rewrite))), Some(broker_proxy))
            }
        };
        Self { broker: Some(broker), namesrv: Some(namesrv), ns_proxy, broker_proxy, _root: root }
    }

    /// The NameServer address clients are given (the recording proxy's).
    pub fn namesrv_addr(&self) -> String {
        self.ns_proxy.addr.to_string()
    }

    /// The broker itself (not the proxy): for the test's own requests.
    pub fn broker_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.broker.as_ref().expect("broker").addr.port()))
    }

    #[allow(dead_code)] // not every test binary asks
    pub fn shard_count(&self) -> usize {
        self.broker.as_ref().expect("broker").shard_count
    }

    /// The broker names clients see: `broker-a`, or in shard route mode one per shard
    /// (`broker-a-s<i>`).
    #[allow(dead_code)] // not every test binary runs in shard mode
    pub fn broker_names(&self) -> Vec<String> {
        let broker = self.broker.as_ref().expect("broker");
        if broker.shard_addrs.iter().all(|a| a.port() == broker.addr.port()) {
            vec![BROKER_NAME.to_string()]
        } else {
            (0..broker.shard_count).map(|i| ringmq_broker::routing::shard_broker_name(BROKER_NAME, i)).collect()
        }
    }

    /// The address clients reach broker `name` at (one of `broker_names`).
    #[allow(dead_code)]
    pub fn addr_of(&self, name: &str) -> SocketAddr {
        let broker = self.broker.as_ref().expect("broker");
        let i = self.broker_names().iter().position(|n| n == name).unwrap_or_else(|| panic!("no broker {name}"));
        SocketAddr::from(([127, 0, 0, 1], broker.shard_addrs[i].port()))
    }

    /// Where the broker serves `/metrics` (when started with the Prometheus exporter).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.broker.as_ref()?.metrics_addr
    }

    /// Every client ↔ broker frame (`BrokerPath::Proxied` only).
    pub fn broker_proxy(&self) -> &RecordingProxy {
        self.broker_proxy.as_ref().expect("a cluster started with BrokerPath::Proxied")
    }

    /// Creates `topic` through the broker's UPDATE_AND_CREATE_TOPIC request.
    pub fn create_topic(&self, topic: &str, queues: i32) {
        let r = raw_call(
            self.broker_addr(),
            RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
                .with_ext("topic", topic)
                .with_ext("defaultTopic", "TBW102")
                .with_ext("readQueueNums", queues.to_string())
                .with_ext("writeQueueNums", queues.to_string())
                .with_ext("perm", "6")
                .with_ext("topicFilterType", "SINGLE_TAG"),
        );
        assert_eq!(r.code, rs::SUCCESS, "create topic: {:?}", r.remark);
    }

    /// `create_topic`, and that the NameServer has the route by the time the broker
    /// answers (as with Java's broker): no wait for the next periodic registration.
    pub fn create_routed_topic(&self, topic: &str, queues: i32) {
        self.create_topic(topic, queues);
        let ns = self.namesrv.as_ref().expect("namesrv").local_addr();
        let r = raw_call(ns, RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic));
        assert_eq!(r.code, rs::SUCCESS, "route right after creation: {:?}", r.remark);
    }

    /// Whether the NameServer itself (not the proxy) routes `topic`.
    pub fn namesrv_routes(&self, topic: &str) -> bool {
        self.namesrv_call(RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic)).code == rs::SUCCESS
    }

    /// One request to the NameServer itself (not the proxy), answered.
    pub fn namesrv_call(&self, cmd: RemotingCommand) -> RemotingCommand {
        raw_call(self.namesrv.as_ref().expect("namesrv").local_addr(), cmd)
    }

    /// Every header encoding the clients used, to the NameServer and (when proxied) to
    /// the broker, sorted.
    pub fn encodings_seen(&self) -> Vec<u8> {
        let broker_frames = self.broker_proxy.as_ref().map(RecordingProxy::frames).unwrap_or_default();
        let mut seen: Vec<u8> = self.ns_proxy.frames().iter().chain(broker_frames.iter()).filter(|f| f.to_server).map(|f| f.serialize_type).collect();
        seen.sort_unstable();
        seen.dedup();
        seen
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            broker.stop();
            broker.join();
        }
        if let Some(namesrv) = self.namesrv.take() {
            namesrv.stop();
        }
    }
}

/// One request over a fresh connection, answered within [`WAIT`].
pub fn raw_call(addr: SocketAddr, mut cmd: RemotingCommand) -> RemotingCommand {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    cmd.opaque = 1;
    cmd.serialize_type = RingSerializeType::Json;
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("encode");
    stream.write_all(&out).expect("write request");
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).expect("decode response") {
            if r.is_response() && r.opaque == 1 {
                return r;
            }
            continue;
        }
        let n = stream.read(&mut chunk).expect("read response");
        assert!(n > 0, "peer closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

// ---------------------------------------------------------------------------------
// Bounded waits and small helpers.

pub async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap_or_else(|_| panic!("{what} did not finish within {WAIT:?}"))
}

/// Polls `cond` until it holds; fails the test after [`WAIT`].
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------
// The client's producers and consumers, as these tests set them up.

/// A started producer of `group` (5 s send timeout) that has `topic`'s route.
pub async fn start_producer(cluster: &Cluster, serialize_type: SerializeType, scope: &'static str, group: String, topic: &str) -> DefaultMQProducer {
    let mut producer = DefaultMQProducer::builder(client_runtime(scope, serialize_type))
        .producer_group(group)
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    await_route_of(&mut producer, topic, QUEUES as usize * cluster.broker_names().len()).await;
    producer
}

/// Waits until the NameServer serves `topic`'s route with all its queues: the
/// producer's first send then finds them.
pub async fn await_route(producer: &mut DefaultMQProducer, topic: &str) -> Vec<MessageQueue> {
    await_route_of(producer, topic, QUEUES as usize).await
}

/// Waits until the NameServer serves `topic`'s route with `queues_expected` queues.
pub async fn await_route_of(producer: &mut DefaultMQProducer, topic: &str, queues_expected: usize) -> Vec<MessageQueue> {
    let deadline = Instant::now() + WAIT;
    loop {
        let last = producer.fetch_publish_message_queues(topic).await;
        if let Ok(queues) = &last {
            if queues.len() == queues_expected {
                return queues.clone();
            }
        }
        assert!(Instant::now() < deadline, "route of {topic} not served within {WAIT:?}: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn property(msg: &MessageExt, name: &str) -> Option<String> {
    msg.get_properties().iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v.to_string())
}

/// A clustering push consumer of `group` from the first offset, with one or two
/// consume threads and pulls of 8; the caller adds its own settings, subscription and
/// listener.
pub fn push_consumer(cluster: &Cluster, serialize_type: SerializeType, scope: &'static str, group: &str) -> DefaultMQPushConsumerBuilder {
    DefaultMQPushConsumer::builder(client_runtime(scope, serialize_type))
        .consumer_group(group)
        .name_server_addr(cluster.namesrv_addr())
        .message_model(MessageModel::Clustering)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(2)
        .pull_batch_size(8)
}

/// A started classic pull consumer (deprecated in the crate, still its way to pull a
/// queue at an offset with a broker-side filter).
#[allow(deprecated)]
pub async fn start_pull_consumer(
    cluster: &Cluster,
    serialize_type: SerializeType,
    scope: &'static str,
    group: String,
) -> rocketmq_client_rust::DefaultMQPullConsumer {
    let pull = rocketmq_client_rust::DefaultMQPullConsumer::builder(client_runtime(scope, serialize_type))
        .consumer_group(group)
        .name_server_addr(cluster.namesrv_addr())
        .consumer_pull_timeout(Duration::from_secs(5))
        .broker_suspend_max_time(Duration::from_secs(1))
        .consumer_timeout_when_suspend(Duration::from_secs(3))
        .build()
        .expect("pull consumer");
    bounded("pull start", pull.start()).await.expect("pull consumer starts");
    pull
}

/// A started lite-pull consumer of `group` assigned every queue of `topic`, each
/// seeked to offset 0, with no auto-commit; returns the queues too.
pub async fn start_lite_pull_from_start(
    namesrv_addr: String,
    serialize_type: SerializeType,
    scope: &'static str,
    group: &str,
    topic: &str,
) -> (DefaultLitePullConsumer, Vec<MessageQueue>) {
    let consumer = DefaultLitePullConsumer::builder(client_runtime(scope, serialize_type))
        .consumer_group(group)
        .name_server_addr(namesrv_addr)
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        // The client's shutdown waits for its suspended pulls: keep them short.
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
    (consumer, queues)
}

/// Runs `f` on a glommio executor thread (the RingMQ client's runtime) and waits.
pub fn on_glommio<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("ringmq-client")
        .spawn(move || async move { f().await })
        .expect("executor starts")
        .join()
        .expect("RingMQ client side")
}

/// A raw UPDATE_AND_CREATE_TOPIC for `topic` with `QUEUES` queues, read-write (the ACL,
/// auth and TLS tests sign or encrypt it themselves).
pub fn create_topic_cmd(topic: &str) -> RemotingCommand {
    RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", QUEUES.to_string())
        .with_ext("writeQueueNums", QUEUES.to_string())
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG")
}

/// A raw SEND_MESSAGE_V2 of `body` to queue 0 of `topic`, from producer group `group`.
pub fn send_cmd(group: &str, topic: &str, body: &[u8]) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_ext("a", group)
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", QUEUES.to_string())
        .with_ext("e", "0")
        .with_ext("f", "0")
        .with_ext("g", "0")
        .with_ext("h", "0")
        .with_ext("i", "")
        .with_ext("j", "0")
        .with_ext("k", "false")
        .with_ext("m", "false");
    cmd.body = bytes::Bytes::copy_from_slice(body);
    cmd
}
