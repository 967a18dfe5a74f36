//! A device read error against the real broker process: the read-error policy of
//! `store/error.rs` end to end. A read EIO on a sealed CommitLog segment must answer
//! that request SYSTEM_ERROR naming the file and the offset, count it in
//! `readErrorsTotal`, and leave the process and every other read and append working
//! (it used to exit the broker on the pull path: with consumers re-pulling, a crash
//! loop).
//!
//! There is no device-mapper on CI hosts, so the EIO comes from the DMA backend's
//! test-only failure probe (`RINGMQ_FAILPOINTS="read_eio=<path substring>"`, see
//! `store/io/dma.rs`). The broker runs as a child process (2 shards, 1 MiB segments):
//! the first run writes about 2.4 MB to one queue, so its oldest records lie in sealed
//! segment 0 of the queue's shard, and stops cleanly; the second run starts with the
//! probe armed for that segment (`shard-<i>/commitlog/<its 20-digit name>`). After a
//! restart the in-memory tail holds nothing older than the last block, so those reads
//! really go to the segment file. Key queries are asked on several connections, so
//! that some arrive on the other shard and the owner's error must travel back.
//!
//! Prints one `read_eio_process summary:` line.

mod common;

use common::{phys_of_msg_id, pull, runtime_info, send, send_with, temp_dir, ChildBroker, ChildConfig, Conn, MIB};
use ringmq_broker::routing::queue_owner;
use ringmq_broker::store::engine::{local_of, SHARD_SHIFT};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The queue whose early records lie in the failing segment.
const TOPIC_BAD: &str = "REIO";
/// A queue whose records lie elsewhere.
const TOPIC_OK: &str = "ROK";
const SHARDS: usize = 2;
const SEGMENT_BYTES: u64 = MIB as u64;
const BODY_BYTES: usize = 4000;
/// About 2.4 MB: segments 0 and 1 sealed, 2 active.
const MESSAGES: u64 = 600;
/// Sends in flight at once while filling (group commit); 32 x 4 KB stays below the
/// 256 KiB group-commit window, past which the broker answers SYSTEM_BUSY.
const SEND_WINDOW_MAX: usize = 32;
/// Times the failing pull is repeated: a consumer re-pulls; the broker must not mind.
const REPULLS: usize = 3;
/// Connections the key query is asked on: each lands on either shard (SO_REUSEPORT),
/// so some all but surely arrive on the shard that does not own the data.
const QUERY_CONNECTIONS: usize = 8;

fn child_config(failpoint: Option<&str>) -> ChildConfig {
    ChildConfig {
        shard_count: SHARDS,
        top: "max_message_bytes = 65536".into(),
        store: format!("segment_bytes = {SEGMENT_BYTES}\nflush = \"sync\"\ndirty_bytes_max = 262144\ncq_entries_per_file = 1024"),
        env: failpoint.map(|f| vec![("RINGMQ_FAILPOINTS".to_string(), format!("read_eio={f}"))]).unwrap_or_default(),
    }
}

fn body_of(id: u64) -> Vec<u8> {
    let mut body = format!("id={id:08};").into_bytes();
    body.resize(BODY_BYTES, b'a' + (id % 26) as u8);
    body
}

fn send_keyed(topic: &str, id: u64, opaque: i32) -> RemotingCommand {
    let mut header = common::send_header(topic, 0);
    header.i = Some(format!("KEYS\u{1}key{id}\u{2}"));
    send_with(header, &body_of(id), opaque, SerializeType::Json)
}

