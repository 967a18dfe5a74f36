//! Fuzzes the SEND_BATCH_MESSAGE body decoder.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::batch;

fuzz_target!(|data: &[u8]| {
    let _ = batch::decode(&Bytes::copy_from_slice(data));
});
