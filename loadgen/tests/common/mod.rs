//! What loadgen's process tests share: finding (and if needed building) the broker
//! binary the `verify` subcommands run as a child process, and running one of those
//! subcommands to its JSON report.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `ringmq-broker` next to the loadgen binary under test, built first when missing:
/// `cargo test -p ringmq-loadgen` alone does not build the broker's binary.
pub fn broker_bin(loadgen: &Path) -> PathBuf {
    let bin = loadgen.with_file_name("ringmq-broker");
    if !bin.exists() {
        let status = Command::new(env!("CARGO")).args(["build", "-p", "ringmq-broker", "--bin", "ringmq-broker"]).status().expect("cargo runs");
        assert!(status.success(), "building ringmq-broker failed");
    }
    assert!(bin.exists(), "{} missing", bin.display());
    bin
}

/// Runs `loadgen verify <args>` against the broker binary, in a fresh directory, with
/// `--out`; asserts it succeeded (`context` is printed first on failure, e.g. a seed to
/// replay) and returns the JSON report and stdout.
pub fn run_verify(args: &[&str], context: &str) -> (serde_json::Value, String) {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let broker = broker_bin(&loadgen);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("report.json");
    let output = Command::new(&loadgen)
        .arg("verify")
        .args(args)
        .arg("--broker-bin")
        .arg(&broker)
        .arg("--dir")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .output()
        .expect("loadgen runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{context}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let report = serde_json::from_slice(&std::fs::read(&out).expect("report")).expect("json");
    (report, stdout)
}
