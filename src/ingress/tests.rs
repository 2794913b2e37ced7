//! The ingress over a store that fails (one that exists only inside the crate): what a caller
//! is told when the runtime cannot store or cannot go on reading an execution.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Ingress;
use crate::config::{AbilitySpec, Config, PolicySpec, ProviderSpec, Script};
use crate::runtime::Runtime;
use crate::store::MemoryStore;
use crate::store::conformance::limits;
use crate::store::faulty::{Faults, FaultyStore};

/// An ingress over a memory store with `faults`, its `chat` ability on a scripted model that
/// waits 300 ms before its first word; its address.
async fn serving(faults: Faults) -> (Ingress, std::net::SocketAddr) {
    let slow = Script {
        first_delta_ms: 300,
        ..Script::default()
    };
    let config = Config::builder()
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model("slow", &["text"], slow),
        )
        .policy("default", PolicySpec::new(&["scripted/slow"]))
        .ability("chat", AbilitySpec::new("default"))
        .ingress("127.0.0.1:0", Duration::from_secs(1))
        .build()
        .unwrap();
    let ingress = config.ingress.clone().unwrap();
    let memory = Arc::new(MemoryStore::new(limits(100, Duration::from_secs(60))));
    let store = Arc::new(FaultyStore::new(memory, faults));
    let runtime = Runtime::builder(config).store(store).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // No gRPC service behind gRPC-Web here: these tests speak OpenAI's API.
    let grpc = tonic::service::Routes::default();
    (Ingress::start(runtime, ingress, listener, grpc), addr)
}

/// A streamed chat completion over HTTP/1.1, read to the connection's close.
async fn stream_chat(addr: std::net::SocketAddr) -> String {
    let body = r#"{"model":"chat","stream":true,"messages":[{"role":"user","content":"a b"}]}"#;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    answer
}

/// The store fails its first write (the create): the caller gets a 503 to retry, in OpenAI's
/// error shape, with nothing of the store's fault in it.
#[tokio::test]
async fn a_store_that_cannot_write_is_a_503_to_retry() {
    let (ingress, addr) = serving(Faults {
        fail_writes_from: Some(1),
        ..Faults::default()
    })
    .await;
    let answer = stream_chat(addr).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains(r#""type":"server_error""#), "{answer}");
    assert!(!answer.contains("data: [DONE]"));
    ingress.close(Duration::from_secs(1)).await;
}

/// The store drops every follower's wake-up (as when it lets an execution go): the stream
/// cannot be read to its end. Nothing was shown yet, so the caller gets a 503 to come back,
/// never a stream that ends as if whole.
#[tokio::test]
async fn a_stream_the_runtime_cannot_go_on_reading_is_never_shown_whole() {
    let (ingress, addr) = serving(Faults {
        drop_subscriptions: true,
        ..Faults::default()
    })
    .await;
    let answer = stream_chat(addr).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("Last-Event-ID"), "{answer}");
    assert!(!answer.contains("data: [DONE]"));
    ingress.close(Duration::from_secs(1)).await;
}
