//! Broker metadata: the topic table, subscription groups and consumer offsets, each
//! persisted as a validated rkyv image inside a [`snapshot::SnapshotStore`] over the IO
//! seam (DESIGN.md §1, §2: global metadata has one owning shard, which alone writes
//! these files; the other shards hold read-only copies updated by message).
//!
//! This module owns what the tables share: the error type, the [`DataVersion`] that
//! read-only copies compare, name validation (RocketMQ's character rules), the entry
//! bound, and the framing of an rkyv image inside a snapshot payload.
//!
//! Invariant: a payload is `{tag [u8; 4], schema_version u32 BE, rkyv bytes}`. The tag
//! keeps one table's file from ever being decoded as another's; the schema version
//! makes a layout change an explicit error rather than a misread (rkyv archives are not
//! self-describing).
//! Invariant: every table holds at most [`TABLE_ENTRIES_MAX`] entries with names of at
//! most [`GROUP_NAME_CHARS_MAX`] characters, so its image always fits
//! [`snapshot::SNAPSHOT_BYTES_MAX`].

pub mod attributes;
pub mod groups;
pub mod offsets;
pub mod snapshot;
pub mod topics;

use rkyv::api::high::{HighDeserializer, HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;
use snapshot::SnapshotError;
use thiserror::Error;

/// Most entries one table holds. With names bounded (255 + 127 characters) an entry
/// archives to well under 600 bytes, so 100 000 of them stay below the 64 MiB
/// snapshot bound with room to spare.
pub const TABLE_ENTRIES_MAX: usize = 100_000;
/// RocketMQ `TopicValidator.TOPIC_MAX_LENGTH`.
pub const TOPIC_NAME_CHARS_MAX: usize = 127;
/// RocketMQ `Validators.CHARACTER_MAX_LENGTH` (group names).
pub const GROUP_NAME_CHARS_MAX: usize = 255;

/// Why a topic or group name is refused.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum NameError {
    #[error("the name is empty")]
    Empty,
    #[error("the name has {len_chars} characters; at most {max_chars} are allowed")]
    TooLong { len_chars: usize, max_chars: usize },
    #[error("character {ch:?} is not allowed; use only A-Z a-z 0-9 _ - % |")]
    BadChar { ch: char },
    #[error("the name is reserved for a system topic")]
    SystemTopic,
}

#[derive(Debug, Error)]
pub enum MetaError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("{what} snapshot does not decode: {reason}")]
    Decode { what: &'static str, reason: String },
    #[error("{what} could not be encoded: {reason}")]
    Encode { what: &'static str, reason: String },
    #[error("invalid {kind} name {name:?}: {reason}")]
    Name { kind: &'static str, name: String, reason: NameError },
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("{what} table is full: at most {entries_max} entries")]
    TableFull { what: &'static str, entries_max: usize },
}

/// The version of a replicated table: the owner bumps it on every change, and a
/// read-only copy applies an update only if it is newer (DESIGN.md §2). Ordered by
/// `counter`, then `timestamp_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct DataVersion {
    /// Wall-clock time of the last change (informational, like RocketMQ's).
    pub timestamp_ms: i64,
    /// Number of changes; what orders versions, since wall clocks step backwards.
    pub counter: u64,
}

impl DataVersion {
    /// The version after one more change at `now_ms`.
    pub fn bump(&mut self, now_ms: i64) {
        self.counter += 1;
        self.timestamp_ms = now_ms;
    }

    pub fn is_newer_than(&self, other: &DataVersion) -> bool {
        self > other
    }
}

impl Ord for DataVersion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.counter, self.timestamp_ms).cmp(&(other.counter, other.timestamp_ms))
    }
}

impl PartialOrd for DataVersion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// RocketMQ's name rule (`^[%|a-zA-Z0-9_-]+$`) with a length bound in characters.
pub(crate) fn check_name_chars(name: &str, max_chars: usize) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(ch) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '%' | '|'))) {
        return Err(NameError::BadChar { ch });
    }
    // Only ASCII is left, so bytes are characters.
    if name.len() > max_chars {
        return Err(NameError::TooLong { len_chars: name.len(), max_chars });
    }
    Ok(())
}

