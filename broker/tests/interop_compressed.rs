//! Interop: compressed message bodies between the crates.io `rocketmq-client-rust`
//! (unmodified: it compresses bodies of at least 4 KiB by default, as Java does) and
//! the RingMQ client, through a RingMQ cluster (`common_interop`'s: our NameServer and
//! one 2-shard broker, in this process).
//!
//! Scenarios: (1) its producer sends large bodies with each of its three compression
//! types and a small one; the broker stores them as sent (compressed, `COMPRESSED_FLAG`
//! and the type in sysFlag, read back raw with VIEW_MESSAGE_BY_ID) and a RingMQ pull
//! consumer receives the original bytes, flag cleared. (2) The RingMQ producer
//! compresses a large body (zlib, Java's default; zstd and LZ4 when configured) and
//! not a small one nor a batch; the stored records say so, and both the RocketMQ
//! lite-pull consumer and the RingMQ consumer read the original bytes.
//!
//! Owns: these scenarios and their raw look at stored records (`stored_record`).
//! Every wait is bounded (`WAIT`); no fixed ports.

mod common_interop;

use bytes::Bytes;
use common_interop::{
    await_route, bounded, client_runtime, ignore_disk_watermarks, on_glommio, raw_call, start_lite_pull_from_start, start_producer, BrokerPath, Cluster, QUEUES,
};
use ringmq_client::message::compression::{CompressionType as RingCompression, COMPRESSED_FLAG, COMPRESSION_TYPE_MASK};
use ringmq_client::message::StoredMessageView;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use rocketmq_client_rust::DefaultMQProducer;
use rocketmq_model::common::compression::compression_type::CompressionType;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::SerializeType;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

/// Bound on any single wait for the cluster or a client (`common_interop` uses it too).
const WAIT: Duration = Duration::from_secs(20);

/// A body of `len` bytes that compresses well (as JSON or logs do), tagged by `seed`.
fn body(seed: &str, len: usize) -> Vec<u8> {
    format!("{seed}: {{\"order\":42,\"items\":[\"apple\",\"pear\"],\"note\":\"compressible\"}} ").into_bytes().into_iter().cycle().take(len).collect()
}

/// The stored record of offset message id `id`, raw (VIEW_MESSAGE_BY_ID at the host it
/// names): its sysFlag and the body as stored.
fn stored_record(id: &str) -> (i32, Vec<u8>) {
    let (host, offset) = ringmq_client::msgid::decode_offset_msg_id(id).unwrap_or_else(|| panic!("offset id {id}"));
    let r = raw_call(SocketAddr::from(([127, 0, 0, 1], host.port())), RemotingCommand::request(rq::VIEW_MESSAGE_BY_ID).with_ext("offset", offset.to_string()));
    assert_eq!(r.code, rs::SUCCESS, "view {id}: {:?}", r.remark);
    let v = StoredMessageView::parse_verified(&r.body).expect("a stored record");
    (v.sys_flag(), v.body().to_vec())
}

/// Reads every message of `topic` with a RingMQ pull consumer of `group` from the first
/// offset until `want` (body → expected sysFlag type bits) are all seen; asserts each
/// arrives as the producer's bytes with `COMPRESSED_FLAG` cleared.
fn ringmq_reads(namesrv: String, group: &'static str, topic: &'static str, want: HashMap<Vec<u8>, i32>) {
    on_glommio(move || async move {
        use ringmq_client::consumer::{ConsumeFrom, PullConsumer, PullConsumerConfig};
        let mut client = ringmq_client::ClientConfig::new([namesrv]);
        client.client_ip = Some("127.0.0.1".parse().expect("ip"));
        let mut pc = PullConsumerConfig::new(client, group);
        pc.consume_from = ConsumeFrom::FirstOffset;
        let consumer = PullConsumer::start(pc).await.expect("RingMQ pull consumer");
        let queues = consumer.fetch_queues(topic).await.expect("queues");
        consumer.assign(&queues, "*").await.expect("assign");
        let mut left = want;
        let deadline = Instant::now() + WAIT;
        while !left.is_empty() {
            assert!(Instant::now() < deadline, "RingMQ consumer still misses {} bodies", left.len());
            for m in consumer.poll(Duration::from_millis(300)).await.expect("poll") {
                let type_bits = left
                    .remove(&m.body[..])
                    .unwrap_or_else(|| panic!("unexpected or repeated body of {} bytes: {:?}", m.body.len(), &m.body[..m.body.len().min(64)]));
                assert!(!m.body_is_compressed(), "{}: delivered compressed", m.msg_id);
                assert_eq!(m.sys_flag & (COMPRESSION_TYPE_MASK | COMPRESSED_FLAG), type_bits, "{}: sysFlag {:#x}", m.msg_id, m.sys_flag);
            }
        }
        consumer.shutdown().await;
    });
}

