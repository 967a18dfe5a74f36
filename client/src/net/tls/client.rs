//! The connecting side: `ClientTls` wraps a freshly connected stream in TLS, checking
//! the server's certificate against `tls.client.trustCertPath` for the name of the
//! address connected to (or `tls.client.serverName`), showing the client certificate
//! when one is configured. Used by the client's connections and by the broker's own
//! (registration with NameServers, a slave's replication streams).
//!
//! Invariant: the files are looked at again at most every `TLS_RELOAD_INTERVAL_MS`,
//! and only when a connection is being made (a few `stat`s on the connecting thread);
//! a change that does not load keeps the configuration in force (logged once).
//! `!Send`: one per executor, as the connections it makes.

use super::reload::{ClientTlsReloader, Reload, TLS_RELOAD_INTERVAL_MS};
use super::settings::TlsClientSettings;
use super::stream::MaybeTls;
use super::TlsError;
use futures_lite::{AsyncRead, AsyncWrite};
use rustls::pki_types::ServerName;
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub struct ClientTls {
    connector: RefCell<futures_rustls::TlsConnector>,
    server_name: Option<ServerName<'static>>,
    reloader: RefCell<ClientTlsReloader>,
    next_check: Cell<Instant>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("settings", self.reloader.borrow().settings()).finish()
    }
}

/// The name a server's certificate is checked for when connecting to `addr`
/// (`host:port`, `ip:port`, `[v6]:port`).
pub fn server_name_of(addr: &str) -> Result<ServerName<'static>, io::Error> {
    let host = match addr.parse::<SocketAddr>() {
        Ok(sa) => sa.ip().to_string(),
        Err(_) => addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']).to_string(),
    };
    ServerName::try_from(host).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: no server name to check its certificate for: {e}")))
}

impl ClientTls {
    /// Loads the files (an error says which setting to fix); `None` when TLS is off.
    pub fn start(settings: &TlsClientSettings) -> Result<Option<Self>, TlsError> {
        let Some((config, reloader)) = ClientTlsReloader::start(settings)? else { return Ok(None) };
        if !settings.verifies_server() {
            tracing::warn!("TLS without checking the server's certificate (tls.client.authServer is off; set tls.client.trustCertPath to check it): the connection is encrypted but the server is not authenticated");
        }
        let server_name = match &settings.server_name {
            Some(name) => Some(ServerName::try_from(name.clone()).map_err(|e| TlsError::Config { key: "tls.client.serverName", reason: e.to_string() })?),
            None => None,
        };
        Ok(Some(Self {
            connector: RefCell::new(futures_rustls::TlsConnector::from(config)),
            server_name,
            reloader: RefCell::new(reloader),
            next_check: Cell::new(Instant::now() + Duration::from_millis(TLS_RELOAD_INTERVAL_MS)),
        }))
    }

    /// Picks up changed certificate files, at most every `TLS_RELOAD_INTERVAL_MS`.
    fn reload_if_due(&self) {
        let now = Instant::now();
        if now < self.next_check.get() {
            return;
        }
        self.next_check.set(now + Duration::from_millis(TLS_RELOAD_INTERVAL_MS));
        let polled = self.reloader.borrow_mut().poll();
        match polled {
            Reload::Unchanged => {}
            Reload::Reloaded(config) => {
                tracing::info!("TLS client certificate files changed: new connections use them");
                *self.connector.borrow_mut() = futures_rustls::TlsConnector::from(config);
            }
            Reload::Failed(e) => tracing::warn!(error = %e, "TLS client certificate files changed but do not load: keeping the ones loaded before"),
        }
    }

    /// TLS over `stream`, freshly connected to `addr`.
    pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(&self, addr: &str, stream: S) -> io::Result<MaybeTls<S>> {
        self.reload_if_due();
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => server_name_of(addr)?,
        };
        let connector = self.connector.borrow().clone();
        let tls = connector.connect(name, super::stream::ReadBuffered::new(stream)).await?;
        Ok(MaybeTls::Tls(Box::new(futures_rustls::TlsStream::Client(tls))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_address() {
        // check(address, expected name or error)
        let check = |addr: &str, expected: Option<&str>| {
            let got = server_name_of(addr).ok().map(|n| n.to_str().to_string());
            assert_eq!(got.as_deref(), expected, "{addr}");
        };
        check("127.0.0.1:9876", Some("127.0.0.1"));
        check("[::1]:9876", Some("::1"));
        check("localhost:10911", Some("localhost"));
        check("broker-a.example:10911", Some("broker-a.example"));
        check("bad name:1", None);
    }
}
