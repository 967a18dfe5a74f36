//! A pending cut (`truncate.pending`, controller mode: docs/design/controller.md §3.4)
//! applied by `open_store`, on the simulated disk: a cut at every record boundary of a
//! log spanning segments (after a clean close or a power cut, with the checkpoint above
//! the cut or not) leaves exactly the records below it, in their queues, stays applied
//! across more restarts, and the log grows again from there; a power cut at every
//! data operation of the cut's open leaves the next open to finish the same cut.
//!
//! `RINGMQ_SEED=S` replays one seed.

use futures_lite::future::block_on;
use ringmq_broker::store::config::StoreConfig;
use ringmq_broker::store::engine::{open_store, GetStatus, MessageToStore, RecoveryReport, ShardId, Store, TRUNCATE_MARKER};
use ringmq_broker::store::error::StoreError;
use ringmq_broker::store::io::sim::SimDisk;
use ringmq_broker::store::io::{Disk, ManualClock};
use ringmq_client::message::stored::StoredMessageView;
use std::path::PathBuf;

type SimStore = Store<SimDisk, ManualClock>;

const TOPIC: &str = "Cut";
const QUEUES: i32 = 3;
/// Records in each log: about one and a half 64 KiB test segments.
const RECORDS: u64 = 90;

struct SeedGuard(u64);
impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing seed: {} (replay with RINGMQ_SEED={})", self.0, self.0);
        }
    }
}

fn seeds(count: u64) -> Vec<u64> {
    match std::env::var("RINGMQ_SEED") {
        Ok(s) => vec![s.parse().expect("RINGMQ_SEED must be a number")],
        Err(_) => (0..count).collect(),
    }
}

fn root() -> PathBuf {
    PathBuf::from("/store/shard-0")
}

fn open(disk: &SimDisk, clock: &ManualClock) -> Result<(SimStore, RecoveryReport), StoreError> {
    block_on(open_store(disk.clone(), clock.clone(), root(), ShardId(0), StoreConfig::for_tests()))
}

fn body_for(seq: u64) -> Vec<u8> {
    let len = 200 + (seq * 977 % 1100) as usize;
    let mut body = seq.to_be_bytes().to_vec();
    body.extend((0..len).map(|i| (seq as usize * 7 + i) as u8));
    body
}

/// Puts records `from..to` (queue `seq % QUEUES`), flushing when the store is busy;
/// returns each record's end (a record boundary).
fn put_range(store: &SimStore, from: u64, to: u64) -> Vec<u64> {
    let mut ends = Vec::new();
    for seq in from..to {
        let body = body_for(seq);
        let msg = MessageToStore {
            topic: TOPIC,
            queue_id: (seq % QUEUES as u64) as i32,
            flag: 0,
            body: &body,
            properties: "",
            sys_flag: 0,
            born_timestamp_ms: 1,
            born_host: "127.0.0.1:5000".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        };
        let put = match store.put(&msg) {
            Ok(p) => p,
            Err(_) => {
                block_on(store.flush_all()).unwrap();
                store.put(&msg).unwrap()
            }
        };
        ends.push(put.durable_ticket);
    }
    ends
}

/// The seqs the store holds, queue by queue in queue order, checked whole.
fn held(store: &SimStore) -> Vec<u64> {
    let mut out = Vec::new();
    for queue_id in 0..QUEUES {
        let mut offset = store.min_offset(TOPIC, queue_id);
        loop {
            let got = block_on(store.get_messages(TOPIC, queue_id, offset, 32, 1 << 20, &|_| true)).expect("read");
            if got.status != GetStatus::Found {
                break;
            }
            let mut at = 0;
            while at < got.records.len() {
                let view = StoredMessageView::parse_verified(&got.records[at..]).expect("valid record");
                assert_eq!(view.queue_offset() as u64, offset, "queue offsets contiguous");
                let seq = u64::from_be_bytes(view.body()[..8].try_into().unwrap());
                assert_eq!(view.body(), &body_for(seq)[..]);
                out.push(seq);
                offset += 1;
                at += view.total_size();
            }
        }
    }
    out.sort_unstable();
    out
}

