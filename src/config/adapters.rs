//! The adapter of a provider as the runtime uses it: which protocol, where, with which
//! credentials and settings only that adapter reads (`validate/adapter.rs` makes these).

use std::time::Duration;

use super::{ProxyUrl, Secret, ServiceAccount};

/// The adapter of a provider, with the settings only it uses.
#[derive(Debug, Clone)]
pub enum AdapterConfig {
    /// The built-in deterministic provider.
    Scripted,
    /// OpenAI chat completions, or a server that speaks it (vLLM, Ollama, llama.cpp, ...).
    OpenAi(OpenAiConfig),
    /// The OpenAI Responses API (`adapter = "openai-responses"`).
    OpenAiResponses(OpenAiResponsesConfig),
    /// Azure OpenAI, chat completions or the Responses API (`adapter = "azure-openai"`).
    AzureOpenAi(AzureOpenAiConfig),
    /// Google's Gemini API (`adapter = "gemini"`).
    Gemini(GeminiConfig),
    /// Vertex AI: Gemini or Anthropic models (`adapter = "vertex"`).
    Vertex(VertexConfig),
    /// Anthropic messages.
    Anthropic(AnthropicConfig),
    /// AWS Bedrock's Converse API (`adapter = "bedrock"`).
    Bedrock(BedrockConfig),
}

impl AdapterConfig {
    /// The adapter's name in the file.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Scripted => "scripted",
            Self::OpenAi(_) => "openai",
            Self::OpenAiResponses(_) => "openai-responses",
            Self::AzureOpenAi(_) => "azure-openai",
            Self::Gemini(_) => "gemini",
            Self::Vertex(_) => "vertex",
            Self::Anthropic(_) => "anthropic",
            Self::Bedrock(_) => "bedrock",
        }
    }
}

/// Where an HTTP adapter sends its requests and how long it waits.
#[derive(Debug, Clone)]
pub struct HttpEndpointConfig {
    /// An http(s) URL without a trailing slash, e.g. `https://api.openai.com/v1`; the adapter
    /// appends its path (`/chat/completions`, `/messages`).
    pub base_url: String,
    /// Timeouts of one attempt; each is also cut to the attempt's remaining time.
    pub timeouts: TimeoutsConfig,
    /// An HTTP proxy every request goes through; `None` (the default) connects directly and
    /// ignores `HTTP_PROXY`/`HTTPS_PROXY` in the environment.
    pub proxy: Option<ProxyUrl>,
}

/// `[providers.NAME] timeouts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutsConfig {
    /// TCP and TLS set-up of a new connection.
    pub connect: Duration,
    /// From sending the request to the first byte of the response body.
    pub first_byte: Duration,
    /// Longest silence between two pieces of the response body.
    pub idle: Duration,
}

/// `adapter = "openai"`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Where to send requests.
    pub endpoint: HttpEndpointConfig,
    /// Sent as `Authorization: Bearer`; local compatible servers often need none.
    pub api_key: Option<Secret>,
    /// The request field that carries `max_output_tokens`.
    pub max_tokens_field: MaxTokensField,
}

/// `adapter = "openai-responses"`.
#[derive(Debug, Clone)]
pub struct OpenAiResponsesConfig {
    /// Where to send requests (`{base_url}/responses`).
    pub endpoint: HttpEndpointConfig,
    /// Sent as `Authorization: Bearer`.
    pub api_key: Option<Secret>,
}

/// `adapter = "gemini"`.
#[derive(Debug, Clone)]
pub struct GeminiConfig {
    /// Where to send requests (`{base_url}/models/{model}:streamGenerateContent`).
    pub endpoint: HttpEndpointConfig,
    /// Sent as `x-goog-api-key`.
    pub api_key: Secret,
}

/// `adapter = "vertex"`.
#[derive(Debug, Clone)]
pub struct VertexConfig {
    /// `https://{location}-aiplatform.googleapis.com/v1` unless `base_url` says otherwise.
    pub endpoint: HttpEndpointConfig,
    /// The Google Cloud project.
    pub project: String,
    /// Its region, e.g. `us-central1`.
    pub location: String,
    /// Whose models the provider serves.
    pub publisher: VertexPublisher,
    /// A bearer token: from a variable (`Token`), a file read again when it changes, or
    /// minted with a service account's key (never `ApiKey`: Vertex AI takes none).
    pub auth: Credentials,
    /// Anthropic models: `max_tokens` of a request that sets none.
    pub default_max_output_tokens: u32,
}

