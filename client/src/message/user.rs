//! The messages applications see: `Message` (what a producer sends) and `MessageExt`
//! (what a consumer receives, with its queue, offsets, hosts and ids).
//!
//! Invariant: a `Message`'s properties never contain the property separators (set
//! through `Properties::set`, which refuses them), so its encoding round-trips.

use super::properties::{keys, Properties};
use super::stored::{StoredMessageError, StoredMessageView};
use crate::msgid::offset_msg_id;
use bytes::Bytes;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("property {name}: the value contains a property separator (\\u0001 or \\u0002)")]
    BadProperty { name: String },
    #[error("topic `{0}` is empty, longer than 127 bytes or has characters outside [A-Za-z0-9_%|-]")]
    BadTopic(String),
}

/// Whether `topic` is a valid RocketMQ topic name.
pub fn valid_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= super::stored::TOPIC_LEN_MAX_BYTES
        && topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'%' | b'|'))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub body: Bytes,
    pub flag: i32,
    pub properties: Properties,
}

impl Message {
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self { topic: topic.into(), body: body.into(), flag: 0, properties: Properties::new() }
    }

    pub fn with_tags(mut self, tags: &str) -> Result<Self, MessageError> {
        self.set_property(keys::TAGS, tags)?;
        Ok(self)
    }

    /// Keys are indexed by the broker (QUERY_MESSAGE); several are space-separated.
    pub fn with_keys<'a>(mut self, message_keys: impl IntoIterator<Item = &'a str>) -> Result<Self, MessageError> {
        let joined = message_keys.into_iter().collect::<Vec<_>>().join(" ");
        self.set_property(keys::KEYS, &joined)?;
        Ok(self)
    }

    pub fn with_property(mut self, name: &str, value: &str) -> Result<Self, MessageError> {
        self.set_property(name, value)?;
        Ok(self)
    }

    pub fn set_property(&mut self, name: &str, value: &str) -> Result<(), MessageError> {
        self.properties.set(name, value).map_err(|_| MessageError::BadProperty { name: name.to_string() })
    }

    pub fn tags(&self) -> Option<&str> {
        self.properties.tags()
    }

    pub fn validate(&self) -> Result<(), MessageError> {
        if valid_topic(&self.topic) {
            Ok(())
        } else {
            Err(MessageError::BadTopic(self.topic.clone()))
        }
    }
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub body: Bytes,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub properties: Properties,
    /// The producer's `UNIQ_KEY`, or the offset id when the producer set none.
    pub msg_id: String,
}

impl MessageExt {
    pub fn tags(&self) -> Option<&str> {
        self.properties.tags()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.properties.keys()
    }

    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name)
    }

    /// Store host and physical offset (for VIEW_MESSAGE_BY_ID); built on demand, as
    /// few consumers need it and decoding is on every received message's path.
    pub fn offset_msg_id(&self) -> String {
        offset_msg_id(&self.store_host, self.commit_log_offset as u64)
    }
}

/// Decodes a pull response body (stored records back to back). The bodies share
/// `body`'s buffer. Stops with an error at the first bad record: a broker never sends
/// one, so it means corruption on the way.
pub fn decode_messages(body: &Bytes, broker_name: &str) -> Result<Vec<MessageExt>, StoredMessageError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < body.len() {
        let view = StoredMessageView::parse(&body[pos..])?;
        let size = view.total_size();
        let properties = Properties::decode(view.properties_bytes()).unwrap_or_default();
        let msg_id = match properties.get(keys::UNIQ_KEY) {
            Some(id) => id.to_string(),
            None => offset_msg_id(&view.store_host(), view.physical_offset() as u64),
        };
        out.push(MessageExt {
            topic: view.topic()?.to_string(),
            broker_name: broker_name.to_string(),
            queue_id: view.queue_id(),
            queue_offset: view.queue_offset(),
            commit_log_offset: view.physical_offset(),
            body: body.slice_ref(view.body()),
            flag: view.flag(),
            sys_flag: view.sys_flag(),
            born_timestamp_ms: view.born_timestamp_ms(),
            born_host: view.born_host(),
            store_timestamp_ms: view.store_timestamp_ms(),
            store_host: view.store_host(),
            reconsume_times: view.reconsume_times(),
            properties,
            msg_id,
        });
        pos += size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::stored::StoredMessage;

    fn check(topic: &str, expected_valid: bool) {
        assert_eq!(valid_topic(topic), expected_valid, "{topic:?}");
        assert_eq!(Message::new(topic, "x").validate().is_ok(), expected_valid);
    }

    #[test]
    fn topic_names() {
        check("orders", true);
        check("%RETRY%group", true);
        check("a-b_c|d", true);
        check("", false);
        check("with space", false);
        check("ünïcode", false);
        check(&"t".repeat(127), true);
        check(&"t".repeat(128), false);
    }

    #[test]
    fn properties_refuse_separators() {
        assert!(Message::new("t", "b").with_tags("a\u{1}b").is_err());
        let m = Message::new("t", "b").with_tags("TagA").unwrap().with_keys(["k1", "k2"]).unwrap();
        assert_eq!(m.tags(), Some("TagA"));
        assert_eq!(m.properties.keys().collect::<Vec<_>>(), ["k1", "k2"]);
    }

    #[test]
    fn pull_bodies_decode_to_messages_sharing_the_buffer() {
        let mut raw = Vec::new();
        for i in 0..3i64 {
            let mut props = Properties::new();
            props.set(keys::TAGS, "T").unwrap();
            if i != 1 {
                props.set(keys::UNIQ_KEY, &format!("ID{i}")).unwrap();
            }
            let m = StoredMessage {
                queue_id: 2,
                queue_offset: i,
                physical_offset: 100 * i,
                body: format!("body-{i}").into_bytes(),
                topic: "t".into(),
                properties: props.encode(),
                store_host: "127.0.0.1:10911".parse().unwrap(),
                ..Default::default()
            };
            m.encode_into(&mut raw);
        }
        let body = Bytes::from(raw);
        let msgs = decode_messages(&body, "b").unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(&msgs[2].body[..], b"body-2");
        assert_eq!(msgs[0].msg_id, "ID0");
        assert_eq!(msgs[1].msg_id, msgs[1].offset_msg_id(), "no UNIQ_KEY: the offset id stands in");
        assert_eq!(msgs[1].queue_offset, 1);
        assert!(decode_messages(&body.slice(..body.len() - 1), "b").is_err());
    }
}
