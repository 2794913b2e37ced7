//! A journal that fails: what readers saw stays what the journal holds. Nothing is appended
//! after the failure, not even in memory: a running execution stays at its last durable
//! event, its readers are told the store is unavailable, and the next start ends it there,
//! so no reader ever sees two different events at one sequence.

use super::*;
use crate::store::{Follower, IoAt, IoOp};

async fn next_change(follower: &mut Follower) -> Result<(), crate::store::Closed> {
    tokio::time::timeout(Duration::from_secs(10), follower.changes().changed())
        .await
        .expect("a change or the close")
}

#[tokio::test]
async fn a_failed_journal_ends_nothing_and_the_restart_ends_it_after_what_was_seen() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let done = create(&store, None).await;
    succeed(&store, done, 1).await;
    let id = create(&store, Some(("running", 1))).await;
    store
        .append_all(id, vec![routing(), attempt_started(1), text(1, "half ")])
        .await
        .unwrap();
    let mut follower = store.follow(id).await.unwrap();
    follower.changes().mark_seen();
    let seen = follower.read(0, usize::MAX).await.unwrap();
    assert_eq!(seen.len(), 4);

    // The disk fails: the next append is refused as unavailable, with the failure that
    // poisoned the journal, and nothing is appended.
    let failure = WriteFailure::Io(IoAt::new(
        IoOp::Sync,
        segments(dir.path()).pop().unwrap(),
        &std::io::Error::from_raw_os_error(5),
    ));
    store.writer.poison(failure.clone());
    let refused = store.append(id, text(1, "more")).await.unwrap_err();
    let unavailable = StoreError::Unavailable(Unavailable::Failed(failure));
    assert_eq!(refused, unavailable);
    assert!(store.failed());
    assert_eq!(next_change(&mut follower).await, Err(crate::store::Closed));
    assert!(
        follower.changes().failed(),
        "the reader hears the store failed"
    );
    assert_eq!(
        follower.read(0, usize::MAX).await.unwrap(),
        seen,
        "nothing was added"
    );
    // A running execution has no state to tell until the restart; an ended one reads on.
    assert_eq!(store.get(id).await, Err(unavailable.clone()));
    assert_eq!(
        store.get(done).await.unwrap().state,
        ExecutionState::Succeeded
    );
    let create_refused = store.create(new_execution(None)).await.unwrap_err();
    assert_eq!(create_refused, unavailable);
    // A reader that comes later reads what is durable, then hears the same.
    let mut late = store.follow(id).await.unwrap();
    assert_eq!(late.read(0, usize::MAX).await.unwrap(), seen);
    assert_eq!(next_change(&mut late).await, Err(crate::store::Closed));
    assert!(late.changes().failed());
    store.close();
    drop((store, follower, late));

    // The restart ends it after the last event anyone saw, never instead of one.
    let (store, opened) = open(dir.path(), vec![key(1)]).unwrap();
    assert_eq!(opened.interrupted, 1);
    let (view, events) = everything(&store, id).await;
    assert_eq!(events[..seen.len()], seen[..]);
    assert_eq!(view.error.unwrap().code, ErrorCode::OutcomeUnknown);
    assert_eq!(
        events.len(),
        seen.len() + 2,
        "the attempt's failure, then the execution's"
    );
}

#[tokio::test]
async fn a_closed_store_refuses_writes_as_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_ok(dir.path());
    let id = create(&store, None).await;
    store.close();
    let closed = StoreError::Unavailable(Unavailable::Closed);
    assert_eq!(store.append(id, routing()).await.unwrap_err(), closed);
    assert_eq!(store.create(new_execution(None)).await.unwrap_err(), closed);
    assert_eq!(
        closed.to_string(),
        "event store unavailable: the event store is closed"
    );
}
