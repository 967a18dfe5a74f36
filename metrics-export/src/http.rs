//! The Prometheus endpoint: `GET /metrics` over HTTP/1.1 on its own OS thread, answering
//! with whatever `render` returns (the owner renders from the snapshots its server
//! threads published). Any other path answers 404, any other method 405.
//!
//! Invariants: one connection at a time, each bounded by `HTTP_IO_TIMEOUT_MS` and
//! `HTTP_REQUEST_BYTES_MAX`, so a slow or hostile scraper delays other scrapes only —
//! never a server thread (they never call into this module); the thread ends within
//! `ACCEPT_POLL_MS` of the stop flag.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A scrape's request must arrive, and its answer leave, within this.
pub const HTTP_IO_TIMEOUT_MS: u64 = 2_000;
/// Request line and headers at most; a longer request is answered 431.
pub const HTTP_REQUEST_BYTES_MAX: usize = 8 * 1024;
/// How often the idle accept loop looks at the stop flag.
const ACCEPT_POLL_MS: u64 = 50;
/// Bytes read from a scraper per call.
const READ_CHUNK_BYTES: usize = 1024;

/// A running endpoint.
#[derive(Debug)]
pub struct Exporter {
    local_addr: SocketAddr,
    thread: JoinHandle<()>,
}

impl Exporter {
    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits for the thread, which ends within `ACCEPT_POLL_MS` once the stop flag is set
    /// (plus one scrape in progress, at most `HTTP_IO_TIMEOUT_MS` per read or write).
    pub fn join(self) {
        if self.thread.join().is_err() {
            tracing::warn!("metrics exporter thread panicked");
        }
    }
}

/// Binds `addr` and serves on a thread named `thread_name` until `stop`; port 0 picks one.
/// Dropping the returned `Exporter` detaches the thread (it still ends on `stop`).
pub fn spawn<F>(addr: SocketAddr, thread_name: &str, stop: Arc<AtomicBool>, render: F) -> std::io::Result<Exporter>
where
    F: Fn() -> String + Send + 'static,
{
    let listener = TcpListener::bind(addr)?;
    // Non-blocking accept, so the loop sees the stop flag without a wake-up connection.
    listener.set_nonblocking(true)?;
    let local_addr = listener.local_addr()?;
    let thread = std::thread::Builder::new().name(thread_name.into()).spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = serve(stream, &render) {
                        tracing::debug!(error = %e, "metrics scrape failed");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(ACCEPT_POLL_MS))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics exporter accept failed");
                    std::thread::sleep(Duration::from_millis(ACCEPT_POLL_MS));
                }
            }
        }
    })?;
    Ok(Exporter { local_addr, thread })
}

fn serve(mut stream: TcpStream, render: &dyn Fn() -> String) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS)))?;
    stream.set_write_timeout(Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS)))?;
    let mut buf = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = [0u8; READ_CHUNK_BYTES];
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
            respond(&mut stream, "200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", &render())
        }
        (Some("GET"), _) => respond(&mut stream, "404 Not Found", "text/plain", "only /metrics is served here\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "GET /metrics\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        s.write_all(request).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn answers_metrics_404_405_431_and_stops() {
        let stop = Arc::new(AtomicBool::new(false));
        let exporter =
            spawn("127.0.0.1:0".parse().unwrap(), "test-exporter", stop.clone(), || "x 1\n# EOF\n".to_string())
                .expect("spawn");
        let addr = exporter.local_addr();
        // check(request, expected status line, expected body)
        let check = |request: &[u8], status: &str, body: &str| {
            let out = exchange(addr, request);
            let (head, got) = out.split_once("\r\n\r\n").expect("an HTTP response");
            assert_eq!((head.lines().next(), got), (Some(status), body), "{}", String::from_utf8_lossy(request));
        };
        check(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK", "x 1\n# EOF\n");
        check(b"GET /metrics?a=b HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK", "x 1\n# EOF\n");
        check(b"GET /other HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found", "only /metrics is served here\n");
        check(b"POST /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 Method Not Allowed", "GET /metrics\n");
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        // Exactly the maximum: the server reads all of it before answering (unread bytes
        // at close would reset the connection under the answer).
        long.resize(HTTP_REQUEST_BYTES_MAX, b'a');
        check(&long, "HTTP/1.1 431 Request Header Fields Too Large", "request too large\n");
        stop.store(true, Ordering::SeqCst);
        exporter.join();
        assert!(TcpStream::connect(addr).is_err(), "the listener closes with the thread");
    }
}
