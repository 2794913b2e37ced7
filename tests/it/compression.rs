//! Compressed calls over real loopback gRPC: gzip and zstd requests are served (grpcio's
//! `compression=Gzip` among the clients), counted as they inflate, bounded by the same limit
//! as a plain message before anything is decoded (a decompression bomb stops at the bound),
//! and answered compressed only for a caller that compressed; every answer says what the
//! server takes.

use crate::common;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::Command;

use common::*;
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tokio::net::TcpStream;
use tonic::Code;
use tonic::codec::CompressionEncoding;

/// The echo of a prompt long enough that compressing it pays.
fn long_prompt() -> String {
    vec!["compressed"; 2_000].join(" ")
}

#[tokio::test]
async fn gzip_and_zstd_requests_are_served_and_answered_in_kind() {
    let server = start(echo()).await;
    for (encoding, name) in [
        (CompressionEncoding::Gzip, "gzip"),
        (CompressionEncoding::Zstd, "zstd"),
    ] {
        let mut c = ModelRuntimeClient::new(server.channel.clone())
            .send_compressed(encoding)
            .accept_compressed(encoding);
        let response = within(c.execute(request("chat", &long_prompt())))
            .await
            .unwrap_or_else(|status| panic!("{name}: {status:?}"));
        let headers = response.metadata();
        assert_eq!(headers.get("grpc-encoding").unwrap(), name);
        assert_eq!(
            headers.get("grpc-accept-encoding").unwrap(),
            "gzip,zstd,identity"
        );
        let events = collect(response.into_inner()).await;
        assert_eq!(text_of(&events).trim(), long_prompt(), "{name}");
        assert_complete_sequence(&events);
    }
}

#[tokio::test]
async fn a_caller_that_sends_plainly_is_answered_plainly_and_told_what_is_taken() {
    let server = start(echo()).await;
    // It would take gzip, as every grpcio client says it would.
    let mut c = ModelRuntimeClient::new(server.channel.clone())
        .accept_compressed(CompressionEncoding::Gzip);
    let response = within(c.execute(request("chat", &long_prompt())))
        .await
        .unwrap();
    let headers = response.metadata();
    assert!(headers.get("grpc-encoding").is_none(), "{headers:?}");
    assert_eq!(
        headers.get("grpc-accept-encoding").unwrap(),
        "gzip,zstd,identity"
    );
    let events = collect(response.into_inner()).await;
    assert_eq!(text_of(&events).trim(), long_prompt());
}

#[tokio::test]
async fn inflated_lists_are_counted_before_they_are_decoded() {
    let server = start(echo()).await;
    let mut c =
        ModelRuntimeClient::new(server.channel.clone()).send_compressed(CompressionEncoding::Gzip);
    // Two bytes each on the wire, a hundred decoded; far fewer once gzipped.
    let mut many = request("chat", "hi");
    many.input.as_mut().unwrap().messages = vec![pb::Message::default(); 20_000];
    let status = within(c.submit(many)).await.unwrap_err();
    assert_violation(&status, Code::InvalidArgument, "input.messages");
    assert_eq!(stored_executions(&mut server.client.clone()).await, 0);
}

