//! Finished spans as the request path hands them over: plain data, encoded to OTLP by the
//! exporter thread, never on the request path.

use std::sync::Arc;

/// OTLP `Span.SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(Arc<str>),
    Static(&'static str),
    Int(i64),
    Double(f64),
    Bool(bool),
}

impl From<&Arc<str>> for Value {
    fn from(v: &Arc<str>) -> Self {
        Value::Str(v.clone())
    }
}

impl From<&'static str> for Value {
    fn from(v: &'static str) -> Self {
        Value::Static(v)
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(Arc::from(v))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

pub type Attributes = Vec<(&'static str, Value)>;

#[derive(Debug, Clone)]
pub struct Event {
    pub name: &'static str,
    pub at_unix_nanos: u64,
    pub attributes: Attributes,
}

#[derive(Debug, Clone)]
pub struct Span {
    pub span_id: u64,
    /// 0: a root span (no parent).
    pub parent_span_id: u64,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub attributes: Attributes,
    pub events: Vec<Event>,
    /// OTLP status: `None` unset, `Some(message)` an error.
    pub error: Option<&'static str>,
}

/// One request's spans (its server span and the children), sharing a trace id.
#[derive(Debug, Clone)]
pub struct TraceRecord {
    pub trace_id: u128,
    pub trace_state: Option<Arc<str>>,
    pub spans: Vec<Span>,
}

/// How to keep spans: a ratio decided on the trace id (so every process that sees the trace
/// decides the same), and always for errors and for requests slower than `slow`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    pub ratio: f64,
    pub slow: std::time::Duration,
    /// Also keep what the client's `traceparent` marked sampled.
    pub parent_based: bool,
}

impl Sampler {
    /// The head decision, known when the request arrives (it is the `sampled` flag sent
    /// upstream): the trace id's low 56 bits (W3C's random part) against `ratio` of 2^56.
    ///
    /// A trace id the client chose (its `traceparent`) is not random to the client: one with
    /// low bits of zero would be kept every time, and a tenant could have every request traced
    /// past the operator's ratio. So for those the gateway draws the number itself (`client`),
    /// and the trace is kept beyond it only when the operator opted into `parent_based`.
    pub fn head(&self, trace_id: u128, client: Option<ClientTrace>) -> bool {
        const RANDOM_BITS: u32 = 56;
        let random = match client {
            Some(_) => fastrand::u64(..) & ((1u64 << RANDOM_BITS) - 1),
            None => (trace_id & ((1u128 << RANDOM_BITS) - 1)) as u64,
        };
        let client_sampled = client.is_some_and(|c| c.sampled);
        // Integers, not floats: 2^56 - 1 rounds up to 2^56 as an f64, and ratio 1 keeps all.
        let kept = self.ratio >= 1.0 || random < (self.ratio * (1u64 << RANDOM_BITS) as f64) as u64;
        kept || (self.parent_based && client_sampled)
    }

    /// The tail decision, at the end of the request. `fault` is a failure the operator must see
    /// (an upstream's, a timeout, an interrupted stream), never a refusal a client can cause at
    /// will (a bad key, a rate limit): those stay under the ratio, so a flood of them cannot
    /// crowd the traces of real faults out of the exporter's queue.
    pub fn keep(&self, head: bool, fault: bool, took: std::time::Duration) -> bool {
        head || fault || took >= self.slow
    }
}

/// What a client's `traceparent` said, for the head decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTrace {
    pub sampled: bool,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_ratio_is_deterministic_on_the_trace_id() {
        let sampler = Sampler { ratio: 0.25, slow: Duration::from_secs(5), parent_based: false };
        let mut kept = 0;
        for i in 0..10_000u128 {
            let id = i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) | 1;
            assert_eq!(sampler.head(id, None), sampler.head(id, None));
            kept += usize::from(sampler.head(id, None));
        }
        assert!((2_000..3_000).contains(&kept), "{kept}");
        let none = Sampler { ratio: 0.0, ..sampler };
        let all = Sampler { ratio: 1.0, ..sampler };
        assert!(!none.head(u128::MAX, None) && all.head(u128::MAX, None));
        let sampled = Some(ClientTrace { sampled: true });
        assert!(Sampler { parent_based: true, ..none }.head(5, sampled));
        assert!(!none.head(5, sampled), "a client's flag alone never keeps a trace");
    }

    #[test]
    fn a_client_chosen_trace_id_cannot_pick_its_own_sampling() {
        // Low bits of zero would be under any ratio if the id decided: the gateway draws instead.
        let sampler = Sampler { ratio: 0.1, slow: Duration::from_secs(5), parent_based: false };
        let chosen = 0xabcd_u128 << 64;
        assert!(sampler.head(chosen, None), "the id alone would be kept");
        let client = Some(ClientTrace { sampled: false });
        let kept = (0..10_000).filter(|_| sampler.head(chosen, client)).count();
        assert!((700..1_300).contains(&kept), "{kept} of 10000 kept at ratio 0.1");
    }

    #[test]
    fn errors_and_slow_requests_are_always_kept() {
        let sampler = Sampler { ratio: 0.0, slow: Duration::from_secs(2), parent_based: false };
        assert!(!sampler.keep(false, false, Duration::from_secs(1)));
        assert!(sampler.keep(false, true, Duration::ZERO));
        assert!(sampler.keep(false, false, Duration::from_secs(2)));
        assert!(sampler.keep(true, false, Duration::ZERO));
    }
}
