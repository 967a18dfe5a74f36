//! Regression test: concurrent metadata writes against the real broker process
//! (DESIGN.md §2: global metadata has one owning shard whose writes are serialised;
//! "no handler holds a store or table taken out across an await").
//!
//! The defect it pins: `commit_topics` and `handle_create_group` in `shard/admin.rs`
//! take the snapshot store out of its `RefCell` for the length of the save's awaits, so
//! a second create arriving meanwhile finds it gone and is answered SYSTEM_ERROR
//! "... store is not open on this shard".
//!
//! A child broker (2 shards, so half the requests arrive on the shard that does not
//! own metadata and are forwarded) gets `CREATES_PER_KIND` UPDATE_AND_CREATE_TOPIC and
//! as many UPDATE_AND_CREATE_SUBSCRIPTIONGROUP requests, interleaved, pipelined over
//! `CONNECTIONS` connections with distinct opaques: every one must succeed. Then a
//! second batch, and SIGKILL once `KILL_AFTER_ANSWERS` of its answers arrived (the rest
//! in flight). Every create ACKNOWLEDGED (code 0 received; a response read after the
//! kill was sent before it) must have survived: subscription groups are read back from
//! the persisted table with `ringmq_broker::meta` (the broker lists no groups on the
//! wire) while the broker is dead, topics through GET_ALL_TOPIC_CONFIG after a
//! restart on the same store.
//!
//! No NameServer is configured, so topic creation's registration with the NameServers
//! (done before answering) is a no-op. Prints one `metadata_race summary:` line.

mod common;

use common::{create_group, create_topic, encode, temp_dir, ChildBroker, ChildConfig, Conn, Got};
use ringmq_broker::meta::groups::GroupTable;
use ringmq_broker::meta::snapshot::SnapshotStore;
use ringmq_broker::store::io::dma::DmaDisk;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::route::TopicConfigAndMappingSerializeWrapper;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SHARDS: usize = 2;
const CONNECTIONS: usize = 8;
/// Topic creates and group creates per batch (each).
const CREATES_PER_KIND: usize = 100;
const TOPIC_QUEUES: i32 = 4;
/// The second batch's answers to wait for before SIGKILL.
const KILL_AFTER_ANSWERS: usize = 50;
/// Longest a whole batch may take to be answered (after the kill, EOF ends the
/// readers at once).
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Topic,
    Group,
}

#[derive(Debug, Clone)]
struct Create {
    kind: Kind,
    name: String,
    opaque: i32,
}

#[derive(Debug)]
struct Answer {
    opaque: i32,
    code: i32,
    remark: Option<String>,
}

fn batch(tag: &str, first_opaque: i32) -> Vec<Create> {
    let mut out = Vec::new();
    for i in 0..CREATES_PER_KIND {
        for kind in [Kind::Topic, Kind::Group] {
            let prefix = if kind == Kind::Topic { "t" } else { "g" };
            out.push(Create { kind, name: format!("race-{tag}-{prefix}{i:03}"), opaque: first_opaque + out.len() as i32 });
        }
    }
    out
}

fn request(c: &Create) -> RemotingCommand {
    match c.kind {
        Kind::Topic => create_topic(&c.name, TOPIC_QUEUES),
        Kind::Group => create_group(&c.name),
    }
    .with_opaque(c.opaque)
}

/// Writes every create (round-robin over fresh connections, each connection's share in
/// one write) and reads answers on one thread per connection, each sent to `answers`
/// as it arrives. Readers stop when their share is answered, at EOF, or at `deadline`.
fn start_batch(addr: SocketAddr, creates: &[Create], answers: mpsc::Sender<Answer>, deadline: Instant) -> Vec<std::thread::JoinHandle<()>> {
    (0..CONNECTIONS)
        .map(|i| {
            let share: Vec<Create> = creates.iter().skip(i).step_by(CONNECTIONS).cloned().collect();
            let answers = answers.clone();
            let mut conn = Conn::open(addr);
            let frames: Vec<u8> = share.iter().flat_map(|c| encode(&request(c))).collect();
            conn.write(&frames, 0);
            std::thread::spawn(move || {
                let mut pending: BTreeSet<i32> = share.iter().map(|c| c.opaque).collect();
                while !pending.is_empty() {
                    match conn.read(deadline) {
                        Got::Cmd(r) if r.is_response() && pending.remove(&r.opaque) => {
                            let _ = answers.send(Answer { opaque: r.opaque, code: r.code, remark: r.remark.clone() });
                        }
                        Got::Cmd(_) => {}
                        Got::Closed | Got::Timeout => return,
                    }
                }
            })
        })
        .collect()
}

/// The subscription groups persisted under `store_root` (the broker must be dead),
/// read as the broker reads them at start-up.
fn persisted_groups(store_root: &Path) -> GroupTable {
    let dir = store_root.join("config");
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("read-groups")
        .spawn(move || async move {
            let store = SnapshotStore::new(DmaDisk, dir, "subscriptionGroup");
            GroupTable::load(&store).await
        })
        .expect("an executor to read the table")
        .join()
        .expect("the reading executor")
        .expect("the persisted subscription groups load")
        .unwrap_or_default()
}

