//! The shard's registration with every configured NameServer: REGISTER_BROKER with
//! the topic config every `register_interval_ms`, UNREGISTER_BROKER on a clean stop
//! (requests built by `namesrv_client`, sent through `Runtime::call_remote`).
//! Host route mode: runs on the metadata owner shard, which holds the authoritative
//! topic table. Shard route mode: runs on every shard, each registering itself as
//! `<brokerName>-s<i>` at its own port with its own queues (`Shard::topic_config_wrapper`).
//!
//! Invariant: a NameServer that is down or slow costs at most `NAMESRV_CALL_TIMEOUT_MS`
//! per round and never blocks request handling (its own task).

use super::Shard;
use crate::namesrv_client::{register_request, unregister_request, RegisterAs, NAMESRV_CALL_TIMEOUT_MS};
use crate::rt::Runtime;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the registration task looks at the stop flag between rounds.
const STOP_CHECK_INTERVAL_MS: u64 = 100;

impl<R: Runtime> Shard<R> {
    fn register_request(&self, who: RegisterAs) -> RemotingCommand {
        register_request(self.topic_config_wrapper(), &self.config(), self.client_broker_name(), self.store_host(), who)
    }

    async fn call_namesrv(&self, addr: &str, mut cmd: RemotingCommand) -> Result<RemotingCommand, String> {
        self.sign_as_broker(&mut cmd);
        self.rt.call_remote(addr, cmd, Duration::from_millis(NAMESRV_CALL_TIMEOUT_MS)).await
    }

    /// Registers with every NameServer now and then every `register_interval_ms`.
    /// `first_round_done` is told once the first round has ended (each NameServer
    /// answered, refused or timed out), so the broker's start can return only after
    /// it: as in Java's `BrokerController.start`, a caller that starts a broker and
    /// then asks the NameServer for routes finds it listed. Each round takes the
    /// NameServers in force (`namesrvAddr` changes at runtime), so the task runs even
    /// while none is configured.
    pub fn spawn_registration(self: &Rc<Self>, stop: Arc<AtomicBool>, first_round_done: std::sync::mpsc::Sender<()>) {
        if self.config().namesrv_addrs.is_empty() {
            tracing::info!("no NameServer configured: not registering until updateBrokerConfig sets namesrvAddr");
        }
        let shard = self.clone();
        self.rt.spawn(async move {
            let mut first = true;
            while !stop.load(Ordering::SeqCst) {
                shard.register_all(first).await;
                if first {
                    let _ = first_round_done.send(());
                }
                first = false;
                let mut waited_ms = 0;
                // A slave that has no master yet asks again soon: its master may
                // register just after it did.
                let interval_ms = if shard.ha_master_unknown() { crate::ha::RECONNECT_INTERVAL_MS } else { shard.config().register_interval_ms };
                while waited_ms < interval_ms && !stop.load(Ordering::SeqCst) {
                    shard.rt.sleep(Duration::from_millis(STOP_CHECK_INTERVAL_MS)).await;
                    waited_ms += STOP_CHECK_INTERVAL_MS;
                }
            }
        });
    }

    /// One registration round with every NameServer.
    pub async fn register_all(self: &Rc<Self>, log_success: bool) {
        // Controller mode: only once the controller named a role (Apache keeps the
        // broker `isolated` until then, design §3.9).
        let Some(who) = self.register_as() else { return };
        for addr in self.config().namesrv_addrs.clone() {
            match self.call_namesrv(&addr, self.register_request(who)).await {
                Ok(r) if r.code == rs::SUCCESS => {
                    // A slave without ha_master_address learns its master here
                    // (RocketMQ's `updateMasterHAServerAddrPeriodically`).
                    if let Some(ha) = r.ext("haServerAddr").filter(|a| !a.is_empty()) {
                        self.learn_ha_master(ha);
                    }
                    if log_success {
                        tracing::info!(namesrv = %addr, "registered with NameServer");
                    }
                }
                Ok(r) => tracing::warn!(namesrv = %addr, code = r.code, remark = ?r.remark, "NameServer refused registration"),
                Err(e) => tracing::warn!(namesrv = %addr, error = %e, "NameServer registration failed"),
            }
        }
    }

    /// UNREGISTER_BROKER with every NameServer (clean stop).
    pub async fn unregister_all(self: &Rc<Self>) {
        for addr in self.config().namesrv_addrs.clone() {
            let Some(who) = self.register_as() else { return };
            let cmd = unregister_request(&self.config(), self.client_broker_name(), self.store_host(), who.broker_id);
            if let Err(e) = self.call_namesrv(&addr, cmd).await {
                tracing::warn!(namesrv = %addr, error = %e, "NameServer unregistration failed");
            }
        }
    }
}
