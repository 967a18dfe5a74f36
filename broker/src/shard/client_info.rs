//! Client requests and the admin tools' questions about clients: HEART_BEAT,
//! UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, GET_PRODUCER_CONNECTION_LIST,
//! GET_CONSUMER_CONNECTION_LIST and QUERY_TOPIC_CONSUME_BY_WHO.
//!
//! Consumer connections and subscriptions need no hop to another shard: every shard
//! holds a full replica of group membership (`consumers.rs`), changed by heartbeats
//! broadcast over the mesh.

use ringmq_client::remoting::admin::GroupList;
use ringmq_client::remoting::bodies::{ConsumerList, JsonBody};
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::heartbeat::HeartbeatData;
use ringmq_client::remoting::heartbeat::{tags, MessageModel};
use std::rc::Rc;
use super::mesh::ShardEvent;
use super::admin::*;
use super::{error_response, ConnCtx, Shard};

impl<R: crate::rt::Runtime> Shard<R> {
    /// HEART_BEAT: answered once every shard has applied it, so a consumer list or pull
    /// asked right after, on any shard, sees the client.
    pub(super) async fn handle_heartbeat(self: &Rc<Self>, cmd: &RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        let data = match HeartbeatData::decode(&cmd.body) {
            Ok(d) => d,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad heartbeat body: {e}")),
        };
        if !data.consumer_data_set.is_empty() || !data.producer_data_set.is_empty() {
            let origin = super::consumers::HeartbeatOrigin {
                conn_shard: self.place.id,
                conn_id: ctx.conn_id,
                remote: ctx.remote,
                language: cmd.language.clone(),
                version: cmd.version,
                at_ms: self.now_ms(),
            };
            // As RocketMQ (`ClientManageProcessor.heartBeat`): the group is found, or
            // created with `autoCreateSubscriptionGroup`; a clustering group that exists
            // has its retry topic once its first heartbeat is answered (consumers
            // subscribe to it at once). A group that does not exist still registers its
            // consumers; its pulls are refused.
            for consumer in &data.consumer_data_set {
                let group = match self.find_or_create_group(&consumer.group_name).await {
                    Ok(group) => group,
                    Err((code, remark)) => return error_response(cmd, code, format!("subscription group {} could not be created: {remark}", consumer.group_name)),
                };
                if group.is_some() && consumer.message_model == ringmq_client::remoting::heartbeat::MessageModel::Clustering {
                    let retry = super::sendback::retry_topic(&consumer.group_name);
                    if let Err((code, remark)) = self.ensure_topic(&retry, super::sendback::RETRY_QUEUE_NUMS).await {
                        return error_response(cmd, code, format!("retry topic {retry} could not be created: {remark}"));
                    }
                }
            }
            let event = ShardEvent::Heartbeat { client_id: data.client_id.clone(), data, origin };
            self.apply_event(event.clone());
            self.mesh.broadcast_and_wait(event).await;
        }
        cmd.create_response(rs::SUCCESS, None)
    }

