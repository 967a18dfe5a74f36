//! Reading a host's actual state: sysctls under `proc/sys`, block queue settings under
//! `sys/block/<dev>/queue`, transparent huge pages, CPU frequency governors, all
//! relative to a configurable root directory (`/` on a real host, a temporary tree in
//! tests), plus this process's resource limits (`getrlimit`, not under the root).
//!
//! Invariant: a file that does not exist is "not available" (`None`), never an error:
//! VMs have no cpufreq, non-NUMA kernels no `kernel.numa_balancing`, kernels before 6.6
//! no `kernel.io_uring_disabled`. Any other IO error, or a selector file
//! (`[active] other`) that cannot be parsed, is a [`HostError`] naming the path.
//! Invariant: only paths under the root are read; names that reach a path come from a
//! validated profile or from directory listings of the root.

use crate::profile::{sysctl_rel_path, KernelProfile, Rlim};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: cannot find the active choice in {content:?}")]
    Malformed { path: PathBuf, content: String },
    #[error("getrlimit({resource}): {source}")]
    Rlimit {
        resource: &'static str,
        source: io::Error,
    },
}

/// A sysfs selector file such as `queue/scheduler` (`mq-deadline kyber [none]`) or
/// `transparent_hugepage/enabled` (`always [madvise] never`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub active: String,
    /// Every choice offered, the active one included, in file order.
    pub available: Vec<String>,
}

impl Choice {
    /// Parses a selector file: the active choice is the one in `[brackets]`; a file with
    /// a single word and no brackets (older kernels' `none`) has that word active.
    pub fn parse(content: &str) -> Option<Choice> {
        let mut active = None;
        let mut available = Vec::new();
        for word in content.split_whitespace() {
            match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                Some(w) if !w.is_empty() => {
                    if active.replace(w.to_string()).is_some() {
                        return None;
                    }
                    available.push(w.to_string());
                }
                Some(_) => return None,
                None => available.push(word.to_string()),
            }
        }
        let active = match (active, available.len()) {
            (Some(a), _) => a,
            (None, 1) => available[0].clone(),
            (None, _) => return None,
        };
        Some(Choice { active, available })
    }
}

/// Soft and hard value of one resource limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rlimit {
    pub soft: Rlim,
    pub hard: Rlim,
}

/// The limits a profile can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rlimits {
    pub nofile: Rlimit,
    /// Bytes.
    pub memlock_bytes: Rlimit,
}

/// One block device's queue settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockState {
    pub name: String,
    pub scheduler: Option<Choice>,
    pub read_ahead_kb: Option<String>,
}

/// What a profile's check needs to know about a host. Built by [`Host::read_state`]
/// or by hand in tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostState {
    /// Every sysctl the profile names; `None` where the file does not exist.
    pub sysctls: BTreeMap<String, Option<String>>,
    pub rlimits: Rlimits,
    /// The devices under `sys/block` matching the profile's patterns, in name order.
    pub block: Vec<BlockState>,
    pub transparent_hugepage: Option<Choice>,
    /// `(cpuN, governor)` in CPU order; empty where cpufreq is absent (VMs).
    pub cpu_governors: Vec<(String, String)>,
}

/// A host's filesystem view, rooted at `root`.
#[derive(Clone, Debug)]
pub struct Host {
    root: PathBuf,
}

impl Host {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Host { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads a file under the root, trimmed; `None` if it does not exist.
    pub fn read(&self, rel: &Path) -> Result<Option<String>, HostError> {
        let path = self.root.join(rel);
        match std::fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(HostError::Io { path, source }),
        }
    }

    fn read_choice(&self, rel: &Path) -> Result<Option<Choice>, HostError> {
        match self.read(rel)? {
            None => Ok(None),
            Some(content) => {
                Choice::parse(&content)
                    .map(Some)
                    .ok_or_else(|| HostError::Malformed {
                        path: self.root.join(rel),
                        content,
                    })
            }
        }
    }

