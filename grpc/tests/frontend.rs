//! The front end against a canned backend: each mapping row's request → the exact
//! `RemotingCommand` the backend receives, its answer → the exact proto; and one tonic
//! client driving Telemetry, Heartbeat and NotifyClientTermination over a real socket.

use ringmq_client::message::properties::Properties;
use ringmq_client::msgid::offset_msg_id;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::heartbeat::HeartbeatData;
use ringmq_client::remoting::route::{BrokerData, QueueData, TopicRouteData};
use ringmq_client::remoting::RemotingCommand;
use ringmq_grpc::backend::{CannedBackend, Target};
use ringmq_grpc::metadata::ClientMeta;
use ringmq_grpc::pb::{self, Code};
use ringmq_grpc::server::{Frontend, FrontendConfig};
use ringmq_grpc::Clock;
use std::collections::BTreeMap;
use std::sync::Arc;

const NOW_MS: i64 = 1_700_000_000_000;
const BROKER: &str = "b-s0";
const HALF_PHYS: u64 = 4242;

struct FixedClock;
impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        NOW_MS
    }
}

fn route(perm: i32) -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![BrokerData { broker_addrs: BTreeMap::from([(0, "127.0.0.1:10911".to_string())]), broker_name: BROKER.into(), cluster: "c".into(), ..Default::default() }],
        queue_datas: vec![QueueData { broker_name: BROKER.into(), perm, read_queue_nums: 4, write_queue_nums: 4, topic_sys_flag: 0 }],
        ..Default::default()
    }
}

