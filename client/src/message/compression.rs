//! Compressed message bodies: RocketMQ's sysFlag compression bits and the three codecs a
//! RocketMQ 5 producer may use, with a bounded decompression.
//!
//! Wire facts (Java's `MessageSysFlag`, `CompressionType` and `*Compressor`):
//! - `COMPRESSED_FLAG` (bit 0) says the body is compressed; bits 8–10
//!   (`COMPRESSION_TYPE_MASK`) say with what: 1 = LZ4, 2 = zstd, 3 = zlib, and 0 = zlib
//!   as well (RocketMQ 4 producers compress with zlib and set no type bits);
//! - a zlib body is a zlib stream (RFC 1950, `java.util.zip.Deflater`), an LZ4 body an
//!   LZ4 *frame* with independent blocks (lz4-java's `LZ4FrameOutputStream`), a zstd
//!   body a zstd frame. rocketmq-client-rust 1.0 writes LZ4 as one raw block behind its
//!   4-byte little-endian length instead (`compress_prepend_size`, which Java cannot
//!   read); an LZ4 body that does not open with the frame magic is read that way;
//! - a consumer sees the decompressed body with `COMPRESSED_FLAG` cleared and the type
//!   bits kept (Java's `MessageDecoder.decode`).
//!
//! Invariants: `decompress` never panics, whatever the bytes, and never produces more
//! than `max_bytes` of output (a body that would grow past it is refused with
//! `TooLarge` whatever its header claims; memory stays within twice that, the growth
//! of one `Vec`); `decompress(compress(b)) == b` for every type.

use std::borrow::Cow;
use std::io::{Read, Write};
use thiserror::Error;

/// sysFlag bit 0: the body is compressed (Java's `MessageSysFlag.COMPRESSED_FLAG`).
pub const COMPRESSED_FLAG: i32 = 0x1;
/// sysFlag bits 8–10: the compression type (`COMPRESSION_TYPE_COMPARATOR`).
pub const COMPRESSION_TYPE_MASK: i32 = 0x7 << 8;
const COMPRESSION_TYPE_SHIFT: u32 = 8;

/// Largest body a compressed body may decompress to. A producer checks the body
/// against its `maxMessageSize` before compressing (Java and this client alike), 4 MiB
/// by default; a broker's limit can be raised up to a 16 MiB remoting frame
/// (`FRAME_LEN_MAX_BYTES`), so 16 MiB is the largest body any RingMQ deployment carries
/// uncompressed. A body growing past it is a bomb or corruption, not a message.
pub const DECOMPRESSED_BODY_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Largest zstd window accepted (2^24 = 16 MiB, `DECOMPRESSED_BODY_BYTES_MAX`): a frame
/// asking for more would make the decoder allocate it before producing a byte. A
/// producer's window never exceeds its content, and Java's level 5 uses 2 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// The LZ4 frame magic number, as it appears on the wire (little-endian 0x184D2204).
const LZ4_FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4D, 0x18];
/// The length prefix of rocketmq-client-rust's raw LZ4 blocks.
const LZ4_SIZE_PREFIX_BYTES: usize = 4;

/// Java's producer default, `compressMsgBodyOverHowmuch`: bodies of at least 4 KiB are
/// compressed.
pub const COMPRESS_BODY_BYTES_MIN_DEFAULT: usize = 4 * 1024;
/// Java's producer default, `compressLevel` (`rocketmq.message.compressLevel`).
pub const COMPRESS_LEVEL_DEFAULT: i32 = 5;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CompressionError {
    #[error("sysFlag names compression type {0}, which RocketMQ does not define (1 = LZ4, 2 = zstd, 0 or 3 = zlib)")]
    UnknownType(i32),
    #[error("{codec} body does not decompress: {reason}")]
    Corrupt { codec: CompressionType, reason: String },
    #[error("{codec} body decompresses to more than {max_bytes} bytes; refused")]
    TooLarge { codec: CompressionType, max_bytes: usize },
    #[error("compression level {level} is outside {codec}'s {min}..={max}")]
    BadLevel { codec: CompressionType, level: i32, min: i32, max: i32 },
    #[error("{codec} compression failed: {reason}")]
    Compress { codec: CompressionType, reason: String },
}

/// The codecs RocketMQ 5 names in sysFlag (Java's `CompressionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionType {
    /// zlib, Java's default (`rocketmq.message.compressType=ZLIB`).
    #[default]
    Zlib,
    Lz4,
    Zstd,
}

