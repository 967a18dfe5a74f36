//! Registration with every configured NameServer (DESIGN.md §5): REGISTER_BROKER with
//! the topic config every `register_interval_ms`, UNREGISTER_BROKER on a clean stop.
//! Host route mode: runs on the metadata owner shard, which holds the authoritative
//! topic table. Shard route mode: runs on every shard, each registering itself as
//! `<brokerName>-s<i>` at its own port with its own queues (`Shard::topic_config_wrapper`).
//!
//! Invariant: a NameServer that is down or slow costs at most `NAMESRV_CALL_TIMEOUT_MS`
//! per round and never blocks request handling (its own task).

use crate::rt::Runtime;
use crate::shard::Shard;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::net::Connection;
use ringmq_client::remoting::frame::SerializeType;
use ringmq_client::remoting::headers::RegisterBrokerRequestHeader;
use ringmq_client::remoting::route::RegisterBrokerBody;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const NAMESRV_CALL_TIMEOUT_MS: u64 = 3_000;

/// One request/response exchange with a NameServer on a fresh connection (the
/// client's multiplexed connection, used once), all within `NAMESRV_CALL_TIMEOUT_MS`.
pub async fn call(addr: &str, cmd: RemotingCommand) -> Result<RemotingCommand, String> {
    let started = std::time::Instant::now();
    let budget = Duration::from_millis(NAMESRV_CALL_TIMEOUT_MS);
    let conn = Connection::connect(addr, budget, SerializeType::Json, None).await.map_err(|e| e.to_string())?;
    let answer = conn.request(cmd, budget.saturating_sub(started.elapsed())).await.map_err(|e| e.to_string());
    conn.close();
    answer
}

fn broker_addr<R: Runtime>(shard: &Shard<R>) -> String {
    shard.store_host().to_string()
}

pub fn register_request<R: Runtime>(shard: &Shard<R>) -> RemotingCommand {
    let mut wrapper = shard.topic_config_wrapper();
    // A broker without read or write permission (`brokerPermission`, drained) hands out
    // routes without it (Java's `registerBrokerAll`).
    let perm = shard.config().broker_permission;
    if perm != crate::config::PERM_READ_WRITE {
        for t in wrapper.topic_config_table.values_mut() {
            t.perm &= perm as i32 | 1;
        }
    }
    let body = RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: wrapper }.encode();
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
    let c = shard.config();
    let header = RegisterBrokerRequestHeader {
        broker_name: shard.client_broker_name(),
        broker_addr: broker_addr(shard),
        cluster_name: c.cluster_name.clone(),
        ha_server_addr: format!("{}:{}", shard.store_host().ip(), c.ha_port_base()),
        broker_id: c.broker_id as i64,
        heartbeat_timeout_millis: Some(120_000),
        enable_acting_master: None,
        compressed: false,
        body_crc32: crc,
    };
    RemotingCommand::request(rq::REGISTER_BROKER).with_header(&header).with_body(body)
}

/// Registers with every NameServer now and then every `register_interval_ms`.
/// `first_round_done` is told once the first round has ended (each NameServer answered,
/// refused or timed out), so the broker's start can return only after it: as in Java's
/// `BrokerController.start`, a caller that starts a broker and then asks the NameServer
/// for routes finds it listed.
pub fn spawn_registration<R: Runtime>(shard: Rc<Shard<R>>, stop: Arc<AtomicBool>, first_round_done: std::sync::mpsc::Sender<()>) {
    if shard.config().namesrv_addrs.is_empty() {
        tracing::info!("no NameServer configured: not registering");
        let _ = first_round_done.send(());
        return;
    }
    let rt = shard.rt().clone();
    rt.clone().spawn(async move {
        let mut first = true;
        while !stop.load(Ordering::SeqCst) {
            register_all(&shard, first).await;
            if first {
                let _ = first_round_done.send(());
            }
            first = false;
            let mut waited_ms = 0;
            // A slave that has no master yet asks again soon: its master may register
            // just after it did.
            let interval_ms = if shard.ha_master_unknown() { crate::ha::RECONNECT_INTERVAL_MS } else { shard.config().register_interval_ms };
            while waited_ms < interval_ms && !stop.load(Ordering::SeqCst) {
                rt.sleep(Duration::from_millis(100)).await;
                waited_ms += 100;
            }
        }
    });
}

pub async fn register_all<R: Runtime>(shard: &Rc<Shard<R>>, log_success: bool) {
    for addr in shard.config().namesrv_addrs.clone() {
        match call(&addr, register_request(shard)).await {
            Ok(r) if r.code == rs::SUCCESS => {
                // A slave without ha_master_address learns its master here (RocketMQ's
                // `updateMasterHAServerAddrPeriodically`).
                if let Some(ha) = r.ext("haServerAddr").filter(|a| !a.is_empty()) {
                    shard.learn_ha_master(ha);
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
pub async fn unregister_all<R: Runtime>(shard: &Rc<Shard<R>>) {
    for addr in shard.config().namesrv_addrs.clone() {
        let cmd = RemotingCommand::request(rq::UNREGISTER_BROKER)
            .with_ext("brokerName", shard.client_broker_name())
            .with_ext("brokerAddr", broker_addr(shard))
            .with_ext("clusterName", shard.config().cluster_name.clone())
            .with_ext("brokerId", shard.config().broker_id.to_string());
        if let Err(e) = call(&addr, cmd).await {
            tracing::warn!(namesrv = %addr, error = %e, "NameServer unregistration failed");
        }
    }
}
