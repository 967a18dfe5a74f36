//! `loadgen produce | consume | e2e`: the workload options, the embedded cluster when no
//! NameServer is given, topic creation, and the run's outputs (summary table, OMB JSON
//! results, SVG plot).
//!
//! Invariant: every option is range-checked before anything starts, with an error that
//! names the option.

use ringmq_client::net::tls::TlsClientSettings;
use ringmq_client::remoting::acl::Credentials;
use crate::embedded::{EmbeddedCluster, EmbeddedSpec};
use crate::engine::{self, EngineSpec, Role, SizeDist};
use crate::record::{Durability, RunRecord, Workload};
use ringmq_broker::store::config::FlushMode;
use std::path::{Path, PathBuf};

pub const PRODUCERS_MAX: usize = 256;
pub const CONSUMERS_MAX: usize = 256;
pub const IN_FLIGHT_MAX: usize = 4096;
pub const BATCH_MAX: usize = 1024;
pub const QUEUES_MAX: usize = 1024;
pub const TOPICS_MAX: usize = 64;
pub const DURATION_SECS_MAX: u64 = 3600;
pub const MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Where produce/consume/e2e write their results unless `--out` names a file: under the
/// build directory, which git ignores.
pub const DEFAULT_OUT_DIR: &str = "target/loadgen";

