//! The operations subcommands that act on consumer groups and read statistics:
//! resetOffsetByTime (INVOKE_BROKER_TO_RESET_OFFSET, and mqadmin's fallback when no
//! consumer is online), consumeMessage (reads a topic's queues between offsets or
//! times), statsAll (VIEW_BROKER_STATS_DATA per topic and group), consumerStatus
//! (GET_CONSUMER_RUNNING_INFO) and the consume-directly half of queryMsgById
//! (CONSUME_MESSAGE_DIRECTLY). Names, flags and layouts are mqadmin's.
//!
//! Times given as text (`-s`, `-e`) are `now`, milliseconds since the epoch, or
//! mqadmin's `yyyy-MM-dd#HH:mm:ss:SSS`, read as UTC (mqadmin reads the host's zone).

use crate::commands::{call, pull, render, table, Common, Outcome};
use clap::Subcommand;
use ringmq_client::instance::ClientInstance;
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::admin::{BrokerStatsData, ConsumeMessageDirectlyResult, ConsumeStats, ConsumerRunningInfo, ResetOffsetBody};
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use serde_json::{json, Value};
use std::rc::Rc;

/// Messages one consumeMessage pulls per request.
const CONSUME_PULL_BATCH: i32 = 32;

#[derive(Subcommand, Debug)]
#[allow(non_camel_case_types)]
#[command(rename_all = "verbatim")]
pub enum OpsCommand {
    /// Reset a consumer group's offsets of a topic to a time (online consumers are told;
    /// with none online the offsets are committed directly).
    resetOffsetByTime {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "group")]
        group: String,
        #[arg(short = 't', long = "topic")]
        topic: String,
        /// `now`, ms since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS`.
        #[arg(short = 's', long = "timestamp")]
        timestamp: String,
        /// Also move offsets forward (default true, as mqadmin).
        #[arg(short = 'f', long = "force", default_value_t = true, action = clap::ArgAction::Set)]
        force: bool,
        #[arg(short = 'c', long = "cluster")]
        cluster: Option<String>,
    },
    /// Print a topic's messages between offsets or times, per queue.
    consumeMessage {
        #[command(flatten)]
        common: Common,
        #[arg(short = 't', long = "topic")]
        topic: String,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: Option<String>,
        #[arg(short = 'i', long = "queueId")]
        queue_id: Option<i32>,
        /// First queue offset (with -b and -i).
        #[arg(short = 'o', long = "offset")]
        offset: Option<i64>,
        #[arg(short = 'g', long = "consumerGroup")]
        group: Option<String>,
        #[arg(short = 's', long = "beginTimestamp")]
        begin: Option<String>,
        #[arg(short = 'e', long = "endTimestamp")]
        end: Option<String>,
        /// At most this many messages in all.
        #[arg(short = 'c', long = "MessageNumber", default_value_t = 128)]
        count: usize,
    },
    /// Per topic and consumer group: backlog, TPS in and out, messages in and out over 24 h.
    statsAll {
        #[command(flatten)]
        common: Common,
        /// Only topics with traffic today.
        #[arg(short = 'a', long = "activeTopic", default_value_t = false)]
        active: bool,
        #[arg(short = 't', long = "topic")]
        topic: Option<String>,
    },
    /// A consumer's running state (its properties, subscriptions and queues), asked of the
    /// consumer through a broker.
    consumerStatus {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'g', long = "consumerGroup")]
        group: String,
        /// One client; without it every client of the group is listed.
        #[arg(short = 'i', long = "clientId")]
        client_id: Option<String>,
    },
}

impl OpsCommand {
    pub fn common(&self) -> &Common {
        match self {
            Self::resetOffsetByTime { common, .. } | Self::consumeMessage { common, .. } | Self::statsAll { common, .. } | Self::consumerStatus { common, .. } => common,
        }
    }
}

