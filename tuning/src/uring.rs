//! Probing this kernel's io_uring with the `io-uring` crate: the kernel release
//! (`uname`), whether `io_uring_setup` works at all (and its errno if not: `EPERM` when
//! `kernel.io_uring_disabled` or a container's seccomp filter forbids it, `ENOSYS` when
//! the kernel lacks it, `ENOMEM` when RLIMIT_MEMLOCK is too small before 5.12), the
//! `IORING_FEAT_*` flags the kernel reports, and whether each opcode glommio/RingMQ
//! uses is supported (`IORING_REGISTER_PROBE`, kernel 5.6+).
//!
//! The probe is of the running kernel, never of a `--root` tree.
//!
//! Invariant: [`UringReport`] is consistent: `setup_ok` exactly when there is no setup
//! error; features and opcodes are listed only when setup worked; opcodes are listed
//! exactly when the probe registration worked (else `probe_error` says why).
//! Invariant: probing never panics and leaves nothing behind (the ring is dropped).

use crate::check::{Finding, Status};
use io_uring::{opcode, IoUring, Parameters, Probe};
use serde::Serialize;

/// The opcodes glommio (and so RingMQ's store and network) submits.
pub const OPCODES: &[(&str, u8)] = &[
    ("Read", opcode::Read::CODE),
    ("Write", opcode::Write::CODE),
    ("ReadFixed", opcode::ReadFixed::CODE),
    ("WriteFixed", opcode::WriteFixed::CODE),
    ("Fsync", opcode::Fsync::CODE),
    ("Fallocate", opcode::Fallocate::CODE),
    ("OpenAt", opcode::OpenAt::CODE),
    ("Close", opcode::Close::CODE),
    ("Statx", opcode::Statx::CODE),
    ("Accept", opcode::Accept::CODE),
    ("Connect", opcode::Connect::CODE),
    ("Send", opcode::Send::CODE),
    ("Recv", opcode::Recv::CODE),
    ("PollAdd", opcode::PollAdd::CODE),
    ("Timeout", opcode::Timeout::CODE),
    ("AsyncCancel", opcode::AsyncCancel::CODE),
    ("ProvideBuffers", opcode::ProvideBuffers::CODE),
];

/// `IORING_FEAT_*` flags, by their kernel names without the prefix.
fn features(p: &Parameters) -> Vec<Flag> {
    [
        ("SINGLE_MMAP", p.is_feature_single_mmap()),
        ("NODROP", p.is_feature_nodrop()),
        ("SUBMIT_STABLE", p.is_feature_submit_stable()),
        ("RW_CUR_POS", p.is_feature_rw_cur_pos()),
        ("CUR_PERSONALITY", p.is_feature_cur_personality()),
        ("FAST_POLL", p.is_feature_fast_poll()),
        ("POLL_32BITS", p.is_feature_poll_32bits()),
        ("SQPOLL_NONFIXED", p.is_feature_sqpoll_nonfixed()),
        ("EXT_ARG", p.is_feature_ext_arg()),
        ("NATIVE_WORKERS", p.is_feature_native_workers()),
        ("RSRC_TAGS", p.is_feature_resource_tagging()),
        ("CQE_SKIP", p.is_feature_skip_cqe_on_success()),
        ("LINKED_FILE", p.is_feature_linked_file()),
    ]
    .into_iter()
    .map(|(name, present)| Flag { name, present })
    .collect()
}

/// A named yes/no.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Flag {
    pub name: &'static str,
    pub present: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UringReport {
    /// `uname -r`.
    pub kernel_release: String,
    pub setup_ok: bool,
    pub setup_errno: Option<i32>,
    /// E.g. `EPERM: Operation not permitted (os error 1)`.
    pub setup_error: Option<String>,
    pub features: Vec<Flag>,
    pub probe_error: Option<String>,
    /// One entry per [`OPCODES`] entry, in that order.
    pub opcodes: Vec<Flag>,
}

