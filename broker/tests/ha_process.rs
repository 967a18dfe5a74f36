//! Master/slave replication against real broker processes (issue 13; ARCHITECTURE.md,
//! `ha/` and `shard/ha.rs`).
//!
//! - `a_slave_mirrors_its_master_and_refuses_writes`: an ASYNC_MASTER (2 shards) and a
//!   SLAVE (2 shards) on the same machine; sends to the master reach the slave — same
//!   queue offsets, same bytes — and so do the topic (created on the master only) and a
//!   consumer offset committed on the master; sends and topic changes on the slave are
//!   refused; a send to the slave is refused (SERVICE_NOT_AVAILABLE);
//!   the slave, SIGKILLed mid-stream and restarted, catches up from its own end.
//! - `sync_master_acknowledges_only_what_a_slave_has`: a SYNC_MASTER with no slave
//!   answers SLAVE_NOT_AVAILABLE (stored on the master only); with a slave every send is
//!   SUCCESS; the master is SIGKILLed under load and every send answered SUCCESS is
//!   readable from the slave (0 lost); a master with a slave SIGKILLed answers
//!   SLAVE_NOT_AVAILABLE again.
//! - `a_slave_with_another_shard_count_is_refused`: a clear error in the slave's log.
//! - `a_master_that_comes_back_with_less_than_its_slave_refuses_it_and_the_slave_keeps_its_data`:
//!   a master whose store was lost restarts empty; the slave is refused with the reason
//!   and what to do, and keeps serving everything it holds.
//! - `users_and_acls_reach_the_slave_and_survive_its_restart`: RocketMQ 5's users and
//!   ACLs (authentication and authorization on both): a user and an ACL created on the
//!   master are answered by the slave (GET_USER, LIST_USER, GET_ACL, signed by the
//!   replicated Super user), the slave refuses AUTH_* changes, and a slave restarted
//!   with its master gone still knows them (and still checks requests with them).
//! - `an_empty_slave_is_reseeded_past_the_masters_retention`: a master whose retention
//!   deleted its log's start (forced clean, 1 MiB segments); an empty slave is started
//!   at the master's oldest segment, holds every retained message at the master's queue
//!   offsets (its queues begin mid-queue) and follows new sends.

mod common;

use common::{create_topic, encode, ha_port, pull_header, pull_with, read_log, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn, Got};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOPIC: &str = "HA_T";
const QUEUES: i32 = 4;
const CATCH_UP: Duration = Duration::from_secs(20);

fn store_toml(flush: &str) -> String {
    format!("flush = \"{flush}\"\nsegment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n")
}

fn master_config(shards: usize, role: &str) -> ChildConfig {
    ChildConfig { shard_count: shards, top: format!("role = \"{role}\"\nsync_flush_timeout_ms = 3000\n"), store: store_toml("async"), env: Vec::new() }
}

fn slave_config(shards: usize, master_ha: u16) -> ChildConfig {
    ChildConfig {
        shard_count: shards,
        top: format!("role = \"slave\"\nbroker_id = 1\nha_master_address = \"127.0.0.1:{master_ha}\"\n"),
        store: store_toml("async"),
        env: Vec::new(),
    }
}


fn send(c: &mut Conn, id: usize, opaque: i32) -> RemotingCommand {
    let h = send_header(TOPIC, (id % QUEUES as usize) as i32);
    c.call(send_with(h, format!("ha body {id}").as_bytes(), opaque, SerializeType::RocketMq))
}

/// Each queue's max offset (-1 while the topic is unknown there).
fn max_offsets(addr: SocketAddr) -> Vec<i64> {
    let mut c = Conn::open(addr);
    (0..QUEUES)
        .map(|q| {
            let r = c.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(50 + q));
            r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(-1)
        })
        .collect()
}

