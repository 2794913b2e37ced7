use std::future::ready;

use tower::ServiceExt as _;

use super::*;

/// A server that answers with `status` (and `message`) and reports what it was asked.
fn answering(
    status: &'static str,
    message: &'static str,
) -> impl Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> {
    tower::service_fn(move |request: http::Request<Body>| {
        let mut response = http::Response::new(Body::default());
        let headers = response.headers_mut();
        headers.insert("grpc-status", HeaderValue::from_static(status));
        headers.insert("grpc-message", HeaderValue::from_static(message));
        if let Some(accepted) = request.headers().get(ACCEPT_ENCODING) {
            headers.insert("x-saw-accept-encoding", accepted.clone());
        }
        ready(Ok::<_, Infallible>(response))
    })
}

fn call(encoding: Option<&'static str>, status: &'static str, message: &'static str) -> HeaderMap {
    let mut request = http::Request::new(Body::default());
    let headers = request.headers_mut();
    headers.insert(
        ACCEPT_ENCODING,
        HeaderValue::from_static("identity,deflate,gzip"),
    );
    if let Some(encoding) = encoding {
        headers.insert(ENCODING, HeaderValue::from_static(encoding));
    }
    let service = Compression::new(answering(status, message));
    let response = futures_util::FutureExt::now_or_never(service.oneshot(request))
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("the stand-in server answers at once"));
    response.headers().clone()
}

#[test]
fn a_plain_request_is_answered_plainly_and_told_what_is_accepted() {
    for encoding in [None, Some("identity")] {
        let headers = call(encoding, "0", "");
        assert_eq!(headers.get(ACCEPT_ENCODING).unwrap(), "gzip,zstd,identity");
        assert!(
            headers.get("x-saw-accept-encoding").is_none(),
            "the server is not told it may compress: {headers:?}"
        );
    }
}

#[test]
fn a_compressed_request_may_be_answered_compressed() {
    let headers = call(Some("gzip"), "0", "");
    assert_eq!(
        headers.get("x-saw-accept-encoding").unwrap(),
        "identity,deflate,gzip"
    );
    assert_eq!(headers.get(ACCEPT_ENCODING).unwrap(), "gzip,zstd,identity");
}

#[test]
fn data_that_does_not_inflate_is_the_callers_error() {
    let headers = call(
        Some("gzip"),
        "13",
        "Error%20decompressing:%20invalid%20gzip%20header,%20while%20sending%20request",
    );
    assert_eq!(headers.get("grpc-status").unwrap(), "3");
    let message = headers.get("grpc-message").unwrap().to_str().unwrap();
    assert!(message.contains("does%20not%20decompress"), "{message}");
    assert_eq!(headers.get(ACCEPT_ENCODING).unwrap(), "gzip,zstd,identity");

    // The size bound, and the runtime's own faults, stay what they are.
    let bound = call(Some("gzip"), "8", "Error%20decompressing:%20size%20limit");
    assert_eq!(bound.get("grpc-status").unwrap(), "8");
    let internal = call(Some("gzip"), "13", "internal_error");
    assert_eq!(internal.get("grpc-message").unwrap(), "internal_error");
    let plain = call(None, "13", "Error%20decompressing:%20whatever");
    assert_eq!(plain.get("grpc-status").unwrap(), "13");
}
