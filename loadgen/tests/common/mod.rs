//! What loadgen's process tests share: finding (and if needed building) the broker
//! binary the `verify` subcommands run as a child process.

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
