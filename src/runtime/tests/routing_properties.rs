//! Routing invariants under random scripts of failures, delays, budgets and capability sets,
//! run through the whole embedded runtime in paused tokio time.

use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use tokio::time::Instant;

use crate::config::{
    AbilitySpec, Config, FailError, OnUnknownOutcome, PolicySpec, ProviderSpec, Script,
};
use crate::execution::{
    Delivery, ErrorClass, ErrorCode, EventPayload, ExecuteRequest, ExecutionInput, ExecutionState,
    Message,
};
use crate::routing::plan;
use crate::runtime::Runtime;

const CAPABILITIES: [&str; 3] = ["text", "vision", "tools"];
const FAIL_ERRORS: [FailError; 6] = [
    FailError::Unavailable,
    FailError::RateLimited,
    FailError::Rejected,
    FailError::InvalidRequest,
    FailError::TimeoutUnknown,
    FailError::Internal,
];
const UNKNOWN: [OnUnknownOutcome; 3] = [
    OnUnknownOutcome::Stop,
    OnUnknownOutcome::Retry,
    OnUnknownOutcome::Fallback,
];

#[derive(Debug, Clone)]
struct TargetScript {
    capabilities: Vec<usize>,
    fail_attempts: u32,
    fail_error: usize,
    fail_after_deltas: Option<u32>,
    first_delta_ms: u64,
    hang: bool,
    retry_after_ms: u64,
}

#[derive(Debug, Clone)]
struct Case {
    targets: Vec<TargetScript>,
    policy_max_attempts: u32,
    retries_per_target: u32,
    retry_budget_ms: u64,
    /// The policy's `min_attempt_time`, in quarters of its retry budget.
    min_attempt_quarters: u64,
    backoff_ms: u64,
    request_max_attempts: Option<u32>,
    allow_fallback: Option<bool>,
    required: Vec<usize>,
    deadline_ms: u64,
    /// The provider's `on_unknown_outcome`, an index of [`UNKNOWN`].
    unknown: usize,
    /// Whether the request asks for buffered delivery.
    buffered: bool,
}

