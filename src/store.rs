//! The EventStore SPI and its implementations. The store is the single source of truth: a
//! driver never sends an event to a caller except by appending it here, and every reader
//! follows a cursor (`after_sequence`) over what was appended, through a [`Follower`].
//!
//! Every implementation runs `conformance` (feature `conformance`), the one suite that defines the SPI's behaviour.
//! Its operations fail with a [`StoreError`]; a store outside this crate says what went wrong
//! in its own words with [`StoreError::Backend`] or [`Unavailable::Backend`]. [`open`] opens
//! the store a configuration names: memory, file, or (cargo feature `postgres`, on by
//! default) PostgreSQL.

mod changes;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod error;
#[cfg(any(test, feature = "conformance"))]
pub mod faulty;
mod file;
mod follower;
mod memory;
mod open;
#[cfg(feature = "postgres")]
mod postgres;
mod retention;
mod usage;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::execution::{
    Event, EventPayload, Execution, ExecutionId, ExecutionState, Idempotency, Labels,
};

pub use changes::{ChangeSignal, Changes, Closed};
pub(crate) use error::At;
pub use error::{Inconsistency, IoAt, IoOp, StoreError, Unavailable, WriteFailure};
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use file::fuzz;
pub use file::{Damage, FileStore, Header, KeyId, Malformed, Missing, OpenError, Opened, Tear};
pub use follower::{EventSource, Follower};
pub use memory::MemoryStore;
pub use open::{OpenStoreError, open};
#[cfg(all(test, feature = "postgres"))]
pub(crate) use postgres::tests as test_postgres;
#[cfg(feature = "postgres")]
pub use postgres::{PgInitError, PgStartError, PostgresStore};
pub(crate) use retention::Retention;
pub use usage::{MalformedCursor, UsageCursor, UsageEntry};

/// A store's answer: there at once ([`StoreFuture::ready`], a store that holds what it is
/// asked, with no allocation), or a future to wait for ([`StoreFuture::new`], boxed so the
/// SPI stays object-safe). Awaited as any future; it is `Unpin`, so it can be polled in place.
#[must_use = "a store's answer does nothing unless it is polled or awaited"]
pub struct StoreFuture<'a, T>(Answer<'a, T>);

enum Answer<'a, T> {
    Ready(std::future::Ready<Result<T, StoreError>>),
    Waiting(Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>),
}

impl<'a, T> StoreFuture<'a, T> {
    /// An answer there already.
    pub fn ready(answer: Result<T, StoreError>) -> Self {
        Self(Answer::Ready(std::future::ready(answer)))
    }

    /// An answer `future` will give.
    pub fn new(future: impl Future<Output = Result<T, StoreError>> + Send + 'a) -> Self {
        Self(Answer::Waiting(Box::pin(future)))
    }
}

impl<T> std::fmt::Debug for StoreFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Answer::Ready(_) => "StoreFuture::Ready",
            Answer::Waiting(_) => "StoreFuture::Waiting",
        })
    }
}

impl<T> Future for StoreFuture<'_, T> {
    type Output = Result<T, StoreError>;

    #[inline]
    fn poll(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Answer::Ready(answer) => Pin::new(answer).poll(cx),
            Answer::Waiting(future) => future.as_mut().poll(cx),
        }
    }
}

/// A read a store must fetch (a remote store's), borrowing nothing of it; `None` when the
/// store copied what was read to the caller's buffer at once (the memory and file stores).
pub type Fetch<T> = Option<StoreFuture<'static, Vec<T>>>;

/// A cancel another replica recorded for an execution this one owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelRequest {
    /// The execution.
    pub id: ExecutionId,
    /// The caller's reason, if any.
    pub reason: Option<String>,
}

/// The cancels other replicas record for this one's executions, each once.
pub type CancelRequests = tokio::sync::mpsc::UnboundedReceiver<CancelRequest>;

/// A new execution's first event and identity.
#[derive(Debug, Clone)]
pub struct NewExecution {
    /// Its id.
    pub id: ExecutionId,
    /// The `execution.accepted` payload.
    pub accepted: EventPayload,
    /// The request's labels.
    pub labels: Arc<Labels>,
    /// The idempotency key and the request's fingerprint.
    pub idempotency: Option<Idempotency>,
    /// What holding the request's input costs while the execution runs: a store that bounds
    /// its memory counts it.
    pub input_bytes: usize,
}

/// What `create` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// Stored, with `execution.accepted` as event 1.
    New(Execution),
    /// The idempotency key already names this execution of the same request.
    Existing(Execution),
}

/// How much a store may hold, and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Executions at most.
    pub max_executions: usize,
    /// Bytes at most: events, views and running executions' inputs.
    pub max_bytes: u64,
    /// How long after it ended a terminal execution expires (capacity may evict it sooner).
    pub retention: Duration,
}

/// Capacity figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
    /// Executions held now.
    pub executions: usize,
    /// Bytes held now, as the store counts them.
    pub bytes: u64,
    /// Executions retention let go since the store opened: expired, evicted for room, or (a
    /// durable store) dropped at the disk bound. A journal's replay of earlier expiries, and
    /// executions a failed journal took back, are not among them.
    pub evicted: u64,
    /// The limits.
    pub limits: StoreLimits,
}

