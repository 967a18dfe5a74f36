//! Keeps the SEND_MESSAGE_V2 path lean: heap allocations, allocated bytes and user-space
//! copies of the body per send, measured on the broker's shard thread while a raw client
//! pipelines sends with realistic headers (JSON and ROCKETMQ binary encodings).
//!
//! Its own test binary because it installs a `#[global_allocator]`: a counting wrapper
//! of `System` that counts allocations (reallocs included) and their bytes per thread,
//! so that only the shard thread is measured (not this test's client, nor glommio's
//! helper threads). Each thread gets a counter slot on its first allocation, registered
//! with the thread's OS name (`pthread_getname_np`, which allocates nothing), and the test
//! reads the slot of `ringmq-shard-0-<id>`.
//!
//! Body copies come from `ringmq_broker::copy_probe` (a counter per place a body is
//! copied), divided by what each place copies per message.
//!
//! Diagnosis: `RINGMQ_ALLOC_TRACE=<sends>` measures that many sends per encoding and
//! prints the shard thread's allocations of the window grouped by backtrace (the
//! bounds are not asserted then: capturing backtraces is slow).

mod common;

use common::{create_topic, Broker, Conn, Got, CALL_TIMEOUT};
use ringmq_client::message::properties::keys;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use ringmq_client::remoting::headers::SendMessageRequestHeaderV2;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

// ---------------------------------------------------------------- counting allocator

/// Threads this process may start over its life (an in-process broker, tokio-free);
/// later threads share the last slot, which no assertion reads.
const THREAD_SLOTS_MAX: usize = 1024;
/// Linux thread names are at most 15 bytes plus the NUL.
const THREAD_NAME_MAX_BYTES: usize = 16;

struct Slot {
    allocs: AtomicU64,
    bytes: AtomicU64,
}

static SLOTS: [Slot; THREAD_SLOTS_MAX] = [const { Slot { allocs: AtomicU64::new(0), bytes: AtomicU64::new(0) } }; THREAD_SLOTS_MAX];
static SLOT_NAMES: Mutex<[[u8; THREAD_NAME_MAX_BYTES]; THREAD_SLOTS_MAX]> = Mutex::new([[0; THREAD_NAME_MAX_BYTES]; THREAD_SLOTS_MAX]);
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);

/// Backtrace capture (diagnosis): on while `TRACING`, for allocations in slot `TRACED_SLOT`.
static TRACING: AtomicBool = AtomicBool::new(false);
static TRACED_SLOT: AtomicUsize = AtomicUsize::new(usize::MAX);
static TRACES: Mutex<Vec<std::backtrace::Backtrace>> = Mutex::new(Vec::new());

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Set while this thread is inside the counter's own bookkeeping (registration,
    /// backtrace capture), whose allocations are neither counted nor traced.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// A thread's name is read on its first `NAME_READS` allocations (a syscall each): std
/// names a new thread after its first allocations, and an unnamed one shows its
/// process's name.
const NAME_READS: u64 = 256;

fn register_thread() -> usize {
    SLOTS_USED.fetch_add(1, Ordering::Relaxed).min(THREAD_SLOTS_MAX - 1)
}

fn read_name(slot: usize) {
    let mut name = [0u8; THREAD_NAME_MAX_BYTES];
    // SAFETY: the buffer is valid for its length; the call writes a NUL-terminated name
    // of the calling thread and allocates nothing.
    let rc = unsafe { libc::pthread_getname_np(libc::pthread_self(), name.as_mut_ptr().cast(), name.len()) };
    if rc == 0 {
        if let Ok(mut names) = SLOT_NAMES.lock() {
            names[slot] = name;
        }
    }
}

