//! `ringmq-grpc`: RingMQ's RocketMQ 5 gRPC front end (`apache.rocketmq.v2.MessagingService`,
//! docs/design/pop-grpc.md §3). Every RPC is translated into the broker's remoting requests
//! (`RemotingCommand`) and sent through a [`backend::Backend`]; the answer is translated
//! back into the RPC's proto. The same code serves local mode (a bridge into the broker's
//! shards, WP7) and cluster mode (remoting over TCP, WP9).
//!
//! Invariants: this crate never depends on `ringmq-broker` (tokio stays off the shard
//! threads: the broker side is reached only through `Backend`); every queue, table and
//! stream it holds has a named maximum; time is read only through the injected [`Clock`].

pub mod auth_header;
pub mod backend;
pub mod metadata;
pub mod route;
pub mod send;
pub mod server;
pub mod settings;

pub mod status;
pub mod txn;

/// The generated messages and the tonic server / client of the vendored protos
/// (`proto/`, rocketmq-apis v2.1.2).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("apache.rocketmq.v2");
}

/// Wall-clock milliseconds since the epoch, injected so tests (and the broker's simulated
/// clock in local mode) decide what "now" is.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        ringmq_client::msgid::now_ms()
    }
}
