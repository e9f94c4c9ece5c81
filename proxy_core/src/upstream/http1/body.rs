//! A response body read straight from the upstream's connection by the task that relays it: no
//! connection task, no channel between them. The connection goes back to its pool the moment
//! the body's last byte is read (so `is_end_stream` is true with the last frame); a body dropped
//! before its end closes the connection, which cancels the upstream's work.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::net::TcpStream;

use super::head::Framing;
use super::idle::{IdlePool, Slot};
use crate::upstream::error::BodyError;

/// A read buffer starts this small (an open stream holds it) and doubles while reads fill it.
const INITIAL_READ: usize = 2 * 1024;
const MAX_READ: usize = 64 * 1024;
/// A chunk-size line (with its extensions) longer than this is refused.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Trailer fields longer than this in all are refused (they are read and dropped).
const MAX_TRAILERS: usize = 16 * 1024;

/// One upstream connection and what has been read from it but not yet consumed.
pub struct Conn {
    pub stream: TcpStream,
    pub buf: BytesMut,
    read_size: usize,
}

/// The most buffer an idle connection keeps (see `Conn::into_idle`).
const MAX_IDLE_BUFFER: usize = 2 * INITIAL_READ;

impl Conn {
    pub fn new(stream: TcpStream) -> Self {
        Self { stream, buf: BytesMut::with_capacity(INITIAL_READ), read_size: INITIAL_READ }
    }

    /// The connection as it waits in its pool. A buffer that stayed at the first read size is
    /// kept: the next exchange reads into what is left of it, or takes it back whole once the
    /// last answer's bytes are gone, with no allocation (a fresh buffer and its first split
    /// were two a request). One that grew for a large answer is let go, so an idle connection
    /// holds a few KiB at most.
    pub fn into_idle(mut self) -> Self {
        if self.read_size != INITIAL_READ || self.buf.capacity() > MAX_IDLE_BUFFER {
            self.buf = BytesMut::new();
            self.read_size = INITIAL_READ;
        }
        self
    }

    /// Read what the socket has into the buffer: the count, 0 at the upstream's end.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < self.read_size / 2 {
            self.buf.reserve(self.read_size);
        }
        loop {
            ready!(self.stream.poll_read_ready(cx))?;
            let spare = self.buf.capacity() - self.buf.len();
            match self.stream.try_read_buf(&mut self.buf) {
                Ok(read) => {
                    if read >= spare {
                        self.read_size = (self.read_size * 2).min(MAX_READ);
                    } else if read < self.read_size / 4 {
                        self.read_size = (self.read_size / 2).max(INITIAL_READ);
                    }
                    return Poll::Ready(Ok(read));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// Where a finished connection goes: its pool and stack, and whether it may carry another.
pub struct Home {
    pub pool: Arc<IdlePool>,
    pub slot: Slot,
    pub reusable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailers,
    End,
}

#[derive(Debug)]
enum Decoding {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

pub struct Http1Body {
    conn: Option<Conn>,
    home: Home,
    decoding: Decoding,
}

impl Http1Body {
    /// The body that follows a head already taken from `conn.buf`.
    pub fn new(conn: Conn, framing: Framing, home: Home) -> Self {
        let decoding = match framing {
            Framing::Length(length) => Decoding::Length(length),
            Framing::Chunked => Decoding::Chunked(Chunk::Size),
            Framing::UntilClose => Decoding::UntilClose,
        };
        let mut body = Self { conn: Some(conn), home, decoding };
        if matches!(body.decoding, Decoding::Length(0)) {
            body.finish();
        }
        body
    }

    /// The message ended: the connection goes home if nothing past the message was read.
    fn finish(&mut self) {
        self.decoding = Decoding::Done;
        if let Some(conn) = self.conn.take() {
            if self.home.reusable && conn.buf.is_empty() {
                self.home.pool.put(self.home.slot, conn.into_idle());
            }
        }
    }

    fn fail(&mut self, why: String) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.decoding = Decoding::Done;
        self.conn = None;
        Poll::Ready(Some(Err(BodyError(why))))
    }

    /// The next data already in the buffer, if any; the end is noticed as soon as it is read.
    fn take_buffered(&mut self) -> Result<Option<Bytes>, String> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(None);
        };
        let buf = &mut conn.buf;
        let (data, ended) = match &mut self.decoding {
            Decoding::Length(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let take = (*left).min(buf.len() as u64) as usize;
                *left -= take as u64;
                (Some(buf.split_to(take).freeze()), *left == 0)
            }
            Decoding::UntilClose => {
                if buf.is_empty() {
                    return Ok(None);
                }
                (Some(buf.split().freeze()), false)
            }
            Decoding::Chunked(state) => {
                let data = decode_chunked(state, buf)?;
                (data, *state == Chunk::End)
            }
            Decoding::Done => return Ok(None),
        };
        if ended {
            self.finish();
        }
        Ok(data)
    }
}

/// Decodes what `buf` holds of a chunked body: the next data, if any, after which it reads on
/// through the control bytes already there, so the last chunk's end is seen with its data.
fn decode_chunked(state: &mut Chunk, buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
    let mut data = None;
    loop {
        match *state {
            Chunk::Size => match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((used, size))) => {
                    buf.advance(used);
                    *state = if size == 0 { Chunk::Trailers } else { Chunk::Data(size) };
                }
                Ok(httparse::Status::Partial) if buf.len() > MAX_CHUNK_LINE => {
                    return Err("the upstream sent a chunk-size line that does not end".to_string());
                }
                Ok(httparse::Status::Partial) => return Ok(data),
                Err(_) => return Err("the upstream sent an invalid chunk size".to_string()),
            },
            Chunk::Data(left) => {
                if data.is_some() || buf.is_empty() {
                    return Ok(data);
                }
                let take = left.min(buf.len() as u64) as usize;
                data = Some(buf.split_to(take).freeze());
                *state = if left == take as u64 { Chunk::DataEnd } else { Chunk::Data(left - take as u64) };
            }
            Chunk::DataEnd => {
                if buf.len() < 2 {
                    return Ok(data);
                }
                if &buf[..2] != b"\r\n" {
                    return Err("the upstream's chunk did not end where its size said".to_string());
                }
                buf.advance(2);
                *state = Chunk::Size;
            }
            Chunk::Trailers => {
                if buf.starts_with(b"\r\n") {
                    buf.advance(2);
                    *state = Chunk::End;
                    continue;
                }
                match buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    Some(at) => {
                        buf.advance(at + 4);
                        *state = Chunk::End;
                    }
                    None if buf.len() > MAX_TRAILERS => {
                        return Err("the upstream's trailer fields are too long".to_string());
                    }
                    None => return Ok(data),
                }
            }
            Chunk::End => return Ok(data),
        }
    }
}

