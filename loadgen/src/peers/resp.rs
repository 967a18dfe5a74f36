//! A minimal RESP2 codec (the Redis wire protocol), enough to drive Redis Streams: an
//! encoder for commands (arrays of bulk strings) and a decoder for replies that borrows
//! from the read buffer (no copies of payloads).
//!
//! Invariants: `decode` never panics and never reads past its slice; on a frame that is
//! not complete yet it returns `Ok(None)` and consumes nothing; it refuses bulk strings
//! over `BULK_BYTES_MAX`, arrays over `ARRAY_LEN_MAX` elements, lines (simple strings,
//! errors, integers, lengths) over `LINE_BYTES_MAX` and nesting over `DEPTH_MAX`, so a
//! bad or hostile peer cannot make it allocate without bound.

use thiserror::Error;

/// Largest bulk string accepted (a message payload is at most
/// `redis::MESSAGE_BYTES_MAX`, 4 MiB; Redis' own default limit is 512 MiB).
pub const BULK_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Largest array accepted (an XREADGROUP reply holds at most COUNT entries per stream).
pub const ARRAY_LEN_MAX: usize = 1 << 20;
/// Longest line accepted: simple strings, errors, integers and length headers.
pub const LINE_BYTES_MAX: usize = 64 * 1024;
/// Deepest nesting accepted (an XREADGROUP reply is 4 levels deep).
pub const DEPTH_MAX: usize = 8;
/// Capacity reserved up front for an array, whatever length it claims.
const ARRAY_PREALLOC_MAX: usize = 1024;

