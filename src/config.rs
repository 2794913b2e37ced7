//! Configuration: one TOML file, validated at start-up into the types below. Every error
//! names the key and the reason; unknown keys are errors. With no file, the embedded default
//! (`default.toml`) runs a `scripted` provider that echoes the prompt. [`Config::builder`]
//! makes the same configuration in code.

mod adapter;
mod bounds;
mod builder;
mod effective;
mod field;
mod health;
mod ingress;
mod raw;
mod script;
mod secret;
mod service_account;
mod store;
mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use crate::execution::Delivery;

pub use adapter::{
    AdapterConfig, AnthropicConfig, AwsCredentials, AzureApi, AzureOpenAiConfig, BedrockConfig,
    ContainerCredentials, Credentials, GeminiConfig, HttpEndpointConfig, MaxTokensField,
    OpenAiConfig, OpenAiResponsesConfig, ScriptedConfig, TimeoutsConfig, VertexConfig,
    VertexPublisher,
};
pub use builder::{AbilitySpec, ConfigBuilder, HealthSpec, LimiterSpec, PolicySpec, ProviderSpec};
pub use health::{HealthConfig, HealthMode, OnAllUnhealthy};
pub use ingress::IngressConfig;
pub use script::{Chunk, FailError, Script, ScriptedToolCall};
pub use secret::{NotAKey, ProxyUrl, Secret, StoreKey};
pub use service_account::{KeyFault, KeyFileError, ServiceAccount, SigningKey};
pub use store::{FileStoreConfig, PostgresStoreConfig, StoreConfig, StoreKind};

/// The embedded default configuration.
pub const DEFAULT_TOML: &str = include_str!("config/default.toml");

/// A configuration that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a value of the wrong type.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
    /// A value is well-formed but wrong.
    #[error("{key}: {reason}")]
    Invalid {
        /// The dotted key, e.g. `policies.default.targets[1]`.
        key: String,
        /// Why.
        reason: String,
    },
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[store]`.
    pub store: StoreConfig,
    /// `[providers.NAME]`, by name.
    pub providers: BTreeMap<Arc<str>, ProviderConfig>,
    /// `[policies.NAME]`, by name.
    pub policies: BTreeMap<Arc<str>, PolicyConfig>,
    /// `[abilities.NAME]`, by name.
    pub abilities: BTreeMap<Arc<str>, AbilityConfig>,
    /// `[ingress]`: the HTTP ingress, when the file asks for it.
    pub ingress: Option<IngressConfig>,
}

/// What a config holds, in counts: what `check-config` says of a file that passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// `[providers.NAME]` tables.
    pub providers: usize,
    /// `[policies.NAME]` tables.
    pub policies: usize,
    /// `[abilities.NAME]` tables.
    pub abilities: usize,
}

impl Checked {
    /// The counts of `config`.
    pub fn of(config: &Config) -> Self {
        Self {
            providers: config.providers.len(),
            policies: config.policies.len(),
            abilities: config.abilities.len(),
        }
    }
}

/// Where the gRPC server listens (`server.listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// An IP address and port.
    Tcp(SocketAddr),
    /// A Unix domain socket's path (`unix:/path/to.sock`, sidecar mode).
    Unix(std::path::PathBuf),
}

impl Listen {
    /// The TCP address, unless it is a Unix socket.
    pub fn tcp(&self) -> Option<SocketAddr> {
        match self {
            Self::Tcp(addr) => Some(*addr),
            Self::Unix(_) => None,
        }
    }
}

