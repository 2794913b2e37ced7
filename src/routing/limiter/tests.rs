//! The gate against a real Redis (`MODEL_RUNTIME_TEST_REDIS_URL`; without it these skip, and
//! fail under `CI=true`), and against an address where nothing answers.

use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::config::{LimiterConfig, OnUnavailable, Secret};
use shared::lock;

/// The Redis the tests use, or `None` (with a line saying so) where none is configured.
fn redis_url() -> Option<String> {
    const VAR: &str = "MODEL_RUNTIME_TEST_REDIS_URL";
    match std::env::var(VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("{VAR} is not set"),
        _ => {
            eprintln!("skipped: {VAR} is not set");
            None
        }
    }
}

fn config(url: &str, key: &str, on_unavailable: OnUnavailable) -> LimiterConfig {
    LimiterConfig {
        url: Secret::new(url),
        url_env: "TEST".into(),
        key: key.into(),
        lease: Duration::from_secs(2),
        timeout: Duration::from_millis(300),
        on_unavailable,
        local_limit: 1,
    }
}

fn unique_key() -> String {
    format!("model-runtime:test:{}", uuid::Uuid::new_v4())
}

const WAIT: Duration = Duration::from_secs(5);

/// A connection of the test's own to the Redis at `url`, to look at or disturb the permits.
async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The permits held under `key` now (the set's two markers aside).
async fn held(admin: &mut redis::aio::MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("ZCOUNT")
        .arg(key)
        .arg("-inf")
        .arg("(1125899906842624")
        .query_async(admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn replicas_share_one_limit_and_a_release_lets_the_next_in() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let a = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 2).unwrap();
    let b = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 2).unwrap();
    let first = a.acquire().await.unwrap();
    let _second = b.acquire().await.unwrap();
    assert_eq!(b.status().global_in_flight, Some(2));

    // Full across both replicas: a third waits, on either.
    let mut third = Box::pin(a.acquire());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), third.as_mut())
            .await
            .is_err()
    );
    drop(first);
    let third = tokio::time::timeout(WAIT, third).await.unwrap().unwrap();
    assert!(matches!(third, Held::Lease(_)));
    assert!(a.status().reachable);
}

#[tokio::test]
async fn a_dead_replicas_permits_come_back_within_the_lease() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let survivor = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    // A replica that took the only permit and died: nothing renews or releases it.
    let dead = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let taken = dead.acquire().await.unwrap();
    dead.shared.stop.cancel();
    lock(&dead.shared.held).clear();
    std::mem::forget(taken);
    std::mem::forget(dead);

    let start = std::time::Instant::now();
    let held = tokio::time::timeout(WAIT, survivor.acquire())
        .await
        .unwrap()
        .unwrap();
    let waited = start.elapsed();
    assert!(matches!(held, Held::Lease(_)));
    assert!(
        waited >= Duration::from_millis(1500),
        "the lease ended early: {waited:?}"
    );
}

#[tokio::test]
async fn permits_redis_lost_count_again_before_anyone_else_takes_one() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let a = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let b = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let held = a.acquire().await.unwrap();
    // Redis loses the permits (an eviction, say) while A's attempt runs; the mark of the
    // set's birth survives, and says nothing of the loss.
    let mut admin = admin(&url).await;
    let () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut admin)
        .await
        .unwrap();
    // A renews into the new set before it gives any permit: B stays out while A holds.
    assert!(
        tokio::time::timeout(Duration::from_secs(3), b.acquire())
            .await
            .is_err()
    );
    drop(held);
    assert!(
        tokio::time::timeout(WAIT, b.acquire())
            .await
            .unwrap()
            .is_ok()
    );
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

#[tokio::test]
async fn held_permits_are_renewed_past_their_lease() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let a = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let b = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let _held = a.acquire().await.unwrap();
    // Three leases long: the keeper renews it, so the other replica never gets in.
    assert!(
        tokio::time::timeout(Duration::from_secs(6), b.acquire())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_waiter_dropped_while_it_waits_leaves_nothing_held() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let a = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let held = a.acquire().await.unwrap();
    for _ in 0..20 {
        let waiter = a.acquire();
        let _ = tokio::time::timeout(Duration::from_millis(5), waiter).await;
    }
    drop(held);
    let again = tokio::time::timeout(WAIT, a.acquire()).await.unwrap();
    assert!(again.is_ok());
    assert_eq!(a.status().global_in_flight, Some(1));
}

#[tokio::test]
async fn unreachable_redis_refuses_or_admits_locally_as_configured() {
    // Nothing listens on port 1 of loopback.
    let url = "redis://127.0.0.1:1";
    let closed = GlobalGate::new(
        "p",
        &config(url, &unique_key(), OnUnavailable::FailClosed),
        4,
    )
    .unwrap();
    assert!(matches!(closed.acquire().await, Err(Refused::Unavailable)));
    // Within a second of a failed call, attempts do not wait out the timeout again.
    let start = tokio::time::Instant::now();
    assert!(matches!(closed.acquire().await, Err(Refused::Unavailable)));
    assert!(start.elapsed() < Duration::from_millis(100));
    let status = closed.status();
    assert!(!status.reachable);
    assert_eq!(status.unavailable, 2);
    assert_eq!(status.global_in_flight, None);

    let open =
        GlobalGate::new("p", &config(url, &unique_key(), OnUnavailable::FailOpen), 4).unwrap();
    let local = open.acquire().await.unwrap();
    assert!(matches!(local, Held::Local(..)));
    // `local_limit = 1`: a second waits for the first.
    let mut second = Box::pin(open.acquire());
    assert!(
        tokio::time::timeout(Duration::from_millis(100), second.as_mut())
            .await
            .is_err()
    );
    drop(local);
    assert!(tokio::time::timeout(WAIT, second).await.unwrap().is_ok());
}

