//! Consumer offsets: the next queue offset each (group, topic, queue) will consume,
//! as committed by clients (UPDATE_CONSUMER_OFFSET) and answered to them
//! (QUERY_CONSUMER_OFFSET). Persisted periodically, so a crash may roll a group back to
//! its previous save: consumers then see some messages again (at-least-once), never
//! skip any.
//!
//! Invariant: names in keys pass the topic and group name rules and queue ids are
//! non-negative, and there are at most [`TABLE_ENTRIES_MAX`] entries, so the image
//! always fits a snapshot; `commit` enforces it and `decode` re-checks it.
//! Invariant: `dirty` is set by every change and cleared only by a successful `save`;
//! it is never persisted.

use super::snapshot::SnapshotStore;
use super::topics::check_topic_syntax;
use super::{decode_image, encode_image, validate_group_name, MetaError, TABLE_ENTRIES_MAX};
use crate::store::io::Disk;
use std::collections::BTreeMap;

const TAG: [u8; 4] = *b"OFFS";
const SCHEMA_VERSION: u32 = 1;
const WHAT: &str = "consumer offset table";

/// (group, topic, queue id).
pub type OffsetKey = (String, String, i32);

#[derive(Debug, Clone, PartialEq, Eq, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ConsumerOffsetTable {
    pub offsets: BTreeMap<OffsetKey, u64>,
    /// Changed since the last successful save.
    #[rkyv(with = rkyv::with::Skip)]
    dirty: bool,
}

fn check_key(group: &str, topic: &str, queue_id: i32) -> Result<(), MetaError> {
    validate_group_name(group).map_err(|reason| MetaError::Name { kind: "group", name: group.to_string(), reason })?;
    check_topic_syntax(topic).map_err(|reason| MetaError::Name { kind: "topic", name: topic.to_string(), reason })?;
    if queue_id < 0 {
        return Err(MetaError::Invalid { what: "queue id", reason: format!("{queue_id} is negative") });
    }
    Ok(())
}

impl ConsumerOffsetTable {
    /// Records that `group` has consumed `topic`/`queue_id` up to `offset`. Like
    /// RocketMQ, a lower offset replaces a higher one: a client resetting its offset
    /// (or rewinding) is allowed to.
    pub fn commit(&mut self, group: &str, topic: &str, queue_id: i32, offset: u64) -> Result<(), MetaError> {
        check_key(group, topic, queue_id)?;
        let len = self.offsets.len();
        let key = (group.to_string(), topic.to_string(), queue_id);
        match self.offsets.get_mut(&key) {
            Some(current) if *current == offset => {}
            Some(current) => {
                *current = offset;
                self.dirty = true;
            }
            None if len >= TABLE_ENTRIES_MAX => {
                return Err(MetaError::TableFull { what: WHAT, entries_max: TABLE_ENTRIES_MAX });
            }
            None => {
                self.offsets.insert(key, offset);
                self.dirty = true;
            }
        }
        Ok(())
    }

    /// The committed offset, or `None` if the group never committed for that queue.
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<u64> {
        // The key owns its strings; the allocation is acceptable for a request that
        // a consumer makes once per queue at start-up.
        self.offsets.get(&(group.to_string(), topic.to_string(), queue_id)).copied()
    }

    /// Forgets every offset of `group`; returns how many entries were removed.
    pub fn remove_group(&mut self, group: &str) -> usize {
        let before = self.offsets.len();
        self.offsets.retain(|(g, _, _), _| g != group);
        let removed = before - self.offsets.len();
        self.dirty |= removed > 0;
        removed
    }

    /// Forgets every group's offsets of `topic` (the topic was deleted); returns how many
    /// entries were removed.
    pub fn remove_topic(&mut self, topic: &str) -> usize {
        let before = self.offsets.len();
        self.offsets.retain(|(_, t, _), _| t != topic);
        let removed = before - self.offsets.len();
        self.dirty |= removed > 0;
        removed
    }

