//! A server port's TLS edge (one per listener per executor: the broker's client and
//! replication ports on each shard, the NameServer's port): takes an accepted stream
//! and gives back the stream the connection is served over, in the port's
//! `tls.server.mode` — `permissive` tells TLS from plain by the first byte (`detect`),
//! `enforcing` refuses plain — or nothing when the connection is refused.
//!
//! A refused plain client is told why when it can be: the first remoting request it
//! sent (read within `PLAIN_REFUSAL_READ_MS`, at most `PLAIN_REFUSAL_READ_BYTES_MAX`) is
//! answered SYSTEM_ERROR "TLS required", then the connection is closed.
//!
//! Invariants: every wait is bounded (first byte and handshake within
//! `TLS_HANDSHAKE_TIMEOUT_MS`); failed handshakes and refused plain connections are
//! counted (the owner exports the counts) and logged at most once per
//! `TLS_REFUSAL_LOG_INTERVAL_MS` per kind, with how many since the last line; a peer
//! that connects and closes without a byte (a port probe) is neither. The acceptor in
//! force is replaced by `install` (a reload) and read once per connection.
//! `!Send`: an edge belongs to the executor whose listener it serves.

use super::detect::{classify_first_byte, read_first_byte, FirstByte, PrefixedStream};
use super::settings::ServerMode;
use super::stream::MaybeTls;
use crate::remoting::codes::response_code as rs;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::FrameLimits;
use bytes::BytesMut;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a peer may take to send its first byte and finish the TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// A refused failed handshake or plain connection is logged at most this often per edge
/// (each is counted).
pub const TLS_REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;
/// How long a refused plain client's first request is waited for (to answer it).
pub const PLAIN_REFUSAL_READ_MS: u64 = 2_000;
/// Most bytes of a refused plain client's first request read to answer it.
pub const PLAIN_REFUSAL_READ_BYTES_MAX: usize = 64 * 1024;
/// What a refused plain client reads.
pub const PLAIN_REFUSAL_REMARK: &str = "TLS required: this port accepts TLS connections only (tls.server.mode=enforcing); connect with TLS (RocketMQ clients: useTLS / tls.enable)";

/// Which kind of refusal a log line is about.
#[derive(Clone, Copy)]
enum Kind {
    Handshake = 0,
    Plain = 1,
}

pub struct ServerEdge {
    /// Names the port in logs ("broker", "replication", "namesrv").
    label: &'static str,
    mode: ServerMode,
    acceptor: RefCell<Option<futures_rustls::TlsAcceptor>>,
    handshake_failures: Cell<u64>,
    plain_refusals: Cell<u64>,
    /// Per kind: when it was last logged, and the count then.
    logged: [Cell<Option<(Instant, u64)>>; 2],
}

/// `fut`'s output, or `None` after `ms`.
async fn within<T>(ms: u64, fut: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        glommio::timer::sleep(Duration::from_millis(ms)).await;
        None
    })
    .await
}

impl ServerEdge {
    /// An edge in `mode`; `config` must be set unless the mode is `disabled`.
    pub fn new(label: &'static str, mode: ServerMode, config: Option<Arc<rustls::ServerConfig>>) -> Self {
        Self {
            label,
            mode,
            acceptor: RefCell::new(config.map(futures_rustls::TlsAcceptor::from)),
            handshake_failures: Cell::new(0),
            plain_refusals: Cell::new(0),
            logged: [Cell::new(None), Cell::new(None)],
        }
    }

    pub fn mode(&self) -> ServerMode {
        self.mode
    }

    /// Connections accepted from now on use `config` (a reload).
    pub fn install(&self, config: Arc<rustls::ServerConfig>) {
        *self.acceptor.borrow_mut() = Some(futures_rustls::TlsAcceptor::from(config));
    }

    pub fn handshake_failures(&self) -> u64 {
        self.handshake_failures.get()
    }

    pub fn plain_refusals(&self) -> u64 {
        self.plain_refusals.get()
    }

