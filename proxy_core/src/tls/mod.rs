//! TLS on the data port: rustls (ring), TLS 1.2 and 1.3 only, ALPN `h2` and `http/1.1`, the
//! certificate chain and key read from PEM files and reloaded (on a file change or when asked)
//! without touching open connections. A pair that fails its checks is refused and the one in
//! force stays.

mod cert;
mod handshake;
mod metrics;
mod store;
mod watch;

pub use cert::CertError;
pub use handshake::{accept, Failure, HandshakeCounters};
pub use store::{CertStore, Reloaded};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// PEM: the leaf certificate first, then its intermediates.
    pub cert_file: PathBuf,
    /// PEM: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) private key.
    pub key_file: PathBuf,
    /// How often the files are checked for a change; `None`: only when asked (SIGHUP).
    pub watch_interval: Option<Duration>,
}

/// The data listener's TLS: one `ServerConfig` whose certificate comes from the store.
pub struct Tls {
    pub acceptor: TlsAcceptor,
    pub store: Arc<CertStore>,
    pub handshakes: HandshakeCounters,
    pub watch_interval: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("TLS set-up: {0}")]
    Setup(#[from] rustls::Error),
}

impl TlsError {
    pub fn reason(&self) -> &'static str {
        match self {
            TlsError::Cert(e) => e.reason(),
            TlsError::Setup(_) => "setup",
        }
    }
}

impl Tls {
    pub fn new(settings: &TlsSettings) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let store = Arc::new(CertStore::open(settings.cert_file.clone(), settings.key_file.clone(), provider.clone())?);
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_no_client_auth()
            .with_cert_resolver(store.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // Stateless resumption tickets (keys rotated every 6 hours by rustls): a returning client
        // skips the certificate signature, and the server keeps no per-session memory for it.
        config.ticketer = rustls::crypto::ring::Ticketer::new()?;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            store,
            handshakes: HandshakeCounters::default(),
            watch_interval: settings.watch_interval,
        })
    }

    /// Read the files again now (SIGHUP); see `CertStore::reload`.
    pub fn reload(&self) -> Result<Reloaded, CertError> {
        self.store.reload()
    }

    /// The file watch, if configured, as a task of the runtime it is spawned on.
    pub fn spawn_watch(&self) {
        if let Some(interval) = self.watch_interval {
            tokio::spawn(watch::run(self.store.clone(), interval));
        }
    }

    /// The metric families of the data listener's TLS.
    pub fn metric_families(&self, now: i64) -> Vec<crate::metrics::FamilySnapshot> {
        metrics::families(self, now)
    }
}

#[cfg(test)]
mod tests;
