//! The push consumer: subscriptions, a listener, and behind them one long-polling pull
//! loop per queue this member owns (RocketMQ's `DefaultMQPushConsumer`).
//!
//! Ownership of queues: in clustering mode the group's members split the readable
//! queues with `rebalance::allocate_average`, recomputed at start, every
//! `rebalance_interval_ms`, and as soon as a broker says the membership changed
//! (NOTIFY_CONSUMER_IDS_CHANGED); in broadcasting mode every member reads every queue
//! and keeps its offsets in a local file.
//!
//! Consumption: concurrently (batches of up to `consume_batch_max_size` run as tasks,
//! at most `consume_tasks_max` at a time) or orderly (one queue's messages strictly one
//! batch after another, only while this member holds the queue's broker lock, renewed
//! every `lock_renew_interval_ms`).
//!
//! Retries (RocketMQ 4.9's policy, decisions in `retry`): a clustering member also
//! subscribes to `%RETRY%<group>` (`*`), and a message pulled from there reaches the
//! listener with its original topic. A concurrent batch the listener returns
//! `ReconsumeLater` for is sent back message by message (CONSUMER_SEND_MSG_BACK, with
//! the delay level the listener left in its `ConsumeConcurrentlyContext`); what the
//! broker refused is retried here. Orderly: the queue is suspended and the batch retried
//! here until a message's reconsume count reaches `max_reconsume_times`; then it goes to
//! the dead letter queue and the queue moves past it.
//!
//! Invariants:
//! - a queue is pulled by at most one loop in this process, and only while assigned;
//! - at most `queue_messages_max` messages per queue are delivered and unacknowledged:
//!   past that the queue's pull loop waits (flow control; memory stays bounded);
//! - offsets committed are commit points (`offsets::QueueProgress`): never past an
//!   unacknowledged message, so delivery is at-least-once;
//! - orderly: a queue's listener runs only while the lock is believed held (renewed
//!   within `LOCK_HELD_MAX_MS`, half the broker's 60 s expiry), and a queue handed to
//!   another member has its offset committed *before* its lock is released, so the next
//!   owner starts exactly where this one stopped;
//! - a message the listener asks to reconsume is acknowledged only once a broker took it
//!   back (into `%RETRY%<group>` or `%DLQ%<group>`); until then it is retried locally
//!   with a growing delay (capped at `RECONSUME_DELAY_MAX_MS`), never skipped.

