//! gRPC-Web on the ingress's port: a request whose content type is `application/grpc-web`
//! (or `-text`, or either with `+proto`) is the gRPC server's own call, translated by tonic's
//! gRPC-Web layer (its length-prefixed frames, and its trailers written into the body), so a
//! browser's gRPC client, or `buf curl --protocol grpcweb`, calls the API over HTTP/1.1 with
//! nothing between. The gateway's secret holds for it as for every request here.

use http::header;
use hyper::body::Incoming;
use tonic::service::Routes;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower::{Layer, ServiceExt};

use super::body::{Answer, Body};

/// The gRPC server's services behind tonic's gRPC-Web layer.
pub(super) type Service = GrpcWebService<Routes>;

pub(super) fn service(routes: Routes) -> Service {
    GrpcWebLayer::new().layer(routes)
}

/// Whether `request` is gRPC-Web.
pub(super) fn is_grpc_web(request: &http::Request<Incoming>) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc-web"))
}

/// `status` as a gRPC-Web answer with no message: HTTP 200, the status in its headers.
pub(super) fn refused(status: tonic::Status) -> Answer {
    let mut answer = status.into_http::<tonic::body::Body>();
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc-web+proto"),
    );
    answer.map(Body::Grpc)
}

/// The call's answer, its status and trailers in gRPC-Web's form.
pub(super) async fn answer(service: &Service, request: http::Request<Incoming>) -> Answer {
    match service.clone().oneshot(request).await {
        Ok(response) => response.map(Body::Grpc),
        Err(never) => match never {},
    }
}
