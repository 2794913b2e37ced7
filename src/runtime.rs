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
mod submit;
mod targets;
pub(crate) mod trace;
mod usage;
mod validate;
mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::execution::{ExecuteRequest, Execution, ExecutionId, IdMap};
use crate::provider::{Provider, ProviderInitError};
use crate::routing::Plans;
use crate::store::{self, EventStore, Follower, OpenStoreError, StoreError, UsageCursor};
use cancel::CANCEL_GRACE;
use driver::{Deps, DriverHandle};
use submit::{Accepted, Follow, Step, Then};
use targets::Slots;
use validate::validate;

pub use crate::routing::{HealthState, TargetHealth, Waiting};
pub(crate) use error::log_internal;
pub use error::{Exhausted, FieldViolation, NotReady, RuntimeError, Violations};
pub use metadata::{GlobalLimit, ModelStatus, ProviderStatus, RuntimeMetadata, RuntimeState};
pub use usage::{UsageRecord, UsageStream};
pub use watch::EventStream;

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
        // Matched in statements of their own, so that no step (half a kilobyte, and as much
        // again for its temporaries) is held across an await in this future's state.
        let later = match self.accept(request, Follow::No)? {
            Step::Now(Accepted::Viewed(view)) => return Ok(view),
            Step::Now(Accepted::Following(events)) => Then::Look(events.execution_id()),
            Step::Later(rest) => Then::Wait(rest),
        };
        let id = match later {
            Then::Look(id) => id,
            Then::Wait(rest) => match rest.await? {
                Accepted::Viewed(view) => return Ok(view),
                Accepted::Following(events) => events.execution_id(),
            },
        };
        self.get(id).await
    }

    /// Submits and follows from the first event. With a store that makes its follower at once
    /// (memory, file), the stream follows the execution before its driver takes a step, so
    /// the store cannot let a quick execution go before its own caller reads it; a store that
    /// makes it over the network has the driver started first, and the stream reads the
    /// events back from the store.
    ///
    /// When the store stored the execution but could not make its follower, this returns
    /// the store's error while the execution is driven to its end: a retry with the same
    /// idempotency key follows that execution instead of starting another.
    pub async fn execute(&self, request: ExecuteRequest) -> Result<EventStream, RuntimeError> {
        // As in `submit`: no step held across an await. The usual answer returns at once.
        let later = match self.accept(request, Follow::FromStart)? {
            Step::Now(Accepted::Following(events)) => return Ok(events),
            Step::Now(Accepted::Viewed(view)) => Then::Look(view.id),
            Step::Later(rest) => Then::Wait(rest),
        };
        let id = match later {
            Then::Look(id) => id,
            Then::Wait(rest) => match rest.await? {
                Accepted::Following(events) => return Ok(events),
                Accepted::Viewed(view) => view.id,
            },
        };
        self.watch(id, 0).await
    }

    /// Every event with `sequence > after_sequence`, then live events, ending after the
    /// terminal one. Dropping the stream does not cancel the execution.
    pub async fn watch(
        &self,
        id: ExecutionId,
        after_sequence: u64,
    ) -> Result<EventStream, RuntimeError> {
        let follower = self.inner.deps.store.follow(id).await;
        self.events(follower, id, after_sequence)
    }

    /// The events of `id` after `after`, read through a follower the store made.
    fn events(
        &self,
        follower: Result<Follower, StoreError>,
        id: ExecutionId,
        after: u64,
    ) -> Result<EventStream, RuntimeError> {
        let follower = follower.map_err(|e| RuntimeError::from_store(e, None))?;
        let inner = &self.inner;
        let max_watchers = inner.config.server.max_watchers_per_execution;
        watch::events(follower, id, after, max_watchers, || {
            inner.metrics.as_ref().map(|m| m.open_stream())
        })
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