fn count(size: usize) {
    // `try_with`: a thread being torn down still allocates; it is not counted.
    let _ = BUSY.try_with(|busy| {
        if busy.get() {
            return;
        }
        busy.set(true);
        let slot = MY_SLOT.with(|s| {
            if s.get() == usize::MAX {
                s.set(register_thread());
            }
            s.get()
        });
        if SLOTS[slot].allocs.fetch_add(1, Ordering::Relaxed) < NAME_READS {
            read_name(slot);
        }
        SLOTS[slot].bytes.fetch_add(size as u64, Ordering::Relaxed);
        if TRACING.load(Ordering::Relaxed) && TRACED_SLOT.load(Ordering::Relaxed) == slot {
            let trace = std::backtrace::Backtrace::force_capture();
            if let Ok(mut traces) = TRACES.lock() {
                traces.push(trace);
            }
        }
        busy.set(false);
    });
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The counter slot of the busiest thread whose name starts with `prefix`: glommio
/// names an executor's thread `<name>-<id>` (cut to 15 bytes), and its blocking pool's
/// threads inherit that name.
fn slot_named(prefix: &str, from: usize) -> Option<usize> {
    let names = SLOT_NAMES.lock().map(|n| *n).ok()?;
    let used = SLOTS_USED.load(Ordering::Relaxed).min(THREAD_SLOTS_MAX);
    (from..used).filter(|&i| names[i].starts_with(prefix.as_bytes())).max_by_key(|&i| slot_counts(i).0)
}

fn thread_names() -> Vec<String> {
    // Copied out first: formatting allocates, and an allocation may take the lock.
    let Ok(names) = SLOT_NAMES.lock().map(|n| *n) else { return Vec::new() };
    let used = SLOTS_USED.load(Ordering::Relaxed).min(THREAD_SLOTS_MAX);
    names[..used].iter().map(|n| String::from_utf8_lossy(&n[..n.iter().position(|&b| b == 0).unwrap_or(n.len())]).into_owned()).collect()
}

fn slot_counts(slot: usize) -> (u64, u64) {
    (SLOTS[slot].allocs.load(Ordering::Relaxed), SLOTS[slot].bytes.load(Ordering::Relaxed))
}

// ---------------------------------------------------------------- the workload

const TOPIC: &str = "LeanSendTopic";
const QUEUES: i32 = 4;
const BODY_BYTES: usize = 1024;
const WARMUP_SENDS: usize = 2_000;
const MEASURED_SENDS: usize = 20_000;
const IN_FLIGHT: usize = 64;
const SEGMENT_BYTES: u64 = 256 * 1024 * 1024;
/// How long the async flusher may take to write what the run appended.
const FLUSH_SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The thread of shard 0 (`runtime.rs` names them `ringmq-shard-<i>`, glommio adds
/// `-<id>`).
const SHARD_THREAD: &str = "ringmq-shard-0-";

/// Allocations per send the shard thread may make (the target). Reached: ~0.3.
/// A send allocates nothing of its own (header fields are spans of the frame, the
/// record is encoded into the CommitLog's tail, the response's fields live in its
/// inline buffer, request tasks are reused); what remains is amortized: glommio's
/// reactor sources and timers per socket read, the receive buffer renewed when frames
/// still in use pin it, a flush's last DMA buffer, index and ConsumeQueue growth.
const ALLOCS_PER_SEND_MAX: f64 = 5.0;
/// Allocated bytes per send. Reached: ~1.2-2.7 KB, all of it the amortized buffers
/// above (a fresh 64 KiB+ receive buffer every few dozen sends — how often depends on
/// how reads split the stream, so it varies run to run — and the flush's last partial
/// 1 MiB DMA buffer). Body copies are counted directly by the copy probes; this bound
/// catches a return of per-send heap state (before: ~9.5 KB per send) without failing
/// on the receive buffer's timing.
const BYTES_PER_SEND_MAX: f64 = 6144.0;
/// User-space copies of a body per send: into the CommitLog's tail, and from the tail
/// into the DMA write buffer. (The socket read and the write itself are the kernel's.)
const BODY_COPIES_MAX: f64 = 2.0;
/// Copies are counted in bytes; the last block of each flush is written again by the
/// next one (group commit), which adds a little on top of whole copies.
const BODY_COPIES_SLACK: f64 = 0.1;

/// The properties Java's `DefaultMQProducer` sends for a message with keys and a tag
/// (`MessageClientIDSetter`'s 32-hex-digit UNIQ_KEY, WAIT=true).
fn properties(n: usize) -> String {
    format!(
        "{}\u{1}order-{n}\u{2}{}\u{1}7F0000010FA018B4AAC2{n:012X}\u{2}{}\u{1}true\u{2}{}\u{1}TagA\u{2}",
        keys::KEYS,
        keys::UNIQ_KEY,
        keys::WAIT,
        keys::TAGS
    )
}

fn send_request(n: usize, st: SerializeType, body: &[u8]) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "please_rename_unique_group_name".into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: 4,
        e: (n % QUEUES as usize) as i32,
        f: 0,
        g: 1_700_000_000_000 + n as i64,
        h: 0,
        i: Some(properties(n)),
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_header(&header)
        .with_body(body.to_vec())
        .with_opaque(n as i32)
        .with_serialize_type(st);
    // What Java's client announces.
    cmd.language = "JAVA".into();
    cmd.version = 453;
    cmd
}

/// What the sends of one window put through the two kinds of copy site.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    frame_bytes: u64,
    record_bytes: u64,
}

