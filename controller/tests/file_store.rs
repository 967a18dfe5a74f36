//! The file-backed Raft storage (docs/design/controller.md §2.6): openraft's conformance
//! suite on `StdDisk` in a temp dir, and crash cases on `MemDisk` — every acknowledged
//! (synced) entry, the vote and the newest snapshot survive a crash; a torn or corrupt
//! tail is cut and the log goes on from there. Seeded; the seed is printed on failure.

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader, StorageError, Vote};
use ringmq_controller::cmd::Cmd;
use ringmq_controller::raft::file_store::{open_file_store, ControllerDisk, FileLogStore, MemDisk, StdDisk, LOG_FILE};
use ringmq_controller::raft::mem::MemStateMachine;
use ringmq_controller::raft::{ControllerTypes, NodeId};
use std::sync::Arc;

struct Builder;

impl StoreBuilder<ControllerTypes, FileLogStore, MemStateMachine, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, FileLogStore, MemStateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir().map_err(|e| openraft::StorageIOError::write(&e))?;
        let disk = StdDisk::open(dir.path().join("raft")).map_err(|e| openraft::StorageIOError::write(&e))?;
        let (log, sm) = open_file_store(Arc::new(disk)).map_err(|e| openraft::StorageIOError::read(&e))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn file_store_passes_openraft_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("openraft storage suite: {e}");
    }
}

type E = Entry<ControllerTypes>;

fn entry(term: u64, index: u64) -> E {
    let log_id = LogId::new(CommittedLeaderId::new(term, 0), index);
    // Every third entry carries a command, so records have different sizes.
    let payload = if index.is_multiple_of(3) {
        EntryPayload::Normal(Cmd::CleanBrokerData { name: format!("broker-{index}"), ids: None })
    } else {
        EntryPayload::Blank
    };
    Entry { log_id, payload }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    futures_lite::future::block_on(f)
}

fn reopen(disk: &MemDisk) -> (FileLogStore, MemStateMachine) {
    match open_file_store(Arc::new(disk.clone())) {
        Ok(s) => s,
        Err(e) => panic!("reopen: {e}"),
    }
}

fn indexes(log: &mut FileLogStore) -> Vec<u64> {
    block_on(log.try_get_log_entries(..)).unwrap().iter().map(|e| e.log_id.index).collect()
}

/// xorshift64, so a seed replays exactly.
struct Rng(u64);
impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

/// One seeded history: appends (acknowledged = synced), truncations, purges, votes, and
/// a crash after each step with a half-written (unsynced) record at the tail.
fn crash_history(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let disk = MemDisk::default();
    let (mut log, _) = reopen(&disk);
    // What must survive: the acknowledged indexes, the purge point, the last vote.
    let mut acked: Vec<u64> = Vec::new();
    let mut purged: Option<u64> = None;
    let mut vote: Option<Vote<NodeId>> = None;
    let mut term = 1;
    for step in 0..40 {
        match rng.next(10) {
            0..=5 => {
                let first = acked.last().map_or(purged.map_or(1, |p| p + 1), |l| l + 1);
                let n = 1 + rng.next(4);
                let batch: Vec<E> = (first..first + n).map(|i| entry(term, i)).collect();
                block_on(log.append_synced(batch)).unwrap();
                acked.extend(first..first + n);
            }
            6 if !acked.is_empty() => {
                let at = acked[rng.next(acked.len() as u64) as usize];
                block_on(log.truncate(LogId::new(CommittedLeaderId::new(term, 0), at))).unwrap();
                acked.retain(|i| *i < at);
                term += 1;
            }
            7 if acked.len() > 2 => {
                let upto = acked[rng.next(acked.len() as u64 - 1) as usize];
                block_on(log.purge(LogId::new(CommittedLeaderId::new(term, 0), upto))).unwrap();
                acked.retain(|i| *i > upto);
                purged = Some(upto);
            }
            _ => {
                let v = Vote::new(term + rng.next(3), rng.next(3));
                block_on(log.save_vote(&v)).unwrap();
                vote = Some(v);
            }
        }
        // A record being written when the power goes: some prefix of it may remain.
        let next = acked.last().map_or(purged.map_or(1, |p| p + 1), |l| l + 1);
        let mut torn = Vec::new();
        ringmq_controller::raft::file_store::encode_record(&serde_json::to_vec(&entry(term, next)).unwrap(), &mut torn);
        disk.append(LOG_FILE, &torn).unwrap();
        disk.crash(Some(seed ^ step));
        let (mut reopened, _) = reopen(&disk);
        let got = indexes(&mut reopened);
        // The torn record either survived whole (never acknowledged, allowed) or not at all.
        let mut want = acked.clone();
        if got.len() == want.len() + 1 {
            want.push(next);
        }
        assert_eq!(got, want, "seed {seed} step {step}: entries after the crash");
        assert_eq!(block_on(reopened.read_vote()).unwrap(), vote, "seed {seed} step {step}: vote");
        let state = block_on(reopened.get_log_state()).unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), purged, "seed {seed} step {step}: purge point");
        if got.len() > acked.len() {
            // Keep the model in step with what the store now holds.
            acked.push(next);
        }
        log = reopened;
    }
}

