//! A subscription: a topic and a TAG expression (`*`, `TagA`, `TagA || TagB`). The
//! broker filters by the tags' hash codes (cheap, may let a colliding tag through);
//! `matches` checks the tag text exactly, so a collision never reaches the listener.

use crate::remoting::heartbeat::{is_sub_all, tags, SubscriptionData};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub topic: String,
    pub expression: String,
    /// Empty means every message.
    tags: BTreeSet<String>,
    /// Version sent with pulls and heartbeats (creation time, ms).
    pub version: i64,
}

impl Subscription {
    pub fn new(topic: &str, expression: &str) -> Self {
        let expression = if expression.trim().is_empty() { "*".to_string() } else { expression.trim().to_string() };
        let tags = if is_sub_all(&expression) { BTreeSet::new() } else { tags(&expression).into_iter().collect() };
        Self { topic: topic.to_string(), expression, tags, version: crate::msgid::now_ms() }
    }

    pub fn is_all(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether a message with `tag` is wanted.
    pub fn matches(&self, tag: Option<&str>) -> bool {
        self.is_all() || tag.is_some_and(|t| self.tags.contains(t))
    }

    pub fn data(&self) -> SubscriptionData {
        SubscriptionData::new(&self.topic, &self.expression, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(expression: &str, tag: Option<&str>, expected: bool) {
        assert_eq!(Subscription::new("t", expression).matches(tag), expected, "{expression:?} vs {tag:?}");
    }

    #[test]
    fn tag_expressions() {
        check("*", None, true);
        check("*", Some("A"), true);
        check("", Some("A"), true);
        check("A", Some("A"), true);
        check("A", Some("B"), false);
        check("A", None, false);
        check("A || B", Some("B"), true);
        check(" A ||B ", Some("B"), true);
        check("A || B", Some("C"), false);
        check("A || B", Some("A || B"), false);
        // Java hash collision: "Aa" and "BB" share a hash code; only the exact tag passes.
        check("Aa", Some("BB"), false);
    }
}
