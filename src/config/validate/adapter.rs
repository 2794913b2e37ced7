//! The adapter of a provider: which protocol, where, with which key and settings.

use super::{Env, invalid, variable};

mod bedrock;
use crate::config::raw::RawProvider;
use crate::config::{
    AdapterConfig, AnthropicConfig, AzureApi, AzureOpenAiConfig, ConfigError, Credentials,
    GeminiConfig, HttpEndpointConfig, MaxTokensField, OpenAiConfig, OpenAiResponsesConfig,
    ProxyUrl, Secret, TimeoutsConfig, VertexConfig, VertexPublisher,
};

/// The `anthropic-version` header when the file sets none: the current version of the
/// messages API.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` of an Anthropic request that sets no limit (the protocol requires one).
const ANTHROPIC_DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

/// The adapter and the settings only it uses; a setting given to an adapter that does not use
/// it is an error rather than silently ignored.
pub(super) fn adapter(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let kind = raw.adapter.as_str();
    if !matches!(
        kind,
        "scripted"
            | "openai"
            | "openai-responses"
            | "azure-openai"
            | "anthropic"
            | "gemini"
            | "vertex"
            | "bedrock"
    ) {
        return Err(invalid(
            format!("{key}.adapter"),
            format!(
                "unknown adapter `{kind}`; expected `openai`, `openai-responses`, \
                 `azure-openai`, `anthropic`, `gemini`, `vertex`, `bedrock` or `scripted`"
            ),
        ));
    }
    applicable(key, raw, kind)?;
    match kind {
        "openai" => openai(key, raw, timeouts, env),
        "openai-responses" => {
            let api_key = |var: &str| api_key(&format!("{key}.api_key_env"), var, env);
            Ok(AdapterConfig::OpenAiResponses(OpenAiResponsesConfig {
                endpoint: endpoint(key, raw, timeouts)?,
                api_key: raw.api_key_env.as_deref().map(api_key).transpose()?,
            }))
        }
        "anthropic" => anthropic(key, raw, timeouts, env),
        "azure-openai" => azure(key, raw, timeouts, env),
        "vertex" => vertex(key, raw, timeouts, env),
        "bedrock" => bedrock::bedrock(key, raw, timeouts, env),
        "gemini" => {
            let Some(var) = raw.api_key_env.as_deref() else {
                return Err(invalid(
                    format!("{key}.api_key_env"),
                    "is required for the `gemini` adapter",
                ));
            };
            Ok(AdapterConfig::Gemini(GeminiConfig {
                endpoint: endpoint(key, raw, timeouts)?,
                api_key: api_key(&format!("{key}.api_key_env"), var, env)?,
            }))
        }
        _ => Ok(AdapterConfig::Scripted),
    }
}

/// Every key set is one `kind` uses.
fn applicable(key: &str, raw: &RawProvider, kind: &str) -> Result<(), ConfigError> {
    let http = &[
        "openai",
        "openai-responses",
        "azure-openai",
        "anthropic",
        "gemini",
        "vertex",
        "bedrock",
    ][..];
    let keyed = &http[..http.len() - 1];
    let bedrock = &["bedrock"][..];
    let azure = &["azure-openai"][..];
    let vertex = &["vertex"][..];
    let bearer = &["azure-openai", "vertex"][..];
    for (field, present, used_by) in [
        ("base_url", raw.base_url.is_some(), http),
        ("api_key_env", raw.api_key_env.is_some(), keyed),
        ("proxy", raw.proxy.is_some(), http),
        ("allow_insecure_http", raw.allow_insecure_http, http),
        ("timeouts", raw.timeouts.is_some(), http),
        (
            "max_tokens_field",
            raw.max_tokens_field.is_some(),
            &["openai"][..],
        ),
        (
            "anthropic_version",
            raw.anthropic_version.is_some(),
            &["anthropic"][..],
        ),
        ("api_version", raw.api_version.is_some(), azure),
        ("api", raw.api.is_some(), azure),
        ("token_env", raw.token_env.is_some(), bearer),
        ("token_file", raw.token_file.is_some(), bearer),
        ("project", raw.project.is_some(), vertex),
        ("location", raw.location.is_some(), vertex),
        ("publisher", raw.publisher.is_some(), vertex),
        ("region", raw.region.is_some(), bedrock),
        ("aws_credentials", raw.aws_credentials.is_some(), bedrock),
        (
            "service_account_file",
            raw.service_account_file.is_some(),
            vertex,
        ),
        ("token_endpoint", raw.token_endpoint.is_some(), vertex),
        (
            "default_max_output_tokens",
            raw.default_max_output_tokens.is_some(),
            &["anthropic", "vertex"][..],
        ),
    ] {
        if present && !used_by.contains(&kind) {
            return Err(invalid(
                format!("{key}.{field}"),
                format!("does not apply to the `{kind}` adapter"),
            ));
        }
    }
    Ok(())
}

