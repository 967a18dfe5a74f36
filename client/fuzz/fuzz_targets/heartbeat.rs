//! Fuzzes the HEART_BEAT body decoder and the tag-code derivation it feeds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::heartbeat::{tag_codes, HeartbeatData};

fuzz_target!(|data: &[u8]| {
    if let Ok(hb) = HeartbeatData::decode(data) {
        for c in &hb.consumer_data_set {
            for s in &c.subscription_data_set {
                let _ = tag_codes(&s.sub_string);
            }
        }
    }
});
