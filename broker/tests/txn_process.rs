//! Transactional messages against the real broker process (issue 12; ARCHITECTURE.md,
//! `txn/` and `shard/txn.rs`), driven with raw remoting frames so that duplicate,
//! crossed, wrong and late END_TRANSACTIONs are exactly what the test writes, and a raw
//! connection plays the producer that the broker checks back with.
//!
//! - `every_end_transaction_case`: half messages are invisible until committed; commit,
//!   rollback, oneway commit, duplicate and contradicting ENDs (one copy at most,
//!   contradictions refused with ILLEGAL_OPERATION), two crossed commits written in one
//!   go, wrong group / offsets / unknown halves (Java's remarks), batches and delayed
//!   halves refused, UNKNOWN resolved by a check-back the "producer" answers (the check
//!   carries the real topic and TRANSACTION_CHECK_TIMES), a half nobody answers moved
//!   to TRANS_CHECK_MAX_TIME_TOPIC after `transaction_check_max` checks,
//!   GET_PRODUCER_CONNECTION_LIST, runtime counters, and what a committed copy looks
//!   like (real topic and queue, UNIQ_KEY / msgId, tags, keys, PGROUP kept; TRAN_MSG,
//!   REAL_TOPIC, REAL_QID gone; sysFlag COMMIT; preparedTransactionOffset = the half).
//! - `sigkill_between_half_and_commit_and_during_check`: sync flush; halves
//!   acknowledged, a third committed and a third rolled back (answered), then SIGKILL;
//!   after restart the open third is ended (half committed, half rolled back) and the
//!   first third's commits are sent again (a producer retrying after the crash); a
//!   fourth set is left open for the check-back, the broker is SIGKILLed once the first
//!   checks arrived, restarted, and the producer answers the checks that come again.
//!   Drained: every committed half exactly once, no rolled-back one, nothing else.

mod common;

use common::{create_topic, encode, pull_header, pull_with, runtime_info, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn, Got};
use ringmq_client::message::properties::Properties;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use ringmq_client::remoting::headers::EndTransactionRequestHeader;
use ringmq_client::remoting::heartbeat::{HeartbeatData, ProducerData};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SHARDS: usize = 2;
const TOPIC: &str = "TXN_T";
const QUEUES: i32 = 4;
const GROUP: &str = "PG_TXN";
const CHECK_MAX: u32 = 3;
/// How long a check-back may take to come: transaction_timeout_ms + interval + slack.
const CHECK_WAIT: Duration = Duration::from_secs(15);

const COMMIT: i32 = 8;
const ROLLBACK: i32 = 12;
const UNKNOWN: i32 = 0;

fn config(flush: &str) -> ChildConfig {
    ChildConfig {
        shard_count: SHARDS,
        top: format!("transaction_timeout_ms = 500\ntransaction_check_interval_ms = 700\ntransaction_check_max = {CHECK_MAX}\n"),
        store: format!("flush = \"{flush}\"\nsegment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n"),
        env: Vec::new(),
    }
}

/// A half message the broker acknowledged.
#[derive(Debug, Clone)]
struct Half {
    id: usize,
    queue: i32,
    phys: u64,
    half_offset: i64,
    msg_id: String,
}

fn uniq(id: usize) -> String {
    format!("UNIQ{id:08}")
}

fn half_request(id: usize, opaque: i32) -> RemotingCommand {
    let mut h = send_header(TOPIC, (id % QUEUES as usize) as i32);
    h.a = GROUP.into();
    h.f = 0x04;
    h.g = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    h.i = Some(format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}UNIQ_KEY\u{1}{}\u{2}TAGS\u{1}tag{}\u{2}KEYS\u{1}key{id}\u{2}", uniq(id), id % 3));
    send_with(h, format!("txn body {id}").as_bytes(), opaque, if id.is_multiple_of(2) { SerializeType::Json } else { SerializeType::RocketMq })
}

