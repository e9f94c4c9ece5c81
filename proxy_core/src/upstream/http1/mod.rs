//! The gateway's own HTTP/1.1 client, for plain-HTTP members: the task that relays a request
//! writes it to a pooled connection and reads the answer itself. hyper's pooled client drives
//! each connection from a task of its own and hands heads and bodies across channels, and a
//! task per request waits to put the connection back; that hand-off was a quarter of the relay
//! floor's CPU per request (bench/README.md, 2026-12-07, evening).
//!
//! What it keeps of hyper's client: the address guard on every resolved address, the connect
//! timeout and timing, TCP_NODELAY and keep-alive, idle connections for 90 s, a request written
//! again on a fresh connection only when a reused one failed before the whole request was
//! written (the upstream cannot have read it), and RFC 9112's framing of the response.

mod body;
mod connect;
mod head;
mod idle;

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Request, Response, StatusCode};
use tokio::io::AsyncWriteExt;

pub use body::Http1Body;
use body::{Conn, Home};
use head::{parse_response_head, request_head, RequestHead};
use idle::{IdlePool, Slot};

use super::error::UpstreamError;
use super::reach::Reach;
use super::ConnectTiming;

pub struct Http1Client {
    reach: Reach,
    connect_timeout: Duration,
    pool: Arc<IdlePool>,
}

/// How one attempt on one connection ended without an answer.
enum Failure {
    /// The request was not wholly written: the upstream cannot have acted on it.
    NotSent(std::io::Error),
    Failed(UpstreamError),
}

impl Failure {
    fn into_error(self) -> UpstreamError {
        match self {
            Failure::NotSent(e) => UpstreamError::Exchange(format!("writing the request failed: {e}")),
            Failure::Failed(e) => e,
        }
    }
}

impl Http1Client {
    pub(super) fn new(reach: Reach, connect_timeout: Duration) -> Self {
        Self { reach, connect_timeout, pool: Arc::default() }
    }

