//! Durability of delayed messages across SIGKILL, against the real broker process
//! (issue 11's proof: "SIGKILL with thousands of delayed messages pending: each
//! delivered, none early, none lost"; ARCHITECTURE.md, `schedule/` and
//! `shard/delay.rs`: a level's recorded progress covers only durable copies, so after a
//! crash nothing due is lost and only the copies made since the last persist come again).
//!
//! A child broker (2 shards, sync flush, 8 MiB segments, `message_delay_level =
//! "1s 2s 3s"`) gets `MESSAGES` SEND_MESSAGE_V2 requests to the `TOPIC_QUEUES` queues
//! of one topic, pipelined over `CONNECTIONS` connections (at most `WINDOW` unanswered
//! each, chunks spread over `SEND_SPREAD`), with DELAY levels 1..=3 (every `TIMER_EVERY`th a
//! RocketMQ 5 timer with the same delay instead) and, every `LEVEL_9_EVERY`th, level 9 (clamped to the
//! last level, 3 s). Each body names its id, its level and the wall-clock ms taken just
//! before its request was written; each message has its own KEYS and UNIQ_KEY. Sends
//! answered SUCCESS are "acknowledged".
//!
//! `KILL_1_AFTER` after the first send the broker is SIGKILLed (level 1 partly
//! delivered, levels 2 and 3 all pending), restarted on the same store, SIGKILLed again
//! `KILL_2_AFTER_RESTART` after it listens (during delivery), and restarted. Once every
//! message is due plus `DRAIN_SLACK`, every queue of the topic is drained from offset 0
//! (PULL_MESSAGE, no suspend), and:
//! - every acknowledged message was delivered at least once (duplicates are allowed and
//!   counted: at-least-once), and a copy is delivered again only if it was made within
//!   `DUPLICATE_WINDOW_MS` before a kill (progress not yet persisted);
//! - no copy was delivered early: its STORETIMESTAMP ≥ send ms + delay(level) −
//!   `CLOCK_SLACK_MS` (the send ms is taken before the request is written, so the
//!   broker's store time, hence its due time, can only be later);
//! - a delivered copy keeps its topic, queue, tags, keys and UNIQ_KEY and carries no
//!   DELAY; queue offsets are contiguous from 0; nothing we did not send appears;
//! - lateness (first copy's store time − (send ms + delay)) is at most `LATE_MAX_MS`
//!   for a message whose due time is outside both kill windows, and at most the rest of
//!   the window (downtime) + `LATE_MAX_MS` for one due inside a window (from
//!   `LATE_MAX_MS` before a kill until the restarted broker listens);
//! - GET_ALL_DELAY_OFFSET's `offsetTable` (summed over shards) of each level used is at
//!   least that level's acknowledged sends and at most its written sends (everything
//!   stored in a level was delivered and settled by then).
//!
//! The disk watermarks are off (see the config below): a shared machine's full disk
//! would otherwise stop delivery and look like loss. Every wait has a deadline; takes
//! about 6 s. Prints one `delay_sigkill summary:` line with the figures.

mod common;

use common::{create_topic, encode, pull_header, pull_with, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn, Got};
use ringmq_client::message::properties::Properties;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SHARDS: usize = 2;
const TOPIC: &str = "DELAY_SIGKILL";
const TOPIC_QUEUES: i32 = 8;
const MESSAGES: usize = 3_000;
const CONNECTIONS: usize = 4;
/// Unanswered sends per connection (well below the broker's 1024 in flight).
const WINDOW: usize = 128;
/// Requests written at once.
const CHUNK: usize = 32;
/// Every this many messages one is sent with DELAY = 9 (clamps to level 3).
const LEVEL_9_EVERY: usize = 150;
const DELAY_LEVELS: &str = "1s 2s 3s";
const DELAYS_MS: [i64; 3] = [1_000, 2_000, 3_000];
/// The sends are spread over this much time (level 1 is then partly delivered at the
/// first kill, level 2 partly at the second).
const SEND_SPREAD: Duration = Duration::from_millis(500);
/// First kill, after the first send was written.
const KILL_1_AFTER: Duration = Duration::from_millis(1_200);
/// Second kill, after the first restarted broker listens.
const KILL_2_AFTER_RESTART: Duration = Duration::from_millis(800);
/// Waited past the last due time before draining.
const DRAIN_SLACK: Duration = Duration::from_secs(2);
/// Store timestamps and our send stamps are whole wall-clock ms of one clock.
const CLOCK_SLACK_MS: i64 = 5;
/// Lateness bound outside kill windows: the 100 ms idle poll, pipelined sends queued
/// behind sync flushes (the send stamp is taken before the write), restart recovery
/// and a loaded 2-core machine.
const LATE_MAX_MS: i64 = 2_500;
/// A copy may be delivered again after a kill if it was made at most this long before
/// it: progress is persisted every second (`DELAY_OFFSETS_PERSIST_INTERVAL_MS`) at the
/// end of a delivery pass; the rest is scheduling slack.
const DUPLICATE_WINDOW_MS: i64 = 2_000;
/// The same for timers: the wheel's bucket width plus that slack.
const TIMER_DUPLICATE_WINDOW_MS: i64 = 62_000;
/// Longest the sending, the drain, or one request may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
const PULL_BATCH: i32 = 32;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

