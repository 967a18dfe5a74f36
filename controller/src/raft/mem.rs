//! In-memory Raft storage (v2: log store + state machine) and an in-memory network with
//! per-link cut switches, for tests and the simulator (the file store and the remoting
//! transport come with WP2, docs/design/controller.md §2.6).
//!
//! Owns: `MemLogStore` (vote, committed id, entries), `MemStateMachine` (the applied
//! `ControllerState`, last applied id, membership, the current snapshot) and `MemRouter`
//! (which node's `Raft` answers a peer RPC, and which directed links are cut).
//!
//! Invariants: the state machine changes only by `RaftStateMachine::apply` /
//! `install_snapshot` (the `Controller` reads it through `MemStateMachine::read`); no
//! `RefCell` borrow is held across an await; a cut link fails both the request and the
//! answer with `Unreachable`, never delivers half.

use super::file_store::FileSnapshots;
use super::runtime::GlommioRaftRuntime;
use super::{ControllerTypes, NodeId};
use crate::cmd::CmdOutcome;
use crate::state::ControllerState;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    AsyncRuntime, BasicNode, Entry, EntryPayload, LogId, LogState, Raft, RaftLogReader, RaftNetwork, RaftNetworkFactory,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::rc::Rc;

type C<RT> = ControllerTypes<RT>;

#[derive(Debug)]
struct LogInner<RT: AsyncRuntime> {
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    log: BTreeMap<u64, Entry<C<RT>>>,
}

impl<RT: AsyncRuntime> Default for LogInner<RT> {
    fn default() -> Self {
        Self { vote: None, committed: None, last_purged: None, log: BTreeMap::new() }
    }
}

/// The Raft log and vote in memory.
#[derive(Debug)]
pub struct MemLogStore<RT: AsyncRuntime = GlommioRaftRuntime> {
    inner: Rc<RefCell<LogInner<RT>>>,
}

impl<RT: AsyncRuntime> Clone for MemLogStore<RT> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<RT: AsyncRuntime> Default for MemLogStore<RT> {
    fn default() -> Self {
        Self { inner: Rc::default() }
    }
}

impl<RT: AsyncRuntime> MemLogStore<RT> {
    /// Every entry's log id, for convergence checks.
    pub fn log_ids(&self) -> Vec<LogId<NodeId>> {
        self.inner.borrow().log.values().map(|e| e.log_id).collect()
    }
}

impl<RT: AsyncRuntime> RaftLogReader<C<RT>> for MemLogStore<RT> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<C<RT>>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl<RT: AsyncRuntime> RaftLogStorage<C<RT>> for MemLogStore<RT> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C<RT>>, StorageError<NodeId>> {
        let inner = self.inner.borrow();
        let last = inner.log.values().next_back().map(|e| e.log_id).or(inner.last_purged);
        Ok(LogState { last_purged_log_id: inner.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.borrow_mut().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError<NodeId>> {
        self.inner.borrow_mut().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.borrow().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C<RT>>) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<C<RT>>>,
    {
        {
            let mut inner = self.inner.borrow_mut();
            for entry in entries {
                inner.log.insert(entry.log_id.index, entry);
            }
        }
        // Memory is "durable" at once.
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.borrow_mut().log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.borrow_mut();
        let keep = inner.log.split_off(&(log_id.index + 1));
        inner.log = keep;
        inner.last_purged = Some(log_id);
        Ok(())
    }
}

/// A snapshot's metadata and its JSON.
type SnapshotBlob = (SnapshotMeta<NodeId, BasicNode>, Vec<u8>);

#[derive(Default)]
struct SmInner {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    state: ControllerState,
    snapshot: Option<SnapshotBlob>,
    snapshots_built: u64,
    /// Where snapshots are made durable (the file store); `None` = memory only.
    persist: Option<Rc<FileSnapshots>>,
}

impl std::fmt::Debug for SmInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmInner").field("last_applied", &self.last_applied).field("state", &self.state).finish()
    }
}

/// The applied `ControllerState`; snapshots are its JSON.
#[derive(Debug, Clone, Default)]
pub struct MemStateMachine {
    inner: Rc<RefCell<SmInner>>,
}

impl MemStateMachine {
    /// Reads the applied state (no await inside `f`).
    pub fn read<T>(&self, f: impl FnOnce(&ControllerState) -> T) -> T {
        f(&self.inner.borrow().state)
    }

    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        self.inner.borrow().last_applied
    }

    /// A state machine restored from a stored snapshot (`file_store::open_file_store`).
    pub fn restored(meta: SnapshotMeta<NodeId, BasicNode>, state: ControllerState, data: Vec<u8>) -> Self {
        let inner = SmInner {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            state,
            snapshot: Some((meta, data)),
            snapshots_built: 0,
            persist: None,
        };
        Self { inner: Rc::new(RefCell::new(inner)) }
    }

    /// Makes every later snapshot (built or installed) durable before it is reported.
    pub fn set_persist(&self, persist: Rc<FileSnapshots>) {
        self.inner.borrow_mut().persist = Some(persist);
    }

    fn snapshot_of(&self) -> Result<SnapshotBlob, StorageError<NodeId>> {
        let mut inner = self.inner.borrow_mut();
        let data = serde_json::to_vec(&inner.state).map_err(|e| StorageIOError::read_state_machine(&e))?;
        inner.snapshots_built += 1;
        let last = inner.last_applied;
        let id = match last {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, inner.snapshots_built),
            None => format!("--{}", inner.snapshots_built),
        };
        let meta = SnapshotMeta { last_log_id: last, last_membership: inner.membership.clone(), snapshot_id: id };
        if let Some(p) = &inner.persist {
            p.save(&meta, &data)?;
        }
        inner.snapshot = Some((meta.clone(), data.clone()));
        Ok((meta, data))
    }
}

