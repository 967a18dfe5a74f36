//! `filter-bench`: pull throughput of one backlog read whole under each consumer filter
//! (none, a TAG filter, SQL92 filters over TAGS and over a user property), so the cost
//! of Apache's SQL92 property filter (`enablePropertyFilter`) is measured against the
//! TAG filter it replaces, side by side in one process.
//!
//! An embedded one-shard broker holds `messages` messages of `message_bytes` on one
//! queue, tagged TagA/TagB alternately, with the user property `a` = sequence mod 10.
//! Each filter then reads the queue from offset 0 to its end with sequential PULL_MESSAGE
//! requests of `pull_batch` (Java's pullBatchSize), the filters alternated round after
//! round, after one untimed warm-up pass. Reported per filter: messages scanned and selected per second, and the
//! process's CPU µs per scanned message (broker and the one client thread).
//!
//! Invariants: every filter must select exactly the messages its expression names (the
//! expected count is computed from the sequence) or the run fails; every pull is bounded
//! by the socket timeout; the broker is stopped and its store removed at the end.

use bytes::BytesMut;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use ringmq_client::remoting::headers::PullMessageRequestHeader;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const TOPIC: &str = "FilterBench";
const GROUP: &str = "FilterBenchGroup";
/// Sends pipelined while filling the backlog.
const FILL_IN_FLIGHT: usize = 64;
/// The longest a request may take before the run fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One filter: a name, its expression type and expression, and which sequence numbers
/// it selects.
struct Filter {
    name: &'static str,
    expression_type: &'static str,
    expression: &'static str,
    selects: fn(u64) -> bool,
}

fn tag_of(seq: u64) -> &'static str {
    if seq % 2 == 0 {
        "TagA"
    } else {
        "TagB"
    }
}

const FILTERS: &[Filter] = &[
    Filter { name: "none (TAG *)", expression_type: "TAG", expression: "*", selects: |_| true },
    Filter { name: "TAG TagA", expression_type: "TAG", expression: "TagA", selects: |s| s % 2 == 0 },
    Filter { name: "SQL92 TAGS = 'TagA'", expression_type: "SQL92", expression: "TAGS = 'TagA'", selects: |s| s % 2 == 0 },
    Filter { name: "SQL92 a < 5", expression_type: "SQL92", expression: "a < 5", selects: |s| s % 10 < 5 },
    Filter {
        name: "SQL92 a BETWEEN 2 AND 6 AND (TAGS IN ('TagA','TagC') OR a = 9)",
        expression_type: "SQL92",
        expression: "a BETWEEN 2 AND 6 AND (TAGS IN ('TagA', 'TagC') OR a = 9)",
        selects: |s| (2..=6).contains(&(s % 10)) && s % 2 == 0,
    },
];

#[derive(Debug, Clone)]
pub struct FilterBenchSpec {
    pub messages: u64,
    pub message_bytes: usize,
    pub pull_batch: i32,
    pub rounds: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct FilterResult {
    pub filter: String,
    pub expression_type: String,
    pub expression: String,
    pub rounds: usize,
    pub scanned: u64,
    pub selected_per_round: u64,
    pub pulls_per_round: u64,
    /// Medians over the rounds.
    pub scanned_per_sec: f64,
    pub selected_per_sec: f64,
    pub cpu_us_per_scanned: f64,
    pub seconds_per_round: Vec<f64>,
}

/// One connection's blocking request/response exchanges.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    chunk: Vec<u8>,
    next_opaque: i32,
}

impl Conn {
    fn open(port: u16) -> Result<Self, String> {
        let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(|e| e.to_string())?;
        Ok(Self { stream, buf: BytesMut::new(), chunk: vec![0u8; 1 << 20], next_opaque: 1 })
    }

