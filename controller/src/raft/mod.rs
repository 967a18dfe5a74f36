//! openraft wiring for the controller (docs/design/controller.md §1, §2.6).
//!
//! Owns: `ControllerTypes` (openraft's type config: `Cmd` entries answered with
//! `CmdOutcome`, `u64` node ids, `BasicNode { addr }` = the peer's controller address,
//! JSON snapshots in memory, `GlommioRaftRuntime`), the Raft settings of §1
//! (`raft_config`), and the runtime and in-memory storage/network submodules.
//!
//! Invariants: no consensus logic lives here: elections, replication, commit and
//! snapshots are openraft's; this crate supplies storage, transport and the runtime.

pub mod mem;
pub mod runtime;

use crate::cmd::{Cmd, CmdOutcome};
use runtime::GlommioRaftRuntime;
use std::io::Cursor;

/// A controller node's Raft id (the digits of Apache's "n0", "n1", ...).
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type config for the controller group.
    pub ControllerTypes:
        D = Cmd,
        R = CmdOutcome,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<ControllerTypes>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = GlommioRaftRuntime,
);

/// Raft heartbeat interval (§1).
pub const HEARTBEAT_INTERVAL_MS: u64 = 100;
/// Election timeout range (§1).
pub const ELECTION_TIMEOUT_MIN_MS: u64 = 400;
pub const ELECTION_TIMEOUT_MAX_MS: u64 = 800;
/// Entries between snapshots (§1).
pub const SNAPSHOT_LOGS_SINCE_LAST: u64 = 1000;
/// Entries kept behind a snapshot (§1).
pub const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 100;

/// The controller's Raft settings (§1), validated by openraft.
pub fn raft_config(cluster_name: &str) -> Result<openraft::Config, openraft::ConfigError> {
    openraft::Config {
        cluster_name: cluster_name.to_string(),
        heartbeat_interval: HEARTBEAT_INTERVAL_MS,
        election_timeout_min: ELECTION_TIMEOUT_MIN_MS,
        election_timeout_max: ELECTION_TIMEOUT_MAX_MS,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(SNAPSHOT_LOGS_SINCE_LAST),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT,
        ..Default::default()
    }
    .validate()
}
