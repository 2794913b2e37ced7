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

mod histogram;
mod metered;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::config::Config;
use crate::execution::{ErrorClass, ErrorCode, NextAction, Priority, UsageUnit};
use crate::routing::HealthState;

pub(crate) use histogram::Histogram;
pub(crate) use metered::Metered;

type Labels = Vec<(&'static str, String)>;

/// Maps keyed by config names, looked up on every counted event: hashed with the Fx
/// function (a multiply and a rotate per word), not SipHash, whose flood resistance these
/// keys (names from the config, never a caller's text) do not need.
type ByName<T> = HashMap<Arc<str>, T, BuildHasherDefault<NameHasher>>;

#[derive(Default)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

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
/// How many [`UNITS`] there are.
const UNIT_COUNT: usize = 6;
/// Every unit an adapter of this version reports.
const UNITS: [UsageUnit; UNIT_COUNT] = [
    UsageUnit::INPUT_TOKENS,
    UsageUnit::OUTPUT_TOKENS,
    UsageUnit::CACHED_INPUT_TOKENS,
    UsageUnit::CACHE_WRITE_INPUT_TOKENS,
    UsageUnit::REASONING_TOKENS,
    UsageUnit::REQUESTS,
];

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

/// What one ability's executions record.
struct AbilityMetrics {
    started: Counter,
    ended: [Counter; ENDINGS],
    duration: Histogram,
}

/// What one provider's model records.
struct TargetMetrics {
    attempts: [[Counter; NEXT.len()]; CLASSES.len()],
    usage: [Counter; UNIT_COUNT],
    skips: Counter,
}

/// What one provider records.
struct ProviderMetrics {
    attempt_duration: Histogram,
    first_output: Histogram,
    /// By admission class (`Priority::index`).
    queue_wait: [Histogram; 3],
    rejections: Counter,
}

/// The runtime's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    abilities: ByName<AbilityMetrics>,
    /// By provider, then model.
    targets: ByName<ByName<TargetMetrics>>,
    /// By provider.
    providers: ByName<ProviderMetrics>,
    /// Units no adapter of this version reports: found under a lock, once per fact.
    other_usage: Family<Labels, Counter>,
    /// Execute and Watch streams open now.
    open_streams: Gauge,
    /// Response bytes the server's connections hold for their clients, unsent.
    pub(crate) unsent: Gauge,
    /// A durable store's appends, from the call to the acknowledgement (written and synced).
    store_append: Option<Histogram>,
    gauges: Gauges,
}