fn answer(target: &Target, cmd: &RemotingCommand) -> RemotingCommand {
    let ok = || cmd.create_response(rs::SUCCESS, None);
    let topic = cmd.ext("topic").unwrap_or("");
    match cmd.code {
        rq::GET_ROUTEINFO_BY_TOPIC => match topic {
            "T" | "F" => ok().with_body(route(6).encode_standard()),
            "RO" => ok().with_body(route(4).encode_standard()),
            _ => cmd.create_response(rs::TOPIC_NOT_EXIST, Some(&format!("No topic route info in name server for the topic: {topic}"))),
        },
        rq::GET_TOPIC_CONFIG if topic == "F" => ok().with_body(r#"{"topicName":"F","attributes":{"message.type":"FIFO"}}"#),
        rq::GET_TOPIC_CONFIG => ok().with_body(r#"{"topicName":"T","attributes":{}}"#),
        rq::GET_SUBSCRIPTIONGROUP_CONFIG if cmd.ext("group") == Some("G") => ok().with_body(r#"{"groupName":"G","consumeMessageOrderly":true,"retryMaxTimes":3}"#),
        rq::GET_SUBSCRIPTIONGROUP_CONFIG => cmd.create_response(rs::SUBSCRIPTION_GROUP_NOT_EXIST, Some("No group in this broker")),
        rq::SEND_MESSAGE_V2 => {
            assert_eq!(target, &Target::Broker(BROKER.into()));
            let id = offset_msg_id(&"127.0.0.1:10911".parse().unwrap(), HALF_PHYS);
            let mut r = ok().with_ext("msgId", id).with_ext("queueId", cmd.ext("e").unwrap()).with_ext("queueOffset", "7");
            if cmd.ext("b") == Some("FLUSH") {
                r.code = rs::FLUSH_DISK_TIMEOUT;
            }
            r
        }
        _ => ok(),
    }
}

fn frontend() -> (Arc<Frontend>, CannedBackend) {
    let backend = CannedBackend::new(|t, c| Ok(answer(t, c)));
    (Arc::new(Frontend::new(Arc::new(backend.clone()), Arc::new(FixedClock), FrontendConfig::default())), backend)
}

fn meta() -> ClientMeta {
    ClientMeta { client_id: "c1".into(), language: "PYTHON", peer: "10.0.0.1:5555".into(), ..Default::default() }
}

fn res(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource { resource_namespace: String::new(), name: name.into() })
}

fn endpoints() -> Option<pb::Endpoints> {
    Some(pb::Endpoints { scheme: pb::AddressScheme::IPv4 as i32, addresses: vec![pb::Address { host: "127.0.0.1".into(), port: 8081 }] })
}

fn code(s: &Option<pb::Status>) -> Code {
    Code::try_from(s.as_ref().unwrap().code).unwrap()
}

fn last(backend: &CannedBackend, request_code: i32) -> (Target, RemotingCommand) {
    backend.requests().into_iter().rev().find(|(_, c)| c.code == request_code).expect("request sent")
}

fn props(cmd: &RemotingCommand) -> Properties {
    Properties::decode_str(cmd.ext("i").unwrap())
}

#[tokio::test]
async fn query_route_rows() {
    let (fe, backend) = frontend();
    let r = ringmq_grpc::route::query_route(&fe, &meta(), pb::QueryRouteRequest { topic: res("T"), endpoints: endpoints() }).await.unwrap();
    assert_eq!(code(&r.status), Code::Ok);
    assert_eq!(r.message_queues.len(), 4);
    for (i, q) in r.message_queues.iter().enumerate() {
        assert_eq!(q.id, i as i32);
        assert_eq!(q.permission, pb::Permission::ReadWrite as i32);
        let b = q.broker.as_ref().unwrap();
        assert_eq!((b.name.as_str(), b.id, &b.endpoints), (BROKER, 0, &endpoints()));
        assert_eq!(q.accept_message_types, vec![1, 2, 3, 4], "no message.type: every type");
    }
    let (target, cmd) = last(&backend, rq::GET_ROUTEINFO_BY_TOPIC);
    assert_eq!((target, cmd.ext("topic")), (Target::Metadata, Some("T")));

    let r = ringmq_grpc::route::query_route(&fe, &meta(), pb::QueryRouteRequest { topic: res("F"), endpoints: endpoints() }).await.unwrap();
    assert_eq!(r.message_queues[0].accept_message_types, vec![pb::MessageType::Fifo as i32]);
    let r = ringmq_grpc::route::query_route(&fe, &meta(), pb::QueryRouteRequest { topic: res("RO"), endpoints: endpoints() }).await.unwrap();
    assert!(r.message_queues.iter().all(|q| q.permission == pb::Permission::Read as i32));

    let e = ringmq_grpc::route::query_route(&fe, &meta(), pb::QueryRouteRequest { topic: res("nope"), endpoints: None }).await.unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (Code::TopicNotFound, "No topic route info in name server for the topic: nope"));
    let e = ringmq_grpc::route::query_route(&fe, &meta(), pb::QueryRouteRequest { topic: res("RMQ_SYS_TRANS_HALF_TOPIC"), endpoints: None }).await.unwrap_err();
    assert_eq!(e.code, Code::IllegalTopic);
}

#[tokio::test]
async fn query_assignment_rows() {
    let (fe, _) = frontend();
    let q = |group: &str| pb::QueryAssignmentRequest { topic: res("T"), group: res(group), endpoints: endpoints() };
    let r = ringmq_grpc::route::query_assignment(&fe, &meta(), q("G")).await.unwrap();
    let ids: Vec<i32> = r.assignments.iter().map(|a| a.message_queue.as_ref().unwrap().id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3], "orderly group: one assignment per queue");
    let r = ringmq_grpc::route::query_assignment(&fe, &meta(), q("other")).await.unwrap();
    let ids: Vec<i32> = r.assignments.iter().map(|a| a.message_queue.as_ref().unwrap().id).collect();
    assert_eq!(ids, vec![-1], "one per broker, queue -1");
    let e = ringmq_grpc::route::query_assignment(&fe, &meta(), q("")).await.unwrap_err();
    assert_eq!(e.code, Code::IllegalConsumerGroup);
}

fn message(topic: &str, f: impl FnOnce(&mut pb::SystemProperties)) -> pb::Message {
    let mut sys = pb::SystemProperties { message_id: "01ABCDEF".into(), tag: Some("TagA".into()), keys: vec!["k1".into(), "k2".into()], message_type: pb::MessageType::Normal as i32, ..Default::default() };
    f(&mut sys);
    pb::Message { topic: res(topic), user_properties: [("u".to_string(), "v".to_string())].into(), system_properties: Some(sys), body: b"hello".to_vec() }
}

