//! The embedded core: submit, execute, watch, get, cancel and metadata, with no gRPC type in
//! sight. The gRPC service, the CLI and tests all drive a [`Runtime`]. Below the facade: the
//! per-execution driver (`driver`), request validation against the configuration
//! (`validate`), following an execution (`watch`), the runtime's self-description
//! (`metadata`), providers paired with their admission gates (`targets`), and the errors the
//! runtime returns (`error`).

mod cancel;
mod driver;
mod error;
mod expiry;
pub(crate) mod limits;
mod metadata;
mod metrics;
mod remote_cancel;
mod targets;
pub(crate) mod trace;
mod usage;
mod validate;
mod watch;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::{Config, HealthMode};
use crate::execution::idempotency::{Idempotency, Resolved};
use crate::execution::{Acceptance, EventPayload, ExecuteRequest, Execution, ExecutionId, IdMap};
use crate::provider::{Provider, ProviderInitError};
use crate::routing::{self, AttemptBudget, Plans};
use crate::store::{
    self, Created, EventStore, NewExecution, OpenStoreError, StoreError, UsageCursor,
};
use cancel::CANCEL_GRACE;
use driver::{Deps, DriverHandle, Job, SizeLimits};
use targets::Slots;
use validate::validate;

pub use crate::routing::{HealthState, TargetHealth, Waiting};
pub use error::{Exhausted, FieldViolation, NotReady, RuntimeError, Violations};
pub use metadata::{GlobalLimit, ModelStatus, ProviderStatus, RuntimeMetadata, RuntimeState};
pub use usage::{UsageRecord, UsageStream};
pub use watch::EventStream;

/// Whether a submission also follows its execution.
#[derive(Debug, Clone, Copy)]
enum Follow {
    No,
    FromStart,
}

/// An accepted submission: its view at acceptance, or its events when it is followed.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per submission and matched at once: boxing the view would cost \
              Submit an allocation for nothing"
)]
enum Accepted {
    Viewed(Execution),
    Following(EventStream),
}

/// The runtime. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<Config>,
    /// Only when `server.metrics_listen` asks for them: nobody scrapes otherwise, and no
    /// execution pays for counting.
    metrics: Option<Arc<metrics::Metrics>>,
    deps: Deps,
    plans: Plans,
    drivers: Mutex<IdMap<Arc<DriverHandle>>>,
    tasks: TaskTracker,
    stopping: AtomicBool,
    /// Cancelled when shutdown begins: it ends the streams that would never end otherwise
    /// (the usage export) and the expiry task.
    stop: CancellationToken,
    /// Whether the expiry task (`expiry.rs`) was started.
    expiring: AtomicBool,
    /// Whether shutdown's drain timeout passed and every driver is being cancelled.
    cancelling: AtomicBool,
}

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A provider's adapter could not be built.
    #[error(transparent)]
    Provider(#[from] ProviderInitError),
    /// The configured store could not be opened.
    #[error("store: {0}")]
    Store(#[from] OpenStoreError),
}

/// Builds a [`Runtime`] from a configuration, optionally with a store or provider adapters of
/// the caller's own (at the SPI boundary).
pub struct RuntimeBuilder {
    config: Config,
    store: Option<Arc<dyn EventStore>>,
    providers: BTreeMap<String, Arc<dyn Provider>>,
}

impl RuntimeBuilder {
    /// Uses `store` instead of the configured one.
    pub fn store(mut self, store: Arc<dyn EventStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Uses `provider` as the adapter of the configured provider called `name`.
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.into(), provider);
        self
    }

    /// The runtime. Fails when a provider's adapter cannot be built (an HTTP client's TLS
    /// set-up) or the file store cannot be opened (its directory is locked by another
    /// process, or its journal does not read); configuration errors were already caught when
    /// the `Config` was validated. Opening a file store replays its journal and ends the
    /// executions it left running.
    pub fn build(self) -> Result<Runtime, InitError> {
        let store = match self.store {
            Some(store) => store,
            None => store::open(&self.config.store)?,
        };
        // With metrics on, every append is counted on its way to the store.
        let metrics = self
            .config
            .server
            .metrics_listen
            .is_some()
            .then(|| Arc::new(metrics::Metrics::new(&self.config, store.durable())));
        let store: Arc<dyn EventStore> = match &metrics {
            Some(metrics) => Arc::new(metrics::Metered::new(store, metrics.clone())),
            None => store,
        };
        let providers = Arc::new(Slots::new(&self.config, self.providers)?);
        let plans = Plans::new(&self.config);
        let runtime = Runtime {
            inner: Arc::new(Inner {
                plans,
                deps: Deps {
                    store,
                    providers,
                    metrics: metrics.clone(),
                },
                metrics,
                config: Arc::new(self.config),
                drivers: Mutex::new(IdMap::default()),
                tasks: TaskTracker::new(),
                stopping: AtomicBool::new(false),
                stop: CancellationToken::new(),
                expiring: AtomicBool::new(false),
                cancelling: AtomicBool::new(false),
            }),
        };
        runtime.start_expiry();
        Ok(runtime)
    }
}

