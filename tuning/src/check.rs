//! Comparing a profile with a host: [`check`] turns a [`KernelProfile`] and a
//! [`HostState`] into a list of [`Finding`]s `{item, wanted, actual, status}`, each
//! `Differs` finding carrying the writes that would fix it.
//!
//! Invariant: `check` is pure (no IO): everything it knows comes from the `HostState`,
//! so it is tested on hand-built states.
//! Invariant: a setting the host does not have is `Unavailable`, never `Differs`; a
//! `Differs` finding's `fix` is empty only when no file write can fix it (resource
//! limits, a scheduler the device does not offer); every fix path is relative to the
//! host root and names a file that was read (so applying never creates files).
//! Invariant: findings come in profile order: sysctls (by name), limits, block devices
//! (by name), transparent huge pages, CPU governor.

use crate::host::{block_rel_path, governor_rel_path, Choice, HostState, Rlimit, THP_ENABLED_PATH};
use crate::profile::{normalize, KernelProfile, Rlim, Want};
use serde::Serialize;
use std::path::PathBuf;

/// How a host setting compares with the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Differs,
    /// The host has no such setting (e.g. no cpufreq on a VM).
    Unavailable,
}

impl Status {
    /// The word printed in the table.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Differs => "DIFFERS",
            Status::Unavailable => "n/a",
        }
    }
}

/// One file write: `value` into `path` (relative to the host root).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    pub path: PathBuf,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub item: String,
    pub wanted: String,
    pub actual: String,
    pub status: Status,
    /// Writes that bring the host to `wanted`; only on `Differs` findings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fix: Vec<Write>,
}

/// The `actual` text of a setting the host lacks.
pub const NOT_AVAILABLE: &str = "not available";

impl Finding {
    pub fn new(
        item: impl Into<String>,
        wanted: impl Into<String>,
        actual: impl Into<String>,
        status: Status,
    ) -> Self {
        Finding {
            item: item.into(),
            wanted: wanted.into(),
            actual: actual.into(),
            status,
            fix: Vec::new(),
        }
    }

    fn unavailable(item: impl Into<String>, wanted: impl Into<String>) -> Self {
        Finding::new(item, wanted, NOT_AVAILABLE, Status::Unavailable)
    }

    fn with_fix(mut self, fix: Vec<Write>) -> Self {
        self.fix = fix;
        self
    }
}

