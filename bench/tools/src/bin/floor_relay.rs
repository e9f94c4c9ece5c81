//! The floor under the data plane's throughput: an HTTP/1 relay built from the same libraries as
//! the gateway's request path (tokio, hyper's server with HTTP/1-or-2 detection, hyper_util's
//! pooled client) and nothing else: no key check, no routing, limits, metering, usage event or
//! metrics. `python -m bench.floor` runs it beside nginx and the data plane, so that the gap to
//! nginx splits into what these libraries cost and what the gateway's own work adds.
//!
//! `floor-relay LISTEN UPSTREAM [--current-thread]`: relays every request to `UPSTREAM`
//! (`host:port`, plain HTTP/1.1) as it came, path and headers included, on one worker thread
//! (the gateway's `core.workers = 1`), or on tokio's single-threaded scheduler.

use std::convert::Infallible;
use std::net::SocketAddr;

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
use tokio::net::TcpListener;

type Upstream = Client<HttpConnector, Incoming>;
type Answer = Response<BoxBody<Bytes, hyper::Error>>;

fn usage() -> ! {
    eprintln!("usage: floor-relay LISTEN UPSTREAM [--current-thread]");
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
    let current_thread = match args.get(2).map(String::as_str) {
        None => false,
        Some("--current-thread") => true,
        Some(_) => usage(),
    };
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
        let _ = tokio::spawn(serve(listener, upstream)).await;
    });
}
