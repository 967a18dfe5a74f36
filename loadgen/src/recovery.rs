//! `loadgen verify recovery`: how soon a broker serves again after a restart, and that
//! nothing it promised to keep was lost. This file owns the benchmark's flow (two
//! restarts), the restart probe, the broker-log parsing, the report and its table; the
//! broker child process, the NameServer, the senders, the ack log and the checker are
//! `verify`'s.
//!
//! - Row "after SIGKILL": W2-shaped load (1 KiB bodies, `--producers` × `--in-flight`
//!   senders, batches of 16, unthrottled, async flush) for `--load-secs`, SIGKILL under
//!   that load, restart on the same store.
//! - Row "after clean stop": the same load grows the store to `--clean-store-gib`, then
//!   SIGTERM (waiting for the exit) and restart.
//!
//! Each restart is timed from its spawn: the port accepting (recovery done), the first
//! acknowledged send, and the first pull of an offset acknowledged before the stop. The
//! probe's clients cached their routes before the stop, as an application's clients
//! would have. The broker's "recovered after an unclean stop" line gives the bytes it
//! re-scanned. At the end every acknowledged message is checked (`verify::judge`).
//!
//! Async flush acknowledges before the bytes are on disk, so a SIGKILL loses what was
//! acknowledged since the last flush. The checker's losses are therefore split at
//! `ASYNC_FLUSH_LOSS_WINDOW_MS` before the kill: inside that window the "≤ 1 s" durability
//! label allows them; a loss acknowledged earlier, or any loss in the clean row, fails.

use crate::engine::now_epoch_us;
use crate::verify::{self, check_body, encode_body, Ack, BodyCheck, BrokerProcess, ChildSetup, SendShape, Verdict, BODY_HEAD_BYTES, START_WAIT_SECS};
use ringmq_client::consumer::kernel::PullStatus;
use ringmq_client::consumer::{PullConsumer, PullConsumerConfig};
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::remoting::bodies::MessageQueue;
use ringmq_client::{ClientConfig, Message};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{Read, Seek};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB_BYTES: u64 = 1024 * 1024;
const GIB_BYTES: u64 = 1024 * MIB_BYTES;

/// Defaults of `RecoveryArgs` (the suite's recovery workload uses them too).
pub const LOAD_SECS_DEFAULT: u64 = 60;
pub const CLEAN_STORE_GIB_DEFAULT: f64 = 20.0;
/// The broker's own default segment size (`StoreConfig::default`), 1 GiB.
pub const SEGMENT_MIB_DEFAULT: u64 = 1024;

/// Async flush's promise as its durability label states it ("≤ 1 s"): what was
/// acknowledged less than this before a SIGKILL may be lost.
pub const ASYNC_FLUSH_LOSS_WINDOW_MS: u64 = 1_000;
/// Free disk required beyond the store the clean row grows, GiB.
pub const DISK_HEADROOM_GIB: f64 = 5.0;
/// The quoted (not asserted) targets for both rows.
pub const FIRST_ACK_TARGET_MS: u64 = 1_000;
pub const FIRST_PULL_TARGET_MS: u64 = 1_000;

/// Accepted `--load-secs`: at least the loss window plus a second of load before it, so
/// the pull probe has an acknowledged offset old enough to be on disk.
const LOAD_SECS_MIN: u64 = 2;
const LOAD_SECS_MAX: u64 = 3_600;
const CLEAN_STORE_GIB_MAX: f64 = 16_384.0;
/// RocketMQ's batch limit: a batch is one request of at most 4 MiB.
const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// A clean stop (flush, checkpoint, offsets) must end within this.
const CLEAN_STOP_WAIT_SECS: u64 = 120;
/// How often the growing store's size is looked at.
const GROW_POLL_MS: u64 = 500;
/// A store that does not grow for this long while loaded means a stuck broker.
const GROW_STALL_SECS_MAX: u64 = 60;
/// Slowest average growth accepted (bounds the whole growth phase).
const GROW_MIB_PER_SEC_MIN: f64 = 5.0;
/// How often growth progress is printed.
const GROW_REPORT_SECS: u64 = 10;
/// Pause between two probe attempts while the broker is still recovering: short, so it
/// adds little to the times measured, but not a busy loop on refused connections.
const PROBE_RETRY_MS: u64 = 2;
/// One probe send's whole budget (no retries inside the client: the probe retries).
const PROBE_SEND_TIMEOUT_MS: u64 = 1_000;
/// How often the idle probe thread looks for its next command (it must keep running
/// its client tasks meanwhile, so it polls instead of blocking).
const PROBE_COMMAND_POLL_MS: u64 = 2;
/// Client request timeout of the load and the probe.
const REQUEST_TIMEOUT_MS: u64 = 2_000;

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct RecoveryArgs {
    /// Seconds of W2-shaped load before the SIGKILL.
    #[arg(long, default_value_t = LOAD_SECS_DEFAULT)]
    pub load_secs: u64,
    /// Size the store grows to (same load, unthrottled) before the clean stop, GiB; 0
    /// skips the clean-start row.
    #[arg(long, default_value_t = CLEAN_STORE_GIB_DEFAULT)]
    pub clean_store_gib: f64,
    /// Producer threads.
    #[arg(long, default_value_t = 4)]
    pub producers: u32,
    /// Sends in flight per producer thread, each from its own sender (own id and
    /// sequence, one send in flight) so the order check stays meaningful.
    #[arg(long, default_value_t = 4)]
    pub in_flight: u32,
    /// Messages per send (one SEND_BATCH_MESSAGE).
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    #[arg(long, default_value_t = 1024)]
    pub message_bytes: usize,
    /// Queues of the topic.
    #[arg(long, default_value_t = 8)]
    pub queues: usize,
    /// Broker shards.
    #[arg(long, default_value_t = 1)]
    pub shards: usize,
    /// CommitLog segment size, MiB (default: the broker's own, 1 GiB).
    #[arg(long, default_value_t = SEGMENT_MIB_DEFAULT)]
    pub segment_mib: u64,
    /// The broker binary (default: next to this loadgen binary).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Parent of the store directory (a real filesystem; default under $TMPDIR).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the store, the broker log and the ack log afterwards.
    #[arg(long)]
    pub keep: bool,
    /// JSON results.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl Default for RecoveryArgs {
    fn default() -> Self {
        Self {
            load_secs: LOAD_SECS_DEFAULT,
            clean_store_gib: CLEAN_STORE_GIB_DEFAULT,
            producers: 4,
            in_flight: 4,
            batch: 16,
            message_bytes: 1024,
            queues: 8,
            shards: 1,
            segment_mib: SEGMENT_MIB_DEFAULT,
            broker_bin: None,
            dir: None,
            keep: false,
            out: None,
        }
    }
}

