//! What each URL is: a page (the one embedded HTML shell; the script picks what to
//! draw from the path), an embedded asset, or a JSON API call with its arguments
//! checked. Pure: no IO, so every path and parameter rule is unit-tested here.
//!
//! Invariants: every asset is compiled into the binary (`include_bytes!`), so the
//! dashboard works on a machine with no network; an API call leaves here only with
//! valid arguments (topic and group names in RocketMQ's alphabet, ids in hex, times as
//! numbers) and otherwise is a 400 naming the parameter; an unknown path is a 404 and a
//! wrong method a 405 — never a panic.

use super::http::{HttpError, Request};

/// An embedded file.
#[derive(Debug, PartialEq, Eq)]
pub struct Asset {
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

pub const INDEX_HTML: Asset = Asset { content_type: "text/html; charset=utf-8", bytes: include_bytes!("assets/index.html") };
const APP_JS: Asset = Asset { content_type: "text/javascript; charset=utf-8", bytes: include_bytes!("assets/app.js") };
const STYLE_CSS: Asset = Asset { content_type: "text/css; charset=utf-8", bytes: include_bytes!("assets/style.css") };
const FAVICON_SVG: Asset = Asset { content_type: "image/svg+xml", bytes: include_bytes!("assets/favicon.svg") };

/// Paths that serve the page shell (the script draws the page the path names).
pub const PAGES: [&str; 10] = ["/", "/cluster", "/topics", "/topic", "/groups", "/group", "/live", "/messages", "/message", "/dlq"];

/// RocketMQ's longest group name, in bytes.
pub const GROUP_BYTES_MAX: usize = 255;
/// Longest message key searched for, in bytes.
pub const KEY_BYTES_MAX: usize = 255;
/// Longest message id: an offset message id of an IPv6 store host is 56 hex digits.
pub const MSG_ID_HEX_MAX: usize = 64;

/// A JSON API call with checked arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiCall {
    Cluster,
    Topics,
    Topic { topic: String },
    Groups,
    Group { group: String },
    Stats,
    ByKey { topic: String, key: String },
    /// An offset message id; with a topic, also the producer's id (UNIQ_KEY) in it.
    ById { id: String, topic: Option<String> },
    ByTime { topic: String, begin_ms: i64, end_ms: i64 },
    DlqList,
    Dlq { group: String },
    Resend { id: String },
}

#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    Page,
    Asset(&'static Asset),
    Api(ApiCall),
}

pub fn route(req: &Request) -> Result<Target, HttpError> {
    let path = req.path.as_str();
    let get_only = || -> Result<(), HttpError> {
        if req.method == "GET" {
            Ok(())
        } else {
            Err(HttpError::MethodNotAllowed(format!("{path} answers GET only, not {}", req.method)))
        }
    };
    if PAGES.contains(&path) {
        get_only()?;
        allow(req, &PAGE_PARAMS)?;
        return Ok(Target::Page);
    }
    let asset = match path {
        "/assets/app.js" => Some(&APP_JS),
        "/assets/style.css" => Some(&STYLE_CSS),
        "/assets/favicon.svg" | "/favicon.ico" => Some(&FAVICON_SVG),
        _ => None,
    };
    if let Some(a) = asset {
        get_only()?;
        return Ok(Target::Asset(a));
    }
    let call = match path {
        "/api/cluster" => {
            allow(req, &[])?;
            ApiCall::Cluster
        }
        "/api/topics" => {
            allow(req, &[])?;
            ApiCall::Topics
        }
        "/api/topic" => {
            allow(req, &["t"])?;
            ApiCall::Topic { topic: topic(req, "t")? }
        }
        "/api/groups" => {
            allow(req, &[])?;
            ApiCall::Groups
        }
        "/api/group" => {
            allow(req, &["g"])?;
            ApiCall::Group { group: group(req, "g")? }
        }
        "/api/stats" => {
            allow(req, &[])?;
            ApiCall::Stats
        }
        "/api/message/by-key" => {
            allow(req, &["t", "key"])?;
            ApiCall::ByKey { topic: topic(req, "t")?, key: key(req, "key")? }
        }
        "/api/message/by-id" => {
            allow(req, &["id", "t"])?;
            let topic = match req.param("t") {
                Some(t) if !t.is_empty() => Some(topic(req, "t")?),
                _ => None,
            };
            ApiCall::ById { id: msg_id(req, "id")?, topic }
        }
        "/api/message/by-time" => {
            allow(req, &["t", "begin", "end"])?;
            let (begin_ms, end_ms) = (millis(req, "begin")?, millis(req, "end")?);
            if end_ms < begin_ms {
                return Err(HttpError::BadRequest(format!("end ({end_ms}) is before begin ({begin_ms})")));
            }
            ApiCall::ByTime { topic: topic(req, "t")?, begin_ms, end_ms }
        }
        "/api/dlq" => {
            allow(req, &["g"])?;
            match req.param("g") {
                None | Some("") => ApiCall::DlqList,
                Some(_) => ApiCall::Dlq { group: group(req, "g")? },
            }
        }
        "/api/dlq/resend" => {
            if req.method != "POST" {
                return Err(HttpError::MethodNotAllowed(format!("{path} answers POST only (it sends a message), not {}", req.method)));
            }
            allow(req, &["id"])?;
            return Ok(Target::Api(ApiCall::Resend { id: msg_id(req, "id")? }));
        }
        _ => return Err(HttpError::NotFound(format!("no page or API at {path}: pages are {}", PAGES.join(" ")))),
    };
    get_only()?;
    Ok(Target::Api(call))
}

