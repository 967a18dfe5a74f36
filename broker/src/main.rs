//! `ringmq-broker`: starts the broker from a config file (TOML, or RocketMQ's
//! `broker.conf`) and flags, and stops it cleanly on SIGTERM / SIGINT.

use clap::Parser;
use ringmq_broker::config::{BrokerArgs, BrokerConfig};
use ringmq_broker::runtime;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let args = BrokerArgs::parse();
    let config = match BrokerConfig::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringmq-broker: {e}");
            std::process::exit(2);
        }
    };
    let broker = match runtime::start(config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ringmq-broker: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime::stop_on_signals(broker.stop_flag()) {
        eprintln!("ringmq-broker: cannot install signal handlers: {e}");
        std::process::exit(1);
    }
    broker.join();
}
