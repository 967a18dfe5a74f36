//! The stored-message record: RocketMQ's CommitLog layout (MessageDecoder, magic V1),
//! used byte-for-byte in the CommitLog and in PULL_MESSAGE response bodies.
//!
//! ```text
//! TOTALSIZE i32 | MAGICCODE i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64
//! PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST (ip 4|16, port i32)
//! STORETIMESTAMP i64 | STOREHOST (ip 4|16, port i32) | RECONSUMETIMES i32
//! PREPARED_TRANSACTION_OFFSET i64 | BODY (i32 len + bytes) | TOPIC (u8 len + bytes)
//! PROPERTIES (i16 len + bytes)
//! ```
//! All big-endian. BODYCRC is `crc32(body) & 0x7FFF_FFFF` as in RocketMQ's `UtilAll.crc32`.
//! A blank record (MAGICCODE 0xCBD43194) pads the end of a segment.
//!
//! Invariants: `StoredMessageView::parse` never panics and never reads past its slice;
//! `parse(encode(m)) == m`; `encoded_len` is exactly the number of bytes `encode_into`
//! writes.

use bytes::BufMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use thiserror::Error;

pub const MAGIC_MESSAGE: u32 = 0xDAA3_20A7;
pub const MAGIC_BLANK: u32 = 0xCBD4_3194;
/// A blank record needs TOTALSIZE and MAGICCODE.
pub const BLANK_LEN_MIN_BYTES: usize = 8;
/// Largest topic a V1 record can carry (u8 length).
pub const TOPIC_LEN_MAX_BYTES: usize = 127;
/// Properties carry an i16 length.
pub const PROPERTIES_LEN_MAX_BYTES: usize = i16::MAX as usize;

pub const SYSFLAG_BORNHOST_V6: i32 = 1 << 4;
pub const SYSFLAG_STOREHOST_V6: i32 = 1 << 5;

/// Bytes of a record with IPv4 hosts, excluding body, topic and properties.
pub const FIXED_LEN_V4_BYTES: usize = 91;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum StoredMessageError {
    #[error("record truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad magic code {0:#010x}")]
    BadMagic(u32),
    #[error("total size {total} inconsistent with field lengths ({computed})")]
    SizeMismatch { total: usize, computed: usize },
    #[error("negative or oversize length field: {0}")]
    BadLength(i64),
    #[error("body CRC mismatch: stored {stored:#x}, computed {computed:#x}")]
    BodyCrc { stored: u32, computed: u32 },
    #[error("topic too long: {0} bytes (max {TOPIC_LEN_MAX_BYTES})")]
    TopicTooLong(usize),
    #[error("properties too long: {0} bytes (max {PROPERTIES_LEN_MAX_BYTES})")]
    PropertiesTooLong(usize),
    #[error("topic is not valid UTF-8")]
    TopicNotUtf8,
}

/// `crc32(body) & 0x7FFFFFFF`, RocketMQ's body CRC.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & 0x7FFF_FFFF
}

/// An owned stored message, for building records and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp_ms: i64,
    pub born_host: SocketAddr,
    pub store_timestamp_ms: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: Vec<u8>,
    pub topic: String,
    pub properties: String,
}

impl Default for StoredMessage {
    fn default() -> Self {
        let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        Self {
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: unspecified,
            store_timestamp_ms: 0,
            store_host: unspecified,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Vec::new(),
            topic: String::new(),
            properties: String::new(),
        }
    }
}

fn host_len(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 8,
        SocketAddr::V6(_) => 20,
    }
}

/// The sys flag with the host-version bits set to match the given hosts.
pub fn sys_flag_for_hosts(sys_flag: i32, born: &SocketAddr, store: &SocketAddr) -> i32 {
    let mut flag = sys_flag & !(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6);
    if born.is_ipv6() {
        flag |= SYSFLAG_BORNHOST_V6;
    }
    if store.is_ipv6() {
        flag |= SYSFLAG_STOREHOST_V6;
    }
    flag
}

