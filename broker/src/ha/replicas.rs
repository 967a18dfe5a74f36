//! `ReplicasManager`: a broker's side of controller mode (Apache
//! `broker/controller/ReplicasManager.java`, docs/design/controller.md §3.5, §3.8, §4),
//! as a pure state machine. It decides which controller requests to send, what to
//! persist, and which role the broker takes; the driver (shard 0) performs the IO and
//! feeds back answers, persistence and time. No IO, no clock: `now_ms` is the driver's
//! monotonic time.
//!
//! Registration (Apache's `register()`): `brokerIdentity` loaded → registered id;
//! else `brokerIdentity-temp` loaded → apply its id; else CONTROLLER_GET_NEXT_BROKER_ID
//! (1012) → persist the temp file → CONTROLLER_APPLY_BROKER_ID (1013; refused: drop the
//! temp file, start over) → persist the identity file → CONTROLLER_REGISTER_BROKER
//! (1003), whose answer may name the master. Then: BROKER_HEARTBEAT (904) to every
//! controller each `heartbeat_interval_ms`, CONTROLLER_GET_REPLICA_INFO (1004) each
//! `sync_broker_metadata_period_ms`, self-election (1002) while the set has no master,
//! and NOTIFY_BROKER_ROLE_CHANGED (1008) from the controller handled at once.
//!
//! Invariants:
//! - The master epoch this broker knows never decreases; a role comes only from an
//!   answer or notification of a strictly higher epoch (Apache's `changeBrokerRole`),
//!   except the SyncStateSet of the current epoch, which follows its own epoch.
//! - Learning a higher epoch that names no master ends this broker's mastership at once
//!   (`Role::Isolated`): it acknowledges nothing until the controller elects again.
//! - With `master_lease`, a master may acknowledge only before `lease_until_ms`, which
//!   only a heartbeat answered with `leaseGranted=true` extends, to that heartbeat's
//!   *send* time + `heartbeat_timeout_ms` − margin (§3.8): a partitioned master stops
//!   acknowledging within one timeout of its last granted heartbeat.
//! - At most one control request (everything but heartbeats) is in flight; at most one
//!   heartbeat per controller. Answers carry the token of their request; a stale token
//!   is ignored.

use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader, ElectMasterResponseBody,
    ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader, NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader, SyncStateSet,
};
use std::collections::{BTreeMap, BTreeSet};

/// `controllerAddr` entries a broker accepts (Apache's samples name 3).
pub const CONTROLLERS_MAX: usize = 9;
/// Wait after a failed control request before the next one (Apache sleeps 1–5 s
/// between registration attempts, `RETRY_INTERVAL_SECOND`).
pub const RETRY_INTERVAL_MS: u64 = 1_000;
/// The lease margin's floor; the margin is max(this, 2 % of the heartbeat timeout),
/// covering monotonic-clock rate error between broker and controller (§3.8).
pub const LEASE_MARGIN_MS_MIN: u64 = 100;
/// The identity files' names under the store root (Apache `storePathBrokerIdentity`).
pub const IDENTITY_FILE: &str = "brokerIdentity";
pub const IDENTITY_TEMP_FILE: &str = "brokerIdentity-temp";

/// The controller-mode settings a broker runs with (broker.conf keys in comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicasSettings {
    /// `brokerClusterName`.
    pub cluster: String,
    /// `brokerName`: the broker set.
    pub broker_name: String,
    /// This broker's remoting address, as registered.
    pub broker_address: String,
    /// `controllerAddr`, `;`-separated in broker.conf.
    pub controllers: Vec<String>,
    /// `brokerHeartbeatInterval`.
    pub heartbeat_interval_ms: u64,
    /// `controllerHeartBeatTimeoutMills`.
    pub heartbeat_timeout_ms: u64,
    /// `syncBrokerMetadataPeriod`.
    pub sync_broker_metadata_period_ms: u64,
    /// `syncControllerMetadataPeriod`.
    pub sync_controller_metadata_period_ms: u64,
    /// `brokerElectionPriority` (lower wins ties).
    pub election_priority: i32,
    /// `masterLeaseEnable` (RingMQ): acknowledge only within a granted lease.
    pub master_lease: bool,
}

impl ReplicasSettings {
    fn lease_margin_ms(&self) -> u64 {
        LEASE_MARGIN_MS_MIN.max(self.heartbeat_timeout_ms / 50)
    }
}

/// What the identity files said at start (`parse_identity`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredIdentity {
    None,
    /// `brokerIdentity-temp`: an id asked for, not yet confirmed by the controller.
    Temp { id: i64, check_code: String },
    /// `brokerIdentity`: the id the controller assigned.
    Assigned { id: i64 },
}

/// Errors of the identity files: a file for another cluster or broker set is refused
/// (Apache's `checkMetadataValid`: the operator must fix the config or the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("{file}: {text:?} is not `cluster#brokerName#id` (and `#checkCode` in the temp file)")]
    Malformed { file: &'static str, text: String },
    #[error("{file} names cluster {found:?} and broker set {found_name:?}, the config {cluster:?} and {name:?}: fix the config or remove the file")]
    Mismatch { file: &'static str, found: String, found_name: String, cluster: String, name: String },
}

/// Apache's `BrokerMetadata` / `TempBrokerMetadata` text: `cluster#name#id[#checkCode]`.
pub fn identity_text(settings: &ReplicasSettings, id: i64, check_code: Option<&str>) -> String {
    match check_code {
        Some(code) => format!("{}#{}#{id}#{code}", settings.cluster, settings.broker_name),
        None => format!("{}#{}#{id}", settings.cluster, settings.broker_name),
    }
}

/// What the identity files hold, checked against the config (the identity file wins
/// over a leftover temp file, as Apache's `confirmNowRegisteringState`).
pub fn parse_identity(settings: &ReplicasSettings, identity: Option<&str>, temp: Option<&str>) -> Result<StoredIdentity, IdentityError> {
    let fields = |file: &'static str, text: &str, count: usize| -> Result<Vec<String>, IdentityError> {
        let parts: Vec<String> = text.trim().split('#').map(str::to_string).collect();
        let malformed = || IdentityError::Malformed { file, text: text.to_string() };
        if parts.len() != count || parts.iter().any(String::is_empty) || parts[2].parse::<i64>().is_err() {
            return Err(malformed());
        }
        if parts[0] != settings.cluster || parts[1] != settings.broker_name {
            return Err(IdentityError::Mismatch {
                file,
                found: parts[0].clone(),
                found_name: parts[1].clone(),
                cluster: settings.cluster.clone(),
                name: settings.broker_name.clone(),
            });
        }
        Ok(parts)
    };
    if let Some(text) = identity.filter(|t| !t.trim().is_empty()) {
        let f = fields(IDENTITY_FILE, text, 3)?;
        return Ok(StoredIdentity::Assigned { id: f[2].parse().unwrap_or_default() });
    }
    if let Some(text) = temp.filter(|t| !t.trim().is_empty()) {
        let f = fields(IDENTITY_TEMP_FILE, text, 4)?;
        return Ok(StoredIdentity::Temp { id: f[2].parse().unwrap_or_default(), check_code: f[3].clone() });
    }
    Ok(StoredIdentity::None)
}

