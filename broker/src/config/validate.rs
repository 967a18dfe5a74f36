//! Validation: every check a configuration passes before a broker starts with it, and
//! the named bounds those checks use.
//!
//! Invariant: `validate` reads the configuration only (no file, no network, no clock),
//! so a file's settings and the same settings from flags give the same verdict.
//! Invariant: the checks run in a fixed order and the first failure is the error; each
//! message names the setting and the bound it broke.
//! Invariant: the store's own bounds are checked by `StoreConfig::validate`, so they
//! are stated once, next to the store; then whether the largest message fits the store
//! (`check_message_fits_store`), last.
//! Invariant: a runtime update (`validate_runtime_update`) passes the same checks as a
//! start-up configuration, except that the message-fits-store check runs only when
//! `maxMessageSize` changes (the store's geometry cannot change at runtime, so for a
//! configuration that started the verdict is the same).

use super::{BrokerConfig, BrokerRole, ConfigError, RouteMode, RECORD_OVERHEAD_BYTES_MAX};
use crate::store::config::MIB;
use crate::meta::topics::QUEUE_NUMS_MAX;
use super::{PULL_BODY_BYTES_MAX, PULL_MESSAGES_MAX};
use crate::store::engine::SHARD_COUNT_MAX;
use ringmq_client::remoting::frame::FRAME_LEN_MAX_BYTES;
use std::net::Ipv4Addr;

/// Largest `max_message_bytes`: a SEND request carrying it, with its header, must fit
/// one remoting frame (DESIGN.md §6).
pub const MAX_MESSAGE_BYTES_LIMIT: u64 = FRAME_LEN_MAX_BYTES as u64 - RECORD_OVERHEAD_BYTES_MAX;

/// Longest `spin_before_park_us` accepted: past a millisecond a spinning core is simply
/// a busy core.
pub const SPIN_BEFORE_PARK_US_MAX: u64 = 1_000;

/// Longest `short_polling_time_ms` (`shortPollingTimeMills`) accepted: RingMQ's
/// `pull_suspend_max_ms` default, the longest a long-polled pull is held.
pub const SHORT_POLLING_TIME_MS_MAX: u64 = 30_000;
/// Shortest `haAuthSecret` (bytes): 128 bits of a random secret.
pub const HA_AUTH_SECRET_BYTES_MIN: usize = 16;
/// Longest `haAuthSecret` (bytes).
pub const HA_AUTH_SECRET_BYTES_MAX: usize = 1024;

