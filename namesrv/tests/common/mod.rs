//! Helpers shared by the NameServer's end-to-end tests (each test file is its own binary
//! and `mod common;`s this): servers on 127.0.0.1:0, a remoting connection over a
//! blocking `TcpStream` with frames from the client crate's codec, request builders,
//! and polling with a deadline.
//!
//! Invariants: every socket read has a timeout and every wait a deadline, so a broken
//! server fails a test instead of hanging it; nothing binds beyond 127.0.0.1.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use bytes::BytesMut;
use namesrv::server::{spawn, ServerHandle};
use namesrv::ServerConfig;
use ringmq_client::message::stored::body_crc;
use ringmq_client::remoting::codes::request_code as rc;
use ringmq_client::remoting::headers::RegisterBrokerRequestHeader;
use ringmq_client::remoting::route::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper};
use ringmq_client::remoting::{FrameLimits, RemotingCommand};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

pub fn config() -> ServerConfig {
    ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() }
}

pub fn start(config: ServerConfig) -> ServerHandle {
    spawn(config).expect("server starts")
}

pub struct Conn {
    pub stream: TcpStream,
    pub input: BytesMut,
    pub next_opaque: i32,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Self { stream, input: BytesMut::new(), next_opaque: 1 }
    }

    pub fn send(&mut self, mut cmd: RemotingCommand) -> i32 {
        self.next_opaque += 1;
        cmd.opaque = self.next_opaque;
        let mut out = BytesMut::new();
        cmd.encode(&mut out).unwrap();
        self.stream.write_all(&out).unwrap();
        cmd.opaque
    }

    pub fn recv(&mut self) -> RemotingCommand {
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

    pub fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let serialize_type = cmd.serialize_type;
        let opaque = self.send(cmd);
        let resp = self.recv();
        assert_eq!(resp.opaque, opaque);
        assert!(resp.is_response());
        assert_eq!(resp.serialize_type, serialize_type, "answered in the request's serialize type");
        resp
    }

    /// The server closed the connection (EOF or reset) without sending more.
    pub fn expect_closed(&mut self) {
        let mut chunk = [0u8; 64];
        match self.stream.read(&mut chunk) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("expected a closed connection, got {other:?}"),
        }
    }
}

pub fn register(name: &str, addr: &str, id: i64, topics: &[&str]) -> RemotingCommand {
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

pub fn route(topic: &str, version: i32) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic);
    cmd.version = version;
    cmd
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
