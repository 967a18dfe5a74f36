//! Route and cluster JSON bodies: `TopicRouteData` (GET_ROUTEINFO_BY_TOPIC), `ClusterInfo`
//! (GET_BROKER_CLUSTER_INFO), and the REGISTER_BROKER body with its topic config table.
//!
//! Broker addresses are keyed by broker id (i64). fastjson writes such maps with bare
//! integer keys (`{0:"ip:port"}`); clients older than version 401 that do not ask for
//! standard JSON get exactly that (`encode_legacy`), everyone else standard JSON
//! (`encode_standard`). Decoders accept both.
//!
//! `BrokerData` carries RocketMQ 5's `enableActingMaster` (always written, as Java's
//! NameServer does: at least one client refuses a route without it) and `zoneName`
//! (written only when set).
//!
//! Invariants: field order follows fastjson (sorted keys) so our bytes match a Java
//! broker's; `decode(encode_*(x)) == x` for both encoders.

use super::json::de::{bool_lenient, i32_lenient, i64_lenient, null_default, opt_string_lenient, string_lenient};
use super::json::{from_json_lenient, java_enum, to_json, to_json_legacy, BodyError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// First client version answered with standard JSON (RocketMQ 4.9.4).
pub const ROUTE_STANDARD_JSON_VERSION_MIN: i32 = 401;
/// Broker id of a master.
pub const MASTER_ID: i64 = 0;

/// `PermName` bits.
pub const PERM_PRIORITY: i32 = 1 << 3;
pub const PERM_READ: i32 = 1 << 2;
pub const PERM_WRITE: i32 = 1 << 1;
pub const PERM_INHERIT: i32 = 1;

/// Java's `TopicConfig` defaults.
pub const TOPIC_QUEUE_NUMS_DEFAULT: i32 = 16;
pub const TOPIC_PERM_DEFAULT: i32 = PERM_READ | PERM_WRITE;

/// Whether a route answer for this request should be standard JSON.
pub fn wants_standard_json(version: i32, accept_standard_json_only: Option<bool>) -> bool {
    version >= ROUTE_STANDARD_JSON_VERSION_MIN || accept_standard_json_only == Some(true)
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    #[serde(deserialize_with = "string_lenient")]
    pub broker_name: String,
    #[serde(default, deserialize_with = "i32_lenient")]
    pub perm: i32,
    #[serde(default, deserialize_with = "i32_lenient")]
    pub read_queue_nums: i32,
    /// RocketMQ 4.x spelled it `topicSynFlag`.
    #[serde(default, alias = "topicSynFlag", deserialize_with = "i32_lenient")]
    pub topic_sys_flag: i32,
    #[serde(default, deserialize_with = "i32_lenient")]
    pub write_queue_nums: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// Broker id -> "ip:port"; id 0 is the master.
    #[serde(default, deserialize_with = "null_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(deserialize_with = "string_lenient")]
    pub broker_name: String,
    #[serde(default, deserialize_with = "string_lenient")]
    pub cluster: String,
    /// RocketMQ 5's "acting master" HA mode. Java always writes it (`false` for brokers
    /// that do not ask for it), and some clients require the key in a route answer.
    #[serde(default, deserialize_with = "bool_lenient")]
    pub enable_acting_master: bool,
    /// RocketMQ 5's zone of the broker, when it declares one (absent otherwise, as
    /// fastjson omits nulls).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_string_lenient")]
    pub zone_name: Option<String>,
}

impl BrokerData {
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).map(String::as_str)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    #[serde(default, deserialize_with = "null_default")]
    pub broker_datas: Vec<BrokerData>,
    #[serde(default, deserialize_with = "null_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_string_lenient")]
    pub order_topic_conf: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub queue_datas: Vec<QueueData>,
}

