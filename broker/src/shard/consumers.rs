//! Consumer groups (who is in each group and what they subscribe to) and producer
//! groups (which clients, on which connection: what the transaction check-back and
//! GET_PRODUCER_CONNECTION_LIST need).
//!
//! Every shard keeps a full replica, fed by `ShardEvent::Heartbeat` / `ClientGone`
//! broadcasts from the shard holding each client's connection, so a pull on any shard
//! finds its group's subscription locally and GET_CONSUMER_LIST_BY_GROUP needs no hop.
//! Each shard notifies only the clients whose connections it holds.
//!
//! Invariants: bounded by `GROUPS_MAX` groups and `CLIENTS_MAX` clients (heartbeats past
//! them are refused); tag codes are computed here from `subString` (never trusted from
//! the client's `codeSet`, DESIGN.md §6).

use ringmq_client::remoting::heartbeat::{tag_codes, ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel};
use crate::filter::sql92::Sql92Filter;
use ringmq_client::remoting::codes::response_code as rs;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

pub const GROUPS_MAX: usize = 100_000;
pub const CLIENTS_MAX: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Subscription {
    pub sub_string: String,
    pub expression_type: String,
    /// Tag hash codes; empty means every tag (`*`, and every non-TAG expression).
    pub codes: Vec<i32>,
    pub sub_version: i64,
    /// What selects beyond the tag codes (SQL92 over the properties).
    pub properties: PropertySelector,
}

/// A subscription's selection over message properties.
#[derive(Debug, Clone)]
pub enum PropertySelector {
    /// A TAG expression: the tag codes are the whole selection.
    None,
    /// A SQL92 expression (`MessageSelector.bySql`), compiled once per heartbeat.
    Sql92(Rc<Sql92Filter>),
    /// An expression that does not compile, or a type RingMQ does not know: pulls with
    /// it are refused with this (response code, remark), never served unfiltered.
    Refused(i32, String),
}

/// Apache's `ExpressionType.isTagType`: no type, or TAG.
pub fn is_tag_type(expression_type: &str) -> bool {
    expression_type.is_empty() || expression_type.eq_ignore_ascii_case("TAG")
}

impl Subscription {
    /// The tag stage (ConsumeQueue tag hash); the property stage is `properties`.
    pub fn matches(&self, tag_hash: i64) -> bool {
        self.codes.is_empty() || self.codes.iter().any(|&c| c as i64 == tag_hash)
    }
}

#[derive(Debug, Clone, Default)]
pub struct GroupInfo {
    pub members: BTreeSet<String>,
    pub subscriptions: BTreeMap<String, Subscription>,
    pub broadcasting: bool,
    /// As the latest heartbeat said (GET_CONSUMER_CONNECTION_LIST reports them).
    pub consume_type: ConsumeType,
    pub consume_from_where: ConsumeFromWhere,
}

#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub conn_shard: usize,
    pub conn_id: u64,
    pub groups: BTreeSet<String>,
    /// The client's address (`None` if unknown), language and version, as its last
    /// heartbeat came.
    pub remote: Option<std::net::SocketAddr>,
    pub language: String,
    pub version: i32,
}

/// A producer client as its heartbeat described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerConn {
    pub client_id: String,
    pub conn_shard: usize,
    pub conn_id: u64,
    /// The client's address (`None` if unknown).
    pub remote: Option<std::net::SocketAddr>,
    pub language: String,
    pub version: i32,
    pub last_heartbeat_ms: i64,
}

/// Where a heartbeat came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatOrigin {
    pub conn_shard: usize,
    pub conn_id: u64,
    pub remote: Option<std::net::SocketAddr>,
    /// As the request carried it (`RemotingCommand::language`).
    pub language: std::borrow::Cow<'static, str>,
    pub version: i32,
    pub at_ms: i64,
}

#[derive(Debug, Default)]
pub struct ConsumerManager {
    groups: HashMap<String, GroupInfo>,
    clients: HashMap<String, ClientInfo>,
    /// Producer group -> client id -> connection.
    producers: BTreeMap<String, BTreeMap<String, ProducerConn>>,
    /// Client id -> its producer groups (to forget them when it goes).
    producer_groups_of: HashMap<String, BTreeSet<String>>,
}

