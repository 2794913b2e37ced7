//! What a replica knows of executions: an execution's row as read, and the executions this
//! replica owns and appends to ([`Owned`]): their lifecycle and last sequence (so the
//! writer checks appends against the state machine without the database), and what their
//! readers here may be told without it.

use std::sync::{Arc, Mutex, MutexGuard};

use super::{PgError, rows};
use crate::execution::{Event, ExecutionId, ExecutionState, IdMap, Labels, Lifecycle};

/// An execution's row, as an append or a reader needs it.
#[derive(Debug, Clone)]
pub(in crate::store) struct Row {
    pub(super) owner: uuid::Uuid,
    pub(super) owner_epoch: i64,
    pub(super) lifecycle: Lifecycle,
    pub(super) lifecycle_state: ExecutionState,
    pub(super) last: u64,
    pub(super) labels: Arc<Labels>,
    pub(super) key: Option<String>,
    /// The input's bytes, counted while it runs.
    pub(super) input: i64,
}

impl Row {
    /// From `owner, owner_epoch, state, committed, stopping, last_sequence, labels,
    /// idempotency_key, input_bytes`.
    pub(super) fn of(row: &tokio_postgres::Row) -> Result<Self, PgError> {
        let state = rows::state_of(row.try_get(2)?)?;
        let last: i64 = row.try_get(5)?;
        let labels: &str = row.try_get(6)?;
        Ok(Self {
            owner: row.try_get(0)?,
            owner_epoch: row.try_get(1)?,
            lifecycle: Lifecycle::from_parts(state, row.try_get(3)?, row.try_get(4)?),
            lifecycle_state: state,
            last: last.cast_unsigned(),
            labels: rows::labels_of(labels)?,
            key: row.try_get(7)?,
            input: row.try_get(8)?,
        })
    }
}

/// What this replica knows of the executions it owns and appends to.
#[derive(Debug, Default)]
pub(super) struct Owned(Mutex<IdMap<Held>>);

#[derive(Debug, Clone)]
pub(super) struct Held {
    /// After the appends the writer has taken, stored or still in flight.
    pub(super) lifecycle: Lifecycle,
    pub(super) last: u64,
    /// The last sequence and state the database has: what readers may be told.
    pub(super) stored: (u64, ExecutionState),
    pub(super) input: i64,
    pub(super) labels: Arc<Labels>,
    /// `execution.accepted`, when this replica created the execution: its followers here
    /// read it without the database.
    pub(super) first: Option<Event>,
}

impl Owned {
    pub(super) fn lock(&self) -> MutexGuard<'_, IdMap<Held>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds a new execution this replica created.
    pub(super) fn hold(
        &self,
        id: ExecutionId,
        lifecycle: Lifecycle,
        last: u64,
        input: i64,
        labels: Arc<Labels>,
        first: Option<Event>,
    ) {
        let stored = (last, lifecycle.state().unwrap_or(ExecutionState::Accepted));
        self.lock().insert(
            id,
            Held {
                lifecycle,
                last,
                stored,
                input,
                labels,
                first,
            },
        );
    }

    /// Holds an execution as its row (just read) says it is.
    pub(super) fn hold_row(&self, id: ExecutionId, row: &Row) {
        self.hold(
            id,
            row.lifecycle,
            row.last,
            row.input,
            row.labels.clone(),
            None,
        );
    }

    pub(super) fn forget(&self, id: ExecutionId) {
        self.lock().remove(&id);
    }

    /// Forgets every execution (ownership was lost with the lease).
    pub(super) fn clear(&self) {
        self.lock().clear();
    }

    pub(super) fn held(&self, id: ExecutionId) -> bool {
        self.lock().contains_key(&id)
    }

    /// Whether this replica appended (or is appending) `id`'s events up to `last`: its
    /// followers here hear of them from the append itself, events and all.
    pub(super) fn wrote(&self, id: ExecutionId, last: u64) -> bool {
        self.lock().get(&id).is_some_and(|held| held.last >= last)
    }

    /// What a follower or a driver asks first of an execution this replica holds, known
    /// without the database.
    pub(super) fn peek(&self, id: ExecutionId) -> Option<Peek> {
        let owned = self.lock();
        let held = owned.get(&id)?;
        Some(Peek {
            last: held.stored.0,
            state: held.stored.1,
            labels: held.labels.clone(),
            first: held.first.clone(),
        })
    }

    /// The database has `id`'s events up to `last`, which left it in `state`.
    pub(super) fn stored(&self, id: ExecutionId, last: u64, state: ExecutionState) {
        if let Some(held) = self.lock().get_mut(&id)
            && held.stored.0 < last
        {
            held.stored = (last, state);
        }
    }
}

/// An execution this replica holds, as its readers may see it.
pub(super) struct Peek {
    pub(super) last: u64,
    pub(super) state: ExecutionState,
    pub(super) labels: Arc<Labels>,
    pub(super) first: Option<Event>,
}

/// The executions a driver of this process runs, each with the registration it was created
/// under: from just before their create is sent until their end is stored, or the runtime says
/// their driver stopped without it (`EventStore::abandoned`). An unfinished execution this
/// replica owns that no driver runs under its current registration is ended by the
/// reconciliation (`takeover.rs`); a driver of a former registration (its lease was lost) is
/// fenced: it appends nothing more, whoever takes the old registration over, this replica
/// under its new one included.
#[derive(Debug, Default)]
pub(super) struct Driven(Mutex<IdMap<uuid::Uuid>>);

impl Driven {
    fn lock(&self) -> MutexGuard<'_, IdMap<uuid::Uuid>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `id` is driven here, under registration `registration`.
    pub(super) fn insert(&self, id: ExecutionId, registration: uuid::Uuid) {
        self.lock().insert(id, registration);
    }

    pub(super) fn remove(&self, id: ExecutionId) {
        self.lock().remove(&id);
    }

    /// Whether `id`'s driver runs under a registration other than `current`: a former one.
    pub(super) fn fenced(&self, id: ExecutionId, current: uuid::Uuid) -> bool {
        self.lock().get(&id).is_some_and(|r| *r != current)
    }

    /// Those of `ids` no driver here runs under registration `current`.
    pub(super) fn undriven(
        &self,
        ids: impl IntoIterator<Item = ExecutionId>,
        current: uuid::Uuid,
    ) -> Vec<ExecutionId> {
        let driven = self.lock();
        ids.into_iter()
            .filter(|id| driven.get(id) != Some(&current))
            .collect()
    }
}
