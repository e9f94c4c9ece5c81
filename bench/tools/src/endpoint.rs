//! The routes a model server answers, as the simulator maps request paths onto them.

use http::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Messages,
    Models,
    Responses,
}

impl Endpoint {
    /// The endpoint served at `path` (a trailing slash is allowed); `None` for any other path.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        let path = path.strip_suffix('/').unwrap_or(path);
        let endpoint = match path.strip_prefix("/v1/")? {
            "chat/completions" => Endpoint::ChatCompletions,
            "completions" => Endpoint::Completions,
            "embeddings" => Endpoint::Embeddings,
            "messages" => Endpoint::Messages,
            "models" => Endpoint::Models,
            "responses" => Endpoint::Responses,
            _ => return None,
        };
        Some(endpoint)
    }

    /// An Azure OpenAI path, `/openai/deployments/{deployment}/chat/completions` (and
    /// completions, embeddings): the endpoint and the deployment.
    pub fn from_azure_path(path: &str) -> Option<(Endpoint, &str)> {
        let rest = path.strip_prefix("/openai/deployments/")?;
        let (deployment, operation) = rest.split_once('/')?;
        let endpoint = match operation.strip_suffix('/').unwrap_or(operation) {
            "chat/completions" => Endpoint::ChatCompletions,
            "completions" => Endpoint::Completions,
            "embeddings" => Endpoint::Embeddings,
            _ => return None,
        };
        (!deployment.is_empty()).then_some((endpoint, deployment))
    }

    pub fn method(self) -> Method {
        if self == Endpoint::Models {
            Method::GET
        } else {
            Method::POST
        }
    }

    /// The name written in the simulator's record.
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

    /// Whether the endpoint generates text that can be streamed as server-sent events.
    pub fn can_stream(self) -> bool {
        matches!(self, Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Messages | Endpoint::Responses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_paths_name_the_deployment() {
        let chat = Endpoint::from_azure_path("/openai/deployments/gpt-4o/chat/completions");
        assert_eq!(chat, Some((Endpoint::ChatCompletions, "gpt-4o")));
        assert_eq!(Endpoint::from_azure_path("/openai/deployments/e/embeddings/"), Some((Endpoint::Embeddings, "e")));
        assert_eq!(Endpoint::from_azure_path("/openai/deployments//chat/completions"), None);
        assert_eq!(Endpoint::from_azure_path("/openai/deployments/d/messages"), None);
        assert_eq!(Endpoint::from_azure_path("/v1/chat/completions"), None);
    }

    #[test]
    fn paths_map_with_or_without_a_trailing_slash() {
        assert_eq!(Endpoint::from_path("/v1/chat/completions"), Some(Endpoint::ChatCompletions));
        assert_eq!(Endpoint::from_path("/v1/messages/"), Some(Endpoint::Messages));
        assert_eq!(Endpoint::from_path("/v1/models"), Some(Endpoint::Models));
        assert_eq!(Endpoint::from_path("/v1/responses"), Some(Endpoint::Responses));
        assert_eq!(Endpoint::from_path("/v1/responses/resp_1"), None);
        assert_eq!(Endpoint::from_path("/v2/models"), None);
        assert_eq!(Endpoint::from_path("/v1/chat"), None);
        assert_eq!(Endpoint::Models.method(), Method::GET);
        assert!(!Endpoint::Embeddings.can_stream());
    }
}
