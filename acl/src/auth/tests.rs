//! Table tests of RocketMQ 5's decision (authentication, Super users, policy matching:
//! Deny over Allow, prefix and any patterns, Custom before Default, source IPs, disabled
//! users) and a property test that the users/ACL codecs round-trip.

use super::info::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
use super::model::{User, UserStatus, UserType};
use super::*;
use proptest::prelude::*;
use ringmq_client::remoting::acl::{sign as sign_cmd, Credentials};
use ringmq_client::remoting::codes::request_code as rq;

const PASSWORD: &str = "pw-12345";

/// Users: `root` (Super), `alice`, `bob` (Normal), `carol` (Normal, disabled); ACLs given
/// as (username, AclInfo JSON of its policies).
fn tables(acls: &[(&str, &str)]) -> AuthTables {
    let mut t = AuthTables::default();
    for (name, user_type, status) in [("root", UserType::Super, UserStatus::Enable), ("alice", UserType::Normal, UserStatus::Enable), ("bob", UserType::Normal, UserStatus::Enable), ("carol", UserType::Normal, UserStatus::Disable)] {
        t.create_user(User { username: name.into(), password: PASSWORD.into(), user_type, user_status: status }).unwrap();
    }
    for (name, policies) in acls {
        let info = AclInfo::decode(format!(r#"{{"subject":"User:{name}","policies":{policies}}}"#).as_bytes()).unwrap();
        t.put_acl(info.to_acl(None).unwrap()).unwrap();
    }
    t
}

/// One custom policy of entries `(resource, actions, decision, sourceIps)`.
fn custom(entries: &[(&str, &str, &str, &str)]) -> String {
    policy("Custom", entries)
}

fn policy(kind: &str, entries: &[(&str, &str, &str, &str)]) -> String {
    let e: Vec<String> = entries
        .iter()
        .map(|(r, a, d, ips)| {
            let ips: Vec<String> = ips.split(' ').filter(|s| !s.is_empty()).map(|s| format!("\"{s}\"")).collect();
            format!(r#"{{"resource":"{r}","actions":"{a}","decision":"{d}","sourceIps":[{}]}}"#, ips.join(","))
        })
        .collect();
    format!(r#"{{"policyType":"{kind}","entries":[{}]}}"#, e.join(","))
}

/// A request of `code` with `fields`, signed as `user` with `password` (unsigned when
/// `user` is empty).
fn request(code: i32, fields: &[(&str, &str)], user: &str, password: &str) -> RemotingCommand {
    let mut c = RemotingCommand::request(code);
    for (k, v) in fields {
        c = c.with_ext(k, v);
    }
    if !user.is_empty() {
        sign_cmd(&mut c, &Credentials::new(user, password));
    }
    c
}

fn both() -> AuthSettings {
    AuthSettings { authentication_enabled: true, authorization_enabled: true, cluster_name: "DefaultCluster".into(), ..Default::default() }
}

/// The decision for `cmd` from `remote`: `Ok`, or the refusal's kind and a piece of its
/// remark.
fn check(settings: &AuthSettings, t: &AuthTables, cmd: &RemotingCommand, remote: &str, expected: Result<(), (RefusalKind, &str)>) {
    let remote = (!remote.is_empty()).then(|| remote.parse().unwrap());
    match (super::check(settings, t, cmd, remote), expected) {
        (Ok(()), Ok(())) => {}
        (Err(r), Err((kind, part))) => {
            assert_eq!(r.kind, kind, "code {} {:?}: {}", cmd.code, cmd.ext("AccessKey"), r.remark);
            assert!(r.remark.contains(part), "code {}: remark {:?} lacks {part:?}", cmd.code, r.remark);
        }
        (got, want) => panic!("code {} as {:?} from {remote:?}: got {got:?}, want {want:?}", cmd.code, cmd.ext("AccessKey")),
    }
}

fn send(topic: &str, user: &str) -> RemotingCommand {
    request(rq::SEND_MESSAGE_V2, &[("a", "pg"), ("b", topic)], user, PASSWORD)
}

#[test]
fn authentication_as_apache() {
    let t = tables(&[("alice", &format!("[{}]", custom(&[("*", "All", "Allow", "")])))]);
    let s = AuthSettings { authorization_enabled: false, ..both() };
    check(&s, &t, &send("T", "alice"), "10.0.0.1", Ok(()));
    check(&s, &t, &send("T", "root"), "10.0.0.1", Ok(()));
    check(&s, &t, &send("T", ""), "10.0.0.1", Err((RefusalKind::NoAccessKey, "username cannot be null.")));
    check(&s, &t, &send("T", "mallory"), "10.0.0.1", Err((RefusalKind::UnknownAccessKey, "User:mallory is not found.")));
    check(&s, &t, &send("T", "carol"), "10.0.0.1", Err((RefusalKind::UserDisabled, "User:carol is disabled.")));
    check(&s, &t, &request(rq::SEND_MESSAGE_V2, &[("b", "T")], "alice", "wrong-password"), "", Err((RefusalKind::BadSignature, "check signature failed.")));
    // A signed request changed afterwards fails its signature.
    let mut tampered = send("T", "alice");
    tampered.ext_fields.set_str("b", "Other");
    check(&s, &t, &tampered, "", Err((RefusalKind::BadSignature, "check signature failed.")));
    // Whitelisted codes skip authentication; off means no check at all.
    let white = AuthSettings { authentication_whitelist: vec![rq::SEND_MESSAGE_V2], ..s.clone() };
    check(&white, &t, &send("T", ""), "", Ok(()));
    check(&AuthSettings::default(), &t, &send("T", "mallory"), "", Ok(()));
}

#[test]
fn only_super_users_manage_users_and_acls() {
    let t = tables(&[("alice", &format!("[{}]", custom(&[("*", "All", "Allow", "")])))]);
    for code in request::codes::ALL {
        let cmd = request(code, &[("username", "x")], "alice", PASSWORD);
        check(&both(), &t, &cmd, "", Err((RefusalKind::NotAdmin, "only a Super user")));
        check(&both(), &t, &request(code, &[("username", "x")], "root", PASSWORD), "", Ok(()));
    }
    // With authentication off, Apache's rule alone: Cluster Update/Get by policy.
    let authz = AuthSettings { authentication_enabled: false, ..both() };
    check(&authz, &t, &request(request::codes::AUTH_LIST_USER, &[], "alice", PASSWORD), "", Ok(()));
    check(&authz, &t, &request(request::codes::AUTH_LIST_USER, &[], "bob", PASSWORD), "", Err((RefusalKind::NoPermission, "Cluster:DefaultCluster")));
}

#[test]
fn policies_decide_as_apache() {
    let s = both();
    // check_as(entries of alice's custom policy, request topic, caller, expected)
    let check_as = |entries: &[(&str, &str, &str, &str)], topic: &str, remote: &str, expected: Result<(), (RefusalKind, &str)>| {
        let t = tables(&[("alice", &format!("[{}]", custom(entries)))]);
        check(&s, &t, &send(topic, "alice"), remote, expected);
    };
    let deny = Err((RefusalKind::NoPermission, "the decision is deny."));
    let none = Err((RefusalKind::NoPermission, "no matched policies."));
    check_as(&[("Topic:orders", "Pub", "Allow", "")], "orders", "10.0.0.1", Ok(()));
    check_as(&[("Topic:orders", "Pub", "Allow", "")], "orders2", "10.0.0.1", none);
    check_as(&[("Topic:orders", "Sub", "Allow", "")], "orders", "10.0.0.1", none);
    check_as(&[("Topic:orders", "All", "Allow", "")], "orders", "10.0.0.1", Ok(()));
    check_as(&[("Topic:orders", "Pub", "Deny", "")], "orders", "10.0.0.1", deny);
    // Deny beats Allow at the same specificity, whatever their order.
    check_as(&[("Topic:orders", "Pub", "Allow", ""), ("Topic:orders*", "Pub", "Deny", ""), ("Topic:ord*", "Pub", "Allow", "")], "orders", "10.0.0.1", Ok(()));
    check_as(&[("Topic:a*", "Pub", "Allow", ""), ("Topic:b*", "Pub", "Deny", ""), ("Topic:a*", "Sub", "Deny", "")], "abc", "", Ok(()));
    check_as(&[("Topic:*", "Pub", "Allow", ""), ("*", "Pub", "Deny", "")], "abc", "", Ok(()));
    check_as(&[("*", "Pub", "Allow", ""), ("Topic:*", "Pub", "Deny", "")], "abc", "", deny);
    // The most specific match decides: a literal over a prefix, a longer prefix first.
    check_as(&[("Topic:orders", "Pub", "Allow", ""), ("Topic:ord*", "Pub", "Deny", "")], "orders", "", Ok(()));
    check_as(&[("Topic:orders", "Pub", "Deny", ""), ("Topic:ord*", "Pub", "Allow", "")], "orders", "", deny);
    check_as(&[("Topic:ord*", "Pub", "Allow", ""), ("Topic:orders*", "Pub", "Deny", "")], "orders-eu", "", deny);
    check_as(&[("Topic:ord*", "Pub", "Deny", ""), ("Topic:orders*", "Pub", "Allow", "")], "orders-eu", "", Ok(()));
    check_as(&[("Topic:ord*", "Pub", "Deny", ""), ("Topic:orders*", "Pub", "Allow", "")], "ordinal", "", deny);
    check_as(&[("Topic:*", "Pub", "Deny", ""), ("Topic:o*", "Pub", "Allow", "")], "orders", "", Ok(()));
    check_as(&[("Group:*", "All", "Allow", "")], "orders", "", none);
    // Source IPs: addresses and CIDRs; an unknown caller matches only entries without.
    check_as(&[("Topic:t", "Pub", "Allow", "192.168.0.0/16 10.1.1.1")], "t", "192.168.4.5", Ok(()));
    check_as(&[("Topic:t", "Pub", "Allow", "192.168.0.0/16 10.1.1.1")], "t", "10.1.1.1", Ok(()));
    check_as(&[("Topic:t", "Pub", "Allow", "192.168.0.0/16 10.1.1.1")], "t", "10.1.1.2", none);
    check_as(&[("Topic:t", "Pub", "Allow", "192.168.0.0/16")], "t", "", none);
    check_as(&[("Topic:t", "Pub", "Allow", "127.0.0.1")], "t", "::ffff:127.0.0.1", Ok(()));
    // A deny from elsewhere does not apply to a caller it does not name.
    check_as(&[("Topic:t", "Pub", "Deny", "10.0.0.0/8"), ("Topic:t*", "Pub", "Allow", "")], "t", "192.168.1.1", Ok(()));
    check_as(&[("Topic:t", "Pub", "Deny", "10.0.0.0/8"), ("Topic:t*", "Pub", "Allow", "")], "t", "10.9.9.9", deny);
}

#[test]
fn default_policies_apply_only_when_no_custom_entry_matches() {
    let s = both();
    let t = tables(&[("alice", &format!("[{},{}]", custom(&[("Topic:a", "Pub", "Allow", "")]), policy("Default", &[("*", "All", "Deny", ""), ("Topic:b", "Pub", "Allow", "")])))]);
    check(&s, &t, &send("a", "alice"), "", Ok(()));
    check(&s, &t, &send("b", "alice"), "", Ok(()));
    check(&s, &t, &send("c", "alice"), "", Err((RefusalKind::NoPermission, "the decision is deny.")));
    // A custom Allow is not outranked by a more specific default Deny.
    let t = tables(&[("alice", &format!("[{},{}]", custom(&[("*", "Pub", "Allow", "")]), policy("Default", &[("Topic:x", "Pub", "Deny", "")])))]);
    check(&s, &t, &send("x", "alice"), "", Ok(()));
}

#[test]
fn super_users_and_users_without_acls() {
    let s = both();
    let t = tables(&[]);
    check(&s, &t, &send("anything", "root"), "", Ok(()));
    check(&s, &t, &send("anything", "bob"), "1.2.3.4", Err((RefusalKind::NoPermission, "User:bob has no permission to access Topic:anything from 1.2.3.4, no matched policies.")));
    // Authorization alone trusts the AccessKey's name (as Apache) but still needs the user.
    let authz = AuthSettings { authentication_enabled: false, ..both() };
    check(&authz, &t, &request(rq::SEND_MESSAGE_V2, &[("b", "T")], "root", "any-password"), "", Ok(()));
    check(&authz, &t, &send("T", "mallory"), "", Err((RefusalKind::UnknownAccessKey, "User:mallory not found.")));
    check(&authz, &t, &send("T", "carol"), "", Err((RefusalKind::UserDisabled, "is disabled")));
    check(&authz, &t, &send("T", ""), "", Err((RefusalKind::NoAccessKey, "Authorization failed")));
    // A code that needs nothing passes authorization; whitelisted codes skip it.
    check(&authz, &t, &request(rq::GET_BROKER_RUNTIME_INFO, &[], "", ""), "", Ok(()));
    let white = AuthSettings { authorization_whitelist: vec![rq::SEND_MESSAGE_V2], ..authz };
    check(&white, &t, &send("T", "bob"), "", Ok(()));
}

#[test]
fn every_resource_of_a_request_is_checked() {
    let s = both();
    let t = tables(&[("alice", &format!("[{}]", custom(&[("Topic:T", "Sub", "Allow", ""), ("Group:g1", "Sub", "Allow", "")])))]);
    let pull = |group: &str| request(rq::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", group), ("queueId", "0")], "alice", PASSWORD);
    check(&s, &t, &pull("g1"), "", Ok(()));
    check(&s, &t, &pull("g2"), "", Err((RefusalKind::NoPermission, "Group:g2")));
    // A retry topic is its group.
    check(&s, &t, &send("%RETRY%g1", "alice"), "", Err((RefusalKind::NoPermission, "Group:pg")));
    check(&s, &t, &request(rq::SEND_MESSAGE_V2, &[("b", "%RETRY%g1")], "alice", PASSWORD), "", Ok(()));
    check(&s, &t, &request(rq::HEART_BEAT, &[], "alice", PASSWORD), "", Err((RefusalKind::BadRequest, "heartbeat")));
}

#[test]
fn whitelists_parse() {
    assert_eq!(parse_whitelist(" 34, 10,,34 "), Ok(vec![34, 10]));
    assert_eq!(parse_whitelist(""), Ok(vec![]));
    assert!(parse_whitelist("34,HEART_BEAT").unwrap_err().contains("`HEART_BEAT` is not a request code"));
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_%-][a-zA-Z0-9_%:.-]{0,20}"
}

fn entry() -> impl Strategy<Value = PolicyEntryInfo> {
    let resource = prop_oneof![Just("*".to_string()), (prop::sample::select(vec!["Topic", "Group", "Cluster", "Namespace"]), name(), 0..3u8).prop_map(|(t, n, p)| match p {
        0 => format!("{t}:{n}"),
        1 => format!("{t}:{}*", n.replace('*', "")),
        _ => format!("{t}:*"),
    })];
    let actions = prop::sample::subsequence(vec!["All", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List"], 1..4);
    let ips = prop::collection::vec(prop_oneof![(any::<[u8; 4]>(), 0..=32u8).prop_map(|(a, p)| format!("{}.{}.{}.{}/{p}", a[0], a[1], a[2], a[3])), any::<[u8; 4]>().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()), any::<u128>().prop_map(|a| std::net::Ipv6Addr::from(a).to_string())], 0..3);
    (resource, actions, ips, prop::bool::ANY).prop_map(|(r, a, ips, deny)| PolicyEntryInfo {
        resource: Some(r),
        actions: Some(a.into_iter().map(String::from).collect()),
        source_ips: (!ips.is_empty()).then_some(ips),
        decision: Some(if deny { "Deny" } else { "Allow" }.into()),
    })
}

proptest! {
    /// Tables built from arbitrary users and ACLs encode and decode to themselves; each
    /// ACL's wire form (AclInfo) and each user's (UserInfo) convert back to the same value.
    #[test]
    fn users_and_acls_round_trip(
        users in prop::collection::btree_map(name(), ("[ -~]{1,30}", prop::bool::ANY, prop::bool::ANY), 1..6),
        acls in prop::collection::vec((0..6usize, prop::collection::vec(entry(), 1..5), prop::collection::vec(entry(), 0..3)), 0..4),
    ) {
        let mut t = AuthTables::default();
        let names: Vec<String> = users.keys().cloned().collect();
        for (n, (password, sup, disabled)) in &users {
            prop_assume!(!password.trim().is_empty());
            let user = User {
                username: n.clone(),
                password: password.clone(),
                user_type: if *sup { UserType::Super } else { UserType::Normal },
                user_status: if *disabled { UserStatus::Disable } else { UserStatus::Enable },
            };
            let info = UserInfo::decode(&info::encode(&UserInfo::of(&user))).unwrap();
            prop_assert_eq!(&info.to_new_user().unwrap(), &user);
            t.create_user(user).unwrap();
        }
        for (who, custom, default) in acls {
            let mut policies = vec![PolicyInfo { policy_type: Some("Custom".into()), entries: Some(custom) }];
            if !default.is_empty() {
                policies.push(PolicyInfo { policy_type: Some("Default".into()), entries: Some(default) });
            }
            let info = AclInfo { subject: Some(format!("User:{}", names[who % names.len()])), policies: Some(policies) };
            let acl = info.to_acl(None).unwrap();
            let again = AclInfo::decode(&info::encode(&AclInfo::of(&acl))).unwrap().to_acl(None).unwrap();
            prop_assert_eq!(&again, &acl);
            t.put_acl(acl).unwrap();
        }
        let decoded = AuthTables::decode(&t.encode()).unwrap();
        prop_assert_eq!(&decoded, &t);
        prop_assert_eq!(decoded.encode(), t.encode());
    }

    /// The decision never panics, whatever the request and the tables.
    #[test]
    fn decisions_never_panic(code in prop::sample::select(vec![rq::SEND_MESSAGE_V2, rq::PULL_MESSAGE, rq::HEART_BEAT, rq::LOCK_BATCH_MQ, rq::GET_CONSUME_STATS, rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 3001, 7]), fields in prop::collection::vec(("[a-zA-Z]{1,12}", "[ -~]{0,12}"), 0..6), body in prop::collection::vec(any::<u8>(), 0..64), user in prop::sample::select(vec!["", "root", "alice", "carol", "x"])) {
        let t = tables(&[("alice", &format!("[{}]", custom(&[("Topic:a*", "Pub", "Allow", "10.0.0.0/8"), ("*", "Sub", "Deny", "")])))]);
        let mut cmd = request(code, &[], "", "");
        for (k, v) in &fields {
            cmd = cmd.with_ext(k, v);
        }
        cmd.body = bytes::Bytes::from(body);
        if !user.is_empty() {
            sign_cmd(&mut cmd, &Credentials::new(user, PASSWORD));
        }
        let _ = super::check(&both(), &t, &cmd, Some("10.1.2.3".parse().unwrap()));
        let _ = super::check(&both(), &t, &cmd, None);
    }
}