/// Each queue's min offset (the first still readable).
fn min_offsets(addr: SocketAddr) -> Vec<i64> {
    let mut c = Conn::open(addr);
    (0..QUEUES)
        .map(|q| {
            let r = c.call(RemotingCommand::request(rq::GET_MIN_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(70 + q));
            r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(-1)
        })
        .collect()
}

/// Body id -> (queue, offset) of everything in the topic (from each queue's minimum).
fn drain(addr: SocketAddr) -> BTreeMap<usize, (i32, i64)> {
    let mins = min_offsets(addr);
    let mut c = Conn::open(addr);
    let mut out = BTreeMap::new();
    let mut opaque = 1_000;
    for q in 0..QUEUES {
        let mut offset = mins[q as usize].max(0);
        loop {
            opaque += 1;
            let mut h = pull_header(TOPIC, q, offset);
            h.max_msg_nums = 32;
            let r = c.call(pull_with(&h, opaque, SerializeType::RocketMq));
            if r.code != rs::SUCCESS {
                assert!(matches!(r.code, rs::PULL_NOT_FOUND | rs::PULL_OFFSET_MOVED), "pull {TOPIC}/{q} at {offset}: {} {:?}", r.code, r.remark);
                break;
            }
            let mut at = 0;
            while at < r.body.len() {
                let v = StoredMessageView::parse_verified(&r.body[at..]).expect("record");
                at += v.total_size();
                let id: usize = String::from_utf8_lossy(v.body()).strip_prefix("ha body ").and_then(|i| i.parse().ok()).expect("our body");
                assert!(out.insert(id, (q, v.queue_offset())).is_none(), "id {id} twice");
                offset = v.queue_offset() + 1;
            }
        }
    }
    out
}

fn wait_caught_up(master: SocketAddr, slave: SocketAddr) {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let (m, s) = (max_offsets(master), max_offsets(slave));
        if m == s {
            return;
        }
        assert!(Instant::now() < deadline, "slave did not catch up within {CATCH_UP:?}: master {m:?}, slave {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slave_mirrors_its_master_and_refuses_writes() {
    let dir = temp_dir();
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_config(2, "async_master"));
    let slave_cfg = slave_config(2, ha_port(&master));
    let mut slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    // Created on the master only: the topic table reaches the slave with the stream.
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut c = Conn::open(master.addr);
    // A consumer offset committed on the master reaches the slave too.
    let commit = RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "CG_HA")
        .with_ext("topic", TOPIC)
        .with_ext("queueId", "1")
        .with_ext("commitOffset", "42")
        .with_opaque(99);
    assert_eq!(c.call(commit).code, rs::SUCCESS);
    for id in 0..400 {
        assert_eq!(send(&mut c, id, 100 + id as i32).code, rs::SUCCESS);
    }
    wait_caught_up(master.addr, slave.addr);
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let q = RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET).with_ext("consumerGroup", "CG_HA").with_ext("topic", TOPIC).with_ext("queueId", "1").with_opaque(98);
        let r = Conn::open(slave.addr).call(q);
        if r.code == rs::SUCCESS && r.ext("offset") == Some("42") {
            break;
        }
        assert!(Instant::now() < deadline, "consumer offset not on the slave: {} {:?} {:?}", r.code, r.ext("offset"), r.remark);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Lag as the runtime info reports it: none once caught up; the same message count.
    let (m, sl) = (common::runtime_info(&mut Conn::open(master.addr)), common::runtime_info(&mut Conn::open(slave.addr)));
    assert_eq!(m["storeMessagesTotal"], sl["storeMessagesTotal"], "master and slave count the same messages");
    assert_eq!(m["storeMessagesTotal"].as_str(), Some("400"));
    assert_eq!(sl["haBehindMs"].as_str(), Some("0"), "a caught-up slave is 0 ms behind");
    let on_master = drain(master.addr);
    assert_eq!(on_master.len(), 400);
    assert_eq!(drain(slave.addr), on_master, "same messages at the same queue offsets");
    let r = send(&mut Conn::open(slave.addr), 9_999, 7);
    assert_eq!(r.code, rs::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    // Its tables are the master's: a topic change on the slave is refused, not lost later.
    let r = Conn::open(slave.addr).call(create_topic("HA_ON_SLAVE", 1));
    assert_eq!(r.code, rs::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    // The slave dies mid-stream and comes back: it resumes from its own end.
    let mut burst = Vec::new();
    for id in 400..2_400 {
        burst.extend(encode(&send_with(send_header(TOPIC, (id % QUEUES as usize) as i32), format!("ha body {id}").as_bytes(), 10_000 + id as i32, SerializeType::RocketMq)));
    }
    c.write(&burst, 0);
    slave.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answered = 0;
    while answered < 2_000 {
        match c.read(deadline) {
            Got::Cmd(r) if r.is_response() => {
                assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
                answered += 1;
            }
            Got::Cmd(_) => {}
            other => panic!("sends unanswered: {other:?}"),
        }
    }
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    wait_caught_up(master.addr, slave.addr);
    assert_eq!(drain(slave.addr), drain(master.addr), "caught up after its crash");
    slave.stop();
    master.stop();
}

#[test]
fn sync_master_acknowledges_only_what_a_slave_has() {
    let dir = temp_dir();
    let master_cfg = master_config(2, "sync_master");
    let mut master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_cfg);
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut c = Conn::open(master.addr);
    let r = send(&mut c, 0, 1);
    assert_eq!(r.code, rs::SLAVE_NOT_AVAILABLE, "no slave yet: {:?}", r.remark);
    assert!(r.ext("msgId").is_some(), "stored on the master: the answer still names it");
    let ha = ha_port(&master);
    let slave_cfg = slave_config(2, ha);
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    // Until the slave attached, sends may still be refused; then every send is SUCCESS.
    let deadline = Instant::now() + CATCH_UP;
    let mut id = 1;
    loop {
        let r = send(&mut c, id, 1 + id as i32);
        id += 1;
        if r.code == rs::SUCCESS {
            break;
        }
        assert_eq!(r.code, rs::SLAVE_NOT_AVAILABLE);
        assert!(Instant::now() < deadline, "the slave never attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Pipelined load; SIGKILL the master once 1500 are answered.
    let first_pipelined = id;
    let mut burst = Vec::new();
    for i in first_pipelined..first_pipelined + 3_000 {
        burst.extend(encode(&send_with(send_header(TOPIC, (i % QUEUES as usize) as i32), format!("ha body {i}").as_bytes(), 100_000 + i as i32, SerializeType::RocketMq)));
    }
    c.write(&burst, 0);
    let mut acked: Vec<usize> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.len() < 1_500 {
        match c.read(deadline) {
            Got::Cmd(r) if r.is_response() && r.code == rs::SUCCESS => acked.push((r.opaque - 100_000) as usize),
            Got::Cmd(r) if r.is_response() => panic!("send refused under load: {} {:?}", r.code, r.remark),
            Got::Cmd(_) => {}
            other => panic!("sends unanswered: {other:?}"),
        }
    }
    master.kill();
    // Whatever else was answered before the kill counts too.
    loop {
        match c.read(Instant::now() + Duration::from_millis(200)) {
            Got::Cmd(r) if r.is_response() && r.code == rs::SUCCESS => acked.push((r.opaque - 100_000) as usize),
            Got::Cmd(_) => {}
            _ => break,
        }
    }
    let on_slave = drain(slave.addr);
    let lost: Vec<usize> = acked.iter().copied().filter(|i| !on_slave.contains_key(i)).collect();
    assert!(lost.is_empty(), "{} acknowledged sends missing on the slave (first {:?})", lost.len(), &lost[..lost.len().min(10)]);
    println!("ha_process summary: SYNC_MASTER SIGKILLed after {} acknowledged sends; slave holds {} messages, 0 acknowledged lost", acked.len(), on_slave.len());
    // The master comes back, the slave reattaches; with the slave gone, sends are
    // answered SLAVE_NOT_AVAILABLE.
    // Same replication port as before (the slave knows it; the client port may change).
    let mut restart_cfg = master_cfg.clone();
    restart_cfg.top.push_str(&format!("ha_listen_port = {ha}\n"));
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &restart_cfg);
    let mut c = Conn::open(master.addr);
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let r = send(&mut c, 900_000, 3);
        if r.code == rs::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "slave did not reattach after the master restarted: {} {:?}", r.code, r.remark);
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut slave = slave;
    slave.kill();
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let r = send(&mut c, 900_001, 4);
        if r.code == rs::SLAVE_NOT_AVAILABLE {
            break;
        }
        assert!(Instant::now() < deadline, "still {} with the slave killed", r.code);
        std::thread::sleep(Duration::from_millis(50));
    }
    master.stop();
}

