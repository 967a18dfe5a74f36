//! A shard: the state one core owns — its store, its replicas of global metadata, its
//! consumer offsets, its suspended pulls and its connections — and the dispatch of
//! every request that reaches it.
//!
//! Dispatch: a request about a queue runs on the queue's owner (`routing::queue_owner`);
//! metadata changes run on `META_OWNER_SHARD`; everything else runs where it arrived.
//! A request for another shard is forwarded whole over the mesh and answered by the
//! owner exactly as if it had arrived there; a forwarded send carries its producer's
//! address along (`BORN_HOST_EXT`), since the owner does not hold the connection (a
//! send handled where it arrived takes it from its `ConnCtx`, no string made).
//!
//! Architecture Invariant: shard state is `!Send` and touched only by its executor;
//! `RefCell` borrows are never held across an await.

mod acl;
mod auth;
pub mod consumers;
pub mod delay;
pub mod timer;
pub mod locks;
pub mod longpoll;
pub mod mesh;
mod admin;
mod broker_info;
mod client_info;
mod metadata;
mod queue_stats;
mod edge;
pub mod client_calls;
mod broker_stats;
pub mod stats;
mod pull;
mod send;
pub mod sendback;
pub mod ha;
pub mod txn;
mod registration;
mod reply;
pub mod role;
pub mod replicas;

use crate::config::BrokerConfig;
use crate::meta::groups::GroupTable;
use crate::meta::offsets::ConsumerOffsetTable;
use crate::meta::snapshot::SnapshotStore;
use crate::meta::topics::{TopicConfig, TopicTable};
use crate::routing::{queue_owner, META_OWNER_SHARD};
use crate::rt::chan::{self, Lock};
use crate::rt::Runtime;
use crate::store::engine::{open_store, ShardId, Store};
use crate::store::io::Clock;
use consumers::ConsumerManager;
use longpoll::PullWaiters;
use mesh::{Batch, Envelope, Mesh, ShardEvent};
pub use acl::{ACL_REFUSAL_LOG_INTERVAL_MS, ACL_RELOAD_INTERVAL_MS};
pub use stats::ShardCounters;
pub use pull::{PULL_BODY_BYTES_MAX, PULL_MESSAGES_MAX};
use stats::ShardStats;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use thiserror::Error;

pub type ShardStore<R> = Store<<R as Runtime>::Disk, <R as Runtime>::Clock>;

/// Snapshot (under `<store>/config/`) of the runtime keys UPDATE_BROKER_CONFIG set.
pub const RUNTIME_CONFIG_SNAPSHOT: &str = "runtimeConfig";

/// How often dirty consumer offsets are persisted.
pub const OFFSETS_PERSIST_INTERVAL_MS: u64 = 5_000;
/// Metadata writes (topic and group creates) waiting for the one writer, per broker.
pub const META_WRITERS_WAITING_MAX: usize = 4096;

/// Per-connection context of a request.
#[derive(Debug, Clone, Copy)]
pub struct ConnCtx {
    pub conn_id: u64,
    pub remote: Option<SocketAddr>,
}

impl ConnCtx {
    /// A request forwarded from another shard: its connection lives elsewhere.
    pub const FORWARDED: ConnCtx = ConnCtx { conn_id: 0, remote: None };
}

