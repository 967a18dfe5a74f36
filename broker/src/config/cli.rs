//! Command-line flags and how they override a configuration: built-in defaults ← the
//! `--config` file ← the flags given, then derived bounds and validation.
//!
//! Invariant: a flag given replaces the file's value; a flag not given leaves the
//! file's (or the default's) value as it was.
//! Invariant: `from_args` derives bounds after the last override and returns only a
//! config that passed `validate`.

use super::{split_addrs, BrokerConfig, BrokerRole, ConfigError, FlushKind, RouteMode};
use std::path::PathBuf;

/// Command-line flags; each one given overrides the configuration file.
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(
    name = "ringmq-broker",
    version,
    about = "RingMQ broker: a RocketMQ-compatible, thread-per-core message broker"
)]
pub struct BrokerArgs {
    /// Configuration file: `*.toml` (RingMQ) or anything else (RocketMQ broker.conf).
    #[arg(short = 'c', long = "config", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Port clients connect to.
    #[arg(short = 'p', long, value_name = "PORT")]
    pub listen_port: Option<u16>,
    /// NameServers, `host:port` separated by `;`.
    #[arg(short = 'n', long, value_name = "ADDRS")]
    pub namesrv_addr: Option<String>,
    #[arg(long, value_name = "DIR")]
    pub store_root: Option<PathBuf>,
    /// Shards (pinned cores); 0 = one per available CPU.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// `host` (one address, requests forwarded between cores) or `shard` (each shard a
    /// broker of its own on listen_port + i).
    #[arg(long, value_enum)]
    pub route_mode: Option<RouteMode>,
    #[arg(long)]
    pub broker_name: Option<String>,
    #[arg(long)]
    pub cluster_name: Option<String>,
    #[arg(long)]
    pub broker_id: Option<u64>,
    #[arg(long, value_enum)]
    pub role: Option<BrokerRole>,
    /// A slave's master: `ip:port` of its first replication port.
    #[arg(long, value_name = "IP:PORT")]
    pub ha_master_address: Option<String>,
    /// IPv4 address advertised to NameServers and clients.
    #[arg(long, value_name = "IP")]
    pub broker_ip: Option<String>,
    #[arg(long, value_enum)]
    pub flush: Option<FlushKind>,
    /// Create unknown topics on first send (`--auto-create-topic=false` to turn off).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub auto_create_topic: Option<bool>,
}

impl BrokerConfig {
    /// Defaults ← the `--config` file ← flags, validated.
    pub fn from_args(args: &BrokerArgs) -> Result<Self, ConfigError> {
        let mut config = match &args.config {
            Some(path) => {
                let mut config = Self::load(path)?;
                // Apache keeps plain_acl.yml in conf/ beside broker.conf: so does RingMQ.
                if config.acl_enable && config.plain_acl_file.is_none() {
                    config.plain_acl_file = Some(path.parent().unwrap_or(std::path::Path::new(".")).join(super::PLAIN_ACL_FILE_NAME));
                }
                config
            }
            None => Self::default(),
        };
        config.apply_flags(args.clone());
        config.derive_bounds();
        config.validate()?;
        Ok(config)
    }

