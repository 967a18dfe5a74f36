//! RocketMQ 5's authentication and authorization (`authenticationEnabled`,
//! `authorizationEnabled`, issue 26) against the crates.io `rocketmq-client-rust`: its
//! admin API (`DefaultMQAdminExt`, the AUTH_* codes, signed by the Super user
//! `initAuthenticationUser` made) creates a user and an ACL; its producer and lite-pull
//! consumer sign with `AclClientRPCHook` as that user. Raw signed requests check the
//! exact answers (NO_PERMISSION, 16, with Apache's remarks), since the client redacts
//! remarks in its errors.
//!
//! Invariants: no fixed ports (the `common_interop` cluster binds port 0); every wait is
//! bounded by `WAIT`; each scenario has its own cluster.

mod common_interop;

use cheetah_string::CheetahString;
use common_interop::{bounded, client_runtime, create_topic_cmd, raw_call, send_cmd, test_both_encodings, Cluster};
use ringmq_client::remoting::acl::{sign, Credentials};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use rocketmq_client_rust::{AclClientRPCHook, AuthAdmin, DefaultLitePullConsumer, DefaultMQAdminExt, DefaultMQProducer, SessionCredentials};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(20);
const ROOT: (&str, &str) = ("rocketmq", "root-password1");
const ALICE: (&str, &str) = ("alice", "alice-password1");
const ALLOWED: &str = "AuthAllowed";
const DENIED: &str = "AuthDenied";
const GROUP_ALLOWED: &str = "CG-auth-allowed";
const GROUP_DENIED: &str = "CG-auth-denied";

