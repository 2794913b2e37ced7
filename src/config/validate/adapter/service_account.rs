//! `service_account_file` (`vertex`): the key file read and checked at start-up, and where
//! its token requests go. The assertion a request carries is a credential for as long as it
//! is valid, so it goes where a key may: over https, or plain http to this machine.

use super::{Env, invalid, secure_enough};
use crate::config::raw::RawProvider;
use crate::config::{ConfigError, Credentials, ServiceAccount};

/// The service account of provider `key`'s key file `file`, the one way it gets its tokens.
/// Where files are only named (`Env::reads_files`), the file is not read: what stands in for
/// it is a token file of the same name, never served.
pub(super) fn credentials(
    key: &str,
    raw: &RawProvider,
    file: &str,
    env: Env<'_>,
) -> Result<Credentials, ConfigError> {
    let field = format!("{key}.service_account_file");
    for (other, set) in [
        ("token_env", raw.token_env.is_some()),
        ("token_file", raw.token_file.is_some()),
    ] {
        if set {
            return Err(invalid(
                field,
                format!(
                    "`{other}` and `service_account_file` are both set: keep one (each is \
                     a way to the access token)"
                ),
            ));
        }
    }
    if file.is_empty() {
        return Err(invalid(field, "must name the key file"));
    }
    if !env.reads_files() {
        if let Some(endpoint) = &raw.token_endpoint {
            url(&format!("{key}.token_endpoint"), "is", endpoint)?;
        }
        return Ok(Credentials::TokenFile(file.into()));
    }
    let account = ServiceAccount::read(file.into(), raw.token_endpoint.as_deref())
        .map_err(|reason| invalid(&field, reason))?;
    // Without `token_endpoint`, the file's `token_uri` is where the requests go: the file
    // is what the error names.
    let (where_key, whose) = match &raw.token_endpoint {
        Some(_) => (format!("{key}.token_endpoint"), "is"),
        None => (field, "has a `token_uri` that is"),
    };
    url(&where_key, whose, &account.token_endpoint)?;
    if !raw.allow_insecure_http {
        let proxied_http = raw.proxy.as_deref().is_some_and(|proxy| {
            account.token_endpoint.starts_with("http:") && !secure_enough(proxy)
        });
        if !secure_enough(&account.token_endpoint) || proxied_http {
            return Err(invalid(
                where_key,
                format!(
                    "would send the service account's signed token requests over plain \
                     http to a host that is not this machine; use https, or set \
                     {key}.allow_insecure_http = true"
                ),
            ));
        }
    }
    Ok(Credentials::ServiceAccount(account))
}

/// `text`, which `key` names (`whose` says how), is an http(s) URL without credentials or a
/// fragment. The text is never echoed: it may carry credentials.
fn url(key: &str, whose: &str, text: &str) -> Result<(), ConfigError> {
    let parsed =
        url::Url::parse(text).map_err(|e| invalid(key, format!("{whose} not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(
            key,
            format!("{whose} not an http:// or https:// URL"),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(key, format!("{whose} a URL with credentials")));
    }
    if parsed.fragment().is_some() {
        return Err(invalid(key, format!("{whose} a URL with a fragment")));
    }
    Ok(())
}
