//! The dashboard's one link to the cluster: a thread running a glommio executor that
//! owns the `ClientInstance` (which is `Rc`, `!Send`) and a producer (for DLQ
//! resends), answers API calls the HTTP workers send it over a bounded channel, and
//! samples every master's runtime info once a second for the live page.
//!
//! Invariants: the client is touched only on this thread; at most `JOBS_QUEUED_MAX`
//! calls wait and `API_CALLS_IN_FLIGHT_MAX` run (past either: 503, never an unbounded
//! queue); a worker waits at most `API_TIMEOUT_MS` for its answer (504); every list an
//! answer carries is bounded by a `*_MAX` below; a resend is a real send through the
//! producer to the topic the dead letter's `RETRY_TOPIC` names, answered only once the
//! broker stored it.

use super::http::HttpError;
use super::live::{Answer, Live, LIVE_SAMPLE_INTERVAL_MS};
use super::routes::ApiCall;
use crate::query::{self, QueryError, DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX};
use ringmq_client::error::ClientError;
use ringmq_client::instance::{ClientConfig, ClientInstance};
use ringmq_client::message::compression::plain_body;
use ringmq_client::message::properties::{keys, Properties};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::message::user::Message;
use ringmq_client::producer::{Producer, ProducerConfig};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

/// API calls waiting for the backend thread.
pub const JOBS_QUEUED_MAX: usize = 16;
/// API calls the backend runs at once (a worker that gave up leaves its call running).
pub const API_CALLS_IN_FLIGHT_MAX: usize = 16;
/// How long an HTTP worker waits for an answer: a few client request timeouts (3 s
/// each), as a page asks several brokers in turn.
pub const API_TIMEOUT_MS: u64 = 20_000;
/// Topics given per-queue statistics on the topics page; the rest are listed by name.
pub const TOPICS_WITH_STATS_MAX: usize = 256;
/// Topics asked which groups consume them, for the groups page.
pub const GROUP_SCAN_TOPICS_MAX: usize = 256;
/// Groups listed with their lag on the groups page.
pub const GROUPS_LISTED_MAX: usize = 256;
/// Messages a key search returns per broker.
pub const BY_KEY_PER_BROKER_MAX: i32 = 64;
/// Messages a time search returns.
pub const BY_TIME_MAX: usize = 200;
/// Dead letters listed per group (the newest).
pub const DLQ_MESSAGES_MAX: usize = 200;
/// Body bytes shown in lists; the detail view shows up to `DETAIL_BODY_PREVIEW_BYTES`.
pub const LIST_BODY_PREVIEW_BYTES: usize = 512;
pub const DETAIL_BODY_PREVIEW_BYTES: usize = 64 * 1024;
/// The producer group the dashboard's resends are sent with.
pub const RESEND_PRODUCER_GROUP: &str = "ringmq-dashboard";
/// Properties a resend drops: where the broker parked the message (retry and DLQ
/// bookkeeping, delays, transaction and queue-offset stamps) and its old id — the copy
/// gets a new `UNIQ_KEY`; `ORIGIN_MESSAGE_ID` keeps naming the first one.
const RESEND_DROPPED_PROPERTIES: [&str; 15] = [
    keys::UNIQ_KEY,
    keys::RETRY_TOPIC,
    keys::DELAY,
    keys::REAL_TOPIC,
    keys::REAL_QID,
    keys::TRAN_MSG,
    keys::PGROUP,
    keys::TRANSACTION_ID,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
];
/// Topics the brokers keep for themselves (listed as "system" on the topics page).
const SYSTEM_TOPICS: [&str; 8] = [
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "rmq_sys_wheel_timer",
    "OFFSET_MOVED_EVENT",
    "SELF_TEST_TOPIC",
];

type Answered = Result<Value, HttpError>;

struct Job {
    call: ApiCall,
    reply: flume::Sender<Answered>,
}

