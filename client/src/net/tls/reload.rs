//! Certificates and keys that change on disk: a reloader remembers each watched file's
//! stamp (length and modification time) and, when one differs, builds the
//! configuration again. Whoever owns the connections polls it every
//! `TLS_RELOAD_INTERVAL_MS` (the broker's shards and the NameServer on glommio's
//! blocking pool, since it reads files; the client when it connects) and installs what
//! it returns for connections made from then on.
//!
//! Invariant: a file set that does not load leaves the configuration in force and is
//! reported once (`Reload::Failed`), not at every poll; the same stamps are not tried
//! again, a further change is. Stamps are taken before the files are read, so a write
//! that lands during a load is seen at the next poll.
//! Invariant: reloaders are `Send` and own no connection: they read files and build
//! immutable rustls configurations, nothing else.

use super::config::{build_client_config, build_server_config};
use super::settings::{TlsClientSettings, TlsServerSettings};
use super::TlsError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How often certificate, key and CA files are checked for changes.
pub const TLS_RELOAD_INTERVAL_MS: u64 = 5_000;

/// What says a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified_ns: u128,
}

impl FileStamp {
    /// `None` when the file cannot be looked at (missing: a load will say why).
    pub fn of(path: &Path) -> Option<Self> {
        let m = std::fs::metadata(path).ok()?;
        let modified_ns = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        Some(Self { len: m.len(), modified_ns })
    }
}

/// What a poll found.
#[derive(Debug)]
pub enum Reload<T> {
    Unchanged,
    /// The files changed and load: install this for new connections.
    Reloaded(T),
    /// The files changed and do not load: the configuration in force stays. Said once
    /// per change.
    Failed(TlsError),
}

/// The stamps of a file set: as last loaded, and as last refused.
#[derive(Debug, Clone)]
struct Watch {
    files: Vec<PathBuf>,
    loaded: Vec<Option<FileStamp>>,
    refused: Option<Vec<Option<FileStamp>>>,
}

impl Watch {
    fn new(files: Vec<PathBuf>) -> Self {
        let loaded = stamps(&files);
        Self { files, loaded, refused: None }
    }

    /// The stamps now, when they differ from both the loaded and the refused ones.
    fn changed(&self) -> Option<Vec<Option<FileStamp>>> {
        let now = stamps(&self.files);
        (now != self.loaded && self.refused.as_ref() != Some(&now)).then_some(now)
    }

    fn outcome<T>(&mut self, now: Vec<Option<FileStamp>>, built: Result<T, TlsError>) -> Reload<T> {
        match built {
            Ok(t) => {
                self.loaded = now;
                self.refused = None;
                Reload::Reloaded(t)
            }
            Err(e) => {
                self.refused = Some(now);
                Reload::Failed(e)
            }
        }
    }
}

fn stamps(files: &[PathBuf]) -> Vec<Option<FileStamp>> {
    files.iter().map(|f| FileStamp::of(f)).collect()
}

/// Rebuilds a server configuration when its files change. A clone watches on its own
/// (each broker shard polls its own).
#[derive(Debug, Clone)]
pub struct ServerTlsReloader {
    settings: TlsServerSettings,
    watch: Watch,
}

impl ServerTlsReloader {
    /// Loads the configuration once (start-up: an error fails the start) and returns it
    /// with the reloader that follows its files; `None` when TLS is off.
    pub fn start(settings: &TlsServerSettings) -> Result<Option<(Arc<rustls::ServerConfig>, Self)>, TlsError> {
        settings.check()?;
        if !settings.enabled() {
            return Ok(None);
        }
        let watch = Watch::new(settings.files());
        let config = build_server_config(settings)?;
        Ok(Some((config, Self { settings: settings.clone(), watch })))
    }

    /// Rebuilds when a file changed. Blocking (reads files).
    pub fn poll(&mut self) -> Reload<Arc<rustls::ServerConfig>> {
        let Some(now) = self.watch.changed() else { return Reload::Unchanged };
        let built = build_server_config(&self.settings);
        self.watch.outcome(now, built)
    }
}

/// Rebuilds a client configuration when its files change.
#[derive(Debug, Clone)]
pub struct ClientTlsReloader {
    settings: TlsClientSettings,
    watch: Watch,
}

impl ClientTlsReloader {
    /// As `ServerTlsReloader::start`; `None` when outgoing TLS is off.
    pub fn start(settings: &TlsClientSettings) -> Result<Option<(Arc<rustls::ClientConfig>, Self)>, TlsError> {
        settings.check()?;
        if !settings.enable {
            return Ok(None);
        }
        let watch = Watch::new(settings.files());
        let config = build_client_config(settings)?;
        Ok(Some((config, Self { settings: settings.clone(), watch })))
    }

    pub fn settings(&self) -> &TlsClientSettings {
        &self.settings
    }

    /// Rebuilds when a file changed. Blocking (reads files).
    pub fn poll(&mut self) -> Reload<Arc<rustls::ClientConfig>> {
        let Some(now) = self.watch.changed() else { return Reload::Unchanged };
        let built = build_client_config(&self.settings);
        self.watch.outcome(now, built)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tls::gen::{write_atomically, TestPki};
    use crate::net::tls::ServerMode;

    /// Bumps a file's modification time past the filesystem's granularity without a
    /// sleep: the stamp compares length and time, and a rewrite may keep both.
    fn touch_later(path: &Path, secs: u64) {
        let file = std::fs::File::options().write(true).open(path).expect("open");
        let t = std::time::SystemTime::now() + std::time::Duration::from_secs(secs);
        file.set_modified(t).expect("set mtime");
    }

    fn kind<T>(r: &Reload<T>) -> &'static str {
        match r {
            Reload::Unchanged => "unchanged",
            Reload::Reloaded(_) => "reloaded",
            Reload::Failed(_) => "failed",
        }
    }

    #[test]
    fn a_change_reloads_a_broken_file_is_reported_once_and_a_fix_reloads() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = TestPki::generate(dir.path()).expect("certificates");
        let (_, mut reloader) = ServerTlsReloader::start(&pki.server_settings(ServerMode::Enforcing)).expect("loads").expect("enabled");
        assert_eq!(kind(&reloader.poll()), "unchanged");
        pki.renew_server("renewed").expect("renew");
        touch_later(&pki.server_cert, 10);
        assert_eq!(kind(&reloader.poll()), "reloaded");
        assert_eq!(kind(&reloader.poll()), "unchanged");
        let good = std::fs::read_to_string(&pki.server_cert).expect("read");
        write_atomically(&pki.server_cert, "garbage", false).expect("write");
        let r = reloader.poll();
        assert!(matches!(&r, Reload::Failed(TlsError::File { key: "tls.server.certPath", .. })), "{r:?}");
        assert_eq!(kind(&reloader.poll()), "unchanged", "the same broken files are reported once");
        write_atomically(&pki.server_cert, &good, false).expect("write");
        touch_later(&pki.server_cert, 20);
        assert_eq!(kind(&reloader.poll()), "reloaded");
    }

    #[test]
    fn disabled_means_no_reloader() {
        assert!(ServerTlsReloader::start(&TlsServerSettings::default()).expect("ok").is_none());
        assert!(ClientTlsReloader::start(&TlsClientSettings::default()).expect("ok").is_none());
    }
}
