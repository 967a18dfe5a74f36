//! Request dispatch: one `RemotingCommand` in, its response out, against a
//! `RouteInfoManager`. No IO and no clock (`now_ms` is a parameter), so every request
//! code is testable without sockets.
//!
//! Invariants:
//! - `process` answers every request: success, a typed failure turned into
//!   SYSTEM_ERROR with the error as remark (as Java answers an exception), or
//!   REQUEST_CODE_NOT_SUPPORTED naming the code. Whether to send it (oneway) is the
//!   caller's decision;
//! - the response carries the request's opaque and serialize type (`create_response`);
//! - route answers use standard JSON for clients with version >= 401 or
//!   `acceptStandardJsonOnly=true`, RocketMQ's legacy form (unquoted integer keys)
//!   otherwise; the cluster info follows the same rule.

use crate::bodies::{query_data_version_response_ext, KvTable, TopicList, NAMESPACE_ORDER_TOPIC_CONFIG};
use crate::route::{BrokerRegistration, RouteError, RouteInfoManager};
use ringmq_client::message::stored::body_crc;
use ringmq_client::remoting::codes::{request_code as rc, response_code as rs};
use ringmq_client::remoting::headers::{
    DeleteTopicRequestHeader, GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, KvConfigRequestHeader, QueryDataVersionRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};
use ringmq_client::remoting::route::{wants_standard_json, DataVersion, RegisterBrokerBody};
use ringmq_client::remoting::{BodyError, HeaderError, RemotingCommand};
use thiserror::Error;

