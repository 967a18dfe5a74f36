//! TLS settings as Apache RocketMQ names them (`TlsSystemConfig`): the server side
//! (`tls.server.mode`, `tls.server.certPath`, `tls.server.keyPath`,
//! `tls.server.keyPassword`, `tls.server.need.client.auth`, `tls.server.trustCertPath`)
//! and the side that connects (`tls.enable` / `useTLS`, `tls.client.certPath`,
//! `tls.client.keyPath`, `tls.client.keyPassword`, `tls.client.trustCertPath`,
//! `tls.client.authServer`, and RingMQ's `tls.client.serverName`). TOML files take the
//! same keys under `[tls.server]` / `[tls.client]` in snake_case (camelCase accepted).
//!
//! Invariant: `check` refuses what cannot be honoured before anything is loaded: a key
//! password (rustls reads no encrypted keys), a TLS mode without a certificate and key,
//! client authentication without a CA to check it against, a client certificate
//! without its key (or the reverse), and server verification with nothing to verify
//! against. A key password never appears in `Debug`.

use super::TlsError;
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

/// `tls.server.mode`: what a server port accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerMode {
    /// Plain connections only (the default).
    #[default]
    #[serde(alias = "DISABLED")]
    Disabled,
    /// TLS and plain on one port, told apart by the first byte.
    #[serde(alias = "PERMISSIVE")]
    Permissive,
    /// TLS only; a plain connection is refused (counted, logged at a bounded rate).
    #[serde(alias = "ENFORCING")]
    Enforcing,
}

impl ServerMode {
    /// Apache's values, any case.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(Self::Disabled),
            "permissive" => Ok(Self::Permissive),
            "enforcing" => Ok(Self::Enforcing),
            _ => Err("expected disabled, permissive or enforcing".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Permissive => "permissive",
            Self::Enforcing => "enforcing",
        }
    }
}

/// `tls.server.need.client.auth`: whether a TLS client must show a certificate the
/// server's CA (`tls.server.trustCertPath`) signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    #[default]
    #[serde(alias = "NONE")]
    None,
    /// A certificate is checked when shown; a client without one is let in.
    #[serde(alias = "OPTIONAL")]
    Optional,
    /// A client without a valid certificate fails the handshake.
    #[serde(alias = "REQUIRE")]
    Require,
}

impl ClientAuth {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "optional" => Ok(Self::Optional),
            "require" => Ok(Self::Require),
            _ => Err("expected none, optional or require".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Optional => "optional",
            Self::Require => "require",
        }
    }
}

/// The server side of a port (`tls.server.*`).
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsServerSettings {
    pub mode: ServerMode,
    /// PEM: the certificate chain, leaf first.
    #[serde(alias = "certPath")]
    pub cert_path: Option<PathBuf>,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1), unencrypted.
    #[serde(alias = "keyPath")]
    pub key_path: Option<PathBuf>,
    /// Apache's password of an encrypted key: refused (rustls reads no encrypted keys).
    #[serde(alias = "keyPassword")]
    pub key_password: Option<String>,
    #[serde(alias = "needClientAuth")]
    pub need_client_auth: ClientAuth,
    /// PEM: the CA(s) client certificates are checked against.
    #[serde(alias = "trustCertPath")]
    pub trust_cert_path: Option<PathBuf>,
}

impl fmt::Debug for TlsServerSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServerSettings")
            .field("mode", &self.mode)
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("key_password", &self.key_password.as_ref().map(|_| "<set>"))
            .field("need_client_auth", &self.need_client_auth)
            .field("trust_cert_path", &self.trust_cert_path)
            .finish()
    }
}

/// A password key that holds anything but blanks is refused: RingMQ would not use it.
fn refuse_key_password(key: &'static str, password: &Option<String>) -> Result<(), TlsError> {
    if password.as_deref().is_some_and(|p| !p.trim().is_empty()) {
        return Err(TlsError::Config {
            key,
            reason: "encrypted private keys are not supported (rustls reads unencrypted PKCS#8, PKCS#1 or SEC1 keys): decrypt the key (e.g. `openssl pkey -in key.pem -out key-plain.pem`), protect the file with its permissions, and remove this key".into(),
        });
    }
    Ok(())
}