/// Sends `MESSAGES` to `TOPIC_BAD` queue 0 with a window of `SEND_WINDOW_MAX`; returns
/// the physical offset (shard bits included) of each queue offset.
fn fill(c: &mut Conn) -> Vec<u64> {
    let mut phys = vec![u64::MAX; MESSAGES as usize];
    let mut in_flight: HashMap<i32, u64> = HashMap::new();
    let mut next = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < MESSAGES || !in_flight.is_empty() {
        while next < MESSAGES && in_flight.len() < SEND_WINDOW_MAX {
            let opaque = 1000 + next as i32;
            c.write(&common::encode(&send_keyed(TOPIC_BAD, next, opaque)), 0);
            in_flight.insert(opaque, next);
            next += 1;
        }
        let r = match c.read(deadline) {
            common::Got::Cmd(r) => r,
            other => panic!("filling: {other:?} with {} sends in flight", in_flight.len()),
        };
        let Some(id) = in_flight.remove(&r.opaque) else { continue };
        assert_eq!(r.code, rs::SUCCESS, "send {id}: {:?}", r.remark);
        let queue_offset: usize = r.ext("queueOffset").and_then(|o| o.parse().ok()).expect("queueOffset");
        phys[queue_offset] = phys_of_msg_id(r.ext("msgId").expect("msgId"));
    }
    assert!(phys.iter().all(|&p| p != u64::MAX), "every queue offset was acknowledged");
    phys
}

fn pull_one(c: &mut Conn, topic: &str, offset: u64, opaque: i32) -> RemotingCommand {
    c.call(pull(topic, 0, offset as i64, opaque, SerializeType::Json))
}

fn body_id(r: &RemotingCommand) -> String {
    let v = StoredMessageView::parse_verified(&r.body).expect("a stored record");
    String::from_utf8_lossy(&v.body()[..12]).into_owned()
}

