//! The per-execution driver: plan, then attempts with admission, streaming, the commit rule,
//! retry and fallback, until one terminal event. It reaches callers only by appending to the
//! store. Every wait selects on cancellation and on the attempt budget's stop time, so a
//! cancelled or expired execution releases its permit and aborts its provider call at once.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures_util::{FutureExt, StreamExt};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{Config, PolicyConfig};
use crate::error::log_internal;
use crate::execution::{
    AttemptError, CommitTracker, ErrorClass, ErrorCode, EventPayload, ExecutionError, ExecutionId,
    ExecutionInput, ExecutionResult, ExecutionState, Labels, Outcome, Output,
};
use crate::provider::{ProviderCall, ProviderError, ProviderEvent, ProviderSlot, Providers};
use crate::routing::{self, AttemptBudget, Decision, Permit, PlanTarget, RoutingPlan};
use crate::store::{EventStore, StoreError};
use crate::usage::{UsageFact, UsageQuantity};

/// Lets the runtime cancel a running driver, with the caller's reason.
#[derive(Debug, Default)]
pub(crate) struct DriverHandle {
    token: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl DriverHandle {
    /// Asks the driver to end the execution as cancelled. The first reason given wins.
    pub(crate) fn cancel(&self, reason: Option<String>) {
        if let Ok(mut slot) = self.reason.lock()
            && slot.is_none()
        {
            *slot = reason;
        }
        self.token.cancel();
    }

    fn reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }
}

/// Everything one execution needs, resolved at submission.
#[derive(Debug)]
pub(crate) struct Job {
    pub id: ExecutionId,
    pub input: Arc<ExecutionInput>,
    pub policy: PolicyConfig,
    pub required: BTreeSet<String>,
    pub budget: AttemptBudget,
    pub labels: Arc<Labels>,
}

/// The shared parts a driver works with.
#[derive(Clone)]
pub(crate) struct Deps {
    pub store: Arc<dyn EventStore>,
    pub providers: Arc<Providers>,
    pub config: Arc<Config>,
}

/// Drives `job` to its terminal event. A panic inside (say, in a provider adapter) is caught:
/// the permit it held is released as the stack unwinds, and the execution still ends, with
/// `internal_error`, instead of staying live forever.
pub(crate) async fn run(deps: Deps, job: Job, handle: Arc<DriverHandle>) {
    let id = job.id;
    let store = deps.store.clone();
    let driver = Driver { deps, job, handle };
    let result = AssertUnwindSafe(driver.drive()).catch_unwind().await;
    let error = match result {
        // Someone else ended it (a cancellation that found no driver, or shutdown).
        Ok(Ok(()) | Err(StoreError::AlreadyTerminal(_))) => return,
        Ok(Err(error)) => error.to_string(),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            format!("driver panicked: {what}")
        }
    };
    let error_id = log_internal(&format!("execution {id}: {error}"));
    // The draft draws no ACCEPTED -> FAILED edge: a failure that struck before routing
    // began is recorded after an (empty) routing step, so the execution still ends.
    if let Ok(view) = store.get(id)
        && view.state == ExecutionState::Accepted
    {
        let plan = RoutingPlan {
            policy: view.policy.clone(),
            required_capabilities: Vec::new(),
            targets: Vec::new(),
        };
        if let Err(e) = store
            .append(id, EventPayload::Routing(Arc::new(plan)))
            .await
        {
            tracing::error!(execution_id = %id, error = %e, "could not record the internal failure");
            return;
        }
    }
    let payload = EventPayload::Failed {
        error: ExecutionError {
            code: ErrorCode::InternalError,
            message: format!("internal_error (error id {error_id})"),
            outcome: Outcome::Unknown,
            last_attempt_error: None,
        },
        partial_output: Output::default(),
        cancel_reason: None,
    };
    if let Err(e) = store.append(id, payload).await {
        tracing::error!(execution_id = %id, error = %e, "could not record the internal failure");
    }
}

struct Driver {
    deps: Deps,
    job: Job,
    handle: Arc<DriverHandle>,
}

mod evidence;

use evidence::{AttemptEnd, EndKind, Tally, attempt_error, record, stop_message};

impl Driver {
    async fn append(&self, payload: EventPayload) -> Result<(), StoreError> {
        self.deps.store.append(self.job.id, payload).await.map(drop)
    }