/// The role the broker should have now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not registered, no master known, or a higher epoch without a master: serves no
    /// writes, follows no one (Apache keeps such a broker `isolated`).
    Isolated,
    Master { epoch: i32 },
    Slave { epoch: i32, master_id: i64, master_address: String },
}

/// Which request a `Send` is; the answer comes back with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Metadata,
    NextBrokerId,
    ApplyBrokerId,
    Register,
    ReplicaInfo,
    Elect,
    AlterSyncStateSet,
    Heartbeat { sent_ms: u64 },
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `command` to `to`; report its answer (or failure) with `on_answer(token, ..)`.
    Send { token: u64, to: String, request: Request, command: RemotingCommand },
    /// Write `brokerIdentity-temp` durably (tmp + fsync + rename), then `on_persisted`.
    PersistTemp { text: String },
    /// Write `brokerIdentity` durably and remove the temp file, then `on_persisted`.
    PersistIdentity { text: String },
    /// Remove `brokerIdentity-temp` (its id was refused).
    ClearTemp,
    /// Take this role (the shards switch; the NameServer registration follows).
    ChangeRole(Role),
    /// The committed SyncStateSet of the current epoch (a master's ack set).
    SyncStateSet { epoch: i32, members: BTreeSet<i64> },
}

/// What a heartbeat reports of the store (Apache's `getLastEpoch`, `getMaxPhyOffset`,
/// `getConfirmOffset`), gathered by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreFacts {
    pub last_epoch: i32,
    pub max_offset: i64,
    pub confirm_offset: i64,
}

/// Where registration stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    NextId,
    PersistingTemp { id: i64, check_code: String },
    Apply { id: i64, check_code: String },
    PersistingIdentity { id: i64 },
    Register,
    Running,
}

/// The controller request waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    token: u64,
    request: Request,
}

pub struct ReplicasManager {
    settings: ReplicasSettings,
    step: Step,
    /// The id the controller assigned (once the identity file is written).
    controller_id: Option<i64>,
    leader: Option<String>,
    /// Which controller the next leader lookup asks (round robin).
    lookup_next: usize,
    in_flight: Option<InFlight>,
    /// Heartbeats waiting, by controller address: (token, send time).
    heartbeats_in_flight: BTreeMap<String, (u64, u64)>,
    next_token: u64,
    /// No control request before this (after a failure).
    retry_at_ms: u64,
    next_heartbeat_ms: u64,
    next_replica_info_ms: u64,
    next_metadata_ms: u64,
    role: Role,
    master_epoch: i32,
    master_id: Option<i64>,
    sss: BTreeSet<i64>,
    sss_epoch: i32,
    lease_until_ms: u64,
    /// Ask 1002 on the next control slot (the set has no master).
    elect_wanted: bool,
    /// A proposed SyncStateSet to report with 1001.
    sss_proposal: Option<BTreeSet<i64>>,
}

impl ReplicasManager {
    /// Starts from what the identity files said (`parse_identity`).
    pub fn new(settings: ReplicasSettings, stored: StoredIdentity) -> Self {
        assert!(!settings.controllers.is_empty() && settings.controllers.len() <= CONTROLLERS_MAX, "controllers: 1..={CONTROLLERS_MAX}");
        assert!(settings.heartbeat_interval_ms > 0 && settings.heartbeat_timeout_ms > settings.heartbeat_interval_ms, "heartbeat interval below timeout");
        let (step, controller_id) = match stored {
            StoredIdentity::None => (Step::NextId, None),
            StoredIdentity::Temp { id, check_code } => (Step::Apply { id, check_code }, None),
            StoredIdentity::Assigned { id } => (Step::Register, Some(id)),
        };
        Self {
            settings,
            step,
            controller_id,
            leader: None,
            lookup_next: 0,
            in_flight: None,
            heartbeats_in_flight: BTreeMap::new(),
            next_token: 1,
            retry_at_ms: 0,
            next_heartbeat_ms: 0,
            next_replica_info_ms: 0,
            next_metadata_ms: 0,
            role: Role::Isolated,
            master_epoch: 0,
            master_id: None,
            sss: BTreeSet::new(),
            sss_epoch: 0,
            lease_until_ms: 0,
            elect_wanted: false,
            sss_proposal: None,
        }
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    pub fn controller_id(&self) -> Option<i64> {
        self.controller_id
    }

    pub fn master_epoch(&self) -> i32 {
        self.master_epoch
    }

    /// The monotonic ms before which a master may acknowledge (`may_acknowledge`).
    pub fn lease_until_ms(&self) -> u64 {
        self.lease_until_ms
    }

    pub fn sync_state_set(&self) -> (i32, &BTreeSet<i64>) {
        (self.sss_epoch, &self.sss)
    }

    /// Whether a write may be acknowledged now: master, and (with `master_lease`) within
    /// the lease the controller leader last granted.
    pub fn may_acknowledge(&self, now_ms: u64) -> bool {
        matches!(self.role, Role::Master { .. }) && (!self.settings.master_lease || now_ms < self.lease_until_ms)
    }

    /// A SyncStateSet the master's replication tracking proposes (Apache's
    /// `checkSyncStateSetAndDoReport`); reported with 1001 on the next control slot.
    pub fn propose_sync_state_set(&mut self, members: BTreeSet<i64>) {
        if matches!(self.role, Role::Master { .. }) && members != self.sss {
            self.sss_proposal = Some(members);
        }
    }

    /// Everything due at `now_ms`.
    pub fn tick(&mut self, now_ms: u64, facts: StoreFacts) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(id) = self.controller_id.filter(|_| now_ms >= self.next_heartbeat_ms) {
            self.next_heartbeat_ms = now_ms + self.settings.heartbeat_interval_ms;
            for to in self.settings.controllers.clone() {
                if self.heartbeats_in_flight.contains_key(&to) {
                    continue;
                }
                let header = BrokerHeartbeatRequestHeader {
                    cluster_name: self.settings.cluster.clone(),
                    broker_addr: self.settings.broker_address.clone(),
                    broker_name: self.settings.broker_name.clone(),
                    broker_id: Some(id),
                    epoch: Some(facts.last_epoch),
                    max_offset: Some(facts.max_offset),
                    confirm_offset: Some(facts.confirm_offset),
                    heartbeat_timeout_mills: Some(self.settings.heartbeat_timeout_ms as i64),
                    election_priority: Some(self.settings.election_priority),
                };
                let token = self.token();
                self.heartbeats_in_flight.insert(to.clone(), (token, now_ms));
                out.push(Action::Send { token, to, request: Request::Heartbeat { sent_ms: now_ms }, command: RemotingCommand::request(rq::BROKER_HEARTBEAT).with_header(&header) });
            }
        }
        if self.in_flight.is_none() && now_ms >= self.retry_at_ms {
            if let Some(send) = self.next_control(now_ms) {
                out.push(send);
            }
        }
        out
    }