/// Parameters a page URL may carry (the script reads them; the server only bounds them).
const PAGE_PARAMS: [&str; 8] = ["t", "g", "key", "id", "begin", "end", "mode", "q"];

fn allow(req: &Request, names: &[&str]) -> Result<(), HttpError> {
    match req.query.iter().find(|(k, _)| !names.contains(&k.as_str())) {
        None => Ok(()),
        Some((k, _)) if names.is_empty() => Err(HttpError::BadRequest(format!("{} takes no query parameters (got {k})", req.path))),
        Some((k, _)) => Err(HttpError::BadRequest(format!("unknown query parameter {k}: {} takes {}", req.path, names.join(", ")))),
    }
}

fn required<'a>(req: &'a Request, name: &str, what: &str) -> Result<&'a str, HttpError> {
    match req.param(name) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(HttpError::BadRequest(format!("missing query parameter {name} ({what})"))),
    }
}

fn topic(req: &Request, name: &str) -> Result<String, HttpError> {
    let t = required(req, name, "the topic")?;
    if !ringmq_client::message::user::valid_topic(t) {
        return Err(HttpError::BadRequest(format!("{name}: `{t}` is not a topic name (letters, digits, _ - % |; at most 127 bytes)")));
    }
    Ok(t.to_string())
}

fn group(req: &Request, name: &str) -> Result<String, HttpError> {
    let g = required(req, name, "the consumer group")?;
    if g.len() > GROUP_BYTES_MAX || !g.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'%' | b'|')) {
        return Err(HttpError::BadRequest(format!("{name}: `{g}` is not a group name (letters, digits, _ - % |; at most {GROUP_BYTES_MAX} bytes)")));
    }
    Ok(g.to_string())
}

fn key(req: &Request, name: &str) -> Result<String, HttpError> {
    let k = required(req, name, "the message key")?;
    if k.len() > KEY_BYTES_MAX || k.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(HttpError::BadRequest(format!("{name}: a key is one word of at most {KEY_BYTES_MAX} bytes without spaces or control characters")));
    }
    Ok(k.to_string())
}

fn msg_id(req: &Request, name: &str) -> Result<String, HttpError> {
    let id = required(req, name, "the message id")?;
    if id.len() > MSG_ID_HEX_MAX || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpError::BadRequest(format!("{name}: `{id}` is not a message id (hex digits, at most {MSG_ID_HEX_MAX})")));
    }
    Ok(id.to_ascii_uppercase())
}

