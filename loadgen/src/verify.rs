//! `loadgen verify`: the durability checker and the SIGKILL cycle driver.
//!
//! Producers send messages whose body carries (producer id, sequence, payload CRC) to a
//! sync-flush broker and record every SEND_OK with its (broker, queue, offset) in an
//! ack log. The checker then drains every queue from its first offset and reports:
//! acknowledged, lost (acknowledged but missing), duplicated, reordered (a producer's
//! sequence going backwards within a queue), misplaced (found, but not where the ack
//! said), corrupted (bad magic, length or CRC) and unacknowledged-but-present (sent
//! when the broker died: allowed either way).
//!
//! `verify cycles` runs the broker binary as a child process, kills it with SIGKILL at
//! a random moment under load (and every `kill_in_recovery_every`th cycle again while it
//! recovers), restarts it, and finally checks everything acknowledged over all cycles.
//!
//! The child-broker setup (`ChildSetup`, `BrokerProcess`), the senders
//! (`producer_thread`), `drain` and the checker are shared with `verify recovery`
//! (`recovery.rs`).
//!
//! Invariants: each producer has exactly one send in flight, so its sequence order in a
//! queue is meaningful; the ack log holds only sends the broker answered SEND_OK; the
//! random schedule comes from a printed seed (`--seed` replays it).

use crate::engine::now_epoch_us;
use ringmq_client::consumer::kernel::PullStatus;
use ringmq_client::consumer::{ConsumeFrom, PullConsumer, PullConsumerConfig};
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::{ClientConfig, Message};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BODY_MAGIC: &[u8; 4] = b"RMQV";
/// magic · producer u32 · seq u64 · crc u32.
pub const BODY_HEAD_BYTES: usize = 20;
pub const START_WAIT_SECS: u64 = 120;

/// One acknowledged send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ack {
    pub producer: u32,
    pub seq: u64,
    pub queue_id: i32,
    pub offset: i64,
}

pub fn encode_body(producer: u32, seq: u64, size: usize) -> Vec<u8> {
    let size = size.max(BODY_HEAD_BYTES + 1);
    let payload: Vec<u8> = (0..size - BODY_HEAD_BYTES).map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i * 7 + producer as usize) as u8).collect();
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(BODY_MAGIC);
    body.extend_from_slice(&producer.to_be_bytes());
    body.extend_from_slice(&seq.to_be_bytes());
    body.extend_from_slice(&crc32fast::hash(&payload).to_be_bytes());
    body.extend_from_slice(&payload);
    body
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCheck {
    Ok { producer: u32, seq: u64 },
    Corrupt,
}

pub fn check_body(body: &[u8]) -> BodyCheck {
    if body.len() < BODY_HEAD_BYTES || &body[..4] != BODY_MAGIC {
        return BodyCheck::Corrupt;
    }
    let producer = u32::from_be_bytes(body[4..8].try_into().expect("4 bytes"));
    let seq = u64::from_be_bytes(body[8..16].try_into().expect("8 bytes"));
    let crc = u32::from_be_bytes(body[16..20].try_into().expect("4 bytes"));
    if crc32fast::hash(&body[BODY_HEAD_BYTES..]) != crc {
        return BodyCheck::Corrupt;
    }
    BodyCheck::Ok { producer, seq }
}

/// A message found while draining: where it is and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub queue_id: i32,
    pub offset: i64,
    pub body: BodyCheck,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub acked: u64,
    pub found: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub misplaced: u64,
    pub corrupted: u64,
    pub unacked_present: u64,
    /// A few examples of each problem, for the report.
    pub examples: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.corrupted == 0 && self.misplaced == 0 && self.reordered == 0
    }
}

/// Compares what was acknowledged with what the queues hold (`found` in queue/offset
/// order per queue).
pub fn judge(acks: &[Ack], found: &[Found]) -> Verdict {
    judge_detailed(acks, found).0
}

