//! An execution as a resource: cursors, idempotent submission, cancellation, the deadline,
//! a second replica sharing the store, and retention.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

use crate::observe::{Ctx, Run, WAIT, nonce_of, read};
use crate::pb::execution_event::Payload;
use crate::pb::model_runtime_client::ModelRuntimeClient;
use crate::pb::{self, ExecutionState};
use crate::verdict::{Evidence, Verdict};

/// How long the cursor case leaves its execution with nobody following it.
const UNFOLLOWED: Duration = Duration::from_secs(3);

/// The deadline the deadline case sets, and how late past it the end may come.
const DEADLINE: Duration = Duration::from_millis(700);
const DEADLINE_SLACK: Duration = Duration::from_secs(1);

fn deadline_in(after: Duration) -> prost_types::Timestamp {
    prost_types::Timestamp::from(SystemTime::now() + after)
}

/// A slow execution whose caller read four events and dropped its stream.
async fn dropped_after_four(ctx: &Ctx, case: &'static str) -> Run {
    let request = ctx.request("slow");
    let mut first = Run::new(case, nonce_of(&request));
    if let Ok(Ok(stream)) = tokio::time::timeout(WAIT, ctx.client.clone().execute(request)).await {
        read(stream.into_inner(), &mut first, 4).await;
    }
    ctx.keep(&first).await;
    first
}

pub async fn cursors(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let first = dropped_after_four(ctx, case).await;
    // Nobody follows it now: it must still reach its end (the slow answer takes 1.8 s).
    tokio::time::sleep(UNFOLLOWED).await;
    let ended_alone = ctx
        .get(first.id())
        .await
        .is_ok_and(|v| v.state == ExecutionState::Succeeded as i32);
    let last = first.events.last().map(|e| e.sequence).unwrap_or_default();
    let rest = ctx
        .watch(&ctx.client, first.id(), last)
        .await
        .unwrap_or_default();
    let mut whole = first.clone();
    whole.events.extend(rest.iter().cloned());
    whole.whole = true;
    let expected: Vec<u64> = (last + 1..=last + rest.len() as u64).collect();
    let resumed = rest.iter().map(|e| e.sequence).eq(expected) && whole.terminal().is_some();
    let end = whole.events.last().map(|e| e.sequence).unwrap_or_default();
    let past = ctx.watch(&ctx.client, first.id(), end + 5).await;
    let evidence = || ctx.evidence(&whole);
    let verdicts = vec![
        Verdict::check(
            case,
            "CURSOR-1",
            resumed,
            || {
                format!(
                    "Watch after sequence {last} did not give every later event to the terminal one"
                )
            },
            evidence,
        ),
        Verdict::check(
            case,
            "CURSOR-3",
            resumed && !rest.is_empty() && last == 4,
            || {
                "a reader resuming from the last sequence it saw did not see each event exactly once".into()
            },
            evidence,
        ),
        Verdict::check(
            case,
            "CURSOR-2",
            past.as_ref().is_err_and(|s| s.code() == Code::OutOfRange),
            || {
                format!(
                    "a cursor past the last event ({}) was not refused with OUT_OF_RANGE",
                    end + 5
                )
            },
            evidence,
        ),
        Verdict::check(
            case,
            "CURSOR-4",
            whole.result().is_some(),
            || {
                "the caller dropped its stream after four events and the execution did not complete"
                    .into()
            },
            evidence,
        ),
        Verdict::check(
            case,
            "EXEC-7",
            ended_alone,
            || {
                format!(
                    "an execution no caller followed for {UNFOLLOWED:?} had not succeeded by then"
                )
            },
            evidence,
        ),
    ];
    ctx.keep(&whole).await;
    verdicts
}

