//! The `azure-openai` adapter against a local server: both URL shapes (deployments with an
//! `api-version`, and the v1 path) for chat completions and the Responses API, each way of
//! authenticating (an `api-key`, a bearer token from a variable, one from a file that is read
//! again when it changes), and Azure's content filtering, replayed from its documentation.
//! The failures it shares with every HTTP adapter are in `http_adapter_failures.rs`.

use crate::common;

use common::adapters::{KEY, assert_error, call, env, fixture, provider, split, text};
use common::upstream::{Upstream, sse, status};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{ErrorClass, FinishReason};
use model_runtime::provider::ProviderEvent;

/// A provider `p` with model `m` (a deployment, in the deployments shape): `edit` sets the
/// API, version and credentials.
fn azure(base_url: &str, edit: impl FnOnce(ProviderSpec) -> ProviderSpec) -> Config {
    let spec = edit(
        ProviderSpec::scripted()
            .adapter("azure-openai")
            .base_url(base_url),
    );
    Config::builder()
        .provider("p", spec.model("m", &["text"]))
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&|name| match name {
            "AZURE_TOKEN" => Some("entra-token".to_owned()),
            other => env(other),
        })
        .expect("valid config")
}

fn chat_reply() -> Vec<String> {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish},\"content_filter_results\":{{}}}}]}}\n\n"
        )
    };
    vec![
        chunk(r#"{"content":"Hi"}"#, "null"),
        chunk("{}", r#""stop""#),
        "data: [DONE]\n\n".to_owned(),
    ]
}

#[tokio::test]
async fn the_deployments_shape_names_the_deployment_and_the_api_version() {
    let server = Upstream::always(sse(&chat_reply())).await;
    let config = azure(&server.base_url(), |s| {
        s.api_key_env("TEST_API_KEY").api_version("2024-10-21")
    });
    let (events, error) = split(call(&provider(&config)).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Hi"));
    let request = &server.requests()[0];
    assert_eq!(
        request.path,
        "/v1/openai/deployments/m/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(request.header("api-key"), Some(KEY));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.json()["stream"], true);
}

#[tokio::test]
async fn the_v1_path_serves_the_responses_api_with_a_bearer_token() {
    let reply = [
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n".to_owned(),
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n".to_owned(),
    ];
    let server = Upstream::always(sse(&reply)).await;
    let config = azure(&server.base_url(), |s| {
        s.token_env("AZURE_TOKEN").api("responses")
    });
    let (events, error) = split(call(&provider(&config)).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Hi"));
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/openai/v1/responses");
    assert_eq!(request.header("authorization"), Some("Bearer entra-token"));
    assert_eq!(request.json()["model"], "m");
}

#[tokio::test]
async fn a_token_file_is_read_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "first-token\n").unwrap();
    let server = Upstream::always(sse(&chat_reply())).await;
    let config = azure(&server.base_url(), |s| s.token_file(file.to_str().unwrap()));
    let p = provider(&config);
    assert_eq!(split(call(&p).await).1, None);
    // Rotated: another length, so the change shows whatever the clock's resolution.
    std::fs::write(&file, "second-and-longer-token\n").unwrap();
    assert_eq!(split(call(&p).await).1, None);
    let sent: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        sent,
        ["Bearer first-token", "Bearer second-and-longer-token"]
    );

    std::fs::remove_file(&file).unwrap();
    let (_, error) = split(call(&p).await);
    let error = error.expect("an error");
    assert_error(
        &error,
        ErrorClass::Rejected,
        "unauthorized",
        "no token file",
    );
    assert!(!error.message.contains(dir.path().to_str().unwrap()));
    assert_eq!(
        server.requests().len(),
        2,
        "nothing was sent without a token"
    );
}

#[tokio::test]
async fn the_content_filter_stream_of_the_docs_finishes_as_filtered() {
    let server = Upstream::always(sse(&fixture("azure-openai-content-filter.sse"))).await;
    let config = azure(&server.base_url(), |s| s.api_key_env("TEST_API_KEY"));
    let (events, error) = split(call(&provider(&config)).await);
    assert_eq!(error, None);
    // The filter results (the opening chunk's, every chunk's) are no output; what stopped
    // the reply is noted as evidence.
    assert_eq!(
        events[..3],
        [
            text("Color"),
            text(" is light"),
            ProviderEvent::Progress("content filter: violence (medium)".into())
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::ContentFilter))
    );
}

#[tokio::test]
async fn a_prompt_the_filter_blocks_is_content_filtered() {
    let body = r#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"violence":{"filtered":true,"severity":"medium"}}}}}"#;
    let server = Upstream::always(status(400, body, &[])).await;
    let config = azure(&server.base_url(), |s| s.api_key_env("TEST_API_KEY"));
    let (_, error) = split(call(&provider(&config)).await);
    assert_error(
        &error.expect("an error"),
        ErrorClass::Rejected,
        "content_filtered",
        "blocked prompt",
    );
}

#[tokio::test]
async fn one_credential_is_required_and_only_one() {
    for edit in [
        (|s: ProviderSpec| s) as fn(ProviderSpec) -> ProviderSpec,
        |s| s.api_key_env("TEST_API_KEY").token_env("AZURE_TOKEN"),
    ] {
        let error = Config::builder()
            .provider(
                "p",
                edit(
                    ProviderSpec::scripted()
                        .adapter("azure-openai")
                        .base_url("https://x.example"),
                )
                .model("m", &["text"]),
            )
            .policy("default", PolicySpec::new(&["p/m"]))
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&|name| match name {
                "AZURE_TOKEN" => Some("t".to_owned()),
                other => env(other),
            })
            .unwrap_err()
            .to_string();
        assert!(error.contains("exactly one of `api_key_env`"), "{error}");
    }
}

/// An upstream (or a proxy before it) that echoes the request's `Authorization` header in its
/// error: a token read from `token_file` is blanked out of the attempt's error, as a key from
/// a variable is.
#[tokio::test]
async fn a_token_read_from_a_file_is_blanked_out_of_an_echoed_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "file-token-0123456789\n").unwrap();
    let echo = r#"{"error":{"message":"header was: Authorization: Bearer file-token-0123456789","type":"invalid_request_error"}}"#;
    let server = Upstream::always(status(400, echo, &[])).await;
    let config = azure(&server.base_url(), |s| s.token_file(file.to_str().unwrap()));
    let (_, error) = split(call(&provider(&config)).await);
    let error = error.expect("an error");
    assert!(
        !error.message.contains("file-token-0123456789"),
        "{}",
        error.message
    );
    assert!(error.message.contains("<redacted>"), "{}", error.message);
}
