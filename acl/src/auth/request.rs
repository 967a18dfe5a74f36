//! What a request asks, for authorization: the resources it touches and the actions
//! it needs on each (Apache 5's `DefaultAuthorizationContextBuilder.build`: its switch
//! of request codes read field by field, and for every other code the
//! `@RocketMQAction` / `@RocketMQResource` annotations of the code's header class,
//! transcribed into `ANNOTATED`).
//!
//! Apache's rules kept: a `%RETRY%<group>` topic is the group; a CLUSTER-typed code
//! names the broker's cluster unless a `clusterName` field names one; a field that is
//! absent names nothing; a code neither special-cased nor annotated needs nothing
//! (authentication alone). Where RingMQ adds to Apache 5.3 (listed in ARCHITECTURE.md):
//! LITE_PULL_MESSAGE is checked as PULL_MESSAGE (Apache registers no header for it);
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP needs Create on the body's group, and
//! UPDATE_BROKER_CONFIG / GET_BROKER_CONFIG need Update / Get on the cluster (Apache's
//! classes for them carry no annotation, so any authenticated user may change a broker's
//! configuration there).
//!
//! Invariant: extraction never panics; what it returns is bounded by the request (a
//! heartbeat's or lock body's by the body, itself bounded by the frame limit).

use super::model::{Action, ResourceType};
use ringmq_client::remoting::bodies::{JsonBody, LockBatchRequestBody};
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::heartbeat::HeartbeatData;
use std::borrow::Cow;

/// Apache's AUTH_* request codes (`RequestCode`, 3001..=3010; numbered in the client's
/// code table).
pub mod codes {
    pub use ringmq_client::remoting::codes::request_code::{
        AUTH_CREATE_ACL, AUTH_CREATE_USER, AUTH_DELETE_ACL, AUTH_DELETE_USER, AUTH_GET_ACL, AUTH_GET_USER, AUTH_LIST_ACL, AUTH_LIST_USER, AUTH_UPDATE_ACL, AUTH_UPDATE_USER,
    };
    /// Every AUTH_* code: the user and ACL administration.
    pub const ALL: [i32; 10] = [AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER, AUTH_GET_USER, AUTH_LIST_USER, AUTH_CREATE_ACL, AUTH_UPDATE_ACL, AUTH_DELETE_ACL, AUTH_GET_ACL, AUTH_LIST_ACL];
    /// The AUTH_* codes that change the tables.
    pub const CHANGES: [i32; 6] = [AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER, AUTH_CREATE_ACL, AUTH_UPDATE_ACL, AUTH_DELETE_ACL];
}

pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// One thing a request touches and the actions it needs there (Apache's
/// `DefaultAuthorizationContext`: resource and actions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need<'a> {
    pub resource_type: ResourceType,
    /// Empty when the request's field is absent (matches only `*` patterns, as Apache's
    /// null name).
    pub name: Cow<'a, str>,
    pub actions: &'static [Action],
}

impl Need<'_> {
    /// Apache's `getResourceKey` of a request's resource, for remarks.
    pub fn key(&self) -> String {
        format!("{}:{}", self.resource_type, self.name)
    }
}

const PUB: &[Action] = &[Action::Pub];
const SUB: &[Action] = &[Action::Sub];
const GET: &[Action] = &[Action::Get];
const CREATE: &[Action] = &[Action::Create];
const UPDATE: &[Action] = &[Action::Update];
const DELETE: &[Action] = &[Action::Delete];
const SUB_GET: &[Action] = &[Action::Sub, Action::Get];
const SUB_UPDATE: &[Action] = &[Action::Sub, Action::Update];
const PUB_SUB_GET: &[Action] = &[Action::Pub, Action::Sub, Action::Get];

/// One `@RocketMQAction`-annotated header: whether its resource is the cluster, the
/// fields named by `@RocketMQResource` (type, field, splitter) and the actions.
struct Annotated {
    code: i32,
    cluster: bool,
    fields: &'static [(ResourceType, &'static str, Option<char>)],
    actions: &'static [Action],
}

const fn ann(code: i32, cluster: bool, fields: &'static [(ResourceType, &'static str, Option<char>)], actions: &'static [Action]) -> Annotated {
    Annotated { code, cluster, fields, actions }
}

const T: ResourceType = ResourceType::Topic;
const G: ResourceType = ResourceType::Group;
const C: ResourceType = ResourceType::Cluster;

