//! The two heads of an HTTP/1.1 exchange: the request's, written from a checked `http` request
//! (its names and values cannot hold a line break, so nothing a client sent can start a header
//! of its own), and the response's, parsed with `httparse` into its status, the headers a client
//! may see (`headers::client_may_see`) and the framing of the body that follows (RFC 9112
//! section 6).

use std::io::Write as _;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{StatusCode, Version};

use crate::upstream::headers::client_may_see;

/// At most this many response header fields (hyper's own default).
const MAX_HEADERS: usize = 100;
/// A response head longer than this is refused: the buffer it sits in is the gateway's memory.
pub const MAX_HEAD: usize = 64 * 1024;
/// A body up to this size goes out in the head's buffer, in one write.
const INLINE_BODY: usize = 64 * 1024;

/// The request's head, and its body when small enough to share the head's write.
pub struct RequestHead {
    pub bytes: Vec<u8>,
    /// The body still to write after `bytes` (empty when it was inlined).
    pub rest: Bytes,
}

/// Headers the client writes itself from the request's framing, whatever the map holds.
fn framing_header(name: &HeaderName) -> bool {
    name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
        || name == header::CONNECTION
        || name == header::UPGRADE
        || name == header::TE
}

pub fn request_head(parts: &Parts, authority: &str, body: Bytes) -> RequestHead {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let inline = body.len() <= INLINE_BODY;
    let mut bytes = Vec::with_capacity(256 + parts.headers.len() * 48 + if inline { body.len() } else { 0 });
    bytes.extend_from_slice(parts.method.as_str().as_bytes());
    bytes.push(b' ');
    bytes.extend_from_slice(path.as_bytes());
    bytes.extend_from_slice(b" HTTP/1.1\r\n");
    if !parts.headers.contains_key(header::HOST) {
        bytes.extend_from_slice(b"host: ");
        bytes.extend_from_slice(authority.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    for (name, value) in &parts.headers {
        if framing_header(name) {
            continue;
        }
        bytes.extend_from_slice(name.as_str().as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    // A body-less GET says nothing of a length, as hyper's client does not.
    if !body.is_empty() || !matches!(parts.method, http::Method::GET | http::Method::HEAD) {
        // Writing into a `Vec` cannot fail.
        let _ = write!(bytes, "content-length: {}\r\n", body.len());
    }
    bytes.extend_from_slice(b"\r\n");
    if inline {
        bytes.extend_from_slice(&body);
        return RequestHead { bytes, rest: Bytes::new() };
    }
    RequestHead { bytes, rest: body }
}

/// How the response's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection (which then cannot be used again).
    UntilClose,
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The connection may carry another request once this body has been read to its end.
    pub reusable: bool,
    /// The head's length in the buffer.
    pub len: usize,
}

/// The response head at the start of `buf`; `None` while it is incomplete; an error naming what
/// is wrong with it.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<ResponseHead>, String> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(format!("the upstream's response head is longer than {MAX_HEAD} bytes"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("the upstream sent a malformed response head ({e})")),
    };
    let status = parsed
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(|| "the upstream sent a response without a valid status".to_string())?;
    let http10 = parsed.version == Some(0);
    let mut headers = HeaderMap::new();
    let mut length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked = false;
    let mut close = false;
    let mut keep_alive = false;
    for field in parsed.headers.iter() {
        let raw = field.name.as_bytes();
        if raw.eq_ignore_ascii_case(b"content-length") {
            for part in field.value.split(|b| *b == b',') {
                let parsed = std::str::from_utf8(part)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| "the upstream sent an invalid content-length".to_string())?;
                if length.is_some_and(|l| l != parsed) {
                    return Err("the upstream sent conflicting content-lengths".to_string());
                }
                length = Some(parsed);
            }
        } else if raw.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // Only the last coding decides whether the body is chunked.
            chunked = last_token(field.value).is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
        } else if raw.eq_ignore_ascii_case(b"connection") {
            for token in field.value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        // The head keeps what a client may see (the relay's reads are among it); the framing
        // fields above are read here, the rest not at all: no name or value is made of them.
        if let Some(name) = client_may_see(raw) {
            let value = HeaderValue::from_bytes(field.value)
                .map_err(|_| format!("the upstream sent an invalid value for {name}"))?;
            headers.append(name, value);
        }
    }
    let mut reusable = !close && (!http10 || keep_alive);
    let framing = if status.is_informational() || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED
    {
        Framing::Length(0)
    } else if transfer_encoding {
        // With both, the transfer coding wins and the message cannot be trusted to end where
        // the length says: the connection is not used again (RFC 9112 section 6.3).
        if length.is_some() {
            reusable = false;
        }
        if chunked {
            Framing::Chunked
        } else {
            reusable = false;
            Framing::UntilClose
        }
    } else if let Some(length) = length {
        Framing::Length(length)
    } else {
        reusable = false;
        Framing::UntilClose
    };
    let version = if http10 { Version::HTTP_10 } else { Version::HTTP_11 };
    Ok(Some(ResponseHead { status, version, headers, framing, reusable, len }))
}

