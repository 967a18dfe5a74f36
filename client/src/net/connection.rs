//! One multiplexed RocketMQ remoting connection: requests carry an `opaque`, a reader
//! task matches responses to waiting callers, a writer task batches outgoing frames.
//! Server-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, …)
//! go to the owner's handler.
//!
//! Invariants:
//! - every request waits at most its timeout; on timeout its slot is removed, so a late
//!   answer is dropped, never delivered to another caller;
//! - at most `REQUESTS_IN_FLIGHT_MAX` requests are outstanding and at most
//!   `WRITE_QUEUE_MAX` frames wait to be written: callers beyond that wait (bounded by
//!   their own timeout), nothing is buffered without bound;
//! - once the socket fails, the connection is closed for good: every waiter gets
//!   `ConnectionClosed` at once and the owner opens a new connection on the next call;
//! - `!Send`: a connection belongs to the executor that opened it.
//! - with credentials set (`set_credentials`), every request and oneway leaving it is
//!   signed as Java's `AclClientRPCHook` signs (`remoting::acl`).
//! - over TLS (`connect_with` and a `ClientTls`) the handshake is part of the connect
//!   timeout, and the writer flushes after each batch so no frame waits inside TLS.

use crate::error::ClientError;
use crate::remoting::codes::response_code as rs;
use crate::remoting::acl::Credentials;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::{FrameLimits, SerializeType, FRAME_LEN_MAX_BYTES};
use bytes::BytesMut;
use crate::net::tls::{ClientTls, MaybeTls};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalSender};
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Requests outstanding on one connection (long-polling pulls count too).
pub const REQUESTS_IN_FLIGHT_MAX: usize = 4096;
/// Frames queued for the writer task.
pub const WRITE_QUEUE_MAX: usize = 1024;
/// Bytes read per read call.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Bytes gathered into one write.
pub const WRITE_BATCH_BYTES_MAX: usize = 1024 * 1024;

/// Answers a request the server sent us; `None` for oneway requests or when there is
/// nothing to say.
pub type ServerRequestHandler = Rc<dyn Fn(&str, RemotingCommand) -> Option<RemotingCommand>>;

/// Where a response meets the caller waiting for it.
#[derive(Default)]
struct Slot {
    value: RefCell<Option<Result<RemotingCommand, ClientError>>>,
    waker: RefCell<Option<Waker>>,
}

