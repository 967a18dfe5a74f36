//! Changing a running broker's configuration (UPDATE_BROKER_CONFIG, mqadmin
//! updateBrokerConfig): which `broker.conf` keys are read only at start-up (and why),
//! how an update body is checked, and the configuration it gives.
//!
//! Every key `broker_conf.rs` maps (`BROKER_CONF_KEYS`) changes at runtime except the
//! start-up keys named here with their reason (`START_UP_CONF_KEYS`), as Apache's
//! `updateBrokerConfig` takes any key but its `configBlackList`. A key is runtime only
//! if its new value governs the broker right after the answer: either the broker reads
//! it at use (`Shard::config()`), or the change is handed to what copied it (the store:
//! `Store::set_runtime_config`; the NameServer registration: re-registered at once).
//!
//! Invariant: an update is all or nothing: every key is a runtime key, every value
//! parses as in a `broker.conf` file (`apply_conf_key`) and the configuration it gives
//! over the running one passes the start-up checks (`BrokerConfig::runtime_updated`:
//! the values together, not each over the defaults, so that a warning ratio below the
//! default force-clean ratio is taken when the running one is lower), or nothing is
//! taken and the error names what was refused and why.
//! Invariant: a checked update cannot fail when applied (`with_runtime_update` stops
//! the process if it does: the check and the apply disagree).

use super::broker_conf::apply_conf_key;
use super::conf_keys::{self, Unmapped};
use super::{BrokerConfig, BROKER_CONF_KEYS};
use thiserror::Error;

