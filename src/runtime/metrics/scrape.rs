//! What is read at each scrape: the runtime's state, each provider's admission and
//! limiter, each target's health and the store, from the metadata of the moment; then the
//! whole registry, encoded.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::families::family;
use super::{HEALTH_STATES, Labels, Metrics};
use crate::execution::Priority;

/// Read at each scrape.
#[derive(Default)]
pub(super) struct Gauges {
    state: Family<Labels, Gauge>,
    in_flight: Family<Labels, Gauge>,
    queued: Family<Labels, Gauge>,
    queued_by_priority: Family<Labels, Gauge>,
    global_in_flight: Family<Labels, Gauge>,
    limiter_reachable: Family<Labels, Gauge>,
    /// Brought up to each limiter's counts at each scrape, one scrape at a time.
    limiter_unavailable: std::sync::Mutex<Family<Labels, Counter>>,
    limiter_leases_lost: std::sync::Mutex<Family<Labels, Counter>>,
    target_health: Family<Labels, Gauge>,
    /// Brought up to each target's count at each scrape, one scrape at a time.
    target_ejections: std::sync::Mutex<Family<Labels, Counter>>,
    store_executions: Gauge,
    store_bytes: Gauge,
    /// Brought up to the store's count at each scrape, one scrape at a time.
    store_evictions: std::sync::Mutex<Counter>,
}

impl Gauges {
    /// The gauges, registered.
    pub(super) fn new(registry: &mut Registry) -> Self {
        let locked = |registry: &mut Registry, name: &str, help: &str| {
            std::sync::Mutex::new(family::<Counter>(registry, name, help))
        };
        let store_executions = Gauge::default();
        registry.register(
            "store_executions",
            "Executions the store holds",
            store_executions.clone(),
        );
        let store_bytes = Gauge::default();
        registry.register(
            "store_bytes",
            "Bytes the store holds, as it counts them",
            store_bytes.clone(),
        );
        let evictions = Counter::default();
        registry.register(
            "store_evictions",
            "Executions the store let go: expired, evicted for room, or dropped at the disk bound",
            evictions.clone(),
        );
        Self {
            state: family(
                registry,
                "state",
                "1 for the runtime's state (ready, stopping, unavailable)",
            ),
            in_flight: family(
                registry,
                "admission_in_flight",
                "Attempts holding a provider's permit",
            ),
            queued: family(
                registry,
                "admission_queued",
                "Attempts waiting for a provider's permit",
            ),
            queued_by_priority: family(
                registry,
                "admission_queued_by_priority",
                "Attempts waiting for a provider's own permit, by admission class",
            ),
            global_in_flight: family(
                registry,
                "admission_global_in_flight",
                "Permits of a provider with a Redis limiter held across every replica, as last read",
            ),
            limiter_reachable: family(
                registry,
                "limiter_reachable",
                "1 while a provider's Redis limiter answers, 0 while its on_unavailable policy holds",
            ),
            limiter_unavailable: locked(
                registry,
                "limiter_unavailable",
                "Attempts refused, or admitted by this replica alone, because a provider's Redis limiter was unreachable",
            ),
            limiter_leases_lost: locked(
                registry,
                "limiter_leases_lost",
                "Leases of a provider's Redis limiter that ended unrenewed while their attempts ran, taken by others meanwhile",
            ),
            target_health: family(
                registry,
                "target_health",
                "1 for each target's health state (off, closed, open, half_open), as this replica keeps it",
            ),
            target_ejections: locked(
                registry,
                "target_ejections",
                "Times a target's health ejected it from routing",
            ),
            store_executions,
            store_bytes,
            store_evictions: std::sync::Mutex::new(evictions),
        }
    }
}

impl Metrics {
    /// The health gauges of `provider`'s targets, from its metadata.
    fn target_health(&self, provider: &crate::runtime::ProviderStatus) {
        let g = &self.gauges;
        for model in &provider.models {
            let target = vec![
                ("provider", provider.name.to_string()),
                ("model", model.name.to_string()),
            ];
            for state in HEALTH_STATES {
                let mut labels = target.clone();
                labels.push(("state", state.as_str().to_owned()));
                g.target_health
                    .get_or_create(&labels)
                    .set(i64::from(model.health.state == state));
            }
            if let Ok(family) = g.target_ejections.lock() {
                let counter = family.get_or_create(&target);
                counter.inc_by(model.health.ejections.saturating_sub(counter.get()));
            }
        }
    }

    /// The text exposition, with the gauges read from `metadata` now.
    pub(crate) fn encode(&self, metadata: &crate::runtime::RuntimeMetadata) -> String {
        let g = &self.gauges;
        for state in ["ready", "stopping", "unavailable"] {
            let on = metadata.state.as_str() == state;
            g.state
                .get_or_create(&vec![("state", state.to_owned())])
                .set(i64::from(on));
        }
        for provider in &metadata.providers {
            let labels = vec![("provider", provider.name.to_string())];
            g.in_flight
                .get_or_create(&labels)
                .set(i64::from(provider.in_flight));
            g.queued
                .get_or_create(&labels)
                .set(i64::from(provider.queued));
            for class in Priority::ALL {
                let mut labels = labels.clone();
                labels.push(("priority", class.as_str().to_owned()));
                g.queued_by_priority
                    .get_or_create(&labels)
                    .set(i64::from(provider.queued_by_priority[class.index()].queued));
            }
            self.target_health(provider);
            let Some(limiter) = provider.limiter else {
                continue;
            };
            if let Some(global) = limiter.global_in_flight {
                g.global_in_flight
                    .get_or_create(&labels)
                    .set(i64::from(global));
            }
            g.limiter_reachable
                .get_or_create(&labels)
                .set(i64::from(limiter.reachable));
            for (family, count) in [
                (&g.limiter_unavailable, limiter.unavailable),
                (&g.limiter_leases_lost, limiter.leases_lost),
            ] {
                if let Ok(family) = family.lock() {
                    let counter = family.get_or_create(&labels);
                    counter.inc_by(count.saturating_sub(counter.get()));
                }
            }
        }
        g.store_executions
            .set(i64::try_from(metadata.store.executions).unwrap_or(i64::MAX));
        g.store_bytes
            .set(i64::try_from(metadata.store.bytes).unwrap_or(i64::MAX));
        if let Ok(evictions) = g.store_evictions.lock() {
            let seen = evictions.get();
            evictions.inc_by(metadata.store.evicted.saturating_sub(seen));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}
