//! `Controller`: one controller node — its `Raft` and the requests it serves
//! (docs/design/controller.md §2.3).
//!
//! Owns: request dispatch for the controller codes (1001–1006, 1010–1013, 904 and the
//! private −32 010 election history), the leader check (CONTROLLER_NOT_LEADER, 2007,
//! naming the leader when known), the single-writer queue (plan + Raft write, one at a
//! time per node), the wait for a commit (`write_wait_ms`, then SYSTEM_ERROR), and the
//! leader's duties (`spawn_duties`): batched lease rounds for heartbeats and the
//! automatic election of sets whose master went silent, with 1008 notifications.
//!
//! Invariants: writes go through `Raft::client_write` and are answered with what their
//! apply returned; reads are served by the leader only, after `ensure_linearizable`
//! (so its applied state includes every committed entry); CONTROLLER_GET_METADATA_INFO
//! and GET_CONTROLLER_CONFIG are answered by any node. Elections see liveness through
//! the heartbeat table (`liveness::LivenessTable`, node-local) unless a test replaces
//! it (`set_liveness`); `leaseGranted` only after a quorum check that began after the
//! heartbeat arrived; the leader elects on its own only past the grace
//! (`liveness::should_elect`). The office start (`office_since`) is observed by polling,
//! so it is never earlier than the real start of leadership: the grace only grows.

use crate::cmd::{Cmd, CmdOutcome};
use crate::liveness::{
    should_elect, writable_after_ms, LeaseRounds, LivenessTable, SetView, ELECTION_SCAN_INTERVAL_MS, LEASE_GRANTED_EXT,
    LEASE_ROUND_INTERVAL_MS, WRITABLE_AFTER_EXT,
};
use crate::notify::{role_changed, Notifier};
use crate::policy::Liveness;
use crate::raft::mem::MemStateMachine;
use crate::raft::runtime::GlommioRaftRuntime;
use crate::raft::{raft_config, ControllerTypes, NodeId};
use crate::state::ControllerState;
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, RaftError};
use openraft::storage::RaftLogStorage;
use openraft::{AsyncRuntime, BasicNode, Raft, RaftMetrics, RaftNetworkFactory, ServerState};
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as req, response_code as rc};
use ringmq_client::remoting::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader, GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader, RegisterBrokerToControllerRequestHeader, SyncStateSet,
};
use ringmq_client::remoting::{CommandHeader, RemotingCommand};
use openraft::Instant as _;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Apache's `WAIT_TIMEOUT_OUT` (`ControllerRequestProcessor.java:76`): how long a write
/// waits for its commit.
pub const WRITE_WAIT_MS_DEFAULT: u64 = 5000;
/// Apache's remark for 2007 (`DLedgerController.java:404-405`).
pub const NOT_LEADER_REMARK: &str = "The controller is not in leader state";
/// (RingMQ) a set's election history and epoch starts; header `brokerName`; body the
/// client crate's `ElectionHistoryBody` (what `ringmq-admin getSyncStateSet --history` reads).
pub use ringmq_client::remoting::controller::RINGMQ_CONTROLLER_GET_ELECTION_HISTORY;
/// (RingMQ) the heartbeat ext field carrying a new master's epoch start offsets.
pub const EPOCH_START_OFFSETS_EXT: &str = "epochStartOffsets";
/// Start offsets one heartbeat may carry (one per shard).
pub const EPOCH_START_SHARDS_MAX: usize = 1024;
/// Apache's `electMasterMaxRetryCount` default.
pub const ELECT_MASTER_MAX_RETRY_COUNT_DEFAULT: u32 = 3;
/// After that many failed automatic elections of one set and epoch, the leader waits
/// this long before trying again (Apache's `scanInactiveMasterInterval`).
pub const ELECT_RETRY_BACKOFF_MS: u64 = 5000;