impl BrokerConfig {
    /// Checks every setting; the first one out of bounds is the error, named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_settings()?;
        self.check_message_fits_store().map_err(ConfigError::Invalid)
    }

    /// The checks of a runtime update over this (the updated) configuration: those of
    /// `validate`, the message-fits-store check only when `maxMessageSize` is among
    /// `changed_keys`.
    pub(super) fn validate_runtime_update(&self, changed_keys: &[&str]) -> Result<(), ConfigError> {
        self.validate_settings()?;
        if changed_keys.contains(&"maxMessageSize") {
            self.check_message_fits_store().map_err(ConfigError::Invalid)?;
        }
        Ok(())
    }

    /// Every check but whether the largest message fits the store.
    fn validate_settings(&self) -> Result<(), ConfigError> {
        self.check_ports_and_addresses()
            .and_then(|()| self.check_identity())
            .and_then(|()| self.check_placement())
            .and_then(|()| self.check_limits())
            .and_then(|()| self.check_schedule())
            .and_then(|()| self.inner_credentials().map(|_| ()).map_err(|e| format!("innerClientAuthenticationCredentials: {e}")))
            .and_then(|()| self.check_ha_auth_secret())
            .and_then(|()| self.check_auth())
            .and_then(|()| self.metrics_basic_auth().map(|_| ()))
            .and_then(|()| self.tls.server.check().and_then(|()| self.tls.client.check()).map_err(|e| e.to_string()))
            .map_err(ConfigError::Invalid)?;
        self.store.validate()?;
        Ok(())
    }

    /// RocketMQ 5's auth keys: not with the 4.x plain ACL, whitelists and the initial
    /// user well-formed.
    fn check_auth(&self) -> Result<(), String> {
        if self.acl_enable && (self.authentication_enabled || self.authorization_enabled) {
            return Err("aclEnable (RocketMQ 4.x plain ACL, plain_acl.yml) and authenticationEnabled/authorizationEnabled (RocketMQ 5 users and ACLs) cannot both be on: \
                 choose one (Apache RocketMQ 5 ignores plain_acl.yml once authentication is on; recreate its accounts as users and ACLs with ringmq-admin createUser/createAcl)"
                .into());
        }
        self.auth_settings()?;
        self.init_auth_user().map(|_| ()).map_err(|e| format!("initAuthenticationUser: {e}"))
    }

    /// A replication secret is long enough to resist guessing and short enough to bound
    /// what each proof hashes.
    fn check_ha_auth_secret(&self) -> Result<(), String> {
        match self.ha_auth_secret() {
            Some(s) if s.len() < HA_AUTH_SECRET_BYTES_MIN || s.len() > HA_AUTH_SECRET_BYTES_MAX => {
                Err(format!("haAuthSecret has {} bytes: use {HA_AUTH_SECRET_BYTES_MIN} to {HA_AUTH_SECRET_BYTES_MAX} (or leave it empty: replication not authenticated)", s.len()))
            }
            _ => Ok(()),
        }
    }

    /// A message of `max_message_bytes` with the most a record adds to it fits the
    /// store's record bound (the segment size and the flush window bound it).
    fn check_message_fits_store(&self) -> Result<(), String> {
        let record = self.max_message_bytes.saturating_add(RECORD_OVERHEAD_BYTES_MAX);
        if record > self.store.record_bytes_limit() {
            return Err(format!(
                "max_message_bytes (maxMessageSize) {} does not fit the store: with up to {RECORD_OVERHEAD_BYTES_MAX} bytes of header, topic and properties a record may be {record} bytes, and the store holds records of at most {} bytes (segment_bytes {} - 8 and dirty_bytes_max {}, whichever is less, at most {} MiB)",
                self.max_message_bytes,
                self.store.record_bytes_limit(),
                self.store.segment_bytes,
                self.store.dirty_bytes_max,
                super::RECORD_BYTES_LIMIT / MIB
            ));
        }
        Ok(())
    }

    /// Shard ports, the advertised IP and the NameServer addresses.
    fn check_ports_and_addresses(&self) -> Result<(), String> {
        if self.route_mode == RouteMode::Shard && self.listen_port != 0 {
            let last = self.listen_port as usize + self.effective_shard_count() - 1;
            if last > u16::MAX as usize {
                return Err(format!("route_mode shard: shard ports listen_port + i run to {last}, past 65535 (lower listen_port)"));
            }
        }
        if let Some(ip) = &self.broker_ip {
            if ip.parse::<Ipv4Addr>().is_err() {
                return Err(format!("broker_ip {ip:?} is not an IPv4 address (offsetMsgIds carry 4 bytes)"));
            }
        }
        for addr in &self.namesrv_addrs {
            if !is_host_port(addr) {
                return Err(format!("namesrv address {addr:?} is not host:port"));
            }
        }
        Ok(())
    }

    /// Cluster and broker names, and a role that agrees with the broker id and can
    /// find its master.
    fn check_identity(&self) -> Result<(), String> {
        for (field, value) in [("cluster_name", &self.cluster_name), ("broker_name", &self.broker_name)] {
            if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("{field} {value:?} must be non-empty without whitespace"));
            }
        }
        // Checked even when tracing is off: turning it on later must not meet a bad name.
        if let Err(e) = crate::meta::topics::check_topic_syntax(&self.msg_trace_topic_name) {
            return Err(format!("msg_trace_topic_name (msgTraceTopicName) {:?} is not a topic name: {e}", self.msg_trace_topic_name));
        }
        if self.controller_mode {
            // The controller assigns the id and the role (Apache's samples say
            // brokerId=-1, brokerRole=SLAVE): the static pairing does not apply.
            return self.check_controller();
        }
        match (self.role, self.broker_id) {
            (BrokerRole::Slave, 0) => return Err("a slave needs broker_id > 0 (0 is the master)".into()),
            (role, id) if role.is_master() && id != 0 => {
                return Err(format!("a master has broker_id 0, not {id} (set role = \"slave\" for a slave)"))
            }
            _ => {}
        }
        if self.role == BrokerRole::Slave {
            match self.ha_master_address.as_deref() {
                Some(a) if a.parse::<std::net::SocketAddr>().is_err() => {
                    return Err(format!("ha_master_address (haMasterAddress) must be \"ip:port\" of the master's replication port, got {a:?}"))
                }
                // Learnt from the NameServer's answer to REGISTER_BROKER (haServerAddr).
                None if self.namesrv_addrs.is_empty() => {
                    return Err("a slave needs its master: set namesrv_addrs (the NameServer names the master of the same broker_name) or ha_master_address = \"ip:port\"".into())
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Controller mode's settings (docs/design/controller.md §4): controllers to talk
    /// to, a heartbeat well inside the timeout, and at least one in-sync replica.
    fn check_controller(&self) -> Result<(), String> {
        let max = crate::ha::replicas::CONTROLLERS_MAX;
        if self.controller_addrs.is_empty() || self.controller_addrs.len() > max {
            return Err(format!("enableControllerMode needs controllerAddr: 1 to {max} \"host:port\" entries, `;`-separated (got {})", self.controller_addrs.len()));
        }
        if let Some(bad) = self.controller_addrs.iter().find(|a| !is_host_port(a)) {
            return Err(format!("controllerAddr entry {bad:?} is not \"host:port\""));
        }
        if self.broker_heartbeat_interval_ms == 0 || self.broker_heartbeat_interval_ms >= self.controller_heartbeat_timeout_ms {
            return Err(format!(
                "brokerHeartbeatInterval {} must be above 0 and below controllerHeartBeatTimeoutMills {}",
                self.broker_heartbeat_interval_ms, self.controller_heartbeat_timeout_ms
            ));
        }
        for (key, v) in [
            ("syncBrokerMetadataPeriod", self.sync_broker_metadata_period_ms),
            ("syncControllerMetadataPeriod", self.sync_controller_metadata_period_ms),
            ("checkSyncStateSetPeriod", self.check_sync_state_set_period_ms),
        ] {
            if v == 0 {
                return Err(format!("{key} must be above 0 ms"));
            }
        }
        if self.min_in_sync_replicas == 0 {
            return Err("minInSyncReplicas must be at least 1 (the master itself)".into());
        }
        // Never accepted and not honoured: no send path refuses below the minimum yet.
        if self.min_in_sync_replicas > 1 {
            return Err(format!(
                "minInSyncReplicas={} is not implemented yet (only 1); allAckInSyncStateSet=true already waits for every in-sync replica",
                self.min_in_sync_replicas
            ));
        }
        Ok(())
    }

    /// Where the store lives and which cores the shards run on.
    fn check_placement(&self) -> Result<(), String> {
        if self.store_root.as_os_str().is_empty() {
            return Err("store_root is empty".into());
        }
        if self.shard_count > SHARD_COUNT_MAX as usize {
            return Err(format!("shard_count {} exceeds {SHARD_COUNT_MAX}", self.shard_count));
        }
        if let Some(cpus) = &self.cpu_list {
            let mut sorted = cpus.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if cpus.is_empty() || sorted.len() != cpus.len() {
                return Err(format!("cpu_list {cpus:?} must be non-empty without repeats"));
            }
            if cpus.len() < self.effective_shard_count() {
                return Err(format!("cpu_list has {} CPUs for {} shards", cpus.len(), self.effective_shard_count()));
            }
        }
        Ok(())
    }

    /// Sizes, counts and intervals: each within its bound, and those in `positive`
    /// never zero.
    fn check_limits(&self) -> Result<(), String> {
        if !(1..=QUEUE_NUMS_MAX).contains(&self.default_topic_queue_nums) {
            return Err(format!(
                "default_topic_queue_nums {} is not in 1..={QUEUE_NUMS_MAX}",
                self.default_topic_queue_nums
            ));
        }
        if !(1..=MAX_MESSAGE_BYTES_LIMIT).contains(&self.max_message_bytes) {
            return Err(format!(
                "max_message_bytes {} is not in 1..={MAX_MESSAGE_BYTES_LIMIT}",
                self.max_message_bytes
            ));
        }
        let positive = [
            ("register_interval_ms", self.register_interval_ms),
            ("idle_connection_timeout_ms", self.idle_connection_timeout_ms),
            ("pull_suspend_max_ms", self.pull_suspend_max_ms),
            ("connections_per_shard_max", self.connections_per_shard_max as u64),
            ("forward_batch_max", self.forward_batch_max as u64),
            ("store.flush_interval_ms", self.store.flush_interval_ms),
            ("transaction_check_interval_ms", self.transaction_check_interval_ms),
            ("transaction_pending_max", self.transaction_pending_max as u64),
            ("sync_flush_timeout_ms", self.sync_flush_timeout_ms),
            ("short_polling_time_ms (shortPollingTimeMills)", self.short_polling_time_ms),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{field} must be positive"));
        }
        if self.short_polling_time_ms > SHORT_POLLING_TIME_MS_MAX {
            return Err(format!("short_polling_time_ms (shortPollingTimeMills) {} is above {SHORT_POLLING_TIME_MS_MAX}", self.short_polling_time_ms));
        }
        if self.spin_before_park_us > SPIN_BEFORE_PARK_US_MAX {
            return Err(format!("spin_before_park_us {} is above {SPIN_BEFORE_PARK_US_MAX}", self.spin_before_park_us));
        }
        let pull_caps = [
            ("pull_hot_messages_max (maxTransferCountOnMessageInMemory)", self.pull_hot_messages_max, PULL_MESSAGES_MAX),
            ("pull_cold_messages_max (maxTransferCountOnMessageInDisk)", self.pull_cold_messages_max, PULL_MESSAGES_MAX),
            ("pull_hot_bytes_max (maxTransferBytesOnMessageInMemory)", self.pull_hot_bytes_max, PULL_BODY_BYTES_MAX),
            ("pull_cold_bytes_max (maxTransferBytesOnMessageInDisk)", self.pull_cold_bytes_max, PULL_BODY_BYTES_MAX),
        ];
        for (field, value, max) in pull_caps {
            if !(1..=max).contains(&value) {
                return Err(format!("{field} {value} is not in 1..={max} (RingMQ's bound on one pull)"));
            }
        }
        Ok(())
    }

    /// Delay levels and the longest timer delay.
    fn check_schedule(&self) -> Result<(), String> {
        if let Err(e) = crate::schedule::DelayLevels::parse(&self.message_delay_level) {
            return Err(e.to_string());
        }
        if self.timer_max_delay_sec == 0 || self.timer_max_delay_sec > crate::schedule::timer::TIMER_MAX_DELAY_SEC_LIMIT {
            return Err(format!(
                "timer_max_delay_sec {} is not in 1..={}",
                self.timer_max_delay_sec,
                crate::schedule::timer::TIMER_MAX_DELAY_SEC_LIMIT
            ));
        }
        Ok(())
    }
}

/// `host:port` with a non-empty host and a port above 0.
fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .is_some_and(|port| port != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::with;
    use std::path::PathBuf;

    #[test]
    fn validate_cases() {
        let cases: Vec<(BrokerConfig, Option<&str>)> = vec![
            (BrokerConfig::default(), None),
            (with(|c| c.listen_port = 0), None), // a free port, picked at start
            (with(|c| (c.route_mode, c.shard_count, c.listen_port) = (RouteMode::Shard, 4, 65532)), None),
            (with(|c| (c.route_mode, c.shard_count, c.listen_port) = (RouteMode::Shard, 4, 65533)), Some("past 65535")),
            (with(|c| c.broker_ip = Some("::1".into())), Some("IPv4")),
            (with(|c| c.broker_ip = Some("10.1.2.3".into())), None),
            (with(|c| c.namesrv_addrs = vec!["host".into()]), Some("host:port")),
            (with(|c| c.namesrv_addrs = vec![":9876".into()]), Some("host:port")),
            (with(|c| c.namesrv_addrs = vec!["h:0".into()]), Some("host:port")),
            (with(|c| c.namesrv_addrs = vec!["h:9876".into(), "10.0.0.1:9877".into()]), None),
            (with(|c| c.cluster_name = String::new()), Some("cluster_name")),
            (with(|c| c.broker_name = "a b".into()), Some("broker_name")),
            (with(|c| (c.trace_topic_enable, c.msg_trace_topic_name) = (true, "MyTraces".into())), None),
            (with(|c| c.msg_trace_topic_name = "my.traces".into()), Some("msgTraceTopicName")),
            (with(|c| c.msg_trace_topic_name = String::new()), Some("msgTraceTopicName")),
            (with(|c| c.role = BrokerRole::Slave), Some("broker_id > 0")),
            (with(|c| c.broker_id = 1), Some("master has broker_id 0")),
            (with(|c| (c.role, c.broker_id) = (BrokerRole::Slave, 1)), Some("a slave needs its master")),
            (with(|c| (c.role, c.broker_id, c.namesrv_addrs) = (BrokerRole::Slave, 1, vec!["10.0.0.1:9876".into()])), None),
            (with(|c| (c.role, c.broker_id, c.ha_master_address) = (BrokerRole::Slave, 1, Some("10.0.0.1:10912".into()))), None),
            (with(|c| (c.role, c.broker_id, c.ha_master_address) = (BrokerRole::Slave, 1, Some("host:10912".into()))), Some("ip:port")),
            (with(|c| c.store_root = PathBuf::new()), Some("store_root")),
            // Controller mode: the controller decides id and role; its own keys checked.
            (with(|c| c.controller_mode = true), Some("needs controllerAddr")),
            (with(|c| (c.controller_mode, c.controller_addrs) = (true, vec!["c1:9878".into()])), None),
            (with(|c| (c.controller_mode, c.controller_addrs, c.role, c.broker_id) = (true, vec!["c1:9878".into()], BrokerRole::Slave, 0)), None),
            (with(|c| (c.controller_mode, c.controller_addrs) = (true, vec!["c1".into()])), Some("not \"host:port\"")),
            (with(|c| (c.controller_mode, c.controller_addrs) = (true, vec!["c:1".into(); 10])), Some("1 to 9")),
            (with(|c| (c.controller_mode, c.controller_addrs, c.broker_heartbeat_interval_ms) = (true, vec!["c:1".into()], 10_000)), Some("below controllerHeartBeatTimeoutMills")),
            (with(|c| (c.controller_mode, c.controller_addrs, c.min_in_sync_replicas) = (true, vec!["c:1".into()], 0)), Some("minInSyncReplicas")),
            (with(|c| (c.controller_mode, c.controller_addrs, c.min_in_sync_replicas) = (true, vec!["c:1".into()], 2)), Some("minInSyncReplicas=2 is not implemented yet")),
            (with(|c| (c.controller_mode, c.controller_addrs, c.check_sync_state_set_period_ms) = (true, vec!["c:1".into()], 0)), Some("checkSyncStateSetPeriod")),
            (with(|c| c.shard_count = 128), None),
            (with(|c| c.shard_count = 129), Some("shard_count 129")),
            (with(|c| c.cpu_list = Some(vec![])), Some("cpu_list")),
            (with(|c| c.cpu_list = Some(vec![1, 1])), Some("without repeats")),
            (with(|c| (c.shard_count, c.cpu_list) = (3, Some(vec![0, 1]))), Some("2 CPUs for 3 shards")),
            (with(|c| (c.shard_count, c.cpu_list) = (2, Some(vec![4, 6, 8]))), None),
            (with(|c| c.cpu_list = Some(vec![5, 7])), None),
            (with(|c| c.default_topic_queue_nums = 0), Some("default_topic_queue_nums")),
            (with(|c| c.default_topic_queue_nums = 1025), Some("default_topic_queue_nums")),
            (with(|c| c.max_message_bytes = 0), Some("max_message_bytes")),
            (with(|c| c.spin_before_park_us = SPIN_BEFORE_PARK_US_MAX), None),
            (with(|c| c.spin_before_park_us = SPIN_BEFORE_PARK_US_MAX + 1), Some("spin_before_park_us")),
            (with(|c| (c.store.dirty_bytes_max, c.store.checkpoint_lag_bytes_max) = (64 << 20, 100 << 20)), Some("checkpoint_lag_bytes_max")),
            (with(|c| c.max_message_bytes = MAX_MESSAGE_BYTES_LIMIT + 1), Some("max_message_bytes")),
            (with(|c| c.register_interval_ms = 0), Some("register_interval_ms must be positive")),
            (with(|c| c.pull_suspend_max_ms = 0), Some("pull_suspend_max_ms")),
            (with(|c| c.connections_per_shard_max = 0), Some("connections_per_shard_max")),
            (with(|c| c.forward_batch_max = 0), Some("forward_batch_max")),
            (with(|c| c.store.flush_interval_ms = 0), Some("flush_interval_ms")),
            // Above the force-clean watermark is allowed: Apache's diskMaxUsedSpaceRatio=88.
            (with(|c| c.store.disk_max_used_ratio = 0.95), None),
            (with(|c| c.store.disk_max_used_ratio = 1.5), Some("disk_max_used_ratio 1.5 is not a fraction")),
            (with(|c| c.store.disk_force_clean_ratio = -0.1), Some("disk_force_clean_ratio -0.1 is not a fraction")),
            (with(|c| c.store.disk_refuse_ratio = f64::NAN), Some("disk_refuse_ratio NaN is not a fraction")),
            (with(|c| c.store.disk_force_clean_ratio = 0.91), Some("disk_force_clean_ratio 0.91 must not exceed disk_refuse_ratio 0.9")),
            (with(|c| (c.store.disk_force_clean_ratio, c.store.disk_refuse_ratio) = (0.9, 0.9)), None),
            (with(|c| c.store.clean_file_forcibly = false), None),
            (with(|c| c.store.delete_files_per_pass_max = 0), Some("delete_files_per_pass_max")),
            (with(|c| c.store.delete_files_per_pass_max = 1), None),
            (with(|c| c.store.segment_bytes = 4096), Some("segment_bytes")),
            (with(|c| c.store.segment_bytes = (1 << 20) + 1), Some("multiple of 4096")),
            (with(|c| c.store.delete_when_hours = vec![24]), Some("delete_when_hour")),
            (with(|c| c.store.delete_when_hours = Vec::new()), Some("delete_when_hours")),
            // Messages larger than the flush window or a segment do not fit the store.
            (with(|c| c.store.dirty_bytes_max = 1 << 20), Some("dirty_bytes_max 1048576")),
            (with(|c| (c.max_message_bytes, c.store.dirty_bytes_max) = (512 << 10, 1 << 20)), None),
            (with(|c| c.max_message_bytes = MAX_MESSAGE_BYTES_LIMIT), None),
            (with(|c| (c.max_message_bytes, c.store.segment_bytes) = (MAX_MESSAGE_BYTES_LIMIT, 8 << 20)), Some("does not fit the store")),
            (with(|c| (c.max_message_bytes, c.store.segment_bytes) = ((4 << 20) - (64 << 10) - 8, 4 << 20)), None),
            (with(|c| (c.max_message_bytes, c.store.segment_bytes) = ((4 << 20) - (64 << 10) - 7, 4 << 20)), Some("segment_bytes 4194304 - 8")),
            (with(|c| c.short_polling_time_ms = 0), Some("shortPollingTimeMills")),
            (with(|c| c.short_polling_time_ms = SHORT_POLLING_TIME_MS_MAX + 1), Some("shortPollingTimeMills")),
            (with(|c| (c.long_polling_enable, c.short_polling_time_ms) = (false, SHORT_POLLING_TIME_MS_MAX)), None),
            // RocketMQ 5's auth: not with the plain ACL; whitelists and the first user checked.
            (with(|c| (c.acl_enable, c.authentication_enabled) = (true, true)), Some("cannot both be on")),
            (with(|c| (c.acl_enable, c.authorization_enabled) = (true, true)), Some("cannot both be on")),
            (with(|c| (c.authentication_enabled, c.authorization_enabled) = (true, true)), None),
            (with(|c| c.authentication_whitelist = Some("34, 46".into())), None),
            (with(|c| c.authorization_whitelist = Some("34,HEART_BEAT".into())), Some("authorizationWhitelist: `HEART_BEAT` is not a request code")),
            (with(|c| c.init_authentication_user = Some(r#"{"username":"admin","password":"admin-pw"}"#.into())), None),
            (with(|c| c.init_authentication_user = Some(r#"{"username":"admin"}"#.into())), Some("initAuthenticationUser: password can not be blank")),
            (with(|c| c.init_authentication_user = Some("admin:pw".into())), Some("initAuthenticationUser: expected {\"username\"")),
            (with(|c| c.ha_auth_secret = Some(String::new())), None),
            (with(|c| c.ha_auth_secret = Some("x".repeat(HA_AUTH_SECRET_BYTES_MIN))), None),
            (with(|c| c.ha_auth_secret = Some("x".repeat(HA_AUTH_SECRET_BYTES_MIN - 1))), Some("haAuthSecret has 15 bytes")),
            (with(|c| c.ha_auth_secret = Some("x".repeat(HA_AUTH_SECRET_BYTES_MAX + 1))), Some("haAuthSecret has 1025 bytes")),
        ];
        for (config, expected) in cases {
            match (config.validate(), expected) {
                (Ok(()), None) => {}
                (Err(e), Some(fragment)) => assert!(e.to_string().contains(fragment), "{e} lacks {fragment}"),
                (got, want) => panic!("{config:?}: got {got:?}, expected error {want:?}"),
            }
        }
    }
}