/// `adapter = "bedrock"`.
#[derive(Debug, Clone)]
pub struct BedrockConfig {
    /// `https://bedrock-runtime.{region}.amazonaws.com` unless `base_url` says otherwise (a
    /// VPC endpoint, a test server).
    pub endpoint: HttpEndpointConfig,
    /// The AWS region requests are signed for, e.g. `us-east-1`.
    pub region: String,
    /// The keys requests are signed with.
    pub credentials: AwsCredentials,
}

/// Where a `bedrock` provider's AWS keys come from (`aws_credentials`).
#[derive(Debug, Clone)]
pub enum AwsCredentials {
    /// `environment`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, when set,
    /// `AWS_SESSION_TOKEN`, read at start-up.
    Environment {
        access_key_id: Secret,
        secret_access_key: Secret,
        session_token: Option<Secret>,
    },
    /// `container`: the container credentials endpoint (ECS, EKS Pod Identity).
    Container(ContainerCredentials),
}

/// The container credentials endpoint, as its standard variables name it.
#[derive(Debug, Clone)]
pub struct ContainerCredentials {
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI`, or `http://169.254.170.2` followed by
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
    pub url: String,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`, sent as `Authorization`.
    pub token: Option<Secret>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read at every request (it is rotated);
    /// preferred to `token`.
    pub token_file: Option<std::path::PathBuf>,
}

/// Whose models a `vertex` provider serves, and so which protocol it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VertexPublisher {
    /// Gemini models (`publishers/google`), the Gemini API's request and stream.
    Google,
    /// Claude models (`publishers/anthropic`), Anthropic's messages through `streamRawPredict`.
    Anthropic,
}

/// `adapter = "azure-openai"`.
#[derive(Debug, Clone)]
pub struct AzureOpenAiConfig {
    /// The resource's endpoint, e.g. `https://my-resource.openai.azure.com`.
    pub endpoint: HttpEndpointConfig,
    /// Set: the deployments URL shape with this `api-version` (a model's name is its
    /// deployment's); unset: the v1 path.
    pub api_version: Option<String>,
    /// Which API the deployment is called through.
    pub api: AzureApi,
    /// How requests prove who sends them.
    pub auth: Credentials,
}

/// The API an `azure-openai` provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureApi {
    /// Chat completions (the default).
    ChatCompletions,
    /// The Responses API.
    Responses,
}

/// How a provider that takes more than a key proves who calls it (`azure-openai`, `vertex`).
#[derive(Debug, Clone)]
pub enum Credentials {
    /// `api_key_env`: sent as `api-key`.
    ApiKey(Secret),
    /// `token_env`: an Entra ID token, sent as `Authorization: Bearer`.
    Token(Secret),
    /// `token_file`: the same, read from this file and again whenever it changes.
    TokenFile(std::path::PathBuf),
    /// `service_account_file` (`vertex`): access tokens minted with this service account's
    /// key, fetched from its token endpoint and refreshed before they expire.
    ServiceAccount(ServiceAccount),
}

/// The name under which the `openai` adapter sends the output token limit: OpenAI documents
/// `max_completion_tokens` (its reasoning models reject `max_tokens`), while some compatible
/// servers (Ollama) only know `max_tokens` and would ignore the other silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (the default).
    MaxCompletionTokens,
    /// `max_tokens`.
    MaxTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxCompletionTokens => "max_completion_tokens",
            Self::MaxTokens => "max_tokens",
        }
    }
}

/// `adapter = "anthropic"`.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Where to send requests.
    pub endpoint: HttpEndpointConfig,
    /// Sent as `x-api-key`.
    pub api_key: Secret,
    /// Sent as `anthropic-version`.
    pub version: String,
    /// `max_tokens` of a request that sets no `max_output_tokens`: the protocol requires one.
    pub default_max_output_tokens: u32,
}
