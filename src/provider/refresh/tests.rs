use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fetch that gives `value` for `lifetime`, counting its calls in `count`.
fn gives(
    count: &AtomicUsize,
    value: u32,
    lifetime: Duration,
) -> impl Future<Output = Result<(u32, Duration), &'static str>> + '_ {
    count.fetch_add(1, Ordering::SeqCst);
    std::future::ready(Ok((value, lifetime)))
}

#[tokio::test(start_paused = true)]
async fn credentials_are_refreshed_with_five_minutes_or_half_their_life_left() {
    let refreshed = Refreshed::default();
    let count = AtomicUsize::new(0);
    assert!(refreshed.fresh().is_none() && refreshed.valid().is_none());
    // An hour's credentials are fetched again with five minutes left.
    let got = refreshed
        .get(|_| gives(&count, 1, Duration::from_secs(3600)))
        .await;
    assert!(matches!(got, Got::Value(1)));
    tokio::time::advance(Duration::from_secs(3299)).await;
    assert_eq!(refreshed.fresh(), Some(1));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(refreshed.fresh().is_none() && refreshed.valid().is_some());
    tokio::time::advance(Duration::from_secs(300)).await;
    assert!(refreshed.valid().is_none());
    // Short ones with half their lifetime left.
    refreshed
        .get(|_| gives(&count, 2, Duration::from_secs(4)))
        .await;
    tokio::time::advance(Duration::from_millis(1900)).await;
    assert_eq!(refreshed.fresh(), Some(2));
    tokio::time::advance(Duration::from_millis(200)).await;
    assert!(refreshed.fresh().is_none() && refreshed.valid().is_some());
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_fetch_keeps_valid_credentials_pauses_and_without_them_fails() {
    let refreshed = Refreshed::default();
    let failed = refreshed
        .get(|old| {
            assert_eq!(old, None);
            std::future::ready(Err::<(u32, Duration), _>("down"))
        })
        .await;
    assert!(matches!(failed, Got::Failed("down")));
    let count = AtomicUsize::new(0);
    refreshed
        .get(|_| gives(&count, 7, Duration::from_secs(4)))
        .await;
    tokio::time::advance(Duration::from_secs(3)).await;
    // Due; the fetch fails; the held ones serve, and are told when they expire.
    let kept = refreshed
        .get(|old| {
            assert!(old.is_some());
            std::future::ready(Err::<(u32, Duration), _>("down"))
        })
        .await;
    assert!(matches!(kept, Got::Kept(7, "down")));
    // No new try right away: they are fresh again until they expire (one second here).
    assert_eq!(refreshed.fresh(), Some(7));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(refreshed.valid().is_none());
    let failed = refreshed
        .get(|old| {
            assert_eq!(old, None);
            std::future::ready(Err::<(u32, Duration), _>("down"))
        })
        .await;
    assert!(matches!(failed, Got::Failed("down")));
}

#[tokio::test]
async fn calls_during_a_fetch_take_valid_credentials_or_wait_for_it() {
    let refreshed = Arc::new(Refreshed::default());
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    // Nothing held: a second call waits for the first one's fetch, and gets its result.
    let first = tokio::spawn({
        let refreshed = refreshed.clone();
        async move {
            refreshed
                .get(|_| async move {
                    wait.await.ok();
                    Ok::<_, &str>((1u32, Duration::from_secs(3600)))
                })
                .await
        }
    });
    tokio::task::yield_now().await;
    let second = tokio::spawn({
        let refreshed = refreshed.clone();
        async move {
            refreshed
                .get(|_| async { Err::<(u32, Duration), _>("a second fetch") })
                .await
        }
    });
    tokio::task::yield_now().await;
    release.send(()).ok();
    assert!(matches!(first.await.unwrap(), Got::Value(1)));
    assert!(matches!(second.await.unwrap(), Got::Value(1)));
}