/// A controller node's settings.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `controllerDLegerGroup`, answered as the metadata `group`.
    pub group: String,
    /// This node's id (`controllerDLegerSelfId` "n<id>").
    pub node_id: NodeId,
    /// Every node's id and controller address, this one included.
    pub peers: BTreeMap<NodeId, String>,
    /// `enableElectUncleanMaster`.
    pub enable_elect_unclean_master: bool,
    pub write_wait_ms: u64,
    /// `notifyBrokerRoleChanged`: send 1008 after an election.
    pub notify_broker_role_changed: bool,
    /// `electMasterMaxRetryCount`: automatic attempts per set and epoch before backing off.
    pub elect_master_max_retry_count: u32,
    /// The effective configuration as Java properties (GET_CONTROLLER_CONFIG's body).
    pub properties: String,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            group: "DefaultControllerGroup".into(),
            node_id: 0,
            peers: BTreeMap::new(),
            enable_elect_unclean_master: false,
            write_wait_ms: WRITE_WAIT_MS_DEFAULT,
            notify_broker_role_changed: true,
            elect_master_max_retry_count: ELECT_MASTER_MAX_RETRY_COUNT_DEFAULT,
            properties: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("invalid raft config: {0}")]
    Config(#[from] openraft::ConfigError),
    #[error("raft stopped: {0}")]
    Fatal(#[from] openraft::error::Fatal<NodeId>),
    #[error("raft initialize failed: {0}")]
    Initialize(String),
}

/// One controller node, on the async runtime `RT` (glommio in processes and tests).
pub struct Controller<RT: AsyncRuntime = GlommioRaftRuntime> {
    config: ControllerConfig,
    raft: Raft<ControllerTypes<RT>>,
    sm: MemStateMachine,
    liveness: Rc<dyn Liveness>,
    beats: Rc<LivenessTable<RT::Instant>>,
    leases: LeaseRounds,
    notifier: Notifier<RT>,
    /// (term, when this node was first seen leading in it).
    office: Cell<Option<(u64, RT::Instant)>>,
    /// Per set: (master epoch, failed automatic attempts, last attempt).
    elect_attempts: RefCell<ElectAttempts<RT::Instant>>,
    /// The single-writer queue (tokio's runtime-agnostic lock: no executor needed).
    writer: tokio::sync::Mutex<()>,
}

type Refusal = Box<CmdOutcome>;
/// Per set: (master epoch, failed automatic attempts, last attempt).
type ElectAttempts<I> = BTreeMap<String, (i32, u32, I)>;

impl<RT: AsyncRuntime> Controller<RT> {
    /// Starts this node's Raft over the given log store, network and state machine.
    pub async fn start<N, LS>(config: ControllerConfig, network: N, log: LS, sm: MemStateMachine) -> Result<Self, ControllerError>
    where
        N: RaftNetworkFactory<ControllerTypes<RT>>,
        LS: RaftLogStorage<ControllerTypes<RT>>,
    {
        let raft_cfg = Arc::new(raft_config(&config.group)?);
        let raft = Raft::new(config.node_id, raft_cfg, network, log, sm.clone()).await?;
        let beats: Rc<LivenessTable<RT::Instant>> = Rc::default();
        Ok(Self {
            config,
            raft,
            sm,
            liveness: beats.clone(),
            beats,
            leases: LeaseRounds::default(),
            notifier: Notifier::default(),
            office: Cell::new(None),
            elect_attempts: RefCell::new(BTreeMap::new()),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    /// Static membership: every node calls this with all peers on first boot; a node
    /// that already has state (`NotAllowed`) is fine.
    pub async fn initialize(&self) -> Result<(), ControllerError> {
        let members: BTreeMap<NodeId, BasicNode> =
            self.config.peers.iter().map(|(id, addr)| (*id, BasicNode { addr: addr.clone() })).collect();
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(ControllerError::Initialize(e.to_string())),
        }
    }

    /// Replaces the heartbeat table as the elections' liveness view (tests).
    pub fn set_liveness(&mut self, liveness: Rc<dyn Liveness>) {
        self.liveness = liveness;
    }

    pub fn raft(&self) -> &Raft<ControllerTypes<RT>> {
        &self.raft
    }

    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    pub fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.config.node_id)
    }

    /// This node's applied state (any node; not linearizable).
    pub fn read_state<T>(&self, f: impl FnOnce(&ControllerState) -> T) -> T {
        self.sm.read(f)
    }

    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }

    /// Serves one controller request.
    pub async fn handle(&self, request: RemotingCommand) -> RemotingCommand {
        let outcome = match self.dispatch(&request).await {
            Ok(outcome) => outcome,
            Err(refusal) => *refusal,
        };
        outcome.into_response(&request)
    }

    async fn dispatch(&self, request: &RemotingCommand) -> Result<CmdOutcome, Refusal> {
        match request.code {
            req::CONTROLLER_GET_METADATA_INFO => Ok(self.metadata()),
            req::CONTROLLER_GET_NEXT_BROKER_ID => {
                let h: GetNextBrokerIdRequestHeader = header(request)?;
                self.ensure_leader().await?;
                Ok(self.sm.read(|s| s.next_broker_id(&h.cluster_name, &h.broker_name)))
            }
            req::CONTROLLER_GET_REPLICA_INFO => {
                let h: GetReplicaInfoRequestHeader = header(request)?;
                self.ensure_leader().await?;
                Ok(self.sm.read(|s| s.replica_info(&h.broker_name)))
            }
            req::CONTROLLER_GET_SYNC_STATE_DATA => {
                let names: Vec<String> = serde_json::from_slice(&request.body).map_err(|e| {
                    Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, format!("body is not a JSON list of broker names: {e}")))
                })?;
                self.ensure_leader().await?;
                Ok(self.sm.read(|s| s.sync_state_data(&names, &*self.liveness)))
            }
            req::CONTROLLER_APPLY_BROKER_ID => {
                let h: ApplyBrokerIdRequestHeader = header(request)?;
                self.write_planned(|_| Ok(ControllerState::plan_apply_broker_id(&h))).await
            }
            req::CONTROLLER_REGISTER_BROKER => {
                let h: RegisterBrokerToControllerRequestHeader = header(request)?;
                let _writer = self.writer.lock().await;
                self.ensure_leader().await?;
                let (answer, update) = self.sm.read(|s| s.register_broker(&h, &*self.liveness)).map_err(Box::new)?;
                match update {
                    None => Ok(answer),
                    Some(cmd) => {
                        let applied = self.write(cmd).await?;
                        if !applied.is_success() {
                            return Ok(applied);
                        }
                        self.sm.read(|s| s.register_broker(&h, &*self.liveness)).map(|(a, _)| a).map_err(Box::new)
                    }
                }
            }
            req::CONTROLLER_ALTER_SYNC_STATE_SET => {
                let h: AlterSyncStateSetRequestHeader = header(request)?;
                let body = SyncStateSet::decode(&request.body).map_err(|e| {
                    Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, format!("bad SyncStateSet body: {e}")))
                })?;
                self.write_planned(|s| s.plan_alter(&h, &body, &*self.liveness)).await
            }
            req::CONTROLLER_ELECT_MASTER => {
                let h: ElectMasterRequestHeader = header(request)?;
                self.elect(&h).await
            }
            req::BROKER_HEARTBEAT => self.heartbeat(request).await,
            req::GET_CONTROLLER_CONFIG => Ok(CmdOutcome::success().with_body(self.config.properties.clone().into_bytes())),
            RINGMQ_CONTROLLER_GET_ELECTION_HISTORY => {
                let name = request.ext("brokerName").map(str::to_string).ok_or_else(|| {
                    Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, "brokerName is required"))
                })?;
                self.ensure_leader().await?;
                self.sm.read(|s| match s.set(&name) {
                    None => Err(Box::new(CmdOutcome::refused(
                        rc::CONTROLLER_BROKER_METADATA_NOT_EXIST,
                        format!("Broker-set: {name} hasn't been registered in controller"),
                    ))),
                    Some(set) => {
                        let body = serde_json::json!({"history": set.history, "epochStarts": set.epoch_starts});
                        Ok(CmdOutcome::success().with_body(body.to_string().into_bytes()))
                    }
                })
            }
            req::CLEAN_BROKER_DATA => {
                let h: CleanControllerBrokerDataRequestHeader = header(request)?;
                let outcome = self.write_planned(|s| s.plan_clean(&h, &*self.liveness)).await?;
                // A removed set's heartbeats must not make a re-created set look alive.
                if outcome.is_success() && self.sm.read(|s| s.set(&h.broker_name).is_none()) {
                    self.beats.forget_set(&h.broker_name);
                }
                Ok(outcome)
            }
            req::UPDATE_CONTROLLER_CONFIG => {
                Err(Box::new(CmdOutcome::refused(rc::REQUEST_CODE_NOT_SUPPORTED, "controller config is file-only")))
            }
            code => Err(Box::new(CmdOutcome::refused(
                rc::REQUEST_CODE_NOT_SUPPORTED,
                format!("request code {code} is not supported by the controller"),
            ))),
        }
    }

    /// CONTROLLER_ELECT_MASTER (and the leader's own elections, `brokerId` −1): plan,
    /// commit, then notify the set's alive replicas. A designated election that replaces
    /// a master answers and notifies `writableAfterMs` (§2.5).
    async fn elect(&self, h: &ElectMasterRequestHeader) -> Result<CmdOutcome, Refusal> {
        let term = self.raft.metrics().borrow().current_term;
        let wall_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let unclean = self.config.enable_elect_unclean_master;
        let old_master = self.sm.read(|s| s.set(&h.broker_name).and_then(|set| set.master));
        let writable_after = match old_master {
            Some(old) if h.designate_elect && old != h.broker_id => Some(self.old_lease_left_ms(&h.broker_name, old)),
            _ => None,
        };
        let mut outcome = self.write_planned(|s| s.plan_elect(h, unclean, &*self.liveness, term, wall_ms)).await?;
        if outcome.is_success() {
            if let Some(ms) = writable_after {
                outcome.ext.push((WRITABLE_AFTER_EXT.into(), ms.to_string()));
            }
            self.notify_set(&h.broker_name, writable_after);
        }
        Ok(outcome)
    }

    /// How long `old`'s lease may still run on this node's clock.
    fn old_lease_left_ms(&self, name: &str, old: i64) -> u64 {
        let now = RT::Instant::now();
        let beat = self.beats.beat(name, old);
        let timeout = beat.as_ref().map_or_else(|| self.beats.set_timeout_ms(name), |b| b.timeout_ms);
        let office = self.office_since();
        let silent_in_office = beat
            .filter(|b| office.is_some_and(|o| b.last >= o))
            .map(|b| u64::try_from((now - b.last).as_millis()).unwrap_or(u64::MAX));
        writable_after_ms(silent_in_office, timeout)
    }

    /// 1008 to the set's alive replicas (`notifyBrokerRoleChanged`).
    fn notify_set(&self, name: &str, writable_after: Option<u64>) {
        if !self.config.notify_broker_role_changed {
            return;
        }
        let found = self.sm.read(|s| {
            s.set(name).map(|set| {
                let alive: Vec<String> = set
                    .replicas
                    .iter()
                    .filter(|(id, _)| self.liveness.live(&set.cluster, name, **id).is_some())
                    .map(|(_, r)| r.address.clone())
                    .collect();
                (role_changed(set, writable_after), alive)
            })
        });
        if let Some((cmd, alive)) = found {
            self.notifier.send(alive, cmd);
        }
    }

    /// BROKER_HEARTBEAT: recorded by every node; the leader grants the lease after a
    /// quorum check that began after this heartbeat arrived.
    async fn heartbeat(&self, request: &RemotingCommand) -> Result<CmdOutcome, Refusal> {
        let h: BrokerHeartbeatRequestHeader = header(request)?;
        let Some(id) = h.broker_id else {
            return Err(Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")));
        };
        if !self.beats.record(&h, id, RT::Instant::now()) {
            tracing::warn!(broker = h.broker_addr, "liveness table full; heartbeat not recorded");
        }
        let mut outcome = CmdOutcome { remark: Some("Heart beat success".into()), ..CmdOutcome::success() };
        if self.is_leader() && self.leases.wait_grant().await {
            outcome.ext.push((LEASE_GRANTED_EXT.into(), "true".into()));
        }
        if let Some(text) = request.ext(EPOCH_START_OFFSETS_EXT) {
            self.record_epoch_start(&h, id, text).await;
        }
        Ok(outcome)
    }

    /// (RingMQ) The first heartbeat of a new master carrying `epochStartOffsets` (one
    /// start offset per shard, comma-separated) makes the leader record them for the
    /// master epoch, once (history and admin only; truncation never asks for them).
    async fn record_epoch_start(&self, h: &BrokerHeartbeatRequestHeader, id: i64, text: &str) {
        let starts: Result<Vec<u64>, _> = text.split(',').map(|p| p.trim().parse::<u64>()).collect();
        let starts = match starts {
            Ok(s) if !s.is_empty() && s.len() <= EPOCH_START_SHARDS_MAX => s,
            _ => {
                tracing::warn!(broker = h.broker_addr, text, "ignoring a malformed epochStartOffsets");
                return;
            }
        };
        let wanted = |s: &ControllerState| {
            s.set(&h.broker_name).is_some_and(|set| {
                set.master == Some(id) && h.epoch == Some(set.master_epoch) && !set.epoch_starts.contains_key(&set.master_epoch)
            })
        };
        if !self.is_leader() || !self.sm.read(wanted) {
            return;
        }
        let name = h.broker_name.clone();
        let planned = self
            .write_planned(|s| {
                if wanted(s) {
                    let epoch = s.set(&name).map_or(0, |set| set.master_epoch);
                    Ok(Cmd::RecordEpochStart { name: name.clone(), epoch, starts: starts.clone() })
                } else {
                    Err(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, "already recorded"))
                }
            })
            .await;
        if let Err(refusal) = planned {
            tracing::debug!(broker_name = name, remark = ?refusal.remark, "epoch start not recorded");
        }
    }

    /// When this node started leading in the current term (observed), or `None` when
    /// it does not lead.
    pub fn office_since(&self) -> Option<RT::Instant> {
        let (leading, term) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            (m.state == ServerState::Leader && m.current_leader == Some(self.config.node_id), m.current_term)
        };
        if !leading {
            self.office.set(None);
            return None;
        }
        match self.office.get() {
            Some((t, since)) if t == term => Some(since),
            _ => {
                let now = RT::Instant::now();
                self.office.set(Some((term, now)));
                Some(now)
            }
        }
    }

    /// Starts the leader's background duties (lease rounds, automatic elections); they
    /// end when the controller is dropped.
    pub fn spawn_duties(self: &Rc<Self>) {
        drop(RT::spawn(lease_loop(Rc::downgrade(self))));
        drop(RT::spawn(election_loop(Rc::downgrade(self))));
    }

    /// One pass of the automatic election over every set (leader only).
    async fn scan_sets(&self) {
        let Some(since) = self.office_since() else { return };
        let now = RT::Instant::now();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let led_for_ms = ms(now - since);
        let unclean = self.config.enable_elect_unclean_master;
        let due: Vec<(String, String, i32)> = self.sm.read(|s| {
            s.sets
                .values()
                .filter(|set| {
                    let beat = set.master.and_then(|m| self.beats.beat(&set.name, m));
                    let timeout_ms = beat.as_ref().map_or_else(|| self.beats.set_timeout_ms(&set.name), |b| b.timeout_ms);
                    let electable = |id: &i64| Some(*id) != set.master && (unclean || set.sync_state_set.contains(id));
                    let candidate_alive = set
                        .replicas
                        .keys()
                        .filter(|id| electable(id))
                        .any(|id| self.liveness.live(&set.cluster, &set.name, *id).is_some());
                    should_elect(SetView {
                        master: set.master,
                        master_epoch: set.master_epoch,
                        master_silent_ms: beat.map(|b| ms(now - b.last)),
                        timeout_ms,
                        led_for_ms,
                        candidate_alive,
                    })
                })
                .map(|set| (set.cluster.clone(), set.name.clone(), set.master_epoch))
                .collect()
        });
        for (cluster, name, epoch) in due {
            if !self.may_attempt(&name, epoch, now) {
                continue;
            }
            let h = ElectMasterRequestHeader {
                cluster_name: cluster,
                broker_name: name.clone(),
                broker_id: crate::state::CONTROLLER_TRIGGER_ID,
                designate_elect: false,
                invoke_time: None,
            };
            let outcome = match self.elect(&h).await {
                Ok(o) => o,
                Err(refusal) => *refusal,
            };
            let changed = self.sm.read(|s| s.set(&name).map(|set| set.master_epoch)) != Some(epoch);
            if changed {
                self.elect_attempts.borrow_mut().remove(&name);
            }
            tracing::info!(broker_name = name, code = outcome.code, remark = ?outcome.remark, led_for_ms, "automatic election");
        }
    }

    /// `electMasterMaxRetryCount` attempts per set and epoch, then one per back-off.
    fn may_attempt(&self, name: &str, epoch: i32, now: RT::Instant) -> bool {
        let mut attempts = self.elect_attempts.borrow_mut();
        let entry = attempts.entry(name.to_string()).or_insert((epoch, 0, now));
        if entry.0 != epoch {
            *entry = (epoch, 0, now);
        }
        if entry.1 >= self.config.elect_master_max_retry_count
            && now - entry.2 < Duration::from_millis(crate::controller::ELECT_RETRY_BACKOFF_MS)
        {
            return false;
        }
        entry.1 += 1;
        entry.2 = now;
        true
    }

    /// The single-writer path: leader check, plan against the applied state, commit.
    async fn write_planned(
        &self,
        plan: impl FnOnce(&ControllerState) -> Result<Cmd, CmdOutcome>,
    ) -> Result<CmdOutcome, Refusal> {
        let _writer = self.writer.lock().await;
        self.ensure_leader().await?;
        let cmd = self.sm.read(plan).map_err(Box::new)?;
        self.write(cmd).await
    }

    async fn write(&self, cmd: Cmd) -> Result<CmdOutcome, Refusal> {
        let wait = Duration::from_millis(self.config.write_wait_ms);
        match RT::timeout(wait, self.raft.client_write(cmd)).await {
            Err(_) => Err(Box::new(CmdOutcome::refused(
                rc::SYSTEM_ERROR,
                format!("the write was not committed within {} ms", self.config.write_wait_ms),
            ))),
            Ok(Ok(response)) => Ok(response.data),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => Err(self.not_leader(Some(&f))),
            Ok(Err(e)) => Err(Box::new(CmdOutcome::refused(rc::SYSTEM_ERROR, format!("raft write failed: {e}")))),
        }
    }

    async fn ensure_leader(&self) -> Result<(), Refusal> {
        if !self.is_leader() {
            return Err(self.not_leader(None));
        }
        let wait = Duration::from_millis(self.config.write_wait_ms);
        match RT::timeout(wait, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => Err(self.not_leader(Some(&f))),
            Ok(Err(_)) | Err(_) => Err(self.not_leader(None)),
        }
    }

    /// 2007, with the leader's id and address when known (ext fields named as
    /// `GetMetaDataResponseHeader`'s).
    fn not_leader(&self, forward: Option<&ForwardToLeader<NodeId, BasicNode>>) -> Refusal {
        let leader = forward.and_then(|f| f.leader_id).or_else(|| self.raft.metrics().borrow().current_leader);
        let mut outcome = CmdOutcome::refused(rc::CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK);
        if let Some(id) = leader.filter(|id| *id != self.config.node_id) {
            outcome.ext.push(("controllerLeaderId".into(), format!("n{id}")));
            if let Some(addr) = self.config.peers.get(&id) {
                outcome.ext.push(("controllerLeaderAddress".into(), addr.clone()));
            }
        }
        Box::new(outcome)
    }

    /// CONTROLLER_GET_METADATA_INFO (any node).
    fn metadata(&self) -> CmdOutcome {
        let leader = self.raft.metrics().borrow().current_leader;
        let peers: String = self.config.peers.iter().map(|(id, addr)| format!("n{id}:{addr};")).collect();
        CmdOutcome::success().with_header(&GetMetaDataResponseHeader {
            group: Some(self.config.group.clone()),
            controller_leader_id: leader.map(|id| format!("n{id}")),
            controller_leader_address: leader.and_then(|id| self.config.peers.get(&id).cloned()),
            is_leader: self.is_leader(),
            peers: Some(peers),
        })
    }
}

