//! The gate against a real Redis (`MODEL_RUNTIME_TEST_REDIS_URL`; without it these skip, and
//! fail under `CI=true`), and against an address where nothing answers.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{LimiterConfig, OnUnavailable, Secret};
use shared::lock;

mod private;

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
/// Its answers may take the tests' `WAIT`, not the driver's default timeout: a `SAVE`, which
/// answers once the snapshot is on disk, took longer on a machine busy with the whole suite.
async fn admin(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(Some(WAIT)),
        )
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
        if let Some(lease) = gate.shared.take(1).await.unwrap().pop() {
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

/// Attempts crowding two replicas are given permits in blocks, and never more than the limit
/// hold one at once across both.
#[tokio::test]
async fn blocks_of_permits_keep_the_limit_across_replicas() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let limit = 4;
    let gates: Vec<_> = (0..2)
        .map(|_| {
            Arc::new(
                GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), limit)
                    .unwrap(),
            )
        })
        .collect();
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut attempts = tokio::task::JoinSet::new();
    for i in 0..60 {
        let gate = gates[i % 2].clone();
        let (holding, most) = (holding.clone(), most.clone());
        attempts.spawn(async move {
            let held = gate.acquire().await.unwrap();
            let now = holding.fetch_add(1, Ordering::AcqRel) + 1;
            most.fetch_max(now, Ordering::AcqRel);
            tokio::time::sleep(Duration::from_millis(5)).await;
            holding.fetch_sub(1, Ordering::AcqRel);
            drop(held);
        });
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(done) = attempts.join_next().await {
            done.unwrap();
        }
    })
    .await
    .unwrap();
    let most = most.load(Ordering::Acquire);
    assert!(most <= limit as usize, "{most} held at once, limit {limit}");
    assert!(most >= 2, "the attempts never overlapped ({most})");
    for gate in &gates {
        assert!(lock(&gate.shared.spare).is_empty());
    }
}

/// Spares taken for attempts that then left the line are released, not held idle.
#[tokio::test]
async fn spares_whose_attempts_left_are_given_back() {
    let Some(url) = redis_url() else { return };
    let key = unique_key();
    let gate = GlobalGate::new("p", &config(&url, &key, OnUnavailable::FailClosed), 4).unwrap();
    // A block of three, as the head of a line of three would take it.
    let mut leases = loop {
        let leases = gate.shared.take(3).await.unwrap();
        if !leases.is_empty() {
            break leases;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(leases.len(), 3);
    let mine = leases.remove(0);
    lock(&gate.shared.spare).extend(leases);
    // The two it was for leave the line before their turn.
    let (first, second) = (gate.in_line(), gate.in_line());
    drop(first);
    assert_eq!(lock(&gate.shared.spare).len(), 1, "one still waits for it");
    drop(second);
    assert!(lock(&gate.shared.spare).is_empty());
    gate.flush().await;
    let mut admin = admin(&url).await;
    assert_eq!(held(&mut admin, &key).await, 1);
    drop(mine);
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