/// `adapter = "openai"`.
fn openai(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let api_key = |var: &str| api_key(&format!("{key}.api_key_env"), var, env);
    Ok(AdapterConfig::OpenAi(OpenAiConfig {
        endpoint: endpoint(key, raw, timeouts)?,
        api_key: raw.api_key_env.as_deref().map(api_key).transpose()?,
        max_tokens_field: one_of(
            key,
            "max_tokens_field",
            "field",
            raw.max_tokens_field.as_deref(),
            &[
                ("max_completion_tokens", MaxTokensField::MaxCompletionTokens),
                ("max_tokens", MaxTokensField::MaxTokens),
            ],
        )?
        .unwrap_or(MaxTokensField::MaxCompletionTokens),
    }))
}

/// `value` of setting `field` (of provider `key`) as one of `options`, by name; `None` when it
/// is unset. Any other name is an error naming the setting and what it takes.
fn one_of<T: Copy>(
    key: &str,
    field: &str,
    what: &str,
    value: Option<&str>,
    options: &[(&str, T)],
) -> Result<Option<T>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    if let Some((_, chosen)) = options.iter().find(|(name, _)| *name == value) {
        return Ok(Some(*chosen));
    }
    let names: Vec<String> = options
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(invalid(
        format!("{key}.{field}"),
        format!("unknown {what} `{value}`; expected {expected}"),
    ))
}

/// The one credential `raw` names: an `api-key` from `api_key_env` (where `with_api_key`),
/// or a bearer token from `token_env` or `token_file`; `None` when it names none, or more
/// than one; `Some(Err)` when its variable is not set.
fn credentials(
    key: &str,
    raw: &RawProvider,
    env: Env<'_>,
    with_api_key: bool,
) -> Option<Result<Credentials, ConfigError>> {
    let from = |field: &str, var: &str| api_key(&format!("{key}.{field}"), var, env);
    match (&raw.api_key_env, &raw.token_env, &raw.token_file) {
        (Some(var), None, None) if with_api_key => {
            Some(from("api_key_env", var).map(Credentials::ApiKey))
        }
        (None, Some(var), None) => Some(from("token_env", var).map(Credentials::Token)),
        (None, None, Some(path)) if !path.is_empty() => {
            Some(Ok(Credentials::TokenFile(path.into())))
        }
        _ => None,
    }
}

