//! Helpers shared by the broker's real-process tests (each test file is its own binary
//! and `mod common;`s this): a broker in this process (`Broker`) or as a child process
//! (`ChildBroker`, for SIGKILL and for process-wide probes), a raw remoting connection
//! over a blocking `TcpStream` (`Conn`), request builders, and fd/RSS measurement.
//!
//! Invariants: no fixed ports — an in-process broker binds port 0 and reports it, a
//! child broker is started with `listen_port = 0` and its port is read back from its
//! "broker started" log line; every wait has a deadline, so a broken broker fails a
//! test instead of hanging it; a child broker is SIGKILLed when its handle drops (and
//! its last log lines are printed if the test is failing).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use bytes::BytesMut;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::{FrameLimits, SerializeType, FRAME_LEN_MAX_BYTES};
use ringmq_client::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeaderV2};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const MIB: usize = 1024 * 1024;
/// Longest a single request may take before a helper gives up on it.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a child broker may take to start listening (recovery included).
pub const CHILD_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a child broker may take to stop on SIGTERM.
pub const CHILD_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// `defaultTopicQueueNums` in send headers; the tests' topics are created explicitly.
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// `probe` spreads over this many queues: its topic must have at least these.
pub const PROBE_QUEUES: i32 = 4;

// ---------------------------------------------------------------- broker in this process

pub struct Broker {
    handle: Option<BrokerHandle>,
    pub addr: SocketAddr,
    _root: tempfile::TempDir,
}

/// The bad-input tests' store: sync flush, 8 MiB segments and group-commit window.
pub fn sync_small_segments(config: &mut BrokerConfig) {
    config.store.flush_mode = FlushMode::Sync;
    config.store.segment_bytes = 8 * MIB as u64;
    config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
    config.store.dirty_bytes_max = 8 * MIB as u64;
}

/// Disk watermarks a shared CI host's fill level never reaches (tests of the watermarks
/// set their own): the default 0.90 refuse ratio would fail any test on a host whose
/// disk is 90% full for reasons of its own.
pub const HOST_INDEPENDENT_WATERMARKS_TOML: &str = "disk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n";

pub fn host_independent_disk_watermarks(store: &mut ringmq_broker::store::config::StoreConfig) {
    store.disk_max_used_ratio = 0.999;
    store.disk_force_clean_ratio = 0.999;
    store.disk_refuse_ratio = 0.9999;
}

impl Broker {
    /// A 2-shard broker on port 0 in a fresh store under the test's target tmp dir,
    /// configured further by `configure`, with `topics` (name, queues) created.
    pub fn start(configure: impl FnOnce(&mut BrokerConfig), topics: &[(&str, i32)]) -> Self {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("store dir");
        let mut config = BrokerConfig {
            store_root: root.path().to_path_buf(),
            listen_port: 0,
            shard_count: 2,
            broker_ip: Some("127.0.0.1".into()),
            ..BrokerConfig::default()
        };
        host_independent_disk_watermarks(&mut config.store);
        configure(&mut config);
        let handle = launch::start(config).expect("broker starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], handle.addr.port()));
        let broker = Self { handle: Some(handle), addr, _root: root };
        for &(topic, queues) in topics {
            let r = Conn::open(addr).call(create_topic(topic, queues));
            assert_eq!(r.code, rs::SUCCESS, "create {topic}: {:?}", r.remark);
        }
        broker
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.stop();
            h.join();
        }
    }
}

// ---------------------------------------------------------------- raw connection

/// What reading from the broker gave.
#[derive(Debug)]
pub enum Got {
    Cmd(RemotingCommand),
    /// EOF or reset: the broker closed the connection.
    Closed,
    Timeout,
}

pub struct Conn {
    pub s: TcpStream,
    pub buf: BytesMut,
}

/// Responses can carry pulled records: accept any frame the protocol allows.
pub const RESPONSE_LIMITS: FrameLimits = FrameLimits { frame_len_max_bytes: FRAME_LEN_MAX_BYTES, body_len_max_bytes: FRAME_LEN_MAX_BYTES };

