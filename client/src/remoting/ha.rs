//! The replication stream's wire format (RingMQ's own, broker to broker; Java slaves
//! are not supported). Here, with the other wire codecs, so it has a fuzz target
//! (`client/fuzz/fuzz_targets/ha_frame.rs`); the broker's `ha/` drives it.
//! One TCP connection per shard pair: shard i of a slave to shard i of its master.
//!
//! Frame: `u32 length` (bytes after it, big-endian) `u8 kind` payload.
//! - slave → master `HELLO`: magic, shard, shard count, segment bytes, the slave's
//!   epoch history tail (last epoch and where it started) and its log end;
//!   with `haAuthSecret` set, an extension follows: a flags byte (`HELLO_FLAG_AUTH`)
//!   and the slave's random nonce (`NONCE_BYTES`); without it the frame is as before;
//!   in controller mode the flags also carry `HELLO_FLAG_CONTROLLER` and the slave's
//!   controller broker id (u64, after the nonce when both are set);
//! - master → slave `CHALLENGE` (only to a HELLO with the extension, when the master
//!   has a secret too): the master's nonce and its proof (`auth_proof`, `AuthSide::Master`);
//! - slave → master `AUTH`: the slave's proof (`AuthSide::Slave`), checked before the
//!   WELCOME; nothing of the log is sent to a peer that has not proved the secret;
//! - master → slave `WELCOME` (epoch, where the stream starts, the master's log end) or
//!   `REFUSE` (why, in words; the slave logs it and retries later), or (controller mode)
//!   `TRUNCATE` (kind 9: the slave holds records past where its log agrees with the
//!   master's; it cuts its log to `to_phys` and restarts);
//! - master → slave `DATA`: the physical offset of the first byte and whole records;
//!   an empty `DATA` is a heartbeat that carries the master's log end;
//! - slave → master `ACK`: the slave's log end (received) and its durable end;
//! - master → slave `META`: one metadata snapshot (`MetaKind`) of the master's shard,
//!   sent when it changed (at most every `META_INTERVAL_MS`); kind 5 (`Auth`, the users
//!   and ACLs) was added later: the kinds before it and their payloads are unchanged;
//!   kind 6 (`Epochs`, the master's epoch history) only in controller mode.
//!
//! A proof is HMAC-SHA256(secret, side label ‖ the HELLO frame as encoded, nonce
//! included ‖ the master's nonce): it binds the slave's shard, shard count, segment
//! size, epoch and log end, and both nonces (each side's proof is fresh for the other);
//! the labels differ, so one side's proof is never the other's.
//!
//! Invariants: a frame is at most `FRAME_BYTES_MAX`; decoding never panics and never
//! reads past its input (proptest below); unknown kinds are errors, not skipped.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use thiserror::Error;

/// Largest frame: a DATA batch of `BATCH_BYTES_MAX` plus its header.
pub const FRAME_BYTES_MAX: usize = BATCH_BYTES_MAX + 64;
/// Most record bytes in one DATA frame.
pub const BATCH_BYTES_MAX: usize = 4 << 20;
/// "RMQHA1" + version byte.
pub const MAGIC: [u8; 7] = *b"RMQHA1\x01";

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_REFUSE: u8 = 3;
const KIND_DATA: u8 = 4;
const KIND_ACK: u8 = 5;
const KIND_META: u8 = 6;
const KIND_CHALLENGE: u8 = 7;
const KIND_AUTH: u8 = 8;
const KIND_TRUNCATE: u8 = 9;

/// HELLO extension flag: the slave authenticates (a nonce follows).
pub const HELLO_FLAG_AUTH: u8 = 1;
/// HELLO extension flag: the slave runs in controller mode (its broker id follows).
pub const HELLO_FLAG_CONTROLLER: u8 = 2;
/// Random bytes of each side's nonce.
pub const NONCE_BYTES: usize = 32;
/// An HMAC-SHA256 proof.
pub const PROOF_BYTES: usize = 32;
/// Largest frame a peer may send before it is authenticated (HELLO, AUTH): an
/// unauthenticated peer gets no buffer larger than this.
pub const HANDSHAKE_FRAME_BYTES_MAX: usize = 256;

