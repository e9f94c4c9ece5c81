//! W3C Trace Context (`traceparent`, `tracestate`) as a hostile client may send it: parsed
//! strictly, anything else ignored (never an error to the client), and the headers the gateway
//! sends upstream written by the gateway itself.

use http::{HeaderMap, HeaderValue};

use crate::header_names::{TRACEPARENT, TRACESTATE};

/// `00-` + 32 hex + `-` + 16 hex + `-` + 2 hex.
const TRACEPARENT_LEN: usize = 55;
/// W3C: a vendor may drop `tracestate` past 512 characters; at most 32 list members.
pub const MAX_TRACESTATE: usize = 512;
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// A trace as the client continued it, or as the gateway started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParentContext {
    pub trace_id: u128,
    pub span_id: u64,
    /// The client's `sampled` flag.
    pub sampled: bool,
}

fn hex_u128(s: &[u8]) -> Option<u128> {
    s.iter().try_fold(0u128, |acc, c| Some(acc << 4 | u128::from(lower_hex(*c)?)))
}

/// Lowercase hex only: W3C version 00 forbids uppercase.
fn lower_hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The one `traceparent` of version 00, or `None`: a missing, repeated, oversized or malformed
/// header, a zero trace or span id. Version 00 has exactly this length; later versions may be
/// longer, but this gateway only speaks 00 and starts a trace of its own for anything else.
pub fn parse_traceparent(headers: &HeaderMap) -> Option<ParentContext> {
    let mut values = headers.get_all(TRACEPARENT).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let b = value.as_bytes();
    if b.len() != TRACEPARENT_LEN || &b[..3] != b"00-" || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let trace_id = hex_u128(&b[3..35])?;
    let span_id = u64::try_from(hex_u128(&b[36..52])?).ok()?;
    let flags = u8::try_from(hex_u128(&b[53..55])?).ok()?;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some(ParentContext { trace_id, span_id, sampled: flags & 1 == 1 })
}

/// The client's `tracestate`, kept only beside a valid `traceparent` (W3C: without one it is
/// discarded), as one header of at most `MAX_TRACESTATE` visible ASCII characters and 32 list
/// members; anything else is dropped whole rather than edited.
pub fn parse_tracestate(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut values = headers.get_all(TRACESTATE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let b = value.as_bytes();
    let visible = b.iter().all(|c| (0x20..0x7f).contains(c));
    let members = b.split(|c| *c == b',').filter(|m| m.iter().any(|c| *c != b' ' && *c != b'\t')).count();
    let well_formed = b.split(|c| *c == b',').all(|m| {
        let m = m.trim_ascii();
        m.is_empty() || m.iter().filter(|c| **c == b'=').count() >= 1 && !m.starts_with(b"=")
    });
    (!b.is_empty() && b.len() <= MAX_TRACESTATE && visible && well_formed && members <= MAX_TRACESTATE_MEMBERS)
        .then(|| value.clone())
}

/// `traceparent` of version 00.
pub fn format_traceparent(trace_id: u128, span_id: u64, sampled: bool) -> String {
    format!("00-{trace_id:032x}-{span_id:016x}-{:02x}", u8::from(sampled))
}

/// A span id for the gateway's own spans: random, never zero. `fastrand` is a thread-local
/// generator (no syscall, no lock).
pub fn new_span_id() -> u64 {
    loop {
        let id = fastrand::u64(..);
        if id != 0 {
            return id;
        }
    }
}

pub fn new_trace_id() -> u128 {
    loop {
        let id = fastrand::u128(..);
        if id != 0 {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_valid_traceparent_is_continued() {
        let parent = parse_traceparent(&headers(&[("traceparent", GOOD)])).unwrap();
        assert_eq!(parent.trace_id, 0x0af7651916cd43dd8448eb211c80319c);
        assert_eq!(parent.span_id, 0xb7ad6b7169203331);
        assert!(parent.sampled);
        assert_eq!(format_traceparent(parent.trace_id, parent.span_id, true), GOOD);
        let unsampled = parse_traceparent(&headers(&[("traceparent", &GOOD.replace("-01", "-00"))])).unwrap();
        assert!(!unsampled.sampled);
    }

    #[test]
    fn anything_else_is_ignored() {
        let bad = [
            "",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
            "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",
            "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ];
        for value in bad {
            assert_eq!(parse_traceparent(&headers(&[("traceparent", value)])), None, "{value}");
        }
        assert_eq!(parse_traceparent(&headers(&[("traceparent", GOOD), ("traceparent", GOOD)])), None);
        assert_eq!(parse_traceparent(&headers(&[("traceparent", &"a".repeat(4096))])), None);
    }

    #[test]
    fn tracestate_is_bounded_or_dropped() {
        assert!(parse_tracestate(&headers(&[("tracestate", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")])).is_some());
        assert!(parse_tracestate(&headers(&[("tracestate", &format!("a={}", "x".repeat(600)))])).is_none());
        let many: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(parse_tracestate(&headers(&[("tracestate", &many.join(","))])).is_none());
        assert!(parse_tracestate(&headers(&[("tracestate", "novalue")])).is_none());
        assert!(parse_tracestate(&headers(&[("tracestate", "a=1"), ("tracestate", "b=2")])).is_none());
    }

    #[test]
    fn generated_ids_are_never_zero() {
        for _ in 0..1000 {
            assert_ne!(new_span_id(), 0);
            assert_ne!(new_trace_id(), 0);
        }
    }
}
