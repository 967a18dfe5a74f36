//! The producer: picks a queue, sends, retries, and keeps its group known to brokers.
//!
//! Queue choice: round-robin over the topic's writable queues (one counter per
//! producer), skipping brokers isolated after a failure for `broker_isolation_ms`; when
//! every broker is isolated it still tries one (the isolation is a preference, not a
//! ban). Ordered sends choose by a selector (default: Java's hash of a key modulo the
//! queue count) and never move to another queue, which would break the order.
//!
//! Invariants:
//! - a send makes at most `1 + retry_times_when_send_failed` attempts, all within
//!   `send_timeout_ms` in total; only `ClientError::is_retriable` errors are retried;
//! - every message gets a `UNIQ_KEY` before its first attempt, so a retried message keeps
//!   its id (consumers can de-duplicate);
//! - a body over `max_message_bytes` is refused locally, before any IO;
//! - a message whose `TRAN_MSG` is `true` travels as a half message (sysFlag
//!   `TRANSACTION_PREPARED_TYPE`, as Java's `sendKernelImpl` sets it) and is never
//!   batched (a broker refuses transactional batches); `transaction` drives the rest;
//! - a single message's body of at least `compress_msg_body_over_howmuch` bytes is
//!   compressed once, before the first attempt and after the queue selector saw the
//!   original, and travels with `COMPRESSED_FLAG` and its type in sysFlag (Java's
//!   `tryToCompressMessage`); batch bodies are never compressed (nor are they in Java).
//! - with tracing on (`ProducerConfig::trace`), each successful single send attempt
//!   appends one Pub record to the trace dispatcher (no IO, never an error of the send).
//! - a message whose `MSG_TYPE` is `reply` travels as SEND_REPLY_MESSAGE_V2 (Java's
//!   `MQClientAPIImpl.sendMessage`); a request (`request`) waits at most its timeout in
//!   all, its send included, and its pending slot is gone when it returns (`request.rs`).

use crate::error::ClientError;
use crate::hash::java_string_hash;
use crate::instance::{ClientConfig, ClientInstance, TopicRoute};
use crate::message::compression::{compress_for_send, CompressionType, COMPRESS_BODY_BYTES_MIN_DEFAULT, COMPRESS_LEVEL_DEFAULT};
use crate::message::properties::keys;
use crate::message::user::DELIVERY_PROPERTIES;
use crate::message::Message;
use crate::msgid::{now_ms, MsgIdGenerator};
use crate::remoting::batch::{self, BatchMessage};
use crate::remoting::bodies::MessageQueue;
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use crate::trace::{self, SendTraceAnswer, SentMessage, TraceConfig, TraceDispatcher, TraceRole};
use crate::message::MessageExt;
use crate::request;
use crate::transaction::{is_transactional, send_sys_flag};
use bytes::{Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The topic a broker copies new topics from when auto-creation is on.
pub const DEFAULT_TOPIC: &str = "TBW102";
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub client: ClientConfig,
    pub group: String,
    /// Total time budget of one send, retries included.
    pub send_timeout_ms: u64,
    pub retry_times_when_send_failed: u32,
    pub max_message_bytes: usize,
    /// How long a broker that failed a send is avoided.
    pub broker_isolation_ms: u64,
    /// A single message's body of at least this many bytes is compressed (Java's
    /// `compressMsgBodyOverHowmuch`, 4 KiB, compared with `>=` as Java does);
    /// `usize::MAX` turns compression off.
    pub compress_msg_body_over_howmuch: usize,
    /// Java's `compressType` (zlib by default).
    pub compress_type: CompressionType,
    /// Java's `compressLevel` (5): zlib 0..=9, zstd's range; LZ4 ignores it.
    pub compress_level: i32,
    /// Message traces (Java's `enableMsgTrace`, `customizedTraceTopic`); off by default.
    pub trace: TraceConfig,
}

impl ProducerConfig {
    pub fn new(client: ClientConfig, group: impl Into<String>) -> Self {
        Self {
            client,
            group: group.into(),
            send_timeout_ms: 3_000,
            retry_times_when_send_failed: 2,
            max_message_bytes: 4 * 1024 * 1024,
            broker_isolation_ms: 10_000,
            compress_msg_body_over_howmuch: COMPRESS_BODY_BYTES_MIN_DEFAULT,
            compress_type: CompressionType::default(),
            compress_level: COMPRESS_LEVEL_DEFAULT,
            trace: TraceConfig::default(),
        }
    }
}

