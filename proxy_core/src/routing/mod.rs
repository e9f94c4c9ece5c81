//! Choosing an upstream member, and the health and retry state behind that choice.

mod budget;
pub mod health_check;
mod member_state;
mod picker;
mod pool_state;
mod retry;

pub use budget::RetryBudget;
pub use member_state::{Availability, MemberLease, MemberState, Verdict};
pub use picker::pick_member;
pub use pool_state::PoolState;
pub use retry::{RetryPolicy, RetryReason};
