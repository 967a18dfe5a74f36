//! A NameServer with the embedded controller (`enable_controller_in_namesrv`,
//! docs/design/controller.md WP2): routes on the NameServer port, the controller codes
//! on the controller's own port, each port serving only its own codes.

mod common;

use common::{config, start, Conn};
use namesrv::config::FileConfig;
use ringmq_client::remoting::codes::{request_code as req, response_code as rs};
use ringmq_client::remoting::controller::GetNextBrokerIdRequestHeader;
use ringmq_client::remoting::RemotingCommand;
use std::path::Path;
use std::time::{Duration, Instant};

/// A single-node controller group becomes leader within this.
const LEADER_DEADLINE_MS: u64 = 10_000;

#[test]
fn name_server_serves_routes_and_controller_codes_on_two_ports() {
    let store = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let file = format!(
        "enable_controller_in_namesrv = true\n[controller]\ncontroller_dleger_group = \"g\"\ncontroller_dleger_peers = \"n0-127.0.0.1:{port}\"\ncontroller_dleger_self_id = \"n0\"\ncontroller_store_path = \"{}\"\n",
        store.path().display()
    );
    let parsed = FileConfig::parse(&file, Path::new("namesrv.toml")).expect("parses");
    let mut cfg = config();
    parsed.apply(&mut cfg);
    cfg.controller = parsed.controller_config().expect("controller config");
    let server = start(cfg);
    let controller_addr = server.controller_addr().expect("controller running");
    assert_eq!(controller_addr.port(), port);
    assert_ne!(controller_addr, server.local_addr());

    // Routes on the NameServer port.
    let mut ns = Conn::connect(server.local_addr());
    let resp = ns.call(common::register("broker-a", "127.0.0.1:10911", 0, &["TopicTest"]));
    assert_eq!(resp.code, rs::SUCCESS);
    let route = ns.call(common::route("TopicTest", 401));
    assert_eq!(route.code, rs::SUCCESS);
    // The NameServer port does not answer controller codes.
    let meta = ns.call(RemotingCommand::request(req::CONTROLLER_GET_METADATA_INFO));
    assert_ne!(meta.code, rs::SUCCESS);

    // Controller codes on the controller port, once the one-node group leads.
    let mut c = Conn::connect(controller_addr);
    let start_at = Instant::now();
    loop {
        let meta = c.call(RemotingCommand::request(req::CONTROLLER_GET_METADATA_INFO));
        assert_eq!(meta.code, rs::SUCCESS);
        if meta.ext("isLeader") == Some("true") {
            assert_eq!(meta.ext("group"), Some("g"));
            break;
        }
        assert!(start_at.elapsed() < Duration::from_millis(LEADER_DEADLINE_MS), "no leader: {:?}", meta.ext_fields);
        std::thread::sleep(Duration::from_millis(20));
    }
    let next = c.call(RemotingCommand::request(req::CONTROLLER_GET_NEXT_BROKER_ID).with_header(&GetNextBrokerIdRequestHeader {
        cluster_name: "c".into(),
        broker_name: "b".into(),
    }));
    assert_eq!((next.code, next.ext("nextBrokerId")), (rs::SUCCESS, Some("1")));
    // ... and not route codes.
    let not_routes = c.call(common::route("TopicTest", 401));
    assert_eq!(not_routes.code, rs::REQUEST_CODE_NOT_SUPPORTED);
    server.stop();
}
