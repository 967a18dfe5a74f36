//! `ringmq-admin`'s controller-mode commands (getControllerMetaData, getControllerConfig,
//! getSyncStateSet, electMaster, cleanBrokerMetadata) against two scripted controller
//! nodes on ephemeral ports: a follower whose metadata names the other as leader, and
//! the leader. Checks what mqadmin checks: the CLI asks `-a` for the leader and sends
//! leader-only requests there with Apache's header fields, prints mqadmin's lines, and
//! exits 1 with the controller's remark on a refusal. Then the same commands against a
//! real one-node controller (`ringmq_controller::server::spawn`) holding a broker set
//! the test registers and heartbeats as two brokers would.

mod common;

use common::admin;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::controller::{BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody, ReplicaIdentity, ReplicasInfo};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a scripted node was asked: (request code, ext fields as `key=value`, body).
type Seen = Arc<Mutex<Vec<(i32, Vec<String>, Vec<u8>)>>>;

/// A scripted controller node: answers each request with `answer(request)`, records it.
fn node(answer: impl Fn(&RemotingCommand) -> RemotingCommand + Send + Sync + 'static) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen: Seen = Arc::default();
    let (answer, record) = (Arc::new(answer), seen.clone());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (answer, record) = (answer.clone(), record.clone());
            std::thread::spawn(move || serve(conn, &*answer, &record));
        }
    });
    (addr, seen)
}

