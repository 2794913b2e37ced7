//! `[store]`: which store and its bounds; for the file store its directory and keys, for the
//! postgres store its connection string, pool and lease.

use std::path::PathBuf;
use std::time::Duration;

use super::bounds::{self, count, duration_from, items};
use super::stand_ins::UNREAD;
use super::{Env, invalid};
use crate::config::raw::{RawStore, RawStoreKey};
use crate::config::{ConfigError, FileStoreConfig, StoreConfig, StoreKey, StoreKind};

#[cfg(feature = "postgres")]
mod postgres;

/// `store.max_disk_bytes` when unset: 2 GiB.
const DEFAULT_MAX_DISK_BYTES: u64 = 2 << 30;

pub(super) fn store(raw: RawStore, env: Env<'_>) -> Result<StoreConfig, ConfigError> {
    let kind = match raw.kind.as_str() {
        "memory" => {
            own_keys_only(&raw, "memory")?;
            StoreKind::Memory
        }
        "file" => StoreKind::File(file(&raw, env)?),
        #[cfg(not(feature = "postgres"))]
        "postgres" => {
            return Err(invalid(
                "store.kind",
                "the `postgres` store is not in this build (cargo feature `postgres`)",
            ));
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            own_keys_only(&raw, "postgres")?;
            StoreKind::Postgres(postgres::postgres(&raw, env)?)
        }
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
                .map_err(|reason| invalid(file_key, reason.to_string()))
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
