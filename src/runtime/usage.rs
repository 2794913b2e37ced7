//! The usage export: the store's usage order (`store/usage.rs`) as a stream from a cursor,
//! live, until the runtime begins to stop. A consumer that persists the cursor of the last
//! record it processed and resumes after it gets every fact at least once and none twice
//! past that cursor.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures_util::{FutureExt, Stream};
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::{NotReady, RuntimeError};
use crate::store::{Changes, EventStore, Fetch, UsageCursor, UsageEntry};

/// Facts read from the store at a time.
const PAGE: usize = 256;

/// One fact of the usage order, with its cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRecord {
    /// Resume after this to read the facts after this one.
    pub cursor: UsageCursor,
    /// The fact and where it came from.
    pub entry: UsageEntry,
}

/// The usage order from a cursor on, live. It ends with `Unavailable` when the runtime
/// begins to stop, or with the store's error when a read fails (resume from the last
/// cursor, here after the restart or elsewhere).
pub struct UsageStream {
    store: Arc<dyn EventStore>,
    epoch: u64,
    after: u64,
    /// Read but not yet handed out, in order.
    buffer: std::collections::VecDeque<UsageEntry>,
    page: Vec<UsageEntry>,
    /// A read the store is still answering (a remote store's; the memory and file stores
    /// answer at once): polled before anything else is read.
    fetching: Fetch<UsageEntry>,
    changes: Changes,
    stopping: Pin<Box<WaitForCancellationFutureOwned>>,
    stopped: bool,
}

impl std::fmt::Debug for UsageStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageStream")
            .field("epoch", &self.epoch)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

impl UsageStream {
    pub(super) fn new(
        store: Arc<dyn EventStore>,
        after: Option<UsageCursor>,
        stopping: WaitForCancellationFutureOwned,
    ) -> Self {
        let epoch = store.usage_epoch();
        let changes = store.usage_changes();
        Self {
            after: after.map_or(0, |cursor| cursor.position_in(epoch)),
            epoch,
            buffer: std::collections::VecDeque::new(),
            page: Vec::new(),
            fetching: None,
            changes,
            store,
            stopping: Box::pin(stopping),
            stopped: false,
        }
    }
}

impl Stream for UsageStream {
    type Item = Result<UsageRecord, RuntimeError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let s = self.get_mut();
        if s.stopped {
            return Poll::Ready(None);
        }
        if s.stopping.poll_unpin(cx).is_ready() {
            s.stopped = true;
            return Poll::Ready(Some(Err(RuntimeError::Unavailable(NotReady::Stopping))));
        }
        loop {
            if let Some(entry) = s.buffer.pop_front() {
                s.after = entry.fact.position;
                let cursor = UsageCursor {
                    epoch: s.epoch,
                    position: s.after,
                };
                return Poll::Ready(Some(Ok(UsageRecord { cursor, entry })));
            }
            if let Some(fetch) = s.fetching.as_mut() {
                let fetched = ready!(fetch.poll_unpin(cx));
                s.fetching = None;
                match fetched {
                    Ok(facts) => s.buffer.extend(facts),
                    Err(e) => {
                        // As when the runtime stops: the consumer resumes from its cursor.
                        s.stopped = true;
                        return Poll::Ready(Some(Err(RuntimeError::from_store(e, None))));
                    }
                }
            } else {
                // Marked before reading, so a fact kept after the read still wakes us.
                s.changes.mark_seen();
                s.fetching = s.store.read_usage(s.after, PAGE, &mut s.page);
                if s.fetching.is_some() {
                    continue;
                }
                s.buffer.extend(s.page.drain(..));
            }
            if !s.buffer.is_empty() {
                continue;
            }
            match s.changes.poll_changed(cx) {
                Poll::Pending => return Poll::Pending,
                // The order's signal never closes; a wake-up means: read again.
                Poll::Ready(_) => {}
            }
        }
    }
}
