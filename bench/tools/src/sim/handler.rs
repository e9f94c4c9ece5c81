//! The simulator's routes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use super::content::Content;
use super::fault::{FaultSet, FaultSpec};
use super::parts::UsageParts;
use super::record::{unix_now, RecordLine};
use super::request::{self, ModelRequest};
use super::stream::{step, StreamState};
use super::timing::Timing;
use super::wire::{embeddings_body, error_body, Answer, StreamWire};
use crate::dist::Dist;
use crate::endpoint::Endpoint;
use crate::server::Abort;

/// The largest request body read.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

pub type SimBody = UnsyncBoxBody<Bytes, std::io::Error>;

pub struct SimState {
    pub ttft_ms: Dist,
    pub itl_ms: Dist,
    pub output_tokens: Dist,
    pub prefill_ms_per_1k: f64,
    /// Replaced at run time by `PUT /sim/faults`.
    pub faults: arc_swap::ArcSwap<Vec<FaultSpec>>,
    pub models: Vec<String>,
    pub embedding_dims: usize,
    pub api_key: Option<String>,
    pub compute: Option<Arc<Semaphore>>,
    pub record: Option<mpsc::Sender<RecordLine>>,
    pub seed: Option<u64>,
    pub requests: AtomicU64,
}

/// Writes the request's record line when dropped, whatever happened.
pub struct RecordGuard {
    tx: Option<mpsc::Sender<RecordLine>>,
    pub line: RecordLine,
    pub outcome: Option<&'static str>,
    /// The outcome written if the response is dropped before it ends.
    pub outcome_if_dropped: &'static str,
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            self.line.outcome = self.outcome.unwrap_or(self.outcome_if_dropped);
            self.line.ended_at = unix_now();
            let _ = tx.send(self.line.clone());
        }
    }
}

