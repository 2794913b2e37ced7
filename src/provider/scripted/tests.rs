use std::sync::Arc;

use futures_util::StreamExt;

use super::*;
use crate::config::Chunk;
use crate::execution::{
    ErrorClass, ExecutionId, ExecutionInput, Message, ReasoningPiece, UsageQuantity, UsageSource,
    UsageUnit,
};

fn call(target_attempt: u32, prompt: &str) -> ProviderCall {
    ProviderCall {
        execution_id: ExecutionId::new(),
        attempt: target_attempt,
        target_attempt,
        model: Arc::from("m"),
        input: Arc::new(ExecutionInput {
            messages: vec![Message::user(prompt)],
            ..Default::default()
        }),
        deadline: tokio::time::Instant::now() + Duration::from_secs(60),
        trace: None,
    }
}

async fn run(script: Script, call: ProviderCall) -> Vec<Result<ProviderEvent, ProviderError>> {
    let provider = ScriptedProvider::new([(Arc::from("m"), script)]);
    provider.call(call).collect().await
}

fn text(s: &str) -> Result<ProviderEvent, ProviderError> {
    Ok(ProviderEvent::TextDelta(s.into()))
}

fn usage(unit: UsageUnit, quantity: u64) -> Result<ProviderEvent, ProviderError> {
    Ok(ProviderEvent::Usage(UsageQuantity {
        unit,
        quantity,
        source: UsageSource::ProviderReported,
    }))
}

#[tokio::test]
async fn echoes_the_last_user_message_word_by_word_with_usage() {
    let events = run(Script::default(), call(1, "hello big world")).await;
    assert_eq!(
        events,
        [
            text("hello "),
            text("big "),
            text("world"),
            usage(UsageUnit::INPUT_TOKENS, 3),
            usage(UsageUnit::OUTPUT_TOKENS, 3),
            Ok(ProviderEvent::Finished(FinishReason::Stop)),
        ]
    );
}

#[tokio::test]
async fn a_fixed_reply_in_characters() {
    let script = Script {
        reply: Some("hé!".into()),
        chunk: Chunk::Char,
        ..Script::default()
    };
    let events = run(script, call(1, "ignored")).await;
    assert_eq!(&events[..3], [text("h"), text("é"), text("!")]);
}

#[tokio::test]
async fn fails_the_first_attempts_on_a_target() {
    let script = Script {
        fail_attempts: 2,
        fail_error: FailError::RateLimited,
        retry_after_ms: Some(250),
        ..Script::default()
    };
    for attempt in [1, 2] {
        let events = run(script.clone(), call(attempt, "hi")).await;
        let [Err(e)] = events.as_slice() else {
            panic!("{events:?}")
        };
        assert_eq!(
            (e.class, e.code.as_str(), e.retry_after),
            (
                ErrorClass::Retryable,
                "rate_limited",
                Some(Duration::from_millis(250))
            )
        );
    }
    let events = run(script, call(3, "hi")).await;
    assert_eq!(
        events.last(),
        Some(&Ok(ProviderEvent::Finished(FinishReason::Stop)))
    );
}

#[tokio::test]
async fn each_fail_error_has_its_class() {
    for (fail_error, class) in [
        (FailError::Unavailable, ErrorClass::Retryable),
        (FailError::Internal, ErrorClass::Retryable),
        (FailError::Rejected, ErrorClass::Rejected),
        (FailError::InvalidRequest, ErrorClass::Invalid),
        (FailError::TimeoutUnknown, ErrorClass::OutcomeUnknown),
    ] {
        let script = Script {
            fail_attempts: 1,
            fail_error,
            ..Script::default()
        };
        let events = run(script, call(1, "hi")).await;
        assert!(
            matches!(events.as_slice(), [Err(e)] if e.class == class),
            "{fail_error:?}: {events:?}"
        );
    }
}

