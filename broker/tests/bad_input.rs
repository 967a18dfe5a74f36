//! Bad input against a live broker (issue 6): malformed frames, hostile length fields,
//! oversize bodies, unknown codes, broken JSON and binary headers, byte-at-a-time and
//! pipelined frames, half frames, seeded random and mutated frames, and thousands of
//! idle connections next to a steady load. After every case the broker must have
//! answered with the documented error or closed that connection (never anything else),
//! and a fresh connection must still SEND_MESSAGE_V2 and PULL the message back. Both
//! tests check that sockets return to their baseline. The idle-connection test lives in
//! `idle_connections.rs`: it measures this process's fds and RSS, so it runs in a
//! process of its own (it failed here when the other tests' stores opened files
//! meanwhile). Shared helpers: `common/mod.rs`.
//!
//! Documented behaviour (broker/src/net/conn.rs, client/src/remoting/frame.rs):
//! - a frame refused from its prefix (length < 4 or negative, frame over 16 MiB, header
//!   longer than the frame, serialize type other than 0/1, body over
//!   `max_message_bytes` + `FRAME_SLACK_BYTES`) closes the connection;
//! - a header that does not parse gets a JSON SYSTEM_ERROR response with opaque 0 and
//!   the connection goes on;
//! - a request that parses gets its handler's answer (REQUEST_CODE_NOT_SUPPORTED,
//!   MESSAGE_ILLEGAL, INVALID_PARAMETER, TOPIC_NOT_EXIST, ...) with its opaque echoed.
//!
//! Environment: `RINGMQ_SEED` replays a random run (the seed is printed, and repeated on
//! failure), `RINGMQ_BAD_INPUT_ITERS` sets the random and the mutated frame counts
//! (default 2500 each).

mod common;

use bytes::BytesMut;
use common::{encode, fds_settle, get_max_offset, pull, rss_bytes, send, settled_fds, Broker, Conn, Got, MIB};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ringmq_broker::net::conn::FRAME_SLACK_BYTES;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::{encode_binary_header, RemotingCommand, FLAG_ONEWAY, FLAG_RESPONSE};
use ringmq_client::remoting::frame::{FrameLimits, SerializeType, FRAME_LEN_MAX_BYTES};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The probe topic; bad input never names it on purpose.
const TOPIC: &str = "BAD";
/// The topic the mutated frames start from (mutations may still rename it).
const MUT_TOPIC: &str = "MUT";
const QUEUES: i32 = 4;
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The two tests share the process's fd table and RSS: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A 2-shard broker in this process with the probe topic and the mutation topic.
fn start_broker() -> Broker {
    Broker::start(
        |config| {
            common::sync_small_segments(config);
            assert_eq!(config.max_message_bytes as usize, MAX_MESSAGE_BYTES, "the cases assume the default limit");
        },
        &[(TOPIC, QUEUES), (MUT_TOPIC, QUEUES)],
    )
}

/// The liveness check after every case (see `common::probe`).
fn probe(addr: SocketAddr, n: u64) {
    common::probe(addr, TOPIC, n);
}

// ---------------------------------------------------------------- frame builders

/// A frame with the given length field and serialize-type/header-length word.
fn raw(length: u32, word: u32, rest: &[u8]) -> Vec<u8> {
    let mut v = length.to_be_bytes().to_vec();
    v.extend_from_slice(&word.to_be_bytes());
    v.extend_from_slice(rest);
    v
}

/// A well-formed frame around any header and body bytes.
fn frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let length = (4 + header.len() + body.len()) as u32;
    raw(length, (u32::from(serialize_type) << 24) | header.len() as u32, &[header, body].concat())
}

fn json(header: &str) -> Vec<u8> {
    frame(0, header.as_bytes(), b"")
}

/// A JSON header of exactly `len` bytes: an unknown code and one ext value as padding.
fn json_header_of_len(len: usize, opaque: i32) -> Vec<u8> {
    let head = format!(r#"{{"code":9999,"opaque":{opaque},"extFields":{{"pad":""#);
    let tail = r#""}}"#;
    let mut h = head.into_bytes();
    h.resize(len - tail.len(), b'x');
    h.extend_from_slice(tail.as_bytes());
    h
}

// ---------------------------------------------------------------- the data-driven check

struct Case {
    name: String,
    bytes: Vec<u8>,
    /// Write in pieces of this many bytes (0: one write).
    chunk: usize,
}

fn case(name: impl Into<String>, bytes: Vec<u8>) -> Case {
    Case { name: name.into(), bytes, chunk: 0 }
}

#[derive(Debug, Clone)]
enum Expect {
    /// The broker closes this connection (responses to earlier frames may come first).
    Closed,
    /// Exactly these `(opaque, code)` answers, in any order, then the connection still
    /// serves a request.
    Answers(Vec<(i32, i32)>),
    /// Nothing within a short time, the connection stays open (a partial frame).
    Waits,
    /// These answers, then nothing more (a partial frame follows the whole ones).
    AnswersThenWaits(Vec<(i32, i32)>),
}

fn answer(opaque: i32, code: i32) -> Expect {
    Expect::Answers(vec![(opaque, code)])
}

/// A header that does not parse: SYSTEM_ERROR with opaque 0.
fn bad_header() -> Expect {
    answer(0, rs::SYSTEM_ERROR)
}

const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);
const WAIT_PROBE: Duration = Duration::from_millis(200);

