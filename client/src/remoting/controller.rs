//! Controller-mode headers and bodies (RocketMQ 5, docs/design/controller.md §2.3–2.4):
//! Apache's `remoting/protocol/header/controller/**` headers with the Java field names as
//! ext keys, and the JSON bodies `SyncStateSet`, `ElectMasterResponseBody`,
//! `BrokerMemberGroup`, `BrokerReplicasInfo`, `EpochEntryCache`.
//!
//! Invariants: decoding follows `headers.rs` (lenient: numbers trimmed, booleans as
//! `Boolean.parseBoolean` plus "1", unknown keys ignored) and `bodies.rs` (fastjson's
//! unquoted integer keys and `null` collections accepted); `from_ext(&h.to_ext()) == h`
//! and `decode(encode(b)) == b` (tested). Broker ids are Java `Long`s (`i64`), epochs
//! Java `int`s (`i32`).

use super::bodies::JsonBody;
use super::command::ExtFields;
use super::headers::{ext_header, CommandHeader, ExtField, ExtValue, HeaderError};
use super::json::de::null_default;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

ext_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) request; body `SyncStateSet`.
    AlterSyncStateSetRequestHeader {
        broker_name: String = "brokerName";
        master_broker_id: i64 = "masterBrokerId";
        master_epoch: i32 = "masterEpoch";
        invoke_time: Option<i64> = "invokeTime";
    }
}

ext_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET answer.
    AlterSyncStateSetResponseHeader {
        new_sync_state_set_epoch: i32 = "newSyncStateSetEpoch" | 0;
    }
}

ext_header! {
    /// CONTROLLER_ELECT_MASTER (1002) request; `brokerId` -1 = triggered by the controller.
    ElectMasterRequestHeader {
        cluster_name: String = "clusterName" | String::new();
        broker_name: String = "brokerName" | String::new();
        broker_id: i64 = "brokerId" | -1;
        designate_elect: bool = "designateElect" | false;
        invoke_time: Option<i64> = "invokeTime";
    }
}

ext_header! {
    /// CONTROLLER_ELECT_MASTER answer; body `ElectMasterResponseBody`.
    ElectMasterResponseHeader {
        master_broker_id: Option<i64> = "masterBrokerId";
        master_address: Option<String> = "masterAddress";
        master_epoch: Option<i32> = "masterEpoch";
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch";
    }
}

ext_header! {
    /// CONTROLLER_REGISTER_BROKER (1003) request.
    RegisterBrokerToControllerRequestHeader {
        cluster_name: String = "clusterName";
        broker_name: String = "brokerName";
        broker_id: i64 = "brokerId";
        broker_address: String = "brokerAddress";
        invoke_time: Option<i64> = "invokeTime";
    }
}

ext_header! {
    /// CONTROLLER_REGISTER_BROKER answer (master fields only while the master is alive);
    /// body `SyncStateSet`.
    RegisterBrokerToControllerResponseHeader {
        cluster_name: Option<String> = "clusterName";
        broker_name: Option<String> = "brokerName";
        master_broker_id: Option<i64> = "masterBrokerId";
        master_address: Option<String> = "masterAddress";
        master_epoch: Option<i32> = "masterEpoch";
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch";
    }
}

ext_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004) request.
    GetReplicaInfoRequestHeader {
        broker_name: String = "brokerName";
    }
}

ext_header! {
    /// CONTROLLER_GET_REPLICA_INFO answer; body `SyncStateSet`.
    GetReplicaInfoResponseHeader {
        master_broker_id: Option<i64> = "masterBrokerId";
        master_address: Option<String> = "masterAddress";
        master_epoch: Option<i32> = "masterEpoch";
    }
}

ext_header! {
    /// CONTROLLER_GET_METADATA_INFO (1005) answer (`peers` = "n0:addr;n1:addr;").
    GetMetaDataResponseHeader {
        group: Option<String> = "group";
        controller_leader_id: Option<String> = "controllerLeaderId";
        controller_leader_address: Option<String> = "controllerLeaderAddress";
        is_leader: bool = "isLeader" | false;
        peers: Option<String> = "peers";
    }
}