    /// Names of the entries of a directory under the root, sorted; empty if absent.
    fn list(&self, rel: &Path) -> Result<Vec<String>, HostError> {
        let path = self.root.join(rel);
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(HostError::Io { path, source }),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| HostError::Io {
                path: path.clone(),
                source,
            })?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// A sysctl by dotted name (validated by the profile).
    pub fn sysctl(&self, name: &str) -> Result<Option<String>, HostError> {
        self.read(&sysctl_rel_path(name))
    }

    /// Block devices under `sys/block`, sorted.
    pub fn block_devices(&self) -> Result<Vec<String>, HostError> {
        self.list(Path::new("sys/block"))
    }

    pub fn block_state(&self, dev: &str) -> Result<BlockState, HostError> {
        let queue = Path::new("sys/block").join(dev).join("queue");
        Ok(BlockState {
            name: dev.to_string(),
            scheduler: self.read_choice(&queue.join("scheduler"))?,
            read_ahead_kb: self.read(&queue.join("read_ahead_kb"))?,
        })
    }

    pub fn transparent_hugepage(&self) -> Result<Option<Choice>, HostError> {
        self.read_choice(Path::new(THP_ENABLED_PATH))
    }

    /// `(cpuN, governor)` for every `cpu<N>` with a cpufreq governor, in CPU order.
    pub fn cpu_governors(&self) -> Result<Vec<(String, String)>, HostError> {
        let mut cpus: Vec<(u32, String)> = self
            .list(Path::new(CPU_DIR))?
            .into_iter()
            .filter_map(|n| {
                n.strip_prefix("cpu")
                    .and_then(|i| i.parse().ok())
                    .map(|i| (i, n))
            })
            .collect();
        cpus.sort();
        let mut out = Vec::new();
        for (_, cpu) in cpus {
            if let Some(g) = self.read(&governor_rel_path(&cpu))? {
                out.push((cpu, g));
            }
        }
        Ok(out)
    }

    /// Reads everything `profile` checks. Rlimits are this process's.
    pub fn read_state(&self, profile: &KernelProfile) -> Result<HostState, HostError> {
        let mut sysctls = BTreeMap::new();
        for s in &profile.sysctl {
            sysctls.insert(s.name.clone(), self.sysctl(&s.name)?);
        }
        let mut block = Vec::new();
        if let Some(b) = &profile.block {
            for dev in self.block_devices()? {
                if b.matches_device(&dev) {
                    block.push(self.block_state(&dev)?);
                }
            }
        }
        let transparent_hugepage = match profile.transparent_hugepage {
            Some(_) => self.transparent_hugepage()?,
            None => None,
        };
        let cpu_governors = match profile.cpu_governor {
            Some(_) => self.cpu_governors()?,
            None => Vec::new(),
        };
        Ok(HostState {
            sysctls,
            rlimits: rlimits()?,
            block,
            transparent_hugepage,
            cpu_governors,
        })
    }
}

/// Relative path of the THP mode selector.
pub const THP_ENABLED_PATH: &str = "sys/kernel/mm/transparent_hugepage/enabled";
const CPU_DIR: &str = "sys/devices/system/cpu";

/// Relative path of one CPU's governor (`cpu` is `cpu<N>`).
pub fn governor_rel_path(cpu: &str) -> PathBuf {
    Path::new(CPU_DIR)
        .join(cpu)
        .join("cpufreq/scaling_governor")
}

/// Relative path of a block device's queue attribute.
pub fn block_rel_path(dev: &str, attr: &str) -> PathBuf {
    Path::new("sys/block").join(dev).join("queue").join(attr)
}

fn rlim_from(v: libc::rlim_t) -> Rlim {
    if v == libc::RLIM_INFINITY {
        Rlim::Unlimited
    } else {
        Rlim::Finite(v)
    }
}

/// `getrlimit(which)`; a macro so that `which` keeps the libc's own resource type
/// (`__rlimit_resource_t` on glibc, `c_int` on musl).
macro_rules! getrlimit {
    ($name:literal, $which:expr) => {{
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit for the duration of the call.
        if unsafe { libc::getrlimit($which, &mut lim) } == 0 {
            Ok(Rlimit {
                soft: rlim_from(lim.rlim_cur),
                hard: rlim_from(lim.rlim_max),
            })
        } else {
            Err(HostError::Rlimit {
                resource: $name,
                source: io::Error::last_os_error(),
            })
        }
    }};
}