/// The HTTP side's handle (cheap to clone, `Send`).
#[derive(Clone)]
pub struct Backend {
    jobs: flume::Sender<Job>,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot start the client thread: {0}")]
    Thread(String),
    #[error("cannot start the client: {0}")]
    Client(#[from] ClientError),
}

impl Backend {
    /// Starts the backend thread and waits until its client exists.
    pub fn start(namesrvs: Vec<String>) -> Result<Self, BackendError> {
        let (jobs, rx) = flume::bounded::<Job>(JOBS_QUEUED_MAX);
        let (ready_tx, ready_rx) = flume::bounded::<Result<(), ClientError>>(1);
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name("dashboard-client")
            .spawn(move || async move {
                let config = ClientConfig::new(namesrvs);
                let instance = match ClientInstance::start(config.clone()) {
                    Ok(i) => i,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let producer = match Producer::start(ProducerConfig::new(config, RESEND_PRODUCER_GROUP)).await {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let state = Rc::new(State { instance, producer, live: RefCell::new(Live::default()), in_flight: Cell::new(0) });
                let _ = ready_tx.send(Ok(()));
                glommio::spawn_local(sample_forever(Rc::downgrade(&state))).detach();
                while let Ok(job) = rx.recv_async().await {
                    if state.in_flight.get() >= API_CALLS_IN_FLIGHT_MAX {
                        let _ = job.reply.try_send(Err(HttpError::Unavailable(format!("{API_CALLS_IN_FLIGHT_MAX} cluster queries already running: retry in a moment"))));
                        continue;
                    }
                    state.in_flight.set(state.in_flight.get() + 1);
                    let state = state.clone();
                    glommio::spawn_local(async move {
                        let answer = execute(&state, job.call).await;
                        state.in_flight.set(state.in_flight.get() - 1);
                        // The worker may have given up (timeout): nobody to tell then.
                        let _ = job.reply.try_send(answer);
                    })
                    .detach();
                }
            })
            .map_err(|e| BackendError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self { jobs }),
            Ok(Err(e)) => Err(BackendError::Client(e)),
            Err(_) => Err(BackendError::Thread("the client thread ended while starting".into())),
        }
    }

    /// Runs `call` on the backend thread: its JSON, or the error with its status.
    pub fn ask(&self, call: ApiCall) -> Answered {
        let (reply, answer) = flume::bounded(1);
        match self.jobs.try_send(Job { call, reply }) {
            Ok(()) => {}
            Err(flume::TrySendError::Full(_)) => return Err(HttpError::Unavailable(format!("{JOBS_QUEUED_MAX} cluster queries already waiting: retry in a moment"))),
            Err(flume::TrySendError::Disconnected(_)) => return Err(HttpError::Unavailable("the dashboard's client thread has stopped".into())),
        }
        match answer.recv_timeout(Duration::from_millis(API_TIMEOUT_MS)) {
            Ok(a) => a,
            Err(flume::RecvTimeoutError::Timeout) => Err(HttpError::GatewayTimeout(format!("the cluster did not answer within {API_TIMEOUT_MS} ms"))),
            Err(flume::RecvTimeoutError::Disconnected) => Err(HttpError::Unavailable("the dashboard's client thread has stopped".into())),
        }
    }
}

struct State {
    instance: Rc<ClientInstance>,
    producer: Producer,
    live: RefCell<Live>,
    in_flight: Cell<usize>,
}

fn now_ms() -> i64 {
    ringmq_client::msgid::now_ms()
}

/// Reads every master's runtime info once a second, for as long as the backend lives.
async fn sample_forever(state: std::rc::Weak<State>) {
    loop {
        let Some(s) = state.upgrade() else { return };
        let started = std::time::Instant::now();
        match query::all_masters(&s.instance).await {
            Ok(masters) => {
                let mut answers: Vec<Answer> = Vec::new();
                for (name, addr) in masters.into_iter().take(super::live::LIVE_BROKERS_MAX) {
                    let table = query::runtime_table(&s.instance, &addr).await.map_err(|e| e.to_string());
                    answers.push((name, addr, table));
                }
                s.live.borrow_mut().record(now_ms(), answers);
            }
            Err(e) => s.live.borrow_mut().record_failure(e.to_string()),
        }
        drop(s);
        let spent = started.elapsed();
        let pause = Duration::from_millis(LIVE_SAMPLE_INTERVAL_MS).saturating_sub(spent);
        // At least a tenth of the interval: a round slower than the interval (brokers
        // timing out) still leaves the executor to the API calls in between.
        glommio::timer::sleep(pause.max(Duration::from_millis(LIVE_SAMPLE_INTERVAL_MS / 10))).await;
    }
}

/// How a query failure reads to the browser.
fn http_error(e: QueryError) -> HttpError {
    match e {
        QueryError::NotFound(m) => HttpError::NotFound(m),
        QueryError::BadInput(m) => HttpError::BadRequest(m),
        QueryError::Client(ClientError::NoRoute { topic }) => HttpError::NotFound(format!("topic {topic} does not exist (the NameServer has no route for it)")),
        other => HttpError::BadGateway(other.to_string()),
    }
}

fn topic_kind(topic: &str) -> &'static str {
    if topic.starts_with(RETRY_TOPIC_PREFIX) {
        "retry"
    } else if topic.starts_with(DLQ_TOPIC_PREFIX) {
        "dlq"
    } else if SYSTEM_TOPICS.contains(&topic) || topic.starts_with("rmq_sys_") || topic.starts_with("RMQ_SYS_") {
        "system"
    } else {
        "normal"
    }
}

async fn execute(state: &Rc<State>, call: ApiCall) -> Answered {
    let i = &state.instance;
    match call {
        ApiCall::Cluster => cluster(i).await.map_err(http_error),
        ApiCall::Topics => topics(i).await.map_err(http_error),
        ApiCall::Topic { topic } => topic_detail(i, &topic).await.map_err(http_error),
        ApiCall::Groups => groups(i).await.map_err(http_error),
        ApiCall::Group { group } => group_detail(i, &group).await.map_err(http_error),
        ApiCall::Stats => Ok(state.live.borrow().to_json()),
        ApiCall::ByKey { topic, key } => {
            let found = query::query_by_key(i, &topic, &key, BY_KEY_PER_BROKER_MAX, LIST_BODY_PREVIEW_BYTES).await.map_err(http_error)?;
            Ok(json!({ "topic": topic, "key": key, "messages": found }))
        }
        ApiCall::ById { id, topic } => by_id(i, &id, topic.as_deref()).await.map_err(http_error),
        ApiCall::ByTime { topic, begin_ms, end_ms } => {
            let found = query::query_by_time(i, &topic, begin_ms, end_ms, BY_TIME_MAX, LIST_BODY_PREVIEW_BYTES).await.map_err(http_error)?;
            Ok(json!({ "topic": topic, "begin": begin_ms, "end": end_ms, "truncated": found.len() >= BY_TIME_MAX, "messages": found }))
        }
        ApiCall::DlqList => dlq_list(i).await.map_err(http_error),
        ApiCall::Dlq { group } => dlq(i, &group).await.map_err(http_error),
        ApiCall::Resend { id } => resend(state, &id).await,
    }
}

async fn cluster(i: &Rc<ClientInstance>) -> query::Result<Value> {
    let brokers = query::brokers(i, None).await?;
    let docs: Vec<Value> = brokers
        .iter()
        .map(|b| {
            let shards: Vec<Value> = b
                .shards()
                .into_iter()
                .map(|(id, s)| {
                    let g = |k: &str| s.get(k).cloned().unwrap_or_else(|| "-".into());
                    json!({
                        "id": id, "putTotal": g("putMessageTimesTotal"), "getTotal": g("getMessageTransferedMsgCount"),
                        "storeMessages": g("storeMessagesTotal"), "putBytes": g("putMessageSizeTotal"),
                        "flushBehindBytes": g("remainHowManyDataToFlush"), "diskRatio": g("commitLogDiskRatio"),
                        "suspendedPulls": g("suspendedPulls"), "forwardedIn": g("forwardedIn"), "readErrors": g("readErrorsTotal"),
                    })
                })
                .collect();
            json!({
                "cluster": b.cluster, "brokerName": b.broker_name, "brokerId": b.broker_id, "addr": b.addr,
                "role": if b.broker_id == 0 { "master" } else { "slave" },
                "version": b.get("brokerVersionDesc"), "inTps": b.tps_10s("putTps"), "outTps": b.tps_10s("getTransferredTps"),
                "putTotal": b.get("putMessageTimesTotal"), "getTotal": b.get("getMessageTransferedMsgCount"),
                "storeMessages": b.get("storeMessagesTotal"), "diskRatio": b.get("commitLogDiskRatio"),
                "flushType": b.get("flushDiskType"), "uptime": b.get("runtime"), "shardCount": b.get("shardCount"),
                "error": b.error, "shards": shards,
            })
        })
        .collect();
    let clusters: BTreeSet<&str> = brokers.iter().map(|b| b.cluster.as_str()).collect();
    Ok(json!({ "clusters": clusters, "brokers": docs }))
}

async fn topics(i: &Rc<ClientInstance>) -> query::Result<Value> {
    let names = query::topic_list(i).await?;
    let mut docs = Vec::new();
    for (n, topic) in names.iter().enumerate() {
        let kind = topic_kind(topic);
        if n >= TOPICS_WITH_STATS_MAX {
            docs.push(json!({ "topic": topic, "kind": kind }));
            continue;
        }
        match query::topic_status(i, topic).await {
            Ok(queues) => {
                let messages: i64 = queues.iter().map(|q| (q.max_offset - q.min_offset).max(0)).sum();
                let last = queues.iter().map(|q| q.last_update_timestamp).max().unwrap_or(0);
                let brokers: BTreeSet<&str> = queues.iter().map(|q| q.broker_name.as_str()).collect();
                docs.push(json!({ "topic": topic, "kind": kind, "queues": queues.len(), "messages": messages, "lastUpdate": last, "brokers": brokers }));
            }
            // One topic without a route (a NameServer-only name such as a cluster's)
            // does not hide the others.
            Err(e) => docs.push(json!({ "topic": topic, "kind": kind, "error": e.to_string() })),
        }
    }
    Ok(json!({ "topics": docs, "statsLimit": TOPICS_WITH_STATS_MAX }))
}

async fn topic_detail(i: &Rc<ClientInstance>, topic: &str) -> query::Result<Value> {
    let route = i.fetch_route(topic).await?;
    let queues = query::topic_status(i, topic).await?;
    let (groups, groups_error) = match query::groups_of_topic(i, topic).await {
        Ok(g) => (g, None),
        Err(e) => (BTreeSet::new(), Some(e.to_string())),
    };
    let queue_data: Vec<Value> = route
        .data
        .queue_datas
        .iter()
        .map(|q| json!({ "brokerName": q.broker_name, "readQueueNums": q.read_queue_nums, "writeQueueNums": q.write_queue_nums, "perm": q.perm }))
        .collect();
    Ok(json!({
        "topic": topic, "kind": topic_kind(topic), "brokers": route.master_addrs, "queueData": queue_data,
        "queues": queues, "groups": groups, "groupsError": groups_error,
    }))
}

async fn groups(i: &Rc<ClientInstance>) -> query::Result<Value> {
    let mut names = query::subscription_groups(i).await?;
    let topics = query::topic_list(i).await?;
    let mut scan_errors = Vec::new();
    for topic in topics.iter().filter(|t| topic_kind(t) == "normal").take(GROUP_SCAN_TOPICS_MAX) {
        match query::groups_of_topic(i, topic).await {
            Ok(g) => names.extend(g),
            Err(e) => scan_errors.push(format!("{topic}: {e}")),
        }
    }
    let mut docs = Vec::new();
    for group in names.iter().take(GROUPS_LISTED_MAX) {
        match query::consumer_progress(i, group, None).await {
            Ok(queues) => {
                let topics: BTreeSet<&str> = queues.iter().map(|q| q.topic.as_str()).collect();
                let lag: i64 = queues.iter().map(|q| q.diff).sum();
                docs.push(json!({ "group": group, "topics": topics, "queues": queues.len(), "lag": lag }));
            }
            Err(e) => docs.push(json!({ "group": group, "error": e.to_string() })),
        }
    }
    Ok(json!({ "groups": docs, "truncated": names.len() > GROUPS_LISTED_MAX, "scanErrors": scan_errors }))
}

async fn group_detail(i: &Rc<ClientInstance>, group: &str) -> query::Result<Value> {
    let queues = query::consumer_progress(i, group, None).await?;
    if queues.is_empty() {
        return Err(QueryError::NotFound(format!("no broker reports progress for consumer group {group}")));
    }
    let lag: i64 = queues.iter().map(|q| q.diff).sum();
    // Online clients: "not online" is an answer, not a failure of the page.
    let (connection, connection_error) = match query::consumer_connection(i, group).await {
        Ok(v) => (v, None),
        Err(e) => (Value::Null, Some(e.to_string())),
    };
    Ok(json!({ "group": group, "lagTotal": lag, "queues": queues, "connection": connection, "connectionError": connection_error }))
}

async fn by_id(i: &Rc<ClientInstance>, id: &str, topic: Option<&str>) -> query::Result<Value> {
    // A producer's id (UNIQ_KEY) is indexed as a key of its topic; an offset message id
    // names its broker and offset. Both are 32 hex digits, so with a topic the index is
    // asked first.
    if let Some(t) = topic {
        let found = query::query_by_key(i, t, id, 1, DETAIL_BODY_PREVIEW_BYTES).await?;
        if let Some(m) = found.into_iter().find(|m| m.msg_id.eq_ignore_ascii_case(id) || m.offset_msg_id == id) {
            return Ok(json!({ "message": m }));
        }
    }
    // Without a topic a producer's id cannot be looked up: say so with the failure.
    let hint = if topic.is_none() { "; a producer's id (UNIQ_KEY) is found only with its topic (t=)" } else { "" };
    let m = query::view_by_offset_id(i, id, DETAIL_BODY_PREVIEW_BYTES).await.map_err(|e| match e {
        QueryError::Refused { .. } | QueryError::Client(ClientError::Connect { .. }) if topic.is_some() => QueryError::NotFound(format!("no message {id} in {}: neither its producer id nor an offset id", topic.unwrap_or_default())),
        QueryError::Refused { addr, remark, .. } => QueryError::NotFound(format!("no message at offset id {id} ({addr}: {remark}){hint}")),
        QueryError::BadInput(m) => QueryError::BadInput(format!("{m}{hint}")),
        other => other,
    })?;
    Ok(json!({ "message": m }))
}

async fn dlq_list(i: &Rc<ClientInstance>) -> query::Result<Value> {
    let names = query::topic_list(i).await?;
    let mut docs = Vec::new();
    for topic in names.iter().filter(|t| t.starts_with(DLQ_TOPIC_PREFIX)).take(GROUPS_LISTED_MAX) {
        let group = &topic[DLQ_TOPIC_PREFIX.len()..];
        match query::topic_status(i, topic).await {
            Ok(queues) => {
                let messages: i64 = queues.iter().map(|q| (q.max_offset - q.min_offset).max(0)).sum();
                docs.push(json!({ "group": group, "topic": topic, "messages": messages }));
            }
            Err(e) => docs.push(json!({ "group": group, "topic": topic, "error": e.to_string() })),
        }
    }
    Ok(json!({ "dlq": docs }))
}

async fn dlq(i: &Rc<ClientInstance>, group: &str) -> query::Result<Value> {
    let topic = format!("{DLQ_TOPIC_PREFIX}{group}");
    let route = i.fetch_route(&topic).await.map_err(|e| match e {
        ClientError::NoRoute { .. } => QueryError::NotFound(format!("group {group} has no dead letters (topic {topic} does not exist)")),
        other => other.into(),
    })?;
    let queues = query::topic_status(i, &topic).await?;
    let mut found = Vec::new();
    for q in &queues {
        let Some(addr) = route.master_addrs.get(&q.broker_name) else { continue };
        // The newest ones: a DLQ only grows until an operator acts on it.
        let from = q.min_offset.max(q.max_offset - DLQ_MESSAGES_MAX as i64);
        let scan = query::Scan { from, max: DLQ_MESSAGES_MAX, until_ms: None, body_preview_max: LIST_BODY_PREVIEW_BYTES };
        found.extend(query::scan_queue(i, addr, &topic, q.queue_id, scan).await?);
    }
    found.sort_by_key(|m| std::cmp::Reverse((m.store_timestamp, m.commit_log_offset)));
    let total: i64 = queues.iter().map(|q| (q.max_offset - q.min_offset).max(0)).sum();
    found.truncate(DLQ_MESSAGES_MAX);
    let messages: Vec<Value> = found
        .iter()
        .map(|m| {
            let mut v = json!(m);
            v["originTopic"] = json!(m.property(keys::RETRY_TOPIC));
            v["originMessageId"] = json!(m.property(keys::ORIGIN_MESSAGE_ID));
            v
        })
        .collect();
    Ok(json!({ "group": group, "topic": topic, "total": total, "messages": messages }))
}

/// Re-sends the dead letter `id` to the topic it came from, with its body, flag, tags,
/// keys and user properties. A compressed body is resent decompressed, compression
/// flags cleared (the producer compresses it again by its own threshold, flags set to
/// match): the stored bytes alone, without their sysFlag, would reach consumers as
/// garbage. One that does not decompress is not resent.
async fn resend(state: &Rc<State>, id: &str) -> Answered {
    let record = query::view_record(&state.instance, id).await.map_err(http_error)?;
    let v = StoredMessageView::parse_verified(&record).map_err(|e| HttpError::BadGateway(format!("message {id} does not decode: {e}")))?;
    let topic = v.topic().unwrap_or_default();
    if !topic.starts_with(DLQ_TOPIC_PREFIX) {
        return Err(HttpError::BadRequest(format!("message {id} is in topic {topic}, not a dead-letter queue: only dead letters are resent")));
    }
    let mut props = Properties::decode_str(&String::from_utf8_lossy(v.properties_bytes()));
    let Some(origin) = props.get(keys::RETRY_TOPIC).map(String::from) else {
        return Err(HttpError::BadRequest(format!("dead letter {id} has no RETRY_TOPIC property: its original topic is unknown")));
    };
    for name in RESEND_DROPPED_PROPERTIES {
        props.remove(name);
    }
    let body = plain_body(v.sys_flag(), v.body())
        .map_err(|e| HttpError::BadGateway(format!("dead letter {id} is not resent: its stored body does not decompress ({e})")))?;
    let mut msg = Message::new(origin.clone(), body.into_owned());
    msg.flag = v.flag();
    msg.properties = props;
    let sent = state.producer.send(msg).await.map_err(|e| match e {
        ClientError::NoRoute { topic } => HttpError::NotFound(format!("the original topic {topic} no longer exists")),
        other => HttpError::BadGateway(format!("resend to {origin} failed: {other}")),
    })?;
    let mut doc: BTreeMap<&str, Value> = BTreeMap::new();
    doc.insert("resent", json!(id));
    doc.insert("topic", json!(origin));
    doc.insert("msgId", json!(sent.msg_id));
    doc.insert("offsetMsgId", json!(sent.offset_msg_id));
    doc.insert("brokerName", json!(sent.queue.broker_name));
    doc.insert("queueId", json!(sent.queue.queue_id));
    doc.insert("queueOffset", json!(sent.queue_offset));
    Ok(json!(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_kinds() {
        // check(topic, kind)
        let check = |t: &str, k: &str| assert_eq!(topic_kind(t), k, "{t}");
        check("Orders", "normal");
        check("%RETRY%billing", "retry");
        check("%DLQ%billing", "dlq");
        check("TBW102", "system");
        check("rmq_sys_wheel_timer", "system");
        check("RMQ_SYS_TRANS_HALF_TOPIC", "system");
    }

    #[test]
    fn query_errors_map_to_statuses() {
        // check(error, status)
        let check = |e: QueryError, status: u16| assert_eq!(http_error(e).status(), status);
        check(QueryError::NotFound("x".into()), 404);
        check(QueryError::BadInput("x".into()), 400);
        check(QueryError::Client(ClientError::NoRoute { topic: "T".into() }), 404);
        check(QueryError::Client(ClientError::NameServerUnreachable { addrs: vec!["127.0.0.1:1".into()] }), 502);
        check(QueryError::Refused { addr: "a".into(), request: 1, code: 1, remark: "r".into() }, 502);
    }
}