#[test]
fn read_eio_on_a_sealed_segment_answers_system_error_and_the_broker_keeps_serving() {
    let started = Instant::now();
    let dir = temp_dir();
    let store = dir.path().join("store");

    // Run 1: fill segment 0 and beyond, plus one message on the other topic (in the
    // last segment), then a clean stop.
    let broker = ChildBroker::start_up(dir.path(), &store, &child_config(None));
    let mut c = Conn::open(broker.addr);
    for topic in [TOPIC_BAD, TOPIC_OK] {
        let r = c.call(common::create_topic(topic, 1));
        assert_eq!(r.code, rs::SUCCESS, "create {topic}: {:?}", r.remark);
    }
    let phys = fill(&mut c);
    let r = c.call(send(TOPIC_OK, 0, &body_of(900_000), 5, SerializeType::Json));
    assert_eq!(r.code, rs::SUCCESS, "send to {TOPIC_OK}: {:?}", r.remark);
    let ok_phys = phys_of_msg_id(r.ext("msgId").expect("msgId"));
    drop(c);
    broker.stop();

    // Queue offset 10 lies inside segment 0 of its shard (not at its start); the first
    // record of segment 1 is a sealed-segment read that must keep working.
    let owner = queue_owner(TOPIC_BAD, 0, SHARDS);
    assert!(phys.iter().all(|&p| p >> SHARD_SHIFT == owner as u64), "the queue's records are on shard {owner}");
    let victim = 10u64;
    let victim_phys = phys[victim as usize];
    let victim_local = local_of(victim_phys);
    assert!(victim_local > 0 && victim_local < SEGMENT_BYTES, "offset {victim} at {victim_local} is inside segment 0");
    let in_seg1 = phys.iter().position(|&p| (SEGMENT_BYTES..2 * SEGMENT_BYTES).contains(&local_of(p))).expect("a record in segment 1") as u64;
    if ok_phys >> SHARD_SHIFT == owner as u64 {
        assert!(local_of(ok_phys) >= 2 * SEGMENT_BYTES, "{TOPIC_OK}'s message lies past the sealed segments");
    }

    // Run 2: the probe makes every read of that segment fail with EIO. A segment is
    // named by its physical start offset, shard bits included.
    let segment0 = format!("shard-{owner}/commitlog/{:020}", (owner as u64) << SHARD_SHIFT);
    let mut broker = ChildBroker::start_up(dir.path(), &store, &child_config(Some(&segment0)));
    assert!(broker.stdout().contains("RINGMQ_FAILPOINTS armed"), "the probe is armed");
    let mut c = Conn::open(broker.addr);
    assert_eq!(runtime_info(&mut c)["readErrorsTotal"], "0", "start-up read nothing from segment 0");

    // The pull of a record in segment 0: SYSTEM_ERROR naming the file and the offset in
    // it, again on each re-pull.
    let expected = format!("{segment0} at offset {victim_local}");
    let mut failed_reads = 0u64;
    let mut remark = String::new();
    for i in 0..=REPULLS {
        let r = pull_one(&mut c, TOPIC_BAD, victim, 20 + i as i32);
        remark = r.remark.clone().unwrap_or_default();
        assert_eq!(r.code, rs::SYSTEM_ERROR, "pull {i} of offset {victim}: {remark:?}");
        assert!(remark.contains(&expected), "the remark names file and offset ({expected}): {remark}");
        failed_reads += 1;
    }
    // VIEW_MESSAGE by physical offset and QUERY_MESSAGE by key read the same record.
    let r = c.call(RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", victim_phys.to_string()).with_opaque(30));
    assert_eq!(r.code, rs::SYSTEM_ERROR, "view: {:?}", r.remark);
    assert!(r.remark.as_deref().unwrap_or("").contains(&expected), "view names file and offset: {:?}", r.remark);
    failed_reads += 1;
    for i in 0..QUERY_CONNECTIONS {
        let query = RemotingCommand::request(rq::QUERY_MESSAGE)
            .with_ext("topic", TOPIC_BAD)
            .with_ext("key", format!("key{victim}"))
            .with_ext("maxNum", "4")
            .with_ext("beginTimestamp", "0")
            .with_ext("endTimestamp", i64::MAX.to_string())
            .with_opaque(31 + i as i32);
        let r = Conn::open(broker.addr).call(query);
        assert_eq!(r.code, rs::SYSTEM_ERROR, "query by key on connection {i}: {:?}", r.remark);
        assert!(r.remark.as_deref().unwrap_or("").contains(&expected), "query names file and offset: {:?}", r.remark);
        failed_reads += 1;
    }

    // Everything else is served: the same queue past segment 0, the other topic (read
    // from its segment file), new sends to both, and they read back.
    let r = pull_one(&mut c, TOPIC_BAD, in_seg1, 40);
    assert_eq!(r.code, rs::SUCCESS, "pull of offset {in_seg1} (segment 1): {:?}", r.remark);
    assert_eq!(body_id(&r), format!("id={in_seg1:08};"));
    let r = pull_one(&mut c, TOPIC_OK, 0, 41);
    assert_eq!(r.code, rs::SUCCESS, "pull {TOPIC_OK}: {:?}", r.remark);
    assert_eq!(body_id(&r), "id=00900000;");
    for (topic, id, expected_offset) in [(TOPIC_OK, 900_001u64, 1u64), (TOPIC_BAD, 900_002, MESSAGES)] {
        let r = c.call(send(topic, 0, &body_of(id), 50 + id as i32 % 10, SerializeType::Json));
        assert_eq!(r.code, rs::SUCCESS, "send to {topic} while segment 0 fails: {:?}", r.remark);
        let offset: u64 = r.ext("queueOffset").and_then(|o| o.parse().ok()).expect("queueOffset");
        assert_eq!(offset, expected_offset);
        let r = pull_one(&mut c, topic, offset, 60 + id as i32 % 10);
        assert_eq!(r.code, rs::SUCCESS, "pull back from {topic}: {:?}", r.remark);
        assert_eq!(body_id(&r), format!("id={id:08};"));
    }

    assert!(broker.exited().is_none(), "the broker process is still running: {:?}", broker.exited());
    let info = runtime_info(&mut c);
    let counted: u64 = info["readErrorsTotal"].as_str().and_then(|v| v.parse().ok()).expect("readErrorsTotal");
    assert!(counted >= failed_reads, "readErrorsTotal {counted} counts the {failed_reads} failed reads");
    let log = broker.stdout();
    assert!(log.contains("read failed") && log.contains(&segment0), "the broker logs the failed read naming the file");
    eprintln!(
        "read_eio_process summary: {MESSAGES} messages of {BODY_BYTES} B, victim offset {victim} at {segment0} offset {victim_local}, \
         {failed_reads} failed requests answered SYSTEM_ERROR, readErrorsTotal={counted}, broker alive, remark: {remark:?}, {:.1?}",
        started.elapsed()
    );
    drop(c);
    broker.stop();
}
