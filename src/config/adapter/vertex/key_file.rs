//! `service_account_file` (`vertex`): the key file read and checked at start-up, and where
//! its token requests go. The assertion a request carries is a credential for as long as it
//! is valid, so it goes where a key may: over https, or plain http to this machine.

use super::Raw;
use crate::config::adapter::At;
use crate::config::adapter::credentials::Credentials;
use crate::config::adapter::http::{RawEndpoint, secure_enough};
use crate::config::{ConfigError, ServiceAccount};

/// The service account of the key file `file`, the one way the provider gets its tokens.
/// Where files are only named (`Env::reads_files`), the file is not read: what stands in for
/// it is a token file of the same name, never served.
pub(super) fn credentials(
    at: &At<'_>,
    raw: &Raw,
    file: &str,
    endpoint: &RawEndpoint,
) -> Result<Credentials, ConfigError> {
    const FIELD: &str = "service_account_file";
    for (other, set) in [
        ("token_env", raw.token_env.is_some()),
        ("token_file", raw.token_file.is_some()),
    ] {
        if set {
            return Err(at.invalid(
                FIELD,
                format!(
                    "`{other}` and `service_account_file` are both set: keep one (each is \
                     a way to the access token)"
                ),
            ));
        }
    }
    if file.is_empty() {
        return Err(at.invalid(FIELD, "must name the key file"));
    }
    if !at.env.reads_files() {
        if let Some(token_endpoint) = &raw.token_endpoint {
            url(at, "token_endpoint", "is", token_endpoint)?;
        }
        return Ok(Credentials::TokenFile(file.into()));
    }
    let account = ServiceAccount::read(file.into(), raw.token_endpoint.as_deref())
        .map_err(|e| at.invalid(FIELD, e.to_string()))?;
    // Without `token_endpoint`, the file's `token_uri` is where the requests go: the file
    // is what the error names.
    let (field, whose) = match &raw.token_endpoint {
        Some(_) => ("token_endpoint", "is"),
        None => (FIELD, "has a `token_uri` that is"),
    };
    url(at, field, whose, &account.token_endpoint)?;
    if !endpoint.allow_insecure_http {
        let proxied_http = endpoint.proxy.as_deref().is_some_and(|proxy| {
            account.token_endpoint.starts_with("http:") && !secure_enough(proxy)
        });
        if !secure_enough(&account.token_endpoint) || proxied_http {
            return Err(at.invalid(
                field,
                format!(
                    "would send the service account's signed token requests over plain \
                     http to a host that is not this machine; use https, or set \
                     {}.allow_insecure_http = true",
                    at.key
                ),
            ));
        }
    }
    Ok(Credentials::ServiceAccount(account))
}

/// `text`, which `field` names (`whose` says how), is an http(s) URL without credentials or a
/// fragment. The text is never echoed: it may carry credentials.
fn url(at: &At<'_>, field: &str, whose: &str, text: &str) -> Result<(), ConfigError> {
    let parsed =
        url::Url::parse(text).map_err(|e| at.invalid(field, format!("{whose} not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(at.invalid(field, format!("{whose} not an http:// or https:// URL")));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(at.invalid(field, format!("{whose} a URL with credentials")));
    }
    if parsed.fragment().is_some() {
        return Err(at.invalid(field, format!("{whose} a URL with a fragment")));
    }
    Ok(())
}
