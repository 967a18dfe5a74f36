//! The messages applications see: `Message` (what a producer sends) and `MessageExt`
//! (what a consumer receives, with its queue, offsets, hosts and ids).
//!
//! Invariants: a `Message`'s properties never contain the property separators (set
//! through `Properties::set`, which refuses them), so its encoding round-trips; a
//! message set through `set_delivery` carries at most one of the delivery properties
//! (`DELIVERY_PROPERTIES`: a delay level or one RocketMQ 5 timer), each value valid for
//! a Java broker (`DELAY` in `DELAY_LEVEL_MIN..=DELAY_LEVEL_MAX`, timer values that
//! `Long.parseLong` accepts).
//!
//! A received message's body is what the producer sent: a compressed stored body
//! (sysFlag `COMPRESSED_FLAG`) is decompressed while decoding and the flag cleared, as
//! Java's `MessageDecoder` does. One that does not decompress is still delivered (a
//! consumer never loses a message to it), stored bytes and flag unchanged, so
//! `MessageExt::body_is_compressed` tells the listener.

use super::compression::{plain_body, COMPRESSED_FLAG};
use super::properties::{keys, Properties};
use super::stored::{StoredMessageError, StoredMessageView};
use crate::msgid::offset_msg_id;
use bytes::Bytes;
use std::borrow::Cow;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("property {name}: the value contains a property separator (\\u0001 or \\u0002)")]
    BadProperty { name: String },
    #[error("topic `{0}` is empty, longer than 127 bytes or has characters outside [A-Za-z0-9_%|-]")]
    BadTopic(String),
    #[error("delay level {0} is outside {DELAY_LEVEL_MIN}..={DELAY_LEVEL_MAX} (RocketMQ's levels: 1 = 1s, 2 = 5s, ... 18 = 2h)")]
    BadDelayLevel(u32),
    #[error("{name} = {value:?} is not a time a broker accepts (whole ms or seconds, 0..={max})", max = i64::MAX)]
    BadDeliveryTime { name: &'static str, value: String },
}

/// Lowest RocketMQ delay level (`DELAY` = 1: the first entry of the broker's
/// `messageDelayLevel`, 1 s by default).
pub const DELAY_LEVEL_MIN: u32 = 1;
/// Highest delay level of RocketMQ's default table (18 = 2 h). A broker clamps larger
/// levels to its last one; the client refuses them rather than send a level that means
/// something other than asked.
pub const DELAY_LEVEL_MAX: u32 = 18;
/// RocketMQ's default `messageDelayLevel`, level 1 first, in seconds
/// (`1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`).
pub const DEFAULT_DELAY_LEVEL_SECS: [u64; DELAY_LEVEL_MAX as usize] =
    [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1_200, 1_800, 3_600, 7_200];
/// The properties that ask a broker to deliver a message later; a message set through
/// `Message::set_delivery` has at most one of them.
pub const DELIVERY_PROPERTIES: [&str; 4] = [keys::DELAY, keys::TIMER_DELIVER_MS, keys::TIMER_DELAY_SEC, keys::TIMER_DELAY_MS];

/// When a broker should make a sent message visible to consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// At once (no delivery property).
    Now,
    /// A RocketMQ delay level (`DELAY`), `DELAY_LEVEL_MIN..=DELAY_LEVEL_MAX`.
    DelayLevel(u32),
    /// RocketMQ 5 timer: at this absolute time, ms since the epoch (`TIMER_DELIVER_MS`).
    /// A time in the past means now.
    AtMs(u64),
    /// RocketMQ 5 timer: this many seconds after the broker stores it (`TIMER_DELAY_SEC`).
    AfterSecs(u64),
    /// RocketMQ 5 timer: this many ms after the broker stores it (`TIMER_DELAY_MS`).
    AfterMs(u64),
}

