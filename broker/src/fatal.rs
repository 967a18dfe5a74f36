//! `fatal()`: an invariant broke or a store failed. The whole process exits so that
//! no half of the cores keeps serving without the other; a supervisor restarts it and
//! recovery runs (Iggy's and TigerBeetle's rule).

/// Exit status used for fatal errors (EX_SOFTWARE).
pub const FATAL_EXIT_CODE: i32 = 70;

thread_local! {
    /// Set on a simulator's thread: a fatal error fails the simulated run (with its
    /// seed) instead of exiting the test process.
    static PANIC_INSTEAD_OF_EXIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes `fatal()` on this thread panic rather than exit (the simulator only).
pub fn panic_instead_of_exit_on_this_thread() {
    PANIC_INSTEAD_OF_EXIT.with(|p| p.set(true));
}

pub fn fatal(reason: &str) -> ! {
    if PANIC_INSTEAD_OF_EXIT.with(|p| p.get()) {
        panic!("fatal: {reason}");
    }
    tracing::error!(%reason, "fatal error: exiting the broker process");
    eprintln!("ringmq-broker: fatal: {reason}");
    std::process::exit(FATAL_EXIT_CODE);
}
