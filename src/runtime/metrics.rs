//! Prometheus metrics (`prometheus-client`, the Prometheus project's own client: no global
//! registry, OpenMetrics text, and metric handles that are plain atomics).
//!
//! What executions do is counted from the events the runtime appends ([`Metered`], a store
//! in front of the store): every path that ends an execution (its driver, a cancellation
//! without one, the last resort after a fault) appends through it. Recording takes no lock:
//! every handle an event can need (per ability, per provider and model, per code, class and
//! next action, per known usage unit) is made when the runtime is built, from its config,
//! and found in maps that never change. Gauges (state, admission, the store) are read when
//! the endpoint is scraped.
//!
//! Label values are config names and closed sets only; never an execution id, a label or a
//! prompt. None of this exists unless `server.metrics_listen` is set.

mod families;
mod histogram;
mod metered;
mod scrape;

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::execution::{ErrorClass, ErrorCode, NameMap, NextAction, Priority, UsageUnit};
use crate::routing::HealthState;

pub(crate) use histogram::Histogram;
pub(crate) use metered::Metered;

type Labels = Vec<(&'static str, String)>;

/// Series of `ended` per ability: `completed`, then every error code.
const ENDINGS: usize = ErrorCode::ALL.len() + 1;

/// Where `code` (none: `completed`) is among the [`ENDINGS`].
fn ending(code: Option<ErrorCode>) -> usize {
    code.and_then(|code| ErrorCode::ALL.iter().position(|c| *c == code))
        .map_or(0, |i| i + 1)
}

/// The `code` label of ending `i`.
fn ending_name(i: usize) -> &'static str {
    match i.checked_sub(1) {
        Some(i) => ErrorCode::ALL[i].as_str(),
        None => "completed",
    }
}

const CLASSES: [&str; 6] = [
    "none",
    ErrorClass::Retryable.as_str(),
    ErrorClass::Rejected.as_str(),
    ErrorClass::Invalid.as_str(),
    ErrorClass::OutcomeUnknown.as_str(),
    ErrorClass::Interrupted.as_str(),
];
const NEXT: [&str; 4] = ["none", "retry_same_target", "fallback", "stop"];
const HEALTH_STATES: [HealthState; 4] = [
    HealthState::Off,
    HealthState::Closed,
    HealthState::Open,
    HealthState::HalfOpen,
];
/// How many units an adapter of this version reports ([`UsageUnit::KNOWN`]; its `len()` is
/// not a constant expression, as the array's strings have a destructor).
const UNIT_COUNT: usize = 6;

fn class(class: Option<ErrorClass>) -> usize {
    match class {
        None => 0,
        Some(ErrorClass::Retryable) => 1,
        Some(ErrorClass::Rejected) => 2,
        Some(ErrorClass::Invalid) => 3,
        Some(ErrorClass::OutcomeUnknown) => 4,
        Some(ErrorClass::Interrupted) => 5,
    }
}

fn next(next: Option<NextAction>) -> usize {
    match next {
        None => 0,
        Some(NextAction::RetrySameTarget) => 1,
        Some(NextAction::Fallback) => 2,
        Some(NextAction::Stop) => 3,
    }
}

/// The runtime's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    abilities: NameMap<families::AbilityMetrics>,
    /// By provider, then model.
    targets: NameMap<NameMap<families::TargetMetrics>>,
    /// By provider.
    providers: NameMap<families::ProviderMetrics>,
    /// Units no adapter of this version reports: found under a lock, once per fact.
    other_usage: Family<Labels, Counter>,
    /// Execute and Watch streams open now.
    open_streams: Gauge,
    /// Response bytes the server's connections hold for their clients, unsent.
    pub(crate) unsent: Gauge,
    /// A durable store's appends, from the call to the acknowledgement (written and synced).
    store_append: Option<Histogram>,
    gauges: scrape::Gauges,
}

