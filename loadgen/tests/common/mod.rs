//! What loadgen's process tests share: finding (and if needed building) the broker
//! binary the `verify` subcommands run as a child process, running one of those
//! subcommands to its JSON report, and running `loadgen e2e` on its embedded cluster to
//! its OMB JSON (`run_e2e`).
#![allow(dead_code)] // each test binary uses some of these

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

/// One `loadgen e2e` run on the embedded cluster: its OMB JSON, its output, and the
/// directory it ran in (kept until this is dropped).
pub struct E2eRun {
    pub json: serde_json::Value,
    pub stdout: String,
    pub stderr: String,
    pub dir: tempfile::TempDir,
}

/// Runs `loadgen e2e` open-loop at `rate_per_sec` for `duration_secs` after
/// `warmup_secs`, with `extra` flags, in a temporary directory; panics with its output
/// when it fails.
pub fn run_e2e(extra: &[&str], rate_per_sec: u64, duration_secs: u64, warmup_secs: u64) -> E2eRun {
    let loadgen = PathBuf::from(env!("CARGO_BIN_EXE_loadgen"));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let out = dir.path().join("e2e.json");
    let mut args: Vec<String> = vec!["e2e".into()];
    args.extend(extra.iter().map(|a| a.to_string()));
    for (flag, value) in [("--rate", rate_per_sec.to_string()), ("--duration-secs", duration_secs.to_string()), ("--warmup-secs", warmup_secs.to_string()), ("--dir", dir.path().display().to_string()), ("--out", out.display().to_string())] {
        args.push(flag.into());
        args.push(value);
    }
    args.push("--quiet".into());
    let run = Command::new(&loadgen).args(&args).output().expect("loadgen runs");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "loadgen {args:?} failed ({}):\n{stdout}\n{stderr}", run.status);
    let json = serde_json::from_slice(&std::fs::read(&out).expect("results file")).expect("OMB JSON");
    E2eRun { json, stdout, stderr, dir }
}
