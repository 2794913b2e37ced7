//! The commit rule: fallback only before output; the first text delta or tool call commits;
//! reasoning and usage commit nothing; partial output is evidence, never a result; buffered
//! delivery exposes nothing of an attempt before it succeeds.

use crate::invariants::outputs;
use crate::observe::{Ctx, text_of};
use crate::pb;
use crate::provider::behaviour::{ANSWER, USAGE};
use crate::verdict::Verdict;

pub async fn fallback(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("fallback")).await;
    let asked: Vec<String> = ctx.received(&run).iter().map(|r| r.target()).collect();
    let recorded = run.failed_attempts().first().is_some_and(|a| {
        a.provider == "kit-a"
            && !a.output_committed
            && a.error
                .as_ref()
                .is_some_and(|e| e.class == pb::ErrorClass::Retryable as i32)
    });
    vec![
        Verdict::check(
            case,
            "COMMIT-1",
            asked == ["kit-a/fail-503", "kit-b/answer"]
                && run.result().is_some_and(|r| r.provider == "kit-b"),
            || "a 503 before output did not fall back to the next target".into(),
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "ROUTE-8",
            asked.first().map(String::as_str) == Some("kit-a/fail-503") && asked.len() == 2,
            || {
                "a retryable failure (503) with no retries per target did not move to the next target once".into()
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "ROUTE-11",
            recorded,
            || {
                "the failed attempt is not recorded as route.attempt.failed, retryable, output not committed".into()
            },
            || ctx.evidence(&run),
        ),
    ]
}

/// `setup`'s first target streams output and then breaks (cut or stall): the execution is
/// committed, so it fails with `output_interrupted` and the second target is never asked.
pub async fn cut(ctx: &Ctx, case: &'static str, setup: &str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request(setup)).await;
    let asked = ctx.received(&run).len();
    let shown = outputs(&run).count();
    let streamed = run.streamed_text();
    let evidence_of =
        |o: &pb::Output| o.text == streamed && (!o.text.is_empty() || !o.tool_calls.is_empty());
    let in_event = run
        .failure()
        .is_some_and(|f| f.partial_output.as_ref().is_some_and(evidence_of));
    // The execution's view: the partial output as evidence, and no result.
    let view = ctx.get(run.id()).await.ok();
    let in_view = view
        .as_ref()
        .is_some_and(|v| v.result.is_none() && v.partial_output.as_ref().is_some_and(evidence_of));
    let partial_kept = in_event && in_view;
    vec![
        Verdict::check(
            case,
            "COMMIT-2",
            shown > 0 && asked == 1 && run.failed_code() == "output_interrupted",
            || {
                format!(
                    "output was exposed ({shown} events), then the attempt broke: the provider was asked {asked} times and the code is {:?}",
                    run.failed_code()
                )
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "COMMIT-4",
            partial_kept && run.result().is_none(),
            || {
                "the partial output is not in execution.failed and the execution's view as evidence, or was reported as a result".into()
            },
            || ctx.evidence(&run),
        ),
    ]
}

/// `setup`'s first target sends only what commits nothing (reasoning, usage), then breaks:
/// the execution falls back and completes on the second target.
pub async fn uncommitted(ctx: &Ctx, case: &'static str, setup: &str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request(setup)).await;
    let asked: Vec<String> = ctx.received(&run).iter().map(|r| r.target()).collect();
    let reasoned = run.events.iter().any(|e| {
        matches!(&e.payload, Some(pb::execution_event::Payload::ReasoningDelta(d)) if d.attempt == 1)
    });
    if setup == "cut-reasoning" && !reasoned && run.result().is_some() {
        return vec![Verdict::unsupported(
            case,
            "COMMIT-3",
            "the implementation showed no reasoning from the provider's `reasoning_content`",
        )];
    }
    let mut verdicts = vec![Verdict::check(
        case,
        "COMMIT-3",
        asked.len() == 2
            && run
                .result()
                .is_some_and(|r| r.provider == "kit-b" && text_of(r.output.as_ref()) == ANSWER),
        || {
            format!(
                "an attempt that sent only {setup}'s reasoning or usage broke: the execution did not fall back to complete on kit-b"
            )
        },
        || ctx.evidence(&run),
    )];
    if setup == "cut-usage" {
        let first = run.usage().into_iter().filter(|f| f.attempt == 1).count();
        let input = run
            .usage()
            .into_iter()
            .find(|f| {
                f.attempt == 1
                    && f.unit == "input_tokens"
                    && f.source == pb::UsageSource::ProviderReported as i32
            })
            .map(|f| f.quantity);
        verdicts.push(Verdict::check(
            case,
            "USAGE-2",
            first > 0 && input == Some(USAGE.0),
            || format!("the failed attempt's provider reported {} input tokens; its facts said {input:?}", USAGE.0),
            || ctx.evidence(&run),
        ));
    }
    verdicts
}

pub async fn buffered(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut request = ctx.request("cut-text");
    request.delivery = pb::Delivery::Buffered.into();
    let run = ctx.execute(case, request).await;
    // Nothing shown before the attempt that succeeded began, and only its text after.
    let last_start = run.events.iter().rposition(|e| {
        matches!(
            e.payload,
            Some(pb::execution_event::Payload::AttemptStarted(_))
        )
    });
    let first_attempt_shown = matches!((run.first_output(), last_start), (Some(o), Some(s)) if o < s)
        || run.streamed_text() != ANSWER
        || outputs(&run).any(|e| match &e.payload {
            Some(pb::execution_event::Payload::TextDelta(d)) => d.attempt == 1,
            Some(pb::execution_event::Payload::ToolCallStarted(t)) => t.attempt == 1,
            _ => false,
        });
    vec![Verdict::check(
        case,
        "COMMIT-5",
        !first_attempt_shown
            && run
                .result()
                .is_some_and(|r| r.provider == "kit-b" && text_of(r.output.as_ref()) == ANSWER),
        || {
            "with buffered delivery an attempt cut after two deltas was exposed, or the execution did not fall back".into()
        },
        || ctx.evidence(&run),
    )]
}
