//! Where the server listens: a TCP address, or (sidecar mode) a Unix domain socket, which is
//! created with mode 0660 (the owner and its group may connect) and removed when the server
//! stops. Connections of either kind are served alike, except that a Unix connection accepts
//! any `:authority` ([`super::authority`]).
//!
//! A path is only ever taken from a server that is gone: a file there that is not a socket
//! (a journal, a typo'd config) is never removed, nor a socket whose server answers, nor one
//! whose state cannot be told (a full accept backlog, no permission): only a socket on which
//! a connect is refused. At the stop the path is removed only if it is still the socket this
//! server made.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use super::authority::AnyAuthority;

/// The socket's mode: its owner and group may connect.
const SOCKET_MODE: u32 = 0o660;

/// A bound listener.
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix domain socket, and its path (removed when the listener is dropped).
    Unix(UnixListener, UnixPath),
}

/// A Unix socket's path, removed when it drops if it is still the socket that was bound.
#[derive(Debug)]
pub struct UnixPath {
    path: PathBuf,
    /// The socket file's device and inode, as bound.
    file: (u64, u64),
}

impl Drop for UnixPath {
    fn drop(&mut self) {
        // Another file put there since (a new server's socket) is not ours to remove.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.file) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Self::Tcp(listener)
    }
}

impl Listener {
    /// Binds the Unix socket at `path` with mode 0660. A socket file left by a server that is
    /// gone (a connect is refused) is replaced; anything else at `path` is an error that says
    /// what is there.
    ///
    /// The socket is created with its final mode: the process's umask is set around the
    /// `bind` (no `chmod` after, which a symlink swapped in could redirect). The umask is
    /// process-wide, so call this before other threads create files, as `serve` does.
    pub async fn unix(path: &Path) -> io::Result<Self> {
        let listener = match bind_with_mode(path) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                stale(path).await?;
                std::fs::remove_file(path)?;
                bind_with_mode(path)?
            }
            bound => bound?,
        };
        let metadata = std::fs::symlink_metadata(path)?;
        let owned = UnixPath {
            path: path.to_owned(),
            file: (metadata.dev(), metadata.ino()),
        };
        Ok(Self::Unix(listener, owned))
    }

    /// Where it listens, as `exec --addr` takes it: `127.0.0.1:50051` or `unix:/path`.
    pub fn address(&self) -> String {
        match self {
            Self::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|e| format!("(unknown: {e})"), |a| a.to_string()),
            Self::Unix(_, path) => format!("unix:{}", path.path.display()),
        }
    }
}

/// Binds `path` with the umask that gives the socket [`SOCKET_MODE`].
fn bind_with_mode(path: &Path) -> io::Result<UnixListener> {
    use rustix::fs::Mode;
    let previous = rustix::process::umask(Mode::from_bits_truncate(0o777 & !SOCKET_MODE));
    let bound = UnixListener::bind(path);
    rustix::process::umask(previous);
    bound.map_err(|e| in_directory(path, e))
}

/// `error` of binding `path`, naming the directory when the directory is what is wrong: it
/// does not exist, or this user may not create files in it.
fn in_directory(path: &Path, error: io::Error) -> io::Error {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let reason = match error.kind() {
        io::ErrorKind::NotFound if !dir.exists() => format!(
            "the socket's directory {} does not exist: create it first, writable by the user \
             the server runs as",
            dir.display()
        ),
        io::ErrorKind::PermissionDenied => format!(
            "this user may not create the socket in {}: make the directory writable by the \
             user the server runs as",
            dir.display()
        ),
        _ => return error,
    };
    io::Error::new(error.kind(), reason)
}

/// Ok when the file at `path` is a socket that no server answers on (a connect is refused);
/// otherwise an error that says what is there.
async fn stale(path: &Path) -> io::Result<()> {
    let shown = path.display();
    let metadata = std::fs::symlink_metadata(path)?;
    if !metadata.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{shown} exists and is not a socket: it is left as it is"),
        ));
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{shown} is in use by a running server"),
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(()),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "{shown} is a socket that may be in use (connecting to it failed: {e}); \
                 remove it if no server runs there"
            ),
        )),
    }
}

/// An accepted connection of either kind.
#[derive(Debug)]
pub(super) enum Conn {
    Tcp(TcpStream),
    /// Read through [`AnyAuthority`]: gRPC clients send a socket's path as the authority.
    Unix(AnyAuthority<UnixStream>),
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
