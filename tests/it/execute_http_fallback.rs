//! End to end over gRPC: an `openai` target that fails and an `anthropic` fallback that
//! succeeds, both real HTTP servers on loopback. A 503 is retryable; a revoked key, a context
//! length exceeded or a retired model is rejected by that target alone, so the next one is
//! tried at once (or the policy stops). The caller sees every attempt as evidence, the
//! anthropic reply, its usage facts, and the resolved provider and model.

use crate::common;

use std::time::Duration;

use common::adapters::{KEY, anthropic_at, env, event, openai_at};
use common::upstream::{Behaviour, Upstream, sse, status};
use common::{completed_result, execute, failed_payload, get, request, start_with, text_of};
use futures_util::StreamExt;
use model_runtime::config::{
    AbilitySpec, OnContentFilter, OnRejected, OnUnknownOutcome, PolicySpec, ProviderSpec,
};
use model_runtime::pb::execution_event::Payload;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use model_runtime::{Config, Runtime, pb, server};

fn anthropic_reply() -> Vec<String> {
    vec![
        event(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
        ),
        event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        event("ping", r#"{"type": "ping"}"#),
        event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        ),
        event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
        ),
        event(
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        ),
        event(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        ),
        event("message_stop", r#"{"type":"message_stop"}"#),
    ]
}

