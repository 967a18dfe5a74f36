//! The subscription group table: per consumer group, whether it may consume, its retry
//! policy and which broker serves it when it lags (RocketMQ `SubscriptionGroupConfig`).
//!
//! Invariant: every key of `groups` equals its config's `group_name`, which passes
//! [`validate_group_name`]; `retry_max_times` is at most [`RETRY_MAX_TIMES_MAX`]; at
//! most [`super::TABLE_ENTRIES_MAX`] groups. `upsert` enforces it and `decode` re-checks it.
//! Invariant: every change bumps `data_version`.

use super::snapshot::SnapshotStore;
use super::{decode_image, encode_image, validate_group_name, DataVersion, MetaError};
use crate::store::io::Disk;
use std::collections::BTreeMap;

/// Most redeliveries a group may ask for: RocketMQ's delay levels stop at 18, and past
/// that a retried message goes to the DLQ anyway; a larger value is a typo.
pub const RETRY_MAX_TIMES_MAX: u32 = 64;
/// Most retry queues per group (like topic queue counts).
pub const RETRY_QUEUE_NUMS_MAX: u32 = 1024;

/// Longest `groupRetryPolicy` JSON a group may hold: a customized policy lists at most a
/// few dozen delays; anything longer is not a policy.
pub const GROUP_RETRY_POLICY_BYTES_MAX: usize = 4096;
/// Longest consume timeout a group may ask for (Java keeps an int of minutes; a day is
/// already far past any push consumer's use).
pub const CONSUME_TIMEOUT_MINUTES_MAX: u32 = 24 * 60;
/// Java's default `groupRetryPolicy` as fastjson writes it.
pub const DEFAULT_GROUP_RETRY_POLICY_JSON: &str = r#"{"type":"CUSTOMIZED"}"#;

const TAG: [u8; 4] = *b"GRUP";
/// 2: the 5.x fields (`consumeFromMinEnable`, `consumeMessageOrderly`, `consumeTimeoutMinute`,
/// `groupSysFlag`, `groupRetryPolicy`) are kept; a version-1 image still loads.
const SCHEMA_VERSION: u32 = 2;
const WHAT: &str = "subscription group table";

#[derive(Debug, Clone, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SubscriptionGroupConfig {
    pub group_name: String,
    pub consume_enable: bool,
    pub consume_broadcast_enable: bool,
    pub retry_queue_nums: u32,
    pub retry_max_times: u32,
    pub broker_id: u64,
    pub which_broker_when_consume_slowly: u64,
    pub notify_consumer_ids_changed_enable: bool,
    /// Stored and answered as Java's broker does; its broker reads none of these
    /// four on the remoting path (its proxy and POP do), so neither does RingMQ's.
    pub consume_from_min_enable: bool,
    pub consume_message_orderly: bool,
    pub consume_timeout_minute: u32,
    pub group_sys_flag: i32,
    /// Java's `GroupRetryPolicy` JSON (`type` CUSTOMIZED or EXPONENTIAL and the policy's
    /// own fields), validated by [`validate_retry_policy`] and answered as given.
    pub group_retry_policy_json: String,
}

/// Checks a `groupRetryPolicy` JSON as Java's fastjson would bind it: an object whose
/// `type` is CUSTOMIZED or EXPONENTIAL, with the matching policy object if present.
pub fn validate_retry_policy(json: &str) -> Result<(), String> {
    if json.len() > GROUP_RETRY_POLICY_BYTES_MAX {
        return Err(format!("groupRetryPolicy is {} bytes; at most {GROUP_RETRY_POLICY_BYTES_MAX}", json.len()));
    }
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("groupRetryPolicy is not JSON: {e}"))?;
    let Some(obj) = v.as_object() else { return Err("groupRetryPolicy is not an object".into()) };
    match obj.get("type").and_then(|t| t.as_str()).unwrap_or("CUSTOMIZED") {
        "CUSTOMIZED" | "EXPONENTIAL" => {}
        other => return Err(format!("groupRetryPolicy type {other:?} is neither CUSTOMIZED nor EXPONENTIAL")),
    }
    if let Some(e) = obj.get("exponentialRetryPolicy").filter(|e| !e.is_null()) {
        let field = |k: &str| e.get(k).map_or(Ok(()), |v| v.as_i64().filter(|n| *n >= 0).map(|_| ()).ok_or(format!("exponentialRetryPolicy.{k} is not a non-negative number")));
        field("initial")?;
        field("max")?;
        field("multiplier")?;
    }
    if let Some(c) = obj.get("customizedRetryPolicy").filter(|c| !c.is_null()) {
        if let Some(next) = c.get("next") {
            let ok = next.as_array().is_some_and(|a| a.iter().all(|d| d.as_i64().is_some_and(|n| n >= 0)));
            if !ok {
                return Err("customizedRetryPolicy.next is not a list of non-negative delays in milliseconds".into());
            }
        }
    }
    Ok(())
}

