//! `broker-bench`: requests/s and MB/s of SEND_MESSAGE_V2 against an embedded broker
//! with 1 and 2 (or more) shards, and the share and cost of cross-shard forwarding.
//!
//! Each run starts a broker on a fresh store under the bench directory, creates one
//! topic, and drives it from `connections` client threads, each keeping `in_flight`
//! pipelined sends outstanding (round-robin over the topic's queues, so with N shards
//! about (N-1)/N of the sends arrive on a shard that does not own their queue and are
//! forwarded). Latency is send-to-response, per request, in an HDR histogram.
//!
//! Invariants: every run is bounded by `duration_secs` + warm-up; clients stop on the
//! first error; the broker is stopped and joined before the next run.

use bytes::BytesMut;
use hdrhistogram::Histogram;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch;
use ringmq_broker::store::config::{FlushMode, Preallocate};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use serde::Serialize;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const TOPIC: &str = "BenchTopic";

#[derive(Debug, Clone)]
pub struct BrokerBenchSpec {
    pub shards: usize,
    pub connections: usize,
    pub in_flight: usize,
    pub queues: usize,
    pub message_bytes: usize,
    pub duration_secs: u64,
    pub warmup_secs: u64,
    pub flush: FlushMode,
}

#[derive(Debug, Clone, Serialize)]
pub struct BrokerRunResult {
    pub shards: usize,
    pub connections: usize,
    pub in_flight_per_connection: usize,
    pub flush: String,
    pub requests: u64,
    pub requests_per_sec: f64,
    pub message_mib_per_sec: f64,
    pub errors: u64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub latency_us_p999: f64,
    pub latency_us_max: f64,
    /// From GET_BROKER_RUNTIME_INFO over the whole run (warm-up included).
    pub broker_requests_total: u64,
    pub forwarded_out: u64,
    pub forwarded_share: f64,
}

fn request(cmd: &RemotingCommand, out: &mut BytesMut) {
    cmd.encode(out).expect("a send request encodes");
}

fn send_request(queue_id: usize, body: &[u8], opaque: i32) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_ext("a", "BenchProducer")
        .with_ext("b", TOPIC)
        .with_ext("c", "TBW102")
        .with_ext("d", "8")
        .with_ext("e", queue_id.to_string())
        .with_ext("f", "0")
        .with_ext("g", "0")
        .with_ext("h", "0")
        .with_ext("i", "TAGS\u{1}bench\u{2}")
        .with_ext("j", "0")
        .with_ext("k", "false")
        .with_body(body.to_vec());
    cmd.opaque = opaque;
    cmd
}

/// One blocking request/response exchange on a fresh connection.
fn call(port: u16, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let mut out = BytesMut::new();
    request(&cmd, &mut out);
    stream.write_all(&out).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).map_err(|e| e.to_string())? {
            return Ok(r);
        }
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("broker closed the connection".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct ClientOutcome {
    histogram: Histogram<u64>,
    requests: u64,
    errors: u64,
}

fn client(port: u16, spec: BrokerBenchSpec, index: usize, measuring: Arc<AtomicBool>, done: Arc<AtomicBool>) -> Result<ClientOutcome, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let body = vec![b'x'; spec.message_bytes];
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    let mut sent_at: VecDeque<(i32, Instant)> = VecDeque::with_capacity(spec.in_flight);
    let mut next_opaque = 1i32;
    let mut queue = index;
    let (mut requests, mut errors) = (0u64, 0u64);
    let mut out = BytesMut::new();
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        // Top up the window in one write.
        out.clear();
        while !done.load(Ordering::Relaxed) && sent_at.len() < spec.in_flight {
            request(&send_request(queue % spec.queues, &body, next_opaque), &mut out);
            sent_at.push_back((next_opaque, Instant::now()));
            next_opaque = next_opaque.wrapping_add(1);
            queue += 1;
        }
        if !out.is_empty() {
            stream.write_all(&out).map_err(|e| e.to_string())?;
        }
        if sent_at.is_empty() {
            return Ok(ClientOutcome { histogram, requests, errors });
        }
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("broker closed the connection".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(r) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).map_err(|e| e.to_string())? {
            // Responses to one connection come back in any order (each request is its
            // own task on the broker): find the request by opaque.
            let Some(at) = sent_at.iter().position(|(o, _)| *o == r.opaque) else { continue };
            let (_, started) = sent_at.remove(at).expect("position is in range");
            if measuring.load(Ordering::Relaxed) {
                requests += 1;
                if r.code == rs::SUCCESS {
                    let _ = histogram.record(started.elapsed().as_micros().max(1) as u64);
                } else {
                    errors += 1;
                }
            }
        }
    }
}

