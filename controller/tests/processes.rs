//! Three `ringmq-controller` processes (docs/design/controller.md WP2): a raw remoting
//! client registers a fake broker set (1012 → 1013 → 1003, then 1002 and 1001) and its
//! two brokers heartbeat (904) every controller; `kill -9` of the Raft leader → the
//! others name a new leader (1005) within 3 s with the state intact; the killed node
//! restarts on its files and rejoins; the master's heartbeats stop → the leader elects
//! the slave on its own no earlier than the heartbeat timeout after the last heartbeat,
//! and the slave's fake broker receives NOTIFY_BROKER_ROLE_CHANGED (1008); `kill -9` of
//! every node and a restart → the state comes back from their files.
//!
//! Ports are picked by binding 127.0.0.1:0; every wait polls a condition with a
//! deadline. A failing run prints the tail of each controller's log.

use glommio::net::TcpListener;
use ringmq_client::net::Connection;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as req, response_code as rc};
use ringmq_client::remoting::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader, RegisterBrokerToControllerRequestHeader, SyncStateSet,
};
use ringmq_client::remoting::{FrameLimits, RemotingCommand, SerializeType};
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

const NODES: usize = 3;
/// The fake brokers' `heartbeatTimeoutMills` (short, so the test is quick).
const HB_TIMEOUT_MS: u64 = 1000;
const HB_INTERVAL_MS: u64 = 200;
const RPC_TIMEOUT_MS: u64 = 3000;
const START_DEADLINE_MS: u64 = 20_000;
/// The design's bound for a new leader after `kill -9`.
const FAILOVER_DEADLINE_MS: u64 = 3000;
const ELECTION_DEADLINE_MS: u64 = 15_000;
const POLL_MS: u64 = 25;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("addr").port()
}

struct Cluster {
    dir: tempfile::TempDir,
    addrs: Vec<String>,
    children: Vec<Option<Child>>,
}

impl Cluster {
    fn conf(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("controller-n{i}.conf"))
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("n{i}.log"))
    }

    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let addrs: Vec<String> = (0..NODES).map(|_| format!("127.0.0.1:{}", free_port())).collect();
        let peers: Vec<String> = addrs.iter().enumerate().map(|(i, a)| format!("n{i}-{a}")).collect();
        let mut c = Self { dir, addrs, children: (0..NODES).map(|_| None).collect() };
        for i in 0..NODES {
            let text = format!(
                "# Apache's controller-n{i}.conf keys\ncontrollerDLegerGroup = group1\ncontrollerDLegerPeers = {}\ncontrollerDLegerSelfId = n{i}\ncontrollerStorePath = {}\n",
                peers.join(";"),
                c.dir.path().join(format!("store-n{i}")).display()
            );
            std::fs::write(c.conf(i), text).expect("write conf");
        }
        for i in 0..NODES {
            c.start(i);
        }
        c
    }

    fn start(&mut self, i: usize) {
        // A port whose connections the kill just orphaned may refuse a new listener for
        // a moment (EADDRINUSE until they reach TIME_WAIT): wait until it binds.
        let start = Instant::now();
        while std::net::TcpListener::bind(&self.addrs[i]).is_err() {
            assert!(start.elapsed() < Duration::from_millis(START_DEADLINE_MS), "port {} stays in use", self.addrs[i]);
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log(i)).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ringmq-controller"))
            .arg("-c")
            .arg(self.conf(i))
            .env("RUST_LOG", "info,openraft=warn")
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(log.try_clone().expect("log fd")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn ringmq-controller");
        self.children[i] = Some(child);
    }

    /// `kill -9`.
    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            child.kill().expect("kill");
            let _ = child.wait();
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..NODES {
            self.kill(i);
        }
        if std::thread::panicking() {
            for i in 0..NODES {
                eprintln!("---- n{i} log ({}) ----\n{}", self.log(i).display(), tail(&self.log(i), 60));
            }
        }
    }
}