#[test]
fn a_slave_with_another_shard_count_is_refused() {
    let dir = temp_dir();
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_config(2, "async_master"));
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_config(1, ha_port(&master)));
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let log = read_log(&slave.logs[0]);
        if log.contains("shard layout differs") {
            assert!(log.contains("same shard_count"), "{log}");
            break;
        }
        assert!(Instant::now() < deadline, "no refusal in the slave's log:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    slave.stop();
    master.stop();
}

#[test]
fn a_master_that_comes_back_with_less_than_its_slave_refuses_it_and_the_slave_keeps_its_data() {
    let dir = temp_dir();
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_config(1, "async_master"));
    let ha = ha_port(&master);
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut c = Conn::open(master.addr);
    for id in 0..200 {
        assert_eq!(send(&mut c, id, 1 + id as i32).code, rs::SUCCESS);
    }
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_config(1, ha));
    wait_caught_up(master.addr, slave.addr);
    // The master's disk is lost: it comes back empty on the same replication port.
    master.stop();
    std::fs::remove_dir_all(dir.path().join("m")).expect("wipe the master's store");
    let mut restart = master_config(1, "async_master");
    restart.top.push_str(&format!("ha_listen_port = {ha}\n"));
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &restart);
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let (s_log, m_log) = (read_log(&slave.logs[0]), read_log(&master.logs[0]));
        if s_log.contains("is past this master's end") && m_log.contains("slave refused") {
            assert!(s_log.contains("Keep the slave's data"), "the refusal says what to do:\n{s_log}");
            break;
        }
        assert!(Instant::now() < deadline, "no refusal:\nslave:\n{s_log}\nmaster:\n{m_log}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing was streamed over the slave's data: it still serves all 200.
    assert_eq!(drain(slave.addr).len(), 200, "the slave kept every message");
    assert_eq!(runtime_of(slave.addr, "haMasterConnected"), "false");
    slave.stop();
    master.stop();
}

