//! The produce / consume / end-to-end workload engine, over the RingMQ client: producer
//! threads and consumer threads, each one glommio executor with one client (the
//! client's thread-per-core model), and a reporter on the calling thread that closes an
//! interval every `interval_ms`, prints RocketMQ's benchmark lines and a progress bar,
//! and folds intervals into a `RunRecord`.
//!
//! Latency: a send is timed from its *scheduled* time when a rate is set (open loop:
//! a stalled system is charged for the sends it delayed, correcting coordinated
//! omission) and from its start otherwise. End-to-end latency is the receive time minus
//! the send time written in the first 8 bytes of the body (µs since the Unix epoch; one
//! machine, one clock), so it is exact to the microsecond, unlike the born timestamp
//! (ms) that RocketMQ's B2C figure uses — both are reported.
//!
//! Transactional runs (`transactional`): each send is a half send, then
//! END_TRANSACTION sent as a request (so the send latency ends when the broker has
//! committed, not when a oneway frame was written), the same wire sequence as
//! `TransactionProducer::send_message_in_transaction` in `EndTransactionMode::Request`.
//! Commit-to-visible latency uses the commit-time table of `txn.rs`.
//!
//! Invariants:
//! - each worker thread owns its accumulator behind a `Mutex` that only it and the
//!   reporter (once per interval) take; no other state is shared between threads, but
//!   in transactional runs the bounded commit-time table (`txn::CommitTimes`, producers
//!   insert, consumers take) and the check counter (listeners add, the reporter takes);
//! - at most `in_flight_per_producer` sends (or batches) are outstanding per producer;
//! - consumers are bounded by the client's flow control (`queue_messages_max`);
//! - every wait is bounded: start-up by `START_TIMEOUT_SECS`, the final drain by
//!   `drain_secs`.

use crate::record::{new_latency_histogram, record_us, Durability, IntervalStats, RunRecord, TxnStats, Workload};
use crate::txn::{CommitTimes, OUTCOME_COMMIT, OUTCOME_PROPERTY, OUTCOME_ROLLBACK};
use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use ringmq_client::consumer::{ConsumeFrom, ConsumeStatus, PushConsumer, PushConsumerConfig};
use ringmq_client::producer::{Producer, ProducerConfig};
use ringmq_client::transaction::{EndTransactionMode, LocalTransactionState, TransactionProducer};
use ringmq_client::{ClientConfig, ClientError, Message, MessageExt};
use std::cell::Cell;
use std::io::Write as _;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const START_TIMEOUT_SECS: u64 = 30;
/// Transactional runs with rollbacks: how long consumers keep listening after the drain.
pub const ROLLBACK_GRACE_MS: u64 = 1_000;
/// Bytes at the start of every body holding the send time (µs since the epoch).
pub const TIMESTAMP_BYTES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Produce,
    Consume,
    E2e,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Produce => "produce",
            Role::Consume => "consume",
            Role::E2e => "e2e",
        }
    }

    fn produces(self) -> bool {
        self != Role::Consume
    }

    fn consumes(self) -> bool {
        self != Role::Produce
    }
}

/// Message sizes: one fixed size or a weighted choice (`256:0.5,1024:0.4,16384:0.1`).
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDist {
    /// (size in bytes, cumulative weight), weights normalised to end at 1.0.
    choices: Vec<(usize, f64)>,
}

impl SizeDist {
    pub fn fixed(bytes: usize) -> Self {
        Self { choices: vec![(bytes.max(TIMESTAMP_BYTES), 1.0)] }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        if let Ok(n) = text.trim().parse::<usize>() {
            return Ok(Self::fixed(n));
        }
        let mut raw = Vec::new();
        for part in text.split(',') {
            let (size, weight) = part.split_once(':').ok_or_else(|| format!("`{part}`: expected SIZE:WEIGHT"))?;
            let size: usize = size.trim().parse().map_err(|_| format!("`{size}` is not a size in bytes"))?;
            let weight: f64 = weight.trim().parse().map_err(|_| format!("`{weight}` is not a weight"))?;
            if !(weight > 0.0 && weight.is_finite()) {
                return Err(format!("weight {weight} must be > 0"));
            }
            raw.push((size.max(TIMESTAMP_BYTES), weight));
        }
        let total: f64 = raw.iter().map(|(_, w)| w).sum();
        let mut acc = 0.0;
        let choices = raw
            .into_iter()
            .map(|(s, w)| {
                acc += w / total;
                (s, acc)
            })
            .collect::<Vec<_>>();
        if choices.is_empty() {
            return Err("empty size distribution".into());
        }
        Ok(Self { choices })
    }

    /// The size for a uniform draw `u` in [0, 1).
    pub fn pick(&self, u: f64) -> usize {
        self.choices.iter().find(|(_, c)| u < *c).unwrap_or(self.choices.last().expect("non-empty")).0
    }

    pub fn max_bytes(&self) -> usize {
        self.choices.iter().map(|(s, _)| *s).max().unwrap_or(TIMESTAMP_BYTES)
    }

    /// Weighted mean size, for the workload label.
    pub fn mean_bytes(&self) -> usize {
        let mut prev = 0.0;
        let mut mean = 0.0;
        for (s, c) in &self.choices {
            mean += *s as f64 * (c - prev);
            prev = *c;
        }
        mean.round() as usize
    }
}

