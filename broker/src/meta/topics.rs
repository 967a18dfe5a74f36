//! The topic table: every topic's queue counts, permission and flags, with the
//! [`DataVersion`] that read-only copies on other shards compare (DESIGN.md §2, §5).
//!
//! Invariant: every key of `topics` equals its config's `name`, the name passes
//! [`check_topic_syntax`], queue counts are in `1..=QUEUE_NUMS_MAX`, `perm` uses only
//! the four RocketMQ permission bits, and there are at most [`super::TABLE_ENTRIES_MAX`]
//! topics. `upsert` enforces it; `decode` re-checks it, so a snapshot written by a
//! buggy build is refused rather than served.
//! Invariant: every change bumps `data_version`.

use super::snapshot::SnapshotStore;
use super::{
    check_name_chars, decode_image, encode_image, DataVersion, MetaError, NameError,
    TOPIC_NAME_CHARS_MAX,
};
use crate::store::io::Disk;
use std::collections::BTreeMap;

/// RocketMQ `PermName` bits. `PERM_INHERIT` marks a topic whose route a producer may
/// copy to auto-create a topic (TBW102); the others are what their names say.
pub const PERM_INHERIT: u32 = 1;
pub const PERM_WRITE: u32 = 1 << 1;
pub const PERM_READ: u32 = 1 << 2;
pub const PERM_PRIORITY: u32 = 1 << 3;
pub const PERM_RW: u32 = PERM_READ | PERM_WRITE;
const PERM_ALL: u32 = PERM_INHERIT | PERM_WRITE | PERM_READ | PERM_PRIORITY;

/// Most read or write queues one topic has on this broker (each is a ConsumeQueue
/// directory per shard, so the count is bounded).
pub const QUEUE_NUMS_MAX: u32 = 1024;

/// RocketMQ's default topic, whose route clients fetch before a topic exists.
pub const DEFAULT_TOPIC: &str = "TBW102";
/// RocketMQ's `RMQ_SYS_TRACE_TOPIC`: where message traces go unless `msgTraceTopicName`
/// names another topic.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// RocketMQ `TopicValidator.SYSTEM_TOPIC_SET`.
pub const SYSTEM_TOPICS: &[&str] = &[
    DEFAULT_TOPIC,
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    TRACE_TOPIC,
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];
/// System topics the broker creates on first use (clients cannot create them).
pub const BROKER_CREATED_SYSTEM_TOPICS: &[&str] = &["TRANS_CHECK_MAX_TIME_TOPIC"];
/// Queues of the cluster-named topic (Java's `TopicConfig` default of 16).
pub const NAMED_CLUSTER_TOPIC_QUEUES: u32 = 16;
/// Queues of the trace topic (Java's `TopicConfigManager`: 1 read, 1 write).
pub const TRACE_TOPIC_QUEUES: u32 = 1;
/// `MixAll.REPLY_TOPIC_POSTFIX`: replies to requests go to `<cluster>_REPLY_TOPIC`.
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";
/// Queues of the reply topic (Java's `TopicConfigManager` makes it with 1).
pub const REPLY_TOPIC_QUEUES: u32 = 1;

/// `MixAll.getReplyTopic`: the reply topic of `cluster`.
pub fn reply_topic(cluster: &str) -> String {
    format!("{cluster}_{REPLY_TOPIC_POSTFIX}")
}

/// RocketMQ `TopicValidator.SYSTEM_TOPIC_PREFIX`.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

const TAG: [u8; 4] = *b"TOPC";
/// 2: topics keep their attributes; a version-1 image still loads.
const SCHEMA_VERSION: u32 = 2;
const WHAT: &str = "topic table";

