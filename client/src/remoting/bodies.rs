//! Small JSON bodies: the consumer list (GET_CONSUMER_LIST_BY_GROUP) and the queue
//! lock requests/answers (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ).
//!
//! Invariants: keys are written in fastjson's sorted order; decoding is lenient
//! (`null` collections are empty, numbers may be strings); `decode(encode(x)) == x`.
//! Java's `Set`s travel as JSON arrays and are kept here as `Vec`s in wire order.

use super::json::de::{bool_lenient, i32_lenient, null_default, string_lenient, vec_string_lenient};
use super::json::{from_json_lenient, to_json, BodyError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Encode/decode for every body type here.
pub trait JsonBody: Serialize + DeserializeOwned {
    fn encode(&self) -> Vec<u8> {
        to_json(self)
    }

    fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerList {
    #[serde(default, deserialize_with = "vec_string_lenient")]
    pub consumer_id_list: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    #[serde(default, deserialize_with = "string_lenient")]
    pub broker_name: String,
    #[serde(default, deserialize_with = "i32_lenient")]
    pub queue_id: i32,
    #[serde(deserialize_with = "string_lenient")]
    pub topic: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(default, deserialize_with = "string_lenient")]
    pub client_id: String,
    #[serde(default, deserialize_with = "string_lenient")]
    pub consumer_group: String,
    #[serde(default, deserialize_with = "null_default")]
    pub mq_set: Vec<MessageQueue>,
    #[serde(default, deserialize_with = "bool_lenient")]
    pub only_this_broker: bool,
}

/// Same shape as the lock request.
pub type UnlockBatchRequestBody = LockBatchRequestBody;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", default, deserialize_with = "null_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl JsonBody for ConsumerList {}
impl JsonBody for LockBatchRequestBody {}
impl JsonBody for LockBatchResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mq(topic: &str, broker: &str, id: i32) -> MessageQueue {
        MessageQueue { broker_name: broker.into(), queue_id: id, topic: topic.into() }
    }

    fn check<T: JsonBody + PartialEq + std::fmt::Debug>(input: &str, expected: Option<T>) {
        assert_eq!(T::decode(input.as_bytes()).ok(), expected, "decoding {input}");
    }

    #[test]
    fn cases() {
        check(r#"{"consumerIdList":["a","b"]}"#, Some(ConsumerList { consumer_id_list: vec!["a".into(), "b".into()] }));
        check(r#"{"consumerIdList":null}"#, Some(ConsumerList::default()));
        check(r#"{}"#, Some(ConsumerList::default()));
        check::<ConsumerList>(r#"{"consumerIdList":"a"}"#, None);
        check(
            r#"{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":"1","topic":"T"}],"onlyThisBroker":false}"#,
            Some(LockBatchRequestBody {
                client_id: "c".into(),
                consumer_group: "G".into(),
                mq_set: vec![mq("T", "b", 1)],
                only_this_broker: false,
            }),
        );
        check(
            r#"{"consumerGroup":"G","clientId":"c","mqSet":[]}"#,
            Some(LockBatchRequestBody { client_id: "c".into(), consumer_group: "G".into(), ..Default::default() }),
        );
        check::<LockBatchRequestBody>(r#"{"mqSet":[{"queueId":1}]}"#, None);
        check(
            r#"{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":0}]}"#,
            Some(LockBatchResponseBody { lock_ok_mq_set: vec![mq("T", "b", 0)] }),
        );
        check(r#"{"lockOKMQSet":null}"#, Some(LockBatchResponseBody::default()));
        let text = String::from_utf8(LockBatchResponseBody { lock_ok_mq_set: vec![mq("T", "b", 2)] }.encode()).unwrap();
        assert_eq!(text, r#"{"lockOKMQSet":[{"brokerName":"b","queueId":2,"topic":"T"}]}"#);
    }

    fn arb_mq() -> impl Strategy<Value = MessageQueue> {
        (".{0,8}", ".{0,8}", any::<i32>()).prop_map(|(t, b, q)| mq(&t, &b, q))
    }

    proptest! {
        #[test]
        fn roundtrip(ids in proptest::collection::vec(".{0,8}", 0..4), c in ".{0,8}", g in ".{0,8}",
                     mqs in proptest::collection::vec(arb_mq(), 0..4), only in any::<bool>()) {
            let list = ConsumerList { consumer_id_list: ids };
            prop_assert_eq!(ConsumerList::decode(&list.encode()).unwrap(), list);
            let req = LockBatchRequestBody { client_id: c, consumer_group: g, mq_set: mqs.clone(), only_this_broker: only };
            prop_assert_eq!(LockBatchRequestBody::decode(&req.encode()).unwrap(), req);
            let resp = LockBatchResponseBody { lock_ok_mq_set: mqs };
            prop_assert_eq!(LockBatchResponseBody::decode(&resp.encode()).unwrap(), resp);
        }
    }
}