    /// Overrides each setting a flag names; what no flag names stays as it was.
    fn apply_flags(&mut self, args: BrokerArgs) {
        let BrokerArgs {
            config: _,
            listen_port,
            namesrv_addr,
            store_root,
            shards,
            route_mode,
            broker_name,
            cluster_name,
            broker_id,
            role,
            ha_master_address,
            broker_ip,
            flush,
            auto_create_topic,
        } = args;
        if let Some(port) = listen_port {
            self.listen_port = port;
        }
        if let Some(addrs) = namesrv_addr {
            self.namesrv_addrs = split_addrs(&addrs);
        }
        if let Some(root) = store_root {
            self.store_root = root;
        }
        if let Some(count) = shards {
            self.shard_count = count;
        }
        if let Some(mode) = route_mode {
            self.route_mode = mode;
        }
        if let Some(name) = broker_name {
            self.broker_name = name;
        }
        if let Some(name) = cluster_name {
            self.cluster_name = name;
        }
        if let Some(id) = broker_id {
            self.broker_id = id;
        }
        if let Some(role) = role {
            self.role = role;
        }
        if let Some(addr) = ha_master_address {
            self.ha_master_address = Some(addr);
        }
        if let Some(ip) = broker_ip {
            self.broker_ip = Some(ip);
        }
        if let Some(kind) = flush {
            self.store.flush_mode = kind.into();
        }
        if let Some(enabled) = auto_create_topic {
            self.auto_create_topic = enabled;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{expect, with};
    use crate::store::config::FlushMode;
    use clap::Parser;
    use std::io::Write;

    /// Parses `words` (the command line after the program name) as `from_args` does;
    /// expects that config, or an error whose text contains each fragment.
    fn check(words: &[&str], expected: Result<BrokerConfig, &[&str]>) {
        let parsed = BrokerArgs::try_parse_from(std::iter::once("ringmq-broker").chain(words.iter().copied()))
            .map_err(|e| ConfigError::Invalid(format!("clap: {e}")))
            .and_then(|args| BrokerConfig::from_args(&args));
        expect(&format!("args {words:?}"), parsed, expected);
    }

    #[test]
    fn flags_without_file() {
        check(&[], Ok(BrokerConfig::default()));
        check(&["-p", "1234"], Ok(with(|c| c.listen_port = 1234)));
        check(&["--listen-port", "1234"], Ok(with(|c| c.listen_port = 1234)));
        check(&["-n", "a:1;b:2"], Ok(with(|c| c.namesrv_addrs = vec!["a:1".into(), "b:2".into()])));
        check(&["--namesrv-addr", "a:1"], Ok(with(|c| c.namesrv_addrs = vec!["a:1".into()])));
        check(&["--store-root", "/tmp/x"], Ok(with(|c| c.store_root = "/tmp/x".into())));
        check(&["--shards", "2"], Ok(with(|c| c.shard_count = 2)));
        check(&["--broker-name", "b"], Ok(with(|c| c.broker_name = "b".into())));
        check(&["--cluster-name", "K"], Ok(with(|c| c.cluster_name = "K".into())));
        check(
            &["--broker-id", "3", "--role", "slave", "--ha-master-address", "10.0.0.1:10912"],
            Ok(with(|c| (c.broker_id, c.role, c.ha_master_address) = (3, BrokerRole::Slave, Some("10.0.0.1:10912".into())))),
        );
        check(&["--role", "sync-master"], Ok(with(|c| c.role = BrokerRole::SyncMaster)));
        check(&["--broker-ip", "10.9.8.7"], Ok(with(|c| c.broker_ip = Some("10.9.8.7".into()))));
        check(&["--flush", "sync"], Ok(with(|c| c.store.flush_mode = FlushMode::Sync)));
        check(&["--flush", "async"], Ok(BrokerConfig::default()));
        check(&["--auto-create-topic"], Ok(with(|c| c.auto_create_topic = true)));
        check(&["--auto-create-topic=true"], Ok(with(|c| c.auto_create_topic = true)));
        check(&["--auto-create-topic=false"], Ok(BrokerConfig::default()));
        // Flag errors and validation of the result.
        check(&["--flush", "SYNC_FLUSH"], Err(&["clap", "--flush"]));
        check(&["-p", "x"], Err(&["clap"]));
        check(&["--bogus"], Err(&["clap", "--bogus"]));
        check(&["--auto-create-topic", "maybe"], Err(&["clap"]));
        check(&["-p", "0"], Ok(with(|c| c.listen_port = 0)));
        check(&["--broker-id", "1"], Err(&["master has broker_id 0"]));
        check(&["-c", "/nonexistent/broker.conf"], Err(&["cannot read", "/nonexistent/broker.conf"]));
    }

    fn temp_file(suffix: &str, contents: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
        file.write_all(contents.as_bytes()).unwrap();
        file
    }

    #[test]
    fn file_then_flags_precedence() {
        let toml = temp_file(
            ".toml",
            "listen_port = 2000\nbroker_name = \"from-file\"\nshard_count = 3\n[store]\nflush = \"sync\"\nfile_reserved_hours = 5\n",
        );
        let conf =
            temp_file(".conf", "listenPort=3000\nbrokerName=from-conf\nflushDiskType=SYNC_FLUSH\nfileReservedTime=6\n");
        let toml_path = toml.path().to_str().unwrap();
        let conf_path = conf.path().to_str().unwrap();
        let from_toml = with(|c| {
            c.listen_port = 2000;
            c.broker_name = "from-file".into();
            c.shard_count = 3;
            c.store.flush_mode = FlushMode::Sync;
            c.store.file_reserved_hours = 5;
        });
        check(&["-c", toml_path], Ok(from_toml.clone()));
        assert_eq!(BrokerConfig::load(toml.path()).unwrap(), from_toml);
        // A flag beats the file; what no flag names stays as the file set it.
        check(
            &["-c", toml_path, "-p", "2001", "--flush", "async", "--shards", "1"],
            Ok(with(|c| {
                c.listen_port = 2001;
                c.broker_name = "from-file".into();
                c.shard_count = 1;
                c.store.file_reserved_hours = 5;
            })),
        );
        check(
            &["--config", conf_path, "--broker-name", "flag"],
            Ok(with(|c| {
                c.listen_port = 3000;
                c.broker_name = "flag".into();
                c.store.flush_mode = FlushMode::Sync;
                c.store.file_reserved_hours = 6;
            })),
        );
        // Errors from a file name the file.
        let bad = temp_file(".toml", "nope = 1");
        check(&["-c", bad.path().to_str().unwrap()], Err(&[bad.path().to_str().unwrap(), "nope"]));
        let bad_conf = temp_file(".properties", "\nnope=1");
        check(&["-c", bad_conf.path().to_str().unwrap()], Err(&[".properties", "line 2", "nope"]));
        // A file that parses but does not validate is refused by from_args.
        let invalid = temp_file(".toml", "cluster_name = \"\"");
        check(&["-c", invalid.path().to_str().unwrap()], Err(&["cluster_name"]));
        check(
            &["-c", invalid.path().to_str().unwrap(), "--cluster-name", "fixed"],
            Ok(with(|c| c.cluster_name = "fixed".into())),
        );
    }
}
