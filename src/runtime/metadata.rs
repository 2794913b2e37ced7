//! The runtime's self-description: state, store, providers with live admission figures,
//! abilities and policies.

use std::sync::Arc;

use tokio::time::Instant;

use super::targets::Slots;
use crate::config::{AbilityConfig, Config, OnUnknownOutcome, PolicyConfig};
use crate::routing::{TargetHealth, Waiting};
use crate::store::{EventStore, StoreStats};

/// Whether the runtime admits new work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeState {
    /// Admitting work.
    Ready,
    /// Shutdown has begun.
    Stopping,
    /// Event storage failed.
    Unavailable,
}

impl RuntimeState {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Stopping => "stopping",
            Self::Unavailable => "unavailable",
        }
    }
}

/// One provider with its live admission figures.
#[derive(Debug, Clone)]
pub struct ProviderStatus {
    /// Name.
    pub name: Arc<str>,
    /// Adapter name.
    pub adapter: &'static str,
    /// Permits.
    pub max_concurrency: u32,
    /// Queue room, per admission class (by `Priority::index`).
    pub queue_capacity: [u32; 3],
    /// What an attempt whose outcome is unknown leads to (a policy may say otherwise).
    pub on_unknown_outcome: OnUnknownOutcome,
    /// Attempts of this replica running now.
    pub in_flight: u32,
    /// Attempts of this replica waiting now: for its permit, or for a global one.
    pub queued: u32,
    /// Attempts of this replica waiting for its permit now, per admission class, and how
    /// long the oldest of each has waited.
    pub queued_by_priority: [Waiting; 3],
    /// With a global limiter (`limiter = { kind = "redis" }`): its figures.
    pub limiter: Option<GlobalLimit>,
    /// Models, their capabilities and health.
    pub models: Vec<ModelStatus>,
}

/// One model of a provider: what it can do, and whether routing skips it now.
#[derive(Debug, Clone)]
pub struct ModelStatus {
    /// Name.
    pub name: Arc<str>,
    /// Capabilities.
    pub capabilities: Vec<String>,
    /// The target's health on this replica.
    pub health: TargetHealth,
}

/// A provider's global limiter, as this replica sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalLimit {
    /// Permits held across every replica, as last read from Redis (every third of the lease
    /// once attempts have run, while Redis answers); `None` before the first read.
    pub global_in_flight: Option<u32>,
    /// Whether Redis answered the last call (`true` before the first).
    pub reachable: bool,
    /// Attempts refused (`fail_closed`), or admitted by this replica alone (`fail_open`),
    /// because Redis was unreachable, since start-up.
    pub unavailable: u64,
    /// Leases of this replica that ended unrenewed (Redis out of reach, or the process
    /// paused, past the lease) while their attempts ran, and were taken by others meanwhile.
    pub leases_lost: u64,
}

/// What the runtime is and can do now.
#[derive(Debug, Clone)]
pub struct RuntimeMetadata {
    /// Admission state.
    pub state: RuntimeState,
    /// Crate version.
    pub version: &'static str,
    /// `memory`, `file` or `postgres`.
    pub store_kind: &'static str,
    /// Whether events survive a restart.
    pub store_durable: bool,
    /// Store capacity figures.
    pub store: StoreStats,
    /// Providers by name.
    pub providers: Vec<ProviderStatus>,
    /// Abilities by name.
    pub abilities: Vec<AbilityConfig>,
    /// Policies by name.
    pub policies: Vec<PolicyConfig>,
}

pub(super) fn describe(
    state: RuntimeState,
    store: &dyn EventStore,
    providers: &Slots,
    config: &Config,
) -> RuntimeMetadata {
    let now = Instant::now();
    RuntimeMetadata {
        state,
        version: env!("CARGO_PKG_VERSION"),
        store_kind: store.kind(),
        store_durable: store.durable(),
        store: store.stats(),
        providers: providers
            .iter()
            .map(|slot| ProviderStatus {
                name: slot.config.name.clone(),
                adapter: slot.config.adapter.name(),
                max_concurrency: slot.admission.max_concurrency(),
                queue_capacity: slot.admission.queue_capacity(),
                on_unknown_outcome: slot.config.on_unknown_outcome,
                in_flight: slot.admission.in_flight(),
                limiter: slot.admission.limiter().map(|l| GlobalLimit {
                    global_in_flight: l.global_in_flight,
                    reachable: l.reachable,
                    unavailable: l.unavailable,
                    leases_lost: l.lost,
                }),
                queued: slot.admission.queued(),
                queued_by_priority: slot.admission.queued_by_priority(),
                models: slot
                    .config
                    .models
                    .iter()
                    .map(|m| ModelStatus {
                        name: m.name.clone(),
                        capabilities: m.capabilities.iter().cloned().collect(),
                        health: slot.health.status(&m.name, now),
                    })
                    .collect(),
            })
            .collect(),
        abilities: config.abilities.values().cloned().collect(),
        policies: config.policies.values().cloned().collect(),
    }
}