/// The message the pull probe reads: acknowledged before the stop.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PullTarget {
    pub queue_id: i32,
    pub offset: i64,
    pub producer: u32,
    pub seq: u64,
}

impl From<&Ack> for PullTarget {
    fn from(a: &Ack) -> Self {
        Self { queue_id: a.queue_id, offset: a.offset, producer: a.producer, seq: a.seq }
    }
}

/// What the broker logged while starting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BrokerLogFacts {
    /// Shards that logged "recovered after an unclean stop".
    pub unclean_shards: u32,
    /// Shards whose "store open" line says the last stop was clean (nothing re-scanned).
    pub clean_shards: u32,
    /// Sum over those shards of `end - scanned_from`: the CommitLog bytes re-verified
    /// from the checkpoint on. None when no shard logged the line (a clean start).
    pub rescanned_bytes: Option<u64>,
    /// The slowest shard's `recovery_ms` from its "store open" line.
    pub store_open_ms: Option<u64>,
}

/// One restart: what was stopped and how soon the broker served again.
#[derive(Debug, Clone, Serialize)]
pub struct RestartRow {
    /// "sigkill" or "clean".
    pub kind: String,
    pub label: String,
    /// Seconds the load ran before the stop (0: none was needed).
    pub load_secs: f64,
    /// Acknowledged messages per second and MiB/s of bodies during that load.
    pub load_msgs_per_sec: f64,
    pub load_mib_per_sec: f64,
    /// Allocated bytes of the store when it was stopped.
    pub store_bytes: u64,
    /// SIGTERM → exit, for the clean stop.
    pub stop_ms: Option<u64>,
    pub broker_log: BrokerLogFacts,
    pub port_open_ms: u64,
    pub first_ack_ms: u64,
    pub first_pull_ms: u64,
    pub pulled: PullTarget,
    /// Acknowledged since the previous row's stop, up to this stop.
    pub acked: u64,
    /// Of those, missing at the end.
    pub lost: u64,
    /// Of the lost, acknowledged within `ASYNC_FLUSH_LOSS_WINDOW_MS` before a SIGKILL.
    pub lost_within_flush_window: u64,
    #[serde(skip)]
    acks: Range<usize>,
    /// Acks from this index on came within the flush window before the kill.
    #[serde(skip)]
    window_from: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    pub started_utc: String,
    pub machine: crate::report::MachineInfo,
    pub params: RecoveryArgs,
    pub async_flush_loss_window_ms: u64,
    pub first_ack_target_ms: u64,
    pub first_pull_target_ms: u64,
    pub rows: Vec<RestartRow>,
    /// `verify`'s checker over every acknowledged message (the probes' included).
    pub verdict: Verdict,
    /// Lost messages that no promise allows: acknowledged before the flush window of a
    /// SIGKILL, or before a clean stop, or after a restart.
    pub lost_beyond_flush_window: u64,
    /// Where the store, broker log and ack log were left (`--keep` or a failure).
    pub kept_dir: Option<String>,
}

impl RecoveryReport {
    pub fn ok(&self) -> bool {
        let v = &self.verdict;
        self.lost_beyond_flush_window == 0 && v.corrupted == 0 && v.misplaced == 0 && v.reordered == 0
    }
}

