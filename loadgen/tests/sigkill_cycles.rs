//! The short CI version of the SIGKILL cycles (`loadgen verify cycles`): a sync-flush
//! broker child process is killed at random moments under load (once also during
//! recovery), restarted, and every acknowledged message must be there, intact and in
//! order. `scripts/sigkill-cycles.sh` runs the long version.

mod common;

use common::run_verify;

#[test]
fn acknowledged_messages_survive_sigkill_cycles() {
    let seed = std::env::var("RINGMQ_SEED").unwrap_or_else(|_| format!("{}", std::process::id() as u64 * 7919 + 1));
    // Both ways of making a group commit durable: write + fdatasync, and O_DSYNC
    // writes (the durable profile's), chosen by the seed.
    let write_through = seed.parse::<u64>().unwrap_or(0) % 2 == 1;
    let mut args = vec!["cycles", "--cycles", "3", "--producers", "2", "--kill-after-min-ms", "200", "--kill-after-max-ms", "900", "--kill-in-recovery-every", "2", "--segment-mib", "8", "--seed", &seed];
    if write_through {
        args.push("--write-through");
    }
    let (report, stdout) = run_verify(&args, &format!("seed {seed}, write_through {write_through} (replay with RINGMQ_SEED={seed})"));
    assert_eq!(report["write_through"], write_through, "{report}");
    let v = &report["verdict"];
    assert_eq!(v["lost"], 0, "{report}");
    assert_eq!(v["corrupted"], 0, "{report}");
    assert!(v["acked"].as_u64().expect("acked") > 100, "the load really ran: {report}");
    assert_eq!(report["cycles"].as_array().expect("cycles").len(), 3);
    eprintln!("{stdout}");
}

/// Short CI version of the slow-consumer check: the backlog grows and drains, every
/// message arrives, and the broker's memory stays bounded.
#[test]
fn a_slow_consumer_backlog_grows_and_drains_with_bounded_broker_memory() {
    let (r, stdout) = run_verify(&["slow-consumer", "--duration-secs", "6", "--produce-rate", "2000", "--consume-rate", "800"], "loadgen verify slow-consumer failed");
    assert_eq!(r["sent"], r["received"], "{r}");
    assert!(r["backlog_peak"].as_i64().expect("backlog") > 3_000, "the backlog really grew: {r}");
    assert!(r["broker_rss_mib_peak"].as_f64().expect("rss") < 512.0, "{r}");
    eprintln!("{stdout}");
}
