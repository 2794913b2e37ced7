//! Credentials from the environment: a key from the variable a key names (`api_key_env`, and
//! AWS's keys), and the bearer token `azure-openai` and `vertex` may take instead
//! (`token_env`, `token_file`). A variable is read once, at start-up; errors name the
//! variable, never its value.

use super::At;
use super::http::{HttpEndpointConfig, RawEndpoint};
use crate::config::field::variable;
use crate::config::{ConfigError, ProviderSpec, Secret, ServiceAccount};

/// How a provider that takes more than a key proves who calls it (`azure-openai`, `vertex`).
#[derive(Debug, Clone)]
pub enum Credentials {
    /// `api_key_env`: sent as `api-key`.
    ApiKey(Secret),
    /// `token_env`: an Entra ID token, sent as `Authorization: Bearer`.
    Token(Secret),
    /// `token_file`: the same, read from this file and again whenever it changes.
    TokenFile(std::path::PathBuf),
    /// `service_account_file` (`vertex`): access tokens minted with this service account's
    /// key, fetched from its token endpoint and refreshed before they expire.
    ServiceAccount(ServiceAccount),
}

/// The key in the variable `var`, which `field` names: one an HTTP header can carry.
pub(super) fn api_key(at: &At<'_>, field: &str, var: &str) -> Result<Secret, ConfigError> {
    let key = at.field(field);
    let value = variable(&key, var, at.env)?;
    if !is_header_text(&value) {
        return Err(at.invalid(
            field,
            format!(
                "environment variable `{var}` holds a space, a line break or another character \
                 an HTTP header cannot carry"
            ),
        ));
    }
    Ok(Secret::new(value))
}

/// An endpoint whose key is optional (`openai`, `openai-responses`: local servers take none),
/// and the key from `api_key_env` when it names one.
pub(super) fn optional_key(
    at: &At<'_>,
    endpoint: &RawEndpoint,
    api_key_env: Option<&str>,
) -> Result<(HttpEndpointConfig, Option<Secret>), ConfigError> {
    let endpoint = HttpEndpointConfig::new(at, endpoint, None, api_key_env.is_some())?;
    let key = api_key_env
        .map(|var| api_key(at, "api_key_env", var))
        .transpose()?;
    Ok((endpoint, key))
}

/// Non-empty visible ASCII: what a header value may carry without quoting surprises.
pub(super) fn is_header_text(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic())
}

/// The one credential named: an `api-key` from `api_key_env` (where it is given), or a bearer
/// token from `token_env` or `token_file`; `None` when none is named, or more than one;
/// `Some(Err)` when its variable is not set.
pub(super) fn one_credential(
    at: &At<'_>,
    api_key_env: Option<&str>,
    token_env: Option<&str>,
    token_file: Option<&str>,
) -> Option<Result<Credentials, ConfigError>> {
    match (api_key_env, token_env, token_file) {
        (Some(var), None, None) => Some(api_key(at, "api_key_env", var).map(Credentials::ApiKey)),
        (None, Some(var), None) => Some(api_key(at, "token_env", var).map(Credentials::Token)),
        (None, None, Some(path)) if !path.is_empty() => {
            Some(Ok(Credentials::TokenFile(path.into())))
        }
        _ => None,
    }
}

/// Where the keys and tokens come from.
impl ProviderSpec {
    /// `api_key_env`.
    pub fn api_key_env(self, variable: &str) -> Self {
        self.set("api_key_env", variable)
    }

    /// `token_env` (`azure-openai`, `vertex`): a bearer token from this variable.
    pub fn token_env(self, variable: &str) -> Self {
        self.set("token_env", variable)
    }

    /// `token_file` (`azure-openai`, `vertex`): a bearer token from this file, read again
    /// when it changes.
    pub fn token_file(self, path: &str) -> Self {
        self.set("token_file", path)
    }
}
