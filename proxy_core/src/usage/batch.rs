//! A drained batch of usage events as the control plane takes it: one JSON array, written
//! straight into the buffer the caller hands over (the Python `bytes` object the drainer gets),
//! so that no intermediate buffer of the whole batch is allocated, copied and checked again.
//! A batch is megabytes at saturation: a fresh buffer of that size per batch cost page faults
//! (and the kernel zeroing huge pages) on every drain, and a `str` a UTF-8 check and one more copy.
//!
//! Events are separated by `,` and a newline. JSON never holds a raw newline inside a string, so
//! the control plane can cut the batch between events without parsing it: PostgreSQL's writer
//! stores a batch in slices beside live traffic (`control/usage/writer.py`).

use bytes::Bytes;

/// Between two events of a batch (`BETWEEN_EVENTS` in `control/usage/events.py`).
pub const BETWEEN_EVENTS: &[u8] = b",\n";

/// Events in the order drained, each one JSON object.
pub struct DrainedBatch(Vec<Bytes>);

impl DrainedBatch {
    pub fn new(events: Vec<Bytes>) -> Self {
        Self(events)
    }

    /// The length of the JSON array: brackets, the events and the separators between them.
    pub fn json_len(&self) -> usize {
        2 + self.0.iter().map(Bytes::len).sum::<usize>() + BETWEEN_EVENTS.len() * self.0.len().saturating_sub(1)
    }

    /// Write the JSON array into `out`, which is `json_len()` bytes long.
    pub fn write_json(&self, out: &mut [u8]) {
        let mut at = 0;
        let mut put = |part: &[u8]| {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        };
        put(b"[");
        for (i, event) in self.0.iter().enumerate() {
            if i > 0 {
                put(BETWEEN_EVENTS);
            }
            put(event);
        }
        put(b"]");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl DrainedBatch {
        fn to_json(&self) -> Vec<u8> {
            let mut out = vec![0; self.json_len()];
            self.write_json(&mut out);
            out
        }
    }

    #[test]
    fn an_empty_batch_is_an_empty_array() {
        assert_eq!(DrainedBatch::new(Vec::new()).to_json(), b"[]");
    }

    #[test]
    fn events_are_joined_in_order_by_a_comma_and_a_newline() {
        let batch = DrainedBatch::new(vec![
            Bytes::from_static(br#"{"seq":1}"#),
            Bytes::from_static(br#"{"seq":2,"model":"\u00e9"}"#),
        ]);
        assert_eq!(batch.json_len(), batch.to_json().len());
        assert_eq!(batch.to_json(), b"[{\"seq\":1},\n{\"seq\":2,\"model\":\"\\u00e9\"}]".as_slice());
    }
}
