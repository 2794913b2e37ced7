//! Raw -> validated. Each check names the dotted key it is about.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::raw::{RawAbility, RawConfig, RawPolicy, RawProvider, RawServer, RawStore};
use super::{
    AbilityConfig, AdapterConfig, AnthropicConfig, Config, ConfigError, HttpEndpointConfig,
    MaxTokensField, ModelConfig, OpenAiConfig, PolicyConfig, ProviderConfig, Secret, ServerConfig,
    StoreConfig, StoreKind, Target, TimeoutsConfig,
};

/// Looks up an environment variable (the process environment, or a test's stand-in).
pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The `anthropic-version` header when the file sets none: the current version of the
/// messages API.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` of an Anthropic request that sets no limit (the protocol requires one).
const ANTHROPIC_DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

pub(super) fn validate(raw: RawConfig, env: Env<'_>) -> Result<Config, ConfigError> {
    let server = server(raw.server)?;
    let store = store(raw.store)?;
    let mut providers = BTreeMap::new();
    for (name, p) in raw.providers {
        let key = format!("providers.{name}");
        let provider = provider(&key, &name, p, env)?;
        providers.insert(provider.name.clone(), provider);
    }
    let mut policies = BTreeMap::new();
    for (name, p) in raw.policies {
        let key = format!("policies.{name}");
        let policy = policy(&key, &name, p, &providers)?;
        policies.insert(policy.name.clone(), policy);
    }
    let mut abilities = BTreeMap::new();
    for (name, a) in raw.abilities {
        let key = format!("abilities.{name}");
        let ability = ability(&key, &name, a, &policies)?;
        abilities.insert(ability.name.clone(), ability);
    }
    Ok(Config {
        server,
        store,
        providers,
        policies,
        abilities,
    })
}

fn name(key: &str, name: &str) -> Result<Arc<str>, ConfigError> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !ok {
        return Err(invalid(
            key,
            "names use only letters, digits, `_`, `-` and `.`",
        ));
    }
    Ok(name.into())
}

fn address(key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| {
        invalid(
            key,
            format!("`{text}` is not an address like 127.0.0.1:50051"),
        )
    })
}

fn positive(key: &str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        return Err(invalid(key, "must be greater than zero"));
    }
    Ok(d)
}

fn server(raw: RawServer) -> Result<ServerConfig, ConfigError> {
    let default_deadline = positive("server.default_deadline", raw.default_deadline)?;
    let max_deadline = positive("server.max_deadline", raw.max_deadline)?;
    if default_deadline > max_deadline {
        return Err(invalid(
            "server.default_deadline",
            "must not be longer than server.max_deadline",
        ));
    }
    if raw.metrics_listen.is_some() {
        // Accepting the key and serving nothing would look like a broken endpoint.
        return Err(invalid(
            "server.metrics_listen",
            "the metrics endpoint is not available in this version",
        ));
    }
    if raw.max_input_bytes == 0 {
        return Err(invalid(
            "server.max_input_bytes",
            "must be greater than zero",
        ));
    }
    Ok(ServerConfig {
        listen: address("server.listen", &raw.listen)?,
        drain_timeout: raw.drain_timeout,
        default_deadline,
        max_deadline,
        max_input_bytes: raw.max_input_bytes,
    })
}

fn store(raw: RawStore) -> Result<StoreConfig, ConfigError> {
    let kind = match raw.kind.as_str() {
        "memory" => StoreKind::Memory,
        "file" => {
            return Err(invalid(
                "store.kind",
                "the `file` store is not available in this version; use `memory`",
            ));
        }
        other => {
            return Err(invalid(
                "store.kind",
                format!("unknown kind `{other}`; expected `memory`"),
            ));
        }
    };
    for (key, value) in [
        ("store.path", &raw.path),
        ("store.key_env", &raw.key_env),
        ("store.key_file", &raw.key_file),
    ] {
        if value.is_some() {
            return Err(invalid(key, "only applies to the `file` store"));
        }
    }
    if raw.max_executions == 0 {
        return Err(invalid("store.max_executions", "must be at least 1"));
    }
    Ok(StoreConfig {
        kind,
        max_executions: raw.max_executions,
        retention: raw.retention,
    })
}

