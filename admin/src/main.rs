//! `ringmq-admin`: Apache RocketMQ's `mqadmin` commands (same names and flags) over the
//! remoting protocol only, so it works against RingMQ and Apache RocketMQ alike. Every
//! command prints a table (mqadmin's layout where it has one) or, with `--json`, one
//! JSON document for scripts. `dashboard` serves a web UI over the same requests.
//!
//! Invariants: a command that fails prints the broker's or NameServer's code and remark
//! and exits 1 (2 for bad flags); nothing is retried silently; every call is bounded by
//! the client's request timeout.

mod auth;
mod commands;
mod controller;
mod dashboard;
mod ops;
mod query;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "ringmq-admin", version, about = "mqadmin's commands for RingMQ (and Apache RocketMQ)")]
pub struct Cli {
    #[command(subcommand)]
    pub command: commands::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let commands::Command::dashboard { namesrv, listen, token, host_name } = &cli.command {
        // The flag wins over the environment; an empty value counts as none.
        let token = token.clone().or_else(|| std::env::var(dashboard::TOKEN_ENV).ok()).filter(|t| !t.is_empty());
        // Serves until the process is stopped; returns only when it cannot start.
        let result = commands::namesrv_list(namesrv).and_then(|n| dashboard::run(n, *listen, token, host_name.clone()).map_err(|e| e.to_string()));
        if let Err(e) = result {
            eprintln!("ringmq-admin dashboard: {e}");
        }
        return ExitCode::from(1);
    }
    // The client runs on a glommio executor of its own.
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("ringmq-admin")
        .spawn(move || async move { commands::run(cli.command).await })
        .map_err(|e| format!("cannot start the client executor: {e}"))
        .and_then(|h| h.join().map_err(|e| format!("client executor failed: {e}")))
        .and_then(|r| r);
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringmq-admin: {e}");
            ExitCode::from(1)
        }
    }
}
