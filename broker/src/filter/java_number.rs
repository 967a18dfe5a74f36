//! Java's number conversions as Apache RocketMQ's SQL92 evaluation calls them on
//! property strings (`ComparisonExpression.__compare` and `evaluate`):
//! `Integer.valueOf(String)`, `Long.valueOf(String)`, `Double.valueOf(String)`, and
//! `Double.compareTo` / `Double.equals`.
//!
//! Invariants: every function is total (`None` where Java throws
//! `NumberFormatException`) and never panics; work is linear in the input.
//! Deviation: Java's `Integer.parseInt`/`Long.parseLong` also accept non-ASCII Unicode
//! decimal digits (`Character.digit`); only ASCII digits are accepted here.

use std::cmp::Ordering;

/// `Integer.valueOf(s)`: an optional sign, then ASCII digits, within `i32`. No
/// whitespace is trimmed (Java does not either).
pub(crate) fn parse_int(s: &str) -> Option<i32> {
    parse_long(s).and_then(|value| i32::try_from(value).ok())
}

/// `Long.valueOf(s)`: an optional sign, then ASCII digits, within `i64`.
pub(crate) fn parse_long(s: &str) -> Option<i64> {
    let bytes = s.as_bytes();
    let (negative, digits) = match bytes.first()? {
        b'-' => (true, &bytes[1..]),
        b'+' => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(b - b'0');
        // Accumulating on the value's own side of zero reaches i64::MIN without overflow.
        value = value.checked_mul(10)?;
        value = if negative { value.checked_sub(digit)? } else { value.checked_add(digit)? };
    }
    Some(value)
}

