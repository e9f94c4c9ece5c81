//! Translation between OpenAI's Chat Completions and Anthropic's Messages APIs, so a route's
//! pools need not speak the client's protocol: a chat request may reach an Anthropic pool and a
//! Messages request an OpenAI-compatible one, and a fallback chain may mix both.
//!
//! - `request`: the client's body into the upstream's vocabulary. What has no counterpart is
//!   refused with a 400 naming the field, never dropped.
//! - `response`: a whole answer and an upstream error body back into the client's vocabulary.
//! - `stream`: the event-stream state machine (one upstream event in, its translation out, no
//!   event held back), which sits in the SSE tap after the usage has been read off the upstream's
//!   own events.
//!
//! The ledger reads usage from what the upstream sent, in its own vocabulary; translation changes
//! only what the client sees.

mod request;
mod response;
mod stream;
mod vocab;

#[cfg(test)]
mod corpus_tests;

pub use request::translate_request;
pub use response::{translate_error, translate_whole};
pub use stream::StreamTranslator;

use crate::endpoint::{Endpoint, Flavor};
use crate::error::GatewayError;

/// The output cap written into a translated Messages request when the client set none and no
/// limit put one in: Anthropic requires `max_tokens`, OpenAI clients often leave it out.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// Largest whole (non-streaming) answer held to translate it.
pub const MAX_TRANSLATED_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Translation {
    /// A Chat Completions client, an Anthropic upstream.
    ChatToMessages,
    /// A Messages client, an OpenAI-compatible upstream.
    MessagesToChat,
}

impl Translation {
    /// The translation that lets a pool answering `served` (bits per `Endpoint::index`) take a
    /// request for `client`, if the pool does not answer it natively.
    pub fn between(client: Endpoint, served: u8) -> Option<Translation> {
        let serves = |e: Endpoint| served & (1 << e.index()) != 0;
        match client {
            Endpoint::ChatCompletions if serves(Endpoint::Messages) => Some(Translation::ChatToMessages),
            Endpoint::Messages if serves(Endpoint::ChatCompletions) => Some(Translation::MessagesToChat),
            _ => None,
        }
    }

    /// The endpoint the upstream is asked on.
    pub fn upstream_endpoint(self) -> Endpoint {
        match self {
            Translation::ChatToMessages => Endpoint::Messages,
            Translation::MessagesToChat => Endpoint::ChatCompletions,
        }
    }

    pub fn upstream_flavor(self) -> Flavor {
        self.upstream_endpoint().flavor()
    }

    pub fn client_flavor(self) -> Flavor {
        match self {
            Translation::ChatToMessages => Flavor::OpenAi,
            Translation::MessagesToChat => Flavor::Anthropic,
        }
    }

    /// `chat->messages` or `messages->chat`, for logs and the ARCHITECTURE notes.
    pub fn as_str(self) -> &'static str {
        match self {
            Translation::ChatToMessages => "chat->messages",
            Translation::MessagesToChat => "messages->chat",
        }
    }
}

/// A request field with no counterpart in the upstream's API.
fn untranslatable(field: impl Into<String>, why: &str) -> GatewayError {
    let field = field.into();
    GatewayError::invalid(format!("'{field}' cannot be translated for this model's upstream: {why}")).with_param(field)
}

/// A request field of the wrong shape.
fn malformed(field: impl Into<String>, what: &str) -> GatewayError {
    let field = field.into();
    GatewayError::invalid(format!("'{field}' must be {what}")).with_param(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_is_chosen_only_where_the_pool_lacks_the_endpoint() {
        let anthropic = 1 << Endpoint::Messages.index();
        let openai = (1 << Endpoint::ChatCompletions.index()) | (1 << Endpoint::Embeddings.index());
        assert_eq!(Translation::between(Endpoint::ChatCompletions, anthropic), Some(Translation::ChatToMessages));
        assert_eq!(Translation::between(Endpoint::Messages, openai), Some(Translation::MessagesToChat));
        assert_eq!(Translation::between(Endpoint::Embeddings, anthropic), None);
        assert_eq!(Translation::between(Endpoint::Responses, anthropic), None);
        assert_eq!(Translation::ChatToMessages.upstream_endpoint(), Endpoint::Messages);
        assert_eq!(Translation::MessagesToChat.client_flavor(), Flavor::Anthropic);
    }
}
