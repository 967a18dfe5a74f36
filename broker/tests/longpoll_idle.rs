//! Regression test: thousands of suspended pulls on one empty queue must neither make
//! the owning shard spin nor slow down sends (DESIGN.md §2: "Nothing a client does may
//! make a shard spin: every wait is registered and removed when dropped").
//!
//! The defect it pins: `shard/longpoll.rs` left the waker of every pull that timed out
//! in its queue's waiter list (only a message arrival cleared it), so past
//! `WAITERS_PER_QUEUE_MAX` (4096) every new suspended pull was refused a slot, and the
//! pull handler looped on the refusal without awaiting until its suspend time ran out —
//! the shard stalled and a send behind it took 31 s.
//!
//! A child broker (2 shards, so a stalled shard cannot hide behind a healthy one) gets
//! `ROUNDS` rounds of `PULLS_PER_ROUND` PULL_MESSAGE requests with the suspend flag
//! (suspendTimeoutMillis `SUSPEND_MS`, queueOffset 0) on the empty queue 0 of a
//! one-queue topic, pipelined over `CONNECTIONS` connections (below the broker's 1024
//! requests in flight per connection). Every pull must be answered PULL_NOT_FOUND within
//! `SUSPEND_MS + ANSWER_SLACK_MS` of being written. Meanwhile one sender sends
//! SEND_MESSAGE_V2 one at a time to a queue owned by the same shard; its p99 latency
//! must stay under `SEND_P99_MAX_MS`. The child runs as a process of its own so that a
//! broken broker is SIGKILLed at the end rather than spinning on in this process; every
//! socket read has a deadline. Takes a few seconds when correct (about 12 s at most
//! when not). Prints one `longpoll_idle summary:` line.

mod common;

use common::{encode, pull_header, pull_with, send, ChildBroker, ChildConfig, Conn, Got};
use ringmq_broker::routing::queue_owner;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHARDS: usize = 2;
/// The one-queue topic the pulls wait on.
const PULL_TOPIC: &str = "LPIDLE";
/// The sender's topic; its queue owned by the pull queue's shard is used.
const SEND_TOPIC: &str = "LPSEND";
const SEND_TOPIC_QUEUES: i32 = SHARDS as i32;
const ROUNDS: usize = 3;
/// Above `WAITERS_PER_QUEUE_MAX` (4096) suspended pulls per queue.
const PULLS_PER_ROUND: usize = 4200;
/// At least 5 so each stays well below the broker's 1024 requests in flight per
/// connection (700 each).
const CONNECTIONS: usize = 6;
const SUSPEND_MS: u64 = 400;
/// How much later than its suspend time a pull may be answered.
const ANSWER_SLACK_MS: u64 = 1500;
/// The sender's p99 bound. Sends take about a millisecond here; the defect made them
/// take seconds.
const SEND_P99_MAX_MS: u64 = 200;
/// A send not answered by then counts as failed (the defect: 31 s).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// A write that cannot go out by then fails its connection's round.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// sysFlag bit: suspend the pull when nothing is there.
const FLAG_SUSPEND: i32 = 0x2;

/// What one connection saw in one round.
#[derive(Default)]
struct ConnRound {
    /// Write-to-answer times of the pulls answered PULL_NOT_FOUND in time.
    latencies: Vec<Duration>,
    /// Answers with another code: (opaque, code, remark).
    wrong: Vec<(i32, i32, Option<String>)>,
    /// Pulls not answered within their deadline.
    unanswered: usize,
    /// Answered, but after the deadline.
    late: usize,
    write_error: Option<String>,
}

