//! Raft RPCs between controller nodes over RocketMQ remoting frames
//! (docs/design/controller.md §2.6): private negative request codes −32 001
//! AppendEntries, −32 002 Vote, −32 003 InstallSnapshot; the request body is the JSON of
//! openraft's request type, the answer's body the JSON of `Result<response, RaftError>`.
//!
//! Owns: `PeerNetwork` (openraft's `RaftNetworkFactory`: one long-lived client
//! `Connection` per peer, shared by every RPC stream to it, reopened on the next call
//! once it fails) and `serve_raft_rpc` (the server side, called by `server.rs`).
//!
//! Invariants: a failed connection fails only the RPCs in flight on it (openraft
//! retries); an answer that is not SUCCESS or does not decode is a `NetworkError`, never
//! a vote or an append the peer did not give; every call waits at most openraft's
//! `hard_ttl` (connect included).

use super::runtime::GlommioRaftRuntime;
use super::{ControllerTypes, NodeId};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft, RaftNetwork, RaftNetworkFactory};
use ringmq_client::net::Connection;
use ringmq_client::remoting::codes::response_code as rc;
use ringmq_client::remoting::{RemotingCommand, SerializeType};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

type C = ControllerTypes<GlommioRaftRuntime>;

/// Private request codes (negative, like the broker's `REGISTER_NOW_INTERNAL`).
pub const RAFT_APPEND_ENTRIES: i32 = -32_001;
pub const RAFT_VOTE: i32 = -32_002;
pub const RAFT_INSTALL_SNAPSHOT: i32 = -32_003;

/// The most a peer connection attempt may take, within the RPC's own deadline.
pub const PEER_CONNECT_TIMEOUT_MS: u64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer {addr}: {reason}")]
    Transport { addr: String, reason: String },
    #[error("peer {addr} answered code {code}: {remark}")]
    Refused { addr: String, code: i32, remark: String },
    #[error("peer {addr}: answer does not decode: {source}")]
    Decode { addr: String, source: serde_json::Error },
}

/// One connection per peer, shared by every openraft RPC stream to it.
#[derive(Default)]
struct Conns {
    by_addr: BTreeMap<String, Rc<Connection>>,
}

/// The network factory of one controller node.
#[derive(Clone, Default)]
pub struct PeerNetwork {
    conns: Rc<RefCell<Conns>>,
}

impl RaftNetworkFactory<C> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient { target, addr: node.addr.clone(), conns: self.conns.clone() }
    }
}

/// The RPC link to one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    conns: Rc<RefCell<Conns>>,
}

impl PeerClient {
    async fn connection(&self, timeout: Duration) -> Result<Rc<Connection>, PeerError> {
        let existing = self.conns.borrow().by_addr.get(&self.addr).cloned();
        if let Some(c) = existing.filter(|c| !c.is_closed()) {
            return Ok(c);
        }
        let timeout = timeout.min(Duration::from_millis(PEER_CONNECT_TIMEOUT_MS));
        let conn = Connection::connect(&self.addr, timeout, SerializeType::Json, None)
            .await
            .map_err(|e| PeerError::Transport { addr: self.addr.clone(), reason: e.to_string() })?;
        // Two RPC streams may race to connect; the last one kept wins, the other's
        // connection closes when its in-flight call ends.
        self.conns.borrow_mut().by_addr.insert(self.addr.clone(), conn.clone());
        Ok(conn)
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &self,
        code: i32,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        let ttl = option.hard_ttl();
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let conn = self.connection(ttl).await.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let answer = conn.request(RemotingCommand::request(code).with_body(body), ttl).await.map_err(|e| {
            let err = PeerError::Transport { addr: self.addr.clone(), reason: e.to_string() };
            RPCError::Unreachable(Unreachable::new(&err))
        })?;
        if answer.code != rc::SUCCESS {
            let err = PeerError::Refused {
                addr: self.addr.clone(),
                code: answer.code,
                remark: answer.remark.clone().unwrap_or_default(),
            };
            return Err(RPCError::Network(NetworkError::new(&err)));
        }
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&answer.body).map_err(|source| {
            RPCError::Network(NetworkError::new(&PeerError::Decode { addr: self.addr.clone(), source }))
        })?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<C> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RAFT_APPEND_ENTRIES, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call(RAFT_INSTALL_SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RAFT_VOTE, &rpc, &option).await
    }
}

/// Whether `code` is one of the Raft RPC codes.
pub fn is_raft_rpc(code: i32) -> bool {
    matches!(code, RAFT_APPEND_ENTRIES | RAFT_VOTE | RAFT_INSTALL_SNAPSHOT)
}

fn answer<T: Serialize>(request: &RemotingCommand, result: &T) -> RemotingCommand {
    match serde_json::to_vec(result) {
        Ok(body) => {
            let mut resp = request.create_response(rc::SUCCESS, None);
            resp.body = body.into();
            resp
        }
        Err(e) => request.create_response(rc::SYSTEM_ERROR, Some(&format!("cannot encode the raft answer: {e}"))),
    }
}

fn decode<T: DeserializeOwned>(request: &RemotingCommand) -> Result<T, RemotingCommand> {
    serde_json::from_slice(&request.body).map_err(|e| {
        request.create_response(rc::CONTROLLER_INVALID_REQUEST, Some(&format!("raft request body does not decode: {e}")))
    })
}

/// Serves one Raft RPC (the caller checked it comes from a configured peer).
pub async fn serve_raft_rpc(raft: &Raft<C>, request: &RemotingCommand) -> RemotingCommand {
    match request.code {
        RAFT_APPEND_ENTRIES => match decode::<AppendEntriesRequest<C>>(request) {
            Ok(rpc) => answer(request, &raft.append_entries(rpc).await),
            Err(refusal) => refusal,
        },
        RAFT_VOTE => match decode::<VoteRequest<NodeId>>(request) {
            Ok(rpc) => answer(request, &raft.vote(rpc).await),
            Err(refusal) => refusal,
        },
        RAFT_INSTALL_SNAPSHOT => match decode::<InstallSnapshotRequest<C>>(request) {
            Ok(rpc) => answer(request, &raft.install_snapshot(rpc).await),
            Err(refusal) => refusal,
        },
        code => request.create_response(rc::REQUEST_CODE_NOT_SUPPORTED, Some(&format!("{code} is not a raft RPC"))),
    }
}
