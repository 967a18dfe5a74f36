//! Broker configuration: every setting of a broker process, where it comes from, and
//! the checks it must pass before the broker starts.
//!
//! Sources, each overriding the one before: built-in defaults ← a configuration file ←
//! command-line flags ([`BrokerConfig::from_args`]). A file is either RingMQ's TOML
//! (snake_case keys, a `[store]` table; see `tuning/profiles/`) or RocketMQ's
//! `broker.conf` (Java properties with RocketMQ's key names), so an existing RocketMQ
//! deployment can start RingMQ with the file it has.
//!
//! Invariant: an unknown key is an error that names it (and, in `broker.conf`, its
//! line): a misspelt setting must never silently fall back to its default.
//! Invariant: `store.record_bytes_max` is derived from `max_message_bytes` (plus
//! [`RECORD_OVERHEAD_BYTES_MAX`] for the stored record's header, topic and
//! properties) by every constructor, so the store and the request handlers agree on
//! the largest message.
//! Invariant: a config returned by `from_args` passed `validate`.

use crate::store::config::{FlushMode, StoreConfig, KIB};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub mod conf_keys;
mod cli;
mod ip;
mod toml;
mod validate;

pub use cli::BrokerArgs;
pub use validate::{MAX_MESSAGE_BYTES_LIMIT, SPIN_BEFORE_PARK_US_MAX};

pub const DEFAULT_LISTEN_PORT: u16 = 10911;
/// Bytes a stored record may add to its message body: the fixed fields (~100 bytes),
/// the topic (≤ 127) and the properties (an i16 length, so < 32 KiB), rounded up.
pub const RECORD_OVERHEAD_BYTES_MAX: u64 = 64 * KIB;

/// The `broker.conf` keys RingMQ reads (RocketMQ names); any other key is an error.
pub const BROKER_CONF_KEYS: &[&str] = &[
    "listenPort",
    "routeMode",
    "metricsExporterType",
    "metricsPromExporterHost",
    "metricsPromExporterPort",
    "namesrvAddr",
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerIP1",
    "brokerRole",
    "storePathRootDir",
    "storePathCommitLog",
    "flushDiskType",
    "flushIntervalCommitLog",
    "mappedFileSizeCommitLog",
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "maxMessageSize",
    "autoCreateTopicEnable",
    "defaultTopicQueueNums",
    "messageDelayLevel",
    "timerMaxDelaySec",
    "transactionTimeOut",
    "transactionCheckInterval",
    "transactionCheckMax",
    "rejectTransactionMessage",
    "haListenPort",
    "haMasterAddress",
    "syncFlushTimeout",
    "slaveReadEnable",
    "brokerPermission",
    "brokerTopicEnable",
    "clusterTopicEnable",
];

/// `broker.conf` keys UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig) changes on a
/// running broker: applied on every shard at once, kept in `<store>/config/runtimeConfig`
/// and applied again at the next start (over the config file, said in the log). Every
/// other key is refused by name: its value is read once at start-up.
pub const RUNTIME_CONF_KEYS: &[&str] = &[
    "brokerPermission",
    "slaveReadEnable",
    "syncFlushTimeout",
    "transactionTimeOut",
    "transactionCheckInterval",
    "transactionCheckMax",
];

/// RocketMQ's `PermName.PERM_READ | PERM_WRITE`.
pub const PERM_READ_WRITE: u32 = 6;
/// RocketMQ's `PermName.PERM_READ`.
pub const PERM_READ: u32 = 4;
/// RocketMQ's `PermName.PERM_WRITE`.
pub const PERM_WRITE: u32 = 2;

/// Why a runtime update was refused (nothing was applied).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RuntimeUpdateError {
    #[error("no key=value lines in the body")]
    Empty,
    #[error("line `{0}` is not key=value")]
    Syntax(String),
    #[error("RingMQ cannot change {keys} at runtime: settings are read at start-up; change the config file and restart the broker (runtime keys: {runtime})")]
    NotRuntime { keys: String, runtime: String },
    #[error("{key}={value}: {reason}")]
    BadValue { key: String, value: String, reason: String },
}

/// Parses an UPDATE_BROKER_CONFIG body (`key=value` lines, RocketMQ properties form).
/// All keys must be runtime keys with valid values, or nothing is taken.
pub fn parse_runtime_update(body: &str) -> Result<Vec<(String, String)>, RuntimeUpdateError> {
    let mut pairs = Vec::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!')) {
        let at = line.find(['=', ':']).ok_or_else(|| RuntimeUpdateError::Syntax(line.to_string()))?;
        pairs.push((line[..at].trim().to_string(), line[at + 1..].trim().to_string()));
    }
    if pairs.is_empty() {
        return Err(RuntimeUpdateError::Empty);
    }
    let refused: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !RUNTIME_CONF_KEYS.contains(&k.as_str()))
        .map(|(k, _)| if BROKER_CONF_KEYS.contains(&k.as_str()) { format!("`{k}`") } else { format!("`{k}` (not a RingMQ key)") })
        .collect();
    if !refused.is_empty() {
        return Err(RuntimeUpdateError::NotRuntime { keys: refused.join(", "), runtime: RUNTIME_CONF_KEYS.join(", ") });
    }
    let mut probe = BrokerConfig::default();
    for (k, v) in &pairs {
        apply_conf_key(&mut probe, k, v).map_err(|reason| RuntimeUpdateError::BadValue { key: k.clone(), value: v.clone(), reason })?;
    }
    Ok(pairs)
}

