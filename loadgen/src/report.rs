//! Results of a benchmark run: machine facts (kernel, CPU, cores, filesystem, git
//! commit, the exact command line), the JSON results file, the Markdown summary table
//! and the target ratios (quoted, not asserted).

use crate::fio::{bytes_per_flush_rounded, FioJobResult, FioResults};
use crate::store_bench::RunResult;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Async flush target: stored MiB/s ≥ this share of fio's 1 MiB O_DIRECT write.
pub const ASYNC_TARGET_RATIO: f64 = 0.70;
/// Sync flush target (32 in flight): flushes/s ≥ this share of fio's commit rate at
/// the same bytes per flush.
pub const SYNC_TARGET_RATIO: f64 = 0.50;
/// The sync run the commit-rate target applies to.
pub const SYNC_TARGET_IN_FLIGHT: usize = 32;

/// Trimmed stdout of a command, or None.
fn output_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The filesystem type of `path` (e.g. "ext4", "tmpfs"), from `df`.
pub fn fs_type(path: &Path) -> Option<String> {
    df_field(path, "fstype")
}

fn df_field(path: &Path, field: &str) -> Option<String> {
    let p = path.to_str()?;
    let out = output_of("df", &[&format!("--output={field}"), p])?;
    out.lines().nth(1).map(|l| l.trim().to_string())
}

