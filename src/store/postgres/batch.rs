//! Group commit: a task takes every request waiting at the moment and writes them as one
//! statement, one commit for all. Appends (`writer.rs`) and creates (`create.rs`) each have
//! such a task.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::Shared;

/// Requests written together at most.
const MAX_BATCH: usize = 256;

/// Statements in flight at most. One: what arrives while a statement runs waits for the
/// next, which takes it all. More in flight would split the same requests over more
/// statements and commits, and when the database is what limits, that costs more than the
/// wait (measured in BENCHMARKS.md, "The PostgreSQL store").
const IN_FLIGHT: usize = 1;

/// A request written in batches.
pub(super) trait Batched: Send + Sized + 'static {
    /// Requests with one key are never in one statement, nor in two in flight at once: an
    /// execution's row is updated once per statement, in order; a key is claimed by one.
    type Key: Eq + Hash + Send;

    fn key(&self) -> Self::Key;

    /// Writes `batch` and answers each request.
    fn write(shared: &Shared, batch: Vec<Self>) -> impl Future<Output = ()> + Send;
}

/// Takes the requests as they come and writes them in batches until the senders are gone
/// and every request is answered.
pub(super) async fn run<R: Batched>(shared: Arc<Shared>, mut requests: mpsc::UnboundedReceiver<R>) {
    let mut waiting: VecDeque<R> = VecDeque::new();
    let mut writing: HashSet<R::Key> = HashSet::new();
    let mut flying = FuturesUnordered::new();
    let mut open = true;
    while open || !flying.is_empty() || !waiting.is_empty() {
        tokio::select! {
            Some(written) = flying.next(), if !flying.is_empty() => {
                for key in written {
                    writing.remove(&key);
                }
            }
            request = requests.recv(), if open && flying.len() < IN_FLIGHT => match request {
                Some(request) => waiting.push_back(request),
                None => open = false,
            },
            else => {}
        }
        while let Ok(request) = requests.try_recv() {
            waiting.push_back(request);
        }
        while flying.len() < IN_FLIGHT {
            let mut batch = Vec::new();
            let mut keys = Vec::new();
            let mut rest = VecDeque::with_capacity(waiting.len());
            for request in waiting.drain(..) {
                if batch.len() < MAX_BATCH && !writing.contains(&request.key()) {
                    writing.insert(request.key());
                    keys.push(request.key());
                    batch.push(request);
                } else {
                    rest.push_back(request);
                }
            }
            waiting = rest;
            if batch.is_empty() {
                break;
            }
            let shared = &shared;
            flying.push(async move {
                R::write(shared, batch).await;
                keys
            });
        }
    }
}
