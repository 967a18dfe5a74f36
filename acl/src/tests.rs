//! Table tests of the plain ACL rules: file parsing (and its refusals), permission
//! decisions per request code, admin codes, white lists and signatures.

use super::*;
use ringmq_client::remoting::acl::{sign as sign_cmd, Credentials};
use ringmq_client::remoting::codes::request_code as rq;

const FILE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: pubOnly1
    secretKey: secret-pub
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
dataVersion:
  - counter: 1
    timestamp: 1
"#;

fn rules() -> AclRules {
    parse(FILE.as_bytes()).expect("the sample parses")
}

/// A request of `code` with `fields`, signed by `ak` with `sk` (or unsigned when `ak`
/// is empty).
fn request(code: i32, fields: &[(&str, &str)], body: &[u8], ak: &str, sk: &str) -> RemotingCommand {
    let mut c = RemotingCommand::request(code);
    for (k, v) in fields {
        c = c.with_ext(k, v);
    }
    c.body = bytes::Bytes::copy_from_slice(body);
    if !ak.is_empty() {
        sign_cmd(&mut c, &Credentials::new(ak, sk));
    }
    c
}

/// The decision for `cmd` from `remote`: `Ok` or the refusal's kind and a piece of its
/// remark.
fn check(rules: &AclRules, cmd: &RemotingCommand, remote: &str, expected: Result<(), (RefusalKind, &str)>) {
    let got = rules.check(cmd, Some(remote.parse().unwrap()));
    match (&got, &expected) {
        (Ok(()), Ok(())) => {}
        (Err(r), Err((kind, remark))) if r.kind == *kind && r.remark.contains(remark) => {}
        _ => panic!("code {} from {remote} ext {:?}: got {got:?}, want {expected:?}", cmd.code, cmd.ext_fields),
    }
}

const OUT: &str = "172.16.0.9";

#[test]
fn decisions_follow_apache_order() {
    let r = rules();
    let send = |topic: &str, ak: &str, sk: &str| request(rq::SEND_MESSAGE_V2, &[("a", "pg"), ("b", topic)], b"hello", ak, sk);
    // Globally white-listed callers need nothing.
    check(&r, &send("topicA", "", ""), "10.10.103.7", Ok(()));
    check(&r, &send("topicA", "", ""), "192.168.0.200", Ok(()));
    check(&r, &send("topicA", "", ""), OUT, Err((RefusalKind::NoAccessKey, "No accessKey is configured")));
    check(&r, &send("topicB", "Unknown1", "12345678"), OUT, Err((RefusalKind::UnknownAccessKey, "No acl config for Unknown1")));
    check(&r, &send("topicB", "RocketMQ", "wrong-secret"), OUT, Err((RefusalKind::BadSignature, "Check signature failed for accessKey=RocketMQ")));
    check(&r, &send("topicB", "RocketMQ", "12345678"), OUT, Ok(()));
    check(&r, &send("topicA", "RocketMQ", "12345678"), OUT, Err((RefusalKind::NoPermission, "No default permission for topic:topicA (needs PUB")));
    check(&r, &send("topicC", "RocketMQ", "12345678"), OUT, Err((RefusalKind::NoPermission, "topic:topicC (needs PUB, accessKey=RocketMQ has SUB)")));
    check(&r, &send("other", "RocketMQ", "12345678"), OUT, Err((RefusalKind::NoPermission, "topic:other")));
    // The trace topic takes any signed account's traces.
    check(&r, &send(RMQ_SYS_TRACE_TOPIC, "RocketMQ", "12345678"), OUT, Ok(()));
    // An account white-listed for the caller skips the signature and permissions.
    check(&r, &send("anything", "rocketmq2", "not-the-secret"), "192.168.1.20", Ok(()));
    check(&r, &send("anything", "rocketmq2", "not-the-secret"), "192.168.2.20", Err((RefusalKind::BadSignature, "rocketmq2")));
    // An admin account with no permission lines may do anything, once signed.
    check(&r, &send("anything", "rocketmq2", "12345678"), OUT, Ok(()));
    check(&r, &send("anything", "pubOnly1", "secret-pub"), OUT, Ok(()));
    // A tampered body fails the signature.
    let mut tampered = send("topicB", "RocketMQ", "12345678");
    tampered.body = bytes::Bytes::from_static(b"hellO");
    check(&r, &tampered, OUT, Err((RefusalKind::BadSignature, "")));
}