#[derive(Debug, Clone)]
pub struct EngineSpec {
    pub role: Role,
    /// The ACL account every request is signed with (`--access-key`), if any.
    pub credentials: Option<ringmq_client::remoting::acl::Credentials>,
    /// TLS on every connection (`--tls`; `enable` false: plain).
    pub tls: ringmq_client::net::tls::TlsClientSettings,
    /// Messages a consumer asks for per pull (1..=1024; the broker also caps by bytes).
    pub pull_batch_size: i32,
    pub workload: Workload,
    pub sizes: SizeDist,
    pub namesrv_addrs: Vec<String>,
    /// Topic names (one per `workload.topics`).
    pub topics: Vec<String>,
    pub tags: Vec<String>,
    pub keys: bool,
    /// Every message sent with this delay level.
    pub delay_level: Option<u32>,
    /// Every message sent as a timer due this many seconds later.
    pub timer_delay_secs: Option<u64>,
    /// Its delay: subtracted from end-to-end latency, which is then lateness.
    pub delay_ms: u64,
    pub group: String,
    pub consume_from_first: bool,
    /// Consume role: stop once this many messages arrived (a catch-up read).
    pub consume_target_messages: Option<u64>,
    /// Produce role: stop once this many messages were acknowledged (a preload).
    pub produce_target_messages: Option<u64>,
    pub drain_secs: u64,
    pub interval_ms: u64,
    pub send_timeout_ms: u64,
    pub progress: bool,
    /// Print RocketMQ-format lines per interval.
    pub lines: bool,
    /// A slow consumer: the listener spends this long per message.
    pub consume_delay_us: u64,
    /// Watch this process's resident memory (the broker's, when it is a child).
    pub rss_pid: Option<u32>,
    /// Keep closing intervals while the consumers drain after the producers stopped.
    pub record_drain_intervals: bool,
    /// Transactional sends (half + END_TRANSACTION), rolling back this percentage of
    /// them; None: plain sends.
    pub transactional: Option<u32>,
}

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Debug)]
struct Acc {
    sent: u64,
    sent_bytes: u64,
    send_failed: u64,
    response_failed: u64,
    received: u64,
    received_bytes: u64,
    send_us: Histogram<u64>,
    e2e_us: Histogram<u64>,
    b2c_ms_sum: u64,
    b2c_ms_max: u64,
    s2c_ms_sum: u64,
    s2c_ms_max: u64,
    last_error: Option<String>,
    txn: TxnStats,
}

impl Acc {
    fn new() -> Self {
        Self {
            sent: 0,
            sent_bytes: 0,
            send_failed: 0,
            response_failed: 0,
            received: 0,
            received_bytes: 0,
            send_us: new_latency_histogram(),
            e2e_us: new_latency_histogram(),
            b2c_ms_sum: 0,
            b2c_ms_max: 0,
            s2c_ms_sum: 0,
            s2c_ms_max: 0,
            last_error: None,
            txn: TxnStats::new(0),
        }
    }

    fn merge(&mut self, o: &Acc) {
        self.sent += o.sent;
        self.sent_bytes += o.sent_bytes;
        self.send_failed += o.send_failed;
        self.response_failed += o.response_failed;
        self.received += o.received;
        self.received_bytes += o.received_bytes;
        let _ = self.send_us.add(&o.send_us);
        let _ = self.e2e_us.add(&o.e2e_us);
        self.b2c_ms_sum += o.b2c_ms_sum;
        self.b2c_ms_max = self.b2c_ms_max.max(o.b2c_ms_max);
        self.s2c_ms_sum += o.s2c_ms_sum;
        self.s2c_ms_max = self.s2c_ms_max.max(o.s2c_ms_max);
        if o.last_error.is_some() {
            self.last_error.clone_from(&o.last_error);
        }
        self.txn.add(&o.txn);
    }
}

type SharedAcc = Arc<Mutex<Acc>>;

fn lock(acc: &SharedAcc) -> std::sync::MutexGuard<'_, Acc> {
    acc.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn now_epoch_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// A tiny deterministic generator (xorshift64*), one per sending task.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Open-loop schedule shared by one thread's sending tasks.
struct Pacer {
    start: Instant,
    period: Duration,
    next: Cell<u64>,
}

impl Pacer {
    fn next_slot(&self) -> Instant {
        let k = self.next.get();
        self.next.set(k + 1);
        self.start + self.period.mul_f64(k as f64)
    }
}

fn client_config(spec: &EngineSpec, name: String) -> ClientConfig {
    let mut c = ClientConfig::new(spec.namesrv_addrs.clone());
    c.credentials = spec.credentials.clone();
    c.tls = spec.tls.clone();
    c.instance_name = Some(name);
    c.request_timeout_ms = spec.send_timeout_ms;
    c
}

fn is_response_failure(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::BrokerBusy { .. }
            | ClientError::Broker { .. }
            | ClientError::NoPermission { .. }
            | ClientError::TopicNotExist { .. }
            | ClientError::MessageIllegal { .. }
            | ClientError::FlushTimeout { .. }
    )
}

fn body(template: &Bytes, size: usize) -> Bytes {
    let mut b = BytesMut::with_capacity(size);
    b.extend_from_slice(&now_epoch_us().to_be_bytes());
    b.extend_from_slice(&template[..size - TIMESTAMP_BYTES]);
    b.freeze()
}

/// What a producer thread sends with.
#[derive(Clone)]
enum Sender {
    Plain(Producer),
    /// With the commit-time table when consumers run.
    Txn(TransactionProducer, Option<Arc<CommitTimes>>),
}

/// Whether the `n`th transaction of a task is rolled back: `percent` of them, spread
/// evenly (Bresenham), so any window of 100 holds exactly `percent`.
pub fn rolls_back(n: u64, percent: u32) -> bool {
    let p = u64::from(percent.min(100));
    (n + 1) * p / 100 != n * p / 100
}