impl Conn {
    pub fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        Self { s, buf: BytesMut::new() }
    }

    /// Writes `bytes` in pieces of `chunk` bytes (0: one write). A write refused because
    /// the broker already closed is not an error here: reading will tell.
    pub fn write(&mut self, bytes: &[u8], chunk: usize) {
        let chunk = if chunk == 0 { bytes.len().max(1) } else { chunk };
        for piece in bytes.chunks(chunk) {
            if let Err(e) = self.s.write_all(piece) {
                assert!(matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted), "write failed: {e}");
                return;
            }
        }
    }

    /// The next frame from the broker, or what stopped it, by `deadline`.
    pub fn read(&mut self, deadline: Instant) -> Got {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match RemotingCommand::decode(&mut self.buf, &RESPONSE_LIMITS) {
                // The broker's own oneway push to consumers of a group whose membership
                // changed (a heartbeat joined this connection).
                Ok(Some(cmd)) if !cmd.is_response() && cmd.code == rq::NOTIFY_CONSUMER_IDS_CHANGED => continue,
                Ok(Some(cmd)) => return Got::Cmd(cmd),
                Ok(None) => {}
                Err(e) => panic!("the broker sent a frame we cannot decode: {e}"),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Got::Timeout;
            }
            self.s.set_read_timeout(Some(left)).expect("read timeout");
            match self.s.read(&mut chunk) {
                Ok(0) => return Got::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Got::Timeout,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Got::Closed,
            }
        }
    }

    /// Reads until the broker closes, ignoring whatever responses come first.
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(deadline) {
                Got::Cmd(_) => {}
                Got::Closed => return true,
                Got::Timeout => return false,
            }
        }
    }

    /// The response to `cmd` (matched by opaque), or `None` by `deadline`; other
    /// frames are skipped.
    pub fn call_by(&mut self, cmd: &RemotingCommand, deadline: Instant) -> Option<RemotingCommand> {
        let opaque = cmd.opaque;
        self.write(&encode(cmd), 0);
        loop {
            match self.read(deadline) {
                Got::Cmd(r) if r.is_response() && r.opaque == opaque => return Some(r),
                Got::Cmd(_) => {}
                Got::Closed | Got::Timeout => return None,
            }
        }
    }

    pub fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let opaque = cmd.opaque;
        let deadline = Instant::now() + CALL_TIMEOUT;
        self.call_by(&cmd, deadline).unwrap_or_else(|| panic!("no response to code {} (opaque {opaque}) within {CALL_TIMEOUT:?}", cmd.code))
    }
}

pub fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("encodable");
    out.to_vec()
}

// ---------------------------------------------------------------- requests

pub fn create_topic(topic: &str, queues: i32) -> RemotingCommand {
    RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_opaque(1)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", queues.to_string())
        .with_ext("writeQueueNums", queues.to_string())
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG")
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with RocketMQ's `SubscriptionGroupConfig` JSON.
pub fn create_group(group: &str) -> RemotingCommand {
    RemotingCommand::request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(format!(r#"{{"groupName":"{group}"}}"#).into_bytes())
}

pub fn send_header(topic: &str, queue_id: i32) -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        a: "PG".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: DEFAULT_TOPIC_QUEUE_NUMS,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("TAGS\u{1}bad\u{2}KEYS\u{1}k\u{2}".into()),
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: None,
    }
}

pub fn send(topic: &str, queue_id: i32, body: &[u8], opaque: i32, st: SerializeType) -> RemotingCommand {
    send_with(send_header(topic, queue_id), body, opaque, st)
}

pub fn send_with(header: SendMessageRequestHeaderV2, body: &[u8], opaque: i32, st: SerializeType) -> RemotingCommand {
    RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(body.to_vec()).with_opaque(opaque).with_serialize_type(st)
}

pub fn pull_header(topic: &str, queue_id: i32, offset: i64) -> PullMessageRequestHeader {
    PullMessageRequestHeader {
        consumer_group: "CG".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 1,
        sys_flag: 0,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: None,
        sub_version: 0,
        expression_type: None,
        max_msg_bytes: None,
    }
}

pub fn pull(topic: &str, queue_id: i32, offset: i64, opaque: i32, st: SerializeType) -> RemotingCommand {
    pull_with(&pull_header(topic, queue_id, offset), opaque, st)
}

pub fn pull_with(header: &PullMessageRequestHeader, opaque: i32, st: SerializeType) -> RemotingCommand {
    RemotingCommand::request(rq::PULL_MESSAGE).with_header(header).with_opaque(opaque).with_serialize_type(st)
}

pub fn get_max_offset(topic: &str, opaque: i32) -> RemotingCommand {
    RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", topic).with_ext("queueId", "0").with_opaque(opaque)
}

/// The liveness check: a fresh connection sends a message to `topic` (at least
/// `PROBE_QUEUES` queues) and pulls exactly that message back.
pub fn probe(addr: SocketAddr, topic: &str, n: u64) {
    let st = if n & 1 == 0 { SerializeType::Json } else { SerializeType::RocketMq };
    let queue_id = (n % PROBE_QUEUES as u64) as i32;
    let body = format!("probe {n}").into_bytes();
    let mut c = Conn::open(addr);
    let r = c.call(send(topic, queue_id, &body, 7, st));
    assert_eq!(r.code, rs::SUCCESS, "probe {n}: send: {:?}", r.remark);
    let offset: i64 = r.ext("queueOffset").and_then(|o| o.parse().ok()).expect("queueOffset in the send response");
    let r = c.call(pull(topic, queue_id, offset, 8, st));
    assert_eq!(r.code, rs::SUCCESS, "probe {n}: pull: {:?}", r.remark);
    let record = StoredMessageView::parse_verified(&r.body).expect("a stored record");
    assert_eq!((record.body(), record.queue_offset()), (&body[..], offset), "probe {n}: pulled back");
}

/// GET_BROKER_RUNTIME_INFO's table (string values, counters summed over shards).
pub fn runtime_info(c: &mut Conn) -> serde_json::Map<String, serde_json::Value> {
    let r = c.call(RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO).with_opaque(9_999));
    assert_eq!(r.code, rs::SUCCESS, "GET_BROKER_RUNTIME_INFO: {:?}", r.remark);
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("runtime info is JSON");
    v["table"].as_object().cloned().expect("runtime info has a table")
}

