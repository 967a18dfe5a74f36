//! The plain ACL (`aclEnable=true`, issue 26 phase 1) against independent clients: the
//! crates.io `rocketmq-client-rust` with its `AclClientRPCHook` (Apache's signing) and
//! the RingMQ client's `ClientConfig::credentials`, on a broker whose `plain_acl.yml`
//! this file writes. Raw signed requests check the exact answers (NO_PERMISSION, 16,
//! with Apache's remarks).
//!
//! Invariants: no fixed ports (the `common_interop` cluster binds port 0); every wait is
//! bounded by `WAIT`; each test has its own cluster and ACL file.

mod common_interop;

use common_interop::{bounded, client_runtime, create_topic_cmd, on_glommio, raw_call, send_cmd, test_both_encodings, wait_until, BrokerPath, Cluster};
use ringmq_client::remoting::acl::{sign, Credentials};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use rocketmq_client_rust::{AclClientRPCHook, DefaultLitePullConsumer, DefaultMQProducer, SessionCredentials};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);

const ADMIN: (&str, &str) = ("adminAccount", "adminSecret1");
const RIGHT: (&str, &str) = ("rightAccount", "rightSecret1");
const SUB_ONLY: (&str, &str) = ("subAccount1", "subSecret12");

fn acl_yaml(extra: &str) -> String {
    format!(
        "globalWhiteRemoteAddresses: []\n\
         accounts:\n\
         \x20 - accessKey: {}\n    secretKey: {}\n    admin: true\n\
         \x20 - accessKey: {}\n    secretKey: {}\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - AclTopicJson=PUB|SUB\n      - AclTopicBin=PUB|SUB\n      - AclRingTopic=PUB|SUB\n\
         \x20 - accessKey: {}\n    secretKey: {}\n    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n{extra}",
        ADMIN.0, ADMIN.1, RIGHT.0, RIGHT.1, SUB_ONLY.0, SUB_ONLY.1
    )
}

/// A cluster with `aclEnable` on the broker and the NameServer, the ACL file at
/// `dir/plain_acl.yml`, and `/metrics` on loopback.
fn acl_cluster(dir: &Path) -> (Cluster, PathBuf) {
    let file = dir.join("plain_acl.yml");
    std::fs::write(&file, acl_yaml("")).expect("write plain_acl.yml");
    let (f, ns_file) = (file.clone(), file.clone());
    // The NameServer checks the same file: the broker's registrations carry its inner
    // (admin) account, the clients' route lookups their own.
    let ns_acl = move |ns: &mut namesrv::config::ServerConfig| {
        ns.acl_enable = true;
        ns.plain_acl_file = Some(ns_file);
    };
    let cluster = Cluster::start_with_namesrv(BrokerPath::Direct, ns_acl, move |c| {
        c.acl_enable = true;
        c.plain_acl_file = Some(f);
        c.inner_client_authentication_credentials = Some(format!(r#"{{"accessKey":"{}","secretKey":"{}"}}"#, ADMIN.0, ADMIN.1));
        c.metrics_exporter_type = ringmq_broker::config::MetricsExporter::Prom;
        c.metrics_prom_exporter_host = "127.0.0.1".into();
        c.metrics_prom_exporter_port = 0;
    });
    (cluster, file)
}

fn signed(mut cmd: RemotingCommand, (ak, sk): (&str, &str)) -> RemotingCommand {
    sign(&mut cmd, &Credentials::new(ak, sk));
    cmd
}

/// `(code, remark piece)` of a raw request's answer.
fn check(cluster: &Cluster, cmd: RemotingCommand, code: i32, remark: &str) {
    let what = format!("code {} ext {:?}", cmd.code, cmd.ext_fields);
    let r = raw_call(cluster.broker_addr(), cmd);
    assert_eq!(r.code, code, "{what}: remark {:?}", r.remark);
    assert!(r.remark.as_deref().unwrap_or("").contains(remark), "{what}: remark {:?} lacks {remark:?}", r.remark);
}

fn hook((ak, sk): (&str, &str)) -> Arc<AclClientRPCHook> {
    Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(ak, sk)))
}

async fn signed_producer(cluster: &Cluster, serialize_type: SerializeType, scope: &'static str, creds: (&str, &str), topic: &str) -> DefaultMQProducer {
    let mut producer = DefaultMQProducer::builder(client_runtime(scope, serialize_type))
        .producer_group(format!("PG-{scope}"))
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .retry_times_when_send_failed(0)
        .rpc_hook(hook(creds))
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    common_interop::await_route(&mut producer, topic).await;
    producer
}

