//! Turning findings into an apply plan and carrying it out: `sysctl -w` for sysctls
//! (`echo value > ROOT/proc/sys/...` when the root is not `/`), `echo value > /sys/...`
//! for sysfs files, and, for resource limits, the content of an
//! `/etc/security/limits.d/` file and the matching systemd `Limit*=` lines (printed,
//! never written: limits belong to the service manager or PAM).
//!
//! Invariant: the plan holds exactly one step per fix write of a `Differs` finding, in
//! finding order; `Ok` and `Unavailable` findings never produce a step.
//! Invariant: [`execute`] writes only files that already exist under the root (no
//! create), one `write` each, and keeps going after a failed step so that the operator
//! sees every failure; it refuses to touch the real host (`/`) unless euid is 0.
//! Invariant: printed commands are shell-quoted, so pasting them does what `execute`
//! does.

use crate::check::{Finding, Status, Write};
use crate::profile::{KernelProfile, Rlim};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ApplyError {
    #[error(
        "applying to the host root {root} needs root (euid 0); run with sudo or use --dry-run"
    )]
    NotRoot { root: PathBuf },
    #[error("cannot write {value:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: std::io::Error,
    },
}

/// One write and the command that does the same by hand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub item: String,
    pub command: String,
    pub write: Write,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// `Differs` items that no file write fixes (limits, a scheduler the device lacks).
    pub manual: Vec<String>,
    /// `/etc/sysctl.d/` content that keeps the sysctl steps after a reboot.
    pub sysctl_conf: Option<String>,
    /// `/etc/security/limits.d/` content and systemd lines for the profile's limits.
    pub limits_conf: Option<String>,
}

/// File name suggested for the persistent sysctls.
pub const SYSCTL_CONF_PATH: &str = "/etc/sysctl.d/60-ringmq.conf";
/// File name suggested for the limits.
pub const LIMITS_CONF_PATH: &str = "/etc/security/limits.d/90-ringmq.conf";

/// Builds the plan for `findings` (from [`crate::check::check`]) on a host at `root`.
pub fn plan(profile: &KernelProfile, findings: &[Finding], root: &Path) -> Plan {
    let mut steps = Vec::new();
    let mut manual = Vec::new();
    let mut persist = String::new();
    // `sysctl -w` acts on this kernel, so it is printed only for the real root.
    let real_root = root == Path::new("/");
    for f in findings.iter().filter(|f| f.status == Status::Differs) {
        if f.fix.is_empty() {
            manual.push(f.item.clone());
        }
        for w in &f.fix {
            let name = sysctl_name(&w.path);
            if let Some(name) = &name {
                let _ = writeln!(persist, "{name} = {}", w.value);
            }
            let command = match name {
                Some(name) if real_root => {
                    format!("sysctl -w {}", shell_quote(&format!("{name}={}", w.value)))
                }
                _ => format!(
                    "echo {} > {}",
                    shell_quote(&w.value),
                    shell_quote(&root.join(&w.path).to_string_lossy())
                ),
            };
            steps.push(Step {
                item: f.item.clone(),
                command,
                write: w.clone(),
            });
        }
    }
    let sysctl_conf = (!persist.is_empty())
        .then(|| format!("# {SYSCTL_CONF_PATH}: keeps these after a reboot\n{persist}"));
    Plan {
        steps,
        manual,
        sysctl_conf,
        limits_conf: limits_conf(profile),
    }
}

/// The dotted sysctl name of a `proc/sys/...` path.
fn sysctl_name(path: &Path) -> Option<String> {
    let rest = path.strip_prefix("proc/sys").ok()?;
    let parts: Vec<&str> = rest
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("."))
}