#[tokio::test]
async fn a_503_from_openai_falls_back_to_anthropic() {
    let openai = Upstream::always(status(
        503,
        r#"{"error":{"message":"The engine is currently overloaded","type":"server_error"}}"#,
        &[],
    ))
    .await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let config = Config::builder()
        .provider(
            "oa",
            ProviderSpec::openai(&openai.base_url())
                .api_key_env("TEST_API_KEY")
                .model("gpt-4o-mini", &["text", "streaming"]),
        )
        .provider(
            "an",
            ProviderSpec::anthropic(&anthropic.base_url())
                .api_key_env("TEST_API_KEY")
                .model("claude-sonnet-4-5", &["text", "streaming"]),
        )
        .policy(
            "default",
            PolicySpec::new(&["oa/gpt-4o-mini", "an/claude-sonnet-4-5"]).max_attempts(3),
        )
        .ability("chat", AbilitySpec::new("default").requires(&["text"]))
        .build_with_env(&env)
        .unwrap();
    let runtime = Runtime::new(config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(runtime, listener, async {
        let _ = stopped.await;
    }));

    let mut client = ModelRuntimeClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let request = pb::ExecuteRequest {
        ability: "chat".into(),
        input: Some(pb::ExecutionInput {
            messages: vec![pb::Message {
                role: pb::Role::User.into(),
                content: vec![pb::ContentPart {
                    part: Some(pb::content_part::Part::Text("Say hello".into())),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let stream = client.execute(request).await.unwrap().into_inner();
    let events: Vec<pb::ExecutionEvent> =
        tokio::time::timeout(Duration::from_secs(60), stream.collect::<Vec<_>>())
            .await
            .expect("the execution ended")
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let types: Vec<&str> = events.iter().map(|e| e.r#type.as_str()).collect();
    assert_eq!(
        types,
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "route.attempt.failed",
            "route.attempt.started",
            "output.text.delta",
            "output.text.delta",
            "usage.reported",
            "usage.reported",
            "execution.completed",
        ]
    );

    // Attempt 1: openai, 503, retryable, nothing committed, the router fell back.
    let Some(Payload::AttemptStarted(first)) = &events[2].payload else {
        panic!("{:?}", events[2])
    };
    assert_eq!(
        (first.attempt, first.provider.as_str(), first.model.as_str()),
        (1, "oa", "gpt-4o-mini")
    );
    let Some(Payload::AttemptFailed(failed)) = &events[3].payload else {
        panic!("{:?}", events[3])
    };
    let attempt = failed.attempt.as_ref().unwrap();
    let error = attempt.error.as_ref().unwrap();
    assert_eq!(error.class(), pb::ErrorClass::Retryable);
    assert_eq!(error.code, "unavailable");
    assert!(
        error.message.contains("openai provider `oa`") && error.message.contains("503"),
        "{}",
        error.message
    );
    assert!(!error.message.contains(KEY));
    assert!(!attempt.output_committed);
    assert_eq!(attempt.next_action(), pb::NextAction::Fallback);

    // Attempt 2: anthropic, streamed, with its usage facts.
    let Some(Payload::AttemptStarted(second)) = &events[4].payload else {
        panic!("{:?}", events[4])
    };
    assert_eq!(
        (
            second.attempt,
            second.provider.as_str(),
            second.model.as_str()
        ),
        (2, "an", "claude-sonnet-4-5")
    );
    let facts: Vec<(String, u64, pb::UsageSource, u32, String)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::UsageReported(u)) => u.fact.clone(),
            _ => None,
        })
        .map(|f| {
            (
                f.unit.clone(),
                f.quantity,
                f.source(),
                f.attempt,
                f.provider.clone(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            (
                "input_tokens".to_owned(),
                25,
                pb::UsageSource::ProviderReported,
                2,
                "an".to_owned()
            ),
            (
                "output_tokens".to_owned(),
                15,
                pb::UsageSource::ProviderReported,
                2,
                "an".to_owned()
            ),
        ]
    );
    let Some(Payload::Completed(done)) = &events[9].payload else {
        panic!("{:?}", events[9])
    };
    let result = done.result.as_ref().unwrap();
    assert_eq!(result.output.as_ref().unwrap().text, "Hello!");
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(
        (
            result.provider.as_str(),
            result.model.as_str(),
            result.attempt
        ),
        ("an", "claude-sonnet-4-5", 2)
    );

    // The materialized execution carries the same evidence and the resolved target.
    let execution = client
        .get_execution(pb::GetExecutionRequest {
            execution_id: events[0].execution_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(execution.state(), pb::ExecutionState::Succeeded);
    assert_eq!(
        (execution.provider.as_str(), execution.model.as_str()),
        ("an", "claude-sonnet-4-5")
    );
    let attempts: Vec<(u32, &str, bool)> = execution
        .attempts
        .iter()
        .map(|a| (a.number, a.provider.as_str(), a.error.is_some()))
        .collect();
    assert_eq!(attempts, [(1, "oa", true), (2, "an", false)]);

    // Each upstream saw exactly one request, with its own protocol's credentials.
    let sent = openai.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let sent = anthropic.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("x-api-key"), Some(KEY));

    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}

/// The openai target `oa/small` at `openai`, then the anthropic `an/large` at `anthropic`,
/// under `policy` (its targets set here).
fn rejecting_config(
    openai: &Upstream,
    anthropic: &Upstream,
    policy: impl FnOnce(PolicySpec) -> PolicySpec,
) -> Config {
    two_targets(openai_at(&openai.base_url(), "small"), anthropic, policy)
}

/// [`rejecting_config`] with the openai provider `oa` as `openai` says.
fn two_targets(
    openai: ProviderSpec,
    anthropic: &Upstream,
    policy: impl FnOnce(PolicySpec) -> PolicySpec,
) -> Config {
    Config::builder()
        .provider("oa", openai)
        .provider("an", anthropic_at(&anthropic.base_url(), "large"))
        .policy(
            "default",
            policy(PolicySpec::new(&["oa/small", "an/large"]).retries_per_target(2)),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap()
}

/// Runs one execution on `config`: its events and its view.
async fn run_once(config: Config) -> (Vec<pb::ExecutionEvent>, pb::Execution) {
    let mut server = start_with(config).await;
    let events = execute(&mut server.client, request("chat", "Say hello")).await;
    let view = get(&mut server.client, &events[0].execution_id).await;
    server.stop().await;
    (events, view)
}

#[tokio::test]
async fn a_revoked_key_on_the_first_target_falls_back_and_completes() {
    let openai = Upstream::always(status(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        &[],
    ))
    .await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (events, view) = run_once(rejecting_config(&openai, &anthropic, |p| p)).await;

    assert_eq!(completed_result(&events).provider, "an");
    assert_eq!(text_of(&events), "Hello!");
    assert_eq!(view.attempts.len(), 2);
    let error = view.attempts[0].error.as_ref().unwrap();
    assert_eq!(
        (error.class(), error.code.as_str()),
        (pb::ErrorClass::Rejected, "unauthorized")
    );
    assert_eq!(view.attempts[0].next_action(), pb::NextAction::Fallback);
    // The policy retries a target twice, but never one that rejected the request.
    assert_eq!(openai.requests().len(), 1);
}

#[tokio::test]
async fn a_context_length_error_falls_back_to_a_larger_window() {
    let openai = Upstream::always(status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        &[],
    ))
    .await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (events, view) = run_once(rejecting_config(&openai, &anthropic, |p| p)).await;

    assert_eq!(completed_result(&events).model, "large");
    let error = view.attempts[0].error.as_ref().unwrap();
    assert_eq!(
        (error.class(), error.code.as_str()),
        (pb::ErrorClass::Rejected, "invalid_request")
    );
    assert!(
        error.message.contains("maximum context length"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn on_rejected_stop_ends_at_the_first_rejection() {
    let openai = Upstream::always(status(
        404,
        r#"{"error":{"message":"The model `small` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#,
        &[],
    ))
    .await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let config = rejecting_config(&openai, &anthropic, |p| p.on_rejected(OnRejected::Stop));
    let (events, view) = run_once(config).await;

    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "rejected");
    assert_eq!(error.last_attempt_error.unwrap().code, "not_found");
    assert_eq!(view.attempts.len(), 1);
    assert!(anthropic.requests().is_empty());
}

/// An openai target that takes the request and never answers (its outcome unknown, after a
/// 300 ms first-byte timeout), then the anthropic one, under a policy that would retry a
/// target twice (four attempts in all); the openai provider's `on_unknown_outcome` is `mode`.
fn silent_config(openai: &Upstream, anthropic: &Upstream, mode: OnUnknownOutcome) -> Config {
    let silent = openai_at(&openai.base_url(), "small")
        .timeouts(
            Duration::from_millis(200),
            Duration::from_millis(300),
            Duration::from_millis(300),
        )
        .on_unknown_outcome(mode);
    two_targets(silent, anthropic, |p| p.max_attempts(4))
}

/// With `on_unknown_outcome = "fallback"` a silent target costs one timeout: the next target
/// is tried at once, though the policy would retry it, and the evidence says the first
/// attempt's outcome is unknown and that routing moved on. With `"retry"` the same target is
/// asked again (three requests); with `"stop"`, the unknown outcome is the answer.
#[tokio::test]
async fn a_silent_target_is_left_at_once_when_unknown_outcomes_fall_back() {
    let openai = Upstream::always(Behaviour::Hang).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (events, view) = run_once(silent_config(
        &openai,
        &anthropic,
        OnUnknownOutcome::Fallback,
    ))
    .await;

    assert_eq!(completed_result(&events).provider, "an");
    assert_eq!(text_of(&events), "Hello!");
    assert_eq!(
        openai.requests().len(),
        1,
        "the silent target is asked once"
    );
    assert_eq!(view.attempts.len(), 2);
    let first = &view.attempts[0];
    let error = first.error.as_ref().unwrap();
    assert_eq!(
        (error.class(), error.code.as_str()),
        (pb::ErrorClass::OutcomeUnknown, "timeout")
    );
    assert_eq!(first.outcome(), pb::Outcome::Unknown, "it may still run");
    assert_eq!(first.next_action(), pb::NextAction::Fallback);

    let openai = Upstream::always(Behaviour::Hang).await;
    let (events, _) = run_once(silent_config(&openai, &anthropic, OnUnknownOutcome::Retry)).await;
    assert_eq!(completed_result(&events).provider, "an");
    assert_eq!(
        openai.requests().len(),
        3,
        "asked again twice, as the policy says"
    );

    let openai = Upstream::always(Behaviour::Hang).await;
    let (events, view) = run_once(silent_config(&openai, &anthropic, OnUnknownOutcome::Stop)).await;
    assert_eq!(
        failed_payload(&events).error.unwrap().code,
        "outcome_unknown"
    );
    assert_eq!(view.attempts.len(), 1);
    assert_eq!(openai.requests().len(), 1);
}

/// A refusal on a content policy (OpenAI's `content_policy_violation`, a 400) ends the
/// execution by default: routing around a safety decision to a laxer target is not the
/// runtime's to make. With `on_content_filter = "fallback"` the next target serves it.
#[tokio::test]
async fn a_content_policy_refusal_stops_unless_the_policy_falls_back() {
    let refusal = r#"{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}"#;
    let openai = Upstream::always(status(400, refusal, &[])).await;
    let anthropic = Upstream::always(sse(&anthropic_reply())).await;
    let (events, view) = run_once(rejecting_config(&openai, &anthropic, |p| p)).await;

    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "content_filtered");
    let last = error.last_attempt_error.unwrap();
    assert_eq!(
        (last.class(), last.code.as_str()),
        (pb::ErrorClass::Rejected, "content_filtered")
    );
    assert!(last.message.contains("safety system"), "{}", last.message);
    assert_eq!(view.attempts.len(), 1);
    assert_eq!(view.attempts[0].next_action(), pb::NextAction::Stop);
    assert!(anthropic.requests().is_empty(), "not routed around");

    let config = rejecting_config(&openai, &anthropic, |p| {
        p.on_content_filter(OnContentFilter::Fallback)
    });
    let (events, view) = run_once(config).await;
    assert_eq!(completed_result(&events).provider, "an");
    assert_eq!(view.attempts[0].next_action(), pb::NextAction::Fallback);
    assert_eq!(
        openai.requests().len(),
        2,
        "once per execution, never retried"
    );
}
