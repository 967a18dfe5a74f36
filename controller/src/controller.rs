//! `Controller`: one controller node — its `Raft` and the requests it serves
//! (docs/design/controller.md §2.3).
//!
//! Owns: request dispatch for the controller codes of WP1 (1001–1006, 1011–1013), the
//! leader check (CONTROLLER_NOT_LEADER, 2007, naming the leader when known), the
//! single-writer queue (plan + Raft write, one at a time per node) and the wait for a
//! commit (`write_wait_ms`, then SYSTEM_ERROR).
//!
//! Invariants: writes go through `Raft::client_write` and are answered with what their
//! apply returned; reads are served by the leader only, after `ensure_linearizable`
//! (so its applied state includes every committed entry); CONTROLLER_GET_METADATA_INFO
//! is answered by any node. Liveness (heartbeats, WP2) is leader-local; until then every
//! registered replica counts as alive (`policy::AllAlive`).

use crate::cmd::{Cmd, CmdOutcome};
use crate::policy::{AllAlive, Liveness};
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
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader, SyncStateSet,
};
use ringmq_client::remoting::{CommandHeader, RemotingCommand};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Apache's `WAIT_TIMEOUT_OUT` (`ControllerRequestProcessor.java:76`): how long a write
/// waits for its commit.
pub const WRITE_WAIT_MS_DEFAULT: u64 = 5000;
/// Apache's remark for 2007 (`DLedgerController.java:404-405`).
pub const NOT_LEADER_REMARK: &str = "The controller is not in leader state";

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
    /// The single-writer queue (tokio's runtime-agnostic lock: no executor needed).
    writer: tokio::sync::Mutex<()>,
}

type Refusal = Box<CmdOutcome>;

impl<RT: AsyncRuntime> Controller<RT> {
    /// Starts this node's Raft over the given log store, network and state machine.
    pub async fn start<N, LS>(config: ControllerConfig, network: N, log: LS, sm: MemStateMachine) -> Result<Self, ControllerError>
    where
        N: RaftNetworkFactory<ControllerTypes<RT>>,
        LS: RaftLogStorage<ControllerTypes<RT>>,
    {
        let raft_cfg = Arc::new(raft_config(&config.group)?);
        let raft = Raft::new(config.node_id, raft_cfg, network, log, sm.clone()).await?;
        Ok(Self { config, raft, sm, liveness: Rc::new(AllAlive), writer: tokio::sync::Mutex::new(()) })
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

    /// Replaces the liveness view (WP2's heartbeat table; tests).
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
                let term = self.raft.metrics().borrow().current_term;
                let wall_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
                let unclean = self.config.enable_elect_unclean_master;
                self.write_planned(|s| s.plan_elect(&h, unclean, &*self.liveness, term, wall_ms)).await
            }
            req::CLEAN_BROKER_DATA => {
                let h: CleanControllerBrokerDataRequestHeader = header(request)?;
                self.write_planned(|s| s.plan_clean(&h, &*self.liveness)).await
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

fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, Refusal> {
    request.header::<H>().map_err(|e| Box::new(CmdOutcome::refused(rc::CONTROLLER_INVALID_REQUEST, e.to_string())))
}