#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// NameServers (`host:port;host:port`). Without it loadgen starts an embedded
    /// NameServer and broker on a temporary store.
    #[arg(short = 'n', long)]
    pub namesrv: Option<String>,
    /// Sign every request with this ACL account (Apache's AclClientRPCHook form; one
    /// HMAC per request). With --namesrv: for brokers with `aclEnable=true`. Without:
    /// the embedded broker turns `aclEnable` on with this account as its only (admin)
    /// account, so the run measures the ACL's cost.
    #[arg(long = "access-key", requires = "secret_key")]
    pub access_key: Option<String>,
    /// The account's secret key (with --access-key).
    #[arg(long = "secret-key", requires = "access_key")]
    pub secret_key: Option<String>,
    /// TLS on every connection. With --namesrv: to that cluster (`tls.server.mode`
    /// permissive or enforcing). Without it: the embedded NameServer and broker accept
    /// TLS only (enforcing), with a certificate made for the run under the store.
    #[arg(long)]
    pub tls: bool,
    /// PEM CA that signs the servers' certificates: checked when given (with --tls).
    #[arg(long = "tls-ca", requires = "tls")]
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate, for servers with `tls.server.need.client.auth`.
    #[arg(long = "tls-cert", requires_all = ["tls", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// PEM key of --tls-cert (unencrypted).
    #[arg(long = "tls-key", requires_all = ["tls", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
    /// Topic name (several topics get `-0`, `-1`, ... suffixes).
    #[arg(long, default_value = "LoadgenBench")]
    pub topic: String,
    #[arg(long, default_value_t = 1)]
    pub topics: usize,
    /// Queues per topic per broker (created when loadgen creates the topic).
    #[arg(long, default_value_t = 8)]
    pub queues: usize,
    /// Message size in bytes, or a distribution `SIZE:WEIGHT,...` (e.g. `128:0.5,1024:0.5`).
    #[arg(long, default_value = "1024")]
    pub message_bytes: String,
    /// Producer threads (one glommio executor and one client each).
    #[arg(long, default_value_t = 2)]
    pub producers: usize,
    /// Consumer threads (one push consumer each, one group).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Sends (or batches) in flight per producer.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
    /// Messages per send (SEND_BATCH_MESSAGE when > 1).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    #[arg(long, value_enum, default_value = "sync")]
    pub send_mode: SendModeArg,
    /// Target messages/s over all producers (open loop, latency from the scheduled
    /// time); omit for as fast as possible.
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long, default_value_t = 20)]
    pub duration_secs: u64,
    #[arg(long, default_value_t = 5)]
    pub warmup_secs: u64,
    /// Tags to rotate through, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Give every message a unique key (indexed by the broker).
    #[arg(long)]
    pub keys: bool,
    /// Send every message with this RocketMQ delay level (single sends only). The
    /// end-to-end latency is then the lateness: arrival minus the due time.
    #[arg(long)]
    pub delay_level: Option<u32>,
    /// Send every message as a RocketMQ 5 timer due this many seconds after its send
    /// (`TIMER_DELAY_SEC`; single sends only). End-to-end latency becomes lateness.
    #[arg(long)]
    pub timer_delay_secs: Option<u64>,
    /// Transactional sends (`produce`, `e2e`): each message is a half message, then an
    /// END_TRANSACTION commit sent as a request (the send latency ends when the broker
    /// has committed). `e2e` also measures commit-to-visible latency.
    #[arg(long)]
    pub transactional: bool,
    /// With --transactional: roll back this percentage of the transactions (0..=100).
    /// A rolled-back message that reaches a consumer is reported as a failure.
    #[arg(long, default_value_t = 0)]
    pub rollback_percent: u32,
    /// With --transactional: first run the same workload with plain sends (on a fresh
    /// embedded cluster of its own), then the transactional one, and write both rows and
    /// their ratios to one results file.
    #[arg(long)]
    pub baseline_plain: bool,
    /// Embedded broker: its `messageDelayLevel` table (RocketMQ's syntax).
    #[arg(long, default_value = ringmq_broker::schedule::DEFAULT_DELAY_LEVELS)]
    pub delay_levels: String,
    /// Consumers start from the first offset (default for the embedded cluster and for
    /// `consume`), else from the last.
    #[arg(long)]
    pub from_first: bool,
    /// `consume` only: messages to produce first (at full speed) and then read back.
    #[arg(long, default_value_t = 200_000)]
    pub backlog_messages: u64,
    /// Embedded broker: flush mode. With --namesrv: the cluster's flush mode, as declared
    /// (it labels the durability of the results).
    #[arg(long, value_enum, default_value = "async")]
    pub flush: FlushArg,
    /// Messages per pull (RocketMQ's pullBatchSize; 1..=1024). Catch-up reads gain from
    /// large batches: one round trip per pull.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(i32).range(1..=1024))]
    pub pull_batch_size: i32,
    /// Embedded broker: CommitLog segments opened O_DSYNC (`[store] write_through`): a
    /// sync-flush group commit is one write, no fdatasync. The broker's default under
    /// sync flush; this flag forces it under async flush too.
    #[arg(long, conflicts_with = "no_write_through")]
    pub write_through: bool,
    /// Embedded broker: `write_through = false`: a sync-flush group commit is a write
    /// and then an fdatasync (the default before O_DSYNC became it; for comparison).
    #[arg(long)]
    pub no_write_through: bool,
    /// Embedded broker: cold-read windows kept per shard (`[store]
    /// read_ahead_windows_max`, 2 MiB each; 0 = read exactly what each pull asks for).
    #[arg(long, default_value_t = ringmq_broker::store::config::StoreConfig::default().read_ahead_windows_max)]
    pub read_ahead_windows: usize,
    /// Embedded broker: glommio spin before park, µs (`spin_before_park_us`).
    #[arg(long, default_value_t = 0)]
    pub spin_before_park_us: u64,
    /// Embedded broker: shards.
    #[arg(long, default_value_t = 1)]
    pub shards: usize,
    /// Embedded broker: route mode (`host`: one address, cross-shard requests forwarded;
    /// `shard`: each shard a broker of its own).
    #[arg(long, value_enum, default_value = "host")]
    pub route_mode: ringmq_broker::config::RouteMode,
    /// Embedded broker: store directory's parent (a real filesystem; default under $TMPDIR).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Results file (OMB JSON); the SVG plot and Markdown summary go next to it.
    /// Default: `target/loadgen/loadgen-<role>.json`, untracked, so running the README's
    /// job leaves a clone clean; name a file under `results/` to keep a run.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not print the per-interval RocketMQ-format lines.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendModeArg {
    Sync,
    Async,
    Oneway,
}

