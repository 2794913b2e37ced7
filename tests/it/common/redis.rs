//! A `redis-server` of a test's own, to kill, restart and restore.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::process::Guard;
use super::services::unavailable;
use super::within;

/// A `redis-server` of this test's own on a Unix socket (port 0: no TCP, so it takes no
/// address), killed on drop; started again on the same socket to come back, with what its
/// last [`save`](Self::save) kept (nothing, if it never saved).
pub struct PrivateRedis {
    dir: PathBuf,
    process: Option<Guard>,
}

impl PrivateRedis {
    /// `None` (after a line saying so) when `redis-server` is not on PATH, unless CI=true.
    pub async fn start(dir: &Path) -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            unavailable("redis-server is not on PATH");
            return None;
        }
        let mut redis = Self {
            dir: dir.to_owned(),
            process: None,
        };
        redis.restart().await;
        Some(redis)
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("r.sock")
    }

    /// The URL the limiter is given.
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    /// SIGKILL: nothing more is saved.
    pub fn kill(&mut self) {
        self.process = None;
    }

    /// A snapshot of everything now (`SAVE`), which a restart loads.
    pub async fn save(&self) {
        self.command(b"SAVE\r\n").await;
    }

    /// Its data replaced by the last snapshot, in place (`DEBUG RELOAD NOSAVE`): the server
    /// and its connections stay.
    pub async fn reload(&self) {
        self.command(b"DEBUG RELOAD NOSAVE\r\n").await;
    }

    /// Sends `command`; its answer must be `+OK`.
    async fn command(&self, command: &[u8]) {
        use tokio::io::AsyncReadExt;
        let mut stream = tokio::net::UnixStream::connect(self.socket())
            .await
            .unwrap();
        stream.write_all(command).await.unwrap();
        let mut reply = [0; 5];
        stream.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply, b"+OK\r\n", "{}", String::from_utf8_lossy(command));
    }

    /// Starts it and waits until it answers PING. A killed server leaves its socket file
    /// behind; redis-server removes it before it binds.
    pub async fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(self.socket())
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "local",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.process = Some(Guard(child));
        let socket = self.socket();
        within(async {
            while !pings(&socket).await {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
}

/// Whether a Redis on `socket` answers PING.
async fn pings(socket: &Path) -> bool {
    use tokio::io::AsyncReadExt;
    let Ok(mut stream) = tokio::net::UnixStream::connect(socket).await else {
        return false;
    };
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").await.is_ok()
        && stream.read_exact(&mut reply).await.is_ok()
        && &reply == b"+PONG\r\n"
}
