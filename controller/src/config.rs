//! The controller's configuration file (docs/design/controller.md §4): Apache's
//! controller keys (`common/ControllerConfig.java`), read from Java properties (a file
//! ending in `.conf` or `.properties`: Apache's `controller-n0.conf` as is) or from TOML
//! (anything else; snake_case keys, camelCase accepted; the NameServer's `[controller]`
//! table uses `from_toml_table`).
//!
//! Owns: `ControllerFileConfig` (what the file says, validated), the key table `KEYS`
//! (every key accepted, with its TOML name), and the effective configuration as Java
//! properties (GET_CONTROLLER_CONFIG's body).
//!
//! Invariants: an unknown key is refused naming it (and its line, for properties); a key
//! set twice is refused; `controllerType` other than DLedger is refused (the built-in
//! Raft is what "DLedger" means here); the peers parse as `n<id>-host:port;…` with
//! distinct ids and the self id among them; keys Apache has but RingMQ replaces
//! (`scanNotActiveBrokerInterval`, `scanInactiveMasterInterval`: per-set timers;
//! `isProcessReadEvent`: reads are always linearizable) are accepted with no effect.

use crate::controller::{ControllerConfig, ELECT_MASTER_MAX_RETRY_COUNT_DEFAULT, WRITE_WAIT_MS_DEFAULT};
use crate::raft::NodeId;
use crate::server::{NodeConfig, CONNECTIONS_MAX_DEFAULT, CONNECTION_IDLE_TIMEOUT_MS_DEFAULT, WRITE_TIMEOUT_MS_DEFAULT};
use ringmq_client::remoting::FrameLimits;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Apache's `controllerDLegerGroup` default.
pub const GROUP_DEFAULT: &str = "DefaultControllerGroup";
/// The directory under `$HOME` Apache stores the controller in by default.
pub const STORE_DIR_DEFAULT: &str = "DledgerController";

/// Every key: (properties / camelCase name, TOML snake_case name).
pub const KEYS: &[(&str, &str)] = &[
    ("controllerDLegerGroup", "controller_dleger_group"),
    ("controllerDLegerPeers", "controller_dleger_peers"),
    ("controllerDLegerSelfId", "controller_dleger_self_id"),
    ("controllerStorePath", "controller_store_path"),
    ("controllerType", "controller_type"),
    ("enableElectUncleanMaster", "enable_elect_unclean_master"),
    ("notifyBrokerRoleChanged", "notify_broker_role_changed"),
    ("electMasterMaxRetryCount", "elect_master_max_retry_count"),
    ("scanNotActiveBrokerInterval", "scan_not_active_broker_interval"),
    ("scanInactiveMasterInterval", "scan_inactive_master_interval"),
    ("isProcessReadEvent", "is_process_read_event"),
    ("metricsExporterType", "metrics_exporter_type"),
    // RingMQ: where to listen (default: this node's peer address).
    ("listen", "listen"),
    // RingMQ: connections served at once.
    ("connectionsMax", "connections_max"),
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {reason}")]
    Toml { path: PathBuf, reason: String },
    #[error("line {line}: not `key = value`: {text}")]
    Syntax { line: usize, text: String },
    #[error("{at}unknown key `{key}` (known: {})", KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "))]
    UnknownKey { at: String, key: String },
    #[error("{at}`{key}` is set twice")]
    Duplicate { at: String, key: String },
    #[error("`{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
}

/// What the file says, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerFileConfig {
    pub group: String,
    /// Node id → address, every node.
    pub peers: BTreeMap<NodeId, String>,
    pub self_id: NodeId,
    pub store_path: PathBuf,
    pub enable_elect_unclean_master: bool,
    pub notify_broker_role_changed: bool,
    pub elect_master_max_retry_count: u32,
    pub listen: SocketAddr,
    pub connections_max: usize,
}

/// Keys as read, before validation.
#[derive(Default)]
struct Raw {
    values: BTreeMap<&'static str, String>,
}

