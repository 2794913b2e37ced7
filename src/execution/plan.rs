//! The routing plan as events and views record it: every target of the policy in order, kept
//! or filtered with the capabilities it lacks. `routing::plan` makes one; this is its shape.

use std::sync::Arc;

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
}

impl RoutingPlan {
    /// The targets that may be attempted, in order.
    pub fn kept(&self) -> impl Iterator<Item = &PlanTarget> {
        self.targets.iter().filter(|t| t.kept)
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
}
