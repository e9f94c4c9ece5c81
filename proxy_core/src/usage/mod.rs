//! Usage events: what one request consumed and how it ended, journaled and handed to the control
//! plane.

mod begin;
mod event;
mod journal;
mod sink;

pub use begin::BeginRecord;
pub use event::{Outcome, UsageEvent, UsageSource};
pub use journal::Ticket;
pub use sink::UsageSink;
