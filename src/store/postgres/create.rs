//! Creating executions: a new execution's row and first event, written with every other
//! create waiting at the moment in one statement (`batch.rs`), one commit for all. A create
//! the store's counts say may not fit makes room first, on its own (`capacity.rs`).
//!
//! A create without an idempotency key that the counts admit at once is put on the batch's
//! queue from its caller's thread ([`AtOnce`]); the batch finishes it when it is inserted,
//! and carries it on, on the store's runtime, when it is not. Every other create runs on the
//! store's runtime from its first statement ([`on_its_own`]).
//!
//! A statement whose answer was lost (the connection broke or went silent while it ran) may
//! have committed. Before its caller is answered, each create looks its id up: there, it is
//! the caller's new execution and is driven (nothing was sent to a provider yet, so driving it
//! is safe); not there, it is written again. From before its statement is sent, a create counts
//! as driven here (`Driven`), so the reconciliation never ends one whose answer is on its way;
//! a create that fails stops counting, and whatever of it the database holds is ended by the
//! reconciliation (or, past the lease, by whoever takes the registration over).

use std::future::Future;
use std::sync::{Arc, Weak};

use tokio::sync::oneshot;

use super::batch::Batched;
use super::capacity::{Admission, Reservation, admit, flush, make_room, reserve};
use super::insert::{NewRow, Unanswered, Within, insert, landed};
use super::{PgError, Shared, capacity, on_store, rows};
use crate::execution::{Event, Execution, ExecutionId, Idempotency, Lifecycle};
use crate::store::{Created, Inconsistency, NewExecution, StoreError, StoreFuture, Unavailable};

/// One create on its way to the batch.
pub(super) struct Request {
    row: Arc<NewRow>,
    reply: Reply,
}

/// Who is told what a create's statement did.
enum Reply {
    /// The create's task on the store's runtime, which waits for it ([`batched`]).
    Waiting(oneshot::Sender<Result<bool, Unanswered>>),
    /// No task waits for the statement: a create sent from its caller's thread ([`AtOnce`]),
    /// finished by the batch.
    AtOnce(Box<AtOnce>),
}

impl Request {
    fn answer(self, shared: &Arc<Shared>, written: Result<bool, Unanswered>) {
        match self.reply {
            Reply::Waiting(reply) => {
                let _ = reply.send(written);
            }
            Reply::AtOnce(at_once) => at_once.answer(shared, self.row, written),
        }
    }
}

/// What one statement may hold of each: an idempotency key, or (without one) an id.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum Claim {
    Key(String),
    Id(uuid::Uuid),
}

impl Batched for Request {
    type Key = Claim;

    fn key(&self) -> Claim {
        match &self.row.key {
            Some(key) => Claim::Key(key.clone()),
            None => Claim::Id(self.row.id),
        }
    }

    fn write(shared: &Arc<Shared>, batch: Vec<Self>) -> impl Future<Output = ()> + Send {
        write(shared, batch)
    }
}

/// Inserts a batch and answers each create: inserted or not (its key taken, the lease
/// lapsed), or why the statement gave no answer (told once in the log).
async fn write(shared: &Arc<Shared>, batch: Vec<Request>) {
    let rows: Vec<&NewRow> = batch.iter().map(|r| &*r.row).collect();
    let result = shared
        .on_connection(async |client| insert(client, shared, &rows, Within::Alone).await)
        .await;
    match result {
        Ok(inserted) => {
            for request in batch {
                let written = Ok(inserted.contains(&request.row.id));
                request.answer(shared, written);
            }
            // Once for the statement: what was inserted counts now.
            capacity::ahead(shared);
        }
        Err(error) => {
            tracing::warn!(%error, creates = batch.len(), "a create statement failed");
            let unanswered = Unanswered::of(error);
            for request in batch {
                request.answer(shared, Err(unanswered.clone()));
            }
        }
    }
}

/// Inserts `row` with the creates waiting now: whether it was inserted.
async fn batched(shared: &Shared, row: &Arc<NewRow>) -> Result<bool, Unanswered> {
    let (reply, answer) = oneshot::channel();
    let row = row.clone();
    let closed = || Unanswered::Failed(StoreError::Unavailable(Unavailable::Closed));
    let reply = Reply::Waiting(reply);
    if shared.creator.send(Request { row, reply }).is_err() {
        return Err(closed());
    }
    answer.await.unwrap_or_else(|_| Err(closed()))
}

