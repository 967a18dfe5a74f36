//! Fuzzes the replication stream's frame decoder: any bytes yield frames, "need more" or
//! an error, never a panic; every decoded frame re-encodes to the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::ha::Frame;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some((frame, used))) = Frame::decode(rest) {
        let mut again = Vec::new();
        frame.encode(&mut again);
        // A REFUSE reason is decoded lossily (invalid UTF-8 replaced): skip the check there.
        if !matches!(frame, Frame::Refuse { .. }) {
            assert_eq!(&again[..], &rest[..used]);
        }
        rest = &rest[used..];
    }
});
