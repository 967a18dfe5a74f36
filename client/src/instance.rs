//! The per-thread client instance (RocketMQ's `MQClientInstance`): the NameServer list,
//! topic routes, one connection per address, heartbeats to every broker, and the
//! dispatch of requests brokers push to us (NOTIFY_CONSUMER_IDS_CHANGED to the
//! consumer's rebalance, CHECK_TRANSACTION_STATE to the transactional producer of the
//! half message's group, PUSH_REPLY_MESSAGE_TO_CLIENT to the request waiting for that
//! reply). Every producer and consumer owns one.
//!
//! Invariants:
//! - one connection per address at a time; a closed one is replaced on the next call;
//! - a route is refreshed every `route_refresh_interval_ms` for every topic in use and
//!   kept (not dropped) when every NameServer fails, so a NameServer outage does not stop
//!   traffic to brokers that are up;
//! - NameServers are tried in turn starting from the last one that answered: a stopped
//!   NameServer costs one failed call, not one per request;
//! - background tasks stop when `shutdown` is called; after that every call fails with
//!   `ShutDown`;
//! - registered consumers and transaction checkers are held weakly: the instance never
//!   keeps one alive, and a request for a dropped one is ignored (the broker asks again).

use crate::error::ClientError;
use crate::net::{Connection, ServerRequestHandler};
use crate::message::user::MessageExt;
use crate::remoting::admin::{ConsumeMessageDirectlyResult, ConsumerRunningInfo, ResetOffsetBody};
use crate::remoting::bodies::MessageQueue;
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::SerializeType;
use crate::remoting::headers::GetRouteInfoRequestHeader;
use crate::remoting::heartbeat::{ConsumerData, HeartbeatData, ProducerData};
use crate::remoting::route::TopicRouteData;
use crate::transaction::{decode_check_request, TransactionCheck};
use glommio::task::JoinHandle;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;

/// Settings shared by producers and consumers.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// NameServers, "host:port"; several run side by side with no sync between them.
    pub namesrv_addrs: Vec<String>,
    /// Distinguishes clients in one process; default `<pid>#<n>`, unique per instance.
    pub instance_name: Option<String>,
    /// The address brokers see us as; default: the local address that routes to the
    /// first NameServer.
    pub client_ip: Option<IpAddr>,
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub route_refresh_interval_ms: u64,
    /// Header encoding of our requests (brokers answer in kind).
    pub serialize_type: SerializeType,
    /// Access key / secret key (and optional security token) every request is signed
    /// with, to brokers and NameServers alike, as Java's `AclClientRPCHook` (a broker
    /// with `aclEnable=true` checks them); `None` sends none.
    pub credentials: Option<crate::remoting::acl::Credentials>,
    /// TLS to NameServers and brokers alike (Apache's `useTLS` and `tls.client.*`):
    /// `enable`, the CA the servers' certificates are checked against, an optional
    /// client certificate and key, the name to check (`crate::net::tls`). Off by default.
    pub tls: crate::net::tls::TlsClientSettings,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            namesrv_addrs: Vec::new(),
            instance_name: None,
            client_ip: None,
            request_timeout_ms: 3_000,
            connect_timeout_ms: 3_000,
            heartbeat_interval_ms: 30_000,
            route_refresh_interval_ms: 30_000,
            serialize_type: SerializeType::Json,
            credentials: None,
            tls: crate::net::tls::TlsClientSettings::default(),
        }
    }
}

impl ClientConfig {
    pub fn new(namesrv_addrs: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { namesrv_addrs: namesrv_addrs.into_iter().map(Into::into).collect(), ..Self::default() }
    }

    pub fn validate(&self) -> Result<(), ClientError> {
        if self.namesrv_addrs.is_empty() {
            return Err(ClientError::Config("namesrv_addrs is empty: give at least one NameServer".into()));
        }
        for (name, v) in [
            ("request_timeout_ms", self.request_timeout_ms),
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("route_refresh_interval_ms", self.route_refresh_interval_ms),
        ] {
            if v == 0 {
                return Err(ClientError::Config(format!("{name} must be > 0")));
            }
        }
        self.tls.check().map_err(|e| ClientError::Config(e.to_string()))?;
        Ok(())
    }
}

