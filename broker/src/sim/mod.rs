//! The deterministic simulator of the request layer (issue 10): the same shard,
//! connection, mesh, metadata and store code as production, run on a seeded
//! single-threaded scheduler ([`executor`]) with the SimDisk, simulated IO latency, a
//! simulated clock and timers ([`sim_rt`]), in-memory sockets ([`pipe`]) and a
//! process that can be killed and restarted at any point ([`cluster`]).
//!
//! The workloads and invariant checks live in `broker/tests/request_sim.rs`; a failing
//! seed is printed and replays exactly (`RINGMQ_SIM_SEED=N`).

pub mod cluster;
pub mod executor;
pub mod pipe;
pub mod sim_rt;

pub use cluster::{RequestError, SimBroker, SimClient};
pub use executor::SimExecutor;
pub use sim_rt::SimRt;
