//! Message properties: `name\u{1}value\u{2}` repeated, as RocketMQ's
//! `MessageDecoder.messageProperties2String` writes them.
//!
//! Invariant: `decode(encode(p)) == p` for names and values free of the two separator
//! characters; decoding is lenient (a trailing pair without `\u{2}` is accepted, an
//! item without `\u{1}` is skipped) because clients differ.

use thiserror::Error;

pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Well-known property names.
pub mod keys {
    pub const KEYS: &str = "KEYS";
    pub const TAGS: &str = "TAGS";
    pub const DELAY: &str = "DELAY";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const TRAN_MSG: &str = "TRAN_MSG";
    pub const PGROUP: &str = "PGROUP";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QID: &str = "REAL_QID";
    /// Transactions: how many times the broker asked the producer about a half message.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// Transactions: seconds before the first check-back (overrides `transactionTimeOut`).
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// Transactions: the id the broker stamps on a half message (its UNIQ_KEY).
    pub const TRANSACTION_ID: &str = "__transactionId__";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// The first msgId of a message sent back (kept across every retry copy).
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// RocketMQ 5 timer messages: absolute delivery time (ms since the epoch).
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// RocketMQ 5 timer messages: delay from the broker's receipt, in seconds.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// RocketMQ 5 timer messages: delay from the broker's receipt, in milliseconds.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    pub const WAIT: &str = "WAIT";
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Request-reply (RocketMQ 4.6+): pairs a reply with its request (a UUID).
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request-reply: the client id of the requester, whose connection gets the reply.
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request-reply: the requester's timeout, in ms.
    pub const TTL: &str = "TTL";
    /// Request-reply: `reply` on a reply message (sent with SEND_REPLY_MESSAGE_V2).
    pub const MSG_TYPE: &str = "MSG_TYPE";
    /// The cluster of the broker that stored a message (the replier's reply topic is
    /// `<CLUSTER>_REPLY_TOPIC`).
    pub const CLUSTER: &str = "CLUSTER";
    /// Request-reply: when the broker pushed the reply (ms since the epoch).
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    /// Request-reply: when the requester received the reply (ms since the epoch).
    pub const REPLY_MESSAGE_ARRIVE_TIME: &str = "ARRIVE_TIME";
}

/// The value of `name` in an encoded properties string, without decoding the rest
/// (the append path looks up TAGS, KEYS and UNIQ_KEY on every message).
pub fn find<'a>(encoded: &'a str, name: &str) -> Option<&'a str> {
    // Byte search: both separators are ASCII, so every split point is a char boundary
    // and the slices below stay valid UTF-8. Item by item (memchr to the next `\u{2}`):
    // an item is `name` when it starts with `name` and a `\u{1}` follows.
    let bytes = encoded.as_bytes();
    let name_bytes = name.as_bytes();
    if name_bytes.contains(&1) || name_bytes.contains(&2) {
        return None; // no item's name holds a separator
    }
    let mut at = 0;
    while at <= bytes.len() {
        let end = at + name_bytes.len();
        if bytes[at..].starts_with(name_bytes) && bytes.get(end) == Some(&1) {
            let value_end = memchr::memchr(2, &bytes[end + 1..]).map_or(bytes.len(), |i| end + 1 + i);
            return Some(&encoded[end + 1..value_end]);
        }
        at += memchr::memchr(2, &bytes[at..])? + 1;
    }
    None
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PropertiesError {
    #[error("properties are not valid UTF-8")]
    NotUtf8,
    #[error("property name or value contains a separator character: {0:?}")]
    SeparatorInField(String),
}

/// An ordered list of properties (order kept so that re-encoding is byte-identical),
/// held as its canonical encoding: `name\u{1}value\u{2}` for each pair, nothing else.
///
/// Why one string and not a list of pairs: a consumer decodes the properties of every
/// message it receives, and a pair list cost two allocations per property (W3's cold
/// read spent a third of its consumer thread in malloc and free). Decoding a canonical
/// text is one allocation; lookups scan it (`find`), which for the few short pairs a
/// message carries is as fast as walking a list.
///
/// Invariant: `text` is canonical (every item holds a `\u{1}`, every item ends in
/// `\u{2}`), so two `Properties` are equal exactly when their pairs are.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Properties {
    text: String,
}

impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        find(&self.text, name)
    }

    /// Sets `name`, replacing an existing value in place.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), PropertiesError> {
        for field in [name, value] {
            if field.contains(NAME_VALUE_SEPARATOR) || field.contains(PROPERTY_SEPARATOR) {
                return Err(PropertiesError::SeparatorInField(field.to_string()));
            }
        }
        match self.value_range(name) {
            Some(range) => self.text.replace_range(range, value),
            None => {
                self.text.reserve(name.len() + value.len() + 2);
                self.text.push_str(name);
                self.text.push(NAME_VALUE_SEPARATOR);
                self.text.push_str(value);
                self.text.push(PROPERTY_SEPARATOR);
            }
        }
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        let value = self.value_range(name)?;
        let removed = self.text[value.clone()].to_string();
        // The pair runs from its name (just before the value's `\u{1}`) through the `\u{2}`.
        let item_start = value.start - 1 - name.len();
        self.text.replace_range(item_start..value.end + 1, "");
        Some(removed)
    }

    /// Byte range of the first `name`'s value in `text`.
    fn value_range(&self, name: &str) -> Option<std::ops::Range<usize>> {
        let mut start = 0;
        for item in self.text.split_terminator(PROPERTY_SEPARATOR) {
            let end = start + item.len();
            if let Some((n, _)) = item.split_once(NAME_VALUE_SEPARATOR) {
                if n == name {
                    return Some(start + n.len() + 1..end);
                }
            }
            start = end + 1;
        }
        None
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.text.split_terminator(PROPERTY_SEPARATOR).filter_map(|item| item.split_once(NAME_VALUE_SEPARATOR))
    }

    pub fn len(&self) -> usize {
        self.text.bytes().filter(|&b| b == 2).count()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The `TAGS` property, if any.
    pub fn tags(&self) -> Option<&str> {
        self.get(keys::TAGS)
    }

    /// Each token of the space-separated `KEYS` property.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.get(keys::KEYS).unwrap_or("").split(' ').filter(|k| !k.is_empty())
    }

    /// Bytes `encode` produces, without building the string.
    pub fn encoded_len(&self) -> usize {
        self.text.len()
    }

    pub fn encode(&self) -> String {
        self.text.clone()
    }

    /// The encoding, borrowed.
    pub fn as_encoded(&self) -> &str {
        &self.text
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PropertiesError> {
        let text = std::str::from_utf8(bytes).map_err(|_| PropertiesError::NotUtf8)?;
        Ok(Self::decode_str(text))
    }

    pub fn decode_str(text: &str) -> Self {
        if is_canonical(text) {
            return Self { text: text.to_string() };
        }
        let mut canonical = String::with_capacity(text.len() + 1);
        for item in text.split(PROPERTY_SEPARATOR) {
            if item.contains(NAME_VALUE_SEPARATOR) {
                canonical.push_str(item);
                canonical.push(PROPERTY_SEPARATOR);
            }
        }
        Self { text: canonical }
    }
}

