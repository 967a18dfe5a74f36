//! Broker calls a consumer makes, as plain functions over a client instance: pull,
//! offsets (query, commit, min, max, by time), queue locks, group membership and
//! sending failed messages back (CONSUMER_SEND_MSG_BACK, and Java's orderly fallback
//! message to `%RETRY%<group>`). Both consumers and admin tools use these; nothing here
//! keeps state.
//!
//! Invariant: the broker of a queue is resolved from the instance's cached route (the
//! caller fetched it); a queue whose broker has no master address is `NoRoute`. A
//! message is sent back to the master of the broker that served it (its store host when
//! no route names that broker), within `retry::SEND_BACK_TIMEOUT_MS`.

use super::retry::{RetryMessage, CLIENT_INNER_PRODUCER_GROUP, SEND_BACK_TIMEOUT_MS};
use super::subscription::Subscription;
use crate::error::ClientError;
use crate::instance::ClientInstance;
use crate::message::{decode_messages, MessageExt};
use crate::msgid::now_ms;
use crate::producer::{DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS};
use crate::remoting::bodies::{ConsumerList, JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, UpdateConsumerOffsetRequestHeader,
};
use std::rc::Rc;
use std::time::Duration;

pub const PULL_FLAG_COMMIT_OFFSET: i32 = 0x1;
pub const PULL_FLAG_SUSPEND: i32 = 0x2;
pub const PULL_FLAG_SUBSCRIPTION: i32 = 0x4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    Found,
    NoNewMessage,
    /// Messages were there but none matched the filter; pull again from next offset.
    NoMatchedMessage,
    /// The offset is outside the queue: restart from `next_begin_offset`.
    OffsetIllegal,
}

#[derive(Debug, Clone)]
pub struct PullResult {
    pub status: PullStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    /// Only messages matching the subscription exactly (broker filters by hash).
    pub messages: Vec<MessageExt>,
}

/// One pull request's knobs.
#[derive(Debug, Clone)]
pub struct PullRequest<'a> {
    pub group: &'a str,
    pub queue: &'a MessageQueue,
    pub offset: i64,
    pub max_messages: i32,
    pub subscription: &'a Subscription,
    /// Offset to commit on the way (clustering), if any.
    pub commit_offset: Option<i64>,
    /// How long the broker may hold the pull when nothing is there (0: answer at once).
    pub suspend_ms: u64,
    /// Client-side wait, which must exceed `suspend_ms`.
    pub timeout: Duration,
}

/// Where a queue is read (pulls, offsets): the master, or a slave while the master is
/// gone (`ClientInstance::read_broker_addr`).
pub fn broker_addr(instance: &ClientInstance, queue: &MessageQueue) -> Result<String, ClientError> {
    instance.read_broker_addr(&queue.broker_name).ok_or_else(|| ClientError::NoRoute { topic: queue.topic.clone() })
}

fn ok_or_error(addr: &str, r: &RemotingCommand) -> Result<(), ClientError> {
    if r.code == rs::SUCCESS {
        Ok(())
    } else {
        Err(ClientError::from_response(addr, r.code, r.remark.as_deref()))
    }
}

pub async fn pull(instance: &Rc<ClientInstance>, req: &PullRequest<'_>) -> Result<PullResult, ClientError> {
    let addr = broker_addr(instance, req.queue)?;
    let mut sys_flag = PULL_FLAG_SUBSCRIPTION;
    if req.commit_offset.is_some() {
        sys_flag |= PULL_FLAG_COMMIT_OFFSET;
    }
    if req.suspend_ms > 0 {
        sys_flag |= PULL_FLAG_SUSPEND;
    }
    let header = PullMessageRequestHeader {
        consumer_group: req.group.to_string(),
        topic: req.queue.topic.clone(),
        queue_id: req.queue.queue_id,
        queue_offset: req.offset,
        max_msg_nums: req.max_messages,
        sys_flag,
        commit_offset: req.commit_offset.unwrap_or(0),
        suspend_timeout_millis: req.suspend_ms as i64,
        subscription: Some(req.subscription.expression.clone()),
        sub_version: req.subscription.version,
        expression_type: Some(req.subscription.expression_type.into()),
        max_msg_bytes: None,
    };
    let r = instance.invoke_with_timeout(&addr, RemotingCommand::request(rq::PULL_MESSAGE).with_header(&header), req.timeout).await?;
    let status = match r.code {
        rs::SUCCESS => PullStatus::Found,
        rs::PULL_NOT_FOUND => PullStatus::NoNewMessage,
        rs::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMessage,
        rs::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
        code => return Err(ClientError::from_response(&addr, code, r.remark.as_deref())),
    };
    let h: PullMessageResponseHeader = r.header()?;
    let mut messages = Vec::new();
    if status == PullStatus::Found {
        messages = decode_messages(&r.body, &req.queue.broker_name).map_err(|e| ClientError::Protocol(format!("pull body from {addr}: {e}")))?;
        if !req.subscription.is_all() {
            messages.retain(|m| req.subscription.matches(m.tags()));
        }
        // The queue as this client knows it, as Java's `processPullResult` sets it: a
        // broker in shard route mode stores records under its host queue id.
        for m in &mut messages {
            m.queue_id = req.queue.queue_id;
        }
    }
    Ok(PullResult { status, next_begin_offset: h.next_begin_offset, min_offset: h.min_offset, max_offset: h.max_offset, messages })
}