fn target() -> impl Strategy<Value = TargetScript> {
    (
        prop::collection::vec(0..3usize, 0..3),
        0..4u32,
        0..6usize,
        prop::option::weighted(0.2, 0..3u32),
        0..300u64,
        prop::bool::weighted(0.1),
        0..2000u64,
    )
        .prop_map(
            |(
                capabilities,
                fail_attempts,
                fail_error,
                fail_after_deltas,
                first_delta_ms,
                hang,
                retry_after_ms,
            )| {
                TargetScript {
                    capabilities,
                    fail_attempts,
                    fail_error,
                    fail_after_deltas,
                    first_delta_ms,
                    hang,
                    retry_after_ms,
                }
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(target(), 1..5),
        1..7u32,
        0..3u32,
        50..3000u64,
        0..4u64,
        1..200u64,
        prop::option::of(1..8u32),
        prop::option::of(any::<bool>()),
        prop::collection::vec(0..3usize, 0..2),
        50..5000u64,
        0..UNKNOWN.len(),
        any::<bool>(),
    )
        .prop_map(
            |(
                targets,
                policy_max_attempts,
                retries_per_target,
                retry_budget_ms,
                min_attempt_quarters,
                backoff_ms,
                request_max_attempts,
                allow_fallback,
                required,
                deadline_ms,
                unknown,
                buffered,
            )| Case {
                targets,
                policy_max_attempts,
                retries_per_target,
                retry_budget_ms,
                min_attempt_quarters,
                backoff_ms,
                request_max_attempts,
                allow_fallback,
                required,
                deadline_ms,
                unknown,
                buffered,
            },
        )
}

fn config(case: &Case) -> Config {
    let mut provider = ProviderSpec::scripted()
        .max_concurrency(8)
        .queue_capacity(8)
        .on_unknown_outcome(UNKNOWN[case.unknown]);
    for (i, t) in case.targets.iter().enumerate() {
        let mut caps: Vec<&str> = vec!["text"];
        caps.extend(t.capabilities.iter().map(|c| CAPABILITIES[*c]));
        caps.dedup();
        let fail_error = FAIL_ERRORS[t.fail_error];
        let script = Script {
            fail_attempts: t.fail_attempts,
            fail_error,
            first_delta_ms: t.first_delta_ms,
            hang: t.hang,
            retry_after_ms: (fail_error == FailError::RateLimited).then_some(t.retry_after_ms),
            fail_after_deltas: t.fail_after_deltas,
            ..Script::default()
        };
        provider = provider.scripted_model(&format!("m{i}"), &caps, script);
    }
    let targets: Vec<String> = (0..case.targets.len()).map(|i| format!("p/m{i}")).collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    Config::builder()
        .max_deadline(Duration::from_secs(3600))
        .provider("p", provider)
        .policy(
            "main",
            PolicySpec::new(&targets)
                .max_attempts(case.policy_max_attempts)
                .retries_per_target(case.retries_per_target)
                .retry_budget(Duration::from_millis(case.retry_budget_ms))
                .min_attempt_time(Duration::from_millis(
                    case.retry_budget_ms * case.min_attempt_quarters / 4,
                ))
                .backoff(Duration::from_millis(case.backoff_ms)),
        )
        .ability("chat", AbilitySpec::new("main"))
        .build()
        .unwrap()
}

fn request(case: &Case) -> ExecuteRequest {
    ExecuteRequest {
        ability: "chat".into(),
        capabilities: case
            .required
            .iter()
            .map(|c| CAPABILITIES[*c].to_owned())
            .collect(),
        input: ExecutionInput {
            messages: vec![Message::user("one two three four")],
            ..Default::default()
        },
        deadline: Some(SystemTime::now() + Duration::from_millis(case.deadline_ms)),
        max_attempts: case.request_max_attempts,
        allow_fallback: case.allow_fallback,
        delivery: case.buffered.then_some(Delivery::Buffered),
        ..Default::default()
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one property run: the case driven to its end, then each property checked on its record"
)]
fn check(case: Case) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let config = config(&case);
        let request = request(&case);
        let runtime = Runtime::new(config.clone()).unwrap();
        let started = Instant::now();
        let (view, events) = super::finish(&runtime, request.clone()).await;
        let elapsed = started.elapsed();

        // Exactly one terminal event, last; gap-free sequences.
        prop_assert!(view.state.is_terminal());
        prop_assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
        prop_assert!(events.last().unwrap().is_terminal());
        for (i, e) in events.iter().enumerate() {
            prop_assert_eq!(e.sequence, i as u64 + 1);
        }

        // The plan is the policy's order, filtered by capability, and deterministic.
        let policy = &config.policies["main"];
        let mut required: std::collections::BTreeSet<String> =
            config.abilities["chat"].requires.clone();
        required.extend(request.capabilities.iter().cloned());
        let again = plan(&config, policy, &required);
        let planned = view.plan.clone().unwrap();
        prop_assert_eq!(&*planned, &again);
        let kept: Vec<String> = planned.kept().map(|t| t.model.to_string()).collect();

        // Attempts stay within the effective maximum, only on kept targets, in plan order.
        let effective = case
            .request_max_attempts
            .map_or(case.policy_max_attempts, |r| {
                r.min(case.policy_max_attempts)
            });
        prop_assert!(
            view.attempts.len() as u32 <= effective,
            "{} attempts > {}",
            view.attempts.len(),
            effective
        );
        let mut last_index = 0;
        for a in &view.attempts {
            let index = kept.iter().position(|m| **m == *a.model);
            prop_assert!(index.is_some(), "attempt on a filtered target {}", a.model);
            let index = index.unwrap();
            prop_assert!(index >= last_index, "went back in the plan");
            last_index = index;
        }
        // A target that rejected the request is not tried again; an invalid request ends
        // the execution.
        for pair in view.attempts.windows(2) {
            let class = pair[0].error.as_ref().map(|e| e.class);
            prop_assert!(
                !(class == Some(ErrorClass::Rejected) && pair[0].model == pair[1].model),
                "a rejecting target was retried"
            );
            prop_assert!(
                class != Some(ErrorClass::Invalid),
                "an attempt followed an invalid request"
            );
            // An unknown outcome stops, or under "fallback" moves on from its target.
            let unknown = class == Some(ErrorClass::OutcomeUnknown);
            let mode = UNKNOWN[case.unknown];
            prop_assert!(
                !(unknown && mode == OnUnknownOutcome::Stop),
                "an attempt followed an unknown outcome under \"stop\""
            );
            prop_assert!(
                !(unknown && mode == OnUnknownOutcome::Fallback && pair[0].model == pair[1].model),
                "a silent target was tried again under \"fallback\""
            );
        }
        if case.allow_fallback == Some(false) {
            prop_assert!(
                view.attempts.len() <= 1,
                "allow_fallback=false made {} attempts",
                view.attempts.len()
            );
        }

        // Nothing is attempted after output was committed.
        let first_output = events.iter().position(|e| e.payload.commits_output());
        if let Some(first) = first_output {
            let restarted = events[first..]
                .iter()
                .any(|e| matches!(e.payload, EventPayload::AttemptStarted { .. }));
            prop_assert!(!restarted, "an attempt started after output was committed");
            // A failure after output keeps the output as evidence, never as a result.
            if view.state != ExecutionState::Succeeded {
                prop_assert!(view.result.is_none());
                prop_assert!(
                    !view.partial_output.is_empty(),
                    "committed output was dropped"
                );
                let code = view.error.as_ref().unwrap().code;
                prop_assert!(
                    matches!(
                        code,
                        ErrorCode::OutputInterrupted | ErrorCode::DeadlineExceeded
                    ),
                    "{:?} after committed output",
                    code
                );
            }
        }

        // Under buffered delivery output is exposed only with the completion: the output
        // events, all of the attempt that succeeded, come together just before it.
        if case.buffered {
            let outputs: Vec<usize> = (0..events.len())
                .filter(|i| events[*i].payload.is_output())
                .collect();
            if view.state == ExecutionState::Succeeded {
                let end = events.len() - 1;
                prop_assert!(
                    outputs
                        .iter()
                        .enumerate()
                        .all(|(n, i)| *i == end - outputs.len() + n),
                    "buffered output was exposed before the completion"
                );
            } else {
                prop_assert!(outputs.is_empty(), "a failed attempt's output was exposed");
            }
            prop_assert!(
                view.attempts
                    .iter()
                    .all(|a| a.error.is_none() || !a.output_committed),
                "a failed attempt committed output"
            );
        }

        // The deadline bounds everything. The retry budget bounds trying, not an attempt in
        // flight: without output, the run ends within the budget plus the longest a scripted
        // attempt takes to fail (its first-delta delay), unless a target hangs (to one
        // scheduling tick).
        let tick = Duration::from_millis(1);
        let deadline = Duration::from_millis(case.deadline_ms);
        prop_assert!(
            elapsed <= deadline + tick,
            "took {:?}, deadline {:?}",
            elapsed,
            deadline
        );
        let hangs = case.targets.iter().any(|t| t.hang);
        if first_output.is_none() && !hangs {
            let slowest = case.targets.iter().map(|t| t.first_delta_ms).max();
            let budget = Duration::from_millis(case.retry_budget_ms + slowest.unwrap_or_default());
            let bound = budget.min(deadline) + tick;
            prop_assert!(
                elapsed <= bound,
                "took {:?} without output, bound {:?}",
                elapsed,
                bound
            );
        }

        // Permits all returned.
        let provider = &runtime.metadata().providers[0];
        prop_assert_eq!((provider.in_flight, provider.queued), (0, 0));
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn routing_invariants_hold_for_random_scripts(case in case()) {
        check(case)?;
    }
}