/// A signed RocketMQ producer sends, a signed lite-pull consumer reads every message
/// back; the same producer with a wrong secret, or an account with only SUB, cannot send.
async fn rocketmq_client_with_acl(serialize_type: SerializeType) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let (cluster, _file) = acl_cluster(dir.path());
    let topic = format!("AclTopic{}", common_interop::label_of(serialize_type));
    check(&cluster, signed(create_topic_cmd(&topic), ADMIN), rs::SUCCESS, "");

    let producer = signed_producer(&cluster, serialize_type, "acl-producer", RIGHT, &topic).await;
    let mut sent = HashSet::new();
    for i in 0..8 {
        let body = format!("acl-{i}");
        let msg = Message::builder().topic(topic.as_str()).body_slice(body.as_bytes()).build().expect("message");
        bounded("signed send", producer.send(msg)).await.expect("a signed send with the right account succeeds");
        sent.insert(body);
    }

    let consumer = DefaultLitePullConsumer::builder(client_runtime("acl-lite-pull", serialize_type))
        .consumer_group(format!("CG-acl-{}", common_interop::label_of(serialize_type)))
        .name_server_addr(cluster.namesrv_addr())
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .auto_commit(false)
        .rpc_hook(hook(RIGHT))
        .build()
        .expect("lite pull consumer");
    consumer.set_sub_expression_for_assign(topic.as_str(), "*").await.expect("sub expression");
    bounded("lite pull start", consumer.start()).await.expect("lite pull starts");
    let queues = bounded("fetch queues", consumer.fetch_message_queues(topic.as_str())).await.expect("queues");
    consumer.assign(queues.clone()).await.expect("assign");
    for q in &queues {
        consumer.seek(q, 0).await.expect("seek to 0");
    }
    let mut got = HashSet::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < sent.len() {
        assert!(Instant::now() < deadline, "signed consumer read {} of {}", got.len(), sent.len());
        for m in consumer.poll_with_timeout(300).await {
            got.insert(String::from_utf8(m.get_body().map(|b| b.to_vec()).unwrap_or_default()).expect("utf-8"));
        }
    }
    assert_eq!(got, sent);
    consumer.shutdown().await;

    // A wrong secret: the send is refused (the client does not retry NO_PERMISSION).
    let wrong = signed_producer(&cluster, serialize_type, "acl-wrong-secret", (RIGHT.0, "not-the-secret"), &topic).await;
    let msg = Message::builder().topic(topic.as_str()).body_slice(b"refused").build().expect("message");
    // (The client redacts the broker's remark; the raw requests below check it.)
    bounded("wrong-secret send", wrong.send(msg)).await.expect_err("a wrong secret is refused");
    // Only SUB on every topic: the send is refused.
    let sub_only = signed_producer(&cluster, serialize_type, "acl-sub-only", SUB_ONLY, &topic).await;
    let msg = Message::builder().topic(topic.as_str()).body_slice(b"refused").build().expect("message");
    bounded("sub-only send", sub_only.send(msg)).await.expect_err("SUB only cannot send");
    let mut producer = producer;
    producer.shutdown().await;
}

test_both_encodings!(rocketmq_client_signs_and_is_checked_json, rocketmq_client_signs_and_is_checked_binary, rocketmq_client_with_acl);

