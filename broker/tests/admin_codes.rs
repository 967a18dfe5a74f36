//! The admin tools' request codes against a real 2-shard broker process
//! (`shard/admin_tools.rs`): GET_TOPIC_STATS_INFO, GET_CONSUME_STATS,
//! GET_CONSUMER_CONNECTION_LIST, QUERY_TOPIC_CONSUME_BY_WHO, GET_TOPIC_CONFIG and
//! DELETE_SUBSCRIPTIONGROUP, with their error cases (unknown topic, no consumer online,
//! missing or malformed header fields), and the exact Java shapes of GET_ALL_TOPIC_CONFIG,
//! the subscription group answers, GET_BROKER_CONFIG's version and UPDATE_BROKER_CONFIG's
//! refusal (the same codes through an independent client: `interop_admin.rs`). Topics have 4 queues, so both shards own some:
//! every whole-broker answer is checked to cover queues of both.
//!
//! - `admin_codes_answer_as_apache_rocketmq`: one broker, each code in turn; bodies are
//!   decoded with the client's decoders for fastjson's map-key form and the raw text is
//!   checked where its exact form matters.
//! - `a_slave_refuses_group_deletion`: DELETE_SUBSCRIPTIONGROUP on a slave is
//!   SERVICE_NOT_AVAILABLE, as other metadata changes.
//! - `namesrv_addr_changed_at_runtime_registers_at_once_and_after_a_restart`:
//!   UPDATE_BROKER_CONFIG of `namesrvAddr` on a broker started without one.

mod common;

use common::{create_group, create_topic, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn};
use ringmq_client::remoting::admin::{ConsumeStats, GroupList, OffsetWrapper, TopicStatsTable};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use ringmq_client::remoting::route::TopicConfigAndMappingSerializeWrapper;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TOPIC: &str = "AT";
const TOPIC2: &str = "AT2";
const QUEUES: i32 = 4;
const MESSAGES_PER_QUEUE: i64 = 3;
const BROKER: &str = "broker-test";

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn req(code: i32, ext: &[(&str, &str)]) -> RemotingCommand {
    ext.iter().fold(RemotingCommand::request(code).with_opaque(code), |c, (k, v)| c.with_ext(*k, *v))
}

/// Sends `cmd`; expects `code` and, when given, exactly `remark`. Returns the body.
fn check(c: &mut Conn, cmd: RemotingCommand, code: i32, remark: Option<&str>) -> Vec<u8> {
    let what = format!("request {} {:?}", cmd.code, cmd.ext_fields);
    let r = c.call(cmd);
    assert_eq!(r.code, code, "{what}: {:?}", r.remark);
    if let Some(remark) = remark {
        assert_eq!(r.remark.as_deref(), Some(remark), "{what}");
    }
    r.body.to_vec()
}

