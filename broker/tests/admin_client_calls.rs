//! Admin codes that reach a client through the broker (`shard/client_calls.rs`) and the
//! broker's stats windows (`shard/broker_stats.rs`), against a real 2-shard broker
//! process with a raw-socket "consumer" that answers by hand:
//!
//! - GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY: asked on several admin
//!   connections (so on both shards, whichever holds the consumer's connection), the
//!   consumer gets the request (309 with the stored message as body and brokerName
//!   set), a forged answer with another opaque is ignored, the real answer comes back
//!   to the admin as it was sent; a consumer that closes before answering fails the call
//!   at once; an unknown client is "not online".
//! - INVOKE_BROKER_TO_RESET_OFFSET: offsets by time / end, force or not, pushed to the
//!   online consumer as RESET_CONSUMER_CLIENT_OFFSET (Java's whole header); CONSUMER_NOT_ONLINE for a group
//!   with offsets but no client; unknown topic and group without offsets refused.
//! - VIEW_BROKER_STATS_DATA: puts and a group's pulls counted over both shards.
//! - DELETE_TOPIC_IN_BROKER: queues and offsets gone on both shards; created again, the
//!   topic's queues start at 0.

mod common;

use common::{create_topic, pull_header, pull_with, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn, Got};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::admin::{BrokerStatsData, ResetOffsetBody};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::time::{Duration, Instant};

const TOPIC: &str = "CT";
const QUEUES: i32 = 4;
const PER_QUEUE: i64 = 3;
const GROUP: &str = "CG";
const CLIENT: &str = "10.0.0.7@fake";

fn req(code: i32, opaque: i32, ext: &[(&str, &str)]) -> RemotingCommand {
    ext.iter().fold(RemotingCommand::request(code).with_opaque(opaque), |c, (k, v)| c.with_ext(*k, *v))
}

fn expect(c: &mut Conn, cmd: RemotingCommand, code: i32) -> RemotingCommand {
    let what = format!("request {} {:?}", cmd.code, cmd.ext_fields);
    let r = c.call(cmd);
    assert_eq!(r.code, code, "{what}: {:?}", r.remark);
    r
}

/// The next request the broker sends on `c` (not a response), within 10 s.
fn next_request(c: &mut Conn) -> RemotingCommand {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.read(deadline) {
            Got::Cmd(cmd) if !cmd.is_response() => return cmd,
            Got::Cmd(_) => {}
            Got::Closed => panic!("the broker closed the consumer's connection"),
            Got::Timeout => panic!("the broker sent the consumer nothing within 10 s"),
        }
    }
}

/// Reads the response with `opaque` on `c` within 10 s.
fn response(c: &mut Conn, opaque: i32) -> RemotingCommand {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.read(deadline) {
            Got::Cmd(r) if r.is_response() && r.opaque == opaque => return r,
            Got::Cmd(_) => {}
            other => panic!("no response {opaque}: {}", matches!(other, Got::Closed)),
        }
    }
}

fn answer(c: &mut Conn, to: &RemotingCommand, opaque: i32, body: &str) {
    let mut r = to.create_response(rs::SUCCESS, None);
    r.opaque = opaque;
    r.body = body.as_bytes().to_vec().into();
    c.write(&common::encode(&r), 0);
}

fn consumer_heartbeat(client: &str) -> RemotingCommand {
    let hb = format!(
        r#"{{"clientID":"{client}","consumerDataSet":[{{"groupName":"{GROUP}","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{{"topic":"{TOPIC}","subString":"*","subVersion":1}}],"unitMode":false}}],"producerDataSet":[]}}"#
    );
    RemotingCommand::request(rq::HEART_BEAT).with_body(hb.into_bytes()).with_opaque(7)
}