fn last_token(value: &[u8]) -> Option<&[u8]> {
    value.split(|b| *b == b',').map(<[u8]>::trim_ascii).rfind(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> ResponseHead {
        parse_response_head(text.as_bytes()).expect("valid").expect("complete")
    }

    #[test]
    fn the_response_head_keeps_what_a_client_may_see_and_reads_the_framing() {
        let h = head(
            "HTTP/1.1 429 Too Many Requests\r\nServer: vllm-7.corp\r\nContent-Type: application/json\r\n\
             X-Ratelimit-Remaining-Tokens: 0\r\nRetry-After: 2\r\nSet-Cookie: a=b\r\nConnection: close\r\n\
             Content-Length: 2\r\n\r\n{}",
        );
        let names: Vec<&str> = h.headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["content-type", "retry-after", "content-length"]);
        assert_eq!(h.headers["retry-after"], "2");
        assert_eq!(h.framing, Framing::Length(2));
        assert!(!h.reusable, "connection: close is read though the header is not kept");
    }

    #[test]
    fn a_request_head_carries_the_authority_the_headers_and_the_length() {
        let request = http::Request::builder()
            .method("POST")
            .uri("http://10.0.0.1:8000/v1/chat/completions?x=1")
            .header("content-type", "application/json")
            .header("content-length", "999")
            .header("connection", "upgrade")
            .body(())
            .expect("request");
        let (parts, ()) = request.into_parts();
        let head = request_head(&parts, "10.0.0.1:8000", Bytes::from_static(b"{}"));
        assert_eq!(
            String::from_utf8(head.bytes).expect("text"),
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 10.0.0.1:8000\r\ncontent-type: application/json\r\n\
             content-length: 2\r\n\r\n{}"
        );
        assert!(head.rest.is_empty());
    }

    #[test]
    fn a_large_body_is_written_after_the_head_and_a_bodyless_get_has_no_length() {
        let (parts, ()) = http::Request::builder().uri("http://h/x").body(()).expect("request").into_parts();
        let big = Bytes::from(vec![b'a'; INLINE_BODY + 1]);
        let head = request_head(&parts, "h", big.clone());
        assert!(String::from_utf8_lossy(&head.bytes).ends_with(&format!("content-length: {}\r\n\r\n", big.len())));
        assert_eq!(head.rest, big);
        let get = request_head(&parts, "h", Bytes::new());
        assert_eq!(String::from_utf8(get.bytes).expect("text"), "GET /x HTTP/1.1\r\nhost: h\r\n\r\n");
    }

    #[test]
    fn the_framing_follows_rfc_9112() {
        let length = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
        assert_eq!((length.framing, length.reusable), (Framing::Length(12), true));
        let chunked = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!((chunked.framing, chunked.reusable), (Framing::Chunked, true));
        let both = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n");
        assert_eq!((both.framing, both.reusable), (Framing::Chunked, false));
        let not_chunked = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
        assert_eq!((not_chunked.framing, not_chunked.reusable), (Framing::UntilClose, false));
        let neither = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((neither.framing, neither.reusable), (Framing::UntilClose, false));
        let no_content = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!((no_content.framing, no_content.reusable), (Framing::Length(0), true));
        let close = head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert!(!close.reusable);
        let old = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(!old.reusable);
        let old_kept = head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n");
        assert!(old_kept.reusable);
        let same_twice = head("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n");
        assert_eq!(same_twice.framing, Framing::Length(3));
    }

    #[test]
    fn a_bad_head_is_refused_with_a_reason_and_a_partial_one_waits() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "HTTX/1.1 200 OK\r\n\r\n",
        ] {
            assert!(parse_response_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Le").expect("partial").is_none());
        let endless = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD));
        assert!(parse_response_head(endless.as_bytes()).expect_err("too long").contains("longer than"));
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x: y\r\n".repeat(MAX_HEADERS + 1));
        assert!(parse_response_head(many.as_bytes()).is_err());
    }
}
