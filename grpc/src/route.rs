//! QueryRoute and QueryAssignment (docs/design/pop-grpc.md §3.3; Apache
//! `proxy/grpc/v2/route/RouteActivity.java`), and the topic / group metadata every RPC
//! reads: GET_ROUTEINFO_BY_TOPIC, GET_TOPIC_CONFIG (the topic's `message.type`) and
//! GET_SUBSCRIPTIONGROUP_CONFIG, cached for `METADATA_CACHE_TTL_MS`.
//!
//! Invariants: the cache holds at most `METADATA_CACHE_ENTRIES_MAX` topics and as many
//! groups (expired entries go first, then everything: a refill costs one request);
//! a route's queues are listed in broker-name order, so every front end hashes a
//! message group onto the same queue.

use crate::backend::Target;
use crate::metadata::ClientMeta;
use crate::pb::{self, Code, MessageType, Permission};
use crate::server::Frontend;
use crate::status::{self, GrpcError};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::headers::GetRouteInfoRequestHeader;
use ringmq_client::remoting::route::{TopicRouteData, PERM_READ, PERM_WRITE};
use ringmq_client::remoting::RemotingCommand;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How long a fetched route, topic type or group config is reused.
pub const METADATA_CACHE_TTL_MS: i64 = 3_000;
/// Most topics (and, separately, groups) cached.
pub const METADATA_CACHE_ENTRIES_MAX: usize = 4096;
/// Longest topic / group name (Apache `Validators.TOPIC_MAX_LENGTH`, 127).
pub const RESOURCE_NAME_BYTES_MAX: usize = 127;
/// The id of a master in `brokerAddrs` (`MixAll.MASTER_ID`).
const MASTER_ID: i64 = 0;
const TOPIC_MESSAGE_TYPE_ATTRIBUTE: &str = "message.type";

/// A topic's `message.type` attribute (Apache `TopicMessageType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicMessageType {
    Unspecified,
    Normal,
    Fifo,
    Delay,
    Transaction,
    /// Every type; also what an absent attribute means in RingMQ (topics made by remoting
    /// tools carry none).
    Mixed,
}

impl TopicMessageType {
    pub fn parse(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("") | Some("MIXED") => Self::Mixed,
            Some("NORMAL") => Self::Normal,
            Some("FIFO") => Self::Fifo,
            Some("DELAY") => Self::Delay,
            Some("TRANSACTION") => Self::Transaction,
            Some(_) => Self::Unspecified,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "UNSPECIFIED",
            Self::Normal => "NORMAL",
            Self::Fifo => "FIFO",
            Self::Delay => "DELAY",
            Self::Transaction => "TRANSACTION",
            Self::Mixed => "MIXED",
        }
    }

    /// `RouteActivity.parseTopicMessageType`.
    pub fn accept_message_types(self) -> Vec<i32> {
        let types: &[MessageType] = match self {
            Self::Normal => &[MessageType::Normal],
            Self::Fifo => &[MessageType::Fifo],
            Self::Delay => &[MessageType::Delay],
            Self::Transaction => &[MessageType::Transaction],
            Self::Mixed => &[MessageType::Normal, MessageType::Fifo, MessageType::Delay, MessageType::Transaction],
            Self::Unspecified => &[MessageType::Unspecified],
        };
        types.iter().map(|t| *t as i32).collect()
    }
}

/// What the front end needs of a subscription group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub consume_message_orderly: bool,
    pub retry_max_times: i32,
    /// `groupRetryPolicy` as the broker answered it (JSON), if any.
    pub retry_policy: Option<serde_json::Value>,
}

impl Default for GroupView {
    /// Java's `new SubscriptionGroupConfig()`.
    fn default() -> Self {
        Self { consume_message_orderly: false, retry_max_times: 16, retry_policy: None }
    }
}

impl GroupView {
    /// A GET_SUBSCRIPTIONGROUP_CONFIG body (fastjson, camelCase).
    pub fn from_json(body: &[u8]) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let d = Self::default();
        Some(Self {
            consume_message_orderly: v.get("consumeMessageOrderly").and_then(|b| b.as_bool()).unwrap_or(d.consume_message_orderly),
            retry_max_times: v.get("retryMaxTimes").and_then(|n| n.as_i64()).map(|n| n.clamp(0, i32::MAX as i64) as i32).unwrap_or(d.retry_max_times),
            retry_policy: v.get("groupRetryPolicy").cloned().filter(|p| !p.is_null()),
        })
    }
}