/// Writes `count` suspended pulls in one go and reads their answers until each came or
/// the deadline (`SUSPEND_MS + ANSWER_SLACK_MS` after the write began) passed.
fn pull_round(mut conn: Conn, first_opaque: i32, count: usize) -> (Conn, ConnRound) {
    let mut header = pull_header(PULL_TOPIC, 0, 0);
    header.sys_flag = FLAG_SUSPEND;
    header.suspend_timeout_millis = SUSPEND_MS as i64;
    header.max_msg_nums = 32;
    let mut frames = Vec::new();
    for i in 0..count {
        frames.extend_from_slice(&encode(&pull_with(&header, first_opaque + i as i32, SerializeType::Json)));
    }
    let mut out = ConnRound::default();
    let written_at = Instant::now();
    let deadline = written_at + Duration::from_millis(SUSPEND_MS + ANSWER_SLACK_MS);
    conn.s.set_write_timeout(Some(WRITE_TIMEOUT)).expect("write timeout");
    if let Err(e) = conn.s.write_all(&frames) {
        out.write_error = Some(e.to_string());
        out.unanswered = count;
        return (conn, out);
    }
    let mut pending: HashMap<i32, ()> = (0..count).map(|i| (first_opaque + i as i32, ())).collect();
    while !pending.is_empty() {
        match conn.read(deadline) {
            Got::Cmd(r) if r.is_response() && pending.remove(&r.opaque).is_some() => {
                if r.code != rs::PULL_NOT_FOUND {
                    out.wrong.push((r.opaque, r.code, r.remark.clone()));
                } else if Instant::now() > deadline {
                    out.late += 1;
                } else {
                    out.latencies.push(written_at.elapsed());
                }
            }
            Got::Cmd(_) => {}
            Got::Closed | Got::Timeout => break,
        }
    }
    out.unanswered = pending.len();
    (conn, out)
}