impl BrokerConfig {
    /// This configuration with runtime keys changed (`pairs` from
    /// [`parse_runtime_update`], so they apply).
    pub fn with_runtime_update(&self, pairs: &[(String, String)]) -> BrokerConfig {
        let mut next = self.clone();
        for (k, v) in pairs {
            if let Err(e) = apply_conf_key(&mut next, k, v) {
                crate::fatal::fatal(&format!("runtime key {k}={v} was checked and now fails: {e}"));
            }
        }
        next
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: Box<ConfigError>,
    },
    #[error("{0}")]
    Toml(String),
    #[error("line {line}: expected `key=value`, found {text:?}")]
    Syntax { line: usize, text: String },
    #[error("line {line}: {reason} (RingMQ reads: {}; Apache RocketMQ's thread-pool, network and store tuning keys are accepted and ignored)", BROKER_CONF_KEYS.join(", "))]
    UnknownKey { key: String, line: usize, reason: String },
    #[error("line {line}: key `{key}` is set again (first on line {first_line})")]
    DuplicateKey { key: String, line: usize, first_line: usize },
    #[error("line {line}: `{key}={value}`: {reason}")]
    BadValue { key: String, line: usize, value: String, reason: String },
    #[error(
        "line {line}: storePathCommitLog {} is not under storePathRootDir {}: RingMQ keeps each \
         shard's CommitLog at <root>/shard-<i>/commitlog and cannot place it elsewhere; remove \
         the key or set storePathRootDir to a directory above it",
        commitlog.display(),
        root.display()
    )]
    CommitLogOutsideRoot { commitlog: PathBuf, root: PathBuf, line: usize },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] crate::store::config::ConfigError),
}

/// Where metrics go (RocketMQ 5's `metricsExporterType`): nowhere, or a Prometheus
/// endpoint (`GET /metrics`). RocketMQ's OTLP_GRPC and LOG exporters are not built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricsExporter {
    #[default]
    Disable,
    Prom,
}

/// How clients reach a shard (DESIGN.md §2, ARCHITECTURE.md "Route modes").
///
/// `Host`: one broker identity per process; every shard accepts on `listen_port`
/// (SO_REUSEPORT) and forwards a request for another shard's queue over the mesh.
/// `Shard`: shard i registers with the NameServers as a broker of its own, named
/// `routing::shard_broker_name(broker_name, i)` and listening on `listen_port + i`,
/// holding only the queues it owns; clients reach the owning core directly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RouteMode {
    #[default]
    Host,
    Shard,
}

/// RocketMQ 5's default Prometheus exporter port (`metricsPromExporterPort`).
pub const METRICS_PROM_PORT_DEFAULT: u16 = 5557;

/// A broker's part in master/slave replication (RocketMQ `brokerRole`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum BrokerRole {
    /// Acknowledges a send once stored locally; slaves catch up.
    #[default]
    AsyncMaster,
    /// Acknowledges a send only once a slave has it.
    SyncMaster,
    Slave,
}

impl BrokerRole {
    pub fn is_master(self) -> bool {
        self != BrokerRole::Slave
    }
}

/// `flush` in TOML and `--flush` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FlushKind {
    Sync,
    Async,
}

