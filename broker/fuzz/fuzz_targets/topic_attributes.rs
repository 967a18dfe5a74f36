//! UPDATE_AND_CREATE_TOPIC `attributes` strings from arbitrary bytes: parsing and
//! applying them to a topic's attributes (new and existing) never panics, and what an
//! alteration accepts is always valid to store.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ringmq_broker::meta::attributes;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(modification) = attributes::parse(text) else { return };
    let existing = BTreeMap::from([("message.type".to_string(), "FIFO".to_string())]);
    for (create, current) in [(true, BTreeMap::new()), (false, existing)] {
        if let Ok(next) = attributes::alter(create, &current, &modification) {
            assert!(attributes::validate(&next).is_ok(), "{text:?} gave unstorable attributes {next:?}");
        }
    }
});
