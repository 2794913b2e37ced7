//! A caller that goes away. HTTP has no cancel of its own: a client that closes its
//! connection (or resets its stream) before the answer ended no longer wants it, and a
//! provider would go on working, and billing. Without an `Idempotency-Key` nobody can come back
//! for the execution, so it is cancelled at once. With one, the caller's retry may attach to it:
//! when the last caller following it went away, it runs on for `ingress.detach_grace`, and is
//! cancelled then unless a caller attached meanwhile. Cancelling an execution that has ended
//! changes nothing.
//!
//! The grace is this process's: a retry that reaches another replica attaches to the
//! execution, but does not call off this replica's cancel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::execution::ExecutionId;

/// The reason a cancel for a caller that went away records.
const REASON: &str = "the HTTP caller went away";

/// The callers following each execution, and the cancel that waits for a caller's grace.
#[derive(Debug, Default)]
pub(super) struct Detached {
    followed: Mutex<HashMap<ExecutionId, Followed>>,
    next: AtomicU64,
}

#[derive(Debug, Default)]
struct Followed {
    /// Callers following it now.
    callers: usize,
    /// The cancel waiting for the last caller's grace: which one, and its token.
    pending: Option<(u64, CancellationToken)>,
}

impl Detached {
    fn lock(&self) -> MutexGuard<'_, HashMap<ExecutionId, Followed>> {
        // A panic while holding it leaves a map that is still whole.
        self.followed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A caller follows `id`: a cancel waiting for a grace to pass is called off.
    fn attach(&self, id: ExecutionId) {
        let mut followed = self.lock();
        let entry = followed.entry(id).or_default();
        entry.callers += 1;
        if let Some((_, pending)) = entry.pending.take() {
            pending.cancel();
        }
    }

    /// A caller stops following `id`, having seen its end or not. Some(cancel) when it was
    /// the last and went away before the end: the cancel to wait for (with a grace) or to
    /// make at once.
    fn leave(
        &self,
        id: ExecutionId,
        ended: bool,
        grace: bool,
    ) -> Option<Option<(u64, CancellationToken)>> {
        let mut followed = self.lock();
        let entry = followed.get_mut(&id)?;
        entry.callers = entry.callers.saturating_sub(1);
        if entry.callers > 0 {
            return None;
        }
        if ended || !grace {
            followed.remove(&id);
            return (!ended).then_some(None);
        }
        let which = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        entry.pending = Some((which, token.clone()));
        Some(Some((which, token)))
    }

    /// Whether cancel `which` of `id` is due: nobody attached during its grace.
    fn due(&self, id: ExecutionId, which: u64) -> bool {
        let mut followed = self.lock();
        let due = followed.get(&id).is_some_and(|f| {
            f.callers == 0 && f.pending.as_ref().is_some_and(|(w, _)| *w == which)
        });
        if due {
            followed.remove(&id);
        }
        due
    }
}

/// A caller's hold on an execution it follows: dropped before [`ended`](Self::ended), the
/// caller went away.
#[derive(Debug)]
pub(super) struct Watching {
    shared: Arc<Shared>,
    id: ExecutionId,
    /// Submitted with an `Idempotency-Key`: a retry may attach.
    keyed: bool,
    ended: bool,
}

impl Watching {
    /// `shared`'s caller follows `id`, which was submitted with a key when `keyed`.
    pub(super) fn new(shared: Arc<Shared>, id: ExecutionId, keyed: bool) -> Self {
        shared.detached.attach(id);
        Self {
            shared,
            id,
            keyed,
            ended: false,
        }
    }

    /// The caller saw the execution's end (or all the ingress could show of it).
    pub(super) fn ended(&mut self) {
        self.ended = true;
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let detached = &self.shared.detached;
        let Some(waiting) = detached.leave(self.id, self.ended, self.keyed) else {
            return;
        };
        let grace = self.shared.config.detach_grace;
        let (shared, id) = (self.shared.clone(), self.id);
        #[expect(
            clippy::disallowed_methods,
            reason = "a cancel outlives the request that went away; it is bounded by the grace"
        )]
        tokio::spawn(async move {
            if let Some((which, called_off)) = &waiting {
                tokio::select! {
                    () = tokio::time::sleep(grace) => {}
                    () = called_off.cancelled() => return,
                }
                if !shared.detached.due(id, *which) {
                    return;
                }
            }
            cancel(&shared, id, waiting.map(|_| grace)).await;
        });
    }
}

async fn cancel(shared: &Shared, id: ExecutionId, grace: Option<Duration>) {
    match shared.runtime.cancel(id, Some(REASON.to_owned())).await {
        Ok(_) => tracing::info!(
            execution_id = %id,
            grace = ?grace,
            "the HTTP caller went away: its execution is cancelled (if it was still running)"
        ),
        Err(e) => tracing::warn!(
            execution_id = %id,
            error = %e,
            "cancelling for an HTTP caller that went away"
        ),
    }
}