async fn send(fe: &Frontend, msgs: Vec<pb::Message>) -> Result<pb::SendMessageResponse, ringmq_grpc::status::GrpcError> {
    ringmq_grpc::send::send_message(fe, &meta(), pb::SendMessageRequest { messages: msgs }).await
}

#[tokio::test]
async fn send_normal_row() {
    let (fe, backend) = frontend();
    let r = send(&fe, vec![message("T", |_| {})]).await.unwrap();
    assert_eq!(code(&r.status), Code::Ok);
    let e = &r.entries[0];
    assert_eq!((code(&e.status), e.message_id.as_str(), e.offset), (Code::Ok, "01ABCDEF", 7));
    let (target, cmd) = last(&backend, rq::SEND_MESSAGE_V2);
    assert_eq!(target, Target::Broker(BROKER.into()));
    let ext = |k| cmd.ext(k).map(str::to_string);
    assert_eq!((ext("a"), ext("b"), ext("c"), ext("d"), ext("f"), ext("g"), ext("j"), ext("n")), (
        Some("T".into()), Some("T".into()), Some("TBW102".into()), Some("4".into()), Some("0".into()), Some(NOW_MS.to_string()), Some("0".into()), Some(BROKER.into())
    ));
    assert_eq!(&cmd.body[..], b"hello");
    let p = props(&cmd);
    let expected = [("u", "v"), ("TAGS", "TagA"), ("KEYS", "k1 k2"), ("UNIQ_KEY", "01ABCDEF"), ("RECONSUME_TIME", "0"), ("PGROUP", "T"), ("__BORNHOST", "10.0.0.1:5555")];
    assert_eq!(p.iter().collect::<Vec<_>>(), expected.to_vec());
    // Round robin over the 4 writable queues.
    let mut queues = Vec::new();
    for _ in 0..4 {
        send(&fe, vec![message("T", |_| {})]).await.unwrap();
        queues.push(last(&backend, rq::SEND_MESSAGE_V2).1.ext("e").unwrap().to_string());
    }
    queues.sort();
    assert_eq!(queues, ["0", "1", "2", "3"]);
}

#[tokio::test]
async fn send_fifo_delay_and_refusals() {
    let (fe, backend) = frontend();
    let r = send(&fe, vec![message("F", |s| s.message_group = Some("order-1".into()))]).await.unwrap();
    assert_eq!(code(&r.status), Code::Ok);
    let cmd = last(&backend, rq::SEND_MESSAGE_V2).1;
    assert_eq!(cmd.ext("e").unwrap(), ringmq_grpc::send::message_group_queue("order-1", 4).to_string());
    assert_eq!(props(&cmd).get("__SHARDINGKEY"), Some("order-1"));

    let at = NOW_MS + 10_000;
    let ts = |ms: i64| Some(prost_types::Timestamp { seconds: ms / 1000, nanos: 0 });
    send(&fe, vec![message("T", |s| s.delivery_timestamp = ts(at))]).await.unwrap();
    assert_eq!(props(&last(&backend, rq::SEND_MESSAGE_V2).1).get("TIMER_DELIVER_MS"), Some(at.to_string().as_str()));

    let sent_before = backend.requests().iter().filter(|(_, c)| c.code == rq::SEND_MESSAGE_V2).count();
    let cases: Vec<(pb::Message, Code)> = vec![
        (message("T", |s| s.delivery_timestamp = ts(NOW_MS + 86_400_000 + 1_000)), Code::IllegalDeliveryTime),
        (message("F", |_| {}), Code::MessagePropertyConflictWithType),
        (message("T", |s| s.message_id = String::new()), Code::IllegalMessageId),
        (message("T", |s| s.tag = Some("a|b".into())), Code::IllegalMessageTag),
        (message("T", |s| s.message_group = Some("g".repeat(64))), Code::IllegalMessageGroup),
        (pb::Message { body: Vec::new(), ..message("T", |_| {}) }, Code::MessageBodyEmpty),
        (pb::Message { user_properties: [("UNIQ_KEY".to_string(), "x".to_string())].into(), ..message("T", |_| {}) }, Code::IllegalMessagePropertyKey),
        (message("nope", |_| {}), Code::TopicNotFound),
    ];
    for (m, expected) in cases {
        assert_eq!(send(&fe, vec![m.clone()]).await.unwrap_err().code, expected, "{m:?}");
    }
    assert_eq!(send(&fe, vec![message("T", |_| {}), message("F", |_| {})]).await.unwrap_err().code, Code::MessageCorrupted);
    assert_eq!(send(&fe, vec![]).await.unwrap_err().code, Code::MessageCorrupted);
    let sent_after = backend.requests().iter().filter(|(_, c)| c.code == rq::SEND_MESSAGE_V2).count();
    assert_eq!(sent_before, sent_after, "a refused message is never sent");

    let r = send(&fe, vec![message("FLUSH", |_| {})]).await;
    assert_eq!(r.unwrap_err().code, Code::TopicNotFound, "FLUSH has no route in the canned backend");
}

