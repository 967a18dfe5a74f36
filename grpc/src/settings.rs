//! Client settings (docs/design/pop-grpc.md §3.4): what each client id declared on its
//! Telemetry stream, the answer merged as Apache's `GrpcClientSettingsManager`, and the
//! HEART_BEAT / UNREGISTER_CLIENT requests that register it with the brokers
//! (`ClientActivity`: a producer is registered as the producer of each topic it
//! publishes, the topic naming the producer group, for transaction check-back).
//!
//! Invariants: at most `GRPC_CLIENTS_MAX` clients are held; one idle for
//! `GRPC_CLIENT_IDLE_MS` is dropped when room is needed; one Telemetry stream per client
//! id (a second replaces the first's sender).

use crate::metadata::ClientMeta;
use crate::pb::{self, ClientType, Code};
use crate::route::GroupView;
use crate::status::GrpcError;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::headers::UnregisterClientRequestHeader;
use ringmq_client::remoting::heartbeat::{ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData, SubscriptionData, EXPRESSION_TYPE_SQL92};
use ringmq_client::remoting::RemotingCommand;
use std::borrow::Cow;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// Most clients whose settings are held.
pub const GRPC_CLIENTS_MAX: usize = 65_536;
/// A client not heard from (RPC or Telemetry) for this long may be dropped.
pub const GRPC_CLIENT_IDLE_MS: i64 = 120_000;

/// Apache `ProxyConfig` defaults the answer carries.
pub const PRODUCER_MAX_ATTEMPTS: i32 = 3;
pub const PRODUCER_BACKOFF_INITIAL_MS: i64 = 10;
pub const PRODUCER_BACKOFF_MAX_MS: i64 = 1_000;
pub const PRODUCER_BACKOFF_MULTIPLIER: f32 = 2.0;
pub const CONSUMER_RECEIVE_BATCH_SIZE: i32 = 32;
pub const CONSUMER_LONG_POLLING_TIMEOUT_MS: i64 = 20_000;
/// Java's `CustomizedRetryPolicy` default: the delay levels from 3 on (1 s … 2 h).
pub const CUSTOMIZED_BACKOFF_DEFAULT_MS: [i64; 18] =
    [1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000];
/// Java's `ExponentialRetryPolicy` default.
pub const EXPONENTIAL_BACKOFF_DEFAULT: (i64, i64, f32) = (1_000, 7_200_000, 2.0);

/// The telemetry stream's sender half (the front end writes server commands into it).
pub type TelemetrySender = mpsc::Sender<Result<pb::TelemetryCommand, tonic::Status>>;

/// One client's registration.
#[derive(Debug, Clone)]
pub struct ClientEntry {
    /// As the client sent them.
    pub settings: pb::Settings,
    pub language: &'static str,
    pub last_seen_ms: i64,
    pub telemetry: Option<TelemetrySender>,
}

impl ClientEntry {
    pub fn client_type(&self) -> ClientType {
        ClientType::try_from(self.settings.client_type.unwrap_or(0)).unwrap_or(ClientType::Unspecified)
    }
}

/// The clients by id.
#[derive(Debug, Default)]
pub struct ClientTable {
    clients: HashMap<String, ClientEntry>,
}

impl ClientTable {
    /// Stores a client's settings (and its Telemetry sender, replacing an older one).
    pub fn upsert(&mut self, client_id: &str, settings: pb::Settings, language: &'static str, telemetry: Option<TelemetrySender>, now_ms: i64) -> Result<(), GrpcError> {
        if !self.clients.contains_key(client_id) && self.clients.len() >= GRPC_CLIENTS_MAX {
            self.clients.retain(|_, c| now_ms - c.last_seen_ms < GRPC_CLIENT_IDLE_MS);
            if self.clients.len() >= GRPC_CLIENTS_MAX {
                return Err(GrpcError::new(Code::TooManyRequests, format!("{GRPC_CLIENTS_MAX} clients are registered; try again later")));
            }
        }
        let entry = self.clients.entry(client_id.to_string()).or_insert_with(|| ClientEntry { settings: settings.clone(), language, last_seen_ms: now_ms, telemetry: None });
        entry.settings = settings;
        entry.language = language;
        entry.last_seen_ms = now_ms;
        if telemetry.is_some() {
            entry.telemetry = telemetry;
        }
        Ok(())
    }

    /// A client's entry, marking it seen.
    pub fn touch(&mut self, client_id: &str, now_ms: i64) -> Option<&ClientEntry> {
        let e = self.clients.get_mut(client_id)?;
        e.last_seen_ms = now_ms;
        Some(e)
    }