    /// The next control request, if one is due.
    fn next_control(&mut self, now_ms: u64) -> Option<Action> {
        let Some(leader) = self.leader.clone() else {
            let to = self.settings.controllers[self.lookup_next % self.settings.controllers.len()].clone();
            self.lookup_next += 1;
            return Some(self.send(to, Request::Metadata, RemotingCommand::request(rq::CONTROLLER_GET_METADATA_INFO)));
        };
        let s = &self.settings;
        let (request, command) = match &self.step {
            Step::NextId => (
                Request::NextBrokerId,
                RemotingCommand::request(rq::CONTROLLER_GET_NEXT_BROKER_ID)
                    .with_header(&GetNextBrokerIdRequestHeader { cluster_name: s.cluster.clone(), broker_name: s.broker_name.clone() }),
            ),
            Step::Apply { id, check_code } => (
                Request::ApplyBrokerId,
                RemotingCommand::request(rq::CONTROLLER_APPLY_BROKER_ID).with_header(&ApplyBrokerIdRequestHeader {
                    cluster_name: s.cluster.clone(),
                    broker_name: s.broker_name.clone(),
                    applied_broker_id: *id,
                    register_check_code: check_code.clone(),
                }),
            ),
            Step::PersistingTemp { .. } | Step::PersistingIdentity { .. } => return None,
            Step::Register => (
                Request::Register,
                RemotingCommand::request(rq::CONTROLLER_REGISTER_BROKER).with_header(&RegisterBrokerToControllerRequestHeader {
                    cluster_name: s.cluster.clone(),
                    broker_name: s.broker_name.clone(),
                    broker_id: self.controller_id.expect("registering with an assigned id"),
                    broker_address: s.broker_address.clone(),
                    invoke_time: None,
                }),
            ),
            Step::Running => {
                let id = self.controller_id.expect("running with an assigned id");
                if self.elect_wanted {
                    let header = ElectMasterRequestHeader { cluster_name: s.cluster.clone(), broker_name: s.broker_name.clone(), broker_id: id, designate_elect: false, invoke_time: None };
                    (Request::Elect, RemotingCommand::request(rq::CONTROLLER_ELECT_MASTER).with_header(&header))
                } else if let Some(members) = self.sss_proposal.clone().filter(|_| matches!(self.role, Role::Master { .. })) {
                    let header = AlterSyncStateSetRequestHeader { broker_name: s.broker_name.clone(), master_broker_id: id, master_epoch: self.master_epoch, invoke_time: None };
                    let body = SyncStateSet { sync_state_set: members.into_iter().collect(), sync_state_set_epoch: self.sss_epoch };
                    (Request::AlterSyncStateSet, RemotingCommand::request(rq::CONTROLLER_ALTER_SYNC_STATE_SET).with_header(&header).with_body(body.encode()))
                } else if now_ms >= self.next_replica_info_ms {
                    self.next_replica_info_ms = now_ms + s.sync_broker_metadata_period_ms;
                    (Request::ReplicaInfo, RemotingCommand::request(rq::CONTROLLER_GET_REPLICA_INFO).with_header(&GetReplicaInfoRequestHeader { broker_name: s.broker_name.clone() }))
                } else if now_ms >= self.next_metadata_ms {
                    // Apache re-reads who leads every `syncControllerMetadataPeriod`.
                    self.next_metadata_ms = now_ms + s.sync_controller_metadata_period_ms;
                    return Some(self.send(leader, Request::Metadata, RemotingCommand::request(rq::CONTROLLER_GET_METADATA_INFO)));
                } else {
                    return None;
                }
            }
        };
        Some(self.send(leader, request, command))
    }

    fn token(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        t
    }

    fn send(&mut self, to: String, request: Request, command: RemotingCommand) -> Action {
        let token = self.token();
        self.in_flight = Some(InFlight { token, request });
        Action::Send { token, to, request, command }
    }

    /// The driver wrote what `PersistTemp` / `PersistIdentity` asked.
    pub fn on_persisted(&mut self) -> Vec<Action> {
        match std::mem::replace(&mut self.step, Step::Running) {
            Step::PersistingTemp { id, check_code } => self.step = Step::Apply { id, check_code },
            Step::PersistingIdentity { id } => {
                self.controller_id = Some(id);
                self.step = Step::Register;
            }
            other => self.step = other,
        }
        Vec::new()
    }

