//! Consumer groups: who is in each group and what they subscribe to.
//!
//! Every shard keeps a full replica, fed by `ShardEvent::Heartbeat` / `ClientGone`
//! broadcasts from the shard holding each client's connection, so a pull on any shard
//! finds its group's subscription locally and GET_CONSUMER_LIST_BY_GROUP needs no hop.
//! Each shard notifies only the clients whose connections it holds.
//!
//! Invariants: bounded by `GROUPS_MAX` groups and `CLIENTS_MAX` clients (heartbeats past
//! them are refused); tag codes are computed here from `subString` (never trusted from
//! the client's `codeSet`, DESIGN.md §6).

use ringmq_client::remoting::heartbeat::{tag_codes, ConsumerData, HeartbeatData, MessageModel};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub const GROUPS_MAX: usize = 100_000;
pub const CLIENTS_MAX: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Subscription {
    pub sub_string: String,
    pub expression_type: String,
    /// Tag hash codes; empty means every tag (`*`).
    pub codes: Vec<i32>,
    pub sub_version: i64,
}

impl Subscription {
    pub fn matches(&self, tag_hash: i64) -> bool {
        self.codes.is_empty() || self.codes.iter().any(|&c| c as i64 == tag_hash)
    }
}

#[derive(Debug, Clone, Default)]
pub struct GroupInfo {
    pub members: BTreeSet<String>,
    pub subscriptions: BTreeMap<String, Subscription>,
    pub broadcasting: bool,
}

#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub conn_shard: usize,
    pub conn_id: u64,
    pub groups: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct ConsumerManager {
    groups: HashMap<String, GroupInfo>,
    clients: HashMap<String, ClientInfo>,
}

pub fn subscription_of(sub_string: &str, expression_type: &str, sub_version: i64) -> Subscription {
    let codes = if expression_type.eq_ignore_ascii_case("TAG") || expression_type.is_empty() { tag_codes(sub_string) } else { Vec::new() };
    Subscription { sub_string: sub_string.to_string(), expression_type: expression_type.to_string(), codes, sub_version }
}

impl ConsumerManager {
    /// Applies a heartbeat; returns the groups whose membership changed.
    pub fn apply_heartbeat(&mut self, client_id: &str, data: &HeartbeatData, conn_shard: usize, conn_id: u64) -> Vec<String> {
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
        self.clients.insert(client_id.to_string(), ClientInfo { conn_shard, conn_id, groups: now_groups });
        changed
    }

    /// Removes a client from every group; returns the groups that changed.
    pub fn remove_client(&mut self, client_id: &str) -> Vec<String> {
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

    fn check(steps: &[(&str, &[(&str, &str, &str)])], group: &str, members: &[&str]) {
        let mut m = ConsumerManager::default();
        for (client, groups) in steps {
            if groups.is_empty() {
                m.remove_client(client);
            } else {
                m.apply_heartbeat(client, &heartbeat(client, groups), 0, 1);
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

    #[test]
    fn changes_are_reported_once() {
        let mut m = ConsumerManager::default();
        assert_eq!(m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "*")]), 0, 1), vec!["g"]);
        assert!(m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "*")]), 0, 1).is_empty());
        assert_eq!(m.remove_client("c1"), vec!["g"]);
    }

    #[test]
    fn tag_codes_are_computed_from_the_expression_trimmed() {
        let mut m = ConsumerManager::default();
        m.apply_heartbeat("c1", &heartbeat("c1", &[("g", "t", "TagA || TagB")]), 0, 1);
        let sub = m.subscription("g", "t").unwrap();
        let a = ringmq_client::hash::tag_hash_code("TagA");
        let b = ringmq_client::hash::tag_hash_code("TagB");
        let c = ringmq_client::hash::tag_hash_code("TagC");
        assert!(sub.matches(a) && sub.matches(b) && !sub.matches(c));
        m.apply_heartbeat("c2", &heartbeat("c2", &[("g2", "t", "*")]), 0, 1);
        assert!(m.subscription("g2", "t").unwrap().matches(c));
    }
}
