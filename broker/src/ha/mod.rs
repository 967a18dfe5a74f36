//! Master/slave replication per shard (issue 13; DESIGN.md §5): shard i of a master
//! streams its CommitLog to shard i of each slave, which writes the same bytes at the
//! same physical offsets through its own store (`Store::append_replicated`: records
//! checked as recovery checks them, then dispatched to ConsumeQueues and the index).
//!
//! `proto` (`ringmq_client::remoting::ha`) is the stream's wire format. Every HELLO carries the slave's last epoch
//! and where it began, every WELCOME the master's epoch. In controller mode (issue 27)
//! those come from the shard's epoch history (`epoch`), a master's acknowledgements may
//! need every member of an in-sync set (`MasterState::set_in_sync`), and a shard's role
//! is a cell (`Role`, driven by `shard/role.rs`).

pub mod epoch;

/// The stream's wire format lives with the other codecs in the client crate.
pub use ringmq_client::remoting::ha as proto;

pub mod replicas;

use crate::rt::chan::{self, OneshotReceiver, OneshotSender};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

/// RocketMQ's `syncFlushTimeout` default.
pub const SYNC_FLUSH_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// SYNC_MASTER sends waiting for a slave's confirmation, per shard; more get SYSTEM_BUSY.
pub const SYNC_WAITERS_MAX: usize = 65_536;
/// A master sends an empty DATA (its log end) when it has had nothing to send this long.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1_000;
/// A master forgets a slave that has not acknowledged for this long, and a slave gives up
/// a master it has not heard from (not even a heartbeat) for this long: either closes the
/// connection and the slave reconnects, so a partition that heals is noticed even when
/// no error ever reaches the socket.
pub const SLAVE_SILENT_MAX_MS: u64 = 10_000;
/// A slave waits this long between attempts to reach its master.
pub const RECONNECT_INTERVAL_MS: u64 = 1_000;
/// How often a master compares its metadata with what it last sent a slave.
pub const META_INTERVAL_MS: u64 = 1_000;
/// Slave connections one master shard serves at once.
pub const SLAVES_PER_SHARD_MAX: usize = 8;

/// A shard's role in controller mode (docs/design/controller.md §3.5), set by the
/// controller (`Shard::set_role`; the simulator harness plays it). Without controller
/// mode the static `BrokerConfig.role` decides and this is unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Takes writes in `epoch` (its epoch file has the epoch's entry, durable).
    Master { epoch: u64 },
    /// Follows `master` (its replication base address) of `epoch`; takes no writes.
    Slave { epoch: u64, master: SocketAddr },
    /// Neither: a master that learnt of a higher epoch, or a broker whose role is not
    /// known yet. Refuses writes and follows nobody.
    #[default]
    Fenced,
}

/// What a SYNC_MASTER's acknowledgement promises about the slave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SyncAck {
    /// The slave appended the bytes to its log (RocketMQ's meaning: in its page cache).
    #[default]
    Received,
    /// The slave's fdatasync covers them.
    Durable,
}

/// How far one connected slave has confirmed (local log offsets of this shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveProgress {
    pub received: u64,
    pub durable: u64,
    pub last_ack_ms: i64,
    /// The slave's controller broker id (its HELLO, controller mode).
    pub broker_id: Option<u64>,
}

/// A master shard's view of its slaves and the sends waiting for them.
#[derive(Default)]
pub struct MasterState {
    slaves: BTreeMap<u64, SlaveProgress>,
    /// (local offset a send needs confirmed, who waits), in arrival order.
    waiters: Vec<(u64, OneshotSender<()>)>,
    /// Controller mode with allAck (docs/design/controller.md §3.7): the broker ids of
    /// the other SyncStateSet members, every one of which must confirm; empty: the
    /// master alone, which acknowledges at once. `None`: any one slave confirms (the
    /// SYNC_MASTER rule).
    in_sync: Option<BTreeSet<u64>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    #[error("{0} sends already wait for a slave on this shard")]
    TooMany(usize),
}

