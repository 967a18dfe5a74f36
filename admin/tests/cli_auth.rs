//! `ringmq-admin`'s user and ACL commands (createUser … listAcl) end to end against a
//! broker with `authenticationEnabled` and `authorizationEnabled` (a NameServer and a
//! 2-shard broker in this process), signed as the Super user `initAuthenticationUser`
//! made: the users and ACLs they make decide the CLI's own sends; without a user, or as a
//! Normal user, administration is refused with the broker's remark and exit code 1.

mod common;

use common::{admin, ok};
use std::time::{Duration, Instant};

const ROOT: (&str, &str) = ("rocketmq", "rootPassword1");
const ALICE: (&str, &str) = ("alice", "alicePassword1");

fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `args` with the NameServer and, unless `who` is empty, the credentials appended.
fn with(args: &[&str], n: &str, who: (&str, &str)) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.extend(["-n".to_string(), n.to_string()]);
    if !who.0.is_empty() {
        v.extend(["--accessKey".to_string(), who.0.to_string(), "--secretKey".to_string(), who.1.to_string()]);
    }
    v
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn users_and_acls_are_managed_by_the_cli_and_decide_its_requests() {
    let c = common::cluster_with("broker-auth", |config| {
        config.authentication_enabled = true;
        config.authorization_enabled = true;
        config.init_authentication_user = Some(format!(r#"{{"username":"{}","password":"{}"}}"#, ROOT.0, ROOT.1));
        config.inner_client_authentication_credentials = Some(format!(r#"{{"accessKey":"{}","secretKey":"{}"}}"#, ROOT.0, ROOT.1));
    });
    let (n, b) = (c.namesrv.as_str(), c.broker.as_str());
    let as_root = |args: &[&str]| ok(&refs(&with(args, n, ROOT)));
    // check(args, who, expected exit code, what the output must say)
    let check = |args: &[&str], who: (&str, &str), code: i32, says: &str| {
        let (got, out, err) = admin(&refs(&with(args, n, who)));
        assert_eq!(got, code, "{args:?} as {}: {err}{out}", who.0);
        assert!(format!("{out}{err}").contains(says), "{args:?} as {} says {says:?}: {err}{out}", who.0);
    };
    eventually("the broker registers", || admin(&refs(&with(&["clusterList"], n, ROOT))).1.contains("broker-auth"));

    // Users: only the Super user administers them; -c reaches every master.
    check(&["createUser", "-c", "DefaultCluster", "-u", ALICE.0, "-p", ALICE.1], ("", ""), 1, "username cannot be null.");
    check(&["createUser", "-c", "DefaultCluster", "-u", ALICE.0, "-p", ALICE.1], ROOT, 0, &format!("create user to {b} success."));
    check(&["createUser", "-b", b, "-u", ALICE.0, "-p", ALICE.1], ROOT, 1, "The user is existed");
    check(&["createUser", "-b", b, "-u", "mallory", "-p", "malloryPw1", "-t", "Super"], ALICE, 1, "User:alice is not a Super user");
    check(&["createUser", "-u", "x", "-p", "y"], ROOT, 1, "give exactly one of -b (a broker) or -c (a cluster)");
    let users = as_root(&["getUser", "-b", b, "-u", ALICE.0]);
    assert!(users.lines().nth(1).is_some_and(|l| l.split_whitespace().collect::<Vec<_>>() == [ALICE.0, ALICE.1, "Normal", "enable"]), "{users}");
    let listed = as_root(&["listUser", "-b", b, "-f", "ali", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&listed).expect("listUser --json is JSON");
    assert_eq!(doc.as_array().map(|a| a.iter().map(|u| u["username"].as_str().unwrap_or("").to_string()).collect::<Vec<_>>()), Some(vec![ALICE.0.to_string()]), "{listed}");
    assert_eq!(as_root(&["listUser", "-c", "DefaultCluster"]).lines().count(), 3, "header, alice and the Super user");

    // ACLs: alice may send to one topic, is denied another.
    for topic in ["CLI_AUTH_T", "CLI_AUTH_DENIED"] {
        as_root(&["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]);
    }
    check(&["createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:CLI_AUTH_T, Group:CLI_G", "-a", "Pub,Sub", "-d", "Allow"], ROOT, 0, &format!("create acl to {b} success."));
    check(&["updateAcl", "-b", b, "-s", "User:alice", "-r", "Topic:CLI_AUTH_DENIED", "-a", "Pub", "-i", "127.0.0.1,10.0.0.0/8", "-d", "Deny"], ROOT, 0, "update acl to");
    check(&["createAcl", "-b", b, "-s", "User:alice", "-r", "Topic:x", "-a", "Publish", "-d", "Allow"], ROOT, 1, "action `Publish` is unknown");
    let acl = as_root(&["getAcl", "-b", b, "-s", "User:alice"]);
    let rows: Vec<Vec<&str>> = acl.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [
            vec!["User:alice", "Custom", "Topic:CLI_AUTH_T", "Pub,Sub", "Allow"],
            vec!["User:alice", "Custom", "Group:CLI_G", "Pub,Sub", "Allow"],
            vec!["User:alice", "Custom", "Topic:CLI_AUTH_DENIED", "Pub", "127.0.0.1,10.0.0.0/8", "Deny"],
        ],
        "{acl}"
    );
    let denied_only = as_root(&["listAcl", "-b", b, "-s", "alice", "-r", "DENIED"]);
    assert_eq!(denied_only.lines().count(), 2, "header and the one matching entry: {denied_only}");
    eventually("the topics are routed", || {
        let topics = admin(&refs(&with(&["topicList"], n, ROOT))).1;
        topics.lines().any(|l| l == "CLI_AUTH_T") && topics.lines().any(|l| l == "CLI_AUTH_DENIED")
    });
    let sent = ok(&refs(&with(&["sendMessage", "-t", "CLI_AUTH_T", "-p", "as alice"], n, ALICE)));
    assert!(sent.contains("SEND_OK"), "{sent}");
    check(&["sendMessage", "-t", "CLI_AUTH_DENIED", "-p", "as alice"], ALICE, 1, "the decision is deny.");
    check(&["sendMessage", "-t", "CLI_AUTH_T", "-p", "wrong password"], (ALICE.0, "guess"), 1, "check signature failed.");

    // A disabled user is refused; deleting the denied entry and then the user.
    check(&["updateUser", "-b", b, "-u", ALICE.0, "-s", "disable"], ROOT, 0, "update user to");
    check(&["sendMessage", "-t", "CLI_AUTH_T", "-p", "disabled"], ALICE, 1, "User:alice is disabled.");
    check(&["updateUser", "-b", b, "-u", ALICE.0, "-s", "enable"], ROOT, 0, "update user to");
    check(&["deleteAcl", "-b", b, "-s", "User:alice", "-r", "Topic:CLI_AUTH_DENIED"], ROOT, 0, &format!("delete acl to {b} success."));
    assert!(!as_root(&["getAcl", "-b", b, "-s", "User:alice"]).contains("CLI_AUTH_DENIED"));
    check(&["sendMessage", "-t", "CLI_AUTH_DENIED", "-p", "as alice"], ALICE, 1, "no matched policies.");
    check(&["deleteUser", "-c", "DefaultCluster", "-u", ALICE.0], ROOT, 0, "delete user to");
    check(&["getUser", "-b", b, "-u", ALICE.0], ROOT, 1, "user alice not found");
    check(&["getAcl", "-b", b, "-s", "User:alice"], ROOT, 1, "The subject is not exist.");
}
