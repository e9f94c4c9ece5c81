//! The scrape-time view of every metric, serialized to JSON for the control plane's collector.

use std::sync::atomic::Ordering;

use serde::Serialize;

use super::histogram::{Histogram, HistogramSnapshot};
use super::series::STATUS_CLASSES;
use super::Metrics;
use crate::config::Priority;
use crate::endpoint::Endpoint;
use crate::error::ErrorKind;
use crate::routing::RetryReason;

#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub labels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramSnapshot>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FamilySnapshot {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub help: &'static str,
    pub labels: Vec<&'static str>,
    pub samples: Vec<Sample>,
}

impl FamilySnapshot {
    pub(crate) fn new(name: &'static str, kind: &'static str, help: &'static str, labels: &[&'static str]) -> Self {
        Self { name, kind, help, labels: labels.to_vec(), samples: Vec::new() }
    }

    pub fn with_labels(name: &'static str, kind: &'static str, help: &'static str, labels: Vec<&'static str>) -> Self {
        Self { name, kind, help, labels, samples: Vec::new() }
    }

    pub fn push_value(&mut self, labels: Vec<String>, value: f64) {
        self.value(labels, value);
    }

    /// A histogram sample, unless nothing was recorded in it.
    pub fn histogram_if_used(&mut self, labels: Vec<String>, histogram: &Histogram) {
        let snapshot = histogram.snapshot();
        if snapshot.count > 0 {
            self.samples.push(Sample { labels, value: None, histogram: Some(snapshot) });
        }
    }

    /// A single unlabelled counter.
    pub fn counter(name: &'static str, help: &'static str, value: f64) -> Self {
        let mut family = Self::new(name, "counter", help, &[]);
        family.value(Vec::new(), value);
        family
    }

    /// A single unlabelled gauge.
    pub fn gauge(name: &'static str, help: &'static str, value: f64) -> Self {
        let mut family = Self::new(name, "gauge", help, &[]);
        family.value(Vec::new(), value);
        family
    }

    pub(crate) fn value(&mut self, labels: Vec<String>, value: f64) {
        self.samples.push(Sample { labels, value: Some(value), histogram: None });
    }

    pub(crate) fn histogram(&mut self, labels: Vec<String>, histogram: &Histogram) {
        let snapshot = histogram.snapshot();
        self.samples.push(Sample { labels, value: None, histogram: Some(snapshot) });
    }
}

