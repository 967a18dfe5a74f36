//! NOTIFY_BROKER_ROLE_CHANGED (1008) to the alive replicas of a broker set after a
//! committed election (docs/design/controller.md §2.5, Apache
//! `ControllerManager.java:175-192,211-247`), oneway.
//!
//! Owns: the controller's client connections to brokers (one per broker address,
//! reused, at most `NOTIFY_CONNECTIONS_MAX` kept) and the 1008 request it sends.
//!
//! Invariants: sending never delays the answer to the request that caused it (each
//! notification is its own task); a broker that cannot be reached within
//! `NOTIFY_CONNECT_TIMEOUT_MS` is skipped (it learns the new master from its periodic
//! GET_REPLICA_INFO); a failed connection is dropped and reopened next time.

use crate::state::BrokerSet;
use openraft::AsyncRuntime;
use ringmq_client::net::Connection;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::request_code as req;
use ringmq_client::remoting::controller::{NotifyBrokerRoleChangedRequestHeader, SyncStateSet};
use ringmq_client::remoting::{RemotingCommand, SerializeType};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

/// Broker connections kept for notifications.
pub const NOTIFY_CONNECTIONS_MAX: usize = 256;
/// How long a notification may wait for its connection.
pub const NOTIFY_CONNECT_TIMEOUT_MS: u64 = 1000;

/// The 1008 request for a set's current master (`writable_after_ms`: RingMQ's
/// `writableAfterMs` of a planned switchover).
pub fn role_changed(set: &BrokerSet, writable_after_ms: Option<u64>) -> RemotingCommand {
    let master_address = set.master.and_then(|m| set.replicas.get(&m)).map(|r| r.address.clone());
    let mut cmd = RemotingCommand::request(req::NOTIFY_BROKER_ROLE_CHANGED)
        .with_header(&NotifyBrokerRoleChangedRequestHeader {
            master_address,
            master_epoch: Some(set.master_epoch),
            sync_state_set_epoch: Some(set.sss_epoch),
            master_broker_id: set.master,
        })
        .with_body(
            SyncStateSet {
                sync_state_set: set.sync_state_set.iter().copied().collect(),
                sync_state_set_epoch: set.sss_epoch,
            }
            .encode(),
        );
    if let Some(ms) = writable_after_ms {
        cmd = cmd.with_ext(crate::liveness::WRITABLE_AFTER_EXT, ms.to_string());
    }
    cmd
}

/// Sends role-change notifications (runs on the controller's executor).
pub struct Notifier<RT> {
    conns: Rc<RefCell<BTreeMap<String, Rc<Connection>>>>,
    _rt: PhantomData<fn() -> RT>,
}

impl<RT> Default for Notifier<RT> {
    fn default() -> Self {
        Self { conns: Rc::default(), _rt: PhantomData }
    }
}

impl<RT: AsyncRuntime> Notifier<RT> {
    /// Sends `cmd` oneway to every address, each in its own task.
    pub fn send(&self, addresses: Vec<String>, cmd: RemotingCommand) {
        for addr in addresses {
            let conns = self.conns.clone();
            let cmd = cmd.clone();
            drop(RT::spawn(async move {
                let existing = conns.borrow().get(&addr).cloned().filter(|c| !c.is_closed());
                let conn = match existing {
                    Some(c) => c,
                    None => {
                        let timeout = Duration::from_millis(NOTIFY_CONNECT_TIMEOUT_MS);
                        match Connection::connect(&addr, timeout, SerializeType::Json, None).await {
                            Ok(c) => {
                                let mut conns = conns.borrow_mut();
                                if conns.len() >= NOTIFY_CONNECTIONS_MAX {
                                    conns.retain(|_, c| !c.is_closed());
                                }
                                if conns.len() < NOTIFY_CONNECTIONS_MAX {
                                    conns.insert(addr.clone(), c.clone());
                                }
                                c
                            }
                            Err(e) => {
                                tracing::warn!(broker = addr, error = %e, "cannot notify a broker of its role change");
                                return;
                            }
                        }
                    }
                };
                if let Err(e) = conn.oneway(cmd).await {
                    tracing::warn!(broker = addr, error = %e, "role change notification not sent");
                    conns.borrow_mut().remove(&addr);
                }
            }));
        }
    }
}