fn validate(a: &RecoveryArgs) -> Result<(), String> {
    if !(LOAD_SECS_MIN..=LOAD_SECS_MAX).contains(&a.load_secs) {
        return Err(format!("--load-secs must be {LOAD_SECS_MIN}..={LOAD_SECS_MAX}"));
    }
    if !(a.clean_store_gib.is_finite() && (0.0..=CLEAN_STORE_GIB_MAX).contains(&a.clean_store_gib)) {
        return Err(format!("--clean-store-gib must be 0..={CLEAN_STORE_GIB_MAX}"));
    }
    if !(1..=64).contains(&a.producers) || !(1..=64).contains(&a.in_flight) {
        return Err("--producers and --in-flight must be 1..=64".into());
    }
    if a.message_bytes <= BODY_HEAD_BYTES || a.batch == 0 || a.batch * a.message_bytes > BATCH_BYTES_MAX {
        return Err(format!("--message-bytes must exceed {BODY_HEAD_BYTES}, --batch be positive and a batch at most {BATCH_BYTES_MAX} bytes"));
    }
    if !(1..=1024).contains(&a.queues) || !(1..=128).contains(&a.shards) {
        return Err("--queues must be 1..=1024 and --shards 1..=128".into());
    }
    if !(8..=4096).contains(&a.segment_mib) {
        return Err("--segment-mib must be 8..=4096".into());
    }
    Ok(())
}

/// Why the disk cannot take the growth to `target_bytes` from `have_bytes`, if it cannot:
/// the growth plus `DISK_HEADROOM_GIB` must be free.
fn disk_shortfall(free_bytes: u64, have_bytes: u64, target_bytes: u64) -> Option<String> {
    let headroom = (DISK_HEADROOM_GIB * GIB_BYTES as f64) as u64;
    let need = target_bytes.saturating_sub(have_bytes) + headroom;
    (free_bytes < need).then(|| {
        format!(
            "not enough free disk: growing the store to {:.1} GiB needs {:.1} GiB free ({DISK_HEADROOM_GIB} GiB headroom included), {:.1} GiB are (lower --clean-store-gib, or --dir elsewhere)",
            target_bytes as f64 / GIB_BYTES as f64,
            need as f64 / GIB_BYTES as f64,
            free_bytes as f64 / GIB_BYTES as f64
        )
    })
}

fn check_disk(dir: &Path, have_bytes: u64, target_bytes: u64) -> Result<(), String> {
    let space = ringmq_broker::store::io::dma::statvfs(dir).map_err(|e| format!("free space of {}: {e}", dir.display()))?;
    match disk_shortfall(space.free_bytes, have_bytes, target_bytes) {
        Some(why) => Err(format!("{}: {why}", dir.display())),
        None => Ok(()),
    }
}

/// Removes terminal colour sequences (`ESC [ ... letter`): the broker's log formatter
/// may colour field names even when writing to a file.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The value of `name=<value>` among a log line's space-separated fields.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|token| token.strip_prefix(name)?.strip_prefix('='))
}

fn field_u64(line: &str, name: &str) -> Option<u64> {
    field(line, name)?.parse().ok()
}

