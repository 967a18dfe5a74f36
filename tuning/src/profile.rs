//! Kernel/host profiles: the TOML files in `tuning/kernel/` (`throughput.toml`,
//! `dev.toml`) and their typed form, [`KernelProfile`].
//!
//! A profile has five optional sections: `[sysctl]` (dotted names, quoted in TOML),
//! `[limits]` (`nofile`, `memlock_bytes`), `[block]` (`devices`, `scheduler`,
//! `read_ahead_kb`), `[mm]` (`transparent_hugepage`) and `[cpu]` (`governor`). A wanted
//! value is written as
//! - a scalar: exactly this value (strings compare with whitespace collapsed, so
//!   `"4096 131072 67108864"` matches the kernel's tab-separated `tcp_rmem`);
//! - an array: any one of these (the first is what `apply` writes);
//! - `{ at_least = N }`, `{ at_most = N }` or both: an integer bound (`apply` writes the
//!   bound that is crossed).
//!
//! The document is read with serde + toml into a `toml::Table`, then walked by hand so
//! that every error is typed and names the key it is about.
//!
//! Invariant: every key of a profile is known, or parsing fails with
//! [`ProfileError::UnknownKey`] naming it as `section.key`: a misspelt setting is never
//! silently skipped.
//! Invariant: a sysctl name is `[A-Za-z0-9_-]+` components joined by single dots, so it
//! maps to a path under `proc/sys` that cannot leave the host root; block device
//! patterns contain no `/` for the same reason.
//! Invariant: a range has at least one bound and `at_least <= at_most`; a choice list is
//! non-empty.

use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml::{Table, Value};

/// Why a profile could not be loaded. Every variant after `Read`/`Toml` names its key.
#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile is not valid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("unknown key `{key}`")]
    UnknownKey { key: String },
    #[error("`{key}`: expected {expected}")]
    WrongType { key: String, expected: &'static str },
    #[error("`{key}`: {reason}")]
    BadValue { key: String, reason: String },
}

/// What a profile wants for one setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// Exactly this value (whitespace-normalised).
    Exact(String),
    /// Any one of these values; the first is the one to write.
    OneOf(Vec<String>),
    /// An integer within the bounds (each inclusive).
    Range {
        at_least: Option<i128>,
        at_most: Option<i128>,
    },
}

impl Want {
    /// Whether `actual` (as read from the host) satisfies this want.
    pub fn matches(&self, actual: &str) -> bool {
        let actual = normalize(actual);
        match self {
            Want::Exact(v) => *v == actual,
            Want::OneOf(vs) => vs.contains(&actual),
            Want::Range { at_least, at_most } => match actual.parse::<i128>() {
                Ok(n) => at_least.map_or(true, |lo| n >= lo) && at_most.map_or(true, |hi| n <= hi),
                Err(_) => false,
            },
        }
    }

    /// The value `apply` writes to move `actual` into this want (`actual` is used only
    /// by ranges, to pick the bound that is crossed).
    pub fn value_to_write(&self, actual: &str) -> String {
        match self {
            Want::Exact(v) => v.clone(),
            // Parsed choice lists are never empty.
            Want::OneOf(vs) => vs.first().cloned().unwrap_or_default(),
            Want::Range { at_least, at_most } => {
                let n = normalize(actual).parse::<i128>().ok();
                match (at_least, at_most, n) {
                    (Some(lo), _, Some(n)) if n < *lo => lo.to_string(),
                    (_, Some(hi), Some(n)) if n > *hi => hi.to_string(),
                    (Some(lo), _, _) => lo.to_string(),
                    (None, Some(hi), _) => hi.to_string(),
                    (None, None, _) => normalize(actual),
                }
            }
        }
    }
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Want::Exact(v) => f.write_str(v),
            Want::OneOf(vs) => f.write_str(&vs.join("|")),
            Want::Range {
                at_least: Some(lo),
                at_most: Some(hi),
            } => write!(f, ">= {lo}, <= {hi}"),
            Want::Range {
                at_least: Some(lo),
                at_most: None,
            } => write!(f, ">= {lo}"),
            Want::Range {
                at_least: None,
                at_most: Some(hi),
            } => write!(f, "<= {hi}"),
            Want::Range {
                at_least: None,
                at_most: None,
            } => f.write_str("any"),
        }
    }
}