/// This process's RLIMIT_NOFILE and RLIMIT_MEMLOCK.
pub fn rlimits() -> Result<Rlimits, HostError> {
    Ok(Rlimits {
        nofile: getrlimit!("RLIMIT_NOFILE", libc::RLIMIT_NOFILE)?,
        memlock_bytes: getrlimit!("RLIMIT_MEMLOCK", libc::RLIMIT_MEMLOCK)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::KernelProfile;

    use crate::fake_root::tree;

    #[test]
    fn parses_selector_files() {
        fn check(input: &str, expected: Option<(&str, &[&str])>) {
            let expected = expected.map(|(a, av)| Choice {
                active: a.to_string(),
                available: av.iter().map(|s| s.to_string()).collect(),
            });
            assert_eq!(Choice::parse(input), expected, "{input:?}");
        }
        check(
            "mq-deadline kyber [none]\n",
            Some(("none", &["mq-deadline", "kyber", "none"])),
        );
        check(
            "[none] mq-deadline kyber bfq",
            Some(("none", &["none", "mq-deadline", "kyber", "bfq"])),
        );
        check(
            "none [mq-deadline] kyber bfq",
            Some(("mq-deadline", &["none", "mq-deadline", "kyber", "bfq"])),
        );
        check(
            "always [madvise] never",
            Some(("madvise", &["always", "madvise", "never"])),
        );
        check("[never]", Some(("never", &["never"])));
        check("none", Some(("none", &["none"])));
        check("none mq-deadline", None);
        check("[none] [kyber]", None);
        check("[] none", None);
        check("", None);
    }

    /// `(fake tree, profile, expected state without rlimits)`.
    fn check(files: &[(&str, &str)], profile: &str, expected: HostState) {
        let dir = tree(files);
        let profile = KernelProfile::parse(profile).unwrap();
        let got = Host::new(dir.path()).read_state(&profile).unwrap();
        let expected = HostState {
            rlimits: got.rlimits,
            ..expected
        };
        assert_eq!(got, expected, "files {files:?}");
    }

    fn empty() -> HostState {
        HostState {
            sysctls: BTreeMap::new(),
            rlimits: rlimits().unwrap(),
            block: Vec::new(),
            transparent_hugepage: None,
            cpu_governors: Vec::new(),
        }
    }

    fn choice(s: &str) -> Option<Choice> {
        Choice::parse(s)
    }

    #[test]
    fn reads_fake_trees() {
        // Nothing asked, nothing read.
        check(&[("proc/sys/vm/swappiness", "60\n")], "", empty());
        // Sysctls: trimmed; absent ones are None.
        check(
            &[
                ("proc/sys/vm/swappiness", "60\n"),
                ("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n"),
                ("proc/sys/fs/aio-max-nr", "65536\n"),
            ],
            "[sysctl]\n\"vm.swappiness\" = 1\n\"net.ipv4.tcp_rmem\" = \"1 2 3\"\n\"fs.aio-max-nr\" = 1\n\"kernel.numa_balancing\" = 0",
            HostState {
                sysctls: [
                    ("fs.aio-max-nr", Some("65536")),
                    ("kernel.numa_balancing", None),
                    ("net.ipv4.tcp_rmem", Some("4096\t131072\t6291456")),
                    ("vm.swappiness", Some("60")),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
                ..empty()
            },
        );
        // Block devices: only matching ones, sorted; missing files are None.
        let block_tree: &[(&str, &str)] = &[
            (
                "sys/block/nvme1n1/queue/scheduler",
                "[none] mq-deadline kyber bfq\n",
            ),
            ("sys/block/nvme1n1/queue/read_ahead_kb", "128\n"),
            (
                "sys/block/nvme0n1/queue/scheduler",
                "none [mq-deadline] kyber bfq\n",
            ),
            ("sys/block/nvme0n1/queue/read_ahead_kb", "4096\n"),
            ("sys/block/vda/queue/scheduler", "none [mq-deadline]\n"),
            ("sys/block/zram0/queue/read_ahead_kb", "128\n"),
        ];
        check(
            block_tree,
            "[block]\nscheduler = \"none\"",
            HostState {
                block: vec![
                    BlockState {
                        name: "nvme0n1".into(),
                        scheduler: choice("none [mq-deadline] kyber bfq"),
                        read_ahead_kb: Some("4096".into()),
                    },
                    BlockState {
                        name: "nvme1n1".into(),
                        scheduler: choice("[none] mq-deadline kyber bfq"),
                        read_ahead_kb: Some("128".into()),
                    },
                ],
                ..empty()
            },
        );
        check(
            block_tree,
            "[block]\ndevices = [\"zram*\", \"vda\"]",
            HostState {
                block: vec![
                    BlockState {
                        name: "vda".into(),
                        scheduler: choice("none [mq-deadline]"),
                        read_ahead_kb: None,
                    },
                    BlockState {
                        name: "zram0".into(),
                        scheduler: None,
                        read_ahead_kb: Some("128".into()),
                    },
                ],
                ..empty()
            },
        );
        // No sys/block at all: no devices.
        check(&[], "[block]\nscheduler = \"none\"", empty());
        // THP.
        check(
            &[(THP_ENABLED_PATH, "always [madvise] never\n")],
            "[mm]\ntransparent_hugepage = \"never\"",
            HostState {
                transparent_hugepage: choice("always [madvise] never"),
                ..empty()
            },
        );
        check(&[], "[mm]\ntransparent_hugepage = \"never\"", empty());
        // CPU governors: numeric order; `cpufreq` and `cpuidle` dirs are not CPUs; a CPU
        // without cpufreq is skipped; a VM has none at all.
        check(
            &[
                (
                    "sys/devices/system/cpu/cpu10/cpufreq/scaling_governor",
                    "powersave\n",
                ),
                (
                    "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
                    "performance\n",
                ),
                ("sys/devices/system/cpu/cpu3/online", "1\n"),
                ("sys/devices/system/cpu/cpufreq/boost", "1\n"),
                ("sys/devices/system/cpu/cpuidle/current_driver", "none\n"),
            ],
            "[cpu]\ngovernor = \"performance\"",
            HostState {
                cpu_governors: vec![
                    ("cpu2".into(), "performance".into()),
                    ("cpu10".into(), "powersave".into()),
                ],
                ..empty()
            },
        );
        check(
            &[("sys/devices/system/cpu/cpu0/online", "1")],
            "[cpu]\ngovernor = \"performance\"",
            empty(),
        );
    }

    #[test]
    fn malformed_selector_is_an_error_naming_the_path() {
        let dir = tree(&[(THP_ENABLED_PATH, "always madvise never\n")]);
        let err = Host::new(dir.path()).transparent_hugepage().unwrap_err();
        assert!(
            matches!(&err, HostError::Malformed { path, .. } if path.ends_with(THP_ENABLED_PATH)),
            "{err}"
        );
    }

    #[test]
    fn unreadable_file_is_an_error_naming_the_path() {
        // A directory where a sysctl file should be: reading fails with EISDIR.
        let dir = tree(&[("proc/sys/vm/swappiness/x", "")]);
        let err = Host::new(dir.path()).sysctl("vm.swappiness").unwrap_err();
        assert!(err.to_string().contains("proc/sys/vm/swappiness"), "{err}");
    }

    #[test]
    fn rlimits_are_consistent() {
        let r = rlimits().unwrap();
        assert!(r.nofile.soft <= r.nofile.hard);
        assert!(r.memlock_bytes.soft <= r.memlock_bytes.hard);
        assert!(matches!(r.nofile.soft, Rlim::Finite(n) if n >= 3));
    }

    #[test]
    fn the_real_host_reads_without_error() {
        let profile = KernelProfile::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("kernel/throughput.toml"),
        )
        .unwrap();
        let state = Host::new("/").read_state(&profile).unwrap();
        assert_eq!(state.sysctls.len(), profile.sysctl.len());
    }
}
