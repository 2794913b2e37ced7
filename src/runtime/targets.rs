//! The providers as the runtime drives them: each adapter beside its admission gate and the
//! settings routing reads. Adapters know nothing of admission; admission knows nothing of
//! adapters; the runtime puts the two together here.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;

use crate::config::{Config, HealthMode, LimiterConfig, PolicyConfig, ProviderConfig};
use crate::execution::RoutingPlan;
use crate::provider::{Provider, ProviderInitError, Providers};
use crate::routing::{Admission, GlobalGate, Health, Verdict, with_health};

/// One provider: its configuration, adapter, admission gate and its targets' health.
#[derive(Debug)]
pub(crate) struct ProviderSlot {
    pub config: ProviderConfig,
    pub adapter: Arc<dyn Provider>,
    pub admission: Admission,
    pub health: Health,
}

/// Every configured provider, by name.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    slots: BTreeMap<Arc<str>, ProviderSlot>,
}

impl Slots {
    /// The configured providers with their adapters (`overrides` first, else built from
    /// the configuration) and fresh admission gates.
    pub(super) fn new(
        config: &Config,
        overrides: BTreeMap<String, Arc<dyn Provider>>,
    ) -> Result<Self, ProviderInitError> {
        let adapters = Providers::from_config(config, overrides)?;
        let mut slots = BTreeMap::new();
        for p in config.providers.values() {
            let Some(adapter) = adapters.get(&p.name) else {
                continue;
            };
            let mut admission = Admission::new(p.max_concurrency, p.queue_capacity, p.queue_aging);
            if let Some(limiter) = &p.limiter {
                admission = admission.with_global(global(p, limiter)?);
            }
            let slot = ProviderSlot {
                config: p.clone(),
                adapter: adapter.clone(),
                admission,
                health: Health::new(p),
            };
            slots.insert(p.name.clone(), slot);
        }
        Ok(Self { slots })
    }

    /// The provider called `name`.
    pub(super) fn get(&self, name: &str) -> Option<&ProviderSlot> {
        self.slots.get(name)
    }

    /// All providers, ordered by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = &ProviderSlot> {
        self.slots.values()
    }

    /// `plan` of `policy` as its targets' health has it now (`routing::with_health`); as it
    /// is under `health = "off"`.
    pub(super) fn with_health(
        &self,
        plan: Arc<RoutingPlan>,
        policy: &PolicyConfig,
    ) -> Arc<RoutingPlan> {
        if policy.health == HealthMode::Off {
            return plan;
        }
        let now = Instant::now();
        with_health(plan, policy.on_all_unhealthy, |provider, model| {
            self.get(provider)
                .map_or(Verdict::Healthy, |slot| slot.health.check(model, now))
        })
    }
}

/// The global gate of provider `p` (`limiter`).
#[cfg(feature = "redis")]
fn global(p: &ProviderConfig, limiter: &LimiterConfig) -> Result<GlobalGate, ProviderInitError> {
    GlobalGate::new(&p.name, limiter, p.max_concurrency)
        .map_err(|why| ProviderInitError::new(&p.name, why.to_string()))
}

/// Without the `redis` feature a config with a limiter does not validate; one built by hand
/// is refused here.
#[cfg(not(feature = "redis"))]
fn global(p: &ProviderConfig, _: &LimiterConfig) -> Result<GlobalGate, ProviderInitError> {
    Err(ProviderInitError::new(
        &p.name,
        "the `redis` limiter is not in this build (cargo feature `redis`)",
    ))
}
