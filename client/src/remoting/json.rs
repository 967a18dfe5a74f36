//! JSON shared by every body codec: a lenient reader and two writers.
//!
//! RocketMQ's Java side (fastjson) accepts loose JSON, and its output for integer-keyed
//! maps is not standard JSON (`{0:"127.0.0.1:10911"}`). So:
//! - `from_json_lenient` first quotes bare integer object keys, then parses with serde;
//! - `to_json` writes standard JSON; `to_json_legacy` writes integer map keys unquoted,
//!   byte-for-byte what fastjson writes for clients older than version 401;
//! - the `de` helpers accept numbers as strings and vice versa, `null` as "absent",
//!   and Java enums as ordinals or names.
//!
//! Invariants: the quoting pass only rewrites a `-?digits` token that sits where an
//! object key must be (after `{` or `,`, followed by `:`), which valid JSON never has,
//! so standard JSON passes through unchanged; its output is at most 2x its input.
//! Nothing here panics on any input; serde_json bounds nesting depth (128). Below the
//! top level, serde also accepts a struct written as an array of its fields in
//! declaration order; harmless, so left as is.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BodyError {
    #[error("invalid JSON body: {0}")]
    Json(#[from] serde_json::Error),
    #[error("JSON body is not an object")]
    NotAnObject,
}

/// Parses a JSON body, accepting fastjson's unquoted integer keys. The top level must
/// be an object: serde would otherwise accept a struct written as an array.
pub fn from_json_lenient<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    if !starts_with_object(bytes) {
        return Err(BodyError::NotAnObject);
    }
    let text = quote_bare_int_keys(bytes);
    Ok(serde_json::from_slice(&text)?)
}

/// Whether the first non-whitespace byte opens an object.
pub fn starts_with_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Standard JSON.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain data types into a Vec cannot fail: no I/O errors, no
    // non-string map keys other than integers, no non-finite floats.
    serde_json::to_vec(value).unwrap_or_default()
}

/// fastjson's default output: integer map keys unquoted.
pub fn to_json_legacy<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, LegacyFormatter::default());
    match value.serialize(&mut ser) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// Inserts quotes around `-?[0-9]+` tokens in object-key position. Borrowed when there
/// are none, which is the common (standard JSON) case.
pub fn quote_bare_int_keys(input: &[u8]) -> Cow<'_, [u8]> {
    rewrite_keys(input, |i| {
        let b = input[i];
        if b != b'-' && !b.is_ascii_digit() {
            return None;
        }
        let digits_start = i + usize::from(b == b'-');
        let mut j = digits_start;
        while j < input.len() && input[j].is_ascii_digit() {
            j += 1;
        }
        let mut k = j;
        while k < input.len() && input[k].is_ascii_whitespace() {
            k += 1;
        }
        (j > digits_start && input.get(k) == Some(&b':')).then(|| {
            let mut quoted = Vec::with_capacity(j - i + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(&input[i..j]);
            quoted.push(b'"');
            (j, quoted)
        })
    })
}

/// The one scanner behind the key rewrites: walks `input` tracking strings (and their
/// escapes) and the last non-blank byte outside them; at each token in object-key
/// position (after `{` or `,`) asks `key_at(index)` for `(end, replacement)` and, if it
/// answers, writes the replacement instead of `input[index..end]`. Borrowed when
/// nothing was replaced.
fn rewrite_keys(input: &[u8], key_at: impl Fn(usize) -> Option<(usize, Vec<u8>)>) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let (mut in_string, mut escaped) = (false, false);
    let mut last = 0u8;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                last = b'"';
            }
        } else if b == b'"' {
            in_string = true;
        } else if !b.is_ascii_whitespace() {
            if last == b'{' || last == b',' {
                if let Some((end, replacement)) = key_at(i) {
                    let buf = out.get_or_insert_with(|| {
                        let mut v = Vec::with_capacity(input.len() + 16);
                        v.extend_from_slice(&input[..i]);
                        v
                    });
                    buf.extend_from_slice(&replacement);
                    last = b'"';
                    i = end;
                    continue;
                }
            }
            last = b;
        }
        if let Some(buf) = out.as_mut() {
            buf.push(b);
        }
        i += 1;
    }
    match out {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(input),
    }
}

/// Compact JSON, except that an object key written as an integer (serde_json does that
/// for integer-typed map keys, wrapping it in begin/end_string) loses its quotes. String
/// keys such as `"0"` go through `write_string_fragment` and keep theirs.
#[derive(Default)]
struct LegacyFormatter {
    in_key: bool,
    quote_pending: bool,
    unquoted: bool,
}

