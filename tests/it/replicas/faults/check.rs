//! What the store promises after a fault, checked from outside: the database as the test reads
//! it, what each caller received, and what the provider was sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use model_runtime::pb;
use tokio::task::JoinHandle;
use tonic::Status;

use super::*;

/// The store's tables, read straight from the database.
pub(super) struct Db {
    client: tokio_postgres::Client,
    schema: String,
}

impl Db {
    pub(super) async fn connect(url: &str, schema: &str) -> Self {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("the test reaches its database");
        tokio::spawn(connection);
        Self {
            client,
            schema: schema.to_owned(),
        }
    }

    fn at(&self, sql: &str) -> String {
        sql.replace("{s}", &format!("\"{}\"", self.schema))
    }

    /// Every execution: its id (as the API writes it), idempotency key, state and whether it
    /// ended.
    pub(super) async fn executions(&self) -> Vec<(String, Option<String>, i16, bool)> {
        let rows = self
            .client
            .query(
                &self.at(
                    "SELECT 'ex_' || replace(id::text, '-', ''), idempotency_key, state, \
                     ended_at IS NOT NULL \
                     FROM {s}.executions WHERE gone_at IS NULL",
                ),
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect()
    }

    /// How many executions have not ended.
    pub(super) async fn unfinished(&self) -> i64 {
        self.client
            .query_one(
                &self.at("SELECT count(*) FROM {s}.executions WHERE ended_at IS NULL"),
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// Waits until no execution is unfinished: how long that took. Fails the test after
    /// `limit`, naming what was left.
    pub(super) async fn until_all_ended(&self, limit: Duration) -> Duration {
        let began = Instant::now();
        loop {
            if self.unfinished().await == 0 {
                return began.elapsed();
            }
            if began.elapsed() > limit {
                let left: Vec<_> = self
                    .executions()
                    .await
                    .into_iter()
                    .filter(|e| !e.3)
                    .collect();
                panic!(
                    "{} executions still unfinished {limit:?} on: {:?}",
                    left.len(),
                    &left[..left.len().min(10)]
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (within [`LONG`]) until a replica's lease has lapsed by the database's clock.
    pub(super) async fn until_lapsed(&self) {
        tokio::time::timeout(LONG, async {
            loop {
                let lapsed: i64 = self
                    .client
                    .query_one(
                        &self.at("SELECT count(*) FROM {s}.replicas WHERE lease_until < now()"),
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if lapsed > 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("a lease lapses");
    }

    /// The replicas registered now.
    pub(super) async fn replicas(&self) -> usize {
        let count: i64 = self
            .client
            .query_one(&self.at("SELECT count(*) FROM {s}.replicas"), &[])
            .await
            .unwrap()
            .get(0);
        usize::try_from(count).unwrap()
    }
}

/// What one caller received: its events, and the error its stream ended with (or its call).
#[derive(Debug, Default, Clone)]
pub(super) struct Call {
    pub(super) events: Vec<pb::ExecutionEvent>,
    pub(super) error: Option<Status>,
}

/// Callers of `Execute`, each recording what it receives, by its prompt.
#[derive(Default, Clone)]
pub(super) struct Callers(Arc<Mutex<BTreeMap<String, Call>>>);

impl Callers {
    /// Starts a caller of `Execute` on `replica` for each of `prompts`, under an idempotency
    /// key of the prompt's own text, so a caller's execution can be found by its key.
    pub(super) fn start(
        &self,
        replica: &Replica,
        ability: &str,
        prompts: &[String],
    ) -> Vec<JoinHandle<()>> {
        self.start_keyed(replica, ability, prompts, true)
    }

    /// The same without idempotency keys: a create the replica may send from its caller's
    /// thread.
    pub(super) fn start_without_keys(
        &self,
        replica: &Replica,
        ability: &str,
        prompts: &[String],
    ) -> Vec<JoinHandle<()>> {
        self.start_keyed(replica, ability, prompts, false)
    }

    fn start_keyed(
        &self,
        replica: &Replica,
        ability: &str,
        prompts: &[String],
        keyed: bool,
    ) -> Vec<JoinHandle<()>> {
        prompts
            .iter()
            .map(|prompt| {
                let (calls, mut client, prompt) =
                    (self.0.clone(), replica.client.clone(), prompt.clone());
                let request = pb::ExecuteRequest {
                    idempotency_key: if keyed { prompt.clone() } else { String::new() },
                    ..ask(ability, &prompt)
                };
                calls
                    .lock()
                    .unwrap()
                    .insert(prompt.clone(), Call::default());
                tokio::spawn(async move {
                    let record = |f: &mut dyn FnMut(&mut Call)| {
                        f(calls.lock().unwrap().get_mut(&prompt).unwrap());
                    };
                    let mut stream = match client.execute(request).await {
                        Ok(stream) => stream.into_inner(),
                        Err(status) => return record(&mut |c| c.error = Some(status.clone())),
                    };
                    while let Some(item) = stream.next().await {
                        match item {
                            Ok(event) => record(&mut |c| c.events.push(event.clone())),
                            Err(status) => return record(&mut |c| c.error = Some(status.clone())),
                        }
                    }
                })
            })
            .collect()
    }

    /// Waits (within [`LONG`]) until every caller has received `n` text deltas.
    pub(super) async fn until_deltas(&self, n: usize) {
        tokio::time::timeout(LONG, async {
            while self
                .0
                .lock()
                .unwrap()
                .values()
                .any(|c| deltas(&c.events) < n)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("not every caller received {n} deltas: {:?}", self.summary()));
    }

    /// Each caller's prompt, events received and error, for a failure message.
    pub(super) fn summary(&self) -> Vec<(String, usize, Option<String>)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(p, c)| {
                (
                    p.clone(),
                    c.events.len(),
                    c.error.as_ref().map(|s| s.message().to_owned()),
                )
            })
            .collect()
    }

    pub(super) fn calls(&self) -> BTreeMap<String, Call> {
        self.0.lock().unwrap().clone()
    }
}

/// What a test expects beyond the invariants.
#[derive(Default)]
pub(super) struct Expect {
    /// Prompts whose executions ran on a healthy replica: they must complete.
    pub(super) completed: Vec<String>,
    /// Whether each caller must have received its whole execution, error-free.
    pub(super) callers_whole: bool,
}

/// Holds the store to its promises once every execution has ended (within `limit`): read on
/// `reader`, against what `callers` received and `upstream` was sent (if it is the provider).
pub(super) async fn holds(
    db: &Db,
    reader: &Replica,
    callers: &Callers,
    upstream: Option<&Upstream>,
    limit: Duration,
    expect: &Expect,
) {
    let took = db.until_all_ended(limit).await;
    eprintln!("every execution ended {took:?} after the check began");
    let mut stored = BTreeMap::new();
    let mut by_key = BTreeMap::new();
    for (id, key, _, _) in db.executions().await {
        let events = watch_all(reader.client.clone(), &id, 0).await;
        assert_complete_sequence(&events);
        if let Some(key) = key {
            by_key.insert(key, id.clone());
        }
        stored.insert(id, events);
    }
    for (prompt, call) in callers.calls() {
        if expect.callers_whole {
            assert!(
                call.error.is_none(),
                "{prompt}: the caller's stream ended with {:?} after {:?}",
                call.error,
                types(&call.events)
            );
        }
        let Some(first) = call.events.first() else {
            continue;
        };
        let events = &stored[&first.execution_id];
        assert!(
            call.events.len() <= events.len(),
            "{prompt}: the caller received {} events, the store holds {}",
            call.events.len(),
            events.len()
        );
        assert_eq!(
            call.events[..],
            events[..call.events.len()],
            "{prompt}: what the caller received vs the store, event by event"
        );
        if expect.callers_whole {
            assert_eq!(
                call.events.len(),
                events.len(),
                "{prompt}: the caller's stream is whole"
            );
        }
    }
    if let Some(upstream) = upstream {
        let requests = upstream.requests();
        for (key, id) in &by_key {
            let quoted = format!("\"{key}\"");
            let sent = requests
                .iter()
                .filter(|r| String::from_utf8_lossy(&r.body).contains(&quoted))
                .count();
            let began = stored[id]
                .iter()
                .any(|e| e.r#type == "route.attempt.started");
            assert_eq!(
                sent,
                usize::from(began),
                "{key}: requests sent to the provider (an attempt began: {began})"
            );
        }
    }
    for prompt in &expect.completed {
        let id = by_key
            .get(prompt)
            .unwrap_or_else(|| panic!("{prompt} has no execution"));
        let last = stored[id].last().unwrap();
        assert_eq!(
            last.r#type, "execution.completed",
            "{prompt}, on a healthy replica, ended {:?}",
            last.payload
        );
    }
}

/// Prompts `{name}-0` to `{name}-{n-1}`.
pub(super) fn prompts(name: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{name}-{i}")).collect()
}
