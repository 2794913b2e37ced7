//! Reading a provider stream in batches: everything it has ready, without waiting for more,
//! recorded as events in one go.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;

use super::Driver;
use super::evidence::{EndKind, attempt_error};
use crate::execution::{
    AttemptCode, CommitTracker, Delivery, ErrorCode, EventPayload, ExecutionResult, PlanTarget,
    ToolCallStart, UsageFact, UsageQuantity,
};
use crate::provider::{ProviderError, ProviderEvent, ProviderStream};

/// One item of a provider stream; `None` is its end.
pub(super) type Item = Option<Result<ProviderEvent, ProviderError>>;

/// The most items taken at once, so one burst cannot grow a batch without bound.
pub(super) const MAX: usize = 64;

/// Fills `items` with what `stream` yields: waits for the first item, then takes the ones
/// already ready, up to [`MAX`]. Stops after an item that ends the stream (its end, an
/// error, `Finished`), which must not be polled past.
pub(super) fn ready<'a>(
    stream: &'a mut ProviderStream,
    items: &'a mut Vec<Item>,
) -> impl Future<Output = ()> + 'a {
    poll_fn(move |cx| {
        while items.len() < MAX {
            let Poll::Ready(item) = stream.as_mut().poll_next(cx) else {
                break;
            };
            let last = !matches!(item, Some(Ok(ref event)) if !matches!(event, ProviderEvent::Finished(_)));
            if items.len() == items.capacity() {
                // Out of room: the item may have come with others the stream holds ready (a
                // piece of a body parsed at once), room for them in one step, and never for
                // more than a batch.
                let ready = stream.size_hint().0.saturating_add(1);
                let room = items.len().saturating_add(ready).max(2 * items.len());
                items.reserve_exact(room.clamp(4, MAX) - items.len());
            }
            items.push(item);
            if last {
                break;
            }
        }
        if items.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
}

impl Driver {
    /// Records the events that `items` (of attempt `attempt` on `target`) bring, and the
    /// completion when the reply finished; returns how the attempt ended, if it did, and how
    /// many events are recorded.
    pub(super) fn record_batch(
        &mut self,
        items: &mut Vec<Item>,
        target: &PlanTarget,
        attempt: u32,
        tracker: &mut CommitTracker,
    ) -> (Option<EndKind>, usize) {
        self.pending.reserve(items.len() + 1);
        let text: usize = items
            .iter()
            .map(|item| match item {
                Some(Ok(ProviderEvent::TextDelta(text))) => text.len(),
                _ => 0,
            })
            .sum();
        tracker.reserve(text);
        let mut end = None;
        for item in items.drain(..) {
            let event = match item {
                Some(Ok(event)) => event,
                Some(Err(error)) => {
                    end = Some(EndKind::Failed(attempt_error(error)));
                    break;
                }
                None => {
                    let error = ProviderError::retryable(
                        AttemptCode::StreamEnded,
                        "the provider stream ended before the reply finished",
                    );
                    end = Some(EndKind::Failed(attempt_error(error)));
                    break;
                }
            };
            let payload = match event {
                ProviderEvent::Finished(reason) => {
                    end = Some(EndKind::Succeeded(reason));
                    break;
                }
                ProviderEvent::Usage(quantity) => self.usage(target, attempt, quantity),
                ProviderEvent::Progress(message) => EventPayload::Progress { attempt, message },
                // An empty piece says nothing: not stored.
                ProviderEvent::Reasoning(_, text) if text.is_empty() => continue,
                ProviderEvent::Reasoning(piece, text) => EventPayload::ReasoningDelta {
                    attempt,
                    piece,
                    text,
                },
                ProviderEvent::TextDelta(text) => EventPayload::TextDelta { attempt, text },
                ProviderEvent::ToolCallStarted { index, id, name } => {
                    EventPayload::ToolCallStarted(Arc::new(ToolCallStart {
                        attempt,
                        index,
                        id,
                        name,
                    }))
                }
                ProviderEvent::ToolCallArgumentsDelta { index, delta } => {
                    EventPayload::ToolCallArgumentsDelta {
                        attempt,
                        index,
                        delta,
                    }
                }
            };
            if !self.keep(payload, tracker) {
                end = Some(EndKind::Cut(ErrorCode::OutputTooLarge));
                break;
            }
        }
        if let Some(EndKind::Succeeded(finish_reason)) = end {
            // What was held goes out with the completion, in one append.
            tracker.expose();
            self.pending.append(&mut self.held);
            self.size.count();
            self.pending
                .push(EventPayload::Completed(Arc::new(ExecutionResult {
                    output: tracker.take_output(),
                    finish_reason,
                    provider: target.provider.clone(),
                    model: target.model.clone(),
                    attempt,
                })));
        }
        (end, self.pending.len())
    }

    /// Keeps an event of the attempt: pending, or held until the attempt completes when it is
    /// output under buffered delivery. An empty output delta is dropped. False, keeping
    /// nothing, when the event does not fit the execution's bounds.
    fn keep(&mut self, payload: EventPayload, tracker: &mut CommitTracker) -> bool {
        if payload.is_empty_output() {
            return true;
        }
        if !self.size.count_if_fits(&payload) {
            return false;
        }
        tracker.record(&payload);
        if self.job.delivery == Delivery::Buffered && payload.is_output() {
            self.held.push(payload);
        } else {
            self.pending.push(payload);
        }
        true
    }

    /// A usage fact of attempt `attempt` on `target`.
    pub(super) fn usage(
        &self,
        target: &PlanTarget,
        attempt: u32,
        quantity: UsageQuantity,
    ) -> EventPayload {
        super::span::usage(&self.span, &quantity);
        EventPayload::Usage(Arc::new(UsageFact {
            unit: quantity.unit,
            quantity: quantity.quantity,
            source: quantity.source,
            attempt,
            provider: target.provider.clone(),
            model: target.model.clone(),
            labels: self.job.labels.clone(),
            position: 0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;
    use crate::execution::FinishReason;
    use crate::provider::plain_stream;

    fn text(t: &str) -> Result<ProviderEvent, ProviderError> {
        Ok(ProviderEvent::TextDelta(t.into()))
    }

    #[tokio::test]
    async fn takes_what_is_ready_and_stops_after_the_end() {
        let ready_now = stream::iter([
            text("a"),
            text("b"),
            Ok(ProviderEvent::Finished(FinishReason::Stop)),
            text("never read"),
        ]);
        let mut stream = plain_stream(ready_now);
        let mut items = Vec::new();
        ready(&mut stream, &mut items).await;
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(matches!(items[2], Some(Ok(ProviderEvent::Finished(_)))));
    }

    #[tokio::test]
    async fn a_burst_is_cut_at_the_cap_and_an_end_is_kept() {
        let mut stream = plain_stream(stream::iter((0..MAX + 5).map(|_| text("x"))));
        let mut items = Vec::new();
        ready(&mut stream, &mut items).await;
        assert_eq!(items.len(), MAX);
        items.clear();
        ready(&mut stream, &mut items).await;
        assert_eq!(items.len(), 5 + 1, "the rest, then the stream's end");
        assert!(items[5].is_none());
    }

    /// Bursts of items, each ready at once (the size hint says how much of it is left), a
    /// wait between them.
    struct Bursts(std::collections::VecDeque<std::collections::VecDeque<Item>>);

    impl futures_util::Stream for Bursts {
        type Item = Result<ProviderEvent, ProviderError>;

        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> Poll<Option<Self::Item>> {
            let Some(burst) = self.0.front_mut() else {
                return Poll::Ready(None);
            };
            if let Some(item) = burst.pop_front() {
                return Poll::Ready(item);
            }
            self.0.pop_front();
            cx.waker().wake_by_ref();
            Poll::Pending
        }

        fn size_hint(&self) -> (usize, Option<usize>) {
            (self.0.front().map_or(0, |burst| burst.len()), None)
        }
    }

    #[tokio::test]
    async fn room_is_made_for_a_burst_at_once_and_never_past_a_batch() {
        let burst = |n| (0..n).map(|_| Some(text("x"))).collect();
        let mut stream = plain_stream(Bursts([burst(1), burst(40), burst(100)].into()));
        let mut items = Vec::new();
        for (taken, room) in [(1, 4), (40, 40), (MAX, MAX)] {
            ready(&mut stream, &mut items).await;
            assert_eq!((items.len(), items.capacity()), (taken, room));
            items.clear();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_the_first_item_only() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut stream = plain_stream(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
        let mut items = Vec::new();
        tx.send(text("a")).unwrap();
        ready(&mut stream, &mut items).await;
        assert_eq!(
            items.len(),
            1,
            "nothing more was ready; it did not wait for it"
        );
        let sender = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            tx.send(text("b")).unwrap();
            tx // kept open: the stream has not ended
        });
        items.clear();
        ready(&mut stream, &mut items).await;
        assert_eq!(items.len(), 1);
        drop(sender.await.unwrap());
    }
}