impl LegacyFormatter {
    fn flush_quote<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.quote_pending {
            self.quote_pending = false;
            w.write_all(b"\"")?;
        }
        Ok(())
    }
}

macro_rules! legacy_key_int {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method<W: ?Sized + io::Write>(&mut self, w: &mut W, value: $ty) -> io::Result<()> {
            if self.in_key && self.quote_pending {
                self.quote_pending = false;
                self.unquoted = true;
            }
            w.write_all(value.to_string().as_bytes())
        }
    )*};
}

impl serde_json::ser::Formatter for LegacyFormatter {
    legacy_key_int!(write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64,
                    write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64);

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.in_key = true;
        if first {
            Ok(())
        } else {
            w.write_all(b",")
        }
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.in_key = false;
        Ok(())
    }

    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.in_key {
            self.quote_pending = true;
            Ok(())
        } else {
            w.write_all(b"\"")
        }
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.unquoted {
            self.unquoted = false;
            return Ok(());
        }
        self.flush_quote(w)?;
        w.write_all(b"\"")
    }

    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        self.flush_quote(w)?;
        w.write_all(fragment.as_bytes())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        self.flush_quote(w)?;
        serde_json::ser::CompactFormatter.write_char_escape(w, escape)
    }
}

/// Lenient field deserializers for `#[serde(deserialize_with = ...)]`.
pub mod de {
    use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};
    use std::fmt;
    use std::marker::PhantomData;
    use std::str::FromStr;

    struct IntVisitor<T>(PhantomData<T>);

    impl<'de, T> Visitor<'de> for IntVisitor<T>
    where
        T: TryFrom<i64> + TryFrom<u64> + FromStr + Default,
    {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "an integer of {} or a string holding one", std::any::type_name::<T>())
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            // `3.0` from a client that has only doubles: accept integral values.
            if v.fract() == 0.0 && v.abs() < 9.0e15 {
                return self.visit_i64(v as i64);
            }
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            v.trim().parse().map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
        }

        fn visit_unit<E: de::Error>(self) -> Result<T, E> {
            Ok(T::default())
        }
    }

    pub fn i32_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        d.deserialize_any(IntVisitor::<i32>(PhantomData))
    }

    pub fn i64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(IntVisitor::<i64>(PhantomData))
    }

    /// Java's `Boolean.parseBoolean` (case-insensitive "true"), plus "1"/"0" and numbers.
    pub fn parse_bool(s: &str) -> bool {
        let t = s.trim();
        t.eq_ignore_ascii_case("true") || t == "1"
    }

    struct BoolVisitor;

    impl<'de> Visitor<'de> for BoolVisitor {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a boolean, 0/1, or a string holding one")
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
            Ok(v != 0)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
            Ok(v != 0)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            Ok(parse_bool(v))
        }

        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }

    pub fn bool_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        d.deserialize_any(BoolVisitor)
    }

    /// A JSON scalar as text: strings as they are, numbers and booleans in their JSON
    /// spelling (`3` -> "3", `false` -> "false"), `null` as absent. Arrays and objects
    /// are refused rather than buffered, which keeps memory bounded by the input.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ScalarString(pub Option<String>);

    struct ScalarVisitor;

    impl<'de> Visitor<'de> for ScalarVisitor {
        type Value = ScalarString;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, number, boolean or null")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v.to_owned())))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v)))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v.to_string())))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v.to_string())))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v.to_string())))
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<ScalarString, E> {
            Ok(ScalarString(Some(v.to_string())))
        }

        fn visit_unit<E: de::Error>(self) -> Result<ScalarString, E> {
            Ok(ScalarString(None))
        }
    }

    impl<'de> Deserialize<'de> for ScalarString {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(ScalarVisitor)
        }
    }

    /// A string field that a client may send as a number or boolean; `null` is "".
    pub fn string_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        ScalarString::deserialize(d).map(|s| s.0.unwrap_or_default())
    }

    /// An optional string field; `null` is `None`.
    pub fn opt_string_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        ScalarString::deserialize(d).map(|s| s.0)
    }

    /// `null` means the type's default (Go clients write nil slices as `null`).
    pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Option::<T>::deserialize(d).map(Option::unwrap_or_default)
    }

    struct LenientI32(i32);

    impl<'de> Deserialize<'de> for LenientI32 {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            i32_lenient(d).map(LenientI32)
        }
    }

    /// A list of i32 whose items may be numbers or numeric strings; `null` is empty.
    pub fn vec_i32_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
        let v: Option<Vec<LenientI32>> = Option::deserialize(d)?;
        Ok(v.unwrap_or_default().into_iter().map(|x| x.0).collect())
    }

    /// A list of strings whose items may be scalars; `null` items are dropped.
    pub fn vec_string_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let v: Option<Vec<ScalarString>> = Option::deserialize(d)?;
        Ok(v.unwrap_or_default().into_iter().filter_map(|x| x.0).collect())
    }

    /// Deserializes a Java enum written as an ordinal or as a name.
    pub struct EnumVisitor<T> {
        pub type_name: &'static str,
        pub from_ordinal: fn(i64) -> Option<T>,
        pub from_name: fn(&str) -> Option<T>,
    }

    impl<'de, T> Visitor<'de> for EnumVisitor<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a {} name or ordinal", self.type_name)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            (self.from_ordinal)(v).ok_or_else(|| E::invalid_value(Unexpected::Signed(v), &self))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            i64::try_from(v)
                .ok()
                .and_then(self.from_ordinal)
                .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(v), &self))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            let by_ordinal = v.trim().parse::<i64>().ok().and_then(self.from_ordinal);
            by_ordinal.or_else(|| (self.from_name)(v)).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
        }
    }
}

