//! The `vertex` adapter: Vertex AI, Google Cloud's model endpoints, with an OAuth access token.
//!
//! - **Gemini models** (`publisher = "google"`): the Gemini API's request and stream
//!   (`gemini.rs`) at
//!   `{base_url}/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse`.
//! - **Claude models** (`publisher = "anthropic"`): Anthropic's messages request and stream
//!   (`anthropic.rs`) at `.../publishers/anthropic/models/{model}:streamRawPredict`, the body
//!   without `model` (it is in the path) and with `anthropic_version: "vertex-2023-10-16"`.
//! - **Credentials**: `Authorization: Bearer` with an access token from `token_env`, from
//!   `token_file`, read again whenever it changes (a sidecar or workload identity keeps it
//!   fresh), or minted with a service account's key (`service_account_file`, see
//!   `service_account.rs`). A call whose minted token is cached is sent at once, as any
//!   other; one that must fetch a token first sends its request after it (`deferred.rs`).

use std::sync::Arc;

use super::anthropic::EventDecoder;
use super::gemini::ChunkDecoder;
use super::http::{HttpClients, Upstream};
use super::service_account::{Bearer, TokenSource, remint};
use super::token_file::{Auth, TokenFile, authorized};
use super::{Provider, ProviderCall, ProviderError, ProviderInitError, ProviderStream, unsent};
use super::{deferred, exchange};
use crate::config::{Credentials, ModelConfig, VertexConfig, VertexPublisher};
use crate::execution::{AttemptCode, NameMap};

/// The `anthropic_version` Vertex AI's Claude models take in the body.
const ANTHROPIC_VERTEX_VERSION: &str = "vertex-2023-10-16";

/// A Vertex AI publisher's models in one project and region.
#[derive(Debug)]
pub(super) struct VertexProvider {
    protocol: Protocol,
    /// By model: the model is in the path.
    upstreams: NameMap<Upstream>,
    token_file: Option<TokenFile>,
    /// The service account's tokens, shared with the calls that wait for one.
    service_account: Option<Arc<TokenSource>>,
}

/// How a call's request is written and its reply read.
#[derive(Debug, Clone, Copy)]
struct Protocol {
    /// Whose models: which request and stream.
    publisher: VertexPublisher,
    /// Anthropic models: `max_tokens` of a request that sets none.
    default_max_tokens: u32,
}

impl VertexProvider {
    /// The adapter of provider `name` serving `models`, with clients from `clients` keeping up
    /// to `max_concurrency` idle connections each.
    pub(super) fn new(
        name: Arc<str>,
        config: &VertexConfig,
        models: &[ModelConfig],
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let auth = Auth::new(&name, &config.auth)?;
        let (publisher, method) = match config.publisher {
            VertexPublisher::Google => ("google", "streamGenerateContent?alt=sse"),
            VertexPublisher::Anthropic => ("anthropic", "streamRawPredict"),
        };
        let mut upstreams = NameMap::default();
        for model in models {
            let path = format!(
                "/projects/{}/locations/{}/publishers/{publisher}/models/{}:{method}",
                config.project, config.location, model.name
            );
            let client = clients.client(&name, &config.endpoint, &path, max_concurrency)?;
            upstreams.insert(
                model.name.clone(),
                Upstream::new(
                    name.clone(),
                    "vertex",
                    client,
                    config.endpoint.timeouts,
                    auth.headers.clone(),
                    auth.secret.clone(),
                ),
            );
        }
        let service_account = match &config.auth {
            Credentials::ServiceAccount(account) => Some(Arc::new(TokenSource::new(
                &name,
                account,
                &config.endpoint,
                clients,
            )?)),
            _ => None,
        };
        Ok(Self {
            protocol: Protocol {
                publisher: config.publisher,
                default_max_tokens: config.default_max_output_tokens,
            },
            upstreams,
            token_file: auth.file,
            service_account,
        })
    }

    /// Where a call for `model` goes, with the credentials it carries now.
    fn upstream(&self, model: &str) -> Result<Upstream, ProviderError> {
        let upstream = self.upstreams.get(model).ok_or_else(|| {
            ProviderError::rejected(
                AttemptCode::ModelNotFound,
                format!("the vertex provider has no model `{model}`"),
            )
        })?;
        authorized(self.token_file.as_ref(), upstream)
    }
}

impl Provider for VertexProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let upstream = match self.upstream(&call.model) {
            Ok(upstream) => upstream,
            Err(error) => return unsent(error),
        };
        let Some(source) = &self.service_account else {
            return self.protocol.post(&upstream, &call);
        };
        let (source, protocol) = (source.clone(), self.protocol);
        if let Some(bearer) = source.fresh() {
            return protocol.with_token(upstream, call, source, bearer);
        }
        deferred::after(async move {
            match source
                .bearer(&upstream.for_call(&call), call.deadline)
                .await
            {
                Ok(bearer) => protocol.with_token(upstream, call, source, bearer),
                Err(error) => unsent(error),
            }
        })
    }
}

impl Protocol {
    /// Sends `call` to `upstream` with a minted token, `bearer`; a refusal of it is met by
    /// one more call with a new token (`service_account::remint`).
    fn with_token(
        self,
        upstream: Upstream,
        call: ProviderCall,
        source: Arc<TokenSource>,
        bearer: Bearer,
    ) -> ProviderStream {
        let mut first = upstream.clone();
        bearer.authorize(&mut first);
        let stream = self.post(&first, &call);
        let (for_call, deadline) = (upstream.for_call(&call), call.deadline);
        let again: remint::Send = Box::new(move |bearer| {
            let mut upstream = upstream;
            bearer.authorize(&mut upstream);
            self.post(&upstream, &call)
        });
        remint::once_more(stream, bearer, source, for_call, deadline, again)
    }

    /// Sends `call` to `upstream` and streams the reply.
    fn post(self, upstream: &Upstream, call: &ProviderCall) -> ProviderStream {
        match self.publisher {
            VertexPublisher::Google => {
                let body = super::gemini::request::body(&call.input);
                exchange::post(upstream, body, call, ChunkDecoder::default())
            }
            VertexPublisher::Anthropic => {
                let body = super::anthropic::request::fields(&call.input, self.default_max_tokens)
                    .and_then(|mut body| {
                        body.anthropic_version = Some(ANTHROPIC_VERTEX_VERSION);
                        super::wire::encode(&body, &call.input)
                    });
                exchange::post(upstream, body, call, EventDecoder::default())
            }
        }
    }
}
