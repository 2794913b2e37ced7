//! The server over a store that fails or stalls (one that exists only inside the crate):
//! health turns NOT_SERVING when it fails, and a call's `grpc-timeout` bounds the wait for
//! its answer when it stalls.

use std::sync::Arc;
use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus as Status;
use tonic_health::pb::health_client::HealthClient;

use super::{SERVICE_NAME, serve};
use crate::config::Config;
use crate::pb;
use crate::pb::model_runtime_client::ModelRuntimeClient;
use crate::runtime::Runtime;
use crate::store::MemoryStore;
use crate::store::conformance::limits;
use crate::store::faulty::{Faults, FaultyStore};

fn request() -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        ability: "chat".into(),
        input: Some(pb::ExecutionInput {
            messages: vec![pb::Message {
                role: pb::Role::User.into(),
                content: vec![pb::ContentPart {
                    part: Some(pb::content_part::Part::Text("hello".into())),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_failed_store_turns_health_not_serving_and_refuses_new_work() {
    // Write 1 creates the first execution; write 2, its driver's first append, fails.
    let (channel, _, stop, serving) = serving(Faults {
        fail_writes_from: Some(2),
        ..Faults::default()
    })
    .await;
    let mut client = ModelRuntimeClient::new(channel.clone());
    client.submit(request()).await.unwrap();

    let health = |service: &'static str| {
        let mut health = HealthClient::new(channel.clone());
        async move {
            let request = HealthCheckRequest {
                service: service.to_owned(),
            };
            health.check(request).await.unwrap().into_inner().status()
        }
    };
    let flipped = tokio::time::timeout(Duration::from_secs(10), async {
        while health(SERVICE_NAME).await != Status::NotServing {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        flipped.is_ok(),
        "health still SERVING after the store failed"
    );
    assert_eq!(health("").await, Status::NotServing);
    let refused = client.submit(request()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}

/// Serves the embedded default over a memory store with `faults` on a fresh loopback port: a
/// channel to it, its address, and what stops it.
async fn serving(
    faults: Faults,
) -> (
    tonic::transport::Channel,
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), super::ServerError>>,
) {
    let memory = Arc::new(MemoryStore::new(limits(100, Duration::from_secs(60))));
    let store = Arc::new(FaultyStore::new(memory, faults));
    let runtime = Runtime::builder(Config::embedded_default().unwrap())
        .store(store)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(runtime, listener, async {
        let _ = stopped.await;
    }));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (channel, addr, stop, task)
}

#[tokio::test]
async fn a_calls_grpc_timeout_bounds_the_wait_for_its_answer() {
    // The execution's first append waits at the gate, so its driver cannot record a
    // cancellation: CancelExecution would wait its 5 s grace before answering.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (channel, addr, stop, task) = serving(Faults {
        hold_routing: Some(gate.clone()),
        ..Faults::default()
    })
    .await;
    let mut client = ModelRuntimeClient::new(channel);
    let submitted = client.submit(request()).await.unwrap().into_inner();
    // A raw HTTP/2 client: tonic's own would end the call at the deadline itself.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let call = http::Request::post(format!(
        "http://{addr}/model_runtime.v1.ModelRuntime/CancelExecution"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .header("grpc-timeout", "300m")
    .body(())
    .unwrap();
    let (response, mut body) = h2.send_request(call, false).unwrap();
    let message = prost::Message::encode_to_vec(&pb::CancelExecutionRequest {
        execution_id: submitted.execution_id,
        reason: String::new(),
    });
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&message);
    body.send_data(framed.into(), true).unwrap();
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(10), response)
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Trailers-only: the status is in the headers. DEADLINE_EXCEEDED is 4.
    assert_eq!(response.headers()["grpc-status"], "4", "{response:?}");
    gate.add_permits(100);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}