/// The physical offset inside an offsetMsgId (host 4 + port 4 + offset 8 bytes, hex).
pub fn phys_of_msg_id(msg_id: &str) -> u64 {
    assert_eq!(msg_id.len(), 32, "offsetMsgId {msg_id:?}");
    u64::from_str_radix(&msg_id[16..], 16).expect("hex offset")
}

// ---------------------------------------------------------------- fds and memory

/// Open file descriptors of this process (an in-process broker runs in it): all, and
/// sockets. The store opens segment files as it grows, so connection leaks are judged
/// on sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fds {
    pub all: usize,
    pub sockets: usize,
}

/// Open fds of this process, not counting files of broker stores under the test
/// directory (store files have nothing to do with connections).
pub fn fds() -> Fds {
    let mut f = Fds { all: 0, sockets: 0 };
    let store_dir = env!("CARGO_TARGET_TMPDIR");
    for entry in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        // An fd closed between the directory read and this readlink is gone: not counted
        // (thousands of sockets close at once in the idle-connection test).
        let Ok(target) = std::fs::read_link(entry.path()).map(|t| t.to_string_lossy().to_string()) else { continue };
        if target.starts_with(store_dir) {
            continue;
        }
        f.all += 1;
        if target.starts_with("socket:") {
            f.sockets += 1;
        }
    }
    f
}