fn runtime_of(addr: SocketAddr, key: &str) -> String {
    common::runtime_info(&mut Conn::open(addr))[key].as_str().unwrap_or_default().to_string()
}

#[test]
fn an_empty_slave_is_reseeded_past_the_masters_retention() {
    let dir = temp_dir();
    // 1 MiB segments; retention forced whatever the disk's fill (one segment per round).
    let store = "flush = \"async\"\nsegment_bytes = 1048576\ndisk_max_used_ratio = 0.0\ndisk_force_clean_ratio = 0.0\ndisk_refuse_ratio = 0.9999\n".to_string();
    let mut master_cfg = ChildConfig { store: store.clone(), ..master_config(1, "async_master") };
    master_cfg.top.push_str("max_message_bytes = 65536\n");
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_cfg);
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let mut c = Conn::open(master.addr);
    let pad = "x".repeat(4_000);
    // ~3 MiB: records of ~4 KiB (the body id first, then padding in a property).
    for id in 0..750 {
        let mut h = send_header(TOPIC, (id % QUEUES as usize) as i32);
        h.i = Some(format!("{}PAD\u{1}{pad}\u{2}", h.i.clone().unwrap_or_default()));
        let r = c.call(send_with(h, format!("ha body {id}").as_bytes(), 1 + id as i32, SerializeType::RocketMq));
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    }
    // Retention runs every 10 s: wait until every queue lost its first records.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let mins = min_offsets(master.addr);
        if mins.iter().all(|&m| m > 0) {
            break mins;
        }
        assert!(Instant::now() < deadline, "retention never deleted the log's start: min offsets {mins:?}\n{}", read_log(&master.logs[0]));
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut slave_cfg = ChildConfig { store, ..slave_config(1, ha_port(&master)) };
    slave_cfg.top.push_str("max_message_bytes = 65536\n");
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    wait_caught_up(master.addr, slave.addr);
    let slave_mins = min_offsets(slave.addr);
    assert!(slave_mins.iter().zip(&before).all(|(s, m)| s >= m && *s > 0), "slave starts mid-queue at or past the master's minimum then: slave {slave_mins:?}, master {before:?}");
    // Everything the slave holds is the master's, at the same offsets, contiguous.
    let on_slave = drain(slave.addr);
    let on_master = drain(master.addr);
    for (id, at) in &on_slave {
        if let Some(m) = on_master.get(id) {
            assert_eq!(m, at, "id {id}");
        }
    }
    let held: usize = (0..QUEUES as usize).map(|q| (max_offsets(slave.addr)[q] - slave_mins[q]) as usize).sum();
    assert_eq!(on_slave.len(), held, "the slave reads every offset it holds");
    // New sends reach it.
    for id in 750..800 {
        assert_eq!(send(&mut c, id, 1 + id as i32).code, rs::SUCCESS);
    }
    wait_caught_up(master.addr, slave.addr);
    let on_slave = drain(slave.addr);
    assert!((750..800).all(|id| on_slave.contains_key(&id)), "new sends on the re-seeded slave: {:?}", on_slave.keys().rev().take(60).collect::<Vec<_>>());
    assert!(read_log(&slave.logs[0]).contains("re-seeded"), "the slave says it was re-seeded");
    println!("ha_process summary: master min offsets {before:?} after retention; empty slave re-seeded, holds {} messages from {slave_mins:?}", on_slave.len());
    slave.stop();
    master.stop();
}

const ROOT: (&str, &str) = ("root", "root-password");

fn with_auth(mut config: ChildConfig) -> ChildConfig {
    config.top += &format!("authentication_enabled = true\nauthorization_enabled = true\ninit_authentication_user = '{{\"username\":\"{}\",\"password\":\"{}\"}}'\n", ROOT.0, ROOT.1);
    config
}

