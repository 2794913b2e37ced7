//! The candidate plan: the policy's targets in the policy's order, each kept or filtered out
//! with the capabilities it lacks. Same config + same request = same plan: nothing here reads
//! a clock, a random source or a caller weight.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::config::{Config, PolicyConfig, Target};
use crate::execution::{NameMap, PlanTarget, RoutingPlan};

/// The plan of every (ability, policy) pair a request may name, for requests that add no
/// capability of their own (nearly all): made once at start-up instead of per execution.
#[derive(Debug, Default)]
pub struct Plans {
    by_ability: NameMap<NameMap<Arc<RoutingPlan>>>,
}

impl Plans {
    /// The plans of `config`'s abilities with their own requirements.
    pub fn new(config: &Config) -> Self {
        let mut by_ability = NameMap::default();
        for ability in config.abilities.values() {
            let plans = ability
                .allowed_policies
                .iter()
                .filter_map(|name| {
                    let policy = config.policies.get(name)?;
                    let plan = plan(config, policy, &ability.requires);
                    Some((name.clone(), Arc::new(plan)))
                })
                .collect();
            by_ability.insert(ability.name.clone(), plans);
        }
        Self { by_ability }
    }

    /// The plan of `policy` for a request of `ability` with the ability's requirements only.
    pub fn get(&self, ability: &str, policy: &str) -> Option<Arc<RoutingPlan>> {
        self.by_ability.get(ability)?.get(policy).cloned()
    }
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
                ejected: None,
            }
        })
        .collect();
    RoutingPlan {
        policy: policy.name.clone(),
        required_capabilities: required.iter().cloned().collect(),
        targets,
        ended_before_routing: None,
        tried_anyway: false,
    }
}

/// `plan` routed to `target` alone: every other target is kept out, saying why.
pub fn pinned(plan: &RoutingPlan, target: &Target) -> RoutingPlan {
    let mut pinned = plan.clone();
    for other in &mut pinned.targets {
        if other.kept && (other.provider != target.provider || other.model != target.model) {
            other.kept = false;
            other.reason = Some(NOT_REQUESTED.to_owned());
        }
    }
    pinned
}

/// Why [`pinned`] keeps a target out.
const NOT_REQUESTED: &str = "not the requested target";

#[cfg(test)]
mod tests {

    use proptest::prelude::*;

    use super::*;
    use crate::config::{PolicySpec, ProviderSpec};

    const CAPABILITIES: [&str; 4] = ["text", "vision", "tools", "json_schema"];

    fn config(models: &[Vec<usize>], order: &[usize]) -> Config {
        let mut provider = ProviderSpec::scripted();
        for (i, caps) in models.iter().enumerate() {
            let caps: Vec<&str> = caps.iter().map(|c| CAPABILITIES[*c]).collect();
            provider = provider.model(&format!("m{i}"), &caps);
        }
        let targets: Vec<String> = order.iter().map(|i| format!("p/m{i}")).collect();
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        Config::builder()
            .provider("p", provider)
            .policy("main", PolicySpec::new(&targets))
            .ability("chat", crate::config::AbilitySpec::new("main"))
            .build()
            .unwrap()
    }

    proptest! {
        #[test]
        fn plans_are_deterministic_ordered_and_filtered_exactly(
            models in prop::collection::vec(prop::collection::vec(0..4usize, 0..4), 1..8),
            required in prop::collection::btree_set(0..4usize, 0..3),
            seed in any::<u64>(),
        ) {
            // A policy order that is a permutation of the models, chosen by the seed.
            let mut order: Vec<usize> = (0..models.len()).collect();
            let mut s = seed;
            for i in (1..order.len()).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (s >> 33) as usize % (i + 1));
            }
            let config = config(&models, &order);
            let policy = &config.policies["main"];
            let required: BTreeSet<String> = required.iter().map(|c| CAPABILITIES[*c].to_owned()).collect();
            let first = plan(&config, policy, &required);
            for _ in 0..3 {
                prop_assert_eq!(&plan(&config, policy, &required), &first);
            }
            // Same order as the policy, every target present.
            let names: Vec<String> = first.targets.iter().map(|t| t.model.to_string()).collect();
            let expected: Vec<String> = order.iter().map(|i| format!("m{i}")).collect();
            prop_assert_eq!(names, expected);
            // Kept exactly when the model has every required capability; the reason lists the rest.
            for (target, i) in first.targets.iter().zip(&order) {
                let has: BTreeSet<String> = models[*i].iter().map(|c| CAPABILITIES[*c].to_owned()).collect();
                let missing: Vec<String> = required.difference(&has).cloned().collect();
                prop_assert_eq!(target.kept, missing.is_empty());
                prop_assert_eq!(&target.missing_capabilities, &missing);
                prop_assert_eq!(target.reason.is_some(), !target.kept);
            }
        }
    }
}
