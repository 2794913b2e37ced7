//! Request validation against the configuration: every problem names its field, all problems
//! are reported at once, and nothing is stored unless the request is valid.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::FieldViolation;
use crate::config::{AbilityConfig, Config, PolicyConfig};
use crate::execution::{ContentPart, EffectiveLimits, ExecuteRequest, ResponseFormatKind, Role};

/// Longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;
/// Most labels per request.
pub const MAX_LABELS: usize = 64;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY_BYTES: usize = 128;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE_BYTES: usize = 512;

/// A request the configuration accepts, with what it resolved to.
#[derive(Debug)]
pub(crate) struct Admitted<'c> {
    pub ability: &'c AbilityConfig,
    pub policy: &'c PolicyConfig,
    /// The ability's requirements, borrowed, unless the request adds its own.
    pub required: Cow<'c, BTreeSet<String>>,
    pub limits: EffectiveLimits,
    /// Time from `now` to the deadline.
    pub time_left: Duration,
}

pub(crate) fn validate<'c>(
    config: &'c Config,
    request: &ExecuteRequest,
    now: SystemTime,
) -> Result<Admitted<'c>, Vec<FieldViolation>> {
    let mut v = Vec::new();
    let ability = resolve_ability(config, request, &mut v);
    let policy = ability.and_then(|a| resolve_policy(config, a, request, &mut v));
    let mut required = match ability {
        Some(a) => Cow::Borrowed(&a.requires),
        None => Cow::Owned(BTreeSet::new()),
    };
    for (i, c) in request.capabilities.iter().enumerate() {
        if c.is_empty() || c.contains(char::is_whitespace) {
            v.push(FieldViolation::new(
                format!("requirements.capabilities[{i}]"),
                "must be a non-empty name without spaces",
            ));
        } else if !required.contains(c) {
            required.to_mut().insert(c.clone());
        }
    }
    check_input(config, request, &mut v);
    let time_left = check_deadline(config, request, now, &mut v);
    if request.max_attempts == Some(0) {
        v.push(FieldViolation::new(
            "max_attempts",
            "must be at least 1 when set",
        ));
    }
    check_identity(request, &mut v);
    match (ability, policy) {
        (Some(ability), Some(policy)) if v.is_empty() => Ok(Admitted {
            ability,
            policy,
            required,
            limits: EffectiveLimits {
                deadline: now + time_left,
                max_attempts: request
                    .max_attempts
                    .map_or(policy.max_attempts, |m| m.min(policy.max_attempts)),
                allow_fallback: request.allow_fallback.unwrap_or(true),
                retry_budget: policy.retry_budget,
            },
            time_left,
        }),
        _ => Err(v),
    }
}

fn resolve_ability<'c>(
    config: &'c Config,
    request: &ExecuteRequest,
    v: &mut Vec<FieldViolation>,
) -> Option<&'c AbilityConfig> {
    if request.ability.is_empty() {
        v.push(FieldViolation::new("ability", "is required"));
        return None;
    }
    let found = config.abilities.get(request.ability.as_str());
    if found.is_none() {
        let known: Vec<&str> = config.abilities.keys().map(|k| &**k).collect();
        v.push(FieldViolation::new(
            "ability",
            format!(
                "unknown ability `{}`; configured: {}",
                request.ability,
                known.join(", ")
            ),
        ));
    }
    found
}

fn resolve_policy<'c>(
    config: &'c Config,
    ability: &AbilityConfig,
    request: &ExecuteRequest,
    v: &mut Vec<FieldViolation>,
) -> Option<&'c PolicyConfig> {
    let Some(name) = request.policy.as_deref() else {
        return config.policies.get(&ability.default_policy);
    };
    let Some(policy) = config.policies.get(name) else {
        v.push(FieldViolation::new(
            "policy",
            format!("unknown policy `{name}`"),
        ));
        return None;
    };
    if !ability.allowed_policies.contains(name) {
        let allowed: Vec<&str> = ability.allowed_policies.iter().map(|p| &**p).collect();
        v.push(FieldViolation::new(
            "policy",
            format!(
                "ability `{}` does not allow policy `{name}`; allowed: {}",
                ability.name,
                allowed.join(", ")
            ),
        ));
        return None;
    }
    Some(policy)
}

