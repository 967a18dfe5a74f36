//! PULL_MESSAGE and LITE_PULL_MESSAGE (the same request from a lite-pull consumer),
//! with long polling, and the per-queue offset requests, run on the queue's owner
//! shard, which also owns the consumer offsets of its queues.
//!
//! Invariants: a suspended pull is held at most `min(suspendTimeoutMillis,
//! pull_suspend_max_ms)`, or `min(suspendTimeoutMillis, shortPollingTimeMills)` with
//! `longPollingEnable` off (Apache's short polling; both read at each pull, so an
//! UPDATE_BROKER_CONFIG governs the next pull), and answered as soon as a message
//! arrives for its queue;
//! a pull response body is the stored records as they are (no re-encoding); at most
//! `PULL_BODY_BYTES_MAX` per response.
//! Invariant: a store error on a read path (pull, view, query, time search) is answered
//! SYSTEM_ERROR with the error's text (a device read error names file and offset) and
//! never stops the process: reads do not fail the store, and a consumer re-pulls, so
//! exiting would turn one bad sector into a crash loop. Write and sync failures stop
//! the process from the send path and the flusher instead.

use super::consumers::{is_tag_type, subscription_of, PropertySelector, Subscription};
use crate::filter::sql92::Sql92Filter;
use super::send::{decode_offset_msg_id, readable};
use super::{error_response, Shard};
use crate::store::engine::{GetResult, GetStatus, ShardId};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::rt::Runtime;
use std::rc::Rc;
use std::time::Duration;

pub use crate::config::{PULL_BODY_BYTES_MAX, PULL_MESSAGES_MAX};

const FLAG_COMMIT_OFFSET: i32 = 0x1;
const FLAG_SUSPEND: i32 = 0x2;
const FLAG_SUBSCRIPTION: i32 = 0x4;

/// How long a pull asking to be suspended for `requested_ms` is held at most: Apache
/// holds it `shortPollingTimeMills` when long polling is off; RingMQ never longer than
/// the client asked, nor than `pull_suspend_max_ms`.
fn suspend_bound_ms(requested_ms: i64, config: &crate::config::BrokerConfig) -> u64 {
    let bound = if config.long_polling_enable { config.pull_suspend_max_ms } else { config.short_polling_time_ms.min(config.pull_suspend_max_ms) };
    (requested_ms.max(0) as u64).min(bound)
}

fn ext<'a>(cmd: &'a RemotingCommand, key: &str) -> Result<&'a str, RemotingCommand> {
    cmd.ext(key).ok_or_else(|| error_response(cmd, rs::INVALID_PARAMETER, format!("missing header field {key}")))
}

fn ext_num<T: std::str::FromStr>(cmd: &RemotingCommand, key: &str) -> Result<T, RemotingCommand> {
    let raw = ext(cmd, key)?;
    raw.trim().parse().map_err(|_| error_response(cmd, rs::INVALID_PARAMETER, format!("header field {key} = {raw:?} is not a number")))
}

fn offset_response(cmd: &RemotingCommand, key: &str, value: i64) -> RemotingCommand {
    let mut r = cmd.create_response(rs::SUCCESS, None);
    r.ext_fields.insert(key.into(), value.to_string());
    r
}

/// Keeps the records whose properties the SQL92 filter selects. The offsets of the
/// others are consumed all the same (`next_offset` is unchanged), as Apache's filtered
/// get: a pull that found records but none selected answers PULL_RETRY_IMMEDIATELY
/// from the next offset. The cost is one properties scan per record read, and the
/// records read are bounded by the pull's message and byte bounds.
fn keep_matching(result: &mut GetResult, filter: &Sql92Filter) {
    if result.record_count == 0 {
        return;
    }
    // Compacted in place: the selected records move down over the others, no second
    // buffer.
    let records = &mut result.records;
    let (mut read, mut write, mut count) = (0, 0, 0);
    while read < records.len() {
        let Ok(view) = StoredMessageView::parse(&records[read..]) else {
            // The store verified these records; one that does not parse now is kept
            // with the rest unfiltered rather than dropped (its offset is consumed).
            records.copy_within(read.., write);
            write += records.len() - read;
            count += 1;
            break;
        };
        let size = view.total_size();
        let selected = filter.matches(&String::from_utf8_lossy(view.properties_bytes()));
        if selected {
            records.copy_within(read..read + size, write);
            write += size;
            count += 1;
        }
        read += size;
    }
    records.truncate(write);
    result.record_count = count;
    if count == 0 {
        result.status = GetStatus::NoMatchedMessage;
    }
}