    /// GET_PRODUCER_CONNECTION_LIST: RocketMQ's `ProducerConnection` JSON for a group.
    pub(super) fn handle_producer_connections(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(group) = cmd.ext("producerGroup") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field producerGroup");
        };
        let conns = self.clients.consumers.borrow().producer_conns(group);
        if conns.is_empty() {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("the producer group[{group}] not exist"));
        }
        let set: Vec<serde_json::Value> = conns
            .iter()
            .map(|c| {
                serde_json::json!({
                    "clientId": c.client_id,
                    "clientAddr": c.remote.map(|a| a.to_string()).unwrap_or_default(),
                    "language": c.language,
                    "version": c.version,
                })
            })
            .collect();
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = serde_json::json!({ "connectionSet": set }).to_string().into_bytes().into();
        r
    }

    pub(super) async fn handle_unregister_client(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(client_id) = cmd.ext("clientID") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field clientID");
        };
        let event = ShardEvent::ClientGone { client_id: client_id.to_string() };
        self.apply_event(event.clone());
        self.mesh.broadcast_and_wait(event).await;
        cmd.create_response(rs::SUCCESS, None)
    }

    pub(super) fn handle_consumer_list(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let Some(group) = cmd.ext("consumerGroup") else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field consumerGroup");
        };
        let members = self.clients.consumers.borrow().members(group);
        if members.is_empty() {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("no consumer for this group, {group}"));
        }
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = ConsumerList { consumer_id_list: members }.encode().into();
        r
    }

    /// GET_CONSUMER_CONNECTION_LIST: RocketMQ's `ConsumerConnection` of a group, or
    /// CONSUMER_NOT_ONLINE.
    pub(super) fn handle_consumer_connections(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let group = match required(cmd, "consumerGroup") {
            Ok(g) => g,
            Err(r) => return r,
        };
        let consumers = self.clients.consumers.borrow();
        let Some((info, clients)) = consumers.online_group(group) else {
            return error_response(cmd, rs::CONSUMER_NOT_ONLINE, format!("the consumer group[{group}] not online"));
        };
        let set: Vec<serde_json::Value> = clients
            .iter()
            .map(|(id, c)| {
                serde_json::json!({
                    "clientAddr": c.remote.map(|a| a.to_string()).unwrap_or_default(),
                    "clientId": id,
                    "language": c.language,
                    "version": c.version,
                })
            })
            .collect();
        let subscriptions: serde_json::Map<String, serde_json::Value> = info
            .subscriptions
            .iter()
            .map(|(topic, s)| {
                let v = serde_json::json!({
                    "classFilterMode": false,
                    "codeSet": s.codes,
                    "expressionType": s.expression_type,
                    "subString": s.sub_string,
                    "subVersion": s.sub_version,
                    "tagsSet": tags(&s.sub_string),
                    "topic": topic,
                });
                (topic.clone(), v)
            })
            .collect();
        let model = if info.broadcasting { MessageModel::Broadcasting } else { MessageModel::Clustering };
        let body = serde_json::json!({
            "connectionSet": set,
            "consumeFromWhere": info.consume_from_where.java_name(),
            "consumeType": info.consume_type.java_name(),
            "messageModel": model.java_name(),
            "subscriptionTable": subscriptions,
        });
        json_response(cmd, body.to_string().into_bytes())
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO: groups with a live subscriber of the topic and
    /// groups with offsets of it (on any shard).
    pub(super) async fn handle_consume_by_who(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let topic = match required(cmd, "topic") {
            Ok(t) => t,
            Err(r) => return r,
        };
        let mut groups = self.offsets.table.borrow().groups_of_topic(topic);
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            return json_response(cmd, serde_json::json!(groups).to_string().into_bytes());
        }
        groups.extend(self.clients.consumers.borrow().groups_subscribing(topic));
        match self.gather(cmd, "1").await {
            Ok(others) => groups.extend(others.iter().filter_map(|v| v.as_array()).flatten().filter_map(|g| g.as_str().map(str::to_string))),
            Err(r) => return r,
        }
        json_response(cmd, GroupList { group_list: groups.into_iter().collect() }.encode())
    }

    /// CHECK_CLIENT_CONFIG (46): a push consumer asks at start whether this broker
    /// serves its subscription, answered as Apache's `checkClientConfig`: a TAG
    /// expression always; another type only with `enablePropertyFilter` (else
    /// SYSTEM_ERROR) and only if it compiles (else SUBSCRIPTION_PARSE_FAILED with why).
    pub(super) fn handle_check_client_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let body: serde_json::Value = match serde_json::from_slice(&cmd.body) {
            Ok(v) => v,
            Err(_) if cmd.body.is_empty() => serde_json::Value::Null,
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("bad CheckClientRequestBody: {e}")),
        };
        let Some(sub) = body.get("subscriptionData").filter(|s| !s.is_null()) else {
            return cmd.create_response(rs::SUCCESS, None);
        };
        let expression_type = sub.get("expressionType").and_then(|t| t.as_str()).unwrap_or("");
        if super::consumers::is_tag_type(expression_type) {
            return cmd.create_response(rs::SUCCESS, None);
        }
        if !self.config().enable_property_filter {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("The broker does not support consumer to filter message by {expression_type}"));
        }
        let sub_string = sub.get("subString").and_then(|t| t.as_str()).unwrap_or("");
        match super::consumers::subscription_of(sub_string, expression_type, 0).properties {
            super::consumers::PropertySelector::Refused(code, remark) => {
                tracing::warn!(client = ?body.get("clientId"), group = ?body.get("group"), expression = sub_string, error = %remark, "client's filter expression does not compile");
                error_response(cmd, code, remark)
            }
            _ => cmd.create_response(rs::SUCCESS, None),
        }
    }
}