fn commit(c: &mut Conn, group: &str, topic: &str, queue_id: i32, offset: i64) {
    let (q, o) = (queue_id.to_string(), offset.to_string());
    let cmd = req(rq::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", group), ("topic", topic), ("queueId", &q), ("commitOffset", &o)]);
    check(c, cmd, rs::SUCCESS, None);
}

/// (queue id, consumerOffset, whether lastTimestamp is a store time) per queue.
fn consume_rows(body: &[u8]) -> Vec<(String, i32, i64, i64, bool)> {
    let stats = ConsumeStats::decode(body).unwrap_or_else(|e| panic!("ConsumeStats: {e}: {}", String::from_utf8_lossy(body)));
    stats
        .offset_table
        .iter()
        .map(|(mq, w): (_, &OffsetWrapper)| {
            assert_eq!((mq.broker_name.as_str(), w.pull_offset), (BROKER, w.consumer_offset));
            (mq.topic.clone(), mq.queue_id, w.broker_offset, w.consumer_offset, w.last_timestamp > 0)
        })
        .collect()
}

fn groups(body: &[u8]) -> Vec<String> {
    GroupList::decode(body).unwrap_or_else(|e| panic!("GroupList: {e}: {}", String::from_utf8_lossy(body))).group_list
}

#[test]
fn admin_codes_answer_as_apache_rocketmq() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let broker = ChildBroker::start_up(dir.path(), &store, &ChildConfig { shard_count: 2, ..Default::default() });
    let mut c = Conn::open(broker.addr);
    check(&mut c, create_topic(TOPIC, QUEUES), rs::SUCCESS, None);
    check(&mut c, create_topic(TOPIC2, 2), rs::SUCCESS, None);
    let before = now_ms();
    for q in 0..QUEUES {
        for i in 0..MESSAGES_PER_QUEUE {
            let r = c.call(send_with(send_header(TOPIC, q), format!("m{q}-{i}").as_bytes(), 100 + q, SerializeType::Json));
            assert_eq!(r.code, rs::SUCCESS, "send: {:?}", r.remark);
        }
    }
    let after = now_ms();
    commit(&mut c, "CG1", TOPIC, 0, 2);
    commit(&mut c, "CG1", TOPIC, 1, 3);
    commit(&mut c, "CG2", TOPIC, 3, 1);
    commit(&mut c, "CG3", TOPIC, 2, 1);
    let hb = r#"{"clientID":"10.0.0.9@admin","consumerDataSet":[{"groupName":"CG1","consumeType":"CONSUME_ACTIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"topic":"AT","subString":"TagA || TagB","subVersion":5}],"unitMode":false}],"producerDataSet":[]}"#;
    let heartbeat = RemotingCommand::request(rq::HEART_BEAT).with_body(hb.as_bytes().to_vec()).with_opaque(7);
    let (language, version) = (heartbeat.language.to_string(), heartbeat.version);
    check(&mut c, heartbeat, rs::SUCCESS, None);

    // GET_TOPIC_STATS_INFO: every queue (both shards), fastjson's map-key form.
    let body = check(&mut c, req(rq::GET_TOPIC_STATS_INFO, &[("topic", TOPIC)]), rs::SUCCESS, None);
    let text = String::from_utf8_lossy(&body).to_string();
    assert!(text.starts_with(r#"{"offsetTable":{{"brokerName":"broker-test","queueId":0,"topic":"AT"}:{"lastUpdateTimestamp":"#), "{text}");
    assert!(text.ends_with(r#"},"topicPutTps":0.0}"#), "{text}");
    let stats = TopicStatsTable::decode(&body).unwrap_or_else(|e| panic!("{e}: {text}"));
    let rows: Vec<(i32, i64, i64, bool)> = stats
        .offset_table
        .iter()
        .map(|(mq, o)| (mq.queue_id, o.min_offset, o.max_offset, (before..=after).contains(&o.last_update_timestamp)))
        .collect();
    assert_eq!(rows, (0..QUEUES).map(|q| (q, 0, MESSAGES_PER_QUEUE, true)).collect::<Vec<_>>(), "{text}");
    let body = check(&mut c, req(rq::GET_TOPIC_STATS_INFO, &[("topic", TOPIC2)]), rs::SUCCESS, None);
    let empty: Vec<_> = TopicStatsTable::decode(&body).unwrap().offset_table.values().map(|o| (o.max_offset, o.last_update_timestamp)).collect();
    assert_eq!(empty, vec![(0, 0), (0, 0)]);
    check(&mut c, req(rq::GET_TOPIC_STATS_INFO, &[("topic", "NOPE")]), rs::TOPIC_NOT_EXIST, Some("topic[NOPE] not exist"));
    check(&mut c, req(rq::GET_TOPIC_STATS_INFO, &[]), rs::INVALID_PARAMETER, Some("missing header field topic"));

    // GET_CONSUME_STATS: topics the group has offsets for, every queue of them.
    let at = |q: i32, consumer: i64, ts: bool| (TOPIC.to_string(), q, MESSAGES_PER_QUEUE, consumer, ts);
    let cases: Vec<(Vec<(&str, &str)>, Vec<(String, i32, i64, i64, bool)>)> = vec![
        (vec![("consumerGroup", "CG1")], vec![at(0, 2, true), at(1, 3, true), at(2, 0, false), at(3, 0, false)]),
        (vec![("consumerGroup", "CG1"), ("topic", TOPIC)], vec![at(0, 2, true), at(1, 3, true), at(2, 0, false), at(3, 0, false)]),
        // CG1 is online and does not subscribe to AT2: left out, as Java.
        (vec![("consumerGroup", "CG1"), ("topic", TOPIC2)], vec![]),
        (vec![("consumerGroup", "CG2")], vec![at(0, 0, false), at(1, 0, false), at(2, 0, false), at(3, 1, true)]),
        // A topic list is taken as given (no subscription check).
        (vec![("consumerGroup", "CG1"), ("topicList", "AT2")], vec![(TOPIC2.into(), 0, 0, 0, false), (TOPIC2.into(), 1, 0, 0, false)]),
        (vec![("consumerGroup", "NOBODY")], vec![]),
        (vec![("consumerGroup", "CG2"), ("topic", "NOPE")], vec![]),
    ];
    for (ext, expected) in cases {
        let body = check(&mut c, req(rq::GET_CONSUME_STATS, &ext), rs::SUCCESS, None);
        assert_eq!(consume_rows(&body), expected, "{ext:?}: {}", String::from_utf8_lossy(&body));
    }
    let body = check(&mut c, req(rq::GET_CONSUME_STATS, &[("consumerGroup", "CG2")]), rs::SUCCESS, None);
    assert!(String::from_utf8_lossy(&body).starts_with(r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-test","queueId":0,"topic":"AT"}:{"brokerOffset":3,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}"#));
    check(&mut c, req(rq::GET_CONSUME_STATS, &[]), rs::INVALID_PARAMETER, Some("missing header field consumerGroup"));
    check(&mut c, req(rq::GET_CONSUME_STATS, &[("consumerGroup", " ")]), rs::INVALID_PARAMETER, Some("missing header field consumerGroup"));

    // GET_CONSUMER_CONNECTION_LIST.
    let body = check(&mut c, req(rq::GET_CONSUMER_CONNECTION_LIST, &[("consumerGroup", "CG1")]), rs::SUCCESS, None);
    let v: serde_json::Value = serde_json::from_slice(&body).expect("ConsumerConnection is JSON");
    let conn = &v["connectionSet"][0];
    assert_eq!(v["connectionSet"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!((conn["clientId"].as_str(), conn["language"].as_str(), conn["version"].as_i64()), (Some("10.0.0.9@admin"), Some(language.as_ref()), Some(version as i64)), "{v}");
    assert!(conn["clientAddr"].as_str().unwrap_or("").starts_with("127.0.0.1:"), "{v}");
    assert_eq!((v["consumeType"].as_str(), v["messageModel"].as_str(), v["consumeFromWhere"].as_str()), (Some("CONSUME_ACTIVELY"), Some("CLUSTERING"), Some("CONSUME_FROM_FIRST_OFFSET")), "{v}");
    let sub = &v["subscriptionTable"]["AT"];
    assert_eq!((sub["topic"].as_str(), sub["subString"].as_str(), sub["subVersion"].as_i64(), sub["expressionType"].as_str()), (Some("AT"), Some("TagA || TagB"), Some(5), Some("TAG")), "{v}");
    assert_eq!(sub["tagsSet"], serde_json::json!(["TagA", "TagB"]), "{v}");
    assert_eq!(sub["codeSet"].as_array().map(Vec::len), Some(2), "{v}");
    check(&mut c, req(rq::GET_CONSUMER_CONNECTION_LIST, &[("consumerGroup", "CG2")]), rs::CONSUMER_NOT_ONLINE, Some("the consumer group[CG2] not online"));
    check(&mut c, req(rq::GET_CONSUMER_CONNECTION_LIST, &[]), rs::INVALID_PARAMETER, Some("missing header field consumerGroup"));

    // QUERY_TOPIC_CONSUME_BY_WHO: live subscribers and groups with offsets (any shard).
    let by_who: BTreeMap<&str, Vec<&str>> = [(TOPIC, vec!["CG1", "CG2", "CG3"]), (TOPIC2, vec![]), ("NOPE", vec![])].into_iter().collect();
    for (topic, expected) in &by_who {
        let body = check(&mut c, req(rq::QUERY_TOPIC_CONSUME_BY_WHO, &[("topic", topic)]), rs::SUCCESS, None);
        assert_eq!(groups(&body), *expected, "{topic}");
    }
    check(&mut c, req(rq::QUERY_TOPIC_CONSUME_BY_WHO, &[]), rs::INVALID_PARAMETER, Some("missing header field topic"));

    // GET_TOPIC_CONFIG: fastjson's TopicConfig, byte for byte.
    let body = check(&mut c, req(rq::GET_TOPIC_CONFIG, &[("topic", TOPIC)]), rs::SUCCESS, None);
    assert_eq!(
        String::from_utf8_lossy(&body),
        r#"{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"AT","topicSysFlag":0,"writeQueueNums":4}"#
    );
    check(&mut c, req(rq::GET_TOPIC_CONFIG, &[("topic", "NOPE")]), rs::TOPIC_NOT_EXIST, Some("No topic in this broker. topic: NOPE"));
    check(&mut c, req(rq::GET_TOPIC_CONFIG, &[]), rs::INVALID_PARAMETER, Some("missing header field topic"));

    // DELETE_SUBSCRIPTIONGROUP: the config goes; with cleanOffset the offsets on every
    // shard too; without, they stay. Unknown groups are deleted silently, as Java.
    for g in ["CG2", "CG3"] {
        check(&mut c, create_group(g).with_opaque(3), rs::SUCCESS, None);
        check(&mut c, req(rq::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", g)]), rs::SUCCESS, None);
    }
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "CG2"), ("cleanOffset", "true")]), rs::SUCCESS, None);
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "CG3")]), rs::SUCCESS, None);
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "NOBODY"), ("cleanOffset", "false")]), rs::SUCCESS, None);
    for g in ["CG2", "CG3"] {
        check(&mut c, req(rq::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", g)]), rs::SUBSCRIPTION_GROUP_NOT_EXIST, None);
    }
    let body = check(&mut c, req(rq::QUERY_TOPIC_CONSUME_BY_WHO, &[("topic", TOPIC)]), rs::SUCCESS, None);
    assert_eq!(groups(&body), vec!["CG1", "CG3"], "CG2's offsets are gone, CG3's kept");
    let body = check(&mut c, req(rq::GET_CONSUME_STATS, &[("consumerGroup", "CG2")]), rs::SUCCESS, None);
    assert_eq!(consume_rows(&body), vec![]);
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[]), rs::INVALID_PARAMETER, Some("missing header field groupName"));
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "bad group")]), rs::INVALID_PARAMETER, None);
    // A client cannot pose as a per-shard sub-request (which would only drop offsets).
    check(&mut c, req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "CG1"), ("ringmqLocalOnly", "1")]), rs::SUCCESS, None);
    let body = check(&mut c, req(rq::GET_CONSUME_STATS, &[("consumerGroup", "CG1")]), rs::SUCCESS, None);
    assert_eq!(consume_rows(&body), vec![at(0, 2, true), at(1, 3, true), at(2, 0, false), at(3, 0, false)], "CG1's offsets were not cleaned");

    // GET_ALL_TOPIC_CONFIG: Java's TopicConfigAndMappingSerializeWrapper, whole table,
    // `totalTopicNum` (even when a paging client asks for a page: Java's default).
    for ext in [vec![], vec![("topicSeq", "0"), ("maxTopicNum", "1"), ("dataVersion", "")]] {
        let r = c.call(req(rq::GET_ALL_TOPIC_CONFIG, &ext));
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        let text = String::from_utf8_lossy(&r.body).to_string();
        let all = TopicConfigAndMappingSerializeWrapper::decode(&r.body).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(text.starts_with(r#"{"dataVersion":{"counter":"#), "{text}");
        assert!(text.contains(r#","stateVersion":0,"timestamp":"#), "{text}");
        assert!(text.contains(r#""AT":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"AT","topicSysFlag":0,"writeQueueNums":4}"#), "{text}");
        assert!(text.ends_with(r#"},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}"#), "{text}");
        assert!(all.topic_config_table.contains_key(TOPIC2), "{text}");
        assert_eq!(r.ext("totalTopicNum"), Some(all.topic_config_table.len().to_string().as_str()));
    }

    // The group answers: Java's SubscriptionGroupConfig (every field, Java's defaults for
    // what RingMQ does not keep) and SubscriptionGroupWrapper, byte for byte.
    check(&mut c, create_group("CG9").with_opaque(9), rs::SUCCESS, None);
    let group = r#"{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"CG9","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}"#;
    let body = check(&mut c, req(rq::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", "CG9")]), rs::SUCCESS, None);
    assert_eq!(String::from_utf8_lossy(&body), group);
    check(&mut c, req(rq::GET_SUBSCRIPTIONGROUP_CONFIG, &[("group", "NOBODY")]), rs::SUBSCRIPTION_GROUP_NOT_EXIST, Some("No group in this broker"));
    let r = c.call(req(rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, &[]));
    let text = String::from_utf8_lossy(&r.body).to_string();
    assert!(text.starts_with(r#"{"dataVersion":{"counter":"#) && text.contains(r#","forbiddenTable":{},"subscriptionGroupTable":{"#), "{text}");
    assert!(text.contains(&format!(r#""CG9":{group}"#)), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("SubscriptionGroupWrapper is JSON");
    let groups = v["subscriptionGroupTable"].as_object().map(|t| t.len()).unwrap_or(0);
    assert_eq!(r.ext("totalGroupNum"), Some(groups.to_string().as_str()), "{text}");

    // GET_BROKER_CONFIG's `version` is a Java DataVersion; the bound port is reported.
    let r = c.call(req(rq::GET_BROKER_CONFIG, &[]));
    let version: serde_json::Value = serde_json::from_str(r.ext("version").unwrap_or("")).expect("version is JSON");
    assert_eq!((version["counter"].as_i64(), version["stateVersion"].as_i64(), version["timestamp"].as_i64().is_some()), (Some(0), Some(0), true));
    let listen = format!("listenPort={}", broker.addr.port());
    assert!(String::from_utf8_lossy(&r.body).lines().any(|l| l == listen), "{listen}");

    // UPDATE_BROKER_CONFIG: refused as Java refuses a key that may not change at runtime.
    let update = RemotingCommand::request(rq::UPDATE_BROKER_CONFIG).with_opaque(25).with_body(b"brokerName=x\n".to_vec());
    let why = ringmq_broker::config::start_up_reason("brokerName").expect("brokerName is a start-up key");
    let remark = format!("RingMQ cannot change `brokerName` at runtime: {why}; change the config file and restart the broker");
    check(&mut c, update, rs::NO_PERMISSION, Some(&remark));
    // maxMessageSize changes at runtime on both shards of a real process: a body over
    // the new limit is MESSAGE_ILLEGAL, one at it stored; raised, a body over the
    // start-up frame limit (4 MiB + 64 KiB) is taken on a connection opened before.
    const TOPIC3: &str = "AT3";
    check(&mut c, create_topic(TOPIC3, QUEUES), rs::SUCCESS, None);
    let steps: [(&str, &[(usize, i32)]); 3] = [
        ("maxMessageSize=1024", &[(1024, rs::SUCCESS), (1025, rs::MESSAGE_ILLEGAL)]),
        ("maxMessageSize=6291456", &[(6 << 20, rs::SUCCESS), ((6 << 20) + 1, rs::MESSAGE_ILLEGAL)]),
        ("maxMessageSize=4194304", &[(4 << 20, rs::SUCCESS)]),
    ];
    for (update, sends) in steps {
        check(&mut c, RemotingCommand::request(rq::UPDATE_BROKER_CONFIG).with_opaque(25).with_body(update.as_bytes().to_vec()), rs::SUCCESS, None);
        for &(len, code) in sends {
            for q in 0..QUEUES {
                let r = c.call(send_with(send_header(TOPIC3, q), &vec![b'z'; len], 300 + q, SerializeType::Json));
                assert_eq!(r.code, code, "after {update}: {len} bytes to {TOPIC3}/{q}: {:?}", r.remark);
                if code == rs::MESSAGE_ILLEGAL {
                    assert!(r.remark.as_deref().is_some_and(|m| m.contains(&format!("message body size {len} exceeds the maximum"))), "{:?}", r.remark);
                }
            }
        }
    }

    // DELETE_TOPIC_IN_BROKER as Java's deleteTopic: gone once, then "nothing to delete"
    // is SUCCESS too; blank and system topics are refused with Java's remarks.
    let cases: Vec<(&str, i32, Option<&str>)> = vec![
        (TOPIC2, rs::SUCCESS, None),
        (TOPIC2, rs::SUCCESS, None),
        (" ", rs::INVALID_PARAMETER, Some("The specified topic is blank.")),
        ("TBW102", rs::INVALID_PARAMETER, Some("The topic[TBW102] is conflict with system topic.")),
    ];
    for (topic, code, remark) in cases {
        check(&mut c, req(rq::DELETE_TOPIC_IN_BROKER, &[("topic", topic)]), code, remark);
    }
    check(&mut c, req(rq::GET_TOPIC_CONFIG, &[("topic", TOPIC2)]), rs::TOPIC_NOT_EXIST, None);

    // Every state change names its caller in the log, whichever shard ran it.
    let log = broker.stdout();
    let logged = [
        ("topic created or updated", "AT2"),
        ("subscription group created or updated", "CG9"),
        ("delete subscription group", "CG2"),
        ("broker config update refused", "brokerName"),
        ("topic deleted from the broker", "AT2"),
    ];
    for (message, name) in logged {
        let found = log.lines().any(|l| l.contains(message) && l.contains(name) && l.contains("caller=\"127.0.0.1:"));
        assert!(found, "{message} {name} is logged with its caller:\n{log}");
    }
}

/// A slave's group table is its master's: DELETE_SUBSCRIPTIONGROUP is refused there like
/// every other metadata change (its master is not even up: the refusal needs none).
#[test]
fn a_slave_refuses_group_deletion() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let top = "role = \"slave\"\nbroker_id = 1\nha_master_address = \"127.0.0.1:1\"\n".to_string();
    let broker = ChildBroker::start_up(dir.path(), &store, &ChildConfig { shard_count: 2, top, ..Default::default() });
    let mut c = Conn::open(broker.addr);
    for clean in ["true", "false"] {
        let cmd = req(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "CG1"), ("cleanOffset", clean)]);
        check(&mut c, cmd, rs::SERVICE_NOT_AVAILABLE, Some("this broker is a slave: change topics and groups on its master (they replicate here)"));
    }
}

/// Whether the NameServer at `ns` lists `broker` (GET_BROKER_CLUSTER_INFO), polled until
/// it matches `listed` or `within` passes; returns the last answer.
fn listed_within(ns: SocketAddr, broker: &str, listed: bool, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let body = Conn::open(ns).call(req(rq::GET_BROKER_CLUSTER_INFO, &[])).body;
        let now = String::from_utf8_lossy(&body).contains(&format!("\"{broker}\""));
        if now == listed || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `namesrvAddr` changes at runtime: a broker started without a NameServer registers
/// with the one the update names right after the answer (not a registration interval,
/// 30 s, later), and with it again after a restart (runtimeConfig; its clean stop
/// unregistered it first).
#[test]
fn namesrv_addr_changed_at_runtime_registers_at_once_and_after_a_restart() {
    let ns = namesrv::server::spawn(namesrv::config::ServerConfig { listen: "127.0.0.1:0".parse().expect("address"), ..Default::default() }).expect("namesrv starts");
    let ns_addr = ns.local_addr();
    let dir = temp_dir();
    let store = dir.path().join("store");
    let config = ChildConfig { shard_count: 2, ..Default::default() };
    let broker = ChildBroker::start_up(dir.path(), &store, &config);
    assert!(!listed_within(ns_addr, BROKER, true, Duration::ZERO), "started without a NameServer");
    let update = RemotingCommand::request(rq::UPDATE_BROKER_CONFIG).with_opaque(25).with_body(format!("namesrvAddr={ns_addr}\n").into_bytes());
    check(&mut Conn::open(broker.addr), update, rs::SUCCESS, None);
    assert!(listed_within(ns_addr, BROKER, true, Duration::from_secs(10)), "registered right after the update");
    broker.stop();
    assert!(!listed_within(ns_addr, BROKER, false, Duration::from_secs(10)), "unregistered by the clean stop");
    let _broker = ChildBroker::start_up(dir.path(), &store, &config);
    assert!(listed_within(ns_addr, BROKER, true, Duration::from_secs(10)), "registered again at the restart, from runtimeConfig");
}