impl TlsServerSettings {
    pub fn enabled(&self) -> bool {
        self.mode != ServerMode::Disabled
    }

    /// What must hold before the files are read (see the module's invariant).
    pub fn check(&self) -> Result<(), TlsError> {
        refuse_key_password("tls.server.keyPassword", &self.key_password)?;
        if !self.enabled() {
            return Ok(());
        }
        if self.cert_path.is_none() {
            return Err(TlsError::Config { key: "tls.server.certPath", reason: format!("tls.server.mode={} needs the server certificate (PEM)", self.mode.as_str()) });
        }
        if self.key_path.is_none() {
            return Err(TlsError::Config { key: "tls.server.keyPath", reason: format!("tls.server.mode={} needs the server's private key (PEM)", self.mode.as_str()) });
        }
        if self.need_client_auth != ClientAuth::None && self.trust_cert_path.is_none() {
            return Err(TlsError::Config {
                key: "tls.server.trustCertPath",
                reason: format!("tls.server.need.client.auth={} needs the CA that signs client certificates (PEM)", self.need_client_auth.as_str()),
            });
        }
        Ok(())
    }

    /// The files a reload watches.
    pub fn files(&self) -> Vec<PathBuf> {
        if !self.enabled() {
            return Vec::new();
        }
        let trust = if self.need_client_auth == ClientAuth::None { None } else { self.trust_cert_path.clone() };
        [self.cert_path.clone(), self.key_path.clone(), trust].into_iter().flatten().collect()
    }
}

/// The connecting side (`tls.enable`/`useTLS`, `tls.client.*`).
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsClientSettings {
    /// Connect with TLS (Apache's `useTLS`, `tls.enable`).
    pub enable: bool,
    /// PEM: this side's certificate, shown when the server asks (mutual TLS).
    #[serde(alias = "certPath")]
    pub cert_path: Option<PathBuf>,
    #[serde(alias = "keyPath")]
    pub key_path: Option<PathBuf>,
    /// Refused, as `tls.server.keyPassword`.
    #[serde(alias = "keyPassword")]
    pub key_password: Option<String>,
    /// PEM: the CA(s) server certificates are checked against.
    #[serde(alias = "trustCertPath")]
    pub trust_cert_path: Option<PathBuf>,
    /// Check the server's certificate (Apache's `tls.client.authServer`); unset: checked
    /// exactly when a trust path is set (Apache's default is false).
    #[serde(alias = "authServer")]
    pub auth_server: Option<bool>,
    /// The name the server's certificate must carry (RingMQ's `tls.client.serverName`);
    /// unset: the host of the address connected to (an IP address is checked as one).
    #[serde(alias = "serverName")]
    pub server_name: Option<String>,
}