use super::kernel::{self, PullRequest, PullStatus};
use super::offsets::{LocalOffsetFile, QueueProgress};
use super::rebalance::allocate_average;
use super::retry::{self, OrderlyStep, DELAY_LEVEL_BROKER_DECIDES, DELAY_LEVEL_DEAD_LETTER, MAX_RECONSUME_TIMES_DEFAULT};
use super::subscription::{MessageSelector, Subscription};
use super::ConsumeFrom;
use crate::error::ClientError;
use crate::instance::{ClientConfig, ClientInstance, ConsumerHook};
use crate::message::MessageExt;
use crate::remoting::admin::{CmResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo, ProcessQueueInfo};
use crate::remoting::bodies::MessageQueue;
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::heartbeat::{ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::sync::Semaphore;
use crate::trace::{self, ConsumeReturn, TraceConfig, TraceContext, TraceDispatcher, TraceRole};
use glommio::task::JoinHandle;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a lock is trusted after the broker granted or renewed it.
pub const LOCK_HELD_MAX_MS: u64 = 30_000;
pub const RECONSUME_DELAY_MAX_MS: u64 = 60_000;
/// How long an offset reset waits, after stopping the queues, before committing the
/// new offsets: pulls already sent carry the old commit point and must land first (Java
/// waits 10 s).
pub const RESET_SETTLE_MS: u64 = 1_000;
/// Pause after a failed pull before the next.
pub const PULL_BACKOFF_MS: u64 = 1_000;
/// Pause while a queue is over its flow-control bound.
pub const FLOW_CONTROL_PAUSE_MS: u64 = 20;
/// Largest `queue_messages_max`.
pub const QUEUE_MESSAGES_MAX_LIMIT: usize = 32_768;
/// A queue also stops pulling while it tracks this many offsets per message of
/// `queue_messages_max` (acknowledged ones behind an older one still out; Java's
/// `consumeConcurrentlyMaxSpan`): one slow message cannot make the tracking grow without
/// bound. The most tracked is then 16 × 32 768 + one pull, below
/// `offsets::IN_FLIGHT_PER_QUEUE_MAX`.
pub const QUEUE_SPAN_PER_MESSAGE_MAX: usize = 16;
/// Extra client-side wait on top of the broker's suspend time.
pub const PULL_TIMEOUT_SLACK_MS: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeStatus {
    Success,
    /// Deliver this batch again later.
    ReconsumeLater,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeOrderlyStatus {
    Success,
    /// Stop this queue for `suspend_current_queue_ms`, then deliver the same batch again.
    SuspendCurrentQueueAMoment,
}

/// What a concurrent listener may say about a batch besides its status (Java's
/// `ConsumeConcurrentlyContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeConcurrentlyContext {
    /// The queue the batch came from.
    pub queue: MessageQueue,
    /// Delay level of the batch's retry after `ReconsumeLater` (clustering):
    /// `DELAY_LEVEL_BROKER_DECIDES` (0, the default: level 3 + reconsume times),
    /// `DELAY_LEVEL_DEAD_LETTER` (negative: straight to `%DLQ%<group>`), or a level > 0.
    pub delay_level_when_next_consume: i32,
}

impl ConsumeConcurrentlyContext {
    pub fn new(queue: MessageQueue) -> Self {
        Self { queue, delay_level_when_next_consume: DELAY_LEVEL_BROKER_DECIDES }
    }
}

type ConcurrentFn = Rc<dyn Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeStatus>;
type OrderlyFn = Rc<dyn Fn(&[MessageExt]) -> ConsumeOrderlyStatus>;

#[derive(Clone)]
enum Listener {
    Concurrently(ConcurrentFn),
    Orderly(OrderlyFn),
}

#[derive(Debug, Clone)]
pub struct PushConsumerConfig {
    pub client: ClientConfig,
    pub group: String,
    pub model: MessageModel,
    pub consume_from: ConsumeFrom,
    /// Messages asked for per pull.
    pub pull_batch_size: i32,
    /// Messages handed to the listener per call.
    pub consume_batch_max_size: usize,
    /// Listener calls in progress at once (concurrent mode).
    pub consume_tasks_max: usize,
    /// Delivered-but-unacknowledged messages per queue before pulling pauses.
    pub queue_messages_max: usize,
    /// How long the broker may hold a pull when the queue is empty.
    pub pull_suspend_ms: u64,
    pub rebalance_interval_ms: u64,
    pub persist_offset_interval_ms: u64,
    pub lock_renew_interval_ms: u64,
    /// Orderly: retry interval while another member still holds a queue's lock.
    pub lock_retry_ms: u64,
    pub suspend_current_queue_ms: u64,
    /// First local reconsume delay (when a broker did not take a failed message back,
    /// or broadcasting); doubles per attempt up to `RECONSUME_DELAY_MAX_MS`.
    pub reconsume_delay_ms: u64,
    /// Deliveries after the first before a failing message goes to `%DLQ%<group>`
    /// (Java's `maxReconsumeTimes`). None: RocketMQ's default, 16 for a concurrent
    /// listener (sent with every send-back; the broker counts) and unbounded for an
    /// orderly one (it retries locally for ever).
    pub max_reconsume_times: Option<u32>,
    /// Broadcasting: offsets go to `<dir>/<group>/<instance name or DEFAULT>.json`.
    pub offset_store_dir: PathBuf,
    /// Message traces (Java's `enableMsgTrace`, `customizedTraceTopic`): a SubBefore and
    /// a SubAfter record around each listener call; off by default.
    pub trace: TraceConfig,
}

impl PushConsumerConfig {
    pub fn new(client: ClientConfig, group: impl Into<String>) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        Self {
            client,
            group: group.into(),
            model: MessageModel::Clustering,
            consume_from: ConsumeFrom::LastOffset,
            pull_batch_size: 32,
            consume_batch_max_size: 1,
            consume_tasks_max: 20,
            queue_messages_max: 1_000,
            pull_suspend_ms: 15_000,
            rebalance_interval_ms: 20_000,
            persist_offset_interval_ms: 5_000,
            lock_renew_interval_ms: 20_000,
            lock_retry_ms: 1_000,
            suspend_current_queue_ms: 1_000,
            reconsume_delay_ms: 1_000,
            max_reconsume_times: None,
            offset_store_dir: home.join(".ringmq_offsets"),
            trace: TraceConfig::default(),
        }
    }

    fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: String| Err(ClientError::Config(m));
        if self.group.is_empty() {
            return bad("consumer group is empty".into());
        }
        if !(1..=1024).contains(&self.pull_batch_size) {
            return bad(format!("pull_batch_size {} is outside 1..=1024", self.pull_batch_size));
        }
        if self.consume_batch_max_size == 0 || self.consume_tasks_max == 0 || self.queue_messages_max == 0 {
            return bad("consume_batch_max_size, consume_tasks_max and queue_messages_max must be > 0".into());
        }
        if self.queue_messages_max > QUEUE_MESSAGES_MAX_LIMIT {
            return bad(format!("queue_messages_max {} is over {QUEUE_MESSAGES_MAX_LIMIT}", self.queue_messages_max));
        }
        if self.rebalance_interval_ms == 0 || self.persist_offset_interval_ms == 0 || self.lock_renew_interval_ms == 0 {
            return bad("rebalance, persist and lock intervals must be > 0".into());
        }
        if self.max_reconsume_times.is_some_and(|m| i32::try_from(m).is_err()) {
            return bad(format!("max_reconsume_times {:?} is over {}", self.max_reconsume_times, i32::MAX));
        }
        Ok(())
    }

    /// The maximum a concurrent consumer sends with its send-backs.
    pub fn max_reconsume_times_concurrently(&self) -> i32 {
        self.max_reconsume_times.map_or(MAX_RECONSUME_TIMES_DEFAULT, |m| i32::try_from(m).unwrap_or(i32::MAX))
    }

    /// The number of local retries after which an orderly consumer dead-letters a message.
    pub fn max_reconsume_times_orderly(&self) -> i32 {
        self.max_reconsume_times.map_or(i32::MAX, |m| i32::try_from(m).unwrap_or(i32::MAX))
    }
}

/// One owned queue.
struct ProcessQueue {
    queue: MessageQueue,
    dropped: Cell<bool>,
    /// None until the start offset is resolved.
    progress: RefCell<Option<QueueProgress>>,
    /// Orderly: the lock is trusted until then.
    locked_until: Cell<Option<Instant>>,
    /// Last commit point written.
    persisted: Cell<Option<i64>>,
    task: RefCell<Option<JoinHandle<()>>>,
}

impl ProcessQueue {
    fn commit_point(&self) -> Option<i64> {
        self.progress.borrow().as_ref().map(QueueProgress::commit_point)
    }

    fn lock_valid(&self) -> bool {
        self.locked_until.get().is_some_and(|t| t > Instant::now())
    }

    fn ack(&self, offsets: impl IntoIterator<Item = i64>) {
        if let Some(p) = self.progress.borrow_mut().as_mut() {
            for o in offsets {
                p.acked(o);
            }
        }
    }
}

