//! PEM files read and rustls configurations built from checked settings: the server's
//! (`build_server_config`: certificate chain and key, client authentication per
//! `tls.server.need.client.auth`) and the connecting side's (`build_client_config`: the
//! CA checked against, or no check when `tls.client.authServer` is off, and an optional
//! client certificate).
//!
//! Invariant: every file is read whole but at most `PEM_FILE_BYTES_MAX`; an error names
//! the setting and the path and says what was missing (no certificate block, no key,
//! an encrypted key, a key that does not belong to the certificate).
//! Invariant: with server verification off the handshake's signatures are still
//! checked (only the certificate's chain and name are not), so the connection is at
//! least bound to the key the server showed.

use super::settings::{ClientAuth, TlsClientSettings, TlsServerSettings};
use super::TlsError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Largest PEM file read (a chain of a few certificates is a few KiB).
pub const PEM_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// The provider every configuration names (see the module's parent).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let file_err = |reason: String| TlsError::File { key, path: path.to_path_buf(), reason };
    let file = std::fs::File::open(path).map_err(|e| file_err(e.to_string()))?;
    let mut bytes = Vec::new();
    // One byte past the bound tells a file that is too large.
    file.take(PEM_FILE_BYTES_MAX + 1).read_to_end(&mut bytes).map_err(|e| file_err(e.to_string()))?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(file_err(format!("larger than {PEM_FILE_BYTES_MAX} bytes: not a PEM certificate or key file")));
    }
    Ok(bytes)
}

/// Every CERTIFICATE block of a PEM file, in order.
pub fn load_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_pem(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File { key, path: path.to_path_buf(), reason: format!("not a PEM certificate file: {e}") })?;
    if certs.is_empty() {
        return Err(TlsError::File { key, path: path.to_path_buf(), reason: "no CERTIFICATE block".into() });
    }
    Ok(certs)
}

fn load_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_pem(key, path)?;
    if bytes.windows(b"ENCRYPTED PRIVATE KEY".len()).any(|w| w == b"ENCRYPTED PRIVATE KEY") || bytes.windows(b"Proc-Type: 4,ENCRYPTED".len()).any(|w| w == b"Proc-Type: 4,ENCRYPTED") {
        return Err(TlsError::File { key, path: path.to_path_buf(), reason: "an encrypted private key: not supported (rustls); decrypt it (e.g. `openssl pkey -in key.pem -out key-plain.pem`)".into() });
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::File { key, path: path.to_path_buf(), reason: format!("no private key (PKCS#8, PKCS#1 or SEC1 PEM block): {e}") })
}

fn load_roots(key: &'static str, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(key, path)? {
        roots.add(cert).map_err(|e| TlsError::File { key, path: path.to_path_buf(), reason: format!("not a usable CA certificate: {e}") })?;
    }
    Ok(Arc::new(roots))
}

/// `path` of a setting `check` made sure is set.
fn required<'a>(key: &'static str, path: &'a Option<std::path::PathBuf>) -> Result<&'a Path, TlsError> {
    path.as_deref().ok_or(TlsError::Config { key, reason: "not set".into() })
}

/// The server configuration `settings` (checked, TLS on) describe, read from its files.
pub fn build_server_config(settings: &TlsServerSettings) -> Result<Arc<ServerConfig>, TlsError> {
    settings.check()?;
    let certs = load_certs("tls.server.certPath", required("tls.server.certPath", &settings.cert_path)?)?;
    let key = load_key("tls.server.keyPath", required("tls.server.keyPath", &settings.key_path)?)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls { what: "TLS protocol versions", source })?;
    let builder = match settings.need_client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = load_roots("tls.server.trustCertPath", required("tls.server.trustCertPath", &settings.trust_cert_path)?)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = if auth == ClientAuth::Optional { verifier.allow_unauthenticated() } else { verifier };
            let verifier = verifier.build().map_err(|e| TlsError::Config { key: "tls.server.trustCertPath", reason: format!("cannot check client certificates against it: {e}") })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|source| TlsError::Rustls { what: "tls.server.certPath / tls.server.keyPath (the key must belong to the certificate)", source })?;
    Ok(Arc::new(config))
}

