//! `providers.NAME.health`: the signals that eject a provider's targets, each bounded.

use std::time::Duration;

use super::bounds::{self, count, duration_from};
use super::invalid;
use crate::config::raw::RawHealth;
use crate::config::{ConfigError, HealthConfig, HealthMode};

/// Attempts that may probe one ejected target at once.
const MAX_PROBES: u32 = 1_000;

/// `raw`, the health of provider `key` (`providers.NAME`); `None` when it is off.
pub(super) fn health(
    key: &str,
    raw: Option<&RawHealth>,
) -> Result<Option<HealthConfig>, ConfigError> {
    let set = match raw {
        None | Some(RawHealth::Mode(HealthMode::On)) => return Ok(Some(HealthConfig::default())),
        Some(RawHealth::Mode(HealthMode::Off)) => return Ok(None),
        Some(RawHealth::Settings(set)) => set,
    };
    let key = format!("{key}.health");
    let defaults = HealthConfig::default();
    let field = |name: &str| format!("{key}.{name}");
    let failure_rate = set.failure_rate.unwrap_or(defaults.failure_rate);
    if !(failure_rate > 0.0 && failure_rate <= 1.0) {
        return Err(invalid(
            field("failure_rate"),
            "must be a share of attempts: greater than 0 and at most 1",
        ));
    }
    let ejection = duration_from(
        &field("ejection"),
        set.ejection.unwrap_or(defaults.ejection),
        Duration::from_millis(1),
        bounds::MAX_WAIT,
    )?;
    let max_ejection = duration_from(
        &field("max_ejection"),
        set.max_ejection
            .unwrap_or(defaults.max_ejection.max(ejection)),
        ejection,
        bounds::MAX_WAIT,
    )
    .map_err(|_| {
        invalid(
            field("max_ejection"),
            "must be at least `ejection` and at most 1h",
        )
    })?;
    let max_retry_after = duration_from(
        &field("max_retry_after"),
        set.max_retry_after.unwrap_or(defaults.max_retry_after),
        Duration::from_millis(1),
        bounds::MAX_WAIT,
    )?;
    Ok(Some(HealthConfig {
        consecutive_failures: count(
            &field("consecutive_failures"),
            set.consecutive_failures
                .unwrap_or(defaults.consecutive_failures),
            1,
            bounds::MAX_ATTEMPTS,
        )?,
        failure_rate,
        min_requests: count(
            &field("min_requests"),
            set.min_requests.unwrap_or(defaults.min_requests),
            1,
            bounds::MAX_QUEUE,
        )?,
        window: duration_from(
            &field("window"),
            set.window.unwrap_or(defaults.window),
            Duration::from_millis(1),
            bounds::MAX_WAIT,
        )?,
        ejection,
        max_ejection,
        max_retry_after,
        probes: count(
            &field("probes"),
            set.probes.unwrap_or(defaults.probes),
            1,
            MAX_PROBES,
        )?,
    }))
}