/// `judge`, plus the indices in `acks` of the acknowledged messages that were lost, in
/// order: a caller that knows when each ack came (before a kill, inside async flush's
/// window) can say which promise each loss broke.
pub fn judge_detailed(acks: &[Ack], found: &[Found]) -> (Verdict, Vec<usize>) {
    const EXAMPLES_MAX: usize = 10;
    let mut lost_at = Vec::new();
    let mut v = Verdict { acked: acks.len() as u64, found: found.len() as u64, ..Default::default() };
    let example = |v: &mut Verdict, s: String| {
        if v.examples.len() < EXAMPLES_MAX {
            v.examples.push(s);
        }
    };
    let mut positions: HashMap<(u32, u64), Vec<(i32, i64)>> = HashMap::new();
    let mut last_seq: HashMap<(i32, u32), u64> = HashMap::new();
    let mut sorted = found.to_vec();
    sorted.sort_by_key(|f| (f.queue_id, f.offset));
    for f in &sorted {
        match f.body {
            BodyCheck::Corrupt => {
                v.corrupted += 1;
                example(&mut v, format!("corrupted body at queue {} offset {}", f.queue_id, f.offset));
            }
            BodyCheck::Ok { producer, seq } => {
                positions.entry((producer, seq)).or_default().push((f.queue_id, f.offset));
                if let Some(prev) = last_seq.insert((f.queue_id, producer), seq) {
                    if seq < prev {
                        v.reordered += 1;
                        example(&mut v, format!("producer {producer}: seq {seq} after {prev} in queue {}", f.queue_id));
                    }
                }
            }
        }
    }
    let acked: HashMap<(u32, u64), &Ack> = acks.iter().map(|a| ((a.producer, a.seq), a)).collect();
    for (i, a) in acks.iter().enumerate() {
        match positions.get(&(a.producer, a.seq)) {
            None => {
                v.lost += 1;
                lost_at.push(i);
                example(&mut v, format!("LOST: producer {} seq {} acked at queue {} offset {}", a.producer, a.seq, a.queue_id, a.offset));
            }
            Some(at) if !at.contains(&(a.queue_id, a.offset)) => {
                v.misplaced += 1;
                example(&mut v, format!("producer {} seq {} acked at {}:{} but found at {:?}", a.producer, a.seq, a.queue_id, a.offset, at));
            }
            Some(_) => {}
        }
    }
    for (key, at) in &positions {
        if at.len() > 1 {
            v.duplicated += at.len() as u64 - 1;
        }
        if !acked.contains_key(key) {
            v.unacked_present += 1;
        }
    }
    (v, lost_at)
}

/// Reads every message of `topic` from each queue's first offset.
pub async fn drain(client: ClientConfig, topic: &str) -> Result<Vec<Found>, String> {
    let mut config = PullConsumerConfig::new(client, format!("verify-drain-{}", now_epoch_us()));
    config.consume_from = ConsumeFrom::FirstOffset;
    let consumer = PullConsumer::start(config).await.map_err(|e| e.to_string())?;
    let queues = consumer.fetch_queues(topic).await.map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for q in &queues {
        let mut offset = ringmq_client::consumer::kernel::min_offset(consumer.instance(), q).await.map_err(|e| e.to_string())?;
        loop {
            let r = consumer.pull(q, "*", offset, 256).await.map_err(|e| format!("pull {q:?} at {offset}: {e}"))?;
            for m in &r.messages {
                found.push(Found { queue_id: m.queue_id, offset: m.queue_offset, body: check_body(&m.body) });
            }
            match r.status {
                PullStatus::Found | PullStatus::NoMatchedMessage if r.next_begin_offset > offset => offset = r.next_begin_offset,
                PullStatus::OffsetIllegal if r.next_begin_offset > offset => offset = r.next_begin_offset,
                _ => break,
            }
        }
    }
    consumer.shutdown().await;
    Ok(found)
}

/// What each sender of a producer thread sends: `batch` messages per send (one
/// SEND_BATCH_MESSAGE when above 1: one queue, consecutive offsets) of `message_bytes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendShape {
    pub batch: usize,
    pub message_bytes: usize,
}

/// How long a sender waits after a failed send (the broker is down or busy): without
/// it a dead broker's refused connections would make a busy loop.
const SEND_FAILED_PAUSE_MS: u64 = 20;

