//! `sluicegate bench`: the load generator. Open loop (arrivals at a rate, whatever the server
//! does: the honest way to see queueing) or closed loop (a fixed number in flight). It never sits
//! on the gateway's path; it is the client the benchmarks and the overload tests use.

mod args;
mod report;
mod sample;
mod sse;
mod workload;

pub use args::{Api, BenchArgs};
pub use report::{Percentiles, Report};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::pem::PemObject;
use tokio::sync::Notify;

use args::Arrival;
use sample::{read_stream, read_whole, Sample};
use sse::Grammar;
use workload::Workload;

type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

struct Shared {
    client: HttpClient,
    workload: Workload,
    grammar: Grammar,
    timeout: Duration,
    samples: Mutex<Vec<Sample>>,
    inflight: AtomicUsize,
    sent: AtomicU64,
    done: AtomicU64,
    ok: AtomicU64,
    idle: Notify,
}

/// The trust for `https://` URLs: the CA certificates in `ca_file` (PEM), else the web's roots.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let roots = match ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
                roots.add(cert).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!("{}: no PEM certificate", path.display()));
            }
            roots
        }
        None => rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    };
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| e.to_string())
}

/// HTTP/1.1 over plain TCP or TLS (the comparisons stay on one protocol version).
fn client(ca_file: Option<&std::path::Path>) -> Result<HttpClient, String> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http.enforce_http(false);
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(ca_file)?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(usize::MAX)
        .build(https))
}

async fn one(shared: &Shared, rng: &mut fastrand::Rng) {
    let mut sample = Sample::default();
    match shared.workload.next(rng) {
        Ok(planned) => {
            sample.stream = planned.stream;
            sample.priority = planned.priority;
            let start = Instant::now();
            let exchange = async {
                match shared.client.request(planned.request).await {
                    Ok(response) => {
                        sample.headers_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
                        sample.status = response.status().as_u16();
                        sample.retry_after = response.headers().contains_key("retry-after");
                        let is_sse = response
                            .headers()
                            .get(http::header::CONTENT_TYPE)
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|v| v.starts_with("text/event-stream"));
                        let body = response.into_body();
                        if is_sse {
                            read_stream(&mut sample, body, shared.grammar, start).await;
                        } else {
                            read_whole(&mut sample, body, start).await;
                        }
                    }
                    Err(e) => {
                        sample.error = Some(if e.is_connect() { "connect" } else { "request" });
                        sample.total_ms = start.elapsed().as_secs_f64() * 1000.0;
                    }
                }
            };
            if tokio::time::timeout(shared.timeout, exchange).await.is_err() {
                sample.timed_out = true;
                sample.total_ms = shared.timeout.as_secs_f64() * 1000.0;
            }
            sample.ok = (200..300).contains(&sample.status) && sample.error.is_none() && !sample.timed_out;
        }
        Err(e) => {
            tracing::error!(error = %e, "could not build a request");
            sample.error = Some("build");
        }
    }
    shared.done.fetch_add(1, Ordering::Relaxed);
    if sample.ok {
        shared.ok.fetch_add(1, Ordering::Relaxed);
    }
    shared.samples.lock().unwrap_or_else(PoisonError::into_inner).push(sample);
}

struct Plan {
    stop_at: Instant,
    max_requests: u64,
    cancel: Arc<AtomicBool>,
}

impl Plan {
    /// Claim the right to send one more request.
    fn claim(&self, shared: &Shared) -> bool {
        if self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.stop_at {
            return false;
        }
        shared.sent.fetch_add(1, Ordering::Relaxed) < self.max_requests
    }
}

async fn closed_loop(shared: Arc<Shared>, plan: Arc<Plan>, concurrency: usize, seed: Option<u64>) {
    let mut workers = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let (shared, plan) = (shared.clone(), plan.clone());
        let mut rng = seed.map_or_else(fastrand::Rng::new, |s| fastrand::Rng::with_seed(s + worker as u64));
        workers.push(tokio::spawn(async move {
            while plan.claim(&shared) {
                one(&shared, &mut rng).await;
            }
        }));
    }
    for w in workers {
        let _ = w.await;
    }
}

