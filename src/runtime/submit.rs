//! A submission on its way in: checked against the configuration (`validate.rs`), made into
//! what the store takes and what its driver runs (its plan with health, its budget and
//! limits, its idempotent identity), stored, and its driver started; or, for a key the store
//! already holds, the execution it names.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use futures_util::FutureExt;
use tokio::time::Instant;
use tracing::Instrument;

use super::driver::{self, Job, SizeLimits};
use super::validate::validate;
use super::{EventStream, NotReady, Runtime, RuntimeError, spawn_tracked, trace};
use crate::config::HealthMode;
use crate::execution::idempotency::{Idempotency, Resolved};
use crate::execution::{Acceptance, EventPayload, ExecuteRequest, Execution, ExecutionId};
use crate::routing::{self, AttemptBudget};
use crate::store::{Created, Follower, NewExecution, StoreError};

/// Whether a submission also follows its execution.
#[derive(Debug, Clone, Copy)]
pub(super) enum Follow {
    No,
    FromStart,
}

/// An accepted submission: its view at acceptance, or its events when it is followed.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per submission and matched at once: boxing the view would cost \
              Submit an allocation for nothing"
)]
pub(super) enum Accepted {
    Viewed(Execution),
    Following(EventStream),
}

/// A submission accepted at once, or the rest of it to wait for: its store's create or its
/// follower, when the store answers over the network.
#[expect(
    clippy::large_enum_variant,
    reason = "as `Accepted`: returned once per submission and matched at once"
)]
pub(super) enum Step<'a> {
    Now(Accepted),
    Later(Rest<'a>),
}

/// The rest of a submission, to wait for.
pub(super) type Rest<'a> =
    Pin<Box<dyn Future<Output = Result<Accepted, RuntimeError>> + Send + 'a>>;

/// What a submission not answered at once waits for: the rest of its [`Step`], or a look
/// at an execution by its id (an idempotent repeat's, or one the caller did not follow).
pub(super) enum Then<'a> {
    Wait(Rest<'a>),
    Look(ExecutionId),
}

