//! The builder's provider tables: [`ProviderSpec`] (`[providers.NAME]`), its
//! [`LimiterSpec`] and its [`HealthSpec`].

use std::time::Duration;

use super::{LimiterSpec, ProviderSpec, owned};
use crate::config::raw::{RawHealth, RawHealthSettings, RawLimiter, RawModel, RawProvider};
use crate::config::{HealthMode, OnUnavailable, OnUnknownOutcome, Script};
use crate::execution::Priority;

impl LimiterSpec {
    /// `kind = "redis"`, its URL read from the environment variable `url_env`.
    pub fn redis(url_env: &str) -> Self {
        Self(RawLimiter {
            kind: "redis".to_owned(),
            url_env: Some(url_env.to_owned()),
            key: None,
            lease: None,
            timeout: None,
            on_unavailable: OnUnavailable::default(),
            local_limit: None,
        })
    }

    /// `key`: the Redis key of the permits.
    pub fn key(mut self, key: &str) -> Self {
        self.0.key = Some(key.to_owned());
        self
    }

    /// `lease`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.0.lease = Some(lease);
        self
    }

    /// `timeout`: the longest one call to Redis may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout = Some(timeout);
        self
    }

    /// `on_unavailable`.
    pub fn on_unavailable(mut self, policy: OnUnavailable) -> Self {
        self.0.on_unavailable = policy;
        self
    }

    /// `local_limit` (with `fail_open`).
    pub fn local_limit(mut self, permits: u32) -> Self {
        self.0.local_limit = Some(permits);
        self
    }
}

impl ProviderSpec {
    /// A provider of `adapter`, every other key unset. Each adapter's file (`config/adapter/`)
    /// has its constructor and the methods of its own keys.
    pub(in crate::config) fn of(adapter: &str) -> Self {
        Self(RawProvider::new(adapter))
    }

    /// An adapter's key `key` set to `value`.
    pub(in crate::config) fn set(mut self, key: &str, value: impl Into<toml::Value>) -> Self {
        self.0.settings.insert(key.to_owned(), value.into());
        self
    }

    /// `adapter`, by name as the file writes it (for a name the file would refuse).
    pub fn adapter(mut self, adapter: &str) -> Self {
        adapter.clone_into(&mut self.0.adapter);
        self
    }

    /// `max_concurrency`.
    pub fn max_concurrency(mut self, permits: u32) -> Self {
        self.0.max_concurrency = permits;
        self
    }

    /// `queues.CLASS`: the queue room of one admission class.
    pub fn queue_for(mut self, priority: Priority, waiters: u32) -> Self {
        let queues = self.0.queues.get_or_insert_with(Default::default);
        match priority {
            Priority::Interactive => queues.interactive = Some(waiters),
            Priority::Standard => queues.standard = Some(waiters),
            Priority::Batch => queues.batch = Some(waiters),
        }
        self
    }

    /// `queue_aging`.
    pub fn queue_aging(mut self, aging: Duration) -> Self {
        self.0.queue_aging = Some(aging);
        self
    }

    /// `queue_capacity`.
    pub fn queue_capacity(mut self, waiters: u32) -> Self {
        self.0.queue_capacity = waiters;
        self
    }

    /// `retry_unknown_outcome` (the older spelling of `on_unknown_outcome = "retry"`, or
    /// `"stop"` when false).
    pub fn retry_unknown_outcome(mut self, retry: bool) -> Self {
        self.0.retry_unknown_outcome = Some(retry);
        self
    }

    /// `on_unknown_outcome`.
    pub fn on_unknown_outcome(mut self, mode: OnUnknownOutcome) -> Self {
        self.0.on_unknown_outcome = Some(mode);
        self
    }

    /// `health = "off"`: this provider's targets are never ejected.
    pub fn health_off(mut self) -> Self {
        self.0.health = Some(RawHealth::Mode(HealthMode::Off));
        self
    }

    /// `health = { ... }`: when this provider's targets are ejected.
    pub fn health(mut self, health: HealthSpec) -> Self {
        self.0.health = Some(RawHealth::Settings(health.0));
        self
    }

    /// `limiter`: `max_concurrency` counted across replicas.
    pub fn limiter(mut self, limiter: LimiterSpec) -> Self {
        self.0.limiter = Some(limiter.0);
        self
    }

    /// A `[[providers.NAME.models]]` entry with `capabilities`.
    pub fn model(self, name: &str, capabilities: &[&str]) -> Self {
        self.push_model(name, capabilities, None)
    }

    /// A model of a `scripted` provider that plays `script`.
    pub fn scripted_model(self, name: &str, capabilities: &[&str], script: Script) -> Self {
        self.push_model(name, capabilities, Some(script))
    }

    fn push_model(mut self, name: &str, capabilities: &[&str], script: Option<Script>) -> Self {
        self.0.models.push(RawModel {
            name: name.to_owned(),
            capabilities: owned(capabilities),
            script,
        });
        self
    }
}

/// `providers.NAME.health = { ... }`, each setting left out at its default.
#[derive(Debug, Clone, Default)]
pub struct HealthSpec(RawHealthSettings);

impl HealthSpec {
    /// Every setting at its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// `consecutive_failures`.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.0.consecutive_failures = Some(n);
        self
    }

    /// `failure_rate` over `window`, counted from `min_requests` attempts.
    pub fn failure_rate(mut self, rate: f64, min_requests: u32, window: Duration) -> Self {
        self.0.failure_rate = Some(rate);
        self.0.min_requests = Some(min_requests);
        self.0.window = Some(window);
        self
    }

    /// `ejection` and `max_ejection`.
    pub fn ejection(mut self, first: Duration, max: Duration) -> Self {
        self.0.ejection = Some(first);
        self.0.max_ejection = Some(max);
        self
    }

    /// `max_retry_after`.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.0.max_retry_after = Some(max);
        self
    }

    /// `probes`.
    pub fn probes(mut self, n: u32) -> Self {
        self.0.probes = Some(n);
        self
    }
}
