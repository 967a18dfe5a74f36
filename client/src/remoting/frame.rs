//! Remoting frames: `i32 length | i32 (serialize_type << 24) | header_len | header | body`,
//! big-endian, where `length = 4 + header_len + body_len` (it excludes itself).
//!
//! Invariants:
//! - `decode` decides from the 8-byte prefix alone whether a frame is acceptable, so a
//!   hostile length never makes us buffer (or reserve) more than the limits allow;
//! - it never panics, consumes exactly one whole frame or nothing, and reserves at most
//!   `RESERVE_AHEAD_MAX_BYTES` beyond the bytes already received: a peer that declares a
//!   16 MiB frame and sends 8 bytes costs 1 MiB, not 16 (memory follows bytes that
//!   actually arrive);
//! - `decode(encode(f)) == f`.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Most bytes reserved ahead of the bytes received for a frame still arriving.
pub const RESERVE_AHEAD_MAX_BYTES: usize = 1024 * 1024;

/// Largest frame accepted or produced, counting the 4-byte length field.
pub const FRAME_LEN_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Default largest body (RocketMQ's default `maxMessageSize`).
pub const BODY_LEN_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The header length shares its word with the serialize type, which takes the top byte.
pub const HEADER_LEN_MAX_BYTES: usize = 0x00FF_FFFF;
/// The length field.
pub const LENGTH_FIELD_BYTES: usize = 4;
/// The length field plus the serialize-type/header-length word.
pub const PREFIX_BYTES: usize = 8;

/// How a command's header is serialized (the frame's top byte of the second word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    #[default]
    Json = 0,
    RocketMq = 1,
}

impl SerializeType {
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Json),
            1 => Some(Self::RocketMq),
            _ => None,
        }
    }
}

/// What a decoder accepts. The body maximum is the broker's configured max message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    pub frame_len_max_bytes: usize,
    pub body_len_max_bytes: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self { frame_len_max_bytes: FRAME_LEN_MAX_BYTES, body_len_max_bytes: BODY_LEN_MAX_BYTES }
    }
}

