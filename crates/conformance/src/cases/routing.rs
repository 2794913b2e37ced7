//! Routing: the resolved target, the classes of attempt errors, attempts and the budget,
//! `allow_fallback`, capability filtering and a deterministic order.

use std::time::Duration;

use tonic::Code;

use crate::observe::Ctx;
use crate::pb;
use crate::provider::behaviour::{ANSWER, USAGE};
use crate::verdict::Verdict;

/// The policy's budget in the `budget` setup, and how late past it the observer still
/// counts a request as begun within it (the kit's clock and loopback on a busy machine).
const BUDGET: Duration = Duration::from_millis(500);
const BUDGET_SLACK: Duration = Duration::from_millis(80);

pub async fn answer(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("answer")).await;
    let received = ctx.received(&run);
    let evidence = || ctx.evidence(&run);
    let result = run.result();
    let got = |r: &pb::ExecutionResult| format!("{}/{}", r.provider, r.model);
    let view = ctx.get(run.id()).await.ok();
    vec![
        Verdict::check(
            case,
            "ROUTE-2",
            result.is_some_and(|r| {
                got(r) == "kit-a/answer" && r.output.as_ref().is_some_and(|o| o.text == ANSWER)
            }),
            || format!("the execution did not complete with kit-a/answer's text {ANSWER:?}"),
            evidence,
        ),
        Verdict::check(
            case,
            "ROUTE-2",
            view.as_ref()
                .is_some_and(|v| v.provider == "kit-a" && v.model == "answer"),
            || format!("GetExecution does not name the resolved kit-a/answer: {view:?}"),
            evidence,
        ),
        Verdict::check(
            case,
            "ROUTE-1",
            received.len() == 1 && received[0].target() == "kit-a/answer",
            || {
                "the provider did not receive one request for kit-a's model `answer`, by that name"
                    .into()
            },
            evidence,
        ),
        Verdict::check(
            case,
            "ROUTE-11",
            run.attempts() == ["kit-a/answer"],
            || "the one attempt is not recorded as route.attempt.started kit-a/answer".into(),
            evidence,
        ),
        Verdict::check(
            case,
            "USAGE-1",
            reported(&run, "input_tokens") == Some(USAGE.0)
                && reported(&run, "output_tokens") == Some(USAGE.1),
            || {
                format!(
                    "the provider reported {} input and {} output tokens; the facts said otherwise or nothing",
                    USAGE.0, USAGE.1
                )
            },
            evidence,
        ),
    ]
}

/// The provider-reported quantity of `unit`, when one fact says it.
pub fn reported(run: &crate::observe::Run, unit: &str) -> Option<u64> {
    run.usage()
        .into_iter()
        .find(|f| f.unit == unit && f.source == pb::UsageSource::ProviderReported as i32)
        .map(|f| f.quantity)
}

pub async fn rejected(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("rejected")).await;
    let asked: Vec<String> = ctx.received(&run).iter().map(|r| r.target()).collect();
    vec![Verdict::check(
        case,
        "ROUTE-8",
        asked == ["kit-a/fail-404", "kit-b/answer"] && run.result().is_some(),
        || {
            "a target that rejected the request (404) was asked again, or the next target was not tried".into()
        },
        || ctx.evidence(&run),
    )]
}

pub async fn unknown(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("unknown")).await;
    let asked = ctx.received(&run).len();
    let outcome = run
        .failure()
        .and_then(|f| f.error.as_ref())
        .map(|e| e.outcome);
    vec![
        Verdict::check(
            case,
            "ROUTE-9",
            asked == 1,
            || {
                format!(
                    "a request whose outcome was unknown (no byte before the timeout) was sent {asked} times"
                )
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "ROUTE-8",
            run.failed_code() == "outcome_unknown" && outcome == Some(pb::Outcome::Unknown as i32),
            || {
                "an unknown outcome did not stop the execution with `outcome_unknown`, outcome UNKNOWN".into()
            },
            || ctx.evidence(&run),
        ),
    ]
}

pub async fn no_fallback(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut request = ctx.request("no-fallback");
    request.allow_fallback = Some(false);
    request.max_attempts = Some(3);
    let run = ctx.execute(case, request).await;
    let received = ctx.received(&run);
    let targets: std::collections::BTreeSet<String> = received.iter().map(|r| r.target()).collect();
    vec![Verdict::check(
        case,
        "ROUTE-7",
        targets.len() == 1 && run.result().is_none(),
        || {
            format!(
                "with allow_fallback false the provider was asked at {} targets",
                targets.len()
            )
        },
        || ctx.evidence(&run),
    )]
}

