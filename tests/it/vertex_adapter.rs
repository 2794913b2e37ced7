//! The `vertex` adapter against a local server: Gemini models at their `publishers/google`
//! path with the Gemini stream, Claude models at `publishers/anthropic` through
//! `streamRawPredict` with Anthropic's stream and Vertex's `anthropic_version`, an access token
//! from a variable or from a file read again when it changes, and the settings it requires.

use crate::common;

use common::adapters::{data, env, provider, split, text};
use common::anthropic::{block_start, block_stop, message_delta, message_start, message_stop};
use common::upstream::{Upstream, sse, status};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::FinishReason;
use model_runtime::provider::ProviderEvent;

/// A whole Anthropic reply: `Hello`.
fn anthropic_reply_events() -> Vec<String> {
    vec![
        message_start(r#"{"input_tokens":3,"output_tokens":1}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        common::anthropic::text_delta(0, "Hello"),
        block_stop(0),
        message_delta("end_turn", 2),
        message_stop(),
    ]
}

/// Provider `p` (model `m`) of `publisher` in project `proj`, region `us-east5`, at the
/// server, as `edit` sets its credentials.
fn vertex(
    base_url: &str,
    publisher: &str,
    edit: impl FnOnce(ProviderSpec) -> ProviderSpec,
) -> Config {
    let spec = edit(
        ProviderSpec::scripted()
            .adapter("vertex")
            .base_url(base_url)
            .vertex("proj", "us-east5", publisher),
    );
    Config::builder()
        .provider("p", spec.model("m", &["text"]))
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&|name| match name {
            "VERTEX_TOKEN" => Some("ya29.token".to_owned()),
            other => env(other),
        })
        .expect("valid config")
}

#[tokio::test]
async fn gemini_models_are_called_at_their_publisher_path_with_a_bearer_token() {
    let reply = data(
        r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}"#,
    );
    let server = Upstream::always(sse(&[reply])).await;
    let config = vertex(&server.base_url(), "google", |s| {
        s.token_env("VERTEX_TOKEN")
    });
    let (events, error) = split(common::adapters::call(&provider(&config)).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Hi"));
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1/projects/proj/locations/us-east5/publishers/google/models/m:streamGenerateContent?alt=sse"
    );
    assert_eq!(request.header("authorization"), Some("Bearer ya29.token"));
    assert!(request.json()["contents"].is_array());
}

#[tokio::test]
async fn claude_models_go_through_stream_raw_predict_with_vertexs_version() {
    let server = Upstream::always(sse(&anthropic_reply_events())).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "ya29.from-file\n").unwrap();
    let config = vertex(&server.base_url(), "anthropic", |s| {
        s.token_file(file.to_str().unwrap())
    });
    let (events, error) = split(common::adapters::call(&provider(&config)).await);
    assert_eq!(error, None);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1/projects/proj/locations/us-east5/publishers/anthropic/models/m:streamRawPredict"
    );
    assert_eq!(
        request.header("authorization"),
        Some("Bearer ya29.from-file")
    );
    assert_eq!(request.header("x-api-key"), None);
    let body = request.json();
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert!(body.get("model").is_none(), "the model is in the path");
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn the_default_endpoint_is_the_regions_and_the_settings_are_checked() {
    let ok = |edit: fn(ProviderSpec) -> ProviderSpec| {
        Config::builder()
            .provider(
                "p",
                edit(ProviderSpec::scripted().adapter("vertex")).model("m", &["text"]),
            )
            .policy("default", PolicySpec::new(&["p/m"]))
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&|name| (name == "VERTEX_TOKEN").then(|| "t".to_owned()))
    };
    let config = ok(|s| {
        s.vertex("proj", "europe-west4", "google")
            .token_env("VERTEX_TOKEN")
    })
    .expect("valid");
    let model_runtime::config::AdapterConfig::Vertex(vertex) = &config.providers["p"].adapter
    else {
        panic!("a vertex adapter");
    };
    assert_eq!(
        vertex.endpoint.base_url,
        "https://europe-west4-aiplatform.googleapis.com/v1"
    );
    for (edit, says) in [
        (
            (|s: ProviderSpec| s.token_env("VERTEX_TOKEN")) as fn(ProviderSpec) -> ProviderSpec,
            "project",
        ),
        (|s| s.vertex("proj", "us-east5", "google"), "token_env"),
        (
            |s| {
                s.vertex("proj", "us-east5", "meta")
                    .token_env("VERTEX_TOKEN")
            },
            "unknown publisher",
        ),
        (
            |s| {
                s.vertex("p j", "us-east5", "google")
                    .token_env("VERTEX_TOKEN")
            },
            "project",
        ),
    ] {
        let error = ok(edit).unwrap_err().to_string();
        assert!(error.contains(says), "{error}");
    }
}

/// A Vertex token read from `token_file`, echoed by an upstream's error: blanked out, as one
/// from a variable is.
#[tokio::test]
async fn a_token_read_from_a_file_is_blanked_out_of_an_echoed_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "ya29.file-token-0123456789\n").unwrap();
    let echo = r#"{"error":{"code":400,"message":"upstream saw Bearer ya29.file-token-0123456789","status":"INVALID_ARGUMENT"}}"#;
    let server = Upstream::always(status(400, echo, &[])).await;
    let config = vertex(&server.base_url(), "google", |s| {
        s.token_file(file.to_str().unwrap())
    });
    let (_, error) = split(common::adapters::call(&provider(&config)).await);
    let error = error.expect("an error");
    assert!(
        !error.message.contains("file-token-0123456789"),
        "{}",
        error.message
    );
    assert!(error.message.contains("<redacted>"), "{}", error.message);
}
