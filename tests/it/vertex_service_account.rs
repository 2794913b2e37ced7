//! The `vertex` adapter with a service account's key file (`service_account_file`): access
//! tokens minted with the OAuth JWT bearer grant from a local token endpoint that verifies
//! each assertion's signature and claims, cached, reused, refreshed before they expire, kept
//! through a failed refresh while still valid, and, with none valid, an attempt that fails
//! `unauthorized` before anything is sent to Vertex AI. The settings' errors name the key.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::adapters::{assert_error, data, provider, split, text};
use common::token_server::{Answer, TokenServer, key_file};
use common::upstream::{Behaviour, Step, Upstream, sse, sse_steps};
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{ErrorClass, FinishReason};
use model_runtime::provider::{Provider, ProviderEvent};

/// One Gemini chunk saying `word`, the reply's end when `last`.
fn chunk(word: &str, last: bool) -> String {
    let finish = if last {
        r#","finishReason":"STOP""#
    } else {
        ""
    };
    data(&format!(
        r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{word}"}}],"role":"model"}}{finish},"index":0}}]}}"#
    ))
}

/// A whole Gemini reply: `Hi`.
fn reply() -> Behaviour {
    sse(&[chunk("Hi", true)])
}

/// Provider `p` (Gemini model `m`) at `vertex`, with the fixture's key file and its tokens
/// from `tokens`, as `edit` adjusts it.
fn config(
    vertex: &Upstream,
    tokens: &str,
    edit: impl FnOnce(ProviderSpec) -> ProviderSpec,
) -> Config {
    let spec = ProviderSpec::scripted()
        .adapter("vertex")
        .base_url(&vertex.base_url())
        .vertex("proj", "us-east5", "google")
        .service_account_file(&key_file())
        .token_endpoint(tokens);
    Config::builder()
        .provider("p", edit(spec).model("m", &["text"]))
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&|_| None)
        .expect("valid config")
}

/// The `Authorization` each request to Vertex carried.
fn bearers(vertex: &Upstream) -> Vec<String> {
    vertex
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_owned())
        .collect()
}

/// One call that must succeed with `Hi`.
async fn call_ok(provider: &Arc<dyn Provider>) {
    let (events, error) = split(common::adapters::call(provider).await);
    assert_eq!(error, None);
    assert_eq!(events.first(), Some(&text("Hi")));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
}

#[tokio::test]
async fn the_minted_token_is_the_bearer_vertex_sees() {
    let tokens = TokenServer::start(|n| Answer::token(&format!("ya29.minted-{n}"), 3600)).await;
    let vertex = Upstream::always(reply()).await;
    let provider = provider(&config(&vertex, &tokens.url(), |s| s));
    call_ok(&provider).await;
    tokens.assert_valid_grants(1);
    assert_eq!(bearers(&vertex), ["Bearer ya29.minted-0"]);
    let path = &vertex.requests()[0].path;
    assert!(
        path.ends_with("/publishers/google/models/m:streamGenerateContent?alt=sse"),
        "{path}"
    );
}

