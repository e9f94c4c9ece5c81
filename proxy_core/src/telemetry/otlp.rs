//! OTLP/HTTP protobuf encoding of `ExportTraceServiceRequest`, written by hand: the few
//! messages and field numbers of `opentelemetry/proto/trace/v1/trace.proto` (and `common`,
//! `resource`) that spans need, so the data plane carries no protobuf toolchain. The test suite
//! decodes it with the official generated classes (`opentelemetry-proto`).

use super::span::{Event, Span, TraceRecord, Value};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A nested message, written in place: room for the longest length prefix is left, the message
/// written after it, then the prefix filled in and the message moved up to meet it (one move
/// per level of nesting instead of a buffer per message).
fn message(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    const ROOM: usize = 5;
    tag(out, field, LEN);
    let start = out.len();
    out.extend_from_slice(&[0; ROOM]);
    write(out);
    let len = out.len() - start - ROOM;
    let (mut prefix, mut n, mut v) = ([0u8; ROOM], 0, len);
    loop {
        prefix[n] = (v as u8 & 0x7f) | if v >= 0x80 { 0x80 } else { 0 };
        n += 1;
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    out.copy_within(start + ROOM.., start + n);
    out.truncate(start + n + len);
    out[start..start + n].copy_from_slice(&prefix[..n]);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `AnyValue`: 1 string, 2 bool, 3 int64, 4 double.
fn any_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(s) => bytes_field(out, 1, s.as_bytes()),
        Value::Static(s) => bytes_field(out, 1, s.as_bytes()),
        Value::Bool(b) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*b));
        }
        Value::Int(i) => {
            tag(out, 3, VARINT);
            varint(out, *i as u64);
        }
        Value::Double(d) => {
            tag(out, 4, FIXED64);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
}

/// `KeyValue`: 1 key, 2 value.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    message(out, field, |kv| {
        bytes_field(kv, 1, key.as_bytes());
        message(kv, 2, |v| any_value(v, value));
    });
}

/// `Span.Event`: 1 time_unix_nano, 2 name, 3 attributes.
fn event(out: &mut Vec<u8>, e: &Event) {
    message(out, 11, |m| {
        fixed64(m, 1, e.at_unix_nanos);
        bytes_field(m, 2, e.name.as_bytes());
        for (k, v) in &e.attributes {
            key_value(m, 3, k, v);
        }
    });
}

/// `Span`: 1 trace_id, 2 span_id, 3 trace_state, 4 parent_span_id, 5 name, 6 kind,
/// 7 start_time_unix_nano, 8 end_time_unix_nano, 9 attributes, 11 events, 15 status, 16 flags.
fn span(out: &mut Vec<u8>, trace_id: u128, trace_state: Option<&str>, s: &Span) {
    message(out, 2, |m| {
        bytes_field(m, 1, &trace_id.to_be_bytes());
        bytes_field(m, 2, &s.span_id.to_be_bytes());
        if let Some(state) = trace_state {
            bytes_field(m, 3, state.as_bytes());
        }
        if s.parent_span_id != 0 {
            bytes_field(m, 4, &s.parent_span_id.to_be_bytes());
        }
        bytes_field(m, 5, s.name.as_bytes());
        tag(m, 6, VARINT);
        varint(m, s.kind as u64);
        fixed64(m, 7, s.start_unix_nanos);
        fixed64(m, 8, s.end_unix_nanos.max(s.start_unix_nanos));
        for (k, v) in &s.attributes {
            key_value(m, 9, k, v);
        }
        for e in &s.events {
            event(m, e);
        }
        // Status: 2 message, 3 code (2 = error); unset status is left out.
        if let Some(text) = s.error {
            message(m, 15, |st| {
                bytes_field(st, 2, text.as_bytes());
                tag(st, 3, VARINT);
                varint(st, 2);
            });
        }
        // Flags: the sampled bit, "whether the parent is remote is known" (0x100), and "the
        // parent is remote" (0x200): only the server span's parent (the client's) is.
        tag(m, 16, FIXED32);
        let remote = if s.parent_span_id != 0 && s.kind == super::span::SpanKind::Server { 0x200 } else { 0 };
        m.extend_from_slice(&(0x01u32 | 0x100 | remote).to_le_bytes());
    });
}

/// The whole request body: one `ResourceSpans` (this process) with one `ScopeSpans`.
pub fn encode(resource: &[(&'static str, Value)], records: &[TraceRecord]) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 * records.len() + 256);
    message(&mut out, 1, |rs| {
        message(rs, 1, |r| {
            for (k, v) in resource {
                key_value(r, 1, k, v);
            }
        });
        message(rs, 2, |ss| {
            message(ss, 1, |scope| {
                bytes_field(scope, 1, b"sluicegate");
                bytes_field(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for record in records {
                for s in &record.spans {
                    span(ss, record.trace_id, record.trace_state.as_deref(), s);
                }
            }
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_tags_follow_protobuf() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        let mut out = Vec::new();
        tag(&mut out, 16, FIXED32);
        assert_eq!(out, [0x85, 0x01]);
        let mut out = Vec::new();
        any_value(&mut out, &Value::Int(-1));
        assert_eq!(out.len(), 11, "negative int64 is ten varint bytes after its tag");
    }

    #[test]
    fn nested_messages_get_exact_length_prefixes() {
        for len in [0usize, 1, 127, 128, 300, 20_000] {
            let mut out = Vec::new();
            message(&mut out, 1, |m| m.extend(std::iter::repeat_n(7u8, len)));
            let mut expected = vec![0x0a];
            varint(&mut expected, len as u64);
            expected.extend(std::iter::repeat_n(7u8, len));
            assert_eq!(out, expected, "{len}");
        }
    }

    #[test]
    fn a_span_encodes_its_ids_big_endian() {
        let record = TraceRecord {
            trace_id: 0x0102,
            trace_state: None,
            spans: vec![Span {
                span_id: 0x0a0b,
                parent_span_id: 0,
                name: "chat m".into(),
                kind: super::super::span::SpanKind::Server,
                start_unix_nanos: 1,
                end_unix_nanos: 2,
                attributes: vec![("k", Value::Static("v"))],
                events: Vec::new(),
                error: None,
            }],
        };
        let body = encode(&[("service.name", Value::Static("sluicegate"))], &[record]);
        let trace_id = 0x0102u128.to_be_bytes();
        assert!(body.windows(18).any(|w| w[0] == 0x0a && w[1] == 16 && w[2..] == trace_id));
        assert!(body.windows(6).any(|w| w == b"chat m"));
    }
}
