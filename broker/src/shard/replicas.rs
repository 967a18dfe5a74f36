//! Controller mode's driver (docs/design/controller.md §3.5, §3.8, §3.9, §4): the task
//! on shard 0 (the metadata owner) that ticks the pure `ha::replicas::ReplicasManager`
//! and performs what it decides — controller calls through `Runtime::call_remote`,
//! the identity files through the shard's durable small-file path (`SnapshotStore`,
//! as the epoch file), role, SyncStateSet and lease decisions broadcast to every
//! shard's role cell (`ShardEvent::Controller`) — and the broker-side codes the
//! controller and `ringmq-admin` send: NOTIFY_BROKER_ROLE_CHANGED (1008, handled by
//! shard 0), GET_BROKER_EPOCH_CACHE (1007, the answering shard's epoch history) and
//! EXCHANGE_BROKER_HA_INFO (906, this broker's replication address).
//!
//! Invariants:
//! - Only shard 0 holds a manager; every other shard learns decisions by event, and a
//!   1008 arriving elsewhere is forwarded to shard 0 over the mesh.
//! - Answers reach the manager only from this task (one queue, at most `ANSWERS_MAX`:
//!   the manager keeps one control request and one heartbeat per controller in
//!   flight), so the manager is never borrowed across an await.
//! - A slave is told its master's replication address from the master itself (906);
//!   until then the shard stays fenced.
//! - With `masterLeaseEnable`, a shard acknowledges a write only before the lease the
//!   driver last told it (`lease_acknowledges`); monotonic time only.

use super::Shard;
use crate::ha::replicas::{self as rm, Action, ReplicasManager, ReplicasSettings, StoreFacts, IDENTITY_FILE, IDENTITY_TEMP_FILE};
use crate::ha::Role;
use crate::meta::snapshot::SnapshotStore;
use crate::namesrv_client::RegisterAs;
use crate::routing::META_OWNER_SHARD;
use crate::rt::Runtime;
use crate::store::io::Clock;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::controller::{EpochEntry, EpochEntryCache, ExchangeHaInfoHeader, NotifyBrokerRoleChangedRequestHeader};
use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// How often the driver ticks the manager and drains answers; bounds how late a
/// heartbeat or retry goes out (the lease runs from the send time, so lateness only
/// shortens it).
pub const REPLICAS_TICK_MS: u64 = 50;
/// One controller call, connect to answer.
pub const CONTROLLER_CALL_TIMEOUT_MS: u64 = 3_000;
/// Answers waiting for the manager: one control request and one heartbeat per controller.
pub const ANSWERS_MAX: usize = rm::CONTROLLERS_MAX + 1;
/// EXCHANGE_BROKER_HA_INFO attempts to a new master before the shards are told to
/// follow the conventional address (its remoting port + 1) instead.
pub const HA_INFO_ATTEMPTS_MAX: u32 = 20;
pub const HA_INFO_RETRY_MS: u64 = 250;
/// Request codes this module serves (one dispatch arm in `Shard::handle_here`).
pub const SERVED_CODES: &[i32] = &[rq::NOTIFY_BROKER_ROLE_CHANGED, rq::GET_BROKER_EPOCH_CACHE, rq::EXCHANGE_BROKER_HA_INFO];

