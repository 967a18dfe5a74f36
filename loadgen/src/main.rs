//! `loadgen`: RingMQ's load generator and benchmarks. This file owns the command line
//! (clap subcommands) and the order of a run; the work lives in the modules:
//!
//! - `store_bench`: appends on one shard of the RingMQ store (sync and async flush).
//! - `fio`: the fio baselines (O_DIRECT sequential writes), defined in
//!   `scripts/fio-bench.sh`.
//! - `report`: machine facts, the JSON results file and its Markdown summary.
//!
//! - `broker_bench`: SEND_MESSAGE_V2 against an embedded broker with 1..N shards.
//! - `filter_bench`: pull throughput of one backlog under TAG and SQL92 filters.
//!
//! - `engine`: producer and consumer threads over the RingMQ client, per-interval
//!   reporting (RocketMQ's benchmark lines), the run record (`record`).
//! - `workload_cmd`: `produce`, `consume`, `e2e` options, the embedded cluster
//!   (`embedded`) when no NameServer is given, outputs (`summary`).
//! - `txn`: the transactional workload's commit-time table and check listener.
//!
//! - `verify`, `recovery`: durability checks against a broker child process, and the
//!   restart-time benchmark (`verify recovery`).
//!
//! Subcommands: `store-bench`, `broker-bench`, `produce`, `consume`, `e2e`, `suite`,
//! `histograms`, `verify`.

mod broker_bench;
mod filter_bench;
mod embedded;
mod engine;
mod fio;
mod omb;
mod peers;
mod plot;
mod record;
mod recovery;
mod replication;
mod report;
mod store_bench;
mod netbench;
mod suite;
mod summary;
mod verify;
mod txn;
mod workload_cmd;

use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "loadgen", about = "RingMQ load generator and benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Appends records on one store shard (sync and async flush) and compares with fio.
    StoreBench(StoreBenchArgs),
    /// Sends 1 KiB messages to an embedded broker with 1 and 2 shards: requests/s,
    /// MB/s, latency, and the share of requests forwarded between shards.
    BrokerBench(BrokerBenchArgs),
    /// Pulls one backlog end to end under no filter, a TAG filter and SQL92 property
    /// filters (`enablePropertyFilter`): scanned and selected msg/s, CPU per message.
    FilterBench(FilterBenchArgs),
    /// Producers only: send throughput and latency (RocketMQ's producer benchmark).
    Produce(workload_cmd::WorkloadArgs),
    /// Builds a backlog, then reads it back as fast as possible (catch-up read).
    Consume(workload_cmd::WorkloadArgs),
    /// Producers and consumers together: throughput and end-to-end latency.
    E2e(workload_cmd::WorkloadArgs),
    /// The standard suite (W1 durable, W2 throughput, W3 small messages and catch-up),
    /// side by side with Redis Streams and rocketmq-broker, plus host limits.
    Suite(suite::SuiteArgs),
    /// Prints the percentiles of the HDR histograms stored in a results file.
    Histograms { file: PathBuf },
    /// Durability checks: SIGKILL cycles under load, or an ack log against a cluster.
    #[command(subcommand)]
    Verify(VerifyCommand),
}

#[derive(Subcommand, Debug)]
enum VerifyCommand {
    /// Kills a sync-flush broker (a child process) with SIGKILL at random moments under
    /// load, restarts it, and checks every acknowledged message at the end.
    Cycles(verify::CyclesArgs),
    /// Drains a topic and compares it with an ack log.
    Check(verify::CheckArgs),
    /// A consumer slower than the producer: producer latency and broker memory while
    /// the backlog grows, then the drain.
    SlowConsumer(verify::SlowConsumerArgs),
    /// Restart times of an async-flush broker (a child process): after a SIGKILL under
    /// W2-shaped load and after a clean stop with a large store — port open, first ack,
    /// first pull of an old offset — then checks every acknowledged message.
    Recovery(recovery::RecoveryArgs),
}

