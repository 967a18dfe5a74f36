//! An embedded RingMQ cluster for benchmarks run without addresses: one NameServer and
//! one broker in this process — with `replication`, a master and its slave (same broker
//! name and shards; the slave learns its master from the NameServer) — on fresh stores
//! under a directory on a real filesystem (O_DIRECT refuses tmpfs). Dropping it stops
//! the brokers cleanly and removes the stores.
//!
//! Invariant: the store directories are created fresh and removed on drop, so runs never
//! see each other's data.

use ringmq_broker::config::{BrokerConfig, BrokerRole};
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::{FlushMode, Preallocate};
use std::path::{Path, PathBuf};

pub struct EmbeddedCluster {
    pub namesrv_addr: String,
    pub store_root: PathBuf,
    /// The (master) broker's client address.
    pub broker_addr: String,
    /// The slave's client address, with `replication`.
    pub slave_addr: Option<String>,
    broker: Option<BrokerHandle>,
    slave: Option<BrokerHandle>,
    namesrv: Option<namesrv::server::ServerHandle>,
    /// `shard_threads_cpu_ms()` right after the broker started.
    shard_cpu_ms_at_start: u64,
    /// The account loadgen's own calls are signed with, when the broker checks an ACL.
    acl: Option<ringmq_client::remoting::acl::Credentials>,
    /// With `EmbeddedSpec::tls`: the CA of the certificate made for the run, which the
    /// run's clients trust.
    pub tls_ca: Option<PathBuf>,
    /// Where that CA and the servers' certificate and key are (removed with the store).
    tls_dir: Option<PathBuf>,
    /// The TLS of loadgen's own runtime-info probes of the broker (`tls_ca` trusted).
    probe_tls: Option<std::sync::Arc<ringmq_client::net::tls::rustls::ClientConfig>>,
}

/// How long `start` waits for every shard of the slave to attach.
const SLAVE_ATTACH_TIMEOUT_MS: u64 = 30_000;

/// Every benchmark broker's disk watermarks (embedded, `broker` and `verify`'s child):
/// its store is a temp directory on a host disk that is shared and often far fuller
/// than a broker's own would be (CI's has been 93 % used), so the defaults (force-clean
/// at 85 %, refuse at 90 %) would delete segments under the measurement or refuse every
/// send. Real ENOSPC still stops writes with a clear error.
pub struct BenchDiskWatermarks;

impl BenchDiskWatermarks {
    const MAX_USED_RATIO: f64 = 0.97;
    const FORCE_CLEAN_RATIO: f64 = 0.98;
    const REFUSE_RATIO: f64 = 0.99;
    /// The same three as a child broker's `[store]` TOML lines.
    pub const TOML: &'static str = "disk_max_used_ratio = 0.97\ndisk_force_clean_ratio = 0.98\ndisk_refuse_ratio = 0.99\n";

    pub fn apply(store: &mut ringmq_broker::store::config::StoreConfig) {
        store.disk_max_used_ratio = Self::MAX_USED_RATIO;
        store.disk_force_clean_ratio = Self::FORCE_CLEAN_RATIO;
        store.disk_refuse_ratio = Self::REFUSE_RATIO;
    }
}

/// How the embedded broker runs.
#[derive(Debug, Clone)]
pub struct EmbeddedSpec {
    pub shards: usize,
    pub flush: FlushMode,
    pub segment_mib: u64,
    /// `messageDelayLevel`.
    pub delay_levels: String,
    /// `Some(role)`: the broker is that master (ASYNC_MASTER or SYNC_MASTER) and a slave
    /// runs beside it.
    pub replication: Option<BrokerRole>,
    /// `[store] write_through`: O_DSYNC segments (`None`: the broker's default, on
    /// under sync flush).
    pub write_through: Option<bool>,
    /// `spin_before_park_us` of the broker's shards.
    pub spin_before_park_us: u64,
    /// `[store] read_ahead_windows_max`.
    pub read_ahead_windows: usize,
    /// Host or shard route mode.
    pub route_mode: ringmq_broker::config::RouteMode,
    /// `aclEnable` with a `plain_acl.yml` whose one account (an admin) is this: every
    /// request must be signed with it (`--access-key`/`--secret-key` without
    /// `--namesrv`, to measure what the ACL check costs).
    pub acl: Option<ringmq_client::remoting::acl::Credentials>,
    /// TLS only on every port (`tls.server.mode=enforcing`, the broker's own
    /// connections with `useTLS`), with a CA and a server certificate made for the run.
    pub tls: bool,
}