impl From<FlushKind> for FlushMode {
    fn from(kind: FlushKind) -> Self {
        match kind {
            FlushKind::Sync => FlushMode::Sync,
            FlushKind::Async => FlushMode::Async,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// Port clients connect to; 0 lets the broker pick a free one at start (tests).
    pub listen_port: u16,
    /// The IPv4 address advertised to NameServers and encoded in offsetMsgIds; `None`
    /// picks one at start-up ([`BrokerConfig::advertised_ip`]).
    pub broker_ip: Option<String>,
    /// `host:port` of every NameServer; TOML takes an array or a `"a:9876;b:9876"` string.
    #[serde(deserialize_with = "self::toml::de_namesrv_addrs")]
    pub namesrv_addrs: Vec<String>,
    pub cluster_name: String,
    pub broker_name: String,
    /// 0 is the master; a slave has a positive id.
    pub broker_id: u64,
    pub role: BrokerRole,
    #[serde(deserialize_with = "self::toml::de_path")]
    pub store_root: PathBuf,
    /// Shards (pinned executors); 0 means one per available CPU.
    pub shard_count: usize,
    /// Host or shard route mode (`RouteMode`; broker.conf `routeMode = host|shard`).
    pub route_mode: RouteMode,
    /// Pins shard i to CPU `cpu_list[i]`.
    pub cpu_list: Option<Vec<usize>>,
    pub auto_create_topic: bool,
    pub default_topic_queue_nums: u32,
    pub max_message_bytes: u64,
    pub register_interval_ms: u64,
    pub idle_connection_timeout_ms: u64,
    pub pull_suspend_max_ms: u64,
    pub connections_per_shard_max: usize,
    /// Most requests one shard forwards to another in one cross-core batch.
    pub forward_batch_max: usize,
    /// How long an idle shard spins before it parks in io_uring (glommio's
    /// `spin_before_park`): a completion or a request arriving meanwhile is picked up
    /// without a wake-up, at the cost of that much busy CPU per idle moment. 0 parks at
    /// once. At most `SPIN_BEFORE_PARK_US_MAX`.
    pub spin_before_park_us: u64,
    /// Delay levels, RocketMQ's `messageDelayLevel` syntax (`1s 5s ... 2h`).
    pub message_delay_level: String,
    /// Longest timer delay (RocketMQ's `timerMaxDelaySec`).
    pub timer_max_delay_sec: u64,
    /// Age of a half message before its first check-back (RocketMQ's
    /// `transactionTimeOut`, ms; a message's `CHECK_IMMUNITY_TIME_IN_SECONDS` overrides it).
    pub transaction_timeout_ms: u64,
    /// Time between two check-back passes (RocketMQ's `transactionCheckInterval`, ms).
    pub transaction_check_interval_ms: u64,
    /// Check-backs of one half message before it is moved to
    /// `TRANS_CHECK_MAX_TIME_TOPIC` (RocketMQ's `transactionCheckMax`).
    pub transaction_check_max: u32,
    /// Refuse half messages with NO_PERMISSION (RocketMQ's `rejectTransactionMessage`).
    pub reject_transaction_message: bool,
    /// Open transactions (half messages neither committed nor rolled back) one shard
    /// holds; past it a half message is refused with SYSTEM_BUSY.
    pub transaction_pending_max: usize,
    /// First port of the replication stream: shard i of a master listens on
    /// `ha_listen_port + i` (RocketMQ's `haListenPort`; 0 means `listen_port + 1`).
    pub ha_listen_port: u16,
    /// A slave's master, `host:haListenPort` (RocketMQ's `haMasterAddress`); shard i
    /// connects to port + i.
    pub ha_master_address: Option<String>,
    /// How long a SYNC_MASTER send waits for a slave's confirmation before answering
    /// FLUSH_SLAVE_TIMEOUT (RocketMQ's `syncFlushTimeout`, ms).
    pub sync_flush_timeout_ms: u64,
    /// What a SYNC_MASTER waits for: the slave `received` the bytes (appended to its
    /// log, RocketMQ's meaning) or made them `durable` (fdatasync on the slave).
    pub ha_sync_ack: crate::ha::SyncAck,
    /// Consumers may read from this slave (RocketMQ's `slaveReadEnable`).
    pub slave_read_enable: bool,
    /// RocketMQ's `brokerPermission`: 6 read+write, 4 read only (drain: producers go
    /// elsewhere), 2 write only. Sends and pulls the permission lacks are refused and
    /// the routes the NameServers hand out carry it.
    pub broker_permission: u32,
    /// RocketMQ's `brokerTopicEnable`: a topic named after the broker (1 queue, read and
    /// write) exists, so `mqadmin clusterRT` can send to each broker by name.
    pub broker_topic_enable: bool,
    /// RocketMQ's `clusterTopicEnable`: a topic named after the cluster, read and write.
    pub cluster_topic_enable: bool,
    /// Metrics exporter (`metricsExporterType`): `disable` or `prom`.
    pub metrics_exporter_type: MetricsExporter,
    /// Address the Prometheus endpoint binds (`metricsPromExporterHost`; empty = all).
    pub metrics_prom_exporter_host: String,
    /// Its port (`metricsPromExporterPort`, 5557; 0 picks a free one, logged).
    pub metrics_prom_exporter_port: u16,
    /// Apache RocketMQ broker.conf keys accepted with no effect here, and why
    /// (`conf_keys.rs`); logged once at start-up. Never read from TOML.
    #[serde(skip)]
    pub ignored_conf_keys: Vec<(String, conf_keys::IgnoredWhy)>,
    #[serde(deserialize_with = "self::toml::de_store")]
    pub store: StoreConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let mut config = Self {
            listen_port: DEFAULT_LISTEN_PORT,
            broker_ip: None,
            namesrv_addrs: Vec::new(),
            cluster_name: "DefaultCluster".to_string(),
            broker_name: "broker-a".to_string(),
            broker_id: 0,
            role: BrokerRole::AsyncMaster,
            store_root: expand_home("~/ringmq/store"),
            shard_count: 0,
            route_mode: RouteMode::default(),
            cpu_list: None,
            auto_create_topic: false,
            default_topic_queue_nums: 8,
            max_message_bytes: 4 * 1024 * KIB,
            register_interval_ms: 30_000,
            idle_connection_timeout_ms: 120_000,
            pull_suspend_max_ms: 30_000,
            connections_per_shard_max: 10_000,
            forward_batch_max: 256,
            spin_before_park_us: 0,
            message_delay_level: crate::schedule::DEFAULT_DELAY_LEVELS.to_string(),
            timer_max_delay_sec: crate::schedule::timer::TIMER_MAX_DELAY_SEC_DEFAULT,
            transaction_timeout_ms: crate::txn::TRANSACTION_TIMEOUT_MS_DEFAULT,
            transaction_check_interval_ms: crate::txn::TRANSACTION_CHECK_INTERVAL_MS_DEFAULT,
            transaction_check_max: crate::txn::TRANSACTION_CHECK_MAX_DEFAULT,
            reject_transaction_message: false,
            transaction_pending_max: crate::txn::TRANSACTION_PENDING_MAX_DEFAULT,
            ha_listen_port: 0,
            ha_master_address: None,
            sync_flush_timeout_ms: crate::ha::SYNC_FLUSH_TIMEOUT_MS_DEFAULT,
            ha_sync_ack: crate::ha::SyncAck::Received,
            slave_read_enable: false,
            broker_permission: PERM_READ_WRITE,
            broker_topic_enable: true,
            cluster_topic_enable: true,
            metrics_exporter_type: MetricsExporter::Disable,
            metrics_prom_exporter_host: String::new(),
            metrics_prom_exporter_port: METRICS_PROM_PORT_DEFAULT,
            ignored_conf_keys: Vec::new(),
            store: StoreConfig::default(),
        };
        config.derive_bounds();
        config
    }
}

/// RocketMQ's `namesrvAddr` form: `host:port` separated by `;`, blanks ignored.
pub fn split_addrs(value: &str) -> Vec<String> {
    value.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect()
}

/// Expands a leading `~` or `$HOME` (configuration files are not read by a shell).
pub fn expand_home(path: &str) -> PathBuf {
    let rest = if path == "~" || path == "$HOME" {
        Some("")
    } else {
        path.strip_prefix("~/").or_else(|| path.strip_prefix("$HOME/"))
    };
    match (rest, std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".to_string()),
    }
}

fn parse_number<T: std::str::FromStr>(value: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    value.parse::<T>().map_err(|e| format!("not a valid number: {e}"))
}

/// What one `broker.conf` key does: its RocketMQ meaning mapped onto RingMQ's fields.
enum ConfEffect {
    Applied,
    CommitLogPath(PathBuf),
    Unknown,
}

fn apply_conf_key(config: &mut BrokerConfig, key: &str, value: &str) -> Result<ConfEffect, String> {
    let store = &mut config.store;
    match key {
        "listenPort" => config.listen_port = parse_number(value)?,
        "routeMode" => {
            config.route_mode = match value {
                "host" | "HOST" => RouteMode::Host,
                "shard" | "SHARD" => RouteMode::Shard,
                _ => return Err("expected host or shard".into()),
            }
        }
        "namesrvAddr" => config.namesrv_addrs = split_addrs(value),
        "brokerClusterName" => config.cluster_name = value.to_string(),
        "brokerName" => config.broker_name = value.to_string(),
        "messageDelayLevel" => config.message_delay_level = value.to_string(),
        "timerMaxDelaySec" => config.timer_max_delay_sec = parse_number(value)?,
        "transactionTimeOut" => config.transaction_timeout_ms = parse_number(value)?,
        "transactionCheckInterval" => config.transaction_check_interval_ms = parse_number(value)?,
        "transactionCheckMax" => config.transaction_check_max = parse_number(value)?,
        "rejectTransactionMessage" => config.reject_transaction_message = parse_bool(value)?,
        "haListenPort" => config.ha_listen_port = parse_number(value)?,
        "haMasterAddress" => config.ha_master_address = Some(value.to_string()),
        "syncFlushTimeout" => config.sync_flush_timeout_ms = parse_number(value)?,
        "slaveReadEnable" => config.slave_read_enable = parse_bool(value)?,
        "brokerPermission" => {
            let perm: u32 = parse_number(value)?;
            if !matches!(perm, 2 | 4 | 6) {
                return Err("expected 6 (read and write), 4 (read only) or 2 (write only)".into());
            }
            config.broker_permission = perm;
        }
        "brokerTopicEnable" => config.broker_topic_enable = parse_bool(value)?,
        "clusterTopicEnable" => config.cluster_topic_enable = parse_bool(value)?,
        "metricsExporterType" => {
            config.metrics_exporter_type = match value {
                "DISABLE" => MetricsExporter::Disable,
                "PROM" => MetricsExporter::Prom,
                "OTLP_GRPC" | "LOG" => return Err(format!("RingMQ exports metrics to Prometheus only (PROM); {value} is not built")),
                _ => return Err("expected DISABLE or PROM".to_string()),
            }
        }
        "metricsPromExporterHost" => config.metrics_prom_exporter_host = value.to_string(),
        "metricsPromExporterPort" => config.metrics_prom_exporter_port = parse_number(value)?,
        "brokerId" => config.broker_id = parse_number(value)?,
        "brokerIP1" => config.broker_ip = Some(value.to_string()),
        "brokerRole" => {
            config.role = match value {
                "ASYNC_MASTER" => BrokerRole::AsyncMaster,
                "SYNC_MASTER" => BrokerRole::SyncMaster,
                "SLAVE" => BrokerRole::Slave,
                _ => return Err("expected ASYNC_MASTER, SYNC_MASTER or SLAVE".into()),
            }
        }
        "storePathRootDir" => config.store_root = expand_home(value),
        "storePathCommitLog" => return Ok(ConfEffect::CommitLogPath(expand_home(value))),
        "flushDiskType" => {
            store.flush_mode = match value {
                "SYNC_FLUSH" => FlushMode::Sync,
                "ASYNC_FLUSH" => FlushMode::Async,
                _ => return Err("expected SYNC_FLUSH or ASYNC_FLUSH".into()),
            }
        }
        "flushIntervalCommitLog" => store.flush_interval_ms = parse_number(value)?,
        "mappedFileSizeCommitLog" => store.segment_bytes = parse_number(value)?,
        "fileReservedTime" => store.file_reserved_hours = parse_number(value)?,
        "deleteWhen" => {
            // RocketMQ deletes at any of the listed hours; RingMQ has one, the first.
            let first = value.split(';').map(str::trim).find(|h| !h.is_empty()).unwrap_or("");
            let hour: u32 = parse_number(first)?;
            if hour > 23 {
                return Err(format!("hour {hour} is not in 0..=23"));
            }
            store.delete_when_hour = hour;
        }
        "diskMaxUsedSpaceRatio" => {
            let percent: f64 = parse_number(value)?;
            if !(0.0..=100.0).contains(&percent) {
                return Err("expected a percentage in 0..=100".into());
            }
            // RocketMQ's single ratio is where cleaning is forced; keep the warn and
            // refuse watermarks on either side of it so the three stay ordered.
            let ratio = percent / 100.0;
            store.disk_force_clean_ratio = ratio;
            store.disk_warn_ratio = store.disk_warn_ratio.min(ratio);
            store.disk_refuse_ratio = store.disk_refuse_ratio.max(ratio);
        }
        "maxMessageSize" => config.max_message_bytes = parse_number(value)?,
        "autoCreateTopicEnable" => config.auto_create_topic = parse_bool(value)?,
        "defaultTopicQueueNums" => config.default_topic_queue_nums = parse_number(value)?,
        _ => return Ok(ConfEffect::Unknown),
    }
    Ok(ConfEffect::Applied)
}

impl BrokerConfig {
    /// Parses a RocketMQ `broker.conf` (Java properties: `key=value` or `key:value`,
    /// `#`/`!` comments, blank lines, whitespace trimmed) over the defaults. Does not
    /// validate. Java's "last one wins" for a repeated key is refused instead: two
    /// values for one setting are a mistake to point at, not to guess about.
    pub fn from_broker_conf_str(text: &str) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let mut first_seen: HashMap<&str, usize> = HashMap::new();
        let mut commitlog: Option<(PathBuf, usize)> = None;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                continue;
            }
            let Some(at) = trimmed.find(['=', ':']) else {
                return Err(ConfigError::Syntax { line, text: trimmed.to_string() });
            };
            let (key, value) = (trimmed[..at].trim(), trimmed[at + 1..].trim());
            if key.is_empty() {
                return Err(ConfigError::Syntax { line, text: trimmed.to_string() });
            }
            if let Some(&first_line) = first_seen.get(key) {
                return Err(ConfigError::DuplicateKey { key: key.to_string(), line, first_line });
            }
            first_seen.insert(key, line);
            let bad =
                |reason: String| ConfigError::BadValue { key: key.to_string(), line, value: value.to_string(), reason };
            match apply_conf_key(&mut config, key, value).map_err(bad)? {
                ConfEffect::Applied => {}
                ConfEffect::CommitLogPath(path) => commitlog = Some((path, line)),
                ConfEffect::Unknown => match conf_keys::classify(key, value, BROKER_CONF_KEYS) {
                    conf_keys::Unmapped::Ignored(why) => config.ignored_conf_keys.push((key.to_string(), why)),
                    conf_keys::Unmapped::Refused(reason) => return Err(ConfigError::UnknownKey { key: key.to_string(), line, reason }),
                },
            }
        }
        // Checked after every line, since storePathRootDir may come later.
        if let Some((path, line)) = commitlog {
            if !path.starts_with(&config.store_root) {
                return Err(ConfigError::CommitLogOutsideRoot { commitlog: path, root: config.store_root, line });
            }
        }
        config.derive_bounds();
        Ok(config)
    }

    /// This configuration as RocketMQ broker.conf `key=value` pairs (GET_BROKER_CONFIG):
    /// every key `from_broker_conf_str` reads, so parsing the text back gives the same
    /// settings, plus `shardCount` (RingMQ's own; read-only).
    pub fn to_broker_conf(&self) -> Vec<(&'static str, String)> {
        let s = &self.store;
        let role = match self.role {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        };
        let mut out = vec![
            ("brokerClusterName", self.cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("brokerRole", role.to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("namesrvAddr", self.namesrv_addrs.join(";")),
            ("storePathRootDir", self.store_root.display().to_string()),
            ("flushDiskType", if s.flush_mode == FlushMode::Sync { "SYNC_FLUSH" } else { "ASYNC_FLUSH" }.to_string()),
            ("flushIntervalCommitLog", s.flush_interval_ms.to_string()),
            ("mappedFileSizeCommitLog", s.segment_bytes.to_string()),
            ("fileReservedTime", s.file_reserved_hours.to_string()),
            ("deleteWhen", format!("{:02}", s.delete_when_hour)),
            ("diskMaxUsedSpaceRatio", format!("{}", (s.disk_force_clean_ratio * 100.0).round())),
            ("maxMessageSize", self.max_message_bytes.to_string()),
            ("autoCreateTopicEnable", self.auto_create_topic.to_string()),
            ("defaultTopicQueueNums", self.default_topic_queue_nums.to_string()),
            ("messageDelayLevel", self.message_delay_level.clone()),
            ("timerMaxDelaySec", self.timer_max_delay_sec.to_string()),
            ("transactionTimeOut", self.transaction_timeout_ms.to_string()),
            ("transactionCheckInterval", self.transaction_check_interval_ms.to_string()),
            ("transactionCheckMax", self.transaction_check_max.to_string()),
            ("rejectTransactionMessage", self.reject_transaction_message.to_string()),
            ("haListenPort", self.ha_listen_port.to_string()),
            ("routeMode", if self.route_mode == RouteMode::Shard { "shard" } else { "host" }.to_string()),
            ("syncFlushTimeout", self.sync_flush_timeout_ms.to_string()),
            ("slaveReadEnable", self.slave_read_enable.to_string()),
            ("brokerPermission", self.broker_permission.to_string()),
            ("brokerTopicEnable", self.broker_topic_enable.to_string()),
            ("clusterTopicEnable", self.cluster_topic_enable.to_string()),
            ("metricsExporterType", if self.metrics_exporter_type == MetricsExporter::Prom { "PROM" } else { "DISABLE" }.to_string()),
            ("metricsPromExporterHost", self.metrics_prom_exporter_host.clone()),
            ("metricsPromExporterPort", self.metrics_prom_exporter_port.to_string()),
        ];
        if let Some(ip) = &self.broker_ip {
            out.push(("brokerIP1", ip.clone()));
        }
        if let Some(addr) = &self.ha_master_address {
            out.push(("haMasterAddress", addr.clone()));
        }
        out
    }

    /// The one start-up warning for broker.conf keys accepted with no effect, grouped by
    /// why; `None` when there are none.
    pub fn ignored_keys_warning(&self) -> Option<String> {
        if self.ignored_conf_keys.is_empty() {
            return None;
        }
        let mut groups: Vec<(conf_keys::IgnoredWhy, Vec<&str>)> = Vec::new();
        for (key, why) in &self.ignored_conf_keys {
            match groups.iter_mut().find(|(w, _)| w == why) {
                Some((_, keys)) => keys.push(key),
                None => groups.push((*why, vec![key])),
            }
        }
        let parts: Vec<String> = groups.iter().map(|(why, keys)| format!("{} — {}", why.describe(), keys.join(", "))).collect();
        Some(format!("broker.conf: {} Apache RocketMQ key(s) accepted with no effect in RingMQ: {}", self.ignored_conf_keys.len(), parts.join("; ")))
    }

    /// Reads a file: `*.toml` as TOML, anything else as `broker.conf`. Does not
    /// validate. Blocking: runs once at start-up, before any executor.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let parsed = if path.extension().is_some_and(|e| e == "toml") {
            Self::from_toml_str(&text)
        } else {
            Self::from_broker_conf_str(&text)
        };
        parsed.map_err(|e| ConfigError::File { path: path.to_path_buf(), source: Box::new(e) })
    }

    fn derive_bounds(&mut self) {
        self.store.record_bytes_max = self.max_message_bytes.saturating_add(RECORD_OVERHEAD_BYTES_MAX);
    }

    /// Shards to start: `shard_count`, or one per CPU in `cpu_list`, or one per
    /// available CPU.
    pub fn effective_shard_count(&self) -> usize {
        match (self.shard_count, &self.cpu_list) {
            (0, Some(cpus)) if !cpus.is_empty() => cpus.len(),
            (0, _) => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            (count, _) => count,
        }
    }

    /// The first replication port (shard i listens on it + i). Unset, it is RocketMQ's
    /// `listen_port + 1`; in shard mode the client ports `listen_port + i` come first,
    /// so it is `listen_port + shard_count`.
    pub fn ha_port_base(&self) -> u16 {
        if self.ha_listen_port != 0 {
            self.ha_listen_port
        } else if self.route_mode == RouteMode::Shard {
            self.listen_port.saturating_add(self.effective_shard_count().min(u16::MAX as usize) as u16)
        } else {
            self.listen_port.saturating_add(1)
        }
    }

    /// The port shard `shard` accepts clients on: `listen_port` for every shard in host
    /// mode, `listen_port + shard` in shard mode.
    pub fn shard_listen_port(&self, shard: usize) -> u16 {
        match self.route_mode {
            RouteMode::Host => self.listen_port,
            RouteMode::Shard => self.listen_port.saturating_add(shard.min(u16::MAX as usize) as u16),
        }
    }
}

