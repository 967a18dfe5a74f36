//! Deterministic simulation tests of the store against `SimDisk` (DESIGN.md §4).
//!
//! Every test runs many seeds; a failing run prints `failing seed: N` and replays
//! exactly with `RINGMQ_SEED=N cargo test -p ringmq-broker --test store_sim`.

use futures_lite::future::block_on;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ringmq_broker::store::config::{FlushMode, Preallocate, StoreConfig};
use ringmq_broker::store::engine::{open_store, GetStatus, MessageToStore, RecoveryReport, ShardId, Store};
use ringmq_broker::store::error::StoreError;
use ringmq_broker::store::io::sim::{FaultConfig, SimDisk};
use ringmq_broker::store::io::{Disk, ManualClock};
use ringmq_client::message::stored::StoredMessageView;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type SimStore = Store<SimDisk, ManualClock>;

const TOPIC: &str = "TopicTest";

struct SeedGuard(u64);
impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing seed: {} (replay with RINGMQ_SEED={})", self.0, self.0);
        }
    }
}

/// Seeds to run: `RINGMQ_SEED` alone if set, else `0..count`.
fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("RINGMQ_SEED") {
        Ok(s) => vec![s.parse().expect("RINGMQ_SEED must be a number")],
        Err(_) => (0..count).collect(),
    }
}

fn root() -> PathBuf {
    PathBuf::from("/store/shard-0")
}

fn open(disk: &SimDisk, clock: &ManualClock, config: &StoreConfig) -> Result<(SimStore, RecoveryReport), StoreError> {
    block_on(open_store(disk.clone(), clock.clone(), root(), ShardId(0), config.clone()))
}

fn body_for(seq: u64, len: usize) -> Vec<u8> {
    let mut body = seq.to_be_bytes().to_vec();
    body.extend((0..len.saturating_sub(8)).map(|i| (seq as usize * 7 + i) as u8));
    body
}

fn put(store: &SimStore, queue_id: i32, seq: u64, len: usize, props: &str) -> Result<u64, StoreError> {
    put_with(store, TOPIC, queue_id, seq, len, props)
}

fn put_with(store: &SimStore, topic: &str, queue_id: i32, seq: u64, len: usize, props: &str) -> Result<u64, StoreError> {
    let body = body_for(seq, len);
    let msg = MessageToStore {
        topic,
        queue_id,
        flag: 0,
        body: &body,
        properties: props,
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: "127.0.0.1:5000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    store.put(&msg).map(|r| r.durable_ticket)
}

/// Every message of every queue of `TOPIC`, as (queue id, queue offset, seq), checking
/// body integrity and that queue offsets are contiguous from the queue's minimum.
/// `put`, flushing once first when the store is busy (its dirty bound reached).
fn put_flushing(store: &SimStore, queue_id: i32, seq: u64, len: usize) {
    if put(store, queue_id, seq, len, "").is_err() {
        block_on(store.flush_all()).unwrap();
        put(store, queue_id, seq, len, "").unwrap();
    }
}

fn read_all(store: &SimStore) -> Vec<(i32, u64, u64)> {
    read_topic(store, TOPIC)
}

/// `read_all` for any topic.
fn read_topic(store: &SimStore, topic: &str) -> Vec<(i32, u64, u64)> {
    let mut out = Vec::new();
    for queue_id in store.queue_ids(topic) {
        let mut offset = store.min_offset(topic, queue_id);
        loop {
            let got = block_on(store.get_messages(topic, queue_id, offset, 32, 1 << 20, &|_| true)).expect("read");
            if got.status != GetStatus::Found {
                break;
            }
            let mut at = 0;
            while at < got.records.len() {
                let view = StoredMessageView::parse_verified(&got.records[at..]).expect("valid record");
                assert_eq!(view.queue_offset() as u64, offset, "queue offsets contiguous");
                assert_eq!(view.queue_id(), queue_id);
                let seq = u64::from_be_bytes(view.body()[..8].try_into().unwrap());
                assert_eq!(view.body(), &body_for(seq, view.body().len())[..], "body of seq {seq}");
                out.push((queue_id, offset, seq));
                offset += 1;
                at += view.total_size();
            }
            assert_eq!(got.next_offset, offset);
        }
    }
    out
}

fn check_prefix(recovered: &[(i32, u64, u64)], appended: &[(u64, i32)], acked: &std::collections::BTreeSet<u64>) {
    let mut seqs: Vec<u64> = recovered.iter().map(|r| r.2).collect();
    seqs.sort_unstable();
    let k = seqs.len() as u64;
    assert_eq!(seqs, (0..k).collect::<Vec<_>>(), "recovered records are exactly a prefix of the appends");
    if let Some(&max_acked) = acked.iter().next_back() {
        assert!(k > max_acked, "acknowledged seq {max_acked} lost: only {k} recovered");
    }
    // Per queue: in append order.
    let mut per_queue: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for &(q, _, seq) in recovered {
        per_queue.entry(q).or_default().push(seq);
    }
    for (q, seqs) in per_queue {
        let expected: Vec<u64> = appended.iter().filter(|(s, qq)| *qq == q && *s < k).map(|(s, _)| *s).collect();
        assert_eq!(seqs, expected, "queue {q} order");
    }
}

#[test]
fn round_trip_across_segment_rolls() {
    for seed in seeds(8) {
        let _guard = SeedGuard(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig::for_tests();
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(!report.unclean);
        let mut appended = Vec::new();
        for seq in 0..400u64 {
            let queue_id = rng.gen_range(0..3);
            let len = rng.gen_range(8..2000);
            match put(&store, queue_id, seq, len, "TAGS\u{1}a\u{2}") {
                Ok(_) => appended.push((seq, queue_id)),
                Err(StoreError::Busy { .. }) => {
                    block_on(store.flush()).unwrap();
                    put(&store, queue_id, seq, len, "TAGS\u{1}a\u{2}").unwrap();
                    appended.push((seq, queue_id));
                }
                Err(e) => panic!("put: {e}"),
            }
            clock.advance_ms(1);
        }
        let segments = |d: &SimDisk| d.paths().iter().filter(|p| p.starts_with(root().join("commitlog"))).count();
        block_on(store.flush_all()).unwrap();
        assert!(segments(&disk) >= 5, "400 records of ~1 KiB span several 64 KiB segments");
        check_prefix(&read_all(&store), &appended, &Default::default());
        assert_eq!(read_all(&store).len(), 400);
        block_on(store.close()).unwrap();
        drop(store);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(!report.unclean, "close removed the abort file");
        let all = read_all(&store);
        assert_eq!(all.len(), 400);
        check_prefix(&all, &appended, &Default::default());
        // And appends continue after the reopen.
        put(&store, 0, 400, 100, "").unwrap();
        block_on(store.flush_all()).unwrap();
        assert_eq!(read_all(&store).len(), 401);
    }
}

/// Drives a random workload of puts, flushes, logics flushes and segment
/// pre-allocations for `ops` steps, then crashes the disk and recovers; checks that
/// recovery yields exactly a prefix of the appends containing every acknowledged one,
/// then does it once more on the recovered store (a crash after a recovery).
fn crash_once(seed: u64, ops: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let disk = SimDisk::new(seed);
    let clock = ManualClock::new(1_700_000_000_000);
    // Both ways of preparing segments must keep the same promises.
    let preallocate = if seed % 2 == 0 { Preallocate::Zero } else { Preallocate::Fallocate };
    // And both ways of making a group commit durable (write + fdatasync, or O_DSYNC).
    let write_through = (seed / 2) % 2 == 1;
    let config = StoreConfig { flush_mode: FlushMode::Sync, preallocate, write_through: Some(write_through), ..StoreConfig::for_tests() };
    let mut appended: Vec<(u64, i32)> = Vec::new();
    let mut acked = std::collections::BTreeSet::new();
    let mut next_seq;
    for round in 0..2 {
        let (store, report) = open(&disk, &clock, &config).unwrap_or_else(|e| panic!("round {round}: recovery refused: {e}"));
        let trace = std::env::var("RINGMQ_TRACE").is_ok();
        if trace {
            eprintln!("round {round}: {report:?} appended {appended:?} acked {acked:?}");
        }
        assert_eq!(report.unclean, round > 0);
        // A power cut damages nothing below the checkpoint: no queue is rebuilt from the
        // whole log (that made every recovery as slow as the store is large).
        assert_eq!(report.rebuilt_queues, 0, "round {round}: queues rebuilt after a plain power cut ({report:?})");
        let recovered = read_all(&store);
        check_prefix(&recovered, &appended, &acked);
        // Forget what was lost: those appends were never acknowledged.
        let kept = recovered.len() as u64;
        appended.retain(|(s, _)| *s < kept);
        next_seq = kept;
        let mut pending: Vec<(u64, u64)> = Vec::new();
        for _ in 0..ops {
            let op = rng.gen_range(0..10);
            if trace {
                eprintln!("op {op} write {} flushed {}", store.write_offset(), store.flushed_offset());
            }
            match op {
                0..=5 => {
                    let queue_id = rng.gen_range(0..4);
                    let len = rng.gen_range(8..3000);
                    match put(&store, queue_id, next_seq, len, "") {
                        Ok(ticket) => {
                            appended.push((next_seq, queue_id));
                            pending.push((next_seq, ticket));
                            next_seq += 1;
                        }
                        Err(StoreError::Busy { .. }) => {}
                        Err(e) => panic!("put: {e}"),
                    }
                }
                6..=7 => {
                    block_on(store.flush()).unwrap();
                    let flushed = store.flushed_offset();
                    pending.retain(|&(seq, ticket)| {
                        if ticket <= flushed {
                            block_on(store.wait_durable(ticket)).unwrap();
                            acked.insert(seq);
                            false
                        } else {
                            true
                        }
                    });
                }
                8 => block_on(store.flush_logics()).unwrap(),
                _ => {
                    block_on(store.prepare_next_segment()).unwrap();
                }
            }
            clock.advance_ms(rng.gen_range(0..5));
        }
        disk.crash();
    }
    let (store, report) = open(&disk, &clock, &config).unwrap();
    if std::env::var("RINGMQ_TRACE").is_ok() {
        eprintln!("final: {report:?} appended {appended:?} acked {acked:?}");
        for q in store.queue_ids(TOPIC) {
            let e = block_on(store.cq_entries(TOPIC, q, 0, 100)).unwrap();
            eprintln!("queue {q}: min {} max {} entries {e:?}", store.min_offset(TOPIC, q), store.max_offset(TOPIC, q));
        }
    }
    check_prefix(&read_all(&store), &appended, &acked);
}

#[test]
fn crash_at_every_point_recovers_a_prefix_with_every_acked_record() {
    for seed in seeds(24) {
        let _guard = SeedGuard(seed);
        for ops in (0..=48).chain([89, 144, 233]) {
            let _inner = SeedGuard(seed * 1000 + ops as u64);
            crash_once(seed * 1000 + ops as u64, ops);
        }
    }
}

fn last_segment_and_end(store: &SimStore) -> u64 {
    store.write_offset()
}

#[test]
fn torn_tail_is_truncated() {
    for seed in seeds(16) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        for seq in 0..20 {
            put(&store, 0, seq, 500, "").unwrap();
        }
        block_on(store.flush_all()).unwrap();
        let end = last_segment_and_end(&store);
        drop(store);
        // Garbage inside the last write window: a half-written record.
        let segment = root().join("commitlog").join(format!("{:020}", 0));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let garbage: Vec<u8> = (0..rng.gen_range(1..700)).map(|_| rng.gen()).collect();
        disk.write_raw(&segment, end, &garbage);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(report.unclean);
        assert_eq!(report.end_offset, end, "truncated exactly at the torn record");
        assert_eq!(read_all(&store).len(), 20);
        // The garbage is gone from disk: a second unclean start sees a clean end.
        drop(store);
        let bytes = disk.file_bytes(&segment).unwrap();
        assert!(bytes[end as usize..end as usize + garbage.len()].iter().all(|&b| b == 0));
        let (_, report) = open(&disk, &clock, &config).unwrap();
        assert_eq!(report.end_offset, end);
    }
}

fn fill_segments(disk: &SimDisk, clock: &ManualClock, config: &StoreConfig, count: u64) -> u64 {
    let (store, _) = open(disk, clock, config).unwrap();
    for seq in 0..count {
        if put(&store, (seq % 2) as i32, seq, 900, "").is_err() {
            block_on(store.flush()).unwrap();
            put(&store, (seq % 2) as i32, seq, 900, "").unwrap();
        }
    }
    block_on(store.flush_all()).unwrap();
    store.write_offset()
    // Dropped without close: an unclean stop, and the checkpoint is from the start.
}

#[test]
fn bit_flip_in_the_middle_is_refused_with_file_and_offset() {
    for seed in seeds(8) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig::for_tests();
        fill_segments(&disk, &clock, &config, 200);
        let segment = root().join("commitlog").join(format!("{:020}", 0));
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let at = rng.gen_range(100..60_000u64);
        disk.flip_bit(&segment, at, rng.gen_range(0..8));
        let err = open(&disk, &clock, &config).err().expect("a flipped bit in a sealed segment must be refused");
        match &err {
            StoreError::Corrupt { file, offset, .. } => {
                assert_eq!(file, &segment, "names the file: {err}");
                assert!(*offset <= at, "names the bad record's offset {offset} (flip at {at})");
            }
            other => panic!("expected Corrupt, got {other}"),
        }
        // An explicit option truncates there instead.
        let lenient = StoreConfig { allow_truncate_corrupt: true, ..config.clone() };
        let (store, report) = open(&disk, &clock, &lenient).unwrap();
        assert!(report.end_offset <= at);
        assert!(!read_all(&store).is_empty() || report.end_offset < 200);
    }
}