/// A successful send: the message is stored (and flushed, for a sync-flush broker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// The `UNIQ_KEY` (comma-joined for a batch).
    pub msg_id: String,
    /// Store host and physical offset (comma-joined for a batch).
    pub offset_msg_id: String,
    pub queue: MessageQueue,
    /// Offset of the (first) message in its queue. For a half message: its offset in
    /// the broker's half queue (Java's `tranStateTableOffset`).
    pub queue_offset: i64,
    /// The broker's `transactionId` response field (half messages; None when absent).
    pub transaction_id: Option<String>,
    /// The broker's region (`MSG_REGION`; Java's default region when absent).
    pub region_id: String,
    /// The broker's `TRACE_ON`: false only when it answered `false`.
    pub trace_on: bool,
}

struct State {
    next_queue: Cell<usize>,
    /// Broker name → isolated until.
    isolated: RefCell<HashMap<String, Instant>>,
    ids: MsgIdGenerator,
}

#[derive(Clone)]
pub struct Producer {
    instance: Rc<ClientInstance>,
    config: Rc<ProducerConfig>,
    state: Rc<State>,
    tracer: Option<TraceDispatcher>,
}

/// Java's `SelectMessageQueueByHash`: `abs(key.hashCode() % n)`.
pub fn queue_index_by_hash(key: &str, queue_count: usize) -> usize {
    assert!(queue_count > 0);
    ((java_string_hash(key) % queue_count as i32).unsigned_abs()) as usize
}

/// Round-robin pick from `queues` starting at `counter`, skipping queues whose broker is
/// in `avoid`; falls back to the plain round-robin pick when all are avoided.
pub fn pick_queue<'a>(queues: &'a [MessageQueue], counter: usize, avoid: &dyn Fn(&str) -> bool) -> Option<&'a MessageQueue> {
    if queues.is_empty() {
        return None;
    }
    (0..queues.len())
        .map(|i| &queues[(counter + i) % queues.len()])
        .find(|q| !avoid(&q.broker_name))
        .or(Some(&queues[counter % queues.len()]))
}

impl Producer {
    /// Starts a producer on the current glommio executor.
    pub async fn start(config: ProducerConfig) -> Result<Self, ClientError> {
        let mut producer = Self::start_untraced(config)?;
        let c = &producer.config;
        if c.trace.enabled {
            producer.tracer = Some(TraceDispatcher::start(&c.client, &c.group, TraceRole::Produce, c.trace.topic())?);
        }
        Ok(producer)
    }

    /// A producer that records no traces whatever its config says: the trace
    /// dispatcher's own (a trace of a trace would never end).
    pub(crate) fn start_untraced(config: ProducerConfig) -> Result<Self, ClientError> {
        if config.group.is_empty() {
            return Err(ClientError::Config("producer group is empty".into()));
        }
        config.compress_type.check_level(config.compress_level).map_err(|e| ClientError::Config(e.to_string()))?;
        let instance = ClientInstance::start(config.client.clone())?;
        instance.register_producer(&config.group);
        let ids = MsgIdGenerator::new(instance.client_ip, std::process::id(), random_u32());
        Ok(Self {
            instance,
            config: Rc::new(config),
            state: Rc::new(State { next_queue: Cell::new(random_u32() as usize), isolated: RefCell::new(HashMap::new()), ids }),
            tracer: None,
        })
    }

    pub fn instance(&self) -> &Rc<ClientInstance> {
        &self.instance
    }

    /// Sends the queued traces (tracing on), then stops the client instance.
    pub async fn shutdown(&self) {
        if let Some(t) = &self.tracer {
            t.shutdown().await;
        }
        self.instance.shutdown().await;
    }

    fn prepare(&self, msg: &mut Message) -> Result<(), ClientError> {
        msg.validate()?;
        if msg.body.len() > self.config.max_message_bytes {
            return Err(ClientError::MessageIllegal {
                addr: "local".into(),
                remark: format!("body of {} bytes is over max_message_bytes {}", msg.body.len(), self.config.max_message_bytes),
            });
        }
        if msg.body.is_empty() {
            return Err(ClientError::MessageIllegal { addr: "local".into(), remark: "empty body".into() });
        }
        if msg.properties.get(keys::UNIQ_KEY).is_none() {
            let id = self.state.ids.next();
            msg.set_property(keys::UNIQ_KEY, &id)?;
        }
        Ok(())
    }