/// Answers heartbeats waiting for a lease: one quorum leadership check per round, at
/// most one round per `LEASE_ROUND_INTERVAL_MS`, each begun after its waiters arrived.
async fn lease_loop<RT: AsyncRuntime>(weak: Weak<Controller<RT>>) {
    let interval = Duration::from_millis(LEASE_ROUND_INTERVAL_MS);
    let mut last_round: Option<RT::Instant> = None;
    loop {
        let Some(c) = weak.upgrade() else { return };
        // Bounded, so the loop notices a dropped controller.
        let _ = RT::timeout(Duration::from_secs(1), c.leases.wanted()).await;
        if let Some(last) = last_round {
            RT::sleep_until(last + interval).await;
        }
        let waiters = c.leases.take();
        if waiters.is_empty() {
            continue;
        }
        last_round = Some(RT::Instant::now());
        let wait = Duration::from_millis(c.config.write_wait_ms);
        let confirmed = c.is_leader() && matches!(RT::timeout(wait, c.raft.ensure_linearizable()).await, Ok(Ok(_)));
        for w in waiters {
            let _ = w.send(confirmed);
        }
    }
}

/// Looks for sets to elect every `ELECTION_SCAN_INTERVAL_MS`.
async fn election_loop<RT: AsyncRuntime>(weak: Weak<Controller<RT>>) {
    loop {
        RT::sleep(Duration::from_millis(ELECTION_SCAN_INTERVAL_MS)).await;
        let Some(c) = weak.upgrade() else { return };
        c.scan_sets().await;
    }
}

fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, Refusal> {
    request.header::<H>().map_err(|e| Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, e.to_string())))
}