impl std::fmt::Display for Listen {
    /// As `server.listen` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp(addr) => addr.fmt(f),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// `[server]`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the gRPC server listens.
    pub listen: Listen,
    /// Where `GET /metrics` is served (Prometheus text); none when unset.
    pub metrics_listen: Option<SocketAddr>,
    /// How long running executions may finish after shutdown begins.
    pub drain_timeout: Duration,
    /// Deadline of a request that sets none, from submission.
    pub default_deadline: Duration,
    /// The latest deadline a request may set, from submission.
    pub max_deadline: Duration,
    /// Upper bound on a request's content bytes.
    pub max_input_bytes: usize,
    /// Output (text, tool calls and arguments, reasoning) one execution may stream before it
    /// ends with `output_too_large`.
    pub max_output_bytes: usize,
    /// Events one execution may have before it ends with `output_too_large`.
    pub max_events_per_execution: u64,
    /// `Watch` and `Execute` streams that may follow one execution at once.
    pub max_watchers_per_execution: usize,
    /// Client connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// HTTP/2 streams open at once on one connection.
    pub max_concurrent_streams: u32,
    /// Response bytes one connection may hold that its socket has not taken before its
    /// streams wait.
    pub max_unsent_bytes: usize,
    /// How long a new connection has to send its HTTP/2 preface and open its first stream.
    pub handshake_timeout: Duration,
    /// How long a request's body may take to end, from its headers (reflection's streams
    /// aside, whose requests come as their client asks).
    pub request_timeout: Duration,
    /// One `info` line per `ModelRuntime` call at its end (`model_runtime::access`).
    pub access_log: bool,
    /// How long a connection may have no open stream before it is closed (GOAWAY).
    pub idle_timeout: Duration,
    /// HTTP/2 keepalive: how often a connection is pinged.
    pub keepalive_interval: Duration,
    /// HTTP/2 keepalive: how long a ping may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// How long a `Watch` or `Execute` stream may have events waiting that its client accepts
    /// none of before the stream is reset.
    pub stream_idle_timeout: Duration,
    /// How long a connection may live (each one 10% either side, so that connections opened
    /// together do not all go together) before it is asked to go (GOAWAY): its client
    /// reconnects, and after a scale-out reaches the new replicas too. `None`: no limit.
    pub max_connection_age: Option<Duration>,
    /// How long the calls open on a connection past its age may go on before it is closed;
    /// a stream cut then resumes with `Watch`.
    pub max_connection_age_grace: Duration,
}

/// `[providers.NAME]`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The table's name.
    pub name: Arc<str>,
    /// The adapter and its settings.
    pub adapter: AdapterConfig,
    /// Attempts that may run at once.
    pub max_concurrency: u32,
    /// Attempts that may wait for a permit, per admission class (`queue_capacity`, or
    /// `queues.CLASS`), by [`Priority::index`](crate::execution::Priority::index).
    pub queue_capacity: [u32; 3],
    /// A waiting attempt rises one admission class per this much waited.
    pub queue_aging: Duration,
    /// What follows an attempt on this provider whose outcome is unknown (a policy may say
    /// otherwise).
    pub on_unknown_outcome: OnUnknownOutcome,
    /// Where `max_concurrency` is counted: `None`, in this process alone.
    pub limiter: Option<LimiterConfig>,
    /// When its targets are ejected from routing; `None` with `health = "off"`.
    pub health: Option<HealthConfig>,
    /// Models, in file order.
    pub models: Vec<ModelConfig>,
}

/// `providers.NAME.limiter = { kind = "redis", ... }`: `max_concurrency` counted across every
/// replica that names the same Redis and `key`. Each replica keeps its own queue in front.
#[derive(Debug, Clone)]
pub struct LimiterConfig {
    /// The Redis URL (`redis://` or `redis+unix://`), read from `url_env` at start-up; it may
    /// hold a password, so it is a secret.
    pub url: Secret,
    /// The variable the URL was read from, to name in messages.
    pub url_env: Arc<str>,
    /// The Redis key of the provider's permits (default `model-runtime:limiter:NAME`).
    pub key: Arc<str>,
    /// How long a held permit lasts without renewal: a replica that dies gives its permits
    /// back within it. Renewed every third of it.
    pub lease: Duration,
    /// The longest one call to Redis may take before it counts as unreachable.
    pub timeout: Duration,
    /// What an attempt does while Redis is unreachable.
    pub on_unavailable: OnUnavailable,
    /// With `fail_open`: the permits this replica may hold on its own while Redis is
    /// unreachable (default `max_concurrency`).
    pub local_limit: u32,
}

/// What an attempt does while the limiter's Redis is unreachable
/// (`providers.NAME.limiter.on_unavailable`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnavailable {
    /// Refused at admission, as a full queue is: the next target of the plan is tried.
    #[default]
    FailClosed,
    /// Admitted within `local_limit`, counted by this replica alone until Redis answers again.
    FailOpen,
}

impl ProviderConfig {
    /// The model called `name`.
    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| &*m.name == name)
    }
}

/// `[[providers.NAME.models]]`.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The provider's model name.
    pub name: Arc<str>,
    /// Capabilities it offers.
    pub capabilities: BTreeSet<String>,
    /// Behaviour of a `scripted` model.
    pub script: Script,
}

