//! `adapter = "openai-responses"`: OpenAI's Responses API. A key is optional, as for
//! `openai`.

use serde::{Deserialize, Serialize};

use super::credentials::optional_key;
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At};
use crate::config::{ConfigError, Secret};

/// `adapter = "openai-responses"`.
#[derive(Debug, Clone)]
pub struct OpenAiResponsesConfig {
    /// Where to send requests (`{base_url}/responses`).
    pub endpoint: HttpEndpointConfig,
    /// Sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
}

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
}

impl Adapter for OpenAiResponsesConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let (endpoint, api_key) = optional_key(at, &endpoint, raw.api_key_env.as_deref())?;
        Ok(Self { endpoint, api_key })
    }

    fn effective(&self, _: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
    }
}