    /// The answer to the request sent with `token` (`Err` = no answer: refused
    /// connection, timeout). `check_code_ms` is the wall-clock time for a new register
    /// check code (Apache's `address;currentTimeMillis`).
    pub fn on_answer(&mut self, token: u64, from: &str, answer: Result<RemotingCommand, String>, now_ms: u64, check_code_ms: u64) -> Vec<Action> {
        if let Some((to, sent_ms)) = self.heartbeats_in_flight.iter().find(|(_, (t, _))| *t == token).map(|(a, (_, sent))| (a.clone(), *sent)) {
            self.heartbeats_in_flight.remove(&to);
            // Only the leader grants, and only after a quorum confirmed it led after
            // the heartbeat arrived (§2.5): the lease runs from the *send* time.
            if matches!(&answer, Ok(r) if r.code == rs::SUCCESS && r.ext_fields.get("leaseGranted") == Some("true")) {
                let until = (sent_ms + self.settings.heartbeat_timeout_ms).saturating_sub(self.settings.lease_margin_ms());
                self.lease_until_ms = self.lease_until_ms.max(until);
            }
            return Vec::new();
        }
        let Some(inflight) = self.in_flight.filter(|f| f.token == token) else { return Vec::new() };
        self.in_flight = None;
        let r = match answer {
            Ok(r) => r,
            Err(why) => {
                tracing::warn!(controller = from, request = ?inflight.request, %why, "controller request failed");
                return self.failed(now_ms, true);
            }
        };
        if r.code == rs::CONTROLLER_NOT_LEADER {
            // Ask again, at once, who leads (the answer may name it).
            self.leader = r.ext_fields.get("controllerLeaderAddress").filter(|a| !a.is_empty()).map(str::to_string);
            return Vec::new();
        }
        match inflight.request {
            Request::Metadata => match r.header::<GetMetaDataResponseHeader>() {
                Ok(h) if r.code == rs::SUCCESS && h.controller_leader_address.as_deref().is_some_and(|a| !a.is_empty()) => {
                    self.leader = h.controller_leader_address;
                    Vec::new()
                }
                _ => self.failed(now_ms, true),
            },
            Request::NextBrokerId => match r.header::<GetNextBrokerIdResponseHeader>().ok().and_then(|h| h.next_broker_id).filter(|_| r.code == rs::SUCCESS) {
                Some(id) => {
                    let check_code = format!("{};{check_code_ms}", self.settings.broker_address);
                    let text = identity_text(&self.settings, id, Some(&check_code));
                    self.step = Step::PersistingTemp { id, check_code };
                    vec![Action::PersistTemp { text }]
                }
                None => self.failed(now_ms, false),
            },
            Request::ApplyBrokerId => {
                let Step::Apply { id, .. } = self.step.clone() else { return Vec::new() };
                if r.code == rs::SUCCESS {
                    self.step = Step::PersistingIdentity { id };
                    vec![Action::PersistIdentity { text: identity_text(&self.settings, id, None) }]
                } else {
                    // The id went to another broker: forget it, ask for the next one.
                    tracing::warn!(id, code = r.code, remark = ?r.remark, "controller refused the broker id; asking for another");
                    self.step = Step::NextId;
                    let mut out = vec![Action::ClearTemp];
                    out.extend(self.failed(now_ms, false));
                    out
                }
            }
            Request::Register => {
                if r.code != rs::SUCCESS {
                    return self.failed(now_ms, false);
                }
                self.step = Step::Running;
                self.next_replica_info_ms = now_ms + self.settings.sync_broker_metadata_period_ms;
                self.next_metadata_ms = now_ms + self.settings.sync_controller_metadata_period_ms;
                let h: RegisterBrokerToControllerResponseHeader = r.header().unwrap_or_default();
                let sss = SyncStateSet::decode(&r.body).unwrap_or_default();
                match (h.master_broker_id, h.master_address, h.master_epoch) {
                    (Some(id), Some(addr), Some(epoch)) if !addr.is_empty() => self.change_role(id, addr, epoch, h.sync_state_set_epoch.unwrap_or(sss.sync_state_set_epoch), sss.sync_state_set),
                    _ => {
                        self.elect_wanted = true;
                        Vec::new()
                    }
                }
            }
            Request::ReplicaInfo => {
                if r.code == rs::CONTROLLER_BROKER_METADATA_NOT_EXIST {
                    self.step = Step::Register;
                    return Vec::new();
                }
                if r.code != rs::SUCCESS {
                    return self.failed(now_ms, false);
                }
                let h: GetReplicaInfoResponseHeader = r.header().unwrap_or_default();
                let sss = SyncStateSet::decode(&r.body).unwrap_or_default();
                self.learn(h.master_broker_id, h.master_address, h.master_epoch.unwrap_or(0), sss)
            }
            Request::Elect => {
                self.elect_wanted = false;
                if r.code != rs::SUCCESS && r.code != rs::CONTROLLER_MASTER_STILL_EXIST {
                    // No master could be elected (2004/2012): ask again later.
                    self.elect_wanted = true;
                    return self.failed(now_ms, false);
                }
                let h: ElectMasterResponseHeader = r.header().unwrap_or_default();
                let body = ElectMasterResponseBody::decode(&r.body).unwrap_or_default();
                let sss = SyncStateSet { sync_state_set: body.sync_state_set, sync_state_set_epoch: h.sync_state_set_epoch.unwrap_or(0) };
                self.learn(h.master_broker_id, h.master_address, h.master_epoch.unwrap_or(0), sss)
            }
            Request::AlterSyncStateSet => {
                self.sss_proposal = None;
                if r.code == rs::SUCCESS {
                    let set = SyncStateSet::decode(&r.body).unwrap_or_default();
                    return self.change_sync_state_set(set.sync_state_set_epoch, set.sync_state_set);
                }
                if r.code == rs::CONTROLLER_FENCED_MASTER_EPOCH || r.code == rs::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH {
                    // Someone moved on: read the replica info now.
                    self.next_replica_info_ms = now_ms;
                }
                Vec::new()
            }
            Request::Heartbeat { .. } => Vec::new(),
        }
    }