#[tokio::test]
async fn transactional_half_then_end() {
    let (fe, backend) = frontend();
    let r = send(&fe, vec![message("T", |s| {
        s.message_type = pb::MessageType::Transaction as i32;
        s.orphaned_transaction_recovery_duration = Some(prost_types::Duration { seconds: 30, nanos: 0 });
    })])
    .await
    .unwrap();
    let entry = &r.entries[0];
    let cmd = last(&backend, rq::SEND_MESSAGE_V2).1;
    assert_eq!(cmd.ext("f"), Some("4"), "TRANSACTION_PREPARED_TYPE");
    let p = props(&cmd);
    assert_eq!((p.get("TRAN_MSG"), p.get("CHECK_IMMUNITY_TIME_IN_SECONDS")), (Some("true"), Some("30")));
    assert_eq!(entry.transaction_id, offset_msg_id(&"127.0.0.1:10911".parse().unwrap(), HALF_PHYS));

    let end = |id: &str, resolution: pb::TransactionResolution| pb::EndTransactionRequest {
        topic: res("T"),
        message_id: "01ABCDEF".into(),
        transaction_id: id.into(),
        resolution: resolution as i32,
        source: pb::TransactionSource::SourceClient as i32,
        trace_context: String::new(),
    };
    let e = ringmq_grpc::txn::end_transaction(&fe, &meta(), end("unknown", pb::TransactionResolution::Commit)).await.unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (Code::InvalidTransactionId, "cannot found transaction data"));
    let r = ringmq_grpc::txn::end_transaction(&fe, &meta(), end(&entry.transaction_id, pb::TransactionResolution::Commit)).await.unwrap();
    assert_eq!(code(&r.status), Code::Ok);
    let (target, cmd) = last(&backend, rq::END_TRANSACTION);
    assert_eq!(target, Target::Broker(BROKER.into()));
    let ext = |k| cmd.ext(k).unwrap_or("").to_string();
    assert_eq!(
        [ext("producerGroup"), ext("tranStateTableOffset"), ext("commitLogOffset"), ext("commitOrRollback"), ext("fromTransactionCheck"), ext("msgId")],
        ["T", "7", &HALF_PHYS.to_string(), "8", "false", "01ABCDEF"].map(String::from)
    );
    let e = ringmq_grpc::txn::end_transaction(&fe, &meta(), end(&entry.transaction_id, pb::TransactionResolution::Rollback)).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidTransactionId, "ended once");
}

mod telemetry {
    use super::*;
    use pb::messaging_service_client::MessagingServiceClient;
    use tokio_stream::StreamExt;

    fn request<T>(body: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(body);
        r.metadata_mut().insert("x-mq-client-id", "client-1".parse().unwrap());
        r.metadata_mut().insert("x-mq-language", "RUST".parse().unwrap());
        r
    }