/// One call of `method` over raw HTTP/2 whose single message is `message`, already in
/// `encoding`: the call's `grpc-status` and `grpc-message`.
async fn raw_call(
    addr: SocketAddr,
    method: &str,
    encoding: &str,
    message: &[u8],
) -> (String, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (h2, connection) = within(h2::client::handshake(tcp)).await.unwrap();
    tokio::spawn(connection);
    let mut h2 = within(h2.ready()).await.unwrap();
    let request = http::Request::post(format!(
        "http://{addr}/model_runtime.v1.ModelRuntime/{method}"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .header("grpc-encoding", encoding)
    .body(())
    .unwrap();
    let (response, mut send) = h2.send_request(request, false).unwrap();
    let mut frame = vec![1u8];
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(message);
    send.send_data(frame.into(), true).unwrap();
    let (head, mut body) = within(response).await.unwrap().into_parts();
    let text = |map: &http::HeaderMap, name: &str| {
        map.get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    if head.headers.contains_key("grpc-status") {
        return (
            text(&head.headers, "grpc-status"),
            text(&head.headers, "grpc-message"),
        );
    }
    while let Some(data) = within(body.data()).await {
        let data = data.unwrap();
        let _ = body.flow_control().release_capacity(data.len());
    }
    let trailers = within(body.trailers()).await.unwrap().unwrap();
    (
        text(&trailers, "grpc-status"),
        text(&trailers, "grpc-message"),
    )
}

/// A gzip member whose deflate data inflates to `mebibytes` MiB of zeros: one megabyte's
/// blocks (a literal, then matches of distance 1, valid after any zeros) repeated. Its
/// trailer's checksum is deliberately wrong: a decompressor that reached the end would
/// refuse the data there, so the size bound's answer proves it stopped at the bound.
fn gzip_bomb(mebibytes: usize) -> Vec<u8> {
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    let zeros = vec![0u8; 1 << 20];
    let mut block = Vec::with_capacity(4096);
    deflate
        .compress_vec(&zeros, &mut block, flate2::FlushCompress::Sync)
        .unwrap();
    assert!(block.len() < 4096, "a megabyte of zeros deflates small");
    let mut bomb = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for _ in 0..mebibytes {
        bomb.extend_from_slice(&block);
    }
    // The final, empty, fixed-Huffman block; then CRC-32 and size (both wrong).
    bomb.extend_from_slice(&[0x03, 0x00]);
    bomb.extend_from_slice(&[0; 8]);
    bomb
}

#[tokio::test]
async fn a_decompression_bomb_stops_at_the_bound_and_changes_nothing() {
    let server = start(echo()).await;
    // 1 GiB of zeros in about a megabyte: within the wire bound (1 MiB of input + 1/8 + 64
    // KiB = 1 245 184 bytes), some 860 times past it inflated.
    let bomb = gzip_bomb(1024);
    assert!(bomb.len() < 1_245_184, "{} bytes", bomb.len());
    let (status, message) = raw_call(server.addr, "Submit", "gzip", &bomb).await;
    assert_eq!(status, "8", "RESOURCE_EXHAUSTED at the bound: {message}");
    assert!(message.contains("size%20limit"), "{message}");
    assert_eq!(stored_executions(&mut server.client.clone()).await, 0);

    // Just past the bound: two megabytes.
    let (status, _) = raw_call(server.addr, "Submit", "gzip", &gzip_bomb(2)).await;
    assert_eq!(status, "8");
}

#[tokio::test]
async fn data_that_does_not_inflate_is_the_callers_error() {
    let server = start(echo()).await;
    for encoding in ["gzip", "zstd"] {
        let (status, message) =
            raw_call(server.addr, "Submit", encoding, b"not compressed at all").await;
        assert_eq!(
            status, "3",
            "{encoding}: INVALID_ARGUMENT, not INTERNAL: {message}"
        );
        assert!(message.contains("decompress"), "{message}");
    }
    // An encoding the server does not take is refused, with what it takes.
    let (status, message) = raw_call(server.addr, "Submit", "br", b"x").await;
    assert_eq!(status, "12", "{message}");
}

/// A valid gzip member of `data`.
fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test]
async fn a_valid_gzip_message_is_taken() {
    let server = start(echo()).await;
    let message = prost::Message::encode_to_vec(&request("chat", &long_prompt()));
    let (status, message) = raw_call(server.addr, "Submit", "gzip", &gzip(&message)).await;
    assert_eq!(status, "0", "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_grpcio_client_with_gzip_is_served() {
    let ready = Command::new("python3")
        .args(["-c", "import grpc, grpc_reflection"])
        .output();
    if !ready.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "skipped: python3 with grpcio and grpcio-reflection is not installed \
             (pip install grpcio grpcio-reflection protobuf)"
        );
        return;
    }
    let server = start(echo()).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/foreign_client.py");
    let addr = server.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args([script, &addr, "hello from grpcio"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("Gzip") && stdout.contains("execution.completed"),
        "{stdout}"
    );
}
