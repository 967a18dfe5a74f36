//! TLS on every RingMQ connection, shared by the broker (client and replication ports,
//! its own outgoing connections), the NameServer and the client (Apache RocketMQ's
//! `tls.*` semantics, with rustls and its `ring` provider).
//!
//! Owns: the settings and their checks (`settings.rs`: `tls.server.mode`
//! disabled / permissive / enforcing, `tls.server.need.client.auth`, the PEM paths, the
//! outgoing `tls.client.*`), reading PEM files and building rustls configurations
//! (`config.rs`), noticing changed files and rebuilding (`reload.rs`), telling TLS from
//! plain by a connection's first byte and replaying that byte (`detect.rs`), the
//! server's edge that accepts a connection in the configured mode (`edge.rs`), the
//! client's connector (`client.rs`), the one stream type both sides hand on
//! (`stream.rs`) and, with the `cert-gen` feature, certificate generation for tests and
//! loadgen's self-signed runs (`gen.rs`).
//!
//! Architecture Invariant: what is configured is honoured or refused at start-up — a
//! setting rustls cannot honour (`tls.server.keyPassword`: encrypted keys) is an error,
//! never ignored; a certificate, key or CA file that does not load fails the start with
//! its key and path.
//! Architecture Invariant: a reload never leaves a server without a certificate: a
//! changed file set that does not load keeps the configuration in force (logged once
//! per change), and only new connections get a new one; a connection's TLS state is its
//! own once its handshake is done.
//! Architecture Invariant: every configuration names the `ring` provider explicitly, so
//! a process that links another provider too (the interop tests link aws-lc-rs through
//! another client) builds the same configurations.

mod client;
mod config;
mod detect;
mod edge;
#[cfg(any(test, feature = "cert-gen"))]
pub mod gen;
mod reload;
mod settings;
mod stream;

pub use client::{server_name_of, ClientTls};
pub use config::{build_client_config, build_server_config, load_certs, PEM_FILE_BYTES_MAX};
pub use detect::{classify_first_byte, read_first_byte, FirstByte, PrefixedStream, TLS_HANDSHAKE_RECORD};
pub use edge::{ServerEdge, PLAIN_REFUSAL_READ_BYTES_MAX, PLAIN_REFUSAL_READ_MS, TLS_HANDSHAKE_TIMEOUT_MS, TLS_REFUSAL_LOG_INTERVAL_MS};
pub use reload::{FileStamp, Reload, ServerTlsReloader, ClientTlsReloader, TLS_RELOAD_INTERVAL_MS};
pub use settings::{ClientAuth, ServerMode, TlsClientSettings, TlsServerSettings};
pub use stream::{MaybeTls, ReadBuffered, TLS_READ_BUFFER_BYTES};
// The versions RingMQ builds with, for callers that inspect a session (tests).
pub use futures_rustls;
pub use rustls;

/// Why TLS could not be set up. Each names the setting (Apache's key) to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error("{key} {path}: {reason}")]
    File { key: &'static str, path: std::path::PathBuf, reason: String },
    #[error("{what}: {source}")]
    Rustls { what: &'static str, source: rustls::Error },
}
