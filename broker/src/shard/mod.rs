//! A shard: the state one core owns — its store, its replicas of global metadata, its
//! consumer offsets, its suspended pulls and its connections — and the dispatch of
//! every request that reaches it.
//!
//! Dispatch: a request about a queue runs on the queue's owner (`routing::queue_owner`);
//! metadata changes run on `META_OWNER_SHARD`; everything else runs where it arrived.
//! A request for another shard is forwarded whole over the mesh and answered by the
//! owner exactly as if it had arrived there; a send carries its producer's address
//! along (`BORN_HOST_EXT`), since the owner does not hold the connection.
//!
//! Architecture Invariant: shard state is `!Send` and touched only by its executor;
//! `RefCell` borrows are never held across an await.

pub mod consumers;
pub mod locks;
pub mod longpoll;
pub mod mesh;
mod admin;
mod pull;
mod send;

use crate::config::BrokerConfig;
use crate::meta::offsets::ConsumerOffsetTable;
use crate::meta::topics::{TopicConfig, TopicTable};
use crate::routing::{queue_owner, META_OWNER_SHARD};
use crate::store::engine::Store;
use crate::store::io::dma::DmaDisk;
use crate::store::io::{Clock, SystemClock};
use consumers::ConsumerManager;
use glommio::channels::local_channel::LocalSender;
use longpoll::PullWaiters;
use mesh::{Mesh, ShardEvent};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;

pub type ShardStore = Store<DmaDisk, SystemClock>;

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

#[derive(Debug, Default)]
pub struct ShardCounters {
    pub requests: Cell<u64>,
    pub forwarded_out: Cell<u64>,
    pub forwarded_in: Cell<u64>,
    pub messages_put: Cell<u64>,
    pub messages_pulled: Cell<u64>,
}

pub struct Shard {
    pub id: usize,
    pub count: usize,
    pub config: Rc<BrokerConfig>,
    pub store: ShardStore,
    pub mesh: Rc<Mesh>,
    pub topics: RefCell<TopicTable>,
    pub offsets: RefCell<ConsumerOffsetTable>,
    pub consumers: RefCell<ConsumerManager>,
    /// Queue locks of the consumer groups this shard owns.
    pub locks: RefCell<locks::LockTable>,
    pub waiters: Rc<PullWaiters>,
    /// Server-initiated requests (NOTIFY_CONSUMER_IDS_CHANGED) to local connections.
    pub conns: RefCell<HashMap<u64, Rc<LocalSender<RemotingCommand>>>>,
    pub store_host: SocketAddr,
    pub counters: ShardCounters,
    pub started_ms: i64,
    /// Where the topic table is persisted: set on the metadata owner only.
    pub topics_store: RefCell<Option<crate::meta::snapshot::SnapshotStore<DmaDisk>>>,
    /// Subscription groups and where they persist: the metadata owner only.
    pub groups: RefCell<crate::meta::groups::GroupTable>,
    pub groups_store: RefCell<Option<crate::meta::snapshot::SnapshotStore<DmaDisk>>>,
}

/// Header field that carries a send's born host (the producer's address, as Java's
/// broker records it) to the queue's owner shard, which may not hold the connection.
/// Whatever a client puts there is replaced on arrival.
pub const BORN_HOST_EXT: &str = "ringmqBornHost";

pub fn error_response(req: &RemotingCommand, code: i32, remark: impl AsRef<str>) -> RemotingCommand {
    req.create_response(code, Some(remark.as_ref()))
}

