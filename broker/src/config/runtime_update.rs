//! Changing a running broker's configuration (UPDATE_BROKER_CONFIG, mqadmin
//! updateBrokerConfig): which `broker.conf` keys may change at runtime, how an update
//! body is checked, and the configuration it gives.
//!
//! Invariant: an update is all or nothing: every key is a runtime key and every value
//! passes the same check as in a `broker.conf` file (`apply_conf_key`), or nothing is
//! taken and the error names what was refused.
//! Invariant: a checked update cannot fail when applied (`with_runtime_update` stops
//! the process if it does: the check and the apply disagree).

use super::broker_conf::apply_conf_key;
use super::{BrokerConfig, BROKER_CONF_KEYS};
use thiserror::Error;

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
    "autoCreateSubscriptionGroup",
    "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInMemory",
    "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInDisk",
    "storeReplyMessageEnable",
    "defaultTopicQueueNums",
    "autoCreateTopicEnable",
    "enablePropertyFilter",
    "traceOn",
    "rejectTransactionMessage",
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio",
    "cleanFileForciblyEnable",
    "deleteFileBatchMax",
];

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
    let pairs = split_update_lines(body)?;
    if pairs.is_empty() {
        return Err(RuntimeUpdateError::Empty);
    }
    refuse_start_up_keys(&pairs)?;
    check_values(&pairs)?;
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

/// Refuses the update if any key is not a runtime key, naming every such key (and
/// which of them RingMQ does not read at all).
fn refuse_start_up_keys(pairs: &[(String, String)]) -> Result<(), RuntimeUpdateError> {
    let refused: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| !RUNTIME_CONF_KEYS.contains(&k.as_str()))
        .map(|(k, _)| if BROKER_CONF_KEYS.contains(&k.as_str()) { format!("`{k}`") } else { format!("`{k}` (not a RingMQ key)") })
        .collect();
    if !refused.is_empty() {
        return Err(RuntimeUpdateError::NotRuntime { keys: refused.join(", "), runtime: RUNTIME_CONF_KEYS.join(", ") });
    }
    Ok(())
}

/// Applies each pair to a throw-away configuration and validates it as a start-up
/// configuration is validated (bounds included): the first bad value refuses the update.
fn check_values(pairs: &[(String, String)]) -> Result<(), RuntimeUpdateError> {
    for (k, v) in pairs {
        let bad = |reason: String| RuntimeUpdateError::BadValue { key: k.clone(), value: v.clone(), reason };
        let mut probe = BrokerConfig::default();
        apply_conf_key(&mut probe, k, v).map_err(bad)?;
        probe.validate().map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `body` as an UPDATE_BROKER_CONFIG body; expects those pairs, or an error
    /// whose text contains the fragment.
    fn check(body: &str, expected: Result<&[(&str, &str)], &str>) {
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
        check("brokerPermission=4\n", Ok(&[("brokerPermission", "4")]));
        check("# comment\nslaveReadEnable = true\ntransactionCheckMax:3\n", Ok(&[("slaveReadEnable", "true"), ("transactionCheckMax", "3")]));
        check("", Err("no key=value"));
        check("brokerPermission", Err("not key=value"));
        check("brokerPermission=5", Err("brokerPermission=5: expected 6"));
        check("syncFlushTimeout=soon", Err("not a valid number"));
        check("listenPort=1\nbrokerPermission=4", Err("cannot change `listenPort` at runtime"));
        check("fileReservedTime=48\ndeleteWhen=04;16", Ok(&[("fileReservedTime", "48"), ("deleteWhen", "04;16")]));
        check("fileReservedTme=48", Err("`fileReservedTme` (not a RingMQ key)"));
        check("defaultTopicQueueNums=8\nautoCreateTopicEnable=true", Ok(&[("defaultTopicQueueNums", "8"), ("autoCreateTopicEnable", "true")]));
        // Bounds are a start-up configuration's.
        check("defaultTopicQueueNums=0", Err("default_topic_queue_nums 0 is not in 1..="));
        check("maxTransferCountOnMessageInMemory=5000", Err("not in 1..=1024"));
        let next = BrokerConfig::default().with_runtime_update(&[("brokerPermission".into(), "2".into()), ("transactionTimeOut".into(), "9000".into())]);
        assert_eq!((next.broker_permission, next.transaction_timeout_ms), (2, 9000));
        let conf: String = next.to_broker_conf().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert!(conf.contains("brokerPermission=2\n") && conf.contains("brokerTopicEnable=true\n"), "{conf}");
    }
}
