//! Admin calls (the `mqadmin` subset loadgen and tests need): cluster membership from
//! the NameServers, and topic creation on one broker or on every master of a cluster.
//!
//! Invariant: `create_topic_on_cluster` returns only after every master answered and a
//! NameServer serves the topic's route with every one of them, so a producer started
//! right after it finds all queues.

use crate::error::ClientError;
use crate::instance::{ClientInstance, PERM_READ, PERM_WRITE};
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::CreateTopicRequestHeader;
use crate::remoting::route::ClusterInfo;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long `create_topic_on_cluster` waits for the NameServer to show the route.
pub const ROUTE_WAIT_MS: u64 = 10_000;

pub async fn cluster_info(instance: &Rc<ClientInstance>) -> Result<ClusterInfo, ClientError> {
    let r = instance.invoke_namesrv(RemotingCommand::request(rq::GET_BROKER_CLUSTER_INFO)).await?;
    if r.code != rs::SUCCESS {
        return Err(ClientError::from_response("namesrv", r.code, r.remark.as_deref()));
    }
    Ok(ClusterInfo::decode(&r.body)?)
}

/// UPDATE_AND_CREATE_TOPIC on the broker at `addr`.
pub async fn create_topic(instance: &Rc<ClientInstance>, addr: &str, topic: &str, queue_nums: i32, order: bool) -> Result<(), ClientError> {
    if !crate::message::user::valid_topic(topic) {
        return Err(ClientError::Config(format!("bad topic name `{topic}`")));
    }
    let header = CreateTopicRequestHeader {
        topic: topic.to_string(),
        default_topic: crate::producer::DEFAULT_TOPIC.into(),
        read_queue_nums: queue_nums,
        write_queue_nums: queue_nums,
        perm: PERM_READ | PERM_WRITE,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order,
        attributes: None,
    };
    let r = instance.invoke(addr, RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC).with_header(&header)).await?;
    if r.code != rs::SUCCESS {
        return Err(ClientError::from_response(addr, r.code, r.remark.as_deref()));
    }
    Ok(())
}

/// Creates `topic` with `queue_nums` queues on every master of `cluster` (every
/// cluster when `None`) and waits until the route lists them all. Returns the masters.
pub async fn create_topic_on_cluster(
    instance: &Rc<ClientInstance>,
    cluster: Option<&str>,
    topic: &str,
    queue_nums: i32,
) -> Result<Vec<String>, ClientError> {
    // A broker that has just started may not have registered yet (it listens before
    // its first REGISTER_BROKER lands): the NameServer is asked again, within the same
    // bound as the route wait below.
    let registered_by = Instant::now() + Duration::from_millis(ROUTE_WAIT_MS);
    let masters = loop {
        let info = cluster_info(instance).await?;
        let names: Vec<&String> = match cluster {
            Some(c) => info.cluster_addr_table.get(c).map(|s| s.iter().collect()).unwrap_or_default(),
            None => info.broker_addr_table.keys().collect(),
        };
        let masters: Vec<(String, String)> = names
            .iter()
            .filter_map(|n| info.broker_addr_table.get(*n).and_then(|b| b.master_addr().map(|a| (n.to_string(), a.to_string()))))
            .collect();
        if !masters.is_empty() {
            break masters;
        }
        if Instant::now() >= registered_by {
            return Err(ClientError::Config(format!("no master broker registered in cluster {cluster:?} within {ROUTE_WAIT_MS} ms")));
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    };
    for (_, addr) in &masters {
        create_topic(instance, addr, topic, queue_nums, false).await?;
    }
    let deadline = Instant::now() + Duration::from_millis(ROUTE_WAIT_MS);
    loop {
        match instance.fetch_route(topic).await {
            Ok(route) if masters.iter().all(|(n, _)| route.master_addrs.contains_key(n)) => break,
            Ok(_) | Err(ClientError::NoRoute { .. }) if Instant::now() < deadline => {
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
            Ok(route) => {
                return Err(ClientError::Config(format!(
                    "topic {topic} created but the NameServer routes only {:?} after {ROUTE_WAIT_MS} ms",
                    route.master_addrs.keys().collect::<Vec<_>>()
                )))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(masters.into_iter().map(|(_, a)| a).collect())
}
