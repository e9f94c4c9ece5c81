//! Aggregation of samples into percentiles (never means), rates and throughput.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::sample::Sample;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    pub n: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    /// Nearest-rank percentiles.
    pub fn of(mut values: Vec<f64>) -> Percentiles {
        values.retain(|v| v.is_finite());
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let at = |q: f64| -> Option<f64> {
            if n == 0 {
                return None;
            }
            let rank = ((q / 100.0) * n as f64).ceil().max(1.0) as usize;
            values.get(rank.min(n) - 1).copied()
        };
        Percentiles { n, p50: at(50.0), p90: at(90.0), p95: at(95.0), p99: at(99.0), max: values.last().copied() }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassReport {
    pub requests: u64,
    pub ok: u64,
    pub status: BTreeMap<u16, u64>,
    pub ttft_ms: Percentiles,
    pub total_ms: Percentiles,
    pub retry_after_seen: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub label: String,
    pub mode: String,
    pub duration_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub error_rate: f64,
    pub timeout_rate: f64,
    /// Arrivals the generator could not send (over --max-inflight): the generator's own overload.
    pub dropped: u64,
    pub status: BTreeMap<u16, u64>,
    pub transport_errors: BTreeMap<String, u64>,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub headers_ms: Percentiles,
    pub ttft_ms: Percentiles,
    pub tpot_ms: Percentiles,
    pub gap_ms: Percentiles,
    pub total_ms: Percentiles,
    pub events: u64,
    pub chunks: u64,
    pub multi_event_chunks: u64,
    /// Inter-token gaps between 35 and 45 ms: the signature of Nagle + delayed ACK.
    pub gaps_35_45ms: u64,
    pub retry_after_seen: u64,
    pub by_priority: BTreeMap<String, ClassReport>,
}

pub fn build(label: &str, mode: String, samples: &[Sample], duration_s: f64, dropped: u64) -> Report {
    let mut r = Report { label: label.to_string(), mode, duration_s, dropped, ..Report::default() };
    let mut gaps = Vec::new();
    let mut output_tokens = 0u64;
    for s in samples {
        r.requests += 1;
        *r.status.entry(s.status).or_default() += 1;
        if s.ok {
            r.ok += 1;
        } else {
            r.errors += 1;
        }
        if s.timed_out {
            r.timeouts += 1;
        }
        if let Some(kind) = s.error {
            *r.transport_errors.entry(kind.to_string()).or_default() += 1;
        }
        if s.retry_after {
            r.retry_after_seen += 1;
        }
        output_tokens += s.output_tokens;
        r.events += s.events;
        r.chunks += s.chunks;
        r.multi_event_chunks += s.multi_event_chunks;
        for g in &s.gaps_us {
            if (35_000..=45_000).contains(g) {
                r.gaps_35_45ms += 1;
            }
            gaps.push(f64::from(*g) / 1000.0);
        }
    }
    let pick = |f: &dyn Fn(&Sample) -> Option<f64>, only_ok: bool| -> Percentiles {
        Percentiles::of(samples.iter().filter(|s| !only_ok || s.ok).filter_map(f).collect())
    };
    r.headers_ms = pick(&|s| s.headers_ms, true);
    r.ttft_ms = pick(&|s| s.ttft_ms, true);
    r.tpot_ms = pick(&|s| s.tpot_ms, true);
    r.total_ms = pick(&|s| Some(s.total_ms), true);
    r.gap_ms = Percentiles::of(gaps);
    if r.requests > 0 {
        r.error_rate = r.errors as f64 / r.requests as f64;
        r.timeout_rate = r.timeouts as f64 / r.requests as f64;
    }
    if duration_s > 0.0 {
        r.requests_per_s = r.requests as f64 / duration_s;
        r.output_tokens_per_s = output_tokens as f64 / duration_s;
    }
    let mut classes: BTreeMap<String, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        if let Some(p) = &s.priority {
            classes.entry(p.to_string()).or_default().push(s);
        }
    }
    for (class, list) in classes {
        let mut c = ClassReport::default();
        for s in &list {
            c.requests += 1;
            c.ok += u64::from(s.ok);
            c.retry_after_seen += u64::from(s.retry_after);
            *c.status.entry(s.status).or_default() += 1;
        }
        c.ttft_ms = Percentiles::of(list.iter().filter(|s| s.ok).filter_map(|s| s.ttft_ms).collect());
        c.total_ms = Percentiles::of(list.iter().filter(|s| s.ok).map(|s| s.total_ms).collect());
        r.by_priority.insert(class, c);
    }
    r
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

impl Report {
    pub fn table(&self) -> String {
        let mut out = String::new();
        let label = if self.label.is_empty() { String::new() } else { format!("[{}] ", self.label) };
        let _ = writeln!(
            out,
            "{label}{}: {} requests in {:.1}s, {} ok, errors {:.2}%, timeouts {:.2}%, {:.1} req/s, {:.0} output tok/s{}",
            self.mode,
            self.requests,
            self.duration_s,
            self.ok,
            self.error_rate * 100.0,
            self.timeout_rate * 100.0,
            self.requests_per_s,
            self.output_tokens_per_s,
            if self.dropped > 0 { format!(", {} dropped by the generator", self.dropped) } else { String::new() }
        );
        let _ =
            writeln!(out, "{:<10}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}", "ms", "n", "p50", "p90", "p95", "p99", "max");
        for (name, p) in [
            ("headers", &self.headers_ms),
            ("ttft", &self.ttft_ms),
            ("tpot", &self.tpot_ms),
            ("gap", &self.gap_ms),
            ("total", &self.total_ms),
        ] {
            let _ = writeln!(
                out,
                "{name:<10}{:>8}{:>10}{:>10}{:>10}{:>10}{:>10}",
                p.n,
                cell(p.p50),
                cell(p.p90),
                cell(p.p95),
                cell(p.p99),
                cell(p.max)
            );
        }
        let status: Vec<String> = self.status.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "status: {}", status.join(" "));
        if !self.transport_errors.is_empty() {
            let errors: Vec<String> = self.transport_errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "transport errors: {}", errors.join(" "));
        }
        if self.events > 0 {
            let _ = writeln!(
                out,
                "frames: {} events in {} chunks, {} chunks carried more than one event; {} gaps in 35-45 ms",
                self.events, self.chunks, self.multi_event_chunks, self.gaps_35_45ms
            );
        }
        for (class, c) in &self.by_priority {
            let status: Vec<String> = c.status.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                out,
                "{class}: {} requests, {} ok, ttft p50 {} p99 {}, total p99 {}, status {}",
                c.requests,
                c.ok,
                cell(c.ttft_ms.p50),
                cell(c.ttft_ms.p99),
                cell(c.total_ms.p99),
                status.join(" ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.p50, p.p90, p.p99, p.max), (Some(50.0), Some(90.0), Some(99.0), Some(100.0)));
        assert_eq!(Percentiles::of(vec![]).p50, None);
        assert_eq!(Percentiles::of(vec![7.0]).p99, Some(7.0));
    }
}
