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

use super::raw::{RawAbility, RawConfig, RawLimiter, RawPolicy, RawProvider};
use super::{
    Config, ConfigError, Delivery, HealthMode, OnAllUnhealthy, OnContentFilter, OnRejected,
    OnUnknownOutcome, validate,
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

mod provider;

pub use provider::HealthSpec;

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

    /// `server.access_log`.
    pub fn access_log(mut self, on: bool) -> Self {
        self.raw.server.access_log = on;
        self
    }

    /// `server.stream_idle_timeout`.
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.raw.server.stream_idle_timeout = timeout;
        self
    }

    /// `server.max_connection_age` and `server.max_connection_age_grace`.
    pub fn max_connection_age(mut self, age: Duration, grace: Duration) -> Self {
        self.raw.server.max_connection_age = Some(age);
        self.raw.server.max_connection_age_grace = grace;
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

    /// `[ingress]`: the HTTP ingress, listening at `listen`, `detach_grace` long.
    pub fn ingress(mut self, listen: &str, detach_grace: Duration) -> Self {
        self.raw.ingress = Some(super::ingress::RawIngress {
            listen: listen.to_owned(),
            secret_env: None,
            detach_grace,
        });
        self
    }

    /// `ingress.secret_env` (after [`ingress`](Self::ingress)): the variable holding the
    /// secret a gateway presents.
    pub fn ingress_secret_env(mut self, var: &str) -> Self {
        if let Some(ingress) = &mut self.raw.ingress {
            ingress.secret_env = Some(var.to_owned());
        }
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
        validate::validate(self.raw, super::field::Env::new(env))
    }

    /// The TOML file that says the same.
    pub fn to_toml(&self) -> String {
        // Plain strings, numbers, booleans, tables and arrays of tables: TOML has a form for
        // each, so writing them cannot fail.
        toml::to_string(&self.raw).unwrap_or_default()
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
    use crate::config::{AdapterConfig, Script};
    use crate::execution::Priority;

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
        assert!(matches!(provider.adapter, AdapterConfig::Scripted(_)));
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

    /// `queue_for` gives one admission class room of its own; the others keep
    /// `queue_capacity`, as `queues = { batch = 2 }` in a file would.
    #[test]
    fn a_class_may_have_queue_room_of_its_own() {
        let builder = echo().provider(
            "scripted",
            ProviderSpec::scripted()
                .model("echo", &["text", "streaming"])
                .model("slow", &["text"])
                .queue_capacity(8)
                .queue_for(Priority::Batch, 2)
                .queue_for(Priority::Interactive, 0),
        );
        let text = builder.to_toml();
        let built = builder.build().unwrap();
        let mut room = [0; 3];
        room[Priority::Interactive.index()] = 0;
        room[Priority::Standard.index()] = 8;
        room[Priority::Batch.index()] = 2;
        assert_eq!(built.providers["scripted"].queue_capacity, room);
        let from_file = Config::from_toml(&text).unwrap();
        assert_eq!(
            from_file.providers["scripted"].queue_capacity, room,
            "{text}"
        );
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
