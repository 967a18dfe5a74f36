//! One client connection on one shard: reads frames, runs each request in a task of its
//! own (so a sync send waiting for its flush or a suspended pull does not block the
//! requests behind it), and writes responses from a single writer task. Request tasks
//! are reused: a finished one waits for the next request (at most
//! `REQUEST_TASKS_IDLE_MAX` wait), so a request costs no spawn. The socket reads into
//! the frame buffer itself, and responses are encoded straight into the write buffer.
//!
//! Invariants:
//! - a frame is refused from its 8-byte prefix before it is buffered (length < 4,
//!   negative, over 16 MiB, or a body over `max_message_bytes` + slack, the value in
//!   force when the frame is read: UPDATE_BROKER_CONFIG changes it): the connection
//!   is closed, nothing else is affected;
//! - a header that does not parse consumed exactly its frame: it gets an error response
//!   and the connection goes on;
//! - answers are independent: the reader never waits for a request task to start or
//!   finish before it dispatches the next frame (an idle task takes it, else a new one
//!   is spawned), so a suspended pull or a sync send waiting for its flush holds no
//!   later request (ARCHITECTURE.md, "Answers on one connection are independent");
//! - requests start in arrival order (a new task lets requests handed out before it
//!   start first), so sends on one connection to one queue are stored in send order;
//! - at most `REQUESTS_IN_FLIGHT_MAX` requests run per connection and at most
//!   `WRITE_QUEUE_MAX` responses wait to be written: a client that sends faster than it
//!   reads is slowed down, never buffered without bound;
//! - a connection silent for `idle_connection_timeout_ms` is closed;
//! - when the connection ends, every idle request task ends (they hold senders of the
//!   write queue, whose end ends the writer); a busy one ends when its request is done.
//!
//! Generic over the byte stream (a glommio `TcpStream` in production, the same under
//! TLS when `tls.server.mode` is not disabled — `net::tls` — and an in-memory pipe in
//! the simulator) and the runtime. The writer flushes after each gathered write, so
//! no response waits inside a TLS session's buffer.

use crate::rt::chan;
use crate::rt::Runtime;
use crate::shard::{ConnCtx, Shard};
use bytes::BytesMut;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

pub const REQUESTS_IN_FLIGHT_MAX: usize = 1024;
pub const WRITE_QUEUE_MAX: usize = 1024;
/// Most bytes read from the socket per read call.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Fewest: the read window starts here and doubles while reads fill it (up to
/// `READ_CHUNK_BYTES`), halving again when they come back small. The window is
/// zero-filled before each read (a read needs an initialized slice), so an idle
/// connection touches only this much of its buffer's memory.
pub const READ_WINDOW_MIN_BYTES: usize = 4 * 1024;
/// The frame buffer's first capacity: several reads' worth, so that it is reused in place
/// (frames consumed, the rest moved to its start) rather than renewed per read.
pub const READ_BUFFER_BYTES: usize = 4 * READ_CHUNK_BYTES;
/// Bodies from this size are written to the socket from the response itself, after
/// the frame's head, instead of being copied into the write buffer.
const BODY_WRITTEN_DIRECT_BYTES_MIN: usize = 64 * 1024;
/// The writer gathers queued responses into one write up to this size.
const WRITE_GATHER_BYTES_MAX: usize = 1024 * 1024;

/// Appends `cmd` to `out`, or only its head when its body is to be written directly
/// (returned: the caller writes it right after `out`).
fn encode_response(cmd: &RemotingCommand, out: &mut BytesMut) -> Result<Option<bytes::Bytes>, ringmq_client::remoting::command::CommandError> {
    if cmd.body.len() >= BODY_WRITTEN_DIRECT_BYTES_MIN {
        cmd.encode_head(out)?;
        Ok(Some(cmd.body.clone()))
    } else {
        cmd.encode(out).map(|()| None)
    }
}

/// Frame overhead allowed on top of the body limit (headers, batch framing).
pub const FRAME_SLACK_BYTES: usize = 64 * 1024;

