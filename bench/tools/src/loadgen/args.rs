//! `sluicegate bench` options.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::cli::{self, CommandLineError};
use crate::dist::Dist;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// POST /v1/chat/completions
    Chat,
    /// POST /v1/completions
    Completions,
    /// POST /v1/messages (Anthropic)
    Messages,
    /// POST /v1/embeddings
    Embeddings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Arrival {
    Constant,
    Poisson,
}

/// `VALUE:WEIGHT` (weight defaults to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    pub value: String,
    pub weight: f64,
}

impl FromStr for Weighted {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.rsplit_once(':') {
            Some((value, weight)) if weight.parse::<f64>().is_ok() => {
                let weight: f64 = weight.parse().unwrap_or(1.0);
                if !(weight.is_finite() && weight > 0.0) {
                    return Err(format!("{s:?}: weight must be positive"));
                }
                Ok(Weighted { value: value.to_string(), weight })
            }
            _ => Ok(Weighted { value: s.to_string(), weight: 1.0 }),
        }
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let value: f64 = number.parse().map_err(|_| format!("{s:?} is not a duration like 30s, 500ms, 2m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("{s:?}: unit must be ms, s or m")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is not a valid duration"))
}

#[derive(Parser, Debug, Clone)]
#[command(
    name = "sluicegate bench",
    about = "Load generator: open-loop (constant or Poisson arrivals) or closed-loop (fixed concurrency) \
             OpenAI and Anthropic traffic with realistic length distributions; reports P50/P90/P95/P99/max \
             of time to headers, TTFT, TPOT, inter-token gaps and total, error and timeout rates, throughput.",
    after_help = "Distributions (DIST): V or fixed:V, uniform:LO:HI, normal:MEAN:SD, lognormal:MEDIAN:SIGMA, exp:MEAN.\n\
Prompts are built so that the gateway's estimate rule (ceil(chars/4)) counts exactly the sampled tokens."
)]
pub struct BenchArgs {
    /// Base URL of the server under test (gateway, simulator or any compatible server).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Request shape.
    #[arg(long, value_enum, default_value_t = Api::Chat)]
    pub api: Api,
    /// Model name sent in each request.
    #[arg(long, default_value = "sim-model")]
    pub model: String,
    /// API key (repeatable, `KEY:WEIGHT` to mix keys); sent as Bearer (x-api-key for messages).
    #[arg(long = "key", value_name = "KEY[:WEIGHT]")]
    pub keys: Vec<Weighted>,
    /// Priority classes to mix (`interactive:3`, `batch:1`), sent as x-sluicegate-priority.
    #[arg(long = "priority", value_name = "CLASS[:WEIGHT]")]
    pub priorities: Vec<Weighted>,
    /// Fraction of requests that stream (0..1).
    #[arg(long, default_value_t = 1.0)]
    pub stream_ratio: f64,
    /// Closed loop: this many requests in flight at all times.
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<usize>,
    /// Open loop: this many arrivals per second, whatever the responses do.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Arrival process for --rate.
    #[arg(long, value_enum, default_value_t = Arrival::Poisson)]
    pub arrival: Arrival,
    /// Stop sending after this long (e.g. 30s, 2m).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// Stop sending after this many requests (whichever of --duration and --requests comes first).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Prompt length in tokens.
    #[arg(long, value_name = "DIST", default_value = "lognormal:200:0.6")]
    pub prompt_tokens: Dist,
    /// Output length in tokens (sent as max_tokens).
    #[arg(long, value_name = "DIST", default_value = "lognormal:120:0.5")]
    pub output_tokens: Dist,
    /// JSONL file of real lengths ({"prompt_tokens": N, "output_tokens": M} per line), sampled
    /// uniformly; overrides --prompt-tokens and --output-tokens.
    #[arg(long, value_name = "FILE")]
    pub lengths_file: Option<PathBuf>,
    /// Trust the CA certificate(s) in this PEM file for an `https://` URL (default: the web's
    /// public roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Per-request timeout (whole request, stream included).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub timeout: Duration,
    /// Extra request header (repeatable), e.g. `x-sim-itl-ms: 5`.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Open loop safety valve: arrivals beyond this many in flight are counted as dropped.
    #[arg(long, default_value_t = 20_000)]
    pub max_inflight: usize,
    /// Write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// A label for the report (e.g. "gateway c=64").
    #[arg(long, default_value = "")]
    pub label: String,
    /// Runtime worker threads (0 = one per CPU).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Seed for length and mix sampling.
    #[arg(long)]
    pub seed: Option<u64>,
}

impl BenchArgs {
    pub fn parse_from_args(args: &[String]) -> Result<BenchArgs, CommandLineError> {
        cli::parse("sluicegate bench", args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_weights() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3h").is_err());
        assert_eq!("batch:2".parse::<Weighted>().unwrap(), Weighted { value: "batch".into(), weight: 2.0 });
        assert_eq!("sk-sg-abc".parse::<Weighted>().unwrap().weight, 1.0);
        assert!("x:0".parse::<Weighted>().is_err());
    }
}
