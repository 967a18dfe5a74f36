//! The controller's replicated state machine: a port of Apache's
//! `controller/impl/manager/ReplicasInfoManager.java` (+ `SyncStateInfo`,
//! `BrokerReplicaInfo`), docs/design/controller.md §2.1.
//!
//! Owns: every broker set's replicas (broker id → address, register check code), the
//! next broker id to hand out, the master and master epoch, the SyncStateSet and its
//! epoch, and (RingMQ) each epoch's start offsets and the last elections.
//!
//! Invariants:
//! - pure: no IO, no clock, no randomness; `apply` is a function of (state, command), so
//!   every node that applies the same log holds the same state (property-tested);
//! - `master_epoch` and `sss_epoch` of a set never decrease while the set exists;
//! - a master, when set, is a replica of its set; the SyncStateSet holds replicas only;
//! - bounded: at most `BROKER_SETS_MAX` sets, `REPLICAS_PER_SET_MAX` replicas per set,
//!   `ELECTION_HISTORY_MAX` elections and `EPOCH_STARTS_MAX` epoch starts per set.
//!
//! Requests are split as Apache splits them: the `plan_*` functions run on the leader
//! against its applied state and its liveness view (answering refusals that need no log
//! entry, e.g. 2011 MASTER_STILL_EXIST) and produce a `Cmd`; `apply` re-checks what the
//! command carries and answers with Apache's codes and messages.

use crate::cmd::{Candidate, Cmd, CmdOutcome, ElectionRecord, Trigger};
use crate::policy::{self, Liveness};
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::response_code as rc;
use ringmq_client::remoting::controller::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader, BrokerMemberGroup, BrokerReplicasInfo, CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader, ElectMasterResponseBody, ElectMasterResponseHeader, GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader, RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader,
    ReplicaIdentity, ReplicasInfo, SyncStateSet,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Broker sets one controller group keeps.
pub const BROKER_SETS_MAX: usize = 4096;
/// Replicas (broker ids) per broker set.
pub const REPLICAS_PER_SET_MAX: usize = 16;
/// Elections remembered per broker set.
pub const ELECTION_HISTORY_MAX: usize = 64;
/// Epoch start records kept per broker set.
pub const EPOCH_STARTS_MAX: usize = 64;
/// `MixAll.FIRST_BROKER_CONTROLLER_ID`: the first id of a new broker set.
pub const FIRST_BROKER_CONTROLLER_ID: i64 = 1;
/// `brokerId` of an election the controller itself triggers.
pub const CONTROLLER_TRIGGER_ID: i64 = -1;

/// One replica of a broker set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub address: String,
    /// "addr;millis" the broker applied its id with (`registerCheckCode`).
    pub register_check_code: String,
}

/// One broker set (one `brokerName`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerSet {
    pub cluster: String,
    pub name: String,
    pub next_assign_id: i64,
    pub replicas: BTreeMap<i64, Replica>,
    pub master: Option<i64>,
    /// 0 = never elected.
    pub master_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    pub sss_epoch: i32,
    /// (RingMQ) epoch → start physical offset per shard.
    pub epoch_starts: BTreeMap<i32, Vec<u64>>,
    /// (RingMQ) the last elections, oldest first.
    pub history: VecDeque<ElectionRecord>,
}

impl BrokerSet {
    fn new(cluster: &str, name: &str) -> Self {
        Self {
            cluster: cluster.to_string(),
            name: name.to_string(),
            next_assign_id: FIRST_BROKER_CONTROLLER_ID,
            replicas: BTreeMap::new(),
            master: None,
            master_epoch: 0,
            sync_state_set: BTreeSet::new(),
            sss_epoch: 0,
            epoch_starts: BTreeMap::new(),
            history: VecDeque::new(),
        }
    }

    fn address(&self, id: Option<i64>) -> Option<String> {
        id.and_then(|id| self.replicas.get(&id)).map(|r| r.address.clone())
    }

    fn sync_state_set_body(&self) -> Vec<u8> {
        SyncStateSet { sync_state_set: self.sync_state_set.iter().copied().collect(), sync_state_set_epoch: self.sss_epoch }
            .encode()
    }

