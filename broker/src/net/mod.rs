//! Network: the per-shard listener and the connection loop.

pub mod conn;
pub mod ports;
