//! Retries and dead letters (RocketMQ 4.9): `%RETRY%<group>` topics created when a
//! clustering group's heartbeat arrives, CONSUMER_SEND_MSG_BACK (36), and sends to a
//! retry topic past their reconsume limit redirected to `%DLQ%<group>`.
//!
//! A message sent back is looked up by its commit log offset on the shard that holds it
//! (the offset names the shard), and a copy is sent — through the owner of its new
//! queue, like any send — to `%RETRY%<group>` with `DELAY = 3 + reconsumeTimes` (or the
//! level asked for), `RETRY_TOPIC` (its first topic), `ORIGIN_MESSAGE_ID` (the first
//! message's offsetMsgId, kept across retries), and
//! reconsumeTimes + 1; once reconsumeTimes reaches the limit (or the level asked for is
//! negative) the copy goes to `%DLQ%<group>` instead, at once.
//!
//! Invariants: a send-back is answered SUCCESS only once the copy was stored (as a
//! send is); an offset with no message gets a clear error; retry and DLQ topics are
//! created through the one metadata writer like any topic.

use super::{error_response, ConnCtx, Shard};
use crate::rt::Runtime;
use crate::store::engine::ShardId;
use ringmq_client::message::properties::{keys, Properties};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::SendMessageRequestHeaderV2;
use std::rc::Rc;

pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";
/// RocketMQ's `maxReconsumeTimes` when neither the request nor the group says.
pub const MAX_RECONSUME_TIMES_DEFAULT: i32 = 16;
/// Queues of a dead-letter topic (RocketMQ's `DLQ_NUMS_PER_GROUP`).
pub const DLQ_QUEUE_NUMS: u32 = 1;
/// Queues of a retry topic (a group's default `retryQueueNums`).
pub const RETRY_QUEUE_NUMS: u32 = 1;
const PROPERTY_ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Private header field of the broker's own send-back copy: it is stored where the
/// send-back decided, not redirected again (a client's value is removed on arrival).
pub const SEND_BACK_EXT: &str = "ringmqSendBack";
/// Private header field of the broker's own creation of a group's retry topic: the
/// metadata owner then takes the group's `retryQueueNums` (stripped from clients).
pub const RETRY_OF_GROUP_EXT: &str = "ringmqRetryOfGroup";

pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}")
}

pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_TOPIC_PREFIX}{group}")
}

/// Where a message sent back goes: `(topic, delay level)`; no level for the DLQ.
pub fn send_back_target(group: &str, reconsume_times: i32, max_reconsume_times: i32, delay_level: i32) -> (String, Option<i32>) {
    if reconsume_times >= max_reconsume_times || delay_level < 0 {
        (dlq_topic(group), None)
    } else if delay_level == 0 {
        (retry_topic(group), Some(3 + reconsume_times))
    } else {
        (retry_topic(group), Some(delay_level))
    }
}

