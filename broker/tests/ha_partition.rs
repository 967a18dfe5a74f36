//! A network partition between a SYNC_MASTER and its slave (issue text: "cutting the
//! master↔slave link makes SYNC_MASTER sends fail with the right status within the
//! timeout and resume after it heals, with nothing acknowledged that the slave lacks").
//!
//! How: the slave runs in its own network namespace, joined to the host by a veth pair
//! (`Partition`); the master runs on the host and listens on every interface, so the
//! slave reaches its replication ports on the host end's address. The link is cut with
//! `ip link set <host end> down` and healed with `up` (this kernel has no netem, no tc
//! classifiers): while the host end is down its route is gone, and a blackhole route
//! of lower priority keeps the master's packets for the slave from leaving by the
//! default route — they are dropped, as in a real partition, and nothing reaches
//! whatever network the default route leads to.
//!
//! `a_partition_fails_sync_sends_in_time_and_heals` keeps a pipelined send stream
//! (`Load`: `WINDOW` in flight, one every `PACE` at most) on the master throughout, and
//! every send, whatever the link does, is answered within `sync_flush_timeout_ms` +
//! `ANSWER_MARGIN`, SUCCESS, FLUSH_SLAVE_TIMEOUT (12) or SLAVE_NOT_AVAILABLE (11):
//! 1. with the slave attached every send is SUCCESS;
//! 2. a short cut (`SHORT_CUT`, well under `SLAVE_SILENT_MAX_MS`: both ends keep their
//!    connections): every send issued after the cut and answered before the heal is
//!    FLUSH_SLAVE_TIMEOUT; after the heal, within `RESUME_WITHIN`, sends to every queue
//!    are SUCCESS again, then stay SUCCESS;
//! 3. a long cut, until the master gave its silent slave up on both shards (answers
//!    SLAVE_NOT_AVAILABLE to every queue; bound: `SLAVE_SILENT_MAX_MS` +
//!    `DETACH_MARGIN`): every send issued after the cut and answered before the heal is
//!    FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE, never SUCCESS; after the heal the
//!    slave reconnects and sends are SUCCESS again within `RESUME_WITHIN`, then stay so;
//! 4. the slave catches up with the master (same messages at the same queue offsets),
//!    and every send ever answered SUCCESS is on the slave: 0 acknowledged lost.
//!
//! The figures (answer latencies while cut, time to resume after each heal, counts) are
//! printed on one `ha_partition summary:` line.
//!
//! Needs root and network namespaces: without them it says `ha_partition skipped:
//! <why>` and passes. Names and the subnet derive from the process id, so concurrent
//! runs do not collide; `Partition` removes what it made when dropped, panics included.

mod common;

use common::{create_topic, encode, ha_port, pull_header, pull_with, read_log, send_header, send_with, temp_dir, ChildBroker, ChildConfig, Conn, Got, CHILD_START_TIMEOUT};
use ringmq_broker::ha::SLAVE_SILENT_MAX_MS;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::SerializeType;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TOPIC: &str = "HA_PART";
const QUEUES: i32 = 4;
/// The master's `sync_flush_timeout_ms`: small, so a cut shows within a second.
const SYNC_FLUSH_TIMEOUT_MS: u64 = 1_000;
/// What an answer may take beyond the timeout on a loaded 2-core machine.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);
/// A cut both ends sit out on their connections (well under SLAVE_SILENT_MAX_MS).
const SHORT_CUT: Duration = Duration::from_secs(3);
/// How late past SLAVE_SILENT_MAX_MS the master may give a silent slave up: its
/// silence check runs at least once a heartbeat (1 s); the rest is a loaded machine.
const DETACH_MARGIN: Duration = Duration::from_secs(5);
/// Longest from a heal until every queue's sends are SUCCESS again. After a short cut
/// the connections carry on once TCP retransmits; after a long one the slave
/// reconnects (every second once it knows its connection is gone). Measured and
/// printed; this bound is generous.
const RESUME_WITHIN: Duration = Duration::from_secs(30);
/// Longest for the slave to attach at start and to catch up at the end.
const CATCH_UP: Duration = Duration::from_secs(30);
/// Sends in flight at once on the load connection.
const WINDOW: usize = 8;
/// Least time between two sends: a steady stream, not a flood while the master answers
/// SLAVE_NOT_AVAILABLE at once.
const PACE: Duration = Duration::from_millis(5);
/// Answers in each all-SUCCESS phase (before the cut, after the resume).
const STEADY_ANSWERS: usize = 400;
/// Route metric of the blackhole that stands in for the host veth's route while cut.
const BLACKHOLE_METRIC: &str = "4000";

