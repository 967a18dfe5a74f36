//! The broker's Prometheus endpoint: `GET /metrics` on its own OS thread (not a shard),
//! answering from the snapshots the shards published. The HTTP side (bounds, timeouts,
//! 404/405) is `metrics_export::http`, shared with the NameServer.
//!
//! Invariant: a scrape reads the published slots only; no shard waits for it.

use super::{render, Node, Published};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use metrics_export::http::{HTTP_IO_TIMEOUT_MS, HTTP_REQUEST_BYTES_MAX};

/// Binds `addr` and serves until `stop`; returns the bound address (port 0 picks one).
pub fn spawn(addr: SocketAddr, node: Node, published: Arc<Published>, stop: Arc<AtomicBool>, auth: Option<metrics_export::BasicAuth>) -> std::io::Result<SocketAddr> {
    // The broker does not join the thread: it ends within one accept poll of `stop`.
    let exporter = metrics_export::spawn(addr, "metrics-exporter", stop, auth, move || render(&node, &published.collect()))?;
    Ok(exporter.local_addr())
}
