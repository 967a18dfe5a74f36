//! Topic attributes (RocketMQ 5's `TopicAttributes`): how an UPDATE_AND_CREATE_TOPIC
//! `attributes` string (`+key=value,-key`) changes a topic's attributes, as Java's
//! `AttributeParser.parseToMap` and `AttributeUtil.alterCurrentAttributes` do, and which
//! values RingMQ honours.
//!
//! What each attribute means here:
//! - `message.type` (NORMAL, FIFO, DELAY, TRANSACTION, UNSPECIFIED; changeable) is stored
//!   and answered. Java's broker does nothing else with it on the remoting path (its
//!   proxy checks a message's type against it for gRPC clients); `MIXED` is refused as
//!   Java refuses it with `enableMixedMessageType=false`, the only value RingMQ accepts.
//! - `cleanup.policy`: DELETE (what RingMQ's retention does); COMPACTION is refused:
//!   RingMQ does not build compacted topics.
//! - `queue.type`: SimpleCQ (RingMQ's consume queue); BatchCQ is refused.
//! - `reserve.time` is refused with Java's remark: it exists only with a tiered store.
//!
//! Invariant: a topic's stored attributes are keys of [`ATTRIBUTES`] (without the `+`)
//! with values [`check_value`] accepts; at most one entry per attribute.

use std::collections::BTreeMap;

/// Longest `attributes` modification string taken: four attributes with their longest
/// values fit in well under 256 bytes.
pub const ATTRIBUTES_TEXT_BYTES_MAX: usize = 1024;

/// RocketMQ's topic attributes: (name, changeable after creation, values Java allows).
const ATTRIBUTES: &[(&str, bool, &[&str])] = &[
    ("queue.type", false, &["BatchCQ", "SimpleCQ"]),
    ("cleanup.policy", false, &["DELETE", "COMPACTION"]),
    ("message.type", true, &["UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"]),
    ("reserve.time", true, &[]),
];

/// The message types a topic may declare (Java's `TopicMessageType` without MIXED).
pub const MESSAGE_TYPE: &str = "message.type";

/// Java's `AttributeParser.parseToMap`: `+k=v` adds or alters, `-k` deletes. Keys keep
/// their sign.
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
    if text.len() > ATTRIBUTES_TEXT_BYTES_MAX {
        return Err(format!("attributes are {} bytes; at most {ATTRIBUTES_TEXT_BYTES_MAX}", text.len()));
    }
    let mut out = BTreeMap::new();
    if text.is_empty() {
        return Ok(out);
    }
    for kv in text.split(',') {
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => {
                if !k.contains('+') {
                    return Err(format!("add/alter attribute format is wrong: {k}"));
                }
                (k, v)
            }
            None => {
                if !kv.contains('-') {
                    return Err(format!("delete attribute format is wrong: {kv}"));
                }
                (kv, "")
            }
        };
        if out.insert(key.to_string(), value.to_string()).is_some() {
            return Err(format!("key duplication: {key}"));
        }
    }
    Ok(out)
}

/// Whether RingMQ honours `value` for attribute `key` (Java's own check first).
fn check_value(key: &str, value: &str) -> Result<(), String> {
    let Some((_, _, allowed)) = ATTRIBUTES.iter().find(|(k, _, _)| *k == key) else {
        return Err(format!("unsupported key: {key}"));
    };
    match (key, value) {
        ("reserve.time", _) => Err("Update topic reserveTime not supported".into()),
        (_, v) if !allowed.contains(&v) => Err(format!("value is not in set: {allowed:?}")),
        ("message.type", "MIXED") => Err("MIXED message type is not supported.".into()),
        ("cleanup.policy", "COMPACTION") => Err("cleanup.policy=COMPACTION: RingMQ does not implement compacted topics; use DELETE".into()),
        ("queue.type", "BatchCQ") => Err("queue.type=BatchCQ: RingMQ does not implement batch consume queues; use SimpleCQ".into()),
        _ => Ok(()),
    }
}