    #[tokio::test]
    async fn settings_heartbeat_termination_over_tonic() {
        let (fe, backend) = frontend();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(ringmq_grpc::server::serve(listener, fe, async move {
            let _ = stop_rx.await;
        }));
        let mut client = MessagingServiceClient::connect(format!("http://{addr}")).await.unwrap();

        // Heartbeat before any settings: unknown client.
        let r = client.heartbeat(request(pb::HeartbeatRequest { group: None, client_type: pb::ClientType::Producer as i32 })).await.unwrap().into_inner();
        assert_eq!(code(&r.status), Code::UnrecognizedClientType);

        let settings = pb::Settings {
            client_type: Some(pb::ClientType::Producer as i32),
            access_point: endpoints(),
            pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing { topics: vec![res("T").unwrap()], max_body_size: 0, validate_message_type: false })),
            ..Default::default()
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tx.send(pb::TelemetryCommand { status: None, command: Some(pb::telemetry_command::Command::Settings(settings)) }).await.unwrap();
        let mut answers = client.telemetry(request(tokio_stream::wrappers::ReceiverStream::new(rx))).await.unwrap().into_inner();
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), answers.next()).await.expect("settings answered").unwrap().unwrap();
        assert_eq!(code(&first.status), Code::Ok);
        let Some(pb::telemetry_command::Command::Settings(s)) = first.command else { panic!("not settings: {first:?}") };
        let backoff = s.backoff_policy.unwrap();
        assert_eq!(backoff.max_attempts, 3);
        let Some(pb::settings::PubSub::Publishing(p)) = s.pub_sub else { panic!("no publishing") };
        assert_eq!((p.max_body_size, p.validate_message_type), (4 * 1024 * 1024, true));
        assert_eq!(s.metric.map(|m| m.on), Some(false));

        let (target, hb) = last(&backend, rq::HEART_BEAT);
        assert_eq!(target, Target::EveryBroker);
        let data = HeartbeatData::decode(&hb.body).unwrap();
        assert_eq!((data.client_id.as_str(), data.producer_data_set.len(), data.producer_data_set[0].group_name.as_str()), ("client-1", 1, "T"));
        assert_eq!(hb.language, "RUST");

        let r = client.heartbeat(request(pb::HeartbeatRequest { group: None, client_type: pb::ClientType::Producer as i32 })).await.unwrap().into_inner();
        assert_eq!(code(&r.status), Code::Ok);
        let r = client.notify_client_termination(request(pb::NotifyClientTerminationRequest { group: None })).await.unwrap().into_inner();
        assert_eq!(code(&r.status), Code::Ok);
        let (_, un) = last(&backend, rq::UNREGISTER_CLIENT);
        assert_eq!((un.ext("clientID"), un.ext("producerGroup")), (Some("client-1"), Some("T")));
        let r = client.heartbeat(request(pb::HeartbeatRequest { group: None, client_type: pb::ClientType::Producer as i32 })).await.unwrap().into_inner();
        assert_eq!(code(&r.status), Code::UnrecognizedClientType, "terminated clients are forgotten");

        // No client id: CLIENT_ID_REQUIRED in the response status.
        let r = client.query_route(tonic::Request::new(pb::QueryRouteRequest { topic: res("T"), endpoints: None })).await.unwrap().into_inner();
        assert_eq!(code(&r.status), Code::ClientIdRequired);

        drop(tx);
        let _ = stop_tx.send(());
        tokio::time::timeout(std::time::Duration::from_secs(10), server).await.expect("server stops").unwrap().unwrap();
    }

    #[tokio::test]
    async fn consumer_settings_merge_the_group() {
        let (fe, backend) = frontend();
        let s = pb::Settings {
            client_type: Some(pb::ClientType::SimpleConsumer as i32),
            pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
                group: res("G"),
                subscriptions: vec![pb::SubscriptionEntry { topic: res("T"), expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "a||b".into() }) }],
                ..Default::default()
            })),
            ..Default::default()
        };
        let answer = fe.on_settings(&meta(), s, None).await.unwrap();
        let Some(pb::telemetry_command::Command::Settings(merged)) = answer.command else { panic!() };
        let Some(pb::settings::PubSub::Subscription(sub)) = &merged.pub_sub else { panic!() };
        assert_eq!((sub.fifo, sub.receive_batch_size), (Some(true), Some(32)));
        assert_eq!(sub.long_polling_timeout.as_ref().map(|d| d.seconds), Some(20));
        let backoff = merged.backoff_policy.unwrap();
        assert_eq!(backoff.max_attempts, 4, "retryMaxTimes 3 + 1");
        let Some(pb::retry_policy::Strategy::CustomizedBackoff(c)) = backoff.strategy else { panic!() };
        assert_eq!(c.next.len(), 18);
        let (_, hb) = last(&backend, rq::HEART_BEAT);
        let data = HeartbeatData::decode(&hb.body).unwrap();
        let c = &data.consumer_data_set[0];
        assert_eq!((c.group_name.as_str(), c.subscription_data_set[0].topic.as_str(), c.subscription_data_set[0].tags_set.clone()), ("G", "T", vec!["a".to_string(), "b".to_string()]));
        assert_eq!(format!("{:?}", c.consume_type), "ConsumeActively");
    }

    #[tokio::test]
    async fn settings_without_pub_sub_fail_the_stream() {
        let (fe, _) = frontend();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(ringmq_grpc::server::serve(listener, fe, std::future::pending()));
        let mut client = MessagingServiceClient::connect(format!("http://{addr}")).await.unwrap();
        let bad = pb::TelemetryCommand { status: None, command: Some(pb::telemetry_command::Command::Settings(pb::Settings::default())) };
        let mut answers = client.telemetry(request(tokio_stream::iter(vec![bad]))).await.unwrap().into_inner();
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), answers.next()).await.expect("answered").unwrap().unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("there is no publishing or subscription data in settings"), "{}", e.message());
        // Without a client id the stream is refused at once.
        let e = client.telemetry(tonic::Request::new(tokio_stream::iter(Vec::<pb::TelemetryCommand>::new()))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_wait_for_a_free_one() {
        let (fe, _) = frontend();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(ringmq_grpc::server::serve_with_limit(listener, fe, 1, std::future::pending()));
        let route = || request(pb::QueryRouteRequest { topic: res("T"), endpoints: None });
        let mut first = MessagingServiceClient::connect(format!("http://{addr}")).await.unwrap();
        assert_eq!(code(&first.query_route(route()).await.unwrap().into_inner().status), Code::Ok);
        let mut second = MessagingServiceClient::connect(format!("http://{addr}")).await.unwrap();
        let mut waiting = tokio::spawn(async move { second.query_route(route()).await.map(|r| r.into_inner()) });
        // Not served while the first connection is open...
        tokio::time::timeout(std::time::Duration::from_millis(300), &mut waiting).await.expect_err("the second connection must wait");
        // ...and served once it closes.
        drop(first);
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await.expect("served after the first closed").unwrap().unwrap();
        assert_eq!(code(&r.status), Code::Ok);
    }

    #[tokio::test]
    async fn consumer_heartbeat_and_termination_name_the_group() {
        let (fe, backend) = frontend();
        let s = pb::Settings {
            client_type: Some(pb::ClientType::PushConsumer as i32),
            pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription { group: res("G"), subscriptions: vec![pb::SubscriptionEntry { topic: res("T"), expression: None }], ..Default::default() })),
            ..Default::default()
        };
        fe.on_settings(&meta(), s, None).await.unwrap();
        let r = fe.heartbeat(&meta(), pb::HeartbeatRequest { group: res("G"), client_type: pb::ClientType::PushConsumer as i32 }).await.unwrap();
        assert_eq!(code(&r.status), Code::Ok);
        let data = HeartbeatData::decode(&last(&backend, rq::HEART_BEAT).1.body).unwrap();
        assert_eq!((data.consumer_data_set[0].group_name.as_str(), format!("{:?}", data.consumer_data_set[0].consume_type)), ("G", "ConsumePassively".to_string()));
        assert_eq!(fe.heartbeat(&meta(), pb::HeartbeatRequest { group: res(""), client_type: 0 }).await.unwrap_err().code, Code::IllegalConsumerGroup);
        fe.notify_client_termination(&meta(), pb::NotifyClientTerminationRequest { group: res("G") }).await.unwrap();
        let un = last(&backend, rq::UNREGISTER_CLIENT).1;
        assert_eq!((un.ext("consumerGroup"), un.ext("producerGroup")), (Some("G"), None));
    }
}
