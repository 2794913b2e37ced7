//! `[store]`: which store and its bounds; for the file store its directory and keys, for the
//! postgres store its connection string, pool and lease.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::bounds::{self, count, duration_from, items};
use super::stand_ins::UNREAD;
use super::{Env, invalid, variable};
use crate::config::raw::{RawStore, RawStoreKey};
use crate::config::{
    ConfigError, FileStoreConfig, PostgresStoreConfig, Secret, StoreConfig, StoreKey, StoreKind,
};

/// `store.max_disk_bytes` when unset: 2 GiB.
/// `store.schema` when unset.
const DEFAULT_SCHEMA: &str = "model_runtime";
const DEFAULT_MAX_DISK_BYTES: u64 = 2 << 30;
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

pub(super) fn store(raw: RawStore, env: Env<'_>) -> Result<StoreConfig, ConfigError> {
    let kind = match raw.kind.as_str() {
        "memory" => {
            own_keys_only(&raw, "memory")?;
            StoreKind::Memory
        }
        "file" => StoreKind::File(file(&raw, env)?),
        "postgres" => StoreKind::Postgres(postgres(&raw, env)?),
        other => {
            return Err(invalid(
                "store.kind",
                format!("unknown kind `{other}`; expected `memory`, `file` or `postgres`"),
            ));
        }
    };
    // The postgres store's tables are bounded as the other stores are: the bounds are the
    // whole store's, shared by every replica.
    Ok(StoreConfig {
        kind,
        max_executions: count(
            "store.max_executions",
            raw.max_executions,
            1,
            bounds::MAX_EXECUTIONS,
        )?,
        max_bytes: count(
            "store.max_bytes",
            raw.max_bytes,
            bounds::MIN_STORE_BYTES,
            bounds::MAX_STORE_BYTES,
        )?,
        retention: duration_from(
            "store.retention",
            raw.retention,
            Duration::ZERO,
            bounds::MAX_RETENTION,
        )?,
    })
}

/// Refuses a key that only another kind of store than `kind` reads: a key set for nothing
/// would look as if it did something.
fn own_keys_only(raw: &RawStore, kind: &str) -> Result<(), ConfigError> {
    let file = [
        ("store.path", raw.path.is_some()),
        ("store.key_env", raw.key_env.is_some()),
        ("store.key_file", raw.key_file.is_some()),
        ("store.keys", raw.keys.is_some()),
        ("store.max_disk_bytes", raw.max_disk_bytes.is_some()),
    ];
    let postgres = [
        ("store.url_env", raw.url_env.is_some()),
        ("store.pool_size", raw.pool_size.is_some()),
        ("store.connect_timeout", raw.connect_timeout.is_some()),
        ("store.acquire_timeout", raw.acquire_timeout.is_some()),
        ("store.statement_timeout", raw.statement_timeout.is_some()),
        ("store.lease", raw.lease.is_some()),
        ("store.poll_interval", raw.poll_interval.is_some()),
        ("store.schema", raw.schema.is_some()),
    ];
    for (owner, keys) in [("file", &file[..]), ("postgres", &postgres[..])] {
        if owner == kind {
            continue;
        }
        if let Some((key, _)) = keys.iter().find(|(_, set)| *set) {
            return Err(invalid(
                *key,
                format!("only applies to the `{owner}` store"),
            ));
        }
    }
    Ok(())
}

fn postgres(raw: &RawStore, env: Env<'_>) -> Result<PostgresStoreConfig, ConfigError> {
    own_keys_only(raw, "postgres")?;
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

fn file(raw: &RawStore, env: Env<'_>) -> Result<FileStoreConfig, ConfigError> {
    own_keys_only(raw, "file")?;
    let path = match raw.path.as_deref() {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => return Err(invalid("store.path", "the `file` store needs a directory")),
    };
    let single = RawStoreKey {
        env: raw.key_env.clone(),
        file: raw.key_file.clone(),
    };
    let keys = match (&raw.keys, single.env.is_some() || single.file.is_some()) {
        (Some(_), true) => {
            return Err(invalid(
                "store.keys",
                "give the keys either as store.keys or as store.key_env / store.key_file, not both",
            ));
        }
        (Some(keys), false) => {
            if keys.is_empty() {
                return Err(invalid("store.keys", "must list at least one key"));
            }
            items("store.keys", keys, bounds::MAX_STORE_KEYS)?;
            keys.iter()
                .enumerate()
                .map(|(i, k)| key(&format!("store.keys[{i}]"), k, env))
                .collect::<Result<Vec<_>, _>>()?
        }
        (None, true) => vec![key("store", &single, env)?],
        (None, false) => {
            return Err(invalid(
                "store.key_env",
                "the `file` store needs a key: store.key_env, store.key_file or store.keys",
            ));
        }
    };
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].contains(k) {
            return Err(invalid(
                format!("store.keys[{i}]"),
                "is the same key as one before it",
            ));
        }
    }
    Ok(FileStoreConfig {
        path,
        keys,
        max_disk_bytes: count(
            "store.max_disk_bytes",
            raw.max_disk_bytes.unwrap_or(DEFAULT_MAX_DISK_BYTES),
            bounds::MIN_DISK_BYTES,
            bounds::MAX_DISK_BYTES,
        )?,
    })
}

/// One key, from an environment variable or a file. `at` is `store` (for `key_env` /
/// `key_file`) or `store.keys[i]` (for `env` / `file`).
fn key(at: &str, raw: &RawStoreKey, env: Env<'_>) -> Result<StoreKey, ConfigError> {
    let (env_key, file_key) = if at == "store" {
        ("store.key_env".to_owned(), "store.key_file".to_owned())
    } else {
        (format!("{at}.env"), format!("{at}.file"))
    };
    match (&raw.env, &raw.file) {
        (Some(_), Some(_)) => {
            let reason = format!("give one of {env_key} and {file_key}, not both");
            Err(invalid(env_key, reason))
        }
        (Some(var), None) => {
            let Some(value) = env.var(var) else {
                return Err(invalid(
                    env_key,
                    format!("environment variable `{var}` is not set (or is not valid UTF-8)"),
                ));
            };
            StoreKey::parse(value.as_bytes(), format!("env {var}")).map_err(|reason| {
                invalid(env_key, format!("environment variable `{var}` {reason}"))
            })
        }
        (None, Some(path)) if path.is_empty() => Err(invalid(file_key, "must name a file")),
        // Named, not read: a stand-in for what it holds.
        (None, Some(path)) if !env.reads_files() => {
            StoreKey::parse(UNREAD.as_bytes(), format!("file {path}"))
                .map_err(|reason| invalid(file_key, reason))
        }
        (None, Some(path)) => {
            let value = std::fs::read(path)
                .map_err(|e| invalid(&file_key, format!("cannot read `{path}`: {}", e.kind())))?;
            StoreKey::parse(&value, format!("file {path}"))
                .map_err(|reason| invalid(file_key, format!("`{path}` {reason}")))
        }
        (None, None) => Err(invalid(at, "a key needs `env` or `file`")),
    }
}