    async fn drive(&self) -> Result<(), StoreError> {
        if self.handle.token.is_cancelled() {
            let message = self.cancel_message();
            return self
                .fail(
                    ErrorCode::Cancelled,
                    message,
                    &Tally::default(),
                    Output::default(),
                )
                .await;
        }
        let plan = Arc::new(routing::plan(
            &self.deps.config,
            &self.job.policy,
            &self.job.required,
        ));
        self.append(EventPayload::Routing(plan.clone())).await?;
        let targets: Vec<&PlanTarget> = plan.kept().collect();
        if targets.is_empty() {
            let message = format!(
                "no target of policy `{}` has every required capability ({})",
                plan.policy,
                plan.required_capabilities.join(", ")
            );
            return self
                .fail(
                    ErrorCode::NoCapableTarget,
                    message,
                    &Tally::default(),
                    Output::default(),
                )
                .await;
        }
        let (stop_at, stop_code) = self.job.budget.stop_at();
        let mut tally = Tally::default();
        let mut index = 0;
        loop {
            let target = targets[index];
            tally.attempts += 1;
            let end = self.attempt(target, &mut tally, stop_at, stop_code).await?;
            let error = match &end.kind {
                EndKind::Succeeded(_) => return Ok(()),
                EndKind::Cut(code) => return self.cut(target, tally, *code, end).await,
                EndKind::Failed(error) => error.clone(),
            };
            let slot = self.deps.providers.get(&target.provider);
            let decision = self.job.budget.decide(
                routing::Failure {
                    error: &error,
                    committed: end.committed,
                    attempts: tally.attempts,
                    on_target: tally.on_target,
                    admitted: end.admitted,
                    has_next_target: index + 1 < targets.len(),
                    retry_unknown_outcome: slot.is_some_and(|s| s.config.retry_unknown_outcome),
                },
                Instant::now(),
            );
            tracing::debug!(execution_id = %self.job.id, attempt = tally.attempts, code = %error.code, next = ?decision, "attempt failed");
            let record = record(target, &tally, &end, error.clone(), decision);
            self.append(EventPayload::AttemptFailed(record)).await?;
            tally.record_error(error, end.admitted);
            match decision {
                Decision::Retry { after } => {
                    tokio::select! {
                        biased;
                        () = self.handle.token.cancelled() => {
                            return self.fail(ErrorCode::Cancelled, self.cancel_message(), &tally, Output::default()).await;
                        }
                        () = sleep_until(stop_at) => {
                            return self.fail(stop_code, stop_message(stop_code, &tally), &tally, Output::default()).await;
                        }
                        () = sleep(after) => {}
                    }
                }
                Decision::Fallback => {
                    index += 1;
                    tally.on_target = 0;
                }
                Decision::Stop(code) => {
                    let partial = if end.committed {
                        end.output
                    } else {
                        Output::default()
                    };
                    return self
                        .fail(code, stop_message(code, &tally), &tally, partial)
                        .await;
                }
            }
        }
    }

    /// Runs one attempt on `target`: admission, then the provider stream.
    async fn attempt(
        &self,
        target: &PlanTarget,
        tally: &mut Tally,
        stop_at: Instant,
        stop_code: ErrorCode,
    ) -> Result<AttemptEnd, StoreError> {
        let started_at = SystemTime::now();
        let not_admitted = |kind| AttemptEnd {
            started_at,
            admitted: false,
            committed: false,
            output: Output::default(),
            kind,
        };
        let Some(slot) = self.deps.providers.get(&target.provider) else {
            let error =
                ProviderError::non_retryable("provider_missing", "provider is not configured");
            return Ok(not_admitted(EndKind::Failed(attempt_error(error))));
        };
        let admission = tokio::select! {
            biased;
            () = self.handle.token.cancelled() => return Ok(not_admitted(EndKind::Cut(ErrorCode::Cancelled))),
            () = sleep_until(stop_at) => return Ok(not_admitted(EndKind::Cut(stop_code))),
            permit = slot.admission.acquire() => permit,
        };
        let permit = match admission {
            Ok(permit) => permit,
            Err(rejected) => {
                let error = ProviderError::retryable("admission_rejected", rejected.to_string());
                return Ok(not_admitted(EndKind::Failed(attempt_error(error))));
            }
        };
        self.append(EventPayload::AttemptStarted {
            attempt: tally.attempts,
            provider: target.provider.clone(),
            model: target.model.clone(),
            started_at,
        })
        .await?;
        tally.any_admitted = true;
        tally.on_target += 1;
        let span = tracing::debug_span!("attempt", execution_id = %self.job.id, attempt = tally.attempts, provider = %target.provider, model = %target.model);
        let mut tracker = CommitTracker::new();
        let kind = self
            .stream(
                slot,
                target,
                tally,
                stop_at,
                stop_code,
                permit,
                &mut tracker,
            )
            .instrument(span)
            .await?;
        // The permit and the provider stream are released by now, so whoever sees the
        // terminal event also sees the provider's capacity back.
        if let EndKind::Succeeded(finish_reason) = kind {
            let result = ExecutionResult {
                output: tracker.take_output(),
                finish_reason,
                provider: target.provider.clone(),
                model: target.model.clone(),
                attempt: tally.attempts,
            };
            self.append(EventPayload::Completed(result)).await?;
        }
        Ok(AttemptEnd {
            started_at,
            admitted: true,
            committed: tracker.committed(),
            output: tracker.take_output(),
            kind,
        })
    }