/// One producer thread with one sender per entry of `first_seqs`, until `stop`; acks
/// appended to `acks`. Each sender has its own producer id (`first_id + lane`) and
/// sequence and one send in flight, so its sequence order within a queue stays
/// meaningful while the thread has several sends in flight. Returns each sender's next
/// unused sequence number.
pub(crate) fn producer_thread(
    client: ClientConfig,
    topic: String,
    first_id: u32,
    first_seqs: Vec<u64>,
    shape: SendShape,
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
) -> std::thread::JoinHandle<Result<Vec<u64>, String>> {
    std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("verify-p{first_id}"))
            .spawn(move || async move {
                let mut config = ProducerConfig::new(client, "verify-producer");
                config.send_timeout_ms = 2_000;
                config.retry_times_when_send_failed = 0;
                let producer = std::rc::Rc::new(Producer::start(config).await.map_err(|e| e.to_string())?);
                let lanes: Vec<_> = first_seqs
                    .into_iter()
                    .enumerate()
                    .map(|(lane, first_seq)| {
                        let (producer, topic, stop, acks) = (producer.clone(), topic.clone(), stop.clone(), acks.clone());
                        glommio::spawn_local(async move { send_lane(&producer, &topic, first_id + lane as u32, first_seq, shape, &stop, &acks).await })
                    })
                    .collect();
                let mut next = Vec::with_capacity(lanes.len());
                for lane in lanes {
                    next.push(lane.await);
                }
                producer.shutdown().await;
                Ok(next)
            })
            .map_err(|e| e.to_string())?
            .join()
            .map_err(|e| e.to_string())?
    })
}

/// One sender: one send in flight until `stop`; returns its next unused sequence.
async fn send_lane(producer: &Producer, topic: &str, producer_id: u32, first_seq: u64, shape: SendShape, stop: &AtomicBool, acks: &Mutex<Vec<Ack>>) -> u64 {
    let batch = shape.batch.max(1) as u64;
    let mut seq = first_seq;
    while !stop.load(Ordering::Relaxed) {
        let message = |i: u64| Message::new(topic, encode_body(producer_id, seq + i, shape.message_bytes));
        let sent = if batch == 1 { producer.send(message(0)).await } else { producer.send_batch((0..batch).map(message).collect()).await };
        match sent {
            Ok(r) => {
                let mut acks = acks.lock().unwrap_or_else(|e| e.into_inner());
                acks.extend((0..batch).map(|i| Ack { producer: producer_id, seq: seq + i, queue_id: r.queue.queue_id, offset: r.queue_offset + i as i64 }));
            }
            Err(_) => glommio::timer::sleep(Duration::from_millis(SEND_FAILED_PAUSE_MS)).await,
        }
        // A sequence number is never reused, acknowledged or not.
        seq += batch;
    }
    seq
}

#[derive(clap::Args, Debug, Clone)]
pub struct CyclesArgs {
    #[arg(long, default_value_t = 5)]
    pub cycles: usize,
    #[arg(long, default_value_t = 4)]
    pub producers: u32,
    #[arg(long, default_value_t = 512)]
    pub message_bytes: usize,
    /// Kill the broker after a random time in this range (ms) of load.
    #[arg(long, default_value_t = 300)]
    pub kill_after_min_ms: u64,
    #[arg(long, default_value_t = 2_000)]
    pub kill_after_max_ms: u64,
    /// Every Nth cycle also kills the restarted broker while it recovers (0: never).
    #[arg(long, default_value_t = 3)]
    pub kill_in_recovery_every: usize,
    /// The broker binary (default: next to this loadgen binary).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Parent of the store directory (a real filesystem).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Segment size of the broker's CommitLog, MiB (small: recovery crosses segments).
    #[arg(long, default_value_t = 16)]
    pub segment_mib: u64,
    #[arg(long)]
    pub seed: Option<u64>,
    /// JSON results (verdict, recovery times against store size).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The broker's CommitLog segments O_DSYNC (`[store] write_through = true`, the
    /// sync-flush default): each group commit is one write, durable when it completes.
    /// Without it the broker is run with `write_through = false` (write + fdatasync),
    /// so both ways of making a commit durable stay under test.
    #[arg(long)]
    pub write_through: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CycleRecord {
    pub cycle: usize,
    pub store_bytes: u64,
    pub recovery_ms: u64,
    pub killed_after_ms: u64,
    pub killed_in_recovery: bool,
    pub acked_total: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CyclesReport {
    pub seed: u64,
    /// The broker ran with O_DSYNC segments.
    pub write_through: bool,
    pub cycles: Vec<CycleRecord>,
    pub final_recovery_ms: u64,
    pub final_store_bytes: u64,
    pub verdict: Verdict,
}

pub(crate) struct BrokerProcess {
    child: Child,
}

/// How often a stopping broker is checked for its exit.
const EXIT_POLL_MS: u64 = 5;
/// How often a starting broker's port is tried: the resolution of the start-up times
/// (a refused connect on loopback costs microseconds).
const LISTEN_POLL_MS: u64 = 1;

impl BrokerProcess {
    pub(crate) fn spawn(bin: &Path, config: &Path, log: &Path) -> Result<Self, String> {
        let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = log_file.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(config)
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("start {}: {e}", bin.display()))?;
        Ok(Self { child })
    }

    /// Waits until the broker accepts connections (recovery done); returns the time taken.
    pub(crate) fn wait_listening(&mut self, port: u16, started: Instant) -> Result<Duration, String> {
        let deadline = started + Duration::from_secs(START_WAIT_SECS);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("broker exited during start-up: {status}"));
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                return Err(format!("broker not listening within {START_WAIT_SECS} s"));
            }
            std::thread::sleep(Duration::from_millis(LISTEN_POLL_MS));
        }
    }

    pub(crate) fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The exit status if the broker has exited (it should not have, under load).
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A clean stop: SIGTERM, then waits up to `within` for the exit (offsets saved,
    /// store flushed and checkpointed, abort file removed). Returns the time it took; a
    /// broker still running at the bound is killed and that is an error, as is an
    /// unsuccessful exit.
    pub(crate) fn stop_clean(&mut self, within: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let pid = libc::pid_t::try_from(self.child.id()).map_err(|e| e.to_string())?;
        // SAFETY: kill(2) with a child's pid we have not reaped yet (try_wait below is
        // the only reaper), so the pid cannot have been reused.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(format!("SIGTERM to broker {pid}: {}", std::io::Error::last_os_error()));
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(started.elapsed()),
                Ok(Some(status)) => return Err(format!("broker exited with {status} after SIGTERM")),
                Ok(None) => {}
                Err(e) => return Err(format!("waiting for the broker: {e}")),
            }
            if started.elapsed() > within {
                self.sigkill();
                return Err(format!("broker still running {} s after SIGTERM (killed)", within.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(EXIT_POLL_MS));
        }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.sigkill();
    }
}

