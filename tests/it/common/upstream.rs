//! A tiny HTTP/1.1 server on 127.0.0.1:0 that plays scripted replies byte by byte, so tests
//! can speak each provider's real wire format and also misbehave like a real network: cut a
//! body short, stall, trickle, reset after the request, or never answer. It records every
//! request and notices when the client hangs up. Its tasks end with the test's runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    async fn connection(self, mut socket: TcpStream) {
        let _ = socket.set_nodelay(true);
        let mut buffer = Vec::new();
        // Keep-alive: serve requests until the client closes or a reply ends the connection.
        while let Some(request) = read_request(&mut socket, &mut buffer).await {
            self.requests.lock().expect("lock").push(request);
            let n = self.count.fetch_add(1, Ordering::SeqCst);
            match (self.script)(n) {
                Behaviour::Reset => return,
                Behaviour::Hang => {
                    std::future::pending::<()>().await;
                }
                Behaviour::Reply {
                    status,
                    headers,
                    steps,
                } => {
                    if !self.reply(&mut socket, status, &headers, steps).await {
                        return;
                    }
                }
            }
        }
    }

    /// Plays one reply; false when the connection must not be reused.
    async fn reply(
        &self,
        socket: &mut TcpStream,
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
                    // Reading returns once the client closes the connection.
                    let mut sink = [0u8; 1024];
                    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                    self.hung_up.notify_one();
                    return false;
                }
            }
        }
        socket.write_all(b"0\r\n\r\n").await.is_ok()
    }
}

/// Reads one request (head and Content-Length body); `None` when the client closed.
pub async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Recorded> {
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut piece = [0u8; 8192];
        let n = socket.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        let mut piece = [0u8; 8192];
        let n = socket.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&piece[..n]);
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
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
