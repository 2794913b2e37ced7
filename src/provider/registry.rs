//! The configured providers, each with its adapter and admission gate.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Provider;
use super::scripted::ScriptedProvider;
use crate::config::{AdapterConfig, Config, ProviderConfig};
use crate::routing::Admission;

/// One provider: its configuration, adapter and admission gate.
#[derive(Debug)]
pub struct ProviderSlot {
    /// Its configuration.
    pub config: ProviderConfig,
    /// The adapter.
    pub provider: Arc<dyn Provider>,
    /// Its admission gate.
    pub admission: Admission,
}

/// Every configured provider, by name.
#[derive(Debug, Default)]
pub struct Providers {
    slots: BTreeMap<Arc<str>, ProviderSlot>,
}

impl Providers {
    /// Builds each provider's adapter from its configuration; `overrides` replace the adapter
    /// of the providers they name (embedding and tests at the SPI boundary).
    pub fn from_config(
        config: &Config,
        mut overrides: BTreeMap<String, Arc<dyn Provider>>,
    ) -> Self {
        let slots = config
            .providers
            .values()
            .map(|p| {
                let provider = overrides.remove(&*p.name).unwrap_or_else(|| adapter(p));
                let slot = ProviderSlot {
                    config: p.clone(),
                    provider,
                    admission: Admission::new(p.max_concurrency, p.queue_capacity),
                };
                (p.name.clone(), slot)
            })
            .collect();
        Self { slots }
    }

    /// The provider called `name`.
    pub fn get(&self, name: &str) -> Option<&ProviderSlot> {
        self.slots.get(name)
    }

    /// All providers, ordered by name.
    pub fn iter(&self) -> impl Iterator<Item = &ProviderSlot> {
        self.slots.values()
    }
}

fn adapter(config: &ProviderConfig) -> Arc<dyn Provider> {
    match config.adapter {
        AdapterConfig::Scripted => Arc::new(ScriptedProvider::new(
            config
                .models
                .iter()
                .map(|m| (m.name.clone(), m.script.clone())),
        )),
    }
}
