//! Controller mode's role switching for one shard (docs/design/controller.md §3.3,
//! §3.5): the role cell (`ha::Role`), the epoch history it writes, and what every
//! other path asks (`is_master`), and the in-sync set a SYNC send waits for (allAck,
//! `set_sync_state_set`). The controller (WP4), or a simulator harness playing it,
//! calls `set_role` and `set_sync_state_set`.
//!
//! Invariants: without `controller_mode` nothing here changes behaviour (`is_master`
//! is the static `BrokerConfig.role`, the generation never moves); a shard takes a
//! write of epoch e only after `(e, its log end)` is durable in its epoch file; a
//! demotion fences at once, before any await: writes are refused, waiting SYNC sends
//! are answered SERVICE_NOT_AVAILABLE, never SUCCESS, slave connections and the
//! master-only tasks (delay/timer delivery, transaction checks and persistence) of the
//! old role end (each holds the generation it was started in); a slave appends
//! replicated bytes only in the generation its connection started in.

use super::{OpenError, Shard};
use crate::ha::epoch::{self, EpochError, EpochFile, EPOCH_FILE_NAME};
use crate::ha::Role;
use crate::meta::snapshot::SnapshotStore;
use crate::rt::chan::{self, OneshotReceiver};
use crate::rt::Runtime;
use std::path::Path;
use std::rc::Rc;

/// Tasks and connections that wait for this shard's next role change at once (slave
/// connections, the replication loop); one more is told "changed" at once and retries.
pub const ROLE_WATCHERS_MAX: usize = 64;
/// The answer a send gets when its master was demoted before it was acknowledged.
pub const DEMOTED_REMARK: &str = "demoted: not acknowledged";

#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    #[error("the broker is not in controller mode")]
    NotControllerMode,
    #[error("epoch {asked} is not above this shard's last epoch {last}")]
    StaleEpoch { asked: u64, last: u64 },
    #[error("another role change came first")]
    Superseded,
    #[error("the shard is stopping")]
    Stopping,
    #[error(transparent)]
    Epoch(#[from] EpochError),
}

/// The epoch history of the store under `dir` at open, with a pending cut applied to
/// it (durably) when there was one; `None` outside controller mode without a cut.
pub(super) async fn open_epochs<D: crate::store::io::Disk>(disk: D, dir: &Path, shard: usize, log_start_phys: u64, pending_cut_phys: Option<u64>, controller_mode: bool) -> Result<Option<EpochFile>, OpenError> {
    if !controller_mode && pending_cut_phys.is_none() {
        return Ok(None);
    }
    let fail = |e: EpochError| OpenError::Meta { shard, what: "epoch file", reason: e.to_string() };
    let store = SnapshotStore::new(disk, dir, EPOCH_FILE_NAME);
    let mut file = epoch::load(&store, log_start_phys).await.map_err(fail)?;
    if let Some(cut) = pending_cut_phys {
        if file.truncate_suffix_by_offset(cut) {
            tracing::warn!(shard, cut, entries = ?file.entries(), "epoch entries past the pending cut removed");
            epoch::save(&store, &file).await.map_err(fail)?;
        }
    }
    Ok(Some(file))
}

impl<R: Runtime> Shard<R> {
    /// Whether this shard takes writes now: its role cell in controller mode, else the
    /// static role.
    pub fn is_master(&self) -> bool {
        if self.config().controller_mode {
            matches!(self.ha.role.get(), Role::Master { .. })
        } else {
            self.config().role.is_master()
        }
    }

    /// The role cell (controller mode), `None` otherwise.
    pub fn ha_role(&self) -> Option<Role> {
        self.config().controller_mode.then(|| self.ha.role.get())
    }

    /// Changes with every role change; master-only tasks and replication connections
    /// end when it is no longer the one they started in.
    pub(super) fn role_generation(&self) -> u64 {
        self.ha.role_generation.get()
    }

    /// Whether a master-only task started in `generation` goes on.
    pub(super) fn master_tasks_run(&self, generation: u64) -> bool {
        !self.store_stop.get() && self.role_generation() == generation && self.is_master()
    }

    /// Resolves at the next role change.
    pub(super) fn role_watch(&self) -> OneshotReceiver<()> {
        let (tx, rx) = chan::oneshot();
        let mut watchers = self.ha.role_watchers.borrow_mut();
        watchers.retain(|w| !w.is_closed());
        if watchers.len() < ROLE_WATCHERS_MAX {
            watchers.push(tx);
        }
        // Else `tx` drops here: the watcher sees a change at once and looks again.
        rx
    }

    fn role_changed(&self, role: Role) {
        self.ha.role.set(role);
        self.ha.role_generation.set(self.ha.role_generation.get() + 1);
        self.ha.role_watchers.borrow_mut().clear();
    }

    /// The epoch history (controller mode, or a store opened with a pending cut).
    pub fn epoch_history(&self) -> Option<EpochFile> {
        self.ha.epochs.borrow().clone()
    }

    /// The epoch this shard is in: its history's last (controller mode), else the fixed
    /// `MASTER_EPOCH`.
    pub fn current_epoch(&self) -> u64 {
        match (&*self.ha.epochs.borrow(), self.config().controller_mode) {
            (Some(e), true) => e.last_epoch(),
            _ => super::ha::MASTER_EPOCH,
        }
    }

