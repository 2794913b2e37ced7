//! gRPC-Web on the ingress's port, with tonic's gRPC-Web client (its own encoding, trailers
//! in the body, over HTTP/1.1 as a browser sends it): a unary call, the event stream of an
//! execution, a refusal with its status, and the gateway's secret.

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::Code;
use tonic_web::GrpcWebClientLayer;

use super::serve;
use crate::common::*;

/// A `ModelRuntime` client speaking gRPC-Web over HTTP/1.1 to `addr`.
fn grpc_web(
    addr: std::net::SocketAddr,
) -> ModelRuntimeClient<
    tonic_web::GrpcWebClientService<
        Client<
            hyper_util::client::legacy::connect::HttpConnector,
            tonic_web::GrpcWebCall<tonic::body::Body>,
        >,
    >,
> {
    let http1 = Client::builder(TokioExecutor::new()).build_http();
    let service = tower::ServiceBuilder::new()
        .layer(GrpcWebClientLayer::new())
        .service(http1);
    ModelRuntimeClient::with_origin(service, format!("http://{addr}").parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_web_calls_reach_the_api_through_the_ingress() {
    let (server, http) = serve(echo()).await;
    let mut client = grpc_web(http);

    let metadata = within(client.get_runtime_metadata(pb::GetRuntimeMetadataRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert!(
        metadata.abilities.iter().any(|a| a.name == "chat"),
        "{metadata:?}"
    );

    // A server stream: every event of the execution, to its end.
    let mut stream = within(client.execute(request("chat", "one two three")))
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Some(event) = within(stream.message()).await.unwrap() {
        events.push(event);
    }
    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&events), "one two three");

    // A refusal keeps its status and message.
    let refused = within(client.execute(request("no-such-ability", "x"))).await;
    let status = refused.expect_err("an unknown ability is refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("ability"), "{status:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_web_needs_the_gateway_secret_as_every_ingress_request_does() {
    let config = echo()
        .ingress("127.0.0.1:0", std::time::Duration::from_millis(400))
        .ingress_secret_env("INGRESS_SECRET")
        .build_with_env(&|name| (name == "INGRESS_SECRET").then(|| "s3cret".to_owned()))
        .unwrap();
    let server = start_with(config).await;
    let mut client = grpc_web(server.http.unwrap());
    let refused = within(client.get_runtime_metadata(pb::GetRuntimeMetadataRequest::default()))
        .await
        .expect_err("no secret, no call");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(!refused.message().contains("s3cret"));

    let mut call = tonic::Request::new(pb::GetRuntimeMetadataRequest::default());
    call.metadata_mut()
        .insert("authorization", "Bearer s3cret".parse().unwrap());
    let answered = within(client.get_runtime_metadata(call)).await;
    assert!(answered.is_ok(), "{answered:?}");
    server.stop().await;
}
