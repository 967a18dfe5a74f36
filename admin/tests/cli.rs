//! `ringmq-admin` against a live NameServer and broker (both in this process, a fresh
//! store): every command's output, as a table and as JSON, and its failures (exit 1 with
//! the broker's answer, exit 2 for bad flags).

mod common;

use std::time::{Duration, Instant};

use common::{admin, ok};

fn cluster() -> common::Cluster {
    common::cluster("broker-adm")
}

fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn mqadmin_commands_against_a_live_cluster() {
    let c = cluster();
    let n = c.namesrv.as_str();
    eventually("the broker registers", || admin(&["clusterList", "-n", n]).1.contains("broker-adm"));
    let list = ok(&["clusterList", "-n", n]);
    assert!(list.starts_with("#Cluster Name"), "{list}");
    assert!(list.lines().any(|l| l.contains("DefaultCluster") && l.contains("broker-adm") && l.contains(&c.broker) && l.contains("RingMQ")), "{list}");
    let doc: serde_json::Value = serde_json::from_str(&ok(&["clusterList", "-n", n, "--json"])).unwrap();
    assert_eq!(doc[0]["addr"], c.broker.as_str());

    // updateTopic on the cluster, then it is listed and routed.
    let out = ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "ADM_T", "-r", "4", "-w", "4"]);
    assert_eq!(out, format!("create topic to {} success.\n", c.broker));
    eventually("the topic reaches the NameServer", || admin(&["topicList", "-n", n]).1.lines().any(|l| l == "ADM_T"));
    let route: serde_json::Value = serde_json::from_str(&ok(&["topicRoute", "-n", n, "-t", "ADM_T"])).unwrap();
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 4, "{route}");
    assert_eq!(route["brokerDatas"][0]["brokerName"], "broker-adm");

    // sendMessage, then the message by its offset id.
    let sent: serde_json::Value = serde_json::from_str(&ok(&["sendMessage", "-n", n, "-t", "ADM_T", "-p", "hello admin", "-k", "key-1", "-c", "TagA", "--json"])).unwrap();
    assert_eq!(sent["sendStatus"], "SEND_OK");
    let id = sent["offsetMsgId"].as_str().expect("offset id").to_string();
    let msg = ok(&["queryMsgById", "-n", n, "-i", &id]);
    // check(field, value)
    let check = |field: &str, value: &str| assert!(msg.lines().any(|l| l.starts_with(field) && l.ends_with(&format!(": {value}"))), "{field}: {value} in:\n{msg}");
    check("Topic", "ADM_T");
    check("Tags", "TagA");
    check("Keys", "key-1");
    check("Message Body", "hello admin");
    check("OffsetID", &id);

    // queryMsgByOffset: the same message by queue and offset; printMsg: every message.
    let qid = sent["queueId"].as_i64().unwrap().to_string();
    let by_offset = ok(&["queryMsgByOffset", "-n", n, "-t", "ADM_T", "-b", "broker-adm", "-i", &qid, "-o", "0"]);
    assert!(by_offset.lines().any(|l| l.starts_with("OffsetID") && l.ends_with(&id)), "{by_offset}");
    let (code, _, err) = admin(&["queryMsgByOffset", "-n", n, "-t", "ADM_T", "-b", "broker-adm", "-i", &qid, "-o", "5"]);
    assert_eq!((code, err.contains("no message at")), (1, true), "{err}");
    ok(&["sendMessage", "-n", n, "-t", "ADM_T", "-p", "second"]);
    let all = ok(&["printMsg", "-n", n, "-t", "ADM_T"]);
    assert_eq!(all.lines().count(), 2, "{all}");
    assert!(all.lines().any(|l| l.starts_with(&format!("MSGID: {id} ")) && l.ends_with("BODY: hello admin")), "{all}");
    assert_eq!(ok(&["printMsg", "-n", n, "-t", "ADM_T", "--limit", "1"]).lines().count(), 1);

    // queryMsgByKey finds it through the index.
    let by_key = ok(&["queryMsgByKey", "-n", n, "-t", "ADM_T", "-k", "key-1"]);
    assert!(by_key.lines().nth(1).is_some_and(|l| l.starts_with(&id)), "{by_key}");

    // topicStatus: 4 queues, one message in all.
    let status: serde_json::Value = serde_json::from_str(&ok(&["topicStatus", "-n", n, "-t", "ADM_T", "--json"])).unwrap();
    let queues = status.as_array().expect("rows");
    assert_eq!(queues.len(), 4, "{status}");
    assert_eq!(queues.iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum::<i64>(), 2);

    // consumerProgress: a group that committed offset 0 on the message's queue is 1 behind.
    let qid = sent["queueId"].as_i64().unwrap();
    commit_offset(&c.broker, "ADM_CG", "ADM_T", qid, 0);
    let progress = ok(&["consumerProgress", "-n", n, "-g", "ADM_CG", "-t", "ADM_T"]);
    let row = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    let on_queue = progress.lines().map(row).find(|r| r.first().map(String::as_str) == Some("ADM_T") && r.get(2) == Some(&qid.to_string())).expect("the queue's row");
    assert_eq!(on_queue[4], "0", "{progress}");
    assert!(on_queue[5].parse::<i64>().unwrap() >= 1, "{progress}");
    // (the second message, on another queue the group never committed, counts too)
    assert!(progress.contains("Diff Total: 2"), "{progress}");
    // consumerConnection: nobody online is the broker's answer.
    let (code, _, err) = admin(&["consumerConnection", "-n", n, "-g", "ADM_CG"]);
    assert_eq!(code, 1);
    assert!(err.contains("not online"), "{err}");

    // brokerStatus as a table and JSON.
    assert!(ok(&["brokerStatus", "-n", n, "-b", &c.broker]).lines().any(|l| l.starts_with("brokerVersionDesc") && l.contains("RingMQ")));
    let status: serde_json::Value = serde_json::from_str(&ok(&["brokerStatus", "-n", n, "-b", &c.broker, "--json"])).unwrap();
    assert_eq!(status["shardCount"], "2");

    // getBrokerConfig: broker.conf keys; updateBrokerConfig: runtime keys applied, others
    // refused naming the key.
    let conf = ok(&["getBrokerConfig", "-n", n, "-b", &c.broker]);
    assert!(conf.lines().any(|l| l.starts_with("brokerName") && l.ends_with("=  broker-adm")), "{conf}");
    assert!(conf.lines().any(|l| l.starts_with("shardCount") && l.ends_with("=  2")), "{conf}");
    let (code, _, err) = admin(&["updateBrokerConfig", "-n", n, "-b", &c.broker, "-k", "listenPort", "-v", "10999"]);
    assert_eq!(code, 1);
    assert!(err.contains("RingMQ cannot change `listenPort` at runtime"), "{err}");
    // Retention changes at runtime (issue 25): taken, and read back.
    ok(&["updateBrokerConfig", "-n", n, "-b", &c.broker, "-k", "fileReservedTime", "-v", "48"]);
    let conf = ok(&["getBrokerConfig", "-n", n, "-b", &c.broker]);
    assert!(conf.lines().any(|l| l.starts_with("fileReservedTime") && l.ends_with("=  48")), "{conf}");
    let (code, _, err) = admin(&["updateBrokerConfig", "-n", n, "-b", &c.broker, "-k", "brokerPermission", "-v", "5"]);
    assert_eq!(code, 1);
    assert!(err.contains("brokerPermission=5"), "{err}");
    // Runtime keys: applied on every shard (any connection sees them), and a drained
    // broker's routes lose write permission at the NameServer.
    assert_eq!(ok(&["updateBrokerConfig", "-n", n, "-b", &c.broker, "-k", "transactionCheckMax", "-v", "7"]), format!("update broker config success, {}\n", c.broker));
    for _ in 0..4 {
        assert!(ok(&["getBrokerConfig", "-n", n, "-b", &c.broker]).lines().any(|l| l.starts_with("transactionCheckMax") && l.ends_with("=  7")));
    }
    ok(&["updateBrokerConfig", "-n", n, "-b", &c.broker, "-k", "brokerPermission", "-v", "4"]);
    let perm = || {
        let route: serde_json::Value = serde_json::from_str(&ok(&["topicRoute", "-n", n, "-t", "ADM_T"])).unwrap();
        route["queueDatas"][0]["perm"].as_i64()
    };
    eventually("the NameServer hands out read-only routes", || perm() == Some(4));
    ok(&["updateBrokerConfig", "-n", n, "-c", "DefaultCluster", "-k", "brokerPermission", "-v", "6"]);
    eventually("write permission is back", || perm() == Some(6));
    // The per-broker topic mqadmin clusterRT sends to.
    assert!(admin(&["topicList", "-n", n]).1.lines().any(|l| l == "broker-adm"), "the broker-named topic is routed");

    // updateSubGroup on one broker.
    assert_eq!(ok(&["updateSubGroup", "-n", n, "-b", &c.broker, "-g", "ADM_G"]), format!("create subscription group to {} success.\n", c.broker));

    assert_eq!(
        ok(&["deleteSubGroup", "-n", n, "-b", &c.broker, "-g", "ADM_G", "-r"]),
        format!("delete subscription group [ADM_G] from broker [{}] success.\n", c.broker)
    );

    // producerConnection: a group with no producer online is the broker's error (Java's).
    let (code, _, err) = admin(&["producerConnection", "-n", n, "-g", "nobody", "-t", "ADM_T"]);
    assert_eq!(code, 1);
    assert!(err.contains("the producer group[nobody] not exist"), "{err}");

    // wipeWritePerm / addWritePerm: the route's queue permission follows.
    let perm = || serde_json::from_str::<serde_json::Value>(&ok(&["topicRoute", "-n", n, "-t", "ADM_T"])).unwrap()["queueDatas"][0]["perm"].as_i64();
    assert_eq!(perm(), Some(6));
    let out = ok(&["wipeWritePerm", "-n", n, "-b", "broker-adm"]);
    assert!(out.starts_with(&format!("wipe write perm of broker[broker-adm] in name server[{n}] OK, ")), "{out}");
    assert_eq!(perm(), Some(4));
    ok(&["addWritePerm", "-n", n, "-b", "broker-adm"]);
    assert_eq!(perm(), Some(6));

    // deleteTopic: gone from the route.
    let out = ok(&["deleteTopic", "-n", n, "-t", "ADM_T", "-c", "DefaultCluster"]);
    assert!(out.contains("delete topic [ADM_T] from cluster [DefaultCluster] success."), "{out}");
    let (code, _, err) = admin(&["topicRoute", "-n", n, "-t", "ADM_T"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no route for ADM_T"), "{err}");

    // Failures: a broker's refusal, an unknown cluster, bad flags.
    let (code, _, err) = admin(&["updateTopic", "-n", n, "-b", &c.broker, "-t", "bad topic!"]);
    assert_eq!(code, 1);
    assert!(err.contains("answered request 17 with code"), "{err}");
    let (code, _, err) = admin(&["updateTopic", "-n", n, "-c", "NoSuchCluster", "-t", "T2"]);
    assert_eq!((code, err.contains("cluster NoSuchCluster is not known")), (1, true), "{err}");
    let (code, _, _) = admin(&["updateTopic", "-n", n]);
    assert_eq!(code, 2);
    let (code, _, err) = admin(&["queryMsgById", "-n", n, "-i", "not-an-id"]);
    assert_eq!((code, err.contains("not an offset message id")), (1, true), "{err}");
}

/// UPDATE_CONSUMER_OFFSET over a plain socket (the CLI has no command for it).
fn commit_offset(broker: &str, group: &str, topic: &str, queue: i64, offset: i64) {
    use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
    use ringmq_client::remoting::command::RemotingCommand;
    use std::io::{Read, Write};
    let cmd = RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue.to_string())
        .with_ext("commitOffset", offset.to_string())
        .with_opaque(7);
    let mut out = bytes::BytesMut::new();
    cmd.encode(&mut out).unwrap();
    let mut s = std::net::TcpStream::connect(broker).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&out).unwrap();
    let mut buf = bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    let r = loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &Default::default()).unwrap() {
            break r;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    };
    assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
}
