//! The checkpoint: how far each part of a shard's store is known durable.
//!
//! Two 4 KiB copies in one file, written alternately (sequence number even → copy 0,
//! odd → copy 1), each with a CRC: a write torn by a crash spoils at most the copy
//! being written, and the other still holds the previous checkpoint. Reading takes the
//! valid copy with the highest sequence; no valid copy means "scan everything".
//!
//! Version 2 also records the index mark (newest index file and its durable count),
//! so a crash repairs that file instead of re-indexing it from its first record.
//!
//! Invariant: `logics_phys <= commitlog_phys`; each is a local CommitLog position below
//! which the named data was synced when the checkpoint was written.

use super::io::{Disk, DiskFile, IoError, BLOCK_BYTES};
use std::path::Path;

const MAGIC: u32 = 0x5249_4E43; // "RINC"
/// Version 2 adds the index mark; version 1 copies (no mark) are still read.
const VERSION: u32 = 2;
const VERSION_1: u32 = 1;
const BODY_BYTES_V1: usize = 4 + 4 + 8 + 8 + 8 + 8 + 8;
const BODY_BYTES: usize = BODY_BYTES_V1 + 8 + 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Checkpoint {
    pub sequence: u64,
    /// CommitLog bytes below this were synced.
    pub commitlog_phys: u64,
    /// ConsumeQueue entries for records below this were synced.
    pub logics_phys: u64,
    /// How many records lie below `logics_phys` (the queues' entries must add up).
    pub records_below_logics: u64,
    pub timestamp_ms: i64,
    /// The newest index file and its count as the flush before this checkpoint made
    /// them durable (`None`: no entries yet, or a version 1 checkpoint).
    pub index_mark: Option<super::index::IndexMark>,
    /// Written by a version that records the mark: `index_mark == None` then means the
    /// index was empty, not unknown.
    pub index_mark_known: bool,
}

