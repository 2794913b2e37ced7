//! A call whose request can go out only after something is awaited: credentials minted or
//! fetched over the network (a service account's access token, a container's AWS keys) when
//! the cached ones are too old. The request itself, and everything after it, is the stream the
//! awaited step returns; a call whose credentials are at hand never comes through here.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Future, Stream};

use super::{CallStream, ProviderError, ProviderEvent, ProviderStream};
use crate::execution::{Text, UsageQuantity};

/// The stream of `start` once it resolves. Dropping it before then drops `start` (the
/// credential request it is waiting on included).
pub(super) fn after<F>(start: F) -> ProviderStream
where
    F: Future<Output = ProviderStream> + Send + 'static,
{
    Box::pin(Deferred::Waiting(Box::pin(start)))
}

enum Deferred {
    Waiting(Pin<Box<dyn Future<Output = ProviderStream> + Send>>),
    Started(ProviderStream),
}

impl Stream for Deferred {
    type Item = Result<ProviderEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match &mut *self {
                Self::Waiting(start) => match start.as_mut().poll(cx) {
                    Poll::Ready(stream) => *self = Self::Started(stream),
                    Poll::Pending => return Poll::Pending,
                },
                Self::Started(stream) => return stream.as_mut().poll_next(cx),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::Waiting(_) => (0, None),
            Self::Started(stream) => stream.size_hint(),
        }
    }
}

impl CallStream for Deferred {
    /// Nothing was sent while waiting, so nothing was used.
    fn unreported_usage(mut self: Pin<&mut Self>) -> Vec<UsageQuantity> {
        match &mut *self {
            Self::Waiting(_) => Vec::new(),
            Self::Started(stream) => stream.as_mut().unreported_usage(),
        }
    }

    fn response_model(&self) -> Option<Text> {
        match self {
            Self::Waiting(_) => None,
            Self::Started(stream) => stream.response_model(),
        }
    }

    /// Nothing is sent while waiting.
    fn sent(&self) -> bool {
        match self {
            Self::Waiting(_) => false,
            Self::Started(stream) => stream.sent(),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;
    use crate::execution::FinishReason;
    use crate::provider::plain_stream;

    #[tokio::test]
    async fn the_awaited_stream_is_the_calls() {
        let (send, receive) = tokio::sync::oneshot::channel::<()>();
        let mut stream = after(async move {
            receive.await.ok();
            plain_stream(futures_util::stream::iter([Ok(ProviderEvent::Finished(
                FinishReason::Stop,
            ))]))
        });
        assert!(futures_util::poll!(stream.next()).is_pending());
        assert!(stream.as_mut().unreported_usage().is_empty());
        send.send(()).ok();
        let items: Vec<_> = stream.collect().await;
        assert!(matches!(
            items.as_slice(),
            [Ok(ProviderEvent::Finished(FinishReason::Stop))]
        ));
    }
}
