//! The Redis Streams peer: starts a private `redis-server` and runs a loadgen `Workload`
//! against it with std threads and blocking sockets, producing the same `RunRecord` as
//! RingMQ's own runs.
//!
//! Mapping of the workload:
//! - One stream `stream-<topic index>` per topic; `queues_per_topic` has no Redis
//!   equivalent and is ignored. One consumer group `g`; consumer `i` is `c<i>`.
//! - Each producer is one connection and thread keeping `in_flight_per_producer` sends
//!   pipelined. A send is `batch_size` XADDs (`XADD stream-<t> MAXLEN ~ N * b <payload>`,
//!   topics round-robin) written together without MULTI; its latency runs until the
//!   last reply of the batch. Redis acknowledges every command, so `send_mode` is
//!   ignored (pipelining plays the part of async sends).
//! - The payload is `message_bytes` bytes; its first 8 (little-endian u64) carry the send
//!   time in µs since the run's common start `Instant`, from which consumers compute the
//!   end-to-end latency.
//! - Open loop (`target_rate_per_sec`): each producer gets rate/producers, sends are
//!   scheduled at fixed intervals, and both latencies run from the *scheduled* time (the
//!   timestamp in the payload is the scheduled time too), so a stall that delays sends
//!   is charged to them (no coordinated omission). Closed loop: from the actual send.
//! - Consumers: `XREADGROUP GROUP g c<i> COUNT n BLOCK 100 NOACK STREAMS ... >`. NOACK
//!   was chosen over XACK: a RocketMQ/RingMQ consumer commits offsets periodically (every
//!   few seconds), not per message, so per-message XACKs (one more command and a PEL
//!   insert and delete per message) would charge Redis for bookkeeping the broker
//!   consumers do not do. With NOACK, delivery counts as consumption (at-most-once if a
//!   consumer dies), which is what a periodic commit approximates. `n` is
//!   `READ_COUNT_MAX` (1000) unless that would make a reply larger than
//!   `READ_REPLY_BYTES_TARGET`.
//! - Durability: `FsyncBeforeAck` → `appendonly yes` + `appendfsync always`;
//!   `WithinOneSecond` → `appendonly yes` + `appendfsync everysec`; `Memory` →
//!   `appendonly no`. RDB snapshots are off in every mode (`save ""`); AOF rewrites keep
//!   Redis' defaults (they are how Redis bounds its disk use).
//!
//! Counting: `sent` counts messages whose XADD was acknowledged, in the interval of the
//! acknowledgement; an error reply counts in `send_failed` (and `errors`); `received`
//! counts entries delivered to a consumer, in the interval they arrived.
//!
//! Reporting: each thread owns its counters and histograms for the current 1 s interval
//! and sends them over an mpsc channel when the interval ends (no shared locks); the
//! calling thread merges an interval once every thread has reported it, calls
//! `progress`, and appends it to the record. When the measured time ends producers stop
//! sending and collect their outstanding replies; then consumers get up to
//! `DRAIN_SECS_MAX` to catch up. Replies and receipts after the last interval (the
//! "drain") are not an interval: they are added to the whole-run figures only.
//!
//! Invariants: memory is bounded — every XADD trims its stream with `MAXLEN ~ N`, where
//! N = `STREAMS_MEMORY_BYTES_MAX` spread over the topics, clamped to
//! `STREAM_ENTRIES_MIN..=STREAM_ENTRIES_MAX` (Redis keeps entries after they are read,
//! so a long run would otherwise fill RAM; a consumer more than N entries behind loses
//! the trimmed ones, which shows as "not received"); pipelines, reply sizes and read
//! buffers have named maxima. Every socket read waits at most `TICK`, so threads see the
//! end of an interval and stop requests on time. The server is stopped (SHUTDOWN NOSAVE,
//! then kill) when its guard drops, on every path.

use super::resp::{self, Value};
use super::PeerError;
use crate::record::{new_latency_histogram, record_us, Durability, IntervalStats, RunRecord, Workload};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub const SYSTEM: &str = "Redis Streams";

/// Most entries kept per stream (`XADD ... MAXLEN ~ N`).
pub const STREAM_ENTRIES_MAX: u64 = 1_000_000;
/// Fewest entries kept per stream, whatever the message size.
pub const STREAM_ENTRIES_MIN: u64 = 100;
/// Payload bytes all streams together may hold before trimming (about; Redis adds a few
/// tens of bytes per entry).
pub const STREAMS_MEMORY_BYTES_MAX: u64 = 2 << 30;
/// Per-entry overhead assumed when turning `STREAMS_MEMORY_BYTES_MAX` into entries.
const ENTRY_OVERHEAD_BYTES: u64 = 64;
/// Smallest message: the 8-byte send timestamp.
pub const MESSAGE_BYTES_MIN: usize = 8;
/// Largest message (as RingMQ's loadgen; below `resp::BULK_BYTES_MAX`).
pub const MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;
pub const IN_FLIGHT_MAX: usize = 4096;
pub const BATCH_SIZE_MAX: usize = 1024;
/// Most payload bytes one producer may have pipelined (in-flight × batch × size).
pub const PIPELINE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Most producer or consumer threads each.
pub const THREADS_MAX: usize = 256;
pub const TOPICS_MAX: usize = 1024;
/// Longest run accepted (warm-up + measured).
pub const RUN_SECS_MAX: u64 = 3600;
/// XREADGROUP COUNT (per stream), unless replies would exceed `READ_REPLY_BYTES_TARGET`.
pub const READ_COUNT_MAX: usize = 1000;
pub const READ_REPLY_BYTES_TARGET: usize = 4 * 1024 * 1024;
/// XREADGROUP BLOCK.
pub const READ_BLOCK_MS: u64 = 100;
/// Largest reply buffered on one connection.
pub const READ_BUFFER_BYTES_MAX: usize = 64 * 1024 * 1024;
const READ_BUFFER_BYTES_INITIAL: usize = 256 * 1024;
/// Free space guaranteed before each socket read.
const READ_CHUNK_BYTES_MIN: usize = 64 * 1024;
/// Length of one reporting interval.
pub const REPORT_INTERVAL_SECS: u64 = 1;
/// Longest a consumer may lag after the producers stop before the run ends anyway.
pub const DRAIN_SECS_MAX: u64 = 5;
/// Longest a producer waits for its outstanding replies after the measured time.
const ACK_WAIT_SECS_MAX: u64 = 10;
/// Longest any socket read blocks, so threads notice interval ends and stop requests.
const TICK: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const ADMIN_REPLY_TIMEOUT: Duration = Duration::from_secs(30);
const START_TIMEOUT_SECS: u64 = 10;
const START_ATTEMPTS_MAX: usize = 3;
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Bytes of the server's log quoted in start-up errors.
const LOG_TAIL_BYTES_MAX: usize = 2000;
/// Distinct error messages kept per interval; the rest are counted as "other errors".
const ERROR_KINDS_MAX: usize = 16;
const ERROR_TEXT_CHARS_MAX: usize = 200;