/// Whether `text` is already the canonical encoding: empty, or items that each hold a
/// `\u{1}` and end in `\u{2}` (what every client writes).
fn is_canonical(text: &str) -> bool {
    text.is_empty() || (text.ends_with(PROPERTY_SEPARATOR) && text.split_terminator(PROPERTY_SEPARATOR).all(|item| item.contains(NAME_VALUE_SEPARATOR)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_matches_encode() {
        let mut p = Properties::new();
        assert_eq!(p.encoded_len(), p.encode().len());
        p.set("TAGS", "TagA").unwrap();
        p.set("note", "héllo").unwrap();
        assert_eq!(p.encoded_len(), p.encode().len());
    }
    use proptest::prelude::*;

    fn check(input: &str, expected: &[(&str, &str)]) {
        let props = Properties::decode_str(input);
        let got: Vec<(&str, &str)> = props.iter().collect();
        assert_eq!(got, expected, "decoding {input:?}");
    }

    #[test]
    fn decode_cases() {
        check("", &[]);
        check("TAGS\u{1}a\u{2}", &[("TAGS", "a")]);
        check("TAGS\u{1}a\u{2}KEYS\u{1}k1 k2\u{2}", &[("TAGS", "a"), ("KEYS", "k1 k2")]);
        check("TAGS\u{1}a", &[("TAGS", "a")]); // no trailing separator
        check("garbage\u{2}TAGS\u{1}b\u{2}", &[("TAGS", "b")]);
        check("E\u{1}\u{2}", &[("E", "")]);
    }

    #[test]
    fn find_matches_decode() {
        for text in ["", "TAGS\u{1}a\u{2}", "X\u{1}1\u{2}TAGS\u{1}b", "garbage\u{2}TAGS\u{1}c\u{2}", "TAGSX\u{1}no\u{2}"] {
            assert_eq!(find(text, "TAGS"), Properties::decode_str(text).get("TAGS"), "{text:?}");
        }
    }

    #[test]
    fn set_replace_remove_keep_the_encoding_canonical() {
        let mut p = Properties::decode_str("A\u{1}1\u{2}B\u{1}2\u{2}C\u{1}3");
        assert_eq!(p.encode(), "A\u{1}1\u{2}B\u{1}2\u{2}C\u{1}3\u{2}");
        p.set("B", "two").unwrap();
        assert_eq!(p.encode(), "A\u{1}1\u{2}B\u{1}two\u{2}C\u{1}3\u{2}");
        assert_eq!(p.remove("A").as_deref(), Some("1"));
        assert_eq!(p.remove("C").as_deref(), Some("3"));
        assert_eq!(p.remove("C"), None);
        assert_eq!(p.encode(), "B\u{1}two\u{2}");
        assert_eq!(p.len(), 1);
        assert_eq!(p.remove("B").as_deref(), Some("two"));
        assert!(p.is_empty());
        assert_eq!(p, Properties::new());
        // A name that is a suffix or prefix of another is not confused with it.
        let mut q = Properties::decode_str("XA\u{1}1\u{2}A\u{1}2\u{2}AX\u{1}3\u{2}");
        assert_eq!(q.get("A"), Some("2"));
        assert_eq!(q.remove("A").as_deref(), Some("2"));
        assert_eq!(q.encode(), "XA\u{1}1\u{2}AX\u{1}3\u{2}");
        // Garbage items are dropped and equal pairs compare equal.
        assert_eq!(Properties::decode_str("junk\u{2}A\u{1}1"), Properties::decode_str("A\u{1}1\u{2}"));
    }

    /// The item walk `find` replaced.
    fn find_by_walking<'a>(encoded: &'a str, name: &str) -> Option<&'a str> {
        encoded.split('\u{2}').find_map(|item| item.split_once('\u{1}').filter(|(n, _)| *n == name).map(|(_, v)| v))
    }

    proptest! {
        #[test]
        fn find_matches_an_item_walk(text in "[AB\u{1}\u{2}x]{0,24}", name in "[AB\u{1}\u{2}]{0,3}") {
            prop_assert_eq!(find(&text, &name), find_by_walking(&text, &name), "{:?} in {:?}", name, text);
        }
    }

    #[test]
    fn keys_split_on_spaces() {
        let props = Properties::decode_str("KEYS\u{1} a  b c\u{2}");
        assert_eq!(props.keys().collect::<Vec<_>>(), vec!["a", "b", "c"]);
    }

    #[test]
    fn set_refuses_separators() {
        let mut props = Properties::new();
        assert!(props.set("A\u{1}", "x").is_err());
        assert!(props.set("A", "x\u{2}").is_err());
        props.set("A", "1").unwrap();
        props.set("A", "2").unwrap();
        assert_eq!(props.encode(), "A\u{1}2\u{2}");
    }

    proptest! {
        #[test]
        fn roundtrip(pairs in proptest::collection::vec(("[A-Za-z_]{1,8}", "[^\u{1}\u{2}]{0,12}"), 0..8)) {
            let mut props = Properties::new();
            for (n, v) in &pairs { props.set(n, v).unwrap(); }
            let decoded = Properties::decode(props.encode().as_bytes()).unwrap();
            prop_assert_eq!(&decoded, &props);
            // The pairs are those a pair list keeps: the first of each name, in order.
            let mut expected: Vec<(String, String)> = Vec::new();
            for (n, v) in &pairs {
                match expected.iter_mut().find(|(en, _)| en == n) {
                    Some(e) => e.1 = v.clone(),
                    None => expected.push((n.clone(), v.clone())),
                }
            }
            let got: Vec<(String, String)> = decoded.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn decode_matches_a_pair_list(text in "[AB\u{1}\u{2}x]{0,24}") {
            // The lenient decoder of the pair list this type replaced.
            let mut expected = Vec::new();
            for item in text.split('\u{2}') {
                if let Some((n, v)) = item.split_once('\u{1}') {
                    expected.push((n.to_string(), v.to_string()));
                }
            }
            let got: Vec<(String, String)> = Properties::decode_str(&text).iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            prop_assert_eq!(got, expected);
        }
    }
}
