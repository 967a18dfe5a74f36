//! A consumer's busy queues keep up while the same connection holds suspended pulls on
//! idle queues (issue 22), against a real broker (glommio, io_uring, sockets) in this
//! process. This is how RocketMQ consumers use a connection: the pulls of every queue
//! they own share one connection per broker, most of them parked by long polling.
//!
//! Load: producer connections keep `LOAD_IN_FLIGHT` sends in flight each, spread over
//! the busy queues, for `LOAD_SECS`; every body carries its send time. The consumer's
//! one connection holds `IDLE_QUEUES` suspended pulls on an idle topic (re-issued as
//! they come back) and runs one pull loop per busy queue, pipelined on the same socket.
//! Bound: every message reaches the consumer within `DELIVERY_MAX_MS` of its send, and
//! at the end the consumer is caught up within `CATCH_UP_MAX_MS`. With 01de640's reader
//! (it yielded until every handed-out request had started) the consumer of this shape
//! fell seconds behind.
//!
//! Its own test binary: it loads both cores, and other tests' timing would suffer.

mod common;

use common::{encode, pull_header, pull_with, send, Broker, Conn, Got, CALL_TIMEOUT};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::frame::SerializeType;
use ringmq_broker::store::config::FlushMode;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BUSY_TOPIC: &str = "LiveBusy";
const IDLE_TOPIC: &str = "LiveIdle";
const BUSY_QUEUES: i32 = 8;
const IDLE_QUEUES: i32 = 64;
const LOAD_CONNECTIONS: usize = 2;
const LOAD_IN_FLIGHT: usize = 64;
const LOAD_SECS: u64 = 8;
const BODY_BYTES: usize = 1024;
const PULL_BATCH: i32 = 64;
const IDLE_SUSPEND_MS: i64 = 15_000;
const BUSY_SUSPEND_MS: i64 = 1_000;
/// Generous for a shared 2-core machine with the load and consumer in this process
/// (measured here: worst 30 ms; with 01de640's connection code 1.5 s after 6 s of load).
const DELIVERY_MAX_MS: u64 = 500;
const CATCH_UP_MAX_MS: u64 = 3_000;

/// Microseconds since `epoch`, as the first 8 bytes of a body.
fn stamp(epoch: Instant) -> Vec<u8> {
    let mut body = vec![0u8; BODY_BYTES];
    body[..8].copy_from_slice(&(epoch.elapsed().as_micros() as u64).to_be_bytes());
    body
}