impl<R: Runtime> Shard<R> {
    /// Creates `name` (queue count `queues`, perm rw) through the metadata owner unless
    /// this shard's replica already has it.
    pub(super) async fn ensure_topic(self: &Rc<Self>, name: &str, queues: u32) -> Result<(), (i32, String)> {
        if self.topic(name).is_some() {
            return Ok(());
        }
        let mut create = RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC);
        if let Some(group) = name.strip_prefix(RETRY_TOPIC_PREFIX) {
            create = create.with_ext(RETRY_OF_GROUP_EXT, group);
        }
        if crate::meta::topics::BROKER_CREATED_SYSTEM_TOPICS.contains(&name) {
            create = create.with_ext(super::SYSTEM_TOPIC_EXT, "1");
        }
        let create = create
            .with_ext("topic", name)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("topicFilterType", "SINGLE_TAG")
            .with_ext("readQueueNums", queues.to_string())
            .with_ext("writeQueueNums", queues.to_string())
            .with_ext("perm", "6");
        match self.call_internal(create).await {
            r if r.code == rs::SUCCESS => Ok(()),
            r => Err((r.code, r.remark.unwrap_or_default())),
        }
    }

    /// A request made by the broker itself, run by the shard that owns it. Unlike
    /// `handle` (the entry for client requests) it keeps the private header fields the
    /// broker sets (`BORN_HOST_EXT`, `SEND_BACK_EXT`, `RETRY_OF_GROUP_EXT`).
    pub(super) async fn call_internal(self: &Rc<Self>, cmd: RemotingCommand) -> RemotingCommand {
        match self.route(&cmd) {
            Some(owner) if owner != self.place.id => {
                // Counted as a client request's forward is: the owner counts it in.
                self.stats.on_forwarded_out();
                self.mesh.call(owner, cmd).await
            }
            _ => Box::pin(self.handle_here(cmd, ConnCtx::FORWARDED)).await,
        }
    }

    /// CONSUMER_SEND_MSG_BACK, on the shard that holds `offset`.
    pub(super) async fn handle_send_back(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let num = |key: &str| cmd.ext(key).and_then(|v| v.trim().parse::<i64>().ok());
        let (Some(offset), Some(group)) = (num("offset"), cmd.ext("group").filter(|g| !g.is_empty())) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "CONSUMER_SEND_MSG_BACK needs header fields offset and group");
        };
        let delay_level = num("delayLevel").unwrap_or(0) as i32;
        // Java's `consumerSendMsgBack`: the group must exist (or be auto-created).
        let group_retry_max_times = match self.find_or_create_group(group).await {
            Ok(Some(g)) => g.retry_max_times as i32,
            Ok(None) => return error_response(cmd, rs::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group not exist, {group}")),
            Err((code, remark)) => return error_response(cmd, code, format!("subscription group {group} could not be created: {remark}")),
        };
        // The request's `maxReconsumeTimes` (clients from 3.4.9) wins over the group's
        // `retryMaxTimes`, as in Java.
        let max_reconsume = num("maxReconsumeTimes").map_or(group_retry_max_times, |m| m as i32);
        if offset < 0 || ShardId::of_phys(offset as u64).0 as usize != self.place.id {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("look message by offset failed, {offset}"));
        }
        let record = match self.store.read_record(offset as u64, None).await {
            Ok(Some(r)) => r,
            Ok(None) => return error_response(cmd, rs::SYSTEM_ERROR, format!("look message by offset failed, {offset}")),
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("look message by offset {offset} failed: {e}")),
        };
        let view = match StoredMessageView::parse(&record) {
            Ok(v) => v,
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("message at offset {offset} does not parse: {e}")),
        };
        let topic = view.topic().unwrap_or_default().to_string();
        let mut props = Properties::decode_str(&String::from_utf8_lossy(view.properties_bytes()));
        if props.get(keys::RETRY_TOPIC).is_none() {
            let _ = props.set(keys::RETRY_TOPIC, &topic);
        }
        // As RocketMQ 4.9: the first send-back names the message by its own offsetMsgId,
        // later ones keep that name (the request's `originMsgId` is not used), so every
        // retry copy and the dead letter name the original message.
        if props.get(PROPERTY_ORIGIN_MESSAGE_ID).is_none_or(|m| m.trim().is_empty()) {
            let _ = props.set(PROPERTY_ORIGIN_MESSAGE_ID, &super::send::offset_msg_id(&self.place.store_host, offset as u64));
        }
        let reconsume_times = view.reconsume_times();
        let (target, level) = send_back_target(group, reconsume_times, max_reconsume, delay_level);
        let queues = if target.starts_with(DLQ_TOPIC_PREFIX) { DLQ_QUEUE_NUMS } else { RETRY_QUEUE_NUMS };
        if let Err((code, remark)) = self.ensure_topic(&target, queues).await {
            return error_response(cmd, code, format!("topic {target} could not be created: {remark}"));
        }
        match level {
            Some(l) => {
                let _ = props.set(keys::DELAY, &l.to_string());
            }
            None => {
                props.remove(keys::DELAY);
            }
        }
        let queue_count = self.topic(&target).map(|t| t.write_queue_nums.max(1)).unwrap_or(1);
        let queue_id = (offset as u64 % queue_count as u64) as i32;
        let header = SendMessageRequestHeaderV2 {
            a: "CID_RMQ_SYS_SEND_BACK".into(),
            b: target.clone(),
            c: "TBW102".into(),
            d: queue_count as i32,
            e: queue_id,
            f: view.sys_flag(),
            g: view.born_timestamp_ms(),
            h: view.flag(),
            i: Some(props.encode()),
            j: Some(reconsume_times + 1),
            k: false,
            l: Some(max_reconsume),
            m: false,
            n: None,
        };
        let send = RemotingCommand::request(rq::SEND_MESSAGE_V2)
            .with_header(&header)
            .with_ext(super::BORN_HOST_EXT, view.born_host().to_string())
            .with_ext(SEND_BACK_EXT, "1")
            .with_body(view.body().to_vec());
        let r = self.call_internal(send).await;
        if r.code != rs::SUCCESS {
            return error_response(cmd, r.code, format!("send back to {target} failed: {}", r.remark.unwrap_or_default()));
        }
        tracing::debug!(group, offset, %target, reconsume_times = reconsume_times + 1, "message sent back");
        cmd.create_response(rs::SUCCESS, None)
    }

    /// A send to `%RETRY%<group>` whose reconsumeTimes reached its limit (header field
    /// `maxReconsumeTimes`, else 16) goes to `%DLQ%<group>` instead (RocketMQ's
    /// `handleRetryAndDLQ`): the send as it would be redirected, if it must be.
    pub(super) async fn redirect_to_dlq(self: &Rc<Self>, cmd: &RemotingCommand, topic: &str, reconsume_times: i32, max: Option<i32>) -> Option<RemotingCommand> {
        let group = topic.strip_prefix(RETRY_TOPIC_PREFIX)?;
        if reconsume_times < max.unwrap_or(MAX_RECONSUME_TIMES_DEFAULT) {
            return None;
        }
        let dlq = dlq_topic(group);
        if let Err((code, remark)) = self.ensure_topic(&dlq, DLQ_QUEUE_NUMS).await {
            return Some(error_response(cmd, code, format!("topic {dlq} could not be created: {remark}")));
        }
        let mut redirected = cmd.clone();
        for (key, value) in [("b", dlq.clone()), ("topic", dlq), ("e", "0".into()), ("queueId", "0".into())] {
            if redirected.ext_fields.contains_key(key) {
                redirected.ext_fields.insert(key.into(), value);
            }
        }
        for key in ["i", "properties"] {
            if let Some(p) = redirected.ext_fields.get(key).map(str::to_string) {
                let mut props = Properties::decode_str(&p);
                props.remove(keys::DELAY);
                redirected.ext_fields.insert(key.into(), props.encode());
            }
        }
        Some(self.call_internal(redirected).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (reconsume times, max, delay level asked) -> (topic, level).
    fn check(input: (i32, i32, i32), expected: (&str, Option<i32>)) {
        let (topic, level) = send_back_target("G", input.0, input.1, input.2);
        assert_eq!((topic.as_str(), level), expected, "{input:?}");
    }

    #[test]
    fn send_back_targets_follow_rocketmq() {
        check((0, 16, 0), ("%RETRY%G", Some(3)));
        check((5, 16, 0), ("%RETRY%G", Some(8)));
        check((5, 16, 2), ("%RETRY%G", Some(2)));
        check((16, 16, 0), ("%DLQ%G", None));
        check((20, 16, 3), ("%DLQ%G", None));
        check((0, 16, -1), ("%DLQ%G", None));
        check((0, 0, 0), ("%DLQ%G", None));
    }
}