/// One transaction: half send, then (commit or rollback) END_TRANSACTION as a request.
/// Ok when the half was stored and the broker answered the END; latencies and
/// transaction counts go to `acc` (the caller counts the failure of an Err).
async fn send_transaction(txp: &TransactionProducer, table: Option<&CommitTimes>, m: Message, rollback: bool, scheduled: Instant, bytes: u64, acc: &SharedAcc) -> Result<(), ClientError> {
    let sent = txp.send_half_message(m).await?;
    let half_us = scheduled.elapsed().as_micros() as u64;
    let state = if rollback { LocalTransactionState::RollbackMessage } else { LocalTransactionState::CommitMessage };
    let mut untracked = false;
    if let (Some(t), false) = (table, rollback) {
        // Recorded before END is written: the message cannot be visible earlier.
        untracked = !t.insert(&sent.msg_id, now_epoch_us());
    }
    let end_start = Instant::now();
    let end = txp.end_transaction_request(&sent, state).await;
    let end_us = end_start.elapsed().as_micros() as u64;
    let total_us = scheduled.elapsed().as_micros() as u64;
    let mut a = lock(acc);
    record_us(&mut a.txn.half_us, half_us);
    a.txn.untracked_commits += u64::from(untracked);
    match end {
        Ok(()) => {
            record_us(&mut a.txn.end_us, end_us);
            if rollback {
                a.txn.rolled_back += 1;
            } else {
                a.sent += 1;
                a.sent_bytes += bytes;
                record_us(&mut a.send_us, total_us);
            }
            Ok(())
        }
        Err(e) => {
            // The half stays open and the broker checks it (the listener answers from
            // the message's marker); a committed one may still arrive, late.
            a.txn.end_failed += 1;
            drop(a);
            Err(e)
        }
    }
}

