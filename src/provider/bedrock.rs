//! The `bedrock` adapter: AWS Bedrock's Converse API, streaming (`POST
//! {base_url}/model/{modelId}/converse-stream`), one request shape for every model family.
//!
//! - **Request**: `request.rs`; the model id (or inference profile, or ARN) is percent-encoded
//!   into the path, as AWS's SDKs do.
//! - **Signing**: SigV4 (`sigv4.rs`, held to AWS's own signer by the tests) over the method,
//!   URL, `Host`, the time and the body, for the configured region and the `bedrock` signing
//!   name. The keys come
//!   from the environment or the container credentials endpoint (`credentials.rs`); a call
//!   whose keys must be fetched first waits for them ([`deferred`](super::deferred)).
//! - **Reply**: AWS's binary event stream (`eventstream.rs`), its messages read by
//!   `stream.rs`.

mod credentials;
mod fast;
mod request;
mod sigv4;
mod stream;

use std::sync::Arc;
use std::time::SystemTime;

use credentials::{AwsKeys, KeySource};
use sigv4::{Signing, sign_request};
pub(super) use stream::ConverseDecoder;

use super::http::{HttpClients, Upstream};
use super::{
    Provider, ProviderCall, ProviderError, ProviderInitError, ProviderStream, deferred, exchange,
    unsent,
};
use crate::config::{AwsCredentials, BedrockConfig, HttpEndpointConfig, ModelConfig};
use crate::execution::{AttemptCode, NameMap};

/// The name Bedrock's runtime endpoints sign with.
const SIGNING_NAME: &str = "bedrock";

/// Bytes of a model id kept as they are in the path; every other byte is percent-encoded
/// (`:` of a versioned id, `/` of an ARN).
const PATH_KEEPS: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A Bedrock runtime endpoint in one region.
#[derive(Debug)]
pub(super) struct BedrockProvider {
    region: String,
    keys: Arc<KeySource>,
    /// By model: the model is in the path.
    targets: NameMap<Arc<Target>>,
}

/// Where one model's calls go.
#[derive(Debug)]
struct Target {
    upstream: Upstream,
    /// The URL as it is sent (scheme, `Host`, path): what the signature covers.
    url: String,
}

impl BedrockProvider {
    /// The adapter of provider `name` serving `models`, with clients from `clients` keeping up
    /// to `max_concurrency` idle connections each.
    pub(super) fn new(
        name: Arc<str>,
        config: &BedrockConfig,
        models: &[ModelConfig],
        clients: &mut HttpClients,
        max_concurrency: u32,
    ) -> Result<Self, ProviderInitError> {
        let keys = match &config.credentials {
            AwsCredentials::Environment {
                access_key_id,
                secret_access_key,
                session_token,
            } => KeySource::fixed(access_key_id, secret_access_key, session_token.as_ref()),
            AwsCredentials::Container(container) => {
                // Never through the provider's proxy: the endpoint is the container's own.
                let endpoint = HttpEndpointConfig {
                    base_url: container.url.clone(),
                    timeouts: config.endpoint.timeouts,
                    proxy: None,
                };
                let client = clients.client(&name, &endpoint, "", 1)?;
                let within = config.endpoint.timeouts.first_byte;
                KeySource::container(container, client, within)
            }
        };
        // What the signature covers is the URL as sent: `{base_url}{path}`.
        let base = url::Url::parse(&config.endpoint.base_url)
            .map_err(|e| ProviderInitError::new(&name, format!("base_url: {e}")))?;
        let (scheme, base_path) = (base.scheme(), base.path().trim_end_matches('/'));
        let mut targets = NameMap::default();
        for model in models {
            let id = percent_encoding::utf8_percent_encode(&model.name, PATH_KEEPS);
            let path = format!("/model/{id}/converse-stream");
            let client = clients.client(&name, &config.endpoint, &path, max_concurrency)?;
            let url = format!("{scheme}://{}{base_path}{path}", client.authority());
            let upstream = Upstream::new(
                name.clone(),
                "bedrock",
                client,
                config.endpoint.timeouts,
                http::HeaderMap::new(),
                None,
            );
            targets.insert(model.name.clone(), Arc::new(Target { upstream, url }));
        }
        Ok(Self {
            region: config.region.clone(),
            keys: Arc::new(keys),
            targets,
        })
    }
}

impl Provider for BedrockProvider {
    fn call(&self, call: ProviderCall) -> ProviderStream {
        let Some(target) = self.targets.get(&*call.model).cloned() else {
            let error = ProviderError::rejected(
                AttemptCode::ModelNotFound,
                format!("the bedrock provider has no model `{}`", call.model),
            );
            return unsent(error);
        };
        let body = match request::body(&call.input) {
            Ok(body) => body,
            Err(error) => return unsent(error),
        };
        if let Some(keys) = self.keys.at_hand() {
            return send(&target, &self.region, &keys, body, &call);
        }
        let (keys, region) = (self.keys.clone(), self.region.clone());
        deferred::after(async move {
            let upstream = target.upstream.for_call(&call);
            match keys.fresh(&upstream, call.deadline).await {
                Ok(keys) => send(&target, &region, &keys, body, &call),
                Err(error) => unsent(error),
            }
        })
    }
}

/// Signs `body` for `target` with `keys` and posts it.
fn send(
    target: &Target,
    region: &str,
    keys: &AwsKeys,
    body: Vec<u8>,
    call: &ProviderCall,
) -> ProviderStream {
    let signing = Signing {
        keys,
        region,
        service: SIGNING_NAME,
        time: SystemTime::now(),
    };
    let host = target.upstream.client.authority();
    let signed = sign_request(&signing, "POST", &target.url, &[("host", host)], &body);
    let signed = match signed {
        Ok(signed) => signed,
        Err(why) => {
            let error = ProviderError::rejected(
                AttemptCode::Unauthorized,
                format!(
                    "{}: signing the request failed: {why}",
                    target.upstream.label()
                ),
            );
            return unsent(error);
        }
    };
    let mut upstream = target.upstream.clone();
    let (secret, session) = keys.secrets();
    (upstream.secret, upstream.session) = (Some(secret), session);
    upstream.headers.extend(signed);
    exchange::post(&upstream, Ok(body), call, ConverseDecoder::default())
}

#[cfg(test)]
mod tests;