impl fmt::Debug for TlsClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClientSettings")
            .field("enable", &self.enable)
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("key_password", &self.key_password.as_ref().map(|_| "<set>"))
            .field("trust_cert_path", &self.trust_cert_path)
            .field("auth_server", &self.auth_server)
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl TlsClientSettings {
    /// Whether the server's certificate is checked.
    pub fn verifies_server(&self) -> bool {
        self.auth_server.unwrap_or(self.trust_cert_path.is_some())
    }

    pub fn check(&self) -> Result<(), TlsError> {
        refuse_key_password("tls.client.keyPassword", &self.key_password)?;
        if !self.enable {
            return Ok(());
        }
        match (&self.cert_path, &self.key_path) {
            (Some(_), None) => return Err(TlsError::Config { key: "tls.client.keyPath", reason: "tls.client.certPath is set: give its private key too".into() }),
            (None, Some(_)) => return Err(TlsError::Config { key: "tls.client.certPath", reason: "tls.client.keyPath is set: give its certificate too".into() }),
            _ => {}
        }
        if self.verifies_server() && self.trust_cert_path.is_none() {
            return Err(TlsError::Config {
                key: "tls.client.trustCertPath",
                reason: "tls.client.authServer=true needs the CA that signs server certificates (PEM); RingMQ does not read the system's trust store".into(),
            });
        }
        if let Some(name) = &self.server_name {
            rustls::pki_types::ServerName::try_from(name.as_str())
                .map_err(|e| TlsError::Config { key: "tls.client.serverName", reason: format!("`{name}` is not a DNS name or IP address: {e}") })?;
        }
        Ok(())
    }

    /// The files a reload watches.
    pub fn files(&self) -> Vec<PathBuf> {
        if !self.enable {
            return Vec::new();
        }
        let trust = if self.verifies_server() { self.trust_cert_path.clone() } else { None };
        [self.cert_path.clone(), self.key_path.clone(), trust].into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(mode: ServerMode, f: impl FnOnce(&mut TlsServerSettings)) -> TlsServerSettings {
        let mut s = TlsServerSettings { mode, cert_path: Some("c.pem".into()), key_path: Some("k.pem".into()), ..TlsServerSettings::default() };
        f(&mut s);
        s
    }

    /// `check(settings' check result, expected: Ok or a piece of the error)`.
    fn check(got: Result<(), TlsError>, expected: Result<(), &str>) {
        match (got.map_err(|e| e.to_string()), expected) {
            (Ok(()), Ok(())) => {}
            (Err(got), Err(needle)) => assert!(got.contains(needle), "{got} lacks {needle}"),
            (got, expected) => panic!("got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn server_settings_are_checked() {
        check(TlsServerSettings::default().check(), Ok(()));
        check(server(ServerMode::Enforcing, |_| {}).check(), Ok(()));
        check(server(ServerMode::Permissive, |s| s.cert_path = None).check(), Err("tls.server.certPath: tls.server.mode=permissive needs"));
        check(server(ServerMode::Enforcing, |s| s.key_path = None).check(), Err("tls.server.keyPath"));
        check(server(ServerMode::Enforcing, |s| s.need_client_auth = ClientAuth::Require).check(), Err("tls.server.trustCertPath: tls.server.need.client.auth=require"));
        check(server(ServerMode::Enforcing, |s| (s.need_client_auth, s.trust_cert_path) = (ClientAuth::Optional, Some("ca.pem".into()))).check(), Ok(()));
        // A key password is refused even with TLS off: it would be a promise not kept.
        check(server(ServerMode::Disabled, |s| s.key_password = Some("secret".into())).check(), Err("tls.server.keyPassword: encrypted private keys are not supported"));
        check(server(ServerMode::Enforcing, |s| s.key_password = Some("  ".into())).check(), Ok(()));
        let shown = format!("{:?}", server(ServerMode::Enforcing, |s| s.key_password = Some("hunter2".into())));
        assert!(!shown.contains("hunter2") && shown.contains("<set>"), "{shown}");
    }

    #[test]
    fn client_settings_are_checked() {
        let client = |f: &dyn Fn(&mut TlsClientSettings)| {
            let mut c = TlsClientSettings { enable: true, ..TlsClientSettings::default() };
            f(&mut c);
            c
        };
        check(client(&|_| {}).check(), Ok(()));
        assert!(!client(&|_| {}).verifies_server(), "Apache's default: no trust path, no check");
        assert!(client(&|c| c.trust_cert_path = Some("ca.pem".into())).verifies_server());
        assert!(!client(&|c| (c.trust_cert_path, c.auth_server) = (Some("ca.pem".into()), Some(false))).verifies_server());
        check(client(&|c| c.auth_server = Some(true)).check(), Err("tls.client.trustCertPath: tls.client.authServer=true needs"));
        check(client(&|c| c.cert_path = Some("c.pem".into())).check(), Err("tls.client.keyPath"));
        check(client(&|c| c.key_path = Some("k.pem".into())).check(), Err("tls.client.certPath"));
        check(client(&|c| c.key_password = Some("pw".into())).check(), Err("tls.client.keyPassword"));
        check(client(&|c| c.server_name = Some("broker.example".into())).check(), Ok(()));
        check(client(&|c| c.server_name = Some("not a name".into())).check(), Err("tls.client.serverName"));
    }

    #[test]
    fn values_parse_as_apache_writes_them() {
        assert_eq!(ServerMode::parse("ENFORCING"), Ok(ServerMode::Enforcing));
        assert_eq!(ServerMode::parse(" permissive "), Ok(ServerMode::Permissive));
        assert!(ServerMode::parse("on").is_err());
        assert_eq!(ClientAuth::parse("require"), Ok(ClientAuth::Require));
        assert!(ClientAuth::parse("required").is_err());
    }
}
