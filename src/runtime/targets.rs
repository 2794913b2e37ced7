//! The providers as the runtime drives them: each adapter beside its admission gate and the
//! settings routing reads. Adapters know nothing of admission; admission knows nothing of
//! adapters; the runtime puts the two together here.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{Config, ProviderConfig};
use crate::provider::{Provider, ProviderInitError, Providers};
use crate::routing::Admission;

/// One provider: its configuration, adapter and admission gate.
#[derive(Debug)]
pub(crate) struct ProviderSlot {
    pub config: ProviderConfig,
    pub adapter: Arc<dyn Provider>,
    pub admission: Admission,
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
        let slots = config
            .providers
            .values()
            .filter_map(|p| {
                let adapter = adapters.get(&p.name)?.clone();
                let slot = ProviderSlot {
                    config: p.clone(),
                    adapter,
                    admission: Admission::new(p.max_concurrency, p.queue_capacity),
                };
                Some((p.name.clone(), slot))
            })
            .collect();
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
}
