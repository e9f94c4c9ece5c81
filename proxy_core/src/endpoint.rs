//! The API routes the gateway serves, and which wire flavour (error format, SSE grammar) each uses.

use http::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Messages,
    Models,
    Responses,
}

/// What a client of an endpoint parses: the error body's shape and the event-stream grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Chat and text completions: `data:` chunks ending in `data: [DONE]`.
    OpenAi,
    /// Messages: named events ending in `message_stop`.
    Anthropic,
    /// OpenAI's Responses API: OpenAI's error body, named `response.*` events ending in
    /// `response.completed` (or `.incomplete`, `.failed`), with no `[DONE]`.
    Responses,
}

impl Endpoint {
    pub const ALL: [Endpoint; 6] = [
        Endpoint::ChatCompletions,
        Endpoint::Completions,
        Endpoint::Embeddings,
        Endpoint::Messages,
        Endpoint::Models,
        Endpoint::Responses,
    ];

    /// Resolve a request path; `None` for paths we do not serve.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        match path.strip_suffix('/').unwrap_or(path) {
            "/v1/chat/completions" => Some(Endpoint::ChatCompletions),
            "/v1/completions" => Some(Endpoint::Completions),
            "/v1/embeddings" => Some(Endpoint::Embeddings),
            "/v1/messages" => Some(Endpoint::Messages),
            "/v1/models" => Some(Endpoint::Models),
            "/v1/responses" => Some(Endpoint::Responses),
            _ => None,
        }
    }

    pub fn method(self) -> Method {
        match self {
            Endpoint::Models => Method::GET,
            _ => Method::POST,
        }
    }

    pub fn flavor(self) -> Flavor {
        match self {
            Endpoint::Messages => Flavor::Anthropic,
            Endpoint::Responses => Flavor::Responses,
            _ => Flavor::OpenAi,
        }
    }

    /// The path appended to an upstream's base URL (which carries the version segment).
    pub fn upstream_suffix(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/chat/completions",
            Endpoint::Completions => "/completions",
            Endpoint::Embeddings => "/embeddings",
            Endpoint::Messages => "/messages",
            Endpoint::Models => "/models",
            Endpoint::Responses => "/responses",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat_completions",
            Endpoint::Completions => "completions",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Messages => "messages",
            Endpoint::Models => "models",
            Endpoint::Responses => "responses",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The OpenTelemetry GenAI `gen_ai.operation.name`.
    pub fn operation(self) -> &'static str {
        match self {
            // The conventions name no operation of its own for the Responses API: it is a chat.
            Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::Responses => "chat",
            Endpoint::Completions => "text_completion",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Models => "list_models",
        }
    }

    /// The path the gateway serves it on (`url.path`, `http.route`).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Messages => "/v1/messages",
            Endpoint::Models => "/v1/models",
            Endpoint::Responses => "/v1/responses",
        }
    }

    /// The field that caps an answer's length, written into a request that sent none when its
    /// output must be bounded (`None`: the endpoint generates no text).
    pub fn output_cap_field(self) -> Option<&'static str> {
        match self {
            Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Messages => Some("max_tokens"),
            Endpoint::Responses => Some("max_output_tokens"),
            Endpoint::Embeddings | Endpoint::Models => None,
        }
    }

    /// Whether the endpoint can stream server-sent events.
    pub fn can_stream(self) -> bool {
        matches!(self, Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Messages | Endpoint::Responses)
    }

    /// Paths under an endpoint that name a stored object (`/v1/responses/{id}`, its
    /// `input_items`, `cancel`): state the upstream keeps, which the gateway does not relay.
    pub fn stored_object(path: &str) -> Option<Endpoint> {
        let rest = path.strip_prefix("/v1/responses/")?;
        (!rest.is_empty()).then_some(Endpoint::Responses)
    }
}