/// Exact encoded length of a record.
pub fn encoded_len(
    topic_len: usize,
    body_len: usize,
    properties_len: usize,
    born_host: &SocketAddr,
    store_host: &SocketAddr,
) -> usize {
    FIXED_LEN_V4_BYTES - 16 + host_len(born_host) + host_len(store_host) + topic_len + body_len + properties_len
}

impl StoredMessage {
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.topic.len(), self.body.len(), self.properties.len(), &self.born_host, &self.store_host)
    }

    /// Checks the limits of the layout before anything is written.
    pub fn validate(&self) -> Result<(), StoredMessageError> {
        if self.topic.len() > TOPIC_LEN_MAX_BYTES {
            return Err(StoredMessageError::TopicTooLong(self.topic.len()));
        }
        if self.properties.len() > PROPERTIES_LEN_MAX_BYTES {
            return Err(StoredMessageError::PropertiesTooLong(self.properties.len()));
        }
        Ok(())
    }

    /// Appends the record to `out`. The caller has called `validate`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        encode_parts(self, &self.body, &self.topic, &self.properties, out);
        debug_assert_eq!(out.len() - start, self.encoded_len());
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }
}

/// Writes a record whose fixed fields are `fixed`'s and whose body, topic and
/// properties are given apart (`fixed`'s own are ignored), so that a store encodes a
/// message it holds by reference straight into its log, with no owned copy first.
/// `out` must have room for `encoded_len` bytes (a `&mut [u8]` panics otherwise).
pub fn encode_parts<B: BufMut>(fixed: &StoredMessage, body: &[u8], topic: &str, properties: &str, out: &mut B) {
    let total = encoded_len(topic.len(), body.len(), properties.len(), &fixed.born_host, &fixed.store_host);
    let sys_flag = sys_flag_for_hosts(fixed.sys_flag, &fixed.born_host, &fixed.store_host);
    out.put_i32(total as i32);
    out.put_u32(MAGIC_MESSAGE);
    out.put_u32(body_crc(body));
    out.put_i32(fixed.queue_id);
    out.put_i32(fixed.flag);
    out.put_i64(fixed.queue_offset);
    out.put_i64(fixed.physical_offset);
    out.put_i32(sys_flag);
    out.put_i64(fixed.born_timestamp_ms);
    put_host(out, &fixed.born_host);
    out.put_i64(fixed.store_timestamp_ms);
    put_host(out, &fixed.store_host);
    out.put_i32(fixed.reconsume_times);
    out.put_i64(fixed.prepared_transaction_offset);
    out.put_i32(body.len() as i32);
    out.put_slice(body);
    out.put_u8(topic.len() as u8);
    out.put_slice(topic.as_bytes());
    out.put_i16(properties.len() as i16);
    out.put_slice(properties.as_bytes());
}

fn put_host<B: BufMut>(out: &mut B, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => out.put_slice(&ip.octets()),
        IpAddr::V6(ip) => out.put_slice(&ip.octets()),
    }
    out.put_i32(addr.port() as i32);
}

/// Writes a blank (end-of-segment) record of `len` bytes into `out`.
pub fn encode_blank(out: &mut [u8]) {
    assert!(out.len() >= BLANK_LEN_MIN_BYTES, "blank record needs {BLANK_LEN_MIN_BYTES} bytes");
    let len = out.len() as i32;
    out[0..4].copy_from_slice(&len.to_be_bytes());
    out[4..8].copy_from_slice(&MAGIC_BLANK.to_be_bytes());
}

/// What the first 8 bytes of a record position say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordHead {
    /// Both TOTALSIZE and MAGICCODE are zero: nothing was written here.
    Empty,
    /// A blank end-of-segment record of this many bytes.
    Blank(usize),
    /// A message record of this many bytes (not yet validated).
    Message(usize),
    /// Anything else.
    Invalid,
}