fn provider(
    key: &str,
    table: &str,
    raw: RawProvider,
    env: Env<'_>,
) -> Result<ProviderConfig, ConfigError> {
    let name = name(key, table)?;
    if raw.max_concurrency == 0 {
        return Err(invalid(
            format!("{key}.max_concurrency"),
            "must be at least 1",
        ));
    }
    let timeouts = TimeoutsConfig {
        connect: positive(&format!("{key}.timeouts.connect"), raw.timeouts.connect)?,
        first_byte: positive(
            &format!("{key}.timeouts.first_byte"),
            raw.timeouts.first_byte,
        )?,
        idle: positive(&format!("{key}.timeouts.idle"), raw.timeouts.idle)?,
    };
    let adapter = adapter(key, &raw, timeouts, env)?;
    if raw.models.is_empty() {
        return Err(invalid(format!("{key}.models"), "needs at least one model"));
    }
    let mut models: Vec<ModelConfig> = Vec::with_capacity(raw.models.len());
    for (i, m) in raw.models.into_iter().enumerate() {
        let mkey = format!("{key}.models[{i}]");
        if m.name.is_empty() || m.name.contains(char::is_whitespace) {
            return Err(invalid(
                format!("{mkey}.name"),
                "must be non-empty without spaces",
            ));
        }
        if models.iter().any(|other| *other.name == *m.name) {
            return Err(invalid(
                format!("{mkey}.name"),
                format!("model `{}` is listed twice", m.name),
            ));
        }
        let mut capabilities = BTreeSet::new();
        for (j, c) in m.capabilities.into_iter().enumerate() {
            if c.is_empty() || c.contains(char::is_whitespace) {
                return Err(invalid(
                    format!("{mkey}.capabilities[{j}]"),
                    "must be non-empty without spaces",
                ));
            }
            capabilities.insert(c);
        }
        if m.script.is_some() && !matches!(adapter, AdapterConfig::Scripted) {
            return Err(invalid(
                format!("{mkey}.script"),
                "only applies to the `scripted` adapter",
            ));
        }
        let script = m.script.unwrap_or_default();
        script
            .validate()
            .map_err(|(field, reason)| invalid(format!("{mkey}.script.{field}"), reason))?;
        models.push(ModelConfig {
            name: m.name.into(),
            capabilities,
            script,
        });
    }
    Ok(ProviderConfig {
        name,
        adapter,
        max_concurrency: raw.max_concurrency,
        queue_capacity: raw.queue_capacity,
        retry_unknown_outcome: raw.retry_unknown_outcome,
        models,
    })
}

/// The adapter and the settings only it uses; a setting given to an adapter that does not use
/// it is an error rather than silently ignored.
fn adapter(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let kind = raw.adapter.as_str();
    if !matches!(kind, "scripted" | "openai" | "anthropic") {
        return Err(invalid(
            format!("{key}.adapter"),
            format!("unknown adapter `{kind}`; expected `openai`, `anthropic` or `scripted`"),
        ));
    }
    let http = &["openai", "anthropic"][..];
    for (field, present, used_by) in [
        ("base_url", raw.base_url.is_some(), http),
        ("api_key_env", raw.api_key_env.is_some(), http),
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
        (
            "default_max_output_tokens",
            raw.default_max_output_tokens.is_some(),
            &["anthropic"][..],
        ),
    ] {
        if present && !used_by.contains(&kind) {
            return Err(invalid(
                format!("{key}.{field}"),
                format!("does not apply to the `{kind}` adapter"),
            ));
        }
    }
    let endpoint = || -> Result<HttpEndpointConfig, ConfigError> {
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
        Ok(HttpEndpointConfig {
            base_url: base_url(&format!("{key}.base_url"), kind, raw.base_url.as_deref())?,
            timeouts,
        })
    };
    let api_key = |var: &str| api_key(&format!("{key}.api_key_env"), var, env);
    match kind {
        "openai" => Ok(AdapterConfig::OpenAi(OpenAiConfig {
            endpoint: endpoint()?,
            api_key: raw.api_key_env.as_deref().map(api_key).transpose()?,
            max_tokens_field: match raw.max_tokens_field.as_deref() {
                None | Some("max_completion_tokens") => MaxTokensField::MaxCompletionTokens,
                Some("max_tokens") => MaxTokensField::MaxTokens,
                Some(other) => {
                    return Err(invalid(
                        format!("{key}.max_tokens_field"),
                        format!(
                            "unknown field `{other}`; expected `max_completion_tokens` or `max_tokens`"
                        ),
                    ));
                }
            },
        })),
        "anthropic" => {
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
                endpoint: endpoint()?,
                api_key: api_key(var)?,
                version: version.to_owned(),
                default_max_output_tokens: max_output,
            }))
        }
        _ => Ok(AdapterConfig::Scripted),
    }
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
    let url = reqwest::Url::parse(text).map_err(|e| invalid(key, format!("is not a URL: {e}")))?;
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

