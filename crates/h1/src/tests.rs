use std::future::poll_fn;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A server on 127.0.0.1:0 that answers each request on a connection with the next of
/// `replies` (cycling), after reading the request's head and body; it counts connections and
/// keeps the requests' bytes.
struct Server {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(replies: &[&'static str]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies: Arc<[&'static str]> = replies.into();
        let (counted, kept) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(socket, replies.clone(), n, kept.clone()));
            }
        });
        Self {
            port,
            connections,
            requests,
        }
    }

    fn client(&self, proxy: Option<String>) -> Client {
        let url = url::Url::parse(&format!("http://127.0.0.1:{}/v1/chat", self.port)).unwrap();
        client(&url, proxy)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn client(url: &url::Url, proxy: Option<String>) -> Client {
    client_with(url, proxy, None)
}

/// A client of `url` keeping 2 idle connections; `tls` is its TLS set-up, if it needs one.
fn client_with(
    url: &url::Url,
    proxy: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Client {
    let settings = Settings {
        connect_timeout: Duration::from_secs(2),
        proxy,
        max_idle: 2,
        idle_timeout: Duration::from_secs(4),
    };
    Client::new(url, settings, || {
        tls.ok_or_else(|| rustls::Error::General("no TLS set up".into()))
    })
    .unwrap()
}

async fn serve(
    mut socket: impl AsyncRead + AsyncWrite + Unpin,
    replies: Arc<[&'static str]>,
    connection: usize,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let mut buffer = Vec::new();
    for i in connection.. {
        let Some(request) = read_request(&mut socket, &mut buffer).await else {
            return;
        };
        requests.lock().unwrap().push(request);
        let reply = replies[i % replies.len()];
        if socket.write_all(reply.as_bytes()).await.is_err() || reply.contains("close") {
            return;
        }
    }
}

/// Reads one request (its head and a `Content-Length` body) off `socket`.
async fn read_request(
    socket: &mut (impl AsyncRead + Unpin),
    buffer: &mut Vec<u8>,
) -> Option<String> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.parse().unwrap());
            if buffer.len() >= end + 4 + length {
                let request = String::from_utf8_lossy(&buffer[..end + 4 + length]).into_owned();
                buffer.drain(..end + 4 + length);
                return Some(request);
            }
        }
        let mut piece = [0; 4096];
        match socket.read(&mut piece).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&piece[..n]),
        }
    }
}

/// Sends a request and reads the reply: its status and body.
async fn exchange(client: &Client) -> Result<(u16, String), Failure> {
    let request = client.post(&HeaderMap::new(), &[("accept", "text/plain")], b"{}");
    let mut call = client.call(request);
    let response = poll_fn(|cx| call.poll_head(cx)).await?;
    let mut body = Vec::new();
    loop {
        let read = poll_fn(|cx| call.poll_body(cx, &mut |d| body.extend_from_slice(d))).await?;
        if read == Progress::End {
            return Ok((response.status, String::from_utf8(body).unwrap()));
        }
    }
}

const CHUNKED: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";

#[tokio::test]
async fn a_request_is_written_as_http_1_1_with_its_length_and_headers() {
    let server = Server::start(&[CHUNKED]).await;
    let client = server.client(None);
    assert_eq!(exchange(&client).await.unwrap(), (200, "hi".to_owned()));
    let requests = server.requests.lock().unwrap().clone();
    let request = &requests[0];
    assert!(
        request.starts_with("POST /v1/chat HTTP/1.1\r\n"),
        "{request}"
    );
    let port = server.port;
    for line in [
        format!("Host: 127.0.0.1:{port}"),
        "Content-Length: 2".to_owned(),
        "accept: text/plain".to_owned(),
    ] {
        assert!(request.contains(&format!("{line}\r\n")), "{request}");
    }
    assert!(request.ends_with("\r\n\r\n{}"), "{request}");
}

