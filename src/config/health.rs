//! Provider health as the file sets it: when a target's attempts eject it from routing
//! (`providers.NAME.health`), and what a policy does with ejected targets
//! (`policies.NAME.health`, `policies.NAME.on_all_unhealthy`). `routing::Health` keeps the
//! state.

use std::time::Duration;

/// `providers.NAME.health`: the signals that eject a target (`provider/model`) and for how
/// long. A provider without it (`health = "off"`) never ejects anything.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// This many failures in a row eject the target.
    pub consecutive_failures: u32,
    /// A share of failed attempts (0 to 1) over the current `window` that ejects the target,
    /// once the window holds `min_requests` attempts.
    pub failure_rate: f64,
    /// Attempts a window needs before its failure rate counts.
    pub min_requests: u32,
    /// How long a failure-rate window lasts.
    pub window: Duration,
    /// The first ejection's length; each ejection that follows a failed probe doubles it.
    pub ejection: Duration,
    /// The longest ejection that follows failures: a target that recovers is probed at
    /// least this often while traffic reaches it, so it is back in use within about this
    /// long of recovering (and a long outage costs one probe per this long).
    pub max_ejection: Duration,
    /// The longest a provider's `Retry-After` ejects its target.
    pub max_retry_after: Duration,
    /// Attempts that may probe an ejected target at once once its ejection ends.
    pub probes: u32,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            consecutive_failures: 3,
            failure_rate: 0.5,
            min_requests: 10,
            window: Duration::from_secs(30),
            ejection: Duration::from_secs(5),
            max_ejection: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
            probes: 1,
        }
    }
}

/// Whether something consults health (`health = "on"`, the default) or not (`"off"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthMode {
    /// Health is kept and used.
    #[default]
    On,
    /// As before health existed: nothing is ejected or skipped.
    Off,
}

/// What a policy does when every capable target of a plan is ejected
/// (`policies.NAME.on_all_unhealthy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnAllUnhealthy {
    /// Tries them anyway, in plan order: a health mistake never becomes an outage.
    #[default]
    TryAnyway,
    /// Fails with `no_healthy_target`.
    Fail,
}