#[derive(Args, Debug)]
struct BrokerBenchArgs {
    /// Shard counts to run, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    shards: Vec<usize>,
    /// Client connections (one thread each).
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Pipelined sends outstanding per connection.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Queues of the benchmark topic (spread over the shards).
    #[arg(long, default_value_t = 8)]
    queues: usize,
    #[arg(long, default_value_t = 1024)]
    message_bytes: usize,
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    #[arg(long, default_value_t = 2)]
    warmup_secs: u64,
    /// Flush mode of the broker.
    #[arg(long, default_value = "async")]
    flush: ModeArg,
    /// Directory for the brokers' stores (a real filesystem). Default: under /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Results file (JSON); the Markdown summary goes next to it with `.md`.
    #[arg(long, default_value = "results/broker-bench.json")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct FilterBenchArgs {
    /// Messages in the backlog (one queue).
    #[arg(long, default_value_t = 200_000)]
    messages: u64,
    #[arg(long, default_value_t = 1024)]
    message_bytes: usize,
    /// Messages per pull (Java's pullBatchSize).
    #[arg(long, default_value_t = 32)]
    pull_batch: i32,
    /// Rounds; each reads the backlog once under every filter, filters alternated.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Directory for the broker's store (a real filesystem). Default: under /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Results file (JSON); the Markdown summary goes next to it with `.md`.
    #[arg(long, default_value = "results/filter-bench.json")]
    out: PathBuf,
}

/// Largest accepted `--messages` of filter-bench (its backlog is written to disk).
const FILTER_BENCH_MESSAGES_MAX: u64 = 10_000_000;

/// Largest accepted `--duration-secs` / `--warmup-secs`.
const DURATION_SECS_MAX: u64 = 600;
/// Largest accepted `--in-flight` value.
const IN_FLIGHT_MAX: usize = 4096;
/// Largest accepted `--message-bytes` (the store's default record limit is 4 MiB + 64 KiB).
const MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Accepted `--segment-mib` range.
const SEGMENT_MIB_MAX: u64 = 4096;