    /// Forwards one provider stream into the store, holding `permit` until it ends. The
    /// stream (and with it the provider call) is dropped on every way out. Until output is
    /// committed the attempt is cut at `stop_at` (budget or deadline); after, only the
    /// deadline applies: the retry budget bounds trying, not a reply already streaming. A
    /// cut call's unreported usage is recorded before the attempt ends.
    #[allow(clippy::too_many_arguments)]
    async fn stream(
        &self,
        slot: &ProviderSlot,
        target: &PlanTarget,
        tally: &Tally,
        stop_at: Instant,
        stop_code: ErrorCode,
        permit: Permit,
        tracker: &mut CommitTracker,
    ) -> Result<EndKind, StoreError> {
        let attempt = tally.attempts;
        let deadline = self.job.budget.deadline;
        let mut stream = slot.provider.call(ProviderCall {
            execution_id: self.job.id,
            attempt,
            target_attempt: tally.on_target,
            model: target.model.clone(),
            input: self.job.input.clone(),
            deadline,
        });
        // One cancellation waiter and one timer for the whole attempt, polled by reference (the
        // timer moved once, at the commit point): made afresh per event they would register and
        // remove a waiter and a timer entry each time, and a new timer wakes tokio's time
        // driver, a syscall per event.
        let cancelled = self.handle.token.cancelled();
        let limit = sleep_until(stop_at);
        tokio::pin!(cancelled, limit);
        let mut limit_code = stop_code;
        let usage = |q: UsageQuantity| {
            EventPayload::Usage(UsageFact {
                unit: q.unit,
                quantity: q.quantity,
                source: q.source,
                attempt,
                provider: target.provider.clone(),
                model: target.model.clone(),
                labels: self.job.labels.clone(),
            })
        };
        loop {
            let item = tokio::select! {
                biased;
                () = &mut cancelled => Err(ErrorCode::Cancelled),
                () = &mut limit => Err(limit_code),
                item = stream.next() => Ok(item),
            };
            let item = match item {
                Ok(item) => item,
                Err(code) => {
                    // A cut attempt reports its usage too: take what the call knows, abort
                    // it (and free its permit) at once, then record.
                    let known = stream.as_mut().unreported_usage();
                    drop(stream);
                    drop(permit);
                    for quantity in known {
                        self.append(usage(quantity)).await?;
                    }
                    return Ok(EndKind::Cut(code));
                }
            };
            let event = match item {
                Some(Ok(event)) => event,
                Some(Err(error)) => return Ok(EndKind::Failed(attempt_error(error))),
                None => {
                    let error = ProviderError::retryable(
                        "stream_ended",
                        "the provider stream ended before the reply finished",
                    );
                    return Ok(EndKind::Failed(attempt_error(error)));
                }
            };
            let payload = match event {
                ProviderEvent::Finished(reason) => return Ok(EndKind::Succeeded(reason)),
                ProviderEvent::Usage(q) => usage(q),
                ProviderEvent::Progress(message) => EventPayload::Progress { attempt, message },
                output => match tracker.output_event(attempt, output) {
                    Some(payload) => {
                        if limit_code != ErrorCode::DeadlineExceeded {
                            limit.as_mut().reset(deadline);
                            limit_code = ErrorCode::DeadlineExceeded;
                        }
                        payload
                    }
                    None => continue,
                },
            };
            self.append(payload).await?;
        }
    }

    /// Records an attempt cut by cancellation or the stop time, then ends the execution.
    async fn cut(
        &self,
        target: &PlanTarget,
        mut tally: Tally,
        code: ErrorCode,
        end: AttemptEnd,
    ) -> Result<(), StoreError> {
        let error = AttemptError {
            // A provider call dropped mid-flight may still finish remotely; a wait in the
            // admission queue that was cut started nothing.
            class: if end.admitted {
                ErrorClass::OutcomeUnknown
            } else {
                ErrorClass::NonRetryable
            },
            code: code.as_str().into(),
            message: format!("attempt stopped: {code}"),
            retry_after: None,
        };
        let record = record(target, &tally, &end, error.clone(), Decision::Stop(code));
        self.append(EventPayload::AttemptFailed(record)).await?;
        if end.admitted {
            tally.record_error(error, true);
        }
        let message = if code == ErrorCode::Cancelled {
            self.cancel_message()
        } else {
            stop_message(code, &tally)
        };
        self.fail(code, message, &tally, end.output).await
    }

    async fn fail(
        &self,
        code: ErrorCode,
        message: String,
        tally: &Tally,
        partial_output: Output,
    ) -> Result<(), StoreError> {
        let cancel_reason = (code == ErrorCode::Cancelled)
            .then(|| self.handle.reason())
            .flatten();
        self.append(EventPayload::Failed {
            error: ExecutionError {
                code,
                message,
                outcome: tally.outcome(),
                last_attempt_error: tally.last_error.clone(),
            },
            partial_output,
            cancel_reason,
        })
        .await
    }

    fn cancel_message(&self) -> String {
        match self.handle.reason() {
            Some(reason) => format!("cancelled: {reason}"),
            None => "cancelled".to_owned(),
        }
    }
}
