//! The driver's events between its waits: recorded, then appended as one batch before the
//! driver waits for anything (admission, the provider, a backoff) and when it ends. A caller
//! never waits on an event the driver holds back, and the steps that run without waiting
//! cost one append (one lock, one wake-up; one write and sync for a durable store).
//!
//! [`Driver::wait`] is the one place the driver waits, so "append before waiting" is a
//! property of the code, not a convention of its call sites.

use std::future::Future;
use std::pin::pin;

use futures_util::FutureExt;

use super::Driver;
use super::stop::Race;
use crate::execution::{ErrorCode, EventPayload};
use crate::store::StoreError;

impl Driver {
    /// Records an event, to be appended at the next flush.
    pub(super) fn record(&mut self, payload: EventPayload) {
        self.size.count();
        self.pending.push(payload);
    }

    /// Appends what was recorded, as one batch.
    pub(super) async fn flush(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let payloads = std::mem::take(&mut self.pending);
        let ending = match payloads.last() {
            Some(EventPayload::Completed(_)) => Some("completed"),
            Some(EventPayload::Failed(failure)) => Some(failure.error.code.as_str()),
            _ => None,
        };
        self.deps.store.append_all(self.job.id, payloads).await?;
        if ending.is_some() {
            self.ended = ending;
        }
        Ok(())
    }

    /// `work`'s output, or the code of what stopped `race` first. Work that is ready at once
    /// is taken without a flush; before it waits, what was recorded is appended.
    pub(super) async fn wait<F: Future>(
        &mut self,
        race: &mut Race,
        work: F,
    ) -> Result<Result<F::Output, ErrorCode>, StoreError> {
        let mut raced = pin!(race.run(work));
        if let Some(output) = raced.as_mut().now_or_never() {
            return Ok(output);
        }
        self.flush().await?;
        Ok(raced.await)
    }
}