#[tokio::test]
async fn one_token_serves_many_calls_and_concurrent_calls_share_one_request() {
    let tokens = TokenServer::start(|n| Answer::Token {
        token: format!("ya29.minted-{n}"),
        expires_in: 3600,
        // Long enough for every concurrent call to find the request in flight.
        delay: Duration::from_millis(300),
    })
    .await;
    let vertex = Upstream::always(reply()).await;
    let provider = provider(&config(&vertex, &tokens.url(), |s| s));
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let provider = provider.clone();
            tokio::spawn(async move { call_ok(&provider).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    for _ in 0..3 {
        call_ok(&provider).await;
    }
    tokens.assert_valid_grants(1);
    assert_eq!(bearers(&vertex), vec!["Bearer ya29.minted-0"; 7]);
}

#[tokio::test]
async fn a_stream_outlives_its_token_and_the_next_call_gets_a_new_one() {
    let tokens = TokenServer::start(|n| Answer::token(&format!("ya29.minted-{n}"), 2)).await;
    // The first reply takes three seconds, longer than its token lives.
    let vertex = Upstream::start(|n| match n {
        0 => sse_steps(vec![
            Step::Send(chunk("Hi", false).into_bytes()),
            Step::Sleep(Duration::from_millis(1500)),
            Step::Send(chunk(" there", false).into_bytes()),
            Step::Sleep(Duration::from_millis(1500)),
            Step::Send(chunk("!", true).into_bytes()),
        ]),
        _ => reply(),
    })
    .await;
    let provider = provider(&config(&vertex, &tokens.url(), |s| s));
    let (events, error) = split(common::adapters::call(&provider).await);
    assert_eq!(error, None);
    assert_eq!(events[..3], [text("Hi"), text(" there"), text("!")]);
    tokens.assert_valid_grants(1);
    call_ok(&provider).await;
    tokens.assert_valid_grants(2);
    assert_eq!(
        bearers(&vertex),
        ["Bearer ya29.minted-0", "Bearer ya29.minted-1"]
    );
}

/// How a call with no token to be had fails: refused by the token endpoint (a bad key: this
/// target's, `unauthorized`), or because the endpoint is away or unwell (retryable: nothing
/// is ejected for it).
#[derive(Clone, Copy)]
enum NoToken {
    Refused,
    Failed,
}

/// One call that must fail as `how` says, with nothing sent to `vertex`.
async fn call_without_token(provider: &Arc<dyn Provider>, vertex: &Upstream, how: NoToken) {
    let sent = vertex.requests().len();
    let (events, error) = split(common::adapters::call(provider).await);
    assert_eq!(events, []);
    let error = error.expect("the call fails");
    let (class, code, message) = match how {
        NoToken::Refused => (
            ErrorClass::Rejected,
            "unauthorized",
            "the service account's token endpoint refused the token request",
        ),
        NoToken::Failed => (
            ErrorClass::Retryable,
            "unavailable",
            "the service account's token request failed",
        ),
    };
    assert_error(&error, class, code, "no token");
    assert_eq!(error.message, format!("vertex provider `p`: {message}"));
    assert_eq!(vertex.requests().len(), sent, "nothing is sent to Vertex");
}

#[tokio::test]
async fn with_no_token_a_refused_request_fails_the_attempt_before_vertex() {
    for (status, how) in [(401, NoToken::Refused), (500, NoToken::Failed)] {
        let tokens = TokenServer::start(move |_| Answer::Refuse(status)).await;
        let vertex = Upstream::always(reply()).await;
        let provider = provider(&config(&vertex, &tokens.url(), |s| s));
        call_without_token(&provider, &vertex, how).await;
        // The next attempt within five seconds gets the same failure without asking again:
        // an endpoint that is down is not asked once per call, and the attempts fail over
        // at once.
        call_without_token(&provider, &vertex, how).await;
        tokens.assert_valid_grants(1);
    }
}

#[tokio::test]
async fn with_no_token_an_unreachable_or_silent_endpoint_fails_the_attempt_before_vertex() {
    let vertex = Upstream::always(reply()).await;
    // Nothing listens on port 9.
    let unreachable = provider(&config(&vertex, "http://127.0.0.1:9/token", |s| s));
    call_without_token(&unreachable, &vertex, NoToken::Failed).await;

    let tokens = TokenServer::start(|_| Answer::Hang).await;
    let silent = provider(&config(&vertex, &tokens.url(), |s| {
        common::adapters::timeouts(s, 100, 500, 500)
    }));
    let started = tokio::time::Instant::now();
    call_without_token(&silent, &vertex, NoToken::Failed).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "the request waits the first-byte timeout: {took:?}"
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_token_while_it_is_valid() {
    // Four seconds: refreshed after two. Every later request is refused.
    let tokens = TokenServer::start(|n| match n {
        0 => Answer::token("ya29.minted-0", 4),
        _ => Answer::Refuse(401),
    })
    .await;
    let vertex = Upstream::always(reply()).await;
    let provider = provider(&config(&vertex, &tokens.url(), |s| s));
    call_ok(&provider).await;
    tokio::time::sleep(Duration::from_millis(2300)).await;
    // Due: the call goes with the token it has, and the refresh runs beside it.
    call_ok(&provider).await;
    common::within(async {
        while tokens.grants().len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    tokens.assert_valid_grants(2);
    // The next try waits a while: this call asks nothing.
    call_ok(&provider).await;
    tokens.assert_valid_grants(2);
    assert_eq!(bearers(&vertex), vec!["Bearer ya29.minted-0"; 3]);
    // Once it has expired, nothing is sent without a new one (and the failure of under five
    // seconds ago is the answer).
    tokio::time::sleep(Duration::from_millis(2000)).await;
    call_without_token(&provider, &vertex, NoToken::Refused).await;
}

/// Vertex refuses a token the service account minted (401: revoked or rotated early): it is
/// forgotten, a new one minted, and the call made once more within the same attempt; a
/// second refusal is the attempt's answer.
#[tokio::test]
async fn a_token_vertex_refuses_is_minted_again_once() {
    let tokens = TokenServer::start(|n| Answer::token(&format!("ya29.minted-{n}"), 3600)).await;
    let refused = r#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#;
    let vertex = Upstream::start(move |n| match n {
        0 => common::upstream::status(401, refused, &[]),
        _ => reply(),
    })
    .await;
    let once = provider(&config(&vertex, &tokens.url(), |s| s));
    call_ok(&once).await;
    tokens.assert_valid_grants(2);
    assert_eq!(
        bearers(&vertex),
        ["Bearer ya29.minted-0", "Bearer ya29.minted-1"]
    );
    // The new token serves the next call at once.
    call_ok(&once).await;
    tokens.assert_valid_grants(2);

    // Refused twice: the second refusal is the answer.
    let tokens = TokenServer::start(|n| Answer::token(&format!("ya29.again-{n}"), 3600)).await;
    let vertex = Upstream::always(common::upstream::status(401, refused, &[])).await;
    let twice = provider(&config(&vertex, &tokens.url(), |s| s));
    let (_, error) = split(common::adapters::call(&twice).await);
    assert_error(
        &error.expect("refused twice"),
        ErrorClass::Rejected,
        "unauthorized",
        "",
    );
    assert_eq!(vertex.requests().len(), 2, "one call, and one more");
}

/// A change to a provider's settings.
type Edit<'a> = dyn Fn(ProviderSpec) -> ProviderSpec + 'a;

#[test]
fn the_service_account_settings_are_checked_and_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, "{\"type\": \"service_account\",").unwrap();
    let bad_key = dir.path().join("bad-key.json");
    let mut fields: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(key_file()).unwrap()).unwrap();
    fields["private_key"] =
        "-----BEGIN PRIVATE KEY-----\nMIIBVgIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
            .into();
    std::fs::write(&bad_key, fields.to_string()).unwrap();
    let missing = dir.path().join("missing.json");
    let load = |edit: &Edit<'_>| {
        Config::builder()
            .provider(
                "p",
                edit(
                    ProviderSpec::scripted()
                        .adapter("vertex")
                        .vertex("proj", "us-east5", "google"),
                )
                .model("m", &["text"]),
            )
            .policy("default", PolicySpec::new(&["p/m"]))
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&|name| (name == "VERTEX_TOKEN").then(|| "t".to_owned()))
    };
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let cases: Vec<(Box<Edit<'_>>, &str, String)> = vec![
        (
            Box::new(|s| s.service_account_file(&path(&missing))),
            "providers.p.service_account_file",
            format!("`{}` cannot be read", path(&missing)),
        ),
        (
            Box::new(|s| s.service_account_file(&path(&bad_json))),
            "providers.p.service_account_file",
            "is not JSON (line 1".to_owned(),
        ),
        (
            Box::new(|s| s.service_account_file(&path(&bad_key))),
            "providers.p.service_account_file",
            "has a `private_key` that is not an RSA key".to_owned(),
        ),
        (
            Box::new(|s| {
                s.service_account_file(&key_file())
                    .token_env("VERTEX_TOKEN")
            }),
            "providers.p.service_account_file",
            "`token_env` and `service_account_file` are both set".to_owned(),
        ),
        (
            Box::new(|s| s.service_account_file(&key_file()).token_file("/tmp/token")),
            "providers.p.service_account_file",
            "`token_file` and `service_account_file` are both set".to_owned(),
        ),
        (
            Box::new(|s| {
                s.token_env("VERTEX_TOKEN")
                    .token_endpoint("http://127.0.0.1:1/t")
            }),
            "providers.p.token_endpoint",
            "applies only with `service_account_file`".to_owned(),
        ),
        (
            Box::new(|s| {
                s.service_account_file(&key_file())
                    .token_endpoint("http://tokens.internal/token")
            }),
            "providers.p.token_endpoint",
            "over plain http to a host that is not this machine".to_owned(),
        ),
    ];
    for (edit, key, says) in cases {
        let error = load(&*edit).unwrap_err().to_string();
        assert!(error.starts_with(&format!("{key}: ")), "{error}");
        assert!(error.contains(&says), "`{says}` not in: {error}");
        assert!(!error.contains("MIIE"), "no key material: {error}");
    }
    let azure = Config::builder()
        .provider(
            "p",
            ProviderSpec::scripted()
                .adapter("azure-openai")
                .base_url("https://r.openai.azure.com")
                .service_account_file(&key_file())
                .model("m", &["text"]),
        )
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        azure.starts_with(
            "providers.p.service_account_file: does not apply to the `azure-openai` adapter"
        ),
        "{azure}"
    );
    // The file's `token_uri` is where requests go without `token_endpoint`.
    let config = load(&|s| s.service_account_file(&key_file())).expect("valid");
    let debug = format!("{config:?}");
    assert!(
        debug.contains("https://oauth2.googleapis.com/token"),
        "{debug}"
    );
}