pub fn utc_now() -> String {
    output_of("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_else(|| "unknown-date".into())
}

/// The command line as typed (arguments with spaces or quotes are single-quoted).
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:@+".contains(c)) {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Clone, Serialize)]
pub struct MachineInfo {
    pub kernel: String,
    pub cpu_model: String,
    /// Logical CPUs in /proc/cpuinfo.
    pub cpu_count: usize,
    pub mem_total_kib: u64,
    pub bench_dir: String,
    pub bench_fs: String,
    pub bench_device: String,
    /// HEAD when the bench ran.
    pub git_commit: String,
    /// Uncommitted changes in the working tree when the bench ran (paths changed).
    pub git_dirty_paths: usize,
    /// HEAD when the binary was built (build.rs), and the uncommitted paths then: the
    /// code measured is this commit plus those working-tree changes.
    pub build_commit: String,
    pub build_dirty_paths: String,
    pub rustc: String,
    pub fio_version: Option<String>,
    pub command_line: String,
}

impl MachineInfo {
    pub fn collect(bench_dir: &Path, command_line: String) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let cpu_count = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
        let mem_total_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok())
            })
            .unwrap_or(0);
        MachineInfo {
            kernel: output_of("uname", &["-r"]).unwrap_or_else(|| "unknown".into()),
            cpu_model,
            cpu_count,
            mem_total_kib,
            bench_dir: bench_dir.display().to_string(),
            bench_fs: fs_type(bench_dir).unwrap_or_else(|| "unknown".into()),
            bench_device: df_field(bench_dir, "source").unwrap_or_else(|| "unknown".into()),
            git_commit: output_of("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
            git_dirty_paths: output_of("git", &["status", "--porcelain"]).map(|s| s.lines().count()).unwrap_or(0),
            build_commit: env!("LOADGEN_BUILD_COMMIT").to_string(),
            build_dirty_paths: env!("LOADGEN_BUILD_DIRTY_PATHS").to_string(),
            rustc: output_of("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
            fio_version: output_of("fio", &["--version"]),
            command_line,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchParams {
    pub duration_secs: u64,
    pub warmup_secs: u64,
    pub message_bytes: usize,
    pub segment_mib: u64,
    pub fio_size_mib: u64,
    pub fio_runtime_secs: u64,
    pub preempt_us: u64,
    pub spin_before_park_us: u64,
    pub pin_cpu: String,
    /// Whether glommio's iopoll probe was primed before each store open.
    pub iopoll_workaround: bool,
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    pub ratio: f64,
    pub target_ratio: f64,
    pub pass: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub benchmark: &'static str,
    pub started_utc: String,
    pub machine: MachineInfo,
    pub params: BenchParams,
    pub runs: Vec<RunResult>,
    pub fio: Option<FioResults>,
    pub targets: Vec<Target>,
}

fn targets(runs: &[RunResult], fio: Option<&FioResults>) -> Vec<Target> {
    let Some(fio) = fio else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(a) = runs.iter().find(|r| r.mode == "async") {
        let base = fio.write_1mib.as_ref().map(|w| w.mib_per_s).unwrap_or(0.0);
        if base > 0.0 {
            let ratio = a.stored_mib_per_s / base;
            out.push(Target {
                name: "async stored MiB/s ÷ fio 1 MiB O_DIRECT write MiB/s".into(),
                ratio,
                target_ratio: ASYNC_TARGET_RATIO,
                pass: ratio >= ASYNC_TARGET_RATIO,
                detail: format!(
                    "{:.1} stored MiB/s ({:.1} message MiB/s, ratio {:.2}) vs fio {:.1} MiB/s",
                    a.stored_mib_per_s,
                    a.message_mib_per_s,
                    a.message_mib_per_s / base,
                    base
                ),
            });
        }
    }
    if let Some(s) = runs.iter().find(|r| r.mode == "sync" && r.in_flight == SYNC_TARGET_IN_FLIGHT) {
        if let Some(job) = fio.commit_job_for(s) {
            let commits = job.commits_per_s.unwrap_or(0.0);
            if commits > 0.0 {
                let ratio = s.flushes_per_s / commits;
                out.push(Target {
                    name: format!("sync {SYNC_TARGET_IN_FLIGHT} in flight flushes/s ÷ fio commits/s at bs={}", job.bs_bytes),
                    ratio,
                    target_ratio: SYNC_TARGET_RATIO,
                    pass: ratio >= SYNC_TARGET_RATIO,
                    detail: format!(
                        "{:.0} flushes/s ({:.0} B/flush) vs fio {:.0} commits/s at bs={} (fdatasync=1); bytes/s ratio {:.2}",
                        s.flushes_per_s,
                        s.flushed_bytes_per_flush,
                        commits,
                        job.bs_bytes,
                        (s.flushes_per_s * s.flushed_bytes_per_flush) / (commits * job.bs_bytes as f64)
                    ),
                });
            }
        }
    }
    out
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn lat(p50: f64, p99: f64, p999: f64) -> String {
    format!("{} / {} / {}", f1(p50), f1(p99), f1(p999))
}

impl Report {
    pub fn new(machine: MachineInfo, started_utc: String, params: &BenchParams, runs: Vec<RunResult>, fio: Option<FioResults>) -> Self {
        let targets = targets(&runs, fio.as_ref());
        Report { benchmark: "store-bench", started_utc, machine, params: params.clone(), runs, fio, targets }
    }

    /// Writes the JSON file and, next to it, the Markdown summary (`.md`).
    pub fn write(&self, json_path: &Path) -> Result<(), String> {
        if let Some(parent) = json_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        let json = serde_json::to_string_pretty(self).map_err(|e| format!("serialize results: {e}"))?;
        std::fs::write(json_path, json + "\n").map_err(|e| format!("write {}: {e}", json_path.display()))?;
        let md = json_path.with_extension("md");
        std::fs::write(&md, self.markdown()).map_err(|e| format!("write {}: {e}", md.display()))?;
        Ok(())
    }

    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(s, "# RingMQ store benchmark ({})\n", self.started_utc);
        let _ = writeln!(s, "- Machine: {} × {}, {} MiB RAM", m.cpu_count, m.cpu_model, m.mem_total_kib / 1024);
        let _ = writeln!(s, "- Kernel: {}", m.kernel);
        let _ = writeln!(s, "- Filesystem: {} on {} ({})", m.bench_fs, m.bench_device, m.bench_dir);
        let _ = writeln!(
            s,
            "- Commit: binary built at {} (+{} uncommitted paths); HEAD at run time {} (+{} uncommitted paths)",
            m.build_commit, m.build_dirty_paths, m.git_commit, m.git_dirty_paths
        );
        let _ = writeln!(s, "- Toolchain: {}; fio: {}", m.rustc, m.fio_version.as_deref().unwrap_or("not run"));
        let _ = writeln!(s, "- Command: `{}`", m.command_line);
        let p = &self.params;
        let _ = writeln!(
            s,
            "- Store runs: one shard, one glommio executor pinned to CPU {} (preempt timer {} µs, spin before park {} µs), {} B bodies, {} s measured after {} s warm-up, {} MiB segments, other StoreConfig defaults; glommio iopoll probe primed: {}",
            p.pin_cpu,
            p.preempt_us,
            p.spin_before_park_us, p.message_bytes, p.duration_secs, p.warmup_secs, p.segment_mib, if p.iopoll_workaround { "yes" } else { "no" }
        );
        let _ = writeln!(
            s,
            "- fio: io_uring, direct=1, rw=write over a {} MiB file laid out first (overwrite=1), {} s per job after {} s ramp (`scripts/fio-bench.sh`)\n",
            p.fio_size_mib, p.fio_runtime_secs, p.warmup_secs
        );
        let _ = writeln!(
            s,
            "MiB = 2^20 bytes. Latencies in µs (p50 / p99 / p99.9). RingMQ MiB/s are message bytes (stored bytes in parentheses).\n"
        );
        let _ = writeln!(s, "| Run | MiB/s | records/s or commits/s | latency p50 / p99 / p99.9 (µs) | records per fdatasync | bytes per flush | flushes/s |");
        let _ = writeln!(s, "|---|---:|---:|---|---:|---:|---:|");
        if let Some(fio) = &self.fio {
            if let Some(w) = &fio.write_1mib {
                let _ = writeln!(
                    s,
                    "| fio 1 MiB O_DIRECT write (iodepth {}) | {} | {:.0} IOPS | write clat {} | – | – | – |",
                    w.iodepth,
                    f1(w.mib_per_s),
                    w.iops,
                    lat(w.write_clat.p50_us, w.write_clat.p99_us, w.write_clat.p999_us)
                );
            }
            for j in &fio.commit_jobs {
                let _ = writeln!(s, "{}", fio_commit_row(j));
            }
        }
        for r in &self.runs {
            let stored = format!("{} ({})", f1(r.message_mib_per_s), f1(r.stored_mib_per_s));
            let flush_cols = format!("{:.1} | {:.0} | {:.1}", r.records_per_flush, r.flushed_bytes_per_flush, r.flushes_per_s);
            match &r.durable_latency {
                Some(d) => {
                    let a = &r.ack_latency;
                    let _ = writeln!(
                        s,
                        "| {} — append-to-ack | {} | {:.0} | {} | {} |",
                        r.label(),
                        stored,
                        r.records_per_s,
                        lat(a.p50_us, a.p99_us, a.p999_us),
                        flush_cols
                    );
                    let _ = writeln!(s, "| {} — time-to-durable | | | {} | | | |", r.label(), lat(d.p50_us, d.p99_us, d.p999_us));
                }
                None => {
                    let a = &r.ack_latency;
                    let _ = writeln!(
                        s,
                        "| {} — append-to-durable | {} | {:.0} | {} | {} |",
                        r.label(),
                        stored,
                        r.records_per_s,
                        lat(a.p50_us, a.p99_us, a.p999_us),
                        flush_cols
                    );
                }
            }
        }
        let _ = writeln!(s);
        if !self.targets.is_empty() {
            let _ = writeln!(s, "## Targets (quoted, not asserted)\n");
            let _ = writeln!(s, "| Target | ratio | wanted | result | detail |");
            let _ = writeln!(s, "|---|---:|---:|---|---|");
            for t in &self.targets {
                let _ = writeln!(
                    s,
                    "| {} | {:.2} | ≥ {:.2} | {} | {} |",
                    t.name,
                    t.ratio,
                    t.target_ratio,
                    if t.pass { "PASS" } else { "MISS" },
                    t.detail
                );
            }
            let _ = writeln!(s);
        } else if self.fio.is_none() {
            let _ = writeln!(s, "fio was not run: no target ratios.\n");
        }
        let _ = writeln!(s, "## Run details\n");
        let _ = writeln!(s, "| Run | records | stored B/record | busy rejections (wait ms) | segments | drain ms | close ms | read-back / reopen | errors |");
        let _ = writeln!(s, "|---|---:|---:|---|---:|---:|---:|---|---|");
        for r in &self.runs {
            let verify = match &r.verify {
                Some(v) => format!(
                    "{}/{} ok; reopen end {} = written {}, queue max {} = put {}: {}",
                    v.samples_ok,
                    v.samples_read,
                    v.reopen_end_offset,
                    v.write_offset_at_close,
                    v.reopen_queue_max_offset,
                    v.records_put_total,
                    if v.ok { "OK" } else { "FAILED" }
                ),
                None => "not checked".into(),
            };
            let errors = if r.errors.is_empty() { "0".to_string() } else { format!("{}: {}", r.errors_total, r.errors.join("; ")) };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} ({:.0}) | {} | {:.1} | {:.1} | {} | {} |",
                r.label(),
                r.records,
                r.stored_record_bytes,
                r.busy_rejections,
                r.busy_wait_ms,
                r.segments_created,
                r.drain_ms,
                r.close_ms,
                verify,
                errors
            );
        }
        if let Some(fio) = &self.fio {
            let _ = writeln!(s, "\nfio jobs:\n");
            for j in fio.write_1mib.iter().chain(fio.commit_jobs.iter()) {
                let _ = writeln!(s, "- `{}` ({})", j.command, j.purpose);
            }
            for r in self.runs.iter().filter(|r| r.mode.starts_with("sync")) {
                let _ = writeln!(
                    s,
                    "- {}: {:.0} bytes per flush → fio bs {}",
                    r.label(),
                    r.flushed_bytes_per_flush,
                    bytes_per_flush_rounded(r)
                );
            }
        }
        s
    }
}

fn fio_commit_row(j: &FioJobResult) -> String {
    let sync = j.sync_lat.as_ref().map(|l| format!("; fdatasync {}", lat(l.p50_us, l.p99_us, l.p999_us))).unwrap_or_default();
    format!(
        "| fio commit rate, bs={} + fdatasync=1 (iodepth {}) | {} | {:.0} commits/s | write clat {}{} | – | {} | {:.0} |",
        j.bs_bytes,
        j.iodepth,
        f1(j.mib_per_s),
        j.commits_per_s.unwrap_or(0.0),
        lat(j.write_clat.p50_us, j.write_clat.p99_us, j.write_clat.p999_us),
        sync,
        j.bs_bytes,
        j.commits_per_s.unwrap_or(0.0)
    )
}
