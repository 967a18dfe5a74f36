//! The systemd units (`deploy/systemd/`) as `scripts/install-systemd.sh` installs them,
//! into a temporary root (no systemctl): the binary prefix is substituted, the broker
//! unit carries the limits RingMQ needs (LimitNOFILE, LimitMEMLOCK=infinity), the
//! optional `ringmq-tune apply` step and the config path; a TOML config's `cpu_list`
//! becomes a CPUAffinity drop-in (the broker pins shard i to cpu_list[i]), a RocketMQ
//! broker.conf gets none. Where `systemd-analyze` exists, the installed units pass
//! `systemd-analyze verify` (ExecStart binaries are dummies under the temp prefix).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn install(dir: &Path, config: &Path, extra: &[&str]) -> PathBuf {
    let root = dir.join(format!("root-{}", config.file_name().unwrap().to_string_lossy()));
    let prefix = dir.join("prefix");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    for b in ["ringmq-broker", "ringmq-namesrv", "ringmq-tune"] {
        let p = prefix.join("bin").join(b);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        Command::new("chmod").arg("755").arg(&p).status().unwrap();
    }
    let out = Command::new(repo().join("scripts/install-systemd.sh"))
        .arg("--config")
        .arg(config)
        .arg("--root")
        .arg(&root)
        .arg("--prefix")
        .arg(&prefix)
        .arg("--no-binaries")
        .args(extra)
        .output()
        .expect("install script runs");
    assert!(out.status.success(), "install failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    root
}

#[test]
fn units_install_with_limits_tuning_step_and_cpu_affinity() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("broker-a.toml");
    std::fs::write(&toml, "listen_port = 10911\nshard_count = 2\ncpu_list = [2, 3]\nstore_root = \"/var/lib/ringmq/broker-a\"\n").unwrap();
    let profile = repo().join("tuning/kernel/throughput.toml");
    let root = install(dir.path(), &toml, &["--tune-profile", profile.to_str().unwrap()]);
    let units = root.join("etc/systemd/system");
    let prefix = dir.path().join("prefix");
    let broker = read(&units.join("ringmq-broker@.service"));
    // check(text, wanted lines)
    let check = |text: &str, wanted: &[String]| {
        for w in wanted {
            assert!(text.lines().any(|l| l.trim() == w), "missing `{w}` in:\n{text}");
        }
        assert!(!text.contains("@PREFIX@"), "prefix not substituted:\n{text}");
    };
    check(
        &broker,
        &[
            format!("ExecStart={}/bin/ringmq-broker -c ${{RINGMQ_CONFIG}} $RINGMQ_BROKER_ARGS", prefix.display()),
            "LimitNOFILE=1048576".into(),
            "LimitMEMLOCK=infinity".into(),
            "KillSignal=SIGTERM".into(),
            "EnvironmentFile=-/etc/default/ringmq-broker-%i".into(),
        ],
    );
    assert!(broker.contains(&format!("exec {}/bin/ringmq-tune apply --profile \"$RINGMQ_TUNE_PROFILE\" --yes", prefix.display())), "{broker}");
    check(&read(&units.join("ringmq-namesrv.service")), &[format!("ExecStart={}/bin/ringmq-namesrv $RINGMQ_NAMESRV_ARGS", prefix.display())]);
    check(&read(&units.join("ringmq-broker@broker-a.service.d/cpu.conf")), &["CPUAffinity=2 3".into()]);
    check(
        &read(&root.join("etc/default/ringmq-broker-broker-a")),
        &["RINGMQ_CONFIG=/etc/ringmq/broker-a.toml".into(), "RINGMQ_TUNE_PROFILE=/etc/ringmq/kernel-throughput.toml".into()],
    );
    assert_eq!(read(&root.join("etc/ringmq/broker-a.toml")), read(&toml));
    assert_eq!(read(&root.join("etc/ringmq/kernel-throughput.toml")), read(&profile));

    // A RocketMQ broker.conf: installed as such, no CPU drop-in (no cpu_list there).
    let conf = dir.path().join("broker-b.conf");
    std::fs::write(&conf, "brokerName=broker-b\nbrokerId=0\nstorePathRootDir=/var/lib/ringmq/b\n").unwrap();
    let root_b = install(dir.path(), &conf, &[]);
    assert!(!root_b.join("etc/systemd/system/ringmq-broker@broker-b.service.d").exists());
    check(&read(&root_b.join("etc/default/ringmq-broker-broker-b")), &["RINGMQ_CONFIG=/etc/ringmq/broker-b.conf".into()]);
    assert!(!read(&root_b.join("etc/default/ringmq-broker-broker-b")).contains("RINGMQ_TUNE_PROFILE"));

    // systemd's own checker, where present.
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        println!("systemd_units: systemd-analyze not installed; verify skipped");
        return;
    }
    std::fs::copy(units.join("ringmq-broker@.service"), units.join("ringmq-broker@broker-a.service")).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.join("ringmq-namesrv.service"))
        .arg(units.join("ringmq-broker@broker-a.service"))
        .output()
        .expect("systemd-analyze runs");
    assert!(out.status.success(), "systemd-analyze verify: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