impl std::fmt::Display for CompressionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl CompressionType {
    /// Java's `CompressionType.getValue()`.
    pub fn value(self) -> i32 {
        match self {
            CompressionType::Lz4 => 1,
            CompressionType::Zstd => 2,
            CompressionType::Zlib => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CompressionType::Zlib => "zlib",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The type a compressed body's sysFlag names (Java's `getCompressionType`).
    pub fn from_sys_flag(sys_flag: i32) -> Result<Self, CompressionError> {
        match (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT {
            0 | 3 => Ok(CompressionType::Zlib),
            1 => Ok(CompressionType::Lz4),
            2 => Ok(CompressionType::Zstd),
            other => Err(CompressionError::UnknownType(other)),
        }
    }

    /// The sysFlag bits of a body compressed with this type: `COMPRESSED_FLAG` and the
    /// type (what Java's `sendKernelImpl` ORs in).
    pub fn sys_flag_bits(self) -> i32 {
        COMPRESSED_FLAG | (self.value() << COMPRESSION_TYPE_SHIFT)
    }

    /// The levels `compress` accepts: zlib's 0..=9, zstd's range; LZ4 ignores the level
    /// (as lz4-java's frame stream does).
    pub fn level_range(self) -> (i32, i32) {
        match self {
            CompressionType::Zlib => (0, 9),
            CompressionType::Zstd => {
                let r = zstd::compression_level_range();
                (*r.start(), *r.end())
            }
            CompressionType::Lz4 => (i32::MIN, i32::MAX),
        }
    }

    pub fn check_level(self, level: i32) -> Result<(), CompressionError> {
        let (min, max) = self.level_range();
        if (min..=max).contains(&level) {
            Ok(())
        } else {
            Err(CompressionError::BadLevel { codec: self, level, min, max })
        }
    }
}

/// `body` compressed with `codec` at `level`, in the format a Java consumer reads.
pub fn compress(codec: CompressionType, level: i32, body: &[u8]) -> Result<Vec<u8>, CompressionError> {
    codec.check_level(level)?;
    let failed = |e: std::io::Error| CompressionError::Compress { codec, reason: e.to_string() };
    match codec {
        CompressionType::Zlib => {
            // `check_level` keeps the level in 0..=9.
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level.unsigned_abs()));
            enc.write_all(body).map_err(failed)?;
            enc.finish().map_err(failed)
        }
        CompressionType::Lz4 => {
            // Independent blocks: lz4-java's LZ4FrameInputStream refuses linked ones.
            let info = lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max4MB).block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(body).map_err(failed)?;
            enc.finish().map_err(|e| CompressionError::Compress { codec, reason: e.to_string() })
        }
        CompressionType::Zstd => zstd::bulk::compress(body, level).map_err(failed),
    }
}

/// `body` decompressed as `codec`, refused past `max_bytes` of output.
pub fn decompress(codec: CompressionType, body: &[u8], max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let corrupt = |e: &dyn std::fmt::Display| CompressionError::Corrupt { codec, reason: e.to_string() };
    match codec {
        CompressionType::Zlib => read_bounded(codec, flate2::read::ZlibDecoder::new(body), max_bytes),
        CompressionType::Lz4 if body.starts_with(&LZ4_FRAME_MAGIC) => read_bounded(codec, lz4_flex::frame::FrameDecoder::new(body), max_bytes),
        CompressionType::Lz4 => {
            // rocketmq-client-rust's raw block: the claimed size is checked before it
            // sizes any allocation.
            let Some((prefix, block)) = body.split_first_chunk::<LZ4_SIZE_PREFIX_BYTES>() else {
                return Err(corrupt(&format!("{} bytes: neither an LZ4 frame nor a size-prefixed block", body.len())));
            };
            let size = u32::from_le_bytes(*prefix) as usize;
            if size > max_bytes {
                return Err(CompressionError::TooLarge { codec, max_bytes });
            }
            let out = lz4_flex::block::decompress(block, size).map_err(|e| corrupt(&e))?;
            if out.len() != size {
                return Err(corrupt(&format!("block holds {} bytes, its prefix says {size}", out.len())));
            }
            Ok(out)
        }
        CompressionType::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(body).map_err(|e| corrupt(&e))?;
            dec.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(|e| corrupt(&e))?;
            read_bounded(codec, dec, max_bytes)
        }
    }
}

/// Reads `reader` to its end, refusing more than `max_bytes` (one byte past it is read
/// to tell "exactly at the limit" from "over").
fn read_bounded(codec: CompressionType, reader: impl Read, max_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let limit = (max_bytes as u64).saturating_add(1);
    reader.take(limit).read_to_end(&mut out).map_err(|e| CompressionError::Corrupt { codec, reason: e.to_string() })?;
    if out.len() > max_bytes {
        return Err(CompressionError::TooLarge { codec, max_bytes });
    }
    Ok(out)
}

