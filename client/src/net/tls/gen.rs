//! Certificates made on the spot (feature `cert-gen`, and this crate's tests): the one
//! place RingMQ's tests and loadgen get PEM files from. `TestPki` is a CA with a server
//! certificate (for `localhost` and 127.0.0.1) and a client certificate it signed, plus
//! a second, unrelated CA (for "a certificate nobody trusts"); `self_signed` is the one
//! certificate loadgen's `--tls` runs serve.
//!
//! Invariant: every file is written whole (a temporary name renamed into place), so a
//! server watching a path never reads half a certificate; keys are ECDSA P-256, written
//! unencrypted (rustls reads no others) with mode 0600.

use super::settings::{ServerMode, TlsClientSettings, TlsServerSettings};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The names every generated server certificate carries.
pub const SERVER_NAMES: &[&str] = &["localhost", "127.0.0.1"];

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Writes `text` to `path` through a temporary file renamed into place.
pub fn write_atomically(path: &Path, text: &str, private: bool) -> Result<(), GenError> {
    let err = |source| GenError::Write { path: path.to_path_buf(), source };
    let tmp = path.with_extension("tmp-write");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp).map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// A CA: its parameters and key sign leaves.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pub pem: String,
}

impl Ca {
    pub fn new(common_name: &str) -> Result<Self, GenError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Self { params, key, pem })
    }

    /// A leaf for `names`, for a server or a client: (certificate PEM, key PEM).
    pub fn leaf(&self, common_name: &str, names: &[&str], server: bool) -> Result<(String, String), GenError> {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if server { ExtendedKeyUsagePurpose::ServerAuth } else { ExtendedKeyUsagePurpose::ClientAuth }];
        let key = KeyPair::generate()?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A self-signed server certificate for `names`: (certificate PEM, key PEM).
pub fn self_signed(names: &[&str]) -> Result<(String, String), GenError> {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    params.distinguished_name.push(DnType::CommonName, "RingMQ self-signed");
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A CA, a server and a client certificate it signed, and a CA nobody trusts, as PEM
/// files in one directory.
pub struct TestPki {
    pub ca: Ca,
    pub ca_cert: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client certificate and key from another CA: refused where clients must be known.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

impl TestPki {
    pub fn generate(dir: &Path) -> Result<Self, GenError> {
        let ca = Ca::new("RingMQ test CA")?;
        let files = |name: &str| (dir.join(format!("{name}.pem")), dir.join(format!("{name}-key.pem")));
        let ca_cert = dir.join("ca.pem");
        write_atomically(&ca_cert, &ca.pem, false)?;
        let (server_cert, server_key) = files("server");
        let (cert, key) = ca.leaf("ringmq-server", SERVER_NAMES, true)?;
        write_atomically(&server_cert, &cert, false)?;
        write_atomically(&server_key, &key, true)?;
        let (client_cert, client_key) = files("client");
        let (cert, key) = ca.leaf("ringmq-client", &["ringmq-client"], false)?;
        write_atomically(&client_cert, &cert, false)?;
        write_atomically(&client_key, &key, true)?;
        let stranger_ca = Ca::new("Unknown CA")?;
        let (stranger_cert, stranger_key) = files("stranger");
        let (cert, key) = stranger_ca.leaf("stranger", &["stranger"], false)?;
        write_atomically(&stranger_cert, &cert, false)?;
        write_atomically(&stranger_key, &key, true)?;
        Ok(Self { ca, ca_cert, server_cert, server_key, client_cert, client_key, stranger_cert, stranger_key })
    }

    /// A new server certificate from the same CA, written over the server's files.
    pub fn renew_server(&self, common_name: &str) -> Result<(), GenError> {
        let (cert, key) = self.ca.leaf(common_name, SERVER_NAMES, true)?;
        // The key first: a reload between the two writes sees a pair that does not match,
        // which keeps the certificate in force until the certificate follows.
        write_atomically(&self.server_key, &key, true)?;
        write_atomically(&self.server_cert, &cert, false)
    }

    /// Server settings with this PKI's certificate (no client authentication).
    pub fn server_settings(&self, mode: ServerMode) -> TlsServerSettings {
        TlsServerSettings {
            mode,
            cert_path: Some(self.server_cert.clone()),
            key_path: Some(self.server_key.clone()),
            trust_cert_path: Some(self.ca_cert.clone()),
            ..TlsServerSettings::default()
        }
    }

    /// Client settings trusting this PKI's CA, with its client certificate if asked.
    pub fn client_settings(&self, with_client_cert: bool) -> TlsClientSettings {
        TlsClientSettings {
            enable: true,
            trust_cert_path: Some(self.ca_cert.clone()),
            cert_path: with_client_cert.then(|| self.client_cert.clone()),
            key_path: with_client_cert.then(|| self.client_key.clone()),
            ..TlsClientSettings::default()
        }
    }
}
