//! Group commit: a task takes every request waiting at the moment and writes them as one
//! statement, one commit for all. Appends (`writer.rs`) and creates (`create.rs`) each have
//! such a task.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::hash::{BuildHasherDefault, Hash};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::Shared;
use crate::execution::FoldHasher;

/// Requests written together at most.
pub(super) const MAX_BATCH: usize = 256;

/// A request written in batches.
pub(super) trait Batched: Send + Sized + 'static {
    /// Requests with one key are never in one statement: an execution's row is updated
    /// once per statement, in order; a key is claimed by one.
    type Key: Eq + Hash + Send;

    fn key(&self) -> Self::Key;

    /// Writes `batch` and answers each request, or hands it on to be asked again.
    fn write(shared: &Arc<Shared>, batch: Vec<Self>) -> impl Future<Output = ()> + Send;
}

/// Takes the requests as they come and writes them in batches, one statement at a time,
/// until the senders are gone and no request is left. One at a time: what arrives
/// while a statement runs waits for the next, which takes it all. More statements in flight
/// would split the same requests over more statements and commits, and when the database is
/// what limits, that costs more than the wait (measured in BENCHMARKS.md, "The PostgreSQL
/// store").
pub(super) async fn run<R: Batched>(shared: Arc<Shared>, mut requests: mpsc::UnboundedReceiver<R>) {
    let mut waiting: VecDeque<R> = VecDeque::new();
    // The keys of the batch being made, kept from one batch to the next so it grows once.
    // It holds at most `MAX_BATCH` of them, so keys chosen to collide (idempotency keys are
    // the callers') cost a request at most that many comparisons: the hash needs no flood
    // resistance.
    let mut keys: HashSet<R::Key, BuildHasherDefault<FoldHasher>> = HashSet::default();
    loop {
        if waiting.is_empty() {
            match requests.recv().await {
                Some(request) => waiting.push_back(request),
                None => return,
            }
        }
        while let Ok(request) = requests.try_recv() {
            waiting.push_back(request);
        }
        keys.clear();
        let mut batch = Vec::new();
        let mut rest = VecDeque::new();
        for request in waiting.drain(..) {
            if batch.len() < MAX_BATCH && keys.insert(request.key()) {
                batch.push(request);
            } else {
                rest.push_back(request);
            }
        }
        waiting = rest;
        R::write(&shared, batch).await;
    }
}
