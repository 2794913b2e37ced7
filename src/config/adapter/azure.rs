//! `adapter = "azure-openai"`: Azure OpenAI, chat completions or the Responses API, on the v1
//! path or the deployments URL shape (`api_version`), with exactly one way to authenticate: an
//! `api-key`, or an Entra ID bearer token from a variable or a file.

use serde::{Deserialize, Serialize};

use super::credentials::{Credentials, one_credential};
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At, one_of};
use crate::config::{ConfigError, ProviderSpec};

/// `adapter = "azure-openai"`.
#[derive(Debug, Clone)]
pub struct AzureOpenAiConfig {
    /// The resource's endpoint, e.g. `https://my-resource.openai.azure.com`.
    pub endpoint: HttpEndpointConfig,
    /// Set: the deployments URL shape with this `api-version` (a model's name is its
    /// deployment's); unset: the v1 path.
    pub api_version: Option<String>,
    /// Which API the deployment is called through.
    pub api: AzureApi,
    /// How requests prove who sends them.
    pub auth: Credentials,
}

/// The API an `azure-openai` provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureApi {
    /// Chat completions (the default).
    ChatCompletions,
    /// The Responses API.
    Responses,
}

const APIS: [(&str, AzureApi); 2] = [
    ("chat_completions", AzureApi::ChatCompletions),
    ("responses", AzureApi::Responses),
];

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_file: Option<String>,
    /// The deployments URL shape's `api-version`; unset, the v1 path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    /// `chat_completions` (the default) or `responses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api: Option<String>,
}

impl Adapter for AzureOpenAiConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let api = one_of(at, "api", "API", raw.api.as_deref(), &APIS)?
            .unwrap_or(AzureApi::ChatCompletions);
        if let Some(version) = &raw.api_version
            && (version.is_empty()
                || !version
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'))
        {
            return Err(at.invalid(
                "api_version",
                "must be a version like `2024-10-21` (letters, digits, `-` and `.`)",
            ));
        }
        let auth = one_credential(
            at,
            raw.api_key_env.as_deref(),
            raw.token_env.as_deref(),
            raw.token_file.as_deref(),
        )
        .ok_or_else(|| {
            at.invalid(
                "api_key_env",
                "the `azure-openai` adapter needs exactly one of `api_key_env` (an `api-key`), \
                 `token_env` or `token_file` (an Entra ID bearer token)",
            )
        })??;
        Ok(Self {
            endpoint: HttpEndpointConfig::new(at, &endpoint, None, true)?,
            api_version: raw.api_version,
            api,
            auth,
        })
    }

    fn effective(&self, _: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
    }
}

impl ProviderSpec {
    /// `api_version` (`azure-openai`): the deployments URL shape with this `api-version`.
    pub fn api_version(self, version: &str) -> Self {
        self.set("api_version", version)
    }

    /// `api` (`azure-openai`): `chat_completions` or `responses`.
    pub fn api(self, api: &str) -> Self {
        self.set("api", api)
    }
}