fn runtime_counter(info: &serde_json::Value, key: &str) -> u64 {
    info["table"][key].as_str().and_then(|s| s.parse().ok()).unwrap_or(0)
}

pub fn run(spec: &BrokerBenchSpec, dir: &Path) -> Result<BrokerRunResult, String> {
    let store_root = dir.join(format!("broker-{}-shards", spec.shards));
    let _ = std::fs::remove_dir_all(&store_root);
    let mut config = BrokerConfig::default();
    config.store_root = store_root.clone();
    config.listen_port = 0;
    config.shard_count = spec.shards;
    config.broker_ip = Some("127.0.0.1".into());
    config.store.flush_mode = spec.flush;
    config.store.preallocate = match spec.flush {
        FlushMode::Sync => Preallocate::Zero,
        FlushMode::Async => Preallocate::Fallocate,
    };
    config.store.segment_bytes = 256 * 1024 * 1024;
    crate::embedded::BenchDiskWatermarks::apply(&mut config.store);
    let broker = launch::start(config).map_err(|e| format!("broker did not start: {e}"))?;
    let port = broker.addr.port();
    let create = RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", TOPIC)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", spec.queues.to_string())
        .with_ext("writeQueueNums", spec.queues.to_string())
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG");
    let r = call(port, create)?;
    if r.code != rs::SUCCESS {
        return Err(format!("topic creation failed: {:?}", r.remark));
    }
    let measuring = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..spec.connections)
        .map(|i| {
            let (spec, m, d) = (spec.clone(), measuring.clone(), done.clone());
            std::thread::spawn(move || client(port, spec, i, m, d))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(spec.warmup_secs));
    measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(spec.duration_secs));
    measuring.store(false, Ordering::SeqCst);
    let elapsed = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    let (mut requests, mut errors) = (0, 0);
    for t in threads {
        let outcome = t.join().map_err(|_| "a client thread panicked".to_string())??;
        histogram.add(&outcome.histogram).map_err(|e| e.to_string())?;
        requests += outcome.requests;
        errors += outcome.errors;
    }
    let info = call(port, RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO))?;
    let info: serde_json::Value = serde_json::from_slice(&info.body).map_err(|e| e.to_string())?;
    broker.stop();
    broker.join();
    let _ = std::fs::remove_dir_all(&store_root);
    let total = runtime_counter(&info, "requestsTotal");
    let forwarded = runtime_counter(&info, "forwardedOut");
    let ok = requests - errors;
    Ok(BrokerRunResult {
        shards: spec.shards,
        connections: spec.connections,
        in_flight_per_connection: spec.in_flight,
        flush: format!("{:?}", spec.flush),
        requests,
        requests_per_sec: ok as f64 / elapsed,
        message_mib_per_sec: ok as f64 * spec.message_bytes as f64 / elapsed / (1024.0 * 1024.0),
        errors,
        latency_us_p50: histogram.value_at_quantile(0.5) as f64,
        latency_us_p99: histogram.value_at_quantile(0.99) as f64,
        latency_us_p999: histogram.value_at_quantile(0.999) as f64,
        latency_us_max: histogram.max() as f64,
        broker_requests_total: total,
        forwarded_out: forwarded,
        forwarded_share: if total > 0 { forwarded as f64 / total as f64 } else { 0.0 },
    })
}

pub fn markdown(results: &[BrokerRunResult], header: &str) -> String {
    let mut md = String::from(header);
    md.push_str("\n| shards | flush | connections × in flight | requests/s | MiB/s (bodies) | p50 / p99 / p99.9 µs | forwarded share | errors |\n|---:|---|---|---:|---:|---|---:|---:|\n");
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {} × {} | {:.0} | {:.1} | {:.0} / {:.0} / {:.0} | {:.1} % | {} |\n",
            r.shards,
            r.flush,
            r.connections,
            r.in_flight_per_connection,
            r.requests_per_sec,
            r.message_mib_per_sec,
            r.latency_us_p50,
            r.latency_us_p99,
            r.latency_us_p999,
            r.forwarded_share * 100.0,
            r.errors
        ));
    }
    md
}
