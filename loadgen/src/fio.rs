//! fio baselines for the store benchmark: O_DIRECT sequential writes at 1 MiB (the
//! bandwidth ceiling for async flush) and, per sync run, at the run's bytes per flush
//! with `fdatasync=1` (the commit-rate ceiling for group commit).
//!
//! The job definition lives in `scripts/fio-bench.sh` (embedded here with
//! `include_str!` and run in its `job` mode), so standalone runs of the script and this
//! bench execute the same fio command. fio's JSON (`--output-format=json`) is parsed
//! with serde_json.

use crate::store_bench::RunResult;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const SCRIPT: &str = include_str!("../../scripts/fio-bench.sh");
const BLOCK_BYTES: u64 = 4096;
const MIB: u64 = 1 << 20;
/// iodepth of the 1 MiB bandwidth job (the store's flush writes its 1 MiB chunks
/// concurrently; pre-allocation keeps 8 in flight).
pub const BANDWIDTH_IODEPTH: u32 = 8;

pub fn available() -> bool {
    Command::new("fio").arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

pub struct Plan {
    pub dir: PathBuf,
    pub size_bytes: u64,
    pub runtime_secs: u64,
    pub ramp_secs: u64,
}

/// Write latency percentiles (completion latency), in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct ClatUs {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FioJobResult {
    /// What the job is the baseline for.
    pub purpose: String,
    /// The store run (label) this job is the baseline for; empty for the 1 MiB job.
    pub for_run: String,
    pub bs_bytes: u64,
    pub iodepth: u32,
    pub fdatasync: bool,
    pub runtime_ms: u64,
    pub mib_per_s: f64,
    pub iops: f64,
    /// With `fdatasync`: one fdatasync per write, so commits/s = fdatasyncs/s.
    pub commits_per_s: Option<f64>,
    /// With `fdatasync`: fio's own CPU (user + system) per commit, µs. Nearly all of it
    /// is the kernel's write and fdatasync path: the floor under any server's CPU per
    /// durable message at one in flight on this host.
    pub cpu_us_per_commit: Option<f64>,
    pub write_clat: ClatUs,
    /// With `fdatasync`: the fdatasync latency.
    pub sync_lat: Option<ClatUs>,
    pub fio_version: String,
    /// fio's "job options" as it reports them (the exact job).
    pub job_options: Value,
    pub command: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct FioResults {
    /// 1 MiB O_DIRECT sequential write, no fdatasync (iodepth `BANDWIDTH_IODEPTH`),
    /// run right after the async store run (or at the end if there is none).
    pub write_1mib: Option<FioJobResult>,
    /// One per sync run, run right after it: fdatasync=1 at the run's bytes per flush
    /// rounded up to 4 KiB. The device's speed drifts, so each baseline is measured
    /// next to the run it is compared with.
    pub commit_jobs: Vec<FioJobResult>,
}

impl FioResults {
    /// The commit job measured for a sync run.
    pub fn commit_job_for(&self, run: &RunResult) -> Option<&FioJobResult> {
        self.commit_jobs.iter().find(|j| j.for_run == run.label())
    }
}

/// A sync run's average bytes per flush (as the store counts them), rounded up to
/// 4 KiB: the size of the O_DIRECT write one of its group commits issues.
pub fn bytes_per_flush_rounded(run: &RunResult) -> u64 {
    let b = run.flushed_bytes_per_flush.max(1.0).ceil() as u64;
    b.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

/// The 1 MiB O_DIRECT write bandwidth job.
pub fn run_bandwidth_job(plan: &Plan) -> Result<FioJobResult, String> {
    eprintln!("store-bench: fio 1 MiB O_DIRECT write, iodepth {BANDWIDTH_IODEPTH} ...");
    let job = run_job(plan, "async flush bandwidth ceiling", "", MIB, false, BANDWIDTH_IODEPTH)?;
    eprintln!("store-bench:   fio {:.1} MiB/s", job.mib_per_s);
    Ok(job)
}

/// The commit-rate job for a sync run: fdatasync=1, iodepth 1, bs = its bytes per flush.
pub fn run_commit_job(plan: &Plan, run: &RunResult) -> Result<FioJobResult, String> {
    let bs = bytes_per_flush_rounded(run);
    eprintln!("store-bench: fio commit rate at bs={bs} with fdatasync=1 ...");
    let job = run_job(plan, &format!("commit-rate ceiling for {}", run.label()), &run.label(), bs, true, 1)?;
    eprintln!("store-bench:   fio {:.0} commits/s, {:.1} MiB/s", job.commits_per_s.unwrap_or(0.0), job.mib_per_s);
    Ok(job)
}

/// A commit-rate job at `bs_bytes` (fdatasync after every write, iodepth 1).
pub fn run_commit_job_bs(plan: &Plan, purpose: &str, bs_bytes: u64) -> Result<FioJobResult, String> {
    run_job(plan, purpose, "", bs_bytes, true, 1)
}

fn run_job(plan: &Plan, purpose: &str, for_run: &str, bs_bytes: u64, fdatasync: bool, iodepth: u32) -> Result<FioJobResult, String> {
    let args: Vec<String> = vec![
        "job".into(),
        plan.dir.display().to_string(),
        bs_bytes.to_string(),
        (fdatasync as u8).to_string(),
        iodepth.to_string(),
        plan.size_bytes.max(bs_bytes).to_string(),
        plan.runtime_secs.to_string(),
        plan.ramp_secs.to_string(),
    ];
    let command = format!("scripts/fio-bench.sh {}", args.join(" "));
    let output = Command::new("bash")
        .arg("-c")
        .arg(SCRIPT)
        .arg("fio-bench.sh")
        .args(&args)
        .output()
        .map_err(|e| format!("run fio ({command}): {e}"))?;
    if !output.status.success() {
        return Err(format!("fio failed ({command}): {}\n{}", output.status, String::from_utf8_lossy(&output.stderr).trim()));
    }
    let json: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "fio output is not JSON ({command}): {e}: {}",
            String::from_utf8_lossy(&output.stdout).chars().take(400).collect::<String>()
        )
    })?;
    parse(&json, purpose, for_run, bs_bytes, fdatasync, iodepth, command)
}