/// Why a supported request failed; answered as SYSTEM_ERROR with this text.
#[derive(Debug, Error)]
pub enum ProcessError {
    #[error(transparent)]
    Header(#[from] HeaderError),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error("crc32 not match: header says {header}, body has {body}")]
    BodyCrc { header: i32, body: i32 },
    #[error("compressed REGISTER_BROKER bodies are not supported")]
    CompressedUnsupported,
    #[error("required header field `value` is missing")]
    MissingValue,
    #[error("required header field `{0}` is missing")]
    MissingField(&'static str),
}

/// The remark of TOPIC_NOT_EXIST for an unknown topic.
pub fn topic_not_exist_remark(topic: &str) -> String {
    format!("No topic route info in name server for the topic: {topic}")
}

/// The remark of REQUEST_CODE_NOT_SUPPORTED (Java's text).
pub fn not_supported_remark(code: i32) -> String {
    format!(" request type {code} not supported")
}

/// Every request code `process` serves (the rest are answered
/// REQUEST_CODE_NOT_SUPPORTED); the metrics give each its own series.
pub const SUPPORTED_REQUEST_CODES: [i32; 14] = [
    rc::PUT_KV_CONFIG,
    rc::GET_KV_CONFIG,
    rc::DELETE_KV_CONFIG,
    rc::GET_KVLIST_BY_NAMESPACE,
    rc::REGISTER_BROKER,
    rc::UNREGISTER_BROKER,
    rc::GET_ROUTEINFO_BY_TOPIC,
    rc::GET_BROKER_CLUSTER_INFO,
    rc::QUERY_DATA_VERSION,
    rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    rc::GET_TOPICS_BY_CLUSTER,
    rc::DELETE_TOPIC_IN_NAMESRV,
    rc::WIPE_WRITE_PERM_OF_BROKER,
    rc::ADD_WRITE_PERM_OF_BROKER,
];

/// Answers one request (never a response: the caller filters those out). `caller` is the
/// requester's address, logged with every request that changes state.
pub fn process(rim: &mut RouteInfoManager, req: &RemotingCommand, now_ms: u64, caller: &str) -> RemotingCommand {
    let result = match req.code {
        rc::PUT_KV_CONFIG => put_kv_config(rim, req, caller),
        rc::GET_KV_CONFIG => get_kv_config(rim, req),
        rc::DELETE_KV_CONFIG => delete_kv_config(rim, req, caller),
        rc::GET_KVLIST_BY_NAMESPACE => get_kv_list(rim, req),
        rc::REGISTER_BROKER => register_broker(rim, req, now_ms),
        rc::UNREGISTER_BROKER => unregister_broker(rim, req),
        rc::GET_ROUTEINFO_BY_TOPIC => route_by_topic(rim, req),
        rc::GET_BROKER_CLUSTER_INFO => Ok(cluster_info(rim, req)),
        rc::QUERY_DATA_VERSION => query_data_version(rim, req, now_ms),
        rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => Ok(topic_list(req, rim.all_topics())),
        rc::GET_TOPICS_BY_CLUSTER => req
            .header::<GetTopicsByClusterRequestHeader>()
            .map(|h| topic_list(req, rim.topics_by_cluster(&h.cluster)))
            .map_err(Into::into),
        rc::DELETE_TOPIC_IN_NAMESRV => delete_topic(rim, req, caller),
        rc::WIPE_WRITE_PERM_OF_BROKER => write_perm(rim, req, true, caller),
        rc::ADD_WRITE_PERM_OF_BROKER => write_perm(rim, req, false, caller),
        code => {
            tracing::debug!(code, name = rc::name(code), "request code not supported");
            Ok(req.create_response(rs::REQUEST_CODE_NOT_SUPPORTED, Some(&not_supported_remark(code))))
        }
    };
    result.unwrap_or_else(|e| {
        tracing::warn!(code = req.code, error = %e, "request failed");
        req.create_response(rs::SYSTEM_ERROR, Some(&e.to_string()))
    })
}

fn success(req: &RemotingCommand) -> RemotingCommand {
    req.create_response(rs::SUCCESS, None)
}

fn put_kv_config(rim: &mut RouteInfoManager, req: &RemotingCommand, caller: &str) -> Result<RemotingCommand, ProcessError> {
    let h: KvConfigRequestHeader = req.header()?;
    let value = h.value.ok_or(ProcessError::MissingValue)?;
    rim.put_kv(&h.namespace, &h.key, &value)?;
    tracing::info!(namespace = h.namespace, key = h.key, value, caller, "kv config put");
    Ok(success(req))
}

fn get_kv_config(rim: &mut RouteInfoManager, req: &RemotingCommand) -> Result<RemotingCommand, ProcessError> {
    let h: KvConfigRequestHeader = req.header()?;
    Ok(match rim.get_kv(&h.namespace, &h.key) {
        Some(v) => {
            let mut resp = success(req);
            resp.ext_fields = GetKvConfigResponseHeader { value: Some(v.to_string()) }.to_ext();
            resp
        }
        None => req.create_response(
            rs::QUERY_NOT_FOUND,
            Some(&format!("No config item, Namespace: {} Key: {}", h.namespace, h.key)),
        ),
    })
}

fn delete_kv_config(rim: &mut RouteInfoManager, req: &RemotingCommand, caller: &str) -> Result<RemotingCommand, ProcessError> {
    let h: KvConfigRequestHeader = req.header()?;
    rim.delete_kv(&h.namespace, &h.key);
    tracing::info!(namespace = h.namespace, key = h.key, caller, "kv config deleted");
    Ok(success(req))
}

fn get_kv_list(rim: &mut RouteInfoManager, req: &RemotingCommand) -> Result<RemotingCommand, ProcessError> {
    let h: GetKvListByNamespaceRequestHeader = req.header()?;
    Ok(match rim.kv_list(&h.namespace) {
        Some(table) => success(req).with_body(KvTable { table: table.clone() }.encode()),
        None => req.create_response(rs::QUERY_NOT_FOUND, Some(&format!("No config item, Namespace: {}", h.namespace))),
    })
}

fn register_broker(
    rim: &mut RouteInfoManager,
    req: &RemotingCommand,
    now_ms: u64,
) -> Result<RemotingCommand, ProcessError> {
    let h: RegisterBrokerRequestHeader = req.header()?;
    if h.body_crc32 != 0 {
        // Both are 31-bit values: `crc32 & 0x7FFFFFFF`.
        let body = body_crc(&req.body) as i32;
        if body != h.body_crc32 {
            return Err(ProcessError::BodyCrc { header: h.body_crc32, body });
        }
    }
    if h.compressed {
        return Err(ProcessError::CompressedUnsupported);
    }
    let body = if req.body.is_empty() { RegisterBrokerBody::default() } else { RegisterBrokerBody::decode(&req.body)? };
    let reg = BrokerRegistration {
        cluster_name: h.cluster_name,
        broker_addr: h.broker_addr,
        broker_name: h.broker_name,
        broker_id: h.broker_id,
        ha_server_addr: h.ha_server_addr,
        topic_config: body.topic_config_serialize_wrapper,
        filter_server_list: body.filter_server_list,
        // As Java: a broker that does not send the header is an old one, not acting.
        enable_acting_master: h.enable_acting_master.unwrap_or(false),
    };
    let (addr, name, id) = (reg.broker_addr.clone(), reg.broker_name.clone(), reg.broker_id);
    let first = !rim.is_known_broker(&addr);
    let result = rim.register_broker(reg, now_ms)?;
    if first {
        tracing::info!(addr, broker_name = name, broker_id = id, "broker registered");
    }
    let mut resp = success(req);
    resp.ext_fields =
        RegisterBrokerResponseHeader { ha_server_addr: result.ha_server_addr, master_addr: result.master_addr }
            .to_ext();
    if let Some(table) = rim.kv_list(NAMESPACE_ORDER_TOPIC_CONFIG) {
        resp.body = KvTable { table: table.clone() }.encode().into();
    }
    Ok(resp)
}

fn unregister_broker(rim: &mut RouteInfoManager, req: &RemotingCommand) -> Result<RemotingCommand, ProcessError> {
    let h: UnregisterBrokerRequestHeader = req.header()?;
    if rim.unregister_broker(&h.cluster_name, &h.broker_addr, &h.broker_name, h.broker_id) {
        tracing::info!(
            addr = h.broker_addr,
            broker_name = h.broker_name,
            broker_id = h.broker_id,
            "broker unregistered"
        );
    }
    Ok(success(req))
}

fn route_by_topic(rim: &mut RouteInfoManager, req: &RemotingCommand) -> Result<RemotingCommand, ProcessError> {
    let h: GetRouteInfoRequestHeader = req.header()?;
    Ok(match rim.route_for_topic(&h.topic) {
        Some(route) => success(req).with_body(route.encode_for(req.version, h.accept_standard_json_only)),
        None => req.create_response(rs::TOPIC_NOT_EXIST, Some(&topic_not_exist_remark(&h.topic))),
    })
}

fn cluster_info(rim: &RouteInfoManager, req: &RemotingCommand) -> RemotingCommand {
    let info = rim.cluster_info();
    let body = if wants_standard_json(req.version, None) { info.encode_standard() } else { info.encode_legacy() };
    success(req).with_body(body)
}

fn query_data_version(
    rim: &mut RouteInfoManager,
    req: &RemotingCommand,
    now_ms: u64,
) -> Result<RemotingCommand, ProcessError> {
    let h: QueryDataVersionRequestHeader = req.header()?;
    let version: DataVersion = ringmq_client::remoting::json::from_json_lenient(&req.body)?;
    let (changed, ours) = rim.query_data_version(&h.broker_addr, &version, now_ms);
    let mut resp = success(req);
    resp.ext_fields = query_data_version_response_ext(changed);
    if let Some(v) = ours {
        resp.body = ringmq_client::remoting::json::to_json(&v).into();
    }
    Ok(resp)
}

fn topic_list(req: &RemotingCommand, topics: Vec<String>) -> RemotingCommand {
    success(req).with_body(TopicList { broker_addr: None, topic_list: topics }.encode())
}

fn delete_topic(rim: &mut RouteInfoManager, req: &RemotingCommand, caller: &str) -> Result<RemotingCommand, ProcessError> {
    let h: DeleteTopicRequestHeader = req.header()?;
    let existed = rim.delete_topic(&h.topic);
    tracing::info!(topic = h.topic, existed, caller, "topic deleted");
    Ok(success(req))
}

/// WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: answers how many topics
/// changed (`wipeTopicCount` / `addTopicCount`, Java's response headers).
fn write_perm(rim: &mut RouteInfoManager, req: &RemotingCommand, wipe: bool, caller: &str) -> Result<RemotingCommand, ProcessError> {
    let broker_name = req.ext("brokerName").map(str::trim).filter(|b| !b.is_empty()).ok_or(ProcessError::MissingField("brokerName"))?;
    let count = rim.operate_write_perm(broker_name, wipe);
    tracing::info!(broker = broker_name, topics = count, wipe, caller, "write permission of broker changed");
    let mut resp = success(req);
    resp.ext_fields.insert(if wipe { "wipeTopicCount" } else { "addTopicCount" }.into(), count.to_string());
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::route::{ClusterInfo, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData};
    use ringmq_client::remoting::SerializeType;

    fn register(id: i64, addr: &str) -> RemotingCommand {
        let body = RegisterBrokerBody {
            filter_server_list: vec![],
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version: DataVersion { counter: 1, state_version: 0, timestamp: 5 },
                topic_config_table: [("T".to_string(), TopicConfig::new("T"))].into(),
            },
        }
        .encode();
        RemotingCommand::request(rc::REGISTER_BROKER)
            .with_header(&RegisterBrokerRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: addr.into(),
                cluster_name: "C".into(),
                ha_server_addr: format!("{addr}-ha"),
                broker_id: id,
                body_crc32: body_crc(&body) as i32,
                ..Default::default()
            })
            .with_body(body)
            .with_opaque(id as i32 + 100)
    }

