//! `SnapshotStore`: one small durable file (a byte payload) replaced atomically without
//! rename, over the IO seam.
//!
//! Each save writes a new file `<dir>/<name>.<20-digit sequence>` holding one
//! block-aligned image:
//!
//! ```text
//! magic u32 | version u32 | sequence u64 | payload_len u64 | crc32(payload) u32 | 0 u32
//! payload (payload_len bytes) | zero padding to a multiple of 4 KiB        (all BE)
//! ```
//!
//! then syncs the file and the directory, and only then deletes older files. A reader
//! takes the newest file that validates. The seam has no rename (O_DIRECT files), and
//! none is needed: a file is never overwritten, so a crash at any point leaves either
//! the old image or the new one valid, never a mix.
//!
//! Invariant: a save never reuses a sequence (the next one is above every file of this
//! name seen on disk, valid or not), so a torn file is never mistaken for a newer image.
//! Invariant: besides the image just saved, the store keeps the previous good image, so
//! media corruption of the newest file (a bit flip) falls back one generation instead
//! of losing the table; anything older is deleted.
//! Invariant: a valid image's header sequence equals its file name's, and its payload
//! is at most [`SNAPSHOT_BYTES_MAX`]; memory read at load is bounded by that.

use crate::store::config::MIB;
use crate::store::io::{align_up, Disk, DiskFile, IoError, IoErrorKind, BLOCK_BYTES};
use std::cell::Cell;
use std::path::PathBuf;
use thiserror::Error;

/// Largest payload a snapshot holds.
pub const SNAPSHOT_BYTES_MAX: u64 = 64 * MIB;
/// Bytes before the payload: the fields above plus 4 reserved zero bytes, so the
/// payload starts 16-aligned within the image.
pub const HEADER_BYTES: usize = 32;
/// Longest snapshot name accepted (names become file names).
pub const NAME_CHARS_MAX: usize = 64;

const MAGIC: u32 = 0x524E_4D53; // "RNMS"
const VERSION: u32 = 1;
const SEQUENCE_DIGITS: usize = 20;

#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("snapshot I/O failed: {0}")]
    Io(#[from] IoError),
    #[error("snapshot {name}: payload of {payload_bytes} bytes exceeds the {max_bytes}-byte bound")]
    TooLarge { name: String, payload_bytes: u64, max_bytes: u64 },
    #[error("invalid snapshot name {0:?}: use 1..={NAME_CHARS_MAX} characters of A-Z a-z 0-9 _ -")]
    BadName(String),
    #[error("snapshot {name} in {dir}: files exist but none is valid (torn or corrupt; the log names each)")]
    NoValidImage { name: String, dir: String },
}

/// Size of the image holding a payload of `payload_bytes`.
pub fn image_bytes(payload_bytes: u64) -> u64 {
    align_up(HEADER_BYTES as u64 + payload_bytes, BLOCK_BYTES)
}