/// Sends one message at a time until `stop`; returns each latency (a send not answered
/// within `SEND_TIMEOUT` counts as that long) and the failures.
fn sender(addr: std::net::SocketAddr, queue_id: i32, stop: Arc<AtomicBool>) -> (Vec<Duration>, Vec<String>) {
    let mut conn = Conn::open(addr);
    let (mut latencies, mut failures) = (Vec::new(), Vec::new());
    let mut opaque = 0;
    while !stop.load(Ordering::Relaxed) {
        opaque += 1;
        let cmd = send(SEND_TOPIC, queue_id, format!("send {opaque}").as_bytes(), opaque, SerializeType::Json);
        let started = Instant::now();
        match conn.call_by(&cmd, started + SEND_TIMEOUT) {
            Some(r) if r.code == rs::SUCCESS => latencies.push(started.elapsed()),
            Some(r) => failures.push(format!("send {opaque}: code {} {:?}", r.code, r.remark)),
            None => {
                latencies.push(SEND_TIMEOUT);
                failures.push(format!("send {opaque}: no answer within {SEND_TIMEOUT:?}"));
                // The connection's order is unknown now: start a fresh one.
                conn = Conn::open(addr);
            }
        }
    }
    (latencies, failures)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[test]
fn suspended_pulls_past_the_waiter_bound_do_not_spin_the_shard() {
    let started = Instant::now();
    let dir = common::temp_dir();
    let config = ChildConfig {
        shard_count: SHARDS,
        top: "max_message_bytes = 65536".into(),
        // Async flush, flushed early and with room to spare: the sender measures the
        // shard's responsiveness, not the disk, and never meets SYSTEM_BUSY.
        store: "segment_bytes = 8388608\nflush = \"async\"\nflush_min_bytes = 65536\nflush_interval_ms = 10\ndirty_bytes_max = 8388608".into(),
        env: Vec::new(),
    };
    let mut broker = ChildBroker::start_up(dir.path(), &dir.path().join("store"), &config);
    let addr = broker.addr;
    let mut admin = Conn::open(addr);
    for (topic, queues) in [(PULL_TOPIC, 1), (SEND_TOPIC, SEND_TOPIC_QUEUES)] {
        let r = admin.call(common::create_topic(topic, queues));
        assert_eq!(r.code, rs::SUCCESS, "create {topic}: {:?}", r.remark);
    }
    let owner = queue_owner(PULL_TOPIC, 0, SHARDS);
    let send_queue = (0..SEND_TOPIC_QUEUES).find(|&q| queue_owner(SEND_TOPIC, q, SHARDS) == owner).expect("a send queue on the pull queue's shard");

    let stop = Arc::new(AtomicBool::new(false));
    let send_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || sender(addr, send_queue, stop))
    };
    let mut conns: Vec<Conn> = (0..CONNECTIONS).map(|_| Conn::open(addr)).collect();
    let per_conn = PULLS_PER_ROUND / CONNECTIONS;
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let round_started = Instant::now();
        let threads: Vec<_> = conns
            .drain(..)
            .enumerate()
            .map(|(i, conn)| {
                let first_opaque = (round * 100_000 + i * 10_000 + 1) as i32;
                std::thread::spawn(move || pull_round(conn, first_opaque, per_conn))
            })
            .collect();
        let mut total = ConnRound::default();
        for t in threads {
            let (conn, r) = t.join().expect("a pull connection thread");
            conns.push(conn);
            total.latencies.extend(r.latencies);
            total.wrong.extend(r.wrong);
            total.unanswered += r.unanswered;
            total.late += r.late;
            total.write_error = total.write_error.or(r.write_error);
        }
        total.latencies.sort();
        eprintln!(
            "longpoll_idle round {round}: {} pulls, {} answered PULL_NOT_FOUND in time (p50 {:.0} ms, max {:.0} ms), {} late, {} unanswered, {} other codes, {:.2}s",
            per_conn * CONNECTIONS,
            total.latencies.len(),
            ms(percentile(&total.latencies, 50.0)),
            ms(total.latencies.last().copied().unwrap_or_default()),
            total.late,
            total.unanswered,
            total.wrong.len(),
            round_started.elapsed().as_secs_f64(),
        );
        rounds.push(total);
    }
    stop.store(true, Ordering::Relaxed);
    let (mut sends, send_failures) = send_thread.join().expect("the sender thread");
    sends.sort();
    let p99 = percentile(&sends, 99.0);
    eprintln!(
        "longpoll_idle summary: {ROUNDS} rounds x {} suspended pulls ({SUSPEND_MS} ms) over {CONNECTIONS} connections; \
         sends to {SEND_TOPIC}/{send_queue} on shard {owner}: {} ok, {} failed, p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms (bound p99 {SEND_P99_MAX_MS} ms); {:.1}s",
        per_conn * CONNECTIONS,
        sends.len() - send_failures.iter().filter(|f| f.contains("no answer")).count(),
        send_failures.len(),
        ms(percentile(&sends, 50.0)),
        ms(p99),
        ms(sends.last().copied().unwrap_or_default()),
        started.elapsed().as_secs_f64(),
    );

    for (round, r) in rounds.iter().enumerate() {
        assert!(r.write_error.is_none(), "round {round}: writing the pulls failed: {:?}", r.write_error);
        assert!(r.wrong.is_empty(), "round {round}: pulls answered with another code than PULL_NOT_FOUND (19): {:?}", &r.wrong[..r.wrong.len().min(5)]);
        assert_eq!(
            (r.unanswered, r.late),
            (0, 0),
            "round {round}: every suspended pull must be answered within {SUSPEND_MS} + {ANSWER_SLACK_MS} ms ({} answered in time)",
            r.latencies.len()
        );
    }
    assert!(send_failures.is_empty(), "sends failed while pulls were suspended: {:?}", &send_failures[..send_failures.len().min(5)]);
    assert!(sends.len() >= 10, "the sender got only {} sends through", sends.len());
    assert!(ms(p99) <= SEND_P99_MAX_MS as f64, "send p99 {:.1} ms exceeds {SEND_P99_MAX_MS} ms while pulls were suspended", ms(p99));
    assert!(broker.exited().is_none(), "the broker is still running");
    drop(conns);
    drop(admin);
    broker.stop();
}