/// RocketMQ group name rule (`Validators.checkGroup`).
pub fn validate_group_name(name: &str) -> Result<(), NameError> {
    check_name_chars(name, GROUP_NAME_CHARS_MAX)
}

const IMAGE_PREFIX_BYTES: usize = 8;

/// Archives `value` and frames it as a snapshot payload.
pub(crate) fn encode_image<T>(
    what: &'static str,
    tag: [u8; 4],
    schema_version: u32,
    value: &T,
) -> Result<Vec<u8>, MetaError>
where
    T: for<'a> rkyv::Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>,
{
    let archived =
        rkyv::to_bytes::<rancor::Error>(value).map_err(|e| MetaError::Encode { what, reason: e.to_string() })?;
    let mut payload = Vec::with_capacity(IMAGE_PREFIX_BYTES + archived.len());
    payload.extend_from_slice(&tag);
    payload.extend_from_slice(&schema_version.to_be_bytes());
    payload.extend_from_slice(&archived);
    Ok(payload)
}

/// The newest saved table in `store`, decoded with `decode`; `None` if nothing valid was
/// ever saved. Every table loads this way.
pub(crate) async fn load_table<D: crate::store::io::Disk, T>(
    store: &snapshot::SnapshotStore<D>,
    decode: fn(&[u8]) -> Result<T, MetaError>,
) -> Result<Option<T>, MetaError> {
    match store.load().await? {
        Some(payload) => Ok(Some(decode(&payload)?)),
        None => Ok(None),
    }
}

