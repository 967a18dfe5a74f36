//! The shard's side of replication (`ha/` owns the rules and state): on a master, one
//! task per connected slave streams this shard's CommitLog and reads its ACKs
//! (`serve_replica`), and SYNC_MASTER sends wait for a slave's confirmation
//! (`wait_replicated`); on a slave, one task keeps the connection to the master's shard
//! of the same number and appends what it receives (`run_replication`).
//!
//! Invariants: an ASYNC_MASTER never waits for a slave (the stream reads what the log
//! holds; a slow slave only falls behind, bounded by one DATA frame in flight); a
//! SYNC_MASTER answers SUCCESS only once a slave confirmed the send's bytes (received
//! or durable, `ha_sync_ack`), FLUSH_SLAVE_TIMEOUT after `sync_flush_timeout_ms`,
//! SLAVE_NOT_AVAILABLE with no slave attached — never SUCCESS for bytes no slave has;
//! a slave writes only what continues its log (`Store::append_replicated`) and never
//! takes client writes.
//! With `haAuthSecret` set, no log byte, metadata or WELCOME goes to a peer before it
//! proved the secret (HELLO with a nonce, CHALLENGE, AUTH: `ha::proto`), and a peer
//! that does not is refused, counted (`ringmq_shard_ha_auth_refusals`) and logged at
//! most once per `HA_AUTH_REFUSAL_LOG_INTERVAL_MS`; it sends no ACK a SYNC_MASTER
//! counts (it is never attached). A slave with the secret follows only a master that
//! proved it back.
//!
//! Controller mode (docs/design/controller.md §3.4, roles in `role.rs`): only a
//! `Master{e}` serves slaves (others REFUSE); a HELLO of a higher epoch is refused and
//! fences this master; a slave past the point where its log agrees with the master's
//! (`EpochFile::find_consistent_point`) gets TRUNCATE instead of WELCOME, writes the
//! cut (`Store::write_truncate_marker`) and waits for a restart; a slave follows no
//! master of an epoch below the one it knows, and mirrors its master's epoch history
//! (META `Epochs`). A connection ends when its shard's role changes.

use super::Shard;
use crate::ha::proto::{AuthSide, Frame, Hello, MetaKind, ProtoError, BATCH_BYTES_MAX, FRAME_BYTES_MAX, HANDSHAKE_FRAME_BYTES_MAX, NONCE_BYTES};
use crate::ha::epoch::{EpochEntry, EpochFile};
use crate::ha::{Role, SyncAck, HEARTBEAT_INTERVAL_MS, META_INTERVAL_MS, RECONNECT_INTERVAL_MS, SLAVE_SILENT_MAX_MS};
use crate::rt::Runtime;
use crate::store::engine::{local_of, ShardId};
use crate::store::error::StoreError;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ringmq_client::remoting::codes::response_code as rs;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// The epoch this broker's shards serve as masters without controller mode (fixed;
/// in controller mode the epoch history says, `Shard::current_epoch`).
pub const MASTER_EPOCH: u64 = 1;
/// How long a peer may take to say HELLO / WELCOME.
const HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 256 * 1024;
/// Largest frame a slave reads before it is WELCOMEd (CHALLENGE, WELCOME, or a REFUSE
/// with its reason).
const MASTER_ANSWER_BYTES_MAX: usize = crate::ha::proto::REASON_BYTES_MAX + 1;
/// A master logs a refused replication authentication at most this often per shard
/// (every refusal is counted): a peer retrying in a loop cannot flood the log.
pub const HA_AUTH_REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;

