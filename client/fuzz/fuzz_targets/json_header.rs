//! Fuzzes the lenient JSON command-header decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::command::decode_json_header;

fuzz_target!(|data: &[u8]| {
    let _ = decode_json_header(data);
});
