//! Request validation against the configuration: every problem names its field, problems are
//! reported together (the first [`Violations::MAX`] of them), and nothing is stored unless the
//! request is valid. Work is bounded by the caps in `limits.rs`: an over-long list is one
//! violation, not one per item.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::error::{Violations, excerpt};
use super::limits::{
    MAX_CAPABILITIES, MAX_CAPABILITY_BYTES, MAX_IDEMPOTENCY_KEY_BYTES, MAX_LABEL_KEY_BYTES,
    MAX_LABEL_VALUE_BYTES, MAX_LABELS,
};
use crate::config::{AbilityConfig, Config, PolicyConfig, Target};
use crate::execution::{EffectiveLimits, ExecuteRequest};

mod input;

/// A request the configuration accepts, with what it resolved to.
#[derive(Debug)]
pub(crate) struct Validated<'c> {
    pub ability: &'c AbilityConfig,
    pub policy: &'c PolicyConfig,
    /// The ability's requirements, borrowed, unless the request adds its own.
    pub required: Cow<'c, BTreeSet<String>>,
    /// The one target of the policy the request routes to, if it names one.
    pub target: Option<&'c Target>,
    pub limits: EffectiveLimits,
    /// Time from `now` to the deadline.
    pub time_left: Duration,
}

pub(crate) fn validate<'c>(
    config: &'c Config,
    request: &ExecuteRequest,
    now: SystemTime,
) -> Result<Validated<'c>, Violations> {
    let mut v = Violations::new();
    let ability = resolve_ability(config, request, &mut v);
    let policy = ability.and_then(|a| resolve_policy(config, a, request, &mut v));
    let mut required = match ability {
        Some(a) => Cow::Borrowed(&a.requires),
        None => Cow::Owned(BTreeSet::new()),
    };
    if request.capabilities.len() > MAX_CAPABILITIES {
        v.push(
            "requirements.capabilities",
            format!(
                "has {} entries; at most {MAX_CAPABILITIES} are allowed",
                request.capabilities.len()
            ),
        );
    } else {
        for (i, c) in request.capabilities.iter().enumerate() {
            if c.is_empty() || c.len() > MAX_CAPABILITY_BYTES || c.contains(char::is_whitespace) {
                v.push(
                    format!("requirements.capabilities[{i}]"),
                    format!("must be a name of 1 to {MAX_CAPABILITY_BYTES} bytes without spaces"),
                );
            } else if !required.contains(c) {
                required.to_mut().insert(c.clone());
            }
        }
    }
    let target = match (ability, policy, request.target.as_deref()) {
        (Some(ability), Some(policy), Some(target)) => {
            resolve_target(config, ability, policy, &required, target, &mut v)
        }
        _ => None,
    };
    input::check(config, &request.input, &mut v);
    let time_left = check_deadline(config, request, now, &mut v);
    if request.max_attempts == Some(0) {
        v.push("max_attempts", "must be at least 1 when set");
    }
    check_identity(request, &mut v);
    match (ability, policy) {
        (Some(ability), Some(policy)) if v.is_empty() => Ok(Validated {
            ability,
            policy,
            required,
            target,
            limits: EffectiveLimits {
                deadline: now + time_left,
                max_attempts: request
                    .max_attempts
                    .map_or(policy.max_attempts, |m| m.min(policy.max_attempts)),
                allow_fallback: request.allow_fallback.unwrap_or(true),
                retry_budget: policy.retry_budget,
                delivery: request.delivery.unwrap_or(policy.delivery),
                priority: request.priority.unwrap_or_default(),
            },
            time_left,
        }),
        _ => Err(v),
    }
}

fn resolve_ability<'c>(
    config: &'c Config,
    request: &ExecuteRequest,
    v: &mut Violations,
) -> Option<&'c AbilityConfig> {
    if request.ability.is_empty() {
        v.push("ability", "is required");
        return None;
    }
    let found = config.abilities.get(request.ability.as_str());
    if found.is_none() {
        let known: Vec<&str> = config.abilities.keys().map(|k| &**k).collect();
        v.push(
            "ability",
            format!(
                "unknown ability `{}`; configured: {}",
                excerpt(&request.ability),
                known.join(", ")
            ),
        );
    }
    found
}

