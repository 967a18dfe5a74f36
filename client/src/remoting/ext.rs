//! `ExtFields`: a command's custom header fields (`extFields`), a string-to-string map
//! with the part of `BTreeMap<String, String>`'s API the code uses (`get`, `insert`,
//! `remove`, `contains_key`, sorted iteration, `len`, `clone`, serde as a map), built
//! so that decoding a request allocates nothing per field.
//!
//! Storage: fields decoded from a frame are spans of the frame's header bytes (`src`,
//! a shared `Bytes`, no copy); text added later (an `insert`, a number formatted for a
//! response) is appended to one owned buffer (`own`) and referenced by span; keys known
//! at compile time are `&'static str`. Both the field list and the owned buffer live
//! inline up to `FIELDS_INLINE` fields and `OWN_INLINE_BYTES` bytes, so a send request
//! (14 fields) and its response (5 short fields) touch the heap not at all.
//!
//! Invariants:
//! - `fields` is sorted by key (byte order, as `String`'s `Ord`) and keys are unique,
//!   so iteration and encoding are deterministic and equal to the `BTreeMap`'s;
//! - every span lies inside its buffer and covers valid UTF-8 (checked when the text
//!   entered), and neither buffer is ever changed under a span: `src` is immutable and
//!   `own` only grows (until `compact`, which rewrites every span);
//! - equality, `Debug` and serialization see only the key/value pairs, never where
//!   they are stored.

use bytes::Bytes;
use serde::ser::{Serialize, SerializeMap, Serializer};
use smallvec::SmallVec;
use std::fmt;

/// Fields held without a heap allocation: Java's SEND_MESSAGE_V2 header has 14.
pub const FIELDS_INLINE: usize = 16;
/// Owned text held without a heap allocation: a send response's msgId (32), queue id,
/// queue offset and transaction id (32) fit.
pub const OWN_INLINE_BYTES: usize = 128;
/// `own` is compacted when dead text (removed or replaced values) is past this size and
/// more than half of it: bounds memory for code that rewrites a field many times.
const OWN_DEAD_COMPACT_MIN_BYTES: usize = 1024;