impl EmbeddedSpec {
    /// The broker a workload's flags describe (256 MiB segments, Java's delay levels).
    pub fn of(a: &crate::workload_cmd::WorkloadArgs, replication: Option<BrokerRole>) -> Self {
        Self {
            shards: a.shards,
            flush: a.flush.mode(),
            segment_mib: 256,
            delay_levels: ringmq_broker::schedule::DEFAULT_DELAY_LEVELS.into(),
            replication,
            write_through: match (a.write_through, a.no_write_through) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            spin_before_park_us: a.spin_before_park_us,
            read_ahead_windows: a.read_ahead_windows,
            route_mode: a.route_mode,
            acl: crate::workload_cmd::credentials(a),
            tls: a.tls && a.namesrv.is_none(),
        }
    }

    /// What sets this broker apart from the defaults, for result labels ("" if nothing).
    pub fn label_suffix(&self) -> String {
        let mut s = String::new();
        if self.route_mode == ringmq_broker::config::RouteMode::Shard {
            s.push_str(", shard route mode");
        }
        if self.acl.is_some() {
            s.push_str(", ACL (every request signed and checked)");
        }
        let store = ringmq_broker::store::config::StoreConfig { flush_mode: self.flush, write_through: self.write_through, ..Default::default() };
        if store.write_through() {
            s.push_str(", O_DSYNC");
        } else if self.flush == FlushMode::Sync {
            s.push_str(", write + fdatasync");
        }
        if self.spin_before_park_us > 0 {
            s.push_str(&format!(", spin {} µs", self.spin_before_park_us));
        }
        if self.read_ahead_windows != ringmq_broker::store::config::StoreConfig::default().read_ahead_windows_max {
            s.push_str(&format!(", {} read-ahead windows", self.read_ahead_windows));
        }
        if self.tls {
            s.push_str(", TLS enforcing");
        }
        s
    }
}

/// A `plain_acl.yml` with one admin account and no white-listed address: every request
/// pays the signature check (YAML double-quoted scalars, so any key text is safe).
fn plain_acl_yml(account: &ringmq_client::remoting::acl::Credentials) -> String {
    let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    format!(
        "globalWhiteRemoteAddresses: []\naccounts:\n  - accessKey: {}\n    secretKey: {}\n    admin: true\n",
        quoted(&account.access_key),
        quoted(&account.secret_key)
    )
}