pub(crate) fn dir_bytes(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&e.path()),
                // Allocated bytes, not apparent size: segments are pre-allocated.
                Ok(m) => total += std::os::unix::fs::MetadataExt::blocks(&m) * 512,
                Err(_) => {}
            }
        }
    }
    total
}

fn default_broker_bin() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut candidates = vec![me.with_file_name("ringmq-broker")];
    if let Some(parent) = me.parent().and_then(Path::parent) {
        candidates.push(parent.join("ringmq-broker"));
    }
    candidates.into_iter().find(|p| p.exists()).ok_or_else(|| "ringmq-broker binary not found next to loadgen: build it (cargo build --release -p ringmq-broker) or pass --broker-bin".into())
}

/// xorshift for the kill schedule.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A NameServer in this process and the configuration of a broker child process
/// (`shards` shards, store under `root/store`), for the checks that kill or watch the
/// broker.
pub(crate) struct ChildSetup {
    pub bin: PathBuf,
    pub root: PathBuf,
    pub namesrv: namesrv::server::ServerHandle,
    pub ns_addr: String,
    pub port: u16,
    pub config_path: PathBuf,
    pub store: PathBuf,
}

impl ChildSetup {
    /// `extra_store_toml`: more `[store]` lines (each ending in a newline), e.g.
    /// `write_through = true\n`.
    pub(crate) fn new(broker_bin: &Option<PathBuf>, dir: &Option<PathBuf>, root_name: &str, flush: &str, segment_bytes: u64, shards: usize, extra_store_toml: &str) -> Result<Self, String> {
        let bin = match broker_bin {
            Some(b) => b.clone(),
            None => default_broker_bin()?,
        };
        let parent = match dir {
            Some(d) => d.clone(),
            None => crate::workload_cmd::default_store_parent()?,
        };
        let root = parent.join(root_name);
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        let mut ns_config = namesrv::config::ServerConfig::default();
        ns_config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
        let namesrv = namesrv::server::spawn(ns_config).map_err(|e| format!("NameServer: {e}"))?;
        let ns_addr = namesrv.local_addr().to_string();
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let config_path = root.join("broker.toml");
        let store = root.join("store");
        std::fs::write(
            &config_path,
            format!(
                "listen_port = {port}\nnamesrv_addrs = [\"{ns_addr}\"]\nbroker_ip = \"127.0.0.1\"\nbroker_name = \"{root_name}\"\nshard_count = {shards}\nstore_root = \"{}\"\nregister_interval_ms = 1000\n\n[store]\nflush = \"{flush}\"\nsegment_bytes = {segment_bytes}\npreallocate = \"{preallocate}\"\n{}{extra_store_toml}",
                store.display(),
                crate::embedded::BenchDiskWatermarks::TOML,
                // As the tuning profiles and the suite's embedded broker: zeroed segments
                // for sync flush, fallocated ones for async.
                preallocate = if flush == "sync" { "zero" } else { "fallocate" },
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok(Self { bin, root, namesrv, ns_addr, port, config_path, store })
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.root.join("broker.log")
    }

    pub(crate) fn spawn_broker(&self) -> Result<BrokerProcess, String> {
        BrokerProcess::spawn(&self.bin, &self.config_path, &self.log_path())
    }
}

pub fn run_cycles(args: &CyclesArgs) -> Result<CyclesReport, String> {
    if args.cycles == 0 || args.producers == 0 || args.kill_after_min_ms > args.kill_after_max_ms {
        return Err("--cycles and --producers must be > 0 and --kill-after-min-ms ≤ --kill-after-max-ms".into());
    }
    let seed = args.seed.unwrap_or_else(|| now_epoch_us() | 1);
    eprintln!("verify: seed {seed} (replay with --seed {seed})");
    let mut rng = seed | 1;
    let extra = if args.write_through { "write_through = true\n" } else { "write_through = false\n" };
    let setup = ChildSetup::new(&args.broker_bin, &args.dir, &format!("ringmq-verify-{}-{seed}", std::process::id()), "sync", args.segment_mib * 1024 * 1024, 1, extra)?;
    let (root, store, port, ns_addr) = (setup.root.clone(), setup.store.clone(), setup.port, setup.ns_addr.clone());
    let topic = "VerifyTopic".to_string();
    let mut client = ClientConfig::new([ns_addr.clone()]);
    client.request_timeout_ms = 2_000;
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let mut next_seq: Vec<u64> = vec![0; args.producers as usize];
    let mut cycles = Vec::new();
    let result = (|| -> Result<(u64, u64, Verdict), String> {
        for cycle in 0..args.cycles {
            let started = Instant::now();
            let mut broker = setup.spawn_broker()?;
            let recovery = broker.wait_listening(port, started)?;
            let store_bytes = dir_bytes(&store);
            if cycle == 0 {
                crate::workload_cmd::create_topics(&[ns_addr.clone()], std::slice::from_ref(&topic), 4)?;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let shape = SendShape { batch: 1, message_bytes: args.message_bytes };
            let threads: Vec<_> = (0..args.producers)
                .map(|p| producer_thread(client.clone(), topic.clone(), p, vec![next_seq[p as usize]], shape, stop.clone(), acks.clone()))
                .collect();
            let kill_after = args.kill_after_min_ms + next_rand(&mut rng) % (args.kill_after_max_ms - args.kill_after_min_ms + 1);
            std::thread::sleep(Duration::from_millis(kill_after));
            broker.sigkill();
            // Producers see the broker die mid-send, then stop.
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
            for (p, t) in threads.into_iter().enumerate() {
                next_seq[p] = t.join().map_err(|_| "producer panicked".to_string())??[0];
            }
            let in_recovery = args.kill_in_recovery_every > 0 && (cycle + 1) % args.kill_in_recovery_every == 0;
            if in_recovery {
                let mut again = setup.spawn_broker()?;
                std::thread::sleep(Duration::from_millis(next_rand(&mut rng) % 50));
                again.sigkill();
            }
            let acked_total = acks.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
            eprintln!(
                "verify: cycle {cycle}: recovered in {} ms ({:.1} MiB stored), killed after {kill_after} ms{}, {acked_total} acked so far",
                recovery.as_millis(),
                store_bytes as f64 / 1048576.0,
                if in_recovery { ", and again during recovery" } else { "" }
            );
            cycles.push(CycleRecord { cycle, store_bytes, recovery_ms: recovery.as_millis() as u64, killed_after_ms: kill_after, killed_in_recovery: in_recovery, acked_total });
        }
        let started = Instant::now();
        let mut broker = setup.spawn_broker()?;
        let recovery = broker.wait_listening(port, started)?;
        let store_bytes = dir_bytes(&store);
        let found = run_on_glommio({
            let client = client.clone();
            let topic = topic.clone();
            move || async move { drain(client, &topic).await }
        })?;
        drop(broker);
        let acks = acks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        write_ack_log(&root.join("acks.csv"), &acks)?;
        Ok((recovery.as_millis() as u64, store_bytes, judge(&acks, &found)))
    })();
    setup.namesrv.stop();
    let (final_recovery_ms, final_store_bytes, verdict) = match result {
        Ok(r) => r,
        Err(e) => return Err(format!("{e} (store and broker log kept in {})", root.display())),
    };
    if verdict.ok() {
        let _ = std::fs::remove_dir_all(&root);
    } else {
        eprintln!("verify: store and broker log kept in {}", root.display());
    }
    Ok(CyclesReport { seed, write_through: args.write_through, cycles, final_recovery_ms, final_store_bytes, verdict })
}

pub(crate) fn run_on_glommio<F, Fut, T>(f: F) -> Result<T, String>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("verify")
        .spawn(move || async move { f().await })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|e| e.to_string())?
}

#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// NameServers of the cluster to check.
    #[arg(short = 'n', long)]
    pub namesrv: String,
    #[arg(long, default_value = "VerifyTopic")]
    pub topic: String,
    /// The ack log (`producer,seq,queue,offset` per line) of the sends to check.
    #[arg(long)]
    pub ack_log: PathBuf,
}

