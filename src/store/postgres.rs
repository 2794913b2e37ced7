//! The PostgreSQL store (`[store] kind = "postgres"`): several replicas, one store.
//!
//! Every replica reads, follows and cancels every execution; the replica that accepted an
//! execution owns it and is the only one that appends to it, under a lease it renews in the
//! database (`replica.rs`, `lease.rs`). Each append checks, in its own statement, that the
//! execution is still this replica's and its lease current, so a replica that was paused or cut
//! off past its lease appends nothing to what a survivor has ended (fencing). What no driver
//! will end (a lapsed replica's executions, or this one's whose driver stopped) is ended by the
//! takeover (`takeover.rs`). Appends of many
//! executions go to the database together, as one statement and one commit (`writer.rs`),
//! and so do creates (`create.rs`).
//! Followers on every replica wake from `LISTEN/NOTIFY`, and a poll bounds the delay when a
//! notification is lost (`watch.rs`). The usage order is the order of the transactions that
//! kept the facts, read only below the oldest transaction still running, so a cursor never
//! passes a fact that may still commit (`usage.rs`). Capacity and retention are global
//! (`capacity.rs`).
//!
//! All of the store's database work runs on a runtime of its own (one thread): the callers'
//! runtime only awaits its answers (an append to an execution this replica holds, and a
//! create without an idempotency key that the counts admit at once, are put on their batch's
//! queue from the caller's thread, with no task of their own). So a caller's timers (a test's paused clock) never race the
//! store's I/O, and the store's timeouts are its own: no statement is waited for longer than
//! [`Shared::patience`]. Every statement begins with `/* model-runtime: KIND */`, which the
//! database's views of what runs show (and the tests' fault proxy picks statements by).

mod batch;
mod cancel;
mod capacity;
mod connect;
mod create;
mod error;
mod insert;
mod lease;
mod owned;
mod replica;
mod rows;
mod schema;
mod spi;
mod start;
mod takeover;
mod usage;
mod watch;
mod writer;

#[cfg(test)]
pub(crate) mod tests;

pub(super) use error::PgError;
pub use error::{PgInitError, PgStartError};
use start::{FirstStart, pool, store_runtime};

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Object, Pool};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{ChangeSignal, Inconsistency, StoreError, StoreFuture, StoreLimits, Unavailable};
use crate::config::PostgresStoreConfig;
use crate::execution::{Event, Execution, ExecutionId};

/// The store's settings: the config's, with its connection string as the driver reads it.
#[derive(Debug, Clone)]
pub(super) struct Options {
    pub(super) config: PostgresStoreConfig,
    pub(super) connect: tokio_postgres::Config,
}

impl Options {
    /// The options of `config`.
    pub(super) fn of(config: &PostgresStoreConfig) -> Result<Self, PgInitError> {
        let connect = config
            .url
            .expose()
            .parse()
            .map_err(|_| PgInitError::ConnectionString(config.url_env.clone()))?;
        Ok(Self {
            config: config.clone(),
            connect,
        })
    }
}

/// The clock of retention: wall time at open plus the caller's monotonic time since, read on
/// the caller's side of the store (so a test that pauses time controls it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    wall: SystemTime,
    start: tokio::time::Instant,
}

impl Clock {
    fn new() -> Self {
        Self {
            wall: SystemTime::now(),
            start: tokio::time::Instant::now(),
        }
    }

    /// Now, in microseconds since the Unix epoch.
    pub(super) fn now(&self) -> i64 {
        rows::micros(self.wall + self.start.elapsed())
    }
}

/// How long closing waits for the lease to be given back.
const RELEASE: Duration = Duration::from_secs(2);

/// What [`Shared::patience`] allows a statement beyond the server's own limit: the way to the
/// server and back, on a slow network.
const ROUND_TRIP: Duration = Duration::from_secs(1);

const ROW: &str = "/* model-runtime: row */ SELECT owner, owner_epoch, state, committed, \
     stopping, last_sequence, labels, idempotency_key, input_bytes FROM executions \
     WHERE id = $1 AND gone_at IS NULL";

// The rows whose first event is at most `$4`: a row ends at most `MAX_RUN - 1` events after
// it begins, which bounds the range the index is read over (`$3`).
const EVENTS: &str = "/* model-runtime: events */ SELECT sequence, time, state, payload, \
     usage_position, first_sequence FROM events WHERE execution_id = $1 AND sequence > $2 \
     AND sequence <= $3 AND COALESCE(first_sequence, sequence) <= $4 ORDER BY sequence";

