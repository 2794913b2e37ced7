//! Following an execution: a cursor over a store [`Follower`] that replays what was appended
//! after it, then waits for more, and ends after the terminal event. The follower keeps the
//! execution's events readable, so a stream that has begun reaches its end even if the store
//! lets the execution go meanwhile.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_util::{FutureExt, Stream};

use super::metrics::OpenStream;
use super::{Exhausted, FieldViolation, NotReady, RuntimeError};
use crate::execution::{Event, ExecutionId};
use crate::store::{Closed, Fetch, Follower};

/// Events read from the store at a time.
const PAGE: usize = 256;

/// Events of one execution, in sequence order, ending after the terminal one. Dropping it
/// does not cancel the execution.
pub struct EventStream {
    id: ExecutionId,
    after: u64,
    buffer: VecDeque<Event>,
    /// Let go once the terminal event is read: a cursor a client stopped polling holds the
    /// execution's events only as long as it still has some to send.
    follower: Option<Follower>,
    /// A read the store is still answering (a remote store's; the memory and file stores
    /// answer at once): polled before anything else is read.
    fetching: Fetch<Event>,
    /// The follower's wake-up closed: what is left is read, then the stream ends.
    closed: bool,
    done: bool,
    /// Counted among the open streams while it lives (with metrics on).
    _open: Option<OpenStream>,
}

impl EventStream {
    /// The execution the events are of.
    pub fn execution_id(&self) -> ExecutionId {
        self.id
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("execution_id", &self.id)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

/// The stream of a follower the store made (following before looking, so no append can fall
/// between the look and the wait).
pub(super) fn events(
    follower: Follower,
    id: ExecutionId,
    after: u64,
    max_watchers: usize,
    open: impl FnOnce() -> Option<OpenStream>,
) -> Result<EventStream, RuntimeError> {
    if follower.readers() > max_watchers {
        return Err(RuntimeError::ResourceExhausted(Exhausted::Watchers {
            max: max_watchers,
        }));
    }
    let (last, state) = follower.position();
    if after > last {
        return Err(RuntimeError::OutOfRange(FieldViolation::new(
            "after_sequence",
            format!("is {after}, past the last event of {id} ({last})"),
        )));
    }
    let done = state.is_terminal() && after == last;
    Ok(EventStream {
        id,
        after,
        buffer: VecDeque::new(),
        follower: (!done).then_some(follower),
        fetching: None,
        closed: false,
        done,
        _open: open(),
    })
}

/// A hand-written stream rather than `stream::unfold`, which moves its state and a fresh
/// future in and out for every item: a cost per event that profiles showed.
impl Stream for EventStream {
    type Item = Result<Event, RuntimeError>;

    /// An event read already, the usual case, in a few lines the caller's poll takes in
    /// (inlined across the crate: it saves moving each event through one more return); the
    /// rest in `poll_more`.
    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let c = self.get_mut();
        match c.buffer.pop_front() {
            Some(event) => Poll::Ready(Some(Ok(c.hand_out(event)))),
            None => c.poll_more(cx),
        }
    }
}

impl EventStream {
    /// `event`, the next to go: the cursor moves past it, and past the end nothing is read.
    #[inline]
    fn hand_out(&mut self, event: Event) -> Event {
        self.after = event.sequence;
        if event.is_terminal() {
            self.done = true;
            self.buffer.clear();
        }
        event
    }

    /// Reads more when the buffer is empty, or waits for a change.
    fn poll_more(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Event, RuntimeError>>> {
        let c = self;
        loop {
            if let Some(event) = c.buffer.pop_front() {
                return Poll::Ready(Some(Ok(c.hand_out(event))));
            }
            if c.done {
                return Poll::Ready(None);
            }
            let Some(follower) = c.follower.as_mut() else {
                return Poll::Ready(None);
            };
            if let Some(fetch) = c.fetching.as_mut() {
                let fetched = ready!(fetch.poll_unpin(cx));
                c.fetching = None;
                match fetched {
                    Ok(events) => c.buffer.extend(events),
                    Err(e) => {
                        // The reader resumes from its cursor, here or at another replica.
                        c.done = true;
                        return Poll::Ready(Some(Err(RuntimeError::from_store(e, None))));
                    }
                }
            } else {
                follower.changes().mark_seen();
                c.fetching = follower.read_into(c.after, PAGE, &mut c.buffer);
                if c.fetching.is_some() {
                    continue;
                }
            }
            if !c.buffer.is_empty() {
                if c.buffer.back().is_some_and(Event::is_terminal) {
                    c.follower = None;
                }
                continue;
            }
            if c.closed {
                // Nothing more will come and nothing is left to read: the store failed (the
                // execution stays at its last durable event, and the reader resumes from
                // there after a restart), or it let the execution go.
                c.done = true;
                let end = if follower.changes().failed() {
                    RuntimeError::Unavailable(NotReady::StorageFailed)
                } else {
                    RuntimeError::NotFound(c.id)
                };
                return Poll::Ready(Some(Err(end)));
            }
            match follower.changes().poll_changed(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) => {}
                // Read once more: what was appended before the close is still to be sent.
                Poll::Ready(Err(Closed)) => c.closed = true,
            }
        }
    }
}