/// `now`, epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS` (UTC).
pub fn parse_time(text: &str, now_ms: i64) -> Result<i64, String> {
    let t = text.trim();
    if t == "now" {
        return Ok(now_ms);
    }
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || format!("bad time `{text}`: give now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS");
    let (date, time) = t.split_once('#').ok_or_else(bad)?;
    let d: Vec<i64> = date.split('-').map(|x| x.parse::<i64>()).collect::<Result<_, _>>().map_err(|_| bad())?;
    let c: Vec<i64> = time.split(':').map(|x| x.parse::<i64>()).collect::<Result<_, _>>().map_err(|_| bad())?;
    let ([y, mo, da], [h, mi, s, ms]) = (<[i64; 3]>::try_from(d).map_err(|_| bad())?, <[i64; 4]>::try_from(c).map_err(|_| bad())?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || s > 60 || ms > 999 || h.min(mi).min(s).min(ms) < 0 {
        return Err(bad());
    }
    Ok(days_from_civil(y, mo, da) * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub async fn run(instance: &Rc<ClientInstance>, json: bool, command: OpsCommand) -> Outcome {
    let now = ringmq_client::msgid::now_ms();
    match command {
        OpsCommand::resetOffsetByTime { group, topic, timestamp, force, .. } => {
            let ts = parse_time(&timestamp, now)?;
            reset_offset_by_time(instance, json, &group, &topic, &timestamp, ts, force).await
        }
        OpsCommand::consumeMessage { topic, broker_name, queue_id, offset, begin, end, count, .. } => {
            let begin = begin.map(|b| parse_time(&b, now)).transpose()?;
            let end = end.map(|e| parse_time(&e, now)).transpose()?;
            consume_message(instance, json, &topic, broker_name.as_deref(), queue_id, offset, begin, end, count).await
        }
        OpsCommand::statsAll { active, topic, .. } => stats_all(instance, json, active, topic.as_deref()).await,
        OpsCommand::consumerStatus { group, client_id, .. } => consumer_status(instance, json, &group, client_id.as_deref()).await,
    }
}

/// mqadmin's ResetOffsetByTimeCommand: INVOKE_BROKER_TO_RESET_OFFSET on every master of
/// the topic; when a broker answers CONSUMER_NOT_ONLINE, ResetOffsetByTimeOldCommand's
/// way (GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP, UPDATE_CONSUMER_OFFSET).
async fn reset_offset_by_time(instance: &Rc<ClientInstance>, json: bool, group: &str, topic: &str, text: &str, ts: i64, force: bool) -> Outcome {
    let route = instance.fetch_route(topic).await.map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    for (broker_name, addr) in &route.master_addrs {
        let cmd = RemotingCommand::request(rq::INVOKE_BROKER_TO_RESET_OFFSET)
            .with_ext("topic", topic)
            .with_ext("group", group)
            .with_ext("timestamp", ts.to_string())
            .with_ext("isForce", force.to_string());
        let r = instance.invoke(addr, cmd).await.map_err(|e| format!("{addr}: {e}"))?;
        if r.code == rs::CONSUMER_NOT_ONLINE {
            return reset_offline(instance, json, group, topic, text, ts, force).await;
        }
        if r.code != rs::SUCCESS {
            return Err(format!("{addr} ({broker_name}) answered code {}: {}", r.code, r.remark.unwrap_or_default()));
        }
        let body = ResetOffsetBody::decode(&r.body).map_err(|e| format!("{addr}: {e}"))?;
        for (mq, offset) in &body.offset_table {
            rows.push(format!("{:<40}  {:<40}  {:<40}\n", mq.broker_name, mq.queue_id, offset));
            docs.push(json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}));
        }
    }
    let mut out = format!("start reset consumer offset by specified, group[{group}], topic[{topic}], force[{force}], timestamp(string)[{text}], timestamp(long)[{ts}]\n");
    out += &format!("{:<40}  {:<40}  {:<40}\n", "#brokerName", "#queueId", "#offset");
    out += &rows.concat();
    render(json, json!({"online": true, "group": group, "topic": topic, "timestamp": ts, "offsets": docs}), out)
}

async fn reset_offline(instance: &Rc<ClientInstance>, json: bool, group: &str, topic: &str, text: &str, ts: i64, force: bool) -> Outcome {
    let route = instance.fetch_route(topic).await.map_err(|e| e.to_string())?;
    let mut out = format!("rollback consumer offset by specified group[{group}], topic[{topic}], force[{force}], timestamp(string)[{text}], timestamp(long)[{ts}]\n");
    out += &format!("{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}\n", "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset");
    let mut docs = Vec::new();
    for addr in route.master_addrs.values() {
        let stats = call(instance, addr, RemotingCommand::request(rq::GET_CONSUME_STATS).with_ext("consumerGroup", group).with_ext("topic", topic)).await?;
        let stats = ConsumeStats::decode(&stats.body).map_err(|e| format!("{addr}: {e}"))?;
        for (mq, o) in &stats.offset_table {
            let search = RemotingCommand::request(rq::SEARCH_OFFSET_BY_TIMESTAMP).with_ext("topic", topic).with_ext("queueId", mq.queue_id.to_string()).with_ext("timestamp", ts.to_string());
            let found = call(instance, addr, search).await?;
            let at: i64 = found.ext("offset").and_then(|v| v.parse().ok()).ok_or_else(|| format!("{addr}: search answer without offset"))?;
            let reset = if force || at < o.consumer_offset { at } else { o.consumer_offset };
            let update = RemotingCommand::request(rq::UPDATE_CONSUMER_OFFSET)
                .with_ext("consumerGroup", group)
                .with_ext("topic", topic)
                .with_ext("queueId", mq.queue_id.to_string())
                .with_ext("commitOffset", reset.to_string());
            call(instance, addr, update).await?;
            out += &format!("{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}\n", mq.broker_name, mq.queue_id, o.broker_offset, o.consumer_offset, at, reset);
            docs.push(json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset, "timestampOffset": at, "offset": reset}));
        }
    }
    render(json, json!({"online": false, "group": group, "topic": topic, "timestamp": ts, "offsets": docs}), out)
}