/// Where a key or value's text is.
#[derive(Clone, Copy, Debug)]
enum Text {
    /// `src[start..start + len]`.
    Src { start: u32, len: u32 },
    /// `own[start..start + len]`.
    Own { start: u32, len: u32 },
    Static(&'static str),
}

/// A key or value being added: borrowed from the decoded header, or text to copy.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Piece<'a> {
    /// A sub-slice of the `src` given to `ExtFields::decoding`.
    Src(&'a str),
    /// Text from elsewhere (an unescaped JSON string, a number's spelling).
    Copy(&'a str),
}

#[derive(Clone, Default)]
pub struct ExtFields {
    src: Bytes,
    own: SmallVec<[u8; OWN_INLINE_BYTES]>,
    /// Bytes of `own` no span refers to any more.
    own_dead: usize,
    fields: SmallVec<[(Text, Text); FIELDS_INLINE]>,
}

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map whose decoded fields will be spans of `src` (a frame's header).
    pub(crate) fn decoding(src: Bytes) -> Self {
        Self { src, ..Self::default() }
    }

    fn text(&self, t: &Text) -> &str {
        let (buf, start, len): (&[u8], u32, u32) = match *t {
            Text::Static(s) => return s,
            Text::Src { start, len } => (&self.src, start, len),
            Text::Own { start, len } => (&self.own, start, len),
        };
        let bytes = &buf[start as usize..(start + len) as usize];
        // SAFETY: spans are made only over text that was `str` when it entered (see the
        // module invariants), and neither buffer changes under a span.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.fields.binary_search_by(|(k, _)| self.text(k).as_bytes().cmp(key.as_bytes()))
    }

    fn own_text(&mut self, s: &str) -> Text {
        let start = self.own.len();
        self.own.extend_from_slice(s.as_bytes());
        Text::Own { start: start as u32, len: s.len() as u32 }
    }

    fn piece(&mut self, p: Piece<'_>) -> Text {
        match p {
            Piece::Src(s) => {
                let base = self.src.as_ptr() as usize;
                let at = (s.as_ptr() as usize).wrapping_sub(base);
                if at <= self.src.len() && s.len() <= self.src.len() - at {
                    Text::Src { start: at as u32, len: s.len() as u32 }
                } else {
                    // Not from `src` after all: copied, never a wrong span.
                    self.own_text(s)
                }
            }
            Piece::Copy(s) => self.own_text(s),
        }
    }

    fn forget(&mut self, t: Text) {
        if let Text::Own { len, .. } = t {
            self.own_dead += len as usize;
        }
    }

    /// Adds a decoded field at the end, unsorted: `finish_decoding` sorts. Returns the
    /// number of fields held (duplicates included).
    pub(crate) fn push_decoded(&mut self, key: Piece<'_>, value: Piece<'_>) -> usize {
        let k = self.piece(key);
        let v = self.piece(value);
        self.fields.push((k, v));
        self.fields.len()
    }

    /// `push_decoded` of a value given as the contents of a JSON string whose escapes
    /// are all simple (see `command::json_escapes_are_simple`): unescaped straight into
    /// the owned buffer.
    pub(crate) fn push_decoded_json_escaped(&mut self, key: Piece<'_>, escaped: &str) -> usize {
        let k = self.piece(key);
        let start = self.own.len();
        unescape_json(escaped, &mut self.own);
        let v = Text::Own { start: start as u32, len: (self.own.len() - start) as u32 };
        self.fields.push((k, v));
        self.fields.len()
    }

    /// Sorts the decoded fields by key and keeps the last value of a repeated key (what
    /// inserting them one by one into a map does). Returns the number of distinct keys.
    pub(crate) fn finish_decoding(&mut self) -> usize {
        let fields = std::mem::take(&mut self.fields);
        let mut sorted = fields;
        // Stable: equal keys keep their arrival order, the last one wins below. No heap
        // for the short lists requests carry (the sort allocates past 20 elements).
        sorted.sort_by(|(a, _), (b, _)| self.text(a).as_bytes().cmp(self.text(b).as_bytes()));
        let mut out: SmallVec<[(Text, Text); FIELDS_INLINE]> = SmallVec::with_capacity(sorted.len());
        for (k, v) in sorted {
            match out.last_mut() {
                Some(last) if self.text(&last.0) == self.text(&k) => {
                    let old = std::mem::replace(&mut last.1, v);
                    if let Text::Own { len, .. } = old {
                        self.own_dead += len as usize;
                    }
                }
                _ => out.push((k, v)),
            }
        }
        self.fields = out;
        self.fields.len()
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).ok().map(|i| self.text(&self.fields[i].1))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    fn put(&mut self, key: &str, key_text: impl FnOnce(&mut Self) -> Text, value: Text) {
        match self.find(key) {
            Ok(i) => {
                let old = std::mem::replace(&mut self.fields[i].1, value);
                self.forget(old);
            }
            Err(i) => {
                let k = key_text(self);
                self.fields.insert(i, (k, value));
            }
        }
        self.maybe_compact();
    }

    /// Sets `key` to `value` (copied), replacing any previous value.
    pub fn insert(&mut self, key: String, value: String) {
        self.set_str(&key, &value);
    }

    /// Sets `key` to `value`, both copied.
    pub fn set_str(&mut self, key: &str, value: &str) {
        let v = self.own_text(value);
        self.put(key, |s| s.own_text(key), v);
    }

    /// Sets a field whose key is known at compile time: only the value is stored.
    pub fn set(&mut self, key: &'static str, value: &str) {
        let v = self.own_text(value);
        self.put(key, |_| Text::Static(key), v);
    }

    /// Sets a field whose key and value are known at compile time: nothing is copied.
    pub fn set_static(&mut self, key: &'static str, value: &'static str) {
        self.put(key, |_| Text::Static(key), Text::Static(value));
    }

    /// Sets a field to formatted text, written straight into the owned buffer (a number
    /// or an id costs no `String`).
    pub fn set_fmt(&mut self, key: &'static str, value: fmt::Arguments<'_>) {
        let start = self.own.len();
        let mut w = OwnWriter(&mut self.own);
        // Writing into a vector cannot fail; a `Display` impl that errs leaves what it wrote.
        let _ = fmt::Write::write_fmt(&mut w, value);
        let v = Text::Own { start: start as u32, len: (self.own.len() - start) as u32 };
        self.put(key, |_| Text::Static(key), v);
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key).ok()?;
        let (k, v) = self.fields.remove(i);
        let value = self.text(&v).to_string();
        self.forget(k);
        self.forget(v);
        Some(value)
    }

    /// Fields in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &str)> + ExactSizeIterator + '_ {
        self.fields.iter().map(move |(k, v)| (self.text(k), self.text(v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(_, v)| v)
    }

    fn maybe_compact(&mut self) {
        if self.own_dead > OWN_DEAD_COMPACT_MIN_BYTES && self.own_dead * 2 > self.own.len() {
            self.compact();
        }
    }

    /// Rewrites `own` with only the text some span refers to.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.own);
        let mut own: SmallVec<[u8; OWN_INLINE_BYTES]> = SmallVec::new();
        let mut move_text = |t: &mut Text| {
            if let Text::Own { start, len } = *t {
                let at = own.len();
                own.extend_from_slice(&old[start as usize..(start + len) as usize]);
                *t = Text::Own { start: at as u32, len };
            }
        };
        for (k, v) in self.fields.iter_mut() {
            move_text(k);
            move_text(v);
        }
        self.own = own;
        self.own_dead = 0;
    }
}

/// Appends the unescaped text of JSON string contents with valid escapes and no
/// surrogate `\u` escapes (a bad escape is copied as it is: callers check first). The
/// output is UTF-8: the input was, and each escape becomes one whole character.
fn unescape_json(s: &str, out: &mut SmallVec<[u8; OWN_INLINE_BYTES]>) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().position(|&c| c == b'\\').unwrap_or(b.len() - i);
        out.extend_from_slice(&b[i..i + run]);
        i += run;
        if i >= b.len() {
            break;
        }
        let decoded = match b.get(i + 1) {
            Some(b'"') => Some('"'),
            Some(b'\\') => Some('\\'),
            Some(b'/') => Some('/'),
            Some(b'b') => Some('\u{8}'),
            Some(b'f') => Some('\u{c}'),
            Some(b'n') => Some('\n'),
            Some(b'r') => Some('\r'),
            Some(b't') => Some('\t'),
            Some(b'u') => s.get(i + 2..i + 6).and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                i += if b[i + 1] == b'u' { 6 } else { 2 };
            }
            None => {
                out.push(b'\\');
                i += 1;
            }
        }
    }
}

