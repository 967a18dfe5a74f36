//! Fuzzes the admin tools' body decoders (TopicStatsTable, ConsumeStats, GroupList,
//! ResetOffsetBody, ConsumerRunningInfo, ConsumeMessageDirectlyResult, BrokerStatsData —
//! fastjson's object-as-map-key form) and the key-quoting scanners under them: any bytes
//! decode or fail, never panic; a decoded body re-encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::admin::{BrokerStatsData, ConsumeMessageDirectlyResult, ConsumeStats, ConsumerRunningInfo, GroupList, ResetOffsetBody, TopicStatsTable};
use ringmq_client::remoting::json::{quote_bare_int_keys, quote_object_keys};

fuzz_target!(|data: &[u8]| {
    let _ = quote_object_keys(data);
    let _ = quote_bare_int_keys(data);
    if let Ok(t) = TopicStatsTable::decode(data) {
        assert_eq!(TopicStatsTable::decode(&t.encode()).ok(), Some(t));
    }
    if let Ok(c) = ConsumeStats::decode(data) {
        assert_eq!(ConsumeStats::decode(&c.encode()).ok(), Some(c));
    }
    if let Ok(g) = GroupList::decode(data) {
        assert_eq!(GroupList::decode(&g.encode()).ok(), Some(g));
    }
    if let Ok(r) = ResetOffsetBody::decode(data) {
        assert_eq!(ResetOffsetBody::decode(&r.encode()).ok(), Some(r));
    }
    if let Ok(i) = ConsumerRunningInfo::decode(data) {
        assert!(ConsumerRunningInfo::decode(&i.encode()).is_ok());
    }
    if let Ok(c) = ConsumeMessageDirectlyResult::decode(data) {
        assert!(ConsumeMessageDirectlyResult::decode(&c.encode()).is_ok());
    }
    if let Ok(s) = BrokerStatsData::decode(data) {
        assert!(BrokerStatsData::decode(&s.encode()).is_ok());
    }
});