/// Runs one case on its own connection, checks the outcome, then checks that a fresh
/// connection still sends and pulls.
fn check(addr: SocketAddr, probes: &mut u64, case: &Case, expected: &Expect) {
    let mut c = Conn::open(addr);
    c.write(&case.bytes, case.chunk);
    match expected {
        Expect::Closed => assert!(c.closed_within(CLOSE_TIMEOUT), "case {:?}: the broker did not close the connection", case.name),
        Expect::Waits => match c.read(Instant::now() + WAIT_PROBE) {
            Got::Timeout => {}
            other => panic!("case {:?}: expected the broker to wait for more bytes, got {other:?}", case.name),
        },
        Expect::Answers(want) | Expect::AnswersThenWaits(want) => {
            let deadline = Instant::now() + ANSWER_TIMEOUT;
            let mut got = Vec::new();
            while got.len() < want.len() {
                match c.read(deadline) {
                    Got::Cmd(r) => {
                        assert!(r.is_response(), "case {:?}: a request from the broker: {r:?}", case.name);
                        got.push((r.opaque, r.code, r.remark));
                    }
                    other => panic!("case {:?}: expected answers {want:?}, got {got:?} then {other:?}", case.name),
                }
            }
            let mut got_pairs: Vec<(i32, i32)> = got.iter().map(|(o, c, _)| (*o, *c)).collect();
            let mut want = want.clone();
            got_pairs.sort_unstable();
            want.sort_unstable();
            assert_eq!(got_pairs, want, "case {:?}: answers (opaque, code); remarks {got:?}", case.name);
            if let Expect::AnswersThenWaits(_) = expected {
                match c.read(Instant::now() + WAIT_PROBE) {
                    Got::Timeout => {}
                    other => panic!("case {:?}: expected the broker to wait for more bytes, got {other:?}", case.name),
                }
            } else {
                // The connection goes on.
                let r = c.call(get_max_offset(TOPIC, 424_242));
                assert_eq!(r.code, rs::SUCCESS, "case {:?}: the connection does not go on: {:?}", case.name, r.remark);
            }
        }
    }
    drop(c);
    *probes += 1;
    probe(addr, *probes);
}

// ---------------------------------------------------------------- the named cases

fn binary_send_header() -> Vec<u8> {
    let cmd = send(TOPIC, 0, b"", 31, SerializeType::RocketMq);
    let mut cmd = cmd;
    cmd.remark = Some("remark".into());
    encode_binary_header(&cmd).unwrap()
}

