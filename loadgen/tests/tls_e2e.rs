//! `loadgen e2e --tls` (issue 26): the embedded NameServer and broker run
//! `tls.server.mode=enforcing` with a certificate made for the run, loadgen's clients
//! connect over TLS trusting its CA, and a short open-loop run delivers what it sends.
//! Not a speed check (the TLS-versus-plain comparison is a benchmark, run apart).

use std::path::PathBuf;
use std::process::Command;

const RATE_PER_SEC: u64 = 2_000;
const DURATION_SECS: u64 = 2;

#[test]
fn e2e_over_tls_delivers_what_it_sends() {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("e2e-tls.json");
    let args = [
        "e2e".to_string(),
        "--tls".into(),
        "--rate".into(),
        RATE_PER_SEC.to_string(),
        "--duration-secs".into(),
        DURATION_SECS.to_string(),
        "--warmup-secs".into(),
        "0".into(),
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
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).expect("results file")).expect("OMB JSON");
    let r = &json["runs"][0];
    let config = r.to_string();
    assert!(config.contains("TLS enforcing") && config.contains(", TLS"), "the row says it ran over TLS, with the server checked: {config}");
    let totals = &r["ringmq"]["totals"];
    let sent = totals["sent"].as_u64().expect("sent");
    let received = totals["received"].as_u64().expect("received");
    let failed = totals["sendFailed"].as_u64().expect("sendFailed");
    eprintln!("tls_e2e: {sent} sent, {received} received, {failed} failed");
    assert_eq!(failed, 0, "no send failed:\n{stdout}\n{stderr}");
    assert!(sent >= RATE_PER_SEC * DURATION_SECS / 2, "sent only {sent}:\n{stdout}\n{stderr}");
    assert!(received as f64 >= sent as f64 * 0.99, "received {received} of {sent}:\n{stdout}\n{stderr}");
    // The run's certificates are removed with its store.
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").flatten().map(|e| e.file_name()).filter(|n| n.to_string_lossy().starts_with("embedded-")).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
