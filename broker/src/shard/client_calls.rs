//! Requests the broker sends to its clients and the admin codes built on them:
//! GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309), passed to one
//! consumer and its answer passed back (Java's `AdminBrokerProcessor.callConsumer`), and
//! INVOKE_BROKER_TO_RESET_OFFSET (222), which picks new offsets and pushes
//! RESET_CONSUMER_CLIENT_OFFSET (220) to every online client of the group
//! (`Broker2Client.resetOffset`), or answers CONSUMER_NOT_ONLINE so that mqadmin falls
//! back to committing the offsets itself. In shard route mode every shard-broker is a
//! broker of its own to mqadmin, which asks each of them: each resets and reports only
//! its own queues; in host mode the shard asked gathers every shard's queues.
//!
//! A client's connection lives on one shard (`ClientInfo::conn_shard`, replicated on
//! every shard by the heartbeats); a call for it is forwarded there whole, once. That
//! shard sends the request with an opaque of its own and waits for the response the
//! connection's reader hands back (`complete_client_call`).
//!
//! Invariants:
//! - at most `CLIENT_CALLS_IN_FLIGHT_MAX` calls wait per shard; each waits at most its
//!   timeout (`CLIENT_CALL_TIMEOUT_MS`, Java's `callClient`), and its slot is removed
//!   when it ends, however it ends;
//! - a connection that closes fails its waiting calls at once;
//! - a response nobody waits for (late, or forged) is dropped.

use super::admin::LOCAL_ONLY_EXT;
use super::{error_response, ConnCtx, Shard};
use crate::routing::queue_owner;
use crate::rt::chan;
use ringmq_client::remoting::admin::ResetOffsetBody;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// Calls to clients waiting for their answer, per shard.
pub const CLIENT_CALLS_IN_FLIGHT_MAX: usize = 1024;
/// How long a call to a client waits for its answer (Java's `Broker2Client.callClient`).
pub const CLIENT_CALL_TIMEOUT_MS: u64 = 10_000;
/// `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`: the first client that answers
/// GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY.
pub const VERSION_V3_1_8_SNAPSHOT: i32 = 62;
/// `MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()`: the first that takes an offset reset.
pub const VERSION_V3_0_7_SNAPSHOT: i32 = 28;

/// RESET_CONSUMER_CLIENT_OFFSET as Java's `Broker2Client` sends it: a whole
/// `ResetOffsetRequestHeader` (`queueId` -1, `isForce` present) and the offsets as the
/// body. rocketmq-client-rust 1.0 requires every `@CFNotNull` field of that header: a
/// push without `isForce` was dropped as malformed, so an online consumer never
/// rewound. (Java's broker sends `isForce` as its default, false; clients do not act
/// on it, and this one says what the operator asked.)
pub fn reset_push(topic: &str, group: &str, timestamp: i64, force: bool, body: &ResetOffsetBody) -> RemotingCommand {
    RemotingCommand::request(rq::RESET_CONSUMER_CLIENT_OFFSET)
        .with_ext("topic", topic.to_string())
        .with_ext("group", group.to_string())
        .with_ext("queueId", "-1")
        .with_ext("timestamp", timestamp.to_string())
        .with_ext("isForce", force.to_string())
        .with_body(body.encode())
        .oneway()
}

/// The calls one shard has sent to its connections and not yet seen answered.
#[derive(Default)]
pub struct ClientCalls {
    next_opaque: i32,
    waiting: HashMap<(u64, i32), chan::OneshotSender<RemotingCommand>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClientCallError {
    #[error("the client's connection is gone")]
    NotConnected,
    #[error("too many calls to clients in flight ({CLIENT_CALLS_IN_FLIGHT_MAX}) or the connection's write queue is full")]
    Busy,
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("the connection closed before the client answered")]
    Closed,
}

impl<R: crate::rt::Runtime> Shard<R> {
    /// Signs a request the broker itself sends (to a NameServer or to a client) with
    /// `innerClientAuthenticationCredentials`, as Apache 5's `BrokerOuterAPI` signs its
    /// calls: a NameServer or client that checks signatures sees the broker's account.
    /// Unset credentials leave the request as it is (they were checked valid at start-up
    /// and on every runtime change).
    pub(super) fn sign_as_broker(&self, cmd: &mut RemotingCommand) {
        if let Ok(Some(credentials)) = self.config().inner_credentials() {
            ringmq_client::remoting::acl::sign(cmd, &credentials);
        }
    }

