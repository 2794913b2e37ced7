//! `adapter = "vertex"`: Vertex AI, Gemini models or Claude models (`publisher`), in a Google
//! Cloud project and region, with a bearer token: from a variable, a file read again when it
//! changes, or minted with a service account's key (`key_file.rs`). Vertex AI takes no key.

use serde::{Deserialize, Serialize};

use super::anthropic::max_output_tokens;
use super::credentials::{Credentials, one_credential};
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At, one_of};
use crate::config::{ConfigError, ProviderSpec};

mod key_file;

/// `adapter = "vertex"`.
#[derive(Debug, Clone)]
pub struct VertexConfig {
    /// `https://{location}-aiplatform.googleapis.com/v1` unless `base_url` says otherwise.
    pub endpoint: HttpEndpointConfig,
    /// The Google Cloud project.
    pub project: String,
    /// Its region, e.g. `us-central1`.
    pub location: String,
    /// Whose models the provider serves.
    pub publisher: VertexPublisher,
    /// A bearer token: from a variable (`Token`), a file read again when it changes, or
    /// minted with a service account's key (never `ApiKey`: Vertex AI takes none).
    pub auth: Credentials,
    /// Anthropic models: `max_tokens` of a request that sets none.
    pub default_max_output_tokens: u32,
}

/// Whose models a `vertex` provider serves, and so which protocol it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VertexPublisher {
    /// Gemini models (`publishers/google`), the Gemini API's request and stream.
    Google,
    /// Claude models (`publishers/anthropic`), Anthropic's messages through `streamRawPredict`.
    Anthropic,
}

const PUBLISHERS: [(&str, VertexPublisher); 2] = [
    ("google", VertexPublisher::Google),
    ("anthropic", VertexPublisher::Anthropic),
];

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    publisher: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_file: Option<String>,
    /// A service account's key file, whose key signs the requests for access tokens (the
    /// OAuth JWT bearer grant)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    service_account_file: Option<String>,
    /// ... sent here instead of the key file's `token_uri`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_max_output_tokens: Option<u32>,
}

/// A project's or a region's name: 1 to 63 letters, digits, `-` or `_`.
fn name(at: &At<'_>, field: &str, value: Option<&String>) -> Result<String, ConfigError> {
    match value {
        Some(v)
            if !v.is_empty()
                && v.len() <= 63
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Ok(v.clone())
        }
        Some(_) => Err(at.invalid(field, "must be 1 to 63 letters, digits, `-` or `_`")),
        None => Err(at.invalid(field, "is required for the `vertex` adapter")),
    }
}

impl Adapter for VertexConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
        let project = name(at, "project", raw.project.as_ref())?;
        let location = name(at, "location", raw.location.as_ref())?;
        let publisher = one_of(
            at,
            "publisher",
            "publisher",
            raw.publisher.as_deref(),
            &PUBLISHERS,
        )?
        .unwrap_or(VertexPublisher::Google);
        let auth = match &raw.service_account_file {
            Some(file) => key_file::credentials(at, &raw, file, &endpoint)?,
            None if raw.token_endpoint.is_some() => {
                return Err(
                    at.invalid("token_endpoint", "applies only with `service_account_file`")
                );
            }
            None => one_credential(
                at,
                None,
                raw.token_env.as_deref(),
                raw.token_file.as_deref(),
            )
            .ok_or_else(|| {
                at.invalid(
                    "token_env",
                    "the `vertex` adapter needs exactly one of `token_env`, `token_file` \
                         (an OAuth access token) or `service_account_file` (a key that mints \
                         them; `api_key_env` does not apply)",
                )
            })??,
        };
        let default_max_output_tokens = max_output_tokens(at, raw.default_max_output_tokens)?;
        let default_url = format!("https://{location}-aiplatform.googleapis.com/v1");
        Ok(Self {
            endpoint: HttpEndpointConfig::new(at, &endpoint, Some(default_url), true)?,
            project,
            location,
            publisher,
            auth,
            default_max_output_tokens,
        })
    }

    fn effective(&self, _: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
    }
}

impl ProviderSpec {
    /// `project`, `location` and `publisher` (`vertex`).
    pub fn vertex(self, project: &str, location: &str, publisher: &str) -> Self {
        self.set("project", project)
            .set("location", location)
            .set("publisher", publisher)
    }

    /// `service_account_file` (`vertex`): a key file that mints the access tokens.
    pub fn service_account_file(self, path: &str) -> Self {
        self.set("service_account_file", path)
    }

    /// `token_endpoint` (`vertex`, with `service_account_file`).
    pub fn token_endpoint(self, url: &str) -> Self {
        self.set("token_endpoint", url)
    }
}
