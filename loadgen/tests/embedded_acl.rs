//! `loadgen e2e --access-key --secret-key` without `--namesrv`: the embedded broker runs
//! with `aclEnable` and that account as its only one, every request is signed, and the
//! run completes with nothing refused (the ACL benchmark's set-up, issue 26). Its own
//! test binary: it loads both cores.

use std::path::PathBuf;
use std::process::Command;

const RATE_PER_SEC: u64 = 2_000;

#[test]
fn embedded_broker_with_acl_serves_a_signed_run() {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("e2e.json");
    let args = [
        "e2e".to_string(),
        "--access-key".into(),
        "benchAccount".into(),
        "--secret-key".into(),
        "bench:Secret \"1\"".into(),
        "--rate".into(),
        RATE_PER_SEC.to_string(),
        "--duration-secs".into(),
        "3".into(),
        "--warmup-secs".into(),
        "1".into(),
        "--dir".into(),
        dir.path().display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--quiet".into(),
    ];
    let run = Command::new(&loadgen).args(&args).output().expect("loadgen runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "loadgen {args:?} failed ({}):\n{stdout}\n{stderr}", run.status);
    assert!(stdout.contains("ACL (every request signed and checked)"), "the row names the ACL:\n{stdout}");
    assert!(!stdout.contains("send failed") && !stderr.contains("send errors") && !stderr.contains("ACL refused"), "nothing refused (loadgen signs its own calls too):\n{stdout}\n{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).expect("results file")).expect("OMB JSON");
    let totals = &json["runs"][0]["ringmq"]["totals"];
    let sent = totals["sent"].as_u64().expect("sent");
    let received = totals["received"].as_u64().expect("received");
    assert!(sent as f64 >= RATE_PER_SEC as f64 * 2.0 * 0.9, "sent {sent} in the 3 s window:\n{stdout}");
    assert!(received as f64 >= sent as f64 * 0.99, "received {received} of {sent}:\n{stdout}");
}