/// The client configuration `settings` (checked, TLS on) describe, read from its files.
pub fn build_client_config(settings: &TlsClientSettings) -> Result<Arc<ClientConfig>, TlsError> {
    settings.check()?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls { what: "TLS protocol versions", source })?;
    let builder = if settings.verifies_server() {
        builder.with_root_certificates(load_roots("tls.client.trustCertPath", required("tls.client.trustCertPath", &settings.trust_cert_path)?)?)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(SignaturesOnly(provider())))
    };
    let config = match (&settings.cert_path, &settings.key_path) {
        (Some(cert), Some(key)) => {
            let certs = load_certs("tls.client.certPath", cert)?;
            let key = load_key("tls.client.keyPath", key)?;
            builder.with_client_auth_cert(certs, key).map_err(|source| TlsError::Rustls { what: "tls.client.certPath / tls.client.keyPath (the key must belong to the certificate)", source })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// `tls.client.authServer=false`: any certificate chain and name, but the handshake's
/// signatures must be made by the certificate's key.
#[derive(Debug)]
struct SignaturesOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for SignaturesOnly {
    fn verify_server_cert(&self, _end_entity: &CertificateDer<'_>, _intermediates: &[CertificateDer<'_>], _server_name: &ServerName<'_>, _ocsp: &[u8], _now: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tls::gen::TestPki;
    use crate::net::tls::ServerMode;

    fn check(got: Result<(), TlsError>, expected: Result<(), &str>) {
        match (got.map_err(|e| e.to_string()), expected) {
            (Ok(()), Ok(())) => {}
            (Err(got), Err(needle)) => assert!(got.contains(needle), "{got} lacks {needle}"),
            (got, expected) => panic!("got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn configurations_build_from_files_and_bad_files_are_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = TestPki::generate(dir.path()).expect("certificates");
        let mut server = pki.server_settings(ServerMode::Enforcing);
        check(build_server_config(&server).map(|_| ()), Ok(()));
        server.need_client_auth = ClientAuth::Require;
        check(build_server_config(&server).map(|_| ()), Ok(()));
        check(build_client_config(&pki.client_settings(true)).map(|_| ()), Ok(()));
        check(build_client_config(&pki.client_settings(false)).map(|_| ()), Ok(()));

        let missing = dir.path().join("missing.pem");
        let mut s = pki.server_settings(ServerMode::Enforcing);
        s.cert_path = Some(missing.clone());
        check(build_server_config(&s).map(|_| ()), Err("tls.server.certPath"));
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem at all\n").expect("write");
        s.cert_path = Some(garbage.clone());
        check(build_server_config(&s).map(|_| ()), Err("no CERTIFICATE block"));
        let mut s = pki.server_settings(ServerMode::Enforcing);
        s.key_path = Some(garbage.clone());
        check(build_server_config(&s).map(|_| ()), Err("tls.server.keyPath"));
        let encrypted = dir.path().join("enc.pem");
        std::fs::write(&encrypted, "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n").expect("write");
        s.key_path = Some(encrypted);
        check(build_server_config(&s).map(|_| ()), Err("an encrypted private key: not supported"));
        // The client's key with the server's certificate: they do not belong together.
        let mut s = pki.server_settings(ServerMode::Enforcing);
        s.key_path = Some(pki.client_key.clone());
        check(build_server_config(&s).map(|_| ()), Err("the key must belong to the certificate"));
        let big = dir.path().join("big.pem");
        std::fs::write(&big, vec![b'a'; PEM_FILE_BYTES_MAX as usize + 1]).expect("write");
        let mut s = pki.server_settings(ServerMode::Enforcing);
        s.cert_path = Some(big);
        check(build_server_config(&s).map(|_| ()), Err("larger than"));
    }
}
