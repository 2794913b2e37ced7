//! An append's events in rows of runs, usage facts among them: read back on another replica
//! as the owner handed them out, events and usage order alike.

use std::time::Duration;

use tokio::time::Instant;

use super::{at, created, every_event, pair, woken_to};
use crate::execution::EventPayload;
use crate::execution::fixtures::{attempt_started, routing, text, usage};
use crate::store::postgres::PostgresStore;
use crate::store::{EventStore, StoreError, UsageEntry};

/// One append's events share rows (runs of `MAX_RUN` at most, usage facts among them; its last
/// event, after three full runs, a row of its own); another replica reads them back one by one
/// from any cursor, at any limit, and the facts in the usage order, at the positions the owner
/// handed out.
#[tokio::test]
async fn an_appends_events_read_back_from_any_cursor() {
    let Some((a, b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let id = created(&a, None).await;
    // Following from before the append: the owner's follower hands out the events as the
    // append answered them, not as the rows read back.
    let owners = a.follow(id).await.unwrap();
    let mut payloads = vec![routing(), attempt_started(1)];
    payloads.extend((0..70).map(|i| text(1, &format!("w{i} "))));
    payloads.extend([usage(7), usage(8)]);
    payloads.extend((0..117).map(|i| text(1, &format!("v{i} "))));
    payloads.push(usage(9));
    payloads.push(text(1, "last"));
    let last = a.append_all(id, payloads).await.unwrap();
    assert_eq!(last, 194);
    let all = owners.read(0, usize::MAX).await.unwrap();
    assert_eq!(all.len(), 194);
    assert_eq!(
        every_event(&a, id).await,
        all,
        "the rows read back as handed out"
    );
    // The first event; 2..=65, 66..=129 (with two facts), 130..=193 (with one) and 194 alone.
    let client = a.shared.client().await.unwrap();
    let rows: i64 = client
        .query_one(
            &at(
                &a,
                "SELECT count(*) FROM {s}.events WHERE execution_id = $1",
            ),
            &[&super::super::uuid(id)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 5);
    drop(client);
    let follower = b.follow(id).await.unwrap();
    for after in [
        0u64, 1, 2, 3, 40, 66, 67, 72, 73, 74, 75, 150, 190, 191, 192, 193, 194,
    ] {
        for limit in [1usize, 5, 64, 65, 1000] {
            let read = follower.read(after, limit).await.unwrap();
            let start = usize::try_from(after).unwrap();
            let end = (start + limit).min(all.len());
            assert_eq!(read, all[start..end], "after {after}, limit {limit}");
        }
    }
    assert_eq!(b.get(id).await.unwrap(), a.get(id).await.unwrap());

    let handed_out: Vec<_> = all
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Usage(fact) => Some((e.sequence, fact.clone())),
            _ => None,
        })
        .collect();
    let positions: Vec<u64> = handed_out.iter().map(|(_, f)| f.position).collect();
    assert_eq!(
        positions[1],
        positions[0] + 1,
        "one append's facts are one apart"
    );
    assert!(positions[2] > positions[1]);
    // Every cursor at every limit, the first two facts' cut in the row they share among them.
    for (i, after) in [0].into_iter().chain(positions.iter().copied()).enumerate() {
        for limit in [1, 2, usize::MAX] {
            let read: Vec<_> = usage_on(&b, after, limit, handed_out.len() - i)
                .await
                .into_iter()
                .map(|entry| (entry.sequence, entry.fact))
                .collect();
            let end = (i + limit.min(handed_out.len())).min(handed_out.len());
            assert_eq!(read, handed_out[i..end], "after {after}, limit {limit}");
        }
    }
}

/// Up to `limit` facts after `after` on `store`, read again until at least `expected` (or
/// `limit`) are there: a replica that kept none of them reads only below the oldest
/// transaction still running on the server, which other tests' may hold back for a while.
async fn usage_on(
    store: &PostgresStore,
    after: u64,
    limit: usize,
    expected: usize,
) -> Vec<UsageEntry> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let facts = super::read_usage(store, after, limit).await;
        if facts.len() >= expected.min(limit) || Instant::now() > deadline {
            return facts;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An append of more usage facts than a statement can number for each of its appends is
/// refused, naming the bound, and stores nothing; one of as many is kept, its facts one apart.
#[tokio::test]
async fn an_append_of_more_facts_than_a_statement_numbers_is_refused() {
    let Some((a, _b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let most = crate::store::postgres::writer::MAX_FACTS;
    let id = created(&a, None).await;
    a.append_all(id, vec![routing(), attempt_started(1)])
        .await
        .unwrap();
    let refused = a
        .append_all(id, vec![usage(1); most + 1])
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::Backend(message) if message.contains(&format!("({most})"))),
        "refused for good, naming the bound: {refused:?}"
    );
    assert_eq!(every_event(&a, id).await.len(), 3, "nothing stored");
    let last = a.append_all(id, vec![usage(1); most]).await.unwrap();
    assert_eq!(last, 3 + most as u64);
    let positions: Vec<u64> = every_event(&a, id)
        .await
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Usage(fact) => Some(fact.position),
            _ => None,
        })
        .collect();
    assert_eq!(positions.len(), most);
    assert!(positions.windows(2).all(|w| w[1] == w[0] + 1));
}

/// Another replica's usage readers are woken by the owner's append that keeps a fact,
/// through its notification (the poll is a minute away), and not by one that keeps none.
#[tokio::test]
async fn another_replicas_usage_readers_wake_on_an_append_of_facts_alone() {
    let Some((a, b)) = pair(Duration::from_secs(60)).await else {
        return;
    };
    let id = created(&a, None).await;
    let mut follower = b.follow(id).await.unwrap();
    let mut readers = b.usage_changes();
    // Heard by `b` (its follower is at the append's end) before the usage readers are looked
    // at: the same notification would have woken both.
    readers.mark_seen();
    let at = a
        .append_all(id, vec![routing(), attempt_started(1), text(1, "a")])
        .await
        .unwrap();
    woken_to(&mut follower, at).await;
    assert!(
        futures_util::FutureExt::now_or_never(readers.changed()).is_none(),
        "an append without facts wakes no usage reader"
    );
    let at = a
        .append_all(id, vec![text(1, "b"), usage(3)])
        .await
        .unwrap();
    woken_to(&mut follower, at).await;
    // Woken by the notification (the poll is a minute away); the wait does not count on the
    // order in which the store's thread wakes followers and usage readers.
    tokio::time::timeout(Duration::from_secs(5), readers.changed())
        .await
        .expect("an append with a fact wakes them")
        .unwrap();
}