    /// NOTIFY_BROKER_ROLE_CHANGED (1008) from the controller.
    pub fn on_notify(&mut self, header: &NotifyBrokerRoleChangedRequestHeader, body: &[u8]) -> Vec<Action> {
        let sss = SyncStateSet::decode(body).unwrap_or_default();
        self.learn(header.master_broker_id, header.master_address.clone(), header.master_epoch.unwrap_or(0), SyncStateSet { sync_state_set_epoch: header.sync_state_set_epoch.unwrap_or(sss.sync_state_set_epoch), ..sss })
    }

    /// What a 1004 / 1002 / 1008 answer says of the set.
    fn learn(&mut self, master_id: Option<i64>, master_address: Option<String>, epoch: i32, sss: SyncStateSet) -> Vec<Action> {
        match (master_id, master_address.filter(|a| !a.is_empty())) {
            (Some(id), Some(addr)) if epoch > self.master_epoch => self.change_role(id, addr, epoch, sss.sync_state_set_epoch, sss.sync_state_set),
            (Some(id), Some(_)) if epoch == self.master_epoch && Some(id) == self.controller_id && matches!(self.role, Role::Master { .. }) => {
                self.change_sync_state_set(sss.sync_state_set_epoch, sss.sync_state_set)
            }
            (Some(_), Some(_)) => Vec::new(),
            // A newer epoch with no master (the controller cleared it), or none ever:
            // this broker stops acknowledging and asks to be elected.
            _ => {
                self.elect_wanted = true;
                if epoch > self.master_epoch && self.role != Role::Isolated {
                    self.role = Role::Isolated;
                    self.master_id = None;
                    return vec![Action::ChangeRole(Role::Isolated)];
                }
                Vec::new()
            }
        }
    }

    /// Apache's `changeBrokerRole`: only a strictly higher epoch changes the role.
    fn change_role(&mut self, master_id: i64, master_address: String, epoch: i32, sss_epoch: i32, sss: Vec<i64>) -> Vec<Action> {
        if epoch <= self.master_epoch {
            return Vec::new();
        }
        self.master_epoch = epoch;
        self.master_id = Some(master_id);
        self.elect_wanted = false;
        self.sss_proposal = None;
        let role = if Some(master_id) == self.controller_id { Role::Master { epoch } } else { Role::Slave { epoch, master_id, master_address } };
        self.role = role.clone();
        let mut out = vec![Action::ChangeRole(role)];
        if matches!(self.role, Role::Master { .. }) {
            out.extend(self.change_sync_state_set(sss_epoch, sss));
        }
        out
    }

    fn change_sync_state_set(&mut self, epoch: i32, members: Vec<i64>) -> Vec<Action> {
        // SyncStateSet epochs only grow at the controller: an equal or older one is stale.
        if epoch <= self.sss_epoch {
            return Vec::new();
        }
        self.sss_epoch = epoch;
        self.sss = members.into_iter().collect();
        vec![Action::SyncStateSet { epoch, members: self.sss.clone() }]
    }

    /// A control request failed: retry after `RETRY_INTERVAL_MS`; a transport failure
    /// (or a metadata answer naming no leader) also forgets the leader.
    fn failed(&mut self, now_ms: u64, forget_leader: bool) -> Vec<Action> {
        if forget_leader {
            self.leader = None;
        }
        self.retry_at_ms = now_ms + RETRY_INTERVAL_MS;
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "10.0.0.2:10911";
    const C0: &str = "10.0.1.1:9878";
    const C1: &str = "10.0.1.2:9878";

    fn settings() -> ReplicasSettings {
        ReplicasSettings {
            cluster: "c".into(),
            broker_name: "broker-a".into(),
            broker_address: ME.into(),
            controllers: vec![C0.into(), C1.into()],
            heartbeat_interval_ms: 1_000,
            heartbeat_timeout_ms: 5_000,
            sync_broker_metadata_period_ms: 5_000,
            sync_controller_metadata_period_ms: 10_000,
            election_priority: 0,
            master_lease: true,
        }
    }

    /// A scripted controller: the test plays it, step by step.
    struct Harness {
        m: ReplicasManager,
        now_ms: u64,
        sent: Vec<(u64, String, Request, RemotingCommand)>,
        actions: Vec<Action>,
    }

    impl Harness {
        fn new(stored: StoredIdentity) -> Self {
            Self { m: ReplicasManager::new(settings(), stored), now_ms: 0, sent: Vec::new(), actions: Vec::new() }
        }

        fn tick(&mut self, at_ms: u64) {
            self.now_ms = at_ms;
            let out = self.m.tick(at_ms, StoreFacts { last_epoch: self.m.master_epoch(), max_offset: 100, confirm_offset: 90 });
            self.take(out);
        }

        fn take(&mut self, out: Vec<Action>) {
            for a in out {
                if let Action::Send { token, to, request, command } = &a {
                    self.sent.push((*token, to.clone(), *request, command.clone()));
                } else {
                    self.actions.push(a);
                }
            }
        }

        /// The one control request sent last (not a heartbeat), taken.
        fn control(&mut self) -> (u64, String, Request, RemotingCommand) {
            let i = self.sent.iter().rposition(|(_, _, r, _)| !matches!(r, Request::Heartbeat { .. })).expect("a control request was sent");
            self.sent.remove(i)
        }

        fn answer(&mut self, token: u64, r: Result<RemotingCommand, String>) {
            let out = self.m.on_answer(token, "ctl", r, self.now_ms, 1_700_000_000_000);
            self.take(out);
        }

        /// Ticks, expects `request` to `to`, answers `r(command)`.
        fn step(&mut self, request: Request, to: &str, r: impl FnOnce(&RemotingCommand) -> RemotingCommand) -> RemotingCommand {
            self.tick(self.now_ms);
            let (token, got_to, got, cmd) = self.control();
            assert_eq!((got, got_to.as_str()), (request, to), "the request sent");
            let answer = r(&cmd);
            self.answer(token, Ok(answer));
            cmd
        }

        /// Answers every heartbeat sent so far (granting the lease or not).
        fn answer_heartbeats(&mut self, granted: bool) {
            let beats: Vec<u64> = self.sent.iter().filter(|(_, _, r, _)| matches!(r, Request::Heartbeat { .. })).map(|(t, _, _, _)| *t).collect();
            self.sent.retain(|(_, _, r, _)| !matches!(r, Request::Heartbeat { .. }));
            for token in beats {
                let r = RemotingCommand::request(0).create_response(rs::SUCCESS, None);
                self.answer(token, Ok(if granted { r.with_ext("leaseGranted", "true") } else { r }));
            }
        }

        fn drain(&mut self) -> Vec<Action> {
            std::mem::take(&mut self.actions)
        }
    }

    fn ok(cmd: &RemotingCommand) -> RemotingCommand {
        cmd.create_response(rs::SUCCESS, None)
    }

    fn leader_is(addr: &str) -> impl FnOnce(&RemotingCommand) -> RemotingCommand + '_ {
        move |c| ok(c).with_ext("controllerLeaderAddress", addr).with_ext("controllerLeaderId", "n1")
    }

