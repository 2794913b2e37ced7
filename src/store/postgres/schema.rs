//! The store's tables, created and upgraded at start-up by embedded, numbered migrations. Every
//! replica runs them under one advisory lock, so replicas that start at once apply each
//! migration once, and a replica whose binary is older than the schema refuses to start.
//!
//! ```text
//! meta        one row: the schema's version and the usage order's epoch
//! replicas    id, epoch, lease_until: who may append, and until when (the database's clock)
//! executions  one row per execution: its identities, owner, lifecycle, last sequence, bytes,
//!             when it ended and (once it left the store) when it went; a cancel request.
//!             Indexed by those still in the store (in the order they ended, the running
//!             last), the running by owner, and those gone
//! events      (execution_id, sequence): an event's time, state and payload, or (with a
//!             first_sequence) a run of one append's events up to `sequence`, sharing one
//!             time; its last usage fact's position in the usage order (the facts before
//!             it in the row are at the positions just below)
//! ```

use tokio_postgres::Client;

use super::error::{PgError, SchemaError};

/// The migrations, in order: migration `i` brings the schema to version `i + 1`. Each runs in
/// the transaction that records its version. `{s}` is the schema's quoted name.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE {s}.meta (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version integer NOT NULL,
    usage_epoch bigint NOT NULL
);
CREATE TABLE {s}.replicas (
    id uuid PRIMARY KEY,
    epoch bigint NOT NULL,
    lease_until timestamptz NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    host text NOT NULL
);
CREATE TABLE {s}.executions (
    id uuid PRIMARY KEY,
    idempotency_key text UNIQUE,
    fingerprint bytea,
    labels text NOT NULL,
    owner uuid NOT NULL,
    owner_epoch bigint NOT NULL,
    state smallint NOT NULL,
    committed boolean NOT NULL,
    stopping boolean NOT NULL,
    last_sequence bigint NOT NULL,
    bytes bigint NOT NULL,
    input_bytes bigint NOT NULL,
    ended_at bigint,
    gone_at bigint,
    cancel_requested boolean NOT NULL DEFAULT false,
    cancel_reason text
);
CREATE INDEX executions_ended ON {s}.executions (ended_at, id)
    WHERE gone_at IS NULL AND ended_at IS NOT NULL;
CREATE INDEX executions_running ON {s}.executions (owner) WHERE ended_at IS NULL;
CREATE INDEX executions_gone ON {s}.executions (gone_at) WHERE gone_at IS NOT NULL;
CREATE TABLE {s}.events (
    execution_id uuid NOT NULL,
    sequence bigint NOT NULL,
    time bigint NOT NULL,
    state smallint NOT NULL,
    payload bytea NOT NULL,
    usage_position bigint,
    PRIMARY KEY (execution_id, sequence)
);
CREATE INDEX events_usage ON {s}.events (usage_position) WHERE usage_position IS NOT NULL;
",
    r"
ALTER TABLE {s}.events ADD COLUMN first_sequence bigint;
",
    // The executions still in the store: the exact count reads them alone, not the rows
    // that left and linger (a full store's count read the whole table, and its time grew
    // with the linger). Ordered as the ended ones leave. Only columns an append does not
    // change, so an append's update of the row may stay on its page (a HOT update).
    r"
CREATE INDEX executions_live ON {s}.executions (ended_at, id) WHERE gone_at IS NULL;
DROP INDEX {s}.executions_ended;
",
    // Idempotency keys unique among the rows that have one: most executions have none, and
    // a key is freed when its execution leaves, yet every row had an entry in the key's
    // index, written by its create, its end and its leaving.
    r"
CREATE UNIQUE INDEX executions_key ON {s}.executions (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE {s}.executions DROP CONSTRAINT executions_idempotency_key_key;
",
    // The events every execution has (its acceptance and routing plan, each attempt's start
    // and usage facts, its result) are written compact in the events' payloads (the event
    // codec's kinds 5 to 9), which a replica of an earlier release cannot read: the version
    // alone keeps it from starting. Rows written before are read as they are.
    r"
COMMENT ON COLUMN {s}.events.payload IS
    'model-runtime event codec: since version 5 the acceptance, routing plan, attempt starts,
    usage facts and result are compact (kinds 5 to 9)';
",
];

/// The schema version this binary writes.
pub(super) const VERSION: i32 = 5;

/// Creates the schema or brings it to [`VERSION`], under an advisory lock held for the
/// transaction; returns the usage order's epoch.
pub(super) async fn migrate(client: &mut Client, schema: &str) -> Result<u64, PgError> {
    migrate_to(client, schema, VERSION).await
}

/// [`migrate`], to version `to` (an earlier binary's, in the upgrade's test).
pub(super) async fn migrate_to(client: &mut Client, schema: &str, to: i32) -> Result<u64, PgError> {
    let quoted = quote(schema);
    let tx = client.transaction().await?;
    // One lock per schema: replicas starting at once take turns, and each finds the work done.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('model-runtime:migrate:' || $1))",
        &[&schema],
    )
    .await?;
    // Looked up first: `IF NOT EXISTS` would have the server send a notice on every start.
    let schema_exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await?
        .is_some();
    if !schema_exists {
        tx.batch_execute(&format!("CREATE SCHEMA {quoted}")).await?;
    }
    let exists = tx
        .query_opt(
            "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'meta'",
            &[&schema],
        )
        .await?
        .is_some();
    let version: i32 = if exists {
        tx.query_one(&format!("SELECT version FROM {quoted}.meta"), &[])
            .await?
            .try_get(0)?
    } else {
        0
    };
    if version > VERSION {
        return Err(PgError::Schema(SchemaError::Newer {
            schema: schema.to_owned(),
            version,
            known: VERSION,
        }));
    }
    let upto = usize::try_from(to).unwrap_or(0);
    for (at, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .take(upto)
        .skip(version as usize)
    {
        tx.batch_execute(&migration.replace("{s}", &quoted)).await?;
        let to = i32::try_from(at + 1).unwrap_or(i32::MAX);
        if at == 0 {
            let epoch = i64::from_ne_bytes(rand_bytes());
            tx.execute(
                &format!("INSERT INTO {quoted}.meta (version, usage_epoch) VALUES ($1, $2)"),
                &[&to, &epoch],
            )
            .await?;
        } else {
            tx.execute(&format!("UPDATE {quoted}.meta SET version = $1"), &[&to])
                .await?;
        }
    }
    let epoch: i64 = tx
        .query_one(&format!("SELECT usage_epoch FROM {quoted}.meta"), &[])
        .await?
        .try_get(0)?;
    tx.commit().await?;
    Ok(epoch.cast_unsigned())
}

fn rand_bytes() -> [u8; 8] {
    let mut bytes = [0; 8];
    // The epoch only tells one store's order from another's: a clock-derived one would do.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (nanos as u64).to_ne_bytes();
    }
    bytes
}

/// `name` as a quoted SQL identifier.
pub(super) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
