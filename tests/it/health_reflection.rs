//! The server answers `grpc.health.v1.Health` and server reflection in both `v1` and
//! `v1alpha`, so any client works without a .proto file.

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::config::ConfigBuilder;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SERVICE: &str = "model_runtime.v1.ModelRuntime";

async fn health(channel: Channel, service: &str) -> ServingStatus {
    let mut client = HealthClient::new(channel);
    within(client.check(HealthCheckRequest {
        service: service.to_owned(),
    }))
    .await
    .expect("health check")
    .into_inner()
    .status()
}

#[tokio::test]
async fn health_is_serving_overall_and_for_the_service() {
    let server = start(echo()).await;
    assert_eq!(
        health(server.channel.clone(), "").await,
        ServingStatus::Serving
    );
    assert_eq!(
        health(server.channel.clone(), SERVICE).await,
        ServingStatus::Serving
    );
    server.stop().await;
}

/// A model that never answers keeps the drain open while we look.
fn hanging_config() -> ConfigBuilder {
    hanging().drain_timeout(Duration::from_secs(60))
}

#[tokio::test]
async fn health_is_not_serving_once_shutdown_begins() {
    let mut server = start(hanging_config()).await;
    let mut c = server.client.clone();
    let running = submit(&mut c, request("chat", "keep the drain open")).await;
    until_provider(&mut c, "scripted", |p| p.in_flight == 1).await;

    server.begin_shutdown();
    // The flip happens on the server's task; wait for it, bounded.
    let channel = server.channel.clone();
    within(async {
        while health(channel.clone(), SERVICE).await != ServingStatus::NotServing {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(
        health(server.channel.clone(), "").await,
        ServingStatus::NotServing
    );

    // Ending the last execution lets the drain finish and the server stop cleanly.
    cancel(&mut c, &running.execution_id, "test over").await;
    drop(c);
    server.stop().await;
}

/// One reflection suite per protocol version; the generated types differ only by module.
macro_rules! reflection_suite {
    ($v:ident) => {
        mod $v {
            use super::*;
            use prost::Message as _;
            use tonic_reflection::pb::$v::ServerReflectionRequest;
            use tonic_reflection::pb::$v::server_reflection_client::ServerReflectionClient;
            use tonic_reflection::pb::$v::server_reflection_request::MessageRequest;
            use tonic_reflection::pb::$v::server_reflection_response::MessageResponse;

            async fn ask(channel: Channel, request: MessageRequest) -> MessageResponse {
                let mut client = ServerReflectionClient::new(channel);
                let request = ServerReflectionRequest {
                    host: String::new(),
                    message_request: Some(request),
                };
                let mut responses =
                    within(client.server_reflection_info(futures_util::stream::iter([request])))
                        .await
                        .expect("reflection call")
                        .into_inner();
                within(responses.message())
                    .await
                    .expect("reflection response")
                    .expect("one response")
                    .message_response
                    .expect("response set")
            }

            #[tokio::test]
            async fn lists_the_runtime_and_health_services() {
                let server = start(echo()).await;
                let response = ask(
                    server.channel.clone(),
                    MessageRequest::ListServices(String::new()),
                )
                .await;
                let MessageResponse::ListServicesResponse(list) = response else {
                    panic!("unexpected response {response:?}");
                };
                let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
                assert!(names.contains(&SERVICE), "{names:?}");
                assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
                server.stop().await;
            }

            #[tokio::test]
            async fn serves_the_file_declaring_a_message() {
                let server = start(echo()).await;
                let symbol = "model_runtime.v1.ExecuteRequest";
                let response = ask(
                    server.channel.clone(),
                    MessageRequest::FileContainingSymbol(symbol.to_owned()),
                )
                .await;
                let MessageResponse::FileDescriptorResponse(files) = response else {
                    panic!("unexpected response {response:?}");
                };
                let files: Vec<prost_types::FileDescriptorProto> = files
                    .file_descriptor_proto
                    .iter()
                    .map(|bytes| {
                        prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap()
                    })
                    .collect();
                let declaring = files
                    .iter()
                    .find(|f| f.message_type.iter().any(|m| m.name() == "ExecuteRequest"))
                    .expect("a file declares ExecuteRequest");
                assert_eq!(declaring.package(), "model_runtime.v1");
                assert!(
                    declaring.service.iter().any(|s| s.name() == "ModelRuntime"),
                    "the service lives beside its request"
                );
                server.stop().await;
            }
        }
    };
}

reflection_suite!(v1);
reflection_suite!(v1alpha);

/// A method the server does not have is `UNIMPLEMENTED`, whether its service is the
/// runtime's (answered by the runtime's server directly, which advertises its compression on
/// every answer) or one the server does not serve (answered by the routes, which do not).
#[tokio::test]
async fn a_method_the_server_does_not_have_is_unimplemented() {
    let server = start(echo()).await;
    let mut grpc = tonic::client::Grpc::new(server.channel.clone());
    for (path, runtimes) in [
        ("/model_runtime.v1.ModelRuntime/NoSuchMethod", true),
        ("/model_runtime.v1.ModelRuntimeX/Execute", false),
        ("/no.such.v1.Service/Check", false),
    ] {
        within(grpc.ready()).await.expect("the channel is ready");
        let status =
            within(
                grpc.unary(
                    tonic::Request::new(HealthCheckRequest::default()),
                    http::uri::PathAndQuery::from_static(path),
                    tonic_prost::ProstCodec::<
                        HealthCheckRequest,
                        tonic_health::pb::HealthCheckResponse,
                    >::default(),
                ),
            )
            .await
            .expect_err(path);
        assert_eq!(
            status.code(),
            tonic::Code::Unimplemented,
            "{path}: {status:?}"
        );
        assert_eq!(
            status.metadata().get("grpc-accept-encoding").is_some(),
            runtimes,
            "{path}: answered by the runtime's server or the routes: {status:?}"
        );
    }
    server.stop().await;
}
