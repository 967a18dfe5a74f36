//! `Controller::handle` on a one-node group (it leads at once): every WP1 code through
//! one `check(request, code, fields)` table, plus bad input (unknown codes, missing
//! header fields, bad bodies) answered with a code, never a panic.

use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as req, response_code as rc};
use ringmq_client::remoting::controller::{
    ApplyBrokerIdRequestHeader, BrokerReplicasInfo, CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
};
use ringmq_client::remoting::RemotingCommand;
use ringmq_controller::raft::mem::{MemLogStore, MemRouter, MemStateMachine};
use ringmq_controller::{Controller, ControllerConfig};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const LEADER_DEADLINE_MS: u64 = 5000;

async fn check(c: &Controller, request: RemotingCommand, code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    let resp = c.handle(request.clone().with_opaque(42)).await;
    assert_eq!(resp.code, code, "request {} answered {:?}", request.code, resp.remark);
    assert_eq!(resp.opaque, 42);
    assert!(resp.is_response());
    for (k, v) in fields {
        assert_eq!(resp.ext(k), Some(*v), "field {k} of request {}", request.code);
    }
    resp
}

fn next_id(name: &str) -> RemotingCommand {
    RemotingCommand::request(req::CONTROLLER_GET_NEXT_BROKER_ID)
        .with_header(&GetNextBrokerIdRequestHeader { cluster_name: "c".into(), broker_name: name.into() })
}

fn apply_id(name: &str, id: i64, code: &str) -> RemotingCommand {
    RemotingCommand::request(req::CONTROLLER_APPLY_BROKER_ID).with_header(&ApplyBrokerIdRequestHeader {
        cluster_name: "c".into(),
        broker_name: name.into(),
        applied_broker_id: id,
        register_check_code: format!("10.0.0.{id}:10911;{code}"),
    })
}

async fn scenario() {
    let router = MemRouter::default();
    let config = ControllerConfig {
        group: "g".into(),
        node_id: 0,
        peers: BTreeMap::from([(0, "127.0.0.1:9878".to_string())]),
        enable_elect_unclean_master: false,
        write_wait_ms: 2000,
        ..ControllerConfig::default()
    };
    let mut c = Controller::start(config, router.network(0), MemLogStore::default(), MemStateMachine::default()).await.expect("start");
    // No heartbeats in this test: every registered replica counts as alive.
    c.set_liveness(std::rc::Rc::new(ringmq_controller::policy::AllAlive));
    router.add(0, c.raft().clone());
    c.initialize().await.expect("initialize");
    let start = Instant::now();
    while !c.is_leader() {
        assert!(start.elapsed() < Duration::from_millis(LEADER_DEADLINE_MS), "no leader");
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }

    check(&c, RemotingCommand::request(req::CONTROLLER_GET_METADATA_INFO), rc::SUCCESS, &[("isLeader", "true"), ("group", "g"), ("controllerLeaderId", "n0")]).await;
    check(&c, next_id("b"), rc::SUCCESS, &[("nextBrokerId", "1")]).await;
    check(&c, apply_id("b", 2, "x"), rc::CONTROLLER_BROKER_ID_INVALID, &[]).await;
    check(&c, apply_id("b", 1, "x"), rc::SUCCESS, &[("clusterName", "c"), ("brokerName", "b")]).await;
    check(&c, apply_id("b", 1, "y"), rc::CONTROLLER_BROKER_ID_INVALID, &[]).await;
    check(&c, next_id("b"), rc::SUCCESS, &[("nextBrokerId", "2")]).await;
    check(&c, apply_id("b", 2, "x"), rc::SUCCESS, &[]).await;
    let elect = |id: i64| {
        RemotingCommand::request(req::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            designate_elect: false,
            invoke_time: None,
        })
    };
    check(&c, elect(2), rc::SUCCESS, &[("masterBrokerId", "2"), ("masterEpoch", "1")]).await;
    check(&c, elect(1), rc::CONTROLLER_MASTER_STILL_EXIST, &[("masterBrokerId", "2")]).await;
    let info = RemotingCommand::request(req::CONTROLLER_GET_REPLICA_INFO).with_header(&GetReplicaInfoRequestHeader { broker_name: "b".into() });
    check(&c, info, rc::SUCCESS, &[("masterAddress", "10.0.0.2:10911")]).await;
    let data = check(&c, RemotingCommand::request(req::CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"[\"b\",\"none\"]"[..]), rc::SUCCESS, &[]).await;
    let data = BrokerReplicasInfo::decode(&data.body).expect("BrokerReplicasInfo");
    assert_eq!(data.replicas_info_table["b"].master_broker_id, Some(2));
    let clean = |living: bool| {
        RemotingCommand::request(req::CLEAN_BROKER_DATA).with_header(&CleanControllerBrokerDataRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            broker_controller_ids_to_clean: None,
            is_clean_living_broker: living,
            invoke_time: None,
        })
    };
    check(&c, clean(false), rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA, &[]).await;
    check(&c, clean(true), rc::SUCCESS, &[]).await;
    check(&c, next_id("b"), rc::SUCCESS, &[("nextBrokerId", "1")]).await;

    // Bad input: a code and a remark, never a panic.
    check(&c, RemotingCommand::request(req::SEND_MESSAGE), rc::REQUEST_CODE_NOT_SUPPORTED, &[]).await;
    check(&c, RemotingCommand::request(req::UPDATE_CONTROLLER_CONFIG), rc::REQUEST_CODE_NOT_SUPPORTED, &[]).await;
    check(&c, RemotingCommand::request(req::CONTROLLER_GET_REPLICA_INFO), rc::CONTROLLER_INVALID_REQUEST, &[]).await;
    check(&c, RemotingCommand::request(req::CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"{"[..]), rc::CONTROLLER_INVALID_REQUEST, &[]).await;
    let bad_alter = RemotingCommand::request(req::CONTROLLER_ALTER_SYNC_STATE_SET)
        .with_ext("brokerName", "b")
        .with_ext("masterBrokerId", "1")
        .with_ext("masterEpoch", "1")
        .with_body(&b"not json"[..]);
    check(&c, bad_alter, rc::CONTROLLER_INVALID_REQUEST, &[]).await;
    c.shutdown().await;
}

#[test]
fn every_wp1_code_on_a_single_node() {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).spawn(scenario).expect("executor").join().expect("scenario");
}