impl SendModeArg {
    fn name(self) -> &'static str {
        match self {
            SendModeArg::Sync => "sync",
            SendModeArg::Async => "async",
            SendModeArg::Oneway => "oneway",
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushArg {
    Sync,
    Async,
}

impl FlushArg {
    pub fn mode(self) -> FlushMode {
        match self {
            FlushArg::Sync => FlushMode::Sync,
            FlushArg::Async => FlushMode::Async,
        }
    }

    pub fn durability(self) -> Durability {
        match self {
            FlushArg::Sync => Durability::FsyncBeforeAck,
            FlushArg::Async => Durability::WithinOneSecond,
        }
    }
}

pub fn validate(a: &WorkloadArgs) -> Result<SizeDist, String> {
    let range = |name: &str, v: usize, max: usize| {
        if (1..=max).contains(&v) {
            Ok(())
        } else {
            Err(format!("--{name} must be 1..={max}, got {v}"))
        }
    };
    range("producers", a.producers, PRODUCERS_MAX)?;
    range("consumers", a.consumers, CONSUMERS_MAX)?;
    range("in-flight", a.in_flight, IN_FLIGHT_MAX)?;
    range("batch", a.batch, BATCH_MAX)?;
    range("queues", a.queues, QUEUES_MAX)?;
    range("topics", a.topics, TOPICS_MAX)?;
    range("shards", a.shards, 128)?;
    if !(1..=DURATION_SECS_MAX).contains(&a.duration_secs) || a.warmup_secs > 600 {
        return Err(format!("--duration-secs must be 1..={DURATION_SECS_MAX} and --warmup-secs 0..=600"));
    }
    if let Some(r) = a.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(format!("--rate must be > 0, got {r}"));
        }
    }
    if (a.delay_level.is_some() || a.timer_delay_secs.is_some()) && a.batch > 1 {
        return Err("--delay-level needs --batch 1 (delayed messages cannot be batched)".into());
    }
    if let Err(e) = ringmq_broker::schedule::DelayLevels::parse(&a.delay_levels) {
        return Err(format!("--delay-levels: {e}"));
    }
    if a.rollback_percent > 100 {
        return Err(format!("--rollback-percent must be 0..=100, got {}", a.rollback_percent));
    }
    if !a.transactional && (a.rollback_percent > 0 || a.baseline_plain) {
        return Err("--rollback-percent and --baseline-plain need --transactional".into());
    }
    if a.transactional {
        if a.batch > 1 {
            return Err("--transactional sends single messages: use --batch 1".into());
        }
        if a.send_mode != SendModeArg::Sync {
            return Err("--transactional sends each half synchronously: use --send-mode sync".into());
        }
        if a.delay_level.is_some() || a.timer_delay_secs.is_some() {
            return Err("--transactional messages cannot be delayed or timed (a broker does not schedule a half)".into());
        }
        if a.baseline_plain && a.namesrv.is_some() && a.from_first {
            return Err("--baseline-plain with --namesrv and --from-first: the transactional row would read the plain row's messages".into());
        }
    }
    if a.send_mode == SendModeArg::Oneway && a.batch > 1 {
        return Err("--send-mode oneway sends single messages: use --batch 1".into());
    }
    let sizes = SizeDist::parse(&a.message_bytes).map_err(|e| format!("--message-bytes: {e}"))?;
    if sizes.max_bytes() * a.batch > MESSAGE_BYTES_MAX {
        return Err(format!("--message-bytes × --batch must be at most {MESSAGE_BYTES_MAX} bytes"));
    }
    Ok(sizes)
}

/// Creates `topics` with `queues` queues on every broker of the cluster (on a
/// glommio thread: the client's runtime).
pub fn create_topics(namesrv_addrs: &[String], topics: &[String], queues: usize) -> Result<(), String> {
    create_topics_as(namesrv_addrs, topics, queues, None, TlsClientSettings::default())
}

/// `create_topics`, signed with `credentials` when the brokers check an ACL, over TLS
/// when `tls.enable`.
pub fn create_topics_as(namesrv_addrs: &[String], topics: &[String], queues: usize, credentials: Option<Credentials>, tls: TlsClientSettings) -> Result<(), String> {
    let addrs = namesrv_addrs.to_vec();
    let topics = topics.to_vec();
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("loadgen-admin")
        .spawn(move || async move {
            let mut config = ringmq_client::ClientConfig::new(addrs);
            config.credentials = credentials;
            config.tls = tls;
            let instance = ringmq_client::ClientInstance::start(config).map_err(|e| e.to_string())?;
            for t in &topics {
                ringmq_client::admin::create_topic_on_cluster(&instance, None, t, queues as i32).await.map_err(|e| format!("create topic {t}: {e}"))?;
            }
            instance.shutdown().await;
            Ok::<(), String>(())
        })
        .map_err(|e| format!("admin executor: {e}"))?
        .join()
        .map_err(|e| format!("admin thread: {e}"))?
}

