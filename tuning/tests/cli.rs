//! End-to-end tests of the `ringmq-tune` binary: exit codes, table/JSON output and
//! apply, always against fake host trees in temporary directories (never `/`) and
//! with `--no-uring` where the exit code must not depend on this machine's kernel.
//!
//! Invariant: no test here writes outside its temporary directory.

use std::path::Path;
use std::process::Command;

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

const HOST: &[(&str, &str)] = &[
    ("proc/sys/net/core/somaxconn", "128\n"),
    ("proc/sys/vm/swappiness", "60\n"),
    ("sys/block/nvme0n1/queue/scheduler", "[mq-deadline] none\n"),
    (
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always [madvise] never\n",
    ),
];

/// Runs the binary with `args` (`ROOT` and `PROFILE` replaced); returns (code, stdout, stderr).
fn run(root: &Path, profile: &str, args: &[&str]) -> (i32, String, String) {
    let profile_path = root.join("profile.toml");
    std::fs::write(&profile_path, profile).unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("ROOT", &root.to_string_lossy())
                .replace("PROFILE", &profile_path.to_string_lossy())
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq-tune"))
        .args(&args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `(profile, args, expected exit code, text expected in stdout+stderr)`.
fn check(profile: &str, args: &[&str], code: i32, contains: &[&str]) {
    let dir = tree(HOST);
    let (got, out, err) = run(dir.path(), profile, args);
    let all = format!("{out}{err}");
    assert_eq!(got, code, "args {args:?}\n{all}");
    for c in contains {
        assert!(all.contains(c), "args {args:?}: {c:?} not in\n{all}");
    }
}

const DIFFERS: &str = "[sysctl]\n\"net.core.somaxconn\" = { at_least = 4096 }\n[block]\nscheduler = \"none\"\n[mm]\ntransparent_hugepage = \"never\"";

#[test]
fn exit_codes_and_output() {
    let check_args = [
        "check",
        "--profile",
        "PROFILE",
        "--root",
        "ROOT",
        "--no-uring",
    ];
    // Everything ok or not available: 0.
    check(
        "[sysctl]\n\"net.core.somaxconn\" = { at_least = 100 }\n\"kernel.numa_balancing\" = 0\n[cpu]\ngovernor = \"performance\"",
        &check_args,
        0,
        &["net.core.somaxconn", "not available", "summary: 1 ok, 0 differ, 2 not available"],
    );
    // Something differs: 1.
    check(
        DIFFERS,
        &check_args,
        1,
        &[
            "block.nvme0n1.scheduler",
            "DIFFERS",
            "summary: 0 ok, 3 differ, 0 not available",
        ],
    );
    // Errors: 2, naming the bad key or file.
    check(
        "[block]\nshceduler = \"none\"",
        &check_args,
        2,
        &["unknown key `block.shceduler`"],
    );
    check(
        "",
        &["check", "--profile", "/nonexistent/p.toml", "--no-uring"],
        2,
        &["/nonexistent/p.toml"],
    );
    check(
        "",
        &[
            "apply",
            "--profile",
            "PROFILE",
            "--root",
            "ROOT",
            "--dry-run",
            "--yes",
        ],
        2,
        &["cannot be used with"],
    );
    check("", &["frobnicate"], 2, &[]);
    // Help documents the exit codes.
    check("", &["check", "--help"], 0, &["1 when something differs"]);
}

#[test]
fn json_output() {
    let dir = tree(HOST);
    let (code, out, _) = run(
        dir.path(),
        DIFFERS,
        &["check", "--profile", "PROFILE", "--root", "ROOT", "--json"],
    );
    assert!(code == 1, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["summary"]["differs"].as_u64().unwrap() >= 3);
    assert_eq!(doc["findings"][0]["item"], "net.core.somaxconn");
    assert_eq!(doc["findings"][0]["status"], "differs");
    assert_eq!(doc["findings"][0]["fix"][0]["value"], "4096");
    assert!(doc["io_uring"]["kernel_release"].is_string());
}

#[test]
fn apply_dry_run_then_yes_on_a_fake_root() {
    let dir = tree(HOST);
    let read = |rel: &str| std::fs::read_to_string(dir.path().join(rel)).unwrap();
    let (code, out, err) = run(
        dir.path(),
        DIFFERS,
        &["apply", "--profile", "PROFILE", "--root", "ROOT"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("echo 4096 > ") && out.contains("/proc/sys/net/core/somaxconn\n"),
        "{out}"
    );
    assert!(out.contains("dry run: nothing was changed"), "{out}");
    assert_eq!(read("proc/sys/net/core/somaxconn"), "128\n");

    let (code, out, err) = run(
        dir.path(),
        DIFFERS,
        &["apply", "--profile", "PROFILE", "--root", "ROOT", "--yes"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read("proc/sys/net/core/somaxconn"), "4096\n");
    assert_eq!(read("sys/block/nvme0n1/queue/scheduler"), "none\n");
    assert_eq!(
        read("sys/kernel/mm/transparent_hugepage/enabled"),
        "never\n"
    );

    let (code, out, _) = run(
        dir.path(),
        DIFFERS,
        &[
            "check",
            "--profile",
            "PROFILE",
            "--root",
            "ROOT",
            "--no-uring",
        ],
    );
    assert_eq!(code, 0, "{out}");
}
