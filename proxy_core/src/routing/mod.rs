//! Choosing an upstream member for a request.

mod member_state;
mod picker;

pub use member_state::{InflightGuard, MemberState};
pub use picker::pick_member;