    pub fn send(
        &self,
        request: Request<Bytes>,
    ) -> impl Future<Output = Result<Response<Http1Body>, UpstreamError>> + '_ {
        // The head is written before the future is made: the future keeps it and the authority,
        // not the request (a future is copied whole at each move, and this one sits in every
        // plain-HTTP request's).
        let (parts, body) = request.into_parts();
        let target =
            parts.uri.authority().map(|authority| (request_head(&parts, authority.as_str(), body), authority.clone()));
        async move {
            let Some((head, authority)) = target else {
                return Err(UpstreamError::Exchange("the upstream URL names no host".to_string()));
            };
            let slot = self.pool.slot(authority.as_str());
            while let Some(conn) = self.pool.take(slot) {
                match self.exchange(conn, &head, None, slot).await {
                    Ok(response) => return Ok(response),
                    // The upstream closed it as it was handed out: try the next, or a fresh one.
                    Err(Failure::NotSent(_)) => continue,
                    Err(failure) => return Err(failure.into_error()),
                }
            }
            // Boxed: the resolver's and connector's futures are large, and most requests skip them.
            let port = authority.port_u16().unwrap_or(80);
            let (stream, timing) =
                Box::pin(connect::connect(authority.host(), port, &self.reach, self.connect_timeout)).await?;
            self.exchange(Conn::new(stream), &head, Some(timing), slot).await.map_err(Failure::into_error)
        }
    }

    async fn exchange(
        &self,
        mut conn: Conn,
        request: &RequestHead,
        timing: Option<ConnectTiming>,
        slot: Slot,
    ) -> Result<Response<Http1Body>, Failure> {
        conn.stream.write_all(&request.bytes).await.map_err(Failure::NotSent)?;
        if !request.rest.is_empty() {
            conn.stream.write_all(&request.rest).await.map_err(Failure::NotSent)?;
        }
        loop {
            let read = poll_fn(|cx| conn.poll_fill(cx))
                .await
                .map_err(|e| Failure::Failed(UpstreamError::Exchange(format!("reading the response failed: {e}"))))?;
            if read == 0 {
                let why = "the upstream closed the connection before answering";
                return Err(Failure::Failed(UpstreamError::Exchange(why.to_string())));
            }
            // Informational answers (103 Early Hints, a stray 100) are read past.
            while let Some(head) =
                parse_response_head(&conn.buf).map_err(|why| Failure::Failed(UpstreamError::Exchange(why)))?
            {
                conn.buf.advance(head.len);
                if head.status == StatusCode::SWITCHING_PROTOCOLS {
                    let why = "the upstream switched protocols unasked";
                    return Err(Failure::Failed(UpstreamError::Exchange(why.to_string())));
                }
                if head.status.is_informational() {
                    continue;
                }
                let home = Home { pool: self.pool.clone(), slot, reusable: head.reusable };
                let mut response = Response::new(Http1Body::new(conn, head.framing, home));
                *response.status_mut() = head.status;
                *response.version_mut() = head.version;
                *response.headers_mut() = head.headers;
                if let Some(timing) = timing {
                    response.extensions_mut().insert(timing);
                }
                return Ok(response);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body::Body as _;
    use http_body_util::BodyExt;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::upstream::AddressGuard;

    fn client(port: u16) -> Http1Client {
        Http1Client::new(Reach { guard: AddressGuard::new(), port, internal: true }, Duration::from_secs(2))
    }

    fn post(port: u16, body: &'static str) -> Request<Bytes> {
        let mut request = Request::new(Bytes::from_static(body.as_bytes()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = format!("http://127.0.0.1:{port}/v1/chat/completions").parse().expect("uri");
        request
    }

    /// Reads one request head and its `content-length` body; `None` at the client's end.
    async fn read_request(stream: &mut TcpStream) -> Option<String> {
        let mut seen = Vec::new();
        loop {
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await.ok()?;
            if read == 0 {
                return None;
            }
            seen.extend_from_slice(&chunk[..read]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if seen.len() >= end + 4 + length {
                    return Some(text);
                }
            }
        }
    }

    /// An upstream that answers each request with `answer`, counting its connections; with
    /// `close_after_one` it closes each connection after one answer, saying nothing.
    async fn upstream(answer: &'static str, close_after_one: bool) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    while read_request(&mut stream).await.is_some() {
                        if stream.write_all(answer.as_bytes()).await.is_err() || close_after_one {
                            return;
                        }
                    }
                });
            }
        });
        (port, accepted)
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

    #[tokio::test]
    async fn a_connection_is_reused_once_its_body_is_read_and_stamped_only_when_new() {
        let (port, accepted) = upstream(OK, false).await;
        let client = client(port);
        for round in 0..3 {
            let response = client.send(post(port, "{\"a\":1}")).await.expect("answer");
            assert_eq!(response.status(), 200);
            assert_eq!(response.extensions().get::<ConnectTiming>().is_some(), round == 0);
            let mut body = response.into_body();
            let data = body.frame().await.expect("a frame").expect("data").into_data().expect("data");
            assert_eq!(&data[..], b"{}");
            // The end is seen with the last frame, and the connection is back for the next round.
            assert!(body.is_end_stream());
            assert_eq!(client.pool.idle_count(), 1);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(client.pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_while_idle_is_not_written_to() {
        let (port, accepted) = upstream(OK, true).await;
        let client = client(port);
        for _ in 0..3 {
            let response = client.send(post(port, "{}")).await.expect("answer");
            response.into_body().collect().await.expect("body");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_chunked_stream_arrives_chunk_by_chunk_and_its_connection_goes_back() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            read_request(&mut stream).await.expect("request");
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            stream.write_all(format!("{head}6\r\ndata: \r\n").as_bytes()).await.expect("write");
            released.await.expect("released");
            stream.write_all(b"2\r\n1\n\r\n0\r\n\r\n").await.expect("write");
            // Kept open: the connection is pooled, not closed.
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let client = client(port);
        let response = client.send(post(port, "{}")).await.expect("answer");
        let mut body = response.into_body();
        let first = body.frame().await.expect("a frame").expect("data").into_data().expect("data");
        assert_eq!(&first[..], b"data: ");
        assert!(!body.is_end_stream());
        release.send(()).expect("release");
        let second = body.frame().await.expect("a frame").expect("data").into_data().expect("data");
        assert_eq!(&second[..], b"1\n");
        assert!(body.is_end_stream());
        assert_eq!(client.pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn failures_say_whether_a_connection_was_made() {
        // Nothing listens on a port just freed.
        let free = TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("address").port();
        let error = client(free).send(post(free, "{}")).await.expect_err("refused");
        assert!(matches!(error, UpstreamError::Connect { timed_out: false, .. }), "{error}");
        // The address guard refuses the gateway's own listener.
        let guard = AddressGuard::new();
        guard.add_listeners(&["127.0.0.1:9".parse().expect("address")]);
        let guarded = Http1Client::new(Reach { guard, port: 9, internal: true }, Duration::from_secs(1));
        let error = guarded.send(post(9, "{}")).await.expect_err("refused by the guard");
        assert!(error.to_string().contains("own listener"), "{error}");
        // An upstream that hangs up without answering.
        let (port, _) = upstream("", true).await;
        let error = client(port).send(post(port, "{}")).await.expect_err("no answer");
        assert!(matches!(error, UpstreamError::Exchange(_)), "{error}");
        // One that breaks HTTP.
        let (port, _) = upstream("SMTP ready\r\n\r\n", true).await;
        let error = client(port).send(post(port, "{}")).await.expect_err("not HTTP");
        assert!(error.to_string().contains("malformed"), "{error}");
    }

    #[tokio::test]
    async fn a_body_cut_short_fails_and_a_body_dropped_early_closes_its_connection() {
        let (port, _) = upstream("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", true).await;
        let client = client(port);
        let response = client.send(post(port, "{}")).await.expect("answer");
        let error = response.into_body().collect().await.expect_err("cut short");
        assert!(error.to_string().contains("before the body ended"), "{error}");
        assert_eq!(client.pool.idle_count(), 0);

        let (port, accepted) = upstream("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", false).await;
        let client = self::client(port);
        let response = client.send(post(port, "{}")).await.expect("answer");
        drop(response);
        assert_eq!(client.pool.idle_count(), 0);
        let _ = client.send(post(port, "{}")).await.expect("answer");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn informational_answers_are_read_past_and_a_close_delimited_body_reads_to_the_end() {
        let answer = "HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.0 200 OK\r\n\r\nall of it";
        let (port, _) = upstream(answer, true).await;
        let client = client(port);
        let response = client.send(post(port, "{}")).await.expect("answer");
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&body[..], b"all of it");
        assert_eq!(client.pool.idle_count(), 0);
    }
}
