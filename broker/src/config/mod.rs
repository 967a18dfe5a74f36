//! Broker configuration: every setting of a broker process (`BrokerConfig`, the model
//! the rest of the broker reads), where it comes from, and the checks it must pass
//! before the broker starts.
//!
//! Sources, each overriding the one before: built-in defaults ← a configuration file ←
//! command-line flags ([`BrokerConfig::from_args`]). A file is either RingMQ's TOML
//! (snake_case keys, a `[store]` table; see `tuning/profiles/`) or RocketMQ's
//! `broker.conf` (Java properties with RocketMQ's key names), so an existing RocketMQ
//! deployment can start RingMQ with the file it has.
//!
//! Where each concern lives:
//! - this file: `BrokerConfig`, its enums and defaults, values derived from it (shard
//!   count, ports), `load` (a file by its extension), `ConfigError`;
//! - `toml.rs`: the TOML file model (`[store]` as `StoreSection`) and its deserialisers;
//! - `broker_conf.rs`: the `broker.conf` key map, read and written back;
//!   `conf_keys.rs`: what an Apache RocketMQ key RingMQ does not map means here;
//! - `cli.rs`: command-line flags and how they override the file;
//! - `validate.rs`: the checks and their named bounds;
//! - `runtime_update.rs`: keys UPDATE_BROKER_CONFIG may change on a running broker;
//! - `ip.rs`: the advertised and listen addresses (IP discovery).
//!
//! Invariant: an unknown key is an error that names it (and, in `broker.conf`, its
//! line): a misspelt setting must never silently fall back to its default.
//! Invariant: the longest record the store holds (`store.record_bytes_limit()`, the
//! bound its recovery, scrub and replication check records against) comes from the
//! store's geometry only: every constructor sets `store.record_bytes_max` to
//! [`RECORD_BYTES_LIMIT`], which `segment_bytes - 8` and `dirty_bytes_max` bound further.
//! Never from `max_message_bytes`: that changes at runtime (UPDATE_BROKER_CONFIG) and
//! across restarts, and records written under an earlier, larger value must still read
//! as records. `validate` checks that a message of `max_message_bytes` (plus
//! [`RECORD_OVERHEAD_BYTES_MAX`] for the record's header, topic and properties) fits;
//! the send path refuses longer bodies.
//! Invariant: a config returned by `from_args` passed `validate`.

use crate::store::config::{FlushMode, StoreConfig, KIB};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub mod conf_keys;
mod broker_conf;
mod cli;
mod ip;
mod runtime_update;
mod toml;
mod validate;

pub use broker_conf::BROKER_CONF_KEYS;
pub use cli::BrokerArgs;
pub use runtime_update::{parse_runtime_update, runtime_conf_keys, start_up_reason, RuntimeUpdateError, START_UP_CONF_KEYS};
pub use validate::{MAX_MESSAGE_BYTES_LIMIT, SHORT_POLLING_TIME_MS_MAX, SPIN_BEFORE_PARK_US_MAX};

pub const DEFAULT_LISTEN_PORT: u16 = 10911;
/// Apache's ACL file name (`conf/plain_acl.yml`).
pub const PLAIN_ACL_FILE_NAME: &str = "plain_acl.yml";
/// Bytes a stored record may add to its message body: the fixed fields (~100 bytes),
/// the topic (≤ 127) and the properties (an i16 length, so < 32 KiB), rounded up.
pub const RECORD_OVERHEAD_BYTES_MAX: u64 = 64 * KIB;
/// Longest record any configuration accepts: the largest `max_message_bytes`
/// ([`MAX_MESSAGE_BYTES_LIMIT`], one remoting frame) with its record overhead.
pub const RECORD_BYTES_LIMIT: u64 = MAX_MESSAGE_BYTES_LIMIT + RECORD_OVERHEAD_BYTES_MAX;
/// Apache RocketMQ's `shortPollingTimeMills` default: how long a pull is held when
/// `longPollingEnable` is false.
pub const SHORT_POLLING_TIME_MS_DEFAULT: u64 = 1000;

/// RocketMQ's `PermName.PERM_READ | PERM_WRITE`.
pub const PERM_READ_WRITE: u32 = 6;
/// RocketMQ's `PermName.PERM_READ`.
pub const PERM_READ: u32 = 4;
/// RocketMQ's `PermName.PERM_WRITE`.
pub const PERM_WRITE: u32 = 2;

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
/// Apache's `controllerHeartBeatTimeoutMills` default (`BrokerConfig.java`).
pub const CONTROLLER_HEARTBEAT_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// The broker's TLS: what its ports accept (`tls.server.*`) and how it connects
/// (`useTLS` / `tls.enable`, `tls.client.*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    pub server: ringmq_client::net::tls::TlsServerSettings,
    pub client: ringmq_client::net::tls::TlsClientSettings,
}

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