struct Inner {
    instance: Rc<ClientInstance>,
    config: PushConsumerConfig,
    /// The application's subscriptions, plus `%RETRY%<group>` (`*`) when clustering.
    subscriptions: BTreeMap<String, Subscription>,
    /// `%RETRY%<group>`.
    retry_topic: String,
    listener: Listener,
    queues: RefCell<BTreeMap<MessageQueue, Rc<ProcessQueue>>>,
    local_offsets: RefCell<Option<LocalOffsetFile>>,
    rebalance_signal: LocalSender<()>,
    consume_permits: Rc<Semaphore>,
    tracer: Option<TraceDispatcher>,
    stopped: Cell<bool>,
    tasks: RefCell<Vec<JoinHandle<()>>>,
    /// Topics whose offsets a broker is resetting: rebalancing leaves their queues
    /// alone until the new offsets are committed.
    resetting: RefCell<BTreeSet<String>>,
    /// When `start` ran (ms since the epoch), for the running info.
    started_ms: i64,
}

impl ConsumerHook for Inner {
    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: match self.config.consume_from {
                ConsumeFrom::LastOffset => ConsumeFromWhere::ConsumeFromLastOffset,
                ConsumeFrom::FirstOffset => ConsumeFromWhere::ConsumeFromFirstOffset,
                ConsumeFrom::Timestamp(_) => ConsumeFromWhere::ConsumeFromTimestamp,
            },
            consume_type: ConsumeType::ConsumePassively,
            group_name: self.config.group.clone(),
            message_model: self.config.model,
            subscription_data_set: self.subscriptions.values().map(Subscription::data).collect(),
            unit_mode: false,
        }
    }

    fn membership_changed(&self) {
        let _ = self.rebalance_signal.try_send(());
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let mut info = ConsumerRunningInfo { subscription_set: self.subscriptions.values().map(Subscription::data).collect(), ..Default::default() };
        let data = self.consumer_data();
        let props = [
            ("consumerGroup", self.config.group.clone()),
            ("messageModel", format!("{:?}", self.config.model).to_uppercase()),
            ("consumeFromWhere", format!("{:?}", data.consume_from_where)),
            ("pullBatchSize", self.config.pull_batch_size.to_string()),
            ("consumeMessageBatchMaxSize", self.config.consume_batch_max_size.to_string()),
            ("pullThresholdForQueue", self.config.queue_messages_max.to_string()),
            ("maxReconsumeTimes", self.config.max_reconsume_times_concurrently().to_string()),
            ("PROP_CONSUME_TYPE", "CONSUME_PASSIVELY".to_string()),
            ("PROP_CONSUMEORDERLY", is_orderly(&self.listener).to_string()),
            ("PROP_THREADPOOL_CORE_SIZE", self.config.consume_tasks_max.to_string()),
            ("PROP_CONSUMER_START_TIMESTAMP", self.started_ms.to_string()),
        ];
        info.properties.extend(props.into_iter().map(|(k, v)| (k.to_string(), v)));
        for (queue, pq) in self.queues.borrow().iter() {
            let progress = pq.progress.borrow();
            let (commit, in_flight) = progress.as_ref().map_or((-1, 0), |p| (p.commit_point(), p.in_flight_count()));
            let row = ProcessQueueInfo {
                commit_offset: commit,
                cached_msg_count: in_flight as i64,
                cached_msg_min_offset: if in_flight > 0 { commit } else { 0 },
                droped: pq.dropped.get(),
                locked: pq.lock_valid(),
                ..Default::default()
            };
            info.mq_table.insert(queue.clone(), row);
        }
        info
    }

    fn reset_offsets(self: Rc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) {
        if !self.subscriptions.contains_key(&topic) || !self.resetting.borrow_mut().insert(topic.clone()) {
            return; // not ours, or a reset of this topic is already running
        }
        glommio::spawn_local(async move {
            self.reset_topic(&topic, &offsets).await;
            self.resetting.borrow_mut().remove(&topic);
            let _ = self.rebalance_signal.try_send(());
        })
        .detach();
    }

    fn consume_directly(&self, mut msg: MessageExt) -> ConsumeMessageDirectlyResult {
        if msg.topic == self.retry_topic {
            retry::restore_original_topic(&mut msg, &self.retry_topic);
        }
        let started = Instant::now();
        let queue = MessageQueue { broker_name: msg.broker_name.clone(), queue_id: msg.queue_id, topic: msg.topic.clone() };
        let batch = [msg];
        // A listener that panics answers CR_THROW_EXCEPTION, as a Java listener that throws.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &self.listener {
            Listener::Concurrently(f) => match f(&batch, &mut ConsumeConcurrentlyContext::new(queue)) {
                ConsumeStatus::Success => CmResult::CR_SUCCESS,
                ConsumeStatus::ReconsumeLater => CmResult::CR_LATER,
            },
            Listener::Orderly(f) => match f(&batch) {
                ConsumeOrderlyStatus::Success => CmResult::CR_SUCCESS,
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CmResult::CR_LATER,
            },
        }));
        let (result, remark) = match outcome {
            Ok(r) => (r, None),
            Err(_) => (CmResult::CR_THROW_EXCEPTION, Some("the listener panicked".to_string())),
        };
        ConsumeMessageDirectlyResult {
            auto_commit: true,
            consume_result: Some(result),
            order: is_orderly(&self.listener),
            remark,
            spent_time_mills: started.elapsed().as_millis() as i64,
        }
    }
}

/// Builder and handle of a push consumer.
pub struct PushConsumer {
    config: PushConsumerConfig,
    subscriptions: BTreeMap<String, Subscription>,
    listener: Option<Listener>,
    inner: Option<Rc<Inner>>,
}