/// One reconnecting client connection per controller.
struct Clients {
    addrs: Vec<String>,
    conns: RefCell<Vec<Option<Rc<Connection>>>>,
}

impl Clients {
    fn new(addrs: &[String]) -> Rc<Self> {
        Rc::new(Self { addrs: addrs.to_vec(), conns: RefCell::new(vec![None; addrs.len()]) })
    }

    async fn call(&self, i: usize, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
        let timeout = Duration::from_millis(RPC_TIMEOUT_MS);
        let existing = self.conns.borrow()[i].clone().filter(|c| !c.is_closed());
        let conn = match existing {
            Some(c) => c,
            None => {
                let c = Connection::connect(&self.addrs[i], timeout, SerializeType::Json, None).await.map_err(|e| e.to_string())?;
                self.conns.borrow_mut()[i] = Some(c.clone());
                c
            }
        };
        conn.request(cmd, timeout).await.map_err(|e| e.to_string())
    }

    /// Forgets a connection (its process was killed).
    fn drop_conn(&self, i: usize) {
        if let Some(c) = self.conns.borrow_mut()[i].take() {
            c.close();
        }
    }

    /// The node every answering node among `among` names as leader, if they agree.
    async fn leader(&self, among: &[usize]) -> Option<usize> {
        let mut leader = None;
        let mut named = Vec::new();
        for &i in among {
            let meta = self.call(i, RemotingCommand::request(req::CONTROLLER_GET_METADATA_INFO)).await.ok()?;
            if meta.ext("isLeader") == Some("true") {
                leader = Some(i);
            }
            named.push(meta.ext("controllerLeaderId").map(str::to_string));
        }
        let l = leader?;
        named.iter().all(|n| n.as_deref() == Some(format!("n{l}").as_str())).then_some(l)
    }