async fn offset_of(instance: &Rc<ClientInstance>, addr: &str, code: i32, topic: &str, queue_id: i32, ts: Option<i64>) -> Result<i64, String> {
    let mut cmd = RemotingCommand::request(code).with_ext("topic", topic).with_ext("queueId", queue_id.to_string());
    if let Some(ts) = ts {
        cmd = cmd.with_ext("timestamp", ts.to_string());
    }
    let r = call(instance, addr, cmd).await?;
    r.ext("offset").and_then(|v| v.parse().ok()).ok_or_else(|| format!("{addr}: answer without offset"))
}

/// mqadmin's ConsumeMessageCommand: per queue (of -b / -i when given) from -o, the
/// offset at -s, or the queue's start, to the offset at -e or the queue's end.
#[allow(clippy::too_many_arguments)]
async fn consume_message(
    instance: &Rc<ClientInstance>,
    json: bool,
    topic: &str,
    broker_name: Option<&str>,
    queue_id: Option<i32>,
    offset: Option<i64>,
    begin: Option<i64>,
    end: Option<i64>,
    count: usize,
) -> Outcome {
    let route = instance.fetch_route(topic).await.map_err(|e| e.to_string())?;
    let mut text = String::new();
    let mut docs = Vec::new();
    'queues: for q in &route.read_queues {
        if broker_name.is_some_and(|b| b != q.broker_name) || queue_id.is_some_and(|i| i != q.queue_id) {
            continue;
        }
        let Some(addr) = route.master_addrs.get(&q.broker_name) else { continue };
        let mut from = match (offset, begin) {
            (Some(o), _) => o,
            (None, Some(b)) => offset_of(instance, addr, rq::SEARCH_OFFSET_BY_TIMESTAMP, topic, q.queue_id, Some(b)).await?,
            (None, None) => offset_of(instance, addr, rq::GET_MIN_OFFSET, topic, q.queue_id, None).await?,
        };
        let to = match end {
            Some(e) => offset_of(instance, addr, rq::SEARCH_OFFSET_BY_TIMESTAMP, topic, q.queue_id, Some(e)).await?,
            None => offset_of(instance, addr, rq::GET_MAX_OFFSET, topic, q.queue_id, None).await?,
        };
        while from < to {
            let (records, next) = pull(instance, addr, topic, q.queue_id, from, CONSUME_PULL_BATCH).await?;
            if records.is_empty() {
                match next {
                    Some(n) if n > from => {
                        from = n;
                        continue;
                    }
                    _ => break,
                }
            }
            let mut at = 0usize;
            while at < records.len() {
                let v = StoredMessageView::parse_verified(&records[at..]).map_err(|e| e.to_string())?;
                at += v.total_size();
                from = v.queue_offset() + 1;
                if v.queue_offset() >= to {
                    break;
                }
                let id = ringmq_client::msgid::offset_msg_id(&v.store_host(), v.physical_offset() as u64);
                // What the producer sent: a compressed body is shown decompressed.
                let shown = crate::query::shown_body(&v);
                let body = String::from_utf8_lossy(&shown.bytes).into_owned();
                let warning = shown.error.as_ref().map(|e| format!(" (shown as stored: {e})")).unwrap_or_default();
                text += &format!("Consume ok\nMSGID: {id} QUEUE: {}/{} OFFSET: {} STORE TIME: {} BODY: {body}{warning}\n", q.broker_name, q.queue_id, v.queue_offset(), v.store_timestamp_ms());
                docs.push(json!({"msgId": id, "brokerName": q.broker_name, "queueId": q.queue_id, "queueOffset": v.queue_offset(), "storeTimestamp": v.store_timestamp_ms(), "body": body, "bodyError": shown.error}));
                if docs.len() >= count {
                    break 'queues;
                }
            }
        }
    }
    render(json, json!(docs), text)
}

