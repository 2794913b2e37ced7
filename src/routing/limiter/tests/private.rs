//! The gate against a Redis of the test's own, on a Unix socket: killed and restarted from an
//! older snapshot, or answering too late through a slow proxy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::*;

/// A Redis of this test's own on a Unix socket (no TCP port), killed on drop; `None`, with a
/// line, where `redis-server` is not installed (and under `CI=true`, a failure).
struct PrivateRedis {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl PrivateRedis {
    fn start() -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let child = match Self::spawn(&dir.path().join("r.sock")) {
            Ok(child) => child,
            Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("redis-server is not installed")
            }
            Err(_) => {
                eprintln!("skipped: redis-server is not installed");
                return None;
            }
        };
        Some(Self { child, dir })
    }

    /// Stops it and starts it again on the same socket, with what its last `SAVE` kept
    /// (nothing, if it never saved).
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let socket = self.dir.path().join("r.sock");
        let _ = std::fs::remove_file(&socket);
        self.child = Self::spawn(&socket).unwrap();
    }

    /// `redis-server` on `socket`, once the socket is there; it loads the snapshot its
    /// directory holds, if one was saved.
    fn spawn(socket: &std::path::Path) -> std::io::Result<std::process::Child> {
        let child = std::process::Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(socket)
            .arg("--dir")
            .arg(socket.parent().unwrap_or(socket))
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let started = std::time::Instant::now();
        while !socket.exists() {
            assert!(started.elapsed() < WAIT, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(child)
    }

    fn url(&self) -> String {
        format!("redis+unix://{}", self.dir.path().join("r.sock").display())
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback proxy to `redis` that, while `slow` is set, holds each answer back 300 ms: a
/// command that runs whose answer comes too late, as on a slow network.
async fn slow_proxy(redis: &PrivateRedis, slow: Arc<AtomicBool>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let socket = redis.dir.path().join("r.sock");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::UnixStream::connect(&socket).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut client_read, &mut server_write).await });
            let slow = slow.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 << 10];
                while let Ok(n) = server_read.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    if slow.load(Ordering::Acquire) {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    if client_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("redis://{address}")
}

/// A gate of `limit` permits whose Redis (its own) answers through a proxy that, while
/// `answers_late` is set, answers after the gate's 100 ms timeout; lease 6 s. Warmed: the
/// script is loaded, the connection made and the keeper started by a first acquire.
struct LateAnswers {
    _redis: PrivateRedis,
    key: String,
    answers_late: Arc<AtomicBool>,
    gate: GlobalGate,
    admin: redis::aio::MultiplexedConnection,
}

impl LateAnswers {
    async fn start(limit: u32) -> Option<Self> {
        let redis = PrivateRedis::start()?;
        let key = unique_key();
        let answers_late = Arc::new(AtomicBool::new(false));
        let proxy = slow_proxy(&redis, answers_late.clone()).await;
        let mut slow = config(&proxy, &key, OnUnavailable::FailClosed);
        slow.lease = Duration::from_secs(6);
        slow.timeout = Duration::from_millis(100);
        let gate = GlobalGate::new("p", &slow, limit).unwrap();
        let admin = admin(&redis.url()).await;
        drop(gate.acquire().await.unwrap());
        Some(Self {
            _redis: redis,
            key,
            answers_late,
            gate,
            admin,
        })
    }

    fn late(&self, late: bool) {
        self.answers_late.store(late, Ordering::Release);
    }
}

#[tokio::test]
async fn a_take_that_timed_out_leaves_no_permit_behind() {
    let Some(mut at) = LateAnswers::start(1).await else {
        return;
    };
    // The take runs in Redis, and its answer comes after the timeout.
    at.late(true);
    assert!(matches!(at.gate.acquire().await, Err(Refused::Unavailable)));
    at.late(false);
    // The member it added is removed (once Redis answers in time), long before its lease
    // would end.
    none_left_behind(&mut at.admin, &at.key).await;
}

/// The same for a block: every member a take of three added, its answer lost, goes back.
#[tokio::test]
async fn a_block_taken_whose_answer_was_lost_leaves_no_permit_behind() {
    let Some(mut at) = LateAnswers::start(4).await else {
        return;
    };
    at.late(true);
    assert!(at.gate.shared.take(3).await.is_err());
    at.late(false);
    // The keeper (started by the first acquire) gives back what the take carried, once
    // Redis answers in time.
    none_left_behind(&mut at.admin, &at.key).await;
}

/// Waits until no permit is held under `key` (and stays so for half a second), failing
/// after four seconds, well within a lease of six.
async fn none_left_behind(admin: &mut redis::aio::MultiplexedConnection, key: &str) {
    let started = std::time::Instant::now();
    loop {
        let held = held(admin, key).await;
        if held == 0 && started.elapsed() > Duration::from_millis(500) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "a permit is left behind ({held} held)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn fail_open_goes_back_to_redis_once_it_answers() {
    let Some(mut redis) = PrivateRedis::start() else {
        return;
    };
    let key = unique_key();
    let mut open = config(&redis.url(), &key, OnUnavailable::FailOpen);
    open.lease = Duration::from_secs(3);
    open.timeout = Duration::from_millis(100);
    let gate = GlobalGate::new("p", &open, 4).unwrap();
    let leased = gate.acquire().await.unwrap();
    assert!(matches!(leased, Held::Lease(_)));

    // Redis gone: the next attempt runs on this replica's one local permit.
    let _ = redis.child.kill();
    let _ = redis.child.wait();
    let local = tokio::time::timeout(WAIT, gate.acquire())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(local, Held::Local(..)));

    // Redis back: the next attempt leases again, though the local permit is still taken.
    redis.restart();
    let next = tokio::time::timeout(WAIT, gate.acquire())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(next, Held::Lease(_)));
    assert!(gate.status().reachable);
    // The attempt admitted without Redis counts too once the keeper renews it in, as does
    // the first lease, which the restarted Redis lost.
    let mut admin = admin(&redis.url()).await;
    let started = std::time::Instant::now();
    loop {
        let held = held(&mut admin, &key).await;
        if held == 3 {
            break;
        }
        assert!(started.elapsed() < WAIT, "{held} held, not 3");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((leased, local, next));
}

/// Redis killed and started again from a snapshot taken before one of two permits was held
/// (the newest writes lost): another server process wrote the set last, so it settles again,
/// also for a replica that saw nothing of the set before and cannot know what it lost. The
/// permits still held are renewed into it first.
#[tokio::test]
async fn a_set_restarted_from_an_older_snapshot_settles_before_anyone_else_takes_one() {
    let Some(mut redis) = PrivateRedis::start() else {
        return;
    };
    let (url, key) = (redis.url(), unique_key());
    let gate = || GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 2).unwrap();
    let (a, b) = (gate(), gate());
    let _held = a.acquire().await.unwrap();
    let () = redis::cmd("SAVE")
        .query_async(&mut admin(&url).await)
        .await
        .unwrap();
    let held = b.acquire().await.unwrap();
    redis.restart();
    let fresh = gate();
    assert!(
        tokio::time::timeout(Duration::from_secs(3), fresh.acquire())
            .await
            .is_err(),
        "a permit while two were held, one of them lost with the newest writes"
    );
    drop(held);
    assert!(
        tokio::time::timeout(WAIT, fresh.acquire())
            .await
            .unwrap()
            .is_ok()
    );
}
