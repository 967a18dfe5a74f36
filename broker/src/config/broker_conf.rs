//! RocketMQ's `broker.conf` (Java properties with RocketMQ's key names) read onto a
//! `BrokerConfig`, and a `BrokerConfig` written back as such keys (GET_BROKER_CONFIG),
//! so an existing RocketMQ deployment starts RingMQ with the file it has.
//!
//! `BROKER_CONF_KEYS` are the keys mapped onto a RingMQ setting (`apply_conf_key`,
//! one line per key); any other key is classified by `conf_keys`: accepted with no
//! effect (listed in one start-up warning) or refused.
//!
//! Invariant: no line is dropped without a trace: it is applied, listed in
//! `ignored_conf_keys`, or refused with its line number.
//! Invariant: a key set twice is refused: Java's "last one wins" would hide a mistake.
//! Invariant: `to_broker_conf` writes only keys `apply_conf_key` reads, and parsing
//! what it writes gives the same settings, but for `innerClientAuthenticationCredentials`
//! and `haAuthSecret`, `metricsPromExporterBasicAuth`, `initAuthenticationUser` (secrets:
//! never written back) and RocketMQ 5's provider and strategy class keys (checked, not
//! kept: only Apache's defaults are accepted) (for every setting broker.conf can hold:
//! TOML may put a disk watermark outside the range Apache clamps it to, which
//! broker.conf refuses).
//! Invariant: a disk watermark percentage is accepted only inside the range Apache
//! RocketMQ clamps it to (`DiskPercentKey`): an accepted line behaves as in Apache.

use super::conf_keys::{self, Unmapped};
use super::{expand_home, split_addrs, BrokerConfig, BrokerRole, ConfigError, MetricsExporter, RouteMode};
use crate::store::config::FlushMode;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

/// The `broker.conf` keys RingMQ reads (RocketMQ names); any other key is an error.
pub const BROKER_CONF_KEYS: &[&str] = &[
    "listenPort",
    "routeMode",
    "metricsExporterType",
    "metricsPromExporterHost",
    "metricsPromExporterPort",
    "metricsPromExporterBasicAuth",
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
    "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio",
    "cleanFileForciblyEnable",
    "deleteFileBatchMax",
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
    "haAuthSecret",
    "syncFlushTimeout",
    "slaveReadEnable",
    "enablePropertyFilter",
    "traceOn",
    "autoCreateSubscriptionGroup",
    "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInDisk",
    "traceTopicEnable",
    "msgTraceTopicName",
    "storeReplyMessageEnable",
    "brokerPermission",
    "brokerTopicEnable",
    "clusterTopicEnable",
    "aclEnable",
    "plainAclFile",
    "innerClientAuthenticationCredentials",
    "authenticationEnabled",
    "authorizationEnabled",
    "authenticationWhitelist",
    "authorizationWhitelist",
    "initAuthenticationUser",
    "authenticationProvider",
    "authenticationMetadataProvider",
    "authenticationStrategy",
    "authorizationProvider",
    "authorizationMetadataProvider",
    "authorizationStrategy",
    "migrateAuthFromV1Enabled",
    "longPollingEnable",
    "shortPollingTimeMills",
    "tls.server.mode",
    "tls.server.certPath",
    "tls.server.keyPath",
    "tls.server.keyPassword",
    "tls.server.need.client.auth",
    "tls.server.trustCertPath",
    "useTLS",
    "tls.enable",
    "tls.client.certPath",
    "tls.client.keyPath",
    "tls.client.keyPassword",
    "tls.client.trustCertPath",
    "tls.client.authServer",
    "tls.client.serverName",
    "enableControllerMode",
    "controllerAddr",
    "controllerHeartBeatTimeoutMills",
    "brokerHeartbeatInterval",
    "syncBrokerMetadataPeriod",
    "syncControllerMetadataPeriod",
    "checkSyncStateSetPeriod",
    "allAckInSyncStateSet",
    "minInSyncReplicas",
    "inSyncReplicas",
    "haMaxTimeSlaveNotCatchup",
    "brokerElectionPriority",
    "masterLeaseEnable",
    "storePathBrokerIdentity",
];