fn serve(mut conn: TcpStream, answer: &dyn Fn(&RemotingCommand) -> RemotingCommand, seen: &Seen) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Ok(Some(request)) = RemotingCommand::decode(&mut buf, &Default::default()) {
            let ext = request.ext_fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            seen.lock().expect("lock").push((request.code, ext, request.body.to_vec()));
            let mut out = bytes::BytesMut::new();
            answer(&request).encode(&mut out).expect("encode");
            if conn.write_all(&out).is_err() {
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn metadata(request: &RemotingCommand, leader: &str) -> RemotingCommand {
    request
        .create_response(rs::SUCCESS, None)
        .with_ext("group", "DefaultControllerGroup")
        .with_ext("controllerLeaderId", "n1")
        .with_ext("controllerLeaderAddress", leader)
        .with_ext("isLeader", "false")
        .with_ext("peers", format!("n0:follower;n1:{leader};"))
}

fn leader_answer(request: &RemotingCommand, me: &str) -> RemotingCommand {
    let ok = request.create_response(rs::SUCCESS, None);
    match request.code {
        rq::CONTROLLER_GET_METADATA_INFO => metadata(request, me),
        rq::CONTROLLER_GET_SYNC_STATE_DATA => {
            let id = |id: i64, alive: bool| ReplicaIdentity { broker_name: "broker-a".into(), broker_id: id, broker_address: format!("10.0.0.{id}:10911"), alive };
            let info = BrokerReplicasInfo {
                replicas_info_table: [(
                    "broker-a".to_string(),
                    ReplicasInfo {
                        master_broker_id: Some(1),
                        master_address: Some("10.0.0.1:10911".into()),
                        master_epoch: 2,
                        sync_state_set_epoch: 3,
                        in_sync_replicas: vec![id(1, true), id(2, true)],
                        not_in_sync_replicas: vec![id(3, false)],
                    },
                )]
                .into(),
            };
            ok.with_body(info.encode())
        }
        rq::CONTROLLER_ELECT_MASTER if request.ext_fields.get("brokerId") == Some("9") => {
            request.create_response(rs::CONTROLLER_ELECT_MASTER_FAILED, Some("Failed to elect a new master"))
        }
        rq::CONTROLLER_ELECT_MASTER => {
            let body = ElectMasterResponseBody {
                broker_member_group: Some(BrokerMemberGroup {
                    cluster: "c".into(),
                    broker_name: "broker-a".into(),
                    broker_addrs: [(1, "10.0.0.1:10911".to_string()), (2, "10.0.0.2:10911".to_string())].into(),
                }),
                sync_state_set: vec![2],
            };
            ok.with_ext("masterBrokerId", "2").with_ext("masterAddress", "10.0.0.2:10911").with_ext("masterEpoch", "3").with_ext("syncStateSetEpoch", "4").with_body(body.encode())
        }
        rq::CLEAN_BROKER_DATA => ok,
        rq::GET_CONTROLLER_CONFIG => ok.with_body(b"controllerDLegerGroup=DefaultControllerGroup\nenableElectUncleanMaster=false\n".to_vec()),
        _ => request.create_response(rs::REQUEST_CODE_NOT_SUPPORTED, Some("not scripted")),
    }
}

fn codes(seen: &Seen) -> Vec<i32> {
    seen.lock().expect("lock").iter().map(|(c, _, _)| *c).collect()
}

fn last_ext(seen: &Seen, code: i32) -> Vec<String> {
    seen.lock().expect("lock").iter().rev().find(|(c, _, _)| *c == code).map(|(_, e, _)| e.clone()).unwrap_or_default()
}

#[test]
fn controller_commands_follow_the_leader_and_print_as_mqadmin() {
    let leader_addr = Arc::new(Mutex::new(String::new()));
    let me = leader_addr.clone();
    let (leader, leader_seen) = node(move |r| leader_answer(r, &me.lock().expect("lock")));
    *leader_addr.lock().expect("lock") = leader.clone();
    let named = leader.clone();
    let (follower, follower_seen) = node(move |r| match r.code {
        rq::CONTROLLER_GET_METADATA_INFO => metadata(r, &named),
        rq::GET_CONTROLLER_CONFIG => r.create_response(rs::SUCCESS, None).with_body(b"controllerDLegerSelfId=n0\n".to_vec()),
        _ => r.create_response(rs::CONTROLLER_NOT_LEADER, Some("The controller is not in leader state")),
    });
    // check(args, expected exit code, what the output must say)
    let check = |args: &[&str], code: i32, says: &[&str]| {
        let (got, out, err) = admin(args);
        assert_eq!(got, code, "{args:?}: {err}{out}");
        for s in says {
            assert!(format!("{out}{err}").contains(s), "{args:?} says {s:?}: {err}{out}");
        }
    };

    check(
        &["getControllerMetaData", "-a", &follower],
        0,
        &["#ControllerGroup\tDefaultControllerGroup\n", &format!("#ControllerLeaderAddress\t{leader}\n"), "#Peer:\tn0:follower\n", &format!("#Peer:\tn1:{leader}\n")],
    );
    check(&["getControllerConfig", "-a", &format!("{follower};{leader}")], 0, &[&format!("============{follower}============"), "controllerDLegerSelfId", "enableElectUncleanMaster"]);

    // Leader-only reads and writes go to the leader the follower names.
    check(
        &["getSyncStateSet", "-a", &follower, "-b", "broker-a"],
        0,
        &["#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t10.0.0.1:10911\n#MasterEpoch\t2\n#SyncStateSetEpoch\t3\n#SyncStateSetNums\t2\n", "NotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=3, brokerAddress='10.0.0.3:10911', alive=false}"],
    );
    let asked = leader_seen.lock().expect("lock").iter().rev().find(|(c, _, _)| *c == rq::CONTROLLER_GET_SYNC_STATE_DATA).map(|(_, _, b)| b.clone());
    assert_eq!(asked.as_deref(), Some(&br#"["broker-a"]"#[..]), "the body lists the broker names");
    let doc: serde_json::Value = serde_json::from_str(&common::ok(&["getSyncStateSet", "-a", &follower, "-b", "broker-a", "--json"])).expect("JSON");
    assert_eq!(doc["replicasInfoTable"]["broker-a"]["masterEpoch"], 2, "{doc}");

    check(
        &["electMaster", "-a", &follower, "-c", "c", "--bn", "broker-a", "-b", "2"],
        0,
        &["#ClusterName\tc\n#BrokerName\tbroker-a\n#BrokerMasterAddr\t10.0.0.2:10911\n#MasterEpoch\t3\n#SyncStateSetEpoch\t4\n\t#Broker\t1\t10.0.0.1:10911\n\t#Broker\t2\t10.0.0.2:10911\n"],
    );
    let ext = last_ext(&leader_seen, rq::CONTROLLER_ELECT_MASTER);
    for field in ["clusterName=c", "brokerName=broker-a", "brokerId=2", "designateElect=true"] {
        assert!(ext.contains(&field.to_string()), "{field} in {ext:?}");
    }
    assert!(ext.iter().any(|e| e.starts_with("invokeTime=")), "{ext:?}");
    check(&["electMaster", "-a", &follower, "-c", "c", "--bn", "broker-a", "-b", "9"], 1, &["Failed to elect a new master"]);

    check(&["cleanBrokerMetadata", "-a", &follower, "--bn", "broker-a", "-c", "c", "-b", "1;2"], 0, &["clear broker broker-a metadata from controller success!"]);
    let ext = last_ext(&leader_seen, rq::CLEAN_BROKER_DATA);
    for field in ["clusterName=c", "brokerName=broker-a", "brokerControllerIdsToClean=1;2", "isCleanLivingBroker=false"] {
        assert!(ext.contains(&field.to_string()), "{field} in {ext:?}");
    }
    check(&["cleanBrokerMetadata", "-a", &follower, "--bn", "broker-a", "-l"], 0, &["success"]);
    assert!(last_ext(&leader_seen, rq::CLEAN_BROKER_DATA).contains(&"isCleanLivingBroker=true".to_string()));

    // The follower was only ever asked who leads (and its config).
    assert!(codes(&follower_seen).iter().all(|c| [rq::CONTROLLER_GET_METADATA_INFO, rq::GET_CONTROLLER_CONFIG].contains(c)), "{:?}", codes(&follower_seen));

    // Refused before any request.
    let before = codes(&leader_seen).len() + codes(&follower_seen).len();
    check(&["cleanBrokerMetadata", "-a", &follower, "--bn", "broker-a"], 1, &["cleanLivingBroker option is false, clusterName option can not be empty."]);
    check(&["cleanBrokerMetadata", "-a", &follower, "--bn", "broker-a", "-c", "c", "-b", "1;x"], 1, &["\"x\" is not a broker id"]);
    check(&["getSyncStateSet", "-a", &follower], 1, &["give -b (a broker name) or -c (a cluster)"]);
    check(&["getSyncStateSet", "-a", &follower, "-c", "c"], 1, &["give -n host:port"]);
    check(&["getBrokerEpoch", "-b", "broker-a"], 1, &["give -n host:port"]);
    check(&["topicList"], 1, &["-n needs at least one NameServer host:port"]);
    assert_eq!(codes(&leader_seen).len() + codes(&follower_seen).len(), before, "no request for a refused command");
}

#[test]
fn a_controller_that_names_no_leader_is_an_error_not_a_guess() {
    let (lonely, seen) = node(|r| match r.code {
        rq::CONTROLLER_GET_METADATA_INFO => r.create_response(rs::SUCCESS, None).with_ext("group", "g").with_ext("isLeader", "false"),
        _ => r.create_response(rs::CONTROLLER_NOT_LEADER, Some("The controller is not in leader state")),
    });
    let (code, out, err) = admin(&["electMaster", "-a", &lonely, "-c", "c", "--bn", "broker-a", "-b", "1"]);
    assert_eq!(code, 1, "{err}{out}");
    assert!(err.contains("the controller knows no leader now"), "{err}{out}");
    assert_eq!(codes(&seen), vec![rq::CONTROLLER_GET_METADATA_INFO], "only asked who leads");
}

/// One request over a plain socket (what a broker of the set would send).
fn raw(addr: &str, cmd: RemotingCommand) -> RemotingCommand {
    let mut out = bytes::BytesMut::new();
    cmd.with_opaque(1).encode(&mut out).expect("encode");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(&out).expect("write");
    let mut buf = bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &Default::default()).expect("decode") {
            return r;
        }
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "{addr} closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn controller_commands_against_a_real_controller() {
    use ringmq_client::remoting::controller::{
        AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader, RegisterBrokerToControllerRequestHeader,
        SyncStateSet,
    };
    let store = tempfile::tempdir().expect("store");
    let port = TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let props = format!(
        "controllerDLegerGroup=adminGroup\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\ncontrollerStorePath={}\n",
        store.path().display()
    );
    let config = ringmq_controller::config::ControllerFileConfig::from_properties(&props).expect("controller config");
    let node = ringmq_controller::server::spawn(config.node_config()).expect("controller starts");
    let ctl = node.local_addr().to_string();
    eventually("the one-node group leads", || raw(&ctl, RemotingCommand::request(rq::CONTROLLER_GET_METADATA_INFO)).ext_fields.get("isLeader") == Some("true"));

    // Two brokers of set b1 register (ids 1 and 2), heartbeat, broker 1 elects itself
    // and reports broker 2 in sync.
    let brokers = ["127.0.0.1:30911", "127.0.0.1:30921"];
    for (i, addr) in brokers.iter().enumerate() {
        let id = i as i64 + 1;
        let applied = raw(
            &ctl,
            RemotingCommand::request(rq::CONTROLLER_APPLY_BROKER_ID).with_header(&ApplyBrokerIdRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b1".into(),
                applied_broker_id: id,
                register_check_code: format!("{addr};1"),
            }),
        );
        assert_eq!(applied.code, rs::SUCCESS, "apply id {id}: {:?}", applied.remark);
        let registered = raw(
            &ctl,
            RemotingCommand::request(rq::CONTROLLER_REGISTER_BROKER).with_header(&RegisterBrokerToControllerRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b1".into(),
                broker_id: id,
                broker_address: addr.to_string(),
                invoke_time: None,
            }),
        );
        assert_eq!(registered.code, rs::SUCCESS, "register {id}: {:?}", registered.remark);
    }
    let heartbeat = |id: i64| {
        let r = raw(
            &ctl,
            RemotingCommand::request(rq::BROKER_HEARTBEAT).with_header(&BrokerHeartbeatRequestHeader {
                cluster_name: "c".into(),
                broker_addr: brokers[id as usize - 1].into(),
                broker_name: "b1".into(),
                broker_id: Some(id),
                epoch: Some(0),
                max_offset: Some(0),
                confirm_offset: Some(0),
                heartbeat_timeout_mills: Some(120_000),
                election_priority: Some(0),
            }),
        );
        assert_eq!(r.code, rs::SUCCESS, "heartbeat {id}: {:?}", r.remark);
    };
    heartbeat(1);
    heartbeat(2);
    let elected = raw(
        &ctl,
        RemotingCommand::request(rq::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b1".into(),
            broker_id: 1,
            designate_elect: false,
            invoke_time: None,
        }),
    );
    assert_eq!((elected.code, elected.ext_fields.get("masterBrokerId")), (rs::SUCCESS, Some("1")), "{:?}", elected.remark);
    let altered = raw(
        &ctl,
        RemotingCommand::request(rq::CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_header(&AlterSyncStateSetRequestHeader { broker_name: "b1".into(), master_broker_id: 1, master_epoch: 1, invoke_time: None })
            .with_body(SyncStateSet { sync_state_set: vec![1, 2], sync_state_set_epoch: 1 }.encode()),
    );
    assert_eq!(altered.code, rs::SUCCESS, "alter: {:?}", altered.remark);

    let check = |args: &[&str], code: i32, says: &[&str]| {
        let (got, out, err) = admin(args);
        assert_eq!(got, code, "{args:?}: {err}{out}");
        for s in says {
            assert!(format!("{out}{err}").contains(s), "{args:?} says {s:?}: {err}{out}");
        }
    };
    check(&["getControllerMetaData", "-a", &ctl], 0, &["#ControllerGroup\tadminGroup\n", &format!("#ControllerLeaderAddress\t{ctl}\n")]);
    check(&["getControllerConfig", "-a", &ctl], 0, &["controllerDLegerGroup", "adminGroup"]);
    check(
        &["getSyncStateSet", "-a", &ctl, "-b", "b1", "--history"],
        0,
        &["#MasterBrokerId\t1\n", "#MasterEpoch\t1\n", "#SyncStateSetNums\t2\n", "#ElectionHistory\tb1", "Broker"],
    );
    // An operator moves mastership to broker 2 (in sync, alive).
    check(&["electMaster", "-a", &ctl, "-c", "c", "--bn", "b1", "-b", "2"], 0, &["#BrokerMasterAddr\t127.0.0.1:30921\n", "#MasterEpoch\t2\n"]);
    let doc: serde_json::Value = serde_json::from_str(&common::ok(&["getSyncStateSet", "-a", &ctl, "-b", "b1", "--history", "--json"])).expect("JSON");
    assert_eq!(doc["replicasInfoTable"]["b1"]["masterBrokerId"], 2, "{doc}");
    assert_eq!(doc["history"]["b1"]["history"][1]["trigger"], "Admin", "{doc}");
    // A living broker's metadata is kept unless -l says otherwise.
    let (code, out, err) = admin(&["cleanBrokerMetadata", "-a", &ctl, "--bn", "b1", "-c", "c", "-b", "1"]);
    assert_eq!(code, 1, "cleaning a living broker without -l is refused: {err}{out}");
    check(&["cleanBrokerMetadata", "-a", &ctl, "--bn", "b1", "-c", "c", "-b", "1", "-l"], 0, &["clear broker b1 metadata from controller success!"]);
    check(&["getSyncStateSet", "-a", &ctl, "-b", "b1"], 0, &["#MasterBrokerId\t2\n"]);
    node.stop();
}