#[derive(Debug, Error)]
pub enum OpenError {
    #[error("shard {shard}: store did not open: {reason}")]
    Store { shard: usize, reason: String },
    #[error("shard {shard}: {what} could not be loaded: {reason}")]
    Meta { shard: usize, what: &'static str, reason: String },
}

/// The host metadata the metadata owner persists: one writer at a time (`lock`), the
/// read-modify-write of a table and its snapshot all under the guard.
struct MetaStores<D: crate::store::io::Disk> {
    lock: Lock,
    topics: SnapshotStore<D>,
    groups: SnapshotStore<D>,
    /// RocketMQ 5's users and ACLs (`auth.rs`).
    auth: SnapshotStore<D>,
}

/// Where a shard sits: its id among `count` shards and the address its records name
/// as their store host.
#[derive(Debug, Clone, Copy)]
struct Place {
    id: usize,
    count: usize,
    store_host: SocketAddr,
}

/// The shard's replicas of the host metadata (topics, subscription groups) and, on the
/// metadata owner, where they persist.
struct Metadata<D: crate::store::io::Disk> {
    topics: RefCell<TopicTable>,
    /// Subscription groups: written on the metadata owner only, replicated to every
    /// shard (`ShardEvent::Groups`) before a change is answered.
    groups: RefCell<GroupTable>,
    /// Groups this shard is auto-creating now (`autoCreateSubscriptionGroup`): one
    /// creation per group at a time; at most `GROUPS_CREATING_MAX`.
    groups_creating: RefCell<std::collections::BTreeSet<String>>,
    /// Where topic and group tables persist: the metadata owner only.
    stores: Option<MetaStores<D>>,
}

/// Consumer offsets of this shard's queues and their snapshot (`consumerOffset`).
struct Offsets<D: crate::store::io::Disk> {
    table: RefCell<ConsumerOffsetTable>,
    store: SnapshotStore<D>,
}

/// What this shard knows of clients: group membership and producers (replicated),
/// the queue locks of the groups it owns, its own connections and the requests it sent
/// to them.
#[derive(Default)]
struct Clients {
    consumers: RefCell<ConsumerManager>,
    /// Queue locks of the consumer groups this shard owns.
    locks: RefCell<locks::LockTable>,
    /// Server-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED) to local connections.
    conns: RefCell<HashMap<u64, chan::Sender<RemotingCommand>>>,
    /// Requests sent to this shard's clients, waiting for their answers.
    calls: RefCell<client_calls::ClientCalls>,
    /// Who may do what (`aclEnable`): this shard's copy of the plain ACL (`acl.rs`).
    acl: acl::ShardAcl,
    /// RocketMQ 5's users and ACLs: this shard's copy (`auth.rs`).
    auth: auth::ShardAuth,
}

/// One core's state: the store, the metadata replicas, connections and dispatch, plus
/// one owner per feature (delays, timers, transactions, replication, statistics), each
/// in its own module and reached through its methods. Fields are private: the request
/// handlers in this module and the methods below are the only way to change them.
///
/// Architecture Invariant: at most 15 fields (`tests/architecture.rs` counts them); a
/// new feature adds an owner, not fields.
pub struct Shard<R: Runtime> {
    rt: R,
    place: Place,
    /// Replaced whole when UPDATE_BROKER_CONFIG changes a runtime key (on every shard);
    /// readers take the `Rc` for the duration of their use.
    config: RefCell<Rc<BrokerConfig>>,
    store: ShardStore<R>,
    mesh: Rc<Mesh<R>>,
    meta: Metadata<R::Disk>,
    offsets: Offsets<R::Disk>,
    clients: Clients,
    waiters: Rc<PullWaiters>,
    /// Set at a clean stop: the store's background tasks end.
    store_stop: Rc<Cell<bool>>,
    /// Delay levels and this shard's delivery progress (`delay.rs`).
    delays: delay::Delays<R::Disk>,
    /// Timer messages: the wheel and this shard's progress through it (`timer.rs`).
    timers: timer::Timers<R::Disk>,
    /// Open transactions of this shard's queues (`txn.rs`, rules in `txn/`).
    txns: txn::Transactions<R::Disk>,
    /// Replication: this shard's slaves (on a master) and its master (on a slave).
    ha: ha::Replication,
    /// This shard's traffic figures (`stats.rs`).
    stats: ShardStats,
}

/// How often the put/pull counters are sampled for the runtime info's TPS (Java's
/// `FREQUENCY_OF_SAMPLING`).
pub const CALL_STATS_SAMPLE_INTERVAL_MS: u64 = 1_000;

/// Header field that carries a send's born host (the producer's address, as Java's
/// broker records it) to the queue's owner shard, which may not hold the connection.
/// Whatever a client puts there is replaced on arrival.
pub const BORN_HOST_EXT: &str = "ringmqBornHost";

/// Requests about one queue other than sends (topic + queueId): run on the queue's
/// owner; in shard route mode their queue id is the shard-broker's (`edge.rs`).
pub(crate) fn is_queue_read(code: i32) -> bool {
    matches!(
        code,
        rq::PULL_MESSAGE
            | rq::LITE_PULL_MESSAGE
            | rq::QUERY_CONSUMER_OFFSET
            | rq::UPDATE_CONSUMER_OFFSET
            | rq::GET_MAX_OFFSET
            | rq::GET_MIN_OFFSET
            | rq::GET_EARLIEST_MSG_STORETIME
            | rq::SEARCH_OFFSET_BY_TIMESTAMP
    )
}

/// Header field of a topic create the broker makes for one of its own system topics
/// (`meta::topics::BROKER_CREATED_SYSTEM_TOPICS`); stripped from client requests.
pub const SYSTEM_TOPIC_EXT: &str = "ringmqSystemTopic";

/// Loads a snapshot (or makes the default when there is none yet) at start-up.
async fn load<D: crate::store::io::Disk, T>(
    store: &SnapshotStore<D>,
    shard: usize,
    what: &'static str,
    decode: impl FnOnce(&[u8]) -> Result<T, String>,
    default: impl FnOnce() -> T,
) -> Result<T, OpenError> {
    let fail = |reason: String| OpenError::Meta { shard, what, reason };
    match store.load().await.map_err(|e| fail(e.to_string()))? {
        Some(bytes) => decode(&bytes).map_err(fail),
        None => Ok(default()),
    }
}

pub fn error_response(req: &RemotingCommand, code: i32, remark: impl AsRef<str>) -> RemotingCommand {
    req.create_response(code, Some(remark.as_ref()))
}

impl<R: Runtime> Shard<R> {
    /// Opens shard `id`: recovers its store, loads its consumer offsets and (on the
    /// metadata owner) the topic and group tables, joins the mesh through `link`, and
    /// starts its background tasks (store flusher, offsets persistence). The caller
    /// feeds the mesh's incoming batches to [`Shard::receive_batch`].
    pub async fn open(rt: R, id: usize, count: usize, config: Rc<BrokerConfig>, link: R::Link<Batch>, store_host: SocketAddr) -> Result<Rc<Self>, OpenError> {
        let dir = config.store_root.join(format!("shard-{id}"));
        let open_started_us = rt.monotonic_us();
        let (store, report) = open_store(rt.disk(), rt.clock(), dir.clone(), ShardId(id as u16), config.store.clone())
            .await
            .map_err(|e| OpenError::Store { shard: id, reason: e.to_string() })?;
        // A cut the store applied (or found already applied) goes to the epoch history
        // too; only then is its marker removed, so a crash in between repeats both.
        let pending_cut_phys = report.pending_cut.map(|cut| ShardId(id as u16).phys(cut));
        let epochs = role::open_epochs(rt.disk(), &dir, id, store.shard().phys(store.log_start()), pending_cut_phys, config.controller_mode).await?;
        if report.pending_cut.is_some() {
            store.clear_truncate_marker().await.map_err(|e| OpenError::Store { shard: id, reason: e.to_string() })?;
        }
        let epochs = epochs.filter(|_| config.controller_mode);
        let recovery_ms = rt.monotonic_us().saturating_sub(open_started_us) / 1000;
        tracing::info!(shard = id, unclean = report.unclean, end = report.end_offset, records = report.records_scanned, recovery_ms, "store open");
        let meta_dir = config.store_root.join("config");
        let shard_meta_dir = dir.join("config");
        let topics_store = SnapshotStore::new(rt.disk(), meta_dir.clone(), "topics");
        let mut topics = load(&topics_store, id, "topic table", |b| TopicTable::decode(b).map_err(|e| e.to_string()), || {
            TopicTable::with_defaults(config.default_topic_queue_nums)
        })
        .await?;
        if id == META_OWNER_SHARD && config.role.is_master() {
            let meta_fail = |reason: String| OpenError::Meta { shard: id, what: "topic table", reason };
            let now = rt.clock().now_ms();
            let changed = topics
                .ensure_named_topics(&config.broker_name, config.broker_topic_enable, &config.cluster_name, config.cluster_topic_enable, now)
                .map_err(|e| meta_fail(e.to_string()))?;
            // Java's TopicConfigManager makes the trace topic when traceTopicEnable is set.
            let traced = config.trace_topic_enable && topics.ensure_trace_topic(&config.msg_trace_topic_name, now).map_err(|e| meta_fail(e.to_string()))?;
            if changed || traced {
                let encoded = topics.encode().map_err(|e| meta_fail(e.to_string()))?;
                topics_store.save(&encoded).await.map_err(|e| meta_fail(e.to_string()))?;
            }
        }
        // Runtime keys an UPDATE_BROKER_CONFIG changed win over the config file, checked
        // over it as the update was checked over the running configuration.
        let runtime_store = SnapshotStore::new(rt.disk(), meta_dir.clone(), RUNTIME_CONFIG_SNAPSHOT);
        let overrides = load(&runtime_store, id, "runtime config", |b| crate::config::parse_runtime_update(&String::from_utf8_lossy(b)).map_err(|e| e.to_string()), Vec::new).await?;
        let config = if overrides.is_empty() {
            config
        } else {
            if id == 0 {
                tracing::warn!(keys = ?overrides, "runtime config changed by updateBrokerConfig applies over the config file (remove <store>/config/{RUNTIME_CONFIG_SNAPSHOT} to drop it)");
            }
            let next = config.runtime_updated(&overrides).map_err(|e| OpenError::Meta {
                shard: id,
                what: "runtime config",
                reason: format!("{e} (the config file changed since updateBrokerConfig kept these keys; fix the file or remove <store>/config/{RUNTIME_CONFIG_SNAPSHOT})"),
            })?;
            // The store opened with the file's settings; its runtime ones apply now.
            store.set_runtime_config(&next.store);
            Rc::new(next)
        };
        let offsets_store = SnapshotStore::new(rt.disk(), shard_meta_dir.clone(), "consumerOffset");
        let offsets = load(&offsets_store, id, "consumer offsets", |b| ConsumerOffsetTable::decode(b).map_err(|e| e.to_string()), Default::default).await?;
        let delays = delay::Delays::open(rt.disk(), &shard_meta_dir, id, &config.message_delay_level).await?;
        let timers = timer::Timers::open(rt.disk(), &shard_meta_dir, id, config.timer_max_delay_sec).await?;
        let txn_ids = ringmq_client::msgid::MsgIdGenerator::new(store_host.ip(), std::process::id(), id as u32);
        let txns = txn::Transactions::open(rt.disk(), &shard_meta_dir, id, &store, config.transaction_pending_max, txn_ids).await?;
        let (groups, meta) = if id == META_OWNER_SHARD {
            let groups_store = SnapshotStore::new(rt.disk(), meta_dir.clone(), "subscriptionGroup");
            let groups = load(&groups_store, id, "subscription groups", |b| GroupTable::decode(b).map_err(|e| e.to_string()), Default::default).await?;
            let auth_store = SnapshotStore::new(rt.disk(), meta_dir, auth::AUTH_SNAPSHOT);
            (groups, Some(MetaStores { lock: Lock::new(META_WRITERS_WAITING_MAX), topics: topics_store, groups: groups_store, auth: auth_store }))
        } else {
            (GroupTable::default(), None)
        };
        let mesh = Mesh::new(rt.clone(), link, config.forward_batch_max);
        let started_ms = rt.clock().now_ms();
        let ha_master_addr = config.ha_master_address.as_deref().and_then(|a| a.parse().ok());
        let shard = Rc::new(Self {
            rt: rt.clone(),
            place: Place { id, count, store_host },
            config: RefCell::new(config),
            store: store.clone(),
            mesh,
            meta: Metadata { topics: RefCell::new(topics), groups: RefCell::new(groups), groups_creating: RefCell::default(), stores: meta },
            offsets: Offsets { table: RefCell::new(offsets), store: offsets_store },
            clients: Clients::default(),
            waiters: Rc::new(PullWaiters::default()),
            store_stop: Rc::new(Cell::new(false)),
            delays,
            timers,
            txns,
            ha: ha::Replication::new(ha_master_addr, epochs),
            stats: ShardStats::new(started_ms, recovery_ms),
        });
        crate::store::flusher::spawn_store_tasks(rt.clone(), store, shard.store_stop.clone(), Rc::new(|e: String| crate::fatal::fatal(&e)));
        let sampler = shard.clone();
        rt.spawn(async move {
            while !sampler.store_stop.get() {
                sampler.stats.sample(sampler.now_ms());
                sampler.rt.sleep(Duration::from_millis(CALL_STATS_SAMPLE_INTERVAL_MS)).await;
            }
        });
        let persister = shard.clone();
        rt.spawn(async move {
            while !persister.store_stop.get() {
                persister.rt.sleep(Duration::from_millis(OFFSETS_PERSIST_INTERVAL_MS)).await;
                persister.persist_offsets().await;
            }
        });
        // A slave's log is its master's: it makes no copies of its own (delayed, timed,
        // transactional), it only replicates.
        // In controller mode the role is not known yet (`Fenced`): `set_role` starts
        // them on promotion.
        if shard.is_master() {
            let generation = shard.role_generation();
            rt.spawn(shard.clone().run_delivery(generation));
            rt.spawn(shard.clone().run_txn_checks(generation));
            rt.spawn(shard.clone().run_txn_persist(generation));
        }
        shard.open_acl().await?;
        shard.open_auth().await?;
        if id == META_OWNER_SHARD {
            shard.broadcast_topics();
            shard.mesh.broadcast(shard.groups_event());
        }
        Ok(shard)
    }