#[test]
fn a_url_that_does_not_parse_is_named_by_its_variable_only() {
    let error = GlobalGate::new(
        "p",
        &config("redis://:hunter2@[::1", "k", OnUnavailable::FailClosed),
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("limiter.url_env: environment variable `TEST` is not a Redis URL"),
        "{error}"
    );
    assert!(!error.contains("hunter2"), "{error}");
}

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

#[tokio::test]
async fn a_take_that_timed_out_leaves_no_permit_behind() {
    let Some(redis) = PrivateRedis::start() else {
        return;
    };
    let key = unique_key();
    let answers_late = Arc::new(AtomicBool::new(false));
    let proxy = slow_proxy(&redis, answers_late.clone()).await;
    let mut slow = config(&proxy, &key, OnUnavailable::FailClosed);
    slow.lease = Duration::from_secs(6);
    slow.timeout = Duration::from_millis(100);
    let gate = GlobalGate::new("p", &slow, 1).unwrap();
    let mut admin = admin(&redis.url()).await;
    // Warm: the script is loaded and the connection made.
    drop(gate.acquire().await.unwrap());
    // The take runs in Redis, and its answer comes after the timeout.
    answers_late.store(true, Ordering::Release);
    assert!(matches!(gate.acquire().await, Err(Refused::Unavailable)));
    answers_late.store(false, Ordering::Release);
    // The member it added is removed (once Redis answers in time), long before its lease
    // would end.
    let started = std::time::Instant::now();
    loop {
        let held = held(&mut admin, &key).await;
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

#[tokio::test]
async fn a_lease_taken_by_another_while_unrenewed_is_counted_lost_once() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let a = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    let held = a.acquire().await.unwrap();
    // A's lease lapsed (a pause, say) and another replica took the only permit.
    let mut admin = admin(&url).await;
    let member = lock(&a.shared.held).iter().next().cloned().unwrap();
    let () = redis::pipe()
        .atomic()
        .cmd("ZREM")
        .arg(&key)
        .arg(&member)
        .ignore()
        .cmd("ZADD")
        .arg(&key)
        .arg(an_hour_from_now())
        .arg("another-replica:0")
        .ignore()
        .query_async(&mut admin)
        .await
        .unwrap();
    // Three renewals later: lost, and counted once.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    assert_eq!(a.status().lost, 1);
    drop(held);
}

/// A lease's end an hour from now, as the scripts score it (milliseconds since the epoch).
fn an_hour_from_now() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(now.as_millis()).unwrap() + 3_600_000
}

#[tokio::test]
async fn a_flush_gives_released_permits_back_at_once() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let gate = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 1).unwrap();
    // Taken without the keeper (which a shutdown may not leave time to run).
    let lease = loop {
        if let Some(lease) = gate.shared.take().await.unwrap() {
            break lease;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(lease);
    gate.flush().await;
    let mut admin = admin(&url).await;
    let held = held(&mut admin, &key).await;
    assert_eq!(held, 0);
}

/// A Redis user denied `@dangerous` (Redis's own least-privilege example), `INFO` with it, is
/// still given permits: the scripts do without the server's `run_id`.
#[tokio::test]
async fn a_user_without_info_is_given_permits() {
    let Some(url) = redis_url() else { return };
    let mut admin = admin(&url).await;
    let user = format!("model-runtime-test-{}", uuid::Uuid::new_v4());
    let () = redis::cmd("ACL")
        .arg(
            &[
                "SETUSER",
                &user,
                "on",
                "nopass",
                "~*",
                "+@all",
                "-@dangerous",
            ][..],
        )
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut limited = url::Url::parse(&url).unwrap();
    limited.set_username(&user).unwrap();
    limited.set_password(Some("any")).unwrap();
    let key = unique_key();
    let gate = GlobalGate::new(
        "p",
        &config(limited.as_str(), &key, OnUnavailable::FailClosed),
        2,
    )
    .unwrap();
    let taken = tokio::time::timeout(WAIT, gate.acquire()).await;
    let reachable = gate.status().reachable;
    let counted = held(&mut admin, &key).await;
    let _: i64 = redis::cmd("ACL")
        .arg(&["DELUSER", &user][..])
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(matches!(taken, Ok(Ok(Held::Lease(_)))), "{taken:?}");
    assert!(reachable);
    assert_eq!(counted, 1);
}

/// The wait a new set of permits makes its first attempts do is said, once.
#[tokio::test]
async fn a_settling_set_is_said_once() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let Some(url) = redis_url() else { return };
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let key = unique_key();
    let gate = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 2).unwrap();
    let first = tokio::time::timeout(WAIT, gate.acquire())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(WAIT, gate.acquire())
        .await
        .unwrap()
        .unwrap();
    drop((first, second));
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("is new or lost writes").count(), 1, "{text}");
    assert!(text.contains(&format!("key={key}")), "{text}");
}
