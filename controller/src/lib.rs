//! RingMQ's controller (RocketMQ 5 controller mode, docs/design/controller.md): the
//! replica metadata of every broker set (replicas, master, master epoch, SyncStateSet),
//! replicated by Raft (openraft 0.9) across the controller nodes.
//!
//! Owns, one concern per module:
//! - `cmd`: the Raft log entries and what applying one answers;
//! - `state`: the pure replicated state machine (Apache's `ReplicasInfoManager`);
//! - `policy`: master election (Apache's `DefaultElectPolicy`);
//! - `raft`: openraft's type config (`ControllerTypes<RT>`, generic over the runtime), the
//!   glommio `AsyncRuntime`, the in-memory log store, state machine and network
//!   (`raft/mem.rs`, for tests and the simulator), the durable store
//!   (`raft/file_store.rs`) and Raft over remoting (`raft/net.rs`);
//! - `controller`: `Controller::handle`, the controller request codes, and the leader's
//!   duties (lease rounds, automatic elections);
//! - `liveness`: the heartbeat table and the election / lease rules;
//! - `notify`: NOTIFY_BROKER_ROLE_CHANGED to brokers;
//! - `config`: the controller's file (Apache properties or TOML);
//! - `server`: one node as a process (store, Raft, port), for the binary (`main.rs`) and
//!   the NameServer embedding.
//!
//! Invariants: every state change goes through the Raft log and `ControllerState::apply`
//! (no other mutation path); writes are answered from what was applied; only the Raft
//! leader answers controller requests other than CONTROLLER_GET_METADATA_INFO (others
//! answer CONTROLLER_NOT_LEADER, 2007); no tokio runtime is started (openraft runs on the
//! caller's glommio executor through `raft::runtime::GlommioRaftRuntime`).

// openraft's own error types (`StorageError`, `ConfigError`) are large; its traits
// return them, so this crate does too.
#![allow(clippy::result_large_err)]

pub mod cmd;
pub mod config;
pub mod controller;
pub mod liveness;
pub mod notify;
pub mod policy;
pub mod state;
pub mod raft;
pub mod server;
pub use controller::{Controller, ControllerConfig, ControllerError};
