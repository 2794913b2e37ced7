//! Following an execution: a cursor over the store that replays what was appended after it,
//! then waits for more, and ends after the terminal event.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, stream};

use crate::error::{FieldViolation, RuntimeError};
use crate::execution::{Event, ExecutionId};
use crate::store::{Changes, EventStore};

/// Events of one execution, in sequence order, ending after the terminal one.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Arc<Event>, RuntimeError>> + Send>>;

/// Events read from the store at a time.
const PAGE: usize = 256;

struct Cursor {
    store: Arc<dyn EventStore>,
    id: ExecutionId,
    after: u64,
    buffer: VecDeque<Arc<Event>>,
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
    let view = store.get(id).map_err(from_store)?;
    if after > view.last_sequence {
        return Err(RuntimeError::OutOfRange(FieldViolation::new(
            "after_sequence",
            format!(
                "is {after}, past the last event of {id} ({})",
                view.last_sequence
            ),
        )));
    }
    let done = view.state.is_terminal() && after == view.last_sequence;
    let cursor = Cursor {
        store,
        id,
        after,
        buffer: VecDeque::new(),
        changes: (!done).then_some(changes),
        done,
    };
    Ok(Box::pin(stream::unfold(cursor, next)))
}

async fn next(mut c: Cursor) -> Option<(Result<Arc<Event>, RuntimeError>, Cursor)> {
    loop {
        if let Some(event) = c.buffer.pop_front() {
            c.after = event.sequence;
            if event.is_terminal() {
                c.done = true;
                c.buffer.clear();
            }
            return Some((Ok(event), c));
        }
        if c.done {
            return None;
        }
        let changes = c.changes.as_mut()?;
        changes.mark_seen();
        match c.store.read(c.id, c.after, PAGE) {
            Ok(page) if !page.events.is_empty() => {
                if page.events.last().is_some_and(|e| e.is_terminal()) {
                    c.changes = None;
                }
                c.buffer.extend(page.events);
            }
            Ok(_) => {
                if changes.changed().await.is_err() {
                    // The record left the store (expired) before we saw its end.
                    c.done = true;
                    return Some((Err(RuntimeError::NotFound(c.id)), c));
                }
            }
            Err(e) => {
                c.done = true;
                return Some((Err(RuntimeError::from_store(e, None)), c));
            }
        }
    }
}