fn full(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<SimBody> {
    let mut response = Response::new(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn header_f64(headers: &HeaderMap, name: &str) -> Option<f64> {
    header_str(headers, name).and_then(|v| v.trim().parse().ok()).filter(|v: &f64| v.is_finite() && *v >= 0.0)
}

fn authorized(state: &SimState, headers: &HeaderMap) -> bool {
    let Some(expected) = &state.api_key else {
        return true;
    };
    let bearer = header_str(headers, "authorization").and_then(|v| v.strip_prefix("Bearer "));
    let given = |name| header_str(headers, name) == Some(expected.as_str());
    bearer == Some(expected.as_str()) || given("x-api-key") || given("api-key")
}

fn embedding_inputs(body: &[u8]) -> usize {
    #[derive(serde::Deserialize)]
    struct Input {
        input: serde_json::Value,
    }
    match serde_json::from_slice::<Input>(body).map(|b| b.input) {
        Ok(serde_json::Value::Array(items)) if items.iter().all(|i| i.is_number()) => 1,
        Ok(serde_json::Value::Array(items)) => items.len(),
        _ => 1,
    }
}

/// Answer before the request's body was read: read it first (within the limit), so the connection
/// stays usable and a close cannot turn into a reset that loses the answer.
async fn refuse(req: Request<Incoming>, endpoint: Endpoint, status: StatusCode, message: &str) -> Response<SimBody> {
    let _ = Limited::new(req.into_body(), BODY_LIMIT).collect().await;
    full(status, "application/json", error_body(endpoint, status.as_u16(), message))
}

pub async fn handle(state: Arc<SimState>, req: Request<Incoming>) -> Result<Response<SimBody>, Infallible> {
    Ok(route(state, req).await)
}

async fn route(state: Arc<SimState>, req: Request<Incoming>) -> Response<SimBody> {
    let path = req.uri().path().to_string();
    if req.method() == Method::GET && (path == "/health" || path == "/healthz") {
        return full(StatusCode::OK, "text/plain", b"ok".to_vec());
    }
    if path == "/sim/faults" {
        return faults_endpoint(&state, req).await;
    }
    // Azure OpenAI's shape: the deployment in the path (it names the model), `api-version` in
    // the query, the credential in `api-key`.
    let azure = Endpoint::from_azure_path(&path).map(|(endpoint, deployment)| (endpoint, deployment.to_string()));
    if azure.is_some() && !req.uri().query().unwrap_or("").split('&').any(|p| p.starts_with("api-version=")) {
        let endpoint = azure.as_ref().map_or(Endpoint::ChatCompletions, |(e, _)| *e);
        return refuse(req, endpoint, StatusCode::BAD_REQUEST, "the api-version query parameter is required").await;
    }
    let Some(endpoint) = azure.as_ref().map(|(e, _)| *e).or_else(|| Endpoint::from_path(&path)) else {
        return refuse(req, Endpoint::ChatCompletions, StatusCode::NOT_FOUND, "no such route").await;
    };
    if req.method() != endpoint.method() {
        return refuse(req, endpoint, StatusCode::METHOD_NOT_ALLOWED, "method not allowed").await;
    }
    if !authorized(&state, req.headers()) {
        return refuse(req, endpoint, StatusCode::UNAUTHORIZED, "invalid upstream credential").await;
    }
    if endpoint == Endpoint::Models {
        let names = if state.models.is_empty() { vec!["sim-model".to_string()] } else { state.models.clone() };
        let data: Vec<_> = names
            .iter()
            .map(|m| serde_json::json!({"id": m, "object": "model", "created": 0, "owned_by": "sim"}))
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({"object": "list", "data": data})).unwrap_or_default();
        return full(StatusCode::OK, "application/json", body);
    }
    let n = state.requests.fetch_add(1, Ordering::Relaxed);
    // Cutting a stream closes its connection; only HTTP/1.1 has one response per connection.
    let abort = if req.version() < Version::HTTP_2 { req.extensions().get::<Abort>().cloned() } else { None };
    let (parts, body) = req.into_parts();
    let request_id = header_str(&parts.headers, "x-request-id")
        .map(str::to_string)
        .unwrap_or_else(|| format!("sim_{n:x}_{:x}", fastrand::u64(..)));
    let mut record = RecordGuard {
        tx: state.record.clone(),
        line: RecordLine {
            request_id: request_id.clone(),
            endpoint: endpoint.as_str(),
            model: String::new(),
            stream: false,
            status: 200,
            prompt_tokens: 0,
            completion_tokens: 0,
            usage_parts: UsageParts::default(),
            outcome: "",
            faults: Vec::new(),
            queue_ms: 0.0,
            started_at: unix_now(),
            ended_at: 0.0,
        },
        outcome: None,
        outcome_if_dropped: "client_disconnected",
    };
    let bytes = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            record.outcome = Some("bad_request");
            record.line.status = 400;
            return full(
                StatusCode::BAD_REQUEST,
                "application/json",
                error_body(endpoint, 400, "could not read the body"),
            );
        }
    };
    let asked: ModelRequest = match request::read(endpoint, &bytes) {
        Ok(asked) => asked,
        Err(message) => {
            record.outcome = Some("bad_request");
            record.line.status = 400;
            return full(StatusCode::BAD_REQUEST, "application/json", error_body(endpoint, 400, &message));
        }
    };
    let model = azure.map_or_else(|| asked.model.clone(), |(_, deployment)| deployment);
    record.line.model = model.clone();
    record.line.stream = asked.stream;
    let prompt_tokens = asked.prompt_tokens;
    record.line.prompt_tokens = prompt_tokens;
    if !state.models.is_empty() && !state.models.contains(&model) {
        record.outcome = Some("bad_request");
        record.line.status = 404;
        return full(StatusCode::NOT_FOUND, "application/json", error_body(endpoint, 404, "model not found"));
    }

    let mut rng = match state.seed {
        Some(seed) => fastrand::Rng::with_seed(seed.wrapping_add(n)),
        None => fastrand::Rng::new(),
    };
    let configured = state.faults.load();
    let faults = match FaultSet::choose(&configured, header_str(&parts.headers, "x-sim-fault"), &mut rng) {
        Ok(f) => f,
        Err(e) => {
            record.outcome = Some("bad_request");
            record.line.status = 400;
            return full(StatusCode::BAD_REQUEST, "application/json", error_body(endpoint, 400, &e));
        }
    };
    record.line.faults = faults.names.clone();
    if let Some(fault) = &faults.status {
        let code = fault.code;
        record.outcome = Some("status");
        record.line.status = code;
        record.line.prompt_tokens = 0;
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = full(status, "application/json", error_body(endpoint, code, "simulated failure"));
        for (name, value) in fault.headers(std::time::SystemTime::now()) {
            if let Ok(v) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, v);
            }
        }
        return response;
    }
    if faults.hang {
        record.outcome_if_dropped = "hang";
        std::future::pending::<()>().await;
    }

    let mut timing = Timing {
        ttft_ms: header_f64(&parts.headers, "x-sim-ttft-ms").map(Dist::Fixed).unwrap_or_else(|| state.ttft_ms.clone()),
        itl_ms: header_f64(&parts.headers, "x-sim-itl-ms").map(Dist::Fixed).unwrap_or_else(|| state.itl_ms.clone()),
        prefill_ms_per_1k: state.prefill_ms_per_1k,
        rng,
    };
    let created = unix_now() as u64;

    if endpoint == Endpoint::Embeddings {
        let _permit = match &state.compute {
            Some(sem) => sem.clone().acquire_owned().await.ok(),
            None => None,
        };
        tokio::time::sleep(timing.first_token(prompt_tokens)).await;
        let usage_prompt = prompt_tokens;
        let body = embeddings_body(&model, embedding_inputs(&bytes), state.embedding_dims, usage_prompt, n);
        record.outcome = Some("complete");
        return full(StatusCode::OK, "application/json", body);
    }

    let content = Content::new(&asked.reply, endpoint, n);
    let (tokens, finish) = match content.fixed_tokens() {
        // A tool call or the answer to tool results is as long as it is, cut at the output cap.
        Some(whole) => {
            let tokens = asked.output_cap.map_or(whole, |cap| whole.min(cap.min(u64::from(u32::MAX)) as u32));
            (tokens, if tokens < whole { "length" } else { content.finish() })
        }
        None => {
            let tokens: u32 = match header_f64(&parts.headers, "x-sim-output-tokens") {
                Some(v) => v.round() as u32,
                None => match asked.output_cap {
                    Some(max) => max.min(1_000_000) as u32,
                    None => (timing_sample_tokens(&state.output_tokens, &mut timing.rng)).max(1),
                },
            };
            (tokens, if asked.output_cap.is_some_and(|m| u64::from(tokens) >= m) { "length" } else { "stop" })
        }
    };
    let usage_parts = match header_str(&parts.headers, "x-sim-usage").map(UsageParts::parse).transpose() {
        Ok(asked_parts) => asked_parts.unwrap_or_default().within(prompt_tokens, u64::from(tokens)),
        Err(e) => {
            record.outcome = Some("bad_request");
            record.line.status = 400;
            return full(StatusCode::BAD_REQUEST, "application/json", error_body(endpoint, 400, &e));
        }
    };
    record.line.usage_parts = usage_parts;
    let id = match endpoint {
        Endpoint::Messages => format!("msg_{n:x}"),
        Endpoint::Completions => format!("cmpl-{n:x}"),
        Endpoint::Responses => format!("resp_{n:x}"),
        _ => format!("chatcmpl-{n:x}"),
    };

    if asked.stream {
        let include_usage = endpoint != Endpoint::Messages && asked.include_usage;
        let wire = StreamWire::new(endpoint, &id, &model, created, include_usage, usage_parts, content);
        let state_machine =
            StreamState::new(wire, timing, faults, tokens, finish, prompt_tokens, state.compute.clone(), record, abort);
        let stream = futures_util::stream::unfold(state_machine, step);
        let mut response = Response::new(StreamBody::new(stream).boxed_unsync());
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return response;
    }

    let _permit = match &state.compute {
        Some(sem) => {
            let queued_at = std::time::Instant::now();
            let permit = sem.clone().acquire_owned().await.ok();
            record.line.queue_ms = queued_at.elapsed().as_secs_f64() * 1000.0;
            permit
        }
        None => None,
    };
    tokio::time::sleep(timing.whole(prompt_tokens, tokens)).await;
    let answer = Answer {
        endpoint,
        id: &id,
        model: &model,
        created,
        prompt_tokens,
        completion_tokens: tokens,
        finish,
        with_usage: !faults.no_usage,
        parts: usage_parts,
        content: &content,
    };
    let mut body = answer.body();
    if parts.headers.contains_key("x-sim-echo") {
        body = with_echo(&body, &parts.headers, &bytes);
    }
    record.line.completion_tokens = u64::from(tokens);
    record.outcome = Some("complete");
    full(StatusCode::OK, "application/json", body)
}