#[test]
fn consume_queues_and_index_are_rebuilt_after_deletion() {
    for seed in seeds(6) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_000);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        for seq in 0..120u64 {
            let props = format!("KEYS\u{1}order-{seq} shared\u{2}UNIQ_KEY\u{1}U{seq}\u{2}");
            if put(&store, (seq % 3) as i32, seq, 300, &props).is_err() {
                block_on(store.flush()).unwrap();
                put(&store, (seq % 3) as i32, seq, 300, &props).unwrap();
            }
        }
        block_on(store.close()).unwrap();
        let before = read_all(&store);
        drop(store);
        let victims: Vec<PathBuf> = disk
            .paths()
            .into_iter()
            .filter(|p| p.starts_with(root().join("consumequeue")) || p.starts_with(root().join("index")))
            .filter(|p| seed % 2 == 0 || p.to_string_lossy().contains("/1/") || p.starts_with(root().join("index")))
            .collect();
        assert!(!victims.is_empty());
        for p in &victims {
            block_on(disk.remove(p)).unwrap();
        }
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert_eq!(read_all(&store), before, "queues rebuilt (report {report:?})");
        for seq in [0u64, 57, 119] {
            let hits = block_on(store.query_by_key(TOPIC, &format!("order-{seq}"), 8, 0, i64::MAX)).unwrap();
            assert_eq!(hits.len(), 1, "key order-{seq}");
            let view = StoredMessageView::parse(&hits[0]).unwrap();
            assert_eq!(u64::from_be_bytes(view.body()[..8].try_into().unwrap()), seq);
            let uniq = block_on(store.query_by_key(TOPIC, &format!("U{seq}"), 8, 0, i64::MAX)).unwrap();
            assert_eq!(uniq.len(), 1);
        }
        let shared = block_on(store.query_by_key(TOPIC, "shared", 10, 0, i64::MAX)).unwrap();
        assert_eq!(shared.len(), 10, "bounded by max_results");
    }
}

fn put_to(store: &SimStore, topic: &str, queue_id: i32, seq: u64) -> Result<u64, StoreError> {
    put_with(store, topic, queue_id, seq, 200, "")
}

/// Deleting a topic (mqadmin deleteTopic): its queues are empty at once and their files
/// gone, other topics keep everything, a topic created again starts at offset 0, and a
/// power cut at any point after the delete returned never brings deleted entries back.
#[test]
fn deleting_a_topic_removes_its_queues_and_stays_deleted_after_a_crash() {
    for seed in seeds(20) {
        let _guard = SeedGuard(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_000);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let put_ok = |topic: &str, q: i32, seq: u64| {
            if put_to(&store, topic, q, seq).is_err() {
                block_on(store.flush()).unwrap();
                put_to(&store, topic, q, seq).unwrap();
            }
        };
        let n = rng.gen_range(10..80u64);
        for seq in 0..n {
            put_ok("Gone", (seq % 3) as i32, seq);
            put_ok("Kept", (seq % 2) as i32, seq);
        }
        if rng.gen_bool(0.5) {
            block_on(store.flush_logics()).unwrap(); // some entries already in files
        }
        assert_eq!(block_on(store.delete_topic("Gone")).unwrap(), 3);
        assert!(read_topic(&store, "Gone").is_empty());
        assert!((0..3).all(|q| store.max_offset("Gone", q) == 0));
        let gone_files = |d: &SimDisk| d.paths().into_iter().filter(|p| p.starts_with(root().join("consumequeue").join("Gone"))).count();
        assert_eq!(gone_files(&disk), 0, "the deleted queues' files are removed");
        let kept = read_topic(&store, "Kept");
        assert_eq!(kept.len() as u64, n);
        // Created again: offsets from 0.
        let again = rng.gen_range(0..5u64);
        for seq in 0..again {
            put_ok("Gone", 0, 1000 + seq);
        }
        assert_eq!(store.max_offset("Gone", 0), again);
        block_on(store.flush_all()).unwrap();
        if rng.gen_bool(0.5) {
            disk.crash();
        } else {
            block_on(store.close()).unwrap();
        }
        drop(store);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        let expect_again: Vec<(i32, u64, u64)> = (0..again).map(|s| (0, s, 1000 + s)).collect();
        assert_eq!(read_topic(&store, "Gone"), expect_again, "only the new messages (report {report:?})");
        assert_eq!(read_topic(&store, "Kept"), kept, "other topics intact");
    }
}

/// Garbage over one entry of a kept ConsumeQueue file (after a clean close, so the
/// entries lie below the checkpoint and are not replayed): the queue is rebuilt and every
/// entry serves its own record again.
#[test]
fn a_damaged_consume_queue_entry_rebuilds_its_queue() {
    for seed in seeds(6) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_000);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        for seq in 0..90u64 {
            if put(&store, (seq % 3) as i32, seq, 200, "").is_err() {
                block_on(store.flush()).unwrap();
                put(&store, (seq % 3) as i32, seq, 200, "").unwrap();
            }
        }
        block_on(store.close()).unwrap();
        let before = read_all(&store);
        drop(store);
        let victim = disk
            .paths()
            .into_iter()
            .filter(|p| p.starts_with(root().join("consumequeue")) && p.to_string_lossy().contains("/1/"))
            .min()
            .expect("queue 1 has a file");
        // Entry 5 + seed % 20: random-looking bytes, or a plausible-looking but wrong
        // offset (pointing back at an earlier record), depending on the seed.
        let entry = 5 + seed % 20;
        let garbage: Vec<u8> = if seed % 2 == 0 {
            (0..20u64).map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 97) % 251) as u8 | 1).collect()
        } else {
            let mut e = disk.file_bytes(&victim).unwrap()[..20].to_vec();
            e[8..12].copy_from_slice(&300u32.to_be_bytes());
            e
        };
        disk.write_raw(&victim, entry * 20, &garbage);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(report.rebuilt_queues >= 1, "damage detected (report {report:?})");
        assert_eq!(read_all(&store), before, "queue rebuilt: every entry serves its record");
    }
}

#[test]
fn enospc_acknowledges_nothing_unstored_and_resumes_when_space_is_freed() {
    for seed in seeds(6) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig { flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        // Room for what exists now plus a little: the next segment cannot be made.
        let used: u64 = disk.paths().iter().map(|p| disk.file_bytes(p).unwrap().len() as u64).sum();
        disk.set_faults(FaultConfig { capacity_bytes: used + 64 * 1024 + 8192, ..FaultConfig::default() });
        let mut tickets = Vec::new();
        let mut refused = None;
        for seq in 0..200u64 {
            match put(&store, 0, seq, 1000, "") {
                Ok(t) => tickets.push((seq, t)),
                Err(StoreError::Busy { .. }) => match block_on(store.flush()) {
                    Ok(_) => {}
                    Err(StoreError::NoSpace) => {}
                    Err(e) => panic!("flush: {e}"),
                },
                Err(e @ StoreError::DiskFull { .. }) => {
                    refused = Some(e);
                    break;
                }
                Err(e) => panic!("put: {e}"),
            }
            if seq % 8 == 0 {
                let _ = block_on(store.flush());
            }
        }
        let refused = refused.expect("appends are refused once the disk is full");
        assert!(refused.to_string().contains("disk full"), "{refused}");
        let flushed = store.flushed_offset();
        let acked: Vec<u64> = tickets.iter().filter(|(_, t)| *t <= flushed).map(|(s, _)| *s).collect();
        let unacked = tickets.len() - acked.len();
        assert!(unacked > 0, "some appends wait in memory for space");
        assert!(store.failure().is_none(), "a full disk is not a store failure");
        // Free space: appends and flushes resume, and the waiting appends become durable.
        disk.set_faults(FaultConfig::default());
        block_on(store.check_disk()).unwrap();
        block_on(store.flush_all()).unwrap();
        for (_, t) in &tickets {
            block_on(store.wait_durable(*t)).unwrap();
        }
        put(&store, 0, 10_000, 10, "").unwrap();
        // A crash now keeps every acknowledged append.
        disk.crash();
        drop(store);
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let seqs: Vec<u64> = read_all(&store).iter().map(|r| r.2).collect();
        for (seq, _) in &tickets {
            assert!(seqs.contains(seq), "seq {seq} acknowledged after space was freed");
        }
    }
}