fn check_input(config: &Config, request: &ExecuteRequest, v: &mut Vec<FieldViolation>) {
    let input = &request.input;
    if input.messages.is_empty() {
        v.push(FieldViolation::new(
            "input.messages",
            "needs at least one message",
        ));
    }
    for (i, m) in input.messages.iter().enumerate() {
        // Built only for a violation: most messages have none.
        let at = || format!("input.messages[{i}]");
        if m.content.is_empty() && m.tool_calls.is_empty() {
            v.push(FieldViolation::new(format!("{}.content", at()), "is empty"));
        }
        match (m.role, &m.tool_call_id) {
            (Role::Tool, None) => v.push(FieldViolation::new(
                format!("{}.tool_call_id", at()),
                "is required for a tool message",
            )),
            (Role::System | Role::User | Role::Assistant, Some(_)) => v.push(FieldViolation::new(
                format!("{}.tool_call_id", at()),
                "is only allowed on a tool message",
            )),
            _ => {}
        }
        if !m.tool_calls.is_empty() && m.role != Role::Assistant {
            v.push(FieldViolation::new(
                format!("{}.tool_calls", at()),
                "are only allowed on an assistant message",
            ));
        }
        for (j, part) in m.content.iter().enumerate() {
            match part {
                ContentPart::Text(text) if text.is_empty() => v.push(FieldViolation::new(
                    format!("{}.content[{j}].text", at()),
                    "is empty",
                )),
                ContentPart::Image(image) if image.url.is_empty() == image.data.is_empty() => {
                    v.push(FieldViolation::new(
                        format!("{}.content[{j}].image", at()),
                        "needs exactly one of `url` and `data`",
                    ));
                }
                _ => {}
            }
        }
    }
    for (i, t) in input.tools.iter().enumerate() {
        if t.name.is_empty() {
            v.push(FieldViolation::new(
                format!("input.tools[{i}].name"),
                "is required",
            ));
        }
        if !t.parameters_json_schema.is_empty() && !is_json_object(&t.parameters_json_schema) {
            v.push(FieldViolation::new(
                format!("input.tools[{i}].parameters_json_schema"),
                "is not a JSON object",
            ));
        }
    }
    let p = &input.parameters;
    if p.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        v.push(FieldViolation::new(
            "input.parameters.temperature",
            "must be between 0 and 2",
        ));
    }
    if p.top_p.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        v.push(FieldViolation::new(
            "input.parameters.top_p",
            "must be between 0 and 1",
        ));
    }
    if p.max_output_tokens == Some(0) {
        v.push(FieldViolation::new(
            "input.parameters.max_output_tokens",
            "must be at least 1 when set",
        ));
    }
    if let Some(format) = &p.response_format
        && format.kind == ResponseFormatKind::JsonSchema
        && !is_json_object(&format.json_schema)
    {
        v.push(FieldViolation::new(
            "input.parameters.response_format.json_schema",
            "must be a JSON object for kind JSON_SCHEMA",
        ));
    }
    let bytes = input.content_bytes();
    let limit = config.server.max_input_bytes;
    if bytes > limit {
        v.push(FieldViolation::new(
            "input",
            format!("is {bytes} bytes of content; the limit is {limit} (server.max_input_bytes)"),
        ));
    }
}

fn is_json_object(text: &str) -> bool {
    matches!(
        serde_json::from_str::<serde_json::Value>(text),
        Ok(serde_json::Value::Object(_))
    )
}

fn check_deadline(
    config: &Config,
    request: &ExecuteRequest,
    now: SystemTime,
    v: &mut Vec<FieldViolation>,
) -> Duration {
    let max = config.server.max_deadline;
    let Some(deadline) = request.deadline else {
        return config.server.default_deadline;
    };
    match deadline.duration_since(now) {
        Err(_) | Ok(Duration::ZERO) => {
            v.push(FieldViolation::new("deadline", "is in the past"));
            Duration::ZERO
        }
        Ok(left) if left > max => {
            v.push(FieldViolation::new(
                "deadline",
                format!(
                    "is {} from now; the maximum is {} (server.max_deadline)",
                    humantime::format_duration(Duration::from_secs(left.as_secs())),
                    humantime::format_duration(max)
                ),
            ));
            max
        }
        Ok(left) => left,
    }
}

fn check_identity(request: &ExecuteRequest, v: &mut Vec<FieldViolation>) {
    if let Some(key) = &request.idempotency_key
        && key.len() > MAX_IDEMPOTENCY_KEY_BYTES
    {
        v.push(FieldViolation::new(
            "idempotency_key",
            format!("is longer than {MAX_IDEMPOTENCY_KEY_BYTES} bytes"),
        ));
    }
    if request.labels.len() > MAX_LABELS {
        v.push(FieldViolation::new(
            "labels",
            format!("has more than {MAX_LABELS} entries"),
        ));
    }
    for (key, value) in &request.labels {
        if key.is_empty() || key.len() > MAX_LABEL_KEY_BYTES {
            v.push(FieldViolation::new(
                "labels",
                format!("keys must be 1 to {MAX_LABEL_KEY_BYTES} bytes"),
            ));
        }
        if value.len() > MAX_LABEL_VALUE_BYTES {
            v.push(FieldViolation::new(
                format!("labels[{key}]"),
                format!("is longer than {MAX_LABEL_VALUE_BYTES} bytes"),
            ));
        }
    }
}
