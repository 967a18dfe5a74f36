//! The SEND_BATCH_MESSAGE body: RocketMQ's `MessageDecoder.encodeMessages` layout,
//! repeated records of
//! `i32 TOTALSIZE | i32 MAGICCODE | i32 BODYCRC | i32 FLAG | i32 body_len + body |
//!  i16 properties_len + properties`, big-endian.
//!
//! Java clients write MAGICCODE and BODYCRC as 0 and Java's broker reads records
//! sequentially without checking TOTALSIZE, MAGICCODE or BODYCRC; so do we (the broker
//! computes the stored CRC itself). Lengths, though, are checked against the bytes left.
//!
//! Invariants: decoding never panics, never reads past the body, and returns zero-copy
//! slices of it; the number of records is at most `body.len() / RECORD_LEN_MIN_BYTES`;
//! `decode(encode(msgs)) == msgs`.

use super::wire::Reader;
use bytes::{BufMut, Bytes};
use thiserror::Error;

/// A record with an empty body and no properties.
pub const RECORD_LEN_MIN_BYTES: usize = 4 + 4 + 4 + 4 + 4 + 2;
/// Properties carry an i16 length.
pub const PROPERTIES_LEN_MAX_BYTES: usize = i16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("batch record {index} truncated at {field}: need {need} bytes, have {have}")]
    Truncated { index: usize, field: &'static str, need: usize, have: usize },
    #[error("batch record {index} has a negative {field}: {len}")]
    NegativeLength { index: usize, field: &'static str, len: i64 },
    #[error("properties of {len} bytes exceed the maximum of {PROPERTIES_LEN_MAX_BYTES}")]
    PropertiesTooLong { len: usize },
    #[error("body of {len} bytes does not fit an i32 length")]
    BodyTooLong { len: usize },
}

/// One message of a batch. `properties` are raw bytes: parse them with
/// `message::Properties::decode`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchMessage {
    pub flag: i32,
    pub body: Bytes,
    pub properties: Bytes,
}

impl BatchMessage {
    pub fn encoded_len(&self) -> usize {
        RECORD_LEN_MIN_BYTES + self.body.len() + self.properties.len()
    }
}

/// Iterates over the records of a batch body; stops after the first error.
pub struct BatchIter {
    body: Bytes,
    pos: usize,
    index: usize,
    failed: bool,
}

impl BatchIter {
    pub fn new(body: Bytes) -> Self {
        Self { body, pos: 0, index: 0, failed: false }
    }

    fn next_record(&mut self) -> Result<BatchMessage, BatchError> {
        let index = self.index;
        let rest = &self.body[self.pos..];
        let mut r = Reader::new(rest);
        let truncated = |field, need, r: &Reader<'_>| BatchError::Truncated { index, field, need, have: r.remaining() };
        // TOTALSIZE, MAGICCODE, BODYCRC: read past, not trusted (see module doc).
        r.take(12).ok_or_else(|| truncated("record prefix", 12, &r))?;
        let flag = r.i32().ok_or_else(|| truncated("flag", 4, &r))?;
        let body_len = r.i32().ok_or_else(|| truncated("body length", 4, &r))?;
        let body_len = usize::try_from(body_len).map_err(|_| BatchError::NegativeLength {
            index,
            field: "body length",
            len: i64::from(body_len),
        })?;
        let body_at = r.position();
        r.take(body_len).ok_or_else(|| truncated("body", body_len, &r))?;
        let props_len = r.i16().ok_or_else(|| truncated("properties length", 2, &r))?;
        let props_len = usize::try_from(props_len).map_err(|_| BatchError::NegativeLength {
            index,
            field: "properties length",
            len: i64::from(props_len),
        })?;
        let props_at = r.position();
        r.take(props_len).ok_or_else(|| truncated("properties", props_len, &r))?;
        let base = self.pos;
        self.pos += r.position();
        Ok(BatchMessage {
            flag,
            body: self.body.slice(base + body_at..base + body_at + body_len),
            properties: self.body.slice(base + props_at..base + props_at + props_len),
        })
    }
}

impl Iterator for BatchIter {
    type Item = Result<BatchMessage, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.body.len() {
            return None;
        }
        let item = self.next_record();
        self.failed = item.is_err();
        self.index += 1;
        Some(item)
    }
}

/// All records of a batch body, or the first error.
pub fn decode(body: &Bytes) -> Result<Vec<BatchMessage>, BatchError> {
    BatchIter::new(body.clone()).collect()
}

