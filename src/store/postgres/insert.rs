//! A new execution's row and first event, and the one statement that inserts them: for a
//! batch of creates (`create.rs`) or a create that made room first (`capacity.rs`), fenced by
//! this replica's lease and registration; and what a statement that gave no answer says of
//! whether it committed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::rows::{self, EVENT_OVERHEAD};
use super::{PgError, Shared, backoff, uuid};
use crate::execution::Event;
use crate::store::{NewExecution, StoreError};

/// A new execution's row, and its first event's.
pub(super) struct NewRow {
    pub(super) id: uuid::Uuid,
    /// The registration the create was asked under: the row is written under that one or
    /// not at all.
    pub(super) registration: uuid::Uuid,
    pub(super) key: Option<String>,
    fingerprint: Option<Vec<u8>>,
    labels: String,
    /// What its first event holds (counted as the row's bytes), and its input.
    pub(super) bytes: i64,
    pub(super) input: i64,
    time: i64,
    payload: Vec<u8>,
    /// Whether a statement carried it: its id may be in the database since.
    sent: AtomicBool,
}

/// A row without an idempotency key that no statement carried before cannot conflict: its
/// id is new. It takes a plain insert (`plain`); should it conflict after all, the statement
/// is sent again with every row guarded ([`insert`]). Every other row takes PostgreSQL's
/// speculative insertion (`guarded`, `ON CONFLICT`), which checks the unique indexes first and
/// writes a second WAL record to confirm. The plain insert takes about a seventh off the
/// statement's executor time (BENCHMARKS.md, the twenty-first session's section).
const INSERT: &str = "/* model-runtime: create */
WITH lease AS (
    SELECT 1 FROM replicas WHERE id = $1 AND epoch = $2 AND lease_until > now()
), new AS (
    SELECT n.* FROM unnest($3::uuid[], $4::text[], $5::bytea[], $6::text[], $7::int8[],
                           $8::int8[], $11::bool[])
        AS n(id, key, fingerprint, labels, bytes, input, guarded)
    WHERE EXISTS (SELECT 1 FROM lease)
), plain AS (
    INSERT INTO executions (id, idempotency_key, fingerprint, labels, owner, owner_epoch,
        state, committed, stopping, last_sequence, bytes, input_bytes)
    SELECT n.id, n.key, n.fingerprint, n.labels, $1, $2, 0, false, false, 1, n.bytes, n.input
    FROM new n WHERE NOT n.guarded
    RETURNING id
), guarded AS (
    INSERT INTO executions (id, idempotency_key, fingerprint, labels, owner, owner_epoch,
        state, committed, stopping, last_sequence, bytes, input_bytes)
    SELECT n.id, n.key, n.fingerprint, n.labels, $1, $2, 0, false, false, 1, n.bytes, n.input
    FROM new n WHERE n.guarded
    -- The key's execution, or this very row: a statement whose answer was lost may have
    -- committed after the look-up that found it had not.
    ON CONFLICT DO NOTHING
    RETURNING id
), ins AS (
    SELECT id FROM plain UNION ALL SELECT id FROM guarded
), first AS (
    INSERT INTO events (execution_id, sequence, time, state, payload)
    SELECT f.id, 1, f.time, 0, f.payload
    FROM unnest($3::uuid[], $9::int8[], $10::bytea[]) AS f(id, time, payload)
    JOIN ins ON ins.id = f.id
)
SELECT id FROM ins
";

