//! A configuration built in code: the typed twin of the TOML file, for embedding and tests.
//! It fills the same raw shapes the file is read into and goes through the same validation,
//! so a mistake is reported with the same key and reason as in a file; [`to_toml`] writes it
//! out as the file that would say the same (for a `serve --config` in a test).
//!
//! ```
//! use model_runtime::config::{AbilitySpec, Config, PolicySpec, ProviderSpec};
//!
//! let config = Config::builder()
//!     .provider("scripted", ProviderSpec::scripted().model("echo", &["text"]))
//!     .policy("default", PolicySpec::new(&["scripted/echo"]))
//!     .ability("chat", AbilitySpec::new("default"))
//!     .build()
//!     .unwrap();
//! assert_eq!(config.abilities.len(), 1);
//! ```
//!
//! [`to_toml`]: ConfigBuilder::to_toml

use std::net::SocketAddr;
use std::time::Duration;

use crate::execution::Priority;

use super::raw::{
    RawAbility, RawConfig, RawHealth, RawHealthSettings, RawLimiter, RawModel, RawPolicy,
    RawProvider, RawTimeouts,
};
use super::{
    Config, ConfigError, Delivery, HealthMode, OnAllUnhealthy, OnContentFilter, OnRejected,
    OnUnavailable, OnUnknownOutcome, Script, validate,
};

/// Builds a [`Config`]; every setting left out keeps the default the file would have.
#[derive(Debug, Clone, Default)]
pub struct ConfigBuilder {
    raw: RawConfig,
}

/// A `[providers.NAME]` table.
#[derive(Debug, Clone)]
pub struct ProviderSpec(RawProvider);

/// A `providers.NAME.limiter` table.
#[derive(Debug, Clone)]
pub struct LimiterSpec(RawLimiter);

/// A `[policies.NAME]` table.
#[derive(Debug, Clone)]
pub struct PolicySpec(RawPolicy);

/// An `[abilities.NAME]` table.
#[derive(Debug, Clone)]
pub struct AbilitySpec(RawAbility);

impl Config {
    /// A builder with nothing configured.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl ConfigBuilder {
    /// `server.listen`.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.raw.server.listen = addr.to_string();
        self
    }

    /// `server.drain_timeout`.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.drain_timeout = timeout;
        self
    }

    /// `server.default_deadline`.
    pub fn default_deadline(mut self, deadline: Duration) -> Self {
        self.raw.server.default_deadline = deadline;
        self
    }

    /// `server.max_deadline`.
    pub fn max_deadline(mut self, deadline: Duration) -> Self {
        self.raw.server.max_deadline = deadline;
        self
    }

    /// `server.max_input_bytes`.
    pub fn max_input_bytes(mut self, bytes: usize) -> Self {
        self.raw.server.max_input_bytes = bytes;
        self
    }

    /// `server.max_output_bytes`.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.raw.server.max_output_bytes = bytes;
        self
    }

    /// `server.max_events_per_execution`.
    pub fn max_events_per_execution(mut self, events: u64) -> Self {
        self.raw.server.max_events_per_execution = events;
        self
    }

    /// `server.max_watchers_per_execution`.
    pub fn max_watchers_per_execution(mut self, watchers: usize) -> Self {
        self.raw.server.max_watchers_per_execution = watchers;
        self
    }

    /// `server.max_connections`.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.raw.server.max_connections = connections;
        self
    }

    /// `server.max_concurrent_streams`.
    pub fn max_concurrent_streams(mut self, streams: u32) -> Self {
        self.raw.server.max_concurrent_streams = streams;
        self
    }

    /// `server.max_unsent_bytes`.
    pub fn max_unsent_bytes(mut self, bytes: usize) -> Self {
        self.raw.server.max_unsent_bytes = bytes;
        self
    }

    /// `server.stream_idle_timeout`.
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.stream_idle_timeout = timeout;
        self
    }

    /// `server.keepalive_interval` and `server.keepalive_timeout`.
    pub fn keepalive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.raw.server.keepalive_interval = interval;
        self.raw.server.keepalive_timeout = timeout;
        self
    }

    /// `server.handshake_timeout`.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.handshake_timeout = timeout;
        self
    }

    /// `server.request_timeout`.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.request_timeout = timeout;
        self
    }

    /// `server.idle_timeout`.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.idle_timeout = timeout;
        self
    }

    /// `store.max_bytes`.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.raw.store.max_bytes = bytes;
        self
    }

    /// `store.max_executions`.
    pub fn max_executions(mut self, executions: usize) -> Self {
        self.raw.store.max_executions = executions;
        self
    }

    /// `store.retention`.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.raw.store.retention = retention;
        self
    }

    /// `server.metrics_listen`.
    pub fn metrics_listen(mut self, addr: &str) -> Self {
        self.raw.server.metrics_listen = Some(addr.to_owned());
        self
    }

    /// `store.kind = "file"` in `path`, its key read from the environment variable `key_env`.
    pub fn file_store(mut self, path: &str, key_env: &str) -> Self {
        self.raw.store.kind = "file".into();
        self.raw.store.path = Some(path.to_owned());
        self.raw.store.key_env = Some(key_env.to_owned());
        self
    }

    /// `store.max_disk_bytes` (the file store).
    pub fn max_disk_bytes(mut self, bytes: u64) -> Self {
        self.raw.store.max_disk_bytes = Some(bytes);
        self
    }

    /// `[providers.NAME]`, replacing one of the same name.
    pub fn provider(mut self, name: &str, provider: ProviderSpec) -> Self {
        self.raw.providers.insert(name.to_owned(), provider.0);
        self
    }

    /// `[policies.NAME]`, replacing one of the same name.
    pub fn policy(mut self, name: &str, policy: PolicySpec) -> Self {
        self.raw.policies.insert(name.to_owned(), policy.0);
        self
    }

    /// `[abilities.NAME]`, replacing one of the same name.
    pub fn ability(mut self, name: &str, ability: AbilitySpec) -> Self {
        self.raw.abilities.insert(name.to_owned(), ability.0);
        self
    }

    /// The validated configuration, reading `api_key_env` variables from the process.
    pub fn build(self) -> Result<Config, ConfigError> {
        self.build_with_env(&|name| std::env::var(name).ok())
    }

    /// Like [`build`](Self::build), with `env` in place of the process environment.
    pub fn build_with_env(
        self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        validate::validate(self.raw, env)
    }

    /// The TOML file that says the same.
    pub fn to_toml(&self) -> String {
        // Plain strings, numbers, booleans, tables and arrays of tables: TOML has a form for
        // each, so writing them cannot fail.
        toml::to_string(&self.raw).unwrap_or_default()
    }
}

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

    /// `retry_unknown_outcome` (the older spelling of `on_unknown_outcome = "retry"`).
    pub fn retry_unknown_outcome(mut self, retry: bool) -> Self {
        self.0.retry_unknown_outcome = retry;
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

impl PolicySpec {
    /// A policy trying `targets` (`"provider/model"`) in order, the rest at its defaults.
    pub fn new(targets: &[&str]) -> Self {
        Self(RawPolicy::new(owned(targets)))
    }

    /// `max_attempts`.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.0.max_attempts = attempts;
        self
    }

    /// `retry_budget`.
    pub fn retry_budget(mut self, budget: Duration) -> Self {
        self.0.retry_budget = budget;
        self
    }

    /// `retries_per_target`.
    pub fn retries_per_target(mut self, retries: u32) -> Self {
        self.0.retries_per_target = retries;
        self
    }

    /// `backoff`.
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.0.backoff = backoff;
        self
    }

    /// `min_attempt_time`.
    pub fn min_attempt_time(mut self, time: Duration) -> Self {
        self.0.min_attempt_time = Some(time);
        self
    }

    /// `on_rejected`.
    pub fn on_rejected(mut self, on_rejected: OnRejected) -> Self {
        self.0.on_rejected = on_rejected;
        self
    }

    /// `on_unknown_outcome`: what an attempt whose outcome is unknown leads to under this
    /// policy, whatever its provider says.
    pub fn on_unknown_outcome(mut self, mode: OnUnknownOutcome) -> Self {
        self.0.on_unknown_outcome = Some(mode);
        self
    }

    /// `health = "on"` or `"off"`: whether this policy's plans skip ejected targets.
    pub fn health(mut self, mode: HealthMode) -> Self {
        self.0.health = mode;
        self
    }

    /// `on_all_unhealthy`.
    pub fn on_all_unhealthy(mut self, mode: OnAllUnhealthy) -> Self {
        self.0.on_all_unhealthy = mode;
        self
    }

    /// `on_content_filter`.
    pub fn on_content_filter(mut self, mode: OnContentFilter) -> Self {
        self.0.on_content_filter = mode;
        self
    }

    /// `delivery`: what a request that does not choose one gets.
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.0.delivery = delivery;
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

    /// `probes`.
    pub fn probes(mut self, n: u32) -> Self {
        self.0.probes = Some(n);
        self
    }
}