fn send_half(c: &mut Conn, id: usize) -> Half {
    let r = c.call(half_request(id, 10_000 + id as i32));
    assert_eq!(r.code, rs::SUCCESS, "half {id}: {:?}", r.remark);
    let msg_id = r.ext("msgId").expect("msgId").to_string();
    let half = Half {
        id,
        queue: r.ext("queueId").and_then(|q| q.parse().ok()).expect("queueId"),
        phys: common::phys_of_msg_id(&msg_id),
        half_offset: r.ext("queueOffset").and_then(|q| q.parse().ok()).expect("queueOffset"),
        msg_id,
    };
    assert_eq!(half.queue, (id % QUEUES as usize) as i32, "the real queue is answered");
    assert_eq!(r.ext("transactionId"), Some(uniq(id).as_str()));
    half
}

fn end_header(h: &Half, code: i32, from_check: bool) -> EndTransactionRequestHeader {
    EndTransactionRequestHeader {
        producer_group: GROUP.into(),
        tran_state_table_offset: h.half_offset,
        commit_log_offset: h.phys as i64,
        commit_or_rollback: code,
        from_transaction_check: from_check,
        msg_id: uniq(h.id),
        transaction_id: Some(uniq(h.id)),
    }
}

fn end_cmd(header: &EndTransactionRequestHeader, opaque: i32) -> RemotingCommand {
    RemotingCommand::request(rq::END_TRANSACTION).with_header(header).with_opaque(opaque)
}

fn end(c: &mut Conn, h: &Half, code: i32, opaque: i32) -> RemotingCommand {
    c.call(end_cmd(&end_header(h, code, false), opaque))
}

fn heartbeat(c: &mut Conn, client_id: &str) {
    let hb = HeartbeatData { client_id: client_id.into(), producer_data_set: vec![ProducerData { group_name: GROUP.into() }], consumer_data_set: Vec::new() };
    let r = c.call(RemotingCommand::request(rq::HEART_BEAT).with_body(hb.encode()).with_opaque(77));
    assert_eq!(r.code, rs::SUCCESS, "heartbeat: {:?}", r.remark);
}

/// The next CHECK_TRANSACTION_STATE pushed to `c`, by `deadline`.
fn next_check(c: &mut Conn, deadline: Instant) -> Option<RemotingCommand> {
    loop {
        match c.read(deadline) {
            Got::Cmd(cmd) if !cmd.is_response() && cmd.code == rq::CHECK_TRANSACTION_STATE => return Some(cmd),
            Got::Cmd(_) => {}
            Got::Closed | Got::Timeout => return None,
        }
    }
}

/// A committed copy drained from the real topic.
#[derive(Debug)]
struct Copy {
    queue: i32,
    body: String,
    props: Properties,
    sys_flag: i32,
    prepared: i64,
}

fn drain_topic(addr: SocketAddr, topic: &str, queues: i32) -> Vec<Copy> {
    let mut c = Conn::open(addr);
    let mut copies = Vec::new();
    let mut opaque = 500_000;
    for queue in 0..queues {
        let mut offset = 0;
        loop {
            opaque += 1;
            let mut header = pull_header(topic, queue, offset);
            header.max_msg_nums = 32;
            let r = c.call(pull_with(&header, opaque, SerializeType::RocketMq));
            match r.code {
                rs::SUCCESS => {}
                // Not created yet (TRANS_CHECK_MAX_TIME_TOPIC before the first discard).
                rs::PULL_NOT_FOUND | rs::PULL_OFFSET_MOVED | rs::TOPIC_NOT_EXIST => break,
                rs::PULL_RETRY_IMMEDIATELY => continue,
                code => panic!("pull {topic}/{queue} at {offset}: {code} {:?}", r.remark),
            }
            let mut at = 0;
            while at < r.body.len() {
                let v = StoredMessageView::parse_verified(&r.body[at..]).expect("a stored record");
                at += v.total_size();
                assert_eq!(v.queue_offset(), offset, "{topic}/{queue}: offsets contiguous");
                offset += 1;
                copies.push(Copy {
                    queue,
                    body: String::from_utf8_lossy(v.body()).into_owned(),
                    props: Properties::decode(v.properties_bytes()).expect("properties"),
                    sys_flag: v.sys_flag(),
                    prepared: v.prepared_transaction_offset(),
                });
            }
        }
    }
    copies
}

