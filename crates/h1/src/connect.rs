//! Opening a connection to a provider: name resolution, TCP (no Nagle delay, keep-alive
//! probes), TLS with the platform's roots, and, when the configuration names a proxy, a
//! `CONNECT` tunnel through it for https targets (plain-http targets are sent to the proxy
//! in absolute form instead). Everything here runs within the connect timeout.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::head::{self, MAX_HEAD_BYTES};
use super::{ConnectStep, Endpoint, Failure, Io, Shared};

/// TCP keep-alive probes find a dead peer during a long silent stream.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// Opens a connection for `shared`'s target, within its connect timeout.
pub(super) async fn open(shared: Arc<Shared>) -> Result<Box<dyn Io>, Failure> {
    let limit = shared.connect_timeout;
    match tokio::time::timeout(limit, route(&shared)).await {
        Ok(opened) => opened,
        Err(_) => Err(failed(
            ConnectStep::TimedOut,
            format!("no connection within {limit:?}"),
        )),
    }
}

async fn route(shared: &Shared) -> Result<Box<dyn Io>, Failure> {
    let target = &shared.target;
    let first = shared.proxy.as_ref().map_or(target, |p| &p.endpoint);
    let mut io: Box<dyn Io> = Box::new(tcp(first, shared.connect_timeout).await?);
    if first.https {
        io = tls(shared, first, io).await?;
    }
    if let Some(proxy) = &shared.proxy
        && target.https
    {
        io = tunnel(io, target, proxy.authorization.as_deref()).await?;
        io = tls(shared, target, io).await?;
    }
    Ok(io)
}

fn failed(step: ConnectStep, cause: impl Into<String>) -> Failure {
    Failure::Connect {
        step,
        cause: cause.into(),
    }
}

/// The step a TCP connect's error says failed.
fn tcp_step(error: &std::io::Error) -> ConnectStep {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => ConnectStep::Refused,
        std::io::ErrorKind::TimedOut => ConnectStep::TimedOut,
        _ => ConnectStep::Unreachable,
    }
}

/// A TCP connection to the first of `endpoint`'s addresses that accepts one. Each address
/// gets an even share of `limit`, so one that drops packets (an IPv6 route that goes
/// nowhere) leaves time for the next.
async fn tcp(endpoint: &Endpoint, limit: Duration) -> Result<TcpStream, Failure> {
    let addresses: Vec<_> = tokio::net::lookup_host((endpoint.host(), endpoint.port))
        .await
        .map_err(|e| {
            let cause = format!("resolving {}: {e}", endpoint.host());
            failed(ConnectStep::Resolve, cause)
        })?
        .collect();
    let share = limit / u32::try_from(addresses.len().max(1)).unwrap_or(u32::MAX);
    let mut last = None;
    for address in addresses {
        match tokio::time::timeout(share, TcpStream::connect(address)).await {
            Err(_) => {
                let cause = format!("{address}: no answer within {share:?}");
                last = Some(failed(ConnectStep::TimedOut, cause));
            }
            Ok(Err(e)) => last = Some(failed(tcp_step(&e), format!("{address}: {e}"))),
            Ok(Ok(stream)) => {
                let local = |e| failed(ConnectStep::Local, format!("TCP_NODELAY: {e}"));
                stream.set_nodelay(true).map_err(local)?;
                let probes = TcpKeepalive::new().with_time(TCP_KEEPALIVE);
                SockRef::from(&stream)
                    .set_tcp_keepalive(&probes)
                    .map_err(|e| failed(ConnectStep::Local, format!("TCP keep-alive: {e}")))?;
                return Ok(stream);
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        let cause = format!("{} resolved to no address", endpoint.host());
        failed(ConnectStep::Resolve, cause)
    }))
}

async fn tls(
    shared: &Shared,
    endpoint: &Endpoint,
    io: Box<dyn Io>,
) -> Result<Box<dyn Io>, Failure> {
    let config = shared
        .tls
        .clone()
        .ok_or_else(|| failed(ConnectStep::Local, "TLS is not set up"))?;
    let name = ServerName::try_from(endpoint.host().to_owned()).map_err(|e| {
        let cause = format!("TLS server name {}: {e}", endpoint.host());
        failed(ConnectStep::Local, cause)
    })?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, io)
        .await
        .map_err(|e| {
            failed(
                ConnectStep::Tls,
                format!("TLS with {}: {e}", endpoint.host()),
            )
        })?;
    Ok(Box::new(stream))
}

/// Asks the proxy on `io` for a tunnel to `target`.
pub(super) async fn tunnel(
    mut io: Box<dyn Io>,
    target: &Endpoint,
    authorization: Option<&str>,
) -> Result<Box<dyn Io>, Failure> {
    // Authority form always names the port (RFC 9112 section 3.2.3), the default one too.
    let mut request = format!(
        "CONNECT {0}:{1} HTTP/1.1\r\nHost: {0}:{1}\r\n",
        target.host, target.port
    );
    if let Some(credentials) = authorization {
        request.push_str("Proxy-Authorization: ");
        request.push_str(credentials);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let refused = |cause: &str| failed(ConnectStep::Proxy, cause);
    let broke = |e: std::io::Error| failed(ConnectStep::Proxy, format!("proxy tunnel: {e}"));
    io.write_all(request.as_bytes()).await.map_err(broke)?;
    io.flush().await.map_err(broke)?;
    let mut buffer = Vec::with_capacity(1024);
    loop {
        if io.read_buf(&mut buffer).await.map_err(broke)? == 0 {
            return Err(refused("the proxy closed the connection before answering"));
        }
        match head::parse(&buffer) {
            Ok(None) if buffer.len() <= MAX_HEAD_BYTES => {}
            Ok(None) => return Err(refused("the proxy's answer is too large")),
            Err(e) => return Err(refused(&format!("the proxy's answer: {e}"))),
            // Nothing may follow the answer before the client speaks TLS.
            Ok(Some((head, taken))) if (200..300).contains(&head.status) => {
                if taken < buffer.len() {
                    return Err(refused("the proxy sent bytes after opening the tunnel"));
                }
                return Ok(io);
            }
            Ok(Some((head, _))) => {
                return Err(refused(&format!(
                    "the proxy refused the tunnel with HTTP {}",
                    head.status
                )));
            }
        }
    }
}
