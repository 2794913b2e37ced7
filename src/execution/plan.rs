//! The routing plan as events and views record it: every target of the policy in order, kept
//! or filtered with the capabilities it lacks, and a kept one skipped while its health has it
//! ejected. `routing::plan` makes one, `routing::Health` marks the skips; this is its shape.

use std::sync::Arc;
use std::time::SystemTime;

/// Every target of a policy, kept or filtered, in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoutingPlan {
    /// The policy it comes from.
    pub policy: Arc<str>,
    /// The ability's plus the request's capabilities, sorted.
    pub required_capabilities: Vec<String>,
    /// The candidates in order.
    pub targets: Vec<PlanTarget>,
    /// Why, when the execution ended before it was routed (the runtime failed, or stopped,
    /// first): the plan is then empty, and says nothing of the policy's targets. The
    /// draft's diagram reaches FAILED only through ROUTING, so such an ending still passes
    /// here, saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_before_routing: Option<Arc<str>>,
    /// Every kept target was ejected, and the policy's `on_all_unhealthy = "try_anyway"`
    /// tries them in plan order all the same: a health mistake never becomes an outage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tried_anyway: bool,
}

impl RoutingPlan {
    /// The targets with every required capability, in order.
    pub fn kept(&self) -> impl Iterator<Item = &PlanTarget> {
        self.targets.iter().filter(|t| t.kept)
    }

    /// The targets routing attempts, in order: the kept ones, less those ejected (unless the
    /// plan tries them anyway).
    pub fn to_attempt(&self) -> impl Iterator<Item = &PlanTarget> {
        self.kept()
            .filter(|t| t.ejected.is_none() || self.tried_anyway)
    }
}

/// One candidate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Set when the target was kept but its health had it ejected as the plan was made:
    /// routing skips it at no cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ejected: Option<Ejection>,
}

/// Why a target's health has it ejected, and until when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ejection {
    /// What ejected it, e.g. `3 consecutive failures (last: timeout)`.
    pub reason: String,
    /// When it may be tried again (by a probe); `None` while a probe is deciding.
    pub until: Option<SystemTime>,
}