/// Open fds by link target kind ("socket", "anon_inode:[io_uring]", a path...), for
/// failure messages.
pub fn fd_kinds() -> std::collections::BTreeMap<String, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").into_iter().flatten().flatten() {
        let target = std::fs::read_link(entry.path()).map(|t| t.to_string_lossy().to_string()).unwrap_or_else(|_| "?".into());
        let kind = target.split(':').next().unwrap_or("?").to_string();
        let kind = if kind.starts_with("anon_inode") { target } else { kind };
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// The fd counts once they stop moving (a connection just closed by a client is still
/// open on the broker's side for a moment); gives up after 5 s.
pub fn settled_fds() -> Fds {
    let mut last = fds();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let now = fds();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// Waits until at most `sockets` sockets and `all` fds are open; returns the last count.
pub fn fds_settle(sockets: usize, all: usize, within: Duration) -> Fds {
    let deadline = Instant::now() + within;
    loop {
        let f = fds();
        if (f.sockets <= sockets && f.all <= all) || Instant::now() >= deadline {
            return f;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let wanted = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
            lim = wanted;
        }
    }
    lim.rlim_cur
}

// ---------------------------------------------------------------- broker as a child process

pub struct ChildBroker {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// stdout and stderr files, shown when a test panics while the broker is held.
    pub logs: [PathBuf; 2],
}

/// How a child broker's start ended.
pub enum Started {
    Up(ChildBroker),
    Exited { code: Option<i32>, stdout: String, stderr: String },
}

/// What a child broker runs with.
#[derive(Debug, Clone, Default)]
pub struct ChildConfig {
    pub shard_count: usize,
    /// TOML lines for the top level (after the common ones).
    pub top: String,
    /// TOML lines for the `[store]` table.
    pub store: String,
    /// Extra environment variables (e.g. `RINGMQ_FAILPOINTS`).
    pub env: Vec<(String, String)>,
}

impl ChildBroker {
    /// Starts `ringmq-broker -c <dir>/broker-<n>.toml` on `store_root` with
    /// `listen_port = 0`, and waits until its log names the port it listens on, or
    /// it exits.
    pub fn start(dir: &Path, store_root: &Path, config: &ChildConfig) -> Started {
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let config_path = dir.join(format!("broker-{n}.toml"));
        // `top` may name the broker (a cluster test routes by name); otherwise a default.
        let name = if config.top.contains("broker_name") { "" } else { "broker_name = \"broker-test\"\n" };
        // The host disk's own fill level must not decide a test: watermarks near 100%
        // unless the test sets its own.
        let watermarks = if config.store.contains("disk_") { "" } else { HOST_INDEPENDENT_WATERMARKS_TOML };
        let text = format!(
            "listen_port = 0\nbroker_ip = \"127.0.0.1\"\n{name}shard_count = {}\nstore_root = \"{}\"\n{}\n\n[store]\n{}\n{watermarks}",
            config.shard_count.max(1),
            store_root.display(),
            config.top,
            config.store
        );
        std::fs::write(&config_path, text).expect("config");
        let stdout_path = dir.join(format!("broker-{n}.stdout"));
        let stderr_path = dir.join(format!("broker-{n}.stderr"));
        let started = Instant::now();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq-broker"));
        cmd.arg("-c")
            .arg(&config_path)
            .env("RUST_LOG", "info")
            .env_remove("NO_COLOR")
            .env_remove("RINGMQ_FAILPOINTS")
            .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
        for (k, v) in &config.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("broker process starts");
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return Started::Exited { code: status.code(), stdout: read_log(&stdout_path), stderr: read_log(&stderr_path) };
            }
            if let Some(addr) = listening_addr(&read_log(&stdout_path)) {
                // Its log goes to a file: plain text, no terminal colour codes.
                assert!(!read_log(&stdout_path).contains('\u{1b}'), "broker log written to a file has ANSI escapes:\n{}", read_log(&stdout_path));
                let logs = [stdout_path.clone(), stderr_path.clone()];
                return Started::Up(ChildBroker { child, addr, logs });
            }
            if started.elapsed() > CHILD_START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("broker neither listened nor exited within {CHILD_START_TIMEOUT:?}; stdout:\n{}", read_log(&stdout_path));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn start_up(dir: &Path, store_root: &Path, config: &ChildConfig) -> ChildBroker {
        match Self::start(dir, store_root, config) {
            Started::Up(broker) => broker,
            Started::Exited { code, stdout, stderr } => panic!("broker exited at start-up with {code:?}\nstderr:\n{stderr}\nstdout:\n{stdout}"),
        }
    }

    /// `None` while the process runs, its exit status once it ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("wait")
    }

    /// SIGKILL: no flush, no checkpoint, the abort file stays.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: a clean stop (flush, checkpoint, abort file removed).
    pub fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + CHILD_STOP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "clean stop exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "broker did not stop on SIGTERM within {CHILD_STOP_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stdout(&self) -> String {
        read_log(&self.logs[0])
    }
}

impl Drop for ChildBroker {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            for path in &self.logs {
                let log = read_log(path);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- {} (last {} lines)", path.display(), tail.len());
                tail.iter().rev().for_each(|l| eprintln!("{l}"));
            }
        }
    }
}

/// The address in the broker's "broker started addr=..." log line.
fn listening_addr(log: &str) -> Option<SocketAddr> {
    let line = log.lines().find(|l| l.contains("broker started"))?;
    let at = line.find("addr=")? + "addr=".len();
    line[at..].split_whitespace().next()?.parse().ok()
}

/// A master child broker's first replication port, from its start-up line.
pub fn ha_port(b: &ChildBroker) -> u16 {
    let log = read_log(&b.logs[0]);
    let line = log.lines().find(|l| l.contains("broker started")).expect("start line");
    let at = line.find("ha_port=").expect("ha_port in the start line") + "ha_port=".len();
    line[at..].split_whitespace().next().and_then(|p| p.parse().ok()).expect("a port")
}

/// A log file with ANSI escapes removed (in case colours are forced on).
pub fn read_log(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A fresh directory under the test's target tmp dir.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}
