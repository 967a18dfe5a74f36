//! `RemotingCommand`: one request or response, and its two header serializations.
//!
//! JSON header (serialize type 0), as fastjson writes it:
//! `{"code","extFields":{..},"flag","language","opaque","remark","serializeTypeCurrentRPC","version"}`.
//! ROCKETMQ binary header (serialize type 1), big-endian:
//! `i16 code | i8 language | i16 version | i32 opaque | i32 flag | i32 remark_len + remark |
//!  i32 ext_len + (i16 key_len + key, i32 val_len + val)*`.
//!
//! Decoding a frame borrows: ext fields are spans of the frame's header bytes (see
//! `ext.rs`), a known language is a `&'static str`; a request with string ext values
//! and no remark decodes without a heap allocation. Encoding writes the header straight
//! into the output buffer after a placeholder prefix, patched once the length is known.
//!
//! Invariants:
//! - decoding is lenient the way fastjson is (missing fields default, ext values may be
//!   JSON numbers or booleans, unknown keys ignored, a repeated top-level field refused);
//!   encoding is strict (ext values are strings, fields out of a binary field's range
//!   are refused, not truncated);
//! - every length in a binary header is checked against what remains before it is used;
//! - at most `EXT_FIELDS_COUNT_MAX` ext fields are accepted, which bounds the map's
//!   overhead independently of how the header's bytes are spread;
//! - `decode(encode(c)) == c` for commands whose remark is `None` or non-empty (the
//!   binary form cannot tell an empty remark from none, as in Java);
//! - a failed `encode` leaves the output buffer as it found it.

use super::codes::{language_code, language_name, LANGUAGE_NAMES};
use super::ext::Piece;
pub use super::ext::ExtFields;
use super::frame::{self, Frame, FrameError, FrameLimits, SerializeType, FRAME_LEN_MAX_BYTES, HEADER_LEN_MAX_BYTES, LENGTH_FIELD_BYTES, PREFIX_BYTES};
use super::headers::{CommandHeader, HeaderError};
use super::json::de::{i32_lenient, opt_string_lenient};
use super::wire::Reader;
use bytes::{BufMut, Bytes, BytesMut};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use thiserror::Error;