// ---------------------------------------------------------------- the network

/// `ip <args>`: its stderr when it fails.
fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A network namespace joined to the host by a veth pair: `host_ip` on the host end,
/// `ns_ip` inside. What it made (and only that) is removed when it drops.
struct Partition {
    ns: String,
    host_if: String,
    subnet: String,
    host_ip: Ipv4Addr,
    ns_ip: Ipv4Addr,
    made_ns: bool,
    made_link: bool,
    made_blackhole: bool,
}

impl Partition {
    /// `Err(why)` when this machine cannot have one (not root, no namespaces, no veth).
    fn create() -> Result<Self, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root (network namespaces and veth pairs need CAP_NET_ADMIN)".into());
        }
        // Unique per process id (below 819,200; pids that far apart would have to run
        // at once to collide): interface names fit in 15 bytes, and each run has its own
        // /30 in 10.200.0.0 - 10.249.255.255.
        let pid = std::process::id();
        let (b, c, d) = (200 + (pid >> 14) % 50, (pid >> 6) & 0xff, (pid & 0x3f) << 2);
        let mut p = Partition {
            ns: format!("rmq-p{pid}"),
            host_if: format!("rmqh{pid}"),
            subnet: format!("10.{b}.{c}.{d}/30"),
            host_ip: Ipv4Addr::new(10, b as u8, c as u8, d as u8 + 1),
            ns_ip: Ipv4Addr::new(10, b as u8, c as u8, d as u8 + 2),
            made_ns: false,
            made_link: false,
            made_blackhole: false,
        };
        let ns_if = format!("rmqn{pid}");
        let (host_cidr, ns_cidr) = (format!("{}/30", p.host_ip), format!("{}/30", p.ns_ip));
        // A failure from here on drops `p`, which removes what was made so far.
        ip(&["netns", "add", &p.ns])?;
        p.made_ns = true;
        ip(&["link", "add", &p.host_if, "type", "veth", "peer", "name", &ns_if])?;
        p.made_link = true;
        ip(&["link", "set", &ns_if, "netns", &p.ns])?;
        ip(&["addr", "add", &host_cidr, "dev", &p.host_if])?;
        ip(&["link", "set", &p.host_if, "up"])?;
        ip(&["route", "add", "blackhole", &p.subnet, "metric", BLACKHOLE_METRIC])?;
        p.made_blackhole = true;
        ip(&["netns", "exec", &p.ns, "ip", "addr", "add", &ns_cidr, "dev", &ns_if])?;
        ip(&["netns", "exec", &p.ns, "ip", "link", "set", &ns_if, "up"])?;
        ip(&["netns", "exec", &p.ns, "ip", "link", "set", "lo", "up"])?;
        Ok(p)
    }

    fn cut(&self) {
        ip(&["link", "set", &self.host_if, "down"]).expect("cut the link");
        let routes = ip(&["route", "show", &self.subnet]).expect("routes");
        assert!(!routes.contains(&self.host_if), "the veth's route outlived the cut: {routes}");
    }

    fn heal(&self) {
        ip(&["link", "set", &self.host_if, "up"]).expect("heal the link");
        // The kernel puts the address's route back when the link comes up.
        let routes = ip(&["route", "show", &self.subnet, "dev", &self.host_if]).expect("routes");
        if routes.trim().is_empty() {
            ip(&["route", "add", &self.subnet, "dev", &self.host_if, "src", &self.host_ip.to_string()]).expect("route back");
        }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both.
        if self.made_link {
            let _ = ip(&["link", "del", &self.host_if]);
        }
        if self.made_blackhole {
            let _ = ip(&["route", "del", "blackhole", &self.subnet, "metric", BLACKHOLE_METRIC]);
        }
        if self.made_ns {
            let _ = ip(&["netns", "del", &self.ns]);
        }
    }
}

// ---------------------------------------------------------------- brokers

fn store_toml() -> String {
    "flush = \"async\"\nsegment_bytes = 8388608\ndisk_max_used_ratio = 0.999\ndisk_force_clean_ratio = 0.999\ndisk_refuse_ratio = 0.9999\n".into()
}