    /// Sends `cmd` to connection `conn_id` of this shard and waits for its answer.
    pub async fn call_client(&self, conn_id: u64, mut cmd: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, ClientCallError> {
        let rx = {
            let mut calls = self.clients.calls.borrow_mut();
            if calls.waiting.len() >= CLIENT_CALLS_IN_FLIGHT_MAX {
                return Err(ClientCallError::Busy);
            }
            // Positive and distinct from every opaque still waiting on this shard.
            let opaque = loop {
                calls.next_opaque = calls.next_opaque.checked_add(1).unwrap_or(1);
                if !calls.waiting.contains_key(&(conn_id, calls.next_opaque)) {
                    break calls.next_opaque;
                }
            };
            cmd.opaque = opaque;
            cmd.flag &= !ringmq_client::remoting::command::FLAG_ONEWAY;
            self.sign_as_broker(&mut cmd);
            let sent = match self.clients.conns.borrow().get(&conn_id) {
                Some(tx) => tx.try_send(cmd).map_err(|_| ClientCallError::Busy),
                None => Err(ClientCallError::NotConnected),
            };
            sent?;
            let (tx, rx) = chan::oneshot();
            calls.waiting.insert((conn_id, opaque), tx);
            (rx, opaque)
        };
        let (rx, opaque) = rx;
        // Removes the slot however this future ends: answered, timed out, or dropped
        // (its request task abandoned) — nothing waits behind it.
        struct Slot<'a>(&'a std::cell::RefCell<ClientCalls>, (u64, i32));
        impl Drop for Slot<'_> {
            fn drop(&mut self) {
                self.0.borrow_mut().waiting.remove(&self.1);
            }
        }
        let _slot = Slot(&self.clients.calls, (conn_id, opaque));
        let answer = crate::rt::timeout(&self.rt, timeout, rx).await;
        match answer {
            Some(Some(response)) => Ok(response),
            Some(None) => Err(ClientCallError::Closed),
            None => Err(ClientCallError::Timeout(timeout.as_millis() as u64)),
        }
    }

    /// A response arrived on connection `conn_id`: it completes the call waiting for it.
    pub fn complete_client_call(&self, conn_id: u64, response: RemotingCommand) {
        let waiter = self.clients.calls.borrow_mut().waiting.remove(&(conn_id, response.opaque));
        match waiter {
            Some(tx) => tx.send(response),
            None => tracing::debug!(shard = self.place.id, conn_id, opaque = response.opaque, "response from a client that nobody waits for: dropped"),
        }
    }

    /// Connection `conn_id` closed: its waiting calls fail now.
    pub(super) fn fail_client_calls(&self, conn_id: u64) {
        self.clients.calls.borrow_mut().waiting.retain(|(c, _), _| *c != conn_id);
    }

    /// GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY: the request goes to the
    /// named consumer and its answer comes back as it is (Java's `callConsumer`).
    pub(super) async fn handle_call_consumer(self: &Rc<Self>, cmd: &RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        let (Some(group), Some(client_id)) = (cmd.ext("consumerGroup"), cmd.ext("clientId")) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field consumerGroup or clientId");
        };
        let not_online = || error_response(cmd, rs::SYSTEM_ERROR, format!("The Consumer <{group}> <{client_id}> not online"));
        let client = {
            let consumers = self.clients.consumers.borrow();
            consumers.online_group(group).and_then(|(_, clients)| clients.into_iter().find(|(id, _)| *id == client_id).map(|(_, c)| c.clone()))
        };
        let Some(client) = client else { return not_online() };
        if client.version < VERSION_V3_1_8_SNAPSHOT {
            return error_response(
                cmd,
                rs::SYSTEM_ERROR,
                format!("The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT", client.version),
            );
        }
        let forwarded = ctx.conn_id == ConnCtx::FORWARDED.conn_id;
        let mut request = RemotingCommand::request(cmd.code);
        request.ext_fields = cmd.ext_fields.clone();
        request.body = cmd.body.clone();
        if cmd.code == rq::CONSUME_MESSAGE_DIRECTLY && !forwarded {
            match self.consume_directly_request(cmd, group).await {
                Ok(r) => request = r,
                Err(r) => return r,
            }
        }
        if client.conn_shard != self.place.id {
            if forwarded || client.conn_shard >= self.place.count {
                // The replicas disagree on where the connection is: no ping-pong.
                return not_online();
            }
            self.stats.on_forwarded_out();
            let mut answer = self.mesh.call(client.conn_shard, request).await;
            answer.opaque = cmd.opaque;
            return answer;
        }
        match self.call_client(client.conn_id, request, Duration::from_millis(CLIENT_CALL_TIMEOUT_MS)).await {
            Ok(answer) => {
                let mut r = cmd.create_response(answer.code, answer.remark.as_deref());
                r.ext_fields = answer.ext_fields;
                r.body = answer.body;
                r
            }
            Err(ClientCallError::Timeout(ms)) => {
                error_response(cmd, rs::CONSUME_MSG_TIMEOUT, format!("consumer <{group}> <{client_id}> Timeout: no answer within {ms} ms"))
            }
            Err(e) => error_response(cmd, rs::SYSTEM_ERROR, format!("invoke consumer <{group}> <{client_id}> Exception: {e}")),
        }
    }

    /// CONSUME_MESSAGE_DIRECTLY as Java passes it on: the stored message (found by its
    /// offset message id, on the shard that holds it) as the body, `brokerName`,
    /// `topicSysFlag` and `groupSysFlag` in the header.
    async fn consume_directly_request(self: &Rc<Self>, cmd: &RemotingCommand, group: &str) -> Result<RemotingCommand, RemotingCommand> {
        let msg_id = cmd.ext("msgId").unwrap_or_default();
        let Some((_, offset)) = ringmq_client::msgid::decode_offset_msg_id(msg_id) else {
            return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("bad message id `{msg_id}`: not an offset message id")));
        };
        let view = RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", offset.to_string());
        let found = self.call_internal(view).await;
        if found.code != rs::SUCCESS {
            return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("message {msg_id} not found: {}", found.remark.unwrap_or_default())));
        }
        let mut request = RemotingCommand::request(rq::CONSUME_MESSAGE_DIRECTLY);
        request.ext_fields = cmd.ext_fields.clone();
        request.ext_fields.insert("brokerName".into(), self.client_broker_name());
        if let Some(t) = cmd.ext("topic").and_then(|t| self.topic(t)) {
            request.ext_fields.insert("topicSysFlag".into(), t.topic_sys_flag.to_string());
        }
        let ask = RemotingCommand::request(rq::GET_SUBSCRIPTIONGROUP_CONFIG).with_ext("group", group);
        let known = self.call_internal(ask).await;
        if known.code == rs::SUCCESS {
            let flag = serde_json::from_slice::<serde_json::Value>(&known.body).ok().and_then(|v| v.get("groupSysFlag")?.as_i64());
            request.ext_fields.insert("groupSysFlag".into(), flag.unwrap_or(0).to_string());
        }
        request.body = found.body;
        Ok(request)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET (`Broker2Client.resetOffset`): for every write queue
    /// the offset at `timestamp` (-1: the queue's end), taken when `isForce` or when it
    /// is before the group's offset; pushed to every online client of the group, which
    /// commits it. No client online: CONSUMER_NOT_ONLINE, and nothing changes. Host
    /// mode: every shard's queues (gathered); shard route mode: this shard-broker's only.
    pub(super) async fn handle_reset_offset(self: &Rc<Self>, cmd: &RemotingCommand, ctx: ConnCtx) -> RemotingCommand {
        let (Some(topic), Some(group)) = (cmd.ext("topic").map(str::trim), cmd.ext("group").map(str::trim)) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field topic or group");
        };
        let Ok(timestamp) = cmd.ext("timestamp").unwrap_or("-1").trim().parse::<i64>() else {
            return error_response(cmd, rs::INVALID_PARAMETER, "header field timestamp is not a number");
        };
        let force = cmd.ext("isForce").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        // Java 5's one-queue reset (queueId >= 0, with an offset or by time, applied by the
        // broker itself) is not built here: refused rather than resetting every queue.
        if cmd.ext("queueId").and_then(|q| q.trim().parse::<i32>().ok()).is_some_and(|q| q >= 0) {
            return error_response(
                cmd,
                rs::SYSTEM_ERROR,
                "resetting one queue (queueId >= 0) is not supported: reset the whole topic by time, or commit the queue's offset with UPDATE_CONSUMER_OFFSET",
            );
        }
        let Some(config) = self.topic(topic) else {
            return error_response(cmd, rs::TOPIC_NOT_EXIST, format!("[reset-offset] reset offset failed, no topic in this broker. topic={topic}"));
        };
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            return match self.local_reset_rows(topic, group, config.write_queue_nums as i32, timestamp, force).await {
                Ok(rows) => super::admin::json_response(cmd, serde_json::Value::Array(rows).to_string().into_bytes()),
                Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e),
            };
        }
        tracing::info!(caller = ?ctx.remote, topic, group, timestamp, force, "[reset-offset] reset offset started");
        let mut rows = match self.local_reset_rows(topic, group, config.write_queue_nums as i32, timestamp, force).await {
            Ok(rows) => rows,
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, e),
        };
        // Shard route mode: mqadmin sends this to every shard-broker of the route, and
        // each answers for (and tells the clients about) its own queues only.
        if self.route_mode() != crate::config::RouteMode::Shard {
            match self.gather(cmd, "1").await {
                Ok(others) => rows.extend(others.into_iter().filter_map(|v| v.as_array().cloned()).flatten()),
                Err(r) => return r,
            }
        }
        let mut body = ResetOffsetBody::default();
        for row in &rows {
            let (Some(queue_id), Some(offset)) = (row[0].as_i64(), row[1].as_i64()) else { continue };
            if row[2].as_bool() == Some(false) {
                return error_response(cmd, rs::SYSTEM_ERROR, format!("THe consumer group <{group}> not exist"));
            }
            body.offset_table.insert(self.client_queue(topic, queue_id as i32), offset);
        }
        let clients: Vec<(String, crate::shard::consumers::ClientInfo)> = {
            let consumers = self.clients.consumers.borrow();
            consumers.online_group(group).map(|(_, c)| c.into_iter().map(|(id, info)| (id.to_string(), info.clone())).collect()).unwrap_or_default()
        };
        if clients.is_empty() {
            let remark = format!("Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}");
            tracing::warn!("{remark}");
            return error_response(cmd, rs::CONSUMER_NOT_ONLINE, remark);
        }
        let push = reset_push(topic, group, timestamp, force, &body);
        for (client_id, info) in &clients {
            if info.version < VERSION_V3_0_7_SNAPSHOT {
                return error_response(cmd, rs::SYSTEM_ERROR, format!("the client does not support this feature. version={}", info.version));
            }
            let delivered = if info.conn_shard == self.place.id {
                self.push_local(info.conn_id, push.clone())
            } else if info.conn_shard < self.place.count {
                self.mesh.send_event(info.conn_shard, super::mesh::ShardEvent::Push { conn_id: info.conn_id, cmd: push.clone() });
                true
            } else {
                false
            };
            if delivered {
                tracing::info!(topic, group, client_id, "[reset-offset] reset offset pushed to the client");
            } else {
                tracing::warn!(topic, group, client_id, "[reset-offset] the client's connection is gone or full: not told");
            }
        }
        super::admin::json_response(cmd, body.encode())
    }

    /// This shard's write queues of `topic` as `[queueId, newOffset, groupHasOffset]`.
    async fn local_reset_rows(&self, topic: &str, group: &str, write_queues: i32, timestamp: i64, force: bool) -> Result<Vec<serde_json::Value>, String> {
        let mut rows = Vec::new();
        for q in (0..write_queues).filter(|&q| queue_owner(topic, q, self.place.count) == self.place.id) {
            let Some(committed) = self.offsets.table.borrow().query(group, topic, q) else {
                rows.push(serde_json::json!([q, 0, false]));
                continue;
            };
            let target = if timestamp == -1 {
                self.store.max_offset(topic, q)
            } else {
                match self.store.search_offset_by_time(topic, q, timestamp).await {
                    Ok(o) => o,
                    Err(e) => return Err(format!("offset of queue {q} at {timestamp} not found: {e}")),
                }
            };
            let offset = if force || target < committed { target } else { committed };
            rows.push(serde_json::json!([q, offset, true]));
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ordinals_match_java() {
        // MQVersion.Version: V3_0_0_SNAPSHOT is 0, one per release since.
        assert_eq!(VERSION_V3_0_7_SNAPSHOT, 28);
        assert_eq!(VERSION_V3_1_8_SNAPSHOT, 62);
    }
}
