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

use crate::shard::mesh::ShardEvent;
use crate::shard::{ConnCtx, Shard};
use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

pub const REQUESTS_IN_FLIGHT_MAX: usize = 1024;
pub const WRITE_QUEUE_MAX: usize = 1024;
/// Bytes read from the socket per read call.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Frame overhead allowed on top of the body limit (headers, batch framing).
pub const FRAME_SLACK_BYTES: usize = 64 * 1024;

/// Serves one connection until it closes, goes idle, or sends a bad frame.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, conn_id: u64) {
    let remote = stream.peer_addr().ok();
    let ctx = ConnCtx { conn_id, remote };
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<RemotingCommand>(WRITE_QUEUE_MAX);
    let tx = Rc::new(tx);
    shard.conns.borrow_mut().insert(conn_id, tx.clone());
    let writer_task = glommio::spawn_local(async move {
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
        let _ = writer.close().await;
    });
    let limits = FrameLimits::with_body_len_max_bytes(shard.config.max_message_bytes as usize + FRAME_SLACK_BYTES);
    let idle = Duration::from_millis(shard.config.idle_connection_timeout_ms);
    let in_flight = Rc::new(Cell::new(0usize));
    let clients: Rc<RefCell<Vec<String>>> = Rc::new(RefCell::new(Vec::new()));
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    'conn: loop {
        loop {
            match RemotingCommand::decode(&mut buf, &limits) {
                Ok(Some(cmd)) => {
                    if cmd.is_response() {
                        continue; // answers to our NOTIFY pushes are oneway anyway
                    }
                    while in_flight.get() >= REQUESTS_IN_FLIGHT_MAX {
                        glommio::timer::sleep(Duration::from_micros(100)).await;
                    }
                    in_flight.set(in_flight.get() + 1);
                    if cmd.code == rq::HEART_BEAT {
                        if let Some(id) = heartbeat_client_id(&cmd) {
                            if !clients.borrow().contains(&id) {
                                clients.borrow_mut().push(id);
                            }
                        }
                    }
                    let shard = shard.clone();
                    let tx = tx.clone();
                    let in_flight = in_flight.clone();
                    glommio::spawn_local(async move {
                        if let Some(response) = shard.handle(cmd, ctx).await {
                            let _ = tx.send(response).await;
                        }
                        in_flight.set(in_flight.get() - 1);
                    })
                    .detach();
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
        let read = futures_lite::future::or(async { Some(reader.read(&mut chunk).await) }, async {
            glommio::timer::sleep(idle).await;
            None
        })
        .await;
        match read {
            Some(Ok(0)) | Some(Err(_)) => break,
            Some(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            None => {
                tracing::info!(conn_id, ?remote, idle_ms = idle.as_millis() as u64, "closing idle connection");
                break;
            }
        }
    }
    shard.conns.borrow_mut().remove(&conn_id);
    drop(tx);
    for client_id in clients.borrow().iter() {
        let event = ShardEvent::ClientGone { client_id: client_id.clone() };
        shard.mesh.broadcast(event.clone());
        shard.apply_event(event);
    }
    writer_task.cancel().await;
}

fn heartbeat_client_id(cmd: &RemotingCommand) -> Option<String> {
    ringmq_client::remoting::heartbeat::HeartbeatData::decode(&cmd.body).ok().map(|h| h.client_id)
}