/// Compares `state` with `profile`.
pub fn check(profile: &KernelProfile, state: &HostState) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in &profile.sysctl {
        out.push(match state.sysctls.get(&s.name) {
            Some(Some(actual)) => value_finding(&s.name, &s.want, actual, s.rel_path()),
            _ => Finding::unavailable(&s.name, s.want.to_string()),
        });
    }
    if let Some(n) = profile.limits.nofile {
        out.push(limit_finding(
            "limits.nofile",
            Rlim::Finite(n),
            state.rlimits.nofile,
        ));
    }
    if let Some(bytes) = profile.limits.memlock_bytes {
        out.push(limit_finding(
            "limits.memlock_bytes",
            bytes,
            state.rlimits.memlock_bytes,
        ));
    }
    if let Some(b) = &profile.block {
        if state.block.is_empty() {
            let wanted = [
                b.scheduler.as_ref().map(|w| format!("scheduler {w}")),
                b.read_ahead_kb
                    .as_ref()
                    .map(|w| format!("read_ahead_kb {w}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ");
            out.push(Finding::new(
                format!("block.{}", b.devices.join(",")),
                wanted,
                "no matching device",
                Status::Unavailable,
            ));
        }
        for dev in &state.block {
            if let Some(want) = &b.scheduler {
                let item = format!("block.{}.scheduler", dev.name);
                out.push(choice_finding(
                    item,
                    want,
                    dev.scheduler.as_ref(),
                    block_rel_path(&dev.name, "scheduler"),
                ));
            }
            if let Some(want) = &b.read_ahead_kb {
                let item = format!("block.{}.read_ahead_kb", dev.name);
                out.push(match &dev.read_ahead_kb {
                    Some(actual) => value_finding(
                        &item,
                        want,
                        actual,
                        block_rel_path(&dev.name, "read_ahead_kb"),
                    ),
                    None => Finding::unavailable(item, want.to_string()),
                });
            }
        }
    }
    if let Some(want) = &profile.transparent_hugepage {
        out.push(choice_finding(
            "mm.transparent_hugepage".to_string(),
            want,
            state.transparent_hugepage.as_ref(),
            PathBuf::from(THP_ENABLED_PATH),
        ));
    }
    if let Some(want) = &profile.cpu_governor {
        out.push(governor_finding(want, &state.cpu_governors));
    }
    out
}

/// Counts of `(ok, differs, unavailable)`.
pub fn summary(findings: &[Finding]) -> (usize, usize, usize) {
    let count = |s| findings.iter().filter(|f| f.status == s).count();
    (
        count(Status::Ok),
        count(Status::Differs),
        count(Status::Unavailable),
    )
}

fn value_finding(item: &str, want: &Want, actual: &str, path: PathBuf) -> Finding {
    let shown = normalize(actual);
    if want.matches(actual) {
        Finding::new(item, want.to_string(), shown, Status::Ok)
    } else {
        let value = want.value_to_write(actual);
        Finding::new(item, want.to_string(), shown, Status::Differs)
            .with_fix(vec![Write { path, value }])
    }
}

fn limit_finding(item: &str, wanted: Rlim, actual: Rlimit) -> Finding {
    let shown = format!("{} (hard {})", actual.soft, actual.hard);
    let status = if actual.soft >= wanted {
        Status::Ok
    } else {
        Status::Differs
    };
    Finding::new(item, format!(">= {wanted}"), shown, status)
}

/// The values a word want accepts, in preference order.
fn choices(want: &Want) -> &[String] {
    match want {
        Want::Exact(v) => std::slice::from_ref(v),
        Want::OneOf(vs) => vs,
        Want::Range { .. } => &[],
    }
}

fn choice_finding(item: String, want: &Want, actual: Option<&Choice>, path: PathBuf) -> Finding {
    let Some(actual) = actual else {
        return Finding::unavailable(item, want.to_string());
    };
    if want.matches(&actual.active) {
        return Finding::new(item, want.to_string(), actual.active.clone(), Status::Ok);
    }
    match choices(want).iter().find(|c| actual.available.contains(c)) {
        Some(value) => Finding::new(
            item,
            want.to_string(),
            actual.active.clone(),
            Status::Differs,
        )
        .with_fix(vec![Write {
            path,
            value: value.clone(),
        }]),
        None => Finding::new(
            item,
            want.to_string(),
            format!(
                "{} (offers only: {})",
                actual.active,
                actual.available.join(" ")
            ),
            Status::Differs,
        ),
    }
}

fn governor_finding(want: &Want, governors: &[(String, String)]) -> Finding {
    const ITEM: &str = "cpu.governor";
    if governors.is_empty() {
        return Finding::new(
            ITEM,
            want.to_string(),
            "not available (no cpufreq)",
            Status::Unavailable,
        );
    }
    // "performance x14, powersave x2" in order of first appearance.
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, g) in governors {
        match counts.iter_mut().find(|(name, _)| name == g) {
            Some((_, n)) => *n += 1,
            None => counts.push((g, 1)),
        }
    }
    let shown = counts
        .iter()
        .map(|(g, n)| format!("{g} x{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let fix: Vec<Write> = governors
        .iter()
        .filter(|(_, g)| !want.matches(g))
        .map(|(cpu, g)| Write {
            path: governor_rel_path(cpu),
            value: want.value_to_write(g),
        })
        .collect();
    if fix.is_empty() {
        Finding::new(ITEM, want.to_string(), shown, Status::Ok)
    } else {
        Finding::new(ITEM, want.to_string(), shown, Status::Differs).with_fix(fix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{BlockState, Rlimits};
    use std::collections::BTreeMap;

    fn lim(soft: Rlim, hard: Rlim) -> Rlimit {
        Rlimit { soft, hard }
    }

    fn base() -> HostState {
        HostState {
            sysctls: BTreeMap::new(),
            rlimits: Rlimits {
                nofile: lim(Rlim::Finite(1024), Rlim::Finite(524288)),
                memlock_bytes: lim(Rlim::Finite(8 << 20), Rlim::Finite(8 << 20)),
            },
            block: Vec::new(),
            transparent_hugepage: None,
            cpu_governors: Vec::new(),
        }
    }

    fn sysctls(list: &[(&str, Option<&str>)]) -> HostState {
        HostState {
            sysctls: list
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
            ..base()
        }
    }

    /// A finding as `(item, wanted, actual, status, [(fix path, fix value)])`.
    type Row<'a> = (&'a str, &'a str, &'a str, Status, &'a [(&'a str, &'a str)]);

    fn check(profile: &str, state: HostState, expected: &[Row]) {
        let profile = KernelProfile::parse(profile).unwrap();
        let got = super::check(&profile, &state);
        let expected: Vec<Finding> = expected
            .iter()
            .map(|(item, wanted, actual, status, fix)| {
                Finding::new(*item, *wanted, *actual, *status).with_fix(
                    fix.iter()
                        .map(|(p, v)| Write {
                            path: PathBuf::from(p),
                            value: v.to_string(),
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(got, expected);
    }

    use Status::{Differs, Ok as Fine, Unavailable};

    #[test]
    fn sysctl_findings() {
        check("", base(), &[]);
        check(
            "[sysctl]\n\"net.core.somaxconn\" = { at_least = 4096 }\n\"vm.swappiness\" = { at_most = 1 }\n\"kernel.numa_balancing\" = 0\n\"net.ipv4.tcp_rmem\" = \"4096 131072 67108864\"\n\"fs.file-max\" = { at_least = 2097152 }",
            sysctls(&[
                ("net.core.somaxconn", Some("4096")),
                ("vm.swappiness", Some("60")),
                ("kernel.numa_balancing", None),
                ("net.ipv4.tcp_rmem", Some("4096\t131072\t6291456")),
                ("fs.file-max", Some("9223372036854775807")),
            ]),
            &[
                ("fs.file-max", ">= 2097152", "9223372036854775807", Fine, &[]),
                ("kernel.numa_balancing", "0", "not available", Unavailable, &[]),
                ("net.core.somaxconn", ">= 4096", "4096", Fine, &[]),
                (
                    "net.ipv4.tcp_rmem",
                    "4096 131072 67108864",
                    "4096 131072 6291456",
                    Differs,
                    &[("proc/sys/net/ipv4/tcp_rmem", "4096 131072 67108864")],
                ),
                ("vm.swappiness", "<= 1", "60", Differs, &[("proc/sys/vm/swappiness", "1")]),
            ],
        );
        check(
            "[sysctl]\n\"net.core.somaxconn\" = { at_least = 4096 }\n\"kernel.io_uring_disabled\" = [0, 1]",
            sysctls(&[("net.core.somaxconn", Some("128")), ("kernel.io_uring_disabled", Some("2"))]),
            &[
                ("kernel.io_uring_disabled", "0|1", "2", Differs, &[("proc/sys/kernel/io_uring_disabled", "0")]),
                ("net.core.somaxconn", ">= 4096", "128", Differs, &[("proc/sys/net/core/somaxconn", "4096")]),
            ],
        );
    }

    #[test]
    fn limit_findings() {
        let limits = |nofile: Rlimit, memlock_bytes: Rlimit| HostState {
            rlimits: Rlimits {
                nofile,
                memlock_bytes,
            },
            ..base()
        };
        let p = "[limits]\nnofile = 1048576\nmemlock_bytes = \"unlimited\"";
        check(
            p,
            base(),
            &[
                (
                    "limits.nofile",
                    ">= 1048576",
                    "1024 (hard 524288)",
                    Differs,
                    &[],
                ),
                (
                    "limits.memlock_bytes",
                    ">= unlimited",
                    "8388608 (hard 8388608)",
                    Differs,
                    &[],
                ),
            ],
        );
        check(
            p,
            limits(
                lim(Rlim::Finite(1048576), Rlim::Finite(1048576)),
                lim(Rlim::Unlimited, Rlim::Unlimited),
            ),
            &[
                (
                    "limits.nofile",
                    ">= 1048576",
                    "1048576 (hard 1048576)",
                    Fine,
                    &[],
                ),
                (
                    "limits.memlock_bytes",
                    ">= unlimited",
                    "unlimited (hard unlimited)",
                    Fine,
                    &[],
                ),
            ],
        );
        check(
            "[limits]\nmemlock_bytes = 8388608",
            limits(
                lim(Rlim::Finite(1), Rlim::Finite(1)),
                lim(Rlim::Unlimited, Rlim::Unlimited),
            ),
            &[(
                "limits.memlock_bytes",
                ">= 8388608",
                "unlimited (hard unlimited)",
                Fine,
                &[],
            )],
        );
    }

    fn dev(name: &str, scheduler: &str, read_ahead_kb: Option<&str>) -> BlockState {
        BlockState {
            name: name.into(),
            scheduler: Choice::parse(scheduler),
            read_ahead_kb: read_ahead_kb.map(str::to_string),
        }
    }

    #[test]
    fn block_findings() {
        let p = "[block]\nscheduler = \"none\"\nread_ahead_kb = 128";
        check(
            p,
            base(),
            &[(
                "block.nvme*",
                "scheduler none, read_ahead_kb 128",
                "no matching device",
                Unavailable,
                &[],
            )],
        );
        check(
            p,
            HostState {
                block: vec![
                    dev("nvme0n1", "[none] mq-deadline", Some("128")),
                    dev("nvme1n1", "none [mq-deadline] kyber", Some("4096")),
                    dev("nvme2n1", "[mq-deadline] kyber", None),
                    dev("nvme3n1", "", Some("128")),
                ],
                ..base()
            },
            &[
                ("block.nvme0n1.scheduler", "none", "none", Fine, &[]),
                ("block.nvme0n1.read_ahead_kb", "128", "128", Fine, &[]),
                (
                    "block.nvme1n1.scheduler",
                    "none",
                    "mq-deadline",
                    Differs,
                    &[("sys/block/nvme1n1/queue/scheduler", "none")],
                ),
                (
                    "block.nvme1n1.read_ahead_kb",
                    "128",
                    "4096",
                    Differs,
                    &[("sys/block/nvme1n1/queue/read_ahead_kb", "128")],
                ),
                (
                    "block.nvme2n1.scheduler",
                    "none",
                    "mq-deadline (offers only: mq-deadline kyber)",
                    Differs,
                    &[],
                ),
                (
                    "block.nvme2n1.read_ahead_kb",
                    "128",
                    "not available",
                    Unavailable,
                    &[],
                ),
                (
                    "block.nvme3n1.scheduler",
                    "none",
                    "not available",
                    Unavailable,
                    &[],
                ),
                ("block.nvme3n1.read_ahead_kb", "128", "128", Fine, &[]),
            ],
        );
        // A choice list writes the first one the device offers.
        check(
            "[block]\ndevices = [\"vd*\"]\nscheduler = [\"none\", \"mq-deadline\"]",
            HostState {
                block: vec![
                    dev("vda", "[mq-deadline] none", None),
                    dev("vdb", "[bfq] mq-deadline", None),
                ],
                ..base()
            },
            &[
                (
                    "block.vda.scheduler",
                    "none|mq-deadline",
                    "mq-deadline",
                    Fine,
                    &[],
                ),
                (
                    "block.vdb.scheduler",
                    "none|mq-deadline",
                    "bfq",
                    Differs,
                    &[("sys/block/vdb/queue/scheduler", "mq-deadline")],
                ),
            ],
        );
    }

    #[test]
    fn mm_and_cpu_findings() {
        let p = "[mm]\ntransparent_hugepage = \"never\"\n[cpu]\ngovernor = \"performance\"";
        check(
            p,
            base(),
            &[
                (
                    "mm.transparent_hugepage",
                    "never",
                    "not available",
                    Unavailable,
                    &[],
                ),
                (
                    "cpu.governor",
                    "performance",
                    "not available (no cpufreq)",
                    Unavailable,
                    &[],
                ),
            ],
        );
        let govs = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(c, g)| (c.to_string(), g.to_string()))
                .collect()
        };
        check(
            p,
            HostState {
                transparent_hugepage: Choice::parse("always [madvise] never"),
                cpu_governors: govs(&[
                    ("cpu0", "performance"),
                    ("cpu1", "powersave"),
                    ("cpu2", "performance"),
                    ("cpu3", "powersave"),
                ]),
                ..base()
            },
            &[
                (
                    "mm.transparent_hugepage",
                    "never",
                    "madvise",
                    Differs,
                    &[("sys/kernel/mm/transparent_hugepage/enabled", "never")],
                ),
                (
                    "cpu.governor",
                    "performance",
                    "performance x2, powersave x2",
                    Differs,
                    &[
                        (
                            "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                            "performance",
                        ),
                        (
                            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
                            "performance",
                        ),
                    ],
                ),
            ],
        );
        check(
            "[mm]\ntransparent_hugepage = [\"madvise\", \"never\"]\n[cpu]\ngovernor = [\"performance\", \"schedutil\"]",
            HostState {
                transparent_hugepage: Choice::parse("always madvise [never]"),
                cpu_governors: govs(&[("cpu0", "schedutil"), ("cpu1", "performance")]),
                ..base()
            },
            &[
                ("mm.transparent_hugepage", "madvise|never", "never", Fine, &[]),
                ("cpu.governor", "performance|schedutil", "schedutil x1, performance x1", Fine, &[]),
            ],
        );
    }

    #[test]
    fn summary_counts() {
        let f = |s| Finding::new("x", "y", "z", s);
        assert_eq!(summary(&[]), (0, 0, 0));
        assert_eq!(
            summary(&[f(Fine), f(Differs), f(Unavailable), f(Fine)]),
            (2, 1, 1)
        );
    }
}