/// Most bytes of records in one pull response (the bound `pull_*_bytes_max` settings
/// may lower, never raise).
pub const PULL_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most messages one pull returns (the bound `pull_*_messages_max` may lower).
pub const PULL_MESSAGES_MAX: usize = 1024;

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
    /// RocketMQ's `longPollingEnable` (on by default): a pull that finds nothing is held
    /// up to the client's `suspendTimeoutMillis` (at most `pull_suspend_max_ms`). Off:
    /// at most `short_polling_time_ms` (Apache's short polling; RingMQ still answers at
    /// once when a message arrives meanwhile).
    pub long_polling_enable: bool,
    /// RocketMQ's `shortPollingTimeMills`: how long a pull is held while
    /// `long_polling_enable` is off (never longer than the client asked).
    pub short_polling_time_ms: u64,
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
    /// The replication secret (`haAuthSecret`, RingMQ's key: Apache RocketMQ's HA has
    /// none), the same on a master and its slaves: a slave proves it holds it before its
    /// master sends anything of the log, and the master proves it back (README,
    /// Replication). Unset or empty: replication is not authenticated. Never written
    /// back (GET_BROKER_CONFIG): it is a secret.
    pub ha_auth_secret: Option<String>,
    /// Controller mode (issue 27, docs/design/controller.md §3.5): master or slave is
    /// each shard's role cell (`Shard::set_role`), set by the controller, and `role`
    /// only says whether a master waits for a slave (`SyncMaster`) or not. Off: `role`
    /// is the static role, exactly as before (`enableControllerMode`).
    #[serde(alias = "enable_controller_mode")]
    pub controller_mode: bool,
    /// The controllers (`controllerAddr`, `;`-separated in broker.conf): every one gets
    /// heartbeats; the leader is found with CONTROLLER_GET_METADATA_INFO.
    #[serde(deserialize_with = "self::toml::de_namesrv_addrs")]
    pub controller_addrs: Vec<String>,
    /// `controllerHeartBeatTimeoutMills`: the controller takes the broker for dead after
    /// this long without a heartbeat; also the master lease's length (§3.8).
    pub controller_heartbeat_timeout_ms: u64,
    /// `brokerHeartbeatInterval`: heartbeats (904) to every controller.
    pub broker_heartbeat_interval_ms: u64,
    /// `syncBrokerMetadataPeriod`: CONTROLLER_GET_REPLICA_INFO (1004) cadence.
    pub sync_broker_metadata_period_ms: u64,
    /// `syncControllerMetadataPeriod`: who leads the controllers, re-read this often.
    pub sync_controller_metadata_period_ms: u64,
    /// `checkSyncStateSetPeriod`: a master's SyncStateSet review cadence.
    pub check_sync_state_set_period_ms: u64,
    /// `allAckInSyncStateSet`: a SYNC send waits for every SyncStateSet member (§3.7).
    pub all_ack_in_sync_state_set: bool,
    /// `minInSyncReplicas`: a master acknowledges only with at least this many members.
    pub min_in_sync_replicas: u32,
    /// `haMaxTimeSlaveNotCatchup`: a member behind this long leaves the SyncStateSet.
    pub ha_max_time_slave_not_catchup_ms: u64,
    /// `brokerElectionPriority`: lower is preferred when the controller elects.
    pub broker_election_priority: i32,
    /// `masterLeaseEnable` (RingMQ): a master acknowledges only within the lease its
    /// last granted heartbeat gave it (§3.8); false keeps Apache's behaviour.
    pub master_lease_enable: bool,
    /// `storePathBrokerIdentity`: the identity files' directory (default: the store
    /// root), where `brokerIdentity` and `brokerIdentity-temp` live.
    pub store_path_broker_identity: Option<PathBuf>,
    /// How long a SYNC_MASTER send waits for a slave's confirmation before answering
    /// FLUSH_SLAVE_TIMEOUT (RocketMQ's `syncFlushTimeout`, ms).
    pub sync_flush_timeout_ms: u64,
    /// What a SYNC_MASTER waits for: the slave `received` the bytes (appended to its
    /// log, RocketMQ's meaning) or made them `durable` (fdatasync on the slave).
    pub ha_sync_ack: crate::ha::SyncAck,
    /// Consumers may read from this slave (RocketMQ's `slaveReadEnable`).
    pub slave_read_enable: bool,
    /// SQL92 property filters (`MessageSelector.bySql`) are served (RocketMQ's
    /// `enablePropertyFilter`, off by default as in Apache): when off, a SQL92
    /// subscription is refused at CHECK_CLIENT_CONFIG and at every pull with Apache's
    /// "The broker does not support consumer to filter message by SQL92".
    pub enable_property_filter: bool,
    /// RocketMQ's `traceOn`: what every send answer's `TRACE_ON` field says (a client
    /// with message tracing on sends its traces only when it is true).
    pub trace_on: bool,
    /// RocketMQ's `autoCreateSubscriptionGroup` (on by default, as Apache): a consumer
    /// group the broker does not know is created with Java's defaults at its first
    /// heartbeat, pull or send-back. Off: such a group's pulls and sends back are
    /// answered SUBSCRIPTION_GROUP_NOT_EXIST until an operator creates it.
    pub auto_create_subscription_group: bool,
    /// RocketMQ's `maxTransferCountOnMessageInMemory` / `maxTransferBytesOnMessageInMemory`:
    /// the most messages and body bytes one pull returns when it reads the hot tail
    /// (within `store.tail_cache_bytes` of the log's end). RingMQ's defaults (1024,
    /// 4 MiB) are its own pull bounds, larger than Apache's 32 / 256 KiB.
    pub pull_hot_messages_max: usize,
    pub pull_hot_bytes_max: usize,
    /// RocketMQ's `maxTransferCountOnMessageInDisk` / `maxTransferBytesOnMessageInDisk`:
    /// the same for a pull that starts further back (a cold O_DIRECT read).
    pub pull_cold_messages_max: usize,
    pub pull_cold_bytes_max: usize,
    /// RocketMQ's `traceTopicEnable` (off by default, as in Apache): the broker creates
    /// `msg_trace_topic_name` at start (1 read and 1 write queue, read-write, Java's
    /// `TopicConfigManager`), so traces clients send there are stored and indexed by
    /// their keys (the traced messages' ids).
    pub trace_topic_enable: bool,
    /// RocketMQ's `msgTraceTopicName`: the trace topic `trace_topic_enable` creates.
    pub msg_trace_topic_name: String,
    /// RocketMQ's `storeReplyMessageEnable` (default true, as Apache): a reply
    /// (SEND_REPLY_MESSAGE) is also stored in `<cluster>_REPLY_TOPIC`, besides being
    /// pushed to its requester; false: pushed only.
    pub store_reply_message_enable: bool,
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
    /// Address the Prometheus endpoint binds (`metricsPromExporterHost`; empty =
    /// 127.0.0.1, this host only: Apache binds every interface, but an open scrape
    /// endpoint names every topic and group, so exposing it is the operator's choice).
    pub metrics_prom_exporter_host: String,
    /// Its port (`metricsPromExporterPort`, 5557; 0 picks a free one, logged).
    pub metrics_prom_exporter_port: u16,
    /// `user:password` every scrape must send as HTTP basic auth
    /// (`metricsPromExporterBasicAuth`, RingMQ's key: Apache's exporter has no
    /// authentication). Never written back (GET_BROKER_CONFIG): it holds a secret.
    pub metrics_prom_exporter_basic_auth: Option<String>,
    /// RocketMQ's `aclEnable` (off by default, as Apache): every client request is
    /// authenticated and authorized by the plain ACL of `plain_acl.yml` (`acl/`,
    /// `shard/acl.rs`), as Apache 4.x's `PlainAccessValidator`.
    pub acl_enable: bool,
    /// Where `plain_acl.yml` is (`plainAclFile`, RingMQ's key: Apache takes
    /// `$ROCKETMQ_HOME/conf/plain_acl.yml`, or `-Drocketmq.acl.plain.file`). Unset: next
    /// to the `--config` file, else `<store root>/config/plain_acl.yml`
    /// ([`BrokerConfig::plain_acl_path`]).
    pub plain_acl_file: Option<PathBuf>,
    /// RocketMQ 5's `innerClientAuthenticationCredentials`: `{"accessKey":"..",
    /// "secretKey":".."}`, the credentials the broker signs its own requests with
    /// (registration with NameServers), as Apache's `BrokerOuterAPI`. Never written
    /// back (GET_BROKER_CONFIG): it holds a secret.
    pub inner_client_authentication_credentials: Option<String>,
    /// TLS (Apache's `tls.*` keys; TOML `[tls.server]` / `[tls.client]`): the client and
    /// replication ports (`server`), the broker's own connections to NameServers and a
    /// slave's to its master (`client`). See `ringmq_client::net::tls`.
    pub tls: TlsSettings,
    /// RocketMQ 5's `authenticationEnabled` (off by default, as Apache): every client
    /// request proves its user (`AccessKey` = username, signed with the password) against
    /// the users the AUTH_* codes manage (`ringmq_acl::auth`, `shard/auth.rs`). Not with
    /// `aclEnable` (refused at start-up: one access-control generation at a time).
    pub authentication_enabled: bool,
    /// RocketMQ 5's `authorizationEnabled`: every client request is checked against its
    /// user's ACL (Super users pass).
    pub authorization_enabled: bool,
    /// `authenticationWhitelist`: request codes exempt from authentication, comma-separated.
    pub authentication_whitelist: Option<String>,
    /// `authorizationWhitelist`: request codes exempt from authorization, comma-separated.
    pub authorization_whitelist: Option<String>,
    /// `initAuthenticationUser`: `{"username":"..","password":".."}`, a Super user created
    /// at start-up when no user of that name exists (master only: a slave follows its
    /// master's users). Never written back (GET_BROKER_CONFIG): it holds a secret.
    pub init_authentication_user: Option<String>,
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
            long_polling_enable: true,
            short_polling_time_ms: SHORT_POLLING_TIME_MS_DEFAULT,
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
            controller_mode: false,
            controller_addrs: Vec::new(),
            controller_heartbeat_timeout_ms: CONTROLLER_HEARTBEAT_TIMEOUT_MS_DEFAULT,
            broker_heartbeat_interval_ms: 1_000,
            sync_broker_metadata_period_ms: 5_000,
            sync_controller_metadata_period_ms: 10_000,
            check_sync_state_set_period_ms: 5_000,
            all_ack_in_sync_state_set: false,
            min_in_sync_replicas: 1,
            ha_max_time_slave_not_catchup_ms: 15_000,
            broker_election_priority: i32::MAX,
            master_lease_enable: true,
            store_path_broker_identity: None,
            ha_auth_secret: None,
            sync_flush_timeout_ms: crate::ha::SYNC_FLUSH_TIMEOUT_MS_DEFAULT,
            ha_sync_ack: crate::ha::SyncAck::Received,
            slave_read_enable: false,
            enable_property_filter: false,
            trace_on: true,
            auto_create_subscription_group: true,
            pull_hot_messages_max: PULL_MESSAGES_MAX,
            pull_hot_bytes_max: PULL_BODY_BYTES_MAX,
            pull_cold_messages_max: PULL_MESSAGES_MAX,
            pull_cold_bytes_max: PULL_BODY_BYTES_MAX,
            trace_topic_enable: false,
            msg_trace_topic_name: crate::meta::topics::TRACE_TOPIC.to_string(),
            store_reply_message_enable: true,
            broker_permission: PERM_READ_WRITE,
            broker_topic_enable: true,
            cluster_topic_enable: true,
            metrics_exporter_type: MetricsExporter::Disable,
            metrics_prom_exporter_host: String::new(),
            metrics_prom_exporter_port: METRICS_PROM_PORT_DEFAULT,
            metrics_prom_exporter_basic_auth: None,
            acl_enable: false,
            plain_acl_file: None,
            inner_client_authentication_credentials: None,
            tls: TlsSettings::default(),
            authentication_enabled: false,
            authorization_enabled: false,
            authentication_whitelist: None,
            authorization_whitelist: None,
            init_authentication_user: None,
            ignored_conf_keys: Vec::new(),
            store: StoreConfig::default(),
        };
        config.derive_bounds();
        config
    }
}