struct Cached<T> {
    at_ms: i64,
    value: T,
}

/// Topic routes and types and group configs, briefly cached.
#[derive(Default)]
pub struct MetadataCache {
    topics: Mutex<HashMap<String, Cached<Arc<TopicView>>>>,
    groups: Mutex<HashMap<String, Cached<Option<GroupView>>>>,
}

/// A topic's route and message type.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicView {
    pub route: TopicRouteData,
    pub message_type: TopicMessageType,
}

fn cache_get<T: Clone>(map: &Mutex<HashMap<String, Cached<T>>>, key: &str, now_ms: i64) -> Option<T> {
    let map = map.lock().ok()?;
    map.get(key).filter(|c| now_ms - c.at_ms < METADATA_CACHE_TTL_MS && now_ms >= c.at_ms).map(|c| c.value.clone())
}

fn cache_put<T>(map: &Mutex<HashMap<String, Cached<T>>>, key: &str, value: T, now_ms: i64) {
    let Ok(mut map) = map.lock() else { return };
    if map.len() >= METADATA_CACHE_ENTRIES_MAX && !map.contains_key(key) {
        map.retain(|_, c| now_ms - c.at_ms < METADATA_CACHE_TTL_MS);
        if map.len() >= METADATA_CACHE_ENTRIES_MAX {
            map.clear();
        }
    }
    map.insert(key.to_string(), Cached { at_ms: now_ms, value });
}

/// Apache `TopicValidator.isSystemTopic` (the names RingMQ's broker keeps too).
pub fn is_system_topic(topic: &str) -> bool {
    const SYSTEM: &[&str] = &[
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
    ];
    SYSTEM.contains(&topic) || topic.starts_with("rmq_sys_")
}

fn valid_name_chars(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'%' || b == b'|' || b == b'-' || b == b'_')
}

/// Apache `GrpcValidator.validateTopic`: ILLEGAL_TOPIC.
pub fn validate_topic(topic: &str) -> Result<(), GrpcError> {
    let illegal = |m: String| Err(GrpcError::new(Code::IllegalTopic, m));
    if topic.trim().is_empty() {
        return illegal("The specified topic is blank.".into());
    }
    if topic.len() > RESOURCE_NAME_BYTES_MAX {
        return illegal(format!("The specified topic is longer than topic max length {RESOURCE_NAME_BYTES_MAX}."));
    }
    if !valid_name_chars(topic) {
        return illegal(format!("The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"));
    }
    if is_system_topic(topic) {
        return illegal("cannot access system topic".into());
    }
    Ok(())
}

/// Apache `GrpcValidator.validateConsumerGroup`: ILLEGAL_CONSUMER_GROUP.
pub fn validate_group(group: &str) -> Result<(), GrpcError> {
    let illegal = |m: String| Err(GrpcError::new(Code::IllegalConsumerGroup, m));
    if group.trim().is_empty() {
        return illegal("consumer group cannot be blank".into());
    }
    if group.len() > RESOURCE_NAME_BYTES_MAX {
        return illegal(format!("consumer group is longer than {RESOURCE_NAME_BYTES_MAX}"));
    }
    if !valid_name_chars(group) {
        return illegal(format!("the consumer group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"));
    }
    if group.starts_with("CID_RMQ_SYS_") {
        return illegal("cannot use system consumer group".into());
    }
    Ok(())
}

/// The GET_ROUTEINFO_BY_TOPIC request.
pub fn route_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request(rq::GET_ROUTEINFO_BY_TOPIC).with_header(&GetRouteInfoRequestHeader { topic: topic.to_string(), accept_standard_json_only: Some(true) })
}

/// The GET_TOPIC_CONFIG request.
pub fn topic_config_request(topic: &str) -> RemotingCommand {
    RemotingCommand::request(rq::GET_TOPIC_CONFIG).with_ext("topic", topic)
}