/// Test aid: add the request headers and body the simulator received to a JSON response, so a
/// test can see exactly what a gateway forwarded.
fn with_echo(body: &[u8], headers: &HeaderMap, request: &[u8]) -> Vec<u8> {
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_slice(body) else {
        return body.to_vec();
    };
    let seen: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned())))
        .collect();
    map.insert("sim_request_headers".into(), serde_json::Value::Object(seen));
    map.insert("sim_request_body".into(), serde_json::Value::String(String::from_utf8_lossy(request).into_owned()));
    serde_json::to_vec(&map).unwrap_or_else(|_| body.to_vec())
}

/// `GET /sim/faults` lists the configured faults; `PUT` with `{"faults": ["SPEC", ...]}` replaces
/// them (an empty list clears them), so a test or drill can start and end an outage.
async fn faults_endpoint(state: &SimState, req: Request<Incoming>) -> Response<SimBody> {
    let list = |faults: &[FaultSpec]| -> Vec<u8> {
        let specs: Vec<String> = faults.iter().map(|f| format!("{f:?}")).collect();
        serde_json::to_vec(&serde_json::json!({ "faults": specs })).unwrap_or_default()
    };
    let refuse = |status: StatusCode, message: &str| {
        full(status, "application/json", error_body(Endpoint::ChatCompletions, status.as_u16(), message))
    };
    match *req.method() {
        Method::GET => full(StatusCode::OK, "application/json", list(&state.faults.load())),
        Method::PUT => {
            #[derive(serde::Deserialize)]
            struct Body {
                faults: Vec<String>,
            }
            let Ok(bytes) = Limited::new(req.into_body(), 64 * 1024).collect().await.map(|b| b.to_bytes()) else {
                return refuse(StatusCode::BAD_REQUEST, "unreadable body");
            };
            let parsed: Result<Vec<FaultSpec>, String> = serde_json::from_slice::<Body>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|b| b.faults.iter().map(|s| s.parse::<FaultSpec>()).collect());
            match parsed {
                Ok(faults) => {
                    let body = list(&faults);
                    state.faults.store(Arc::new(faults));
                    full(StatusCode::OK, "application/json", body)
                }
                Err(e) => refuse(StatusCode::BAD_REQUEST, &e),
            }
        }
        _ => refuse(StatusCode::METHOD_NOT_ALLOWED, "use GET or PUT"),
    }
}

fn timing_sample_tokens(dist: &Dist, rng: &mut fastrand::Rng) -> u32 {
    dist.sample(rng).round().min(1_000_000.0) as u32
}
