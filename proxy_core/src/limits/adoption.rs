//! Applying a snapshot's quota figures: each quota whose ledger figure describes a period its
//! state has not reached (a new period, a reset, a new definition, a state the core has just
//! made) takes that figure plus what the core charged in that period that the ledger does not
//! have yet: events recorded after the usage acknowledgement the figures were read at. So an
//! adoption never forgets spend the drainer has not stored yet, and a period that turns in the
//! core (with no figure for it yet) counts from zero what its own requests reserve.

use crate::config::{QuotaConfig, Snapshot};

use super::quota::{QuotaScope, QuotaState, Unledgered};

/// One recorded event's charge: key, tenant, arrival (unix seconds), tokens, cost.
pub type ChargeVisit<'a> = &'a mut dyn FnMut(&std::sync::Arc<str>, &std::sync::Arc<str>, f64, u64, u64);

/// Adopt `snapshot`'s ledger figures where due, at `now`. `charges_after(seq, visit)` visits the
/// charges of the events recorded after `seq` (`usage_acked`, or `acked` when the snapshot
/// does not say) and returns false when it no longer remembers all of them.
pub fn adopt_ledger(
    snapshot: &Snapshot,
    now: i64,
    acked: u64,
    charges_after: impl FnOnce(u64, ChargeVisit<'_>) -> bool,
) {
    let tenants = snapshot.tenants.values().map(|t| (QuotaScope::Tenant(t.id.clone()), &t.quota, &t.quota_state));
    let keys = snapshot.keys.values().map(|k| (QuotaScope::Key(k.id.clone()), &k.quota, &k.quota_state));
    let due: Vec<(QuotaScope, &QuotaConfig, &QuotaState)> = tenants
        .chain(keys)
        .filter_map(|(scope, quota, state)| quota.as_ref().map(|q| (scope, q, state.as_ref())))
        .filter(|(_, quota, state)| state.would_adopt(quota, now))
        .collect();
    if due.is_empty() {
        return;
    }
    let seen = snapshot.usage_acked.unwrap_or(acked);
    let mut unledgered = Unledgered::default();
    let complete = charges_after(seen, &mut |key, tenant, started_at, tokens, cost| {
        unledgered.add(key, tenant, started_at, tokens, cost);
    });
    if !complete {
        tracing::warn!(
            acked = seen,
            "quota figures adopted while more usage events wait for the ledger than the core remembers; the oldest are not added"
        );
    }
    for (scope, quota, state) in due {
        state.adopt(quota, now, |start| unledgered.since(&scope, start));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::config::{load, Registry};
    use crate::metrics::Metrics;
    use crate::upstream::AddressGuard;

    const DAY: i64 = 86_400;
    /// 2026-11-30T00:00:00Z: a day boundary.
    const D: i64 = 1_796_083_200 - DAY;

    /// One tenant and one key, each with a daily quota of `limit` tokens; the key's ledger
    /// figure is `used` for the period starting at `period_start`.
    fn snapshot(registry: &Registry, version: u64, period_start: i64, used: u64, acked: u64) -> Snapshot {
        let payload = json!({
            "auth": {"key_pepper": "0123456789abcdef0123"},
            "tenants": [{"id": "t", "quota": {"period": "daily", "tokens": 1000, "period_start": period_start}}],
            "keys": [{"id": "k", "tenant_id": "t", "hash": "00".repeat(32), "prefix": "sk-sg-abcd",
                      "quota": {"period": "daily", "tokens": 100, "period_start": period_start, "used_tokens": used}}],
            "usage_acked": acked,
        });
        load(version, payload.to_string().as_bytes(), registry).unwrap()
    }

    fn key(snapshot: &Snapshot) -> (&QuotaConfig, &QuotaState) {
        let k = snapshot.keys.values().next().unwrap();
        (k.quota.as_ref().unwrap(), k.quota_state.as_ref())
    }

    /// Charges recorded after `acked`: (seq, key, started_at, tokens).
    fn adopt(snapshot: &Snapshot, now: i64, charges: &[(u64, &str, i64, u64)]) {
        adopt_ledger(snapshot, now, 0, |after, visit| {
            for (seq, k, started_at, tokens) in charges {
                if *seq > after {
                    visit(&Arc::from(*k), &Arc::from("t"), *started_at as f64, *tokens, 0);
                }
            }
            true
        });
    }

    /// How many 20-token reservations fit at `now`.
    fn fits(snapshot: &Snapshot, now: i64) -> usize {
        let (config, state) = key(snapshot);
        let mut held = Vec::new();
        while let Ok(hold) = state.reserve(config, now, 20, 0) {
            held.push(hold);
        }
        let n = held.len();
        for hold in held {
            hold.settle(20, 0);
        }
        n
    }

    #[test]
    fn a_figure_for_the_new_period_adds_what_the_ledger_does_not_have_yet() {
        let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        // Day D: the key spent 90 (the ledger knew 0 of it when the figures were read).
        let day = snapshot(&registry, 1, D, 0, 0);
        adopt(&day, D + 100, &[]);
        let (config, state) = key(&day);
        state.reserve(config, D + 200, 90, 0).ok().unwrap().settle(90, 0);
        // The next day's figures are read after event 7 was stored: the ledger has 30 of the
        // new day, and events 8 and 9 (40 more tokens of the new day) are not stored yet;
        // event 6, of day D, is.
        let next = snapshot(&registry, 2, D + DAY, 30, 7);
        let charges =
            [(6, "k", D + 200, 90), (8, "k", D + DAY + 1, 25), (9, "k", D + DAY + 2, 15), (9, "other", D + DAY + 2, 5)];
        // The key's state was made anew (the key left the snapshot and came back, say): it
        // adopts 30 + 40 and holds exactly: 70 used of 100, one more 20-token request fits.
        let fresh = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        let next_fresh = snapshot(&fresh, 2, D + DAY, 30, 7);
        adopt(&next_fresh, D + DAY + 5, &charges);
        assert_eq!(key(&next_fresh).1.used().0, 70);
        assert_eq!(fits(&next_fresh, D + DAY + 6), 1);
        // The state that lived through the turn has nothing to adopt once its own requests of
        // the new day reserved there; here it has none yet, so it adopts the same way.
        adopt(&next, D + DAY + 5, &charges);
        assert_eq!(key(&next).1.used().0, 70);
    }

    #[test]
    fn a_period_that_turns_in_the_core_counts_its_own_requests_and_keeps_them() {
        let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        let day = snapshot(&registry, 1, D, 50, 0);
        adopt(&day, D + 100, &[]);
        assert_eq!(fits(&day, D + 100), 2); // 50 + 2 x 20 of 100
                                            // Past midnight, still under day D's figures: the new day starts from zero in the core
                                            // and counts its requests (their events not drained yet).
        assert_eq!(fits(&day, D + DAY + 1), 5);
        // The new day's figures arrive, read before any of those events was stored: the core
        // keeps its own count (it has been in that period since its first request there).
        let next = snapshot(&registry, 2, D + DAY, 0, 0);
        adopt(&next, D + DAY + 2, &[(1, "k", D + DAY + 1, 100)]);
        assert_eq!(key(&next).1.used().0, 100);
        assert_eq!(fits(&next, D + DAY + 3), 0, "the quota holds exactly across the turn");
    }

    #[test]
    fn a_figure_for_an_older_period_is_not_adopted() {
        let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        let stale = snapshot(&registry, 1, D, 90, 0);
        // Applied on the next day: the figure describes yesterday, today starts from zero.
        adopt(&stale, D + DAY + 1, &[(1, "k", D + 5, 90)]);
        assert_eq!(fits(&stale, D + DAY + 1), 5);
    }
}