const KEYED: &str = "/* model-runtime: keyed */ SELECT id, fingerprint FROM executions \
     WHERE idempotency_key = $1 AND gone_at IS NULL";

/// Counts an execution as driven here, under the registration current when its create was
/// asked for, from before its create is sent until the create stored it (then its end, or its
/// driver's stop, takes it off) or failed.
struct Registered<'a> {
    shared: &'a Shared,
    id: ExecutionId,
    registration: uuid::Uuid,
    created: bool,
}

impl<'a> Registered<'a> {
    /// Counts `id` as driven under `registration` (the one its row was asked under).
    fn new(shared: &'a Shared, id: ExecutionId, registration: uuid::Uuid) -> Self {
        shared.driven.insert(id, registration);
        Self::adopt(shared, id, registration)
    }

    /// The registration of a create counted as driven earlier ([`Pledge`]).
    fn adopt(shared: &'a Shared, id: ExecutionId, registration: uuid::Uuid) -> Self {
        Self {
            shared,
            id,
            registration,
            created: false,
        }
    }

    /// Lets the count outlive this borrow of the store: it stays until [adopted](Self::adopt)
    /// again and dropped (or kept). Its registration.
    fn detach(mut self) -> uuid::Uuid {
        self.created = true;
        self.registration
    }

    /// Whether the replica has registered again since: the create may not be driven.
    fn former(&self) -> bool {
        self.shared.replica.id().0 != self.registration
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if !self.created {
            self.shared.driven.remove(self.id);
        }
    }
}

/// A new execution as a create begins it: its first event, the lifecycle after it, and the
/// view of the execution it begins.
struct Begun {
    new: NewExecution,
    first: Event,
    lifecycle: Lifecycle,
    view: Execution,
    /// When (retention's clock) it was asked for.
    now: i64,
}

impl Begun {
    fn of(new: NewExecution, now: i64) -> Result<Self, StoreError> {
        let mut lifecycle = Lifecycle::default();
        let first = Event {
            sequence: 1,
            time: rows::now(),
            state: lifecycle.apply(&new.accepted)?,
            payload: new.accepted.clone(),
        };
        let key = new.idempotency.as_ref().map(|i| i.key.clone());
        let view = Execution::from_accepted(&first, new.id, new.labels.clone(), key)
            .ok_or(StoreError::Inconsistent(Inconsistency::NotAccepted(new.id)))?;
        Ok(Self {
            new,
            first,
            lifecycle,
            view,
            now,
        })
    }

    /// Its row, asked for under `registration`.
    fn row(&self, registration: uuid::Uuid) -> Arc<NewRow> {
        Arc::new(NewRow::of(&self.new, &self.first, registration))
    }

    /// It is stored (with `input` bytes of input): held here from now on.
    fn stored(self, shared: &Shared, input: i64) -> Created {
        let id = self.new.id;
        let labels = self.new.labels;
        (shared.owned).hold(id, self.lifecycle, 1, input, labels, Some(self.first));
        Created::New(self.view)
    }
}

/// Stores a new execution, or finds the one its idempotency key names. A create without a
/// key that the counts admit at once is put on the batch's queue from the caller's thread
/// ([`AtOnce`]); any other runs on the store's runtime ([`on_its_own`]).
pub(super) fn create(
    shared: &Arc<Shared>,
    new: NewExecution,
    now: i64,
) -> StoreFuture<'static, Created> {
    // The refusals `on_store` would give, given here.
    let begun = match shared.usable().and_then(|()| Begun::of(new, now)) {
        Ok(begun) => begun,
        Err(refused) => return StoreFuture::ready(Err(refused)),
    };
    let row = begun.row(shared.replica.id().0);
    if begun.new.idempotency.is_none()
        && let Some(reserved) = reserve(shared, row.bytes + row.input)
    {
        let registered = Registered::new(shared, begun.new.id, row.registration);
        let pledge = Pledge::new(shared, registered, reserved);
        let answer = AtOnce::send(shared, row, pledge, begun);
        return StoreFuture::new(async move {
            (answer.await).unwrap_or(Err(StoreError::Unavailable(Unavailable::Closed)))
        });
    }
    let owned = shared.clone();
    on_store(shared, async move {
        let created = on_its_own(&owned, begun, row).await;
        capacity::ahead(&owned);
        created
    })
}

