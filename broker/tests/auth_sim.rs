//! RocketMQ 5's users and ACLs on the simulator (issue 26; ARCHITECTURE.md,
//! `shard/auth.rs`): the production shards, request path and snapshot code over the
//! simulated disk, with power cuts.
//!
//! Invariants checked: a user or ACL whose AUTH_* change was acknowledged is there after
//! a power cut and restart, on every shard (a change made through a shard that is not
//! the metadata owner included) and decides requests there; a power cut in the middle of
//! saving the next change keeps a whole snapshot (the start succeeds; an acknowledged
//! change is there, an unacknowledged one is there whole or not at all); a corrupt
//! newest image falls back one
//! generation; when every image is corrupt the start fails and says so.

mod common_sim;
use ringmq_acl::auth::info::{encode, AclInfo, UserInfo};
use ringmq_broker::config::BrokerConfig;
use ringmq_broker::sim::{SimBroker, SimClient, SimExecutor};
use ringmq_broker::store::config::StoreConfig;
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_client::remoting::acl::{sign, Credentials};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(20);
const ROOT: (&str, &str) = ("root", "root-password");
const ALICE: (&str, &str) = ("alice", "alice-password");
const BOB: (&str, &str) = ("bob", "bob-password");

fn config() -> BrokerConfig {
    let mut config = BrokerConfig { store_root: "/sim".into(), shard_count: 2, max_message_bytes: 4096, ..BrokerConfig::default() };
    config.store = StoreConfig::for_tests();
    config.store.flush_interval_ms = 20;
    config.authentication_enabled = true;
    config.authorization_enabled = true;
    config.init_authentication_user = Some(format!(r#"{{"username":"{}","password":"{}"}}"#, ROOT.0, ROOT.1));
    config
}

fn signed(mut cmd: RemotingCommand, (user, password): (&str, &str)) -> RemotingCommand {
    sign(&mut cmd, &Credentials::new(user, password));
    cmd
}

fn create_user((name, password): (&str, &str)) -> RemotingCommand {
    let info = UserInfo { username: Some(name.into()), password: Some(password.into()), ..Default::default() };
    signed(RemotingCommand::request(rq::AUTH_CREATE_USER).with_ext("username", name).with_body(encode(&info)), ROOT)
}

/// An ACL giving `name` Pub on topic `T` only.
fn create_acl(name: &str) -> RemotingCommand {
    let body = format!(r#"{{"subject":"User:{name}","policies":[{{"policyType":"Custom","entries":[{{"resource":"Topic:T","actions":["Pub"],"decision":"Allow"}}]}}]}}"#);
    signed(RemotingCommand::request(rq::AUTH_CREATE_ACL).with_ext("subject", format!("User:{name}")).with_body(body.into_bytes()), ROOT)
}

fn get_user(name: &str) -> RemotingCommand {
    signed(RemotingCommand::request(rq::AUTH_GET_USER).with_ext("username", name), ROOT)
}

/// A send of one message to `topic`, signed as `who`.
fn send(topic: &str, who: (&str, &str)) -> RemotingCommand {
    let cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_ext("a", "PG")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", "4")
        .with_ext("e", "0")
        .with_ext("f", "0")
        .with_ext("g", "1700000000000")
        .with_ext("h", "0")
        .with_body(b"m".to_vec());
    signed(cmd, who)
}

async fn ask(broker: &SimBroker, ex: &SimExecutor, shard: usize, cmd: RemotingCommand) -> RemotingCommand {
    let client = SimClient::new(ex.clone(), broker.connect(shard).expect("broker up"));
    client.request(cmd, DEADLINE).await.expect("answered")
}

/// Which of `names` each shard of `broker` knows (GET_USER through that shard).
async fn known_users(broker: &SimBroker, ex: &SimExecutor, names: &[&str]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for shard in 0..broker.shards().len() {
        let mut known = Vec::new();
        for name in names {
            let r = ask(broker, ex, shard, get_user(name)).await;
            assert_eq!(r.code, rs::SUCCESS, "GET_USER {name}: {:?}", r.remark);
            if !r.body.is_empty() {
                let info = UserInfo::decode(&r.body).expect("a UserInfo body");
                assert_eq!(info.username.as_deref(), Some(*name));
                known.push(name.to_string());
            }
        }
        out.push(known);
    }
    out
}

fn auth_files(disk: &SimDisk) -> Vec<PathBuf> {
    disk.paths().into_iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("authMetadata."))).collect()
}

/// Runs `body` on a fresh simulator with one broker over `disk`.
fn with_broker<T: 'static, F: std::future::Future<Output = T> + 'static>(seed: u64, disk: SimDisk, body: impl FnOnce(Rc<SimBroker>, SimExecutor) -> F) -> T {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    let ex = SimExecutor::new(seed);
    let broker = SimBroker::new(ex.clone(), disk, config());
    let out = ex.block_on(body(broker, ex.clone()));
    ex.shutdown();
    out
}

#[test]
fn acknowledged_users_and_acls_survive_a_power_cut_on_every_shard() {
    let disk = SimDisk::new(11);
    with_broker(11, disk.clone(), |broker, ex| async move {
        broker.start().await.expect("starts");
        let r = ask(&broker, &ex, 0, signed(common_sim::create_topic("T", 2), ROOT)).await;
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        let r = ask(&broker, &ex, 0, signed(common_sim::create_topic("U", 2), ROOT)).await;
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        // Through shard 1: forwarded to the metadata owner, answered once every shard has it.
        let r = ask(&broker, &ex, 1, create_user(ALICE)).await;
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        let r = ask(&broker, &ex, 1, create_acl(ALICE.0)).await;
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        assert_eq!(known_users(&broker, &ex, &["root", "alice", "nobody"]).await, vec![vec!["root", "alice"]; 2]);
        broker.crash();
        broker.start().await.expect("restarts after the power cut");
        assert_eq!(known_users(&broker, &ex, &["root", "alice", "nobody"]).await, vec![vec!["root", "alice"]; 2]);
        let r = ask(&broker, &ex, 1, signed(RemotingCommand::request(rq::AUTH_GET_ACL).with_ext("subject", "User:alice"), ROOT)).await;
        let acl = AclInfo::decode(&r.body).expect("an AclInfo body");
        assert_eq!(String::from_utf8(encode(&acl)).unwrap(), r#"{"policies":[{"entries":[{"actions":["Pub"],"decision":"Allow","resource":"Topic:T"}],"policyType":"Custom"}],"subject":"User:alice"}"#);
        // The restored tables decide on every shard: T allowed, U refused, a wrong
        // password refused.
        for shard in 0..2 {
            let r = ask(&broker, &ex, shard, send("T", ALICE)).await;
            assert_eq!(r.code, rs::SUCCESS, "shard {shard}: {:?}", r.remark);
            let r = ask(&broker, &ex, shard, send("U", ALICE)).await;
            assert_eq!((r.code, r.remark.as_deref()), (rs::NO_PERMISSION, Some("User:alice has no permission to access Topic:U from 10.0.0.1, no matched policies.")), "shard {shard}");
            let r = ask(&broker, &ex, shard, send("T", (ALICE.0, "guess"))).await;
            assert_eq!((r.code, r.remark.as_deref()), (rs::NO_PERMISSION, Some("check signature failed.")), "shard {shard}");
        }
        let refusals: u64 = broker.shards().iter().map(|s| s.metrics_snapshot().acl_refusals).sum();
        assert_eq!(refusals, 4, "each refusal counted once");
        broker.crash();
    });
}

/// A power cut `ops` data operations into creating bob: the broker restarts with alice
/// (acknowledged before), and with bob exactly when his create was acknowledged.
fn cut_while_saving(ops: u64) -> (bool, Vec<Vec<String>>) {
    let disk = SimDisk::new(20 + ops);
    let d = disk.clone();
    with_broker(20 + ops, disk, move |broker, ex| async move {
        broker.start().await.expect("starts");
        let r = ask(&broker, &ex, 0, create_user(ALICE)).await;
        assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        let client = SimClient::new(ex.clone(), broker.connect(0).expect("up"));
        d.crash_after_ops(Some(ops));
        let acked = matches!(client.request(create_user(BOB), Duration::from_secs(2)).await, Ok(r) if r.code == rs::SUCCESS);
        broker.crash();
        d.crash_after_ops(None);
        broker.start().await.unwrap_or_else(|e| panic!("cut at op {ops}: the broker must restart: {e}"));
        let known = known_users(&broker, &ex, &["alice", "bob"]).await;
        broker.crash();
        (acked, known)
    })
}

#[test]
fn a_power_cut_while_saving_keeps_the_previous_snapshot() {
    let (with_bob, alice_only) = (vec![vec!["alice".to_string(), "bob".to_string()]; 2], vec![vec!["alice".to_string()]; 2]);
    let (mut unacknowledged, mut kept_previous) = (0, 0);
    for ops in 0..6 {
        let (acked, known) = cut_while_saving(ops);
        // Acknowledged: bob is there. Not acknowledged: one whole snapshot or the other
        // (the new image's bytes may have reached the disk before the cut), never a
        // failed start, never a table without alice.
        assert!(known == with_bob || (!acked && known == alice_only), "cut at op {ops} (bob acknowledged: {acked}): {known:?}");
        unacknowledged += usize::from(!acked);
        kept_previous += usize::from(known == alice_only);
    }
    assert!(unacknowledged > 0 && kept_previous > 0, "some cut fell inside bob's save and tore it: {unacknowledged} unacknowledged, {kept_previous} kept the previous snapshot");
}

#[test]
fn a_corrupt_newest_image_falls_back_and_all_corrupt_fails_the_start() {
    let disk = SimDisk::new(31);
    let d = disk.clone();
    with_broker(31, disk, move |broker, ex| async move {
        broker.start().await.expect("starts");
        for who in [ALICE, BOB] {
            let r = ask(&broker, &ex, 0, create_user(who)).await;
            assert_eq!(r.code, rs::SUCCESS, "{:?}", r.remark);
        }
        broker.stop().await.expect("stops");
        // Two generations are kept: the one with bob and the one before.
        let files = auth_files(&d);
        assert_eq!(files.len(), 2, "{files:?}");
        d.flip_bit(&files[1], 40, 3);
        broker.start().await.expect("starts on the older image");
        assert_eq!(known_users(&broker, &ex, &["root", "alice", "bob"]).await, vec![vec!["root", "alice"]; 2]);
        broker.stop().await.expect("stops");
        for f in auth_files(&d) {
            d.flip_bit(&f, 40, 5);
        }
        let e = broker.start().await.expect_err("no valid image: the start fails");
        assert!(e.contains("users and ACLs (authMetadata)") && e.contains("none is valid"), "{e}");
    });
}
