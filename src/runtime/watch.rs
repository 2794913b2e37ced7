//! Following an execution: a cursor over the store that replays what was appended after it,
//! then waits for more, and ends after the terminal event.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;

use super::{FieldViolation, RuntimeError};
use crate::execution::{ExecutionId, StoredEvent};
use crate::store::{Changes, Closed, EventStore};

/// Events of one execution, in sequence order, ending after the terminal one.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StoredEvent, RuntimeError>> + Send>>;

/// Events read from the store at a time.
const PAGE: usize = 256;

struct Cursor {
    store: Arc<dyn EventStore>,
    id: ExecutionId,
    after: u64,
    buffer: VecDeque<StoredEvent>,
    /// Let go once the terminal event is read: a cursor a client stopped polling must not keep
    /// a finished execution from being evicted.
    changes: Option<Changes>,
    done: bool,
}

pub(super) fn follow(
    store: Arc<dyn EventStore>,
    id: ExecutionId,
    after: u64,
) -> Result<EventStream, RuntimeError> {
    let from_store = |e| RuntimeError::from_store(e, None);
    // Subscribe before looking, so no append can fall between the look and the wait.
    let changes = store.subscribe(id).map_err(from_store)?;
    let (last, state) = store.position(id).map_err(from_store)?;
    if after > last {
        return Err(RuntimeError::OutOfRange(FieldViolation::new(
            "after_sequence",
            format!("is {after}, past the last event of {id} ({last})"),
        )));
    }
    let done = state.is_terminal() && after == last;
    Ok(Box::pin(Cursor {
        store,
        id,
        after,
        buffer: VecDeque::new(),
        changes: (!done).then_some(changes),
        done,
    }))
}

/// A hand-written stream rather than `stream::unfold`, which moves its state and a fresh
/// future in and out for every item: a cost per event that profiles showed.
impl Stream for Cursor {
    type Item = Result<StoredEvent, RuntimeError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let c = self.get_mut();
        loop {
            if let Some(event) = c.buffer.pop_front() {
                c.after = event.sequence;
                if event.is_terminal() {
                    c.done = true;
                    c.buffer.clear();
                }
                return Poll::Ready(Some(Ok(event)));
            }
            if c.done {
                return Poll::Ready(None);
            }
            let Some(changes) = c.changes.as_mut() else {
                return Poll::Ready(None);
            };
            changes.mark_seen();
            match c.store.read(c.id, c.after, PAGE) {
                Ok(page) if !page.events.is_empty() => {
                    if page.events.last().is_some_and(|e| e.is_terminal()) {
                        c.changes = None;
                    }
                    c.buffer.extend(page.events);
                }
                Ok(_) => match changes.poll_changed(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(Closed)) => {
                        // The record left the store (expired) before we saw its end.
                        c.done = true;
                        return Poll::Ready(Some(Err(RuntimeError::NotFound(c.id))));
                    }
                },
                Err(e) => {
                    c.done = true;
                    return Poll::Ready(Some(Err(RuntimeError::from_store(e, None))));
                }
            }
        }
    }
}