impl MasterState {
    pub fn slave_count(&self) -> usize {
        self.slaves.len()
    }

    pub fn slaves(&self) -> impl Iterator<Item = (&u64, &SlaveProgress)> {
        self.slaves.iter()
    }

    pub fn attach(&mut self, conn: u64, at: u64, now_ms: i64) -> bool {
        if self.slaves.len() >= SLAVES_PER_SHARD_MAX {
            return false;
        }
        self.slaves.insert(conn, SlaveProgress { received: at, durable: at, last_ack_ms: now_ms, broker_id: None });
        true
    }

    /// Names the broker behind an attached connection (its HELLO's controller id).
    pub fn set_broker_id(&mut self, conn: u64, broker_id: Option<u64>) {
        if let Some(p) = self.slaves.get_mut(&conn) {
            p.broker_id = broker_id;
        }
    }

    pub fn in_sync(&self) -> Option<&BTreeSet<u64>> {
        self.in_sync.as_ref()
    }

    /// Sets who must confirm (see `in_sync`); returns the waiters that are confirmed
    /// under the new set.
    pub fn set_in_sync(&mut self, members: Option<BTreeSet<u64>>, mode: SyncAck) -> Vec<OneshotSender<()>> {
        self.in_sync = members;
        self.release(mode)
    }

    pub fn detach(&mut self, conn: u64) {
        self.slaves.remove(&conn);
    }

    /// The offset confirmed in `mode`: the highest any slave confirmed, or with an
    /// in-sync set the lowest of its members' (each member's best connection; a member
    /// not connected confirms nothing).
    pub fn confirmed(&self, mode: SyncAck) -> Option<u64> {
        let offset = |p: &SlaveProgress| if mode == SyncAck::Received { p.received } else { p.durable };
        let Some(members) = &self.in_sync else { return self.slaves.values().map(offset).max() };
        let mut lowest = u64::MAX;
        for id in members {
            lowest = lowest.min(self.slaves.values().filter(|p| p.broker_id == Some(*id)).map(offset).max()?);
        }
        Some(lowest)
    }

    fn release(&mut self, mode: SyncAck) -> Vec<OneshotSender<()>> {
        let Some(confirmed) = self.confirmed(mode) else { return Vec::new() };
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters).into_iter().partition(|(target, _)| *target <= confirmed);
        self.waiters = waiting;
        done.into_iter().map(|(_, tx)| tx).collect()
    }

    /// Records an ACK; returns the waiters it releases.
    pub fn on_ack(&mut self, conn: u64, received: u64, durable: u64, now_ms: i64, mode: SyncAck) -> Vec<OneshotSender<()>> {
        if let Some(p) = self.slaves.get_mut(&conn) {
            // Offsets only move forward on one connection.
            p.received = p.received.max(received);
            p.durable = p.durable.max(durable);
            p.last_ack_ms = now_ms;
        }
        self.release(mode)
    }

    /// A send that needs `target` confirmed: `None` when already confirmed.
    pub fn wait_for(&mut self, target: u64, mode: SyncAck) -> Result<Option<OneshotReceiver<()>>, WaitError> {
        if self.confirmed(mode).is_some_and(|c| c >= target) {
            return Ok(None);
        }
        if self.waiters.len() >= SYNC_WAITERS_MAX {
            return Err(WaitError::TooMany(self.waiters.len()));
        }
        let (tx, rx) = chan::oneshot();
        self.waiters.push((target, tx));
        Ok(Some(rx))
    }

    /// Lets every waiting send go unconfirmed (a demotion): their receivers see the
    /// sender dropped. Returns how many there were.
    pub fn fail_waiters(&mut self) -> usize {
        std::mem::take(&mut self.waiters).len()
    }

    /// Forgets every slave (a demotion: their connections are closing).
    pub fn detach_all(&mut self) {
        self.slaves.clear();
    }

    /// Drops waiters whose receiver gave up (timed out).
    pub fn prune(&mut self) {
        self.waiters.retain(|(_, tx)| !tx.is_closed());
    }
}