/// Java headers have a few dozen fields at most; this bounds a hostile header's map.
pub const EXT_FIELDS_COUNT_MAX: usize = 1024;
/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1: the request expects no response.
pub const FLAG_ONEWAY: i32 = 1 << 1;
/// Language our requests announce.
pub const LANGUAGE_REQUEST: &str = "RUST";
/// Language our responses announce: what a Java broker answers, so that no client
/// meets a language its enum lacks in a response (RUST is recent).
pub const LANGUAGE_RESPONSE: &str = "JAVA";
/// fastjson's default for a header without `language`.
pub const LANGUAGE_DEFAULT: &str = "JAVA";
/// Protocol version we announce: RocketMQ 4.9.4's `MQVersion` ordinal, the first
/// version answered with standard route JSON (DESIGN.md §6).
pub const VERSION_DEFAULT: i32 = 401;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BinaryHeaderError {
    #[error("ROCKETMQ header truncated at {field}: need {need} bytes, have {have}")]
    Truncated { field: &'static str, need: usize, have: usize },
    #[error("ROCKETMQ header has a negative {field}: {len}")]
    NegativeLength { field: &'static str, len: i64 },
    #[error("more than {max} ext fields")]
    TooManyExtFields { max: usize },
}

#[derive(Debug, Error)]
pub enum CommandError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("bad JSON header: {0}")]
    JsonHeader(#[source] serde_json::Error),
    #[error("bad JSON header: not an object")]
    JsonHeaderNotAnObject,
    #[error(transparent)]
    BinaryHeader(#[from] BinaryHeaderError),
    #[error("{field} = {value} does not fit the ROCKETMQ header's {bits}-bit field")]
    FieldOutOfRange { field: &'static str, value: i64, bits: u8 },
    #[error("{count} ext fields exceed the maximum of {max}")]
    TooManyExtFields { count: usize, max: usize },
}

impl CommandError {
    /// A frame error leaves the byte stream unusable (close the connection); a header
    /// error consumed exactly its frame, so the connection can answer and go on.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Frame(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    pub code: i32,
    /// A known language's name is borrowed from `codes::LANGUAGE_NAMES`.
    pub language: Cow<'static, str>,
    pub version: i32,
    /// Pairs a response with its request.
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    /// How the header travels; responses use the request's.
    pub serialize_type: SerializeType,
}

impl Default for RemotingCommand {
    fn default() -> Self {
        Self {
            code: 0,
            language: Cow::Borrowed(LANGUAGE_REQUEST),
            version: VERSION_DEFAULT,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }
}

impl RemotingCommand {
    pub fn request(code: i32) -> Self {
        Self { code, ..Self::default() }
    }

    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    pub fn with_ext(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.ext_fields.set_str(key.as_ref(), value.as_ref());
        self
    }

    /// Adds a typed header's fields to the ext fields.
    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> Self {
        let ext = header.to_ext();
        self.ext_fields.extend(ext.iter());
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    pub fn oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key)
    }

    /// Reads a typed header from the ext fields.
    pub fn header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext(&self.ext_fields)
    }

    /// A response to this request: same opaque, same serialize type.
    pub fn create_response(&self, code: i32, remark: Option<&str>) -> Self {
        Self {
            code,
            language: Cow::Borrowed(LANGUAGE_RESPONSE),
            version: VERSION_DEFAULT,
            opaque: self.opaque,
            flag: FLAG_RESPONSE,
            remark: remark.map(str::to_string),
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: self.serialize_type,
        }
    }

    fn check_ext_count(&self) -> Result<(), CommandError> {
        if self.ext_fields.len() > EXT_FIELDS_COUNT_MAX {
            return Err(CommandError::TooManyExtFields { count: self.ext_fields.len(), max: EXT_FIELDS_COUNT_MAX });
        }
        Ok(())
    }

    pub fn encode_header(&self) -> Result<Vec<u8>, CommandError> {
        self.check_ext_count()?;
        match self.serialize_type {
            SerializeType::Json => Ok(encode_json_header(self)),
            SerializeType::RocketMq => encode_binary_header(self),
        }
    }

    /// Appends the whole frame to `out`: the header is written in place (no header
    /// buffer), then the body. On error `out` is left as it was.
    pub fn encode(&self, out: &mut BytesMut) -> Result<(), CommandError> {
        out.reserve(PREFIX_BYTES + 256 + self.body.len());
        self.encode_head(out)?;
        out.extend_from_slice(&self.body);
        Ok(())
    }

    /// Appends the frame up to its body (length prefix, header): the caller writes
    /// `self.body` right behind it. A large body is then written from where it lies
    /// rather than copied into the write buffer. On error `out` is left as it was.
    pub fn encode_head(&self, out: &mut BytesMut) -> Result<(), CommandError> {
        self.check_ext_count()?;
        let start = out.len();
        out.reserve(PREFIX_BYTES + 256);
        // Patched below, once the header's length is known.
        out.put_u64(0);
        let written = match self.serialize_type {
            SerializeType::Json => write_json_header(self, (&mut *out).writer()).map_err(CommandError::JsonHeader),
            SerializeType::RocketMq => write_binary_header(self, out),
        };
        let header_len = out.len() - start - PREFIX_BYTES;
        let frame_len = PREFIX_BYTES.saturating_add(header_len).saturating_add(self.body.len());
        let checked = written.and_then(|()| {
            if header_len > HEADER_LEN_MAX_BYTES {
                return Err(FrameError::HeaderTooLong { header_len, available: HEADER_LEN_MAX_BYTES }.into());
            }
            if frame_len > FRAME_LEN_MAX_BYTES {
                return Err(FrameError::FrameTooLong { len: frame_len, max: FRAME_LEN_MAX_BYTES }.into());
            }
            Ok(())
        });
        if let Err(e) = checked {
            out.truncate(start);
            return Err(e);
        }
        // Both casts are exact: frame_len <= 16 MiB and header_len < 2^24.
        let length = ((frame_len - LENGTH_FIELD_BYTES) as i32).to_be_bytes();
        let type_and_len = ((u32::from(self.serialize_type.code()) << 24) | header_len as u32).to_be_bytes();
        out[start..start + 4].copy_from_slice(&length);
        out[start + 4..start + 8].copy_from_slice(&type_and_len);
        Ok(())
    }

    pub fn from_frame(frame: Frame) -> Result<Self, CommandError> {
        let mut cmd = match frame.serialize_type {
            SerializeType::Json => decode_json_header_bytes(&frame.header)?,
            SerializeType::RocketMq => decode_binary_header_bytes(&frame.header)?,
        };
        cmd.serialize_type = frame.serialize_type;
        cmd.body = frame.body;
        Ok(cmd)
    }

    /// Takes one command off the front of `buf` (see `frame::decode`).
    pub fn decode(buf: &mut BytesMut, limits: &FrameLimits) -> Result<Option<Self>, CommandError> {
        match frame::decode(buf, limits)? {
            Some(f) => Self::from_frame(f).map(Some),
            None => Ok(None),
        }
    }
}

/// A language name as the static entry of `LANGUAGE_NAMES` when it is one.
fn language_of(name: Cow<'_, str>) -> Cow<'static, str> {
    match LANGUAGE_NAMES.iter().find(|n| **n == name) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(name.into_owned()),
    }
}

// ---- JSON header ----

#[derive(Serialize)]
struct JsonHeaderOut<'a> {
    code: i32,
    #[serde(rename = "extFields")]
    ext_fields: &'a ExtFields,
    flag: i32,
    language: &'a str,
    opaque: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type: &'static str,
    version: i32,
}

/// A scalar as text, borrowed from the input when it is an unescaped string: numbers
/// and booleans keep their JSON spelling (`3` -> "3", `false` -> "false"), `null` is
/// absent, arrays and objects are refused (as `json::de::ScalarString`).
struct ScalarCow<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for ScalarCow<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ScalarCow<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(ScalarCow(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(ScalarCow(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object key, borrowed from the input when it has no escapes.
struct KeyCow<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for KeyCow<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyCow<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyCow(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyCow(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(KeyCow(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

fn piece<'a>(text: &'a Cow<'_, str>) -> Piece<'a> {
    match text {
        Cow::Borrowed(s) => Piece::Src(s),
        Cow::Owned(s) => Piece::Copy(s),
    }
}

struct I32Lenient(i32);

impl<'de> Deserialize<'de> for I32Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        i32_lenient(d).map(I32Lenient)
    }
}

struct OptStringLenient(Option<String>);

impl<'de> Deserialize<'de> for OptStringLenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        opt_string_lenient(d).map(OptStringLenient)
    }
}

/// Reads `extFields` (an object of scalars, or `null`) into `ExtFields` spans.
struct ExtSeed<'x>(&'x mut ExtFields);

impl<'de> DeserializeSeed<'de> for ExtSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ExtSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of scalar values")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let too_many = || de::Error::custom(format_args!("more than {EXT_FIELDS_COUNT_MAX} ext fields"));
        while let Some(KeyCow(key)) = map.next_key()? {
            // Read raw (borrowed, validated JSON), then: an unescaped string is a span
            // of the header, an escaped one is unescaped into the command's buffer
            // (serde_json would unescape into a scratch `Vec` grown per header, then a
            // `String`); anything else takes the general path.
            let raw: &'de serde_json::value::RawValue = map.next_value()?;
            let text = raw.get();
            let value = match json_string_contents(text) {
                Some(inner) if !inner.contains('\\') => ScalarCow(Some(Cow::Borrowed(inner))),
                Some(inner) if json_escapes_are_simple(inner) => {
                    let count = self.0.push_decoded_json_escaped(piece(&key), inner);
                    if count > 2 * EXT_FIELDS_COUNT_MAX && self.0.finish_decoding() > EXT_FIELDS_COUNT_MAX {
                        return Err(too_many());
                    }
                    continue;
                }
                _ => serde_json::from_str::<ScalarCow<'_>>(text).map_err(de::Error::custom)?,
            };
            let ScalarCow(Some(value)) = value else { continue };
            // Duplicates are folded only now and then: a map of at most twice the
            // bound, whatever the header repeats.
            if self.0.push_decoded(piece(&key), piece(&value)) > 2 * EXT_FIELDS_COUNT_MAX && self.0.finish_decoding() > EXT_FIELDS_COUNT_MAX {
                return Err(too_many());
            }
        }
        if self.0.finish_decoding() > EXT_FIELDS_COUNT_MAX {
            return Err(too_many());
        }
        Ok(())
    }
}

/// The text between the quotes of a raw JSON string value, `None` if it is not one.
fn json_string_contents(raw: &str) -> Option<&str> {
    raw.strip_prefix('"')?.strip_suffix('"')
}

/// Whether every escape in a (valid) JSON string's contents is one `ext::unescape_json`
/// decodes: all but `\uD800`-`\uDFFF` (surrogates, left to serde_json).
fn json_escapes_are_simple(inner: &str) -> bool {
    let b = inner.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'u') {
            let Some(hex) = inner.get(i + 2..i + 6) else { return false };
            match u32::from_str_radix(hex, 16) {
                Ok(unit) if !(0xD800..=0xDFFF).contains(&unit) => i += 6,
                _ => return false,
            }
        } else {
            i += 2;
        }
    }
    true
}