    pub fn id(&self) -> usize {
        self.place.id
    }
    pub fn count(&self) -> usize {
        self.place.count
    }
    pub fn config(&self) -> Rc<BrokerConfig> {
        self.config.borrow().clone()
    }
    pub fn store(&self) -> &ShardStore<R> {
        &self.store
    }
    pub fn store_host(&self) -> SocketAddr {
        self.place.store_host
    }
    pub fn rt(&self) -> &R {
        &self.rt
    }
    pub fn counters(&self) -> &ShardCounters {
        self.stats.counters()
    }
    /// What this shard publishes to the metrics exporter. Lag is computed here, over the
    /// offsets this shard owns (bounded by the offset table).
    pub fn metrics_snapshot(&self) -> crate::metrics::Snapshot {
        let mut lag: std::collections::BTreeMap<(String, String), u64> = std::collections::BTreeMap::new();
        for ((group, topic, queue), committed) in self.offsets.table.borrow().offsets.iter() {
            let behind = self.store.max_offset(topic, *queue).saturating_sub(*committed);
            *lag.entry((group.clone(), topic.clone())).or_default() += behind;
        }
        let stats = self.store.stats();
        let end = self.store.write_offset();
        let slaves = self.ha_slaves();
        let ha_behind = if self.is_master() {
            slaves.iter().map(|(_, p)| end.saturating_sub(p.received)).max().unwrap_or(0)
        } else {
            let s = self.ha_slave_state();
            if s.connected { crate::store::engine::local_of(s.master_end_phys).saturating_sub(end) } else { 0 }
        };
        // Every shard holds the whole table replica: one count per broker identity.
        let reports_tables = self.meta.stores.is_some() || self.route_mode() == crate::config::RouteMode::Shard;
        crate::metrics::Snapshot {
            shard: self.place.id,
            topics: self.stats.topics(),
            lag: lag.into_iter().map(|((g, t), n)| (g, t, n)).collect(),
            rpc: self.stats.rpc(),
            flush: stats.flush_latency,
            storage_bytes: end.saturating_sub(self.store.log_start()),
            flush_behind_bytes: self.store.dirty_bytes(),
            disk_used_ratio: stats.disk_used_permille as f64 / 1000.0,
            forwarded_out: self.counters().forwarded_out.get(),
            forwarded_in: self.counters().forwarded_in.get(),
            suspended_pulls: self.waiters.suspended() as u64,
            recovery_ms: self.stats.recovery_ms(),
            topic_count: if reports_tables { self.meta.topics.borrow().len() as u64 } else { 0 },
            group_count: if reports_tables { self.meta.groups.borrow().len() as u64 } else { 0 },
            ha_slaves: slaves.len() as u64,
            ha_behind_bytes: ha_behind,
            checkpoint_lag_bytes: self.store.checkpoint_lag_bytes(),
            scrubbed_bytes: stats.scrubbed_bytes,
            scrub_corrupt_records: stats.scrub_corrupt_records,
            disk_watermark_crossings: stats.disk_watermark_crossings,
            acl_refusals: self.clients.acl.refusals(),
            acl_file_loads: self.clients.acl.file_loads(),
            acl_file_load_failures: self.clients.acl.file_load_failures(),
            ha_auth_refusals: self.ha_auth_refusals(),
            // Counted by the TLS edges beside the listeners (`net::tls`), filled in there.
            tls_handshake_failures: 0,
            tls_plain_refusals: 0,
        }
    }

