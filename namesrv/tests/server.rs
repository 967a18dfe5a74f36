//! End-to-end tests of the NameServer: each starts servers on 127.0.0.1:0 (own glommio
//! thread each) and talks to them over std `TcpStream`s with frames encoded by the
//! client crate's codec, as a broker or client would.
//!
//! Invariants: every socket read has a timeout, so a broken server fails a test instead
//! of hanging it; nothing binds beyond 127.0.0.1.

use bytes::BytesMut;
use namesrv::server::{spawn, ServerHandle};
use namesrv::{ServerConfig, ServerError};
use ringmq_client::message::stored::body_crc;
use ringmq_client::remoting::codes::{request_code as rc, response_code as rs};
use ringmq_client::remoting::headers::{RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader};
use ringmq_client::remoting::route::{
    ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData,
};
use ringmq_client::remoting::{FrameLimits, RemotingCommand, SerializeType};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const READ_TIMEOUT: Duration = Duration::from_secs(5);
const MASTER: &str = "127.0.0.1:10911";
const SLAVE: &str = "127.0.0.1:10921";

fn config() -> ServerConfig {
    ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() }
}

fn start(config: ServerConfig) -> ServerHandle {
    spawn(config).expect("server starts")
}

struct Conn {
    stream: TcpStream,
    input: BytesMut,
    next_opaque: i32,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Self { stream, input: BytesMut::new(), next_opaque: 1 }
    }

    fn send(&mut self, mut cmd: RemotingCommand) -> i32 {
        self.next_opaque += 1;
        cmd.opaque = self.next_opaque;
        let mut out = BytesMut::new();
        cmd.encode(&mut out).unwrap();
        self.stream.write_all(&out).unwrap();
        cmd.opaque
    }

    fn recv(&mut self) -> RemotingCommand {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(cmd) = RemotingCommand::decode(&mut self.input, &FrameLimits::default()).unwrap() {
                return cmd;
            }
            let n = self.stream.read(&mut chunk).expect("response before the timeout");
            assert!(n > 0, "connection closed while waiting for a response");
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let serialize_type = cmd.serialize_type;
        let opaque = self.send(cmd);
        let resp = self.recv();
        assert_eq!(resp.opaque, opaque);
        assert!(resp.is_response());
        assert_eq!(resp.serialize_type, serialize_type, "answered in the request's serialize type");
        resp
    }

    /// The server closed the connection (EOF or reset) without sending more.
    fn expect_closed(&mut self) {
        let mut chunk = [0u8; 64];
        match self.stream.read(&mut chunk) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("expected a closed connection, got {other:?}"),
        }
    }
}

fn register(name: &str, addr: &str, id: i64, topics: &[&str]) -> RemotingCommand {
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, state_version: 0, timestamp: 1_700_000_000_000 },
            topic_config_table: topics
                .iter()
                .map(|t| {
                    (t.to_string(), TopicConfig { read_queue_nums: 4, write_queue_nums: 4, ..TopicConfig::new(t) })
                })
                .collect(),
        },
    }
    .encode();
    RemotingCommand::request(rc::REGISTER_BROKER)
        .with_header(&RegisterBrokerRequestHeader {
            broker_name: name.into(),
            broker_addr: addr.into(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: format!("{addr}0"),
            broker_id: id,
            body_crc32: body_crc(&body) as i32,
            ..Default::default()
        })
        .with_body(body)
}

fn route(topic: &str, version: i32) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic);
    cmd.version = version;
    cmd
}

fn body_text(cmd: &RemotingCommand) -> &str {
    std::str::from_utf8(&cmd.body).unwrap()
}

