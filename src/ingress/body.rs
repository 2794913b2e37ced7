//! The body of an answer: whole, or server-sent events written as an execution's events come
//! (`stream.rs`).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body::Frame;

use futures_util::Stream;

use super::stream::{Encoder, Events};
use crate::execution::ExecutionId;

/// An answer of the ingress.
pub(super) type Answer = http::Response<Body>;

/// What an answer carries.
pub(super) enum Body {
    /// All of it, at once.
    Whole(Option<Bytes>),
    /// An execution's events, as the API shows them.
    Events(Pin<Box<dyn Stream<Item = Bytes> + Send>>),
    /// A gRPC-Web call's answer (`grpc_web.rs`), its trailers in its body.
    Grpc(tonic::body::Body),
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Events(events) => events
                .as_mut()
                .poll_next(cx)
                .map(|bytes| bytes.map(|b| Ok(Frame::data(b)))),
            // A body that fails ends where it is: a gRPC-Web client then sees no trailers,
            // which it reports as the call's failure.
            Self::Grpc(body) => Pin::new(body).poll_frame(cx).map(|frame| match frame {
                Some(Ok(frame)) => Some(Ok(frame)),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "a gRPC-Web answer's body failed");
                    None
                }
                None => None,
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Whole(bytes) => bytes.is_none(),
            Self::Events(_) => false,
            Self::Grpc(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Self::Whole(bytes) => {
                http_body::SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Self::Events(_) => http_body::SizeHint::default(),
            Self::Grpc(body) => body.size_hint(),
        }
    }
}

/// `value` as a JSON answer with `status`.
pub(super) fn json(status: StatusCode, value: &impl serde::Serialize) -> Answer {
    // Serializing the ingress's own types into memory fails only on a bug (a map with
    // non-string keys): an empty object is still JSON.
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    whole(status, "application/json", Bytes::from(body))
}

/// `body` of `kind` as an answer with `status`.
pub(super) fn whole(status: StatusCode, kind: &'static str, body: Bytes) -> Answer {
    let mut answer = http::Response::new(Body::Whole(Some(body)));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    answer
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Whole(bytes) => f.debug_tuple("Whole").field(bytes).finish(),
            Self::Events(_) => f.write_str("Events"),
            Self::Grpc(_) => f.write_str("Grpc"),
        }
    }
}

/// `events` as a server-sent event stream.
pub(super) fn events<E: Encoder>(events: Events<E>) -> Answer {
    let mut answer = http::Response::new(Body::Events(Box::pin(events)));
    let headers = answer.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    answer
}

/// Names the execution an answer is of (`x-model-runtime-execution-id`, and `x-request-id`,
/// which OpenAI's SDKs show as the request's id) and, once known, the target that answered
/// (`x-model-runtime-target`, `provider/model`).
pub(super) fn tag(answer: &mut Answer, id: ExecutionId, target: &str) {
    let headers = answer.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&id.to_text()) {
        headers.insert("x-model-runtime-execution-id", id.clone());
        headers.insert("x-request-id", id);
    }
    if let Some(target) = (!target.is_empty())
        .then(|| HeaderValue::from_str(target).ok())
        .flatten()
    {
        headers.insert("x-model-runtime-target", target);
    }
}
