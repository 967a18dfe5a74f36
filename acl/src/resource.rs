//! What a request touches and with which permission, as Apache 4.x's
//! `PlainAccessValidator.parse` (per request code) and `Permission.ADMIN_CODE`.
//!
//! Apache's rules, by code (a `%RETRY%<group>` topic is the group):
//! SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: the topic PUB, or when it is a
//! retry topic, the producer group SUB; CONSUMER_SEND_MSG_BACK: `group` SUB;
//! PULL_MESSAGE / LITE_PULL_MESSAGE: `topic` SUB and `consumerGroup` SUB; QUERY_MESSAGE:
//! `topic` SUB; HEART_BEAT: each consumer's group SUB and each subscribed topic SUB;
//! UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP: `consumerGroup` SUB;
//! UPDATE_CONSUMER_OFFSET / QUERY_CONSUMER_OFFSET: `consumerGroup` SUB and `topic` SUB.
//! Every other code names no resource (authentication only).
//! Where RingMQ adds to Apache 4.9.7 (listed in ARCHITECTURE.md): SEND_BATCH_MESSAGE,
//! LITE_PULL_MESSAGE and QUERY_CONSUMER_OFFSET are checked (Apache lets them through
//! unchecked); SEND_MESSAGE's retry-topic rule reads `producerGroup` (Apache reads a
//! `group` field V1 headers do not have, so it checks nothing); admin codes add
//! INVOKE_BROKER_TO_RESET_OFFSET to Apache's five.
//!
//! Invariant: a resource list is bounded by the request (a heartbeat's by its body,
//! itself bounded by the frame limit); extraction never panics.

use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::heartbeat::HeartbeatData;
use std::borrow::Cow;

pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// Apache's `Permission.ADMIN_CODE` (UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG,
/// DELETE_TOPIC_IN_BROKER, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP)
/// and INVOKE_BROKER_TO_RESET_OFFSET: only an `admin: true` account sends them.
pub const ADMIN_CODES: &[i32] = &[
    rq::UPDATE_AND_CREATE_TOPIC,
    rq::UPDATE_BROKER_CONFIG,
    rq::DELETE_TOPIC_IN_BROKER,
    rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    rq::DELETE_SUBSCRIPTIONGROUP,
    rq::INVOKE_BROKER_TO_RESET_OFFSET,
];

pub fn is_admin_code(code: i32) -> bool {
    ADMIN_CODES.contains(&code)
}

/// One thing a request touches: a topic or a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource<'a> {
    Topic(Cow<'a, str>),
    Group(Cow<'a, str>),
}

impl<'a> Resource<'a> {
    /// A topic name; a retry topic is its group (Apache's `isRetryTopic` → group perm).
    pub fn of_topic(topic: Cow<'a, str>) -> Self {
        match topic {
            Cow::Borrowed(t) => match t.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
                Some(g) => Resource::Group(Cow::Borrowed(g)),
                None => Resource::Topic(Cow::Borrowed(t)),
            },
            Cow::Owned(t) => match t.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
                Some(g) => Resource::Group(Cow::Owned(g.to_string())),
                None => Resource::Topic(Cow::Owned(t)),
            },
        }
    }
}

impl std::fmt::Display for Resource<'_> {
    /// Apache's `PlainAccessResource.printStr`: `topic:<name>` / `group:<name>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic:{t}"),
            Resource::Group(g) => write!(f, "group:{g}"),
        }
    }
}

/// The resources `cmd` touches with the permission each needs (`super::PUB` / `SUB`);
/// `Err` when its body does not decode (Apache refuses such a request too).
pub fn resources(cmd: &RemotingCommand) -> Result<Vec<(Resource<'_>, u8)>, String> {
    use super::{PUB, SUB};
    let mut out = Vec::new();
    let add_topic = |out: &mut Vec<(Resource<'_>, u8)>, topic: Option<&str>, perm| {
        if let Some(t) = topic {
            out.push((Resource::of_topic(Cow::Owned(t.to_string())), perm));
        }
    };
    let group = |name: Option<&str>| name.map(|g| Resource::Group(Cow::Owned(g.to_string())));
    let (topic_key, group_key) = match cmd.code {
        rq::SEND_MESSAGE => ("topic", "producerGroup"),
        rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => ("b", "a"),
        _ => ("", ""),
    };
    match cmd.code {
        rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => {
            let topic = cmd.ext(topic_key);
            if topic.is_some_and(|t| t.starts_with(RETRY_GROUP_TOPIC_PREFIX)) {
                out.extend(group(cmd.ext(group_key)).map(|g| (g, SUB)));
            } else {
                add_topic(&mut out, topic, PUB);
            }
        }
        rq::CONSUMER_SEND_MSG_BACK => out.extend(group(cmd.ext("group")).map(|g| (g, SUB))),
        rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => {
            add_topic(&mut out, cmd.ext("topic"), SUB);
            out.extend(group(cmd.ext("consumerGroup")).map(|g| (g, SUB)));
        }
        rq::QUERY_MESSAGE => add_topic(&mut out, cmd.ext("topic"), SUB),
        rq::HEART_BEAT => {
            let data = HeartbeatData::decode(&cmd.body).map_err(|e| format!("bad heartbeat body: {e}"))?;
            for consumer in data.consumer_data_set {
                out.push((Resource::Group(Cow::Owned(consumer.group_name)), SUB));
                for sub in consumer.subscription_data_set {
                    out.push((Resource::of_topic(Cow::Owned(sub.topic)), SUB));
                }
            }
        }
        rq::UNREGISTER_CLIENT | rq::GET_CONSUMER_LIST_BY_GROUP => out.extend(group(cmd.ext("consumerGroup")).map(|g| (g, SUB))),
        rq::UPDATE_CONSUMER_OFFSET | rq::QUERY_CONSUMER_OFFSET => {
            out.extend(group(cmd.ext("consumerGroup")).map(|g| (g, SUB)));
            add_topic(&mut out, cmd.ext("topic"), SUB);
        }
        _ => {}
    }
    Ok(out)
}