/// Declares a Java enum: serialized by name, deserialized from a name (case-insensitive,
/// aliases allowed) or an ordinal, as the Java broker accepts both.
macro_rules! java_enum {
    ($(#[$m:meta])* $name:ident default $default:ident {
        $($(#[$vm:meta])* $variant:ident = $ordinal:literal, $java:literal $(| $alias:literal)*;)*
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant,)* }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$(Self::$variant,)*];

            pub fn ordinal(self) -> i32 {
                match self { $(Self::$variant => $ordinal,)* }
            }

            pub fn java_name(self) -> &'static str {
                match self { $(Self::$variant => $java,)* }
            }

            pub fn from_ordinal(n: i64) -> Option<Self> {
                match n { $($ordinal => Some(Self::$variant),)* _ => None }
            }

            pub fn from_java_name(s: &str) -> Option<Self> {
                let s = s.trim();
                $(if s.eq_ignore_ascii_case($java) $(|| s.eq_ignore_ascii_case($alias))* {
                    return Some(Self::$variant);
                })*
                None
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.java_name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any($crate::remoting::json::de::EnumVisitor {
                    type_name: stringify!($name),
                    from_ordinal: Self::from_ordinal,
                    from_name: Self::from_java_name,
                })
            }
        }
    };
}
pub(crate) use java_enum;

