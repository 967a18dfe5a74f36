//! What a signed request costs the broker: nanoseconds per check of one SEND_MESSAGE_V2
//! as the lean send path carries it (the V2 header's 14 short fields, `AccessKey`,
//! `Signature`, a body of `--body-bytes`), for the 4.x file (an admin account and a
//! normal one with per-topic permissions), RocketMQ 5's authentication + authorization,
//! and the HMAC alone. A benchmark, not a test: run it in release on a quiet machine.
//!
//!   cargo run --release -p ringmq-acl --example check_cost [-- --body-bytes 1024 --iterations 200000]
use std::hint::black_box;
use std::net::IpAddr;
use std::time::Instant;

use ringmq_acl as acl;
use ringmq_acl::auth::{self, info::{AclInfo, UserInfo}, tables::AuthTables, AuthSettings};
use ringmq_client::remoting::acl::{sign, signature_matches, Credentials};
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::RemotingCommand;

const ITERATIONS_MAX: u64 = 100_000_000;
const BODY_BYTES_MAX: usize = 4 << 20;

const PLAIN_ACL: &str = "accounts:\n  - accessKey: benchAdmin\n    secretKey: bench-admin-secret\n    admin: true\n  - accessKey: benchUser\n    secretKey: bench-user-secret\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - BenchTopic=PUB|SUB\n      - Other1=SUB\n      - Other2=PUB\n";

fn send(body_bytes: usize, who: (&str, &str)) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2);
    for (k, v) in [("a", "PG-bench"), ("b", "BenchTopic"), ("c", "TBW102"), ("d", "8"), ("e", "3"), ("f", "0"), ("g", "1733380000000"), ("h", "0"), ("i", "UNIQ_KEY\u{1}0A0B0C0D00002A9F4AAC1B2C3D4E0000\u{2}WAIT\u{1}true\u{2}"), ("j", "0"), ("k", "false"), ("l", "16"), ("m", "false"), ("n", "broker-a")] {
        cmd = cmd.with_ext(k, v);
    }
    cmd = cmd.with_body(vec![0x5au8; body_bytes]);
    sign(&mut cmd, &Credentials::new(who.0, who.1));
    cmd
}

fn time(name: &str, iterations: u64, mut f: impl FnMut() -> bool) {
    for _ in 0..iterations / 10 {
        assert!(black_box(f()), "{name}: the warm-up request was refused");
    }
    let start = Instant::now();
    for _ in 0..iterations {
        assert!(black_box(f()), "{name}: refused");
    }
    let ns = start.elapsed().as_nanos() as f64 / iterations as f64;
    println!("| {name} | {:.2} | {:.0} |", ns / 1000.0, 1e9 / ns);
}

fn arg(args: &[String], name: &str, default: u64, max: u64) -> u64 {
    let value = args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(|v| v.parse::<u64>().unwrap_or_else(|_| panic!("{name} takes a number")));
    let value = value.unwrap_or(default);
    assert!((1..=max).contains(&value), "{name} is 1..={max}");
    value
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let body_bytes = arg(&args, "--body-bytes", 1024, BODY_BYTES_MAX as u64) as usize;
    let iterations = arg(&args, "--iterations", 200_000, ITERATIONS_MAX);
    let remote: Option<IpAddr> = Some("10.1.2.3".parse().expect("an address"));

    let rules = acl::parse(PLAIN_ACL.as_bytes()).expect("the bench plain_acl.yml parses");
    let mut tables = AuthTables::default();
    let user = UserInfo::decode(br#"{"username":"benchUser","password":"bench-user-secret","userType":"Normal"}"#).expect("user JSON");
    tables.create_user(user.to_new_user().expect("a valid user")).expect("a new user");
    let policies = AclInfo::decode(br#"{"subject":"User:benchUser","policies":[{"entries":[{"resource":"Topic:BenchTopic","actions":["Pub","Sub"],"decision":"Allow"},{"resource":"Topic:Other*","actions":"Sub","decision":"Allow"},{"resource":"Group:PG-*","actions":"Sub","decision":"Allow"}]}]}"#).expect("ACL JSON");
    tables.put_acl(policies.to_acl(None).expect("a valid ACL")).expect("a new ACL");
    let settings = AuthSettings { authentication_enabled: true, authorization_enabled: true, authentication_whitelist: vec![], authorization_whitelist: vec![], cluster_name: "DefaultCluster".into() };

    let admin = send(body_bytes, ("benchAdmin", "bench-admin-secret"));
    let user = send(body_bytes, ("benchUser", "bench-user-secret"));
    let user5 = send(body_bytes, ("benchUser", "bench-user-secret"));
    println!("SEND_MESSAGE_V2 with a {body_bytes}-byte body, {iterations} checks each\n");
    println!("| check | µs per request | requests/s on one core |\n|---|---:|---:|");
    time("HMAC-SHA1 verify alone (signature_matches)", iterations, || signature_matches(black_box(&user), "bench-user-secret"));
    time("4.x plain ACL, admin account", iterations, || rules.check(black_box(&admin), remote).is_ok());
    time("4.x plain ACL, normal account with topic permissions", iterations, || rules.check(black_box(&user), remote).is_ok());
    time("5.x authentication + authorization, Normal user", iterations, || auth::check(&settings, &tables, black_box(&user5), remote).is_ok());
    let mut to_sign = send(body_bytes, ("benchUser", "bench-user-secret"));
    let credentials = Credentials::new("benchUser", "bench-user-secret");
    time("client side: sign (AclClientRPCHook)", iterations, || {
        sign(black_box(&mut to_sign), &credentials);
        true
    });
}