    /// The stream to serve `stream` over, or `None` when the connection is refused (or
    /// closed or silent before it said anything).
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(&self, mut stream: S, peer: Option<SocketAddr>) -> Option<MaybeTls<PrefixedStream<S>>> {
        let acceptor = self.acceptor.borrow().clone();
        let acceptor = match (self.mode, acceptor) {
            (ServerMode::Disabled, _) | (_, None) => return Some(MaybeTls::Plain(PrefixedStream::new(None, stream))),
            (_, Some(a)) => a,
        };
        let first = match within(TLS_HANDSHAKE_TIMEOUT_MS, read_first_byte(&mut stream)).await {
            Some(Ok(first)) => first,
            Some(Err(_)) | None => return None,
        };
        match classify_first_byte(first) {
            FirstByte::Closed => None,
            FirstByte::Tls => match within(TLS_HANDSHAKE_TIMEOUT_MS, acceptor.accept(super::stream::ReadBuffered::new(PrefixedStream::new(first, stream)))).await {
                Some(Ok(tls)) => Some(MaybeTls::Tls(Box::new(futures_rustls::TlsStream::Server(tls)))),
                Some(Err(e)) => {
                    self.refused(Kind::Handshake, peer, &e.to_string());
                    None
                }
                None => {
                    self.refused(Kind::Handshake, peer, &format!("no handshake within {TLS_HANDSHAKE_TIMEOUT_MS} ms"));
                    None
                }
            },
            FirstByte::Plain if self.mode == ServerMode::Permissive => Some(MaybeTls::Plain(PrefixedStream::new(first, stream))),
            FirstByte::Plain => {
                self.refused(Kind::Plain, peer, "a plain (not TLS) connection");
                answer_refused_plain(first, stream).await;
                None
            }
        }
    }

    /// Counts a refusal and logs it unless one of its kind was logged within
    /// `TLS_REFUSAL_LOG_INTERVAL_MS`.
    fn refused(&self, kind: Kind, peer: Option<SocketAddr>, why: &str) {
        let counter = match kind {
            Kind::Handshake => &self.handshake_failures,
            Kind::Plain => &self.plain_refusals,
        };
        counter.set(counter.get() + 1);
        let total = counter.get();
        let slot = &self.logged[kind as usize];
        let now = Instant::now();
        if let Some((at, _)) = slot.get() {
            if now.duration_since(at) < Duration::from_millis(TLS_REFUSAL_LOG_INTERVAL_MS) {
                return;
            }
        }
        let since_last = total - slot.get().map_or(0, |(_, n)| n);
        slot.set(Some((now, total)));
        match kind {
            Kind::Handshake => tracing::warn!(port = self.label, ?peer, error = why, total, since_last_log = since_last, "TLS handshake failed: connection closed"),
            Kind::Plain => tracing::warn!(port = self.label, ?peer, total, since_last_log = since_last, "refused {why}: tls.server.mode=enforcing accepts TLS only"),
        }
    }
}

/// Answers a refused plain client's first request with SYSTEM_ERROR "TLS required"
/// (bounded in time and bytes; anything else is closed without a word).
async fn answer_refused_plain<S: AsyncRead + AsyncWrite + Unpin>(first: Option<u8>, mut stream: S) {
    let mut buf = BytesMut::with_capacity(4 * 1024);
    buf.extend(first);
    let limits = FrameLimits { frame_len_max_bytes: PLAIN_REFUSAL_READ_BYTES_MAX, body_len_max_bytes: PLAIN_REFUSAL_READ_BYTES_MAX };
    let read_request = async {
        let mut chunk = [0u8; 4096];
        loop {
            match RemotingCommand::decode(&mut buf, &limits) {
                Ok(Some(cmd)) => return Some(cmd),
                Ok(None) => {}
                Err(_) => return None,
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let request = within(PLAIN_REFUSAL_READ_MS, read_request).await.flatten();
    if let Some(request) = request.filter(|r| !r.is_response() && !r.is_oneway()) {
        let mut out = BytesMut::new();
        if request.create_response(rs::SYSTEM_ERROR, Some(PLAIN_REFUSAL_REMARK)).encode(&mut out).is_ok() {
            let _ = within(PLAIN_REFUSAL_READ_MS, async {
                let _ = stream.write_all(&out).await;
                let _ = stream.flush().await;
            })
            .await;
        }
    }
    let _ = stream.close().await;
}
