//! The pooled upstream client of one member: plain-HTTP HTTP/1.1 through the gateway's own client
//! (`http1`), TLS (whose ALPN may pick HTTP/2) and prior-knowledge HTTP/2 through hyper's, with
//! rustls, TCP_NODELAY, and a connector that stamps each new connection with how long it took
//! to open, so a request can tell a fresh connect (and its cost) from a pooled one.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::Scheme;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pin_project_lite::pin_project;
use tokio::net::TcpStream;

use super::error::UpstreamError;
use super::guard::AddressGuard;
use super::http1::{Http1Body, Http1Client};
use super::incoming::UpstreamIncoming;
use super::reach::{not_allowed, reachable, Reach};

/// A request's body: the gateway holds every request body whole before it forwards it.
pub type UpstreamBody = Bytes;

/// When a connection was opened and how long the TCP (and TLS) handshake took.
#[derive(Debug, Clone, Copy)]
pub struct ConnectTiming {
    pub finished: Instant,
    pub took: Duration,
}

/// Resolves host names and drops the addresses the member may not reach (see `guard`); fails
/// when none is left. Checked on the resolved address at connect time, so a DNS answer that
/// changes after the control plane's check cannot slip past.
#[derive(Clone)]
pub struct GuardedResolver {
    inner: GaiResolver,
    reach: Reach,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let reach = self.reach.clone();
        let resolving = self.inner.call(name);
        Box::pin(async move { reachable(&reach, resolving.await?).map(Vec::into_iter) })
    }
}

/// Connects (checking literal addresses, which skip the resolver) and times the connect.
#[derive(Clone)]
pub struct TimedConnector {
    inner: HttpsConnector<HttpConnector<GuardedResolver>>,
    reach: Reach,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for TimedConnector {
    type Response = TimedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<TimedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let started = Instant::now();
        let literal = uri.host().map(|h| h.trim_start_matches('[').trim_end_matches(']')).and_then(|h| h.parse().ok());
        if let Some(why) = literal.and_then(|ip: IpAddr| self.reach.refusal(ip)) {
            return Box::pin(async move { Err(not_allowed(why).into()) });
        }
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let stream = connecting.await?;
            let finished = Instant::now();
            Ok(TimedStream {
                inner: stream,
                timing: ConnectTiming { finished, took: finished.saturating_duration_since(started) },
            })
        })
    }
}

pub struct TimedStream {
    inner: MaybeHttpsStream<TokioIo<TcpStream>>,
    timing: ConnectTiming,
}

impl Connection for TimedStream {
    fn connected(&self) -> Connected {
        self.inner.connected().extra(self.timing)
    }
}

impl Read for TimedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl Write for TimedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
}

/// Connection settings of one upstream member; members with equal settings may share a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientSettings {
    pub connect_timeout: Duration,
    pub http2_prior_knowledge: bool,
    /// May connect to addresses `forbidden_address` refuses (operators' internal pools), but
    /// never to metadata services or the gateway's own listeners.
    pub allow_internal: bool,
    /// The port of the member's URL (explicit or its scheme's), for the address guard.
    pub port: u16,
}

pub struct UpstreamClient {
    http1: Http1Client,
    /// Plain-HTTP requests go to `http1` unless the member speaks HTTP/2 by prior knowledge.
    http1_for_plain: bool,
    client: Client<TimedConnector, Full<Bytes>>,
}

impl UpstreamClient {
    /// Fails only if the TLS provider refuses its own default protocol versions.
    pub fn new(settings: ClientSettings, guard: Arc<AddressGuard>) -> Result<Self, rustls::Error> {
        let reach = Reach { guard, port: settings.port, internal: settings.allow_internal };
        let resolver = GuardedResolver { inner: GaiResolver::new(), reach: reach.clone() };
        let mut http = HttpConnector::new_with_resolver(resolver);
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(settings.connect_timeout));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_only(settings.http2_prior_knowledge);
        Ok(Self {
            http1: Http1Client::new(reach.clone(), settings.connect_timeout),
            http1_for_plain: !settings.http2_prior_knowledge,
            client: builder.build(TimedConnector { inner: https, reach }),
        })
    }

    pub fn request(&self, req: Request<UpstreamBody>) -> Sending<impl Future<Output = Http1Answer> + '_> {
        if self.http1_for_plain && req.uri().scheme() == Some(&Scheme::HTTP) {
            return Sending::Own { sent: self.http1.send(req) };
        }
        Sending::Hyper { sent: self.client.request(req.map(Full::new)) }
    }
}

type Http1Answer = Result<Response<Http1Body>, UpstreamError>;

pin_project! {
    /// An upstream request under way, by either client. A future of its own rather than an
    /// `async fn`: an async fn keeps its arguments twice and its callee's future once more, and
    /// this one sits in every request's future, which is copied whole at each move.
    #[project = SendingProj]
    pub enum Sending<F> {
        Own { #[pin] sent: F },
        // hyper's future boxes its state already.
        Hyper { sent: ResponseFuture },
    }
}

impl<F: Future<Output = Http1Answer>> Future for Sending<F> {
    type Output = Result<Response<UpstreamIncoming>, UpstreamError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            SendingProj::Own { sent } => sent.poll(cx).map(|answer| Ok(answer?.map(UpstreamIncoming::Http1))),
            SendingProj::Hyper { sent } => Pin::new(sent).poll(cx).map(|answer| match answer {
                Ok(response) => Ok(response.map(UpstreamIncoming::Hyper)),
                Err(e) => Err(hyper_error(&e)),
            }),
        }
    }
}

/// hyper's client error in the gateway's terms: its connect errors say "timed out" only in
/// their text.
fn hyper_error(e: &hyper_util::client::legacy::Error) -> UpstreamError {
    let detail = format!("{e:?}");
    if e.is_connect() {
        let timed_out = detail.contains("timed out") || detail.contains("TimedOut");
        return UpstreamError::Connect { timed_out, detail };
    }
    UpstreamError::Exchange(detail)
}