/// A decision of shard 0's driver that every shard applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerEvent {
    /// Take `role`; register with the NameServers as `controller_id` while a slave.
    Role { role: Role, controller_id: Option<i64> },
    /// allAck's in-sync members other than this broker (`None`: any one slave).
    SyncStateSet { members: Option<BTreeSet<u64>> },
    /// Acknowledge writes only before this monotonic ms (`masterLeaseEnable`).
    Lease { until_ms: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum ReplicasError {
    #[error("controller mode: broker identity file {file}: {reason}")]
    Identity { file: &'static str, reason: String },
}

type Answer = (u64, String, Result<RemotingCommand, String>);

impl<R: Runtime> Shard<R> {
    fn monotonic_ms(&self) -> u64 {
        self.rt.monotonic_us() / 1_000
    }

    /// The settings the manager runs with, from the broker's configuration.
    fn replicas_settings(&self) -> ReplicasSettings {
        let c = self.config();
        ReplicasSettings {
            cluster: c.cluster_name.clone(),
            broker_name: c.broker_name.clone(),
            broker_address: self.store_host().to_string(),
            controllers: c.controller_addrs.clone(),
            heartbeat_interval_ms: c.broker_heartbeat_interval_ms,
            heartbeat_timeout_ms: c.controller_heartbeat_timeout_ms,
            sync_broker_metadata_period_ms: c.sync_broker_metadata_period_ms,
            sync_controller_metadata_period_ms: c.sync_controller_metadata_period_ms,
            election_priority: c.broker_election_priority,
            master_lease: c.master_lease_enable,
        }
    }

    fn identity_store(&self, name: &str) -> SnapshotStore<R::Disk> {
        let c = self.config();
        let dir = c.store_path_broker_identity.clone().unwrap_or_else(|| c.store_root.clone());
        SnapshotStore::new(self.rt.disk(), dir, name)
    }

    async fn load_identity_text(&self, name: &'static str) -> Result<Option<String>, ReplicasError> {
        let bytes = self.identity_store(name).load_strict().await.map_err(|e| ReplicasError::Identity { file: name, reason: e.to_string() })?;
        Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Writes an identity file durably; a broker that cannot keep its controller id
    /// cannot take part in elections, so a failure stops it.
    async fn save_identity_text(&self, name: &'static str, text: &str) {
        if let Err(e) = self.identity_store(name).save(text.as_bytes()).await {
            crate::fatal::fatal(&ReplicasError::Identity { file: name, reason: e.to_string() }.to_string());
        }
    }

    /// What a heartbeat reports: shard 0's epoch and log end (the controller compares
    /// brokers of one set by it when it elects).
    fn store_facts(&self) -> StoreFacts {
        let end = self.store.shard().phys(self.store.write_offset()) as i64;
        StoreFacts { last_epoch: i32::try_from(self.current_epoch()).unwrap_or(i32::MAX), max_offset: end, confirm_offset: end }
    }

    fn with_manager<T>(&self, f: impl FnOnce(&mut ReplicasManager) -> T) -> T {
        let mut cell = self.ha.replicas.borrow_mut();
        let Some(m) = cell.as_mut() else { panic!("controller mode: the replicas manager runs on shard {META_OWNER_SHARD} only") };
        f(m)
    }

    /// Shard 0's task in controller mode: registration, heartbeats, role changes,
    /// until the shard stops.
    pub async fn run_replicas(self: Rc<Self>) {
        assert_eq!(self.place.id, META_OWNER_SHARD, "the replicas driver runs on the metadata owner");
        let settings = self.replicas_settings();
        let stored = async {
            let identity = self.load_identity_text(IDENTITY_FILE).await?;
            let temp = self.load_identity_text(IDENTITY_TEMP_FILE).await?;
            rm::parse_identity(&settings, identity.as_deref(), temp.as_deref()).map_err(|e| ReplicasError::Identity { file: IDENTITY_FILE, reason: e.to_string() })
        };
        let stored = match stored.await {
            Ok(s) => s,
            Err(e) => crate::fatal::fatal(&e.to_string()),
        };
        tracing::info!(?stored, controllers = ?settings.controllers, "controller mode: registering with the controller");
        *self.ha.replicas.borrow_mut() = Some(ReplicasManager::new(settings, stored));
        let answers: Rc<RefCell<VecDeque<Answer>>> = Rc::new(RefCell::new(VecDeque::new()));
        let mut lease_told = 0u64;
        let mut next_sss_review_ms = 0u64;
        while !self.store_stop.get() {
            if self.monotonic_ms() >= next_sss_review_ms {
                next_sss_review_ms = self.monotonic_ms() + self.config().check_sync_state_set_period_ms;
                self.review_sync_state_set().await;
            }
            let facts = self.store_facts();
            let now_ms = self.monotonic_ms();
            let mut actions: VecDeque<Action> = self.with_manager(|m| m.tick(now_ms, facts)).into();
            loop {
                let next = answers.borrow_mut().pop_front();
                let Some((token, from, result)) = next else { break };
                let (now_ms, wall_ms) = (self.monotonic_ms(), u64::try_from(self.rt.clock().now_ms()).unwrap_or(0));
                actions.extend(self.with_manager(|m| m.on_answer(token, &from, result, now_ms, wall_ms)));
            }
            while let Some(action) = actions.pop_front() {
                actions.extend(self.perform(action, &answers).await);
            }
            let lease = self.with_manager(|m| m.lease_until_ms());
            if lease != lease_told {
                lease_told = lease;
                self.tell_shards(ControllerEvent::Lease { until_ms: lease }).await;
            }
            self.rt.sleep(Duration::from_millis(REPLICAS_TICK_MS)).await;
        }
    }

    /// Performs one action; returns what the manager decided in response.
    async fn perform(self: &Rc<Self>, action: Action, answers: &Rc<RefCell<VecDeque<Answer>>>) -> Vec<Action> {
        match action {
            Action::Send { token, to, command, .. } => {
                let (rt, answers) = (self.rt.clone(), answers.clone());
                self.rt.spawn(async move {
                    let result = rt.call_remote(&to, command, Duration::from_millis(CONTROLLER_CALL_TIMEOUT_MS)).await;
                    let mut queue = answers.borrow_mut();
                    assert!(queue.len() < ANSWERS_MAX, "more controller answers than requests in flight");
                    queue.push_back((token, to, result));
                });
                Vec::new()
            }
            Action::PersistTemp { text } => {
                self.save_identity_text(IDENTITY_TEMP_FILE, &text).await;
                self.with_manager(ReplicasManager::on_persisted)
            }
            Action::PersistIdentity { text } => {
                self.save_identity_text(IDENTITY_FILE, &text).await;
                // An empty temp file reads as none (`parse_identity`).
                self.save_identity_text(IDENTITY_TEMP_FILE, "").await;
                self.with_manager(ReplicasManager::on_persisted)
            }
            Action::ClearTemp => {
                self.save_identity_text(IDENTITY_TEMP_FILE, "").await;
                Vec::new()
            }
            Action::ChangeRole(role) => {
                let role = match role {
                    rm::Role::Isolated => Role::Fenced,
                    rm::Role::Master { epoch } => Role::Master { epoch: epoch.max(0) as u64 },
                    rm::Role::Slave { epoch, master_address, .. } => Role::Slave { epoch: epoch.max(0) as u64, master: self.master_ha_address(&master_address).await },
                };
                let controller_id = self.with_manager(|m| m.controller_id());
                tracing::info!(?role, ?controller_id, "controller: role change");
                self.tell_shards(ControllerEvent::Role { role, controller_id }).await;
                Vec::new()
            }
            Action::SyncStateSet { epoch, members } => {
                let me = self.with_manager(|m| m.controller_id());
                let all_ack = self.config().all_ack_in_sync_state_set;
                let others = all_ack.then(|| members.iter().filter(|&&id| Some(id) != me).filter_map(|&id| u64::try_from(id).ok()).collect());
                tracing::info!(epoch, ?members, all_ack, "controller: SyncStateSet");
                self.tell_shards(ControllerEvent::SyncStateSet { members: others }).await;
                Vec::new()
            }
        }
    }

    /// A master's SyncStateSet review (Apache `maybeShrinkSyncStateSet` /
    /// `maybeExpandInSyncStateSet`, design §3.6), on shard 0's replication view: a
    /// connected slave whose confirmed offset reached this log's end joins; a member
    /// stays while connected and heard from within `haMaxTimeSlaveNotCatchup`. An
    /// expansion is waited for by every shard (the union) before it is proposed, so no
    /// write is acknowledged without a member the controller may already elect.
    async fn review_sync_state_set(self: &Rc<Self>) {
        let Some(me) = self.with_manager(|m| matches!(m.role(), rm::Role::Master { .. }).then(|| m.controller_id()).flatten()) else { return };
        let (c, now_ms, end) = (self.config(), self.now_ms(), self.store.write_offset());
        let current: BTreeSet<i64> = self.with_manager(|m| m.sync_state_set().1.clone());
        let mut proposal = BTreeSet::from([me]);
        for (_, p) in self.ha.master.borrow().slaves() {
            let Some(id) = p.broker_id.and_then(|id| i64::try_from(id).ok()) else { continue };
            let confirmed = if c.ha_sync_ack == crate::ha::SyncAck::Received { p.received } else { p.durable };
            let fresh = now_ms.saturating_sub(p.last_ack_ms) <= c.ha_max_time_slave_not_catchup_ms as i64;
            if confirmed >= end || (current.contains(&id) && fresh) {
                proposal.insert(id);
            }
        }
        if proposal == current || current.is_empty() {
            // Empty: the controller has not told this master its set yet.
            return;
        }
        if c.all_ack_in_sync_state_set && !proposal.is_subset(&current) {
            let union = proposal.union(&current).filter(|&&id| id != me).filter_map(|&id| u64::try_from(id).ok()).collect();
            self.tell_shards(ControllerEvent::SyncStateSet { members: Some(union) }).await;
        }
        tracing::info!(?current, ?proposal, "proposing a SyncStateSet");
        self.with_manager(|m| m.propose_sync_state_set(proposal));
    }

    /// Applies `event` here (awaited) and hands it to every other shard, waiting until
    /// each took it. There a role change runs as a task of its own (its epoch write is
    /// awaited there), spawned in arrival order: a later role change bumps the role
    /// generation, so an earlier promotion still writing its epoch ends `Superseded`.
    async fn tell_shards(self: &Rc<Self>, event: ControllerEvent) {
        self.apply_controller_event_now(event.clone()).await;
        self.mesh.broadcast_and_wait(super::mesh::ShardEvent::Controller(event)).await;
    }

    /// A controller event from shard 0 (`apply_event` is not async: the role change
    /// runs as a task of its own).
    pub(super) fn apply_controller_event(self: &Rc<Self>, event: ControllerEvent) {
        let shard = self.clone();
        self.rt.spawn(async move { shard.apply_controller_event_now(event).await });
    }

    async fn apply_controller_event_now(self: &Rc<Self>, event: ControllerEvent) {
        match event {
            ControllerEvent::Role { role, controller_id } => {
                self.ha.controller_id.set(controller_id);
                if let Err(e) = self.set_role(role.clone()).await {
                    tracing::warn!(shard = self.place.id, ?role, error = %e, "controller role not taken");
                    return;
                }
                // Routes follow the role at once (host mode: shard 0 registers the
                // broker; shard mode: every shard-broker itself).
                let registers = self.place.id == META_OWNER_SHARD || self.config().route_mode == crate::config::RouteMode::Shard;
                if registers {
                    self.register_all(true).await;
                }
            }
            ControllerEvent::SyncStateSet { members } => self.set_sync_state_set(members),
            ControllerEvent::Lease { until_ms } => self.ha.lease_until_ms.set(until_ms),
        }
    }

    /// Controller mode: whether a write stored now may be acknowledged under the master
    /// lease (always true without `masterLeaseEnable`, or outside controller mode).
    pub(super) fn lease_acknowledges(&self) -> bool {
        let c = self.config();
        !c.controller_mode || !c.master_lease_enable || self.monotonic_ms() < self.ha.lease_until_ms.get()
    }

    /// The NameServer identity: controller mode registers id 0 as master, its
    /// controller id as slave, with the master epoch as state version; `None` while
    /// the role is not known (isolated: not registered).
    pub(super) fn register_as(&self) -> Option<RegisterAs> {
        let c = self.config();
        if !c.controller_mode {
            return Some(RegisterAs::configured(&c));
        }
        match self.ha.role.get() {
            Role::Master { epoch } => Some(RegisterAs { broker_id: 0, state_version: epoch as i64 }),
            Role::Slave { epoch, .. } => self.ha.controller_id.get().map(|id| RegisterAs { broker_id: id, state_version: epoch as i64 }),
            Role::Fenced => None,
        }
    }

    /// The new master's replication base address, asked of the master (906); after
    /// `HA_INFO_ATTEMPTS_MAX` failures its remoting port + 1 (the default
    /// `haListenPort`).
    async fn master_ha_address(&self, master: &str) -> SocketAddr {
        for _ in 0..HA_INFO_ATTEMPTS_MAX {
            let asked = RemotingCommand::request(rq::EXCHANGE_BROKER_HA_INFO).with_header(&ExchangeHaInfoHeader::default());
            if let Ok(r) = self.rt.call_remote(master, asked, Duration::from_millis(CONTROLLER_CALL_TIMEOUT_MS)).await {
                let addr = r.header::<ExchangeHaInfoHeader>().ok().and_then(|h| h.master_ha_address).and_then(|a| a.parse().ok());
                if let (true, Some(addr)) = (r.code == rs::SUCCESS, addr) {
                    return addr;
                }
            }
            self.rt.sleep(Duration::from_millis(HA_INFO_RETRY_MS)).await;
        }
        let fallback = master.parse::<SocketAddr>().map(|a| SocketAddr::new(a.ip(), a.port().saturating_add(1)));
        tracing::warn!(master, ?fallback, "the master did not say its replication address (906): following its remoting port + 1");
        fallback.unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// 1008 (shard 0; forwarded there from any other shard), 1007 (this shard's
    /// epoch history), 906 (this broker's replication address).
    pub(super) async fn handle_replicas(self: &Rc<Self>, cmd: RemotingCommand) -> RemotingCommand {
        if !self.config().controller_mode {
            return super::error_response(&cmd, rs::REQUEST_CODE_NOT_SUPPORTED, "the broker is not in controller mode (enableControllerMode=false)");
        }
        match cmd.code {
            rq::NOTIFY_BROKER_ROLE_CHANGED if self.place.id != META_OWNER_SHARD => self.mesh.call(META_OWNER_SHARD, cmd).await,
            rq::NOTIFY_BROKER_ROLE_CHANGED => {
                let header: NotifyBrokerRoleChangedRequestHeader = cmd.header().unwrap_or_default();
                if self.ha.replicas.borrow().is_none() {
                    return super::error_response(&cmd, rs::SERVICE_NOT_AVAILABLE, "not registered with the controller yet");
                }
                let mut actions: VecDeque<Action> = self.with_manager(|m| m.on_notify(&header, &cmd.body)).into();
                // Role and set changes only: a notification sends nothing itself.
                let no_answers = Rc::new(RefCell::new(VecDeque::new()));
                while let Some(action) = actions.pop_front() {
                    actions.extend(self.perform(action, &no_answers).await);
                }
                cmd.create_response(rs::SUCCESS, None)
            }
            rq::GET_BROKER_EPOCH_CACHE => {
                let c = self.config();
                let history = self.epoch_history();
                let end = self.store.shard().phys(self.store.write_offset()) as i64;
                let entries = history.as_ref().map_or(&[][..], |h| h.entries());
                let epoch_list = entries
                    .iter()
                    .enumerate()
                    .map(|(i, e)| EpochEntry {
                        epoch: i32::try_from(e.epoch).unwrap_or(i32::MAX),
                        start_offset: e.start_phys as i64,
                        end_offset: entries.get(i + 1).map_or(end, |n| n.start_phys as i64),
                    })
                    .collect();
                let id = match self.ha.role.get() {
                    Role::Master { .. } => 0,
                    _ => self.ha.controller_id.get().unwrap_or(-1),
                };
                let body = EpochEntryCache { cluster_name: c.cluster_name.clone(), broker_name: self.client_broker_name(), broker_id: id, epoch_list, max_offset: end };
                cmd.create_response(rs::SUCCESS, None).with_body(body.encode())
            }
            _ => {
                let ha = SocketAddr::new(self.store_host().ip(), self.config().ha_port_base());
                let header = ExchangeHaInfoHeader {
                    master_ha_address: Some(ha.to_string()),
                    master_flush_offset: Some(self.store.shard().phys(self.store.write_offset()) as i64),
                    master_address: Some(self.store_host().to_string()),
                };
                cmd.create_response(rs::SUCCESS, None).with_header(&header)
            }
        }
    }
}
