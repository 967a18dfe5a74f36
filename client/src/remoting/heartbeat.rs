//! The HEART_BEAT body (`HeartbeatData`) and tag-hash computation for subscriptions.
//!
//! Decoding accepts every dialect seen on the wire (DESIGN.md §6): enums as ordinals or
//! names, `subVersion` as a string or a number, `null` or missing collections, missing
//! `expressionType` (TAG). Encoding writes fastjson's shape: enums by name, keys sorted.
//!
//! Invariant: the broker derives tag codes from `subString` (`tag_codes`), never from a
//! client's `codeSet`, because one published client hashes untrimmed tags.

use super::json::de::{bool_lenient, i64_lenient, null_default, string_lenient, vec_i32_lenient, vec_string_lenient};
use super::json::{from_json_lenient, java_enum, to_json, BodyError};
use crate::hash::java_string_hash;
use serde::{Deserialize, Serialize};

/// The expression that subscribes to every tag.
pub const SUB_ALL: &str = "*";
/// Separator between tags in a TAG expression.
pub const TAG_SEPARATOR: &str = "||";
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

java_enum! {
    /// Push consumers are CONSUME_PASSIVELY; Java calls them "PUSH" in other places.
    ConsumeType default ConsumePassively {
        ConsumeActively = 0, "CONSUME_ACTIVELY" | "PULL";
        ConsumePassively = 1, "CONSUME_PASSIVELY" | "PUSH";
        ConsumePop = 2, "CONSUME_POP" | "POP";
    }
}

java_enum! {
    MessageModel default Clustering {
        Broadcasting = 0, "BROADCASTING";
        Clustering = 1, "CLUSTERING";
    }
}

java_enum! {
    ConsumeFromWhere default ConsumeFromLastOffset {
        ConsumeFromLastOffset = 0, "CONSUME_FROM_LAST_OFFSET";
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = 1, "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST";
        ConsumeFromMinOffset = 2, "CONSUME_FROM_MIN_OFFSET";
        ConsumeFromMaxOffset = 3, "CONSUME_FROM_MAX_OFFSET";
        ConsumeFromFirstOffset = 4, "CONSUME_FROM_FIRST_OFFSET";
        ConsumeFromTimestamp = 5, "CONSUME_FROM_TIMESTAMP";
    }
}

fn default_sub_string() -> String {
    SUB_ALL.to_string()
}

fn default_expression_type() -> String {
    EXPRESSION_TYPE_TAG.to_string()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default, deserialize_with = "bool_lenient")]
    pub class_filter_mode: bool,
    /// As the client sent it; see `tag_codes` for what the broker should use.
    #[serde(default, deserialize_with = "vec_i32_lenient")]
    pub code_set: Vec<i32>,
    #[serde(default = "default_expression_type", deserialize_with = "expression_type_lenient")]
    pub expression_type: String,
    /// Java treats a missing or empty expression as "*".
    #[serde(default = "default_sub_string", deserialize_with = "sub_string_lenient")]
    pub sub_string: String,
    #[serde(default, deserialize_with = "i64_lenient")]
    pub sub_version: i64,
    #[serde(default, deserialize_with = "vec_string_lenient")]
    pub tags_set: Vec<String>,
    #[serde(deserialize_with = "string_lenient")]
    pub topic: String,
}

fn expression_type_lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = string_lenient(d)?;
    Ok(if s.is_empty() { default_expression_type() } else { s })
}

fn sub_string_lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = string_lenient(d)?;
    Ok(if s.trim().is_empty() { default_sub_string() } else { s })
}

impl SubscriptionData {
    /// A TAG subscription with tags and codes derived from `sub_string`.
    pub fn new(topic: &str, sub_string: &str, sub_version: i64) -> Self {
        let mut s = Self {
            class_filter_mode: false,
            code_set: Vec::new(),
            expression_type: default_expression_type(),
            sub_string: sub_string.to_string(),
            sub_version,
            tags_set: Vec::new(),
            topic: topic.to_string(),
        };
        s.recompute_tags();
        s
    }

    /// Replaces the client's `tagsSet` / `codeSet` with ones derived from `sub_string`
    /// (TAG expressions only; SQL92 filters have none).
    pub fn recompute_tags(&mut self) {
        if self.expression_type.eq_ignore_ascii_case(EXPRESSION_TYPE_TAG) {
            self.tags_set = tags(&self.sub_string);
            self.code_set = self.tags_set.iter().map(|t| java_string_hash(t)).collect();
        } else {
            self.tags_set.clear();
            self.code_set.clear();
        }
    }
}