/// Keys that set the same thing as another (`tls.enable`, the system property of
/// Apache's clients, is `useTLS`, NettyClientConfig's key): one of them per file.
fn canonical_key(key: &str) -> &str {
    match key {
        "tls.enable" => "useTLS",
        k => k,
    }
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
            let Some((key, value)) = split_conf_line(raw, line)? else {
                continue;
            };
            if let Some(&first_line) = first_seen.get(canonical_key(key)) {
                return Err(ConfigError::DuplicateKey { key: key.to_string(), line, first_line });
            }
            first_seen.insert(canonical_key(key), line);
            let bad =
                |reason: String| ConfigError::BadValue { key: key.to_string(), line, value: value.to_string(), reason };
            match apply_conf_key(&mut config, key, value).map_err(bad)? {
                ConfEffect::Applied => {}
                ConfEffect::CommitLogPath(path) => commitlog = Some((path, line)),
                ConfEffect::Unknown => config.take_unmapped_key(key, value, line)?,
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

    /// A key RingMQ does not map: kept in `ignored_conf_keys` when Apache RocketMQ's
    /// meaning of it needs nothing here, else refused with its line.
    fn take_unmapped_key(&mut self, key: &str, value: &str, line: usize) -> Result<(), ConfigError> {
        match conf_keys::classify(key, value, BROKER_CONF_KEYS) {
            Unmapped::Ignored(why) => self.ignored_conf_keys.push((key.to_string(), why)),
            Unmapped::Refused(reason) => return Err(ConfigError::UnknownKey { key: key.to_string(), line, reason }),
        }
        Ok(())
    }

    /// This configuration as RocketMQ broker.conf `key=value` pairs (GET_BROKER_CONFIG):
    /// every key `from_broker_conf_str` reads, so parsing the text back gives the same
    /// settings (GET_BROKER_CONFIG adds `shardCount`, RingMQ's own and read-only).
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
            ("deleteWhen", s.delete_when_hours.iter().map(|h| format!("{h:02}")).collect::<Vec<_>>().join(";")),
            ("diskMaxUsedSpaceRatio", percent_text(s.disk_max_used_ratio)),
            ("diskSpaceCleanForciblyRatio", percent_text(s.disk_force_clean_ratio)),
            ("diskSpaceWarningLevelRatio", percent_text(s.disk_refuse_ratio)),
            ("cleanFileForciblyEnable", s.clean_file_forcibly.to_string()),
            ("deleteFileBatchMax", s.delete_files_per_pass_max.to_string()),
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
            ("enablePropertyFilter", self.enable_property_filter.to_string()),
            ("traceOn", self.trace_on.to_string()),
            ("autoCreateSubscriptionGroup", self.auto_create_subscription_group.to_string()),
            ("maxTransferCountOnMessageInMemory", self.pull_hot_messages_max.to_string()),
            ("maxTransferBytesOnMessageInMemory", self.pull_hot_bytes_max.to_string()),
            ("maxTransferCountOnMessageInDisk", self.pull_cold_messages_max.to_string()),
            ("maxTransferBytesOnMessageInDisk", self.pull_cold_bytes_max.to_string()),
            ("traceTopicEnable", self.trace_topic_enable.to_string()),
            ("msgTraceTopicName", self.msg_trace_topic_name.clone()),
            ("storeReplyMessageEnable", self.store_reply_message_enable.to_string()),
            ("brokerPermission", self.broker_permission.to_string()),
            ("brokerTopicEnable", self.broker_topic_enable.to_string()),
            ("clusterTopicEnable", self.cluster_topic_enable.to_string()),
            ("metricsExporterType", if self.metrics_exporter_type == MetricsExporter::Prom { "PROM" } else { "DISABLE" }.to_string()),
            ("metricsPromExporterHost", self.metrics_prom_exporter_host.clone()),
            ("metricsPromExporterPort", self.metrics_prom_exporter_port.to_string()),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            ("shortPollingTimeMills", self.short_polling_time_ms.to_string()),
        ];
        out.extend([
            ("enableControllerMode", self.controller_mode.to_string()),
            ("controllerAddr", self.controller_addrs.join(";")),
            ("controllerHeartBeatTimeoutMills", self.controller_heartbeat_timeout_ms.to_string()),
            ("brokerHeartbeatInterval", self.broker_heartbeat_interval_ms.to_string()),
            ("syncBrokerMetadataPeriod", self.sync_broker_metadata_period_ms.to_string()),
            ("syncControllerMetadataPeriod", self.sync_controller_metadata_period_ms.to_string()),
            ("checkSyncStateSetPeriod", self.check_sync_state_set_period_ms.to_string()),
            ("allAckInSyncStateSet", self.all_ack_in_sync_state_set.to_string()),
            ("minInSyncReplicas", self.min_in_sync_replicas.to_string()),
            ("haMaxTimeSlaveNotCatchup", self.ha_max_time_slave_not_catchup_ms.to_string()),
            ("brokerElectionPriority", self.broker_election_priority.to_string()),
            ("masterLeaseEnable", self.master_lease_enable.to_string()),
        ]);
        if let Some(path) = &self.store_path_broker_identity {
            out.push(("storePathBrokerIdentity", path.display().to_string()));
        }
        if let Some(ip) = &self.broker_ip {
            out.push(("brokerIP1", ip.clone()));
        }
        if let Some(addr) = &self.ha_master_address {
            out.push(("haMasterAddress", addr.clone()));
        }
        out.push(("aclEnable", self.acl_enable.to_string()));
        out.push(("authenticationEnabled", self.authentication_enabled.to_string()));
        out.push(("authorizationEnabled", self.authorization_enabled.to_string()));
        if let Some(list) = &self.authentication_whitelist {
            out.push(("authenticationWhitelist", list.clone()));
        }
        if let Some(list) = &self.authorization_whitelist {
            out.push(("authorizationWhitelist", list.clone()));
        }
        if let Some(path) = &self.plain_acl_file {
            out.push(("plainAclFile", path.display().to_string()));
        }
        // TLS: the settings, never a key password (refused anyway).
        let (server, client) = (&self.tls.server, &self.tls.client);
        out.push(("tls.server.mode", server.mode.as_str().to_string()));
        out.push(("tls.server.need.client.auth", server.need_client_auth.as_str().to_string()));
        out.push(("useTLS", client.enable.to_string()));
        let paths = [
            ("tls.server.certPath", &server.cert_path),
            ("tls.server.keyPath", &server.key_path),
            ("tls.server.trustCertPath", &server.trust_cert_path),
            ("tls.client.certPath", &client.cert_path),
            ("tls.client.keyPath", &client.key_path),
            ("tls.client.trustCertPath", &client.trust_cert_path),
        ];
        for (key, path) in paths {
            if let Some(path) = path {
                out.push((key, path.display().to_string()));
            }
        }
        if let Some(auth) = client.auth_server {
            out.push(("tls.client.authServer", auth.to_string()));
        }
        if let Some(name) = &client.server_name {
            out.push(("tls.client.serverName", name.clone()));
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
}

/// One properties line as `(key, value)`, both trimmed; `None` for a blank or comment
/// line, an error for a line with no separator or no key.
fn split_conf_line(raw: &str, line: usize) -> Result<Option<(&str, &str)>, ConfigError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
        return Ok(None);
    }
    let Some(at) = trimmed.find(['=', ':']) else {
        return Err(ConfigError::Syntax { line, text: trimmed.to_string() });
    };
    let (key, value) = (trimmed[..at].trim(), trimmed[at + 1..].trim());
    if key.is_empty() {
        return Err(ConfigError::Syntax { line, text: trimmed.to_string() });
    }
    Ok(Some((key, value)))
}

/// The classes Apache's `AuthConfig` may name for a provider or strategy key and RingMQ
/// implements: Apache's defaults (the local metadata providers keep users and ACLs in
/// the broker; both strategies decide alike, the stateful one caches per connection).
pub const AUTH_CLASSES: &[(&str, &[&str])] = &[
    ("authenticationProvider", &["org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"]),
    ("authenticationMetadataProvider", &["org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"]),
    (
        "authenticationStrategy",
        &["org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy", "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"],
    ),
    ("authorizationProvider", &["org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider"]),
    ("authorizationMetadataProvider", &["org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"]),
    (
        "authorizationStrategy",
        &["org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy", "org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy"],
    ),
];