/// What the store's tasks share.
pub(super) struct Shared {
    pool: Pool,
    /// The pool's TLS, kept for the lease keeper's and the notifications' connections.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    options: Options,
    /// The schema's notification channel.
    channel: String,
    limits: StoreLimits,
    clock: Clock,
    replica: replica::Replica,
    watched: watch::Registry,
    owned: owned::Owned,
    driven: owned::Driven,
    takeover: takeover::Takeover,
    capacity: capacity::Capacity,
    cancels: cancel::Cancels,
    /// The usage order's epoch, kept in the schema (read at start).
    usage_epoch: AtomicU64,
    usage: Arc<ChangeSignal>,
    kept: usage::Kept,
    writer: mpsc::UnboundedSender<writer::Request>,
    creator: mpsc::UnboundedSender<create::Request>,
    /// Whether the store has started (schema, registration).
    ready: AtomicBool,
    /// Told each time the notification connection listens (again).
    listening: tokio::sync::Notify,
    /// Whether the database answered the last time it was asked.
    reachable: AtomicBool,
    closed: AtomicBool,
    handle: tokio::runtime::Handle,
    stop: CancellationToken,
}

/// The schema's notification channel: appends and cancels are announced on it.
fn channel(schema: &str) -> String {
    let mut channel = format!("model_runtime_{schema}");
    channel.truncate(63);
    channel
}

/// The PostgreSQL event store.
pub struct PostgresStore {
    shared: Arc<Shared>,
    /// Stops the store's runtime when the store goes.
    _stop: DropGuard,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.shared.options.config.schema)
            .field("replica", &self.shared.replica.id())
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// The store, at once: its start (connect, migrate the schema, register this replica,
    /// then the lease, notification, poll and append tasks) runs on a thread of its own and
    /// tries again until the database answers. Until then the store is `failed` (the runtime
    /// reports `NOT_SERVING`) and its operations are unavailable. Fails only when the thread
    /// cannot be started or the pool cannot be built.
    pub fn open(
        config: &PostgresStoreConfig,
        limits: StoreLimits,
    ) -> Result<Arc<Self>, PgInitError> {
        Self::opened(config, limits).map(|(store, _)| store)
    }

    /// [`open`](Self::open), then waits for the first attempt to start it: its error is the
    /// database's (for the operator, in full), and the store is not kept.
    pub async fn connect(
        config: &PostgresStoreConfig,
        limits: StoreLimits,
    ) -> Result<Arc<Self>, PgStartError> {
        let (store, first) = Self::opened(config, limits)?;
        match first.await {
            Ok(Ok(())) => Ok(store),
            Ok(Err(reason)) => Err(PgStartError::Start(Box::new(reason))),
            Err(_) => Err(PgStartError::Stopped),
        }
    }

    fn opened(
        config: &PostgresStoreConfig,
        limits: StoreLimits,
    ) -> Result<(Arc<Self>, oneshot::Receiver<FirstStart>), PgInitError> {
        let options = Options::of(config)?;
        let stop = CancellationToken::new();
        let handle = store_runtime(stop.clone()).map_err(PgInitError::Thread)?;
        let tls = connect::tls()?;
        let pool = pool(&options, tls.clone())?;
        let (writer, appends) = mpsc::unbounded_channel();
        let (creator, creates) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            pool,
            tls,
            channel: channel(&options.config.schema),
            limits: StoreLimits {
                max_executions: limits.max_executions.max(1),
                ..limits
            },
            clock: Clock::new(),
            replica: replica::Replica::new(options.config.lease),
            watched: watch::Registry::default(),
            owned: owned::Owned::default(),
            driven: owned::Driven::default(),
            takeover: takeover::Takeover::default(),
            capacity: capacity::Capacity::default(),
            cancels: cancel::Cancels::default(),
            usage_epoch: AtomicU64::new(0),
            usage: ChangeSignal::new(),
            kept: usage::Kept::default(),
            writer,
            creator,
            ready: AtomicBool::new(false),
            listening: tokio::sync::Notify::new(),
            reachable: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            handle,
            stop: stop.clone(),
            options,
        });
        let (first, answer) = oneshot::channel();
        shared
            .handle
            .spawn(start::start(shared.clone(), (appends, creates), first));
        let store = Arc::new(Self {
            shared,
            _stop: stop.drop_guard(),
        });
        Ok((store, answer))
    }

    /// What this replica knows of an execution it holds (and has not let go).
    fn held(&self, id: ExecutionId) -> Option<owned::Peek> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) || shared.capacity.is_due(id) {
            return None;
        }
        shared.owned.peek(id)
    }

    /// Runs `work` on the store's runtime and answers on the caller's.
    fn on_store<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        on_store(&self.shared, work)
    }
}

/// How long a statement the database did not answer waits before it is asked again, after
/// `tries` tries: 20 ms, doubling, up to 640 ms.
pub(super) fn backoff(tries: u32) -> Duration {
    Duration::from_millis(10u64 << tries.min(6))
}