async fn send_loop(spec: Rc<EngineSpec>, sender: Sender, acc: SharedAcc, stop: Arc<AtomicBool>, pacer: Option<Rc<Pacer>>, task_id: u64) {
    let template = Bytes::from((0..spec.sizes.max_bytes()).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (task_id + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let batch = spec.workload.batch_size.max(1);
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let scheduled = match &pacer {
            Some(p) => {
                let at = p.next_slot();
                let now = Instant::now();
                if at > now {
                    glommio::timer::sleep(at - now).await;
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                at
            }
            None => Instant::now(),
        };
        let mut msgs = Vec::with_capacity(batch);
        let mut bytes = 0u64;
        for _ in 0..batch {
            let topic = &spec.topics[(seq as usize) % spec.topics.len()];
            let size = spec.sizes.pick(rng.next_f64());
            bytes += size as u64;
            let mut m = Message::new(topic.as_str(), body(&template, size));
            if !spec.tags.is_empty() {
                let _ = m.set_property("TAGS", &spec.tags[(seq as usize) % spec.tags.len()]);
            }
            if spec.keys {
                let _ = m.set_property("KEYS", &format!("k{task_id}-{seq}"));
            }
            if let Some(level) = spec.delay_level {
                let _ = m.set_property("DELAY", &level.to_string());
            }
            if let Some(secs) = spec.timer_delay_secs {
                let _ = m.set_property("TIMER_DELAY_SEC", &secs.to_string());
            }
            msgs.push(m);
            seq += 1;
        }
        let count = msgs.len() as u64;
        let producer = match &sender {
            Sender::Plain(p) => p,
            Sender::Txn(txp, table) => {
                let rollback = rolls_back(seq - 1, spec.transactional.unwrap_or(0));
                let mut m = msgs.pop().expect("one message");
                let _ = m.set_property(OUTCOME_PROPERTY, if rollback { OUTCOME_ROLLBACK } else { OUTCOME_COMMIT });
                if let Err(e) = send_transaction(txp, table.as_deref(), m, rollback, scheduled, bytes, &acc).await {
                    {
                        let mut a = lock(&acc);
                        if is_response_failure(&e) {
                            a.response_failed += 1;
                        } else {
                            a.send_failed += 1;
                        }
                        a.last_error = Some(e.to_string());
                    }
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        let result = match (spec.workload.send_mode.as_str(), batch) {
            ("oneway", _) => {
                let mut r = Ok(());
                for m in msgs {
                    if let Err(e) = producer.send_oneway(m).await {
                        r = Err(e);
                    }
                }
                r
            }
            (_, 1) => producer.send(msgs.pop().expect("one message")).await.map(|_| ()),
            _ => producer.send_batch(msgs).await.map(|_| ()),
        };
        let us = scheduled.elapsed().as_micros() as u64;
        let failed = {
            let mut a = lock(&acc);
            match result {
                Ok(()) => {
                    a.sent += count;
                    a.sent_bytes += bytes;
                    record_us(&mut a.send_us, us);
                    false
                }
                Err(e) => {
                    if is_response_failure(&e) {
                        a.response_failed += count;
                    } else {
                        a.send_failed += count;
                    }
                    a.last_error = Some(e.to_string());
                    true
                }
            }
        };
        if failed {
            // A failing cluster must not turn into a busy loop.
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn producer_thread(
    index: usize,
    spec: Arc<EngineSpec>,
    acc: SharedAcc,
    checks: Arc<Mutex<TxnStats>>,
    commit_times: Option<Arc<CommitTimes>>,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("loadgen-p{index}"))
            .spawn(move || async move {
                let spec = Rc::new((*spec).clone());
                let mut config = ProducerConfig::new(client_config(&spec, format!("loadgen-p{index}-{}", std::process::id())), format!("{}-producer", spec.group));
                config.send_timeout_ms = spec.send_timeout_ms;
                config.max_message_bytes = config.max_message_bytes.max(spec.sizes.max_bytes() * spec.workload.batch_size.max(1) + 64 * 1024);
                // loadgen measures the broker with the bodies it was asked to send: no
                // client-side compression (ringmq-client compresses 4 KiB and up by
                // default, as Java), so runs with large bodies compare with earlier ones.
                config.compress_msg_body_over_howmuch = usize::MAX;
                let sender = match spec.transactional {
                    None => Sender::Plain(Producer::start(config).await.map_err(|e| format!("producer {index}: {e}"))?),
                    Some(_) => {
                        let listener = Rc::new(crate::txn::Listener { checks: checks.clone() });
                        let txp = TransactionProducer::start(config, listener).await.map_err(|e| format!("transactional producer {index}: {e}"))?;
                        txp.set_end_transaction_mode(EndTransactionMode::Request);
                        Sender::Txn(txp, commit_times)
                    }
                };
                let producer = match &sender {
                    Sender::Plain(p) => p.clone(),
                    Sender::Txn(t, _) => t.producer().clone(),
                };
                for t in &spec.topics {
                    producer.instance().route(t).await.map_err(|e| format!("producer {index}: {e}"))?;
                }
                ready.fetch_add(1, Ordering::SeqCst);
                let pacer = spec.workload.target_rate_per_sec.map(|rate| {
                    let per_thread = rate / spec.workload.producers.max(1) as f64;
                    let batch = spec.workload.batch_size.max(1) as f64;
                    Rc::new(Pacer { start: Instant::now(), period: Duration::from_secs_f64(batch / per_thread.max(1e-3)), next: Cell::new(0) })
                });
                let tasks: Vec<_> = (0..spec.workload.in_flight_per_producer.max(1))
                    .map(|t| {
                        let task_id = (index as u64) << 32 | t as u64;
                        glommio::spawn_local(send_loop(spec.clone(), sender.clone(), acc.clone(), stop.clone(), pacer.clone(), task_id)).detach()
                    })
                    .collect();
                for t in tasks {
                    t.await;
                }
                match &sender {
                    Sender::Plain(p) => p.shutdown().await,
                    Sender::Txn(t, _) => t.shutdown().await,
                }
                Ok(())
            })
            .map_err(|e| format!("producer executor {index}: {e}"))?;
        ex.join().map_err(|e| format!("producer thread {index}: {e}"))?
    })
}

/// `due_delay_us`: the delay every message was sent with (its end-to-end latency is
/// counted from its due time). `commit_times`: transactional runs (commit-to-visible).
fn on_messages(acc: &SharedAcc, msgs: &[MessageExt], due_delay_us: u64, commit_times: Option<&CommitTimes>) {
    let now_us = now_epoch_us();
    let now_ms = (now_us / 1000) as i64;
    let mut a = lock(acc);
    for m in msgs {
        if let Some(table) = commit_times {
            match m.property(OUTCOME_PROPERTY) {
                Some(OUTCOME_ROLLBACK) => a.txn.rolled_back_received += 1,
                _ => match table.take(&m.msg_id) {
                    Some(commit_us) => record_us(&mut a.txn.commit_visible_us, now_us.saturating_sub(commit_us)),
                    None => a.txn.untimed_received += 1,
                },
            }
        }
        a.received += 1;
        a.received_bytes += m.body.len() as u64;
        if m.body.len() >= TIMESTAMP_BYTES {
            let sent_us = u64::from_be_bytes(m.body[..TIMESTAMP_BYTES].try_into().expect("8 bytes"));
            record_us(&mut a.e2e_us, now_us.saturating_sub(sent_us).saturating_sub(due_delay_us));
        }
        let b2c = (now_ms - m.born_timestamp_ms).max(0) as u64;
        let s2c = (now_ms - m.store_timestamp_ms).max(0) as u64;
        a.b2c_ms_sum += b2c;
        a.b2c_ms_max = a.b2c_ms_max.max(b2c);
        a.s2c_ms_sum += s2c;
        a.s2c_ms_max = a.s2c_ms_max.max(s2c);
    }
}

/// How often a read with a consume target looks whether it is reached (ms).
const TARGET_POLL_MS: u64 = 5;

/// Pulls' worth of messages a consumer holds per queue before it stops pulling.
const QUEUE_PULLS_BUFFERED: usize = 4;

fn consumer_thread(
    index: usize,
    spec: Arc<EngineSpec>,
    acc: SharedAcc,
    commit_times: Option<Arc<CommitTimes>>,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("loadgen-c{index}"))
            .spawn(move || async move {
                let mut config = PushConsumerConfig::new(client_config(&spec, format!("loadgen-c{index}-{}", std::process::id())), spec.group.clone());
                config.consume_from = if spec.consume_from_first { ConsumeFrom::FirstOffset } else { ConsumeFrom::LastOffset };
                config.pull_batch_size = spec.pull_batch_size;
                config.consume_batch_max_size = 64;
                // Room for a few pulls per queue, so the next pull is in flight while the
                // listener works through the last one.
                config.queue_messages_max = (spec.pull_batch_size as usize * QUEUE_PULLS_BUFFERED).max(4096);
                config.pull_suspend_ms = 1_000;
                config.rebalance_interval_ms = 2_000;
                let mut consumer = PushConsumer::new(config);
                for t in &spec.topics {
                    consumer.subscribe(t, "*").map_err(|e| e.to_string())?;
                }
                let listener_acc = acc.clone();
                let delay_us = spec.consume_delay_us;
                let due_delay_us = spec.delay_ms * 1000;
                consumer.register_concurrently(move |msgs| {
                    if delay_us > 0 {
                        // Blocks this consumer's thread on purpose: a slow application.
                        std::thread::sleep(Duration::from_micros(delay_us * msgs.len() as u64));
                    }
                    on_messages(&listener_acc, msgs, due_delay_us, commit_times.as_deref());
                    ConsumeStatus::Success
                });
                consumer.start().await.map_err(|e| format!("consumer {index}: {e}"))?;
                let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_SECS);
                while consumer.assigned_queues().is_empty() && Instant::now() < deadline {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                // Let the pull loops resolve their start offsets before producers begin.
                glommio::timer::sleep(Duration::from_millis(300)).await;
                ready.fetch_add(1, Ordering::SeqCst);
                while !stop.load(Ordering::Relaxed) {
                    glommio::timer::sleep(Duration::from_millis(20)).await;
                }
                consumer.shutdown().await;
                Ok(())
            })
            .map_err(|e| format!("consumer executor {index}: {e}"))?;
        ex.join().map_err(|e| format!("consumer thread {index}: {e}"))?
    })
}

fn take(accs: &[SharedAcc]) -> Acc {
    let mut total = Acc::new();
    for a in accs {
        let taken = std::mem::replace(&mut *lock(a), Acc::new());
        total.merge(&taken);
    }
    total
}

fn local_time() -> String {
    crate::report::utc_now()
}

/// RocketMQ's producer benchmark line.
fn producer_line(a: &Acc, interval_secs: f64) -> String {
    let tps = a.sent as f64 / interval_secs;
    let avg_ms = if a.send_us.is_empty() { 0.0 } else { a.send_us.mean() / 1000.0 };
    let max_ms = a.send_us.max() as f64 / 1000.0;
    format!(
        "Current Time: {} | Send TPS: {:.0} | Max RT(ms): {:.3} | Average RT(ms): {:7.3} | Send Failed: {} | Response Failed: {}",
        local_time(),
        tps,
        max_ms,
        avg_ms,
        a.send_failed,
        a.response_failed
    )
}

/// RocketMQ's consumer benchmark line.
fn consumer_line(a: &Acc, interval_secs: f64) -> String {
    let n = a.received.max(1) as f64;
    format!(
        "Current Time: {} | Consume TPS: {:.0} | AVG(B2C) RT(ms): {:7.3} | AVG(S2C) RT(ms): {:7.3} | MAX(B2C) RT(ms): {} | MAX(S2C) RT(ms): {} | Consume Fail: 0 | Consume Success: {}",
        local_time(),
        a.received as f64 / interval_secs,
        a.b2c_ms_sum as f64 / n,
        a.s2c_ms_sum as f64 / n,
        a.b2c_ms_max,
        a.s2c_ms_max,
        a.received
    )
}

fn progress_bar(done_secs: f64, total_secs: f64, a: &Acc, interval_secs: f64) -> String {
    const WIDTH: usize = 30;
    let frac = (done_secs / total_secs.max(1e-9)).clamp(0.0, 1.0);
    let filled = (frac * WIDTH as f64).round() as usize;
    format!(
        "\r[{}{}] {:>4.0}/{:.0} s  send {:>9.0}/s  recv {:>9.0}/s ",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        done_secs,
        total_secs,
        a.sent as f64 / interval_secs,
        a.received as f64 / interval_secs
    )
}

/// A worker thread: what it ended with.
type WorkerThread = std::thread::JoinHandle<Result<(), String>>;

/// The worker threads of a run and what the reporter shares with them.
struct Workers {
    stop_producers: Arc<AtomicBool>,
    stop_consumers: Arc<AtomicBool>,
    consumers: usize,
    producers: usize,
    consumer_accs: Vec<SharedAcc>,
    consumer_threads: Vec<WorkerThread>,
    producer_accs: Vec<SharedAcc>,
    producer_threads: Vec<WorkerThread>,
    /// Transaction checks the producers' listeners answered.
    checks: Arc<Mutex<TxnStats>>,
    commit_times: Option<Arc<CommitTimes>>,
}

/// Whole-run counts the reporter keeps across intervals, the tail and the drain.
/// How much of a send error a record's error label quotes.
const ERROR_LABEL_CHARS_MAX: usize = 160;

struct Totals {
    sent: u64,
    received: u64,
    /// Whole-run transaction counts (warm-up and drain included), for `errors`.
    txn: TxnStats,
    /// The newest send error of the run, so a record that counts failed sends says why.
    last_send_error: Option<String>,
}

/// Runs the workload and returns its record. `on_interval` sees each closed interval.
pub fn run(spec: &EngineSpec, system: &str, config_label: &str, durability: Durability) -> Result<RunRecord, String> {
    let spec_arc = Arc::new(spec.clone());
    let mut workers = start_workers(spec, &spec_arc)?;
    let mut record = RunRecord::new(system, config_label, durability, spec.workload.clone());
    record.txn = spec.transactional.map(TxnStats::new);
    let mut totals = Totals { sent: 0, received: 0, txn: TxnStats::new(0), last_send_error: None };
    let interval = Duration::from_millis(spec.interval_ms.max(100));
    let started = report_intervals(spec, &workers, &mut record, &mut totals, interval);
    workers.stop_producers.store(true, Ordering::SeqCst);
    let mut thread_errors = Vec::new();
    join_workers(std::mem::take(&mut workers.producer_threads), "a producer thread panicked", &mut thread_errors);
    fold_send_tail(&workers, &mut record, &mut totals);
    if workers.consumers > 0 && workers.producers > 0 {
        drain(spec, &workers, &mut record, &mut totals, interval, started);
    }
    if workers.consumers > 0 && spec.transactional.is_some_and(|p| p > 0) {
        // Rolled-back messages must never arrive: give a wrongly delivered one a moment
        // to show up after the last committed one did.
        std::thread::sleep(Duration::from_millis(ROLLBACK_GRACE_MS));
    }
    workers.stop_consumers.store(true, Ordering::SeqCst);
    join_workers(std::mem::take(&mut workers.consumer_threads), "a consumer thread panicked", &mut thread_errors);
    if record.send_failed > 0 {
        let label = match totals.last_send_error.as_deref() {
            // The label lands in a Markdown table cell: no pipes or newlines, and short.
            Some(e) => format!("send failed (last: {})", e.replace(['|', '\n'], " ").chars().take(ERROR_LABEL_CHARS_MAX).collect::<String>()),
            None => "send failed".into(),
        };
        record.errors.push((label, record.send_failed));
    }
    // A few ms for rolled-back messages that would arrive right after the last commit.
    let late = take(&workers.consumer_accs);
    totals.txn.add_counts(&late.txn);
    if spec.transactional.is_some() {
        txn_errors(&totals, workers.commit_times.as_deref(), &mut record);
    }
    if !thread_errors.is_empty() {
        return Err(thread_errors.join("; "));
    }
    Ok(record)
}

/// Starts the consumers and waits until they own queues, then the producers and waits
/// until they have routes: consumers first, so none of the first sends is missed. A
/// start-up step of its own because it fails as a whole, with every worker told to stop.
fn start_workers(spec: &EngineSpec, spec_arc: &Arc<EngineSpec>) -> Result<Workers, String> {
    let stop_producers = Arc::new(AtomicBool::new(false));
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let mut consumer_accs = Vec::new();
    let mut consumer_threads = Vec::new();
    let consumers = if spec.role.consumes() { spec.workload.consumers.max(1) } else { 0 };
    // Transactional runs with consumers: commit times, from producers to consumers.
    let commit_times = (spec.transactional.is_some() && consumers > 0).then(|| Arc::new(CommitTimes::default()));
    for i in 0..consumers {
        let acc = Arc::new(Mutex::new(Acc::new()));
        consumer_threads.push(consumer_thread(i, spec_arc.clone(), acc.clone(), commit_times.clone(), stop_consumers.clone(), ready.clone()));
        consumer_accs.push(acc);
    }
    if let Err(e) = wait_ready(&ready, consumers, "consumer", &consumer_threads) {
        return Err(fail(e, &stop_consumers, &stop_producers));
    }
    let mut producer_accs = Vec::new();
    let mut producer_threads = Vec::new();
    let producers = if spec.role.produces() { spec.workload.producers.max(1) } else { 0 };
    // The listeners count checks here (they run on the producers' executors).
    let checks = Arc::new(Mutex::new(TxnStats::new(0)));
    for i in 0..producers {
        let acc = Arc::new(Mutex::new(Acc::new()));
        producer_threads.push(producer_thread(i, spec_arc.clone(), acc.clone(), checks.clone(), commit_times.clone(), stop_producers.clone(), ready.clone()));
        producer_accs.push(acc);
    }
    if let Err(e) = wait_ready(&ready, consumers + producers, "producer", &producer_threads) {
        let e = fail(e, &stop_consumers, &stop_producers);
        for t in producer_threads.into_iter().chain(consumer_threads) {
            if let Ok(Err(thread_err)) = t.join() {
                return Err(format!("{e}: {thread_err}"));
            }
        }
        return Err(e);
    }
    Ok(Workers { stop_producers, stop_consumers, consumers, producers, consumer_accs, consumer_threads, producer_accs, producer_threads, checks, commit_times })
}

/// Waits until `want` workers in all are ready; fails as soon as one of `threads` ends
/// (it cannot become ready) or after `START_TIMEOUT_SECS`.
fn wait_ready(ready: &AtomicUsize, want: usize, what: &str, threads: &[WorkerThread]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_SECS);
    while ready.load(Ordering::SeqCst) < want {
        if threads.iter().any(|t| t.is_finished()) {
            return Err(format!("a {what} thread ended during start-up (run with RUST_LOG=debug for details)"));
        }
        if Instant::now() > deadline {
            return Err(format!("{what}s not ready within {START_TIMEOUT_SECS} s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Tells every worker to stop and passes the start-up error on: a run that cannot start
/// leaves no worker running.
fn fail(msg: String, stop_c: &AtomicBool, stop_p: &AtomicBool) -> String {
    stop_c.store(true, Ordering::SeqCst);
    stop_p.store(true, Ordering::SeqCst);
    msg
}

/// The transaction checks the listeners answered since the last call.
fn take_checks(checks: &Mutex<TxnStats>) -> TxnStats {
    std::mem::replace(&mut *checks.lock().unwrap_or_else(|e| e.into_inner()), TxnStats::new(0))
}

/// The measured run, on the calling thread: closes an interval every `interval`, prints
/// it and adds it to `record`, until warm-up plus duration have passed or a target is
/// reached. Returns when it started (drain intervals are timed from there too).
fn report_intervals(spec: &EngineSpec, workers: &Workers, record: &mut RunRecord, totals: &mut Totals, interval: Duration) -> Instant {
    let total_secs = (spec.workload.warmup_secs + spec.workload.duration_secs) as f64;
    let started = Instant::now();
    let mut next = started + interval;
    let tty = spec.progress && unsafe_isatty_stderr();
    if spec.consume_target_messages.is_some() {
        // A read with a target (a backlog read back) is timed from here: what the
        // consumers took while starting (they pull as soon as they own queues) counts
        // towards the target but not towards the rate.
        let prelude = take(&workers.consumer_accs);
        totals.received += prelude.received;
        let mut stats = IntervalStats::new(started.elapsed().as_secs_f64().max(1e-6), 0.0, true);
        stats.received = prelude.received;
        record.push_interval(stats);
    }
    let mut interval_start = started;
    loop {
        wait_interval_end(spec, &workers.consumer_accs, next, totals.received);
        let elapsed = started.elapsed().as_secs_f64();
        let interval_secs = match spec.consume_target_messages {
            Some(_) => interval_start.elapsed().as_secs_f64(),
            None => interval.as_secs_f64(),
        };
        interval_start = Instant::now();
        let (p, c, stats) = close_interval(spec, workers, totals, elapsed, interval_secs);
        print_interval(spec, workers, tty, &p, &c, elapsed, total_secs, interval_secs);
        record.push_interval(stats);
        next += interval;
        let target_reached = spec.consume_target_messages.is_some_and(|t| totals.received >= t)
            || spec.produce_target_messages.is_some_and(|t| totals.sent >= t);
        if elapsed + 1e-6 >= total_secs || target_reached {
            break;
        }
    }
    if tty {
        eprintln!();
    }
    started
}

/// Sleeps until the interval ends at `next`; a read with a target also looks every
/// `TARGET_POLL_MS` whether the consumers reached it.
fn wait_interval_end(spec: &EngineSpec, consumer_accs: &[SharedAcc], next: Instant, received_total: u64) {
    match spec.consume_target_messages {
        // Ends the last interval when the target is reached, not at its full length:
        // a backlog read in 4.2 s is not timed as 5 s.
        Some(target) => loop {
            let now = Instant::now();
            let peek: u64 = consumer_accs.iter().map(|a| lock(a).received).sum();
            if now >= next || received_total + peek >= target {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(TARGET_POLL_MS)));
        },
        None => {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
        }
    }
}

/// Closes one interval: takes every worker's accumulator, adds it to the run's totals
/// and builds the interval's stats. Returns the producers' and consumers' sums for the
/// printing, which comes after.
fn close_interval(spec: &EngineSpec, workers: &Workers, totals: &mut Totals, elapsed: f64, interval_secs: f64) -> (Acc, Acc, IntervalStats) {
    let mut p = take(&workers.producer_accs);
    p.txn.add_counts(&take_checks(&workers.checks));
    let c = take(&workers.consumer_accs);
    totals.sent += p.sent;
    totals.received += c.received;
    totals.txn.add_counts(&p.txn);
    totals.txn.add_counts(&c.txn);
    if p.last_error.is_some() {
        totals.last_send_error.clone_from(&p.last_error);
    }
    let warmup = elapsed <= spec.workload.warmup_secs as f64 + 1e-6;
    let mut stats = IntervalStats::new(elapsed, interval_secs, warmup);
    stats.sent = p.sent;
    stats.sent_bytes = p.sent_bytes;
    stats.send_failed = p.send_failed + p.response_failed;
    stats.received = c.received;
    stats.backlog = spec.role.consumes().then_some(totals.sent as i64 - totals.received as i64).filter(|_| spec.role.produces());
    stats.send_latency_us = p.send_us.clone();
    stats.e2e_latency_us = c.e2e_us.clone();
    stats.broker_rss_kib = spec.rss_pid.and_then(rss_kib);
    stats.txn.add(&p.txn);
    stats.txn.add(&c.txn);
    (p, c, stats)
}

/// Shows a closed interval: RocketMQ's benchmark lines, the interval's last send error,
/// and the progress bar on a terminal.
#[allow(clippy::too_many_arguments)]
fn print_interval(spec: &EngineSpec, workers: &Workers, tty: bool, p: &Acc, c: &Acc, elapsed: f64, total_secs: f64, interval_secs: f64) {
    if tty {
        eprint!("\r\x1b[K");
    }
    if spec.lines {
        if workers.producers > 0 {
            println!("{}", producer_line(p, interval_secs));
        }
        if workers.consumers > 0 {
            println!("{}", consumer_line(c, interval_secs));
        }
    }
    if let Some(e) = p.last_error.as_ref() {
        eprintln!("loadgen: send errors this interval; last: {e}");
    }
    if tty {
        let mut both = Acc::new();
        both.merge(p);
        both.merge(c);
        eprint!("{}", progress_bar(elapsed, total_secs, &both, interval_secs));
        let _ = std::io::stderr().flush();
    }
}

/// Joins worker threads, collecting the errors they ended with (`panicked` for a panic).
fn join_workers(threads: Vec<WorkerThread>, panicked: &str, thread_errors: &mut Vec<String>) {
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => thread_errors.push(e),
            Err(_) => thread_errors.push(panicked.into()),
        }
    }
}

/// Adds the sends the stopped producers completed after the last interval closed to the
/// run's totals (they belong to no interval).
fn fold_send_tail(workers: &Workers, record: &mut RunRecord, totals: &mut Totals) {
    // Sends that completed after the last interval closed.
    let mut tail = take(&workers.producer_accs);
    tail.txn.add_counts(&take_checks(&workers.checks));
    record.sent += tail.sent;
    record.sent_bytes += tail.sent_bytes;
    record.send_failed += tail.send_failed + tail.response_failed;
    if tail.last_error.is_some() {
        totals.last_send_error.clone_from(&tail.last_error);
    }
    let _ = record.send_latency_us.add(&tail.send_us);
    if let Some(t) = record.txn.as_mut() {
        t.add(&tail.txn);
    }
    totals.txn.add_counts(&tail.txn);
    totals.sent += tail.sent;
}

/// After the producers stopped, waits up to `drain_secs` for the consumers to receive
/// everything sent (as intervals of their own with `record_drain_intervals`, else into
/// the run's totals); what never arrives is an error of the run.
fn drain(spec: &EngineSpec, workers: &Workers, record: &mut RunRecord, totals: &mut Totals, interval: Duration, started: Instant) {
    // Drain: messages sent in the measured window still count when they arrive.
    let deadline = Instant::now() + Duration::from_secs(spec.drain_secs);
    let mut next = Instant::now() + interval;
    while totals.received < totals.sent && Instant::now() < deadline {
        if spec.record_drain_intervals {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            next += interval;
            let c = take(&workers.consumer_accs);
            totals.received += c.received;
            totals.txn.add_counts(&c.txn);
            if spec.lines {
                println!("{}", consumer_line(&c, interval.as_secs_f64()));
            }
            let mut stats = IntervalStats::new(started.elapsed().as_secs_f64(), interval.as_secs_f64(), false);
            stats.received = c.received;
            stats.backlog = Some(totals.sent as i64 - totals.received as i64);
            stats.e2e_latency_us = c.e2e_us;
            stats.broker_rss_kib = spec.rss_pid.and_then(rss_kib);
            stats.txn = c.txn;
            record.push_interval(stats);
            continue;
        }
        std::thread::sleep(Duration::from_millis(50));
        let c = take(&workers.consumer_accs);
        totals.received += c.received;
        record.received += c.received;
        let _ = record.e2e_latency_us.add(&c.e2e_us);
        totals.txn.add_counts(&c.txn);
        if let Some(t) = record.txn.as_mut() {
            t.add(&c.txn);
        }
    }
    if totals.received < totals.sent {
        record.errors.push(("not received within the drain time".into(), totals.sent - totals.received));
    }
}

/// A transactional run's verdicts, each an error of the run when non-zero: rolled-back
/// or twice delivered messages, failed ENDs, answered checks, unmatched commit records.
fn txn_errors(totals: &Totals, commit_times: Option<&CommitTimes>, record: &mut RunRecord) {
    let t = &totals.txn;
    for (what, n) in [
        ("rolled-back messages received", t.rolled_back_received),
        ("committed messages received with no commit record (delivered twice?)", t.untimed_received.saturating_sub(t.untracked_commits)),
        ("END_TRANSACTION failed (half left to the broker's check)", t.end_failed),
        ("transaction checks answered (an END was lost or late)", t.checks_answered),
    ] {
        if n > 0 {
            record.errors.push((what.into(), n));
        }
    }
    if let Some(table) = commit_times {
        let left = table.len() as u64;
        if left > 0 && totals.received >= totals.sent {
            record.errors.push(("commit records never matched by a receipt".into(), left));
        }
    }
}

fn unsafe_isatty_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, draws: &[(f64, usize)]) {
        let d = SizeDist::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        for (u, want) in draws {
            assert_eq!(d.pick(*u), *want, "{text} at {u}");
        }
    }

    #[test]
    fn size_distributions() {
        check("1024", &[(0.0, 1024), (0.999, 1024)]);
        check("256:1,1024:1", &[(0.0, 256), (0.49, 256), (0.5, 1024), (0.99, 1024)]);
        check("128:0.5,1024:0.4,16384:0.1", &[(0.3, 128), (0.6, 1024), (0.95, 16384)]);
        check("4", &[(0.5, TIMESTAMP_BYTES)]); // room for the timestamp
        assert!(SizeDist::parse("x").is_err());
        assert!(SizeDist::parse("10:0").is_err());
        assert!(SizeDist::parse("10:a").is_err());
        assert_eq!(SizeDist::parse("100:1,300:1").unwrap().mean_bytes(), 200);
    }

    #[test]
    fn lines_follow_rocketmq_benchmark_format() {
        let mut a = Acc::new();
        a.sent = 2000;
        record_us(&mut a.send_us, 1500);
        a.send_failed = 1;
        let line = producer_line(&a, 1.0);
        assert!(line.contains("| Send TPS: 2000 | Max RT(ms): 1.5"), "{line}");
        assert!(line.ends_with("Send Failed: 1 | Response Failed: 0"), "{line}");
        let mut c = Acc::new();
        c.received = 10;
        c.b2c_ms_sum = 20;
        c.b2c_ms_max = 5;
        let line = consumer_line(&c, 2.0);
        assert!(line.contains("Consume TPS: 5 | AVG(B2C) RT(ms):   2.000"), "{line}");
        assert!(line.contains("MAX(B2C) RT(ms): 5"), "{line}");
    }

    fn received(id: &str, outcome: Option<&str>, sent_us: u64) -> MessageExt {
        let mut properties = ringmq_client::message::Properties::new();
        if let Some(o) = outcome {
            properties.set(OUTCOME_PROPERTY, o).unwrap();
        }
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        MessageExt {
            topic: "t".into(),
            broker_name: "b".into(),
            queue_id: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            body: Bytes::from(sent_us.to_be_bytes().to_vec()),
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: addr,
            store_timestamp_ms: 0,
            store_host: addr,
            reconsume_times: 0,
            properties,
            msg_id: id.into(),
        }
    }

    #[test]
    fn consumers_time_commits_and_flag_rollbacks_and_second_deliveries() {
        let table = CommitTimes::with_max(8);
        let now = now_epoch_us();
        assert!(table.insert("A", now - 5_000));
        assert!(table.insert("B", now - 1_000));
        let acc: SharedAcc = Arc::new(Mutex::new(Acc::new()));
        let msgs = [
            received("A", Some(OUTCOME_COMMIT), now - 9_000),
            received("R", Some(OUTCOME_ROLLBACK), now - 9_000),
            received("B", Some(OUTCOME_COMMIT), now - 2_000),
            received("A", Some(OUTCOME_COMMIT), now - 9_000),
        ];
        on_messages(&acc, &msgs, 0, Some(&table));
        let a = lock(&acc);
        assert_eq!((a.received, a.txn.rolled_back_received, a.txn.untimed_received), (4, 1, 1));
        assert_eq!(a.txn.commit_visible_us.len(), 2);
        assert!(a.txn.commit_visible_us.min() >= 1_000 && a.txn.commit_visible_us.max() < 1_000_000, "{:?}", a.txn.commit_visible_us);
        assert!(a.e2e_us.min() >= 2_000, "end-to-end counts from the half send");
        assert_eq!(table.len(), 0, "entries leave the table when consumed");
    }

    #[test]
    fn rollbacks_are_spread_evenly() {
        for percent in [0u32, 1, 10, 33, 50, 99, 100] {
            let n = (0..1000u64).filter(|&i| rolls_back(i, percent)).count();
            assert_eq!(n, 10 * percent as usize, "{percent}%");
            let first_100 = (0..100u64).filter(|&i| rolls_back(i, percent)).count();
            assert_eq!(first_100, percent as usize, "{percent}% in the first 100");
        }
        assert!(!rolls_back(0, 0) && rolls_back(0, 100));
        assert_eq!((0..10u64).filter(|&i| rolls_back(i, 200)).count(), 10, "clamped to 100");
    }

    #[test]
    fn rng_is_uniform_enough() {
        let mut r = Rng(42);
        let draws: Vec<f64> = (0..10_000).map(|_| r.next_f64()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
