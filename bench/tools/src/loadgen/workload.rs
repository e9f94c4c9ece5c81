//! What each request looks like: shape, lengths, key, priority, stream or not.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request};
use http_body_util::Full;

use super::args::{Api, BenchArgs, Weighted};
use crate::dist::Dist;

/// Filler text: ASCII without quotes or backslashes, so it embeds in JSON as is.
const FILLER: &str = "the quick brown fox jumps over the lazy dog near a sluice gate ";

#[derive(Debug, Clone, Copy)]
pub struct Lengths {
    pub prompt: u64,
    pub output: u64,
}

enum LengthSource {
    Dists { prompt: Dist, output: Dist },
    Table(Vec<Lengths>),
}

fn pick<'a>(items: &'a [Weighted], rng: &mut fastrand::Rng) -> Option<&'a Weighted> {
    let total: f64 = items.iter().map(|w| w.weight).sum();
    let mut ticket = rng.f64() * total;
    for item in items {
        if ticket < item.weight {
            return Some(item);
        }
        ticket -= item.weight;
    }
    items.last()
}

pub struct Planned {
    pub request: Request<Full<Bytes>>,
    pub stream: bool,
    pub priority: Option<Arc<str>>,
}

pub struct Workload {
    api: Api,
    uri: http::Uri,
    model_json: String,
    keys: Vec<Weighted>,
    priorities: Vec<Weighted>,
    stream_ratio: f64,
    lengths: LengthSource,
    extra: HeaderMap,
    filler: String,
}

pub fn load_lengths(path: &Path) -> Result<Vec<Lengths>, String> {
    #[derive(serde::Deserialize)]
    struct Row {
        prompt_tokens: u64,
        output_tokens: u64,
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: Row = serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        rows.push(Lengths { prompt: row.prompt_tokens, output: row.output_tokens });
    }
    if rows.is_empty() {
        return Err(format!("{}: no lengths", path.display()));
    }
    Ok(rows)
}

impl Workload {
    pub fn new(args: &BenchArgs) -> Result<Workload, String> {
        let path = match args.api {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Messages => "/v1/messages",
            Api::Embeddings => "/v1/embeddings",
        };
        let base = args.url.trim_end_matches('/');
        let uri: http::Uri = format!("{base}{path}").parse().map_err(|e| format!("--url {:?}: {e}", args.url))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err("--url must be http:// or https:// (HTTP/1.1, over TLS for https)".into());
        }
        let mut extra = HeaderMap::new();
        for h in &args.headers {
            let (name, value) = h.split_once(':').ok_or_else(|| format!("--header {h:?}: expected NAME: VALUE"))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|e| format!("--header {h:?}: {e}"))?;
            let value = HeaderValue::from_str(value.trim()).map_err(|e| format!("--header {h:?}: {e}"))?;
            extra.append(name, value);
        }
        if !(0.0..=1.0).contains(&args.stream_ratio) {
            return Err("--stream-ratio must be between 0 and 1".into());
        }
        for p in &args.priorities {
            if p.value != "interactive" && p.value != "batch" {
                return Err(format!("--priority {:?}: classes are interactive and batch", p.value));
            }
        }
        let lengths = match &args.lengths_file {
            Some(path) => LengthSource::Table(load_lengths(path)?),
            None => LengthSource::Dists { prompt: args.prompt_tokens.clone(), output: args.output_tokens.clone() },
        };
        Ok(Workload {
            api: args.api,
            uri,
            model_json: serde_json::to_string(&args.model).map_err(|e| e.to_string())?,
            keys: args.keys.clone(),
            priorities: args.priorities.clone(),
            stream_ratio: args.stream_ratio,
            lengths,
            extra,
            filler: FILLER.repeat(1 + 4 * 1_000_000 / FILLER.len()),
        })
    }

    fn lengths(&self, rng: &mut fastrand::Rng) -> Lengths {
        match &self.lengths {
            LengthSource::Dists { prompt, output } => Lengths {
                prompt: (prompt.sample(rng).round() as u64).clamp(1, 1_000_000),
                output: (output.sample(rng).round() as u64).clamp(1, 1_000_000),
            },
            LengthSource::Table(rows) => rows[rng.usize(..rows.len())],
        }
    }

    /// Prompt text whose estimate (ceil(chars / 4)) is exactly `tokens`.
    fn prompt(&self, tokens: u64) -> &str {
        let chars = (tokens as usize * 4).min(self.filler.len());
        &self.filler[..chars]
    }

    pub fn next(&self, rng: &mut fastrand::Rng) -> Result<Planned, String> {
        let lengths = self.lengths(rng);
        let stream = self.api != Api::Embeddings && rng.f64() < self.stream_ratio;
        let (model, prompt, max) = (&self.model_json, self.prompt(lengths.prompt), lengths.output);
        let body = match self.api {
            Api::Chat => format!(
                r#"{{"model":{model},"stream":{stream},"max_tokens":{max},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
            ),
            Api::Messages => format!(
                r#"{{"model":{model},"stream":{stream},"max_tokens":{max},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
            ),
            Api::Completions => {
                format!(r#"{{"model":{model},"stream":{stream},"max_tokens":{max},"prompt":"{prompt}"}}"#)
            }
            Api::Embeddings => format!(r#"{{"model":{model},"input":"{prompt}"}}"#),
        };
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = pick(&self.keys, rng) {
            let (name, value) = if self.api == Api::Messages {
                (HeaderName::from_static("x-api-key"), key.value.clone())
            } else {
                (http::header::AUTHORIZATION, format!("Bearer {}", key.value))
            };
            headers.insert(name, HeaderValue::from_str(&value).map_err(|e| format!("--key: {e}"))?);
        }
        if self.api == Api::Messages {
            headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        }
        let priority = pick(&self.priorities, rng).map(|p| Arc::<str>::from(p.value.as_str()));
        if let Some(p) = &priority {
            headers.insert("x-sluicegate-priority", HeaderValue::from_str(p).map_err(|e| e.to_string())?);
        }
        for (name, value) in &self.extra {
            headers.append(name.clone(), value.clone());
        }
        Ok(Planned { request, stream, priority })
    }
}
