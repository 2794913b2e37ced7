//! `adapter = "anthropic"`: Anthropic's messages API, with a key (`x-api-key`), the API
//! version it speaks, and the output limit of a request that sets none (the protocol
//! requires one).

use serde::{Deserialize, Serialize};

use super::credentials::{api_key, is_header_text};
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At};
use crate::config::{ConfigError, ProviderSpec, Secret};

/// The `anthropic-version` header when the file sets none: the current version of the
/// messages API.
const VERSION: &str = "2023-06-01";

/// `max_tokens` of an Anthropic request that sets no limit (the protocol requires one); a
/// `vertex` provider serving Claude models takes the same.
pub(super) const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

/// `adapter = "anthropic"`.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Where to send requests.
    pub endpoint: HttpEndpointConfig,
    /// Sent as `x-api-key`.
    pub api_key: Secret,
    /// Sent as `anthropic-version`.
    pub version: String,
    /// `max_tokens` of a request that sets no `max_output_tokens`: the protocol requires one.
    pub default_max_output_tokens: u32,
}

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    anthropic_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_max_output_tokens: Option<u32>,
}

/// `default_max_output_tokens`, at least 1 (`anthropic`, and `vertex` for Claude models).
pub(super) fn max_output_tokens(at: &At<'_>, set: Option<u32>) -> Result<u32, ConfigError> {
    match set.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS) {
        0 => Err(at.invalid("default_max_output_tokens", "must be at least 1")),
        tokens => Ok(tokens),
    }
}

impl Adapter for AnthropicConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let Some(var) = raw.api_key_env.as_deref() else {
            return Err(at.invalid("api_key_env", "is required for the `anthropic` adapter"));
        };
        let version = raw.anthropic_version.as_deref().unwrap_or(VERSION);
        if !is_header_text(version) {
            return Err(at.invalid(
                "anthropic_version",
                "must be a non-empty version like `2023-06-01`",
            ));
        }
        let default_max_output_tokens = max_output_tokens(at, raw.default_max_output_tokens)?;
        Ok(Self {
            endpoint: HttpEndpointConfig::new(at, &endpoint, None, true)?,
            api_key: api_key(at, "api_key_env", var)?,
            version: version.to_owned(),
            default_max_output_tokens,
        })
    }

    fn effective(&self, raw: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
        raw.anthropic_version = Some(self.version.clone());
        raw.default_max_output_tokens = Some(self.default_max_output_tokens);
    }
}

impl ProviderSpec {
    /// An `anthropic` provider at `base_url`.
    pub fn anthropic(base_url: &str) -> Self {
        Self::of("anthropic").base_url(base_url)
    }

    /// `anthropic_version` (`anthropic`).
    pub fn anthropic_version(self, version: &str) -> Self {
        self.set("anthropic_version", version)
    }

    /// `default_max_output_tokens` (`anthropic`, `vertex`).
    pub fn default_max_output_tokens(self, tokens: u32) -> Self {
        self.set("default_max_output_tokens", i64::from(tokens))
    }
}
