//! The floor under the data plane's throughput: an HTTP/1 relay built from the same libraries as
//! the gateway's request path (tokio, hyper's server with HTTP/1-or-2 detection, hyper_util's
//! pooled client) and nothing else: no key check, no routing, limits, metering, usage event or
//! metrics. `python -m bench.floor` runs it beside nginx and the data plane, so that the gap to
//! nginx splits into what these libraries cost and what the gateway's own work adds.
//!
//! `floor-relay LISTEN UPSTREAM [--current-thread] [--own-client]`: relays every request to
//! `UPSTREAM` (`host:port`, plain HTTP/1.1) as it came, path and headers included, on one worker
//! thread (the gateway's `core.workers = 1`), or on tokio's single-threaded scheduler. With
//! `--own-client` the upstream exchange is written by hand in the request's own task (a pooled
//! connection, the head written, the answer parsed with `httparse`, a `content-length` body
//! read whole) instead of through hyper_util's client, whose connection task and channels it
//! measures: the gateway's plain-HTTP client works this way since 2026-12-07 (`upstream/http1`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Upstream = Client<HttpConnector, Incoming>;
type Answer = Response<BoxBody<Bytes, hyper::Error>>;

fn usage() -> ! {
    eprintln!("usage: floor-relay LISTEN UPSTREAM [--current-thread] [--own-client]");
    std::process::exit(2)
}

async fn relay(client: Upstream, upstream: &'static str, mut request: Request<Incoming>) -> Result<Answer, Infallible> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("http://{upstream}{path}").parse::<Uri>() else {
        return Ok(refusal(StatusCode::BAD_REQUEST));
    };
    *request.uri_mut() = uri;
    match client.request(request).await {
        Ok(response) => Ok(response.map(BodyExt::boxed)),
        Err(_) => Ok(refusal(StatusCode::BAD_GATEWAY)),
    }
}

/// Idle upstream connections of the hand-written HTTP/1 client.
type Idle = Arc<Mutex<Vec<TcpStream>>>;

/// One exchange on a pooled (or new) connection; a connection goes back once its answer's
/// `content-length` bytes are read. Enough HTTP for the instant upstream, no more.
async fn own_exchange(
    idle: &Idle,
    upstream: &str,
    request: Request<Incoming>,
) -> std::io::Result<Response<Full<Bytes>>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map_err(std::io::Error::other)?.to_bytes();
    let mut head = Vec::with_capacity(512 + body.len());
    head.extend_from_slice(parts.method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(parts.uri.path_and_query().map_or("/", |p| p.as_str()).as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    head.extend_from_slice(upstream.as_bytes());
    head.extend_from_slice(b"\r\n");
    for (name, value) in &parts.headers {
        if name == http::header::HOST || name == http::header::CONTENT_LENGTH || name == http::header::CONNECTION {
            continue;
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    head.extend_from_slice(&body);
    let pooled = idle.lock().map_err(|_| std::io::Error::other("poisoned"))?.pop();
    let mut conn = match pooled {
        Some(conn) => conn,
        None => {
            let conn = TcpStream::connect(upstream).await?;
            conn.set_nodelay(true)?;
            conn
        }
    };
    conn.write_all(&head).await?;
    let mut buf = bytes::BytesMut::with_capacity(4096);
    loop {
        if conn.read_buf(&mut buf).await? == 0 {
            return Err(std::io::Error::other("closed"));
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(len) = parsed.parse(&buf).map_err(std::io::Error::other)? else { continue };
        let mut answer = Response::builder().status(parsed.code.unwrap_or(502));
        let mut length = 0usize;
        for h in parsed.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(h.value).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            } else if !h.name.eq_ignore_ascii_case("connection") {
                answer = answer.header(h.name, h.value);
            }
        }
        let _ = buf.split_to(len);
        while buf.len() < length {
            if conn.read_buf(&mut buf).await? == 0 {
                return Err(std::io::Error::other("closed"));
            }
        }
        let body = buf.split_to(length).freeze();
        if let Ok(mut idle) = idle.lock() {
            idle.push(conn);
        }
        return answer.body(Full::new(body)).map_err(std::io::Error::other);
    }
}

async fn own_relay(idle: Idle, upstream: &'static str, request: Request<Incoming>) -> Result<Answer, Infallible> {
    match own_exchange(&idle, upstream, request).await {
        Ok(response) => Ok(response.map(|b| b.map_err(|never| match never {}).boxed())),
        Err(_) => Ok(refusal(StatusCode::BAD_GATEWAY)),
    }
}

async fn serve_own(listener: TcpListener, upstream: &'static str) {
    let idle: Idle = Arc::default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let idle = idle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| own_relay(idle.clone(), upstream, request));
            let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn refusal(status: StatusCode) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
    *answer.status_mut() = status;
    answer
}

async fn serve(listener: TcpListener, upstream: &'static str) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| relay(client.clone(), upstream, request));
            let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(listen), Some(upstream)) = (args.first(), args.get(1)) else { usage() };
    let flags = args.get(2..).unwrap_or_default();
    if flags.iter().any(|f| f != "--current-thread" && f != "--own-client") {
        usage();
    }
    let current_thread = flags.iter().any(|f| f == "--current-thread");
    let own = flags.iter().any(|f| f == "--own-client");
    let Ok(listen) = listen.parse::<SocketAddr>() else { usage() };
    let upstream: &'static str = Box::leak(upstream.clone().into_boxed_str());
    let runtime = if current_thread {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()
    };
    let runtime = runtime.unwrap_or_else(|e| {
        eprintln!("floor-relay: no runtime: {e}");
        std::process::exit(1)
    });
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await.unwrap_or_else(|e| {
            eprintln!("floor-relay: cannot listen on {listen}: {e}");
            std::process::exit(1)
        });
        let bound = listener.local_addr().map_or_else(|_| listen.to_string(), |a| a.to_string());
        println!("listening on http://{bound}");
        // On a worker, as the gateway's accept loop runs: not on this (the main) thread.
        if own {
            let _ = tokio::spawn(serve_own(listener, upstream)).await;
        } else {
            let _ = tokio::spawn(serve(listener, upstream)).await;
        }
    });
}
