//! Compressed calls: what the generated server decompresses, what it compresses, and what a
//! caller learns of both.
//!
//! Requests compressed with gzip or zstd are taken (grpcio's `compression=Gzip`, grpc-go's
//! `UseCompressor`, a gateway that compresses large prompts). tonic inflates a message into
//! a buffer bounded by the same `max_decoding_message_size` as an uncompressed one, and stops
//! at the bound (`RESOURCE_EXHAUSTED`): a small body that would inflate to gigabytes costs at
//! most the bound. The codec then counts the inflated bytes (`codec::scan`) as it counts
//! plain ones, before anything is decoded.
//!
//! [`Compression`] wraps the generated server for the rest:
//! - Every response says `grpc-accept-encoding: gzip,zstd,identity`, as the protocol lets a
//!   server advertise what it takes.
//! - A response is compressed only for a caller that compressed its request (and then with
//!   the first encoding of its `grpc-accept-encoding` that the server has): stock clients list
//!   gzip as accepted on every call, and compressing each small streamed event for all of
//!   them would cost every call CPU and bytes for nothing.
//! - Data that does not inflate is the caller's error: `INVALID_ARGUMENT`, where tonic says
//!   `INTERNAL` and quotes the decompressor.
//!
//! An uncompressed call pays a header lookup, a header removal when it lists encodings, and
//! one header on its response; nothing is inflated, deflated or buffered for it.

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures_util::FutureExt as _;
use futures_util::future::Map;
use http::{HeaderMap, HeaderName, HeaderValue};
use tonic::body::Body;
use tonic::codec::CompressionEncoding;
use tonic::server::NamedService;
use tower::Service;

/// Which encoding the request's messages are in.
const ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
/// Which encodings the sender takes.
const ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
/// What the server takes, in its order of preference.
const ACCEPTED: HeaderValue = HeaderValue::from_static("gzip,zstd,identity");

/// The encodings requests may come in and responses may go out in.
pub(super) const ENCODINGS: [CompressionEncoding; 2] =
    [CompressionEncoding::Gzip, CompressionEncoding::Zstd];

/// The generated server `S`, with the compression rules above.
#[derive(Debug, Clone)]
pub(crate) struct Compression<S>(S);

impl<S> Compression<S> {
    /// `server`, whose generated options accept and send [`ENCODINGS`].
    pub(super) fn new(server: S) -> Self {
        Self(server)
    }
}

impl<S: NamedService> NamedService for Compression<S> {
    const NAME: &'static str = S::NAME;
}

type Answer = Result<http::Response<Body>, Infallible>;

impl<S> Service<http::Request<Body>> for Compression<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Map<S::Future, fn(Answer) -> Answer>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let compressed = request
            .headers()
            .get(ENCODING)
            .is_some_and(|encoding| encoding != "identity");
        if compressed {
            self.0.call(request).map(answer_compressed)
        } else {
            // What the caller accepts does not make its answer compressed.
            request.headers_mut().remove(ACCEPT_ENCODING);
            self.0.call(request).map(answer)
        }
    }
}

/// The answer to an uncompressed request, with the encodings advertised.
fn answer(answer: Answer) -> Answer {
    answer.map(|mut response| {
        response.headers_mut().insert(ACCEPT_ENCODING, ACCEPTED);
        response
    })
}

/// The answer to a compressed request: as [`answer`], and data that did not inflate is the
/// caller's error.
fn answer_compressed(answer: Answer) -> Answer {
    answer.map(|mut response| {
        if did_not_inflate(response.headers()) {
            response = tonic::Status::invalid_argument(
                "the request's message does not decompress as its grpc-encoding says",
            )
            .into_http();
        }
        response.headers_mut().insert(ACCEPT_ENCODING, ACCEPTED);
        response
    })
}

/// Whether `headers` end the call with tonic's status for a message its decompressor
/// refused (`INTERNAL`, "Error decompressing: ..."); its size bound is `RESOURCE_EXHAUSTED`
/// and stays so.
fn did_not_inflate(headers: &HeaderMap) -> bool {
    headers.get("grpc-status").is_some_and(|s| s == "13")
        && headers
            .get("grpc-message")
            .is_some_and(|m| m.as_bytes().starts_with(b"Error%20decompressing"))
}

#[cfg(test)]
mod tests;
