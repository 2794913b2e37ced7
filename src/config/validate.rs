//! Raw -> validated. Each check names the dotted key it is about; every duration and count is
//! bounded (`bounds.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::execution::Priority;

use super::raw::{RawConfig, RawProvider};
use super::{AdapterConfig, Config, ConfigError, ModelConfig, OnUnknownOutcome, ProviderConfig};

mod health;
mod limiter;
mod routing;
mod server;
mod stand_ins;
mod store;

pub(super) use stand_ins::StandIns;

use super::bounds::{self, count, items, name_text};
use super::field::{Env, invalid, variable};

pub(super) fn validate(raw: RawConfig, env: Env<'_>) -> Result<Config, ConfigError> {
    let server = server::server(raw.server)?;
    let store = store::store(raw.store, env)?;
    let mut providers = BTreeMap::new();
    for (name, p) in raw.providers {
        let key = format!("providers.{name}");
        let provider = provider(&key, &name, p, env)?;
        limiter::shared_key(&key, &provider, &providers)?;
        providers.insert(provider.name.clone(), provider);
    }
    let mut policies = BTreeMap::new();
    for (name, p) in raw.policies {
        let key = format!("policies.{name}");
        let policy = routing::policy(&key, &name, p, &providers)?;
        policies.insert(policy.name.clone(), policy);
    }
    let mut abilities = BTreeMap::new();
    for (name, a) in raw.abilities {
        let key = format!("abilities.{name}");
        let ability = routing::ability(&key, &name, a, &policies, &providers)?;
        abilities.insert(ability.name.clone(), ability);
    }
    if abilities.is_empty() {
        // Every call names an ability: without one the server would say SERVING and fail
        // every call.
        return Err(invalid(
            "abilities",
            "needs at least one ability ([abilities.NAME]): every call names one",
        ));
    }
    let ingress = raw
        .ingress
        .map(|raw| super::ingress::ingress(raw, env))
        .transpose()?;
    Ok(Config {
        server,
        store,
        providers,
        policies,
        abilities,
        ingress,
    })
}

/// A table's name: letters, digits, `_`, `-` and `.`, at most [`bounds::MAX_NAME_BYTES`].
fn name(key: &str, name: &str) -> Result<Arc<str>, ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= bounds::MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !ok {
        return Err(invalid(
            key,
            format!(
                "names use only letters, digits, `_`, `-` and `.`, at most {} bytes",
                bounds::MAX_NAME_BYTES
            ),
        ));
    }
    Ok(name.into())
}

/// Capability names, each checked, as a set.
fn capabilities(key: &str, names: Vec<String>) -> Result<BTreeSet<String>, ConfigError> {
    items(key, &names, bounds::MAX_CAPABILITIES)?;
    let mut set = BTreeSet::new();
    for (i, c) in names.into_iter().enumerate() {
        name_text(&format!("{key}[{i}]"), &c)?;
        set.insert(c);
    }
    Ok(set)
}

/// `on_unknown_outcome`, or its older spelling `retry_unknown_outcome` (`true` is
/// `"retry"`, `false` is `"stop"`); both only when they say the same.
fn on_unknown_outcome(key: &str, raw: &RawProvider) -> Result<OnUnknownOutcome, ConfigError> {
    let legacy = raw.retry_unknown_outcome.map(|retry| {
        if retry {
            OnUnknownOutcome::Retry
        } else {
            OnUnknownOutcome::Stop
        }
    });
    match (legacy, raw.on_unknown_outcome) {
        (Some(old), Some(new)) if old != new => Err(invalid(
            format!("{key}.retry_unknown_outcome"),
            format!(
                "says `on_unknown_outcome = \"{}\"`, and `on_unknown_outcome` says \"{}\": \
                 keep `on_unknown_outcome` alone (`retry_unknown_outcome` is its older spelling)",
                old.as_str(),
                new.as_str()
            ),
        )),
        (old, new) => Ok(new.or(old).unwrap_or_default()),
    }
}

/// `queue_aging` when unset.
const DEFAULT_QUEUE_AGING: Duration = Duration::from_secs(2);

/// Each admission class's queue capacity: `queues.CLASS`, else `queue_capacity`.
fn queues(key: &str, raw: &RawProvider) -> Result<[u32; 3], ConfigError> {
    let base = count(
        &format!("{key}.queue_capacity"),
        raw.queue_capacity,
        0,
        bounds::MAX_QUEUE,
    )?;
    let set = raw.queues.clone().unwrap_or_default();
    let mut capacity = [base; 3];
    for (priority, value) in
        Priority::ALL
            .into_iter()
            .zip([set.interactive, set.standard, set.batch])
    {
        if let Some(value) = value {
            capacity[priority.index()] = count(
                &format!("{key}.queues.{}", priority.as_str()),
                value,
                0,
                bounds::MAX_QUEUE,
            )?;
        }
    }
    Ok(capacity)
}

fn provider(
    key: &str,
    table: &str,
    raw: RawProvider,
    env: Env<'_>,
) -> Result<ProviderConfig, ConfigError> {
    let name = name(key, table)?;
    let on_unknown_outcome = on_unknown_outcome(key, &raw)?;
    let max_concurrency = count(
        &format!("{key}.max_concurrency"),
        raw.max_concurrency,
        1,
        bounds::MAX_CONCURRENCY,
    )?;
    let queue_capacity = queues(key, &raw)?;
    let queue_aging = bounds::duration_from(
        &format!("{key}.queue_aging"),
        raw.queue_aging.unwrap_or(DEFAULT_QUEUE_AGING),
        Duration::from_millis(1),
        bounds::MAX_WAIT,
    )?;
    let adapter = super::adapter::validate(key, &raw.adapter, raw.settings.clone(), env)?;
    let limiter = raw
        .limiter
        .as_ref()
        .map(|l| limiter::limiter(key, table, l, max_concurrency, env))
        .transpose()?;
    let health = health::health(key, raw.health.as_ref())?;
    if raw.models.is_empty() {
        return Err(invalid(format!("{key}.models"), "needs at least one model"));
    }
    items(&format!("{key}.models"), &raw.models, bounds::MAX_MODELS)?;
    let mut models: Vec<ModelConfig> = Vec::with_capacity(raw.models.len());
    for (i, m) in raw.models.into_iter().enumerate() {
        let mkey = format!("{key}.models[{i}]");
        name_text(&format!("{mkey}.name"), &m.name)?;
        if models.iter().any(|other| *other.name == *m.name) {
            return Err(invalid(
                format!("{mkey}.name"),
                format!("model `{}` is listed twice", m.name),
            ));
        }
        let capabilities = capabilities(&format!("{mkey}.capabilities"), m.capabilities)?;
        if m.script.is_some() && !matches!(adapter, AdapterConfig::Scripted(_)) {
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
        max_concurrency,
        queue_capacity,
        queue_aging,
        on_unknown_outcome,
        limiter,
        health,
        models,
    })
}
