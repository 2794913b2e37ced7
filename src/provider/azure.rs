//! The `azure-openai` adapter: Azure OpenAI, through chat completions or the Responses API,
//! with the request and stream of the OpenAI adapters (`openai.rs`, `responses.rs`) and
//! Azure's own addresses and credentials:
//!
//! - **Addresses.** With `api_version` set, the deployments shape: chat completions at
//!   `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=V` (a model's
//!   name is its deployment's), the Responses API at `{endpoint}/openai/responses?api-version=V`.
//!   Without it, the v1 path: `{endpoint}/openai/v1/chat/completions` and
//!   `{endpoint}/openai/v1/responses`, the model named in the body.
//! - **Credentials.** An `api-key` header, or an Entra ID bearer token from a variable or a
//!   file. The file is read again whenever it changes (its modification time or length), so a
//!   token that workload identity rotates on disk is picked up by the next request.
//! - **Content filtering.** The `prompt_filter_results` chunk that opens a chat stream and the
//!   `content_filter_results` on each chunk carry nothing for the reply; a reply the filter
//!   stopped finishes `content_filter`, and a prompt it blocked (a 400 with code
//!   `content_filter`) is `content_filtered`, as `docs/providers.md` says.

use std::sync::Arc;

use super::exchange;
use super::http::{HttpClients, Upstream};
use super::openai::ChunkDecoder;
use super::responses::ResponseDecoder;
use super::token_file::{Auth, TokenFile, authorized};
use super::{Provider, ProviderCall, ProviderError, ProviderInitError, ProviderStream, unsent};
use crate::config::{AzureApi, AzureOpenAiConfig, MaxTokensField, ModelConfig};
use crate::execution::{AttemptCode, NameMap};

/// An Azure OpenAI resource.
#[derive(Debug)]
pub(super) struct AzureProvider {
    api: AzureApi,
    /// Per deployment (the deployments shape of chat completions), else one for all.
    upstreams: Upstreams,
    /// A token read from a file, when the credentials are one.
    token_file: Option<TokenFile>,
}

#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per provider, made at start-up; boxing `One` would add a hop to every call"
)]
enum Upstreams {
    One(Upstream),
    PerModel(NameMap<Upstream>),
}

impl AzureProvider {
    /// The adapter of provider `name` serving `models`, with clients from `clients` keeping up
    /// to `max_concurrency` idle connections each.
    pub(super) fn new(
        name: Arc<str>,
        config: &AzureOpenAiConfig,
        models: &[ModelConfig],
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let auth = Auth::new(&name, &config.auth)?;
        let upstream = |path: &str, clients: &mut HttpClients| {
            let client = clients.client(&name, &config.endpoint, path, max_concurrency)?;
            Ok::<_, ProviderInitError>(Upstream::new(
                name.clone(),
                "azure-openai",
                client,
                config.endpoint.timeouts,
                auth.headers.clone(),
                auth.secret.clone(),
            ))
        };
        let upstreams = match (&config.api_version, config.api) {
            (Some(version), AzureApi::ChatCompletions) => {
                let mut each = NameMap::default();
                for model in models {
                    let path = format!(
                        "/openai/deployments/{}/chat/completions?api-version={version}",
                        model.name
                    );
                    each.insert(model.name.clone(), upstream(&path, clients)?);
                }
                Upstreams::PerModel(each)
            }
            (Some(version), AzureApi::Responses) => Upstreams::One(upstream(
                &format!("/openai/responses?api-version={version}"),
                clients,
            )?),
            (None, AzureApi::ChatCompletions) => {
                Upstreams::One(upstream("/openai/v1/chat/completions", clients)?)
            }
            (None, AzureApi::Responses) => {
                Upstreams::One(upstream("/openai/v1/responses", clients)?)
            }
        };
        Ok(Self {
            api: config.api,
            upstreams,
            token_file: auth.file,
        })
    }

    /// Where a call for `model` goes, with the credentials it carries now.
    fn upstream(&self, model: &str) -> Result<Upstream, ProviderError> {
        let upstream = match &self.upstreams {
            Upstreams::One(upstream) => upstream,
            Upstreams::PerModel(each) => each.get(model).ok_or_else(|| {
                ProviderError::rejected(
                    AttemptCode::ModelNotFound,
                    format!("no deployment is configured for model `{model}`"),
                )
            })?,
        };
        authorized(self.token_file.as_ref(), upstream)
    }
}

impl Provider for AzureProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let upstream = match self.upstream(&call.model) {
            Ok(upstream) => upstream,
            Err(error) => return unsent(error),
        };
        match self.api {
            AzureApi::ChatCompletions => {
                let body = super::openai::request::body(
                    &call.model,
                    &call.input,
                    MaxTokensField::MaxCompletionTokens,
                );
                exchange::post(&upstream, body, &call, ChunkDecoder::default())
            }
            AzureApi::Responses => {
                let body = super::responses::request::body(&call.model, &call.input);
                exchange::post(&upstream, body, &call, ResponseDecoder::default())
            }
        }
    }
}