    pub fn pull_waiters(&self) -> &PullWaiters {
        &self.waiters
    }

    pub fn now_ms(&self) -> i64 {
        self.rt.clock().now_ms()
    }

    pub fn topic(&self, name: &str) -> Option<TopicConfig> {
        self.meta.topics.borrow().get(name).cloned()
    }

    /// A connection on this shard opened: server pushes for it go to `tx`.
    pub fn register_conn(&self, conn_id: u64, tx: chan::Sender<RemotingCommand>) {
        self.clients.conns.borrow_mut().insert(conn_id, tx);
    }

    /// A connection closed: forget it, and its clients leave their groups everywhere.
    pub fn conn_closed(self: &Rc<Self>, conn_id: u64, client_ids: &[String]) {
        self.clients.conns.borrow_mut().remove(&conn_id);
        self.fail_client_calls(conn_id);
        for client_id in client_ids {
            let event = ShardEvent::ClientGone { client_id: client_id.clone() };
            self.mesh.broadcast(event.clone());
            self.apply_event(event);
        }
    }

    /// Connections registered on this shard.
    pub fn conn_count(&self) -> usize {
        self.clients.conns.borrow().len()
    }

    /// Applies one batch that arrived from shard `peer` over the mesh.
    pub fn receive_batch(self: &Rc<Self>, peer: usize, batch: Batch) {
        for envelope in batch {
            match envelope {
                Envelope::Request { id, cmd } => {
                    let shard = self.clone();
                    self.rt.spawn(async move {
                        let response = shard.handle_forwarded(cmd).await;
                        shard.mesh.respond(peer, id, response);
                    });
                }
                Envelope::Response { id, cmd } => self.mesh.complete(id, cmd),
                Envelope::Event(event) => self.apply_event(event),
                Envelope::SyncEvent { id, event } => {
                    self.apply_event(event);
                    self.mesh.respond(peer, id, RemotingCommand::request(0).create_response(rs::SUCCESS, None));
                }
            }
        }
    }

