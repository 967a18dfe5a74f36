//! `ringmq-admin dashboard`: a web UI over the same remoting requests as the CLI —
//! clusters, brokers and their shards; topics with per-queue offsets; consumer groups
//! with lag per queue; live throughput and latency charts; message search by key, id
//! and time with a detail view; dead-letter queues with resend.
//!
//! Layout: `http.rs` (bounded HTTP/1.1 server on std threads), `routes.rs` (URL →
//! page, embedded asset or checked API call), `backend.rs` (the glommio thread that owns
//! the client and answers API calls), `live.rs` (chart points from runtime-info
//! samples), `assets/` (the page: HTML, CSS, JS and an icon, all compiled in).
//!
//! Invariants: the page loads nothing from anywhere but this server (no CDN, no web
//! fonts; the response policy forbids it too), so it works offline; the HTTP threads
//! never touch the client (`!Send`) — they hand checked calls to the backend over a
//! bounded channel; every request, queue and list is bounded (see each module's
//! `*_MAX`); the first line on stdout is `listening on http://ADDR/` with the bound
//! address, so a script (or test) that asked for port 0 learns the port; every request
//! passes `auth::Guard::check` (Host, Origin on changes, session or Bearer token)
//! before it is routed, so no page, API call or change is served to a stranger.

mod auth;
mod backend;
mod http;
mod live;
mod routes;

use http::{Request, Response};
use routes::Target;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Instant;

/// The environment variable a token may come from (kept out of `ps` listings).
pub const TOKEN_ENV: &str = "RINGMQ_DASHBOARD_TOKEN";

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Backend(#[from] backend::BackendError),
    #[error("cannot serve: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Auth(#[from] auth::AuthConfigError),
}

/// Serves the dashboard for `namesrvs` on `listen` until the process is stopped.
/// `token`: the login token (else one is generated and printed; refused off loopback);
/// `host_names`: names besides the bound address that browsers may use (a proxy's).
pub fn run(namesrvs: Vec<String>, listen: SocketAddr, token: Option<String>, host_names: Vec<String>) -> Result<(), DashboardError> {
    // Checked before anything starts: a refused configuration never listens.
    if token.is_none() && !listen.ip().is_loopback() {
        return Err(auth::AuthConfigError::TokenRequired(listen).into());
    }
    let generated = token.is_none();
    let backend = backend::Backend::start(namesrvs.clone())?;
    let listener = TcpListener::bind(listen).map_err(|source| DashboardError::Bind { addr: listen, source })?;
    let bound = listener.local_addr().map_err(|source| DashboardError::Bind { addr: listen, source })?;
    let guard = Arc::new(auth::Guard::new(token, bound, &host_names)?);
    {
        let mut out = std::io::stdout().lock();
        // A closed stdout (a detached service) must not stop the server.
        let _ = writeln!(out, "listening on http://{bound}/ (NameServers {})", namesrvs.join(";"));
        if generated {
            // Only the local user who started it sees stdout: the link is their key.
            let _ = writeln!(out, "no --token or {TOKEN_ENV} given: log in with http://{bound}/login?token={} (the token is new at each start)", guard.token());
        }
        let _ = writeln!(out, "answers to Host {}", guard.hosts().join(", "));
        let _ = out.flush();
    }
    let handler: http::Handler = Arc::new(move |req: &Request| handle(&backend, &guard, req));
    http::serve(listener, handler).map_err(DashboardError::Serve)
}

fn handle(backend: &backend::Backend, guard: &auth::Guard, req: &Request) -> Response {
    let now = Instant::now();
    match guard.check(req, now) {
        auth::Verdict::Refuse(r) => return r,
        auth::Verdict::Public if matches!(req.path.as_str(), "/login" | "/logout") => {
            return auth::login_routes(guard, req, now).unwrap_or_else(|e| e.response());
        }
        auth::Verdict::Public | auth::Verdict::Pass => {}
    }
    match routes::route(req) {
        Ok(Target::Page) => Response { status: 200, content_type: routes::INDEX_HTML.content_type, body: routes::INDEX_HTML.bytes.to_vec(), headers: Vec::new() },
        Ok(Target::Asset(a)) => Response { status: 200, content_type: a.content_type, body: a.bytes.to_vec(), headers: Vec::new() },
        Ok(Target::Api(call)) => match backend.ask(call) {
            Ok(v) => Response::json(&v),
            Err(e) => e.response(),
        },
        Err(e) => e.response(),
    }
}
