//! Build script: records the git commit the `loadgen` binary was built from (and how
//! many paths were uncommitted then), so results name the code that produced them even
//! when HEAD moves before the bench runs. Absent git, the values are "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain"]).map(|s| s.lines().count().to_string()).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LOADGEN_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=LOADGEN_BUILD_DIRTY_PATHS={dirty}");
    // Re-run when a commit is made or the index changes, and when loadgen changes.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/index");
        println!("cargo:rerun-if-changed={git_dir}/refs/heads");
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
}