/// Writes the image of `payload` into `image`, which is `image_bytes(payload.len())`
/// long and zeroed.
fn encode_into(image: &mut [u8], sequence: u64, payload: &[u8]) {
    image[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    image[4..8].copy_from_slice(&VERSION.to_be_bytes());
    image[8..16].copy_from_slice(&sequence.to_be_bytes());
    image[16..24].copy_from_slice(&(payload.len() as u64).to_be_bytes());
    image[24..28].copy_from_slice(&crc32fast::hash(payload).to_be_bytes());
    image[HEADER_BYTES..HEADER_BYTES + payload.len()].copy_from_slice(payload);
}

/// The payload of an image read from the file for `expected_sequence`, or why the
/// image is not valid (torn, corrupt, or not ours).
pub fn decode(image: &[u8], expected_sequence: u64) -> Result<&[u8], String> {
    if image.len() < HEADER_BYTES {
        return Err(format!("{} bytes is shorter than the {HEADER_BYTES}-byte header", image.len()));
    }
    let u32_at = |at: usize| u32::from_be_bytes([image[at], image[at + 1], image[at + 2], image[at + 3]]);
    let u64_at = |at: usize| (u64::from(u32_at(at)) << 32) | u64::from(u32_at(at + 4));
    if u32_at(0) != MAGIC {
        return Err(format!("bad magic {:#010x}", u32_at(0)));
    }
    if u32_at(4) != VERSION {
        return Err(format!("unknown version {}", u32_at(4)));
    }
    if u64_at(8) != expected_sequence {
        return Err(format!("header sequence {} does not match the file name's {expected_sequence}", u64_at(8)));
    }
    let payload_bytes = u64_at(16);
    if payload_bytes > SNAPSHOT_BYTES_MAX || HEADER_BYTES as u64 + payload_bytes > image.len() as u64 {
        return Err(format!("payload length {payload_bytes} does not fit the {}-byte file", image.len()));
    }
    let payload = &image[HEADER_BYTES..HEADER_BYTES + payload_bytes as usize];
    let crc = crc32fast::hash(payload);
    if crc != u32_at(24) {
        return Err(format!("payload crc {crc:#010x} does not match the header's {:#010x}", u32_at(24)));
    }
    Ok(payload)
}

/// The snapshots of one name in one directory.
///
/// Methods take `&self` so that a shard can keep the store next to the table it
/// persists without holding a `RefCell` borrow across the save's awaits. Saves may
/// overlap: each takes its sequence when it starts, so the one started last wins.
pub struct SnapshotStore<D: Disk> {
    disk: D,
    dir: PathBuf,
    name: String,
    /// Highest sequence of any file of this name seen (valid or not) or written;
    /// `None` until the directory was first listed.
    sequence_max: Cell<Option<u64>>,
    /// Sequence of the newest image known valid (loaded or saved): the fallback the
    /// next save keeps.
    last_good: Cell<Option<u64>>,
    /// `dir` was created by this store (once, before the first save).
    dir_ready: Cell<bool>,
}

impl<D: Disk> SnapshotStore<D> {
    /// The snapshots named `name` in `dir`. Does no IO: the directory is listed on the
    /// first `load` or `save`, and created before the first `save`.
    pub fn new(disk: D, dir: impl Into<PathBuf>, name: &str) -> Self {
        Self {
            disk,
            dir: dir.into(),
            name: name.to_string(),
            sequence_max: Cell::new(None),
            last_good: Cell::new(None),
            dir_ready: Cell::new(false),
        }
    }

    pub fn path_of(&self, sequence: u64) -> PathBuf {
        self.dir.join(format!("{}.{:0width$}", self.name, sequence, width = SEQUENCE_DIGITS))
    }

    /// Sequence of the newest image loaded or saved, if any.
    pub fn last_good_sequence(&self) -> Option<u64> {
        self.last_good.get()
    }

    /// Names become file names and a `.` separates the sequence, so only a safe set.
    fn check_name(&self) -> Result<(), SnapshotError> {
        let name = &self.name;
        let ok = !name.is_empty()
            && name.len() <= NAME_CHARS_MAX
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if ok {
            Ok(())
        } else {
            Err(SnapshotError::BadName(name.clone()))
        }
    }

    /// Sequences of this name's files on disk, ascending; also raises `sequence_max`.
    async fn sequences(&self) -> Result<Vec<u64>, IoError> {
        let prefix = format!("{}.", self.name);
        let mut sequences: Vec<u64> = self
            .disk
            .list(&self.dir)
            .await?
            .iter()
            .filter_map(|file| file.strip_prefix(&prefix))
            .filter(|digits| digits.len() == SEQUENCE_DIGITS && digits.bytes().all(|b| b.is_ascii_digit()))
            .filter_map(|digits| digits.parse().ok())
            .collect();
        sequences.sort_unstable();
        let newest = sequences.last().copied().unwrap_or(0);
        self.sequence_max.set(Some(self.sequence_max.get().unwrap_or(0).max(newest)));
        Ok(sequences)
    }

    /// The payload of the newest valid image, or `None` if there is none. Invalid
    /// files (torn by a crash, corrupted on the media) are skipped with a warning; an
    /// IO error is returned as is (a failing device is no reason to roll metadata
    /// back).
    pub async fn load(&self) -> Result<Option<Vec<u8>>, SnapshotError> {
        self.check_name()?;
        let sequences = self.sequences().await?;
        for &sequence in sequences.iter().rev() {
            let path = self.path_of(sequence);
            let file = match self.disk.open(&path, false).await {
                Ok(file) => file,
                // Deleted between list and open: nothing to read.
                Err(e) if e.kind == IoErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let size_bytes = file.size().await?;
            if size_bytes > image_bytes(SNAPSHOT_BYTES_MAX) {
                tracing::warn!(file = %path.display(), size_bytes, "snapshot file larger than any valid image, skipped");
                continue;
            }
            let image = file.read_at(0, size_bytes as usize).await?;
            match decode(&image, sequence) {
                Ok(payload) => {
                    self.last_good.set(Some(sequence));
                    return Ok(Some(payload.to_vec()));
                }
                Err(reason) => {
                    tracing::warn!(file = %path.display(), %reason, "invalid snapshot skipped, trying an older one");
                }
            }
        }
        Ok(None)
    }

    /// `load` for a table whose loss must not go unnoticed: when files of this name exist
    /// but none is valid, an error instead of `None` (no table at all).
    pub async fn load_strict(&self) -> Result<Option<Vec<u8>>, SnapshotError> {
        let found = self.load().await?;
        if found.is_none() && self.sequence_max.get().is_some_and(|s| s > 0) {
            return Err(SnapshotError::NoValidImage { name: self.name.clone(), dir: self.dir.display().to_string() });
        }
        Ok(found)
    }

    /// Writes `payload` durably as the newest image and returns its sequence. Once this
    /// returns `Ok`, a crash loads this payload (or a later one).
    pub async fn save(&self, payload: &[u8]) -> Result<u64, SnapshotError> {
        self.check_name()?;
        if payload.len() as u64 > SNAPSHOT_BYTES_MAX {
            return Err(SnapshotError::TooLarge {
                name: self.name.clone(),
                payload_bytes: payload.len() as u64,
                max_bytes: SNAPSHOT_BYTES_MAX,
            });
        }
        if !self.dir_ready.get() {
            self.disk.create_dir_all(&self.dir).await?;
            self.dir_ready.set(true);
        }
        if self.sequence_max.get().is_none() {
            self.sequences().await?;
        }
        // Taken before any write: even a failed save may leave a file behind, and its
        // sequence must not be written again.
        let sequence = self.sequence_max.get().unwrap_or(0) + 1;
        self.sequence_max.set(Some(sequence));
        let path = self.path_of(sequence);
        let file = self.disk.open(&path, true).await?;
        let mut image = file.alloc_buf(image_bytes(payload.len() as u64) as usize);
        encode_into(&mut image, sequence, payload);
        file.write_at(0, image).await?;
        file.sync().await?;
        // The file's directory entry must be durable too, or a crash could lose the
        // new file after the old ones are gone.
        self.disk.sync_dir(&self.dir).await?;

        let keep = self.last_good.replace(Some(sequence));
        self.remove_older(sequence, keep).await;
        Ok(sequence)
    }

    /// Deletes files older than `newest`, except `keep`. The new image is already
    /// durable, so a failure here only leaves garbage for the next save to remove:
    /// logged, not returned. A crash may also bring deleted files back; `load` prefers
    /// the newest valid one, so that is harmless.
    async fn remove_older(&self, newest: u64, keep: Option<u64>) {
        let sequences = match self.sequences().await {
            Ok(sequences) => sequences,
            Err(e) => {
                tracing::warn!(error = %e, "listing old snapshots failed; they stay until the next save");
                return;
            }
        };
        for sequence in sequences.into_iter().filter(|&s| s < newest && Some(s) != keep) {
            let path = self.path_of(sequence);
            match self.disk.remove(&path).await {
                Ok(()) => {}
                Err(e) if e.kind == IoErrorKind::NotFound => {}
                Err(e) => tracing::warn!(file = %path.display(), error = %e, "removing an old snapshot failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::io::sim::{FaultConfig, SimBuf, SimDisk, SimFileHandle};
    use crate::store::io::DiskSpace;
    use futures_lite::future::block_on;
    use proptest::prelude::*;
    use std::cell::Cell;
    use std::path::Path;
    use std::rc::Rc;

    const DIR: &str = "/root/config";

    fn payload(generation: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(generation)).collect()
    }

    fn image_of(sequence: u64, payload: &[u8]) -> Vec<u8> {
        let mut image = vec![0; image_bytes(payload.len() as u64) as usize];
        encode_into(&mut image, sequence, payload);
        image
    }

    /// One image, damaged by `damage` (byte offset, xor mask), decoded as `sequence`:
    /// the payload or a reason containing `expected_err`.
    fn check(damage: &[(usize, u8)], decode_as: u64, expected: Result<&[u8], &str>) {
        let original = payload(1, 100);
        let mut image = image_of(7, &original);
        for &(at, mask) in damage {
            image[at] ^= mask;
        }
        match (decode(&image, decode_as), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "damage {damage:?}"),
            (Err(reason), Err(want)) => assert!(reason.contains(want), "damage {damage:?}: {reason} lacks {want}"),
            (got, want) => panic!("damage {damage:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn decode_validates_every_field() {
        let original = payload(1, 100);
        check(&[], 7, Ok(&original));
        check(&[], 8, Err("does not match the file name"));
        check(&[(0, 1)], 7, Err("bad magic"));
        check(&[(5, 1)], 7, Err("unknown version"));
        check(&[(15, 1)], 7, Err("does not match the file name"));
        check(&[(23, 1)], 7, Err("crc")); // length 101: the crc no longer matches
        check(&[(17, 1)], 7, Err("does not fit"));
        check(&[(24, 0x80)], 7, Err("crc"));
        check(&[(HEADER_BYTES, 4)], 7, Err("crc"));
        check(&[(HEADER_BYTES + 99, 1)], 7, Err("crc"));
        check(&[(HEADER_BYTES + 100, 1)], 7, Ok(&original)); // padding is not covered
        check(&[(29, 1)], 7, Ok(&original)); // reserved bytes are not covered
    }

    #[test]
    fn decode_rejects_short_images() {
        let image = image_of(1, &payload(0, 10));
        for len in [0, 1, HEADER_BYTES - 1] {
            assert!(decode(&image[..len], 1).is_err(), "len {len}");
        }
        assert!(decode(&image[..HEADER_BYTES + 9], 1).is_err());
        assert_eq!(decode(&image[..HEADER_BYTES + 10], 1).unwrap(), &payload(0, 10)[..]);
        let empty = image_of(3, &[]);
        assert_eq!(empty.len(), BLOCK_BYTES as usize);
        assert_eq!(decode(&empty, 3).unwrap(), &[] as &[u8]);
    }

    #[test]
    fn image_sizes_are_block_aligned() {
        for (payload_bytes, expected) in [(0, 4096), (4064, 4096), (4065, 8192), (1 << 20, (1 << 20) + 4096)] {
            assert_eq!(image_bytes(payload_bytes), expected, "payload {payload_bytes}");
        }
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(sequence in any::<u64>(), bytes in proptest::collection::vec(any::<u8>(), 0..10_000)) {
            let image = image_of(sequence, &bytes);
            prop_assert_eq!(image.len() as u64 % BLOCK_BYTES, 0);
            prop_assert_eq!(decode(&image, sequence).unwrap(), &bytes[..]);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), sequence in 0u64..4) {
            let _ = decode(&bytes, sequence);
        }
    }

    fn files(disk: &SimDisk) -> Vec<String> {
        block_on(disk.list(Path::new(DIR))).unwrap()
    }

    #[test]
    fn save_load_keeps_two_generations() {
        block_on(async {
            let disk = SimDisk::new(1);
            let store = SnapshotStore::new(disk.clone(), DIR, "topics");
            assert_eq!(store.load().await.unwrap(), None);
            for generation in 1..=5u8 {
                let sequence = store.save(&payload(generation, 5000)).await.unwrap();
                assert_eq!(sequence, generation as u64);
            }
            assert_eq!(files(&disk), vec!["topics.00000000000000000004", "topics.00000000000000000005"]);
            let reopened = SnapshotStore::new(disk.clone(), DIR, "topics");
            assert_eq!(reopened.load().await.unwrap(), Some(payload(5, 5000)));
            assert_eq!(reopened.last_good_sequence(), Some(5));
            // Another name in the same directory is independent.
            let groups = SnapshotStore::new(disk.clone(), DIR, "groups");
            assert_eq!(groups.load().await.unwrap(), None);
            groups.save(b"g").await.unwrap();
            assert_eq!(reopened.load().await.unwrap(), Some(payload(5, 5000)));
        });
    }

    #[test]
    fn save_without_load_continues_above_existing_files() {
        block_on(async {
            let disk = SimDisk::new(6);
            let first = SnapshotStore::new(disk.clone(), "/a/b/c", "t");
            assert_eq!(first.load().await.unwrap(), None); // a missing directory is empty
            assert_eq!(first.save(b"1").await.unwrap(), 1);
            assert!(disk.exists(Path::new("/a/b/c")).await.unwrap());
            // A torn leftover with a higher sequence is never reused.
            disk.write_raw(&first.path_of(7), 0, &[0xAB; 100]);
            let second = SnapshotStore::new(disk.clone(), "/a/b/c", "t");
            assert_eq!(second.save(b"2").await.unwrap(), 8);
            assert_eq!(second.load().await.unwrap(), Some(b"2".to_vec()));
            assert_eq!(second.last_good_sequence(), Some(8));
        });
    }

    #[test]
    fn bad_names_and_oversize_payloads_are_refused() {
        block_on(async {
            let disk = SimDisk::new(2);
            for name in ["", "a.b", "a/b", "x y", &"n".repeat(NAME_CHARS_MAX + 1)] {
                let store = SnapshotStore::new(disk.clone(), DIR, name);
                assert!(matches!(store.save(b"x").await, Err(SnapshotError::BadName(_))), "name {name:?}");
                assert!(matches!(store.load().await, Err(SnapshotError::BadName(_))), "name {name:?}");
            }
            let store = SnapshotStore::new(disk.clone(), DIR, "t");
            let huge = vec![0u8; SNAPSHOT_BYTES_MAX as usize + 1];
            assert!(matches!(store.save(&huge).await, Err(SnapshotError::TooLarge { .. })));
            assert_eq!(files(&disk), Vec::<String>::new());
        });
    }

    #[test]
    fn foreign_and_stray_files_are_ignored() {
        block_on(async {
            let disk = SimDisk::new(3);
            let store = SnapshotStore::new(disk.clone(), DIR, "topics");
            store.save(b"one").await.unwrap();
            for stray in ["topics.tmp", "topics.1", "topics.0000000000000000000x", "topicsx.00000000000000000009"] {
                disk.write_raw(&Path::new(DIR).join(stray), 0, b"junk");
            }
            let reopened = SnapshotStore::new(disk.clone(), DIR, "topics");
            assert_eq!(reopened.load().await.unwrap().unwrap(), b"one");
            assert_eq!(reopened.save(b"two").await.unwrap(), 2);
        });
    }

    /// Bit flips in the newest image fall back to the previous one; in both, to none.
    fn check_flips(flips_newest: &[u64], flips_previous: &[u64], expected: Option<u8>) {
        block_on(async {
            let disk = SimDisk::new(4);
            let store = SnapshotStore::new(disk.clone(), DIR, "t");
            for generation in 1..=3u8 {
                store.save(&payload(generation, 300)).await.unwrap();
            }
            for (sequence, flips) in [(3, flips_newest), (2, flips_previous)] {
                for &at in flips {
                    disk.flip_bit(&store.path_of(sequence), at, (at % 8) as u8);
                }
            }
            let reopened = SnapshotStore::new(disk.clone(), DIR, "t");
            let got = reopened.load().await.unwrap();
            assert_eq!(got, expected.map(|g| payload(g, 300)), "flips {flips_newest:?} / {flips_previous:?}");
            // The next save continues above every file, valid or not.
            assert_eq!(reopened.save(b"next").await.unwrap(), 4);
        });
    }

    #[test]
    fn bit_flips_fall_back_one_generation() {
        let payload_at = HEADER_BYTES as u64;
        check_flips(&[], &[], Some(3));
        check_flips(&[0], &[], Some(2)); // magic
        check_flips(&[9], &[], Some(2)); // sequence
        check_flips(&[20], &[], Some(2)); // length
        check_flips(&[26], &[], Some(2)); // crc
        check_flips(&[payload_at], &[], Some(2));
        check_flips(&[payload_at + 299], &[], Some(2));
        check_flips(&[payload_at + 300], &[], Some(3)); // padding
        check_flips(&[], &[payload_at], Some(3));
        check_flips(&[payload_at + 5], &[payload_at + 7], None);
    }

    #[test]
    fn read_bit_flips_fall_back_or_load_the_newest() {
        for seed in 0..32 {
            block_on(async {
                let disk = SimDisk::new(seed);
                let store = SnapshotStore::new(disk.clone(), DIR, "t");
                store.save(&payload(1, 9000)).await.unwrap();
                store.save(&payload(2, 9000)).await.unwrap();
                disk.set_faults(FaultConfig { read_bitflip_per_million: 500_000, ..FaultConfig::default() });
                let got = store.load().await.unwrap();
                assert!(
                    got.is_none() || got == Some(payload(1, 9000)) || got == Some(payload(2, 9000)),
                    "seed {seed}: a flipped image was accepted"
                );
            });
        }
    }

    #[test]
    fn read_errors_are_returned_not_skipped() {
        block_on(async {
            let disk = SimDisk::new(5);
            let store = SnapshotStore::new(disk.clone(), DIR, "t");
            store.save(b"x").await.unwrap();
            disk.set_faults(FaultConfig { read_eio_per_million: 1_000_000, ..FaultConfig::default() });
            assert!(matches!(store.load().await, Err(SnapshotError::Io(_))));
        });
    }

    /// A disk that crashes the simulated machine at its `crash_at`-th mutating
    /// operation (open-create, write, sync, sync_dir, remove, truncate): the operation
    /// does not happen and every later one fails, as after a power cut.
    #[derive(Clone)]
    struct CrashAt {
        sim: SimDisk,
        ops: Rc<Cell<u64>>,
        crash_at: u64,
    }

    impl CrashAt {
        fn step(&self, op: &'static str, path: &Path) -> Result<(), IoError> {
            let n = self.ops.get();
            self.ops.set(n + 1);
            if n == self.crash_at {
                self.sim.crash();
            }
            if n >= self.crash_at {
                return Err(IoError::new(IoErrorKind::Crashed, op, path, "simulated power cut"));
            }
            Ok(())
        }
    }

    struct CrashFile {
        disk: CrashAt,
        inner: SimFileHandle,
    }

    impl Disk for CrashAt {
        type File = CrashFile;
        async fn open(&self, path: &Path, create: bool) -> Result<CrashFile, IoError> {
            if create {
                self.step("open", path)?;
            }
            Ok(CrashFile { disk: self.clone(), inner: self.sim.open(path, create).await? })
        }
        async fn open_write_through(&self, path: &Path, create: bool) -> Result<CrashFile, IoError> {
            if create {
                self.step("open", path)?;
            }
            Ok(CrashFile { disk: self.clone(), inner: self.sim.open_write_through(path, create).await? })
        }
        async fn list(&self, dir: &Path) -> Result<Vec<String>, IoError> {
            self.sim.list(dir).await
        }
        async fn create_dir_all(&self, dir: &Path) -> Result<(), IoError> {
            self.sim.create_dir_all(dir).await
        }
        async fn remove(&self, path: &Path) -> Result<(), IoError> {
            self.step("remove", path)?;
            self.sim.remove(path).await
        }
        async fn exists(&self, path: &Path) -> Result<bool, IoError> {
            self.sim.exists(path).await
        }
        async fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
            self.step("sync_dir", dir)?;
            self.sim.sync_dir(dir).await
        }
        async fn space(&self, path: &Path) -> Result<DiskSpace, IoError> {
            self.sim.space(path).await
        }
    }

    impl DiskFile for CrashFile {
        type Buf = SimBuf;
        fn path(&self) -> &Path {
            self.inner.path()
        }
        fn write_through(&self) -> bool {
            self.inner.write_through()
        }
        fn alloc_buf(&self, len: usize) -> SimBuf {
            self.inner.alloc_buf(len)
        }
        fn alloc_buf_unzeroed(&self, len: usize) -> SimBuf {
            self.inner.alloc_buf_unzeroed(len)
        }
        async fn read_at(&self, pos: u64, len: usize) -> Result<Vec<u8>, IoError> {
            self.inner.read_at(pos, len).await
        }
        async fn write_at(&self, pos: u64, buf: SimBuf) -> Result<(), IoError> {
            self.disk.step("write", self.inner.path())?;
            self.inner.write_at(pos, buf).await
        }
        async fn write_zeros(&self, pos: u64, len: u64) -> Result<(), IoError> {
            self.disk.step("write", self.inner.path())?;
            self.inner.write_zeros(pos, len).await
        }
        async fn allocate(&self, len: u64) -> Result<(), IoError> {
            self.disk.step("allocate", self.inner.path())?;
            self.inner.allocate(len).await
        }
        async fn sync(&self) -> Result<(), IoError> {
            self.disk.step("sync", self.inner.path())?;
            self.inner.sync().await
        }
        async fn truncate(&self, len: u64) -> Result<(), IoError> {
            self.disk.step("truncate", self.inner.path())?;
            self.inner.truncate(len).await
        }
        async fn size(&self) -> Result<u64, IoError> {
            self.inner.size().await
        }
    }

    /// Saves `history` generations, then one more with a crash at mutating operation
    /// `crash_at` of that save; what loads after the crash must be the old payload or
    /// the new one, and the new one whenever the save returned `Ok`.
    fn check_crash(seed: u64, history: u8, crash_at: u64) -> bool {
        block_on(async {
            let sim = SimDisk::new(seed);
            let store = SnapshotStore::new(sim.clone(), DIR, "t");
            for generation in 1..=history {
                store.save(&payload(generation, 6000)).await.unwrap();
            }
            let disk = CrashAt { sim: sim.clone(), ops: Rc::new(Cell::new(0)), crash_at };
            let crashing = SnapshotStore::new(disk, DIR, "t");
            crashing.load().await.unwrap();
            let new = payload(history + 1, 6000);
            let saved = crashing.save(&new).await;
            sim.crash();
            let after = SnapshotStore::new(sim.clone(), DIR, "t");
            let got = after.load().await.unwrap();
            let old = (history > 0).then(|| payload(history, 6000));
            let context = format!("seed {seed} history {history} crash_at {crash_at} saved {:?}", saved.is_ok());
            if saved.is_ok() {
                assert_eq!(got, Some(new), "{context}: an acknowledged save was lost");
            } else {
                assert!(got == old || got == Some(new), "{context}: loaded neither the old nor the new payload");
            }
            // Saving again after recovery always works and wins.
            after.save(b"again").await.unwrap();
            let last = SnapshotStore::new(sim.clone(), DIR, "t");
            assert_eq!(last.load().await.unwrap().unwrap(), b"again", "{context}");
            saved.is_ok()
        })
    }

    #[test]
    fn crash_at_each_step_keeps_old_or_new() {
        for seed in 0..24 {
            for history in [0, 1, 3] {
                // Enough steps to reach past the end of the save (which then succeeds).
                let mut succeeded = false;
                for crash_at in 0..10 {
                    succeeded |= check_crash(seed, history, crash_at);
                }
                assert!(succeeded, "seed {seed}: no crash point was past the end of save");
            }
        }
    }
}
