//! `ringmq-admin dashboard` in a real browser: a NameServer and a 2-shard broker in
//! shard route mode, as the shipped profiles run it (shard-brokers `broker-dash-s0` and
//! `-s1`; fresh store, ephemeral ports), a topic with messages, a consumer group with
//! a committed offset (so its lag is known), a message with a key, a dead letter, and
//! a producer sending at a known rate while the pages are drawn; then headless Chromium
//! (Debian's `chromium`) loads every page and the test asserts on the rendered DOM,
//! each figure against what was sent (rates within `RATE_TOLERANCE` of the producer's
//! own count, totals exactly). The DLQ
//! resend is driven through the API endpoint the page's button calls, and the copy is
//! then found on the original topic.
//!
//! Chromium is installed by `scripts/install-chromium.sh` when missing; where that is
//! impossible (no apt-get, not root) the test prints "skipped: chromium unavailable"
//! and passes. With `RINGMQ_DASHBOARD_SCREENSHOTS=<dir>` it also writes one PNG per
//! page there (relative to the workspace root; the README's are in `results/dashboard/`).
//!
//! `compressed_dead_letter_is_resent_intact` needs no browser: it drives the API alone
//! with a dead letter whose body is compressed.
//!
//! Login: every dashboard here gets `RINGMQ_DASHBOARD_TOKEN`; the API is called with
//! `Authorization: Bearer`, and Chromium opens each page through the one-time login
//! link (`/login?token=..&next=PAGE`), which sets the session cookie and redirects, so
//! the page's own API calls run on the cookie. Asserted too: no session → 401 (API) or
//! a redirect to /login (page); a foreign Host or a cross-origin POST → 403; a login
//! form posted from the dashboard's own origin → a cookie that works; and in Chromium,
//! logged in, an attacker's page (127.0.0.1 on another port, and `localhost`) whose form
//! POSTs the DLQ resend is answered 403 cross-origin and resends nothing;
//! `refuses_to_listen_beyond_loopback_without_a_token` needs no cluster.
//!
//! No fixed ports and no sleeps for ordering: every wait polls with a deadline.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generous: a loaded 2-core machine runs the broker, the dashboard and Chromium.
const WAIT: Duration = Duration::from_secs(30);
/// One Chromium run (start, load, scripts, dump).
const CHROMIUM_RUN: Duration = Duration::from_secs(60);

use common::{admin, dashboard, http_with, ok, DASHBOARD_TOKEN as TOKEN};


/// Chromium's way in: the login link, which sets the session cookie and redirects to
/// `target` (a path and query on the dashboard at `addr`).
fn login_url(addr: &str, target: &str) -> String {
    let next: String = target.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
    format!("http://{addr}/login?token={TOKEN}&next={next}")
}

/// The shipped profiles' mode: each shard a broker of its own.
fn shard_cluster() -> common::Cluster {
    common::cluster_with("broker-dash", |c| c.route_mode = ringmq_broker::config::RouteMode::Shard)
}

/// Shard-brokers of `shard_cluster`.
const SHARD_BROKERS: [&str; 2] = ["broker-dash-s0", "broker-dash-s1"];