impl Runtime {
    /// Validates, stores and starts a submission. A plain function that polls the store's
    /// futures once in place (`now_or_never`: a future still pending goes to a task or to the
    /// caller, which polls it again before waiting): an `async` one would keep every value it
    /// moves on (the request, the execution as the store takes it, the driver's job, the
    /// view) beside the others in its state, kilobytes that every `Execute` future would
    /// carry and be copied with.
    pub(super) fn accept(
        &self,
        request: ExecuteRequest,
        follow: Follow,
    ) -> Result<Step<'_>, RuntimeError> {
        if let Some(refusal) = NotReady::of(self.state()) {
            return Err(RuntimeError::Unavailable(refusal));
        }
        self.start_expiry();
        let (new, job, key) = self.prepare(request)?;
        self.create_and_start(new, job, key, follow)
    }

    /// A valid request as the store takes it and as its driver will run it, and its
    /// idempotency key.
    fn prepare(
        &self,
        mut request: ExecuteRequest,
    ) -> Result<(NewExecution, Job, Option<String>), RuntimeError> {
        let config = &self.inner.config;
        let now = SystemTime::now();
        let validated = validate(config, &request, now).map_err(RuntimeError::InvalidArgument)?;
        // A request that adds no capability of its own routes by the plan made at start-up.
        let plan = match &validated.required {
            Cow::Borrowed(_) => self
                .inner
                .plans
                .get(&validated.ability.name, &validated.policy.name),
            Cow::Owned(_) => None,
        }
        .unwrap_or_else(|| Arc::new(routing::plan(config, validated.policy, &validated.required)));
        let plan = match validated.target {
            Some(target) => Arc::new(routing::pinned(&plan, target)),
            None => plan,
        };
        let plan = self
            .inner
            .deps
            .providers
            .with_health(plan, validated.policy);
        let health_gate = validated.policy.health == HealthMode::On && !plan.tried_anyway;
        let id = ExecutionId::at(now);
        let idempotency = Idempotency::of(
            &request,
            Resolved {
                policy: &validated.policy.name,
                max_attempts: validated.limits.max_attempts,
                allow_fallback: validated.limits.allow_fallback,
                delivery: validated.limits.delivery,
            },
        );
        // Fingerprinted above; moved, not copied, from here on.
        let labels = Arc::new(std::mem::take(&mut request.labels));
        let new = NewExecution {
            id,
            accepted: EventPayload::Accepted(Arc::new(Acceptance {
                ability: validated.ability.name.clone(),
                policy: validated.policy.name.clone(),
                limits: validated.limits.clone(),
            })),
            labels: labels.clone(),
            idempotency,
            input_bytes: request.input.retained_bytes(),
        };
        let start = Instant::now();
        let job = Job {
            id,
            trace: request.trace,
            input: Arc::new(request.input),
            plan,
            budget: AttemptBudget::new(
                &validated.limits,
                validated.policy,
                start,
                validated.time_left,
            ),
            size: SizeLimits {
                max_output_bytes: config.server.max_output_bytes,
                max_events: config.server.max_events_per_execution,
            },
            delivery: validated.limits.delivery,
            priority: validated.limits.priority,
            health_gate,
            labels,
        };
        Ok((new, job, request.idempotency_key))
    }

    /// Stores a new execution and starts its driver (or answers for the one its key names).
    fn create_and_start(
        &self,
        new: NewExecution,
        job: Job,
        key: Option<String>,
        follow: Follow,
    ) -> Result<Step<'_>, RuntimeError> {
        // The gate to the store: either shutdown has begun (nothing is stored) or this
        // submission counts among the work shutdown drains, from before its create until its
        // driver is registered, so an execution stored is always driven, never refused.
        let draining = {
            let _registrations = self.drivers();
            if self.inner.stopping.load(Ordering::Acquire) {
                return Err(RuntimeError::Unavailable(NotReady::Stopping));
            }
            self.inner.tasks.token()
        };
        let mut created = self.inner.deps.store.create(new);
        let Some(created) = (&mut created).now_or_never() else {
            // The store waits for I/O; the record may exist already. From here on a dropped
            // caller must not leave it with nobody driving it, so creating and starting the
            // driver finish in a task the caller cannot cancel.
            let runtime = self.clone();
            // In the caller's span, so the execution's span is still its child. Boxed as it
            // is made: the task then holds a pointer, and spawning it copies no more than that.
            let finish = self.inner.tasks.spawn(Box::pin(
                async move {
                    let started = runtime.start(job, created.await, key, follow);
                    drop(draining);
                    match started? {
                        Step::Now(accepted) => Ok(accepted),
                        Step::Later(rest) => rest.await,
                    }
                }
                .in_current_span(),
            ));
            let finished = async move {
                finish
                    .await
                    .unwrap_or_else(|e| Err(RuntimeError::internal(&e)))
            };
            return Ok(Step::Later(Box::pin(finished)));
        };
        let started = self.start(job, created, key, follow);
        drop(draining);
        started
    }

    /// Starts driving a stored execution, or answers for one that was not stored.
    fn start(
        &self,
        job: Job,
        created: Result<Created, StoreError>,
        key: Option<String>,
        follow: Follow,
    ) -> Result<Step<'_>, RuntimeError> {
        let view = match created {
            Ok(Created::New(view)) => {
                if let Some(metrics) = &self.inner.metrics {
                    metrics.started(&view.ability);
                }
                view
            }
            // An idempotent repeat: the execution was there already, and its caller follows
            // it as any other (`Runtime::execute`).
            Ok(Created::Existing(view)) => return Ok(Step::Now(Accepted::Viewed(view))),
            Err(e) => return Err(RuntimeError::from_store(e, key.as_deref())),
        };
        let id = job.id;
        // The submission got in before shutdown began (the gate in `create_and_start`): it is
        // driven, and drained or cancelled like any other. Registered under the drivers' lock,
        // so a shutdown that is already cancelling every driver cancels this one too.
        // Boxed (pinned on the heap) as it is made, so it can be polled here and then handed,
        // unmoved, to a task of its own.
        let mut driver = {
            let mut drivers = self.drivers();
            // A cancellation that came first left its handle here, cancelled: the driver
            // takes it and ends at once.
            let handle = drivers.entry(id).or_default().clone();
            if self.inner.cancelling.load(Ordering::Acquire) {
                handle.cancel(Some("runtime shutting down".into()));
            }
            let runtime = self.clone();
            let span = trace::execution_span(&view);
            let ended = span.clone();
            Box::pin(
                self.inner.tasks.track_future(
                    async move {
                        let outcome = driver::run(runtime.inner.deps.clone(), job, handle).await;
                        runtime.drivers().remove(&id);
                        if outcome.is_none() {
                            // No end recorded here (another ended it, or the store did not
                            // answer): a store shared by replicas ends it if it is unfinished.
                            runtime.inner.deps.store.abandoned(id);
                        }
                        trace::record_end(&ended, outcome);
                    }
                    .instrument(span),
                ),
            )
        };
        let events = match follow {
            Follow::FromStart => {
                let mut follower = self.inner.deps.store.follow(id);
                match (&mut follower).now_or_never() {
                    Some(follower) => Some(self.following(follower, id)),
                    None => {
                        // The store answers over the network: the driver goes to its task
                        // first, so a caller who leaves meanwhile leaves it driven.
                        spawn_tracked(driver);
                        return Ok(Step::Later(Box::pin(async move {
                            self.following(follower.await, id).map(Accepted::Following)
                        })));
                    }
                }
            }
            Follow::No => None,
        };
        // The driver's first step runs here, up to its first wait (admission, the provider's
        // first byte, a backoff), and only then moves to a task of its own. A provider that
        // answers at once is served without a task hop, and a follower of this execution
        // finds the events of that step already stored, to send as one message batch. A
        // follower the store could not make leaves the execution driven all the same.
        if driver.as_mut().now_or_never().is_none() {
            spawn_tracked(driver);
        }
        tracing::debug!(execution_id = %id, ability = %view.ability, "accepted");
        Ok(Step::Now(match events {
            Some(events) => Accepted::Following(events?),
            None => Accepted::Viewed(view),
        }))
    }

    /// The events of stored and driven execution `id`, through the follower the store made
    /// for it; one it could not make is logged, since the execution goes on without its
    /// caller, who gets the store's error.
    fn following(
        &self,
        follower: Result<Follower, StoreError>,
        id: ExecutionId,
    ) -> Result<EventStream, RuntimeError> {
        self.events(follower, id, 0).inspect_err(|e| {
            tracing::warn!(
                execution_id = %id, error = %e,
                "stored and driven, but its follower could not be made: the caller gets the error"
            );
        })
    }
}