/// Sends `count` messages (numbered from `first`) with `IN_FLIGHT` pipelined and checks
/// every response is SUCCESS.
fn run(conn: &mut Conn, first: usize, count: usize, st: SerializeType, store_host: SocketAddr, born_host: SocketAddr) -> Sent {
    let body = vec![b'x'; BODY_BYTES];
    let deadline = Instant::now() + CALL_TIMEOUT * 10;
    let mut sent = Sent::default();
    let (mut next, mut answered) = (first, first);
    let end = first + count;
    let mut out = Vec::new();
    // Queue offsets by send number: responses may come in any order (opaque-matched),
    // but each queue must have stored its messages in the order they were sent.
    let mut offsets = vec![None; count];
    while answered < end {
        while next < end && next - answered < IN_FLIGHT {
            let cmd = send_request(next, st, &body);
            sent.frame_bytes += common::encode(&cmd).len() as u64;
            out.extend_from_slice(&common::encode(&cmd));
            let props = properties(next);
            sent.record_bytes += ringmq_client::message::stored::encoded_len(TOPIC.len(), BODY_BYTES, props.len(), &born_host, &store_host) as u64;
            next += 1;
        }
        if !out.is_empty() {
            conn.s.write_all(&out).expect("write sends");
            out.clear();
        }
        match conn.read(deadline) {
            Got::Cmd(r) => {
                assert!(r.is_response(), "unexpected request from the broker: {r:?}");
                assert_eq!(r.code, rs::SUCCESS, "send {}: {:?}", r.opaque, r.remark);
                assert!(r.ext("msgId").is_some_and(|m| m.len() == 32), "msgId in {:?}", r.ext_fields);
                let n = (r.opaque as usize).checked_sub(first).filter(|&n| n < count).unwrap_or_else(|| panic!("unexpected opaque {}", r.opaque));
                let offset: u64 = r.ext("queueOffset").and_then(|o| o.parse().ok()).expect("queueOffset");
                assert!(offsets[n].replace(offset).is_none(), "two responses to send {}", r.opaque);
                answered += 1;
            }
            other => panic!("send {answered}: {other:?}"),
        }
    }
    for queue in 0..QUEUES as usize {
        let stored: Vec<u64> = (queue..count).step_by(QUEUES as usize).filter(|n| (first + n) % QUEUES as usize == queue).map(|n| offsets[n].expect("answered")).collect();
        assert!(stored.windows(2).all(|w| w[0] < w[1]), "queue {queue} stored out of send order: {stored:?}");
    }
    sent
}

struct Figures {
    sent: Sent,
    allocs_per_send: f64,
    bytes_per_send: f64,
    copies: [f64; ringmq_broker::copy_probe::SITES.len()],
}

fn measure(conn: &mut Conn, first: usize, sends: usize, st: SerializeType, slot: usize, store_host: SocketAddr, born_host: SocketAddr) -> Figures {
    let (allocs_before, bytes_before) = slot_counts(slot);
    let copies_before = ringmq_broker::copy_probe::snapshot();
    let sent = run(conn, first, sends, st, store_host, born_host);
    let (allocs_after, bytes_after) = slot_counts(slot);
    let copies_after = ringmq_broker::copy_probe::snapshot();
    let copies = std::array::from_fn(|i| {
        let unit = match ringmq_broker::copy_probe::SITES[i] {
            ringmq_broker::copy_probe::Site::NetRead => sent.frame_bytes,
            _ => sent.record_bytes,
        };
        (copies_after[i] - copies_before[i]) as f64 / unit as f64
    });
    Figures {
        sent,
        allocs_per_send: (allocs_after - allocs_before) as f64 / sends as f64,
        bytes_per_send: (bytes_after - bytes_before) as f64 / sends as f64,
        copies,
    }
}

/// Prints the traced allocations grouped by the broker-side frames of their backtraces.
fn print_traces(sends: usize) {
    let traces = std::mem::take(&mut *TRACES.lock().expect("traces"));
    let mut groups: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for t in &traces {
        let text = t.to_string();
        let frames: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.contains(": ") && (l.contains("ringmq") || l.contains("glommio") || l.contains("bytes::") || l.contains("serde")))
            .filter(|l| !l.contains("send_allocs::"))
            .take(8)
            .collect();
        // Nothing recognisable (inlined frames): the raw top of the trace instead.
        let frames = if frames.is_empty() { text.lines().map(str::trim).filter(|l| l.contains(": ")).skip(4).take(8).collect() } else { frames };
        *groups.entry(frames.join("\n    ")).or_default() += 1;
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.cmp(&a.1));
    for (frames, n) in groups.iter().take(40) {
        println!("{:.2} per send:\n    {frames}", *n as f64 / sends as f64);
    }
}