/// What the tests of every submodule share.
#[cfg(test)]
mod test_support {
    use super::{BrokerConfig, ConfigError};

    /// The defaults with `change` applied (and bounds derived, as parsing does).
    pub(super) fn with(change: impl FnOnce(&mut BrokerConfig)) -> BrokerConfig {
        let mut config = BrokerConfig::default();
        change(&mut config);
        config.derive_bounds();
        config
    }

    /// Asserts `got` is `expected`: that config, or an error whose text contains each
    /// of the given fragments. `label` names the input in a failure.
    pub(super) fn expect(label: &str, got: Result<BrokerConfig, ConfigError>, expected: Result<BrokerConfig, &[&str]>) {
        match (got, expected) {
            (Ok(config), Ok(want)) => assert_eq!(config, want, "{label}"),
            (Err(e), Err(fragments)) => {
                let text = e.to_string();
                for fragment in fragments {
                    assert!(text.contains(fragment), "{label}: error {text:?} lacks {fragment:?}");
                }
            }
            (got, want) => panic!("{label}: got {got:?}, expected {want:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::test_support::{expect, with};

    /// Parses `input`; expects that config, or an error whose text contains each of
    /// the given fragments.
    fn check_runtime(body: &str, expected: Result<&[(&str, &str)], &str>) {
        let got = parse_runtime_update(body);
        match expected {
            Ok(pairs) => {
                let want: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                assert_eq!(got, Ok(want), "{body:?}");
            }
            Err(part) => {
                let e = got.expect_err(body).to_string();
                assert!(e.contains(part), "{body:?}: {e}");
            }
        }
    }

    #[test]
    fn runtime_updates_take_runtime_keys_only() {
        check_runtime("brokerPermission=4\n", Ok(&[("brokerPermission", "4")]));
        check_runtime("# comment\nslaveReadEnable = true\ntransactionCheckMax:3\n", Ok(&[("slaveReadEnable", "true"), ("transactionCheckMax", "3")]));
        check_runtime("", Err("no key=value"));
        check_runtime("brokerPermission", Err("not key=value"));
        check_runtime("brokerPermission=5", Err("brokerPermission=5: expected 6"));
        check_runtime("syncFlushTimeout=soon", Err("not a valid number"));
        check_runtime("fileReservedTime=48\nbrokerPermission=4", Err("cannot change `fileReservedTime` at runtime"));
        check_runtime("fileReservedTme=48", Err("`fileReservedTme` (not a RingMQ key)"));
        let next = BrokerConfig::default().with_runtime_update(&[("brokerPermission".into(), "2".into()), ("transactionTimeOut".into(), "9000".into())]);
        assert_eq!((next.broker_permission, next.transaction_timeout_ms), (2, 9000));
        let conf: String = next.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert!(conf.contains("brokerPermission=2\n") && conf.contains("brokerTopicEnable=true\n"), "{conf}");
    }

    /// Parses `text` as a broker.conf file; expects that config, or an error whose text
    /// contains each fragment.
    fn check(text: &str, expected: Result<BrokerConfig, &[&str]>) {
        expect(&format!("conf {text:?}"), BrokerConfig::from_broker_conf_str(text), expected);
    }

    #[test]
    fn defaults() {
        let c = BrokerConfig::default();
        assert_eq!(c.listen_port, 10911);
        assert_eq!((c.cluster_name.as_str(), c.broker_name.as_str(), c.broker_id), ("DefaultCluster", "broker-a", 0));
        assert_eq!(c.role, BrokerRole::AsyncMaster);
        assert!(c.store_root.ends_with("ringmq/store"));
        assert_eq!((c.shard_count, c.cpu_list.clone(), c.auto_create_topic), (0, None, false));
        assert_eq!((c.default_topic_queue_nums, c.max_message_bytes), (8, 4 << 20));
        assert_eq!(
            (c.register_interval_ms, c.idle_connection_timeout_ms),
            (30_000, 120_000)
        );
        assert_eq!((c.pull_suspend_max_ms, c.connections_per_shard_max, c.forward_batch_max), (30_000, 10_000, 256));
        assert_eq!(c.store, StoreConfig::default(), "4 MiB messages give the store's default record bound");
        assert!(c.effective_shard_count() >= 1);
        c.validate().unwrap();
        check("", Ok(BrokerConfig::default()));
        check("# only a comment\n\n   \n! another", Ok(BrokerConfig::default()));
    }

    const EVERY_CONF_KEY: &str = "
        # RocketMQ broker.conf
        routeMode = shard
        brokerClusterName = C
        brokerName=broker-b
        brokerId = 1
        brokerRole = SLAVE
        listenPort=20911
        namesrvAddr=n1:9876;n2:9876
        brokerIP1 = 10.0.0.8
        storePathRootDir=/data/rocketmq/store
        storePathCommitLog=/data/rocketmq/store/commitlog
        flushDiskType = SYNC_FLUSH
        flushIntervalCommitLog=200
        mappedFileSizeCommitLog=268435456
        fileReservedTime=120
        deleteWhen=04;05
        diskMaxUsedSpaceRatio=88
        maxMessageSize=2097152
        autoCreateTopicEnable=TRUE
        defaultTopicQueueNums=4
        messageDelayLevel=1s 2s 1m 2h
        timerMaxDelaySec=86400
        transactionTimeOut=3000
        transactionCheckInterval=5000
        transactionCheckMax=3
        rejectTransactionMessage=true
        haListenPort=20912
        haMasterAddress=10.0.0.7:10912
        syncFlushTimeout=2000
        slaveReadEnable=true
        metricsExporterType=PROM
        metricsPromExporterHost=127.0.0.1
        metricsPromExporterPort=15557
        brokerPermission=4
        brokerTopicEnable=false
        clusterTopicEnable=false
    ";

    #[test]
    fn conf_every_key() {
        let expected = with(|c| {
            c.cluster_name = "C".into();
            c.broker_name = "broker-b".into();
            c.broker_id = 1;
            c.role = BrokerRole::Slave;
            c.listen_port = 20911;
            c.namesrv_addrs = vec!["n1:9876".into(), "n2:9876".into()];
            c.broker_ip = Some("10.0.0.8".into());
            c.store_root = "/data/rocketmq/store".into();
            c.store.flush_mode = FlushMode::Sync;
            c.store.flush_interval_ms = 200;
            c.store.segment_bytes = 256 << 20;
            c.store.file_reserved_hours = 120;
            c.store.delete_when_hour = 4;
            c.store.disk_force_clean_ratio = 0.88;
            c.store.disk_refuse_ratio = 0.90;
            c.max_message_bytes = 2 << 20;
            c.auto_create_topic = true;
            c.default_topic_queue_nums = 4;
            c.message_delay_level = "1s 2s 1m 2h".into();
            c.timer_max_delay_sec = 86_400;
            c.transaction_timeout_ms = 3_000;
            c.transaction_check_interval_ms = 5_000;
            c.transaction_check_max = 3;
            c.reject_transaction_message = true;
            c.ha_listen_port = 20912;
            c.ha_master_address = Some("10.0.0.7:10912".into());
            c.sync_flush_timeout_ms = 2_000;
            c.slave_read_enable = true;
            c.metrics_exporter_type = MetricsExporter::Prom;
            c.metrics_prom_exporter_host = "127.0.0.1".into();
            c.metrics_prom_exporter_port = 15557;
            c.broker_permission = 4;
            c.broker_topic_enable = false;
            c.cluster_topic_enable = false;
            c.route_mode = RouteMode::Shard;
        });
        expected.validate().unwrap();
        check(EVERY_CONF_KEY, Ok(expected));
        // Every documented key appears in the fixture.
        for key in BROKER_CONF_KEYS {
            assert!(
                EVERY_CONF_KEY.contains(&format!("{key}=")) || EVERY_CONF_KEY.contains(&format!("{key} =")),
                "{key}"
            );
        }
    }

    #[test]
    fn conf_cases() {
        check("listenPort:1234", Ok(with(|c| c.listen_port = 1234)));
        check("  listenPort  =  1234  \r\n", Ok(with(|c| c.listen_port = 1234)));
        check("brokerRole=SYNC_MASTER", Ok(with(|c| c.role = BrokerRole::SyncMaster)));
        check("brokerRole=ASYNC_MASTER", Ok(BrokerConfig::default()));
        check("flushDiskType=ASYNC_FLUSH", Ok(BrokerConfig::default()));
        check("deleteWhen=04", Ok(BrokerConfig::default()));
        check("deleteWhen=23", Ok(with(|c| c.store.delete_when_hour = 23)));
        check("deleteWhen= ; 7", Ok(with(|c| c.store.delete_when_hour = 7)));
        check("autoCreateTopicEnable=false", Ok(BrokerConfig::default()));
        check("namesrvAddr=", Ok(BrokerConfig::default()));
        check("namesrvAddr=127.0.0.1:9876", Ok(with(|c| c.namesrv_addrs = vec!["127.0.0.1:9876".into()])));
        check(
            "diskMaxUsedSpaceRatio=60",
            Ok(with(|c| {
                c.store.disk_force_clean_ratio = 0.6;
                c.store.disk_warn_ratio = 0.6;
            })),
        );
        check(
            "diskMaxUsedSpaceRatio=95",
            Ok(with(|c| {
                c.store.disk_force_clean_ratio = 0.95;
                c.store.disk_refuse_ratio = 0.95;
            })),
        );
        // The CommitLog path may come before the root; it must be under it.
        check("storePathCommitLog=/r/commitlog\nstorePathRootDir=/r", Ok(with(|c| c.store_root = "/r".into())));
        check(
            "storePathRootDir=/r\nstorePathCommitLog=/r/deeper/commitlog",
            Ok(with(|c| c.store_root = "/r".into())),
        );
        check("maxMessageSize=1024", Ok(with(|c| c.max_message_bytes = 1024)));
        // Apache keys with no meaning here are accepted (and listed); others refused.
        check("brokerNmae=a", Err(&["line 1", "did you mean `brokerName`?"]));
        check("listenPort=1\naclEnable=true", Err(&["line 2", "`aclEnable` is an Apache RocketMQ setting RingMQ does not implement"]));
        check(
            "sendMessageThreadPoolNums=16\naclEnable=false",
            Ok(with(|c| {
                c.ignored_conf_keys = vec![
                    ("sendMessageThreadPoolNums".into(), conf_keys::IgnoredWhy::ThreadPool),
                    ("aclEnable".into(), conf_keys::IgnoredWhy::FeatureOff),
                ]
            })),
        );
    }

    #[test]
    fn broker_conf_text_parses_back_to_the_same_settings() {
        let original = BrokerConfig::from_broker_conf_str(EVERY_CONF_KEY).unwrap();
        let text: String = original.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let again = BrokerConfig::from_broker_conf_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(again, original, "{text}");
        // Every key it writes is one broker.conf reads.
        for (k, _) in original.to_broker_conf() {
            assert!(BROKER_CONF_KEYS.contains(&k), "{k}");
        }
        let defaults = BrokerConfig::default();
        let text: String = defaults.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert_eq!(BrokerConfig::from_broker_conf_str(&text).unwrap(), defaults, "{text}");
    }

    /// The files Apache RocketMQ ships in `distribution/conf` (8fc57f1468), as written
    /// there, and a long production-style file: each parses, and a master's validates.
    #[test]
    fn apache_rocketmq_shipped_configs_start_ringmq() {
        let shipped = |name: &str, id: u64, role: &str| {
            format!(
                "# Licensed to the Apache Software Foundation (ASF) ...\n\nbrokerClusterName=DefaultCluster\nbrokerName={name}\nbrokerId={id}\ndeleteWhen=04\nfileReservedTime=48\nbrokerRole={role}\nflushDiskType=ASYNC_FLUSH\n"
            )
        };
        let files = [
            ("broker.conf", "brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\ndeleteWhen = 04\nfileReservedTime = 48\nbrokerRole = ASYNC_MASTER\nflushDiskType = ASYNC_FLUSH\n".to_string()),
            ("2m-2s-sync/broker-a.properties", shipped("broker-a", 0, "SYNC_MASTER")),
            ("2m-2s-sync/broker-a-s.properties", shipped("broker-a", 1, "SLAVE")),
            ("2m-2s-async/broker-b.properties", shipped("broker-b", 0, "ASYNC_MASTER")),
            ("2m-2s-async/broker-b-s.properties", shipped("broker-b", 1, "SLAVE")),
            ("2m-noslave/broker-trace.properties", shipped("broker-trace", 0, "ASYNC_MASTER")),
        ];
        for (name, text) in files {
            let mut c = BrokerConfig::from_broker_conf_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((c.cluster_name.as_str(), c.store.file_reserved_hours, c.store.delete_when_hour), ("DefaultCluster", 48, 4), "{name}");
            assert!(c.ignored_conf_keys.is_empty(), "{name}");
            // A slave needs its master: these files leave that to -n / namesrvAddr.
            c.namesrv_addrs = vec!["127.0.0.1:9876".into()];
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let production = "brokerClusterName=prod\nbrokerName=broker-a\nbrokerId=0\nbrokerIP1=10.0.0.5\nlistenPort=10911\n\
            namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\nstorePathRootDir=/data/rocketmq/store\nstorePathCommitLog=/data/rocketmq/store/commitlog\n\
            brokerRole=SYNC_MASTER\nflushDiskType=ASYNC_FLUSH\nmappedFileSizeCommitLog=1073741824\nmappedFileSizeConsumeQueue=6000000\n\
            deleteWhen=04\nfileReservedTime=72\ndiskMaxUsedSpaceRatio=88\nmaxMessageSize=4194304\nautoCreateTopicEnable=false\n\
            sendMessageThreadPoolNums=16\npullMessageThreadPoolNums=32\nqueryMessageThreadPoolNums=8\n\
            adminBrokerThreadPoolNums=16\nclientManageThreadPoolNums=32\nconsumerManageThreadPoolNums=32\nsendThreadPoolQueueCapacity=100000\n\
            pullThreadPoolQueueCapacity=100000\nwaitTimeMillsInSendQueue=400\nuseReentrantLockWhenPutMessage=true\ntransientStorePoolEnable=false\n\
            warmMapedFileEnable=false\nosPageCacheBusyTimeOutMills=1000\nflushCommitLogLeastPages=4\nflushConsumeQueueLeastPages=2\n\
            serverWorkerThreads=8\nserverSelectorThreads=3\nserverSocketSndBufSize=131072\nserverSocketRcvBufSize=131072\n\
            serverPooledByteBufAllocatorEnable=true\nuseEpollNativeSelector=true\nflushConsumerOffsetInterval=5000\naclEnable=false\n\
            traceTopicEnable=false\nslaveReadEnable=true\nsyncFlushTimeout=5000\nhaListenPort=10912\n";
        let c = BrokerConfig::from_broker_conf_str(production).unwrap_or_else(|e| panic!("production config: {e}"));
        // A semantic RingMQ does not enforce is refused, not dropped: groups are not
        // required to exist before use here.
        let e = BrokerConfig::from_broker_conf_str(&format!("{production}autoCreateSubscriptionGroup=false\n")).expect_err("refused");
        assert!(e.to_string().contains("`autoCreateSubscriptionGroup` is an Apache RocketMQ setting RingMQ does not implement"), "{e}");
        assert_eq!(c.role, BrokerRole::SyncMaster);
        assert!(c.slave_read_enable);
        let warning = c.ignored_keys_warning().expect("ignored keys are listed");
        for key in ["sendMessageThreadPoolNums", "useReentrantLockWhenPutMessage", "serverSocketSndBufSize", "flushConsumerOffsetInterval", "aclEnable"] {
            assert!(warning.contains(key), "{key} not in: {warning}");
        }
        assert!(warning.contains("one pinned thread per core"), "{warning}");
        c.validate().unwrap_or_else(|e| panic!("production config: {e}"));
    }

    #[test]
    fn conf_errors() {
        check("listenPort=1\nstorePathIndex=/x", Err(&["line 2", "unknown key `storePathIndex`", "listenPort"]));
        check("\n\n# c\nbrokername=b", Err(&["line 4", "`brokername`"]));
        check("listenPort", Err(&["line 1", "key=value", "listenPort"]));
        check("=5", Err(&["line 1", "key=value"]));
        check("brokerName=a\nbrokerName=b", Err(&["line 2", "brokerName", "first on line 1"]));
        check("listenPort=abc", Err(&["line 1", "listenPort=abc", "number"]));
        check("listenPort=70000", Err(&["listenPort", "number"]));
        check("brokerId=-1", Err(&["brokerId"]));
        check("brokerRole=MASTER", Err(&["brokerRole", "SYNC_MASTER"]));
        check("flushDiskType=sync", Err(&["flushDiskType", "SYNC_FLUSH"]));
        check("deleteWhen=24", Err(&["deleteWhen", "0..=23"]));
        check("deleteWhen=4am", Err(&["deleteWhen"]));
        check("deleteWhen=", Err(&["deleteWhen"]));
        check("diskMaxUsedSpaceRatio=101", Err(&["diskMaxUsedSpaceRatio", "percentage"]));
        check("autoCreateTopicEnable=yes", Err(&["autoCreateTopicEnable", "true or false"]));
        check("mappedFileSizeCommitLog=1G", Err(&["mappedFileSizeCommitLog"]));
        check("fileReservedTime=-3", Err(&["fileReservedTime"]));
        check("maxMessageSize=big", Err(&["maxMessageSize"]));
        check("defaultTopicQueueNums=x", Err(&["defaultTopicQueueNums"]));
        check("flushIntervalCommitLog=0.5", Err(&["flushIntervalCommitLog"]));
        check(
            "storePathRootDir=/r\nstorePathCommitLog=/elsewhere/commitlog",
            Err(&["line 2", "/elsewhere/commitlog", "not under", "/r", "shard-<i>/commitlog"]),
        );
        check("storePathRootDir=/r\nstorePathCommitLog=/rx/commitlog", Err(&["not under"]));
    }

    #[test]
    fn effective_shard_count_cases() {
        let cases =
            [(0, None, None), (0, Some(vec![3, 4, 5]), Some(3)), (2, Some(vec![3, 4, 5]), Some(2)), (7, None, Some(7))];
        for (shard_count, cpu_list, expected) in cases {
            let config = with(|c| (c.shard_count, c.cpu_list) = (shard_count, cpu_list.clone()));
            let want = expected.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
            assert_eq!(config.effective_shard_count(), want, "{shard_count} {cpu_list:?}");
        }
    }
}
