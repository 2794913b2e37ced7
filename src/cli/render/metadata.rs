//! The runtime's metadata as a person reads it: its state and store, each provider with its
//! live admission figures and its models' health, the abilities and the policies.

use std::fmt::Write as _;

use super::name;
use model_runtime::pb;

/// `m`, readable, ending in a newline.
pub fn metadata(m: &pb::RuntimeMetadata) -> String {
    let mut out = String::new();
    let state = pb::RuntimeState::try_from(m.state).map_or("unknown", |s| s.as_str_name());
    let _ = writeln!(
        out,
        "model-runtime {} {}",
        m.version,
        name(state, "RUNTIME_STATE_")
    );
    if let Some(store) = &m.store {
        let _ = writeln!(
            out,
            "store {}{}: {} of {} executions, {} of {} bytes",
            store.kind,
            if store.durable { " (durable)" } else { "" },
            store.executions,
            store.max_executions,
            store.bytes,
            store.max_bytes
        );
    }
    for p in &m.providers {
        let _ = write!(
            out,
            "provider {} ({}): {} of {} in flight, {} of {} queued",
            p.name, p.adapter, p.in_flight, p.max_concurrency, p.queued, p.queue_capacity
        );
        if p.limiter == "redis" {
            let global = p
                .global_in_flight
                .map_or_else(|| "?".to_owned(), |g| g.to_string());
            let reachable = if p.limiter_reachable {
                ""
            } else {
                ", Redis unreachable"
            };
            let _ = write!(out, "; {global} across replicas{reachable}");
        }
        out.push('\n');
        for model in &p.models {
            let health = model.health.clone().unwrap_or_default();
            let state =
                pb::HealthState::try_from(health.state).map_or("unknown", |s| s.as_str_name());
            let _ = write!(
                out,
                "  model {} [{}] {}",
                model.name,
                model.capabilities.join(", "),
                name(state, "HEALTH_STATE_")
            );
            if !health.reason.is_empty() {
                let _ = write!(out, " ({})", health.reason);
            }
            out.push('\n');
        }
    }
    for a in &m.abilities {
        let _ = writeln!(
            out,
            "ability {}: policy {} (allowed: {}), requires [{}]",
            a.name,
            a.default_policy,
            a.allowed_policies.join(", "),
            a.requires.join(", ")
        );
    }
    for p in &m.policies {
        let _ = writeln!(out, "policy {}: {}", p.name, p.targets.join(", "));
    }
    out
}