impl Slot {
    fn fill(&self, value: Result<RemotingCommand, ClientError>) {
        *self.value.borrow_mut() = Some(value);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

struct SlotFuture(Rc<Slot>);

impl Future for SlotFuture {
    type Output = Result<RemotingCommand, ClientError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(v) = self.0.value.borrow_mut().take() {
            return Poll::Ready(v);
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

struct Shared {
    addr: String,
    pending: RefCell<HashMap<i32, Rc<Slot>>>,
    closed: Cell<bool>,
}

impl Shared {
    fn close(&self) {
        if self.closed.replace(true) {
            return;
        }
        let pending: Vec<Rc<Slot>> = self.pending.borrow_mut().drain().map(|(_, s)| s).collect();
        for slot in pending {
            slot.fill(Err(ClientError::ConnectionClosed { addr: self.addr.clone() }));
        }
    }
}

pub struct Connection {
    shared: Rc<Shared>,
    tx: Rc<LocalSender<RemotingCommand>>,
    next_opaque: Cell<i32>,
    serialize_type: SerializeType,
    tasks: RefCell<Vec<JoinHandle<()>>>,
    /// Every request is signed with these (Java's `AclClientRPCHook`) when set.
    credentials: RefCell<Option<Rc<Credentials>>>,
}

impl Connection {
    /// Connects within `timeout`. Responses up to the 16 MiB frame limit are accepted
    /// (a pull answer carries up to 32 messages).
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        serialize_type: SerializeType,
        on_request: Option<ServerRequestHandler>,
    ) -> Result<Rc<Self>, ClientError> {
        Self::connect_with(addr, timeout, serialize_type, on_request, None).await
    }

    /// `connect`, over TLS when `tls` is given (the handshake within the same timeout).
    pub async fn connect_with(
        addr: &str,
        timeout: Duration,
        serialize_type: SerializeType,
        on_request: Option<ServerRequestHandler>,
        tls: Option<&ClientTls>,
    ) -> Result<Rc<Self>, ClientError> {
        let connect = async {
            let stream = TcpStream::connect(addr).await.map_err(|e| ClientError::Connect { addr: addr.to_string(), reason: e.to_string() })?;
            let _ = stream.set_nodelay(true);
            match tls {
                None => Ok(MaybeTls::Plain(stream)),
                Some(tls) => tls.connect(addr, stream).await.map_err(|e| ClientError::Connect { addr: addr.to_string(), reason: format!("TLS handshake failed: {e}") }),
            }
        };
        let stream = futures_lite::future::or(connect, async {
            glommio::timer::sleep(timeout).await;
            Err(ClientError::Connect { addr: addr.to_string(), reason: format!("no connection within {} ms", timeout.as_millis()) })
        })
        .await?;
        Ok(Self::over(addr, stream, serialize_type, on_request))
    }

    /// A connection over `stream`, already connected (and, for TLS, handshaken).
    fn over<S: AsyncRead + AsyncWrite + Unpin + 'static>(addr: &str, stream: S, serialize_type: SerializeType, on_request: Option<ServerRequestHandler>) -> Rc<Self> {
        let (mut reader, mut writer) = futures_lite::io::split(stream);
        let shared = Rc::new(Shared { addr: addr.to_string(), pending: RefCell::new(HashMap::new()), closed: Cell::new(false) });
        let (tx, rx) = local_channel::new_bounded::<RemotingCommand>(WRITE_QUEUE_MAX);
        let tx = Rc::new(tx);
        let writer_shared = shared.clone();
        let writer_task = glommio::spawn_local(async move {
            let mut out = BytesMut::with_capacity(64 * 1024);
            while let Some(cmd) = rx.recv().await {
                out.clear();
                if let Err(e) = cmd.encode(&mut out) {
                    tracing::warn!(error = %e, "request could not be encoded");
                    continue;
                }
                while out.len() < WRITE_BATCH_BYTES_MAX {
                    match futures_lite::future::poll_once(rx.recv()).await {
                        Some(Some(next)) => {
                            if let Err(e) = next.encode(&mut out) {
                                tracing::warn!(error = %e, "request could not be encoded");
                            }
                        }
                        _ => break,
                    }
                }
                // The flush pushes out what TLS holds encrypted (nothing, on a plain socket).
                if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
            }
            writer_shared.close();
            let _ = writer.close().await;
        })
        .detach();
        let reader_shared = shared.clone();
        let reply_tx = tx.clone();
        let reader_task = glommio::spawn_local(async move {
            let limits = FrameLimits { frame_len_max_bytes: FRAME_LEN_MAX_BYTES, body_len_max_bytes: FRAME_LEN_MAX_BYTES };
            let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
            let mut chunk = vec![0u8; READ_CHUNK_BYTES];
            'conn: loop {
                loop {
                    match RemotingCommand::decode(&mut buf, &limits) {
                        Ok(Some(cmd)) if cmd.is_response() => {
                            let slot = reader_shared.pending.borrow_mut().remove(&cmd.opaque);
                            if let Some(slot) = slot {
                                slot.fill(Ok(cmd));
                            }
                        }
                        Ok(Some(cmd)) => {
                            let oneway = cmd.is_oneway();
                            let code = cmd.code;
                            let answer = match &on_request {
                                Some(handler) => handler(&reader_shared.addr, cmd.clone()),
                                None => None,
                            };
                            let answer = answer.or_else(|| {
                                (!oneway).then(|| {
                                    cmd.create_response(rs::REQUEST_CODE_NOT_SUPPORTED, Some(&format!("request code {code} not supported by this client")))
                                })
                            });
                            if let (false, Some(answer)) = (oneway, answer) {
                                let _ = reply_tx.try_send(answer);
                            }
                        }
                        Ok(None) => break,
                        Err(e) if !e.is_fatal() => tracing::debug!(addr = %reader_shared.addr, error = %e, "undecodable frame skipped"),
                        Err(e) => {
                            tracing::warn!(addr = %reader_shared.addr, error = %e, "closing connection after a bad frame");
                            break 'conn;
                        }
                    }
                }
                match reader.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            reader_shared.close();
        })
        .detach();
        Rc::new(Self {
            shared,
            tx,
            next_opaque: Cell::new(1),
            serialize_type,
            tasks: RefCell::new(vec![writer_task, reader_task]),
            credentials: RefCell::new(None),
        })
    }

    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.get()
    }

    /// Signs every later request (AccessKey, SecurityToken, Signature) with `credentials`.
    pub fn set_credentials(&self, credentials: Option<Rc<Credentials>>) {
        *self.credentials.borrow_mut() = credentials;
    }

    fn signed(&self, mut cmd: RemotingCommand) -> RemotingCommand {
        if let Some(c) = self.credentials.borrow().as_deref() {
            crate::remoting::acl::sign(&mut cmd, c);
        }
        cmd
    }

    fn opaque(&self) -> i32 {
        let o = self.next_opaque.get();
        self.next_opaque.set(o.wrapping_add(1).max(1));
        o
    }

    /// Sends `cmd` and waits up to `timeout` for its response.
    pub async fn request(&self, cmd: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientError> {
        if self.is_closed() {
            return Err(ClientError::ConnectionClosed { addr: self.shared.addr.clone() });
        }
        let code = cmd.code;
        let timeout_err = || ClientError::Timeout { addr: self.shared.addr.clone(), code, timeout_ms: timeout.as_millis() as u64 };
        let deadline = std::time::Instant::now() + timeout;
        while self.shared.pending.borrow().len() >= REQUESTS_IN_FLIGHT_MAX {
            if std::time::Instant::now() >= deadline {
                return Err(timeout_err());
            }
            glommio::timer::sleep(Duration::from_micros(200)).await;
        }
        let opaque = self.opaque();
        let cmd = self.signed(cmd.with_opaque(opaque).with_serialize_type(self.serialize_type));
        let slot = Rc::new(Slot::default());
        self.shared.pending.borrow_mut().insert(opaque, slot.clone());
        let exchange = async {
            if self.tx.send(cmd).await.is_err() {
                return Err(ClientError::ConnectionClosed { addr: self.shared.addr.clone() });
            }
            SlotFuture(slot).await
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let result = futures_lite::future::or(exchange, async {
            glommio::timer::sleep(left).await;
            Err(timeout_err())
        })
        .await;
        self.shared.pending.borrow_mut().remove(&opaque);
        result
    }

    /// Sends `cmd` without waiting for an answer (the broker sends none).
    pub async fn oneway(&self, cmd: RemotingCommand) -> Result<(), ClientError> {
        if self.is_closed() {
            return Err(ClientError::ConnectionClosed { addr: self.shared.addr.clone() });
        }
        let cmd = self.signed(cmd.with_opaque(self.opaque()).with_serialize_type(self.serialize_type).oneway());
        self.tx.send(cmd).await.map_err(|_| ClientError::ConnectionClosed { addr: self.shared.addr.clone() })
    }

    /// Closes the socket; waiters get `ConnectionClosed`.
    pub fn close(&self) {
        self.shared.close();
        for task in self.tasks.borrow_mut().drain(..) {
            task.cancel();
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}