ext_header! {
    /// CLEAN_BROKER_DATA (1011) request; `brokerControllerIdsToClean` is "1;2".
    CleanControllerBrokerDataRequestHeader {
        cluster_name: Option<String> = "clusterName";
        broker_name: String = "brokerName";
        broker_controller_ids_to_clean: Option<String> = "brokerControllerIdsToClean";
        is_clean_living_broker: bool = "isCleanLivingBroker" | false;
        invoke_time: Option<i64> = "invokeTime";
    }
}

ext_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012) request.
    GetNextBrokerIdRequestHeader {
        cluster_name: String = "clusterName";
        broker_name: String = "brokerName";
    }
}

ext_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID answer.
    GetNextBrokerIdResponseHeader {
        cluster_name: Option<String> = "clusterName";
        broker_name: Option<String> = "brokerName";
        next_broker_id: Option<i64> = "nextBrokerId";
    }
}

ext_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013) request; `registerCheckCode` is "addr;millis".
    ApplyBrokerIdRequestHeader {
        cluster_name: String = "clusterName";
        broker_name: String = "brokerName";
        applied_broker_id: i64 = "appliedBrokerId";
        register_check_code: String = "registerCheckCode";
    }
}

ext_header! {
    /// CONTROLLER_APPLY_BROKER_ID answer.
    ApplyBrokerIdResponseHeader {
        cluster_name: Option<String> = "clusterName";
        broker_name: Option<String> = "brokerName";
    }
}

ext_header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008, controller → broker, oneway); body `SyncStateSet`.
    NotifyBrokerRoleChangedRequestHeader {
        master_address: Option<String> = "masterAddress";
        master_epoch: Option<i32> = "masterEpoch";
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch";
        master_broker_id: Option<i64> = "masterBrokerId";
    }
}

ext_header! {
    /// BROKER_HEARTBEAT (904), `header/namesrv/BrokerHeartbeatRequestHeader`.
    BrokerHeartbeatRequestHeader {
        cluster_name: String = "clusterName";
        broker_addr: String = "brokerAddr";
        broker_name: String = "brokerName";
        broker_id: Option<i64> = "brokerId";
        epoch: Option<i32> = "epoch";
        max_offset: Option<i64> = "maxOffset";
        confirm_offset: Option<i64> = "confirmOffset";
        heartbeat_timeout_mills: Option<i64> = "heartbeatTimeoutMills";
        election_priority: Option<i32> = "electionPriority";
    }
}

ext_header! {
    /// EXCHANGE_BROKER_HA_INFO (906), request and answer.
    ExchangeHaInfoHeader {
        master_ha_address: Option<String> = "masterHaAddress";
        master_flush_offset: Option<i64> = "masterFlushOffset";
        master_address: Option<String> = "masterAddress";
    }
}

/// `SyncStateSet` body: the in-sync replica ids and the set's epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateSet {
    #[serde(default, deserialize_with = "null_default")]
    pub sync_state_set: Vec<i64>,
    #[serde(default)]
    pub sync_state_set_epoch: i32,
}
impl JsonBody for SyncStateSet {}

/// `BrokerMemberGroup`: a broker set's replicas by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerMemberGroup {
    #[serde(default, deserialize_with = "null_default")]
    pub cluster: String,
    #[serde(default, deserialize_with = "null_default")]
    pub broker_name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub broker_addrs: BTreeMap<i64, String>,
}
impl JsonBody for BrokerMemberGroup {}

/// CONTROLLER_ELECT_MASTER answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElectMasterResponseBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_member_group: Option<BrokerMemberGroup>,
    #[serde(default, deserialize_with = "null_default")]
    pub sync_state_set: Vec<i64>,
}
impl JsonBody for ElectMasterResponseBody {}

/// One replica in `BrokerReplicasInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaIdentity {
    #[serde(default, deserialize_with = "null_default")]
    pub broker_name: String,
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub broker_address: String,
    #[serde(default)]
    pub alive: bool,
}