/// Serves one connection until it closes, goes idle, or sends a bad frame.
pub async fn serve<R: Runtime, S: AsyncRead + AsyncWrite + Unpin + 'static>(shard: Rc<Shard<R>>, stream: S, remote: Option<SocketAddr>, conn_id: u64) {
    let ctx = ConnCtx { conn_id, remote };
    let rt = shard.rt().clone();
    let (mut reader, writer) = futures_lite::io::split(stream);
    let (tx, rx) = chan::bounded::<RemotingCommand>(WRITE_QUEUE_MAX);
    shard.register_conn(conn_id, tx.clone());
    // Ends when every sender is gone: the reader below and every request task.
    let (writer_done_tx, writer_done) = chan::oneshot::<()>();
    rt.spawn(write_responses(rx, writer, conn_id, writer_done_tx));
    let idle = Duration::from_millis(shard.config().idle_connection_timeout_ms);
    // A permit per running request: `send` waits while REQUESTS_IN_FLIGHT_MAX run.
    let (permits, permits_back) = chan::bounded::<()>(REQUESTS_IN_FLIGHT_MAX);
    let permits_back = Rc::new(permits_back);
    let clients: Rc<RefCell<Vec<String>>> = Rc::new(RefCell::new(Vec::new()));
    let pool = Rc::new(WorkerPool::default());
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut read_window_bytes = READ_WINDOW_MIN_BYTES;
    'conn: loop {
        // Per read, not per connection: `maxMessageSize` changes at runtime.
        let limits = FrameLimits::with_body_len_max_bytes(shard.config().max_message_bytes as usize + FRAME_SLACK_BYTES);
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
                    // An idle request task takes it, else a new task does: never wait for a
                    // task to become free. Answers on one connection are independent
                    // (ARCHITECTURE.md, Decisions): a request waits for nothing but its
                    // own work, so a pull suspended by long polling, a sync send waiting
                    // for its flush or a request handed to a task that has not run yet
                    // never holds the requests behind it. (01de640 waited here for handed
                    // tasks to start: a whole scheduler round per request, which put the
                    // README's consumer seconds behind its producers; issue 22.)
                    // (Popped before the match: a spawned task runs at once, inside
                    // `spawn`, and touches the pool.)
                    let idle = pool.idle.borrow_mut().pop();
                    match idle {
                        Some(worker) => {
                            pool.handed.set(pool.handed.get() + 1);
                            worker.give(cmd);
                        }
                        None => {
                            let worker = Rc::new(Worker::default());
                            rt.spawn(run_worker(shard.clone(), ctx, cmd, worker, pool.clone(), tx.clone(), permits_back.clone()));
                        }
                    }
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
        // The socket reads straight into the frame buffer's free room (zero-filled
        // first: a read needs an initialized slice), so frames are never copied after
        // the kernel's copy.
        // Requests handed out get one turn first (they were woken before this task
        // yields, and the executor's run queue is FIFO): a request done with drops its
        // frame, so the buffer is usually unshared again and `reserve` reuses it in
        // place instead of allocating a new one. One turn per read, not a wait: a
        // request that is still running does not delay the next read.
        if pool.handed.get() > 0 {
            futures_lite::future::yield_now().await;
        }
        let filled = buf.len();
        let at = buf.as_ptr();
        let window = read_window_bytes;
        buf.reserve(window);
        if buf.as_ptr() != at && filled > 0 {
            // The start of a frame still arriving moved to the new room.
            crate::copy_probe::record(crate::copy_probe::Site::NetRead, filled);
        }
        buf.resize(filled + window, 0);
        let read = crate::rt::timeout(&rt, idle, reader.read(&mut buf[filled..])).await;
        let got = match &read {
            Some(Ok(n)) => *n,
            _ => 0,
        };
        buf.truncate(filled + got);
        read_window_bytes = next_read_window(window, got);
        match read {
            Some(Ok(0)) | Some(Err(_)) => break,
            Some(Ok(_)) => {}
            None => {
                tracing::info!(conn_id, ?remote, idle_ms = idle.as_millis() as u64, "closing idle connection");
                break;
            }
        }
    }
    let client_ids = clients.borrow().clone();
    shard.conn_closed(conn_id, &client_ids);
    drop(tx);
    // Idle request tasks hold senders too: they end now, busy ones when they finish.
    pool.close();
    // Requests still running answer into the queue; the writer ends when the last of
    // them is done (or at once if the socket is gone).
    let _ = writer_done.await;
}