/// The ACL account `--access-key`/`--secret-key` name, if any.
pub fn credentials(a: &WorkloadArgs) -> Option<Credentials> {
    match (&a.access_key, &a.secret_key) {
        (Some(ak), Some(sk)) => Some(Credentials::new(ak.clone(), sk.clone())),
        _ => None,
    }
}

/// The TLS `--tls`, `--tls-ca`, `--tls-cert`, `--tls-key` ask for.
pub fn tls_settings(a: &WorkloadArgs) -> TlsClientSettings {
    TlsClientSettings { enable: a.tls, trust_cert_path: a.tls_ca.clone(), cert_path: a.tls_cert.clone(), key_path: a.tls_key.clone(), ..TlsClientSettings::default() }
}

pub fn topic_names(a: &WorkloadArgs) -> Vec<String> {
    if a.topics == 1 {
        vec![a.topic.clone()]
    } else {
        (0..a.topics).map(|i| format!("{}-{i}", a.topic)).collect()
    }
}

pub fn workload(name: &str, a: &WorkloadArgs, sizes: &SizeDist, role: Role) -> Workload {
    Workload {
        name: name.to_string(),
        message_bytes: sizes.mean_bytes(),
        topics: a.topics,
        queues_per_topic: a.queues,
        producers: if role == Role::Consume { 0 } else { a.producers },
        consumers: if role == Role::Produce { 0 } else { a.consumers },
        in_flight_per_producer: a.in_flight,
        batch_size: a.batch,
        send_mode: if a.transactional { "transactional".to_string() } else { a.send_mode.name().to_string() },
        target_rate_per_sec: a.rate,
        duration_secs: a.duration_secs,
        warmup_secs: a.warmup_secs,
    }
}

pub fn engine_spec(role: Role, a: &WorkloadArgs, sizes: SizeDist, namesrv_addrs: Vec<String>, embedded: bool) -> EngineSpec {
    let txn_suffix = if a.transactional { "-transactional" } else { "" };
    EngineSpec {
        role,
        credentials: credentials(a),
        tls: tls_settings(a),
        pull_batch_size: a.pull_batch_size,
        workload: workload(&format!("{}-{}{txn_suffix}", role.name(), a.message_bytes), a, &sizes, role),
        sizes,
        namesrv_addrs,
        topics: topic_names(a),
        tags: a.tags.clone(),
        keys: a.keys,
        delay_level: a.delay_level,
        timer_delay_secs: a.timer_delay_secs,
        delay_ms: match (a.timer_delay_secs, a.delay_level, ringmq_broker::schedule::DelayLevels::parse(&a.delay_levels)) {
            (Some(secs), _, _) => secs * 1000,
            (None, Some(l), Ok(levels)) if l > 0 => levels.delay_ms((l as usize).min(levels.count())),
            _ => 0,
        },
        group: format!("loadgen-{}-{}", std::process::id(), crate::engine::now_epoch_us() / 1000),
        consume_from_first: a.from_first || embedded || role == Role::Consume,
        consume_target_messages: None,
        produce_target_messages: None,
        drain_secs: 15,
        interval_ms: 1_000,
        send_timeout_ms: 3_000,
        progress: true,
        lines: !a.quiet,
        consume_delay_us: 0,
        rss_pid: None,
        record_drain_intervals: false,
        transactional: a.transactional.then_some(a.rollback_percent),
    }
}

pub fn default_store_parent() -> Result<PathBuf, String> {
    let tmp = std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    let base = if crate::report::fs_type(&tmp).as_deref() == Some("tmpfs") { PathBuf::from("target/loadgen-store") } else { tmp };
    std::fs::create_dir_all(&base).map_err(|e| format!("create {}: {e}", base.display()))?;
    Ok(base)
}