/// Turns every object in key position (`{` or `,` before it, `:` after its closing
/// brace) into a JSON string holding its text, so serde can read the map. Anything
/// else passes through unchanged; borrowed when there is nothing to quote.
pub fn quote_object_keys(input: &[u8]) -> Cow<'_, [u8]> {
    // Matching braces outside strings, found in one pass (unbalanced ones are ignored).
    let mut close_of: HashMap<usize, usize> = HashMap::new();
    let mut open: Vec<usize> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for (i, &b) in input.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'{' {
            open.push(i);
        } else if b == b'}' {
            if let Some(o) = open.pop() {
                close_of.insert(o, i);
            }
        }
    }
    rewrite_keys(input, |i| {
        if input[i] != b'{' {
            return None;
        }
        let close = *close_of.get(&i)?;
        let after = input[close + 1..].iter().find(|c| !c.is_ascii_whitespace());
        let text = std::str::from_utf8(&input[i..=close]).ok()?;
        (after == Some(&b':')).then(|| (close + 1, serde_json::Value::String(text.to_string()).to_string().into_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn check(input: &str, expected: &str) {
        let got = quote_bare_int_keys(input.as_bytes());
        assert_eq!(std::str::from_utf8(&got).unwrap(), expected, "quoting {input:?}");
    }

    #[test]
    fn quoting_cases() {
        check("", "");
        check("{}", "{}");
        check(r#"{"a":1}"#, r#"{"a":1}"#);
        check(r#"{0:"x"}"#, r#"{"0":"x"}"#);
        check(r#"{0:"x",1:"y"}"#, r#"{"0":"x","1":"y"}"#);
        check(r#"{ 0 : "x" , -12 :"y"}"#, r#"{ "0" : "x" , "-12" :"y"}"#);
        check(r#"[0,1,2]"#, r#"[0,1,2]"#);
        check(r#"{"a":[1,2],3:4}"#, r#"{"a":[1,2],"3":4}"#);
        check(r#"{"k":"{0:1}"}"#, r#"{"k":"{0:1}"}"#);
        check(r#"{"k":"a\"{0:1}"}"#, r#"{"k":"a\"{0:1}"}"#);
        check(r#"{"b":{10:"a"},"c":{}}"#, r#"{"b":{"10":"a"},"c":{}}"#);
        check(r#"{-:1}"#, r#"{-:1}"#);
        check(r#"{1"#, r#"{1"#);
        check(r#"{12"#, r#"{12"#);
        check("{\"a\":1,2", "{\"a\":1,2");
    }

    #[test]
    fn legacy_writer_unquotes_integer_keys_only() {
        let mut int_keys = BTreeMap::new();
        int_keys.insert(0i64, "127.0.0.1:10911".to_string());
        int_keys.insert(-1, "a\"b".to_string());
        assert_eq!(to_json_legacy(&int_keys), br#"{-1:"a\"b",0:"127.0.0.1:10911"}"#.to_vec());
        assert_eq!(to_json(&int_keys), br#"{"-1":"a\"b","0":"127.0.0.1:10911"}"#.to_vec());
        let mut str_keys = BTreeMap::new();
        str_keys.insert("0".to_string(), 5);
        str_keys.insert("".to_string(), 6);
        str_keys.insert("\n".to_string(), 7);
        assert_eq!(to_json_legacy(&str_keys), br#"{"":6,"\n":7,"0":5}"#.to_vec());
        let nested: BTreeMap<String, BTreeMap<u32, Vec<u8>>> =
            [("x".to_string(), [(7u32, vec![1, 2])].into_iter().collect())].into_iter().collect();
        assert_eq!(to_json_legacy(&nested), br#"{"x":{7:[1,2]}}"#.to_vec());
    }

    #[test]
    fn lenient_scalars() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            #[serde(default, deserialize_with = "de::i32_lenient")]
            a: i32,
            #[serde(default, deserialize_with = "de::i64_lenient")]
            b: i64,
            #[serde(default, deserialize_with = "de::bool_lenient")]
            c: bool,
            #[serde(default, deserialize_with = "de::string_lenient")]
            d: String,
            #[serde(default, deserialize_with = "de::vec_i32_lenient")]
            e: Vec<i32>,
        }
        let parse = |s: &str| from_json_lenient::<T>(s.as_bytes()).ok();
        let t = |a, b, c, d: &str, e: Vec<i32>| Some(T { a, b, c, d: d.into(), e });
        assert_eq!(parse("{}"), t(0, 0, false, "", vec![]));
        assert_eq!(parse(r#"{"a":"3","b":" 4 ","c":"TRUE","d":5,"e":["1",2]}"#), t(3, 4, true, "5", vec![1, 2]));
        assert_eq!(parse(r#"{"a":3.0,"b":-1,"c":1,"d":true,"e":null}"#), t(3, -1, true, "true", vec![]));
        assert_eq!(parse(r#"{"a":null,"b":null,"c":null,"d":null}"#), t(0, 0, false, "", vec![]));
        assert_eq!(parse(r#"{"c":"yes"}"#), t(0, 0, false, "", vec![]));
        assert_eq!(parse(r#"{"a":2147483648}"#), None);
        assert_eq!(parse(r#"{"a":"x"}"#), None);
        assert_eq!(parse(r#"{"a":3.5}"#), None);
        assert_eq!(parse(r#"{"d":[1]}"#), None);
        assert_eq!(parse(r#"[1]"#), None);
    }

    proptest! {
        #[test]
        fn legacy_roundtrips_through_lenient_reader(m in proptest::collection::btree_map(any::<i64>(), ".{0,8}", 0..6)) {
            let back: BTreeMap<i64, String> = from_json_lenient(&to_json_legacy(&m)).unwrap();
            prop_assert_eq!(&back, &m);
            let back: BTreeMap<i64, String> = from_json_lenient(&to_json(&m)).unwrap();
            prop_assert_eq!(back, m);
        }

        #[test]
        fn quoting_never_panics_and_is_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let out = quote_bare_int_keys(&bytes);
            prop_assert!(out.len() <= 2 * bytes.len());
        }
    }
}