/// Host route mode with one shard, then shard route mode with two (sends to shard 0's
/// own port in its queue ids: the edge's translation is on the measured path), one
/// after the other so that each broker's shard-0 thread is told apart (`slot_named`).
#[test]
fn send_message_v2_stays_lean() {
    lean_run(ringmq_broker::config::RouteMode::Host, 1);
    lean_run(ringmq_broker::config::RouteMode::Shard, 2);
}

fn lean_run(route_mode: ringmq_broker::config::RouteMode, shards: usize) {
    println!("{route_mode:?} route mode, {shards} shard(s):");
    let trace_sends: Option<usize> = std::env::var("RINGMQ_ALLOC_TRACE").ok().and_then(|v| v.parse().ok());
    ringmq_broker::copy_probe::enable();
    let slots_before = SLOTS_USED.load(Ordering::Relaxed);
    let flush_staged_before = ringmq_broker::copy_probe::snapshot()[ringmq_broker::copy_probe::Site::FlushStage as usize];
    let broker = Broker::start(
        |c| {
            c.shard_count = shards;
            c.route_mode = route_mode;
            c.store.flush_mode = ringmq_broker::store::config::FlushMode::Async;
            // The run writes ~60 MiB: no 1 GiB segment to pre-zero first.
            c.store.segment_bytes = SEGMENT_BYTES;
        },
        &[],
    );
    let mut conn = Conn::open(broker.addr);
    let r = conn.call(create_topic(TOPIC, QUEUES));
    assert_eq!(r.code, rs::SUCCESS, "create topic: {:?}", r.remark);
    let born_host = conn.s.local_addr().expect("local addr");
    let store_host = broker.addr;
    let slot = slot_named(SHARD_THREAD, slots_before).unwrap_or_else(|| panic!("no thread named {SHARD_THREAD}* allocated; threads: {:?}", thread_names()));

    let mut first = 0;
    let mut report = Vec::new();
    let mut record_bytes_total = 0;
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        record_bytes_total += run(&mut conn, first, WARMUP_SENDS, st, store_host, born_host).record_bytes;
        first += WARMUP_SENDS;
        let sends = trace_sends.unwrap_or(MEASURED_SENDS);
        if trace_sends.is_some() {
            TRACED_SLOT.store(slot, Ordering::Relaxed);
            TRACING.store(true, Ordering::Relaxed);
        }
        let f = measure(&mut conn, first, sends, st, slot, store_host, born_host);
        TRACING.store(false, Ordering::Relaxed);
        record_bytes_total += f.sent.record_bytes;
        first += sends;
        if trace_sends.is_some() {
            print_traces(sends);
        }
        report.push((st, f));
    }
    // The async flusher writes when it has `flush_min_bytes` or on its interval, so one
    // window's flushes may land in the next: flush staging is measured over the run.
    let flush_site = ringmq_broker::copy_probe::Site::FlushStage as usize;
    let deadline = Instant::now() + FLUSH_SETTLE_TIMEOUT;
    let staged = || ringmq_broker::copy_probe::snapshot()[flush_site] - flush_staged_before;
    while staged() < record_bytes_total && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let flush_copies = staged() as f64 / record_bytes_total as f64;
    let mut checks = Vec::new();
    for (st, mut f) in report {
        f.copies[flush_site] = flush_copies;
        let copies_total: f64 = f.copies.iter().sum();
        println!(
            "{st:?} header: {:.2} allocations and {:.0} bytes allocated per send; body copies {:.2} (net read {:.2}, record scratch {:.2}, tail {:.2}, flush staging {:.2} over the run)",
            f.allocs_per_send, f.bytes_per_send, copies_total, f.copies[0], f.copies[1], f.copies[2], f.copies[3]
        );
        checks.push((st, f, copies_total));
    }
    if trace_sends.is_some() {
        return;
    }
    for (st, f, copies_total) in checks {
        assert!(f.allocs_per_send <= ALLOCS_PER_SEND_MAX, "{st:?}: {:.2} allocations per send (max {ALLOCS_PER_SEND_MAX})", f.allocs_per_send);
        assert!(f.bytes_per_send < BYTES_PER_SEND_MAX, "{st:?}: {:.0} bytes allocated per send (max {BYTES_PER_SEND_MAX})", f.bytes_per_send);
        assert!(copies_total <= BODY_COPIES_MAX + BODY_COPIES_SLACK, "{st:?}: {copies_total:.2} user-space copies of each body (max {BODY_COPIES_MAX})");
    }
}