#[tokio::test]
async fn a_connection_is_kept_between_calls_unless_the_server_closes_it() {
    let server = Server::start(&[CHUNKED]).await;
    let client = server.client(None);
    for _ in 0..3 {
        assert_eq!(exchange(&client).await.unwrap().1, "hi");
    }
    assert_eq!(server.connections(), 1);

    let closing = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
    let server = Server::start(&[closing]).await;
    let client = server.client(None);
    for _ in 0..2 {
        assert_eq!(exchange(&client).await.unwrap().1, "ok");
    }
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn sized_and_close_delimited_bodies_are_read_whole() {
    let sized = "HTTP/1.1 429 Slow down\r\nRetry-After: 3\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
    let server = Server::start(&[sized]).await;
    let client = server.client(None);
    assert_eq!(exchange(&client).await.unwrap(), (429, "{\"a\":1}".into()));
    assert_eq!(exchange(&client).await.unwrap().0, 429);
    assert_eq!(server.connections(), 1, "a sized body keeps the connection");

    let until_close = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: x\n\n";
    let server = Server::start(&[until_close]).await;
    let client = server.client(None);
    assert_eq!(exchange(&client).await.unwrap().1, "data: x\n\n");
}

#[tokio::test]
async fn a_body_cut_short_is_broken_and_bytes_past_it_spoil_the_connection() {
    let cut = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 9\r\n\r\nshort";
    let server = Server::start(&[cut]).await;
    let failure = exchange(&server.client(None)).await.unwrap_err();
    assert!(matches!(failure, Failure::Broken(_)), "{failure:?}");

    let extra = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";
    let server = Server::start(&[extra]).await;
    let client = server.client(None);
    for _ in 0..2 {
        assert_eq!(exchange(&client).await.unwrap().1, "ok");
    }
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn an_idle_connection_the_server_closed_is_not_used() {
    // The first connection answers once and closes without saying so; the second serves.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut served = 0;
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = Vec::new();
            while read_request(&mut socket, &mut buffer).await.is_some() {
                socket.write_all(CHUNKED.as_bytes()).await.unwrap();
                served += 1;
                if served == 1 {
                    break;
                }
            }
        }
    });
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/v1/chat")).unwrap();
    let client = client(&url, None);
    assert_eq!(exchange(&client).await.unwrap().1, "hi");
    // Let the server's close arrive.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(exchange(&client).await.unwrap().1, "hi");
}

#[tokio::test]
async fn failures_say_whether_the_request_was_sent() {
    // Nothing listens on a port just freed.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
    let failure = exchange(&client(&url, None)).await.unwrap_err();
    assert!(
        matches!(
            failure,
            Failure::Connect {
                step: ConnectStep::Refused,
                ..
            }
        ),
        "{failure:?}"
    );

    let garbage = Server::start(&["SMTP ready\r\n\r\n"]).await;
    let failure = exchange(&garbage.client(None)).await.unwrap_err();
    assert!(matches!(failure, Failure::Lost(_)), "{failure:?}");
}

/// A server that answers before it has read the request's body (a 413 for a body too large)
/// and stops reading: the answer is the outcome, read while the write waits, and the
/// connection, whose unread rest would be taken for the next request, is not kept.
#[tokio::test]
async fn an_answer_that_comes_while_the_request_is_written_is_the_outcome() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut piece = [0; 1024];
                let n = socket.read(&mut piece).await.unwrap();
                head.extend_from_slice(&piece[..n]);
            }
            let answer = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!";
            socket.write_all(answer.as_bytes()).await.unwrap();
            // Kept open and never read again.
            held.push(socket);
        }
    });
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap();
    let client = client(&url, None);
    let body = vec![b'x'; 8 << 20];
    for round in 1..=2 {
        let request = client.post(&HeaderMap::new(), &[], &body);
        let mut call = client.call(request);
        let response =
            tokio::time::timeout(Duration::from_secs(10), poll_fn(|cx| call.poll_head(cx)))
                .await
                .expect("the answer is read while the write waits")
                .unwrap();
        assert_eq!(response.status, 413);
        let mut read = Vec::new();
        while poll_fn(|cx| call.poll_body(cx, &mut |d| read.extend_from_slice(d)))
            .await
            .unwrap()
            == Progress::Data
        {}
        assert_eq!(read, b"too big!");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            round,
            "a new connection each time"
        );
    }
    server.abort();
}

#[tokio::test]
async fn a_plain_http_target_goes_through_a_proxy_in_absolute_form_with_credentials() {
    let proxy = Server::start(&[CHUNKED]).await;
    let url = url::Url::parse("http://127.0.0.1:9/v1/chat").unwrap();
    let proxy_url = format!("http://user:p%40ss@127.0.0.1:{}", proxy.port);
    let client = client(&url, Some(proxy_url));
    assert_eq!(exchange(&client).await.unwrap().1, "hi");
    let request = proxy.requests.lock().unwrap()[0].clone();
    assert!(
        request.starts_with("POST http://127.0.0.1:9/v1/chat HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"),
        "{request}"
    );
    // base64("user:p@ss")
    assert!(request.contains("Proxy-Authorization: Basic dXNlcjpwQHNz\r\n"));
}

