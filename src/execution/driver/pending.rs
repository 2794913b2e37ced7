//! The driver's events between its waits: recorded, then appended as one batch before the
//! driver waits for anything (admission, the provider, a backoff) and when it ends. A caller
//! never waits on an event the driver holds back, and the steps that run without waiting
//! cost one append (one lock, one wake-up; one write and sync for a durable store).

use super::Driver;
use crate::execution::EventPayload;
use crate::store::StoreError;

impl Driver {
    /// Records an event, to be appended at the next flush.
    pub(super) fn record(&self, payload: EventPayload) {
        self.pending().push(payload);
    }

    /// Appends what was recorded, as one batch.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let payloads = std::mem::take(&mut *self.pending());
        if payloads.is_empty() {
            return Ok(());
        }
        self.deps
            .store
            .append_all(self.job.id, payloads)
            .await
            .map(drop)
    }

    /// The recorded events, to record several at once. Never held across a wait.
    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, Vec<EventPayload>> {
        // Only this driver's task touches it; a panic mid-push leaves a plain Vec.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
