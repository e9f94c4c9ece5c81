//! Readings of several replicas merged into one for the fleet: counts and rates add up,
//! percentiles come from the merged histograms (exact at the histogram's resolution, never an
//! average of percentiles), current in-flight counts and queue depths add up, and a member is
//! `ready` only where every replica finds it ready.

use std::collections::BTreeMap;

use super::hist::{LogHist, Quantiles};
use super::status::{MemberStatus, PoolStatus, RouteStatus, Status};
use super::window::WindowStats;

fn merge_quantiles(a: &mut Quantiles, b: &Quantiles) {
    let mut hist = LogHist::from_sparse(&a.hist);
    hist.merge(&LogHist::from_sparse(&b.hist));
    *a = hist.quantiles();
}

fn merge_window(a: &mut WindowStats, b: &WindowStats) {
    a.requests += b.requests;
    a.rate_per_s += b.rate_per_s;
    a.errors += b.errors;
    a.timeouts += b.timeouts;
    a.rejected += b.rejected;
    a.client_retries += b.client_retries;
    a.output_tokens_per_s += b.output_tokens_per_s;
    let share = |n: u64, of: u64| if of > 0 { n as f64 / of as f64 } else { 0.0 };
    a.error_rate = share(a.errors, a.requests);
    a.timeout_rate = share(a.timeouts, a.requests);
    merge_quantiles(&mut a.ttft_ms, &b.ttft_ms);
    merge_quantiles(&mut a.tpot_ms, &b.tpot_ms);
    merge_quantiles(&mut a.total_ms, &b.total_ms);
    merge_quantiles(&mut a.queue_wait_ms, &b.queue_wait_ms);
    // Peaks of different replicas need not coincide: their sum bounds the fleet's peak.
    a.max_queue_depth += b.max_queue_depth;
    a.max_inflight += b.max_inflight;
}

fn merge_windows(a: &mut BTreeMap<String, WindowStats>, b: BTreeMap<String, WindowStats>) {
    for (name, window) in b {
        match a.get_mut(&name) {
            Some(mine) => merge_window(mine, &window),
            None => {
                a.insert(name, window);
            }
        }
    }
}

fn merge_member(a: &mut MemberStatus, b: MemberStatus) {
    if a.state == "ready" {
        a.state = b.state;
    }
    a.inflight += b.inflight;
    a.ejections += b.ejections;
    a.ttfb_ewma_ms = a.ttfb_ewma_ms.max(b.ttfb_ewma_ms);
}

fn merge_pool(a: &mut PoolStatus, b: PoolStatus) {
    a.inflight += b.inflight;
    a.inflight_limit = a.inflight_limit.zip(b.inflight_limit).map(|(x, y)| x + y);
    for (lane, depth) in b.queue_depth {
        *a.queue_depth.entry(lane).or_default() += depth;
    }
    for (lane, limit) in b.queue_limit {
        *a.queue_limit.entry(lane).or_default() += limit;
    }
    a.drilled |= b.drilled;
    for member in b.members {
        match a.members.iter_mut().find(|m| m.id == member.id) {
            Some(mine) => merge_member(mine, member),
            None => a.members.push(member),
        }
    }
    merge_windows(&mut a.windows, b.windows);
}

fn merge_route(a: &mut RouteStatus, b: RouteStatus) {
    merge_windows(&mut a.windows, b.windows);
}

/// One status for all the readings given (each `Core.status_snapshot` JSON of one replica).
pub fn merge_status(readings: &[String]) -> Result<String, serde_json::Error> {
    let mut merged: Option<Status> = None;
    for text in readings {
        let status: Status = serde_json::from_str(text)?;
        let Some(out) = merged.as_mut() else {
            merged = Some(status);
            continue;
        };
        out.now = out.now.max(status.now);
        out.config_version = out.config_version.max(status.config_version);
        for pool in status.pools {
            match out.pools.iter_mut().find(|p| p.id == pool.id) {
                Some(mine) => merge_pool(mine, pool),
                None => out.pools.push(pool),
            }
        }
        for route in status.routes {
            match out.routes.iter_mut().find(|r| r.alias == route.alias) {
                Some(mine) => merge_route(mine, route),
                None => out.routes.push(route),
            }
        }
    }
    let mut out = merged.unwrap_or(Status { now: 0, config_version: 0, pools: Vec::new(), routes: Vec::new() });
    out.pools.sort_by(|a, b| a.id.cmp(&b.id));
    out.routes.sort_by(|a, b| a.alias.cmp(&b.alias));
    serde_json::to_string(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::window::{Observation, Windows};

    fn reading(latencies: &[f64], inflight: u32) -> String {
        let w = Windows::default();
        for ms in latencies {
            w.record(1_000_000, &Observation { total_ms: *ms, ..Observation::default() });
        }
        let window = w.stats(1_000_000, 60, 0);
        let pool = PoolStatus {
            id: "p".into(),
            kind: "openai".into(),
            inflight,
            inflight_limit: Some(10),
            queue_depth: BTreeMap::from([("interactive".into(), 1)]),
            queue_limit: BTreeMap::from([("interactive".into(), 8)]),
            drilled: false,
            members: vec![MemberStatus {
                id: "m".into(),
                state: "ready".into(),
                inflight: inflight.into(),
                ejections: 0,
                ttfb_ewma_ms: 5.0,
            }],
            windows: BTreeMap::from([("1m".into(), window)]),
        };
        serde_json::to_string(&Status { now: 1_000_000, config_version: 3, pools: vec![pool], routes: vec![] }).unwrap()
    }

    #[test]
    fn counts_add_up_and_percentiles_come_from_the_merged_histograms() {
        let fast: Vec<f64> = (0..90).map(|_| 10.0).collect();
        let slow: Vec<f64> = (0..10).map(|_| 1000.0).collect();
        let merged: Status =
            serde_json::from_str(&merge_status(&[reading(&fast, 2), reading(&slow, 3)]).unwrap()).unwrap();
        let pool = &merged.pools[0];
        assert_eq!(pool.inflight, 5);
        assert_eq!(pool.inflight_limit, Some(20));
        assert_eq!(pool.queue_depth["interactive"], 2);
        assert_eq!(pool.members[0].inflight, 5);
        let window = &pool.windows["1m"];
        assert_eq!(window.requests, 100);
        assert_eq!(window.total_ms.n, 100);
        // P50 is a fast request, P95 a slow one: no average of the two replicas' figures.
        assert!(window.total_ms.p50.unwrap() < 12.0);
        assert!(window.total_ms.p95.unwrap() > 900.0);
    }
}