impl BrokerConfig {
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

    /// The `plain_acl.yml` the ACL reads: `plain_acl_file`, or `<store root>/config/`.
    pub fn plain_acl_path(&self) -> PathBuf {
        self.plain_acl_file.clone().unwrap_or_else(|| self.store_root.join("config").join(PLAIN_ACL_FILE_NAME))
    }

    /// The replication secret's bytes; `None` when replication is not authenticated.
    pub fn ha_auth_secret(&self) -> Option<&[u8]> {
        self.ha_auth_secret.as_deref().filter(|s| !s.is_empty()).map(str::as_bytes)
    }

    /// The Prometheus scrape credentials (`metricsPromExporterBasicAuth`); `Err` says
    /// why the value is refused (without echoing it: it holds a secret).
    pub fn metrics_basic_auth(&self) -> Result<Option<metrics_export::BasicAuth>, String> {
        let Some(text) = self.metrics_prom_exporter_basic_auth.as_deref().filter(|t| !t.trim().is_empty()) else { return Ok(None) };
        metrics_export::BasicAuth::parse(text.trim()).map(Some).map_err(|e| format!("metricsPromExporterBasicAuth (metrics_prom_exporter_basic_auth): {e}"))
    }

    /// The broker's own request credentials (`innerClientAuthenticationCredentials`);
    /// `Err` says why the JSON is refused.
    pub fn inner_credentials(&self) -> Result<Option<ringmq_client::remoting::acl::Credentials>, String> {
        let Some(text) = self.inner_client_authentication_credentials.as_deref().filter(|t| !t.trim().is_empty()) else { return Ok(None) };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Keys {
            access_key: Option<String>,
            secret_key: Option<String>,
            security_token: Option<String>,
        }
        let keys: Keys = serde_json::from_str(text).map_err(|e| format!("expected {{\"accessKey\":\"..\",\"secretKey\":\"..\"}}: {e}"))?;
        match (keys.access_key.filter(|k| !k.is_empty()), keys.secret_key.filter(|k| !k.is_empty())) {
            (Some(access_key), Some(secret_key)) => Ok(Some(ringmq_client::remoting::acl::Credentials { access_key, secret_key, security_token: keys.security_token })),
            // Apache's `newAclRPCHook`: a blank key means no signing.
            _ => Ok(None),
        }
    }