/// Inserts `rows` with `client` (in its transaction, if it is one): the ids inserted. A row
/// whose idempotency key another execution holds is not, nor one already there, nor any when
/// this replica's lease has lapsed or the row was asked for under a former registration. The
/// rows' keys are distinct.
pub(super) async fn insert<C: GenericClient + Sync>(
    client: &C,
    shared: &Shared,
    rows: &[&NewRow],
    within: Within,
) -> Result<HashSet<uuid::Uuid>, PgError> {
    let (me, epoch) = shared.replica.identity();
    let rows: Vec<&NewRow> = rows
        .iter()
        .copied()
        .filter(|r| r.registration == me)
        .collect();
    if rows.is_empty() {
        return Ok(HashSet::new());
    }
    let column = |f: &dyn Fn(&NewRow) -> i64| rows.iter().map(|r| f(r)).collect::<Vec<_>>();
    let (bytes, input, time) = (
        column(&|r| r.bytes),
        column(&|r| r.input),
        column(&|r| r.time),
    );
    let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.id).collect();
    let keys: Vec<Option<&str>> = rows.iter().map(|r| r.key.as_deref()).collect();
    let fingerprints: Vec<Option<&[u8]>> = rows.iter().map(|r| r.fingerprint.as_deref()).collect();
    let labels: Vec<&str> = rows.iter().map(|r| r.labels.as_str()).collect();
    let payloads: Vec<&[u8]> = rows.iter().map(|r| r.payload.as_slice()).collect();
    let mut guarded: Vec<bool> = (rows.iter())
        .map(|r| r.mark_sent() || within == Within::Transaction)
        .collect();
    let statement = client.prepare_cached(INSERT).await?;
    loop {
        let inserted = client
            .query(
                &statement,
                &[
                    &me,
                    &epoch,
                    &ids,
                    &keys,
                    &fingerprints,
                    &labels,
                    &bytes,
                    &input,
                    &time,
                    &payloads,
                    &guarded,
                ],
            )
            .await;
        match inserted {
            Ok(inserted) => return inserted.iter().map(|row| Ok(row.try_get(0)?)).collect(),
            // A plain row's id was there (a caller asked for one id twice): nothing of the
            // statement committed, so it is sent again with every row guarded.
            Err(error) if taken_id(&error) && guarded.contains(&false) => {
                tracing::info!(
                    creates = rows.len(),
                    "a new execution's id was in the store already; its create is sent again"
                );
                guarded.fill(true);
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Where an insert runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Within {
    /// A statement of its own: a conflict rolls back only it, and it is sent again.
    Alone,
    /// A transaction with other statements: a conflict would abort the transaction, so
    /// every row is guarded.
    Transaction,
}

/// Whether `error` says an execution's id was taken: a plain row's conflict.
fn taken_id(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && error.as_db_error().and_then(|e| e.constraint()) == Some("executions_pkey")
}

/// Why a create's statement gave no answer.
#[derive(Debug, Clone)]
pub(super) enum Unanswered {
    /// The database did not answer, or the answer was lost: it may have committed.
    Unsure,
    /// It failed, and committed nothing.
    Failed(StoreError),
}

impl Unanswered {
    /// What a failed statement's error says of whether it committed.
    pub(super) fn of(error: PgError) -> Self {
        if error.transient() {
            Self::Unsure
        } else {
            Self::Failed(error.into_store())
        }
    }
}

impl NewRow {
    /// Marks it carried by the statement being made; whether that statement must allow for
    /// a conflict: it has an idempotency key, or a statement carried it before.
    fn mark_sent(&self) -> bool {
        let sent = self.sent.swap(true, Ordering::Relaxed);
        self.key.is_some() || sent
    }

    /// The row of `new`, whose first event is `first`, asked for under `registration`.
    pub(super) fn of(new: &NewExecution, first: &Event, registration: uuid::Uuid) -> Self {
        let payload = rows::payload_bytes(&first.payload);
        Self {
            id: uuid(new.id),
            registration,
            key: new.idempotency.as_ref().map(|i| i.key.clone()),
            fingerprint: new
                .idempotency
                .as_ref()
                .map(|i| i.fingerprint.0.to_le_bytes().to_vec()),
            labels: rows::labels_text(&new.labels),
            bytes: (payload.len() + EVENT_OVERHEAD) as i64,
            input: i64::try_from(new.input_bytes).unwrap_or(i64::MAX),
            time: rows::micros(first.time),
            payload,
            sent: AtomicBool::new(false),
        }
    }
}

const LANDED: &str = "/* model-runtime: landed */ SELECT 1 FROM executions WHERE id = $1";

/// Whether the execution `id` is in the database, asked until it answers while this
/// replica's lease is current: what a create whose answer was lost did.
pub(super) async fn landed(shared: &Shared, id: uuid::Uuid) -> Result<bool, StoreError> {
    let mut tries = 0u32;
    loop {
        let found = shared
            .on_connection(async |client| Ok(client.query_opt(LANDED, &[&id]).await?))
            .await;
        match found {
            Ok(found) => return Ok(found.is_some()),
            Err(error) if error.transient() && shared.replica.current() => {
                tries += 1;
                tokio::time::sleep(backoff(tries)).await;
            }
            Err(error) => return Err(error.into_store()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::NewRow;
    use crate::execution::{Event, ExecutionState};
    use crate::store::conformance::new_execution;

    fn row(key: Option<(&str, u128)>) -> NewRow {
        let new = new_execution(key);
        let first = Event {
            sequence: 1,
            time: SystemTime::now(),
            state: ExecutionState::Accepted,
            payload: new.accepted.clone(),
        };
        NewRow::of(&new, &first, uuid::Uuid::nil())
    }

    /// A row without a key takes a plain insert in its first statement only: any later one
    /// may find it committed. A row with a key is always guarded.
    #[test]
    fn only_a_row_without_a_key_in_its_first_statement_is_plain() {
        let unkeyed = row(None);
        assert!(!unkeyed.mark_sent(), "its first statement");
        assert!(unkeyed.mark_sent(), "its second statement");
        assert!(unkeyed.mark_sent(), "its third statement");
        let keyed = row(Some(("key", 7)));
        assert!(keyed.mark_sent(), "its first statement");
        assert!(keyed.mark_sent(), "its second statement");
    }
}