/// Runs a driver in a task of its own.
fn spawn_tracked(driver: impl std::future::Future<Output = ()> + Send + 'static) {
    #[expect(
        clippy::disallowed_methods,
        reason = "every driver is on the runtime's tracker already (`track_future`)"
    )]
    tokio::spawn(driver);
}

impl Runtime {
    /// A runtime with the configured store and providers; see [`RuntimeBuilder::build`].
    pub fn new(config: Config) -> Result<Self, InitError> {
        Self::builder(config).build()
    }

    /// A builder for a runtime with parts of the caller's own.
    pub fn builder(config: Config) -> RuntimeBuilder {
        RuntimeBuilder {
            config,
            store: None,
            providers: BTreeMap::new(),
        }
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Whether new work is accepted.
    pub fn state(&self) -> RuntimeState {
        if self.inner.stopping.load(Ordering::Acquire) {
            RuntimeState::Stopping
        } else if self.inner.deps.store.failed() {
            RuntimeState::Unavailable
        } else {
            RuntimeState::Ready
        }
    }

    /// Validates `request` as [`submit`](Self::submit) would, without running it: `Ok` when
    /// submit would accept it (capacity and state aside), else the same `InvalidArgument`.
    pub fn check(&self, request: &ExecuteRequest) -> Result<(), RuntimeError> {
        validate(&self.inner.config, request, SystemTime::now())
            .map(drop)
            .map_err(RuntimeError::InvalidArgument)
    }

    /// Validates and stores a request, starts driving it, and returns at once: after the
    /// driver's first step, which runs here up to its first wait (see below), with the view
    /// at acceptance.
    ///
    /// With an idempotency key: the same key and the same request (deadline aside) return
    /// the first execution; the same key with a different request is `AlreadyExists`.
    ///
    /// Once the store has the execution, it is driven to a terminal event even if the caller
    /// drops this future: a store whose create waits (for I/O) finishes the submission in a
    /// task of its own.
    pub async fn submit(&self, request: ExecuteRequest) -> Result<Execution, RuntimeError> {
        match self.accept(request, Follow::No).await? {
            Accepted::Viewed(view) => Ok(view),
            Accepted::Following(events) => self.get(events.execution_id()).await,
        }
    }

    /// Submits and follows from the first event. The stream follows the execution before its
    /// driver takes a step, so the store cannot let a quick execution go before its own
    /// caller reads it.
    pub async fn execute(&self, request: ExecuteRequest) -> Result<EventStream, RuntimeError> {
        match self.accept(request, Follow::FromStart).await? {
            Accepted::Following(events) => Ok(events),
            Accepted::Viewed(view) => self.watch(view.id, 0).await,
        }
    }

    async fn accept(
        &self,
        request: ExecuteRequest,
        follow: Follow,
    ) -> Result<Accepted, RuntimeError> {
        if let Some(refusal) = NotReady::of(self.state()) {
            return Err(RuntimeError::Unavailable(refusal));
        }
        self.start_expiry();
        let (new, job, key) = self.prepare(request)?;
        self.create_and_start(new, job, key, follow).await
    }

    /// A valid request as the store takes it and as its driver will run it, and its
    /// idempotency key.
    fn prepare(
        &self,
        request: ExecuteRequest,
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
        let id = ExecutionId::new();
        let labels = Arc::new(request.labels.clone());
        let idempotency = Idempotency::of(
            &request,
            Resolved {
                policy: &validated.policy.name,
                max_attempts: validated.limits.max_attempts,
                allow_fallback: validated.limits.allow_fallback,
                delivery: validated.limits.delivery,
            },
        );
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
    async fn create_and_start(
        &self,
        new: NewExecution,
        job: Job,
        key: Option<String>,
        follow: Follow,
    ) -> Result<Accepted, RuntimeError> {
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
        let created = match futures_util::poll!(created.as_mut()) {
            Poll::Ready(created) => created,
            Poll::Pending => {
                // The store waits for I/O; the record may exist already. From here on a
                // dropped caller must not leave it with nobody driving it, so creating and
                // starting the driver finish in a task the caller cannot cancel.
                let runtime = self.clone();
                // In the caller's span, so the execution's span is still its child.
                let finish = self.inner.tasks.spawn(
                    async move {
                        let created = created.await;
                        let started = Box::pin(runtime.start(job, created, key, follow)).await;
                        drop(draining);
                        started
                    }
                    .in_current_span(),
                );
                return finish
                    .await
                    .unwrap_or_else(|e| Err(RuntimeError::internal(&e)));
            }
        };
        let started = self.start(job, created, key, follow).await;
        drop(draining);
        started
    }

    /// Starts driving a stored execution, or answers for one that was not stored.
    async fn start(
        &self,
        job: Job,
        created: Result<Created, StoreError>,
        key: Option<String>,
        follow: Follow,
    ) -> Result<Accepted, RuntimeError> {
        let view = match created {
            Ok(Created::New(view)) => {
                if let Some(metrics) = &self.inner.metrics {
                    metrics.started(&view.ability);
                }
                view
            }
            Ok(Created::Existing(view)) => {
                // An idempotent repeat: the execution was there already.
                return match follow {
                    Follow::FromStart => self.watch(view.id, 0).await.map(Accepted::Following),
                    Follow::No => Ok(Accepted::Viewed(view)),
                };
            }
            Err(e) => return Err(RuntimeError::from_store(e, key.as_deref())),
        };
        let id = job.id;
        // The submission got in before shutdown began (the gate in `admit`): it is driven,
        // and drained or cancelled like any other. Registered under the drivers' lock, so a
        // shutdown that is already cancelling every driver cancels this one too.
        // The driver is boxed as soon as it is made: this future holds a pointer to it, not
        // the driver's own state (which would make every `Submit` and `Execute` future as
        // large as the driver's, copied whole into its box on every call).
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
                let mut watching = std::pin::pin!(self.watch(id, 0));
                match futures_util::poll!(watching.as_mut()) {
                    Poll::Ready(events) => Some(events?),
                    Poll::Pending => {
                        // The store answers over the network: the driver goes to its task
                        // first, so a caller who leaves meanwhile leaves it driven.
                        spawn_tracked(driver);
                        return watching.await.map(Accepted::Following);
                    }
                }
            }
            Follow::No => None,
        };
        // The driver's first step runs here, up to its first wait (admission, the provider's
        // first byte, a backoff), and only then moves to a task of its own. A provider that
        // answers at once is served without a task hop, and a follower of this execution
        // finds the events of that step already stored, to send as one message batch.
        if futures_util::poll!(driver.as_mut()).is_pending() {
            spawn_tracked(driver);
        }
        tracing::debug!(execution_id = %id, ability = %view.ability, "accepted");
        Ok(match events {
            Some(events) => Accepted::Following(events),
            None => Accepted::Viewed(view),
        })
    }

