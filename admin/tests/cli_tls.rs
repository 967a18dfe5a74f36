//! `ringmq-admin --tls` (issue 26) against a NameServer and a 2-shard broker in this
//! process that accept TLS only (`tls.server.mode=enforcing`, certificates from the
//! shared test PKI): with `--tls --tls-ca` the CLI lists the cluster and sends; without
//! `--tls` it fails (exit 1) and says the server wants TLS; a client certificate without
//! its key is a bad flag (exit 2).

mod common;

use common::admin;
use ringmq_client::net::tls::gen::TestPki;
use ringmq_client::net::tls::ServerMode;
use std::time::{Duration, Instant};

fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_cli_talks_tls_with_tls_and_is_refused_without() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).expect("test certificates");
    let server = pki.server_settings(ServerMode::Enforcing);
    let ns_server = server.clone();
    let outgoing = pki.client_settings(false);
    let c = common::cluster_with_namesrv("broker-tls", move |ns| ns.tls = ns_server, move |config| {
        config.tls.server = server;
        config.tls.client = outgoing;
    });
    let n = c.namesrv.as_str();
    let ca = pki.ca_cert.display().to_string();
    let tls = ["--tls", "--tls-ca", ca.as_str()];
    let with_tls = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&tls);
        admin(&all)
    };
    eventually("the broker registers over TLS", || with_tls(&["clusterList", "-n", n]).1.contains("broker-tls"));
    let (code, out, err) = with_tls(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "TLS_CLI_T", "-r", "2", "-w", "2"]);
    assert_eq!(code, 0, "{err}{out}");
    eventually("the topic is routed", || with_tls(&["topicList", "-n", n]).1.lines().any(|l| l == "TLS_CLI_T"));
    let (code, out, err) = with_tls(&["sendMessage", "-n", n, "-t", "TLS_CLI_T", "-p", "over TLS"]);
    assert_eq!(code, 0, "{err}{out}");
    assert!(out.contains("SEND_OK"), "{out}");
    // Without --tls: refused, and the output says why.
    let (code, out, err) = admin(&["clusterList", "-n", n]);
    assert_eq!(code, 1, "{err}{out}");
    assert!(format!("{out}{err}").contains("TLS required"), "{err}{out}");
    // A certificate without its key is a bad flag.
    let cert = pki.client_cert.display().to_string();
    let (code, _, err) = with_tls(&["clusterList", "-n", n, "--tls-cert", cert.as_str()]);
    assert_eq!(code, 2, "{err}");
}