    /// The highest epoch this shard knows of: its history's, or the one it was told
    /// to follow.
    pub(super) fn known_epoch(&self) -> u64 {
        let told = match self.ha.role.get() {
            Role::Master { epoch } | Role::Slave { epoch, .. } => epoch,
            Role::Fenced => 0,
        };
        self.current_epoch().max(told)
    }

    /// A TRUNCATE was taken: the cut is durable and the broker must restart (clean
    /// stop, open again) to apply it. The shard follows nobody until then.
    pub fn ha_restart_wanted(&self) -> bool {
        self.ha.restart_wanted.get()
    }

    pub(super) fn epoch_store(&self) -> SnapshotStore<R::Disk> {
        SnapshotStore::new(self.rt.disk(), self.config().store_root.join(format!("shard-{}", self.place.id)), EPOCH_FILE_NAME)
    }

    /// Saves `file` as the epoch history, durably, then installs it.
    pub(super) async fn save_epochs(&self, file: EpochFile) -> Result<(), EpochError> {
        epoch::save(&self.epoch_store(), &file).await?;
        *self.ha.epochs.borrow_mut() = Some(file);
        Ok(())
    }

    /// Refuses writes from now on (no await before that): waiting SYNC sends go
    /// unconfirmed, slaves are forgotten (their connections end at the next check),
    /// master-only tasks end.
    pub fn fence(&self, why: &str) {
        if !self.config().controller_mode {
            return;
        }
        let was = self.ha.role.get();
        self.role_changed(Role::Fenced);
        let failed = {
            let mut master = self.ha.master.borrow_mut();
            master.detach_all();
            // Waiters go first: none may be released by the reset below.
            let failed = master.fail_waiters();
            master.set_in_sync(None, crate::ha::SyncAck::Received);
            failed
        };
        if was != Role::Fenced {
            tracing::warn!(shard = self.place.id, ?was, unacknowledged = failed, why, "fenced: writes refused");
        }
    }

    /// The controller's decision for this shard (controller mode only).
    /// - `Master{e}`: stop following; `(e, log end)` appended to the epoch history and
    ///   made durable; then writes are taken and the master-only tasks run.
    /// - `Slave{e, master}`: fenced at once, then follows `master` (a master of an epoch
    ///   below the highest this shard knows is not followed).
    /// - `Fenced`: writes refused, nobody followed.
    pub async fn set_role(self: &Rc<Self>, role: Role) -> Result<(), RoleError> {
        if !self.config().controller_mode {
            return Err(RoleError::NotControllerMode);
        }
        if self.store_stop.get() {
            return Err(RoleError::Stopping);
        }
        if self.ha.role.get() == role {
            return Ok(());
        }
        match role {
            Role::Fenced => self.fence("the controller fenced this broker"),
            Role::Slave { epoch, master } => {
                let known = self.known_epoch();
                if epoch < known {
                    return Err(RoleError::StaleEpoch { asked: epoch, last: known });
                }
                self.fence("demoted to slave");
                self.ha.master_addr.set(Some(master));
                self.role_changed(role);
                tracing::info!(shard = self.place.id, epoch, %master, "slave: following the master");
            }
            Role::Master { epoch } => {
                let last = self.current_epoch();
                if epoch <= last {
                    return Err(RoleError::StaleEpoch { asked: epoch, last });
                }
                self.fence("promotion: no longer following");
                let generation = self.role_generation();
                let end_phys = self.store.shard().phys(self.store.write_offset());
                let mut history = self.epoch_history().unwrap_or_else(|| EpochFile::fresh(self.store.shard().phys(self.store.log_start())));
                // Entries mirrored from the old master past this log's end were never
                // written here.
                history = history.clipped_to(end_phys);
                history.append(epoch, end_phys)?;
                self.save_epochs(history).await?;
                if self.role_generation() != generation {
                    return Err(RoleError::Superseded);
                }
                if self.store_stop.get() {
                    return Err(RoleError::Stopping);
                }
                self.role_changed(role);
                let generation = self.role_generation();
                self.rt.spawn(self.clone().run_delivery(generation));
                self.rt.spawn(self.clone().run_txn_checks(generation));
                self.rt.spawn(self.clone().run_txn_persist(generation));
                tracing::info!(shard = self.place.id, epoch, start = end_phys, "master of epoch {epoch}");
            }
        }
        Ok(())
    }

    /// Controller mode with allAck (§3.7; WP4's SyncStateSet driver or a harness calls
    /// it): the broker ids of the other in-sync members, each of which must confirm a
    /// SYNC send; `None` goes back to "any one slave". Not kept across a role change.
    pub fn set_sync_state_set(&self, members: Option<std::collections::BTreeSet<u64>>) {
        if !self.config().controller_mode {
            return;
        }
        let mode = self.config().ha_sync_ack;
        let released = self.ha.master.borrow_mut().set_in_sync(members, mode);
        released.into_iter().for_each(|tx| tx.send(()));
    }

    /// A send stored while this shard was master in `generation`: answered
    /// SERVICE_NOT_AVAILABLE if the role changed since (controller mode).
    pub(super) fn unless_demoted(&self, generation: u64, answer: (i32, Option<String>)) -> (i32, Option<String>) {
        if self.config().controller_mode && (self.role_generation() != generation || !self.is_master()) {
            return (ringmq_client::remoting::codes::response_code::SERVICE_NOT_AVAILABLE, Some(DEMOTED_REMARK.into()));
        }
        answer
    }
}
