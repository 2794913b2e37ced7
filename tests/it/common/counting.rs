//! An OpenAI chat completions upstream that counts the requests it is answering at once, for
//! the tests of a limit across replicas: a peak above the permits is a breach.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::upstream::{Raw, Recorded, serve_raw};

/// The text every reply streams.
pub const REPLY: &str = "counted and done";

/// What the upstream saw.
#[derive(Default)]
pub struct Stats {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    /// The `prompt-N` of each request, in arrival order.
    prompts: Mutex<Vec<usize>>,
}

/// An OpenAI chat completions upstream on 127.0.0.1:0 that streams [`REPLY`] in two chunks
/// with [`HOLD`] between them and counts the requests it is answering at once.
pub struct Counting {
    pub base_url: String,
    stats: Arc<Stats>,
}

impl Counting {
    pub async fn start(hold: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let stats = Arc::<Stats>::default();
        let shared = stats.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                let stats = shared.clone();
                tokio::spawn(serve_raw(socket, move |request, raw| {
                    answer(stats.clone(), request, raw, hold)
                }));
            }
        });
        Self { base_url, stats }
    }

    pub fn peak(&self) -> usize {
        self.stats.peak.load(Ordering::SeqCst)
    }

    pub fn prompts(&self) -> Vec<usize> {
        self.stats.prompts.lock().unwrap().clone()
    }

    /// The requests it is answering now.
    pub fn in_flight(&self) -> usize {
        self.stats.in_flight.load(Ordering::SeqCst)
    }
}

/// One request in flight: counted in when the request arrives, out when dropped.
struct InFlight(Arc<Stats>);

impl InFlight {
    fn new(stats: Arc<Stats>) -> Self {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.peak.fetch_max(now, Ordering::SeqCst);
        Self(stats)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answers one request; false when the connection must not be reused.
async fn answer(stats: Arc<Stats>, request: Recorded, raw: Raw, hold: Duration) -> bool {
    let counted = InFlight::new(stats.clone());
    stats.prompts.lock().unwrap().push(prompt_of(&request));
    let mut socket = raw.lock().await;
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let mut first = head.as_bytes().to_vec();
    first.extend(http_chunk(&chunk(
        r#"{"role":"assistant","content":"counted "}"#,
        "null",
    )));
    if socket.write_all(&first).await.is_err() {
        return false;
    }
    tokio::time::sleep(hold).await;
    // Counted out before the last bytes leave: until they arrive the runtime cannot have
    // ended the attempt, so every request counted here holds a permit, and a peak above the
    // permits is a breach of the limit, never an artifact of when this side counts.
    drop(counted);
    let mut last = http_chunk(&chunk(r#"{"content":"and done"}"#, "null"));
    last.extend(http_chunk(&chunk("{}", r#""stop""#)));
    last.extend(http_chunk("data: [DONE]\n\n"));
    last.extend(b"0\r\n\r\n");
    socket.write_all(&last).await.is_ok()
}

/// An OpenAI streaming chunk with one choice.
fn chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

/// `text` as one chunk of a chunked HTTP body.
fn http_chunk(text: &str) -> Vec<u8> {
    format!("{:x}\r\n{text}\r\n", text.len()).into_bytes()
}

/// The N of the `prompt-N` the request carries.
fn prompt_of(request: &Recorded) -> usize {
    let body = String::from_utf8_lossy(&request.body);
    let at = body
        .find("prompt-")
        .expect("the request carries its prompt")
        + "prompt-".len();
    let digits: String = body[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}