    /// `msg` as it travels: its body compressed when it is large enough. A compression
    /// failure sends it uncompressed, as Java does (it cannot happen writing to memory,
    /// but the body must not be lost to it).
    fn single(&self, mut msg: Message) -> Outgoing {
        let c = &self.config;
        match compress_for_send(&msg.body, c.compress_msg_body_over_howmuch, c.compress_type, c.compress_level) {
            Ok(None) => Outgoing::Single { msg, compression_flags: 0 },
            Ok(Some((packed, compression_flags))) => {
                msg.body = Bytes::from(packed);
                Outgoing::Single { msg, compression_flags }
            }
            Err(e) => {
                tracing::warn!(topic = %msg.topic, error = %e, "body sent uncompressed");
                Outgoing::Single { msg, compression_flags: 0 }
            }
        }
    }

    fn is_isolated(&self, broker: &str) -> bool {
        let now = Instant::now();
        let mut isolated = self.state.isolated.borrow_mut();
        match isolated.get(broker) {
            Some(until) if *until > now => true,
            Some(_) => {
                isolated.remove(broker);
                false
            }
            None => false,
        }
    }

    fn isolate(&self, broker: &str) {
        let until = Instant::now() + Duration::from_millis(self.config.broker_isolation_ms);
        self.state.isolated.borrow_mut().insert(broker.to_string(), until);
    }

    fn next_counter(&self) -> usize {
        let c = self.state.next_queue.get();
        self.state.next_queue.set(c.wrapping_add(1));
        c
    }

    /// Sends one message and waits for the broker's answer (RocketMQ's sync send; run
    /// many concurrently for throughput).
    pub async fn send(&self, mut msg: Message) -> Result<SendResult, ClientError> {
        self.prepare(&mut msg)?;
        self.send_with_retries(&self.single(msg), None, self.send_timeout()).await
    }

    fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.config.send_timeout_ms)
    }

    /// Request-reply (Java's `DefaultMQProducer.request`): sends `msg` with a fresh
    /// `CORRELATION_ID`, this instance's client id as `REPLY_TO_CLIENT` and `TTL`, then
    /// waits for the reply a replier sends (`reply`). Everything, the send included,
    /// happens within `timeout`: past it, `RequestTimeout` when the send succeeded, the
    /// send's own error when it failed.
    pub async fn request(&self, mut msg: Message, timeout: Duration) -> Result<MessageExt, ClientError> {
        let started = Instant::now();
        let correlation_id = request::correlation_id();
        msg.set_property(keys::CORRELATION_ID, &correlation_id)?;
        msg.set_property(keys::REPLY_TO_CLIENT, &self.instance.client_id)?;
        msg.set_property(keys::TTL, &timeout.as_millis().to_string())?;
        // Java's prepareSendRequest: the route, and with it a heartbeat naming this client
        // to every broker of the route, before the request leaves — the broker finds the
        // requester's connection by the producer its heartbeat registered.
        self.instance.route(&msg.topic).await?;
        let pending = self.instance.requests.register(&correlation_id)?;
        self.prepare(&mut msg)?;
        let topic = msg.topic.clone();
        let left = timeout.saturating_sub(started.elapsed());
        self.send_with_retries(&self.single(msg), None, left).await?;
        let left = timeout.saturating_sub(started.elapsed());
        pending.wait(left).await.ok_or(ClientError::RequestTimeout { topic, timeout_ms: timeout.as_millis() as u64 })
    }

    /// `request` without waiting (Java's `request(msg, RequestCallback, timeout)`):
    /// `callback` gets the reply or the error.
    pub fn request_with_callback(&self, msg: Message, timeout: Duration, callback: impl FnOnce(Result<MessageExt, ClientError>) + 'static) {
        let me = self.clone();
        glommio::spawn_local(async move { callback(me.request(msg, timeout).await) }).detach();
    }

    /// Replies to a request message a consumer received: Java's
    /// `MessageUtil.createReplyMessage` then `send` (SEND_REPLY_MESSAGE_V2). The broker
    /// answers SUCCESS once it pushed the reply to the requester.
    pub async fn reply(&self, request_msg: &MessageExt, body: impl Into<Bytes>) -> Result<SendResult, ClientError> {
        self.send(request::create_reply_message(request_msg, body)?).await
    }

    /// Sends without waiting (RocketMQ's async send): `callback` gets the result.
    pub fn send_with_callback(&self, msg: Message, callback: impl FnOnce(Result<SendResult, ClientError>) + 'static) {
        let me = self.clone();
        glommio::spawn_local(async move { callback(me.send(msg).await) }).detach();
    }

    /// Sends to an explicit queue (no retry on another queue).
    pub async fn send_to_queue(&self, mut msg: Message, queue: &MessageQueue) -> Result<SendResult, ClientError> {
        self.prepare(&mut msg)?;
        self.send_with_retries(&self.single(msg), Some(queue.clone()), self.send_timeout()).await
    }

    /// Ordered send: the queue is `queue_index_by_hash(key)` over the writable queues,
    /// so every message with one key lands, in order, in one queue.
    pub async fn send_ordered(&self, msg: Message, key: &str) -> Result<SendResult, ClientError> {
        self.send_with_selector(msg, |queues, _| queue_index_by_hash(key, queues.len())).await
    }

    /// Send to the queue `selector` picks (an index into the writable queues).
    pub async fn send_with_selector(
        &self,
        mut msg: Message,
        selector: impl Fn(&[MessageQueue], &Message) -> usize,
    ) -> Result<SendResult, ClientError> {
        self.prepare(&mut msg)?;
        let route = self.instance.route(&msg.topic).await?;
        if route.write_queues.is_empty() {
            return Err(ClientError::NoWritableQueue { topic: msg.topic.clone() });
        }
        let index = selector(&route.write_queues, &msg);
        let queue = route.write_queues.get(index).cloned().ok_or_else(|| {
            ClientError::Config(format!("queue selector returned {index} for {} queues", route.write_queues.len()))
        })?;
        self.send_with_retries(&self.single(msg), Some(queue), self.send_timeout()).await
    }

    /// Fire and forget: no answer, no retry (RocketMQ's oneway).
    pub async fn send_oneway(&self, mut msg: Message) -> Result<(), ClientError> {
        self.prepare(&mut msg)?;
        let route = self.instance.route(&msg.topic).await?;
        let queue = pick_queue(&route.write_queues, self.next_counter(), &|b| self.is_isolated(b))
            .cloned()
            .ok_or_else(|| ClientError::NoWritableQueue { topic: msg.topic.clone() })?;
        let (addr, cmd) = self.build_request(&route, &queue, &self.single(msg))?;
        self.instance.invoke_oneway(&addr, cmd).await
    }

    /// Sends messages of one topic as one SEND_BATCH_MESSAGE, stored together in one
    /// queue with consecutive offsets.
    pub async fn send_batch(&self, mut msgs: Vec<Message>) -> Result<SendResult, ClientError> {
        let Some(first) = msgs.first() else {
            return Err(ClientError::Config("empty batch".into()));
        };
        let topic = first.topic.clone();
        let mut total_bytes = 0usize;
        for m in &mut msgs {
            if m.topic != topic {
                return Err(ClientError::Config(format!("a batch is one topic: `{}` and `{topic}` mixed", m.topic)));
            }
            if DELIVERY_PROPERTIES.iter().any(|p| m.properties.get(p).is_some()) {
                return Err(ClientError::Config("delayed or timed messages cannot be batched (RocketMQ refuses them too)".into()));
            }
            if is_transactional(&m.properties) {
                return Err(ClientError::Config("transactional (TRAN_MSG) messages cannot be batched (RocketMQ refuses them too)".into()));
            }
            self.prepare(m)?;
            total_bytes += m.body.len() + m.properties.encoded_len() + 20;
        }
        if total_bytes > self.config.max_message_bytes {
            return Err(ClientError::MessageIllegal {
                addr: "local".into(),
                remark: format!("batch of {total_bytes} bytes is over max_message_bytes {}", self.config.max_message_bytes),
            });
        }
        self.send_with_retries(&Outgoing::Batch { topic, msgs }, None, self.send_timeout()).await
    }

    /// Attempts within `budget` in all (`send_timeout_ms`, or what is left of a
    /// request's timeout).
    async fn send_with_retries(&self, request: &Outgoing, fixed_queue: Option<MessageQueue>, budget: Duration) -> Result<SendResult, ClientError> {
        let started = Instant::now();
        let attempts_max = 1 + self.config.retry_times_when_send_failed;
        let topic = request.topic();
        let mut last_err: Option<ClientError> = None;
        let mut last_broker: Option<String> = None;
        let mut attempts = 0u32;
        while attempts < attempts_max {
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            attempts += 1;
            let route = match self.instance.route(topic).await {
                Ok(r) => r,
                Err(e) if e.is_retriable() || matches!(e, ClientError::NameServerUnreachable { .. }) => {
                    last_err = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let queue = match &fixed_queue {
                Some(q) => q.clone(),
                None => {
                    let avoid = |b: &str| self.is_isolated(b) || last_broker.as_deref() == Some(b);
                    match pick_queue(&route.write_queues, self.next_counter(), &avoid) {
                        Some(q) => q.clone(),
                        None => return Err(ClientError::NoWritableQueue { topic: topic.to_string() }),
                    }
                }
            };
            match self.send_once(&route, &queue, request, left).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_retriable() => {
                    tracing::debug!(broker = %queue.broker_name, attempt = attempts, error = %e, "send failed; retrying");
                    self.isolate(&queue.broker_name);
                    last_broker = Some(queue.broker_name.clone());
                    if matches!(e, ClientError::Connect { .. } | ClientError::ConnectionClosed { .. } | ClientError::TopicNotExist { .. }) {
                        // The broker may be gone or the topic moved: ask the NameServer again.
                        let _ = self.instance.fetch_route(topic).await;
                    }
                    last_err = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        let last = last_err.unwrap_or(ClientError::Timeout { addr: "-".into(), code: rq::SEND_MESSAGE_V2, timeout_ms: budget.as_millis() as u64 });
        Err(ClientError::RetriesExhausted { attempts, elapsed_ms: started.elapsed().as_millis() as u64, last: Box::new(last) })
    }

    fn build_request(&self, route: &TopicRoute, queue: &MessageQueue, request: &Outgoing) -> Result<(String, RemotingCommand), ClientError> {
        let addr = route
            .master_addrs
            .get(&queue.broker_name)
            .cloned()
            .ok_or_else(|| ClientError::NoRoute { topic: queue.topic.clone() })?;
        let (code, flag, sys_flag, properties, body, is_batch) = match request {
            // Java sends a reply (MSG_TYPE=reply) with SEND_REPLY_MESSAGE_V2: the broker
            // pushes it to the requester instead of only storing it.
            Outgoing::Single { msg: m, compression_flags } if request::is_reply(&m.properties) => {
                (rq::SEND_REPLY_MESSAGE_V2, m.flag, send_sys_flag(&m.properties) | compression_flags, m.properties.encode(), m.body.clone(), false)
            }
            Outgoing::Single { msg: m, compression_flags } => {
                (rq::SEND_MESSAGE_V2, m.flag, send_sys_flag(&m.properties) | compression_flags, m.properties.encode(), m.body.clone(), false)
            }
            Outgoing::Batch { msgs, .. } => {
                let items: Vec<BatchMessage> = msgs
                    .iter()
                    .map(|m| BatchMessage { flag: m.flag, body: m.body.clone(), properties: Bytes::from(m.properties.encode()) })
                    .collect();
                let mut out = BytesMut::new();
                batch::encode(&items, &mut out).map_err(|e| ClientError::Protocol(e.to_string()))?;
                (rq::SEND_BATCH_MESSAGE, 0, 0, String::new(), out.freeze(), true)
            }
        };
        let header = SendMessageRequestHeader {
            producer_group: self.config.group.clone(),
            topic: queue.topic.clone(),
            default_topic: DEFAULT_TOPIC.into(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id: queue.queue_id,
            sys_flag,
            born_timestamp: now_ms(),
            flag,
            properties: (!properties.is_empty()).then_some(properties),
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: None,
            batch: is_batch,
            broker_name: Some(queue.broker_name.clone()),
        };
        let cmd = RemotingCommand::request(code).with_header(&SendMessageRequestHeaderV2::from(header)).with_body(body);
        Ok((addr, cmd))
    }

    async fn send_once(&self, route: &TopicRoute, queue: &MessageQueue, request: &Outgoing, timeout: Duration) -> Result<SendResult, ClientError> {
        let (addr, cmd) = self.build_request(route, queue, request)?;
        let began_ms = now_ms();
        let r = self.instance.invoke_with_timeout(&addr, cmd, timeout).await?;
        let msg_id = request.msg_id();
        match r.code {
            rs::SUCCESS => {
                let h: SendMessageResponseHeader = r.header()?;
                let answer = SendTraceAnswer::of(r.ext(trace::MSG_REGION), r.ext(trace::TRACE_ON));
                let result = SendResult {
                    msg_id,
                    offset_msg_id: h.msg_id,
                    queue: queue.clone(),
                    queue_offset: h.queue_offset,
                    transaction_id: h.transaction_id,
                    region_id: answer.region_id.clone(),
                    trace_on: answer.trace_on,
                };
                self.trace_sent(&addr, request, &result, &answer, began_ms);
                Ok(result)
            }
            rs::FLUSH_DISK_TIMEOUT => Err(ClientError::FlushTimeout { addr, msg_id, status: "FLUSH_DISK_TIMEOUT" }),
            rs::FLUSH_SLAVE_TIMEOUT => Err(ClientError::FlushTimeout { addr, msg_id, status: "FLUSH_SLAVE_TIMEOUT" }),
            rs::SLAVE_NOT_AVAILABLE => Err(ClientError::FlushTimeout { addr, msg_id, status: "SLAVE_NOT_AVAILABLE" }),
            code => Err(ClientError::from_response(&addr, code, r.remark.as_deref())),
        }
    }
}

impl Producer {
    /// Java's `SendMessageTraceHookImpl.sendMessageAfter`: a Pub record of a single
    /// send (batches are not traced).
    fn trace_sent(&self, addr: &str, request: &Outgoing, result: &SendResult, answer: &SendTraceAnswer, began_ms: i64) {
        let (Some(tracer), Outgoing::Single { msg, .. }) = (&self.tracer, request) else { return };
        let sent = SentMessage {
            msg,
            group: &self.config.group,
            broker_addr: addr,
            msg_id: &result.msg_id,
            offset_msg_id: &result.offset_msg_id,
            began_ms,
            cost_ms: now_ms() - began_ms,
        };
        if let Some(ctx) = trace::pub_context(&sent, answer, tracer.topic()) {
            tracer.append(ctx);
        }
    }
}

enum Outgoing {
    /// One message; `compression_flags` are the sysFlag bits of its compressed body (0
    /// when it is not).
    Single { msg: Message, compression_flags: i32 },
    Batch { topic: String, msgs: Vec<Message> },
}

impl Outgoing {
    fn topic(&self) -> &str {
        match self {
            Outgoing::Single { msg, .. } => &msg.topic,
            Outgoing::Batch { topic, .. } => topic,
        }
    }

    fn msg_id(&self) -> String {
        let id = |m: &Message| m.properties.get(keys::UNIQ_KEY).unwrap_or("").to_string();
        match self {
            Outgoing::Single { msg, .. } => id(msg),
            Outgoing::Batch { msgs, .. } => msgs.iter().map(id).collect::<Vec<_>>().join(","),
        }
    }
}

/// A per-process random word (ids, start of round-robin) without a RNG dependency.
pub fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(b: &str, q: i32) -> MessageQueue {
        MessageQueue { broker_name: b.into(), queue_id: q, topic: "t".into() }
    }

    fn check_pick(queues: &[MessageQueue], counter: usize, avoid: &[&str], expected: Option<(&str, i32)>) {
        let got = pick_queue(queues, counter, &|b| avoid.contains(&b)).map(|q| (q.broker_name.as_str(), q.queue_id));
        assert_eq!(got, expected, "counter {counter} avoid {avoid:?}");
    }

    #[test]
    fn queue_choice_round_robins_and_avoids_failed_brokers() {
        let qs = [mq("a", 0), mq("a", 1), mq("b", 0), mq("b", 1)];
        check_pick(&qs, 0, &[], Some(("a", 0)));
        check_pick(&qs, 1, &[], Some(("a", 1)));
        check_pick(&qs, 6, &[], Some(("b", 0)));
        check_pick(&qs, 0, &["a"], Some(("b", 0)));
        check_pick(&qs, 3, &["b"], Some(("a", 0)));
        check_pick(&qs, 1, &["a", "b"], Some(("a", 1)));
        check_pick(&[], 0, &[], None);
    }

    fn check_hash(key: &str, n: usize, expected: usize) {
        assert_eq!(queue_index_by_hash(key, n), expected, "{key} over {n}");
    }

    #[test]
    fn ordered_selector_matches_java_select_by_hash() {
        // "order-1".hashCode() = -1206088920 in Java; % 8 = 0; "abc" = 96354 % 8 = 2.
        check_hash("abc", 8, 2);
        check_hash("abc", 1, 0);
        check_hash("", 5, 0);
        check_hash("order-1", 8, (java_string_hash("order-1") % 8).unsigned_abs() as usize);
        for i in 0..1000 {
            assert!(queue_index_by_hash(&format!("k{i}"), 7) < 7);
        }
    }
}