/// A cluster with both switches on and the first Super user from `initAuthenticationUser`.
fn auth_cluster() -> Cluster {
    Cluster::start(common_interop::BrokerPath::Direct, |c| {
        c.authentication_enabled = true;
        c.authorization_enabled = true;
        c.init_authentication_user = Some(format!(r#"{{"username":"{}","password":"{}"}}"#, ROOT.0, ROOT.1));
        // The broker signs its own registrations (RingMQ's NameServer does not check).
        c.inner_client_authentication_credentials = Some(format!(r#"{{"accessKey":"{}","secretKey":"{}"}}"#, ROOT.0, ROOT.1));
    })
}

fn signed(mut cmd: RemotingCommand, (user, password): (&str, &str)) -> RemotingCommand {
    sign(&mut cmd, &Credentials::new(user, password));
    cmd
}

fn hook((user, password): (&str, &str)) -> Arc<AclClientRPCHook> {
    Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(user, password)))
}

fn pull_cmd(topic: &str, group: &str) -> RemotingCommand {
    RemotingCommand::request(rq::PULL_MESSAGE)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", "0")
        .with_ext("queueOffset", "0")
        .with_ext("maxMsgNums", "1")
        .with_ext("sysFlag", "0")
        .with_ext("commitOffset", "0")
        .with_ext("suspendTimeoutMillis", "0")
        .with_ext("subVersion", "0")
}

/// The answer to a raw request: its code and a piece of its remark.
fn check(cluster: &Cluster, cmd: RemotingCommand, code: i32, remark: &str) {
    let what = format!("code {} as {:?}", cmd.code, cmd.ext("AccessKey"));
    let r = raw_call(cluster.broker_addr(), cmd);
    assert_eq!(r.code, code, "{what}: remark {:?}", r.remark);
    assert!(r.remark.as_deref().unwrap_or("").contains(remark), "{what}: remark {:?} lacks {remark:?}", r.remark);
}

async fn producer_as(cluster: &Cluster, serialize_type: SerializeType, scope: &'static str, who: (&str, &str), topic: &str) -> DefaultMQProducer {
    let mut producer = DefaultMQProducer::builder(client_runtime(scope, serialize_type))
        .producer_group(format!("PG-{scope}"))
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .retry_times_when_send_failed(0)
        .rpc_hook(hook(who))
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    common_interop::await_route(&mut producer, topic).await;
    producer
}

async fn admin_as(cluster: &Cluster, serialize_type: SerializeType, who: (&str, &str)) -> DefaultMQAdminExt {
    let mut admin = DefaultMQAdminExt::with_rpc_hook(client_runtime("auth-admin", serialize_type), hook(who));
    admin.set_namesrv_addr(cluster.namesrv_addr());
    bounded("admin start", admin.start()).await.expect("admin starts");
    admin
}

fn s(v: &str) -> CheetahString {
    CheetahString::from(v.to_string())
}

/// The admin API creates alice and her ACL; alice's producer sends to the allowed topic
/// and is refused on the denied one; her consumer reads with the allowed group; the
/// denied group, a wrong password and a Normal user's administration are refused.
async fn users_and_acls_decide(serialize_type: SerializeType) {
    let cluster = auth_cluster();
    let broker = s(&cluster.broker_addr().to_string());
    for topic in [ALLOWED, DENIED] {
        check(&cluster, create_topic_cmd(topic), rs::NO_PERMISSION, "username cannot be null.");
        check(&cluster, signed(create_topic_cmd(topic), ROOT), rs::SUCCESS, "");
    }

    let admin = admin_as(&cluster, serialize_type, ROOT).await;
    bounded("create user", admin.create_user(broker.clone(), s(ALICE.0), s(ALICE.1), s("Normal"))).await.expect("the Super user creates alice");
    let user = bounded("get user", admin.get_user(broker.clone(), s(ALICE.0))).await.expect("get user").expect("alice exists");
    assert_eq!((user.user_type.as_deref(), user.user_status.as_deref()), (Some("Normal"), Some("enable")));
    let allow = |resources: &[&str], actions: &[&str]| (resources.iter().map(|r| s(r)).collect::<Vec<_>>(), actions.iter().map(|a| s(a)).collect::<Vec<_>>());
    let (resources, actions) = allow(&[&format!("Topic:{ALLOWED}"), &format!("Group:{GROUP_ALLOWED}")], &["Pub", "Sub", "Get"]);
    bounded("create acl", admin.create_acl(broker.clone(), s("User:alice"), resources, actions, vec![], s("Allow"))).await.expect("the Super user creates alice's ACL");
    let (resources, actions) = allow(&[&format!("Topic:{DENIED}")], &["Pub"]);
    bounded("update acl", admin.update_acl(broker.clone(), s("User:alice"), resources, actions, vec![], s("Deny"))).await.expect("an explicit Deny is added");
    let acl = bounded("get acl", admin.get_acl(broker.clone(), s("User:alice"))).await.expect("get acl");
    let entries: Vec<String> = acl.policies.unwrap_or_default().into_iter().flat_map(|p| p.entries.unwrap_or_default()).map(|e| format!("{} {}", e.resource.unwrap_or_default(), e.decision.unwrap_or_default())).collect();
    assert_eq!(entries, [format!("Topic:{ALLOWED} Allow"), format!("Group:{GROUP_ALLOWED} Allow"), format!("Topic:{DENIED} Deny")]);
    let users: Vec<String> = bounded("list users", admin.list_users(broker.clone(), s(""))).await.expect("list users").into_iter().filter_map(|u| u.username.map(|n| n.to_string())).collect();
    assert_eq!(users, [ALICE.0, ROOT.0]);
    let mut admin = admin;
    admin.shutdown().await;

    // Alice may send to the allowed topic, not to the denied one.
    let producer = producer_as(&cluster, serialize_type, "auth-alice", ALICE, ALLOWED).await;
    let mut sent = HashSet::new();
    for i in 0..4 {
        let body = format!("auth-{i}");
        let msg = Message::builder().topic(ALLOWED).body_slice(body.as_bytes()).build().expect("message");
        bounded("allowed send", producer.send(msg)).await.expect("alice sends to the allowed topic");
        sent.insert(body);
    }
    let denied = producer_as(&cluster, serialize_type, "auth-alice-denied", ALICE, DENIED).await;
    let msg = Message::builder().topic(DENIED).body_slice(b"refused").build().expect("message");
    bounded("denied send", denied.send(msg)).await.expect_err("the denied topic refuses alice");
    check(&cluster, signed(send_cmd("PG-auth", DENIED, b"raw"), ALICE), rs::NO_PERMISSION, &format!("User:alice has no permission to access Topic:{DENIED} from 127.0.0.1, the decision is deny."));
    // A wrong password is refused, by the client and by raw request.
    let wrong = producer_as(&cluster, serialize_type, "auth-wrong", (ALICE.0, "not-her-password"), ALLOWED).await;
    let msg = Message::builder().topic(ALLOWED).body_slice(b"refused").build().expect("message");
    bounded("wrong-password send", wrong.send(msg)).await.expect_err("a wrong password is refused");
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), (ALICE.0, "not-her-password")), rs::NO_PERMISSION, "check signature failed.");

    // Her consumer reads everything with the allowed group.
    let consumer = DefaultLitePullConsumer::builder(client_runtime("auth-lite-pull", serialize_type))
        .consumer_group(GROUP_ALLOWED)
        .name_server_addr(cluster.namesrv_addr())
        .pull_batch_size(8)
        .poll_timeout_millis(500)
        .broker_suspend_max_time_millis(1_000)
        .consumer_timeout_millis_when_suspend(3_000)
        .auto_commit(false)
        .rpc_hook(hook(ALICE))
        .build()
        .expect("lite pull consumer");
    consumer.set_sub_expression_for_assign(ALLOWED, "*").await.expect("sub expression");
    bounded("lite pull start", consumer.start()).await.expect("lite pull starts");
    let queues = bounded("fetch queues", consumer.fetch_message_queues(ALLOWED)).await.expect("queues");
    consumer.assign(queues.clone()).await.expect("assign");
    for q in &queues {
        consumer.seek(q, 0).await.expect("seek to 0");
    }
    let mut got = HashSet::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < sent.len() {
        assert!(Instant::now() < deadline, "alice's consumer read {} of {}", got.len(), sent.len());
        for m in consumer.poll_with_timeout(300).await {
            got.insert(String::from_utf8(m.get_body().map(|b| b.to_vec()).unwrap_or_default()).expect("utf-8"));
        }
    }
    assert_eq!(got, sent);
    consumer.shutdown().await;
    // The group she is not granted Sub on is refused (pull and heartbeat alike).
    check(&cluster, signed(pull_cmd(ALLOWED, GROUP_DENIED), ALICE), rs::NO_PERMISSION, &format!("User:alice has no permission to access Group:{GROUP_DENIED} from 127.0.0.1, no matched policies."));
    // The producer's sends went to queues from a random start: put one on queue 0 so the
    // allowed pull finds a message there.
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), ALICE), rs::SUCCESS, "");
    check(&cluster, signed(pull_cmd(ALLOWED, GROUP_ALLOWED), ALICE), rs::SUCCESS, "");

    // A Normal user may not administer users or ACLs.
    let alices_admin = admin_as(&cluster, serialize_type, ALICE).await;
    bounded("create user as alice", alices_admin.create_user(broker.clone(), s("mallory"), s("mallory-pw1"), s("Super"))).await.expect_err("a Normal user cannot create users");
    check(&cluster, signed(RemotingCommand::request(rq::AUTH_LIST_USER), ALICE), rs::NO_PERMISSION, "User:alice is not a Super user");
    let mut alices_admin = alices_admin;
    alices_admin.shutdown().await;

    let (mut producer, mut denied, mut wrong) = (producer, denied, wrong);
    producer.shutdown().await;
    denied.shutdown().await;
    wrong.shutdown().await;
}

