//! RingMQ's TOML configuration file: `BrokerConfig`'s fields under their own
//! snake_case names at the top level (see `tuning/profiles/`), and the `[store]` table
//! (`StoreSection`), the subset of `StoreConfig` operators tune.
//!
//! Invariant: an unknown key, at the top level or in `[store]`, is an error naming it
//! (`deny_unknown_fields` on both); a key left out keeps its default.
//! Invariant: `store.record_bytes_max` is never read from the file: it is derived from
//! the store's geometry after parsing, as every constructor does.

use super::{expand_home, split_addrs, BrokerConfig, ConfigError, FlushKind};
use crate::store::config::{FlushMode, StoreConfig};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

impl BrokerConfig {
    /// Parses RingMQ's TOML format over the defaults. Does not validate.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let mut config: Self = ::toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        config.derive_bounds();
        Ok(config)
    }
}

/// `[store] preallocate`: how CommitLog segments are made ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PreallocateKind {
    Zero,
    Fallocate,
}

/// The `[store]` table: the subset of [`StoreConfig`] operators tune. Every field is
/// optional so that a file names only what it changes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    segment_bytes: Option<u64>,
    /// "zero" (default; best for sync flush) or "fallocate" (best for async).
    preallocate: Option<PreallocateKind>,
    flush: Option<FlushKind>,
    flush_interval_ms: Option<u64>,
    flush_min_bytes: Option<u64>,
    dirty_bytes_max: Option<u64>,
    checkpoint_lag_bytes_max: Option<u64>,
    write_through: Option<bool>,
    read_ahead_windows_max: Option<usize>,
    scrub_bytes_per_sec: Option<u64>,
    tail_cache_bytes: Option<u64>,
    cq_entries_per_file: Option<u64>,
    file_reserved_hours: Option<u64>,
    delete_when_hour: Option<u32>,
    delete_when_hours: Option<Vec<u32>>,
    disk_max_used_ratio: Option<f64>,
    disk_force_clean_ratio: Option<f64>,
    disk_refuse_ratio: Option<f64>,
    clean_file_forcibly: Option<bool>,
    delete_files_per_pass_max: Option<u32>,
    allow_truncate_corrupt: Option<bool>,
}

impl StoreSection {
    fn apply(self, store: &mut StoreConfig) {
        let StoreSection {
            segment_bytes,
            preallocate,
            flush,
            flush_interval_ms,
            flush_min_bytes,
            dirty_bytes_max,
            checkpoint_lag_bytes_max,
            write_through,
            read_ahead_windows_max,
            scrub_bytes_per_sec,
            tail_cache_bytes,
            cq_entries_per_file,
            file_reserved_hours,
            delete_when_hour,
            delete_when_hours,
            disk_max_used_ratio,
            disk_force_clean_ratio,
            disk_refuse_ratio,
            clean_file_forcibly,
            delete_files_per_pass_max,
            allow_truncate_corrupt,
        } = self;
        fn set<T>(field: &mut T, value: Option<T>) {
            if let Some(value) = value {
                *field = value;
            }
        }
        set(&mut store.segment_bytes, segment_bytes);
        set(&mut store.preallocate, preallocate.map(|p| match p {
            PreallocateKind::Zero => crate::store::config::Preallocate::Zero,
            PreallocateKind::Fallocate => crate::store::config::Preallocate::Fallocate,
        }));
        set(&mut store.flush_mode, flush.map(FlushMode::from));
        set(&mut store.flush_interval_ms, flush_interval_ms);
        set(&mut store.flush_min_bytes, flush_min_bytes);
        set(&mut store.dirty_bytes_max, dirty_bytes_max);
        set(&mut store.checkpoint_lag_bytes_max, checkpoint_lag_bytes_max);
        set(&mut store.write_through, write_through.map(Some));
        set(&mut store.read_ahead_windows_max, read_ahead_windows_max);
        set(&mut store.scrub_bytes_per_sec, scrub_bytes_per_sec);
        set(&mut store.tail_cache_bytes, tail_cache_bytes);
        set(&mut store.cq_entries_per_file, cq_entries_per_file);
        set(&mut store.file_reserved_hours, file_reserved_hours);
        set(&mut store.delete_when_hours, delete_when_hour.map(|h| vec![h]));
        set(&mut store.delete_when_hours, delete_when_hours);
        set(&mut store.disk_max_used_ratio, disk_max_used_ratio);
        set(&mut store.disk_force_clean_ratio, disk_force_clean_ratio);
        set(&mut store.disk_refuse_ratio, disk_refuse_ratio);
        set(&mut store.clean_file_forcibly, clean_file_forcibly);
        set(&mut store.delete_files_per_pass_max, delete_files_per_pass_max);
        set(&mut store.allow_truncate_corrupt, allow_truncate_corrupt);
    }
}