/// The group's committed offset, or None when it never committed on this queue.
pub async fn query_offset(instance: &Rc<ClientInstance>, group: &str, queue: &MessageQueue) -> Result<Option<i64>, ClientError> {
    let addr = broker_addr(instance, queue)?;
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_string(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        set_zero_if_not_found: Some(false),
    };
    let r = instance.invoke(&addr, RemotingCommand::request(rq::QUERY_CONSUMER_OFFSET).with_header(&header)).await?;
    if r.code == rs::QUERY_NOT_FOUND {
        return Ok(None);
    }
    ok_or_error(&addr, &r)?;
    Ok(Some(r.header::<OffsetResponseHeader>()?.offset))
}

pub async fn commit_offset(instance: &Rc<ClientInstance>, group: &str, queue: &MessageQueue, offset: i64) -> Result<(), ClientError> {
    let addr = broker_addr(instance, queue)?;
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_string(),
        topic: queue.topic.clone(),
        queue_id: queue.queue_id,
        commit_offset: offset,
    };
    let r = instance.invoke(&addr, RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET).with_header(&header)).await?;
    ok_or_error(&addr, &r)
}

async fn offset_call(instance: &Rc<ClientInstance>, queue: &MessageQueue, cmd: RemotingCommand) -> Result<i64, ClientError> {
    let addr = broker_addr(instance, queue)?;
    let r = instance.invoke(&addr, cmd).await?;
    ok_or_error(&addr, &r)?;
    Ok(r.header::<OffsetResponseHeader>()?.offset)
}

pub async fn max_offset(instance: &Rc<ClientInstance>, queue: &MessageQueue) -> Result<i64, ClientError> {
    let header = GetMaxOffsetRequestHeader { topic: queue.topic.clone(), queue_id: queue.queue_id, committed: true };
    offset_call(instance, queue, RemotingCommand::request(rq::GET_MAX_OFFSET).with_header(&header)).await
}

pub async fn min_offset(instance: &Rc<ClientInstance>, queue: &MessageQueue) -> Result<i64, ClientError> {
    let header = GetMinOffsetRequestHeader { topic: queue.topic.clone(), queue_id: queue.queue_id };
    offset_call(instance, queue, RemotingCommand::request(rq::GET_MIN_OFFSET).with_header(&header)).await
}

/// The offset of the first message stored at or after `timestamp_ms`.
pub async fn search_offset(instance: &Rc<ClientInstance>, queue: &MessageQueue, timestamp_ms: i64) -> Result<i64, ClientError> {
    let header = SearchOffsetRequestHeader { topic: queue.topic.clone(), queue_id: queue.queue_id, timestamp: timestamp_ms };
    offset_call(instance, queue, RemotingCommand::request(rq::SEARCH_OFFSET_BY_TIMESTAMP).with_header(&header)).await
}

/// Client ids of the group's members, as one broker sees them.
pub async fn consumer_ids(instance: &Rc<ClientInstance>, addr: &str, group: &str) -> Result<Vec<String>, ClientError> {
    let header = GetConsumerListByGroupRequestHeader { consumer_group: group.to_string() };
    let r = instance.invoke(addr, RemotingCommand::request(rq::GET_CONSUMER_LIST_BY_GROUP).with_header(&header)).await?;
    ok_or_error(addr, &r)?;
    Ok(ConsumerList::decode(&r.body)?.consumer_id_list)
}

