//! Apache RocketMQ's message trace records (`TraceContext`, `TraceBean`, `TraceType`)
//! and their text form, encoded and decoded exactly as Java's `TraceDataEncoder` does:
//! a record's fields are joined by `CONTENT_SPLITOR` (`\u{1}`), each record ends with
//! `FIELD_SPLITOR` (`\u{2}`), and a trace message's body is records one after another.
//!
//! Invariants: `encode` writes the fields, in the order and with the separators, Java's
//! `encoderFromContextBean` writes (checked against strings from Apache's
//! `TraceDataEncoderTest`); `decode` reads what Java's `decoderFromTraceDataString`
//! reads, including Java's `String.split` dropping trailing empty fields, and never
//! panics: a record Java would fail on is a typed [`TraceDecodeError`].

use std::collections::BTreeSet;

/// Java's `TraceConstants.CONTENT_SPLITOR`: between the fields of one record.
pub const CONTENT_SPLITOR: char = '\u{1}';
/// Java's `TraceConstants.FIELD_SPLITOR`: after each record.
pub const FIELD_SPLITOR: char = '\u{2}';
/// Java's `MessageConst.KEY_SEPARATOR`: between the keys of a message's `KEYS`.
pub const KEY_SEPARATOR: char = ' ';

/// Java's `TraceType`; `name()` is the record's first field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceType {
    Pub,
    Recall,
    SubBefore,
    SubAfter,
    EndTransaction,
}

impl TraceType {
    pub fn name(self) -> &'static str {
        match self {
            TraceType::Pub => "Pub",
            TraceType::Recall => "Recall",
            TraceType::SubBefore => "SubBefore",
            TraceType::SubAfter => "SubAfter",
            TraceType::EndTransaction => "EndTransaction",
        }
    }
}

/// Java's `MessageType`; a record carries its ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageType {
    #[default]
    Normal,
    TransHalf,
    TransCommit,
    Delay,
    Order,
}

impl MessageType {
    const ALL: [MessageType; 5] = [MessageType::Normal, MessageType::TransHalf, MessageType::TransCommit, MessageType::Delay, MessageType::Order];

    pub fn ordinal(self) -> usize {
        self as usize
    }

    pub fn from_ordinal(n: usize) -> Option<Self> {
        Self::ALL.get(n).copied()
    }
}

/// Java's `TraceBean`: what a record says about one message. Strings default to
/// empty, as Java's fields do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceBean {
    pub topic: String,
    /// The producer's id (`UNIQ_KEY`): the key a trace is found by.
    pub msg_id: String,
    pub offset_msg_id: String,
    pub tags: String,
    /// The message's `KEYS`, space-separated.
    pub keys: String,
    pub store_host: String,
    pub client_host: String,
    pub store_time: i64,
    pub retry_times: i32,
    pub body_length: i32,
    pub msg_type: MessageType,
    pub transaction_id: String,
    /// Java's `LocalTransactionState` name (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW).
    pub transaction_state: String,
    pub from_transaction_check: bool,
}

/// Java's `TraceContext`: one traced event and the messages it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_type: TraceType,
    /// Milliseconds since the epoch.
    pub time_stamp: i64,
    pub region_id: String,
    pub group_name: String,
    pub cost_time: i32,
    pub success: bool,
    /// Ties a SubAfter to its SubBefore.
    pub request_id: String,
    /// Java's `ConsumeReturnType` ordinal (SubAfter).
    pub context_code: i32,
    /// Java's `AccessChannel.CLOUD`: a SubAfter then leaves out its time and group.
    pub cloud: bool,
    pub beans: Vec<TraceBean>,
}

impl TraceContext {
    pub fn new(trace_type: TraceType, time_stamp: i64) -> Self {
        Self {
            trace_type,
            time_stamp,
            region_id: String::new(),
            group_name: String::new(),
            cost_time: 0,
            success: true,
            request_id: String::new(),
            context_code: 0,
            cloud: false,
            beans: Vec::new(),
        }
    }
}

/// Java's `TraceTransferBean`: a context's text and the keys its trace message is
/// indexed by (each bean's message id and message keys).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceTransfer {
    pub data: String,
    pub keys: BTreeSet<String>,
}

/// A record Java's decoder would fail on (a missing field, a number that does not
/// parse, an unknown message type).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace record {record}: {reason}")]
pub struct TraceDecodeError {
    /// Index of the record in the trace text.
    pub record: usize,
    pub reason: String,
}