/// `adapter = "azure-openai"`: where, which API, and exactly one way to authenticate.
fn azure(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let apis = [
        ("chat_completions", AzureApi::ChatCompletions),
        ("responses", AzureApi::Responses),
    ];
    let api =
        one_of(key, "api", "API", raw.api.as_deref(), &apis)?.unwrap_or(AzureApi::ChatCompletions);
    if let Some(version) = &raw.api_version
        && (version.is_empty()
            || !version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'))
    {
        return Err(invalid(
            format!("{key}.api_version"),
            "must be a version like `2024-10-21` (letters, digits, `-` and `.`)",
        ));
    }
    let auth = credentials(key, raw, env, true).ok_or_else(|| {
        invalid(
            format!("{key}.api_key_env"),
            "the `azure-openai` adapter needs exactly one of `api_key_env` (an `api-key`), \
             `token_env` or `token_file` (an Entra ID bearer token)",
        )
    })??;
    Ok(AdapterConfig::AzureOpenAi(AzureOpenAiConfig {
        endpoint: endpoint(key, raw, timeouts)?,
        api_version: raw.api_version.clone(),
        api,
        auth,
    }))
}

/// `adapter = "vertex"`: the project, region and publisher, and a bearer token.
fn vertex(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let name = |field: &str, value: Option<&String>| match value {
        Some(v)
            if !v.is_empty()
                && v.len() <= 63
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Ok(v.clone())
        }
        Some(_) => Err(invalid(
            format!("{key}.{field}"),
            "must be 1 to 63 letters, digits, `-` or `_`",
        )),
        None => Err(invalid(
            format!("{key}.{field}"),
            "is required for the `vertex` adapter",
        )),
    };
    let project = name("project", raw.project.as_ref())?;
    let location = name("location", raw.location.as_ref())?;
    let publishers = [
        ("google", VertexPublisher::Google),
        ("anthropic", VertexPublisher::Anthropic),
    ];
    let publisher = one_of(
        key,
        "publisher",
        "publisher",
        raw.publisher.as_deref(),
        &publishers,
    )?
    .unwrap_or(VertexPublisher::Google);
    let auth = match &raw.service_account_file {
        Some(file) => service_account::credentials(key, raw, file, env)?,
        None if raw.token_endpoint.is_some() => {
            return Err(invalid(
                format!("{key}.token_endpoint"),
                "applies only with `service_account_file`",
            ));
        }
        None => credentials(key, raw, env, false).ok_or_else(|| {
            invalid(
                format!("{key}.token_env"),
                "the `vertex` adapter needs exactly one of `token_env`, `token_file` (an \
                 OAuth access token) or `service_account_file` (a key that mints them; \
                 `api_key_env` does not apply)",
            )
        })??,
    };
    let max_output = raw
        .default_max_output_tokens
        .unwrap_or(ANTHROPIC_DEFAULT_MAX_OUTPUT_TOKENS);
    if max_output == 0 {
        return Err(invalid(
            format!("{key}.default_max_output_tokens"),
            "must be at least 1",
        ));
    }
    let mut with_url = raw.clone();
    with_url
        .base_url
        .get_or_insert_with(|| format!("https://{location}-aiplatform.googleapis.com/v1"));
    Ok(AdapterConfig::Vertex(VertexConfig {
        endpoint: endpoint(key, &with_url, timeouts)?,
        project,
        location,
        publisher,
        auth,
        default_max_output_tokens: max_output,
    }))
}

/// `adapter = "anthropic"`.
fn anthropic(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let api_key = |var: &str| api_key(&format!("{key}.api_key_env"), var, env);
    let Some(var) = raw.api_key_env.as_deref() else {
        return Err(invalid(
            format!("{key}.api_key_env"),
            "is required for the `anthropic` adapter",
        ));
    };
    let version = raw
        .anthropic_version
        .as_deref()
        .unwrap_or(ANTHROPIC_VERSION);
    if !is_header_text(version) {
        return Err(invalid(
            format!("{key}.anthropic_version"),
            "must be a non-empty version like `2023-06-01`",
        ));
    }
    let max_output = raw
        .default_max_output_tokens
        .unwrap_or(ANTHROPIC_DEFAULT_MAX_OUTPUT_TOKENS);
    if max_output == 0 {
        return Err(invalid(
            format!("{key}.default_max_output_tokens"),
            "must be at least 1",
        ));
    }
    Ok(AdapterConfig::Anthropic(AnthropicConfig {
        endpoint: endpoint(key, raw, timeouts)?,
        api_key: api_key(var)?,
        version: version.to_owned(),
        default_max_output_tokens: max_output,
    }))
}

