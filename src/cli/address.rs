//! The one address grammar of the command, for `serve --listen` and the clients' `--addr`
//! (`exec`, `health`, `bench`, `usage`, `price`): `host:port`, `http://host:port`, or
//! `unix:/path/to.sock` for a Unix domain socket (sidecar mode).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use hyper_util::rt::TokioIo;
use model_runtime::server::Listener;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `host:port` (written with or without `http://`).
    Tcp(String),
    /// A Unix socket's path.
    Unix(PathBuf),
}

/// What the grammar says, for errors.
const GRAMMAR: &str = "expected host:port, http://host:port or unix:/path/to.sock";

impl FromStr for Address {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            return match path {
                "" => Err("unix: needs a socket path, like unix:/run/model-runtime.sock".into()),
                path => Ok(Self::Unix(PathBuf::from(path))),
            };
        }
        if text.starts_with("https://") {
            return Err(format!(
                "`{text}`: the runtime serves plain HTTP/2 (put TLS in front of it); {GRAMMAR}"
            ));
        }
        let authority = text.strip_prefix("http://").unwrap_or(text);
        let authority = authority.strip_suffix('/').unwrap_or(authority);
        match format!("http://{authority}").parse::<Uri>() {
            Ok(uri) if uri.host().is_some() && uri.port().is_some() && uri.path() == "/" => {
                Ok(Self::Tcp(authority.to_owned()))
            }
            _ => Err(format!("`{text}`: {GRAMMAR}")),
        }
    }
}

impl fmt::Display for Address {
    /// As `exec --addr` takes it, and as `serve` logs where it listens.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(authority) => f.write_str(authority),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Address {
    /// As a URI: `http://host:port`, or `unix:/path`.
    pub fn uri(&self) -> String {
        match self {
            Self::Tcp(authority) => format!("http://{authority}"),
            Self::Unix(_) => self.to_string(),
        }
    }

    /// A new connection to it (its own, never shared), with TCP_NODELAY as the server has.
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match self {
            Self::Unix(path) => {
                let path = path.clone();
                // The URI is only the HTTP/2 authority; the connector decides where to go.
                Endpoint::from_static("http://localhost")
                    .connect_with_connector(tower::service_fn(move |_: Uri| {
                        let path = path.clone();
                        async move { UnixStream::connect(path).await.map(TokioIo::new) }
                    }))
                    .await
            }
            Self::Tcp(authority) => {
                Endpoint::from_shared(format!("http://{authority}"))?
                    .tcp_nodelay(true)
                    .connect()
                    .await
            }
        }
    }

    /// Binds a listener here: a TCP address must be an IP address and port (the server
    /// binds no name), a Unix socket is made as `server::Listener::unix` says.
    pub async fn listen(&self) -> std::io::Result<Listener> {
        match self {
            Self::Tcp(authority) => {
                let addr: std::net::SocketAddr = authority.parse().map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("`{authority}` is not an IP address and port like 127.0.0.1:50051"),
                    )
                })?;
                Ok(tokio::net::TcpListener::bind(addr).await?.into())
            }
            Self::Unix(path) => Listener::unix(path).await,
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn one_grammar_for_listening_and_connecting() {
        for (text, address) in [
            ("127.0.0.1:50051", Address::Tcp("127.0.0.1:50051".into())),
            ("http://localhost:7", Address::Tcp("localhost:7".into())),
            ("http://[::1]:7/", Address::Tcp("[::1]:7".into())),
            ("unix:/run/mr.sock", Address::Unix("/run/mr.sock".into())),
            ("unix:mr.sock", Address::Unix("mr.sock".into())),
        ] {
            assert_eq!(text.parse::<Address>().unwrap(), address, "{text}");
        }
        for bad in [
            "localhost",
            "",
            "unix:",
            "http://x:7/path",
            "https://x:7",
            "x:port",
        ] {
            let error = bad.parse::<Address>().unwrap_err();
            assert!(error.contains("unix:"), "{bad}: {error}");
        }
        assert_eq!(
            "unix:/run/mr.sock".parse::<Address>().unwrap().to_string(),
            "unix:/run/mr.sock"
        );
    }
}
