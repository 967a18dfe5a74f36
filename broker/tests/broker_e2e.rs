//! End-to-end: a real broker (2 shards, sync flush) on a temporary store, spoken to
//! over TCP with frames from the client codec, in both header encodings.

use bytes::BytesMut;
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::launch::{self, BrokerHandle};
use ringmq_broker::store::config::FlushMode;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::message::properties::Properties;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::{FrameLimits, SerializeType};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Client {
    stream: TcpStream,
    buf: BytesMut,
    next_opaque: i32,
    serialize_type: SerializeType,
}

impl Client {
    fn connect(addr: SocketAddr, serialize_type: SerializeType) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", addr.port())).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Self { stream, buf: BytesMut::new(), next_opaque: 1, serialize_type }
    }

    fn send(&mut self, mut cmd: RemotingCommand) -> i32 {
        cmd.opaque = self.next_opaque;
        self.next_opaque += 1;
        cmd.serialize_type = self.serialize_type;
        let mut out = BytesMut::new();
        cmd.encode(&mut out).unwrap();
        self.stream.write_all(&out).unwrap();
        cmd.opaque
    }

    fn recv(&mut self) -> Option<RemotingCommand> {
        let mut chunk = [0u8; 65536];
        loop {
            if let Some(cmd) = RemotingCommand::decode(&mut self.buf, &FrameLimits::default()).unwrap() {
                return Some(cmd);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn call(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let opaque = self.send(cmd);
        loop {
            let r = self.recv().expect("response");
            if r.is_response() && r.opaque == opaque {
                assert_eq!(r.serialize_type, self.serialize_type, "answered in the request's encoding");
                return r;
            }
        }
    }
}

fn store_root() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn start(root: &std::path::Path, port: u16) -> BrokerHandle {
    let mut config = BrokerConfig::default();
    config.store_root = root.to_path_buf();
    config.listen_port = port;
    config.shard_count = 2;
    config.broker_ip = Some("127.0.0.1".into());
    config.store.flush_mode = FlushMode::Sync;
    config.store.segment_bytes = 8 * 1024 * 1024;
    config.store.record_bytes_max = config.max_message_bytes + 64 * 1024;
    config.store.dirty_bytes_max = 8 * 1024 * 1024;
    // The host disk's own fill level must not decide the test.
    config.store.disk_max_used_ratio = 0.999;
    config.store.disk_force_clean_ratio = 0.999;
    config.store.disk_refuse_ratio = 0.9999;
    launch::start(config).expect("broker starts")
}

fn create_topic(c: &mut Client, topic: &str, queues: i32) -> RemotingCommand {
    c.call(
        RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", topic)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", queues.to_string())
            .with_ext("writeQueueNums", queues.to_string())
            .with_ext("perm", "6")
            .with_ext("topicFilterType", "SINGLE_TAG"),
    )
}

fn send_v2(topic: &str, queue_id: i32, body: &[u8], props: &str) -> RemotingCommand {
    RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_ext("a", "PG")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", "4")
        .with_ext("e", queue_id.to_string())
        .with_ext("f", "0")
        .with_ext("g", "1700000000000")
        .with_ext("h", "0")
        .with_ext("i", props)
        .with_ext("j", "0")
        .with_ext("k", "false")
        .with_body(body.to_vec())
}

fn pull(topic: &str, queue_id: i32, offset: u64, sys_flag: i32, sub: Option<&str>, suspend_ms: u64) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rq::PULL_MESSAGE)
        .with_ext("consumerGroup", "CG")
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id.to_string())
        .with_ext("queueOffset", offset.to_string())
        .with_ext("maxMsgNums", "32")
        .with_ext("sysFlag", sys_flag.to_string())
        .with_ext("commitOffset", "0")
        .with_ext("suspendTimeoutMillis", suspend_ms.to_string())
        .with_ext("subVersion", "0");
    if let Some(s) = sub {
        cmd = cmd.with_ext("subscription", s).with_ext("expressionType", "TAG");
    }
    cmd
}