/// Storage of executions and their events.
///
/// # What waits and what answers at once
/// Every operation that reads or writes an execution returns a future (a [`StoreFuture`],
/// or for reads through a [`Follower`] and of usage facts, an optional fetch), so that a
/// store several replicas share over the network can answer without blocking a runtime
/// thread. The memory store answers every operation at once ([`StoreFuture::ready`]), as
/// the file store answers reads (and both answer reads through a follower and of usage with
/// no future at all), so the async shape costs them no waiting and no allocation.
///
/// What stays synchronous are figures the runtime reads on timers, in health checks and on
/// every stream's wake-up: [`usage_epoch`](Self::usage_epoch),
/// [`usage_changes`](Self::usage_changes), [`expire`](Self::expire),
/// [`stats`](Self::stats), [`failed`](Self::failed) and [`close`](Self::close). A remote
/// store keeps them current in the background (a task it owns, notifications from the
/// database) and answers from what it last knew; its `expire` hands the work to that
/// background and counts what it has let go.
pub trait EventStore: Send + Sync + 'static {
    /// `memory`, `file` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Whether events survive a restart.
    fn durable(&self) -> bool;

    /// Stores a new execution, or returns the existing one its idempotency key names.
    ///
    /// The future borrows nothing of the store (`'static`): the runtime may finish awaiting
    /// it in a task of its own, so that a caller who goes away while a durable store writes
    /// cannot leave a stored execution with nobody driving it.
    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created>;

    /// Appends one event: the store assigns sequence, time and state (through the state
    /// machine), updates the view and wakes followers; returns the event as stored.
    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event>;

    /// Appends `payloads` in order, all or none, as [`append`](Self::append) would one by one
    /// (one sequence number each, one state-machine step each), with one wake-up of the
    /// followers for the lot; returns the last sequence. A batch is how a burst of provider
    /// output costs one lock (memory) or one write and sync (a durable store) instead of one
    /// per event. An empty batch changes nothing. The PostgreSQL store refuses a batch of
    /// more than 4095 usage facts ([`StoreError::Backend`]); the runtime's keep a few.
    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64>;

    /// The materialized view.
    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution>;

    /// The state after the last event: what [`get`](Self::get) would say, without building
    /// the view. A driver reads it before it calls a provider.
    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        StoreFuture::new(async move { self.get(id).await.map(|view| view.state) })
    }

    /// The execution's first event (`execution.accepted`, which names the ability and the
    /// time it was accepted), once readers can see it: what the runtime's metrics read when
    /// an execution ends, without following it.
    fn first(&self, id: ExecutionId) -> StoreFuture<'_, Event> {
        StoreFuture::new(async move {
            self.follow(id)
                .await?
                .read(0, 1)
                .await?
                .pop()
                .ok_or(StoreError::NotFound(id))
        })
    }

    /// A reader's hold on the execution: its events from any cursor and a wake-up on every
    /// append, readable to its last event even after the store lets the execution go
    /// (retention and capacity never wait for readers). A remote store reads the execution's
    /// position here, so that the follower knows it before its first read.
    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower>;

    /// The epoch of this store's usage order (`usage.rs`): the same across a durable
    /// store's restarts, new for each memory store.
    fn usage_epoch(&self) -> u64;

    /// Up to `limit` usage facts of the executions the store holds, with positions after
    /// `after`, in the order the store kept them. A fact readers cannot see yet (not yet
    /// durable) ends the read: nothing after it is read before it.
    ///
    /// A store that has the facts at hand copies them to the back of `into` and returns
    /// `None`, so a read costs it no allocation; one that must fetch them (a remote store)
    /// returns the fetch, which yields them in the same order. The fetch borrows nothing of
    /// the store, so a reader can keep it beside the store it came from while it waits.
    #[must_use = "a returned fetch holds the facts"]
    fn read_usage(&self, after: u64, limit: usize, into: &mut Vec<UsageEntry>)
    -> Fetch<UsageEntry>;

    /// A wake-up whenever usage facts become readable.
    fn usage_changes(&self) -> Changes;

    /// Lets go every terminal execution whose retention has passed, with its identities, and
    /// returns how many. The runtime calls it on a timer, so that an idle store gives back
    /// its memory (and a durable one its disk) on time, not only when new work arrives.
    fn expire(&self) -> usize;

    /// Capacity figures.
    fn stats(&self) -> StoreStats;

    /// Asks the replica that owns `id` to cancel it, when that is another replica (a store
    /// several replicas share): `true` when the request is recorded for it, and the caller
    /// waits for the terminal event it appends; `false` when this replica may end the
    /// execution itself (always, for a store of one process: the default).
    fn cancel_elsewhere(&self, id: ExecutionId, reason: Option<String>) -> StoreFuture<'_, bool> {
        let _ = (id, reason);
        StoreFuture::ready(Ok(false))
    }

    /// The cancels other replicas record for executions this replica owns, each delivered
    /// once; the runtime takes it once, at start. `None` for a store of one process.
    fn cancel_requests(&self) -> Option<CancelRequests> {
        None
    }

    /// The runtime's driver of `id` stopped without storing its end (the store did not answer
    /// it): nothing of this process will append to it again. A store several replicas share
    /// ends it as interrupted once it can (its `outcome_unknown`, as a takeover would), so it
    /// is not left running for good; a store of one process ends it at its next start (the
    /// default does nothing).
    fn abandoned(&self, id: ExecutionId) {
        let _ = id;
    }

    /// Whether the store has failed and refuses writes.
    fn failed(&self) -> bool;

    /// Flushes and releases the store (a file store's writer and directory lock). Called
    /// once producers and readers are done; writes after it fail.
    fn close(&self) {}
}
