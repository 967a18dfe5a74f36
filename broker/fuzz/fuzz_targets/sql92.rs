//! SQL92 filter expressions (`MessageSelector.bySql`, PULL_MESSAGE / HEART_BEAT
//! subscriptions) from arbitrary bytes: parsing never panics, stays within
//! `SQL92_EXPRESSION_BYTES_MAX` / `SQL92_DEPTH_MAX`, and a parsed filter evaluates any
//! properties string (the record's, split at the first 0x00 byte of the input) without
//! panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ringmq_broker::filter::sql92::Sql92Filter;

fuzz_target!(|data: &[u8]| {
    let (expr, props) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"a\x015\x02TAGS\x01TagA\x02"[..]),
    };
    let Ok(expr) = std::str::from_utf8(expr) else { return };
    if let Ok(filter) = Sql92Filter::parse(expr) {
        let _ = filter.matches(&String::from_utf8_lossy(props));
    }
});
