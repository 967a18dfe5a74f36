//! `ringmq-controller`: the standalone controller binary (docs/design/controller.md §4).
//! `-c FILE`: Apache's controller properties (`.conf` / `.properties`, e.g.
//! `controller-n0.conf` as is) or TOML; sets up tracing (`RUST_LOG`, default `info`) and
//! serves on one glommio executor thread until killed.
//!
//! Invariant: a bad flag, file or key ends the process with a message and a non-zero
//! status before anything listens.

use clap::Parser;
use ringmq_controller::config::ControllerFileConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "ringmq-controller", version, about = "RingMQ controller (RocketMQ 5 controller mode: broker-set replica metadata over Raft)")]
struct Args {
    /// Config file: Java properties when it ends in .conf or .properties (Apache's keys:
    /// controllerDLegerGroup, controllerDLegerPeers, controllerDLegerSelfId,
    /// controllerStorePath, ...), TOML otherwise (the same keys in snake_case).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none())
        .init();
    let file = match ControllerFileConfig::load(&args.config) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("{}: {e}", args.config.display());
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(node = file.self_id, group = file.group, store = %file.store_path.display(), "starting controller");
    match ringmq_controller::server::run(file.node_config()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