impl Raw {
    fn set(&mut self, key: &str, value: String, at: &str) -> Result<(), ConfigError> {
        let Some((canonical, _)) = KEYS.iter().find(|(camel, snake)| *camel == key || *snake == key) else {
            return Err(ConfigError::UnknownKey { at: at.to_string(), key: key.to_string() });
        };
        if self.values.insert(canonical, value).is_some() {
            return Err(ConfigError::Duplicate { at: at.to_string(), key: key.to_string() });
        }
        Ok(())
    }
}

fn parse_bool(key: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::Invalid { key, reason: format!("`{v}` is not true or false") }),
    }
}

fn parse_num<T: std::str::FromStr>(key: &'static str, v: &str) -> Result<T, ConfigError> {
    v.trim().parse().map_err(|_| ConfigError::Invalid { key, reason: format!("`{v}` is not a number") })
}

/// `n<digits>` → the digits.
fn node_id(key: &'static str, v: &str) -> Result<NodeId, ConfigError> {
    v.trim()
        .strip_prefix('n')
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| ConfigError::Invalid { key, reason: format!("`{v}` is not a node id like n0") })
}

/// `n0-127.0.0.1:9878;n1-…` (Apache's `controllerDLegerPeers`).
pub fn parse_peers(v: &str) -> Result<BTreeMap<NodeId, String>, ConfigError> {
    const KEY: &str = "controllerDLegerPeers";
    let mut peers = BTreeMap::new();
    for part in v.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((id, addr)) = part.split_once('-') else {
            return Err(ConfigError::Invalid { key: KEY, reason: format!("`{part}` is not n<id>-host:port") });
        };
        let id = node_id(KEY, id)?;
        let addr = addr.trim();
        if addr.rsplit_once(':').is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err()) {
            return Err(ConfigError::Invalid { key: KEY, reason: format!("`{addr}` is not host:port") });
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(ConfigError::Invalid { key: KEY, reason: format!("node n{id} is listed twice") });
        }
    }
    if peers.is_empty() {
        return Err(ConfigError::Invalid { key: KEY, reason: "no peers".into() });
    }
    Ok(peers)
}

