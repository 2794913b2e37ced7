//! A call whose minted token the provider refused (401) before it answered anything else: the
//! token was revoked or rotated early, which is no fault of the target's. It is forgotten, a
//! new one minted, and the call made once more, within the same attempt; a second refusal is
//! the attempt's answer (and health ejects the provider's models, as for a bad key).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::{Future, Stream};
use tokio::time::Instant;

use super::{Bearer, TokenSource};
use crate::execution::{AttemptCode, Text, UsageQuantity};
use crate::provider::http::Upstream;
use crate::provider::{CallStream, ProviderError, ProviderEvent, ProviderStream, unsent};

/// Sends the call again with a token (the same request, another `Authorization`).
pub(in crate::provider) type Send = Box<dyn FnOnce(&Bearer) -> ProviderStream + std::marker::Send>;

/// `first` (sent with `bearer`), made once more by `again` with a new token from `source` if
/// the provider refuses `bearer` before anything else came.
pub(in crate::provider) fn once_more(
    first: ProviderStream,
    bearer: Bearer,
    source: Arc<TokenSource>,
    upstream: Upstream,
    deadline: Instant,
    again: Send,
) -> ProviderStream {
    Box::pin(Remint::First {
        stream: first,
        again: Some(Box::new(Again {
            bearer,
            source,
            upstream,
            deadline,
            send: again,
        })),
    })
}

struct Again {
    bearer: Bearer,
    source: Arc<TokenSource>,
    upstream: Upstream,
    deadline: Instant,
    send: Send,
}

enum Remint {
    /// The first call; `again` while nothing came from it yet.
    First {
        stream: ProviderStream,
        again: Option<Box<Again>>,
    },
    /// Minting the new token: nothing is being sent.
    Minting(Pin<Box<dyn Future<Output = ProviderStream> + std::marker::Send>>),
    /// The second call.
    Then(ProviderStream),
}

impl Stream for Remint {
    type Item = Result<ProviderEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match &mut *self {
                Self::First { stream, again } => {
                    let item = std::task::ready!(stream.as_mut().poll_next(cx));
                    let refused =
                        matches!(&item, Some(Err(e)) if e.code == AttemptCode::Unauthorized);
                    match again.take() {
                        Some(again) if refused => {
                            *self = Self::Minting(Box::pin(mint(again)));
                        }
                        // Anything else came first: the call is answered.
                        _ => return Poll::Ready(item),
                    }
                }
                Self::Minting(minting) => {
                    let stream = std::task::ready!(minting.as_mut().poll(cx));
                    *self = Self::Then(stream);
                }
                Self::Then(stream) => return stream.as_mut().poll_next(cx),
            }
        }
    }

    /// The call's own, once it is the one answering: while a refusal may still make a
    /// second call, what the first holds ready may never be read.
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::First {
                stream,
                again: None,
            }
            | Self::Then(stream) => stream.size_hint(),
            Self::First { .. } | Self::Minting(_) => (0, None),
        }
    }
}

/// The refused token forgotten, a new one, and the call sent with it.
async fn mint(again: Box<Again>) -> ProviderStream {
    tracing::warn!(
        execution_id = again.upstream.execution_id(),
        provider = %again.upstream.name,
        "the provider refused the service account's token; minting a new one"
    );
    again.source.forget(&again.bearer);
    let Again {
        source,
        upstream,
        deadline,
        send,
        ..
    } = *again;
    match source.bearer(&upstream, deadline).await {
        Ok(bearer) => send(&bearer),
        Err(error) => unsent(error),
    }
}

impl CallStream for Remint {
    fn unreported_usage(mut self: Pin<&mut Self>) -> Vec<UsageQuantity> {
        match &mut *self {
            Self::First { stream, .. } | Self::Then(stream) => stream.as_mut().unreported_usage(),
            Self::Minting(_) => Vec::new(),
        }
    }

    fn response_model(&self) -> Option<Text> {
        match self {
            Self::First { stream, .. } | Self::Then(stream) => stream.response_model(),
            Self::Minting(_) => None,
        }
    }

    /// While minting, the first request was refused and the second is not sent: nothing
    /// runs remotely.
    fn sent(&self) -> bool {
        match self {
            Self::First { stream, .. } | Self::Then(stream) => stream.sent(),
            Self::Minting(_) => false,
        }
    }
}