/// Keeps at most `messages_max` records and `bytes_max` bytes of them (always the first
/// record, as Apache's `isTheBatchFull`); the next pull starts at the first record left
/// out. Returns whether any was.
fn cap_records(result: &mut GetResult, messages_max: usize, bytes_max: usize) -> bool {
    let (mut at, mut count) = (0, 0);
    while at < result.records.len() {
        let Ok(view) = StoredMessageView::parse(&result.records[at..]) else { return false };
        let size = view.total_size();
        if count > 0 && (count >= messages_max || at + size > bytes_max) {
            result.next_offset = view.queue_offset() as u64;
            result.records.truncate(at);
            result.record_count = count;
            return true;
        }
        at += size;
        count += 1;
    }
    false
}

impl<R: Runtime> Shard<R> {
    /// Java's checks of the pulling group, in its order: it exists (created first with
    /// `autoCreateSubscriptionGroup`), may consume (`consumeEnable`), and, for a pull
    /// without a subscription of its own, may consume by broadcast if its consumers do.
    async fn pull_group_allowed(self: &Rc<Self>, cmd: &RemotingCommand, group: &str, has_subscription: bool) -> Result<(), RemotingCommand> {
        let known = self.meta.groups.borrow().get(group).map(|g| (g.consume_enable, g.consume_broadcast_enable));
        let (consume_enable, broadcast_enable) = match known {
            Some(flags) => flags,
            None => match self.find_or_create_group(group).await {
                Ok(Some(g)) => (g.consume_enable, g.consume_broadcast_enable),
                Ok(None) => {
                    return Err(error_response(cmd, rs::SUBSCRIPTION_GROUP_NOT_EXIST, format!("subscription group [{group}] does not exist, create it first (autoCreateSubscriptionGroup is off)")));
                }
                Err((code, remark)) => return Err(error_response(cmd, code, format!("subscription group [{group}] could not be created: {remark}"))),
            },
        };
        if !consume_enable {
            return Err(error_response(cmd, rs::NO_PERMISSION, format!("subscription group no permission, {group}")));
        }
        if !has_subscription && !broadcast_enable && self.clients.consumers.borrow().online_group(group).is_some_and(|(info, _)| info.broadcasting) {
            return Err(error_response(cmd, rs::NO_PERMISSION, format!("the consumer group[{group}] can not consume by broadcast way")));
        }
        Ok(())
    }

    /// A non-TAG subscription is served only with `enablePropertyFilter` and only when
    /// it compiled; refused as Apache refuses it otherwise (`from_request`: the pull
    /// carried the expression; else it came with a heartbeat).
    fn property_filter_allowed(&self, cmd: &RemotingCommand, subscription: &Subscription, from_request: bool) -> Result<(), RemotingCommand> {
        if let PropertySelector::Refused(code, remark) = &subscription.properties {
            return Err(if from_request {
                error_response(cmd, *code, remark)
            } else {
                error_response(cmd, rs::FILTER_DATA_NOT_EXIST, format!("The broker's consumer filter data is not exist!Your expression may be wrong! ({remark})"))
            });
        }
        if !is_tag_type(&subscription.expression_type) && !self.config().enable_property_filter {
            return Err(error_response(cmd, rs::SYSTEM_ERROR, format!("The broker does not support consumer to filter message by {}", subscription.expression_type)));
        }
        Ok(())
    }