test_both_encodings!(users_and_acls_decide_json, users_and_acls_decide_binary, users_and_acls_decide);

/// A disabled user is refused; enabled again, accepted; deleted, unknown.
#[test]
fn disabled_and_deleted_users_are_refused() {
    let cluster = auth_cluster();
    check(&cluster, signed(create_topic_cmd(ALLOWED), ROOT), rs::SUCCESS, "");
    let body = |json: &str| json.as_bytes().to_vec();
    let create = RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", "bob").with_body(body(r#"{"password":"bob-password1"}"#));
    check(&cluster, signed(create, ROOT), rs::SUCCESS, "");
    let acl = RemotingCommand::request(rq::AUTH_CREATE_ACL).with_ext("subject", "User:bob").with_body(body(r#"{"policies":[{"entries":[{"resource":"Topic:AuthAllowed","actions":["Pub"],"decision":"Allow"}]}]}"#));
    check(&cluster, signed(acl, ROOT), rs::SUCCESS, "");
    let bob = ("bob", "bob-password1");
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), bob), rs::SUCCESS, "");
    let status = |s: &str| signed(RemotingCommand::request(rq::AUTH_UPDATE_USER).with_ext("username", "bob").with_body(body(&format!(r#"{{"userStatus":"{s}"}}"#))), ROOT);
    check(&cluster, status("disable"), rs::SUCCESS, "");
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), bob), rs::NO_PERMISSION, "User:bob is disabled.");
    check(&cluster, status("enable"), rs::SUCCESS, "");
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), bob), rs::SUCCESS, "");
    check(&cluster, signed(RemotingCommand::request(rq::AUTH_DELETE_USER).with_ext("username", "bob"), ROOT), rs::SUCCESS, "");
    check(&cluster, signed(send_cmd("PG-auth", ALLOWED, b"raw"), bob), rs::NO_PERMISSION, "User:bob is not found.");
    // Her ACL went with her: GET_ACL for a user that is gone.
    check(&cluster, signed(RemotingCommand::request(rq::AUTH_GET_ACL).with_ext("subject", "User:bob"), ROOT), rs::NO_PERMISSION, "The subject is not exist.");
    // Apache's refusals of the AUTH_* codes themselves.
    let again = RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", ROOT.0).with_body(body(r#"{"password":"x1234567"}"#));
    check(&cluster, signed(again, ROOT), rs::NO_PERMISSION, "The user is existed");
    check(&cluster, signed(RemotingCommand::request(rq::AUTH_CREATE_USER).with_body(body("{}")), ROOT), rs::INVALID_PARAMETER, "The username is blank");
    let bad_acl = RemotingCommand::request(rq::AUTH_CREATE_ACL).with_ext("subject", "User:rocketmq").with_body(body(r#"{"policies":[{"entries":[{"resource":"Topic:x","actions":["Pub"],"decision":"Allow","sourceIps":["999.1.1.1"]}]}]}"#));
    check(&cluster, signed(bad_acl, ROOT), rs::INVALID_PARAMETER, "The source ip is invalid");
}

/// Authorization alone (authentication off, as Apache allows): the AUTH_* codes need
/// `Cluster` Update by ACL, and only a Super user makes, changes or deletes a Super user
/// (Apache's `isNotSuperUserLogin`).
#[test]
fn without_authentication_super_users_stay_the_super_users_business() {
    let cluster = Cluster::start(common_interop::BrokerPath::Direct, |c| {
        c.authorization_enabled = true;
        c.init_authentication_user = Some(format!(r#"{{"username":"{}","password":"{}"}}"#, ROOT.0, ROOT.1));
    });
    let body = |json: &str| json.as_bytes().to_vec();
    let create = |name: &str, kind: &str| RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", name).with_body(body(&format!(r#"{{"password":"pw-{name}1","userType":"{kind}"}}"#)));
    check(&cluster, signed(create("ops", "Normal"), ROOT), rs::SUCCESS, "");
    check(&cluster, signed(create("x1", "Normal"), ("ops", "pw-ops1")), rs::NO_PERMISSION, "User:ops has no permission to access Cluster:DefaultCluster");
    let acl = RemotingCommand::request(rq::AUTH_CREATE_ACL).with_ext("subject", "User:ops").with_body(body(r#"{"policies":[{"entries":[{"resource":"Cluster:DefaultCluster","actions":["Update"],"decision":"Allow"}]}]}"#));
    check(&cluster, signed(acl, ROOT), rs::SUCCESS, "");
    check(&cluster, signed(create("x1", "Normal"), ("ops", "pw-ops1")), rs::SUCCESS, "");
    check(&cluster, signed(create("x2", "Super"), ("ops", "pw-ops1")), rs::SYSTEM_ERROR, "The super user can only be create by super user");
    let promote = RemotingCommand::request(rq::AUTH_UPDATE_USER).with_ext("username", "x1").with_body(body(r#"{"userType":"Super"}"#));
    check(&cluster, signed(promote, ("ops", "pw-ops1")), rs::SYSTEM_ERROR, "The super user can only be update by super user");
    let delete_root = RemotingCommand::request(rq::AUTH_DELETE_USER).with_ext("username", ROOT.0);
    check(&cluster, signed(delete_root, ("ops", "pw-ops1")), rs::NO_PERMISSION, "The super user can only be update by super user");
    check(&cluster, signed(create("x3", "Super"), ROOT), rs::SUCCESS, "");
}
