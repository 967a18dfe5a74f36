//! The signature path from arbitrary bytes on the wire: every frame the remoting decoder
//! accepts goes through the 4.x file's check, the NameServer's check and RocketMQ 5's
//! authentication and authorization, as it arrives, never panicking. Then, signed with a
//! known account's secret, it must authenticate (`signature_matches`, and no
//! `BadSignature` refusal from either model); a changed body or a changed signature must
//! not.
#![no_main]
use std::net::IpAddr;
use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringmq_acl as acl;
use ringmq_acl::auth::{self, info::{AclInfo, UserInfo}, tables::AuthTables, AuthSettings};
use ringmq_acl::RefusalKind;
use ringmq_client::remoting::acl::{sign, signature_matches, Credentials};
use ringmq_client::remoting::frame::{self, FrameLimits};
use ringmq_client::remoting::RemotingCommand;

const PLAIN_ACL: &str = "globalWhiteRemoteAddresses:\n  - 10.10.*.*\naccounts:\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    admin: true\n  - accessKey: fuzzuser\n    secretKey: fuzz-secret\n    whiteRemoteAddress: 192.168.0.*\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - TopicTest=PUB\n      - Orders=PUB|SUB\n    groupPerms:\n      - GID_A=DENY\n";

struct Fixture {
    rules: acl::AclRules,
    tables: AuthTables,
    settings: AuthSettings,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rules = acl::parse(PLAIN_ACL.as_bytes()).expect("the fixture's plain_acl.yml parses");
        let mut tables = AuthTables::default();
        let user = UserInfo::decode(br#"{"username":"fuzzuser","password":"fuzz-secret","userType":"Normal"}"#).expect("the fixture's user decodes");
        tables.create_user(user.to_new_user().expect("a valid user")).expect("a new user");
        let acl_info = AclInfo::decode(br#"{"subject":"User:fuzzuser","policies":[{"entries":[{"resource":"Topic:Orders","actions":["Pub","Sub"],"decision":"Allow"},{"resource":"Group:GID_*","actions":"Sub","decision":"Allow","sourceIps":["127.0.0.0/8"]},{"resource":"Topic:Deny*","actions":"All","decision":"Deny"}]}]}"#);
        tables.put_acl(acl_info.expect("the fixture's ACL").to_acl(None).expect("a valid ACL")).expect("a new ACL");
        let settings = AuthSettings { authentication_enabled: true, authorization_enabled: true, authentication_whitelist: vec![], authorization_whitelist: vec![], cluster_name: "DefaultCluster".into() };
        Fixture { rules, tables, settings }
    })
}

fn decide(f: &Fixture, cmd: &RemotingCommand) -> [Option<RefusalKind>; 9] {
    let remotes: [Option<IpAddr>; 3] = [None, Some("192.168.0.7".parse().unwrap()), Some("::1".parse().unwrap())];
    let mut out = [None; 9];
    for (i, remote) in remotes.into_iter().enumerate() {
        out[i * 3] = f.rules.check(cmd, remote).err().map(|r| r.kind);
        out[i * 3 + 1] = f.rules.check_namesrv(cmd, remote).err().map(|r| r.kind);
        out[i * 3 + 2] = auth::check(&f.settings, &f.tables, cmd, remote).err().map(|r| r.kind);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let limits = FrameLimits { frame_len_max_bytes: 1 << 16, body_len_max_bytes: 1 << 12 };
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = frame::decode(&mut buf, &limits) {
        let Ok(mut cmd) = RemotingCommand::from_frame(frame) else { continue };
        let _ = decide(f, &cmd);
        sign(&mut cmd, &Credentials::new("fuzzuser", "fuzz-secret"));
        assert!(signature_matches(&cmd, "fuzz-secret"), "a request signed with the secret verifies");
        assert!(!signature_matches(&cmd, "fuzz-secret2"), "another secret does not verify");
        for kind in decide(f, &cmd).into_iter().flatten() {
            assert_ne!(kind, RefusalKind::BadSignature, "a correctly signed request refused for its signature: code {}", cmd.code);
        }
        let mut tampered = cmd.clone();
        let mut body = tampered.body.to_vec();
        body.push(0x5a);
        tampered.body = body.into();
        assert!(!signature_matches(&tampered, "fuzz-secret"), "a longer body does not verify");
        let mut forged = cmd.clone();
        let sig = forged.ext("Signature").unwrap_or_default().to_owned();
        let flipped: String = sig.chars().rev().collect();
        if flipped != sig {
            forged = forged.with_ext("Signature", flipped);
            assert!(!signature_matches(&forged, "fuzz-secret"), "a changed signature does not verify");
        }
    }
});
