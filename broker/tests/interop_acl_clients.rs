//! The plain ACL (`aclEnable=true`, issue 26) against two more independent RocketMQ 4
//! clients, each a real process with its own signing code: Alibaba's Node.js client
//! ali-ons (npm, `tests/node/ali_ons_acl.js`; `Channel.beforeRequest` signs) and Apache
//! rocketmq-client-cpp (`ClientRPCHook::signCommand` with `SessionCredentials`; the
//! `librocketmq.so` that the pinned rocketmq-client-python wheel ships, driven by
//! `tests/python/cpp_client_acl.py`).
//!
//! What it proves, for each client: both sign as Apache's `AclClientRPCHook` checks
//! (HmacSHA1 over the sorted ext values, `OnsChannel` among them, then the body): with
//! the right keys the client publishes and consumes every message; a send to a topic its
//! account has DENY on, and a send with a wrong secret, are answered NO_PERMISSION (16)
//! with the broker's remark, seen on the wire and stored nowhere (max offsets).
//!
//! The clients are installed by `scripts/install-acl-clients.sh` under
//! `CARGO_TARGET_TMPDIR` (pinned by `tests/node/package-lock.json` and
//! `tests/python/requirements.txt`); where that is impossible the test prints
//! "skipped: <client> unavailable" and passes.
//!
//! Invariants: no fixed ports (the `common_interop` cluster binds port 0, its proxies
//! record every client ↔ broker frame); every wait is bounded (`WAIT`, `CHILD_DEADLINE`);
//! each test has its own cluster and ACL file.

mod common_interop;

use common_interop::{raw_call, BrokerPath, Cluster, QUEUES};
use ringmq_client::remoting::acl::{sign, Credentials, SIGNATURE_BYTES};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on any single wait for the cluster (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);
/// Bound a client process puts on its own run (it prints what it has, then exits 2).
const CHILD_DEADLINE: Duration = Duration::from_secs(40);
/// Past this the test kills a client process that did not exit by itself.
const CHILD_KILL_AFTER: Duration = Duration::from_secs(60);
/// Messages each client publishes and must consume back.
const COUNT: usize = 8;

const ADMIN: (&str, &str) = ("adminAccount", "adminSecret1");
const CLIENT: (&str, &str) = ("clientAccount", "clientSecret1");

/// One client under test: how it is installed, run, and what it names its topics.
#[derive(Clone, Copy)]
enum Client {
    AliOns,
    Cpp,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::AliOns => "ali-ons",
            Client::Cpp => "rocketmq-client-cpp",
        }
    }

    /// `install-acl-clients.sh`'s argument, also the group stem.
    fn key(self) -> &'static str {
        match self {
            Client::AliOns => "node",
            Client::Cpp => "cpp",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Client::AliOns => "Node",
            Client::Cpp => "Cpp",
        }
    }

    fn topic(self) -> String {
        format!("Acl{}Topic", self.label())
    }

    fn denied_topic(self) -> String {
        format!("Acl{}Denied", self.label())
    }

    fn group(self) -> String {
        format!("{}-acl", self.key())
    }
}

/// Where the clients are installed (kept between runs: the script's stamp skips them).
fn install_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("acl-clients")
}

/// Installs `client` with the project's script; `None` (and why) where that is impossible.
fn install(client: Client) -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-acl-clients.sh");
    let out = Command::new("bash").arg(&script).arg(client.key()).arg(install_root()).output();
    match out {
        Ok(o) if o.status.success() => {
            print!("{}", String::from_utf8_lossy(&o.stdout));
            Some(install_root())
        }
        Ok(o) => {
            println!(
                "skipped: {} unavailable (scripts/install-acl-clients.sh could not install it): {}",
                client.name(),
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            println!("skipped: {} unavailable (bash: {e})", client.name());
            None
        }
    }
}

fn acl_yaml(client: Client) -> String {
    format!(
        "globalWhiteRemoteAddresses: []\n\
         accounts:\n\
         \x20 - accessKey: {}\n    secretKey: {}\n    admin: true\n\
         \x20 - accessKey: {}\n    secretKey: {}\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - {}=PUB|SUB\n",
        ADMIN.0,
        ADMIN.1,
        CLIENT.0,
        CLIENT.1,
        client.topic()
    )
}