    pub(super) async fn handle_pull(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        if self.config().broker_permission & crate::config::PERM_READ == 0 {
            return error_response(cmd, rs::NO_PERMISSION, format!("the broker[{}] pulling message is forbidden", self.place.store_host.ip()));
        }
        let header = match cmd.header::<PullMessageRequestHeader>() {
            Ok(h) => h,
            Err(e) => return error_response(cmd, rs::INVALID_PARAMETER, format!("bad pull header: {e}")),
        };
        let has_subscription = header.sys_flag & FLAG_SUBSCRIPTION != 0;
        if let Err(refusal) = self.pull_group_allowed(cmd, &header.consumer_group, has_subscription).await {
            return refusal;
        }
        let Some(topic) = self.topic(&header.topic) else {
            return error_response(cmd, rs::TOPIC_NOT_EXIST, format!("topic[{}] not exist, apply first please!", header.topic));
        };
        if !readable(&topic) {
            return error_response(cmd, rs::NO_PERMISSION, format!("the topic[{}] pulling message is forbidden", topic.name));
        }
        if header.queue_id < 0 || header.queue_id as u32 >= topic.read_queue_nums {
            return error_response(
                cmd,
                rs::SYSTEM_ERROR,
                format!("queueId[{}] is illegal, topic {} has {} read queues", header.queue_id, topic.name, topic.read_queue_nums),
            );
        }
        if header.queue_offset < 0 {
            return error_response(cmd, rs::INVALID_PARAMETER, format!("queueOffset {} is negative", header.queue_offset));
        }
        let subscription: Subscription = match (&header.subscription, header.sys_flag & FLAG_SUBSCRIPTION != 0) {
            (Some(expr), true) => subscription_of(expr, header.expression_type.as_deref().unwrap_or("TAG"), header.sub_version),
            _ => match self.clients.consumers.borrow().subscription(&header.consumer_group, &header.topic) {
                Some(s) => s.clone(),
                // A consumer that pulls before its first heartbeat reached this shard,
                // or a pull consumer that never sends one: everything matches.
                None => subscription_of("*", "TAG", 0),
            },
        };
        if let Err(refusal) = self.property_filter_allowed(cmd, &subscription, header.sys_flag & FLAG_SUBSCRIPTION != 0) {
            return refusal;
        }
        if header.sys_flag & FLAG_COMMIT_OFFSET != 0 && header.commit_offset >= 0 {
            if let Err(e) = self.commit_client_offset(&header.consumer_group, &header.topic, header.queue_id, header.commit_offset as u64) {
                tracing::warn!(group = %header.consumer_group, error = %e, "consumer offset not committed");
            }
        }
        let config = self.config();
        let max_messages = (header.max_msg_nums.max(1) as usize).min(config.pull_hot_messages_max);
        let max_bytes = header.max_msg_bytes.map(|b| b.max(1) as usize).unwrap_or(PULL_BODY_BYTES_MAX).min(config.pull_hot_bytes_max);
        let cold_caps = (config.pull_cold_messages_max, config.pull_cold_bytes_max);
        let cold_capped = cold_caps.0 < max_messages || cold_caps.1 < max_bytes;
        drop(config);
        let suspend_ms = if header.sys_flag & FLAG_SUSPEND != 0 { suspend_bound_ms(header.suspend_timeout_millis, &self.config()) } else { 0 };
        let deadline_us = self.rt.monotonic_us() + suspend_ms * 1000;
        let offset = header.queue_offset as u64;
        loop {
            // Registered before looking, so an arrival in between is not missed. A pull
            // that cannot be suspended (a waiter bound is reached) is answered with what
            // it finds now.
            let arrival = if suspend_ms > 0 { self.waiters.wait(&header.topic, header.queue_id).ok() } else { None };
            let mut result = match self
                .store
                .get_messages(&header.topic, header.queue_id, offset, max_messages, max_bytes, &|h| subscription.matches(h))
                .await
            {
                Ok(r) => r,
                Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, e.to_string()),
            };
            self.stats.on_pull_lookup();
            if let PropertySelector::Sql92(filter) = &subscription.properties {
                keep_matching(&mut result, filter);
            }
            if cold_capped && self.read_was_cold(&result) {
                cap_records(&mut result, cold_caps.0, cold_caps.1);
            }
            if let Some(start) = result.prefetch_window.take() {
                // A catch-up reader's next window is read while this answer travels.
                let store = self.store.clone();
                self.rt.spawn(async move { store.prefetch_window(start).await });
            }
            let waiting = matches!(result.status, GetStatus::NoMessageInQueue | GetStatus::OffsetOverflowOne)
                && (result.status != GetStatus::NoMessageInQueue || offset == 0);
            let now_us = self.rt.monotonic_us();
            match arrival {
                Some(arrival) if waiting && now_us < deadline_us => {
                    // Every pass of this loop awaits either an arrival or the deadline:
                    // it never spins.
                    let remaining = Duration::from_micros(deadline_us - now_us);
                    if crate::rt::timeout(&self.rt, remaining, arrival).await.is_some() {
                        continue;
                    }
                    // Timed out: answer with what the last look found.
                }
                _ => {}
            }
            return self.pull_response(cmd, offset, result);
        }
    }

    fn pull_response(&self, cmd: &RemotingCommand, offset: u64, result: GetResult) -> RemotingCommand {
        let code = match result.status {
            GetStatus::Found => rs::SUCCESS,
            GetStatus::NoMatchedMessage => rs::PULL_RETRY_IMMEDIATELY,
            GetStatus::NoMessageInQueue if offset != 0 => rs::PULL_OFFSET_MOVED,
            GetStatus::NoMessageInQueue | GetStatus::OffsetOverflowOne | GetStatus::OffsetFoundNull => rs::PULL_NOT_FOUND,
            GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly => rs::PULL_OFFSET_MOVED,
        };
        if code == rs::SUCCESS {
            self.stats.on_pulled(cmd.ext("topic"), cmd.ext("consumerGroup"), result.record_count, result.records.len());
        }
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: self.suggest_which_broker_id(&result),
            next_begin_offset: result.next_offset as i64,
            min_offset: result.min_offset as i64,
            max_offset: result.max_offset as i64,
        };
        let mut response = cmd.create_response(code, None);
        response.ext_fields = header.to_ext();
        response.body = result.records.into();
        response
    }

    /// Whether a pull's first record lies further back than the hot tail
    /// (`tail_cache_bytes`): Apache's "in disk" (`isTheDiskFallBehind`), judged once per
    /// pull rather than per message.
    fn read_was_cold(&self, result: &GetResult) -> bool {
        let Ok(first) = StoredMessageView::parse(&result.records) else { return false };
        let behind_bytes = self.store.write_offset().saturating_sub(crate::store::engine::local_of(first.physical_offset() as u64));
        behind_bytes > self.config().store.tail_cache_bytes
    }

    /// RocketMQ's `suggestWhichBrokerId`: with `slaveReadEnable`, a consumer reading
    /// older than this shard's in-memory tail (`tail_cache_bytes` behind the log end:
    /// cold O_DIRECT reads) is sent to the slave (RocketMQ's default
    /// `whichBrokerWhenConsumeSlowly`, 1), one reading the hot tail to the master (0);
    /// without it, always the master.
    fn suggest_which_broker_id(&self, result: &GetResult) -> i64 {
        if !self.config().slave_read_enable {
            return 0;
        }
        let mut at = 0;
        let mut last_phys = None;
        while at < result.records.len() {
            let Ok(v) = ringmq_client::message::stored::StoredMessageView::parse(&result.records[at..]) else { break };
            last_phys = Some(v.physical_offset() as u64);
            at += v.total_size();
        }
        let Some(last) = last_phys else { return 0 };
        let behind_bytes = self.store.write_offset().saturating_sub(crate::store::engine::local_of(last));
        if behind_bytes > self.config().store.tail_cache_bytes {
            1
        } else {
            0
        }
    }

    pub(super) fn handle_query_consumer_offset(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let parsed = (|| Ok::<_, RemotingCommand>((ext(cmd, "consumerGroup")?, ext(cmd, "topic")?, ext_num::<i32>(cmd, "queueId")?)))();
        let (group, topic, queue_id) = match parsed {
            Ok(v) => v,
            Err(r) => return r,
        };
        if let Some(offset) = self.offsets.table.borrow().query(group, topic, queue_id) {
            return offset_response(cmd, "offset", offset as i64);
        }
        // As RocketMQ: a group that never committed starts at 0 while the queue's first
        // message is still there; otherwise the client decides (consumeFromWhere).
        let zero_ok = cmd.ext("setZeroIfNotFound").is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
        if zero_ok && self.store.min_offset(topic, queue_id) == 0 {
            return offset_response(cmd, "offset", 0);
        }
        error_response(cmd, rs::QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first")
    }

    pub(super) fn handle_update_consumer_offset(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let parsed = (|| {
            Ok::<_, RemotingCommand>((ext(cmd, "consumerGroup")?, ext(cmd, "topic")?, ext_num::<i32>(cmd, "queueId")?, ext_num::<i64>(cmd, "commitOffset")?))
        })();
        match parsed {
            Ok((_, _, _, offset)) if offset < 0 => error_response(cmd, rs::INVALID_PARAMETER, format!("commitOffset {offset} is negative")),
            Ok((group, topic, queue_id, offset)) => {
                match self.commit_client_offset(group, topic, queue_id, offset as u64) {
                    Ok(()) => cmd.create_response(rs::SUCCESS, None),
                    Err(e) => error_response(cmd, rs::INVALID_PARAMETER, e.to_string()),
                }
            }
            Err(r) => r,
        }
    }

    pub(super) fn handle_get_max_offset(&self, cmd: &RemotingCommand) -> RemotingCommand {
        match (ext(cmd, "topic"), ext_num::<i32>(cmd, "queueId")) {
            (Ok(topic), Ok(q)) => offset_response(cmd, "offset", self.store.max_offset(topic, q) as i64),
            (Err(r), _) | (_, Err(r)) => r,
        }
    }

    pub(super) fn handle_get_min_offset(&self, cmd: &RemotingCommand) -> RemotingCommand {
        match (ext(cmd, "topic"), ext_num::<i32>(cmd, "queueId")) {
            (Ok(topic), Ok(q)) => offset_response(cmd, "offset", self.store.min_offset(topic, q) as i64),
            (Err(r), _) | (_, Err(r)) => r,
        }
    }

    pub(super) async fn handle_earliest_store_time(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let (topic, q) = match (ext(cmd, "topic"), ext_num::<i32>(cmd, "queueId")) {
            (Ok(t), Ok(q)) => (t, q),
            (Err(r), _) | (_, Err(r)) => return r,
        };
        match self.store.earliest_store_time(topic, q).await {
            Ok(ts) => offset_response(cmd, "timestamp", ts.unwrap_or(-1)),
            Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e.to_string()),
        }
    }

    pub(super) async fn handle_search_offset(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let parsed = (|| Ok::<_, RemotingCommand>((ext(cmd, "topic")?, ext_num::<i32>(cmd, "queueId")?, ext_num::<i64>(cmd, "timestamp")?)))();
        let (topic, q, ts) = match parsed {
            Ok(v) => v,
            Err(r) => return r,
        };
        match self.store.search_offset_by_time(topic, q, ts).await {
            Ok(offset) => offset_response(cmd, "offset", offset as i64),
            Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e.to_string()),
        }
    }

    pub(super) async fn handle_view_message(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let offset = match ext_num::<u64>(cmd, "offset") {
            Ok(o) => o,
            Err(r) => return r,
        };
        if ShardId::of_phys(offset).0 as usize != self.place.id {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("no message at offset {offset}"));
        }
        match self.store.read_record(offset, None).await {
            Ok(Some(bytes)) => {
                let mut r = cmd.create_response(rs::SUCCESS, None);
                r.body = bytes.into();
                r
            }
            Ok(None) => error_response(cmd, rs::SYSTEM_ERROR, format!("no message at offset {offset}")),
            Err(e) => error_response(cmd, rs::SYSTEM_ERROR, e.to_string()),
        }
    }

    /// QUERY_MESSAGE by key: every shard's index is asked (keys are not routed), and
    /// the records found are concatenated, newest first per shard, up to maxNum.
    pub(super) async fn handle_query_message(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let parsed = (|| {
            Ok::<_, RemotingCommand>((
                ext(cmd, "topic")?.to_string(),
                ext(cmd, "key")?.to_string(),
                ext_num::<i32>(cmd, "maxNum")?,
                ext_num::<i64>(cmd, "beginTimestamp")?,
                ext_num::<i64>(cmd, "endTimestamp")?,
            ))
        })();
        let (topic, key, max_num, begin, end) = match parsed {
            Ok(v) => v,
            Err(r) => return r,
        };
        let max = (max_num.max(1) as usize).min(crate::store::index::QUERY_RESULTS_MAX);
        let mut body = Vec::new();
        let mut found = 0;
        // This shard, then the others over the mesh (as a scoped request).
        match self.store.query_by_key(&topic, &key, max, begin, end).await {
            Ok(records) => {
                for r in records {
                    body.extend_from_slice(&r);
                    found += 1;
                }
            }
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, e.to_string()),
        }
        if cmd.ext("ringmqLocalOnly").is_none() {
            for shard in (0..self.place.count).filter(|&s| s != self.place.id) {
                if found >= max {
                    break;
                }
                let mut scoped = cmd.clone();
                scoped.ext_fields.insert("ringmqLocalOnly".into(), "1".into());
                scoped.ext_fields.insert("maxNum".into(), (max - found).to_string());
                let r = self.mesh.call(shard, scoped).await;
                if r.code != rs::SUCCESS {
                    // A scoped query answers SUCCESS even when it finds nothing, so this
                    // is that shard's error (a read error names file and offset): pass it
                    // on as the local one would be, rather than answer with a partial set.
                    return error_response(cmd, r.code, r.remark.unwrap_or_default());
                }
                found += r.ext("ringmqCount").and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
                body.extend_from_slice(&r.body);
            }
        }
        if found == 0 && cmd.ext("ringmqLocalOnly").is_none() {
            return error_response(cmd, rs::QUERY_NOT_FOUND, format!("can not find message, maybe time range not correct: key {key}"));
        }
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.ext_fields.insert("indexLastUpdateTimestamp".into(), self.now_ms().to_string());
        r.ext_fields.insert("indexLastUpdatePhyoffset".into(), self.store.flushed_offset().to_string());
        r.ext_fields.insert("ringmqCount".into(), found.to_string());
        r.body = body.into();
        r
    }

    /// Resolves an offsetMsgId to this broker's shard, for admin tools.
    pub fn shard_of_msg_id(&self, id: &str) -> Option<usize> {
        let (_, phys) = decode_offset_msg_id(id)?;
        Some(ShardId::of_phys(phys).0 as usize).filter(|&s| s < self.place.count)
    }
}