/// The top-level header object; fields as serde's derive reads them (absent ones take
/// their default, a repeated one is an error, unknown ones are skipped).
struct HeaderSeed<'x>(&'x mut RemotingCommand);

impl<'de> DeserializeSeed<'de> for HeaderSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeaderSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a remoting command header")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        const FIELDS: [&str; 7] = ["code", "language", "version", "opaque", "flag", "remark", "extFields"];
        let cmd = self.0;
        let mut seen = [false; FIELDS.len()];
        while let Some(KeyCow(key)) = map.next_key()? {
            let Some(i) = FIELDS.iter().position(|f| *f == key) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if std::mem::replace(&mut seen[i], true) {
                return Err(de::Error::duplicate_field(FIELDS[i]));
            }
            match i {
                0 => cmd.code = map.next_value::<I32Lenient>()?.0,
                1 => {
                    // A name is kept as sent; an ordinal is mapped to its name.
                    if let ScalarCow(Some(raw)) = map.next_value()? {
                        cmd.language = match raw.trim().parse::<i64>() {
                            Ok(n) => Cow::Borrowed(language_name(n).unwrap_or("OTHER")),
                            Err(_) => language_of(raw),
                        };
                    }
                }
                2 => cmd.version = map.next_value::<I32Lenient>()?.0,
                3 => cmd.opaque = map.next_value::<I32Lenient>()?.0,
                4 => cmd.flag = map.next_value::<I32Lenient>()?.0,
                5 => cmd.remark = map.next_value::<OptStringLenient>()?.0,
                _ => map.next_value_seed(ExtSeed(&mut cmd.ext_fields))?,
            }
        }
        Ok(())
    }
}

