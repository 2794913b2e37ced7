//! `server.max_connection_age`: a connection is asked to go (GOAWAY) at its age, so a
//! client's next call opens a new one (after a scale-out, on a new replica); the calls open
//! on it go on for the grace, and a stream cut after that resumes with `Watch`, nothing lost
//! or repeated (CURSOR-3). Held with tonic's client here, and with a stock grpcio channel in
//! scripts/connection_age.py (run by .ci/run).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use hyper_util::rt::TokioIo;
use model_runtime::config::ConfigBuilder;
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint, Uri};

const AGE: Duration = Duration::from_millis(300);

/// An echo model streaming a word every 50 ms, with connections that age at [`AGE`] and
/// have `grace` after.
fn aging(grace: Duration) -> ConfigBuilder {
    slow_echo(50).max_connection_age(AGE, grace)
}

/// Twenty words: a second of streaming.
const PROMPT: &str = "a b c d e f g h i j k l m n o p q r s t";

/// A client of `addr` whose channel counts the TCP connections it opens.
async fn counting_client(
    addr: std::net::SocketAddr,
) -> (ModelRuntimeClient<Channel>, Arc<AtomicUsize>) {
    let opened = Arc::new(AtomicUsize::new(0));
    let count = opened.clone();
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            count.fetch_add(1, Ordering::SeqCst);
            async move { TcpStream::connect(addr).await.map(TokioIo::new) }
        }))
        .await
        .unwrap();
    (ModelRuntimeClient::new(channel), opened)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aged_connection_is_replaced_and_its_stream_finishes_within_the_grace() {
    let server = start(aging(Duration::from_secs(5))).await;
    let (mut client, opened) = counting_client(server.addr).await;

    // A second of streaming on a connection that ages at 0.3 s: GOAWAY lets it finish.
    let events = within(execute(&mut client, request("chat", PROMPT))).await;
    assert_complete_sequence(&events);
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&events), PROMPT);
    assert_eq!(
        opened.load(Ordering::SeqCst),
        1,
        "the stream stayed on its connection"
    );

    // The next call, past the age, opens a new connection. The old connection closed when
    // its last stream ended (it had sent GOAWAY), and tonic's channel may still hand the
    // call to it, which fails it unsent (hyperium/hyper#2500): tried again, as a tonic
    // client must.
    let metadata = within(unsent_again(|| {
        let mut client = client.clone();
        async move {
            client
                .get_runtime_metadata(pb::GetRuntimeMetadataRequest::default())
                .await
        }
    }))
    .await;
    assert!(metadata.is_ok(), "{metadata:?}");
    assert_eq!(
        opened.load(Ordering::SeqCst),
        2,
        "an aged connection was replaced"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_after_the_grace_resumes_with_watch_and_loses_nothing() {
    let server = start(aging(Duration::from_millis(200))).await;
    let (mut client, opened) = counting_client(server.addr).await;

    let mut stream = client
        .execute(request("chat", PROMPT))
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    let cut = within(async {
        loop {
            match stream.next().await {
                Some(Ok(event)) => seen.push(event),
                Some(Err(status)) => return Some(status),
                None => return None,
            }
        }
    })
    .await;
    let status = cut.expect("the stream outlived its connection's age and grace");
    assert!(
        transport(&status),
        "cut by the connection's close: {status:?}"
    );
    assert!(
        seen.last().is_some_and(|e| e.r#type == "output.text.delta"),
        "cut mid-answer: {status:?} after {} events",
        seen.len()
    );

    // Resumed from the last sequence seen, on a new connection, until it completes: the
    // new connection ages too, and may be cut before the rest is sent, so each cut is resumed
    // from the last event seen, as every resuming client does. Every event comes once.
    let id = seen[0].execution_id.clone();
    within(async {
        while !is_terminal(seen.last().unwrap()) {
            let after = seen.last().unwrap().sequence;
            let resumed = unsent_again(|| {
                let mut client = client.clone();
                let id = id.clone();
                async move {
                    client
                        .watch(pb::WatchRequest {
                            execution_id: id,
                            after_sequence: after,
                        })
                        .await
                }
            })
            .await;
            let mut stream = resumed.expect("watch accepted").into_inner();
            loop {
                match stream.next().await {
                    Some(Ok(event)) => seen.push(event),
                    Some(Err(status)) if transport(&status) => break,
                    Some(Err(status)) => panic!("watch failed: {status:?}"),
                    None => {
                        let last = seen.last().unwrap();
                        assert!(is_terminal(last), "watch ended after {}", last.r#type);
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert_complete_sequence(&seen);
    assert_eq!(seen.last().unwrap().r#type, "execution.completed");
    assert_eq!(text_of(&seen), PROMPT);
    assert!(opened.load(Ordering::SeqCst) >= 2);
    server.stop().await;
}

/// Runs `call` again while it fails in the client's own transport before any response
/// (sent down a connection that was closing: the GOAWAY or the cut raced it). A status the
/// server sent is returned.
async fn unsent_again<T, F, Fut>(mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    loop {
        match call().await {
            Err(status) if transport(&status) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            done => return done,
        }
    }
}

/// Whether `status` is the client's transport failing (a closed connection, a cut stream),
/// not a status the server sent: only the former carries the error beneath it.
fn transport(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_some()
}