/// Reads the key from the variable `var`. Errors name the variable, never the value.
fn api_key(key: &str, var: &str, env: Env<'_>) -> Result<Secret, ConfigError> {
    if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(invalid(
            key,
            "must name an environment variable (letters, digits and `_`)",
        ));
    }
    let Some(value) = env(var) else {
        return Err(invalid(
            key,
            format!("environment variable `{var}` is not set (or is not valid UTF-8)"),
        ));
    };
    if value.is_empty() {
        return Err(invalid(
            key,
            format!("environment variable `{var}` is empty"),
        ));
    }
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

fn policy(
    key: &str,
    table: &str,
    raw: RawPolicy,
    providers: &BTreeMap<Arc<str>, ProviderConfig>,
) -> Result<PolicyConfig, ConfigError> {
    let name = name(key, table)?;
    if raw.targets.is_empty() {
        return Err(invalid(
            format!("{key}.targets"),
            "needs at least one target",
        ));
    }
    let mut targets: Vec<Target> = Vec::with_capacity(raw.targets.len());
    for (i, t) in raw.targets.iter().enumerate() {
        let tkey = format!("{key}.targets[{i}]");
        let Some((provider, model)) = t.split_once('/') else {
            return Err(invalid(
                tkey,
                format!("`{t}` is not of the form `provider/model`"),
            ));
        };
        let Some(p) = providers.get(provider) else {
            return Err(invalid(tkey, format!("unknown provider `{provider}`")));
        };
        let Some(m) = p.model(model) else {
            return Err(invalid(
                tkey,
                format!("provider `{provider}` has no model `{model}`"),
            ));
        };
        let target = Target {
            provider: p.name.clone(),
            model: m.name.clone(),
        };
        if targets.contains(&target) {
            return Err(invalid(tkey, format!("`{t}` is listed twice")));
        }
        targets.push(target);
    }
    if raw.max_attempts == 0 {
        return Err(invalid(format!("{key}.max_attempts"), "must be at least 1"));
    }
    Ok(PolicyConfig {
        name,
        targets,
        max_attempts: raw.max_attempts,
        retry_budget: positive(&format!("{key}.retry_budget"), raw.retry_budget)?,
        retries_per_target: raw.retries_per_target,
        backoff: raw.backoff,
    })
}

fn ability(
    key: &str,
    table: &str,
    raw: RawAbility,
    policies: &BTreeMap<Arc<str>, PolicyConfig>,
) -> Result<AbilityConfig, ConfigError> {
    let name = name(key, table)?;
    let lookup = |k: String, p: &str| {
        policies
            .get_key_value(p)
            .map(|(n, _)| n.clone())
            .ok_or_else(|| invalid(k, format!("unknown policy `{p}`")))
    };
    let default_policy = lookup(format!("{key}.policy"), &raw.policy)?;
    let mut allowed_policies = BTreeSet::from([default_policy.clone()]);
    for (i, p) in raw.allowed_policies.iter().enumerate() {
        allowed_policies.insert(lookup(format!("{key}.allowed_policies[{i}]"), p)?);
    }
    let mut requires = BTreeSet::new();
    for (i, c) in raw.requires.into_iter().enumerate() {
        if c.is_empty() || c.contains(char::is_whitespace) {
            return Err(invalid(
                format!("{key}.requires[{i}]"),
                "must be non-empty without spaces",
            ));
        }
        requires.insert(c);
    }
    Ok(AbilityConfig {
        name,
        default_policy,
        allowed_policies,
        requires,
    })
}
