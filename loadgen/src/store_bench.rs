//! The store benchmark: appends records on one shard of the RingMQ store (one glommio
//! executor, pinned to one CPU by default, running the production flusher tasks) and measures throughput,
//! latency and group-commit batching.
//!
//! - Sync flush, N in flight: N tasks each loop `put` → `wait_durable`; the latency is
//!   append-to-durable (before `put` to the covering fdatasync's wake-up).
//! - Async flush: one producer loops `put` (acknowledged when `put` returns; on
//!   `Busy` it retries the same record after the next flush), and an observer task
//!   records time-to-durable (before `put` to the covering flush). Latencies are
//!   sampled on one record in `ASYNC_LATENCY_SAMPLE_EVERY`; throughput counts all.
//!
//! Only operations completing inside the measured window (after `warmup_secs`) count;
//! the store's flush counters are sampled at the window's edges. After the window the
//! run drains (`flush_all`), reads back a sample of records, closes the store and
//! reopens it to check recovery sees exactly what was written.
//!
//! Each record's body starts with its sequence number (u64 LE), which must equal the
//! queue offset the store assigns (one queue, puts are synchronous).

use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use ringmq_broker::store::config::{FlushMode, Preallocate, StoreConfig};
use ringmq_broker::store::engine::{open_store, MessageToStore, ShardId, Store, StoreStats};
use ringmq_broker::store::error::StoreError;
use ringmq_broker::store::flusher::spawn_store_tasks;
use ringmq_broker::store::io::{dma::DmaDisk, SystemClock};
use ringmq_client::message::stored::StoredMessageView;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type BenchStore = Store<DmaDisk, SystemClock>;