/// `verify check`: drains `topic` and judges it against an ack log.
pub fn run_check(args: &CheckArgs) -> Result<Verdict, String> {
    let acks = read_ack_log(&args.ack_log)?;
    let client = ClientConfig::new(ringmq_broker::config::split_addrs(&args.namesrv));
    let topic = args.topic.clone();
    let found = run_on_glommio(move || async move { drain(client, &topic).await })?;
    Ok(judge(&acks, &found))
}

pub fn print_report(r: &CyclesReport) {
    let v = &r.verdict;
    println!(
        "verify: {} cycles, seed {}: acked {}, found {}, LOST {}, duplicated {}, reordered {}, misplaced {}, corrupted {}, unacknowledged-but-present {}",
        r.cycles.len(),
        r.seed,
        v.acked,
        v.found,
        v.lost,
        v.duplicated,
        v.reordered,
        v.misplaced,
        v.corrupted,
        v.unacked_present
    );
    println!("verify: final recovery {} ms with {:.1} MiB stored", r.final_recovery_ms, r.final_store_bytes as f64 / 1048576.0);
    for e in &v.examples {
        println!("verify:   {e}");
    }
}

/// Loads an ack log written by `write_ack_log`.
pub fn read_ack_log(path: &Path) -> Result<Vec<Ack>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut acks = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        let parts: Vec<&str> = line.split(',').collect();
        let bad = || format!("{}:{}: expected producer,seq,queue,offset", path.display(), i + 1);
        if parts.len() != 4 {
            return Err(bad());
        }
        acks.push(Ack {
            producer: parts[0].parse().map_err(|_| bad())?,
            seq: parts[1].parse().map_err(|_| bad())?,
            queue_id: parts[2].parse().map_err(|_| bad())?,
            offset: parts[3].parse().map_err(|_| bad())?,
        });
    }
    Ok(acks)
}

