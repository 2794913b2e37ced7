//! Addresses the client commands take (`exec`, `health`, `bench`): `host:port`,
//! `http://host:port`, or `unix:/path/to.sock` for a server in sidecar mode.

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// A usable address, as a URI (`http://...`) or a socket path (`unix:/...`); `None` when it
/// is neither.
pub fn endpoint(addr: &str) -> Option<String> {
    if let Some(path) = addr.strip_prefix("unix:") {
        return (!path.is_empty()).then(|| addr.to_owned());
    }
    let uri = if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    };
    uri.parse::<Uri>()
        .ok()
        .filter(|u| u.host().is_some() && u.port().is_some())
        .map(|_| uri)
}

/// One new connection (its own, never shared) to an address [`endpoint`] returned, with
/// TCP_NODELAY as the server has.
pub async fn connect(endpoint: &str) -> Result<Channel, tonic::transport::Error> {
    match endpoint.strip_prefix("unix:") {
        Some(path) => {
            let path = path.to_owned();
            // The URI is only the HTTP/2 authority; the connector decides where to go.
            Endpoint::from_static("http://localhost")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move { UnixStream::connect(path).await.map(TokioIo::new) }
                }))
                .await
        }
        None => {
            Endpoint::from_shared(endpoint.to_owned())?
                .tcp_nodelay(true)
                .connect()
                .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_host_port_http_urls_and_unix_paths() {
        assert_eq!(
            endpoint("127.0.0.1:50051").as_deref(),
            Some("http://127.0.0.1:50051")
        );
        assert_eq!(
            endpoint("http://localhost:7").as_deref(),
            Some("http://localhost:7")
        );
        assert_eq!(
            endpoint("unix:/run/mr.sock").as_deref(),
            Some("unix:/run/mr.sock")
        );
        for bad in ["localhost", "", "unix:"] {
            assert_eq!(endpoint(bad), None, "{bad}");
        }
    }
}