pub(super) fn de_store<'de, D: Deserializer<'de>>(deserializer: D) -> Result<StoreConfig, D::Error> {
    let mut store = StoreConfig::default();
    StoreSection::deserialize(deserializer)?.apply(&mut store);
    Ok(store)
}

pub(super) fn de_path<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
    Ok(expand_home(&String::deserialize(deserializer)?))
}

pub(super) fn de_namesrv_addrs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    struct AddrsVisitor;
    impl<'de> Visitor<'de> for AddrsVisitor {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(r#"an array of "host:port" strings or one "host:port;host:port" string"#)
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<Vec<String>, E> {
            Ok(split_addrs(value))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut addrs = Vec::new();
            while let Some(addr) = seq.next_element::<String>()? {
                addrs.extend(split_addrs(&addr));
            }
            Ok(addrs)
        }
    }
    deserializer.deserialize_any(AddrsVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{expect, with};
    use crate::config::{BrokerRole, MetricsExporter, RECORD_OVERHEAD_BYTES_MAX};
    use std::path::Path;

    /// Parses `text` as a TOML file; expects that config, or an error whose text
    /// contains each fragment.
    fn check(text: &str, expected: Result<BrokerConfig, &[&str]>) {
        expect(&format!("toml {text:?}"), BrokerConfig::from_toml_str(text), expected);
    }

    #[test]
    fn toml_every_key() {
        let text = r#"
            listen_port = 20911
            broker_ip = "10.0.0.7"
            namesrv_addrs = ["n1:9876", "n2:9876"]
            cluster_name = "C"
            broker_name = "broker-b"
            broker_id = 2
            role = "slave"
            ha_master_address = "10.0.0.1:10912"
            ha_auth_secret = "replication-secret-0123"
            store_root = "/data/store"
            shard_count = 4
            cpu_list = [2, 3, 4, 5]
            auto_create_topic = true
            default_topic_queue_nums = 16
            max_message_bytes = 1048576
            register_interval_ms = 1000
            idle_connection_timeout_ms = 5000
            pull_suspend_max_ms = 15000
            connections_per_shard_max = 100
            forward_batch_max = 64
            metrics_exporter_type = "prom"
            metrics_prom_exporter_host = "127.0.0.1"
            metrics_prom_exporter_port = 0
            trace_topic_enable = true
            msg_trace_topic_name = "MyTraces"

            [store]
            segment_bytes = 67108864
            flush = "sync"
            flush_interval_ms = 20
            flush_min_bytes = 65536
            dirty_bytes_max = 8388608
            tail_cache_bytes = 1048576
            cq_entries_per_file = 2048
            file_reserved_hours = 48
            delete_when_hour = 3
            disk_max_used_ratio = 0.5
            disk_force_clean_ratio = 0.6
            disk_refuse_ratio = 0.7
            clean_file_forcibly = false
            delete_files_per_pass_max = 3
            allow_truncate_corrupt = true
        "#;
        let expected = with(|c| {
            c.listen_port = 20911;
            c.broker_ip = Some("10.0.0.7".into());
            c.namesrv_addrs = vec!["n1:9876".into(), "n2:9876".into()];
            c.cluster_name = "C".into();
            c.broker_name = "broker-b".into();
            c.broker_id = 2;
            c.role = BrokerRole::Slave;
            c.ha_master_address = Some("10.0.0.1:10912".into());
            c.ha_auth_secret = Some("replication-secret-0123".into());
            c.store_root = "/data/store".into();
            c.shard_count = 4;
            c.cpu_list = Some(vec![2, 3, 4, 5]);
            c.auto_create_topic = true;
            c.default_topic_queue_nums = 16;
            c.max_message_bytes = 1 << 20;
            c.register_interval_ms = 1000;
            c.idle_connection_timeout_ms = 5000;
            c.pull_suspend_max_ms = 15000;
            c.connections_per_shard_max = 100;
            c.forward_batch_max = 64;
            c.metrics_exporter_type = MetricsExporter::Prom;
            c.metrics_prom_exporter_host = "127.0.0.1".into();
            c.metrics_prom_exporter_port = 0;
            c.trace_topic_enable = true;
            c.msg_trace_topic_name = "MyTraces".into();
            let s = &mut c.store;
            s.segment_bytes = 64 << 20;
            s.flush_mode = FlushMode::Sync;
            s.flush_interval_ms = 20;
            s.flush_min_bytes = 64 << 10;
            s.dirty_bytes_max = 8 << 20;
            s.tail_cache_bytes = 1 << 20;
            s.cq_entries_per_file = 2048;
            s.file_reserved_hours = 48;
            s.delete_when_hours = vec![3];
            s.disk_max_used_ratio = 0.5;
            s.disk_force_clean_ratio = 0.6;
            s.disk_refuse_ratio = 0.7;
            s.clean_file_forcibly = false;
            s.delete_files_per_pass_max = 3;
            s.allow_truncate_corrupt = true;
        });
        // The record bound is the flush window's (8 MiB, under the segment's 64 MiB),
        // whatever max_message_bytes says: that only has to fit it.
        assert_eq!(expected.store.record_bytes_limit(), 8 << 20);
        assert!(expected.max_message_bytes + RECORD_OVERHEAD_BYTES_MAX <= expected.store.record_bytes_limit());
        expected.validate().unwrap();
        check(text, Ok(expected));
    }

    #[test]
    fn toml_cases() {
        check("", Ok(BrokerConfig::default()));
        check(r#"namesrv_addrs = "a:1;b:2""#, Ok(with(|c| c.namesrv_addrs = vec!["a:1".into(), "b:2".into()])));
        check(
            r#"namesrv_addrs = " a:1 ; ;b:2; ""#,
            Ok(with(|c| c.namesrv_addrs = vec!["a:1".into(), "b:2".into()])),
        );
        check(r#"namesrv_addrs = []"#, Ok(BrokerConfig::default()));
        check(r#"role = "sync_master""#, Ok(with(|c| c.role = BrokerRole::SyncMaster)));
        check(r#"role = "async_master""#, Ok(BrokerConfig::default()));
        check("[store]\nflush = \"async\"", Ok(BrokerConfig::default()));
        check("[store]\n", Ok(BrokerConfig::default()));
        check(r#"store_root = "./target/x""#, Ok(with(|c| c.store_root = "./target/x".into())));
        if let Some(home) = std::env::var_os("HOME") {
            let expected = with(|c| c.store_root = PathBuf::from(&home).join("s"));
            check(r#"store_root = "~/s""#, Ok(expected.clone()));
            check(r#"store_root = "$HOME/s""#, Ok(expected));
        }
    }

    #[test]
    fn toml_controller_keys() {
        check(
            "enable_controller_mode = true\ncontroller_addrs = \"c1:9878;c2:9878\"\nmaster_lease_enable = false\nall_ack_in_sync_state_set = true\nbroker_election_priority = 3",
            Ok(with(|c| {
                c.controller_mode = true;
                c.controller_addrs = vec!["c1:9878".into(), "c2:9878".into()];
                c.master_lease_enable = false;
                c.all_ack_in_sync_state_set = true;
                c.broker_election_priority = 3;
            })),
        );
        check("controller_mode = true\ncontroller_addrs = [\"c1:9878\"]", Ok(with(|c| (c.controller_mode, c.controller_addrs) = (true, vec!["c1:9878".into()]))));
        check("controller_heartbeat_timeout_ms = 3000\nbroker_heartbeat_interval_ms = 500", Ok(with(|c| {
            c.controller_heartbeat_timeout_ms = 3_000;
            c.broker_heartbeat_interval_ms = 500;
        })));
        check("store_path_broker_identity = \"/x/id\"", Ok(with(|c| c.store_path_broker_identity = Some("/x/id".into()))));
        check("controller_addrs = 5", Err(&["controller_addrs"]));
        check("master_lease = true", Err(&["master_lease"]));
    }

    #[test]
    fn toml_errors_name_the_key() {
        check("listen_prot = 1", Err(&["listen_prot"]));
        check("[store]\nsegment_size = 1", Err(&["segment_size"]));
        check("[stor]\nsegment_bytes = 1", Err(&["stor"]));
        check("listen_port = 70000", Err(&["listen_port"]));
        check("listen_port = -1", Err(&["listen_port"]));
        check(r#"listen_port = "10911""#, Err(&["listen_port"]));
        check(r#"role = "master""#, Err(&["role", "master"]));
        check("[store]\nflush = \"SYNC_FLUSH\"", Err(&["flush", "SYNC_FLUSH"]));
        check("namesrv_addrs = 5", Err(&["namesrv_addrs", "host:port"]));
        check("namesrv_addrs = [5]", Err(&["namesrv_addrs"]));
        check("cpu_list = [-1]", Err(&["cpu_list"]));
        check("auto_create_topic = 1", Err(&["auto_create_topic"]));
        check("[store]\ndisk_max_used_ratio = \"high\"", Err(&["disk_max_used_ratio"]));
        // Renamed (issue 24): the old name is refused, not silently given the new meaning.
        check("[store]\ndisk_warn_ratio = 0.75", Err(&["disk_warn_ratio"]));
        check("[store]\nclean_file_forcibly = 0", Err(&["clean_file_forcibly"]));
        check("[store]\ndelete_files_per_pass_max = -1", Err(&["delete_files_per_pass_max"]));
        check("[store]\nrecord_bytes_max = 10", Err(&["record_bytes_max"]));
        check("listen_port = ", Err(&["line 1"]));
    }

    #[test]
    fn profiles_load_and_validate() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tuning/profiles");
        let profiles = [
            ("throughput.toml", FlushMode::Async),
            ("durable.toml", FlushMode::Sync),
            ("low-latency.toml", FlushMode::Sync),
            ("dev.toml", FlushMode::Async),
            ("master-sync.toml", FlushMode::Async),
            ("master-async.toml", FlushMode::Async),
            ("slave.toml", FlushMode::Async),
        ];
        for (name, flush_mode) in profiles {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let config = BrokerConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            config.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(config.store.flush_mode, flush_mode, "{name}");
            assert_eq!(BrokerConfig::load(&path).unwrap(), config, "{name}");
            // A shipped profile starts without warnings: the host-named broker topic is
            // off in shard route mode (`launch.rs` warns about it otherwise).
            assert!(!(config.route_mode == super::super::RouteMode::Shard && config.broker_topic_enable), "{name}: brokerTopicEnable in shard route mode warns at every start");
        }
        let throughput = BrokerConfig::load(&dir.join("throughput.toml")).unwrap();
        assert!(throughput.store.segment_bytes > StoreConfig::default().segment_bytes);
        assert_eq!(throughput.store.flush_interval_ms, 500);
        let low_latency = BrokerConfig::load(&dir.join("low-latency.toml")).unwrap();
        assert!(low_latency.store.dirty_bytes_max < StoreConfig::default().dirty_bytes_max);
        let roles: Vec<BrokerRole> = ["master-sync.toml", "master-async.toml", "slave.toml"].iter().map(|n| BrokerConfig::load(&dir.join(n)).unwrap().role).collect();
        assert_eq!(roles, [BrokerRole::SyncMaster, BrokerRole::AsyncMaster, BrokerRole::Slave]);
        let dev = BrokerConfig::load(&dir.join("dev.toml")).unwrap();
        assert_eq!((dev.shard_count, dev.store_root.as_path()), (1, Path::new("./target/dev-store")));
        assert!(dev.store.segment_bytes < StoreConfig::default().segment_bytes);
    }
}