/// Queue depth, in-flight and their limits per pool, read from the gates of the snapshot in force.
pub fn pool_gauges(snapshot: &crate::config::Snapshot) -> Vec<FamilySnapshot> {
    let mut depth = FamilySnapshot::new(
        "sluicegate_queue_depth",
        "gauge",
        "Requests waiting for admission, by pool and priority.",
        &["pool", "priority"],
    );
    let mut depth_peak = FamilySnapshot::new(
        "sluicegate_queue_depth_peak",
        "gauge",
        "Most requests that waited at once since the pool was created, by pool and priority.",
        &["pool", "priority"],
    );
    let mut depth_limit = FamilySnapshot::new(
        "sluicegate_queue_limit",
        "gauge",
        "Largest number of requests that may wait, by pool and priority.",
        &["pool", "priority"],
    );
    let mut inflight =
        FamilySnapshot::new("sluicegate_pool_inflight", "gauge", "Requests at the pool's upstreams.", &["pool"]);
    let mut inflight_limit = FamilySnapshot::new(
        "sluicegate_pool_inflight_limit",
        "gauge",
        "Largest number of requests at the pool's upstreams (absent: unlimited).",
        &["pool"],
    );
    let mut member_inflight = FamilySnapshot::new(
        "sluicegate_upstream_inflight",
        "gauge",
        "Requests in flight per upstream member.",
        &["pool", "upstream"],
    );
    let mut budget_exhausted = FamilySnapshot::new(
        "sluicegate_retry_budget_exhausted_total",
        "counter",
        "Retries not made because the pool's retry budget was spent.",
        &["pool"],
    );
    let mut drilled = FamilySnapshot::new(
        "sluicegate_pool_drilled",
        "gauge",
        "1 while an operator's drill holds the pool out.",
        &["pool"],
    );
    let mut ejections = FamilySnapshot::new(
        "sluicegate_upstream_ejections_total",
        "counter",
        "Outlier ejections of an upstream member.",
        &["pool", "upstream"],
    );
    let mut member_state = FamilySnapshot::new(
        "sluicegate_upstream_state",
        "gauge",
        "Member state: 0 ready, 1 ejected, 2 cooling down after a 429, 3 failing health checks, 4 drilled.",
        &["pool", "upstream"],
    );
    let mut pools: Vec<_> = snapshot.pools.values().collect();
    pools.sort_by(|a, b| a.id.cmp(&b.id));
    {
        for pool in pools {
            let config = pool.gate.config();
            let pool_label = vec![pool.id.to_string()];
            budget_exhausted.value(pool_label.clone(), pool.state.budget_exhausted.load(Ordering::Relaxed) as f64);
            drilled.value(pool_label, if pool.state.drilled() { 1.0 } else { 0.0 });
            for priority in Priority::ALL {
                let labels = vec![pool.id.to_string(), priority.as_str().to_string()];
                depth.value(labels.clone(), f64::from(pool.gate.depth(priority)));
                depth_peak.value(labels.clone(), f64::from(pool.gate.depth_peak(priority)));
                depth_limit.value(labels, config.lane(priority).max_depth as f64);
            }
            inflight.value(vec![pool.id.to_string()], f64::from(pool.gate.inflight()));
            if let Some(max) = config.max_inflight {
                inflight_limit.value(vec![pool.id.to_string()], f64::from(max));
            }
            for member in &pool.members {
                let labels = vec![pool.id.to_string(), member.id.to_string()];
                ejections.value(labels.clone(), member.state.ejections_total.load(Ordering::Relaxed) as f64);
                member_state.value(labels.clone(), f64::from(member.state.availability().code()));
                member_inflight.value(labels, member.state.inflight() as f64);
            }
        }
    }
    vec![
        depth,
        depth_peak,
        depth_limit,
        inflight,
        inflight_limit,
        member_inflight,
        budget_exhausted,
        drilled,
        ejections,
        member_state,
    ]
}