/// Reads the recovery facts out of the broker's log of one start.
pub fn parse_broker_log(text: &str) -> BrokerLogFacts {
    let mut facts = BrokerLogFacts::default();
    for raw in text.lines() {
        let line = strip_ansi(raw);
        if line.contains("recovered after an unclean stop") {
            if let (Some(from), Some(end)) = (field_u64(&line, "scanned_from"), field_u64(&line, "end")) {
                facts.unclean_shards += 1;
                // Both offsets carry the shard's bits, so the difference is plain bytes.
                *facts.rescanned_bytes.get_or_insert(0) += end.saturating_sub(from);
            }
        } else if line.contains("store open") {
            if field(&line, "unclean") == Some("false") {
                facts.clean_shards += 1;
            }
            if let Some(ms) = field_u64(&line, "recovery_ms") {
                facts.store_open_ms = Some(facts.store_open_ms.map_or(ms, |m: u64| m.max(ms)));
            }
        }
    }
    facts
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The broker log written from byte `from` on (one start's lines).
fn read_log_from(path: &Path, from: u64) -> Result<String, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.seek(std::io::SeekFrom::Start(from)).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The senders of `verify` (one thread per producer, `in_flight` senders each).
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Result<Vec<u64>, String>>>,
    started: Instant,
}

impl Load {
    fn start(client: &ClientConfig, topic: &str, a: &RecoveryArgs, next_seqs: &[Vec<u64>], acks: &Arc<Mutex<Vec<Ack>>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let shape = SendShape { batch: a.batch, message_bytes: a.message_bytes };
        let threads = next_seqs
            .iter()
            .enumerate()
            .map(|(p, seqs)| verify::producer_thread(client.clone(), topic.to_string(), p as u32 * a.in_flight, seqs.clone(), shape, stop.clone(), acks.clone()))
            .collect();
        Self { stop, threads, started: Instant::now() }
    }

    /// Stops the senders (each ends its send in flight, bounded by its send timeout);
    /// returns every sender's next sequence and how long the load ran.
    fn stop(self) -> Result<(Vec<Vec<u64>>, Duration), String> {
        let ran = self.started.elapsed();
        self.stop.store(true, Ordering::SeqCst);
        let mut next = Vec::with_capacity(self.threads.len());
        for t in self.threads {
            next.push(t.join().map_err(|_| "producer thread panicked".to_string())??);
        }
        Ok((next, ran))
    }
}

enum ProbeCommand {
    Measure { spawned: Instant, target: PullTarget },
    Stop,
}

struct ProbeTimes {
    first_ack: Duration,
    first_pull: Duration,
}

/// A producer and a pull consumer on their own executor, started (routes cached) while
/// the broker runs, that time the first acknowledged send and the first pull of an old
/// offset after each restart.
struct Probe {
    commands: mpsc::Sender<ProbeCommand>,
    results: mpsc::Receiver<Result<ProbeTimes, String>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Probe {
    fn start(client: ClientConfig, topic: String, probe_id: u32, message_bytes: usize, acks: Arc<Mutex<Vec<Ack>>>) -> Result<Self, String> {
        let (commands, command_rx) = mpsc::channel();
        let (result_tx, results) = mpsc::channel();
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let thread = std::thread::spawn(move || {
            glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                .name("recovery-probe")
                .spawn(move || async move { probe_main(client, topic, probe_id, message_bytes, acks, ready_tx, command_rx, result_tx).await })
                .map_err(|e| e.to_string())?
                .join()
                .map_err(|e| e.to_string())?
        });
        let mut probe = Self { commands, results, thread: Some(thread) };
        match ready.recv_timeout(Duration::from_secs(START_WAIT_SECS)) {
            Ok(Ok(())) => Ok(probe),
            Ok(Err(e)) => Err(format!("probe: {e}")),
            Err(_) => Err(probe.stop().err().unwrap_or_else(|| format!("probe not ready within {START_WAIT_SECS} s"))),
        }
    }

    fn begin(&self, spawned: Instant, target: PullTarget) -> Result<(), String> {
        self.commands.send(ProbeCommand::Measure { spawned, target }).map_err(|_| "probe thread ended".to_string())
    }

    /// The times of the measurement begun last; the probe bounds its own attempts by
    /// `START_WAIT_SECS`, this wait adds a margin for its last request's timeout.
    fn finish(&self) -> Result<ProbeTimes, String> {
        let bound = Duration::from_secs(START_WAIT_SECS) + Duration::from_millis(2 * REQUEST_TIMEOUT_MS);
        self.results.recv_timeout(bound).map_err(|_| "probe gave no result".to_string())?
    }

    fn stop(&mut self) -> Result<(), String> {
        let _ = self.commands.send(ProbeCommand::Stop);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| "probe thread panicked".to_string())?,
            None => Ok(()),
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[allow(clippy::too_many_arguments)]
async fn probe_main(
    client: ClientConfig,
    topic: String,
    probe_id: u32,
    message_bytes: usize,
    acks: Arc<Mutex<Vec<Ack>>>,
    ready: mpsc::SyncSender<Result<(), String>>,
    commands: mpsc::Receiver<ProbeCommand>,
    results: mpsc::Sender<Result<ProbeTimes, String>>,
) -> Result<(), String> {
    let setup = async {
        let mut config = ProducerConfig::new(client.clone(), "verify-recovery-probe");
        config.send_timeout_ms = PROBE_SEND_TIMEOUT_MS;
        config.retry_times_when_send_failed = 0;
        let producer = Producer::start(config).await.map_err(|e| e.to_string())?;
        let consumer = PullConsumer::start(PullConsumerConfig::new(client, format!("verify-recovery-probe-{}", now_epoch_us()))).await.map_err(|e| e.to_string())?;
        // Routes cached now, while the broker runs, as an application's clients have
        // them when their broker dies.
        producer.instance().fetch_route(&topic).await.map_err(|e| e.to_string())?;
        let queues = consumer.fetch_queues(&topic).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((producer, consumer, queues))
    };
    let (producer, consumer, queues) = match setup.await {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e.clone()));
            return Err(e);
        }
    };
    let _ = ready.send(Ok(()));
    let mut seq = 0u64;
    loop {
        let command = match commands.try_recv() {
            Ok(c) => c,
            Err(mpsc::TryRecvError::Empty) => {
                glommio::timer::sleep(Duration::from_millis(PROBE_COMMAND_POLL_MS)).await;
                continue;
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        let (spawned, target) = match command {
            ProbeCommand::Stop => break,
            ProbeCommand::Measure { spawned, target } => (spawned, target),
        };
        let deadline = spawned + Duration::from_secs(START_WAIT_SECS);
        let result = match queues.iter().find(|q| q.queue_id == target.queue_id) {
            None => Err(format!("queue {} is not in the topic's route", target.queue_id)),
            Some(queue) => {
                let sending = first_ack(&producer, &topic, probe_id, &mut seq, message_bytes, &acks, spawned, deadline);
                let pulling = first_pull(&consumer, queue, target, spawned, deadline);
                let (ack, pull) = futures_lite::future::zip(sending, pulling).await;
                ack.and_then(|first_ack| pull.map(|first_pull| ProbeTimes { first_ack, first_pull }))
            }
        };
        if results.send(result).is_err() {
            break;
        }
    }
    producer.shutdown().await;
    consumer.shutdown().await;
    Ok(())
}

/// Sends one message at a time until one is acknowledged; its ack joins the ack log.
#[allow(clippy::too_many_arguments)]
async fn first_ack(producer: &Producer, topic: &str, probe_id: u32, seq: &mut u64, message_bytes: usize, acks: &Mutex<Vec<Ack>>, spawned: Instant, deadline: Instant) -> Result<Duration, String> {
    let mut last_error = "no attempt".to_string();
    while Instant::now() < deadline {
        let s = *seq;
        // A sequence number is never reused, acknowledged or not.
        *seq += 1;
        match producer.send(Message::new(topic, encode_body(probe_id, s, message_bytes))).await {
            Ok(r) => {
                let at = spawned.elapsed();
                acks.lock().unwrap_or_else(|e| e.into_inner()).push(Ack { producer: probe_id, seq: s, queue_id: r.queue.queue_id, offset: r.queue_offset });
                return Ok(at);
            }
            Err(e) => last_error = e.to_string(),
        }
        glommio::timer::sleep(Duration::from_millis(PROBE_RETRY_MS)).await;
    }
    Err(format!("no send acknowledged within {START_WAIT_SECS} s of the restart (last: {last_error})"))
}

/// Pulls `target` until the broker returns it; the message must be the one acknowledged.
async fn first_pull(consumer: &PullConsumer, queue: &MessageQueue, target: PullTarget, spawned: Instant, deadline: Instant) -> Result<Duration, String> {
    let mut last = "no attempt".to_string();
    while Instant::now() < deadline {
        match consumer.pull(queue, "*", target.offset, 1).await {
            Ok(r) if r.status == PullStatus::Found => {
                let at = spawned.elapsed();
                let want = BodyCheck::Ok { producer: target.producer, seq: target.seq };
                return match r.messages.iter().find(|m| m.queue_offset == target.offset) {
                    Some(m) if check_body(&m.body) == want => Ok(at),
                    Some(m) => Err(format!("queue {} offset {} holds {:?}, not the acknowledged producer {} seq {}", target.queue_id, target.offset, check_body(&m.body), target.producer, target.seq)),
                    None => Err(format!("a pull of queue {} offset {} returned other offsets", target.queue_id, target.offset)),
                };
            }
            Ok(r) => last = format!("{:?} (queue offsets {}..{})", r.status, r.min_offset, r.max_offset),
            Err(e) => last = e.to_string(),
        }
        glommio::timer::sleep(Duration::from_millis(PROBE_RETRY_MS)).await;
    }
    Err(format!("queue {} offset {} (acknowledged before the stop) not readable within {START_WAIT_SECS} s of the restart (last: {last})", target.queue_id, target.offset))
}

/// The three times of one restart, from its spawn, and what the broker logged.
struct Restarted {
    broker: BrokerProcess,
    port_open: Duration,
    times: ProbeTimes,
    log: BrokerLogFacts,
}

fn restart(setup: &ChildSetup, probe: &Probe, target: PullTarget) -> Result<Restarted, String> {
    let log_from = file_len(&setup.log_path());
    let spawned = Instant::now();
    let mut broker = setup.spawn_broker()?;
    probe.begin(spawned, target)?;
    let port_open = broker.wait_listening(setup.port, spawned);
    // The probe's attempts are bounded too; its result comes even if the port never opened.
    let times = probe.finish();
    let (port_open, times) = (port_open?, times?);
    let log = parse_broker_log(&read_log_from(&setup.log_path(), log_from)?);
    Ok(Restarted { broker, port_open, times, log })
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn acked_len(acks: &Mutex<Vec<Ack>>) -> usize {
    acks.lock().unwrap_or_else(|e| e.into_inner()).len()
}

fn ack_at(acks: &Mutex<Vec<Ack>>, i: usize) -> Ack {
    acks.lock().unwrap_or_else(|e| e.into_inner())[i]
}

#[allow(clippy::too_many_arguments)]
fn row(kind: &str, label: String, ran: Duration, acks: Range<usize>, window_from: usize, message_bytes: usize, store_bytes: u64, stop_ms: Option<u64>, r: &Restarted, pulled: PullTarget) -> RestartRow {
    let secs = ran.as_secs_f64();
    let rate = if secs > 0.0 { acks.len() as f64 / secs } else { 0.0 };
    RestartRow {
        kind: kind.into(),
        label,
        load_secs: secs,
        load_msgs_per_sec: rate,
        load_mib_per_sec: rate * message_bytes as f64 / MIB_BYTES as f64,
        store_bytes,
        stop_ms,
        broker_log: r.log.clone(),
        port_open_ms: millis(r.port_open),
        first_ack_ms: millis(r.times.first_ack),
        first_pull_ms: millis(r.times.first_pull),
        pulled,
        acked: acks.len() as u64,
        lost: 0,
        lost_within_flush_window: 0,
        acks,
        window_from,
    }
}

fn describe(r: &RestartRow) -> String {
    format!(
        "recovery: {}: port open {} ms, first ack {} ms, first pull {} ms; store {:.2} GiB, re-scanned MiB: {}",
        r.label,
        r.port_open_ms,
        r.first_ack_ms,
        r.first_pull_ms,
        r.store_bytes as f64 / GIB_BYTES as f64,
        rescanned_cell(&r.broker_log)
    )
}

/// The benchmark: both rows, then the check of everything acknowledged.
pub fn run_recovery(args: &RecoveryArgs) -> Result<RecoveryReport, String> {
    validate(args)?;
    let started_utc = crate::report::utc_now();
    let parent = match &args.dir {
        Some(d) => d.clone(),
        None => crate::workload_cmd::default_store_parent()?,
    };
    std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    if crate::report::fs_type(&parent).as_deref() == Some("tmpfs") {
        return Err(format!("{} is on tmpfs; the broker needs O_DIRECT (pass --dir on a real filesystem)", parent.display()));
    }
    let target_bytes = (args.clean_store_gib * GIB_BYTES as f64) as u64;
    // Refuse before anything runs; checked again before the growth itself.
    check_disk(&parent, 0, target_bytes)?;
    let machine = crate::report::MachineInfo::collect(&parent, crate::report::command_line());
    let setup = ChildSetup::new(&args.broker_bin, &Some(parent), &format!("ringmq-recovery-{}", std::process::id()), "async", args.segment_mib * MIB_BYTES, args.shards, "")?;
    let result = run_rows(args, &setup, target_bytes);
    setup.namesrv.stop();
    let root = setup.root.display().to_string();
    let (rows, verdict, lost_beyond) = result.map_err(|e| format!("{e} (store and broker log kept in {root})"))?;
    let mut report = RecoveryReport {
        started_utc,
        machine,
        params: args.clone(),
        async_flush_loss_window_ms: ASYNC_FLUSH_LOSS_WINDOW_MS,
        first_ack_target_ms: FIRST_ACK_TARGET_MS,
        first_pull_target_ms: FIRST_PULL_TARGET_MS,
        rows,
        verdict,
        lost_beyond_flush_window: lost_beyond,
        kept_dir: None,
    };
    if args.keep || !report.ok() {
        report.kept_dir = Some(root);
    } else {
        let _ = std::fs::remove_dir_all(&setup.root);
    }
    Ok(report)
}

fn run_rows(args: &RecoveryArgs, setup: &ChildSetup, target_bytes: u64) -> Result<(Vec<RestartRow>, Verdict, u64), String> {
    let topic = "RecoveryTopic".to_string();
    let mut client = ClientConfig::new([setup.ns_addr.clone()]);
    client.request_timeout_ms = REQUEST_TIMEOUT_MS;
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let started = Instant::now();
    let mut broker = setup.spawn_broker()?;
    broker.wait_listening(setup.port, started)?;
    crate::workload_cmd::create_topics(std::slice::from_ref(&setup.ns_addr), std::slice::from_ref(&topic), args.queues)?;
    let first_seqs = vec![vec![0u64; args.in_flight as usize]; args.producers as usize];
    let mut probe = Probe::start(client.clone(), topic.clone(), args.producers * args.in_flight, args.message_bytes, acks.clone())?;
    let mut rows = Vec::new();

    // Row 1: SIGKILL under load.
    eprintln!("recovery: {} s of W2-shaped load ({} producers × {} in flight, batches of {}), then SIGKILL", args.load_secs, args.producers, args.in_flight, args.batch);
    let load = Load::start(&client, &topic, args, &first_seqs, &acks);
    let window = Duration::from_millis(ASYNC_FLUSH_LOSS_WINDOW_MS);
    std::thread::sleep(Duration::from_secs(args.load_secs) - window);
    // Everything acknowledged up to here is older than the window at the kill.
    let window_from = acked_len(&acks);
    std::thread::sleep(window);
    if let Some(status) = broker.exited() {
        return Err(format!("broker exited under load ({status})"));
    }
    broker.sigkill();
    // Each sender goes on from its next sequence: one is never reused.
    let (next_seqs, ran) = load.stop()?;
    let killed_acks = acked_len(&acks);
    if window_from == 0 {
        return Err(format!("nothing acknowledged in the first {} ms of load", args.load_secs * 1000 - ASYNC_FLUSH_LOSS_WINDOW_MS));
    }
    // The newest message old enough to be on disk whatever async flush's timing.
    let target = PullTarget::from(&ack_at(&acks, window_from - 1));
    let store_bytes = verify::dir_bytes(&setup.store);
    eprintln!("recovery: killed after {:.1} s, {killed_acks} acknowledged, store {:.2} GiB; restarting", ran.as_secs_f64(), store_bytes as f64 / GIB_BYTES as f64);
    let r = restart(setup, &probe, target)?;
    let label = format!("after SIGKILL following {} s of W2", args.load_secs);
    rows.push(row("sigkill", label, ran, 0..killed_acks, window_from, args.message_bytes, store_bytes, None, &r, target));
    eprintln!("{}", describe(&rows[0]));
    broker = r.broker;

    // Row 2: grow, clean stop, restart.
    if target_bytes > 0 {
        let from = acked_len(&acks);
        let have = verify::dir_bytes(&setup.store);
        let mut ran = Duration::ZERO;
        if have < target_bytes {
            check_disk(&setup.root, have, target_bytes)?;
            eprintln!("recovery: growing the store from {:.2} to {:.2} GiB with the same load", have as f64 / GIB_BYTES as f64, args.clean_store_gib);
            let load = Load::start(&client, &topic, args, &next_seqs, &acks);
            let grown = grow(&mut broker, &setup.store, have, target_bytes);
            // The senders stop before the broker does: every ack of this row precedes the stop.
            let (_, load_ran) = load.stop()?;
            grown?;
            ran = load_ran;
        }
        let stopped_acks = acked_len(&acks);
        let target = PullTarget::from(&ack_at(&acks, stopped_acks - 1));
        let store_bytes = verify::dir_bytes(&setup.store);
        let stop = broker.stop_clean(Duration::from_secs(CLEAN_STOP_WAIT_SECS))?;
        eprintln!("recovery: clean stop took {} ms with {:.2} GiB stored; restarting", stop.as_millis(), store_bytes as f64 / GIB_BYTES as f64);
        let r = restart(setup, &probe, target)?;
        let label = format!("after clean stop, {:.1} GiB store", store_bytes as f64 / GIB_BYTES as f64);
        // No window: a clean stop flushes everything acknowledged.
        rows.push(row("clean", label, ran, from..stopped_acks, stopped_acks, args.message_bytes, store_bytes, Some(millis(stop)), &r, target));
        eprintln!("{}", describe(&rows[rows.len() - 1]));
        broker = r.broker;
    }
    probe.stop()?;

    eprintln!("recovery: draining every queue to check what was acknowledged");
    let found = verify::run_on_glommio({
        let client = client.clone();
        let topic = topic.clone();
        move || async move { verify::drain(client, &topic).await }
    })?;
    drop(broker);
    let acks = std::mem::take(&mut *acks.lock().unwrap_or_else(|e| e.into_inner()));
    verify::write_ack_log(&setup.root.join("acks.csv"), &acks)?;
    let (verdict, lost_at) = verify::judge_detailed(&acks, &found);
    let mut allowed = 0u64;
    for row in &mut rows {
        for &i in lost_at.iter().filter(|&&i| row.acks.contains(&i)) {
            row.lost += 1;
            if i >= row.window_from {
                row.lost_within_flush_window += 1;
            }
        }
        allowed += row.lost_within_flush_window;
    }
    Ok((rows, verdict.clone(), verdict.lost - allowed))
}

/// Keeps the load running until the store holds `target_bytes` (allocated), bounded by
/// stalls and by `GROW_MIB_PER_SEC_MIN` on average.
fn grow(broker: &mut BrokerProcess, store: &Path, have: u64, target_bytes: u64) -> Result<(), String> {
    let started = Instant::now();
    let bound = Duration::from_secs_f64((target_bytes - have) as f64 / MIB_BYTES as f64 / GROW_MIB_PER_SEC_MIN) + Duration::from_secs(GROW_STALL_SECS_MAX);
    let (mut last_size, mut last_growth, mut last_report) = (have, Instant::now(), Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(GROW_POLL_MS));
        if let Some(status) = broker.exited() {
            return Err(format!("broker exited while the store grew ({status})"));
        }
        let size = verify::dir_bytes(store);
        if size >= target_bytes {
            return Ok(());
        }
        if size > last_size {
            (last_size, last_growth) = (size, Instant::now());
        }
        if last_growth.elapsed() > Duration::from_secs(GROW_STALL_SECS_MAX) {
            return Err(format!("the store stopped growing at {:.2} GiB for {GROW_STALL_SECS_MAX} s", size as f64 / GIB_BYTES as f64));
        }
        if started.elapsed() > bound {
            return Err(format!("the store grew slower than {GROW_MIB_PER_SEC_MIN} MiB/s on average ({:.2} GiB after {} s)", size as f64 / GIB_BYTES as f64, started.elapsed().as_secs()));
        }
        if last_report.elapsed() >= Duration::from_secs(GROW_REPORT_SECS) {
            last_report = Instant::now();
            eprintln!("recovery:   store {:.2} GiB of {:.2}", size as f64 / GIB_BYTES as f64, target_bytes as f64 / GIB_BYTES as f64);
        }
    }
}

fn target_verdict(ms: u64, target_ms: u64) -> &'static str {
    if ms <= target_ms {
        "met"
    } else {
        "MISSED"
    }
}

fn rescanned_cell(log: &BrokerLogFacts) -> String {
    match log.rescanned_bytes {
        Some(b) => format!("{:.1}", b as f64 / MIB_BYTES as f64),
        None if log.clean_shards > 0 => "0 (clean start)".into(),
        None => "not logged".into(),
    }
}

fn lost_cell(r: &RestartRow) -> String {
    let beyond = r.lost - r.lost_within_flush_window;
    match (r.lost, beyond) {
        (0, _) => "0".into(),
        (n, 0) => format!("{n} (all acked in the last {ASYNC_FLUSH_LOSS_WINDOW_MS} ms before the kill: async flush's window)"),
        (n, b) => format!("{n} ({b} OUTSIDE async flush's window)"),
    }
}

/// The "Recovery" table and its notes (the suite's section and the command's summary).
pub fn markdown(r: &RecoveryReport) -> String {
    let p = &r.params;
    let mut out = format!(
        "Async flush, {} shard(s), {} MiB segments; load: {} B bodies, {} producers × {} in flight, batches of {}, unthrottled. Times from the restart's spawn.\n\n",
        p.shards, p.segment_mib, p.message_bytes, p.producers, p.in_flight, p.batch
    );
    out.push_str("| Row | store GiB | re-scanned MiB | port open ms | first ack ms | first pull ms | acknowledged | lost |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for row in &r.rows {
        let rescanned = rescanned_cell(&row.broker_log);
        let _ = writeln!(
            out,
            "| {} | {:.2} | {rescanned} | {} | {} | {} | {} | {} |",
            row.label,
            row.store_bytes as f64 / GIB_BYTES as f64,
            row.port_open_ms,
            row.first_ack_ms,
            row.first_pull_ms,
            row.acked,
            lost_cell(row)
        );
    }
    out.push('\n');
    for row in &r.rows {
        let _ = writeln!(
            out,
            "- {}: target ≤ {FIRST_ACK_TARGET_MS} ms to first ack: {}; ≤ {FIRST_PULL_TARGET_MS} ms to first pull: {} (quoted, not asserted). {}{}{}.",
            row.label,
            target_verdict(row.first_ack_ms, FIRST_ACK_TARGET_MS),
            target_verdict(row.first_pull_ms, FIRST_PULL_TARGET_MS),
            if row.load_secs > 0.0 {
                format!("Load {:.0} msg/s ({:.0} MiB/s) for {:.1} s", row.load_msgs_per_sec, row.load_mib_per_sec, row.load_secs)
            } else {
                "No load: the store was that large already".to_string()
            },
            row.stop_ms.map(|ms| format!("; clean stop took {ms} ms")).unwrap_or_default(),
            row.broker_log.store_open_ms.map(|ms| format!("; the broker's own store-open time {ms} ms")).unwrap_or_default(),
        );
    }
    let v = &r.verdict;
    let _ = writeln!(
        out,
        "- Check of every acknowledged message: acked {}, found {}, lost {} ({} beyond async flush's {ASYNC_FLUSH_LOSS_WINDOW_MS} ms window), duplicated {}, reordered {}, misplaced {}, corrupted {} — {}.",
        v.acked,
        v.found,
        v.lost,
        r.lost_beyond_flush_window,
        v.duplicated,
        v.reordered,
        v.misplaced,
        v.corrupted,
        if r.ok() { "passed" } else { "FAILED" }
    );
    // Examples only when the check failed: a passing run's examples are the losses
    // async flush allows.
    if !r.ok() {
        for e in &v.examples {
            let _ = writeln!(out, "  - {e}");
        }
    }
    out
}

/// A short human summary: the machine line and the table.
pub fn summary(r: &RecoveryReport) -> String {
    let m = &r.machine;
    format!(
        "# RingMQ recovery ({})\n\n- Machine: {} x {}, kernel {}; store on {} ({})\n- Commit: {} ({} uncommitted paths)\n\n{}",
        r.started_utc,
        m.cpu_count,
        m.cpu_model,
        m.kernel,
        m.bench_dir,
        m.bench_fs,
        m.git_commit,
        m.git_dirty_paths,
        markdown(r)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recovery_lines_are_read_with_or_without_colours() {
        let plain = "2025-01-01T00:00:00Z  INFO ringmq_broker::store::engine::open: recovered after an unclean stop shard=0 end=5242880 scanned_from=1048576 records=3000\n\
                     2025-01-01T00:00:00Z  INFO ringmq_broker::shard: store open shard=0 unclean=true end=5242880 records=3000 recovery_ms=42\n";
        assert_eq!(parse_broker_log(plain), BrokerLogFacts { unclean_shards: 1, clean_shards: 0, rescanned_bytes: Some(4 * 1048576), store_open_ms: Some(42) });
        let coloured = "\u{1b}[2m2025\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m recovered after an unclean stop \u{1b}[3mshard\u{1b}[0m\u{1b}[2m=\u{1b}[0m1 \u{1b}[3mend\u{1b}[0m\u{1b}[2m=\u{1b}[0m72057594037927936300 \u{1b}[3mscanned_from\u{1b}[0m\u{1b}[2m=\u{1b}[0m72057594037927936100";
        // Out of u64 range: not a number, so not counted.
        assert_eq!(parse_broker_log(coloured).rescanned_bytes, None);
        let shard1 = format!("recovered after an unclean stop \u{1b}[3mend\u{1b}[0m\u{1b}[2m=\u{1b}[0m{} \u{1b}[3mscanned_from\u{1b}[0m\u{1b}[2m=\u{1b}[0m{}", (1u64 << 56) + 300, (1u64 << 56) + 100);
        assert_eq!(parse_broker_log(&format!("{plain}{shard1}\n")).rescanned_bytes, Some(4 * 1048576 + 200));
        assert_eq!(parse_broker_log(&format!("{plain}{shard1}\n")).unclean_shards, 2);
        // A clean start logs no recovery line.
        let clean = parse_broker_log("INFO store open shard=0 unclean=false recovery_ms=7");
        assert_eq!((clean.rescanned_bytes, clean.clean_shards, clean.store_open_ms), (None, 1, Some(7)));
        assert_eq!(rescanned_cell(&clean), "0 (clean start)");
    }

    #[test]
    fn growth_is_refused_without_the_headroom() {
        let gib = GIB_BYTES;
        assert!(disk_shortfall(26 * gib, 0, 20 * gib).is_none());
        let why = disk_shortfall(24 * gib, 0, 20 * gib).expect("short");
        assert!(why.contains("25.0 GiB free"), "{why}");
        // What the store already holds need not be free again.
        assert!(disk_shortfall(10 * gib, 15 * gib, 20 * gib).is_none());
        assert!(disk_shortfall(5 * gib, 30 * gib, 20 * gib).is_none());
    }

    #[test]
    fn arguments_are_bounded() {
        assert!(validate(&RecoveryArgs::default()).is_ok());
        assert!(validate(&RecoveryArgs { load_secs: 1, ..Default::default() }).is_err());
        assert!(validate(&RecoveryArgs { clean_store_gib: -1.0, ..Default::default() }).is_err());
        assert!(validate(&RecoveryArgs { clean_store_gib: f64::NAN, ..Default::default() }).is_err());
        assert!(validate(&RecoveryArgs { batch: 8192, ..Default::default() }).is_err());
    }
}