impl Shard {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: usize,
        count: usize,
        config: Rc<BrokerConfig>,
        store: ShardStore,
        mesh: Rc<Mesh>,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        store_host: SocketAddr,
    ) -> Rc<Self> {
        Rc::new(Self {
            id,
            count,
            config,
            store,
            mesh,
            topics: RefCell::new(topics),
            offsets: RefCell::new(offsets),
            consumers: RefCell::new(ConsumerManager::default()),
            locks: RefCell::new(locks::LockTable::default()),
            waiters: Rc::new(PullWaiters::default()),
            conns: RefCell::new(HashMap::new()),
            store_host,
            counters: ShardCounters::default(),
            started_ms: SystemClock.now_ms(),
            topics_store: RefCell::new(None),
            groups: RefCell::new(crate::meta::groups::GroupTable::default()),
            groups_store: RefCell::new(None),
        })
    }

    pub fn now_ms(&self) -> i64 {
        SystemClock.now_ms()
    }

    pub fn topic(&self, name: &str) -> Option<TopicConfig> {
        self.topics.borrow().get(name).cloned()
    }

    /// Handles a request that arrived on this shard's socket; `None` for oneway.
    pub async fn handle(self: &Rc<Self>, mut cmd: RemotingCommand, ctx: ConnCtx) -> Option<RemotingCommand> {
        self.counters.requests.set(self.counters.requests.get() + 1);
        if matches!(cmd.code, rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE) {
            cmd.ext_fields.remove(BORN_HOST_EXT);
            if let Some(remote) = ctx.remote {
                cmd.ext_fields.insert(BORN_HOST_EXT.into(), remote.to_string());
            }
        }
        let oneway = cmd.is_oneway();
        let code = cmd.code;
        let response = match self.route(&cmd) {
            Some(owner) if owner != self.id => {
                self.counters.forwarded_out.set(self.counters.forwarded_out.get() + 1);
                self.mesh.call(owner, cmd).await
            }
            _ => self.handle_here(cmd, ctx).await,
        };
        if response.code != rs::SUCCESS {
            tracing::debug!(request = code, response = response.code, remark = ?response.remark, "request not successful");
        }
        (!oneway).then_some(response)
    }

    /// Handles a request forwarded by another shard (this shard is its owner).
    pub async fn handle_forwarded(self: &Rc<Self>, cmd: RemotingCommand) -> RemotingCommand {
        self.counters.forwarded_in.set(self.counters.forwarded_in.get() + 1);
        self.handle_here(cmd, ConnCtx::FORWARDED).await
    }

    /// The shard that must run `cmd`, when it is not "wherever it arrived".
    fn route(&self, cmd: &RemotingCommand) -> Option<usize> {
        let queue = || {
            let topic = cmd.ext("topic").or_else(|| cmd.ext("b"))?;
            let queue_id: i32 = cmd.ext("queueId").or_else(|| cmd.ext("e"))?.trim().parse().ok()?;
            (queue_id >= 0).then(|| queue_owner(topic, queue_id, self.count))
        };
        match cmd.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => queue(),
            rq::PULL_MESSAGE
            | rq::LITE_PULL_MESSAGE
            | rq::QUERY_CONSUMER_OFFSET
            | rq::UPDATE_CONSUMER_OFFSET
            | rq::GET_MAX_OFFSET
            | rq::GET_MIN_OFFSET
            | rq::GET_EARLIEST_MSG_STORETIME
            | rq::SEARCH_OFFSET_BY_TIMESTAMP => queue(),
            rq::VIEW_MESSAGE_BY_ID => {
                let offset: u64 = cmd.ext("offset")?.trim().parse().ok()?;
                Some(crate::store::engine::ShardId::of_phys(offset).0 as usize).filter(|&s| s < self.count)
            }
            rq::UPDATE_AND_CREATE_TOPIC | rq::DELETE_TOPIC_IN_BROKER | rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => Some(META_OWNER_SHARD),
            rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => locks::lock_request_group(&cmd.body).map(|g| crate::routing::group_owner(&g, self.count)),
            _ => None,
        }
    }

    async fn handle_here(self: &Rc<Self>, cmd: RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        match cmd.code {
            rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => self.handle_send(&cmd).await,
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
            rq::HEART_BEAT => self.handle_heartbeat(&cmd, ctx),
            rq::UNREGISTER_CLIENT => self.handle_unregister_client(&cmd),
            rq::GET_CONSUMER_LIST_BY_GROUP => self.handle_consumer_list(&cmd),
            rq::LOCK_BATCH_MQ => self.handle_lock_batch(&cmd),
            rq::UNLOCK_BATCH_MQ => self.handle_unlock_batch(&cmd),
            rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => self.handle_create_group(&cmd).await,
            rq::UPDATE_AND_CREATE_TOPIC => self.handle_create_topic(&cmd).await,
            rq::DELETE_TOPIC_IN_BROKER => self.handle_delete_topic(&cmd).await,
            rq::GET_ALL_TOPIC_CONFIG => self.handle_all_topic_config(&cmd),
            rq::GET_BROKER_RUNTIME_INFO => self.handle_runtime_info(&cmd).await,
            code => error_response(&cmd, rs::REQUEST_CODE_NOT_SUPPORTED, format!("request code {code} not supported")),
        }
    }

    /// Applies an event broadcast by another shard (or by this one, locally).
    pub fn apply_event(self: &Rc<Self>, event: ShardEvent) {
        match event {
            ShardEvent::Topics { version, encoded } => match TopicTable::decode(&encoded) {
                Ok(table) => {
                    if table.version() >= self.topics.borrow().version() {
                        *self.topics.borrow_mut() = table;
                    }
                }
                Err(e) => crate::fatal::fatal(&format!("topic table replica (version {version}) does not decode: {e}")),
            },
            ShardEvent::Heartbeat { client_id, data, conn_shard, conn_id } => {
                let changed = self.consumers.borrow_mut().apply_heartbeat(&client_id, &data, conn_shard, conn_id);
                self.notify_groups_changed(&changed);
            }
            ShardEvent::ClientGone { client_id } => {
                let changed = self.consumers.borrow_mut().remove_client(&client_id);
                self.notify_groups_changed(&changed);
            }
        }
    }

    /// Tells this shard's connected consumers of each group that membership changed.
    fn notify_groups_changed(&self, groups: &[String]) {
        for group in groups {
            let local = self.consumers.borrow().local_members(group, self.id);
            for (_, conn_id) in local {
                let notify = RemotingCommand::request(rq::NOTIFY_CONSUMER_IDS_CHANGED).with_ext("consumerGroup", group.clone()).oneway();
                if let Some(tx) = self.conns.borrow().get(&conn_id) {
                    // A full queue means the client is not reading: it rebalances on
                    // its own timer anyway (every 20 s).
                    let _ = tx.try_send(notify);
                }
            }
        }
    }
}