/// One broker set in `BrokerReplicasInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicasInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_broker_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_address: Option<String>,
    #[serde(default)]
    pub master_epoch: i32,
    #[serde(default)]
    pub sync_state_set_epoch: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    #[serde(default, deserialize_with = "null_default")]
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

/// CONTROLLER_GET_SYNC_STATE_DATA (1006) answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReplicasInfo {
    #[serde(default, deserialize_with = "null_default")]
    pub replicas_info_table: BTreeMap<String, ReplicasInfo>,
}
impl JsonBody for BrokerReplicasInfo {}

/// One epoch of a broker's log in `EpochEntryCache` (Apache `remoting/protocol/EpochEntry`):
/// the epoch's first physical offset and, for all but the last, its end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochEntry {
    #[serde(default)]
    pub epoch: i32,
    #[serde(default)]
    pub start_offset: i64,
    #[serde(default)]
    pub end_offset: i64,
}

/// GET_BROKER_EPOCH_CACHE (1007) answer body (Apache `body/EpochEntryCache`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochEntryCache {
    #[serde(default, deserialize_with = "null_default")]
    pub cluster_name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub broker_name: String,
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub epoch_list: Vec<EpochEntry>,
    #[serde(default)]
    pub max_offset: i64,
}
impl JsonBody for EpochEntryCache {}

/// (RingMQ) private request code: a broker set's election history and epoch starts
/// (docs/design/controller.md §2.3); kept off Apache's bodies because strict decoders
/// refuse unknown fields. Header `brokerName`; body `ElectionHistoryBody`.
pub const RINGMQ_CONTROLLER_GET_ELECTION_HISTORY: i32 = -32_010;

/// One candidate as the leader saw it when it elected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionCandidate {
    pub id: i64,
    pub alive: bool,
    pub epoch: i32,
    pub max_offset: i64,
    pub priority: i32,
}

/// One election of the history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionEntry {
    pub master_epoch: i32,
    pub old_master: Option<i64>,
    pub new_master: Option<i64>,
    /// `Controller`, `Broker` or `Admin`.
    pub trigger: String,
    #[serde(default)]
    pub candidates: Vec<ElectionCandidate>,
    pub raft_term: u64,
    /// The leader's wall clock when it proposed; informational only.
    pub leader_wall_ms: u64,
}