/// One decoded reply. Strings borrow from the buffer given to `decode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    /// `+OK\r\n`
    Simple(&'a [u8]),
    /// `-ERR message\r\n`
    Error(&'a [u8]),
    /// `:42\r\n`
    Integer(i64),
    /// `$3\r\nabc\r\n`
    Bulk(&'a [u8]),
    /// `$-1\r\n`
    NilBulk,
    /// `*2\r\n...`
    Array(Vec<Value<'a>>),
    /// `*-1\r\n` (e.g. XREADGROUP BLOCK that timed out)
    NilArray,
}

impl Value<'_> {
    /// Short human-readable form for error messages (at most ~120 characters).
    pub fn describe(&self) -> String {
        let text = match self {
            Value::Simple(s) => format!("+{}", String::from_utf8_lossy(s)),
            Value::Error(s) => format!("-{}", String::from_utf8_lossy(s)),
            Value::Integer(i) => format!(":{i}"),
            Value::Bulk(b) => format!("${} bytes", b.len()),
            Value::NilBulk => "nil bulk".to_string(),
            Value::Array(a) => format!("array of {}", a.len()),
            Value::NilArray => "nil array".to_string(),
        };
        text.chars().take(120).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RespError {
    #[error("unknown RESP type byte 0x{0:02x}")]
    UnknownType(u8),
    #[error("malformed number or length in a RESP header")]
    BadNumber,
    #[error("bulk string of {0} bytes exceeds BULK_BYTES_MAX ({BULK_BYTES_MAX})")]
    BulkTooLarge(i64),
    #[error("array of {0} elements exceeds ARRAY_LEN_MAX ({ARRAY_LEN_MAX})")]
    ArrayTooLarge(i64),
    #[error("RESP line longer than LINE_BYTES_MAX ({LINE_BYTES_MAX}) bytes")]
    LineTooLong,
    #[error("bulk string not followed by CRLF")]
    MissingCrlf,
    #[error("RESP nesting deeper than DEPTH_MAX ({DEPTH_MAX})")]
    TooDeep,
}

/// Appends `args` as one command (an array of bulk strings).
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_header(out, b'*', args.len());
    for arg in args {
        push_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// Decodes one reply from the start of `buf`: `Ok(Some((value, bytes used)))`, or
/// `Ok(None)` when `buf` holds only part of a frame (read more and call again).
pub fn decode(buf: &[u8]) -> Result<Option<(Value<'_>, usize)>, RespError> {
    decode_at(buf, 0, 0)
}

fn decode_at(buf: &[u8], pos: usize, depth: usize) -> Result<Option<(Value<'_>, usize)>, RespError> {
    if depth > DEPTH_MAX {
        return Err(RespError::TooDeep);
    }
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(kind, b'+' | b'-' | b':' | b'$' | b'*') {
        return Err(RespError::UnknownType(kind));
    }
    let Some((line, after)) = line(buf, pos + 1)? else {
        return Ok(None);
    };
    match kind {
        b'+' => Ok(Some((Value::Simple(line), after))),
        b'-' => Ok(Some((Value::Error(line), after))),
        b':' => Ok(Some((Value::Integer(parse_i64(line)?), after))),
        b'$' => {
            let len = parse_i64(line)?;
            if len == -1 {
                return Ok(Some((Value::NilBulk, after)));
            }
            if len < 0 {
                return Err(RespError::BadNumber);
            }
            if len as u64 > BULK_BYTES_MAX as u64 {
                return Err(RespError::BulkTooLarge(len));
            }
            let len = len as usize;
            let end = after + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(RespError::MissingCrlf);
            }
            Ok(Some((Value::Bulk(&buf[after..end]), end + 2)))
        }
        b'*' => {
            let len = parse_i64(line)?;
            if len == -1 {
                return Ok(Some((Value::NilArray, after)));
            }
            if len < 0 {
                return Err(RespError::BadNumber);
            }
            if len as u64 > ARRAY_LEN_MAX as u64 {
                return Err(RespError::ArrayTooLarge(len));
            }
            let len = len as usize;
            let mut items = Vec::with_capacity(len.min(ARRAY_PREALLOC_MAX));
            let mut at = after;
            for _ in 0..len {
                match decode_at(buf, at, depth + 1)? {
                    Some((v, next)) => {
                        items.push(v);
                        at = next;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Value::Array(items), at)))
        }
        other => Err(RespError::UnknownType(other)),
    }
}

/// The line starting at `pos` without its CRLF, and the position after the CRLF.
fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, RespError> {
    let rest = buf.get(pos..).unwrap_or(&[]);
    let window = &rest[..rest.len().min(LINE_BYTES_MAX + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&rest[..i], pos + i + 2))),
        None if window.len() >= LINE_BYTES_MAX + 2 => Err(RespError::LineTooLong),
        None => Ok(None),
    }
}

fn parse_i64(s: &[u8]) -> Result<i64, RespError> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(RespError::BadNumber);
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(RespError::BadNumber);
        }
        n = n.checked_mul(10).and_then(|n| n.checked_add(i64::from(d - b'0'))).ok_or(RespError::BadNumber)?;
    }
    Ok(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &[u8], expected: Result<Option<(Value<'_>, usize)>, RespError>) {
        assert_eq!(decode(input), expected, "input {:?}", String::from_utf8_lossy(input));
    }

    fn done(v: Value<'_>, used: usize) -> Result<Option<(Value<'_>, usize)>, RespError> {
        Ok(Some((v, used)))
    }

    #[test]
    fn decodes_every_type() {
        check(b"+OK\r\n", done(Value::Simple(b"OK"), 5));
        check(b"-ERR no such key\r\n", done(Value::Error(b"ERR no such key"), 18));
        check(b":42\r\n", done(Value::Integer(42), 5));
        check(b":-7\r\n", done(Value::Integer(-7), 5));
        check(b"$3\r\nabc\r\n", done(Value::Bulk(b"abc"), 9));
        check(b"$0\r\n\r\n", done(Value::Bulk(b""), 6));
        check(b"$4\r\na\r\nb\r\n", done(Value::Bulk(b"a\r\nb"), 10));
        check(b"$-1\r\n", done(Value::NilBulk, 5));
        check(b"*-1\r\n", done(Value::NilArray, 5));
        check(b"*0\r\n", done(Value::Array(vec![]), 4));
        // Trailing bytes belong to the next frame and are not consumed.
        check(b"+OK\r\n+PONG\r\n", done(Value::Simple(b"OK"), 5));
    }

    #[test]
    fn decodes_nested_arrays() {
        // An XREADGROUP reply: [[stream, [[id, [field, value]]]]].
        let input = b"*1\r\n*2\r\n$8\r\nstream-0\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nb\r\n$2\r\nhi\r\n";
        check(
            input,
            done(
                Value::Array(vec![Value::Array(vec![
                    Value::Bulk(b"stream-0"),
                    Value::Array(vec![Value::Array(vec![
                        Value::Bulk(b"1-0"),
                        Value::Array(vec![Value::Bulk(b"b"), Value::Bulk(b"hi")]),
                    ])]),
                ])]),
                input.len(),
            ),
        );
        check(
            b"*3\r\n:1\r\n$-1\r\n*-1\r\n",
            done(Value::Array(vec![Value::Integer(1), Value::NilBulk, Value::NilArray]), 18),
        );
        let deep = b"*1\r\n".repeat(DEPTH_MAX + 2);
        check(&deep, Err(RespError::TooDeep));
    }

    #[test]
    fn partial_frames_need_more_bytes() {
        let full = b"*2\r\n$3\r\nabc\r\n:5\r\n";
        for cut in 0..full.len() {
            check(&full[..cut], Ok(None));
        }
        check(full, done(Value::Array(vec![Value::Bulk(b"abc"), Value::Integer(5)]), full.len()));
        check(b"+OK\r", Ok(None));
        check(b"$3\r\nabc\r", Ok(None));
    }

    #[test]
    fn refuses_bad_input() {
        check(b"?x\r\n", Err(RespError::UnknownType(b'?')));
        check(b"\r\n", Err(RespError::UnknownType(b'\r')));
        check(b"x", Err(RespError::UnknownType(b'x')));
        check(b":\r\n", Err(RespError::BadNumber));
        check(b":12a\r\n", Err(RespError::BadNumber));
        check(b":-\r\n", Err(RespError::BadNumber));
        check(b":99999999999999999999\r\n", Err(RespError::BadNumber));
        check(b"$-2\r\n", Err(RespError::BadNumber));
        check(b"*-5\r\n", Err(RespError::BadNumber));
        check(b"$3\r\nabcde\r\n", Err(RespError::MissingCrlf));
        check(b"$99999999999\r\n", Err(RespError::BulkTooLarge(99_999_999_999)));
        check(
            format!("${}\r\n", BULK_BYTES_MAX + 1).as_bytes(),
            Err(RespError::BulkTooLarge(BULK_BYTES_MAX as i64 + 1)),
        );
        check(b"*9999999\r\n", Err(RespError::ArrayTooLarge(9_999_999)));
        // A huge claimed array that is then cut short allocates little and waits.
        check(b"*1000000\r\n:1\r\n", Ok(None));
        let long_line = [b"+".as_slice(), &vec![b'a'; LINE_BYTES_MAX + 2]].concat();
        check(&long_line, Err(RespError::LineTooLong));
        let max_line = [b"+".as_slice(), &vec![b'a'; LINE_BYTES_MAX], b"\r\n"].concat();
        check(&max_line, done(Value::Simple(&max_line[1..LINE_BYTES_MAX + 1]), LINE_BYTES_MAX + 3));
    }

    proptest::proptest! {
        /// loadgen is a binary crate, so this stands in for a cargo-fuzz target: any
        /// bytes, and any cut of a valid reply with a byte changed, decode or fail, and a
        /// decoded value never claims more bytes than it was given.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), at in 0usize..64, flip in 1u8..) {
            if let Ok(Some((_, used))) = decode(&bytes) {
                proptest::prop_assert!(used <= bytes.len());
            }
            let mut reply = b"*3\r\n$3\r\nabc\r\n:-42\r\n*2\r\n+OK\r\n$-1\r\n".to_vec();
            let at = at % reply.len();
            reply[at] ^= flip;
            for cut in 0..=reply.len() {
                if let Ok(Some((_, used))) = decode(&reply[..cut]) {
                    proptest::prop_assert!(used <= cut);
                }
            }
        }
    }

    #[test]
    fn encodes_commands_that_decode_back() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"XADD", b"stream-0", b"*", b"b", b"\x00\r\n"]);
        assert_eq!(out, b"*5\r\n$4\r\nXADD\r\n$8\r\nstream-0\r\n$1\r\n*\r\n$1\r\nb\r\n$3\r\n\x00\r\n\r\n".to_vec());
        let expected =
            Value::Array([&b"XADD"[..], b"stream-0", b"*", b"b", b"\x00\r\n"].iter().map(|a| Value::Bulk(a)).collect());
        check(&out, done(expected, out.len()));
        let mut empty = Vec::new();
        encode_command(&mut empty, &[]);
        assert_eq!(empty, b"*0\r\n");
        let mut big = Vec::new();
        encode_command(&mut big, &[&vec![b'x'; 1234]]);
        assert!(big.starts_with(b"*1\r\n$1234\r\n"));
    }
}
