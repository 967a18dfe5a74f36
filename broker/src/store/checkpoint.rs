//! The checkpoint: how far each part of a shard's store is known durable.
//!
//! Two 4 KiB copies in one file, written alternately (sequence number even → copy 0,
//! odd → copy 1), each with a CRC: a write torn by a crash spoils at most the copy
//! being written, and the other still holds the previous checkpoint. Reading takes the
//! valid copy with the highest sequence; no valid copy means "scan everything".
//!
//! Invariant: `logics_phys <= commitlog_phys`; each is a local CommitLog position below
//! which the named data was synced when the checkpoint was written.

use super::io::{Disk, DiskFile, IoError, BLOCK_BYTES};
use std::path::Path;

const MAGIC: u32 = 0x5249_4E43; // "RINC"
const VERSION: u32 = 1;
const BODY_BYTES: usize = 4 + 4 + 8 + 8 + 8 + 8 + 8;

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
        let crc = crc32fast::hash(&block[..BODY_BYTES]);
        block[BODY_BYTES..BODY_BYTES + 4].copy_from_slice(&crc.to_be_bytes());
        block
    }

    pub fn decode(block: &[u8]) -> Option<Self> {
        if block.len() < BODY_BYTES + 4 {
            return None;
        }
        let u32_at = |at: usize| u32::from_be_bytes(block[at..at + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |at: usize| u64::from_be_bytes(block[at..at + 8].try_into().unwrap_or([0; 8]));
        if u32_at(0) != MAGIC || u32_at(4) != VERSION {
            return None;
        }
        if crc32fast::hash(&block[..BODY_BYTES]) != u32_at(BODY_BYTES) {
            return None;
        }
        let checkpoint = Self {
            sequence: u64_at(8),
            commitlog_phys: u64_at(16),
            logics_phys: u64_at(24),
            timestamp_ms: u64_at(32) as i64,
            records_below_logics: u64_at(40),
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
                let cp = Checkpoint { sequence, commitlog_phys: sequence * 100, logics_phys: sequence * 50, records_below_logics: 3, timestamp_ms: 9 };
                cp.store(&file).await.unwrap();
            }
            for &(at, bit) in damage {
                disk.flip_bit(path, at, bit);
            }
            let got = Checkpoint::load(&disk, path).await.unwrap();
            assert_eq!(got.map(|c| c.sequence), expected_sequence, "damage {damage:?}");
            if let Some(c) = got {
                assert_eq!(c.commitlog_phys, c.sequence * 100);
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

    #[test]
    fn missing_file_is_none() {
        block_on(async {
            let disk = SimDisk::new(1);
            assert_eq!(Checkpoint::load(&disk, Path::new("/nope")).await.unwrap(), None);
        });
    }
}
