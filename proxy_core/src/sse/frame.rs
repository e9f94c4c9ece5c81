//! Server-sent event framing: where an event ends, and its `event:` name and `data:` payload.

use std::borrow::Cow;

/// Length of the first complete event in `buf` including its blank-line terminator.
pub fn event_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < buf.len() {
        match buf[i] {
            b'\n' => match buf.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            },
            b'\r' if buf.get(i + 1) == Some(&b'\r') => return Some(i + 2),
            _ => {}
        }
        i += 1;
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

/// Parse one complete event (as delimited by `event_end`).
pub fn parse_event(raw: &[u8]) -> Event<'_> {
    let mut event = Event::default();
    for line in raw.split(|b| *b == b'\n') {
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

    #[test]
    fn multi_line_data_is_joined() {
        let e = parse_event(b"event: message_delta\ndata: {\"a\":\ndata: 1}\n\n");
        assert_eq!(e.name, Some(&b"message_delta"[..]));
        assert_eq!(e.data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        assert!(parse_event(b": keep-alive\n\n").data.is_none());
    }
}
