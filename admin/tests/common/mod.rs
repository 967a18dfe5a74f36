//! What `ringmq-admin`'s end-to-end tests share (each test file is its own binary and
//! `mod common;`s this): a NameServer and a 2-shard broker in this process on ephemeral
//! ports and a fresh store, and running the CLI binary.
//!
//! Invariants: nothing binds a fixed port; the broker's disk watermarks do not depend on
//! how full the host's disk is.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::process::Command;

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
    let ns = namesrv::server::spawn(namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).expect("namesrv");
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
