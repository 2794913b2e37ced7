//! Cancellation: a running execution's driver is told and records the end itself; one with no
//! driver yet leaves its cancelled handle for the driver to take, and records the end here.

use std::sync::Arc;
use std::time::Duration;

use super::driver::{DriverHandle, evidence};
use super::{Runtime, RuntimeError, limits};
use crate::execution::{ErrorCode, Execution, ExecutionId};
use crate::store::StoreError;

/// How long `cancel` waits for a driver to record the cancellation before recording it
/// itself (and shutdown, for cancelled drivers to end). Drivers select on cancellation at
/// every wait, so this is only a safety net.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// How long a cancel of another replica's execution waits for its owner to end it: the
/// owner's driver has [`CANCEL_GRACE`], and the request may wait a poll to reach it.
const ELSEWHERE_GRACE: Duration = Duration::from_secs(10);

impl Runtime {
    /// Cancels a non-terminal execution and returns it once cancelled; a terminal execution
    /// is returned unchanged.
    pub async fn cancel(
        &self,
        id: ExecutionId,
        reason: Option<String>,
    ) -> Result<Execution, RuntimeError> {
        if reason
            .as_ref()
            .is_some_and(|r| r.len() > limits::MAX_CANCEL_REASON_BYTES)
        {
            return Err(RuntimeError::invalid(
                "reason",
                format!("is longer than {} bytes", limits::MAX_CANCEL_REASON_BYTES),
            ));
        }
        let view = self.get(id).await?;
        if view.state.is_terminal() {
            return Ok(view);
        }
        // Under the drivers' lock: either this finds the driver, or the driver (registering
        // later) finds this cancellation's handle and never calls its provider.
        let (handle, found) = {
            let mut drivers = self.drivers();
            match drivers.get(&id) {
                Some(handle) => (handle.clone(), true),
                None => {
                    let handle = Arc::new(DriverHandle::default());
                    drivers.insert(id, handle.clone());
                    (handle, false)
                }
            }
        };
        handle.cancel(reason.clone());
        if !found {
            // Another replica's (a shared store): its owner is asked, and appends the end.
            let elsewhere = self
                .inner
                .deps
                .store
                .cancel_elsewhere(id, reason.clone())
                .await;
            if !matches!(elsewhere, Ok(false)) {
                self.forget_handle(id, &handle);
            }
            match elsewhere {
                Ok(false) => {}
                Ok(true) => {
                    return match self.wait_terminal(view, ELSEWHERE_GRACE).await? {
                        Some(view) => Ok(view),
                        // Recorded: the owner ends it when it hears, or a survivor does when
                        // the owner's lease lapses; the caller sees it as it stands.
                        None => self.get(id).await,
                    };
                }
                Err(e) => return Err(RuntimeError::from_store(e, None)),
            }
        }
        if found {
            if let Some(view) = self.wait_terminal(view, CANCEL_GRACE).await? {
                return Ok(view);
            }
            tracing::warn!(execution_id = %id, "driver did not record the cancellation in time");
        }
        let recorded = self.record_cancellation(id, reason).await;
        if !found {
            self.forget_handle(id, &handle);
        }
        recorded
    }

    /// Takes back the handle a cancel left for a driver that never came.
    fn forget_handle(&self, id: ExecutionId, handle: &Arc<DriverHandle>) {
        let mut drivers = self.drivers();
        if drivers.get(&id).is_some_and(|h| Arc::ptr_eq(h, handle)) {
            drivers.remove(&id);
        }
    }

    /// Ends an execution that no driver is running as cancelled, and returns it.
    pub(super) async fn record_cancellation(
        &self,
        id: ExecutionId,
        reason: Option<String>,
    ) -> Result<Execution, RuntimeError> {
        let mut view = self.get(id).await?;
        let last_attempt_error = view.attempts.iter().rev().find_map(|a| a.error.clone());
        let payload = evidence::failure(
            ErrorCode::Cancelled,
            evidence::cancel_message(reason.as_deref()),
            crate::execution::outcome_of(&view.attempts),
            last_attempt_error,
            view.partial_output.clone(),
            reason,
        );
        match self.inner.deps.store.append(id, payload).await {
            // From the event itself: the store may let the execution go as it ends.
            Ok(event) if event.sequence == view.last_sequence + 1 => {
                view.apply(&event);
                Ok(view)
            }
            Ok(_) | Err(StoreError::AlreadyTerminal(_)) => self.get(id).await,
            Err(e) => Err(RuntimeError::from_store(e, None)),
        }
    }

    /// Waits until the execution `view` shows is terminal, at most `limit`, and returns it
    /// then; `None` if it is not by then. The view is brought up to date from the events a
    /// follower reads, not from the store's own view: the store may let the execution go as
    /// soon as it ends.
    async fn wait_terminal(
        &self,
        mut view: Execution,
        limit: Duration,
    ) -> Result<Option<Execution>, RuntimeError> {
        let store = &self.inner.deps.store;
        let from_store = |e| RuntimeError::from_store(e, None);
        let wait = async {
            let mut follower = store.follow(view.id).await.map_err(from_store)?;
            loop {
                follower.changes().mark_seen();
                let events = follower.read(view.last_sequence, usize::MAX).await;
                for event in events.map_err(from_store)? {
                    view.apply(&event);
                }
                if view.state.is_terminal() {
                    return Ok(Some(view));
                }
                if follower.changes().changed().await.is_err() {
                    // Nothing more will come; what there was has been read above.
                    let events = follower.read(view.last_sequence, usize::MAX).await;
                    for event in events.map_err(from_store)? {
                        view.apply(&event);
                    }
                    return Ok(view.state.is_terminal().then_some(view));
                }
            }
        };
        tokio::time::timeout(limit, wait).await.unwrap_or(Ok(None))
    }
}