async fn open_loop(
    shared: Arc<Shared>,
    plan: Arc<Plan>,
    rate: f64,
    arrival: Arrival,
    max_inflight: usize,
    seed: Option<u64>,
) -> u64 {
    let mut rng = seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
    let mut dropped = 0;
    let mut next = tokio::time::Instant::now();
    let mean = 1.0 / rate;
    loop {
        tokio::time::sleep_until(next).await;
        if !plan.claim(&shared) {
            break;
        }
        if shared.inflight.load(Ordering::Relaxed) >= max_inflight {
            dropped += 1;
        } else {
            shared.inflight.fetch_add(1, Ordering::Relaxed);
            let shared = shared.clone();
            let mut request_rng = fastrand::Rng::with_seed(rng.u64(..));
            tokio::spawn(async move {
                one(&shared, &mut request_rng).await;
                if shared.inflight.fetch_sub(1, Ordering::Relaxed) == 1 {
                    shared.idle.notify_waiters();
                }
            });
        }
        let gap = match arrival {
            Arrival::Constant => mean,
            Arrival::Poisson => -mean * (1.0 - rng.f64()).ln(),
        };
        next += Duration::from_secs_f64(gap);
    }
    // Let the requests in flight finish (each is bounded by its own timeout).
    while shared.inflight.load(Ordering::Relaxed) > 0 {
        let notified = shared.idle.notified();
        if shared.inflight.load(Ordering::Relaxed) == 0 {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
    }
    dropped
}

fn progress(shared: Arc<Shared>, started: Instant) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let mut last_done = 0;
        loop {
            tick.tick().await;
            let done = shared.done.load(Ordering::Relaxed);
            eprintln!(
                "[bench] {:>5.0}s sent {} done {} ok {} in flight {} ({} req/s)",
                started.elapsed().as_secs_f64(),
                shared.sent.load(Ordering::Relaxed).min(u64::MAX / 2),
                done,
                shared.ok.load(Ordering::Relaxed),
                shared.inflight.load(Ordering::Relaxed),
                done - last_done
            );
            last_done = done;
        }
    })
}

/// Run a benchmark to its end (or until `cancel` is set) and return the report. The JSON report is
/// also written to `--json` when given.
pub fn run(args: BenchArgs, cancel: Arc<AtomicBool>) -> Result<Report, String> {
    let workload = Workload::new(&args)?;
    let mode = match (args.concurrency, args.rate) {
        (Some(c), _) if c > 0 => format!("closed loop, concurrency {c}"),
        (None, Some(r)) if r > 0.0 && r.is_finite() => {
            format!("open loop, {r} req/s {:?}", args.arrival).to_lowercase()
        }
        _ => return Err("give --concurrency N (closed loop) or --rate R (open loop), both positive".into()),
    };
    let runtime = crate::server::runtime(args.workers, "sluicegate-bench")
        .map_err(|e| format!("could not start the runtime: {e}"))?;
    let grammar = if args.api == Api::Messages { Grammar::Anthropic } else { Grammar::OpenAi };
    let http_client = client(args.ca_file.as_deref())?;
    let report = runtime.block_on(async {
        let shared = Arc::new(Shared {
            client: http_client,
            workload,
            grammar,
            timeout: args.timeout,
            samples: Mutex::new(Vec::new()),
            inflight: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            done: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            idle: Notify::new(),
        });
        let started = Instant::now();
        let plan = Arc::new(Plan {
            stop_at: started + args.duration,
            max_requests: args.requests.unwrap_or(u64::MAX),
            cancel,
        });
        let ticker = (!args.quiet).then(|| progress(shared.clone(), started));
        let dropped = match args.concurrency {
            Some(c) => {
                shared.inflight.store(c, Ordering::Relaxed);
                closed_loop(shared.clone(), plan, c, args.seed).await;
                shared.inflight.store(0, Ordering::Relaxed);
                0
            }
            None => {
                let rate = args.rate.unwrap_or(1.0);
                open_loop(shared.clone(), plan, rate, args.arrival, args.max_inflight, args.seed).await
            }
        };
        if let Some(t) = ticker {
            t.abort();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let samples = std::mem::take(&mut *shared.samples.lock().unwrap_or_else(PoisonError::into_inner));
        report::build(&args.label, mode, &samples, elapsed, dropped)
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(report)
}
