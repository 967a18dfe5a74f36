//! The Prometheus endpoint: `GET /metrics` over HTTP/1.1 on its own OS thread, answering
//! with whatever `render` returns (the owner renders from the snapshots its server
//! threads published). Any other path answers 404, any other method 405. With
//! `BasicAuth` configured, a scrape without the right `Authorization: Basic` header
//! answers 401 with `WWW-Authenticate` (checked before the path, so an unauthenticated
//! caller learns nothing about what is served).
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
/// `user:password` of the scrape credentials, in bytes (a longer one is a config error).
pub const BASIC_AUTH_BYTES_MAX: usize = 1024;
/// The realm a 401 names.
pub const BASIC_AUTH_REALM: &str = "ringmq-metrics";

/// Why configured scrape credentials are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BasicAuthError {
    #[error("expected `user:password`, with a non-empty user and password and no `:` in the user")]
    Malformed,
    #[error("longer than {BASIC_AUTH_BYTES_MAX} bytes")]
    TooLong,
}

/// Scrape credentials (HTTP basic auth). Holds the expected header token (base64 of
/// `user:password`) so that a scrape is one constant-time comparison, no decoding of
/// what the client sent. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    user: String,
    token: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BasicAuth {{ user: {:?}, password: <hidden> }}", self.user)
    }
}

impl BasicAuth {
    /// Parses `user:password` (the form of `metricsPromExporterBasicAuth`); the password
    /// may contain `:`, the user may not (RFC 7617).
    pub fn parse(text: &str) -> Result<BasicAuth, BasicAuthError> {
        if text.len() > BASIC_AUTH_BYTES_MAX {
            return Err(BasicAuthError::TooLong);
        }
        match text.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() && !text.chars().any(char::is_control) => {
                Ok(BasicAuth { user: user.to_string(), token: base64(text.as_bytes()) })
            }
            _ => Err(BasicAuthError::Malformed),
        }
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    /// Whether the `Authorization` header value carries these credentials: scheme
    /// `Basic` (any case), one space-separated token compared in constant time.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        use subtle::ConstantTimeEq;
        let Some((scheme, token)) = authorization.map(str::trim).and_then(|v| v.split_once(' ')) else { return false };
        scheme.eq_ignore_ascii_case("basic") && bool::from(token.trim().as_bytes().ct_eq(self.token.as_bytes()))
    }
}

/// Standard base64 with padding (RFC 4648), for the expected basic-auth token.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The value of header `name` (case-insensitive) in a request head, if present.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).take_while(|l| !l.is_empty()).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

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
/// With `auth`, every scrape must carry those credentials. Dropping the returned
/// `Exporter` detaches the thread (it still ends on `stop`).
pub fn spawn<F>(addr: SocketAddr, thread_name: &str, stop: Arc<AtomicBool>, auth: Option<BasicAuth>, render: F) -> std::io::Result<Exporter>
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
                    if let Err(e) = serve(stream, auth.as_ref(), &render) {
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

fn serve(mut stream: TcpStream, auth: Option<&BasicAuth>, render: &dyn Fn() -> String) -> std::io::Result<()> {
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
    if let Some(auth) = auth {
        if !auth.accepts(header(&head, "authorization")) {
            return respond_401(&mut stream);
        }
    }
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
    respond_with(stream, status, content_type, "", body)
}

fn respond_401(stream: &mut TcpStream) -> std::io::Result<()> {
    let challenge = format!("WWW-Authenticate: Basic realm=\"{BASIC_AUTH_REALM}\", charset=\"UTF-8\"\r\n");
    respond_with(stream, "401 Unauthorized", "text/plain", &challenge, "this metrics endpoint needs basic-auth credentials (metricsPromExporterBasicAuth)\n")
}

/// `extra_headers`: complete header lines, each ending in CRLF.
fn respond_with(stream: &mut TcpStream, status: &str, content_type: &str, extra_headers: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n",
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
            spawn("127.0.0.1:0".parse().unwrap(), "test-exporter", stop.clone(), None, || "x 1\n# EOF\n".to_string())
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

    #[test]
    fn basic_auth_parse_and_header_checks() {
        // check(config text, Ok(user) or the error)
        let check = |text: &str, expected: Result<&str, BasicAuthError>| {
            assert_eq!(BasicAuth::parse(text).map(|a| a.user().to_string()), expected.map(str::to_string), "{text:?}");
        };
        check("prom:s3cret", Ok("prom"));
        check("prom:a:b", Ok("prom"));
        check("prom", Err(BasicAuthError::Malformed));
        check(":pw", Err(BasicAuthError::Malformed));
        check("prom:", Err(BasicAuthError::Malformed));
        check("pr\nom:pw", Err(BasicAuthError::Malformed));
        check(&format!("u:{}", "p".repeat(BASIC_AUTH_BYTES_MAX)), Err(BasicAuthError::TooLong));
        assert!(!format!("{:?}", BasicAuth::parse("prom:s3cret").unwrap()).contains("s3cret"), "Debug hides the password");
        // RFC 7617's example, and padding of every length.
        assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert_eq!((base64(b"a:b"), base64(b"ab:c"), base64(b"a:bcd")), ("YTpi".into(), "YWI6Yw==".into(), "YTpiY2Q=".into()));
        let auth = BasicAuth::parse("Aladdin:open sesame").unwrap();
        // accepts(Authorization header value) → expected
        for (header, expected) in [
            (Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), true),
            (Some("basic  QWxhZGRpbjpvcGVuIHNlc2FtZQ== "), true),
            (Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ="), false),
            (Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZR=="), false),
            (Some("Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), false),
            (Some("QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), false),
            (Some("Basic"), false),
            (Some("Basic "), false),
            (Some("Basic \u{fffd}\u{0}garbage"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(auth.accepts(header), expected, "{header:?}");
        }
        let head = "GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization: Basic abc\r\n";
        assert_eq!((header(head, "Authorization"), header(head, "cookie")), (Some("Basic abc"), None));
    }

    #[test]
    fn scrape_needs_credentials_when_configured() {
        let stop = Arc::new(AtomicBool::new(false));
        let auth = BasicAuth::parse("prom:pw").unwrap();
        let exporter = spawn("127.0.0.1:0".parse().unwrap(), "test-exporter-auth", stop.clone(), Some(auth), || "x 1\n# EOF\n".to_string()).expect("spawn");
        let addr = exporter.local_addr();
        let denied = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(denied.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{denied}");
        assert!(denied.contains("\r\nWWW-Authenticate: Basic realm=\"ringmq-metrics\""), "{denied}");
        let wrong = exchange(addr, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic cHJvbTpQVw==\r\n\r\n");
        assert!(wrong.starts_with("HTTP/1.1 401 "), "{wrong}");
        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nAuthorization: Basic cHJvbTpwdw==\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.ends_with("x 1\n# EOF\n"), "{ok}");
        stop.store(true, Ordering::SeqCst);
        exporter.join();
    }
}
