//! A service account's secrets go nowhere but the requests that need them: the private key,
//! each signed assertion and each access token are in no log line, no error a caller sees,
//! no `check-config` output and no `Debug` of the configuration or the provider, even when
//! the token endpoint and Vertex AI echo them back. The real binary, over real gRPC, against
//! a local token endpoint and a fake Vertex AI.

use crate::common;

use common::adapters::{data, split};
use common::leaks::{assert_no_secret, refresh_refused};
use common::token_server::{Answer, TokenServer, key_file};
use common::upstream::{Upstream, sse, status};
use model_runtime::Config;

/// The token the endpoint grants first.
const TOKEN: &str = "ya29.leak-check-access-token-0123456789";

/// A config whose provider `vertex` gets its tokens from `tokens` with the fixture's key.
fn config_toml(vertex: &Upstream, tokens: &TokenServer) -> String {
    format!(
        r#"
[providers.vertex]
adapter = "vertex"
project = "proj"
location = "us-east5"
base_url = "{}"
service_account_file = "{}"
token_endpoint = "{}"
[[providers.vertex.models]]
name = "m"
capabilities = ["text"]

[policies.default]
targets = ["vertex/m"]
max_attempts = 1

[abilities.chat]
policy = "default"
"#,
        vertex.base_url(),
        key_file(),
        tokens.url()
    )
}

/// Every secret a leak could show: the token, each assertion sent (and its signature
/// alone), and each line of the private key's base64.
fn secrets(tokens: &TokenServer) -> Vec<String> {
    let mut all = vec![TOKEN.to_owned()];
    for grant in tokens.grants() {
        let signature = grant.assertion.rsplit('.').next().unwrap().to_owned();
        all.extend([grant.assertion, signature]);
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(key_file()).unwrap()).unwrap();
    let pem = file["private_key"].as_str().unwrap();
    all.extend(
        pem.lines()
            .filter(|line| !line.starts_with("-----"))
            .map(str::to_owned),
    );
    all
}

/// A Gemini reply: `Hi`.
fn reply() -> common::upstream::Behaviour {
    sse(&[data(
        r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}]}"#,
    )])
}

#[tokio::test(flavor = "multi_thread")]
async fn no_log_error_or_config_output_of_the_binary_holds_a_secret() {
    // Three seconds: refreshed after one and a half. Every later request is refused, with
    // the assertion echoed back.
    let tokens = TokenServer::start(|n| match n {
        0 => Answer::token(TOKEN, 3),
        _ => Answer::Refuse(401),
    })
    .await;
    // Vertex first refuses the request quoting the token, then answers.
    let echo = format!(
        r#"{{"error":{{"code":400,"message":"bad request with Bearer {TOKEN}","status":"INVALID_ARGUMENT"}}}}"#
    );
    let vertex = Upstream::start(move |n| match n {
        0 => status(400, &echo, &[]),
        _ => reply(),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config_toml(&vertex, &tokens)).unwrap();
    let path = file.to_str().unwrap();
    let run = refresh_refused(path, &[]).await;
    assert_eq!(vertex.requests().len(), 2);
    tokens.assert_valid_grants(2);
    run.assert_none_holds(path, &[], &secrets(&tokens));
    let log = &run.log;
    // The warnings were logged, naming the provider and the cause.
    let refresh = log.matching("service account token refresh failed");
    assert_eq!(refresh.len(), 1, "{}", log.tail(30));
    assert!(
        refresh[0].contains("provider=vertex") && refresh[0].contains("HTTP 401 (invalid_grant)"),
        "{}",
        refresh[0]
    );
    assert_eq!(
        log.matching("service account token request failed").len(),
        1,
        "{}",
        log.tail(30)
    );
}

#[tokio::test]
async fn the_config_and_a_provider_holding_a_token_show_none_in_debug() {
    let tokens = TokenServer::start(|_| Answer::token(TOKEN, 3600)).await;
    let vertex = Upstream::always(reply()).await;
    let config = Config::from_toml(&config_toml(&vertex, &tokens)).unwrap();
    let providers =
        model_runtime::provider::Providers::from_config(&config, Default::default()).unwrap();
    let provider = providers.get("vertex").unwrap().clone();
    let (_, error) = split(common::adapters::call(&provider).await);
    assert_eq!(error, None);
    assert_eq!(
        vertex.requests()[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let secrets = secrets(&tokens);
    assert_no_secret("the config", &format!("{config:?}"), &secrets);
    let shown = format!("{provider:?}");
    assert_no_secret("the provider", &shown, &secrets);
    assert!(
        shown.contains("Bearer(<redacted>)"),
        "the token is cached: {shown}"
    );
}