#[tokio::test]
async fn fails_mid_stream_after_n_deltas_reporting_what_it_billed() {
    let script = Script {
        fail_after_deltas: Some(2),
        ..Script::default()
    };
    let events = run(script, call(1, "one two three four")).await;
    assert_eq!(&events[..2], [text("one "), text("two ")]);
    let usage = |unit, quantity| {
        Ok(ProviderEvent::Usage(UsageQuantity {
            unit,
            quantity,
            source: UsageSource::ProviderReported,
        }))
    };
    assert_eq!(
        &events[2..4],
        [
            usage(UsageUnit::INPUT_TOKENS, 4),
            usage(UsageUnit::OUTPUT_TOKENS, 2)
        ]
    );
    assert!(
        matches!(&events[4..], [Err(e)] if e.code == AttemptCode::Unavailable),
        "{events:?}"
    );
}

#[tokio::test]
async fn reasons_before_it_replies_or_fails() {
    let script = Script {
        reasoning: Some("hmm, yes".into()),
        ..Script::default()
    };
    let events = run(script.clone(), call(1, "ok then")).await;
    let thought = |t: &str| Ok(ProviderEvent::Reasoning(ReasoningPiece::Text, t.into()));
    assert_eq!(
        &events[..4],
        [thought("hmm, "), thought("yes"), text("ok "), text("then")]
    );
    let reasoning_tokens = events.iter().any(|e| {
        matches!(e, Ok(ProviderEvent::Usage(u)) if u.unit == UsageUnit::REASONING_TOKENS && u.quantity == 2)
    });
    assert!(reasoning_tokens, "{events:?}");
    // Reasoning commits nothing: the scripted failure before output comes after it.
    let failing = Script {
        fail_attempts: 1,
        ..script
    };
    let events = run(failing, call(1, "ok")).await;
    assert_eq!(&events[..2], [thought("hmm, "), thought("yes")]);
    // The reasoning was billed: usage comes before the failure.
    let usage: Vec<_> = events[2..5]
        .iter()
        .map(|e| match e {
            Ok(ProviderEvent::Usage(u)) => (u.unit.clone(), u.quantity),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        usage,
        [
            (UsageUnit::INPUT_TOKENS, 1),
            (UsageUnit::OUTPUT_TOKENS, 2),
            (UsageUnit::REASONING_TOKENS, 2)
        ]
    );
    assert!(matches!(&events[5..], [Err(_)]), "{events:?}");
}

#[tokio::test]
async fn emits_a_tool_call_instead_of_text() {
    let tool_call = ScriptedToolCall {
        name: "lookup".into(),
        arguments: r#"{"city":"Paris"}"#.into(),
    };
    let script = Script {
        tool_call: Some(tool_call),
        ..Script::default()
    };
    let events = run(script, call(1, "weather?")).await;
    let ProviderEvent::ToolCallStarted { name, .. } = events[0].clone().unwrap() else {
        panic!("{events:?}")
    };
    assert_eq!(name, "lookup");
    let args: String = events
        .iter()
        .filter_map(|e| match e {
            Ok(ProviderEvent::ToolCallArgumentsDelta { delta, .. }) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"city":"Paris"}"#);
    assert_eq!(
        events.last(),
        Some(&Ok(ProviderEvent::Finished(FinishReason::ToolCalls)))
    );
}

#[tokio::test(start_paused = true)]
async fn waits_as_scripted() {
    let script = Script {
        first_delta_ms: 500,
        delta_interval_ms: 100,
        ..Script::default()
    };
    let start = tokio::time::Instant::now();
    let events = run(script, call(1, "a b c")).await;
    assert_eq!(events.len(), 6);
    assert_eq!(start.elapsed(), Duration::from_millis(700));
}

#[tokio::test(start_paused = true)]
async fn a_hung_model_never_answers() {
    let script = Script {
        hang: true,
        ..Script::default()
    };
    let provider = ScriptedProvider::new([(Arc::from("m"), script)]);
    let mut stream = provider.call(call(1, "hi"));
    let waited = tokio::time::timeout(Duration::from_secs(3600), stream.next()).await;
    assert!(waited.is_err(), "answered: {waited:?}");
}

#[tokio::test]
async fn an_unknown_model_is_rejected() {
    let provider = ScriptedProvider::new([(Arc::from("other"), Script::default())]);
    let events: Vec<_> = provider.call(call(1, "hi")).collect().await;
    assert!(matches!(events.as_slice(), [Err(e)] if e.class == ErrorClass::Rejected));
}