/// A slave shard's view of its master.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SlaveState {
    pub connected: bool,
    /// The master's log end as last heard (physical offset).
    pub master_end_phys: u64,
    /// When it was last heard (ms).
    pub last_heard_ms: i64,
    pub epoch: u64,
    /// Store time (the master's clock) of the newest record this slave appended in this
    /// run; 0 before the first. `haBehindMs` is its age while the slave is behind.
    pub newest_store_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_are_released_by_the_first_slave_that_confirms() {
        let mut m = MasterState::default();
        assert_eq!(m.confirmed(SyncAck::Received), None);
        assert!(m.attach(1, 0, 0));
        assert!(m.attach(2, 0, 0));
        let a = m.wait_for(100, SyncAck::Received).unwrap().expect("waits");
        let _b = m.wait_for(200, SyncAck::Received).unwrap().expect("waits");
        assert!(m.on_ack(1, 50, 0, 1, SyncAck::Received).is_empty());
        let released = m.on_ack(2, 150, 100, 2, SyncAck::Received);
        assert_eq!(released.len(), 1);
        for tx in released {
            tx.send(());
        }
        drop(a);
        assert_eq!(m.confirmed(SyncAck::Durable), Some(100));
        assert!(m.wait_for(100, SyncAck::Durable).unwrap().is_none(), "already durable on slave 2");
        // Offsets never move back on one connection.
        m.on_ack(2, 10, 10, 3, SyncAck::Received);
        assert_eq!(m.confirmed(SyncAck::Received), Some(150));
        m.detach(2);
        assert_eq!(m.confirmed(SyncAck::Received), Some(50));
        for c in 3..=SLAVES_PER_SHARD_MAX as u64 + 1 {
            assert!(m.attach(c, 0, 0));
        }
        assert!(!m.attach(99, 0, 0), "bounded");
    }

    /// (in-sync set, (broker id, received) per connection) → confirmed offset.
    fn check_in_sync(members: Option<&[u64]>, slaves: &[(Option<u64>, u64)], expected: Option<u64>) {
        let mut m = MasterState::default();
        for (conn, &(id, received)) in slaves.iter().enumerate() {
            assert!(m.attach(conn as u64, 0, 0));
            m.set_broker_id(conn as u64, id);
            m.on_ack(conn as u64, received, 0, 1, SyncAck::Received);
        }
        m.set_in_sync(members.map(|s| s.iter().copied().collect()), SyncAck::Received);
        assert_eq!(m.confirmed(SyncAck::Received), expected, "{members:?} {slaves:?}");
    }

    #[test]
    fn an_in_sync_set_needs_every_member() {
        check_in_sync(None, &[(Some(2), 10), (Some(3), 30)], Some(30));
        check_in_sync(Some(&[2, 3]), &[(Some(2), 10), (Some(3), 30)], Some(10));
        check_in_sync(Some(&[3]), &[(Some(2), 10), (Some(3), 30)], Some(30));
        check_in_sync(Some(&[2, 3]), &[(Some(2), 10)], None);
        check_in_sync(Some(&[2]), &[(Some(2), 10), (Some(2), 40)], Some(40));
        check_in_sync(Some(&[2]), &[(None, 50)], None);
        check_in_sync(Some(&[]), &[], Some(u64::MAX));
        // A waiter released when the set shrinks to the members that confirmed.
        let mut m = MasterState::default();
        m.attach(1, 0, 0);
        m.set_broker_id(1, Some(2));
        m.set_in_sync(Some([2, 3].into_iter().collect()), SyncAck::Received);
        let _rx = m.wait_for(100, SyncAck::Received).unwrap().expect("waits for broker 3");
        assert!(m.on_ack(1, 100, 0, 1, SyncAck::Received).is_empty());
        assert_eq!(m.set_in_sync(Some([2].into_iter().collect()), SyncAck::Received).len(), 1);
    }
}