    /// Processes `req` and checks the response's code, remark and ext fields.
    fn check(
        rim: &mut RouteInfoManager,
        req: RemotingCommand,
        code: i32,
        remark: Option<&str>,
        ext: &[(&str, &str)],
    ) -> RemotingCommand {
        let resp = process(rim, &req, 1_000, "127.0.0.1:1");
        assert_eq!((resp.code, resp.remark.as_deref()), (code, remark), "response to {req:?}");
        assert_eq!(resp.opaque, req.opaque);
        assert_eq!(resp.serialize_type, req.serialize_type);
        assert!(resp.is_response());
        let ext: Vec<(String, String)> = ext.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(resp.ext_fields.clone().into_iter().collect::<Vec<_>>(), ext);
        resp
    }

    fn kv(code: i32, ns: &str, key: &str, value: Option<&str>) -> RemotingCommand {
        RemotingCommand::request(code).with_header(&KvConfigRequestHeader {
            namespace: ns.into(),
            key: key.into(),
            value: value.map(str::to_string),
        })
    }

    #[test]
    fn write_permission_of_a_broker_is_wiped_and_added_back() {
        let mut rim = RouteInfoManager::default();
        check(&mut rim, register(0, "1.1.1.1:1"), rs::SUCCESS, None, &[]);
        let perm = |rim: &mut RouteInfoManager| {
            let r = process(rim, &RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "T"), 1_000, "127.0.0.1:1");
            TopicRouteData::decode(&r.body).expect("route").queue_datas[0].perm
        };
        let op = |code: i32, broker: &str| RemotingCommand::request(code).with_ext("brokerName", broker);
        assert_eq!(perm(&mut rim), 6);
        check(&mut rim, op(rc::WIPE_WRITE_PERM_OF_BROKER, "broker-a"), rs::SUCCESS, None, &[("wipeTopicCount", "1")]);
        assert_eq!(perm(&mut rim), 4, "read only");
        // An unchanged registration (same data version) does not undo it, as in Java.
        check(&mut rim, register(0, "1.1.1.1:1"), rs::SUCCESS, None, &[]);
        assert_eq!(perm(&mut rim), 4);
        check(&mut rim, op(rc::ADD_WRITE_PERM_OF_BROKER, "broker-a"), rs::SUCCESS, None, &[("addTopicCount", "1")]);
        assert_eq!(perm(&mut rim), 6);
        check(&mut rim, op(rc::WIPE_WRITE_PERM_OF_BROKER, "broker-zz"), rs::SUCCESS, None, &[("wipeTopicCount", "0")]);
        check(&mut rim, RemotingCommand::request(rc::ADD_WRITE_PERM_OF_BROKER), rs::SYSTEM_ERROR, Some("required header field `brokerName` is missing"), &[]);
    }

    #[test]
    fn requests() {
        let mut rim = RouteInfoManager::default();
        check(&mut rim, register(0, "1.1.1.1:1"), rs::SUCCESS, None, &[]);
        check(
            &mut rim,
            register(1, "1.1.1.2:1"),
            rs::SUCCESS,
            None,
            &[("haServerAddr", "1.1.1.1:1-ha"), ("masterAddr", "1.1.1.1:1")],
        );
        let mut bad = register(0, "1.1.1.1:1");
        bad.ext_fields.insert("bodyCrc32".into(), "7".into());
        let remark = format!("crc32 not match: header says 7, body has {}", body_crc(&bad.body));
        check(&mut rim, bad, rs::SYSTEM_ERROR, Some(&remark), &[]);
        check(
            &mut rim,
            RemotingCommand::request(rc::REGISTER_BROKER),
            rs::SYSTEM_ERROR,
            Some("required header field `brokerName` is missing"),
            &[],
        );

        let route = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "T");
        let body = check(&mut rim, route.clone(), rs::SUCCESS, None, &[]).body;
        assert_eq!(TopicRouteData::decode(&body).unwrap(), rim.route_for_topic("T").unwrap());
        assert!(std::str::from_utf8(&body).unwrap().contains(r#"{"0":"1.1.1.1:1","1":"1.1.1.2:1"}"#));
        let mut old = route.clone().with_serialize_type(SerializeType::RocketMq);
        old.version = 63;
        let body = check(&mut rim, old.clone(), rs::SUCCESS, None, &[]).body;
        assert!(std::str::from_utf8(&body).unwrap().contains(r#"{0:"1.1.1.1:1",1:"1.1.1.2:1"}"#));
        let body = check(&mut rim, old.with_ext("acceptStandardJsonOnly", "true"), rs::SUCCESS, None, &[]).body;
        assert!(std::str::from_utf8(&body).unwrap().contains(r#"{"0":"1.1.1.1:1""#));
        let unknown = RemotingCommand::request(rc::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "X");
        check(&mut rim, unknown, rs::TOPIC_NOT_EXIST, Some("No topic route info in name server for the topic: X"), &[]);

        let info = check(&mut rim, RemotingCommand::request(rc::GET_BROKER_CLUSTER_INFO), rs::SUCCESS, None, &[]).body;
        assert_eq!(ClusterInfo::decode(&info).unwrap(), rim.cluster_info());

        let topics =
            check(&mut rim, RemotingCommand::request(rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER), rs::SUCCESS, None, &[]);
        assert_eq!(&topics.body[..], br#"{"topicList":["T"]}"#);
        let by_cluster = RemotingCommand::request(rc::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "C");
        assert_eq!(&check(&mut rim, by_cluster, rs::SUCCESS, None, &[]).body[..], br#"{"topicList":["T"]}"#);
        let by_cluster = RemotingCommand::request(rc::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "D");
        assert_eq!(&check(&mut rim, by_cluster, rs::SUCCESS, None, &[]).body[..], br#"{"topicList":[]}"#);

        let qdv = |counter: i64| {
            RemotingCommand::request(rc::QUERY_DATA_VERSION)
                .with_header(&QueryDataVersionRequestHeader {
                    broker_name: "broker-a".into(),
                    broker_addr: "1.1.1.1:1".into(),
                    cluster_name: "C".into(),
                    broker_id: 0,
                })
                .with_body(format!(r#"{{"counter":{counter},"timestamp":5}}"#))
        };
        let resp = check(&mut rim, qdv(1), rs::SUCCESS, None, &[("changed", "false")]);
        // Java's DataVersion, `stateVersion` included.
        assert_eq!(&resp.body[..], br#"{"counter":1,"stateVersion":0,"timestamp":5}"#);
        check(&mut rim, qdv(2), rs::SUCCESS, None, &[("changed", "true")]);
        check(&mut rim, qdv(2).with_body(""), rs::SYSTEM_ERROR, Some("JSON body is not an object"), &[]);

        check(
            &mut rim,
            RemotingCommand::request(rc::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", "T"),
            rs::SUCCESS,
            None,
            &[],
        );
        check(&mut rim, route, rs::TOPIC_NOT_EXIST, Some("No topic route info in name server for the topic: T"), &[]);

        let unregister = RemotingCommand::request(rc::UNREGISTER_BROKER).with_header(&UnregisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "1.1.1.2:1".into(),
            cluster_name: "C".into(),
            broker_id: 1,
        });
        check(&mut rim, unregister, rs::SUCCESS, None, &[]);
        assert_eq!(rim.live_broker_count(), 1);

        check(
            &mut rim,
            RemotingCommand::request(9999),
            rs::REQUEST_CODE_NOT_SUPPORTED,
            Some(" request type 9999 not supported"),
            &[],
        );
    }

    #[test]
    fn supported_codes_are_exactly_those_served() {
        // An empty request of a served code fails on its header or answers, but is never
        // REQUEST_CODE_NOT_SUPPORTED; the codes around them are.
        for code in 0..1_000 {
            let resp = process(&mut RouteInfoManager::default(), &RemotingCommand::request(code), 1_000, "test");
            let served = resp.code != rs::REQUEST_CODE_NOT_SUPPORTED;
            assert_eq!(served, SUPPORTED_REQUEST_CODES.contains(&code), "code {code}");
        }
    }

    #[test]
    fn kv_requests() {
        let mut rim = RouteInfoManager::default();
        check(
            &mut rim,
            kv(rc::PUT_KV_CONFIG, "ns", "k", None),
            rs::SYSTEM_ERROR,
            Some("required header field `value` is missing"),
            &[],
        );
        check(&mut rim, kv(rc::PUT_KV_CONFIG, "ns", "k", Some("v")), rs::SUCCESS, None, &[]);
        check(&mut rim, kv(rc::GET_KV_CONFIG, "ns", "k", None), rs::SUCCESS, None, &[("value", "v")]);
        check(
            &mut rim,
            kv(rc::GET_KV_CONFIG, "ns", "x", None),
            rs::QUERY_NOT_FOUND,
            Some("No config item, Namespace: ns Key: x"),
            &[],
        );
        let list = RemotingCommand::request(rc::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "ns");
        assert_eq!(&check(&mut rim, list.clone(), rs::SUCCESS, None, &[]).body[..], br#"{"table":{"k":"v"}}"#);
        check(&mut rim, kv(rc::DELETE_KV_CONFIG, "ns", "k", None), rs::SUCCESS, None, &[]);
        check(&mut rim, list, rs::QUERY_NOT_FOUND, Some("No config item, Namespace: ns"), &[]);
        // REGISTER_BROKER answers with the ORDER_TOPIC_CONFIG namespace.
        check(
            &mut rim,
            kv(rc::PUT_KV_CONFIG, NAMESPACE_ORDER_TOPIC_CONFIG, "T", Some("broker-a:4")),
            rs::SUCCESS,
            None,
            &[],
        );
        let resp = check(&mut rim, register(0, "1.1.1.1:1"), rs::SUCCESS, None, &[]);
        assert_eq!(&resp.body[..], br#"{"table":{"T":"broker-a:4"}}"#);
    }
}