#[test]
fn io_error_fails_the_store_and_wakes_waiters_with_an_error() {
    for seed in seeds(6) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig { flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let ticket = put(&store, 0, 0, 100, "").unwrap();
        disk.set_faults(FaultConfig { sync_eio_per_million: 1_000_000, ..FaultConfig::default() });
        let err = block_on(store.flush()).unwrap_err();
        assert!(err.is_fatal(), "{err}");
        assert!(block_on(store.wait_durable(ticket)).is_err(), "never acknowledged after a failed sync");
        assert!(matches!(put(&store, 0, 1, 100, ""), Err(StoreError::Failed(_))));
        assert!(matches!(block_on(store.flush()), Err(StoreError::Failed(_))));
    }
}

#[test]
fn queries_by_offset_and_time() {
    let disk = SimDisk::new(1);
    let clock = ManualClock::new(10_000);
    let (store, _) = open(&disk, &clock, &StoreConfig::for_tests()).unwrap();
    for seq in 0..50u64 {
        let tags = if seq % 2 == 0 { "TAGS\u{1}even\u{2}" } else { "TAGS\u{1}odd\u{2}" };
        put(&store, 1, seq, 100, tags).unwrap();
        clock.advance_ms(10);
    }
    block_on(store.flush_all()).unwrap();
    let check = |ts: i64, expected: u64| {
        assert_eq!(block_on(store.search_offset_by_time(TOPIC, 1, ts)).unwrap(), expected, "search {ts}");
    };
    check(0, 0);
    check(10_000, 0);
    check(10_001, 1);
    check(10_250, 25);
    check(99_999, 50);
    assert_eq!(block_on(store.earliest_store_time(TOPIC, 1)).unwrap(), Some(10_000));
    let even = ringmq_client::hash::tag_hash_code("even");
    let got = block_on(store.get_messages(TOPIC, 1, 0, 100, 1 << 20, &|h| h == even)).unwrap();
    assert_eq!(got.record_count, 25);
    assert_eq!(got.next_offset, 50);
    let none = block_on(store.get_messages(TOPIC, 1, 50, 10, 1 << 20, &|_| true)).unwrap();
    assert_eq!(none.status, GetStatus::OffsetOverflowOne);
    let bad = block_on(store.get_messages(TOPIC, 1, 70, 10, 1 << 20, &|_| true)).unwrap();
    assert_eq!(bad.status, GetStatus::OffsetOverflowBadly);
    let empty = block_on(store.get_messages("nope", 0, 0, 10, 1 << 20, &|_| true)).unwrap();
    assert_eq!(empty.status, GetStatus::NoMessageInQueue);
    let bounded = block_on(store.get_messages(TOPIC, 1, 0, 100, 1000, &|_| true)).unwrap();
    assert!(bounded.records.len() <= 1000 && bounded.record_count >= 1);
    let _ = Path::new("/");
}

#[test]
fn debug_one() {
    if let Ok(s) = std::env::var("RINGMQ_ONE") {
        let (seed, ops) = s.split_once(',').unwrap();
        crash_once(seed.parse().unwrap(), ops.parse().unwrap());
    }
}

#[test]
fn retention_deletes_expired_segments_at_the_delete_hour_only() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let hour_ms = 3_600_000i64;
        // Day 0, 00:00 UTC.
        let clock = ManualClock::new(0);
        let config = StoreConfig { file_reserved_hours: 72, delete_when_hours: vec![4], ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        assert_eq!(store.earliest_message_time(), None, "an empty log has no earliest message");
        // ~60 records per 64 KiB segment; one hour passes per 30 records.
        for seq in 0..400u64 {
            if put(&store, (seq % 2) as i32, seq, 1000, &format!("KEYS\u{1}k{seq}\u{2}")).is_err() {
                block_on(store.flush()).unwrap();
                put(&store, (seq % 2) as i32, seq, 1000, &format!("KEYS\u{1}k{seq}\u{2}")).unwrap();
            }
            if seq % 30 == 29 {
                clock.advance_ms(hour_ms);
            }
        }
        block_on(store.flush_all()).unwrap();
        block_on(store.flush_logics()).unwrap();
        // Record `seq` was stored at hour seq / 30 (a store time is never 0).
        let stored_at = |seq: u64| ((seq / 30) as i64 * hour_ms).max(1);
        assert_eq!(store.earliest_message_time(), Some(stored_at(0)));
        let segments = |d: &SimDisk| d.paths().iter().filter(|p| p.starts_with(root().join("commitlog"))).count();
        let before = segments(&disk);
        // 14 h written; at 03:00 on day 3 nothing is old enough and it is not the hour.
        clock.set_ms(3 * 24 * hour_ms + 3 * hour_ms);
        assert_eq!(block_on(store.clean_expired()).unwrap(), 0);
        // At 04:00 on day 3: the segments whose newest record is older than 72 h go.
        clock.set_ms(3 * 24 * hour_ms + 4 * hour_ms + 30 * 60_000);
        let deleted = block_on(store.clean_expired()).unwrap();
        assert!(deleted >= 1 && deleted < before - 1, "deleted {deleted} of {before}");
        assert_eq!(segments(&disk), before - deleted);
        // Queues moved their minimum past the deleted records; what is left reads back.
        for q in [0, 1] {
            let min = store.min_offset(TOPIC, q);
            assert!(min > 0, "queue {q} min advanced");
            let old = block_on(store.get_messages(TOPIC, q, 0, 4, 1 << 20, &|_| true)).unwrap();
            assert_eq!(old.status, GetStatus::OffsetTooSmall);
            assert_eq!(old.next_offset, min);
        }
        let left = read_all(&store);
        let first_left = left.iter().map(|r| r.2).min().unwrap();
        assert_eq!(left.len() as u64, 400 - first_left);
        // The earliest message is now the first record retention kept.
        assert_eq!(store.earliest_message_time(), Some(stored_at(first_left)));
        // Keys of deleted records are gone; kept ones are found.
        assert!(block_on(store.query_by_key(TOPIC, "k0", 4, 0, i64::MAX)).unwrap().is_empty());
        assert_eq!(block_on(store.query_by_key(TOPIC, "k399", 4, 0, i64::MAX)).unwrap().len(), 1);
        // Recovery after retention (unclean) gives the same.
        drop(store);
        disk.crash();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        assert_eq!(read_all(&store), left);
        assert_eq!(store.earliest_message_time(), Some(stored_at(first_left)), "read again at open");
    }
}

/// Apache's `deleteWhen=04;16`: expired segments go at any of the listed hours (it
/// kept only the first before, silently). check(hour of day, segments deleted or not).
#[test]
fn retention_runs_at_every_listed_delete_hour() {
    let hour_ms = 3_600_000i64;
    let check = |hour: i64, expect_deleted: bool| {
        let disk = SimDisk::new(11);
        let clock = ManualClock::new(0);
        let config = StoreConfig { file_reserved_hours: 1, delete_when_hours: vec![4, 16], ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        for seq in 0..200u64 {
            if put(&store, 0, seq, 1000, "").is_err() {
                block_on(store.flush()).unwrap();
                put(&store, 0, seq, 1000, "").unwrap();
            }
        }
        block_on(store.flush_all()).unwrap();
        block_on(store.flush_logics()).unwrap();
        // Day 2: every segment but the active one is long expired.
        clock.set_ms(2 * 24 * hour_ms + hour * hour_ms + 60_000);
        let deleted = block_on(store.clean_expired()).unwrap();
        assert_eq!(deleted > 0, expect_deleted, "hour {hour}: deleted {deleted}");
    };
    check(4, true);
    check(16, true);
    check(3, false);
    check(15, false);
    check(17, false);
}

#[test]
fn disk_pressure_forces_a_clean_and_refuses_writes_above_the_watermark() {
    let disk = SimDisk::new(9);
    let clock = ManualClock::new(0);
    let config = StoreConfig { delete_when_hours: vec![23], ..StoreConfig::for_tests() };
    let (store, _) = open(&disk, &clock, &config).unwrap();
    for seq in 0..300u64 {
        if put(&store, 0, seq, 1000, "").is_err() {
            block_on(store.flush()).unwrap();
            put(&store, 0, seq, 1000, "").unwrap();
        }
    }
    block_on(store.flush_all()).unwrap();
    block_on(store.flush_logics()).unwrap();
    let used: u64 = disk.paths().iter().map(|p| disk.file_bytes(p).unwrap().len() as u64).sum();
    // 87 % used: above force-clean (85 %), below refuse (90 %).
    disk.set_faults(FaultConfig { capacity_bytes: used * 100 / 87, ..FaultConfig::default() });
    assert_eq!(block_on(store.clean_expired()).unwrap(), 1, "one segment removed although nothing expired");
    // 95 % used: appends refused with a clear error until space returns.
    let used: u64 = disk.paths().iter().map(|p| disk.file_bytes(p).unwrap().len() as u64).sum();
    disk.set_faults(FaultConfig { capacity_bytes: used * 100 / 95, ..FaultConfig::default() });
    block_on(store.check_disk()).unwrap();
    let err = put(&store, 0, 1000, 10, "").unwrap_err();
    assert!(err.to_string().contains("disk full: 95% used, writes refused above 90%"), "{err}");
    disk.set_faults(FaultConfig::default());
    block_on(store.check_disk()).unwrap();
    put(&store, 0, 1000, 10, "").unwrap();
}

/// The CommitLog's segment files, oldest first.
fn commitlog_segments(disk: &SimDisk) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = disk.paths().into_iter().filter(|p| p.starts_with(root().join("commitlog"))).collect();
    paths.sort();
    paths
}

/// Bytes every file on the disk holds.
fn disk_used_bytes(disk: &SimDisk) -> u64 {
    disk.paths().iter().map(|p| disk.file_bytes(p).unwrap().len() as u64).sum()
}

/// Appends `records` records of 1000 bytes (about 57 per 64 KiB test segment) at the
/// clock's time, all made durable and checkpointed, so retention may delete any
/// sealed segment.
fn fill_durable(store: &SimStore, records: u64) {
    for seq in 0..records {
        put_flushing(store, (seq % 2) as i32, seq, 1000);
    }
    block_on(store.flush_all()).unwrap();
    block_on(store.flush_logics()).unwrap();
}

