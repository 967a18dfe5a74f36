//! Fuzzes the route-family JSON decoders (standard and legacy integer-key JSON).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::route::{ClusterInfo, RegisterBrokerBody, TopicRouteData};

fuzz_target!(|data: &[u8]| {
    let _ = TopicRouteData::decode(data);
    let _ = ClusterInfo::decode(data);
    let _ = RegisterBrokerBody::decode(data);
});