/// Probes the running kernel.
pub fn probe() -> UringReport {
    let mut report = UringReport {
        kernel_release: kernel_release(),
        setup_ok: false,
        setup_errno: None,
        setup_error: None,
        features: Vec::new(),
        probe_error: None,
        opcodes: Vec::new(),
    };
    let ring = match IoUring::new(8) {
        Ok(ring) => ring,
        Err(e) => {
            report.setup_errno = Some(e.raw_os_error().unwrap_or(0));
            report.setup_error = Some(describe(&e));
            return report;
        }
    };
    report.setup_ok = true;
    report.features = features(ring.params());
    let mut probe = Probe::new();
    match ring.submitter().register_probe(&mut probe) {
        Ok(()) => {
            report.opcodes = OPCODES
                .iter()
                .map(|&(name, code)| Flag {
                    name,
                    present: probe.is_supported(code),
                })
                .collect()
        }
        Err(e) => report.probe_error = Some(describe(&e)),
    }
    report
}

/// `ERRNO_NAME: message`.
fn describe(e: &std::io::Error) -> String {
    match e.raw_os_error().and_then(errno_name) {
        Some(name) => format!("{name}: {e}"),
        None => e.to_string(),
    }
}

/// Names of the errnos `io_uring_setup` and `io_uring_register` return.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::ENOMEM => "ENOMEM",
        libc::EINVAL => "EINVAL",
        libc::EFAULT => "EFAULT",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EACCES => "EACCES",
        _ => return None,
    })
}

/// Why setup may have failed, for the operator.
pub fn hint(errno: i32) -> Option<&'static str> {
    match errno {
        libc::EPERM => {
            Some("kernel.io_uring_disabled, or a seccomp filter (containers) forbids io_uring")
        }
        libc::ENOSYS => Some("kernel built without io_uring (CONFIG_IO_URING)"),
        libc::ENOMEM => Some("RLIMIT_MEMLOCK too small (kernels before 5.12 charge rings to it)"),
        _ => None,
    }
}