/// A store holding `RECORDS` records (durable), the marker for `cut` written, then a
/// clean close or a power cut. Returns the record ends.
fn prepared(disk: &SimDisk, clock: &ManualClock, cut_index: usize, logics_flushed: bool, clean: bool) -> (Vec<u64>, u64) {
    let (store, _) = open(disk, clock).unwrap();
    let ends = put_range(&store, 0, RECORDS);
    block_on(store.flush_all()).unwrap();
    if logics_flushed {
        block_on(store.flush_logics()).unwrap();
    }
    let boundaries: Vec<u64> = std::iter::once(0).chain(ends.iter().copied()).collect();
    let cut = boundaries[cut_index];
    block_on(store.write_truncate_marker(cut)).unwrap();
    if clean {
        block_on(store.close()).unwrap();
    } else {
        disk.crash();
    }
    drop(store);
    (ends, cut)
}

/// The store after the cut: exactly the records ending at or below it.
fn check_cut(store: &SimStore, ends: &[u64], cut: u64, when: &str) {
    let want: Vec<u64> = (0..RECORDS).filter(|&s| ends[s as usize] <= cut).collect();
    assert_eq!(store.write_offset(), cut, "{when}: the log ends at the cut");
    assert_eq!(held(store), want, "{when}: the records below the cut, each once");
}

fn marker_present(disk: &SimDisk) -> bool {
    block_on(disk.exists(&root().join(TRUNCATE_MARKER))).unwrap()
}

#[test]
fn a_pending_cut_at_every_record_boundary() {
    for seed in seeds(4) {
        let _guard = SeedGuard(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        for cut_index in 0..=RECORDS as usize {
            let when = format!("seed {seed}, cut after {cut_index} records");
            let disk = SimDisk::new(seed * 1000 + cut_index as u64);
            let (ends, cut) = prepared(&disk, &clock, cut_index, seed % 2 == 0, seed / 2 % 2 == 0);
            let (store, report) = open(&disk, &clock).unwrap_or_else(|e| panic!("{when}: open refused: {e}"));
            assert_eq!(report.pending_cut, Some(cut), "{when}");
            check_cut(&store, &ends, cut, &when);
            assert!(marker_present(&disk), "{when}: the marker stays until the caller clears it");
            block_on(store.clear_truncate_marker()).unwrap();
            assert!(!marker_present(&disk), "{when}");
            // A power cut right after: the cut stays applied, nothing comes back.
            disk.crash();
            drop(store);
            let (store, report) = open(&disk, &clock).unwrap_or_else(|e| panic!("{when}: reopen refused: {e}"));
            assert_eq!(report.pending_cut, None, "{when}");
            check_cut(&store, &ends, cut, &format!("{when}, reopened"));
            // The log grows again from the cut and survives another power cut.
            let more = put_range(&store, RECORDS, RECORDS + 10);
            block_on(store.flush_all()).unwrap();
            disk.crash();
            drop(store);
            let (store, _) = open(&disk, &clock).unwrap_or_else(|e| panic!("{when}: open after new writes refused: {e}"));
            assert_eq!(store.write_offset(), *more.last().unwrap(), "{when}");
            let mut want: Vec<u64> = (0..RECORDS).filter(|&s| ends[s as usize] <= cut).collect();
            want.extend(RECORDS..RECORDS + 10);
            assert_eq!(held(&store), want, "{when}: the new records follow the cut");
        }
    }
}

#[test]
fn a_power_cut_at_every_point_of_the_cut_repeats_it() {
    for seed in seeds(3) {
        let _guard = SeedGuard(seed);
        let clock = ManualClock::new(1_700_000_000_000);
        // A cut in the first segment (the second is removed), near the end, at 0.
        for cut_index in [RECORDS as usize / 3, RECORDS as usize - 2, 0] {
            let mut ops = 0u64;
            loop {
                let when = format!("seed {seed}, cut after {cut_index} records, power cut at op {ops}");
                let disk = SimDisk::new(seed * 100_000 + cut_index as u64 * 1000 + ops);
                let (ends, cut) = prepared(&disk, &clock, cut_index, seed % 2 == 1, false);
                disk.crash_after_ops(Some(ops));
                let first = open(&disk, &clock);
                disk.crash_after_ops(None);
                let finished = first.is_ok();
                drop(first);
                disk.crash();
                let (store, report) = open(&disk, &clock).unwrap_or_else(|e| panic!("{when}: open after the power cut refused: {e}"));
                assert_eq!(report.pending_cut, Some(cut), "{when}: the marker outlives an unfinished cut");
                check_cut(&store, &ends, cut, &when);
                if finished {
                    assert!(ops > 3, "{when}: the cut wrote something");
                    break;
                }
                ops += 1;
            }
        }
    }
}
