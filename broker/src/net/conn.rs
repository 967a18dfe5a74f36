//! One client connection on one shard: reads frames, runs each request as its own
//! task (so a sync send waiting for its flush or a suspended pull does not block the
//! requests behind it), and writes responses from a single writer task.
//!
//! Invariants:
//! - a frame is refused from its 8-byte prefix before it is buffered (length < 4,
//!   negative, over 16 MiB, or a body over `max_message_bytes` + slack): the connection
//!   is closed, nothing else is affected;
//! - a header that does not parse consumed exactly its frame: it gets an error response
//!   and the connection goes on;
//! - at most `REQUESTS_IN_FLIGHT_MAX` requests run per connection and at most
//!   `WRITE_QUEUE_MAX` responses wait to be written: a client that sends faster than it
//!   reads is slowed down, never buffered without bound;
//! - a connection silent for `idle_connection_timeout_ms` is closed.
//!
//! Generic over the byte stream (a glommio `TcpStream` in production, an in-memory
//! pipe in the simulator) and the runtime.

use crate::rt::chan;
use crate::rt::Runtime;
use crate::shard::{ConnCtx, Shard};
use bytes::BytesMut;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

pub const REQUESTS_IN_FLIGHT_MAX: usize = 1024;
pub const WRITE_QUEUE_MAX: usize = 1024;
/// Bytes read from the socket per read call.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frame overhead allowed on top of the body limit (headers, batch framing).
pub const FRAME_SLACK_BYTES: usize = 64 * 1024;

/// Serves one connection until it closes, goes idle, or sends a bad frame.
pub async fn serve<R: Runtime, S: AsyncRead + AsyncWrite + Unpin + 'static>(shard: Rc<Shard<R>>, stream: S, remote: Option<SocketAddr>, conn_id: u64) {
    let ctx = ConnCtx { conn_id, remote };
    let rt = shard.rt().clone();
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = chan::bounded::<RemotingCommand>(WRITE_QUEUE_MAX);
    shard.register_conn(conn_id, tx.clone());
    // Ends when every sender is gone: the reader below and every request task.
    let (writer_done_tx, writer_done) = chan::oneshot::<()>();
    rt.spawn(async move {
        let mut out = BytesMut::with_capacity(64 * 1024);
        while let Some(cmd) = rx.recv().await {
            out.clear();
            if let Err(e) = cmd.encode(&mut out) {
                tracing::warn!(conn_id, error = %e, "response could not be encoded");
                continue;
            }
            // Write everything already queued in one go.
            while let Some(Some(next)) = futures_lite::future::poll_once(rx.recv()).await {
                if next.encode(&mut out).is_err() {
                    continue;
                }
                if out.len() >= 1024 * 1024 {
                    break;
                }
            }
            if writer.write_all(&out).await.is_err() {
                break;
            }
        }
        // Dropping the receiver fails every later send at once: a dead socket never
        // holds a request task.
        drop(rx);
        let _ = writer.close().await;
        writer_done_tx.send(());
    });
    let limits = FrameLimits::with_body_len_max_bytes(shard.config().max_message_bytes as usize + FRAME_SLACK_BYTES);
    let idle = Duration::from_millis(shard.config().idle_connection_timeout_ms);
    // A permit per running request: `send` waits while REQUESTS_IN_FLIGHT_MAX run.
    let (permits, permits_back) = chan::bounded::<()>(REQUESTS_IN_FLIGHT_MAX);
    let permits_back = Rc::new(permits_back);
    let clients: Rc<RefCell<Vec<String>>> = Rc::new(RefCell::new(Vec::new()));
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    'conn: loop {
        loop {
            match RemotingCommand::decode(&mut buf, &limits) {
                Ok(Some(cmd)) => {
                    if cmd.is_response() {
                        // An answer to a request the broker sent this client.
                        shard.complete_client_call(conn_id, cmd);
                        continue;
                    }
                    if permits.send(()).await.is_err() {
                        unreachable!("the permit receiver lives as long as this loop");
                    }
                    if cmd.code == rq::HEART_BEAT {
                        if let Some(id) = heartbeat_client_id(&cmd) {
                            if !clients.borrow().contains(&id) {
                                clients.borrow_mut().push(id);
                            }
                        }
                    }
                    let shard = shard.clone();
                    let tx = tx.clone();
                    let permits_back = permits_back.clone();
                    rt.spawn(async move {
                        if let Some(response) = shard.handle(cmd, ctx).await {
                            let _ = tx.send(response).await;
                        }
                        permits_back.try_recv();
                    });
                }
                Ok(None) => break,
                Err(e) if !e.is_fatal() => {
                    // The frame was consumed; answer if we can tell who asked.
                    tracing::debug!(conn_id, error = %e, "bad request header");
                    let mut r = RemotingCommand::request(0).with_serialize_type(ringmq_client::remoting::frame::SerializeType::Json);
                    r.flag = ringmq_client::remoting::command::FLAG_RESPONSE;
                    r.code = rs::SYSTEM_ERROR;
                    r.remark = Some(format!("bad request header: {e}"));
                    let _ = tx.try_send(r);
                }
                Err(e) => {
                    tracing::info!(conn_id, ?remote, error = %e, "closing connection after a bad frame");
                    break 'conn;
                }
            }
        }
        let read = crate::rt::timeout(&rt, idle, reader.read(&mut chunk)).await;
        match read {
            Some(Ok(0)) | Some(Err(_)) => break,
            Some(Ok(n)) => {
                buf.extend_from_slice(&chunk[..n]);
                crate::copy_probe::record(crate::copy_probe::Site::NetRead, n);
            }
            None => {
                tracing::info!(conn_id, ?remote, idle_ms = idle.as_millis() as u64, "closing idle connection");
                break;
            }
        }
    }
    let client_ids = clients.borrow().clone();
    shard.conn_closed(conn_id, &client_ids);
    drop(tx);
    // Requests still running answer into the queue; the writer ends when the last of
    // them is done (or at once if the socket is gone).
    let _ = writer_done.await;
}

fn heartbeat_client_id(cmd: &RemotingCommand) -> Option<String> {
    ringmq_client::remoting::heartbeat::HeartbeatData::decode(&cmd.body).ok().map(|h| h.client_id)
}