/// `[policies.NAME]`.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// The table's name.
    pub name: Arc<str>,
    /// Ordered targets.
    pub targets: Vec<Target>,
    /// Upper bound on attempts per execution.
    pub max_attempts: u32,
    /// Wall-clock budget for all attempts and waits.
    pub retry_budget: Duration,
    /// Extra attempts on one target before the next.
    pub retries_per_target: u32,
    /// First back-off before retrying the same target; doubles each time.
    pub backoff: Duration,
    /// No attempt starts with less of the retry budget left than this.
    pub min_attempt_time: Duration,
    /// What a target's `rejected` error leads to.
    pub on_rejected: OnRejected,
    /// What an attempt whose outcome is unknown leads to; `None`, what its provider says.
    pub on_unknown_outcome: Option<OnUnknownOutcome>,
    /// What a target's refusal on a content or safety policy leads to.
    pub on_content_filter: OnContentFilter,
    /// The delivery of a request that does not choose one.
    pub delivery: Delivery,
    /// Whether its plans skip ejected targets.
    pub health: HealthMode,
    /// What a plan whose every capable target is ejected does.
    pub on_all_unhealthy: OnAllUnhealthy,
}

/// What follows an attempt a target refused on a content or safety policy
/// (`policies.NAME.on_content_filter`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnContentFilter {
    /// The execution ends with `content_filtered`: routing around a safety decision is not
    /// the runtime's to make.
    #[default]
    Stop,
    /// The next target, as for any rejection.
    Fallback,
}

/// What follows an attempt whose target rejected the request (`policies.NAME.on_rejected`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRejected {
    /// The next target of the plan, if there is one and attempts and time are left.
    #[default]
    Fallback,
    /// The execution ends: the first target's rejection is the answer.
    Stop,
}

/// What follows an attempt whose outcome is unknown: the request was sent and no answer came,
/// so the provider may still run it (`providers.NAME.on_unknown_outcome`, or the policy's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnknownOutcome {
    /// The execution ends with `outcome_unknown`: nothing may run twice.
    #[default]
    Stop,
    /// The same target again (`retry_unknown_outcome = true`): it may run twice there.
    Retry,
    /// The next target, without trying this one again: it may run at both.
    Fallback,
}

impl OnUnknownOutcome {
    /// As the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Retry => "retry",
            Self::Fallback => "fallback",
        }
    }
}

/// One `provider/model` target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// Provider name.
    pub provider: Arc<str>,
    /// Provider model.
    pub model: Arc<str>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// `[abilities.NAME]`.
#[derive(Debug, Clone)]
pub struct AbilityConfig {
    /// The table's name.
    pub name: Arc<str>,
    /// Policy used when a request names none.
    pub default_policy: Arc<str>,
    /// Policies a request may name; always includes the default.
    pub allowed_policies: BTreeSet<Arc<str>>,
    /// Capabilities every target must have.
    pub requires: BTreeSet<String>,
}

impl Config {
    /// Parses and validates TOML text, reading the `api_key_env` variables it names from the
    /// process environment.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::from_toml_with_env(text, &|name| std::env::var(name).ok())
    }

    /// Like [`Config::from_toml`], with `env` in place of the process environment (embedding
    /// and tests: setting process variables is `unsafe` in Rust 2024).
    pub fn from_toml_with_env(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let raw: raw::RawConfig = toml::from_str(text)?;
        validate::validate(raw, field::Env::new(env))
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Reads, parses and validates a file, as [`load`](Self::load); with the configuration
    /// in effect written out as TOML: every value, defaults filled in, no secret's value
    /// (what `check-config` shows).
    pub fn load_effective(path: &Path) -> Result<(Self, String), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let raw: raw::RawConfig = toml::from_str(&text)?;
        let shown = raw.clone();
        let env = |name: &str| std::env::var(name).ok();
        let config = validate::validate(raw, field::Env::new(&env))?;
        let effective = effective::effective(shown, &config);
        Ok((config, effective))
    }

    /// Reads, parses and validates a file as [`load_effective`](Self::load_effective) does,
    /// but without reading any secret: each environment variable and file a secret is kept
    /// in is checked by its name only (a variable need not be set, a file need not exist),
    /// for a CI job that has none of them. What it validated is described, never returned: it
    /// holds stand-ins, not the secrets.
    pub fn check_names(path: &Path) -> Result<(Checked, String), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let raw: raw::RawConfig = toml::from_str(&text)?;
        let shown = raw.clone();
        let stand_ins = validate::StandIns::of(&raw);
        let env = |name: &str| stand_ins.value(name);
        let config = validate::validate(raw, field::Env::names_only(&env))?;
        let effective = effective::effective(shown, &config);
        Ok((Checked::of(&config), effective))
    }

    /// The embedded default.
    pub fn embedded_default() -> Result<Self, ConfigError> {
        Self::from_toml(DEFAULT_TOML)
    }
}

#[cfg(test)]
mod tests;
