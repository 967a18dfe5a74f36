//! Fuzzes the admin tools' body decoders (TopicStatsTable, ConsumeStats, GroupList —
//! fastjson's object-as-map-key form) and the key-quoting scanners under them: any bytes
//! decode or fail, never panic; a decoded body re-encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::admin::{ConsumeStats, GroupList, TopicStatsTable};
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
});