/// Where an HTTP adapter sends its requests: its base URL, timeouts and proxy. A key sent
/// over plain http to another machine can be read by anyone on the path.
pub(super) fn endpoint(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
) -> Result<HttpEndpointConfig, ConfigError> {
    let kind = raw.adapter.as_str();
    // Bedrock's requests carry a session token and a signature made with the secret key.
    let with_key = raw.api_key_env.is_some()
        || raw.token_env.is_some()
        || raw.token_file.is_some()
        || raw.service_account_file.is_some()
        || kind == "bedrock";
    // Connecting happens inside the first-byte wait. A connect timeout that long could
    // never fire: a slow connect would end as a first-byte `timeout` (outcome unknown,
    // not repeated) instead of `connect_failed` (nothing was sent: retryable).
    if timeouts.connect >= timeouts.first_byte {
        return Err(invalid(
            format!("{key}.timeouts.connect"),
            format!(
                "must be shorter than timeouts.first_byte ({} is not less than {}), \
                 which connecting runs inside",
                humantime::format_duration(timeouts.connect),
                humantime::format_duration(timeouts.first_byte)
            ),
        ));
    }
    let url_key = format!("{key}.base_url");
    let base_url = base_url(&url_key, kind, raw.base_url.as_deref())?;
    let proxy_key = format!("{key}.proxy");
    let proxy = raw
        .proxy
        .as_deref()
        .map(|p| proxy(&proxy_key, p))
        .transpose()?;
    if with_key && !raw.allow_insecure_http {
        if !secure_enough(&base_url) {
            return Err(invalid(
                url_key,
                format!(
                    "would send the API key over plain http to a host that is not this \
                     machine; use https, or set {key}.allow_insecure_http = true"
                ),
            ));
        }
        // A plain-http request goes to the proxy as it is, key and all (an https target
        // is tunnelled through it, encrypted end to end): the proxy is where the bytes go.
        if let Some(proxy) = &proxy
            && base_url.starts_with("http:")
            && !secure_enough(proxy.expose())
        {
            return Err(invalid(
                proxy_key,
                format!(
                    "would carry the API key in clear text to a proxy that is not this \
                     machine (a plain-http base_url is sent to the proxy as it is); use an \
                     https proxy or base_url, or set {key}.allow_insecure_http = true"
                ),
            ));
        }
    }
    Ok(HttpEndpointConfig {
        base_url,
        timeouts,
        proxy,
    })
}

/// An http(s) base URL, returned without its trailing slash. The text is never echoed in an
/// error: a malformed URL may still carry credentials.
fn base_url(key: &str, adapter: &str, text: Option<&str>) -> Result<String, ConfigError> {
    let Some(text) = text else {
        return Err(invalid(
            key,
            format!("is required for the `{adapter}` adapter"),
        ));
    };
    let url = url::Url::parse(text).map_err(|e| invalid(key, format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(key, "must be an http:// or https:// URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            key,
            "must not carry credentials; name the key's variable in `api_key_env`",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(key, "must not have a query or a fragment"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Whether a key may go to `base_url` (already checked to be http or https): over https, or
/// over http to this machine.
fn secure_enough(base_url: &str) -> bool {
    let Ok(url) = url::Url::parse(base_url) else {
        return false;
    };
    if url.scheme() == "https" {
        return true;
    }
    match url.host_str() {
        Some(host) if host.eq_ignore_ascii_case("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// A proxy URL (http or https). The text is never echoed in an error: it may carry the
/// proxy's credentials.
fn proxy(key: &str, text: &str) -> Result<ProxyUrl, ConfigError> {
    let url = url::Url::parse(text).map_err(|e| invalid(key, format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(key, "must be an http:// or https:// URL"));
    }
    Ok(ProxyUrl::new(text))
}

/// Reads the key from the variable `var`. Errors name the variable, never the value.
pub(super) fn api_key(key: &str, var: &str, env: Env<'_>) -> Result<Secret, ConfigError> {
    let value = variable(key, var, env)?;
    if !is_header_text(&value) {
        return Err(invalid(
            key,
            format!(
                "environment variable `{var}` holds a space, a line break or another character \
                 an HTTP header cannot carry"
            ),
        ));
    }
    Ok(Secret::new(value))
}

/// Non-empty visible ASCII: what a header value may carry without quoting surprises.
fn is_header_text(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic())
}

mod service_account;
#[cfg(test)]
mod tests;
