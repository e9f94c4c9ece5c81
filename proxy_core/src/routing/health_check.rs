//! Active health checks: one task per core walks the pools of the snapshot in force and GETs each
//! member's check URL when due, with the member's credential. Enough consecutive failures take
//! the member out; the first success brings it back. A member's state lives in the registry, so a
//! config swap neither resets nor duplicates its checks.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;

use crate::config::{HealthCheckConfig, Member, SnapshotCell};

const TICK: Duration = Duration::from_millis(100);

async fn check(member: Arc<Member>, config: HealthCheckConfig) {
    let Some(uri) = member.health_uri.clone() else {
        return;
    };
    let mut request = Request::new(Bytes::new());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = uri;
    if let Some((name, value)) = &member.credential {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let exchange = async {
        let response = member.client.request(request).await.ok()?;
        let ok = response.status().is_success();
        // Read the body so the connection can be pooled again.
        let _ = response.into_body().collect().await;
        Some(ok)
    };
    let healthy =
        tokio::time::timeout(Duration::from_millis(config.timeout_ms), exchange).await.ok().flatten().unwrap_or(false);
    member.state.record_check(healthy, config.unhealthy_after);
    if !healthy {
        tracing::debug!(upstream = %member.id, "health check failed");
    }
}

/// Runs until the core's runtime shuts down.
pub async fn run(config: SnapshotCell) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let Some(snapshot) = config.load_full() else {
            continue;
        };
        for pool in snapshot.pools.values() {
            let Some(config) = &pool.health_check else {
                continue;
            };
            for member in &pool.members {
                if member.state.check_due(Duration::from_millis(config.interval_ms)) {
                    tokio::spawn(check(member.clone(), config.clone()));
                }
            }
        }
    }
}