impl std::fmt::Debug for Http1Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1Body").field("decoding", &self.decoding).field("open", &self.conn.is_some()).finish()
    }
}

impl Body for Http1Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            match this.take_buffered() {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Ok(None) => {}
                Err(why) => return this.fail(why),
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(conn.poll_fill(cx)) {
                Ok(0) if matches!(this.decoding, Decoding::UntilClose) => {
                    this.decoding = Decoding::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(0) => return this.fail("the upstream closed the connection before the body ended".to_string()),
                Ok(_) => {}
                Err(e) => return this.fail(format!("reading the upstream's body failed: {e}")),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.decoding, Decoding::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoding {
            Decoding::Length(left) => SizeHint::with_exact(left),
            Decoding::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_idle_connection_keeps_a_small_read_buffer_and_lets_a_grown_one_go() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("address")).await.expect("connect");
        let conn = Conn::new(stream);
        let first = conn.buf.capacity();
        let mut conn = conn.into_idle();
        assert_eq!(conn.buf.capacity(), first, "the first read size's buffer is kept");
        conn.read_size = MAX_READ;
        conn.buf.reserve(MAX_READ);
        let conn = conn.into_idle();
        assert_eq!((conn.buf.capacity(), conn.read_size), (0, INITIAL_READ), "a grown one is let go");
    }

    fn decode_all(input: &[&[u8]]) -> Result<(Vec<u8>, Chunk), String> {
        let mut state = Chunk::Size;
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in input {
            buf.extend_from_slice(piece);
            while let Some(data) = decode_chunked(&mut state, &mut buf)? {
                out.extend_from_slice(&data);
            }
        }
        Ok((out, state))
    }

    #[test]
    fn chunks_decode_whatever_the_reads_split_them_into() {
        let whole: &[u8] = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
        let (out, state) = decode_all(&[whole]).expect("valid");
        assert_eq!((out.as_slice(), state), (&b"hello, world"[..], Chunk::End));
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        let (out, state) = decode_all(&bytes).expect("valid byte by byte");
        assert_eq!((out.as_slice(), state), (&b"hello, world"[..], Chunk::End));
        let (_, state) = decode_all(&[b"3\r\nabc\r\n0\r\n\r\n"]).expect("valid");
        assert_eq!(state, Chunk::End);
    }

    #[test]
    fn the_end_is_seen_with_the_last_data() {
        let mut state = Chunk::Size;
        let mut buf = BytesMut::from(&b"3\r\nabc\r\n0\r\n\r\n"[..]);
        assert_eq!(decode_chunked(&mut state, &mut buf).expect("valid"), Some(Bytes::from_static(b"abc")));
        assert_eq!(state, Chunk::End);
        assert!(buf.is_empty());
    }

    #[test]
    fn bad_chunks_are_refused() {
        assert!(decode_all(&[b"zz\r\n"]).is_err());
        assert!(decode_all(&[b"3\r\nabcd\r\n"]).is_err());
        assert!(decode_all(&[b"ffffffffffffffffff\r\n"]).is_err());
        let endless_line =
            vec![b'1'; 1].into_iter().chain(std::iter::repeat_n(b';', MAX_CHUNK_LINE + 1)).collect::<Vec<_>>();
        assert!(decode_all(&[&endless_line]).is_err());
        let mut endless_trailer = b"0\r\nx: ".to_vec();
        endless_trailer.extend(std::iter::repeat_n(b'a', MAX_TRAILERS + 1));
        assert!(decode_all(&[&endless_trailer]).is_err());
    }
}