fn topics_on_wire(addr: SocketAddr) -> BTreeSet<String> {
    let r = Conn::open(addr).call(RemotingCommand::request(rq::GET_ALL_TOPIC_CONFIG).with_opaque(7));
    assert_eq!(r.code, rs::SUCCESS, "GET_ALL_TOPIC_CONFIG: {:?}", r.remark);
    TopicConfigAndMappingSerializeWrapper::decode(&r.body).expect("topic config body").topic_config_table.into_keys().collect()
}

/// `failures` lines for answers that are not SUCCESS, the first few in full.
fn describe_failures(creates: &[Create], answers: &BTreeMap<i32, Answer>) -> (usize, Vec<String>) {
    let failed: Vec<String> = creates
        .iter()
        .filter_map(|c| match answers.get(&c.opaque) {
            Some(a) if a.code == rs::SUCCESS => None,
            Some(a) => Some(format!("{:?} {}: code {} {:?}", c.kind, c.name, a.code, a.remark)),
            None => Some(format!("{:?} {}: no answer", c.kind, c.name)),
        })
        .collect();
    (failed.len(), failed.into_iter().take(5).collect())
}

#[test]
fn concurrent_topic_and_group_creates_all_succeed_and_acknowledged_ones_survive_sigkill() {
    let started = Instant::now();
    let dir = temp_dir();
    let store = dir.path().join("store");
    let config = ChildConfig { shard_count: SHARDS, top: String::new(), store: "segment_bytes = 8388608".into(), env: Vec::new() };
    let mut broker = ChildBroker::start_up(dir.path(), &store, &config);
    let mut failures = Vec::new();

    // Batch 1: everything answered, everything SUCCESS.
    let first = batch("a", 1);
    let (tx, rx) = mpsc::channel();
    let batch_started = Instant::now();
    for t in start_batch(broker.addr, &first, tx, Instant::now() + BATCH_TIMEOUT) {
        t.join().expect("a reader thread");
    }
    let answers: BTreeMap<i32, Answer> = rx.try_iter().map(|a| (a.opaque, a)).collect();
    let first_took = batch_started.elapsed();
    let (first_failed, examples) = describe_failures(&first, &answers);
    eprintln!(
        "metadata_race batch 1: {} creates ({CREATES_PER_KIND} topics + {CREATES_PER_KIND} groups) over {CONNECTIONS} connections: {} ok, {first_failed} failed, {:.2}s; first failures: {examples:#?}",
        first.len(),
        first.len() - first_failed,
        first_took.as_secs_f64()
    );
    if first_failed > 0 {
        failures.push(format!("batch 1: {first_failed} of {} concurrent creates failed, e.g. {examples:?}", first.len()));
    }
    let mut acked: BTreeSet<(Kind, String)> =
        first.iter().filter(|c| answers.get(&c.opaque).is_some_and(|a| a.code == rs::SUCCESS)).map(|c| (c.kind, c.name.clone())).collect();

    // Batch 2: SIGKILL while it is in flight.
    let second = batch("b", 10_001);
    let (tx, rx) = mpsc::channel();
    let readers = start_batch(broker.addr, &second, tx, Instant::now() + BATCH_TIMEOUT);
    let mut second_answers = BTreeMap::new();
    let wait_until = Instant::now() + BATCH_TIMEOUT;
    while second_answers.len() < KILL_AFTER_ANSWERS {
        match rx.recv_timeout(wait_until.saturating_duration_since(Instant::now())) {
            Ok(a) => {
                second_answers.insert(a.opaque, a);
            }
            Err(_) => break,
        }
    }
    broker.kill();
    for r in readers {
        r.join().expect("a reader thread");
    }
    second_answers.extend(rx.try_iter().map(|a| (a.opaque, a)));
    let second_acked: Vec<&Create> = second.iter().filter(|c| second_answers.get(&c.opaque).is_some_and(|a| a.code == rs::SUCCESS)).collect();
    let second_errors = second_answers.values().filter(|a| a.code != rs::SUCCESS).count();
    acked.extend(second_acked.iter().map(|c| (c.kind, c.name.clone())));

    // Groups: the persisted table, read while the broker is dead.
    let groups = persisted_groups(&store);
    let lost_groups: Vec<&String> = acked.iter().filter(|(k, n)| *k == Kind::Group && groups.get(n).is_none()).map(|(_, n)| n).collect();
    // Topics: what the restarted broker serves.
    let broker = ChildBroker::start_up(dir.path(), &store, &config);
    let topics = topics_on_wire(broker.addr);
    let lost_topics: Vec<&String> = acked.iter().filter(|(k, n)| *k == Kind::Topic && !topics.contains(n)).map(|(_, n)| n).collect();
    eprintln!(
        "metadata_race summary: batch 1 {} ok / {first_failed} failed in {:.2}s; batch 2 killed after {} answers: {} acknowledged, {second_errors} errors, {} unanswered; \
         after restart {} topics and {} groups persisted, lost acknowledged: {} topics, {} groups; {:.1}s",
        first.len() - first_failed,
        first_took.as_secs_f64(),
        KILL_AFTER_ANSWERS.min(second_answers.len()),
        second_acked.len(),
        second.len() - second_answers.len(),
        topics.iter().filter(|t| t.starts_with("race-")).count(),
        groups.len(),
        lost_topics.len(),
        lost_groups.len(),
        started.elapsed().as_secs_f64(),
    );
    if !lost_topics.is_empty() || !lost_groups.is_empty() {
        failures.push(format!("acknowledged creates lost after SIGKILL: topics {lost_topics:?}, groups {lost_groups:?}"));
    }
    broker.stop();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