impl Delivery {
    /// The property carrying this delivery and its value; None for `Now`.
    fn property(self) -> Result<Option<(&'static str, String)>, MessageError> {
        let timer = |name: &'static str, v: u64| {
            if v > i64::MAX as u64 {
                Err(MessageError::BadDeliveryTime { name, value: v.to_string() })
            } else {
                Ok(Some((name, v.to_string())))
            }
        };
        match self {
            Delivery::Now => Ok(None),
            Delivery::DelayLevel(l) if (DELAY_LEVEL_MIN..=DELAY_LEVEL_MAX).contains(&l) => Ok(Some((keys::DELAY, l.to_string()))),
            Delivery::DelayLevel(l) => Err(MessageError::BadDelayLevel(l)),
            Delivery::AtMs(ms) => timer(keys::TIMER_DELIVER_MS, ms),
            Delivery::AfterSecs(s) => timer(keys::TIMER_DELAY_SEC, s),
            Delivery::AfterMs(ms) => timer(keys::TIMER_DELAY_MS, ms),
        }
    }
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

    /// Asks the broker to deliver the message later (or, with `Delivery::Now`, at once):
    /// replaces whatever delivery property the message had. Nothing changes on error.
    pub fn set_delivery(&mut self, delivery: Delivery) -> Result<(), MessageError> {
        let property = delivery.property()?;
        for name in DELIVERY_PROPERTIES {
            self.properties.remove(name);
        }
        if let Some((name, value)) = property {
            self.set_property(name, &value)?;
        }
        Ok(())
    }

    pub fn with_delivery(mut self, delivery: Delivery) -> Result<Self, MessageError> {
        self.set_delivery(delivery)?;
        Ok(self)
    }

    /// RocketMQ's delay level (`DELAY`, 1 = 1 s ... 18 = 2 h with the default table).
    pub fn with_delay_level(self, level: u32) -> Result<Self, MessageError> {
        self.with_delivery(Delivery::DelayLevel(level))
    }

    /// Delivery at an absolute time, ms since the epoch (RocketMQ 5 `TIMER_DELIVER_MS`).
    pub fn with_deliver_time_ms(self, epoch_ms: u64) -> Result<Self, MessageError> {
        self.with_delivery(Delivery::AtMs(epoch_ms))
    }

    /// The delivery the message asks for, read from the first delivery property present
    /// (in `DELIVERY_PROPERTIES` order); a value a broker would not parse is an error.
    pub fn delivery(&self) -> Result<Delivery, MessageError> {
        for name in DELIVERY_PROPERTIES {
            let Some(raw) = self.properties.get(name) else { continue };
            let bad = || MessageError::BadDeliveryTime { name, value: raw.to_string() };
            let value: u64 = raw.trim().parse().map_err(|_| bad())?;
            return match name {
                // Java's brokers read `DELAY` = 0 as no delay.
                keys::DELAY if value == 0 => continue,
                keys::DELAY => match u32::try_from(value) {
                    Ok(l) if (DELAY_LEVEL_MIN..=DELAY_LEVEL_MAX).contains(&l) => Ok(Delivery::DelayLevel(l)),
                    _ => Err(MessageError::BadDelayLevel(u32::try_from(value).unwrap_or(u32::MAX))),
                },
                _ if value > i64::MAX as u64 => Err(bad()),
                keys::TIMER_DELIVER_MS => Ok(Delivery::AtMs(value)),
                keys::TIMER_DELAY_SEC => Ok(Delivery::AfterSecs(value)),
                _ => Ok(Delivery::AfterMs(value)),
            };
        }
        Ok(Delivery::Now)
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

    /// The transaction id of a half message a broker checks (Java's
    /// `MessageExt.getTransactionId()` there): its `UNIQ_KEY`, else its msgId.
    pub fn transaction_id(&self) -> &str {
        self.properties.get(keys::UNIQ_KEY).filter(|id| !id.is_empty()).unwrap_or(&self.msg_id)
    }

    /// True when the body is still compressed: the stored body did not decompress (it
    /// is corrupt, of an unknown type, or over `DECOMPRESSED_BODY_BYTES_MAX`; a warning
    /// was logged) and is delivered as stored. Otherwise the body is the producer's.
    pub fn body_is_compressed(&self) -> bool {
        self.sys_flag & COMPRESSED_FLAG != 0
    }

    /// Store host and physical offset (for VIEW_MESSAGE_BY_ID); built on demand, as
    /// few consumers need it and decoding is on every received message's path.
    pub fn offset_msg_id(&self) -> String {
        offset_msg_id(&self.store_host, self.commit_log_offset as u64)
    }
}