/// fio's `usr_cpu` and `sys_cpu` are percent of one CPU over the job's runtime, so per
/// operation they are `(usr + sys) / 100 * 1e6 / iops` µs.
fn cpu_us_per_op(job: &Value, iops: f64) -> Option<f64> {
    let usr = job.get("usr_cpu").and_then(Value::as_f64)?;
    let sys = job.get("sys_cpu").and_then(Value::as_f64)?;
    (iops > 0.0).then(|| (usr + sys) / 100.0 * 1e6 / iops)
}

fn percentiles_us(v: &Value) -> Option<ClatUs> {
    let p = v.get("percentile")?;
    let at = |k: &str| p.get(k).and_then(Value::as_f64).map(|ns| ns / 1000.0);
    Some(ClatUs { p50_us: at("50.000000")?, p99_us: at("99.000000")?, p999_us: at("99.900000")? })
}

fn parse(
    json: &Value,
    purpose: &str,
    for_run: &str,
    bs_bytes: u64,
    fdatasync: bool,
    iodepth: u32,
    command: String,
) -> Result<FioJobResult, String> {
    let job = json.get("jobs").and_then(|j| j.get(0)).ok_or("fio JSON has no jobs[0]")?;
    if let Some(err) = job.get("error").and_then(Value::as_i64).filter(|&e| e != 0) {
        return Err(format!("fio job reported error {err} ({command})"));
    }
    let write = job.get("write").ok_or("fio JSON has no jobs[0].write")?;
    let num = |k: &str| write.get(k).and_then(Value::as_f64).ok_or(format!("fio JSON has no write.{k}"));
    let bw_bytes = num("bw_bytes")?;
    let iops = num("iops")?;
    let runtime_ms = num("runtime")? as u64;
    let write_clat = percentiles_us(write.get("clat_ns").unwrap_or(&Value::Null)).ok_or("fio JSON has no write.clat_ns percentiles")?;
    let (commits_per_s, sync_lat, cpu_us_per_commit) = if fdatasync {
        // `fdatasync=1`: one fdatasync after every write, so commits/s = writes/s.
        let sync = job.get("sync").and_then(|s| s.get("lat_ns"));
        let rate = iops;
        (Some(rate), sync.and_then(percentiles_us), cpu_us_per_op(job, iops))
    } else {
        (None, None, None)
    };
    Ok(FioJobResult {
        purpose: purpose.to_string(),
        for_run: for_run.to_string(),
        bs_bytes,
        iodepth,
        fdatasync,
        runtime_ms,
        mib_per_s: bw_bytes / MIB as f64,
        iops,
        commits_per_s,
        cpu_us_per_commit,
        write_clat,
        sync_lat,
        fio_version: json.get("fio version").and_then(Value::as_str).unwrap_or("?").to_string(),
        job_options: job.get("job options").cloned().unwrap_or(Value::Null),
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::cpu_us_per_op;
    use serde_json::json;

    fn check(usr: f64, sys: f64, iops: f64, expected_us: Option<f64>) {
        let got = cpu_us_per_op(&json!({ "usr_cpu": usr, "sys_cpu": sys }), iops);
        match (got, expected_us) {
            (Some(g), Some(e)) => assert!((g - e).abs() < 1e-6, "usr {usr} sys {sys} iops {iops}: {g} != {e}"),
            (g, e) => assert_eq!(g, e, "usr {usr} sys {sys} iops {iops}"),
        }
    }

    #[test]
    fn cpu_per_commit_is_the_busy_share_of_one_cpu_divided_by_the_rate() {
        // 39.4 % of a CPU at 3,713 commits/s: the 2-vCPU VM's fdatasync floor.
        check(1.26, 38.14, 3713.0, Some(39.4 / 100.0 * 1e6 / 3713.0));
        check(0.0, 50.0, 1000.0, Some(500.0));
        check(10.0, 0.0, 0.0, None);
    }

    #[test]
    fn cpu_per_commit_needs_both_fields() {
        assert_eq!(cpu_us_per_op(&json!({ "usr_cpu": 1.0 }), 10.0), None);
        assert_eq!(cpu_us_per_op(&json!({}), 10.0), None);
    }
}