/// Longest REFUSE reason.
pub const REASON_BYTES_MAX: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Hello(Hello),
    Challenge { master_nonce: [u8; NONCE_BYTES], master_proof: [u8; PROOF_BYTES] },
    Auth { slave_proof: [u8; PROOF_BYTES] },
    Welcome { epoch: u64, start_phys: u64, master_end_phys: u64 },
    Refuse { reason: String },
    Data { phys_from: u64, master_end_phys: u64, records: Vec<u8> },
    Ack { received_phys: u64, durable_phys: u64 },
    Meta { kind: MetaKind, payload: Vec<u8> },
    Truncate { to_phys: u64 },
}

/// What a META frame carries (each in the broker's own snapshot encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetaKind {
    /// The topic table (from the metadata owner shard).
    Topics = 1,
    /// The subscription-group table (from the metadata owner shard).
    Groups = 2,
    /// The consumer offsets of the shard's queues.
    ConsumerOffsets = 3,
    /// The shard's delay-level progress (`delayOffset`).
    DelayOffsets = 4,
    /// RocketMQ 5's users and ACLs (from the metadata owner shard; the broker's auth
    /// snapshot). Sent only by a master that has users or ACLs, so a slave of an older
    /// build, which refuses a kind it does not know, keeps replicating from a master that
    /// does not use them.
    Auth = 5,
    /// The master's epoch history (`ha::epoch`, Apache's CheckpointFile text): sent only
    /// in controller mode, at WELCOME and when it changes, so a slave can serve as
    /// master later with the whole history.
    Epochs = 6,
}

impl MetaKind {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(MetaKind::Topics),
            2 => Some(MetaKind::Groups),
            3 => Some(MetaKind::ConsumerOffsets),
            4 => Some(MetaKind::DelayOffsets),
            5 => Some(MetaKind::Auth),
            6 => Some(MetaKind::Epochs),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub shard: u16,
    pub shard_count: u16,
    pub segment_bytes: u64,
    /// The epoch of the slave's last record (0: empty log) and where that epoch began.
    pub last_epoch: u64,
    pub last_epoch_start_phys: u64,
    /// The slave's log end (physical offset): the master streams from here.
    pub end_phys: u64,
    /// The slave's nonce when it authenticates (`haAuthSecret` set): sent as the HELLO
    /// extension; `None` encodes exactly the HELLO of before.
    pub auth_nonce: Option<[u8; NONCE_BYTES]>,
    /// The slave's controller broker id in controller mode (`HELLO_FLAG_CONTROLLER`);
    /// `None` encodes the HELLO of before.
    pub controller_broker_id: Option<u64>,
}

/// Who proves: the labels keep a master's proof from ever serving as a slave's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthSide {
    Master,
    Slave,
}