impl SubscriptionGroupConfig {
    /// RocketMQ's defaults, as used when a group is auto-created on first contact.
    pub fn new(group_name: &str) -> Self {
        Self {
            group_name: group_name.to_string(),
            consume_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_sys_flag: 0,
            group_retry_policy_json: DEFAULT_GROUP_RETRY_POLICY_JSON.to_string(),
        }
    }

    pub fn validate(&self) -> Result<(), MetaError> {
        validate_group_name(&self.group_name).map_err(|reason| MetaError::Name {
            kind: "group",
            name: self.group_name.clone(),
            reason,
        })?;
        let invalid = |reason: String| Err(MetaError::Invalid { what: "subscription group config", reason });
        if self.retry_queue_nums > RETRY_QUEUE_NUMS_MAX {
            return invalid(format!(
                "{}: retry_queue_nums {} exceeds {RETRY_QUEUE_NUMS_MAX}",
                self.group_name, self.retry_queue_nums
            ));
        }
        if self.retry_max_times > RETRY_MAX_TIMES_MAX {
            return invalid(format!(
                "{}: retry_max_times {} exceeds {RETRY_MAX_TIMES_MAX}",
                self.group_name, self.retry_max_times
            ));
        }
        if self.consume_timeout_minute > CONSUME_TIMEOUT_MINUTES_MAX {
            return invalid(format!(
                "{}: consume_timeout_minute {} exceeds {CONSUME_TIMEOUT_MINUTES_MAX}",
                self.group_name, self.consume_timeout_minute
            ));
        }
        validate_retry_policy(&self.group_retry_policy_json).map_err(|reason| MetaError::Invalid { what: "subscription group config", reason: format!("{}: {reason}", self.group_name) })?;
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct GroupTable {
    pub data_version: DataVersion,
    pub groups: BTreeMap<String, SubscriptionGroupConfig>,
}

impl GroupTable {
    pub fn get(&self, group_name: &str) -> Option<&SubscriptionGroupConfig> {
        self.groups.get(group_name)
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// What read-only copies compare to decide whether an update is newer.
    pub fn version(&self) -> DataVersion {
        self.data_version
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Creates or replaces a group; bumps the version if anything changed.
    pub fn upsert(&mut self, config: SubscriptionGroupConfig, now_ms: i64) -> Result<(), MetaError> {
        config.validate()?;
        let key = config.group_name.clone();
        super::upsert_entry(WHAT, &mut self.groups, &mut self.data_version, &key, config, now_ms)
    }

    /// Removes a group; bumps the version if it existed.
    pub fn remove(&mut self, group_name: &str, now_ms: i64) -> Option<SubscriptionGroupConfig> {
        super::remove_entry(&mut self.groups, &mut self.data_version, group_name, now_ms)
    }

    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        encode_image(WHAT, TAG, SCHEMA_VERSION, self)
    }

    pub fn decode(payload: &[u8]) -> Result<Self, MetaError> {
        let table: Self = if super::image_schema_version(payload) == Some(1) {
            decode_image::<v1::GroupTable>(WHAT, TAG, 1, payload)?.into()
        } else {
            decode_image(WHAT, TAG, SCHEMA_VERSION, payload)?
        };
        super::check_decoded_entries(WHAT, &table.groups, |c| c.group_name.as_str(), SubscriptionGroupConfig::validate)?;
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

/// Schema version 1 (before the 5.x fields), kept so an existing store loads.
mod v1 {
    use super::DataVersion;
    use std::collections::BTreeMap;

    #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
    pub struct SubscriptionGroupConfig {
        pub group_name: String,
        pub consume_enable: bool,
        pub consume_broadcast_enable: bool,
        pub retry_queue_nums: u32,
        pub retry_max_times: u32,
        pub broker_id: u64,
        pub which_broker_when_consume_slowly: u64,
        pub notify_consumer_ids_changed_enable: bool,
    }

    #[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
    pub struct GroupTable {
        pub data_version: DataVersion,
        pub groups: BTreeMap<String, SubscriptionGroupConfig>,
    }

    impl From<GroupTable> for super::GroupTable {
        fn from(t: GroupTable) -> Self {
            let groups = t
                .groups
                .into_iter()
                .map(|(k, g)| {
                    let config = super::SubscriptionGroupConfig {
                        consume_enable: g.consume_enable,
                        consume_broadcast_enable: g.consume_broadcast_enable,
                        retry_queue_nums: g.retry_queue_nums,
                        retry_max_times: g.retry_max_times,
                        broker_id: g.broker_id,
                        which_broker_when_consume_slowly: g.which_broker_when_consume_slowly,
                        notify_consumer_ids_changed_enable: g.notify_consumer_ids_changed_enable,
                        ..super::SubscriptionGroupConfig::new(&g.group_name)
                    };
                    (k, config)
                })
                .collect();
            super::GroupTable { data_version: t.data_version, groups }
        }
    }

    #[cfg(test)]
    pub fn encode(t: &GroupTable) -> Vec<u8> {
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

    /// Upserts `config` into a table holding group "G"; `None` expects success.
    fn check(config: SubscriptionGroupConfig, expected_err: Option<&str>) {
        let mut table = GroupTable::default();
        table.upsert(SubscriptionGroupConfig::new("G"), 1).unwrap();
        let before = table.clone();
        match (table.upsert(config.clone(), 2), expected_err) {
            (Ok(()), None) => {
                assert_eq!(table.get(&config.group_name), Some(&config));
                let changed = before.get(&config.group_name) != Some(&config);
                assert_eq!(table.data_version.is_newer_than(&before.data_version), changed, "{config:?}");
            }
            (Err(e), Some(want)) => {
                assert!(e.to_string().contains(want), "{config:?}: {e} lacks {want}");
                assert_eq!(table, before, "a refused upsert changed the table");
            }
            (got, want) => panic!("{config:?}: got {got:?}, expected error {want:?}"),
        }
    }

    #[test]
    fn upsert_cases() {
        let g = SubscriptionGroupConfig::new("G");
        check(g.clone(), None); // unchanged: no version bump
        check(SubscriptionGroupConfig::new("other_group-1"), None);
        check(SubscriptionGroupConfig { consume_enable: false, ..g.clone() }, None);
        check(SubscriptionGroupConfig { retry_max_times: 0, retry_queue_nums: 0, ..g.clone() }, None);
        check(SubscriptionGroupConfig { retry_max_times: 64, broker_id: 1, ..g.clone() }, None);
        check(SubscriptionGroupConfig { retry_max_times: 65, ..g.clone() }, Some("retry_max_times 65"));
        check(SubscriptionGroupConfig { retry_queue_nums: 1025, ..g.clone() }, Some("retry_queue_nums 1025"));
        check(SubscriptionGroupConfig::new(""), Some("empty"));
        check(SubscriptionGroupConfig::new("bad group"), Some("invalid group name"));
        check(SubscriptionGroupConfig::new(&"g".repeat(255)), None);
        check(SubscriptionGroupConfig::new(&"g".repeat(256)), Some("256 characters"));
        check(SubscriptionGroupConfig { consume_message_orderly: true, consume_timeout_minute: 30, group_sys_flag: 1, ..g.clone() }, None);
        check(SubscriptionGroupConfig { consume_timeout_minute: 24 * 60 + 1, ..g.clone() }, Some("consume_timeout_minute"));
        check(SubscriptionGroupConfig { group_retry_policy_json: r#"{"type":"X"}"#.into(), ..g.clone() }, Some("neither CUSTOMIZED"));
    }

    #[test]
    fn defaults_match_rocketmq() {
        let g = SubscriptionGroupConfig::new("G");
        assert!(g.consume_enable && g.consume_broadcast_enable && g.notify_consumer_ids_changed_enable);
        assert_eq!(
            (g.retry_queue_nums, g.retry_max_times, g.broker_id, g.which_broker_when_consume_slowly),
            (1, 16, 0, 1)
        );
    }

    #[test]
    fn retry_policies() {
        // check(json, Ok or the words of the refusal)
        let check = |json: &str, want: Result<(), &str>| match (validate_retry_policy(json), want) {
            (Ok(()), Ok(())) => {}
            (Err(e), Err(words)) => assert!(e.contains(words), "{json}: {e}"),
            (got, want) => panic!("{json}: got {got:?}, want {want:?}"),
        };
        check(DEFAULT_GROUP_RETRY_POLICY_JSON, Ok(()));
        check(r#"{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":7200000,"multiplier":2}}"#, Ok(()));
        check(r#"{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}}"#, Ok(()));
        check(r#"{"type":"LINEAR"}"#, Err("neither CUSTOMIZED nor EXPONENTIAL"));
        check(r#"{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":-1}}"#, Err("initial"));
        check(r#"{"customizedRetryPolicy":{"next":["1s"]}}"#, Err("next"));
        check("[1]", Err("not an object"));
        check("{", Err("not JSON"));
        check(&format!(r#"{{"type":"CUSTOMIZED","x":"{}"}}"#, "a".repeat(GROUP_RETRY_POLICY_BYTES_MAX)), Err("bytes"));
    }

    #[test]
    fn a_version_1_table_loads_with_java_defaults_for_the_new_fields() {
        let mut old = v1::GroupTable { data_version: DataVersion { timestamp_ms: 5, counter: 3 }, groups: BTreeMap::new() };
        old.groups.insert(
            "G".into(),
            v1::SubscriptionGroupConfig {
                group_name: "G".into(),
                consume_enable: false,
                consume_broadcast_enable: true,
                retry_queue_nums: 2,
                retry_max_times: 3,
                broker_id: 0,
                which_broker_when_consume_slowly: 1,
                notify_consumer_ids_changed_enable: false,
            },
        );
        let table = GroupTable::decode(&v1::encode(&old)).unwrap();
        assert_eq!(table.data_version, old.data_version);
        let want = SubscriptionGroupConfig {
            consume_enable: false,
            retry_queue_nums: 2,
            retry_max_times: 3,
            notify_consumer_ids_changed_enable: false,
            ..SubscriptionGroupConfig::new("G")
        };
        assert_eq!(table.get("G"), Some(&want));
    }

    #[test]
    fn remove_bumps_only_when_present() {
        let mut table = GroupTable::default();
        table.upsert(SubscriptionGroupConfig::new("G"), 1).unwrap();
        assert_eq!(table.remove("H", 2), None);
        assert_eq!(table.data_version.counter, 1);
        assert!(table.remove("G", 3).is_some());
        assert_eq!(table.data_version, DataVersion { timestamp_ms: 3, counter: 2 });
        assert!(table.is_empty());
    }

    #[test]
    fn decode_refuses_inconsistent_tables() {
        let mut table = GroupTable::default();
        table.groups.insert("alias".into(), SubscriptionGroupConfig::new("G"));
        assert!(matches!(GroupTable::decode(&table.encode().unwrap()), Err(MetaError::Decode { .. })));
        let mut table = GroupTable::default();
        table
            .groups
            .insert("G".into(), SubscriptionGroupConfig { retry_max_times: 1000, ..SubscriptionGroupConfig::new("G") });
        assert!(matches!(GroupTable::decode(&table.encode().unwrap()), Err(MetaError::Decode { .. })));
    }

    fn arb_table() -> impl Strategy<Value = GroupTable> {
        let config = (
            "[A-Za-z0-9_%|-]{1,255}",
            any::<(bool, bool, bool)>(),
            0..=RETRY_QUEUE_NUMS_MAX,
            0..=RETRY_MAX_TIMES_MAX,
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(group_name, (c, b, n), retry_queue_nums, retry_max_times, broker_id, slow)| {
                let base = SubscriptionGroupConfig::new(&group_name);
                SubscriptionGroupConfig {
                    group_name,
                    consume_enable: c,
                    consume_broadcast_enable: b,
                    retry_queue_nums,
                    retry_max_times,
                    broker_id,
                    which_broker_when_consume_slowly: slow,
                    notify_consumer_ids_changed_enable: n,
                    consume_message_orderly: c && b,
                    consume_timeout_minute: (broker_id % 100) as u32,
                    ..base
                }
            });
        (any::<i64>(), any::<u64>(), proptest::collection::vec(config, 0..30)).prop_map(
            |(timestamp_ms, counter, configs)| GroupTable {
                data_version: DataVersion { timestamp_ms, counter },
                groups: configs.into_iter().map(|c| (c.group_name.clone(), c)).collect(),
            },
        )
    }

    proptest! {
        #[test]
        fn codec_round_trips(table in arb_table()) {
            prop_assert_eq!(GroupTable::decode(&table.encode().unwrap()).unwrap(), table);
        }

        #[test]
        fn decode_never_panics(table in arb_table(), at in any::<usize>(), mask in 1u8..) {
            let mut image = table.encode().unwrap();
            let at = at % image.len();
            image[at] ^= mask;
            let _ = GroupTable::decode(&image);
            let _ = GroupTable::decode(&image[..at]);
        }
    }

    #[test]
    fn save_crash_load() {
        for seed in 0..16 {
            block_on(async {
                let disk = SimDisk::new(seed);
                let dir = Path::new("/store/config");
                let store = SnapshotStore::new(disk.clone(), dir, "groups");
                let mut table = GroupTable::default();
                for name in ["a", "b", "c"] {
                    table.upsert(SubscriptionGroupConfig::new(name), 1).unwrap();
                    table.save(&store).await.unwrap();
                }
                let saved = table.clone();
                table.remove("a", 2);
                disk.crash();
                let reopened = SnapshotStore::new(disk.clone(), dir, "groups");
                assert_eq!(GroupTable::load(&reopened).await.unwrap(), Some(saved), "seed {seed}");
            });
        }
    }
}
