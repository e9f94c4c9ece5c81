//! Server-sent events: framing, the relay tap, usage parsing, and the events the gateway writes
//! itself (errors after a stream started, keep-alive comments while queued).

mod frame;
mod tap;
mod usage;
mod whole;

pub use frame::parse_event;
pub use tap::{Fed, SseTap, TapStats};
pub use usage::{usage_of_body, TokenUsage, UsageProbe};
pub use whole::WholeBodyMeter;

use bytes::Bytes;

use crate::endpoint::Flavor;
use crate::error::ErrorKind;

/// The terminal event written when a stream fails after its headers went out: the SDKs raise on
/// it, where a clean `[DONE]` would pass a truncated answer off as complete.
pub fn error_event(flavor: Flavor, kind: ErrorKind, message: &str) -> Bytes {
    let error = serde_json::json!({"message": message, "type": kind.openai_type(), "param": null, "code": kind.code()});
    let body = match flavor {
        Flavor::OpenAi => serde_json::json!({ "error": error }),
        Flavor::Anthropic => serde_json::json!({
            "type": "error",
            "error": {"type": kind.anthropic_type(), "message": message}
        }),
        // The Responses API's `error` event, with the `error` object the openai SDKs raise on
        // (they hand a bare `error` event to the application as one more event).
        Flavor::Responses => serde_json::json!({
            "type": "error",
            "code": kind.code(),
            "message": message,
            "param": null,
            "sequence_number": 0,
            "error": error,
        }),
    };
    let prefix = match flavor {
        Flavor::OpenAi => "",
        Flavor::Anthropic | Flavor::Responses => "event: error\n",
    };
    Bytes::from(format!("{prefix}data: {body}\n\n"))
}

/// A comment line; clients ignore it, but it keeps idle timers on the way from firing.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