/// rocketmq-client-rust's producers, unmodified, compress: zlib by default, LZ4 and
/// zstd when configured. A RingMQ consumer gets the original bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rocketmq_client_compressed_bodies_reach_ringmq_consumers() {
    let cluster = Cluster::start(BrokerPath::Direct, ignore_disk_watermarks);
    let topic = "InteropZipIn";
    cluster.create_routed_topic(topic, QUEUES);
    // body → the sysFlag bits a consumer should see (COMPRESSED_FLAG cleared).
    let mut want: HashMap<Vec<u8>, i32> = HashMap::new();
    // (group, compression type set or default, the type's sysFlag bits)
    let producers = [("PG-zip-default", None, 0x300), ("PG-zip-lz4", Some(CompressionType::LZ4), 0x100), ("PG-zip-zstd", Some(CompressionType::Zstd), 0x200)];
    for (group, codec, type_bits) in producers {
        let mut producer = match codec {
            None => start_producer(&cluster, SerializeType::JSON, "zip-producer", group.to_string(), topic).await,
            Some(codec) => {
                // Set before start: the started producer copies its compression settings.
                let mut p = DefaultMQProducer::builder(client_runtime("zip-producer", SerializeType::JSON))
                    .producer_group(group)
                    .name_server_addr(cluster.namesrv_addr())
                    .send_msg_timeout(5_000)
                    .compress_type(codec)
                    .build();
                bounded("producer start", p.start()).await.expect("producer starts");
                await_route(&mut p, topic).await;
                p
            }
        };
        for (len, compressed) in [(10 * 1024, true), (4096, true), (200, false)] {
            let original = body(group, len);
            let msg = Message::builder().topic(topic).body_slice(&original).build().expect("message");
            let r = bounded("send", producer.send_with_timeout(msg, 5_000)).await.expect("send").expect("a result");
            let (sys_flag, stored) = stored_record(r.offset_msg_id.as_deref().expect("offset msg id"));
            if compressed {
                assert_eq!(sys_flag & (COMPRESSION_TYPE_MASK | COMPRESSED_FLAG), type_bits | COMPRESSED_FLAG, "{group} {len}: stored as sent");
                assert!(stored.len() < len / 4, "{group} {len}: {} bytes stored", stored.len());
                want.insert(original, type_bits);
            } else {
                assert_eq!(sys_flag & (COMPRESSION_TYPE_MASK | COMPRESSED_FLAG), 0, "{group} {len}: small bodies are sent plain");
                assert_eq!(stored, original);
                want.insert(original, 0);
            }
        }
        producer.shutdown().await;
    }
    let namesrv = cluster.namesrv_addr();
    tokio::task::spawn_blocking(move || ringmq_reads(namesrv, "CG-zip-in", topic, want)).await.expect("RingMQ side");
}

