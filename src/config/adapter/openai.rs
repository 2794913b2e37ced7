//! `adapter = "openai"`: OpenAI chat completions, or any server that speaks them (vLLM,
//! Ollama, llama.cpp, ...). A key is optional: local servers often take none.

use serde::{Deserialize, Serialize};

use super::credentials::optional_key;
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At, name_of, one_of};
use crate::config::{ConfigError, ProviderSpec, Secret};

/// `adapter = "openai"`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Where to send requests.
    pub endpoint: HttpEndpointConfig,
    /// Sent as `Authorization: Bearer`; local compatible servers often need none.
    pub api_key: Option<Secret>,
    /// The request field that carries `max_output_tokens`.
    pub max_tokens_field: MaxTokensField,
}

/// The name under which the `openai` adapter sends the output token limit: OpenAI documents
/// `max_completion_tokens` (its reasoning models reject `max_tokens`), while some compatible
/// servers (Ollama) only know `max_tokens` and would ignore the other silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (the default).
    MaxCompletionTokens,
    /// `max_tokens`.
    MaxTokens,
}

const FIELDS: [(&str, MaxTokensField); 2] = [
    ("max_completion_tokens", MaxTokensField::MaxCompletionTokens),
    ("max_tokens", MaxTokensField::MaxTokens),
];

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxCompletionTokens => "max_completion_tokens",
            Self::MaxTokens => "max_tokens",
        }
    }
}

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tokens_field: Option<String>,
}

impl Adapter for OpenAiConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let (endpoint, api_key) = optional_key(at, &endpoint, raw.api_key_env.as_deref())?;
        Ok(Self {
            endpoint,
            api_key,
            max_tokens_field: one_of(
                at,
                "max_tokens_field",
                "field",
                raw.max_tokens_field.as_deref(),
                &FIELDS,
            )?
            .unwrap_or(MaxTokensField::MaxCompletionTokens),
        })
    }

    fn effective(&self, raw: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
        raw.max_tokens_field = name_of(&self.max_tokens_field, &FIELDS);
    }
}

impl ProviderSpec {
    /// An `openai` provider at `base_url`.
    pub fn openai(base_url: &str) -> Self {
        Self::of("openai").base_url(base_url)
    }

    /// `max_tokens_field` (`openai`).
    pub fn max_tokens_field(self, field: &str) -> Self {
        self.set("max_tokens_field", field)
    }
}