/// Appends the batch body for `messages` to `out`, as Java's `encodeMessages` does
/// (MAGICCODE and BODYCRC 0).
pub fn encode<B: BufMut>(messages: &[BatchMessage], out: &mut B) -> Result<(), BatchError> {
    for m in messages {
        if m.properties.len() > PROPERTIES_LEN_MAX_BYTES {
            return Err(BatchError::PropertiesTooLong { len: m.properties.len() });
        }
        let total = i32::try_from(m.encoded_len()).map_err(|_| BatchError::BodyTooLong { len: m.body.len() })?;
        out.put_i32(total);
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(m.flag);
        // Both casts are exact: the total (which includes them) fits an i32.
        out.put_i32(m.body.len() as i32);
        out.put_slice(&m.body);
        out.put_i16(m.properties.len() as i16);
        out.put_slice(&m.properties);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(flag: i32, body: &[u8], props: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(&[msg(flag, body, props)], &mut v).unwrap();
        v
    }

    fn msg(flag: i32, body: &[u8], props: &[u8]) -> BatchMessage {
        BatchMessage { flag, body: Bytes::copy_from_slice(body), properties: Bytes::copy_from_slice(props) }
    }

    fn check(input: &[u8], expected: Result<Vec<BatchMessage>, BatchError>) {
        assert_eq!(decode(&Bytes::copy_from_slice(input)), expected, "decoding {input:?}");
    }

    #[test]
    fn decode_cases() {
        use BatchError::*;
        let a = rec(1, b"hello", b"TAGS\x01A\x02");
        let b = rec(0, b"", b"");
        check(&[], Ok(vec![]));
        check(&a, Ok(vec![msg(1, b"hello", b"TAGS\x01A\x02")]));
        check(
            &[a.clone(), b.clone(), a.clone()].concat(),
            Ok(vec![msg(1, b"hello", b"TAGS\x01A\x02"), msg(0, b"", b""), msg(1, b"hello", b"TAGS\x01A\x02")]),
        );
        // TOTALSIZE, MAGICCODE and BODYCRC are not trusted.
        let mut odd = a.clone();
        odd[..12].copy_from_slice(&[0xFF; 12]);
        check(&odd, Ok(vec![msg(1, b"hello", b"TAGS\x01A\x02")]));
        check(&a[..11], Err(Truncated { index: 0, field: "record prefix", need: 12, have: 11 }));
        check(
            &[a.clone(), b[..20].to_vec()].concat(),
            Err(Truncated { index: 1, field: "properties length", need: 2, have: 0 }),
        );
        check(&a[..a.len() - 1], Err(Truncated { index: 0, field: "properties", need: 7, have: 6 }));
        let mut neg_body = b.clone();
        neg_body[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        check(&neg_body, Err(NegativeLength { index: 0, field: "body length", len: -1 }));
        let mut huge_body = b.clone();
        huge_body[16..20].copy_from_slice(&i32::MAX.to_be_bytes());
        check(&huge_body, Err(Truncated { index: 0, field: "body", need: i32::MAX as usize, have: 2 }));
        let mut neg_props = b.clone();
        neg_props[20..22].copy_from_slice(&(-2i16).to_be_bytes());
        check(&neg_props, Err(NegativeLength { index: 0, field: "properties length", len: -2 }));
    }

    #[test]
    fn iterator_stops_after_error() {
        let body = Bytes::from([rec(0, b"x", b""), vec![0; 3]].concat());
        let items: Vec<_> = BatchIter::new(body).collect();
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok() && items[1].is_err());
    }

    #[test]
    fn encode_refuses_long_properties() {
        let m =
            BatchMessage { properties: Bytes::from(vec![b'a'; PROPERTIES_LEN_MAX_BYTES + 1]), ..Default::default() };
        assert_eq!(
            encode(&[m], &mut Vec::new()),
            Err(BatchError::PropertiesTooLong { len: PROPERTIES_LEN_MAX_BYTES + 1 })
        );
    }

    proptest! {
        #[test]
        fn roundtrip(msgs in proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..64), proptest::collection::vec(any::<u8>(), 0..32))
                .prop_map(|(f, b, p)| msg(f, &b, &p)), 0..5)) {
            let mut out = Vec::new();
            encode(&msgs, &mut out).unwrap();
            prop_assert_eq!(out.len(), msgs.iter().map(BatchMessage::encoded_len).sum::<usize>());
            prop_assert_eq!(decode(&Bytes::from(out)).unwrap(), msgs);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(msgs) = decode(&Bytes::from(bytes.clone())) {
                prop_assert!(msgs.len() <= bytes.len() / RECORD_LEN_MIN_BYTES);
            }
        }
    }
}