/// Parses a JSON header; the body and serialize type are left at their defaults.
pub fn decode_json_header(bytes: &[u8]) -> Result<RemotingCommand, CommandError> {
    decode_json_header_bytes(&Bytes::copy_from_slice(bytes))
}

/// Parses a JSON header whose ext fields stay spans of `src`.
fn decode_json_header_bytes(src: &Bytes) -> Result<RemotingCommand, CommandError> {
    if !super::json::starts_with_object(src) {
        return Err(CommandError::JsonHeaderNotAnObject);
    }
    let mut cmd = RemotingCommand {
        code: 0,
        language: Cow::Borrowed(LANGUAGE_DEFAULT),
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::decoding(src.clone()),
        body: Bytes::new(),
        serialize_type: SerializeType::Json,
    };
    let mut de = serde_json::Deserializer::from_slice(src);
    HeaderSeed(&mut cmd).deserialize(&mut de).map_err(CommandError::JsonHeader)?;
    de.end().map_err(CommandError::JsonHeader)?;
    Ok(cmd)
}

fn json_header_out(cmd: &RemotingCommand) -> JsonHeaderOut<'_> {
    JsonHeaderOut {
        code: cmd.code,
        ext_fields: &cmd.ext_fields,
        flag: cmd.flag,
        language: &cmd.language,
        opaque: cmd.opaque,
        remark: cmd.remark.as_deref(),
        serialize_type: "JSON",
        version: cmd.version,
    }
}

pub fn encode_json_header(cmd: &RemotingCommand) -> Vec<u8> {
    super::json::to_json(&json_header_out(cmd))
}

fn write_json_header<W: std::io::Write>(cmd: &RemotingCommand, w: W) -> Result<(), serde_json::Error> {
    serde_json::to_writer(w, &json_header_out(cmd))
}

// ---- ROCKETMQ binary header ----

fn truncated(field: &'static str, need: usize, r: &Reader<'_>) -> BinaryHeaderError {
    BinaryHeaderError::Truncated { field, need, have: r.remaining() }
}

fn read_len(r: &mut Reader<'_>, field: &'static str, wide: bool) -> Result<usize, BinaryHeaderError> {
    let len = if wide {
        i64::from(r.i32().ok_or_else(|| truncated(field, 4, r))?)
    } else {
        i64::from(r.i16().ok_or_else(|| truncated(field, 2, r))?)
    };
    usize::try_from(len).map_err(|_| BinaryHeaderError::NegativeLength { field, len })
}

fn read_bytes<'a>(r: &mut Reader<'a>, field: &'static str, len: usize) -> Result<&'a [u8], BinaryHeaderError> {
    r.take(len).ok_or_else(|| truncated(field, len, r))
}

