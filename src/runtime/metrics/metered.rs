//! The store the runtime appends through, counting what executions do from the events as
//! they are appended: attempts started (their queue wait), failed (or
//! refused admission) or succeeded, usage, and the end. A durable store's appends are timed
//! too (a memory store's never wait, and timing them would cost more than they do).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::Metrics;
use crate::execution::{AttemptCode, Event, EventPayload, Execution, ExecutionId, ExecutionState};
use crate::store::{
    Changes, Created, EventStore, Follower, NewExecution, StoreError, StoreFuture, StoreStats,
    UsageEntry,
};

/// `inner`, with every appended event counted in `metrics`.
pub(crate) struct Metered {
    inner: Arc<dyn EventStore>,
    metrics: Arc<Metrics>,
}

impl Metered {
    pub(crate) fn new(inner: Arc<dyn EventStore>, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }

    /// `append`, timed when the store is durable.
    fn timed<'a, T: 'a>(&'a self, append: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        if !self.metrics.times_appends() {
            return append;
        }
        #[expect(
            clippy::disallowed_methods,
            reason = "an append's real duration: a paused test clock would show a sync as free"
        )]
        let start = Instant::now();
        Box::pin(async move {
            let appended = append.await;
            self.metrics.appended(start.elapsed());
            appended
        })
    }

    /// Counts what `payloads` say happened to `id`; the ability and the start of an
    /// execution that ends are read from its first event.
    fn count<'a>(&self, id: ExecutionId, payloads: impl Iterator<Item = &'a EventPayload>) {
        for payload in payloads {
            match payload {
                EventPayload::AttemptStarted(start) => {
                    if let Ok(waited) = SystemTime::now().duration_since(start.started_at) {
                        self.metrics.queued(&start.provider, waited);
                    }
                }
                EventPayload::AttemptFailed(record) => {
                    if record
                        .error
                        .as_ref()
                        .is_some_and(|e| e.code == AttemptCode::AdmissionRejected)
                    {
                        self.metrics.rejected(&record.provider);
                    }
                    self.metrics.attempt(
                        (&record.provider, &record.model),
                        record.error.as_ref().map(|e| (e.class, record.next_action)),
                        record.duration,
                    );
                }
                EventPayload::Usage(fact) => {
                    self.metrics
                        .usage((&fact.provider, &fact.model), &fact.unit, fact.quantity);
                }
                EventPayload::Completed(result) => {
                    self.metrics
                        .attempt((&result.provider, &result.model), None, None);
                    self.ended(id, None);
                }
                EventPayload::Failed(failure) => self.ended(id, Some(failure.error.code)),
                _ => {}
            }
        }
    }

    fn ended(&self, id: ExecutionId, code: Option<crate::execution::ErrorCode>) {
        if let Ok(first) = self.inner.first(id)
            && let EventPayload::Accepted(acceptance) = &first.payload
        {
            let took = SystemTime::now().duration_since(first.time).ok();
            self.metrics.ended(&acceptance.ability, code, took);
        }
    }
}

impl EventStore for Metered {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn durable(&self) -> bool {
        self.inner.durable()
    }

    fn create(&self, new: NewExecution) -> StoreFuture<'static, Created> {
        // Counted by the runtime, which alone creates and sees what was created
        // (`Runtime::start`): wrapping the future here would cost an allocation per call.
        self.inner.create(new)
    }

    fn append(&self, id: ExecutionId, payload: EventPayload) -> StoreFuture<'_, Event> {
        self.count(id, std::iter::once(&payload));
        self.timed(self.inner.append(id, payload))
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        // Counted as they go in, without a copy: an append the store refuses (it failed, or
        // a bug broke the state machine) has been counted all the same.
        self.count(id, payloads.iter());
        self.timed(self.inner.append_all(id, payloads))
    }

    fn get(&self, id: ExecutionId) -> Result<Execution, StoreError> {
        self.inner.get(id)
    }

    fn state(&self, id: ExecutionId) -> Result<ExecutionState, StoreError> {
        self.inner.state(id)
    }

    fn first(&self, id: ExecutionId) -> Result<Event, StoreError> {
        self.inner.first(id)
    }

    fn follow(&self, id: ExecutionId) -> Result<Follower, StoreError> {
        self.inner.follow(id)
    }

    fn usage_epoch(&self) -> u64 {
        self.inner.usage_epoch()
    }

    fn read_usage(&self, after: u64, limit: usize, into: &mut Vec<UsageEntry>) {
        self.inner.read_usage(after, limit, into);
    }

    fn usage_changes(&self) -> Changes {
        self.inner.usage_changes()
    }

    fn expire(&self) -> usize {
        self.inner.expire()
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn failed(&self) -> bool {
        self.inner.failed()
    }

    fn close(&self) {
        self.inner.close();
    }
}
