//! A tiny HTTP/1.1 server on 127.0.0.1:0 that plays scripted replies byte by byte, so tests
//! can speak each provider's real wire format and also misbehave like a real network: cut a
//! body short, stall, trickle, reset after the request, or never answer. It records every
//! request and notices when the client hangs up. Its tasks end with the test's runtime.
//!
//! Requests are read by the runtime's own HTTP/1.1 reader (`server::http1`, hyper's server
//! connection), as `/metrics` and `mock-upstream` read theirs; replies are written here, raw
//! ([`serve_raw`]), since a script must be able to send what no HTTP server would.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use model_runtime::server::http1::{self, Frames, Limits, Response};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One step of a response body.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes (one chunk of a chunked body).
    Send(Vec<u8>),
    /// Wait.
    Sleep(Duration),
    /// Close the connection without finishing the body.
    Cut,
    /// Send nothing more; wait for the client to hang up.
    Stall,
}

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Answer with a status, headers and a chunked body.
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        steps: Vec<Step>,
    },
    /// Read the request, then close the connection without a response.
    Reset,
    /// Read the request and never answer.
    Hang,
}

/// A recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl From<http1::Request> for Recorded {
    fn from(request: http1::Request) -> Self {
        Self {
            method: request.method().as_str().to_owned(),
            // As sent: a path, or a whole URL in a request to a proxy.
            path: request.uri().to_string(),
            headers: request
                .headers()
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
            body: request.into_body().to_vec(),
        }
    }
}

impl Recorded {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

type Script = dyn Fn(usize) -> Behaviour + Send + Sync;

/// A running server.
pub struct Upstream {
    port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Notified when a client hangs up on a stalled reply.
    pub hung_up: Arc<Notify>,
    connections: Arc<AtomicUsize>,
}

impl Upstream {
    /// Serves request number n (0-based, across connections) with `script(n)`.
    pub async fn start(script: impl Fn(usize) -> Behaviour + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let hung_up = Arc::new(Notify::new());
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = connections.clone();
        let shared = Shared {
            script: Arc::new(script),
            count: Arc::new(AtomicUsize::new(0)),
            requests: requests.clone(),
            hung_up: hung_up.clone(),
        };
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(shared.clone().connection(socket));
            }
        });
        Self {
            port,
            requests,
            hung_up,
            connections,
        }
    }

    /// How many connections clients opened.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Always the same behaviour.
    pub async fn always(behaviour: Behaviour) -> Self {
        Self::start(move |_| behaviour.clone()).await
    }

    /// The base URL to configure, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }
}

#[derive(Clone)]
struct Shared {
    script: Arc<Script>,
    count: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    hung_up: Arc<Notify>,
}

impl Shared {
    async fn connection(self, socket: TcpStream) {
        let _ = socket.set_nodelay(true);
        // Keep-alive: serve requests until the client closes or a reply ends the connection.
        serve_raw(socket, move |request, raw| {
            self.clone().answer(request, raw)
        })
        .await;
    }

    /// Records `request` and plays its behaviour on `raw`; false when the connection must
    /// not be reused.
    async fn answer(self, request: Recorded, raw: Raw) -> bool {
        self.requests.lock().expect("lock").push(request);
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        match (self.script)(n) {
            Behaviour::Reset => false,
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Reply {
                status,
                headers,
                steps,
            } => {
                let mut socket = raw.lock().await;
                self.reply(&mut socket, status, &headers, steps).await
            }
        }
    }

    /// Plays one reply; false when the connection must not be reused.
    async fn reply(
        &self,
        socket: &mut OwnedWriteHalf,
        status: u16,
        headers: &[(String, String)],
        steps: Vec<Step>,
    ) -> bool {
        let mut head = format!("HTTP/1.1 {status} Status\r\ntransfer-encoding: chunked\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if socket.write_all(head.as_bytes()).await.is_err() {
            return false;
        }
        for step in steps {
            match step {
                // An empty chunk would end a chunked body: nothing to send.
                Step::Send(bytes) if bytes.is_empty() => {}
                Step::Send(bytes) => {
                    let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                    chunk.extend_from_slice(&bytes);
                    chunk.extend_from_slice(b"\r\n");
                    if socket.write_all(&chunk).await.is_err() {
                        return false;
                    }
                }
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Cut => return false,
                Step::Stall => {
                    // The reader sees the client close the connection and drops this reply,
                    // which says so as it goes.
                    let _hung_up = NotifyOnDrop::new(self.hung_up.clone());
                    std::future::pending::<()>().await;
                }
            }
        }
        socket.write_all(b"0\r\n\r\n").await.is_ok()
    }
}

/// Notifies when dropped, unless disarmed: a reply the client's hanging up cut short, whether
/// a write failed or the reader saw the connection close and dropped the reply.
pub struct NotifyOnDrop(Option<Arc<Notify>>);

impl NotifyOnDrop {
    pub fn new(notify: Arc<Notify>) -> Self {
        Self(Some(notify))
    }

    /// The reply ended as it meant to: nobody hung up.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        if let Some(notify) = self.0.take() {
            notify.notify_one();
        }
    }
}

/// The write half of a connection whose requests the runtime's reader reads: replies are
/// written here byte by byte. Shared, as each request's answer borrows it in turn.
pub type Raw = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

/// The tests' requests: heads and bodies far larger than any a test sends, over connections
/// open as long as the client keeps them.
pub const LIMITS: Limits = Limits {
    head: 1 << 20,
    headers: 100,
    body: 64 << 20,
    keep_alive: true,
    time: None,
};

/// Serves `socket` until it closes: each request read by the runtime's HTTP/1.1 reader
/// (hyper), recorded, and answered by `answer` on the raw write half; `answer` says whether
/// the connection serves another request. While an answer runs, the reader watches the
/// connection: a client that closes it drops the answer.
pub async fn serve_raw<A, F>(socket: TcpStream, answer: A)
where
    A: Fn(Recorded, Raw) -> F,
    F: Future<Output = bool>,
{
    let (read, write) = socket.into_split();
    let raw: Raw = Arc::new(tokio::sync::Mutex::new(write));
    http1::serve_connection(ReadOnly(read), &LIMITS, |request| {
        let answered = answer(Recorded::from(request), raw.clone());
        // hyper's own answer, written nowhere: the raw one has been sent.
        async move { answered.await.then(|| Response::new(Frames::empty())) }
    })
    .await;
}

/// The reader's view of a connection: what the client sends, and a sink for hyper's
/// answers, which [`serve_raw`]'s caller has written raw instead.
struct ReadOnly(OwnedReadHalf);

impl AsyncRead for ReadOnly {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for ReadOnly {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// The raw half closes the connection when it is dropped.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A 200 event stream with one `Send` per event text.
pub fn sse(events: &[String]) -> Behaviour {
    Behaviour::Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        steps: events
            .iter()
            .map(|e| Step::Send(e.clone().into_bytes()))
            .collect(),
    }
}

/// A 200 event stream played step by step.
pub fn sse_steps(steps: Vec<Step>) -> Behaviour {
    Behaviour::Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        steps,
    }
}

/// An error status with a JSON body and extra headers.
pub fn status(code: u16, body: &str, headers: &[(&str, &str)]) -> Behaviour {
    let mut all = vec![("content-type".to_owned(), "application/json".to_owned())];
    all.extend(
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    Behaviour::Reply {
        status: code,
        headers: all,
        steps: vec![Step::Send(body.as_bytes().to_vec())],
    }
}