impl Checkpoint {
    pub fn encode(&self) -> [u8; BLOCK_BYTES as usize] {
        let mut block = [0u8; BLOCK_BYTES as usize];
        block[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        block[4..8].copy_from_slice(&VERSION.to_be_bytes());
        block[8..16].copy_from_slice(&self.sequence.to_be_bytes());
        block[16..24].copy_from_slice(&self.commitlog_phys.to_be_bytes());
        block[24..32].copy_from_slice(&self.logics_phys.to_be_bytes());
        block[32..40].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        block[40..48].copy_from_slice(&self.records_below_logics.to_be_bytes());
        let (mark_ms, mark_count) = self.index_mark.map_or((0, 0), |m| (m.file_ms, m.index_count));
        block[48..56].copy_from_slice(&mark_ms.to_be_bytes());
        block[56..60].copy_from_slice(&mark_count.to_be_bytes());
        let crc = crc32fast::hash(&block[..BODY_BYTES]);
        block[BODY_BYTES..BODY_BYTES + 4].copy_from_slice(&crc.to_be_bytes());
        block
    }

    pub fn decode(block: &[u8]) -> Option<Self> {
        let u32_at = |at: usize| u32::from_be_bytes(block[at..at + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |at: usize| u64::from_be_bytes(block[at..at + 8].try_into().unwrap_or([0; 8]));
        if block.len() < BODY_BYTES + 4 || u32_at(0) != MAGIC {
            return None;
        }
        let body_bytes = match u32_at(4) {
            VERSION => BODY_BYTES,
            VERSION_1 => BODY_BYTES_V1,
            _ => return None,
        };
        if crc32fast::hash(&block[..body_bytes]) != u32_at(body_bytes) {
            return None;
        }
        let index_mark = (body_bytes == BODY_BYTES && u32_at(56) > 0)
            .then(|| super::index::IndexMark { file_ms: u64_at(48) as i64, index_count: u32_at(56) });
        let checkpoint = Self {
            sequence: u64_at(8),
            commitlog_phys: u64_at(16),
            logics_phys: u64_at(24),
            timestamp_ms: u64_at(32) as i64,
            records_below_logics: u64_at(40),
            index_mark,
            index_mark_known: body_bytes == BODY_BYTES,
        };
        (checkpoint.logics_phys <= checkpoint.commitlog_phys).then_some(checkpoint)
    }

    /// The newest valid copy, or `None` if the file is missing or both copies are bad.
    pub async fn load<D: Disk>(disk: &D, path: &Path) -> Result<Option<Self>, IoError> {
        if !disk.exists(path).await? {
            return Ok(None);
        }
        let file = disk.open(path, false).await?;
        let bytes = file.read_at(0, 2 * BLOCK_BYTES as usize).await?;
        let copies = bytes.chunks(BLOCK_BYTES as usize).filter_map(Self::decode);
        Ok(copies.max_by_key(|c| c.sequence))
    }

    /// Writes this checkpoint (its `sequence` picks the copy) and syncs it.
    pub async fn store<F: DiskFile>(&self, file: &F) -> Result<(), IoError> {
        let slot = self.sequence % 2;
        let mut buf = file.alloc_buf(BLOCK_BYTES as usize);
        buf.copy_from_slice(&self.encode());
        file.write_at(slot * BLOCK_BYTES, buf).await?;
        file.sync().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::io::sim::SimDisk;
    use futures_lite::future::block_on;

    fn check(damage: &[(u64, u8)], expected_sequence: Option<u64>) {
        block_on(async {
            let disk = SimDisk::new(7);
            let path = Path::new("/cp");
            let file = disk.open(path, true).await.unwrap();
            for sequence in 1..=4 {
                let index_mark = (sequence % 2 == 0).then_some(crate::store::index::IndexMark { file_ms: 1_700_000_000_000 + sequence as i64, index_count: 7 });
                let cp = Checkpoint { sequence, commitlog_phys: sequence * 100, logics_phys: sequence * 50, records_below_logics: 3, timestamp_ms: 9, index_mark, index_mark_known: true };
                cp.store(&file).await.unwrap();
            }
            for &(at, bit) in damage {
                disk.flip_bit(path, at, bit);
            }
            let got = Checkpoint::load(&disk, path).await.unwrap();
            assert_eq!(got.map(|c| c.sequence), expected_sequence, "damage {damage:?}");
            if let Some(c) = got {
                assert_eq!(c.commitlog_phys, c.sequence * 100);
                assert_eq!(c.index_mark.map(|m| (m.file_ms, m.index_count)), (c.sequence % 2 == 0).then_some((1_700_000_000_000 + c.sequence as i64, 7)));
            }
        });
    }

    #[test]
    fn newest_valid_copy_wins() {
        check(&[], Some(4)); // copy 0 holds 4, copy 1 holds 3
        check(&[(20, 1)], Some(3)); // copy 0 spoiled
        check(&[(4096 + 20, 1)], Some(4)); // copy 1 spoiled
        check(&[(0, 0), (4096 + 9, 3)], None); // both spoiled
        check(&[(BODY_BYTES as u64, 7)], Some(3)); // the CRC itself spoiled
    }

    /// A copy written by version 1 (no index mark, CRC over 48 bytes) is still read.
    #[test]
    fn version_1_copies_are_read_without_a_mark() {
        let mut block = Checkpoint { sequence: 5, commitlog_phys: 10, logics_phys: 4, records_below_logics: 2, timestamp_ms: 1, index_mark: None, index_mark_known: true }.encode();
        block[4..8].copy_from_slice(&VERSION_1.to_be_bytes());
        block[BODY_BYTES_V1..].fill(0);
        let crc = crc32fast::hash(&block[..BODY_BYTES_V1]);
        block[BODY_BYTES_V1..BODY_BYTES_V1 + 4].copy_from_slice(&crc.to_be_bytes());
        let got = Checkpoint::decode(&block).expect("version 1 decodes");
        assert_eq!((got.sequence, got.commitlog_phys, got.logics_phys, got.index_mark, got.index_mark_known), (5, 10, 4, None, false));
        block[4..8].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(Checkpoint::decode(&block), None, "unknown version refused");
    }

    #[test]
    fn missing_file_is_none() {
        block_on(async {
            let disk = SimDisk::new(1);
            assert_eq!(Checkpoint::load(&disk, Path::new("/nope")).await.unwrap(), None);
        });
    }
}
