//! `[store] kind = "postgres"` (cargo feature `postgres`): the connection string, read from
//! the environment and checked as the driver reads it, and the pool's, the statements' and
//! the lease's bounds.

use std::sync::Arc;
use std::time::Duration;

use super::super::bounds::{self, count, duration_from};
use super::super::{Env, invalid, variable};
use crate::config::raw::RawStore;
use crate::config::{ConfigError, PostgresStoreConfig, Secret};

/// `store.schema` when unset.
const DEFAULT_SCHEMA: &str = "model_runtime";
/// `store.pool_size` when unset.
const DEFAULT_POOL_SIZE: usize = 16;
/// `store.connect_timeout` when unset.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `store.acquire_timeout` when unset.
const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);
/// `store.statement_timeout` when unset.
const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// `store.lease` when unset.
const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// `store.poll_interval` when unset.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// `[store] kind = "postgres"`: its connection string, pool, timeouts, lease and schema.
pub(super) fn postgres(raw: &RawStore, env: Env<'_>) -> Result<PostgresStoreConfig, ConfigError> {
    let (url_env, url) = connection_string(raw.url_env.as_deref(), env)?;
    let pool_size = count(
        "store.pool_size",
        raw.pool_size.unwrap_or(DEFAULT_POOL_SIZE),
        1,
        bounds::MAX_POOL_SIZE,
    )?;
    let wait = |key: &str, value: Option<Duration>, default, min, max| {
        duration_from(key, value.unwrap_or(default), min, max)
    };
    let ms = Duration::from_millis;
    let connect_timeout = wait(
        "store.connect_timeout",
        raw.connect_timeout,
        DEFAULT_CONNECT_TIMEOUT,
        ms(100),
        bounds::MAX_CONNECT,
    )?;
    let acquire_timeout = wait(
        "store.acquire_timeout",
        raw.acquire_timeout,
        DEFAULT_ACQUIRE_TIMEOUT,
        ms(10),
        bounds::MAX_CONNECT,
    )?;
    let statement_timeout = wait(
        "store.statement_timeout",
        raw.statement_timeout,
        DEFAULT_STATEMENT_TIMEOUT,
        ms(100),
        bounds::MAX_STATEMENT,
    )?;
    let lease = wait(
        "store.lease",
        raw.lease,
        DEFAULT_LEASE,
        Duration::from_secs(1),
        bounds::MAX_LEASE,
    )?;
    let poll_interval = wait(
        "store.poll_interval",
        raw.poll_interval,
        DEFAULT_POLL_INTERVAL,
        ms(10),
        bounds::MAX_LEASE,
    )?;
    if poll_interval > lease {
        // An append whose notification was lost is then seen within a lease, as a dead
        // replica's executions are taken over within one.
        return Err(invalid(
            "store.poll_interval",
            format!(
                "must be at most store.lease ({})",
                humantime::format_duration(lease)
            ),
        ));
    }
    let schema = raw.schema.as_deref().unwrap_or(DEFAULT_SCHEMA);
    let identifier = schema.len() <= 63
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !identifier {
        return Err(invalid(
            "store.schema",
            "must be 1 to 63 lowercase letters, digits and `_`, not beginning with a digit",
        ));
    }
    Ok(PostgresStoreConfig {
        schema: schema.into(),
        url,
        url_env,
        pool_size,
        connect_timeout,
        acquire_timeout,
        statement_timeout,
        lease,
        poll_interval,
    })
}

/// The connection string in the variable `store.url_env` names: a `postgres://` or
/// `postgresql://` URL, or libpq's `key=value` pairs, with a host (and as many ports and
/// `hostaddr`s as hosts, or one port, as the driver needs to connect). It may hold a password:
/// no message quotes it, nor the parser's reason, which can quote a piece of it.
fn connection_string(var: Option<&str>, env: Env<'_>) -> Result<(Arc<str>, Secret), ConfigError> {
    const KEY: &str = "store.url_env";
    let Some(var) = var else {
        return Err(invalid(
            KEY,
            "the `postgres` store needs the environment variable that holds its connection string",
        ));
    };
    let value = variable(KEY, var, env)?;
    let Ok(config) = value.parse::<tokio_postgres::Config>() else {
        return Err(invalid(
            KEY,
            format!(
                "environment variable `{var}` is not a PostgreSQL connection string (a \
                 `postgres://` or `postgresql://` URL, or libpq's `key=value` pairs)"
            ),
        ));
    };
    let hosts = config.get_hosts().len();
    if hosts == 0 {
        return Err(invalid(
            KEY,
            format!(
                "environment variable `{var}` names no host (`postgres://HOST/...` or \
                 `host=HOST`)"
            ),
        ));
    }
    let (addrs, ports) = (config.get_hostaddrs().len(), config.get_ports().len());
    if (addrs > 0 && addrs != hosts) || ports > 1 && ports != hosts {
        return Err(invalid(
            KEY,
            format!(
                "environment variable `{var}` gives {hosts} host(s), {addrs} hostaddr(s) and \
                 {ports} port(s): give one port or one per host, and no hostaddr or one per host"
            ),
        ));
    }
    Ok((var.into(), Secret::new(value)))
}
