//! `loadgen suite`: the standard workloads, each run side by side with its peers at the
//! same durability, plus the host's limits measured in the same run.
//!
//! - W1 durable: 1 KiB, ack after fdatasync, 1 and 32 in flight (one producer); vs Redis
//!   `appendfsync always` and rocketmq-broker SYNC_FLUSH.
//! - W2 throughput: 1 KiB, 4 producers sending batches, one consumer tailing, async
//!   flush: the highest offered rate whose end-to-end p99 stays under
//!   `W2_E2E_P99_LIMIT_MS` (found by stepping the rate down from the unthrottled
//!   maximum); vs Redis `everysec` and rocketmq-broker ASYNC_FLUSH.
//! - W3 small messages: 128 B in batches of 100, then a cold catch-up read of a
//!   `backlog_mib` backlog (page cache dropped first when root).
//! - recovery (not in the default set: it needs `--recovery-clean-store-gib` + 5 GiB of
//!   free disk and minutes): `loadgen verify recovery`'s two restarts, after a SIGKILL
//!   under W2-shaped load and after a clean stop with a large store, in a "Recovery"
//!   section and `results/suite-recovery.{json,md}`.
//!
//! Outputs per workload: `results/suite-<w>.{json,md,svg}` (OMB JSON, summary, plot),
//! and `results/suite.md` with ratios and fractions of the host limits.
//!
//! Invariant: a peer that cannot run (not installed, failed to start) becomes a row
//! saying why, never a silent omission and never a fake number.

use ringmq_broker::config::RouteMode;
use crate::embedded::{EmbeddedCluster, EmbeddedSpec};
use crate::replication::LagSampler;
use ringmq_broker::config::BrokerRole;
use std::cell::RefCell;
use crate::engine::{self, EngineSpec, Role, SizeDist};
use crate::record::{Durability, RunRecord};
use crate::workload_cmd::{self, FlushArg, SendModeArg, WorkloadArgs};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const W2_E2E_P99_LIMIT_MS: f64 = 10.0;
/// The replication lag a slave must stay under in W2 (p99 of the samples, ms): an
/// ASYNC_MASTER streams only what is durable, so its slave trails by up to one flush
/// interval (500 ms by default) plus the stream's own delay.
pub const W2_REPLICATION_LAG_P99_BOUND_MS: u64 = 1_000;
/// Offered rates tried in W2, as fractions of the unthrottled maximum.
pub const W2_RATE_STEPS: [f64; 4] = [0.9, 0.75, 0.5, 0.25];
/// `scaling`: producers and sends in flight per producer (the shape: async, 64).
pub const SCALING_PRODUCERS: usize = 2;
pub const SCALING_IN_FLIGHT: usize = 64;
/// `scaling`: the fixed rate (msg/s) at which broker CPU per message is compared.
pub const SCALING_FIXED_RATE: f64 = 20_000.0;

#[derive(clap::Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Workloads to run: w1, w2, w3; not by default: recovery, scaling (`--workloads w1,w2,w3,recovery,scaling`).
    #[arg(long, value_delimiter = ',', default_value = "w1,w2,w3")]
    pub workloads: Vec<String>,
    /// Peers to compare with: `redis`, `rocketmq`, `redis-memory` (W2 only: Redis
    /// without persistence, labelled "memory"), or `none`.
    #[arg(long, value_delimiter = ',', default_value = "redis,rocketmq")]
    pub peers: Vec<String>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 15)]
    pub duration_secs: u64,
    #[arg(long, default_value_t = 3)]
    pub warmup_secs: u64,
    /// W3 backlog read back cold, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub backlog_mib: u64,
    /// Parent directory of the stores (a real filesystem).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value = "results")]
    pub out_dir: PathBuf,
    /// Skip fio and the loopback test.
    #[arg(long)]
    pub no_host_limits: bool,
    /// W2 also with master/slave replication, in the same run: `async` (ASYNC_MASTER +
    /// slave), `sync` (SYNC_MASTER + slave), or `none`. Each adds RingMQ rows with the
    /// slave's lag (bytes, messages, ms) in the notes.
    #[arg(long, value_delimiter = ',', default_value = "none")]
    pub replication: Vec<String>,
    /// W2 also with this many shards (host and shard route mode side by side), and the
    /// shard count of the `scaling` workload's multi-shard rows; 1 skips the extra W2 rows.
    #[arg(long, default_value_t = 1)]
    pub w2_shards: usize,
    /// recovery: seconds of W2-shaped load before the SIGKILL.
    #[arg(long, default_value_t = crate::recovery::LOAD_SECS_DEFAULT)]
    pub recovery_load_secs: u64,
    /// recovery: the store size before the clean stop, GiB (0 skips that row).
    #[arg(long, default_value_t = crate::recovery::CLEAN_STORE_GIB_DEFAULT)]
    pub recovery_clean_store_gib: f64,
}