/// An open stream, counted in `open_streams` until dropped.
#[derive(Debug)]
pub(crate) struct OpenStream(Gauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Read at each scrape.
#[derive(Default)]
struct Gauges {
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

impl Metrics {
    /// Every series the config can produce, made now; the append latency only for a
    /// `durable` store (a memory store's appends never wait).
    #[expect(
        clippy::too_many_lines,
        reason = "one job: every series registered in one place with its help text, a table"
    )]
    pub(crate) fn new(config: &Config, durable: bool) -> Self {
        let mut registry = Registry::with_prefix("model_runtime");
        let started = Family::<Labels, Counter>::default();
        let ended = Family::<Labels, Counter>::default();
        let duration =
            Family::<Labels, Histogram>::new_with_constructor(Histogram::seconds as fn() -> _);
        let attempts = Family::<Labels, Counter>::default();
        let attempt_duration =
            Family::<Labels, Histogram>::new_with_constructor(Histogram::seconds as fn() -> _);
        let usage = Family::<Labels, Counter>::default();
        let queue_wait =
            Family::<Labels, Histogram>::new_with_constructor(Histogram::seconds as fn() -> _);
        let first_output =
            Family::<Labels, Histogram>::new_with_constructor(Histogram::seconds as fn() -> _);
        let rejections = Family::<Labels, Counter>::default();
        let skips = Family::<Labels, Counter>::default();
        let abilities = config
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
            .collect();
        let mut targets = ByName::default();
        let mut providers = ByName::default();
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
                    usage: UNITS.map(|unit| {
                        let mut labels = target();
                        labels.push(("unit", unit.as_str().to_owned()));
                        usage.get_or_create_owned(&labels)
                    }),
                    skips: skips.get_or_create_owned(&target()),
                };
                targets
                    .entry(provider.clone())
                    .or_insert_with(ByName::default)
                    .insert(Arc::from(model.name.as_ref()), metrics);
            }
        }
        registry.register("executions_started", "Executions accepted", started);
        registry.register(
            "executions_ended",
            "Executions ended, by code (`completed` for success)",
            ended,
        );
        registry.register(
            "execution_duration_seconds",
            "From acceptance to the terminal event",
            duration,
        );
        registry.register(
            "attempts",
            "Attempts ended, by error class and next action (`none` for an attempt that succeeded)",
            attempts,
        );
        registry.register(
            "attempt_duration_seconds",
            "Attempts' durations, from their start (queue wait included) to their end",
            attempt_duration,
        );
        registry.register(
            "time_to_first_output_seconds",
            "From the attempt's request being sent (after admission) to the first output that commits, by the provider that sent it",
            first_output,
        );
        registry.register("usage_units", "Usage reported, by unit", usage.clone());
        registry.register(
            "queue_wait_seconds",
            "From asking for a provider's permit to the attempt's start",
            queue_wait,
        );
        registry.register(
            "admission_rejections",
            "Attempts refused because a provider's queue was full",
            rejections,
        );
        registry.register(
            "target_skips",
            "Plans that skipped a target because its health had it ejected",
            skips,
        );
        let other_usage = usage;
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
        let mut gauges = Gauges::default();
        registry.register(
            "state",
            "1 for the runtime's state (ready, stopping, unavailable)",
            gauges.state.clone(),
        );
        registry.register(
            "admission_in_flight",
            "Attempts holding a provider's permit",
            gauges.in_flight.clone(),
        );
        registry.register(
            "admission_queued",
            "Attempts waiting for a provider's permit",
            gauges.queued.clone(),
        );
        registry.register(
            "admission_queued_by_priority",
            "Attempts waiting for a provider's own permit, by admission class",
            gauges.queued_by_priority.clone(),
        );
        registry.register(
            "admission_global_in_flight",
            "Permits of a provider with a Redis limiter held across every replica, as last read",
            gauges.global_in_flight.clone(),
        );
        registry.register(
            "limiter_reachable",
            "1 while a provider's Redis limiter answers, 0 while its on_unavailable policy holds",
            gauges.limiter_reachable.clone(),
        );
        if let Ok(family) = gauges.limiter_unavailable.lock() {
            registry.register(
                "limiter_unavailable",
                "Attempts refused, or admitted by this replica alone, because a provider's Redis limiter was unreachable",
                family.clone(),
            );
        }
        if let Ok(family) = gauges.limiter_leases_lost.lock() {
            registry.register(
                "limiter_leases_lost",
                "Leases of a provider's Redis limiter that ended unrenewed while their attempts ran, taken by others meanwhile",
                family.clone(),
            );
        }
        registry.register(
            "target_health",
            "1 for each target's health state (off, closed, open, half_open), as this replica keeps it",
            gauges.target_health.clone(),
        );
        if let Ok(family) = gauges.target_ejections.lock() {
            registry.register(
                "target_ejections",
                "Times a target's health ejected it from routing",
                family.clone(),
            );
        }
        registry.register(
            "store_executions",
            "Executions the store holds",
            gauges.store_executions.clone(),
        );
        registry.register(
            "store_bytes",
            "Bytes the store holds, as it counts them",
            gauges.store_bytes.clone(),
        );
        let evictions = Counter::default();
        registry.register(
            "store_evictions",
            "Executions the store let go: expired, evicted for room, or dropped at the disk bound",
            evictions.clone(),
        );
        gauges.store_evictions = std::sync::Mutex::new(evictions);
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
        let known = UNITS.iter().position(|u| u == unit);
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

    fn target(&self, (provider, model): (&str, &str)) -> Option<&TargetMetrics> {
        self.targets.get(provider)?.get(model)
    }

    /// The health gauges of `provider`'s targets, from its metadata.
    fn target_health(&self, provider: &super::ProviderStatus) {
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
    pub(crate) fn encode(&self, metadata: &super::RuntimeMetadata) -> String {
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