impl<RT: AsyncRuntime> RaftSnapshotBuilder<C<RT>> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<C<RT>>, StorageError<NodeId>> {
        let (meta, data) = self.snapshot_of()?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl<RT: AsyncRuntime> RaftStateMachine<C<RT>> for MemStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>> {
        let inner = self.inner.borrow();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CmdOutcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<C<RT>>>,
    {
        let mut inner = self.inner.borrow_mut();
        let mut out = Vec::new();
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(CmdOutcome::success()),
                EntryPayload::Normal(cmd) => {
                    let outcome = inner.state.apply(&cmd);
                    out.push(outcome);
                }
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), m);
                    out.push(CmdOutcome::success());
                }
            }
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let state: ControllerState = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let mut inner = self.inner.borrow_mut();
        if let Some(p) = &inner.persist {
            p.save(meta, &data)?;
        }
        inner.state = state;
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.snapshot = Some((meta.clone(), data));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<C<RT>>>, StorageError<NodeId>> {
        let inner = self.inner.borrow();
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot { meta: meta.clone(), snapshot: Box::new(Cursor::new(data.clone())) }))
    }
}

struct RouterInner<RT: AsyncRuntime> {
    nodes: BTreeMap<NodeId, Raft<C<RT>>>,
    /// Directed links (from, to) that drop every message.
    cut: BTreeSet<(NodeId, NodeId)>,
}

/// Routes peer RPCs between in-process nodes; links can be cut and healed.
pub struct MemRouter<RT: AsyncRuntime = GlommioRaftRuntime> {
    inner: Rc<RefCell<RouterInner<RT>>>,
}

impl<RT: AsyncRuntime> Clone for MemRouter<RT> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<RT: AsyncRuntime> Default for MemRouter<RT> {
    fn default() -> Self {
        Self { inner: Rc::new(RefCell::new(RouterInner { nodes: BTreeMap::new(), cut: BTreeSet::new() })) }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("link {from} -> {to} is cut or the node is not registered")]
struct LinkDown {
    from: NodeId,
    to: NodeId,
}

impl<RT: AsyncRuntime> MemRouter<RT> {
    pub fn add(&self, id: NodeId, raft: Raft<C<RT>>) {
        self.inner.borrow_mut().nodes.insert(id, raft);
    }

    /// Cuts (`true`) or heals every link between `node` and the others, both ways.
    pub fn isolate(&self, node: NodeId, isolated: bool) {
        let mut inner = self.inner.borrow_mut();
        let others: Vec<NodeId> = inner.nodes.keys().copied().filter(|n| *n != node).collect();
        for other in others {
            for link in [(node, other), (other, node)] {
                if isolated {
                    inner.cut.insert(link);
                } else {
                    inner.cut.remove(&link);
                }
            }
        }
    }

    /// Cuts or heals one directed link.
    pub fn set_link(&self, from: NodeId, to: NodeId, cut: bool) {
        let mut inner = self.inner.borrow_mut();
        if cut {
            inner.cut.insert((from, to));
        } else {
            inner.cut.remove(&(from, to));
        }
    }

    fn target(&self, from: NodeId, to: NodeId) -> Result<Raft<C<RT>>, LinkDown> {
        let inner = self.inner.borrow();
        if inner.cut.contains(&(from, to)) {
            return Err(LinkDown { from, to });
        }
        inner.nodes.get(&to).cloned().ok_or(LinkDown { from, to })
    }

    fn answer_passes(&self, from: NodeId, to: NodeId) -> Result<(), LinkDown> {
        if self.inner.borrow().cut.contains(&(to, from)) {
            return Err(LinkDown { from: to, to: from });
        }
        Ok(())
    }

    /// The network factory node `from` uses.
    pub fn network(&self, from: NodeId) -> MemNetwork<RT> {
        MemNetwork { router: self.clone(), from }
    }
}

/// One node's view of the router.
pub struct MemNetwork<RT: AsyncRuntime = GlommioRaftRuntime> {
    router: MemRouter<RT>,
    from: NodeId,
}

impl<RT: AsyncRuntime> RaftNetworkFactory<C<RT>> for MemNetwork<RT> {
    type Network = MemConnection<RT>;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Self::Network {
        MemConnection { router: self.router.clone(), from: self.from, to: target }
    }
}

/// A peer link from `from` to `to`.
pub struct MemConnection<RT: AsyncRuntime = GlommioRaftRuntime> {
    router: MemRouter<RT>,
    from: NodeId,
    to: NodeId,
}

impl<RT: AsyncRuntime> MemConnection<RT> {
    async fn call<T, E, F, Fut>(&self, f: F) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error,
        F: FnOnce(Raft<C<RT>>) -> Fut,
        Fut: std::future::Future<Output = Result<T, RaftError<NodeId, E>>>,
    {
        let raft = self.router.target(self.from, self.to).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let answer = f(raft).await;
        self.router.answer_passes(self.from, self.to).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

impl<RT: AsyncRuntime> RaftNetwork<C<RT>> for MemConnection<RT> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C<RT>>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(|raft| async move { raft.append_entries(rpc).await }).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C<RT>>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call(|raft| async move { raft.install_snapshot(rpc).await }).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(|raft| async move { raft.vote(rpc).await }).await
    }
}

// `NetworkError` is what a real transport reports for IO failures (WP2).
#[allow(dead_code)]
fn _network_error_is_available(e: &std::io::Error) -> NetworkError {
    NetworkError::new(e)
}