pub async fn attempts(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut fewer = ctx.request("attempts");
    fewer.max_attempts = Some(2);
    let mut more = ctx.request("attempts");
    more.max_attempts = Some(9);
    let (fewer, more) = tokio::join!(ctx.execute(case, fewer), ctx.execute(case, more));
    let (asked_fewer, asked_more) = (ctx.received(&fewer).len(), ctx.received(&more).len());
    vec![
        Verdict::check(
            case,
            "ROUTE-5",
            asked_fewer == 2,
            || {
                format!(
                    "max_attempts 2 under a policy of 5: the provider was asked {asked_fewer} times"
                )
            },
            || ctx.evidence(&fewer),
        ),
        Verdict::check(
            case,
            "ROUTE-5",
            asked_more == 5,
            || {
                format!(
                    "max_attempts 9 under a policy of 5: the provider was asked {asked_more} times"
                )
            },
            || ctx.evidence(&more),
        ),
        Verdict::check(
            case,
            "ERR-4",
            fewer.failed_code() == "attempts_exhausted",
            || {
                format!(
                    "every attempt failed; the code is {:?}, not `attempts_exhausted`",
                    fewer.failed_code()
                )
            },
            || ctx.evidence(&fewer),
        ),
    ]
}

pub async fn budget(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("budget")).await;
    let received = ctx.received(&run);
    // From the first request: the execution began before it, so a request within the budget
    // of the execution's start is within it of the first request too.
    let first = received.first().map(|r| r.at);
    let late = received
        .iter()
        .filter_map(|r| Some(r.at.saturating_duration_since(first?)))
        .find(|at| *at > BUDGET + BUDGET_SLACK);
    vec![Verdict::check(
        case,
        "ROUTE-6",
        late.is_none() && !received.is_empty(),
        || {
            format!(
                "a retry budget of {BUDGET:?}: an attempt began {:?} after the first",
                late.unwrap_or_default()
            )
        },
        || ctx.evidence(&run),
    )]
}

pub async fn capability(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut request = ctx.request("capability");
    request.requirements = Some(pb::Requirements {
        capabilities: vec!["vision".into()],
    });
    let run = ctx.execute(case, request).await;
    let asked: Vec<String> = ctx.received(&run).iter().map(|r| r.target()).collect();
    let filtered = run.plan().is_some_and(|plan| {
        plan.targets.iter().any(|t| {
            t.provider == "kit-a" && t.model == "answer" && !t.kept && !t.reason.is_empty()
        })
    });
    let mut impossible = ctx.request("capability");
    impossible.requirements = Some(pb::Requirements {
        capabilities: vec!["kit-capability-no-model-has".into()],
    });
    let none = ctx.execute(case, impossible).await;
    let none_asked = ctx.received(&none).len();
    vec![
        Verdict::check(
            case,
            "ROUTE-3",
            asked == ["kit-b/answer"] && filtered,
            || {
                "a target without `vision` was asked, or the plan does not name it as filtered with a reason".into()
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "ROUTE-3",
            none_asked == 0
                && (none.failed_code() == "no_capable_target"
                    || none.error.as_ref().is_some_and(|s| {
                        none.events.is_empty()
                            && matches!(s.code(), Code::InvalidArgument | Code::FailedPrecondition)
                    })),
            || {
                "a capability no target has: a provider was asked, or the execution did not end with `no_capable_target`".into()
            },
            || ctx.evidence(&none),
        ),
    ]
}

pub async fn order(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let first = ctx.execute(case, ctx.request("order")).await;
    let second = ctx.execute(case, ctx.request("order")).await;
    let plan = |run: &crate::observe::Run| -> Vec<String> {
        run.plan()
            .map(|p| {
                p.targets
                    .iter()
                    .map(|t| format!("{}/{} kept={}", t.provider, t.model, t.kept))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (a, b) = (plan(&first), plan(&second));
    vec![Verdict::check(
        case,
        "ROUTE-4",
        !a.is_empty()
            && a == b
            && first.attempts() == ["kit-c/answer"]
            && second.attempts() == ["kit-c/answer"],
        || {
            format!(
                "the same request was planned {a:?}, then {b:?}; the policy's first target is kit-c/answer"
            )
        },
        || ctx.evidence(&second),
    )]
}