/// The body an application sees for a stored body with `sys_flag`: the body itself
/// when it is not compressed, else its decompression (at most
/// `DECOMPRESSED_BODY_BYTES_MAX` bytes).
pub fn plain_body(sys_flag: i32, body: &[u8]) -> Result<Cow<'_, [u8]>, CompressionError> {
    if sys_flag & COMPRESSED_FLAG == 0 {
        return Ok(Cow::Borrowed(body));
    }
    let codec = CompressionType::from_sys_flag(sys_flag)?;
    decompress(codec, body, DECOMPRESSED_BODY_BYTES_MAX).map(Cow::Owned)
}

/// What Java's `tryToCompressMessage` decides for a single message's body: compressed
/// (with the sysFlag bits to OR in) when it has at least `body_bytes_min` bytes, else
/// None. Like Java, the compressed form is kept even when it is not smaller.
pub fn compress_for_send(body: &[u8], body_bytes_min: usize, codec: CompressionType, level: i32) -> Result<Option<(Vec<u8>, i32)>, CompressionError> {
    if body.len() < body_bytes_min {
        return Ok(None);
    }
    Ok(Some((compress(codec, level, body)?, codec.sys_flag_bits())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: [CompressionType; 3] = [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd];

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A body that compresses well but not trivially.
    fn text(len: usize) -> Vec<u8> {
        (0..len).map(|i| b"RingMQ compressed body "[i % 23] ^ ((i / 997) as u8 & 1)).collect()
    }

    #[test]
    fn sys_flag_bits_match_javas_message_sys_flag() {
        // check(sys_flag, expected type)
        let check = |sys_flag: i32, expected: Result<CompressionType, CompressionError>| {
            assert_eq!(CompressionType::from_sys_flag(sys_flag), expected, "{sys_flag:#x}");
        };
        check(0x1, Ok(CompressionType::Zlib)); // RocketMQ 4: no type bits
        check(0x1 | 0x100, Ok(CompressionType::Lz4));
        check(0x1 | 0x200, Ok(CompressionType::Zstd));
        check(0x1 | 0x300, Ok(CompressionType::Zlib));
        check(0x1 | 0x300 | 0x4 | 0x10, Ok(CompressionType::Zlib)); // other bits do not matter
        check(0x1 | 0x400, Err(CompressionError::UnknownType(4)));
        check(0x1 | 0x700, Err(CompressionError::UnknownType(7)));
        // Java's COMPRESSION_LZ4_TYPE = 0x1 << 8, ZSTD = 0x2 << 8, ZLIB = 0x3 << 8.
        assert_eq!(CompressionType::Lz4.sys_flag_bits(), 0x101);
        assert_eq!(CompressionType::Zstd.sys_flag_bits(), 0x201);
        assert_eq!(CompressionType::Zlib.sys_flag_bits(), 0x301);
    }

    #[test]
    fn every_type_round_trips() {
        for codec in TYPES {
            for len in [0, 1, 4095, 4096, 70_000, 5 << 20] {
                let body = text(len);
                let level = if codec == CompressionType::Lz4 { 0 } else { COMPRESS_LEVEL_DEFAULT };
                let packed = compress(codec, level, &body).unwrap();
                if len >= 4096 {
                    assert!(packed.len() < body.len() / 4, "{codec} {len}: {} bytes", packed.len());
                }
                let back = plain_body(codec.sys_flag_bits(), &packed).unwrap();
                assert!(back[..] == body[..], "{codec} {len}");
            }
        }
    }

    /// Bodies as other producers write them, made by the reference tools (zlib 1.2.13
    /// at level 5 as `java.util.zip.Deflater(5)`, `lz4` 1.9.4 CLI frames with
    /// independent blocks, `zstd -5` 1.5.4) from `"RingMQ body from a Java producer. " x 4`,
    /// and rocketmq-client-rust's size-prefixed LZ4 block.
    #[test]
    fn reference_bodies_decode() {
        let want = b"RingMQ body from a Java producer. ".repeat(4);
        // check(sys_flag, hex body)
        let check = |sys_flag: i32, body: &str| {
            let stored = hex(body);
            let got = plain_body(sys_flag, &stored).unwrap_or_else(|e| panic!("{sys_flag:#x}: {e}"));
            assert_eq!(&got[..], &want[..], "{sys_flag:#x}");
        };
        let zlib = "785e0bcacc4bf70d5448ca4fa954482bcacf554854f04a2c4b542828ca4f294d4e2dd25308a28b0a00a1202f15";
        check(0x1, zlib);
        check(0x301, zlib);
        check(0x101, "04224d186040822d000000ff1352696e674d5120626f64792066726f6d2061204a6176612070726f64756365722e2022004e506365722e2000000000");
        check(0x201, "28b52ffd2488550100240252696e674d5120626f64792066726f6d2061204a6176612070726f64756365722e2001001a25554ffecc5589");
        let rust_lz4 = lz4_flex::block::compress_prepend_size(&want);
        check(0x101, &rust_lz4.iter().map(|b| format!("{b:02x}")).collect::<String>());
    }

    #[test]
    fn corrupt_bodies_are_errors_not_panics() {
        let body = text(10_000);
        for codec in TYPES {
            let good = compress(codec, 3, &body).unwrap();
            let mut cut = good.clone();
            cut.truncate(good.len() / 2);
            let mut flipped = good.clone();
            let mid = flipped.len() / 2;
            flipped[mid] ^= 0x5A;
            for bad in [&b""[..], b"\x00", b"not compressed at all", &cut, &flipped] {
                match decompress(codec, bad, DECOMPRESSED_BODY_BYTES_MAX) {
                    Err(CompressionError::Corrupt { codec: c, .. } | CompressionError::TooLarge { codec: c, .. }) => assert_eq!(c, codec),
                    // A flipped literal byte can still decode; it must not be the body.
                    Ok(out) => assert!(out != body, "{codec}: {} bytes decoded as the original", bad.len()),
                    Err(e) => panic!("{codec}: {e}"),
                }
            }
        }
        // Seeded garbage through every codec: any outcome but a panic.
        let mut x = 0x9E37_79B9u32;
        for _ in 0..300 {
            let len = (x % 200) as usize;
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            for codec in TYPES {
                let mut framed = LZ4_FRAME_MAGIC.to_vec();
                framed.extend_from_slice(&junk);
                let _ = decompress(codec, &junk, 1 << 20);
                let _ = decompress(codec, &framed, 1 << 20);
            }
        }
    }

    #[test]
    fn decompression_is_bounded() {
        let body = vec![0u8; 1 << 20];
        for codec in TYPES {
            let packed = compress(codec, 1, &body).unwrap();
            assert_eq!(decompress(codec, &packed, 1 << 20).map(|b| b.len()), Ok(1 << 20), "{codec}: exactly at the limit");
            assert_eq!(decompress(codec, &packed, (1 << 20) - 1), Err(CompressionError::TooLarge { codec, max_bytes: (1 << 20) - 1 }), "{codec}");
        }
        // A size prefix claiming more than the limit is refused before allocating it.
        let mut claim = u32::MAX.to_le_bytes().to_vec();
        claim.extend_from_slice(&[0x10, 0x41]);
        assert_eq!(decompress(CompressionType::Lz4, &claim, 1 << 20), Err(CompressionError::TooLarge { codec: CompressionType::Lz4, max_bytes: 1 << 20 }));
        // The public path uses DECOMPRESSED_BODY_BYTES_MAX: a 17 MiB bomb of zeros is
        // refused (it is ~17 KiB compressed).
        let bomb = compress(CompressionType::Zlib, 9, &vec![0u8; DECOMPRESSED_BODY_BYTES_MAX + 1]).unwrap();
        assert!(bomb.len() < 64 * 1024);
        assert_eq!(
            plain_body(CompressionType::Zlib.sys_flag_bits(), &bomb),
            Err(CompressionError::TooLarge { codec: CompressionType::Zlib, max_bytes: DECOMPRESSED_BODY_BYTES_MAX })
        );
        assert!(DECOMPRESSED_BODY_BYTES_MAX >= crate::remoting::frame::BODY_LEN_MAX_BYTES, "a default-size body always decompresses");
    }

    #[test]
    fn uncompressed_bodies_are_borrowed() {
        let body = b"plain";
        assert!(matches!(plain_body(0x4 | 0x300, body), Ok(Cow::Borrowed(b)) if b == body), "type bits alone mean nothing");
        assert_eq!(plain_body(0x401, body), Err(CompressionError::UnknownType(4)));
    }

    #[test]
    fn send_compression_follows_javas_try_to_compress_message() {
        // check(body length, threshold, compressed?)
        let check = |len: usize, min: usize, expected: bool| {
            let out = compress_for_send(&text(len), min, CompressionType::Zlib, COMPRESS_LEVEL_DEFAULT).unwrap();
            assert_eq!(out.as_ref().map(|(_, f)| *f), expected.then_some(0x301), "{len} vs {min}");
        };
        check(4095, COMPRESS_BODY_BYTES_MIN_DEFAULT, false);
        check(4096, COMPRESS_BODY_BYTES_MIN_DEFAULT, true); // Java: body.length >= threshold
        check(10, 0, true);
        check(10, usize::MAX, false);
        // Kept even when larger, as Java keeps it.
        let (packed, _) = compress_for_send(b"x", 0, CompressionType::Zstd, 3).unwrap().unwrap();
        assert!(packed.len() > 1);
        assert!(matches!(compress_for_send(b"x", 0, CompressionType::Zlib, 10), Err(CompressionError::BadLevel { level: 10, .. })));
    }
}
