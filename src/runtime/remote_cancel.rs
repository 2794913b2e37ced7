//! Cancels recorded by other replicas for executions this one owns (a store several replicas
//! share, `EventStore::cancel_requests`): each is carried out as a `CancelExecution` made
//! here would be (the driver is told, or the cancellation recorded), in a task of its own.
//! The task holds the runtime weakly and ends with it, or when shutdown begins.

use std::sync::Weak;

use tokio_util::sync::CancellationToken;

use super::{Inner, Runtime};
use crate::store::CancelRequests;

/// Carries out each request until `stop` or the runtime is gone.
pub(super) async fn run(
    runtime: Weak<Inner>,
    mut requests: CancelRequests,
    stop: CancellationToken,
) {
    loop {
        let request = tokio::select! {
            () = stop.cancelled() => return,
            request = requests.recv() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let Some(inner) = runtime.upgrade() else {
            return;
        };
        let runtime = Runtime { inner };
        let tasks = runtime.inner.tasks.clone();
        tasks.spawn(async move {
            let id = request.id;
            match runtime.cancel(id, request.reason).await {
                Ok(view) => tracing::info!(
                    execution_id = %id,
                    state = view.state.as_str(),
                    "cancelled at another replica's request"
                ),
                Err(error) => tracing::warn!(
                    execution_id = %id,
                    %error,
                    "another replica's cancel could not be carried out"
                ),
            }
        });
    }
}