#[tokio::test]
async fn a_tunnel_is_asked_for_with_connect_and_a_refusal_names_the_status() {
    for (answer, opened) in [
        ("HTTP/1.1 200 Connection established\r\n\r\n", true),
        ("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", false),
    ] {
        let proxy = Server::start(&[answer]).await;
        let io: Box<dyn Io> =
            Box::new(TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap());
        let target =
            Endpoint::from_url(&url::Url::parse("https://api.example/v1").unwrap()).unwrap();
        let tunnel = connect::tunnel(io, &target, Some("Basic eDp5")).await;
        let request = proxy.requests.lock().unwrap()[0].clone();
        assert_eq!(
            request,
            "CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\
             Proxy-Authorization: Basic eDp5\r\n\r\n"
        );
        match tunnel {
            Ok(_) => assert!(opened),
            Err(failure) => {
                assert!(!opened);
                assert_eq!(
                    failure.cause(),
                    "the proxy refused the tunnel with HTTP 407"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_pool_keeps_at_most_its_size_for_at_most_its_idle_time() {
    let server = Server::start(&[CHUNKED]).await;
    let url = url::Url::parse(&format!("http://127.0.0.1:{}/v1", server.port)).unwrap();
    let settings = Settings {
        connect_timeout: Duration::from_secs(2),
        proxy: None,
        max_idle: 2,
        idle_timeout: Duration::from_millis(200),
    };
    let client = Client::new(&url, settings, || {
        Err(rustls::Error::General("no TLS".into()))
    })
    .unwrap();
    let calls: Vec<Call> = (0..3)
        .map(|_| client.call(client.post(&HeaderMap::new(), &[], b"")))
        .collect();
    for mut call in calls {
        poll_fn(|cx| call.poll_head(cx)).await.unwrap();
        while poll_fn(|cx| call.poll_body(cx, &mut |_| {})).await.unwrap() != Progress::End {}
    }
    assert_eq!(server.connections(), 3);
    assert_eq!(client.shared.idle.len(), 2, "max_idle is 2");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(client.shared.idle.take().is_none(), "both idled too long");
}

/// The TLS set-up of these tests: only the test CA of `testdata/` is trusted (its server
/// certificate names `localhost` and 127.0.0.1; both are valid until 2126).
fn trusting(ca: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if ca {
        let der = include_bytes!("testdata/ca.der").as_slice();
        roots.add(der.into()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A TLS server on 127.0.0.1:0 answering every request with [`CHUNKED`]; its port.
async fn tls_server() -> u16 {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivatePkcs8KeyDer::from(include_bytes!("testdata/server.key.der").to_vec());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![include_bytes!("testdata/server.der").to_vec().into()],
            PrivateKeyDer::Pkcs8(key),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(socket).await {
                    serve(tls, Arc::new([CHUNKED]), 0, Arc::default()).await;
                }
            });
        }
    });
    port
}

fn tls_client(url: &str, proxy: Option<String>, ca: bool) -> Client {
    client_with(&url::Url::parse(url).unwrap(), proxy, Some(trusting(ca)))
}

#[tokio::test]
async fn https_targets_are_verified_and_read_over_tls() {
    let port = tls_server().await;
    for host in ["localhost", "127.0.0.1"] {
        let client = tls_client(&format!("https://{host}:{port}/v1/chat"), None, true);
        for _ in 0..2 {
            assert_eq!(exchange(&client).await.unwrap().1, "hi", "{host}");
        }
    }
    // A certificate from an issuer the set-up does not trust is refused before anything is
    // sent.
    let client = tls_client(&format!("https://localhost:{port}/v1/chat"), None, false);
    let failure = exchange(&client).await.unwrap_err();
    assert!(
        matches!(&failure, Failure::Connect { step: ConnectStep::Tls, cause } if cause.contains("UnknownIssuer")),
        "{failure:?}"
    );
}

#[tokio::test]
async fn an_https_target_is_reached_through_a_proxys_tunnel() {
    let port = tls_server().await;
    // The proxy: reads the CONNECT, opens the tunnel to the TLS server and relays.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let kept = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let request = read_request(&mut socket, &mut Vec::new()).await.unwrap();
                kept.lock().unwrap().push(request);
                let mut upstream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                socket
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut socket, &mut upstream).await;
            });
        }
    });
    let url = format!("https://localhost:{port}/v1/chat");
    let client = tls_client(&url, Some(format!("http://127.0.0.1:{proxy}")), true);
    for _ in 0..2 {
        assert_eq!(exchange(&client).await.unwrap().1, "hi");
    }
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "the tunnel is kept for the second request");
    assert!(asked[0].starts_with(&format!("CONNECT localhost:{port} HTTP/1.1\r\n")));
}

#[test]
fn a_head_that_never_ends_is_refused_holding_no_more_than_its_bound() {
    // Read into a buffer whose room doubles as it grows, such a head was refused holding
    // up to twice the bound; the fuzz entry point checks each read's room.
    let mut stream = b"HTTP/1.1 200 OK\r\nX-Filler: ".to_vec();
    stream.resize(3 * head::MAX_HEAD_BYTES, b'a');
    for closes in [false, true] {
        fuzz::response(&stream, &[], closes);
    }
}
