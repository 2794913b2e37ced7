//! The per-execution driver: plan, then attempts with admission, streaming, the commit rule,
//! retry and fallback, until one terminal event. It reaches callers only by appending to the
//! store. Every wait goes through [`Driver::wait`], which appends what the driver recorded
//! first and races cancellation and the attempt budget's stop time (`stop.rs`), so a
//! cancelled or expired execution releases its permit and aborts its provider call at once.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::time::{Instant, sleep};
use tracing::Instrument;

use super::error::log_internal;
use super::metrics::Metrics;
use super::targets::{ProviderSlot, Slots};
use crate::config::OnUnknownOutcome;
use crate::execution::{
    AttemptCode, AttemptError, Delivery, ErrorClass, ErrorCode, EventPayload, ExecutionId,
    ExecutionInput, ExecutionState, Interruption, Labels, Output, PlanTarget, Priority,
    RoutingPlan, TraceContext, interrupted,
};
use crate::routing::{self, AttemptBudget, Decision};
use crate::store::{EventStore, StoreError};

mod attempt;
mod batch;
pub(super) mod evidence;
mod held;
mod pending;
mod size;
mod span;
mod stop;

use evidence::{
    AttemptEnd, EndKind, Tally, cancel_message, failure, internal_failure, record, stop_message,
};
use size::Size;
pub(crate) use size::SizeLimits;
pub(crate) use stop::DriverHandle;
use stop::Race;

/// Everything one execution needs, resolved at submission.
#[derive(Debug)]
pub(crate) struct Job {
    pub id: ExecutionId,
    /// The caller's trace, continued by provider requests.
    pub trace: Option<TraceContext>,
    pub input: Arc<ExecutionInput>,
    /// The routing plan, made at submission.
    pub plan: Arc<RoutingPlan>,
    pub budget: AttemptBudget,
    /// How large the execution may grow.
    pub size: SizeLimits,
    /// How output reaches the caller: as it comes, or held until its attempt completes.
    pub delivery: Delivery,
    /// Its admission class.
    pub priority: Priority,
    /// Whether its attempts pass their target's health (`Health::admit`): unless the policy
    /// has health off, or the plan tries every target anyway.
    pub health_gate: bool,
    pub labels: Arc<Labels>,
}

/// The shared parts a driver works with.
#[derive(Clone)]
pub(crate) struct Deps {
    pub store: Arc<dyn EventStore>,
    pub providers: Arc<Slots>,
    /// Time to first output is the driver's to measure; the rest is counted from the store.
    /// `None` with metrics off.
    pub metrics: Option<Arc<Metrics>>,
}

