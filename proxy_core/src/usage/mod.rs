//! Usage events: what one request consumed and how it ended, handed to the control plane.

mod event;
mod sink;

pub use event::{Outcome, UsageEvent, UsageSource};
pub use sink::UsageSink;
