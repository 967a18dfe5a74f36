//! The Prometheus endpoint: `GET /metrics` over HTTP/1.1 on its own OS thread (not a
//! shard), answering from the snapshots the shards published.
//!
//! Invariants: one connection at a time, each bounded by `HTTP_IO_TIMEOUT_MS` and
//! `HTTP_REQUEST_BYTES_MAX`, so a slow or hostile scraper delays other scrapes only —
//! never a shard; the thread ends within `ACCEPT_POLL_MS` of the stop flag.

use super::{render, Node, Published};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const HTTP_IO_TIMEOUT_MS: u64 = 2_000;
pub const HTTP_REQUEST_BYTES_MAX: usize = 8 * 1024;
const ACCEPT_POLL_MS: u64 = 50;

/// Binds `addr` and serves until `stop`; returns the bound address (port 0 picks one).
pub fn spawn(addr: SocketAddr, node: Node, published: Arc<Published>, stop: Arc<AtomicBool>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("metrics-exporter".into()).spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = serve(stream, &node, &published) {
                        tracing::debug!(error = %e, "metrics scrape failed");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(ACCEPT_POLL_MS)),
                Err(e) => {
                    tracing::warn!(error = %e, "metrics exporter accept failed");
                    std::thread::sleep(Duration::from_millis(ACCEPT_POLL_MS));
                }
            }
        }
    })?;
    Ok(bound)
}

fn serve(mut stream: TcpStream, node: &Node, published: &Published) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS)))?;
    stream.set_write_timeout(Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() >= HTTP_REQUEST_BYTES_MAX {
            return respond(&mut stream, "431 Request Header Fields Too Large", "text/plain", "request too large\n");
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or_default().split_whitespace();
    match (parts.next(), parts.next().map(|p| p.split('?').next().unwrap_or(p))) {
        (Some("GET"), Some("/metrics")) => {
            let body = render(node, &published.collect());
            respond(&mut stream, "200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", &body)
        }
        (Some("GET"), _) => respond(&mut stream, "404 Not Found", "text/plain", "only /metrics is served here\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "GET /metrics\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