    fn master_answer(c: &RemotingCommand, id: i64, addr: &str, epoch: i32, sss: &[i64], sss_epoch: i32) -> RemotingCommand {
        ok(c).with_ext("masterBrokerId", id.to_string()).with_ext("masterAddress", addr).with_ext("masterEpoch", epoch.to_string()).with_ext("syncStateSetEpoch", sss_epoch.to_string()).with_body(
            SyncStateSet { sync_state_set: sss.to_vec(), sync_state_set_epoch: sss_epoch }.encode(),
        )
    }

    /// A fresh broker up to `Running`, the controller naming `master` at epoch 1.
    fn registered(master: Option<(i64, &str)>) -> Harness {
        let mut h = Harness::new(StoredIdentity::None);
        h.step(Request::Metadata, C0, leader_is(C1));
        h.step(Request::NextBrokerId, C1, |c| ok(c).with_ext("nextBrokerId", "2"));
        assert_eq!(h.drain(), vec![Action::PersistTemp { text: "c#broker-a#2#10.0.0.2:10911;1700000000000".into() }]);
        h.tick(h.now_ms);
        assert!(h.sent.is_empty(), "nothing is sent while the temp file is written");
        h.m.on_persisted();
        let cmd = h.step(Request::ApplyBrokerId, C1, ok);
        assert_eq!(cmd.ext_fields.get("registerCheckCode"), Some("10.0.0.2:10911;1700000000000"));
        assert_eq!(h.drain(), vec![Action::PersistIdentity { text: "c#broker-a#2".into() }]);
        h.m.on_persisted();
        assert_eq!(h.m.controller_id(), Some(2));
        h.step(Request::Register, C1, |c| match master {
            Some((id, addr)) => master_answer(c, id, addr, 1, &[id], 1),
            None => ok(c),
        });
        h
    }

    #[test]
    fn identity_files_parse_as_apache_writes_them() {
        let s = settings();
        let check = |identity: Option<&str>, temp: Option<&str>, expected: Result<StoredIdentity, IdentityError>| {
            assert_eq!(parse_identity(&s, identity, temp), expected, "{identity:?} {temp:?}");
        };
        check(None, None, Ok(StoredIdentity::None));
        check(Some(""), Some("  \n"), Ok(StoredIdentity::None));
        check(Some("c#broker-a#3\n"), None, Ok(StoredIdentity::Assigned { id: 3 }));
        check(Some("c#broker-a#3"), Some("c#broker-a#4#x;1"), Ok(StoredIdentity::Assigned { id: 3 }));
        check(None, Some("c#broker-a#4#10.0.0.2:10911;17"), Ok(StoredIdentity::Temp { id: 4, check_code: "10.0.0.2:10911;17".into() }));
        check(Some("c#broker-a"), None, Err(IdentityError::Malformed { file: IDENTITY_FILE, text: "c#broker-a".into() }));
        check(Some("c#broker-a#x"), None, Err(IdentityError::Malformed { file: IDENTITY_FILE, text: "c#broker-a#x".into() }));
        check(None, Some("c#broker-a#4"), Err(IdentityError::Malformed { file: IDENTITY_TEMP_FILE, text: "c#broker-a#4".into() }));
        check(
            Some("other#broker-a#3"),
            None,
            Err(IdentityError::Mismatch { file: IDENTITY_FILE, found: "other".into(), found_name: "broker-a".into(), cluster: "c".into(), name: "broker-a".into() }),
        );
        assert_eq!(identity_text(&s, 7, None), "c#broker-a#7");
        assert_eq!(identity_text(&s, 7, Some("a;1")), "c#broker-a#7#a;1");
    }

    #[test]
    fn a_fresh_broker_registers_and_follows_the_master_it_is_told() {
        let mut h = registered(Some((1, "10.0.0.1:10911")));
        assert_eq!(h.drain(), vec![Action::ChangeRole(Role::Slave { epoch: 1, master_id: 1, master_address: "10.0.0.1:10911".into() })]);
        assert!(!h.m.may_acknowledge(h.now_ms), "a slave acknowledges nothing");
        // Heartbeats go to every controller with the store's figures.
        h.answer_heartbeats(true);
        assert!(!h.m.may_acknowledge(h.now_ms), "a granted lease does not make a slave a master");
        h.tick(h.now_ms + 1_000);
        let beats: Vec<_> = h.sent.iter().filter(|(_, _, r, _)| matches!(r, Request::Heartbeat { .. })).map(|(_, to, _, c)| (to.clone(), c.clone())).collect();
        assert_eq!(beats.iter().map(|(to, _)| to.as_str()).collect::<Vec<_>>(), [C0, C1]);
        for field in [("brokerId", "2"), ("brokerName", "broker-a"), ("brokerAddr", ME), ("maxOffset", "100"), ("confirmOffset", "90"), ("heartbeatTimeoutMills", "5000"), ("epoch", "1")] {
            assert_eq!(beats[0].1.ext_fields.get(field.0), Some(field.1), "{field:?}");
        }
    }