/// Drives `job` to its terminal event. A panic inside (say, in a provider adapter) is caught:
/// the permit it held is released as the stack unwinds, and the execution still ends, with
/// `internal_error`, instead of staying live forever.
///
/// Returns the code of the terminal event it recorded (`completed` for success), or `None`
/// when it recorded none (someone else ended the execution, or the store refused).
pub(crate) async fn run(deps: Deps, job: Job, handle: Arc<DriverHandle>) -> Option<&'static str> {
    let id = job.id;
    let store = deps.store.clone();
    let mut driver = Driver {
        size: Size::new(job.size),
        deps,
        job,
        handle,
        pending: Vec::new(),
        held: Vec::new(),
        span: tracing::Span::none(),
        ended: None,
        began_at: None,
        sent_at: None,
    };
    let result = AssertUnwindSafe(driver.drive()).catch_unwind().await;
    let (error, panicked) = match result {
        // Someone else ended it (a cancellation that found no driver, or shutdown).
        Ok(Ok(()) | Err(StoreError::AlreadyTerminal(_))) => return driver.ended,
        // The store failed: nothing more can be recorded. The execution stays at its last
        // durable event, and the next start ends it with `outcome_unknown`.
        Ok(Err(StoreError::Unavailable(cause))) => {
            tracing::warn!(execution_id = %id, cause = %cause, "the event store is unavailable: this execution stops at its last durable event");
            return None;
        }
        Ok(Err(error)) => (error.to_string(), false),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            (format!("driver panicked: {what}"), true)
        }
    };
    let error_id = log_internal(&format!("execution {id}: {error}"));
    // After a panic the store still works: the evidence the driver had is kept.
    if panicked && matches!(driver.keep_evidence(&error_id).await, Ok(true)) {
        return driver.ended;
    }
    // The draft draws no ACCEPTED -> FAILED edge: a failure that struck before routing
    // began is recorded after an (empty) routing step, so the execution still ends.
    if let Ok(view) = store.get(id).await
        && view.state == ExecutionState::Accepted
    {
        let plan = RoutingPlan {
            policy: view.policy.clone(),
            required_capabilities: Vec::new(),
            targets: Vec::new(),
            ended_before_routing: Some(
                format!("ended with internal_error before it was routed (error id {error_id})")
                    .into(),
            ),
            tried_anyway: false,
        };
        if let Err(e) = store
            .append(id, EventPayload::Routing(Arc::new(plan)))
            .await
        {
            tracing::error!(execution_id = %id, error = %e, "could not record the internal failure");
            return None;
        }
    }
    match store.append(id, internal_failure(&error_id)).await {
        Ok(_) => Some(ErrorCode::InternalError.as_str()),
        Err(e) => {
            tracing::error!(execution_id = %id, error = %e, "could not record the internal failure");
            None
        }
    }
}

struct Driver {
    deps: Deps,
    job: Job,
    handle: Arc<DriverHandle>,
    /// Events recorded but not yet appended (`pending.rs`).
    pending: Vec<EventPayload>,
    /// Under buffered delivery, the running attempt's output events, appended only with its
    /// completion (`held.rs`).
    held: Vec<EventPayload>,
    /// What the execution holds so far against its bounds (`size.rs`).
    size: Size,
    /// The running attempt's span (`span.rs`), none between attempts: its usage is recorded
    /// on it, and its provider request continues the trace from it.
    span: tracing::Span,
    /// The code of the terminal event appended, once it is (`completed` for success).
    ended: Option<&'static str>,
    /// When the running attempt began, and when it was sent (with metrics on).
    began_at: Option<Instant>,
    sent_at: Option<Instant>,
}

impl Driver {
    async fn drive(&mut self) -> Result<(), StoreError> {
        let plan = self.job.plan.clone();
        if !self.begin(&plan).await? {
            return Ok(());
        }
        let targets: Vec<&PlanTarget> = plan.to_attempt().collect();
        self.attempts(&targets).await
    }