fn resolve_policy<'c>(
    config: &'c Config,
    ability: &AbilityConfig,
    request: &ExecuteRequest,
    v: &mut Violations,
) -> Option<&'c PolicyConfig> {
    let Some(name) = request.policy.as_deref() else {
        return config.policies.get(&ability.default_policy);
    };
    let Some(policy) = config.policies.get(name) else {
        v.push("policy", format!("unknown policy `{}`", excerpt(name)));
        return None;
    };
    if !ability.allowed_policies.contains(name) {
        let allowed: Vec<&str> = ability.allowed_policies.iter().map(|p| &**p).collect();
        v.push(
            "policy",
            format!(
                "ability `{}` does not allow policy `{name}`; allowed: {}",
                ability.name,
                allowed.join(", ")
            ),
        );
        return None;
    }
    Some(policy)
}

/// The target `name` (`provider/model`) of `policy`, which must have every capability
/// `required`.
fn resolve_target<'c>(
    config: &'c Config,
    ability: &AbilityConfig,
    policy: &'c PolicyConfig,
    required: &BTreeSet<String>,
    name: &str,
    v: &mut Violations,
) -> Option<&'c Target> {
    let shown = excerpt(name);
    let Some((provider, model)) = name.split_once('/') else {
        v.push(
            "target",
            format!("`{shown}` is not a target: expected provider/model, like openai/gpt-4o-mini"),
        );
        return None;
    };
    let listed = |p: &PolicyConfig| {
        p.targets
            .iter()
            .position(|t| &*t.provider == provider && &*t.model == model)
    };
    let Some(index) = listed(policy) else {
        let targets: Vec<String> = policy.targets.iter().map(ToString::to_string).collect();
        let mut reason = format!(
            "`{shown}` is not a target of policy `{}` (its targets: {})",
            policy.name,
            targets.join(", ")
        );
        let elsewhere: Vec<&str> = ability
            .allowed_policies
            .iter()
            .filter(|p| config.policies.get(&**p).and_then(listed).is_some())
            .map(|p| &**p)
            .collect();
        if !elsewhere.is_empty() {
            reason.push_str(&format!(
                "; ability `{}` allows it with policy {}",
                ability.name,
                elsewhere.join(", ")
            ));
        }
        v.push("target", reason);
        return None;
    };
    let target = &policy.targets[index];
    let capabilities = config
        .providers
        .get(&target.provider)
        .and_then(|p| p.model(&target.model))
        .map(|m| &m.capabilities)?;
    let missing: Vec<&str> = required
        .difference(capabilities)
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        v.push(
            "target",
            format!(
                "`{shown}` lacks capabilities the request requires: {}",
                missing.join(", ")
            ),
        );
        return None;
    }
    Some(target)
}

fn check_deadline(
    config: &Config,
    request: &ExecuteRequest,
    now: SystemTime,
    v: &mut Violations,
) -> Duration {
    let max = config.server.max_deadline;
    let Some(deadline) = request.deadline else {
        return config.server.default_deadline;
    };
    match deadline.duration_since(now) {
        Err(_) | Ok(Duration::ZERO) => {
            v.push("deadline", "is in the past");
            Duration::ZERO
        }
        Ok(left) if left > max => {
            v.push(
                "deadline",
                format!(
                    "is {} from now; the maximum is {} (server.max_deadline)",
                    humantime::format_duration(Duration::from_secs(left.as_secs())),
                    humantime::format_duration(max)
                ),
            );
            max
        }
        Ok(left) => left,
    }
}

fn check_identity(request: &ExecuteRequest, v: &mut Violations) {
    if let Some(key) = &request.idempotency_key
        && key.len() > MAX_IDEMPOTENCY_KEY_BYTES
    {
        v.push(
            "idempotency_key",
            format!("is longer than {MAX_IDEMPOTENCY_KEY_BYTES} bytes"),
        );
    }
    if request.labels.len() > MAX_LABELS {
        v.push(
            "labels",
            format!(
                "has {} entries; at most {MAX_LABELS} are allowed",
                request.labels.len()
            ),
        );
        return;
    }
    for (key, value) in &request.labels {
        if key.is_empty() || key.len() > MAX_LABEL_KEY_BYTES {
            v.push(
                "labels",
                format!("keys must be 1 to {MAX_LABEL_KEY_BYTES} bytes"),
            );
        } else if value.len() > MAX_LABEL_VALUE_BYTES {
            v.push(
                format!("labels[{key}]"),
                format!("is longer than {MAX_LABEL_VALUE_BYTES} bytes"),
            );
        }
    }
}