pub async fn idempotency(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut request = ctx.request("slow");
    request.idempotency_key = format!("kit-key-{}", nonce_of(&request));
    request.deadline = Some(deadline_in(Duration::from_secs(30)));
    let submitted = ctx.client.clone().submit(request.clone()).await;
    let first = match submitted {
        Ok(first) => first.into_inner(),
        Err(status) => {
            let why = format!("Submit with an idempotency key was refused: {status:?}");
            return Verdict::fail_all(case, &["IDEM-1", "IDEM-2"], &why, &Evidence::default());
        }
    };
    let mut again = request.clone();
    again.deadline = Some(deadline_in(Duration::from_secs(40)));
    let second = ctx
        .client
        .clone()
        .submit(again.clone())
        .await
        .map(tonic::Response::into_inner);
    let attached = ctx.execute(case, again).await;
    let mut other = ctx.request("slow");
    other.idempotency_key = request.idempotency_key.clone();
    let conflict = ctx.client.clone().submit(other.clone()).await;
    let asked = ctx.received(&attached).len();
    let other_asked = ctx.log.for_nonce(&nonce_of(&other)).len();
    let id = first.execution_id.clone();
    let evidence = || ctx.evidence(&attached);
    vec![
        Verdict::check(
            case,
            "IDEM-1",
            second.as_ref().is_ok_and(|e| e.execution_id == id)
                && attached.id() == id
                && asked == 1,
            || {
                format!(
                    "the same request and key (another deadline) gave another execution, or the provider was asked {asked} times"
                )
            },
            evidence,
        ),
        Verdict::check(
            case,
            "IDEM-2",
            conflict
                .as_ref()
                .is_err_and(|s| s.code() == Code::AlreadyExists && s.message().contains(&id))
                && other_asked == 0,
            || {
                format!(
                    "the key with another request was not refused with ALREADY_EXISTS naming {id}: {:?}",
                    conflict.as_ref().err()
                )
            },
            evidence,
        ),
    ]
}

async fn cancel_call(
    client: &ModelRuntimeClient<Channel>,
    id: &str,
    reason: &str,
) -> Result<pb::Execution, tonic::Status> {
    let request = pb::CancelExecutionRequest {
        execution_id: id.to_owned(),
        reason: reason.to_owned(),
    };
    Ok(client.clone().cancel_execution(request).await?.into_inner())
}

/// Submits `request` on `on`, follows it on `watcher` until `until` holds of an event, then
/// cancels it through `canceller` with `reason`, and reads the rest.
async fn cancel_when(
    case: &'static str,
    request: pb::ExecuteRequest,
    on: &ModelRuntimeClient<Channel>,
    watcher: &ModelRuntimeClient<Channel>,
    canceller: &ModelRuntimeClient<Channel>,
    until: fn(&pb::ExecutionEvent) -> bool,
) -> Option<Run> {
    let mut run = Run::new(case, nonce_of(&request));
    let submitted = on.clone().submit(request).await.ok()?.into_inner();
    let watch = pb::WatchRequest {
        execution_id: submitted.execution_id.clone(),
        after_sequence: 0,
    };
    let mut stream = watcher.clone().watch(watch).await.ok()?.into_inner();
    while let Ok(Some(Ok(event))) = tokio::time::timeout(WAIT, stream.next()).await {
        let now = until(&event);
        run.events.push(event);
        if now {
            break;
        }
    }
    cancel_call(canceller, &submitted.execution_id, "kit cancel")
        .await
        .ok()?;
    read(stream, &mut run, usize::MAX).await;
    Some(run)
}

fn cancelled(run: &Run) -> bool {
    run.terminal()
        .is_some_and(|e| e.state == ExecutionState::Cancelled as i32)
        && run.failed_code() == "cancelled"
        && run
            .failure()
            .is_some_and(|f| f.cancel_reason == "kit cancel")
}

pub async fn cancel(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let client = &ctx.client;
    let text = |e: &pb::ExecutionEvent| matches!(e.payload, Some(Payload::TextDelta(_)));
    let sent = |e: &pb::ExecutionEvent| matches!(e.payload, Some(Payload::AttemptStarted(_)));
    let (running, waiting) = tokio::join!(
        cancel_when(case, ctx.request("slow"), client, client, client, text),
        cancel_when(case, ctx.request("unknown"), client, client, client, sent),
    );
    let (Some(running), Some(waiting)) = (running, waiting) else {
        let why = "Submit, Watch or CancelExecution was refused";
        let rules = ["CANCEL-1", "CANCEL-2", "EXEC-6"];
        return Verdict::fail_all(case, &rules, why, &Evidence::default());
    };
    ctx.keep(&running).await;
    ctx.keep(&waiting).await;
    // Cancelling again, or cancelling what succeeded, returns the execution as it was.
    let before = ctx.get(running.id()).await.ok();
    let again = cancel_call(client, running.id(), "once more").await.ok();
    let done = ctx.execute(case, ctx.request("answer")).await;
    let done_before = ctx.get(done.id()).await.ok();
    let ended = cancel_call(client, done.id(), "too late").await.ok();
    let done_after = ctx.get(done.id()).await.ok();
    let unchanged = before.is_some()
        && again == before
        && done_before
            .as_ref()
            .is_some_and(|e| e.state == ExecutionState::Succeeded as i32)
        && ended == done_before
        && done_after == done_before;
    vec![
        Verdict::check(
            case,
            "CANCEL-1",
            cancelled(&running),
            || {
                "a running execution, cancelled with a reason, did not end CANCELLED with code `cancelled` and that reason".into()
            },
            || ctx.evidence(&running),
        ),
        Verdict::check(
            case,
            "EXEC-6",
            cancelled(&waiting),
            || {
                "an execution cancelled while its provider had not answered did not end CANCELLED with code `cancelled`".into()
            },
            || ctx.evidence(&waiting),
        ),
        Verdict::check(
            case,
            "CANCEL-2",
            unchanged,
            || "cancelling a cancelled or a succeeded execution did not return it unchanged".into(),
            || ctx.evidence(&done),
        ),
    ]
}

