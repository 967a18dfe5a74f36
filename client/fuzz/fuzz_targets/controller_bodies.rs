//! Fuzzes controller mode's body decoders (issue 27): SyncStateSet, BrokerMemberGroup,
//! ElectMasterResponseBody, BrokerReplicasInfo, EpochEntryCache (GET_BROKER_EPOCH_CACHE)
//! and ElectionHistoryBody (−32010): any bytes decode or fail, never panic; what decodes
//! re-encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::controller::{
    BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody, ElectionHistoryBody, EpochEntryCache, SyncStateSet,
};

fn round_trip<T: JsonBody + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(v) = T::decode(data) {
        assert_eq!(T::decode(&v.encode()).ok(), Some(v));
    }
}

fuzz_target!(|data: &[u8]| {
    round_trip::<SyncStateSet>(data);
    round_trip::<BrokerMemberGroup>(data);
    round_trip::<ElectMasterResponseBody>(data);
    round_trip::<BrokerReplicasInfo>(data);
    round_trip::<EpochEntryCache>(data);
    round_trip::<ElectionHistoryBody>(data);
});