    pub fn remove(&mut self, client_id: &str) -> Option<ClientEntry> {
        self.clients.remove(client_id)
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

fn duration_ms(ms: i64) -> prost_types::Duration {
    prost_types::Duration { seconds: ms / 1000, nanos: ((ms % 1000) * 1_000_000) as i32 }
}

/// `mergeProducerData`: the front end's backoff, body limit and type check.
pub fn merge_producer(mut settings: pb::Settings, max_body_bytes: i32) -> pb::Settings {
    settings.backoff_policy = Some(pb::RetryPolicy {
        max_attempts: PRODUCER_MAX_ATTEMPTS,
        strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
            initial: Some(duration_ms(PRODUCER_BACKOFF_INITIAL_MS)),
            max: Some(duration_ms(PRODUCER_BACKOFF_MAX_MS)),
            multiplier: PRODUCER_BACKOFF_MULTIPLIER,
        })),
    });
    if let Some(pb::settings::PubSub::Publishing(p)) = &mut settings.pub_sub {
        p.validate_message_type = true;
        p.max_body_size = max_body_bytes;
    }
    settings
}

/// `mergeSubscriptionData`: batch size, long polling, FIFO and the group's retry policy
/// (`group` None: the group does not exist, settings unchanged but for the metric).
pub fn merge_consumer(mut settings: pb::Settings, group: Option<&GroupView>) -> pb::Settings {
    let Some(group) = group else { return settings };
    if let Some(pb::settings::PubSub::Subscription(s)) = &mut settings.pub_sub {
        s.receive_batch_size = Some(CONSUMER_RECEIVE_BATCH_SIZE);
        s.long_polling_timeout = Some(duration_ms(CONSUMER_LONG_POLLING_TIMEOUT_MS));
        s.fifo = Some(group.consume_message_orderly);
    }
    let policy = group.retry_policy.as_ref();
    let kind = policy.and_then(|p| p.get("type")).and_then(|t| t.as_str()).unwrap_or("CUSTOMIZED");
    let strategy = if kind == "EXPONENTIAL" {
        let e = policy.and_then(|p| p.get("exponentialRetryPolicy"));
        let num = |k: &str| e.and_then(|e| e.get(k)).and_then(|v| v.as_f64());
        let (initial, max, multiplier) = EXPONENTIAL_BACKOFF_DEFAULT;
        pb::retry_policy::Strategy::ExponentialBackoff(pb::ExponentialBackoff {
            initial: Some(duration_ms(num("initial").map(|v| v as i64).unwrap_or(initial))),
            max: Some(duration_ms(num("max").map(|v| v as i64).unwrap_or(max))),
            multiplier: num("multiplier").map(|v| v as f32).unwrap_or(multiplier),
        })
    } else {
        let next: Vec<i64> = policy
            .and_then(|p| p.get("customizedRetryPolicy"))
            .and_then(|c| c.get("next"))
            .and_then(|n| n.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
            .unwrap_or_else(|| CUSTOMIZED_BACKOFF_DEFAULT_MS.to_vec());
        pb::retry_policy::Strategy::CustomizedBackoff(pb::CustomizedBackoff { next: next.into_iter().map(duration_ms).collect() })
    };
    settings.backoff_policy = Some(pb::RetryPolicy { max_attempts: group.retry_max_times.saturating_add(1), strategy: Some(strategy) });
    settings
}

/// `mergeMetric` with the collector off (RingMQ exports its own metrics).
pub fn merge_metric(mut settings: pb::Settings) -> pb::Settings {
    settings.metric = Some(pb::Metric { on: false, endpoints: None });
    settings
}

/// The publishing topics of producer settings, namespaced.
pub fn publishing_topics(meta: &ClientMeta, settings: &pb::Settings) -> Vec<String> {
    match &settings.pub_sub {
        Some(pb::settings::PubSub::Publishing(p)) => p.topics.iter().map(|t| meta.resource_name(t)).collect(),
        _ => Vec::new(),
    }
}

fn command(code: i32, meta: &ClientMeta) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(code);
    cmd.language = Cow::Borrowed(meta.language);
    cmd
}

/// HEART_BEAT registering a producer of each topic (group = topic).
pub fn producer_heartbeat(meta: &ClientMeta, topics: &[String]) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: meta.client_id.clone(),
        consumer_data_set: Vec::new(),
        producer_data_set: topics.iter().map(|t| ProducerData { group_name: t.clone() }).collect(),
    };
    command(rq::HEART_BEAT, meta).with_body(data.encode())
}

/// HEART_BEAT registering a consumer of `group` with the settings' subscriptions
/// (`ClientActivity.registerConsumer`: CLUSTERING, CONSUME_FROM_LAST_OFFSET; simple
/// consumers CONSUME_ACTIVELY, push consumers CONSUME_PASSIVELY).
pub fn consumer_heartbeat(meta: &ClientMeta, group: &str, client_type: ClientType, subscriptions: &[pb::SubscriptionEntry], now_ms: i64) -> RemotingCommand {
    let subscription_data_set = subscriptions
        .iter()
        .map(|e| {
            let topic = meta.resource_name(e.topic.as_ref().unwrap_or(&pb::Resource::default()));
            let expr = e.expression.clone().unwrap_or_default();
            if expr.r#type == pb::FilterType::Sql as i32 {
                let mut s = SubscriptionData::new(&topic, &expr.expression, now_ms);
                s.expression_type = EXPRESSION_TYPE_SQL92.to_string();
                s.recompute_tags();
                s
            } else {
                SubscriptionData::new(&topic, &expr.expression, now_ms)
            }
        })
        .collect();
    let consume_type = if client_type == ClientType::PushConsumer { ConsumeType::ConsumePassively } else { ConsumeType::ConsumeActively };
    let data = HeartbeatData {
        client_id: meta.client_id.clone(),
        consumer_data_set: vec![ConsumerData {
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type,
            group_name: group.to_string(),
            message_model: MessageModel::Clustering,
            subscription_data_set,
            unit_mode: false,
        }],
        producer_data_set: Vec::new(),
    };
    command(rq::HEART_BEAT, meta).with_body(data.encode())
}