pub const TOPIC: &str = "BenchTopic";
pub const QUEUE_ID: i32 = 0;
/// RocketMQ properties: TAGS=bench (NAME_VALUE_SEPARATOR \u1, PROPERTY_SEPARATOR \u2).
pub const PROPERTIES: &str = "TAGS\u{1}bench\u{2}";
/// Latencies above this are clamped (HDR histogram bound), in nanoseconds: 60 s.
const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// Async records whose time-to-durable is tracked at once (beyond: not sampled). The
/// store's `dirty_bytes_max` (64 MiB, ~58k records of 1 KiB) keeps it far below this.
const PENDING_DURABLE_MAX: usize = 1 << 20;
/// How long a `Busy` producer waits for the next flush before trying again anyway.
const BUSY_WAIT_MS_MAX: u64 = 10;
/// Records read back after each run.
const VERIFY_SAMPLES: u64 = 64;
/// Errors kept per run (the first ones; the count is kept in full).
const ERRORS_KEPT_MAX: usize = 8;
/// Bound on the drain after the window (`flush_all`) and on joining the workers.
const DRAIN_TIMEOUT_SECS: u64 = 60;
/// Watchdog: a run may take this much longer than warm-up + window before `run` gives
/// up on it (drain, read-back, close, reopen, and the executor's own bounds).
const RUN_OVERTIME_SECS_MAX: u64 = 180;
/// Bound on the reopen (recovery) after each run. Recovery here intermittently stalls
/// for good (executor asleep in io_uring_enter with reads outstanding; a SIGSTOP/SIGCONT
/// of the process lets it finish), so the run records an error and goes on.
const REOPEN_TIMEOUT_SECS: u64 = 30;
/// Records between refreshes of a producer's born timestamp.
const BORN_TIMESTAMP_REFRESH_PUTS: u64 = 1024;
/// Async: one record in this many has its ack and durable latency recorded (two
/// clock reads per record would be a visible share of a ~1.5 µs append). Throughput
/// counts every record.
const ASYNC_LATENCY_SAMPLE_EVERY: u64 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Sync,
    /// Sync flush with write-through (O_DSYNC) segments: one IO per group commit.
    SyncDsync,
    Async,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::SyncDsync => "sync-dsync",
            Mode::Async => "async",
        }
    }
    fn flush_mode(self) -> FlushMode {
        match self {
            Mode::Sync | Mode::SyncDsync => FlushMode::Sync,
            Mode::Async => FlushMode::Async,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub mode: Mode,
    /// Appends in flight (sync); 1 producer for async.
    pub in_flight: usize,
    pub duration_secs: u64,
    pub warmup_secs: u64,
    pub message_bytes: usize,
    pub segment_bytes: u64,
    pub preempt_us: u64,
    /// CPU the shard's executor is pinned to; None: unpinned (the kernel's io-wq
    /// workers that run fdatasync inherit the executor's affinity).
    pub pin_cpu: Option<usize>,
    /// glommio `spin_before_park` in microseconds (0: park at once, glommio's default).
    pub spin_before_park_us: u64,
    pub verify: bool,
    /// Prime glommio's per-thread iopoll probe with a non-empty file before the store
    /// opens anything (see `prime_iopoll_probe`).
    pub iopoll_workaround: bool,
}

/// Latency percentiles in microseconds (recorded in nanoseconds).
#[derive(Debug, Clone, Serialize)]
pub struct LatencyUs {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl LatencyUs {
    fn of(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencyUs {
            count: h.len(),
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// The store settings the run used.
#[derive(Debug, Clone, Serialize)]
pub struct StoreSettings {
    pub flush_mode: String,
    pub preallocate: String,
    pub segment_bytes: u64,
    pub flush_interval_ms: u64,
    pub flush_min_bytes: u64,
    pub dirty_bytes_max: u64,
    pub tail_cache_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyResult {
    /// Records read back with `get_messages` (spread over the whole queue).
    pub samples_read: u64,
    pub samples_ok: u64,
    /// Reopen after `close`: whether recovery saw an unclean stop, its end offset
    /// against the write offset at close, and the queue's max offset against the
    /// records put.
    pub reopen_unclean: bool,
    pub reopen_end_offset: u64,
    pub write_offset_at_close: u64,
    pub reopen_queue_max_offset: u64,
    pub records_put_total: u64,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub mode: String,
    pub in_flight: usize,
    pub measured_secs: f64,
    /// Acknowledged records in the window (sync: durable; async: `put` returned).
    pub records: u64,
    pub message_bytes: usize,
    /// Stored record size (header + topic + properties + body).
    pub stored_record_bytes: u64,
    /// MiB = 2^20 bytes.
    pub message_mib_per_s: f64,
    pub stored_mib_per_s: f64,
    pub records_per_s: f64,
    /// Sync: append-to-durable. Async: append-to-ack (`put` returned, including
    /// retries after `Busy`).
    pub ack_latency: LatencyUs,
    /// Async only: append-to-durable (the covering flush finished).
    pub durable_latency: Option<LatencyUs>,
    /// Store counters over the window (`store.stats()` deltas).
    pub flushes: u64,
    /// The store's `flushed_bytes` (each flush counts from the block holding the
    /// previous end: the rewritten partial block is included).
    pub flushed_bytes: u64,
    pub records_put_in_window: u64,
    pub flushes_per_s: f64,
    /// records_put_in_window / flushes: records per fdatasync.
    pub records_per_flush: f64,
    pub flushed_bytes_per_flush: f64,
    /// New stored bytes per flush (records_put_in_window × stored size / flushes).
    pub stored_bytes_per_flush: f64,
    /// `put` refused with `Busy` (async: the flusher is behind by `dirty_bytes_max`).
    pub busy_rejections: u64,
    pub busy_wait_ms: f64,
    /// Records acknowledged during the warm-up (not counted).
    pub warmup_records: u64,
    /// Async durability samples dropped (pending queue full).
    pub durable_unsampled: u64,
    /// After the window: `flush_all` until everything appended is durable.
    pub drain_ms: f64,
    pub close_ms: f64,
    /// Reopen after close (recovery of a cleanly closed store), when verifying.
    pub reopen_ms: f64,
    /// CommitLog segment files at the end of the window (each pre-zeroed).
    pub segments_created: u64,
    pub store: StoreSettings,
    pub verify: Option<VerifyResult>,
    pub errors_total: u64,
    pub errors: Vec<String>,
}

impl RunResult {
    pub fn label(&self) -> String {
        match self.mode.as_str() {
            "sync" => format!("RingMQ sync, {} in flight", self.in_flight),
            "sync-dsync" => format!("RingMQ sync O_DSYNC, {} in flight", self.in_flight),
            _ => "RingMQ async".to_string(),
        }
    }

    pub fn one_line(&self) -> String {
        format!(
            "{:.1} MiB/s msg ({:.1} stored), {:.0} rec/s, ack p50/p99/p99.9 {:.1}/{:.1}/{:.1} us, {:.1} rec/flush, {:.0} flushes/s, busy {}, errors {}",
            self.message_mib_per_s,
            self.stored_mib_per_s,
            self.records_per_s,
            self.ack_latency.p50_us,
            self.ack_latency.p99_us,
            self.ack_latency.p999_us,
            self.records_per_flush,
            self.flushes_per_s,
            self.busy_rejections,
            self.errors_total
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Warmup,
    Measure,
    Done,
}

/// State shared by the run's tasks (one executor thread: `Rc<RefCell<_>>`).
struct Shared {
    phase: Cell<Phase>,
    ack_ns: RefCell<Histogram<u64>>,
    durable_ns: RefCell<Histogram<u64>>,
    records: Cell<u64>,
    warmup_records: Cell<u64>,
    stored_record_bytes: Cell<u64>,
    /// Sequence number of the next record (= its expected queue offset).
    next_seq: Cell<u64>,
    busy_rejections: Cell<u64>,
    busy_wait_ns: Cell<u64>,
    /// Async: (durable ticket, put start, counted) of records not yet durable.
    pending: RefCell<VecDeque<(u64, Instant, bool)>>,
    durable_unsampled: Cell<u64>,
    producers_done: Cell<bool>,
    errors_total: Cell<u64>,
    errors: RefCell<Vec<String>>,
}

impl Shared {
    fn new() -> Self {
        let hist = || Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid histogram bounds");
        Shared {
            phase: Cell::new(Phase::Warmup),
            ack_ns: RefCell::new(hist()),
            durable_ns: RefCell::new(hist()),
            records: Cell::new(0),
            warmup_records: Cell::new(0),
            stored_record_bytes: Cell::new(0),
            next_seq: Cell::new(0),
            busy_rejections: Cell::new(0),
            busy_wait_ns: Cell::new(0),
            pending: RefCell::new(VecDeque::new()),
            durable_unsampled: Cell::new(0),
            producers_done: Cell::new(false),
            errors_total: Cell::new(0),
            errors: RefCell::new(Vec::new()),
        }
    }

    fn error(&self, e: String) {
        self.errors_total.set(self.errors_total.get() + 1);
        let mut errors = self.errors.borrow_mut();
        if errors.len() < ERRORS_KEPT_MAX {
            errors.push(e);
        }
    }

    /// Counts an acknowledged record whose latency is not sampled.
    fn count_unsampled(&self, phase: Phase, stored_bytes: u32) {
        match phase {
            Phase::Measure => {
                self.records.set(self.records.get() + 1);
                self.stored_record_bytes.set(stored_bytes as u64);
            }
            Phase::Warmup => self.warmup_records.set(self.warmup_records.get() + 1),
            Phase::Done => {}
        }
    }

    fn count_ack(&self, started: Instant, stored_bytes: u32) {
        match self.phase.get() {
            Phase::Measure => {
                self.ack_ns.borrow_mut().saturating_record(started.elapsed().as_nanos() as u64);
                self.records.set(self.records.get() + 1);
                self.stored_record_bytes.set(stored_bytes as u64);
            }
            Phase::Warmup => self.warmup_records.set(self.warmup_records.get() + 1),
            Phase::Done => {}
        }
    }
}

fn hosts() -> (SocketAddr, SocketAddr) {
    ("127.0.0.1:50000".parse().expect("literal address"), "127.0.0.1:10911".parse().expect("literal address"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The body of record `seq`: its sequence number, then a fixed pattern.
fn fill_body(body: &mut [u8], seq: u64) {
    let n = body.len().min(8);
    body[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

fn body_pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8) ^ 0x5a).collect()
}

/// Per-task message fields that do not change per record (parsing addresses and
/// reading the clock per record would be bench overhead, not store cost).
struct Producer {
    born_host: SocketAddr,
    store_host: SocketAddr,
    born_timestamp_ms: i64,
    /// Puts since the born timestamp was last read.
    puts: u64,
}

impl Producer {
    fn new() -> Self {
        let (born_host, store_host) = hosts();
        Producer { born_host, store_host, born_timestamp_ms: now_ms(), puts: 0 }
    }
}

/// Appends one record, retrying after `Busy`; returns the ticket and stored size.
async fn put_one(store: &BenchStore, shared: &Shared, p: &mut Producer, body: &mut [u8]) -> Result<(u64, u32), StoreError> {
    p.puts += 1;
    if p.puts >= BORN_TIMESTAMP_REFRESH_PUTS {
        p.puts = 0;
        p.born_timestamp_ms = now_ms();
    }
    loop {
        let seq = shared.next_seq.get();
        fill_body(body, seq);
        let msg = MessageToStore {
            topic: TOPIC,
            queue_id: QUEUE_ID,
            flag: 0,
            body,
            properties: PROPERTIES,
            sys_flag: 0,
            born_timestamp_ms: p.born_timestamp_ms,
            born_host: p.born_host,
            store_host: p.store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        match store.put(&msg) {
            Ok(r) => {
                shared.next_seq.set(seq + 1);
                if r.queue_offset != seq {
                    shared.error(format!("put #{seq} got queue offset {} (expected {seq})", r.queue_offset));
                }
                return Ok((r.durable_ticket, r.size_bytes));
            }
            Err(StoreError::Busy { .. }) => {
                shared.busy_rejections.set(shared.busy_rejections.get() + 1);
                let t = Instant::now();
                // Resolves when the next flush finishes (at least one byte is dirty).
                let next = store.flushed_offset() + 1;
                futures_lite::future::or(
                    async {
                        let _ = store.wait_durable(next).await;
                    },
                    glommio::timer::sleep(Duration::from_millis(BUSY_WAIT_MS_MAX)),
                )
                .await;
                shared.busy_wait_ns.set(shared.busy_wait_ns.get() + t.elapsed().as_nanos() as u64);
            }
            Err(e) => return Err(e),
        }
    }
}

async fn sync_worker(store: BenchStore, shared: Rc<Shared>, message_bytes: usize) {
    let mut body = body_pattern(message_bytes);
    let mut producer = Producer::new();
    while shared.phase.get() != Phase::Done {
        let started = Instant::now();
        let result = async {
            let (ticket, size) = put_one(&store, &shared, &mut producer, &mut body).await?;
            store.wait_durable(ticket).await?;
            Ok::<u32, StoreError>(size)
        }
        .await;
        match result {
            Ok(size) => shared.count_ack(started, size),
            Err(e) => {
                shared.error(format!("sync worker: {e}"));
                return;
            }
        }
    }
}

async fn async_producer(store: BenchStore, shared: Rc<Shared>, message_bytes: usize) {
    let mut body = body_pattern(message_bytes);
    let mut producer = Producer::new();
    let mut until_sample = ASYNC_LATENCY_SAMPLE_EVERY;
    while shared.phase.get() != Phase::Done {
        until_sample -= 1;
        let sampled = until_sample == 0;
        if sampled {
            until_sample = ASYNC_LATENCY_SAMPLE_EVERY;
        }
        let started = if sampled { Some(Instant::now()) } else { None };
        match put_one(&store, &shared, &mut producer, &mut body).await {
            Ok((ticket, size)) => {
                let phase = shared.phase.get();
                match started {
                    Some(started) => {
                        shared.count_ack(started, size);
                        let mut pending = shared.pending.borrow_mut();
                        if pending.len() < PENDING_DURABLE_MAX {
                            pending.push_back((ticket, started, phase == Phase::Measure));
                        } else {
                            shared.durable_unsampled.set(shared.durable_unsampled.get() + 1);
                        }
                    }
                    None => shared.count_unsampled(phase, size),
                }
            }
            Err(e) => {
                shared.error(format!("async producer: {e}"));
                break;
            }
        }
        // Let the flusher run (the producer never parks otherwise); the executor
        // polls io_uring at each preemption tick (`--preempt-us`).
        glommio::yield_if_needed().await;
    }
    shared.producers_done.set(true);
}

/// Records each async record's time-to-durable: waits for the oldest pending record's
/// flush, then retires every record that flush covered.
async fn durable_observer(store: BenchStore, shared: Rc<Shared>) {
    loop {
        let front = shared.pending.borrow().front().copied();
        let Some((ticket, _, _)) = front else {
            if shared.producers_done.get() {
                return;
            }
            glommio::timer::sleep(Duration::from_micros(200)).await;
            continue;
        };
        if let Err(e) = store.wait_durable(ticket).await {
            shared.error(format!("durable observer: {e}"));
            return;
        }
        let now = Instant::now();
        let flushed = store.flushed_offset();
        let mut pending = shared.pending.borrow_mut();
        let mut hist = shared.durable_ns.borrow_mut();
        while let Some(&(t, started, counted)) = pending.front() {
            if t > flushed {
                break;
            }
            if counted {
                hist.saturating_record(now.saturating_duration_since(started).as_nanos() as u64);
            }
            pending.pop_front();
        }
    }
}

fn segment_files(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("commitlog")).map(|d| d.count() as u64).unwrap_or(0)
}

/// Reads back `VERIFY_SAMPLES` records spread over the queue; returns (read, ok).
async fn read_back(store: &BenchStore, shared: &Shared, records_total: u64, message_bytes: usize) -> (u64, u64) {
    let pattern = body_pattern(message_bytes);
    let (mut read, mut ok) = (0, 0);
    if records_total == 0 {
        return (0, 0);
    }
    let step = (records_total / VERIFY_SAMPLES).max(1);
    let mut offset = 0;
    while offset < records_total && read < VERIFY_SAMPLES {
        read += 1;
        match store.get_messages(TOPIC, QUEUE_ID, offset, 1, 1 << 20, &|_| true).await {
            Ok(got) if got.record_count == 1 => match StoredMessageView::parse_verified(&got.records) {
                Ok(view) => {
                    let mut want = pattern.clone();
                    fill_body(&mut want, offset);
                    if view.body() == &want[..] && view.queue_offset() == offset as i64 && view.topic_bytes() == TOPIC.as_bytes() {
                        ok += 1;
                    } else {
                        shared.error(format!("read-back: record at queue offset {offset} has the wrong body/offset/topic"));
                    }
                }
                Err(e) => shared.error(format!("read-back: record at queue offset {offset} does not parse: {e}")),
            },
            Ok(got) => shared.error(format!("read-back: queue offset {offset}: status {:?}, {} records", got.status, got.record_count)),
            Err(e) => shared.error(format!("read-back: queue offset {offset}: {e}")),
        }
        offset += step;
    }
    (read, ok)
}

fn settings(config: &StoreConfig) -> StoreSettings {
    StoreSettings {
        flush_mode: format!("{:?}", config.flush_mode),
        preallocate: format!("{:?}", config.preallocate),
        segment_bytes: config.segment_bytes,
        flush_interval_ms: config.flush_interval_ms,
        flush_min_bytes: config.flush_min_bytes,
        dirty_bytes_max: config.dirty_bytes_max,
        tail_cache_bytes: config.tail_cache_bytes,
    }
}

fn delta(a: StoreStats, b: StoreStats) -> StoreStats {
    StoreStats {
        flushes: b.flushes - a.flushes,
        flushed_bytes: b.flushed_bytes - a.flushed_bytes,
        records_put: b.records_put - a.records_put,
        read_errors: b.read_errors - a.read_errors,
        scrubbed_bytes: b.scrubbed_bytes - a.scrubbed_bytes,
        scrub_corrupt_records: b.scrub_corrupt_records - a.scrub_corrupt_records,
        disk_watermark_crossings: b.disk_watermark_crossings - a.disk_watermark_crossings,
        // Not deltas: the run's latencies and the last disk reading.
        flush_latency: b.flush_latency,
        disk_used_permille: b.disk_used_permille,
    }
}

/// Runs one store benchmark on a fresh executor thread (pinned to `pin_cpu`).
pub fn run(spec: &RunSpec, dir: &Path) -> Result<RunResult, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("clear {}: {e}", dir.display()))?;
    }
    let spec = spec.clone();
    let dir = dir.to_path_buf();
    let placement = match spec.pin_cpu {
        Some(cpu) => Placement::Fixed(cpu),
        None => Placement::Unbound,
    };
    let mut builder = LocalExecutorBuilder::new(placement).name("store-bench").preempt_timer(Duration::from_micros(spec.preempt_us));
    if spec.spin_before_park_us > 0 {
        builder = builder.spin_before_park(Duration::from_micros(spec.spin_before_park_us));
    }
    let deadline = Duration::from_secs(spec.warmup_secs + spec.duration_secs + RUN_OVERTIME_SECS_MAX);
    let stage = Arc::new(AtomicU8::new(Stage::Open as u8));
    let stage_in = stage.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let _detached = builder
        .spawn(move || async move {
            let result = run_on_executor(spec, dir, stage_in).await;
            let _ = tx.send(result);
        })
        .map_err(|e| format!("start the glommio executor: {e}"))?;
    match rx.recv_timeout(deadline) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "store run did not finish within {} s (stuck in stage `{}`); the executor thread is left behind",
            deadline.as_secs(),
            Stage::name(stage.load(Ordering::Relaxed))
        )),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err("store-bench executor thread failed (panic?)".into()),
    }
}

/// Where a run is, for the watchdog's error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Stage {
    Open = 0,
    Running = 1,
    JoinWorkers = 2,
    Drain = 3,
    ReadBack = 4,
    Close = 5,
    Reopen = 6,
}

impl Stage {
    fn name(v: u8) -> &'static str {
        match v {
            0 => "open",
            1 => "warm-up/window",
            2 => "join workers",
            3 => "drain (flush_all)",
            4 => "read-back",
            5 => "close",
            _ => "reopen",
        }
    }
}

/// On by default (`--no-iopoll-workaround` turns it off). glommio decides once per thread and device
/// whether DMA IO may use the io_uring poll ring by reading the first block of the first
/// `DmaFile` opened. The store's first file is its empty `abort` file, so the probe read
/// hits EOF and succeeds without reaching the device, and glommio caches "iopoll
/// supported" even on a device without poll queues (virtio-blk here). O_DIRECT reads
/// then fail with EOPNOTSUPP (the store reads through a buffered handle since e9e4392
/// for that reason) and DMA writes go to the poll ring. Opening a non-empty file first
/// makes the probe reach the device and cache the right answer. Without it, 3 of 4
/// full runs here stalled for good at the end of the async run (executor parked in
/// io_uring_enter with its timers unarmed); with it, none did.
async fn prime_iopoll_probe(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let path = dir.join(".iopoll-probe");
    std::fs::write(&path, vec![0xa5u8; 4096]).map_err(|e| format!("write {}: {e}", path.display()))?;
    std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| format!("sync {}: {e}", path.display()))?;
    let file = glommio::io::DmaFile::open(&path).await.map_err(|e| format!("dma_open {}: {e}", path.display()))?;
    let _ = file.close().await;
    std::fs::remove_file(&path).map_err(|e| format!("remove {}: {e}", path.display()))
}

async fn run_on_executor(spec: RunSpec, dir: PathBuf, stage: Arc<AtomicU8>) -> Result<RunResult, String> {
    let set_stage = |s: Stage| stage.store(s as u8, Ordering::Relaxed);
    let (store, config) = open_fresh_store(&spec, &dir).await?;
    let store_settings = settings(&config);
    let (stop, shared) = start_store_tasks(&store);
    let (workers, observer) = spawn_load(&spec, &store, &shared);

    set_stage(Stage::Running);
    let window = measure_window(&spec, &store, &shared, &dir).await;

    set_stage(Stage::JoinWorkers);
    join_workers(workers, &shared).await;
    set_stage(Stage::Drain);
    let drain_ms = drain(&store, &shared, observer).await;
    let records_put_total = check_put_count(&store, &shared);

    set_stage(Stage::ReadBack);
    let (samples_read, samples_ok) =
        if spec.verify { read_back(&store, &shared, records_put_total, spec.message_bytes).await } else { (0, 0) };
    let write_offset_at_close = store.write_offset();
    stop.set(true);
    set_stage(Stage::Close);
    let close_ms = close_store(store, &shared).await;

    let (verify, reopen_ms) = if spec.verify {
        set_stage(Stage::Reopen);
        verify_reopen(&dir, config, &shared, samples_read, samples_ok, write_offset_at_close, records_put_total).await
    } else {
        (None, 0.0)
    };
    Ok(run_result(&spec, &shared, window, After { drain_ms, close_ms, reopen_ms, verify }, store_settings))
}

/// Opens a fresh store with the mode's flush settings. Returns it with its config, which
/// the reopen uses again.
async fn open_fresh_store(spec: &RunSpec, dir: &Path) -> Result<(BenchStore, StoreConfig), String> {
    if spec.iopoll_workaround {
        prime_iopoll_probe(dir).await?;
    }
    // As the tuning profiles do: zeroed segments make sync flush's fdatasyncs cheaper;
    // fallocated ones spare async flush a second write of every byte.
    let preallocate = match spec.mode.flush_mode() {
        FlushMode::Sync => Preallocate::Zero,
        FlushMode::Async => Preallocate::Fallocate,
    };
    let write_through = Some(spec.mode == Mode::SyncDsync);
    let config = StoreConfig { segment_bytes: spec.segment_bytes, flush_mode: spec.mode.flush_mode(), preallocate, write_through, ..StoreConfig::default() };
    let (store, _report) = open_store(DmaDisk, SystemClock, dir.to_path_buf(), ShardId(0), config.clone())
        .await
        .map_err(|e| format!("open_store {}: {e}", dir.display()))?;
    Ok((store, config))
}

/// Starts the store's production flusher tasks, so the bench measures the flushing the
/// broker does; a fatal store error becomes an error of the run. Returns the tasks' stop
/// flag and the run's shared state.
fn start_store_tasks(store: &BenchStore) -> (Rc<Cell<bool>>, Rc<Shared>) {
    let stop = Rc::new(Cell::new(false));
    let shared = Rc::new(Shared::new());
    let fatal_shared = shared.clone();
    spawn_store_tasks(ringmq_broker::rt::Glommio::default(), store.clone(), stop.clone(), Rc::new(move |m: String| fatal_shared.error(format!("store fatal: {m}"))));
    (stop, shared)
}

/// Spawns the load: `in_flight` sync workers, or the async producer and its durable
/// observer. Returns the workers and the observer.
fn spawn_load(spec: &RunSpec, store: &BenchStore, shared: &Rc<Shared>) -> (Vec<glommio::Task<()>>, Option<glommio::Task<()>>) {
    let mut workers = Vec::new();
    let mut observer = None;
    match spec.mode {
        Mode::Sync | Mode::SyncDsync => {
            for _ in 0..spec.in_flight {
                workers.push(glommio::spawn_local(sync_worker(store.clone(), shared.clone(), spec.message_bytes)));
            }
        }
        Mode::Async => {
            workers.push(glommio::spawn_local(async_producer(store.clone(), shared.clone(), spec.message_bytes)));
            observer = Some(glommio::spawn_local(durable_observer(store.clone(), shared.clone())));
        }
    }
    (workers, observer)
}

/// What the measured window saw.
struct Window {
    measured: Duration,
    /// The store's counters over the window.
    window: StoreStats,
    segments_created: u64,
}

/// The warm-up, then the measured window: the phase decides which acknowledgements count,
/// and the store's counters are sampled at the window's edges.
async fn measure_window(spec: &RunSpec, store: &BenchStore, shared: &Shared, dir: &Path) -> Window {
    glommio::timer::sleep(Duration::from_secs(spec.warmup_secs)).await;
    let stats0 = store.stats();
    let t0 = Instant::now();
    shared.phase.set(Phase::Measure);
    glommio::timer::sleep(Duration::from_secs(spec.duration_secs)).await;
    shared.phase.set(Phase::Done);
    let measured = t0.elapsed();
    let window = delta(stats0, store.stats());
    let segments_created = segment_files(dir);
    Window { measured, window, segments_created }
}

/// Waits (bounded by `DRAIN_TIMEOUT_SECS`) for the workers, which stop at `Phase::Done`,
/// then tells the observer no more records come.
async fn join_workers(workers: Vec<glommio::Task<()>>, shared: &Shared) {
    let bound = Duration::from_secs(DRAIN_TIMEOUT_SECS);
    let joined = futures_lite::future::or(
        async {
            for w in workers {
                w.await;
            }
            true
        },
        async {
            glommio::timer::sleep(bound).await;
            false
        },
    )
    .await;
    if !joined {
        shared.error(format!("workers did not finish within {DRAIN_TIMEOUT_SECS} s after the window"));
    }
    shared.producers_done.set(true);
}

/// `flush_all` until everything appended is durable, then waits (bounded) for the async
/// observer to take the last durable times. Returns how long `flush_all` took (ms).
async fn drain(store: &BenchStore, shared: &Shared, observer: Option<glommio::Task<()>>) -> f64 {
    let bound = Duration::from_secs(DRAIN_TIMEOUT_SECS);
    let t_drain = Instant::now();
    if let Err(e) = store.flush_all().await {
        shared.error(format!("flush_all: {e}"));
    }
    let drain_ms = t_drain.elapsed().as_secs_f64() * 1e3;
    if let Some(obs) = observer {
        let done = futures_lite::future::or(
            async {
                obs.await;
                true
            },
            async {
                glommio::timer::sleep(bound).await;
                false
            },
        )
        .await;
        if !done {
            shared.error("durable observer did not finish after flush_all".into());
        }
    }
    drain_ms
}

/// The store's count of puts, an error unless it is the bench's own.
fn check_put_count(store: &BenchStore, shared: &Shared) -> u64 {
    let records_put_total = store.stats().records_put;
    if records_put_total != shared.next_seq.get() {
        shared.error(format!("store counted {records_put_total} puts, the bench {}", shared.next_seq.get()));
    }
    records_put_total
}

/// Closes the store and drops it, so what a reopen sees is a cleanly closed store.
/// Returns how long the close took (ms).
async fn close_store(store: BenchStore, shared: &Shared) -> f64 {
    let t_close = Instant::now();
    if let Err(e) = store.close().await {
        shared.error(format!("close: {e}"));
    }
    let close_ms = t_close.elapsed().as_secs_f64() * 1e3;
    drop(store);
    close_ms
}

/// Reopens the closed store (bounded: recovery can stall, see `REOPEN_TIMEOUT_SECS`) and
/// checks recovery sees exactly what was written and the read-back found it intact.
/// Returns the verdict (None when the reopen failed) and how long the reopen took (ms).
async fn verify_reopen(
    dir: &Path,
    config: StoreConfig,
    shared: &Shared,
    samples_read: u64,
    samples_ok: u64,
    write_offset_at_close: u64,
    records_put_total: u64,
) -> (Option<VerifyResult>, f64) {
    let mut verify = None;
    // Let the store's tasks see `stop` and end before the reopen.
    glommio::timer::sleep(Duration::from_millis(150)).await;
    let t_reopen = Instant::now();
    let reopen =
        futures_lite::future::or(async { Some(open_store(DmaDisk, SystemClock, dir.to_path_buf(), ShardId(0), config).await) }, async {
            glommio::timer::sleep(Duration::from_secs(REOPEN_TIMEOUT_SECS)).await;
            None
        })
        .await;
    let reopen_ms = t_reopen.elapsed().as_secs_f64() * 1e3;
    match reopen
        .unwrap_or_else(|| Err(StoreError::Failed(format!("reopen (open_store) did not finish within {REOPEN_TIMEOUT_SECS} s"))))
    {
        Ok((reopened, report)) => {
            let max = reopened.max_offset(TOPIC, QUEUE_ID);
            let ok = !report.unclean
                && report.end_offset == write_offset_at_close
                && max == records_put_total
                && samples_ok == samples_read
                && shared.errors_total.get() == 0;
            if report.end_offset != write_offset_at_close || max != records_put_total {
                shared.error(format!(
                    "reopen: end offset {} vs {} written, queue max offset {} vs {} records put",
                    report.end_offset, write_offset_at_close, max, records_put_total
                ));
            }
            verify = Some(VerifyResult {
                samples_read,
                samples_ok,
                reopen_unclean: report.unclean,
                reopen_end_offset: report.end_offset,
                write_offset_at_close,
                reopen_queue_max_offset: max,
                records_put_total,
                ok,
            });
            if let Err(e) = reopened.close().await {
                shared.error(format!("close after reopen: {e}"));
            }
        }
        Err(e) => shared.error(format!("reopen: {e}")),
    }
    (verify, reopen_ms)
}

/// What happened after the window.
struct After {
    drain_ms: f64,
    close_ms: f64,
    reopen_ms: f64,
    verify: Option<VerifyResult>,
}

/// The run's result: rates over the window and per flush, latencies, and every counter.
fn run_result(spec: &RunSpec, shared: &Shared, window: Window, after: After, store_settings: StoreSettings) -> RunResult {
    let Window { measured, window, segments_created } = window;
    let After { drain_ms, close_ms, reopen_ms, verify } = after;
    let secs = measured.as_secs_f64();
    let records = shared.records.get();
    let stored_record_bytes = shared.stored_record_bytes.get();
    let mib = (1u64 << 20) as f64;
    let per_flush = |x: f64| if window.flushes > 0 { x / window.flushes as f64 } else { 0.0 };
    let durable_latency = match spec.mode {
        Mode::Async => Some(LatencyUs::of(&shared.durable_ns.borrow())),
        Mode::Sync | Mode::SyncDsync => None,
    };
    let ack_latency = LatencyUs::of(&shared.ack_ns.borrow());
    let errors = shared.errors.borrow().clone();
    RunResult {
        mode: spec.mode.name().to_string(),
        in_flight: spec.in_flight,
        measured_secs: secs,
        records,
        message_bytes: spec.message_bytes,
        stored_record_bytes,
        message_mib_per_s: records as f64 * spec.message_bytes as f64 / mib / secs,
        stored_mib_per_s: records as f64 * stored_record_bytes as f64 / mib / secs,
        records_per_s: records as f64 / secs,
        ack_latency,
        durable_latency,
        flushes: window.flushes,
        flushed_bytes: window.flushed_bytes,
        records_put_in_window: window.records_put,
        flushes_per_s: window.flushes as f64 / secs,
        records_per_flush: per_flush(window.records_put as f64),
        flushed_bytes_per_flush: per_flush(window.flushed_bytes as f64),
        stored_bytes_per_flush: per_flush(window.records_put as f64 * stored_record_bytes as f64),
        busy_rejections: shared.busy_rejections.get(),
        busy_wait_ms: shared.busy_wait_ns.get() as f64 / 1e6,
        warmup_records: shared.warmup_records.get(),
        durable_unsampled: shared.durable_unsampled.get(),
        drain_ms,
        close_ms,
        reopen_ms,
        segments_created,
        store: store_settings,
        verify,
        errors_total: shared.errors_total.get(),
        errors,
    }
}