/// What a retention pass does to the oldest segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Oldest {
    Deleted,
    Kept,
}

/// One row of Apache's retention rules (DefaultMessageStore.CleanCommitLogService at
/// its defaults: deleteWhen=04, fileReservedTime=72, diskMaxUsedSpaceRatio=75,
/// diskSpaceCleanForciblyRatio=85, diskSpaceWarningLevelRatio=90, deleteFileBatchMax=10).
struct RetentionCase {
    what: &'static str,
    /// Disk used before the pass, percent (strictly above or below a watermark).
    used_percent: u64,
    /// The host's zone, hours east of UTC, and the UTC hour of the pass.
    utc_offset_hours: i64,
    utc_hour: i64,
    clean_file_forcibly: bool,
    /// Whether the sealed segments are older than fileReservedTime.
    expired: bool,
    oldest: Oldest,
}

/// Apache's retention, case by case: (used ratio, hour, cleanFileForciblyEnable, file
/// expired?) → the oldest segment deleted or kept. Beyond the oldest: expired segments
/// go up to deleteFileBatchMax per pass; unexpired ones only while usage, re-read
/// before each, is above the forcibly ratio; the active segment never. Each case runs
/// on seeded SimDisks and is checked again after a crash and recovery.
#[test]
fn retention_follows_apaches_rules_case_by_case() {
    use Oldest::*;
    let cases = [
        RetentionCase { what: "below diskMaxUsedSpaceRatio, outside deleteWhen: expired kept", used_percent: 50, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: true, expired: true, oldest: Kept },
        RetentionCase { what: "just below diskMaxUsedSpaceRatio: expired kept", used_percent: 74, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: true, expired: true, oldest: Kept },
        RetentionCase { what: "at deleteWhen: expired deleted", used_percent: 50, utc_offset_hours: 0, utc_hour: 4, clean_file_forcibly: true, expired: true, oldest: Deleted },
        RetentionCase { what: "at deleteWhen: unexpired kept", used_percent: 50, utc_offset_hours: 0, utc_hour: 4, clean_file_forcibly: true, expired: false, oldest: Kept },
        RetentionCase { what: "above diskMaxUsedSpaceRatio, outside deleteWhen: expired deleted", used_percent: 80, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: true, expired: true, oldest: Deleted },
        RetentionCase { what: "above diskMaxUsedSpaceRatio, outside deleteWhen: unexpired kept", used_percent: 80, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: true, expired: false, oldest: Kept },
        RetentionCase { what: "above the forcibly ratio, forcibly on: unexpired oldest deleted", used_percent: 88, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: true, expired: false, oldest: Deleted },
        RetentionCase { what: "above the forcibly ratio, forcibly off: unexpired kept", used_percent: 88, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: false, expired: false, oldest: Kept },
        RetentionCase { what: "above the forcibly ratio, forcibly off: expired still deleted", used_percent: 88, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: false, expired: true, oldest: Deleted },
        RetentionCase { what: "above the warning level, forcibly off: unexpired kept", used_percent: 95, utc_offset_hours: 0, utc_hour: 10, clean_file_forcibly: false, expired: false, oldest: Kept },
        RetentionCase { what: "above the warning level, forcibly on: unexpired oldest deleted", used_percent: 95, utc_offset_hours: 0, utc_hour: 4, clean_file_forcibly: true, expired: false, oldest: Deleted },
        RetentionCase { what: "04:00 local in UTC+8 (20:00 UTC): expired deleted", used_percent: 50, utc_offset_hours: 8, utc_hour: 20, clean_file_forcibly: true, expired: true, oldest: Deleted },
        RetentionCase { what: "04:00 UTC is 12:00 in UTC+8: expired kept", used_percent: 50, utc_offset_hours: 8, utc_hour: 4, clean_file_forcibly: true, expired: true, oldest: Kept },
        RetentionCase { what: "04:00 local in UTC-5 (09:00 UTC): expired deleted", used_percent: 50, utc_offset_hours: -5, utc_hour: 9, clean_file_forcibly: true, expired: true, oldest: Deleted },
    ];
    let hour_ms = 3_600_000i64;
    for seed in seeds(3) {
        let _guard = SeedGuard(seed);
        for case in &cases {
            let what = format!("{} (seed {seed})", case.what);
            let disk = SimDisk::new(seed);
            // Every record is stored at t = 0.
            let clock = ManualClock::new(0);
            clock.set_utc_offset_ms(case.utc_offset_hours * hour_ms);
            let config = StoreConfig { clean_file_forcibly: case.clean_file_forcibly, ..StoreConfig::for_tests() };
            assert_eq!((config.file_reserved_hours, config.delete_when_hours.clone(), config.delete_files_per_pass_max), (72, vec![4], 10));
            let (store, _) = open(&disk, &clock, &config).unwrap();
            // 6 sealed segments and the active one.
            fill_durable(&store, 380);
            let before = commitlog_segments(&disk);
            let sealed = before.len() - 1;
            assert!(sealed >= 5, "{what}: {before:?}");
            // Day 4 (expired: 96 h > 72 h) or day 1 (24 h), at the case's UTC hour.
            let day = if case.expired { 4 } else { 1 };
            clock.set_ms(day * 24 * hour_ms + case.utc_hour * hour_ms + 30 * 60_000);
            let used = disk_used_bytes(&disk);
            let capacity = used * 100 / case.used_percent;
            disk.set_faults(FaultConfig { capacity_bytes: capacity, ..FaultConfig::default() });
            let deleted = block_on(store.clean_expired()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let after = commitlog_segments(&disk);
            assert_eq!(after.len(), before.len() - deleted, "{what}");
            let oldest = if after.first() == before.first() { Kept } else { Deleted };
            assert_eq!(oldest, case.oldest, "{what}: deleted {deleted} of {} segments", before.len());
            // How far the pass went: every sealed expired segment (under the batch
            // bound); unexpired ones until usage is back at or below the forcibly
            // ratio; never the active one.
            let segment_bytes = config.segment_bytes;
            let expected = match (case.oldest, case.expired) {
                (Kept, _) => 0,
                (Deleted, true) => sealed.min(config.delete_files_per_pass_max as usize),
                (Deleted, false) => {
                    let force_bytes = (config.disk_force_clean_ratio * capacity as f64) as u64;
                    (1..=sealed).find(|k| used - *k as u64 * segment_bytes <= force_bytes).unwrap_or(sealed)
                }
            };
            assert_eq!(deleted, expected, "{what}");
            assert_eq!(after.last(), before.last(), "{what}: the active segment stays");
            // What is left reads back, also after a crash and recovery.
            let left = read_all(&store);
            let min_seq = left.iter().map(|r| r.2).min().unwrap();
            assert_eq!(left.len() as u64, 380 - min_seq, "{what}: a contiguous suffix is left");
            assert_eq!(min_seq == 0, deleted == 0, "{what}");
            drop(store);
            disk.set_faults(FaultConfig::default());
            disk.crash();
            let (store, _) = open(&disk, &clock, &config).unwrap();
            assert_eq!(read_all(&store), left, "{what}: after recovery");
            assert_eq!(commitlog_segments(&disk), after, "{what}: no segment comes back");
        }
    }
}

/// deleteFileBatchMax: a pass deletes at most that many expired segments; the next
/// pass goes on from there.
#[test]
fn retention_deletes_at_most_a_batch_per_pass() {
    for seed in seeds(2) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig { delete_files_per_pass_max: 2, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        fill_durable(&store, 380);
        let segments = || commitlog_segments(&disk).len();
        let sealed = segments() - 1;
        clock.set_ms(4 * 24 * 3_600_000 + 4 * 3_600_000);
        let mut passes = Vec::new();
        loop {
            let n = block_on(store.clean_expired()).unwrap();
            if n == 0 {
                break;
            }
            passes.push(n);
        }
        let mut want = vec![2; sealed / 2];
        if sealed % 2 == 1 {
            want.push(1);
        }
        assert_eq!(passes, want, "{sealed} sealed segments, 2 per pass");
        assert_eq!(segments(), 1, "only the active segment is left");
    }
}

/// diskSpaceWarningLevelRatio: appends are refused above it and, as Apache marks the
/// disk OK again only at or below diskSpaceCleanForciblyRatio, accepted again there,
/// not as soon as usage dips under the warning level.
#[test]
fn appends_refused_above_the_warning_level_resume_at_the_forcibly_ratio() {
    let disk = SimDisk::new(5);
    let clock = ManualClock::new(0);
    let (store, _) = open(&disk, &clock, &StoreConfig::for_tests()).unwrap();
    put(&store, 0, 0, 1000, "").unwrap();
    block_on(store.flush_all()).unwrap();
    let used = disk_used_bytes(&disk);
    // (used percent, appends refused after the disk check)
    let steps = [(80, false), (90, false), (91, true), (88, true), (86, true), (85, false), (89, false), (95, true), (10, false)];
    for (seq, (percent, refused)) in steps.into_iter().enumerate() {
        // Rounded up: usage at most `percent`, so 90 % is "at", not "above", the level.
        disk.set_faults(FaultConfig { capacity_bytes: (used * 100).div_ceil(percent), ..FaultConfig::default() });
        block_on(store.check_disk()).unwrap();
        assert_eq!(store.refusing_writes(), refused, "at {percent} %");
        let put_result = put(&store, 0, 1 + seq as u64, 10, "");
        assert_eq!(matches!(put_result, Err(StoreError::DiskFull { .. })), refused, "at {percent} %: {put_result:?}");
        // A condition that holds is not counted (nor logged) again at the next check.
        block_on(store.check_disk()).unwrap();
    }
    // Crossings, each counted once: past diskMaxUsedSpaceRatio (75 %) at 80 %, past the
    // refuse watermark at 91 % and again at 95 % (after resuming at 85 %).
    assert_eq!(store.stats().disk_watermark_crossings, 3);
}

/// UPDATE_BROKER_CONFIG's retention keys reach a running store: the watermarks in
/// force change at the next disk check.
#[test]
fn watermarks_changed_at_runtime_apply_at_the_next_check() {
    let disk = SimDisk::new(6);
    let clock = ManualClock::new(0);
    let config = StoreConfig::for_tests();
    let (store, _) = open(&disk, &clock, &config).unwrap();
    put(&store, 0, 0, 1000, "").unwrap();
    block_on(store.flush_all()).unwrap();
    let used = disk_used_bytes(&disk);
    disk.set_faults(FaultConfig { capacity_bytes: (used * 100).div_ceil(80), ..FaultConfig::default() });
    block_on(store.check_disk()).unwrap();
    assert!(!store.refusing_writes(), "80 % is below the 90 % refuse watermark");
    store.set_runtime_config(&StoreConfig { disk_force_clean_ratio: 0.70, disk_refuse_ratio: 0.75, ..config.clone() });
    block_on(store.check_disk()).unwrap();
    assert!(store.refusing_writes(), "80 % is above the new 75 % watermark");
    assert!(matches!(put(&store, 0, 1, 10, ""), Err(StoreError::DiskFull { .. })));
    store.set_runtime_config(&config);
    block_on(store.check_disk()).unwrap();
    assert!(!store.refusing_writes(), "back to 90 %: 80 % is at or below the 85 % resume mark");
}

/// UPDATE_BROKER_CONFIG's part for the store: only the settings a running store may
/// change are taken (never its geometry or record bound, which describe what is on
/// disk), and a changed flush interval wakes the flusher's wait at once.
#[test]
fn runtime_config_takes_only_runtime_settings_and_wakes_the_flusher() {
    let disk = SimDisk::new(7);
    let clock = ManualClock::new(0);
    let config = StoreConfig { flush_mode: FlushMode::Async, ..StoreConfig::for_tests() };
    let (store, _) = open(&disk, &clock, &config).unwrap();
    let wanted = |store: &SimStore| block_on(futures_lite::future::poll_once(store.flush_wanted())).is_some();
    assert!(!wanted(&store), "nothing dirty, nothing changed");
    let asked = StoreConfig {
        flush_interval_ms: 50,
        file_reserved_hours: 5,
        delete_when_hours: vec![1, 13],
        clean_file_forcibly: false,
        segment_bytes: config.segment_bytes * 2,
        record_bytes_max: 1,
        dirty_bytes_max: 1,
        ..config.clone()
    };
    store.set_runtime_config(&asked);
    let got = store.runtime_config();
    assert_eq!((got.flush_interval_ms, got.file_reserved_hours, got.delete_when_hours.clone(), got.clean_file_forcibly), (50, 5, vec![1, 13], false));
    assert_eq!((got.segment_bytes, got.record_bytes_max, got.dirty_bytes_max), (config.segment_bytes, config.record_bytes_max, config.dirty_bytes_max));
    assert_eq!(*store.config(), config, "the store's own configuration is what it opened with");
    assert!(wanted(&store), "a new flush interval wakes the flusher");
    assert!(!wanted(&store), "once");
    store.set_runtime_config(&asked);
    assert!(!wanted(&store), "the same interval again wakes nothing");
    put(&store, 0, 0, 100, "").unwrap();
    assert!(!wanted(&store), "under flush_min_bytes the flusher waits for its interval");
}

#[test]
fn clean_reopen_after_records_without_keys() {
    // The index's "replay from" after a clean stop is one past its last key, which is
    // not a record boundary when keyless records follow: recovery must not start there.
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(0);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        put(&store, 0, 0, 100, "KEYS\u{1}first\u{2}").unwrap();
        for seq in 1..5 {
            put(&store, 0, seq, 100, "").unwrap();
        }
        block_on(store.close()).unwrap();
        drop(store);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(!report.unclean);
        assert_eq!(read_all(&store).len(), 5);
        assert_eq!(block_on(store.query_by_key(TOPIC, "first", 4, 0, i64::MAX)).unwrap().len(), 1);
    }
}