/// Quotes `s` for a POSIX shell when it holds anything but safe characters.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn limits_conf(profile: &KernelProfile) -> Option<String> {
    let l = &profile.limits;
    if l.nofile.is_none() && l.memlock_bytes.is_none() {
        return None;
    }
    let mut pam = String::new();
    let mut systemd = String::new();
    if let Some(n) = l.nofile {
        let _ = writeln!(pam, "*  soft  nofile   {n}\n*  hard  nofile   {n}");
        let _ = writeln!(systemd, "#   LimitNOFILE={n}");
    }
    if let Some(bytes) = l.memlock_bytes {
        // limits.conf counts memlock in KiB; systemd in bytes.
        let (kib, sd) = match bytes {
            Rlim::Finite(b) => (b.div_ceil(1024).to_string(), b.to_string()),
            Rlim::Unlimited => ("unlimited".to_string(), "infinity".to_string()),
        };
        let _ = writeln!(pam, "*  soft  memlock  {kib}\n*  hard  memlock  {kib}");
        let _ = writeln!(systemd, "#   LimitMEMLOCK={sd}");
    }
    Some(format!(
        "# {LIMITS_CONF_PATH} (pam_limits, new login sessions; memlock in KiB)\n{pam}\
         # systemd services ignore limits.d; put these in the broker's unit [Service]:\n{systemd}"
    ))
}

impl Plan {
    /// The text `ringmq-tune apply` prints before (or instead of) applying.
    pub fn render(&self, dry_run: bool) -> String {
        let mut out = String::new();
        if self.steps.is_empty() {
            out.push_str("# nothing to write: no setting that a write fixes differs\n");
        } else {
            let what = if dry_run { "would run" } else { "running" };
            let _ = writeln!(out, "# {what} {} command(s):", self.steps.len());
            for s in &self.steps {
                let _ = writeln!(out, "{}", s.command);
            }
        }
        if !self.manual.is_empty() {
            let _ = writeln!(
                out,
                "\n# differs, no automatic fix: {}",
                self.manual.join(", ")
            );
        }
        if let Some(c) = &self.sysctl_conf {
            let _ = write!(out, "\n{c}");
        }
        if let Some(c) = &self.limits_conf {
            let _ = write!(out, "\n# limits are not applied by this tool:\n{c}");
        }
        if dry_run && !self.steps.is_empty() {
            out.push_str("\n# dry run: nothing was changed (pass --yes, as root, to apply)\n");
        }
        out
    }
}