/// The deadline passes while the attempt waits for its token: nothing was sent to Vertex, so
/// the attempt started nothing (`not_started`), and so did the execution, not `unknown`.
#[tokio::test]
async fn an_attempt_cut_while_its_token_is_minted_started_nothing() {
    use model_runtime::pb;
    let tokens = TokenServer::start(|_| Answer::Hang).await;
    let vertex = Upstream::always(reply()).await;
    let mut server = common::start_with(config(&vertex, &tokens.url(), |s| s)).await;
    let request = pb::ExecuteRequest {
        deadline: Some(common::deadline_in(Duration::from_millis(800))),
        ..common::request("chat", "hi")
    };
    let events = common::execute(&mut server.client, request).await;
    let error = common::failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "deadline_exceeded", "{error:?}");
    assert_eq!(error.outcome(), pb::Outcome::NotStarted, "{error:?}");
    let view = common::get(&mut server.client, &events[0].execution_id).await;
    let attempt = &view.attempts[0];
    assert!(attempt.admitted);
    assert_eq!(attempt.outcome(), pb::Outcome::NotStarted, "{attempt:?}");
    assert_eq!(
        attempt.error.as_ref().unwrap().class(),
        pb::ErrorClass::Retryable
    );
    assert!(vertex.requests().is_empty());
    server.stop().await;
}
