//! The store the runtime appends through, counting what executions do from the events as
//! they are appended: attempts started (their queue wait), failed (or
//! refused admission) or succeeded, usage, and the end. A durable store's appends are timed
//! too (a memory store's never wait, and timing them would cost more than they do).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use futures_util::FutureExt;

use super::Metrics;
use crate::execution::{
    AttemptCode, ErrorCode, Event, EventPayload, Execution, ExecutionId, ExecutionState,
};
use crate::store::{
    CancelRequests, Changes, Created, EventStore, Fetch, Follower, NewExecution, StoreError,
    StoreFuture, StoreStats, UsageEntry,
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
    fn timed<'a, T: Send + 'a>(&'a self, append: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        if !self.metrics.times_appends() {
            return append;
        }
        #[expect(
            clippy::disallowed_methods,
            reason = "an append's real duration: a paused test clock would show a sync as free"
        )]
        let start = Instant::now();
        StoreFuture::new(async move {
            let appended = append.await;
            self.metrics.appended(start.elapsed());
            appended
        })
    }

    /// Counts what `payloads` say happened, but the end of the execution, which it returns
    /// (`Some`, with the code it failed with) for [`appending`](Self::appending).
    fn count<'a>(
        &self,
        payloads: impl Iterator<Item = &'a EventPayload>,
    ) -> Option<Option<ErrorCode>> {
        let mut end = None;
        for payload in payloads {
            match payload {
                EventPayload::Routing(plan) => {
                    for target in plan.targets.iter().filter(|t| t.ejected.is_some()) {
                        self.metrics.skipped((&target.provider, &target.model));
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
                    end = Some(None);
                }
                EventPayload::Failed(failure) => end = Some(Some(failure.error.code)),
                _ => {}
            }
        }
        end
    }

    /// `append`, counted, with the end of the execution among its events (`end`) counted
    /// too. The ability and the start of an execution that ends are in its first event,
    /// asked for before the append: the store may let the execution go as it ends.
    fn appending<'a, T: Send + 'a>(
        &'a self,
        id: ExecutionId,
        end: Option<Option<ErrorCode>>,
        append: impl FnOnce() -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        let Some(code) = end else {
            return self.timed(append());
        };
        let mut first = self.inner.first(id);
        // A store that answers at once (memory, file): counted now, as the events are, and
        // with no allocation of its own. One that fetches: counted once its answer comes.
        if let Some(first) = (&mut first).now_or_never() {
            self.ended(first, code);
            return self.timed(append());
        }
        let append = self.timed(append());
        StoreFuture::new(async move {
            let (first, appended) = futures_util::future::join(first, append).await;
            self.ended(first, code);
            appended
        })
    }

    /// Counts the end of the execution whose first event is `first`.
    fn ended(&self, first: Result<Event, StoreError>, code: Option<ErrorCode>) {
        if let Ok(first) = first
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
        let end = self.count(std::iter::once(&payload));
        self.appending(id, end, || self.inner.append(id, payload))
    }

    fn append_all(&self, id: ExecutionId, payloads: Vec<EventPayload>) -> StoreFuture<'_, u64> {
        // Counted as they go in, without a copy: an append the store refuses (it failed, or
        // a bug broke the state machine) has been counted all the same.
        let end = self.count(payloads.iter());
        self.appending(id, end, || self.inner.append_all(id, payloads))
    }

    fn get(&self, id: ExecutionId) -> StoreFuture<'_, Execution> {
        self.inner.get(id)
    }

    fn state(&self, id: ExecutionId) -> StoreFuture<'_, ExecutionState> {
        self.inner.state(id)
    }

    fn first(&self, id: ExecutionId) -> StoreFuture<'_, Event> {
        self.inner.first(id)
    }

    fn follow(&self, id: ExecutionId) -> StoreFuture<'_, Follower> {
        self.inner.follow(id)
    }

    fn usage_epoch(&self) -> u64 {
        self.inner.usage_epoch()
    }

    fn read_usage(
        &self,
        after: u64,
        limit: usize,
        into: &mut Vec<UsageEntry>,
    ) -> Fetch<UsageEntry> {
        self.inner.read_usage(after, limit, into)
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

    fn cancel_elsewhere(&self, id: ExecutionId, reason: Option<String>) -> StoreFuture<'_, bool> {
        self.inner.cancel_elsewhere(id, reason)
    }

    fn cancel_requests(&self) -> Option<CancelRequests> {
        self.inner.cancel_requests()
    }

    fn abandoned(&self, id: ExecutionId) {
        self.inner.abandoned(id);
    }

    fn failed(&self) -> bool {
        self.inner.failed()
    }

    fn close(&self) {
        self.inner.close();
    }
}