const GROUP: &[u8] = b"g";
const FIELD: &[u8] = b"b";

/// `RunRecord::config` for a durability.
pub fn config_label(durability: Durability) -> &'static str {
    match durability {
        Durability::FsyncBeforeAck => "appendfsync always",
        Durability::WithinOneSecond => "appendfsync everysec",
        Durability::Memory => "no persistence (appendonly no, save \"\")",
    }
}

/// Runs `workload` against a private redis-server whose files live in `dir` (created if
/// missing; Redis data files of an earlier run there are removed). `progress` is called once per interval.
pub fn run_redis(
    workload: &Workload,
    durability: Durability,
    dir: &Path,
    progress: &dyn Fn(&IntervalStats),
) -> Result<RunRecord, PeerError> {
    validate(workload)?;
    let mut server = RedisServer::start(dir, durability)?;
    // The server's CPU over the measured window (all its threads: the fsync thread
    // too), read at the end of the last warm-up interval and after the last interval,
    // so work per message is compared with RingMQ's broker CPU side by side.
    let pid = server.pid();
    let window_start_cpu_ms = std::cell::Cell::new(pid.and_then(crate::embedded::process_cpu_ms));
    let result = drive(workload, durability, server.port(), &|stats: &IntervalStats| {
        if stats.warmup {
            window_start_cpu_ms.set(pid.and_then(crate::embedded::process_cpu_ms));
        }
        progress(stats)
    });
    let window_end_cpu_ms = pid.and_then(crate::embedded::process_cpu_ms);
    let stopped = server.stop();
    let mut record = result?;
    stopped?;
    if let (Some(start), Some(end)) = (window_start_cpu_ms.get(), window_end_cpu_ms) {
        if record.sent > 0 {
            record.config.push_str(&format!(", {:.1} redis-server CPU-µs/msg", end.saturating_sub(start) as f64 * 1000.0 / record.sent as f64));
        }
    }
    Ok(record)
}

fn validate(w: &Workload) -> Result<(), PeerError> {
    let bad = |why: String| Err(PeerError::Workload(why));
    if w.producers == 0 || w.producers > THREADS_MAX {
        return bad(format!("producers must be 1..={THREADS_MAX}, got {}", w.producers));
    }
    if w.consumers > THREADS_MAX {
        return bad(format!("consumers must be at most {THREADS_MAX}, got {}", w.consumers));
    }
    if w.topics == 0 || w.topics > TOPICS_MAX {
        return bad(format!("topics must be 1..={TOPICS_MAX}, got {}", w.topics));
    }
    if !(MESSAGE_BYTES_MIN..=MESSAGE_BYTES_MAX).contains(&w.message_bytes) {
        return bad(format!(
            "message_bytes must be {MESSAGE_BYTES_MIN}..={MESSAGE_BYTES_MAX} (8 bytes carry the timestamp), got {}",
            w.message_bytes
        ));
    }
    if w.in_flight_per_producer == 0 || w.in_flight_per_producer > IN_FLIGHT_MAX {
        return bad(format!("in_flight_per_producer must be 1..={IN_FLIGHT_MAX}, got {}", w.in_flight_per_producer));
    }
    if w.batch_size == 0 || w.batch_size > BATCH_SIZE_MAX {
        return bad(format!("batch_size must be 1..={BATCH_SIZE_MAX}, got {}", w.batch_size));
    }
    let pipeline_bytes = w.in_flight_per_producer * w.batch_size * w.message_bytes;
    if pipeline_bytes > PIPELINE_BYTES_MAX {
        return bad(format!("in-flight × batch × message bytes = {pipeline_bytes} exceeds {PIPELINE_BYTES_MAX}"));
    }
    if w.duration_secs == 0 || w.duration_secs.saturating_add(w.warmup_secs) > RUN_SECS_MAX {
        return bad(format!("duration must be ≥ 1 s and warm-up + duration ≤ {RUN_SECS_MAX} s"));
    }
    if let Some(rate) = w.target_rate_per_sec {
        if !(rate.is_finite() && rate > 0.0) {
            return bad(format!("target_rate_per_sec must be a positive number, got {rate}"));
        }
    }
    Ok(())
}

/// Entries kept per stream for this workload (see the module invariants).
fn stream_entries_max(w: &Workload) -> u64 {
    let per_stream_bytes = STREAMS_MEMORY_BYTES_MAX / w.topics.max(1) as u64;
    (per_stream_bytes / (w.message_bytes as u64 + ENTRY_OVERHEAD_BYTES)).clamp(STREAM_ENTRIES_MIN, STREAM_ENTRIES_MAX)
}

/// XREADGROUP COUNT for this workload.
fn read_count(w: &Workload) -> usize {
    (READ_REPLY_BYTES_TARGET / (w.message_bytes.max(1) * w.topics.max(1))).clamp(1, READ_COUNT_MAX)
}

// ---------------------------------------------------------------------------------------
// The server process.