/// `cmd` signed as `who`.
fn signed(mut cmd: RemotingCommand, who: (&str, &str), opaque: i32) -> RemotingCommand {
    ringmq_client::remoting::acl::sign(&mut cmd, &ringmq_client::remoting::acl::Credentials::new(who.0, who.1));
    cmd.with_opaque(opaque)
}

/// The usernames a LIST_USER through `addr` answers (signed as root), or its refusal.
fn list_users(addr: SocketAddr) -> Result<Vec<String>, String> {
    let r = Conn::open(addr).call(signed(RemotingCommand::request(rq::AUTH_LIST_USER), ROOT, 31));
    if r.code != rs::SUCCESS {
        return Err(format!("{} {:?}", r.code, r.remark));
    }
    let users = ringmq_acl::auth::info::UserInfo::decode_list(&r.body).map_err(|e| e.to_string())?;
    Ok(users.into_iter().filter_map(|u| u.username).collect())
}

#[test]
fn users_and_acls_reach_the_slave_and_survive_its_restart() {
    let dir = temp_dir();
    let mut master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &with_auth(master_config(2, "async_master")));
    let slave_cfg = with_auth(slave_config(2, ha_port(&master)));
    let mut slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    let alice = ringmq_acl::auth::info::UserInfo { username: Some("alice".into()), password: Some("alice-password".into()), ..Default::default() };
    let create = RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", "alice").with_body(ringmq_acl::auth::info::encode(&alice));
    let r = Conn::open(master.addr).call(signed(create.clone(), ROOT, 1));
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    let acl = br#"{"subject":"User:alice","policies":[{"entries":[{"resource":"Topic:HA_T","actions":["Pub"],"decision":"Allow"}]}]}"#;
    let r = Conn::open(master.addr).call(signed(RemotingCommand::request(rq::AUTH_CREATE_ACL).with_ext("subject", "User:alice").with_body(acl.to_vec()), ROOT, 2));
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    // The slave starts with no users: until its master's reach it, root itself is unknown.
    let deadline = Instant::now() + CATCH_UP;
    loop {
        match list_users(slave.addr) {
            Ok(users) if users == ["alice", "root"] => break,
            other => assert!(Instant::now() < deadline, "users not on the slave: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let get_acl = || {
        let r = Conn::open(slave.addr).call(signed(RemotingCommand::request(rq::AUTH_GET_ACL).with_ext("subject", "User:alice"), ROOT, 3));
        (r.code, String::from_utf8_lossy(&r.body).into_owned())
    };
    assert_eq!(get_acl(), (rs::SUCCESS, r#"{"policies":[{"entries":[{"actions":["Pub"],"decision":"Allow","resource":"Topic:HA_T"}],"policyType":"Custom"}],"subject":"User:alice"}"#.to_string()));
    // Changes are the master's to make.
    let mut bob = create.clone();
    bob.ext_fields.set_str("username", "bob");
    let r = Conn::open(slave.addr).call(signed(bob, ROOT, 4));
    assert_eq!(r.code, rs::SERVICE_NOT_AVAILABLE, "{:?}", r.remark);
    assert!(r.remark.as_deref().is_some_and(|m| m.contains("change users and ACLs on its master")), "{:?}", r.remark);
    // The slave restarts with its master gone: what it holds is its own, on its disk.
    master.kill();
    slave.kill();
    let slave = ChildBroker::start_up(dir.path(), &dir.path().join("s"), &slave_cfg);
    assert_eq!(list_users(slave.addr), Ok(vec!["alice".to_string(), "root".to_string()]));
    let get_user = Conn::open(slave.addr).call(signed(RemotingCommand::request(rq::AUTH_GET_USER).with_ext("username", "alice"), ROOT, 5));
    let user = ringmq_acl::auth::info::UserInfo::decode(&get_user.body).expect("alice's UserInfo");
    assert_eq!((user.user_type.as_deref(), user.user_status.as_deref()), (Some("Normal"), Some("enable")));
    // And checks with them: alice's wrong password and an unsigned request are refused.
    let r = Conn::open(slave.addr).call(signed(max_offset_cmd(), ("alice", "guess"), 6));
    assert_eq!((r.code, r.remark.as_deref()), (rs::NO_PERMISSION, Some("check signature failed.")));
    let r = Conn::open(slave.addr).call(max_offset_cmd().with_opaque(7));
    assert_eq!((r.code, r.remark.as_deref()), (rs::NO_PERMISSION, Some("username cannot be null.")));
}

fn max_offset_cmd() -> RemotingCommand {
    RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", "0")
}
