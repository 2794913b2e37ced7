//! Where the server listens: a TCP address, or (sidecar mode) a Unix domain socket, which is
//! created with mode 0660 (the owner and its group may connect) and removed when the server
//! stops. Connections of either kind are served alike.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use std::os::unix::fs::PermissionsExt;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// A bound listener.
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix domain socket, and its path (removed when the listener is dropped).
    Unix(UnixListener, UnixPath),
}

/// A Unix socket's path, removed when it drops.
#[derive(Debug)]
pub struct UnixPath(PathBuf);

impl Drop for UnixPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Self::Tcp(listener)
    }
}

impl Listener {
    /// Binds the Unix socket at `path` with mode 0660. A socket file left by a server that is
    /// gone is replaced; one a live server answers on is an error.
    pub async fn unix(path: &Path) -> io::Result<Self> {
        let listener = match UnixListener::bind(path) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                if UnixStream::connect(path).await.is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} is in use by a running server", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
                UnixListener::bind(path)?
            }
            bound => bound?,
        };
        let owned = UnixPath(path.to_owned());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
        Ok(Self::Unix(listener, owned))
    }

    /// Where it listens, as `exec --addr` takes it: `127.0.0.1:50051` or `unix:/path`.
    pub fn address(&self) -> String {
        match self {
            Self::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|e| format!("(unknown: {e})"), |a| a.to_string()),
            Self::Unix(_, path) => format!("unix:{}", path.0.display()),
        }
    }
}

/// An accepted connection of either kind.
#[derive(Debug)]
pub(super) enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Tcp(s) => s.is_write_vectored(),
            Self::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            Self::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Self::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
