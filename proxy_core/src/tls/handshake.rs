//! One server handshake, under the connection's first-request deadline, counted: completed
//! handshakes, their duration, and failures by a bounded set of reasons.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::metrics::{Histogram, STAGE_BUCKETS};

/// Why a handshake did not complete (the metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The deadline from accept to the first request passed first (silent or slow clients).
    Timeout,
    /// The client closed or reset the connection mid-handshake.
    Closed,
    /// The client ended the handshake with an alert: most often it does not trust the
    /// certificate (unknown CA, bad or expired certificate).
    ClientAlert,
    /// No protocol version, cipher suite or key exchange group in common (old clients).
    Incompatible,
    /// The client offered ALPN protocols, none of them h2 or http/1.1.
    NoApplicationProtocol,
    /// The first bytes are not a TLS record: plain HTTP sent to the TLS port.
    NotTls,
    /// Malformed or out-of-order handshake messages.
    ProtocolError,
    Other,
}

impl Failure {
    pub const ALL: [Failure; 8] = [
        Failure::Timeout,
        Failure::Closed,
        Failure::ClientAlert,
        Failure::Incompatible,
        Failure::NoApplicationProtocol,
        Failure::NotTls,
        Failure::ProtocolError,
        Failure::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Closed => "closed",
            Failure::ClientAlert => "client_alert",
            Failure::Incompatible => "incompatible",
            Failure::NoApplicationProtocol => "no_application_protocol",
            Failure::NotTls => "not_tls",
            Failure::ProtocolError => "protocol_error",
            Failure::Other => "other",
        }
    }

    fn index(self) -> usize {
        Failure::ALL.iter().position(|f| *f == self).unwrap_or(Failure::ALL.len() - 1)
    }

    /// tokio-rustls reports rustls' own errors inside an `io::Error`.
    pub fn of(error: &std::io::Error) -> Failure {
        use std::io::ErrorKind as K;
        if let Some(tls) = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            return match tls {
                rustls::Error::AlertReceived(_) => Failure::ClientAlert,
                rustls::Error::PeerIncompatible(_) => Failure::Incompatible,
                rustls::Error::NoApplicationProtocol => Failure::NoApplicationProtocol,
                rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => Failure::NotTls,
                rustls::Error::InvalidMessage(_)
                | rustls::Error::InappropriateMessage { .. }
                | rustls::Error::InappropriateHandshakeMessage { .. }
                | rustls::Error::PeerMisbehaved(_)
                | rustls::Error::DecryptError => Failure::ProtocolError,
                _ => Failure::Other,
            };
        }
        match error.kind() {
            K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => Failure::Closed,
            K::TimedOut => Failure::Timeout,
            _ => Failure::Other,
        }
    }
}

pub struct HandshakeCounters {
    /// Every completed handshake.
    pub completed: AtomicU64,
    /// Of those completed, resumed from a ticket or session (no certificate signature).
    pub resumed: AtomicU64,
    pub failed: [AtomicU64; Failure::ALL.len()],
    /// Accept to the end of the handshake, completed ones only.
    pub duration: Histogram,
}

impl Default for HandshakeCounters {
    fn default() -> Self {
        Self {
            completed: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            failed: std::array::from_fn(|_| AtomicU64::new(0)),
            duration: Histogram::new(STAGE_BUCKETS),
        }
    }
}

impl HandshakeCounters {
    pub fn fail(&self, failure: Failure) {
        self.failed[failure.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// Run the handshake until `deadline` (the connection's first-request deadline: the handshake
/// spends from the same allowance). `accepted` is when the socket was accepted.
pub async fn accept<IO>(
    acceptor: &TlsAcceptor,
    counters: &HandshakeCounters,
    io: IO,
    accepted: Instant,
    deadline: tokio::time::Instant,
) -> Option<TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    // Pinned here so that a failed handshake's socket closes only after it was counted.
    let mut handshake = std::pin::pin!(tokio::time::timeout_at(deadline, acceptor.accept(io)));
    match handshake.as_mut().await {
        Ok(Ok(stream)) => {
            counters.completed.fetch_add(1, Ordering::Relaxed);
            if stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                counters.resumed.fetch_add(1, Ordering::Relaxed);
            }
            counters.duration.observe_duration(accepted.elapsed());
            Some(stream)
        }
        Ok(Err(e)) => {
            let failure = Failure::of(&e);
            tracing::debug!(reason = failure.as_str(), error = %e, "TLS handshake failed");
            counters.fail(failure);
            None
        }
        Err(_) => {
            counters.fail(Failure::Timeout);
            None
        }
    }
}
