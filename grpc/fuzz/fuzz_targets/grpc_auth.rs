//! Fuzzes the authorization header parser: any header and date-time parse or fail,
//! never panic, and a parsed header verifies (false or true) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_grpc::auth_header::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (authorization, date_time) = text.split_once('\n').unwrap_or((text, "20240101T000000Z"));
    if let Ok(h) = parse(authorization, Some(date_time)) {
        let _ = h.verify(b"secret");
    }
});