/// Apache's annotations for the codes RingMQ's broker and NameServer serve or send
/// (the AUTH_* codes among them), plus RingMQ's additions (module docs).
const ANNOTATED: &[Annotated] = &[
    ann(rq::UPDATE_AND_CREATE_TOPIC, false, &[(T, "topic", None)], CREATE),
    ann(rq::DELETE_TOPIC_IN_BROKER, false, &[(T, "topic", None)], DELETE),
    ann(rq::DELETE_SUBSCRIPTIONGROUP, false, &[(G, "groupName", None)], DELETE),
    ann(rq::GET_TOPIC_CONFIG, false, &[(T, "topic", None)], GET),
    ann(rq::GET_TOPIC_STATS_INFO, false, &[(T, "topic", None)], GET),
    ann(rq::GET_CONSUME_STATS, false, &[(G, "consumerGroup", None), (T, "topic", None), (T, "topicList", Some(';'))], GET),
    ann(rq::GET_CONSUMER_CONNECTION_LIST, false, &[(G, "consumerGroup", None)], GET),
    ann(rq::GET_PRODUCER_CONNECTION_LIST, true, &[], GET),
    ann(rq::GET_CONSUMER_RUNNING_INFO, false, &[(G, "consumerGroup", None)], GET),
    ann(rq::CONSUME_MESSAGE_DIRECTLY, false, &[(G, "consumerGroup", None), (T, "topic", None)], SUB),
    ann(rq::QUERY_TOPIC_CONSUME_BY_WHO, false, &[(T, "topic", None)], GET),
    ann(rq::INVOKE_BROKER_TO_RESET_OFFSET, false, &[(G, "group", None), (T, "topic", None)], UPDATE),
    ann(rq::SEARCH_OFFSET_BY_TIMESTAMP, false, &[(T, "topic", None)], GET),
    ann(rq::GET_MAX_OFFSET, false, &[(T, "topic", None)], GET),
    ann(rq::GET_MIN_OFFSET, false, &[(T, "topic", None)], GET),
    ann(rq::GET_EARLIEST_MSG_STORETIME, false, &[(T, "topic", None)], GET),
    ann(rq::VIEW_MESSAGE_BY_ID, false, &[(T, "topic", None)], GET),
    ann(rq::VIEW_BROKER_STATS_DATA, true, &[], GET),
    ann(rq::GET_SUBSCRIPTIONGROUP_CONFIG, false, &[(G, "group", None)], GET),
    ann(rq::QUERY_CONSUME_QUEUE, false, &[(T, "topic", None), (G, "consumerGroup", None)], GET),
    ann(rq::GET_BROKER_MEMBER_GROUP, false, &[(C, "clusterName", None)], GET),
    ann(rq::QUERY_DATA_VERSION, true, &[(C, "clusterName", None)], GET),
    ann(rq::NOTIFY_CONSUMER_IDS_CHANGED, false, &[(G, "consumerGroup", None)], SUB),
    ann(rq::CHECK_TRANSACTION_STATE, false, &[(T, "topic", None)], PUB),
    ann(rq::PUSH_REPLY_MESSAGE_TO_CLIENT, false, &[(G, "producerGroup", None), (T, "topic", None)], SUB),
    ann(rq::PUT_KV_CONFIG, true, &[], UPDATE),
    ann(rq::DELETE_KV_CONFIG, true, &[], UPDATE),
    ann(rq::GET_KV_CONFIG, true, &[], GET),
    ann(rq::GET_KVLIST_BY_NAMESPACE, true, &[], GET),
    ann(rq::REGISTER_BROKER, true, &[(C, "clusterName", None)], UPDATE),
    ann(rq::UNREGISTER_BROKER, true, &[(C, "clusterName", None)], UPDATE),
    ann(rq::DELETE_TOPIC_IN_NAMESRV, true, &[(C, "clusterName", None)], UPDATE),
    ann(rq::REGISTER_TOPIC_IN_NAMESRV, true, &[], UPDATE),
    ann(rq::WIPE_WRITE_PERM_OF_BROKER, true, &[], UPDATE),
    ann(rq::ADD_WRITE_PERM_OF_BROKER, true, &[], UPDATE),
    ann(codes::AUTH_CREATE_USER, true, &[], UPDATE),
    ann(codes::AUTH_UPDATE_USER, true, &[], UPDATE),
    ann(codes::AUTH_DELETE_USER, true, &[], UPDATE),
    ann(codes::AUTH_GET_USER, true, &[], GET),
    ann(codes::AUTH_LIST_USER, true, &[], GET),
    ann(codes::AUTH_CREATE_ACL, true, &[], UPDATE),
    ann(codes::AUTH_UPDATE_ACL, true, &[], UPDATE),
    ann(codes::AUTH_DELETE_ACL, true, &[], UPDATE),
    ann(codes::AUTH_GET_ACL, true, &[], GET),
    ann(codes::AUTH_LIST_ACL, true, &[], GET),
    // RingMQ's additions (module docs).
    ann(rq::UPDATE_BROKER_CONFIG, true, &[], UPDATE),
    ann(rq::GET_BROKER_CONFIG, true, &[], GET),
];

fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

fn cow<'a>(s: Option<&'a str>) -> Cow<'a, str> {
    Cow::Borrowed(s.unwrap_or_default())
}

/// Apache's `Resource.ofGroup`: a retry topic names its group.
fn group<'a>(name: Cow<'a, str>, actions: &'static [Action]) -> Need<'a> {
    let name = match name {
        Cow::Borrowed(n) => Cow::Borrowed(n.strip_prefix(RETRY_GROUP_TOPIC_PREFIX).unwrap_or(n)),
        Cow::Owned(n) => Cow::Owned(n.strip_prefix(RETRY_GROUP_TOPIC_PREFIX).map(str::to_string).unwrap_or(n)),
    };
    Need { resource_type: ResourceType::Group, name, actions }
}

fn topic<'a>(name: Cow<'a, str>, actions: &'static [Action]) -> Need<'a> {
    Need { resource_type: ResourceType::Topic, name, actions }
}

/// The resources and actions `cmd` needs; `cluster` is the broker's cluster name (what a
/// CLUSTER-typed code names). `Err` when a body it must read does not decode (Apache
/// refuses such a request: "parse authorization context error.").
pub fn needs<'a>(cmd: &'a RemotingCommand, cluster: &'a str) -> Result<Vec<Need<'a>>, String> {
    let ext = |k: &str| cmd.ext(k);
    let nonblank = |k: &str| cmd.ext(k).filter(|v| !v.trim().is_empty());
    let mut out = Vec::new();
    match cmd.code {
        rq::GET_ROUTEINFO_BY_TOPIC => {
            let t = ext("topic");
            if t.is_some_and(is_retry) {
                out.push(group(cow(t), SUB_GET));
            } else {
                out.push(topic(cow(t), PUB_SUB_GET));
            }
        }
        rq::SEND_MESSAGE | rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE => {
            let (topic_key, group_key) = if cmd.code == rq::SEND_MESSAGE { ("topic", "group") } else { ("b", "a") };
            let t = ext(topic_key);
            if t.is_some_and(is_retry) {
                out.push(group(cow(nonblank(group_key).or(t)), SUB));
            } else {
                out.push(topic(cow(t), PUB));
            }
        }
        rq::END_TRANSACTION => {
            if let Some(t) = nonblank("topic") {
                out.push(topic(Cow::Borrowed(t), PUB));
            }
        }
        rq::CONSUMER_SEND_MSG_BACK => out.push(group(cow(ext("group")), SUB)),
        rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => {
            let t = ext("topic");
            if !t.is_some_and(is_retry) {
                out.push(topic(cow(t), SUB));
            }
            out.push(group(cow(ext("consumerGroup")), SUB));
        }
        rq::QUERY_MESSAGE => out.push(topic(cow(ext("topic")), SUB_GET)),
        rq::HEART_BEAT => {
            let data = HeartbeatData::decode(&cmd.body).map_err(|e| format!("parse authorization context error: bad heartbeat body: {e}"))?;
            for consumer in data.consumer_data_set {
                out.push(group(Cow::Owned(consumer.group_name), SUB));
                for sub in consumer.subscription_data_set {
                    if !is_retry(&sub.topic) {
                        out.push(topic(Cow::Owned(sub.topic), SUB));
                    }
                }
            }
        }
        rq::UNREGISTER_CLIENT => {
            if let Some(g) = nonblank("consumerGroup") {
                out.push(group(Cow::Borrowed(g), SUB));
            }
        }
        rq::GET_CONSUMER_LIST_BY_GROUP => out.push(group(cow(ext("consumerGroup")), SUB_GET)),
        rq::QUERY_CONSUMER_OFFSET | rq::UPDATE_CONSUMER_OFFSET => {
            let actions = if cmd.code == rq::QUERY_CONSUMER_OFFSET { SUB_GET } else { SUB_UPDATE };
            let t = ext("topic");
            if !t.is_some_and(is_retry) {
                out.push(topic(cow(t), actions));
            }
            out.push(group(cow(ext("consumerGroup")), actions));
        }
        rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => {
            let body = LockBatchRequestBody::decode(&cmd.body).map_err(|e| format!("parse authorization context error: bad lock body: {e}"))?;
            out.push(group(Cow::Owned(body.consumer_group), SUB));
            for mq in body.mq_set {
                if !is_retry(&mq.topic) {
                    out.push(topic(Cow::Owned(mq.topic), SUB));
                }
            }
        }
        rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            // RingMQ's addition: the group named in the body.
            let name = serde_json::from_slice::<serde_json::Value>(&cmd.body)
                .ok()
                .and_then(|v| v.get("groupName").and_then(|g| g.as_str()).map(str::to_string))
                .ok_or("parse authorization context error: the body names no groupName")?;
            out.push(group(Cow::Owned(name), CREATE));
        }
        code => {
            let Some(a) = ANNOTATED.iter().find(|a| a.code == code) else { return Ok(out) };
            for &(kind, field, splitter) in a.fields {
                let Some(value) = ext(field) else { continue };
                let mut add = |v: &'a str| match kind {
                    ResourceType::Topic if is_retry(v) => out.push(group(Cow::Borrowed(v), a.actions)),
                    kind => out.push(Need { resource_type: kind, name: Cow::Borrowed(v), actions: a.actions }),
                };
                match splitter {
                    // Apache's StringUtils.split: empty pieces dropped.
                    Some(sep) => value.split(sep).filter(|v| !v.is_empty()).for_each(&mut add),
                    None => add(value),
                }
            }
            if out.is_empty() && a.cluster {
                out.push(Need { resource_type: ResourceType::Cluster, name: Cow::Borrowed(cluster), actions: a.actions });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The needs of a request of `code` with `fields` and `body`, each as
    /// "Type:name=Action|Action", or the refusal's text.
    fn check(code: i32, fields: &[(&str, &str)], body: &str, expected: Result<&[&str], &str>) {
        let mut cmd = RemotingCommand::request(code);
        for (k, v) in fields {
            cmd = cmd.with_ext(k, v);
        }
        cmd.body = bytes::Bytes::copy_from_slice(body.as_bytes());
        let got = needs(&cmd, "DefaultCluster").map(|n| n.iter().map(|n| format!("{}={}", n.key(), n.actions.iter().map(|a| a.name()).collect::<Vec<_>>().join("|"))).collect::<Vec<_>>());
        match (got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "code {code} {fields:?}"),
            (Err(e), Err(want)) => assert!(e.contains(want), "code {code}: {e} lacks {want}"),
            (got, want) => panic!("code {code} {fields:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn sends_and_pulls_as_apache() {
        check(rq::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "T1")], "", Ok(&["Topic:T1=Pub"]));
        check(rq::SEND_BATCH_MESSAGE, &[("a", "pg"), ("b", "T1")], "", Ok(&["Topic:T1=Pub"]));
        check(rq::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "%RETRY%cg")], "", Ok(&["Group:pg=Sub"]));
        check(rq::SEND_MESSAGE_V2, &[("a", " "), ("b", "%RETRY%cg")], "", Ok(&["Group:cg=Sub"]));
        check(rq::SEND_MESSAGE, &[("producerGroup", "pg"), ("topic", "%RETRY%cg")], "", Ok(&["Group:cg=Sub"]));
        check(rq::SEND_MESSAGE, &[("topic", "T")], "", Ok(&["Topic:T=Pub"]));
        check(rq::SEND_MESSAGE_V2, &[], "", Ok(&["Topic:=Pub"]));
        check(rq::END_TRANSACTION, &[("topic", "T")], "", Ok(&["Topic:T=Pub"]));
        check(rq::END_TRANSACTION, &[], "", Ok(&[]));
        check(rq::CONSUMER_SEND_MSG_BACK, &[("group", "cg")], "", Ok(&["Group:cg=Sub"]));
        check(rq::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "cg")], "", Ok(&["Topic:T=Sub", "Group:cg=Sub"]));
        check(rq::LITE_PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "cg")], "", Ok(&["Topic:T=Sub", "Group:cg=Sub"]));
        check(rq::PULL_MESSAGE, &[("topic", "%RETRY%cg"), ("consumerGroup", "cg")], "", Ok(&["Group:cg=Sub"]));
        check(rq::QUERY_MESSAGE, &[("topic", "T")], "", Ok(&["Topic:T=Sub|Get"]));
        check(rq::QUERY_CONSUMER_OFFSET, &[("topic", "T"), ("consumerGroup", "cg")], "", Ok(&["Topic:T=Sub|Get", "Group:cg=Sub|Get"]));
        check(rq::UPDATE_CONSUMER_OFFSET, &[("topic", "%RETRY%cg"), ("consumerGroup", "cg")], "", Ok(&["Group:cg=Sub|Update"]));
        check(rq::GET_CONSUMER_LIST_BY_GROUP, &[("consumerGroup", "cg")], "", Ok(&["Group:cg=Sub|Get"]));
        check(rq::UNREGISTER_CLIENT, &[("producerGroup", "pg")], "", Ok(&[]));
        check(rq::UNREGISTER_CLIENT, &[("consumerGroup", "cg")], "", Ok(&["Group:cg=Sub"]));
        check(rq::GET_ROUTEINFO_BY_TOPIC, &[("topic", "T")], "", Ok(&["Topic:T=Pub|Sub|Get"]));
        check(rq::GET_ROUTEINFO_BY_TOPIC, &[("topic", "%RETRY%g")], "", Ok(&["Group:g=Sub|Get"]));
    }

    #[test]
    fn bodies_are_read_where_apache_reads_them() {
        let hb = r#"{"clientID":"c","consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*"},{"topic":"%RETRY%cg","subString":"*"}],"unitMode":false}],"producerDataSet":[]}"#;
        check(rq::HEART_BEAT, &[], hb, Ok(&["Group:cg=Sub", "Topic:T=Sub"]));
        check(rq::HEART_BEAT, &[], r#"{"clientID":"c","producerDataSet":[{"groupName":"pg"}]}"#, Ok(&[]));
        check(rq::HEART_BEAT, &[], "not json", Err("bad heartbeat body"));
        let lock = r#"{"consumerGroup":"cg","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"%RETRY%cg","brokerName":"b","queueId":0}]}"#;
        check(rq::LOCK_BATCH_MQ, &[], lock, Ok(&["Group:cg=Sub", "Topic:T=Sub"]));
        check(rq::UNLOCK_BATCH_MQ, &[], "{", Err("bad lock body"));
        check(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[], r#"{"groupName":"cg","retryMaxTimes":3}"#, Ok(&["Group:cg=Create"]));
        check(rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, &[], "{}", Err("names no groupName"));
    }

    #[test]
    fn annotated_codes_as_apache() {
        check(rq::UPDATE_AND_CREATE_TOPIC, &[("topic", "T")], "", Ok(&["Topic:T=Create"]));
        check(rq::DELETE_TOPIC_IN_BROKER, &[("topic", "T")], "", Ok(&["Topic:T=Delete"]));
        check(rq::DELETE_SUBSCRIPTIONGROUP, &[("groupName", "g")], "", Ok(&["Group:g=Delete"]));
        check(rq::GET_CONSUME_STATS, &[("consumerGroup", "g"), ("topicList", "A;;%RETRY%g;B")], "", Ok(&["Group:g=Get", "Topic:A=Get", "Group:g=Get", "Topic:B=Get"]));
        check(rq::INVOKE_BROKER_TO_RESET_OFFSET, &[("group", "g"), ("topic", "T")], "", Ok(&["Group:g=Update", "Topic:T=Update"]));
        check(rq::GET_MAX_OFFSET, &[("topic", "T"), ("queueId", "0")], "", Ok(&["Topic:T=Get"]));
        check(rq::VIEW_MESSAGE_BY_ID, &[("offset", "1")], "", Ok(&[]));
        check(rq::GET_PRODUCER_CONNECTION_LIST, &[("producerGroup", "pg")], "", Ok(&["Cluster:DefaultCluster=Get"]));
        check(rq::REGISTER_BROKER, &[("clusterName", "C2")], "", Ok(&["Cluster:C2=Update"]));
        check(rq::REGISTER_BROKER, &[], "", Ok(&["Cluster:DefaultCluster=Update"]));
        check(rq::GET_BROKER_MEMBER_GROUP, &[], "", Ok(&[]));
        check(codes::AUTH_CREATE_USER, &[("username", "u")], "{}", Ok(&["Cluster:DefaultCluster=Update"]));
        check(codes::AUTH_LIST_ACL, &[], "", Ok(&["Cluster:DefaultCluster=Get"]));
        check(rq::UPDATE_BROKER_CONFIG, &[], "a=b", Ok(&["Cluster:DefaultCluster=Update"]));
        // Neither special nor annotated: authentication alone.
        check(rq::GET_ALL_TOPIC_CONFIG, &[], "", Ok(&[]));
        check(rq::GET_BROKER_RUNTIME_INFO, &[], "", Ok(&[]));
        check(9999, &[], "", Ok(&[]));
    }
}