/// A cluster with `aclEnable` whose clients reach the broker through the recording proxy.
fn acl_cluster(dir: &Path, client: Client) -> Cluster {
    let file = dir.join("plain_acl.yml");
    std::fs::write(&file, acl_yaml(client)).expect("write plain_acl.yml");
    Cluster::start(BrokerPath::Proxied, move |c| {
        c.acl_enable = true;
        c.plain_acl_file = Some(file);
        c.inner_client_authentication_credentials = Some(format!(r#"{{"accessKey":"{}","secretKey":"{}"}}"#, ADMIN.0, ADMIN.1));
        common_interop::ignore_disk_watermarks(c);
    })
}

fn admin_call(cluster: &Cluster, mut cmd: RemotingCommand) -> RemotingCommand {
    sign(&mut cmd, &Credentials::new(ADMIN.0, ADMIN.1));
    raw_call(cluster.broker_addr(), cmd)
}

/// Creates `topic` as the admin account; the NameServer routes it once the broker answers.
fn create_topic(cluster: &Cluster, topic: &str) {
    let r = admin_call(cluster, common_interop::create_topic_cmd(topic));
    assert_eq!(r.code, rs::SUCCESS, "create {topic}: {:?}", r.remark);
    assert!(cluster.namesrv_routes(topic), "{topic} routed right after its creation");
}

/// The sum of `topic`'s queues' max offsets: how many messages it stores.
fn stored(cluster: &Cluster, topic: &str) -> i64 {
    (0..QUEUES)
        .map(|q| {
            let r = admin_call(cluster, RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", topic).with_ext("queueId", q.to_string()));
            assert_eq!(r.code, rs::SUCCESS, "max offset of {topic}:{q}: {:?}", r.remark);
            r.ext("offset").and_then(|o| o.parse::<i64>().ok()).unwrap_or_else(|| panic!("max offset of {topic}:{q}: {:?}", r.ext_fields))
        })
        .sum()
}

/// One run of the client's script in `mode`; its `RESULT` JSON. A run that printed none,
/// or exited non-zero, fails the test with its output.
fn run_client(client: Client, root: &Path, mode: &str, topic: &str, secret: &str, group: &str, cluster: &Cluster) -> Value {
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("client HOME");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut cmd = match client {
        Client::AliOns => {
            let mut c = Command::new("node");
            c.arg(tests.join("node/ali_ons_acl.js")).env("NODE_PATH", root.join("node/node_modules"));
            c
        }
        Client::Cpp => {
            let mut c = Command::new(root.join("venv/bin/python"));
            c.arg(tests.join("python/cpp_client_acl.py"));
            c
        }
    };
    cmd.arg(mode)
        .env("HOME", home.path())
        .env("NAMESRV", cluster.namesrv_addr())
        .env("ACCESS_KEY", CLIENT.0)
        .env("SECRET_KEY", secret)
        .env("TOPIC", topic)
        .env("GROUP", group)
        .env("COUNT", COUNT.to_string())
        .env("DEADLINE_MS", CHILD_DEADLINE.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{} starts: {e}", client.name()));
    // Drain both pipes on threads, so a chatty client never blocks on a full pipe.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + CHILD_KILL_AFTER;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {mode} ran past {CHILD_KILL_AFTER:?}; stderr:\n{}", client.name(), stderr.join().unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    let what = format!("{} {mode} {topic} (exit {status}); stdout:\n{stdout}\nstderr:\n{stderr}", client.name());
    let line = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")).unwrap_or_else(|| panic!("no RESULT line: {what}"));
    assert!(status.success(), "{what}");
    println!("{} {mode} {topic}: {line}", client.name());
    serde_json::from_str(line).unwrap_or_else(|e| panic!("RESULT is not JSON ({e}): {what}"))
}

fn strings(v: &Value, what: &str) -> Vec<String> {
    v.as_array().unwrap_or_else(|| panic!("{what}: {v}")).iter().map(|s| s.as_str().unwrap_or_else(|| panic!("{what}: {s}")).to_string()).collect()
}

/// The client's sends of `topic` as the broker proxy saw them: (request ext, answer code,
/// answer remark). Both SEND_MESSAGE (its topic in `topic`) and SEND_MESSAGE_V2 (`b`).
fn sends(cluster: &Cluster, topic: &str) -> Vec<(std::collections::BTreeMap<String, String>, i32, String)> {
    let proxy = cluster.broker_proxy();
    proxy
        .exchanges(rq::SEND_MESSAGE)
        .into_iter()
        .chain(proxy.exchanges(rq::SEND_MESSAGE_V2))
        .filter(|(req, _)| req.ext("b").or(req.ext("topic")) == Some(topic))
        .map(|(req, answer)| {
            let answer = answer.unwrap_or_else(|| panic!("a send of {topic} with no answer: {:?}", req.ext));
            (req.ext, answer.code, answer.remark.unwrap_or_default())
        })
        .collect()
}

/// Every signed request the client sent carries the account, a 28-character signature
/// and (both clients add it, and sign it) `OnsChannel`.
fn assert_signed_like_apache(client: Client, ext: &std::collections::BTreeMap<String, String>) {
    assert_eq!(ext.get("AccessKey").map(String::as_str), Some(CLIENT.0), "{}: {ext:?}", client.name());
    assert_eq!(ext.get("Signature").map(String::len), Some(SIGNATURE_BYTES), "{}: {ext:?}", client.name());
    assert_eq!(ext.get("OnsChannel").map(String::as_str), Some("ALIYUN"), "{}: {ext:?}", client.name());
}

/// The whole scenario for one client (see the file's doc).
fn signs_as_apache_and_is_checked(client: Client) {
    let Some(root) = install(client) else { return };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let cluster = acl_cluster(dir.path(), client);
    let (topic, denied) = (client.topic(), client.denied_topic());
    create_topic(&cluster, &topic);
    create_topic(&cluster, &denied);
    // ali-ons looks up its group's retry topic before its first heartbeat and stops on
    // an unknown route (the C++ client carries on): an operator creates it, as here.
    create_topic(&cluster, &format!("%RETRY%CG-{}", client.group()));

    // The right keys: every message published and consumed back.
    let r = run_client(client, &root, "pubsub", &topic, CLIENT.1, &client.group(), &cluster);
    let sent: BTreeSet<String> =
        r["sent"].as_array().unwrap_or_else(|| panic!("{r}")).iter().map(|s| s["body"].as_str().unwrap_or_else(|| panic!("{r}")).to_string()).collect();
    assert_eq!(sent.len(), COUNT, "{r}");
    let received = strings(&r["received"], "received");
    assert_eq!(received.iter().cloned().collect::<BTreeSet<_>>(), sent, "{r}");
    assert_eq!(stored(&cluster, &topic), COUNT as i64);
    let ok = sends(&cluster, &topic);
    assert_eq!(ok.len(), COUNT, "one answered request per message: {ok:?}");
    for (ext, code, remark) in &ok {
        assert_signed_like_apache(client, ext);
        assert_eq!(*code, rs::SUCCESS, "{remark}");
    }
    // Its consumer's pulls were checked too (signed, answered, not refused).
    let pulls = cluster.broker_proxy().exchanges(rq::PULL_MESSAGE);
    assert!(!pulls.is_empty(), "the consumer pulled through the proxy");
    for (req, answer) in &pulls {
        assert_signed_like_apache(client, &req.ext);
        if let Some(a) = answer {
            assert_ne!(a.code, rs::NO_PERMISSION, "a signed pull refused: {:?}", a.remark);
        }
    }

    // A topic the account has DENY on: refused, nothing stored.
    let r = run_client(client, &root, "refused", &denied, CLIENT.1, &format!("{}-deny", client.group()), &cluster);
    let deny_remark = format!("No default permission for topic:{denied} (needs PUB, accessKey={} has DENY)", CLIENT.0);
    assert!(r.get("sent").is_none(), "a send to {denied} went through: {r}");
    if let Client::AliOns = client {
        assert_eq!(r["code"], rs::NO_PERMISSION, "{r}");
        assert!(r["message"].as_str().is_some_and(|m| m.contains(&deny_remark)), "{r}");
    }
    assert!(r["sendError"].is_string(), "{r}");
    let refused = sends(&cluster, &denied);
    assert!(!refused.is_empty(), "the client tried {denied}");
    for (ext, code, remark) in &refused {
        assert_signed_like_apache(client, ext);
        assert_eq!(*code, rs::NO_PERMISSION, "{remark}");
        assert!(remark.contains(&deny_remark), "{remark:?} lacks {deny_remark:?}");
    }
    assert_eq!(stored(&cluster, &denied), 0);

    // A wrong secret on the allowed topic: refused, nothing more stored.
    let r = run_client(client, &root, "refused", &topic, "not-the-secret", &format!("{}-wrong", client.group()), &cluster);
    let sig_remark = format!("Check signature failed for accessKey={}", CLIENT.0);
    assert!(r.get("sent").is_none(), "a send with a wrong secret went through: {r}");
    if let Client::AliOns = client {
        assert_eq!(r["code"], rs::NO_PERMISSION, "{r}");
        assert!(r["message"].as_str().is_some_and(|m| m.contains(&sig_remark)), "{r}");
    }
    assert!(r["sendError"].is_string(), "{r}");
    let all = sends(&cluster, &topic);
    let wrong: Vec<_> = all.iter().filter(|(_, code, _)| *code != rs::SUCCESS).collect();
    assert!(!wrong.is_empty(), "the client tried {topic} with the wrong secret");
    for (ext, code, remark) in &wrong {
        assert_signed_like_apache(client, ext);
        assert_eq!(*code, rs::NO_PERMISSION, "{remark}");
        assert!(remark.contains(&sig_remark), "{remark:?} lacks {sig_remark:?}");
    }
    assert_eq!(all.len() - wrong.len(), COUNT, "only the right keys' sends succeeded");
    assert_eq!(stored(&cluster, &topic), COUNT as i64);
}

#[test]
fn ali_ons_signs_as_apache_and_is_checked() {
    signs_as_apache_and_is_checked(Client::AliOns);
}

#[test]
fn cpp_client_session_credentials_sign_as_apache_and_are_checked() {
    signs_as_apache_and_is_checked(Client::Cpp);
}
