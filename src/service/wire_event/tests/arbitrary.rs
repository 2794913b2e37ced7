//! The hand-written encoding against prost's on arbitrary events: every payload kind with
//! every field set or left empty at random, unicode and control characters, empty and long
//! strings, maps of labels, extreme numbers and times. The bytes must decode, with prost, to
//! exactly the message prost builds from the same event, and `encoded_len` must be their length.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;
use crate::execution::{
    Acceptance, AttemptCode, AttemptError, AttemptRecord, AttemptStart, Delivery, EffectiveLimits,
    Ejection, ErrorClass, ErrorCode, Event, ExecutionError, ExecutionFailure, ExecutionId,
    ExecutionResult, ExecutionState, FinishReason, NextAction, Outcome, Output, PlanTarget,
    Priority, RoutingPlan, ToolCall, ToolCallStart, UsageFact, UsageSource, UsageUnit,
};

/// Empty, short arbitrary unicode (control characters included), or long.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), any::<String>(), "\\PC{100,700}",]
}

fn name() -> impl Strategy<Value = Arc<str>> {
    text().prop_map(Arc::from)
}

fn time() -> impl Strategy<Value = SystemTime> {
    (any::<bool>(), 0..100_000_000_000u64, 0..1_000_000_000u32).prop_map(|(before, secs, nanos)| {
        let offset = Duration::new(secs, nanos);
        if before {
            SystemTime::UNIX_EPOCH - offset
        } else {
            SystemTime::UNIX_EPOCH + offset
        }
    })
}

fn duration() -> impl Strategy<Value = Duration> {
    (0..1_000_000_000_000u64, 0..1_000_000_000u32)
        .prop_map(|(secs, nanos)| Duration::new(secs, nanos))
}

fn limits() -> impl Strategy<Value = EffectiveLimits> {
    (
        time(),
        any::<u32>(),
        any::<bool>(),
        duration(),
        prop::sample::select(&[Delivery::Streamed, Delivery::Buffered][..]),
        prop::sample::select(&Priority::ALL[..]),
    )
        .prop_map(
            |(deadline, max_attempts, allow_fallback, retry_budget, delivery, priority)| {
                EffectiveLimits {
                    deadline,
                    max_attempts,
                    allow_fallback,
                    retry_budget,
                    delivery,
                    priority,
                }
            },
        )
}

fn target() -> impl Strategy<Value = PlanTarget> {
    (
        name(),
        name(),
        any::<bool>(),
        prop::option::of(text()),
        prop::collection::vec(text(), 0..3),
        prop::option::of((text(), prop::option::of(time()))),
    )
        .prop_map(
            |(provider, model, kept, reason, missing_capabilities, ejected)| PlanTarget {
                provider,
                model,
                kept,
                reason,
                missing_capabilities,
                ejected: ejected.map(|(reason, until)| Ejection { reason, until }),
            },
        )
}

fn plan() -> impl Strategy<Value = RoutingPlan> {
    (
        name(),
        prop::collection::vec(text(), 0..4),
        prop::collection::vec(target(), 0..4),
        prop::option::of(text()),
        any::<bool>(),
    )
        .prop_map(
            |(policy, required_capabilities, targets, ended, tried_anyway)| RoutingPlan {
                policy,
                required_capabilities,
                targets,
                ended_before_routing: ended.map(Into::into),
                tried_anyway,
            },
        )
}

fn source() -> impl Strategy<Value = UsageSource> {
    prop_oneof![
        Just(UsageSource::ProviderReported),
        Just(UsageSource::RuntimeMeasured),
        Just(UsageSource::RuntimeEstimated),
    ]
}

fn usage() -> impl Strategy<Value = UsageFact> {
    (
        text(),
        any::<u64>(),
        source(),
        any::<u32>(),
        name(),
        name(),
        prop::collection::btree_map(text(), text(), 0..4),
    )
        .prop_map(
            |(unit, quantity, source, attempt, provider, model, labels)| UsageFact {
                unit: UsageUnit::new(unit),
                quantity,
                source,
                attempt,
                provider,
                model,
                labels: Arc::new(labels.into_iter().collect::<BTreeMap<_, _>>()),
                position: 0,
            },
        )
}

fn tool_call() -> impl Strategy<Value = ToolCall> {
    (text(), text(), text()).prop_map(|(id, name, arguments_json)| ToolCall {
        id,
        name,
        arguments_json,
    })
}

fn reasoning() -> impl Strategy<Value = Reasoning> {
    (text(), text(), text()).prop_map(|(text, signature, redacted)| Reasoning {
        text,
        signature,
        redacted,
    })
}

fn output() -> impl Strategy<Value = Output> {
    (
        text(),
        prop::collection::vec(tool_call(), 0..3),
        prop::collection::vec(reasoning(), 0..3),
    )
        .prop_map(|(text, tool_calls, reasoning)| Output {
            text,
            tool_calls,
            reasoning,
        })
}

fn finish_reason() -> impl Strategy<Value = FinishReason> {
    prop_oneof![
        Just(FinishReason::Stop),
        Just(FinishReason::Length),
        Just(FinishReason::ToolCalls),
        Just(FinishReason::ContentFilter),
        Just(FinishReason::Refusal),
        Just(FinishReason::Other),
    ]
}

fn result() -> impl Strategy<Value = ExecutionResult> {
    (output(), finish_reason(), name(), name(), any::<u32>()).prop_map(
        |(output, finish_reason, provider, model, attempt)| ExecutionResult {
            output,
            finish_reason,
            provider,
            model,
            attempt,
        },
    )
}

