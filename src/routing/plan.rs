//! The candidate plan: the policy's targets in the policy's order, each kept or filtered out
//! with the capabilities it lacks. Same config + same request = same plan: nothing here reads
//! a clock, a random source or a caller weight.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::config::{Config, PolicyConfig};

/// Every target of a policy, kept or filtered, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingPlan {
    /// The policy it comes from.
    pub policy: Arc<str>,
    /// The ability's plus the request's capabilities, sorted.
    pub required_capabilities: Vec<String>,
    /// The candidates in order.
    pub targets: Vec<PlanTarget>,
}

impl RoutingPlan {
    /// The targets that may be attempted, in order.
    pub fn kept(&self) -> impl Iterator<Item = &PlanTarget> {
        self.targets.iter().filter(|t| t.kept)
    }
}

/// One candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTarget {
    /// Provider name.
    pub provider: Arc<str>,
    /// Provider model.
    pub model: Arc<str>,
    /// Whether it may be attempted.
    pub kept: bool,
    /// Why it was filtered; `None` when kept.
    pub reason: Option<String>,
    /// Required capabilities the model lacks.
    pub missing_capabilities: Vec<String>,
}

/// Plans `policy` for a request needing `required` capabilities.
pub fn plan(config: &Config, policy: &PolicyConfig, required: &BTreeSet<String>) -> RoutingPlan {
    let targets = policy
        .targets
        .iter()
        .map(|target| {
            let capabilities = config
                .providers
                .get(&target.provider)
                .and_then(|p| p.model(&target.model))
                .map(|m| &m.capabilities);
            let missing: Vec<String> = match capabilities {
                Some(have) => required.difference(have).cloned().collect(),
                // Validation resolves every target at start-up; an unresolved one can only
                // come from a config built by hand, and is never attempted.
                None => required.iter().cloned().collect(),
            };
            let reason = match (capabilities.is_some(), missing.is_empty()) {
                (false, _) => Some("target is not configured".to_owned()),
                (true, true) => None,
                (true, false) => Some(format!("missing capabilities: {}", missing.join(", "))),
            };
            PlanTarget {
                provider: target.provider.clone(),
                model: target.model.clone(),
                kept: reason.is_none(),
                reason,
                missing_capabilities: missing,
            }
        })
        .collect();
    RoutingPlan {
        policy: policy.name.clone(),
        required_capabilities: required.iter().cloned().collect(),
        targets,
    }
}
