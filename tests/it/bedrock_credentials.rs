//! The `bedrock` adapter's keys: which source the configuration takes, and the container
//! credentials endpoint (how ECS tasks and EKS Pod Identity hand them out) against a local
//! endpoint and a fake Bedrock that checks every signature: fetched once for concurrent
//! calls, the authorization token file read at every fetch, fetched again after a stream that
//! outlived them, kept while valid when a refresh fails, and the attempt failed before
//! anything is sent once none are valid.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::adapters::{assert_error, bedrock_at, env, provider, split};
use common::eventstream::{event, reply};
use common::sigv4::assert_signed;
use common::upstream::{Behaviour, Step, Upstream, status};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec};
use model_runtime::execution::{ErrorClass, ExecutionInput, Message};
use model_runtime::provider::{Provider, ProviderError, ProviderEvent};

const MODEL: &str = "amazon.nova-pro-v1:0";

fn config_with(base_url: &str, env: &dyn Fn(&str) -> Option<String>) -> Config {
    Config::builder()
        .provider("p", bedrock_at(base_url).model(MODEL, &["text"]))
        .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(env)
        .expect("valid config")
}

/// One call of [`MODEL`] saying "hi" with a minute to spare.
async fn call_model(p: &Arc<dyn Provider>) -> Vec<Result<ProviderEvent, ProviderError>> {
    let input = ExecutionInput {
        messages: vec![Message::user("hi")],
        ..Default::default()
    };
    common::adapters::call_model(p, MODEL, input, Duration::from_secs(60)).await
}

