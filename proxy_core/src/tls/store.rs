//! The certificate in force, swapped whole when a reload passes its checks. rustls asks the
//! store for the certificate at each handshake (`ResolvesServerCert`), so a swap reaches every
//! new connection at once while open connections keep the session they negotiated.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::cert::{self, CertError, LoadedCert};

/// What a reload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloaded {
    /// A new pair is in force.
    Swapped,
    /// The files hold what is already served.
    Unchanged,
}

/// Refusals of a new pair, by `CertError::reason`.
#[derive(Default)]
pub struct ReloadCounters {
    pub swapped: AtomicU64,
    pub refused: [AtomicU64; CertError::REASONS.len()],
}

impl ReloadCounters {
    fn refuse(&self, reason: &str) {
        if let Some(i) = CertError::REASONS.iter().position(|r| *r == reason) {
            self.refused[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub struct CertStore {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<LoadedCert>,
    /// One reload at a time (the file watch and SIGHUP may ask together); never taken by a
    /// handshake.
    reloading: Mutex<()>,
    pub counters: ReloadCounters,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertStore").field("cert_file", &self.cert_file).finish_non_exhaustive()
    }
}

impl CertStore {
    /// The first load: a refused pair is an error (nothing to keep in force).
    pub fn open(cert_file: PathBuf, key_file: PathBuf, provider: Arc<CryptoProvider>) -> Result<Self, CertError> {
        let loaded = cert::load(&cert_file, &key_file, &provider, crate::clock::unix_now() as i64)?;
        tracing::info!(
            cert = %cert_file.display(), subject = %loaded.subject, not_after = loaded.not_after,
            "TLS certificate loaded"
        );
        Ok(Self {
            cert_file,
            key_file,
            provider,
            current: ArcSwap::from_pointee(loaded),
            reloading: Mutex::new(()),
            counters: ReloadCounters::default(),
        })
    }

    /// Read the files again; a pair that passes every check replaces the one in force, one that
    /// does not is refused (logged and counted) and the one in force stays.
    pub fn reload(&self) -> Result<Reloaded, CertError> {
        let _one = self.reloading.lock().unwrap_or_else(PoisonError::into_inner);
        let now = crate::clock::unix_now() as i64;
        match cert::load(&self.cert_file, &self.key_file, &self.provider, now) {
            Ok(loaded) if loaded.same_files(&self.current.load()) => Ok(Reloaded::Unchanged),
            Ok(loaded) => {
                tracing::info!(
                    cert = %self.cert_file.display(), subject = %loaded.subject, not_after = loaded.not_after,
                    "TLS certificate reloaded: new connections get it"
                );
                self.current.store(Arc::new(loaded));
                self.counters.swapped.fetch_add(1, Ordering::Relaxed);
                Ok(Reloaded::Swapped)
            }
            Err(e) => {
                let old = self.current.load();
                tracing::error!(
                    reason = e.reason(), error = %e, kept_not_after = old.not_after,
                    "TLS certificate reload refused; the certificate in force stays"
                );
                self.counters.refuse(e.reason());
                Err(e)
            }
        }
    }

    /// The leaf's `notAfter` of the pair in force (unix seconds).
    pub fn not_after(&self) -> i64 {
        self.current.load().not_after
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load().key.clone())
    }
}