/// An open stream, counted in `open_streams` until dropped.
#[derive(Debug)]
pub(crate) struct OpenStream(Gauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// Every series the config can produce, made now; the append latency only for a
    /// `durable` store (a memory store's appends never wait).
    pub(crate) fn new(config: &Config, durable: bool) -> Self {
        let mut registry = Registry::with_prefix("model_runtime");
        let abilities = families::abilities(config, &mut registry);
        let (providers, targets, other_usage) = families::providers(config, &mut registry);
        let open_streams = Gauge::default();
        registry.register(
            "open_streams",
            "Execute and Watch streams open",
            open_streams.clone(),
        );
        let unsent = Gauge::default();
        registry.register(
            "unsent_bytes",
            "Response bytes client connections hold that their sockets have not taken",
            unsent.clone(),
        );
        let store_append = durable.then(|| {
            let histogram = Histogram::seconds();
            registry.register(
                "store_append_duration_seconds",
                "From an append to its acknowledgement, written and synced (durable stores only)",
                histogram.clone(),
            );
            histogram
        });
        let gauges = scrape::Gauges::new(&mut registry);
        Self {
            registry,
            abilities,
            targets,
            providers,
            other_usage,
            open_streams,
            unsent,
            store_append,
            gauges,
        }
    }

    /// Counts a stream open until the guard is dropped.
    pub(crate) fn open_stream(&self) -> OpenStream {
        self.open_streams.inc();
        OpenStream(self.open_streams.clone())
    }

    /// An attempt on `provider` succeeded, `took` after it began (its queue wait included,
    /// as a failed attempt's record counts it); failed ones are counted from their records.
    pub(crate) fn attempt_succeeded(&self, provider: &str, took: Duration) {
        if let Some(p) = self.providers.get(provider) {
            p.attempt_duration.observe(took);
        }
    }

    /// The first output that commits came from `provider`, `took` after acceptance.
    pub(crate) fn first_output(&self, provider: &str, took: Duration) {
        if let Some(p) = self.providers.get(provider) {
            p.first_output.observe(took);
        }
    }

    /// Whether appends are timed (a durable store's).
    fn times_appends(&self) -> bool {
        self.store_append.is_some()
    }

    fn appended(&self, took: Duration) {
        if let Some(h) = &self.store_append {
            h.observe(took);
        }
    }

    /// An execution of `ability` was stored.
    pub(crate) fn started(&self, ability: &str) {
        if let Some(a) = self.abilities.get(ability) {
            a.started.inc();
        }
    }

    fn ended(&self, ability: &str, code: Option<ErrorCode>, took: Option<Duration>) {
        if let Some(a) = self.abilities.get(ability) {
            a.ended[ending(code)].inc();
            if let Some(took) = took {
                a.duration.observe(took);
            }
        }
    }

    fn attempt(
        &self,
        target: (&str, &str),
        failure: Option<(ErrorClass, Option<NextAction>)>,
        took: Option<Duration>,
    ) {
        if let Some(t) = self.target(target) {
            let (c, n) = failure.map_or((0, 0), |(c, n)| (class(Some(c)), next(n)));
            t.attempts[c][n].inc();
        }
        if let (Some(took), Some(p)) = (took, self.providers.get(target.0)) {
            p.attempt_duration.observe(took);
        }
    }

    /// An attempt of class `priority` waited `waited` for `provider`'s permit.
    pub(crate) fn queued(&self, provider: &str, priority: Priority, waited: Duration) {
        if let Some(p) = self.providers.get(provider) {
            p.queue_wait[priority.index()].observe(waited);
        }
    }

    fn rejected(&self, provider: &str) {
        if let Some(p) = self.providers.get(provider) {
            p.rejections.inc();
        }
    }

    fn skipped(&self, target: (&str, &str)) {
        if let Some(t) = self.target(target) {
            t.skips.inc();
        }
    }

    fn usage(&self, target: (&str, &str), unit: &UsageUnit, quantity: u64) {
        let known = UsageUnit::KNOWN.iter().position(|u| u == unit);
        match (self.target(target), known) {
            (Some(t), Some(i)) => {
                t.usage[i].inc_by(quantity);
            }
            _ => {
                let labels = vec![
                    ("provider", target.0.to_owned()),
                    ("model", target.1.to_owned()),
                    ("unit", unit.as_str().to_owned()),
                ];
                self.other_usage.get_or_create(&labels).inc_by(quantity);
            }
        }
    }

    fn target(&self, (provider, model): (&str, &str)) -> Option<&families::TargetMetrics> {
        self.targets.get(provider)?.get(model)
    }
}
