//! The short CI version of the SIGKILL cycles (`loadgen verify cycles`): a sync-flush
//! broker child process is killed at random moments under load (once also during
//! recovery), restarted, and every acknowledged message must be there, intact and in
//! order. `scripts/sigkill-cycles.sh` runs the long version.

mod common;

use common::broker_bin;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn acknowledged_messages_survive_sigkill_cycles() {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let broker = broker_bin(&loadgen);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("cycles.json");
    let seed = std::env::var("RINGMQ_SEED").unwrap_or_else(|_| format!("{}", std::process::id() as u64 * 7919 + 1));
    let output = Command::new(&loadgen)
        .args(["verify", "cycles", "--cycles", "3", "--producers", "2", "--kill-after-min-ms", "200", "--kill-after-max-ms", "900", "--kill-in-recovery-every", "2", "--segment-mib", "8", "--seed", &seed])
        .arg("--broker-bin")
        .arg(&broker)
        .arg("--dir")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("loadgen runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "seed {seed} (replay with RINGMQ_SEED={seed})\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).expect("report")).expect("json");
    let v = &report["verdict"];
    assert_eq!(v["lost"], 0, "{report}");
    assert_eq!(v["corrupted"], 0, "{report}");
    assert!(v["acked"].as_u64().expect("acked") > 100, "the load really ran: {report}");
    assert_eq!(report["cycles"].as_array().expect("cycles").len(), 3);
    eprintln!("{stdout}");
}

/// Short CI version of the slow-consumer check: the backlog grows and drains, every
/// message arrives, and the broker's memory stays bounded.
#[test]
fn a_slow_consumer_backlog_grows_and_drains_with_bounded_broker_memory() {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let broker = broker_bin(&loadgen);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("slow.json");
    let output = Command::new(&loadgen)
        .args(["verify", "slow-consumer", "--duration-secs", "6", "--produce-rate", "2000", "--consume-rate", "800"])
        .arg("--broker-bin")
        .arg(&broker)
        .arg("--dir")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("loadgen runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&output.stderr));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).expect("report")).expect("json");
    assert_eq!(r["sent"], r["received"], "{r}");
    assert!(r["backlog_peak"].as_i64().expect("backlog") > 3_000, "the backlog really grew: {r}");
    assert!(r["broker_rss_mib_peak"].as_f64().expect("rss") < 512.0, "{r}");
    eprintln!("{stdout}");
}
