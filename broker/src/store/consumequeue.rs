//! ConsumeQueue: per (topic, queue) index of 20-byte entries
//! `{commitlog offset u64, size u32, tag hash i64}` (RocketMQ's layout), addressed by
//! logical queue offset. Files are `consumequeue/<topic>/<queueId>/<20-digit byte
//! offset>`, each `cq_entries_per_file` entries.
//!
//! Derived data: rebuilt from the CommitLog past its persisted end at recovery. Not
//! synced on the send path; `Store::flush_logics` syncs every queue, then the
//! checkpoint records how far they are good.
//!
//! Invariants: entry `i` lives at byte `i * 20`; `min_offset <= max_offset`; an entry
//! with size 0 marks the end of written entries in a file, except for the zero entries
//! that open the first file of a queue a re-seeded replica began mid-file (holes below
//! `min_offset`).

use super::io::{align_down, Disk, DiskFile, IoError, BLOCK_BYTES};
use super::segmented::SegmentedLog;
use std::path::PathBuf;

pub const ENTRY_BYTES: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    pub phys_offset: u64,
    pub size: u32,
    pub tag_hash: i64,
}

impl CqEntry {
    pub fn encode(&self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[0..8].copy_from_slice(&self.phys_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..20].copy_from_slice(&self.tag_hash.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Self {
        let mut phys = [0u8; 8];
        phys.copy_from_slice(&bytes[0..8]);
        let mut size = [0u8; 4];
        size.copy_from_slice(&bytes[8..12]);
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&bytes[12..20]);
        Self { phys_offset: u64::from_be_bytes(phys), size: u32::from_be_bytes(size), tag_hash: i64::from_be_bytes(tag) }
    }
}

pub struct ConsumeQueue<D: Disk> {
    pub topic: String,
    pub queue_id: i32,
    pub log: SegmentedLog<D>,
    /// First logical offset still readable (older files were deleted by retention).
    pub min_offset: u64,
}

impl<D: Disk> ConsumeQueue<D> {
    pub fn new(dir: PathBuf, topic: &str, queue_id: i32, entries_per_file: u64, tail_entries: u64) -> Self {
        let segment_bytes = entries_per_file * ENTRY_BYTES;
        Self {
            topic: topic.to_string(),
            queue_id,
            log: SegmentedLog::new(dir, segment_bytes, 0, BLOCK_BYTES as usize, tail_entries * ENTRY_BYTES, None),
            min_offset: 0,
        }
    }

    /// Next offset to be assigned.
    pub fn max_offset(&self) -> u64 {
        self.log.write_pos / ENTRY_BYTES
    }

    pub fn append(&mut self, entry: CqEntry) -> u64 {
        let offset = self.max_offset();
        self.log.append(&entry.encode());
        offset
    }

    /// Loads the files found in the queue's directory and finds the end of written
    /// entries (the first zero-size entry of the last file).
    pub async fn load(&mut self, disk: &D) -> Result<(), IoError> {
        let names = disk.list(&self.log.dir).await?;
        let mut starts: Vec<u64> = names.iter().filter_map(|n| self.log.parse_name(n)).collect();
        starts.sort_unstable();
        for &start in &starts {
            let file = disk.open(&self.log.path_of(start), false).await?;
            self.log.files.insert(start, std::rc::Rc::new(file));
        }
        let Some((&last_start, last)) = self.log.files.iter().next_back() else {
            self.min_offset = 0;
            self.log.reset_at(0, &[]);
            return Ok(());
        };
        let first_start = starts.first().copied().unwrap_or(0);
        // A queue a re-seeded replica began mid-file starts with hole entries (zeros).
        let first_holes = match self.log.files.get(&first_start) {
            Some(first) => leading_holes(&first.read_at(0, ENTRY_BYTES as usize).await?, &**first, self.log.segment_bytes).await?,
            None => 0,
        };
        let bytes = last.read_at(0, self.log.segment_bytes as usize).await?;
        let skip = if last_start == first_start { first_holes } else { 0 };
        let mut count = 0u64;
        for entry in bytes.chunks_exact(ENTRY_BYTES as usize).skip(skip as usize) {
            if CqEntry::decode(entry).size == 0 {
                break;
            }
            count += 1;
        }
        // Holes followed by nothing is an empty file: it ends where it starts.
        let end = if count == 0 && last_start == first_start { last_start } else { last_start + (skip + count) * ENTRY_BYTES };
        let block = align_down(end, BLOCK_BYTES);
        let prefix = bytes[(block - last_start) as usize..(end - last_start) as usize].to_vec();
        self.log.reset_at(end, &prefix);
        self.min_offset = (first_start / ENTRY_BYTES + if end > first_start { first_holes } else { 0 }).min(end / ENTRY_BYTES);
        Ok(())
    }
}

/// How many zero entries open a queue's first file before its first real one (0 when
/// the first entry is real, or when the file holds no real entry at all).
async fn leading_holes<F: super::io::DiskFile>(head: &[u8], file: &F, segment_bytes: u64) -> Result<u64, IoError> {
    if head.len() < ENTRY_BYTES as usize || CqEntry::decode(head).size != 0 {
        return Ok(0);
    }
    let bytes = file.read_at(0, segment_bytes as usize).await?;
    Ok(bytes.chunks_exact(ENTRY_BYTES as usize).position(|e| CqEntry::decode(e).size != 0).unwrap_or(0) as u64)
}