/// Puts one message and returns its physical offset, flushing first when the store is
/// busy (the window is small in `for_tests`).
fn put_at(store: &SimStore, queue_id: i32, seq: u64, len: usize, props: &str) -> u64 {
    let body = body_for(seq, len);
    let msg = MessageToStore {
        topic: TOPIC,
        queue_id,
        flag: 0,
        body: &body,
        properties: props,
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: "127.0.0.1:5000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    };
    match store.put(&msg) {
        Ok(r) => r.phys_offset,
        Err(StoreError::Busy { .. }) => {
            block_on(store.flush()).unwrap();
            store.put(&msg).expect("put after a flush").phys_offset
        }
        Err(e) => panic!("put {seq}: {e}"),
    }
}

/// Every read fails (EIO) while the returned guard lives; writes and syncs do not.
fn reads_fail(disk: &SimDisk) -> impl Drop + '_ {
    struct Restore<'a>(&'a SimDisk);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set_faults(FaultConfig::default());
        }
    }
    disk.set_faults(FaultConfig { read_eio_per_million: 1_000_000, ..FaultConfig::default() });
    Restore(disk)
}

/// The `Read` error's file and offset, or a panic naming what came instead.
fn read_error<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>) -> (PathBuf, u64) {
    match result {
        Err(StoreError::Read { file, offset, source }) => {
            assert!(!StoreError::Read { file: file.clone(), offset, source }.is_fatal(), "{what}: a read error is not fatal");
            (file, offset)
        }
        other => panic!("{what}: expected StoreError::Read, got {other:?}"),
    }
}

#[test]
fn read_eio_is_not_fatal_names_file_and_offset_and_is_counted() {
    // About 1.4 MB: the CommitLog's tail keeps whole 1 MiB chunks, so only past the
    // first MiB are the oldest records served from the segment files alone.
    const MESSAGES: u64 = 1600;
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        // Every read goes to the device (no read-ahead windows answering from memory).
        let config = StoreConfig { read_ahead_windows_max: 0, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let mut phys = Vec::new();
        for seq in 0..MESSAGES {
            let props = format!("KEYS\u{1}k{seq}\u{2}");
            phys.push(put_at(&store, (seq % 2) as i32, seq, rng.gen_range(500..1200), &props));
            clock.advance_ms(10);
        }
        // The CommitLog is on disk and its first MiB is out of the tail; the
        // ConsumeQueues are not flushed yet, so their entries are all in memory and a
        // queue read touches only CommitLog segments.
        block_on(store.flush_all()).unwrap();
        let seg0 = root().join("commitlog").join(format!("{:020}", 0));
        // Queue 0's message at queue offset 4 (seq 8) lies inside the first segment.
        assert!(phys[8] > 0 && phys[8] < config.segment_bytes, "seq 8 at {} is in segment 0", phys[8]);

        // 1. A pull-style read of a sealed segment.
        let (file, offset) = {
            let _eio = reads_fail(&disk);
            read_error("get_messages", block_on(store.get_messages(TOPIC, 0, 4, 1, 1 << 20, &|_| true)))
        };
        assert_eq!((file.as_path(), offset), (seg0.as_path(), phys[8]), "names the segment and the record's offset in it");
        assert_eq!(store.failure(), None, "a read error does not fail the store");
        assert_eq!(store.stats().read_errors, 1);

        // The same read works once the device does, and so does everything else.
        let got = block_on(store.get_messages(TOPIC, 0, 4, 1, 1 << 20, &|_| true)).unwrap();
        assert_eq!(got.status, GetStatus::Found);
        assert_eq!(StoredMessageView::parse_verified(&got.records).unwrap().body()[..8], 8u64.to_be_bytes());
        assert_eq!(read_all(&store).len(), MESSAGES as usize);

        // 2. Appends and group commits go on while reads fail (no read on the write
        // path), and what they stored reads back afterwards.
        {
            let _eio = reads_fail(&disk);
            for seq in MESSAGES..MESSAGES + 20 {
                put_at(&store, 1, seq, 300, "");
            }
            block_on(store.flush_all()).expect("a flush while reads fail");
            // The newest records are still in the tail: served without the device.
            let tail = block_on(store.get_messages(TOPIC, 1, store.max_offset(TOPIC, 1) - 1, 1, 1 << 20, &|_| true)).unwrap();
            assert_eq!(tail.status, GetStatus::Found);
        }
        block_on(store.flush_logics()).expect("queues, index and checkpoint are written");
        assert_eq!(read_all(&store).len(), MESSAGES as usize + 20);
        assert_eq!(store.failure(), None);

        // 3. Every other read path: ConsumeQueue files (flushed now), single records,
        // time searches, key queries.
        let before = store.stats().read_errors;
        {
            let _eio = reads_fail(&disk);
            let (file, offset) = read_error("cq read", block_on(store.get_messages(TOPIC, 1, 2, 1, 1 << 20, &|_| true)));
            assert_eq!(file, root().join("consumequeue").join(TOPIC).join("1").join(format!("{:020}", 0)), "names the ConsumeQueue file");
            assert_eq!(offset, 2 * 20, "names the entry's offset");
            let (file, offset) = read_error("read_record", block_on(store.read_record(phys[8], None)));
            assert_eq!((file.as_path(), offset), (seg0.as_path(), phys[8]));
            read_error("earliest_store_time", block_on(store.earliest_store_time(TOPIC, 0)));
            read_error("search_offset_by_time", block_on(store.search_offset_by_time(TOPIC, 0, 1_700_000_000_050)));
            let (file, _) = read_error("query_by_key", block_on(store.query_by_key(TOPIC, "k8", 4, 0, i64::MAX)));
            assert!(file.starts_with(root()), "names a file of the store: {}", file.display());
        }
        assert_eq!(store.stats().read_errors, before + 5, "each failed read is counted once");
        assert_eq!(store.failure(), None);
        assert_eq!(block_on(store.query_by_key(TOPIC, "k8", 4, 0, i64::MAX)).unwrap().len(), 1);
        assert_eq!(block_on(store.earliest_store_time(TOPIC, 0)).unwrap(), Some(1_700_000_000_000));

        // Writes stay fatal (fsyncgate): this change is about reads only.
        put_at(&store, 0, MESSAGES + 20, 100, "");
        disk.set_faults(FaultConfig { sync_eio_per_million: 1_000_000, ..FaultConfig::default() });
        assert!(block_on(store.flush()).unwrap_err().is_fatal());
        assert!(store.failure().is_some());
    }
}

// ---------------------------------------------------------------- replication (issue 13)

/// The replica's store, on its own disk (a slave is another machine).
fn open_replica(disk: &SimDisk, clock: &ManualClock, config: &StoreConfig) -> Result<(SimStore, RecoveryReport), StoreError> {
    open(disk, clock, config)
}

/// Replicates everything the master holds past the replica's end, in batches of at most
/// `batch_bytes` whole records (as the HA stream does); returns the records appended.
fn catch_up(master: &SimStore, replica: &SimStore, batch_bytes: usize) -> u64 {
    // A master streams only what is durable.
    block_on(master.flush_all()).unwrap();
    let mut appended = 0;
    loop {
        let from = ShardId(0).phys(replica.write_offset());
        let bytes = block_on(master.read_for_replica(from, batch_bytes)).expect("master read").expect("within retention");
        if bytes.is_empty() {
            return appended;
        }
        assert!(bytes.len() <= batch_bytes.max(64 * 1024), "batch of {} bytes over {batch_bytes}", bytes.len());
        match replica.append_replicated(from, &bytes) {
            Ok(r) => {
                appended += r.records;
                assert_eq!(r.end_phys, from + r.bytes_consumed as u64);
            }
            Err(StoreError::Busy { .. }) => {}
            Err(e) => panic!("append at {from}: {e}"),
        }
        block_on(replica.flush()).unwrap();
    }
}