pub fn write_ack_log(path: &Path, acks: &[Ack]) -> Result<(), String> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?);
    for a in acks {
        writeln!(f, "{},{},{},{}", a.producer, a.seq, a.queue_id, a.offset).map_err(|e| e.to_string())?;
    }
    f.flush().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(producer: u32, seq: u64, queue_id: i32, offset: i64) -> Ack {
        Ack { producer, seq, queue_id, offset }
    }

    fn found(queue_id: i32, offset: i64, producer: u32, seq: u64) -> Found {
        Found { queue_id, offset, body: BodyCheck::Ok { producer, seq } }
    }

    fn check(acks: &[Ack], found: &[Found], expected: (u64, u64, u64, u64, u64, u64)) {
        let v = judge(acks, found);
        assert_eq!((v.lost, v.duplicated, v.reordered, v.misplaced, v.corrupted, v.unacked_present), expected, "{v:?}");
    }

    #[test]
    fn verdicts() {
        // Everything in place.
        check(&[ack(0, 0, 1, 0), ack(0, 1, 1, 1)], &[found(1, 0, 0, 0), found(1, 1, 0, 1)], (0, 0, 0, 0, 0, 0));
        // A lost ack.
        check(&[ack(0, 0, 1, 0), ack(0, 1, 1, 1)], &[found(1, 0, 0, 0)], (1, 0, 0, 0, 0, 0));
        // Present without an ack (the broker died before answering): allowed.
        check(&[ack(0, 0, 1, 0)], &[found(1, 0, 0, 0), found(1, 1, 0, 1)], (0, 0, 0, 0, 0, 1));
        // A duplicate (a retried send stored twice).
        check(&[ack(0, 0, 1, 0)], &[found(1, 0, 0, 0), found(2, 0, 0, 0)], (0, 1, 0, 0, 0, 0));
        // Reordered within a queue.
        check(&[], &[found(1, 0, 0, 5), found(1, 1, 0, 4)], (0, 0, 1, 0, 0, 2));
        // Other producers interleave freely.
        check(&[], &[found(1, 0, 0, 5), found(1, 1, 1, 4)], (0, 0, 0, 0, 0, 2));
        // Found elsewhere than acknowledged.
        check(&[ack(0, 0, 1, 0)], &[found(1, 3, 0, 0)], (0, 0, 0, 1, 0, 0));
        // Corrupt bodies.
        check(&[], &[Found { queue_id: 0, offset: 0, body: BodyCheck::Corrupt }], (0, 0, 0, 0, 1, 0));
    }

    #[test]
    fn lost_acks_are_named_by_index() {
        let acks = [ack(0, 0, 1, 0), ack(0, 1, 1, 1), ack(1, 0, 2, 0), ack(1, 1, 2, 1)];
        let (v, lost) = judge_detailed(&acks, &[found(1, 0, 0, 0), found(2, 0, 1, 0)]);
        assert_eq!((v.lost, lost), (2, vec![1, 3]));
    }

    #[test]
    fn bodies_round_trip_and_detect_corruption() {
        let b = encode_body(7, 123_456, 512);
        assert_eq!(b.len(), 512);
        assert_eq!(check_body(&b), BodyCheck::Ok { producer: 7, seq: 123_456 });
        for i in [0, 5, 9, 17, 20, 300, 511] {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            let r = check_body(&bad);
            assert!(r == BodyCheck::Corrupt || (i >= 4 && i < 16), "byte {i}: {r:?}");
        }
        assert_eq!(check_body(b"short"), BodyCheck::Corrupt);
    }

    #[test]
    fn ack_log_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("acks.csv");
        let acks = vec![ack(1, 2, 3, 4), ack(5, 6, 7, 8)];
        write_ack_log(&p, &acks).unwrap();
        assert_eq!(read_ack_log(&p).unwrap(), acks);
        std::fs::write(&p, "1,2\n").unwrap();
        assert!(read_ack_log(&p).is_err());
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct SlowConsumerArgs {
    /// Offered rate of the producer (messages/s).
    #[arg(long, default_value_t = 4_000.0)]
    pub produce_rate: f64,
    /// What the slow consumer manages (messages/s), well below the produce rate.
    #[arg(long, default_value_t = 1_500.0)]
    pub consume_rate: f64,
    #[arg(long, default_value_t = 1024)]
    pub message_bytes: usize,
    /// Seconds of production while the backlog grows; the drain follows.
    #[arg(long, default_value_t = 30)]
    pub duration_secs: u64,
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlowConsumerReport {
    pub produce_rate: f64,
    pub consume_rate: f64,
    pub sent: u64,
    pub received: u64,
    pub backlog_peak: i64,
    pub drain_secs: f64,
    /// Send p99 (ms) in the first and the last 5 s of production.
    pub send_p99_ms_first_5s: f64,
    pub send_p99_ms_last_5s: f64,
    pub broker_rss_mib_start: f64,
    pub broker_rss_mib_peak: f64,
    pub broker_rss_mib_end: f64,
    /// (seconds, backlog, broker RSS MiB) per interval.
    pub timeline: Vec<(f64, i64, f64)>,
}

/// A producer at a fixed rate and a consumer that cannot keep up, against a child
/// broker whose memory is watched; then the consumer drains the backlog.
pub fn run_slow_consumer(args: &SlowConsumerArgs) -> Result<SlowConsumerReport, String> {
    if !(args.consume_rate > 0.0 && args.produce_rate > args.consume_rate) {
        return Err("--produce-rate must exceed --consume-rate > 0".into());
    }
    let setup = ChildSetup::new(&args.broker_bin, &args.dir, &format!("ringmq-slow-consumer-{}", std::process::id()), "async", 64 * 1024 * 1024, 1, "")?;
    let (root, port, ns_addr) = (setup.root.clone(), setup.port, setup.ns_addr.clone());
    let started = Instant::now();
    let mut broker = setup.spawn_broker()?;
    broker.wait_listening(port, started)?;
    let pid = broker.child.id();
    let topic = "SlowConsumerTopic".to_string();
    crate::workload_cmd::create_topics(&[ns_addr.clone()], std::slice::from_ref(&topic), 4)?;
    let rss_start = crate::engine::rss_kib(pid).unwrap_or(0);
    let workload = crate::record::Workload {
        name: "slow-consumer".into(),
        message_bytes: args.message_bytes,
        topics: 1,
        queues_per_topic: 4,
        producers: 1,
        consumers: 1,
        in_flight_per_producer: 16,
        batch_size: 1,
        send_mode: "sync".into(),
        target_rate_per_sec: Some(args.produce_rate),
        duration_secs: args.duration_secs,
        warmup_secs: 0,
    };
    let backlog_secs = args.duration_secs as f64 * (args.produce_rate - args.consume_rate) / args.consume_rate;
    let spec = crate::engine::EngineSpec {
        credentials: None,
        tls: Default::default(),
        role: crate::engine::Role::E2e,
        pull_batch_size: 64,
        workload,
        sizes: crate::engine::SizeDist::fixed(args.message_bytes),
        namesrv_addrs: vec![ns_addr],
        topics: vec![topic],
        tags: Vec::new(),
        keys: false,
        delay_level: None,
        timer_delay_secs: None,
        delay_ms: 0,
        group: format!("slow-consumer-{}", std::process::id()),
        consume_from_first: true,
        consume_target_messages: None,
        produce_target_messages: None,
        drain_secs: (backlog_secs * 2.0) as u64 + 30,
        interval_ms: 1_000,
        send_timeout_ms: 3_000,
        progress: true,
        lines: false,
        consume_delay_us: (1e6 / args.consume_rate) as u64,
        rss_pid: Some(pid),
        record_drain_intervals: true,
        transactional: None,
    };
    let run = crate::engine::run(&spec, "RingMQ", "async flush, slow consumer", crate::record::Durability::WithinOneSecond);
    let rss_end = crate::engine::rss_kib(pid).unwrap_or(0);
    drop(broker);
    setup.namesrv.stop();
    let _ = std::fs::remove_dir_all(&root);
    let run = run?;
    let load: Vec<&crate::record::IntervalStats> = run.intervals.iter().filter(|i| i.elapsed_secs <= args.duration_secs as f64 + 0.5).collect();
    let p99 = |xs: &[&crate::record::IntervalStats]| {
        let mut h = crate::record::new_latency_histogram();
        for i in xs {
            let _ = h.add(&i.send_latency_us);
        }
        h.value_at_quantile(0.99) as f64 / 1000.0
    };
    let first: Vec<_> = load.iter().take(5).copied().collect();
    let last: Vec<_> = load.iter().rev().take(5).copied().collect();
    let mib = |kib: u64| kib as f64 / 1024.0;
    let timeline: Vec<(f64, i64, f64)> = run.intervals.iter().map(|i| (i.elapsed_secs, i.backlog.unwrap_or(0), mib(i.broker_rss_kib.unwrap_or(0)))).collect();
    let drain_secs = run.intervals.last().map(|i| i.elapsed_secs - args.duration_secs as f64).unwrap_or(0.0).max(0.0);
    Ok(SlowConsumerReport {
        produce_rate: args.produce_rate,
        consume_rate: args.consume_rate,
        sent: run.sent,
        received: run.received,
        backlog_peak: run.intervals.iter().filter_map(|i| i.backlog).max().unwrap_or(0),
        drain_secs,
        send_p99_ms_first_5s: p99(&first),
        send_p99_ms_last_5s: p99(&last),
        broker_rss_mib_start: mib(rss_start),
        broker_rss_mib_peak: mib(run.intervals.iter().filter_map(|i| i.broker_rss_kib).max().unwrap_or(0)),
        broker_rss_mib_end: mib(rss_end),
        timeline,
    })
}