/// The GET_SUBSCRIPTIONGROUP_CONFIG request.
pub fn group_config_request(group: &str) -> RemotingCommand {
    RemotingCommand::request(rq::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", group)
}

/// A topic's message type from a GET_TOPIC_CONFIG answer's JSON body.
pub fn message_type_of_topic_config(body: &[u8]) -> TopicMessageType {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let attrs = v.get("attributes");
    let value = attrs.and_then(|a| a.get(TOPIC_MESSAGE_TYPE_ATTRIBUTE).or_else(|| a.get("+message.type"))).and_then(|t| t.as_str());
    TopicMessageType::parse(value)
}

impl Frontend {
    /// The topic's route and type (cached).
    pub async fn topic_view(&self, topic: &str) -> Result<Arc<TopicView>, GrpcError> {
        let now = self.clock.now_ms();
        if let Some(v) = cache_get(&self.metadata.topics, topic, now) {
            return Ok(v);
        }
        let answer = status::expect_success(self.call(Target::Metadata, route_request(topic)).await?)?;
        let route = TopicRouteData::decode(&answer.body).map_err(|e| GrpcError::new(Code::InternalServerError, format!("route of {topic} does not decode: {e}")))?;
        let config = self.call(Target::Metadata, topic_config_request(topic)).await?;
        let message_type = if config.code == rs::SUCCESS { message_type_of_topic_config(&config.body) } else { TopicMessageType::Mixed };
        let view = Arc::new(TopicView { route, message_type });
        cache_put(&self.metadata.topics, topic, view.clone(), now);
        Ok(view)
    }

    /// The group's config, `None` when the broker has no such group (cached).
    pub async fn group_view(&self, group: &str) -> Result<Option<GroupView>, GrpcError> {
        let now = self.clock.now_ms();
        if let Some(v) = cache_get(&self.metadata.groups, group, now) {
            return Ok(v);
        }
        let answer = self.call(Target::Metadata, group_config_request(group)).await?;
        let view = match answer.code {
            rs::SUCCESS => GroupView::from_json(&answer.body),
            rs::SUBSCRIPTION_GROUP_NOT_EXIST => None,
            _ => return Err(GrpcError::from_response(&answer)),
        };
        cache_put(&self.metadata.groups, group, view.clone(), now);
        Ok(view)
    }
}

fn permission_of(perm: i32) -> Permission {
    match (perm & PERM_READ != 0, perm & PERM_WRITE != 0) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

/// The master of each broker of the route, presented at the endpoints the client used.
fn masters<'a>(route: &'a TopicRouteData, endpoints: &'a Option<pb::Endpoints>) -> impl Fn(&str) -> Option<pb::Broker> + 'a {
    move |name: &str| {
        let b = route.broker_datas.iter().find(|b| b.broker_name == name)?;
        b.broker_addrs.get(&MASTER_ID)?;
        Some(pb::Broker { name: b.broker_name.clone(), id: MASTER_ID as i32, endpoints: endpoints.clone() })
    }
}

/// The queue datas in broker-name order (every front end lists them alike).
fn sorted_queue_datas(route: &TopicRouteData) -> Vec<&ringmq_client::remoting::route::QueueData> {
    let mut q: Vec<_> = route.queue_datas.iter().collect();
    q.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    q
}

/// `RouteActivity.genMessageQueueFromQueueData` over the route: read-only, write-only,
/// read-write then no-permission queues, numbered in that order.
pub fn message_queues(route: &TopicRouteData, topic: &pb::Resource, message_type: TopicMessageType, endpoints: &Option<pb::Endpoints>) -> Vec<pb::MessageQueue> {
    let master = masters(route, endpoints);
    let accept = message_type.accept_message_types();
    let mut out = Vec::new();
    for q in sorted_queue_datas(route) {
        let Some(broker) = master(&q.broker_name) else { continue };
        let (readable, writable) = (q.perm & PERM_READ != 0, q.perm & PERM_WRITE != 0);
        let (mut r, mut w, mut rw, mut n) = (0, 0, 0, 0);
        if readable && writable {
            rw = q.write_queue_nums.min(q.read_queue_nums);
            r = q.read_queue_nums - rw;
            w = q.write_queue_nums - rw;
        } else if writable {
            w = q.write_queue_nums;
        } else if readable {
            r = q.read_queue_nums;
        } else {
            n = 1.max(q.write_queue_nums.max(q.read_queue_nums));
        }
        let mut id = 0;
        for (count, permission) in [(r, Permission::Read), (w, Permission::Write), (rw, Permission::ReadWrite), (n, Permission::None)] {
            for _ in 0..count.max(0) {
                out.push(pb::MessageQueue { topic: Some(topic.clone()), id, permission: permission as i32, broker: Some(broker.clone()), accept_message_types: accept.clone() });
                id += 1;
            }
        }
    }
    out
}

/// The writable queues `(broker, queue id)` a send may choose from, in route order.
pub fn write_queues(route: &TopicRouteData) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for q in sorted_queue_datas(route) {
        let has_master = route.broker_datas.iter().any(|b| b.broker_name == q.broker_name && b.broker_addrs.contains_key(&MASTER_ID));
        if q.perm & PERM_WRITE != 0 && has_master {
            out.extend((0..q.write_queue_nums.max(0)).map(|i| (q.broker_name.clone(), i)));
        }
    }
    out
}

/// `RouteActivity.queryAssignment`'s list: per readable broker, every queue (FIFO
/// group) or one queue −1.
pub fn assignments(route: &TopicRouteData, topic: &pb::Resource, fifo: bool, endpoints: &Option<pb::Endpoints>) -> Vec<pb::Assignment> {
    let master = masters(route, endpoints);
    let mut out = Vec::new();
    for q in sorted_queue_datas(route) {
        if q.perm & PERM_READ == 0 || q.read_queue_nums <= 0 {
            continue;
        }
        let Some(broker) = master(&q.broker_name) else { continue };
        let permission = permission_of(q.perm) as i32;
        let queue = |id| pb::Assignment { message_queue: Some(pb::MessageQueue { topic: Some(topic.clone()), id, permission, broker: Some(broker.clone()), accept_message_types: Vec::new() }) };
        if fifo {
            out.extend((0..q.read_queue_nums).map(queue));
        } else {
            out.push(queue(-1));
        }
    }
    out
}

/// QueryRoute.
pub async fn query_route(fe: &Frontend, meta: &ClientMeta, req: pb::QueryRouteRequest) -> Result<pb::QueryRouteResponse, GrpcError> {
    let resource = req.topic.unwrap_or_default();
    let topic = meta.resource_name(&resource);
    validate_topic(&topic)?;
    let view = fe.topic_view(&topic).await?;
    let message_queues = message_queues(&view.route, &resource, view.message_type, &req.endpoints);
    Ok(pb::QueryRouteResponse { status: Some(status::ok()), message_queues })
}

/// QueryAssignment.
pub async fn query_assignment(fe: &Frontend, meta: &ClientMeta, req: pb::QueryAssignmentRequest) -> Result<pb::QueryAssignmentResponse, GrpcError> {
    let resource = req.topic.unwrap_or_default();
    let topic = meta.resource_name(&resource);
    validate_topic(&topic)?;
    let group = meta.resource_name(&req.group.unwrap_or_default());
    validate_group(&group)?;
    let view = fe.topic_view(&topic).await?;
    let fifo = fe.group_view(&group).await?.is_some_and(|g| g.consume_message_orderly);
    let assignments = assignments(&view.route, &resource, fifo, &req.endpoints);
    if assignments.is_empty() {
        return Ok(pb::QueryAssignmentResponse { status: Some(status::status(Code::Forbidden, "no readable queue")), assignments });
    }
    Ok(pb::QueryAssignmentResponse { status: Some(status::ok()), assignments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::route::{BrokerData, QueueData};
    use std::collections::BTreeMap;

    fn route(queues: &[(&str, i32, i32, i32)], masters: &[&str]) -> TopicRouteData {
        TopicRouteData {
            broker_datas: masters.iter().map(|b| BrokerData { broker_addrs: BTreeMap::from([(0, "a:1".to_string())]), broker_name: b.to_string(), ..Default::default() }).collect(),
            queue_datas: queues.iter().map(|(b, perm, r, w)| QueueData { broker_name: b.to_string(), perm: *perm, read_queue_nums: *r, write_queue_nums: *w, topic_sys_flag: 0 }).collect(),
            ..Default::default()
        }
    }

    /// `(broker, id, permission)` of each message queue QueryRoute answers.
    fn check(queues: &[(&str, i32, i32, i32)], masters: &[&str], expected: &[(&str, i32, Permission)]) {
        let topic = pb::Resource { resource_namespace: String::new(), name: "T".into() };
        let got: Vec<_> = message_queues(&route(queues, masters), &topic, TopicMessageType::Normal, &None)
            .into_iter()
            .map(|q| (q.broker.unwrap().name, q.id, Permission::try_from(q.permission).unwrap()))
            .collect();
        let expected: Vec<_> = expected.iter().map(|(b, i, p)| (b.to_string(), *i, *p)).collect();
        assert_eq!(got, expected, "{queues:?}");
    }

    #[test]
    fn message_queue_permissions() {
        use Permission::*;
        check(&[("b", 6, 2, 2)], &["b"], &[("b", 0, ReadWrite), ("b", 1, ReadWrite)]);
        check(&[("b", 6, 3, 1)], &["b"], &[("b", 0, Read), ("b", 1, Read), ("b", 2, ReadWrite)]);
        check(&[("b", 6, 1, 2)], &["b"], &[("b", 0, Write), ("b", 1, ReadWrite)]);
        check(&[("b", 4, 2, 2)], &["b"], &[("b", 0, Read), ("b", 1, Read)]);
        check(&[("b", 2, 2, 1)], &["b"], &[("b", 0, Write)]);
        check(&[("b", 0, 2, 3)], &["b"], &[("b", 0, None), ("b", 1, None), ("b", 2, None)]);
        check(&[("b", 0, 0, 0)], &["b"], &[("b", 0, None)]);
        // Broker-name order; a broker without a master contributes nothing.
        check(&[("z", 6, 1, 1), ("a", 6, 1, 1), ("nomaster", 6, 1, 1)], &["a", "z"], &[("a", 0, ReadWrite), ("z", 0, ReadWrite)]);
    }

    #[test]
    fn write_queues_and_assignments() {
        let r = route(&[("z", 6, 2, 2), ("a", 2, 0, 1), ("r", 4, 3, 3)], &["a", "r", "z"]);
        assert_eq!(write_queues(&r), vec![("a".to_string(), 0), ("z".to_string(), 0), ("z".to_string(), 1)]);
        let topic = pb::Resource::default();
        let ids = |fifo| assignments(&r, &topic, fifo, &None).into_iter().map(|a| { let q = a.message_queue.unwrap(); (q.broker.unwrap().name, q.id) }).collect::<Vec<_>>();
        assert_eq!(ids(false), vec![("r".to_string(), -1), ("z".to_string(), -1)]);
        assert_eq!(ids(true), vec![("r".into(), 0), ("r".into(), 1), ("r".into(), 2), ("z".into(), 0), ("z".into(), 1)]);
    }

    #[test]
    fn topic_types_and_validation() {
        let cases = [
            (r#"{"attributes":{"message.type":"FIFO"}}"#, TopicMessageType::Fifo),
            (r#"{"attributes":{"+message.type":"TRANSACTION"}}"#, TopicMessageType::Transaction),
            (r#"{"attributes":{"message.type":"DELAY"}}"#, TopicMessageType::Delay),
            (r#"{"attributes":{"message.type":"NORMAL"}}"#, TopicMessageType::Normal),
            (r#"{"attributes":{"message.type":"MIXED"}}"#, TopicMessageType::Mixed),
            (r#"{"attributes":{"message.type":"ODD"}}"#, TopicMessageType::Unspecified),
            (r#"{"attributes":{}}"#, TopicMessageType::Mixed),
            ("not json", TopicMessageType::Mixed),
        ];
        for (body, expected) in cases {
            assert_eq!(message_type_of_topic_config(body.as_bytes()), expected, "{body}");
        }
        for (t, ok) in [("T", true), ("a-b_c%d|e", true), ("", false), (" ", false), ("a b", false), ("rmq_sys_x", false), ("TBW102", false), (&"t".repeat(128), false)] {
            assert_eq!(validate_topic(t).is_ok(), ok, "{t}");
        }
        for (g, ok) in [("G", true), ("", false), ("CID_RMQ_SYS_X", false), ("g/h", false)] {
            assert_eq!(validate_group(g).is_ok(), ok, "{g}");
        }
        let g = GroupView::from_json(br#"{"consumeMessageOrderly":true,"retryMaxTimes":5,"groupRetryPolicy":{"type":"EXPONENTIAL"}}"#).unwrap();
        assert_eq!((g.consume_message_orderly, g.retry_max_times, g.retry_policy.is_some()), (true, 5, true));
        assert_eq!(GroupView::from_json(b"{}"), Some(GroupView::default()));
        assert_eq!(GroupView::from_json(b"]"), Option::None);
    }

    #[test]
    fn cache_expires_and_is_bounded() {
        let m: Mutex<HashMap<String, Cached<i32>>> = Mutex::default();
        cache_put(&m, "a", 1, 0);
        assert_eq!(cache_get(&m, "a", METADATA_CACHE_TTL_MS - 1), Some(1));
        assert_eq!(cache_get(&m, "a", METADATA_CACHE_TTL_MS), Option::None);
        assert_eq!(cache_get(&m, "a", -1), Option::None, "a clock step back refetches");
        for i in 0..METADATA_CACHE_ENTRIES_MAX + 5 {
            cache_put(&m, &i.to_string(), 0, 0);
        }
        assert!(m.lock().unwrap().len() <= METADATA_CACHE_ENTRIES_MAX);
    }
}
