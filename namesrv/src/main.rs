//! `ringmq-namesrv`: the NameServer binary. Reads flags and an optional TOML file
//! (`listen`, `broker_expiry_ms`, `scan_interval_ms`, `metrics_exporter_type`,
//! `metrics_prom_exporter_host`, `metrics_prom_exporter_port`, TLS under `[tls.server]`,
//! the embedded controller: `enable_controller_in_namesrv` + `[controller]`;
//! flags win over the file),
//! sets up tracing (`RUST_LOG`, default `info`) and serves until killed.
//!
//! Invariant: a bad flag, file or key ends the process with a message and a non-zero
//! status before anything listens.

use clap::Parser;
use namesrv::config::{FileConfig, MetricsExporter, ServerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "ringmq-namesrv", version, about = "RingMQ NameServer (RocketMQ-compatible route registry)")]
struct Args {
    /// Address to listen on [default: 0.0.0.0:9876].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// TOML config file (keys: listen, broker_expiry_ms, scan_interval_ms,
    /// metrics_exporter_type, metrics_prom_exporter_host, metrics_prom_exporter_port,
    /// and Apache's tls.server.* under [tls.server]: mode, cert_path, key_path,
    /// need_client_auth, trust_cert_path).
    #[arg(short = 'c', long = "config", value_name = "TOML")]
    config: Option<PathBuf>,
    /// `prom` serves Prometheus metrics at GET /metrics [default: disable].
    #[arg(long, value_enum, ignore_case = true, value_name = "TYPE")]
    metrics_exporter_type: Option<MetricsExporter>,
    /// IP address of the metrics endpoint [default: every address].
    #[arg(long, value_name = "IP")]
    metrics_prom_exporter_host: Option<String>,
    /// Port of the metrics endpoint [default: 5558; RocketMQ's brokers use 5557].
    #[arg(long, value_name = "PORT")]
    metrics_prom_exporter_port: Option<u16>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        // Colour only on a terminal: a log written through a pipe or to a file (systemd,
        // `> broker.log`) is plain text. NO_COLOR turns it off everywhere.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none())
        .init();
    let mut config = ServerConfig::default();
    if let Some(path) = &args.config {
        match FileConfig::load(path).and_then(|file| file.controller_config().map(|c| (file, c))) {
            Ok((file, controller)) => {
                file.apply(&mut config);
                config.controller = controller;
            }
            Err(e) => {
                tracing::error!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let flags = FileConfig {
        listen: args.listen,
        metrics_exporter_type: args.metrics_exporter_type,
        metrics_prom_exporter_host: args.metrics_prom_exporter_host,
        metrics_prom_exporter_port: args.metrics_prom_exporter_port,
        ..FileConfig::default()
    };
    flags.apply(&mut config);
    match namesrv::server::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