/// Every this many messages one is a RocketMQ 5 timer instead (`TIMER_DELAY_MS` = its
/// level's delay): timers wait in the on-disk wheel, not in the schedule queues.
const TIMER_EVERY: usize = 4;

fn is_timer(id: usize) -> bool {
    id % TIMER_EVERY == TIMER_EVERY - 2
}

/// The level a message is sent with (what goes into DELAY; a timer's delay is the
/// same level's).
fn sent_level(id: usize) -> usize {
    if id % LEVEL_9_EVERY == LEVEL_9_EVERY - 1 {
        9
    } else {
        1 + id % 3
    }
}

/// The level the broker applies (past the table: the last).
fn effective_level(level: usize) -> usize {
    level.min(DELAYS_MS.len())
}

fn queue_of(id: usize) -> i32 {
    (id % TOPIC_QUEUES as usize) as i32
}

fn uniq_key(id: usize) -> String {
    format!("DSK{id:08}")
}

fn key_of(id: usize) -> String {
    format!("k{id}")
}

fn tags_of(level: usize) -> String {
    format!("t{level}")
}

/// What the sending recorded for one message.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    /// Wall-clock ms taken before its request was written; `None`: never written.
    sent_ms: Option<i64>,
    /// The response code, if one came.
    code: Option<i32>,
}

/// Sends `ids` on a fresh connection in chunks of `CHUNK`, the chunks spread evenly over
/// `SEND_SPREAD` from `start` and at most `WINDOW` unanswered, until all are answered,
/// the connection closes (the broker was killed) or `deadline`.
fn send_share(addr: SocketAddr, ids: Vec<usize>, table: Arc<Mutex<Vec<Sent>>>, start: Instant, deadline: Instant) {
    let mut conn = Conn::open(addr);
    let chunks = ids.len().div_ceil(CHUNK).max(1) as u32;
    let chunk_at = |next: usize| start + SEND_SPREAD * (next / CHUNK) as u32 / chunks;
    // opaque = id + 1
    let mut next = 0;
    let mut unanswered: BTreeSet<i32> = BTreeSet::new();
    while next < ids.len() || !unanswered.is_empty() {
        let room = next < ids.len() && unanswered.len() + CHUNK <= WINDOW;
        if room && Instant::now() >= chunk_at(next) {
            let chunk = &ids[next..(next + CHUNK).min(ids.len())];
            let sent_ms = now_ms();
            let mut bytes = Vec::new();
            for &id in chunk {
                let level = sent_level(id);
                let mut header = send_header(TOPIC, queue_of(id));
                let wait = if is_timer(id) {
                    format!("TIMER_DELAY_MS\u{1}{}\u{2}", DELAYS_MS[effective_level(level) - 1])
                } else {
                    format!("DELAY\u{1}{level}\u{2}")
                };
                header.i = Some(format!("TAGS\u{1}{}\u{2}KEYS\u{1}{}\u{2}UNIQ_KEY\u{1}{}\u{2}{wait}", tags_of(level), key_of(id), uniq_key(id)));
                header.g = sent_ms;
                let body = format!("dsk id={id} level={level} sent={sent_ms}");
                bytes.extend(encode(&send_with(header, body.as_bytes(), id as i32 + 1, SerializeType::RocketMq)));
            }
            {
                let mut t = table.lock().unwrap();
                for &id in chunk {
                    t[id].sent_ms = Some(sent_ms);
                    unanswered.insert(id as i32 + 1);
                }
            }
            conn.write(&bytes, 0);
            next += chunk.len();
            continue;
        }
        // Read answers until the next chunk is due (or, with the window full, any answer).
        let wake = if room { chunk_at(next).min(deadline) } else { deadline };
        match conn.read(wake) {
            Got::Cmd(r) if r.is_response() && unanswered.remove(&r.opaque) => {
                table.lock().unwrap()[(r.opaque - 1) as usize].code = Some(r.code);
            }
            Got::Cmd(_) => {}
            Got::Closed => return,
            Got::Timeout if Instant::now() >= deadline => return,
            Got::Timeout => {}
        }
    }
}