/// One record: `fields` joined by `CONTENT_SPLITOR`, then `FIELD_SPLITOR`.
fn push_record(s: &mut String, fields: &[&dyn std::fmt::Display]) {
    use std::fmt::Write;
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            s.push(CONTENT_SPLITOR);
        }
        let _ = write!(s, "{field}"); // writing into a String cannot fail
    }
    s.push(FIELD_SPLITOR);
}

/// The message fields Pub and EndTransaction records write after their head.
fn message_fields(b: &TraceBean) -> [&dyn std::fmt::Display; 5] {
    [&b.topic, &b.msg_id, &b.tags, &b.keys, &b.store_host]
}

/// Java's `encoderFromContextBean`. A context without beans encodes to no text (Java
/// would throw).
pub fn encode(ctx: &TraceContext) -> TraceTransfer {
    let mut s = String::with_capacity(256);
    let t = ctx.trace_type.name();
    // What Pub, SubBefore, EndTransaction and Recall records begin with.
    let head: [&dyn std::fmt::Display; 4] = [&t, &ctx.time_stamp, &ctx.region_id, &ctx.group_name];
    match (ctx.trace_type, ctx.beans.first()) {
        (_, None) => {}
        (TraceType::Pub, Some(b)) => {
            let tail: [&dyn std::fmt::Display; 5] = [&b.body_length, &ctx.cost_time, &b.msg_type.ordinal(), &b.offset_msg_id, &ctx.success];
            push_record(&mut s, &[&head[..], &message_fields(b)[..], &tail[..]].concat());
        }
        (TraceType::SubBefore, Some(_)) => {
            for b in &ctx.beans {
                push_record(&mut s, &[&head[..], &[&ctx.request_id, &b.msg_id, &b.retry_times, &b.keys]].concat());
            }
        }
        (TraceType::SubAfter, Some(_)) => {
            for b in &ctx.beans {
                let fields: [&dyn std::fmt::Display; 7] = [&t, &ctx.request_id, &b.msg_id, &ctx.cost_time, &ctx.success, &b.keys, &ctx.context_code];
                // The cloud channel ends the record with a splitter and no time or group.
                let last: [&dyn std::fmt::Display; 2] = [&ctx.time_stamp, &ctx.group_name];
                let last: &[&dyn std::fmt::Display] = if ctx.cloud { &[&""] } else { &last };
                push_record(&mut s, &[&fields[..], last].concat());
            }
        }
        (TraceType::EndTransaction, Some(b)) => {
            let tail: [&dyn std::fmt::Display; 4] = [&b.msg_type.ordinal(), &b.transaction_id, &b.transaction_state, &b.from_transaction_check];
            push_record(&mut s, &[&head[..], &message_fields(b)[..], &tail[..]].concat());
        }
        (TraceType::Recall, Some(b)) => push_record(&mut s, &[&head[..], &[&b.topic, &b.msg_id, &ctx.success]].concat()),
    }
    let mut keys = BTreeSet::new();
    for b in &ctx.beans {
        keys.insert(b.msg_id.clone());
        // Java adds the empty pieces `String.split` keeps too; an empty key finds nothing.
        keys.extend(b.keys.split(KEY_SEPARATOR).filter(|k| !k.is_empty()).map(str::to_string));
    }
    TraceTransfer { data: s, keys }
}

/// Java's `String.split(sep)`: trailing empty pieces are dropped (an empty text is one
/// empty piece).
fn java_split(text: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = text.split(sep).collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() && !text.is_empty() {
        parts.clear(); // Java: a text of separators only splits into nothing
    }
    parts
}