/// Writes the summary (`.md`), the OMB results (`.json`) and the plot (`.svg`).
pub fn write_outputs(out: &Path, runs: &[RunRecord], title: &str, store_dir: &Path) -> Result<(), String> {
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let facts = crate::report::MachineInfo::collect(store_dir, crate::report::command_line());
    let md = format!(
        "# {title}\n\n- Machine: {} x {}, {} MiB, kernel {}\n- Store: {} ({})\n- Commit: {} ({} uncommitted paths)\n- Command: `{}`\n- When: {}\n\n{}{}",
        facts.cpu_count,
        facts.cpu_model,
        facts.mem_total_kib / 1024,
        facts.kernel,
        facts.bench_dir,
        facts.bench_fs,
        facts.git_commit,
        facts.git_dirty_paths,
        facts.command_line,
        crate::report::utc_now(),
        crate::summary::table(runs),
        crate::summary::txn_sections(runs)
    );
    std::fs::write(out.with_extension("md"), md).map_err(|e| format!("{}: {e}", out.with_extension("md").display()))?;
    let omb_facts = crate::omb::MachineFacts::collect(store_dir);
    crate::omb::write_results(out, runs, &omb_facts).map_err(|e| format!("{}: {e}", out.display()))?;
    crate::plot::write_svg(&out.with_extension("svg"), runs, title).map_err(|e| format!("{}: {e}", out.with_extension("svg").display()))?;
    Ok(())
}

/// `loadgen histograms FILE`: re-reads the HDR histograms of a results file and prints
/// their percentiles (the JSON arrays hold only per-interval summaries).
pub fn print_histograms(path: &Path) -> Result<(), String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let runs = v["runs"].as_array().ok_or_else(|| format!("{}: no `runs` array", path.display()))?;
    for r in runs {
        let m = &r["ringmq"];
        println!("{} / {} / {}", m["system"].as_str().unwrap_or("?"), m["config"].as_str().unwrap_or("?"), m["durability"].as_str().unwrap_or("?"));
        for (name, key) in [
            ("send", "publishLatency"),
            ("end-to-end", "endToEndLatency"),
            ("half send", "halfSendLatency"),
            ("END", "endTransactionLatency"),
            ("commit→visible", "commitToVisibleLatency"),
        ] {
            let Some(encoded) = m["histograms"][key].as_str() else { continue };
            let h = crate::omb::decode_histogram(encoded).map_err(|e| format!("{name} histogram: {e}"))?;
            println!("  {name:>14} (ms) p50/p90/p99/p99.9/max: {}  ({} samples)", crate::summary::percentiles_ms(&h), h.len());
        }
    }
    Ok(())
}

pub fn run(role: Role, a: WorkloadArgs) -> Result<(), String> {
    let sizes = validate(&a)?;
    if a.transactional && role == Role::Consume {
        return Err("--transactional applies to `produce` and `e2e`".into());
    }
    let rows = if a.baseline_plain {
        let plain = WorkloadArgs { transactional: false, rollback_percent: 0, baseline_plain: false, ..a.clone() };
        vec![plain, a.clone()]
    } else {
        vec![a.clone()]
    };
    let mut runs = Vec::new();
    let mut store_dir = PathBuf::from(".");
    for row in &rows {
        let (record, dir) = run_row(role, row, &sizes, a.baseline_plain && !row.transactional)?;
        runs.push(record);
        store_dir = dir;
    }
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("{DEFAULT_OUT_DIR}/loadgen-{}.json", role.name())));
    println!("\n{}{}", crate::summary::table(&runs), crate::summary::txn_sections(&runs));
    write_outputs(&out, &runs, &format!("loadgen {}", role.name()), &store_dir)?;
    eprintln!("loadgen: wrote {} (OMB JSON), {} and {}", out.display(), out.with_extension("md").display(), out.with_extension("svg").display());
    Ok(())
}