/// How far a rate on a page may be from the load's own count.
const RATE_TOLERANCE: f64 = 0.15;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request over a plain socket to the broker (what the CLI has no command for).
fn remoting(broker: &str, cmd: ringmq_client::remoting::command::RemotingCommand) -> ringmq_client::remoting::command::RemotingCommand {
    use ringmq_client::remoting::command::RemotingCommand;
    let mut out = bytes::BytesMut::new();
    cmd.with_opaque(7).encode(&mut out).unwrap();
    let mut s = std::net::TcpStream::connect(broker).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(&out).unwrap();
    let mut buf = bytes::BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(r) = RemotingCommand::decode(&mut buf, &Default::default()).unwrap() {
            return r;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn success(r: &ringmq_client::remoting::command::RemotingCommand) {
    assert_eq!(r.code, ringmq_client::remoting::codes::response_code::SUCCESS, "{:?}", r.remark);
}

/// Dead-letters the message `sent` (sendMessage's JSON) for `group`, as a consumer
/// does: CONSUMER_SEND_MSG_BACK with delay level -1.
fn dead_letter(broker: &str, sent: &serde_json::Value, group: &str, topic: &str) {
    use ringmq_client::remoting::codes::request_code as rq;
    use ringmq_client::remoting::command::RemotingCommand;
    let (_, phys) = ringmq_client::msgid::decode_offset_msg_id(sent["offsetMsgId"].as_str().unwrap()).unwrap();
    success(&remoting(
        broker,
        RemotingCommand::request(rq::CONSUMER_SEND_MSG_BACK)
            .with_ext("offset", phys.to_string())
            .with_ext("group", group)
            .with_ext("delayLevel", "-1")
            .with_ext("originMsgId", sent["msgId"].as_str().unwrap())
            .with_ext("originTopic", topic)
            .with_ext("maxReconsumeTimes", "16"),
    ));
}

/// `(status, body)` of one HTTP request to the dashboard, as a script sends it (Bearer
/// token, no Origin).
fn http(addr: &str, method: &str, target: &str) -> (u16, String) {
    let (status, _, body) = http_with(addr, method, target, &[&format!("Host: {addr}"), &format!("Authorization: Bearer {TOKEN}")], "");
    (status, body)
}

fn api(addr: &str, target: &str) -> serde_json::Value {
    let (status, body) = http(addr, "GET", target);
    assert_eq!(status, 200, "GET {target}: {body}");
    json(&body)
}

/// Chromium on PATH, installing it with the project's script when missing.
fn chromium() -> Option<String> {
    let find = || ["chromium", "chromium-browser"].into_iter().find(|b| Command::new(b).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())).map(String::from);
    if let Some(b) = find() {
        return Some(b);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-chromium.sh");
    match Command::new("bash").arg(&script).status() {
        Ok(s) if s.success() => find(),
        _ => None,
    }
}

struct Browser {
    bin: String,
    profile: tempfile::TempDir,
}

impl Browser {
    /// One headless run: `extra` flags then the URL; stdout (the DOM with --dump-dom).
    fn run(&self, extra: &[String], url: &str) -> String {
        let mut child = Command::new(&self.bin)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check"])
            .args(["--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--mute-audio"])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .arg("--virtual-time-budget=5000")
            .args(extra)
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let mut stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = stdout.read_to_string(&mut out);
            out
        });
        let deadline = Instant::now() + CHROMIUM_RUN;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("chromium did not finish {url} within {CHROMIUM_RUN:?}");
                }
            }
        }
        reader.join().expect("reader")
    }

    /// The rendered DOM of `url` once the page is drawn (or failed) and holds `wanted`.
    fn page(&self, url: &str, wanted: &[&str]) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let dom = self.run(&["--dump-dom".into()], url);
            let drawn = dom.contains(r#"data-state="ready""#) || dom.contains(r#"data-state="error""#);
            if drawn && wanted.iter().all(|w| dom.contains(w)) {
                return dom;
            }
            assert!(Instant::now() < deadline, "{url}: never showed {wanted:?}; last DOM:\n{dom}");
        }
    }

    fn screenshot(&self, url: &str, name: &str) {
        let Some(dir) = std::env::var_os("RINGMQ_DASHBOARD_SCREENSHOTS") else { return };
        // A relative directory is taken from the workspace root (cargo runs tests in
        // the package's directory), so `results/dashboard` means the committed one.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(PathBuf::from(dir));
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        self.run(&[format!("--screenshot={}", path.display()), "--window-size=1280,900".into(), "--hide-scrollbars".into()], url);
        assert!(path.metadata().is_ok_and(|m| m.len() > 0), "no screenshot at {}", path.display());
    }
}

/// An attacker's page on 127.0.0.1 (any port, any name that resolves there): every
/// request gets HTML whose form POSTs to `action` as soon as it loads. Served from a
/// thread of its own until the test process ends.
fn evil_page(action: &str) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the evil page");
    let addr = listener.local_addr().expect("addr");
    let html = format!(r#"<!doctype html><html><body><form id="f" method="POST" action="{action}"><input name="x" value="1"></form><script>document.getElementById("f").submit()</script></body></html>"#);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            // The request head, then the page (the request itself does not matter).
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}", html.len());
        }
    });
    addr
}

