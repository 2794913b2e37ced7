//! The configuration in effect, written back as TOML, for `check-config` to show: the file's
//! values, every key it leaves out at its default, and the defaults validation settles (an
//! HTTP adapter's timeouts and protocol settings, a provider's queues, queue aging, health and
//! `on_unknown_outcome`, a policy's `min_attempt_time`, the file
//! store's disk bound, the postgres store's pool, timeouts and lease, a limiter's key, lease
//! and timeout); each adapter writes back its own keys (`adapter/`). It is the file's own
//! shapes written out, so a key added to them shows without more code, and what it writes is
//! itself a config that passes. Secrets are named by where
//! they are read from (`api_key_env`, `key_env`, `keys`, `url_env`), as the file names them;
//! their values are never in it, nor a proxy's credentials (shown as `REDACTED`).

use super::raw::{RawConfig, RawHealth, RawHealthSettings, RawProvider, RawQueues};
use super::{Config, HealthMode, ProviderConfig, StoreKind};
use crate::execution::Priority;

/// `raw`, the file as read, with what `config`, its validation, settled filled in; as TOML.
pub(super) fn effective(mut raw: RawConfig, config: &Config) -> String {
    match &config.store.kind {
        StoreKind::Memory => {}
        StoreKind::File(file) => raw.store.max_disk_bytes = Some(file.max_disk_bytes),
        StoreKind::Postgres(postgres) => {
            let store = &mut raw.store;
            store.pool_size = Some(postgres.pool_size);
            store.connect_timeout = Some(postgres.connect_timeout);
            store.acquire_timeout = Some(postgres.acquire_timeout);
            store.statement_timeout = Some(postgres.statement_timeout);
            store.lease = Some(postgres.lease);
            store.poll_interval = Some(postgres.poll_interval);
            store.schema = Some(postgres.schema.to_string());
        }
    }
    for (name, provider) in &mut raw.providers {
        let Some(validated) = config.providers.get(name.as_str()) else {
            continue;
        };
        admission(provider, validated);
        if let (Some(limiter), Some(validated)) = (&mut provider.limiter, &validated.limiter) {
            limiter.key = Some(validated.key.to_string());
            limiter.lease = Some(validated.lease);
            limiter.timeout = Some(validated.timeout);
            limiter.local_limit = (validated.local_limit > 0).then_some(validated.local_limit);
        }
        super::adapter::effective(&validated.adapter, &mut provider.settings);
    }
    for (name, policy) in &mut raw.policies {
        if let Some(validated) = config.policies.get(name.as_str()) {
            policy.min_attempt_time = Some(validated.min_attempt_time);
        }
    }
    // Plain strings, numbers, booleans, tables and arrays of tables: TOML has a form for
    // each, so writing them cannot fail.
    toml::to_string(&raw).unwrap_or_default()
}

/// A provider's admission and recovery as validated: each class's queue, their aging, what
/// an unknown outcome does (by its current name, never the older `retry_unknown_outcome`),
/// and health, on with every setting or off.
fn admission(provider: &mut RawProvider, validated: &ProviderConfig) {
    let [interactive, standard, batch] = Priority::ALL.map(|p| validated.queue_capacity[p.index()]);
    provider.queues = Some(RawQueues {
        interactive: Some(interactive),
        standard: Some(standard),
        batch: Some(batch),
    });
    provider.queue_aging = Some(validated.queue_aging);
    provider.on_unknown_outcome = Some(validated.on_unknown_outcome);
    provider.retry_unknown_outcome = None;
    provider.health = Some(match &validated.health {
        None => RawHealth::Mode(HealthMode::Off),
        Some(health) => RawHealth::Settings(RawHealthSettings {
            consecutive_failures: Some(health.consecutive_failures),
            failure_rate: Some(health.failure_rate),
            min_requests: Some(health.min_requests),
            window: Some(health.window),
            ejection: Some(health.ejection),
            max_ejection: Some(health.max_ejection),
            max_retry_after: Some(health.max_retry_after),
            probes: Some(health.probes),
        }),
    });
}
