//! An execution's events as an API shows them: each event given to the API's [`Encoder`],
//! which writes server-sent events (or nothing, for what the API does not show), read as they
//! come and gathered while more are ready, so a burst leaves in one write and a lone delta at
//! once.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;

use super::detach::Watching;
use crate::execution::Event;
use crate::runtime::EventStream;

/// Bytes gathered before they are handed on, even while more events are ready.
const FLUSH: usize = 16 * 1024;

/// How one API writes an execution's events.
pub(super) trait Encoder: Send + Unpin + 'static {
    /// Writes what `event` shows, if anything, to `out`; true when the stream ends with it.
    fn event(&mut self, event: &Event, out: &mut BytesMut) -> bool;

    /// Writes the end of a stream the runtime could not go on reading (the store failed):
    /// the API's error event, never its normal end.
    fn cut(&mut self, out: &mut BytesMut);
}

/// Events of one execution, written by `E`.
pub(super) struct Events<E> {
    events: EventStream,
    encoder: E,
    out: BytesMut,
    /// Events up to this sequence were seen by the caller already (`Last-Event-ID`).
    after: u64,
    /// The caller's hold on the execution: let go before the stream ended, it cancels the
    /// execution (`detach.rs`).
    watching: Option<Watching>,
    done: bool,
}

impl<E> std::fmt::Debug for Events<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("events", &self.events)
            .field("after", &self.after)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<E: Encoder> Events<E> {
    pub(super) fn new(
        events: EventStream,
        encoder: E,
        after: u64,
        watching: Option<Watching>,
    ) -> Self {
        Self {
            events,
            encoder,
            out: BytesMut::new(),
            after,
            watching,
            done: false,
        }
    }

    /// Reads events until the encoder has written something or the stream ended: what an
    /// answer's status waits for.
    pub(super) async fn shown(&mut self) {
        std::future::poll_fn(|cx| self.fill(cx)).await;
    }

    /// The encoder, to ask what it saw.
    pub(super) fn encoder(&self) -> &E {
        &self.encoder
    }

    /// Reads the events that are ready into `out`: ready once something is written (or the
    /// stream ended), pending while nothing is.
    fn fill(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while !self.done && self.out.len() < FLUSH {
            match Pin::new(&mut self.events).poll_next(cx) {
                Poll::Ready(Some(Ok(event))) => {
                    // The encoder sees every event (a target, usage), and what it writes of
                    // one the caller saw already is taken back.
                    let mark = self.out.len();
                    let ended = self.encoder.event(&event, &mut self.out);
                    if event.sequence <= self.after {
                        self.out.truncate(mark);
                    }
                    if ended {
                        self.end();
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    tracing::warn!(error = %e, "reading an execution's events for the HTTP ingress");
                    self.encoder.cut(&mut self.out);
                    self.end();
                }
                Poll::Ready(None) => {
                    // The stream ends after the terminal event, which ended it here first.
                    self.encoder.cut(&mut self.out);
                    self.end();
                }
                Poll::Pending if self.out.is_empty() => return Poll::Pending,
                Poll::Pending => break,
            }
        }
        Poll::Ready(())
    }

    /// The stream ended: the caller saw all it will, so letting go of it cancels nothing.
    fn end(&mut self) {
        self.done = true;
        if let Some(watching) = &mut self.watching {
            watching.ended();
        }
    }
}

impl<E: Encoder> Stream for Events<E> {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = self.get_mut();
        ready!(this.fill(cx));
        if this.out.is_empty() {
            return Poll::Ready(None);
        }
        Poll::Ready(Some(this.out.split().freeze()))
    }
}
