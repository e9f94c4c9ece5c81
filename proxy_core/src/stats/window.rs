//! Sliding windows of one series (a pool or a route): 10-second slots for the last hour, each
//! holding counts, log-linear latency histograms and the highest queue depth and in-flight seen.
//! Recording is one short lock per finished request; reading merges the slots of a window.

use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use super::hist::{LogHist, Quantiles};

pub const SLOT_SECONDS: u64 = 10;
const SLOTS: usize = 360;

#[derive(Clone, Default)]
struct Slot {
    /// Which 10-second interval (unix seconds / 10) the slot holds.
    epoch: u64,
    requests: u64,
    errors: u64,
    timeouts: u64,
    rejected: u64,
    client_retries: u64,
    output_tokens: u64,
    ttft: LogHist,
    tpot: LogHist,
    total: LogHist,
    queue_wait: LogHist,
    max_queue_depth: u32,
    max_inflight: u32,
}

/// One finished request, as the windows see it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observation {
    pub error: bool,
    pub timeout: bool,
    pub client_retry: bool,
    pub output_tokens: u64,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub total_ms: f64,
    pub queue_wait_ms: f64,
}

pub struct Windows {
    slots: Mutex<Vec<Slot>>,
}

impl Default for Windows {
    fn default() -> Self {
        Self { slots: Mutex::new(vec![Slot::default(); SLOTS]) }
    }
}

/// A window's figures.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct WindowStats {
    pub seconds: u64,
    pub requests: u64,
    pub rate_per_s: f64,
    pub errors: u64,
    pub error_rate: f64,
    pub timeouts: u64,
    pub timeout_rate: f64,
    /// Requests refused by admission (queue full, deadline, share) in this series.
    pub rejected: u64,
    pub client_retries: u64,
    pub output_tokens_per_s: f64,
    pub ttft_ms: Quantiles,
    pub tpot_ms: Quantiles,
    pub total_ms: Quantiles,
    pub queue_wait_ms: Quantiles,
    pub max_queue_depth: u32,
    pub max_inflight: u32,
}

impl Windows {
    fn with_slot(&self, now_unix: u64, f: impl FnOnce(&mut Slot)) {
        let epoch = now_unix / SLOT_SECONDS;
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &mut slots[(epoch % SLOTS as u64) as usize];
        if slot.epoch != epoch {
            *slot = Slot { epoch, ..Slot::default() };
        }
        f(slot);
    }

    pub fn record(&self, now_unix: u64, o: &Observation) {
        self.with_slot(now_unix, |s| {
            s.requests += 1;
            s.errors += u64::from(o.error);
            s.timeouts += u64::from(o.timeout);
            s.client_retries += u64::from(o.client_retry);
            s.output_tokens += o.output_tokens;
            if let Some(v) = o.ttft_ms {
                s.ttft.record_ms(v);
            }
            if let Some(v) = o.tpot_ms {
                s.tpot.record_ms(v);
            }
            s.total.record_ms(o.total_ms);
            s.queue_wait.record_ms(o.queue_wait_ms);
        });
    }

    pub fn record_rejection(&self, now_unix: u64) {
        self.with_slot(now_unix, |s| s.rejected += 1);
    }

    /// Remember the highest queue depth and in-flight count of the current slot.
    pub fn sample_load(&self, now_unix: u64, queue_depth: u32, inflight: u32) {
        self.with_slot(now_unix, |s| {
            s.max_queue_depth = s.max_queue_depth.max(queue_depth);
            s.max_inflight = s.max_inflight.max(inflight);
        });
    }

    /// Figures for the last `seconds` (whole slots), ending `skip_seconds` before now.
    pub fn stats(&self, now_unix: u64, seconds: u64, skip_seconds: u64) -> WindowStats {
        let newest = (now_unix.saturating_sub(skip_seconds)) / SLOT_SECONDS;
        let count = (seconds / SLOT_SECONDS).clamp(1, SLOTS as u64);
        let oldest = newest.saturating_sub(count - 1);
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let mut agg = Slot::default();
        for slot in slots.iter().filter(|s| s.epoch >= oldest && s.epoch <= newest && s.epoch != 0) {
            agg.requests += slot.requests;
            agg.errors += slot.errors;
            agg.timeouts += slot.timeouts;
            agg.rejected += slot.rejected;
            agg.client_retries += slot.client_retries;
            agg.output_tokens += slot.output_tokens;
            agg.ttft.merge(&slot.ttft);
            agg.tpot.merge(&slot.tpot);
            agg.total.merge(&slot.total);
            agg.queue_wait.merge(&slot.queue_wait);
            agg.max_queue_depth = agg.max_queue_depth.max(slot.max_queue_depth);
            agg.max_inflight = agg.max_inflight.max(slot.max_inflight);
        }
        drop(slots);
        // The newest slot is partly elapsed: divide by the time actually covered.
        let covered = ((count - 1) * SLOT_SECONDS + (now_unix.saturating_sub(skip_seconds) % SLOT_SECONDS) + 1) as f64;
        let per = |n: u64| if agg.requests > 0 { n as f64 / agg.requests as f64 } else { 0.0 };
        WindowStats {
            seconds: count * SLOT_SECONDS,
            requests: agg.requests,
            rate_per_s: agg.requests as f64 / covered,
            errors: agg.errors,
            error_rate: per(agg.errors),
            timeouts: agg.timeouts,
            timeout_rate: per(agg.timeouts),
            rejected: agg.rejected,
            client_retries: agg.client_retries,
            output_tokens_per_s: agg.output_tokens as f64 / covered,
            ttft_ms: agg.ttft.quantiles(),
            tpot_ms: agg.tpot.quantiles(),
            total_ms: agg.total.quantiles(),
            queue_wait_ms: agg.queue_wait.quantiles(),
            max_queue_depth: agg.max_queue_depth,
            max_inflight: agg.max_inflight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_their_slots_only() {
        let w = Windows::default();
        let t0 = 1_000_000;
        for i in 0..60u64 {
            // One request per second for a minute, getting slower.
            let o = Observation { total_ms: 100.0 + i as f64, error: i % 10 == 0, ..Observation::default() };
            w.record(t0 + i, &o);
        }
        w.sample_load(t0 + 59, 7, 3);
        let last_minute = w.stats(t0 + 59, 60, 0);
        assert_eq!(last_minute.requests, 60);
        assert_eq!(last_minute.errors, 6);
        assert!((last_minute.rate_per_s - 1.0).abs() < 0.05);
        assert_eq!(last_minute.max_queue_depth, 7);
        let last_ten = w.stats(t0 + 59, 10, 0);
        assert_eq!(last_ten.requests, 10);
        assert!(last_ten.total_ms.p50.unwrap() > 150.0);
        // An hour later the slots are stale and ignored.
        assert_eq!(w.stats(t0 + 3600 + 59, 60, 0).requests, 0);
        // The minute before the last ten seconds.
        assert_eq!(w.stats(t0 + 59, 50, 10).requests, 50);
    }
}