#[test]
fn resources_per_request_code() {
    let r = rules();
    let (ak, sk) = ("RocketMQ", "12345678");
    let cases: &[(i32, &[(&str, &str)], Result<(), (RefusalKind, &str)>)] = &[
        (rq::SEND_MESSAGE, &[("topic", "topicB"), ("producerGroup", "pg")], Ok(())),
        (rq::SEND_MESSAGE, &[("topic", "topicC"), ("producerGroup", "pg")], Err((RefusalKind::NoPermission, "topic:topicC"))),
        (rq::SEND_BATCH_MESSAGE, &[("b", "topicA"), ("a", "pg")], Err((RefusalKind::NoPermission, "topic:topicA"))),
        (rq::SEND_BATCH_MESSAGE, &[("b", "topicB"), ("a", "pg")], Ok(())),
        // A retry topic is the (producer) group, SUB: groupC has SUB, groupA DENY.
        (rq::SEND_MESSAGE_V2, &[("b", "%RETRY%groupC"), ("a", "groupC")], Ok(())),
        (rq::SEND_MESSAGE_V2, &[("b", "%RETRY%groupA"), ("a", "groupA")], Err((RefusalKind::NoPermission, "group:groupA (needs SUB"))),
        (rq::CONSUMER_SEND_MSG_BACK, &[("group", "groupA"), ("offset", "1")], Err((RefusalKind::NoPermission, "group:groupA"))),
        (rq::CONSUMER_SEND_MSG_BACK, &[("group", "anyGroup"), ("offset", "1")], Ok(())),
        (rq::PULL_MESSAGE, &[("topic", "topicC"), ("consumerGroup", "groupC")], Ok(())),
        (rq::PULL_MESSAGE, &[("topic", "topicA"), ("consumerGroup", "groupC")], Err((RefusalKind::NoPermission, "topic:topicA (needs SUB"))),
        (rq::PULL_MESSAGE, &[("topic", "topicC"), ("consumerGroup", "groupA")], Err((RefusalKind::NoPermission, "group:groupA"))),
        (rq::PULL_MESSAGE, &[("topic", "%RETRY%groupC"), ("consumerGroup", "groupC")], Ok(())),
        (rq::LITE_PULL_MESSAGE, &[("topic", "topicA"), ("consumerGroup", "groupC")], Err((RefusalKind::NoPermission, "topic:topicA"))),
        (rq::QUERY_MESSAGE, &[("topic", "topicA"), ("key", "k")], Err((RefusalKind::NoPermission, "topic:topicA"))),
        (rq::QUERY_MESSAGE, &[("topic", "topicB"), ("key", "k")], Ok(())),
        (rq::UNREGISTER_CLIENT, &[("clientID", "c"), ("consumerGroup", "groupA")], Err((RefusalKind::NoPermission, "group:groupA"))),
        (rq::UNREGISTER_CLIENT, &[("clientID", "c"), ("producerGroup", "pg")], Ok(())),
        (rq::GET_CONSUMER_LIST_BY_GROUP, &[("consumerGroup", "groupA")], Err((RefusalKind::NoPermission, "group:groupA"))),
        (rq::UPDATE_CONSUMER_OFFSET, &[("consumerGroup", "groupB"), ("topic", "topicA"), ("queueId", "0")], Err((RefusalKind::NoPermission, "topic:topicA"))),
        (rq::QUERY_CONSUMER_OFFSET, &[("consumerGroup", "groupA"), ("topic", "topicB"), ("queueId", "0")], Err((RefusalKind::NoPermission, "group:groupA"))),
        (rq::QUERY_CONSUMER_OFFSET, &[("consumerGroup", "groupB"), ("topic", "topicB"), ("queueId", "0")], Ok(())),
        // Codes with no resource: authentication only.
        (rq::GET_ROUTEINFO_BY_TOPIC, &[("topic", "topicA")], Ok(())),
        (rq::END_TRANSACTION, &[("producerGroup", "pg"), ("commitLogOffset", "1")], Ok(())),
        (rq::GET_BROKER_RUNTIME_INFO, &[], Ok(())),
    ];
    for (code, fields, expected) in cases {
        check(&r, &request(*code, fields, b"", ak, sk), OUT, *expected);
    }
}

