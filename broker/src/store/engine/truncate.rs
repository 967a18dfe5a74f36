//! A cut of the CommitLog asked for while the store runs, applied by the next open
//! (controller mode, docs/design/controller.md §3.4): a demoted master whose log runs
//! past where it agrees with the new master's writes `shard-<i>/truncate.pending`
//! (the local offset to keep up to) and restarts; `open_store` cuts there before it
//! serves anything, through the path `allow_truncate_corrupt` uses (queues cut, later
//! segments removed, the rest zeroed, the checkpoint lowered by the settle's logics
//! flush), and reports the cut. The caller cuts what it derives from the log (the
//! epoch file) and only then removes the marker (`clear_truncate_marker`).
//!
//! Marker: one block, `magic u64 | to_local u64 | crc32 of the 16 bytes before u32`
//! (big-endian), zero padded; written, synced, its directory synced.
//!
//! Invariants: a cut is idempotent, so a power cut anywhere before the marker is
//! removed repeats it at the next open; a torn or corrupt marker was never acted on
//! (the restart comes after its sync) and is removed unapplied; a cut never moves the
//! log's end forward.

use super::*;
use crate::store::io::{DiskFile, IoErrorKind, BLOCK_BYTES};

/// The marker's file name in the shard's store directory.
pub const TRUNCATE_MARKER: &str = "truncate.pending";
const MARKER_MAGIC: u64 = 0x524D_5154_5255_4E43; // "RMQTRUNC"
const MARKER_BYTES: usize = 20;

fn encode_marker(to_local: u64, out: &mut [u8]) {
    out[..8].copy_from_slice(&MARKER_MAGIC.to_be_bytes());
    out[8..16].copy_from_slice(&to_local.to_be_bytes());
    let crc = crc32fast::hash(&out[..16]);
    out[16..20].copy_from_slice(&crc.to_be_bytes());
}

fn decode_marker(bytes: &[u8]) -> Option<u64> {
    let head = bytes.get(..MARKER_BYTES)?;
    let magic = u64::from_be_bytes(head[..8].try_into().ok()?);
    let crc = u32::from_be_bytes(head[16..20].try_into().ok()?);
    if magic != MARKER_MAGIC || crc != crc32fast::hash(&head[..16]) {
        return None;
    }
    Some(u64::from_be_bytes(head[8..16].try_into().ok()?))
}

/// The pending cut in `dir` (a local CommitLog offset), if a valid marker is there; an
/// invalid one is removed.
pub(super) async fn read_marker<D: Disk>(disk: &D, dir: &Path) -> Result<Option<u64>, StoreError> {
    let path = dir.join(TRUNCATE_MARKER);
    let file = match disk.open(&path, false).await {
        Ok(f) => f,
        Err(e) if e.kind == IoErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let size = file.size().await?;
    let bytes = file.read_at(0, (size as usize).min(BLOCK_BYTES as usize)).await?;
    match decode_marker(&bytes) {
        Some(to) => Ok(Some(to)),
        None => {
            tracing::warn!(file = %path.display(), "torn truncate marker (its write never completed): removed, not applied");
            drop(file);
            disk.remove(&path).await?;
            disk.sync_dir(dir).await?;
            Ok(None)
        }
    }
}

impl<D: Disk, C: Clock> Store<D, C> {
    /// Asks the next open to cut the log at `to_local`: durable when this returns.
    pub async fn write_truncate_marker(&self, to_local: u64) -> Result<(), StoreError> {
        let path = self.dir.join(TRUNCATE_MARKER);
        let file = self.disk.open(&path, true).await?;
        let mut block = file.alloc_buf(BLOCK_BYTES as usize);
        encode_marker(to_local, &mut block[..MARKER_BYTES]);
        file.write_at(0, block).await?;
        file.sync().await?;
        self.disk.sync_dir(&self.dir).await?;
        Ok(())
    }

    /// Whether a cut is pending (a marker is on disk).
    pub async fn truncate_marker(&self) -> Result<Option<u64>, StoreError> {
        read_marker(&self.disk, &self.dir).await
    }

    /// Removes the marker once the cut and everything derived from it are durable.
    pub async fn clear_truncate_marker(&self) -> Result<(), StoreError> {
        let path = self.dir.join(TRUNCATE_MARKER);
        match self.disk.remove(&path).await {
            Ok(()) => {}
            Err(e) if e.kind == IoErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        self.disk.sync_dir(&self.dir).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bytes: &[u8], expected: Option<u64>) {
        assert_eq!(decode_marker(bytes), expected, "{bytes:?}");
    }

    #[test]
    fn marker_decodes_only_when_whole() {
        let mut block = vec![0u8; BLOCK_BYTES as usize];
        encode_marker(123_456, &mut block[..MARKER_BYTES]);
        check(&block, Some(123_456));
        check(&block[..MARKER_BYTES], Some(123_456));
        check(&block[..MARKER_BYTES - 1], None);
        check(&[], None);
        check(&[0; 64], None);
        for at in 0..MARKER_BYTES {
            let mut damaged = block.clone();
            damaged[at] ^= 0x10;
            check(&damaged, None);
        }
    }
}