pub fn subscription_of(sub_string: &str, expression_type: &str, sub_version: i64) -> Subscription {
    let (codes, properties) = if is_tag_type(expression_type) {
        (tag_codes(sub_string), PropertySelector::None)
    } else if expression_type.eq_ignore_ascii_case(SQL92) {
        let selector = match Sql92Filter::parse(sub_string) {
            Ok(filter) => PropertySelector::Sql92(Rc::new(filter)),
            Err(e) => PropertySelector::Refused(rs::SUBSCRIPTION_PARSE_FAILED, format!("parse the consumer's subscription failed: {e}")),
        };
        (Vec::new(), selector)
    } else {
        (Vec::new(), PropertySelector::Refused(rs::SUBSCRIPTION_PARSE_FAILED, format!("expression type {expression_type} is not supported (TAG or SQL92)")))
    };
    Subscription { sub_string: sub_string.to_string(), expression_type: expression_type.to_string(), codes, sub_version, properties }
}

/// Apache's `ExpressionType.SQL92`.
pub const SQL92: &str = "SQL92";

impl ConsumerManager {
    /// Applies a heartbeat; returns the groups whose membership changed.
    pub fn apply_heartbeat(&mut self, client_id: &str, data: &HeartbeatData, origin: &HeartbeatOrigin) -> Vec<String> {
        if !self.clients.contains_key(client_id) && self.clients.len() >= CLIENTS_MAX {
            tracing::warn!(client_id, "client table full: heartbeat ignored");
            return Vec::new();
        }
        let now_groups: BTreeSet<String> = data.consumer_data_set.iter().map(|c| c.group_name.clone()).collect();
        let before = self.clients.get(client_id).map(|c| c.groups.clone()).unwrap_or_default();
        let mut changed = Vec::new();
        for consumer in &data.consumer_data_set {
            if !self.groups.contains_key(&consumer.group_name) && self.groups.len() >= GROUPS_MAX {
                continue;
            }
            let group = self.groups.entry(consumer.group_name.clone()).or_default();
            if group.members.insert(client_id.to_string()) {
                changed.push(consumer.group_name.clone());
            }
            apply_subscriptions(group, consumer);
        }
        for gone in before.difference(&now_groups) {
            if let Some(group) = self.groups.get_mut(gone) {
                if group.members.remove(client_id) {
                    changed.push(gone.clone());
                }
            }
        }
        let info = ClientInfo {
            conn_shard: origin.conn_shard,
            conn_id: origin.conn_id,
            groups: now_groups,
            remote: origin.remote,
            language: origin.language.to_string(),
            version: origin.version,
        };
        self.clients.insert(client_id.to_string(), info);
        changed
    }

    /// Records the producer groups of a heartbeat (bounded like consumers: a client past
    /// `CLIENTS_MAX` or a group past `GROUPS_MAX` is ignored).
    pub fn apply_producers(&mut self, client_id: &str, data: &HeartbeatData, origin: &HeartbeatOrigin) {
        let now: BTreeSet<String> = data.producer_data_set.iter().map(|p| p.group_name.clone()).collect();
        let known = self.producer_groups_of.contains_key(client_id);
        if now.is_empty() && !known {
            return;
        }
        if !known && self.producer_groups_of.len() >= CLIENTS_MAX {
            tracing::warn!(client_id, "producer table full: heartbeat ignored");
            return;
        }
        let before = self.producer_groups_of.remove(client_id).unwrap_or_default();
        for gone in before.difference(&now) {
            self.forget_producer(gone, client_id);
        }
        let mut kept = BTreeSet::new();
        for group in now {
            if !self.producers.contains_key(&group) && self.producers.len() >= GROUPS_MAX {
                continue;
            }
            let conn = ProducerConn {
                client_id: client_id.to_string(),
                conn_shard: origin.conn_shard,
                conn_id: origin.conn_id,
                remote: origin.remote,
                language: origin.language.to_string(),
                version: origin.version,
                last_heartbeat_ms: origin.at_ms,
            };
            self.producers.entry(group.clone()).or_default().insert(client_id.to_string(), conn);
            kept.insert(group);
        }
        if !kept.is_empty() {
            self.producer_groups_of.insert(client_id.to_string(), kept);
        }
    }

    fn forget_producer(&mut self, group: &str, client_id: &str) {
        if let Some(members) = self.producers.get_mut(group) {
            members.remove(client_id);
            if members.is_empty() {
                self.producers.remove(group);
            }
        }
    }

