//! Who may use the dashboard: a login token (`--token` / `RINGMQ_DASHBOARD_TOKEN`, or
//! one generated at start on loopback), sessions it opens (an HttpOnly, SameSite=Strict
//! cookie), `Authorization: Bearer <token>` for scripts, and the Host / Origin checks
//! that stop DNS rebinding and cross-site requests. Pure decisions (`Guard::check`,
//! `host_allowed`, `origin_allowed`, `Sessions`) over a time passed in, so every rule is
//! unit-tested here; `mod.rs` only applies the verdict.
//!
//! Invariants: the token is compared in constant time (`subtle`); a session id is 32
//! bytes from the OS CSPRNG; at most `SESSIONS_MAX` sessions live at once (a login past
//! it ends the oldest) and each ends `SESSION_LIFETIME_SECS` after login; every request
//! must name an allowed Host (the bound address, `localhost:PORT` on loopback, and the
//! names given with `--host-name`), else 403; every state change (any method but
//! GET/HEAD, `/login` included) must come from a page of that Host (Origin, or Referer
//! when Origin is absent; neither is accepted only with a Bearer token, which a browser
//! never adds cross-site), else 403.

use super::http::{HttpError, Request, Response};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions alive at once; a login past it ends the oldest.
pub const SESSIONS_MAX: usize = 64;
/// A session's life from login, in seconds (absolute, not sliding).
pub const SESSION_LIFETIME_SECS: u64 = 8 * 3600;
/// Session id length, in random bytes (hex in the cookie).
const SESSION_ID_BYTES: usize = 32;
/// A configured token, in bytes (at least `TOKEN_BYTES_MIN`).
pub const TOKEN_BYTES_MAX: usize = 256;
/// The shortest token accepted: 16 characters (a generated one has 64).
pub const TOKEN_BYTES_MIN: usize = 16;
/// Names given with `--host-name`.
pub const HOST_NAMES_MAX: usize = 16;
pub const COOKIE_NAME: &str = "ringmq_session";

/// A token or host name the dashboard cannot start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthConfigError {
    #[error("the dashboard listens on {0}, not a loopback address, and has no token: give --token or RINGMQ_DASHBOARD_TOKEN (anyone who can reach the port could otherwise read the cluster and resend dead letters)")]
    TokenRequired(SocketAddr),
    #[error("the token must be {TOKEN_BYTES_MIN} to {TOKEN_BYTES_MAX} printable ASCII characters without spaces")]
    BadToken,
    #[error("at most {HOST_NAMES_MAX} --host-name values")]
    TooManyHostNames,
    #[error("--host-name `{0}` must be a host name or address, optionally with :port, in printable ASCII")]
    BadHostName(String),
    #[error("no random bytes from the operating system: {0}")]
    Random(String),
}

/// 32 random bytes from the OS CSPRNG, as 64 hex digits.
pub fn random_hex() -> Result<String, AuthConfigError> {
    use rand::RngCore;
    let mut bytes = [0u8; SESSION_ID_BYTES];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|e| AuthConfigError::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn check_token(token: &str) -> Result<(), AuthConfigError> {
    if (TOKEN_BYTES_MIN..=TOKEN_BYTES_MAX).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(AuthConfigError::BadToken)
    }
}

/// The Host values the dashboard answers to: its bound address, `localhost:PORT` when
/// bound to loopback, and the operator's names (a name without a port gets the bound
/// one). Lowercase.
pub fn allowed_hosts(bound: SocketAddr, names: &[String]) -> Result<Vec<String>, AuthConfigError> {
    if names.len() > HOST_NAMES_MAX {
        return Err(AuthConfigError::TooManyHostNames);
    }
    let port = bound.port();
    let mut hosts = vec![bound.to_string()];
    if bound.ip().is_loopback() {
        hosts.push(format!("localhost:{port}"));
    }
    for name in names {
        let n = name.trim().to_ascii_lowercase();
        if n.is_empty() || n.len() > 255 || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b)) {
            return Err(AuthConfigError::BadHostName(name.chars().take(80).collect()));
        }
        // `name:port` unless it already ends in a port (`[v6]` alone has none).
        hosts.push(if has_port(&n) { n } else { format!("{n}:{port}") });
    }
    Ok(hosts)
}

