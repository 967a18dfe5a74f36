//! openraft wiring for the controller (docs/design/controller.md §1, §2.6).
//!
//! Owns: `ControllerTypes<RT>` (openraft's type config, generic over the runtime: `Cmd` entries answered with
//! `CmdOutcome`, `u64` node ids, `BasicNode { addr }` = the peer's controller address,
//! JSON snapshots in memory, `GlommioRaftRuntime`), the Raft settings of §1
//! (`raft_config`), and the runtime and in-memory storage/network submodules.
//!
//! Invariants: no consensus logic lives here: elections, replication, commit and
//! snapshots are openraft's; this crate supplies storage, transport and the runtime.

pub mod file_store;
pub mod mem;
pub mod net;
pub mod runtime;

use crate::cmd::{Cmd, CmdOutcome};
use openraft::impls::OneshotResponder;
use openraft::{AsyncRuntime, BasicNode, RaftTypeConfig};
use runtime::GlommioRaftRuntime;
use std::cmp::Ordering;
use std::fmt;
use std::io::Cursor;
use std::marker::PhantomData;

/// A controller node's Raft id (the digits of Apache's "n0", "n1", ...).
pub type NodeId = u64;

/// openraft's type config for the controller group, generic over the async runtime:
/// `GlommioRaftRuntime` in processes and tests, the simulator's runtime in WP6.
pub struct ControllerTypes<RT = GlommioRaftRuntime>(PhantomData<fn() -> RT>);

// The derives would bound `RT`; the marker is a plain unit value whatever `RT` is.
impl<RT> Clone for ControllerTypes<RT> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<RT> Copy for ControllerTypes<RT> {}
impl<RT> Default for ControllerTypes<RT> {
    fn default() -> Self {
        Self(PhantomData)
    }
}
impl<RT> fmt::Debug for ControllerTypes<RT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ControllerTypes")
    }
}
impl<RT> PartialEq for ControllerTypes<RT> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<RT> Eq for ControllerTypes<RT> {}
impl<RT> PartialOrd for ControllerTypes<RT> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<RT> Ord for ControllerTypes<RT> {
    fn cmp(&self, _: &Self) -> Ordering {
        Ordering::Equal
    }
}

impl<RT: AsyncRuntime> RaftTypeConfig for ControllerTypes<RT> {
    type D = Cmd;
    type R = CmdOutcome;
    type NodeId = NodeId;
    type Node = BasicNode;
    type Entry = openraft::Entry<Self>;
    type SnapshotData = Cursor<Vec<u8>>;
    type AsyncRuntime = RT;
    type Responder = OneshotResponder<Self>;
}

/// Raft heartbeat interval (§1).
pub const HEARTBEAT_INTERVAL_MS: u64 = 100;
/// Election timeout range (§1).
pub const ELECTION_TIMEOUT_MIN_MS: u64 = 400;
pub const ELECTION_TIMEOUT_MAX_MS: u64 = 800;
/// Entries between snapshots (§1).
pub const SNAPSHOT_LOGS_SINCE_LAST: u64 = 1000;
/// Entries kept behind a snapshot (§1).
pub const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 100;
/// Snapshot bytes per InstallSnapshot RPC: its JSON body (bytes as numbers, up to 4x)
/// stays well inside the remoting body limit (4 MiB).
pub const SNAPSHOT_CHUNK_BYTES_MAX: u64 = 256 * 1024;

/// The controller's Raft settings (§1), validated by openraft.
pub fn raft_config(cluster_name: &str) -> Result<openraft::Config, openraft::ConfigError> {
    openraft::Config {
        cluster_name: cluster_name.to_string(),
        heartbeat_interval: HEARTBEAT_INTERVAL_MS,
        election_timeout_min: ELECTION_TIMEOUT_MIN_MS,
        election_timeout_max: ELECTION_TIMEOUT_MAX_MS,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(SNAPSHOT_LOGS_SINCE_LAST),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT,
        snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES_MAX,
        ..Default::default()
    }
    .validate()
}