/// Gauges the metrics module does not own (queue depths, usage backlog) are added by the caller.
pub fn render(metrics: &Metrics) -> Vec<FamilySnapshot> {
    let leg_labels = ["model", "pool", "upstream"];
    let mut requests = FamilySnapshot::new(
        "sluicegate_requests_total",
        "counter",
        "Requests that reached an upstream, by endpoint and status class.",
        &["endpoint", "model", "pool", "upstream", "status_class"],
    );
    let mut timeouts = FamilySnapshot::new(
        "sluicegate_upstream_timeouts_total",
        "counter",
        "Requests that ended in an upstream timeout.",
        &leg_labels,
    );
    let mut tokens = FamilySnapshot::new(
        "sluicegate_tokens_total",
        "counter",
        "Tokens billed, by type (input or output).",
        &["model", "pool", "upstream", "type"],
    );
    let mut ttft = FamilySnapshot::new(
        "sluicegate_time_to_first_token_seconds",
        "histogram",
        "Time from the request's arrival to the first content token relayed (streams).",
        &leg_labels,
    );
    let mut tpot = FamilySnapshot::new(
        "sluicegate_time_per_output_token_seconds",
        "histogram",
        "(duration - TTFT) / (output tokens - 1) per stream.",
        &leg_labels,
    );
    let mut duration = FamilySnapshot::new(
        "sluicegate_request_duration_seconds",
        "histogram",
        "Time from the request's arrival to its last byte.",
        &leg_labels,
    );
    let mut connect = FamilySnapshot::new(
        "sluicegate_upstream_connect_seconds",
        "histogram",
        "Time to open a new upstream connection (pooled connections are not observed).",
        &leg_labels,
    );
    for (labels, leg) in metrics.legs.collect() {
        let base: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        for endpoint in Endpoint::ALL {
            for (class_index, class) in STATUS_CLASSES.iter().enumerate() {
                let count = leg.requests[endpoint.index()][class_index].load(Ordering::Relaxed);
                if count > 0 {
                    let mut l = vec![endpoint.as_str().to_string()];
                    l.extend(base.iter().cloned());
                    l.push((*class).to_string());
                    requests.value(l, count as f64);
                }
            }
        }
        timeouts.value(base.clone(), leg.timeouts.load(Ordering::Relaxed) as f64);
        for (kind, counter) in [("input", &leg.input_tokens), ("output", &leg.output_tokens)] {
            let mut l = base.clone();
            l.push(kind.to_string());
            tokens.value(l, counter.load(Ordering::Relaxed) as f64);
        }
        ttft.histogram(base.clone(), &leg.ttft);
        tpot.histogram(base.clone(), &leg.tpot);
        duration.histogram(base.clone(), &leg.duration);
        connect.histogram(base, &leg.connect);
    }

    let mut queue_wait = FamilySnapshot::new(
        "sluicegate_queue_wait_seconds",
        "histogram",
        "Time a request waited for admission to its pool.",
        &["pool", "priority"],
    );
    let mut overhead = FamilySnapshot::new(
        "sluicegate_gateway_overhead_seconds",
        "histogram",
        "Time spent inside the gateway, excluding upstream time and queue wait.",
        &["pool"],
    );
    let mut attempts = FamilySnapshot::new(
        "sluicegate_upstream_attempts_total",
        "counter",
        "Attempts sent to a pool's members, first tries and retries.",
        &["pool"],
    );
    let mut retries =
        FamilySnapshot::new("sluicegate_retries_total", "counter", "Retries, by what failed.", &["pool", "reason"]);
    for (labels, pool) in metrics.pools.collect() {
        let pool_id = labels.first().map(|l| l.to_string()).unwrap_or_default();
        for priority in Priority::ALL {
            queue_wait
                .histogram(vec![pool_id.clone(), priority.as_str().to_string()], &pool.queue_wait[priority.index()]);
        }
        overhead.histogram(vec![pool_id.clone()], &pool.overhead);
        attempts.value(vec![pool_id.clone()], pool.attempts.load(Ordering::Relaxed) as f64);
        for reason in RetryReason::ALL {
            let count = pool.retries[reason.index()].load(Ordering::Relaxed);
            retries.value(vec![pool_id.clone(), reason.as_str().to_string()], count as f64);
        }
    }

    let g = &metrics.global;
    let mut rejections = FamilySnapshot::new(
        "sluicegate_rejections_total",
        "counter",
        "Requests the gateway answered itself without an upstream response, by reason.",
        &["reason"],
    );
    for kind in ErrorKind::ALL {
        let count = g.rejections[kind.index()].load(Ordering::Relaxed);
        if count > 0 {
            rejections.value(vec![kind.reason().to_string()], count as f64);
        }
    }
    let mut singles = Vec::new();
    for (name, kind, help, value) in [
        (
            "sluicegate_connections_accepted_total",
            "counter",
            "Client connections accepted on the data port.",
            g.connections.accepted.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_connections_open",
            "gauge",
            "Client connections currently open on the data port.",
            g.connections.open.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_connections_refused_per_client_total",
            "counter",
            "Client connections closed at once because their address (IPv6: its /64) held its cap.",
            g.connections.refused_per_client.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_connections_first_request_timeouts_total",
            "counter",
            "Client connections closed because no whole request head arrived within the header timeout.",
            g.connections.first_request_timeouts.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_connections_malformed_head_total",
            "counter",
            "Client connections whose request head could not be parsed (answered 400, 414 or 431, then closed).",
            g.connections.malformed_heads.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_usage_events_total",
            "counter",
            "Usage events emitted by the data plane.",
            g.usage_events.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_config_applied_total",
            "counter",
            "Config snapshots accepted by the data plane.",
            g.config_applied.load(Ordering::Relaxed),
        ),
        (
            "sluicegate_config_rejected_total",
            "counter",
            "Config snapshots refused by the data plane.",
            g.config_rejected.load(Ordering::Relaxed),
        ),
    ] {
        let mut family = FamilySnapshot::new(name, kind, help, &[]);
        family.value(Vec::new(), value as f64);
        singles.push(family);
    }

    let mut out = vec![
        requests, timeouts, tokens, ttft, tpot, duration, connect, queue_wait, overhead, attempts, retries, rejections,
    ];
    out.extend(singles);
    out
}