impl ControllerFileConfig {
    /// Reads `path`: Java properties for `.conf` / `.properties`, TOML otherwise.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let props = matches!(path.extension().and_then(|e| e.to_str()), Some("conf" | "properties"));
        if props {
            Self::from_properties(&text)
        } else {
            let table: toml::Table =
                text.parse().map_err(|e: toml::de::Error| ConfigError::Toml { path: path.to_path_buf(), reason: e.to_string() })?;
            Self::from_toml_table(&table)
        }
    }

    /// Java properties (`key = value`, `key: value`, `#`/`!` comments).
    pub fn from_properties(text: &str) -> Result<Self, ConfigError> {
        let mut raw = Raw::default();
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                continue;
            }
            let Some(at) = trimmed.find(['=', ':']) else {
                return Err(ConfigError::Syntax { line: i + 1, text: trimmed.to_string() });
            };
            let (key, value) = (trimmed[..at].trim(), trimmed[at + 1..].trim());
            raw.set(key, value.to_string(), &format!("line {}: ", i + 1))?;
        }
        Self::validate(raw)
    }

    /// A TOML table (the file, or the NameServer's `[controller]`).
    pub fn from_toml_table(table: &toml::Table) -> Result<Self, ConfigError> {
        let mut raw = Raw::default();
        for (key, value) in table {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(ConfigError::Syntax { line: 0, text: format!("{key} = {other} (expected a string, number or boolean)") })
                }
            };
            raw.set(key, text, "")?;
        }
        Self::validate(raw)
    }

    fn validate(mut raw: Raw) -> Result<Self, ConfigError> {
        let mut take = |k: &'static str| raw.values.remove(k);
        let group = take("controllerDLegerGroup").unwrap_or_else(|| GROUP_DEFAULT.to_string());
        let peers = parse_peers(&take("controllerDLegerPeers").ok_or(ConfigError::Invalid {
            key: "controllerDLegerPeers",
            reason: "required (e.g. n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858)".into(),
        })?)?;
        let self_id = node_id(
            "controllerDLegerSelfId",
            &take("controllerDLegerSelfId")
                .ok_or(ConfigError::Invalid { key: "controllerDLegerSelfId", reason: "required (e.g. n0)".into() })?,
        )?;
        let Some(self_addr) = peers.get(&self_id) else {
            return Err(ConfigError::Invalid {
                key: "controllerDLegerSelfId",
                reason: format!("n{self_id} is not in controllerDLegerPeers"),
            });
        };
        if let Some(t) = take("controllerType") {
            if !t.trim().eq_ignore_ascii_case("DLedger") {
                return Err(ConfigError::Invalid {
                    key: "controllerType",
                    reason: format!("`{t}` is not supported: only DLedger (RingMQ's built-in Raft) is; jRaft is not"),
                });
            }
        }
        let store_path = match take("controllerStorePath") {
            Some(p) => PathBuf::from(p),
            None => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(STORE_DIR_DEFAULT),
        };
        let enable_elect_unclean_master =
            take("enableElectUncleanMaster").map(|v| parse_bool("enableElectUncleanMaster", &v)).transpose()?.unwrap_or(false);
        let notify_broker_role_changed =
            take("notifyBrokerRoleChanged").map(|v| parse_bool("notifyBrokerRoleChanged", &v)).transpose()?.unwrap_or(true);
        let elect_master_max_retry_count = take("electMasterMaxRetryCount")
            .map(|v| parse_num("electMasterMaxRetryCount", &v))
            .transpose()?
            .unwrap_or(ELECT_MASTER_MAX_RETRY_COUNT_DEFAULT);
        if elect_master_max_retry_count == 0 {
            return Err(ConfigError::Invalid { key: "electMasterMaxRetryCount", reason: "must be at least 1".into() });
        }
        for ignored in ["scanNotActiveBrokerInterval", "scanInactiveMasterInterval"] {
            if let Some(v) = take(ignored) {
                parse_num::<u64>(ignored, &v)?;
            }
        }
        if let Some(v) = take("isProcessReadEvent") {
            parse_bool("isProcessReadEvent", &v)?;
        }
        if let Some(v) = take("metricsExporterType") {
            if !v.trim().eq_ignore_ascii_case("disable") {
                return Err(ConfigError::Invalid {
                    key: "metricsExporterType",
                    reason: format!("`{v}`: the controller exports no metrics yet (only DISABLE)"),
                });
            }
        }
        let listen = match take("listen") {
            Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid { key: "listen", reason: format!("`{v}` is not ip:port") })?,
            None => self_addr.parse().map_err(|_| ConfigError::Invalid {
                key: "listen",
                reason: format!("this node's peer address `{self_addr}` is not ip:port; set listen"),
            })?,
        };
        let connections_max =
            take("connectionsMax").map(|v| parse_num("connectionsMax", &v)).transpose()?.unwrap_or(CONNECTIONS_MAX_DEFAULT);
        if connections_max == 0 {
            return Err(ConfigError::Invalid { key: "connectionsMax", reason: "must be at least 1".into() });
        }
        debug_assert!(raw.values.is_empty(), "a key in KEYS is not read: {:?}", raw.values.keys());
        Ok(Self {
            group,
            peers,
            self_id,
            store_path,
            enable_elect_unclean_master,
            notify_broker_role_changed,
            elect_master_max_retry_count,
            listen,
            connections_max,
        })
    }

    /// The effective configuration as Java properties (GET_CONTROLLER_CONFIG).
    pub fn to_properties(&self) -> String {
        let peers: Vec<String> = self.peers.iter().map(|(id, a)| format!("n{id}-{a}")).collect();
        [
            ("controllerDLegerGroup", self.group.clone()),
            ("controllerDLegerPeers", peers.join(";")),
            ("controllerDLegerSelfId", format!("n{}", self.self_id)),
            ("controllerStorePath", self.store_path.display().to_string()),
            ("controllerType", "DLedger".to_string()),
            ("enableElectUncleanMaster", self.enable_elect_unclean_master.to_string()),
            ("notifyBrokerRoleChanged", self.notify_broker_role_changed.to_string()),
            ("electMasterMaxRetryCount", self.elect_master_max_retry_count.to_string()),
            ("listen", self.listen.to_string()),
            ("connectionsMax", self.connections_max.to_string()),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
    }

    /// The node to start.
    pub fn node_config(&self) -> NodeConfig {
        NodeConfig {
            controller: ControllerConfig {
                group: self.group.clone(),
                node_id: self.self_id,
                peers: self.peers.clone(),
                enable_elect_unclean_master: self.enable_elect_unclean_master,
                write_wait_ms: WRITE_WAIT_MS_DEFAULT,
                notify_broker_role_changed: self.notify_broker_role_changed,
                elect_master_max_retry_count: self.elect_master_max_retry_count,
                properties: self.to_properties(),
            },
            store_path: self.store_path.clone(),
            listen: self.listen,
            connections_max: self.connections_max,
            frame_limits: FrameLimits::default(),
            connection_idle_timeout_ms: CONNECTION_IDLE_TIMEOUT_MS_DEFAULT,
            write_timeout_ms: WRITE_TIMEOUT_MS_DEFAULT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N0: &str = "controllerDLegerGroup = group1\ncontrollerDLegerPeers = n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858\ncontrollerDLegerSelfId = n0\n";

    /// Parses `text` (properties when `props`, else TOML) and compares a summary
    /// (`group|self|peers|store|unclean|notify|retry|listen`) or the error's text.
    fn check(props: bool, text: &str, expected: Result<&str, &str>) {
        let parsed = if props {
            ControllerFileConfig::from_properties(text)
        } else {
            match text.parse::<toml::Table>() {
                Ok(t) => ControllerFileConfig::from_toml_table(&t),
                Err(e) => panic!("test TOML does not parse: {e}"),
            }
        };
        match (parsed, expected) {
            (Ok(c), Ok(want)) => {
                let peers: Vec<String> = c.peers.iter().map(|(i, a)| format!("{i}={a}")).collect();
                let got = format!(
                    "{}|n{}|{}|{}|{}|{}|{}|{}",
                    c.group,
                    c.self_id,
                    peers.join(","),
                    if c.store_path.ends_with(STORE_DIR_DEFAULT) { "default".to_string() } else { c.store_path.display().to_string() },
                    c.enable_elect_unclean_master,
                    c.notify_broker_role_changed,
                    c.elect_master_max_retry_count,
                    c.listen
                );
                assert_eq!(got, want, "{text}");
            }
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text}: error `{e}` lacks `{want}`"),
            (got, want) => panic!("{text}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn properties_files() {
        // Apache's cluster-3n-independent/controller-n0.conf as is (comments included).
        let apache = format!("# Licensed to the Apache Software Foundation\n!another comment\n\n{N0}");
        check(true, &apache, Ok("group1|n0|0=127.0.0.1:9878,1=127.0.0.1:9868,2=127.0.0.1:9858|default|false|true|3|127.0.0.1:9878"));
        check(
            true,
            &format!("{N0}controllerStorePath=/data/c\nenableElectUncleanMaster=true\nnotifyBrokerRoleChanged:false\nelectMasterMaxRetryCount=5\ncontrollerType=DLedger\nscanInactiveMasterInterval=5000\nisProcessReadEvent=false\nlisten=0.0.0.0:9878\n"),
            Ok("group1|n0|0=127.0.0.1:9878,1=127.0.0.1:9868,2=127.0.0.1:9858|/data/c|true|false|5|0.0.0.0:9878"),
        );
        // The standalone sample: one peer, default group.
        check(true, "controllerDLegerPeers = n0-127.0.0.1:9878\ncontrollerDLegerSelfId = n0", Ok("DefaultControllerGroup|n0|0=127.0.0.1:9878|default|false|true|3|127.0.0.1:9878"));
        check(true, &format!("{N0}brokerRole=SLAVE\n"), Err("line 4: unknown key `brokerRole`"));
        check(true, &format!("{N0}controllerDLegerSelfId=n1\n"), Err("line 4: `controllerDLegerSelfId` is set twice"));
        check(true, &format!("{N0}controllerType=jRaft\n"), Err("only DLedger"));
        check(true, &format!("{N0}enableElectUncleanMaster=yes\n"), Err("`yes` is not true or false"));
        check(true, &format!("{N0}electMasterMaxRetryCount=0\n"), Err("at least 1"));
        check(true, &format!("{N0}metricsExporterType=PROM\n"), Err("only DISABLE"));
        check(true, &format!("{N0}just a line\n"), Err("line 4: not `key = value`"));
        check(true, "controllerDLegerPeers = n0-127.0.0.1:9878\ncontrollerDLegerSelfId = n3", Err("n3 is not in controllerDLegerPeers"));
        check(true, "controllerDLegerPeers = n0-127.0.0.1:9878;n0-127.0.0.1:9879\ncontrollerDLegerSelfId = n0", Err("listed twice"));
        check(true, "controllerDLegerPeers = x0-127.0.0.1:9878\ncontrollerDLegerSelfId = n0", Err("not a node id"));
        check(true, "controllerDLegerPeers = n0-127.0.0.1\ncontrollerDLegerSelfId = n0", Err("not host:port"));
        check(true, "controllerDLegerSelfId = n0", Err("controllerDLegerPeers`: required"));
        check(true, "controllerDLegerPeers = n0-localhost:9878\ncontrollerDLegerSelfId = n0", Err("set listen"));
        check(true, "controllerDLegerPeers = n0-localhost:9878\ncontrollerDLegerSelfId = n0\nlisten=127.0.0.1:1", Ok("DefaultControllerGroup|n0|0=localhost:9878|default|false|true|3|127.0.0.1:1"));
    }

    #[test]
    fn toml_files() {
        check(
            false,
            "controller_dleger_group = \"g\"\ncontroller_dleger_peers = \"n0-127.0.0.1:1;n1-127.0.0.1:2\"\ncontroller_dleger_self_id = \"n1\"\ncontroller_store_path = \"/s\"\nelect_master_max_retry_count = 2\nenable_elect_unclean_master = true\n",
            Ok("g|n1|0=127.0.0.1:1,1=127.0.0.1:2|/s|true|true|2|127.0.0.1:2"),
        );
        // camelCase accepted, as in the NameServer's TOML.
        check(false, "controllerDLegerPeers = \"n0-127.0.0.1:1\"\ncontrollerDLegerSelfId = \"n0\"\nnotifyBrokerRoleChanged = false\n", Ok("DefaultControllerGroup|n0|0=127.0.0.1:1|default|false|false|3|127.0.0.1:1"));
        check(false, "controller_dleger_peers = \"n0-127.0.0.1:1\"\ncontroller_dleger_self_id = \"n0\"\nbroker_name = \"x\"\n", Err("unknown key `broker_name`"));
        check(false, "controller_dleger_peers = \"n0-127.0.0.1:1\"\ncontrollerDLegerPeers = \"n0-127.0.0.1:1\"\ncontroller_dleger_self_id = \"n0\"\n", Err("set twice"));
        check(false, "controller_dleger_peers = [\"n0-127.0.0.1:1\"]\ncontroller_dleger_self_id = \"n0\"\n", Err("expected a string"));
    }

    #[test]
    fn effective_properties_parse_back_to_the_same_config() {
        let c = ControllerFileConfig::from_properties(&format!("{N0}controllerStorePath=/x\nenableElectUncleanMaster=true\n")).unwrap();
        assert_eq!(ControllerFileConfig::from_properties(&c.to_properties()).unwrap(), c);
    }
}