/// One row that could not be measured.
#[derive(Debug, Clone)]
struct Skipped {
    system: String,
    config: String,
    reason: String,
}

struct Step {
    name: String,
    title: String,
    runs: Vec<RunRecord>,
    skipped: Vec<Skipped>,
    notes: Vec<String>,
    /// A section that is not a table of runs (recovery), rendered already.
    section: Option<String>,
}

fn base_args(dir: &Path, duration_secs: u64, warmup_secs: u64) -> WorkloadArgs {
    WorkloadArgs {
        namesrv: None,
        access_key: None,
        secret_key: None,
        tls: false,
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
        topic: "SuiteBench".into(),
        topics: 1,
        queues: 8,
        message_bytes: "1024".into(),
        producers: 1,
        consumers: 1,
        in_flight: 1,
        batch: 1,
        send_mode: SendModeArg::Sync,
        rate: None,
        duration_secs,
        warmup_secs,
        tags: Vec::new(),
        keys: false,
        delay_level: None,
        timer_delay_secs: None,
        transactional: false,
        rollback_percent: 0,
        baseline_plain: false,
        delay_levels: ringmq_broker::schedule::DEFAULT_DELAY_LEVELS.into(),
        from_first: false,
        backlog_messages: 0,
        flush: FlushArg::Sync,
        write_through: false,
        no_write_through: false,
        spin_before_park_us: 0,
        pull_batch_size: 64,
        read_ahead_windows: ringmq_broker::store::config::StoreConfig::default().read_ahead_windows_max,
        shards: 1,
        route_mode: ringmq_broker::config::RouteMode::Host,
        dir: Some(dir.to_path_buf()),
        out: None,
        quiet: true,
    }
}

/// The crates.io rocketmq-broker + rocketmq-namesrv, started by
/// `scripts/peer-rocketmq-rust.sh`; stopped on drop.
struct RocketmqPeer {
    namesrv: String,
    dir: PathBuf,
}

