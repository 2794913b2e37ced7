//! The adapter of every configured provider, built from its configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Provider;
use super::anthropic::AnthropicProvider;
use super::azure::AzureProvider;
use super::bedrock::BedrockProvider;
use super::gemini::GeminiProvider;
use super::http::HttpClients;
use super::openai::OpenAiProvider;
use super::responses::ResponsesProvider;
use super::scripted::ScriptedProvider;
use super::vertex::VertexProvider;
use crate::config::{AdapterConfig, Config, ProviderConfig};

/// A provider's adapter could not be built at start-up.
#[derive(Debug, thiserror::Error)]
#[error("providers.{provider}: {reason}")]
pub struct ProviderInitError {
    /// The provider's name.
    pub provider: Arc<str>,
    /// Why; never a secret.
    pub reason: String,
}

impl ProviderInitError {
    /// An error of provider `provider`.
    pub fn new(provider: &str, reason: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            reason: reason.into(),
        }
    }
}

/// The adapter of every configured provider, by name.
#[derive(Debug, Default)]
pub struct Providers {
    adapters: BTreeMap<Arc<str>, Arc<dyn Provider>>,
}

impl Providers {
    /// Builds each provider's adapter from its configuration; `overrides` replace the adapter
    /// of the providers they name (embedding and tests at the SPI boundary). HTTP adapters
    /// share the TLS set-up; building it can fail (no roots), hence the `Result`.
    pub fn from_config(
        config: &Config,
        mut overrides: BTreeMap<String, Arc<dyn Provider>>,
    ) -> Result<Self, ProviderInitError> {
        let mut clients = HttpClients::default();
        let mut adapters = BTreeMap::new();
        for p in config.providers.values() {
            let provider = match overrides.remove(&*p.name) {
                Some(provider) => provider,
                None => adapter(p, &mut clients)?,
            };
            adapters.insert(p.name.clone(), provider);
        }
        Ok(Self { adapters })
    }

    /// The adapter of the provider called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.adapters.get(name)
    }
}

fn adapter(
    config: &ProviderConfig,
    clients: &mut HttpClients,
) -> Result<Arc<dyn Provider>, ProviderInitError> {
    Ok(match &config.adapter {
        AdapterConfig::Scripted(_) => Arc::new(ScriptedProvider::new(
            config
                .models
                .iter()
                .map(|m| (m.name.clone(), m.script.clone())),
        )),
        AdapterConfig::OpenAi(openai) => Arc::new(OpenAiProvider::new(
            config.name.clone(),
            openai,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::Vertex(vertex) => Arc::new(VertexProvider::new(
            config.name.clone(),
            vertex,
            &config.models,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::Bedrock(bedrock) => Arc::new(BedrockProvider::new(
            config.name.clone(),
            bedrock,
            &config.models,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::Gemini(gemini) => Arc::new(GeminiProvider::new(
            config.name.clone(),
            gemini,
            &config.models,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::AzureOpenAi(azure) => Arc::new(AzureProvider::new(
            config.name.clone(),
            azure,
            &config.models,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::OpenAiResponses(responses) => Arc::new(ResponsesProvider::new(
            config.name.clone(),
            responses,
            clients,
            config.max_concurrency,
        )?),
        AdapterConfig::Anthropic(anthropic) => Arc::new(AnthropicProvider::new(
            config.name.clone(),
            anthropic,
            clients,
            config.max_concurrency,
        )?),
    })
}
