//! A call the runtime stops reading (cancellation, the deadline, the retry budget) still
//! reports the usage it knew: the adapter hands it over when cut, and the runtime records it
//! as the attempt's usage facts before the attempt fails.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::adapters::{config, env, event, provider, spec, text};
use common::upstream::{Step, Upstream, sse_steps};
use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::execution::{
    ExecutionId, ExecutionInput, Message, UsageQuantity, UsageSource, UsageUnit,
};
use model_runtime::pb;
use model_runtime::pb::execution_event::Payload;
use model_runtime::provider::{Provider, ProviderCall, ProviderStream};

fn message_start() -> String {
    event(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    )
}

fn text_block() -> String {
    event(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    )
}

fn text_delta(text: &str) -> String {
    event(
        "content_block_delta",
        &format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{text}"}}}}"#
        ),
    )
}

/// An Anthropic upstream that sends `events` and then goes silent.
async fn stalling_after(events: &[String]) -> Upstream {
    let mut steps: Vec<Step> = events
        .iter()
        .map(|e| Step::Send(e.clone().into_bytes()))
        .collect();
    steps.push(Step::Stall);
    Upstream::always(sse_steps(steps)).await
}

fn start_call(p: &Arc<dyn Provider>) -> ProviderStream {
    p.call(ProviderCall {
        execution_id: ExecutionId::new(),
        attempt: 1,
        target_attempt: 1,
        model: "m".into(),
        input: Arc::new(ExecutionInput {
            messages: vec![Message::user("hi")],
            ..Default::default()
        }),
        deadline: tokio::time::Instant::now() + Duration::from_secs(600),
        trace: None,
    })
}

fn quantity(unit: UsageUnit, quantity: u64, source: UsageSource) -> UsageQuantity {
    UsageQuantity {
        unit,
        quantity,
        source,
    }
}

#[tokio::test]
async fn a_call_cut_after_message_start_hands_over_its_input_tokens() {
    let server = stalling_after(&[message_start()]).await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let mut stream = start_call(&p);
    // `message_start` yields no event: keep the call going until it has been read.
    let known = within(async {
        loop {
            let item = tokio::time::timeout(Duration::from_millis(20), stream.next()).await;
            assert!(item.is_err(), "no item before output: {item:?}");
            let known = stream.as_mut().unreported_usage();
            if !known.is_empty() {
                return known;
            }
        }
    })
    .await;
    assert_eq!(
        known,
        [quantity(
            UsageUnit::INPUT_TOKENS,
            25,
            UsageSource::ProviderReported
        )]
    );
}

#[tokio::test]
async fn a_call_cut_after_deltas_hands_over_input_and_estimated_output() {
    let server = stalling_after(&[
        message_start(),
        text_block(),
        text_delta("Hel"),
        text_delta("lo"),
    ])
    .await;
    let p = provider(&config(spec("anthropic", &server.base_url())));
    let mut stream = start_call(&p);
    assert_eq!(stream.next().await, Some(Ok(text("Hel"))));
    assert_eq!(stream.next().await, Some(Ok(text("lo"))));
    let expected = [
        quantity(UsageUnit::INPUT_TOKENS, 25, UsageSource::ProviderReported),
        // The provider counts output only at the end: until then it is estimated.
        quantity(UsageUnit::OUTPUT_TOKENS, 2, UsageSource::RuntimeEstimated),
    ];
    assert_eq!(stream.as_mut().unreported_usage(), expected);
    // Asking takes nothing away: the answer is the same when asked again.
    assert_eq!(stream.as_mut().unreported_usage(), expected);
    drop(stream);
    within(server.hung_up.notified()).await;
}

#[tokio::test]
async fn the_deadline_cutting_a_reply_keeps_its_usage() {
    let upstream = stalling_after(&[message_start(), text_block(), text_delta("Hel")]).await;
    let config = Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "an",
            ProviderSpec::anthropic(&upstream.base_url())
                .api_key_env("TEST_API_KEY")
                .model("claude-sonnet-4-5", &["text"]),
        )
        .policy("default", PolicySpec::new(&["an/claude-sonnet-4-5"]))
        .ability("chat", AbilitySpec::new("default"));
    let mut server = start_with(config.build_with_env(&env).unwrap()).await;
    let mut req = request("chat", "hi");
    req.deadline = Some(deadline_in(Duration::from_millis(500)));
    let events = execute(&mut server.client, req).await;

    assert_complete_sequence(&events);
    assert_eq!(
        types(&events),
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "output.text.delta",
            "usage.reported",
            "usage.reported",
            "route.attempt.failed",
            "execution.failed",
        ]
    );
    assert_eq!(
        failed_payload(&events).error.unwrap().code,
        "deadline_exceeded"
    );
    let facts = |usage: &[pb::UsageFact]| -> Vec<(String, u64, pb::UsageSource, u32)> {
        usage
            .iter()
            .map(|f| (f.unit.clone(), f.quantity, f.source(), f.attempt))
            .collect()
    };
    let expected = vec![
        (
            "input_tokens".to_owned(),
            25,
            pb::UsageSource::ProviderReported,
            1,
        ),
        (
            "output_tokens".to_owned(),
            1,
            pb::UsageSource::RuntimeEstimated,
            1,
        ),
    ];
    let reported: Vec<pb::UsageFact> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::UsageReported(u)) => u.fact.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(facts(&reported), expected);
    let execution = get(&mut server.client, &events[0].execution_id).await;
    assert_eq!(facts(&execution.usage), expected);
    assert_eq!(execution.usage[0].provider, "an");
}
