//! The adapters a provider may name (`providers.NAME.adapter`). Each is a file here that owns
//! its keys: a typed table (a key it does not take is refused), their validation, what
//! `check-config` writes back, and its builder methods. The table at the end lists them: a new
//! adapter is one row there, one file here, one folder in `src/provider/` and one line in its
//! registry.
//!
//! A provider's table is read in two parts: the keys every provider takes (admission, health,
//! models: `raw.rs`, `validate.rs`), and the rest, which its adapter reads. An HTTP adapter
//! takes the endpoint's keys too (`http.rs`: `base_url`, `proxy`, `allow_insecure_http`,
//! `timeouts`).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ConfigError;
use super::field::{Env, invalid};

mod anthropic;
mod azure;
mod bedrock;
mod credentials;
mod gemini;
mod http;
mod openai;
mod responses;
mod scripted;
mod vertex;

pub use anthropic::AnthropicConfig;
pub use azure::{AzureApi, AzureOpenAiConfig};
pub use bedrock::{AwsCredentials, BedrockConfig, ContainerCredentials};
pub use credentials::Credentials;
pub use gemini::GeminiConfig;
pub use http::{HttpEndpointConfig, TimeoutsConfig};
pub use openai::{MaxTokensField, OpenAiConfig};
pub use responses::OpenAiResponsesConfig;
pub use scripted::ScriptedConfig;
pub use vertex::{VertexConfig, VertexPublisher};

use http::RawEndpoint;

/// What an adapter's file gives the config.
trait Adapter: Sized {
    /// The adapter's own keys, as the file writes them; unknown keys refused.
    type Raw: Serialize + DeserializeOwned;
    /// Whether it calls a server over HTTP, and so takes the endpoint's keys.
    const HTTP: bool = true;
    /// The keys checked; `endpoint` is empty unless [`HTTP`](Self::HTTP).
    fn validate(at: &At<'_>, raw: Self::Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError>;
    /// `raw` and `endpoint` as in effect: what validation settled, filled in.
    fn effective(&self, raw: &mut Self::Raw, endpoint: &mut RawEndpoint);
}

/// Where an adapter's keys are read: the provider's table, the adapter, and where its
/// secrets come from.
#[derive(Clone, Copy)]
struct At<'a> {
    /// `providers.NAME`.
    key: &'a str,
    /// The adapter's name.
    adapter: &'static str,
    env: Env<'a>,
}

impl At<'_> {
    /// The dotted key of `field`.
    fn field(&self, field: &str) -> String {
        format!("{}.{field}", self.key)
    }

    /// `field` is invalid, for `reason`.
    fn invalid(&self, field: &str, reason: impl Into<String>) -> ConfigError {
        invalid(self.field(field), reason)
    }
}

/// `settings` (a provider's keys but those every provider takes) read by adapter `A`.
fn read<A: Adapter>(
    key: &str,
    adapter: &'static str,
    mut settings: toml::Table,
    env: Env<'_>,
) -> Result<A, ConfigError> {
    let at = At { key, adapter, env };
    let endpoint = if A::HTTP {
        parse(&at, http::take(&mut settings), true)?
    } else {
        RawEndpoint::default()
    };
    A::validate(&at, parse(&at, settings, A::HTTP)?, endpoint)
}

/// `settings` as adapter `A` reads them, with what `config` (its validation) settled.
fn write_back<A: Adapter>(config: &A, settings: &mut toml::Table) {
    let mut own = std::mem::take(settings);
    let endpoint = A::HTTP.then(|| http::take(&mut own));
    // Both were read this way by validation: they parse.
    let (Ok(mut raw), Ok(mut endpoint)) = (
        toml::Value::Table(own.clone()).try_into::<A::Raw>(),
        endpoint.map_or(Ok(RawEndpoint::default()), |e| {
            toml::Value::Table(e).try_into()
        }),
    ) else {
        *settings = own;
        return;
    };
    config.effective(&mut raw, &mut endpoint);
    // Where first, then how.
    *settings = if A::HTTP {
        table(&endpoint)
    } else {
        toml::Table::new()
    };
    settings.extend(table(&raw));
}

/// `value`'s fields as a table (a struct of plain keys: it always is one).
fn table(value: &impl Serialize) -> toml::Table {
    toml::Table::try_from(value).unwrap_or_default()
}