/// Java's `Boolean.parseBoolean`.
fn java_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// Java's `decoderFromTraceDataString`: every record of a trace message's body.
/// Records of an unknown type are skipped, as Java skips them.
pub fn decode(data: &str) -> Result<Vec<TraceContext>, TraceDecodeError> {
    let mut out = Vec::new();
    if data.is_empty() {
        return Ok(out);
    }
    for (record, text) in java_split(data, FIELD_SPLITOR).into_iter().enumerate() {
        let line = java_split(text, CONTENT_SPLITOR);
        let err = |reason: String| TraceDecodeError { record, reason };
        let field = |i: usize| line.get(i).copied().ok_or_else(|| err(format!("{} fields, field {i} missing", line.len())));
        let long = |i: usize| field(i).and_then(|v| v.parse::<i64>().map_err(|_| err(format!("field {i} {v:?} is not a long"))));
        let int = |i: usize| field(i).and_then(|v| v.parse::<i32>().map_err(|_| err(format!("field {i} {v:?} is not an int"))));
        let msg_type = |i: usize| {
            let v = field(i)?;
            v.parse::<usize>().ok().and_then(MessageType::from_ordinal).ok_or_else(|| err(format!("field {i} {v:?} is not a message type")))
        };
        let head = |t: TraceType| -> Result<TraceContext, TraceDecodeError> {
            let mut ctx = TraceContext::new(t, long(1)?);
            ctx.region_id = field(2)?.to_string();
            ctx.group_name = field(3)?.to_string();
            Ok(ctx)
        };
        // Fields 4 to 8 of Pub and EndTransaction records.
        let message = || -> Result<TraceBean, TraceDecodeError> {
            let [topic, msg_id, tags, keys, store_host] = [4, 5, 6, 7, 8].map(|i| field(i).map(str::to_string));
            Ok(TraceBean { topic: topic?, msg_id: msg_id?, tags: tags?, keys: keys?, store_host: store_host?, ..TraceBean::default() })
        };
        let ctx = match line.first().copied().unwrap_or("") {
            "Pub" => {
                let mut ctx = head(TraceType::Pub)?;
                let mut b = TraceBean { body_length: int(9)?, msg_type: msg_type(11)?, ..message()? };
                ctx.cost_time = int(10)?;
                match line.len() {
                    13 => ctx.success = java_bool(field(12)?),
                    n if n >= 14 => {
                        b.offset_msg_id = field(12)?.into();
                        ctx.success = java_bool(field(13)?);
                        if n >= 15 {
                            b.client_host = field(14)?.into(); // older clients wrote it
                        }
                    }
                    _ => {}
                }
                ctx.beans.push(b);
                ctx
            }
            "SubBefore" => {
                let mut ctx = head(TraceType::SubBefore)?;
                ctx.request_id = field(4)?.into();
                ctx.beans.push(TraceBean { msg_id: field(5)?.into(), retry_times: int(6)?, keys: field(7)?.into(), ..TraceBean::default() });
                ctx
            }
            "SubAfter" => {
                // Java leaves the time at "now" when a record has none; 0 says "unknown".
                let mut ctx = TraceContext::new(TraceType::SubAfter, 0);
                ctx.request_id = field(1)?.into();
                ctx.beans.push(TraceBean { msg_id: field(2)?.into(), keys: field(5)?.into(), ..TraceBean::default() });
                ctx.cost_time = int(3)?;
                ctx.success = java_bool(field(4)?);
                if line.len() >= 7 {
                    ctx.context_code = int(6)?;
                }
                if line.len() >= 9 {
                    ctx.time_stamp = long(7)?;
                    ctx.group_name = field(8)?.into();
                }
                ctx
            }
            "EndTransaction" => {
                let mut ctx = head(TraceType::EndTransaction)?;
                ctx.beans.push(TraceBean {
                    msg_type: msg_type(9)?,
                    transaction_id: field(10)?.into(),
                    transaction_state: field(11)?.into(),
                    from_transaction_check: java_bool(field(12)?),
                    ..message()?
                });
                ctx
            }
            "Recall" => {
                let mut ctx = head(TraceType::Recall)?;
                ctx.beans.push(TraceBean { topic: field(4)?.into(), msg_id: field(5)?.into(), ..TraceBean::default() });
                ctx.success = java_bool(field(6)?);
                ctx
            }
            _ => continue,
        };
        out.push(ctx);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIME: i64 = 1_625_883_640_000;

    fn j(fields: &[&str]) -> String {
        let mut s = fields.join("\u{1}");
        s.push(FIELD_SPLITOR);
        s
    }

    fn bean(f: impl FnOnce(&mut TraceBean)) -> TraceBean {
        let mut b = TraceBean::default();
        f(&mut b);
        b
    }

    fn context(t: TraceType, f: impl FnOnce(&mut TraceContext)) -> TraceContext {
        let mut c = TraceContext::new(t, TIME);
        f(&mut c);
        c
    }

    /// check(input, expected text, expected keys, expected field count): encodes, compares,
    /// decodes the text again and compares the fields Java's decoder restores.
    fn check(input: TraceContext, expected: &str, keys: &[&str], fields: usize) {
        let got = encode(&input);
        assert_eq!(got.data, expected, "{input:?}");
        assert_eq!(got.keys, keys.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>());
        assert_eq!(got.data.split(CONTENT_SPLITOR).count(), fields, "Java's items.length");
        let back = decode(&got.data).unwrap();
        assert_eq!(back.len(), input.beans.len().max(1));
        let (d, b, ib) = (&back[0], &back[0].beans[0], &input.beans[0]);
        assert_eq!((d.trace_type, &d.request_id, d.success), (input.trace_type, &input.request_id, input.success));
        assert_eq!((&b.msg_id, &b.keys), (&ib.msg_id, &ib.keys));
        if input.trace_type != TraceType::SubAfter || !input.cloud {
            assert_eq!((d.time_stamp, &d.group_name), (input.time_stamp, &input.group_name));
        }
        match input.trace_type {
            TraceType::Pub => assert_eq!(b, &TraceBean { store_time: 0, ..ib.clone() }),
            TraceType::EndTransaction => assert_eq!(b, ib),
            TraceType::SubAfter => assert_eq!((d.cost_time, d.context_code), (input.cost_time, input.context_code)),
            _ => {}
        }
    }

    #[test]
    fn encodes_as_apache_trace_data_encoder() {
        // Apache's TraceDataEncoderTest.testEncoderFromContextBean / init().
        let pub_ctx = context(TraceType::Pub, |c| {
            (c.group_name, c.region_id, c.cost_time, c.success) = ("PID-test".into(), "DefaultRegion".into(), 245, true);
            c.beans.push(bean(|b| {
                (b.topic, b.keys, b.tags) = ("topic-test".into(), "Keys".into(), "Tags".into());
                (b.msg_id, b.offset_msg_id) = ("AC1415116D1418B4AAC217FE1B4E0000".into(), "0A9A002600002A9F0000000000002329".into());
                (b.store_host, b.store_time, b.body_length) = ("127.0.0.1:10911".into(), TIME, 26);
            }));
        });
        let pub_text = j(&[
            "Pub", "1625883640000", "DefaultRegion", "PID-test", "topic-test", "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys",
            "127.0.0.1:10911", "26", "245", "0", "0A9A002600002A9F0000000000002329", "true",
        ]);
        check(pub_ctx, &pub_text, &["AC1415116D1418B4AAC217FE1B4E0000", "Keys"], 14);
        // testSubBeforeTraceDataFormatTest: 8 items.
        let before = context(TraceType::SubBefore, |c| {
            (c.region_id, c.group_name, c.request_id) = ("Default-region".into(), "GroupName-test".into(), "3455848576927".into());
            c.beans.push(bean(|b| (b.msg_id, b.retry_times, b.keys) = ("AC1415116D1418B4AAC217FE1B4E0000".into(), 0, "keys".into())));
        });
        let before_text = j(&["SubBefore", "1625883640000", "Default-region", "GroupName-test", "3455848576927", "AC1415116D1418B4AAC217FE1B4E0000", "0", "keys"]);
        check(before, &before_text, &["AC1415116D1418B4AAC217FE1B4E0000", "keys"], 8);
        // testSubAfterTraceDataFormatTest (AccessChannel.LOCAL): 9 items.
        let after = |cloud: bool| {
            context(TraceType::SubAfter, |c| {
                (c.request_id, c.cost_time, c.success, c.group_name, c.context_code) = ("3455848576927".into(), 20, true, "GroupName-test".into(), 98623046);
                c.cloud = cloud;
                c.beans.push(bean(|b| (b.msg_id, b.keys) = ("AC1415116D1418B4AAC217FE1B4E0000".into(), "keys".into())));
            })
        };
        let after_text = j(&["SubAfter", "3455848576927", "AC1415116D1418B4AAC217FE1B4E0000", "20", "true", "keys", "98623046", "1625883640000", "GroupName-test"]);
        check(after(false), &after_text, &["AC1415116D1418B4AAC217FE1B4E0000", "keys"], 9);
        // AccessChannel.CLOUD: no time or group, the record ends with the splitter.
        let cloud_text = "SubAfter\u{1}3455848576927\u{1}AC1415116D1418B4AAC217FE1B4E0000\u{1}20\u{1}true\u{1}keys\u{1}98623046\u{1}\u{2}";
        check(after(true), cloud_text, &["AC1415116D1418B4AAC217FE1B4E0000", "keys"], 8);
        // testEndTrxTraceDataFormatTest / testTraceKeys: 13 items, "Keys Keys2" are two keys.
        let end = context(TraceType::EndTransaction, |c| {
            (c.group_name, c.region_id) = ("PID-test".into(), "DefaultRegion".into());
            c.beans.push(bean(|b| {
                (b.topic, b.keys, b.tags, b.msg_id) = ("topic-test".into(), "Keys Keys2".into(), "Tags".into(), "AC1415116D1418B4AAC217FE1B4E0000".into());
                (b.store_host, b.msg_type, b.transaction_id) = ("127.0.0.1:10911".into(), MessageType::TransCommit, "transactionId".into());
                (b.transaction_state, b.from_transaction_check) = ("COMMIT_MESSAGE".into(), false);
            }));
        });
        let end_text = j(&[
            "EndTransaction", "1625883640000", "DefaultRegion", "PID-test", "topic-test", "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys Keys2",
            "127.0.0.1:10911", "2", "transactionId", "COMMIT_MESSAGE", "false",
        ]);
        check(end, &end_text, &["AC1415116D1418B4AAC217FE1B4E0000", "Keys", "Keys2"], 13);
        let recall = context(TraceType::Recall, |c| {
            (c.region_id, c.group_name, c.success) = ("DefaultRegion".into(), "PID-test".into(), false);
            c.beans.push(bean(|b| (b.topic, b.msg_id) = ("topic-test".into(), "AC1415116D1418B4AAC217FE1B4E0000".into())));
        });
        check(recall, &j(&["Recall", "1625883640000", "DefaultRegion", "PID-test", "topic-test", "AC1415116D1418B4AAC217FE1B4E0000", "false"]), &["AC1415116D1418B4AAC217FE1B4E0000"], 7);
    }

    /// check(text, expected: Ok(per record (type, msg id, success, offset id, client host)) or Err(words)).
    fn check_decode(text: &str, expected: Result<&[(TraceType, &str, bool, &str, &str)], &str>) {
        match (decode(text), expected) {
            (Ok(got), Ok(want)) => {
                let got: Vec<_> = got
                    .iter()
                    .map(|c| (c.trace_type, c.beans[0].msg_id.as_str(), c.success, c.beans[0].offset_msg_id.as_str(), c.beans[0].client_host.as_str()))
                    .collect();
                assert_eq!(got, want, "{text:?}");
            }
            (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{text:?}: {e}"),
            (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn decodes_as_apache_trace_data_encoder() {
        let p = |extra: &[&str]| {
            let mut f = vec!["Pub", "1", "R", "G", "T", "ID", "", "", "h:1", "26", "245", "0"];
            f.extend_from_slice(extra);
            j(&f)
        };
        check_decode("", Ok(&[]));
        // 13 fields: no offset id (older clients); 14: Apache's layout; 15: with client host.
        check_decode(&p(&["TRUE"]), Ok(&[(TraceType::Pub, "ID", true, "", "")]));
        check_decode(&p(&["OFF", "yes"]), Ok(&[(TraceType::Pub, "ID", false, "OFF", "")]));
        check_decode(&p(&["OFF", "true", "10.0.0.1"]), Ok(&[(TraceType::Pub, "ID", true, "OFF", "10.0.0.1")]));
        // Several records in one body; an unknown type is skipped as Java skips it.
        let two = format!("{}{}{}", p(&["OFF", "true"]), j(&["Unknown", "x"]), j(&["SubAfter", "req", "ID", "3", "false", "k"]));
        check_decode(&two, Ok(&[(TraceType::Pub, "ID", true, "OFF", ""), (TraceType::SubAfter, "ID", false, "", "")]));
        // What Java throws on is an error naming the record and field.
        check_decode(&j(&["Pub", "1", "R"]), Err("field 3 missing"));
        check_decode(&p(&["OFF", "true"]).replace("245", "x"), Err("field 10 \"x\" is not an int"));
        check_decode(&p(&["OFF", "true"]).replace("\u{1}0\u{1}OFF", "\u{1}9\u{1}OFF"), Err("not a message type"));
        check_decode(&j(&["SubBefore", "t", "R", "G", "req", "ID", "0", "k"]), Err("field 1 \"t\" is not a long"));
    }

    #[test]
    fn java_split_drops_trailing_empties() {
        assert_eq!(java_split("a\u{1}\u{1}b\u{1}\u{1}", '\u{1}'), vec!["a", "", "b"]);
        assert_eq!(java_split("", '\u{1}'), vec![""]);
        assert_eq!(java_split("\u{1}\u{1}", '\u{1}'), Vec::<&str>::new());
    }
}