/// Refuses to apply to the real host (`root` resolving to `/`) unless `euid` is 0.
pub fn may_apply(root: &Path, euid: u32) -> Result<(), ApplyError> {
    let real = root
        .canonicalize()
        .map(|p| p == Path::new("/"))
        .unwrap_or(false);
    if real && euid != 0 {
        return Err(ApplyError::NotRoot {
            root: root.to_path_buf(),
        });
    }
    Ok(())
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Carries out every step (writes under `root`); one result per step.
pub fn execute(plan: &Plan, root: &Path) -> Vec<Result<(), ApplyError>> {
    plan.steps
        .iter()
        .map(|s| write_existing(&root.join(&s.write.path), &s.write.value))
        .collect()
}

fn write_existing(path: &Path, value: &str) -> Result<(), ApplyError> {
    let err = |source| ApplyError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(err)?;
    file.write_all(format!("{value}\n").as_bytes()).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check as check_host;
    use crate::host::{Host, Rlimit, Rlimits};

    use crate::fake_root::tree;

    /// Checks `profile` against a fake tree, plans, renders (as a dry run, with the
    /// temporary root shown as `ROOT`), executes, and compares the printed plan and the
    /// files afterwards.
    fn check(
        files: &[(&str, &str)],
        profile: &str,
        expected_render: &str,
        expected_files: &[(&str, &str)],
    ) {
        let dir = tree(files);
        let profile = KernelProfile::parse(profile).unwrap();
        let mut state = Host::new(dir.path()).read_state(&profile).unwrap();
        // Fixed limits, so the result does not depend on the test process's.
        let small = Rlimit {
            soft: Rlim::Finite(1024),
            hard: Rlim::Finite(4096),
        };
        state.rlimits = Rlimits {
            nofile: small,
            memlock_bytes: small,
        };
        let findings = check_host(&profile, &state);
        let plan = plan(&profile, &findings, dir.path());
        let shown = plan
            .render(true)
            .replace(&*dir.path().to_string_lossy(), "ROOT");
        assert_eq!(shown, expected_render);
        for r in execute(&plan, dir.path()) {
            r.unwrap();
        }
        for (rel, content) in expected_files {
            assert_eq!(
                std::fs::read_to_string(dir.path().join(rel)).unwrap(),
                *content,
                "{rel}"
            );
        }
        // After applying, nothing is left to fix.
        let state = Host::new(dir.path()).read_state(&profile).unwrap();
        assert!(
            super::plan(&profile, &check_host(&profile, &state), dir.path())
                .steps
                .is_empty()
        );
    }

    #[test]
    fn plans_and_applies_on_a_fake_root() {
        check(
            &[],
            "",
            "# nothing to write: no setting that a write fixes differs\n",
            &[],
        );
        check(
            &[
                ("proc/sys/net/core/somaxconn", "128\n"),
                ("proc/sys/vm/swappiness", "1\n"),
                ("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n"),
            ],
            "[sysctl]\n\"net.core.somaxconn\" = { at_least = 4096 }\n\"vm.swappiness\" = { at_most = 1 }\n\"net.ipv4.tcp_rmem\" = \"4096 131072 67108864\"\n\"kernel.numa_balancing\" = 0",
            "# would run 2 command(s):\n\
             echo 4096 > ROOT/proc/sys/net/core/somaxconn\n\
             echo '4096 131072 67108864' > ROOT/proc/sys/net/ipv4/tcp_rmem\n\
             \n\
             # /etc/sysctl.d/60-ringmq.conf: keeps these after a reboot\n\
             net.core.somaxconn = 4096\n\
             net.ipv4.tcp_rmem = 4096 131072 67108864\n\
             \n\
             # dry run: nothing was changed (pass --yes, as root, to apply)\n",
            &[
                ("proc/sys/net/core/somaxconn", "4096\n"),
                ("proc/sys/vm/swappiness", "1\n"),
                ("proc/sys/net/ipv4/tcp_rmem", "4096 131072 67108864\n"),
            ],
        );
        check(
            &[
                ("sys/block/nvme0n1/queue/scheduler", "[mq-deadline] none\n"),
                ("sys/block/nvme0n1/queue/read_ahead_kb", "128\n"),
                ("sys/block/nvme1n1/queue/scheduler", "[mq-deadline] kyber\n"),
                ("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n"),
                ("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n"),
                ("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance\n"),
            ],
            "[block]\nscheduler = \"none\"\nread_ahead_kb = 128\n[mm]\ntransparent_hugepage = \"never\"\n[cpu]\ngovernor = \"performance\"",
            "# would run 3 command(s):\n\
             echo none > ROOT/sys/block/nvme0n1/queue/scheduler\n\
             echo never > ROOT/sys/kernel/mm/transparent_hugepage/enabled\n\
             echo performance > ROOT/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor\n\
             \n\
             # differs, no automatic fix: block.nvme1n1.scheduler\n\
             \n\
             # dry run: nothing was changed (pass --yes, as root, to apply)\n",
            &[
                ("sys/block/nvme0n1/queue/scheduler", "none\n"),
                ("sys/kernel/mm/transparent_hugepage/enabled", "never\n"),
                ("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n"),
                ("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance\n"),
            ],
        );
        check(
            &[],
            "[limits]\nnofile = 1048576\nmemlock_bytes = 1000000",
            "# nothing to write: no setting that a write fixes differs\n\
             \n\
             # differs, no automatic fix: limits.nofile, limits.memlock_bytes\n\
             \n\
             # limits are not applied by this tool:\n\
             # /etc/security/limits.d/90-ringmq.conf (pam_limits, new login sessions; memlock in KiB)\n\
             *  soft  nofile   1048576\n\
             *  hard  nofile   1048576\n\
             *  soft  memlock  977\n\
             *  hard  memlock  977\n\
             # systemd services ignore limits.d; put these in the broker's unit [Service]:\n\
             #   LimitNOFILE=1048576\n\
             #   LimitMEMLOCK=1000000\n",
            &[],
        );
    }

    #[test]
    fn real_root_commands() {
        let f = |item: &str, path: &str, value: &str| {
            let mut f = Finding::new(item, "x", "y", Status::Differs);
            f.fix = vec![Write {
                path: PathBuf::from(path),
                value: value.into(),
            }];
            f
        };
        let findings = [
            f(
                "net.ipv4.tcp_wmem",
                "proc/sys/net/ipv4/tcp_wmem",
                "4096 65536 67108864",
            ),
            f("vm.swappiness", "proc/sys/vm/swappiness", "1"),
            f(
                "block.nvme0n1.scheduler",
                "sys/block/nvme0n1/queue/scheduler",
                "none",
            ),
            Finding::new("fs.file-max", "x", "y", Status::Ok),
        ];
        let plan = plan(&KernelProfile::default(), &findings, Path::new("/"));
        let commands: Vec<&str> = plan.steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(
            commands,
            [
                "sysctl -w 'net.ipv4.tcp_wmem=4096 65536 67108864'",
                "sysctl -w vm.swappiness=1",
                "echo none > /sys/block/nvme0n1/queue/scheduler",
            ]
        );
        assert_eq!(
            plan.sysctl_conf.as_deref(),
            Some("# /etc/sysctl.d/60-ringmq.conf: keeps these after a reboot\nnet.ipv4.tcp_wmem = 4096 65536 67108864\nvm.swappiness = 1\n")
        );
    }

    #[test]
    fn limits_conf_unlimited_memlock() {
        let p = KernelProfile::parse("[limits]\nmemlock_bytes = \"unlimited\"").unwrap();
        let c = limits_conf(&p).unwrap();
        assert!(
            c.contains("*  hard  memlock  unlimited\n") && c.contains("LimitMEMLOCK=infinity\n"),
            "{c}"
        );
        assert_eq!(limits_conf(&KernelProfile::default()), None);
    }

    #[test]
    fn quoting_and_names() {
        for (input, expected) in [
            ("none", "none"),
            ("net.core.somaxconn=4096", "net.core.somaxconn=4096"),
            ("4096 131072", "'4096 131072'"),
            ("it's", r"'it'\''s'"),
            ("", "''"),
            ("$(reboot)", "'$(reboot)'"),
        ] {
            assert_eq!(shell_quote(input), expected, "{input:?}");
        }
        for (path, expected) in [
            ("proc/sys/net/core/somaxconn", Some("net.core.somaxconn")),
            ("proc/sys/fs/aio-max-nr", Some("fs.aio-max-nr")),
            ("proc/sys", None),
            ("sys/block/nvme0n1/queue/scheduler", None),
        ] {
            assert_eq!(sysctl_name(Path::new(path)).as_deref(), expected, "{path}");
        }
    }

    #[test]
    fn refuses_the_real_root_unless_euid_0() {
        assert!(matches!(
            may_apply(Path::new("/"), 1000),
            Err(ApplyError::NotRoot { .. })
        ));
        assert!(may_apply(Path::new("/"), 0).is_ok());
        let dir = tempfile::tempdir().unwrap();
        assert!(may_apply(dir.path(), 1000).is_ok());
    }

    #[test]
    fn execute_never_creates_files_and_reports_every_failure() {
        let dir = tree(&[("proc/sys/vm/swappiness", "60\n")]);
        let write = |path: &str, value: &str| Step {
            item: path.into(),
            command: String::new(),
            write: Write {
                path: PathBuf::from(path),
                value: value.into(),
            },
        };
        let plan = Plan {
            steps: vec![
                write("proc/sys/vm/missing", "1"),
                write("proc/sys/vm/swappiness", "1"),
            ],
            manual: Vec::new(),
            sysctl_conf: None,
            limits_conf: None,
        };
        let results = execute(&plan, dir.path());
        assert!(
            matches!(&results[0], Err(ApplyError::Write { source, .. }) if source.kind() == std::io::ErrorKind::NotFound)
        );
        assert!(results[1].is_ok());
        assert!(!dir.path().join("proc/sys/vm/missing").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("proc/sys/vm/swappiness")).unwrap(),
            "1\n"
        );
    }
}