    /// The connections of a producer group, by client id.
    pub fn producer_conns(&self, group: &str) -> Vec<ProducerConn> {
        self.producers.get(group).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// The connection of producer client `client_id` (Java's
    /// `ProducerManager.findChannel`, which a reply is pushed to).
    pub fn producer_conn_of(&self, client_id: &str) -> Option<&ProducerConn> {
        let group = self.producer_groups_of.get(client_id)?.iter().next()?;
        self.producers.get(group)?.get(client_id)
    }

    pub fn producer_group_count(&self) -> usize {
        self.producers.len()
    }

    /// Removes a client from every group; returns the consumer groups that changed.
    pub fn remove_client(&mut self, client_id: &str) -> Vec<String> {
        if let Some(groups) = self.producer_groups_of.remove(client_id) {
            for g in groups {
                self.forget_producer(&g, client_id);
            }
        }
        let Some(info) = self.clients.remove(client_id) else { return Vec::new() };
        let mut changed = Vec::new();
        for name in info.groups {
            if let Some(group) = self.groups.get_mut(&name) {
                if group.members.remove(client_id) {
                    changed.push(name.clone());
                }
                if group.members.is_empty() {
                    self.groups.remove(&name);
                }
            }
        }
        changed
    }

    pub fn members(&self, group: &str) -> Vec<String> {
        self.groups.get(group).map(|g| g.members.iter().cloned().collect()).unwrap_or_default()
    }

    pub fn subscription(&self, group: &str, topic: &str) -> Option<&Subscription> {
        self.groups.get(group)?.subscriptions.get(topic)
    }

    /// A group with at least one member, with its members' client infos.
    pub fn online_group(&self, group: &str) -> Option<(&GroupInfo, Vec<(&str, &ClientInfo)>)> {
        let info = self.groups.get(group).filter(|g| !g.members.is_empty())?;
        let clients = info.members.iter().filter_map(|c| self.clients.get(c).map(|i| (c.as_str(), i))).collect();
        Some((info, clients))
    }

    /// Groups with a member and a subscription to `topic` (Java's
    /// `queryTopicConsumeByWho`).
    pub fn groups_subscribing(&self, topic: &str) -> BTreeSet<String> {
        self.groups.iter().filter(|(_, g)| !g.members.is_empty() && g.subscriptions.contains_key(topic)).map(|(n, _)| n.clone()).collect()
    }

    pub fn client(&self, client_id: &str) -> Option<&ClientInfo> {
        self.clients.get(client_id)
    }

    /// Clients of `group` whose connections live on `shard`, as (client id, conn id).
    pub fn local_members(&self, group: &str, shard: usize) -> Vec<(String, u64)> {
        self.members(group)
            .into_iter()
            .filter_map(|c| self.clients.get(&c).filter(|i| i.conn_shard == shard).map(|i| (c.clone(), i.conn_id)))
            .collect()
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }
}

fn apply_subscriptions(group: &mut GroupInfo, consumer: &ConsumerData) {
    group.broadcasting = consumer.message_model == MessageModel::Broadcasting;
    group.consume_type = consumer.consume_type;
    group.consume_from_where = consumer.consume_from_where;
    for sub in &consumer.subscription_data_set {
        let newer = group.subscriptions.get(&sub.topic).is_none_or(|old| old.sub_version <= sub.sub_version);
        if newer {
            group.subscriptions.insert(sub.topic.clone(), subscription_of(&sub.sub_string, &sub.expression_type, sub.sub_version));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::heartbeat::ProducerData;

    fn heartbeat(client: &str, groups: &[(&str, &str, &str)]) -> HeartbeatData {
        let consumers: Vec<serde_json::Value> = groups
            .iter()
            .map(|(g, topic, sub)| {
                serde_json::json!({"groupName": g, "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
                    "subscriptionDataSet": [{"topic": topic, "subString": sub, "subVersion": 1}], "unitMode": false})
            })
            .collect();
        let body = serde_json::json!({"clientID": client, "consumerDataSet": consumers, "producerDataSet": []});
        HeartbeatData::decode(body.to_string().as_bytes()).expect("heartbeat")
    }

    fn origin() -> HeartbeatOrigin {
        HeartbeatOrigin { conn_shard: 0, conn_id: 1, remote: None, language: "JAVA".into(), version: 1, at_ms: 0 }
    }

    fn check(steps: &[(&str, &[(&str, &str, &str)])], group: &str, members: &[&str]) {
        let mut m = ConsumerManager::default();
        for (client, groups) in steps {
            if groups.is_empty() {
                m.remove_client(client);
            } else {
                m.apply_heartbeat(client, &heartbeat(client, groups), &origin());
            }
        }
        assert_eq!(m.members(group), members.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{steps:?}");
    }

    #[test]
    fn membership() {
        check(&[("c1", &[("g", "t", "*")])], "g", &["c1"]);
        check(&[("c1", &[("g", "t", "*")]), ("c2", &[("g", "t", "*")])], "g", &["c1", "c2"]);
        check(&[("c1", &[("g", "t", "*")]), ("c2", &[("g", "t", "*")]), ("c1", &[])], "g", &["c2"]);
        check(&[("c1", &[("g", "t", "*")]), ("c1", &[("h", "t", "*")])], "g", &[]);
        check(&[("c1", &[("g", "t", "*"), ("h", "t", "*")])], "h", &["c1"]);
    }

    /// Steps of (client, producer groups; empty = the client's connection closed), then
    /// the expected members of group "P".
    fn check_producers(steps: &[(&str, &[&str])], expected: &[&str]) {
        let mut m = ConsumerManager::default();
        for (i, (client, groups)) in steps.iter().enumerate() {
            if groups.is_empty() {
                m.remove_client(client);
                continue;
            }
            let data = HeartbeatData {
                client_id: client.to_string(),
                consumer_data_set: vec![],
                producer_data_set: groups.iter().map(|g| ProducerData { group_name: g.to_string() }).collect(),
            };
            let origin = HeartbeatOrigin { conn_shard: 1, conn_id: i as u64, remote: None, language: "JAVA".into(), version: 401, at_ms: i as i64 };
            m.apply_producers(client, &data, &origin);
        }
        let got: Vec<String> = m.producer_conns("P").into_iter().map(|c| c.client_id).collect();
        assert_eq!(got, expected.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{steps:?}");
    }

    #[test]
    fn producer_groups_follow_heartbeats_and_connections() {
        check_producers(&[("p1", &["P"])], &["p1"]);
        check_producers(&[("p1", &["P"]), ("p2", &["P", "Q"])], &["p1", "p2"]);
        check_producers(&[("p1", &["P"]), ("p2", &["P"]), ("p1", &[])], &["p2"]);
        check_producers(&[("p1", &["P"]), ("p1", &["Q"])], &[]);
        check_producers(&[("p1", &["Q"])], &[]);
        let mut m = ConsumerManager::default();
        let data = HeartbeatData { client_id: "p".into(), consumer_data_set: vec![], producer_data_set: vec![ProducerData { group_name: "P".into() }] };
        let origin = HeartbeatOrigin { conn_shard: 2, conn_id: 9, remote: Some("10.0.0.2:5000".parse().unwrap()), language: "CPP".into(), version: 7, at_ms: 5 };
        m.apply_producers("p", &data, &origin);
        let c = &m.producer_conns("P")[0];
        assert_eq!((c.conn_shard, c.conn_id, c.remote, c.language.as_str(), c.version), (2, 9, origin.remote, "CPP", 7));
        assert_eq!(m.producer_conn_of("p").map(|c| (c.conn_shard, c.conn_id)), Some((2, 9)));
        assert!(m.producer_conn_of("q").is_none());
        m.remove_client("p");
        assert!(m.producer_conn_of("p").is_none(), "gone with its connection");
    }

    #[test]
    fn changes_are_reported_once() {
        let mut m = ConsumerManager::default();
        assert_eq!(m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "*")]), &origin()), vec!["g"]);
        assert!(m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "*")]), &origin()).is_empty());
        assert_eq!(m.remove_client("c1"), vec!["g"]);
    }

    #[test]
    fn online_groups_and_subscribers() {
        let mut m = ConsumerManager::default();
        m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "*"), ("h", "u", "*")]), &origin());
        assert_eq!(m.groups_subscribing("t").into_iter().collect::<Vec<_>>(), vec!["g"]);
        let (info, clients) = m.online_group("g").expect("g is online");
        assert_eq!((info.consume_type, clients.len(), clients[0].1.language.as_str()), (ConsumeType::ConsumePassively, 1, "JAVA"));
        m.apply_heartbeat("c1", &heartbeat("c1", &[("h", "u", "*")]), &origin());
        assert!(m.online_group("g").is_none(), "a group whose last member left is not online");
        assert!(m.groups_subscribing("t").is_empty());
    }

    #[test]
    fn tag_codes_are_computed_from_the_expression_trimmed() {
        let mut m = ConsumerManager::default();
        m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "TagA || TagB")]), &origin());
        let sub = m.subscription("g", "t").unwrap();
        let a = ringmq_client::hash::tag_hash_code("TagA");
        let b = ringmq_client::hash::tag_hash_code("TagB");
        let c = ringmq_client::hash::tag_hash_code("TagC");
        assert!(sub.matches(a) && sub.matches(b) && !sub.matches(c));
        m.apply_heartbeat("c2", &heartbeat("c2", &[("g2", "t", "*")]), &origin());
        assert!(m.subscription("g2", "t").unwrap().matches(c));
    }
}
