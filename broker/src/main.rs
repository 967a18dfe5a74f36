//! `ringmq-broker`: starts the broker from a config file (TOML, or RocketMQ's
//! `broker.conf`) and flags, and stops it cleanly on SIGTERM / SIGINT.

use clap::Parser;
use ringmq_broker::config::{BrokerArgs, BrokerConfig};
use ringmq_broker::launch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How often the signal flag is forwarded to the running broker.
const SIGNAL_POLL_MS: u64 = 20;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        // Colour only on a terminal: a log written through a pipe or to a file (systemd,
        // `> broker.log`) is plain text. NO_COLOR turns it off everywhere.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none())
        .init();
    let args = BrokerArgs::parse();
    let config = match BrokerConfig::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringmq-broker: {e}");
            std::process::exit(2);
        }
    };
    if let Some(warning) = config.ignored_keys_warning() {
        tracing::warn!("{warning}");
    }
    // Handlers go in before start-up: a SIGTERM during recovery must mean "stop cleanly
    // once up", not the default action (death without a checkpoint).
    let requested = Arc::new(AtomicBool::new(false));
    if let Err(e) = launch::stop_on_signals(requested.clone()) {
        eprintln!("ringmq-broker: cannot install signal handlers: {e}");
        std::process::exit(1);
    }
    let broker = match launch::start(config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ringmq-broker: {e}");
            std::process::exit(1);
        }
    };
    let stop = broker.stop_flag();
    std::thread::spawn(move || loop {
        if requested.load(Ordering::SeqCst) {
            stop.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(SIGNAL_POLL_MS));
    });
    broker.join();
}