pub async fn deadline(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let mut request = ctx.request("slow");
    request.deadline = Some(deadline_in(DEADLINE));
    let run = ctx.execute(case, request).await;
    let took = run.sent.elapsed();
    let partial = run
        .failure()
        .and_then(|f| f.partial_output.as_ref())
        .is_some_and(|o| !o.text.is_empty() && o.text == run.streamed_text());
    vec![
        Verdict::check(
            case,
            "DEADLINE-1",
            run.failed_code() == "deadline_exceeded" && took < DEADLINE + DEADLINE_SLACK,
            || {
                format!(
                    "a deadline {DEADLINE:?} away: the execution ended after {took:?} with code {:?}",
                    run.failed_code()
                )
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "COMMIT-4",
            partial && run.result().is_none(),
            || {
                "the output streamed before the deadline is not kept in execution.failed as evidence".into()
            },
            || ctx.evidence(&run),
        ),
    ]
}

pub async fn second_replica(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let Some(other) = &ctx.replica else {
        let why = "needs a second replica sharing the store (--replica ADDR)";
        return vec![
            Verdict::unsupported(case, "CANCEL-3", why),
            Verdict::unsupported(case, "EXEC-5", why),
        ];
    };
    let text = |e: &pb::ExecutionEvent| matches!(e.payload, Some(Payload::TextDelta(_)));
    let Some(run) = cancel_when(case, ctx.request("slow"), &ctx.client, other, other, text).await
    else {
        let why = "Submit on one replica, or Watch or CancelExecution on the other, was refused";
        return Verdict::fail_all(case, &["CANCEL-3", "EXEC-5"], why, &Evidence::default());
    };
    ctx.keep(&run).await;
    let here = ctx
        .watch(&ctx.client, run.id(), 0)
        .await
        .unwrap_or_default();
    vec![
        Verdict::check(
            case,
            "CANCEL-3",
            cancelled(&run),
            || {
                "an execution submitted to one replica and cancelled through another did not end CANCELLED".into()
            },
            || ctx.evidence(&run),
        ),
        Verdict::check(
            case,
            "EXEC-5",
            here == run.events,
            || "the two replicas gave different events for one execution".into(),
            || ctx.evidence(&run),
        ),
    ]
}

pub async fn retention(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let Some(retention) = ctx.retention else {
        let why =
            "needs the implementation's store retention (--retention DURATION, a few seconds)";
        return vec![
            Verdict::unsupported(case, "IDEM-3", why),
            Verdict::unsupported(case, "STORE-2", why),
        ];
    };
    let mut request = ctx.request("answer");
    request.idempotency_key = format!("kit-key-{}", nonce_of(&request));
    let first = ctx.execute(case, request.clone()).await;
    tokio::time::sleep(retention + Duration::from_secs(2)).await;
    let get = pb::GetExecutionRequest {
        execution_id: first.id().to_owned(),
    };
    let gone = ctx.client.clone().get_execution(get).await;
    let second = ctx.execute(case, request).await;
    vec![
        Verdict::check(
            case,
            "STORE-2",
            gone.as_ref().is_err_and(|s| s.code() == Code::NotFound),
            || format!("an execution ended {retention:?} + 2 s ago is still kept"),
            || ctx.evidence(&first),
        ),
        Verdict::check(
            case,
            "IDEM-3",
            !second.id().is_empty() && second.id() != first.id() && second.result().is_some(),
            || "after its execution expired, the key still named it".into(),
            || ctx.evidence(&second),
        ),
    ]
}
