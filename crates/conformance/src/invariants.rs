//! The rules every execution the kit saw must hold, whatever its case: sequences, terminal
//! events, state transitions, the commit rule, the resolved target, usage facts and error
//! codes; and the replay check (a `Watch` from the start gives the events the caller saw).

use crate::observe::{Ctx, Run, exposes_output};
use crate::pb::execution_event::Payload;
use crate::pb::{self, ExecutionState as S};
use crate::verdict::Verdict;

/// The case name invariant verdicts carry.
pub const CASE: &str = "every execution";

/// The codes ERR-4 lists.
pub const CODES: &[&str] = &[
    "no_capable_target",
    "no_healthy_target",
    "attempts_exhausted",
    "retry_budget_exhausted",
    "deadline_exceeded",
    "output_interrupted",
    "output_too_large",
    "rejected",
    "invalid_request",
    "content_filtered",
    "outcome_unknown",
    "cancelled",
    "internal_error",
];

/// Words that name money: no usage fact may carry one (USAGE-4).
const MONEY: &[&str] = &[
    "price", "cost", "usd", "eur", "currency", "amount", "dollar",
];

/// One invariant over one run: `Ok(true)` it held and the run exercised it, `Ok(false)` the
/// run had nothing it applies to (no output, no usage fact, no failure), `Err` why it broke.
type Check = fn(&Run) -> Result<bool, String>;

const CHECKS: &[(&str, Check)] = &[
    ("EXEC-1", one_execution),
    ("EXEC-2", gap_free),
    ("EXEC-3", complete_events),
    ("EXEC-4", one_terminal),
    ("STATE-1", transitions),
    ("STATE-2", succeeded_from_running),
    ("STATE-3", never_failed_from_accepted),
    ("COMMIT-2", no_attempt_after_output),
    ("ROUTE-2", resolved_target),
    ("USAGE-1", facts_complete),
    ("USAGE-4", facts_unpriced),
    ("ROLE-2", facts_unpriced),
    ("ROLE-1", labels_copied),
    ("ERR-4", stable_codes),
];

/// The rules the invariants conclude about.
pub fn rules() -> impl Iterator<Item = &'static str> {
    CHECKS.iter().map(|(rule, _)| *rule).chain(["EXEC-5"])
}

/// The invariants' verdicts over every run `ctx` kept, and the replay of each.
pub fn check(ctx: &Ctx) -> Vec<Verdict> {
    let runs: Vec<Run> = ctx
        .runs()
        .into_iter()
        .filter(|r| !r.events.is_empty())
        .collect();
    let mut verdicts = Vec::new();
    for (rule, check) in CHECKS {
        let mut applied = false;
        let mut failed = None;
        for run in &runs {
            match check(run) {
                Ok(exercised) => applied |= exercised,
                Err(why) => {
                    failed = Some((run, why));
                    break;
                }
            }
        }
        verdicts.push(match failed {
            Some((run, why)) => Verdict::fail(
                CASE,
                rule,
                format!("case {}: {why}", run.case),
                ctx.evidence(run),
            ),
            None if applied => Verdict::pass(CASE, rule),
            None => Verdict::unsupported(CASE, rule, "no execution the kit ran exercised it"),
        });
    }
    verdicts.push(replay(ctx, &runs));
    verdicts
}

/// EXEC-5: a `Watch` from the start of each ended execution gave the events the caller saw.
fn replay(ctx: &Ctx, runs: &[Run]) -> Verdict {
    let mut replays = 0;
    for run in runs {
        let Some(replayed) = &run.replay else {
            continue;
        };
        replays += 1;
        let replayed = match replayed {
            Ok(events) => events,
            Err(status) => {
                return Verdict::fail(
                    CASE,
                    "EXEC-5",
                    format!(
                        "case {}: Watch from 0 failed: {:?} {}",
                        run.case,
                        status.code(),
                        status.message()
                    ),
                    ctx.evidence(run),
                );
            }
        };
        let differs = run.events.iter().zip(replayed).find(|(a, b)| a != b);
        if let Some((seen, again)) = differs {
            return Verdict::fail(
                CASE,
                "EXEC-5",
                format!(
                    "case {}: sequence {} was `{}` on the stream and `{}` on Watch",
                    run.case,
                    seen.sequence,
                    crate::observe::describe(seen),
                    crate::observe::describe(again)
                ),
                ctx.evidence(run),
            );
        }
        if run.events.len() != replayed.len() {
            return Verdict::fail(
                CASE,
                "EXEC-5",
                format!(
                    "case {}: the stream gave {} events, Watch from 0 {}",
                    run.case,
                    run.events.len(),
                    replayed.len()
                ),
                ctx.evidence(run),
            );
        }
    }
    if replays == 0 {
        return Verdict::unsupported(CASE, "EXEC-5", "no execution the kit ran ended");
    }
    Verdict::pass(CASE, "EXEC-5")
}

