//! The harness the seeded simulation workloads share (`txn_sim.rs`, `ha_sim.rs`): run a
//! seed and turn its violations into a failure that names the seed and how to replay it,
//! run many seeds (or one, by environment variable), spawn an actor whose end can be
//! awaited, the topic create every workload starts with, and the SEND_MESSAGE_V2 its
//! producers send.

#![allow(dead_code)]

use ringmq_broker::rt::chan::{self, OneshotReceiver};
use ringmq_broker::sim::SimExecutor;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use std::future::Future;

/// Runs `run(seed)` (which returns its violations and a summary line); panics with the
/// violations and the replay command when there are any.
pub fn check_seed(seed: u64, replay_var: &str, run: fn(u64) -> (Vec<String>, String)) -> String {
    match std::panic::catch_unwind(|| run(seed)) {
        Ok((violations, summary)) => {
            if !violations.is_empty() {
                panic!("seed {seed} broke {} invariants (replay: {replay_var}={seed}):\n{}\n{summary}", violations.len(), violations.join("\n"));
            }
            summary
        }
        Err(e) => {
            eprintln!("seed {seed} panicked (replay: {replay_var}={seed})");
            std::panic::resume_unwind(e);
        }
    }
}

/// Runs seed `$replay_var` alone if set, else seeds `0..$seeds_var` (default
/// `default_seeds`), printing the first summaries and the total time.
pub fn run_seeds(replay_var: &str, seeds_var: &str, default_seeds: u64, run: fn(u64) -> (Vec<String>, String)) -> Vec<String> {
    if let Some(seed) = std::env::var(replay_var).ok().and_then(|s| s.parse().ok()) {
        let summary = check_seed(seed, replay_var, run);
        eprintln!("seed {seed} -> {summary}");
        return vec![summary];
    }
    let seeds: u64 = std::env::var(seeds_var).ok().and_then(|s| s.parse().ok()).unwrap_or(default_seeds);
    let started = std::time::Instant::now();
    let mut summaries = Vec::new();
    for seed in 0..seeds {
        let summary = check_seed(seed, replay_var, run);
        if seed < 3 {
            eprintln!("seed {seed}: {summary}");
        }
        summaries.push(summary);
    }
    eprintln!("{seeds} seeds in {:.1} s", started.elapsed().as_secs_f64());
    summaries
}

/// Spawns `actor` on the simulator; the receiver resolves when it ends.
pub fn spawn_actor(ex: &SimExecutor, actor: impl Future<Output = ()> + 'static) -> OneshotReceiver<()> {
    let (tx, rx) = chan::oneshot();
    ex.spawn_in(None, async move {
        actor.await;
        tx.send(());
    });
    rx
}

/// UPDATE_AND_CREATE_TOPIC for `topic` with `queues` read and write queues, perm rw.
/// What a seed's thread needs first: invariant breaks panic (so `check_seed` can name
/// the seed) instead of exiting the process, and `RINGMQ_LOG=<filter>` logs the run.
pub fn init_seed_thread() {
    ringmq_broker::fatal::panic_instead_of_exit_on_this_thread();
    if let Ok(filter) = std::env::var("RINGMQ_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_test_writer().try_init();
    }
}

/// SEND_MESSAGE_V2 of `body` to `topic`'s `queue_id` (producer group "PG", tag "t"),
/// as the replication sims' producers send it.
pub fn send_v2(topic: &str, queues: u32, queue_id: i32, body: &[u8]) -> RemotingCommand {
    let header = ringmq_client::remoting::headers::SendMessageRequestHeaderV2 {
        a: "PG".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: queues as i32,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some("TAGS\u{1}t\u{2}".into()),
        j: Some(0),
        k: false,
        l: None,
        m: false,
        n: None,
    };
    RemotingCommand::request(rq::SEND_MESSAGE_V2).with_header(&header).with_body(body.to_vec())
}

pub fn create_topic(topic: &str, queues: u32) -> RemotingCommand {
    RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("readQueueNums", queues.to_string())
        .with_ext("writeQueueNums", queues.to_string())
        .with_ext("perm", "6")
        .with_ext("topicFilterType", "SINGLE_TAG")
}