    fn write(&mut self, mut cmd: RemotingCommand) -> Result<i32, String> {
        cmd.opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        let mut out = BytesMut::new();
        cmd.encode(&mut out).map_err(|e| e.to_string())?;
        self.stream.write_all(&out).map_err(|e| e.to_string())?;
        Ok(cmd.opaque)
    }

    fn read(&mut self) -> Result<RemotingCommand, String> {
        loop {
            if let Some(r) = RemotingCommand::decode(&mut self.buf, &FrameLimits::default()).map_err(|e| e.to_string())? {
                return Ok(r);
            }
            let n = self.stream.read(&mut self.chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("broker closed the connection".into());
            }
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }

    fn call(&mut self, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
        self.write(cmd)?;
        self.read()
    }
}

fn send_request(seq: u64, body: &[u8]) -> RemotingCommand {
    RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_ext("a", "FilterBenchProducer")
        .with_ext("b", TOPIC)
        .with_ext("c", "TBW102")
        .with_ext("d", "1")
        .with_ext("e", "0")
        .with_ext("f", "0")
        .with_ext("g", "0")
        .with_ext("h", "0")
        .with_ext("i", format!("TAGS\u{1}{}\u{2}a\u{1}{}\u{2}", tag_of(seq), seq % 10))
        .with_ext("j", "0")
        .with_ext("k", "false")
        .with_body(body.to_vec())
}

fn fill(conn: &mut Conn, spec: &FilterBenchSpec) -> Result<(), String> {
    let body = vec![b'x'; spec.message_bytes];
    let (mut sent, mut answered) = (0u64, 0u64);
    while answered < spec.messages {
        while sent < spec.messages && sent - answered < FILL_IN_FLIGHT as u64 {
            conn.write(send_request(sent, &body))?;
            sent += 1;
        }
        let r = conn.read()?;
        if r.code != rs::SUCCESS {
            return Err(format!("fill: send answered {}: {:?}", r.code, r.remark));
        }
        answered += 1;
    }
    Ok(())
}

fn pull_request(filter: &Filter, offset: i64, batch: i32) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: batch,
        // The subscription travels with every pull (a lite-pull consumer's way).
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some(filter.expression.into()),
        sub_version: 0,
        expression_type: Some(filter.expression_type.into()),
        max_msg_bytes: None,
    };
    RemotingCommand::request(rq::PULL_MESSAGE).with_header(&header)
}

