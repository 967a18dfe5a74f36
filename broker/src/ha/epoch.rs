//! A shard's epoch history (controller mode, docs/design/controller.md §3.3): which
//! master epoch wrote which part of the CommitLog, as `(epoch, start_phys)` entries.
//! A port of Apache's `store/ha/autoswitch/EpochFileCache.java`, pure (no IO) except
//! [`load`] / [`save`], which keep it as one durable small file through the shard's
//! `SnapshotStore` (`shard-<i>/epochFileCheckpoint.<seq>`: new file, fsync, directory
//! fsync; the previous good image is kept as Apache keeps its `.bak`). The payload is
//! Apache's `CheckpointFile` text (`common/utils/CheckpointFile.java:77-133`): the entry
//! count, the CRC32 of the entry lines (masked to 31 bits as `UtilAll.crc32`; 0 means
//! unchecked), then one `epoch-startOffset` line per entry.
//!
//! Invariants: entries are in strictly increasing epoch order with non-decreasing
//! starts (an epoch that wrote nothing has the same start as the next one, which Apache
//! refuses to record at all); the history is never empty: a store written before
//! controller mode reads as `[(0, log_start)]`, and a cut that removes every entry
//! leaves `[(0, cut)]`. Offsets are the shard's physical offsets.

use crate::meta::snapshot::{SnapshotError, SnapshotStore};
use crate::store::io::Disk;

/// Snapshot name of the epoch file in `shard-<i>/` (Apache's file name).
pub const EPOCH_FILE_NAME: &str = "epochFileCheckpoint";
/// Entries one epoch file holds: a controller raises the epoch once per election, so
/// this is far more than a shard sees, and bounds what a corrupt count makes us read.
pub const EPOCH_ENTRIES_MAX: usize = 65_536;

