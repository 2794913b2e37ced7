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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use super::exchange;
use super::http::{HttpClients, Upstream, secret_header};
use super::openai::ChunkDecoder;
use super::responses::ResponseDecoder;
use super::{
    Provider, ProviderCall, ProviderError, ProviderInitError, ProviderStream, plain_stream,
};
use crate::config::{AzureApi, AzureAuth, AzureOpenAiConfig, MaxTokensField, ModelConfig};
use crate::execution::AttemptCode;

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
enum Upstreams {
    One(Upstream),
    PerModel(HashMap<Arc<str>, Upstream>),
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
        let mut headers = HeaderMap::new();
        let (secret, token_file) = match &config.auth {
            AzureAuth::ApiKey(key) => {
                headers.insert("api-key", secret_header(&name, key.expose())?);
                (Some(key.clone()), None)
            }
            AzureAuth::Token(token) => {
                let bearer = format!("Bearer {}", token.expose());
                headers.insert(AUTHORIZATION, secret_header(&name, &bearer)?);
                (Some(token.clone()), None)
            }
            AzureAuth::TokenFile(path) => (None, Some(TokenFile::new(path.clone()))),
        };
        let upstream = |path: &str, clients: &mut HttpClients| {
            let client = clients.client(&name, &config.endpoint, path, max_concurrency)?;
            Ok::<_, ProviderInitError>(Upstream {
                name: name.clone(),
                adapter: "azure-openai",
                client,
                timeouts: config.endpoint.timeouts,
                secret: secret.clone(),
                headers: headers.clone(),
                call: None,
            })
        };
        let upstreams = match (&config.api_version, config.api) {
            (Some(version), AzureApi::ChatCompletions) => {
                let mut each = HashMap::new();
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
            token_file,
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
        let mut upstream = upstream.clone();
        if let Some(file) = &self.token_file {
            let bearer = file.bearer(&upstream)?;
            upstream.headers.insert(AUTHORIZATION, bearer);
        }
        Ok(upstream)
    }
}

impl Provider for AzureProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let upstream = match self.upstream(&call.model) {
            Ok(upstream) => upstream,
            Err(error) => return plain_stream(futures_util::stream::iter([Err(error)])),
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

/// A bearer token kept in a file that something else rotates: read again whenever the file
/// changes, never logged.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    /// The file's modification time and length when last read, and the header it gave.
    read: Mutex<Option<(SystemTime, u64, HeaderValue)>>,
}

impl TokenFile {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            read: Mutex::new(None),
        }
    }

    /// `Authorization: Bearer <the file's token>`, read again if the file changed. A file
    /// that cannot be read fails the attempt before anything is sent: the credentials are
    /// this target's problem, and another target may serve the request.
    fn bearer(&self, upstream: &Upstream) -> Result<HeaderValue, ProviderError> {
        let unreadable = |why: &str| {
            ProviderError::rejected(
                AttemptCode::Unauthorized,
                format!("{}: the token file {why}", upstream.label()),
            )
        };
        let meta = std::fs::metadata(&self.path).map_err(|_| unreadable("cannot be read"))?;
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((modified, len, header)) = &*read
            && (*modified, *len) == stamp
        {
            return Ok(header.clone());
        }
        let token =
            std::fs::read_to_string(&self.path).map_err(|_| unreadable("cannot be read"))?;
        let token = token.trim();
        if token.is_empty() {
            return Err(unreadable("is empty"));
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| unreadable("holds characters a header cannot"))?;
        header.set_sensitive(true);
        *read = Some((stamp.0, stamp.1, header.clone()));
        Ok(header)
    }
}
