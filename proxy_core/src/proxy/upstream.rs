//! The pooled upstream client: HTTP/1.1 or HTTP/2, TLS through rustls, TCP_NODELAY, and a
//! connector that stamps each new connection with how long it took to open, so a request can tell
//! a fresh connect (and its cost) from a pooled one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;

pub type UpstreamBody = Full<Bytes>;

/// When a connection was opened and how long the TCP (and TLS) handshake took.
#[derive(Debug, Clone, Copy)]
pub struct ConnectTiming {
    pub finished: Instant,
    pub took: Duration,
}

#[derive(Clone)]
pub struct TimedConnector {
    inner: HttpsConnector<HttpConnector>,
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
}

pub struct UpstreamClient {
    client: Client<TimedConnector, UpstreamBody>,
}

impl UpstreamClient {
    /// Fails only if the TLS provider refuses its own default protocol versions.
    pub fn new(settings: ClientSettings) -> Result<Self, rustls::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(settings.connect_timeout));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls =
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
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
        Ok(Self { client: builder.build(TimedConnector { inner: https }) })
    }

    pub fn request(&self, req: http::Request<UpstreamBody>) -> hyper_util::client::legacy::ResponseFuture {
        self.client.request(req)
    }
}
