//! Fuzzes the stored-message (CommitLog / pull body) record parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::message::StoredMessageView;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = StoredMessageView::parse(data) {
        let _ = view.verify_body_crc();
        let _ = view.to_owned();
    }
});
