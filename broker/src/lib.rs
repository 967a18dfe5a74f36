//! RingMQ broker library: per-shard store, shards and request handlers, the runtime
//! that starts one pinned executor per shard, and NameServer registration.

pub mod config;
pub mod copy_probe;
pub mod fatal;
pub mod filter;
pub mod ha;
pub mod meta;
pub mod metrics;
pub mod namesrv_client;
pub mod net;
pub mod routing;
pub mod rt;
pub mod launch;
pub mod schedule;
pub mod shard;
pub mod sim;
pub mod store;
pub mod txn;
