//! Peers: the other systems that loadgen runs the same workloads against, in the same run
//! on the same machine, so RingMQ's figures come with a baseline measured under equal
//! conditions. This module owns the peers' drivers and their shared error type:
//!
//! - `redis`: Redis Streams (a private `redis-server` per run; `scripts/install-redis.sh`).
//! - `resp`: the RESP2 codec the Redis driver speaks.
//!
//! The crates.io rocketmq-rust broker is started by `scripts/peer-rocketmq-rust.sh` and
//! driven with RingMQ's own client (it speaks the RocketMQ remoting protocol).
//!
//! Invariants: a peer process started here is stopped when its guard drops, also on
//! error paths; a driver returns a typed `PeerError` and never panics on IO or on what a
//! peer sends.

// Until loadgen's compare command calls into the peers (issue 5).
#![allow(dead_code)]

pub mod redis;
pub mod resp;

#[allow(unused_imports)] // the entry point for loadgen's compare command (issue 5)
pub use redis::run_redis;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum PeerError {
    #[error("redis-server not found on PATH: run scripts/install-redis.sh")]
    RedisMissing,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("redis-server did not answer PING within {secs} s; its log ends with: {log_tail}")]
    StartTimeout { secs: u64, log_tail: String },
    #[error("redis-server exited during start-up ({status}); its log ends with: {log_tail}")]
    StartExited { status: String, log_tail: String },
    #[error("bad RESP from redis: {0}")]
    Resp(#[from] resp::RespError),
    #[error("redis closed the connection")]
    Closed,
    #[error("reply to {command} is larger than READ_BUFFER_BYTES_MAX ({max} bytes)")]
    ReplyTooLarge { command: &'static str, max: usize },
    #[error("redis answered {command} with an error: {message}")]
    Server { command: &'static str, message: String },
    #[error("unexpected reply to {command}: {reply}")]
    Unexpected { command: &'static str, reply: String },
    #[error("invalid workload for this peer: {0}")]
    Workload(String),
    #[error("{thread} failed: {message}")]
    Worker { thread: String, message: String },
}

impl PeerError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        PeerError::Io { what: what.into(), source }
    }
}
