//! The data listener's TLS families, read at scrape time.

use std::sync::atomic::Ordering;

use super::{CertError, Failure, Tls};
use crate::metrics::FamilySnapshot;

pub fn families(tls: &Tls, now: i64) -> Vec<FamilySnapshot> {
    let h = &tls.handshakes;
    let mut completed = FamilySnapshot::new(
        "sluicegate_tls_handshakes_total",
        "counter",
        "TLS handshakes completed on the data port, by kind (full, or resumed from a ticket).",
        &["kind"],
    );
    let (all, resumed) = (h.completed.load(Ordering::Relaxed), h.resumed.load(Ordering::Relaxed));
    completed.value(vec!["full".into()], all.saturating_sub(resumed) as f64);
    completed.value(vec!["resumed".into()], resumed as f64);
    let mut failed = FamilySnapshot::new(
        "sluicegate_tls_handshake_failures_total",
        "counter",
        "TLS handshakes on the data port that did not complete, by reason.",
        &["reason"],
    );
    for (failure, count) in Failure::ALL.iter().zip(&h.failed) {
        failed.value(vec![failure.as_str().to_string()], count.load(Ordering::Relaxed) as f64);
    }
    let mut duration = FamilySnapshot::new(
        "sluicegate_tls_handshake_duration_seconds",
        "histogram",
        "Time from accept to a completed TLS handshake on the data port.",
        &[],
    );
    duration.histogram(Vec::new(), &h.duration);
    let mut expiry = FamilySnapshot::new(
        "sluicegate_tls_certificate_expiry_seconds",
        "gauge",
        "Seconds until the notAfter of the data port's certificate in force (negative: expired).",
        &[],
    );
    expiry.value(Vec::new(), (tls.store.not_after() - now) as f64);
    let counters = &tls.store.counters;
    let mut reloads = FamilySnapshot::new(
        "sluicegate_tls_certificate_reloads_total",
        "counter",
        "Certificate reloads on the data port that put a new pair in force.",
        &[],
    );
    reloads.value(Vec::new(), counters.swapped.load(Ordering::Relaxed) as f64);
    let mut refused = FamilySnapshot::new(
        "sluicegate_tls_certificate_reload_failures_total",
        "counter",
        "Certificate reloads on the data port refused (the pair in force stayed), by reason.",
        &["reason"],
    );
    for (reason, count) in CertError::REASONS.iter().zip(&counters.refused) {
        refused.value(vec![(*reason).to_string()], count.load(Ordering::Relaxed) as f64);
    }
    vec![completed, failed, duration, expiry, reloads, refused]
}