impl Hello {
    /// The proof of `side` for this HELLO and the master's nonce (module docs).
    pub fn auth_proof(&self, secret: &[u8], side: AuthSide, master_nonce: &[u8; NONCE_BYTES]) -> [u8; PROOF_BYTES] {
        // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
        let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of any length"),
        };
        mac.update(match side {
            AuthSide::Master => b"RMQHA1 master proof\0",
            AuthSide::Slave => b"RMQHA1 slave proof\0\0",
        });
        let mut hello = Vec::with_capacity(HANDSHAKE_FRAME_BYTES_MAX);
        Frame::Hello(self.clone()).encode(&mut hello);
        mac.update(&hello);
        mac.update(master_nonce);
        let mut out = [0u8; PROOF_BYTES];
        out.copy_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// Whether `proof` is `side`'s proof, compared in constant time.
    pub fn auth_verify(&self, secret: &[u8], side: AuthSide, master_nonce: &[u8; NONCE_BYTES], proof: &[u8; PROOF_BYTES]) -> bool {
        bool::from(self.auth_proof(secret, side, master_nonce).ct_eq(proof))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtoError {
    #[error("frame or payload of {0} bytes (frames at most {FRAME_BYTES_MAX}, payloads {BATCH_BYTES_MAX})")]
    TooLarge(usize),
    #[error("frame truncated: {0}")]
    Truncated(&'static str),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("bad magic: not a RingMQ replication peer")]
    BadMagic,
    #[error("empty frame")]
    Empty,
    #[error("unknown HELLO flags {0:#04x}")]
    BadFlags(u8),
    #[error("{0} bytes past the end of the frame")]
    Trailing(usize),
}

impl Frame {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Frame::Hello(h) => {
                out.push(KIND_HELLO);
                out.extend_from_slice(&MAGIC);
                out.extend_from_slice(&h.shard.to_be_bytes());
                out.extend_from_slice(&h.shard_count.to_be_bytes());
                for v in [h.segment_bytes, h.last_epoch, h.last_epoch_start_phys, h.end_phys] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                let flags = if h.auth_nonce.is_some() { HELLO_FLAG_AUTH } else { 0 } | if h.controller_broker_id.is_some() { HELLO_FLAG_CONTROLLER } else { 0 };
                if flags != 0 {
                    out.push(flags);
                }
                if let Some(nonce) = &h.auth_nonce {
                    out.extend_from_slice(nonce);
                }
                if let Some(id) = h.controller_broker_id {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
            Frame::Challenge { master_nonce, master_proof } => {
                out.push(KIND_CHALLENGE);
                out.extend_from_slice(master_nonce);
                out.extend_from_slice(master_proof);
            }
            Frame::Auth { slave_proof } => {
                out.push(KIND_AUTH);
                out.extend_from_slice(slave_proof);
            }
            Frame::Welcome { epoch, start_phys, master_end_phys } => {
                out.push(KIND_WELCOME);
                for v in [*epoch, *start_phys, *master_end_phys] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            Frame::Refuse { reason } => {
                out.push(KIND_REFUSE);
                let r = &reason.as_bytes()[..reason.len().min(REASON_BYTES_MAX)];
                out.extend_from_slice(r);
            }
            Frame::Data { phys_from, master_end_phys, records } => {
                assert!(records.len() <= BATCH_BYTES_MAX, "a DATA frame holds at most BATCH_BYTES_MAX");
                out.push(KIND_DATA);
                out.extend_from_slice(&phys_from.to_be_bytes());
                out.extend_from_slice(&master_end_phys.to_be_bytes());
                out.extend_from_slice(records);
            }
            Frame::Ack { received_phys, durable_phys } => {
                out.push(KIND_ACK);
                out.extend_from_slice(&received_phys.to_be_bytes());
                out.extend_from_slice(&durable_phys.to_be_bytes());
            }
            Frame::Meta { kind, payload } => {
                assert!(payload.len() <= BATCH_BYTES_MAX, "a META frame holds at most BATCH_BYTES_MAX");
                out.push(KIND_META);
                out.push(*kind as u8);
                out.extend_from_slice(payload);
            }
            Frame::Truncate { to_phys } => {
                out.push(KIND_TRUNCATE);
                out.extend_from_slice(&to_phys.to_be_bytes());
            }
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Decodes one frame from the front of `buf`: `Ok(None)` when more bytes are needed,
    /// `Ok(Some((frame, consumed)))` otherwise.
    pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtoError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > FRAME_BYTES_MAX {
            return Err(ProtoError::TooLarge(len));
        }
        if len == 0 {
            return Err(ProtoError::Empty);
        }
        if buf.len() < 4 + len {
            return Ok(None);
        }
        let body = &buf[4..4 + len];
        let mut r = Reader { b: &body[1..] };
        let frame = match body[0] {
            KIND_HELLO => {
                if r.take(MAGIC.len(), "magic")? != MAGIC {
                    return Err(ProtoError::BadMagic);
                }
                let mut hello = Hello {
                    shard: r.u16("shard")?,
                    shard_count: r.u16("shard count")?,
                    segment_bytes: r.u64("segment bytes")?,
                    last_epoch: r.u64("epoch")?,
                    last_epoch_start_phys: r.u64("epoch start")?,
                    end_phys: r.u64("end")?,
                    auth_nonce: None,
                    controller_broker_id: None,
                };
                // The extension is strict (no unknown flag, nothing after the nonce), so
                // re-encoding a decoded HELLO gives the bytes a proof covers.
                if !r.b.is_empty() {
                    let flags = r.take(1, "flags")?[0];
                    if flags == 0 || flags & !(HELLO_FLAG_AUTH | HELLO_FLAG_CONTROLLER) != 0 {
                        return Err(ProtoError::BadFlags(flags));
                    }
                    if flags & HELLO_FLAG_AUTH != 0 {
                        hello.auth_nonce = Some(r.array("nonce")?);
                    }
                    if flags & HELLO_FLAG_CONTROLLER != 0 {
                        hello.controller_broker_id = Some(r.u64("broker id")?);
                    }
                    r.end()?;
                }
                Frame::Hello(hello)
            }
            KIND_CHALLENGE => {
                let frame = Frame::Challenge { master_nonce: r.array("master nonce")?, master_proof: r.array("master proof")? };
                r.end()?;
                frame
            }
            KIND_AUTH => {
                let frame = Frame::Auth { slave_proof: r.array("slave proof")? };
                r.end()?;
                frame
            }
            KIND_WELCOME => Frame::Welcome { epoch: r.u64("epoch")?, start_phys: r.u64("start")?, master_end_phys: r.u64("end")? },
            KIND_REFUSE => Frame::Refuse { reason: String::from_utf8_lossy(&r.b[..r.b.len().min(REASON_BYTES_MAX)]).into_owned() },
            KIND_DATA => {
                let (phys_from, master_end_phys) = (r.u64("from")?, r.u64("end")?);
                if r.b.len() > BATCH_BYTES_MAX {
                    return Err(ProtoError::TooLarge(r.b.len()));
                }
                Frame::Data { phys_from, master_end_phys, records: r.b.to_vec() }
            }
            KIND_ACK => Frame::Ack { received_phys: r.u64("received")?, durable_phys: r.u64("durable")? },
            KIND_META => {
                let kind = r.take(1, "meta kind")?[0];
                if r.b.len() > BATCH_BYTES_MAX {
                    return Err(ProtoError::TooLarge(r.b.len()));
                }
                Frame::Meta { kind: MetaKind::from_u8(kind).ok_or(ProtoError::UnknownKind(kind))?, payload: r.b.to_vec() }
            }
            KIND_TRUNCATE => {
                let frame = Frame::Truncate { to_phys: r.u64("truncate offset")? };
                r.end()?;
                frame
            }
            other => return Err(ProtoError::UnknownKind(other)),
        };
        Ok(Some((frame, 4 + len)))
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtoError> {
        if self.b.len() < n {
            return Err(ProtoError::Truncated(what));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    /// The handshake frames are strict: nothing may follow their fields.
    fn end(&self) -> Result<(), ProtoError> {
        if self.b.is_empty() { Ok(()) } else { Err(ProtoError::Trailing(self.b.len())) }
    }
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ProtoError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, ProtoError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, ProtoError> {
        let b = self.take(8, what)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(frame: Frame) {
        let mut out = Vec::new();
        frame.encode(&mut out);
        assert_eq!(Frame::decode(&out), Ok(Some((frame.clone(), out.len()))), "{frame:?}");
        for cut in 0..out.len() {
            assert_eq!(Frame::decode(&out[..cut]), Ok(None), "{frame:?} cut at {cut}");
        }
    }

    #[test]
    fn frames_round_trip() {
        check(Frame::Hello(Hello { shard: 3, shard_count: 16, segment_bytes: 1 << 30, last_epoch: 2, last_epoch_start_phys: 1 << 56, end_phys: u64::MAX, auth_nonce: None, controller_broker_id: None }));
        check(Frame::Hello(Hello { shard: 3, shard_count: 16, segment_bytes: 1 << 30, last_epoch: 2, last_epoch_start_phys: 1 << 56, end_phys: u64::MAX, auth_nonce: Some([7; NONCE_BYTES]), controller_broker_id: None }));
        check(Frame::Hello(Hello { shard: 3, shard_count: 16, segment_bytes: 1 << 30, last_epoch: 2, last_epoch_start_phys: 1 << 56, end_phys: u64::MAX, auth_nonce: None, controller_broker_id: Some(2) }));
        check(Frame::Hello(Hello { shard: 3, shard_count: 16, segment_bytes: 1 << 30, last_epoch: 2, last_epoch_start_phys: 1 << 56, end_phys: u64::MAX, auth_nonce: Some([7; NONCE_BYTES]), controller_broker_id: Some(u64::MAX) }));
        check(Frame::Truncate { to_phys: 1 << 56 });
        check(Frame::Meta { kind: MetaKind::Epochs, payload: b"1\n0\n1-0\n".to_vec() });
        check(Frame::Challenge { master_nonce: [1; NONCE_BYTES], master_proof: [2; PROOF_BYTES] });
        check(Frame::Auth { slave_proof: [3; PROOF_BYTES] });
        check(Frame::Welcome { epoch: 1, start_phys: 0, master_end_phys: 42 });
        check(Frame::Refuse { reason: "shard count differs: master 4, slave 2".into() });
        check(Frame::Data { phys_from: 7, master_end_phys: 9, records: vec![1, 2, 3] });
        check(Frame::Data { phys_from: 7, master_end_phys: 7, records: Vec::new() });
        check(Frame::Ack { received_phys: 5, durable_phys: 4 });
        check(Frame::Meta { kind: MetaKind::Topics, payload: b"table".to_vec() });
        check(Frame::Meta { kind: MetaKind::DelayOffsets, payload: Vec::new() });
        check(Frame::Meta { kind: MetaKind::Auth, payload: br#"{"format":1}"#.to_vec() });
    }

    fn check_error(bytes: &[u8], expected: ProtoError) {
        assert_eq!(Frame::decode(bytes), Err(expected), "{bytes:?}");
    }

    #[test]
    fn bad_frames_are_errors() {
        check_error(&[0, 0, 0, 0], ProtoError::Empty);
        check_error(&[0xff, 0xff, 0xff, 0xff], ProtoError::TooLarge(u32::MAX as usize));
        check_error(&[0, 0, 0, 1, 99], ProtoError::UnknownKind(99));
        check_error(&[0, 0, 0, 3, KIND_ACK, 0, 0], ProtoError::Truncated("received"));
        check_error(&[0, 0, 0, 2, KIND_META, 9], ProtoError::UnknownKind(9));
        check_error(&[0, 0, 0, 2, KIND_META, 7], ProtoError::UnknownKind(7));
        check_error(&[0, 0, 0, 1, 10], ProtoError::UnknownKind(10));
        check_error(&[0, 0, 0, 5, KIND_TRUNCATE, 0, 0, 0, 0], ProtoError::Truncated("truncate offset"));
        check_error(&[0, 0, 0, 10, KIND_TRUNCATE, 0, 0, 0, 0, 0, 0, 0, 0, 0], ProtoError::Trailing(1));
        // The frames of before decode as before: a topic table is kind 1.
        assert_eq!(Frame::decode(&[0, 0, 0, 3, KIND_META, 1, 0xAB]).unwrap(), Some((Frame::Meta { kind: MetaKind::Topics, payload: vec![0xAB] }, 7)));
        check_error(&[0, 0, 0, 1, KIND_META], ProtoError::Truncated("meta kind"));
        // A payload past BATCH_BYTES_MAX inside an allowed frame is refused (it could
        // not be encoded back).
        let mut big = Vec::new();
        let len = (1 + 16 + BATCH_BYTES_MAX + 1) as u32;
        big.extend_from_slice(&len.to_be_bytes());
        big.push(KIND_DATA);
        big.extend(std::iter::repeat_n(0u8, 16 + BATCH_BYTES_MAX + 1));
        check_error(&big, ProtoError::TooLarge(BATCH_BYTES_MAX + 1));
        let mut hello = vec![0, 0, 0, 8, KIND_HELLO];
        hello.extend_from_slice(b"RMQHA2\x01");
        check_error(&hello, ProtoError::BadMagic);
    }

    fn hello(auth_nonce: Option<[u8; NONCE_BYTES]>) -> Hello {
        Hello { shard: 1, shard_count: 2, segment_bytes: 1 << 30, last_epoch: 1, last_epoch_start_phys: 0, end_phys: 4096, auth_nonce, controller_broker_id: None }
    }

    /// (frame, its exact bytes): a HELLO without a nonce is byte for byte the HELLO of
    /// before authentication existed, so peers with `haAuthSecret` off interoperate.
    #[test]
    fn handshake_frames_have_these_bytes() {
        let plain: Vec<u8> = [&[0, 0, 0, 44, KIND_HELLO][..], b"RMQHA1\x01", &[0, 1, 0, 2], &(1u64 << 30).to_be_bytes(), &1u64.to_be_bytes(), &0u64.to_be_bytes(), &4096u64.to_be_bytes()].concat();
        let nonce: [u8; NONCE_BYTES] = std::array::from_fn(|i| i as u8);
        let with_nonce: Vec<u8> = [&[0, 0, 0, 77][..], &plain[4..], &[HELLO_FLAG_AUTH], &nonce].concat();
        let challenge: Vec<u8> = [&[0, 0, 0, 65, KIND_CHALLENGE][..], &[0xaa; 32], &[0xbb; 32]].concat();
        let auth: Vec<u8> = [&[0, 0, 0, 33, KIND_AUTH][..], &[0xcc; 32]].concat();
        let controller: Vec<u8> = [&[0, 0, 0, 53][..], &plain[4..], &[HELLO_FLAG_CONTROLLER], &7u64.to_be_bytes()].concat();
        let both: Vec<u8> = [&[0, 0, 0, 85][..], &plain[4..], &[HELLO_FLAG_AUTH | HELLO_FLAG_CONTROLLER], &nonce, &7u64.to_be_bytes()].concat();
        let truncate: Vec<u8> = [&[0, 0, 0, 9, KIND_TRUNCATE][..], &4096u64.to_be_bytes()].concat();
        let cases = [
            (Frame::Hello(hello(None)), plain),
            (Frame::Hello(hello(Some(nonce))), with_nonce),
            (Frame::Hello(Hello { controller_broker_id: Some(7), ..hello(None) }), controller),
            (Frame::Hello(Hello { controller_broker_id: Some(7), ..hello(Some(nonce)) }), both),
            (Frame::Truncate { to_phys: 4096 }, truncate),
            (Frame::Challenge { master_nonce: [0xaa; 32], master_proof: [0xbb; 32] }, challenge),
            (Frame::Auth { slave_proof: [0xcc; 32] }, auth),
        ];
        for (frame, bytes) in cases {
            let mut out = Vec::new();
            frame.encode(&mut out);
            assert_eq!(out, bytes, "{frame:?}");
            assert!(out.len() <= HANDSHAKE_FRAME_BYTES_MAX);
            assert_eq!(Frame::decode(&bytes), Ok(Some((frame, bytes.len()))));
        }
    }

    #[test]
    fn bad_handshake_frames_are_errors() {
        let mut h = Vec::new();
        Frame::Hello(hello(Some([0; NONCE_BYTES]))).encode(&mut h);
        let with_len = |body: &[u8]| -> Vec<u8> { [&(body.len() as u32).to_be_bytes()[..], body].concat() };
        let body = &h[4..];
        let cases: Vec<(Vec<u8>, ProtoError)> = vec![
            (with_len(&[&body[..body.len() - NONCE_BYTES - 1], &[4]].concat()), ProtoError::BadFlags(4)),
            (with_len(&[&body[..body.len() - NONCE_BYTES - 1], &[0]].concat()), ProtoError::BadFlags(0)),
            (with_len(&[&body[..body.len() - NONCE_BYTES - 1], &[HELLO_FLAG_CONTROLLER, 0, 0, 0]].concat()), ProtoError::Truncated("broker id")),
            (with_len(&[&body[..body.len() - NONCE_BYTES - 1], &[HELLO_FLAG_AUTH | HELLO_FLAG_CONTROLLER], &[0; NONCE_BYTES]].concat()), ProtoError::Truncated("broker id")),
            (with_len(&[&body[..body.len() - NONCE_BYTES - 1], &[HELLO_FLAG_CONTROLLER], &[0; 9]].concat()), ProtoError::Trailing(1)),
            (with_len(&body[..body.len() - 1]), ProtoError::Truncated("nonce")),
            (with_len(&[body, &[0]].concat()), ProtoError::Trailing(1)),
            (with_len(&[KIND_CHALLENGE; 1 + 63]), ProtoError::Truncated("master proof")),
            (with_len(&[&[KIND_CHALLENGE][..], &[0; 65]].concat()), ProtoError::Trailing(1)),
            (with_len(&[KIND_AUTH; 1 + 31]), ProtoError::Truncated("slave proof")),
            (with_len(&[&[KIND_AUTH][..], &[0; 33]].concat()), ProtoError::Trailing(1)),
        ];
        for (bytes, expected) in cases {
            check_error(&bytes, expected);
        }
    }

    /// Known answers (Python's `hmac.new(secret, label + hello + nonce, sha256)`), and
    /// a proof that changes with every input it covers.
    #[test]
    fn proofs_are_hmac_sha256_over_label_hello_and_nonce() {
        let h = hello(Some(std::array::from_fn(|i| i as u8)));
        let secret = b"0123456789abcdef";
        let hex = |p: [u8; PROOF_BYTES]| p.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(hex(h.auth_proof(secret, AuthSide::Slave, &[0xaa; NONCE_BYTES])), "19dd3f79dcb5bef41a91c82b5ba3d52aed2a07a58e4b0e7f1ee2d5ffdf020bdc");
        assert_eq!(hex(h.auth_proof(secret, AuthSide::Master, &[0xaa; NONCE_BYTES])), "8ef4444ca5fd34f56fcf074bd4bc5f1df05d64e517ff922eef892356dd2eba5f");
        let proof = h.auth_proof(secret, AuthSide::Slave, &[0xaa; NONCE_BYTES]);
        assert!(h.auth_verify(secret, AuthSide::Slave, &[0xaa; NONCE_BYTES], &proof));
        assert!(!h.auth_verify(secret, AuthSide::Master, &[0xaa; NONCE_BYTES], &proof), "a slave's proof is not a master's");
        assert!(!h.auth_verify(b"0123456789abcdeF", AuthSide::Slave, &[0xaa; NONCE_BYTES], &proof), "another secret");
        assert!(!h.auth_verify(secret, AuthSide::Slave, &[0xab; NONCE_BYTES], &proof), "another master nonce");
        for changed in [Hello { end_phys: 0, ..h.clone() }, Hello { shard: 0, ..h.clone() }, Hello { last_epoch: 2, ..h.clone() }, Hello { auth_nonce: Some([9; NONCE_BYTES]), ..h.clone() }, Hello { controller_broker_id: Some(1), ..h.clone() }] {
            assert!(!changed.auth_verify(secret, AuthSide::Slave, &[0xaa; NONCE_BYTES], &proof), "{changed:?}");
        }
    }

    proptest! {
        #[test]
        fn handshake_frames_decode_garbage_without_panic(kind in prop_oneof![Just(KIND_HELLO), Just(KIND_CHALLENGE), Just(KIND_AUTH), Just(KIND_TRUNCATE)], body in proptest::collection::vec(any::<u8>(), 0..128)) {
            let bytes = [&((body.len() + 1) as u32).to_be_bytes()[..], &[kind], &body].concat();
            if let Ok(Some((frame, used))) = Frame::decode(&bytes) {
                // What decodes re-encodes to the same bytes (a proof covers them).
                let mut again = Vec::new();
                frame.encode(&mut again);
                prop_assert_eq!(&again[..], &bytes[..used]);
            }
        }

        #[test]
        fn hello_and_truncate_round_trip(
            shard in any::<u16>(), shard_count in any::<u16>(), segment_bytes in any::<u64>(), last_epoch in any::<u64>(),
            last_epoch_start_phys in any::<u64>(), end_phys in any::<u64>(), auth_nonce in proptest::option::of(any::<[u8; NONCE_BYTES]>()),
            controller_broker_id in proptest::option::of(any::<u64>()), to_phys in any::<u64>(),
        ) {
            let hello = Hello { shard, shard_count, segment_bytes, last_epoch, last_epoch_start_phys, end_phys, auth_nonce, controller_broker_id };
            for frame in [Frame::Hello(hello), Frame::Truncate { to_phys }] {
                let mut out = Vec::new();
                frame.encode(&mut out);
                prop_assert!(out.len() <= HANDSHAKE_FRAME_BYTES_MAX);
                prop_assert_eq!(Frame::decode(&out), Ok(Some((frame.clone(), out.len()))));
            }
        }

        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Frame::decode(&bytes);
        }
    }
}