/// One `[sysctl]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysctl {
    /// Dotted name, e.g. `net.core.somaxconn` (validated, see the module invariants).
    pub name: String,
    pub want: Want,
}

impl Sysctl {
    /// The file holding this sysctl, relative to the host root (`proc/sys/net/core/...`).
    pub fn rel_path(&self) -> PathBuf {
        sysctl_rel_path(&self.name)
    }
}

/// Path of a (validated) sysctl name relative to the host root.
pub fn sysctl_rel_path(name: &str) -> PathBuf {
    let mut p = PathBuf::from("proc/sys");
    p.extend(name.split('.'));
    p
}

/// A resource limit value: a number or `"unlimited"` (`RLIM_INFINITY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rlim {
    Finite(u64),
    Unlimited,
}

impl fmt::Display for Rlim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rlim::Finite(n) => write!(f, "{n}"),
            Rlim::Unlimited => f.write_str("unlimited"),
        }
    }
}

/// `[limits]`: soft limits the broker's process needs at least.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_NOFILE, a count of file descriptors (never unlimited).
    pub nofile: Option<u64>,
    /// RLIMIT_MEMLOCK in bytes.
    pub memlock_bytes: Option<Rlim>,
}

/// `[block]`: queue settings of the block devices whose names match `devices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Name patterns under `/sys/block`: an exact name or a prefix ending in `*`.
    pub devices: Vec<String>,
    pub scheduler: Option<Want>,
    pub read_ahead_kb: Option<Want>,
}

/// Default `[block] devices`: NVMe namespaces.
pub const BLOCK_DEVICES_DEFAULT: &str = "nvme*";

impl Block {
    /// Whether a `/sys/block` entry is one of this section's devices.
    pub fn matches_device(&self, name: &str) -> bool {
        self.devices.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        })
    }
}

/// The whole profile. Absent sections are `None`/empty and are not checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelProfile {
    pub description: Option<String>,
    /// In name order.
    pub sysctl: Vec<Sysctl>,
    pub limits: Limits,
    pub block: Option<Block>,
    /// `[mm] transparent_hugepage`: always | madvise | never.
    pub transparent_hugepage: Option<Want>,
    /// `[cpu] governor`.
    pub cpu_governor: Option<Want>,
}

const THP_MODES: &[&str] = &["always", "madvise", "never"];

impl KernelProfile {
    /// Reads and parses a profile file.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses a profile from TOML text.
    pub fn parse(text: &str) -> Result<Self, ProfileError> {
        let mut top: Table = toml::from_str(text)?;
        let mut profile = KernelProfile::default();
        if let Some(v) = top.remove("description") {
            profile.description = Some(string("description", &v)?);
        }
        if let Some(v) = top.remove("sysctl") {
            for (name, value) in table("sysctl", v)? {
                let key = format!("sysctl.{name}");
                check_sysctl_name(&key, &name)?;
                let want = want_any(&key, value)?;
                profile.sysctl.push(Sysctl { name, want });
            }
        }
        if let Some(v) = top.remove("limits") {
            let mut t = table("limits", v)?;
            if let Some(v) = t.remove("nofile") {
                profile.limits.nofile = Some(positive("limits.nofile", &v)?);
            }
            if let Some(v) = t.remove("memlock_bytes") {
                profile.limits.memlock_bytes = Some(rlim("limits.memlock_bytes", &v)?);
            }
            no_more("limits", t)?;
        }
        if let Some(v) = top.remove("block") {
            let mut t = table("block", v)?;
            let devices = match t.remove("devices") {
                Some(v) => words("block.devices", v)?,
                None => vec![BLOCK_DEVICES_DEFAULT.to_string()],
            };
            for d in &devices {
                let body = d.strip_suffix('*').unwrap_or(d);
                if body.is_empty() || body.contains(['*', '/']) {
                    return Err(bad(
                        "block.devices",
                        format!("bad device pattern {d:?} (a name, or a prefix ending in `*`)"),
                    ));
                }
            }
            let scheduler = t
                .remove("scheduler")
                .map(|v| want_word("block.scheduler", v))
                .transpose()?;
            let read_ahead_kb = t
                .remove("read_ahead_kb")
                .map(|v| want_int("block.read_ahead_kb", v))
                .transpose()?;
            no_more("block", t)?;
            profile.block = Some(Block {
                devices,
                scheduler,
                read_ahead_kb,
            });
        }
        if let Some(v) = top.remove("mm") {
            let mut t = table("mm", v)?;
            if let Some(v) = t.remove("transparent_hugepage") {
                let key = "mm.transparent_hugepage";
                let want = want_word(key, v)?;
                let modes = match &want {
                    Want::Exact(m) => std::slice::from_ref(m),
                    Want::OneOf(ms) => ms.as_slice(),
                    Want::Range { .. } => &[],
                };
                if let Some(m) = modes.iter().find(|m| !THP_MODES.contains(&m.as_str())) {
                    return Err(bad(
                        key,
                        format!("{m:?} is not one of always, madvise, never"),
                    ));
                }
                profile.transparent_hugepage = Some(want);
            }
            no_more("mm", t)?;
        }
        if let Some(v) = top.remove("cpu") {
            let mut t = table("cpu", v)?;
            profile.cpu_governor = t
                .remove("governor")
                .map(|v| want_word("cpu.governor", v))
                .transpose()?;
            no_more("cpu", t)?;
        }
        no_more("", top)?;
        Ok(profile)
    }
}