/// The schema version a payload's frame names, if it has a frame: what a table that can
/// still read an older layout looks at before choosing its decoder.
pub(crate) fn image_schema_version(payload: &[u8]) -> Option<u32> {
    payload.get(4..IMAGE_PREFIX_BYTES).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Checks the frame and validates the archive (bytecheck) before deserializing it, so
/// no byte pattern can make decoding read out of bounds.
pub(crate) fn decode_image<T>(
    what: &'static str,
    tag: [u8; 4],
    schema_version: u32,
    payload: &[u8],
) -> Result<T, MetaError>
where
    T: rkyv::Archive,
    T::Archived:
        for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + rkyv::Deserialize<T, HighDeserializer<rancor::Error>>,
{
    let fail = |reason: String| MetaError::Decode { what, reason };
    if payload.len() < IMAGE_PREFIX_BYTES {
        return Err(fail(format!("{} bytes is shorter than the {IMAGE_PREFIX_BYTES}-byte frame", payload.len())));
    }
    if payload[0..4] != tag {
        return Err(fail(format!("tag {:?} is not {:?}", &payload[0..4], tag)));
    }
    let found_version = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    if found_version != schema_version {
        return Err(fail(format!("schema version {found_version}, this build reads {schema_version}")));
    }
    // A snapshot payload sits at an arbitrary address; rkyv needs its root aligned.
    let body = &payload[IMAGE_PREFIX_BYTES..];
    let mut aligned = AlignedVec::<16>::with_capacity(body.len());
    aligned.extend_from_slice(body);
    rkyv::from_bytes::<T, rancor::Error>(&aligned).map_err(|e| fail(e.to_string()))
}

/// Inserts or replaces `value` under `key` in a versioned table (topics, groups): the
/// version moves only when something changed, and the table stays within
/// [`TABLE_ENTRIES_MAX`].
pub(crate) fn upsert_entry<T: PartialEq>(
    what: &'static str,
    map: &mut std::collections::BTreeMap<String, T>,
    version: &mut DataVersion,
    key: &str,
    value: T,
    now_ms: i64,
) -> Result<(), MetaError> {
    if !map.contains_key(key) && map.len() >= TABLE_ENTRIES_MAX {
        return Err(MetaError::TableFull { what, entries_max: TABLE_ENTRIES_MAX });
    }
    if map.get(key) != Some(&value) {
        map.insert(key.to_string(), value);
        version.bump(now_ms);
    }
    Ok(())
}

/// Removes `key` from a versioned table; the version moves if it existed.
pub(crate) fn remove_entry<T>(map: &mut std::collections::BTreeMap<String, T>, version: &mut DataVersion, key: &str, now_ms: i64) -> Option<T> {
    let removed = map.remove(key);
    if removed.is_some() {
        version.bump(now_ms);
    }
    removed
}

/// Checks a decoded table: bounded, every entry valid and stored under its own name.
pub(crate) fn check_decoded_entries<T>(
    what: &'static str,
    map: &std::collections::BTreeMap<String, T>,
    name_of: impl Fn(&T) -> &str,
    validate: impl Fn(&T) -> Result<(), MetaError>,
) -> Result<(), MetaError> {
    if map.len() > TABLE_ENTRIES_MAX {
        return Err(MetaError::Decode { what, reason: format!("{} entries (max {TABLE_ENTRIES_MAX})", map.len()) });
    }
    for (key, entry) in map {
        if key != name_of(entry) {
            return Err(MetaError::Decode { what, reason: format!("key {key:?} holds {:?}", name_of(entry)) });
        }
        validate(entry).map_err(|e| MetaError::Decode { what, reason: e.to_string() })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, max_chars: usize, expected: Result<(), NameError>) {
        assert_eq!(check_name_chars(name, max_chars), expected, "name {name:?}");
    }

    #[test]
    fn name_rules() {
        check("TopicTest", 127, Ok(()));
        check("%RETRY%group-1|x_y", 127, Ok(()));
        check("", 127, Err(NameError::Empty));
        check(&"a".repeat(127), 127, Ok(()));
        check(&"a".repeat(128), 127, Err(NameError::TooLong { len_chars: 128, max_chars: 127 }));
        check("a b", 127, Err(NameError::BadChar { ch: ' ' }));
        check("a.b", 127, Err(NameError::BadChar { ch: '.' }));
        check("a/b", 127, Err(NameError::BadChar { ch: '/' }));
        check("é", 127, Err(NameError::BadChar { ch: 'é' }));
        check(&"é".repeat(200), 127, Err(NameError::BadChar { ch: 'é' }));
    }

    #[test]
    fn data_version_orders_by_counter() {
        let mut v = DataVersion::default();
        let before = v;
        v.bump(1000);
        assert!(v.is_newer_than(&before));
        let mut stepped_back = v;
        stepped_back.bump(10); // the clock stepped back, the counter still advances
        assert!(stepped_back.is_newer_than(&v));
        assert!(!v.is_newer_than(&v));
        let cases = [((0, 1), (5, 0), true), ((0, 1), (0, 1), false), ((9, 1), (0, 1), true), ((0, 2), (9, 1), true)];
        for ((t1, c1), (t2, c2), newer) in cases {
            let (a, b) = (DataVersion { timestamp_ms: t1, counter: c1 }, DataVersion { timestamp_ms: t2, counter: c2 });
            assert_eq!(a.is_newer_than(&b), newer, "{a:?} vs {b:?}");
            assert_eq!(a > b, newer, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn image_frame_rejects_foreign_payloads() {
        let image = encode_image("version", *b"TEST", 3, &DataVersion { timestamp_ms: 5, counter: 9 }).unwrap();
        let back: DataVersion = decode_image("version", *b"TEST", 3, &image).unwrap();
        assert_eq!(back, DataVersion { timestamp_ms: 5, counter: 9 });
        let wrong_tag = decode_image::<DataVersion>("version", *b"TOPC", 3, &image);
        assert!(matches!(wrong_tag, Err(MetaError::Decode { .. })), "{wrong_tag:?}");
        let wrong_schema = decode_image::<DataVersion>("version", *b"TEST", 4, &image);
        assert!(matches!(wrong_schema, Err(MetaError::Decode { .. })), "{wrong_schema:?}");
        let short = decode_image::<DataVersion>("version", *b"TEST", 3, &image[..5]);
        assert!(matches!(short, Err(MetaError::Decode { .. })), "{short:?}");
        let truncated = decode_image::<DataVersion>("version", *b"TEST", 3, &image[..image.len() - 1]);
        assert!(matches!(truncated, Err(MetaError::Decode { .. })), "{truncated:?}");
    }
}
