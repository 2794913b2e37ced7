//! The TOML file as written: serde shapes with defaults, unknown keys rejected. Meaning is
//! checked in `validate`, which turns these into the types the runtime uses. The builder
//! (`builder.rs`) fills the same shapes from code, and can write them back as TOML.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    Delivery, HealthMode, OnAllUnhealthy, OnContentFilter, OnRejected, OnUnavailable,
    OnUnknownOutcome, Script,
};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub policies: BTreeMap<String, RawPolicy>,
    #[serde(default)]
    pub abilities: BTreeMap<String, RawAbility>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<super::ingress::RawIngress>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawServer {
    pub listen: String,
    pub metrics_listen: Option<String>,
    #[serde(with = "humantime_serde")]
    pub drain_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub default_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub max_deadline: Duration,
    pub max_input_bytes: usize,
    pub max_output_bytes: usize,
    pub max_events_per_execution: u64,
    pub max_watchers_per_execution: usize,
    pub max_connections: usize,
    pub max_concurrent_streams: u32,
    pub max_unsent_bytes: usize,
    #[serde(with = "humantime_serde")]
    pub handshake_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub keepalive_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub keepalive_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub stream_idle_timeout: Duration,
    /// Unset: a connection lives as long as its client keeps it.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_connection_age: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub max_connection_age_grace: Duration,
    pub access_log: bool,
}

impl Default for RawServer {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            metrics_listen: None,
            drain_timeout: Duration::from_secs(30),
            default_deadline: Duration::from_secs(60),
            max_deadline: Duration::from_secs(600),
            max_input_bytes: 1024 * 1024,
            max_output_bytes: 16 * 1024 * 1024,
            max_events_per_execution: 100_000,
            max_watchers_per_execution: 64,
            max_connections: 1024,
            max_concurrent_streams: 200,
            max_unsent_bytes: 4 * 1024 * 1024,
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(60),
            max_connection_age: None,
            max_connection_age_grace: Duration::from_secs(30),
            access_log: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawStore {
    pub kind: String,
    pub max_executions: usize,
    pub max_bytes: u64,
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    pub path: Option<String>,
    pub key_env: Option<String>,
    pub key_file: Option<String>,
    pub keys: Option<Vec<RawStoreKey>>,
    pub max_disk_bytes: Option<u64>,
    pub url_env: Option<String>,
    pub pool_size: Option<usize>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub connect_timeout: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub acquire_timeout: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub statement_timeout: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub poll_interval: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

/// One of `store.keys`: `{ env = "VAR" }` or `{ file = "PATH" }`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStoreKey {
    pub env: Option<String>,
    pub file: Option<String>,
}

impl Default for RawStore {
    fn default() -> Self {
        Self {
            kind: "memory".into(),
            max_executions: 10_000,
            max_bytes: 512 * 1024 * 1024,
            retention: Duration::from_secs(600),
            path: None,
            key_env: None,
            key_file: None,
            keys: None,
            max_disk_bytes: None,
            url_env: None,
            pool_size: None,
            connect_timeout: None,
            acquire_timeout: None,
            statement_timeout: None,
            lease: None,
            poll_interval: None,
            schema: None,
        }
    }
}

/// `[providers.NAME]`: the keys every provider takes, and its adapter's own (`settings`),
/// which the adapter reads (`adapter/`): a key no adapter takes is refused there, naming it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct RawProvider {
    pub adapter: String,
    /// Every other key of the table, for the adapter.
    #[serde(flatten)]
    pub settings: toml::Table,
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: u32,
    /// Per admission class; a class left out has `queue_capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<RawQueues>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub queue_aging: Option<Duration>,
    /// The older spelling of `on_unknown_outcome = "retry"` (`true`) or `"stop"` (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_unknown_outcome: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_unknown_outcome: Option<OnUnknownOutcome>,
    /// Unset: `max_concurrency` is this process's alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter: Option<RawLimiter>,
    /// Unset: on, at its defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<RawHealth>,
    #[serde(default)]
    pub models: Vec<RawModel>,
}