fn state(event: &pb::ExecutionEvent) -> S {
    S::try_from(event.state).unwrap_or(S::Unspecified)
}

fn one_execution(run: &Run) -> Result<bool, String> {
    let id = run.id();
    if id.is_empty() {
        return Err("an event has no execution id".into());
    }
    match run.events.iter().find(|e| e.execution_id != id) {
        Some(e) => Err(format!(
            "sequence {} names execution {:?}, not {id:?}",
            e.sequence, e.execution_id
        )),
        None => Ok(true),
    }
}

fn gap_free(run: &Run) -> Result<bool, String> {
    for (n, event) in (1..).zip(&run.events) {
        if event.sequence != n {
            return Err(format!("event {n} has sequence {}", event.sequence));
        }
    }
    Ok(true)
}

fn complete_events(run: &Run) -> Result<bool, String> {
    for event in &run.events {
        if event.time.is_none() || event.r#type.is_empty() || state(event) == S::Unspecified {
            return Err(format!(
                "sequence {} lacks its time, type or state",
                event.sequence
            ));
        }
        let named = match &event.payload {
            Some(Payload::Accepted(_)) => "execution.accepted",
            Some(Payload::Routing(_)) => "execution.routing",
            Some(Payload::AttemptStarted(_)) => "route.attempt.started",
            Some(Payload::AttemptFailed(_)) => "route.attempt.failed",
            Some(Payload::TextDelta(_)) => "output.text.delta",
            Some(Payload::ToolCallStarted(_)) => "output.tool_call.started",
            Some(Payload::ToolCallArgumentsDelta(_)) => "output.tool_call.arguments.delta",
            Some(Payload::ReasoningDelta(_)) => "output.reasoning.delta",
            Some(Payload::Progress(_)) => "execution.progress",
            Some(Payload::UsageReported(_)) => "usage.reported",
            Some(Payload::Completed(_)) => "execution.completed",
            Some(Payload::Failed(_)) => "execution.failed",
            None => return Err(format!("sequence {} has no payload", event.sequence)),
        };
        if event.r#type != named {
            return Err(format!(
                "sequence {} is typed {:?} but carries {named}",
                event.sequence, event.r#type
            ));
        }
    }
    Ok(true)
}

fn is_terminal(event: &pb::ExecutionEvent) -> bool {
    matches!(
        event.payload,
        Some(Payload::Completed(_) | Payload::Failed(_))
    )
}

fn one_terminal(run: &Run) -> Result<bool, String> {
    let terminals: Vec<u64> = run
        .events
        .iter()
        .filter(|e| is_terminal(e))
        .map(|e| e.sequence)
        .collect();
    match terminals.as_slice() {
        [] if !run.whole => Ok(true),
        [] => Err(match &run.error {
            Some(status) => format!(
                "the stream ended with {:?} {} before a terminal event",
                status.code(),
                status.message()
            ),
            None => "the stream ended without a terminal event".into(),
        }),
        [one] if run.events.last().map(|e| e.sequence) == Some(*one) => Ok(true),
        [one] => Err(format!(
            "events follow the terminal event at sequence {one}"
        )),
        many => Err(format!("terminal events at sequences {many:?}")),
    }
}