/// A provider or strategy class: blank (Apache's default) or one RingMQ implements.
fn check_auth_class(key: &str, value: &str) -> Result<(), String> {
    let known = AUTH_CLASSES.iter().find(|(k, _)| *k == key).map_or(&[][..], |(_, c)| *c);
    if value.trim().is_empty() || known.contains(&value.trim()) {
        return Ok(());
    }
    Err(format!("RingMQ implements only Apache's default {key} ({}): another provider or strategy is not supported", known.join(" or ")))
}

/// What one `broker.conf` key does: its RocketMQ meaning mapped onto RingMQ's fields.
pub(super) enum ConfEffect {
    Applied,
    CommitLogPath(PathBuf),
    Unknown,
}

/// Sets the field `key` names from `value` (RocketMQ's key and value forms); `Err` says
/// why the value is refused. The one place a broker.conf key meets a RingMQ field.
pub(super) fn apply_conf_key(config: &mut BrokerConfig, key: &str, value: &str) -> Result<ConfEffect, String> {
    let store = &mut config.store;
    match key {
        "listenPort" => config.listen_port = parse_number(value)?,
        "routeMode" => config.route_mode = parse_route_mode(value)?,
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
        "haAuthSecret" => config.ha_auth_secret = Some(value.to_string()),
        "syncFlushTimeout" => config.sync_flush_timeout_ms = parse_number(value)?,
        "slaveReadEnable" => config.slave_read_enable = parse_bool(value)?,
        "enablePropertyFilter" => config.enable_property_filter = parse_bool(value)?,
        "traceOn" => config.trace_on = parse_bool(value)?,
        "autoCreateSubscriptionGroup" => config.auto_create_subscription_group = parse_bool(value)?,
        "maxTransferCountOnMessageInMemory" => config.pull_hot_messages_max = parse_number(value)?,
        "maxTransferBytesOnMessageInMemory" => config.pull_hot_bytes_max = parse_number(value)?,
        "maxTransferCountOnMessageInDisk" => config.pull_cold_messages_max = parse_number(value)?,
        "maxTransferBytesOnMessageInDisk" => config.pull_cold_bytes_max = parse_number(value)?,
        "traceTopicEnable" => config.trace_topic_enable = parse_bool(value)?,
        "msgTraceTopicName" => config.msg_trace_topic_name = value.to_string(),
        "storeReplyMessageEnable" => config.store_reply_message_enable = parse_bool(value)?,
        "brokerPermission" => config.broker_permission = parse_permission(value)?,
        "brokerTopicEnable" => config.broker_topic_enable = parse_bool(value)?,
        "clusterTopicEnable" => config.cluster_topic_enable = parse_bool(value)?,
        "aclEnable" => config.acl_enable = parse_bool(value)?,
        "plainAclFile" => config.plain_acl_file = Some(expand_home(value)),
        "innerClientAuthenticationCredentials" => config.inner_client_authentication_credentials = Some(value.to_string()),
        "authenticationEnabled" => config.authentication_enabled = parse_bool(value)?,
        "authorizationEnabled" => config.authorization_enabled = parse_bool(value)?,
        "authenticationWhitelist" => config.authentication_whitelist = Some(value.to_string()),
        "authorizationWhitelist" => config.authorization_whitelist = Some(value.to_string()),
        "initAuthenticationUser" => config.init_authentication_user = Some(value.to_string()),
        "authenticationProvider" | "authenticationMetadataProvider" | "authenticationStrategy" | "authorizationProvider" | "authorizationMetadataProvider" | "authorizationStrategy" => {
            check_auth_class(key, value)?
        }
        "migrateAuthFromV1Enabled" => {
            if parse_bool(value)? {
                return Err("RingMQ does not migrate plain_acl.yml into users and ACLs: leave it false and recreate the accounts with ringmq-admin createUser/createAcl".into());
            }
        }
        "metricsExporterType" => config.metrics_exporter_type = parse_metrics_exporter(value)?,
        "metricsPromExporterHost" => config.metrics_prom_exporter_host = value.to_string(),
        "metricsPromExporterPort" => config.metrics_prom_exporter_port = parse_number(value)?,
        "metricsPromExporterBasicAuth" => config.metrics_prom_exporter_basic_auth = Some(value.to_string()),
        "brokerId" => config.broker_id = parse_number(value)?,
        "brokerIP1" => config.broker_ip = Some(value.to_string()),
        "brokerRole" => config.role = parse_role(value)?,
        "storePathRootDir" => config.store_root = expand_home(value),
        "storePathCommitLog" => return Ok(ConfEffect::CommitLogPath(expand_home(value))),
        "flushDiskType" => store.flush_mode = parse_flush_disk_type(value)?,
        "flushIntervalCommitLog" => store.flush_interval_ms = parse_number(value)?,
        "mappedFileSizeCommitLog" => store.segment_bytes = parse_number(value)?,
        "fileReservedTime" => store.file_reserved_hours = parse_number(value)?,
        "deleteWhen" => store.delete_when_hours = parse_delete_when(value)?,
        "diskMaxUsedSpaceRatio" => store.disk_max_used_ratio = parse_disk_percent(DiskPercentKey::MaxUsed, value)?,
        "diskSpaceCleanForciblyRatio" => store.disk_force_clean_ratio = parse_disk_percent(DiskPercentKey::CleanForcibly, value)?,
        "diskSpaceWarningLevelRatio" => store.disk_refuse_ratio = parse_disk_percent(DiskPercentKey::WarningLevel, value)?,
        "cleanFileForciblyEnable" => store.clean_file_forcibly = parse_bool(value)?,
        "deleteFileBatchMax" => store.delete_files_per_pass_max = parse_delete_file_batch_max(value)?,
        "maxMessageSize" => config.max_message_bytes = parse_number(value)?,
        "autoCreateTopicEnable" => config.auto_create_topic = parse_bool(value)?,
        "defaultTopicQueueNums" => config.default_topic_queue_nums = parse_number(value)?,
        "longPollingEnable" => config.long_polling_enable = parse_bool(value)?,
        "shortPollingTimeMills" => config.short_polling_time_ms = parse_number(value)?,
        "tls.server.mode" => config.tls.server.mode = ringmq_client::net::tls::ServerMode::parse(value)?,
        "tls.server.certPath" => config.tls.server.cert_path = Some(expand_home(value)),
        "tls.server.keyPath" => config.tls.server.key_path = Some(expand_home(value)),
        "tls.server.keyPassword" | "tls.client.keyPassword" => refuse_key_password(value)?,
        "tls.server.need.client.auth" => config.tls.server.need_client_auth = ringmq_client::net::tls::ClientAuth::parse(value)?,
        "tls.server.trustCertPath" => config.tls.server.trust_cert_path = Some(expand_home(value)),
        "useTLS" | "tls.enable" => config.tls.client.enable = parse_bool(value)?,
        "tls.client.certPath" => config.tls.client.cert_path = Some(expand_home(value)),
        "tls.client.keyPath" => config.tls.client.key_path = Some(expand_home(value)),
        "tls.client.trustCertPath" => config.tls.client.trust_cert_path = Some(expand_home(value)),
        "tls.client.authServer" => config.tls.client.auth_server = Some(parse_bool(value)?),
        "tls.client.serverName" => config.tls.client.server_name = Some(value.to_string()),
        "enableControllerMode" => config.controller_mode = parse_bool(value)?,
        "controllerAddr" => config.controller_addrs = split_addrs(value),
        "controllerHeartBeatTimeoutMills" => config.controller_heartbeat_timeout_ms = parse_number(value)?,
        "brokerHeartbeatInterval" => config.broker_heartbeat_interval_ms = parse_number(value)?,
        "syncBrokerMetadataPeriod" => config.sync_broker_metadata_period_ms = parse_number(value)?,
        "syncControllerMetadataPeriod" => config.sync_controller_metadata_period_ms = parse_number(value)?,
        "checkSyncStateSetPeriod" => config.check_sync_state_set_period_ms = parse_number(value)?,
        "allAckInSyncStateSet" => config.all_ack_in_sync_state_set = parse_bool(value)?,
        "minInSyncReplicas" => config.min_in_sync_replicas = parse_number(value)?,
        // Apache's inSyncReplicas counts acks without allAck; RingMQ acks locally then.
        "inSyncReplicas" => {
            if parse_number::<u32>(value)? != 1 {
                return Err("only 1 is implemented (a send is acknowledged once stored locally); for replicated acknowledgements set allAckInSyncStateSet=true".into());
            }
        }
        "haMaxTimeSlaveNotCatchup" => config.ha_max_time_slave_not_catchup_ms = parse_number(value)?,
        "brokerElectionPriority" => config.broker_election_priority = parse_number(value)?,
        "masterLeaseEnable" => config.master_lease_enable = parse_bool(value)?,
        "storePathBrokerIdentity" => config.store_path_broker_identity = Some(expand_home(value)),
        _ => return Ok(ConfEffect::Unknown),
    }
    Ok(ConfEffect::Applied)
}