/// The HTML of the table row with `id` (up to its `</tr>`).
fn row<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("no row {id} in:\n{dom}"));
    let end = dom[start..].find("</tr>").map(|e| start + e).unwrap_or(dom.len());
    &dom[start..end]
}

/// The text of the first element of `html` whose class list starts with `class`.
fn cell(html: &str, class: &str) -> String {
    let at = html.find(&format!(r#"class="{class}"#)).unwrap_or_else(|| panic!("no .{class} in {html}"));
    let open = at + html[at..].find('>').expect("tag end") + 1;
    let close = open + html[open..].find('<').expect("text end");
    html[open..close].to_string()
}

/// The text of the element with `id`.
fn text_of(dom: &str, id: &str) -> String {
    let at = dom.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("no #{id} in:\n{dom}"));
    let open = at + dom[at..].find('>').expect("tag end") + 1;
    let close = open + dom[open..].find('<').expect("text end");
    dom[open..close].to_string()
}

/// Sends one message every few ms until stopped: the live page's traffic. `history`
/// holds (wall-clock ms, messages acknowledged by then) after each send, the last
/// `LOAD_HISTORY_MAX`, so a rate on a page is compared with the load's own rate over
/// the same window (a loaded machine does not send at one steady rate).
struct Load {
    stop: Arc<AtomicBool>,
    history: Arc<std::sync::Mutex<std::collections::VecDeque<(i64, u64)>>>,
    started: Instant,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Entries of `Load::history` kept: minutes of sends at one per 10 ms.
const LOAD_HISTORY_MAX: usize = 1 << 15;

impl Load {
    /// Messages acknowledged by wall-clock time `at_ms`.
    fn sent_at(&self, at_ms: i64) -> u64 {
        let h = self.history.lock().unwrap();
        h.iter().rev().find(|(t, _)| *t <= at_ms).map(|(_, n)| *n).unwrap_or(0)
    }

    /// Messages per second acknowledged between wall-clock times `from_ms` and `to_ms`.
    fn rate_between(&self, from_ms: i64, to_ms: i64) -> f64 {
        (self.sent_at(to_ms) - self.sent_at(from_ms)) as f64 * 1000.0 / (to_ms - from_ms).max(1) as f64
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn load(namesrv: &str, topic: &str) -> Load {
    use ringmq_client::producer::{Producer, ProducerConfig};
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let (ns, topic, flag, log) = (namesrv.to_string(), topic.to_string(), stop.clone(), history.clone());
    let handle = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("dash-load")
        .spawn(move || async move {
            let producer = Producer::start(ProducerConfig::new(ringmq_client::ClientConfig::new([ns]), "dash-load")).await.expect("producer");
            let (mut n, mut acked) = (0u64, 0u64);
            while !flag.load(Ordering::SeqCst) {
                if producer.send(ringmq_client::Message::new(topic.clone(), format!("load {n}"))).await.is_ok() {
                    acked += 1;
                    let mut h = log.lock().unwrap();
                    if h.len() == LOAD_HISTORY_MAX {
                        h.pop_front();
                    }
                    h.push_back((ringmq_client::msgid::now_ms(), acked));
                }
                n += 1;
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            producer.shutdown().await;
        })
        .expect("load executor");
    let thread = std::thread::spawn(move || {
        let _ = handle.join();
    });
    Load { stop, history, started: Instant::now(), thread: Some(thread) }
}

#[test]
fn every_page_against_a_live_cluster_in_headless_chromium() {
    let started = Instant::now();
    let Some(bin) = chromium() else {
        println!("skipped: chromium unavailable (scripts/install-chromium.sh could not install it)");
        return;
    };
    let browser = Browser { bin, profile: tempfile::tempdir().unwrap() };
    let c = shard_cluster();
    let n = c.namesrv.as_str();
    eventually("both shard-brokers register", || {
        let list = admin(&["clusterList", "-n", n]).1;
        SHARD_BROKERS.iter().all(|b| list.contains(b)).then_some(())
    });
    // 4 queues on each shard-broker: 8 in all.
    ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "DASH_ORDERS", "-r", "4", "-w", "4"]);
    ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "DASH_LOAD", "-r", "2", "-w", "2"]);
    eventually("the topics reach the NameServer", || {
        let list = admin(&["topicList", "-n", n]).1;
        (list.lines().any(|l| l == "DASH_ORDERS") && list.lines().any(|l| l == "DASH_LOAD")).then_some(())
    });
    let begin_ms = ringmq_client::msgid::now_ms() - 1_000;
    let send = |body: &str, key: &str| json(&ok(&["sendMessage", "-n", n, "-t", "DASH_ORDERS", "-p", body, "-k", key, "-c", "TagA", "--json"]));
    let first = send("hello dashboard", "order-42");
    send("second message", "order-43");
    let poison = send("poison pill", "poison-1");
    let id1 = first["offsetMsgId"].as_str().unwrap().to_string();
    // The first message's queue, in its shard-broker's terms, and that shard-broker's address.
    let (b1, q1) = (first["brokerName"].as_str().unwrap().to_string(), first["queueId"].as_i64().unwrap());
    let b1_addr = c._broker.shard_addrs[SHARD_BROKERS.iter().position(|b| *b == b1).unwrap_or_else(|| panic!("a shard-broker: {first}"))].to_string();

    // A group that consumed the first message: offset 1 on its queue, 0 elsewhere.
    use ringmq_client::remoting::codes::request_code as rq;
    use ringmq_client::remoting::command::RemotingCommand;
    success(&remoting(
        &b1_addr,
        RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "DASH_CG")
            .with_ext("topic", "DASH_ORDERS")
            .with_ext("queueId", q1.to_string())
            .with_ext("commitOffset", "1"),
    ));
    // The poison pill, dead-lettered by the group.
    dead_letter(&c.broker, &poison, "DASH_CG", "DASH_ORDERS");
    eventually("the DLQ topic is routed", || admin(&["topicList", "-n", n]).1.lines().any(|l| l == "%DLQ%DASH_CG").then_some(()));

    let dash = dashboard(n);
    let a = dash.addr.as_str();
    let url = |target: &str| login_url(a, target);
    let traffic = load(n, "DASH_LOAD");

    // The API answers what the pages draw; bad requests are 4xx with a sentence.
    let topic = api(a, "/api/topic?t=DASH_ORDERS");
    let queues = topic["queues"].as_array().expect("queues").clone();
    assert_eq!(queues.len(), 8, "each of the 2 × 4 queues once: {topic}");
    let max_of = |qid: i64| queues.iter().find(|q| q["brokerName"] == b1.as_str() && q["queueId"] == qid).and_then(|q| q["maxOffset"].as_i64()).expect("queue");
    let stored: i64 = queues.iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum();
    assert_eq!(stored, 3, "{topic}");
    let group = api(a, "/api/group?g=DASH_CG");
    let lag_total = stored - 1;
    assert_eq!(group["lagTotal"], lag_total, "{group}");
    for (target, status, says) in [
        ("/nope", 404, "no page or API at /nope"),
        ("/api/topic", 400, "missing query parameter t"),
        ("/api/topic?t=bad+topic", 400, "is not a topic name"),
        ("/api/topic?t=NO_SUCH_TOPIC", 404, "does not exist"),
        ("/api/dlq?g=NOBODY", 404, "has no dead letters"),
        ("/api/message/by-id?id=00", 400, "is not an offset message id"),
    ] {
        let (got, body) = http(a, "GET", target);
        assert_eq!((got, json(&body)["error"].as_str().is_some_and(|e| e.contains(says))), (status, true), "{target}: {body}");
    }
    let (got, _) = http(a, "GET", "/api/dlq/resend?id=AB");
    assert_eq!(got, 405);

    // Login: nothing without a session or the token; no change from another origin.
    let host = format!("Host: {a}");
    let (got, _, body) = http_with(a, "GET", "/api/cluster", &[&host], "");
    assert_eq!((got, json(&body)["error"].as_str().is_some_and(|e| e.contains("not logged in"))), (401, true), "{body}");
    let (got, head, _) = http_with(a, "GET", "/cluster", &[&host], "");
    assert!(got == 303 && head.contains("\r\nLocation: /login?next=/cluster"), "{head}");
    let (got, _, _) = http_with(a, "GET", "/api/cluster", &[&host, "Authorization: Bearer wrong-token-0123456789"], "");
    assert_eq!(got, 401);
    let (got, _, body) = http_with(a, "GET", "/api/cluster", &["Host: rebound.example:80", &format!("Authorization: Bearer {TOKEN}")], "");
    assert_eq!((got, body.contains("is not one this dashboard answers to")), (403, true), "{body}");
    let (got, _, body) = http_with(a, "POST", "/login", &[&host, "Origin: http://evil.example", "Content-Type: application/x-www-form-urlencoded"], &format!("token={TOKEN}&next=/dlq"));
    assert_eq!((got, body.contains("cross-origin")), (403, true), "{body}");
    let own = format!("Origin: http://{a}");
    let (got, head, _) = http_with(a, "POST", "/login", &[&host, &own, "Content-Type: application/x-www-form-urlencoded"], &format!("token={TOKEN}&next=/dlq"));
    assert!(got == 303 && head.contains("\r\nLocation: /dlq") && head.contains("HttpOnly; SameSite=Strict; Path=/"), "{head}");
    let cookie = head.lines().find_map(|l| l.strip_prefix("Set-Cookie: ")).and_then(|c| c.split(';').next()).expect("a session cookie").to_string();
    let cookie = format!("Cookie: {cookie}");
    let (got, _, body) = http_with(a, "GET", "/api/cluster", &[&host, &cookie], "");
    assert_eq!(got, 200, "{body}");
    let (got, _, _) = http_with(a, "POST", "/api/dlq/resend?id=AB12", &[&host, &cookie, "Origin: http://evil.example"], "");
    assert_eq!(got, 403, "a cross-site resend is refused before it reaches the cluster");
    let (got, _, _) = http_with(a, "POST", "/api/dlq/resend?id=AB12", &[&host, &cookie], "");
    assert_eq!(got, 403, "a browser change without Origin or Referer is refused");
    let (got, _, body) = http_with(a, "POST", "/login", &[&host, &own], "token=wrong-token-0123456789");
    assert_eq!((got, body.contains("wrong token")), (401, true), "{body}");
    let (got, head, _) = http_with(a, "POST", "/logout", &[&host, &own, &cookie], "");
    assert!(got == 303 && head.contains("Max-Age=0"), "{head}");
    assert_eq!(http_with(a, "GET", "/api/cluster", &[&host, &cookie], "").0, 401, "logged out");

    // Live numbers: wait until the sampler has seen the load (rates and latency), and
    // until the brokers' 10-second rates cover load only.
    eventually("the live page has traffic", || {
        let s = api(a, "/api/stats");
        let pts = s["points"].as_array()?.clone();
        (pts.len() >= 3 && pts.iter().any(|p| p["inRate"].as_f64().unwrap_or(0.0) > 0.0 && p["p99Us"].is_number())).then_some(())
    });
    eventually("the load has run 12 s", || (traffic.started.elapsed() >= Duration::from_secs(12)).then_some(()));
    let within = |what: &str, got: f64, want: f64| assert!((got - want).abs() <= want * RATE_TOLERANCE, "{what}: {got:.1} msg/s on the page, {want:.1} sent");

    // Cluster: one row per shard-broker, each with its own figures (their in-rates add
    // up to the load, not twice it), and no other shard's figures under it.
    let wanted: Vec<String> = SHARD_BROKERS.iter().map(|b| format!("broker-{b}-0")).collect();
    let drawn_from_ms = ringmq_client::msgid::now_ms();
    let dom = browser.page(&url("/cluster"), &wanted.iter().map(String::as_str).collect::<Vec<_>>());
    // The brokers' 10-s rates were read while the page loaded: the load's over the 10 s
    // before the middle of that.
    let drawn_ms = (drawn_from_ms + ringmq_client::msgid::now_ms()) / 2;
    assert!(dom.contains("Cluster DefaultCluster") && dom.contains(&c.broker), "{dom}");
    assert!(!dom.contains("Shards of"), "a shard-broker is one shard: {dom}");
    let mut in_rate = 0.0;
    for id in &wanted {
        let broker_row = row(&dom, id);
        assert!(broker_row.contains("answering"), "{broker_row}");
        // Disk use as a percent and uptime in words, not `0.7010` and Java's `[ 0 days, ... ]`.
        assert!(broker_row.contains(" %") && !broker_row.contains("days,") && broker_row.contains(" s"), "{broker_row}");
        in_rate += cell(broker_row, "in").parse::<f64>().unwrap_or_else(|e| panic!("{e}: {broker_row}"));
    }
    within("Cluster in msg/s (10 s), summed over the shard-brokers", in_rate, traffic.rate_between(drawn_ms - 10_000, drawn_ms));
    browser.screenshot(&url("/cluster"), "cluster");

    // Topics, and one topic's per-queue offsets.
    let dom = browser.page(&url("/topics"), &["topic-DASH_ORDERS", "topic-%DLQ%DASH_CG"]);
    assert!(row(&dom, "topic-DASH_ORDERS").contains(">3<"), "3 messages: {dom}");
    browser.screenshot(&url("/topics"), "topics");
    let dom = browser.page(&url("/topic?t=DASH_ORDERS"), &["Queue offsets", &format!("q-{b1}-{q1}")]);
    assert_eq!(dom.matches(r#"<tr id="q-"#).count(), 8, "each queue once: {dom}");
    let r = row(&dom, &format!("q-{b1}-{q1}"));
    assert_eq!((cell(r, "min"), cell(r, "max")), ("0".to_string(), max_of(q1).to_string()), "{r}");
    assert!(dom.contains(r#"href="/group?g=DASH_CG""#), "the group consumes it: {dom}");
    browser.screenshot(&url("/topic?t=DASH_ORDERS"), "topic");

    // Consumer groups: the lag, in all and on the consumed queue.
    let dom = browser.page(&url("/groups"), &["group-DASH_CG"]);
    assert_eq!(cell(row(&dom, "group-DASH_CG"), "lag"), lag_total.to_string(), "{dom}");
    browser.screenshot(&url("/groups"), "groups");
    let dom = browser.page(&url("/group?g=DASH_CG"), &["lag-total"]);
    assert_eq!(text_of(&dom, "lag-total"), lag_total.to_string(), "{dom}");
    assert_eq!(cell(row(&dom, &format!("lag-DASH_ORDERS-{b1}-{q1}")), "lag"), (max_of(q1) - 1).to_string(), "{dom}");
    assert!(dom.contains("No client online"), "{dom}");
    browser.screenshot(&url("/group?g=DASH_CG"), "group");

    // Live: both charts drawn from several points.
    let dom = browser.page(&url("/live"), &["chart-throughput", "chart-latency", "<polyline"]);
    let points: usize = text_of(&dom, "live-points").parse().unwrap_or(0);
    assert!(points >= 3, "{dom}");
    assert!(dom.contains("Throughput (messages/s, all brokers)") && dom.contains("Send latency"), "{dom}");
    // The last 4 points span 3 sampling intervals: the messages the page says arrived
    // in them against the load's count over the same wall-clock window.
    let live = api(a, "/api/stats");
    let points = live["points"].as_array().unwrap();
    let last = &points[points.len().saturating_sub(4)..];
    assert_eq!(last.len(), 4, "{live}");
    let t = |p: &serde_json::Value| p["t"].as_i64().unwrap();
    let arrived: f64 = last.windows(2).map(|w| w[1]["inRate"].as_f64().unwrap_or(0.0) * (t(&w[1]) - t(&w[0])) as f64 / 1000.0).sum();
    let (from_ms, to_ms) = (t(&last[0]), t(&last[3]));
    within("Live in rate (last 3 intervals, both shard-brokers)", arrived * 1000.0 / (to_ms - from_ms) as f64, traffic.rate_between(from_ms, to_ms));
    browser.screenshot(&url("/live"), "live");

    // Messages by key (with its body), by id (detail), by time.
    let dom = browser.page(&url("/messages?t=DASH_ORDERS&key=order-42"), &["found"]);
    assert_eq!(cell(row(&dom, &format!("msg-{id1}")), "body"), "hello dashboard", "{dom}");
    browser.screenshot(&url("/messages?t=DASH_ORDERS&key=order-42"), "messages");
    let dom = browser.page(&url(&format!("/message?id={id1}&t=DASH_ORDERS")), &["message-fields"]);
    assert!(dom.contains(r#"<pre id="body">hello dashboard</pre>"#), "{dom}");
    assert!(row(&dom, "prop-KEYS").contains("order-42") && row(&dom, "prop-TAGS").contains("TagA"), "{dom}");
    browser.screenshot(&url(&format!("/message?id={id1}&t=DASH_ORDERS")), "message");
    let end_ms = ringmq_client::msgid::now_ms() + 1_000;
    let dom = browser.page(&url(&format!("/messages?t=DASH_ORDERS&begin={begin_ms}&end={end_ms}")), &["found"]);
    for body in ["hello dashboard", "second message", "poison pill"] {
        assert!(dom.contains(body), "{body} in the time search: {dom}");
    }

    // Dead letters: the group's list, then its message with where it came from.
    let dom = browser.page(&url("/dlq"), &["dlq-DASH_CG"]);
    assert!(row(&dom, "dlq-DASH_CG").contains(">1<"), "{dom}");
    let dlq = api(a, "/api/dlq?g=DASH_CG");
    let dead = dlq["messages"][0]["offsetMsgId"].as_str().expect("a dead letter").to_string();
    let dom = browser.page(&url("/dlq?g=DASH_CG"), &["poison pill"]);
    let r = row(&dom, &format!("dlq-{dead}"));
    assert_eq!(cell(r, "origin"), "DASH_ORDERS", "{r}");
    assert!(r.contains(&format!(r#"data-id="{dead}""#)) && r.contains(">Resend<"), "{r}");
    browser.screenshot(&url("/dlq?g=DASH_CG"), "dlq");

    // A cross-site page in the same (logged-in) browser posts the resend form: refused
    // by the Origin check, nothing resent. Served from 127.0.0.1 on another port (same
    // site, so the SameSite=Strict cookie is sent and the Origin check alone decides)
    // and from `localhost` (another site: the cookie is withheld as well).
    for host in ["127.0.0.1", "localhost"] {
        let evil = evil_page(&format!("http://{a}/api/dlq/resend?id={dead}"));
        let dom = browser.run(&["--dump-dom".into()], &format!("http://{host}:{}/", evil.port()));
        assert!(dom.contains("cross-origin request refused"), "a form posted from http://{host}:{} was not refused:\n{dom}", evil.port());
        let now_stored: i64 = api(a, "/api/topic?t=DASH_ORDERS")["queues"].as_array().unwrap().iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum();
        assert_eq!(now_stored, stored, "the cross-site POST from {host} resent nothing");
    }

    // Resend, as the button does: a real send to the original topic.
    let (status, body) = http(a, "POST", &format!("/api/dlq/resend?id={dead}"));
    assert_eq!(status, 200, "{body}");
    let resent = json(&body);
    assert_eq!(resent["topic"], "DASH_ORDERS", "{resent}");
    let copy = ok(&["queryMsgById", "-n", n, "-i", resent["offsetMsgId"].as_str().unwrap()]);
    let field = |name: &str, value: &str| assert!(copy.lines().any(|l| l.starts_with(name) && l.ends_with(&format!(": {value}"))), "{name}: {value} in\n{copy}");
    field("Topic", "DASH_ORDERS");
    field("Message Body", "poison pill");
    field("Keys", "poison-1");
    let stored_after: i64 = api(a, "/api/topic?t=DASH_ORDERS")["queues"].as_array().unwrap().iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum();
    assert_eq!(stored_after, stored + 1);
    let dom = browser.page(&url("/messages?t=DASH_ORDERS&key=poison-1"), &["2 found"]);
    assert!(dom.contains(&format!("msg-{}", resent["offsetMsgId"].as_str().unwrap())), "{dom}");
    // A message that is not a dead letter is refused.
    let (status, body) = http(a, "POST", &format!("/api/dlq/resend?id={id1}"));
    assert_eq!(status, 400, "{body}");
    assert!(json(&body)["error"].as_str().unwrap().contains("not a dead-letter queue"), "{body}");

    // A NameServer nobody answers on: every page says so instead of drawing nothing.
    let dead_ns = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let orphan = dashboard(&dead_ns);
    let dom = browser.page(&login_url(&orphan.addr, "/cluster"), &[r#"data-state="error""#]);
    assert!(dom.contains("no NameServer answered"), "{dom}");
    let dom = browser.page(&login_url(&orphan.addr, "/live"), &["Sampling failed"]);
    assert!(dom.contains("no NameServer answered"), "{dom}");
    println!("dashboard test took {:.1} s", started.elapsed().as_secs_f64());
}

/// A body of at least 4 KiB is stored compressed (the admin's producer compresses as
/// Java's does); dead-lettered, it is listed and shown decompressed, and a resend
/// reaches the original topic as the producer's bytes, compressed again with flags to
/// match (a copy of the stored bytes without them would be garbage to consumers).
#[test]
fn compressed_dead_letter_is_resent_intact() {
    let c = common::cluster("broker-dash-zip");
    let n = c.namesrv.as_str();
    eventually("the broker registers", || admin(&["clusterList", "-n", n]).1.contains("broker-dash-zip").then_some(()));
    ok(&["updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "ZIP_ORDERS", "-r", "2", "-w", "2"]);
    eventually("the topic reaches the NameServer", || admin(&["topicList", "-n", n]).1.lines().any(|l| l == "ZIP_ORDERS").then_some(()));
    let original: String = (0..300).map(|i| format!("order {i} of a long compressible dead letter; ")).collect();
    assert!(original.len() > 4096);
    let sent = json(&ok(&["sendMessage", "-n", n, "-t", "ZIP_ORDERS", "-p", &original, "-k", "zip-1", "--json"]));
    // check(message detail as queryMsgById prints it, offset id): the original body, zlib-compressed as stored.
    let check = |id: &str| {
        let detail = ok(&["queryMsgById", "-n", n, "-i", id]);
        let field = |name: &str| detail.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.trim_start().strip_prefix(": "))).map(str::to_string);
        assert_eq!(field("Message Body").as_deref(), Some(original.as_str()), "{detail}");
        let flag: i32 = field("System Flag").and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("{detail}"));
        assert_eq!(flag & 0x701, 0x301, "stored with COMPRESSED_FLAG and zlib: {detail}");
        let compression = field("Body Compression").unwrap_or_else(|| panic!("{detail}"));
        assert!(compression.starts_with("zlib, ") && compression.ends_with(&format!(", {} bytes decompressed", original.len())), "{compression}");
    };
    check(sent["offsetMsgId"].as_str().unwrap());

    dead_letter(&c.broker, &sent, "ZIP_CG", "ZIP_ORDERS");
    eventually("the DLQ topic is routed", || admin(&["topicList", "-n", n]).1.lines().any(|l| l == "%DLQ%ZIP_CG").then_some(()));

    let dash = dashboard(n);
    let a = dash.addr.as_str();
    let dlq = api(a, "/api/dlq?g=ZIP_CG");
    let dead = &dlq["messages"][0];
    assert_eq!(dead["bodyCompression"], "zlib", "{dlq}");
    assert!(original.starts_with(dead["body"].as_str().unwrap()) && dead["bodyTruncated"] == true, "listed decompressed: {dlq}");
    let dead_id = dead["offsetMsgId"].as_str().unwrap();
    check(dead_id);

    let (status, body) = http(a, "POST", &format!("/api/dlq/resend?id={dead_id}"));
    assert_eq!(status, 200, "{body}");
    let resent = json(&body);
    assert_eq!(resent["topic"], "ZIP_ORDERS", "{resent}");
    check(resent["offsetMsgId"].as_str().unwrap());
    let copy = api(a, &format!("/api/message/by-id?id={}", resent["offsetMsgId"].as_str().unwrap()));
    assert_eq!(copy["message"]["body"], original.as_str(), "{copy}");
    assert_eq!(copy["message"]["keys"], "zip-1", "{copy}");
}

/// Off loopback without a token the dashboard refuses to start, saying why.
#[test]
fn refuses_to_listen_beyond_loopback_without_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq-admin"))
        .args(["dashboard", "-n", "127.0.0.1:1", "--listen", "0.0.0.0:0"])
        .env_remove("RINGMQ_DASHBOARD_TOKEN")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("not a loopback address, and has no token"), "{stderr}");
    assert!(out.stdout.is_empty(), "it never listened: {}", String::from_utf8_lossy(&out.stdout));
}
