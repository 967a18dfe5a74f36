//! The short version of `loadgen verify recovery`: a few seconds of W2-shaped load on a
//! broker child process with small segments, a SIGKILL, a restart, then a clean stop and
//! restart; every restart must report its three times and nothing acknowledged may be
//! lost beyond what async flush allows (the last second before the kill).

mod common;

use common::run_verify;

#[test]
fn restart_times_are_measured_and_nothing_acknowledged_is_lost() {
    // 0.01 GiB is below what the first row leaves on disk: the clean row stops and
    // restarts at once, without a growth phase.
    let (r, stdout) = run_verify(
        &["recovery", "--load-secs", "2", "--clean-store-gib", "0.01", "--segment-mib", "8", "--producers", "2", "--in-flight", "2"],
        "loadgen verify recovery failed",
    );
    let rows = r["rows"].as_array().expect("rows");
    assert_eq!(rows.iter().map(|row| row["kind"].as_str().expect("kind")).collect::<Vec<_>>(), ["sigkill", "clean"], "{r}");
    for row in rows {
        for time in ["port_open_ms", "first_ack_ms", "first_pull_ms"] {
            assert!(row[time].as_u64().is_some(), "{time} missing: {row}");
        }
        assert!(row["store_bytes"].as_u64().expect("store bytes") > 0, "{row}");
    }
    assert!(rows[0]["acked"].as_u64().expect("acked") > 1_000, "the load really ran: {r}");
    // A clean stop flushes everything acknowledged.
    assert_eq!(rows[1]["lost"], 0, "{r}");
    assert_eq!(r["lost_beyond_flush_window"], 0, "{r}");
    for problem in ["corrupted", "misplaced", "reordered"] {
        assert_eq!(r["verdict"][problem], 0, "{r}");
    }
    assert!(r["kept_dir"].is_null(), "the store is removed after a passing run: {r}");
    eprintln!("{stdout}");
}
