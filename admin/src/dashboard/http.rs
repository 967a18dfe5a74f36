//! A minimal HTTP/1.1 server for the dashboard: request parsing (pure, over any
//! `Read`), response writing, and a bounded pool of std threads.
//!
//! Owns: the listening socket, `HTTP_WORKERS` worker threads and the queue of accepted
//! connections between them. One request per connection (`Connection: close`): a page
//! load is a handful of requests on loopback or a LAN, and no keep-alive means no idle
//! connection ever holds a worker.
//!
//! Invariants: at most `HTTP_WORKERS` connections are served at once and at most
//! `CONNECTIONS_QUEUED_MAX` wait (more are answered 503 at once by the acceptor); a
//! request head is at most `REQUEST_HEAD_BYTES_MAX`, a body `REQUEST_BODY_BYTES_MAX`
//! (431 / 413 past them); every read and write is bounded by `HTTP_IO_TIMEOUT_MS`;
//! nothing a client sends can panic a worker — malformed input is a 4xx with a sentence
//! saying what was wrong.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Threads serving connections (each serves one connection at a time).
pub const HTTP_WORKERS: usize = 4;
/// Accepted connections waiting for a worker; past it the acceptor answers 503.
pub const CONNECTIONS_QUEUED_MAX: usize = 32;
/// Request line + headers, in bytes.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Request body, in bytes (the API takes its arguments in the query string).
pub const REQUEST_BODY_BYTES_MAX: usize = 16 * 1024;
/// Header lines per request.
pub const REQUEST_HEADERS_MAX: usize = 64;
/// Query parameters per request.
pub const QUERY_PARAMS_MAX: usize = 16;
/// Method token length, in bytes.
const METHOD_BYTES_MAX: usize = 16;
/// Every socket read and write of a connection, in milliseconds.
pub const HTTP_IO_TIMEOUT_MS: u64 = 5_000;
/// Pause after a failed accept (out of descriptors), so the acceptor never spins.
const ACCEPT_ERROR_PAUSE_MS: u64 = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Percent-decoded path, always starting with `/`.
    pub path: String,
    /// Decoded query parameters in order; names are unique.
    pub query: Vec<(String, String)>,
    /// Header lines in order, names lowercased, values trimmed (at most
    /// `REQUEST_HEADERS_MAX`): what `auth.rs` reads (Host, Origin, Cookie, ...).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A request the dashboard cannot serve, with the status it gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("request body larger than {REQUEST_BODY_BYTES_MAX} bytes")]
    BodyTooLarge,
    #[error("request head (request line and headers) larger than {REQUEST_HEAD_BYTES_MAX} bytes")]
    HeadTooLarge,
    /// The cluster answered with an error or not at all.
    #[error("{0}")]
    BadGateway(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    GatewayTimeout(String),
}

impl HttpError {
    pub fn status(&self) -> u16 {
        match self {
            HttpError::BadRequest(_) => 400,
            HttpError::NotFound(_) => 404,
            HttpError::MethodNotAllowed(_) => 405,
            HttpError::BodyTooLarge => 413,
            HttpError::HeadTooLarge => 431,
            HttpError::BadGateway(_) => 502,
            HttpError::Unavailable(_) => 503,
            HttpError::GatewayTimeout(_) => 504,
        }
    }