    /// Persists the consumer offsets of this shard's queues if they changed.
    pub async fn persist_offsets(&self) {
        let encoded = {
            let mut offsets = self.offsets.table.borrow_mut();
            if !offsets.take_dirty() {
                return;
            }
            match offsets.encode() {
                Ok(bytes) => bytes,
                Err(e) => crate::fatal::fatal(&format!("shard {}: consumer offsets do not encode: {e}", self.place.id)),
            }
        };
        if let Err(e) = self.offsets.store.save(&encoded).await {
            // Not fatal (a full disk must not stop the broker): the table stays dirty
            // and is saved on a later round; a crash meanwhile re-delivers, never loses.
            tracing::warn!(shard = self.place.id, error = %e, "consumer offsets not saved; retried");
            self.offsets.table.borrow_mut().mark_dirty();
        }
    }

    /// Clean stop: stops the background tasks, persists offsets, flushes and
    /// checkpoints the store (the abort file is removed).
    pub async fn close(&self) -> Result<(), String> {
        self.persist_offsets().await;
        // Flushed first, so the recorded delay progress covers every copy made.
        self.store.flush_all().await.map_err(|e| e.to_string())?;
        self.persist_delay_offsets().await;
        self.persist_timer_progress().await;
        self.persist_txn_state().await;
        self.store_stop.set(true);
        self.store.close().await.map_err(|e| e.to_string())
    }

