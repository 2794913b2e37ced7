use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadBuf};

use super::*;

const LIMITS: Limits = Limits {
    head: 8 * 1024,
    headers: 8,
    body: 64,
    keep_alive: true,
    time: None,
};

/// The server's end of a connection served with `limits`, each request answered with its
/// method, path and body: the client's end.
fn echoing(limits: Limits) -> DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        serve_connection(server, &limits, |request: Request| async move {
            let text = format!(
                "{} {} {}",
                request.method(),
                request.uri(),
                String::from_utf8_lossy(request.body())
            );
            Some(Response::new(Frames::from(text)))
        })
        .await;
    });
    client
}

/// Everything the server writes until it closes.
async fn all(mut client: DuplexStream) -> String {
    let mut text = String::new();
    client.read_to_string(&mut text).await.unwrap();
    text
}

/// Reads until `text` holds `end`.
async fn until(client: &mut DuplexStream, end: &str) -> String {
    let mut text = Vec::new();
    while !String::from_utf8_lossy(&text).contains(end) {
        let mut piece = [0u8; 1024];
        let n = client.read(&mut piece).await.unwrap();
        assert!(
            n > 0,
            "closed before {end:?}: {}",
            String::from_utf8_lossy(&text)
        );
        text.extend_from_slice(&piece[..n]);
    }
    String::from_utf8(text).unwrap()
}

#[tokio::test]
async fn a_body_sent_in_pieces_is_answered_whole_and_the_connection_serves_the_next() {
    let mut client = echoing(LIMITS);
    client
        .write_all(
            b"POST /a?x=1 HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
        )
        .await
        .unwrap();
    client.write_all(b"2\r\nde\r\n0\r\n\r\n").await.unwrap();
    let first = until(&mut client, "abcde").await;
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.contains("POST /a?x=1 abcde"), "{first}");
    // The answer's one frame, sent as one chunk: no length was named.
    assert!(first.contains("transfer-encoding: chunked\r\n"), "{first}");
    assert!(!first.contains("date:"), "{first}");

    client
        .write_all(b"PUT /b HTTP/1.1\r\nhost: h\r\ncontent-length: 2\r\n\r\nok")
        .await
        .unwrap();
    let second = until(&mut client, "0\r\n\r\n").await;
    assert!(second.contains("PUT /b ok"), "{second}");
}

#[tokio::test]
async fn a_body_past_the_limit_closes_the_connection_unanswered() {
    // Said by its length: refused before it is read.
    let mut client = echoing(LIMITS);
    client
        .write_all(b"POST / HTTP/1.1\r\nhost: h\r\ncontent-length: 65\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(all(client).await, "");
    // Found while reading it.
    let mut client = echoing(LIMITS);
    let chunk = format!("41\r\n{}\r\n0\r\n\r\n", "x".repeat(65));
    client
        .write_all(b"POST / HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    client.write_all(chunk.as_bytes()).await.unwrap();
    assert_eq!(all(client).await, "");
}

#[tokio::test]
async fn a_head_past_its_limits_is_answered_431() {
    let mut client = echoing(LIMITS);
    let long = "x".repeat(8 * 1024);
    client
        .write_all(format!("GET / HTTP/1.1\r\nlong: {long}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert!(all(client).await.starts_with("HTTP/1.1 431 "));

    let mut client = echoing(LIMITS);
    let many: String = (0..9).map(|i| format!("h{i}: v\r\n")).collect();
    client
        .write_all(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes())
        .await
        .unwrap();
    assert!(all(client).await.starts_with("HTTP/1.1 431 "));
}

#[tokio::test]
async fn without_keep_alive_the_answer_closes_the_connection() {
    let mut client = echoing(Limits {
        keep_alive: false,
        ..LIMITS
    });
    client
        .write_all(b"GET /only HTTP/1.1\r\nhost: h\r\n\r\n")
        .await
        .unwrap();
    let text = all(client).await;
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(text.contains("GET /only "), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_connection_lasts_no_longer_than_its_time() {
    let client = echoing(Limits {
        time: Some(Duration::from_secs(5)),
        ..LIMITS
    });
    let started = tokio::time::Instant::now();
    // Nothing sent: the server closes when the time is up.
    assert_eq!(all(client).await, "");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}

#[tokio::test]
async fn answering_none_closes_the_connection() {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(serve_connection(server, &LIMITS, |_| async { None }));
    client
        .write_all(b"GET / HTTP/1.1\r\nhost: h\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(all(client).await, "");
}

/// A connection's server end that counts the writes that carried bytes.
struct Counted {
    io: DuplexStream,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn frames_ready_together_are_one_chunk_each_in_one_write() {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let writes = Arc::new(AtomicUsize::new(0));
    let server = Counted {
        io: server,
        writes: writes.clone(),
    };
    let frames: Arc<[Bytes]> = (0..40)
        .map(|i| Bytes::from(format!("data: {i}\n\n")))
        .collect();
    tokio::spawn(serve_connection(server, &LIMITS, move |_| {
        let frames = Frames::new(frames.clone());
        async move { Some(Response::new(frames)) }
    }));
    client
        .write_all(b"GET / HTTP/1.1\r\nhost: h\r\n\r\n")
        .await
        .unwrap();
    let text = until(&mut client, "\r\n0\r\n\r\n").await;
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let expected: String = (0..40)
        .map(|i| {
            let event = format!("data: {i}\n\n");
            // hyper writes sizes in upper case.
            format!("{:X}\r\n{event}\r\n", event.len())
        })
        .collect();
    assert_eq!(body, format!("{expected}0\r\n\r\n"));
    assert_eq!(writes.load(Ordering::SeqCst), 1);
}