fn named_cases() -> Vec<(Case, Expect)> {
    use Expect::*;
    let mut v: Vec<(Case, Expect)> = Vec::new();
    let valid_json_header = br#"{"code":30,"opaque":5,"extFields":{"topic":"BAD","queueId":"0"}}"#;

    // Length field.
    v.push((case("length 0", raw(0, 0, &[])), Closed));
    v.push((case("length 0, length field only", 0u32.to_be_bytes().to_vec()), Closed));
    for n in 1..4u32 {
        v.push((case(format!("length {n}"), raw(n, 0, &[])), Closed));
    }
    // 4..7 are legal lengths (an empty or tiny header), decided on what follows.
    v.push((case("length 4, empty JSON header", raw(4, 0, &[])), bad_header()));
    v.push((case("length 4, empty binary header", raw(4, 1 << 24, &[])), bad_header()));
    for n in 5..8u32 {
        let extra = vec![b'{'; (n - 4) as usize];
        v.push((case(format!("length {n}, header length 0, tiny body"), raw(n, 0, &extra)), bad_header()));
        v.push((case(format!("length {n}, tiny JSON header"), raw(n, n - 4, &extra)), bad_header()));
        v.push((case(format!("length {n}, tiny binary header"), raw(n, (1 << 24) | (n - 4), &extra)), bad_header()));
        v.push((case(format!("length {n}, length field only"), n.to_be_bytes().to_vec()), Waits));
    }
    for (name, len) in [("negative 0x80000000", 0x8000_0000u32), ("negative 0xFFFFFFFF", 0xFFFF_FFFF), ("negative -4", (-4i32) as u32)] {
        v.push((case(format!("length {name}"), raw(len, 0, valid_json_header)), Closed));
        v.push((case(format!("length {name}, length field only"), len.to_be_bytes().to_vec()), Closed));
    }
    v.push((case("length 2^31-1", raw(0x7FFF_FFFF, 0, valid_json_header)), Closed));
    v.push((case("length 2^31-1, length field only", 0x7FFF_FFFFu32.to_be_bytes().to_vec()), Closed));
    let over = (FRAME_LEN_MAX_BYTES - 4 + 1) as u32;
    v.push((case("frame one byte over 16 MiB", raw(over, 0, valid_json_header)), Closed));
    v.push((case("frame of 32 MiB, length field only", (32 * MIB as u32).to_be_bytes().to_vec()), Closed));
    // The largest acceptable frame: a 16 MiB header (the body limit does not apply to it).
    let at_max = (FRAME_LEN_MAX_BYTES - 4) as u32;
    v.push((case("frame of exactly 16 MiB, prefix only", raw(at_max, at_max - 4, &[])), Waits));
    v.push((case("frame of exactly 16 MiB, half sent", raw(at_max, at_max - 4, &vec![b'{'; 8 * MIB])), Waits));
    v.push((
        case("frame of exactly 16 MiB: one huge JSON ext value", frame(0, &json_header_of_len(FRAME_LEN_MAX_BYTES - 8, 61), b"")),
        answer(61, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    // Body limits, decided from the prefix.
    let body_max = MAX_MESSAGE_BYTES + FRAME_SLACK_BYTES;
    v.push((case("body 5 MiB, prefix only", raw((4 + 5 * MIB) as u32, 0, &[])), Closed));
    v.push((case("body one byte over the frame body limit", raw((4 + body_max + 1) as u32, 0, &[])), Closed));
    v.push((case("body at the frame body limit, prefix only", raw((4 + body_max) as u32, 0, &[])), Waits));

    // Header length.
    v.push((case("header length over total", raw(4 + 10, 11, &[b' '; 10])), Closed));
    v.push((case("header length 2^24-1 over total", raw(4 + 10, 0x00FF_FFFF, &[b' '; 10])), Closed));
    v.push((case("binary header length over total", raw(4 + 30, (1 << 24) | 31, &[0; 30])), Closed));
    v.push((case("header length 0, JSON, with a body", frame(0, b"", b"hello")), bad_header()));
    v.push((case("header length 0, binary, with a body", frame(1, b"", b"hello")), bad_header()));

    // Serialize types other than JSON and ROCKETMQ.
    for t in 2..=255u8 {
        v.push((case(format!("serialize type {t}"), frame(t, valid_json_header, b"")), Closed));
    }

    // JSON that is not JSON, or not a header.
    for text in [
        "",
        " ",
        "hello",
        "{oops",
        "{\"code\":30",
        "{\"code\":30,}",
        "{} trailing",
        "[1,2]",
        "null",
        "\"a string\"",
        "123",
        "{\"code\"}",
        "{\"code\":30 \"opaque\":1}",
        "{'code':30}",
    ] {
        v.push((case(format!("JSON header {text:?}"), json(text)), bad_header()));
    }
    v.push((case("JSON header of invalid UTF-8", frame(0, b"{\"code\":\"\xff\xfe\"}", b"")), bad_header()));
    v.push((case("JSON header of NUL bytes", frame(0, &[0; 32], b"")), bad_header()));
    // Unknown keys are skipped whatever their depth (serde_json skips iteratively).
    v.push((
        case(
            "JSON header nested 100 000 deep in an unknown key",
            json(&format!("{{\"code\":9999,\"opaque\":83,\"junk\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000))),
        ),
        answer(83, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    v.push((
        case("JSON ext value nested 100 000 deep", json(&format!("{{\"extFields\":{{\"a\":{}{}}}}}", "[".repeat(100_000), "]".repeat(100_000)))),
        bad_header(),
    ));
    // JSON with wrong types: refused where no dialect sends it...
    for text in [
        r#"{"code":"abc","opaque":3}"#,
        r#"{"code":[30],"opaque":3}"#,
        r#"{"code":{},"opaque":3}"#,
        r#"{"code":1.5,"opaque":3}"#,
        r#"{"code":4294967296,"opaque":3}"#,
        r#"{"code":30,"opaque":"x"}"#,
        r#"{"code":30,"flag":[1]}"#,
        r#"{"code":30,"extFields":[]}"#,
        r#"{"code":30,"extFields":"topic=BAD"}"#,
        r#"{"code":30,"extFields":{"topic":["BAD"]}}"#,
        r#"{"code":30,"extFields":{"topic":{"a":1}}}"#,
    ] {
        v.push((case(format!("JSON header {text}"), json(text)), bad_header()));
    }
    // ...and read leniently where real clients do (DESIGN.md §6, "Client dialects").
    v.push((case("JSON code and opaque as strings", json(r#"{"code":"9999","opaque":"77"}"#)), answer(77, rs::REQUEST_CODE_NOT_SUPPORTED)));
    v.push((case("JSON code as a float", json(r#"{"code":9999.0,"opaque":78}"#)), answer(78, rs::REQUEST_CODE_NOT_SUPPORTED)));
    v.push((case("JSON ext values as numbers", json(r#"{"code":30,"opaque":79,"extFields":{"topic":"BAD","queueId":0}}"#)), answer(79, rs::SUCCESS)));
    // Huge extFields.
    let fields = |n: usize| (0..n).map(|i| format!("\"k{i}\":\"v\"")).collect::<Vec<_>>().join(",");
    v.push((case("JSON with 1025 ext fields", json(&format!(r#"{{"code":9999,"opaque":80,"extFields":{{{}}}}}"#, fields(1025)))), bad_header()));
    v.push((
        case("JSON with 1024 ext fields", json(&format!(r#"{{"code":9999,"opaque":81,"extFields":{{{}}}}}"#, fields(1024)))),
        answer(81, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    v.push((case("JSON with a 4 MiB ext value", frame(0, &json_header_of_len(4 * MIB, 82), b"")), answer(82, rs::REQUEST_CODE_NOT_SUPPORTED)));

    // Binary header truncated at every byte (every field, and inside each).
    let h = binary_send_header();
    for cut in 0..h.len() {
        v.push((case(format!("binary header truncated to {cut} of {} bytes", h.len()), frame(1, &h[..cut], b"body")), bad_header()));
    }
    v.push((case("binary header complete", frame(1, &h, b"body")), answer(31, rs::SUCCESS)));
    // Binary header with hostile lengths. Offsets: code 0, language 2, version 3,
    // opaque 5, flag 9, remark length 13, remark 17 ("remark", 6 bytes), ext length 23.
    let patch = |at: usize, bytes: &[u8]| {
        let mut h = h.clone();
        h[at..at + bytes.len()].copy_from_slice(bytes);
        h
    };
    for (name, hh) in [
        ("remark length -1", patch(13, &(-1i32).to_be_bytes())),
        ("remark length 2^31-1", patch(13, &i32::MAX.to_be_bytes())),
        ("remark length past the header", patch(13, &10_000i32.to_be_bytes())),
        ("ext length -1", patch(23, &(-1i32).to_be_bytes())),
        ("ext length 2^31-1", patch(23, &i32::MAX.to_be_bytes())),
        ("ext key length -1", patch(27, &(-1i16).to_be_bytes())),
        ("ext key length 2^15-1", patch(27, &i16::MAX.to_be_bytes())),
    ] {
        v.push((case(format!("binary header, {name}"), frame(1, &hh, b"")), bad_header()));
    }
    let mut many = Vec::new();
    for i in 0..1025 {
        let k = format!("k{i}");
        many.extend_from_slice(&(k.len() as i16).to_be_bytes());
        many.extend_from_slice(k.as_bytes());
        many.extend_from_slice(&1i32.to_be_bytes());
        many.push(b'v');
    }
    let mut hh = h[..23].to_vec();
    hh.extend_from_slice(&(many.len() as i32).to_be_bytes());
    hh.extend_from_slice(&many);
    v.push((case("binary header with 1025 ext fields", frame(1, &hh, b"")), bad_header()));

    // Requests that parse but are wrong.
    v.push((
        case("unknown code 9999 (JSON)", encode(&RemotingCommand::request(9999).with_opaque(4242))),
        answer(4242, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    v.push((
        case("unknown code -1 (binary)", encode(&RemotingCommand::request(-1).with_opaque(-7).with_serialize_type(SerializeType::RocketMq))),
        answer(-7, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    v.push((case("code 0", encode(&RemotingCommand::request(0).with_opaque(i32::MAX))), answer(i32::MAX, rs::REQUEST_CODE_NOT_SUPPORTED)));
    v.push((
        case("code i32::MIN (JSON)", encode(&RemotingCommand::request(i32::MIN).with_opaque(i32::MIN))),
        answer(i32::MIN, rs::REQUEST_CODE_NOT_SUPPORTED),
    ));
    v.push((case("unknown code, oneway", encode(&RemotingCommand::request(9999).with_opaque(90).oneway())), Answers(vec![])));
    let mut response = RemotingCommand::request(rq::SEND_MESSAGE_V2).with_opaque(91);
    response.flag = FLAG_RESPONSE;
    v.push((case("a response sent to the broker", encode(&response)), Answers(vec![])));
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        v.push((
            case(format!("SEND body one byte over max message size ({st:?})"), encode(&send(TOPIC, 0, &vec![b'x'; MAX_MESSAGE_BYTES + 1], 100, st))),
            answer(100, rs::MESSAGE_ILLEGAL),
        ));
    }
    v.push((
        case("SEND body at max message size", encode(&send(TOPIC, 1, &vec![b'x'; MAX_MESSAGE_BYTES], 101, SerializeType::Json))),
        answer(101, rs::SUCCESS),
    ));
    v.push((
        case("SEND body over max message size + frame slack", encode(&send(TOPIC, 0, &vec![b'x'; body_max + 1], 102, SerializeType::Json))),
        Closed,
    ));
    let without = |key: &str| {
        let mut c = send(TOPIC, 0, b"x", 110, SerializeType::Json);
        c.ext_fields.remove(key);
        encode(&c)
    };
    for key in ["a", "b", "e", "g"] {
        v.push((case(format!("SEND_V2 without required field {key}"), without(key)), answer(110, rs::INVALID_PARAMETER)));
    }
    v.push((
        case("SEND_V2 with queueId \"x\"", encode(&send(TOPIC, 0, b"x", 111, SerializeType::Json).with_ext("e", "x"))),
        answer(111, rs::INVALID_PARAMETER),
    ));
    v.push((
        case("SEND_V2 without any header", encode(&RemotingCommand::request(rq::SEND_MESSAGE_V2).with_opaque(112))),
        answer(112, rs::INVALID_PARAMETER),
    ));
    v.push((case("SEND_V2 to queue 99 of 4", encode(&send(TOPIC, 99, b"x", 113, SerializeType::Json))), answer(113, rs::SYSTEM_ERROR)));
    v.push((case("SEND_V2 to queue -1", encode(&send(TOPIC, -1, b"x", 114, SerializeType::Json))), answer(114, rs::SYSTEM_ERROR)));
    v.push((case("SEND_V2 to a missing topic", encode(&send("NO_SUCH_TOPIC", 0, b"x", 115, SerializeType::Json))), answer(115, rs::TOPIC_NOT_EXIST)));
    let mut p = pull(TOPIC, 0, 0, 120, SerializeType::Json);
    p.ext_fields.remove("queueOffset");
    v.push((case("PULL without queueOffset", encode(&p)), answer(120, rs::INVALID_PARAMETER)));
    v.push((case("PULL at a negative offset", encode(&pull(TOPIC, 0, -5, 121, SerializeType::Json))), answer(121, rs::INVALID_PARAMETER)));
    v.push((case("PULL from a missing topic", encode(&pull("NO_SUCH_TOPIC", 0, 0, 122, SerializeType::Json))), answer(122, rs::TOPIC_NOT_EXIST)));

    // Framing: one byte per write, pipelining, half frames.
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let mut c = case(format!("SEND in 1-byte writes ({st:?})"), encode(&send(TOPIC, 2, b"one byte at a time", 130, st)));
        c.chunk = 1;
        v.push((c, answer(130, rs::SUCCESS)));
    }
    let pipelined = [
        encode(&send(TOPIC, 3, b"pipelined", 140, SerializeType::Json)),
        json("{oops"),
        encode(&RemotingCommand::request(9999).with_opaque(141).with_serialize_type(SerializeType::RocketMq)),
        frame(1, &h[..7], b""),
        encode(&get_max_offset(TOPIC, 142)),
        encode(&send(TOPIC, 3, &vec![b'x'; MAX_MESSAGE_BYTES + 1], 143, SerializeType::RocketMq)),
        encode(&send(TOPIC, 3, b"pipelined 2", 144, SerializeType::RocketMq)),
    ]
    .concat();
    let pipelined_answers = Answers(vec![
        (140, rs::SUCCESS),
        (0, rs::SYSTEM_ERROR),
        (141, rs::REQUEST_CODE_NOT_SUPPORTED),
        (0, rs::SYSTEM_ERROR),
        (142, rs::SUCCESS),
        (143, rs::MESSAGE_ILLEGAL),
        (144, rs::SUCCESS),
    ]);
    v.push((case("pipelined valid and invalid frames", pipelined.clone()), pipelined_answers.clone()));
    let mut c = case("pipelined valid and invalid frames, 7-byte writes", pipelined.clone());
    c.chunk = 7;
    v.push((c, pipelined_answers));
    v.push((case("pipelined valid frames, then a fatal one", [pipelined.clone(), raw(0xFFFF_FFFF, 0, &[])].concat()), Closed));
    let whole = encode(&send(TOPIC, 0, b"half", 150, SerializeType::Json));
    for cut in [1, 4, 7, 8, whole.len() / 2, whole.len() - 1] {
        v.push((case(format!("half a frame: {cut} of {} bytes, then close", whole.len()), whole[..cut].to_vec()), Waits));
    }
    v.push((
        case("a whole frame, then half of the next, then close", [whole.clone(), whole[..20].to_vec()].concat()),
        AnswersThenWaits(vec![(150, rs::SUCCESS)]),
    ));
    v
}

#[test]
fn malformed_frames_get_an_error_or_a_closed_connection() {
    let _serial = serial();
    let broker = start_broker();
    let started = Instant::now();
    let fds_before = settled_fds();
    let rss_before = rss_bytes();
    let mut probes = 0u64;
    let cases = named_cases();
    for (case, expected) in &cases {
        check(broker.addr, &mut probes, case, expected);
    }
    // Connections closed by either side were all released.
    let fds_after = fds_settle(fds_before.sockets, usize::MAX, Duration::from_secs(10));
    assert!(fds_after.sockets <= fds_before.sockets, "sockets: {fds_before:?} before the cases, {fds_after:?} after");
    eprintln!(
        "bad_input cases: {} cases, {probes} probes, {fds_before:?} -> {fds_after:?}, RSS {:.1} -> {:.1} MiB, {:.1?}",
        cases.len(),
        rss_before as f64 / MIB as f64,
        rss_bytes() as f64 / MIB as f64,
        started.elapsed()
    );
}

// ---------------------------------------------------------------- random and mutated frames

fn seed() -> u64 {
    match std::env::var("RINGMQ_SEED") {
        Ok(s) => s.trim().parse().expect("RINGMQ_SEED is a u64"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64,
    }
}

fn iterations() -> usize {
    std::env::var("RINGMQ_BAD_INPUT_ITERS").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(2500)
}

/// What the broker must do with `bytes`, from the decoder it uses (with its limits):
/// the answers (opaque, and the code when it is known) it must send, and whether it
/// must close the connection.
struct Oracle {
    answers: Vec<(i32, Option<i32>)>,
    closes: bool,
}

fn oracle(bytes: &[u8]) -> Oracle {
    let limits = FrameLimits::with_body_len_max_bytes(MAX_MESSAGE_BYTES + FRAME_SLACK_BYTES);
    let mut buf = BytesMut::from(bytes);
    let mut answers = Vec::new();
    loop {
        match RemotingCommand::decode(&mut buf, &limits) {
            Ok(Some(cmd)) => {
                // Responses and oneway requests get no answer; a pull may be suspended
                // (long polling) for a while, so its answer is not waited for.
                let silent = cmd.flag & (FLAG_RESPONSE | FLAG_ONEWAY) != 0;
                if !silent && !matches!(cmd.code, rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE) {
                    answers.push((cmd.opaque, None));
                }
            }
            Ok(None) => return Oracle { answers, closes: false },
            Err(e) if !e.is_fatal() => answers.push((0, Some(rs::SYSTEM_ERROR))),
            Err(_) => return Oracle { answers, closes: true },
        }
    }
}

/// What the broker's decoder makes of `bytes`, for failure messages.
fn describe(bytes: &[u8]) -> String {
    let limits = FrameLimits::with_body_len_max_bytes(MAX_MESSAGE_BYTES + FRAME_SLACK_BYTES);
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    loop {
        match RemotingCommand::decode(&mut buf, &limits) {
            Ok(Some(mut cmd)) => {
                cmd.body.truncate(64);
                out.push(format!("{cmd:?}"));
            }
            Ok(None) => {
                out.push(format!("then waits with {} bytes", buf.len()));
                return out.join("; ");
            }
            Err(e) if !e.is_fatal() => out.push(format!("bad header ({e})")),
            Err(e) => {
                out.push(format!("then closes ({e})"));
                return out.join("; ");
            }
        }
    }
}

/// Sends `bytes` on a fresh connection and checks the broker against the oracle.
fn check_oracle(addr: SocketAddr, bytes: &[u8]) -> Result<(), String> {
    let o = oracle(bytes);
    let mut c = Conn::open(addr);
    c.write(bytes, 0);
    if o.closes {
        return if c.closed_within(CLOSE_TIMEOUT) { Ok(()) } else { Err("the broker did not close the connection".into()) };
    }
    let mut want: HashMap<i32, Vec<Option<i32>>> = HashMap::new();
    for (opaque, code) in &o.answers {
        want.entry(*opaque).or_default().push(*code);
    }
    let mut left = o.answers.len();
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while left > 0 {
        match c.read(deadline) {
            Got::Cmd(r) => {
                if !r.is_response() {
                    return Err(format!("a request from the broker: {r:?}"));
                }
                let Some(codes) = want.get_mut(&r.opaque) else {
                    // A suspended pull's answer: not counted.
                    continue;
                };
                // Prefer an exact code match, then an any-code slot.
                let at = codes.iter().position(|c| *c == Some(r.code)).or_else(|| codes.iter().position(|c| c.is_none()));
                match at {
                    Some(i) => {
                        codes.swap_remove(i);
                        left -= 1;
                    }
                    None => return Err(format!("unexpected answer: opaque {} code {} remark {:?}", r.opaque, r.code, r.remark)),
                }
            }
            other => return Err(format!("expected {} more answers, got {other:?}", left)),
        }
    }
    Ok(())
}

/// A random frame: raw noise, or a plausible prefix around random JSON or binary headers.
fn random_frame(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let noise = |rng: &mut ChaCha8Rng, max: usize| {
        let n = rng.gen_range(0..=max);
        (0..n).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>()
    };
    match rng.gen_range(0..5) {
        0 => noise(rng, 64),
        1 => {
            // A consistent prefix, any serialize type, noise for header and body.
            let header = noise(rng, 64);
            let body = noise(rng, 64);
            let st = if rng.gen_bool(0.8) { rng.gen_range(0..2) } else { rng.gen() };
            frame(st, &header, &body)
        }
        2 => {
            // A JSON header assembled from tokens.
            const TOKENS: &[&str] = &[
                "{",
                "}",
                "[",
                "]",
                ":",
                ",",
                "\"code\"",
                "\"opaque\"",
                "\"flag\"",
                "\"extFields\"",
                "\"remark\"",
                "\"language\"",
                "\"version\"",
                "\"topic\"",
                "\"queueId\"",
                "\"b\"",
                "\"e\"",
                "30",
                "9999",
                "-1",
                "1.5",
                "1e99",
                "\"BAD\"",
                "\"x\"",
                "true",
                "null",
                "2147483648",
                "\"\\u0000\"",
                "\"\\ud800\"",
                " ",
                "\"",
            ];
            let mut h = String::from("{");
            for _ in 0..rng.gen_range(0..24) {
                h.push_str(TOKENS[rng.gen_range(0..TOKENS.len())]);
            }
            if rng.gen_bool(0.7) {
                h.push('}');
            }
            frame(0, h.as_bytes(), &noise(rng, 16))
        }
        3 => {
            // A binary header with random fields and random (often hostile) lengths.
            let mut h = Vec::new();
            h.extend_from_slice(&rng.gen::<i16>().to_be_bytes());
            h.push(rng.gen());
            h.extend_from_slice(&rng.gen::<i16>().to_be_bytes());
            h.extend_from_slice(&rng.gen::<i32>().to_be_bytes());
            h.extend_from_slice(&(rng.gen::<i32>() & !FLAG_RESPONSE).to_be_bytes());
            let remark = noise(rng, 8);
            let len = |rng: &mut ChaCha8Rng, real: usize| if rng.gen_bool(0.8) { real as i32 } else { rng.gen() };
            h.extend_from_slice(&len(rng, remark.len()).to_be_bytes());
            h.extend_from_slice(&remark);
            let mut ext = Vec::new();
            for _ in 0..rng.gen_range(0..4) {
                let k = noise(rng, 6);
                let val = noise(rng, 6);
                ext.extend_from_slice(&(len(rng, k.len()) as i16).to_be_bytes());
                ext.extend_from_slice(&k);
                ext.extend_from_slice(&len(rng, val.len()).to_be_bytes());
                ext.extend_from_slice(&val);
            }
            h.extend_from_slice(&len(rng, ext.len()).to_be_bytes());
            h.extend_from_slice(&ext);
            frame(1, &h, &noise(rng, 16))
        }
        _ => {
            // Several frames back to back, some of them bad.
            let mut v = Vec::new();
            for _ in 0..rng.gen_range(1..4) {
                let f = random_frame(rng);
                v.extend_from_slice(&f);
            }
            v
        }
    }
}

/// Valid frames to mutate. None of them creates or deletes topics, and a pull does not
/// suspend; mutations may of course change that.
fn mutation_sources() -> Vec<Vec<u8>> {
    let hb = br#"{"clientID":"10.0.0.9@1","consumerDataSet":[{"groupName":"CG","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"MUT","subString":"*","subVersion":1}],"unitMode":false}],"producerDataSet":[{"groupName":"PG"}]}"#;
    let mut v = Vec::new();
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        v.push(encode(&send(MUT_TOPIC, 1, b"mutated message body", 200, st)));
        v.push(encode(&pull(MUT_TOPIC, 2, 0, 201, st)));
        v.push(encode(
            &RemotingCommand::request(rq::GET_MAX_OFFSET)
                .with_ext("topic", MUT_TOPIC)
                .with_ext("queueId", "3")
                .with_opaque(202)
                .with_serialize_type(st),
        ));
        v.push(encode(&RemotingCommand::request(rq::HEART_BEAT).with_body(hb.to_vec()).with_opaque(203).with_serialize_type(st)));
        v.push(encode(&RemotingCommand::request(9999).with_ext("k", "v").with_opaque(204).with_serialize_type(st)));
    }
    v
}

fn mutate(rng: &mut ChaCha8Rng, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        let at = if v.is_empty() { 0 } else { rng.gen_range(0..v.len()) };
        match rng.gen_range(0..6) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.gen_range(0..8),
            1 if !v.is_empty() => v[at] = rng.gen(),
            2 => {
                let n = rng.gen_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                v.splice(at..at, bytes);
            }
            3 if !v.is_empty() => {
                let end = (at + rng.gen_range(1..=8)).min(v.len());
                v.drain(at..end);
            }
            4 if !v.is_empty() => {
                // Duplicate a slice in place.
                let end = (at + rng.gen_range(1..=16)).min(v.len());
                let piece = v[at..end].to_vec();
                v.splice(at..at, piece);
            }
            5 => {
                // Overwrite one of the two prefix words with an interesting value.
                const WORDS: &[u32] = &[0, 1, 3, 4, 7, 8, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x00FF_FFFF, 0x0100_0000, 0x0200_0000];
                let word = WORDS[rng.gen_range(0..WORDS.len())];
                let at = if rng.gen_bool(0.5) { 0 } else { 4 };
                if v.len() >= at + 4 {
                    v[at..at + 4].copy_from_slice(&word.to_be_bytes());
                }
            }
            _ => {}
        }
    }
    v
}

#[test]
fn random_and_mutated_frames_never_stop_the_broker() {
    let _serial = serial();
    let broker = start_broker();
    let started = Instant::now();
    let seed = seed();
    let iters = iterations();
    eprintln!("bad_input random: RINGMQ_SEED={seed} RINGMQ_BAD_INPUT_ITERS={iters}");
    let fds_before = settled_fds();
    let rss_before = rss_bytes();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sources = mutation_sources();
    let mut probes = 1_000_000u64;
    let (mut closed, mut answered) = (0usize, 0usize);
    for i in 0..2 * iters {
        let (kind, bytes) = if i < iters {
            ("random", random_frame(&mut rng))
        } else {
            let src = &sources[rng.gen_range(0..sources.len())];
            ("mutated", mutate(&mut rng, src))
        };
        let o = oracle(&bytes);
        if o.closes {
            closed += 1;
        } else if !o.answers.is_empty() {
            answered += 1;
        }
        if let Err(e) = check_oracle(broker.addr, &bytes) {
            panic!(
                "{kind} frame {i} failed: {e}\n  decodes as: {}\n  bytes ({}): {:02x?}\n  replay with RINGMQ_SEED={seed} RINGMQ_BAD_INPUT_ITERS={iters}",
                describe(&bytes),
                bytes.len(),
                &bytes[..bytes.len().min(512)]
            );
        }
        if i % 100 == 99 || i + 1 == 2 * iters {
            probes += 1;
            let (addr, n) = (broker.addr, probes);
            let r = std::panic::catch_unwind(move || probe(addr, n));
            if r.is_err() {
                panic!("the broker stopped serving after {kind} frame {i}; replay with RINGMQ_SEED={seed} RINGMQ_BAD_INPUT_ITERS={iters}");
            }
        }
    }
    // Every connection, closed by either side, is released (suspended pulls that were
    // mutated into long polls end within their suspend time, at most 30 s; they do
    // not hold their connection's fd after the client went away).
    let fds_after = fds_settle(fds_before.sockets, usize::MAX, Duration::from_secs(10));
    assert!(fds_after.sockets <= fds_before.sockets, "sockets: {fds_before:?} before, {fds_after:?} after; RINGMQ_SEED={seed}");
    eprintln!(
        "bad_input random: {} frames ({closed} closed the connection, {answered} answered, the rest waited), {fds_before:?} -> {fds_after:?}, \
         RSS {:.1} -> {:.1} MiB, {:.1?}",
        2 * iters,
        rss_before as f64 / MIB as f64,
        rss_bytes() as f64 / MIB as f64,
        started.elapsed()
    );
}