/// Sends each case (group, type, body length, expected stored sysFlag type bits with
/// the flag) with a RingMQ producer of that group and checks the stored record; then,
/// with `batch`, a batch of two large bodies, which is never compressed. Returns (body,
/// stored type bits) in sending order.
fn ringmq_sends(
    namesrv: String,
    topic: &'static str,
    cases: Vec<(&'static str, RingCompression, usize, i32)>,
    batch: bool,
) -> Vec<(Vec<u8>, i32)> {
    on_glommio(move || async move {
        use ringmq_client::producer::{Producer, ProducerConfig};
        let mut client = ringmq_client::ClientConfig::new([namesrv]);
        client.client_ip = Some("127.0.0.1".parse().expect("ip"));
        let mut sent = Vec::new();
        for (group, codec, len, stored_bits) in cases {
            let mut config = ProducerConfig::new(client.clone(), group);
            config.compress_type = codec;
            let producer = Producer::start(config).await.expect("RingMQ producer");
            let original = body(&format!("{group}-{len}"), len);
            let r = producer
                .send(ringmq_client::Message::new(topic, original.clone()))
                .await
                .expect("send");
            let (sys_flag, stored) = stored_record(&r.offset_msg_id);
            assert_eq!(
                sys_flag & (COMPRESSION_TYPE_MASK | COMPRESSED_FLAG),
                stored_bits,
                "{group} {len}: sysFlag {sys_flag:#x}"
            );
            if stored_bits == 0 {
                assert_eq!(
                    stored, original,
                    "{group} {len}: under the threshold, sent plain"
                );
            } else {
                assert!(
                    stored.len() < len / 4,
                    "{group} {len}: {} bytes stored",
                    stored.len()
                );
            }
            sent.push((original, stored_bits & COMPRESSION_TYPE_MASK));
            producer.shutdown().await;
        }
        if batch {
            let producer = Producer::start(ProducerConfig::new(client, "PG-out-batch"))
                .await
                .expect("RingMQ producer");
            let bodies: Vec<Vec<u8>> = (0..2)
                .map(|i| body(&format!("batch-{i}"), 6 * 1024))
                .collect();
            let msgs = bodies
                .iter()
                .map(|b| ringmq_client::Message::new(topic, Bytes::from(b.clone())))
                .collect();
            let r = producer.send_batch(msgs).await.expect("batch send");
            for id in r.offset_msg_id.split(',') {
                let (sys_flag, stored) = stored_record(id);
                assert_eq!(
                    sys_flag & COMPRESSED_FLAG,
                    0,
                    "batch member {id} stored plain"
                );
                assert!(bodies.contains(&stored));
            }
            sent.extend(bodies.into_iter().map(|b| (b, 0)));
            producer.shutdown().await;
        }
        sent
    })
}

/// The RingMQ producer compresses a single body of at least 4 KiB (zlib level 5 by
/// default, the configured type otherwise), not a smaller one nor a batch. The RocketMQ
/// client's consumer (an independent decoder) and ours read the original bytes.
///
/// The LZ4 record is sent only after the RocketMQ consumer has read: rocketmq-client-rust
/// 1.0 reads only its own size-prefixed LZ4 blocks, not Java's frames, and its decoder
/// (as Java's `MessageDecoder.decodes`) stops a whole pull answer at the first record it
/// cannot decode, so whatever shared that queue after it would never reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ringmq_producer_compresses_bodies_both_clients_read() {
    let cluster = Cluster::start(BrokerPath::Direct, ignore_disk_watermarks);
    let topic = "InteropZipOut";
    cluster.create_routed_topic(topic, QUEUES);
    let namesrv = cluster.namesrv_addr();
    let ns = namesrv.clone();
    let cases = vec![
        ("PG-out-zlib", RingCompression::Zlib, 10 * 1024, 0x301),
        ("PG-out-zlib", RingCompression::Zlib, 4095, 0),
        ("PG-out-zstd", RingCompression::Zstd, 8 * 1024, 0x201),
    ];
    let mut sent = tokio::task::spawn_blocking(move || ringmq_sends(ns, topic, cases, true))
        .await
        .expect("RingMQ producer side");

    // The RocketMQ client's lite-pull consumer: every body, as sent.
    let (consumer, _) = start_lite_pull_from_start(
        namesrv.clone(),
        SerializeType::JSON,
        "zip-lite-pull",
        "CG-zip-rocketmq",
        topic,
    )
    .await;
    let mut left: Vec<&Vec<u8>> = sent.iter().map(|(b, _)| b).collect();
    let deadline = Instant::now() + WAIT;
    // Deliveries that match no body sent: (queue, offset, sysFlag, length, head).
    let mut other = Vec::new();
    while !left.is_empty() {
        assert!(
            Instant::now() < deadline,
            "RocketMQ consumer still misses {} bodies (lengths {:?}); other deliveries {other:?}",
            left.len(),
            left.iter().map(|b| b.len()).collect::<Vec<_>>()
        );
        for msg in consumer.poll_with_timeout(500).await {
            let got = msg.body().expect("a body").to_vec();
            match left.iter().position(|b| **b == got) {
                Some(i) => {
                    left.swap_remove(i);
                }
                None => other.push((
                    msg.queue_id,
                    msg.queue_offset,
                    msg.sys_flag,
                    got.len(),
                    String::from_utf8_lossy(&got[..got.len().min(24)]).into_owned(),
                )),
            }
        }
    }
    consumer.shutdown().await;

    // LZ4 frames as Java writes them, read back by RingMQ only (see above).
    let ns = namesrv.clone();
    let lz4 = vec![("PG-out-lz4", RingCompression::Lz4, 8 * 1024, 0x101)];
    sent.extend(
        tokio::task::spawn_blocking(move || ringmq_sends(ns, topic, lz4, false))
            .await
            .expect("RingMQ producer side"),
    );

    // The RingMQ consumer: every body, LZ4 frames included.
    let want: HashMap<Vec<u8>, i32> = sent.into_iter().collect();
    tokio::task::spawn_blocking(move || ringmq_reads(namesrv, "CG-zip-ringmq", topic, want))
        .await
        .expect("RingMQ side");
}