    /// Handles a request that arrived on this shard's socket; `None` for oneway.
    pub async fn handle(self: &Rc<Self>, mut cmd: RemotingCommand, ctx: ConnCtx) -> Option<RemotingCommand> {
        self.stats.on_request_arrived();
        // The plain ACL, on the request as the client signed it (before any field is
        // stripped or stamped) and once: a forwarded request is not checked again.
        let (acl_on, auth_on) = {
            let c = self.config.borrow();
            (c.acl_enable, c.authentication_enabled || c.authorization_enabled)
        };
        if acl_on || auth_on {
            // One generation at a time (checked at start-up): 4.x plain ACL or 5's auth.
            let refusal = if acl_on { self.acl_refusal(&cmd, ctx) } else { self.auth_refusal(&cmd, ctx) };
            if let Some(refusal) = refusal {
                return (!cmd.is_oneway()).then_some(refusal);
            }
        }
        // Private fields only the broker sets (through `call_internal`): a client's
        // values are dropped.
        cmd.ext_fields.remove(sendback::RETRY_OF_GROUP_EXT);
        cmd.ext_fields.remove(SYSTEM_TOPIC_EXT);
        cmd.ext_fields.remove(admin::LOCAL_ONLY_EXT);
        cmd.ext_fields.remove(admin::TOPICS_EXT);
        cmd.ext_fields.remove(admin::CALLER_EXT);
        cmd.ext_fields.remove(metadata::CREATE_IF_ABSENT_EXT);
        if admin::CALLER_LOGGED_CODES.contains(&cmd.code) {
            // Whoever runs a state change logs who asked; it may not hold the connection.
            if let Some(remote) = ctx.remote {
                cmd.ext_fields.insert(admin::CALLER_EXT.into(), remote.to_string());
            }
        }
        let send = matches!(cmd.code, rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE | rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2);
        if send {
            cmd.ext_fields.remove(BORN_HOST_EXT);
            cmd.ext_fields.remove(sendback::SEND_BACK_EXT);
        }
        let oneway = cmd.is_oneway();
        let code = cmd.code;
        let started_us = self.rt.monotonic_us();
        // Shard route mode: the request in host terms from here on (`edge.rs`).
        let reply = match self.edge_in(&mut cmd) {
            Ok(reply) => reply,
            Err(refusal) => return (!oneway).then_some(refusal),
        };
        let mut response = match self.route(&cmd) {
            Some(owner) if owner != self.place.id => {
                self.stats.on_forwarded_out();
                // The owner does not hold the connection: the producer's address travels
                // with the request (a send handled here reads it from `ctx`).
                if let (true, Some(remote)) = (send, ctx.remote) {
                    cmd.ext_fields.set_fmt(BORN_HOST_EXT, format_args!("{remote}"));
                }
                self.mesh.call(owner, cmd).await
            }
            _ => self.handle_here(cmd, ctx).await,
        };
        self.edge_out(reply, &mut response);
        self.stats.on_request_done(code, self.rt.monotonic_us().saturating_sub(started_us));
        if response.code != rs::SUCCESS {
            tracing::debug!(request = code, response = response.code, remark = ?response.remark, "request not successful");
        }
        (!oneway).then_some(response)
    }

    /// Handles a request forwarded by another shard (this shard is its owner).
    pub async fn handle_forwarded(self: &Rc<Self>, cmd: RemotingCommand) -> RemotingCommand {
        self.stats.on_forwarded_in();
        self.handle_here(cmd, ConnCtx::FORWARDED).await
    }

    /// The shard that must run `cmd`, when it is not "wherever it arrived".
    fn route(&self, cmd: &RemotingCommand) -> Option<usize> {
        let queue = || {
            let topic = cmd.ext("topic").or_else(|| cmd.ext("b"))?;
            let queue_id: i32 = cmd.ext("queueId").or_else(|| cmd.ext("e"))?.trim().parse().ok()?;
            (queue_id >= 0).then(|| queue_owner(topic, queue_id, self.place.count))
        };
        match cmd.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => queue(),
            rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => self.reply_route(cmd),
            code if is_queue_read(code) => queue(),
            rq::CONSUMER_SEND_MSG_BACK => {
                let offset: u64 = cmd.ext("offset")?.trim().parse().ok()?;
                Some(crate::store::engine::ShardId::of_phys(offset).0 as usize).filter(|&s| s < self.place.count)
            }
            rq::END_TRANSACTION => {
                let offset: u64 = cmd.ext("commitLogOffset")?.trim().parse().ok()?;
                Some(crate::store::engine::ShardId::of_phys(offset).0 as usize).filter(|&s| s < self.place.count)
            }
            rq::VIEW_MESSAGE_BY_ID => {
                let offset: u64 = cmd.ext("offset")?.trim().parse().ok()?;
                Some(crate::store::engine::ShardId::of_phys(offset).0 as usize).filter(|&s| s < self.place.count)
            }
            rq::UPDATE_AND_CREATE_TOPIC
            | rq::DELETE_TOPIC_IN_BROKER
            | rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
            | rq::DELETE_SUBSCRIPTIONGROUP
            | rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG
            | rq::GET_SUBSCRIPTIONGROUP_CONFIG
            | rq::UPDATE_BROKER_CONFIG => Some(META_OWNER_SHARD),
            rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => locks::lock_request_group(&cmd.body).map(|g| crate::routing::group_owner(&g, self.place.count)),
            code => auth::auth_route(code),
        }
    }

