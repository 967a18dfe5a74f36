//! Raft log entries of the controller (docs/design/controller.md §2.2) and what applying
//! one answers.
//!
//! Owns: `Cmd` (one variant per Apache event: `ApplyBrokerIdEvent`,
//! `UpdateBrokerAddressEvent`, `AlterSyncStateSetEvent`, `ElectMasterEvent`,
//! `CleanBrokerDataEvent`, plus RingMQ's `RecordEpochStart`), `CmdOutcome` (the Apache
//! response code, remark, header fields and body a write is answered with) and the
//! election history record.
//!
//! Invariants: a `Cmd` carries every precondition it was validated against (epochs,
//! check codes, the expected master), and `ControllerState::apply` re-checks them, so
//! applying the same log gives the same state and the same outcomes on every node, and
//! two commands validated against the same state never both take effect. Nothing here
//! reads a clock: times are carried in the command (`leader_wall_ms`, informational).

use bytes::Bytes;
use ringmq_client::remoting::codes::response_code;
use ringmq_client::remoting::{CommandHeader, RemotingCommand};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One Raft log entry's application payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmd {
    /// CONTROLLER_APPLY_BROKER_ID (1013): add replica `id` (a new set needs id 1).
    ApplyBrokerId { cluster: String, name: String, id: i64, address: String, check_code: String },
    /// CONTROLLER_REGISTER_BROKER (1003) from a moved broker: its new address.
    UpdateBrokerAddress { cluster: String, name: String, id: i64, address: String },
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001), valid only against these epochs.
    AlterSyncStateSet { name: String, master: i64, master_epoch: i32, sss_epoch: i32, new_set: BTreeSet<i64> },
    /// CONTROLLER_ELECT_MASTER (1002) or the leader's own election: `new_master = None`
    /// clears the master (no electable replica), valid only against these epochs.
    ElectMaster {
        name: String,
        expect_master_epoch: i32,
        expect_sss_epoch: i32,
        new_master: Option<i64>,
        record: ElectionRecord,
    },
    /// CLEAN_BROKER_DATA (1011): the whole set (`ids = None`) or some replicas.
    CleanBrokerData { name: String, ids: Option<BTreeSet<i64>> },
    /// (RingMQ) the physical start offset of each shard in `epoch`, from the new master.
    RecordEpochStart { name: String, epoch: i32, starts: Vec<u64> },
}

/// Who asked for an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// The leader, after the master's heartbeats stopped (`brokerId` -1).
    Controller,
    /// A broker of the set asked for itself (ReplicasManager's self-election).
    Broker,
    /// An operator (`designateElect=true`).
    Admin,
}

/// What the leader knew about one candidate when it elected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: i64,
    pub alive: bool,
    pub epoch: i32,
    pub max_offset: i64,
    pub priority: i32,
}

/// (RingMQ) one election, kept in the set's bounded history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElectionRecord {
    /// The master epoch the election produced (filled in at apply).
    pub master_epoch: i32,
    pub old_master: Option<i64>,
    pub new_master: Option<i64>,
    pub trigger: Trigger,
    pub candidates: Vec<Candidate>,
    pub raft_term: u64,
    /// The leader's wall clock when it proposed; informational only.
    pub leader_wall_ms: u64,
}

/// The answer to a request: code, remark, header fields, body (Apache's
/// `ControllerResult`). Writes are answered with what their apply produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmdOutcome {
    pub code: i32,
    pub remark: Option<String>,
    pub ext: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CmdOutcome {
    pub fn success() -> Self {
        Self::default()
    }

    pub fn refused(code: i32, remark: impl Into<String>) -> Self {
        Self { code, remark: Some(remark.into()), ..Self::default() }
    }

    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> Self {
        self.ext.extend(header.to_ext().iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    pub fn is_success(&self) -> bool {
        self.code == response_code::SUCCESS
    }

    /// The response to `request` carrying this outcome.
    pub fn into_response(self, request: &RemotingCommand) -> RemotingCommand {
        let mut response = request.create_response(self.code, self.remark.as_deref());
        for (k, v) in &self.ext {
            response.ext_fields.set_str(k, v);
        }
        response.body = Bytes::from(self.body);
        response
    }
}