/// Java's `checkClientInBroker`: every broker of the route is asked (CHECK_CLIENT_CONFIG)
/// whether it serves each non-TAG subscription; one that does not (property filters
/// off there, or an expression it cannot compile) fails the start with its remark,
/// before any pull could be refused.
async fn check_in_brokers(instance: &Rc<ClientInstance>, group: &str, subscriptions: &BTreeMap<String, Subscription>) -> Result<(), ClientError> {
    let timeout = Duration::from_millis(instance.config.request_timeout_ms);
    for sub in subscriptions.values().filter(|s| s.expression_type != crate::remoting::heartbeat::EXPRESSION_TYPE_TAG) {
        for addr in instance.all_broker_addrs() {
            let body = serde_json::json!({ "clientId": instance.client_id, "group": group, "subscriptionData": sub.data() });
            let cmd = RemotingCommand::request(rq::CHECK_CLIENT_CONFIG).with_body(body.to_string().into_bytes());
            let r = instance.invoke_with_timeout(&addr, cmd, timeout).await?;
            if r.code != rs::SUCCESS {
                return Err(ClientError::Broker { addr, code: r.code, remark: r.remark.unwrap_or_default() });
            }
        }
    }
    Ok(())
}

impl PushConsumer {
    pub fn new(config: PushConsumerConfig) -> Self {
        Self { config, subscriptions: BTreeMap::new(), listener: None, inner: None }
    }

    /// Subscribes to `topic` with a TAG expression (`*`, `A`, `A || B`).
    pub fn subscribe(&mut self, topic: &str, expression: &str) -> Result<(), ClientError> {
        self.subscribe_with(topic, &MessageSelector::by_tag(expression))
    }

    /// Subscribes to `topic` with a selector: `MessageSelector::by_sql("a > 5")` has the
    /// broker select by properties (it needs `enablePropertyFilter=true`).
    pub fn subscribe_with(&mut self, topic: &str, selector: &MessageSelector) -> Result<(), ClientError> {
        if !crate::message::user::valid_topic(topic) {
            return Err(ClientError::Config(format!("bad topic name `{topic}`")));
        }
        self.subscriptions.insert(topic.to_string(), Subscription::with_selector(topic, selector));
        Ok(())
    }

    pub fn register_concurrently(&mut self, f: impl Fn(&[MessageExt]) -> ConsumeStatus + 'static) {
        self.listener = Some(Listener::Concurrently(Rc::new(move |msgs: &[MessageExt], _: &mut ConsumeConcurrentlyContext| f(msgs))));
    }

    /// A concurrent listener that may also set the batch's retry delay level in its
    /// context (Java's `delayLevelWhenNextConsume`).
    pub fn register_concurrently_with_context(
        &mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeStatus + 'static,
    ) {
        self.listener = Some(Listener::Concurrently(Rc::new(f)));
    }

    pub fn register_orderly(&mut self, f: impl Fn(&[MessageExt]) -> ConsumeOrderlyStatus + 'static) {
        self.listener = Some(Listener::Orderly(Rc::new(f)));
    }

    /// Starts pulling on the current glommio executor.
    pub async fn start(&mut self) -> Result<(), ClientError> {
        if self.inner.is_some() {
            return Err(ClientError::Config("consumer already started".into()));
        }
        self.config.validate()?;
        let listener = self.listener.clone().ok_or_else(|| ClientError::Config("no listener registered".into()))?;
        if self.subscriptions.is_empty() {
            return Err(ClientError::Config("no subscription: call subscribe first".into()));
        }
        let instance = ClientInstance::start(self.config.client.clone())?;
        let local_offsets = if self.config.model == MessageModel::Broadcasting {
            let name = self.config.client.instance_name.clone().unwrap_or_else(|| "DEFAULT".into());
            let path = self.config.offset_store_dir.join(&self.config.group).join(format!("{name}.json"));
            Some(LocalOffsetFile::open(path)?)
        } else {
            None
        };
        let tracer = match self.config.trace.enabled {
            true => Some(TraceDispatcher::start(&self.config.client, &self.config.group, TraceRole::Consume, self.config.trace.topic())?),
            false => None,
        };
        let (signal_tx, signal_rx) = local_channel::new_bounded(1);
        // Java's copySubscription: a clustering group also reads its retry topic.
        let retry_topic = retry::retry_topic(&self.config.group);
        let mut subscriptions = self.subscriptions.clone();
        if self.config.model == MessageModel::Clustering {
            subscriptions.insert(retry_topic.clone(), Subscription::new(&retry_topic, "*"));
        }
        let inner = Rc::new(Inner {
            instance: instance.clone(),
            config: self.config.clone(),
            subscriptions: subscriptions.clone(),
            retry_topic: retry_topic.clone(),
            listener,
            queues: RefCell::new(BTreeMap::new()),
            local_offsets: RefCell::new(local_offsets),
            rebalance_signal: signal_tx,
            consume_permits: Rc::new(Semaphore::new(self.config.consume_tasks_max as u64)),
            tracer,
            stopped: Cell::new(false),
            tasks: RefCell::new(Vec::new()),
            resetting: RefCell::new(BTreeSet::new()),
            started_ms: crate::msgid::now_ms(),
        });
        let hook: Rc<dyn ConsumerHook> = inner.clone();
        instance.register_consumer(&self.config.group, Rc::downgrade(&hook));
        for topic in subscriptions.keys() {
            instance.use_topic(topic);
            if *topic == retry_topic {
                continue; // a broker creates it when our heartbeat arrives
            }
            if let Err(e) = instance.fetch_route(topic).await {
                tracing::warn!(topic, error = %e, "no route yet; the consumer will pick the topic up when it appears");
            }
        }
        if let Err(e) = check_in_brokers(&instance, &self.config.group, &subscriptions).await {
            instance.shutdown().await;
            return Err(e);
        }
        instance.heartbeat_all().await;
        if subscriptions.contains_key(&retry_topic) {
            if let Err(e) = instance.fetch_route(&retry_topic).await {
                tracing::debug!(topic = retry_topic, error = %e, "no retry topic route yet; rebalancing picks it up");
            }
        }
        inner.spawn_background(signal_rx);
        self.inner = Some(inner);
        Ok(())
    }