impl RocketmqPeer {
    fn start(flush: FlushArg, dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let flush_name = if flush == FlushArg::Sync { "sync" } else { "async" };
        let out = Command::new("scripts/peer-rocketmq-rust.sh")
            .args(["start", "--flush", flush_name, "--dir"])
            .arg(dir)
            .output()
            .map_err(|e| format!("scripts/peer-rocketmq-rust.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/peer-rocketmq-rust.sh start failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim()
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let namesrv = stdout
            .lines()
            .find_map(|l| l.strip_prefix("NAMESRV="))
            .ok_or_else(|| format!("peer script printed no NAMESRV= line: {stdout}"))?
            .trim()
            .to_string();
        Ok(Self { namesrv, dir: dir.to_path_buf() })
    }
}

impl Drop for RocketmqPeer {
    fn drop(&mut self) {
        let _ = Command::new("scripts/peer-rocketmq-rust.sh").args(["stop", "--dir"]).arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ringmq_run(a: &WorkloadArgs, role: Role, rate: Option<f64>) -> Result<RunRecord, String> {
    let sizes = workload_cmd::validate(a)?;
    let parent = a.dir.clone().ok_or("no store directory")?;
    let embedded = EmbeddedSpec::of(a, None);
    let cluster = EmbeddedCluster::start(&embedded, &parent)?;
    let addrs = vec![cluster.namesrv_addr.clone()];
    workload_cmd::create_topics(&addrs, &workload_cmd::topic_names(a), a.queues)?;
    let mut spec = workload_cmd::engine_spec(role, a, sizes, addrs, true);
    spec.workload.target_rate_per_sec = rate;
    spec.progress = false;
    let label = format!("{} flush, {} shard{}", if a.flush == FlushArg::Sync { "sync" } else { "async" }, a.shards, embedded.label_suffix());
    let mut r = engine::run(&spec, "RingMQ", &label, a.flush.durability());
    // Forwarded share and broker CPU per message, in the row's label.
    if let (Ok(run), Some(note)) = (&mut r, crate::embedded::broker_cost_note(&cluster)) {
        run.config.push_str(&note);
    }
    drop(cluster);
    r
}

/// `ringmq_run` with a slave beside the master (`role`: ASYNC_MASTER or SYNC_MASTER);
/// the slave's lag during the run goes to `lag_notes`.
fn ringmq_replicated_run(a: &WorkloadArgs, role: Role, rate: Option<f64>, master: BrokerRole, lag_notes: &RefCell<Vec<String>>) -> Result<RunRecord, String> {
    let sizes = workload_cmd::validate(a)?;
    let parent = a.dir.clone().ok_or("no store directory")?;
    let spec = EmbeddedSpec::of(a, Some(master));
    let cluster = EmbeddedCluster::start(&spec, &parent)?;
    let addrs = vec![cluster.namesrv_addr.clone()];
    workload_cmd::create_topics(&addrs, &workload_cmd::topic_names(a), a.queues)?;
    let mut spec = workload_cmd::engine_spec(role, a, sizes, addrs, true);
    spec.workload.target_rate_per_sec = rate;
    spec.progress = false;
    let label = format!("async flush, {} shard, {} + slave", a.shards, master_name(master));
    let slave = cluster.slave_addr.clone().ok_or("no slave")?;
    let sampler = LagSampler::start(cluster.broker_addr.clone(), slave);
    let r = engine::run(&spec, "RingMQ", &label, a.flush.durability());
    let lag = sampler.finish();
    drop(cluster);
    if let Ok(run) = &r {
        let verdict = if lag.samples == 0 {
            "no samples".to_string()
        } else if lag.ms.p99 <= W2_REPLICATION_LAG_P99_BOUND_MS {
            format!("within the {W2_REPLICATION_LAG_P99_BOUND_MS} ms bound")
        } else {
            format!("OVER the {W2_REPLICATION_LAG_P99_BOUND_MS} ms bound")
        };
        let offered = rate.map(|r| format!("{r:.0} msg/s")).unwrap_or_else(|| "unthrottled".into());
        lag_notes.borrow_mut().push(format!("RingMQ {} + slave, offered {offered} (sent {:.0}/s): {} — {verdict}", master_name(master), run.send_rate_per_sec(), lag.describe()));
    }
    r
}

fn master_name(role: BrokerRole) -> &'static str {
    match role {
        BrokerRole::SyncMaster => "SYNC_MASTER",
        BrokerRole::AsyncMaster => "ASYNC_MASTER",
        BrokerRole::Slave => "SLAVE",
    }
}

fn rocketmq_run(a: &WorkloadArgs, role: Role, rate: Option<f64>, dir: &Path) -> Result<RunRecord, String> {
    let sizes = workload_cmd::validate(a)?;
    let peer = RocketmqPeer::start(a.flush, &dir.join("rocketmq-peer"))?;
    let addrs = vec![peer.namesrv.clone()];
    workload_cmd::create_topics(&addrs, &workload_cmd::topic_names(a), a.queues)?;
    let mut spec = workload_cmd::engine_spec(role, a, sizes, addrs, false);
    spec.consume_from_first = true;
    spec.workload.target_rate_per_sec = rate;
    spec.progress = false;
    let label = if a.flush == FlushArg::Sync { "SYNC_FLUSH" } else { "ASYNC_FLUSH" };
    let r = engine::run(&spec, "rocketmq-broker (crates.io)", label, a.flush.durability());
    drop(peer);
    r
}

fn redis_run(a: &WorkloadArgs, role: Role, rate: Option<f64>, dir: &Path) -> Result<RunRecord, String> {
    let durability = if a.flush == FlushArg::Sync { Durability::FsyncBeforeAck } else { Durability::WithinOneSecond };
    redis_run_with(a, role, rate, dir, durability)
}

fn redis_run_with(a: &WorkloadArgs, role: Role, rate: Option<f64>, dir: &Path, durability: Durability) -> Result<RunRecord, String> {
    let sizes = workload_cmd::validate(a)?;
    let mut w = workload_cmd::workload(&format!("{}-{}", role.name(), a.message_bytes), a, &sizes, role);
    w.target_rate_per_sec = rate;
    crate::peers::run_redis(&w, durability, &dir.join("redis-peer"), &|_| {}).map_err(|e| e.to_string())
}

fn push(step: &mut Step, system: &str, config: &str, r: Result<RunRecord, String>) {
    match r {
        Ok(run) => {
            eprintln!(
                "suite: {} {}: {:.0} msg/s, {:.1} MiB/s, send p99 {:.2} ms, e2e p99 {:.2} ms",
                run.system,
                run.config,
                run.send_rate_per_sec(),
                run.send_mib_per_sec(),
                run.send_latency_us.value_at_quantile(0.99) as f64 / 1000.0,
                run.e2e_latency_us.value_at_quantile(0.99) as f64 / 1000.0
            );
            step.runs.push(run);
        }
        Err(reason) => {
            eprintln!("suite: {system} {config}: not run: {reason}");
            step.skipped.push(Skipped { system: system.into(), config: config.into(), reason });
        }
    }
}

fn e2e_p99_ms(r: &RunRecord) -> f64 {
    r.e2e_latency_us.value_at_quantile(0.99) as f64 / 1000.0
}

/// A run meets W2's limit only if it moved messages without errors: a run whose sends
/// all failed has an empty histogram (p99 0) and must not pass.
fn meets_w2_limit(r: &RunRecord) -> bool {
    r.errors.iter().all(|(_, n)| *n == 0) && r.send_rate_per_sec() > 0.0 && e2e_p99_ms(r) < W2_E2E_P99_LIMIT_MS
}

/// W2's search: the unthrottled run, then offered rates stepping down until one keeps
/// the end-to-end p99 under the limit. Returns every run made, best passing last.
fn w2_search(run: &dyn Fn(Option<f64>) -> Result<RunRecord, String>, notes: &mut Vec<String>, system: &str) -> Result<RunRecord, String> {
    let max = run(None)?;
    if meets_w2_limit(&max) {
        notes.push(format!("{system}: unthrottled run already within the p99 limit ({:.2} ms)", e2e_p99_ms(&max)));
        return Ok(max);
    }
    let top = max.send_rate_per_sec();
    for f in W2_RATE_STEPS {
        let rate = (top * f).max(1.0);
        let r = run(Some(rate))?;
        notes.push(format!("{system}: offered {rate:.0} msg/s → sent {:.0}/s, e2e p99 {:.2} ms", r.send_rate_per_sec(), e2e_p99_ms(&r)));
        if meets_w2_limit(&r) && r.send_rate_per_sec() >= 0.95 * rate {
            return Ok(r);
        }
    }
    notes.push(format!("{system}: no step met e2e p99 < {W2_E2E_P99_LIMIT_MS} ms; the unthrottled run is reported"));
    Ok(max)
}

fn drop_page_cache() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n").is_ok()
}

pub fn run(args: SuiteArgs) -> Result<(), String> {
    let parent = match &args.dir {
        Some(d) => d.clone(),
        None => workload_cmd::default_store_parent()?,
    };
    let dir = parent.join(format!("ringmq-suite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut steps = Vec::new();
    let HostLimits { lines: limits, fio_mib, fio_commits, fio_cpu_us_per_commit } =
        if args.no_host_limits { HostLimits::default() } else { host_limits(&dir) };
    for w in &args.workloads {
        let mut step = Step { name: w.clone(), title: String::new(), runs: Vec::new(), skipped: Vec::new(), notes: Vec::new(), section: None };
        match w.as_str() {
            "w1" => w1(&args, &dir, &mut step),
            "w2" => w2(&args, &dir, &mut step),
            "w3" => w3(&args, &dir, &mut step),
            "scaling" => scaling(&args, &dir, &mut step),
            "recovery" => {
                recovery(&args, &dir, &mut step)?;
                steps.push(step);
                continue;
            }
            other => return Err(format!("unknown workload `{other}` (w1, w2, w3, recovery)")),
        }
        let out = args.out_dir.join(format!("suite-{}.json", step.name));
        workload_cmd::write_outputs(&out, &step.runs, &step.title, &dir)?;
        steps.push(step);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let md = summary_md(&steps, &limits, fio_mib, fio_commits, fio_cpu_us_per_commit, &args.out_dir);
    let path = args.out_dir.join("suite.md");
    std::fs::write(&path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{md}");
    eprintln!("suite: wrote {}", path.display());
    Ok(())
}

impl SuiteArgs {
    /// Whether `--peers` names `peer`.
    fn want(&self, peer: &str) -> bool {
        self.peers.iter().any(|x| x == peer)
    }
}

/// The host's limits, measured in the same run as the workloads they bound.
#[derive(Debug, Default)]
struct HostLimits {
    /// One summary line per limit, or why it was not measured.
    lines: Vec<String>,
    fio_mib: Option<f64>,
    fio_commits: Option<f64>,
    fio_cpu_us_per_commit: Option<f64>,
}

/// Loopback TCP, then (when fio is installed) disk bandwidth and commit rate in `dir`:
/// before any workload, so nothing else loads the host while they run.
fn host_limits(dir: &Path) -> HostLimits {
    let mut limits = Vec::new();
    let mut fio_mib = None;
    let mut fio_commits = None;
    let mut fio_cpu_us_per_commit = None;
    match crate::netbench::measure(3.0) {
        Ok(n) => limits.push(format!(
            "loopback TCP: {:.0} MiB/s one connection, RTT p50 {:.1} µs / p99 {:.1} µs",
            n.loopback_mib_per_sec, n.loopback_rtt_us_p50, n.loopback_rtt_us_p99
        )),
        Err(e) => limits.push(format!("loopback TCP: not measured: {e}")),
    }
    if crate::fio::available() {
        let plan = crate::fio::Plan { dir: dir.to_path_buf(), size_bytes: 1 << 30, runtime_secs: 5, ramp_secs: 1 };
        match crate::fio::run_bandwidth_job(&plan) {
            Ok(j) => {
                limits.push(format!("disk (fio 1 MiB O_DIRECT writes, iodepth 8): {:.0} MiB/s", j.mib_per_s));
                fio_mib = Some(j.mib_per_s);
            }
            Err(e) => limits.push(format!("disk bandwidth: not measured: {e}")),
        }
        match crate::fio::run_commit_job_bs(&plan, "W1 commit ceiling", 4096) {
            Ok(j) => {
                let c = j.commits_per_s.unwrap_or(0.0);
                let cpu = j.cpu_us_per_commit.map(|u| format!(", {u:.0} CPU-µs per commit (fio's own, nearly all kernel: the floor under CPU per message at 1 in flight)")).unwrap_or_default();
                limits.push(format!("disk (fio 4 KiB write + fdatasync, iodepth 1): {c:.0} commits/s{cpu}"));
                fio_commits = Some(c);
                fio_cpu_us_per_commit = j.cpu_us_per_commit;
            }
            Err(e) => limits.push(format!("disk commit rate: not measured: {e}")),
        }
        let _ = std::fs::remove_file(dir.join("fio-bench.dat"));
    } else {
        limits.push("disk: fio not installed (scripts/install-fio.sh)".into());
    }
    HostLimits { lines: limits, fio_mib, fio_commits, fio_cpu_us_per_commit }
}

/// W1 durable: at 1 and 32 in flight, RingMQ sync flush (plain, O_DSYNC, O_DSYNC
/// spinning), then the peers asked for.
fn w1(args: &SuiteArgs, dir: &Path, step: &mut Step) {
    step.title = "W1 durable: 1 KiB, ack after fdatasync".into();
    for in_flight in [1usize, 32] {
        let mut a = base_args(dir, args.duration_secs, args.warmup_secs);
        a.in_flight = in_flight;
        a.flush = FlushArg::Sync;
        eprintln!("suite: W1, {in_flight} in flight");
        // The default (O_DSYNC segments: one IO per group commit), then the same
        // broker with a write and an fdatasync per group commit, then the default
        // spinning before it parks: side by side, so what each costs and saves shows.
        push(step, "RingMQ", "sync flush", ringmq_run(&a, Role::Produce, None));
        let mut fdatasync = a.clone();
        fdatasync.no_write_through = true;
        push(step, "RingMQ", "sync flush", ringmq_run(&fdatasync, Role::Produce, None));
        let mut spin = a.clone();
        spin.spin_before_park_us = W1_SPIN_BEFORE_PARK_US;
        push(step, "RingMQ", "sync flush", ringmq_run(&spin, Role::Produce, None));
        if args.want("redis") {
            push(step, "Redis Streams", "appendfsync always", redis_run(&a, Role::Produce, None, dir));
        }
        if args.want("rocketmq") {
            push(step, "rocketmq-broker", "SYNC_FLUSH", rocketmq_run(&a, Role::Produce, None, dir));
        }
    }
}

/// W2 throughput: `w2_search` for RingMQ, its multi-shard and replicated variants, then
/// the peers asked for; the searches' steps become the section's notes.
fn w2(args: &SuiteArgs, dir: &Path, step: &mut Step) {
    step.title = format!("W2 throughput: 1 KiB, 4 producers × batches of 16, one consumer tailing, async flush; highest rate with e2e p99 < {W2_E2E_P99_LIMIT_MS} ms");
    let mut a = base_args(dir, args.duration_secs, args.warmup_secs);
    a.producers = 4;
    a.in_flight = 4;
    a.batch = 16;
    a.flush = FlushArg::Async;
    let mut notes = Vec::new();
    eprintln!("suite: W2");
    let r = w2_search(&|rate| ringmq_run(&a, Role::E2e, rate), &mut notes, "RingMQ");
    push(step, "RingMQ", "async flush", r);
    // Every shard of the host: host route mode, then shard route mode.
    if args.w2_shards > 1 {
        for mode in [RouteMode::Host, RouteMode::Shard] {
            let mut m = a.clone();
            m.shards = args.w2_shards;
            m.route_mode = mode;
            eprintln!("suite: W2, {} shards, {mode:?} route mode", m.shards);
            let r = w2_search(&|rate| ringmq_run(&m, Role::E2e, rate), &mut notes, "RingMQ");
            push(step, "RingMQ", "async flush", r);
        }
    }
    for mode in args.replication.iter().filter(|m| m.as_str() != "none") {
        let master = match mode.as_str() {
            "async" => BrokerRole::AsyncMaster,
            "sync" => BrokerRole::SyncMaster,
            other => {
                step.skipped.push(Skipped { system: "RingMQ".into(), config: format!("replication {other}"), reason: "unknown --replication mode (async, sync, none)".into() });
                continue;
            }
        };
        let lag_notes = RefCell::new(Vec::new());
        let system = format!("RingMQ {} + slave", master_name(master));
        eprintln!("suite: W2, {system}");
        let r = w2_search(&|rate| ringmq_replicated_run(&a, Role::E2e, rate, master, &lag_notes), &mut notes, &system);
        push(step, "RingMQ", &format!("async flush, {} + slave", master_name(master)), r);
        notes.extend(lag_notes.into_inner());
    }
    if args.want("redis") {
        let r = w2_search(&|rate| redis_run(&a, Role::E2e, rate, dir), &mut notes, "Redis");
        push(step, "Redis Streams", "appendfsync everysec", r);
    }
    if args.want("rocketmq") {
        let r = w2_search(&|rate| rocketmq_run(&a, Role::E2e, rate, dir), &mut notes, "rocketmq-broker");
        push(step, "rocketmq-broker", "ASYNC_FLUSH", r);
    }
    if args.want("redis-memory") {
        let r = w2_search(&|rate| redis_run_with(&a, Role::E2e, rate, dir, Durability::Memory), &mut notes, "Redis (memory)");
        push(step, "Redis Streams", "no persistence", r);
    }
    step.notes = notes;
}

/// W3 small messages: RingMQ and the peers asked for produce, then RingMQ's cold read
/// of a `backlog_mib` backlog.
fn w3(args: &SuiteArgs, dir: &Path, step: &mut Step) {
    step.title = format!("W3 small messages: 128 B in batches of 100; then a cold read of a {} MiB backlog", args.backlog_mib);
    let mut a = base_args(dir, args.duration_secs, args.warmup_secs);
    a.message_bytes = "128".into();
    a.batch = 100;
    a.producers = 2;
    a.in_flight = 4;
    a.flush = FlushArg::Async;
    eprintln!("suite: W3 produce");
    push(step, "RingMQ", "async flush", ringmq_run(&a, Role::Produce, None));
    if args.want("redis") {
        push(step, "Redis Streams", "appendfsync everysec", redis_run(&a, Role::Produce, None, dir));
    }
    if args.want("rocketmq") {
        push(step, "rocketmq-broker", "ASYNC_FLUSH", rocketmq_run(&a, Role::Produce, None, dir));
    }
    eprintln!("suite: W3 cold read");
    let r = w3_cold_read(&a, args.backlog_mib, &mut step.notes);
    push(step, "RingMQ", "cold catch-up read", r);
}

/// Scaling: RingMQ unthrottled, then at `SCALING_FIXED_RATE`, each on 1 shard and on
/// several shards in host and in shard route mode.
fn scaling(args: &SuiteArgs, dir: &Path, step: &mut Step) {
    step.title = format!(
        "Scaling: 1 KiB async sends, {SCALING_PRODUCERS} producers × {SCALING_IN_FLIGHT} in flight, async flush; 1 shard, then {} shards in host and in shard route mode; then each at {SCALING_FIXED_RATE} msg/s for broker CPU-µs per message",
        args.w2_shards.max(2)
    );
    let mut a = base_args(dir, args.duration_secs, args.warmup_secs);
    a.producers = SCALING_PRODUCERS;
    a.in_flight = SCALING_IN_FLIGHT;
    a.send_mode = SendModeArg::Async;
    a.flush = FlushArg::Async;
    let shards = args.w2_shards.max(2);
    let shapes = [(1, RouteMode::Host), (shards, RouteMode::Host), (shards, RouteMode::Shard)];
    for rate in [None, Some(SCALING_FIXED_RATE)] {
        for (n, mode) in shapes {
            let mut m = a.clone();
            m.shards = n;
            m.route_mode = mode;
            eprintln!("suite: scaling, {n} shard(s), {mode:?} route mode, rate {rate:?}");
            push(step, "RingMQ", "async flush", ringmq_run(&m, Role::Produce, rate));
        }
    }
}

/// Recovery: `loadgen verify recovery`'s two restarts; a section of its own, written to
/// `suite-recovery.{json,md}` rather than as a workload's runs.
fn recovery(args: &SuiteArgs, dir: &Path, step: &mut Step) -> Result<(), String> {
    step.title = "Recovery".into();
    eprintln!("suite: recovery");
    let a = crate::recovery::RecoveryArgs { load_secs: args.recovery_load_secs, clean_store_gib: args.recovery_clean_store_gib, dir: Some(dir.to_path_buf()), ..Default::default() };
    match crate::recovery::run_recovery(&a) {
        Ok(r) => {
            write_recovery(&args.out_dir, &r)?;
            step.section = Some(crate::recovery::markdown(&r));
        }
        Err(reason) => {
            eprintln!("suite: recovery: not run: {reason}");
            step.skipped.push(Skipped { system: "RingMQ".into(), config: "recovery".into(), reason });
        }
    }
    Ok(())
}

/// `suite-recovery.json` (the report) and `suite-recovery.md` (machine line and table).
fn write_recovery(out_dir: &Path, r: &crate::recovery::RecoveryReport) -> Result<(), String> {
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let json = out_dir.join("suite-recovery.json");
    std::fs::write(&json, serde_json::to_string_pretty(r).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", json.display()))?;
    let md = out_dir.join("suite-recovery.md");
    std::fs::write(&md, crate::recovery::summary(r)).map_err(|e| format!("{}: {e}", md.display()))
}

/// Builds a backlog of `backlog_mib` with the producers, drops the page cache, and
/// reads it all back with one consumer from the first offset.
fn w3_cold_read(a: &WorkloadArgs, backlog_mib: u64, notes: &mut Vec<String>) -> Result<RunRecord, String> {
    let sizes = SizeDist::fixed(128);
    let parent = a.dir.clone().ok_or("no store directory")?;
    let cluster = EmbeddedCluster::start(&EmbeddedSpec::of(a, None), &parent)?;
    let addrs = vec![cluster.namesrv_addr.clone()];
    workload_cmd::create_topics(&addrs, &workload_cmd::topic_names(a), a.queues)?;
    let messages = backlog_mib * 1024 * 1024 / 128;
    let mut preload: EngineSpec = workload_cmd::engine_spec(Role::Produce, a, sizes.clone(), addrs.clone(), true);
    preload.workload.duration_secs = workload_cmd::DURATION_SECS_MAX;
    preload.workload.warmup_secs = 0;
    preload.progress = false;
    preload.lines = false;
    let sent = workload_cmd::preload_backlog(&preload, messages)?;
    notes.push(format!("cold read: backlog of {sent} messages of 128 B ({:.0} MiB of bodies)", sent as f64 * 128.0 / 1048576.0));
    if drop_page_cache() {
        notes.push("cold read: page cache dropped before reading (the store reads with O_DIRECT anyway)".into());
    } else {
        notes.push("cold read: page cache not dropped (not root); the store reads with O_DIRECT anyway".into());
    }
    let mut read = a.clone();
    // A catch-up read takes all it can per round trip (the broker caps a pull at 4 MiB).
    read.pull_batch_size = W3_PULL_BATCH_SIZE;
    read.duration_secs = workload_cmd::DURATION_SECS_MAX;
    read.warmup_secs = 0;
    let mut spec = workload_cmd::engine_spec(Role::Consume, &read, sizes, addrs, true);
    spec.consume_target_messages = Some(sent);
    spec.progress = false;
    let r = engine::run(&spec, "RingMQ", "cold catch-up read", Durability::WithinOneSecond);
    drop(cluster);
    r
}

/// Messages per pull in W3's cold read (the most a pull may ask for).
const W3_PULL_BATCH_SIZE: i32 = 1024;

/// W1's spinning variant: long enough to cover a loopback round trip plus a commit's
/// completion on this class of host, short enough to cost little when idle.
const W1_SPIN_BEFORE_PARK_US: u64 = 200;

fn find<'a>(runs: &'a [RunRecord], system: &str, config_prefix: &str, in_flight: Option<usize>) -> Option<&'a RunRecord> {
    runs.iter().find(|r| r.system.starts_with(system) && r.config.starts_with(config_prefix) && in_flight.is_none_or(|n| r.workload.in_flight_per_producer == n))
}

fn ratio_line(out: &mut String, label: &str, ours: Option<&RunRecord>, peer: Option<&RunRecord>, target: Option<f64>) {
    match (ours, peer) {
        (Some(o), Some(p)) if p.send_rate_per_sec() > 0.0 => {
            let ratio = o.send_rate_per_sec() / p.send_rate_per_sec();
            let p99 = |r: &RunRecord| r.send_latency_us.value_at_quantile(0.99) as f64 / 1000.0;
            let verdict = target.map(|t| if ratio >= t { format!(" — target ≥ {t}x: met") } else { format!(" — target ≥ {t}x: MISSED") }).unwrap_or_default();
            let _ = writeln!(
                out,
                "- {label}: {ratio:.2}x throughput ({:.0} vs {:.0} msg/s), send p99 {:.2} vs {:.2} ms{verdict}",
                o.send_rate_per_sec(),
                p.send_rate_per_sec(),
                p99(o),
                p99(p)
            );
        }
        _ => {
            let _ = writeln!(out, "- {label}: not compared (a side did not run)");
        }
    }
}

fn summary_md(steps: &[Step], limits: &[String], fio_mib: Option<f64>, fio_commits: Option<f64>, fio_cpu_us_per_commit: Option<f64>, out_dir: &Path) -> String {
    let facts = crate::report::MachineInfo::collect(Path::new("."), crate::report::command_line());
    let mut out = format!(
        "# RingMQ standard suite\n\n- Machine: {} x {}, {} MiB, kernel {}\n- Commit: {} ({} uncommitted paths)\n- Command: `{}`\n- When: {}\n\n## Host limits (same run)\n\n",
        facts.cpu_count,
        facts.cpu_model,
        facts.mem_total_kib / 1024,
        facts.kernel,
        facts.git_commit,
        facts.git_dirty_paths,
        facts.command_line,
        crate::report::utc_now()
    );
    for l in limits {
        let _ = writeln!(out, "- {l}");
    }
    for s in steps {
        if s.name == "recovery" {
            let _ = write!(out, "\n## {}\n\n", s.title);
            match &s.section {
                Some(section) => out.push_str(section),
                None => {
                    for k in &s.skipped {
                        let _ = writeln!(out, "- {} {}: not run: {}", k.system, k.config, k.reason);
                    }
                }
            }
            let _ = writeln!(out, "\nFiles: `{0}/suite-recovery.json`, `{0}/suite-recovery.md`.", out_dir.display());
            continue;
        }
        let _ = write!(out, "\n## {}\n\n{}", s.title, crate::summary::table(&s.runs));
        for k in &s.skipped {
            let _ = writeln!(out, "| {} | {} | not run: {} | | | | | | |", k.system, k.config, k.reason.replace('|', "/"));
        }
        out.push('\n');
        match s.name.as_str() {
            "scaling" => {
                let one = s.runs.iter().find(|r| r.config.contains(", 1 shard") && r.workload.target_rate_per_sec.is_none());
                for r in s.runs.iter().filter(|r| !r.config.contains(", 1 shard") && r.workload.target_rate_per_sec.is_none()) {
                    ratio_line(&mut out, &format!("RingMQ ({}) / 1 shard", r.config), Some(r), one, if r.config.contains("shard route mode") { Some(1.0) } else { None });
                }
            }
            "w1" => {
                for n in [1usize, 32] {
                    let redis = find(&s.runs, "Redis", "appendfsync always", Some(n));
                    let rocketmq = find(&s.runs, "rocketmq", "SYNC", Some(n));
                    for ours in s.runs.iter().filter(|r| r.system.starts_with("RingMQ") && r.config.starts_with("sync") && r.workload.in_flight_per_producer == n) {
                        let who = format!("RingMQ ({})", ours.config);
                        ratio_line(&mut out, &format!("{n} in flight, {who} / Redis always"), Some(ours), redis, if n == 1 { None } else { Some(2.0) });
                        ratio_line(&mut out, &format!("{n} in flight, {who} / rocketmq-broker SYNC_FLUSH"), Some(ours), rocketmq, Some(3.0));
                        if let Some(c) = fio_commits {
                            let ratio = ours.send_rate_per_sec() / c.max(1.0);
                            let verdict = if n == 1 { if ratio >= 0.85 { " — target ≥ 0.85: met" } else { " — target ≥ 0.85: MISSED" } } else { "" };
                            let _ = writeln!(out, "- {n} in flight: {who} acks {:.0} msg/s; fio's 4 KiB commit rate is {c:.0}/s ({ratio:.2} acks per fio commit){verdict}", ours.send_rate_per_sec());
                        }
                        if let (1, Some(floor)) = (n, fio_cpu_us_per_commit) {
                            let verdict = if floor > 40.0 { "the target is below this host's floor" } else { "the floor leaves room for the target" };
                            let _ = writeln!(out, "- 1 in flight: {who}: target ≤ 40 broker CPU-µs/msg; one fio 4 KiB write + fdatasync alone costs {floor:.0} CPU-µs on this host: {verdict}");
                        }
                    }
                }
            }
            "w2" => {
                ratio_line(&mut out, "RingMQ / Redis everysec", find(&s.runs, "RingMQ", "async", None), find(&s.runs, "Redis", "appendfsync everysec", None), None);
                ratio_line(&mut out, "RingMQ / rocketmq-broker ASYNC_FLUSH", find(&s.runs, "RingMQ", "async", None), find(&s.runs, "rocketmq", "ASYNC", None), Some(3.0));
                if let Some(o) = find(&s.runs, "RingMQ", "async", None) {
                    let mb = o.sent_bytes as f64 / o.measured_secs.max(1e-9) / 1e6;
                    let _ = writeln!(out, "- RingMQ: {mb:.0} MB/s of message bodies (target ≥ 1000 MB/s: {})", if mb >= 1000.0 { "met" } else { "MISSED" });
                    if let Some(f) = fio_mib {
                        let _ = writeln!(out, "- RingMQ body bandwidth is {:.2} of fio's 1 MiB O_DIRECT write bandwidth", o.send_mib_per_sec() / f.max(1e-9));
                    }
                }
            }
            "w3" => {
                ratio_line(&mut out, "produce, RingMQ / Redis everysec", find(&s.runs, "RingMQ", "async", None), find(&s.runs, "Redis", "appendfsync everysec", None), None);
                ratio_line(&mut out, "produce, RingMQ / rocketmq-broker ASYNC_FLUSH", find(&s.runs, "RingMQ", "async", None), find(&s.runs, "rocketmq", "ASYNC", None), None);
                if let Some(c) = find(&s.runs, "RingMQ", "cold", None) {
                    let _ = writeln!(out, "- cold read: {:.0} msg/s, {:.1} MiB/s of bodies", c.receive_rate_per_sec(), c.receive_rate_per_sec() * 128.0 / 1048576.0);
                }
            }
            _ => {}
        }
        for n in &s.notes {
            let _ = writeln!(out, "- {n}");
        }
        let _ = writeln!(out, "\nFiles: `{0}/suite-{1}.json` (OMB), `{0}/suite-{1}.md`, `{0}/suite-{1}.svg`.", out_dir.display(), s.name);
    }
    out
}