#[test]
fn heartbeats_need_their_groups_and_topics() {
    let r = rules();
    let hb = |group: &str, topic: &str| {
        let body = format!(r#"{{"clientID":"c1","consumerDataSet":[{{"groupName":"{group}","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{{"topic":"{topic}","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG","classFilterMode":false}}],"unitMode":false}}],"producerDataSet":[]}}"#);
        request(rq::HEART_BEAT, &[], body.as_bytes(), "RocketMQ", "12345678")
    };
    check(&r, &hb("groupC", "topicC"), OUT, Ok(()));
    check(&r, &hb("groupC", "%RETRY%groupC"), OUT, Ok(()));
    check(&r, &hb("groupA", "topicC"), OUT, Err((RefusalKind::NoPermission, "group:groupA")));
    check(&r, &hb("groupC", "topicA"), OUT, Err((RefusalKind::NoPermission, "topic:topicA")));
    check(&r, &request(rq::HEART_BEAT, &[], br#"{"producerDataSet":[{"groupName":"pg"}],"clientID":"c"}"#, "RocketMQ", "12345678"), OUT, Ok(()));
    check(&r, &request(rq::HEART_BEAT, &[], b"{not json", "RocketMQ", "12345678"), OUT, Err((RefusalKind::BadRequest, "bad heartbeat body")));
}

#[test]
fn admin_codes_need_an_admin_account() {
    let r = rules();
    for code in resource::ADMIN_CODES {
        check(&r, &request(*code, &[("topic", "topicB")], b"", "RocketMQ", "12345678"), OUT, Err((RefusalKind::NotAdmin, &format!("Need admin permission for request code={code}, but accessKey=RocketMQ is not"))));
        check(&r, &request(*code, &[("topic", "topicB")], b"", "rocketmq2", "12345678"), OUT, Ok(()));
    }
    for code in [rq::GET_ALL_TOPIC_CONFIG, rq::GET_BROKER_CONFIG, rq::GET_CONSUME_STATS, rq::VIEW_MESSAGE_BY_ID] {
        assert!(!resource::is_admin_code(code), "{code} is not an admin code in Apache");
    }
}

#[test]
fn permission_bits_as_java() {
    let check = |needed: u8, owned: u8, expected: bool| assert_eq!(check_permission(needed, owned), expected, "needed {needed} owned {owned}");
    check(PUB, PUB, true);
    check(PUB, SUB, false);
    check(PUB, PUB | SUB, true);
    check(SUB, PUB | SUB, true);
    check(SUB, DENY, false);
    check(SUB, DENY | SUB, false);
    check(ANY, SUB, true);
    check(ANY, DENY, false);
    let parse = |text: Option<&str>, expected: u8| assert_eq!(parse_perm(text), expected, "{text:?}");
    parse(Some("PUB"), PUB);
    parse(Some(" SUB "), SUB);
    parse(Some("PUB|SUB"), PUB | SUB);
    parse(Some("SUB|PUB"), PUB | SUB);
    parse(Some("DENY"), DENY);
    parse(Some("pub"), DENY);
    parse(Some("ALL"), DENY);
    parse(None, DENY);
}

#[test]
fn file_parsing_and_its_refusals() {
    let check = |text: &str, expected: Result<(usize, usize), &str>| match (parse(text.as_bytes()), expected) {
        (Ok(r), Ok((globals, accounts))) => assert_eq!((r.global_white.len(), r.accounts.len()), (globals, accounts), "{text}"),
        (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text}: `{e}` lacks `{want}`"),
        (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
    };
    check(FILE, Ok((2, 3)));
    check("", Ok((0, 0)));
    check("# only a comment\n", Ok((0, 0)));
    check("accounts:\n", Ok((0, 0)));
    check("globalWhiteRemoteAddresses: ['*']\n", Ok((1, 0)));
    check("accounts:\n  - accessKey: 1234567\n    secretKey: 7654321\n", Ok((0, 1)));
    check("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", Err("length should longer than 6"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", Err("length should longer than 6"));
    check("accounts:\n  - secretKey: 12345678\n", Err("cannot be null"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n  - accessKey: RocketMQ\n    secretKey: '87654321'\n", Err("accessKey RocketMQ is given twice"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    topicPerm: [a=PUB]\n", Err("account 1: unknown key `topicPerm`"));
    check("acounts: []\n", Err("top level: unknown key `acounts`"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    topicPerms: [topicA]\n", Err("Parse resource permission failed for topic:topicA"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    groupPerms: ['g=SUB=PUB']\n", Err("Parse resource permission failed for group:g=SUB=PUB"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    whiteRemoteAddress: 10.1.1.300\n", Err("10.1.1.300"));
    check("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n    admin: maybe\n", Err("admin must be true or false"));
    check("globalWhiteRemoteAddresses: [300.*.*.*]\n", Err("not an octet"));
    check("globalWhiteRemoteAddresses: '*'\n", Err("must be a list"));
    check("accounts: {a: 1}\n", Err("accounts must be a list"));
    check("- just\n- a list\n", Err("must be a mapping"));
    check("accounts: [\n", Err("not YAML"));
    check("\u{0}\u{ff}", Err("not"));
    let many: String = (0..=ACL_ACCOUNTS_MAX).map(|i| format!("  - {{accessKey: account{i:05}, secretKey: '12345678'}}\n")).collect();
    check(&format!("accounts:\n{many}"), Err("more than ACL_ACCOUNTS_MAX"));
    let big = format!("# {}\n", "x".repeat(ACL_FILE_BYTES_MAX as usize));
    check(&big, Err("more than ACL_FILE_BYTES_MAX"));
}

#[test]
fn parsed_accounts_carry_their_settings() {
    let r = rules();
    let a = &r.accounts["RocketMQ"];
    assert_eq!((a.admin, a.default_topic_perm, a.default_group_perm, a.white.clone()), (false, DENY, SUB, addr::AddrPattern::Never));
    assert_eq!(a.topic_perms.get("topicB"), Some(&(PUB | SUB)));
    assert_eq!(a.group_perms.get("groupC"), Some(&SUB));
    let admin = &r.accounts["rocketmq2"];
    assert!(admin.admin && admin.topic_perms.is_empty() && admin.default_topic_perm == DENY);
}

/// Requests that are not what the decoder expects never panic the check.
#[test]
fn odd_requests_never_panic() {
    let r = rules();
    for code in [rq::HEART_BEAT, rq::SEND_MESSAGE_V2, rq::PULL_MESSAGE, rq::UPDATE_AND_CREATE_TOPIC, -1, 0, i32::MAX] {
        for body in [&b""[..], b"\xff\xfe", b"[]", b"{}", b"null"] {
            let mut c = request(code, &[("b", "%RETRY%"), ("topic", ""), ("consumerGroup", "")], body, "RocketMQ", "12345678");
            let _ = r.check(&c, Some("1.2.3.4".parse().unwrap()));
            c.ext_fields.set_str("Signature", "\u{1F600}");
            let _ = r.check(&c, None);
        }
    }
}
