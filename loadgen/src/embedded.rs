//! An embedded RingMQ cluster for benchmarks run without addresses: one NameServer and
//! one broker in this process, on a fresh store under a directory on a real filesystem
//! (O_DIRECT refuses tmpfs). Dropping it stops the broker cleanly and removes the store.
//!
//! Invariant: the store directory is created fresh and removed on drop, so runs never
//! see each other's data.

use ringmq_broker::config::BrokerConfig;
use ringmq_broker::runtime::{self, BrokerHandle};
use ringmq_broker::store::config::{FlushMode, Preallocate};
use std::path::{Path, PathBuf};

pub struct EmbeddedCluster {
    pub namesrv_addr: String,
    pub store_root: PathBuf,
    broker: Option<BrokerHandle>,
    namesrv: Option<namesrv::server::ServerHandle>,
}

/// How the embedded broker runs.
#[derive(Debug, Clone)]
pub struct EmbeddedSpec {
    pub shards: usize,
    pub flush: FlushMode,
    pub segment_mib: u64,
    /// `messageDelayLevel`.
    pub delay_levels: String,
}

impl EmbeddedCluster {
    pub fn start(spec: &EmbeddedSpec, dir: &Path) -> Result<Self, String> {
        let mut ns_config = namesrv::config::ServerConfig::default();
        ns_config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
        let namesrv = namesrv::server::spawn(ns_config).map_err(|e| format!("embedded NameServer did not start: {e}"))?;
        let namesrv_addr = namesrv.local_addr().to_string();
        let store_root = dir.join(format!("embedded-{}-{}", std::process::id(), crate::report::utc_now().replace(':', "")));
        let _ = std::fs::remove_dir_all(&store_root);
        let mut config = BrokerConfig::default();
        config.store_root = store_root.clone();
        config.listen_port = 0;
        config.shard_count = spec.shards;
        config.broker_ip = Some("127.0.0.1".into());
        config.namesrv_addrs = vec![namesrv_addr.clone()];
        config.register_interval_ms = 5_000;
        config.store.flush_mode = spec.flush;
        config.store.preallocate = match spec.flush {
            FlushMode::Sync => Preallocate::Zero,
            FlushMode::Async => Preallocate::Fallocate,
        };
        config.store.segment_bytes = spec.segment_mib * 1024 * 1024;
        config.message_delay_level = spec.delay_levels.clone();
        let broker = runtime::start(config).map_err(|e| format!("embedded broker did not start: {e}"))?;
        Ok(Self { namesrv_addr, store_root, broker: Some(broker), namesrv: Some(namesrv) })
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        if let Some(b) = self.broker.take() {
            b.stop();
            b.join();
        }
        if let Some(n) = self.namesrv.take() {
            n.stop();
        }
        let _ = std::fs::remove_dir_all(&self.store_root);
    }
}
