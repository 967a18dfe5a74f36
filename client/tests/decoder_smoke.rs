//! The short decoder fuzz run that CI can afford on a stable toolchain: every decoder the
//! cargo-fuzz targets in `client/fuzz/` cover (frame + command, JSON header, binary
//! header, batch body, heartbeat, route bodies, stored message / pull body) is fed
//! seeded random inputs and mutations (bit flips, byte inserts and deletes, spliced
//! slices, hostile length words) of valid encodings. It must return, never panic.
//! Coverage-guided runs: `scripts/fuzz.sh` (nightly + cargo-fuzz).
//!
//! `RINGMQ_SEED` replays a run; `RINGMQ_FUZZ_ITERS` sets the iterations per decoder.

use bytes::{Bytes, BytesMut};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ringmq_client::message::stored::{record_head, StoredMessage, MAGIC_MESSAGE};
use ringmq_client::message::{decode_messages, Properties, StoredMessageView};
use ringmq_client::remoting::batch::{self, BatchMessage};
use ringmq_client::remoting::command::{decode_binary_header, decode_json_header, encode_binary_header, encode_json_header};
use ringmq_client::remoting::frame::{self, FrameLimits, SerializeType};
use ringmq_client::remoting::heartbeat::{tag_codes, ConsumerData, HeartbeatData, SubscriptionData};
use ringmq_client::remoting::route::{BrokerData, ClusterInfo, QueueData, RegisterBrokerBody, TopicRouteData};
use ringmq_client::remoting::RemotingCommand;
use std::collections::BTreeMap;

fn seed() -> u64 {
    std::env::var("RINGMQ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| std::process::id() as u64 * 0x9E37_79B9 + 17)
}

fn iterations() -> usize {
    std::env::var("RINGMQ_FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(50_000)
}

fn mutate(rng: &mut ChaCha8Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        match rng.gen_range(0..6) {
            0 if !out.is_empty() => {
                let i = rng.gen_range(0..out.len());
                out[i] ^= 1 << rng.gen_range(0..8);
            }
            1 => {
                let i = rng.gen_range(0..=out.len());
                out.insert(i, rng.gen());
            }
            2 if !out.is_empty() => {
                let i = rng.gen_range(0..out.len());
                let n = rng.gen_range(1..=(out.len() - i).min(16));
                out.drain(i..i + n);
            }
            3 if out.len() >= 4 => {
                // A hostile 32-bit length word anywhere.
                let i = rng.gen_range(0..=out.len() - 4);
                let v: u32 = [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x00FF_FFFF, rng.gen()][rng.gen_range(0..7)];
                out[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            4 if !pool.is_empty() => {
                let other = &pool[rng.gen_range(0..pool.len())];
                let at = rng.gen_range(0..=out.len());
                let from = rng.gen_range(0..=other.len());
                out.splice(at..at, other[from..].iter().copied().take(64));
            }
            _ => out.truncate(rng.gen_range(0..=out.len())),
        }
    }
    out
}

/// Feeds `decoder` random bytes and mutations of `valid` inputs.
fn run(name: &str, valid: Vec<Vec<u8>>, decoder: impl Fn(&[u8])) {
    let seed = seed();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ name.len() as u64);
    for v in &valid {
        decoder(v);
    }
    for i in 0..iterations() {
        let input = if i % 4 == 0 || valid.is_empty() {
            let mut b = vec![0u8; rng.gen_range(0..512)];
            rng.fill_bytes(&mut b);
            b
        } else {
            let base = &valid[rng.gen_range(0..valid.len())];
            mutate(&mut rng, base, &valid)
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder(&input)));
        assert!(result.is_ok(), "{name} panicked on input {input:02x?} (seed {seed}: replay with RINGMQ_SEED={seed})");
    }
}

fn commands() -> Vec<RemotingCommand> {
    let mut send = RemotingCommand::request(310).with_ext("a", "PG").with_ext("b", "Topic").with_ext("e", "3").with_body(b"hello".to_vec());
    send.remark = Some("remark".into());
    vec![send, RemotingCommand::request(34).with_body(b"{}".to_vec()), RemotingCommand::request(11).with_ext("consumerGroup", "G").with_ext("queueOffset", "5")]
}

#[test]
fn frames_and_commands() {
    let mut valid = Vec::new();
    for c in commands() {
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let mut out = BytesMut::new();
            c.clone().with_serialize_type(st).encode(&mut out).expect("encodes");
            valid.push(out.to_vec());
        }
    }
    run("frame", valid, |data| {
        let limits = FrameLimits { frame_len_max_bytes: 1 << 16, body_len_max_bytes: 1 << 12 };
        let mut buf = BytesMut::from(data);
        while let Ok(Some(f)) = frame::decode(&mut buf, &limits) {
            let _ = RemotingCommand::from_frame(f);
        }
    });
}

#[test]
fn json_and_binary_headers() {
    let json: Vec<Vec<u8>> = commands().iter().map(encode_json_header).collect();
    run("json header", json, |d| {
        let _ = decode_json_header(d);
    });
    let binary: Vec<Vec<u8>> = commands().iter().map(|c| encode_binary_header(c).expect("encodes")).collect();
    run("binary header", binary, |d| {
        let _ = decode_binary_header(d);
    });
}