    /// The queues of the subscribed topics this member reads now (not the group's
    /// `%RETRY%` queues it reads too: see `assigned_retry_queues`).
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        self.assigned(|i, q| q.topic != i.retry_topic)
    }

    /// The group's `%RETRY%<group>` queues this member reads now (clustering).
    pub fn assigned_retry_queues(&self) -> Vec<MessageQueue> {
        self.assigned(|i, q| q.topic == i.retry_topic)
    }

    fn assigned(&self, keep: impl Fn(&Inner, &MessageQueue) -> bool) -> Vec<MessageQueue> {
        let Some(inner) = self.inner.as_ref() else { return Vec::new() };
        let queues = inner.queues.borrow();
        queues.keys().filter(|q| keep(inner, q)).cloned().collect()
    }

    pub fn client_id(&self) -> Option<String> {
        self.inner.as_ref().map(|i| i.instance.client_id.clone())
    }

    /// Rebalances now (also done on a timer and on membership changes).
    pub async fn rebalance(&self) {
        if let Some(inner) = &self.inner {
            inner.rebalance().await;
        }
    }

    /// Commits every queue's commit point now.
    pub async fn persist_offsets(&self) {
        if let Some(inner) = &self.inner {
            inner.persist_offsets().await;
        }
    }

    /// Commits offsets, releases queues and locks, and leaves the group.
    pub async fn shutdown(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        inner.stopped.set(true);
        for task in inner.tasks.borrow_mut().drain(..) {
            task.cancel();
        }
        let owned: Vec<Rc<ProcessQueue>> = inner.queues.borrow().values().cloned().collect();
        inner.drop_queues(owned).await;
        inner.persist_offsets().await;
        if let Some(t) = &inner.tracer {
            t.shutdown().await;
        }
        inner.instance.shutdown().await;
    }
}

fn is_orderly(listener: &Listener) -> bool {
    matches!(listener, Listener::Orderly(_))
}

impl Inner {
    fn clustering(&self) -> bool {
        self.config.model == MessageModel::Clustering
    }

    fn needs_lock(&self) -> bool {
        self.clustering() && is_orderly(&self.listener)
    }