    /// Every event with `sequence > after_sequence`, then live events, ending after the
    /// terminal one. Dropping the stream does not cancel the execution.
    pub async fn watch(
        &self,
        id: ExecutionId,
        after_sequence: u64,
    ) -> Result<EventStream, RuntimeError> {
        let max_watchers = self.inner.config.server.max_watchers_per_execution;
        let inner = &self.inner;
        watch::follow(&*inner.deps.store, id, after_sequence, max_watchers, || {
            inner.metrics.as_ref().map(|m| m.open_stream())
        })
        .await
    }

    /// Every usage fact the store holds after `after` (from the first without one), in the
    /// store's usage order, then live ones, until shutdown begins (`usage.rs`).
    pub fn stream_usage(&self, after: Option<UsageCursor>) -> UsageStream {
        let stopping = self.inner.stop.clone().cancelled_owned();
        UsageStream::new(self.inner.deps.store.clone(), after, stopping)
    }

    /// The materialized view.
    pub async fn get(&self, id: ExecutionId) -> Result<Execution, RuntimeError> {
        self.inner
            .deps
            .store
            .get(id)
            .await
            .map_err(|e| RuntimeError::from_store(e, None))
    }

    /// What the runtime is and can do now.
    pub fn metadata(&self) -> RuntimeMetadata {
        let inner = &self.inner;
        metadata::describe(
            self.state(),
            &*inner.deps.store,
            &inner.deps.providers,
            &inner.config,
        )
    }

