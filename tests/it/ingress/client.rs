//! A plain HTTP client for the ingress, over hyper's client connections: HTTP/1.1, or h2c
//! with prior knowledge, as a gateway speaks to a backend.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpStream;

use crate::common::within;

/// Which HTTP the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http1,
    H2c,
}

/// An answer read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map_or("", |v| v.to_str().unwrap_or_default())
    }

    /// The `data:` lines of a server-sent event stream, in order.
    pub fn data(&self) -> Vec<&str> {
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .collect()
    }

    /// The `data:` objects of a chunk stream (`[DONE]` left out).
    pub fn chunks(&self) -> Vec<Value> {
        self.data()
            .into_iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    /// The text of a chat completion stream's content deltas.
    pub fn streamed_text(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// A request's head: method, path and headers.
pub struct Ask<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
}

impl<'a> Ask<'a> {
    pub fn post(path: &'a str) -> Self {
        Self {
            method: "POST",
            path,
            headers: &[],
        }
    }

    pub fn get(path: &'a str) -> Self {
        Self {
            method: "GET",
            path,
            headers: &[],
        }
    }

    pub fn with(self, headers: &'a [(&'a str, &'a str)]) -> Self {
        Self { headers, ..self }
    }
}

/// Sends `ask` with `body` (JSON, if any) and returns the answer's head and body unread.
pub async fn open(
    addr: SocketAddr,
    version: Version,
    ask: Ask<'_>,
    body: Option<&Value>,
) -> http::Response<Incoming> {
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let mut request = Request::builder()
        .method(ask.method)
        .uri(format!("http://{addr}{}", ask.path))
        .header("host", addr.to_string());
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in ask.headers {
        request = request.header(*name, *value);
    }
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    let request = request.body(Full::new(body)).unwrap();
    match version {
        Version::Http1 => {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            within(sender.send_request(request)).await.unwrap()
        }
        Version::H2c => {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .unwrap();
            tokio::spawn(connection);
            within(sender.send_request(request)).await.unwrap()
        }
    }
}

/// Sends `ask` with `body` and reads the whole answer.
pub async fn send(addr: SocketAddr, version: Version, ask: Ask<'_>, body: Option<&Value>) -> Reply {
    let response = open(addr, version, ask, body).await;
    read(response).await
}

/// The rest of `response`, read whole.
pub async fn read(response: http::Response<Incoming>) -> Reply {
    let (head, body) = response.into_parts();
    let body = within(body.collect()).await.unwrap().to_bytes();
    Reply {
        status: head.status.as_u16(),
        headers: head.headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// The next piece of `body` that carries data, as text; `None` at its end.
pub async fn next_data(body: &mut Incoming) -> Option<String> {
    loop {
        let frame = within(body.frame()).await?.unwrap();
        if let Ok(data) = frame.into_data() {
            return Some(String::from_utf8(data.to_vec()).unwrap());
        }
    }
}