/// The slave, started as `ChildBroker::start` starts a broker but inside the namespace
/// (`ip netns exec` execs the broker: the child is the broker itself) and advertising
/// `ns_ip`, where the test reaches it.
fn start_slave_in(net: &Partition, dir: &Path, master_ha: u16) -> ChildBroker {
    let config_path = dir.join("slave.toml");
    let text = format!(
        "listen_port = 0\nbroker_ip = \"{}\"\nbroker_name = \"broker-test\"\nshard_count = 2\nstore_root = \"{}\"\n\
         role = \"slave\"\nbroker_id = 1\nha_master_address = \"{}:{master_ha}\"\n\n[store]\n{}\n",
        net.ns_ip,
        dir.join("s").display(),
        net.host_ip,
        store_toml()
    );
    std::fs::write(&config_path, text).expect("slave config");
    let logs = [dir.join("slave.stdout"), dir.join("slave.stderr")];
    let child = Command::new("ip")
        .args(["netns", "exec", &net.ns, env!("CARGO_BIN_EXE_ringmq-broker"), "-c"])
        .arg(&config_path)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("RINGMQ_FAILPOINTS")
        .stdout(std::fs::File::create(&logs[0]).expect("stdout file"))
        .stderr(std::fs::File::create(&logs[1]).expect("stderr file"))
        .spawn()
        .expect("slave process starts");
    // A placeholder address until the log names the real one; the handle kills the
    // process (and shows its log) if anything below fails.
    let mut slave = ChildBroker { child, addr: SocketAddr::from((net.ns_ip, 0)), logs };
    let deadline = Instant::now() + CHILD_START_TIMEOUT;
    loop {
        if let Some(status) = slave.exited() {
            panic!("slave exited at start-up with {status}:\n{}\n{}", read_log(&slave.logs[1]), read_log(&slave.logs[0]));
        }
        let log = read_log(&slave.logs[0]);
        let port = log
            .lines()
            .find(|l| l.contains("broker started"))
            .and_then(|l| l.split("addr=").nth(1))
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.parse::<SocketAddr>().ok());
        if let Some(addr) = port {
            assert_eq!(addr.ip(), net.ns_ip, "the slave advertises its namespace address");
            slave.addr = addr;
            return slave;
        }
        assert!(Instant::now() < deadline, "slave did not listen within {CHILD_START_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------- the send stream

/// One answered send.
#[derive(Debug, Clone, Copy)]
struct Answer {
    id: usize,
    queue: i32,
    code: i32,
    issued: Instant,
    answered: Instant,
}

impl Answer {
    fn latency(&self) -> Duration {
        self.answered - self.issued
    }
}

/// A pipelined send stream on one connection to the master: at most `WINDOW` in flight,
/// one new send every `PACE` at most; send `id` goes to queue `id % QUEUES` with body
/// "partition body {id}" and opaque `id + 1`.
struct Load {
    conn: Conn,
    next_id: usize,
    next_issue: Instant,
    in_flight: HashMap<i32, (usize, Instant)>,
    answers: Vec<Answer>,
}

/// Longest a send may wait for its answer, whatever the link does.
fn answer_bound() -> Duration {
    Duration::from_millis(SYNC_FLUSH_TIMEOUT_MS) + ANSWER_MARGIN
}

impl Load {
    fn new(master: SocketAddr) -> Self {
        Load { conn: Conn::open(master), next_id: 0, next_issue: Instant::now(), in_flight: HashMap::new(), answers: Vec::new() }
    }

    fn issue(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let queue = (id % QUEUES as usize) as i32;
        let opaque = id as i32 + 1;
        let cmd = send_with(send_header(TOPIC, queue), format!("partition body {id}").as_bytes(), opaque, SerializeType::RocketMq);
        let now = Instant::now();
        self.in_flight.insert(opaque, (id, now));
        self.conn.write(&encode(&cmd), 0);
        self.next_issue = now + PACE;
    }

    /// Keeps the stream going (`issuing`) or only collects answers, until `done`; fails
    /// at `deadline` (`what` says what was awaited) or when a send goes unanswered past
    /// `answer_bound()`.
    fn pump(&mut self, issuing: bool, deadline: Instant, what: &str, mut done: impl FnMut(&Self) -> bool) {
        loop {
            if done(self) {
                return;
            }
            let now = Instant::now();
            assert!(now < deadline, "{what}: not by the deadline; last answers: {:?}", &self.answers[self.answers.len().saturating_sub(8)..]);
            if let Some((id, issued)) = self.in_flight.values().min_by_key(|(_, at)| *at) {
                assert!(now - *issued <= answer_bound(), "send {id} unanswered after {:?} (bound {:?}) during {what}", now - *issued, answer_bound());
            }
            let can_issue = issuing && self.in_flight.len() < WINDOW;
            if can_issue && now >= self.next_issue {
                self.issue();
                continue;
            }
            // Wake for the next send, or at least every 50 ms to check the bounds.
            let mut wake = (now + Duration::from_millis(50)).min(deadline);
            if can_issue {
                wake = wake.min(self.next_issue);
            }
            match self.conn.read(wake) {
                Got::Cmd(r) if r.is_response() => {
                    let Some((id, issued)) = self.in_flight.remove(&r.opaque) else { panic!("an answer to no send: opaque {}", r.opaque) };
                    let answer = Answer { id, queue: (id % QUEUES as usize) as i32, code: r.code, issued, answered: Instant::now() };
                    assert!(matches!(r.code, rs::SUCCESS | rs::FLUSH_SLAVE_TIMEOUT | rs::SLAVE_NOT_AVAILABLE), "send {id} answered {} {:?} during {what}", r.code, r.remark);
                    assert!(answer.latency() <= answer_bound(), "send {id} answered {} after {:?} (bound {:?}) during {what}", r.code, answer.latency(), answer_bound());
                    self.answers.push(answer);
                }
                Got::Cmd(_) | Got::Timeout => {}
                Got::Closed => panic!("the master closed the load connection during {what}"),
            }
        }
    }

    /// Answers to sends issued at or after `since`.
    fn issued_since(&self, since: Instant) -> impl Iterator<Item = &Answer> {
        self.answers.iter().filter(move |a| a.issued >= since)
    }
}

// ---------------------------------------------------------------- reading back

/// Each queue's max offset (-1 while the topic is unknown there).
fn max_offsets(addr: SocketAddr) -> Vec<i64> {
    let mut c = Conn::open(addr);
    (0..QUEUES)
        .map(|q| {
            let r = c.call(RemotingCommand::request(rq::GET_MAX_OFFSET).with_ext("topic", TOPIC).with_ext("queueId", q.to_string()).with_opaque(50 + q));
            r.ext("offset").and_then(|o| o.parse().ok()).unwrap_or(-1)
        })
        .collect()
}

/// Body id -> (queue, offset) of everything in the topic.
fn drain(addr: SocketAddr) -> BTreeMap<usize, (i32, i64)> {
    let mut c = Conn::open(addr);
    let mut out = BTreeMap::new();
    let mut opaque = 1_000;
    for q in 0..QUEUES {
        let mut offset = 0;
        loop {
            opaque += 1;
            let mut h = pull_header(TOPIC, q, offset);
            h.max_msg_nums = 32;
            let r = c.call(pull_with(&h, opaque, SerializeType::RocketMq));
            if r.code != rs::SUCCESS {
                assert!(matches!(r.code, rs::PULL_NOT_FOUND | rs::PULL_OFFSET_MOVED), "pull {TOPIC}/{q} at {offset}: {} {:?}", r.code, r.remark);
                break;
            }
            let mut at = 0;
            while at < r.body.len() {
                let v = StoredMessageView::parse_verified(&r.body[at..]).expect("record");
                at += v.total_size();
                let id: usize = String::from_utf8_lossy(v.body()).strip_prefix("partition body ").and_then(|i| i.parse().ok()).expect("our body");
                assert!(out.insert(id, (q, v.queue_offset())).is_none(), "id {id} twice");
                offset = v.queue_offset() + 1;
            }
        }
    }
    out
}

// ---------------------------------------------------------------- the test

/// Slave connections the master accepted so far (both shards).
fn attachments(master: &ChildBroker) -> usize {
    read_log(&master.logs[0]).lines().filter(|l| l.contains("slave attached")).count()
}

/// Until every queue has an answer `code` to a send issued at or after `since`.
fn every_queue(l: &Load, since: Instant, code: i32) -> bool {
    (0..QUEUES).all(|q| l.issued_since(since).any(|a| a.queue == q && a.code == code))
}

/// What one cut showed.
#[derive(Debug)]
struct CutReport {
    lasted: Duration,
    /// Sends issued after the cut and answered before the heal, by status.
    timeouts: usize,
    not_available: usize,
    /// Fastest and slowest FLUSH_SLAVE_TIMEOUT answer.
    timeout_latency: (Duration, Duration),
    /// When the master first answered SLAVE_NOT_AVAILABLE (it gave the slave up).
    detached_after: Option<Duration>,
    /// From the heal until a send to every queue was SUCCESS.
    resumed_after: Duration,
    /// Slave connections the master accepted after the heal.
    reattached: usize,
}

/// Cuts the link, keeps the load going until `cut_over` (failing past `cut_max`), heals
/// it, and keeps the load going until every queue's sends are SUCCESS again and then
/// `STEADY_ANSWERS` more were all SUCCESS.
fn cut_and_heal(load: &mut Load, net: &Partition, master: &ChildBroker, what: &str, cut_max: Duration, cut_over: impl Fn(&Load, Instant) -> bool) -> CutReport {
    net.cut();
    let cut = Instant::now();
    load.pump(true, cut + cut_max, what, |l| cut_over(l, cut));
    // Nothing appended after the cut can have reached the slave before the heal: no
    // send issued after it may be SUCCESS until then (`pump` checked the latencies).
    let during: Vec<Answer> = load.issued_since(cut).copied().collect();
    let acked: Vec<&Answer> = during.iter().filter(|a| a.code == rs::SUCCESS).collect();
    assert!(acked.is_empty(), "{what}: SUCCESS for sends issued after the cut: {acked:?}");
    let timeouts: Vec<Duration> = during.iter().filter(|a| a.code == rs::FLUSH_SLAVE_TIMEOUT).map(Answer::latency).collect();
    assert!(!timeouts.is_empty(), "{what}: no FLUSH_SLAVE_TIMEOUT while cut: {during:?}");
    let not_available: Vec<&Answer> = during.iter().filter(|a| a.code == rs::SLAVE_NOT_AVAILABLE).collect();
    let attached_before = attachments(master);
    net.heal();
    let healed = Instant::now();
    let lasted = healed - cut;
    load.pump(true, healed + RESUME_WITHIN, &format!("resuming after {what}"), |l| every_queue(l, healed, rs::SUCCESS));
    let resumed_after =
        (0..QUEUES).filter_map(|q| load.issued_since(healed).filter(|a| a.queue == q && a.code == rs::SUCCESS).map(|a| a.answered - healed).min()).max().expect("resumed");
    let resumed = Instant::now();
    load.pump(true, resumed + CATCH_UP, &format!("steady sends after {what}"), |l| l.issued_since(resumed).count() >= STEADY_ANSWERS);
    let refused: Vec<&Answer> = load.issued_since(resumed).filter(|a| a.code != rs::SUCCESS).collect();
    assert!(refused.is_empty(), "sends refused after resuming from {what}: {refused:?}");
    CutReport {
        lasted,
        timeouts: timeouts.len(),
        not_available: not_available.len(),
        timeout_latency: (timeouts.iter().copied().min().unwrap_or_default(), timeouts.iter().copied().max().unwrap_or_default()),
        detached_after: not_available.first().map(|a| a.answered - cut),
        resumed_after,
        reattached: attachments(master) - attached_before,
    }
}

#[test]
fn a_partition_fails_sync_sends_in_time_and_heals() {
    let began = Instant::now();
    // Declared first, dropped last: the brokers are gone before their network is.
    let net = match Partition::create() {
        Ok(net) => net,
        Err(why) => {
            println!("ha_partition skipped: {why}");
            return;
        }
    };
    let dir = temp_dir();
    let master_cfg =
        ChildConfig { shard_count: 2, top: format!("role = \"sync_master\"\nsync_flush_timeout_ms = {SYNC_FLUSH_TIMEOUT_MS}\n"), store: store_toml(), env: Vec::new() };
    let master = ChildBroker::start_up(dir.path(), &dir.path().join("m"), &master_cfg);
    assert_eq!(Conn::open(master.addr).call(create_topic(TOPIC, QUEUES)).code, rs::SUCCESS);
    let slave = start_slave_in(&net, dir.path(), ha_port(&master));
    let mut load = Load::new(master.addr);

    // 1. Until both shards' slaves attached, sends may be refused; then all SUCCESS.
    let start = Instant::now();
    load.pump(true, start + CATCH_UP, "the slave attaching", |l| every_queue(l, start, rs::SUCCESS));
    let attached = Instant::now();
    load.pump(true, attached + CATCH_UP, "steady sends before the cuts", |l| l.issued_since(attached).count() >= STEADY_ANSWERS);
    let refused: Vec<&Answer> = load.issued_since(attached).filter(|a| a.code != rs::SUCCESS).collect();
    assert!(refused.is_empty(), "sends refused with the slave attached: {refused:?}");

    // 2. A short cut: the slave stays attached, so the right status is
    // FLUSH_SLAVE_TIMEOUT, never SLAVE_NOT_AVAILABLE.
    let short = cut_and_heal(&mut load, &net, &master, "a short cut", SHORT_CUT + answer_bound(), |_, cut| cut.elapsed() >= SHORT_CUT);
    assert_eq!(short.not_available, 0, "the master gave its slave up {:?} into a {SHORT_CUT:?} cut: {short:?}", short.detached_after);

    // 3. A long cut: the master gives the silent slave up on both shards (SLAVE_NOT_AVAILABLE
    // from then on); after the heal the slave comes back.
    let detach_bound = Duration::from_millis(SLAVE_SILENT_MAX_MS) + DETACH_MARGIN;
    let long = cut_and_heal(&mut load, &net, &master, "a long cut (until the master gives the slave up)", detach_bound, |l, cut| every_queue(l, cut, rs::SLAVE_NOT_AVAILABLE));
    assert!(long.reattached >= 2, "the slave's shards did not reconnect after the long cut: {long:?}");
    load.pump(false, Instant::now() + answer_bound() * 2, "the last answers", |l| l.in_flight.is_empty());

    // 4. The slave holds what the master holds, and every acknowledged send.
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let (m, s) = (max_offsets(master.addr), max_offsets(slave.addr));
        if m == s {
            break;
        }
        assert!(Instant::now() < deadline, "slave did not catch up within {CATCH_UP:?}: master {m:?}, slave {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let on_slave = drain(slave.addr);
    let acked: Vec<usize> = load.answers.iter().filter(|a| a.code == rs::SUCCESS).map(|a| a.id).collect();
    let lost: Vec<usize> = acked.iter().copied().filter(|i| !on_slave.contains_key(i)).collect();
    assert!(lost.is_empty(), "{} acknowledged sends missing on the slave (first {:?})", lost.len(), &lost[..lost.len().min(10)]);
    assert_eq!(on_slave, drain(master.addr), "the slave holds the master's messages at the same queue offsets");
    assert_eq!(on_slave.len(), load.answers.len(), "every send is stored on the master, whatever its status");
    let slowest = load.answers.iter().map(Answer::latency).max().unwrap_or_default();
    println!(
        "ha_partition summary: {} sends, {} SUCCESS, slowest answer {slowest:?} (bound {:?}, timeout {SYNC_FLUSH_TIMEOUT_MS} ms); \
         short cut {:?}: {} FLUSH_SLAVE_TIMEOUT in {:?}..{:?}, 0 SUCCESS, resumed {:?} after the heal ({} reconnects); \
         long cut {:?}: {} FLUSH_SLAVE_TIMEOUT in {:?}..{:?}, {} SLAVE_NOT_AVAILABLE (first {:?} after the cut), 0 SUCCESS, resumed {:?} after the heal ({} reconnects); \
         slave holds {} messages = master's, 0 acknowledged lost; {:?} in all",
        load.answers.len(),
        acked.len(),
        answer_bound(),
        short.lasted,
        short.timeouts,
        short.timeout_latency.0,
        short.timeout_latency.1,
        short.resumed_after,
        short.reattached,
        long.lasted,
        long.timeouts,
        long.timeout_latency.0,
        long.timeout_latency.1,
        long.not_available,
        long.detached_after.expect("the long cut lasts until SLAVE_NOT_AVAILABLE"),
        long.resumed_after,
        long.reattached,
        on_slave.len(),
        began.elapsed()
    );
    slave.stop();
    master.stop();
}