    /// `initAuthenticationUser` as (username, password); `Err` says why it is refused.
    pub fn init_auth_user(&self) -> Result<Option<(String, String)>, String> {
        let Some(text) = self.init_authentication_user.as_deref().filter(|t| !t.trim().is_empty()) else { return Ok(None) };
        #[derive(Deserialize)]
        struct InitUser {
            username: Option<String>,
            password: Option<String>,
        }
        let user: InitUser = serde_json::from_str(text).map_err(|e| format!("expected {{\"username\":\"..\",\"password\":\"..\"}}: {e}"))?;
        let username = user.username.unwrap_or_default();
        let password = user.password.unwrap_or_default();
        ringmq_acl::auth::model::check_username(&username).map_err(|e| e.to_string())?;
        ringmq_acl::auth::model::check_password(&password).map_err(|e| e.to_string())?;
        Ok(Some((username, password)))
    }

    /// RocketMQ 5's decision switches as this configuration sets them; `Err` names the
    /// whitelist that does not parse.
    pub fn auth_settings(&self) -> Result<ringmq_acl::auth::AuthSettings, String> {
        let list = |text: &Option<String>, key: &str| ringmq_acl::auth::parse_whitelist(text.as_deref().unwrap_or_default()).map_err(|e| format!("{key}: {e}"));
        Ok(ringmq_acl::auth::AuthSettings {
            authentication_enabled: self.authentication_enabled,
            authorization_enabled: self.authorization_enabled,
            authentication_whitelist: list(&self.authentication_whitelist, "authenticationWhitelist")?,
            authorization_whitelist: list(&self.authorization_whitelist, "authorizationWhitelist")?,
            cluster_name: self.cluster_name.clone(),
        })
    }

    /// The store's record bound: [`RECORD_BYTES_LIMIT`], which its geometry bounds
    /// further (`StoreConfig::record_bytes_limit`), so a configuration built by hand with
    /// smaller segments holds too. Not from `max_message_bytes` (module invariant).
    fn derive_bounds(&mut self) {
        self.store.record_bytes_max = RECORD_BYTES_LIMIT;
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

/// Why a configuration could not be read or was refused; each names the file, line,
/// key or setting at fault.
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
    use super::test_support::with;

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
        assert_eq!(c.store, StoreConfig { record_bytes_max: RECORD_BYTES_LIMIT, ..StoreConfig::default() }, "1 GiB segments and 64 MiB flush windows hold the longest record any configuration accepts");
        assert_eq!((c.long_polling_enable, c.short_polling_time_ms), (true, 1000));
        assert!(c.effective_shard_count() >= 1);
        c.validate().unwrap();
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