fn millis(req: &Request, name: &str) -> Result<i64, HttpError> {
    let v = required(req, name, "a time, milliseconds since the epoch")?;
    match v.parse::<i64>() {
        Ok(ms) if ms >= 0 => Ok(ms),
        _ => Err(HttpError::BadRequest(format!("{name}: `{v}` is not a time in milliseconds since the epoch"))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::http::{read_request, ReadError, REQUEST_HEADERS_MAX};
    use super::*;

    /// Reads `input` as a connection's bytes and routes it: `Ok(debug of the target)` or
    /// `Err(status)`.
    fn outcome(input: &[u8]) -> Result<String, u16> {
        let req = match read_request(&mut &input[..]) {
            Ok(r) => r,
            Err(ReadError::Http(e)) => return Err(e.status()),
            Err(ReadError::Closed) => return Err(0),
            Err(ReadError::Io(e)) => panic!("io error from a slice: {e}"),
        };
        match route(&req) {
            Ok(Target::Page) => Ok("page".into()),
            Ok(Target::Asset(a)) => Ok(format!("asset {}", a.content_type)),
            Ok(Target::Api(call)) => Ok(format!("{call:?}")),
            Err(e) => Err(e.status()),
        }
    }

    fn check(input: &str, expected: Result<&str, u16>) {
        assert_eq!(outcome(input.as_bytes()), expected.map(String::from), "request {input:?}");
    }

    fn get(target: &str) -> String {
        format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n")
    }

    #[test]
    fn pages_assets_and_api_calls() {
        check(&get("/"), Ok("page"));
        check(&get("/cluster"), Ok("page"));
        check(&get("/topic?t=Orders"), Ok("page"));
        check(&get("/messages?t=Orders&key=k1"), Ok("page"));
        check(&get("/assets/app.js"), Ok("asset text/javascript; charset=utf-8"));
        check(&get("/favicon.ico"), Ok("asset image/svg+xml"));
        check(&get("/api/cluster"), Ok("Cluster"));
        check(&get("/api/topic?t=Orders"), Ok(r#"Topic { topic: "Orders" }"#));
        check(&get("/api/topic?t=%25DLQ%25G"), Ok(r#"Topic { topic: "%DLQ%G" }"#));
        check(&get("/api/group?g=billing"), Ok(r#"Group { group: "billing" }"#));
        check(&get("/api/message/by-key?t=Orders&key=order-42"), Ok(r#"ByKey { topic: "Orders", key: "order-42" }"#));
        check(&get("/api/message/by-id?id=7f00000100002a9f0000000000000000"), Ok(r#"ById { id: "7F00000100002A9F0000000000000000", topic: None }"#));
        check(&get("/api/message/by-id?id=AB12&t="), Ok(r#"ById { id: "AB12", topic: None }"#));
        check(&get("/api/message/by-id?id=AB12&t=T"), Ok(r#"ById { id: "AB12", topic: Some("T") }"#));
        check(&get("/api/message/by-time?t=T&begin=0&end=5"), Ok(r#"ByTime { topic: "T", begin_ms: 0, end_ms: 5 }"#));
        check(&get("/api/dlq"), Ok("DlqList"));
        check(&get("/api/dlq?g="), Ok("DlqList"));
        check(&get("/api/dlq?g=billing"), Ok(r#"Dlq { group: "billing" }"#));
        check("POST /api/dlq/resend?id=AB12 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", Ok(r#"Resend { id: "AB12" }"#));
        check("POST /api/dlq/resend?id=AB12 HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", Ok(r#"Resend { id: "AB12" }"#));
        check(&get("/api/stats"), Ok("Stats"));
    }

    #[test]
    fn bad_parameters_are_400_naming_them() {
        check(&get("/api/topic"), Err(400));
        check(&get("/api/topic?t="), Err(400));
        check(&get("/api/topic?t=bad+topic"), Err(400));
        check(&get("/api/topic?t=a&t=b"), Err(400));
        check(&get("/api/topic?t=T&x=1"), Err(400));
        check(&get("/api/cluster?x=1"), Err(400));
        check(&get("/api/group?g=a%2Fb"), Err(400));
        check(&get(&format!("/api/group?g={}", "g".repeat(GROUP_BYTES_MAX + 1))), Err(400));
        check(&get("/api/message/by-key?t=T"), Err(400));
        check(&get("/api/message/by-key?t=T&key=two+words"), Err(400));
        check(&get("/api/message/by-id?id=xyz"), Err(400));
        check(&get(&format!("/api/message/by-id?id={}", "A".repeat(MSG_ID_HEX_MAX + 1))), Err(400));
        check(&get("/api/message/by-time?t=T&begin=5&end=4"), Err(400));
        check(&get("/api/message/by-time?t=T&begin=-1&end=4"), Err(400));
        check(&get("/api/message/by-time?t=T&begin=soon&end=4"), Err(400));
        check(&get("/api/message/by-time?t=T&begin=1"), Err(400));
        check(&get("/api/topic?t=%ZZ"), Err(400));
        check(&get("/api/topic?t=%C3%28"), Err(400));
        check(&get("/topics?zzz=1"), Err(400));
        let many: Vec<String> = (0..=crate::dashboard::http::QUERY_PARAMS_MAX).map(|i| format!("p{i}=1")).collect();
        check(&get(&format!("/api/cluster?{}", many.join("&"))), Err(400));
    }

    #[test]
    fn unknown_paths_and_methods() {
        check(&get("/nope"), Err(404));
        check(&get("/api/"), Err(404));
        check(&get("/assets/../Cargo.toml"), Err(400));
        check(&get("/assets/%2e%2e/x"), Err(400));
        check("POST /api/cluster HTTP/1.1\r\n\r\n", Err(405));
        check("DELETE / HTTP/1.1\r\n\r\n", Err(405));
        check(&get("/api/dlq/resend?id=AB"), Err(405));
    }

    #[test]
    fn malformed_requests_are_400_or_closed() {
        check("", Err(0));
        check("GET / HTTP/1.1\r\n", Err(400)); // ends before the blank line
        check("GARBAGE\r\n\r\n", Err(400));
        check("GET / HTTP/1.1 extra\r\n\r\n", Err(400));
        check("GET  / HTTP/1.1\r\n\r\n", Err(400));
        check("get / HTTP/1.1\r\n\r\n", Err(400));
        check("GET / HTTP/2.0\r\n\r\n", Err(400));
        check("GET / SPDY\r\n\r\n", Err(400));
        check("GET http://x/ HTTP/1.1\r\n\r\n", Err(400));
        check("GET / HTTP/1.1\r\nNoColon\r\n\r\n", Err(400));
        check("GET / HTTP/1.1\r\n: empty name\r\n\r\n", Err(400));
        check("GET / HTTP/1.1\r\nContent-Length: lots\r\n\r\n", Err(400));
        check("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", Err(400));
        check("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Err(400));
        check("POST /api/dlq/resend?id=AB HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", Err(400));
        let headers: String = (0..=REQUEST_HEADERS_MAX).map(|i| format!("X-{i}: 1\r\n")).collect();
        check(&format!("GET / HTTP/1.1\r\n{headers}\r\n"), Err(400));
        let bytes: &[u8] = b"GET /\xff HTTP/1.1\r\n\r\n";
        assert_eq!(outcome(bytes), Err(400));
    }

    #[test]
    fn oversize_requests() {
        use crate::dashboard::http::{REQUEST_BODY_BYTES_MAX, REQUEST_HEAD_BYTES_MAX};
        check(&format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(REQUEST_HEAD_BYTES_MAX)), Err(431));
        check(&format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(REQUEST_HEAD_BYTES_MAX)), Err(431));
        // No blank line ever: stops reading at the bound, not at the end of the input.
        check(&"a".repeat(REQUEST_HEAD_BYTES_MAX * 4), Err(431));
        check(&format!("POST /api/dlq/resend?id=AB HTTP/1.1\r\nContent-Length: {}\r\n\r\n", REQUEST_BODY_BYTES_MAX + 1), Err(413));
        check("POST /api/dlq/resend?id=AB HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", Err(400));
    }

    #[test]
    fn error_bodies_are_json_with_the_sentence() {
        let r = HttpError::BadRequest("missing query parameter t (the topic)".into()).response();
        assert_eq!(r.status, 400);
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"], "missing query parameter t (the topic)");
        assert_eq!(v["status"], 400);
    }

    #[test]
    fn assets_are_embedded_and_self_contained() {
        for a in [&INDEX_HTML, &APP_JS, &STYLE_CSS, &FAVICON_SVG] {
            let text = std::str::from_utf8(a.bytes).expect("assets are text");
            assert!(!text.is_empty());
            // Offline machines: nothing may come from elsewhere.
            for remote in ["http://", "https://", "//cdn", "@import", "url(http"] {
                let hits: Vec<&str> = text.lines().filter(|l| l.contains(remote) && !l.contains("www.w3.org/2000/svg")).collect();
                assert!(hits.is_empty(), "{} refers to {remote}: {hits:?}", a.content_type);
            }
        }
    }
}