    /// `cmd` answered by the leader: a leader change between finding it and asking it
    /// (2007, or a connection lost) is retried within the deadline.
    async fn call_leader(&self, among: &[usize], cmd: RemotingCommand, deadline_ms: u64, what: &str) -> RemotingCommand {
        let start = Instant::now();
        loop {
            let left = Duration::from_millis(deadline_ms).saturating_sub(start.elapsed());
            let (l, _) = self.wait_leader(among, u64::try_from(left.as_millis()).unwrap_or(0), what).await;
            match self.call(l, cmd.clone()).await {
                Ok(r) if r.code != rc::CONTROLLER_NOT_LEADER => return r,
                other => eprintln!("{what}: n{l} answered {:?}; retrying", other.map(|r| (r.code, r.remark))),
            }
            assert!(start.elapsed() < Duration::from_millis(deadline_ms), "{what}: no leader answer within {deadline_ms} ms");
            glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    async fn wait_leader(&self, among: &[usize], deadline_ms: u64, what: &str) -> (usize, Duration) {
        let start = Instant::now();
        loop {
            if let Some(l) = self.leader(among).await {
                return (l, start.elapsed());
            }
            assert!(start.elapsed() < Duration::from_millis(deadline_ms), "{what}: no agreed leader among {among:?} within {deadline_ms} ms");
            glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }
}

fn expect(resp: &RemotingCommand, code: i32, what: &str) {
    assert_eq!(resp.code, code, "{what}: code {} remark {:?} ext {:?}", resp.code, resp.remark, resp.ext_fields);
}

struct FakeBroker {
    id: i64,
    addr: String,
    /// Heartbeats go out while set.
    beating: Cell<bool>,
    /// When the last heartbeat was sent (before the send).
    last_sent: Cell<Option<Instant>>,
    leases: Cell<u64>,
    /// (arrival, request) of every 1008 received.
    notified: RefCell<Vec<(Instant, RemotingCommand)>>,
}

impl FakeBroker {
    fn heartbeat(&self) -> RemotingCommand {
        RemotingCommand::request(req::BROKER_HEARTBEAT).with_header(&BrokerHeartbeatRequestHeader {
            cluster_name: "c".into(),
            broker_addr: self.addr.clone(),
            broker_name: "b1".into(),
            broker_id: Some(self.id),
            epoch: Some(1),
            max_offset: Some(100 * self.id),
            confirm_offset: Some(0),
            heartbeat_timeout_mills: Some(HB_TIMEOUT_MS as i64),
            election_priority: None,
        })
    }
}

/// Accepts connections on the fake broker's address and records every 1008.
async fn listen_broker(listener: TcpListener, broker: Rc<FakeBroker>) {
    use futures_lite::AsyncReadExt;
    loop {
        let Ok(mut stream) = listener.accept().await else { return };
        let broker = broker.clone();
        glommio::spawn_local(async move {
            let mut buf = bytes::BytesMut::new();
            let mut chunk = vec![0u8; 4096];
            loop {
                while let Ok(Some(cmd)) = RemotingCommand::decode(&mut buf, &FrameLimits::default()) {
                    if cmd.code == req::NOTIFY_BROKER_ROLE_CHANGED {
                        broker.notified.borrow_mut().push((Instant::now(), cmd));
                    }
                }
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .detach();
    }
}

/// Heartbeats every controller every `HB_INTERVAL_MS` while `beating`.
async fn heartbeat_loop(clients: Rc<Clients>, broker: Rc<FakeBroker>) {
    loop {
        if broker.beating.get() {
            broker.last_sent.set(Some(Instant::now()));
            for i in 0..NODES {
                let clients = clients.clone();
                let broker = broker.clone();
                glommio::spawn_local(async move {
                    if let Ok(resp) = clients.call(i, broker.heartbeat()).await {
                        if resp.ext("leaseGranted") == Some("true") {
                            broker.leases.set(broker.leases.get() + 1);
                        }
                    }
                })
                .detach();
            }
        }
        glommio::timer::sleep(Duration::from_millis(HB_INTERVAL_MS)).await;
    }
}

fn replica_info() -> RemotingCommand {
    RemotingCommand::request(req::CONTROLLER_GET_REPLICA_INFO).with_header(&GetReplicaInfoRequestHeader { broker_name: "b1".into() })
}

#[test]
fn three_controller_processes_fail_over_and_elect_on_silence() {
    let mut cluster = Cluster::new();
    let addrs = cluster.addrs.clone();
    let ex = glommio::LocalExecutorBuilder::default().make().expect("executor");
    ex.run(async {
        let clients = Clients::new(&addrs);
        let all: Vec<usize> = (0..NODES).collect();
        let (first, took) = clients.wait_leader(&all, START_DEADLINE_MS, "start").await;
        eprintln!("initial leader n{first} after {took:?}");

        // Two fake brokers listening for 1008.
        let mut brokers = Vec::new();
        for id in 1..=2i64 {
            let listener = TcpListener::bind("127.0.0.1:0").expect("broker listener");
            let addr = listener.local_addr().expect("addr").to_string();
            let b = Rc::new(FakeBroker {
                id,
                addr,
                beating: Cell::new(false),
                last_sent: Cell::new(None),
                leases: Cell::new(0),
                notified: RefCell::new(Vec::new()),
            });
            glommio::spawn_local(listen_broker(listener, b.clone())).detach();
            brokers.push(b);
        }

        // Registration as ReplicasManager does it: 1012 → 1013 → 1003.
        for b in &brokers {
            let next_req = RemotingCommand::request(req::CONTROLLER_GET_NEXT_BROKER_ID)
                .with_header(&GetNextBrokerIdRequestHeader { cluster_name: "c".into(), broker_name: "b1".into() });
            let next = clients.call_leader(&all, next_req, START_DEADLINE_MS, "1012").await;
            expect(&next, rc::SUCCESS, "1012");
            assert_eq!(next.ext("nextBrokerId"), Some(b.id.to_string().as_str()));
            let apply = RemotingCommand::request(req::CONTROLLER_APPLY_BROKER_ID).with_header(&ApplyBrokerIdRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b1".into(),
                applied_broker_id: b.id,
                register_check_code: format!("{};1", b.addr),
            });
            expect(&clients.call_leader(&all, apply, START_DEADLINE_MS, "1013").await, rc::SUCCESS, "1013");
            let register = RemotingCommand::request(req::CONTROLLER_REGISTER_BROKER).with_header(&RegisterBrokerToControllerRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b1".into(),
                broker_id: b.id,
                broker_address: b.addr.clone(),
                invoke_time: None,
            });
            expect(&clients.call_leader(&all, register, START_DEADLINE_MS, "1003").await, rc::SUCCESS, "1003");
            b.beating.set(true);
            glommio::spawn_local(heartbeat_loop(clients.clone(), b.clone())).detach();
        }
        // Broker 1 elects itself (the set's first election), then adds broker 2 to the
        // SyncStateSet once broker 2 is alive (heartbeating).
        let elect = RemotingCommand::request(req::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b1".into(),
            broker_id: 1,
            designate_elect: false,
            invoke_time: None,
        });
        let elected = clients.call_leader(&all, elect, START_DEADLINE_MS, "1002").await;
        expect(&elected, rc::SUCCESS, "1002");
        assert_eq!(elected.ext("masterEpoch"), Some("1"));
        let alter = RemotingCommand::request(req::CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_header(&AlterSyncStateSetRequestHeader { broker_name: "b1".into(), master_broker_id: 1, master_epoch: 1, invoke_time: None })
            .with_body(SyncStateSet { sync_state_set: vec![1, 2], sync_state_set_epoch: 1 }.encode());
        let start = Instant::now();
        loop {
            let r = clients.call_leader(&all, alter.clone(), START_DEADLINE_MS, "1001").await;
            if r.code == rc::SUCCESS {
                break;
            }
            // 2006 until broker 2's first heartbeat arrived.
            assert!(start.elapsed() < Duration::from_millis(ELECTION_DEADLINE_MS), "1001: {:?} {:?}", r.code, r.remark);
            glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
        }
        // The master's heartbeats to the leader come back with the lease.
        let start = Instant::now();
        while brokers[0].leases.get() == 0 {
            assert!(start.elapsed() < Duration::from_millis(ELECTION_DEADLINE_MS), "no leaseGranted heartbeat answer");
            glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
        }

        // kill -9 the leader: the others agree on a new one within 3 s, state intact.
        let (leader, _) = clients.wait_leader(&all, START_DEADLINE_MS, "before the kill").await;
        cluster.kill(leader);
        clients.drop_conn(leader);
        let others: Vec<usize> = all.iter().copied().filter(|&i| i != leader).collect();
        let (new_leader, took) = clients.wait_leader(&others, FAILOVER_DEADLINE_MS, "after kill -9 of the leader").await;
        eprintln!("new leader n{new_leader} {took:?} after kill -9 of n{leader}");
        let info = clients.call_leader(&others, replica_info(), START_DEADLINE_MS, "1004 after the failover").await;
        expect(&info, rc::SUCCESS, "1004 on the new leader");
        assert_eq!((info.ext("masterBrokerId"), info.ext("masterEpoch")), (Some("1"), Some("1")));
        assert_eq!(SyncStateSet::decode(&info.body).expect("SyncStateSet").sync_state_set, vec![1, 2]);

        // Restart the killed node on its files: it rejoins and follows the new leader.
        cluster.start(leader);
        let (l, took) = clients.wait_leader(&all, START_DEADLINE_MS, "after the restart").await;
        eprintln!("n{leader} rejoined after {took:?}; leader n{l}");

        // The master goes silent: past its timeout the leader elects broker 2 on its own
        // and tells it (1008), never before the timeout after the last heartbeat.
        brokers[0].beating.set(false);
        let silent_from = Instant::now();
        let start = Instant::now();
        let (notified_at, notify) = loop {
            if let Some(n) = brokers[1].notified.borrow().iter().find(|(_, c)| c.ext("masterBrokerId") == Some("2")).cloned() {
                break n;
            }
            assert!(start.elapsed() < Duration::from_millis(ELECTION_DEADLINE_MS), "no 1008 naming broker 2 as master");
            glommio::timer::sleep(Duration::from_millis(POLL_MS)).await;
        };
        let last_hb = brokers[0].last_sent.get().expect("a heartbeat was sent");
        let after = notified_at.duration_since(last_hb);
        eprintln!("1008 to broker 2 {after:?} after the master's last heartbeat (silent from {:?} before)", notified_at.duration_since(silent_from));
        assert!(after >= Duration::from_millis(HB_TIMEOUT_MS), "elected {after:?} after the last heartbeat, before its {HB_TIMEOUT_MS} ms timeout");
        assert_eq!(notify.ext("masterEpoch"), Some("2"));
        assert_eq!(notify.ext("masterAddress"), Some(brokers[1].addr.as_str()));
        assert_eq!(SyncStateSet::decode(&notify.body).expect("SyncStateSet").sync_state_set, vec![2]);
        // The silent master was not notified (it is not alive).
        assert!(brokers[0].notified.borrow().iter().all(|(_, c)| c.ext("masterBrokerId") != Some("2")));
        // The new state and the election history, from whoever leads now.
        let info = clients.call_leader(&all, replica_info(), START_DEADLINE_MS, "1004 after the election").await;
        assert_eq!((info.ext("masterBrokerId"), info.ext("masterEpoch")), (Some("2"), Some("2")));
        let history_req = RemotingCommand::request(ringmq_controller::controller::RINGMQ_CONTROLLER_GET_ELECTION_HISTORY).with_ext("brokerName", "b1");
        let history = clients.call_leader(&all, history_req, START_DEADLINE_MS, "-32010").await;
        expect(&history, rc::SUCCESS, "-32010");
        let h: serde_json::Value = serde_json::from_slice(&history.body).expect("history JSON");
        let last = &h["history"][1];
        assert_eq!((last["trigger"].as_str(), last["new_master"].as_i64(), last["old_master"].as_i64()), (Some("Controller"), Some(2), Some(1)), "{h}");
        // The wire type the admin tool reads decodes the same body.
        let typed = ringmq_client::remoting::controller::ElectionHistoryBody::decode(&history.body).expect("ElectionHistoryBody");
        assert_eq!(typed.history.last().map(|e| (e.trigger.as_str(), e.new_master, e.master_epoch)), Some(("Controller", Some(2), 2)), "{h}");
        // GET_CONTROLLER_CONFIG answers the effective properties on any node (n0 here).
        let conf = clients.call(0, RemotingCommand::request(req::GET_CONTROLLER_CONFIG)).await.expect("1010");
        expect(&conf, rc::SUCCESS, "1010");
        assert!(String::from_utf8_lossy(&conf.body).contains("controllerDLegerGroup=group1"));

        // kill -9 every node and start them again: the state comes back from their files.
        for b in &brokers {
            b.beating.set(false);
        }
        for i in 0..NODES {
            cluster.kill(i);
            clients.drop_conn(i);
        }
        let restarted = Instant::now();
        for i in 0..NODES {
            cluster.start(i);
        }
        let info = clients.call_leader(&all, replica_info(), START_DEADLINE_MS, "1004 after restarting every node").await;
        eprintln!("every node killed and restarted: state served after {:?}", restarted.elapsed());
        expect(&info, rc::SUCCESS, "1004 after the full restart");
        assert_eq!((info.ext("masterEpoch"), SyncStateSet::decode(&info.body).expect("SyncStateSet").sync_state_set), (Some("2"), vec![2]));
    });
}