#[test]
fn acknowledged_entries_survive_crashes_and_torn_tails_are_cut() {
    for seed in 0..200u64 {
        let result = std::panic::catch_unwind(|| crash_history(seed));
        if let Err(e) = result {
            eprintln!("crash_history failed with seed {seed} (rerun crash_history({seed}))");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn an_unsynced_append_is_lost_whole_and_a_corrupt_record_cuts_the_log() {
    let disk = MemDisk::default();
    let (log, _) = reopen(&disk);
    block_on(log.append_synced((1..=4).map(|i| entry(1, i)))).unwrap();
    let synced_len = disk.file_len(LOG_FILE);
    disk.append(LOG_FILE, b"garbage that was never synced").unwrap();
    disk.crash(None);
    assert_eq!(disk.file_len(LOG_FILE), synced_len);
    let (mut log, _) = reopen(&disk);
    assert_eq!(indexes(&mut log), vec![1, 2, 3, 4]);
    // A flipped byte in the third record: records 3 and 4 are cut, 1–2 stay, and the
    // log goes on from index 3.
    let (mut bytes_at, mut seen) = (0usize, 0);
    let all = disk.read(LOG_FILE).unwrap().unwrap();
    while seen < 2 {
        let len = u32::from_be_bytes(all[bytes_at..bytes_at + 4].try_into().unwrap()) as usize;
        bytes_at += 8 + len;
        seen += 1;
    }
    disk.corrupt(LOG_FILE, bytes_at + 10);
    let (mut log, _) = reopen(&disk);
    assert_eq!(indexes(&mut log), vec![1, 2]);
    assert_eq!(disk.file_len(LOG_FILE), bytes_at, "the corrupt tail is cut on disk too");
    block_on(log.append_synced([entry(2, 3)])).unwrap();
    let (mut log, _) = reopen(&disk);
    assert_eq!(indexes(&mut log), vec![1, 2, 3]);
}

#[test]
fn the_newest_snapshot_restores_the_state_machine() {
    use openraft::RaftSnapshotBuilder;
    let disk = MemDisk::default();
    let (log, mut sm) = reopen(&disk);
    block_on(log.append_synced((1..=3).map(|i| entry(1, i)))).unwrap();
    let entries: Vec<E> = (1..=3).map(|i| entry(1, i)).collect();
    block_on(RaftStateMachine::<ControllerTypes>::apply(&mut sm, entries)).unwrap();
    let mut builder = block_on(RaftStateMachine::<ControllerTypes>::get_snapshot_builder(&mut sm));
    let snap = block_on(RaftSnapshotBuilder::<ControllerTypes>::build_snapshot(&mut builder)).unwrap();
    disk.crash(None);
    let (_, mut sm2) = reopen(&disk);
    let (applied, _) = block_on(RaftStateMachine::<ControllerTypes>::applied_state(&mut sm2)).unwrap();
    assert_eq!(applied, snap.meta.last_log_id);
    let current = block_on(RaftStateMachine::<ControllerTypes>::get_current_snapshot(&mut sm2)).unwrap().unwrap();
    assert_eq!(current.meta.last_log_id, snap.meta.last_log_id);
    assert_eq!(disk.list().unwrap().iter().filter(|n| n.starts_with("snapshot-")).count(), 1);
}

#[test]
fn an_entry_too_large_to_read_back_is_refused_before_it_is_acknowledged() {
    let disk = MemDisk::default();
    let (log, _) = reopen(&disk);
    block_on(log.append_synced([entry(1, 1)])).unwrap();
    let huge = Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), 2),
        payload: EntryPayload::Normal(Cmd::CleanBrokerData {
            name: "x".repeat(ringmq_controller::raft::file_store::RECORD_LEN_MAX_BYTES),
            ids: None,
        }),
    };
    let err = block_on(log.append_synced([huge])).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    let (mut log, _) = reopen(&disk);
    assert_eq!(indexes(&mut log), vec![1]);
    block_on(log.append_synced([entry(1, 2)])).unwrap();
    let (mut log, _) = reopen(&disk);
    assert_eq!(indexes(&mut log), vec![1, 2]);
}
