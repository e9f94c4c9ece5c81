//! Server-sent event framing: where an event ends, and its `event:` name and `data:` payload.

use std::borrow::Cow;

/// Length of the first complete event in `buf` including its blank-line terminator. Only a line
/// break can end one, so the search jumps from one to the next (SIMD), not byte by byte.
pub fn event_end(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = memchr::memchr2(b'\n', b'\r', &buf[from..]) {
        let i = from + found;
        match buf[i] {
            b'\n' => match buf.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            },
            _ if buf.get(i + 1) == Some(&b'\r') => return Some(i + 2),
            _ => {}
        }
        from = i + 1;
    }
    None
}

#[derive(Debug, Default)]
pub struct Event<'a> {
    pub name: Option<&'a [u8]>,
    pub data: Option<Cow<'a, [u8]>>,
}

fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(name)?.strip_prefix(b":")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

/// The `\n`-separated lines of `raw` (as `split` makes them), found with SIMD.
fn lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    let breaks = memchr::memchr_iter(b'\n', raw).chain(std::iter::once(raw.len()));
    breaks.map(move |end| {
        let line = &raw[start..end];
        start = end + 1;
        line
    })
}

/// Parse one complete event (as delimited by `event_end`).
pub fn parse_event(raw: &[u8]) -> Event<'_> {
    let mut event = Event::default();
    for line in lines(raw) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(value) = field(line, b"data") {
            event.data = Some(match event.data.take() {
                None => Cow::Borrowed(value),
                Some(prev) => {
                    let mut joined = prev.into_owned();
                    joined.push(b'\n');
                    joined.extend_from_slice(value);
                    Cow::Owned(joined)
                }
            });
        } else if let Some(value) = field(line, b"event") {
            event.name = Some(value);
        }
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_with_any_blank_line_style() {
        assert_eq!(event_end(b"data: a\n\ndata: b"), Some(9));
        assert_eq!(event_end(b"data: a\r\n\r\nx"), Some(11));
        assert_eq!(event_end(b"data: a\n"), None);
        assert_eq!(event_end(b"data: a\r\rx"), Some(9));
    }

    /// The search by line breaks finds what a byte-by-byte scan finds, for any mix of them.
    #[test]
    fn ends_where_a_byte_by_byte_scan_ends() {
        fn scan(buf: &[u8]) -> Option<usize> {
            (0..buf.len()).find_map(|i| match (buf[i], buf.get(i + 1), buf.get(i + 2)) {
                (b'\n', Some(b'\n'), _) => Some(i + 2),
                (b'\n', Some(b'\r'), Some(b'\n')) => Some(i + 3),
                (b'\r', Some(b'\r'), _) => Some(i + 2),
                _ => None,
            })
        }
        let alphabet = [b'a', b'\n', b'\r'];
        for n in 0..8 * 3u32.pow(7) {
            // Every string of up to 7 of these bytes (base 3 digits of n, then its length).
            let len = (n % 8) as usize;
            let buf: Vec<u8> = (0..len).map(|k| alphabet[(n / 8 / 3u32.pow(k as u32) % 3) as usize]).collect();
            assert_eq!(event_end(&buf), scan(&buf), "{buf:?}");
            let split: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
            assert_eq!(lines(&buf).collect::<Vec<_>>(), split, "{buf:?}");
        }
    }

    #[test]
    fn multi_line_data_is_joined() {
        let e = parse_event(b"event: message_delta\ndata: {\"a\":\ndata: 1}\n\n");
        assert_eq!(e.name, Some(&b"message_delta"[..]));
        assert_eq!(e.data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        assert!(parse_event(b": keep-alive\n\n").data.is_none());
    }
}