/// `Double.valueOf(s)` (`FloatingDecimal.readJavaFormatString`): trimmed of chars
/// `<= ' '`; an optional sign; then `NaN`, `Infinity`, a hexadecimal form
/// `0x<hex>[.<hex>]p<exp>`, or `digits[.digits][e[+-]digits]`; an optional final
/// `f`/`F`/`d`/`D`. The decimal value is correctly rounded, as Java's is.
pub(crate) fn parse_double(s: &str) -> Option<f64> {
    let trimmed = s.trim_matches(|c: char| c <= ' ');
    let (negative, rest) = match trimmed.as_bytes().first()? {
        b'-' => (true, &trimmed[1..]),
        b'+' => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let signed = |value: f64| if negative { -value } else { value };
    // Java tests `NaN` and `Infinity` case-sensitively and only as the whole rest.
    if rest.starts_with('N') {
        return (rest == "NaN").then_some(f64::NAN);
    }
    if rest.starts_with('I') {
        return (rest == "Infinity").then(|| signed(f64::INFINITY));
    }
    let bytes = rest.as_bytes();
    if bytes.len() > 1 && bytes[0] == b'0' && matches!(bytes[1], b'x' | b'X') {
        return parse_hex(&bytes[2..]).map(signed);
    }
    let digits_end = |from: usize| from + bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let int_end = digits_end(0);
    let mut end = int_end;
    let mut digits = int_end;
    if bytes.get(end) == Some(&b'.') {
        end = digits_end(end + 1);
        digits += end - int_end - 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut at = end + 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        end = digits_end(at);
        if end == at {
            return None; // an exponent needs digits
        }
    }
    match bytes.len() - end {
        0 => {}
        1 if matches!(bytes[end], b'f' | b'F' | b'd' | b'D') => {}
        _ => return None,
    }
    // The text is now in a form Rust's correctly rounding parser accepts as is.
    rest[..end].parse::<f64>().ok().map(signed)
}

/// Java's hexadecimal floating-point form after `0x`: `hex+[.]` or `hex*.hex+`, then
/// `p`/`P`, an optional sign, decimal digits, and an optional `f`/`F`/`d`/`D`.
fn parse_hex(bytes: &[u8]) -> Option<f64> {
    let hex_end = |from: usize| from + bytes[from..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let int_end = hex_end(0);
    let (frac_start, frac_end) = if bytes.get(int_end) == Some(&b'.') {
        (int_end + 1, hex_end(int_end + 1))
    } else {
        (int_end, int_end)
    };
    if int_end == 0 && frac_end == frac_start {
        return None;
    }
    if !matches!(bytes.get(frac_end), Some(b'p' | b'P')) {
        return None;
    }
    let mut at = frac_end + 1;
    let exponent_negative = match bytes.get(at) {
        Some(b'-') => {
            at += 1;
            true
        }
        Some(b'+') => {
            at += 1;
            false
        }
        _ => false,
    };
    let exponent_start = at;
    // Saturates: Java answers ±infinity or ±0 for an exponent beyond int's range, and any
    // exponent past ±2^20 already lands there for a significand bounded by the text.
    let mut exponent: i64 = 0;
    while let Some(b) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
        exponent = (exponent * 10 + i64::from(b - b'0')).min(1 << 20);
        at += 1;
    }
    if at == exponent_start {
        return None;
    }
    match bytes.len() - at {
        0 => {}
        1 if matches!(bytes[at], b'f' | b'F' | b'd' | b'D') => {}
        _ => return None,
    }
    if exponent_negative {
        exponent = -exponent;
    }
    // Significand: the first 16 significant hex digits exactly (64 bits), the rest only as
    // a sticky bit for rounding and a power of 16.
    let digits = bytes[..int_end].iter().chain(&bytes[frac_start..frac_end]);
    let mut significand: u64 = 0;
    let mut kept = 0usize;
    let mut dropped = 0i64;
    let mut sticky = false;
    for &b in digits {
        let value = hex_value(b);
        if kept == 0 && value == 0 {
            continue; // leading zero
        }
        if kept < 16 {
            significand = (significand << 4) | u64::from(value);
            kept += 1;
        } else {
            dropped += 1;
            sticky |= value != 0;
        }
    }
    let frac_digits = (frac_end - frac_start) as i64;
    Some(scale_rounded(significand, exponent + 4 * (dropped - frac_digits), sticky))
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// `significand * 2^exponent` (plus less than one unit when `sticky`), rounded once to
/// the nearest double, ties to even, subnormals included.
fn scale_rounded(significand: u64, exponent: i64, sticky: bool) -> f64 {
    if significand == 0 {
        return 0.0;
    }
    let bits = i64::from(64 - significand.leading_zeros());
    let top = exponent + bits - 1; // the exponent of the leading bit
    if top > 1023 {
        return f64::INFINITY;
    }
    // Bits a double holds below and including `top`: 53, fewer in the subnormal range.
    let precision = if top >= -1022 { 53 } else { top + 1075 };
    if precision < 0 {
        return 0.0; // below half the smallest subnormal
    }
    if precision == 0 {
        // In [2^-1075, 2^-1074): exactly half the smallest subnormal ties to even (zero).
        let exactly_half = significand.is_power_of_two() && !sticky;
        return if exactly_half { 0.0 } else { f64::from_bits(1) };
    }
    let shift = bits - precision;
    let (kept, exponent) = if shift <= 0 {
        (significand, exponent)
    } else {
        // 1 <= shift <= 63: precision >= 1 and bits <= 64.
        let shift = shift as u32;
        let dropped = significand & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        let kept = significand >> shift;
        let round_up = dropped > half || (dropped == half && (sticky || kept & 1 == 1));
        (kept + u64::from(round_up), exponent + i64::from(shift))
    };
    // `kept` <= 2^53 converts exactly; scaling by powers of two is then exact (or
    // overflows to infinity, which is the right answer).
    scale(kept as f64, exponent)
}

/// `value * 2^exponent` by exact power-of-two steps.
fn scale(mut value: f64, mut exponent: i64) -> f64 {
    let power = |e: i64| f64::from_bits(((e + 1023) as u64) << 52); // for -1022 <= e <= 1023
    while exponent > 1000 {
        value *= power(1000);
        exponent -= 1000;
    }
    while exponent < -1000 {
        value *= power(-1000);
        exponent += 1000;
    }
    value * power(exponent)
}

/// `Double.compareTo`: numeric order, except that every NaN equals NaN and is above
/// everything, and -0.0 is below 0.0.
pub(crate) fn compare_double(a: f64, b: f64) -> Ordering {
    if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else {
        (canonical_bits(a) as i64).cmp(&(canonical_bits(b) as i64))
    }
}

/// `Double.equals`: equal canonical bits (NaN equals NaN; 0.0 differs from -0.0).
pub(crate) fn equals_double(a: f64, b: f64) -> bool {
    canonical_bits(a) == canonical_bits(b)
}

/// `Double.doubleToLongBits`: one bit pattern for every NaN.
fn canonical_bits(value: f64) -> u64 {
    if value.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        value.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_java_value_of() {
        for (text, long, int) in [
            ("0", Some(0), Some(0)),
            ("-0", Some(0), Some(0)),
            ("+7", Some(7), Some(7)),
            ("007", Some(7), Some(7)),
            ("2147483647", Some(2147483647), Some(i32::MAX)),
            ("2147483648", Some(2147483648), None),
            ("-2147483648", Some(-2147483648), Some(i32::MIN)),
            ("9223372036854775807", Some(i64::MAX), None),
            ("-9223372036854775808", Some(i64::MIN), None),
            ("9223372036854775808", None, None),
            ("", None, None),
            ("-", None, None),
            ("+", None, None),
            (" 3", None, None),
            ("3 ", None, None),
            ("3.0", None, None),
            ("1e3", None, None),
            ("0x10", None, None),
            ("--1", None, None),
            ("٣", None, None), // Java accepts Arabic-Indic digits; see the module header
        ] {
            assert_eq!(parse_long(text), long, "Long.valueOf({text:?})");
            assert_eq!(parse_int(text), int, "Integer.valueOf({text:?})");
        }
    }

    #[test]
    fn doubles_follow_java_value_of() {
        for (text, expected) in [
            ("3.14", Some(3.14)),
            ("  3.14\t\n", Some(3.14)),
            ("\u{1}3\u{1f}", Some(3.0)),
            ("-2", Some(-2.0)),
            ("+2", Some(2.0)),
            ("5.", Some(5.0)),
            (".5", Some(0.5)),
            ("1.e5", Some(1e5)),
            ("3.1415E10", Some(3.1415e10)),
            ("1e+5", Some(1e5)),
            ("1e-5", Some(1e-5)),
            ("1.5f", Some(1.5)),
            ("1.5D", Some(1.5)),
            ("Infinity", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("1e400", Some(f64::INFINITY)),
            ("1e-400", Some(0.0)),
            ("1e99999999999999999999", Some(f64::INFINITY)),
            ("0x1p3", Some(8.0)),
            ("0X1.8P1", Some(3.0)),
            ("-0x.8p1", Some(-1.0)),
            ("0x10p-4d", Some(1.0)),
            ("0x1p-1074", Some(f64::from_bits(1))),
            ("0x1p-1075", Some(0.0)),
            ("0x1.8p-1075", Some(f64::from_bits(1))),
            ("0x1p1024", Some(f64::INFINITY)),
            ("0x1p99999999999", Some(f64::INFINITY)),
            ("0x1fffffffffffffp0", Some(9007199254740991.0)),
            ("0x20000000000001p0", Some(9007199254740992.0)),
            ("0x20000000000003p0", Some(9007199254740996.0)),
            ("0x200000000000010000000001p-40", Some(9007199254740994.0)),
            ("", None),
            ("   ", None),
            ("-", None),
            (".", None),
            ("e5", None),
            ("1e", None),
            ("1e+", None),
            ("1.5ff", None),
            ("1.5 f", None),
            ("nan", None),
            ("infinity", None),
            ("inf", None),
            ("1_000", None),
            ("0x", None),
            ("0x1", None),
            ("0xp1", None),
            ("0x1p", None),
            ("abc", None),
            ("1,5", None),
        ] {
            assert_eq!(parse_double(text), expected, "Double.valueOf({text:?})");
        }
        assert!(parse_double("NaN").is_some_and(f64::is_nan));
        assert!(parse_double("-NaN").is_some_and(f64::is_nan));
        assert!(parse_double("-0").is_some_and(|v| v == 0.0 && v.is_sign_negative()));
    }

    #[test]
    fn double_order_follows_java_compare_to() {
        use Ordering::*;
        for (a, b, expected) in [
            (1.0, 2.0, Less),
            (2.0, 1.0, Greater),
            (1.5, 1.5, Equal),
            (-0.0, 0.0, Less),
            (0.0, -0.0, Greater),
            (f64::NAN, f64::NAN, Equal),
            (f64::NAN, f64::INFINITY, Greater),
            (f64::NEG_INFINITY, f64::NAN, Less),
            (-f64::NAN, 1.0, Greater),
        ] {
            assert_eq!(compare_double(a, b), expected, "{a} vs {b}");
        }
        assert!(equals_double(f64::NAN, -f64::NAN));
        assert!(!equals_double(0.0, -0.0));
        assert!(equals_double(2.5, 2.5));
    }
}