/// `uname -r`, or `unknown` if uname fails.
pub fn kernel_release() -> String {
    // SAFETY: utsname is plain old data; all-zero is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is valid and writable for the call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "unknown".to_string();
    }
    let bytes: Vec<u8> = uts
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Findings for the check table: `io_uring.setup` (the broker cannot run without it)
/// and `io_uring.opcodes` (all of [`OPCODES`] supported).
pub fn findings(report: &UringReport) -> Vec<Finding> {
    if !report.setup_ok {
        let errno = report.setup_errno.unwrap_or(0);
        let mut actual = report
            .setup_error
            .clone()
            .unwrap_or_else(|| "failed".to_string());
        if let Some(h) = hint(errno) {
            actual = format!("{actual} ({h})");
        }
        return vec![
            Finding::new("io_uring.setup", "works", actual, Status::Differs),
            Finding::new(
                "io_uring.opcodes",
                "all supported",
                "not available (no ring)",
                Status::Unavailable,
            ),
        ];
    }
    let setup = Finding::new("io_uring.setup", "works", "works", Status::Ok);
    let opcodes = match &report.probe_error {
        Some(e) => Finding::new(
            "io_uring.opcodes",
            "all supported",
            format!("not available (probe: {e})"),
            Status::Unavailable,
        ),
        None => {
            let missing: Vec<&str> = report
                .opcodes
                .iter()
                .filter(|o| !o.present)
                .map(|o| o.name)
                .collect();
            if missing.is_empty() {
                Finding::new(
                    "io_uring.opcodes",
                    "all supported",
                    format!("all {} supported", report.opcodes.len()),
                    Status::Ok,
                )
            } else {
                Finding::new(
                    "io_uring.opcodes",
                    "all supported",
                    format!("missing: {}", missing.join(", ")),
                    Status::Differs,
                )
            }
        }
    };
    vec![setup, opcodes]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe of this machine is consistent whether io_uring works here or not.
    #[test]
    fn probe_is_consistent() {
        let r = probe();
        assert!(!r.kernel_release.is_empty() && r.kernel_release != "unknown");
        assert_eq!(r.setup_ok, r.setup_errno.is_none());
        assert_eq!(r.setup_ok, r.setup_error.is_none());
        if r.setup_ok {
            assert!(!r.features.is_empty());
            match &r.probe_error {
                None => {
                    assert_eq!(r.opcodes.len(), OPCODES.len());
                    let supported = |n: &str| r.opcodes.iter().any(|o| o.name == n && o.present);
                    // The probe exists since 5.6, as do Read and Write.
                    assert!(supported("Read") && supported("Write"), "{r:?}");
                }
                Some(_) => assert!(r.opcodes.is_empty()),
            }
            // A kernel with FAST_POLL (5.7) has NODROP (5.5).
            if r.features
                .iter()
                .any(|f| f.name == "FAST_POLL" && f.present)
            {
                assert!(
                    r.features.iter().any(|f| f.name == "NODROP" && f.present),
                    "{r:?}"
                );
            }
        } else {
            assert!(r.setup_errno.is_some_and(|e| e > 0), "{r:?}");
            assert!(r.features.is_empty() && r.opcodes.is_empty() && r.probe_error.is_none());
        }
        let f = findings(&r);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].status == Status::Ok, r.setup_ok);
    }

    fn report(setup: Result<(), i32>, probe_error: Option<&str>, missing: &[&str]) -> UringReport {
        let ok = setup.is_ok();
        UringReport {
            kernel_release: "6.8.0".into(),
            setup_ok: ok,
            setup_errno: setup.err(),
            setup_error: setup
                .err()
                .map(|e| describe(&std::io::Error::from_raw_os_error(e))),
            features: Vec::new(),
            probe_error: probe_error.map(str::to_string),
            opcodes: if ok && probe_error.is_none() {
                OPCODES
                    .iter()
                    .map(|&(name, _)| Flag {
                        name,
                        present: !missing.contains(&name),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// `(report, expected [(item, actual, status)])`.
    fn check(r: UringReport, expected: &[(&str, &str, Status)]) {
        let got: Vec<(String, String, Status)> = findings(&r)
            .into_iter()
            .map(|f| (f.item, f.actual, f.status))
            .collect();
        let expected: Vec<(String, String, Status)> = expected
            .iter()
            .map(|(i, a, s)| (i.to_string(), a.to_string(), *s))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn findings_from_reports() {
        check(
            report(Ok(()), None, &[]),
            &[
                ("io_uring.setup", "works", Status::Ok),
                ("io_uring.opcodes", "all 17 supported", Status::Ok),
            ],
        );
        check(
            report(Ok(()), None, &["ProvideBuffers", "Statx"]),
            &[
                ("io_uring.setup", "works", Status::Ok),
                (
                    "io_uring.opcodes",
                    "missing: Statx, ProvideBuffers",
                    Status::Differs,
                ),
            ],
        );
        check(
            report(Ok(()), Some("EINVAL: Invalid argument (os error 22)"), &[]),
            &[
                ("io_uring.setup", "works", Status::Ok),
                (
                    "io_uring.opcodes",
                    "not available (probe: EINVAL: Invalid argument (os error 22))",
                    Status::Unavailable,
                ),
            ],
        );
        check(
            report(Err(libc::EPERM), None, &[]),
            &[
                (
                    "io_uring.setup",
                    "EPERM: Operation not permitted (os error 1) (kernel.io_uring_disabled, or a seccomp filter (containers) forbids io_uring)",
                    Status::Differs,
                ),
                ("io_uring.opcodes", "not available (no ring)", Status::Unavailable),
            ],
        );
        check(
            report(Err(libc::ENOSYS), None, &[]),
            &[
                (
                    "io_uring.setup",
                    "ENOSYS: Function not implemented (os error 38) (kernel built without io_uring (CONFIG_IO_URING))",
                    Status::Differs,
                ),
                ("io_uring.opcodes", "not available (no ring)", Status::Unavailable),
            ],
        );
        check(
            report(Err(libc::EBADF), None, &[]),
            &[
                (
                    "io_uring.setup",
                    "Bad file descriptor (os error 9)",
                    Status::Differs,
                ),
                (
                    "io_uring.opcodes",
                    "not available (no ring)",
                    Status::Unavailable,
                ),
            ],
        );
    }
}