    async fn handle_here(self: &Rc<Self>, cmd: RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        if !self.is_master() && matches!(cmd.code, rq::UPDATE_AND_CREATE_TOPIC | rq::DELETE_TOPIC_IN_BROKER | rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP | rq::DELETE_SUBSCRIPTIONGROUP) {
            // A slave's topic and group tables are its master's (replicated): a change
            // made here would be overwritten, so it is refused rather than accepted.
            return error_response(&cmd, rs::SERVICE_NOT_AVAILABLE, "this broker is a slave: change topics and groups on its master (they replicate here)");
        }
        if !self.is_master() && ringmq_acl::auth::request::codes::CHANGES.contains(&cmd.code) {
            // Users and ACLs follow the master's the same way.
            return error_response(&cmd, rs::SERVICE_NOT_AVAILABLE, "this broker is a slave: change users and ACLs on its master (they replicate here)");
        }
        match cmd.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => self.handle_send(&cmd, ctx.remote).await,
            rq::SEND_REPLY_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => self.handle_reply(&cmd, ctx.remote).await,
            // Java serves LITE_PULL_MESSAGE with the pull processor too.
            rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => self.handle_pull(&cmd).await,
            rq::QUERY_CONSUMER_OFFSET => self.handle_query_consumer_offset(&cmd),
            rq::UPDATE_CONSUMER_OFFSET => self.handle_update_consumer_offset(&cmd),
            rq::GET_MAX_OFFSET => self.handle_get_max_offset(&cmd),
            rq::GET_MIN_OFFSET => self.handle_get_min_offset(&cmd),
            rq::GET_EARLIEST_MSG_STORETIME => self.handle_earliest_store_time(&cmd).await,
            rq::SEARCH_OFFSET_BY_TIMESTAMP => self.handle_search_offset(&cmd).await,
            rq::VIEW_MESSAGE_BY_ID => self.handle_view_message(&cmd).await,
            rq::QUERY_MESSAGE => self.handle_query_message(&cmd).await,
            rq::HEART_BEAT => self.handle_heartbeat(&cmd, ctx).await,
            rq::UNREGISTER_CLIENT => self.handle_unregister_client(&cmd).await,
            rq::GET_CONSUMER_LIST_BY_GROUP => self.handle_consumer_list(&cmd),
            rq::CHECK_CLIENT_CONFIG => self.handle_check_client_config(&cmd),
            rq::GET_PRODUCER_CONNECTION_LIST => self.handle_producer_connections(&cmd),
            rq::LOCK_BATCH_MQ => self.handle_lock_batch(&cmd),
            rq::UNLOCK_BATCH_MQ => self.handle_unlock_batch(&cmd),
            rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => self.handle_create_group(&cmd).await,
            rq::UPDATE_AND_CREATE_TOPIC => self.handle_create_topic(&cmd).await,
            rq::DELETE_TOPIC_IN_BROKER => self.handle_delete_topic(&cmd).await,
            rq::GET_ALL_TOPIC_CONFIG => self.handle_all_topic_config(&cmd),
            rq::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => self.handle_all_group_config(&cmd),
            rq::GET_SUBSCRIPTIONGROUP_CONFIG => self.handle_group_config(&cmd),
            rq::GET_BROKER_RUNTIME_INFO => self.handle_runtime_info(&cmd).await,
            rq::GET_BROKER_CONFIG => self.handle_get_broker_config(&cmd),
            rq::UPDATE_BROKER_CONFIG => self.handle_update_broker_config(&cmd).await,
            rq::GET_TOPIC_STATS_INFO => self.handle_topic_stats(&cmd).await,
            rq::GET_CONSUME_STATS => self.handle_consume_stats(&cmd).await,
            rq::GET_CONSUMER_CONNECTION_LIST => self.handle_consumer_connections(&cmd),
            rq::QUERY_TOPIC_CONSUME_BY_WHO => self.handle_consume_by_who(&cmd).await,
            rq::GET_TOPIC_CONFIG => self.handle_topic_config(&cmd, ctx),
            rq::DELETE_SUBSCRIPTIONGROUP => self.handle_delete_group(&cmd).await,
            rq::GET_ALL_DELAY_OFFSET => self.handle_all_delay_offset(&cmd).await,
            rq::CONSUMER_SEND_MSG_BACK => self.handle_send_back(&cmd).await,
            rq::END_TRANSACTION => self.handle_end_transaction(&cmd).await,
            rq::GET_CONSUMER_RUNNING_INFO | rq::CONSUME_MESSAGE_DIRECTLY => self.handle_call_consumer(&cmd, ctx).await,
            rq::INVOKE_BROKER_TO_RESET_OFFSET => self.handle_reset_offset(&cmd, ctx).await,
            rq::VIEW_BROKER_STATS_DATA => self.handle_view_stats(&cmd).await,
            rq::AUTH_CREATE_USER..=rq::AUTH_LIST_ACL => self.handle_auth(&cmd).await,
            code if replicas::SERVED_CODES.contains(&code) => self.handle_replicas(cmd).await,
            // From another shard only (a client's request never arrives as FORWARDED
            // with a code `route` does not forward).
            edge::REGISTER_NOW_INTERNAL if ctx.conn_id == ConnCtx::FORWARDED.conn_id && ctx.remote.is_none() => {
                self.register_all(false).await;
                cmd.create_response(rs::SUCCESS, None)
            }
            code => error_response(&cmd, rs::REQUEST_CODE_NOT_SUPPORTED, format!("request code {code} not supported")),
        }
    }

    /// Applies an event broadcast by another shard (or by this one, locally).
    pub fn apply_event(self: &Rc<Self>, event: ShardEvent) {
        match event {
            ShardEvent::Topics { version, encoded } => match TopicTable::decode(&encoded) {
                Ok(table) => {
                    if table.version() >= self.meta.topics.borrow().version() {
                        *self.meta.topics.borrow_mut() = table;
                    }
                }
                Err(e) => crate::fatal::fatal(&format!("topic table replica (version {version}) does not decode: {e}")),
            },
            ShardEvent::Groups { version, encoded } => match GroupTable::decode(&encoded) {
                Ok(table) => {
                    if table.version() >= self.meta.groups.borrow().version() {
                        *self.meta.groups.borrow_mut() = table;
                    }
                }
                Err(e) => crate::fatal::fatal(&format!("subscription group replica (version {version}) does not decode: {e}")),
            },
            ShardEvent::Heartbeat { client_id, data, origin } => {
                let changed = {
                    let mut consumers = self.clients.consumers.borrow_mut();
                    consumers.apply_producers(&client_id, &data, &origin);
                    if data.consumer_data_set.is_empty() {
                        Vec::new()
                    } else {
                        consumers.apply_heartbeat(&client_id, &data, &origin)
                    }
                };
                self.notify_groups_changed(&changed);
            }
            ShardEvent::Push { conn_id, cmd } => {
                if !self.push_local(conn_id, cmd) {
                    tracing::debug!(shard = self.place.id, conn_id, "server request for a connection that is gone or full: dropped");
                }
            }
            ShardEvent::ClientGone { client_id } => {
                let changed = self.clients.consumers.borrow_mut().remove_client(&client_id);
                self.notify_groups_changed(&changed);
            }
            ShardEvent::HaMaster { addr } => self.ha.set_master_addr(addr),
            ShardEvent::Auth { encoded } => self.apply_auth_event(&encoded),
            ShardEvent::Controller(event) => self.apply_controller_event(event),
            ShardEvent::RuntimeConfig { pairs } => {
                // Checked whole on the metadata owner (`runtime_updated`); every shard
                // holds the same configuration, so it applies here too.
                let next = self.config().with_runtime_update(&pairs);
                self.store.set_runtime_config(&next.store);
                *self.config.borrow_mut() = Rc::new(next);
            }
        }
    }

    /// Tells this shard's connected consumers of each group that membership changed.
    fn notify_groups_changed(&self, groups: &[String]) {
        for group in groups {
            // Java's `notifyConsumerIdsChangedEnable=false`: the group's consumers find
            // out at their next rebalance instead.
            if self.group_config(group).is_some_and(|g| !g.notify_consumer_ids_changed_enable) {
                continue;
            }
            let local = self.clients.consumers.borrow().local_members(group, self.place.id);
            for (_, conn_id) in local {
                let mut notify = RemotingCommand::request(rq::NOTIFY_CONSUMER_IDS_CHANGED).with_ext("consumerGroup", group.clone()).oneway();
                self.sign_as_broker(&mut notify);
                if let Some(tx) = self.clients.conns.borrow().get(&conn_id) {
                    // A full queue means the client is not reading: it rebalances on
                    // its own timer anyway (every 20 s).
                    let _ = tx.try_send(notify);
                }
            }
        }
    }
}