/// `providers.NAME.queues`: each admission class's queue capacity.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQueues {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
}

/// `providers.NAME.health`: `"on"`, `"off"`, or a table of settings (the rest at defaults).
/// Read by hand, not as an untagged enum: a misspelt setting is named as such, not as a value
/// that matches no form.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(super) enum RawHealth {
    Mode(HealthMode),
    Settings(RawHealthSettings),
}

impl<'de> Deserialize<'de> for RawHealth {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> serde::de::Visitor<'de> for Form {
            type Value = RawHealth;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"on\", \"off\", or a table of health settings")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RawHealth, E> {
                match text {
                    "on" => Ok(RawHealth::Mode(HealthMode::On)),
                    "off" => Ok(RawHealth::Mode(HealthMode::Off)),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(text), &self)),
                }
            }

            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                map: M,
            ) -> Result<RawHealth, M::Error> {
                let settings = RawHealthSettings::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )?;
                Ok(RawHealth::Settings(settings))
            }
        }
        deserializer.deserialize_any(Form)
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealthSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_requests: Option<u32>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub ejection: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_ejection: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_retry_after: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
}

impl RawProvider {
    /// A provider of `adapter` with every optional key unset or at its default.
    pub(super) fn new(adapter: &str) -> Self {
        Self {
            adapter: adapter.to_owned(),
            settings: toml::Table::new(),
            max_concurrency: default_max_concurrency(),
            queue_capacity: default_queue_capacity(),
            queues: None,
            queue_aging: None,
            retry_unknown_outcome: None,
            on_unknown_outcome: None,
            limiter: None,
            health: None,
            models: Vec::new(),
        }
    }
}

/// `providers.NAME.limiter`: a global `max_concurrency`, counted in Redis.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimiter {
    pub kind: String,
    pub url_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease: Option<Duration>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub on_unavailable: OnUnavailable,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_limit: Option<u32>,
}

fn default_max_concurrency() -> u32 {
    64
}

fn default_queue_capacity() -> u32 {
    256
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    pub name: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
    pub script: Option<Script>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub targets: Vec<String>,
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_retry_budget", with = "humantime_serde")]
    pub retry_budget: Duration,
    #[serde(default)]
    pub retries_per_target: u32,
    #[serde(default = "default_backoff", with = "humantime_serde")]
    pub backoff: Duration,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_attempt_time: Option<Duration>,
    #[serde(default)]
    pub on_rejected: OnRejected,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_unknown_outcome: Option<OnUnknownOutcome>,
    #[serde(default)]
    pub on_content_filter: OnContentFilter,
    #[serde(default)]
    pub delivery: Delivery,
    #[serde(default)]
    pub health: HealthMode,
    #[serde(default)]
    pub on_all_unhealthy: OnAllUnhealthy,
}

impl RawPolicy {
    /// A policy over `targets` with every other key at its default.
    pub(super) fn new(targets: Vec<String>) -> Self {
        Self {
            targets,
            max_attempts: default_max_attempts(),
            retry_budget: default_retry_budget(),
            retries_per_target: 0,
            backoff: default_backoff(),
            min_attempt_time: None,
            on_rejected: OnRejected::default(),
            on_unknown_outcome: None,
            on_content_filter: OnContentFilter::default(),
            delivery: Delivery::default(),
            health: HealthMode::default(),
            on_all_unhealthy: OnAllUnhealthy::default(),
        }
    }
}

fn default_max_attempts() -> u32 {
    3
}

fn default_retry_budget() -> Duration {
    Duration::from_secs(30)
}

fn default_backoff() -> Duration {
    Duration::from_millis(100)
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAbility {
    pub policy: String,
    #[serde(default)]
    pub allowed_policies: Vec<String>,
    #[serde(default)]
    pub requires: Vec<String>,
}