#[derive(Args, Debug)]
struct StoreBenchArgs {
    /// Directory for the store and fio's file. Must be on a real filesystem (O_DIRECT),
    /// not tmpfs. Default: a fresh directory under $TMPDIR (or /tmp), or under
    /// `target/bench-store` if that is tmpfs.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Measured seconds per store run (after the warm-up).
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Seconds of each store run and fio job not measured (first segment creation,
    /// fio ramp).
    #[arg(long, default_value_t = 1)]
    warmup_secs: u64,
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    message_bytes: usize,
    /// Flush modes to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "sync,async")]
    modes: Vec<ModeArg>,
    /// Appends in flight for the sync runs (one run per value).
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    in_flight: Vec<usize>,
    /// CommitLog segment size in MiB (small so pre-allocation happens during the run).
    #[arg(long, default_value_t = 256)]
    segment_mib: u64,
    /// Run the fio comparison: `on`, `off`, or `auto` (on when fio is installed).
    #[arg(long, default_value = "auto")]
    fio: FioArg,
    /// fio's file size in MiB (its time-based jobs loop over it).
    #[arg(long, default_value_t = 1024)]
    fio_size_mib: u64,
    /// fio seconds per job (after `--warmup-secs` of ramp).
    #[arg(long, default_value_t = 5)]
    fio_runtime_secs: u64,
    /// glommio preemption timer in microseconds: how long a busy task queue runs
    /// before the executor polls io_uring completions (async producers never park).
    #[arg(long, default_value_t = 500)]
    preempt_us: u64,
    /// CPU to pin the shard's executor to, or `none` (unpinned). Default 0, like a
    /// broker shard. io_uring's io-wq workers (which run fdatasync) inherit it.
    #[arg(long, default_value = "0")]
    pin_cpu: String,
    /// glommio spin-before-park in microseconds: how long an idle executor polls
    /// io_uring before sleeping in the kernel (0: sleep at once, glommio's default).
    #[arg(long, default_value_t = 0)]
    spin_before_park_us: u64,
    /// Results file (JSON); the Markdown summary goes next to it with `.md`.
    /// Default: results/store-bench-<UTC date-time>.json
    #[arg(long)]
    out: Option<PathBuf>,
    /// Skip the read-back and reopen checks after each store run.
    #[arg(long)]
    no_verify: bool,
    /// Do not prime glommio's iopoll probe before opening the store. The store's DMA
    /// backend now primes it itself (`probe_device` in broker/src/store/io/dma.rs), so
    /// this only shows the bench's own priming is redundant.
    #[arg(long)]
    no_iopoll_workaround: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ModeArg {
    Sync,
    /// Sync flush with O_DSYNC segments (`write_through`).
    SyncDsync,
    Async,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum FioArg {
    On,
    Off,
    Auto,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log written through a pipe or to a file (systemd,
        // `> broker.log`) is plain text. NO_COLOR turns it off everywhere.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none())
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::StoreBench(args) => run_store_bench(args),
        Command::BrokerBench(args) => run_broker_bench(args),
        Command::FilterBench(args) => run_filter_bench(args),
        Command::Produce(args) => workload_cmd::run(engine::Role::Produce, args),
        Command::Consume(args) => workload_cmd::run(engine::Role::Consume, args),
        Command::E2e(args) => workload_cmd::run(engine::Role::E2e, args),
        Command::Suite(args) => suite::run(args),
        Command::Histograms { file } => workload_cmd::print_histograms(&file),
        Command::Verify(VerifyCommand::Cycles(args)) => run_verify_cycles(args),
        Command::Verify(VerifyCommand::Recovery(args)) => run_verify_recovery(args),
        Command::Verify(VerifyCommand::SlowConsumer(args)) => verify::run_slow_consumer(&args).and_then(|r| {
            println!(
                "slow consumer: sent {} at {:.0}/s, consumer {:.0}/s; backlog peak {} messages, drained in {:.0} s; send p99 {:.2} ms (first 5 s) vs {:.2} ms (last 5 s); broker RSS {:.0} → peak {:.0} → {:.0} MiB",
                r.sent, r.produce_rate, r.consume_rate, r.backlog_peak, r.drain_secs, r.send_p99_ms_first_5s, r.send_p99_ms_last_5s, r.broker_rss_mib_start, r.broker_rss_mib_peak, r.broker_rss_mib_end
            );
            if let Some(out) = &args.out {
                std::fs::write(out, serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", out.display()))?;
            }
            if r.received < r.sent {
                return Err(format!("{} messages not drained", r.sent - r.received));
            }
            Ok(())
        }),
        Command::Verify(VerifyCommand::Check(args)) => verify::run_check(&args).and_then(|v| {
            println!("{}", serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?);
            if v.ok() {
                Ok(())
            } else {
                Err(format!("{} acknowledged messages lost, {} corrupted, {} misplaced, {} reordered", v.lost, v.corrupted, v.misplaced, v.reordered))
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_verify_cycles(args: verify::CyclesArgs) -> Result<(), String> {
    let report = verify::run_cycles(&args)?;
    verify::print_report(&report);
    if let Some(out) = &args.out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(out, serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    if report.verdict.ok() {
        Ok(())
    } else {
        Err(format!("durability check FAILED (seed {})", report.seed))
    }
}

fn run_verify_recovery(args: recovery::RecoveryArgs) -> Result<(), String> {
    let report = recovery::run_recovery(&args)?;
    println!("{}", recovery::summary(&report));
    if let Some(out) = &args.out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(out, serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", out.display()))?;
        eprintln!("recovery: wrote {}", out.display());
    }
    if let Some(dir) = &report.kept_dir {
        eprintln!("recovery: store, broker log and ack log kept in {dir}");
    }
    if report.ok() {
        Ok(())
    } else {
        Err(format!("recovery check FAILED: {} acknowledged messages lost beyond async flush's window, {} corrupted, {} misplaced, {} reordered", report.lost_beyond_flush_window, report.verdict.corrupted, report.verdict.misplaced, report.verdict.reordered))
    }
}

fn validate(args: &StoreBenchArgs) -> Result<(), String> {
    if !(1..=DURATION_SECS_MAX).contains(&args.duration_secs) {
        return Err(format!("--duration-secs must be 1..={DURATION_SECS_MAX}"));
    }
    if args.warmup_secs > 60 {
        return Err("--warmup-secs must be 0..=60".into());
    }
    if !(1..=MESSAGE_BYTES_MAX).contains(&args.message_bytes) {
        return Err(format!("--message-bytes must be 1..={MESSAGE_BYTES_MAX}"));
    }
    if args.modes.is_empty() {
        return Err("--modes is empty".into());
    }
    if args.in_flight.is_empty() || args.in_flight.iter().any(|n| !(1..=IN_FLIGHT_MAX).contains(n)) {
        return Err(format!("--in-flight values must be 1..={IN_FLIGHT_MAX}"));
    }
    if !(8..=SEGMENT_MIB_MAX).contains(&args.segment_mib) {
        return Err(format!("--segment-mib must be 8..={SEGMENT_MIB_MAX}"));
    }
    if !(16..=16 * 1024).contains(&args.fio_size_mib) {
        return Err("--fio-size-mib must be 16..=16384".into());
    }
    if !(1..=DURATION_SECS_MAX).contains(&args.fio_runtime_secs) {
        return Err(format!("--fio-runtime-secs must be 1..={DURATION_SECS_MAX}"));
    }
    if args.spin_before_park_us > 1_000_000 {
        return Err("--spin-before-park-us must be 0..=1000000".into());
    }
    if !(50..=100_000).contains(&args.preempt_us) {
        return Err("--preempt-us must be 50..=100000".into());
    }
    Ok(())
}

fn parse_pin_cpu(s: &str) -> Result<Option<usize>, String> {
    if s == "none" {
        return Ok(None);
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    match s.parse::<usize>() {
        Ok(cpu) if cpu < cpus => Ok(Some(cpu)),
        _ => Err(format!("--pin-cpu must be `none` or a CPU below {cpus}: {s}")),
    }
}

/// A fresh directory on a filesystem that supports O_DIRECT.
fn default_dir() -> Result<PathBuf, String> {
    let tmp = std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    let base = if report::fs_type(&tmp).as_deref() == Some("tmpfs") {
        let fallback = PathBuf::from("target/bench-store");
        std::fs::create_dir_all(&fallback).map_err(|e| format!("create {}: {e}", fallback.display()))?;
        fallback
    } else {
        tmp
    };
    let dir = tempfile::Builder::new()
        .prefix("ringmq-store-bench-")
        .tempdir_in(&base)
        .map_err(|e| format!("create a directory under {}: {e}", base.display()))?;
    Ok(dir.keep())
}

fn run_store_bench(args: StoreBenchArgs) -> Result<(), String> {
    validate(&args)?;
    parse_pin_cpu(&args.pin_cpu)?;
    let command_line = report::command_line();
    let (dir, remove_dir) = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("create {}: {e}", d.display()))?;
            (d.clone(), false)
        }
        None => (default_dir()?, true),
    };
    if report::fs_type(&dir).as_deref() == Some("tmpfs") {
        return Err(format!("{} is on tmpfs; O_DIRECT needs a real filesystem (pass --dir)", dir.display()));
    }
    let started_utc = report::utc_now();
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("results/store-bench-{}.json", started_utc.replace(':', ""))));
    let machine = report::MachineInfo::collect(&dir, command_line);
    eprintln!("store-bench: dir {} ({}), results {}", dir.display(), machine.bench_fs, out.display());

    let want_fio = match args.fio {
        FioArg::On => true,
        FioArg::Off => false,
        FioArg::Auto => fio::available(),
    };
    if !want_fio {
        eprintln!(
            "store-bench: fio comparison skipped (fio {})",
            if fio::available() { "disabled" } else { "not installed: scripts/install-fio.sh" }
        );
    }
    let plan = fio::Plan {
        dir: dir.clone(),
        size_bytes: args.fio_size_mib * 1024 * 1024,
        runtime_secs: args.fio_runtime_secs,
        ramp_secs: args.warmup_secs,
    };
    let mut fio_results = fio::FioResults::default();
    let mut runs = Vec::new();
    let base = store_bench::RunSpec {
        mode: store_bench::Mode::Sync,
        in_flight: 1,
        duration_secs: args.duration_secs,
        warmup_secs: args.warmup_secs,
        message_bytes: args.message_bytes,
        segment_bytes: args.segment_mib * 1024 * 1024,
        preempt_us: args.preempt_us,
        spin_before_park_us: args.spin_before_park_us,
        pin_cpu: parse_pin_cpu(&args.pin_cpu)?,
        verify: !args.no_verify,
        iopoll_workaround: !args.no_iopoll_workaround,
    };
    let result = (|| -> Result<(), String> {
        for mode in &args.modes {
            let specs: Vec<store_bench::RunSpec> = match mode {
                ModeArg::Sync => args
                    .in_flight
                    .iter()
                    .map(|&n| store_bench::RunSpec { mode: store_bench::Mode::Sync, in_flight: n, ..base.clone() })
                    .collect(),
                ModeArg::SyncDsync => args
                    .in_flight
                    .iter()
                    .map(|&n| store_bench::RunSpec { mode: store_bench::Mode::SyncDsync, in_flight: n, ..base.clone() })
                    .collect(),
                ModeArg::Async => vec![store_bench::RunSpec { mode: store_bench::Mode::Async, in_flight: 1, ..base.clone() }],
            };
            for spec in specs {
                let run_dir = dir.join(format!("store-{}-{}", spec.mode.name(), spec.in_flight));
                eprintln!(
                    "store-bench: {} with {} in flight, {} s + {} s warm-up ...",
                    spec.mode.name(),
                    spec.in_flight,
                    spec.duration_secs,
                    spec.warmup_secs
                );
                let result = store_bench::run(&spec, &run_dir);
                let _ = std::fs::remove_dir_all(&run_dir);
                let result = result?;
                eprintln!("store-bench:   {}", result.one_line());
                // Each baseline runs right after its store run: the device drifts.
                if want_fio {
                    match spec.mode {
                        store_bench::Mode::Sync | store_bench::Mode::SyncDsync if result.flushes > 0 => fio_results.commit_jobs.push(fio::run_commit_job(&plan, &result)?),
                        store_bench::Mode::Async if fio_results.write_1mib.is_none() => {
                            fio_results.write_1mib = Some(fio::run_bandwidth_job(&plan)?)
                        }
                        _ => {}
                    }
                }
                runs.push(result);
            }
        }
        if want_fio && fio_results.write_1mib.is_none() {
            fio_results.write_1mib = Some(fio::run_bandwidth_job(&plan)?);
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(dir.join("fio-bench.dat"));
    if let Err(e) = result {
        if remove_dir {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Err(e);
    }
    let fio_results = want_fio.then_some(fio_results);

    if remove_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = report::Report::new(machine, started_utc, &args_summary(&args), runs, fio_results);
    report.write(&out)?;
    let md = out.with_extension("md");
    eprintln!("store-bench: wrote {} and {}", out.display(), md.display());
    println!("{}", report.markdown());
    Ok(())
}

fn args_summary(args: &StoreBenchArgs) -> report::BenchParams {
    report::BenchParams {
        duration_secs: args.duration_secs,
        warmup_secs: args.warmup_secs,
        message_bytes: args.message_bytes,
        segment_mib: args.segment_mib,
        fio_size_mib: args.fio_size_mib,
        fio_runtime_secs: args.fio_runtime_secs,
        preempt_us: args.preempt_us,
        spin_before_park_us: args.spin_before_park_us,
        pin_cpu: args.pin_cpu.clone(),
        iopoll_workaround: !args.no_iopoll_workaround,
        dir: args.dir.as_deref().map(Path::to_path_buf),
    }
}

/// Writes a benchmark's results as JSON at `out` and as Markdown next to it (the
/// machine, commit and command first, then `markdown`'s table), and prints the latter.
fn write_bench_results<T: serde::Serialize>(
    out: &Path,
    started: &str,
    machine: &report::MachineInfo,
    results: &[T],
    title: &str,
    note: &str,
    markdown: fn(&[T], &str) -> String,
) -> Result<(), String> {
    let json = serde_json::json!({ "started_utc": started, "machine": machine, "results": results });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(out, serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let header = format!(
        "# RingMQ {title} ({started})\n\n- Machine: {} x {}, kernel {}\n- Commit: {} ({} uncommitted paths)\n- Command: `{}`\n- {note}\n",
        machine.cpu_count, machine.cpu_model, machine.kernel, machine.git_commit, machine.git_dirty_paths, machine.command_line
    );
    let md = markdown(results, &header);
    std::fs::write(out.with_extension("md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    Ok(())
}

fn run_filter_bench(args: FilterBenchArgs) -> Result<(), String> {
    if !(1..=FILTER_BENCH_MESSAGES_MAX).contains(&args.messages) || !(1..=MESSAGE_BYTES_MAX).contains(&args.message_bytes) {
        return Err(format!("--messages must be 1..={FILTER_BENCH_MESSAGES_MAX} and --message-bytes 1..={MESSAGE_BYTES_MAX}"));
    }
    if !(1..=1024).contains(&args.pull_batch) || !(1..=20).contains(&args.rounds) {
        return Err("--pull-batch must be 1..=1024 and --rounds 1..=20".into());
    }
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("ringmq-filter-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let machine = report::MachineInfo::collect(&dir, report::command_line());
    let started = report::utc_now();
    let spec = filter_bench::FilterBenchSpec { messages: args.messages, message_bytes: args.message_bytes, pull_batch: args.pull_batch, rounds: args.rounds };
    eprintln!("filter-bench: {} messages of {} bytes, pulls of {}, {} rounds", spec.messages, spec.message_bytes, spec.pull_batch, spec.rounds);
    let results = filter_bench::run(&spec, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let results = results?;
    write_bench_results(&args.out, &started, &machine, &results, "filter benchmark", "One queue read end to end per filter with sequential pulls; broker and client in one process (CPU is both). Medians over the rounds.", filter_bench::markdown)
}

fn run_broker_bench(args: BrokerBenchArgs) -> Result<(), String> {
    if args.shards.is_empty() || args.shards.iter().any(|&n| !(1..=128).contains(&n)) {
        return Err("--shards values must be 1..=128".into());
    }
    if !(1..=1024).contains(&args.connections) || !(1..=IN_FLIGHT_MAX).contains(&args.in_flight) {
        return Err(format!("--connections must be 1..=1024 and --in-flight 1..={IN_FLIGHT_MAX}"));
    }
    if !(1..=1024).contains(&args.queues) || !(1..=MESSAGE_BYTES_MAX).contains(&args.message_bytes) {
        return Err("--queues must be 1..=1024 and --message-bytes positive".into());
    }
    if !(1..=DURATION_SECS_MAX).contains(&args.duration_secs) || args.warmup_secs > 60 {
        return Err(format!("--duration-secs must be 1..={DURATION_SECS_MAX}, --warmup-secs at most 60"));
    }
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("ringmq-broker-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let machine = report::MachineInfo::collect(&dir, report::command_line());
    let started = report::utc_now();
    let flush = match args.flush {
        ModeArg::Sync | ModeArg::SyncDsync => ringmq_broker::store::config::FlushMode::Sync,
        ModeArg::Async => ringmq_broker::store::config::FlushMode::Async,
    };
    let mut results = Vec::new();
    for &shards in &args.shards {
        let spec = broker_bench::BrokerBenchSpec {
            shards,
            connections: args.connections,
            in_flight: args.in_flight,
            queues: args.queues,
            message_bytes: args.message_bytes,
            duration_secs: args.duration_secs,
            warmup_secs: args.warmup_secs,
            flush,
        };
        eprintln!("broker-bench: {shards} shard(s)...");
        let r = broker_bench::run(&spec, &dir)?;
        eprintln!(
            "  {:.0} requests/s, {:.1} MiB/s, p99 {:.0} us, forwarded {:.1} %",
            r.requests_per_sec, r.message_mib_per_sec, r.latency_us_p99, r.forwarded_share * 100.0
        );
        results.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    write_bench_results(&args.out, &started, &machine, &results, "broker benchmark", "Clients run on the same machine as the broker (2 cores shared).", broker_bench::markdown)
}
