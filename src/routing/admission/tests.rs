use std::future::Future;
use std::pin::Pin;

use futures_util::poll;

use super::*;

const SECOND: Duration = Duration::from_secs(1);

fn gate(max: u32, capacity: u32) -> Admission {
    Admission::new(max, [capacity; 3], 2 * SECOND)
}

type Acquiring<'a> = Pin<Box<dyn Future<Output = Result<Permit, AdmissionRejected>> + 'a>>;

/// `gate.acquire(priority)`, polled once so it has taken its place in line.
async fn queued(gate: &Admission, priority: Priority) -> Acquiring<'_> {
    let mut waiter: Acquiring<'_> = Box::pin(gate.acquire(priority));
    assert!(poll!(waiter.as_mut()).is_pending(), "it had to wait");
    waiter
}

/// `waiter`'s permit, if it has one now.
async fn admitted(waiter: &mut Acquiring<'_>) -> Option<Permit> {
    match poll!(waiter.as_mut()) {
        std::task::Poll::Ready(Ok(permit)) => Some(permit),
        _ => None,
    }
}

#[tokio::test]
async fn queues_in_order_and_rejects_when_full() {
    let gate = gate(1, 1);
    let held = gate.acquire(Priority::Standard).await;
    assert!(held.is_ok());
    assert_eq!(gate.in_flight(), 1);

    let waiter = queued(&gate, Priority::Standard).await;
    assert_eq!(gate.queued(), 1);
    assert_eq!(
        gate.acquire(Priority::Standard).await.err(),
        Some(AdmissionRejected::QueueFull {
            capacity: 1,
            priority: Priority::Standard
        })
    );

    drop(held);
    assert!(waiter.await.is_ok());
    assert_eq!(gate.queued(), 0);
    assert_eq!(gate.in_flight(), 0);
}

#[tokio::test]
async fn a_dropped_waiter_leaves_the_queue() {
    let gate = gate(1, 4);
    let _held = gate.acquire(Priority::Standard).await;
    let waiter = queued(&gate, Priority::Batch).await;
    assert_eq!(gate.queued_by_priority().map(|w| w.queued), [0, 0, 1]);
    drop(waiter);
    assert_eq!(gate.queued(), 0);
}

#[tokio::test]
async fn each_class_has_its_own_room() {
    let gate = Admission::new(1, [1, 0, 2], 2 * SECOND);
    let _held = gate.acquire(Priority::Standard).await;
    let _batch = [
        queued(&gate, Priority::Batch).await,
        queued(&gate, Priority::Batch).await,
    ];
    assert!(matches!(
        gate.acquire(Priority::Batch).await,
        Err(AdmissionRejected::QueueFull {
            capacity: 2,
            priority: Priority::Batch
        })
    ));
    assert!(matches!(
        gate.acquire(Priority::Standard).await,
        Err(AdmissionRejected::QueueFull { capacity: 0, .. })
    ));
    let _interactive = queued(&gate, Priority::Interactive).await;
    assert_eq!(gate.queued_by_priority().map(|w| w.queued), [1, 0, 2]);
}

#[tokio::test(start_paused = true)]
async fn higher_classes_first_and_first_come_first_served_within_one() {
    let gate = gate(1, 8);
    let held = gate.acquire(Priority::Standard).await.unwrap();
    let mut batch = queued(&gate, Priority::Batch).await;
    let mut standard_1 = queued(&gate, Priority::Standard).await;
    let mut standard_2 = queued(&gate, Priority::Standard).await;
    let mut interactive = queued(&gate, Priority::Interactive).await;

    drop(held);
    let permit = admitted(&mut interactive).await;
    assert!(permit.is_some(), "the latest, but interactive");
    assert!(admitted(&mut standard_1).await.is_none());
    drop(permit);
    let permit = admitted(&mut standard_1).await;
    assert!(permit.is_some());
    assert!(admitted(&mut standard_2).await.is_none());
    drop(permit);
    let permit = admitted(&mut standard_2).await;
    assert!(permit.is_some());
    assert!(admitted(&mut batch).await.is_none());
    drop(permit);
    assert!(
        admitted(&mut batch).await.is_some(),
        "batch goes last, but it goes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiter_rises_a_class_per_aging_so_batch_is_never_starved() {
    let gate = gate(1, 8);
    let held = gate.acquire(Priority::Interactive).await.unwrap();
    let mut batch = queued(&gate, Priority::Batch).await;
    // Waited one aging: it ranks with standard, below interactive.
    tokio::time::advance(2 * SECOND).await;
    let mut interactive = queued(&gate, Priority::Interactive).await;
    drop(held);
    let permit = admitted(&mut interactive).await;
    assert!(permit.is_some());
    // Two agings: it ranks with a fresh interactive waiter, and it is older.
    tokio::time::advance(2 * SECOND).await;
    let mut newer = queued(&gate, Priority::Interactive).await;
    drop(permit);
    let permit = admitted(&mut batch).await;
    assert!(permit.is_some(), "the older of equal ranks");
    assert!(admitted(&mut newer).await.is_none());
}

#[tokio::test]
async fn a_permit_handed_to_a_waiter_that_leaves_passes_on() {
    let gate = gate(1, 8);
    let held = gate.acquire(Priority::Standard).await.unwrap();
    let first = queued(&gate, Priority::Standard).await;
    let mut second = queued(&gate, Priority::Standard).await;
    // The permit goes to `first`, which is dropped before it takes it.
    drop(held);
    drop(first);
    let permit = admitted(&mut second).await;
    assert!(permit.is_some(), "no permit was lost");
    drop(permit);
    drop(second);
    assert_eq!((gate.in_flight(), gate.queued()), (0, 0));
    assert!(gate.acquire(Priority::Batch).await.is_ok());
}