/// Exact answers to raw requests: each refusal kind with Apache's remark, admin codes,
/// and the refusal counter in `/metrics`.
#[test]
fn refusals_answer_no_permission_with_apache_remarks() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, acl_yaml("")).expect("write plain_acl.yml");
    let f = file.clone();
    let cluster = Cluster::start(BrokerPath::Direct, move |c| {
        c.acl_enable = true;
        c.plain_acl_file = Some(f);
        c.metrics_exporter_type = ringmq_broker::config::MetricsExporter::Prom;
        c.metrics_prom_exporter_host = "127.0.0.1".into();
        c.metrics_prom_exporter_port = 0;
    });
    let topic = "AclRaw";
    check(&cluster, create_topic_cmd(topic), rs::NO_PERMISSION, "No accessKey is configured");
    check(&cluster, signed(create_topic_cmd(topic), ("nobody12", "whatever1")), rs::NO_PERMISSION, "No acl config for nobody12");
    check(&cluster, signed(create_topic_cmd(topic), (ADMIN.0, "wrong-secret")), rs::NO_PERMISSION, "Check signature failed for accessKey=adminAccount");
    check(&cluster, signed(create_topic_cmd(topic), RIGHT), rs::NO_PERMISSION, "Need admin permission for request code=17, but accessKey=rightAccount is not");
    check(&cluster, signed(create_topic_cmd(topic), ADMIN), rs::SUCCESS, "");
    check(&cluster, signed(send_cmd("PG-acl", topic, b"x"), SUB_ONLY), rs::NO_PERMISSION, "No default permission for topic:AclRaw (needs PUB");
    check(&cluster, signed(send_cmd("PG-acl", topic, b"x"), RIGHT), rs::NO_PERMISSION, "No default permission for topic:AclRaw (needs PUB, accessKey=rightAccount has DENY)");
    check(&cluster, signed(send_cmd("PG-acl", topic, b"x"), ADMIN), rs::SUCCESS, "");
    // A body changed after signing.
    let mut tampered = signed(send_cmd("PG-acl", topic, b"x"), ADMIN);
    tampered.body = bytes::Bytes::from_static(b"y");
    check(&cluster, tampered, rs::NO_PERMISSION, "Check signature failed");
    check(&cluster, signed(RemotingCommand::request(rq::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic), SUB_ONLY), rs::NO_PERMISSION, "Need admin permission for request code=215");
    check(&cluster, signed(RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO), SUB_ONLY), rs::SUCCESS, "");

    // 8 refusals above, counted per shard and summed here (shards publish every second).
    let refusals = || {
        let metrics = cluster_metrics(&cluster);
        let sum: f64 = metrics.lines().filter(|l| l.starts_with("ringmq_acl_refusals")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum();
        (sum, metrics.lines().filter(|l| l.contains("acl")).collect::<Vec<_>>().join("\n"))
    };
    let deadline = std::time::Instant::now() + WAIT;
    while refusals().0 < 8.0 {
        assert!(std::time::Instant::now() < deadline, "ringmq_acl_refusals never reached 8:\n{}", refusals().1);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(refusals().0, 8.0, "{}", refusals().1);
}

fn cluster_metrics(cluster: &Cluster) -> String {
    use std::io::{Read, Write};
    let addr = cluster.metrics_addr().expect("metrics endpoint");
    let mut s = std::net::TcpStream::connect(addr).expect("connect metrics");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("metrics answer");
    out
}

/// A changed `plain_acl.yml` is applied without a restart; a broken one keeps the rules.
#[test]
fn the_file_reloads_and_a_bad_one_keeps_the_rules() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let (cluster, file) = acl_cluster(dir.path());
    let late = ("lateAccount", "lateSecret1");
    let probe = || raw_call(cluster.broker_addr(), signed(RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO), late));
    assert_eq!(probe().code, rs::NO_PERMISSION);
    std::fs::write(&file, acl_yaml(&format!("\x20 - accessKey: {}\n    secretKey: {}\n", late.0, late.1))).expect("rewrite");
    // Each shard polls the file on its own timer: wait until every shard loaded it
    // (its second load), not until one probe happened to land on a shard that had.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    rt.block_on(wait_until("every shard loaded the new file", || per_shard(&cluster, "ringmq_acl_file_loads").iter().all(|&n| n >= 2.0)));
    for _ in 0..8 {
        assert_eq!(probe().code, rs::SUCCESS, "the new account is accepted on every shard");
    }
    // A broken file: every shard notices it does not load and keeps the rules in
    // force (the late account still works).
    std::fs::write(&file, "accounts: [\n  this is not yaml").expect("break");
    rt.block_on(wait_until("every shard tried the broken file", || per_shard(&cluster, "ringmq_acl_file_load_failures").iter().all(|&n| n >= 1.0)));
    for _ in 0..8 {
        assert_eq!(probe().code, rs::SUCCESS, "a broken file keeps the rules loaded before");
    }
    assert!(per_shard(&cluster, "ringmq_acl_file_loads").iter().all(|&n| n == 2.0), "the broken file was not installed");
}

/// One value per shard of the per-shard counter `name` (`<name>_total` in the
/// exposition; shards publish every second);
/// a shard that has not published yet reads 0.
fn per_shard(cluster: &Cluster, name: &str) -> Vec<f64> {
    let metrics = cluster_metrics(cluster);
    let mut values: Vec<f64> = metrics.lines().filter(|l| l.starts_with(&format!("{name}_total{{"))).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).collect();
    values.resize(values.len().max(cluster.shard_count()), 0.0);
    values
}

