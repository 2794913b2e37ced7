//! The runtime over a store that fails: a failed write turns the runtime unavailable, a
//! create that waits for I/O cannot strand an execution when its caller goes away nor let a
//! cancellation in its window reach the provider, a follower it could not make cannot strand
//! one either, and a subscription the store drops ends a watch with a clear error.

use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::stream;

use super::*;
use crate::execution::{Event, FinishReason};
use crate::provider::{Provider, ProviderCall, ProviderEvent, ProviderStream, plain_stream};

/// Counts the calls it gets; each answers `ok`.
#[derive(Debug)]
struct CountsCalls(Arc<AtomicU32>);

impl Provider for CountsCalls {
    fn call(&self, _call: ProviderCall) -> ProviderStream {
        self.0.fetch_add(1, Ordering::SeqCst);
        plain_stream(stream::iter([
            Ok(ProviderEvent::TextDelta("ok".into())),
            Ok(ProviderEvent::Finished(FinishReason::Stop)),
        ]))
    }
}

async fn all_events(rt: &Runtime, id: ExecutionId) -> Vec<Result<Event, RuntimeError>> {
    let events = rt.watch(id, 0).await.unwrap().collect::<Vec<_>>();
    tokio::time::timeout(Duration::from_secs(30), events)
        .await
        .expect("the execution ends")
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_turns_the_runtime_unavailable_and_new_work_is_refused() {
    // Write 1 creates; write 2, the driver's first append, fails and poisons the store.
    let (rt, store) = with_faults(Faults {
        fail_writes_from: Some(2),
        ..Faults::default()
    });
    assert_eq!(rt.state(), RuntimeState::Ready);
    let view = rt.submit(request("fallback", "hi")).await.unwrap();
    assert_eq!(view.state, ExecutionState::Accepted);
    assert!(store.failed());
    assert_eq!(rt.state(), RuntimeState::Unavailable);
    assert_eq!(rt.metadata().state, RuntimeState::Unavailable);
    let refused = rt.submit(request("fallback", "again")).await.unwrap_err();
    assert!(
        matches!(refused, RuntimeError::Unavailable(NotReady::StorageFailed)),
        "{refused:?}"
    );
    assert_eq!(
        store.created(),
        [view.id],
        "nothing was stored for the refusal"
    );
}

#[tokio::test(start_paused = true)]
async fn a_submission_dropped_while_the_store_creates_is_still_driven_to_its_end() {
    let (rt, store) = with_faults(Faults {
        create_pending_polls: 3,
        ..Faults::default()
    });
    {
        let mut submit = pin!(rt.submit(request("fallback", "hello there")));
        assert!(futures_util::poll!(submit.as_mut()).is_pending());
        // The caller goes away (an RPC cancelled) with the record already stored.
    }
    the_one_created_is_driven_to_its_end(&rt, &store).await;
}

/// [`with_faults`] with provider `a` counting its calls: the runtime, its store, the count.
fn counting(faults: Faults) -> (Runtime, Arc<FaultyStore>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let (builder, store) = faulty(faults);
    let rt = builder
        .provider("a", Arc::new(CountsCalls(calls.clone())))
        .build()
        .unwrap();
    (rt, store, calls)
}

#[tokio::test(start_paused = true)]
async fn a_cancel_between_the_create_and_the_driver_wins() {
    let (rt, store, calls) = counting(Faults {
        create_pending_polls: 3,
        ..Faults::default()
    });
    let mut submit = pin!(rt.submit(request("fallback", "hi")));
    assert!(futures_util::poll!(submit.as_mut()).is_pending());
    // The record exists and no driver is registered yet: the cancellation is stored as the
    // end, with no driver to tell.
    let [id] = store.created()[..] else {
        panic!("one execution created: {:?}", store.created())
    };
    let cancelled = rt.cancel(id, Some("changed my mind".into())).await.unwrap();
    assert_eq!(cancelled.state, ExecutionState::Cancelled);
    // The submission finishes and its driver starts, finds the execution ended, and never
    // calls the provider.
    assert_eq!(submit.await.unwrap().id, id);
    let events = all_events(&rt, id).await;
    let types: Vec<_> = events
        .iter()
        .map(|e| e.as_ref().unwrap().payload.type_name())
        .collect();
    assert_eq!(types, ["execution.accepted", "execution.failed"]);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(rt.get(id).await.unwrap().state, ExecutionState::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn a_driver_that_registers_while_a_cancel_is_being_written_takes_the_cancellation() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (rt, store, calls) = counting(Faults {
        create_pending_polls: 3,
        hold_single_appends: Some(gate.clone()),
        ..Faults::default()
    });
    let mut submit = pin!(rt.submit(request("fallback", "hi")));
    assert!(futures_util::poll!(submit.as_mut()).is_pending());
    let [id] = store.created()[..] else {
        panic!("one execution created: {:?}", store.created())
    };
    // The cancel finds no driver; its write of the end is held back...
    let mut cancel = pin!(rt.cancel(id, Some("changed my mind".into())));
    assert!(futures_util::poll!(cancel.as_mut()).is_pending());
    // ...while the submission finishes and its driver registers and runs.
    assert_eq!(submit.await.unwrap().id, id);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the provider was called");
    gate.add_permits(1);
    let cancelled = cancel.await.unwrap();
    assert_eq!(cancelled.state, ExecutionState::Cancelled);
    let events = all_events(&rt, id).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.as_ref().unwrap().is_terminal())
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_create_still_answers_its_caller() {
    let (rt, _store) = with_faults(Faults {
        create_pending_polls: 3,
        ..Faults::default()
    });
    let view = rt.submit(request("fallback", "hi")).await.unwrap();
    let events = all_events(&rt, view.id).await;
    assert_eq!(
        events.last().unwrap().as_ref().unwrap().payload.type_name(),
        "execution.completed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_subscription_the_store_drops_ends_a_watch_with_not_found() {
    let (rt, _store) = with_faults(Faults {
        drop_subscriptions: true,
        ..Faults::default()
    });
    let view = rt.submit(request("hang", "never")).await.unwrap();
    let events = all_events(&rt, view.id).await;
    let (last, before) = events.split_last().unwrap();
    assert!(before.iter().all(Result::is_ok), "{before:?}");
    assert!(
        matches!(last, Err(RuntimeError::NotFound(id)) if id == &view.id),
        "{last:?}"
    );
    rt.shutdown(Duration::from_millis(10)).await;
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_while_the_store_creates_lets_the_accepted_execution_run() {
    let (rt, store, calls) = counting(Faults {
        create_pending_polls: 3,
        ..Faults::default()
    });
    let keyed = ExecuteRequest {
        idempotency_key: Some("order-7".into()),
        ..request("fallback", "hi")
    };
    let mut submit = pin!(rt.submit(keyed.clone()));
    assert!(futures_util::poll!(submit.as_mut()).is_pending());
    let [id] = store.created()[..] else {
        panic!("one execution created: {:?}", store.created())
    };
    // Shutdown begins while the create waits for its write: the submission got in before
    // it, so it is accepted and drained like any running execution, never stored as a
    // cancellation that its caller is told was refused.
    let mut shutdown = pin!(rt.shutdown(Duration::from_secs(30)));
    assert!(futures_util::poll!(shutdown.as_mut()).is_pending());
    assert_eq!(submit.await.unwrap().id, id);
    shutdown.await;
    assert_eq!(rt.get(id).await.unwrap().state, ExecutionState::Succeeded);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // New work after the shutdown began is refused, and stores nothing.
    let refused = rt.submit(request("fallback", "late")).await.unwrap_err();
    assert!(
        matches!(refused, RuntimeError::Unavailable(NotReady::Stopping)),
        "{refused:?}"
    );
    assert_eq!(store.created(), [id]);
}

/// A store whose reads wait a poll (as a remote store's do) serves every reader as one that
/// answers at once: `Execute`, `Watch` from a cursor, `get`, cancel's wait and the usage
/// export see the same events.
#[tokio::test(start_paused = true)]
async fn reads_that_wait_serve_every_reader_as_ready_ones_do() {
    let (ready, _) = with_faults(Faults::default());
    let (waiting, _) = with_faults(Faults {
        pending_reads: 1,
        ..Faults::default()
    });
    let mut seen = Vec::new();
    for rt in [&ready, &waiting] {
        let events = rt
            .execute(request("fallback", "hello there"))
            .await
            .unwrap();
        let id = events.execution_id();
        let events: Vec<Event> = within(events.map(Result::unwrap).collect()).await;
        let resumed = rt.watch(id, 2).await.unwrap().map(Result::unwrap);
        assert_eq!(within(resumed.collect::<Vec<_>>()).await, events[2..]);
        assert_eq!(rt.get(id).await.unwrap().state, ExecutionState::Succeeded);
        let usage = events
            .iter()
            .filter(|e| matches!(e.payload, EventPayload::Usage(_)))
            .count();
        assert!(usage > 0, "the execution kept usage facts");
        let records = rt.stream_usage(None).take(usage).map(Result::unwrap);
        let records: Vec<_> = within(records.collect()).await;
        assert!(records.iter().all(|r| r.entry.execution_id == id));

        // Cancel waits for the driver through a follower.
        let running = rt.submit(request("hang", "wait")).await.unwrap();
        let cancelled = within(rt.cancel(running.id, None)).await.unwrap();
        assert_eq!(cancelled.state, ExecutionState::Cancelled);
        seen.push(
            events
                .iter()
                .map(|e| e.payload.type_name())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(seen[0], seen[1]);
}

/// An `Execute` whose caller leaves while the store is still making its follower (a remote
/// read) leaves the execution driven to its end.
#[tokio::test(start_paused = true)]
async fn an_execute_dropped_while_the_store_reads_is_still_driven_to_its_end() {
    // Pending past the first poll of `execute`, which polls the follow twice.
    let (rt, store) = with_faults(Faults {
        pending_reads: 3,
        ..Faults::default()
    });
    {
        let mut execute = pin!(rt.execute(request("fallback", "hello there")));
        assert!(futures_util::poll!(execute.as_mut()).is_pending());
    }
    the_one_created_is_driven_to_its_end(&rt, &store).await;
}

/// An `Execute` whose follower the store could not make is refused, and the execution it
/// stored is driven to its end all the same, whether its create and its failed follow
/// answered at once or waited.
#[tokio::test(start_paused = true)]
async fn an_execute_whose_follow_fails_still_drives_what_it_stored() {
    for (create_pending_polls, pending_reads) in [(0, 0), (3, 0), (0, 3), (3, 3)] {
        let (rt, store) = with_faults(Faults {
            fail_follows: 1,
            create_pending_polls,
            pending_reads,
            ..Faults::default()
        });
        let refused = rt
            .execute(request("fallback", "hello there"))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, RuntimeError::Unavailable(NotReady::StorageFailed)),
            "{refused:?}"
        );
        // A failed read does not fail the store.
        assert_eq!(rt.state(), RuntimeState::Ready);
        the_one_created_is_driven_to_its_end(&rt, &store).await;
    }
}

/// `work`, which must end within 30 seconds of (paused) time.
async fn within<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), work)
        .await
        .expect("ends in time")
}

/// With metrics on, an execution's end is counted (from its first event, which the store
/// reads) whether the store's reads answer at once or wait.
#[tokio::test(start_paused = true)]
async fn an_end_is_counted_whether_reads_wait_or_not() {
    let mut ended = Vec::new();
    for pending_reads in [0, 3] {
        let (builder, _) = faulty(Faults {
            pending_reads,
            ..Faults::default()
        });
        let mut config = builder.config.clone();
        config.server.metrics_listen = Some(([127, 0, 0, 1], 0).into());
        let rt = RuntimeBuilder { config, ..builder }.build().unwrap();
        let events = rt
            .execute(request("fallback", "hello there"))
            .await
            .unwrap();
        within(events.collect::<Vec<_>>()).await;
        let text = rt.metrics_text().unwrap();
        let mut counted: Vec<String> = text
            .lines()
            .filter(|l| l.contains("executions_ended") && !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        // The families' lines come in no fixed order.
        counted.sort();
        assert!(counted.iter().any(|l| l.ends_with(" 1")), "{text}");
        ended.push(counted);
    }
    assert_eq!(ended[0], ended[1]);
}

/// `store` created one execution, and `rt` drove it to `execution.completed`.
async fn the_one_created_is_driven_to_its_end(rt: &Runtime, store: &FaultyStore) {
    let [id] = store.created()[..] else {
        panic!("one execution created: {:?}", store.created())
    };
    let events = all_events(rt, id).await;
    let last = events.last().unwrap().as_ref().unwrap();
    assert_eq!(last.payload.type_name(), "execution.completed");
    assert_eq!(rt.get(id).await.unwrap().state, ExecutionState::Succeeded);
}
