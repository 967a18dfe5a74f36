//! Interop for issue 24 item 7: message traces of the unmodified crates.io
//! `rocketmq-client-rust` 1.0.0. Its 1.0 API turns tracing on through its
//! `ClientConfig::enable_trace` (Java's `enableMsgTrace`): the producer then starts its
//! `AsyncTraceDispatcher`, which sends Pub records to `RMQ_SYS_TRACE_TOPIC` once the
//! broker answers `TRACE_ON` other than `false`. Against a RingMQ NameServer and
//! broker ("broker-a", two shards, `traceTopicEnable`), the test checks that its trace
//! is stored in the trace topic, keyed by the message id (QUERY_MESSAGE by key, the
//! request `ringmq-admin queryMsgTraceById` makes), and that RingMQ's decoder
//! (`ringmq_client::trace`, the one `ringmq-admin` prints with) reads it as the Pub
//! record of that message: producer group, topic, tags, keys, store host, success.
//!
//! The client's dispatcher sends on its own schedule (a batch, or its 5 s interval), so
//! the test waits for the trace as a condition, bounded by [`WAIT`]; it never sleeps
//! for ordering. One header encoding (JSON) is run: the trace producer is an ordinary
//! producer of this client, whose encodings the other interop tests cover.

mod common_interop;

use common_interop::{bounded, client_runtime, raw_call, wait_until, BrokerPath, Cluster, QUEUES};
use ringmq_client::message::stored::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::QueryMessageRequestHeader;
use ringmq_client::trace::{self, TraceContext, TraceType};
use rocketmq_client_rust::{DefaultMQProducer, SendStatus};
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::SerializeType;
use std::net::SocketAddr;
use std::time::Duration;

/// Bound on any single wait for the cluster or the client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(40);
const TOPIC: &str = "InteropTraced";
const GROUP: &str = "interop-trace-pg";

/// QUERY_MESSAGE of the trace topic by `key` (every shard's index): each trace
/// message's body and born host.
fn trace_messages(broker: SocketAddr, key: &str) -> Vec<(String, String)> {
    let header = QueryMessageRequestHeader { topic: trace::TRACE_TOPIC_DEFAULT.into(), key: key.into(), max_num: 64, begin_timestamp: 0, end_timestamp: i64::MAX };
    let r = raw_call(broker, RemotingCommand::request(rq::QUERY_MESSAGE).with_header(&header));
    if r.code != rs::SUCCESS {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < r.body.len() {
        let v = StoredMessageView::parse_verified(&r.body[at..]).expect("a stored record");
        at += v.total_size();
        assert_eq!(v.topic().ok(), Some(trace::TRACE_TOPIC_DEFAULT));
        let body = std::str::from_utf8(v.body()).expect("trace text is UTF-8").to_string();
        out.push((body, v.born_host().ip().to_string()));
    }
    out
}

/// The records about `msg_id` in the trace messages keyed by it, with their born host.
fn traces_of(broker: SocketAddr, msg_id: &str) -> Vec<(TraceContext, String)> {
    let mut out = Vec::new();
    for (body, born_host) in trace_messages(broker, msg_id) {
        for ctx in trace::decode(&body).unwrap_or_else(|e| panic!("{e}: {body:?}")) {
            if ctx.beans.first().is_some_and(|b| b.msg_id == msg_id) {
                out.push((ctx, born_host.clone()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_client_rust_pub_trace_is_read_back() {
    let cluster = Cluster::start(BrokerPath::Direct, |c| {
        c.trace_topic_enable = true;
        common_interop::ignore_disk_watermarks(c);
    });
    cluster.create_routed_topic(TOPIC, QUEUES);
    wait_until("the trace topic is routed", || cluster.namesrv_routes(trace::TRACE_TOPIC_DEFAULT)).await;

    let mut config = rocketmq_client_rust::ClientConfig::default();
    config.enable_trace = true;
    let mut producer = DefaultMQProducer::builder(client_runtime("interop-trace", SerializeType::JSON))
        .client_config(config)
        .producer_group(GROUP)
        .name_server_addr(cluster.namesrv_addr())
        .send_msg_timeout(5_000)
        .build();
    bounded("producer start", producer.start()).await.expect("producer starts");
    let msg = Message::builder().topic(TOPIC).tags("TagT").keys(vec!["trace-key".to_string()]).body_slice(b"traced").build().expect("message");
    let r = bounded("send", producer.send_with_timeout(msg, 5_000)).await.expect("send").expect("a send result");
    assert_eq!(r.send_status, SendStatus::SendOk);
    let msg_id = r.msg_id.as_ref().map(|id| id.to_string()).expect("msgId");

    let broker = cluster.broker_addr();
    wait_until("the client's Pub trace is stored and found by the message id", || !traces_of(broker, &msg_id).is_empty()).await;
    bounded("producer shutdown", producer.shutdown()).await;

    let found = traces_of(broker, &msg_id);
    let (ctx, born_host) = found.iter().find(|(c, _)| c.trace_type == TraceType::Pub).expect("a Pub record");
    let b = &ctx.beans[0];
    assert_eq!((ctx.group_name.as_str(), ctx.region_id.as_str(), ctx.success), (GROUP, "DefaultRegion", true), "{ctx:?}");
    assert_eq!((b.topic.as_str(), b.tags.as_str(), b.keys.as_str(), b.body_length), (TOPIC, "TagT", "trace-key", 6), "{b:?}");
    assert_eq!(b.store_host, broker.to_string(), "the broker the message went to");
    assert_eq!(b.offset_msg_id, r.offset_msg_id.clone().expect("offsetMsgId"));
    assert_eq!(born_host, "127.0.0.1", "what queryMsgTraceById prints as #ClientHost");
    // Java's transKey: the message's keys find the trace too.
    assert!(trace_messages(broker, "trace-key").iter().any(|(body, _)| body.contains(&msg_id)));
}
