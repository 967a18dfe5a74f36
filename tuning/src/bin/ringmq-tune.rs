//! `ringmq-tune`: checks a host against a kernel profile (`check`) and applies the
//! profile's sysctl and sysfs settings (`apply`). The logic lives in the library; this
//! file parses flags, prints, and maps outcomes to exit codes.
//!
//! Invariant: exit code 0 means every item is ok or not available (check) or every
//! step succeeded / nothing was changed (apply); 1 means check found a difference; 2 is
//! any error (bad flags, bad profile, unreadable host file, failed write).

use clap::{Parser, Subcommand};
use ringmq_tuning::apply::{self, ApplyError};
use ringmq_tuning::check::{self, Finding};
use ringmq_tuning::host::{Host, HostError};
use ringmq_tuning::profile::{KernelProfile, ProfileError};
use ringmq_tuning::uring::{self, UringReport};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const CHECK_EXIT: &str = "Exit status: 0 when every item is ok or not available on this host, \
1 when something differs from the profile, 2 on error.";
const APPLY_EXIT: &str = "Without --yes this is a dry run: it only prints the commands. \
With --yes (as root when --root is /) it writes the sysctl and sysfs values; resource limits \
are never written, only printed as limits.d / systemd text. \
Exit status: 0 on success, 2 on error (any failed write).";

#[derive(Parser)]
#[command(
    name = "ringmq-tune",
    version,
    about = "Check a host against a RingMQ kernel profile (tuning/kernel/*.toml) and apply it",
    after_help = "Exit status: check: 0 all ok or not available, 1 something differs, 2 error; apply: 0 ok, 2 error."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compare the host with a profile; print item, wanted, actual, status and the io_uring report.
    #[command(after_help = CHECK_EXIT)]
    Check {
        /// Kernel profile to check against.
        #[arg(long, default_value = "tuning/kernel/throughput.toml")]
        profile: PathBuf,
        /// Root of the host tree to read (/proc/sys, /sys); a copy of another host's tree works too.
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Skip the io_uring probe (it always probes the running kernel, whatever --root is).
        #[arg(long)]
        no_uring: bool,
    },
    /// Print (default) or run the commands that bring the host to the profile.
    #[command(after_help = APPLY_EXIT)]
    Apply {
        /// Kernel profile to apply.
        #[arg(long)]
        profile: PathBuf,
        /// Root of the host tree to write.
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// Only print the commands (the default).
        #[arg(long, conflicts_with = "yes")]
        dry_run: bool,
        /// Apply the sysctl and sysfs values.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("profile {path}: {source}")]
    Profile { path: PathBuf, source: ProfileError },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("{failed} of {total} write(s) failed")]
    WritesFailed { failed: usize, total: usize },
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Check {
            profile,
            root,
            json,
            no_uring,
        } => run_check(&profile, &root, json, no_uring),
        Cmd::Apply {
            profile,
            root,
            dry_run: _,
            yes,
        } => run_apply(&profile, &root, yes),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringmq-tune: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn load(path: &Path) -> Result<KernelProfile, CliError> {
    KernelProfile::load(path).map_err(|source| CliError::Profile {
        path: path.to_path_buf(),
        source,
    })
}

fn run_check(
    profile_path: &Path,
    root: &Path,
    json: bool,
    no_uring: bool,
) -> Result<ExitCode, CliError> {
    let profile = load(profile_path)?;
    let state = Host::new(root).read_state(&profile)?;
    let mut findings = check::check(&profile, &state);
    let report = (!no_uring).then(uring::probe);
    if let Some(r) = &report {
        findings.extend(uring::findings(r));
    }
    let (ok, differs, unavailable) = check::summary(&findings);
    if json {
        let doc = serde_json::json!({
            "profile": profile_path,
            "root": root,
            "findings": findings,
            "io_uring": report,
            "summary": { "ok": ok, "differs": differs, "unavailable": unavailable },
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "ringmq-tune check: profile {}, root {}\n",
            profile_path.display(),
            root.display()
        );
        print!("{}", table(&findings));
        if let Some(r) = &report {
            print!("\n{}", uring_text(r));
        }
        println!("\nsummary: {ok} ok, {differs} differ, {unavailable} not available");
        if profile.limits.nofile.is_some() || profile.limits.memlock_bytes.is_some() {
            println!("(limits.* are this process's soft limits; the broker gets its launcher's: see `ringmq-tune apply`)");
        }
    }
    Ok(if differs > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn table(findings: &[Finding]) -> String {
    let header = ["ITEM", "WANTED", "ACTUAL", "STATUS"];
    let rows: Vec<[&str; 4]> = findings
        .iter()
        .map(|f| {
            [
                f.item.as_str(),
                f.wanted.as_str(),
                f.actual.as_str(),
                f.status.label(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn uring_text(r: &UringReport) -> String {
    let mut out = format!(
        "io_uring (running kernel {}, not --root):\n",
        r.kernel_release
    );
    if !r.setup_ok {
        out.push_str(&format!(
            "  setup:    FAILED: {}\n",
            r.setup_error.as_deref().unwrap_or("?")
        ));
        if let Some(h) = r.setup_errno.and_then(uring::hint) {
            out.push_str(&format!("  hint:     {h}\n"));
        }
        return out;
    }
    let names = |flags: &[uring::Flag], present: bool| {
        let v: Vec<&str> = flags
            .iter()
            .filter(|f| f.present == present)
            .map(|f| f.name)
            .collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" ")
        }
    };
    out.push_str("  setup:    works\n");
    out.push_str(&format!("  features: {}\n", names(&r.features, true)));
    out.push_str(&format!("  lacking:  {}\n", names(&r.features, false)));
    match &r.probe_error {
        Some(e) => out.push_str(&format!("  opcodes:  probe failed: {e}\n")),
        None => {
            out.push_str(&format!("  opcodes:  {}\n", names(&r.opcodes, true)));
            out.push_str(&format!("  missing:  {}\n", names(&r.opcodes, false)));
        }
    }
    out
}

fn run_apply(profile_path: &Path, root: &Path, yes: bool) -> Result<ExitCode, CliError> {
    let profile = load(profile_path)?;
    if yes {
        apply::may_apply(root, apply::euid())?;
    }
    let state = Host::new(root).read_state(&profile)?;
    let findings = check::check(&profile, &state);
    let plan = apply::plan(&profile, &findings, root);
    println!(
        "# ringmq-tune apply: profile {}, root {}",
        profile_path.display(),
        root.display()
    );
    print!("{}", plan.render(!yes));
    if !yes || plan.steps.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    println!();
    let results = apply::execute(&plan, root);
    let mut failed = 0;
    for (step, result) in plan.steps.iter().zip(&results) {
        match result {
            Ok(()) => println!("applied: {}", step.command),
            Err(e) => {
                failed += 1;
                eprintln!("FAILED:  {}: {e}", step.command);
            }
        }
    }
    if failed > 0 {
        return Err(CliError::WritesFailed {
            failed,
            total: plan.steps.len(),
        });
    }
    println!(
        "# done; `ringmq-tune check --profile {}` shows the result",
        profile_path.display()
    );
    Ok(ExitCode::SUCCESS)
}