#[test]
fn busy_queues_keep_up_beside_suspended_pulls_on_one_connection() {
    let broker = Broker::start(
        |c| {
            c.shard_count = 1;
            c.store.flush_mode = FlushMode::Async;
            c.pull_suspend_max_ms = 30_000;
        },
        &[(BUSY_TOPIC, BUSY_QUEUES), (IDLE_TOPIC, IDLE_QUEUES)],
    );
    let addr = broker.addr;
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));

    // The consumer: one socket, a writer (this thread) and a reader thread.
    let consumer = Conn::open(addr);
    let mut writer = consumer.s.try_clone().expect("clone");
    let mut opaque = 1_000;
    let mut next_opaque = || {
        opaque += 1;
        opaque
    };
    // What each outstanding pull is for, by opaque.
    #[derive(Clone, Copy)]
    enum Pull {
        Idle(i32),
        Busy(i32),
    }
    let mut pending: HashMap<i32, Pull> = HashMap::new();
    for q in 0..IDLE_QUEUES {
        let mut h = pull_header(IDLE_TOPIC, q, 0);
        h.sys_flag = 0x2;
        h.suspend_timeout_millis = IDLE_SUSPEND_MS;
        let o = next_opaque();
        pending.insert(o, Pull::Idle(q));
        writer.write_all(&encode(&pull_with(&h, o, SerializeType::RocketMq))).expect("write");
    }
    let busy_pull = |q: i32, offset: i64, o: i32| {
        let mut h = pull_header(BUSY_TOPIC, q, offset);
        h.sys_flag = 0x2;
        h.suspend_timeout_millis = BUSY_SUSPEND_MS;
        h.max_msg_nums = PULL_BATCH;
        encode(&pull_with(&h, o, SerializeType::RocketMq))
    };
    for q in 0..BUSY_QUEUES {
        let o = next_opaque();
        pending.insert(o, Pull::Busy(q));
        writer.write_all(&busy_pull(q, 0, o)).expect("write");
    }
    // Let the idle pulls park before the load starts.
    std::thread::sleep(Duration::from_millis(200));

    let producers: Vec<_> = (0..LOAD_CONNECTIONS)
        .map(|p| {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                let mut w = c.s.try_clone().expect("clone");
                let mut in_flight = 0usize;
                let mut n: u64 = 0;
                let mut failed = 0u64;
                let deadline = Instant::now() + Duration::from_secs(LOAD_SECS);
                loop {
                    while in_flight < LOAD_IN_FLIGHT && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let q = ((n as usize * LOAD_CONNECTIONS + p) % BUSY_QUEUES as usize) as i32;
                        w.write_all(&encode(&send(BUSY_TOPIC, q, &stamp(epoch), n as i32, SerializeType::RocketMq))).expect("write");
                        in_flight += 1;
                    }
                    if in_flight == 0 {
                        break;
                    }
                    match c.read(Instant::now() + CALL_TIMEOUT) {
                        Got::Cmd(r) if r.is_response() => {
                            in_flight -= 1;
                            match r.code {
                                rs::SUCCESS => {
                                    sent.fetch_add(1, Ordering::Relaxed);
                                }
                                // Broker busy (flush backlog) is back-pressure, not loss.
                                rs::SYSTEM_BUSY => failed += 1,
                                code => panic!("producer {p}: send answered {code}: {:?}", r.remark),
                            }
                        }
                        Got::Cmd(_) => {}
                        other => panic!("producer {p}: {other:?}"),
                    }
                }
                failed
            })
        })
        .collect();

    // The consumer's reader: answers come in any order, matched by opaque.
    let mut reader = consumer;
    let mut received = 0u64;
    let mut worst_us = 0u64;
    let mut over_bound = 0u64;
    let mut load_done_at: Option<Instant> = None;
    let mut producers = Some(producers);
    let mut failed_sends = 0;
    loop {
        if load_done_at.is_none() && producers.as_ref().is_some_and(|ps| ps.iter().all(|h| h.is_finished())) {
            failed_sends = producers.take().expect("joined once").into_iter().map(|h| h.join().expect("producer")).sum::<u64>();
            load_done_at = Some(Instant::now());
        }
        if let Some(at) = load_done_at {
            if received >= sent.load(Ordering::Relaxed) {
                break;
            }
            assert!(
                at.elapsed() < Duration::from_millis(CATCH_UP_MAX_MS),
                "the consumer did not catch up within {CATCH_UP_MAX_MS} ms of the load's end: {received} of {} received",
                sent.load(Ordering::Relaxed)
            );
        }
        let r = match reader.read(Instant::now() + Duration::from_millis(100)) {
            Got::Cmd(r) if r.is_response() => r,
            Got::Cmd(_) | Got::Timeout => continue,
            Got::Closed => panic!("the broker closed the consumer's connection"),
        };
        let Some(what) = pending.remove(&r.opaque) else { panic!("an answer to opaque {} nobody asked for", r.opaque) };
        let o = next_opaque();
        match what {
            Pull::Idle(q) => {
                assert_eq!(r.code, rs::PULL_NOT_FOUND, "an idle queue's pull: {:?}", r.remark);
                let mut h = pull_header(IDLE_TOPIC, q, 0);
                h.sys_flag = 0x2;
                h.suspend_timeout_millis = IDLE_SUSPEND_MS;
                pending.insert(o, Pull::Idle(q));
                writer.write_all(&encode(&pull_with(&h, o, SerializeType::RocketMq))).expect("write");
            }
            Pull::Busy(q) => {
                let now_us = epoch.elapsed().as_micros() as u64;
                if r.code == rs::SUCCESS {
                    let mut at = 0;
                    while at < r.body.len() {
                        let v = StoredMessageView::parse(&r.body[at..]).expect("a stored record");
                        let sent_us = u64::from_be_bytes(v.body()[..8].try_into().expect("8 bytes"));
                        let waited = now_us.saturating_sub(sent_us);
                        worst_us = worst_us.max(waited);
                        if waited > DELIVERY_MAX_MS * 1000 {
                            over_bound += 1;
                        }
                        received += 1;
                        at += v.total_size();
                    }
                } else {
                    assert!(matches!(r.code, rs::PULL_NOT_FOUND | rs::PULL_RETRY_IMMEDIATELY), "busy pull: {} {:?}", r.code, r.remark);
                }
                let next: i64 = r.ext("nextBeginOffset").and_then(|s| s.parse().ok()).expect("nextBeginOffset");
                pending.insert(o, Pull::Busy(q));
                writer.write_all(&busy_pull(q, next, o)).expect("write");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let total = sent.load(Ordering::Relaxed);
    eprintln!(
        "pull_liveness: {total} sent ({failed_sends} refused busy) in {LOAD_SECS} s, {received} received, worst delivery {:.1} ms, {over_bound} over {DELIVERY_MAX_MS} ms",
        worst_us as f64 / 1000.0
    );
    assert!(total > 1_000, "the load sent only {total} messages");
    assert_eq!(over_bound, 0, "{over_bound} messages reached the consumer later than {DELIVERY_MAX_MS} ms (worst {} ms)", worst_us / 1000);
    drop(broker);
}
