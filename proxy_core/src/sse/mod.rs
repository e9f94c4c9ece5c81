//! Server-sent events: framing, the relay tap, usage parsing, and the events the gateway writes
//! itself (errors after a stream started, keep-alive comments while queued).

mod frame;
mod tap;
mod usage;
mod whole;

pub use tap::{Fed, SseTap, TapStats};
pub use usage::{usage_of_body, TokenUsage, UsageProbe};
pub use whole::WholeBodyMeter;

use bytes::Bytes;

use crate::endpoint::Flavor;
use crate::error::ErrorKind;

/// The terminal event written when a stream fails after its headers went out: the SDKs raise on
/// it, where a clean `[DONE]` would pass a truncated answer off as complete.
pub fn error_event(flavor: Flavor, kind: ErrorKind, message: &str) -> Bytes {
    let body = match flavor {
        Flavor::OpenAi => serde_json::json!({
            "error": {"message": message, "type": kind.openai_type(), "param": null, "code": kind.code()}
        }),
        Flavor::Anthropic => serde_json::json!({
            "type": "error",
            "error": {"type": kind.anthropic_type(), "message": message}
        }),
    };
    let prefix = match flavor {
        Flavor::OpenAi => "",
        Flavor::Anthropic => "event: error\n",
    };
    Bytes::from(format!("{prefix}data: {body}\n\n"))
}

/// A comment line; clients ignore it, but it keeps idle timers on the way from firing.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