/// RINGMQ_CONTROLLER_GET_ELECTION_HISTORY answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElectionHistoryBody {
    #[serde(default)]
    pub history: Vec<ElectionEntry>,
    /// Epoch -> each shard's first physical offset in it.
    #[serde(default)]
    pub epoch_starts: BTreeMap<i32, Vec<u64>>,
}
impl JsonBody for ElectionHistoryBody {}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(pairs: &[(&str, &str)], expected: H) {
        let mut ext = ExtFields::new();
        for (k, v) in pairs {
            ext.set_str(k, v);
        }
        let got = H::from_ext(&ext).expect("decodes");
        assert_eq!(got, expected);
        assert_eq!(H::from_ext(&got.to_ext()).expect("round trip"), got);
    }

    #[test]
    fn headers_use_java_field_names() {
        check(
            &[("brokerName", "b"), ("masterBrokerId", " 1 "), ("masterEpoch", "2"), ("invokeTime", "5"), ("AccessKey", "x")],
            AlterSyncStateSetRequestHeader { broker_name: "b".into(), master_broker_id: 1, master_epoch: 2, invoke_time: Some(5) },
        );
        check(
            &[("clusterName", "c"), ("brokerName", "b")],
            ElectMasterRequestHeader { cluster_name: "c".into(), broker_name: "b".into(), broker_id: -1, designate_elect: false, invoke_time: None },
        );
        check(
            &[("clusterName", "c"), ("brokerName", "b"), ("brokerId", "2"), ("designateElect", "true")],
            ElectMasterRequestHeader { cluster_name: "c".into(), broker_name: "b".into(), broker_id: 2, designate_elect: true, invoke_time: None },
        );
        check(
            &[("clusterName", "c"), ("brokerName", "b"), ("appliedBrokerId", "1"), ("registerCheckCode", "1.2.3.4:10911;99")],
            ApplyBrokerIdRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                applied_broker_id: 1,
                register_check_code: "1.2.3.4:10911;99".into(),
            },
        );
        check(
            &[("brokerName", "b"), ("brokerControllerIdsToClean", "1;2"), ("isCleanLivingBroker", "1")],
            CleanControllerBrokerDataRequestHeader {
                cluster_name: None,
                broker_name: "b".into(),
                broker_controller_ids_to_clean: Some("1;2".into()),
                is_clean_living_broker: true,
                invoke_time: None,
            },
        );
        check(
            &[("isLeader", "true"), ("peers", "n0:a;"), ("controllerLeaderId", "n0")],
            GetMetaDataResponseHeader {
                group: None,
                controller_leader_id: Some("n0".into()),
                controller_leader_address: None,
                is_leader: true,
                peers: Some("n0:a;".into()),
            },
        );
    }

    #[test]
    fn missing_required_field_is_named() {
        let err = GetReplicaInfoRequestHeader::from_ext(&ExtFields::new()).unwrap_err();
        assert_eq!(err, HeaderError::Missing { field: "brokerName" });
    }

    #[test]
    fn bodies_round_trip_and_accept_fastjson() {
        let s = SyncStateSet::decode(br#"{"syncStateSet":[1,2],"syncStateSetEpoch":"3"}"#);
        // Epoch as a string is not something fastjson writes; numbers only.
        assert!(s.is_err());
        let s = SyncStateSet::decode(br#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#).expect("decodes");
        assert_eq!(s, SyncStateSet { sync_state_set: vec![1, 2], sync_state_set_epoch: 3 });
        assert_eq!(SyncStateSet::decode(&s.encode()).expect("round trip"), s);

        let g = BrokerMemberGroup::decode(br#"{"brokerAddrs":{1:"a:1",2:"b:2"},"brokerName":"b","cluster":"c"}"#)
            .expect("fastjson integer keys");
        assert_eq!(g.broker_addrs.get(&2).map(String::as_str), Some("b:2"));
        let body = ElectMasterResponseBody { broker_member_group: Some(g), sync_state_set: vec![1] };
        assert_eq!(ElectMasterResponseBody::decode(&body.encode()).expect("round trip"), body);

        let mut info = BrokerReplicasInfo::default();
        info.replicas_info_table.insert(
            "b".into(),
            ReplicasInfo {
                master_broker_id: Some(1),
                master_address: Some("a:1".into()),
                master_epoch: 1,
                sync_state_set_epoch: 2,
                in_sync_replicas: vec![ReplicaIdentity { broker_name: "b".into(), broker_id: 1, broker_address: "a:1".into(), alive: true }],
                not_in_sync_replicas: vec![],
            },
        );
        assert_eq!(BrokerReplicasInfo::decode(&info.encode()).expect("round trip"), info);
        assert!(BrokerReplicasInfo::decode(br#"{"replicasInfoTable":null}"#).expect("null map").replicas_info_table.is_empty());
        // What Apache's broker writes for GET_BROKER_EPOCH_CACHE; the open epoch's end may
        // be absent.
        let cache = EpochEntryCache::decode(
            br#"{"brokerId":1,"brokerName":"b","clusterName":"c","epochList":[{"epoch":1,"startOffset":0,"endOffset":100},{"epoch":2,"startOffset":100}],"maxOffset":150}"#,
        )
        .expect("EpochEntryCache decodes");
        assert_eq!(
            cache,
            EpochEntryCache {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_id: 1,
                epoch_list: vec![EpochEntry { epoch: 1, start_offset: 0, end_offset: 100 }, EpochEntry { epoch: 2, start_offset: 100, end_offset: 0 }],
                max_offset: 150,
            }
        );
        assert_eq!(EpochEntryCache::decode(&cache.encode()).expect("round trip"), cache);
    }
}