impl FrameLimits {
    pub fn with_body_len_max_bytes(body_len_max_bytes: usize) -> Self {
        Self { body_len_max_bytes, ..Self::default() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame length field {0} is below the minimum of 4")]
    LengthTooSmall(i32),
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLong { len: usize, max: usize },
    #[error("header length {header_len} exceeds the {available} bytes the frame declares")]
    HeaderTooLong { header_len: usize, available: usize },
    #[error("body of {len} bytes exceeds the maximum message size of {max} bytes")]
    BodyTooLong { len: usize, max: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
}

/// What the 8-byte prefix declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePrefix {
    /// Whole frame, including the length field.
    pub frame_len_bytes: usize,
    pub header_len_bytes: usize,
    pub body_len_bytes: usize,
    pub serialize_type: SerializeType,
}

/// One frame. `header` is the serialized command header, `body` the payload; both are
/// zero-copy slices of the receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub serialize_type: SerializeType,
    pub header: Bytes,
    pub body: Bytes,
}

fn check_length_field(length: i32, limits: &FrameLimits) -> Result<usize, FrameError> {
    if length < 4 {
        return Err(FrameError::LengthTooSmall(length));
    }
    // length >= 4 so the cast is exact; the +4 cannot overflow usize on 32/64-bit.
    let frame_len = length as usize + LENGTH_FIELD_BYTES;
    let max = limits.frame_len_max_bytes;
    if frame_len > max {
        return Err(FrameError::FrameTooLong { len: frame_len, max });
    }
    Ok(frame_len)
}

/// Validates the prefix against `limits`.
pub fn decode_prefix(prefix: [u8; PREFIX_BYTES], limits: &FrameLimits) -> Result<FramePrefix, FrameError> {
    let [l0, l1, l2, l3, t, h0, h1, h2] = prefix;
    let frame_len_bytes = check_length_field(i32::from_be_bytes([l0, l1, l2, l3]), limits)?;
    let serialize_type = SerializeType::from_code(t).ok_or(FrameError::UnknownSerializeType(t))?;
    let header_len_bytes = u32::from_be_bytes([0, h0, h1, h2]) as usize;
    let available = frame_len_bytes - PREFIX_BYTES;
    if header_len_bytes > available {
        return Err(FrameError::HeaderTooLong { header_len: header_len_bytes, available });
    }
    let body_len_bytes = available - header_len_bytes;
    if body_len_bytes > limits.body_len_max_bytes {
        return Err(FrameError::BodyTooLong { len: body_len_bytes, max: limits.body_len_max_bytes });
    }
    Ok(FramePrefix { frame_len_bytes, header_len_bytes, body_len_bytes, serialize_type })
}

/// Takes one frame off the front of `buf`, or returns `Ok(None)` when more bytes are
/// needed. After an error the connection's byte stream is unusable: close it.
pub fn decode(buf: &mut BytesMut, limits: &FrameLimits) -> Result<Option<Frame>, FrameError> {
    let Some(prefix) = buf.get(..PREFIX_BYTES) else {
        // Refuse a bad length as soon as it is visible, before waiting for more.
        if let Some(len) = buf.get(..LENGTH_FIELD_BYTES) {
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            check_length_field(len, limits)?;
        }
        return Ok(None);
    };
    let mut raw = [0u8; PREFIX_BYTES];
    raw.copy_from_slice(prefix);
    let p = decode_prefix(raw, limits)?;
    if buf.len() < p.frame_len_bytes {
        buf.reserve((p.frame_len_bytes - buf.len()).min(RESERVE_AHEAD_MAX_BYTES));
        return Ok(None);
    }
    let mut frame = buf.split_to(p.frame_len_bytes).freeze();
    frame.advance(PREFIX_BYTES);
    let header = frame.split_to(p.header_len_bytes);
    Ok(Some(Frame { serialize_type: p.serialize_type, header, body: frame }))
}

/// Appends one frame to `out`. Refuses what no peer would accept: a header over 24 bits
/// of length or a frame over `FRAME_LEN_MAX_BYTES`.
pub fn encode(serialize_type: SerializeType, header: &[u8], body: &[u8], out: &mut BytesMut) -> Result<(), FrameError> {
    if header.len() > HEADER_LEN_MAX_BYTES {
        return Err(FrameError::HeaderTooLong { header_len: header.len(), available: HEADER_LEN_MAX_BYTES });
    }
    let frame_len = PREFIX_BYTES.saturating_add(header.len()).saturating_add(body.len());
    if frame_len > FRAME_LEN_MAX_BYTES {
        return Err(FrameError::FrameTooLong { len: frame_len, max: FRAME_LEN_MAX_BYTES });
    }
    out.reserve(frame_len);
    // Both casts are exact: frame_len <= 16 MiB and header.len() < 2^24.
    out.put_i32((frame_len - LENGTH_FIELD_BYTES) as i32);
    out.put_u32((u32::from(serialize_type.code()) << 24) | header.len() as u32);
    out.put_slice(header);
    out.put_slice(body);
    Ok(())
}

impl Frame {
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), FrameError> {
        encode(self.serialize_type, &self.header, &self.body, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(len: i32, st: u8, header_len: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = len.to_be_bytes().to_vec();
        v.extend_from_slice(&((u32::from(st) << 24) | header_len).to_be_bytes());
        v.extend_from_slice(rest);
        v
    }

    fn frame(st: SerializeType, header: &[u8], body: &[u8]) -> Frame {
        Frame { serialize_type: st, header: Bytes::copy_from_slice(header), body: Bytes::copy_from_slice(body) }
    }

    /// Decodes `input` with a 16-byte body limit; `expected` is the result and the bytes left.
    fn check(input: &[u8], expected: Result<Option<Frame>, FrameError>, left: usize) {
        let limits = FrameLimits { frame_len_max_bytes: 64, body_len_max_bytes: 16 };
        let mut buf = BytesMut::from(input);
        let got = decode(&mut buf, &limits);
        assert_eq!(got, expected, "decoding {input:?}");
        if got.is_ok() {
            assert_eq!(buf.len(), left, "bytes left after decoding {input:?}");
        }
    }

    #[test]
    fn decode_cases() {
        use FrameError::*;
        use SerializeType::*;
        check(&[], Ok(None), 0);
        check(&[0, 0, 0], Ok(None), 3);
        check(&[0, 0, 0, 4], Ok(None), 4);
        check(&[0, 0, 0, 3], Err(LengthTooSmall(3)), 0);
        check(&[0xFF, 0xFF, 0xFF, 0xFF], Err(LengthTooSmall(-1)), 0);
        check(&[0x80, 0, 0, 0, 0, 0, 0, 0], Err(LengthTooSmall(i32::MIN)), 0);
        check(&[0, 0, 0, 61], Err(FrameTooLong { len: 65, max: 64 }), 0);
        check(&[0x7F, 0xFF, 0xFF, 0xFF], Err(FrameTooLong { len: 0x8000_0003, max: 64 }), 0);
        check(&raw(4, 0, 0, &[]), Ok(Some(frame(Json, b"", b""))), 0);
        check(&raw(4, 1, 0, &[9]), Ok(Some(frame(RocketMq, b"", b""))), 1);
        check(&raw(4, 2, 0, &[]), Err(UnknownSerializeType(2)), 0);
        check(&raw(4, 0xFF, 0, &[]), Err(UnknownSerializeType(0xFF)), 0);
        check(&raw(6, 0, 2, b"{}"), Ok(Some(frame(Json, b"{}", b""))), 0);
        check(&raw(9, 0, 2, b"{}abc"), Ok(Some(frame(Json, b"{}", b"abc"))), 0);
        check(&raw(9, 0, 2, b"{}abcXY"), Ok(Some(frame(Json, b"{}", b"abc"))), 2);
        check(&raw(9, 0, 2, b"{}ab"), Ok(None), 12);
        check(&raw(9, 0, 6, b""), Err(HeaderTooLong { header_len: 6, available: 5 }), 0);
        check(&raw(4, 0, 0xFF_FFFF, b""), Err(HeaderTooLong { header_len: 0xFF_FFFF, available: 0 }), 0);
        check(&raw(21, 0, 0, b""), Err(BodyTooLong { len: 17, max: 16 }), 0);
        check(&raw(21, 0, 1, b""), Ok(None), 8);
        check(&raw(60, 0, 40, b""), Ok(None), 8);
    }

    #[test]
    fn prefix_is_decided_before_buffering() {
        let limits = FrameLimits::default();
        let mut buf = BytesMut::from(&raw(4 + 5 * 1024 * 1024, 0, 0, b"")[..]);
        assert_eq!(decode(&mut buf, &limits), Err(FrameError::BodyTooLong { len: 5 << 20, max: 4 << 20 }));
        // The body limit is a parameter: the same prefix is fine with a larger limit.
        let mut buf = BytesMut::from(&raw(4 + 5 * 1024 * 1024, 0, 0, b"")[..]);
        assert_eq!(decode(&mut buf, &FrameLimits::with_body_len_max_bytes(8 << 20)), Ok(None));
        // Only a bounded reservation ahead of the bytes that arrived.
        assert!(buf.capacity() >= RESERVE_AHEAD_MAX_BYTES && buf.capacity() <= 2 * RESERVE_AHEAD_MAX_BYTES + 64, "{}", buf.capacity());
    }

    #[test]
    fn encode_refuses_oversize() {
        let mut out = BytesMut::new();
        let big = vec![0u8; FRAME_LEN_MAX_BYTES];
        assert!(matches!(encode(SerializeType::Json, b"", &big, &mut out), Err(FrameError::FrameTooLong { .. })));
        assert!(out.is_empty());
        encode(SerializeType::RocketMq, b"h", b"bb", &mut out).unwrap();
        assert_eq!(&out[..], &raw(7, 1, 1, b"hbb")[..]);
    }

    proptest! {
        #[test]
        fn roundtrip_incremental(header in proptest::collection::vec(any::<u8>(), 0..200),
                                 body in proptest::collection::vec(any::<u8>(), 0..300),
                                 rocketmq in any::<bool>(), chunk in 1usize..64) {
            let st = if rocketmq { SerializeType::RocketMq } else { SerializeType::Json };
            let f = frame(st, &header, &body);
            let mut wire = BytesMut::new();
            f.encode(&mut wire).unwrap();
            f.encode(&mut wire).unwrap();
            let limits = FrameLimits::default();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for piece in wire.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(frame) = decode(&mut buf, &limits).unwrap() {
                    got.push(frame);
                }
            }
            prop_assert_eq!(got, vec![f.clone(), f]);
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = decode(&mut buf, &FrameLimits { frame_len_max_bytes: 48, body_len_max_bytes: 16 });
        }
    }
}
