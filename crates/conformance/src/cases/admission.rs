//! Admission (a provider at its limit with no queue refuses at once, and routing moves on)
//! and, under `--strict`, health: a target that keeps failing is ejected from plans.

use std::time::Duration;

use futures_util::StreamExt;
use tonic::Streaming;

use crate::observe::{Ctx, Run, WAIT};
use crate::pb::{self, execution_event::Payload};
use crate::verdict::{Evidence, Verdict};

/// How soon the refused execution must complete: well before the holder lets go (its
/// answer takes 1.8 s), so it did not wait for the permit.
const AT_ONCE: Duration = Duration::from_millis(1200);

/// Starts an execution on kit-n (one permit, no queue) and returns once its first delta
/// arrived, with the stream still open: it holds the permit.
async fn hold_the_permit(
    ctx: &Ctx,
    case: &'static str,
) -> Option<(Run, Streaming<pb::ExecutionEvent>)> {
    let request = ctx.request("hold");
    let mut holder = Run::new(case, crate::observe::nonce_of(&request));
    let mut stream = tokio::time::timeout(WAIT, ctx.client.clone().execute(request))
        .await
        .ok()?
        .ok()?
        .into_inner();
    while let Ok(Some(Ok(event))) = tokio::time::timeout(WAIT, stream.next()).await {
        let output = matches!(event.payload, Some(Payload::TextDelta(_)));
        holder.events.push(event);
        if output {
            return Some((holder, stream));
        }
    }
    None
}

pub async fn full_queue(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let Some((mut holder, stream)) = hold_the_permit(ctx, case).await else {
        let why = "an execution on kit-n (one permit, no queue) did not start streaming";
        let rules = ["ADMIT-1", "ADMIT-2", "ROUTE-10", "ROUTE-11"];
        return Verdict::fail_all(case, &rules, why, &Evidence::default());
    };
    let refused = ctx.execute(case, ctx.request("admission")).await;
    let took = refused.sent.elapsed();
    crate::observe::read(stream, &mut holder, usize::MAX).await;
    ctx.keep(&holder).await;
    let asked: Vec<String> = ctx.received(&refused).iter().map(|r| r.target()).collect();
    let refusal = refused
        .failed_attempts()
        .into_iter()
        .any(|a| a.provider == "kit-n" && !a.admitted);
    let evidence = || ctx.evidence(&refused);
    vec![
        Verdict::check(
            case,
            "ADMIT-1",
            !asked.iter().any(|t| t.starts_with("kit-n/")),
            || {
                "a provider limited to one attempt at a time was sent a second while the first ran"
                    .into()
            },
            evidence,
        ),
        Verdict::check(
            case,
            "ADMIT-2",
            asked == ["kit-b/answer"] && refused.result().is_some() && took < AT_ONCE,
            || {
                format!(
                    "a provider at its limit with no queue: the execution did not move on at once to kit-b (it took {took:?})"
                )
            },
            evidence,
        ),
        Verdict::check(
            case,
            "ROUTE-10",
            !asked.iter().any(|t| t.starts_with("kit-n/"))
                && refused.result().is_some_and(|r| r.provider == "kit-b"),
            || {
                "a target refused by admission was asked, or counted as the provider's failure"
                    .into()
            },
            evidence,
        ),
        Verdict::check(
            case,
            "ROUTE-11",
            refusal,
            || {
                "the refusal by admission is not recorded as an attempt (route.attempt.failed, admitted false)".into()
            },
            evidence,
        ),
    ]
}

pub async fn ejection(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut last = None;
    for _ in 0..3 {
        last = Some(ctx.execute(case, ctx.request("health")).await);
    }
    let Some(run) = last else { return Vec::new() };
    let asked: Vec<String> = ctx.received(&run).iter().map(|r| r.target()).collect();
    let ejected = run.plan().is_some_and(|plan| {
        plan.targets.iter().any(|t| {
            t.provider == "kit-h"
                && t.ejected
                    .as_ref()
                    .is_some_and(|e| !e.reason.is_empty() && e.until.is_some())
        })
    });
    vec![Verdict::check(
        case,
        "ROUTE-12",
        ejected && asked == ["kit-b/answer"],
        || {
            "after two consecutive 503s kit-h/fail-503 was not ejected in the plan (with why and until when) and skipped"
                .into()
        },
        || ctx.evidence(&run),
    )]
}
