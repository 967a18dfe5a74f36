//! `fatal()`: an invariant broke or a store failed. The whole process exits so that
//! no half of the cores keeps serving without the other; a supervisor restarts it and
//! recovery runs (Iggy's and TigerBeetle's rule).

/// Exit status used for fatal errors (EX_SOFTWARE).
pub const FATAL_EXIT_CODE: i32 = 70;

pub fn fatal(reason: &str) -> ! {
    tracing::error!(%reason, "fatal error: exiting the broker process");
    eprintln!("ringmq-broker: fatal: {reason}");
    std::process::exit(FATAL_EXIT_CODE);
}
