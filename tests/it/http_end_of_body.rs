//! After the reply's end marker the adapter waits only briefly for the body itself to end:
//! a server that keeps the body open still has its reply finished, and loses the connection
//! instead of holding the caller's `Finished` back. (A body that ends keeps its connection:
//! see `a_finished_call_leaves_its_connection_in_the_pool`.)

use crate::common;

use std::time::Duration;

use common::adapters::{call, config, data, provider, spec, split, text, timeouts};
use common::upstream::{Step, Upstream, sse_steps};
use model_runtime::execution::FinishReason;
use model_runtime::provider::ProviderEvent;

#[tokio::test]
async fn a_body_left_open_after_the_end_marker_still_finishes() {
    let reply = [
        data(r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#),
        data(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#),
        data("[DONE]"),
    ];
    let mut steps: Vec<Step> = reply
        .iter()
        .map(|e| Step::Send(e.clone().into_bytes()))
        .collect();
    // The body never ends: no final chunk, and the server waits for the client to go.
    steps.push(Step::Stall);
    let server = Upstream::always(sse_steps(steps)).await;
    // Idle and first-byte timeouts far longer than the test's wait: only the short grace
    // after the marker can end this call.
    let long = timeouts(spec("openai", &server.base_url()), 5_000, 600_000, 600_000);
    let p = provider(&config(long));
    let (events, error) = split(common::within(call(&p)).await);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Hi"));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
    // The open body could not go back to the pool: the connection was closed.
    tokio::time::timeout(Duration::from_secs(10), server.hung_up.notified())
        .await
        .expect("the adapter closed the connection");
}

/// Gemini's reply ends with the body, after the chunk with the finish reason: a body that
/// stays open after it is whole all the same, a second (`MARKER_GRACE`) after the finish
/// reason, whatever the idle timeout.
#[tokio::test]
async fn a_gemini_body_left_open_after_the_finish_reason_still_finishes() {
    let finished = data(
        r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}"#,
    );
    let server = Upstream::always(sse_steps(vec![
        Step::Send(finished.into_bytes()),
        Step::Stall,
    ]))
    .await;
    let long = timeouts(spec("gemini", &server.base_url()), 5_000, 600_000, 600_000);
    let p = provider(&config(long));
    let started = tokio::time::Instant::now();
    let items = common::within(call(&p)).await;
    finished_hi_within_the_grace(items, started);
}

/// Bedrock's `messageStop` and no `metadata`, on a body that stays open: whole a second after
/// the stop reason, not stalled at the idle timeout.
#[tokio::test]
async fn a_bedrock_body_left_open_after_the_message_stop_still_finishes() {
    use common::eventstream::{event, steps};
    let server = Upstream::always(steps(vec![
        Step::Send(event("messageStart", r#"{"role":"assistant"}"#)),
        Step::Send(event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
        )),
        Step::Send(event("messageStop", r#"{"stopReason":"end_turn"}"#)),
        Step::Stall,
    ]))
    .await;
    let model = "anthropic.claude-3-5-sonnet-20240620-v1:0";
    let long = timeouts(
        common::adapters::bedrock_at(&server.base_url()),
        5_000,
        600_000,
        600_000,
    );
    let config = model_runtime::Config::builder()
        .provider("p", long.model(model, &["text"]))
        .policy(
            "default",
            model_runtime::config::PolicySpec::new(&[&format!("p/{model}")]),
        )
        .ability("chat", model_runtime::config::AbilitySpec::new("default"))
        .build_with_env(&common::adapters::env)
        .unwrap();
    let p = provider(&config);
    let input = model_runtime::execution::ExecutionInput {
        messages: vec![model_runtime::execution::Message::user("hi")],
        ..Default::default()
    };
    let started = tokio::time::Instant::now();
    let items = common::within(common::adapters::call_model(
        &p,
        model,
        input,
        Duration::from_secs(60),
    ))
    .await;
    finished_hi_within_the_grace(items, started);
}

/// `items` are `Hi` and `Finished(Stop)`, ended by the grace after the finish marker, well
/// before the idle timeout (ten minutes here).
fn finished_hi_within_the_grace(
    items: Vec<Result<ProviderEvent, model_runtime::provider::ProviderError>>,
    started: tokio::time::Instant,
) {
    let (events, error) = split(items);
    assert_eq!(error, None);
    assert_eq!(events[0], text("Hi"));
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finished(FinishReason::Stop))
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
}