/// Classifies the head of a record. `bytes` must hold at least 8 bytes.
pub fn record_head(bytes: &[u8]) -> RecordHead {
    if bytes.len() < BLANK_LEN_MIN_BYTES {
        return RecordHead::Invalid;
    }
    let total = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let magic = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    match (total, magic) {
        (0, 0) => RecordHead::Empty,
        (t, MAGIC_BLANK) if t >= BLANK_LEN_MIN_BYTES as i32 => RecordHead::Blank(t as usize),
        (t, MAGIC_MESSAGE) if t >= FIXED_LEN_V4_BYTES as i32 => RecordHead::Message(t as usize),
        _ => RecordHead::Invalid,
    }
}

/// A validated, zero-copy view over one message record.
#[derive(Debug, Clone, Copy)]
pub struct StoredMessageView<'a> {
    bytes: &'a [u8],
    body_start: usize,
    body_len: usize,
    topic_start: usize,
    topic_len: usize,
    props_start: usize,
    props_len: usize,
    born_host_len: usize,
    store_host_len: usize,
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoredMessageError> {
        let end = self.pos.checked_add(n).ok_or(StoredMessageError::BadLength(n as i64))?;
        if end > self.bytes.len() {
            return Err(StoredMessageError::Truncated { need: end, have: self.bytes.len() });
        }
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn i32(&mut self) -> Result<i32, StoredMessageError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

impl<'a> StoredMessageView<'a> {
    /// Parses one message record at the start of `bytes` (which may hold more after it).
    /// Checks magic, every length field and that they add up to TOTALSIZE. Does not
    /// check the body CRC: call `verify_body_crc`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, StoredMessageError> {
        let mut r = Reader { bytes, pos: 0 };
        let total = r.i32()?;
        let magic = r.i32()? as u32;
        if magic != MAGIC_MESSAGE {
            return Err(StoredMessageError::BadMagic(magic));
        }
        if total < FIXED_LEN_V4_BYTES as i32 {
            return Err(StoredMessageError::BadLength(total as i64));
        }
        let total = total as usize;
        if total > bytes.len() {
            return Err(StoredMessageError::Truncated { need: total, have: bytes.len() });
        }
        let mut r = Reader { bytes: &bytes[..total], pos: 20 };
        let sys_flag = be_i32(bytes, 28 + 8);
        let born_host_len = if sys_flag & SYSFLAG_BORNHOST_V6 != 0 { 20 } else { 8 };
        let store_host_len = if sys_flag & SYSFLAG_STOREHOST_V6 != 0 { 20 } else { 8 };
        // QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP
        r.take(8 + 8 + 4 + 8)?;
        r.take(born_host_len)?;
        r.take(8)?;
        r.take(store_host_len)?;
        r.take(4 + 8)?;
        let body_len = r.i32()?;
        if body_len < 0 {
            return Err(StoredMessageError::BadLength(body_len as i64));
        }
        let body_start = r.pos;
        r.take(body_len as usize)?;
        let topic_len = r.take(1)?[0] as usize;
        let topic_start = r.pos;
        r.take(topic_len)?;
        let props_len_bytes = r.take(2)?;
        let props_len = i16::from_be_bytes([props_len_bytes[0], props_len_bytes[1]]);
        if props_len < 0 {
            return Err(StoredMessageError::BadLength(props_len as i64));
        }
        let props_start = r.pos;
        r.take(props_len as usize)?;
        if r.pos != total {
            return Err(StoredMessageError::SizeMismatch { total, computed: r.pos });
        }
        Ok(Self {
            bytes: &bytes[..total],
            body_start,
            body_len: body_len as usize,
            topic_start,
            topic_len,
            props_start,
            props_len: props_len as usize,
            born_host_len,
            store_host_len,
        })
    }

    /// Parses and checks the body CRC.
    pub fn parse_verified(bytes: &'a [u8]) -> Result<Self, StoredMessageError> {
        let view = Self::parse(bytes)?;
        view.verify_body_crc()?;
        Ok(view)
    }

    pub fn verify_body_crc(&self) -> Result<(), StoredMessageError> {
        let stored = self.body_crc();
        let computed = body_crc(self.body());
        if stored != computed {
            return Err(StoredMessageError::BodyCrc { stored, computed });
        }
        Ok(())
    }

    /// The whole record.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn total_size(&self) -> usize {
        self.bytes.len()
    }
    pub fn body_crc(&self) -> u32 {
        be_i32(self.bytes, 8) as u32
    }
    pub fn queue_id(&self) -> i32 {
        be_i32(self.bytes, 12)
    }
    pub fn flag(&self) -> i32 {
        be_i32(self.bytes, 16)
    }
    pub fn queue_offset(&self) -> i64 {
        be_i64(self.bytes, 20)
    }
    pub fn physical_offset(&self) -> i64 {
        be_i64(self.bytes, 28)
    }
    pub fn sys_flag(&self) -> i32 {
        be_i32(self.bytes, 36)
    }
    pub fn born_timestamp_ms(&self) -> i64 {
        be_i64(self.bytes, 40)
    }
    fn host_at(&self, at: usize, len: usize) -> SocketAddr {
        let b = self.bytes;
        if len == 8 {
            let ip = Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]);
            SocketAddr::new(IpAddr::V4(ip), be_i32(b, at + 4) as u16)
        } else {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[at..at + 16]);
            SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), be_i32(b, at + 16) as u16)
        }
    }
    pub fn born_host(&self) -> SocketAddr {
        self.host_at(48, self.born_host_len)
    }
    fn store_ts_at(&self) -> usize {
        48 + self.born_host_len
    }
    pub fn store_timestamp_ms(&self) -> i64 {
        be_i64(self.bytes, self.store_ts_at())
    }
    pub fn store_host(&self) -> SocketAddr {
        self.host_at(self.store_ts_at() + 8, self.store_host_len)
    }
    fn after_store_host(&self) -> usize {
        self.store_ts_at() + 8 + self.store_host_len
    }
    pub fn reconsume_times(&self) -> i32 {
        be_i32(self.bytes, self.after_store_host())
    }
    pub fn prepared_transaction_offset(&self) -> i64 {
        be_i64(self.bytes, self.after_store_host() + 4)
    }
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[self.body_start..self.body_start + self.body_len]
    }
    pub fn topic_bytes(&self) -> &'a [u8] {
        &self.bytes[self.topic_start..self.topic_start + self.topic_len]
    }
    pub fn topic(&self) -> Result<&'a str, StoredMessageError> {
        std::str::from_utf8(self.topic_bytes()).map_err(|_| StoredMessageError::TopicNotUtf8)
    }
    pub fn properties_bytes(&self) -> &'a [u8] {
        &self.bytes[self.props_start..self.props_start + self.props_len]
    }

    pub fn to_owned(&self) -> Result<StoredMessage, StoredMessageError> {
        Ok(StoredMessage {
            queue_id: self.queue_id(),
            flag: self.flag(),
            queue_offset: self.queue_offset(),
            physical_offset: self.physical_offset(),
            sys_flag: self.sys_flag(),
            born_timestamp_ms: self.born_timestamp_ms(),
            born_host: self.born_host(),
            store_timestamp_ms: self.store_timestamp_ms(),
            store_host: self.store_host(),
            reconsume_times: self.reconsume_times(),
            prepared_transaction_offset: self.prepared_transaction_offset(),
            body: self.body().to_vec(),
            topic: self.topic()?.to_string(),
            properties: String::from_utf8_lossy(self.properties_bytes()).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> StoredMessage {
        StoredMessage {
            queue_id: 3,
            flag: 7,
            queue_offset: 42,
            physical_offset: 1 << 56 | 4096,
            sys_flag: 0,
            born_timestamp_ms: 1_700_000_000_000,
            born_host: "10.0.0.1:5555".parse().unwrap(),
            store_timestamp_ms: 1_700_000_000_123,
            store_host: "10.0.0.2:10911".parse().unwrap(),
            reconsume_times: 1,
            prepared_transaction_offset: 0,
            body: b"hello".to_vec(),
            topic: "TopicTest".into(),
            properties: "TAGS\u{1}TagA\u{2}".into(),
        }
    }

    fn check(bytes: &[u8], expected: Result<(), StoredMessageError>) {
        let got = StoredMessageView::parse_verified(bytes).map(|_| ());
        assert_eq!(got, expected, "parsing {} bytes", bytes.len());
    }

    #[test]
    fn parse_cases() {
        let good = sample().encode();
        assert_eq!(good.len(), FIXED_LEN_V4_BYTES + 5 + 9 + 10);
        check(&good, Ok(()));
        check(&good[..7], Err(StoredMessageError::Truncated { need: 8, have: 7 }));
        check(&good[..good.len() - 1], Err(StoredMessageError::Truncated { need: good.len(), have: good.len() - 1 }));
        let mut bad_magic = good.clone();
        bad_magic[4] ^= 1;
        check(&bad_magic, Err(StoredMessageError::BadMagic(MAGIC_MESSAGE ^ 0x0100_0000)));
        let mut bad_body = good.clone();
        let body_at = good.len() - 10 - 2 - 9 - 1 - 5;
        bad_body[body_at] ^= 0x80;
        assert!(matches!(StoredMessageView::parse_verified(&bad_body), Err(StoredMessageError::BodyCrc { .. })));
        let mut bad_total = good.clone();
        bad_total[3] = bad_total[3].wrapping_sub(1);
        assert!(StoredMessageView::parse(&bad_total).is_err());
        let mut neg_body = good.clone();
        let body_len_at = body_at - 4;
        neg_body[body_len_at] = 0xFF;
        assert!(matches!(StoredMessageView::parse(&neg_body), Err(StoredMessageError::BadLength(_))));
        check(&[0u8; 200], Err(StoredMessageError::BadMagic(0)));
    }

    #[test]
    fn heads() {
        assert_eq!(record_head(&[0; 8]), RecordHead::Empty);
        let mut blank = [0u8; 64];
        encode_blank(&mut blank);
        assert_eq!(record_head(&blank), RecordHead::Blank(64));
        let msg = sample().encode();
        assert_eq!(record_head(&msg), RecordHead::Message(msg.len()));
        assert_eq!(record_head(&[1, 2, 3, 4, 5, 6, 7, 8]), RecordHead::Invalid);
        assert_eq!(record_head(&[0; 4]), RecordHead::Invalid);
    }

    #[test]
    fn ipv6_hosts_roundtrip() {
        let mut m = sample();
        m.born_host = "[::1]:80".parse().unwrap();
        m.sys_flag = SYSFLAG_BORNHOST_V6;
        let bytes = m.encode();
        let back = StoredMessageView::parse_verified(&bytes).unwrap().to_owned().unwrap();
        assert_eq!(back, m);
    }

    proptest! {
        #[test]
        fn roundtrip(queue_id in any::<i32>(), queue_offset in any::<i64>(), phys in any::<i64>(),
                     born in any::<i64>(), body in proptest::collection::vec(any::<u8>(), 0..300),
                     topic in "[A-Za-z0-9_%-]{1,64}", props in "[a-zA-Z\u{1}\u{2} ]{0,40}") {
            let m = StoredMessage { queue_id, queue_offset, physical_offset: phys, born_timestamp_ms: born,
                body, topic, properties: props, ..sample() };
            let bytes = m.encode();
            prop_assert_eq!(bytes.len(), m.encoded_len());
            let view = StoredMessageView::parse_verified(&bytes).unwrap();
            prop_assert_eq!(view.to_owned().unwrap(), m);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = StoredMessageView::parse(&bytes);
            let _ = record_head(&bytes);
        }
    }
}