    /// What comes before any attempt: whether the execution is still to be driven, and its
    /// routing step. False when it ended here (or before).
    async fn begin(&mut self, plan: &Arc<RoutingPlan>) -> Result<bool, StoreError> {
        // A cancellation that came between the store's create and this driver's registration
        // found no driver and was stored as the end: the provider is never called for it.
        if self.deps.store.state(self.job.id).await?.is_terminal() {
            return Ok(false);
        }
        if self.handle.is_cancelled() {
            let message = self.cancel_message();
            let no_output = Output::default();
            self.fail(ErrorCode::Cancelled, message, &Tally::default(), no_output)
                .await?;
            return Ok(false);
        }
        self.record(EventPayload::Routing(plan.clone()));
        if plan.kept().next().is_none() {
            let message = format!(
                "no target of policy `{}` has every required capability ({})",
                plan.policy,
                plan.required_capabilities.join(", ")
            );
            let no_output = Output::default();
            self.fail(
                ErrorCode::NoCapableTarget,
                message,
                &Tally::default(),
                no_output,
            )
            .await?;
            return Ok(false);
        }
        if plan.to_attempt().next().is_none() {
            let ejected: Vec<String> = plan
                .kept()
                .filter_map(|t| {
                    let why = t.ejected.as_ref()?;
                    Some(format!("{}/{} ({})", t.provider, t.model, why.reason))
                })
                .collect();
            let message = format!(
                "every capable target of policy `{}` is ejected by its health, and the policy \
                 says on_all_unhealthy = \"fail\": {}",
                plan.policy,
                ejected.join("; ")
            );
            let no_output = Output::default();
            self.fail(
                ErrorCode::NoHealthyTarget,
                message,
                &Tally::default(),
                no_output,
            )
            .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Attempts on `targets`, in order, within the budget, until one succeeds or the budget
    /// says stop.
    async fn attempts(&mut self, targets: &[&PlanTarget]) -> Result<(), StoreError> {
        let (stop_at, stop_code) = self.job.budget.stop_at();
        // An attempt (its admission wait included) may only start with `min_attempt_time` of
        // the budget left.
        let (start_by, late_code) = self.job.budget.start_by();
        let providers = self.deps.providers.clone();
        let mut tally = Tally::default();
        let mut index = 0;
        loop {
            let target = targets[index];
            let slot = providers.get(&target.provider);
            tally.attempts += 1;
            let mut race = Race::new(&self.handle, start_by, late_code);
            let mut end = self.attempt(slot, target, &mut tally, &mut race).await?;
            tally.any_sent |= end.sent;
            if let (Some(slot), true) = (slot, end.admitted) {
                let now = Instant::now();
                match &end.kind {
                    EndKind::Succeeded(_) => slot.health.succeeded(&target.model, now),
                    EndKind::Failed(error) => {
                        slot.health.failed(&target.model, error, now, self.job.id);
                    }
                    // Cancellation or a time limit says nothing of the target.
                    EndKind::Cut(_) => {}
                }
            }
            let error = match &end.kind {
                EndKind::Succeeded(_) => return Ok(()),
                EndKind::Cut(code) => return self.cut(target, tally, *code, end).await,
                EndKind::Failed(error) => error.clone(),
            };
            let on_unknown_outcome =
                slot.map_or(OnUnknownOutcome::Stop, |s| s.config.on_unknown_outcome);
            let failure = routing::Failure {
                error: &error,
                committed: end.committed,
                attempts: tally.attempts,
                on_target: tally.on_target,
                admitted: end.admitted,
                has_next_target: index + 1 < targets.len(),
                on_unknown_outcome,
                // Only a wait's length is drawn; the plan's order never is.
                jitter: getrandom::u64().unwrap_or(u64::MAX),
                last_real: tally.last_real,
            };
            if !failure.refused() {
                tally.last_real = Some(self.job.budget.ends_with(&error, on_unknown_outcome));
            }
            let mut decision = self.job.budget.decide(failure, Instant::now());
            // A retry onto a target its health has just ejected would be refused: the next
            // target is tried at once instead.
            if let (Decision::Retry { .. }, Some(slot)) = (decision, slot)
                && self.job.health_gate
                && index + 1 < targets.len()
                && matches!(
                    slot.health.check(&target.model, Instant::now()),
                    routing::Verdict::Ejected(_)
                )
            {
                decision = Decision::Fallback;
            }
            tracing::debug!(execution_id = %self.job.id, attempt = tally.attempts, code = %error.code, next = ?decision, "attempt failed");
            let record = record(target, &tally, &mut end, error.clone(), decision);
            self.record(EventPayload::AttemptFailed(Arc::new(record)));
            tally.record_error(error, end.admitted);
            match decision {
                Decision::Retry { after } => {
                    let mut race = Race::new(&self.handle, stop_at, stop_code);
                    if let Err(code) = self.wait(&mut race, sleep(after)).await? {
                        let message = self.stop_message(code, &tally);
                        return self.fail(code, message, &tally, Output::default()).await;
                    }
                }
                Decision::Fallback => {
                    index += 1;
                    tally.on_target = 0;
                }
                Decision::Stop(code) => {
                    // Output exists only once committed: then it is the evidence.
                    return self
                        .fail(code, stop_message(code, &tally), &tally, end.output)
                        .await;
                }
            }
        }
    }

    /// Runs one attempt on `target` (served by `slot`): admission, then the provider stream.
    async fn attempt(
        &mut self,
        slot: Option<&ProviderSlot>,
        target: &PlanTarget,
        tally: &mut Tally,
        race: &mut Race,
    ) -> Result<AttemptEnd, StoreError> {
        // Every attempt has a span, an attempt refused or cut while it queued too.
        let adapter = slot.map(|s| s.config.adapter.name());
        let span = span::attempt(&self.job.id, tally.attempts, adapter, target);
        self.span = span.clone();
        let end = self
            .admit_and_stream(slot, target, tally, race)
            .instrument(span.clone())
            .await;
        span::ended(&span, end.as_ref().map(|end| &end.kind));
        self.span = tracing::Span::none();
        end
    }

    /// Records an attempt cut by cancellation or the stop time, then ends the execution.
    async fn cut(
        &mut self,
        target: &PlanTarget,
        mut tally: Tally,
        code: ErrorCode,
        mut end: AttemptEnd,
    ) -> Result<(), StoreError> {
        let error = AttemptError {
            // A provider call dropped mid-flight may still finish remotely; a wait in the
            // admission queue that was cut started nothing, and the same target could serve
            // it later.
            class: if end.admitted && end.sent {
                ErrorClass::OutcomeUnknown
            } else {
                ErrorClass::Retryable
            },
            code: AttemptCode::cut_by(code),
            message: format!("attempt stopped: {code}"),
            retry_after: None,
        };
        let record = record(
            target,
            &tally,
            &mut end,
            error.clone(),
            Decision::Stop(code),
        );
        self.record(EventPayload::AttemptFailed(Arc::new(record)));
        if end.admitted {
            tally.record_error(error, end.sent);
        }
        let message = self.stop_message(code, &tally);
        self.fail(code, message, &tally, end.output).await
    }

    async fn fail(
        &mut self,
        code: ErrorCode,
        message: String,
        tally: &Tally,
        partial_output: Output,
    ) -> Result<(), StoreError> {
        self.record(failure(
            code,
            message,
            tally.outcome(),
            tally.last_error.clone(),
            partial_output,
            self.handle.reason(),
        ));
        self.flush().await
    }

    /// Ends the execution after a panic with what the driver had: the events it recorded
    /// (usage facts among them), the running attempt failed with `internal` (its outcome
    /// unknown: the provider may still be working), and the output it streamed as partial
    /// output. `false` (nothing routed yet) or `Err` leaves the ending to the last resort.
    async fn keep_evidence(&mut self, error_id: &str) -> Result<bool, StoreError> {
        let id = self.job.id;
        self.flush().await?;
        let view = self.deps.store.get(id).await?;
        match view.state {
            state if state.is_terminal() => return Ok(true),
            // Nothing routed yet: the last resort records the empty routing step.
            ExecutionState::Accepted => return Ok(false),
            _ => {}
        }
        let events = self
            .deps
            .store
            .follow(id)
            .await?
            .read(0, usize::MAX)
            .await?;
        let why = Interruption {
            code: ErrorCode::InternalError,
            message: format!("internal_error (error id {error_id})"),
            attempt_message: format!(
                "the runtime failed during this attempt (error id {error_id})"
            ),
        };
        for payload in interrupted(&view, &events, why) {
            self.record(payload);
        }
        self.flush().await.map(|()| true)
    }

    /// Why the execution stopped with `code`: the caller's reason for a cancellation.
    fn stop_message(&self, code: ErrorCode, tally: &Tally) -> String {
        if code == ErrorCode::Cancelled {
            self.cancel_message()
        } else {
            stop_message(code, tally)
        }
    }

    fn cancel_message(&self) -> String {
        cancel_message(self.handle.reason().as_deref())
    }
}