/// Keys UPDATE_BROKER_CONFIG refuses, each with why its value is read only at
/// start-up: every `broker.conf` key RingMQ maps but these changes at runtime. Also
/// `shardCount`, RingMQ's read-only key of GET_BROKER_CONFIG.
pub const START_UP_CONF_KEYS: &[(&str, &str)] = &[
    ("listenPort", "the client port is bound when the broker starts"),
    ("routeMode", "which shard owns a queue and the broker names clients route to are fixed when the broker starts"),
    ("shardCount", "queues are spread over the shards by hash when the broker starts; another count would move every queue"),
    ("metricsExporterType", "the metrics exporter is started when the broker starts"),
    ("metricsPromExporterHost", "the Prometheus endpoint is bound when the broker starts"),
    ("metricsPromExporterPort", "the Prometheus endpoint is bound when the broker starts"),
    ("metricsPromExporterBasicAuth", "the Prometheus endpoint's credentials are handed to its thread when the broker starts"),
    ("brokerClusterName", "the broker's identity: registered with the NameServers and named in the cluster topic created at start-up"),
    ("brokerName", "the broker's identity: its routes at the NameServers and the topic named after it"),
    ("brokerId", "the broker's identity: master (0) or slave at the NameServers and in replication"),
    ("brokerIP1", "the address every offsetMsgId and registration carries is fixed when the broker starts"),
    ("brokerRole", "a master and a slave run different tasks from start-up (replication stream, delivery of delayed and transactional messages)"),
    ("storePathRootDir", "the store is opened and locked when the broker starts"),
    ("storePathCommitLog", "the store is opened and locked when the broker starts"),
    ("flushDiskType", "the flush mode decides from start-up when sends are acknowledged and how CommitLog files are opened (O_DSYNC under sync flush)"),
    ("mappedFileSizeCommitLog", "the segment size is the CommitLog's file layout"),
    ("messageDelayLevel", "the levels fix the queues of SCHEDULE_TOPIC_XXXX and each queue's delivery progress: other levels would deliver waiting messages at another delay"),
    ("timerMaxDelaySec", "the timer wheel's bucket count (queues of rmq_sys_wheel_timer) is sized from it at start-up and places every waiting timer"),
    ("haListenPort", "the replication ports are bound when the broker starts"),
    ("haMasterAddress", "a slave's replication streams connect to their master from start-up (without it the slave follows the master the NameServers name)"),
    ("haAuthSecret", "a secret: set in the config file on the master and its slaves alike, never sent over the admin port nor kept in runtimeConfig"),
    ("traceTopicEnable", "the trace topic is created when the broker starts (updateTopic creates topics at runtime)"),
    ("msgTraceTopicName", "the trace topic is created when the broker starts (updateTopic creates topics at runtime)"),
    ("brokerTopicEnable", "the topic named after the broker is created when the broker starts (updateTopic and deleteTopic change topics at runtime)"),
    ("clusterTopicEnable", "the topic named after the cluster is created when the broker starts (updateTopic and deleteTopic change topics at runtime)"),
    ("aclEnable", "the ACL's rules are loaded on every shard when the broker starts (with it on, edits of plain_acl.yml are reloaded while it runs)"),
    ("plainAclFile", "the ACL file is located and loaded when the broker starts (with aclEnable, edits of that file are reloaded while it runs)"),
    ("tls.server.mode", "whether the client and replication ports speak TLS is fixed when their listeners start"),
    ("tls.server.certPath", "the certificate file is named when the broker starts (replace the file itself: it is reloaded within seconds, for new connections)"),
    ("tls.server.keyPath", "the key file is named when the broker starts (replace the file itself: it is reloaded within seconds, for new connections)"),
    ("tls.server.keyPassword", "encrypted private keys are not supported: decrypt the key"),
    ("tls.server.need.client.auth", "client authentication is part of the TLS configuration the ports are started with"),
    ("tls.server.trustCertPath", "the CA file is named when the broker starts (replace the file itself: it is reloaded within seconds, for new connections)"),
    ("useTLS", "the broker's own connections (NameServers, a slave's master) are set up when it starts"),
    ("tls.enable", "the broker's own connections (NameServers, a slave's master) are set up when it starts"),
    ("tls.client.certPath", "the client certificate file is named when the broker starts (replace the file itself: it is reloaded within seconds)"),
    ("tls.client.keyPath", "the client key file is named when the broker starts (replace the file itself: it is reloaded within seconds)"),
    ("tls.client.keyPassword", "encrypted private keys are not supported: decrypt the key"),
    ("tls.client.trustCertPath", "the CA file is named when the broker starts (replace the file itself: it is reloaded within seconds)"),
    ("tls.client.authServer", "how server certificates are checked is fixed when the broker starts"),
    ("tls.client.serverName", "the name server certificates are checked for is fixed when the broker starts"),
    ("authenticationEnabled", "every shard's checks are set up when the broker starts (users and ACLs change at runtime with createUser, createAcl and the other AUTH_* commands)"),
    ("authorizationEnabled", "every shard's checks are set up when the broker starts (users and ACLs change at runtime with createUser, createAcl and the other AUTH_* commands)"),
    ("authenticationWhitelist", "every shard's checks are set up when the broker starts"),
    ("authorizationWhitelist", "every shard's checks are set up when the broker starts"),
    ("initAuthenticationUser", "a secret, and the first user is created when the broker starts (createUser adds users at runtime)"),
    ("authenticationProvider", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("authenticationMetadataProvider", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("authenticationStrategy", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("authorizationProvider", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("authorizationMetadataProvider", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("authorizationStrategy", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("migrateAuthFromV1Enabled", "Apache's provider classes are checked when the broker starts (only the defaults exist)"),
    ("enableControllerMode", CONTROLLER_START_UP),
    ("controllerAddr", CONTROLLER_START_UP),
    ("controllerHeartBeatTimeoutMills", CONTROLLER_START_UP),
    ("brokerHeartbeatInterval", CONTROLLER_START_UP),
    ("syncBrokerMetadataPeriod", CONTROLLER_START_UP),
    ("syncControllerMetadataPeriod", CONTROLLER_START_UP),
    ("checkSyncStateSetPeriod", CONTROLLER_START_UP),
    ("allAckInSyncStateSet", CONTROLLER_START_UP),
    ("minInSyncReplicas", CONTROLLER_START_UP),
    ("inSyncReplicas", CONTROLLER_START_UP),
    ("haMaxTimeSlaveNotCatchup", CONTROLLER_START_UP),
    ("brokerElectionPriority", CONTROLLER_START_UP),
    ("masterLeaseEnable", CONTROLLER_START_UP),
    ("storePathBrokerIdentity", CONTROLLER_START_UP),
];

/// Why the controller-mode keys (issue 27) are start-up keys.
const CONTROLLER_START_UP: &str = "controller mode's settings are handed to its driver (shard 0) when the broker starts";

/// Why `key` cannot change at runtime, if it cannot (a start-up key).
pub fn start_up_reason(key: &str) -> Option<&'static str> {
    START_UP_CONF_KEYS.iter().find(|(k, _)| *k == key).map(|(_, why)| *why)
}

/// The `broker.conf` keys UPDATE_BROKER_CONFIG changes on a running broker: applied on
/// every shard before the answer, kept in `<store>/config/runtimeConfig` and applied
/// again at the next start (over the config file, said in the log).
pub fn runtime_conf_keys() -> impl Iterator<Item = &'static str> {
    BROKER_CONF_KEYS.iter().copied().filter(|k| start_up_reason(k).is_none())
}

/// Why a runtime update was refused (nothing was applied).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RuntimeUpdateError {
    #[error("no key=value lines in the body")]
    Empty,
    #[error("line `{0}` is not key=value")]
    Syntax(String),
    /// `refusals`: each refused key with why (`not_runtime_text`).
    #[error("RingMQ cannot change {refusals}; change the config file and restart the broker")]
    NotRuntime { refusals: String },
    #[error("{key}={value}: {reason}")]
    BadValue { key: String, value: String, reason: String },
    /// `update`: the body's `key=value` pairs; `reason`: the check they fail together.
    #[error("{update}: {reason}")]
    Invalid { update: String, reason: String },
}

/// What a refusal says of one key: "`key` at runtime: why" for a start-up key,
/// "`key` (not a RingMQ key…)" for any other, with why an Apache key that a
/// broker.conf may hold means nothing here (a thread pool, a cadence, ...).
fn not_runtime_text(key: &str, value: &str) -> String {
    if let Some(why) = start_up_reason(key) {
        return format!("`{key}` at runtime: {why}");
    }
    match conf_keys::classify(key, value, BROKER_CONF_KEYS) {
        Unmapped::Ignored(why) => format!("`{key}` (not a RingMQ key; it has no meaning here: {})", why.describe()),
        Unmapped::Refused(_) => format!("`{key}` (not a RingMQ key)"),
    }
}

/// Parses an UPDATE_BROKER_CONFIG body (`key=value` lines, RocketMQ properties form).
/// All keys must be runtime keys whose values parse, or nothing is taken. Whether the
/// values are within bounds and fit the running configuration is
/// `BrokerConfig::runtime_updated`.
pub fn parse_runtime_update(body: &str) -> Result<Vec<(String, String)>, RuntimeUpdateError> {
    let pairs = split_update_lines(body)?;
    if pairs.is_empty() {
        return Err(RuntimeUpdateError::Empty);
    }
    refuse_start_up_keys(&pairs)?;
    parse_values(&pairs)?;
    Ok(pairs)
}

/// The body's `key=value` (or `key:value`) lines, trimmed; blank and `#`/`!` comment
/// lines skipped.
fn split_update_lines(body: &str) -> Result<Vec<(String, String)>, RuntimeUpdateError> {
    let mut pairs = Vec::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!')) {
        let at = line.find(['=', ':']).ok_or_else(|| RuntimeUpdateError::Syntax(line.to_string()))?;
        pairs.push((line[..at].trim().to_string(), line[at + 1..].trim().to_string()));
    }
    Ok(pairs)
}

/// Refuses the update if any key is not a runtime key, naming every such key with why.
fn refuse_start_up_keys(pairs: &[(String, String)]) -> Result<(), RuntimeUpdateError> {
    let refused: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !BROKER_CONF_KEYS.contains(&k.as_str()) || start_up_reason(k).is_some())
        .map(|(k, v)| not_runtime_text(k, v))
        .collect();
    if !refused.is_empty() {
        return Err(RuntimeUpdateError::NotRuntime { refusals: refused.join("; ") });
    }
    Ok(())
}

/// Applies each pair to a throw-away configuration: the first value that does not
/// parse refuses the update.
fn parse_values(pairs: &[(String, String)]) -> Result<(), RuntimeUpdateError> {
    for (k, v) in pairs {
        let mut probe = BrokerConfig::default();
        apply_conf_key(&mut probe, k, v).map_err(|reason| RuntimeUpdateError::BadValue { key: k.clone(), value: v.clone(), reason })?;
    }
    Ok(())
}

impl BrokerConfig {
    /// This configuration with runtime keys changed (`pairs` from
    /// [`parse_runtime_update`]), checked whole as a start-up configuration is: a value
    /// out of bounds, or values that do not hold together over the running ones (a
    /// force-clean ratio above the refuse ratio, a `maxMessageSize` the store cannot
    /// hold, a slave left without a way to find its master) refuse the update.
    pub fn runtime_updated(&self, pairs: &[(String, String)]) -> Result<BrokerConfig, RuntimeUpdateError> {
        let next = self.with_runtime_update(pairs);
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        next.validate_runtime_update(&keys).map_err(|e| RuntimeUpdateError::Invalid {
            update: pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "),
            reason: e.to_string(),
        })?;
        Ok(next)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `body` as an UPDATE_BROKER_CONFIG body and checks it over the defaults;
    /// expects those pairs, or an error whose text contains the fragment.
    fn check(body: &str, expected: Result<&[(&str, &str)], &str>) {
        let got = parse_runtime_update(body).and_then(|pairs| BrokerConfig::default().runtime_updated(&pairs).map(|_| pairs));
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
        check("brokerPermission=4\n", Ok(&[("brokerPermission", "4")]));
        check("# comment\nslaveReadEnable = true\ntransactionCheckMax:3\n", Ok(&[("slaveReadEnable", "true"), ("transactionCheckMax", "3")]));
        check("", Err("no key=value"));
        check("brokerPermission", Err("not key=value"));
        check("brokerPermission=5", Err("brokerPermission=5: expected 6"));
        check("syncFlushTimeout=soon", Err("not a valid number"));
        check("listenPort=1\nbrokerPermission=4", Err("cannot change `listenPort` at runtime: the client port is bound when the broker starts; change the config file"));
        check("brokerName=x\nshardCount=2", Err("`brokerName` at runtime: the broker's identity: its routes at the NameServers and the topic named after it; `shardCount` at runtime: queues are spread"));
        check("fileReservedTime=48\ndeleteWhen=04;16", Ok(&[("fileReservedTime", "48"), ("deleteWhen", "04;16")]));
        check("fileReservedTme=48", Err("`fileReservedTme` (not a RingMQ key)"));
        check("flushCommitLogLeastPages=4", Err("`flushCommitLogLeastPages` (not a RingMQ key; it has no meaning here: page-cache"));
        check("sendMessageThreadPoolNums=16", Err("`sendMessageThreadPoolNums` (not a RingMQ key; it has no meaning here: Java thread pools"));
        check("aclEnable=true", Err("`aclEnable` at runtime: the ACL's rules are loaded on every shard when the broker starts"));
        check("defaultTopicQueueNums=8\nautoCreateTopicEnable=true", Ok(&[("defaultTopicQueueNums", "8"), ("autoCreateTopicEnable", "true")]));
        check("maxMessageSize=1024\nflushIntervalCommitLog=100\nnamesrvAddr=n1:9876;n2:9876", Ok(&[("maxMessageSize", "1024"), ("flushIntervalCommitLog", "100"), ("namesrvAddr", "n1:9876;n2:9876")]));
        check("longPollingEnable=false\nshortPollingTimeMills=200", Ok(&[("longPollingEnable", "false"), ("shortPollingTimeMills", "200")]));
        // Bounds are a start-up configuration's.
        check("defaultTopicQueueNums=0", Err("defaultTopicQueueNums=0: invalid configuration: default_topic_queue_nums 0 is not in 1..="));
        check("maxTransferCountOnMessageInMemory=5000", Err("not in 1..=1024"));
        check("maxMessageSize=0", Err("max_message_bytes 0 is not in 1..="));
        check("flushIntervalCommitLog=0", Err("flush_interval_ms must be positive"));
        check("shortPollingTimeMills=0", Err("shortPollingTimeMills) must be positive"));
        check("namesrvAddr=nowhere", Err("is not host:port"));
        let next = BrokerConfig::default().with_runtime_update(&[("brokerPermission".into(), "2".into()), ("transactionTimeOut".into(), "9000".into())]);
        assert_eq!((next.broker_permission, next.transaction_timeout_ms), (2, 9000));
        let conf: String = next.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert!(conf.contains("brokerPermission=2\n") && conf.contains("brokerTopicEnable=true\n"), "{conf}");
    }

    /// Every key broker.conf maps, classified: runtime, or start-up with (part of) the
    /// reason its refusal gives. A key added to `BROKER_CONF_KEYS` fails here until it
    /// is classified.
    #[test]
    fn every_mapped_key_is_classified() {
        use Class::*;
        #[derive(Debug, PartialEq)]
        enum Class {
            Runtime,
            StartUp(&'static str),
        }
        let table: &[(&str, Class)] = &[
            ("listenPort", StartUp("client port is bound")),
            ("routeMode", StartUp("which shard owns a queue")),
            ("metricsExporterType", StartUp("exporter is started")),
            ("metricsPromExporterHost", StartUp("endpoint is bound")),
            ("metricsPromExporterPort", StartUp("endpoint is bound")),
            ("metricsPromExporterBasicAuth", StartUp("credentials are handed")),
            ("namesrvAddr", Runtime),
            ("brokerClusterName", StartUp("identity")),
            ("brokerName", StartUp("identity")),
            ("brokerId", StartUp("identity")),
            ("brokerIP1", StartUp("offsetMsgId")),
            ("brokerRole", StartUp("master and a slave run different tasks")),
            ("storePathRootDir", StartUp("store is opened and locked")),
            ("storePathCommitLog", StartUp("store is opened and locked")),
            ("flushDiskType", StartUp("when sends are acknowledged")),
            ("flushIntervalCommitLog", Runtime),
            ("mappedFileSizeCommitLog", StartUp("file layout")),
            ("fileReservedTime", Runtime),
            ("deleteWhen", Runtime),
            ("diskMaxUsedSpaceRatio", Runtime),
            ("diskSpaceCleanForciblyRatio", Runtime),
            ("diskSpaceWarningLevelRatio", Runtime),
            ("cleanFileForciblyEnable", Runtime),
            ("deleteFileBatchMax", Runtime),
            ("maxMessageSize", Runtime),
            ("autoCreateTopicEnable", Runtime),
            ("defaultTopicQueueNums", Runtime),
            ("messageDelayLevel", StartUp("SCHEDULE_TOPIC_XXXX")),
            ("timerMaxDelaySec", StartUp("bucket count")),
            ("transactionTimeOut", Runtime),
            ("transactionCheckInterval", Runtime),
            ("transactionCheckMax", Runtime),
            ("rejectTransactionMessage", Runtime),
            ("haListenPort", StartUp("replication ports are bound")),
            ("haMasterAddress", StartUp("replication streams connect")),
            ("haAuthSecret", StartUp("a secret")),
            ("syncFlushTimeout", Runtime),
            ("slaveReadEnable", Runtime),
            ("enablePropertyFilter", Runtime),
            ("traceOn", Runtime),
            ("autoCreateSubscriptionGroup", Runtime),
            ("maxTransferCountOnMessageInMemory", Runtime),
            ("maxTransferBytesOnMessageInMemory", Runtime),
            ("maxTransferCountOnMessageInDisk", Runtime),
            ("maxTransferBytesOnMessageInDisk", Runtime),
            ("traceTopicEnable", StartUp("trace topic is created")),
            ("msgTraceTopicName", StartUp("trace topic is created")),
            ("storeReplyMessageEnable", Runtime),
            ("brokerPermission", Runtime),
            ("brokerTopicEnable", StartUp("named after the broker")),
            ("clusterTopicEnable", StartUp("named after the cluster")),
            ("aclEnable", StartUp("rules are loaded on every shard")),
            ("plainAclFile", StartUp("located and loaded")),
            ("innerClientAuthenticationCredentials", Runtime),
            ("authenticationEnabled", StartUp("checks are set up")),
            ("authorizationEnabled", StartUp("checks are set up")),
            ("authenticationWhitelist", StartUp("checks are set up")),
            ("authorizationWhitelist", StartUp("checks are set up")),
            ("initAuthenticationUser", StartUp("a secret")),
            ("authenticationProvider", StartUp("provider classes")),
            ("authenticationMetadataProvider", StartUp("provider classes")),
            ("authenticationStrategy", StartUp("provider classes")),
            ("authorizationProvider", StartUp("provider classes")),
            ("authorizationMetadataProvider", StartUp("provider classes")),
            ("authorizationStrategy", StartUp("provider classes")),
            ("migrateAuthFromV1Enabled", StartUp("provider classes")),
            ("longPollingEnable", Runtime),
            ("shortPollingTimeMills", Runtime),
            ("tls.server.mode", StartUp("listeners start")),
            ("tls.server.certPath", StartUp("reloaded within seconds")),
            ("tls.server.keyPath", StartUp("reloaded within seconds")),
            ("tls.server.keyPassword", StartUp("not supported")),
            ("tls.server.need.client.auth", StartUp("ports are started with")),
            ("tls.server.trustCertPath", StartUp("reloaded within seconds")),
            ("useTLS", StartUp("own connections")),
            ("tls.enable", StartUp("own connections")),
            ("tls.client.certPath", StartUp("reloaded within seconds")),
            ("tls.client.keyPath", StartUp("reloaded within seconds")),
            ("tls.client.keyPassword", StartUp("not supported")),
            ("tls.client.trustCertPath", StartUp("reloaded within seconds")),
            ("tls.client.authServer", StartUp("checked")),
            ("tls.client.serverName", StartUp("checked for")),
            ("enableControllerMode", StartUp("handed to its driver")),
            ("controllerAddr", StartUp("handed to its driver")),
            ("controllerHeartBeatTimeoutMills", StartUp("handed to its driver")),
            ("brokerHeartbeatInterval", StartUp("handed to its driver")),
            ("syncBrokerMetadataPeriod", StartUp("handed to its driver")),
            ("syncControllerMetadataPeriod", StartUp("handed to its driver")),
            ("checkSyncStateSetPeriod", StartUp("handed to its driver")),
            ("allAckInSyncStateSet", StartUp("handed to its driver")),
            ("minInSyncReplicas", StartUp("handed to its driver")),
            ("inSyncReplicas", StartUp("handed to its driver")),
            ("haMaxTimeSlaveNotCatchup", StartUp("handed to its driver")),
            ("brokerElectionPriority", StartUp("handed to its driver")),
            ("masterLeaseEnable", StartUp("handed to its driver")),
            ("storePathBrokerIdentity", StartUp("handed to its driver")),
        ];
        let listed: Vec<&str> = table.iter().map(|(k, _)| *k).collect();
        assert_eq!(listed, BROKER_CONF_KEYS, "the table lists every mapped key, in BROKER_CONF_KEYS order");
        for (key, class) in table {
            match (class, start_up_reason(key)) {
                (Runtime, None) => assert!(runtime_conf_keys().any(|k| k == *key), "{key}"),
                (StartUp(part), Some(why)) => {
                    assert!(why.contains(part), "{key}: {why:?} lacks {part:?}");
                    assert!(!runtime_conf_keys().any(|k| k == *key), "{key}");
                }
                (want, got) => panic!("{key}: expected {want:?}, start-up reason {got:?}"),
            }
        }
        // Every start-up key is a mapped key or GET_BROKER_CONFIG's `shardCount`.
        for (key, _) in START_UP_CONF_KEYS {
            assert!(BROKER_CONF_KEYS.contains(key) || *key == "shardCount", "{key}");
        }
    }

    /// Values that pass alone but not over the running configuration refuse the update.
    #[test]
    fn runtime_updates_are_checked_against_the_running_configuration() {
        // check(running, body, Ok(()) or Err(fragment))
        let check = |running: &BrokerConfig, body: &str, want: Result<(), &str>| {
            let pairs = parse_runtime_update(body).unwrap_or_else(|e| panic!("{body}: {e}"));
            match (running.runtime_updated(&pairs), want) {
                (Ok(next), Ok(())) => assert_eq!(next, running.with_runtime_update(&pairs), "{body}"),
                (Err(e), Err(part)) => assert!(e.to_string().contains(part), "{body}: {e}"),
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        };
        let defaults = BrokerConfig::default();
        check(&defaults, "diskSpaceCleanForciblyRatio=80", Ok(()));
        check(&defaults, "diskSpaceWarningLevelRatio=80", Err("disk_force_clean_ratio 0.85 must not exceed disk_refuse_ratio 0.8"));
        // Together, in either order, or over a running force-clean ratio below it.
        check(&defaults, "diskSpaceWarningLevelRatio=80\ndiskSpaceCleanForciblyRatio=75", Ok(()));
        check(&defaults, "diskSpaceCleanForciblyRatio=75\ndiskSpaceWarningLevelRatio=80", Ok(()));
        let lower = defaults.runtime_updated(&[("diskSpaceCleanForciblyRatio".into(), "75".into())]).expect("75 <= 90");
        check(&lower, "diskSpaceWarningLevelRatio=80", Ok(()));
        check(&defaults, "maxMessageSize=16711680", Ok(()));
        // The store's record bound comes from its geometry: 8 MiB segments hold less.
        let small = BrokerConfig::from_broker_conf_str("mappedFileSizeCommitLog=8388608").expect("parses");
        check(&small, "maxMessageSize=8000000", Ok(()));
        check(&small, "maxMessageSize=8388608", Err("does not fit the store"));
        // A slave without haMasterAddress needs a NameServer to name its master.
        let slave = BrokerConfig::from_broker_conf_str("brokerRole=SLAVE\nbrokerId=1\nnamesrvAddr=n:9876").expect("parses");
        check(&slave, "namesrvAddr=m:9876", Ok(()));
        check(&slave, "namesrvAddr=", Err("a slave needs its master"));
    }
}
