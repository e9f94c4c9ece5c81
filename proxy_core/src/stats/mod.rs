//! Windowed statistics for the status page and the doctor: per pool and per route, the last
//! minute, five minutes and hour of rates, error and timeout rates, P50/P95/P99 of each latency
//! stage, and the highest queue depth and in-flight count, with their limits.

mod hist;
mod merge;
mod status;
mod window;

pub use hist::{LogHist, Quantiles};
pub use merge::merge_status;
pub use status::{default_windows, sample_load, status_json, WindowSpec};
pub use window::{Observation, WindowStats, Windows, SLOT_SECONDS};