/// Both stores hold the same queues with the same entries, and the same log bytes.
fn assert_same(master: &SimStore, replica: &SimStore) {
    block_on(master.flush_all()).unwrap();
    block_on(replica.flush_all()).unwrap();
    assert_eq!(master.write_offset(), replica.write_offset(), "log ends");
    for q in master.queue_ids(TOPIC) {
        let (min, max) = (master.min_offset(TOPIC, q), master.max_offset(TOPIC, q));
        assert_eq!((replica.min_offset(TOPIC, q), replica.max_offset(TOPIC, q)), (min, max), "queue {q} offsets");
        let a = block_on(master.cq_entries(TOPIC, q, min, max - min)).unwrap();
        let b = block_on(replica.cq_entries(TOPIC, q, min, max - min)).unwrap();
        assert_eq!(a, b, "queue {q} entries");
    }
    assert_eq!(read_all(master), read_all(replica), "messages");
    let len = master.write_offset() as usize;
    let a = block_on(master.read_for_replica(ShardId(0).phys(0), len)).unwrap().unwrap();
    let b = block_on(replica.read_for_replica(ShardId(0).phys(0), len)).unwrap().unwrap();
    assert!(a == b, "log bytes differ");
}

#[test]
fn a_replica_holds_the_same_bytes_queues_and_keys_across_rolls_and_crashes() {
    for seed in seeds(12) {
        let _guard = SeedGuard(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4a11);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig { flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() };
        let master_disk = SimDisk::new(seed);
        let replica_disk = SimDisk::new(seed + 1_000_000);
        let (master, _) = open(&master_disk, &clock, &config).unwrap();
        let (mut replica, _) = open_replica(&replica_disk, &clock, &config).unwrap();
        let mut seq = 0u64;
        for round in 0..4 {
            for _ in 0..rng.gen_range(20..200) {
                let props = format!("KEYS\u{1}k{seq}\u{2}TAGS\u{1}t{}\u{2}", seq % 3);
                match put(&master, rng.gen_range(0..4), seq, rng.gen_range(8..5000), &props) {
                    Ok(_) => seq += 1,
                    Err(StoreError::Busy { .. }) => block_on(master.flush()).map(|_| ()).unwrap(),
                    Err(e) => panic!("put: {e}"),
                }
                if rng.gen_bool(0.05) {
                    block_on(master.prepare_next_segment()).unwrap();
                    block_on(replica.prepare_next_segment()).unwrap();
                }
            }
            block_on(master.flush_all()).unwrap();
            let batch = [512, 4096, 65_536, 1 << 20][rng.gen_range(0..4)];
            // The replica writes what it receives through its own group commit.
            loop {
                let from = ShardId(0).phys(replica.write_offset());
                let bytes = block_on(master.read_for_replica(from, batch)).unwrap().unwrap();
                if bytes.is_empty() {
                    break;
                }
                match replica.append_replicated(from, &bytes) {
                    Ok(_) => {}
                    Err(StoreError::Busy { .. }) => {}
                    Err(e) => panic!("round {round}: append at {from}: {e}"),
                }
                block_on(replica.flush()).unwrap();
                if rng.gen_bool(0.2) {
                    block_on(replica.prepare_next_segment()).unwrap();
                }
            }
            block_on(replica.flush_all()).unwrap();
            block_on(replica.flush_logics()).unwrap();
            assert_same(&master, &replica);
            // A key lookup finds the replicated record on the replica.
            let k = format!("k{}", seq.saturating_sub(1));
            assert_eq!(block_on(replica.query_by_key(TOPIC, &k, 4, 0, i64::MAX)).unwrap().len(), 1, "key {k} on the replica");
            if round % 2 == 1 {
                // The replica loses power mid-stream: it recovers a prefix and resumes
                // from its own end.
                for _ in 0..rng.gen_range(1..40) {
                    let props = format!("KEYS\u{1}k{seq}\u{2}");
                    if put(&master, rng.gen_range(0..4), seq, rng.gen_range(8..3000), &props).is_ok() {
                        seq += 1;
                    }
                }
                block_on(master.flush_all()).unwrap();
                let from = ShardId(0).phys(replica.write_offset());
                let bytes = block_on(master.read_for_replica(from, 1 << 20)).unwrap().unwrap();
                let _ = replica.append_replicated(from, &bytes);
                drop(replica);
                replica_disk.crash();
                replica = open_replica(&replica_disk, &clock, &config).expect("replica recovers").0;
                catch_up(&master, &replica, 8192);
                block_on(replica.flush_all()).unwrap();
                assert_same(&master, &replica);
            }
        }
    }
}

#[test]
fn a_replica_refuses_what_does_not_continue_its_log() {
    let clock = ManualClock::new(1_700_000_000_000);
    let config = StoreConfig { flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() };
    let (master, _) = open(&SimDisk::new(1), &clock, &config).unwrap();
    let (replica, _) = open(&SimDisk::new(2), &clock, &config).unwrap();
    for seq in 0..10 {
        put(&master, (seq % 2) as i32, seq, 100, "").unwrap();
    }
    // Nothing is streamed before it is durable on the master.
    assert_eq!(block_on(master.read_for_replica(ShardId(0).phys(0), 1 << 20)).unwrap(), Some(Vec::new()));
    block_on(master.flush_all()).unwrap();
    let all = block_on(master.read_for_replica(ShardId(0).phys(0), 1 << 20)).unwrap().unwrap();
    let first = StoredMessageView::parse(&all).unwrap().total_size();
    // check(batch start, bytes) -> the error's words
    let check = |from: u64, bytes: &[u8], words: &str| {
        let err = replica.append_replicated(from, bytes).expect_err("refused");
        assert!(err.to_string().contains(words), "{err}");
        assert_eq!(replica.write_offset(), 0, "nothing appended");
    };
    check(ShardId(0).phys(first as u64), &all[first..], "starts at");
    check(ShardId(1).phys(0), &all, "starts at");
    check(0, &all[..first - 1], "does not fit");
    let mut flipped = all.clone();
    flipped[first - 10] ^= 0x40;
    check(0, &flipped, "does not continue");
    check(0, &vec![0u8; 64], "not a record");
    // The same records twice: the second copy's physical offsets are wrong.
    let mut twice = all[..first].to_vec();
    twice.extend_from_slice(&all[..first]);
    check(0, &twice, "physical offset");
    // Whole, valid: accepted in one go, then the next batch continues.
    let r = replica.append_replicated(0, &all[..first]).unwrap();
    assert_eq!((r.records, r.end_phys), (1, first as u64));
    replica.append_replicated(first as u64, &all[first..]).unwrap();
    assert_eq!(block_on(master.read_for_replica(ShardId(0).phys(0) + all.len() as u64, 1024)).unwrap(), Some(Vec::new()));
}

/// Both stores hold the same queues, entries, messages and log bytes from where the
/// master's retained log begins (a re-seeded replica holds nothing below).
fn assert_same_from_log_start(master: &SimStore, replica: &SimStore) {
    block_on(master.flush_all()).unwrap();
    block_on(replica.flush_all()).unwrap();
    assert_eq!((master.log_start(), master.write_offset()), (replica.log_start(), replica.write_offset()), "log start and end");
    for q in master.queue_ids(TOPIC) {
        let max = master.max_offset(TOPIC, q);
        // Entries still in the master's queue files below its log start point at deleted
        // records; from the replica's minimum on both hold the same.
        let min = replica.min_offset(TOPIC, q);
        assert!(min >= master.min_offset(TOPIC, q) && replica.max_offset(TOPIC, q) == max, "queue {q}: replica [{min}, {}), master [{}, {max})", replica.max_offset(TOPIC, q), master.min_offset(TOPIC, q));
        let a = block_on(master.cq_entries(TOPIC, q, min, max - min)).unwrap();
        let b = block_on(replica.cq_entries(TOPIC, q, min, max - min)).unwrap();
        assert_eq!(a, b, "queue {q} entries");
        // The replica's first entry is its first record there.
        if let Some(first) = b.first() {
            assert!(first.phys_offset >= ShardId(0).phys(replica.log_start()), "queue {q}: first entry below the log start");
        }
    }
    let strip = |v: Vec<(i32, u64, u64)>| -> Vec<(i32, u64, u64)> { v.into_iter().filter(|&(q, o, _)| o >= replica.min_offset(TOPIC, q)).collect() };
    assert_eq!(strip(read_all(master)), read_all(replica), "messages");
    let len = (master.write_offset() - master.log_start()) as usize;
    let from = ShardId(0).phys(master.log_start());
    let a = block_on(master.read_for_replica(from, len)).unwrap().unwrap();
    let b = block_on(replica.read_for_replica(from, len)).unwrap().unwrap();
    assert!(a == b, "log bytes differ");
}