/// A create on the store's runtime from its first statement on: one with a key, or one the
/// counts did not admit at once ([`create`]).
async fn on_its_own(
    shared: &Shared,
    begun: Begun,
    row: Arc<NewRow>,
) -> Result<Created, StoreError> {
    let registered = Registered::new(shared, begun.new.id, row.registration);
    // What is due leaves first, as it matters to both: a key may be this one's, room may be
    // needed.
    flush(shared).await?;
    carry_on(shared, begun, &row, registered, None).await
}

/// A create from its statements on: written (made room for, when the counts do not admit it)
/// until its row is there or its key names another execution. `given`: what a statement
/// already sent for it did, and the reservation it was admitted under.
async fn carry_on<'a>(
    shared: &'a Shared,
    begun: Begun,
    row: &Arc<NewRow>,
    mut registered: Registered<'a>,
    mut given: Option<(Result<bool, Unanswered>, Reservation<'a>)>,
) -> Result<Created, StoreError> {
    let new = &begun.new;
    let size = row.bytes + row.input;
    let mut lost = 0;
    for _ in 0..3 {
        // Admitted, it counts from now; made room for, it counts once it is written, and
        // the turn is held until then, so the next in turn counts it.
        let (written, admitted, _turn) = match given.take() {
            Some((written, admitted)) => (written, Some(admitted), None),
            None => match admit(shared, size).await {
                Admission::Fits(admitted) => (batched(shared, row).await, Some(admitted), None),
                Admission::Turn(turn) => {
                    (make_room(shared, row, begun.now).await, None, Some(turn))
                }
            },
        };
        let mut inserted = match written {
            Ok(inserted) => inserted,
            Err(Unanswered::Failed(error)) => return Err(error),
            // Whether it committed decides: the row is there, or it is written again.
            Err(Unanswered::Unsure) => {
                lost += 1;
                let there = landed(shared, row.id).await?;
                tracing::info!(
                    execution_id = %new.id,
                    stored = there,
                    "a create's answer was lost; looked it up"
                );
                if !there && new.idempotency.is_none() && !registered.former() {
                    continue;
                }
                there
            }
        };
        // Under the next registration it is not driven: whatever of it the database holds
        // is its former registration's, ended by whoever takes that over.
        if registered.former() {
            return Err(lapsed());
        }
        // Not inserted without a key: the lease lapsed, or a statement whose answer was lost
        // committed after all.
        if !inserted && new.idempotency.is_none() {
            inserted = landed(shared, row.id).await?;
        }
        if !inserted {
            let Some(idempotency) = &new.idempotency else {
                return Err(lapsed());
            };
            match keyed(shared, idempotency, new.id).await? {
                // Gone between the two statements (expired, evicted): try again.
                Keyed::Gone => continue,
                Keyed::Same(id) => return Ok(Created::Existing(shared.view(id).await?)),
                Keyed::Conflict(id) => return Err(StoreError::IdempotencyConflict(id)),
                // A statement whose answer was lost committed after all: it is the caller's.
                Keyed::This => {}
            }
        }
        registered.created = true;
        match admitted {
            Some(admitted) => admitted.keep(),
            None => shared.capacity.change(1, size),
        }
        return Ok(begun.stored(shared, row.input));
    }
    if lost > 0 {
        return Err(StoreError::Unavailable(Unavailable::Backend(
            "the event store's database did not answer".into(),
        )));
    }
    Err(StoreError::Unavailable(Unavailable::Backend(
        "the idempotency key's execution kept leaving the store".into(),
    )))
}

/// What a create sent from its caller's thread holds from then on: it counts as driven here
/// and as reserved in the store's counts. Dropped unfinished (the store stopped with it
/// queued), it gives both back.
struct Pledge {
    /// Weak: a request the store's queue holds does not hold the store.
    shared: Weak<Shared>,
    id: ExecutionId,
    registration: uuid::Uuid,
    size: i64,
    open: bool,
}

