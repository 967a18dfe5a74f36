//! `loadgen e2e --tls` (issue 26): the embedded NameServer and broker run
//! `tls.server.mode=enforcing` with a certificate made for the run, loadgen's clients
//! connect over TLS trusting its CA, and a short open-loop run delivers what it sends.
//! Not a speed check (the TLS-versus-plain comparison is a benchmark, run apart).

mod common;

const RATE_PER_SEC: u64 = 2_000;
const DURATION_SECS: u64 = 2;

#[test]
fn e2e_over_tls_delivers_what_it_sends() {
    let run = common::run_e2e(&["--tls"], RATE_PER_SEC, DURATION_SECS, 0);
    let (json, stdout, stderr, dir) = (&run.json, &run.stdout, &run.stderr, &run.dir);
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