/// The RingMQ client signs with `ClientConfig::credentials`: sends succeed with the
/// right account and fail with a wrong secret.
#[test]
fn ringmq_client_signs_its_requests() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let (cluster, _file) = acl_cluster(dir.path());
    let topic = "AclRingTopic";
    check(&cluster, signed(create_topic_cmd(topic), ADMIN), rs::SUCCESS, "");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    let ns = cluster.namesrv_addr();
    rt.block_on(wait_until("route", || cluster.namesrv_routes(topic)));
    let outcome = |secret: &'static str| {
        let ns = ns.clone();
        on_glommio(move || async move {
            let mut c = ringmq_client::ClientConfig { namesrv_addrs: vec![ns], ..Default::default() };
            c.credentials = Some(Credentials::new(RIGHT.0, secret));
            let mut pc = ringmq_client::producer::ProducerConfig::new(c, "PG-ringmq-acl");
            pc.retry_times_when_send_failed = 0;
            let producer = ringmq_client::producer::Producer::start(pc).await.expect("RingMQ producer");
            let r = producer.send(ringmq_client::Message::new(topic, "signed by RingMQ")).await.map(|_| ()).map_err(|e| e.to_string());
            producer.shutdown().await;
            r
        })
    };
    outcome(RIGHT.1).expect("the RingMQ client's signed send succeeds");
    let err = outcome("not-the-secret").expect_err("a wrong secret is refused");
    assert!(err.contains("Check signature failed"), "{err}");
}

/// A consumer's heartbeat on a raw connection of its own (signed as `creds`).
fn consumer_heartbeat(client_id: &str, group: &str, creds: (&str, &str)) -> RemotingCommand {
    use ringmq_client::remoting::heartbeat::{ConsumerData, HeartbeatData};
    let data = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![ConsumerData {
            consume_from_where: Default::default(),
            consume_type: Default::default(),
            group_name: group.into(),
            message_model: Default::default(),
            subscription_data_set: Vec::new(),
            unit_mode: false,
        }],
        producer_data_set: Vec::new(),
    };
    let mut cmd = RemotingCommand::request(rq::HEART_BEAT);
    cmd.body = bytes::Bytes::from(data.encode());
    signed(cmd, creds)
}

