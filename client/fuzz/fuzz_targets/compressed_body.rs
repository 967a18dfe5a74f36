//! Fuzzes body decompression (zlib, LZ4 frame and block, zstd) as a consumer meets it:
//! any bytes under any compression flags decode or fail with an error, never panic, and
//! never yield more than the bound asked for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::message::compression::{decompress, plain_body, CompressionType};

/// A small bound, so a bomb is cut off quickly.
const FUZZ_BODY_BYTES_MAX: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    // The sysFlag a stored message would carry: COMPRESSED plus the type bits.
    let sys_flag = 0x1 | (i32::from(selector & 0x7) << 8);
    let _ = plain_body(sys_flag, body);
    for codec in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
        if let Ok(out) = decompress(codec, body, FUZZ_BODY_BYTES_MAX) {
            assert!(out.len() <= FUZZ_BODY_BYTES_MAX, "{codec}: {} bytes past the bound", out.len());
        }
    }
});