/// The connection's writer: answers in the order they are queued, everything already
/// queued gathered into one write; ends when every sender is gone or the socket fails.
async fn write_responses<W: AsyncWrite + Unpin>(rx: chan::Receiver<RemotingCommand>, mut writer: W, conn_id: u64, done: chan::OneshotSender<()>) {
    let mut out = BytesMut::with_capacity(64 * 1024);
    while let Some(cmd) = rx.recv().await {
        out.clear();
        // A large body (a catch-up pull's) goes to the socket from the response
        // itself, behind the frames gathered before it: never copied into `out`.
        let mut direct_body = match encode_response(&cmd, &mut out) {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(conn_id, error = %e, "response could not be encoded");
                continue;
            }
        };
        // Write everything already queued in one go.
        while direct_body.is_none() && out.len() < WRITE_GATHER_BYTES_MAX {
            let Some(Some(next)) = futures_lite::future::poll_once(rx.recv()).await else { break };
            if let Ok(body) = encode_response(&next, &mut out) {
                direct_body = body;
            }
        }
        if !out.is_empty() && writer.write_all(&out).await.is_err() {
            break;
        }
        if let Some(body) = direct_body {
            if writer.write_all(&body).await.is_err() {
                break;
            }
        }
        // Over TLS, pushes out the records rustls still holds; a plain socket's flush
        // does nothing.
        if writer.flush().await.is_err() {
            break;
        }
    }
    // Dropping the receiver fails every later send at once: a dead socket never
    // holds a request task.
    drop(rx);
    let _ = writer.close().await;
    done.send(());
}

/// The next read's window: doubled after a read that filled it (up to
/// `READ_CHUNK_BYTES`), halved after one that used under a quarter (down to
/// `READ_WINDOW_MIN_BYTES`).
fn next_read_window(window: usize, got: usize) -> usize {
    if got == window {
        (window * 2).min(READ_CHUNK_BYTES)
    } else if got < window / 4 {
        (window / 2).max(READ_WINDOW_MIN_BYTES)
    } else {
        window
    }
}

/// Idle request tasks a connection keeps for its next requests; past this many a task
/// that finishes ends. A task's future is the handler's whole state machine (~15 KB)
/// and a spawn costs two allocations, so a pipelining client's requests reuse tasks.
pub const REQUEST_TASKS_IDLE_MAX: usize = 64;

/// A request task waiting for its next request.
#[derive(Default)]
struct Worker {
    next: RefCell<Option<RemotingCommand>>,
    waker: Cell<Option<Waker>>,
}

impl Worker {
    fn give(&self, cmd: RemotingCommand) {
        *self.next.borrow_mut() = Some(cmd);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// The connection's idle request tasks.
#[derive(Default)]
struct WorkerPool {
    idle: RefCell<Vec<Rc<Worker>>>,
    /// Requests handed to idle tasks that have not started them yet.
    handed: Cell<usize>,
    closed: Cell<bool>,
}

impl WorkerPool {
    fn close(&self) {
        self.closed.set(true);
        let idle = std::mem::take(&mut *self.idle.borrow_mut());
        for worker in idle {
            if let Some(w) = worker.waker.take() {
                w.wake();
            }
        }
    }
}

/// Runs `first`, then whatever requests the connection hands this task while it is
/// idle, until the connection closes or enough other tasks are idle.
async fn run_worker<R: Runtime>(
    shard: Rc<Shard<R>>,
    ctx: ConnCtx,
    first: RemotingCommand,
    me: Rc<Worker>,
    pool: Rc<WorkerPool>,
    tx: chan::Sender<RemotingCommand>,
    permits_back: Rc<chan::Receiver<()>>,
) {
    // A spawned task runs at once, inside `spawn`, while requests handed to idle tasks
    // before this one wait their turn in the run queue: one turn here lets them start
    // first, so requests still start in arrival order (sends on one connection to one
    // queue are stored in the order they were sent, as Apache's send executor does)
    // without the reader waiting for anything.
    if pool.handed.get() > 0 {
        futures_lite::future::yield_now().await;
    }
    let mut cmd = first;
    loop {
        if let Some(response) = shard.handle(cmd, ctx).await {
            let _ = tx.send(response).await;
        }
        permits_back.try_recv();
        if pool.closed.get() || pool.idle.borrow().len() >= REQUEST_TASKS_IDLE_MAX {
            return;
        }
        pool.idle.borrow_mut().push(me.clone());
        let next = std::future::poll_fn(|cx| {
            if let Some(c) = me.next.borrow_mut().take() {
                pool.handed.set(pool.handed.get() - 1);
                return Poll::Ready(Some(c));
            }
            if pool.closed.get() {
                return Poll::Ready(None);
            }
            me.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await;
        match next {
            Some(c) => cmd = c,
            None => return,
        }
    }
}

fn heartbeat_client_id(cmd: &RemotingCommand) -> Option<String> {
    ringmq_client::remoting::heartbeat::HeartbeatData::decode(&cmd.body).ok().map(|h| h.client_id)
}
