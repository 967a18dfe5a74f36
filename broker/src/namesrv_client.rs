//! The broker's side of the NameServer protocol (DESIGN.md §5): the REGISTER_BROKER and
//! UNREGISTER_BROKER requests a broker sends, built from plain values. Who sends them,
//! when and over which connection is the shard's business (`shard/registration.rs`,
//! through the runtime seam's `Runtime::call_remote`); this module imports nothing of
//! the shard or the runtime.

use crate::config::BrokerConfig;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::headers::RegisterBrokerRequestHeader;
use ringmq_client::remoting::route::{RegisterBrokerBody, TopicConfigSerializeWrapper};
use std::net::SocketAddr;

/// Longest one exchange with a NameServer may take (connect included).
pub const NAMESRV_CALL_TIMEOUT_MS: u64 = 3_000;

/// Who registers: the broker id and the `DataVersion.stateVersion` the NameServer
/// compares (controller mode: the master epoch, so a stale master's registration
/// loses to the new one's, `namesrv/src/route.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterAs {
    pub broker_id: i64,
    pub state_version: i64,
}

impl RegisterAs {
    /// The static identity (controller mode off): `brokerId`, state version 0.
    pub fn configured(config: &BrokerConfig) -> Self {
        Self { broker_id: config.broker_id as i64, state_version: 0 }
    }
}

/// REGISTER_BROKER for a broker named `broker_name` serving at `store_host` with the
/// topics of `wrapper`.
pub fn register_request(mut wrapper: TopicConfigSerializeWrapper, config: &BrokerConfig, broker_name: String, store_host: SocketAddr, who: RegisterAs) -> RemotingCommand {
    wrapper.data_version.state_version = who.state_version;
    // A broker without read or write permission (`brokerPermission`, drained) hands out
    // routes without it (Java's `registerBrokerAll`).
    let perm = config.broker_permission;
    if perm != crate::config::PERM_READ_WRITE {
        for t in wrapper.topic_config_table.values_mut() {
            t.perm &= perm as i32 | 1;
        }
    }
    let body = RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: wrapper }.encode();
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
    let header = RegisterBrokerRequestHeader {
        broker_name,
        broker_addr: store_host.to_string(),
        cluster_name: config.cluster_name.clone(),
        ha_server_addr: format!("{}:{}", store_host.ip(), config.ha_port_base()),
        broker_id: who.broker_id,
        heartbeat_timeout_millis: Some(120_000),
        enable_acting_master: None,
        compressed: false,
        body_crc32: crc,
    };
    RemotingCommand::request(rq::REGISTER_BROKER).with_header(&header).with_body(body)
}

/// UNREGISTER_BROKER for the broker `register_request` registered.
pub fn unregister_request(config: &BrokerConfig, broker_name: String, store_host: SocketAddr, broker_id: i64) -> RemotingCommand {
    RemotingCommand::request(rq::UNREGISTER_BROKER)
        .with_ext("brokerName", broker_name)
        .with_ext("brokerAddr", store_host.to_string())
        .with_ext("clusterName", config.cluster_name.clone())
        .with_ext("brokerId", broker_id.to_string())
}