/// Apache's `tls.*.keyPassword`: empty (Apache's default) is accepted; a password is
/// refused, since RingMQ (rustls) reads no encrypted keys and would not use it.
fn refuse_key_password(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    Err("encrypted private keys are not supported (rustls reads unencrypted PKCS#8, PKCS#1 or SEC1 keys): decrypt the key (e.g. `openssl pkey -in key.pem -out key-plain.pem`), protect the file with its permissions, and remove this line".into())
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

fn parse_route_mode(value: &str) -> Result<RouteMode, String> {
    match value {
        "host" | "HOST" => Ok(RouteMode::Host),
        "shard" | "SHARD" => Ok(RouteMode::Shard),
        _ => Err("expected host or shard".into()),
    }
}

/// RocketMQ's `PermName` bits the broker honours: read+write, read only, write only.
fn parse_permission(value: &str) -> Result<u32, String> {
    let perm: u32 = parse_number(value)?;
    if !matches!(perm, 2 | 4 | 6) {
        return Err("expected 6 (read and write), 4 (read only) or 2 (write only)".into());
    }
    Ok(perm)
}

fn parse_metrics_exporter(value: &str) -> Result<MetricsExporter, String> {
    match value {
        "DISABLE" => Ok(MetricsExporter::Disable),
        "PROM" => Ok(MetricsExporter::Prom),
        "OTLP_GRPC" | "LOG" => Err(format!("RingMQ exports metrics to Prometheus only (PROM); {value} is not built")),
        _ => Err("expected DISABLE or PROM".to_string()),
    }
}

fn parse_role(value: &str) -> Result<BrokerRole, String> {
    match value {
        "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
        "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
        "SLAVE" => Ok(BrokerRole::Slave),
        _ => Err("expected ASYNC_MASTER, SYNC_MASTER or SLAVE".into()),
    }
}

fn parse_flush_disk_type(value: &str) -> Result<FlushMode, String> {
    match value {
        "SYNC_FLUSH" => Ok(FlushMode::Sync),
        "ASYNC_FLUSH" => Ok(FlushMode::Async),
        _ => Err("expected SYNC_FLUSH or ASYNC_FLUSH".into()),
    }
}

/// The hours of day expired files are deleted at: any of the `;`-separated hours, as
/// Apache's `isItTimeToDo` (empty entries skipped, at least one hour).
fn parse_delete_when(value: &str) -> Result<Vec<u32>, String> {
    let mut hours = Vec::new();
    for h in value.split(';').map(str::trim).filter(|h| !h.is_empty()) {
        let hour: u32 = parse_number(h)?;
        if hour > 23 {
            return Err(format!("hour {hour} is not in 0..=23"));
        }
        if !hours.contains(&hour) {
            hours.push(hour);
        }
    }
    if hours.is_empty() {
        return Err("expected hours of the day such as 04 or 04;16".into());
    }
    Ok(hours)
}

/// Apache's disk watermark keys: whole percentages that its getters clamp to a range
/// (`MessageStoreConfig.getDiskMaxUsedSpaceRatio`, `CleanCommitLogService`'s
/// `getDiskSpaceCleanForciblyRatio` and `getDiskSpaceWarningLevelRatio`).
#[derive(Debug, Clone, Copy)]
enum DiskPercentKey {
    /// `diskMaxUsedSpaceRatio` (75): expired files go at any hour above it.
    MaxUsed,
    /// `diskSpaceCleanForciblyRatio` (85): unexpired files may go above it.
    CleanForcibly,
    /// `diskSpaceWarningLevelRatio` (90): writes refused above it.
    WarningLevel,
}

impl DiskPercentKey {
    /// The percentages Apache uses the value within (it clamps anything outside).
    fn apache_range(self) -> std::ops::RangeInclusive<u32> {
        match self {
            DiskPercentKey::MaxUsed => 10..=95,
            DiskPercentKey::CleanForcibly => 30..=85,
            DiskPercentKey::WarningLevel => 35..=90,
        }
    }
}

/// A disk watermark percentage as a fraction. Apache silently uses the nearest bound
/// for a value outside its range; that is refused here instead, so that an accepted
/// line means what it means in Apache.
fn parse_disk_percent(key: DiskPercentKey, value: &str) -> Result<f64, String> {
    let range = key.apache_range();
    let percent: u32 = value
        .parse()
        .map_err(|_| format!("expected a whole percentage in {}..={}", range.start(), range.end()))?;
    if !range.contains(&percent) {
        return Err(format!(
            "expected a whole percentage in {}..={}: Apache RocketMQ clamps it to that range, RingMQ refuses rather than change it silently",
            range.start(),
            range.end()
        ));
    }
    Ok(percent as f64 / 100.0)
}

/// A fraction written back as a percentage: whole for what broker.conf can hold, with
/// decimals (which broker.conf refuses) for a TOML setting between percents.
fn percent_text(ratio: f64) -> String {
    format!("{}", (ratio * 100.0 * 1e6).round() / 1e6)
}

/// `deleteFileBatchMax`: segments one retention pass deletes, at least 1 (Apache
/// deletes one file even at 0).
fn parse_delete_file_batch_max(value: &str) -> Result<u32, String> {
    let files: u32 = parse_number(value)?;
    if files == 0 {
        return Err("expected at least 1 file per pass".into());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{expect, with};

    /// Parses `text` as a broker.conf file; expects that config, or an error whose text
    /// contains each fragment.
    fn check(text: &str, expected: Result<BrokerConfig, &[&str]>) {
        expect(&format!("conf {text:?}"), BrokerConfig::from_broker_conf_str(text), expected);
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
        diskSpaceCleanForciblyRatio=80
        diskSpaceWarningLevelRatio=87
        cleanFileForciblyEnable=false
        deleteFileBatchMax=4
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
        haAuthSecret=replication-secret-0123
        syncFlushTimeout=2000
        slaveReadEnable=true
        enablePropertyFilter=true
        traceOn=false
        autoCreateSubscriptionGroup=false
        maxTransferCountOnMessageInMemory=32
        maxTransferBytesOnMessageInMemory=262144
        maxTransferCountOnMessageInDisk=8
        maxTransferBytesOnMessageInDisk=65536
        traceTopicEnable=true
        msgTraceTopicName=MyTraces
        storeReplyMessageEnable=false
        metricsExporterType=PROM
        metricsPromExporterHost=127.0.0.1
        metricsPromExporterPort=15557
        metricsPromExporterBasicAuth=prom:scrape-s3cret
        brokerPermission=4
        brokerTopicEnable=false
        clusterTopicEnable=false
        aclEnable=true
        plainAclFile=/etc/ringmq/plain_acl.yml
        innerClientAuthenticationCredentials={\"accessKey\":\"rocketmq2\",\"secretKey\":\"12345678\"}
        authenticationEnabled=false
        authorizationEnabled=false
        authenticationWhitelist=34,46
        authorizationWhitelist=10
        initAuthenticationUser={\"username\":\"rocketmq\",\"password\":\"init-s3cret\"}
        authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider
        authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider
        authenticationStrategy=org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy
        authorizationProvider=org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider
        authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider
        authorizationStrategy=org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy
        migrateAuthFromV1Enabled=false
        longPollingEnable=false
        shortPollingTimeMills=500
        tls.server.mode=enforcing
        tls.server.certPath=/etc/ringmq/tls/server.pem
        tls.server.keyPath=/etc/ringmq/tls/server-key.pem
        tls.server.keyPassword=
        tls.server.need.client.auth=require
        tls.server.trustCertPath=/etc/ringmq/tls/ca.pem
        useTLS=true
        tls.client.certPath=/etc/ringmq/tls/client.pem
        tls.client.keyPath=/etc/ringmq/tls/client-key.pem
        tls.client.keyPassword=
        tls.client.trustCertPath=/etc/ringmq/tls/ca.pem
        tls.client.authServer=true
        tls.client.serverName=broker.example
        enableControllerMode=true
        controllerAddr=c1:9878;c2:9878
        controllerHeartBeatTimeoutMills=3000
        brokerHeartbeatInterval=500
        syncBrokerMetadataPeriod=1000
        syncControllerMetadataPeriod=2000
        checkSyncStateSetPeriod=1500
        allAckInSyncStateSet=true
        minInSyncReplicas=1
        inSyncReplicas=1
        haMaxTimeSlaveNotCatchup=3000
        brokerElectionPriority=7
        masterLeaseEnable=false
        storePathBrokerIdentity=/data/rocketmq/identity
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
            c.controller_mode = true;
            c.controller_addrs = vec!["c1:9878".into(), "c2:9878".into()];
            c.controller_heartbeat_timeout_ms = 3_000;
            c.broker_heartbeat_interval_ms = 500;
            c.sync_broker_metadata_period_ms = 1_000;
            c.sync_controller_metadata_period_ms = 2_000;
            c.check_sync_state_set_period_ms = 1_500;
            c.all_ack_in_sync_state_set = true;
            c.min_in_sync_replicas = 1;
            c.ha_max_time_slave_not_catchup_ms = 3_000;
            c.broker_election_priority = 7;
            c.master_lease_enable = false;
            c.store_path_broker_identity = Some("/data/rocketmq/identity".into());
            c.store_root = "/data/rocketmq/store".into();
            c.store.flush_mode = FlushMode::Sync;
            c.store.flush_interval_ms = 200;
            c.store.segment_bytes = 256 << 20;
            c.store.file_reserved_hours = 120;
            c.store.delete_when_hours = vec![4, 5];
            c.store.disk_max_used_ratio = 0.88;
            c.store.disk_force_clean_ratio = 0.80;
            c.store.disk_refuse_ratio = 0.87;
            c.store.clean_file_forcibly = false;
            c.store.delete_files_per_pass_max = 4;
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
            c.ha_auth_secret = Some("replication-secret-0123".into());
            c.sync_flush_timeout_ms = 2_000;
            c.slave_read_enable = true;
            c.enable_property_filter = true;
            c.trace_on = false;
            c.auto_create_subscription_group = false;
            (c.pull_hot_messages_max, c.pull_hot_bytes_max, c.pull_cold_messages_max, c.pull_cold_bytes_max) = (32, 262_144, 8, 65_536);
            c.trace_topic_enable = true;
            c.msg_trace_topic_name = "MyTraces".into();
            c.store_reply_message_enable = false;
            c.metrics_exporter_type = MetricsExporter::Prom;
            c.metrics_prom_exporter_host = "127.0.0.1".into();
            c.metrics_prom_exporter_port = 15557;
            c.metrics_prom_exporter_basic_auth = Some("prom:scrape-s3cret".into());
            c.broker_permission = 4;
            c.broker_topic_enable = false;
            c.cluster_topic_enable = false;
            c.route_mode = RouteMode::Shard;
            c.acl_enable = true;
            c.plain_acl_file = Some("/etc/ringmq/plain_acl.yml".into());
            c.inner_client_authentication_credentials = Some(r#"{"accessKey":"rocketmq2","secretKey":"12345678"}"#.into());
            // The fixture has aclEnable=true: RocketMQ 5's switches stay off with it.
            c.authentication_whitelist = Some("34,46".into());
            c.authorization_whitelist = Some("10".into());
            c.init_authentication_user = Some(r#"{"username":"rocketmq","password":"init-s3cret"}"#.into());
            (c.long_polling_enable, c.short_polling_time_ms) = (false, 500);
            c.tls.server = ringmq_client::net::tls::TlsServerSettings {
                mode: ringmq_client::net::tls::ServerMode::Enforcing,
                cert_path: Some("/etc/ringmq/tls/server.pem".into()),
                key_path: Some("/etc/ringmq/tls/server-key.pem".into()),
                key_password: None,
                need_client_auth: ringmq_client::net::tls::ClientAuth::Require,
                trust_cert_path: Some("/etc/ringmq/tls/ca.pem".into()),
            };
            c.tls.client = ringmq_client::net::tls::TlsClientSettings {
                enable: true,
                cert_path: Some("/etc/ringmq/tls/client.pem".into()),
                key_path: Some("/etc/ringmq/tls/client-key.pem".into()),
                key_password: None,
                trust_cert_path: Some("/etc/ringmq/tls/ca.pem".into()),
                auth_server: Some(true),
                server_name: Some("broker.example".into()),
            };
        });
        expected.validate().unwrap();
        check(EVERY_CONF_KEY, Ok(expected));
        // Every documented key appears in the fixture (`tls.enable` is `useTLS`'s other
        // name: one of the two per file; `conf_tls` checks it).
        for key in BROKER_CONF_KEYS.iter().filter(|k| **k != "tls.enable") {
            assert!(
                EVERY_CONF_KEY.contains(&format!("{key}=")) || EVERY_CONF_KEY.contains(&format!("{key} =")),
                "{key}"
            );
        }
    }

    #[test]
    fn conf_cases() {
        check("", Ok(BrokerConfig::default()));
        // Controller mode (issue 27, design §4).
        check("enableControllerMode=true\ncontrollerAddr=10.0.0.1:9878; 10.0.0.2:9878", Ok(with(|c| {
            c.controller_mode = true;
            c.controller_addrs = vec!["10.0.0.1:9878".into(), "10.0.0.2:9878".into()];
        })));
        check("inSyncReplicas=1", Ok(BrokerConfig::default()));
        check("inSyncReplicas=2", Err(&["inSyncReplicas", "only 1 is implemented", "allAckInSyncStateSet=true"]));
        check("masterLeaseEnable=false", Ok(with(|c| c.master_lease_enable = false)));
        check("masterLeaseEnable=maybe", Err(&["masterLeaseEnable", "true or false"]));
        check("brokerElectionPriority=-3", Ok(with(|c| c.broker_election_priority = -3)));
        check("controllerHeartBeatTimeoutMills=3000\nbrokerHeartbeatInterval=1000", Ok(with(|c| {
            c.controller_heartbeat_timeout_ms = 3_000;
            c.broker_heartbeat_interval_ms = 1_000;
        })));
        check("enableDLegerCommitLog=true", Err(&["DLedger CommitLog mode is not supported", "enableControllerMode=true"]));
        check("enableElectUncleanMaster=false", Err(&["a controller setting"]));
        check("asyncLearner=true", Err(&["asyncLearner"]));
        check("# only a comment\n\n   \n! another", Ok(BrokerConfig::default()));
        check("listenPort:1234", Ok(with(|c| c.listen_port = 1234)));
        check("  listenPort  =  1234  \r\n", Ok(with(|c| c.listen_port = 1234)));
        check("brokerRole=SYNC_MASTER", Ok(with(|c| c.role = BrokerRole::SyncMaster)));
        check("brokerRole=ASYNC_MASTER", Ok(BrokerConfig::default()));
        check("flushDiskType=ASYNC_FLUSH", Ok(BrokerConfig::default()));
        check("deleteWhen=04", Ok(BrokerConfig::default()));
        check("deleteWhen=23", Ok(with(|c| c.store.delete_when_hours = vec![23])));
        check("deleteWhen=04;16", Ok(with(|c| c.store.delete_when_hours = vec![4, 16])));
        check("deleteWhen= ; 7", Ok(with(|c| c.store.delete_when_hours = vec![7])));
        check("autoCreateTopicEnable=false", Ok(BrokerConfig::default()));
        check("namesrvAddr=", Ok(BrokerConfig::default()));
        check("namesrvAddr=127.0.0.1:9876", Ok(with(|c| c.namesrv_addrs = vec!["127.0.0.1:9876".into()])));
        // Apache's retention keys, each onto its own setting (issue 24): the used ratio
        // where expired files go at any hour, where unexpired ones may go, where
        // writes are refused; whether unexpired ones may go at all; files per pass.
        check("diskMaxUsedSpaceRatio=60", Ok(with(|c| c.store.disk_max_used_ratio = 0.6)));
        check("diskMaxUsedSpaceRatio=95", Ok(with(|c| c.store.disk_max_used_ratio = 0.95)));
        check("diskMaxUsedSpaceRatio=10", Ok(with(|c| c.store.disk_max_used_ratio = 0.1)));
        check("diskMaxUsedSpaceRatio=75", Ok(BrokerConfig::default()));
        check("diskSpaceCleanForciblyRatio=85", Ok(BrokerConfig::default()));
        check("diskSpaceCleanForciblyRatio=30", Ok(with(|c| c.store.disk_force_clean_ratio = 0.3)));
        check("diskSpaceWarningLevelRatio=90", Ok(BrokerConfig::default()));
        check("diskSpaceWarningLevelRatio=35", Ok(with(|c| c.store.disk_refuse_ratio = 0.35)));
        check("cleanFileForciblyEnable=true", Ok(BrokerConfig::default()));
        check("cleanFileForciblyEnable=false", Ok(with(|c| c.store.clean_file_forcibly = false)));
        check("deleteFileBatchMax=10", Ok(BrokerConfig::default()));
        check("deleteFileBatchMax=1", Ok(with(|c| c.store.delete_files_per_pass_max = 1)));
        // The CommitLog path may come before the root; it must be under it.
        check("storePathCommitLog=/r/commitlog\nstorePathRootDir=/r", Ok(with(|c| c.store_root = "/r".into())));
        check(
            "storePathRootDir=/r\nstorePathCommitLog=/r/deeper/commitlog",
            Ok(with(|c| c.store_root = "/r".into())),
        );
        check("maxMessageSize=1024", Ok(with(|c| c.max_message_bytes = 1024)));
        // Apache's short polling: a pull is held at most shortPollingTimeMills.
        check("longPollingEnable=true", Ok(BrokerConfig::default()));
        check("longPollingEnable=false\nshortPollingTimeMills=200", Ok(with(|c| (c.long_polling_enable, c.short_polling_time_ms) = (false, 200))));
        // Apache keys with no meaning here are accepted (and listed); others refused.
        check("brokerNmae=a", Err(&["line 1", "did you mean `brokerName`?"]));
        check("aclEnable=true", Ok(with(|c| c.acl_enable = true)));
        check("aclEnable=true\nplainAclFile=/etc/ringmq/plain_acl.yml", Ok(with(|c| (c.acl_enable, c.plain_acl_file) = (true, Some("/etc/ringmq/plain_acl.yml".into())))));
        check(
            "innerClientAuthenticationCredentials={\"accessKey\":\"rocketmq2\",\"secretKey\":\"12345678\"}",
            Ok(with(|c| c.inner_client_authentication_credentials = Some(r#"{"accessKey":"rocketmq2","secretKey":"12345678"}"#.into()))),
        );
        check("listenPort=1\naclEnable=maybe", Err(&["line 2", "`aclEnable=maybe`", "expected true or false"]));
        // RocketMQ 5's provider and strategy keys: blank or Apache's defaults only.
        check("authenticationProvider=", Ok(BrokerConfig::default()));
        check("authorizationStrategy=org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy", Ok(BrokerConfig::default()));
        check(
            "authenticationProvider=com.example.LdapAuthenticationProvider",
            Err(&["line 1", "authenticationProvider", "implements only Apache's default authenticationProvider (org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider)"]),
        );
        check("authorizationMetadataProvider=org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider", Err(&["LocalAuthorizationMetadataProvider", "not supported"]));
        check("migrateAuthFromV1Enabled=true", Err(&["does not migrate plain_acl.yml"]));
        check("migrateAuthFromV1Enabled=false\nauthenticationEnabled=true", Ok(with(|c| c.authentication_enabled = true)));
        check(
            "sendMessageThreadPoolNums=16\naclEnable=false",
            Ok(with(|c| {
                c.ignored_conf_keys = vec![
                    ("sendMessageThreadPoolNums".into(), conf_keys::IgnoredWhy::ThreadPool),
                ]
            })),
        );
    }

    #[test]
    fn conf_tls() {
        use ringmq_client::net::tls::{ClientAuth, ServerMode};
        check("tls.server.mode=permissive", Ok(with(|c| c.tls.server.mode = ServerMode::Permissive)));
        check("tls.server.mode=ENFORCING", Ok(with(|c| c.tls.server.mode = ServerMode::Enforcing)));
        check("tls.server.mode=on", Err(&["line 1", "expected disabled, permissive or enforcing"]));
        check("tls.server.need.client.auth=optional", Ok(with(|c| c.tls.server.need_client_auth = ClientAuth::Optional)));
        check("tls.enable=true", Ok(with(|c| c.tls.client.enable = true)));
        check("useTLS=true", Ok(with(|c| c.tls.client.enable = true)));
        check("useTLS=true\ntls.enable=false", Err(&["line 2", "`tls.enable`"]));
        check("tls.server.keyPassword=", Ok(BrokerConfig::default()));
        check("tls.server.keyPassword=s3cret", Err(&["line 1", "encrypted private keys are not supported"]));
        check("tls.client.keyPassword=s3cret", Err(&["encrypted private keys are not supported"]));
        check("tls.client.authServer=false", Ok(with(|c| c.tls.client.auth_server = Some(false))));
        // A mode without its files parses, and fails the start naming the key.
        let e = BrokerConfig::from_broker_conf_str("tls.server.mode=enforcing").unwrap().validate().expect_err("no certificate");
        assert!(e.to_string().contains("tls.server.certPath"), "{e}");
        let e = BrokerConfig::from_broker_conf_str("useTLS=true\ntls.client.authServer=true").unwrap().validate().expect_err("nothing to verify against");
        assert!(e.to_string().contains("tls.client.trustCertPath"), "{e}");
        // TOML: the same keys under [tls.server] / [tls.client], snake_case or Apache's.
        let toml = "[tls.server]\nmode = \"enforcing\"\ncert_path = \"/c.pem\"\nkeyPath = \"/k.pem\"\nneed_client_auth = \"require\"\ntrust_cert_path = \"/ca.pem\"\n[tls.client]\nenable = true\n";
        let c = BrokerConfig::from_toml_str(toml).unwrap();
        assert_eq!((c.tls.server.mode, c.tls.server.need_client_auth, c.tls.client.enable), (ServerMode::Enforcing, ClientAuth::Require, true));
        assert_eq!(c.tls.server.key_path.as_deref(), Some(std::path::Path::new("/k.pem")));
        assert!(BrokerConfig::from_toml_str("[tls.server]\nmodee = \"x\"\n").is_err(), "unknown TLS keys are refused");
    }

    #[test]
    fn broker_conf_text_parses_back_to_the_same_settings() {
        let original = BrokerConfig::from_broker_conf_str(EVERY_CONF_KEY).unwrap();
        let text: String = original.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let again = BrokerConfig::from_broker_conf_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        // The broker's own secret is never written back.
        assert!(!text.contains("12345678"), "{text}");
        assert!(!text.contains("replication-secret"), "{text}");
        assert!(!text.contains("scrape-s3cret"), "{text}");
        assert!(!text.contains("init-s3cret"), "{text}");
        let mut original = original;
        original.inner_client_authentication_credentials = None;
        original.ha_auth_secret = None;
        original.metrics_prom_exporter_basic_auth = None;
        original.init_authentication_user = None;
        assert_eq!(again, original, "{text}");
        // Every key it writes is one broker.conf reads.
        for (k, _) in original.to_broker_conf() {
            assert!(BROKER_CONF_KEYS.contains(&k), "{k}");
        }
        // The retention keys are written in Apache's form: whole percentages, a switch.
        for line in ["diskMaxUsedSpaceRatio=88\n", "diskSpaceCleanForciblyRatio=80\n", "diskSpaceWarningLevelRatio=87\n", "cleanFileForciblyEnable=false\n", "deleteFileBatchMax=4\n"] {
            assert!(text.contains(line), "{line:?} not in {text}");
        }
        // Forced cleaning past the refusal watermark parses but does not validate.
        let inverted = BrokerConfig::from_broker_conf_str("diskSpaceCleanForciblyRatio=85\ndiskSpaceWarningLevelRatio=80").unwrap();
        let e = inverted.validate().expect_err("force-clean above refuse");
        assert!(e.to_string().contains("disk_force_clean_ratio 0.85 must not exceed disk_refuse_ratio 0.8"), "{e}");
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
            assert_eq!((c.cluster_name.as_str(), c.store.file_reserved_hours, c.store.delete_when_hours.clone()), ("DefaultCluster", 48, vec![4]), "{name}");
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
        // Apache's production switch that groups must be created before use is honoured.
        let gated = BrokerConfig::from_broker_conf_str(&format!("{production}autoCreateSubscriptionGroup=false\n")).expect("honoured");
        assert!(!gated.auto_create_subscription_group && c.auto_create_subscription_group);
        assert_eq!(c.role, BrokerRole::SyncMaster);
        assert!(c.slave_read_enable);
        let warning = c.ignored_keys_warning().expect("ignored keys are listed");
        for key in ["sendMessageThreadPoolNums", "useReentrantLockWhenPutMessage", "serverSocketSndBufSize", "flushConsumerOffsetInterval"] {
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
        check("diskMaxUsedSpaceRatio=101", Err(&["diskMaxUsedSpaceRatio", "percentage in 10..=95"]));
        // Outside the range Apache clamps to: refused, never changed silently.
        check("diskMaxUsedSpaceRatio=96", Err(&["diskMaxUsedSpaceRatio=96", "10..=95", "clamps"]));
        check("diskMaxUsedSpaceRatio=9", Err(&["10..=95"]));
        check("diskMaxUsedSpaceRatio=88.5", Err(&["whole percentage"]));
        check("diskSpaceCleanForciblyRatio=86", Err(&["diskSpaceCleanForciblyRatio", "30..=85"]));
        check("diskSpaceCleanForciblyRatio=29", Err(&["30..=85"]));
        check("diskSpaceWarningLevelRatio=91", Err(&["diskSpaceWarningLevelRatio", "35..=90"]));
        check("diskSpaceWarningLevelRatio=34", Err(&["35..=90"]));
        check("diskSpaceWarningLevelRatio=high", Err(&["whole percentage"]));
        check("cleanFileForciblyEnable=no", Err(&["cleanFileForciblyEnable", "true or false"]));
        check("deleteFileBatchMax=0", Err(&["deleteFileBatchMax", "at least 1"]));
        check("deleteFileBatchMax=-1", Err(&["deleteFileBatchMax"]));
        check("autoCreateTopicEnable=yes", Err(&["autoCreateTopicEnable", "true or false"]));
        check("mappedFileSizeCommitLog=1G", Err(&["mappedFileSizeCommitLog"]));
        check("fileReservedTime=-3", Err(&["fileReservedTime"]));
        check("maxMessageSize=big", Err(&["maxMessageSize"]));
        check("longPollingEnable=no", Err(&["longPollingEnable", "true or false"]));
        check("shortPollingTimeMills=-1", Err(&["shortPollingTimeMills", "number"]));
        check("defaultTopicQueueNums=x", Err(&["defaultTopicQueueNums"]));
        check("flushIntervalCommitLog=0.5", Err(&["flushIntervalCommitLog"]));
        check(
            "storePathRootDir=/r\nstorePathCommitLog=/elsewhere/commitlog",
            Err(&["line 2", "/elsewhere/commitlog", "not under", "/r", "shard-<i>/commitlog"]),
        );
        check("storePathRootDir=/r\nstorePathCommitLog=/rx/commitlog", Err(&["not under"]));
    }
}