    #[test]
    fn a_set_without_a_master_elects_this_broker_and_it_acknowledges_within_its_lease() {
        let mut h = registered(None);
        assert!(h.drain().is_empty(), "no master yet: no role");
        let cmd = h.step(Request::Elect, C1, |c| {
            let body = ElectMasterResponseBody { broker_member_group: None, sync_state_set: vec![2] };
            ok(c).with_ext("masterBrokerId", "2").with_ext("masterAddress", ME).with_ext("masterEpoch", "1").with_ext("syncStateSetEpoch", "1").with_body(body.encode())
        });
        assert_eq!((cmd.ext_fields.get("brokerId"), cmd.ext_fields.get("designateElect")), (Some("2"), Some("false")));
        assert_eq!(h.drain(), vec![Action::ChangeRole(Role::Master { epoch: 1 }), Action::SyncStateSet { epoch: 1, members: [2].into() }]);
        assert!(!h.m.may_acknowledge(h.now_ms), "no lease granted yet");

        // A granted heartbeat sent at t=10 000 leases until 10 000 + 5 000 - 100.
        h.answer_heartbeats(false);
        h.tick(10_000);
        let (token, _, _, _) = h.sent.iter().find(|(_, to, r, _)| to == C1 && matches!(r, Request::Heartbeat { sent_ms: 10_000 })).cloned().expect("heartbeat");
        h.now_ms = 12_000;
        h.answer(token, Ok(RemotingCommand::request(0).create_response(rs::SUCCESS, None).with_ext("leaseGranted", "true")));
        for (at, expected) in [(10_000, true), (14_899, true), (14_900, false), (20_000, false)] {
            assert_eq!(h.m.may_acknowledge(at), expected, "at {at} ms");
        }
        // A heartbeat answered without a grant (a follower, or a deposed leader) extends nothing.
        h.answer_heartbeats(false);
        h.tick(14_000);
        let (token, _, _, _) = h.sent.iter().rev().find(|(_, to, r, _)| to == C0 && matches!(r, Request::Heartbeat { sent_ms: 14_000 })).cloned().expect("heartbeat");
        h.answer(token, Ok(RemotingCommand::request(0).create_response(rs::SUCCESS, None)));
        assert!(!h.m.may_acknowledge(14_900));
        // Without the lease setting, mastership alone decides.
        h.m.settings.master_lease = false;
        assert!(h.m.may_acknowledge(1_000_000));
    }

    #[test]
    fn only_a_higher_epoch_changes_the_role_and_a_masterless_one_isolates() {
        let mut h = registered(Some((2, ME)));
        assert_eq!(h.drain(), vec![Action::ChangeRole(Role::Master { epoch: 1 }), Action::SyncStateSet { epoch: 1, members: [2].into() }]);
        let notify = |m: &mut ReplicasManager, id: Option<i64>, addr: Option<&str>, epoch: i32, sss: &[i64], sss_epoch: i32| {
            let header = NotifyBrokerRoleChangedRequestHeader { master_address: addr.map(str::to_string), master_epoch: Some(epoch), sync_state_set_epoch: Some(sss_epoch), master_broker_id: id };
            m.on_notify(&header, &SyncStateSet { sync_state_set: sss.to_vec(), sync_state_set_epoch: sss_epoch }.encode())
        };
        // Same epoch: only a newer SyncStateSet matters.
        assert_eq!(notify(&mut h.m, Some(2), Some(ME), 1, &[2, 3], 2), vec![Action::SyncStateSet { epoch: 2, members: [2, 3].into() }]);
        assert_eq!(notify(&mut h.m, Some(2), Some(ME), 1, &[2], 1), vec![], "an older SyncStateSet epoch");
        assert_eq!(notify(&mut h.m, Some(3), Some("10.0.0.3:10911"), 1, &[3], 5), vec![], "same epoch, another master: ignored");
        // A higher epoch names broker 3: this one follows.
        assert_eq!(
            notify(&mut h.m, Some(3), Some("10.0.0.3:10911"), 2, &[3], 3),
            vec![Action::ChangeRole(Role::Slave { epoch: 2, master_id: 3, master_address: "10.0.0.3:10911".into() })]
        );
        assert_eq!(notify(&mut h.m, Some(2), Some(ME), 2, &[2], 9), vec![], "no second master of epoch 2");
        assert_eq!(notify(&mut h.m, Some(2), Some(ME), 1, &[2], 9), vec![], "an older epoch");
        // Elected at epoch 3, then epoch 4 has no master: isolated at once, asks to be elected.
        assert_eq!(notify(&mut h.m, Some(2), Some(ME), 3, &[2], 4), vec![Action::ChangeRole(Role::Master { epoch: 3 }), Action::SyncStateSet { epoch: 4, members: [2].into() }]);
        assert_eq!(notify(&mut h.m, None, None, 4, &[], 5), vec![Action::ChangeRole(Role::Isolated)]);
        assert!(!h.m.may_acknowledge(0));
        h.tick(h.now_ms);
        assert_eq!(h.control().2, Request::Elect);
    }

    #[test]
    fn leader_changes_refusals_and_lost_answers_are_retried() {
        let mut h = Harness::new(StoredIdentity::Temp { id: 4, check_code: "10.0.0.2:10911;17".into() });
        // No controller reachable: round robin, one request at a time, 1 s apart.
        h.tick(0);
        let (t, to, r, _) = h.control();
        assert_eq!((to.as_str(), r), (C0, Request::Metadata));
        h.tick(10);
        assert!(h.sent.is_empty(), "one control request in flight");
        h.answer(t, Err("connection refused".into()));
        h.tick(500);
        assert!(h.sent.is_empty(), "waits RETRY_INTERVAL_MS");
        h.now_ms = 10 + RETRY_INTERVAL_MS;
        h.step(Request::Metadata, C1, leader_is(C0));
        // The stored temp id is applied first; the leader moved: 2007 naming the new one.
        let cmd = h.step(Request::ApplyBrokerId, C0, |c| c.create_response(rs::CONTROLLER_NOT_LEADER, Some("The controller is not in leader state")).with_ext("controllerLeaderAddress", C1));
        assert_eq!(cmd.ext_fields.get("appliedBrokerId"), Some("4"));
        // Refused: id taken by another broker → temp file dropped, a new id asked for.
        h.step(Request::ApplyBrokerId, C1, |c| c.create_response(rs::CONTROLLER_BROKER_ID_INVALID, Some("taken")));
        assert_eq!(h.drain(), vec![Action::ClearTemp]);
        h.now_ms += RETRY_INTERVAL_MS;
        h.step(Request::NextBrokerId, C1, |c| ok(c).with_ext("nextBrokerId", "5"));
        assert_eq!(h.drain(), vec![Action::PersistTemp { text: "c#broker-a#5#10.0.0.2:10911;1700000000000".into() }]);
        // A stale answer (an old token) changes nothing.
        h.answer(t, Ok(RemotingCommand::request(0).create_response(rs::SUCCESS, None)));
        assert!(h.drain().is_empty());
    }

