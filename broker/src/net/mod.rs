//! Network: the per-shard listener, the connection loop and the shard's TLS edges.

pub mod conn;
pub mod ports;
pub mod tls;