/// Locks `queues` (all on the broker at `addr`) for this client; returns the ones locked.
pub async fn lock_queues(instance: &Rc<ClientInstance>, addr: &str, group: &str, queues: &[MessageQueue]) -> Result<Vec<MessageQueue>, ClientError> {
    let body = LockBatchRequestBody {
        client_id: instance.client_id.clone(),
        consumer_group: group.to_string(),
        mq_set: queues.to_vec(),
        only_this_broker: false,
    };
    let r = instance.invoke(addr, RemotingCommand::request(rq::LOCK_BATCH_MQ).with_body(body.encode())).await?;
    ok_or_error(addr, &r)?;
    Ok(LockBatchResponseBody::decode(&r.body)?.lock_ok_mq_set)
}

pub async fn unlock_queues(instance: &Rc<ClientInstance>, addr: &str, group: &str, queues: &[MessageQueue]) -> Result<(), ClientError> {
    let body = LockBatchRequestBody {
        client_id: instance.client_id.clone(),
        consumer_group: group.to_string(),
        mq_set: queues.to_vec(),
        only_this_broker: false,
    };
    let r = instance.invoke(addr, RemotingCommand::request(rq::UNLOCK_BATCH_MQ).with_body(body.encode())).await?;
    ok_or_error(addr, &r)
}

/// Where a group with no committed offset on `queue` starts, by policy.
pub async fn start_offset_by_policy(instance: &Rc<ClientInstance>, queue: &MessageQueue, from: super::ConsumeFrom) -> Result<i64, ClientError> {
    match from {
        super::ConsumeFrom::LastOffset => max_offset(instance, queue).await,
        super::ConsumeFrom::FirstOffset => min_offset(instance, queue).await,
        super::ConsumeFrom::Timestamp(ms) => search_offset(instance, queue, ms).await,
    }
}

/// CONSUMER_SEND_MSG_BACK for `msg` (the header from `retry::send_back_header`): Ok
/// once the broker stored the retry or dead-letter copy.
pub async fn send_message_back(instance: &Rc<ClientInstance>, msg: &MessageExt, header: &ConsumerSendMsgBackRequestHeader) -> Result<(), ClientError> {
    let addr = instance.broker_addr(&msg.broker_name).unwrap_or_else(|| msg.store_host.to_string());
    let cmd = RemotingCommand::request(rq::CONSUMER_SEND_MSG_BACK).with_header(header);
    let r = instance.invoke_with_timeout(&addr, cmd, Duration::from_millis(SEND_BACK_TIMEOUT_MS)).await?;
    ok_or_error(&addr, &r)
}

/// Sends Java's orderly fallback message (`retry::orderly_retry_message`) to the
/// group's retry topic, on a queue of the broker that served the original if it has
/// one, with the reconsume counts in the send header as Java's producer puts them.
pub async fn send_retry_message(instance: &Rc<ClientInstance>, retry: &RetryMessage) -> Result<(), ClientError> {
    let topic = &retry.message.topic;
    let route = instance.route(topic).await?;
    let queue = route
        .write_queues
        .iter()
        .find(|q| q.broker_name == retry.broker_name)
        .or(route.write_queues.first())
        .ok_or_else(|| ClientError::NoWritableQueue { topic: topic.clone() })?;
    let addr = route.master_addrs.get(&queue.broker_name).cloned().ok_or_else(|| ClientError::NoRoute { topic: topic.clone() })?;
    let properties = retry.message.properties.encode();
    let header = SendMessageRequestHeader {
        producer_group: CLIENT_INNER_PRODUCER_GROUP.into(),
        topic: topic.clone(),
        default_topic: DEFAULT_TOPIC.into(),
        default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
        queue_id: queue.queue_id,
        sys_flag: retry.sys_flag,
        born_timestamp: now_ms(),
        flag: retry.message.flag,
        properties: (!properties.is_empty()).then_some(properties),
        reconsume_times: Some(retry.reconsume_times),
        unit_mode: false,
        max_reconsume_times: Some(retry.max_reconsume_times),
        batch: false,
        broker_name: Some(queue.broker_name.clone()),
    };
    let cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2)
        .with_header(&SendMessageRequestHeaderV2::from(header))
        .with_body(retry.message.body.clone());
    let r = instance.invoke_with_timeout(&addr, cmd, Duration::from_millis(SEND_BACK_TIMEOUT_MS)).await?;
    ok_or_error(&addr, &r)
}
