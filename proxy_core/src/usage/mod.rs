//! Usage events: what one request consumed and how it ended, journaled and handed to the control
//! plane without a lock on the request path.

mod batch;
mod begin;
mod event;
mod journal;
mod json_object;
mod mapped;
mod replay;
mod ring;
mod segment;
mod sink;

#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod lock_free_lint;

pub use batch::DrainedBatch;
pub use begin::{BeginRecord, ProgressRecord, ReportedUsage, PROGRESS_EVERY_EVENTS};
pub use event::{Outcome, UsageEvent, UsageSource};
pub use journal::Ticket;
pub use ring::{PushError, Ring};
pub use sink::{Charge, UsageSink, CHARGE_LOG};
