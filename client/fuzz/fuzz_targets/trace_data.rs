//! Fuzzes the message-trace decoder (Java's `TraceDataEncoder` format, what
//! `queryMsgTraceById` reads from a trace topic anyone may write to): any text decodes
//! or fails with an error, never panics; a decoded record encodes again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::trace::encoder::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(contexts) = decode(text) {
        for ctx in &contexts {
            let _ = encode(ctx);
        }
    }
});
