//! What `ringmq-admin`'s end-to-end tests share (each test file is its own binary and
//! `mod common;`s this): a NameServer and a 2-shard broker in this process on ephemeral
//! ports and a fresh store, running the CLI binary, and the dashboard as a child
//! process with a login token (`dashboard`) with a raw HTTP exchange (`http_with`).
//!
//! Invariants: nothing binds a fixed port; the broker's disk watermarks do not depend on
//! how full the host's disk is.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Bound on the dashboard's start and on one HTTP exchange with it.
const DASHBOARD_WAIT: Duration = Duration::from_secs(30);

pub struct Cluster {
    pub namesrv: String,
    pub broker: String,
    pub _namesrv: namesrv::server::ServerHandle,
    pub _broker: ringmq_broker::launch::BrokerHandle,
    pub _dir: tempfile::TempDir,
}

/// A NameServer and a 2-shard broker named `broker_name` registering every 300 ms.
pub fn cluster(broker_name: &str) -> Cluster {
    cluster_with(broker_name, |_| {})
}

/// `cluster` with `adjust` applied to the broker's config before it starts.
pub fn cluster_with(broker_name: &str, adjust: impl FnOnce(&mut ringmq_broker::config::BrokerConfig)) -> Cluster {
    cluster_with_namesrv(broker_name, |_| {}, adjust)
}

/// `cluster_with`, the NameServer's config adjusted by `adjust_ns` (TLS).
pub fn cluster_with_namesrv(
    broker_name: &str,
    adjust_ns: impl FnOnce(&mut namesrv::config::ServerConfig),
    adjust: impl FnOnce(&mut ringmq_broker::config::BrokerConfig),
) -> Cluster {
    let mut ns_config = namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
    adjust_ns(&mut ns_config);
    let ns = namesrv::server::spawn(ns_config).expect("namesrv");
    let namesrv = ns.local_addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut config = ringmq_broker::config::BrokerConfig {
        store_root: dir.path().join("store"),
        listen_port: 0,
        shard_count: 2,
        broker_ip: Some("127.0.0.1".into()),
        broker_name: broker_name.into(),
        namesrv_addrs: vec![namesrv.clone()],
        register_interval_ms: 300,
        ..Default::default()
    };
    config.store.segment_bytes = 8 << 20;
    config.store.disk_max_used_ratio = 0.999;
    config.store.disk_force_clean_ratio = 0.999;
    config.store.disk_refuse_ratio = 0.9999;
    adjust(&mut config);
    let broker = ringmq_broker::launch::start(config).expect("broker");
    let addr = broker.addr.to_string();
    Cluster { namesrv, broker: addr, _namesrv: ns, _broker: broker, _dir: dir }
}

/// Runs the CLI: (exit code, stdout, stderr).
pub fn admin(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq-admin")).args(args).output().expect("runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs the CLI, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, out, err) = admin(args);
    assert_eq!(code, 0, "ringmq-admin {args:?} failed: {err}{out}");
    out
}

/// The login token every dashboard a test starts is given (`RINGMQ_DASHBOARD_TOKEN`).
pub const DASHBOARD_TOKEN: &str = "test-token-0123456789abcdef";

/// The dashboard as a child process; killed when dropped.
pub struct Dashboard {
    child: Child,
    pub addr: String,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ringmq-admin dashboard` on an ephemeral loopback port, logged in with
/// `DASHBOARD_TOKEN`.
pub fn dashboard(namesrv: &str) -> Dashboard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq-admin"))
        .args(["dashboard", "-n", namesrv, "--listen", "127.0.0.1:0"])
        .env("RINGMQ_DASHBOARD_TOKEN", DASHBOARD_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("dashboard starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(DASHBOARD_WAIT).expect("the dashboard prints its address");
    let addr = line
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();
    Dashboard { child, addr }
}

/// `(status, head, body)` of one request with exactly `headers` (lines without CRLF).
pub fn http_with(addr: &str, method: &str, target: &str, headers: &[&str], body: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DASHBOARD_WAIT)).unwrap();
    let lines: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(s, "{method} {target} HTTP/1.1\r\n{lines}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head end: {text}"));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    (status, head.to_string(), body.to_string())
}