/// The redis.conf of one run (paths are relative: the server runs in its directory).
fn config_text(port: u16, durability: Durability) -> String {
    let persistence: &[&str] = match durability {
        Durability::FsyncBeforeAck => &["appendonly yes", "appendfsync always"],
        Durability::WithinOneSecond => &["appendonly yes", "appendfsync everysec"],
        Durability::Memory => &["appendonly no"],
    };
    let mut text = String::from("# Written by ringmq-loadgen (loadgen/src/peers/redis.rs) for one benchmark run.\n");
    for line in [
        "bind 127.0.0.1".to_string(),
        format!("port {port}"),
        "protected-mode yes".to_string(),
        "daemonize no".to_string(),
        "dir ./".to_string(),
        "logfile redis.log".to_string(),
        "save \"\"".to_string(),
    ] {
        text.push_str(&line);
        text.push('\n');
    }
    for line in persistence {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// A private redis-server; stopped when dropped.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts redis-server on 127.0.0.1 and a free port, with its files in `dir`, and
    /// waits until it answers PING.
    pub fn start(dir: &Path, durability: Durability) -> Result<Self, PeerError> {
        Self::start_with("redis-server", dir, durability)
    }

    fn start_with(binary: &str, dir: &Path, durability: Durability) -> Result<Self, PeerError> {
        fs::create_dir_all(dir).map_err(|e| PeerError::io(format!("create {}", dir.display()), e))?;
        // Data of an earlier run in the same directory would be loaded (slowly) and then
        // flushed anyway.
        for old in ["appendonlydir", "appendonly.aof", "dump.rdb"] {
            let path = dir.join(old);
            let removed = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            match removed {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    return Err(PeerError::io(format!("remove {}", path.display()), e));
                }
                _ => {}
            }
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let conf = dir.join("redis.conf");
            fs::write(&conf, config_text(port, durability))
                .map_err(|e| PeerError::io(format!("write {}", conf.display()), e))?;
            for log in ["redis.log", "redis.stdout"] {
                let _ = fs::remove_file(dir.join(log));
            }
            let stdout = fs::File::create(dir.join("redis.stdout"))
                .map_err(|e| PeerError::io(format!("create {}", dir.join("redis.stdout").display()), e))?;
            let stderr = stdout.try_clone().map_err(|e| PeerError::io("clone redis.stdout handle", e))?;
            let child = match Command::new(binary)
                .arg("redis.conf")
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(stdout)
                .stderr(stderr)
                .spawn()
            {
                Ok(child) => child,
                Err(e) if e.kind() == ErrorKind::NotFound => return Err(PeerError::RedisMissing),
                Err(e) => return Err(PeerError::io(format!("start {binary}"), e)),
            };
            let mut server = RedisServer { child: Some(child), port, dir: dir.to_path_buf() };
            match server.wait_ready() {
                Ok(()) => return Ok(server),
                // Another process took the port between our probe and redis' bind.
                Err(PeerError::StartExited { log_tail, .. })
                    if attempt < START_ATTEMPTS_MAX && log_tail.contains("in use") => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn wait_ready(&mut self) -> Result<(), PeerError> {
        let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_SECS);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait().map_err(|e| PeerError::io("wait for redis-server", e))? {
                    self.child = None;
                    return Err(PeerError::StartExited { status: status.to_string(), log_tail: self.log_tail() });
                }
            }
            if let Ok(mut conn) = Conn::connect(self.port) {
                // LOADING, a refused or reset connection: not ready yet.
                if let Ok(true) = conn.call("PING", &[b"PING"], |v| v == Value::Simple(b"PONG")) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(PeerError::StartTimeout { secs: START_TIMEOUT_SECS, log_tail: self.log_tail() });
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The end of the server's log and console output, for error messages.
    fn log_tail(&self) -> String {
        let mut text = Vec::new();
        for log in ["redis.log", "redis.stdout"] {
            if let Ok(bytes) = fs::read(self.dir.join(log)) {
                text.extend_from_slice(&bytes);
            }
        }
        let from = text.len().saturating_sub(LOG_TAIL_BYTES_MAX);
        String::from_utf8_lossy(&text[from..]).trim().to_string()
    }

    /// SHUTDOWN NOSAVE, then kill if it has not exited within `SHUTDOWN_WAIT`.
    /// Idempotent.
    pub fn stop(&mut self) -> Result<(), PeerError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Ok(mut conn) = Conn::connect(self.port) {
            conn.queue(&[b"SHUTDOWN", b"NOSAVE"]);
            let _ = conn.flush();
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let killed = child.kill();
        let waited = child.wait();
        killed.map_err(|e| PeerError::io("kill redis-server", e))?;
        waited.map_err(|e| PeerError::io("wait for redis-server", e))?;
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn free_port() -> Result<u16, PeerError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| PeerError::io("find a free port", e))?;
    let port = listener.local_addr().map_err(|e| PeerError::io("find a free port", e))?.port();
    Ok(port)
}

// ---------------------------------------------------------------------------------------
// One RESP connection.

struct Conn {
    stream: TcpStream,
    /// Received bytes not yet decoded are `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    read_timeout: Duration,
}

impl Conn {
    fn connect(port: u16) -> Result<Self, PeerError> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|e| PeerError::io(format!("connect to redis at {addr}"), e))?;
        let setup = |r: std::io::Result<()>| r.map_err(|e| PeerError::io("set up redis socket", e));
        setup(stream.set_nodelay(true))?;
        setup(stream.set_read_timeout(Some(TICK)))?;
        setup(stream.set_write_timeout(Some(WRITE_TIMEOUT)))?;
        Ok(Conn {
            stream,
            buf: vec![0; READ_BUFFER_BYTES_INITIAL],
            start: 0,
            end: 0,
            out: Vec::new(),
            read_timeout: TICK,
        })
    }

    /// Sets how long the next socket read may block (at least 100 µs, at most `TICK`).
    fn set_read_timeout(&mut self, wait: Duration) -> Result<(), PeerError> {
        let wait = wait.clamp(Duration::from_micros(100), TICK);
        if wait != self.read_timeout {
            self.stream.set_read_timeout(Some(wait)).map_err(|e| PeerError::io("set redis read timeout", e))?;
            self.read_timeout = wait;
        }
        Ok(())
    }

    fn queue(&mut self, args: &[&[u8]]) {
        resp::encode_command(&mut self.out, args);
    }

    fn flush(&mut self) -> Result<(), PeerError> {
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).map_err(|e| PeerError::io("write to redis", e))?;
            self.out.clear();
        }
        Ok(())
    }

    /// Hands the next reply to `f`. Reads the socket (once, for at most the read
    /// timeout) only when no whole reply is buffered and `may_read`; `Ok(None)` when
    /// no reply is complete yet.
    fn next_reply<R>(
        &mut self,
        command: &'static str,
        may_read: bool,
        f: &mut impl FnMut(Value<'_>) -> R,
    ) -> Result<Option<R>, PeerError> {
        let mut read = false;
        loop {
            if let Some((value, used)) = resp::decode(&self.buf[self.start..self.end])? {
                let r = f(value);
                self.start += used;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return Ok(Some(r));
            }
            if read || !may_read {
                return Ok(None);
            }
            if self.buf.len() - self.end < READ_CHUNK_BYTES_MIN && self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < READ_CHUNK_BYTES_MIN {
                if self.buf.len() >= READ_BUFFER_BYTES_MAX {
                    return Err(PeerError::ReplyTooLarge { command, max: READ_BUFFER_BYTES_MAX });
                }
                let grown = (self.buf.len() * 2).min(READ_BUFFER_BYTES_MAX);
                self.buf.resize(grown, 0);
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(PeerError::Closed),
                Ok(n) => {
                    self.end += n;
                    read = true;
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(PeerError::io(format!("read {command} reply from redis"), e)),
            }
        }
    }

    /// Sends one command and waits up to `ADMIN_REPLY_TIMEOUT` for its reply.
    fn call<R>(
        &mut self,
        command: &'static str,
        args: &[&[u8]],
        mut f: impl FnMut(Value<'_>) -> R,
    ) -> Result<R, PeerError> {
        self.queue(args);
        self.flush()?;
        let deadline = Instant::now() + ADMIN_REPLY_TIMEOUT;
        loop {
            if let Some(r) = self.next_reply(command, true, &mut f)? {
                return Ok(r);
            }
            if Instant::now() >= deadline {
                return Err(PeerError::Unexpected { command, reply: "no reply in time".to_string() });
            }
        }
    }

    /// Sends a command whose reply must be `+OK`.
    fn call_ok(&mut self, command: &'static str, args: &[&[u8]]) -> Result<(), PeerError> {
        self.call(command, args, |v| match v {
            Value::Simple(b"OK") => Ok(()),
            Value::Error(e) => Err(PeerError::Server { command, message: lossy(e) }),
            other => Err(PeerError::Unexpected { command, reply: other.describe() }),
        })?
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(ERROR_TEXT_CHARS_MAX).collect()
}

// ---------------------------------------------------------------------------------------
// Per-thread interval reports.

/// One thread's figures for one interval (index `n_intervals` is the drain).
struct Part {
    idx: usize,
    sent: u64,
    sent_bytes: u64,
    send_failed: u64,
    received: u64,
    send_latency_us: Histogram<u64>,
    e2e_latency_us: Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

impl Part {
    fn new(idx: usize) -> Self {
        Part {
            idx,
            sent: 0,
            sent_bytes: 0,
            send_failed: 0,
            received: 0,
            send_latency_us: new_latency_histogram(),
            e2e_latency_us: new_latency_histogram(),
            errors: BTreeMap::new(),
        }
    }

    fn error(&mut self, text: String, count: u64) {
        add_error(&mut self.errors, text, count);
    }
}

fn add_error(errors: &mut BTreeMap<String, u64>, text: String, count: u64) {
    if errors.len() < ERROR_KINDS_MAX || errors.contains_key(&text) {
        *errors.entry(text).or_insert(0) += count;
    } else {
        *errors.entry("other errors".to_string()).or_insert(0) += count;
    }
}

enum Msg {
    Part(Part),
    Failed { thread: String, error: PeerError },
}

struct Reporter {
    tx: mpsc::Sender<Msg>,
    start: Instant,
    /// Index of the drain part (= number of intervals).
    drain_idx: usize,
    part: Part,
}

impl Reporter {
    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Sends the parts of every interval that has ended.
    fn tick(&mut self) {
        let idx = (self.start.elapsed().as_secs() / REPORT_INTERVAL_SECS) as usize;
        self.roll_to(idx.min(self.drain_idx));
    }

    fn roll_to(&mut self, idx: usize) {
        while self.part.idx < idx {
            let next = Part::new(self.part.idx + 1);
            let done = std::mem::replace(&mut self.part, next);
            // The receiver is gone only when the run is over anyway.
            let _ = self.tx.send(Msg::Part(done));
        }
    }

    fn finish(mut self) {
        self.roll_to(self.drain_idx);
        let _ = self.tx.send(Msg::Part(self.part));
    }
}

/// What every worker thread shares.
#[derive(Clone)]
struct Shared {
    start: Instant,
    /// End of the measured time (warm-up included), since `start`.
    end: Duration,
    /// Set when another thread failed: stop now.
    abort: Arc<AtomicBool>,
    /// Set when consumers may stop (drained, or drain time over).
    consumers_stop: Arc<AtomicBool>,
    /// Messages acknowledged by XADD, all producers, whole run.
    acked_total: Arc<AtomicU64>,
    /// Messages received, all consumers, whole run.
    received_total: Arc<AtomicU64>,
    keys: Arc<Vec<Vec<u8>>>,
}

// ---------------------------------------------------------------------------------------
// Producers.

struct ProducerSpec {
    id: usize,
    message_bytes: usize,
    in_flight: usize,
    batch: usize,
    /// Scheduled gap between sends in µs (open loop), None for closed loop.
    send_gap_us: Option<f64>,
    maxlen: Vec<u8>,
}

struct Pending {
    /// Scheduled (open loop) or actual (closed loop) send time, µs since start.
    intended_us: u64,
    replies_left: usize,
    failed: usize,
}

fn run_producer(spec: ProducerSpec, shared: Shared, mut conn: Conn, reporter: &mut Reporter) -> Result<(), PeerError> {
    let mut payload = vec![b'r'; spec.message_bytes];
    let mut pending: VecDeque<Pending> = VecDeque::with_capacity(spec.in_flight);
    let mut topic = spec.id % shared.keys.len();
    let end_us = shared.end.as_micros() as u64;
    let ack_deadline = shared.end + Duration::from_secs(ACK_WAIT_SECS_MAX);
    let mut next_send_us = 0.0f64;
    let mut reply_of = |v: Value<'_>| match v {
        Value::Bulk(_) => Ok(()),
        Value::Error(e) => Err(format!("XADD error: {}", lossy(e))),
        other => Err(format!("XADD unexpected reply: {}", other.describe())),
    };
    loop {
        reporter.tick();
        if shared.abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        let now = shared.start.elapsed();
        let now_us = now.as_micros() as u64;
        let sending = now < shared.end;
        if !sending && pending.is_empty() {
            return Ok(());
        }
        if !sending && now > ack_deadline {
            let lost: usize = pending.iter().map(|p| p.replies_left).sum();
            reporter.part.send_failed += lost as u64;
            reporter.part.error(format!("no XADD reply within {ACK_WAIT_SECS_MAX} s after the run"), lost as u64);
            return Ok(());
        }
        if sending {
            while pending.len() < spec.in_flight {
                let intended_us = match spec.send_gap_us {
                    None => now_us,
                    Some(gap) => {
                        if next_send_us > now_us as f64 || next_send_us >= end_us as f64 {
                            break;
                        }
                        let at = next_send_us as u64;
                        next_send_us += gap;
                        at
                    }
                };
                payload[..8].copy_from_slice(&intended_us.to_le_bytes());
                for _ in 0..spec.batch {
                    conn.queue(&[b"XADD", &shared.keys[topic], b"MAXLEN", b"~", &spec.maxlen, b"*", FIELD, &payload]);
                    topic = (topic + 1) % shared.keys.len();
                }
                pending.push_back(Pending { intended_us, replies_left: spec.batch, failed: 0 });
            }
            conn.flush()?;
        }
        let wait = match spec.send_gap_us {
            Some(_) if sending && pending.len() < spec.in_flight => {
                Duration::from_micros((next_send_us - now_us as f64).max(0.0) as u64)
            }
            _ => TICK,
        };
        conn.set_read_timeout(wait)?;
        // One (possibly blocking) read, then every reply already buffered.
        let mut may_read = true;
        while let Some(reply) = conn.next_reply("XADD", may_read, &mut reply_of)? {
            may_read = false;
            let Some(front) = pending.front_mut() else {
                return Err(PeerError::Unexpected {
                    command: "XADD",
                    reply: "a reply with no command outstanding".into(),
                });
            };
            front.replies_left -= 1;
            if let Err(text) = reply {
                front.failed += 1;
                reporter.part.error(text, 1);
            }
            if front.replies_left == 0 {
                let done = pending.pop_front().expect("front exists");
                reporter.tick();
                let ok = (spec.batch - done.failed) as u64;
                let part = &mut reporter.part;
                part.sent += ok;
                part.sent_bytes += ok * spec.message_bytes as u64;
                part.send_failed += done.failed as u64;
                let latency_us = reporter.now_us().saturating_sub(done.intended_us);
                record_us(&mut reporter.part.send_latency_us, latency_us);
                shared.acked_total.fetch_add(ok, Ordering::Relaxed);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Consumers.

fn run_consumer(
    id: usize,
    count: usize,
    shared: Shared,
    mut conn: Conn,
    reporter: &mut Reporter,
) -> Result<(), PeerError> {
    let consumer = format!("c{id}").into_bytes();
    let count = count.to_string().into_bytes();
    let block = READ_BLOCK_MS.to_string().into_bytes();
    let mut args: Vec<&[u8]> = vec![b"XREADGROUP", b"GROUP", GROUP, &consumer, b"COUNT", &count, b"BLOCK", &block];
    args.extend_from_slice(&[b"NOACK", b"STREAMS"]);
    args.extend(shared.keys.iter().map(|k| k.as_slice()));
    args.extend(shared.keys.iter().map(|_| b">".as_slice()));
    loop {
        if shared.consumers_stop.load(Ordering::Relaxed) || shared.abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        conn.queue(&args);
        conn.flush()?;
        loop {
            reporter.tick();
            let start = shared.start;
            let part = &mut reporter.part;
            let reply = conn.next_reply("XREADGROUP", true, &mut |v| {
                let now_us = start.elapsed().as_micros() as u64;
                take_entries(v, now_us, part)
            })?;
            match reply {
                Some(received) => {
                    shared.received_total.fetch_add(received?, Ordering::Relaxed);
                    break;
                }
                None if shared.consumers_stop.load(Ordering::Relaxed) || shared.abort.load(Ordering::Relaxed) => {
                    return Ok(());
                }
                None => {}
            }
        }
    }
}

/// Counts the entries of an XREADGROUP reply into `part` (received, end-to-end latency
/// from the payload's timestamp, malformed entries as errors); returns the number
/// received.
fn take_entries(reply: Value<'_>, now_us: u64, part: &mut Part) -> Result<u64, PeerError> {
    const COMMAND: &str = "XREADGROUP";
    let streams = match reply {
        Value::NilArray => return Ok(0),
        Value::Array(streams) => streams,
        Value::Error(e) => return Err(PeerError::Server { command: COMMAND, message: lossy(e) }),
        other => return Err(PeerError::Unexpected { command: COMMAND, reply: other.describe() }),
    };
    let mut received = 0;
    for stream in streams {
        let entries = match stream {
            Value::Array(mut pair) if pair.len() == 2 => match pair.pop() {
                Some(Value::Array(entries)) => entries,
                _ => return Err(PeerError::Unexpected { command: COMMAND, reply: "stream without entries".into() }),
            },
            other => return Err(PeerError::Unexpected { command: COMMAND, reply: other.describe() }),
        };
        for entry in entries {
            let payload = match &entry {
                Value::Array(id_fields) => match id_fields.as_slice() {
                    [Value::Bulk(_), Value::Array(fields)] => fields
                        .chunks(2)
                        .find_map(|kv| match kv {
                            [Value::Bulk(k), Value::Bulk(v)] if *k == FIELD => Some(*v),
                            _ => None,
                        })
                        .filter(|p| p.len() >= 8),
                    [Value::Bulk(_), Value::NilArray | Value::NilBulk] => {
                        part.error("entry deleted (trimmed) before it was read".into(), 1);
                        continue;
                    }
                    _ => None,
                },
                _ => None,
            };
            match payload {
                Some(p) => {
                    let mut ts = [0u8; 8];
                    ts.copy_from_slice(&p[..8]);
                    record_us(&mut part.e2e_latency_us, now_us.saturating_sub(u64::from_le_bytes(ts)));
                    part.received += 1;
                    received += 1;
                }
                None => part.error(format!("malformed stream entry: {}", entry.describe()), 1),
            }
        }
    }
    Ok(received)
}

// ---------------------------------------------------------------------------------------
// The run.

fn drive(
    workload: &Workload,
    durability: Durability,
    port: u16,
    progress: &dyn Fn(&IntervalStats),
) -> Result<RunRecord, PeerError> {
    let keys: Vec<Vec<u8>> = (0..workload.topics).map(|t| format!("stream-{t}").into_bytes()).collect();
    let mut admin = Conn::connect(port)?;
    admin.call_ok("FLUSHALL", &[b"FLUSHALL", b"SYNC"])?;
    for key in &keys {
        admin.call_ok("XGROUP CREATE", &[b"XGROUP", b"CREATE", key, GROUP, b"0", b"MKSTREAM"])?;
    }
    drop(admin);
    let producer_conns = (0..workload.producers).map(|_| Conn::connect(port)).collect::<Result<Vec<_>, _>>()?;
    let consumer_conns = (0..workload.consumers).map(|_| Conn::connect(port)).collect::<Result<Vec<_>, _>>()?;

    let n_intervals = ((workload.warmup_secs + workload.duration_secs) / REPORT_INTERVAL_SECS) as usize;
    let maxlen = stream_entries_max(workload).to_string().into_bytes();
    let send_gap_us =
        workload.target_rate_per_sec.map(|rate| 1e6 * workload.batch_size as f64 * workload.producers as f64 / rate);
    let (tx, rx) = mpsc::channel::<Msg>();
    let shared = Shared {
        start: Instant::now(),
        end: Duration::from_secs(n_intervals as u64 * REPORT_INTERVAL_SECS),
        abort: Arc::new(AtomicBool::new(false)),
        consumers_stop: Arc::new(AtomicBool::new(false)),
        acked_total: Arc::new(AtomicU64::new(0)),
        received_total: Arc::new(AtomicU64::new(0)),
        keys: Arc::new(keys),
    };
    let reporter = |tx: &mpsc::Sender<Msg>| Reporter {
        tx: tx.clone(),
        start: shared.start,
        drain_idx: n_intervals,
        part: Part::new(0),
    };

    let mut producers: Vec<JoinHandle<()>> = Vec::new();
    let mut consumers: Vec<JoinHandle<()>> = Vec::new();
    let mut spawn_error = None;
    for (id, conn) in consumer_conns.into_iter().enumerate() {
        let (shared, mut reporter, count) = (shared.clone(), reporter(&tx), read_count(workload));
        let name = format!("redis-consumer-{id}");
        let spawned = thread::Builder::new().name(name.clone()).spawn(move || {
            match run_consumer(id, count, shared, conn, &mut reporter) {
                Ok(()) => reporter.finish(),
                Err(error) => {
                    let _ = reporter.tx.send(Msg::Failed { thread: name, error });
                }
            }
        });
        match spawned {
            Ok(handle) => consumers.push(handle),
            Err(e) => spawn_error = Some(PeerError::io("spawn a consumer thread", e)),
        }
    }
    for (id, conn) in producer_conns.into_iter().enumerate() {
        if spawn_error.is_some() {
            break;
        }
        let spec = ProducerSpec {
            id,
            message_bytes: workload.message_bytes,
            in_flight: workload.in_flight_per_producer,
            batch: workload.batch_size,
            send_gap_us,
            maxlen: maxlen.clone(),
        };
        let (shared, mut reporter) = (shared.clone(), reporter(&tx));
        let name = format!("redis-producer-{id}");
        let spawned = thread::Builder::new().name(name.clone()).spawn(move || {
            match run_producer(spec, shared, conn, &mut reporter) {
                Ok(()) => reporter.finish(),
                Err(error) => {
                    let _ = reporter.tx.send(Msg::Failed { thread: name, error });
                }
            }
        });
        match spawned {
            Ok(handle) => producers.push(handle),
            Err(e) => spawn_error = Some(PeerError::io("spawn a producer thread", e)),
        }
    }
    drop(tx);
    let threads = producers.len() + consumers.len();
    if spawn_error.is_some() {
        shared.abort.store(true, Ordering::Relaxed);
    }

    let mut record = RunRecord::new(SYSTEM, config_label(durability), durability, workload.clone());
    let mut merged: Vec<(usize, IntervalStats)> = (0..=n_intervals)
        .map(|idx| {
            let warmup = (idx as u64) < workload.warmup_secs / REPORT_INTERVAL_SECS;
            let elapsed = ((idx as u64 + 1) * REPORT_INTERVAL_SECS) as f64;
            (0, IntervalStats::new(elapsed, REPORT_INTERVAL_SECS as f64, warmup))
        })
        .collect();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut next_emit = 0;
    let (mut sent_so_far, mut received_so_far) = (0u64, 0u64);
    let mut failure = spawn_error;
    let mut drain_deadline: Option<Instant> = None;
    loop {
        match rx.recv_timeout(TICK) {
            Ok(Msg::Part(part)) => {
                let (reported, stats) = &mut merged[part.idx];
                *reported += 1;
                stats.sent += part.sent;
                stats.sent_bytes += part.sent_bytes;
                stats.send_failed += part.send_failed;
                stats.received += part.received;
                // Same bounds on both sides: adding cannot fail.
                let _ = stats.send_latency_us.add(&part.send_latency_us);
                let _ = stats.e2e_latency_us.add(&part.e2e_latency_us);
                for (text, count) in part.errors {
                    add_error(&mut errors, text, count);
                }
                while next_emit < n_intervals && merged[next_emit].0 == threads {
                    let mut stats = std::mem::replace(&mut merged[next_emit].1, IntervalStats::new(0.0, 0.0, true));
                    sent_so_far += stats.sent;
                    received_so_far += stats.received;
                    stats.backlog = Some(sent_so_far as i64 - received_so_far as i64);
                    progress(&stats);
                    record.push_interval(stats);
                    next_emit += 1;
                }
            }
            Ok(Msg::Failed { thread, error }) => {
                if failure.is_none() {
                    failure = Some(PeerError::Worker { thread, message: error.to_string() });
                }
                shared.abort.store(true, Ordering::Relaxed);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if drain_deadline.is_none() && producers.iter().all(|h| h.is_finished()) {
            drain_deadline = Some(Instant::now() + Duration::from_secs(DRAIN_SECS_MAX));
        }
        if let Some(deadline) = drain_deadline {
            let drained = shared.received_total.load(Ordering::Relaxed) >= shared.acked_total.load(Ordering::Relaxed);
            if drained || Instant::now() >= deadline {
                shared.consumers_stop.store(true, Ordering::Relaxed);
            }
        }
    }
    for handle in producers.into_iter().chain(consumers) {
        let name = handle.thread().name().unwrap_or("redis worker").to_string();
        if handle.join().is_err() && failure.is_none() {
            failure = Some(PeerError::Worker { thread: name, message: "panicked".into() });
        }
    }
    if let Some(failure) = failure {
        return Err(failure);
    }
    if next_emit < n_intervals {
        return Err(PeerError::Worker {
            thread: "redis run".into(),
            message: format!("only {next_emit} of {n_intervals} intervals were reported"),
        });
    }
    // The drain: replies and receipts after the last interval.
    let drain = &merged[n_intervals].1;
    record.sent += drain.sent;
    record.sent_bytes += drain.sent_bytes;
    record.send_failed += drain.send_failed;
    record.received += drain.received;
    let _ = record.send_latency_us.add(&drain.send_latency_us);
    let _ = record.e2e_latency_us.add(&drain.e2e_latency_us);
    if workload.consumers > 0 {
        let acked = shared.acked_total.load(Ordering::Relaxed);
        let received = shared.received_total.load(Ordering::Relaxed);
        if acked > received {
            add_error(
                &mut errors,
                format!("acknowledged but not received within {DRAIN_SECS_MAX} s after the run (or trimmed)"),
                acked - received,
            );
        }
    }
    record.errors = errors.into_iter().collect();
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expected` lines must all appear in the config for `durability`; `absent` none.
    fn check(durability: Durability, expected: &[&str], absent: &[&str]) {
        let text = config_text(6390, durability);
        for line in expected {
            assert!(text.lines().any(|l| l == *line), "{durability:?}: missing {line:?} in\n{text}");
        }
        for line in absent {
            assert!(!text.lines().any(|l| l == *line), "{durability:?}: unexpected {line:?} in\n{text}");
        }
    }

    #[test]
    fn config_matches_durability() {
        let common = ["bind 127.0.0.1", "port 6390", "save \"\"", "dir ./"];
        check(Durability::FsyncBeforeAck, &[&common[..], &["appendonly yes", "appendfsync always"]].concat(), &[]);
        check(
            Durability::WithinOneSecond,
            &[&common[..], &["appendonly yes", "appendfsync everysec"]].concat(),
            &["appendfsync always"],
        );
        check(Durability::Memory, &[&common[..], &["appendonly no"]].concat(), &["appendonly yes"]);
    }

    fn tiny() -> Workload {
        Workload {
            name: "redis-tiny".into(),
            message_bytes: 100,
            topics: 1,
            queues_per_topic: 1,
            producers: 1,
            consumers: 1,
            in_flight_per_producer: 8,
            batch_size: 1,
            send_mode: "async".into(),
            target_rate_per_sec: None,
            duration_secs: 2,
            warmup_secs: 0,
        }
    }

    #[test]
    fn refuses_workloads_out_of_bounds() {
        let cases: Vec<(Workload, bool)> = vec![
            (tiny(), true),
            (Workload { producers: 0, ..tiny() }, false),
            (Workload { topics: 0, ..tiny() }, false),
            (Workload { message_bytes: 7, ..tiny() }, false),
            (Workload { message_bytes: MESSAGE_BYTES_MAX + 1, ..tiny() }, false),
            (Workload { in_flight_per_producer: 0, ..tiny() }, false),
            (Workload { batch_size: BATCH_SIZE_MAX + 1, ..tiny() }, false),
            (Workload { message_bytes: 1 << 20, in_flight_per_producer: 512, ..tiny() }, false),
            (Workload { duration_secs: 0, ..tiny() }, false),
            (Workload { target_rate_per_sec: Some(0.0), ..tiny() }, false),
            (Workload { target_rate_per_sec: Some(f64::NAN), ..tiny() }, false),
            (Workload { consumers: 0, target_rate_per_sec: Some(10.0), ..tiny() }, true),
        ];
        for (w, ok) in cases {
            assert_eq!(validate(&w).is_ok(), ok, "{w:?}: {:?}", validate(&w));
        }
        assert_eq!(stream_entries_max(&tiny()), STREAM_ENTRIES_MAX);
        assert_eq!(stream_entries_max(&Workload { message_bytes: MESSAGE_BYTES_MAX, ..tiny() }), 511);
        assert_eq!(read_count(&Workload { message_bytes: 1024, ..tiny() }), READ_COUNT_MAX);
        assert_eq!(read_count(&Workload { message_bytes: 1 << 20, ..tiny() }), 4);
    }

    #[test]
    fn takes_stream_entries_and_counts_bad_ones() {
        let ts = 1_000u64.to_le_bytes();
        let good = [&ts[..], b"rest"].concat();
        let entry = |payload: &'static [u8]| {
            Value::Array(vec![Value::Bulk(b"1-0"), Value::Array(vec![Value::Bulk(b"b"), Value::Bulk(payload)])])
        };
        let good: &'static [u8] = Box::leak(good.into_boxed_slice());
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Bulk(b"stream-0"),
            Value::Array(vec![
                entry(good),
                entry(b"short"),
                Value::Array(vec![Value::Bulk(b"2-0"), Value::NilArray]),
                Value::Integer(3),
            ]),
        ])]);
        let mut part = Part::new(0);
        assert_eq!(take_entries(reply, 1_250, &mut part).ok(), Some(1));
        assert_eq!(part.received, 1);
        assert_eq!(part.e2e_latency_us.len(), 1);
        assert_eq!(part.e2e_latency_us.max(), 250);
        assert_eq!(part.errors.values().sum::<u64>(), 3, "{:?}", part.errors);
        assert_eq!(take_entries(Value::NilArray, 0, &mut part).ok(), Some(0));
        assert!(matches!(take_entries(Value::Error(b"NOGROUP x"), 0, &mut part), Err(PeerError::Server { .. })));
        assert!(matches!(take_entries(Value::Integer(1), 0, &mut part), Err(PeerError::Unexpected { .. })));
    }

    fn redis_available() -> bool {
        Command::new("redis-server").arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
    }

    #[test]
    fn missing_binary_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = RedisServer::start_with("ringmq-no-such-redis-server", dir.path(), Durability::Memory).err();
        assert!(matches!(err, Some(PeerError::RedisMissing)), "{err:?}");
        assert!(PeerError::RedisMissing.to_string().contains("scripts/install-redis.sh"));
    }

    fn run(workload: &Workload, durability: Durability) -> RunRecord {
        let dir = tempfile::tempdir().expect("tempdir");
        let intervals = std::cell::Cell::new(0);
        let record = run_redis(workload, durability, dir.path(), &|_| intervals.set(intervals.get() + 1))
            .unwrap_or_else(|e| panic!("{durability:?}: {e}"));
        assert_eq!(intervals.get(), workload.warmup_secs + workload.duration_secs);
        record
    }

    #[test]
    fn tiny_workload_each_durability() {
        if !redis_available() {
            eprintln!("skipped: redis-server is not on PATH (run scripts/install-redis.sh)");
            return;
        }
        for durability in [Durability::FsyncBeforeAck, Durability::WithinOneSecond, Durability::Memory] {
            let r = run(&tiny(), durability);
            assert!(r.sent > 0, "{durability:?}: nothing sent");
            assert_eq!(r.received, r.sent, "{durability:?}: errors {:?}", r.errors);
            assert_eq!(r.send_failed, 0);
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            assert!(!r.e2e_latency_us.is_empty());
            assert_eq!(r.send_latency_us.len(), r.sent, "one send per message at batch size 1");
            // The label, then the server's CPU over the measured window.
            assert!(r.config.starts_with(config_label(durability)) && r.config.contains("redis-server CPU-µs/msg"), "{}", r.config);
            assert_eq!(r.intervals.len(), 2);
            assert_eq!(r.sent_bytes, r.sent * 100);
        }
    }

    #[test]
    fn open_loop_batches_keep_the_target_rate() {
        if !redis_available() {
            eprintln!("skipped: redis-server is not on PATH (run scripts/install-redis.sh)");
            return;
        }
        let w = Workload { batch_size: 4, target_rate_per_sec: Some(2000.0), topics: 2, warmup_secs: 1, ..tiny() };
        let r = run(&w, Durability::Memory);
        let in_intervals: u64 = r.intervals.iter().map(|i| i.sent).sum();
        let measured_in_intervals: u64 = r.intervals.iter().filter(|i| !i.warmup).map(|i| i.sent).sum();
        let all_sent = in_intervals + (r.sent - measured_in_intervals);
        // 3 s at 2000/s; every send is a batch of 4.
        assert!((5400..=6000).contains(&all_sent), "sent {all_sent}");
        assert_eq!(r.send_latency_us.len() * 4, r.sent);
        assert!(r.intervals[0].warmup && !r.intervals[1].warmup);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }

    /// A sanity figure for the lead: `cargo test -p ringmq-loadgen sample_10s -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn sample_10s_run() {
        let w = Workload {
            name: "redis-sample".into(),
            message_bytes: 1024,
            in_flight_per_producer: 32,
            duration_secs: 10,
            warmup_secs: 2,
            ..tiny()
        };
        for durability in [Durability::FsyncBeforeAck, Durability::WithinOneSecond, Durability::Memory] {
            let r = run(&w, durability);
            let q = |h: &Histogram<u64>, p: f64| h.value_at_quantile(p);
            println!(
                "{:<22} {:>9.0} msg/s {:>7.1} MiB/s  send p50 {:>6} µs p99 {:>6} µs  e2e p50 {:>6} µs p99 {:>6} µs  received {}/{} errors {:?}",
                r.config,
                r.send_rate_per_sec(),
                r.send_mib_per_sec(),
                q(&r.send_latency_us, 0.5),
                q(&r.send_latency_us, 0.99),
                q(&r.e2e_latency_us, 0.5),
                q(&r.e2e_latency_us, 0.99),
                r.received,
                r.sent,
                r.errors
            );
        }
    }
}