    /// (topic, queue id, offset) of every queue `group` committed, in key order.
    pub fn group_offsets<'a>(&'a self, group: &'a str) -> impl Iterator<Item = (&'a str, i32, u64)> + 'a {
        self.offsets
            .range((group.to_string(), String::new(), i32::MIN)..)
            .take_while(move |((g, _, _), _)| g == group)
            .map(|((_, topic, queue_id), offset)| (topic.as_str(), *queue_id, *offset))
    }

    /// Groups with an offset of `topic` (Java's `whichGroupByTopic`). A full scan: an
    /// admin request, bounded by `TABLE_ENTRIES_MAX`.
    pub fn groups_of_topic(&self, topic: &str) -> std::collections::BTreeSet<String> {
        self.offsets.keys().filter(|(_, t, _)| t == topic).map(|(g, _, _)| g.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Returns whether the table changed since the last save and marks it clean: for a
    /// caller that encodes under a `RefCell` borrow and saves after releasing it. If
    /// that save fails, it calls [`Self::mark_dirty`].
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        encode_image(WHAT, TAG, SCHEMA_VERSION, self)
    }

    /// A decoded table is clean: it equals what is on disk.
    pub fn decode(payload: &[u8]) -> Result<Self, MetaError> {
        let table: Self = decode_image(WHAT, TAG, SCHEMA_VERSION, payload)?;
        if table.offsets.len() > TABLE_ENTRIES_MAX {
            return Err(MetaError::Decode { what: WHAT, reason: format!("{} entries", table.offsets.len()) });
        }
        for (group, topic, queue_id) in table.offsets.keys() {
            check_key(group, topic, *queue_id).map_err(|e| MetaError::Decode { what: WHAT, reason: e.to_string() })?;
        }
        Ok(table)
    }

    /// The newest saved table, or `None` if nothing valid was ever saved.
    pub async fn load<D: Disk>(store: &SnapshotStore<D>) -> Result<Option<Self>, MetaError> {
        super::load_table(store, Self::decode).await
    }

    /// Saves the table and clears `dirty`. Callers on a timer skip clean tables.
    pub async fn save<D: Disk>(&mut self, store: &SnapshotStore<D>) -> Result<(), MetaError> {
        store.save(&self.encode()?).await?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::io::sim::{FaultConfig, SimDisk};
    use futures_lite::future::block_on;
    use proptest::prelude::*;
    use std::path::Path;

    enum Op {
        Commit(&'static str, &'static str, i32, u64),
        RemoveGroup(&'static str),
    }
    use Op::*;

    /// Applies `ops` to an empty table; expects the final entries, the dirty flag, and
    /// which ops failed (by index).
    fn check(ops: &[Op], expected: &[(&str, &str, i32, u64)], expected_dirty: bool, expected_failures: &[usize]) {
        let mut table = ConsumerOffsetTable::default();
        let mut failures = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Commit(g, t, q, o) => {
                    if table.commit(g, t, *q, *o).is_err() {
                        failures.push(i);
                    }
                }
                RemoveGroup(g) => {
                    table.remove_group(g);
                }
            }
        }
        let got: Vec<_> = table.offsets.iter().map(|((g, t, q), o)| (g.as_str(), t.as_str(), *q, *o)).collect();
        assert_eq!(got, expected);
        for &(g, t, q, o) in expected {
            assert_eq!(table.query(g, t, q), Some(o));
        }
        assert_eq!(table.is_dirty(), expected_dirty);
        assert_eq!(failures, expected_failures);
    }

    #[test]
    fn commit_query_remove() {
        check(&[], &[], false, &[]);
        check(&[Commit("g", "t", 0, 5)], &[("g", "t", 0, 5)], true, &[]);
        check(&[Commit("g", "t", 0, 5), Commit("g", "t", 0, 9)], &[("g", "t", 0, 9)], true, &[]);
        check(&[Commit("g", "t", 0, 9), Commit("g", "t", 0, 3)], &[("g", "t", 0, 3)], true, &[]); // rewind
        check(
            &[Commit("g", "t", 1, 1), Commit("g", "t", 0, 2), Commit("a", "t", 0, 3)],
            &[("a", "t", 0, 3), ("g", "t", 0, 2), ("g", "t", 1, 1)],
            true,
            &[],
        );
        check(&[Commit("g", "t", 0, 1), Commit("h", "t", 0, 2), RemoveGroup("g")], &[("h", "t", 0, 2)], true, &[]);
        check(&[RemoveGroup("nobody")], &[], false, &[]);
        check(&[Commit("g", "t", -1, 1)], &[], false, &[0]);
        check(&[Commit("bad group", "t", 0, 1)], &[], false, &[0]);
        check(&[Commit("g", "bad.topic", 0, 1)], &[], false, &[0]);
        check(&[Commit("", "t", 0, 1), Commit("g", "", 0, 1)], &[], false, &[0, 1]);
        check(&[Commit("%RETRY%g", "%RETRY%g", 0, u64::MAX)], &[("%RETRY%g", "%RETRY%g", 0, u64::MAX)], true, &[]);
    }

    #[test]
    fn unchanged_commit_is_not_dirty() {
        let mut table = ConsumerOffsetTable::default();
        table.commit("g", "t", 0, 5).unwrap();
        let image = table.encode().unwrap();
        let mut decoded = ConsumerOffsetTable::decode(&image).unwrap();
        assert!(!decoded.is_dirty());
        decoded.commit("g", "t", 0, 5).unwrap();
        assert!(!decoded.is_dirty());
        decoded.commit("g", "t", 0, 6).unwrap();
        assert!(decoded.take_dirty());
        assert!(!decoded.take_dirty());
        decoded.mark_dirty();
        assert!(decoded.is_dirty());
        assert_eq!(decoded.query("g", "t", 1), None);
        assert_eq!(decoded.query("h", "t", 0), None);
    }

    #[test]
    fn group_offsets_lists_one_group() {
        let mut table = ConsumerOffsetTable::default();
        for (g, t, q, o) in [("a", "x", 0, 1), ("b", "x", 1, 2), ("b", "y", 0, 3), ("bb", "x", 0, 4), ("c", "x", 0, 5)]
        {
            table.commit(g, t, q, o).unwrap();
        }
        assert_eq!(table.group_offsets("b").collect::<Vec<_>>(), vec![("x", 1, 2), ("y", 0, 3)]);
        assert_eq!(table.group_offsets("nobody").count(), 0);
        assert_eq!(table.groups_of_topic("x").into_iter().collect::<Vec<_>>(), vec!["a", "b", "bb", "c"]);
        assert!(table.groups_of_topic("z").is_empty());
    }

    #[test]
    fn table_is_bounded() {
        let mut table = ConsumerOffsetTable::default();
        for i in 0..TABLE_ENTRIES_MAX as i32 {
            table.offsets.insert(("g".repeat(255), "t".repeat(127), i), u64::MAX);
        }
        assert!(matches!(table.commit("g", "t", 0, 1), Err(MetaError::TableFull { .. })));
        table.commit(&"g".repeat(255), &"t".repeat(127), 7, 1).unwrap(); // existing key
        let image = table.encode().unwrap();
        assert!((image.len() as u64) < super::super::snapshot::SNAPSHOT_BYTES_MAX, "{} bytes", image.len());
        assert_eq!(ConsumerOffsetTable::decode(&image).unwrap().len(), TABLE_ENTRIES_MAX);
    }

    #[test]
    fn decode_refuses_bad_keys() {
        let mut table = ConsumerOffsetTable::default();
        table.offsets.insert(("g".into(), "t".into(), -5), 1);
        assert!(matches!(ConsumerOffsetTable::decode(&table.encode().unwrap()), Err(MetaError::Decode { .. })));
    }

    fn arb_table() -> impl Strategy<Value = ConsumerOffsetTable> {
        let entry = ("[A-Za-z0-9_%|-]{1,40}", "[A-Za-z0-9_%|-]{1,40}", 0..i32::MAX, any::<u64>());
        proptest::collection::vec(entry, 0..60).prop_map(|entries| ConsumerOffsetTable {
            offsets: entries.into_iter().map(|(g, t, q, o)| ((g, t, q), o)).collect(),
            dirty: false,
        })
    }

    proptest! {
        #[test]
        fn codec_round_trips(table in arb_table()) {
            prop_assert_eq!(ConsumerOffsetTable::decode(&table.encode().unwrap()).unwrap(), table);
        }

        #[test]
        fn decode_never_panics(table in arb_table(), at in any::<usize>(), mask in 1u8..) {
            let mut image = table.encode().unwrap();
            let at = at % image.len();
            image[at] ^= mask;
            let _ = ConsumerOffsetTable::decode(&image);
            let _ = ConsumerOffsetTable::decode(&image[..at]);
        }
    }

    #[test]
    fn save_crash_load() {
        for seed in 0..16 {
            block_on(async {
                let disk = SimDisk::new(seed);
                let dir = Path::new("/store/config");
                let store = SnapshotStore::new(disk.clone(), dir, "offsets");
                let mut table = ConsumerOffsetTable::default();
                for offset in 1..=5 {
                    table.commit("g", "t", 0, offset).unwrap();
                    assert!(table.is_dirty());
                    table.save(&store).await.unwrap();
                    assert!(!table.is_dirty());
                }
                table.commit("g", "t", 0, 6).unwrap(); // not saved: rolls back to 5
                disk.crash();
                let reopened = SnapshotStore::new(disk.clone(), dir, "offsets");
                let loaded = ConsumerOffsetTable::load(&reopened).await.unwrap().unwrap();
                assert_eq!(loaded.query("g", "t", 0), Some(5), "seed {seed}");
                assert!(!loaded.is_dirty());
            });
        }
    }

    #[test]
    fn failed_save_stays_dirty() {
        block_on(async {
            let disk = SimDisk::new(9);
            let store = SnapshotStore::new(disk.clone(), Path::new("/c"), "offsets");
            let mut table = ConsumerOffsetTable::default();
            table.commit("g", "t", 0, 1).unwrap();
            disk.set_faults(FaultConfig { sync_eio_per_million: 1_000_000, ..FaultConfig::default() });
            assert!(table.save(&store).await.is_err());
            assert!(table.is_dirty());
        });
    }
}
