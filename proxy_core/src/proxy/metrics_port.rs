//! `GET /metrics` on the data port, for scrapers that cannot reach the loopback admin port. The
//! exposition has one source, the admin API's `/metrics` (the core's families converted by the
//! control plane's collector, plus its own and the doctor's): the data port fetches it from
//! the admin listener the control plane named (`Core.metrics_source`) and relays it. The data
//! port faces the network, and the exposition names pools, upstreams and tenants, so it answers
//! only to its own bearer token (compared in constant time); anything else gets 401 before the
//! admin port is touched. At most one scrape is fetched at a time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::respond::ProxyBody;

/// Longest wait for the admin API's exposition (it runs the doctor against the database).
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest exposition relayed.
const MAX_EXPOSITION: usize = 32 * 1024 * 1024;

pub struct MetricsPort {
    token: [u8; 32],
    /// The admin API's `/metrics` URL, once the control plane named it.
    source: ArcSwapOption<Uri>,
    client: Client<HttpConnector, Empty<Bytes>>,
    busy: AtomicBool,
}

/// The one scrape under way; dropping it lets the next one in.
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn plain(status: StatusCode, text: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::Full(Full::new(Bytes::from_static(text.as_bytes()))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

impl MetricsPort {
    pub fn new(token: &str) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(2)));
        Self {
            token: digest(token.as_bytes()),
            source: ArcSwapOption::empty(),
            client: Client::builder(TokioExecutor::new()).build(http),
            busy: AtomicBool::new(false),
        }
    }

    /// Where the exposition comes from: the admin listener (a loopback address when it listens
    /// on every interface).
    pub fn set_source(&self, admin: std::net::SocketAddr) -> Result<(), String> {
        let host = match admin.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
            ip if ip.is_unspecified() => "[::1]".to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            std::net::IpAddr::V4(v4) => v4.to_string(),
        };
        let uri: Uri = format!("http://{host}:{}/metrics", admin.port()).parse().map_err(|e| format!("{e}"))?;
        self.source.store(Some(std::sync::Arc::new(uri)));
        Ok(())
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let Some(token) = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")) else {
            return false;
        };
        bool::from(digest(token.trim().as_bytes()).ct_eq(&self.token))
    }

    pub async fn serve(&self, method: &Method, headers: &HeaderMap) -> Response<ProxyBody> {
        if !self.authorized(headers) {
            let mut refused = plain(StatusCode::UNAUTHORIZED, "a bearer token is required for /metrics\n");
            refused.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return refused;
        }
        if method != Method::GET {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
        }
        let Some(source) = self.source.load_full() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "the control plane has not started yet\n");
        };
        if self.busy.swap(true, Ordering::Acquire) {
            return plain(StatusCode::TOO_MANY_REQUESTS, "a scrape is already under way\n");
        }
        // Cleared however the fetch ends, a scraper that hangs up mid-way included.
        let _busy = Busy(&self.busy);
        let answer = self.fetch(&source, headers).await;
        answer.unwrap_or_else(|why| {
            tracing::warn!(error = %why, "the admin API's /metrics could not be read for the data port");
            plain(StatusCode::BAD_GATEWAY, "the control plane's exposition could not be read\n")
        })
    }

    async fn fetch(&self, source: &Uri, headers: &HeaderMap) -> Result<Response<ProxyBody>, String> {
        let mut request = Request::new(Empty::<Bytes>::new());
        *request.uri_mut() = source.clone();
        // Only what selects the exposition's format crosses; never the scraper's token.
        if let Some(accept) = headers.get(header::ACCEPT) {
            request.headers_mut().insert(header::ACCEPT, accept.clone());
        }
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, async {
            let response = self.client.request(request).await.map_err(|e| format!("{e}"))?;
            let status = response.status();
            let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
            let body = Limited::new(response.into_body(), MAX_EXPOSITION)
                .collect()
                .await
                .map_err(|e| format!("{e}"))?
                .to_bytes();
            Ok::<_, String>((status, content_type, body))
        })
        .await
        .map_err(|_| "timed out".to_string())??;
        let (status, content_type, body) = fetched;
        if !status.is_success() {
            return Err(format!("the admin API answered {status}"));
        }
        let mut response = Response::new(ProxyBody::Full(Full::new(body)));
        let out = response.headers_mut();
        if let Some(value) = content_type {
            out.insert(header::CONTENT_TYPE, value);
        }
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Ok(response)
    }
}
