//! Raw -> validated. Each check names the dotted key it is about.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::raw::{RawAbility, RawConfig, RawPolicy, RawProvider, RawServer, RawStore};
use super::{
    AbilityConfig, AdapterConfig, Config, ConfigError, ModelConfig, PolicyConfig, ProviderConfig,
    ServerConfig, StoreConfig, StoreKind, Target, TimeoutsConfig,
};

/// Looks up an environment variable (the process environment, or a test's stand-in).
pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

mod adapter;

use adapter::adapter;

pub(super) fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
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

pub(super) fn positive(key: &str, d: Duration) -> Result<Duration, ConfigError> {
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