pub fn is_system_topic(name: &str) -> bool {
    SYSTEM_TOPICS.contains(&name) || name.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// The characters and length RocketMQ allows in a topic name (`TopicValidator`).
pub fn check_topic_syntax(name: &str) -> Result<(), NameError> {
    check_name_chars(name, TOPIC_NAME_CHARS_MAX)
}

/// The rule for a topic a client asks to create: RocketMQ's syntax, and not a system
/// topic's name (the broker creates those itself).
pub fn validate_topic_name(name: &str) -> Result<(), NameError> {
    check_topic_syntax(name)?;
    if is_system_topic(name) {
        return Err(NameError::SystemTopic);
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct TopicConfig {
    pub name: String,
    pub read_queue_nums: u32,
    pub write_queue_nums: u32,
    /// [`PERM_READ`] | [`PERM_WRITE`] | ...
    pub perm: u32,
    pub order: bool,
    pub topic_sys_flag: u32,
    /// RocketMQ 5's topic attributes (`message.type`, ...; `super::attributes`), keys
    /// without their `+`.
    pub attributes: BTreeMap<String, String>,
}

impl TopicConfig {
    /// A read-write topic with `queue_nums` read and write queues.
    pub fn new(name: &str, queue_nums: u32) -> Self {
        Self {
            name: name.to_string(),
            read_queue_nums: queue_nums,
            write_queue_nums: queue_nums,
            perm: PERM_RW,
            order: false,
            topic_sys_flag: 0,
            attributes: BTreeMap::new(),
        }
    }

    pub fn is_readable(&self) -> bool {
        self.perm & PERM_READ != 0
    }

    pub fn is_writable(&self) -> bool {
        self.perm & PERM_WRITE != 0
    }

    pub fn validate(&self) -> Result<(), MetaError> {
        check_topic_syntax(&self.name).map_err(|reason| MetaError::Name {
            kind: "topic",
            name: self.name.clone(),
            reason,
        })?;
        let invalid = |reason: String| Err(MetaError::Invalid { what: "topic config", reason });
        for (field, value) in [("read_queue_nums", self.read_queue_nums), ("write_queue_nums", self.write_queue_nums)] {
            if !(1..=QUEUE_NUMS_MAX).contains(&value) {
                return invalid(format!("{}: {field} {value} is not in 1..={QUEUE_NUMS_MAX}", self.name));
            }
        }
        if self.perm & !PERM_ALL != 0 {
            return invalid(format!("{}: perm {:#x} has bits other than {PERM_ALL:#x}", self.name, self.perm));
        }
        super::attributes::validate(&self.attributes).map_err(|e| MetaError::Invalid { what: "topic config", reason: format!("{}: attributes: {e}", self.name) })?;
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct TopicTable {
    pub data_version: DataVersion,
    pub topics: BTreeMap<String, TopicConfig>,
}

impl TopicTable {
    /// A table holding only [`DEFAULT_TOPIC`] with `default_queue_nums` queues and
    /// inherit + read + write permission, as RocketMQ creates it.
    pub fn with_defaults(default_queue_nums: u32) -> Self {
        let mut tbw102 = TopicConfig::new(DEFAULT_TOPIC, default_queue_nums.clamp(1, QUEUE_NUMS_MAX));
        tbw102.perm = PERM_INHERIT | PERM_RW;
        Self { data_version: DataVersion::default(), topics: BTreeMap::from([(DEFAULT_TOPIC.to_string(), tbw102)]) }
    }

    pub fn get(&self, name: &str) -> Option<&TopicConfig> {
        self.topics.get(name)
    }

    pub fn len(&self) -> usize {
        self.topics.len()
    }

    /// What read-only copies compare to decide whether an update is newer.
    pub fn version(&self) -> DataVersion {
        self.data_version
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Creates or replaces a topic and bumps the version. Checks syntax only: refusing
    /// system names to clients ([`validate_topic_name`]) is the request handler's job,
    /// since the broker creates system and retry topics here too.
    pub fn upsert(&mut self, config: TopicConfig, now_ms: i64) -> Result<(), MetaError> {
        config.validate()?;
        let key = config.name.clone();
        super::upsert_entry(WHAT, &mut self.topics, &mut self.data_version, &key, config, now_ms)
    }

    /// Moves the version with nothing else changed: what the NameServers are told
    /// changed without a topic changing (the broker's permission), so they take it.
    pub fn touch(&mut self, now_ms: i64) {
        self.data_version.bump(now_ms);
    }

    /// RocketMQ's per-broker and per-cluster topics (`brokerTopicEnable`,
    /// `clusterTopicEnable`): the broker's name with 1 queue, the cluster's name with
    /// 16, both `PERM_INHERIT` plus read and write when enabled (Java's
    /// `TopicConfigManager`), and the cluster's reply topic. Returns whether the table
    /// changed.
    pub fn ensure_named_topics(&mut self, broker_name: &str, broker_enabled: bool, cluster_name: &str, cluster_enabled: bool, now_ms: i64) -> Result<bool, MetaError> {
        let before = self.data_version;
        for (name, queues, enabled) in [(cluster_name, NAMED_CLUSTER_TOPIC_QUEUES, cluster_enabled), (broker_name, 1, broker_enabled)] {
            let mut c = TopicConfig::new(name, queues);
            c.perm = if enabled { PERM_INHERIT | PERM_RW } else { PERM_INHERIT };
            // Kept as they are when present: an operator may have changed them.
            if self.topics.get(name).is_none_or(|t| t.perm & PERM_RW != c.perm & PERM_RW) {
                let kept = self.topics.get(name).map(|t| (t.read_queue_nums, t.write_queue_nums));
                if let Some((r, w)) = kept {
                    c.read_queue_nums = r;
                    c.write_queue_nums = w;
                }
                self.upsert(c, now_ms)?;
            }
        }
        // The cluster's reply topic, as Java's `TopicConfigManager` makes it at start
        // (read and write, 1 queue), whatever `storeReplyMessageEnable` says: repliers
        // route to it. Kept as it is when present.
        let reply = reply_topic(cluster_name);
        if self.topics.get(&reply).is_none() {
            self.upsert(TopicConfig::new(&reply, REPLY_TOPIC_QUEUES), now_ms)?;
        }
        Ok(self.data_version != before)
    }

    /// The message trace topic (`traceTopicEnable`, `msgTraceTopicName`): `name` with
    /// [`TRACE_TOPIC_QUEUES`] read and write queues, read-write, created when absent. One
    /// present is kept as it is: Java loads the saved table over its start-up topics, so
    /// an operator's change survives a restart. Returns whether the table changed.
    pub fn ensure_trace_topic(&mut self, name: &str, now_ms: i64) -> Result<bool, MetaError> {
        if self.topics.contains_key(name) {
            return Ok(false);
        }
        self.upsert(TopicConfig::new(name, TRACE_TOPIC_QUEUES), now_ms)?;
        Ok(true)
    }

    /// Removes a topic; bumps the version if it existed.
    pub fn remove(&mut self, name: &str, now_ms: i64) -> Option<TopicConfig> {
        super::remove_entry(&mut self.topics, &mut self.data_version, name, now_ms)
    }

    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        encode_image(WHAT, TAG, SCHEMA_VERSION, self)
    }

    pub fn decode(payload: &[u8]) -> Result<Self, MetaError> {
        let table: Self = if super::image_schema_version(payload) == Some(1) {
            decode_image::<v1::TopicTable>(WHAT, TAG, 1, payload)?.into()
        } else {
            decode_image(WHAT, TAG, SCHEMA_VERSION, payload)?
        };
        super::check_decoded_entries(WHAT, &table.topics, |c| c.name.as_str(), TopicConfig::validate)?;
        Ok(table)
    }

    /// The newest saved table, or `None` if nothing valid was ever saved.
    pub async fn load<D: Disk>(store: &SnapshotStore<D>) -> Result<Option<Self>, MetaError> {
        super::load_table(store, Self::decode).await
    }

    pub async fn save<D: Disk>(&self, store: &SnapshotStore<D>) -> Result<(), MetaError> {
        store.save(&self.encode()?).await?;
        Ok(())
    }
}

/// Schema version 1 (before attributes), kept so an existing store loads.
mod v1 {
    use super::DataVersion;
    use std::collections::BTreeMap;

    #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
    pub struct TopicConfig {
        pub name: String,
        pub read_queue_nums: u32,
        pub write_queue_nums: u32,
        pub perm: u32,
        pub order: bool,
        pub topic_sys_flag: u32,
    }

    #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
    pub struct TopicTable {
        pub data_version: DataVersion,
        pub topics: BTreeMap<String, TopicConfig>,
    }

    impl From<TopicTable> for super::TopicTable {
        fn from(t: TopicTable) -> Self {
            let topics = t
                .topics
                .into_iter()
                .map(|(k, c)| {
                    let config = super::TopicConfig {
                        name: c.name,
                        read_queue_nums: c.read_queue_nums,
                        write_queue_nums: c.write_queue_nums,
                        perm: c.perm,
                        order: c.order,
                        topic_sys_flag: c.topic_sys_flag,
                        attributes: BTreeMap::new(),
                    };
                    (k, config)
                })
                .collect();
            super::TopicTable { data_version: t.data_version, topics }
        }
    }

    #[cfg(test)]
    pub fn encode(t: &TopicTable) -> Vec<u8> {
        super::encode_image(super::WHAT, super::TAG, 1, t).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::io::sim::SimDisk;
    use futures_lite::future::block_on;
    use proptest::prelude::*;
    use std::path::Path;

    fn check(name: &str, expected: Result<(), NameError>) {
        assert_eq!(validate_topic_name(name), expected, "topic {name:?}");
    }

    #[test]
    fn broker_and_cluster_topics_as_java_makes_them() {
        let mut t = TopicTable::with_defaults(8);
        assert!(t.ensure_named_topics("broker-a", true, "DefaultCluster", true, 1).unwrap());
        let b = t.get("broker-a").unwrap();
        assert_eq!((b.read_queue_nums, b.write_queue_nums, b.perm), (1, 1, PERM_INHERIT | PERM_RW));
        assert_eq!(t.get("DefaultCluster").unwrap().write_queue_nums, NAMED_CLUSTER_TOPIC_QUEUES);
        let r = t.get("DefaultCluster_REPLY_TOPIC").unwrap();
        assert_eq!((r.read_queue_nums, r.write_queue_nums, r.perm), (1, 1, PERM_RW));
        assert!(!t.ensure_named_topics("broker-a", true, "DefaultCluster", true, 2).unwrap(), "present: unchanged");
        // Disabled: kept, without read and write (Java: PERM_INHERIT only); queues kept.
        let mut grown = t.get("broker-a").unwrap().clone();
        grown.read_queue_nums = 4;
        grown.write_queue_nums = 4;
        t.upsert(grown, 3).unwrap();
        assert!(t.ensure_named_topics("broker-a", false, "DefaultCluster", true, 4).unwrap());
        let b = t.get("broker-a").unwrap();
        assert_eq!((b.read_queue_nums, b.perm), (4, PERM_INHERIT));
        let v = t.version();
        t.touch(5);
        assert_ne!(t.version(), v, "touch moves the version");
    }

    #[test]
    fn trace_topic_as_java_makes_it() {
        let mut t = TopicTable::with_defaults(8);
        assert!(t.ensure_trace_topic(TRACE_TOPIC, 1).unwrap());
        let c = t.get(TRACE_TOPIC).unwrap().clone();
        assert_eq!((c.read_queue_nums, c.write_queue_nums, c.perm), (1, 1, PERM_RW));
        assert!(!t.ensure_trace_topic(TRACE_TOPIC, 2).unwrap(), "present: unchanged");
        let mut grown = c.clone();
        grown.write_queue_nums = 4;
        t.upsert(grown, 3).unwrap();
        assert!(!t.ensure_trace_topic(TRACE_TOPIC, 4).unwrap());
        assert_eq!(t.get(TRACE_TOPIC).unwrap().write_queue_nums, 4, "an operator's change is kept");
        assert!(t.ensure_trace_topic("MyTraces", 5).unwrap(), "a custom name");
    }

    #[test]
    fn topic_name_rules() {
        check("TopicTest", Ok(()));
        check("a", Ok(()));
        check("orders_2024-eu|x%y", Ok(()));
        check("%RETRY%my-group", Ok(()));
        check(&"t".repeat(127), Ok(()));
        check(&"t".repeat(128), Err(NameError::TooLong { len_chars: 128, max_chars: 127 }));
        check("", Err(NameError::Empty));
        check("has space", Err(NameError::BadChar { ch: ' ' }));
        check("dot.ted", Err(NameError::BadChar { ch: '.' }));
        check("tab\t", Err(NameError::BadChar { ch: '\t' }));
        check("TBW102", Err(NameError::SystemTopic));
        check("SCHEDULE_TOPIC_XXXX", Err(NameError::SystemTopic));
        check("RMQ_SYS_TRACE_TOPIC", Err(NameError::SystemTopic));
        check("OFFSET_MOVED_EVENT", Err(NameError::SystemTopic));
        check("rmq_sys_anything", Err(NameError::SystemTopic));
        check("tbw102", Ok(())); // system names are case-sensitive, as in RocketMQ
        assert_eq!(check_topic_syntax("TBW102"), Ok(()));
    }

    #[test]
    fn defaults_hold_tbw102() {
        let table = TopicTable::with_defaults(8);
        let tbw102 = table.get(DEFAULT_TOPIC).unwrap();
        assert_eq!((tbw102.read_queue_nums, tbw102.write_queue_nums, tbw102.perm), (8, 8, 7));
        assert!(tbw102.is_readable() && tbw102.is_writable());
        assert_eq!(table.len(), 1);
        assert_eq!(TopicTable::with_defaults(0).get(DEFAULT_TOPIC).unwrap().read_queue_nums, 1);
    }

    fn check_upsert(config: TopicConfig, expected_err: Option<&str>) {
        let mut table = TopicTable::with_defaults(8);
        let before = table.data_version;
        match (table.upsert(config.clone(), 77), expected_err) {
            (Ok(()), None) => {
                assert_eq!(table.get(&config.name), Some(&config));
                assert!(table.data_version.is_newer_than(&before));
                assert_eq!(table.data_version.timestamp_ms, 77);
            }
            (Err(e), Some(want)) => {
                assert!(e.to_string().contains(want), "{config:?}: {e} lacks {want}");
                assert_eq!(table.data_version, before, "a refused upsert changed the version");
            }
            (got, want) => panic!("{config:?}: got {got:?}, expected error {want:?}"),
        }
    }

    #[test]
    fn upsert_validates() {
        let ok = TopicConfig::new("T", 4);
        check_upsert(ok.clone(), None);
        check_upsert(TopicConfig { perm: PERM_READ, order: true, topic_sys_flag: 3, ..ok.clone() }, None);
        check_upsert(TopicConfig { read_queue_nums: 1024, write_queue_nums: 1, ..ok.clone() }, None);
        check_upsert(TopicConfig { read_queue_nums: 0, ..ok.clone() }, Some("read_queue_nums 0"));
        check_upsert(TopicConfig { write_queue_nums: 1025, ..ok.clone() }, Some("write_queue_nums 1025"));
        check_upsert(TopicConfig { perm: 16, ..ok.clone() }, Some("perm 0x10"));
        check_upsert(TopicConfig { name: "bad name".into(), ..ok.clone() }, Some("invalid topic name"));
        check_upsert(TopicConfig { name: String::new(), ..ok.clone() }, Some("empty"));
        let attrs = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        check_upsert(TopicConfig { attributes: attrs("message.type", "DELAY"), ..ok.clone() }, None);
        check_upsert(TopicConfig { attributes: attrs("cleanup.policy", "COMPACTION"), ..ok.clone() }, Some("compacted"));
        check_upsert(TopicConfig { attributes: attrs("colour", "red"), ..ok.clone() }, Some("unsupported key"));
    }

    #[test]
    fn version_bumps_only_on_change() {
        let mut table = TopicTable::with_defaults(8);
        table.upsert(TopicConfig::new("A", 4), 1).unwrap();
        assert_eq!(table.data_version.counter, 1);
        table.upsert(TopicConfig::new("A", 4), 2).unwrap(); // same config
        assert_eq!(table.data_version.counter, 1);
        table.upsert(TopicConfig::new("A", 8), 3).unwrap();
        assert_eq!(table.data_version, DataVersion { timestamp_ms: 3, counter: 2 });
        assert_eq!(table.remove("nope", 4), None);
        assert_eq!(table.data_version.counter, 2);
        assert_eq!(table.remove("A", 5).map(|c| c.write_queue_nums), Some(8));
        assert_eq!(table.data_version, DataVersion { timestamp_ms: 5, counter: 3 });
        assert_eq!(table.get("A"), None);
    }

    #[test]
    fn table_is_bounded() {
        let mut table = TopicTable::default();
        for i in 0..crate::meta::TABLE_ENTRIES_MAX {
            table.topics.insert(format!("t{i}"), TopicConfig::new(&format!("t{i}"), 1));
        }
        assert!(matches!(table.upsert(TopicConfig::new("one-more", 1), 1), Err(MetaError::TableFull { .. })));
        table.upsert(TopicConfig::new("t5", 2), 1).unwrap(); // replacing is allowed
                                                             // The largest table fits a snapshot.
        let image = table.encode().unwrap();
        assert!((image.len() as u64) < super::super::snapshot::SNAPSHOT_BYTES_MAX, "{} bytes", image.len());
    }

    #[test]
    fn a_version_1_table_loads_without_attributes() {
        let old_config = v1::TopicConfig { name: "T".into(), read_queue_nums: 4, write_queue_nums: 2, perm: PERM_READ, order: true, topic_sys_flag: 1 };
        let old = v1::TopicTable { data_version: DataVersion { timestamp_ms: 7, counter: 2 }, topics: BTreeMap::from([("T".to_string(), old_config)]) };
        let table = TopicTable::decode(&v1::encode(&old)).unwrap();
        let want = TopicConfig { read_queue_nums: 4, write_queue_nums: 2, perm: PERM_READ, order: true, topic_sys_flag: 1, ..TopicConfig::new("T", 1) };
        assert_eq!((table.data_version, table.get("T")), (old.data_version, Some(&want)));
    }

    #[test]
    fn decode_refuses_inconsistent_tables() {
        let mut table = TopicTable::with_defaults(8);
        table.topics.insert("alias".into(), TopicConfig::new("other", 1));
        assert!(matches!(TopicTable::decode(&table.encode().unwrap()), Err(MetaError::Decode { .. })));
        let mut table = TopicTable::with_defaults(8);
        table.topics.insert("Z".into(), TopicConfig { read_queue_nums: 0, ..TopicConfig::new("Z", 1) });
        assert!(matches!(TopicTable::decode(&table.encode().unwrap()), Err(MetaError::Decode { .. })));
        let garbage = vec![0xA5u8; 300];
        assert!(TopicTable::decode(&garbage).is_err());
    }

    fn arb_config() -> impl Strategy<Value = TopicConfig> {
        ("[A-Za-z0-9_%|-]{1,127}", 1..=QUEUE_NUMS_MAX, 1..=QUEUE_NUMS_MAX, 0..16u32, any::<bool>(), any::<u32>())
            .prop_map(|(name, read_queue_nums, write_queue_nums, perm, order, topic_sys_flag)| TopicConfig {
                name,
                read_queue_nums,
                write_queue_nums,
                perm,
                order,
                topic_sys_flag,
                attributes: if order { BTreeMap::from([("message.type".to_string(), "FIFO".to_string())]) } else { BTreeMap::new() },
            })
    }

    fn arb_table() -> impl Strategy<Value = TopicTable> {
        (any::<i64>(), any::<u64>(), proptest::collection::vec(arb_config(), 0..40)).prop_map(
            |(timestamp_ms, counter, configs)| TopicTable {
                data_version: DataVersion { timestamp_ms, counter },
                topics: configs.into_iter().map(|c| (c.name.clone(), c)).collect(),
            },
        )
    }

    proptest! {
        #[test]
        fn codec_round_trips(table in arb_table()) {
            prop_assert_eq!(TopicTable::decode(&table.encode().unwrap()).unwrap(), table);
        }

        #[test]
        fn decode_never_panics(table in arb_table(), at in any::<usize>(), mask in 1u8..) {
            let mut image = table.encode().unwrap();
            let at = at % image.len();
            image[at] ^= mask;
            let _ = TopicTable::decode(&image);
            let _ = TopicTable::decode(&image[..at]);
        }
    }

    #[test]
    fn save_crash_load() {
        for seed in 0..16 {
            block_on(async {
                let disk = SimDisk::new(seed);
                let dir = Path::new("/store/config");
                let store = SnapshotStore::new(disk.clone(), dir, "topics");
                assert_eq!(TopicTable::load(&store).await.unwrap(), None);
                let mut table = TopicTable::with_defaults(8);
                table.upsert(TopicConfig::new("A", 4), 10).unwrap();
                table.save(&store).await.unwrap();
                let saved = table.clone();
                // A change that is not saved is lost at the crash, nothing else.
                table.upsert(TopicConfig::new("B", 4), 11).unwrap();
                disk.crash();
                let reopened = SnapshotStore::new(disk.clone(), dir, "topics");
                assert_eq!(TopicTable::load(&reopened).await.unwrap(), Some(saved), "seed {seed}");
            });
        }
    }

    #[test]
    fn another_tables_snapshot_is_refused() {
        block_on(async {
            let disk = SimDisk::new(1);
            let store = SnapshotStore::new(disk.clone(), Path::new("/c"), "topics");
            store.save(&super::super::groups::GroupTable::default().encode().unwrap()).await.unwrap();
            assert!(matches!(TopicTable::load(&store).await, Err(MetaError::Decode { .. })));
        });
    }
}