/// The broker's own requests to a client (here NOTIFY_CONSUMER_IDS_CHANGED, when a
/// second consumer joins the group) carry `innerClientAuthenticationCredentials`'
/// AccessKey and a Signature that verifies with its secret, as its registrations do.
/// (The consumer's own heartbeat changes the group too, so the notification may come
/// first.)
#[test]
fn broker_to_client_requests_carry_the_inner_credentials() {
    use bytes::BytesMut;
    use ringmq_client::remoting::frame::FrameLimits;
    use std::io::{Read, Write};
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let (cluster, _file) = acl_cluster(dir.path());
    let group = "GroupSignedNotify";
    let mut first = std::net::TcpStream::connect(cluster.broker_addr()).expect("connect");
    first.set_read_timeout(Some(WAIT)).expect("read timeout");
    let write = |stream: &mut std::net::TcpStream, mut cmd: RemotingCommand, opaque: i32| {
        cmd.opaque = opaque;
        let mut out = BytesMut::new();
        cmd.encode(&mut out).expect("encode");
        stream.write_all(&out).expect("write");
    };
    write(&mut first, consumer_heartbeat("10.0.0.1@first", group, SUB_ONLY), 1);
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut next = |stream: &mut std::net::TcpStream, buf: &mut BytesMut| loop {
        if let Some(frame) = RemotingCommand::decode(buf, &FrameLimits::default()).expect("decode") {
            return frame;
        }
        let n = stream.read(&mut chunk).expect("a frame within WAIT");
        assert!(n > 0, "the broker closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    };
    // The group changed with this very heartbeat, so a notification may come before
    // or after its answer; if none came, the second consumer joining from its own
    // connection makes the broker tell the first one.
    let mut notified = None;
    loop {
        let frame = next(&mut first, &mut buf);
        if frame.is_response() {
            assert_eq!(frame.code, rs::SUCCESS, "first heartbeat: {:?}", frame.remark);
            break;
        }
        notified.get_or_insert(frame);
    }
    if notified.is_none() {
        let second = raw_call(cluster.broker_addr(), consumer_heartbeat("10.0.0.2@second", group, SUB_ONLY));
        assert_eq!(second.code, rs::SUCCESS, "second heartbeat: {:?}", second.remark);
    }
    let notify = notified.unwrap_or_else(|| next(&mut first, &mut buf));
    assert_eq!((notify.is_response(), notify.code), (false, rq::NOTIFY_CONSUMER_IDS_CHANGED), "{notify:?}");
    assert_eq!(notify.ext("consumerGroup"), Some(group));
    assert_eq!(notify.ext("AccessKey"), Some(ADMIN.0), "the broker signs as its inner account: {:?}", notify.ext_fields);
    assert!(ringmq_client::remoting::acl::signature_matches(&notify, ADMIN.1), "the signature verifies with the inner secret: {:?}", notify.ext_fields);
    assert!(!ringmq_client::remoting::acl::signature_matches(&notify, RIGHT.1), "and with no other secret");
}

/// The NameServer checks the same `plain_acl.yml` on what changes routes: registering
/// (or unregistering) a broker, KV changes and write-permission changes need an admin
/// account's signature, and each refusal is NO_PERMISSION with the reason. Reads stay
/// open (as Apache's). The real broker's registrations (signed with its inner admin
/// account) are what made the topic routable at all.
#[test]
fn the_namesrv_refuses_unsigned_and_non_admin_requests() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let (cluster, _file) = acl_cluster(dir.path());
    let topic = "AclTopicJson";
    check(&cluster, signed(create_topic_cmd(topic), ADMIN), rs::SUCCESS, "");
    let route = |who: Option<(&str, &str)>, topic: &str| {
        let cmd = RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic);
        cluster.namesrv_call(match who {
            Some(c) => signed(cmd, c),
            None => cmd,
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    rt.block_on(wait_until("the broker's signed registration routes the topic", || route(Some(ADMIN), topic).code == rs::SUCCESS));
    let expect = |r: RemotingCommand, code: i32, remark: &str| {
        assert_eq!(r.code, code, "remark {:?}", r.remark);
        assert!(r.remark.as_deref().unwrap_or("").contains(remark), "remark {:?} lacks {remark:?}", r.remark);
    };
    // Reads: open, signed or not.
    expect(route(None, topic), rs::SUCCESS, "");
    expect(route(Some(SUB_ONLY), topic), rs::SUCCESS, "");
    // A forged broker: a non-admin account cannot register or unregister one.
    let register = RemotingCommand::request(rq::REGISTER_BROKER)
        .with_ext("brokerName", "forged-broker")
        .with_ext("brokerAddr", "10.6.6.6:10911")
        .with_ext("clusterName", "DefaultCluster")
        .with_ext("haServerAddr", "10.6.6.6:10912")
        .with_ext("brokerId", "0");
    expect(cluster.namesrv_call(signed(register.clone(), RIGHT)), rs::NO_PERMISSION, "Need admin permission for request code=103, but accessKey=rightAccount is not");
    expect(cluster.namesrv_call(signed(register.clone(), (ADMIN.0, "not-the-secret"))), rs::NO_PERMISSION, "Check signature failed for accessKey=adminAccount");
    expect(cluster.namesrv_call(register), rs::NO_PERMISSION, "No accessKey is configured");
    let unregister = RemotingCommand::request(rq::UNREGISTER_BROKER)
        .with_ext("brokerName", "broker-a")
        .with_ext("brokerAddr", cluster.broker_addr().to_string())
        .with_ext("clusterName", "DefaultCluster")
        .with_ext("brokerId", "0");
    expect(cluster.namesrv_call(signed(unregister, SUB_ONLY)), rs::NO_PERMISSION, "Need admin permission for request code=104");
    let wipe = RemotingCommand::request(rq::WIPE_WRITE_PERM_OF_BROKER).with_ext("brokerName", "broker-a");
    expect(cluster.namesrv_call(signed(wipe, RIGHT)), rs::NO_PERMISSION, "Need admin permission for request code=205");
    let kv = || RemotingCommand::request(rq::PUT_KV_CONFIG).with_ext("namespace", "ORDER_TOPIC_CONFIG").with_ext("key", "AclTopicJson").with_ext("value", "broker-a:4");
    expect(cluster.namesrv_call(signed(kv(), RIGHT)), rs::NO_PERMISSION, "Need admin permission for request code=100");
    expect(cluster.namesrv_call(signed(kv(), ADMIN)), rs::SUCCESS, "");
    // The refused registration added nothing, the refused unregistration removed nothing.
    let info = cluster.namesrv_call(RemotingCommand::request(rq::GET_BROKER_CLUSTER_INFO));
    assert_eq!(info.code, rs::SUCCESS);
    let body = String::from_utf8_lossy(&info.body);
    assert!(!body.contains("forged-broker") && body.contains("broker-a"), "{body}");
    expect(route(None, topic), rs::SUCCESS, "");
}