#[test]
fn batch_bodies() {
    let msgs: Vec<BatchMessage> = (0..3)
        .map(|i| BatchMessage { flag: i, body: Bytes::from(vec![i as u8; 10 + i as usize]), properties: Bytes::from(format!("TAGS\u{1}T{i}\u{2}")) })
        .collect();
    let mut out = BytesMut::new();
    batch::encode(&msgs, &mut out).expect("encodes");
    run("batch", vec![out.to_vec()], |d| {
        let _ = batch::decode(&Bytes::copy_from_slice(d));
    });
}

#[test]
fn heartbeat_and_route_bodies() {
    let hb = HeartbeatData {
        client_id: "127.0.0.1@1".into(),
        consumer_data_set: vec![ConsumerData {
            consume_from_where: Default::default(),
            consume_type: Default::default(),
            group_name: "G".into(),
            message_model: Default::default(),
            subscription_data_set: vec![SubscriptionData::new("T", "A || B", 1)],
            unit_mode: false,
        }],
        producer_data_set: Vec::new(),
    };
    run("heartbeat", vec![hb.encode()], |d| {
        if let Ok(hb) = HeartbeatData::decode(d) {
            for c in &hb.consumer_data_set {
                for s in &c.subscription_data_set {
                    let _ = tag_codes(&s.sub_string);
                }
            }
        }
    });
    let route = TopicRouteData {
        broker_datas: vec![BrokerData { broker_addrs: BTreeMap::from([(0, "1.2.3.4:10911".into())]), broker_name: "b".into(), cluster: "c".into(), ..Default::default() }],
        queue_datas: vec![QueueData { broker_name: "b".into(), perm: 6, read_queue_nums: 4, write_queue_nums: 4, topic_sys_flag: 0 }],
        ..Default::default()
    };
    let cluster = ClusterInfo::default();
    run("route", vec![route.encode_standard(), route.encode_legacy(), cluster.encode_legacy()], |d| {
        let _ = TopicRouteData::decode(d);
        let _ = ClusterInfo::decode(d);
        let _ = RegisterBrokerBody::decode(d);
    });
}

#[test]
fn stored_messages_and_pull_bodies() {
    let mut props = Properties::new();
    props.set("TAGS", "T").expect("property");
    let mut body = Vec::new();
    for i in 0..3i64 {
        StoredMessage { queue_offset: i, body: vec![i as u8; 20], topic: "T".into(), properties: props.encode(), ..Default::default() }.encode_into(&mut body);
    }
    run("stored message", vec![body], |d| {
        let check = |d: &[u8]| {
            let _ = record_head(d);
            if let Ok(view) = StoredMessageView::parse(d) {
                let _ = view.verify_body_crc();
                let _ = view.to_owned();
            }
            let _ = decode_messages(&Bytes::copy_from_slice(d), "b");
        };
        check(d);
        if d.len() >= 8 {
            let mut patched = d.to_vec();
            patched[4..8].copy_from_slice(&MAGIC_MESSAGE.to_be_bytes());
            check(&patched);
        }
    });
}

#[test]
fn admin_bodies() {
    use ringmq_client::remoting::admin::{
        BrokerStatsData, BrokerStatsItem, ConsumeMessageDirectlyResult, ConsumeStats, ConsumerRunningInfo, GroupList, ProcessQueueInfo, ResetOffsetBody, TopicStatsTable,
    };
    use ringmq_client::remoting::bodies::MessageQueue;
    let mq = |q: i32| MessageQueue { broker_name: "b".into(), queue_id: q, topic: "T".into() };
    let mut reset = ResetOffsetBody::default();
    reset.offset_table.insert(mq(0), 7);
    reset.offset_table.insert(mq(1), 0);
    let mut info = ConsumerRunningInfo::default();
    info.properties.insert("PROP_CONSUME_TYPE".into(), "CONSUME_PASSIVELY".into());
    info.subscription_set.push(SubscriptionData::new("T", "A || B", 3));
    info.mq_table.insert(mq(0), ProcessQueueInfo { commit_offset: 4, ..Default::default() });
    let direct = br#"{"autoCommit":true,"consumeResult":"CR_LATER","order":false,"remark":"x","spentTimeMills":2}"#.to_vec();
    let stats = BrokerStatsData { stats_minute: BrokerStatsItem { avgpt: 1.5, sum: 3, tps: 0.05 }, ..Default::default() };
    let valid = vec![reset.encode(), info.encode(), direct, stats.encode(), br#"{"groupList":["a"]}"#.to_vec()];
    run("admin bodies", valid, |d| {
        let _ = TopicStatsTable::decode(d);
        let _ = ConsumeStats::decode(d);
        let _ = GroupList::decode(d);
        if let Ok(r) = ResetOffsetBody::decode(d) {
            assert_eq!(ResetOffsetBody::decode(&r.encode()).ok(), Some(r));
        }
        if let Ok(i) = ConsumerRunningInfo::decode(d) {
            assert!(ConsumerRunningInfo::decode(&i.encode()).is_ok());
        }
        if let Ok(c) = ConsumeMessageDirectlyResult::decode(d) {
            assert!(ConsumeMessageDirectlyResult::decode(&c.encode()).is_ok());
        }
        if let Ok(s) = BrokerStatsData::decode(d) {
            assert!(BrokerStatsData::decode(&s.encode()).is_ok());
        }
    });
}