/// Parses a ROCKETMQ binary header. Bytes after the ext fields are ignored, as Java does.
/// Text is decoded like Java's `new String(bytes, UTF_8)`: invalid sequences become U+FFFD.
pub fn decode_binary_header(bytes: &[u8]) -> Result<RemotingCommand, BinaryHeaderError> {
    decode_binary_header_bytes(&Bytes::copy_from_slice(bytes))
}

/// Parses a ROCKETMQ binary header whose (valid UTF-8) ext fields stay spans of `src`.
fn decode_binary_header_bytes(src: &Bytes) -> Result<RemotingCommand, BinaryHeaderError> {
    let mut r = Reader::new(src);
    let code = r.i16().ok_or_else(|| truncated("code", 2, &r))?;
    let language = r.i8().ok_or_else(|| truncated("language", 1, &r))?;
    let version = r.i16().ok_or_else(|| truncated("version", 2, &r))?;
    let opaque = r.i32().ok_or_else(|| truncated("opaque", 4, &r))?;
    let flag = r.i32().ok_or_else(|| truncated("flag", 4, &r))?;
    let remark_len = read_len(&mut r, "remark length", true)?;
    let remark = match remark_len {
        0 => None,
        n => Some(String::from_utf8_lossy(read_bytes(&mut r, "remark", n)?).into_owned()),
    };
    let ext_len = read_len(&mut r, "extFields length", true)?;
    let mut ext = Reader::new(read_bytes(&mut r, "extFields", ext_len)?);
    let mut ext_fields = ExtFields::decoding(src.clone());
    let too_many = BinaryHeaderError::TooManyExtFields { max: EXT_FIELDS_COUNT_MAX };
    while ext.remaining() > 0 {
        let key_len = read_len(&mut ext, "ext key length", false)?;
        let key = read_bytes(&mut ext, "ext key", key_len)?;
        let val_len = read_len(&mut ext, "ext value length", true)?;
        let val = read_bytes(&mut ext, "ext value", val_len)?;
        let (key, val) = (String::from_utf8_lossy(key), String::from_utf8_lossy(val));
        // See `ExtSeed::visit_map` for the folding of duplicates.
        if ext_fields.push_decoded(piece(&key), piece(&val)) > 2 * EXT_FIELDS_COUNT_MAX && ext_fields.finish_decoding() > EXT_FIELDS_COUNT_MAX {
            return Err(too_many);
        }
    }
    if ext_fields.finish_decoding() > EXT_FIELDS_COUNT_MAX {
        return Err(too_many);
    }
    Ok(RemotingCommand {
        code: i32::from(code),
        language: Cow::Borrowed(language_name(i64::from(language)).unwrap_or("OTHER")),
        version: i32::from(version),
        opaque,
        flag,
        remark,
        ext_fields,
        body: Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

fn narrow<T: TryFrom<i64>>(field: &'static str, value: i64, bits: u8) -> Result<T, CommandError> {
    T::try_from(value).map_err(|_| CommandError::FieldOutOfRange { field, value, bits })
}

fn len_i32(field: &'static str, len: usize) -> Result<i32, CommandError> {
    narrow(field, i64::try_from(len).unwrap_or(i64::MAX), 32)
}

pub fn encode_binary_header(cmd: &RemotingCommand) -> Result<Vec<u8>, CommandError> {
    let mut out = Vec::new();
    write_binary_header(cmd, &mut out)?;
    Ok(out)
}

/// Appends the binary header to `out`; on error what it appended is garbage (callers
/// truncate).
fn write_binary_header<B: BufMut>(cmd: &RemotingCommand, out: &mut B) -> Result<(), CommandError> {
    let code: i16 = narrow("code", i64::from(cmd.code), 16)?;
    let version: i16 = narrow("version", i64::from(cmd.version), 16)?;
    let remark = cmd.remark.as_deref().unwrap_or("").as_bytes();
    let mut ext_len = 0usize;
    for (k, v) in cmd.ext_fields.iter() {
        narrow::<i16>("ext key length", i64::try_from(k.len()).unwrap_or(i64::MAX), 16)?;
        len_i32("ext value length", v.len())?;
        ext_len = ext_len.saturating_add(2 + k.len() + 4 + v.len());
    }
    let ext_len = len_i32("extFields length", ext_len)?;
    let remark_len = len_i32("remark length", remark.len())?;
    out.put_i16(code);
    out.put_u8(language_code(&cmd.language));
    out.put_i16(version);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    out.put_i32(remark_len);
    out.put_slice(remark);
    out.put_i32(ext_len);
    for (k, v) in cmd.ext_fields.iter() {
        // Both lengths were checked above.
        out.put_i16(k.len() as i16);
        out.put_slice(k.as_bytes());
        out.put_i32(v.len() as i32);
        out.put_slice(v.as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cmd(code: i32, opaque: i32, flag: i32, ext: &[(&str, &str)]) -> RemotingCommand {
        RemotingCommand {
            code,
            language: "JAVA".into(),
            version: 0,
            opaque,
            flag,
            ext_fields: ext.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..RemotingCommand::default()
        }
    }

    /// `expected`: the command, or a fragment of the error's message.
    fn check(input: &str, expected: Result<RemotingCommand, &str>) {
        match (decode_json_header(input.as_bytes()), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "decoding {input}"),
            (Err(e), Err(fragment)) => assert!(e.to_string().contains(fragment), "decoding {input}: {e}"),
            (got, want) => panic!("decoding {input}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn json_header_dialects() {
        check(
            r#"{"code":10,"language":"JAVA","version":0,"opaque":1,"flag":0,"extFields":{"a":"b"},"serializeTypeCurrentRPC":"JSON"}"#,
            Ok(cmd(10, 1, 0, &[("a", "b")])),
        );
        // No serializeTypeCurrentRPC, numeric and boolean ext values, unknown keys.
        check(
            r#"{"code":310,"opaque":7,"flag":0,"extFields":{"e":3,"k":false,"g":1700000000000,"x":1.5,"n":null},"junk":[1,{"a":2}]}"#,
            Ok(cmd(310, 7, 0, &[("e", "3"), ("k", "false"), ("g", "1700000000000"), ("x", "1.5")])),
        );
        // Language as ordinal or unknown name, numbers as strings, null remark.
        check(
            r#"{"code":"34","language":9,"opaque":" 5 ","remark":null}"#,
            Ok(RemotingCommand { language: "GO".into(), ..cmd(34, 5, 0, &[]) }),
        );
        check(r#"{"language":99}"#, Ok(RemotingCommand { language: "OTHER".into(), ..cmd(0, 0, 0, &[]) }));
        check(r#"{"language":"NODE"}"#, Ok(RemotingCommand { language: "NODE".into(), ..cmd(0, 0, 0, &[]) }));
        check(
            r#"{"code":0,"flag":1,"remark":"boom","extFields":null}"#,
            Ok(RemotingCommand { remark: Some("boom".into()), ..cmd(0, 0, 1, &[]) }),
        );
        check(r#"{}"#, Ok(cmd(0, 0, 0, &[])));
        // Escaped values (unescaped in place), a surrogate pair (serde_json's path), an
        // escaped key, and a repeated key (the last one wins).
        check(
            r#"{"extFields":{"i":"a\u0001b\u0002\"\\\/\n\t\u00e9","s":"\ud83d\ude00!","k\u0041":"v","d":"1","d":"2"}}"#,
            Ok(cmd(0, 0, 0, &[("i", "a\u{1}b\u{2}\"\\/\n\t\u{e9}"), ("s", "\u{1F600}!"), ("kA", "v"), ("d", "2")])),
        );
        check(r#"{"code":1,"code":2}"#, Err("duplicate field"));
        check(r#"{"code":4294967296}"#, Err("bad JSON header"));
        check(r#"{"extFields":{"a":[1]}}"#, Err("bad JSON header"));
        check(r#"{"extFields":[]}"#, Err("bad JSON header"));
        check(r#"[]"#, Err("bad JSON header"));
        check(r#"{"code":1"#, Err("bad JSON header"));
        check("", Err("bad JSON header"));
        check("{} x", Err("bad JSON header"));
    }

    #[test]
    fn json_header_is_fastjson_shaped() {
        let c = cmd(10, 3, 2, &[("topic", "T"), ("queueId", "1")]);
        let text = String::from_utf8(encode_json_header(&c)).unwrap();
        assert_eq!(
            text,
            r#"{"code":10,"extFields":{"queueId":"1","topic":"T"},"flag":2,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":0}"#
        );
    }

    fn bin(code: i16, lang: u8, remark: &[u8], ext: &[u8], ext_len: i32) -> Vec<u8> {
        let mut v = code.to_be_bytes().to_vec();
        v.push(lang);
        v.extend_from_slice(&7i16.to_be_bytes());
        v.extend_from_slice(&9i32.to_be_bytes());
        v.extend_from_slice(&1i32.to_be_bytes());
        v.extend_from_slice(&(remark.len() as i32).to_be_bytes());
        v.extend_from_slice(remark);
        v.extend_from_slice(&ext_len.to_be_bytes());
        v.extend_from_slice(ext);
        v
    }

    fn check_bin(input: &[u8], expected: Result<RemotingCommand, BinaryHeaderError>) {
        assert_eq!(decode_binary_header(input), expected, "decoding {input:?}");
    }

    #[test]
    fn binary_header_cases() {
        use BinaryHeaderError::*;
        let base = RemotingCommand { version: 7, serialize_type: SerializeType::RocketMq, ..cmd(11, 9, 1, &[]) };
        check_bin(&bin(11, 0, b"", b"", 0), Ok(base.clone()));
        check_bin(
            &bin(11, 12, b"hi", b"", 0),
            Ok(RemotingCommand { language: "RUST".into(), remark: Some("hi".into()), ..base.clone() }),
        );
        check_bin(&bin(11, 200, b"", b"", 0), Ok(RemotingCommand { language: "OTHER".into(), ..base.clone() }));
        let entry = [&[0u8, 1, b'k'][..], &[0, 0, 0, 2, b'v', b'w']].concat();
        check_bin(
            &bin(11, 0, b"", &entry, 9),
            Ok(RemotingCommand { ext_fields: [("k".into(), "vw".into())].into(), ..base.clone() }),
        );
        // Trailing bytes after the ext region are ignored.
        check_bin(
            &[bin(11, 0, b"", &entry, 9), vec![1, 2, 3]].concat(),
            Ok(RemotingCommand { ext_fields: [("k".into(), "vw".into())].into(), ..base.clone() }),
        );
        check_bin(&[], Err(Truncated { field: "code", need: 2, have: 0 }));
        check_bin(&[0, 1, 0, 0], Err(Truncated { field: "version", need: 2, have: 1 }));
        check_bin(&bin(11, 0, b"", b"", 0)[..20], Err(Truncated { field: "extFields length", need: 4, have: 3 }));
        let mut neg_remark = bin(11, 0, b"", b"", 0);
        neg_remark[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        check_bin(&neg_remark, Err(NegativeLength { field: "remark length", len: -1 }));
        let mut long_remark = bin(11, 0, b"", b"", 0);
        long_remark[13..17].copy_from_slice(&i32::MAX.to_be_bytes());
        check_bin(&long_remark, Err(Truncated { field: "remark", need: i32::MAX as usize, have: 4 }));
        check_bin(&bin(11, 0, b"", b"", -5), Err(NegativeLength { field: "extFields length", len: -5 }));
        check_bin(&bin(11, 0, b"", &entry, 10), Err(Truncated { field: "extFields", need: 10, have: 9 }));
        // An entry that straddles the end of the ext region.
        check_bin(&bin(11, 0, b"", &entry, 8), Err(Truncated { field: "ext value", need: 2, have: 1 }));
        check_bin(&bin(11, 0, b"", &[0xFF, 0xFF], 2), Err(NegativeLength { field: "ext key length", len: -1 }));
        check_bin(
            &bin(11, 0, b"", &[0, 0, 0xFF, 0xFF, 0xFF, 0xFE], 6),
            Err(NegativeLength { field: "ext value length", len: -2 }),
        );
        check_bin(&bin(11, 0, b"", &[0, 0, 0], 3), Err(Truncated { field: "ext value length", need: 4, have: 1 }));
        check_bin(&bin(11, 0, &[0xFF], b"", 0), Ok(RemotingCommand { remark: Some("\u{FFFD}".into()), ..base }));
    }

    #[test]
    fn binary_encode_refuses_out_of_range() {
        let c = RemotingCommand { serialize_type: SerializeType::RocketMq, ..cmd(40000, 0, 0, &[]) };
        assert!(matches!(
            c.encode_header(),
            Err(CommandError::FieldOutOfRange { field: "code", value: 40000, bits: 16 })
        ));
        let c = RemotingCommand { version: -40000, serialize_type: SerializeType::RocketMq, ..cmd(1, 0, 0, &[]) };
        assert!(matches!(c.encode_header(), Err(CommandError::FieldOutOfRange { field: "version", .. })));
        let key = "k".repeat(40000);
        let c = cmd(1, 0, 0, &[(&key, "v")]).with_serialize_type(SerializeType::RocketMq);
        assert!(matches!(c.encode_header(), Err(CommandError::FieldOutOfRange { field: "ext key length", .. })));
    }

    #[test]
    fn too_many_ext_fields() {
        let mut c = cmd(1, 0, 0, &[]);
        for i in 0..=EXT_FIELDS_COUNT_MAX {
            c.ext_fields.insert(i.to_string(), String::new());
        }
        assert!(matches!(c.encode_header(), Err(CommandError::TooManyExtFields { .. })));
        let json = serde_json::to_vec(&serde_json::json!({ "extFields": c.ext_fields })).unwrap();
        assert!(decode_json_header(&json).is_err());
        let bin = encode_binary_header(&c).unwrap();
        assert_eq!(decode_binary_header(&bin), Err(BinaryHeaderError::TooManyExtFields { max: EXT_FIELDS_COUNT_MAX }));
    }

    #[test]
    fn responses_follow_requests() {
        let req = cmd(10, 42, 0, &[]).with_serialize_type(SerializeType::RocketMq).oneway();
        assert!(req.is_oneway() && !req.is_response());
        let resp = req.create_response(17, Some("no topic"));
        assert!(resp.is_response() && !resp.is_oneway());
        assert_eq!((resp.opaque, resp.code, resp.serialize_type), (42, 17, SerializeType::RocketMq));
        assert_eq!(resp.remark.as_deref(), Some("no topic"));
        let req = req.with_ext("topic", "T");
        assert_eq!(req.ext("topic"), Some("T"));
        assert_eq!(req.ext("nope"), None);
    }

    #[test]
    fn full_frame_roundtrip_and_errors() {
        let c = cmd(10, 5, 0, &[("a", "1")]).with_body(&b"payload"[..]);
        let mut buf = BytesMut::new();
        c.encode(&mut buf).unwrap();
        c.clone().with_serialize_type(SerializeType::RocketMq).encode(&mut buf).unwrap();
        let limits = FrameLimits::default();
        assert_eq!(RemotingCommand::decode(&mut buf, &limits).unwrap(), Some(c.clone()));
        assert_eq!(
            RemotingCommand::decode(&mut buf, &limits).unwrap(),
            Some(c.with_serialize_type(SerializeType::RocketMq))
        );
        assert_eq!(RemotingCommand::decode(&mut buf, &limits).unwrap(), None);
        // A broken header consumes its frame and is not fatal; a broken frame is.
        let mut buf = BytesMut::new();
        frame::encode(SerializeType::Json, b"{oops", b"", &mut buf).unwrap();
        let err = RemotingCommand::decode(&mut buf, &limits).unwrap_err();
        assert!(!err.is_fatal() && buf.is_empty());
        let mut buf = BytesMut::from(&[0u8, 0, 0, 1][..]);
        assert!(RemotingCommand::decode(&mut buf, &limits).unwrap_err().is_fatal());
    }

    fn arb_command(binary: bool) -> impl Strategy<Value = RemotingCommand> {
        let names = prop::sample::select(super::super::codes::LANGUAGE_NAMES.to_vec());
        (
            (any::<i16>(), names, any::<i16>(), any::<i32>(), any::<i32>()),
            proptest::option::of(".{1,20}"),
            proptest::collection::btree_map(".{0,10}", ".{0,20}", 0..6),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(move |((code, language, version, opaque, flag), remark, ext_fields, body)| {
                RemotingCommand {
                    code: i32::from(code),
                    language: Cow::Borrowed(language),
                    version: i32::from(version),
                    opaque,
                    flag,
                    remark,
                    ext_fields: ext_fields.into_iter().collect(),
                    body: Bytes::from(body),
                    serialize_type: if binary { SerializeType::RocketMq } else { SerializeType::Json },
                }
            })
    }

    proptest! {
        #[test]
        fn json_roundtrip(c in arb_command(false)) {
            let mut buf = BytesMut::new();
            c.encode(&mut buf).unwrap();
            prop_assert_eq!(RemotingCommand::decode(&mut buf, &FrameLimits::default()).unwrap(), Some(c));
        }

        #[test]
        fn binary_roundtrip(c in arb_command(true)) {
            let mut buf = BytesMut::new();
            c.encode(&mut buf).unwrap();
            prop_assert_eq!(RemotingCommand::decode(&mut buf, &FrameLimits::default()).unwrap(), Some(c));
        }

        #[test]
        fn header_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_binary_header(&bytes);
            let _ = decode_json_header(&bytes);
        }
    }
}