#[test]
fn an_empty_replica_is_reseeded_where_the_masters_retained_log_begins() {
    for seed in seeds(8) {
        let _guard = SeedGuard(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
        let hour_ms = 3_600_000i64;
        let clock = ManualClock::new(0);
        let config = StoreConfig { file_reserved_hours: 66, delete_when_hours: vec![4], flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() };
        let master_disk = SimDisk::new(seed);
        let replica_disk = SimDisk::new(seed + 1_000_000);
        let (master, _) = open(&master_disk, &clock, &config).unwrap();
        // Records over 14 hours on 4 queues; queue 3 gets its first record late (it
        // starts in the retained part: the replica holds it from offset 0).
        let mut seq = 0u64;
        // Half the seeds write enough that queues span several ConsumeQueue files
        // (1024 entries each), so the replica's queues begin in a later file.
        let (records, small) = if seed.is_multiple_of(2) { (500u64, false) } else { (6000, true) };
        for i in 0..records {
            let q = if i < records * 4 / 5 { rng.gen_range(0..3) } else { rng.gen_range(0..4) };
            let props = format!("KEYS\u{1}k{seq}\u{2}");
            let len = if small { rng.gen_range(50..400) } else { rng.gen_range(100..2000) };
            match put(&master, q, seq, len, &props) {
                Ok(_) => seq += 1,
                Err(StoreError::Busy { .. }) => block_on(master.flush()).map(|_| ()).unwrap(),
                Err(e) => panic!("put: {e}"),
            }
            if i % (records / 14) == records / 14 - 1 {
                clock.advance_ms(hour_ms);
            }
        }
        block_on(master.flush_all()).unwrap();
        block_on(master.flush_logics()).unwrap();
        clock.set_ms(3 * 24 * hour_ms + 4 * hour_ms + 30 * 60_000);
        assert!(block_on(master.clean_expired()).unwrap() >= 1, "retention deleted the log's start");
        assert!(master.log_start() > 0);
        // A replica that starts from 0 is below retention.
        assert_eq!(block_on(master.read_for_replica(ShardId(0).phys(0), 1 << 20)).unwrap(), None);
        let (replica, _) = open_replica(&replica_disk, &clock, &config).unwrap();
        // check(offset, words): re-seeding is refused there.
        let check = |phys: u64, words: &str| {
            let err = block_on(replica.reseed_at(phys)).expect_err("refused");
            assert!(err.to_string().contains(words), "{err}");
        };
        check(ShardId(0).phys(0), "segment start above 0");
        check(ShardId(0).phys(master.log_start() + 4096), "segment start above 0");
        check(ShardId(1).phys(master.log_start()), "not an offset of this shard");
        block_on(replica.reseed_at(ShardId(0).phys(master.log_start()))).unwrap();
        catch_up(&master, &replica, [4096, 65_536, 1 << 20][rng.gen_range(0..3)]);
        block_on(replica.flush_logics()).unwrap();
        assert_same_from_log_start(&master, &replica);
        // Both know their (same) first record's store time: the master from retention's
        // look at it, the replica from appending it.
        assert!(master.earliest_message_time().is_some_and(|ms| ms > 0));
        assert_eq!(replica.earliest_message_time(), master.earliest_message_time(), "earliest message of a re-seeded replica");
        assert_eq!(replica.min_offset(TOPIC, 3), 0, "a queue born in the retained part starts at 0");
        assert!((0..3).all(|q| replica.min_offset(TOPIC, q) > 0), "queues older than the log start begin mid-queue");
        let last_key = format!("k{}", seq - 1);
        // Later sends, with the replica's queue and log tails flushed and trimmed.
        for _ in 0..50 {
            if put(&master, rng.gen_range(0..4), seq, rng.gen_range(50..400), "").is_ok() {
                seq += 1;
            }
        }
        catch_up(&master, &replica, 1 << 20);
        block_on(replica.flush_logics()).unwrap();
        assert_same_from_log_start(&master, &replica);
        // A re-seeded store holds records: it is not re-seeded again.
        let err = block_on(replica.reseed_at(ShardId(0).phys(master.log_start()))).expect_err("refused");
        assert!(err.to_string().contains("holds records"), "{err}");
        // Keys of replicated records are found on the replica.
        assert_eq!(block_on(replica.query_by_key(TOPIC, &last_key, 4, 0, i64::MAX)).unwrap().len(), 1);
        // More records, some streamed before the replica loses power; it recovers the
        // same start without rebuilding its queues and resumes from its end.
        // (With small records the replica's queues grow into their next file.)
        let more = if small { 2_000 } else { rng.gen_range(10..80) };
        for _ in 0..more {
            if put(&master, rng.gen_range(0..4), seq, rng.gen_range(50..400), "").is_ok() {
                seq += 1;
            }
        }
        block_on(master.flush_all()).unwrap();
        let from = ShardId(0).phys(replica.write_offset());
        let bytes = block_on(master.read_for_replica(from, 1 << 20)).unwrap().unwrap();
        let _ = replica.append_replicated(from, &bytes);
        drop(replica);
        replica_disk.crash();
        let (replica, report) = open_replica(&replica_disk, &clock, &config).expect("re-seeded replica recovers");
        assert_eq!(report.rebuilt_queues, 0, "queues that start mid-file load as they are: {report:?}");
        catch_up(&master, &replica, 8192);
        assert_same_from_log_start(&master, &replica);
        // A clean restart too.
        block_on(replica.close()).unwrap();
        drop(replica);
        let (replica, report) = open_replica(&replica_disk, &clock, &config).unwrap();
        assert_eq!(report.rebuilt_queues, 0, "{report:?}");
        assert_same_from_log_start(&master, &replica);
    }
}

#[test]
fn records_not_yet_flushed_stay_readable_when_the_next_segment_is_preallocated_first() {
    // The segment holding the log's start is created by the first flush; the
    // pre-allocator may create the next one before that. The log still starts at 0.
    let clock = ManualClock::new(1_700_000_000_000);
    let config = StoreConfig { dirty_bytes_max: 60 * 1024, flush_min_bytes: 60 * 1024, ..StoreConfig::for_tests() };
    let disk = SimDisk::new(3);
    let (store, _) = open(&disk, &clock, &config).unwrap();
    let mut seq = 0;
    while store.write_offset() < 40 * 1024 {
        put(&store, 0, seq, 1000, "").unwrap();
        seq += 1;
    }
    assert!(store.next_segment_wanted());
    assert!(block_on(store.prepare_next_segment()).unwrap());
    assert_eq!(store.log_start(), 0);
    let got = block_on(store.get_messages(TOPIC, 0, 0, 8, 1 << 20, &|_| true)).unwrap();
    assert_eq!((got.status, got.record_count), (GetStatus::Found, 8));
    block_on(store.flush_all()).unwrap();
    assert_eq!(read_all(&store).len() as u64, seq);
}

/// Puts `count` keyed records from `first_seq` over 3 topics × 4 queues (a logics
/// flush then has a dozen queues and the index to write), flushing when busy; returns
/// (topic, queue, seq) in append order.
fn put_spread(store: &SimStore, first_seq: u64, count: u64) -> Vec<(&'static str, i32, u64)> {
    const TOPICS: [&str; 3] = [TOPIC, "Second", "Third"];
    let mut out = Vec::new();
    for seq in first_seq..first_seq + count {
        let (topic, queue_id) = (TOPICS[(seq % 3) as usize], ((seq / 3) % 4) as i32);
        let props = format!("KEYS\u{1}key-{seq}\u{2}");
        if put_with(store, topic, queue_id, seq, 300, &props).is_err() {
            block_on(store.flush()).unwrap();
            put_with(store, topic, queue_id, seq, 300, &props).unwrap();
        }
        out.push((topic, queue_id, seq));
    }
    out
}

/// A power cut before each data operation of a logics flush in turn (every queue's
/// write and sync in flight together, the index's merged writes, the checkpoint): every
/// record made durable by the CommitLog's flush comes back, in every queue, once, and
/// its key is found again.
#[test]
fn a_power_cut_at_every_point_of_a_batched_logics_flush_loses_no_durable_record() {
    for seed in seeds(6) {
        let _guard = SeedGuard(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig::for_tests();
        let mut cut_at = 0u64;
        loop {
            let _inner = SeedGuard(seed * 10_000 + cut_at);
            let disk = SimDisk::new(seed * 10_000 + cut_at);
            let (store, _) = open(&disk, &clock, &config).unwrap();
            let mut expected = put_spread(&store, 0, 40 + seed * 7);
            block_on(store.flush_all()).unwrap();
            block_on(store.flush_logics()).unwrap();
            expected.extend(put_spread(&store, expected.len() as u64, 60 + seed * 11));
            block_on(store.flush_all()).unwrap();
            disk.crash_after_ops(Some(cut_at));
            let finished = block_on(store.flush_logics()).is_ok();
            disk.crash_after_ops(None);
            if finished {
                disk.crash();
            }
            drop(store);
            let (store, report) = open(&disk, &clock, &config).unwrap_or_else(|e| panic!("cut at op {cut_at}: recovery refused: {e}"));
            assert!(report.unclean, "cut at op {cut_at}");
            assert_eq!(report.rebuilt_queues, 0, "cut at op {cut_at}: no queue rebuilt from the whole log ({report:?})");
            for topic in [TOPIC, "Second", "Third"] {
                let mut want: Vec<(i32, u64)> = expected.iter().filter(|e| e.0 == topic).map(|e| (e.1, e.2)).collect();
                want.sort();
                let mut got: Vec<(i32, u64)> = read_topic(&store, topic).into_iter().map(|(q, _, seq)| (q, seq)).collect();
                got.sort();
                assert_eq!(got, want, "cut at op {cut_at}: topic {topic} holds every durable record once");
            }
            for &(topic, _, seq) in expected.iter().step_by(7) {
                let hits = block_on(store.query_by_key(topic, &format!("key-{seq}"), 4, 0, i64::MAX)).unwrap();
                assert_eq!(hits.len(), 1, "cut at op {cut_at}: key-{seq} indexed once");
            }
            if finished {
                assert!(cut_at > 12, "the flush did at least one write and sync per queue ({cut_at} ops)");
                break;
            }
            cut_at += 1;
        }
    }
}

/// The checkpoint may fall at most `checkpoint_lag_bytes_max` behind the log: the
/// logics flusher is called early at half of it, appends past it are refused as busy
/// (nothing stored), and after a logics flush they go on. A crash then re-reads at most
/// the bound.
#[test]
fn appends_stop_at_the_checkpoint_lag_bound_and_recovery_rereads_at_most_that() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig { checkpoint_lag_bytes_max: 96 * 1024, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let mut seq = 0u64;
        let mut woken_at = None;
        let refused_lag = loop {
            match put(&store, (seq % 4) as i32, seq, 500 + (seq * 37 + seed) as usize % 700, "") {
                Ok(_) => seq += 1,
                Err(StoreError::Busy { .. }) => {
                    block_on(store.flush()).unwrap();
                }
                Err(StoreError::CheckpointBusy { lag_bytes, max_bytes }) => {
                    assert_eq!(max_bytes, 96 * 1024);
                    break lag_bytes;
                }
                Err(e) => panic!("put: {e}"),
            }
            if woken_at.is_none() && futures_lite::future::block_on(futures_lite::future::poll_once(store.logics_wanted())).is_some() {
                woken_at = Some(store.checkpoint_lag_bytes());
            }
        };
        let woken_at = woken_at.expect("the logics flusher was called before appends stopped");
        assert!((48 * 1024..96 * 1024).contains(&woken_at), "called at half the bound: {woken_at}");
        assert!(refused_lag <= 96 * 1024, "lag {refused_lag} within the bound");
        let stored_before = seq;
        block_on(store.flush_all()).unwrap();
        block_on(store.flush_logics()).unwrap();
        assert_eq!(store.checkpoint_lag_bytes(), 0);
        put(&store, 0, seq, 500, "").expect("appends go on after the logics flush");
        seq += 1;
        // Fill up to just under the bound again, make it durable, crash.
        while put(&store, (seq % 4) as i32, seq, 600, "").is_ok() || block_on(store.flush()).map(|_| false).unwrap() {
            seq += 1;
        }
        block_on(store.flush_all()).unwrap();
        disk.crash();
        drop(store);
        let (store, report) = open(&disk, &clock, &config).unwrap();
        assert!(report.end_offset - report.scanned_from <= 96 * 1024, "re-read {} bytes (report {report:?})", report.end_offset - report.scanned_from);
        assert_eq!(read_all(&store).len() as u64, seq, "every record back ({stored_before} before the first refusal)");
    }
}

/// With `write_through` a group commit is its write alone (O_DSYNC: durable when it
/// returns): no fdatasync follows, and what it acknowledged survives a power cut.
/// Without it, the same flush is a write and a sync.
#[test]
fn a_write_through_group_commit_is_one_write_and_survives_a_power_cut() {
    for (write_through, syncs_per_flush) in [(true, 0), (false, 1)] {
        for seed in seeds(4) {
            let _guard = SeedGuard(seed);
            let disk = SimDisk::new(seed);
            let clock = ManualClock::new(1_700_000_000_000);
            let config = StoreConfig { flush_mode: FlushMode::Sync, write_through: Some(write_through), ..StoreConfig::for_tests() };
            let (store, _) = open(&disk, &clock, &config).unwrap();
            // The first flush creates (pre-zeroes) the first segment: not a group commit's cost.
            put(&store, 0, 0, 700, "").unwrap();
            block_on(store.flush()).unwrap();
            let mut acked = 1u64;
            for seq in 1..20u64 {
                let ticket = put(&store, (seq % 2) as i32, seq, 700, "").unwrap();
                let before = disk.stats();
                block_on(store.flush()).unwrap();
                let after = disk.stats();
                block_on(store.wait_durable(ticket)).unwrap();
                acked = seq + 1;
                assert_eq!(after.writes - before.writes, 1, "write_through {write_through}: one write per group commit");
                assert_eq!(after.syncs - before.syncs, syncs_per_flush, "write_through {write_through}: syncs per group commit");
            }
            disk.crash();
            drop(store);
            let (store, _) = open(&disk, &clock, &config).unwrap();
            assert_eq!(read_all(&store).len() as u64, acked, "write_through {write_through}: every acknowledged record back");
        }
    }
}

/// Cold reads go through read-ahead windows: a window first read while the durable end
/// lay inside it must not hide what became durable there later, and a window never
/// serves bytes that were not durable when it was read.
#[test]
fn read_ahead_windows_see_what_became_durable_after_them() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        // Segments larger than a window, a tiny tail: almost every read is cold.
        let config = StoreConfig { segment_bytes: 4 * 1024 * 1024, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let mut seq = 0u64;
        for round in 0..6u64 {
            for _ in 0..(40 + seed * 3 + round * 7) {
                if put(&store, (seq % 3) as i32, seq, 300 + (seq % 5) as usize * 100, "").is_err() {
                    block_on(store.flush()).unwrap();
                    put(&store, (seq % 3) as i32, seq, 300 + (seq % 5) as usize * 100, "").unwrap();
                }
                seq += 1;
            }
            block_on(store.flush_all()).unwrap();
            // Everything so far, each round: the windows read in earlier rounds held less.
            let got = read_all(&store);
            assert_eq!(got.len() as u64, seq, "round {round}: every durable record readable");
        }
    }
}