/// Reads the queue end to end under `filter`: (selected count, pulls, seconds, CPU µs).
fn read_all(conn: &mut Conn, filter: &Filter, spec: &FilterBenchSpec) -> Result<(u64, u64, f64, f64), String> {
    let (mut offset, mut selected, mut pulls) = (0i64, 0u64, 0u64);
    let cpu_before = process_cpu_us();
    let started = Instant::now();
    while offset < spec.messages as i64 {
        let r = conn.call(pull_request(filter, offset, spec.pull_batch))?;
        pulls += 1;
        match r.code {
            rs::SUCCESS => {
                let mut at = 0;
                while at < r.body.len() {
                    let view = StoredMessageView::parse(&r.body[at..]).map_err(|e| format!("pull body: {e}"))?;
                    let seq = view.queue_offset() as u64;
                    if !(filter.selects)(seq) {
                        return Err(format!("{}: message {seq} delivered but not selected by the expression", filter.name));
                    }
                    selected += 1;
                    at += view.total_size();
                }
            }
            rs::PULL_RETRY_IMMEDIATELY => {}
            code => return Err(format!("{}: pull at {offset} answered {code}: {:?}", filter.name, r.remark)),
        }
        let next: i64 = r.ext("nextBeginOffset").and_then(|v| v.parse().ok()).ok_or("pull answer without nextBeginOffset")?;
        if next <= offset {
            return Err(format!("{}: pull at {offset} did not move (next {next})", filter.name));
        }
        offset = next;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok((selected, pulls, seconds, process_cpu_us() - cpu_before))
}

/// This process's user + system CPU time, µs.
fn process_cpu_us() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } == 0;
    if !ok {
        return 0.0;
    }
    // SAFETY: initialised by the successful call above.
    let u = unsafe { usage.assume_init() };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(u.ru_utime) + us(u.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(spec: &FilterBenchSpec, dir: &Path) -> Result<Vec<FilterResult>, String> {
    let store_root = dir.join("filter-bench");
    let _ = std::fs::remove_dir_all(&store_root);
    let mut config = BrokerConfig::default();
    config.store_root = store_root.clone();
    config.listen_port = 0;
    config.shard_count = 1;
    config.broker_ip = Some("127.0.0.1".into());
    config.enable_property_filter = true;
    config.store.segment_bytes = 256 * 1024 * 1024;
    let broker = launch::start(config).map_err(|e| format!("broker did not start: {e}"))?;
    let outcome = (|| {
        let mut conn = Conn::open(broker.addr.port())?;
        let create = RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", TOPIC)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", "1")
            .with_ext("writeQueueNums", "1")
            .with_ext("perm", "6")
            .with_ext("topicFilterType", "SINGLE_TAG");
        let r = conn.call(create)?;
        if r.code != rs::SUCCESS {
            return Err(format!("topic creation failed: {:?}", r.remark));
        }
        fill(&mut conn, spec)?;
        // One untimed pass first, so the first filter measured does not also pay for
        // the first reads of the fresh store.
        read_all(&mut conn, &FILTERS[0], spec)?;
        let mut samples: Vec<Vec<(u64, u64, f64, f64)>> = vec![Vec::new(); FILTERS.len()];
        for round in 0..spec.rounds {
            for (i, filter) in FILTERS.iter().enumerate() {
                let sample = read_all(&mut conn, filter, spec)?;
                let want = (0..spec.messages).filter(|&s| (filter.selects)(s)).count() as u64;
                if sample.0 != want {
                    return Err(format!("{}: selected {} of {}, the expression names {want}", filter.name, sample.0, spec.messages));
                }
                eprintln!("  round {round}: {:<60} {:>10.0} scanned/s", filter.name, spec.messages as f64 / sample.2);
                samples[i].push(sample);
            }
        }
        Ok(FILTERS
            .iter()
            .zip(samples)
            .map(|(f, s)| FilterResult {
                filter: f.name.into(),
                expression_type: f.expression_type.into(),
                expression: f.expression.into(),
                rounds: spec.rounds,
                scanned: spec.messages,
                selected_per_round: s[0].0,
                pulls_per_round: s[0].1,
                scanned_per_sec: median(s.iter().map(|x| spec.messages as f64 / x.2).collect()),
                selected_per_sec: median(s.iter().map(|x| x.0 as f64 / x.2).collect()),
                cpu_us_per_scanned: median(s.iter().map(|x| x.3 / spec.messages as f64).collect()),
                seconds_per_round: s.iter().map(|x| x.2).collect(),
            })
            .collect())
    })();
    broker.stop();
    broker.join();
    let _ = std::fs::remove_dir_all(&store_root);
    outcome
}

pub fn markdown(results: &[FilterResult], header: &str) -> String {
    let mut md = String::from(header);
    let base = results.iter().find(|r| r.expression == "TagA" && r.expression_type == "TAG").map(|r| r.scanned_per_sec).unwrap_or(1.0);
    md.push_str("\n| filter | selected | pulls | scanned msg/s | selected msg/s | vs TAG TagA (scanned/s) | CPU µs / scanned msg |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for r in results {
        md.push_str(&format!(
            "| `{}` | {} | {} | {:.0} | {:.0} | {:.2}x | {:.2} |\n",
            r.filter, r.selected_per_round, r.pulls_per_round, r.scanned_per_sec, r.selected_per_sec, r.scanned_per_sec / base, r.cpu_us_per_scanned
        ));
    }
    md
}
