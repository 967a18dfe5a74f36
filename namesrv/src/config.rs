//! NameServer configuration: `ServerConfig` (every bound, with units in its name) and
//! the TOML file that may set some of them (`listen`, `broker_expiry_ms`,
//! `scan_interval_ms`, and the Prometheus exporter's `metrics_exporter_type`,
//! `metrics_prom_exporter_host`, `metrics_prom_exporter_port` — RocketMQ 5's broker and
//! controller keys, snake_case as in the broker's TOML; Apache's NamesrvConfig has no
//! metrics keys — and RingMQ's `metrics_prom_exporter_basic_auth`, `user:password`
//! every scrape must send). An empty exporter host binds 127.0.0.1 (not Apache's every
//! interface: exposing the endpoint is the operator's choice). `acl_enable` /
//! `plain_acl_file` (or the broker's `aclEnable` / `plainAclFile`) turn on the plain ACL
//! (`acl.rs`); a relative file is relative to the config file. TLS takes Apache's
//! `tls.server.*` keys under `[tls.server]` (`mode`, `cert_path`, `key_path`,
//! `need_client_auth`, `trust_cert_path`; camelCase accepted), as the broker's TOML.
//!
//! `enable_controller_in_namesrv = true` (Apache's `enableControllerInNamesrv`) with a
//! `[controller]` table (the controller's keys, `ringmq_controller::config`) starts the
//! controller inside the NameServer process, on its own executor thread and port.
//!
//! Invariants: a file with any other key is refused with an error naming the key;
//! a `[controller]` table without `enable_controller_in_namesrv = true`, or the flag
//! without the table, is refused;
//! `ServerConfig::validate` refuses zero intervals and limits, so the server never
//! divides time by zero or accepts nothing, and refuses an exporter host that is not an
//! IP address before anything listens.

use crate::route::{RouteLimits, BROKER_EXPIRY_MS_DEFAULT};
use ringmq_client::net::tls::TlsServerSettings;
use ringmq_client::remoting::frame::FRAME_LEN_MAX_BYTES;
use ringmq_client::remoting::FrameLimits;
use ringmq_controller::config::ControllerFileConfig;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// RocketMQ's NameServer port.
pub const LISTEN_DEFAULT: &str = "0.0.0.0:9876";
/// How often expired brokers are removed (DESIGN.md §5).
pub const SCAN_INTERVAL_MS_DEFAULT: u64 = 10_000;
/// Open connections at most; more are closed on accept.
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Responses queued on one connection are written once they reach this many bytes
/// (and always before the connection reads again).
pub const WRITE_QUEUE_BYTES_MAX_DEFAULT: usize = 1024 * 1024;
/// Bytes requested from the socket per read.
pub const READ_CHUNK_BYTES_DEFAULT: usize = 64 * 1024;
/// A connection silent this long is closed (Java: `serverChannelMaxIdleTimeSeconds`).
pub const CONNECTION_IDLE_TIMEOUT_MS_DEFAULT: u64 = 120_000;
/// A write that cannot finish within this is abandoned and the connection closed.
pub const WRITE_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The exporter's default port: RocketMQ 5 uses 5557 for both the broker and the
/// controller, so a NameServer on the same host as a broker (the usual quick-start
/// layout) would collide; the next port is RingMQ's choice.
pub const METRICS_PROM_PORT_DEFAULT: u16 = 5558;
/// How often the server thread publishes its metrics snapshot for the exporter (a scrape
/// is at most this old).
pub const METRICS_PUBLISH_INTERVAL_MS_DEFAULT: u64 = 1_000;