#[test]
fn register_then_route_in_both_json_dialects() {
    let server = start(config());
    let mut conn = Conn::connect(server.local_addr());
    let resp = conn.call(register("broker-a", MASTER, 0, &["TopicTest"]));
    assert_eq!((resp.code, resp.ext("masterAddr")), (rs::SUCCESS, None));
    let resp = conn.call(register("broker-a", SLAVE, 1, &["TopicTest"]));
    assert_eq!(resp.code, rs::SUCCESS);
    assert_eq!((resp.ext("masterAddr"), resp.ext("haServerAddr")), (Some(MASTER), Some("127.0.0.1:109110")));

    let legacy = conn.call(route("TopicTest", 63));
    assert_eq!(legacy.code, rs::SUCCESS);
    assert!(
        body_text(&legacy).contains(r#""brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}"#),
        "{}",
        body_text(&legacy)
    );
    let standard = conn.call(route("TopicTest", 401));
    assert!(body_text(&standard).contains(r#""brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}"#));
    let asked = conn.call(route("TopicTest", 63).with_ext("acceptStandardJsonOnly", "true"));
    assert_eq!(asked.body, standard.body);
    let decoded = TopicRouteData::decode(&legacy.body).unwrap();
    assert_eq!(decoded, TopicRouteData::decode(&standard.body).unwrap());
    assert_eq!(decoded.broker_datas.len(), 1);
    assert_eq!(decoded.broker_datas[0].broker_addrs.len(), 2);
    assert_eq!((decoded.queue_datas[0].broker_name.as_str(), decoded.queue_datas[0].write_queue_nums), ("broker-a", 4));

    // ROCKETMQ binary headers are answered in kind.
    let binary = conn.call(route("TopicTest", 401).with_serialize_type(SerializeType::RocketMq));
    assert_eq!((binary.code, &binary.body), (rs::SUCCESS, &standard.body));

    let missing = conn.call(route("Nope", 401));
    assert_eq!(missing.code, rs::TOPIC_NOT_EXIST);
    assert_eq!(missing.remark.as_deref(), Some("No topic route info in name server for the topic: Nope"));

    let info = conn.call(RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO));
    let info = ClusterInfo::decode(&info.body).unwrap();
    assert_eq!(info.cluster_addr_table["DefaultCluster"], ["broker-a".to_string()].into());
    let topics = conn.call(RemotingCommand::request(rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER));
    assert_eq!(body_text(&topics), r#"{"topicList":["TopicTest"]}"#);
}

#[test]
fn unknown_code_and_oneway() {
    let server = start(config());
    let mut conn = Conn::connect(server.local_addr());
    let resp = conn.call(RemotingCommand::request(4242));
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (rs::REQUEST_CODE_NOT_SUPPORTED, Some(" request type 4242 not supported"))
    );

    conn.call(register("broker-a", MASTER, 0, &["T"]));
    // A oneway request gets no answer: the next frame read answers the next request.
    conn.send(
        RemotingCommand::request(rc::UNREGISTER_BROKER)
            .with_header(&UnregisterBrokerRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: MASTER.into(),
                cluster_name: "DefaultCluster".into(),
                broker_id: 0,
            })
            .oneway(),
    );
    conn.send(RemotingCommand::request(4242).oneway());
    let resp = conn.call(route("T", 401));
    assert_eq!(resp.code, rs::TOPIC_NOT_EXIST);
}

#[test]
fn garbage_frame_closes_only_that_connection() {
    let server = start(config());
    let mut good = Conn::connect(server.local_addr());
    good.call(register("broker-a", MASTER, 0, &["T"]));

    // Responses to the frames before the garbage still arrive, then the close.
    let mut bad = Conn::connect(server.local_addr());
    let mut out = BytesMut::new();
    route("T", 401).with_opaque(77).encode(&mut out).unwrap();
    out.extend_from_slice(&[0, 0, 0, 8, 9, 0, 0, 0, 1, 2, 3, 4]); // serialize type 9
    bad.stream.write_all(&out).unwrap();
    let resp = bad.recv();
    assert_eq!((resp.opaque, resp.code), (77, rs::SUCCESS));
    bad.expect_closed();

    let mut huge = Conn::connect(server.local_addr());
    huge.stream.write_all(&0x7FFF_FFFFi32.to_be_bytes()).unwrap();
    huge.expect_closed();

    let mut bad_json = Conn::connect(server.local_addr());
    bad_json.stream.write_all(&[0, 0, 0, 6, 0, 0, 0, 2, b'[', b']']).unwrap();
    bad_json.expect_closed();

    assert_eq!(good.call(route("T", 401)).code, rs::SUCCESS);
    assert_eq!(Conn::connect(server.local_addr()).call(route("T", 401)).code, rs::SUCCESS);
}

#[test]
fn two_servers_share_nothing() {
    let one = start(config());
    let two = start(config());
    assert_ne!(one.local_addr(), two.local_addr());
    Conn::connect(one.local_addr()).call(register("broker-a", MASTER, 0, &["T"]));
    assert_eq!(Conn::connect(one.local_addr()).call(route("T", 401)).code, rs::SUCCESS);
    assert_eq!(Conn::connect(two.local_addr()).call(route("T", 401)).code, rs::TOPIC_NOT_EXIST);
}

#[test]
fn port_in_use_is_an_error() {
    let one = start(config());
    let err = spawn(ServerConfig { listen: one.local_addr(), ..config() }).unwrap_err();
    assert!(matches!(err, ServerError::Bind { .. }), "{err}");
}

/// Polls `f` until it returns true or `timeout` passes.
fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn scan_expires_silent_brokers() {
    let server = start(ServerConfig { broker_expiry_ms: 300, scan_interval_ms: 50, ..config() });
    let mut conn = Conn::connect(server.local_addr());
    let registered = Instant::now();
    conn.call(register("broker-a", MASTER, 0, &["T"]));
    assert!(eventually(Duration::from_secs(5), || conn.call(route("T", 401)).code == rs::TOPIC_NOT_EXIST));
    assert!(registered.elapsed() >= Duration::from_millis(300), "expired too early");
    let info = ClusterInfo::decode(&conn.call(RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO)).body).unwrap();
    assert!(info.broker_addr_table.is_empty());
}

#[test]
fn connections_beyond_the_maximum_are_closed() {
    let server = start(ServerConfig { connections_max: 1, ..config() });
    let mut first = Conn::connect(server.local_addr());
    assert_eq!(first.call(route("T", 401)).code, rs::TOPIC_NOT_EXIST);
    let mut second = Conn::connect(server.local_addr());
    second.expect_closed();
    drop(first);
    // The slot frees once the server sees the close.
    assert!(eventually(Duration::from_secs(5), || {
        let mut c = Conn::connect(server.local_addr());
        c.send(route("T", 401));
        let mut chunk = [0u8; 4096];
        matches!(c.stream.read(&mut chunk), Ok(n) if n > 0)
    }));
}
