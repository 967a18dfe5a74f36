//! RingMQ NameServer (issue 4, not built yet): the route registry. Until it exists the
//! binary says so and exits non-zero rather than pretend to serve.

fn main() {
    eprintln!("ringmq-namesrv is not implemented yet (see ARCHITECTURE.md)");
    std::process::exit(2);
}
