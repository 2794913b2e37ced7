//! `[policies.NAME]` and `[abilities.NAME]`: targets that exist, bounded attempts and waits,
//! and abilities that can route.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::bounds::{self, count, duration, duration_from, items};
use super::{capabilities, invalid, name};
use crate::config::raw::{RawAbility, RawPolicy};
use crate::config::{AbilityConfig, ConfigError, PolicyConfig, ProviderConfig, Target};

/// `min_attempt_time` when the policy sets none (and its budget is at least twice this).
const DEFAULT_MIN_ATTEMPT_TIME: Duration = Duration::from_secs(1);

pub(super) fn policy(
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
    items(&format!("{key}.targets"), &raw.targets, bounds::MAX_TARGETS)?;
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
    Ok(PolicyConfig {
        name,
        targets,
        max_attempts: count(
            &format!("{key}.max_attempts"),
            raw.max_attempts,
            1,
            bounds::MAX_ATTEMPTS,
        )?,
        retry_budget: duration(
            &format!("{key}.retry_budget"),
            raw.retry_budget,
            bounds::MAX_DEADLINE,
        )?,
        retries_per_target: count(
            &format!("{key}.retries_per_target"),
            raw.retries_per_target,
            0,
            bounds::MAX_ATTEMPTS,
        )?,
        backoff: duration_from(
            &format!("{key}.backoff"),
            raw.backoff,
            Duration::ZERO,
            bounds::MAX_WAIT,
        )?,
        min_attempt_time: min_attempt_time(key, raw.min_attempt_time, raw.retry_budget)?,
        on_rejected: raw.on_rejected,
        on_unknown_outcome: raw.on_unknown_outcome,
        on_content_filter: raw.on_content_filter,
        delivery: raw.delivery,
        health: raw.health,
        on_all_unhealthy: raw.on_all_unhealthy,
    })
}

/// `min_attempt_time`: unset, 1 s, or half the budget when that is less; set, less than the
/// budget, or no attempt could ever start.
fn min_attempt_time(
    key: &str,
    value: Option<Duration>,
    budget: Duration,
) -> Result<Duration, ConfigError> {
    let Some(value) = value else {
        return Ok(DEFAULT_MIN_ATTEMPT_TIME.min(budget / 2));
    };
    if value >= budget {
        return Err(invalid(
            format!("{key}.min_attempt_time"),
            format!(
                "must be less than the policy's retry_budget ({}), or no attempt could start",
                humantime::format_duration(budget)
            ),
        ));
    }
    Ok(value)
}

pub(super) fn ability(
    key: &str,
    table: &str,
    raw: RawAbility,
    policies: &BTreeMap<Arc<str>, PolicyConfig>,
    providers: &BTreeMap<Arc<str>, ProviderConfig>,
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
    let requires = capabilities(&format!("{key}.requires"), raw.requires)?;
    // An ability none of whose policies has a target with every capability it requires
    // could only ever end in `no_capable_target`: that is a mistake in the file.
    let routable = allowed_policies.iter().any(|p| {
        policies[p].targets.iter().any(|t| {
            providers[&t.provider]
                .model(&t.model)
                .is_some_and(|m| requires.is_subset(&m.capabilities))
        })
    });
    if !routable {
        let required: Vec<&str> = requires.iter().map(String::as_str).collect();
        return Err(invalid(
            format!("{key}.requires"),
            format!(
                "no target of any policy ability `{table}` allows has every capability it requires ({})",
                required.join(", ")
            ),
        ));
    }
    Ok(AbilityConfig {
        name,
        default_policy,
        allowed_policies,
        requires,
    })
}