/// One delivered copy, as pulled.
#[derive(Debug, Clone)]
struct Copy {
    id: usize,
    store_ms: i64,
}

/// Parses the body "dsk id=<id> level=<level> sent=<ms>".
fn parse_body(body: &[u8]) -> Option<(usize, usize, i64)> {
    let text = std::str::from_utf8(body).ok()?;
    let mut parts = text.split(' ');
    (parts.next()? == "dsk").then_some(())?;
    let id = parts.next()?.strip_prefix("id=")?.parse().ok()?;
    let level = parts.next()?.strip_prefix("level=")?.parse().ok()?;
    let sent = parts.next()?.strip_prefix("sent=")?.parse().ok()?;
    parts.next().is_none().then_some((id, level, sent))
}

/// Drains every queue of the topic from offset 0; checks each record's shape against
/// what was sent (`problems` gets the violations) and returns the copies.
fn drain(addr: SocketAddr, sent: &[Sent], problems: &mut Vec<String>) -> Vec<Copy> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let mut conn = Conn::open(addr);
    let mut copies = Vec::new();
    let mut opaque = 1_000_000;
    for queue in 0..TOPIC_QUEUES {
        let mut offset = 0i64;
        loop {
            assert!(Instant::now() < deadline, "draining took over {DRAIN_TIMEOUT:?} (queue {queue} at offset {offset})");
            opaque += 1;
            let mut header = pull_header(TOPIC, queue, offset);
            header.max_msg_nums = PULL_BATCH;
            let cmd = pull_with(&header, opaque, SerializeType::RocketMq);
            let r = conn.call_by(&cmd, deadline).unwrap_or_else(|| panic!("no answer to a pull of queue {queue} at {offset}"));
            match r.code {
                rs::SUCCESS => {}
                rs::PULL_NOT_FOUND => break,
                rs::PULL_RETRY_IMMEDIATELY => continue,
                code => panic!("pull of queue {queue} at {offset}: code {code} {:?}", r.remark),
            }
            let mut at = 0;
            while at < r.body.len() {
                let v = StoredMessageView::parse_verified(&r.body[at..]).expect("a stored record");
                at += v.total_size();
                let where_ = format!("queue {queue} offset {}", v.queue_offset());
                if v.queue_offset() != offset {
                    problems.push(format!("{where_}: expected offset {offset} (offsets not contiguous)"));
                }
                offset = v.queue_offset() + 1;
                let Some((id, level, sent_ms)) = parse_body(v.body()) else {
                    problems.push(format!("{where_}: a body nobody sent: {:?}", String::from_utf8_lossy(v.body())));
                    continue;
                };
                if sent.get(id).map_or(true, |s| s.sent_ms != Some(sent_ms) || sent_level(id) != level) {
                    problems.push(format!("{where_}: id {id} level {level} sent {sent_ms} was not sent so"));
                    continue;
                }
                let props = Properties::decode(v.properties_bytes()).expect("properties decode");
                let topic = v.topic().unwrap_or("?");
                let uniq = uniq_key(id);
                let (tags, key) = (tags_of(level), key_of(id));
                let got = (topic, v.queue_id(), props.get("TAGS"), props.get("KEYS"), props.get("UNIQ_KEY"), props.get("DELAY").or(props.get("TIMER_DELAY_MS")));
                let want = (TOPIC, queue_of(id), Some(tags.as_str()), Some(key.as_str()), Some(uniq.as_str()), None);
                if got != want {
                    problems.push(format!("{where_}: id {id}: (topic, queue, TAGS, KEYS, UNIQ_KEY, DELAY) {got:?}, want {want:?}"));
                }
                copies.push(Copy { id, store_ms: v.store_timestamp_ms() });
            }
            let next: i64 = r.ext("nextBeginOffset").and_then(|o| o.parse().ok()).unwrap_or(offset);
            assert!(next >= offset, "queue {queue}: nextBeginOffset {next} behind {offset}");
            offset = next;
        }
    }
    copies
}

