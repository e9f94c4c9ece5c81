//! The status view: per pool and per route, the windows the doctor reads, with limits and member
//! health alongside. Built on demand from the snapshot in force; nothing here is on the request
//! path.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::window::{WindowStats, Windows};
use crate::config::{Priority, Snapshot, SnapshotCell};

/// A window to report: its name, its length, and how far back from now it ends (all seconds,
/// rounded to the 10-second slots).
#[derive(Debug, Clone)]
pub struct WindowSpec {
    pub name: String,
    pub seconds: u64,
    pub ends_ago: u64,
}

/// The default windows. `prev_5m` is the five minutes before the last minute: what "moving with
/// traffic" is measured against.
pub fn default_windows() -> Vec<WindowSpec> {
    [("1m", 60, 0), ("5m", 300, 0), ("1h", 3600, 0), ("prev_5m", 300, 60)]
        .into_iter()
        .map(|(name, seconds, ends_ago)| WindowSpec { name: name.into(), seconds, ends_ago })
        .collect()
}

fn windows(w: &Windows, now: u64, specs: &[WindowSpec]) -> BTreeMap<String, WindowStats> {
    specs.iter().map(|spec| (spec.name.clone(), w.stats(now, spec.seconds, spec.ends_ago))).collect()
}

#[derive(Serialize, Deserialize)]
pub(super) struct MemberStatus {
    pub id: String,
    pub state: String,
    pub inflight: u64,
    pub ejections: u64,
    pub ttfb_ewma_ms: f64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct PoolStatus {
    pub id: String,
    pub kind: String,
    pub inflight: u32,
    pub inflight_limit: Option<u32>,
    pub queue_depth: BTreeMap<String, u32>,
    pub queue_limit: BTreeMap<String, usize>,
    pub drilled: bool,
    pub members: Vec<MemberStatus>,
    pub windows: BTreeMap<String, WindowStats>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct RouteStatus {
    pub alias: String,
    pub chain: Vec<String>,
    pub windows: BTreeMap<String, WindowStats>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Status {
    pub now: u64,
    pub config_version: u64,
    pub pools: Vec<PoolStatus>,
    pub routes: Vec<RouteStatus>,
}

fn state_name(code: u8) -> &'static str {
    match code {
        0 => "ready",
        1 => "ejected",
        2 => "cooling_down",
        3 => "failing_checks",
        _ => "drilled",
    }
}

pub fn status_json(snapshot: &Snapshot, now: u64, specs: &[WindowSpec]) -> String {
    let mut pools: Vec<PoolStatus> = snapshot
        .pools
        .values()
        .map(|pool| {
            let config = pool.gate.config();
            PoolStatus {
                id: pool.id.to_string(),
                kind: pool.kind.as_str().to_string(),
                inflight: pool.gate.inflight(),
                inflight_limit: config.max_inflight,
                queue_depth: Priority::ALL.iter().map(|p| (p.as_str().to_string(), pool.gate.depth(*p))).collect(),
                queue_limit: Priority::ALL
                    .iter()
                    .map(|p| (p.as_str().to_string(), config.lane(*p).max_depth))
                    .collect(),
                drilled: pool.state.drilled(),
                members: pool
                    .members
                    .iter()
                    .map(|m| MemberStatus {
                        id: m.id.to_string(),
                        state: state_name(m.state.availability().code()).to_string(),
                        inflight: m.state.inflight(),
                        ejections: m.state.ejections_total.load(std::sync::atomic::Ordering::Relaxed),
                        ttfb_ewma_ms: m.state.ttfb_ewma().as_secs_f64() * 1000.0,
                    })
                    .collect(),
                windows: windows(&pool.state.windows, now, specs),
            }
        })
        .collect();
    pools.sort_by(|a, b| a.id.cmp(&b.id));
    let mut routes: Vec<RouteStatus> = snapshot
        .routes
        .values()
        .map(|r| RouteStatus {
            alias: r.alias.to_string(),
            chain: r.chain.iter().map(|leg| leg.pool.id.to_string()).collect(),
            windows: windows(&r.windows, now, specs),
        })
        .collect();
    routes.sort_by(|a, b| a.alias.cmp(&b.alias));
    let status = Status { now, config_version: snapshot.version, pools, routes };
    serde_json::to_string(&status).unwrap_or_else(|_| "{}".into())
}

/// Samples each pool's queue depth and in-flight count into its windows once a second, so a
/// window knows how close to its limits the pool ran. Runs until the core's runtime stops.
pub async fn sample_load(config: SnapshotCell) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let Some(snapshot) = config.load_full() else {
            continue;
        };
        let now = crate::clock::unix_now() as u64;
        for pool in snapshot.pools.values() {
            let depth = Priority::ALL.iter().map(|p| pool.gate.depth(*p)).sum();
            pool.state.windows.sample_load(now, depth, pool.gate.inflight());
        }
    }
}