struct OwnWriter<'a>(&'a mut SmallVec<[u8; OWN_INLINE_BYTES]>);

impl fmt::Write for OwnWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for ExtFields {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut out = Self::new();
        out.extend(iter);
        out
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for ExtFields {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.set_str(k.as_ref(), v.as_ref());
        }
    }
}

/// Concrete pair types (not `AsRef`), so that `[("k".into(), "v".into())].into()`
/// infers as it did for `BTreeMap<String, String>`.
impl<const N: usize> From<[(String, String); N]> for ExtFields {
    fn from(pairs: [(String, String); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl IntoIterator for ExtFields {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>().into_iter()
    }
}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a str);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, &'a str)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, String),
        SetFmt(u8, i64),
        Remove(String),
    }

    fn arb_key() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "topic", "queueId", "é", "", "zz", "msgId"]).prop_map(str::to_string)
    }

    const STATIC_KEYS: [&str; 3] = ["msgId", "queueId", "zz"];

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (arb_key(), ".{0,40}").prop_map(|(k, v)| Op::Insert(k, v)),
            (0u8..3, any::<i64>()).prop_map(|(k, n)| Op::SetFmt(k, n)),
            arb_key().prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Behaves as `BTreeMap<String, String>` under any mix of decoded fields,
        /// inserts, formatted sets and removes, compaction included.
        #[test]
        fn matches_a_btreemap(decoded in proptest::collection::vec((arb_key(), ".{0,20}"), 0..24),
                              ops in proptest::collection::vec(arb_op(), 0..200)) {
            let mut src = String::new();
            let mut spans = Vec::new();
            for (k, v) in &decoded {
                let ks = src.len();
                src.push_str(k);
                let vs = src.len();
                src.push_str(v);
                spans.push((ks..vs, vs..src.len()));
            }
            let src_bytes = Bytes::from(src.clone());
            let text = std::str::from_utf8(&src_bytes).unwrap();
            let mut ext = ExtFields::decoding(src_bytes.clone());
            let mut model = BTreeMap::new();
            for (k, v) in spans {
                ext.push_decoded(Piece::Src(&text[k.clone()]), Piece::Src(&text[v.clone()]));
                model.insert(text[k].to_string(), text[v].to_string());
            }
            ext.finish_decoding();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        ext.insert(k.clone(), v.clone());
                        model.insert(k, v);
                    }
                    Op::SetFmt(k, n) => {
                        let key = STATIC_KEYS[k as usize];
                        ext.set_fmt(key, format_args!("{n}"));
                        model.insert(key.to_string(), n.to_string());
                    }
                    Op::Remove(k) => prop_assert_eq!(ext.remove(&k), model.remove(&k)),
                }
                prop_assert_eq!(ext.len(), model.len());
            }
            let got: Vec<(String, String)> = ext.clone().into_iter().collect();
            let want: Vec<(String, String)> = model.clone().into_iter().collect();
            prop_assert_eq!(got, want);
            for (k, v) in &model {
                prop_assert_eq!(ext.get(k), Some(v.as_str()));
            }
            prop_assert_eq!(serde_json::to_string(&ext).unwrap(), serde_json::to_string(&model).unwrap());
            let rebuilt: ExtFields = model.iter().collect();
            prop_assert_eq!(&rebuilt, &ext);
        }
    }

    #[test]
    fn decoded_duplicates_keep_the_last_value() {
        let src = Bytes::from_static(b"kAkB");
        let text = std::str::from_utf8(&src).unwrap().to_string();
        let mut ext = ExtFields::decoding(src.clone());
        let s = std::str::from_utf8(&src).unwrap();
        ext.push_decoded(Piece::Src(&s[0..1]), Piece::Src(&s[1..2]));
        ext.push_decoded(Piece::Src(&s[2..3]), Piece::Src(&s[3..4]));
        // A piece that is not from `src` is copied, not mis-spanned.
        ext.push_decoded(Piece::Src(&text[0..1]), Piece::Copy("C"));
        assert_eq!(ext.finish_decoding(), 1);
        assert_eq!(ext.get("k"), Some("C"));
    }
}