impl TopicRouteData {
    pub fn encode_standard(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn encode_legacy(&self) -> Vec<u8> {
        to_json_legacy(self)
    }

    /// The form a request with this version and `acceptStandardJsonOnly` expects.
    pub fn encode_for(&self, version: i32, accept_standard_json_only: Option<bool>) -> Vec<u8> {
        if wants_standard_json(version, accept_standard_json_only) {
            self.encode_standard()
        } else {
            self.encode_legacy()
        }
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Broker name -> its addresses.
    #[serde(default, deserialize_with = "null_default")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name -> broker names.
    #[serde(default, deserialize_with = "null_default")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

impl ClusterInfo {
    pub fn encode_standard(&self) -> Vec<u8> {
        to_json(self)
    }

    /// What a Java NameServer sends (it never switches this body to standard JSON).
    pub fn encode_legacy(&self) -> Vec<u8> {
        to_json_legacy(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

java_enum! {
    TopicFilterType default SingleTag {
        SingleTag = 0, "SINGLE_TAG";
        MultiTag = 1, "MULTI_TAG";
    }
}

fn queue_nums_default() -> i32 {
    TOPIC_QUEUE_NUMS_DEFAULT
}

fn perm_default() -> i32 {
    TOPIC_PERM_DEFAULT
}

/// Java's `TopicConfig`. `attributes` is always written (`{}` when none), as fastjson
/// writes Java's non-null map: a strict decoder (rocketmq-client-rust's) requires it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default, deserialize_with = "null_default")]
    pub attributes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "bool_lenient")]
    pub order: bool,
    #[serde(default = "perm_default", deserialize_with = "i32_lenient")]
    pub perm: i32,
    #[serde(default = "queue_nums_default", deserialize_with = "i32_lenient")]
    pub read_queue_nums: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub topic_filter_type: TopicFilterType,
    #[serde(default, deserialize_with = "string_lenient")]
    pub topic_name: String,
    #[serde(default, deserialize_with = "i32_lenient")]
    pub topic_sys_flag: i32,
    #[serde(default = "queue_nums_default", deserialize_with = "i32_lenient")]
    pub write_queue_nums: i32,
}

impl TopicConfig {
    /// Java's `new TopicConfig(name)`.
    pub fn new(topic_name: &str) -> Self {
        Self {
            attributes: BTreeMap::new(),
            order: false,
            perm: TOPIC_PERM_DEFAULT,
            read_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: topic_name.to_string(),
            topic_sys_flag: 0,
            write_queue_nums: TOPIC_QUEUE_NUMS_DEFAULT,
        }
    }
}

/// Java's `DataVersion` (`{"counter":..,"stateVersion":..,"timestamp":..}`, fastjson's
/// order). `stateVersion` is the store's state-machine version in Java (controller
/// mode); RingMQ has none and writes 0, as a Java broker outside controller mode does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default, deserialize_with = "i64_lenient")]
    pub counter: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub state_version: i64,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub timestamp: i64,
}

/// GET_ALL_TOPIC_CONFIG's body, and the heart of REGISTER_BROKER's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    #[serde(default, deserialize_with = "null_default")]
    pub data_version: DataVersion,
    #[serde(default, deserialize_with = "null_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

impl TopicConfigSerializeWrapper {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// GET_ALL_TOPIC_CONFIG's body: Java's `TopicConfigAndMappingSerializeWrapper` (the
/// topic table plus static-topic queue mappings, in fastjson's sorted key order).
/// RingMQ has no static topics: both mapping maps are `{}` and `mappingDataVersion`
/// never changes (a Java broker without static topics answers the same).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigAndMappingSerializeWrapper {
    #[serde(default, deserialize_with = "null_default")]
    pub data_version: DataVersion,
    #[serde(default, deserialize_with = "null_default")]
    pub mapping_data_version: DataVersion,
    #[serde(default, deserialize_with = "null_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Topic → Java's `TopicQueueMappingDetail`, kept as JSON (never interpreted here).
    #[serde(default, deserialize_with = "null_default")]
    pub topic_queue_mapping_detail_map: BTreeMap<String, serde_json::Value>,
    /// Topic → Java's `TopicQueueMappingInfo`, kept as JSON (never interpreted here).
    #[serde(default, deserialize_with = "null_default")]
    pub topic_queue_mapping_info_map: BTreeMap<String, serde_json::Value>,
}

impl TopicConfigAndMappingSerializeWrapper {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// GET_ALL_TOPIC_CONFIG's response header field: how many topics the broker holds
/// (Java's `GetAllTopicConfigResponseHeader.totalTopicNum`; clients that page through
/// the table stop once they have this many).
pub const TOTAL_TOPIC_NUM_EXT: &str = "totalTopicNum";

/// REGISTER_BROKER's body when the header says `compressed=false`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default, deserialize_with = "null_default")]
    pub filter_server_list: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

impl RegisterBrokerBody {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn route() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: [(0, "127.0.0.1:10911".to_string()), (1, "127.0.0.1:10921".to_string())].into(),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
                ..Default::default()
            }],
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                perm: 6,
                read_queue_nums: 4,
                topic_sys_flag: 0,
                write_queue_nums: 4,
            }],
        }
    }

    const STANDARD: &str = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
    const LEGACY: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;

    fn check(input: &str, expected: Option<TopicRouteData>) {
        assert_eq!(TopicRouteData::decode(input.as_bytes()).ok(), expected, "decoding {input}");
    }

    #[test]
    fn route_encodings() {
        assert_eq!(String::from_utf8(route().encode_standard()).unwrap(), STANDARD);
        assert_eq!(String::from_utf8(route().encode_legacy()).unwrap(), LEGACY);
        assert_eq!(route().encode_for(63, None), LEGACY.as_bytes());
        assert_eq!(route().encode_for(63, Some(true)), STANDARD.as_bytes());
        assert_eq!(route().encode_for(401, None), STANDARD.as_bytes());
        assert_eq!(route().encode_for(400, Some(false)), LEGACY.as_bytes());
    }

    #[test]
    fn route_decode_cases() {
        check(STANDARD, Some(route()));
        check(LEGACY, Some(route()));
        // RocketMQ 4.x's `topicSynFlag`, an order conf, Go-style nulls, spaces in keys.
        check(
            r#"{"orderTopicConf":"broker-a:4","brokerDatas":[{"brokerAddrs":{ 0 : "127.0.0.1:10911" , 1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":null,"queueDatas":[{"brokerName":"broker-a","perm":"6","readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}"#,
            Some(TopicRouteData { order_topic_conf: Some("broker-a:4".into()), ..route() }),
        );
        // RocketMQ 5 with an acting master and a zone; a boolean sent as a string.
        let mut v5 = route();
        v5.broker_datas[0].enable_acting_master = true;
        v5.broker_datas[0].zone_name = Some("zone-1".into());
        let v5_json = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":true,"zoneName":"zone-1"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;
        assert_eq!(String::from_utf8(v5.encode_standard()).unwrap(), v5_json);
        check(v5_json, Some(v5.clone()));
        check(&v5_json.replace(":true", ":\"true\""), Some(v5));
        check(r#"{}"#, Some(TopicRouteData::default()));
        check(r#"{"brokerDatas":[{"brokerAddrs":{"x":"a"},"brokerName":"b"}]}"#, None);
        check(r#"{"queueDatas":[{"perm":6}]}"#, None);
        check(r#"{"brokerDatas":{0:1}}"#, None);
        check("", None);
    }

    /// GET_ALL_TOPIC_CONFIG's body, byte for byte what a Java broker without static topics
    /// writes (fastjson: sorted keys, `attributes` and `stateVersion` present), and a
    /// Java body with a queue mapping decodes.
    #[test]
    fn all_topic_config_is_javas_mapping_wrapper() {
        let mut w = TopicConfigAndMappingSerializeWrapper {
            data_version: DataVersion { counter: 2, state_version: 0, timestamp: 7 },
            mapping_data_version: DataVersion { counter: 0, state_version: 0, timestamp: 5 },
            ..Default::default()
        };
        w.topic_config_table.insert("T".into(), TopicConfig { read_queue_nums: 4, write_queue_nums: 2, ..TopicConfig::new("T") });
        let text = String::from_utf8(w.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":7},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":5},"topicConfigTable":{"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":2}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}"#
        );
        assert_eq!(TopicConfigAndMappingSerializeWrapper::decode(text.as_bytes()).unwrap(), w);
        let java = r#"{"dataVersion":{"counter":1,"stateVersion":3,"timestamp":9},"topicConfigTable":{"S":{"attributes":{"+message.type":"NORMAL"},"topicName":"S"}},"topicQueueMappingInfoMap":{"S":{"bname":"b","epoch":1,"totalQueues":8}}}"#;
        let got = TopicConfigAndMappingSerializeWrapper::decode(java.as_bytes()).unwrap();
        assert_eq!(got.data_version, DataVersion { counter: 1, state_version: 3, timestamp: 9 });
        assert_eq!(got.topic_config_table["S"].attributes, BTreeMap::from([("+message.type".to_string(), "NORMAL".to_string())]));
        assert_eq!(got.topic_queue_mapping_info_map["S"]["totalQueues"], 8);
    }

    #[test]
    fn cluster_info_and_register_body() {
        let info = ClusterInfo {
            broker_addr_table: [("broker-a".to_string(), route().broker_datas[0].clone())].into(),
            cluster_addr_table: [("DefaultCluster".to_string(), ["broker-a".to_string()].into())].into(),
        };
        let legacy = String::from_utf8(info.encode_legacy()).unwrap();
        assert_eq!(
            legacy,
            r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
        );
        assert_eq!(ClusterInfo::decode(legacy.as_bytes()).unwrap(), info);
        assert_eq!(ClusterInfo::decode(&info.encode_standard()).unwrap(), info);

        // A Java broker's REGISTER_BROKER body (fastjson, sorted keys, with fields we ignore).
        let java = r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},"SELF_TEST":{"topicName":"SELF_TEST","readQueueNums":1,"writeQueueNums":1,"topicFilterType":1}}}}"#;
        let body = RegisterBrokerBody::decode(java.as_bytes()).unwrap();
        let wrapper = &body.topic_config_serialize_wrapper;
        assert_eq!(wrapper.data_version, DataVersion { counter: 3, state_version: 0, timestamp: 1_700_000_000_000 });
        assert_eq!(
            wrapper.topic_config_table["TopicTest"],
            TopicConfig { read_queue_nums: 4, write_queue_nums: 4, ..TopicConfig::new("TopicTest") }
        );
        assert_eq!(
            wrapper.topic_config_table["SELF_TEST"],
            TopicConfig {
                read_queue_nums: 1,
                write_queue_nums: 1,
                topic_filter_type: TopicFilterType::MultiTag,
                ..TopicConfig::new("SELF_TEST")
            }
        );
        assert_eq!(RegisterBrokerBody::decode(&body.encode()).unwrap(), body);
        assert_eq!(TopicConfigSerializeWrapper::decode(&wrapper.encode()).unwrap(), *wrapper);
        assert!(RegisterBrokerBody::decode(b"{\"topicConfigSerializeWrapper\":\"x\"}").is_err());
    }

    fn arb_route() -> impl Strategy<Value = TopicRouteData> {
        let broker = (
            proptest::collection::btree_map(any::<i64>(), ".{0,12}", 0..3),
            ".{0,8}",
            ".{0,8}",
            any::<bool>(),
            proptest::option::of(".{0,8}"),
        )
            .prop_map(|(broker_addrs, broker_name, cluster, enable_acting_master, zone_name)| BrokerData {
                broker_addrs,
                broker_name,
                cluster,
                enable_acting_master,
                zone_name,
            });
        let queue = (".{0,8}", any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()).prop_map(|(b, p, r, s, w)| {
            QueueData { broker_name: b, perm: p, read_queue_nums: r, topic_sys_flag: s, write_queue_nums: w }
        });
        (
            proptest::collection::vec(broker, 0..3),
            proptest::collection::btree_map(".{0,8}", proptest::collection::vec(".{0,8}", 0..2), 0..2),
            proptest::option::of(".{0,8}"),
            proptest::collection::vec(queue, 0..3),
        )
            .prop_map(|(broker_datas, filter_server_table, order_topic_conf, queue_datas)| TopicRouteData {
                broker_datas,
                filter_server_table,
                order_topic_conf,
                queue_datas,
            })
    }

    fn arb_wrapper() -> impl Strategy<Value = TopicConfigSerializeWrapper> {
        let config = (any::<bool>(), any::<i32>(), any::<i32>(), any::<bool>(), ".{0,8}", any::<i32>(), any::<i32>())
            .prop_map(|(order, perm, r, multi, name, sys, w)| TopicConfig {
                attributes: BTreeMap::new(),
                order,
                perm,
                read_queue_nums: r,
                topic_filter_type: if multi { TopicFilterType::MultiTag } else { TopicFilterType::SingleTag },
                topic_name: name,
                topic_sys_flag: sys,
                write_queue_nums: w,
            });
        (any::<i64>(), any::<i64>(), proptest::collection::btree_map(".{0,8}", config, 0..3)).prop_map(
            |(c, t, table)| TopicConfigSerializeWrapper {
                data_version: DataVersion { counter: c, state_version: 0, timestamp: t },
                topic_config_table: table,
            },
        )
    }

    proptest! {
        #[test]
        fn route_roundtrip(r in arb_route()) {
            prop_assert_eq!(TopicRouteData::decode(&r.encode_standard()).unwrap(), r.clone());
            prop_assert_eq!(TopicRouteData::decode(&r.encode_legacy()).unwrap(), r);
        }

        #[test]
        fn register_body_roundtrip(w in arb_wrapper(), filters in proptest::collection::vec(".{0,8}", 0..2)) {
            let body = RegisterBrokerBody { filter_server_list: filters, topic_config_serialize_wrapper: w };
            prop_assert_eq!(RegisterBrokerBody::decode(&body.encode()).unwrap(), body);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = TopicRouteData::decode(&bytes);
            let _ = ClusterInfo::decode(&bytes);
            let _ = RegisterBrokerBody::decode(&bytes);
        }
    }
}