#[test]
fn broker_calls_clients_and_keeps_stats() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let broker = ChildBroker::start_up(dir.path(), &store, &ChildConfig { shard_count: 2, ..Default::default() });
    let mut admin: Vec<Conn> = (0..4).map(|_| Conn::open(broker.addr)).collect();
    expect(&mut admin[0], create_topic(TOPIC, QUEUES), rs::SUCCESS);
    let mut first_msg_id = String::new();
    for q in 0..QUEUES {
        for i in 0..PER_QUEUE {
            let r = expect(&mut admin[0], send_with(send_header(TOPIC, q), format!("m{q}-{i}").as_bytes(), 100, SerializeType::Json), rs::SUCCESS);
            if first_msg_id.is_empty() {
                first_msg_id = r.ext("msgId").expect("offset msg id").to_string();
            }
        }
    }
    let mut fake = Conn::open(broker.addr);
    expect(&mut fake, consumer_heartbeat(CLIENT), rs::SUCCESS);

    // Unknown client.
    let r = expect(&mut admin[0], req(rq::GET_CONSUMER_RUNNING_INFO, 9, &[("consumerGroup", GROUP), ("clientId", "nobody")]), rs::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("The Consumer <CG> <nobody> not online"));

    // GET_CONSUMER_RUNNING_INFO from every admin connection (both shards hold some).
    for (i, a) in admin.iter_mut().enumerate() {
        let opaque = 300 + i as i32;
        a.write(&common::encode(&req(rq::GET_CONSUMER_RUNNING_INFO, opaque, &[("consumerGroup", GROUP), ("clientId", CLIENT), ("jstackEnable", "false")])), 0);
        let asked = next_request(&mut fake);
        assert_eq!((asked.code, asked.ext("consumerGroup"), asked.ext("clientId")), (rq::GET_CONSUMER_RUNNING_INFO, Some(GROUP), Some(CLIENT)));
        answer(&mut fake, &asked, asked.opaque.wrapping_add(1000), r#"{"forged":true}"#);
        let body = format!(r#"{{"properties":{{"n":"{i}"}},"subscriptionSet":[],"mqTable":{{}}}}"#);
        answer(&mut fake, &asked, asked.opaque, &body);
        let r = response(a, opaque);
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        assert_eq!(String::from_utf8_lossy(&r.body), body, "admin connection {i}");
    }

    // CONSUME_MESSAGE_DIRECTLY: the consumer gets the stored message.
    for (i, a) in admin.iter_mut().enumerate() {
        let opaque = 400 + i as i32;
        a.write(&common::encode(&req(rq::CONSUME_MESSAGE_DIRECTLY, opaque, &[("consumerGroup", GROUP), ("clientId", CLIENT), ("msgId", &first_msg_id)])), 0);
        let asked = next_request(&mut fake);
        assert_eq!((asked.code, asked.ext("brokerName")), (rq::CONSUME_MESSAGE_DIRECTLY, Some("broker-test")));
        let view = StoredMessageView::parse_verified(&asked.body).expect("the stored message is the body");
        assert_eq!((view.body(), view.topic().ok()), (&b"m0-0"[..], Some(TOPIC)));
        let result = r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":1}"#;
        answer(&mut fake, &asked, asked.opaque, result);
        let r = response(a, opaque);
        assert_eq!((r.code, String::from_utf8_lossy(&r.body).to_string()), (rs::SUCCESS, result.to_string()));
    }
    let r = expect(&mut admin[0], req(rq::CONSUME_MESSAGE_DIRECTLY, 10, &[("consumerGroup", GROUP), ("clientId", CLIENT), ("msgId", "nonsense")]), rs::SYSTEM_ERROR);
    assert!(r.remark.unwrap_or_default().contains("not an offset message id"));

    // INVOKE_BROKER_TO_RESET_OFFSET.
    for q in 0..QUEUES {
        let q = q.to_string();
        expect(&mut admin[0], req(rq::UPDATE_CONSUMER_OFFSET, 11, &[("consumerGroup", GROUP), ("topic", TOPIC), ("queueId", &q), ("commitOffset", "3")]), rs::SUCCESS);
        expect(&mut admin[0], req(rq::UPDATE_CONSUMER_OFFSET, 12, &[("consumerGroup", "OFFLINE"), ("topic", TOPIC), ("queueId", &q), ("commitOffset", "1")]), rs::SUCCESS);
    }
    let reset = |ts: &str, force: &str| req(rq::INVOKE_BROKER_TO_RESET_OFFSET, 13, &[("topic", TOPIC), ("group", GROUP), ("timestamp", ts), ("isForce", force)]);
    let r = expect(&mut admin[1], reset("0", "true"), rs::SUCCESS);
    let body = ResetOffsetBody::decode(&r.body).expect("ResetOffsetBody");
    let offsets: Vec<(i32, i64)> = body.offset_table.iter().map(|(mq, o)| (mq.queue_id, *o)).collect();
    assert_eq!(offsets, vec![(0, 0), (1, 0), (2, 0), (3, 0)], "time 0 is every queue's start");
    let pushed = next_request(&mut fake);
    assert_eq!((pushed.code, pushed.ext("group"), pushed.ext("topic")), (rq::RESET_CONSUMER_CLIENT_OFFSET, Some(GROUP), Some(TOPIC)));
    // Java's whole ResetOffsetRequestHeader: a client that requires every @CFNotNull
    // field (rocketmq-client-rust) drops a push without isForce.
    assert_eq!((pushed.ext("timestamp"), pushed.ext("isForce"), pushed.ext("queueId")), (Some("0"), Some("true"), Some("-1")));
    assert!(pushed.is_oneway());
    assert_eq!(ResetOffsetBody::decode(&pushed.body).expect("pushed body"), body);
    // Not forced, to the end: no queue moves forward.
    let r = expect(&mut admin[2], reset("-1", "false"), rs::SUCCESS);
    let kept: Vec<i64> = ResetOffsetBody::decode(&r.body).unwrap().offset_table.values().copied().collect();
    assert_eq!(kept, vec![3; QUEUES as usize]);
    let _ = next_request(&mut fake);
    let r = expect(&mut admin[0], req(rq::INVOKE_BROKER_TO_RESET_OFFSET, 14, &[("topic", TOPIC), ("group", "OFFLINE"), ("timestamp", "0"), ("isForce", "true")]), rs::CONSUMER_NOT_ONLINE);
    assert_eq!(r.remark.as_deref(), Some("Consumer not online, so can not reset offset, Group: OFFLINE Topic: CT Timestamp: 0"));
    let r = expect(&mut admin[0], req(rq::INVOKE_BROKER_TO_RESET_OFFSET, 15, &[("topic", TOPIC), ("group", "NEVER"), ("timestamp", "0")]), rs::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("THe consumer group <NEVER> not exist"));
    expect(&mut admin[0], req(rq::INVOKE_BROKER_TO_RESET_OFFSET, 16, &[("topic", "NOPE"), ("group", GROUP), ("timestamp", "0")]), rs::TOPIC_NOT_EXIST);
    let one_queue = req(rq::INVOKE_BROKER_TO_RESET_OFFSET, 26, &[("topic", TOPIC), ("group", GROUP), ("timestamp", "0"), ("queueId", "1"), ("offset", "0")]);
    let r = expect(&mut admin[0], one_queue, rs::SYSTEM_ERROR);
    assert!(r.remark.unwrap_or_default().contains("resetting one queue"), "a one-queue reset is refused, not applied to every queue");

    // VIEW_BROKER_STATS_DATA: 12 puts over both shards; the group's pull of 3.
    let mut header = pull_header(TOPIC, 1, 0);
    header.consumer_group = GROUP.into();
    header.max_msg_nums = 32;
    let r = expect(&mut admin[0], pull_with(&header, 17, SerializeType::Json), rs::SUCCESS);
    assert!(!r.body.is_empty());
    let stats = |c: &mut Conn, name: &str, key: &str| {
        let r = expect(c, req(rq::VIEW_BROKER_STATS_DATA, 18, &[("statsName", name), ("statsKey", key)]), rs::SUCCESS);
        BrokerStatsData::decode(&r.body).expect("BrokerStatsData")
    };
    let puts = stats(&mut admin[3], "TOPIC_PUT_NUMS", TOPIC);
    assert_eq!((puts.stats_minute.sum, puts.stats_hour.sum, puts.stats_day.sum), (12, 12, 12));
    assert!(puts.stats_minute.tps > 0.0 && puts.stats_minute.avgpt == 1.0, "{puts:?}");
    let gets = stats(&mut admin[3], "GROUP_GET_NUMS", &format!("{TOPIC}@{GROUP}"));
    assert_eq!((gets.stats_minute.sum, gets.stats_minute.avgpt), (PER_QUEUE, PER_QUEUE as f64));
    let bytes = stats(&mut admin[2], "TOPIC_PUT_SIZE", TOPIC);
    assert_eq!(bytes.stats_day.sum, 12 * 4, "bodies are 4 bytes");
    for (name, key) in [("TOPIC_PUT_NUMS", "NOPE"), ("BROKER_PUT_NUMS", "x")] {
        let r = expect(&mut admin[0], req(rq::VIEW_BROKER_STATS_DATA, 19, &[("statsName", name), ("statsKey", key)]), rs::SYSTEM_ERROR);
        assert_eq!(r.remark, Some(format!("The stats <{name}> <{key}> not exist")));
    }

    // deleteTopic: the queues and every group's offsets go; created again, from 0.
    expect(&mut admin[1], req(rq::DELETE_TOPIC_IN_BROKER, 21, &[("topic", TOPIC)]), rs::SUCCESS);
    expect(&mut admin[1], create_topic(TOPIC, QUEUES), rs::SUCCESS);
    for q in 0..QUEUES {
        let qs = q.to_string();
        let r = expect(&mut admin[2], req(rq::GET_MAX_OFFSET, 22, &[("topic", TOPIC), ("queueId", &qs)]), rs::SUCCESS);
        assert_eq!(r.ext("offset"), Some("0"), "queue {q} starts again at 0");
        let ask = req(rq::QUERY_CONSUMER_OFFSET, 23, &[("consumerGroup", GROUP), ("topic", TOPIC), ("queueId", &qs), ("setZeroIfNotFound", "false")]);
        let r = admin[3].call(ask);
        assert_eq!(r.code, rs::QUERY_NOT_FOUND, "the group's offset of queue {q} is gone: {:?} {:?}", r.remark, r.ext("offset"));
    }
    let r = expect(&mut admin[0], send_with(send_header(TOPIC, 2), b"after", 24, SerializeType::Json), rs::SUCCESS);
    assert_eq!(r.ext("queueOffset"), Some("0"));
    expect(&mut admin[0], req(rq::DELETE_TOPIC_IN_BROKER, 25, &[("topic", "NEVER_THERE")]), rs::SUCCESS);

    // A consumer that closes before answering fails the call at once (not after 10 s).
    admin[0].write(&common::encode(&req(rq::GET_CONSUMER_RUNNING_INFO, 20, &[("consumerGroup", GROUP), ("clientId", CLIENT)])), 0);
    let _ = next_request(&mut fake);
    let started = Instant::now();
    drop(fake);
    let r = response(&mut admin[0], 20);
    assert_eq!(r.code, rs::SYSTEM_ERROR, "{:?}", r.remark);
    assert!(started.elapsed() < Duration::from_secs(5), "failed after {:?}", started.elapsed());
    drop(broker);
}