/// `table` read as `T`, an error naming the key: a key the adapter does not take (an `http`
/// adapter takes the endpoint's too), or a value of the wrong form.
fn parse<T: DeserializeOwned>(
    at: &At<'_>,
    table: toml::Table,
    http: bool,
) -> Result<T, ConfigError> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| {
            let text = e.to_string();
            let mut lines = text.lines();
            let reason = lines.next().unwrap_or_default();
            // The key within the table, as the deserializer says it: "in `timeouts.connect`".
            let within = lines
                .find_map(|l| l.strip_prefix("in `"))
                .map(|l| l.trim_end_matches('`'));
            let unknown = reason
                .strip_prefix("unknown field `")
                .and_then(|rest| rest.split_once('`'));
            // What serde says the table takes: "expected `a` or `b`", or "there are no fields".
            let takes = |rest: &str| match rest.trim_start_matches(',').trim() {
                "there are no fields" => "none".to_owned(),
                expected => expected
                    .trim_start_matches("expected ")
                    .trim_start_matches("one of ")
                    .replace(" or ", ", "),
            };
            match (unknown, within) {
                (Some((name, rest)), None) => at.invalid(
                    name,
                    format!(
                        "does not apply to the `{}` adapter (its own keys: {}{})",
                        at.adapter,
                        takes(rest),
                        if http {
                            "; and an HTTP adapter's `base_url`, `proxy`, `allow_insecure_http`, \
                         `timeouts`"
                        } else {
                            ""
                        }
                    ),
                ),
                (Some((name, rest)), Some(within)) => at.invalid(
                    &format!("{within}.{name}"),
                    format!("unknown key (it takes {})", takes(rest)),
                ),
                (None, Some(within)) => at.invalid(within, reason),
                (None, None) => invalid(at.key, reason),
            }
        })
}

/// A value of setting `field` as one of `options`, by name; `None` when it is unset. Any
/// other name is an error naming the setting and what it takes.
fn one_of<T: Copy>(
    at: &At<'_>,
    field: &str,
    what: &str,
    value: Option<&str>,
    options: &[(&str, T)],
) -> Result<Option<T>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    if let Some((_, chosen)) = options.iter().find(|(name, _)| *name == value) {
        return Ok(Some(*chosen));
    }
    let names: Vec<String> = options
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(at.invalid(
        field,
        format!("unknown {what} `{value}`; expected {expected}"),
    ))
}

/// The name of one of `options`' values (the inverse of [`one_of`]).
fn name_of<T: PartialEq>(value: &T, options: &[(&'static str, T)]) -> Option<String> {
    options
        .iter()
        .find(|(_, v)| v == value)
        .map(|(name, _)| (*name).to_owned())
}

/// Lists the adapters once: the enum of their configs, their names, and how a provider's
/// settings are read and written back by the one it names.
macro_rules! adapters {
    ($( $(#[$doc:meta])* $variant:ident($config:ty) = $name:literal, )*) => {
        /// The adapter of a provider, with the settings only it uses.
        #[derive(Debug, Clone)]
        pub enum AdapterConfig {
            $( $(#[$doc])* $variant($config), )*
        }

        impl AdapterConfig {
            /// The adapter's name in the file.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $name, )*
                }
            }
        }

        /// Every adapter's name, in the table's order.
        const NAMES: &[&str] = &[$( $name ),*];

        /// The settings of provider `key`, read by the adapter it names.
        pub(super) fn validate(
            key: &str,
            adapter: &str,
            settings: toml::Table,
            env: Env<'_>,
        ) -> Result<AdapterConfig, ConfigError> {
            match adapter {
                $( $name => read::<$config>(key, $name, settings, env).map(AdapterConfig::$variant), )*
                _ => Err(unknown(key, adapter)),
            }
        }

        /// `settings` as in effect for `config`.
        pub(super) fn effective(config: &AdapterConfig, settings: &mut toml::Table) {
            match config {
                $( AdapterConfig::$variant(config) => write_back(config, settings), )*
            }
        }
    };
}

/// An adapter no row names.
fn unknown(key: &str, adapter: &str) -> ConfigError {
    let names: Vec<String> = NAMES.iter().map(|n| format!("`{n}`")).collect();
    invalid(
        format!("{key}.adapter"),
        format!(
            "unknown adapter `{adapter}`; expected one of {}",
            names.join(", ")
        ),
    )
}

adapters! {
    /// The built-in deterministic provider.
    Scripted(ScriptedConfig) = "scripted",
    /// OpenAI chat completions, or a server that speaks it (vLLM, Ollama, llama.cpp, ...).
    OpenAi(OpenAiConfig) = "openai",
    /// The OpenAI Responses API.
    OpenAiResponses(OpenAiResponsesConfig) = "openai-responses",
    /// Azure OpenAI, chat completions or the Responses API.
    AzureOpenAi(AzureOpenAiConfig) = "azure-openai",
    /// Google's Gemini API.
    Gemini(GeminiConfig) = "gemini",
    /// Vertex AI: Gemini or Anthropic models.
    Vertex(VertexConfig) = "vertex",
    /// Anthropic messages.
    Anthropic(AnthropicConfig) = "anthropic",
    /// AWS Bedrock's Converse API.
    Bedrock(BedrockConfig) = "bedrock",
}

#[cfg(test)]
mod tests;