/// Where metrics go (RocketMQ 5's `metricsExporterType`): nowhere, or a Prometheus
/// endpoint (`GET /metrics`). RocketMQ's OTLP_GRPC and LOG exporters are not built.
/// The file takes `disable`/`prom` (as the broker's TOML) or Java's `DISABLE`/`PROM`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum MetricsExporter {
    #[default]
    #[serde(alias = "DISABLE")]
    Disable,
    #[serde(alias = "PROM")]
    Prom,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("config `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error("TLS: {0}")]
    Tls(#[from] ringmq_client::net::tls::TlsError),
    #[error("[controller]: {0}")]
    Controller(#[from] ringmq_controller::config::ConfigError),
}

/// Everything the server needs. `Default` is the production setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub broker_expiry_ms: u64,
    pub scan_interval_ms: u64,
    pub connections_max: usize,
    pub write_queue_bytes_max: usize,
    pub read_chunk_bytes: usize,
    pub connection_idle_timeout_ms: u64,
    pub write_timeout_ms: u64,
    /// Register bodies of large brokers can pass the 4 MiB message limit, so a body
    /// may fill the whole 16 MiB frame here.
    pub frame_limits: FrameLimits,
    pub route_limits: RouteLimits,
    pub metrics_exporter_type: MetricsExporter,
    /// IP address the exporter binds; empty = 127.0.0.1 (Java's "" binds every
    /// address: an open scrape endpoint names every broker, so that is opt-in here).
    pub metrics_prom_exporter_host: String,
    /// 0 picks a free port (tests); `ServerHandle::metrics_addr` tells which.
    pub metrics_prom_exporter_port: u16,
    /// `user:password` every scrape must send as HTTP basic auth; `None`: no auth.
    pub metrics_prom_exporter_basic_auth: Option<String>,
    pub metrics_publish_interval_ms: u64,
    /// The plain ACL (`acl_enable`): every request is checked against `plain_acl_file`.
    pub acl_enable: bool,
    pub plain_acl_file: Option<PathBuf>,
    /// What the port accepts (Apache's `tls.server.*`); disabled by default.
    pub tls: TlsServerSettings,
    /// The embedded controller (`enable_controller_in_namesrv`), on its own port.
    pub controller: Option<ControllerFileConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 9876)),
            broker_expiry_ms: BROKER_EXPIRY_MS_DEFAULT,
            scan_interval_ms: SCAN_INTERVAL_MS_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            write_queue_bytes_max: WRITE_QUEUE_BYTES_MAX_DEFAULT,
            read_chunk_bytes: READ_CHUNK_BYTES_DEFAULT,
            connection_idle_timeout_ms: CONNECTION_IDLE_TIMEOUT_MS_DEFAULT,
            write_timeout_ms: WRITE_TIMEOUT_MS_DEFAULT,
            frame_limits: FrameLimits {
                frame_len_max_bytes: FRAME_LEN_MAX_BYTES,
                body_len_max_bytes: FRAME_LEN_MAX_BYTES,
            },
            route_limits: RouteLimits::default(),
            metrics_exporter_type: MetricsExporter::Disable,
            metrics_prom_exporter_host: String::new(),
            metrics_prom_exporter_port: METRICS_PROM_PORT_DEFAULT,
            metrics_prom_exporter_basic_auth: None,
            metrics_publish_interval_ms: METRICS_PUBLISH_INTERVAL_MS_DEFAULT,
            acl_enable: false,
            plain_acl_file: None,
            tls: TlsServerSettings::default(),
            controller: None,
        }
    }
}

/// The keys a config file may set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<SocketAddr>,
    pub broker_expiry_ms: Option<u64>,
    pub scan_interval_ms: Option<u64>,
    pub metrics_exporter_type: Option<MetricsExporter>,
    pub metrics_prom_exporter_host: Option<String>,
    pub metrics_prom_exporter_port: Option<u16>,
    pub metrics_prom_exporter_basic_auth: Option<String>,
    /// The plain ACL, as the broker's `aclEnable` (both spellings accepted).
    #[serde(alias = "aclEnable")]
    pub acl_enable: Option<bool>,
    /// The broker's `plainAclFile`; relative to the config file's directory, and by
    /// default `plain_acl.yml` beside it (Apache's `conf/plain_acl.yml`).
    #[serde(alias = "plainAclFile")]
    pub plain_acl_file: Option<PathBuf>,
    /// `[tls.server]`: Apache's `tls.server.*` keys.
    pub tls: Option<TlsFile>,
    /// Apache's `enableControllerInNamesrv`: run the controller in this process.
    #[serde(alias = "enableControllerInNamesrv")]
    pub enable_controller_in_namesrv: Option<bool>,
    /// `[controller]`: the controller's keys (as `ringmq-controller`'s TOML file).
    pub controller: Option<ControllerTable>,
}

/// The `[controller]` table as written; `FileConfig::controller_config` validates it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct ControllerTable(pub toml::Table);

// Floats are refused when the table is validated, so equality is reflexive on every
// table that is used.
impl Eq for ControllerTable {}

/// The file's `[tls]` table: the NameServer only serves, so only `server`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFile {
    pub server: Option<TlsServerSettings>,
}

/// The ACL file's name beside the config file when `plain_acl_file` is not set.
pub const PLAIN_ACL_FILE_NAME: &str = "plain_acl.yml";

