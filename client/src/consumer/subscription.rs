//! A subscription: a topic and a selector — a TAG expression (`*`, `TagA`,
//! `TagA || TagB`) or a SQL92 expression over the message's properties
//! (`MessageSelector::by_sql`, RocketMQ's `MessageSelector.bySql`). For TAG the broker
//! filters by the tags' hash codes (cheap, may let a colliding tag through) and
//! `matches` checks the tag text exactly, so a collision never reaches the listener.
//! A SQL92 expression is evaluated by the broker alone (it needs
//! `enablePropertyFilter=true` there, or its pulls are refused).

use crate::remoting::heartbeat::{is_sub_all, tags, SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG};
use std::collections::BTreeSet;

/// How a subscription selects messages (RocketMQ's `MessageSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSelector {
    /// A TAG expression: `*`, `TagA`, `TagA || TagB`.
    Tag(String),
    /// A SQL92 expression over the message's properties, e.g. `a > 5 AND TAGS = 'A'`.
    Sql92(String),
}

impl MessageSelector {
    pub fn by_tag(expression: &str) -> Self {
        MessageSelector::Tag(expression.to_string())
    }
    pub fn by_sql(expression: &str) -> Self {
        MessageSelector::Sql92(expression.to_string())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub topic: String,
    pub expression: String,
    /// `TAG` or `SQL92` (RocketMQ's `ExpressionType`).
    pub expression_type: &'static str,
    /// Empty means every message (and every SQL92 subscription: the broker filters).
    tags: BTreeSet<String>,
    /// Version sent with pulls and heartbeats (creation time, ms).
    pub version: i64,
}

impl Subscription {
    pub fn new(topic: &str, expression: &str) -> Self {
        let expression = if expression.trim().is_empty() { "*".to_string() } else { expression.trim().to_string() };
        let tags = if is_sub_all(&expression) { BTreeSet::new() } else { tags(&expression).into_iter().collect() };
        Self { topic: topic.to_string(), expression, expression_type: EXPRESSION_TYPE_TAG, tags, version: crate::msgid::now_ms() }
    }

    /// A subscription with `selector`.
    pub fn with_selector(topic: &str, selector: &MessageSelector) -> Self {
        match selector {
            MessageSelector::Tag(e) => Self::new(topic, e),
            MessageSelector::Sql92(e) => Self { topic: topic.to_string(), expression: e.trim().to_string(), expression_type: EXPRESSION_TYPE_SQL92, tags: BTreeSet::new(), version: crate::msgid::now_ms() },
        }
    }

    pub fn is_all(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether a message with `tag` is wanted.
    pub fn matches(&self, tag: Option<&str>) -> bool {
        self.is_all() || tag.is_some_and(|t| self.tags.contains(t))
    }

    pub fn data(&self) -> SubscriptionData {
        let mut data = SubscriptionData::new(&self.topic, &self.expression, self.version);
        if self.expression_type != EXPRESSION_TYPE_TAG {
            data.expression_type = self.expression_type.to_string();
            data.recompute_tags();
        }
        data
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

    #[test]
    fn sql92_selectors_are_left_to_the_broker() {
        let s = Subscription::with_selector("t", &MessageSelector::by_sql(" a > 5 "));
        assert_eq!((s.expression.as_str(), s.expression_type), ("a > 5", "SQL92"));
        assert!(s.matches(None) && s.matches(Some("any")));
        let d = s.data();
        assert_eq!((d.expression_type.as_str(), d.sub_string.as_str()), ("SQL92", "a > 5"));
        assert!(d.tags_set.is_empty() && d.code_set.is_empty());
        let t = Subscription::with_selector("t", &MessageSelector::by_tag("A || B"));
        assert_eq!((t.expression_type, t.data().tags_set.len()), ("TAG", 2));
    }
}
