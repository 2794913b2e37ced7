//! The bounds of every duration and count the file sets. No value a file can hold overflows
//! the runtime's time arithmetic or asks it for unbounded memory: a deadline is at most a day,
//! a wait at most an hour, a count at most what one process can sensibly hold. The README's
//! "Limits" section lists them.

use std::fmt::Display;
use std::time::Duration;

use super::field::invalid;
use crate::config::ConfigError;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(60 * 60);

/// Longest timeout, drain, backoff or scripted delay.
pub(crate) const MAX_WAIT: Duration = HOUR;
/// Longest deadline or retry budget.
pub(crate) const MAX_DEADLINE: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest retention of a terminal execution.
pub(crate) const MAX_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Longest wait for a new connection's first bytes.
pub(crate) const MAX_HANDSHAKE: Duration = MINUTE;
/// `server.max_connection_age`: at least this, so connections are not remade in a loop.
pub(crate) const MIN_CONNECTION_AGE: Duration = Duration::from_millis(100);
/// `server.max_connection_age` and its grace.
pub(crate) const MAX_CONNECTION_AGE: Duration = MAX_DEADLINE;

/// `server.max_input_bytes`.
pub(crate) const MAX_INPUT_BYTES: usize = 64 << 20;
/// `server.max_output_bytes`.
pub(crate) const MAX_OUTPUT_BYTES: usize = 1 << 30;
/// `server.max_events_per_execution`.
pub(crate) const MAX_EVENTS: u64 = 10_000_000;
/// `server.max_watchers_per_execution`.
pub(crate) const MAX_WATCHERS: usize = 100_000;
/// `server.max_concurrent_streams` (per connection).
pub(crate) const MAX_STREAMS: u32 = 100_000;
/// `server.max_unsent_bytes`: room for a piece (64 KiB) at least, at most 1 GiB.
pub(crate) const MIN_UNSENT_BYTES: usize = 64 << 10;
pub(crate) const MAX_UNSENT_BYTES: usize = 1 << 30;
/// `server.max_connections`.
pub(crate) const MAX_CONNECTIONS: usize = 1_000_000;
/// `store.max_executions`.
pub(crate) const MAX_EXECUTIONS: usize = 10_000_000;
/// `store.max_bytes`: at least 1 MiB, at most 1 TiB.
pub(crate) const MIN_STORE_BYTES: u64 = 1 << 20;
pub(crate) const MAX_STORE_BYTES: u64 = 1 << 40;
/// `store.max_disk_bytes`: at least 1 MiB, at most 16 TiB.
pub(crate) const MIN_DISK_BYTES: u64 = 1 << 20;
pub(crate) const MAX_DISK_BYTES: u64 = 1 << 44;
/// `store.keys`.
pub(crate) const MAX_STORE_KEYS: usize = 16;
/// `store.pool_size` (the postgres store): connections one replica may hold open.
#[cfg(feature = "postgres")]
pub(crate) const MAX_POOL_SIZE: usize = 1024;
/// `store.connect_timeout` and `store.acquire_timeout` (the postgres store).
#[cfg(feature = "postgres")]
pub(crate) const MAX_CONNECT: Duration = MINUTE;
/// `store.statement_timeout` (the postgres store).
#[cfg(feature = "postgres")]
pub(crate) const MAX_STATEMENT: Duration = Duration::from_secs(10 * 60);
/// `store.lease` (the postgres store): a dead replica's executions wait at most this long.
#[cfg(feature = "postgres")]
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(10 * 60);
/// `providers.NAME.max_concurrency`.
pub(crate) const MAX_CONCURRENCY: u32 = 100_000;
/// `providers.NAME.queue_capacity`.
pub(crate) const MAX_QUEUE: u32 = 1_000_000;
/// Models of one provider.
pub(crate) const MAX_MODELS: usize = 1_000;
/// Capabilities of a model, or required by an ability.
pub(crate) const MAX_CAPABILITIES: usize = 64;
/// Bytes of a name: a table, a model, a capability.
pub(crate) const MAX_NAME_BYTES: usize = 128;
/// Targets of one policy.
pub(crate) const MAX_TARGETS: usize = 64;
/// `policies.NAME.max_attempts` and `retries_per_target`.
pub(crate) const MAX_ATTEMPTS: u32 = 100;
/// `script.fail_attempts` and `script.fail_after_deltas`.
pub(crate) const MAX_SCRIPTED_COUNT: u32 = 1_000_000;

/// `value` if it lies in `min..=max`; else an error naming `key` and the range.
pub(super) fn count<T: PartialOrd + Display + Copy>(
    key: &str,
    value: T,
    min: T,
    max: T,
) -> Result<T, ConfigError> {
    if value < min || value > max {
        return Err(invalid(key, format!("must be between {min} and {max}")));
    }
    Ok(value)
}

/// `value` if it is greater than zero and at most `max`.
pub(in crate::config) fn duration(
    key: &str,
    value: Duration,
    max: Duration,
) -> Result<Duration, ConfigError> {
    duration_from(key, value, Duration::from_nanos(1), max)
}

/// `value` if it lies in `min..=max`.
pub(super) fn duration_from(
    key: &str,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<Duration, ConfigError> {
    if value < min {
        return Err(invalid(
            key,
            if min <= Duration::from_nanos(1) {
                "must be greater than zero".to_owned()
            } else {
                format!("must be at least {}", humantime::format_duration(min))
            },
        ));
    }
    if value > max {
        return Err(invalid(
            key,
            format!("must be at most {}", humantime::format_duration(max)),
        ));
    }
    Ok(value)
}

/// A list of at most `max` items.
pub(super) fn items<T>(key: &str, items: &[T], max: usize) -> Result<(), ConfigError> {
    if items.len() > max {
        return Err(invalid(
            key,
            format!("has {} entries; at most {max} are allowed", items.len()),
        ));
    }
    Ok(())
}

/// A name: 1 to [`MAX_NAME_BYTES`] bytes without whitespace.
pub(super) fn name_text(key: &str, text: &str) -> Result<(), ConfigError> {
    if text.is_empty() || text.len() > MAX_NAME_BYTES || text.contains(char::is_whitespace) {
        return Err(invalid(
            key,
            format!("must be 1 to {MAX_NAME_BYTES} bytes without spaces"),
        ));
    }
    Ok(())
}