/// One master epoch and where its first record is (or would have been).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EpochEntry {
    pub epoch: u64,
    pub start_phys: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum EpochError {
    #[error("epoch file: {0}")]
    Parse(String),
    #[error("epoch {epoch} at {start_phys} does not follow epoch {last_epoch} at {last_start_phys}")]
    NotAfter { epoch: u64, start_phys: u64, last_epoch: u64, last_start_phys: u64 },
    #[error("epoch file: {0}")]
    Snapshot(#[from] SnapshotError),
}

/// The logs of two brokers share no epoch start: they diverged before the slave's last
/// epoch (only after an unclean election); the slave must be re-seeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("logs diverged before epoch {0}: re-seed")]
pub struct Diverged(pub u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochFile {
    entries: Vec<EpochEntry>,
}

impl EpochFile {
    /// The history of a store without an epoch file: everything from `log_start_phys`
    /// was written before controller mode, in epoch 0.
    pub fn fresh(log_start_phys: u64) -> Self {
        Self { entries: vec![EpochEntry { epoch: 0, start_phys: log_start_phys }] }
    }

    /// A history from entries (a file, a master's META): checked for the invariants.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, EpochError> {
        let Some(&first) = entries.first() else { return Err(EpochError::Parse("no entries".into())) };
        if entries.len() > EPOCH_ENTRIES_MAX {
            return Err(EpochError::Parse(format!("{} entries, at most {EPOCH_ENTRIES_MAX}", entries.len())));
        }
        let mut file = Self { entries: vec![first] };
        for e in &entries[1..] {
            file.append(e.epoch, e.start_phys)?;
        }
        Ok(file)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn last(&self) -> EpochEntry {
        match self.entries.last() {
            Some(e) => *e,
            None => unreachable!("an epoch history is never empty"),
        }
    }

    pub fn last_epoch(&self) -> u64 {
        self.last().epoch
    }

    pub fn entry(&self, epoch: u64) -> Option<EpochEntry> {
        self.entries.iter().find(|e| e.epoch == epoch).copied()
    }

    /// Where `epoch` ends: the next entry's start, or `log_end_phys` for the last one
    /// (Apache's `endOffset`, `Long.MAX_VALUE` bounded by the log).
    pub fn entry_end(&self, epoch: u64, log_end_phys: u64) -> Option<u64> {
        let i = self.entries.iter().position(|e| e.epoch == epoch)?;
        Some(self.entries.get(i + 1).map_or(log_end_phys, |next| next.start_phys))
    }

    /// Starts epoch `epoch` at `start_phys` (`appendEntry`): the epoch must be above the
    /// last one and must not start before it.
    pub fn append(&mut self, epoch: u64, start_phys: u64) -> Result<(), EpochError> {
        let last = self.last();
        if epoch <= last.epoch || start_phys < last.start_phys {
            return Err(EpochError::NotAfter { epoch, start_phys, last_epoch: last.epoch, last_start_phys: last.start_phys });
        }
        if self.entries.len() >= EPOCH_ENTRIES_MAX {
            return Err(EpochError::Parse(format!("more than {EPOCH_ENTRIES_MAX} entries")));
        }
        self.entries.push(EpochEntry { epoch, start_phys });
        Ok(())
    }

    /// Removes the entries starting at or past `cut_phys` (`truncateSuffixByOffset`):
    /// the log was cut there, so no record of theirs remains. Returns whether any went.
    pub fn truncate_suffix_by_offset(&mut self, cut_phys: u64) -> bool {
        let before = self.entries.clone();
        self.entries.retain(|e| e.start_phys < cut_phys);
        if self.entries.is_empty() {
            self.entries.push(EpochEntry { epoch: 0, start_phys: cut_phys });
        }
        self.entries != before
    }

    /// The history as seen by a log ending at `log_end_phys`: entries starting past the
    /// end (mirrored from a master that is further on) are dropped. An entry starting
    /// exactly at the end stays: its epoch is where the next record goes.
    pub fn clipped_to(&self, log_end_phys: u64) -> Self {
        let mut clipped = self.clone();
        clipped.truncate_suffix_by_offset(log_end_phys.saturating_add(1));
        clipped
    }

    /// How far the log of `other` (ending at `other_end_phys`) agrees with this one
    /// (ending at `self_end_phys`), as `findConsistentPoint`: the newest epoch both hold
    /// with the same start; the agreement ends where either's copy of that epoch ends.
    pub fn find_consistent_point(&self, self_end_phys: u64, other: &EpochFile, other_end_phys: u64) -> Result<u64, Diverged> {
        for mine in self.entries.iter().rev() {
            let Some(theirs) = other.entry(mine.epoch) else { continue };
            if theirs.start_phys != mine.start_phys {
                continue;
            }
            let (Some(my_end), Some(their_end)) = (self.entry_end(mine.epoch, self_end_phys), other.entry_end(mine.epoch, other_end_phys)) else {
                unreachable!("both histories hold epoch {}", mine.epoch)
            };
            return Ok(my_end.min(their_end));
        }
        Err(Diverged(other.last_epoch()))
    }

    /// Apache's `CheckpointFile` text.
    pub fn encode(&self) -> Vec<u8> {
        let body: String = self.entries.iter().map(|e| format!("{}-{}\n", e.epoch, e.start_phys)).collect();
        format!("{}\n{}\n{body}", self.entries.len(), apache_crc32(body.as_bytes())).into_bytes()
    }

    /// Parses Apache's `CheckpointFile` text (a `\r\n` line end is accepted too).
    pub fn decode(bytes: &[u8]) -> Result<Self, EpochError> {
        let bad = |what: String| EpochError::Parse(what);
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let mut lines = text.split_inclusive('\n');
        let mut header = |what: &str| -> Result<i64, EpochError> {
            let line = lines.next().ok_or_else(|| bad(format!("no {what} line")))?;
            line.trim_end_matches(['\n', '\r']).parse::<i64>().map_err(|_| bad(format!("{what} {line:?} is not a number")))
        };
        let count = header("entry count")?;
        let crc = header("crc")?;
        if !(1..=EPOCH_ENTRIES_MAX as i64).contains(&count) {
            return Err(bad(format!("entry count {count} not in 1..={EPOCH_ENTRIES_MAX}")));
        }
        let mut body = String::new();
        let mut entries = Vec::new();
        for line in lines {
            let content = line.trim_end_matches(['\n', '\r']);
            if entries.len() >= EPOCH_ENTRIES_MAX {
                return Err(bad(format!("more than {EPOCH_ENTRIES_MAX} entries")));
            }
            // CheckpointFile sums the lines as read, each with the platform line end.
            body.push_str(content);
            body.push('\n');
            let entry = content
                .split_once('-')
                .and_then(|(e, s)| Some(EpochEntry { epoch: e.parse().ok()?, start_phys: s.parse().ok()? }))
                .ok_or_else(|| bad(format!("entry {content:?} is not epoch-startOffset")))?;
            entries.push(entry);
        }
        if entries.len() as i64 != count {
            return Err(bad(format!("expected {count} entries, found {}", entries.len())));
        }
        let actual = apache_crc32(body.as_bytes());
        if crc != 0 && crc != actual {
            return Err(bad(format!("entries crc32 {actual} does not match the file's {crc}")));
        }
        Self::from_entries(entries)
    }
}

/// `UtilAll.crc32`: CRC32 masked to a non-negative Java int.
fn apache_crc32(bytes: &[u8]) -> i64 {
    i64::from(crc32fast::hash(bytes) & 0x7FFF_FFFF)
}

/// The shard's epoch history: the file's, or `fresh(log_start_phys)` without one.
pub async fn load<D: Disk>(store: &SnapshotStore<D>, log_start_phys: u64) -> Result<EpochFile, EpochError> {
    match store.load_strict().await? {
        Some(bytes) => EpochFile::decode(&bytes),
        None => Ok(EpochFile::fresh(log_start_phys)),
    }
}

/// Writes the history durably (once this returns, a crash loads it).
pub async fn save<D: Disk>(store: &SnapshotStore<D>, file: &EpochFile) -> Result<(), EpochError> {
    store.save(&file.encode()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &[(u64, u64)]) -> EpochFile {
        EpochFile::from_entries(entries.iter().map(|&(epoch, start_phys)| EpochEntry { epoch, start_phys }).collect()).expect("valid history")
    }

    fn pairs(f: &EpochFile) -> Vec<(u64, u64)> {
        f.entries().iter().map(|e| (e.epoch, e.start_phys)).collect()
    }

    /// One operation on a history, and the history (or error text) it should give.
    enum Op {
        Append(u64, u64),
        Truncate(u64),
        Clip(u64),
    }

    fn check(start: &[(u64, u64)], op: Op, expected: Result<&[(u64, u64)], &str>) {
        let mut f = file(start);
        let got = match op {
            Op::Append(e, s) => f.append(e, s).map(|_| pairs(&f)),
            Op::Truncate(cut) => {
                f.truncate_suffix_by_offset(cut);
                Ok(pairs(&f))
            }
            Op::Clip(end) => Ok(pairs(&f.clipped_to(end))),
        };
        match (got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "from {start:?}"),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "from {start:?}: {e} lacks {want}"),
            (got, want) => panic!("from {start:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn append_truncate_and_clip() {
        check(&[(0, 0)], Op::Append(1, 0), Ok(&[(0, 0), (1, 0)]));
        check(&[(0, 0)], Op::Append(1, 100), Ok(&[(0, 0), (1, 100)]));
        check(&[(0, 0), (1, 100)], Op::Append(3, 100), Ok(&[(0, 0), (1, 100), (3, 100)]));
        check(&[(0, 0), (1, 100)], Op::Append(1, 200), Err("does not follow epoch 1"));
        check(&[(0, 0), (2, 100)], Op::Append(1, 200), Err("does not follow epoch 2"));
        check(&[(0, 0), (1, 100)], Op::Append(2, 99), Err("epoch 2 at 99"));
        check(&[(0, 0), (1, 100), (2, 300)], Op::Truncate(300), Ok(&[(0, 0), (1, 100)]));
        check(&[(0, 0), (1, 100), (2, 300)], Op::Truncate(301), Ok(&[(0, 0), (1, 100), (2, 300)]));
        check(&[(0, 0), (1, 100), (2, 300)], Op::Truncate(100), Ok(&[(0, 0)]));
        check(&[(0, 50), (1, 100)], Op::Truncate(50), Ok(&[(0, 50)]));
        check(&[(0, 50), (1, 100)], Op::Truncate(10), Ok(&[(0, 10)]));
        check(&[(1, 0), (2, 0)], Op::Truncate(0), Ok(&[(0, 0)]));
        check(&[(0, 0), (1, 100), (2, 300)], Op::Clip(300), Ok(&[(0, 0), (1, 100), (2, 300)]));
        check(&[(0, 0), (1, 100), (2, 300)], Op::Clip(299), Ok(&[(0, 0), (1, 100)]));
    }

    #[test]
    fn entry_end_is_the_next_start_or_the_log_end() {
        let f = file(&[(0, 0), (1, 100), (4, 100), (5, 300)]);
        let cases = [(0, Some(100)), (1, Some(100)), (4, Some(300)), (5, Some(999)), (2, None), (6, None)];
        for (epoch, want) in cases {
            assert_eq!(f.entry_end(epoch, 999), want, "epoch {epoch}");
        }
    }

    /// (master history, master end, slave history, slave end) → consistent point.
    fn check_point(master: &[(u64, u64)], master_end: u64, slave: &[(u64, u64)], slave_end: u64, expected: Result<u64, Diverged>) {
        assert_eq!(file(master).find_consistent_point(master_end, &file(slave), slave_end), expected, "master {master:?} slave {slave:?}");
    }

    #[test]
    fn consistent_point() {
        // A slave behind in the master's epoch keeps all it has.
        check_point(&[(0, 0), (1, 0)], 1000, &[(0, 0), (1, 0)], 400, Ok(400));
        // The old master of epoch 1 wrote past where epoch 2 began on the new master.
        check_point(&[(1, 0), (2, 800)], 1200, &[(1, 0)], 1000, Ok(800));
        check_point(&[(1, 0), (2, 800)], 1200, &[(1, 0)], 800, Ok(800));
        check_point(&[(1, 0), (2, 800)], 1200, &[(1, 0)], 700, Ok(700));
        // Only the slave's last epoch is known (HELLO): the newest common one decides.
        check_point(&[(1, 0), (2, 800), (3, 900)], 1200, &[(2, 800)], 1000, Ok(900));
        // Same epoch, another start: the logs diverged (an unclean election).
        check_point(&[(1, 0), (2, 800)], 1200, &[(2, 700)], 1000, Err(Diverged(2)));
        check_point(&[(1, 0), (3, 800)], 1200, &[(2, 700)], 1000, Err(Diverged(2)));
        // Empty epochs share a start with the next.
        check_point(&[(0, 0), (1, 0), (2, 0)], 50, &[(0, 0), (1, 0)], 100, Ok(0));
    }

    fn check_decode(text: &str, expected: Result<&[(u64, u64)], &str>) {
        match (EpochFile::decode(text.as_bytes()), expected) {
            (Ok(f), Ok(want)) => assert_eq!(pairs(&f), want, "{text:?}"),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text:?}: {e} lacks {want}"),
            (got, want) => panic!("{text:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn apache_checkpoint_file_format() {
        let f = file(&[(1, 0), (2, 1_073_741_824)]);
        let text = String::from_utf8(f.encode()).unwrap();
        // The CRC is what Java's UtilAll.crc32 gives for "1-0\n2-1073741824\n".
        let crc = crc32fast::hash(b"1-0\n2-1073741824\n") & 0x7FFF_FFFF;
        assert_eq!(text, format!("2\n{crc}\n1-0\n2-1073741824\n"));
        check_decode(&text, Ok(&[(1, 0), (2, 1_073_741_824)]));
        check_decode(&text.replace('\n', "\r\n"), Ok(&[(1, 0), (2, 1_073_741_824)]));
        check_decode("1\n0\n3-4096\n", Ok(&[(3, 4096)])); // crc 0: not checked
        check_decode(&text.replace("2-1073741824", "2-1073741825"), Err("does not match"));
        check_decode(&format!("3\n{crc}\n1-0\n2-1073741824\n"), Err("expected 3 entries, found 2"));
        check_decode("1\n0\n", Err("expected 1 entries, found 0"));
        check_decode("0\n0\n", Err("entry count 0"));
        check_decode("", Err("no entry count line"));
        check_decode("1\n", Err("no crc line"));
        check_decode("x\n0\n1-0\n", Err("is not a number"));
        check_decode("1\n0\n1:0\n", Err("is not epoch-startOffset"));
        check_decode("1\n0\n1--5\n", Err("is not epoch-startOffset"));
        check_decode("2\n0\n2-0\n1-5\n", Err("does not follow epoch 2"));
        check_decode("2\n0\n1-9\n2-5\n", Err("does not follow"));
        check_decode("99999999\n0\n1-0\n", Err("entry count"));
        assert!(EpochFile::decode(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn load_and_save_through_the_snapshot_store() {
        use crate::store::io::sim::SimDisk;
        futures_lite::future::block_on(async {
            let disk = SimDisk::new(7);
            let store = SnapshotStore::new(disk.clone(), "/s/shard-0", EPOCH_FILE_NAME);
            assert_eq!(pairs(&load(&store, 4096).await.unwrap()), [(0, 4096)], "no file: epoch 0 from the log start");
            let mut f = EpochFile::fresh(0);
            f.append(2, 512).unwrap();
            save(&store, &f).await.unwrap();
            disk.crash();
            let again = SnapshotStore::new(disk.clone(), "/s/shard-0", EPOCH_FILE_NAME);
            assert_eq!(load(&again, 4096).await.unwrap(), f);
        });
    }
}