/// A whole text reply.
fn hello() -> Vec<Vec<u8>> {
    vec![
        event("messageStart", r#"{"role":"assistant"}"#),
        event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hello"}}"#,
        ),
        event("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        event("messageStop", r#"{"stopReason":"end_turn"}"#),
        event(
            "metadata",
            r#"{"usage":{"inputTokens":3,"outputTokens":1}}"#,
        ),
    ]
}

/// The container credentials endpoint's reply: keys `n`, expiring `life` from now.
fn container_keys(n: usize, life: Duration) -> Behaviour {
    let expiration = humantime::format_rfc3339_seconds(SystemTime::now() + life);
    status(
        200,
        &format!(
            r#"{{"AccessKeyId":"ASIACONTAINER{n}","SecretAccessKey":"container-secret-{n}","Token":"container-token-{n}","Expiration":"{expiration}"}}"#
        ),
        &[],
    )
}

/// An environment naming the container endpoint at `url` and its token file `file`.
fn container_env(url: String, file: String) -> impl Fn(&str) -> Option<String> {
    move |name| match name {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI" => Some(url.clone()),
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" => Some(file.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn container_credentials_are_fetched_reused_and_refreshed_after_a_long_stream() {
    // Keys 0 live three seconds (fetched again after one and a half); keys 1 an hour.
    let keys = Upstream::start(|n| {
        container_keys(
            n,
            if n == 0 {
                Duration::from_secs(3)
            } else {
                Duration::from_secs(3600)
            },
        )
    })
    .await;
    // The first reply outlives its keys: four seconds between its events.
    let mut slow: Vec<Step> = Vec::new();
    for (i, message) in hello().into_iter().enumerate() {
        if i == 2 {
            slow.push(Step::Sleep(Duration::from_secs(4)));
        }
        slow.push(Step::Send(message));
    }
    let server = Upstream::start(move |n| {
        if n == 0 {
            common::eventstream::steps(slow.clone())
        } else {
            reply(&hello())
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "pod-identity-token-1\n").unwrap();
    let env = container_env(
        format!("{}/credentials", keys.base_url()),
        token_file.to_str().unwrap().to_owned(),
    );
    let p = provider(&config_with(&server.base_url(), &env));

    // Three calls at once while no keys are held: one fetch serves them all.
    let (a, b, c) = tokio::join!(call_model(&p), call_model(&p), call_model(&p));
    for events in [a, b, c] {
        assert_eq!(split(events).1, None);
    }
    assert_eq!(keys.requests().len(), 1);
    let asked = &keys.requests()[0];
    assert_eq!(asked.method, "GET");
    assert_eq!(asked.path, "/v1/credentials");
    assert_eq!(asked.header("authorization"), Some("pod-identity-token-1"));
    for sent in server.requests() {
        assert_signed(
            &sent,
            "ASIACONTAINER0",
            "container-secret-0",
            Some("container-token-0"),
        );
    }
    // The first stream outlived its keys and still completed; the next call fetches new
    // keys (with the token file read again) and signs with them.
    std::fs::write(&token_file, "pod-identity-token-2").unwrap();
    let (_, error) = split(call_model(&p).await);
    assert_eq!(error, None);
    assert_eq!(keys.requests().len(), 2);
    assert_eq!(
        keys.requests()[1].header("authorization"),
        Some("pod-identity-token-2")
    );
    assert_signed(
        &server.requests()[3],
        "ASIACONTAINER1",
        "container-secret-1",
        Some("container-token-1"),
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_valid_keys_and_fails_the_attempt_once_they_expire() {
    let keys = Upstream::start(|n| {
        if n == 0 {
            container_keys(0, Duration::from_secs(4))
        } else {
            status(500, r#"{"message":"agent down"}"#, &[])
        }
    })
    .await;
    let server = Upstream::always(reply(&hello())).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t").unwrap();
    let env = container_env(keys.base_url(), token_file.to_str().unwrap().to_owned());
    let p = provider(&config_with(&server.base_url(), &env));
    assert_eq!(split(call_model(&p).await).1, None);
    // Due for a refresh, which fails: the keys still valid serve the call (and the next,
    // with no new try for five seconds).
    tokio::time::sleep(Duration::from_millis(2300)).await;
    assert_eq!(split(call_model(&p).await).1, None);
    assert_eq!(split(call_model(&p).await).1, None);
    assert_eq!(keys.requests().len(), 2);
    assert_signed(
        &server.requests()[2],
        "ASIACONTAINER0",
        "container-secret-0",
        Some("container-token-0"),
    );
    // Expired, and none to be had (the endpoint is unwell, which is no bad key): the attempt
    // fails before anything is sent, retryable.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let error = split(call_model(&p).await).1.expect("an error");
    assert_error(&error, ErrorClass::Retryable, "unavailable", "expired keys");
    assert!(
        error.message.contains("container credentials endpoint"),
        "{}",
        error.message
    );
    assert_eq!(server.requests().len(), 3);

    // An endpoint nobody answers at fails the attempt the same way, at once.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/creds", closed.local_addr().unwrap());
    drop(closed);
    let env = container_env(url, token_file.to_str().unwrap().to_owned());
    let p = provider(&config_with(&server.base_url(), &env));
    let error = split(call_model(&p).await).1.expect("an error");
    assert_eq!(error.code.as_str(), "unavailable", "{}", error.message);
}

/// A provider of `server` whose keys come from the container endpoint `keys`, and the
/// directory of its token file (kept while the provider is used).
fn from_container(
    keys: &Upstream,
    server: &Upstream,
) -> (
    Arc<dyn model_runtime::provider::Provider>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "t").unwrap();
    let env = container_env(keys.base_url(), token_file.to_str().unwrap().to_owned());
    (provider(&config_with(&server.base_url(), &env)), dir)
}

/// An endpoint that refuses (403) is the credentials' own failure: `unauthorized`.
#[tokio::test]
async fn an_endpoint_that_refuses_fails_the_attempt_unauthorized() {
    let keys = Upstream::always(status(403, r#"{"message":"denied"}"#, &[])).await;
    let server = Upstream::always(reply(&hello())).await;
    let (p, _dir) = from_container(&keys, &server);
    let error = split(call_model(&p).await).1.expect("an error");
    assert_error(&error, ErrorClass::Rejected, "unauthorized", "refused");
    assert!(server.requests().is_empty());
}

/// Keys that arrive already expired are refused, with a clear error, and not fetched again
/// at every call: the next fetch waits the failure's pause.
#[tokio::test]
async fn keys_that_arrive_expired_are_refused_and_not_fetched_at_every_call() {
    let keys = Upstream::always(container_keys(0, Duration::ZERO)).await;
    let server = Upstream::always(reply(&hello())).await;
    let (p, _dir) = from_container(&keys, &server);
    for _ in 0..6 {
        let error = split(call_model(&p).await).1.expect("an error");
        assert_error(
            &error,
            ErrorClass::Retryable,
            "unavailable",
            "expired on arrival",
        );
        assert!(
            error.message.contains("already expired"),
            "{}",
            error.message
        );
    }
    assert_eq!(keys.requests().len(), 1, "fetched once, then the pause");
    assert!(server.requests().is_empty(), "nothing was signed with them");
}

#[tokio::test]
async fn credentials_are_required_and_named_when_missing() {
    let none = |_: &str| None;
    let error = Config::builder()
        .provider(
            "p",
            bedrock_at("http://127.0.0.1:9").model(MODEL, &["text"]),
        )
        .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&none)
        .unwrap_err()
        .to_string();
    assert!(error.contains("providers.p.aws_credentials"), "{error}");
    assert!(error.contains("AWS_ACCESS_KEY_ID"), "{error}");
    let error = Config::builder()
        .provider(
            "p",
            bedrock_at("http://127.0.0.1:9")
                .api_key_env("TEST_API_KEY")
                .model(MODEL, &["text"]),
        )
        .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap_err()
        .to_string();
    assert!(error.contains("providers.p.api_key_env"), "{error}");
}

#[test]
fn a_container_endpoint_over_plain_http_must_be_this_machine_or_the_agents() {
    let build = |full: &str, insecure: bool| {
        let full = full.to_owned();
        let env =
            move |name: &str| (name == "AWS_CONTAINER_CREDENTIALS_FULL_URI").then(|| full.clone());
        Config::builder()
            .provider(
                "p",
                bedrock_at("http://127.0.0.1:9")
                    .aws_credentials("container")
                    .allow_insecure_http(insecure)
                    .model(MODEL, &["text"]),
            )
            .policy("default", PolicySpec::new(&[&format!("p/{MODEL}")]))
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&env)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for fine in [
        "http://127.0.0.1:8080/creds",
        "http://localhost/creds",
        "http://169.254.170.2/v2/credentials/abc",
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
        "https://credentials.example.com/v1",
    ] {
        assert_eq!(build(fine, false), Ok(()), "{fine}");
    }
    let error = build("http://10.0.0.5/creds", false).unwrap_err();
    assert!(error.contains("providers.p.aws_credentials"), "{error}");
    assert!(error.contains("allow_insecure_http"), "{error}");
    assert_eq!(build("http://10.0.0.5/creds", true), Ok(()));
    let error = build("ftp://127.0.0.1/creds", false).unwrap_err();
    assert!(
        error.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        "{error}"
    );
}
