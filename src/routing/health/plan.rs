//! A plan as health has it.

use std::sync::Arc;

use super::Verdict;
use crate::config::OnAllUnhealthy;
use crate::execution::RoutingPlan;

/// `plan` as health has it: each kept target skipped while `verdict` has it ejected, with the
/// reason and until when. When that skips every kept target, `on_all_unhealthy` decides:
/// `try_anyway` tries them all the same (the plan says so), `fail` leaves nothing to try.
/// The plan is returned as it came (not copied) when nothing is skipped.
pub fn with_health(
    plan: Arc<RoutingPlan>,
    on_all_unhealthy: OnAllUnhealthy,
    mut verdict: impl FnMut(&str, &str) -> Verdict,
) -> Arc<RoutingPlan> {
    let mut ejections = Vec::new();
    for (i, target) in plan.targets.iter().enumerate() {
        if !target.kept {
            continue;
        }
        if let Verdict::Ejected(ejection) = verdict(&target.provider, &target.model) {
            ejections.push((i, ejection));
        }
    }
    if ejections.is_empty() {
        return plan;
    }
    let mut marked = RoutingPlan::clone(&plan);
    for (i, ejection) in ejections {
        marked.targets[i].ejected = Some(ejection);
    }
    marked.tried_anyway = on_all_unhealthy == OnAllUnhealthy::TryAnyway
        && marked.kept().next().is_some()
        && marked.kept().all(|t| t.ejected.is_some());
    Arc::new(marked)
}
