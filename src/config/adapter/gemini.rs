//! `adapter = "gemini"`: Google's Gemini API, with a key (`x-goog-api-key`).

use serde::{Deserialize, Serialize};

use super::credentials::api_key;
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At};
use crate::config::{ConfigError, Secret};

/// `adapter = "gemini"`.
#[derive(Debug, Clone)]
pub struct GeminiConfig {
    /// Where to send requests (`{base_url}/models/{model}:streamGenerateContent`).
    pub endpoint: HttpEndpointConfig,
    /// Sent as `x-goog-api-key`.
    pub api_key: Secret,
}

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
}

impl Adapter for GeminiConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let Some(var) = raw.api_key_env.as_deref() else {
            return Err(at.invalid("api_key_env", "is required for the `gemini` adapter"));
        };
        Ok(Self {
            endpoint: HttpEndpointConfig::new(at, &endpoint, None, true)?,
            api_key: api_key(at, "api_key_env", var)?,
        })
    }

    fn effective(&self, _: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
    }
}