    fn spawn_background(self: &Rc<Self>, signal_rx: LocalReceiver<()>) {
        let weak = Rc::downgrade(self);
        let every = Duration::from_millis(self.config.rebalance_interval_ms);
        let rebalancer = glommio::spawn_local(async move {
            loop {
                let Some(me) = weak.upgrade() else { break };
                if me.stopped.get() {
                    break;
                }
                me.rebalance().await;
                drop(me);
                futures_lite::future::or(async { glommio::timer::sleep(every).await }, async {
                    let _ = signal_rx.recv().await;
                })
                .await;
            }
        })
        .detach();
        let weak = Rc::downgrade(self);
        let every = Duration::from_millis(self.config.persist_offset_interval_ms);
        let persister = glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(every).await;
                let Some(me) = weak.upgrade() else { break };
                if me.stopped.get() {
                    break;
                }
                me.persist_offsets().await;
            }
        })
        .detach();
        let mut tasks = vec![rebalancer, persister];
        if self.needs_lock() {
            let weak = Rc::downgrade(self);
            let every = Duration::from_millis(self.config.lock_renew_interval_ms);
            tasks.push(
                glommio::spawn_local(async move {
                    loop {
                        glommio::timer::sleep(every).await;
                        let Some(me) = weak.upgrade() else { break };
                        if me.stopped.get() {
                            break;
                        }
                        me.renew_locks().await;
                    }
                })
                .detach(),
            );
        }
        self.tasks.borrow_mut().extend(tasks);
    }

    /// Recomputes which queues this member reads and starts or stops pull loops.
    async fn rebalance(self: &Rc<Self>) {
        for (topic, _) in self.subscriptions.iter() {
            let route = match self.instance.route(topic).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(topic, error = %e, "rebalance: no route");
                    continue;
                }
            };
            let mine: BTreeSet<MessageQueue> = if self.clustering() {
                let Some(addr) = route.master_addrs.values().next().cloned() else { continue };
                let ids = match kernel::consumer_ids(&self.instance, &addr, &self.config.group).await {
                    Ok(ids) => ids,
                    Err(e) => {
                        tracing::debug!(topic, error = %e, "rebalance: no consumer list");
                        continue;
                    }
                };
                if ids.is_empty() {
                    continue;
                }
                allocate_average(&route.read_queues, &ids, &self.instance.client_id).into_iter().collect()
            } else {
                route.read_queues.iter().cloned().collect()
            };
            if self.stopped.get() {
                return;
            }
            let gone: Vec<Rc<ProcessQueue>> =
                self.queues.borrow().iter().filter(|(q, _)| &q.topic == topic && !mine.contains(*q)).map(|(_, pq)| pq.clone()).collect();
            if !gone.is_empty() {
                tracing::debug!(topic, released = gone.len(), "rebalance: releasing queues");
                self.drop_queues(gone).await;
            }
            if self.resetting.borrow().contains(topic) {
                continue; // `reset_topic` restarts them once the new offsets are committed
            }
            for q in mine {
                if self.queues.borrow().contains_key(&q) {
                    continue;
                }
                let pq = Rc::new(ProcessQueue {
                    queue: q.clone(),
                    dropped: Cell::new(false),
                    progress: RefCell::new(None),
                    locked_until: Cell::new(None),
                    persisted: Cell::new(None),
                    task: RefCell::new(None),
                });
                let me = self.clone();
                let pq2 = pq.clone();
                let task = glommio::spawn_local(async move { me.run_queue(pq2).await }).detach();
                *pq.task.borrow_mut() = Some(task);
                self.queues.borrow_mut().insert(q, pq);
            }
        }
    }

    /// A broker's RESET_CONSUMER_CLIENT_OFFSET (Java's `MQClientInstance.resetOffset`):
    /// stops this member's queues of `topic` without committing where they stood, waits
    /// `RESET_SETTLE_MS` so that pulls already sent (which carry the old commit point)
    /// are answered first, then commits the new offsets; rebalancing restarts the queues
    /// from them.
    async fn reset_topic(self: &Rc<Self>, topic: &str, offsets: &BTreeMap<MessageQueue, i64>) {
        let owned: Vec<Rc<ProcessQueue>> =
            self.queues.borrow().iter().filter(|(q, _)| q.topic == topic && offsets.contains_key(*q)).map(|(_, pq)| pq.clone()).collect();
        for pq in &owned {
            pq.dropped.set(true);
            if let Some(task) = pq.task.borrow_mut().take() {
                task.cancel();
            }
            self.queues.borrow_mut().remove(&pq.queue);
        }
        glommio::timer::sleep(Duration::from_millis(RESET_SETTLE_MS)).await;
        for pq in &owned {
            let offset = offsets[&pq.queue];
            if self.clustering() {
                if let Err(e) = kernel::commit_offset(&self.instance, &self.config.group, &pq.queue, offset).await {
                    tracing::warn!(queue = ?pq.queue, offset, error = %e, "reset offset not committed");
                }
            } else if let Some(local) = self.local_offsets.borrow_mut().as_mut() {
                local.set(&pq.queue, offset);
            }
            tracing::info!(queue = ?pq.queue, offset, "consumer offset reset");
        }
        if !self.clustering() {
            self.save_local_offsets();
        }
        if self.needs_lock() {
            let locked: Vec<MessageQueue> = owned.iter().filter(|pq| pq.locked_until.take().is_some()).map(|pq| pq.queue.clone()).collect();
            for q in locked {
                if let Ok(addr) = kernel::broker_addr(&self.instance, &q) {
                    let _ = kernel::unlock_queues(&self.instance, &addr, &self.config.group, std::slice::from_ref(&q)).await;
                }
            }
        }
    }

    /// Stops the queues, commits where they stand, then releases their locks.
    async fn drop_queues(self: &Rc<Self>, gone: Vec<Rc<ProcessQueue>>) {
        for pq in &gone {
            pq.dropped.set(true);
            if let Some(task) = pq.task.borrow_mut().take() {
                task.cancel();
            }
            self.queues.borrow_mut().remove(&pq.queue);
        }
        for pq in &gone {
            self.persist_queue(pq).await;
        }
        if self.local_offsets.borrow().is_some() {
            self.save_local_offsets();
        }
        if self.needs_lock() {
            let locked: Vec<&Rc<ProcessQueue>> = gone.iter().filter(|pq| pq.locked_until.take().is_some()).collect();
            for pq in locked {
                if let Ok(addr) = kernel::broker_addr(&self.instance, &pq.queue) {
                    if let Err(e) = kernel::unlock_queues(&self.instance, &addr, &self.config.group, std::slice::from_ref(&pq.queue)).await {
                        tracing::debug!(queue = ?pq.queue, error = %e, "unlock failed; the broker lock expires by itself");
                    }
                }
            }
        }
    }

    async fn persist_queue(&self, pq: &ProcessQueue) {
        let Some(point) = pq.commit_point() else { return };
        if pq.persisted.get() == Some(point) {
            return;
        }
        if self.clustering() {
            match kernel::commit_offset(&self.instance, &self.config.group, &pq.queue, point).await {
                Ok(()) => pq.persisted.set(Some(point)),
                Err(e) => tracing::debug!(queue = ?pq.queue, error = %e, "offset commit failed; retried next round"),
            }
        } else if let Some(local) = self.local_offsets.borrow_mut().as_mut() {
            local.set(&pq.queue, point);
            pq.persisted.set(Some(point));
        }
    }

    fn save_local_offsets(&self) {
        if let Some(local) = self.local_offsets.borrow().as_ref() {
            if let Err(e) = local.save() {
                tracing::warn!(error = %e, "local offsets not saved");
            }
        }
    }

    async fn persist_offsets(self: &Rc<Self>) {
        let owned: Vec<Rc<ProcessQueue>> = self.queues.borrow().values().cloned().collect();
        for pq in &owned {
            self.persist_queue(pq).await;
        }
        if !self.clustering() {
            self.save_local_offsets();
        }
    }

    async fn renew_locks(self: &Rc<Self>) {
        let mut by_broker: BTreeMap<String, Vec<Rc<ProcessQueue>>> = BTreeMap::new();
        for pq in self.queues.borrow().values() {
            if let Ok(addr) = kernel::broker_addr(&self.instance, &pq.queue) {
                by_broker.entry(addr).or_default().push(pq.clone());
            }
        }
        for (addr, pqs) in by_broker {
            let queues: Vec<MessageQueue> = pqs.iter().map(|pq| pq.queue.clone()).collect();
            let granted_at = Instant::now();
            match kernel::lock_queues(&self.instance, &addr, &self.config.group, &queues).await {
                Ok(locked) => {
                    for pq in pqs {
                        if locked.contains(&pq.queue) {
                            pq.locked_until.set(Some(granted_at + Duration::from_millis(LOCK_HELD_MAX_MS)));
                        } else if pq.locked_until.take().is_some() {
                            tracing::warn!(queue = ?pq.queue, "lost the queue lock; pausing the queue");
                        }
                    }
                }
                Err(e) => tracing::debug!(addr, error = %e, "lock renewal failed"),
            }
        }
    }

    /// Orderly: obtains `pq`'s lock, retrying until granted or the queue is dropped.
    async fn lock_queue(&self, pq: &ProcessQueue) -> bool {
        loop {
            if pq.dropped.get() || self.stopped.get() {
                return false;
            }
            if pq.lock_valid() {
                return true;
            }
            if let Ok(addr) = kernel::broker_addr(&self.instance, &pq.queue) {
                let granted_at = Instant::now();
                match kernel::lock_queues(&self.instance, &addr, &self.config.group, std::slice::from_ref(&pq.queue)).await {
                    Ok(locked) if locked.contains(&pq.queue) => {
                        pq.locked_until.set(Some(granted_at + Duration::from_millis(LOCK_HELD_MAX_MS)));
                        return true;
                    }
                    Ok(_) => tracing::debug!(queue = ?pq.queue, "queue locked by another member; retrying"),
                    Err(e) => tracing::debug!(queue = ?pq.queue, error = %e, "lock failed; retrying"),
                }
            }
            glommio::timer::sleep(Duration::from_millis(self.config.lock_retry_ms)).await;
        }
    }

    async fn resolve_start_offset(&self, queue: &MessageQueue) -> Result<i64, ClientError> {
        let stored = if self.clustering() {
            kernel::query_offset(&self.instance, &self.config.group, queue).await?
        } else {
            self.local_offsets.borrow().as_ref().and_then(|l| l.get(queue))
        };
        match stored {
            Some(o) => Ok(o),
            None => kernel::start_offset_by_policy(&self.instance, queue, self.config.consume_from).await,
        }
    }

    /// The pull loop of one queue.
    async fn run_queue(self: Rc<Self>, pq: Rc<ProcessQueue>) {
        let alive = |me: &Self| !pq.dropped.get() && !me.stopped.get();
        if self.needs_lock() && !self.lock_queue(&pq).await {
            return;
        }
        let start = loop {
            if !alive(&self) {
                return;
            }
            match self.resolve_start_offset(&pq.queue).await {
                Ok(o) => break o,
                Err(e) => {
                    tracing::warn!(queue = ?pq.queue, error = %e, "start offset unknown; retrying");
                    glommio::timer::sleep(Duration::from_millis(PULL_BACKOFF_MS)).await;
                }
            }
        };
        *pq.progress.borrow_mut() = Some(QueueProgress::new(start));
        pq.persisted.set(Some(start));
        let subscription = self.subscriptions.get(&pq.queue.topic).cloned().expect("queues come from subscriptions");
        while alive(&self) {
            let (offset, in_flight, tracked, commit_point) = {
                let p = pq.progress.borrow();
                let p = p.as_ref().expect("set above");
                (p.next_pull_offset(), p.in_flight_count(), p.tracked_count(), p.commit_point())
            };
            if in_flight >= self.config.queue_messages_max || tracked >= self.config.queue_messages_max * QUEUE_SPAN_PER_MESSAGE_MAX {
                glommio::timer::sleep(Duration::from_millis(FLOW_CONTROL_PAUSE_MS)).await;
                continue;
            }
            if self.needs_lock() && !pq.lock_valid() && !self.lock_queue(&pq).await {
                return;
            }
            let req = PullRequest {
                group: &self.config.group,
                queue: &pq.queue,
                offset,
                max_messages: self.config.pull_batch_size,
                subscription: &subscription,
                commit_offset: self.clustering().then_some(commit_point),
                suspend_ms: self.config.pull_suspend_ms,
                timeout: Duration::from_millis(self.config.pull_suspend_ms + PULL_TIMEOUT_SLACK_MS),
            };
            let result = match kernel::pull(&self.instance, &req).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(queue = ?pq.queue, error = %e, "pull failed");
                    glommio::timer::sleep(Duration::from_millis(PULL_BACKOFF_MS)).await;
                    continue;
                }
            };
            if !alive(&self) {
                return;
            }
            if result.status == PullStatus::OffsetIllegal {
                tracing::warn!(queue = ?pq.queue, offset, next = result.next_begin_offset, "offset outside the queue; moving");
            }
            let offsets: Vec<i64> = result.messages.iter().map(|m| m.queue_offset).collect();
            if let Some(p) = pq.progress.borrow_mut().as_mut() {
                p.delivered(offsets, result.next_begin_offset);
            }
            if result.messages.is_empty() {
                continue;
            }
            let mut messages = result.messages;
            if pq.queue.topic == self.retry_topic {
                for m in &mut messages {
                    retry::restore_original_topic(m, &self.retry_topic);
                }
            }
            match self.listener.clone() {
                Listener::Concurrently(f) => self.dispatch_concurrently(&pq, f, messages).await,
                Listener::Orderly(f) => {
                    if !self.consume_orderly(&pq, f, messages).await {
                        return;
                    }
                }
            }
        }
    }

    async fn dispatch_concurrently(self: &Rc<Self>, pq: &Rc<ProcessQueue>, f: ConcurrentFn, messages: Vec<MessageExt>) {
        // Batches are moved out of `messages`, never cloned: a clone copied every
        // message's strings and properties once more.
        let mut messages = messages.into_iter();
        while messages.len() > 0 {
            let Ok(permit) = self.consume_permits.acquire_static_permit(1).await else { return };
            let mut batch: Vec<MessageExt> = messages.by_ref().take(self.config.consume_batch_max_size).collect();
            let (me, pq, f) = (self.clone(), pq.clone(), f.clone());
            glommio::spawn_local(async move {
                let _permit = permit;
                let mut attempt = 0u32;
                loop {
                    if pq.dropped.get() {
                        return; // not acknowledged: the next owner gets it again
                    }
                    let mut context = ConsumeConcurrentlyContext::new(pq.queue.clone());
                    let traced = me.trace_before(&batch);
                    let status = f(&batch, &mut context);
                    me.trace_after(traced, batch.len(), if status == ConsumeStatus::Success { ConsumeReturn::Success } else { ConsumeReturn::Failed });
                    if status == ConsumeStatus::Success {
                        pq.ack(batch.iter().map(|m| m.queue_offset));
                        return;
                    }
                    let sent_back = me.send_back_batch(&batch, context.delay_level_when_next_consume).await;
                    let settled = retry::settle_reconsume_later(batch, &sent_back);
                    pq.ack(settled.consumed);
                    if settled.retry_locally.is_empty() {
                        return;
                    }
                    batch = settled.retry_locally;
                    attempt += 1;
                    let delay = me.config.reconsume_delay_ms.saturating_mul(1 << attempt.min(16)).min(RECONSUME_DELAY_MAX_MS);
                    tracing::debug!(queue = ?pq.queue, attempt, delay_ms = delay, messages = batch.len(), "reconsume later, locally");
                    glommio::timer::sleep(Duration::from_millis(delay)).await;
                }
            })
            .detach();
        }
    }

    /// Java's `consumeMessageBefore`: the batch's SubBefore record, kept for its SubAfter.
    fn trace_before(&self, batch: &[MessageExt]) -> Option<TraceContext> {
        let tracer = self.tracer.as_ref()?;
        let ctx = trace::sub_before(&self.config.group, batch, tracer.next_request_id(), crate::msgid::now_ms())?;
        tracer.append(ctx.clone());
        Some(ctx)
    }

    /// Java's `consumeMessageAfter`: the SubAfter record of a listener call.
    fn trace_after(&self, before: Option<TraceContext>, batch_len: usize, result: ConsumeReturn) {
        if let (Some(tracer), Some(before)) = (&self.tracer, before) {
            tracer.append(trace::sub_after(&before, batch_len, result, crate::msgid::now_ms()));
        }
    }

    /// Sends each message of a failed concurrent batch back (clustering only: a
    /// broadcasting member sends none); says which ones a broker took.
    async fn send_back_batch(&self, batch: &[MessageExt], delay_level: i32) -> Vec<bool> {
        let mut sent = Vec::with_capacity(batch.len());
        for m in batch {
            if !self.clustering() {
                sent.push(false);
                continue;
            }
            let max = self.config.max_reconsume_times_concurrently();
            let header = retry::send_back_header(&self.config.group, m, delay_level, max);
            match kernel::send_message_back(&self.instance, m, &header).await {
                Ok(()) => sent.push(true),
                Err(e) => {
                    tracing::warn!(group = %self.config.group, msg_id = %m.msg_id, error = %e, "send-back failed; retrying the message locally");
                    sent.push(false);
                }
            }
        }
        sent
    }

    /// Orderly: puts a message that reached its maximum into `%DLQ%<group>`, by
    /// CONSUMER_SEND_MSG_BACK with a negative delay level or else Java's message to
    /// `%RETRY%<group>` with reconsumeTimes at the maximum; true once a broker took it.
    async fn send_to_dead_letter(&self, m: &MessageExt) -> bool {
        let max = self.config.max_reconsume_times_orderly();
        let header = retry::send_back_header(&self.config.group, m, DELAY_LEVEL_DEAD_LETTER, max);
        let first = match kernel::send_message_back(&self.instance, m, &header).await {
            Ok(()) => return true,
            Err(e) => e,
        };
        match kernel::send_retry_message(&self.instance, &retry::orderly_retry_message(&self.config.group, m, max)).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(group = %self.config.group, msg_id = %m.msg_id, send_back = %first, retry_message = %e,
                    "could not hand the message to the dead letter queue; suspending the queue and retrying");
                false
            }
        }
    }

    /// Consumes one pull's messages strictly in order; false when the queue was lost.
    async fn consume_orderly(&self, pq: &ProcessQueue, f: OrderlyFn, messages: Vec<MessageExt>) -> bool {
        for chunk in messages.chunks(self.config.consume_batch_max_size) {
            let mut batch = chunk.to_vec();
            loop {
                if pq.dropped.get() || self.stopped.get() {
                    return false;
                }
                if self.needs_lock() && !pq.lock_valid() && !self.lock_queue(pq).await {
                    return false;
                }
                let traced = self.trace_before(&batch);
                let status = f(&batch);
                self.trace_after(traced, batch.len(), if status == ConsumeOrderlyStatus::Success { ConsumeReturn::Success } else { ConsumeReturn::Failed });
                match status {
                    ConsumeOrderlyStatus::Success => {
                        pq.ack(batch.iter().map(|m| m.queue_offset));
                        break;
                    }
                    ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
                        // Java's checkReconsumeTimes; unlike Java, a message handed to the
                        // dead letter queue is not delivered again with the rest.
                        let max = self.config.max_reconsume_times_orderly();
                        let mut again = Vec::with_capacity(batch.len());
                        let mut gone = Vec::new();
                        for mut m in batch {
                            if retry::orderly_step(m.reconsume_times, max) == OrderlyStep::SendToDeadLetter && self.send_to_dead_letter(&m).await {
                                gone.push(m.queue_offset);
                            } else {
                                m.reconsume_times = m.reconsume_times.saturating_add(1);
                                again.push(m);
                            }
                        }
                        pq.ack(gone);
                        if again.is_empty() {
                            break;
                        }
                        batch = again;
                        glommio::timer::sleep(Duration::from_millis(self.config.suspend_current_queue_ms)).await;
                    }
                }
            }
        }
        true
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            inner.stopped.set(true);
            for task in inner.tasks.borrow_mut().drain(..) {
                task.cancel();
            }
            for pq in inner.queues.borrow().values() {
                pq.dropped.set(true);
                if let Some(t) = pq.task.borrow_mut().take() {
                    t.cancel();
                }
            }
        }
    }
}
