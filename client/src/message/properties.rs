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
}

/// The value of `name` in an encoded properties string, without decoding the rest
/// (the append path looks up TAGS, KEYS and UNIQ_KEY on every message).
pub fn find<'a>(encoded: &'a str, name: &str) -> Option<&'a str> {
    // Byte search: both separators are ASCII, so every split point is a char boundary
    // and the slices below stay valid UTF-8.
    let bytes = encoded.as_bytes();
    let mut start = 0;
    while start <= bytes.len() {
        let end = bytes[start..].iter().position(|&b| b == 2).map_or(bytes.len(), |i| start + i);
        let item = &bytes[start..end];
        if let Some(eq) = item.iter().position(|&b| b == 1) {
            if &item[..eq] == name.as_bytes() {
                return Some(&encoded[start + eq + 1..end]);
            }
        }
        start = end + 1;
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

/// An ordered list of properties (order kept so that re-encoding is byte-identical).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    pairs: Vec<(String, String)>,
}

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Sets `name`, replacing an existing value in place.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), PropertiesError> {
        for field in [name, value] {
            if field.contains(NAME_VALUE_SEPARATOR) || field.contains(PROPERTY_SEPARATOR) {
                return Err(PropertiesError::SeparatorInField(field.to_string()));
            }
        }
        match self.pairs.iter_mut().find(|(n, _)| n == name) {
            Some(pair) => pair.1 = value.to_string(),
            None => self.pairs.push((name.to_string(), value.to_string())),
        }
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        let index = self.pairs.iter().position(|(n, _)| n == name)?;
        Some(self.pairs.remove(index).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
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
        self.pairs.iter().map(|(n, v)| n.len() + v.len() + 2).sum()
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (name, value) in &self.pairs {
            out.push_str(name);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, PropertiesError> {
        let text = std::str::from_utf8(bytes).map_err(|_| PropertiesError::NotUtf8)?;
        Ok(Self::decode_str(text))
    }

    pub fn decode_str(text: &str) -> Self {
        let mut pairs = Vec::new();
        for item in text.split(PROPERTY_SEPARATOR) {
            if let Some((name, value)) = item.split_once(NAME_VALUE_SEPARATOR) {
                pairs.push((name.to_string(), value.to_string()));
            }
        }
        Self { pairs }
    }
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
            prop_assert_eq!(decoded, props);
        }
    }
}