/// Whether a TAG expression subscribes to everything.
pub fn is_sub_all(sub_string: &str) -> bool {
    let s = sub_string.trim();
    s.is_empty() || s == SUB_ALL
}

/// The tags of a TAG expression: split on `||`, trimmed, empties skipped. Empty for
/// "*" (see `is_sub_all`), in which case everything matches.
pub fn tags(sub_string: &str) -> Vec<String> {
    if is_sub_all(sub_string) {
        return Vec::new();
    }
    sub_string.split(TAG_SEPARATOR).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// Java hash codes of the tags of a TAG expression; empty for "*".
pub fn tag_codes(sub_string: &str) -> Vec<i32> {
    tags(sub_string).iter().map(|t| java_string_hash(t)).collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    #[serde(default, deserialize_with = "null_default")]
    pub consume_from_where: ConsumeFromWhere,
    #[serde(default, deserialize_with = "null_default")]
    pub consume_type: ConsumeType,
    #[serde(deserialize_with = "string_lenient")]
    pub group_name: String,
    #[serde(default, deserialize_with = "null_default")]
    pub message_model: MessageModel,
    #[serde(default, deserialize_with = "null_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default, deserialize_with = "bool_lenient")]
    pub unit_mode: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    #[serde(deserialize_with = "string_lenient")]
    pub group_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID", deserialize_with = "string_lenient")]
    pub client_id: String,
    #[serde(default, deserialize_with = "null_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    #[serde(default, deserialize_with = "null_default")]
    pub producer_data_set: Vec<ProducerData>,
}

impl HeartbeatData {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        from_json_lenient(body)
    }

    pub fn encode(&self) -> Vec<u8> {
        to_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &str, expected: Option<HeartbeatData>) {
        assert_eq!(HeartbeatData::decode(input.as_bytes()).ok(), expected, "decoding {input}");
    }

    fn sub(topic: &str, sub_string: &str, version: i64) -> SubscriptionData {
        SubscriptionData { code_set: vec![], tags_set: vec![], ..SubscriptionData::new(topic, sub_string, version) }
    }

    fn consumer(
        group: &str,
        ct: ConsumeType,
        mm: MessageModel,
        cfw: ConsumeFromWhere,
        subs: Vec<SubscriptionData>,
    ) -> ConsumerData {
        ConsumerData {
            consume_from_where: cfw,
            consume_type: ct,
            group_name: group.into(),
            message_model: mm,
            subscription_data_set: subs,
            unit_mode: false,
        }
    }

    fn hb(consumers: Vec<ConsumerData>, producers: &[&str]) -> HeartbeatData {
        HeartbeatData {
            client_id: "10.0.0.1@123".into(),
            consumer_data_set: consumers,
            producer_data_set: producers.iter().map(|g| ProducerData { group_name: g.to_string() }).collect(),
        }
    }

    #[test]
    fn dialects() {
        use ConsumeFromWhere::*;
        use ConsumeType::*;
        use MessageModel::*;
        // Java: names, full fields.
        check(
            r#"{"clientID":"10.0.0.1@123","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}"#,
            Some(hb(
                vec![consumer(
                    "G",
                    ConsumePassively,
                    Clustering,
                    ConsumeFromFirstOffset,
                    vec![SubscriptionData {
                        code_set: vec![2598919],
                        tags_set: vec!["TagA".into()],
                        ..sub("T", "TagA", 1_700_000_000_000)
                    }],
                )],
                &["CLIENT_INNER_PRODUCER"],
            )),
        );
        // Ordinals, subVersion as string, missing optional fields.
        check(
            r#"{"clientID":"10.0.0.1@123","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"G","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"42","topic":"T"}]}]}"#,
            Some(hb(
                vec![consumer("G", ConsumePassively, Clustering, ConsumeFromLastOffset, vec![sub("T", "*", 42)])],
                &[],
            )),
        );
        // Go-style nulls, ordinals as strings, lower-case names, PUSH alias.
        check(
            r#"{"clientID":"10.0.0.1@123","producerDataSet":null,"consumerDataSet":[{"consumeFromWhere":"5","consumeType":"PUSH","groupName":"G","messageModel":"broadcasting","subscriptionDataSet":[{"topic":"T","subString":"","tagsSet":null,"codeSet":null,"expressionType":null,"subVersion":7}],"unitMode":"true"}]}"#,
            Some(hb(
                vec![ConsumerData {
                    unit_mode: true,
                    ..consumer("G", ConsumePassively, Broadcasting, ConsumeFromTimestamp, vec![sub("T", "*", 7)])
                }],
                &[],
            )),
        );
        check(r#"{"clientID":"10.0.0.1@123"}"#, Some(hb(vec![], &[])));
        check(r#"{"clientID":"10.0.0.1@123","unknown":{"x":[1,2]}}"#, Some(hb(vec![], &[])));
        check(r#"{"consumerDataSet":[]}"#, None);
        check(r#"{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":9}]}"#, None);
        check(r#"{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":"SOMETIMES"}]}"#, None);
        check(
            r#"{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"subString":"*"}]}]}"#,
            None,
        );
        check("not json", None);
    }

    #[test]
    fn encodes_enum_names() {
        let h = hb(
            vec![consumer(
                "G",
                ConsumeType::ConsumeActively,
                MessageModel::Broadcasting,
                ConsumeFromWhere::ConsumeFromTimestamp,
                vec![],
            )],
            &[],
        );
        let text = String::from_utf8(h.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"clientID":"10.0.0.1@123","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_TIMESTAMP","consumeType":"CONSUME_ACTIVELY","groupName":"G","messageModel":"BROADCASTING","subscriptionDataSet":[],"unitMode":false}],"producerDataSet":[]}"#
        );
    }

    fn check_codes(input: &str, expected: &[&str]) {
        let want: Vec<i32> = expected.iter().map(|t| java_string_hash(t)).collect();
        assert_eq!(tag_codes(input), want, "tag codes of {input:?}");
    }

    #[test]
    fn tag_code_cases() {
        check_codes("*", &[]);
        check_codes(" * ", &[]);
        check_codes("", &[]);
        check_codes("TagA", &["TagA"]);
        check_codes("TagA || TagB", &["TagA", "TagB"]);
        check_codes("TagA||TagB||", &["TagA", "TagB"]);
        check_codes("|| ||TagC", &["TagC"]);
        check_codes("Tag A||*", &["Tag A", "*"]);
        check_codes("a|b", &["a|b"]);
        assert_eq!(tag_codes("TagA"), vec![2598919]);
        assert!(is_sub_all("*") && is_sub_all("") && !is_sub_all("TagA"));
        let mut s = SubscriptionData { code_set: vec![1], ..SubscriptionData::new("T", "TagA || TagB", 1) };
        s.recompute_tags();
        assert_eq!(s.tags_set, vec!["TagA".to_string(), "TagB".to_string()]);
        s.expression_type = EXPRESSION_TYPE_SQL92.into();
        s.recompute_tags();
        assert!(s.code_set.is_empty() && s.tags_set.is_empty());
    }

    fn arb_sub() -> impl Strategy<Value = SubscriptionData> {
        (
            ".{0,8}",
            "[A-Za-z *|]{1,20}",
            any::<i64>(),
            any::<bool>(),
            proptest::collection::vec(any::<i32>(), 0..3),
            "TAG|SQL92",
        )
            .prop_map(|(topic, sub_string, v, cfm, codes, et)| {
                let sub_string = if sub_string.trim().is_empty() { "*".to_string() } else { sub_string };
                SubscriptionData {
                    class_filter_mode: cfm,
                    code_set: codes,
                    expression_type: et,
                    sub_string,
                    sub_version: v,
                    tags_set: vec![topic.clone()],
                    topic,
                }
            })
    }

    fn arb_heartbeat() -> impl Strategy<Value = HeartbeatData> {
        let consumer = (
            ".{0,8}",
            prop::sample::select(ConsumeType::ALL.to_vec()),
            prop::sample::select(MessageModel::ALL.to_vec()),
            prop::sample::select(ConsumeFromWhere::ALL.to_vec()),
            proptest::collection::vec(arb_sub(), 0..3),
            any::<bool>(),
        )
            .prop_map(|(g, ct, mm, cfw, subs, um)| ConsumerData {
                consume_from_where: cfw,
                consume_type: ct,
                group_name: g,
                message_model: mm,
                subscription_data_set: subs,
                unit_mode: um,
            });
        (".{0,16}", proptest::collection::vec(consumer, 0..3), proptest::collection::vec(".{0,8}", 0..3)).prop_map(
            |(c, cs, ps)| HeartbeatData {
                client_id: c,
                consumer_data_set: cs,
                producer_data_set: ps.into_iter().map(|g| ProducerData { group_name: g }).collect(),
            },
        )
    }

    proptest! {
        #[test]
        fn roundtrip(h in arb_heartbeat()) {
            prop_assert_eq!(HeartbeatData::decode(&h.encode()).unwrap(), h);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = HeartbeatData::decode(&bytes);
        }
    }
}
