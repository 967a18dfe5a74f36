//! One shard's TLS (`tls.*`, `ringmq_client::net::tls` holds the shared code): the edges
//! of its client port and, on a master, its replication port (`ServerEdge`: the mode,
//! the certificate in force, the refusal counts), the connector of its own outgoing
//! connections (NameServer registration, a slave's replication stream), and the task
//! that reloads changed certificate files.
//!
//! Architecture Invariant: each shard builds and owns its TLS state (no TLS state is
//! shared between shard threads; the start-up load in `launch::start` only checks the
//! files before any shard starts, so a bad file fails the start, not a shard). A reload
//! reads files on glommio's blocking pool, never on the shard thread, every
//! `TLS_RELOAD_INTERVAL_MS`, and installs the new configuration for connections
//! accepted after it; open connections keep their session.
//! With `tls.server.mode=disabled` the ports have no edge and serve the socket as before.

use ringmq_client::net::tls::{ClientTls, Reload, ServerEdge, ServerMode, ServerTlsReloader, TlsError, TLS_RELOAD_INTERVAL_MS};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Everything TLS one shard holds.
pub struct ShardTls {
    /// The client port's edge; `None` when `tls.server.mode=disabled`.
    pub client_port: Option<Rc<ServerEdge>>,
    /// The replication port's edge (masters), same certificate and mode.
    pub replication: Option<Rc<ServerEdge>>,
    /// TLS for the broker's own connections (`useTLS` / `tls.enable`).
    pub outgoing: Option<Rc<ClientTls>>,
}

/// What `launch::start` loaded and checked once, handed to every shard.
#[derive(Clone)]
pub struct TlsStart {
    server: Option<(Arc<ringmq_client::net::tls::rustls::ServerConfig>, ServerTlsReloader, ServerMode)>,
    client: ringmq_client::net::tls::TlsClientSettings,
}

impl TlsStart {
    /// Loads every configured file once (before any shard starts): an error names the
    /// setting and the file.
    pub fn load(settings: &crate::config::TlsSettings) -> Result<Self, TlsError> {
        let server = ServerTlsReloader::start(&settings.server)?.map(|(config, reloader)| (config, reloader, settings.server.mode));
        // Loaded here for the error only: each shard builds its own connector.
        drop(ClientTls::start(&settings.client)?);
        Ok(Self { server, client: settings.client.clone() })
    }

    /// The shard's own TLS state, and the reloader its reload task runs (`None` when
    /// the ports speak plain only).
    pub fn for_shard(&self, master: bool) -> Result<(ShardTls, Option<ServerTlsReloader>), TlsError> {
        let (client_port, replication, reloader) = match &self.server {
            None => (None, None, None),
            Some((config, reloader, mode)) => {
                let edge = |label| Rc::new(ServerEdge::new(label, *mode, Some(config.clone())));
                (Some(edge("broker")), master.then(|| edge("replication")), Some(reloader.clone()))
            }
        };
        let outgoing = ClientTls::start(&self.client)?.map(Rc::new);
        Ok((ShardTls { client_port, replication, outgoing }, reloader))
    }
}

impl ShardTls {
    /// TLS handshakes that failed on this shard's ports.
    pub fn handshake_failures(&self) -> u64 {
        self.edges().map(|e| e.handshake_failures()).sum()
    }

    /// Plain connections this shard's ports refused (`enforcing`).
    pub fn plain_refusals(&self) -> u64 {
        self.edges().map(|e| e.plain_refusals()).sum()
    }

    fn edges(&self) -> impl Iterator<Item = &Rc<ServerEdge>> {
        self.client_port.iter().chain(self.replication.iter())
    }

    /// Polls the certificate files every `TLS_RELOAD_INTERVAL_MS` until `stop`, and
    /// installs a configuration that changed and loads. Shard `log_shard` says what
    /// happened (once per change); the others install silently.
    pub async fn reload_task(self: Rc<Self>, mut reloader: ServerTlsReloader, stop: Arc<AtomicBool>, shard: usize, log_shard: bool) {
        while !stop.load(Ordering::SeqCst) {
            glommio::timer::sleep(Duration::from_millis(TLS_RELOAD_INTERVAL_MS)).await;
            // Reads files: on the blocking pool, the reloader travels there and back.
            let (polled, back) = glommio::executor()
                .spawn_blocking(move || {
                    let polled = reloader.poll();
                    (polled, reloader)
                })
                .await;
            reloader = back;
            match polled {
                Reload::Unchanged => {}
                Reload::Reloaded(config) => {
                    for edge in self.edges() {
                        edge.install(config.clone());
                    }
                    if log_shard {
                        tracing::info!(shard, "TLS certificate files changed: new connections get the new certificate");
                    }
                }
                Reload::Failed(e) => {
                    if log_shard {
                        tracing::warn!(shard, error = %e, "TLS certificate files changed but do not load: keeping the certificate in force");
                    }
                }
            }
        }
    }
}