impl EmbeddedCluster {
    pub fn start(spec: &EmbeddedSpec, dir: &Path) -> Result<Self, String> {
        let mut ns_config = namesrv::config::ServerConfig::default();
        ns_config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
        let run_name = format!("embedded-{}-{}", std::process::id(), crate::report::utc_now().replace(':', ""));
        let tls = if spec.tls { Some(RunTls::make(&dir.join(format!("{run_name}-tls")))?) } else { None };
        if let Some(t) = &tls {
            ns_config.tls = t.server.clone();
        }
        let namesrv = namesrv::server::spawn(ns_config).map_err(|e| format!("embedded NameServer did not start: {e}"))?;
        let namesrv_addr = namesrv.local_addr().to_string();
        let store_root = dir.join(&run_name);
        let _ = std::fs::remove_dir_all(&store_root);
        let mut config = BrokerConfig::default();
        config.store_root = store_root.clone();
        config.listen_port = 0;
        config.shard_count = spec.shards;
        config.route_mode = spec.route_mode;
        config.broker_ip = Some("127.0.0.1".into());
        config.namesrv_addrs = vec![namesrv_addr.clone()];
        config.register_interval_ms = 5_000;
        config.store.flush_mode = spec.flush;
        config.store.preallocate = match spec.flush {
            FlushMode::Sync => Preallocate::Zero,
            FlushMode::Async => Preallocate::Fallocate,
        };
        config.store.segment_bytes = spec.segment_mib * 1024 * 1024;
        BenchDiskWatermarks::apply(&mut config.store);
        config.store.write_through = spec.write_through;
        config.store.read_ahead_windows_max = spec.read_ahead_windows;
        config.spin_before_park_us = spec.spin_before_park_us;
        config.message_delay_level = spec.delay_levels.clone();
        if let Some(account) = &spec.acl {
            std::fs::create_dir_all(&store_root).map_err(|e| format!("{}: {e}", store_root.display()))?;
            let file = store_root.join("plain_acl.yml");
            std::fs::write(&file, plain_acl_yml(account)).map_err(|e| format!("{}: {e}", file.display()))?;
            config.acl_enable = true;
            config.plain_acl_file = Some(file);
            config.inner_client_authentication_credentials =
                Some(serde_json::json!({ "accessKey": account.access_key, "secretKey": account.secret_key }).to_string());
        }
        if let Some(t) = &tls {
            config.tls.server = t.server.clone();
            config.tls.client = t.client.clone();
        }
        let mut slave_config = None;
        if let Some(role) = spec.replication {
            config.role = role;
            let mut s = config.clone();
            s.role = BrokerRole::Slave;
            s.broker_id = 1;
            s.store_root = store_root.join("slave");
            s.slave_read_enable = true;
            slave_config = Some(s);
            config.store_root = store_root.join("master");
        }
        let broker = launch::start(config).map_err(|e| format!("embedded broker did not start: {e}"))?;
        let shard_cpu_ms_at_start = shard_threads_cpu_ms();
        let broker_addr = broker.addr.to_string();
        let mut cluster = Self {
            namesrv_addr,
            store_root,
            broker_addr,
            slave_addr: None,
            broker: Some(broker),
            slave: None,
            namesrv: Some(namesrv),
            shard_cpu_ms_at_start,
            acl: spec.acl.clone(),
            tls_ca: tls.as_ref().map(|t| t.ca.clone()),
            tls_dir: tls.as_ref().map(|t| t.dir.clone()),
            probe_tls: tls.map(|t| t.probe),
        };
        if let Some(s) = slave_config {
            let slave = launch::start(s).map_err(|e| format!("embedded slave did not start: {e}"))?;
            cluster.slave_addr = Some(slave.addr.to_string());
            let shards = slave.shard_count as u64;
            cluster.slave = Some(slave);
            // A SYNC_MASTER refuses sends until a slave is attached: wait for all shards.
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(SLAVE_ATTACH_TIMEOUT_MS);
            loop {
                let attached = crate::replication::runtime_info_as(&cluster.broker_addr, cluster.acl.as_ref(), cluster.probe_tls.as_ref()).ok().and_then(|t| t.get("haSlaves").and_then(|v| v.parse::<u64>().ok()));
                if attached == Some(shards) {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!("the embedded slave did not attach within {SLAVE_ATTACH_TIMEOUT_MS} ms ({attached:?} of {shards} shards)"));
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        Ok(cluster)
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        if let Some(b) = self.slave.take() {
            b.stop();
            b.join();
        }
        if let Some(b) = self.broker.take() {
            b.stop();
            b.join();
        }
        if let Some(n) = self.namesrv.take() {
            n.stop();
        }
        let _ = std::fs::remove_dir_all(&self.store_root);
        if let Some(d) = &self.tls_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The TLS of a `--tls` run: a CA and a server certificate for 127.0.0.1 and localhost
/// it signed (`ringmq_client::net::tls::gen`), written under `dir`; the servers accept
/// TLS only and the broker's own connections use it.
struct RunTls {
    dir: PathBuf,
    ca: PathBuf,
    server: ringmq_client::net::tls::TlsServerSettings,
    client: ringmq_client::net::tls::TlsClientSettings,
    probe: std::sync::Arc<ringmq_client::net::tls::rustls::ClientConfig>,
}

impl RunTls {
    fn make(dir: &Path) -> Result<Self, String> {
        use ringmq_client::net::tls::gen::{write_atomically, Ca, SERVER_NAMES};
        use ringmq_client::net::tls::{ServerMode, TlsClientSettings, TlsServerSettings};
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let ca = Ca::new("RingMQ loadgen run CA").map_err(|e| e.to_string())?;
        let (cert, key) = ca.leaf("ringmq-loadgen", SERVER_NAMES, true).map_err(|e| e.to_string())?;
        let (ca_path, cert_path, key_path) = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server-key.pem"));
        write_atomically(&ca_path, &ca.pem, false).map_err(|e| e.to_string())?;
        write_atomically(&cert_path, &cert, false).map_err(|e| e.to_string())?;
        write_atomically(&key_path, &key, true).map_err(|e| e.to_string())?;
        let server = TlsServerSettings { mode: ServerMode::Enforcing, cert_path: Some(cert_path), key_path: Some(key_path), ..TlsServerSettings::default() };
        let client = TlsClientSettings { enable: true, trust_cert_path: Some(ca_path.clone()), ..TlsClientSettings::default() };
        let probe = ringmq_client::net::tls::build_client_config(&client).map_err(|e| e.to_string())?;
        Ok(Self { dir: dir.to_path_buf(), ca: ca_path, server, client, probe })
    }
}

/// CPU time (user + system, ms) of this process's broker shard threads
/// (`ringmq-shard-<i>`), read from /proc; the embedded broker runs in this process.
pub fn shard_threads_cpu_ms() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    let mut ticks = 0u64;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("ringmq-shard") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        ticks += cpu_ticks_of_stat(&stat).unwrap_or(0);
    }
    ticks * 1000 / ticks_per_sec
}

/// utime + stime (clock ticks) from a /proc `stat` line: after the parenthesised name,
/// state is field 3, utime 14, stime 15.
fn cpu_ticks_of_stat(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')').map(|(_, r)| r)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(field(14)? + field(15)?)
}

/// CPU time (user + system, ms) of process `pid`, all its threads, from
/// /proc/<pid>/stat; `None` once it is gone. Peers' CPU per message is read with it.
pub fn process_cpu_ms(pid: u32) -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(cpu_ticks_of_stat(&stat)? * 1000 / ticks_per_sec)
}

