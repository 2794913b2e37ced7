//! Helpers for the adapter tests: configurations that point adapters at a scripted HTTP
//! upstream, and a way to run one provider call to its end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{ErrorClass, ExecutionId, ExecutionInput, Message};
use model_runtime::execution::{UsageQuantity, UsageSource, UsageUnit};
use model_runtime::provider::{Provider, ProviderCall, ProviderError, ProviderEvent, Providers};

/// The API key the tests' environment holds; it must never show up in errors.
pub const KEY: &str = "sk-test-secret-0123456789";

/// The AWS access key id the tests' environment holds (its secret key is [`KEY`]).
pub const AWS_KEY_ID: &str = "AKIDTESTEXAMPLE0001";

/// The AWS session token the tests' environment holds.
pub const AWS_TOKEN: &str = "session-token-test-0123456789";

/// The environment the tests' configurations read: the API key, and AWS keys.
pub fn env(name: &str) -> Option<String> {
    match name {
        "TEST_API_KEY" | "AWS_SECRET_ACCESS_KEY" => Some(KEY.to_owned()),
        "AWS_ACCESS_KEY_ID" => Some(AWS_KEY_ID.to_owned()),
        "AWS_SESSION_TOKEN" => Some(AWS_TOKEN.to_owned()),
        _ => None,
    }
}

/// A provider of `adapter` at `base_url` with the tests' key.
pub fn spec(adapter: &str, base_url: &str) -> ProviderSpec {
    ProviderSpec::scripted()
        .adapter(adapter)
        .base_url(base_url)
        .api_key_env("TEST_API_KEY")
}

/// A `bedrock` provider at `base_url` in `us-east-1`, signing with the tests' AWS keys.
pub fn bedrock_at(base_url: &str) -> ProviderSpec {
    ProviderSpec::scripted()
        .adapter("bedrock")
        .base_url(base_url)
        .region("us-east-1")
}

/// An `anthropic` provider at `base_url` with the tests' key, serving text on `model`.
pub fn anthropic_at(base_url: &str, model: &str) -> ProviderSpec {
    ProviderSpec::anthropic(base_url)
        .api_key_env("TEST_API_KEY")
        .model(model, &["text"])
}

/// An `openai` provider at `base_url` with the tests' key, serving text on `model`.
pub fn openai_at(base_url: &str, model: &str) -> ProviderSpec {
    ProviderSpec::openai(base_url)
        .api_key_env("TEST_API_KEY")
        .model(model, &["text"])
}

/// A config whose one provider `p` (model `m`) is `spec`.
pub fn config(spec: ProviderSpec) -> Config {
    Config::builder()
        .provider("p", spec.model("m", &["text"]))
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .expect("valid config")
}

/// `timeouts = { connect, first_byte, idle }` in milliseconds.
pub fn timeouts(spec: ProviderSpec, connect: u64, first_byte: u64, idle: u64) -> ProviderSpec {
    spec.timeouts(
        Duration::from_millis(connect),
        Duration::from_millis(first_byte),
        Duration::from_millis(idle),
    )
}

/// The adapter of provider `p`.
pub fn provider(config: &Config) -> Arc<dyn Provider> {
    let providers = Providers::from_config(config, BTreeMap::new()).expect("providers");
    providers.get("p").expect("provider p").clone()
}

/// One call with `input` and `time` until the attempt's deadline, run to its end.
pub async fn call_with(
    provider: &Arc<dyn Provider>,
    input: ExecutionInput,
    time: Duration,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    call_model(provider, "m", input, time).await
}

/// One call of `model` with `input` and `time` until the attempt's deadline, run to its end.
pub async fn call_model(
    provider: &Arc<dyn Provider>,
    model: &str,
    input: ExecutionInput,
    time: Duration,
) -> Vec<Result<ProviderEvent, ProviderError>> {
    let call = ProviderCall {
        execution_id: ExecutionId::new(),
        attempt: 1,
        target_attempt: 1,
        model: model.into(),
        input: Arc::new(input),
        deadline: tokio::time::Instant::now() + time,
        trace: None,
    };
    let items = provider.call(call).collect::<Vec<_>>();
    // A safety net only: every adapter timer is far shorter.
    tokio::time::timeout(Duration::from_secs(60), items)
        .await
        .expect("the provider stream ended")
}

/// One call saying "hi" with a minute to spare.
pub async fn call(provider: &Arc<dyn Provider>) -> Vec<Result<ProviderEvent, ProviderError>> {
    let input = ExecutionInput {
        messages: vec![Message::user("hi")],
        ..Default::default()
    };
    call_with(provider, input, Duration::from_secs(60)).await
}

/// Splits a finished call into its events and its final error, if any.
pub fn split(
    items: Vec<Result<ProviderEvent, ProviderError>>,
) -> (Vec<ProviderEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(event) => events.push(event.clone()),
            Err(error) => {
                assert_eq!(i + 1, items.len(), "an error ends the stream");
                return (events, Some(error.clone()));
            }
        }
    }
    (events, None)
}

pub fn text(t: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(t.into())
}

pub fn reported(unit: UsageUnit, quantity: u64) -> ProviderEvent {
    ProviderEvent::Usage(UsageQuantity {
        unit,
        quantity,
        source: UsageSource::ProviderReported,
    })
}

pub fn estimated(unit: UsageUnit, quantity: u64) -> ProviderEvent {
    ProviderEvent::Usage(UsageQuantity {
        unit,
        quantity,
        source: UsageSource::RuntimeEstimated,
    })
}

/// `data: <json>\n\n`.
pub fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// `event: <name>\ndata: <json>\n\n`.
pub fn event(name: &str, json: &str) -> String {
    format!("event: {name}\ndata: {json}\n\n")
}

/// Asserts `error`'s class and code; a failure shows `context` and the error's message.
#[track_caller]
pub fn assert_error(error: &ProviderError, class: ErrorClass, code: &str, context: &str) {
    assert_eq!(
        (error.class, error.code.as_str()),
        (class, code),
        "{context} ({})",
        error.message
    );
}

/// Asserts `error`'s message mentions `text`.
#[track_caller]
pub fn assert_mentions(error: &ProviderError, text: &str) {
    assert!(
        error.message.contains(text),
        "`{text}` not in: {}",
        error.message
    );
}

/// The published stream `name` (`tests/it/fixtures/streams/`, sources in its README), as its
/// events, each with its blank line: one HTTP chunk each when replayed.
pub fn fixture(name: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures/streams")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.split_inclusive("\n\n").map(str::to_owned).collect()
}