/// A topic's route, digested: queues in a stable order and broker addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicRoute {
    pub data: TopicRouteData,
    /// Writable queues of brokers with a master, sorted by (broker name, queue id).
    pub write_queues: Vec<MessageQueue>,
    /// Readable queues of brokers with a master, sorted.
    pub read_queues: Vec<MessageQueue>,
    /// Broker name → master address.
    pub master_addrs: BTreeMap<String, String>,
    /// Broker name → its slaves' addresses, lowest broker id first (reads fall back to
    /// them while the master is absent or unreachable).
    pub slave_addrs: BTreeMap<String, Vec<String>>,
}

impl TopicRoute {
    pub fn from_data(topic: &str, data: TopicRouteData) -> Self {
        let master_addrs: BTreeMap<String, String> = data
            .broker_datas
            .iter()
            .filter_map(|b| b.master_addr().map(|a| (b.broker_name.clone(), a.to_string())))
            .collect();
        let slave_addrs: BTreeMap<String, Vec<String>> = data
            .broker_datas
            .iter()
            .map(|b| (b.broker_name.clone(), b.broker_addrs.iter().filter(|(id, _)| **id != 0).map(|(_, a)| a.clone()).collect::<Vec<_>>()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let mut write_queues = Vec::new();
        let mut read_queues = Vec::new();
        for q in &data.queue_datas {
            let has_master = master_addrs.contains_key(&q.broker_name);
            // Queues of a broker whose master is gone stay readable through a slave.
            if !has_master && !slave_addrs.contains_key(&q.broker_name) {
                continue;
            }
            let mq = |queue_id| MessageQueue { broker_name: q.broker_name.clone(), queue_id, topic: topic.to_string() };
            if q.perm & PERM_WRITE != 0 && has_master {
                write_queues.extend((0..q.write_queue_nums.max(0)).map(mq));
            }
            if q.perm & PERM_READ != 0 {
                read_queues.extend((0..q.read_queue_nums.max(0)).map(mq));
            }
        }
        write_queues.sort();
        write_queues.dedup();
        read_queues.sort();
        read_queues.dedup();
        Self { data, write_queues, read_queues, master_addrs, slave_addrs }
    }
}

/// What a registered consumer tells the instance and hears from it.
pub trait ConsumerHook {
    fn consumer_data(&self) -> ConsumerData;
    /// The broker says the group's membership changed: rebalance soon.
    fn membership_changed(&self);
    /// GET_CONSUMER_RUNNING_INFO: what this consumer runs (mqadmin consumerStatus).
    fn running_info(&self) -> ConsumerRunningInfo {
        let data = self.consumer_data();
        let mut info = ConsumerRunningInfo { subscription_set: data.subscription_data_set, ..Default::default() };
        info.properties.insert("consumerGroup".into(), data.group_name);
        info
    }
    /// RESET_CONSUMER_CLIENT_OFFSET: consume `topic`'s queues from these offsets. Called
    /// on the connection's reader task: must not block; work in a spawned task.
    fn reset_offsets(self: Rc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) {
        tracing::warn!(topic, queues = offsets.len(), "offset reset ignored: this consumer keeps no offsets to reset");
    }
    /// CONSUME_MESSAGE_DIRECTLY: hands `msg` to the listener now and says what it
    /// answered (an operator's test delivery; nothing is committed).
    fn consume_directly(&self, msg: MessageExt) -> ConsumeMessageDirectlyResult {
        let _ = msg;
        ConsumeMessageDirectlyResult {
            auto_commit: true,
            consume_result: None,
            order: false,
            remark: Some("this consumer has no listener to call".into()),
            spent_time_mills: 0,
        }
    }
}

/// What a transactional producer registers to answer a broker's CHECK_TRANSACTION_STATE
/// for its group.
pub trait TransactionCheckHook {
    /// The broker at `addr` (the connection the check came on) asks about a half
    /// message. Called on the connection's reader task: must not block; answer from a
    /// spawned task.
    fn check_transaction_state(self: Rc<Self>, addr: &str, check: TransactionCheck);
}

static INSTANCE_SEQ: AtomicU32 = AtomicU32::new(0);

pub struct ClientInstance {
    pub config: ClientConfig,
    pub client_id: String,
    pub client_ip: IpAddr,
    connections: RefCell<HashMap<String, Rc<Connection>>>,
    routes: RefCell<HashMap<String, Rc<TopicRoute>>>,
    /// Topics whose routes the refresher keeps current.
    topics_in_use: RefCell<HashSet<String>>,
    namesrv_next: Cell<usize>,
    producer_groups: RefCell<HashSet<String>>,
    consumers: RefCell<BTreeMap<String, Weak<dyn ConsumerHook>>>,
    /// Producer group → its transactional producer's check hook.
    transaction_checkers: RefCell<BTreeMap<String, Weak<dyn TransactionCheckHook>>>,
    /// Requests of this instance's producer waiting for replies (`request.rs`): the
    /// broker pushes a reply to the connection of the client id named in the request.
    pub requests: Rc<crate::request::PendingRequests>,
    stopped: Cell<bool>,
    tasks: RefCell<Vec<JoinHandle<()>>>,
    /// Addresses a connection attempt failed to, and when (ms since the instance
    /// started); reads avoid such a master for `UNREACHABLE_AVOID_MS`. At most one
    /// entry per broker address of the cached routes.
    unreachable: RefCell<HashMap<String, Instant>>,
    /// TLS for every connection when `config.tls.enable` (files loaded at start).
    tls: Option<crate::net::tls::ClientTls>,
}

/// How long reads avoid a master that could not be reached (then it is tried again).
pub const UNREACHABLE_AVOID_MS: u64 = 5_000;

fn detect_ip(namesrv: Option<&String>) -> IpAddr {
    let probe = || -> Option<IpAddr> {
        let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.connect(namesrv?.as_str()).ok()?;
        Some(socket.local_addr().ok()?.ip())
    };
    probe().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

impl ClientInstance {
    /// Creates the instance and starts its route refresher and heartbeat tasks. Must be
    /// called on a glommio executor.
    pub fn start(config: ClientConfig) -> Result<Rc<Self>, ClientError> {
        config.validate()?;
        let instance_name = config
            .instance_name
            .clone()
            .unwrap_or_else(|| format!("{}#{}", std::process::id(), INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed)));
        let client_ip = config.client_ip.unwrap_or_else(|| detect_ip(config.namesrv_addrs.first()));
        let tls = crate::net::tls::ClientTls::start(&config.tls).map_err(|e| ClientError::Config(e.to_string()))?;
        let instance = Rc::new(Self {
            client_id: format!("{client_ip}@{instance_name}"),
            client_ip,
            config,
            connections: RefCell::new(HashMap::new()),
            routes: RefCell::new(HashMap::new()),
            topics_in_use: RefCell::new(HashSet::new()),
            namesrv_next: Cell::new(0),
            producer_groups: RefCell::new(HashSet::new()),
            consumers: RefCell::new(BTreeMap::new()),
            transaction_checkers: RefCell::new(BTreeMap::new()),
            requests: Rc::default(),
            stopped: Cell::new(false),
            tasks: RefCell::new(Vec::new()),
            unreachable: RefCell::new(HashMap::new()),
            tls,
        });
        let weak = Rc::downgrade(&instance);
        let refresh_every = Duration::from_millis(instance.config.route_refresh_interval_ms);
        let refresher = glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(refresh_every).await;
                let Some(me) = weak.upgrade() else { break };
                if me.stopped.get() {
                    break;
                }
                me.refresh_routes().await;
            }
        })
        .detach();
        let weak = Rc::downgrade(&instance);
        let heartbeat_every = Duration::from_millis(instance.config.heartbeat_interval_ms);
        let heartbeat = glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(heartbeat_every).await;
                let Some(me) = weak.upgrade() else { break };
                if me.stopped.get() {
                    break;
                }
                me.heartbeat_all().await;
            }
        })
        .detach();
        instance.tasks.borrow_mut().extend([refresher, heartbeat]);
        Ok(instance)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    fn check_running(&self) -> Result<(), ClientError> {
        if self.stopped.get() {
            Err(ClientError::ShutDown)
        } else {
            Ok(())
        }
    }

    fn server_request_handler(self: &Rc<Self>) -> ServerRequestHandler {
        let weak = Rc::downgrade(self);
        Rc::new(move |addr: &str, cmd: RemotingCommand| {
            let me = weak.upgrade()?;
            match cmd.code {
                rq::NOTIFY_CONSUMER_IDS_CHANGED => {
                    if let Some(group) = cmd.ext("consumerGroup") {
                        let hook = me.consumers.borrow().get(group).and_then(Weak::upgrade);
                        if let Some(hook) = hook {
                            tracing::debug!(group, "consumer ids changed: rebalancing");
                            hook.membership_changed();
                        }
                    }
                    None
                }
                rq::RESET_CONSUMER_CLIENT_OFFSET => {
                    me.dispatch_reset_offset(addr, &cmd);
                    (!cmd.is_oneway()).then(|| cmd.create_response(rs::SUCCESS, None))
                }
                rq::GET_CONSUMER_RUNNING_INFO | rq::CONSUME_MESSAGE_DIRECTLY => Some(me.answer_admin_call(&cmd)),
                rq::PUSH_REPLY_MESSAGE_TO_CLIENT => Some(crate::request::answer_pushed_reply(&me.requests, &cmd)),
                rq::CHECK_TRANSACTION_STATE => {
                    me.dispatch_transaction_check(addr, &cmd);
                    // Brokers send checks oneway (nothing to answer); one sent as a request
                    // gets an acknowledgement rather than "code not supported".
                    (!cmd.is_oneway()).then(|| cmd.create_response(rs::SUCCESS, None))
                }
                _ => None,
            }
        })
    }

    fn consumer_hook(&self, group: &str) -> Option<Rc<dyn ConsumerHook>> {
        self.consumers.borrow().get(group).and_then(Weak::upgrade)
    }

    /// RESET_CONSUMER_CLIENT_OFFSET (oneway, from INVOKE_BROKER_TO_RESET_OFFSET): the
    /// group's consumer here restarts the topic's queues at the given offsets.
    fn dispatch_reset_offset(&self, addr: &str, cmd: &RemotingCommand) {
        let (Some(group), Some(topic)) = (cmd.ext("group"), cmd.ext("topic")) else {
            tracing::warn!(addr, "RESET_CONSUMER_CLIENT_OFFSET without group or topic: dropped");
            return;
        };
        let table = match ResetOffsetBody::decode(&cmd.body) {
            Ok(b) => b.offset_table,
            Err(e) => {
                tracing::warn!(addr, group, topic, error = %e, "RESET_CONSUMER_CLIENT_OFFSET body does not decode: dropped");
                return;
            }
        };
        match self.consumer_hook(group) {
            Some(hook) => {
                tracing::info!(addr, group, topic, queues = table.len(), "broker asks to reset consumer offsets");
                hook.reset_offsets(topic.to_string(), table);
            }
            None => tracing::debug!(addr, group, "RESET_CONSUMER_CLIENT_OFFSET for a group with no consumer here: ignored"),
        }
    }

    /// GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY: answered by the group's
    /// consumer here (Java's `ClientRemotingProcessor`, same remarks).
    fn answer_admin_call(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let group = cmd.ext("consumerGroup").unwrap_or_default();
        let Some(hook) = self.consumer_hook(group) else {
            return cmd.create_response(rs::SYSTEM_ERROR, Some(&format!("The Consumer Group <{group}> not exist in this consumer")));
        };
        let body = if cmd.code == rq::GET_CONSUMER_RUNNING_INFO {
            let mut info = hook.running_info();
            info.properties.insert("PROP_NAMESERVER_ADDR".into(), self.config.namesrv_addrs.join(";"));
            info.properties.insert("PROP_CLIENT_VERSION".into(), format!("RingMQ {}", env!("CARGO_PKG_VERSION")));
            info.encode()
        } else {
            let broker_name = cmd.ext("brokerName").unwrap_or_default();
            let msg = match crate::message::user::decode_messages(&cmd.body, broker_name) {
                Ok(mut v) if v.len() == 1 => v.remove(0),
                Ok(v) => return cmd.create_response(rs::SYSTEM_ERROR, Some(&format!("expected one message in the body, found {}", v.len()))),
                Err(e) => return cmd.create_response(rs::SYSTEM_ERROR, Some(&format!("message does not decode: {e}"))),
            };
            hook.consume_directly(msg).encode()
        };
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = body.into();
        r
    }

    /// Hands a CHECK_TRANSACTION_STATE to the transactional producer of the half
    /// message's group (`PGROUP`). A check that cannot be decoded or has no producer here
    /// is dropped with a log line: the broker checks again later (Java does the same).
    fn dispatch_transaction_check(&self, addr: &str, cmd: &RemotingCommand) {
        let check = match decode_check_request(cmd) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(addr, error = %e, "CHECK_TRANSACTION_STATE dropped");
                return;
            }
        };
        let hook = self.transaction_checkers.borrow().get(&check.group).and_then(Weak::upgrade);
        match hook {
            Some(hook) => hook.check_transaction_state(addr, check),
            None => tracing::debug!(addr, group = %check.group, "CHECK_TRANSACTION_STATE for a group with no transactional producer here: ignored"),
        }
    }

    /// The open connection to `addr`, connecting if needed.
    pub async fn connection(self: &Rc<Self>, addr: &str) -> Result<Rc<Connection>, ClientError> {
        self.check_running()?;
        if let Some(c) = self.connections.borrow().get(addr) {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let timeout = Duration::from_millis(self.config.connect_timeout_ms);
        let conn = match Connection::connect_with(addr, timeout, self.config.serialize_type, Some(self.server_request_handler()), self.tls.as_ref()).await {
            Ok(c) => {
                c.set_credentials(self.config.credentials.clone().map(Rc::new));
                self.unreachable.borrow_mut().remove(addr);
                c
            }
            Err(e) => {
                let mut u = self.unreachable.borrow_mut();
                // Bounded: only addresses of brokers this client talks to.
                if u.len() < 4096 {
                    u.insert(addr.to_string(), Instant::now());
                }
                return Err(e);
            }
        };
        // Another task may have connected meanwhile: keep the first open one.
        let mut conns = self.connections.borrow_mut();
        if let Some(existing) = conns.get(addr) {
            if !existing.is_closed() {
                return Ok(existing.clone());
            }
        }
        conns.insert(addr.to_string(), conn.clone());
        Ok(conn)
    }

    /// One request to `addr` with the default timeout.
    pub async fn invoke(self: &Rc<Self>, addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        self.invoke_with_timeout(addr, cmd, self.request_timeout()).await
    }

    pub async fn invoke_with_timeout(self: &Rc<Self>, addr: &str, cmd: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientError> {
        let conn = self.connection(addr).await?;
        conn.request(cmd, timeout).await
    }

    pub async fn invoke_oneway(self: &Rc<Self>, addr: &str, cmd: RemotingCommand) -> Result<(), ClientError> {
        let conn = self.connection(addr).await?;
        conn.oneway(cmd).await
    }

    /// One request to the NameServers, trying each in turn from the last that answered.
    pub async fn invoke_namesrv(self: &Rc<Self>, cmd: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        let addrs = &self.config.namesrv_addrs;
        let start = self.namesrv_next.get();
        for i in 0..addrs.len() {
            let index = (start + i) % addrs.len();
            match self.invoke(&addrs[index], cmd.clone()).await {
                Ok(r) => {
                    self.namesrv_next.set(index);
                    return Ok(r);
                }
                Err(ClientError::ShutDown) => return Err(ClientError::ShutDown),
                Err(e) => tracing::debug!(addr = %addrs[index], error = %e, "NameServer did not answer"),
            }
        }
        Err(ClientError::NameServerUnreachable { addrs: addrs.clone() })
    }

    /// Fetches `topic`'s route from the NameServers and caches it.
    pub async fn fetch_route(self: &Rc<Self>, topic: &str) -> Result<Rc<TopicRoute>, ClientError> {
        let header = GetRouteInfoRequestHeader { topic: topic.to_string(), accept_standard_json_only: None };
        let r = self.invoke_namesrv(RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_header(&header)).await?;
        if r.code == rs::TOPIC_NOT_EXIST {
            self.routes.borrow_mut().remove(topic);
            return Err(ClientError::NoRoute { topic: topic.to_string() });
        }
        if r.code != rs::SUCCESS {
            return Err(ClientError::from_response("namesrv", r.code, r.remark.as_deref()));
        }
        let data = TopicRouteData::decode(&r.body)?;
        let route = Rc::new(TopicRoute::from_data(topic, data));
        let changed = self.routes.borrow().get(topic).map(|old| old.data != route.data).unwrap_or(true);
        self.routes.borrow_mut().insert(topic.to_string(), route.clone());
        self.topics_in_use.borrow_mut().insert(topic.to_string());
        if changed {
            tracing::debug!(topic, brokers = ?route.master_addrs, "route updated");
            // New brokers must learn about our groups before we talk to them.
            self.heartbeat_all().await;
        }
        Ok(route)
    }

    /// The cached route, fetching it when absent.
    pub async fn route(self: &Rc<Self>, topic: &str) -> Result<Rc<TopicRoute>, ClientError> {
        if let Some(r) = self.routes.borrow().get(topic) {
            return Ok(r.clone());
        }
        self.fetch_route(topic).await
    }

    pub fn cached_route(&self, topic: &str) -> Option<Rc<TopicRoute>> {
        self.routes.borrow().get(topic).cloned()
    }

    /// Refreshes every route in use; a failure keeps the old route.
    pub async fn refresh_routes(self: &Rc<Self>) {
        let topics: Vec<String> = self.topics_in_use.borrow().iter().cloned().collect();
        for topic in topics {
            if let Err(e) = self.fetch_route(&topic).await {
                tracing::debug!(topic, error = %e, "route refresh failed; keeping the cached route");
            }
        }
    }

    /// The master address of `broker_name` from any cached route.
    pub fn broker_addr(&self, broker_name: &str) -> Option<String> {
        self.routes.borrow().values().find_map(|r| r.master_addrs.get(broker_name).cloned())
    }

    /// Where to read a broker's queues (pulls, offsets): its master, or — while the
    /// master is absent from the route or could not be reached lately — its first slave
    /// (RocketMQ's consumers read from a slave when the master is down).
    pub fn read_broker_addr(&self, broker_name: &str) -> Option<String> {
        let master = self.broker_addr(broker_name);
        let avoid = |a: &String| self.unreachable.borrow().get(a).is_some_and(|t| t.elapsed() < Duration::from_millis(UNREACHABLE_AVOID_MS));
        match master {
            Some(m) if !avoid(&m) => Some(m),
            master => {
                let slave = self.routes.borrow().values().find_map(|r| r.slave_addrs.get(broker_name).and_then(|v| v.first().cloned()));
                slave.or(master)
            }
        }
    }

    /// Every master address of every cached route.
    pub fn all_broker_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self.routes.borrow().values().flat_map(|r| r.master_addrs.values().cloned()).collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    pub fn register_producer(&self, group: &str) {
        self.producer_groups.borrow_mut().insert(group.to_string());
    }

    pub fn register_consumer(&self, group: &str, hook: Weak<dyn ConsumerHook>) {
        self.consumers.borrow_mut().insert(group.to_string(), hook);
    }

    /// Routes CHECK_TRANSACTION_STATE for `group` to `hook` (replacing any earlier one).
    pub fn register_transaction_checker(&self, group: &str, hook: Weak<dyn TransactionCheckHook>) {
        self.transaction_checkers.borrow_mut().insert(group.to_string(), hook);
    }

    pub fn use_topic(&self, topic: &str) {
        self.topics_in_use.borrow_mut().insert(topic.to_string());
    }

    pub fn heartbeat_data(&self) -> HeartbeatData {
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: self.producer_groups.borrow().iter().map(|g| ProducerData { group_name: g.clone() }).collect(),
            consumer_data_set: self.consumers.borrow().values().filter_map(Weak::upgrade).map(|h| h.consumer_data()).collect(),
        }
    }

    /// HEART_BEAT to every known broker; failures are logged (the next round retries).
    pub async fn heartbeat_all(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        let body = self.heartbeat_data().encode();
        for addr in self.all_broker_addrs() {
            let cmd = RemotingCommand::request(rq::HEART_BEAT).with_body(body.clone());
            match self.invoke(&addr, cmd).await {
                Ok(r) if r.code == rs::SUCCESS => {}
                Ok(r) => tracing::debug!(addr, code = r.code, remark = ?r.remark, "heartbeat refused"),
                Err(e) => tracing::debug!(addr, error = %e, "heartbeat failed"),
            }
        }
    }

    /// Leaves every group on every broker and closes all connections.
    pub async fn shutdown(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        let producer_groups: Vec<String> = self.producer_groups.borrow().iter().cloned().collect();
        let consumer_groups: Vec<String> = self.consumers.borrow().keys().cloned().collect();
        for addr in self.all_broker_addrs() {
            let unregister = |producer: Option<&String>, consumer: Option<&String>| {
                let mut cmd = RemotingCommand::request(rq::UNREGISTER_CLIENT).with_ext("clientID", self.client_id.clone());
                if let Some(g) = producer {
                    cmd = cmd.with_ext("producerGroup", g.clone());
                }
                if let Some(g) = consumer {
                    cmd = cmd.with_ext("consumerGroup", g.clone());
                }
                cmd
            };
            let cmds: Vec<RemotingCommand> = producer_groups
                .iter()
                .map(|g| unregister(Some(g), None))
                .chain(consumer_groups.iter().map(|g| unregister(None, Some(g))))
                .collect();
            for cmd in cmds {
                if let Err(e) = self.invoke_with_timeout(&addr, cmd, Duration::from_millis(1_000)).await {
                    tracing::debug!(addr, error = %e, "unregister failed");
                }
            }
        }
        self.stopped.set(true);
        for task in self.tasks.borrow_mut().drain(..) {
            task.cancel();
        }
        for (_, conn) in self.connections.borrow_mut().drain() {
            conn.close();
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::route::{BrokerData, QueueData};

    fn broker(name: &str, addr: Option<&str>) -> BrokerData {
        BrokerData {
            broker_addrs: addr.map(|a| BTreeMap::from([(0, a.to_string())])).unwrap_or_default(),
            broker_name: name.into(),
            cluster: "c".into(),
            ..Default::default()
        }
    }

    fn queue(name: &str, read: i32, write: i32, perm: i32) -> QueueData {
        QueueData { broker_name: name.into(), perm, read_queue_nums: read, write_queue_nums: write, topic_sys_flag: 0 }
    }

    fn check(data: TopicRouteData, expected_write: &[(&str, i32)], expected_read: &[(&str, i32)]) {
        let route = TopicRoute::from_data("t", data);
        let pairs = |qs: &[MessageQueue]| qs.iter().map(|q| (q.broker_name.clone(), q.queue_id)).collect::<Vec<_>>();
        let want = |xs: &[(&str, i32)]| xs.iter().map(|(b, q)| (b.to_string(), *q)).collect::<Vec<_>>();
        assert_eq!(pairs(&route.write_queues), want(expected_write), "write queues");
        assert_eq!(pairs(&route.read_queues), want(expected_read), "read queues");
    }

    #[test]
    fn routes_digest_to_sorted_queues_of_live_masters() {
        let rw = PERM_READ | PERM_WRITE;
        check(
            TopicRouteData { broker_datas: vec![broker("b", Some("2")), broker("a", Some("1"))], queue_datas: vec![queue("b", 2, 1, rw), queue("a", 1, 2, rw)], ..Default::default() },
            &[("a", 0), ("a", 1), ("b", 0)],
            &[("a", 0), ("b", 0), ("b", 1)],
        );
        // A broker without any address gets no traffic.
        check(
            TopicRouteData { broker_datas: vec![broker("a", None)], queue_datas: vec![queue("a", 4, 4, rw)], ..Default::default() },
            &[],
            &[],
        );
        // Only its slave registered (the master is down): readable, not writable.
        let mut slave_only = broker("a", None);
        slave_only.broker_addrs.insert(1, "s1".into());
        let data = TopicRouteData { broker_datas: vec![slave_only], queue_datas: vec![queue("a", 2, 2, rw)], ..Default::default() };
        check(data.clone(), &[], &[("a", 0), ("a", 1)]);
        assert_eq!(TopicRoute::from_data("t", data).slave_addrs.get("a"), Some(&vec!["s1".to_string()]));
        // Permissions: read-only and write-only brokers.
        check(
            TopicRouteData {
                broker_datas: vec![broker("a", Some("1")), broker("b", Some("2"))],
                queue_datas: vec![queue("a", 1, 1, PERM_READ), queue("b", 1, 1, PERM_WRITE)],
                ..Default::default()
            },
            &[("b", 0)],
            &[("a", 0)],
        );
        check(TopicRouteData::default(), &[], &[]);
    }

    #[test]
    fn config_is_validated() {
        assert!(ClientConfig::default().validate().is_err());
        assert!(ClientConfig::new(["127.0.0.1:9876"]).validate().is_ok());
        let mut c = ClientConfig::new(["x:1"]);
        c.request_timeout_ms = 0;
        assert!(matches!(c.validate(), Err(ClientError::Config(m)) if m.contains("request_timeout_ms")));
    }
}
