//! The builder's provider tables: [`ProviderSpec`] (`[providers.NAME]`), its
//! [`LimiterSpec`] and its [`HealthSpec`].

use std::time::Duration;

use super::{LimiterSpec, ProviderSpec, owned};
use crate::config::raw::{
    RawHealth, RawHealthSettings, RawLimiter, RawModel, RawProvider, RawTimeouts,
};
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
    /// `adapter = "scripted"`.
    pub fn scripted() -> Self {
        Self(RawProvider::new("scripted"))
    }

    /// `adapter = "openai"` at `base_url`.
    pub fn openai(base_url: &str) -> Self {
        Self(RawProvider::new("openai")).base_url(base_url)
    }

    /// `adapter = "anthropic"` at `base_url`.
    pub fn anthropic(base_url: &str) -> Self {
        Self(RawProvider::new("anthropic")).base_url(base_url)
    }

    /// `adapter`, by name as the file writes it (for a name the file would refuse).
    pub fn adapter(mut self, adapter: &str) -> Self {
        adapter.clone_into(&mut self.0.adapter);
        self
    }

    /// `base_url`.
    pub fn base_url(mut self, url: &str) -> Self {
        self.0.base_url = Some(url.to_owned());
        self
    }

    /// `api_key_env`.
    pub fn api_key_env(mut self, variable: &str) -> Self {
        self.0.api_key_env = Some(variable.to_owned());
        self
    }

    /// `api_version` (`azure-openai`: the deployments URL shape).
    pub fn api_version(mut self, version: &str) -> Self {
        self.0.api_version = Some(version.to_owned());
        self
    }

    /// `api` (`azure-openai`: `chat_completions` or `responses`).
    pub fn api(mut self, api: &str) -> Self {
        self.0.api = Some(api.to_owned());
        self
    }

    /// `region` (`bedrock`).
    pub fn region(mut self, region: &str) -> Self {
        self.0.region = Some(region.to_owned());
        self
    }

    /// `aws_credentials` (`bedrock`: `environment` or `container`).
    pub fn aws_credentials(mut self, source: &str) -> Self {
        self.0.aws_credentials = Some(source.to_owned());
        self
    }

    /// `project`, `location` and `publisher` (`vertex`).
    pub fn vertex(mut self, project: &str, location: &str, publisher: &str) -> Self {
        self.0.project = Some(project.to_owned());
        self.0.location = Some(location.to_owned());
        self.0.publisher = Some(publisher.to_owned());
        self
    }

    /// `token_env` (`azure-openai`: a bearer token from this variable).
    pub fn token_env(mut self, variable: &str) -> Self {
        self.0.token_env = Some(variable.to_owned());
        self
    }

    /// `token_file` (`azure-openai`: a bearer token from this file, read again when it
    /// changes).
    pub fn token_file(mut self, path: &str) -> Self {
        self.0.token_file = Some(path.to_owned());
        self
    }

    /// `service_account_file` (`vertex`: access tokens minted with this service account's
    /// key file).
    pub fn service_account_file(mut self, path: &str) -> Self {
        self.0.service_account_file = Some(path.to_owned());
        self
    }

    /// `token_endpoint` (`vertex`: where the service account's token requests go instead of
    /// its key file's `token_uri`).
    pub fn token_endpoint(mut self, url: &str) -> Self {
        self.0.token_endpoint = Some(url.to_owned());
        self
    }

    /// `proxy` (HTTP adapters).
    pub fn proxy(mut self, url: &str) -> Self {
        self.0.proxy = Some(url.to_owned());
        self
    }

    /// `allow_insecure_http` (HTTP adapters).
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.0.allow_insecure_http = allow;
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

    /// `timeouts = { connect, first_byte, idle }`.
    pub fn timeouts(mut self, connect: Duration, first_byte: Duration, idle: Duration) -> Self {
        self.0.timeouts = Some(RawTimeouts {
            connect,
            first_byte,
            idle,
        });
        self
    }

    /// `limiter`: `max_concurrency` counted across replicas.
    pub fn limiter(mut self, limiter: LimiterSpec) -> Self {
        self.0.limiter = Some(limiter.0);
        self
    }

    /// `max_tokens_field` (`openai`).
    pub fn max_tokens_field(mut self, field: &str) -> Self {
        self.0.max_tokens_field = Some(field.to_owned());
        self
    }

    /// `anthropic_version` (`anthropic`).
    pub fn anthropic_version(mut self, version: &str) -> Self {
        self.0.anthropic_version = Some(version.to_owned());
        self
    }

    /// `default_max_output_tokens` (`anthropic`).
    pub fn default_max_output_tokens(mut self, tokens: u32) -> Self {
        self.0.default_max_output_tokens = Some(tokens);
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