/// Collapses runs of whitespace to one space and trims (how values are compared).
pub fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn bad(key: &str, reason: impl Into<String>) -> ProfileError {
    ProfileError::BadValue {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn wrong(key: &str, expected: &'static str) -> ProfileError {
    ProfileError::WrongType {
        key: key.to_string(),
        expected,
    }
}

fn no_more(section: &str, t: Table) -> Result<(), ProfileError> {
    match t.keys().next() {
        None => Ok(()),
        Some(k) if section.is_empty() => Err(ProfileError::UnknownKey { key: k.clone() }),
        Some(k) => Err(ProfileError::UnknownKey {
            key: format!("{section}.{k}"),
        }),
    }
}

fn table(key: &str, v: Value) -> Result<Table, ProfileError> {
    match v {
        Value::Table(t) => Ok(t),
        _ => Err(wrong(key, "a table")),
    }
}

fn string(key: &str, v: &Value) -> Result<String, ProfileError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| wrong(key, "a string"))
}

fn positive(key: &str, v: &Value) -> Result<u64, ProfileError> {
    match v.as_integer() {
        Some(n) if n > 0 => Ok(n as u64),
        Some(_) => Err(bad(key, "must be positive")),
        None => Err(wrong(key, "a positive integer")),
    }
}

fn rlim(key: &str, v: &Value) -> Result<Rlim, ProfileError> {
    match v {
        Value::String(s) if s == "unlimited" => Ok(Rlim::Unlimited),
        Value::Integer(_) => positive(key, v).map(Rlim::Finite),
        _ => Err(wrong(key, "a positive integer or \"unlimited\"")),
    }
}

fn check_sysctl_name(key: &str, name: &str) -> Result<(), ProfileError> {
    let ok = name.split('.').count() >= 2
        && name.split('.').all(|c| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(bad(
            key,
            "not a sysctl name (dotted words of [A-Za-z0-9_-])",
        ))
    }
}

/// A scalar as the string the kernel would show: integers in decimal, strings
/// whitespace-normalised.
fn scalar(key: &str, v: &Value) -> Result<String, ProfileError> {
    match v {
        Value::Integer(n) => Ok(n.to_string()),
        Value::String(s) if !normalize(s).is_empty() => Ok(normalize(s)),
        Value::String(_) => Err(bad(key, "empty value")),
        _ => Err(wrong(
            key,
            "an integer, a string, an array of them or { at_least, at_most }",
        )),
    }
}

fn words(key: &str, v: Value) -> Result<Vec<String>, ProfileError> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(vec![s.trim().to_string()]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|i| match i {
                Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                _ => Err(wrong(
                    key,
                    "a non-empty string or array of non-empty strings",
                )),
            })
            .collect(),
        _ => Err(wrong(
            key,
            "a non-empty string or array of non-empty strings",
        )),
    }
}

/// A string or an array of strings.
fn want_word(key: &str, v: Value) -> Result<Want, ProfileError> {
    let mut ws = words(key, v)?;
    Ok(if ws.len() == 1 {
        Want::Exact(ws.remove(0))
    } else {
        Want::OneOf(ws)
    })
}

/// An integer or a range table.
fn want_int(key: &str, v: Value) -> Result<Want, ProfileError> {
    match v {
        Value::Integer(n) => Ok(Want::Exact(n.to_string())),
        Value::Table(t) => range(key, t),
        _ => Err(wrong(key, "an integer or { at_least, at_most }")),
    }
}

