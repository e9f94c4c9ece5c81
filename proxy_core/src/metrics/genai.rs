//! The OpenTelemetry GenAI metrics in Prometheus naming (dots become underscores, the unit
//! `s` becomes `_seconds`, `{token}` is dropped): `gen_ai.client.token.usage`,
//! `gen_ai.server.time_to_first_token`, `gen_ai.server.time_per_output_token` and
//! `gen_ai.server.request.duration`, each labelled by `gen_ai_operation_name`, the provider,
//! the request and response model, `server_address`, `server_port`, and the pool and member.
//! Series nothing was recorded in are left out.

use super::series::{GenAiSeries, ERROR_TYPES, OPERATIONS};
use super::snapshot::FamilySnapshot;
use super::Metrics;

/// The labels of a GenAI series (`Metrics::genai`'s family), in its order.
pub const SERIES_LABELS: [&str; 7] = [
    "gen_ai_provider_name",
    "gen_ai_request_model",
    "gen_ai_response_model",
    "server_address",
    "server_port",
    "pool",
    "upstream",
];

/// A series holds every operation: the exposition adds the operation's name before its labels.
const OPERATION_LABEL: &str = "gen_ai_operation_name";

/// The exposition's labels: the operation, the series', and `with` when given.
fn labels(with: Option<&'static str>) -> Vec<&'static str> {
    let mut out = vec![OPERATION_LABEL];
    out.extend(SERIES_LABELS);
    out.extend(with);
    out
}

pub fn render_genai(metrics: &Metrics) -> Vec<FamilySnapshot> {
    let mut tokens = FamilySnapshot::with_labels(
        "gen_ai_client_token_usage",
        "histogram",
        "Tokens per request, by type (input or output): OpenTelemetry gen_ai.client.token.usage.",
        labels(Some("gen_ai_token_type")),
    );
    let mut ttft = FamilySnapshot::with_labels(
        "gen_ai_server_time_to_first_token_seconds",
        "histogram",
        "Time to the first content token relayed: OpenTelemetry gen_ai.server.time_to_first_token.",
        labels(None),
    );
    let mut tpot = FamilySnapshot::with_labels(
        "gen_ai_server_time_per_output_token_seconds",
        "histogram",
        "Time per output token after the first: OpenTelemetry gen_ai.server.time_per_output_token.",
        labels(None),
    );
    let mut duration = FamilySnapshot::with_labels(
        "gen_ai_server_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its end, by error type (empty when it went well): \
OpenTelemetry gen_ai.server.request.duration.",
        labels(Some("error_type")),
    );
    for (values, series) in metrics.genai.collect() {
        let series: &GenAiSeries = &series;
        for (i, op) in series.ops.iter().enumerate() {
            let mut base = vec![OPERATIONS[i].to_string()];
            base.extend(values.iter().map(|v| v.to_string()));
            for (kind, h) in [("input", &op.input_tokens), ("output", &op.output_tokens)] {
                tokens.histogram_if_used(extend(&base, kind), h);
            }
            ttft.histogram_if_used(base.clone(), &op.ttft);
            tpot.histogram_if_used(base.clone(), &op.tpot);
            for (error, h) in ERROR_TYPES.iter().zip(&op.duration) {
                duration.histogram_if_used(extend(&base, error), h);
            }
        }
    }
    vec![tokens, ttft, tpot, duration]
}

fn extend(base: &[String], last: &str) -> Vec<String> {
    let mut out = base.to_vec();
    out.push(last.to_string());
    out
}
