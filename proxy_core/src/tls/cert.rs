//! A certificate chain and its private key read from PEM files, and every check a pair must pass
//! before it may be served: a chain at all, a key the provider can sign with, the key belonging
//! to the leaf certificate, and the leaf valid now. A pair that fails any of them is refused with
//! a reason that names what is wrong (never the key's bytes).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Why a certificate and key pair was refused. `reason()` is the bounded metric label.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {path}: {source}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not valid PEM: {detail}")]
    BadPem { path: PathBuf, detail: String },
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: PathBuf },
    #[error("the private key in {path} cannot be used: {detail}")]
    BadKey { path: PathBuf, detail: String },
    #[error("the private key in {key} does not belong to the first certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("the first certificate in {path} cannot be parsed: {detail}")]
    BadCertificate { path: PathBuf, detail: String },
    #[error("the certificate in {path} expired at {not_after} (unix seconds)")]
    Expired { path: PathBuf, not_after: i64 },
    #[error("the certificate in {path} is not valid before {not_before} (unix seconds)")]
    NotYetValid { path: PathBuf, not_before: i64 },
}

impl CertError {
    /// Every value `reason()` can take (the metric's label set).
    pub const REASONS: [&'static str; 8] =
        ["unreadable", "no_certificate", "bad_pem", "no_key", "bad_key", "key_mismatch", "bad_certificate", "expired"];

    pub fn reason(&self) -> &'static str {
        match self {
            CertError::Unreadable { .. } => "unreadable",
            CertError::NoCertificate { .. } => "no_certificate",
            CertError::BadPem { .. } => "bad_pem",
            CertError::NoKey { .. } => "no_key",
            CertError::BadKey { .. } => "bad_key",
            CertError::KeyMismatch { .. } => "key_mismatch",
            CertError::BadCertificate { .. } => "bad_certificate",
            // Both are "not valid now"; one label keeps the set small.
            CertError::Expired { .. } | CertError::NotYetValid { .. } => "expired",
        }
    }
}

/// A pair that passed every check, with what the metrics and logs say about it.
pub struct LoadedCert {
    pub key: Arc<CertifiedKey>,
    /// The leaf's `notAfter`, unix seconds.
    pub not_after: i64,
    pub subject: String,
    /// Both files' bytes as read: a reload that reads the same bytes changes nothing.
    source: (Vec<u8>, Vec<u8>),
}

impl LoadedCert {
    pub fn same_files(&self, other: &LoadedCert) -> bool {
        self.source == other.source
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Unreadable { path: path.to_path_buf(), source })
}

/// Read and check the pair; `now` is unix seconds.
pub fn load(cert_path: &Path, key_path: &Path, provider: &CryptoProvider, now: i64) -> Result<LoadedCert, CertError> {
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::BadPem { path: cert_path.to_path_buf(), detail: e.to_string() })?;
    let Some(leaf) = chain.first() else {
        return Err(CertError::NoCertificate { path: cert_path.to_path_buf() });
    };
    let (not_before, not_after, subject) =
        validity(leaf).map_err(|detail| CertError::BadCertificate { path: cert_path.to_path_buf(), detail })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => CertError::NoKey { path: key_path.to_path_buf() },
        other => CertError::BadPem { path: key_path.to_path_buf(), detail: other.to_string() },
    })?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| CertError::BadKey { path: key_path.to_path_buf(), detail: e.to_string() })?;
    let certified = CertifiedKey::new(chain, signing);
    // An unknown answer (a key type that cannot tell its public half) is a refusal too: a pair
    // we cannot check is not served.
    if certified.keys_match().is_err() {
        return Err(CertError::KeyMismatch { cert: cert_path.to_path_buf(), key: key_path.to_path_buf() });
    }
    if now >= not_after {
        return Err(CertError::Expired { path: cert_path.to_path_buf(), not_after });
    }
    if now < not_before {
        return Err(CertError::NotYetValid { path: cert_path.to_path_buf(), not_before });
    }
    Ok(LoadedCert { key: Arc::new(certified), not_after, subject, source: (cert_pem, key_pem) })
}

/// `notBefore`, `notAfter` (unix seconds) and the subject of a DER certificate.
fn validity(leaf: &CertificateDer<'_>) -> Result<(i64, i64, String), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref()).map_err(|e| e.to_string())?;
    let validity = parsed.validity();
    Ok((validity.not_before.timestamp(), validity.not_after.timestamp(), parsed.subject().to_string()))
}