    fn member_group(&self) -> BrokerMemberGroup {
        BrokerMemberGroup {
            cluster: self.cluster.clone(),
            broker_name: self.name.clone(),
            broker_addrs: self.replicas.iter().map(|(id, r)| (*id, r.address.clone())).collect(),
        }
    }
}

/// Java's `String.valueOf(Long)` for an optional id, as Apache's messages print it.
fn java_id(id: Option<i64>) -> String {
    id.map_or_else(|| "null".to_string(), |id| id.to_string())
}

/// Every broker set, by `brokerName`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    pub sets: BTreeMap<String, BrokerSet>,
}

impl ControllerState {
    pub fn set(&self, name: &str) -> Option<&BrokerSet> {
        self.sets.get(name)
    }

    /// Applies one committed command. Deterministic; re-checks the command's
    /// preconditions and refuses (changing nothing) when they no longer hold.
    pub fn apply(&mut self, cmd: &Cmd) -> CmdOutcome {
        match cmd {
            Cmd::ApplyBrokerId { cluster, name, id, address, check_code } => {
                self.apply_broker_id(cluster, name, *id, address, check_code)
            }
            Cmd::UpdateBrokerAddress { name, id, address, .. } => {
                match self.sets.get_mut(name).and_then(|s| s.replicas.get_mut(id)) {
                    Some(replica) => {
                        replica.address = address.clone();
                        CmdOutcome::success()
                    }
                    None => CmdOutcome::refused(
                        rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                        format!("BrokerId: {id} hasn't been registered in broker-set: {name}"),
                    ),
                }
            }
            Cmd::AlterSyncStateSet { name, master, master_epoch, sss_epoch, new_set } => {
                self.apply_alter(name, *master, *master_epoch, *sss_epoch, new_set)
            }
            Cmd::ElectMaster { name, expect_master_epoch, expect_sss_epoch, new_master, record } => {
                self.apply_elect(name, *expect_master_epoch, *expect_sss_epoch, *new_master, record)
            }
            Cmd::CleanBrokerData { name, ids } => self.apply_clean(name, ids.as_ref()),
            Cmd::RecordEpochStart { name, epoch, starts } => {
                let Some(set) = self.sets.get_mut(name) else {
                    return CmdOutcome::refused(rc::CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed");
                };
                if *epoch != set.master_epoch || set.epoch_starts.contains_key(epoch) {
                    return CmdOutcome::refused(
                        rc::CONTROLLER_INVALID_REQUEST,
                        format!("epoch {epoch} is not the current master epoch {} or is already recorded", set.master_epoch),
                    );
                }
                set.epoch_starts.insert(*epoch, starts.clone());
                while set.epoch_starts.len() > EPOCH_STARTS_MAX {
                    set.epoch_starts.pop_first();
                }
                CmdOutcome::success()
            }
        }
    }

    fn apply_broker_id(&mut self, cluster: &str, name: &str, id: i64, address: &str, check_code: &str) -> CmdOutcome {
        let ok = CmdOutcome::success().with_header(&ApplyBrokerIdResponseHeader {
            cluster_name: Some(cluster.to_string()),
            broker_name: Some(name.to_string()),
        });
        let replica = Replica { address: address.to_string(), register_check_code: check_code.to_string() };
        match self.sets.get_mut(name) {
            None => {
                if id != FIRST_BROKER_CONTROLLER_ID {
                    return CmdOutcome::refused(
                        rc::CONTROLLER_BROKER_ID_INVALID,
                        format!(
                            "Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {id}"
                        ),
                    );
                }
                if self.sets.len() >= BROKER_SETS_MAX {
                    return CmdOutcome::refused(
                        rc::CONTROLLER_INVALID_REQUEST,
                        format!("too many broker sets: at most {BROKER_SETS_MAX} (BROKER_SETS_MAX)"),
                    );
                }
                let mut set = BrokerSet::new(cluster, name);
                set.replicas.insert(id, replica);
                set.next_assign_id += 1;
                self.sets.insert(name.to_string(), set);
                ok
            }
            Some(set) => match set.replicas.get(&id) {
                Some(existing) if existing.register_check_code == check_code => ok,
                Some(_) => CmdOutcome::refused(
                    rc::CONTROLLER_BROKER_ID_INVALID,
                    format!("Fail to apply brokerId: {id} in broker-set: {name}"),
                ),
                None if id <= 0 || set.replicas.len() >= REPLICAS_PER_SET_MAX => CmdOutcome::refused(
                    rc::CONTROLLER_BROKER_ID_INVALID,
                    format!(
                        "Fail to apply brokerId: {id} in broker-set: {name} (ids are positive, at most {REPLICAS_PER_SET_MAX} replicas)"
                    ),
                ),
                None => {
                    set.replicas.insert(id, replica);
                    // BrokerReplicaInfo.addBroker increments on every add.
                    set.next_assign_id += 1;
                    ok
                }
            },
        }
    }

    fn apply_alter(&mut self, name: &str, master: i64, master_epoch: i32, sss_epoch: i32, new_set: &BTreeSet<i64>) -> CmdOutcome {
        let Some(set) = self.sets.get_mut(name) else {
            return CmdOutcome::refused(rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed");
        };
        if *new_set == set.sync_state_set {
            return CmdOutcome::refused(
                rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
            );
        }
        if set.master != Some(master) {
            return CmdOutcome::refused(
                rc::CONTROLLER_INVALID_MASTER,
                format!(
                    "Rejecting alter syncStateSet request because the current leader is:{{{}}}, not {{{master}}}",
                    java_id(set.master)
                ),
            );
        }
        if master_epoch != set.master_epoch {
            return CmdOutcome::refused(
                rc::CONTROLLER_FENCED_MASTER_EPOCH,
                format!(
                    "Rejecting alter syncStateSet request because the current master epoch is:{{{}}}, not {{{master_epoch}}}",
                    set.master_epoch
                ),
            );
        }
        if sss_epoch != set.sss_epoch {
            return CmdOutcome::refused(
                rc::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                format!(
                    "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{}}}, not {{{sss_epoch}}}",
                    set.sss_epoch
                ),
            );
        }
        if let Some(missing) = new_set.iter().find(|id| !set.replicas.contains_key(id)) {
            return CmdOutcome::refused(
                rc::CONTROLLER_INVALID_REPLICAS,
                format!("Rejecting alter syncStateSet request because the replicas {{{missing}}} don't exist"),
            );
        }
        if !new_set.contains(&master) {
            return CmdOutcome::refused(
                rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                format!(
                    "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {{{master}}}"
                ),
            );
        }
        set.sync_state_set = new_set.clone();
        set.sss_epoch += 1;
        CmdOutcome::success()
            .with_header(&AlterSyncStateSetResponseHeader { new_sync_state_set_epoch: set.sss_epoch })
            .with_body(set.sync_state_set_body())
    }

    fn apply_elect(
        &mut self,
        name: &str,
        expect_master_epoch: i32,
        expect_sss_epoch: i32,
        new_master: Option<i64>,
        record: &ElectionRecord,
    ) -> CmdOutcome {
        let Some(set) = self.sets.get_mut(name) else {
            return CmdOutcome::refused(rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered");
        };
        if expect_master_epoch != set.master_epoch || expect_sss_epoch != set.sss_epoch {
            return CmdOutcome::refused(
                rc::CONTROLLER_FENCED_MASTER_EPOCH,
                format!(
                    "Rejecting elect master request because the current master epoch is:{{{}}} and syncStateSet epoch is:{{{}}}, not {{{expect_master_epoch}}} and {{{expect_sss_epoch}}}",
                    set.master_epoch, set.sss_epoch
                ),
            );
        }
        if let Some(m) = new_master {
            if !set.replicas.contains_key(&m) {
                return CmdOutcome::refused(rc::CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master");
            }
        }
        set.master = new_master;
        set.master_epoch += 1;
        let mut record = record.clone();
        record.master_epoch = set.master_epoch;
        record.new_master = new_master;
        set.history.push_back(record);
        while set.history.len() > ELECTION_HISTORY_MAX {
            set.history.pop_front();
        }
        match new_master {
            Some(m) => {
                set.sync_state_set = BTreeSet::from([m]);
                set.sss_epoch += 1;
                CmdOutcome::success()
                    .with_header(&ElectMasterResponseHeader {
                        master_broker_id: Some(m),
                        master_address: set.address(Some(m)),
                        master_epoch: Some(set.master_epoch),
                        sync_state_set_epoch: Some(set.sss_epoch),
                    })
                    .with_body(
                        ElectMasterResponseBody { broker_member_group: Some(set.member_group()), sync_state_set: vec![m] }
                            .encode(),
                    )
            }
            None => CmdOutcome::refused(
                rc::CONTROLLER_MASTER_NOT_AVAILABLE,
                "Old master has down and failed to elect a new broker master",
            ),
        }
    }

    fn apply_clean(&mut self, name: &str, ids: Option<&BTreeSet<i64>>) -> CmdOutcome {
        let Some(set) = self.sets.get_mut(name) else {
            return CmdOutcome::refused(
                rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                format!("Broker {name} is not existed,clean broker data failure."),
            );
        };
        match ids {
            Some(ids) if !ids.is_empty() => {
                for id in ids {
                    set.replicas.remove(id);
                    set.sync_state_set.remove(id);
                }
                // (RingMQ) a removed master is no master: a master is always a replica.
                if set.master.is_some_and(|m| ids.contains(&m)) {
                    set.master = None;
                }
                // Apache drops a table once it is empty, and a set missing either table
                // no longer exists (`isContainsBroker`).
                if set.replicas.is_empty() || set.sync_state_set.is_empty() {
                    self.sets.remove(name);
                }
            }
            _ => {
                self.sets.remove(name);
            }
        }
        CmdOutcome::success()
    }

    // ---- leader-side planning and reads (Apache's ReplicasInfoManager request methods) ----

    /// CONTROLLER_APPLY_BROKER_ID: every check happens at apply.
    pub fn plan_apply_broker_id(req: &ApplyBrokerIdRequestHeader) -> Cmd {
        let address = req.register_check_code.split(';').next().unwrap_or_default().to_string();
        Cmd::ApplyBrokerId {
            cluster: req.cluster_name.clone(),
            name: req.broker_name.clone(),
            id: req.applied_broker_id,
            address,
            check_code: req.register_check_code.clone(),
        }
    }

    /// CONTROLLER_GET_NEXT_BROKER_ID.
    pub fn next_broker_id(&self, cluster: &str, name: &str) -> CmdOutcome {
        let next = self.sets.get(name).map_or(FIRST_BROKER_CONTROLLER_ID, |s| s.next_assign_id);
        CmdOutcome::success().with_header(&GetNextBrokerIdResponseHeader {
            cluster_name: Some(cluster.to_string()),
            broker_name: Some(name.to_string()),
            next_broker_id: Some(next),
        })
    }

    /// CONTROLLER_ALTER_SYNC_STATE_SET: the liveness check (2006) here, the rest at apply.
    pub fn plan_alter(
        &self,
        req: &AlterSyncStateSetRequestHeader,
        body: &SyncStateSet,
        liveness: &dyn Liveness,
    ) -> Result<Cmd, CmdOutcome> {
        let new_set: BTreeSet<i64> = body.sync_state_set.iter().copied().collect();
        if let Some(set) = self.sets.get(&req.broker_name) {
            for id in new_set.iter().filter(|id| set.replicas.contains_key(id)) {
                if liveness.live(&set.cluster, &set.name, *id).is_none() {
                    return Err(CmdOutcome::refused(
                        rc::CONTROLLER_BROKER_NOT_ALIVE,
                        format!("Rejecting alter syncStateSet request because the replicas {{{id}}} don't alive"),
                    ));
                }
            }
        }
        Ok(Cmd::AlterSyncStateSet {
            name: req.broker_name.clone(),
            master: req.master_broker_id,
            master_epoch: req.master_epoch,
            sss_epoch: body.sync_state_set_epoch,
            new_set,
        })
    }

    /// CONTROLLER_ELECT_MASTER: the policy choice. Refusals that change nothing
    /// (2010, 2011, 2012) come back as `Err`; a controller-triggered election with no
    /// candidate is a command (the master is cleared, 2004).
    #[allow(clippy::too_many_arguments)]
    pub fn plan_elect(
        &self,
        req: &ElectMasterRequestHeader,
        unclean: bool,
        liveness: &dyn Liveness,
        raft_term: u64,
        leader_wall_ms: u64,
    ) -> Result<Cmd, CmdOutcome> {
        let Some(set) = self.sets.get(&req.broker_name) else {
            return Err(CmdOutcome::refused(rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"));
        };
        let all: BTreeSet<i64> = set.replicas.keys().copied().collect();
        let old = set.master;
        let mut new_master = (set.master_epoch == 0).then_some(req.broker_id);
        if new_master.is_none() || new_master == Some(CONTROLLER_TRIGGER_ID) {
            let prefer = req.designate_elect.then_some(req.broker_id);
            new_master =
                policy::elect(&set.cluster, &set.name, &set.sync_state_set, unclean.then_some(&all), old, prefer, liveness);
        }
        if new_master.is_some() && new_master == old {
            return Err(CmdOutcome::refused(
                rc::CONTROLLER_MASTER_STILL_EXIST,
                format!(
                    "The old master {} is still alive, not need to elect new master for broker {}",
                    java_id(old),
                    set.name
                ),
            )
            .with_header(&ElectMasterResponseHeader {
                master_broker_id: old,
                master_address: set.address(old),
                master_epoch: Some(set.master_epoch),
                sync_state_set_epoch: Some(set.sss_epoch),
            })
            .with_body(
                ElectMasterResponseBody {
                    broker_member_group: None,
                    sync_state_set: set.sync_state_set.iter().copied().collect(),
                }
                .encode(),
            ));
        }
        let controller_triggered = req.broker_id == CONTROLLER_TRIGGER_ID;
        if new_master.is_none() && !controller_triggered {
            return Err(CmdOutcome::refused(rc::CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master"));
        }
        let trigger = if req.designate_elect {
            Trigger::Admin
        } else if controller_triggered {
            Trigger::Controller
        } else {
            Trigger::Broker
        };
        let candidates = all
            .iter()
            .map(|&id| {
                let info = liveness.live(&set.cluster, &set.name, id);
                Candidate {
                    id,
                    alive: info.is_some(),
                    epoch: info.map_or(0, |i| i.epoch),
                    max_offset: info.map_or(0, |i| i.max_offset),
                    priority: info.map_or(i32::MAX, |i| i.priority),
                }
            })
            .collect();
        Ok(Cmd::ElectMaster {
            name: set.name.clone(),
            expect_master_epoch: set.master_epoch,
            expect_sss_epoch: set.sss_epoch,
            new_master,
            record: ElectionRecord {
                master_epoch: set.master_epoch + 1,
                old_master: old,
                new_master,
                trigger,
                candidates,
                raft_term,
                leader_wall_ms,
            },
        })
    }

    /// CONTROLLER_REGISTER_BROKER: the answer, and the address update to commit first
    /// when the broker moved.
    pub fn register_broker(
        &self,
        req: &RegisterBrokerToControllerRequestHeader,
        liveness: &dyn Liveness,
    ) -> Result<(CmdOutcome, Option<Cmd>), CmdOutcome> {
        let name = &req.broker_name;
        let Some(set) = self.sets.get(name) else {
            return Err(CmdOutcome::refused(
                rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!("Broker-set: {name} hasn't been registered in controller"),
            ));
        };
        let Some(replica) = set.replicas.get(&req.broker_id) else {
            return Err(CmdOutcome::refused(
                rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!("BrokerId: {} hasn't been registered in broker-set: {name}", req.broker_id),
            ));
        };
        let mut header = RegisterBrokerToControllerResponseHeader {
            cluster_name: Some(req.cluster_name.clone()),
            broker_name: Some(name.clone()),
            ..Default::default()
        };
        if let Some(m) = set.master.filter(|m| liveness.live(&set.cluster, name, *m).is_some()) {
            header.master_broker_id = Some(m);
            header.master_address = set.address(Some(m));
            header.master_epoch = Some(set.master_epoch);
            header.sync_state_set_epoch = Some(set.sss_epoch);
        }
        let update = (replica.address != req.broker_address).then(|| Cmd::UpdateBrokerAddress {
            cluster: req.cluster_name.clone(),
            name: name.clone(),
            id: req.broker_id,
            address: req.broker_address.clone(),
        });
        Ok((CmdOutcome::success().with_header(&header).with_body(set.sync_state_set_body()), update))
    }

    /// CONTROLLER_GET_REPLICA_INFO.
    pub fn replica_info(&self, name: &str) -> CmdOutcome {
        match self.sets.get(name) {
            Some(set) => CmdOutcome::success()
                .with_header(&GetReplicaInfoResponseHeader {
                    master_broker_id: set.master,
                    master_address: set.address(set.master),
                    master_epoch: Some(set.master_epoch),
                })
                .with_body(set.sync_state_set_body()),
            None => CmdOutcome::refused(rc::CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed"),
        }
    }

    /// CONTROLLER_GET_SYNC_STATE_DATA: the named sets that exist.
    pub fn sync_state_data(&self, names: &[String], liveness: &dyn Liveness) -> CmdOutcome {
        let mut info = BrokerReplicasInfo::default();
        for name in names {
            let Some(set) = self.sets.get(name) else { continue };
            let (mut in_sync, mut not_in_sync) = (Vec::new(), Vec::new());
            for (id, replica) in &set.replicas {
                let identity = ReplicaIdentity {
                    broker_name: name.clone(),
                    broker_id: *id,
                    broker_address: replica.address.clone(),
                    alive: liveness.live(&set.cluster, name, *id).is_some(),
                };
                if set.sync_state_set.contains(id) {
                    in_sync.push(identity);
                } else {
                    not_in_sync.push(identity);
                }
            }
            info.replicas_info_table.insert(
                name.clone(),
                ReplicasInfo {
                    master_broker_id: set.master,
                    master_address: set.address(set.master),
                    master_epoch: set.master_epoch,
                    sync_state_set_epoch: set.sss_epoch,
                    in_sync_replicas: in_sync,
                    not_in_sync_replicas: not_in_sync,
                },
            );
        }
        CmdOutcome::success().with_body(info.encode())
    }

    /// CLEAN_BROKER_DATA: Apache's checks, then the command.
    pub fn plan_clean(&self, req: &CleanControllerBrokerDataRequestHeader, liveness: &dyn Liveness) -> Result<Cmd, CmdOutcome> {
        let name = &req.broker_name;
        let ids_text = req.broker_controller_ids_to_clean.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let mut ids = None;
        if let Some(text) = ids_text {
            let parsed: Result<BTreeSet<i64>, _> = text.split(';').map(|s| s.trim().parse::<i64>()).collect();
            match parsed {
                Ok(set) => ids = Some(set),
                Err(e) => {
                    return Err(CmdOutcome::refused(
                        rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        format!("Please set the option <brokerControllerIdsToClean> according to the format, exception: {e}"),
                    ))
                }
            }
        }
        if !req.is_clean_living_broker {
            let set = self.sets.get(name);
            if ids.is_none() && set.is_some_and(|s| s.master.is_some()) {
                return Err(CmdOutcome::refused(
                    rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    format!("Broker {name} is still alive, clean up failure"),
                ));
            }
            if let Some(ids) = &ids {
                let cluster = req.cluster_name.as_deref().unwrap_or_default();
                if let Some(id) = ids.iter().find(|id| liveness.live(cluster, name, **id).is_some()) {
                    return Err(CmdOutcome::refused(
                        rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        format!("Broker [{name},  {id}] is still alive, clean up failure"),
                    ));
                }
            }
        }
        if !self.sets.contains_key(name) {
            return Err(CmdOutcome::refused(
                rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                format!("Broker {name} is not existed,clean broker data failure."),
            ));
        }
        Ok(Cmd::CleanBrokerData { name: name.clone(), ids })
    }
}

#[cfg(test)]
mod tests;