/// Java's `AttributeUtil.alterCurrentAttributes`: the attributes a topic has after
/// `modification` (parsed by [`parse`]) applies to `current`. `create`: the topic is
/// new, so only additions are allowed and unchangeable attributes may be set.
pub fn alter(create: bool, current: &BTreeMap<String, String>, modification: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    let mut next = current.clone();
    for (signed, value) in modification {
        let real = &signed[1..];
        if real.is_empty() || real.contains('+') || real.contains('-') {
            return Err("kv string format wrong.".into());
        }
        let changeable = ATTRIBUTES.iter().find(|(k, _, _)| *k == real).map(|(_, c, _)| *c);
        let Some(changeable) = changeable else { return Err(format!("unsupported key: {real}")) };
        match (create, signed.starts_with('+'), signed.starts_with('-')) {
            (true, true, _) => {}
            (true, false, _) => return Err(format!("only add attribute is supported while creating topic. key: {real}")),
            (false, true, _) | (false, _, true) if !changeable => return Err(format!("attempt to update an unchangeable attribute. key: {real}")),
            (false, true, _) => {}
            (false, _, true) if !current.contains_key(real) => return Err(format!("attempt to delete a nonexistent key: {real}")),
            (false, _, true) => {
                next.remove(real);
                continue;
            }
            _ => return Err(format!("wrong format key: {real}")),
        }
        check_value(real, value)?;
        next.insert(real.to_string(), value.clone());
    }
    Ok(next)
}

/// Checks stored attributes (a decoded topic table).
pub fn validate(attributes: &BTreeMap<String, String>) -> Result<(), String> {
    attributes.iter().try_for_each(|(k, v)| check_value(k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// (create?, current, modification text, Ok(final) or the words of the refusal)
    fn check(create: bool, current: &[(&str, &str)], text: &str, want: Result<&[(&str, &str)], &str>) {
        let got = parse(text).and_then(|m| alter(create, &map(current), &m));
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(got, map(want), "{text}"),
            (Err(e), Err(words)) => assert!(e.contains(words), "{text}: {e} lacks {words}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn attributes_alter_as_java_does() {
        check(true, &[], "", Ok(&[]));
        check(true, &[], "+message.type=FIFO", Ok(&[("message.type", "FIFO")]));
        check(true, &[], "+message.type=NORMAL,+cleanup.policy=DELETE,+queue.type=SimpleCQ", Ok(&[("message.type", "NORMAL"), ("cleanup.policy", "DELETE"), ("queue.type", "SimpleCQ")]));
        check(false, &[("message.type", "FIFO")], "+message.type=DELAY", Ok(&[("message.type", "DELAY")]));
        check(false, &[("message.type", "FIFO")], "-message.type", Ok(&[]));
        check(false, &[("message.type", "FIFO")], "", Ok(&[("message.type", "FIFO")]));
        // Java's refusals, word for word where Java has words.
        check(true, &[], "-message.type", Err("only add attribute is supported while creating topic"));
        check(false, &[], "-message.type", Err("attempt to delete a nonexistent key: message.type"));
        check(false, &[("queue.type", "SimpleCQ")], "+queue.type=SimpleCQ", Err("attempt to update an unchangeable attribute. key: queue.type"));
        check(true, &[], "+message.type=FIFO,+message.type=FIFO", Err("key duplication"));
        check(true, &[], "message.type=FIFO", Err("add/alter attribute format is wrong"));
        check(true, &[], "message.type", Err("delete attribute format is wrong"));
        check(true, &[], "+colour=red", Err("unsupported key: colour"));
        check(true, &[], "+message.type=BIG", Err("value is not in set"));
        check(true, &[], "+message.type=MIXED", Err("MIXED message type is not supported."));
        check(true, &[], "+reserve.time=3", Err("Update topic reserveTime not supported"));
        // What RingMQ does not build is refused, not stored.
        check(true, &[], "+cleanup.policy=COMPACTION", Err("does not implement compacted topics"));
        check(true, &[], "+queue.type=BatchCQ", Err("does not implement batch consume queues"));
        check(true, &[], &"+message.type=FIFO,".repeat(100), Err("at most"));
    }
}