impl FileConfig {
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse { path: path.to_path_buf(), source })
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let mut file = Self::parse(&text, path)?;
        file.resolve_acl_file(path.parent().unwrap_or(Path::new(".")));
        Ok(file)
    }

    /// Makes `plain_acl_file` absolute against `dir` (the config file's directory), and
    /// names `dir/plain_acl.yml` when the ACL is on and no file is named.
    pub fn resolve_acl_file(&mut self, dir: &Path) {
        match &self.plain_acl_file {
            Some(p) if p.is_relative() => self.plain_acl_file = Some(dir.join(p)),
            Some(_) => {}
            None if self.acl_enable == Some(true) => self.plain_acl_file = Some(dir.join(PLAIN_ACL_FILE_NAME)),
            None => {}
        }
    }

    /// The embedded controller's configuration: `None` unless
    /// `enable_controller_in_namesrv = true`, which needs the `[controller]` table.
    pub fn controller_config(&self) -> Result<Option<ControllerFileConfig>, ConfigError> {
        match (self.enable_controller_in_namesrv.unwrap_or(false), &self.controller) {
            (false, None) => Ok(None),
            (true, Some(table)) => Ok(Some(ControllerFileConfig::from_toml_table(&table.0)?)),
            (true, None) => Err(ConfigError::Invalid {
                key: "enable_controller_in_namesrv",
                reason: "needs a [controller] table (controller_dleger_peers, controller_dleger_self_id, ...)".into(),
            }),
            (false, Some(_)) => Err(ConfigError::Invalid {
                key: "enable_controller_in_namesrv",
                reason: "a [controller] table is set but the controller is not enabled (enable_controller_in_namesrv = true)".into(),
            }),
        }
    }

    /// Overrides `config` with the keys the file sets.
    pub fn apply(&self, config: &mut ServerConfig) {
        if let Some(v) = self.listen {
            config.listen = v;
        }
        if let Some(v) = self.broker_expiry_ms {
            config.broker_expiry_ms = v;
        }
        if let Some(v) = self.scan_interval_ms {
            config.scan_interval_ms = v;
        }
        if let Some(v) = self.metrics_exporter_type {
            config.metrics_exporter_type = v;
        }
        if let Some(v) = &self.metrics_prom_exporter_host {
            config.metrics_prom_exporter_host = v.clone();
        }
        if let Some(v) = self.metrics_prom_exporter_port {
            config.metrics_prom_exporter_port = v;
        }
        if let Some(v) = &self.metrics_prom_exporter_basic_auth {
            config.metrics_prom_exporter_basic_auth = Some(v.clone());
        }
        if let Some(v) = self.acl_enable {
            config.acl_enable = v;
        }
        if let Some(v) = &self.plain_acl_file {
            config.plain_acl_file = Some(v.clone());
        }
        if let Some(TlsFile { server: Some(v) }) = &self.tls {
            config.tls = v.clone();
        }
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("broker_expiry_ms", self.broker_expiry_ms),
            ("scan_interval_ms", self.scan_interval_ms),
            ("connection_idle_timeout_ms", self.connection_idle_timeout_ms),
            ("write_timeout_ms", self.write_timeout_ms),
            ("connections_max", self.connections_max as u64),
            ("write_queue_bytes_max", self.write_queue_bytes_max as u64),
            ("read_chunk_bytes", self.read_chunk_bytes as u64),
            ("metrics_publish_interval_ms", self.metrics_publish_interval_ms),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid { key, reason: "must be greater than 0".into() });
            }
        }
        self.metrics_addr()?;
        self.metrics_basic_auth()?;
        if self.acl_enable && self.plain_acl_file.is_none() {
            return Err(ConfigError::Invalid { key: "acl_enable", reason: "needs plain_acl_file (or a config file with plain_acl.yml beside it)".into() });
        }
        self.tls.check()?;
        Ok(())
    }

    /// The scrape credentials; `Err` says why they are refused (never echoing them).
    pub fn metrics_basic_auth(&self) -> Result<Option<metrics_export::BasicAuth>, ConfigError> {
        let Some(text) = self.metrics_prom_exporter_basic_auth.as_deref() else { return Ok(None) };
        metrics_export::BasicAuth::parse(text.trim())
            .map(Some)
            .map_err(|e| ConfigError::Invalid { key: "metrics_prom_exporter_basic_auth", reason: e.to_string() })
    }

    /// Where the Prometheus exporter listens; `None` when it is disabled.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        if self.metrics_exporter_type == MetricsExporter::Disable {
            return Ok(None);
        }
        let host = self.metrics_prom_exporter_host.trim();
        // `[::1]` as written in URLs is accepted too.
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let ip = if host.is_empty() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.parse().map_err(|e| ConfigError::Invalid {
                key: "metrics_prom_exporter_host",
                reason: format!("`{host}` is not an IP address: {e}"),
            })?
        };
        Ok(Some(SocketAddr::new(ip, self.metrics_prom_exporter_port)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<FileConfig, &str>) {
        let got = FileConfig::parse(text, Path::new("n.toml")).map_err(|e| e.to_string());
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{text}"),
            (Err(got), Err(needle)) => assert!(got.contains(needle), "{text}: {got} lacks {needle}"),
            (got, expected) => panic!("{text}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn file_config() {
        check("", Ok(FileConfig::default()));
        check(
            "listen = \"127.0.0.1:9877\"\nbroker_expiry_ms = 5000\nscan_interval_ms = 100\n",
            Ok(FileConfig {
                listen: Some("127.0.0.1:9877".parse().unwrap()),
                broker_expiry_ms: Some(5000),
                scan_interval_ms: Some(100),
                ..FileConfig::default()
            }),
        );
        check("listen_addr = \"x\"", Err("unknown field `listen_addr`"));
        check("listen = \"nope\"", Err("n.toml"));
        check("broker_expiry_ms = -1", Err("broker_expiry_ms"));
        let mut config = ServerConfig::default();
        FileConfig { scan_interval_ms: Some(7), ..FileConfig::default() }.apply(&mut config);
        assert_eq!((config.scan_interval_ms, config.broker_expiry_ms), (7, 120_000));
        assert!(config.validate().is_ok());
        config.scan_interval_ms = 0;
        assert_eq!(config.validate().unwrap_err().to_string(), "config `scan_interval_ms`: must be greater than 0");
        assert_eq!(LISTEN_DEFAULT.parse::<SocketAddr>().unwrap(), ServerConfig::default().listen);
    }

    #[test]
    fn metrics_keys() {
        let prom = |host: Option<&str>, port: Option<u16>| FileConfig {
            metrics_exporter_type: Some(MetricsExporter::Prom),
            metrics_prom_exporter_host: host.map(str::to_string),
            metrics_prom_exporter_port: port,
            ..FileConfig::default()
        };
        check("metrics_exporter_type = \"prom\"", Ok(prom(None, None)));
        check("metrics_exporter_type = \"PROM\"", Ok(prom(None, None)));
        check(
            "metrics_exporter_type = \"disable\"",
            Ok(FileConfig { metrics_exporter_type: Some(MetricsExporter::Disable), ..FileConfig::default() }),
        );
        check(
            "metrics_exporter_type = \"prom\"\nmetrics_prom_exporter_host = \"127.0.0.1\"\nmetrics_prom_exporter_port = 0",
            Ok(prom(Some("127.0.0.1"), Some(0))),
        );
        check(
            "metrics_exporter_type = \"log\"",
            Err("unknown variant `log`, expected one of `DISABLE`, `disable`, `PROM`, `prom`"),
        );
        check("metrics_prom_exporter_port = 70000", Err("metrics_prom_exporter_port"));
        check("metricsExporterType = \"PROM\"", Err("unknown field `metricsExporterType`"));
    }

    #[test]
    fn metrics_addr() {
        // check(exporter type, host, port, expected address or error text)
        let check = |kind: MetricsExporter, host: &str, port: u16, expected: Result<Option<&str>, &str>| {
            let config = ServerConfig {
                metrics_exporter_type: kind,
                metrics_prom_exporter_host: host.into(),
                metrics_prom_exporter_port: port,
                ..ServerConfig::default()
            };
            let got = config.metrics_addr().map_err(|e| e.to_string());
            let expected = expected.map(|a| a.map(|a| a.parse::<SocketAddr>().unwrap()));
            match (got, expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{host}"),
                (Err(got), Err(needle)) => {
                    assert!(got.contains(needle), "{host}: {got} lacks {needle}");
                    assert!(config.validate().is_err(), "validate refuses it too");
                }
                (got, expected) => panic!("{host}: got {got:?}, expected {expected:?}"),
            }
        };
        check(MetricsExporter::Disable, "not an ip", 1, Ok(None));
        check(MetricsExporter::Prom, "", METRICS_PROM_PORT_DEFAULT, Ok(Some("127.0.0.1:5558")));
        check(MetricsExporter::Prom, "127.0.0.1", 0, Ok(Some("127.0.0.1:0")));
        check(MetricsExporter::Prom, "[::1]", 9, Ok(Some("[::1]:9")));
        check(MetricsExporter::Prom, "::1", 9, Ok(Some("[::1]:9")));
        check(
            MetricsExporter::Prom,
            "localhost",
            9,
            Err("config `metrics_prom_exporter_host`: `localhost` is not an IP address"),
        );
        // metrics_prom_exporter_basic_auth: `user:password`, checked by validate.
        for (auth, ok) in [(None, true), (Some("prom:pw"), true), (Some("prom"), false), (Some(":pw"), false)] {
            let config = ServerConfig { metrics_prom_exporter_basic_auth: auth.map(str::to_string), ..ServerConfig::default() };
            assert_eq!(config.validate().is_ok(), ok, "{auth:?}");
        }
        let defaults = ServerConfig::default();
        assert_eq!(
            (defaults.metrics_exporter_type, defaults.metrics_addr().unwrap()),
            (MetricsExporter::Disable, None)
        );
        let mut config = ServerConfig::default();
        prom_file().apply(&mut config);
        assert_eq!(config.metrics_addr().unwrap(), Some("127.0.0.1:0".parse().unwrap()));
        assert!(ServerConfig { metrics_publish_interval_ms: 0, ..config }.validate().is_err());
    }

    #[test]
    fn tls_keys() {
        use ringmq_client::net::tls::{ClientAuth, ServerMode};
        let file = "[tls.server]\nmode = \"enforcing\"\ncert_path = \"/c.pem\"\nkeyPath = \"/k.pem\"\nneed_client_auth = \"optional\"\ntrustCertPath = \"/ca.pem\"\n";
        let mut config = ServerConfig::default();
        FileConfig::parse(file, Path::new("n.toml")).unwrap().apply(&mut config);
        assert_eq!((config.tls.mode, config.tls.need_client_auth), (ServerMode::Enforcing, ClientAuth::Optional));
        assert_eq!(config.tls.trust_cert_path.as_deref(), Some(Path::new("/ca.pem")));
        assert!(config.validate().is_ok(), "files are read at start, not by validate");
        check("[tls.server]\nmodee = \"x\"", Err("unknown field `modee`"));
        check("[tls.client]\nenable = true", Err("unknown field `client`"));
        let mut config = ServerConfig::default();
        config.tls.mode = ServerMode::Permissive;
        assert!(config.validate().unwrap_err().to_string().contains("tls.server.certPath"));
        config.tls = TlsServerSettings { key_password: Some("pw".into()), ..TlsServerSettings::default() };
        assert!(config.validate().unwrap_err().to_string().contains("tls.server.keyPassword"));
    }

    #[test]
    fn controller_keys() {
        let parse = |text: &str| FileConfig::parse(text, Path::new("n.toml")).map_err(|e| e.to_string()).and_then(|f| f.controller_config().map_err(|e| e.to_string()));
        let check = |text: &str, expected: Result<Option<(u64, &str)>, &str>| match (parse(text), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got.map(|c| (c.self_id, c.listen.to_string())), want.map(|(i, l)| (i, l.to_string())), "{text}"),
            (Err(got), Err(needle)) => assert!(got.contains(needle), "{text}: {got} lacks {needle}"),
            (got, want) => panic!("{text}: got {got:?}, expected {want:?}"),
        };
        let table = "[controller]\ncontroller_dleger_peers = \"n0-127.0.0.1:9878;n1-127.0.0.1:9868\"\ncontroller_dleger_self_id = \"n1\"\n";
        check("", Ok(None));
        check(&format!("enable_controller_in_namesrv = true\n{table}"), Ok(Some((1, "127.0.0.1:9868"))));
        check(&format!("enableControllerInNamesrv = true\n{table}"), Ok(Some((1, "127.0.0.1:9868"))));
        check("enable_controller_in_namesrv = false", Ok(None));
        check("enable_controller_in_namesrv = true", Err("needs a [controller] table"));
        check(table, Err("not enabled"));
        check(&format!("enable_controller_in_namesrv = true\n{table}brokerName = \"x\"\n"), Err("unknown key `brokerName`"));
        check("enable_controller_in_namesrv = true\n[controller]\ncontroller_dleger_self_id = \"n0\"\n", Err("controllerDLegerPeers`: required"));
    }

    fn prom_file() -> FileConfig {
        FileConfig {
            metrics_exporter_type: Some(MetricsExporter::Prom),
            metrics_prom_exporter_host: Some("127.0.0.1".into()),
            metrics_prom_exporter_port: Some(0),
            ..FileConfig::default()
        }
    }
}
