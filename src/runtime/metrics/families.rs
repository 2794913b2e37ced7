//! The series every counted event may touch, made and registered once when the runtime is
//! built: each family with its name and help where its handles are made, per ability, per
//! provider and per provider and model.

use std::sync::Arc;

use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Metric, Registry};

use super::{CLASSES, ENDINGS, Histogram, Labels, NEXT, UNIT_COUNT, ending_name};
use crate::config::Config;
use crate::execution::{NameMap, Priority, UsageUnit};

/// A family of `T` registered as `name` with `help`, and a handle to it.
pub(super) fn family<T: Metric + TypedMetric + Clone + Default>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> Family<Labels, T> {
    let family = Family::<Labels, T>::default();
    registry.register(name, help, family.clone());
    family
}

/// A family of histograms of seconds registered as `name` with `help`.
fn seconds(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Histogram> {
    let family = Family::<Labels, Histogram>::new_with_constructor(Histogram::seconds as fn() -> _);
    registry.register(name, help, family.clone());
    family
}

/// What one ability's executions record.
pub(super) struct AbilityMetrics {
    pub(super) started: Counter,
    pub(super) ended: [Counter; ENDINGS],
    pub(super) duration: Histogram,
}

/// What one provider's model records.
pub(super) struct TargetMetrics {
    pub(super) attempts: [[Counter; NEXT.len()]; CLASSES.len()],
    pub(super) usage: [Counter; UNIT_COUNT],
    pub(super) skips: Counter,
}

/// What one provider records.
pub(super) struct ProviderMetrics {
    pub(super) attempt_duration: Histogram,
    pub(super) first_output: Histogram,
    /// By admission class (`Priority::index`).
    pub(super) queue_wait: [Histogram; 3],
    pub(super) rejections: Counter,
}

/// Every ability's series.
pub(super) fn abilities(config: &Config, registry: &mut Registry) -> NameMap<AbilityMetrics> {
    let started = family::<Counter>(registry, "executions_started", "Executions accepted");
    let ended = family::<Counter>(
        registry,
        "executions_ended",
        "Executions ended, by code (`completed` for success)",
    );
    let duration = seconds(
        registry,
        "execution_duration_seconds",
        "From acceptance to the terminal event",
    );
    config
        .abilities
        .keys()
        .map(|name| {
            let ability = || vec![("ability", name.to_string())];
            let metrics = AbilityMetrics {
                started: started.get_or_create_owned(&ability()),
                ended: std::array::from_fn(|i| {
                    let mut labels = ability();
                    labels.push(("code", ending_name(i).to_owned()));
                    ended.get_or_create_owned(&labels)
                }),
                duration: duration.get_or_create_owned(&ability()),
            };
            (Arc::<str>::from(name.as_ref()), metrics)
        })
        .collect()
}

/// Every provider's series, and every target's (by provider, then model); with the usage
/// family, for the units no adapter of this version reports.
pub(super) fn providers(
    config: &Config,
    registry: &mut Registry,
) -> (
    NameMap<ProviderMetrics>,
    NameMap<NameMap<TargetMetrics>>,
    Family<Labels, Counter>,
) {
    let attempts = family::<Counter>(
        registry,
        "attempts",
        "Attempts ended, by error class and next action (`none` for an attempt that succeeded)",
    );
    let attempt_duration = seconds(
        registry,
        "attempt_duration_seconds",
        "Attempts' durations, from their start (queue wait included) to their end",
    );
    let first_output = seconds(
        registry,
        "time_to_first_output_seconds",
        "From the attempt's request being sent (after admission) to the first output that commits, by the provider that sent it",
    );
    let usage = family::<Counter>(registry, "usage_units", "Usage reported, by unit");
    let queue_wait = seconds(
        registry,
        "queue_wait_seconds",
        "From asking for a provider's permit to the attempt's start",
    );
    let rejections = family::<Counter>(
        registry,
        "admission_rejections",
        "Attempts refused because a provider's queue was full",
    );
    let skips = family::<Counter>(
        registry,
        "target_skips",
        "Plans that skipped a target because its health had it ejected",
    );
    let mut targets = NameMap::default();
    let mut providers = NameMap::default();
    for (provider, spec) in &config.providers {
        let provider: Arc<str> = Arc::from(provider.as_ref());
        let labels = vec![("provider", provider.to_string())];
        providers.insert(
            provider.clone(),
            ProviderMetrics {
                attempt_duration: attempt_duration.get_or_create_owned(&labels),
                first_output: first_output.get_or_create_owned(&labels),
                queue_wait: Priority::ALL.map(|class| {
                    let mut labels = labels.clone();
                    labels.push(("priority", class.as_str().to_owned()));
                    queue_wait.get_or_create_owned(&labels)
                }),
                rejections: rejections.get_or_create_owned(&labels),
            },
        );
        for model in &spec.models {
            let target = || {
                vec![
                    ("provider", provider.to_string()),
                    ("model", model.name.to_string()),
                ]
            };
            let metrics = TargetMetrics {
                attempts: CLASSES.map(|class| {
                    NEXT.map(|next| {
                        let mut labels = target();
                        labels.push(("class", class.to_owned()));
                        labels.push(("next_action", next.to_owned()));
                        attempts.get_or_create_owned(&labels)
                    })
                }),
                usage: UsageUnit::KNOWN.map(|unit| {
                    let mut labels = target();
                    labels.push(("unit", unit.as_str().to_owned()));
                    usage.get_or_create_owned(&labels)
                }),
                skips: skips.get_or_create_owned(&target()),
            };
            targets
                .entry(provider.clone())
                .or_insert_with(NameMap::default)
                .insert(Arc::from(model.name.as_ref()), metrics);
        }
    }
    (providers, targets, usage)
}
