//! Wire pieces the NameServer needs that `ringmq_client::remoting` lacks (kept here,
//! not in the shared codec, by the crate's ownership rules): the `KVTable` and
//! `TopicList` JSON bodies and QUERY_DATA_VERSION's response header.
//!
//! Invariants: keys are written in fastjson's sorted order; decoding is lenient as in
//! the shared codec (`null` collections are empty); `decode(encode(x)) == x`.

use ringmq_client::remoting::json::de::{null_default, opt_string_lenient, vec_string_lenient};
use ringmq_client::remoting::json::{from_json_lenient, to_json, BodyError};
use ringmq_client::remoting::ExtFields;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `KVTable`: GET_KVLIST_BY_NAMESPACE's body, and REGISTER_BROKER's answer body
/// (the `ORDER_TOPIC_CONFIG` namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default, deserialize_with = "null_default")]
    pub table: BTreeMap<String, String>,
}

impl KvTable {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// `TopicList`: GET_ALL_TOPIC_LIST_FROM_NAMESERVER's and GET_TOPICS_BY_CLUSTER's body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_string_lenient")]
    pub broker_addr: Option<String>,
    #[serde(default, deserialize_with = "vec_string_lenient")]
    pub topic_list: Vec<String>,
}

impl TopicList {
    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

/// QUERY_DATA_VERSION's response header key (`QueryDataVersionResponseHeader.changed`).
pub const QUERY_DATA_VERSION_CHANGED_KEY: &str = "changed";

/// QUERY_DATA_VERSION's response header.
pub fn query_data_version_response_ext(changed: bool) -> ExtFields {
    [(QUERY_DATA_VERSION_CHANGED_KEY.to_string(), changed.to_string())].into()
}

/// The KV namespace whose entries REGISTER_BROKER answers with (`NamesrvUtil`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let kv = KvTable { table: [("a".to_string(), "1".to_string())].into() };
        assert_eq!(kv.encode(), br#"{"table":{"a":"1"}}"#);
        assert_eq!(KvTable::decode(&kv.encode()).unwrap(), kv);
        assert_eq!(KvTable::decode(br#"{"table":null}"#).unwrap(), KvTable::default());
        let tl = TopicList { broker_addr: None, topic_list: vec!["A".into(), "B".into()] };
        assert_eq!(tl.encode(), br#"{"topicList":["A","B"]}"#);
        assert_eq!(TopicList::decode(&tl.encode()).unwrap(), tl);
        let tl = TopicList { broker_addr: Some("x:1".into()), topic_list: vec![] };
        assert_eq!(tl.encode(), br#"{"brokerAddr":"x:1","topicList":[]}"#);
        assert_eq!(TopicList::decode(&tl.encode()).unwrap(), tl);
        assert!(TopicList::decode(b"[]").is_err());
        assert_eq!(query_data_version_response_ext(true).get("changed"), Some("true"));
    }
}
