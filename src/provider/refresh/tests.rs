use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

type Cache = Refreshed<u32, &'static str>;

/// A fetch of `value` living `lifetime`, counted in `count`.
fn gives(
    count: &Arc<AtomicUsize>,
    value: u32,
    lifetime: Duration,
) -> impl FnOnce(Instant) -> std::future::Ready<Result<(u32, Duration), &'static str>> {
    let count = count.clone();
    move |_| {
        count.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok((value, lifetime)))
    }
}

/// A fetch that fails, counted in `count`.
fn fails(
    count: &Arc<AtomicUsize>,
) -> impl FnOnce(Instant) -> std::future::Ready<Result<(u32, Duration), &'static str>> {
    let count = count.clone();
    move |_| {
        count.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err("down"))
    }
}

fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// Lets a refresh started in the background run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn credentials_are_refreshed_with_five_minutes_or_half_their_life_left() {
    let cache = Cache::default();
    let count = Arc::new(AtomicUsize::new(0));
    assert_eq!(cache.fresh(), None);
    // An hour's credentials are fetched again with five minutes left.
    let got = cache.get(later(), gives(&count, 1, Duration::from_secs(3600)), |_| {});
    assert_eq!(got.await, Ok(1));
    tokio::time::advance(Duration::from_secs(3299)).await;
    assert_eq!(cache.fresh(), Some(1));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(cache.fresh(), None);
    // Due: the held ones serve at once, and new ones come in the background.
    let got = cache.get(later(), gives(&count, 2, Duration::from_secs(4)), |_| {});
    assert_eq!(got.await, Ok(1));
    settle().await;
    assert_eq!(cache.fresh(), Some(2));
    // Short ones with half their lifetime left.
    tokio::time::advance(Duration::from_millis(1900)).await;
    assert_eq!(cache.fresh(), Some(2));
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(cache.fresh(), None);
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_refresh_keeps_valid_credentials_and_pauses_before_the_next() {
    let cache = Cache::default();
    let count = Arc::new(AtomicUsize::new(0));
    let got = cache.get(later(), gives(&count, 7, Duration::from_secs(20)), |_| {});
    assert_eq!(got.await, Ok(7));
    tokio::time::advance(Duration::from_secs(11)).await;
    // Due; the refresh fails in the background, and says so.
    let (told, kept) = tokio::sync::oneshot::channel();
    let got = cache.get(later(), fails(&count), move |e| {
        told.send(e).ok();
    });
    assert_eq!(got.await, Ok(7));
    assert_eq!(kept.await, Ok("down"));
    // No new try for five seconds; then one.
    let got = cache.get(later(), fails(&count), |_| {});
    assert_eq!(got.await, Ok(7));
    settle().await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    tokio::time::advance(Duration::from_secs(5)).await;
    let got = cache.get(later(), gives(&count, 8, Duration::from_secs(20)), |_| {});
    assert_eq!(got.await, Ok(7));
    settle().await;
    assert_eq!(cache.fresh(), Some(8));
}

#[tokio::test(start_paused = true)]
async fn with_nothing_valid_a_failure_is_shared_and_not_asked_again_for_five_seconds() {
    let cache = Cache::default();
    let count = Arc::new(AtomicUsize::new(0));
    assert_eq!(cache.get(later(), fails(&count), |_| {}).await, Err("down"));
    assert_eq!(cache.get(later(), fails(&count), |_| {}).await, Err("down"));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_secs(5)).await;
    let got = cache.get(later(), gives(&count, 3, Duration::from_secs(60)), |_| {});
    assert_eq!(got.await, Ok(3));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn calls_waiting_for_a_fetch_share_its_outcome() {
    for outcome in [Ok((1u32, Duration::from_secs(3600))), Err("down")] {
        let cache = Arc::new(Cache::default());
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let cache = cache.clone();
            async move {
                let fetch = move |_| async move {
                    wait.await.ok();
                    outcome
                };
                cache.get(later(), fetch, |_| {}).await
            }
        });
        settle().await;
        let asked = Arc::new(AtomicUsize::new(0));
        let second = tokio::spawn({
            let (cache, asked) = (cache.clone(), asked.clone());
            async move { cache.get(later(), fails(&asked), |_| {}).await }
        });
        settle().await;
        release.send(()).ok();
        let expected = outcome.map(|(value, _)| value);
        assert_eq!(first.await.unwrap(), expected);
        assert_eq!(second.await.unwrap(), expected);
        assert_eq!(
            asked.load(Ordering::SeqCst),
            0,
            "the second call fetched nothing"
        );
    }
}
