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