/// Decodes a pull response body (stored records back to back). The bodies share
/// `body`'s buffer, compressed ones excepted (decompressed into their own). Stops with
/// an error at the first bad record: a broker never sends one, so it means corruption
/// on the way.
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
        let topic = view.topic()?;
        let (message_body, sys_flag) = match plain_body(view.sys_flag(), view.body()) {
            Ok(Cow::Borrowed(stored)) => (body.slice_ref(stored), view.sys_flag()),
            Ok(Cow::Owned(plain)) => (Bytes::from(plain), view.sys_flag() & !COMPRESSED_FLAG),
            Err(e) => {
                tracing::warn!(topic, queue_id = view.queue_id(), queue_offset = view.queue_offset(), msg_id = %msg_id, error = %e, "compressed body delivered as stored");
                (body.slice_ref(view.body()), view.sys_flag())
            }
        };
        out.push(MessageExt {
            topic: topic.to_string(),
            broker_name: broker_name.to_string(),
            queue_id: view.queue_id(),
            queue_offset: view.queue_offset(),
            commit_log_offset: view.physical_offset(),
            body: message_body,
            flag: view.flag(),
            sys_flag,
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

    /// Sets `setting` on a message that has a tag and delay level 3; expects the
    /// properties afterwards (or the error, with the message unchanged).
    fn check_delivery(setting: Delivery, expected: Result<&[(&str, &str)], MessageError>) {
        let mut m = Message::new("t", "b").with_tags("A").unwrap().with_delay_level(3).unwrap();
        let before = m.clone();
        match (m.set_delivery(setting), expected) {
            (Ok(()), Ok(props)) => {
                assert_eq!(m.properties.iter().collect::<Vec<_>>(), props, "{setting:?}");
                assert_eq!(m.delivery(), Ok(setting), "reads back");
            }
            (Err(e), Err(want)) => {
                assert_eq!(e, want, "{setting:?}");
                assert_eq!(m, before, "a refused setting changes nothing");
            }
            (got, want) => panic!("{setting:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn delivery_settings() {
        check_delivery(Delivery::Now, Ok(&[("TAGS", "A")]));
        check_delivery(Delivery::DelayLevel(1), Ok(&[("TAGS", "A"), ("DELAY", "1")]));
        check_delivery(Delivery::DelayLevel(18), Ok(&[("TAGS", "A"), ("DELAY", "18")]));
        check_delivery(Delivery::DelayLevel(0), Err(MessageError::BadDelayLevel(0)));
        check_delivery(Delivery::DelayLevel(19), Err(MessageError::BadDelayLevel(19)));
        check_delivery(Delivery::AtMs(1_700_000_000_123), Ok(&[("TAGS", "A"), ("TIMER_DELIVER_MS", "1700000000123")]));
        check_delivery(Delivery::AtMs(0), Ok(&[("TAGS", "A"), ("TIMER_DELIVER_MS", "0")]));
        check_delivery(Delivery::AfterSecs(60), Ok(&[("TAGS", "A"), ("TIMER_DELAY_SEC", "60")]));
        check_delivery(Delivery::AfterMs(1_500), Ok(&[("TAGS", "A"), ("TIMER_DELAY_MS", "1500")]));
        check_delivery(Delivery::AfterMs(i64::MAX as u64), Ok(&[("TAGS", "A"), ("TIMER_DELAY_MS", &i64::MAX.to_string())]));
        check_delivery(
            Delivery::AfterMs(u64::MAX),
            Err(MessageError::BadDeliveryTime { name: "TIMER_DELAY_MS", value: u64::MAX.to_string() }),
        );
        check_delivery(
            Delivery::AtMs(1 << 63),
            Err(MessageError::BadDeliveryTime { name: "TIMER_DELIVER_MS", value: (1u64 << 63).to_string() }),
        );
        // One timing property at a time: a timer replaces a delay level and vice versa.
        let m = Message::new("t", "b").with_deliver_time_ms(5).unwrap().with_delay_level(2).unwrap();
        assert_eq!(m.properties.iter().collect::<Vec<_>>(), [("DELAY", "2")]);
    }

    /// What `delivery()` reads from raw properties (as another client may have set them).
    fn check_read(props: &[(&str, &str)], expected: Result<Delivery, MessageError>) {
        let mut m = Message::new("t", "b");
        for (n, v) in props {
            m.set_property(n, v).unwrap();
        }
        assert_eq!(m.delivery(), expected, "{props:?}");
    }

    #[test]
    fn delivery_reads_raw_properties() {
        check_read(&[], Ok(Delivery::Now));
        check_read(&[("DELAY", "0")], Ok(Delivery::Now));
        check_read(&[("DELAY", "4")], Ok(Delivery::DelayLevel(4)));
        check_read(&[("DELAY", "99")], Err(MessageError::BadDelayLevel(99)));
        check_read(&[("DELAY", "-1")], Err(MessageError::BadDeliveryTime { name: "DELAY", value: "-1".into() }));
        check_read(&[("TIMER_DELAY_SEC", " 5")], Ok(Delivery::AfterSecs(5)));
        check_read(&[("DELAY", "0"), ("TIMER_DELAY_MS", "10")], Ok(Delivery::AfterMs(10)));
        check_read(&[("TIMER_DELIVER_MS", "x")], Err(MessageError::BadDeliveryTime { name: "TIMER_DELIVER_MS", value: "x".into() }));
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

    /// A compressed record decodes to the producer's body with `COMPRESSED_FLAG`
    /// cleared and the type bits kept; one that does not decompress is delivered as
    /// stored, flag set.
    #[test]
    fn compressed_bodies_decode_to_the_original() {
        use crate::message::compression::{compress, CompressionType};
        let original = b"a body worth compressing ".repeat(400);
        // check(sys_flag, stored body, expected body, expected sys_flag)
        let check = |sys_flag: i32, stored: Vec<u8>, expected: &[u8], expected_sys_flag: i32| {
            let m = StoredMessage { sys_flag, body: stored, topic: "t".into(), ..Default::default() };
            let mut raw = Vec::new();
            m.encode_into(&mut raw);
            let got = decode_messages(&Bytes::from(raw), "b").unwrap();
            assert_eq!((&got[0].body[..], got[0].sys_flag), (expected, expected_sys_flag), "sysFlag {sys_flag:#x}");
            assert_eq!(got[0].body_is_compressed(), expected_sys_flag & 1 != 0);
        };
        for codec in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
            let packed = compress(codec, 5, &original).unwrap();
            let flags = codec.sys_flag_bits() | 0x4;
            check(flags, packed, &original, flags & !1);
        }
        check(0x1, compress(CompressionType::Zlib, 5, &original).unwrap(), &original, 0x0);
        check(0x0, original.clone(), &original, 0x0);
        check(0x301, b"not zlib".to_vec(), b"not zlib", 0x301);
        check(0x701, b"unknown type".to_vec(), b"unknown type", 0x701);
    }
}