impl AbilitySpec {
    /// An ability whose default policy is `policy`.
    pub fn new(policy: &str) -> Self {
        Self(RawAbility {
            policy: policy.to_owned(),
            allowed_policies: Vec::new(),
            requires: Vec::new(),
        })
    }

    /// `allowed_policies`.
    pub fn allowed_policies(mut self, policies: &[&str]) -> Self {
        self.0.allowed_policies = owned(policies);
        self
    }

    /// `requires`.
    pub fn requires(mut self, capabilities: &[&str]) -> Self {
        self.0.requires = owned(capabilities);
        self
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::config::AdapterConfig;

    fn echo() -> ConfigBuilder {
        Config::builder()
            .drain_timeout(Duration::from_millis(200))
            .provider(
                "scripted",
                ProviderSpec::scripted()
                    .max_concurrency(4)
                    .model("echo", &["text", "streaming"])
                    .scripted_model(
                        "slow",
                        &["text"],
                        Script {
                            delta_interval_ms: 5,
                            ..Script::default()
                        },
                    ),
            )
            .policy(
                "default",
                PolicySpec::new(&["scripted/echo", "scripted/slow"])
                    .retry_budget(Duration::from_secs(5)),
            )
            .ability("chat", AbilitySpec::new("default").requires(&["text"]))
    }

    #[test]
    fn builds_what_the_file_would_say() {
        let config = echo().build().unwrap();
        assert_eq!(config.server.drain_timeout, Duration::from_millis(200));
        let provider = &config.providers["scripted"];
        assert!(matches!(provider.adapter, AdapterConfig::Scripted));
        assert_eq!(provider.max_concurrency, 4);
        assert_eq!(
            provider.queue_capacity, [256; 3],
            "a default the file would give"
        );
        assert_eq!(provider.models[1].script.delta_interval_ms, 5);
        assert_eq!(
            config.policies["default"].retry_budget,
            Duration::from_secs(5)
        );
    }

    #[test]
    fn written_as_toml_it_reads_back_the_same() {
        let builder = echo();
        let text = builder.to_toml();
        let from_file = Config::from_toml(&text).unwrap();
        let built = builder.build().unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{built:?}"), "{text}");
    }

    #[test]
    fn mistakes_name_the_key_as_in_a_file() {
        let error = echo()
            .policy("default", PolicySpec::new(&["scripted/nope"]))
            .build()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "policies.default.targets[0]: provider `scripted` has no model `nope`"
        );
    }
}