/// One row: the embedded cluster (fresh, when no NameServer is given), topics, the run.
/// Returns the record and the directory the store lived under.
/// `baseline`: the plain row of `--baseline-plain` (labelled "plain sends").
fn run_row(role: Role, a: &WorkloadArgs, sizes: &SizeDist, baseline: bool) -> Result<(RunRecord, PathBuf), String> {
    let (embedded, namesrv_addrs, durability, mut config_label, store_dir) = match &a.namesrv {
        Some(addrs) => {
            let addrs = ringmq_broker::config::split_addrs(addrs);
            // The cluster's flush mode is not visible from here: the row is labelled with
            // the one declared by --flush.
            let label = format!("external cluster, declared {} flush", if a.flush == FlushArg::Sync { "sync" } else { "async" });
            (None, addrs, a.flush.durability(), label, PathBuf::from("."))
        }
        None => {
            let parent = match &a.dir {
                Some(d) => d.clone(),
                None => default_store_parent()?,
            };
            if crate::report::fs_type(&parent).as_deref() == Some("tmpfs") {
                return Err(format!("{} is on tmpfs; the broker's O_DIRECT store needs a real filesystem (pass --dir)", parent.display()));
            }
            let spec = EmbeddedSpec { delay_levels: a.delay_levels.clone(), ..EmbeddedSpec::of(a, None) };
            eprintln!("loadgen: starting an embedded NameServer and broker ({} shard(s), {:?} flush) under {}", a.shards, a.flush, parent.display());
            let cluster = EmbeddedCluster::start(&spec, &parent)?;
            let addrs = vec![cluster.namesrv_addr.clone()];
            let label = format!("embedded, {} shard(s), {} flush{}", a.shards, if a.flush == FlushArg::Sync { "sync" } else { "async" }, spec.label_suffix());
            (Some(cluster), addrs, a.flush.durability(), label, parent)
        }
    };
    if a.transactional {
        config_label.push_str(", transactional (half + END request)");
        if a.rollback_percent > 0 {
            config_label.push_str(&format!(", {}% rolled back", a.rollback_percent));
        }
    } else if baseline {
        config_label.push_str(", plain sends");
    }
    // An embedded --tls cluster's clients trust the certificate made for the run.
    let tls = match embedded.as_ref().and_then(|c| c.tls_ca.clone()) {
        Some(ca) => TlsClientSettings { trust_cert_path: Some(a.tls_ca.clone().unwrap_or(ca)), ..tls_settings(a) },
        None => tls_settings(a),
    };
    if tls.enable {
        config_label.push_str(if tls.verifies_server() { ", TLS" } else { ", TLS (server not checked)" });
    }
    let topics = topic_names(a);
    create_topics_as(&namesrv_addrs, &topics, a.queues, credentials(a), tls.clone())?;
    let engine_spec = |role: Role| EngineSpec { tls: tls.clone(), ..engine_spec(role, a, sizes.clone(), namesrv_addrs.clone(), embedded.is_some()) };
    let record = if role == Role::Consume {
        // Build the backlog first, then read it back as fast as possible.
        let mut preload = engine_spec(Role::Produce);
        preload.workload.duration_secs = DURATION_SECS_MAX;
        preload.workload.warmup_secs = 0;
        preload.lines = false;
        preload.progress = false;
        eprintln!("loadgen: producing a backlog of {} messages", a.backlog_messages);
        let backlog = preload_backlog(&preload, a.backlog_messages)?;
        let mut spec = engine_spec(Role::Consume);
        spec.consume_target_messages = Some(backlog);
        engine::run(&spec, "RingMQ", &config_label, durability)?
    } else {
        let spec = engine_spec(role);
        engine::run(&spec, "RingMQ", &config_label, durability)?
    };
    let mut record = record;
    if let Some(cluster) = &embedded {
        if let Some(note) = crate::embedded::broker_cost_note(cluster) {
            eprintln!("loadgen: broker{note}");
            record.config.push_str(&note);
        }
    }
    drop(embedded);
    Ok((record, store_dir))
}

/// Produces until `messages` were acknowledged (or an hour passed); returns the count.
pub fn preload_backlog(spec: &EngineSpec, messages: u64) -> Result<u64, String> {
    let mut spec = spec.clone();
    spec.role = Role::Produce;
    spec.produce_target_messages = Some(messages);
    let r = engine::run(&spec, "RingMQ", "backlog", Durability::WithinOneSecond)?;
    Ok(r.sent)
}
