//! `providers.NAME.limiter`: where a provider's `max_concurrency` is counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::bounds::{self, count, duration_from};
use super::{Env, invalid, variable};
use crate::config::raw::RawLimiter;
use crate::config::{ConfigError, LimiterConfig, OnUnavailable, ProviderConfig, Secret};

/// `limiter.lease` when unset.
const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// `limiter.timeout` when unset (or a third of `lease`, if that is less).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// The longest key: a key names a set of permits, not a document.
const MAX_KEY_BYTES: usize = 256;

/// `raw`, the limiter of provider `key` (`providers.NAME`) whose permits are `max_concurrency`.
pub(super) fn limiter(
    key: &str,
    name: &str,
    raw: &RawLimiter,
    max_concurrency: u32,
    env: Env<'_>,
) -> Result<LimiterConfig, ConfigError> {
    let key = format!("{key}.limiter");
    if raw.kind == "redis" && !cfg!(feature = "redis") {
        return Err(invalid(
            format!("{key}.kind"),
            "the `redis` limiter is not in this build (cargo feature `redis`)",
        ));
    }
    if raw.kind != "redis" {
        return Err(invalid(
            format!("{key}.kind"),
            format!(
                "unknown kind `{}`; expected `redis` (leave `limiter` out for a limit of this process alone)",
                raw.kind
            ),
        ));
    }
    let (url_env, url) = url(&format!("{key}.url_env"), raw.url_env.as_deref(), env)?;
    let redis_key = match raw.key.as_deref() {
        None => format!("model-runtime:limiter:{name}"),
        Some(k) if k.is_empty() || k.len() > MAX_KEY_BYTES || k.contains(char::is_control) => {
            return Err(invalid(
                format!("{key}.key"),
                format!("must be 1 to {MAX_KEY_BYTES} bytes without control characters"),
            ));
        }
        Some(k) => k.to_owned(),
    };
    let lease = duration_from(
        &format!("{key}.lease"),
        raw.lease.unwrap_or(DEFAULT_LEASE),
        Duration::from_secs(1),
        bounds::MAX_WAIT,
    )?;
    let timeout = duration_from(
        &format!("{key}.timeout"),
        raw.timeout.unwrap_or(DEFAULT_TIMEOUT.min(lease / 3)),
        Duration::from_millis(1),
        lease / 3,
    )
    .map_err(|_| {
        invalid(
            format!("{key}.timeout"),
            "must be at least 1ms and at most a third of `lease` (a renewal must finish within its lease)",
        )
    })?;
    let local_limit = match (raw.on_unavailable, raw.local_limit) {
        (OnUnavailable::FailClosed, Some(_)) => {
            return Err(invalid(
                format!("{key}.local_limit"),
                "only applies with `on_unavailable = \"fail_open\"`",
            ));
        }
        (OnUnavailable::FailClosed, None) => 0,
        (OnUnavailable::FailOpen, limit) => count(
            &format!("{key}.local_limit"),
            limit.unwrap_or(max_concurrency),
            1,
            max_concurrency,
        )?,
    };
    Ok(LimiterConfig {
        url,
        url_env,
        key: redis_key.into(),
        lease,
        timeout,
        on_unavailable: raw.on_unavailable,
        local_limit,
    })
}

/// Refuses `provider`'s limiter key when another provider (in `providers`) counts a different
/// `max_concurrency` under it: one set of permits has one limit.
pub(super) fn shared_key(
    key: &str,
    provider: &ProviderConfig,
    providers: &BTreeMap<Arc<str>, ProviderConfig>,
) -> Result<(), ConfigError> {
    let Some(limiter) = &provider.limiter else {
        return Ok(());
    };
    let other = providers.values().find(|other| {
        other.limiter.as_ref().is_some_and(|l| l.key == limiter.key)
            && other.max_concurrency != provider.max_concurrency
    });
    match other {
        None => Ok(()),
        Some(other) => Err(invalid(
            format!("{key}.limiter.key"),
            format!(
                "`{}` is also provider `{}`'s, with max_concurrency {} against {}: one set of \
                 permits has one limit",
                limiter.key, other.name, other.max_concurrency, provider.max_concurrency
            ),
        )),
    }
}

/// The Redis URL named by `var`: `redis://` or `redis+unix://` (`unix://`). It may hold a
/// password: no message quotes it.
fn url(key: &str, var: Option<&str>, env: Env<'_>) -> Result<(Arc<str>, Secret), ConfigError> {
    let Some(var) = var else {
        return Err(invalid(
            key,
            "the `redis` limiter needs the environment variable that holds its URL",
        ));
    };
    let value = variable(key, var, env)?;
    if value.starts_with("rediss://") {
        return Err(invalid(
            key,
            format!(
                "environment variable `{var}` asks for TLS (`rediss://`), which the limiter does not \
                 speak: reach Redis on loopback, a private network or a Unix socket"
            ),
        ));
    }
    let scheme_known = ["redis://", "redis+unix://", "unix://"]
        .iter()
        .any(|scheme| value.starts_with(scheme));
    if !scheme_known || !connects(&value) {
        return Err(invalid(
            key,
            format!(
                "environment variable `{var}` must hold a `redis://` or `redis+unix://` URL \
                 (host, port, database)"
            ),
        ));
    }
    Ok((var.into(), Secret::new(value)))
}

/// Whether the Redis client reads `url` (host, port, database).
#[cfg(feature = "redis")]
fn connects(url: &str) -> bool {
    redis::IntoConnectionInfo::into_connection_info(url).is_ok()
}

/// Without the client, a `redis` limiter is refused before its URL is read.
#[cfg(not(feature = "redis"))]
fn connects(_: &str) -> bool {
    false
}