fn records(body: &[u8]) -> Vec<(Vec<u8>, Properties, i64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let v = StoredMessageView::parse_verified(&body[at..]).expect("stored record");
        // Every test client connects from loopback: the broker records it (born host).
        assert_eq!(v.born_host().ip(), std::net::IpAddr::from([127, 0, 0, 1]), "born host");
        out.push((v.body().to_vec(), Properties::decode(v.properties_bytes()).unwrap(), v.queue_offset()));
        at += v.total_size();
    }
    out
}

#[test]
fn broker_serves_the_remoting_protocol_across_shards() {
    let root = store_root();
    let broker = start(root.path(), 0);
    let addr = broker.addr;
    let port = addr.port();
    let mut json = Client::connect(addr, SerializeType::Json);
    let mut bin = Client::connect(addr, SerializeType::RocketMq);

    // Missing topic, then creation.
    let r = json.call(send_v2("T1", 0, b"x", ""));
    assert_eq!(r.code, rs::TOPIC_NOT_EXIST, "{:?}", r.remark);
    assert_eq!(create_topic(&mut json, "T1", 4).code, rs::SUCCESS);

    // Sends on every queue (the queues are spread over both shards), both encodings.
    let mut expected = vec![Vec::new(); 4];
    for i in 0..40u32 {
        let q = (i % 4) as i32;
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let props = format!("TAGS\u{1}{tag}\u{2}KEYS\u{1}k{i} order\u{2}UNIQ_KEY\u{1}U{i}\u{2}");
        let body = format!("message {i}").into_bytes();
        let client = if i % 3 == 0 { &mut bin } else { &mut json };
        let r = client.call(send_v2("T1", q, &body, &props));
        assert_eq!(r.code, rs::SUCCESS, "send {i}: {:?}", r.remark);
        assert_eq!(r.ext("queueOffset").unwrap(), expected[q as usize].len().to_string());
        assert_eq!(r.ext("msgId").unwrap().len(), 32);
        expected[q as usize].push((body, tag));
    }
    for q in 0..4 {
        let r = bin.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", "T1").with_ext("queueId", q.to_string()));
        assert_eq!(r.ext("offset"), Some("10"));
    }

    // Pull everything back, byte for byte.
    for q in 0..4 {
        let r = json.call(pull("T1", q, 0, 0, None, 0));
        assert_eq!(r.code, rs::SUCCESS);
        let got = records(&r.body);
        assert_eq!(got.len(), 10);
        for (i, (body, props, offset)) in got.iter().enumerate() {
            assert_eq!(body, &expected[q as usize][i].0);
            assert_eq!(props.tags(), Some(expected[q as usize][i].1));
            assert_eq!(*offset, i as i64);
        }
        assert_eq!(r.ext("nextBeginOffset"), Some("10"));
    }
    // A lite-pull consumer's pull (LITE_PULL_MESSAGE, sysFlag 0x10) is served alike.
    let mut lite = pull("T1", 1, 0, 0x10, None, 0);
    lite.code = rq::LITE_PULL_MESSAGE;
    let r = bin.call(lite);
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    assert_eq!(records(&r.body).len(), 10);
    // Tag filter on the broker.
    let r = bin.call(pull("T1", 0, 0, 0x4, Some("TagA || TagX"), 0));
    let got = records(&r.body);
    assert!(!got.is_empty() && got.iter().all(|(_, p, _)| p.tags() == Some("TagA")));

    // Long polling: a pull at the end waits and is answered when a message arrives.
    let waiter = std::thread::spawn(move || {
        let mut c = Client::connect(addr, SerializeType::Json);
        let started = Instant::now();
        let r = c.call(pull("T1", 2, 10, 0x2, None, 5_000));
        (r.code, records(&r.body).len(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(json.call(send_v2("T1", 2, b"late", "")).code, rs::SUCCESS);
    let (code, n, waited) = waiter.join().unwrap();
    assert_eq!((code, n), (rs::SUCCESS, 1));
    assert!(waited < Duration::from_millis(4_000), "answered on arrival, not at timeout: {waited:?}");
    // ...and times out with PULL_NOT_FOUND when nothing comes.
    let r = json.call(pull("T1", 3, 10, 0x2, None, 300));
    assert_eq!(r.code, rs::PULL_NOT_FOUND);

    // Consumer offsets.
    let r = json.call(
        RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "CG")
            .with_ext("topic", "T1")
            .with_ext("queueId", "1")
            .with_ext("commitOffset", "7"),
    );
    assert_eq!(r.code, rs::SUCCESS);
    let query_offset = |c: &mut Client| {
        c.call(RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET).with_ext("consumerGroup", "CG").with_ext("topic", "T1").with_ext("queueId", "1"))
    };
    assert_eq!(query_offset(&mut bin).ext("offset"), Some("7"));

    // Query by key (every shard's index) and view by id.
    let r = json.call(
        RemotingCommand::request(rq::QUERY_MESSAGE)
            .with_ext("topic", "T1")
            .with_ext("key", "k5")
            .with_ext("maxNum", "4")
            .with_ext("beginTimestamp", "0")
            .with_ext("endTimestamp", i64::MAX.to_string()),
    );
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    assert_eq!(records(&r.body)[0].0, b"message 5");
    let r = json.call(send_v2("T1", 3, b"by id", ""));
    let msg_id = r.ext("msgId").unwrap().to_string();
    let phys = u64::from_str_radix(&msg_id[16..], 16).unwrap();
    let r = bin.call(RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", phys.to_string()));
    assert_eq!(r.code, rs::SUCCESS);
    assert_eq!(records(&r.body)[0].0, b"by id");

    // Heartbeat and group membership.
    let hb = r#"{"clientID":"10.0.0.9@1","consumerDataSet":[{"groupName":"CG","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T1","subString":"*","subVersion":1}],"unitMode":false}],"producerDataSet":[{"groupName":"PG"}]}"#;
    assert_eq!(json.call(RemotingCommand::request(rq::HEART_BEAT).with_body(hb.as_bytes().to_vec())).code, rs::SUCCESS);
    let r = bin.call(RemotingCommand::request(rq::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "CG"));
    assert_eq!(r.code, rs::SUCCESS);
    assert!(String::from_utf8_lossy(&r.body).contains("10.0.0.9@1"));

    // Orderly consumption: one client at a time holds a queue's lock.
    let lock = |client: &str| {
        let body = format!(r#"{{"consumerGroup":"CG","clientId":"{client}","onlyThisBroker":false,"mqSet":[{{"topic":"T1","brokerName":"broker-a","queueId":0}},{{"topic":"T1","brokerName":"broker-a","queueId":1}}]}}"#);
        RemotingCommand::request(rq::LOCK_BATCH_MQ).with_body(body.into_bytes())
    };
    let r = json.call(lock("c1"));
    assert_eq!(r.code, rs::SUCCESS);
    assert_eq!(String::from_utf8_lossy(&r.body).matches("queueId").count(), 2, "c1 locks both");
    let r = bin.call(lock("c2"));
    assert_eq!(String::from_utf8_lossy(&r.body).matches("queueId").count(), 0, "c2 gets none while c1 holds them");
    let unlock = RemotingCommand::request(rq::UNLOCK_BATCH_MQ).with_body(
        br#"{"consumerGroup":"CG","clientId":"c1","mqSet":[{"topic":"T1","brokerName":"broker-a","queueId":0}]}"#.to_vec(),
    );
    assert_eq!(json.call(unlock).code, rs::SUCCESS);
    let r = bin.call(lock("c2"));
    assert_eq!(String::from_utf8_lossy(&r.body).matches("queueId").count(), 1, "c2 gets the released queue");
    let group = RemotingCommand::request(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(br#"{"groupName":"CG","consumeEnable":true,"retryMaxTimes":3}"#.to_vec());
    assert_eq!(bin.call(group).code, rs::SUCCESS);

    // Bad input: unknown code, oversize body, garbage; the broker keeps serving.
    assert_eq!(json.call(RemotingCommand::request(9999)).code, rs::REQUEST_CODE_NOT_SUPPORTED);
    let r = json.call(send_v2("T1", 0, &vec![b'x'; 4 * 1024 * 1024 + 1], ""));
    assert_eq!(r.code, rs::MESSAGE_ILLEGAL, "{:?}", r.remark);
    let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
    garbage.write_all(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4]).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut one = [0u8; 1];
    assert!(matches!(garbage.read(&mut one), Ok(0) | Err(_)), "bad frame closes that connection");
    assert_eq!(json.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", "T1").with_ext("queueId", "0")).ext("offset"), Some("10"));

    // A clean stop and a restart keep topics, messages and offsets.
    drop(json);
    drop(bin);
    broker.stop();
    broker.join();
    let broker = start(root.path(), port);
    let mut c = Client::connect(broker.addr, SerializeType::Json);
    let r = c.call(pull("T1", 0, 0, 0, None, 0));
    assert_eq!(records(&r.body).len(), 10);
    assert_eq!(query_offset(&mut c).ext("offset"), Some("7"));
    broker.stop();
    broker.join();
}

/// Retention runs inside the running broker (not only when a test calls it): with the
/// force-clean watermark at 0 every round deletes the oldest sealed, checkpointed
/// segment, the queue's minimum offset moves up, and what is left still reads back.
#[test]
fn retention_deletes_old_segments_in_the_running_broker() {
    let root = store_root();
    let mut config = BrokerConfig::default();
    config.store_root = root.path().to_path_buf();
    config.listen_port = 0;
    config.shard_count = 1;
    config.broker_ip = Some("127.0.0.1".into());
    config.max_message_bytes = 64 * 1024;
    config.store.flush_mode = FlushMode::Async;
    config.store.segment_bytes = 1024 * 1024;
    config.store.record_bytes_max = 128 * 1024;
    config.store.dirty_bytes_max = 4 * 1024 * 1024;
    config.store.flush_min_bytes = 256 * 1024;
    config.store.disk_max_used_ratio = 0.0;
    config.store.disk_force_clean_ratio = 0.0;
    let broker = launch::start(config).expect("broker starts");
    let mut c = Client::connect(broker.addr, SerializeType::Json);
    let r = create_topic(&mut c, "RETAIN", 1);
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    let body = vec![7u8; 16 * 1024];
    let mut sent = 0;
    while sent < 300 {
        match c.call(send_v2("RETAIN", 0, &body, "")).code {
            rs::SUCCESS => sent += 1,
            rs::SYSTEM_BUSY => std::thread::sleep(Duration::from_millis(20)),
            code => panic!("send answered {code}"),
        }
    }
    let segments = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root.path().join("shard-0").join("commitlog"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    let before = segments();
    assert!(before.len() >= 4 && before[0] == format!("{:020}", 0), "{before:?}");
    let min_offset = |c: &mut Client| {
        let r = c.call(RemotingCommand::request(rq::GET_MIN_OFFSET).with_ext("topic", "RETAIN").with_ext("queueId", "0"));
        r.ext("offset").and_then(|o| o.parse::<u64>().ok()).expect("offset")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while min_offset(&mut c) == 0 {
        assert!(std::time::Instant::now() < deadline, "retention never ran ({:?})", segments());
        std::thread::sleep(Duration::from_millis(200));
    }
    let min = min_offset(&mut c);
    let after = segments();
    assert!(after[0] > before[0], "the oldest segment was deleted: {before:?} → {after:?}");
    let r = c.call(pull("RETAIN", 0, min, 0, None, 0));
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
    assert_eq!(records(&r.body)[0].2, min as i64, "the first kept message reads back");
    broker.stop();
    broker.join();
}