/// Any form: scalar, array of scalars, or range table.
fn want_any(key: &str, v: Value) -> Result<Want, ProfileError> {
    match v {
        Value::Table(t) => range(key, t),
        Value::Array(items) => {
            if items.is_empty() {
                return Err(bad(key, "empty choice list"));
            }
            let mut vs = items
                .iter()
                .map(|i| scalar(key, i))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(if vs.len() == 1 {
                Want::Exact(vs.remove(0))
            } else {
                Want::OneOf(vs)
            })
        }
        other => scalar(key, &other).map(Want::Exact),
    }
}

fn range(key: &str, mut t: Table) -> Result<Want, ProfileError> {
    let mut bound = |name: &str| -> Result<Option<i128>, ProfileError> {
        match t.remove(name) {
            None => Ok(None),
            Some(Value::Integer(n)) => Ok(Some(i128::from(n))),
            Some(_) => Err(wrong(&format!("{key}.{name}"), "an integer")),
        }
    };
    let at_least = bound("at_least")?;
    let at_most = bound("at_most")?;
    no_more(key, t)?;
    match (at_least, at_most) {
        (None, None) => Err(bad(key, "a range needs at_least and/or at_most")),
        (Some(lo), Some(hi)) if lo > hi => Err(bad(key, format!("at_least {lo} > at_most {hi}"))),
        _ => Ok(Want::Range { at_least, at_most }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(s: &str) -> Want {
        Want::Exact(s.to_string())
    }

    /// Parses `input`; `expected` is `Ok(profile)` or `Err(error message)`.
    fn check(input: &str, expected: Result<KernelProfile, &str>) {
        let got = KernelProfile::parse(input);
        match (got, expected) {
            (Ok(g), Ok(e)) => assert_eq!(g, e, "input:\n{input}"),
            (Err(g), Err(e)) => assert_eq!(g.to_string(), e, "input:\n{input}"),
            (g, e) => panic!("input:\n{input}\ngot {g:?}\nexpected {e:?}"),
        }
    }

    fn sysctls(list: &[(&str, Want)]) -> KernelProfile {
        KernelProfile {
            sysctl: list
                .iter()
                .map(|(n, w)| Sysctl {
                    name: n.to_string(),
                    want: w.clone(),
                })
                .collect(),
            ..KernelProfile::default()
        }
    }

    #[test]
    fn parses_profiles() {
        check("", Ok(KernelProfile::default()));
        check(
            "description = \"x\"",
            Ok(KernelProfile {
                description: Some("x".into()),
                ..KernelProfile::default()
            }),
        );
        check(
            "[sysctl]\n\"net.core.somaxconn\" = 4096",
            Ok(sysctls(&[("net.core.somaxconn", exact("4096"))])),
        );
        // Sorted by name; whitespace normalised; arrays are choices.
        check(
            "[sysctl]\n\"vm.swappiness\" = { at_most = 1 }\n\"net.ipv4.tcp_rmem\" = \"4096\t131072  67108864 \"\n\"kernel.x\" = [0, \"1\"]",
            Ok(sysctls(&[
                ("kernel.x", Want::OneOf(vec!["0".into(), "1".into()])),
                ("net.ipv4.tcp_rmem", exact("4096 131072 67108864")),
                ("vm.swappiness", Want::Range { at_least: None, at_most: Some(1) }),
            ])),
        );
        check(
            "[sysctl]\n\"fs.file-max\" = { at_least = 10, at_most = 20 }\n\"a.b\" = [7]",
            Ok(sysctls(&[
                ("a.b", exact("7")),
                (
                    "fs.file-max",
                    Want::Range {
                        at_least: Some(10),
                        at_most: Some(20),
                    },
                ),
            ])),
        );
        check(
            "[limits]\nnofile = 1048576\nmemlock_bytes = \"unlimited\"",
            Ok(KernelProfile {
                limits: Limits {
                    nofile: Some(1048576),
                    memlock_bytes: Some(Rlim::Unlimited),
                },
                ..KernelProfile::default()
            }),
        );
        check(
            "[limits]\nmemlock_bytes = 8388608",
            Ok(KernelProfile {
                limits: Limits {
                    nofile: None,
                    memlock_bytes: Some(Rlim::Finite(8388608)),
                },
                ..KernelProfile::default()
            }),
        );
        check(
            "[block]\nscheduler = \"none\"\nread_ahead_kb = 128",
            Ok(KernelProfile {
                block: Some(Block {
                    devices: vec!["nvme*".into()],
                    scheduler: Some(exact("none")),
                    read_ahead_kb: Some(exact("128")),
                }),
                ..KernelProfile::default()
            }),
        );
        check(
            "[block]\ndevices = [\"vd*\", \"sda\"]\nscheduler = [\"none\", \"mq-deadline\"]\nread_ahead_kb = { at_most = 256 }",
            Ok(KernelProfile {
                block: Some(Block {
                    devices: vec!["vd*".into(), "sda".into()],
                    scheduler: Some(Want::OneOf(vec!["none".into(), "mq-deadline".into()])),
                    read_ahead_kb: Some(Want::Range { at_least: None, at_most: Some(256) }),
                }),
                ..KernelProfile::default()
            }),
        );
        check(
            "[mm]\ntransparent_hugepage = [\"madvise\", \"never\"]\n[cpu]\ngovernor = \"performance\"",
            Ok(KernelProfile {
                transparent_hugepage: Some(Want::OneOf(vec!["madvise".into(), "never".into()])),
                cpu_governor: Some(exact("performance")),
                ..KernelProfile::default()
            }),
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = KernelProfile::parse("[sysctl\n").unwrap_err();
        assert!(matches!(e, ProfileError::Toml(_)), "{e:?}");
        check("colour = 1", Err("unknown key `colour`"));
        check("[limits]\nnofiles = 1", Err("unknown key `limits.nofiles`"));
        check("[limits]\nmemlock = 1", Err("unknown key `limits.memlock`"));
        check(
            "[block]\nshceduler = \"none\"",
            Err("unknown key `block.shceduler`"),
        );
        check("[mm]\nthp = \"never\"", Err("unknown key `mm.thp`"));
        check(
            "[cpu]\ngovernors = \"performance\"",
            Err("unknown key `cpu.governors`"),
        );
        check(
            "[sysctl]\n\"vm.swappiness\" = { at_mostt = 1 }",
            Err("unknown key `sysctl.vm.swappiness.at_mostt`"),
        );
        check("sysctl = 3", Err("`sysctl`: expected a table"));
        check("description = 3", Err("`description`: expected a string"));
        check(
            "[limits]\nnofile = \"many\"",
            Err("`limits.nofile`: expected a positive integer"),
        );
        check(
            "[limits]\nnofile = 0",
            Err("`limits.nofile`: must be positive"),
        );
        check(
            "[limits]\nmemlock_bytes = \"lots\"",
            Err("`limits.memlock_bytes`: expected a positive integer or \"unlimited\""),
        );
        check(
            "[sysctl]\n\"somaxconn\" = 1",
            Err("`sysctl.somaxconn`: not a sysctl name (dotted words of [A-Za-z0-9_-])"),
        );
        check(
            "[sysctl]\n\"net..core\" = 1",
            Err("`sysctl.net..core`: not a sysctl name (dotted words of [A-Za-z0-9_-])"),
        );
        check(
            "[sysctl]\n\"net.core/../../etc\" = 1",
            Err("`sysctl.net.core/../../etc`: not a sysctl name (dotted words of [A-Za-z0-9_-])"),
        );
        check("[sysctl]\n\"a.b\" = true", Err("`sysctl.a.b`: expected an integer, a string, an array of them or { at_least, at_most }"));
        check(
            "[sysctl]\n\"a.b\" = \"  \"",
            Err("`sysctl.a.b`: empty value"),
        );
        check(
            "[sysctl]\n\"a.b\" = []",
            Err("`sysctl.a.b`: empty choice list"),
        );
        check(
            "[sysctl]\n\"a.b\" = {}",
            Err("`sysctl.a.b`: a range needs at_least and/or at_most"),
        );
        check(
            "[sysctl]\n\"a.b\" = { at_least = 5, at_most = 4 }",
            Err("`sysctl.a.b`: at_least 5 > at_most 4"),
        );
        check(
            "[sysctl]\n\"a.b\" = { at_least = \"5\" }",
            Err("`sysctl.a.b.at_least`: expected an integer"),
        );
        check(
            "[block]\nread_ahead_kb = \"128\"",
            Err("`block.read_ahead_kb`: expected an integer or { at_least, at_most }"),
        );
        check(
            "[block]\nscheduler = 1",
            Err("`block.scheduler`: expected a non-empty string or array of non-empty strings"),
        );
        check(
            "[block]\ndevices = [\"../x\"]",
            Err("`block.devices`: bad device pattern \"../x\" (a name, or a prefix ending in `*`)"),
        );
        check(
            "[block]\ndevices = [\"*\"]",
            Err("`block.devices`: bad device pattern \"*\" (a name, or a prefix ending in `*`)"),
        );
        check(
            "[block]\ndevices = [\"nv*me\"]",
            Err(
                "`block.devices`: bad device pattern \"nv*me\" (a name, or a prefix ending in `*`)",
            ),
        );
        check(
            "[mm]\ntransparent_hugepage = \"sometimes\"",
            Err("`mm.transparent_hugepage`: \"sometimes\" is not one of always, madvise, never"),
        );
        check(
            "[mm]\ntransparent_hugepage = [\"never\", \"nope\"]",
            Err("`mm.transparent_hugepage`: \"nope\" is not one of always, madvise, never"),
        );
    }

    /// `(want, actual, matches, value_to_write)`.
    #[test]
    fn wants_match_and_pick_values() {
        let range = |lo: Option<i128>, hi: Option<i128>| Want::Range {
            at_least: lo,
            at_most: hi,
        };
        let cases: &[(Want, &str, bool, &str)] = &[
            (exact("4096"), "4096\n", true, "4096"),
            (exact("4096"), "128", false, "4096"),
            (
                exact("4096 131072 67108864"),
                "4096\t131072\t67108864",
                true,
                "4096 131072 67108864",
            ),
            (
                Want::OneOf(vec!["none".into(), "mq-deadline".into()]),
                "mq-deadline",
                true,
                "none",
            ),
            (
                Want::OneOf(vec!["none".into(), "mq-deadline".into()]),
                "bfq",
                false,
                "none",
            ),
            (range(Some(10), None), "10", true, "10"),
            (range(Some(10), None), "9223372036854775807", true, "10"),
            (range(Some(10), None), "9", false, "10"),
            (range(None, Some(1)), "60", false, "1"),
            (range(None, Some(1)), "0", true, "1"),
            (range(Some(5), Some(10)), "4", false, "5"),
            (range(Some(5), Some(10)), "11", false, "10"),
            (range(Some(5), Some(10)), "garbage", false, "5"),
            (range(Some(-1), None), "-1", true, "-1"),
        ];
        for (want, actual, matches, value) in cases {
            assert_eq!(want.matches(actual), *matches, "{want:?} vs {actual:?}");
            assert_eq!(
                want.value_to_write(actual),
                *value,
                "{want:?} vs {actual:?}"
            );
        }
        assert_eq!(range(Some(1), Some(2)).to_string(), ">= 1, <= 2");
        assert_eq!(range(None, Some(2)).to_string(), "<= 2");
        assert_eq!(Want::OneOf(vec!["a".into(), "b".into()]).to_string(), "a|b");
    }

    #[test]
    fn block_patterns_and_sysctl_paths() {
        let block = Block {
            devices: vec!["nvme*".into(), "vda".into()],
            scheduler: None,
            read_ahead_kb: None,
        };
        for (name, m) in [
            ("nvme0n1", true),
            ("nvme1n2", true),
            ("vda", true),
            ("vdb", false),
            ("sda", false),
        ] {
            assert_eq!(block.matches_device(name), m, "{name}");
        }
        assert_eq!(
            sysctl_rel_path("net.core.somaxconn"),
            PathBuf::from("proc/sys/net/core/somaxconn")
        );
        assert_eq!(
            sysctl_rel_path("fs.aio-max-nr"),
            PathBuf::from("proc/sys/fs/aio-max-nr")
        );
    }

    /// The shipped profiles parse.
    #[test]
    fn shipped_profiles_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernel");
        for name in ["throughput.toml", "dev.toml"] {
            let p = KernelProfile::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!p.sysctl.is_empty(), "{name}");
        }
        let t = KernelProfile::load(&dir.join("throughput.toml")).unwrap();
        assert_eq!(t.limits.memlock_bytes, Some(Rlim::Unlimited));
        assert_eq!(
            t.block.as_ref().and_then(|b| b.scheduler.clone()),
            Some(exact("none"))
        );
        assert_eq!(t.cpu_governor, Some(exact("performance")));
    }
}
