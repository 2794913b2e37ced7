//! The server over a store that fails: health turns NOT_SERVING, overall and for the service,
//! and new work is refused with UNAVAILABLE. (A failing store exists only inside the crate.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

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
    let memory = Arc::new(MemoryStore::new(limits(100, Duration::from_secs(60))));
    let store = Arc::new(FaultyStore::new(
        memory,
        Faults {
            fail_writes_from: Some(2),
            ..Faults::default()
        },
    ));
    let runtime = Runtime::builder(Config::embedded_default().unwrap())
        .store(store)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(serve(runtime, listener, async {
        let _ = stopped.await;
    }));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
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