/// Runs `work` on the store's runtime; its answer is awaited wherever the caller is.
pub(super) fn on_store<T: Send + 'static>(
    shared: &Shared,
    work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> StoreFuture<'static, T> {
    if let Err(closed) = shared.usable() {
        return StoreFuture::ready(Err(closed));
    }
    let task = shared.handle.spawn(work);
    StoreFuture::new(async move {
        task.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(Unavailable::Backend(
                "the event store stopped".into(),
            )))
        })
    })
}

impl Shared {
    /// Whether the store takes operations (not closed, and started: its database reached), or
    /// why not.
    pub(super) fn usable(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable(Unavailable::Closed));
        }
        if !self.ready.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable(Unavailable::Backend(
                "the event store's database has not been reached yet".into(),
            )));
        }
        Ok(())
    }

    /// A connection from the pool; whether the database answers is noted for `failed`.
    pub(super) async fn client(&self) -> Result<Object, PgError> {
        let client = self.pool.get().await;
        self.reachable.store(client.is_ok(), Ordering::Release);
        Ok(client?)
    }

    /// Notes what a database call said about whether the database answers.
    pub(super) fn noted<T>(&self, result: Result<T, PgError>) -> Result<T, PgError> {
        if let Err(e) = &result
            && e.transient()
        {
            self.reachable.store(false, Ordering::Release);
        }
        result
    }

    /// How long one statement's answer is waited for: the server's own limit on it
    /// (`statement_timeout`) and [`ROUND_TRIP`] for the way there and back. A connection that
    /// stays silent longer (a stalled server, a network that drops everything) is closed
    /// rather than handed to the next caller.
    pub(super) fn patience(&self) -> Duration {
        self.options.config.statement_timeout + ROUND_TRIP
    }

    /// `work` on a connection from the pool, within [`patience`](Self::patience); what its
    /// answer says of the database is noted (`failed`), and a connection that gave no answer
    /// in time is closed.
    pub(super) async fn on_connection<T>(
        &self,
        work: impl AsyncFnOnce(&mut Object) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        let mut client = self.client().await?;
        let patience = self.patience();
        let result = match tokio::time::timeout(patience, work(&mut client)).await {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                Err(PgError::NoAnswer(patience))
            }
        };
        self.noted(result)
    }

    /// The execution's row: its lifecycle and owner, `None` when it is not (or no longer)
    /// in the store.
    pub(super) async fn row(&self, id: ExecutionId) -> Result<Option<owned::Row>, PgError> {
        let row = self
            .on_connection(async |client| {
                let statement = client.prepare_cached(ROW).await?;
                Ok(client.query_opt(&statement, &[&uuid(id)]).await?)
            })
            .await?;
        row.map(|row| owned::Row::of(&row)).transpose()
    }

    /// Every event of `id` after `after`, at most `limit`, with the usage facts' labels.
    pub(super) async fn events(
        &self,
        id: ExecutionId,
        after: u64,
        limit: usize,
        labels: &Arc<crate::execution::Labels>,
    ) -> Result<Vec<Event>, PgError> {
        let upto = after.saturating_add(u64::try_from(limit).unwrap_or(u64::MAX));
        let bound = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows = self
            .on_connection(async |client| {
                let statement = client.prepare_cached(EVENTS).await?;
                let rows = client
                    .query(
                        &statement,
                        &[
                            &uuid(id),
                            &bound(after),
                            &bound(upto.saturating_add(rows::MAX_RUN as u64 - 1)),
                            &bound(upto),
                        ],
                    )
                    .await?;
                Ok(rows)
            })
            .await?;
        let mut events = Vec::with_capacity(rows.len().min(limit));
        for row in &rows {
            rows::events_of(row, 0, labels, after, &mut events)?;
        }
        events.truncate(limit);
        Ok(events)
    }

    /// The materialized view, folded from every event.
    async fn view(&self, id: ExecutionId) -> Result<Execution, StoreError> {
        let row = self
            .row(id)
            .await
            .map_err(PgError::into_store)?
            .ok_or(StoreError::NotFound(id))?;
        let events = self
            .events(id, 0, usize::MAX, &row.labels)
            .await
            .map_err(PgError::into_store)?;
        let mut events = events.into_iter();
        let first = events.next().ok_or(StoreError::NotFound(id))?;
        let mut view = Execution::from_accepted(&first, id, row.labels.clone(), row.key.clone())
            .ok_or(StoreError::Inconsistent(Inconsistency::NotAccepted(id)))?;
        for event in events {
            view.apply(&event);
        }
        Ok(view)
    }
}

pub(super) fn uuid(id: ExecutionId) -> uuid::Uuid {
    uuid::Uuid::from_bytes(id.to_bytes())
}