    /// Stops admitting work, lets running executions finish within `drain_timeout`, then
    /// cancels the rest and waits for every driver to record its terminal event, at most
    /// five seconds more.
    pub async fn shutdown(&self, drain_timeout: Duration) {
        {
            let _registrations = self.drivers();
            self.inner.stopping.store(true, Ordering::Release);
        }
        self.inner.stop.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(drain_timeout, self.inner.tasks.wait())
            .await
            .is_err()
        {
            let handles: Vec<Arc<DriverHandle>> = {
                let drivers = self.drivers();
                // A driver that registers from now on is cancelled as it registers.
                self.inner.cancelling.store(true, Ordering::Release);
                drivers.values().cloned().collect()
            };
            tracing::info!(
                remaining = handles.len(),
                "drain timeout passed; cancelling"
            );
            for handle in handles {
                handle.cancel(Some("runtime shutting down".into()));
            }
            // Cancelled drivers end at their next wait; one stuck in an adapter that never
            // yields must not hold the process open.
            if tokio::time::timeout(CANCEL_GRACE, self.inner.tasks.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    remaining = self.drivers().len(),
                    "executions did not end after being cancelled; stopping without them"
                );
            }
        }
        // The permits the ended attempts released go back to the global limiters now, not
        // at the end of their leases after the process is gone.
        for slot in self.inner.deps.providers.iter() {
            slot.admission.flush().await;
        }
    }

    /// The gauge of the bytes the server's connections hold unsent, when metrics are on.
    pub(crate) fn unsent_gauge(&self) -> Option<prometheus_client::metrics::gauge::Gauge> {
        self.inner.metrics.as_ref().map(|m| m.unsent.clone())
    }

    /// The metrics in the Prometheus text format, gauges read now; `None` when the config
    /// sets no `server.metrics_listen` (then nothing is counted).
    pub fn metrics_text(&self) -> Option<String> {
        let metrics = self.inner.metrics.as_ref()?;
        Some(metrics.encode(&self.metadata()))
    }

    /// Flushes and releases the store (the file store's journal and directory lock): call it
    /// after [`shutdown`](Self::shutdown) and once every reader has gone.
    pub fn close(&self) {
        self.inner.deps.store.close();
    }

    /// Starts the expiry task (and, on a store several replicas share, the task that carries
    /// out other replicas' cancels) once, in the tokio runtime this is called in: at build, or
    /// at the first submission of a runtime built outside one.
    fn start_expiry(&self) {
        if self.inner.expiring.load(Ordering::Acquire) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.expiring.swap(true, Ordering::AcqRel) {
            return;
        }
        let period = expiry::period(self.inner.config.store.retention);
        let run = expiry::run(Arc::downgrade(&self.inner), period, self.inner.stop.clone());
        self.inner.tasks.spawn_on(run, &handle);
        if let Some(requests) = self.inner.deps.store.cancel_requests() {
            let weak = Arc::downgrade(&self.inner);
            let run = remote_cancel::run(weak, requests, self.inner.stop.clone());
            self.inner.tasks.spawn_on(run, &handle);
        }
    }

    fn drivers(&self) -> std::sync::MutexGuard<'_, IdMap<Arc<DriverHandle>>> {
        // The map holds plain handles; a panic elsewhere cannot leave it inconsistent.
        self.inner
            .drivers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests;