fn ids_of(copies: &[Copy]) -> BTreeMap<usize, usize> {
    let mut seen = BTreeMap::new();
    for c in copies {
        let id: usize = c.body.strip_prefix("txn body ").and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("a body nobody sent: {:?}", c.body));
        *seen.entry(id).or_default() += 1;
    }
    seen
}

fn counter(c: &mut Conn, key: &str) -> u64 {
    runtime_info(c)[key].as_str().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("runtime info {key}"))
}

#[test]
fn every_end_transaction_case() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let broker = ChildBroker::start_up(dir.path(), &store, &config("async"));
    let addr = broker.addr;
    let mut c = Conn::open(addr);
    assert_eq!(c.call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut producer = Conn::open(addr);
    heartbeat(&mut producer, "txn-producer@1");
    let r = c.call(RemotingCommand::request(rq::GET_PRODUCER_CONNECTION_LIST).with_ext("producerGroup", GROUP).with_opaque(5));
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    assert!(String::from_utf8_lossy(&r.body).contains("txn-producer@1"), "producer connection listed: {}", String::from_utf8_lossy(&r.body));

    let halves: Vec<Half> = (0..8).map(|id| send_half(&mut c, id)).collect();
    // Invisible before their commit.
    assert_eq!(drain_topic(addr, TOPIC, QUEUES).len(), 0, "nothing visible before a commit");
    for q in 0..QUEUES {
        let r = c.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(6));
        assert_eq!(r.ext("offset"), Some("0"), "queue {q} max offset");
    }
    // The half topic is not a topic clients can read.
    let r = c.call(pull_with(&pull_header("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0), 7, SerializeType::Json));
    assert_ne!(r.code, rs::SUCCESS, "half topic readable");

    // 0: commit, then the same again, then a contradicting rollback.
    assert_eq!(end(&mut c, &halves[0], COMMIT, 100).code, rs::SUCCESS);
    let again = end(&mut c, &halves[0], COMMIT, 101);
    assert_eq!(again.code, rs::SUCCESS, "{:?}", again.remark);
    assert!(again.remark.as_deref().unwrap_or_default().contains("already ended (commit)"), "{:?}", again.remark);
    let contra = end(&mut c, &halves[0], ROLLBACK, 102);
    assert_eq!(contra.code, rs::ILLEGAL_OPERATION, "{:?}", contra.remark);
    // 1: rollback, then a contradicting commit.
    assert_eq!(end(&mut c, &halves[1], ROLLBACK, 103).code, rs::SUCCESS);
    assert_eq!(end(&mut c, &halves[1], COMMIT, 104).code, rs::ILLEGAL_OPERATION);
    assert_eq!(end(&mut c, &halves[1], ROLLBACK, 105).code, rs::SUCCESS);
    // 2: two commits crossed (written in one go, from two connections' worth of opaques).
    let mut both = encode(&end_cmd(&end_header(&halves[2], COMMIT, false), 106));
    both.extend(encode(&end_cmd(&end_header(&halves[2], COMMIT, true), 107)));
    c.write(&both, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut codes = BTreeMap::new();
    while codes.len() < 2 {
        match c.read(deadline) {
            Got::Cmd(r) if r.is_response() => {
                codes.insert(r.opaque, r.code);
            }
            Got::Cmd(_) => {}
            other => panic!("crossed commits unanswered: {other:?}"),
        }
    }
    assert_eq!(codes.values().filter(|&&c| c == rs::SUCCESS).count(), 2, "both crossed commits succeed: {codes:?}");
    // 3: oneway commit (what Java's producer sends).
    c.write(&encode(&end_cmd(&end_header(&halves[3], COMMIT, false), 108).oneway()), 0);
    // Wrong group, wrong offsets, no such half, bad code.
    let mut wrong = end_header(&halves[4], COMMIT, false);
    wrong.producer_group = "OTHER".into();
    assert_eq!(c.call(end_cmd(&wrong, 110)).remark.as_deref(), Some("The producer group wrong"));
    let mut wrong = end_header(&halves[4], COMMIT, false);
    wrong.tran_state_table_offset += 1000;
    assert_eq!(c.call(end_cmd(&wrong, 111)).remark.as_deref(), Some("The transaction state table offset wrong"));
    let mut wrong = end_header(&halves[4], COMMIT, false);
    wrong.commit_log_offset += 1;
    let r = c.call(end_cmd(&wrong, 112));
    assert_eq!(r.code, rs::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or_default().contains("Find prepared transaction message failed"), "{:?}", r.remark);
    let mut wrong = end_header(&halves[4], COMMIT, false);
    wrong.commit_log_offset = halves[0].phys as i64 + (1 << 40);
    assert_eq!(c.call(end_cmd(&wrong, 113)).code, rs::SYSTEM_ERROR);
    assert_eq!(c.call(end_cmd(&end_header(&halves[4], 5, false), 114)).code, rs::INVALID_PARAMETER);
    // An END naming a committed copy (not a half) is refused.
    // Batches and delayed halves are refused.
    let mut h = send_header(TOPIC, 0);
    h.i = Some(format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}DELAY\u{1}2\u{2}"));
    let r = c.call(send_with(h, b"delayed half", 115, SerializeType::Json));
    assert_eq!(r.code, rs::MESSAGE_ILLEGAL, "{:?}", r.remark);
    let mut batch = Vec::new();
    ringmq_client::remoting::batch::encode(
        &[ringmq_client::remoting::batch::BatchMessage { body: b"b".to_vec().into(), flag: 0, properties: b"TRAN_MSG\x01true\x02".to_vec().into() }],
        &mut batch,
    )
    .unwrap();
    let mut h = send_header(TOPIC, 0);
    h.m = true;
    let r = c.call(RemotingCommand::request(rq::SEND_BATCH_MESSAGE).with_header(&h).with_body(batch).with_opaque(116));
    assert_eq!(r.code, rs::MESSAGE_ILLEGAL, "{:?}", r.remark);

    // 4: UNKNOWN, then the check-back answered COMMIT; 5: UNKNOWN, check answered ROLLBACK;
    // 6: never answered (discarded after CHECK_MAX checks); 7: committed at once.
    assert_eq!(end(&mut c, &halves[4], UNKNOWN, 120).code, rs::SUCCESS);
    assert_eq!(end(&mut c, &halves[7], COMMIT, 121).code, rs::SUCCESS);
    let deadline = Instant::now() + CHECK_WAIT * (CHECK_MAX + 2);
    let mut checks_of_6 = 0;
    let mut answered = (false, false);
    while checks_of_6 < CHECK_MAX || !answered.0 || !answered.1 {
        let Some(check) = next_check(&mut producer, deadline) else {
            panic!("check-backs stopped: 6 checked {checks_of_6} times, 4/5 answered {answered:?}");
        };
        assert!(check.is_oneway(), "CHECK_TRANSACTION_STATE is oneway");
        let offset: u64 = check.ext("commitLogOffset").and_then(|o| o.parse().ok()).expect("commitLogOffset");
        let state: i64 = check.ext("tranStateTableOffset").and_then(|o| o.parse().ok()).expect("tranStateTableOffset");
        let half = halves.iter().find(|h| h.phys == offset).unwrap_or_else(|| panic!("check for an unknown half {offset}"));
        assert_eq!(state, half.half_offset);
        assert_eq!(check.ext("msgId"), Some(uniq(half.id).as_str()));
        assert_eq!(check.ext("offsetMsgId"), Some(half.msg_id.as_str()));
        let v = StoredMessageView::parse(&check.body).expect("the check carries the half message");
        assert_eq!(v.topic().unwrap(), TOPIC, "the check names the real topic");
        assert_eq!(v.queue_id(), half.queue);
        let props = Properties::decode(v.properties_bytes()).unwrap();
        assert_eq!(props.get("PGROUP"), Some(GROUP));
        let n: u32 = props.get("TRANSACTION_CHECK_TIMES").and_then(|n| n.parse().ok()).expect("TRANSACTION_CHECK_TIMES");
        assert!(!matches!(half.id, 0..=3 | 7), "a resolved half {} is checked", half.id);
        match half.id {
            4 | 5 => {
                let code = if half.id == 4 { COMMIT } else { ROLLBACK };
                let mut h = end_header(half, code, true);
                h.tran_state_table_offset = state;
                h.commit_log_offset = offset as i64;
                producer.write(&encode(&end_cmd(&h, 130 + half.id as i32).oneway()), 0);
                if half.id == 4 {
                    answered.0 = true
                } else {
                    answered.1 = true
                }
            }
            6 => {
                checks_of_6 += 1;
                assert_eq!(n, checks_of_6, "check counts");
            }
            other => panic!("unexpected check of half {other}"),
        }
    }
    // Half 6 is moved to TRANS_CHECK_MAX_TIME_TOPIC on the next pass.
    let deadline = Instant::now() + CHECK_WAIT;
    let discarded = loop {
        let copies = drain_topic(addr, "TRANS_CHECK_MAX_TIME_TOPIC", 1);
        if !copies.is_empty() {
            break copies;
        }
        assert!(Instant::now() < deadline, "half 6 never moved to TRANS_CHECK_MAX_TIME_TOPIC");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(discarded.len(), 1);
    assert_eq!(discarded[0].body, "txn body 6");
    assert_eq!(discarded[0].props.get("REAL_TOPIC"), Some(TOPIC));
    assert_eq!(discarded[0].props.get("TRAN_MSG"), None);
    // A discarded half cannot be committed any more.
    assert_eq!(end(&mut c, &halves[6], COMMIT, 140).code, rs::ILLEGAL_OPERATION);

    // Exactly the committed ones, once each, looking as Java's committed messages do.
    let deadline = Instant::now() + Duration::from_secs(10);
    let copies = loop {
        let copies = drain_topic(addr, TOPIC, QUEUES);
        if copies.len() >= 4 || Instant::now() > deadline {
            break copies;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seen = ids_of(&copies);
    assert_eq!(seen, BTreeMap::from([(0, 1), (2, 1), (3, 1), (4, 1), (7, 1)]), "committed halves, once each");
    for copy in &copies {
        let id: usize = copy.body["txn body ".len()..].parse().unwrap();
        let half = &halves[id];
        assert_eq!(copy.queue, half.queue);
        assert_eq!(copy.props.get("UNIQ_KEY"), Some(uniq(id).as_str()), "msgId kept");
        assert_eq!(copy.props.get("TAGS"), Some(format!("tag{}", id % 3).as_str()));
        assert_eq!(copy.props.get("KEYS"), Some(format!("key{id}").as_str()));
        assert_eq!(copy.props.get("PGROUP"), Some(GROUP));
        for gone in ["TRAN_MSG", "REAL_TOPIC", "REAL_QID"] {
            assert_eq!(copy.props.get(gone), None, "{gone} removed");
        }
        assert_eq!(copy.sys_flag & 0x0C, 0x08, "sysFlag COMMIT");
        assert_eq!(copy.prepared, half.phys as i64, "preparedTransactionOffset names the half");
    }
    let mut info = Conn::open(addr);
    assert_eq!(counter(&mut info, "transactionHalfTotal"), 8);
    assert_eq!(counter(&mut info, "transactionCommitTotal"), 5);
    assert_eq!(counter(&mut info, "transactionRollbackTotal"), 2);
    assert_eq!(counter(&mut info, "transactionDiscardTotal"), 1);
    assert_eq!(counter(&mut info, "transactionOpen"), 0);
    assert!(counter(&mut info, "transactionDuplicateEndTotal") >= 5);
    assert!(counter(&mut info, "transactionCheckTotal") >= CHECK_MAX as u64 + 2);
    broker.stop();
}

/// The halves of a stage, by id range.
fn send_all(addr: SocketAddr, ids: std::ops::Range<usize>) -> Vec<Half> {
    let mut c = Conn::open(addr);
    ids.map(|id| send_half(&mut c, id)).collect()
}

#[test]
fn sigkill_between_half_and_commit_and_during_check() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let cfg = config("sync");
    let mut broker = ChildBroker::start_up(dir.path(), &store, &cfg);
    let mut c = Conn::open(broker.addr);
    assert_eq!(c.call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    // Stage 1: 300 halves; 0..100 committed, 100..200 rolled back (answered); SIGKILL.
    let halves = send_all(broker.addr, 0..300);
    for h in &halves[..200] {
        let code = if h.id < 100 { COMMIT } else { ROLLBACK };
        let r = end(&mut c, h, code, 1_000 + h.id as i32);
        assert_eq!(r.code, rs::SUCCESS, "end {}: {:?}", h.id, r.remark);
    }
    // Some oneway ENDs in flight at the kill for 200..250 (they may or may not land).
    let mut burst = Vec::new();
    for h in &halves[200..250] {
        burst.extend(encode(&end_cmd(&end_header(h, if h.id % 2 == 0 { COMMIT } else { ROLLBACK }, false), 2_000 + h.id as i32).oneway()));
    }
    c.write(&burst, 0);
    broker.kill();
    let broker = ChildBroker::start_up(dir.path(), &store, &cfg);
    let mut c = Conn::open(broker.addr);
    // Stage 2: 200..300 ended again (even commit, odd rollback: the same outcome the
    // burst asked), and 0..100's commits sent again by a retrying producer.
    for h in &halves[200..300] {
        let code = if h.id % 2 == 0 { COMMIT } else { ROLLBACK };
        let r = end(&mut c, h, code, 3_000 + h.id as i32);
        assert_eq!(r.code, rs::SUCCESS, "end {} after restart: {:?}", h.id, r.remark);
    }
    for h in &halves[..100] {
        let r = end(&mut c, h, COMMIT, 4_000 + h.id as i32);
        assert_eq!(r.code, rs::SUCCESS, "retried commit {}: {:?}", h.id, r.remark);
    }
    for h in &halves[100..110] {
        assert_eq!(end(&mut c, h, COMMIT, 5_000 + h.id as i32).code, rs::ILLEGAL_OPERATION, "commit after rollback {}", h.id);
    }
    // Stage 3: 300..340 left open; the producer gets their checks, does not answer; SIGKILL
    // once the first checks arrived.
    let open = send_all(broker.addr, 300..340);
    let mut producer = Conn::open(broker.addr);
    heartbeat(&mut producer, "txn-producer@2");
    let first = next_check(&mut producer, Instant::now() + CHECK_WAIT).expect("a check-back before the kill");
    assert!(first.ext("commitLogOffset").is_some());
    let mut broker = broker;
    broker.kill();
    let broker = ChildBroker::start_up(dir.path(), &store, &cfg);
    let mut producer = Conn::open(broker.addr);
    heartbeat(&mut producer, "txn-producer@3");
    // The open halves are checked again after the restart; answer each: even commit, odd rollback.
    let mut answered = BTreeMap::new();
    let deadline = Instant::now() + CHECK_WAIT * 3;
    while answered.len() < open.len() {
        let check = next_check(&mut producer, deadline).unwrap_or_else(|| panic!("only {} of {} open halves checked after the restart", answered.len(), open.len()));
        let offset: u64 = check.ext("commitLogOffset").and_then(|o| o.parse().ok()).unwrap();
        let h = open.iter().find(|h| h.phys == offset).unwrap_or_else(|| panic!("check for a half that is not open: {offset}"));
        let code = if h.id % 2 == 0 { COMMIT } else { ROLLBACK };
        producer.write(&encode(&end_cmd(&end_header(h, code, true), 6_000 + h.id as i32).oneway()), 0);
        answered.insert(h.id, code);
    }
    // Every committed half exactly once; no rolled-back one.
    let expected: BTreeMap<usize, usize> = (0..100).chain((200..340).filter(|i| i % 2 == 0)).map(|i| (i, 1)).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    let seen = loop {
        let seen = ids_of(&drain_topic(broker.addr, TOPIC, QUEUES));
        if seen == expected || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let missing: Vec<_> = expected.keys().filter(|k| !seen.contains_key(k)).collect();
    let extra: Vec<_> = seen.iter().filter(|(k, n)| expected.get(k) != Some(n)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}; unexpected or duplicated {extra:?}");
    let mut info = Conn::open(broker.addr);
    assert_eq!(counter(&mut info, "transactionOpen"), 0);
    println!("txn_process summary: {} committed delivered once, {} rolled back never, 2 SIGKILLs", expected.len(), 340 - expected.len());
    broker.stop();
}