impl Pledge {
    /// Keeps a create's count as driven here and its reservation.
    fn new(shared: &Arc<Shared>, registered: Registered<'_>, reserved: Reservation<'_>) -> Self {
        Self {
            shared: Arc::downgrade(shared),
            id: registered.id,
            registration: registered.detach(),
            size: reserved.detach(),
            open: true,
        }
    }

    /// Its registration and reserved size, now someone else's to keep or give back.
    fn take(mut self) -> (uuid::Uuid, i64) {
        self.open = false;
        (self.registration, self.size)
    }
}

impl Drop for Pledge {
    fn drop(&mut self) {
        if self.open
            && let Some(shared) = self.shared.upgrade()
        {
            drop(Registered::adopt(&shared, self.id, self.registration));
            drop(Reservation::adopt(&shared, self.size));
        }
    }
}

/// A create sent from its caller's thread, and who waits for it.
struct AtOnce {
    pledge: Pledge,
    begun: Begun,
    reply: oneshot::Sender<Result<Created, StoreError>>,
}

impl AtOnce {
    /// Puts the create of `begun`'s `row` on the batch's queue: its answer. Refused (the store
    /// stopped), the pledge is given back and the answer says so.
    fn send(
        shared: &Shared,
        row: Arc<NewRow>,
        pledge: Pledge,
        begun: Begun,
    ) -> oneshot::Receiver<Result<Created, StoreError>> {
        let (reply, answer) = oneshot::channel();
        let at_once = Self {
            pledge,
            begun,
            reply,
        };
        let reply = Reply::AtOnce(Box::new(at_once));
        let _ = shared.creator.send(Request { row, reply });
        answer
    }

    /// Inserted under the registration it was asked under, it is stored; otherwise it is
    /// carried on, on the store's runtime, from what its statement did.
    fn answer(self, shared: &Arc<Shared>, row: Arc<NewRow>, written: Result<bool, Unanswered>) {
        let Self {
            pledge,
            begun,
            reply,
        } = self;
        if matches!(written, Ok(true)) && shared.replica.id().0 == pledge.registration {
            let (_, size) = pledge.take();
            Reservation::adopt(shared, size).keep();
            let _ = reply.send(Ok(begun.stored(shared, row.input)));
            return;
        }
        let shared = shared.clone();
        shared.handle.clone().spawn(async move {
            // Taken here: a task dropped before it runs (the store stopping) gives it back.
            let (registration, size) = pledge.take();
            let registered = Registered::adopt(&shared, begun.new.id, registration);
            let admitted = Reservation::adopt(&shared, size);
            let given = Some((written, admitted));
            let created = carry_on(&shared, begun, &row, registered, given).await;
            capacity::ahead(&shared);
            let _ = reply.send(created);
        });
    }
}

/// What the key of a create that was not inserted names.
enum Keyed {
    /// Nothing any more.
    Gone,
    /// The create itself (`own`): its statement committed.
    This,
    /// Another execution of the same request.
    Same(ExecutionId),
    /// Another request's execution.
    Conflict(ExecutionId),
}

/// What the key of the create of `own` that was not inserted names.
async fn keyed(
    shared: &Shared,
    idempotency: &Idempotency,
    own: ExecutionId,
) -> Result<Keyed, StoreError> {
    let found = shared
        .on_connection(async |client| Ok(client.query_opt(KEYED, &[&idempotency.key]).await?))
        .await
        .map_err(PgError::into_store)?;
    let Some(found) = found else {
        return Ok(Keyed::Gone);
    };
    let column = |e: tokio_postgres::Error| PgError::from(e).into_store();
    let id: uuid::Uuid = found.try_get(0).map_err(column)?;
    let id = ExecutionId::from_bytes(id.into_bytes());
    if id == own {
        return Ok(Keyed::This);
    }
    let fingerprint: Option<Vec<u8>> = found.try_get(1).map_err(column)?;
    if fingerprint.as_deref() == Some(&idempotency.fingerprint.0.to_le_bytes()[..]) {
        return Ok(Keyed::Same(id));
    }
    Ok(Keyed::Conflict(id))
}

fn lapsed() -> StoreError {
    StoreError::Unavailable(Unavailable::Backend(
        "this replica's lease has lapsed".into(),
    ))
}
