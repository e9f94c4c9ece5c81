//! `sluicegate sim`: a simulated OpenAI- and Anthropic-compatible model server with a timing
//! model (TTFT, inter-token latency, output length, a compute-concurrency limit), fault injection
//! and a ground-truth record of what it sent. It never sits on the gateway's request path.

mod content;
mod fault;
mod handler;
mod parts;
mod prompt;
mod record;
mod request;
mod responses;
mod stream;
mod timing;
mod tools;
mod wire;

pub use fault::{Fault, FaultSet, FaultSpec, RetryAfterAs, StatusFault};
pub use record::RecordLine;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::sync::Semaphore;

use crate::cli::{self, CommandLineError};
use crate::dist::Dist;
use crate::server::{Served, StartError};
use handler::SimState;
use record::Recorder;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "sluicegate sim",
    about = "A simulated OpenAI- and Anthropic-compatible model server for tests, benchmarks and load-testing a gateway configuration.",
    after_help = "Distributions (DIST): V or fixed:V, uniform:LO:HI, normal:MEAN:SD, lognormal:MEDIAN:SIGMA, exp:MEAN.\n\
Faults (SPEC): KIND[=RATE][,key=value...] with KIND one of\n  \
status[,code=500][,retry_after=S[,retry_after_as=both|seconds|date]][,should_retry=true|false]\n  \
hang  hang_after,after=K  cut,after=K[,done=true]\n  \
drip,ms=N  malformed[,after=K]  no_usage\n\
Per request, header x-sim-fault: SPEC[;SPEC...] (rate 1) overrides --fault, and\n\
x-sim-ttft-ms, x-sim-itl-ms, x-sim-output-tokens override the timing model;\n\
x-sim-usage: cached=N,cache_write=N,reasoning=N reports those parts of the usage (capped);\n\
x-sim-echo (non-streaming) adds the received headers and body to the response.\n\
PUT /sim/faults {\"faults\": [SPEC, ...]} replaces the --fault list at run time (GET lists it).\n\
Tool calls (/v1/chat/completions, /v1/messages): a request with tools whose tool_choice is\n\
not none, and whose last message is no tool result, gets one call to the tool tool_choice\n\
names, or else the first, with arguments from its schema (each required property: string\n\
\"sim\" or the first enum value, integer 1, number 1.5, boolean true, array [], object {}),\n\
streamed in pieces of up to 8 bytes; a last message of tool results gets the text\n\
\"tool result: \" and their text. Each piece is a token (so is OpenAI's opening chunk with\n\
the call's id and name); these answers are as long as they are, cut at max_tokens, whatever\n\
x-sim-output-tokens says.\n\
Prompt tokens are ceil(characters / 4), at least 1 (the gateway's estimate rule), of the\n\
prompt text, earlier tool calls' arguments, and the tools and tool_choice JSON as sent."
)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free port; the chosen address is printed).
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Time to first token in milliseconds, after any wait for compute.
    #[arg(long, value_name = "DIST", default_value = "lognormal:150:0.25")]
    pub ttft_ms: Dist,
    /// Gap between tokens in milliseconds.
    #[arg(long, value_name = "DIST", default_value = "lognormal:20:0.2")]
    pub itl_ms: Dist,
    /// Output length when the request gives no max_tokens (with max_tokens, exactly that many).
    #[arg(long, value_name = "DIST", default_value = "uniform:50:200")]
    pub output_tokens: Dist,
    /// Extra TTFT per 1000 prompt tokens (prefill cost), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub prefill_ms_per_1k: f64,
    /// Requests computed at once; beyond it new requests wait, so TTFT grows under saturation
    /// (0 = unlimited).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_concurrency: usize,
    /// Inject a fault into a fraction of requests (repeatable).
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<FaultSpec>,
    /// Append one JSON line per request to FILE (the ground truth for accounting tests).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Models served (comma-separated); others get 404. Default: any model name.
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Dimensions of embedding vectors.
    #[arg(long, default_value_t = 16)]
    pub embedding_dims: usize,
    /// Require this upstream credential (Bearer or x-api-key); unset accepts any.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Runtime worker threads (0 = one per CPU).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// Seed for the timing model and fault rolls (reproducible runs).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SimArgs {
    /// Parse `sluicegate sim` arguments (without the program name).
    pub fn parse_from_args(args: &[String]) -> Result<SimArgs, CommandLineError> {
        cli::parse("sluicegate sim", args)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("could not open the record file: {0}")]
    Record(std::io::Error),
}

pub struct Simulator {
    served: Served,
    recorder: Option<Recorder>,
}

impl Simulator {
    pub fn start(args: SimArgs) -> Result<Simulator, SimError> {
        let recorder = match &args.record {
            Some(path) => Some(Recorder::open(path).map_err(SimError::Record)?),
            None => None,
        };
        let state = Arc::new(SimState {
            ttft_ms: args.ttft_ms.clone(),
            itl_ms: args.itl_ms.clone(),
            output_tokens: args.output_tokens.clone(),
            prefill_ms_per_1k: args.prefill_ms_per_1k,
            faults: arc_swap::ArcSwap::from_pointee(args.faults.clone()),
            models: args.models.clone(),
            embedding_dims: args.embedding_dims,
            api_key: args.api_key.clone(),
            compute: (args.max_concurrency > 0).then(|| Arc::new(Semaphore::new(args.max_concurrency))),
            record: recorder.as_ref().and_then(Recorder::sender),
            seed: args.seed,
            requests: AtomicU64::new(0),
        });
        let listen = format!("{}:{}", args.host, args.port);
        let served =
            Served::start(args.workers, "sluicegate-sim", &listen, move |req| handler::handle(state.clone(), req))?;
        Ok(Simulator { served, recorder })
    }

    pub fn addr(&self) -> SocketAddr {
        self.served.addr
    }

    /// Stop serving and flush the record file.
    pub fn stop(self, grace: Duration) {
        self.served.stop(grace);
        if let Some(recorder) = self.recorder {
            recorder.close();
        }
    }
}