fn transitions(run: &Run) -> Result<bool, String> {
    let Some(first) = run.events.first() else {
        return Ok(false);
    };
    if state(first) != S::Accepted || !matches!(first.payload, Some(Payload::Accepted(_))) {
        return Err("the first event is not execution.accepted in ACCEPTED".into());
    }
    for pair in run.events.windows(2) {
        let (from, to) = (state(&pair[0]), state(&pair[1]));
        if let Some(want) = state_after(&pair[1], from)
            && !want.contains(&to)
        {
            return Err(format!(
                "sequence {} ({}) leaves the execution {}, not {}",
                pair[1].sequence,
                pair[1].r#type,
                to.as_str_name(),
                want.iter()
                    .map(|s| s.as_str_name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        let allowed = from == to
            || matches!(
                (from, to),
                (S::Accepted, S::Routing)
                    | (S::Routing, S::Running)
                    | (S::Running, S::Routing)
                    | (S::Running, S::Succeeded)
                    | (S::Accepted | S::Routing | S::Running, S::Cancelled)
                    | (S::Routing | S::Running, S::Failed)
            );
        if !allowed {
            return Err(format!(
                "sequence {} moves {} -> {}, not a transition of the state machine",
                pair[1].sequence,
                from.as_str_name(),
                to.as_str_name()
            ));
        }
    }
    Ok(true)
}

/// The states the protocol's event table allows after `event`, the state before being
/// `before`; `None` for a payload the table does not name.
fn state_after(event: &pb::ExecutionEvent, before: S) -> Option<Vec<S>> {
    Some(match event.payload.as_ref()? {
        Payload::Accepted(_) => vec![S::Accepted],
        Payload::Routing(_) => vec![S::Routing],
        Payload::AttemptStarted(_)
        | Payload::TextDelta(_)
        | Payload::ToolCallStarted(_)
        | Payload::ToolCallArgumentsDelta(_)
        | Payload::ReasoningDelta(_) => vec![S::Running],
        // ROUTING when another attempt follows; else unchanged (or already the end's), the
        // terminal event that follows setting FAILED or CANCELLED.
        Payload::AttemptFailed(_) => vec![S::Routing, before, S::Failed, S::Cancelled],
        Payload::Progress(_) | Payload::UsageReported(_) => vec![before],
        Payload::Completed(_) => vec![S::Succeeded],
        Payload::Failed(f) => {
            let cancelled = f.error.as_ref().is_some_and(|e| e.code == "cancelled");
            vec![if cancelled { S::Cancelled } else { S::Failed }]
        }
    })
}

fn succeeded_from_running(run: &Run) -> Result<bool, String> {
    for pair in run.events.windows(2) {
        if state(&pair[1]) == S::Succeeded
            && (state(&pair[0]) != S::Running
                || !matches!(pair[1].payload, Some(Payload::Completed(_))))
        {
            return Err(format!(
                "sequence {} reaches SUCCEEDED other than by completing a running execution",
                pair[1].sequence
            ));
        }
    }
    Ok(run.result().is_some())
}

fn never_failed_from_accepted(run: &Run) -> Result<bool, String> {
    match run
        .events
        .windows(2)
        .find(|p| state(&p[0]) == S::Accepted && state(&p[1]) == S::Failed)
    {
        Some(p) => Err(format!(
            "sequence {} fails an execution still ACCEPTED",
            p[1].sequence
        )),
        None => Ok(run.failure().is_some()),
    }
}

fn no_attempt_after_output(run: &Run) -> Result<bool, String> {
    let Some(first) = run.first_output() else {
        return Ok(false);
    };
    match run.events[first..]
        .iter()
        .find(|e| matches!(e.payload, Some(Payload::AttemptStarted(_))))
    {
        Some(e) => Err(format!(
            "output was exposed at sequence {}, and a new attempt started at {}",
            run.events[first].sequence, e.sequence
        )),
        None => Ok(true),
    }
}

fn resolved_target(run: &Run) -> Result<bool, String> {
    let attempts = run.attempts();
    if attempts
        .iter()
        .any(|a| a.starts_with('/') || a.ends_with('/'))
    {
        return Err("an attempt does not name its provider and model".into());
    }
    if let Some(result) = run.result() {
        let resolved = format!("{}/{}", result.provider, result.model);
        if attempts.last() != Some(&resolved) {
            return Err(format!(
                "the result names {resolved}, the last attempt started was {:?}",
                attempts.last()
            ));
        }
    }
    Ok(!attempts.is_empty())
}

fn facts_complete(run: &Run) -> Result<bool, String> {
    for fact in run.usage() {
        if fact.unit.is_empty()
            || fact.source == 0
            || fact.attempt == 0
            || fact.provider.is_empty()
            || fact.model.is_empty()
        {
            return Err(format!(
                "the fact {fact:?} lacks its unit, source, attempt, provider or model"
            ));
        }
    }
    Ok(!run.usage().is_empty())
}

fn facts_unpriced(run: &Run) -> Result<bool, String> {
    for fact in run.usage() {
        let names =
            std::iter::once(fact.unit.as_str()).chain(fact.labels.keys().map(String::as_str));
        for name in names {
            let lower = name.to_ascii_lowercase();
            if crate::observe::LABEL.0 != name && MONEY.iter().any(|m| lower.contains(m)) {
                return Err(format!(
                    "a usage fact carries money: {name:?} (attempt {})",
                    fact.attempt
                ));
            }
        }
    }
    Ok(!run.usage().is_empty())
}

fn labels_copied(run: &Run) -> Result<bool, String> {
    let (key, value) = crate::observe::LABEL;
    match run
        .usage()
        .into_iter()
        .find(|f| f.labels.get(key).map(String::as_str) != Some(value))
    {
        Some(fact) => Err(format!(
            "the fact {}={} lacks the request's label {key}={value}",
            fact.unit, fact.quantity
        )),
        None => Ok(!run.usage().is_empty()),
    }
}

fn stable_codes(run: &Run) -> Result<bool, String> {
    let Some(failure) = run.failure() else {
        return Ok(false);
    };
    let Some(error) = &failure.error else {
        return Err("execution.failed carries no error".into());
    };
    if !CODES.contains(&error.code.as_str()) {
        return Err(format!("the code {:?} is not one of ERR-4's", error.code));
    }
    if error.outcome == 0 {
        return Err("execution.failed carries no outcome".into());
    }
    Ok(true)
}

/// Every output-exposing event of `run`, for the cases.
pub fn outputs(run: &Run) -> impl Iterator<Item = &pb::ExecutionEvent> {
    run.events.iter().filter(|e| exposes_output(e))
}