/// mqadmin's StatsAllSubCommand.
async fn stats_all(instance: &Rc<ClientInstance>, json: bool, active_only: bool, only: Option<&str>) -> Outcome {
    let r = instance.invoke_namesrv(RemotingCommand::request(rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).await.map_err(|e| e.to_string())?;
    if r.code != rs::SUCCESS {
        return Err(format!("NameServer answered {}: {}", r.code, r.remark.unwrap_or_default()));
    }
    let v: Value = serde_json::from_slice(&r.body).map_err(|e| format!("topic list: {e}"))?;
    let mut topics: Vec<String> = v.get("topicList").and_then(Value::as_array).map(|a| a.iter().filter_map(|t| t.as_str().map(String::from)).collect()).unwrap_or_default();
    topics.sort();
    let mut out = format!("{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}\n", "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour");
    let mut docs = Vec::new();
    for topic in topics.iter().filter(|t| !t.starts_with("%RETRY%") && !t.starts_with("%DLQ%")) {
        if only.is_some_and(|o| o != topic) {
            continue;
        }
        let Ok(route) = instance.fetch_route(topic).await else { continue };
        let (mut in_tps, mut in_today) = (0.0, 0i64);
        for addr in route.master_addrs.values() {
            if let Some(s) = broker_stats(instance, addr, "TOPIC_PUT_NUMS", topic).await {
                in_tps += s.stats_minute.tps;
                in_today += sum_24h(&s);
            }
        }
        let mut groups: Vec<String> = Vec::new();
        for addr in route.master_addrs.values() {
            if let Ok(r) = call(instance, addr, RemotingCommand::request(rq::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", topic.clone())).await {
                if let Ok(g) = ringmq_client::remoting::admin::GroupList::decode(&r.body) {
                    groups.extend(g.group_list);
                }
            }
        }
        groups.sort();
        groups.dedup();
        if groups.is_empty() {
            if !active_only || in_today > 0 {
                out += &format!("{:<64}  {:<64} {:>12} {:>11.2} {:>11} {:>14} {:>14}\n", topic, "", 0, in_tps, "", in_today, "NO_CONSUMER");
                docs.push(json!({"topic": topic, "group": Value::Null, "accumulation": 0, "inTps": in_tps, "inMsg24Hour": in_today}));
            }
            continue;
        }
        for group in &groups {
            let (mut out_tps, mut out_today, mut backlog) = (0.0, 0i64, 0i64);
            for addr in route.master_addrs.values() {
                if let Some(s) = broker_stats(instance, addr, "GROUP_GET_NUMS", &format!("{topic}@{group}")).await {
                    out_tps += s.stats_minute.tps;
                    out_today += sum_24h(&s);
                }
                let cmd = RemotingCommand::request(rq::GET_CONSUME_STATS).with_ext("consumerGroup", group.clone()).with_ext("topic", topic.clone());
                if let Ok(r) = call(instance, addr, cmd).await {
                    if let Ok(c) = ConsumeStats::decode(&r.body) {
                        backlog += c.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum::<i64>();
                    }
                }
            }
            let backlog = backlog.max(0);
            if !active_only || in_today > 0 || out_today > 0 {
                out += &format!("{:<64}  {:<64} {:>12} {:>11.2} {:>11.2} {:>14} {:>14}\n", topic, group, backlog, in_tps, out_tps, in_today, out_today);
                docs.push(json!({"topic": topic, "group": group, "accumulation": backlog, "inTps": in_tps, "outTps": out_tps, "inMsg24Hour": in_today, "outMsg24Hour": out_today}));
            }
        }
    }
    render(json, json!(docs), out)
}

async fn broker_stats(instance: &Rc<ClientInstance>, addr: &str, name: &str, key: &str) -> Option<BrokerStatsData> {
    let cmd = RemotingCommand::request(rq::VIEW_BROKER_STATS_DATA).with_ext("statsName", name).with_ext("statsKey", key);
    let r = instance.invoke(addr, cmd).await.ok()?;
    (r.code == rs::SUCCESS).then(|| BrokerStatsData::decode(&r.body).ok()).flatten()
}

/// mqadmin's `compute24HourSum`: the day's sum, else the hour's, else the minute's.
fn sum_24h(s: &BrokerStatsData) -> i64 {
    [s.stats_day.sum, s.stats_hour.sum, s.stats_minute.sum].into_iter().find(|&v| v != 0).unwrap_or(0)
}

/// GET_CONSUMER_RUNNING_INFO of one client, through the first master that answers.
async fn running_info(instance: &Rc<ClientInstance>, masters: &[String], group: &str, client_id: &str) -> Result<ConsumerRunningInfo, String> {
    let mut last = String::from("no broker");
    for addr in masters {
        let cmd = RemotingCommand::request(rq::GET_CONSUMER_RUNNING_INFO).with_ext("consumerGroup", group).with_ext("clientId", client_id).with_ext("jstackEnable", "false");
        match call(instance, addr, cmd).await {
            Ok(r) => return ConsumerRunningInfo::decode(&r.body).map_err(|e| format!("{addr}: {e}")),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn all_masters(instance: &Rc<ClientInstance>) -> Result<Vec<String>, String> {
    let info = ringmq_client::admin::cluster_info(instance).await.map_err(|e| e.to_string())?;
    Ok(info.broker_addr_table.values().filter_map(|b| b.broker_addrs.get(&0).cloned()).collect())
}

/// mqadmin's ConsumerStatusSubCommand.
async fn consumer_status(instance: &Rc<ClientInstance>, json: bool, group: &str, client_id: Option<&str>) -> Outcome {
    let masters = all_masters(instance).await?;
    let ids: Vec<String> = match client_id {
        Some(c) => vec![c.to_string()],
        None => {
            let mut ids = Vec::new();
            for addr in &masters {
                if let Ok(r) = call(instance, addr, RemotingCommand::request(rq::GET_CONSUMER_CONNECTION_LIST).with_ext("consumerGroup", group)).await {
                    let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                    ids.extend(v.get("connectionSet").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c.get("clientId")?.as_str().map(String::from)));
                    break;
                }
            }
            if ids.is_empty() {
                return Err(format!("consumer group {group} has no client online"));
            }
            ids
        }
    };
    let mut text = String::new();
    let mut docs = Vec::new();
    let mut rows = Vec::new();
    for id in &ids {
        let info = running_info(instance, &masters, group, id).await?;
        if client_id.is_some() {
            text += "#Consumer Properties#\n";
            for (k, v) in &info.properties {
                text += &format!("{k:<40}: {v}\n");
            }
            text += "\n#Consumer Subscription#\n";
            for (i, s) in info.subscription_set.iter().enumerate() {
                text += &format!("{:03} Topic: {:<40} ClassFilter: {:<8} SubExpression: {}\n", i + 1, s.topic, s.class_filter_mode, s.sub_string);
            }
            text += "\n#Consumer Offset#\n";
            let q: Vec<Vec<String>> = info
                .mq_table
                .iter()
                .map(|(mq, p)| vec![mq.topic.clone(), mq.broker_name.clone(), mq.queue_id.to_string(), p.commit_offset.to_string(), p.cached_msg_count.to_string(), p.locked.to_string()])
                .collect();
            text += &table(&["#Topic", "#Broker Name", "#QID", "#Consumer Offset", "#Cached", "#Locked"], &q);
        } else {
            let prop = |k: &str| info.properties.get(k).cloned().unwrap_or_default();
            rows.push(vec![format!("{:03}", rows.len() + 1), id.clone(), prop("PROP_CLIENT_VERSION"), prop("messageModel"), info.mq_table.len().to_string()]);
        }
        let queues: Vec<Value> = info.mq_table.iter().map(|(mq, p)| json!({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "commitOffset": p.commit_offset, "cachedMsgCount": p.cached_msg_count, "locked": p.locked})).collect();
        let subs: Vec<Value> = info.subscription_set.iter().map(|s| json!({"topic": s.topic, "subString": s.sub_string})).collect();
        docs.push(json!({"clientId": id, "properties": info.properties, "subscriptions": subs, "queues": queues}));
    }
    if client_id.is_none() {
        text = table(&["#Index", "#ClientId", "#Version", "#MessageModel", "#Queues"], &rows);
    }
    render(json, json!(docs), text)
}

/// queryMsgById with -g and -d: CONSUME_MESSAGE_DIRECTLY of the message to one client of
/// the group, through the broker that stores it.
pub async fn consume_directly(instance: &Rc<ClientInstance>, json: bool, msg_id: &str, group: &str, client_id: &str) -> Outcome {
    let (host, _) = ringmq_client::msgid::decode_offset_msg_id(msg_id).ok_or_else(|| format!("{msg_id} is not an offset message id (host + CommitLog offset)"))?;
    let addr = host.to_string();
    let cmd = RemotingCommand::request(rq::CONSUME_MESSAGE_DIRECTLY).with_ext("consumerGroup", group).with_ext("clientId", client_id).with_ext("msgId", msg_id);
    let r = call(instance, &addr, cmd).await?;
    let d = ConsumeMessageDirectlyResult::decode(&r.body).map_err(|e| format!("{addr}: {e}"))?;
    let result = d.consume_result.map(|c| format!("{c:?}")).unwrap_or_else(|| "null".into());
    let text = format!(
        "ConsumeMessageDirectlyResult [order={}, autoCommit={}, consumeResult={result}, remark={}, spentTimeMills={}]\n",
        d.order,
        d.auto_commit,
        d.remark.as_deref().unwrap_or("null"),
        d.spent_time_mills
    );
    render(json, json!({"order": d.order, "autoCommit": d.auto_commit, "consumeResult": result, "remark": d.remark, "spentTimeMills": d.spent_time_mills}), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<i64, ()>) {
        assert_eq!(parse_time(input, 42).map_err(|_| ()), expected, "{input:?}");
    }

    #[test]
    fn times_as_mqadmin_takes_them() {
        check("now", Ok(42));
        check("1700000000000", Ok(1_700_000_000_000));
        check("1970-01-01#00:00:00:000", Ok(0));
        check("2026-12-02#01:02:03:004", Ok(1_796_173_323_004));
        check("2000-02-29#12:00:00:000", Ok(951_825_600_000));
        check("2026-13-01#00:00:00:000", Err(()));
        check("2026-12-02 01:02:03", Err(()));
        check("2026-12-02#01:02:03", Err(()));
        check("", Err(()));
    }
}