    #[test]
    fn a_running_broker_syncs_replica_info_and_reregisters_when_forgotten() {
        let mut h = registered(Some((1, "10.0.0.1:10911")));
        h.drain();
        h.tick(1_000);
        assert!(!h.sent.iter().any(|(_, _, r, _)| !matches!(r, Request::Heartbeat { .. })), "replica info waits its period");
        h.now_ms = 5_000;
        // The controller elected broker 3 at epoch 2 (a missed 1008): learnt from 1004.
        h.step(Request::ReplicaInfo, C1, |c| master_answer(c, 3, "10.0.0.3:10911", 2, &[3], 2));
        assert_eq!(h.drain(), vec![Action::ChangeRole(Role::Slave { epoch: 2, master_id: 3, master_address: "10.0.0.3:10911".into() })]);
        // The controller lost this broker (metadata cleaned): register again.
        h.now_ms = 10_000;
        h.step(Request::ReplicaInfo, C1, |c| c.create_response(rs::CONTROLLER_BROKER_METADATA_NOT_EXIST, None));
        h.step(Request::Register, C1, |c| master_answer(c, 3, "10.0.0.3:10911", 2, &[3], 2));
        assert!(h.drain().is_empty(), "same epoch: no role change");
        // The leader is re-read every syncControllerMetadataPeriod.
        h.now_ms = 20_000;
        h.step(Request::ReplicaInfo, C1, |c| master_answer(c, 3, "10.0.0.3:10911", 2, &[3], 2));
        h.step(Request::Metadata, C1, leader_is(C0));
        h.now_ms = 25_000;
        h.step(Request::ReplicaInfo, C0, |c| master_answer(c, 3, "10.0.0.3:10911", 2, &[3], 2));
    }

    proptest::proptest! {
        /// Whatever the controller says in whatever order: the known epoch never
        /// decreases, each epoch brings at most one role change, mastership only from a
        /// notification naming this broker at that epoch, and a masterless higher epoch
        /// never leaves it master.
        #[test]
        fn roles_follow_epochs_whatever_the_order(events in proptest::collection::vec((proptest::option::of(1i64..4), 0i32..8, 0i32..8), 1..40)) {
            let mut h = registered(Some((1, "10.0.0.1:10911")));
            h.drain();
            let mut epochs_changed = BTreeSet::new();
            for (id, epoch, sss_epoch) in events {
                let before = h.m.master_epoch();
                let header = NotifyBrokerRoleChangedRequestHeader {
                    master_address: id.map(|i| format!("10.0.0.{i}:10911")),
                    master_epoch: Some(epoch),
                    sync_state_set_epoch: Some(sss_epoch),
                    master_broker_id: id,
                };
                let out = h.m.on_notify(&header, &SyncStateSet { sync_state_set: id.into_iter().collect(), sync_state_set_epoch: sss_epoch }.encode());
                proptest::prop_assert!(h.m.master_epoch() >= before);
                for a in &out {
                    if let Action::ChangeRole(role) = a {
                        match role {
                            Role::Master { epoch: e } => proptest::prop_assert!(*e == epoch && id == Some(2) && epochs_changed.insert(*e)),
                            Role::Slave { epoch: e, master_id, .. } => proptest::prop_assert!(*e == epoch && Some(*master_id) == id && epochs_changed.insert(*e)),
                            Role::Isolated => proptest::prop_assert!(id.is_none() && epoch > before),
                        }
                    }
                }
                if id.is_none() && epoch > before {
                    let master = matches!(h.m.role(), Role::Master { .. });
                    proptest::prop_assert!(!master, "master after a masterless epoch {}", epoch);
                }
            }
        }
    }

    #[test]
    fn a_master_reports_its_sync_state_set_and_follows_fencing() {
        let mut h = registered(Some((2, ME)));
        h.drain();
        h.m.propose_sync_state_set([2, 3].into());
        let cmd = h.step(Request::AlterSyncStateSet, C1, |c| ok(c).with_body(SyncStateSet { sync_state_set: vec![2, 3], sync_state_set_epoch: 2 }.encode()));
        assert_eq!((cmd.ext_fields.get("masterBrokerId"), cmd.ext_fields.get("masterEpoch")), (Some("2"), Some("1")));
        assert_eq!(SyncStateSet::decode(&cmd.body).expect("body"), SyncStateSet { sync_state_set: vec![2, 3], sync_state_set_epoch: 1 });
        assert_eq!(h.drain(), vec![Action::SyncStateSet { epoch: 2, members: [2, 3].into() }]);
        h.m.propose_sync_state_set([2, 3].into());
        h.tick(h.now_ms);
        assert!(h.sent.iter().all(|(_, _, r, _)| matches!(r, Request::Heartbeat { .. })), "an unchanged set is not reported");
        // Fenced (another master epoch): the replica info is read at once.
        h.m.propose_sync_state_set([2].into());
        h.step(Request::AlterSyncStateSet, C1, |c| c.create_response(rs::CONTROLLER_FENCED_MASTER_EPOCH, None));
        h.step(Request::ReplicaInfo, C1, |c| master_answer(c, 3, "10.0.0.3:10911", 2, &[3], 3));
        assert_eq!(h.drain(), vec![Action::ChangeRole(Role::Slave { epoch: 2, master_id: 3, master_address: "10.0.0.3:10911".into() })]);
        h.m.propose_sync_state_set([2].into());
        h.tick(h.now_ms);
        assert!(h.sent.iter().all(|(_, _, r, _)| matches!(r, Request::Heartbeat { .. })), "a slave proposes nothing");
    }
}