/// Whether `host` ends in `:PORT` (`[v6]` alone has none).
fn has_port(host: &str) -> bool {
    host.rsplit_once(':').is_some_and(|(h, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && (!h.contains(':') || h.ends_with(']')))
}

/// Whether a Host header names this dashboard (DNS rebinding: a page of another name
/// resolved to this address sends its own name). A Host without a port is port 80, as
/// browsers omit the default port.
pub fn host_allowed(host: Option<&str>, allowed: &[String]) -> bool {
    let Some(h) = host.map(str::trim).filter(|h| !h.is_empty()) else { return false };
    let h = if has_port(h) { h.to_string() } else { format!("{h}:80") };
    allowed.iter().any(|a| a.eq_ignore_ascii_case(&h))
}

/// Whether a state change comes from a page this dashboard served: Origin must be
/// `http://HOST`; without Origin, Referer must start with `http://HOST/`; with neither,
/// only a Bearer-authenticated script passes (browsers send Origin on cross-site POSTs).
pub fn origin_allowed(origin: Option<&str>, referer: Option<&str>, host: &str, bearer: bool) -> bool {
    let own = format!("http://{host}");
    match (origin, referer) {
        (Some(o), _) => o.trim().eq_ignore_ascii_case(&own),
        (None, Some(r)) => r.trim().get(..own.len() + 1).is_some_and(|p| p.eq_ignore_ascii_case(&format!("{own}/"))),
        (None, None) => bearer,
    }
}

/// `Set-Cookie` for a new session: HttpOnly (no script reads it), SameSite=Strict (no
/// other site's page sends it), Path=/, and a Max-Age matching the session's life.
pub fn session_cookie(id: &str) -> String {
    format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_LIFETIME_SECS}")
}

/// `Set-Cookie` that removes the session cookie (logout).
pub fn cleared_cookie() -> String {
    format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// The session id in a `Cookie` header, if any.
pub fn cookie_session(cookie: Option<&str>) -> Option<&str> {
    cookie?.split(';').find_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('=')).filter(|v| !v.is_empty())
}

/// The token of `Authorization: Bearer <token>`, if that is the header's form.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// A local redirect target: a path on this server (not `//host` or `/\host`, which a
/// browser reads as another site), printable ASCII only (it goes into a header).
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\") && n.len() <= 1024 && n.bytes().all(|b| b.is_ascii_graphic()) => n,
        _ => "/",
    }
}

/// Live sessions: id → when it ends.
#[derive(Debug, Default)]
pub struct Sessions {
    by_id: HashMap<String, Instant>,
}

impl Sessions {
    /// Opens a session ending `SESSION_LIFETIME_SECS` after `now`: expired ones go
    /// first, then, at `SESSIONS_MAX`, the one ending soonest (the oldest).
    pub fn open(&mut self, id: String, now: Instant) {
        self.by_id.retain(|_, end| *end > now);
        while self.by_id.len() >= SESSIONS_MAX {
            let Some(oldest) = self.by_id.iter().min_by_key(|(_, end)| **end).map(|(id, _)| id.clone()) else { break };
            self.by_id.remove(&oldest);
        }
        self.by_id.insert(id, now + Duration::from_secs(SESSION_LIFETIME_SECS));
    }

    /// Whether `id` is a live session at `now` (an expired one is dropped).
    pub fn valid(&mut self, id: &str, now: Instant) -> bool {
        match self.by_id.get(id) {
            Some(end) if *end > now => true,
            Some(_) => {
                self.by_id.remove(id);
                false
            }
            None => false,
        }
    }

    pub fn close(&mut self, id: &str) {
        self.by_id.remove(id);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// What a request may do, as decided before routing.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated: route it.
    Pass,
    /// `/login` or `/logout`, or a public asset: the caller handles it.
    Public,
    /// Answer this at once (401, 403 or a redirect to the login page).
    Refuse(Response),
}

/// The dashboard's access rules and sessions.
pub struct Guard {
    token: String,
    hosts: Vec<String>,
    sessions: Mutex<Sessions>,
}

impl std::fmt::Debug for Guard {
    // Never the token, nor session ids: both are keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Guard {{ hosts: {:?}, token: <hidden> }}", self.hosts)
    }
}

fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.header(name)
}

