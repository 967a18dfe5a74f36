//! `loadgen e2e --access-key --secret-key` without `--namesrv`: the embedded broker runs
//! with `aclEnable` and that account as its only one, every request is signed, and the
//! run completes with nothing refused (the ACL benchmark's set-up, issue 26). Its own
//! test binary: it loads both cores.

mod common;

const RATE_PER_SEC: u64 = 2_000;

#[test]
fn embedded_broker_with_acl_serves_a_signed_run() {
    let run = common::run_e2e(&["--access-key", "benchAccount", "--secret-key", "bench:Secret \"1\""], RATE_PER_SEC, 3, 1);
    let (json, stdout, stderr) = (&run.json, &run.stdout, &run.stderr);
    assert!(stdout.contains("ACL (every request signed and checked)"), "the row names the ACL:\n{stdout}");
    assert!(!stdout.contains("send failed") && !stderr.contains("send errors") && !stderr.contains("ACL refused"), "nothing refused (loadgen signs its own calls too):\n{stdout}\n{stderr}");
    let totals = &json["runs"][0]["ringmq"]["totals"];
    let sent = totals["sent"].as_u64().expect("sent");
    let received = totals["received"].as_u64().expect("received");
    assert!(sent as f64 >= RATE_PER_SEC as f64 * 2.0 * 0.9, "sent {sent} in the 3 s window:\n{stdout}");
    assert!(received as f64 >= sent as f64 * 0.99, "received {received} of {sent}:\n{stdout}");
}