fn delay_offsets(addr: SocketAddr) -> (BTreeMap<usize, u64>, String) {
    let r = Conn::open(addr).call(RemotingCommand::request(rq::GET_ALL_DELAY_OFFSET).with_opaque(77));
    assert_eq!(r.code, rs::SUCCESS, "GET_ALL_DELAY_OFFSET: {:?}", r.remark);
    let text = String::from_utf8_lossy(&r.body).to_string();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("GET_ALL_DELAY_OFFSET body is not JSON ({e}): {text}"));
    let table = v["offsetTable"].as_object().unwrap_or_else(|| panic!("no offsetTable in {text}"));
    let offsets = table
        .iter()
        .map(|(k, n)| (k.parse().unwrap_or_else(|_| panic!("level {k:?} in {text}")), n.as_u64().unwrap_or_else(|| panic!("offset {n} in {text}"))))
        .collect();
    (offsets, text)
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

#[test]
fn delayed_messages_survive_sigkill_each_delivered_none_early() {
    let started = Instant::now();
    let dir = temp_dir();
    let store = dir.path().join("store");
    let config = ChildConfig {
        shard_count: SHARDS,
        top: format!("message_delay_level = \"{DELAY_LEVELS}\""),
        // No disk watermarks: the broker measures used = (total - available) / total, and
        // on a shared test machine that can sit at the default refuse ratio (0.90),
        // which stops appends (delayed delivery included) and force-cleans segments.
        store: "segment_bytes = 8388608\nflush = \"sync\"\ndisk_max_used_ratio = 1.0\ndisk_force_clean_ratio = 1.0\ndisk_refuse_ratio = 1.0".into(),
        env: Vec::new(),
    };
    let mut broker = ChildBroker::start_up(dir.path(), &store, &config);
    let r = Conn::open(broker.addr).call(create_topic(TOPIC, TOPIC_QUEUES));
    assert_eq!(r.code, rs::SUCCESS, "create {TOPIC}: {:?}", r.remark);

    // Send, pipelined; kill while the levels are pending.
    let table = Arc::new(Mutex::new(vec![Sent::default(); MESSAGES]));
    let first_send = Instant::now();
    let first_send_ms = now_ms();
    let send_deadline = first_send + SEND_TIMEOUT;
    let senders: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let ids: Vec<usize> = (c..MESSAGES).step_by(CONNECTIONS).collect();
            let (addr, table) = (broker.addr, table.clone());
            std::thread::spawn(move || send_share(addr, ids, table, first_send, send_deadline))
        })
        .collect();
    let watcher = {
        let table = table.clone();
        std::thread::spawn(move || {
            while Instant::now() < first_send + KILL_1_AFTER {
                if table.lock().unwrap().iter().all(|s| s.code.is_some()) {
                    return Some(first_send.elapsed());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            None
        })
    };
    std::thread::sleep(KILL_1_AFTER.saturating_sub(first_send.elapsed()));
    let kill_1_ms = now_ms();
    broker.kill();
    for s in senders {
        s.join().expect("a sender thread");
    }
    let sending_took = watcher.join().expect("watcher");
    let sent: Vec<Sent> = table.lock().unwrap().clone();

    let mut broker = ChildBroker::start_up(dir.path(), &store, &config);
    let ready_1_ms = now_ms();
    let ready_1 = Instant::now();
    std::thread::sleep(KILL_2_AFTER_RESTART.saturating_sub(ready_1.elapsed()));
    let kill_2_ms = now_ms();
    broker.kill();
    let broker = ChildBroker::start_up(dir.path(), &store, &config);
    let ready_2_ms = now_ms();

    // Wait until everything written is due, plus slack.
    let last_due_ms = sent.iter().enumerate().filter_map(|(id, s)| Some(s.sent_ms? + DELAYS_MS[effective_level(sent_level(id)) - 1])).max().unwrap_or(0);
    let drain_at_ms = last_due_ms + DRAIN_SLACK.as_millis() as i64;
    let wait = drain_at_ms - now_ms();
    if wait > 0 {
        std::thread::sleep(Duration::from_millis(wait as u64));
    }

    let mut problems = Vec::new();
    let copies = drain(broker.addr, &sent, &mut problems);
    let (offsets, offsets_text) = delay_offsets(broker.addr);

    // Figures and checks.
    let written: Vec<usize> = (0..MESSAGES).filter(|&id| sent[id].sent_ms.is_some()).collect();
    let acked: Vec<usize> = written.iter().copied().filter(|&id| sent[id].code == Some(rs::SUCCESS)).collect();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for &id in &written {
        *codes.entry(sent[id].code.map_or("none".into(), |c| c.to_string())).or_insert(0) += 1;
    }
    // id -> store times of its copies
    let mut copies_of: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    let mut early = Vec::new();
    for c in &copies {
        let s = &sent[c.id];
        let due = s.sent_ms.expect("checked in drain") + DELAYS_MS[effective_level(sent_level(c.id)) - 1];
        if c.store_ms < due - CLOCK_SLACK_MS {
            early.push(format!("id {} level {} stored {} ms before its due time", c.id, sent_level(c.id), due - c.store_ms));
        }
        copies_of.entry(c.id).or_default().push(c.store_ms);
    }
    copies_of.values_mut().for_each(|v| v.sort_unstable());
    let first_copy: BTreeMap<usize, i64> = copies_of.iter().map(|(&id, v)| (id, v[0])).collect();
    let duplicates: usize = copies_of.values().map(|v| v.len() - 1).sum();
    // level -> copies -> messages
    let mut copies_by_level: BTreeMap<usize, BTreeMap<usize, usize>> = BTreeMap::new();
    for (&id, v) in &copies_of {
        *copies_by_level.entry(effective_level(sent_level(id))).or_default().entry(v.len()).or_insert(0) += 1;
    }
    // A copy delivered again must have been made shortly before a kill (its progress was
    // not yet persisted): anything else is a duplicate without a crash.
    let kills = [kill_1_ms, kill_2_ms];
    let mut stray_duplicates = Vec::new();
    for (&id, v) in &copies_of {
        for &at in &v[..v.len() - 1] {
            // A timer's progress is recorded per finished minute of the wheel: a kill
            // re-delivers what its unfinished minute delivered (up to a minute).
            let window_ms = if is_timer(id) { TIMER_DUPLICATE_WINDOW_MS } else { DUPLICATE_WINDOW_MS };
            if !kills.iter().any(|&k| at <= k + CLOCK_SLACK_MS && at >= k - window_ms) {
                stray_duplicates.push(format!("id {id} level {}: copy stored at +{} ms delivered again, not within {DUPLICATE_WINDOW_MS} ms before a kill", sent_level(id), at - first_send_ms));
            }
        }
    }
    // Messages waiting at a kill (written before it, first surviving copy after it), and
    // those of them due while the broker was down.
    let due_of = |id: usize| sent[id].sent_ms.expect("written") + DELAYS_MS[effective_level(sent_level(id)) - 1];
    let pending_at_kill: Vec<usize> =
        kills.iter().map(|&k| first_copy.iter().filter(|&(&id, &f)| f > k && sent[id].sent_ms.expect("written") < k).count()).collect();
    let due_while_down: Vec<usize> = [(kill_1_ms, ready_1_ms), (kill_2_ms, ready_2_ms)]
        .iter()
        .map(|&(k, r)| first_copy.keys().filter(|&&id| (k..=r).contains(&due_of(id))).count())
        .collect();
    let duplicated_ids = copies_of.values().filter(|v| v.len() > 1).count();
    let lost: Vec<usize> = acked.iter().copied().filter(|id| !first_copy.contains_key(id)).collect();
    let unacked_delivered = first_copy.keys().filter(|id| sent[**id].code != Some(rs::SUCCESS)).count();
    let windows = [(kill_1_ms, ready_1_ms), (kill_2_ms, ready_2_ms)];
    let mut lateness_all = Vec::new();
    let (mut max_late_calm, mut max_late_window) = (i64::MIN, i64::MIN);
    let (mut calm, mut in_window) = (0usize, 0usize);
    let mut too_late = Vec::new();
    for (&id, &store_ms) in &first_copy {
        let level = effective_level(sent_level(id));
        let due = sent[id].sent_ms.expect("written") + DELAYS_MS[level - 1];
        let late = store_ms - due;
        lateness_all.push(late);
        let window = windows.iter().find(|(kill, ready)| due >= kill - LATE_MAX_MS && due <= *ready);
        let bound = match window {
            Some((_, ready)) => {
                in_window += 1;
                max_late_window = max_late_window.max(late);
                ready - due + LATE_MAX_MS
            }
            None => {
                calm += 1;
                max_late_calm = max_late_calm.max(late);
                LATE_MAX_MS
            }
        };
        if late > bound {
            too_late.push(format!("id {id} level {level}: {late} ms late (bound {bound} ms)"));
        }
    }
    lateness_all.sort_unstable();
    let per_level = |ids: &[usize], level: usize| ids.iter().filter(|&&id| !is_timer(id) && effective_level(sent_level(id)) == level).count() as u64;
    let mut offset_problems = Vec::new();
    for level in 1..=DELAYS_MS.len() {
        let (lo, hi) = (per_level(&acked, level), per_level(&written, level));
        let got = offsets.get(&level).copied().unwrap_or(0);
        if got == 0 || got < lo || got > hi {
            offset_problems.push(format!("level {level}: offsetTable {got}, want non-zero and within acknowledged {lo} ..= written {hi}"));
        }
    }

    eprintln!(
        "delay_sigkill summary: {} messages, {} written, {} acknowledged (response codes {codes:?}); all answered before kill 1: {}; \
         kill 1 at +{} ms, listening again at +{} ms, kill 2 at +{} ms, listening again at +{} ms (after the first send); \
         delivered {} distinct ({} copies, {duplicates} duplicates of {duplicated_ids} messages, {unacked_delivered} unacknowledged ones delivered; level -> copies -> messages {copies_by_level:?}), \
         waiting at kill 1 / kill 2 and delivered after it {pending_at_kill:?}, of them due while the broker was down {due_while_down:?}; lost {}, early {}; lateness ms (first copy − (send ms + delay)): p50 {} p99 {} max {} — outside kill windows {calm} messages, max {} (bound {LATE_MAX_MS}); \
         inside {in_window}, max {} (bound downtime + {LATE_MAX_MS}); GET_ALL_DELAY_OFFSET {offsets_text}; {:.1}s",
        MESSAGES,
        written.len(),
        acked.len(),
        sending_took.map_or("no".to_string(), |d| format!("yes, in {} ms", d.as_millis())),
        kill_1_ms - first_send_ms,
        ready_1_ms - first_send_ms,
        kill_2_ms - first_send_ms,
        ready_2_ms - first_send_ms,
        first_copy.len(),
        copies.len(),
        lost.len(),
        early.len(),
        percentile(&lateness_all, 0.5),
        percentile(&lateness_all, 0.99),
        lateness_all.last().copied().unwrap_or(0),
        if calm > 0 { max_late_calm } else { 0 },
        if in_window > 0 { max_late_window } else { 0 },
        started.elapsed().as_secs_f64(),
    );

    assert!(acked.len() >= MESSAGES / 3, "only {} of {MESSAGES} sends acknowledged before the kill: the scenario did not run", acked.len());
    let mut failures = Vec::new();
    if !lost.is_empty() {
        failures.push(format!(
            "{} acknowledged delayed messages never delivered, e.g. {:?}",
            lost.len(),
            lost.iter().take(10).map(|&id| (id, sent_level(id), sent[id].sent_ms.map(|s| s - first_send_ms))).collect::<Vec<_>>()
        ));
    }
    if !early.is_empty() {
        failures.push(format!("{} copies delivered before their due time, e.g. {:?}", early.len(), &early[..early.len().min(10)]));
    }
    if !too_late.is_empty() {
        failures.push(format!("{} messages delivered later than the bound, e.g. {:?}", too_late.len(), &too_late[..too_late.len().min(10)]));
    }
    if !stray_duplicates.is_empty() {
        failures.push(format!("{} copies delivered again without a kill right after them, e.g. {:?}", stray_duplicates.len(), &stray_duplicates[..stray_duplicates.len().min(10)]));
    }
    if !problems.is_empty() {
        failures.push(format!("{} delivered records wrong, e.g. {:?}", problems.len(), &problems[..problems.len().min(10)]));
    }
    failures.extend(offset_problems);
    broker.stop();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