/// Why a replication connection ended.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error("connection closed")]
    Closed,
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("bad frame: {0}")]
    Proto(#[from] crate::ha::proto::ProtoError),
    #[error("refused: {0}")]
    Refused(String),
    #[error("unexpected frame: {0}")]
    Unexpected(&'static str),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("replication authentication failed: {0}")]
    Auth(&'static str),
    #[error("no random nonce: {0}")]
    Nonce(String),
    #[error("the master asked to cut this log at {0}: restart to apply it")]
    Truncated(u64),
    #[error("this shard's role changed")]
    RoleChanged,
}

/// A nonce from the operating system's CSPRNG.
fn fresh_nonce() -> Result<[u8; NONCE_BYTES], HaError> {
    use rand::RngCore;
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.try_fill_bytes(&mut nonce).map_err(|e| HaError::Nonce(e.to_string()))?;
    Ok(nonce)
}

/// Reads one frame, buffering what comes after it.
async fn read_frame<S: AsyncRead + Unpin>(reader: &mut S, buf: &mut Vec<u8>) -> Result<Frame, HaError> {
    read_frame_bounded(reader, buf, FRAME_BYTES_MAX).await
}

/// Reads one frame of at most `frame_bytes_max` (after its length), buffering what
/// comes after it: an unauthenticated peer gets a small buffer, not a DATA frame's.
async fn read_frame_bounded<S: AsyncRead + Unpin>(reader: &mut S, buf: &mut Vec<u8>, frame_bytes_max: usize) -> Result<Frame, HaError> {
    let mut chunk = vec![0u8; READ_CHUNK_BYTES.min(frame_bytes_max + 4)];
    loop {
        if let Some(head) = buf.first_chunk::<4>() {
            let len = u32::from_be_bytes(*head) as usize;
            if len > frame_bytes_max {
                return Err(ProtoError::TooLarge(len).into());
            }
        }
        if let Some((frame, used)) = Frame::decode(buf)? {
            buf.drain(..used);
            return Ok(frame);
        }
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HaError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn write_frame<S: AsyncWrite + Unpin>(writer: &mut S, frame: &Frame) -> Result<(), HaError> {
    let mut out = Vec::new();
    frame.encode(&mut out);
    writer.write_all(&out).await.map_err(|_| HaError::Closed)?;
    writer.flush().await.map_err(|_| HaError::Closed)
}

async fn with_timeout<R: Runtime, T>(rt: &R, ms: u64, f: impl Future<Output = Result<T, HaError>>) -> Result<T, HaError> {
    match crate::rt::timeout(rt, Duration::from_millis(ms), f).await {
        Some(r) => r,
        None => Err(HaError::Timeout(ms)),
    }
}

/// Replication state of one shard: its slaves (on a master), its master and how it
/// follows it (on a slave), and a slave's client offset commits not yet taken by the
/// master. Only this module touches it.
#[derive(Default)]
pub struct Replication {
    pub(super) master: RefCell<crate::ha::MasterState>,
    slave: Cell<crate::ha::SlaveState>,
    /// A slave's master (replication port of its shard 0): `ha_master_address`, or
    /// learnt from the NameServer (`ShardEvent::HaMaster`); `None` until known.
    pub(super) master_addr: Cell<Option<SocketAddr>>,
    /// A slave's consumer offsets committed by clients that its master has not shown
    /// back yet (sent to the master).
    client_offsets: RefCell<std::collections::BTreeMap<crate::meta::offsets::OffsetKey, u64>>,
    /// Connections refused for want of authentication (a master with `haAuthSecret`).
    auth_refusals: Cell<u64>,
    /// When the last refusal line was logged (monotonic µs), and refusals since.
    auth_refusal_logged_us: Cell<Option<u64>>,
    auth_refusals_unlogged: Cell<u64>,
    /// Controller mode: the role cell (`role.rs`); `Fenced` until the controller names one.
    pub(super) role: Cell<Role>,
    /// Moves on every role change.
    pub(super) role_generation: Cell<u64>,
    /// Dropped (woken) on the next role change; at most `ROLE_WATCHERS_MAX`.
    pub(super) role_watchers: RefCell<Vec<crate::rt::chan::OneshotSender<()>>>,
    /// The epoch history as last saved (controller mode).
    pub(super) epochs: RefCell<Option<EpochFile>>,
    /// A TRUNCATE was taken; the broker must restart to apply it.
    pub(super) restart_wanted: Cell<bool>,
    /// Controller mode, shard 0 only: the `ReplicasManager` its driver ticks
    /// (`replicas.rs`); `None` elsewhere.
    pub(super) replicas: RefCell<Option<crate::ha::replicas::ReplicasManager>>,
    /// Controller mode: the id the controller assigned this broker (registered with
    /// the NameServer while a slave); told to every shard with each role change.
    pub(super) controller_id: Cell<Option<i64>>,
    /// Controller mode with `masterLeaseEnable`: a write is acknowledged only before
    /// this monotonic ms (the lease shard 0's driver holds, told to every shard).
    pub(super) lease_until_ms: Cell<u64>,
}

impl Replication {
    pub fn new(master_addr: Option<SocketAddr>, epochs: Option<EpochFile>) -> Self {
        Self { master_addr: Cell::new(master_addr), role: Cell::new(Role::Fenced), epochs: RefCell::new(epochs), ..Default::default() }
    }

    /// The NameServer or a peer shard named this slave's master.
    pub fn set_master_addr(&self, addr: SocketAddr) {
        self.master_addr.set(Some(addr));
    }
}

impl<R: Runtime> Shard<R> {
    /// Master side of one slave connection (`conn_id` unique on this shard; `peer` for
    /// the log, when known).
    pub async fn serve_replica<S: AsyncRead + AsyncWrite + Unpin + 'static>(self: Rc<Self>, stream: S, conn_id: u64, peer: Option<SocketAddr>) {
        let result = self.clone().serve_replica_inner(stream, conn_id, peer).await;
        self.ha.master.borrow_mut().detach(conn_id);
        match result {
            Err(HaError::Closed) | Ok(()) => tracing::info!(shard = self.place.id, conn_id, "slave disconnected"),
            Err(e) => tracing::warn!(shard = self.place.id, conn_id, error = %e, "slave connection ended"),
        }
    }

    async fn serve_replica_inner<S: AsyncRead + AsyncWrite + Unpin + 'static>(self: Rc<Self>, stream: S, conn_id: u64, peer: Option<SocketAddr>) -> Result<(), HaError> {
        let (mut reader, mut writer) = futures_lite::io::split(stream);
        let mut buf = Vec::new();
        let secret = self.config().ha_auth_secret().map(<[u8]>::to_vec);
        // The whole handshake, authentication included, within one timeout.
        let hello = match with_timeout(&self.rt, HANDSHAKE_TIMEOUT_MS, self.handshake(&mut reader, &mut writer, &mut buf, secret.as_deref())).await {
            Ok(h) => h,
            Err(e) if secret.is_some() => {
                self.on_auth_refused(conn_id, peer, &e);
                let reason = match e {
                    HaError::Auth(_) => e.to_string(),
                    other => format!("replication authentication failed: {other}"),
                };
                let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
                return Err(HaError::Refused(reason));
            }
            Err(e) => return Err(e),
        };
        if let Some(reason) = self.refuse_reason(&hello) {
            tracing::error!(shard = self.place.id, conn_id, reason, "slave refused");
            let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
            return Err(HaError::Refused(reason));
        }
        let generation = self.role_generation();
        if self.config().controller_mode {
            match self.handshake_point(&hello) {
                Ok(None) => {}
                Ok(Some(to_phys)) => {
                    tracing::warn!(shard = self.place.id, conn_id, to_phys, slave_end = hello.end_phys, "the slave holds records past where its log agrees with this master's: told to cut them");
                    write_frame(&mut writer, &Frame::Truncate { to_phys }).await?;
                    return Ok(());
                }
                Err(reason) => {
                    tracing::warn!(shard = self.place.id, conn_id, reason, "slave refused");
                    let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
                    return Err(HaError::Refused(reason));
                }
            }
        }
        // An empty slave below this master's retention is re-seeded: it starts where
        // this log now begins (README, Replication).
        let log_start = self.store.log_start();
        let start_phys = if local_of(hello.end_phys) == 0 && log_start > 0 { self.store.shard().phys(log_start) } else { hello.end_phys };
        if start_phys != hello.end_phys {
            tracing::info!(shard = self.place.id, conn_id, start_phys, "an empty slave is re-seeded from the start of this master's retained log");
        }
        if !self.ha.master.borrow_mut().attach(conn_id, local_of(start_phys), self.now_ms()) {
            let reason = format!("this shard already serves {} slaves", crate::ha::SLAVES_PER_SHARD_MAX);
            let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
            return Err(HaError::Refused(reason));
        }
        self.ha.master.borrow_mut().set_broker_id(conn_id, hello.controller_broker_id);
        let master_end = self.store.shard().phys(self.store.write_offset());
        write_frame(&mut writer, &Frame::Welcome { epoch: self.current_epoch(), start_phys, master_end_phys: master_end }).await?;
        tracing::info!(shard = self.place.id, conn_id, from = start_phys, master_end, "slave attached");
        // ACKs are read by their own task; it ends with the connection, or when this
        // function returns (`_streaming` drops): its read half keeps the socket open, and
        // a connection given up here (a silent slave) must close, or a slave that was
        // only partitioned away would stay on it, heard by nobody, and never reconnect.
        let closed = Rc::new(Cell::new(false));
        let (_streaming, stream_ended) = crate::rt::chan::oneshot::<()>();
        let acks = {
            let (shard, closed) = (self.clone(), closed.clone());
            async move {
                let read_acks = async {
                    loop {
                        match read_frame(&mut reader, &mut buf).await {
                            Ok(Frame::Ack { received_phys, durable_phys }) => {
                                let mode = shard.config().ha_sync_ack;
                                let released = shard.ha.master.borrow_mut().on_ack(conn_id, local_of(received_phys), local_of(durable_phys), shard.now_ms(), mode);
                                released.into_iter().for_each(|tx| tx.send(()));
                            }
                            Ok(Frame::Meta { kind: MetaKind::ConsumerOffsets, payload }) => {
                                // Offsets consumers committed on the slave while this
                                // master was away: reconciled by the higher offset.
                                match shard.merge_slave_offsets(&payload) {
                                    Ok(n) if n > 0 => tracing::info!(shard = shard.place.id, conn_id, advanced = n, "consumer offsets committed on the slave reconciled"),
                                    Ok(_) => {}
                                    Err(e) => tracing::warn!(shard = shard.place.id, conn_id, error = %e, "slave's consumer offsets not applied"),
                                }
                            }
                            Ok(_) => {
                                tracing::warn!(shard = shard.place.id, conn_id, "slave sent a frame other than ACK or its consumer offsets; closing");
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                };
                futures_lite::future::or(read_acks, async {
                    let _ = stream_ended.await;
                })
                .await;
                closed.set(true);
            }
        };
        self.rt.spawn(acks);
        let mut pos = start_phys;
        let mut last_sent_us = self.rt.monotonic_us();
        let mut last_meta_us: Option<u64> = None;
        let mut meta_sent: std::collections::BTreeMap<MetaKind, Vec<u8>> = std::collections::BTreeMap::new();
        // Table versions last sent: checked before every DATA frame, so a slave knows a
        // topic before it holds the topic's first record.
        let mut tables_sent = None;
        while !closed.get() && !self.store_stop.get() && self.role_generation() == generation {
            let tables_now = (self.meta.topics.borrow().version(), self.meta.groups.borrow().version(), self.auth_version());
            let due = last_meta_us.is_none_or(|t| self.rt.monotonic_us().saturating_sub(t) >= META_INTERVAL_MS * 1000);
            if due || (self.meta.stores.is_some() && tables_sent != Some(tables_now)) {
                last_meta_us = Some(self.rt.monotonic_us());
                tables_sent = Some(tables_now);
                for (kind, payload) in self.meta_snapshots() {
                    if meta_sent.get(&kind) != Some(&payload) {
                        write_frame(&mut writer, &Frame::Meta { kind, payload: payload.clone() }).await?;
                        meta_sent.insert(kind, payload);
                    }
                }
            }
            let silent_ms = self.ha.master.borrow().slaves().find(|(c, _)| **c == conn_id).map(|(_, p)| self.now_ms() - p.last_ack_ms).unwrap_or(i64::MAX);
            if silent_ms > SLAVE_SILENT_MAX_MS as i64 {
                return Err(HaError::Timeout(SLAVE_SILENT_MAX_MS));
            }
            let batch = match self.store.read_for_replica(pos, BATCH_BYTES_MAX).await {
                Ok(Some(b)) => b,
                Ok(None) => {
                    let reason = format!("offset {pos} is below this master's retention: re-seed the slave (see README, Replication)");
                    let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
                    return Err(HaError::Refused(reason));
                }
                Err(e) => {
                    // A read error is not fatal (see store/error.rs): try again shortly.
                    tracing::warn!(shard = self.place.id, conn_id, error = %e, "replication read failed; retried");
                    self.rt.sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let master_end = self.store.shard().phys(self.store.write_offset());
            if batch.is_empty() && local_of(pos) < self.store.flushed_offset() {
                // Durable bytes past `pos`, but no record starts there: the slave's log
                // and this master's differ. Never stream from the middle of a record.
                let reason = format!("no record starts at the slave's end {pos} on this master: the logs differ; re-seed the slave");
                let _ = write_frame(&mut writer, &Frame::Refuse { reason: reason.clone() }).await;
                return Err(HaError::Refused(reason));
            }
            if batch.is_empty() {
                let idle_us = self.rt.monotonic_us().saturating_sub(last_sent_us);
                if idle_us >= HEARTBEAT_INTERVAL_MS * 1000 {
                    write_frame(&mut writer, &Frame::Data { phys_from: pos, master_end_phys: master_end, records: Vec::new() }).await?;
                    last_sent_us = self.rt.monotonic_us();
                    continue;
                }
                // Wait for durable bytes past `pos`, at most until the next heartbeat
                // (metadata is compared on the same beat).
                let left = Duration::from_micros((HEARTBEAT_INTERVAL_MS * 1000 - idle_us).min(META_INTERVAL_MS * 1000));
                let store = &self.store;
                let more = async {
                    store.wait_appended(local_of(pos)).await;
                    let _ = store.wait_durable(local_of(pos) + 1).await;
                };
                let _ = crate::rt::timeout(&self.rt, left, more).await;
                continue;
            }
            let n = batch.len() as u64;
            write_frame(&mut writer, &Frame::Data { phys_from: pos, master_end_phys: master_end, records: batch }).await?;
            pos += n;
            last_sent_us = self.rt.monotonic_us();
        }
        Ok(())
    }

    /// Reads the slave's HELLO and, with `secret`, has the slave prove it (CHALLENGE,
    /// AUTH) before anything else is sent; frames bounded by `HANDSHAKE_FRAME_BYTES_MAX`.
    async fn handshake<Rd: AsyncRead + Unpin, W: AsyncWrite + Unpin>(&self, reader: &mut Rd, writer: &mut W, buf: &mut Vec<u8>, secret: Option<&[u8]>) -> Result<Hello, HaError> {
        let hello = match read_frame_bounded(reader, buf, HANDSHAKE_FRAME_BYTES_MAX).await? {
            Frame::Hello(h) => h,
            _ => return Err(HaError::Unexpected("expected HELLO")),
        };
        let Some(secret) = secret else { return Ok(hello) };
        if hello.auth_nonce.is_none() {
            return Err(HaError::Auth("the slave sent no proof (set haAuthSecret on the slave)"));
        }
        let master_nonce = fresh_nonce()?;
        let master_proof = hello.auth_proof(secret, AuthSide::Master, &master_nonce);
        write_frame(writer, &Frame::Challenge { master_nonce, master_proof }).await?;
        match read_frame_bounded(reader, buf, HANDSHAKE_FRAME_BYTES_MAX).await? {
            Frame::Auth { slave_proof } if hello.auth_verify(secret, AuthSide::Slave, &master_nonce, &slave_proof) => Ok(hello),
            Frame::Auth { .. } => Err(HaError::Auth("wrong proof (haAuthSecret differs)")),
            _ => Err(HaError::Auth("expected AUTH")),
        }
    }

    /// Counts a refused authentication and logs it, at most once per
    /// `HA_AUTH_REFUSAL_LOG_INTERVAL_MS` (the line says how many went unlogged).
    fn on_auth_refused(&self, conn_id: u64, peer: Option<SocketAddr>, error: &HaError) {
        let ha = &self.ha;
        ha.auth_refusals.set(ha.auth_refusals.get() + 1);
        let now_us = self.rt.monotonic_us();
        if ha.auth_refusal_logged_us.get().is_some_and(|at| now_us.saturating_sub(at) < HA_AUTH_REFUSAL_LOG_INTERVAL_MS * 1000) {
            ha.auth_refusals_unlogged.set(ha.auth_refusals_unlogged.get() + 1);
            return;
        }
        ha.auth_refusal_logged_us.set(Some(now_us));
        let unlogged = ha.auth_refusals_unlogged.replace(0);
        let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
        tracing::warn!(shard = self.place.id, conn_id, peer, error = %error, unlogged_since_last_line = unlogged, "replication connection refused: the peer did not prove haAuthSecret; nothing was sent");
    }

    /// Replication connections refused for want of authentication, since start.
    pub fn ha_auth_refusals(&self) -> u64 {
        self.ha.auth_refusals.get()
    }

    /// The metadata this shard replicates, each in its snapshot encoding: topics,
    /// groups and (once there are any) users and ACLs from the metadata owner, consumer
    /// and delay offsets from every shard.
    fn meta_snapshots(&self) -> Vec<(MetaKind, Vec<u8>)> {
        let mut out = Vec::new();
        if self.meta.stores.is_some() {
            if let Ok(t) = self.meta.topics.borrow().encode() {
                out.push((MetaKind::Topics, t));
            }
            if let Ok(g) = self.meta.groups.borrow().encode() {
                out.push((MetaKind::Groups, g));
            }
            if let Some(auth) = self.auth_snapshot() {
                out.push((MetaKind::Auth, auth));
            }
        }
        if let Ok(o) = self.offsets.table.borrow().encode() {
            out.push((MetaKind::ConsumerOffsets, o));
        }
        out.push((MetaKind::DelayOffsets, self.delay_offsets().encode()));
        if self.config().controller_mode {
            if let Some(history) = self.epoch_history() {
                out.push((MetaKind::Epochs, history.encode()));
            }
        }
        out
    }

    /// A slave installs metadata its master sent. Topics and groups replace the local
    /// tables (saved, then installed on every shard); consumer offsets merge by the
    /// higher offset (a consumer may have committed here while the master was down);
    /// delay progress replaces the local one.
    async fn apply_replicated_meta(self: &Rc<Self>, kind: MetaKind, payload: &[u8]) -> Result<(), String> {
        match kind {
            MetaKind::Topics => {
                let table = crate::meta::topics::TopicTable::decode(payload).map_err(|e| e.to_string())?;
                let Some(meta) = &self.meta.stores else { return Err("topic table sent to a shard that does not own metadata".into()) };
                let _writer = meta.lock.lock().map_err(|e| e.to_string())?.await;
                meta.topics.save(payload).await.map_err(|e| e.to_string())?;
                *self.meta.topics.borrow_mut() = table;
                let event = self.topics_event();
                self.mesh.broadcast_and_wait(event).await;
            }
            MetaKind::Groups => {
                let table = crate::meta::groups::GroupTable::decode(payload).map_err(|e| e.to_string())?;
                let Some(meta) = &self.meta.stores else { return Err("group table sent to a shard that does not own metadata".into()) };
                let _writer = meta.lock.lock().map_err(|e| e.to_string())?.await;
                meta.groups.save(payload).await.map_err(|e| e.to_string())?;
                *self.meta.groups.borrow_mut() = table;
                let event = self.groups_event();
                self.mesh.broadcast_and_wait(event).await;
            }
            MetaKind::ConsumerOffsets => {
                let theirs = crate::meta::offsets::ConsumerOffsetTable::decode(payload).map_err(|e| e.to_string())?;
                let mut ours = self.offsets.table.borrow_mut();
                let mut pending = self.ha.client_offsets.borrow_mut();
                for (key, offset) in theirs.offsets {
                    // The master's offset wins (a reset there may move it back), except
                    // over a commit made here that the master has not taken yet.
                    match pending.get(&key) {
                        Some(&mine) if mine > offset => continue,
                        Some(_) => {
                            pending.remove(&key);
                        }
                        None => {}
                    }
                    ours.commit(&key.0, &key.1, key.2, offset).map_err(|e| e.to_string())?;
                }
            }
            MetaKind::DelayOffsets => {
                let theirs = crate::schedule::DelayOffsets::decode(payload)?;
                self.replace_delay_offsets(theirs).await;
            }
            MetaKind::Auth => self.apply_replicated_auth(payload).await?,
            MetaKind::Epochs => {
                if !self.config().controller_mode {
                    return Err("an epoch history sent to a broker not in controller mode".into());
                }
                let theirs = EpochFile::decode(payload).map_err(|e| e.to_string())?;
                if self.epoch_history().as_ref() != Some(&theirs) {
                    self.save_epochs(theirs).await.map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Why a slave's HELLO cannot be served, if it cannot.
    fn refuse_reason(&self, h: &Hello) -> Option<String> {
        if h.shard as usize != self.place.id || h.shard_count as usize != self.place.count {
            return Some(format!(
                "shard layout differs: slave shard {} of {}, master shard {} of {} (master and slave need the same shard_count)",
                h.shard, h.shard_count, self.place.id, self.place.count
            ));
        }
        if h.segment_bytes != self.config().store.segment_bytes {
            return Some(format!("segment size differs: slave {} bytes, master {} (store.segment_bytes must match)", h.segment_bytes, self.config().store.segment_bytes));
        }
        if ShardId::of_phys(h.end_phys).0 as usize != self.place.id {
            return Some(format!("slave log end {} is not an offset of shard {}", h.end_phys, self.place.id));
        }
        if self.config().controller_mode {
            // Epochs and ends are compared by `handshake_point`.
            return None;
        }
        if h.last_epoch > MASTER_EPOCH {
            return Some(format!("slave holds epoch {} records, this master serves epoch {MASTER_EPOCH}", h.last_epoch));
        }
        let master_end = self.store.write_offset();
        if local_of(h.end_phys) > master_end {
            return Some(format!(
                "slave log end {} is past this master's end {}: the slave holds records this master lost (it restarted with less). \
                 Keep the slave's data: promote it, or re-seed the master from it (README, Replication)",
                local_of(h.end_phys),
                master_end
            ));
        }
        None
    }

    /// Controller mode (§3.4): where a slave may start. `Ok(None)`: WELCOME at its end;
    /// `Ok(Some(to))`: it holds records past `to`, where its log stops agreeing with
    /// this master's (TRUNCATE); `Err`: refused (not the master; a slave of a higher
    /// epoch, which also fences this stale master; logs that diverged).
    fn handshake_point(&self, h: &Hello) -> Result<Option<u64>, String> {
        let Role::Master { epoch } = self.ha.role.get() else {
            let master = self.ha.master_addr.get().map_or_else(|| "unknown".to_string(), |a| a.to_string());
            return Err(format!("not the master of epoch {}; master is {master}", self.known_epoch()));
        };
        if h.last_epoch > epoch {
            self.fence("a slave holds a higher epoch");
            return Err(format!("slave holds epoch {} records, above this master's epoch {epoch}: this master is stale and fenced itself", h.last_epoch));
        }
        if local_of(h.end_phys) == 0 {
            // An empty slave starts where this log does (re-seeded if need be).
            return Ok(None);
        }
        let Some(history) = self.epoch_history() else { return Err("no epoch history on this master".into()) };
        let theirs = EpochFile::from_entries(vec![EpochEntry { epoch: h.last_epoch, start_phys: h.last_epoch_start_phys }]).map_err(|e| e.to_string())?;
        let master_end = self.store.shard().phys(self.store.write_offset());
        let point = history.find_consistent_point(master_end, &theirs, h.end_phys).map_err(|e| e.to_string())?;
        Ok((point < h.end_phys).then_some(point))
    }

    /// SYNC_MASTER: waits until a slave confirmed everything up to `ticket` (the local
    /// log end of a send), or answers why not.
    pub(super) async fn wait_replicated(&self, ticket: u64) -> Result<(), (i32, String)> {
        let mode: SyncAck = self.config().ha_sync_ack;
        // Slaves get only what is durable here: flush now rather than at the interval.
        self.store.request_flush();
        let wait = {
            let mut master = self.ha.master.borrow_mut();
            // A master alone in its in-sync set needs nobody.
            if master.slave_count() == 0 && master.in_sync().is_none_or(|s| !s.is_empty()) {
                return Err((rs::SLAVE_NOT_AVAILABLE, "no slave is attached to this SYNC_MASTER shard: the message is stored on the master only".into()));
            }
            master.wait_for(ticket, mode).map_err(|e| (rs::SYSTEM_BUSY, e.to_string()))?
        };
        let Some(rx) = wait else { return Ok(()) };
        let timeout_ms = self.config().sync_flush_timeout_ms;
        match crate::rt::timeout(&self.rt, Duration::from_millis(timeout_ms), rx).await {
            Some(Some(())) => Ok(()),
            Some(None) | None => {
                self.ha.master.borrow_mut().prune();
                Err((rs::FLUSH_SLAVE_TIMEOUT, format!("no slave confirmed the message within syncFlushTimeout {timeout_ms} ms: it is stored on the master only")))
            }
        }
    }

    /// Slave side: keeps a connection to the master's shard of the same number (made by
    /// `connect`) and appends what arrives, until the shard stops.
    pub async fn run_replication<S, F, C>(self: Rc<Self>, connect: C)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
        F: Future<Output = Option<S>>,
        C: Fn() -> F,
    {
        while !self.store_stop.get() {
            if self.ha.restart_wanted.get() {
                // The cut is on disk: nothing more is appended until the restart.
                return;
            }
            if self.config().controller_mode && !matches!(self.ha.role.get(), Role::Slave { .. }) {
                let changed = self.role_watch();
                let _ = crate::rt::timeout(&self.rt, Duration::from_millis(RECONNECT_INTERVAL_MS), changed).await;
                continue;
            }
            let changed = self.role_watch();
            let session = async {
                match connect().await {
                    Some(stream) => Some(self.clone().replicate_once(stream).await),
                    None => None,
                }
            };
            let ended = futures_lite::future::or(session, async {
                let _ = changed.await;
                Some(Err(HaError::RoleChanged))
            });
            match ended.await {
                Some(Err(HaError::Truncated(to))) => {
                    tracing::warn!(shard = self.place.id, to, "the cut is durable: this broker must restart to apply it");
                    return;
                }
                Some(Err(HaError::RoleChanged)) => {
                    let mut s = self.ha.slave.get();
                    s.connected = false;
                    self.ha.slave.set(s);
                    continue;
                }
                Some(result) => match result {
                    Err(HaError::Refused(reason)) => tracing::error!(shard = self.place.id, reason, "master refused this slave; retrying"),
                    Err(HaError::Store(e)) => tracing::error!(shard = self.place.id, error = %e, "replicated data does not continue this log; retrying"),
                    Err(e @ HaError::Auth(_)) => tracing::error!(shard = self.place.id, error = %e, "replication not authenticated (haAuthSecret): retrying"),
                    Err(e) => tracing::info!(shard = self.place.id, error = %e, "replication connection ended; reconnecting"),
                    Ok(()) => {}
                },
                None => tracing::debug!(shard = self.place.id, "master not reachable; retrying"),
            }
            let mut s = self.ha.slave.get();
            s.connected = false;
            self.ha.slave.set(s);
            self.rt.sleep(Duration::from_millis(RECONNECT_INTERVAL_MS)).await;
        }
    }

    async fn replicate_once<S: AsyncRead + AsyncWrite + Unpin + 'static>(self: Rc<Self>, stream: S) -> Result<(), HaError> {
        let (mut reader, mut writer) = futures_lite::io::split(stream);
        let end = self.store.shard().phys(self.store.write_offset());
        let secret = self.config().ha_auth_secret().map(<[u8]>::to_vec);
        let auth_nonce = if secret.is_some() { Some(fresh_nonce()?) } else { None };
        let controller = self.config().controller_mode;
        let generation = self.role_generation();
        let (last_epoch, last_epoch_start_phys) = match self.epoch_history() {
            Some(history) if controller => {
                let last = history.clipped_to(end).last();
                (last.epoch, last.start_phys)
            }
            _ => (if self.store.write_offset() > 0 { MASTER_EPOCH } else { 0 }, self.store.shard().phys(0)),
        };
        let hello = Hello {
            shard: self.place.id as u16,
            shard_count: self.place.count as u16,
            segment_bytes: self.config().store.segment_bytes,
            last_epoch,
            last_epoch_start_phys,
            end_phys: end,
            auth_nonce,
            // The id the controller assigned (told with the role), which SyncStateSets name.
            controller_broker_id: controller.then(|| self.ha.controller_id.get().and_then(|id| u64::try_from(id).ok()).unwrap_or(self.config().broker_id)),
        };
        write_frame(&mut writer, &Frame::Hello(hello.clone())).await?;
        let mut buf = Vec::new();
        let mut answer = with_timeout(&self.rt, HANDSHAKE_TIMEOUT_MS, read_frame_bounded(&mut reader, &mut buf, MASTER_ANSWER_BYTES_MAX)).await?;
        if let Some(secret) = &secret {
            // The master proves the secret first (its proof covers this HELLO's nonce,
            // so it is fresh); a master that cannot is not followed.
            match answer {
                Frame::Challenge { master_nonce, master_proof } => {
                    if !hello.auth_verify(secret, AuthSide::Master, &master_nonce, &master_proof) {
                        return Err(HaError::Auth("the master's proof is wrong (haAuthSecret differs)"));
                    }
                    write_frame(&mut writer, &Frame::Auth { slave_proof: hello.auth_proof(secret, AuthSide::Slave, &master_nonce) }).await?;
                    answer = with_timeout(&self.rt, HANDSHAKE_TIMEOUT_MS, read_frame_bounded(&mut reader, &mut buf, MASTER_ANSWER_BYTES_MAX)).await?;
                }
                Frame::Welcome { .. } => return Err(HaError::Auth("the master did not prove it holds haAuthSecret (set it on the master too)")),
                _ => {}
            }
        }
        let epoch = match answer {
            Frame::Welcome { epoch, .. } if controller && epoch < self.known_epoch() => {
                return Err(HaError::Refused(format!("the master serves epoch {epoch}, below epoch {} this slave knows: not followed", self.known_epoch())));
            }
            Frame::Truncate { to_phys } if controller => {
                let to = local_of(to_phys);
                if ShardId::of_phys(to_phys).0 as usize != self.place.id || to_phys > end {
                    return Err(HaError::Unexpected("TRUNCATE past this log's end"));
                }
                self.store.write_truncate_marker(to).await?;
                self.ha.restart_wanted.set(true);
                return Err(HaError::Truncated(to_phys));
            }
            Frame::Welcome { epoch, start_phys, master_end_phys } => {
                if start_phys != end {
                    // Only an empty replica may start elsewhere: where its master's
                    // retained log begins (re-seed).
                    if self.store.write_offset() != 0 || start_phys < end {
                        return Err(HaError::Unexpected("WELCOME starts elsewhere than this log's end"));
                    }
                    self.store.reseed_at(start_phys).await?;
                    tracing::warn!(shard = self.place.id, start_phys, "empty store re-seeded: this slave holds the master's log from its oldest retained segment on");
                }
                let end = start_phys;
                tracing::info!(shard = self.place.id, from = end, master_end = master_end_phys, "replicating from the master");
                epoch
            }
            Frame::Refuse { reason } => return Err(HaError::Refused(reason)),
            _ => return Err(HaError::Unexpected("expected WELCOME")),
        };
        let newest_store_ms = self.ha.slave.get().newest_store_ms;
        self.ha.slave.set(crate::ha::SlaveState { connected: true, master_end_phys: end, last_heard_ms: self.now_ms(), epoch, newest_store_ms });
        // Durable progress is reported by its own task as the flusher advances.
        let (ack_tx, ack_rx) = crate::rt::chan::bounded::<Frame>(4);
        let reporter = {
            let (shard, ack_tx) = (self.clone(), ack_tx.clone());
            async move {
                let mut reported = 0u64;
                while !shard.store_stop.get() {
                    shard.store.wait_appended(reported).await;
                    let end = shard.store.write_offset();
                    if shard.store.wait_durable(end).await.is_err() {
                        break;
                    }
                    reported = end;
                    let phys = |l: u64| shard.store.shard().phys(l);
                    let ack = Frame::Ack { received_phys: phys(shard.store.write_offset()), durable_phys: phys(shard.store.flushed_offset()) };
                    if ack_tx.send(ack).await.is_err() {
                        break;
                    }
                }
            }
        };
        self.rt.spawn(reporter);
        // Offsets clients committed here (the master was unreachable for them) go to the
        // master every META interval until its own table shows them.
        let offsets_reporter = {
            let (shard, ack_tx) = (self.clone(), ack_tx.clone());
            async move {
                while !shard.store_stop.get() && !ack_tx.is_closed() {
                    shard.rt.sleep(Duration::from_millis(META_INTERVAL_MS)).await;
                    let Some(payload) = shard.pending_client_offsets() else { continue };
                    if ack_tx.send(Frame::Meta { kind: MetaKind::ConsumerOffsets, payload }).await.is_err() {
                        break;
                    }
                }
            }
        };
        self.rt.spawn(offsets_reporter);
        // The writer half lives in this task: it ends when this function returns
        // (`_session` drops), so a connection given up here is closed, not left open
        // until the reporter's next ACK (which needs new data to come).
        let (_session, session_ended) = crate::rt::chan::oneshot::<()>();
        let writer_task = async move {
            let write_acks = async {
                while let Some(frame) = ack_rx.recv().await {
                    if write_frame(&mut writer, &frame).await.is_err() {
                        break;
                    }
                }
            };
            futures_lite::future::or(write_acks, async {
                let _ = session_ended.await;
            })
            .await;
        };
        self.rt.spawn(writer_task);
        loop {
            // The master sends at least a heartbeat every HEARTBEAT_INTERVAL_MS: silence
            // this long means the connection is dead (a partition, a master host gone)
            // even if no error ever comes; reconnect rather than wait on it forever.
            let frame = with_timeout(&self.rt, SLAVE_SILENT_MAX_MS, read_frame(&mut reader, &mut buf)).await?;
            tracing::trace!(shard = self.place.id, kind = ?std::mem::discriminant(&frame), "replication frame");
            let (phys_from, master_end_phys, records) = match frame {
                Frame::Data { phys_from, master_end_phys, records } => (phys_from, master_end_phys, records),
                Frame::Meta { kind, payload } => {
                    if let Err(e) = self.apply_replicated_meta(kind, &payload).await {
                        tracing::warn!(shard = self.place.id, ?kind, error = %e, "replicated metadata not applied; sent again on its next change or reconnect");
                    }
                    continue;
                }
                _ => return Err(HaError::Unexpected("expected DATA or META")),
            };
            let mut at = 0usize;
            let mut newest_store_ms = self.ha.slave.get().newest_store_ms;
            while at < records.len() {
                if self.role_generation() != generation {
                    // Promoted or re-pointed meanwhile: not one more byte of the old master.
                    return Err(HaError::RoleChanged);
                }
                match self.store.append_replicated(phys_from + at as u64, &records[at..]) {
                    Ok(r) => {
                        at += r.bytes_consumed;
                        if r.last_store_timestamp_ms > 0 {
                            newest_store_ms = r.last_store_timestamp_ms;
                        }
                    }
                    Err(StoreError::Busy { .. }) => {
                        let end = self.store.write_offset();
                        tracing::trace!(shard = self.place.id, end, "replica busy: waiting for a flush");
                        self.store.wait_durable(end).await?;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            self.ha.slave.set(crate::ha::SlaveState { connected: true, master_end_phys, last_heard_ms: self.now_ms(), epoch, newest_store_ms });
            let phys = |l: u64| self.store.shard().phys(l);
            let ack = Frame::Ack { received_phys: phys(self.store.write_offset()), durable_phys: phys(self.store.flushed_offset()) };
            // A full queue means ACKs are already on their way; this one adds nothing.
            let _ = ack_tx.try_send(ack);
            tracing::trace!(shard = self.place.id, at, "replication frame applied");
        }
    }

    /// Commits a consumer offset a client sent (UPDATE_CONSUMER_OFFSET or a pull's
    /// commit flag). On a slave the commit is also kept for the master
    /// (`ha_client_offsets`), which takes it by the higher offset when it is reachable.
    pub(super) fn commit_client_offset(&self, group: &str, topic: &str, queue_id: i32, offset: u64) -> Result<(), crate::meta::MetaError> {
        self.offsets.table.borrow_mut().commit(group, topic, queue_id, offset)?;
        if !self.is_master() {
            // Bounded: its keys are keys of the offset table just committed to.
            self.ha.client_offsets.borrow_mut().insert((group.to_string(), topic.to_string(), queue_id), offset);
        }
        Ok(())
    }

    /// The encoded table of offsets committed on this slave that its master has not
    /// shown back yet; `None` when there are none.
    fn pending_client_offsets(&self) -> Option<Vec<u8>> {
        let pending = self.ha.client_offsets.borrow();
        if pending.is_empty() {
            return None;
        }
        let mut table = crate::meta::offsets::ConsumerOffsetTable::default();
        for ((group, topic, queue_id), offset) in pending.iter() {
            table.commit(group, topic, *queue_id, *offset).ok()?;
        }
        table.encode().ok()
    }

    /// A master takes the offsets its slave's clients committed, where they are ahead of
    /// its own. Returns how many advanced.
    fn merge_slave_offsets(&self, payload: &[u8]) -> Result<usize, String> {
        let theirs = crate::meta::offsets::ConsumerOffsetTable::decode(payload).map_err(|e| e.to_string())?;
        let mut ours = self.offsets.table.borrow_mut();
        let mut advanced = 0;
        for ((group, topic, queue), offset) in theirs.offsets {
            if ours.query(&group, &topic, queue).is_none_or(|o| o < offset) {
                ours.commit(&group, &topic, queue, offset).map_err(|e| e.to_string())?;
                advanced += 1;
            }
        }
        Ok(advanced)
    }

    pub fn ha_slave_state(&self) -> crate::ha::SlaveState {
        self.ha.slave.get()
    }

    /// Where this slave shard connects: its master's replication port base + shard id;
    /// `None` while the master is unknown (the NameServer has not named one yet).
    pub fn ha_master_target(&self) -> Option<std::net::SocketAddr> {
        let base = self.ha.master_addr.get()?;
        Some(std::net::SocketAddr::new(base.ip(), base.port().checked_add(self.place.id as u16)?))
    }

    /// Whether a slave still has to learn its master from the NameServer.
    pub fn ha_master_unknown(&self) -> bool {
        !self.config().controller_mode && !self.config().role.is_master() && self.ha.master_addr.get().is_none()
    }

    /// The NameServer named `ha_server_addr` as the master of this broker name (its
    /// answer to REGISTER_BROKER). Used only when `ha_master_address` is not configured;
    /// a change (the master moved) reaches every shard, whose next connection attempt
    /// goes there.
    pub fn learn_ha_master(self: &Rc<Self>, ha_server_addr: &str) {
        // In controller mode the controller names the master (`set_role`).
        if self.config().role.is_master() || self.config().ha_master_address.is_some() || self.config().controller_mode {
            return;
        }
        let addr: std::net::SocketAddr = match ha_server_addr.parse() {
            Ok(a) => a,
            Err(_) => {
                tracing::warn!(shard = self.place.id, ha_server_addr, "the NameServer named a master replication address that is not ip:port; ignored");
                return;
            }
        };
        if self.ha.master_addr.get() == Some(addr) {
            return;
        }
        tracing::info!(master = %addr, "the NameServer names this slave's master");
        self.ha.master_addr.set(Some(addr));
        self.mesh.broadcast(super::mesh::ShardEvent::HaMaster { addr });
    }

    pub fn ha_slaves(&self) -> Vec<(u64, crate::ha::SlaveProgress)> {
        self.ha.master.borrow().slaves().map(|(c, p)| (*c, *p)).collect()
    }
}
