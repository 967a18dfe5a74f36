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
//! address, so a script (or test) that asked for port 0 learns the port.

mod backend;
mod http;
mod live;
mod routes;

use http::{Request, Response};
use routes::Target;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Backend(#[from] backend::BackendError),
    #[error("cannot serve: {0}")]
    Serve(std::io::Error),
}

/// Serves the dashboard for `namesrvs` on `listen` until the process is stopped.
pub fn run(namesrvs: Vec<String>, listen: SocketAddr) -> Result<(), DashboardError> {
    let backend = backend::Backend::start(namesrvs.clone())?;
    let listener = TcpListener::bind(listen).map_err(|source| DashboardError::Bind { addr: listen, source })?;
    let bound = listener.local_addr().map_err(|source| DashboardError::Bind { addr: listen, source })?;
    {
        let mut out = std::io::stdout().lock();
        // A closed stdout (a detached service) must not stop the server.
        let _ = writeln!(out, "listening on http://{bound}/ (NameServers {})", namesrvs.join(";"));
        let _ = out.flush();
    }
    let handler: http::Handler = Arc::new(move |req: &Request| handle(&backend, req));
    http::serve(listener, handler).map_err(DashboardError::Serve)
}

fn handle(backend: &backend::Backend, req: &Request) -> Response {
    match routes::route(req) {
        Ok(Target::Page) => Response { status: 200, content_type: routes::INDEX_HTML.content_type, body: routes::INDEX_HTML.bytes.to_vec() },
        Ok(Target::Asset(a)) => Response { status: 200, content_type: a.content_type, body: a.bytes.to_vec() },
        Ok(Target::Api(call)) => match backend.ask(call) {
            Ok(v) => Response::json(&v),
            Err(e) => e.response(),
        },
        Err(e) => e.response(),
    }
}