/// UNREGISTER_CLIENT of a producer group or a consumer group.
pub fn unregister(meta: &ClientMeta, producer_group: Option<&str>, consumer_group: Option<&str>) -> RemotingCommand {
    command(rq::UNREGISTER_CLIENT, meta).with_header(&UnregisterClientRequestHeader {
        client_id: meta.client_id.clone(),
        producer_group: producer_group.map(str::to_string),
        consumer_group: consumer_group.map(str::to_string),
    })
}

/// The subscription group of consumer settings, namespaced.
pub fn subscription_group(meta: &ClientMeta, settings: &pb::Settings) -> Option<String> {
    match &settings.pub_sub {
        Some(pb::settings::PubSub::Subscription(s)) => s.group.as_ref().map(|g| meta.resource_name(g)),
        _ => None,
    }
}

/// The subscription entries of consumer settings.
pub fn subscriptions(settings: &pb::Settings) -> &[pb::SubscriptionEntry] {
    match &settings.pub_sub {
        Some(pb::settings::PubSub::Subscription(s)) => &s.subscriptions,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer() -> pb::Settings {
        pb::Settings { client_type: Some(ClientType::SimpleConsumer as i32), pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription::default())), ..Default::default() }
    }

    /// `(max_attempts, backoff as (initial ms, max ms, multiplier) or the customized list's length)`.
    fn check(policy: Option<&str>, retry_max_times: i32, expected: (i32, Result<(i64, i64, f32), usize>)) {
        let group = GroupView { consume_message_orderly: false, retry_max_times, retry_policy: policy.map(|p| serde_json::from_str(p).unwrap()) };
        let merged = merge_consumer(consumer(), Some(&group));
        let b = merged.backoff_policy.unwrap();
        let ms = |d: &Option<prost_types::Duration>| d.as_ref().map_or(0, |d| d.seconds * 1000 + d.nanos as i64 / 1_000_000);
        let got = match b.strategy.unwrap() {
            pb::retry_policy::Strategy::ExponentialBackoff(e) => Ok((ms(&e.initial), ms(&e.max), e.multiplier)),
            pb::retry_policy::Strategy::CustomizedBackoff(c) => Err(c.next.len()),
        };
        assert_eq!((b.max_attempts, got), expected, "{policy:?}");
    }

    #[test]
    fn consumer_backoff_follows_the_group() {
        check(None, 16, (17, Err(18)));
        check(Some(r#"{"type":"CUSTOMIZED"}"#), 2, (3, Err(18)));
        check(Some(r#"{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,2000]}}"#), 2, (3, Err(2)));
        check(Some(r#"{"type":"EXPONENTIAL"}"#), 0, (1, Ok((1_000, 7_200_000, 2.0))));
        check(Some(r#"{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":500,"max":60000,"multiplier":3}}"#), 1, (2, Ok((500, 60_000, 3.0))));
        check(None, i32::MAX, (i32::MAX, Err(18)));
        // No group: unchanged.
        assert_eq!(merge_consumer(consumer(), None), consumer());
    }

    #[test]
    fn producer_merge() {
        let s = pb::Settings { pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing::default())), ..Default::default() };
        let m = merge_metric(merge_producer(s, 1234));
        let Some(pb::settings::PubSub::Publishing(p)) = &m.pub_sub else { panic!() };
        assert_eq!((p.max_body_size, p.validate_message_type), (1234, true));
        assert_eq!(m.backoff_policy.map(|b| b.max_attempts), Some(PRODUCER_MAX_ATTEMPTS));
        assert_eq!(m.metric.map(|x| x.on), Some(false));
    }

    #[test]
    fn client_table_is_bounded_and_drops_idle_clients() {
        let mut t = ClientTable::default();
        for i in 0..GRPC_CLIENTS_MAX {
            t.upsert(&i.to_string(), consumer(), "JAVA", None, 0).unwrap();
        }
        t.touch("0", GRPC_CLIENT_IDLE_MS);
        assert_eq!(t.upsert("new", consumer(), "JAVA", None, GRPC_CLIENT_IDLE_MS - 1).unwrap_err().code, Code::TooManyRequests);
        t.upsert("0", consumer(), "JAVA", None, GRPC_CLIENT_IDLE_MS).unwrap();
        t.upsert("new", consumer(), "JAVA", None, GRPC_CLIENT_IDLE_MS).unwrap();
        assert_eq!(t.len(), 2, "the idle ones went, the touched one stayed");
        assert!(t.remove("0").is_some() && t.remove("0").is_none());
    }
}