/// What the broker spent on the run so far, for the result label: requests forwarded
/// between shards (share of all requests) and shard-thread CPU per message put.
pub fn broker_cost_note(cluster: &EmbeddedCluster) -> Option<String> {
    let info = crate::replication::runtime_info_as(&cluster.broker_addr, cluster.acl.as_ref(), cluster.probe_tls.as_ref()).ok()?;
    let num = |k: &str| info.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Both summed over the shards.
    let requests = num("requestsTotal");
    let forwarded = num("forwardedOut");
    let put = num("putMessageTimesTotal").max(1);
    let cpu_ms = shard_threads_cpu_ms().saturating_sub(cluster.shard_cpu_ms_at_start);
    let share = if requests > 0 { format!("{:.1} % of {requests} requests", forwarded as f64 * 100.0 / requests as f64) } else { format!("{forwarded} requests") };
    Some(format!(", forwarded {share}, {:.1} broker CPU-µs/msg", cpu_ms as f64 * 1000.0 / put as f64))
}

#[cfg(test)]
mod tests {
    use super::{cpu_ticks_of_stat, BenchDiskWatermarks};

    #[test]
    fn bench_watermarks_toml_says_what_apply_sets() {
        let mut store = ringmq_broker::store::config::StoreConfig::default();
        BenchDiskWatermarks::apply(&mut store);
        let toml = format!(
            "disk_max_used_ratio = {}\ndisk_force_clean_ratio = {}\ndisk_refuse_ratio = {}\n",
            store.disk_max_used_ratio, store.disk_force_clean_ratio, store.disk_refuse_ratio
        );
        assert_eq!(BenchDiskWatermarks::TOML, toml);
    }

    fn check(stat: &str, expected: Option<u64>) {
        assert_eq!(cpu_ticks_of_stat(stat), expected, "{stat:?}");
    }

    #[test]
    fn cpu_ticks_come_from_utime_and_stime_after_the_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        check("42 (redis-server) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4", Some(325));
        // A name with spaces and a parenthesis: the last ')' ends it.
        check("7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0", Some(7));
        check("7 (short) R 1 7", None);
        check("no parenthesis at all", None);
        check("7 (x) R 1 7 7 0 -1 0 0 0 0 0 utime 4", None);
    }
}