fn attempt_error() -> impl Strategy<Value = AttemptError> {
    (
        prop::sample::select(
            &[
                ErrorClass::Retryable,
                ErrorClass::Rejected,
                ErrorClass::Invalid,
                ErrorClass::OutcomeUnknown,
            ][..],
        ),
        prop::sample::select(&AttemptCode::ALL[..]),
        text(),
        prop::option::of(duration()),
    )
        .prop_map(|(class, code, message, retry_after)| AttemptError {
            class,
            code,
            message,
            retry_after,
        })
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop::sample::select(
        &[
            Outcome::NotStarted,
            Outcome::Failed,
            Outcome::Unknown,
            Outcome::Completed,
        ][..],
    )
}

fn attempt_record() -> impl Strategy<Value = AttemptRecord> {
    (
        (any::<u32>(), name(), name(), time()),
        prop::option::of(duration()),
        prop::option::of(attempt_error()),
        any::<bool>(),
        prop::option::of(outcome()),
        prop::option::of(prop::sample::select(
            &[
                NextAction::RetrySameTarget,
                NextAction::Fallback,
                NextAction::Stop,
            ][..],
        )),
        (any::<bool>(), output()),
    )
        .prop_map(
            |(
                (number, provider, model, started_at),
                duration,
                error,
                output_committed,
                outcome,
                next_action,
                (admitted, held_output),
            )| AttemptRecord {
                number,
                provider,
                model,
                started_at,
                duration,
                error,
                output_committed,
                outcome,
                next_action,
                admitted,
                held_output,
            },
        )
}

fn failure() -> impl Strategy<Value = ExecutionFailure> {
    (
        prop::sample::select(
            &[
                ErrorCode::NoCapableTarget,
                ErrorCode::AttemptsExhausted,
                ErrorCode::RetryBudgetExhausted,
                ErrorCode::DeadlineExceeded,
                ErrorCode::OutputInterrupted,
                ErrorCode::OutputTooLarge,
                ErrorCode::Rejected,
                ErrorCode::InvalidRequest,
                ErrorCode::OutcomeUnknown,
                ErrorCode::Cancelled,
                ErrorCode::InternalError,
            ][..],
        ),
        text(),
        outcome(),
        prop::option::of(attempt_error()),
        output(),
        prop::option::of(text()),
    )
        .prop_map(
            |(code, message, outcome, last_attempt_error, partial_output, cancel_reason)| {
                ExecutionFailure {
                    error: ExecutionError {
                        code,
                        message,
                        outcome,
                        last_attempt_error,
                    },
                    partial_output,
                    cancel_reason,
                }
            },
        )
}

fn payload() -> impl Strategy<Value = EventPayload> {
    prop_oneof![
        (name(), name(), limits()).prop_map(|(ability, policy, limits)| {
            EventPayload::Accepted(Arc::new(Acceptance {
                ability,
                policy,
                limits,
            }))
        }),
        plan().prop_map(|plan| EventPayload::Routing(Arc::new(plan))),
        (any::<u32>(), name(), name(), time()).prop_map(
            |(attempt, provider, model, started_at)| {
                EventPayload::AttemptStarted(Arc::new(AttemptStart {
                    attempt,
                    provider,
                    model,
                    started_at,
                }))
            }
        ),
        attempt_record().prop_map(|record| EventPayload::AttemptFailed(Arc::new(record))),
        (any::<u32>(), text()).prop_map(|(attempt, text)| EventPayload::TextDelta {
            attempt,
            text: text.into()
        }),
        (any::<u32>(), any::<u32>(), text(), text()).prop_map(|(attempt, index, id, name)| {
            EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
                attempt,
                index,
                id,
                name,
            }))
        }),
        (any::<u32>(), any::<u32>(), text()).prop_map(|(attempt, index, delta)| {
            EventPayload::ToolCallArgumentsDelta {
                attempt,
                index,
                delta: delta.into(),
            }
        }),
        (
            any::<u32>(),
            prop::sample::select(
                &[
                    ReasoningPiece::Text,
                    ReasoningPiece::Signature,
                    ReasoningPiece::Redacted
                ][..]
            ),
            text()
        )
            .prop_map(|(attempt, piece, text)| EventPayload::ReasoningDelta {
                attempt,
                piece,
                text: text.into(),
            }),
        (any::<u32>(), text()).prop_map(|(attempt, message)| EventPayload::Progress {
            attempt,
            message: message.into()
        }),
        usage().prop_map(|usage| EventPayload::Usage(Arc::new(usage))),
        result().prop_map(|result| EventPayload::Completed(Arc::new(result))),
        failure().prop_map(|failure| EventPayload::Failed(Arc::new(failure))),
    ]
}

fn state() -> impl Strategy<Value = ExecutionState> {
    prop::sample::select(
        &[
            ExecutionState::Accepted,
            ExecutionState::Routing,
            ExecutionState::Running,
            ExecutionState::Succeeded,
            ExecutionState::Failed,
            ExecutionState::Cancelled,
        ][..],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hand_written_bytes_decode_to_the_message_prost_builds(
        payload in payload(),
        sequence in any::<u64>(),
        state in state(),
        time in time(),
    ) {
        let execution = ExecutionId::new();
        let event = Event {
            sequence,
            time,
            state,
            payload,
        };
        let id: Arc<str> = execution.to_text().into();
        let wire = WireEvent::new(id, WireTime::of(time), event.clone());
        let bytes = wire.encode_to_vec();
        prop_assert_eq!(bytes.len(), wire.encoded_len());
        let decoded = pb::ExecutionEvent::decode(bytes.as_slice());
        prop_assert!(decoded.is_ok(), "{:?}", decoded);
        prop_assert_eq!(decoded.ok(), Some(encode::event(execution, &event)));
    }
}