    /// `{"error": "...", "status": N}`: the pages show `error` as it is.
    pub fn response(&self) -> Response {
        let body = serde_json::json!({ "error": self.to_string(), "status": self.status() });
        Response { status: self.status(), content_type: "application/json; charset=utf-8", body: body.to_string().into_bytes(), headers: Vec::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// More header lines (Location, Set-Cookie): values made here, never client text
    /// unchecked (a CR or LF would split the head; `auth::safe_next` bounds redirects).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn json(value: &serde_json::Value) -> Self {
        Response { status: 200, content_type: "application/json; charset=utf-8", body: value.to_string().into_bytes(), headers: Vec::new() }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Internal Server Error",
    }
}

/// Why no request came out of a connection.
#[derive(Debug)]
pub enum ReadError {
    /// The client closed the connection before sending anything.
    Closed,
    Io(io::Error),
    Http(HttpError),
}

fn bad(message: impl Into<String>) -> ReadError {
    ReadError::Http(HttpError::BadRequest(message.into()))
}

/// Reads one request: the head up to the blank line (at most `REQUEST_HEAD_BYTES_MAX`),
/// then `Content-Length` bytes of body (at most `REQUEST_BODY_BYTES_MAX`).
pub fn read_request(stream: &mut impl Read) -> Result<Request, ReadError> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    let head_end = loop {
        // Searched over the whole (bounded) buffer: the terminator may straddle reads.
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > REQUEST_HEAD_BYTES_MAX {
            return Err(ReadError::Http(HttpError::HeadTooLarge));
        }
        let n = stream.read(&mut chunk).map_err(ReadError::Io)?;
        if n == 0 {
            return Err(if buf.is_empty() { ReadError::Closed } else { bad("the connection closed before the end of the request head") });
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_end > REQUEST_HEAD_BYTES_MAX {
        return Err(ReadError::Http(HttpError::HeadTooLarge));
    }
    let (mut request, content_length) = parse_head(&buf[..head_end]).map_err(ReadError::Http)?;
    if content_length > REQUEST_BODY_BYTES_MAX {
        return Err(ReadError::Http(HttpError::BodyTooLarge));
    }
    let mut body = buf.split_off(head_end + 4);
    while body.len() < content_length {
        let n = stream.read(&mut chunk).map_err(ReadError::Io)?;
        if n == 0 {
            return Err(bad(format!("the body ended after {} of its {content_length} bytes (Content-Length)", body.len())));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    // Bytes past Content-Length would be a second (pipelined) request: not served.
    body.truncate(content_length);
    request.body = body;
    Ok(request)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parses a request head (without its final blank line): the request and its
/// `Content-Length` (0 when absent).
pub fn parse_head(head: &[u8]) -> Result<(Request, usize), HttpError> {
    let bad = |m: String| HttpError::BadRequest(m);
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(bad(format!("malformed request line `{}`: expected `METHOD /path HTTP/1.1`", printable(line))));
    };
    if method.is_empty() || method.len() > METHOD_BYTES_MAX || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad(format!("malformed method `{}`", printable(method))));
    }
    if !matches!(*version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad(format!("unsupported protocol `{}`: HTTP/1.0 or HTTP/1.1 only", printable(version))));
    }
    if !target.starts_with('/') {
        return Err(bad(format!("request target `{}` must be a path starting with /", printable(target))));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path, false).map_err(|e| bad(format!("path: {e}")))?;
    if path.split('/').any(|segment| segment == "..") || path.contains('\0') {
        return Err(bad(format!("path `{}` is not allowed", printable(&path))));
    }
    let query = parse_query(raw_query)?;
    let mut content_length: Option<usize> = None;
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in lines {
        if headers.len() >= REQUEST_HEADERS_MAX {
            return Err(bad(format!("more than {REQUEST_HEADERS_MAX} header lines")));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(format!("malformed header line `{}`", printable(line))));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(bad(format!("malformed header name `{}`", printable(name))));
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n: usize = value.parse().map_err(|_| bad(format!("Content-Length `{}` is not a number", printable(value))))?;
            if content_length.is_some_and(|c| c != n) {
                return Err(bad("two different Content-Length headers".into()));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(bad("Transfer-Encoding is not accepted: send the body with a Content-Length".into()));
        }
        headers.push((name.to_ascii_lowercase(), value.to_string()));
    }
    Ok((Request { method: method.to_string(), path, query, headers, body: Vec::new() }, content_length.unwrap_or(0)))
}

/// `a=1&b=x+y`: decoded pairs; a name without `=` has the empty value.
pub fn parse_query(raw: &str) -> Result<Vec<(String, String)>, HttpError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        if out.len() >= QUERY_PARAMS_MAX {
            return Err(HttpError::BadRequest(format!("more than {QUERY_PARAMS_MAX} query parameters")));
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = percent_decode(k, true).map_err(|e| HttpError::BadRequest(format!("query parameter name: {e}")))?;
        let v = percent_decode(v, true).map_err(|e| HttpError::BadRequest(format!("query parameter {k}: {e}")))?;
        if out.iter().any(|(n, _)| *n == k) {
            return Err(HttpError::BadRequest(format!("query parameter {k} is given twice")));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// `%XX` escapes (and `+` as a space in a query); the result must be UTF-8.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => out.push(b),
                    None => return Err(format!("bad percent escape in `{}`", printable(s))),
                }
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{}` does not decode to UTF-8", printable(s)))
}

/// At most 80 characters of client input, control characters escaped, for messages.
fn printable(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_default).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// Writes `response` with the headers every answer carries: no caching (the data is
/// live), no sniffing, and a policy that lets a page load nothing but this server's own
/// assets.
pub fn write_response(out: &mut impl Write, response: &Response) -> io::Result<()> {
    let extra: String = response.headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'self'; img-src 'self' data:; frame-ancestors 'none'\r\n{extra}\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(&response.body)?;
    out.flush()
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Serves `listener` forever: this thread accepts, `HTTP_WORKERS` threads answer.
/// Returns only if a worker thread cannot be started.
pub fn serve(listener: TcpListener, handler: Handler) -> io::Result<()> {
    let (tx, rx) = flume::bounded::<TcpStream>(CONNECTIONS_QUEUED_MAX);
    for i in 0..HTTP_WORKERS {
        let rx = rx.clone();
        let handler = handler.clone();
        std::thread::Builder::new().name(format!("dashboard-http-{i}")).spawn(move || {
            while let Ok(stream) = rx.recv() {
                serve_connection(stream, &handler);
            }
        })?;
    }
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(flume::TrySendError::Full(mut stream)) = tx.try_send(stream) {
                    // Every worker busy and the queue full: say so at once rather than
                    // letting the client hang (the write is bounded like any other).
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS)));
                    let _ = write_response(&mut stream, &HttpError::Unavailable("the dashboard is busy: retry in a moment".into()).response());
                }
            }
            Err(e) => {
                eprintln!("ringmq-admin dashboard: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS));
            }
        }
    }
}

fn serve_connection(mut stream: TcpStream, handler: &Handler) {
    let timeout = Some(Duration::from_millis(HTTP_IO_TIMEOUT_MS));
    if stream.set_read_timeout(timeout).and_then(|_| stream.set_write_timeout(timeout)).is_err() {
        return;
    }
    let response = match read_request(&mut stream) {
        Ok(request) => handler(&request),
        Err(ReadError::Closed) => return,
        Err(ReadError::Io(e)) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            Response { status: 408, content_type: "text/plain; charset=utf-8", body: b"request not received in time\n".to_vec(), headers: Vec::new() }
        }
        Err(ReadError::Io(_)) => return,
        Err(ReadError::Http(e)) => e.response(),
    };
    // A client that went away gets nothing: there is no one to tell.
    let _ = write_response(&mut stream, &response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}
