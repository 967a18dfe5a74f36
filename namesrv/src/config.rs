//! NameServer configuration: `ServerConfig` (every bound, with units in its name) and
//! the TOML file that may set three of them (`listen`, `broker_expiry_ms`,
//! `scan_interval_ms`).
//!
//! Invariants: a file with any other key is refused with an error naming the key;
//! `ServerConfig::validate` refuses zero intervals and limits, so the server never
//! divides time by zero or accepts nothing.

use crate::route::{RouteLimits, BROKER_EXPIRY_MS_DEFAULT};
use ringmq_client::remoting::frame::FRAME_LEN_MAX_BYTES;
use ringmq_client::remoting::FrameLimits;
use serde::Deserialize;
use std::net::SocketAddr;
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

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("config `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
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
}

impl FileConfig {
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse { path: path.to_path_buf(), source })
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
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
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid { key, reason: "must be greater than 0".into() });
            }
        }
        Ok(())
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
}