impl Guard {
    /// `token`: the configured one, or `None` to generate one (loopback only).
    pub fn new(token: Option<String>, bound: SocketAddr, host_names: &[String]) -> Result<Guard, AuthConfigError> {
        let token = match token {
            Some(t) => {
                check_token(&t)?;
                t
            }
            None if bound.ip().is_loopback() => random_hex()?,
            None => return Err(AuthConfigError::TokenRequired(bound)),
        };
        Ok(Guard { token, hosts: allowed_hosts(bound, host_names)?, sessions: Mutex::new(Sessions::default()) })
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The token compared in constant time (its length aside).
    pub fn token_matches(&self, given: &str) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(given.as_bytes().ct_eq(self.token.as_bytes()))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // A panic while holding the lock cannot leave the map half-updated (each
        // operation is one map call), so a poisoned lock is still usable.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a session and returns its `Set-Cookie` value.
    pub fn login(&self, now: Instant) -> Result<String, AuthConfigError> {
        let id = random_hex()?;
        self.sessions().open(id.clone(), now);
        Ok(session_cookie(&id))
    }

    pub fn logout(&self, req: &Request) {
        if let Some(id) = cookie_session(header(req, "cookie")) {
            self.sessions().close(id);
        }
    }

    /// Host, then Origin for state changes, then a session or Bearer token.
    pub fn check(&self, req: &Request, now: Instant) -> Verdict {
        let host = header(req, "host");
        if !host_allowed(host, &self.hosts) {
            return Verdict::Refuse(forbidden(format!("Host `{}` is not one this dashboard answers to ({}); start it with --host-name to add a name", host.unwrap_or("").chars().take(80).collect::<String>(), self.hosts.join(", "))));
        }
        let bearer_ok = bearer(header(req, "authorization")).is_some_and(|t| self.token_matches(t));
        if !matches!(req.method.as_str(), "GET" | "HEAD") && !origin_allowed(header(req, "origin"), header(req, "referer"), host.unwrap_or_default().trim(), bearer_ok) {
            return Verdict::Refuse(forbidden("cross-origin request refused: a change must come from a page of this dashboard (Origin or Referer of this host)".into()));
        }
        let path = req.path.as_str();
        if matches!(path, "/login" | "/logout" | "/favicon.ico") || path.starts_with("/assets/") {
            return Verdict::Public;
        }
        let session_ok = cookie_session(header(req, "cookie")).is_some_and(|id| self.sessions().valid(id, now));
        if session_ok || bearer_ok {
            return Verdict::Pass;
        }
        if path.starts_with("/api/") {
            let body = serde_json::json!({ "error": "not logged in: log in at /login, or send Authorization: Bearer <token>", "status": 401 });
            return Verdict::Refuse(Response { status: 401, content_type: "application/json; charset=utf-8", body: body.to_string().into_bytes(), headers: Vec::new() });
        }
        Verdict::Refuse(redirect(&format!("/login?next={}", encode_query(&page_target(req)))))
    }
}

fn forbidden(message: String) -> Response {
    let body = serde_json::json!({ "error": message, "status": 403 });
    Response { status: 403, content_type: "application/json; charset=utf-8", body: body.to_string().into_bytes(), headers: Vec::new() }
}

/// A 303 to `location` (a local path).
pub fn redirect(location: &str) -> Response {
    Response { status: 303, content_type: "text/plain; charset=utf-8", body: Vec::new(), headers: vec![("Location", location.to_string())] }
}

/// The path and query of `req` as the browser asked for it (to come back after login).
fn page_target(req: &Request) -> String {
    if req.query.is_empty() {
        return req.path.clone();
    }
    let q: Vec<String> = req.query.iter().map(|(k, v)| format!("{}={}", encode_query(k), encode_query(v))).collect();
    format!("{}?{}", req.path, q.join("&"))
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn encode_query(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// The login form (no script: the page policy allows none inline).
pub fn login_page(next: &str, message: Option<&str>) -> Response {
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let note = message.map(|m| format!("<p class=\"error\">{}</p>", esc(m))).unwrap_or_default();
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>RingMQ dashboard: log in</title><link rel=\"stylesheet\" href=\"/assets/style.css\"><link rel=\"icon\" href=\"/assets/favicon.svg\"></head><body><main id=\"login\"><h1>RingMQ dashboard</h1>{note}<form method=\"post\" action=\"/login\"><label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" autofocus></label><input type=\"hidden\" name=\"next\" value=\"{}\"><button type=\"submit\">Log in</button></form><p>The token is the one given with --token or RINGMQ_DASHBOARD_TOKEN, or the one the dashboard printed at start.</p></main></body></html>",
        esc(next)
    );
    Response { status: if message.is_some() { 401 } else { 200 }, content_type: "text/html; charset=utf-8", body: html.into_bytes(), headers: Vec::new() }
}

/// `/login` and `/logout` (after `Guard::check` passed them as public): GET shows the
/// form (or, with `?token=`, logs in and redirects: a link a script can print); POST
/// takes the form's `token`.
pub fn login_routes(guard: &Guard, req: &Request, now: Instant) -> Result<Response, HttpError> {
    let form;
    let params: &[(String, String)] = if req.method == "POST" {
        let body = std::str::from_utf8(&req.body).map_err(|_| HttpError::BadRequest("the form is not UTF-8".into()))?;
        form = super::http::parse_query(body)?;
        &form
    } else {
        &req.query
    };
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let next = safe_next(param("next"));
    match (req.path.as_str(), req.method.as_str()) {
        ("/logout", "POST") => {
            guard.logout(req);
            let mut r = redirect("/login");
            r.headers.push(("Set-Cookie", cleared_cookie()));
            Ok(r)
        }
        ("/logout", m) => Err(HttpError::MethodNotAllowed(format!("/logout answers POST only, not {m}"))),
        ("/login", "GET" | "POST") => match param("token") {
            None if req.method == "GET" => Ok(login_page(next, None)),
            Some(t) if guard.token_matches(t) => {
                let cookie = guard.login(now).map_err(|e| HttpError::Unavailable(e.to_string()))?;
                let mut r = redirect(next);
                r.headers.push(("Set-Cookie", cookie));
                Ok(r)
            }
            _ => Ok(login_page(next, Some("wrong token"))),
        },
        ("/login", m) => Err(HttpError::MethodNotAllowed(format!("/login answers GET and POST only, not {m}"))),
        (path, _) => Err(HttpError::NotFound(format!("no such path: {path}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-token";

    fn guard() -> Guard {
        Guard::new(Some(TOKEN.into()), "127.0.0.1:8080".parse().unwrap(), &["dash.example.com".into()]).unwrap()
    }

    fn req(method: &str, target: &str, headers: &[(&str, &str)]) -> Request {
        let mut head = format!("{method} {target} HTTP/1.1");
        for (k, v) in headers {
            head.push_str(&format!("\r\n{k}: {v}"));
        }
        super::super::http::parse_head(head.as_bytes()).unwrap().0
    }

    fn status(v: &Verdict) -> u16 {
        match v {
            Verdict::Pass => 0,
            Verdict::Public => 1,
            Verdict::Refuse(r) => r.status,
        }
    }

    #[test]
    fn start_needs_a_token_off_loopback() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(Guard::new(None, any, &[]).unwrap_err(), AuthConfigError::TokenRequired(any));
        let generated = Guard::new(None, "127.0.0.1:0".parse().unwrap(), &[]).unwrap();
        assert_eq!(generated.token().len(), 64);
        assert_ne!(generated.token(), Guard::new(None, "[::1]:0".parse().unwrap(), &[]).unwrap().token());
        for bad in ["short", "has a space in it!!", &"x".repeat(TOKEN_BYTES_MAX + 1), "tab\there-0123456789"] {
            assert_eq!(Guard::new(Some(bad.into()), any, &[]).unwrap_err(), AuthConfigError::BadToken, "{bad:?}");
        }
        assert!(Guard::new(Some(TOKEN.into()), any, &[]).is_ok());
        assert!(matches!(Guard::new(Some(TOKEN.into()), any, &["bad name/x".into()]), Err(AuthConfigError::BadHostName(_))));
    }

    #[test]
    fn allowed_hosts_table() {
        let check = |bound: &str, names: &[&str], expected: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            assert_eq!(allowed_hosts(bound.parse().unwrap(), &names).unwrap(), expected, "{bound} {names:?}");
        };
        check("127.0.0.1:8080", &[], &["127.0.0.1:8080", "localhost:8080"]);
        check("10.0.0.5:80", &["Dash.Example.com", "proxy:443", "[fd00::1]"], &["10.0.0.5:80", "dash.example.com:80", "proxy:443", "[fd00::1]:80"]);
        check("[::1]:9", &[], &["[::1]:9", "localhost:9"]);
    }

    #[test]
    fn host_and_origin_decisions() {
        let allowed = allowed_hosts("127.0.0.1:8080".parse().unwrap(), &["dash.example.com:80".into()]).unwrap();
        // host_allowed(Host header) → expected
        for (host, expected) in [
            (Some("127.0.0.1:8080"), true),
            (Some("LOCALHOST:8080"), true),
            (Some("dash.example.com"), true),
            (Some("dash.example.com:80"), true),
            (Some("dash.example.com:8080"), false),
            (Some("evil.example:8080"), false),
            (Some("127.0.0.1"), false),
            (Some("127.0.0.1:8080 x"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(host_allowed(host, &allowed), expected, "{host:?}");
        }
        let h = "127.0.0.1:8080";
        // origin_allowed(Origin, Referer, bearer) → expected
        for (origin, referer, bearer, expected) in [
            (Some("http://127.0.0.1:8080"), None, false, true),
            (Some("http://127.0.0.1:8080"), Some("http://evil/"), false, true),
            (Some("https://127.0.0.1:8080"), None, false, false),
            (Some("http://evil.example"), None, true, false),
            (Some("null"), None, false, false),
            (Some("http://127.0.0.1:80801"), None, false, false),
            (None, Some("http://127.0.0.1:8080/dlq?g=X"), false, true),
            (None, Some("http://127.0.0.1:8080"), false, false),
            (None, Some("http://127.0.0.1:8080.evil.example/"), false, false),
            (None, Some("http://evil.example/http://127.0.0.1:8080/"), false, false),
            (None, None, false, false),
            (None, None, true, true),
        ] {
            assert_eq!(origin_allowed(origin, referer, h, bearer), expected, "{origin:?} {referer:?} {bearer}");
        }
    }

    #[test]
    fn cookie_and_header_parsing() {
        let cookie = session_cookie("abc");
        for attribute in ["ringmq_session=abc;", "HttpOnly", "SameSite=Strict", "Path=/", &format!("Max-Age={SESSION_LIFETIME_SECS}")] {
            assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
        }
        assert!(cleared_cookie().contains("Max-Age=0") && cleared_cookie().starts_with("ringmq_session=;"));
        // cookie_session(Cookie header) → session id
        for (header, expected) in [
            (Some("ringmq_session=abc"), Some("abc")),
            (Some("a=1; ringmq_session=abc; b=2"), Some("abc")),
            (Some("ringmq_sessionx=abc"), None),
            (Some("ringmq_session="), None),
            (Some(";;;=;"), None),
            (None, None),
        ] {
            assert_eq!(cookie_session(header), expected, "{header:?}");
        }
        // bearer(Authorization header) → token
        for (header, expected) in [(Some("Bearer t0k"), Some("t0k")), (Some("bearer  t0k "), Some("t0k")), (Some("Basic t0k"), None), (Some("Bearer"), None), (Some("Bearer "), None), (Some("\u{0}\u{fffd}"), None), (None, None)] {
            assert_eq!(bearer(header), expected, "{header:?}");
        }
        // safe_next(next parameter) → redirect target
        for (next, expected) in [(Some("/cluster"), "/cluster"), (Some("/topic?t=A&b=1"), "/topic?t=A&b=1"), (Some("//evil.example/"), "/"), (Some("/\\evil.example"), "/"), (Some("http://evil/"), "/"), (Some("/a\r\nSet-Cookie: x"), "/"), (Some(""), "/"), (None, "/")] {
            assert_eq!(safe_next(next), expected, "{next:?}");
        }
    }

    #[test]
    fn sessions_expire_and_are_bounded() {
        let t0 = Instant::now();
        let mut s = Sessions::default();
        s.open("a".into(), t0);
        assert!(s.valid("a", t0 + Duration::from_secs(SESSION_LIFETIME_SECS - 1)));
        assert!(!s.valid("a", t0 + Duration::from_secs(SESSION_LIFETIME_SECS)), "ends at its lifetime");
        assert_eq!(s.len(), 0, "an expired session is dropped when seen");
        for i in 0..SESSIONS_MAX + 5 {
            s.open(format!("s{i}"), t0 + Duration::from_secs(i as u64));
        }
        assert_eq!(s.len(), SESSIONS_MAX);
        assert!(!s.valid("s0", t0) && !s.valid("s4", t0) && s.valid("s5", t0) && s.valid(&format!("s{}", SESSIONS_MAX + 4), t0), "the oldest go first");
        s.close("s5");
        assert!(!s.valid("s5", t0));
    }

    #[test]
    fn guard_decisions() {
        let g = guard();
        let now = Instant::now();
        let host = ("Host", "127.0.0.1:8080");
        let same = ("Origin", "http://127.0.0.1:8080");
        let auth = format!("Bearer {TOKEN}");
        // check(request) → 0 pass, 1 public, else the refusal's status
        let cases: Vec<(Request, u16)> = vec![
            (req("GET", "/api/cluster", &[host]), 401),
            (req("GET", "/cluster", &[host]), 303),
            (req("GET", "/api/cluster", &[host, ("Authorization", &auth)]), 0),
            (req("GET", "/api/cluster", &[host, ("Authorization", "Bearer wrong-token-123456")]), 401),
            (req("GET", "/api/cluster", &[("Host", "evil.example:8080"), ("Authorization", &auth)]), 403),
            (req("GET", "/api/cluster", &[("Authorization", &auth)]), 403),
            (req("GET", "/assets/app.js", &[host]), 1),
            (req("GET", "/login", &[("Host", "dash.example.com:8080")]), 1),
            (req("POST", "/login", &[host, same]), 1),
            (req("POST", "/login", &[host, ("Origin", "http://evil.example")]), 403),
            (req("POST", "/login", &[host]), 403),
            (req("POST", "/api/dlq/resend?id=AB", &[host, ("Authorization", &auth)]), 0),
            (req("POST", "/api/dlq/resend?id=AB", &[host, ("Authorization", &auth), ("Origin", "http://evil.example")]), 403),
            (req("POST", "/api/dlq/resend?id=AB", &[host, ("Referer", "http://evil.example/x")]), 403),
            (req("POST", "/api/dlq/resend?id=AB", &[host, same]), 401),
        ];
        for (r, expected) in &cases {
            assert_eq!(status(&g.check(r, now)), *expected, "{} {} {:?}", r.method, r.path, r.headers);
        }
        // A login opens a session the cookie then carries, for GETs and same-origin POSTs.
        let cookie = g.login(now).unwrap();
        let pair = cookie.split(';').next().unwrap().to_string();
        assert_eq!(status(&g.check(&req("GET", "/api/cluster", &[host, ("Cookie", &pair)]), now)), 0);
        assert_eq!(status(&g.check(&req("POST", "/api/dlq/resend?id=AB", &[host, same, ("Cookie", &pair)]), now)), 0);
        assert_eq!(status(&g.check(&req("POST", "/api/dlq/resend?id=AB", &[host, ("Origin", "http://evil.example"), ("Cookie", &pair)]), now)), 403);
        let later = now + Duration::from_secs(SESSION_LIFETIME_SECS);
        assert_eq!(status(&g.check(&req("GET", "/api/cluster", &[host, ("Cookie", &pair)]), later)), 401, "expired");
        // The redirect keeps where the browser was going.
        let Verdict::Refuse(r) = g.check(&req("GET", "/topic?t=A%20B", &[host]), now) else { panic!() };
        assert_eq!(r.headers, vec![("Location", "/login?next=/topic%3Ft%3DA%2520B".to_string())]);
    }

    #[test]
    fn login_and_logout_routes() {
        let g = guard();
        let now = Instant::now();
        let host = ("Host", "127.0.0.1:8080");
        let form = |body: &str| {
            let mut r = req("POST", "/login", &[host, ("Origin", "http://127.0.0.1:8080")]);
            r.body = body.as_bytes().to_vec();
            r
        };
        let ok = login_routes(&g, &form(&format!("token={TOKEN}&next=%2Fdlq")), now).unwrap();
        assert_eq!((ok.status, ok.headers[0].clone()), (303, ("Location", "/dlq".to_string())));
        assert!(ok.headers[1].1.starts_with("ringmq_session=") && ok.headers[1].0 == "Set-Cookie");
        let wrong = login_routes(&g, &form("token=nope&next=/dlq"), now).unwrap();
        assert_eq!((wrong.status, wrong.headers.len()), (401, 0));
        let link = login_routes(&g, &req("GET", &format!("/login?token={TOKEN}&next=//evil.example"), &[host]), now).unwrap();
        assert_eq!(link.headers[0], ("Location", "/".to_string()));
        let page = login_routes(&g, &req("GET", "/login?next=/cluster", &[host]), now).unwrap();
        assert!(page.status == 200 && String::from_utf8_lossy(&page.body).contains("value=\"/cluster\""));
        assert_eq!(login_routes(&g, &form("\u{0}=%zz"), now).unwrap_err().status(), 400);
        let pair = ok.headers[1].1.split(';').next().unwrap().to_string();
        let out = login_routes(&g, &req("POST", "/logout", &[host, ("Cookie", &pair)]), now).unwrap();
        assert!(out.status == 303 && out.headers[1].1.contains("Max-Age=0"));
        assert_eq!(status(&g.check(&req("GET", "/api/cluster", &[host, ("Cookie", &pair)]), now)), 401, "logged out");
        assert_eq!(login_routes(&g, &req("GET", "/logout", &[host]), now).unwrap_err().status(), 405);
    }
}
