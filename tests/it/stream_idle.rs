//! A stream whose client accepts nothing for `server.stream_idle_timeout` while events wait
//! for it is reset (RESOURCE_EXHAUSTED) and can be resumed from the last event it got; a
//! client that reads slowly, or a stream that is quiet because its execution is, is never cut.

use crate::common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

const IDLE: Duration = Duration::from_millis(400);

/// The echo config, an idle timeout of [`IDLE`], and `essay`: `words` words at once, or with
/// `pause_ms` before the first and between the others.
fn config(words: usize, pause_ms: u64) -> ConfigBuilder {
    let essay = script(|s| {
        s.reply = Some("word ".repeat(words));
        s.first_delta_ms = pause_ms;
        s.delta_interval_ms = pause_ms;
    });
    echo()
        .stream_idle_timeout(IDLE)
        .provider(
            "long",
            ProviderSpec::scripted().scripted_model("essay", &["text"], essay),
        )
        .policy("long", PolicySpec::new(&["long/essay"]))
        .ability("essay", AbilitySpec::new("long"))
}

/// A client whose streams each accept at most 16 KiB before the caller reads.
async fn narrow(server: &TestServer) -> ModelRuntimeClient<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .initial_stream_window_size(16 * 1024)
        .initial_connection_window_size(1024 * 1024);
    ModelRuntimeClient::new(within(endpoint.connect()).await.unwrap())
}

async fn watch_stream(
    client: &mut ModelRuntimeClient<Channel>,
    id: &str,
    after_sequence: u64,
) -> tonic::Streaming<pb::ExecutionEvent> {
    within(client.watch(pb::WatchRequest {
        execution_id: id.to_owned(),
        after_sequence,
    }))
    .await
    .unwrap()
    .into_inner()
}

/// Submits an essay and watches it from a client on a narrow window: its id and the stream.
async fn essay_on_narrow_window(
    server: &mut TestServer,
) -> (String, tonic::Streaming<pb::ExecutionEvent>) {
    let id = submit(&mut server.client, request("essay", "go"))
        .await
        .execution_id;
    let mut reader = narrow(server).await;
    let stream = watch_stream(&mut reader, &id, 0).await;
    (id, stream)
}

#[tokio::test]
async fn a_stalled_reader_is_reset_and_resumes_from_its_cursor() {
    let mut server = start(config(20_000, 0)).await;
    let (id, mut stream) = essay_on_narrow_window(&mut server).await;
    // The reader takes nothing while far more than its window waits.
    tokio::time::sleep(IDLE * 3).await;
    let mut got = Vec::new();
    let status = within(async {
        loop {
            match stream.next().await {
                Some(Ok(event)) => got.push(event),
                Some(Err(status)) => return status,
                None => panic!("the stream ended normally after {} events", got.len()),
            }
        }
    })
    .await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // What arrived before the reset is a gap-free prefix, far short of the end.
    assert!(
        !got.is_empty() && got.len() < 20_000,
        "{} events",
        got.len()
    );
    assert_complete_prefix(&got);
    // Resumed from the last event it got, it reads the rest.
    let cursor = got.last().unwrap().sequence;
    got.extend(collect(watch_stream(&mut server.client, &id, cursor).await).await);
    assert_complete_sequence(&got);
    assert_eq!(text_of(&got), "word ".repeat(20_000));
    // The server and its other clients were never disturbed.
    let events = execute(&mut server.client, request("chat", "still here")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    server.stop().await;
}

#[tokio::test]
async fn a_slow_reader_is_never_cut() {
    let mut server = start(config(5_000, 0)).await;
    let (_, mut stream) = essay_on_narrow_window(&mut server).await;
    // It pauses for a quarter of the idle timeout between reads, and each time reads more
    // than its window holds (an event is about 90 bytes), so the window opens again each time.
    let mut got = Vec::new();
    within(async {
        loop {
            tokio::time::sleep(IDLE / 4).await;
            for _ in 0..500 {
                match stream.next().await {
                    Some(event) => got.push(event.expect("never cut")),
                    None => return,
                }
            }
        }
    })
    .await;
    assert_complete_sequence(&got);
    assert_eq!(text_of(&got), "word ".repeat(5_000));
    server.stop().await;
}

#[tokio::test]
async fn a_quiet_execution_is_never_cut() {
    // Each word comes after twice the idle timeout; the reader reads nothing until the end,
    // but all it was sent fits its window, so nothing waits for it.
    let server = start(config(3, 2 * IDLE.as_millis() as u64)).await;
    let mut reader = narrow(&server).await;
    let stream = within(reader.execute(request("essay", "go")))
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(IDLE * 8).await;
    let events = collect(stream).await;
    assert_complete_sequence(&events);
    assert_eq!(text_of(&events), "word ".repeat(3));
    server.stop().await;
}

#[tokio::test]
async fn a_steady_reader_of_one_large_event_is_never_cut() {
    // One 256 KiB word: a single delta, and the result that repeats it, each one frame far
    // larger than the client's 16 KiB window. The client grants room a frame at a time, well
    // within the idle timeout each time, but takes more than the timeout for each event.
    let server = start(
        config(0, 0)
            .provider(
                "big",
                ProviderSpec::scripted().scripted_model(
                    "word",
                    &["text"],
                    script(|s| s.reply = Some("x".repeat(256 * 1024))),
                ),
            )
            .policy("big", PolicySpec::new(&["big/word"]))
            .ability("big", AbilitySpec::new("big")),
    )
    .await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut h2, connection) = h2::client::Builder::new()
        .initial_window_size(16 * 1024)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    let call = http::Request::post(format!(
        "http://{}/model_runtime.v1.ModelRuntime/Execute",
        server.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .unwrap();
    let (response, mut send) = h2.send_request(call, false).unwrap();
    let message = prost::Message::encode_to_vec(&request("big", "go"));
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&message);
    send.send_data(framed.into(), true).unwrap();
    let mut body = within(response).await.unwrap().into_body();
    let mut received = 0;
    let trailers = within(async {
        while let Some(data) = body.data().await {
            let data = data.expect("never reset");
            received += data.len();
            tokio::time::sleep(IDLE / 8).await;
            body.flow_control().release_capacity(data.len()).unwrap();
        }
        body.trailers().await.unwrap().expect("trailers")
    })
    .await;
    assert_eq!(trailers.get("grpc-status").unwrap(), "0", "{trailers:?}");
    assert!(received > 512 * 1024, "{received} bytes");
    server.stop().await;
}

/// Sequences 1..=n in order, of one execution.
fn assert_complete_prefix(events: &[pb::ExecutionEvent]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, i as u64 + 1, "gap at {i}");
    }
}