/// A cold pull copies only its own records out of the windows (the other queues'
/// records between them never reach its answer), names the next window for a
/// background read when that window is whole below the durable end, and a prefetched
/// window is read once: prefetching it again, or while it is held, reads nothing.
#[test]
fn cold_pulls_take_only_their_records_and_prefetch_the_next_window_once() {
    use ringmq_broker::store::engine::READ_AHEAD_WINDOW_BYTES;
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig { segment_bytes: 8 * 1024 * 1024, ..StoreConfig::for_tests() };
        let (store, _) = open(&disk, &clock, &config).unwrap();
        // 8 queues interleaved in runs of a few records, past three windows.
        let queues = 8;
        let mut seq = 0u64;
        while store.flushed_offset() < 3 * READ_AHEAD_WINDOW_BYTES + 4096 {
            let run = 1 + (seq + seed) % 5;
            for _ in 0..run * 40 {
                let queue = ((seq / run) % queues) as i32;
                put_flushing(&store, queue, seq, 200 + ((seq * 7 + seed) % 900) as usize);
                seq += 1;
            }
            block_on(store.flush_all()).unwrap();
        }
        // Every answer holds exactly its queue's records, in offset order.
        let mut prefetches = Vec::new();
        for queue_id in store.queue_ids(TOPIC) {
            let mut offset = 0;
            loop {
                let got = block_on(store.get_messages(TOPIC, queue_id, offset, 64, 1 << 20, &|_| true)).expect("read");
                if got.status != GetStatus::Found {
                    break;
                }
                let mut at = 0;
                let mut n = 0;
                while at < got.records.len() {
                    let view = StoredMessageView::parse_verified(&got.records[at..]).expect("a whole, verified record");
                    assert_eq!(view.queue_id(), queue_id, "seed {seed}: only this queue's records");
                    assert_eq!(view.queue_offset() as u64, offset + n, "seed {seed}: in offset order");
                    at += view.total_size();
                    n += 1;
                }
                assert_eq!(n as usize, got.record_count);
                prefetches.extend(got.prefetch_window);
                offset = got.next_offset;
            }
        }
        // Cold reads of the first windows named the window after them.
        assert!(prefetches.contains(&READ_AHEAD_WINDOW_BYTES), "seed {seed}: the second window is named for prefetch: {prefetches:?}");
        for start in &prefetches {
            assert_eq!(start % READ_AHEAD_WINDOW_BYTES, 0, "seed {seed}: a window start");
            assert!(start + READ_AHEAD_WINDOW_BYTES <= store.flushed_offset(), "seed {seed}: only windows whole below the durable end");
        }
        // The windows are held now: prefetching one again reads nothing.
        let before = disk.stats().reads;
        block_on(store.prefetch_window(READ_AHEAD_WINDOW_BYTES));
        assert_eq!(disk.stats().reads, before, "seed {seed}: a held window is not read again");
        // A window past the durable end is never prefetched.
        let beyond = (store.flushed_offset() / READ_AHEAD_WINDOW_BYTES + 1) * READ_AHEAD_WINDOW_BYTES;
        block_on(store.prefetch_window(beyond));
        assert_eq!(disk.stats().reads, before, "seed {seed}: nothing past the durable end is read");
        // With the windows gone (a fresh store over the same disk), a prefetch reads the
        // window once, and a second prefetch of it reads nothing.
        drop(store);
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let before = disk.stats().reads;
        block_on(store.prefetch_window(READ_AHEAD_WINDOW_BYTES));
        let after_first = disk.stats().reads;
        assert!(after_first > before, "seed {seed}: the prefetch read the window");
        block_on(store.prefetch_window(READ_AHEAD_WINDOW_BYTES));
        assert_eq!(disk.stats().reads, after_first, "seed {seed}: read once");
        assert_eq!(read_all(&store).len() as u64, seq, "seed {seed}: every record readable after prefetching");
    }
}

/// Pulls take a queue's entries from the ConsumeQueue block an earlier pull read (it
/// reads 4x what it takes): a topic deleted and written again is read from its new
/// entries, never from a block read before the deletion.
#[test]
fn a_recreated_topic_is_read_from_its_new_entries_not_from_blocks_read_before() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let len = 100 + (seed % 7) as usize * 30;
        let bodies_at = |store: &SimStore, offset: u64| -> Vec<Vec<u8>> {
            let got = block_on(store.get_messages(TOPIC, 0, offset, 16, 1 << 20, &|_| true)).expect("read");
            let mut out = Vec::new();
            let mut at = 0;
            while at < got.records.len() {
                let view = StoredMessageView::parse_verified(&got.records[at..]).expect("a whole record");
                out.push(view.body().to_vec());
                at += view.total_size();
            }
            out
        };
        let put_all = |store: &SimStore, seqs: std::ops::Range<u64>| {
            for seq in seqs {
                put_flushing(store, 0, seq, len);
            }
            block_on(store.flush_all()).unwrap();
        };
        put_all(&store, 0..200);
        // Two pulls: the second comes from the block the first read.
        assert_eq!(bodies_at(&store, 0)[0], body_for(0, len), "seed {seed}");
        assert_eq!(bodies_at(&store, 16)[0], body_for(16, len), "seed {seed}");
        assert_eq!(block_on(store.delete_topic(TOPIC)).unwrap(), 1, "seed {seed}");
        put_all(&store, 1000..1200);
        let after = bodies_at(&store, 16);
        assert_eq!(after.len(), 16, "seed {seed}");
        assert_eq!(after[0], body_for(1016, len), "seed {seed}: the new entries, not the old block's");
    }
}

/// The scrub re-reads sealed segments from the device and checks every record: a clean
/// log gives no finding over whole passes; one flipped bit in an old segment is found
/// once per pass, named by file and offset, and the scrub goes on past it.
#[test]
fn the_scrub_finds_a_flipped_bit_in_a_sealed_segment_by_file_and_offset() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let disk = SimDisk::new(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        let config = StoreConfig::for_tests();
        let (store, _) = open(&disk, &clock, &config).unwrap();
        let mut phys = Vec::new();
        for seq in 0..300u64 {
            phys.push(put_at(&store, (seq % 2) as i32, seq, 500 + (seq * 13 + seed) as usize % 600, ""));
        }
        block_on(store.flush_all()).unwrap();
        let segment_bytes = config.segment_bytes;
        let sealed_end = (store.flushed_offset() / segment_bytes) * segment_bytes;
        assert!(sealed_end >= 3 * segment_bytes, "several sealed segments");
        let pass = |store: &SimStore| {
            let mut findings = Vec::new();
            let mut scanned = 0;
            for _ in 0..10_000 {
                let budget = 16 * 1024 + seed * 1000;
                let step = block_on(store.scrub_step(budget)).unwrap();
                // The rate holds: a step reads its budget, plus at most one record.
                assert!(step.scanned_bytes <= budget + config.record_bytes_max, "step read {} bytes for a budget of {budget}", step.scanned_bytes);
                scanned += step.scanned_bytes;
                findings.extend(step.findings);
                if step.pass_ended {
                    return (findings, scanned);
                }
            }
            panic!("no pass ended");
        };
        let (clean, scanned) = pass(&store);
        assert_eq!(clean, vec![], "a clean log has no finding");
        assert!(scanned >= sealed_end, "a pass reads every sealed byte ({scanned} of {sealed_end})");
        // A bit in the body of a record in segment 1.
        let victim = *phys.iter().find(|&&p| p > segment_bytes + 100 && p + 600 < 2 * segment_bytes).unwrap();
        let file = root().join("commitlog").join(format!("{:020}", segment_bytes));
        disk.flip_bit(&file, victim - segment_bytes + 200, (seed % 8) as u8);
        for round in 0..2 {
            let (found, _) = pass(&store);
            assert_eq!(found.len(), 1, "round {round}: one finding ({found:?})");
            assert_eq!((found[0].file.clone(), found[0].offset), (file.clone(), victim - segment_bytes), "round {round}: file and offset of the damaged record");
        }
        assert_eq!(store.stats().scrub_corrupt_records, 2);
        assert_eq!(store.failure(), None, "the scrub never fails the store");
    }
}
