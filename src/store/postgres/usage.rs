//! The usage order across replicas. A fact's position is the id of the transaction that kept
//! it, shifted left 20 bits, plus its place among that transaction's facts: so positions grow
//! in the order of transaction ids, not of commits. Transactions commit out of that order, so
//! a reader reads only positions below the oldest transaction still running
//! (`pg_snapshot_xmin`): every transaction below it has committed or never will, and no
//! later one can take a position below it. A cursor therefore never passes a fact that may
//! still commit, and every replica reads the same order. A transaction that runs long holds
//! the facts after it back until it ends (the price of that guarantee).
//!
//! A replica reads its own facts: a read waits (a few milliseconds, at most [`OWN_FACTS`])
//! until the transactions below its own last fact have ended, so a fact it kept and
//! answered for is in the next read on it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::error::RowError;
use super::rows::{facts_of, labels_of};
use super::{PgError, Shared};
use crate::execution::{EventPayload, ExecutionId};
use crate::store::{StoreError, UsageEntry};

/// The rows holding facts after a position, in the order of their last facts' (a row's facts
/// are one apart up to its `usage_position`), so `LIMIT` rows hold that many facts or more.
const READ: &str = "/* model-runtime: usage */ SELECT e.execution_id, x.labels, e.sequence, e.time, e.state, e.payload, \
     e.usage_position, e.first_sequence FROM events e JOIN executions x ON x.id = e.execution_id \
     WHERE e.usage_position > $1 AND x.gone_at IS NULL \
     AND e.usage_position < (pg_snapshot_xmin(pg_current_snapshot())::text::int8 << 20) \
     ORDER BY e.usage_position LIMIT $2";

/// How long a read waits for the transactions below this replica's last fact to end.
const OWN_FACTS: Duration = Duration::from_secs(2);

const HORIZON: &str = "/* model-runtime: usage-horizon */ SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 << 20";

/// The highest position this replica has kept a fact at.
#[derive(Debug, Default)]
pub(super) struct Kept(AtomicU64);

impl Kept {
    pub(super) fn kept(&self, position: u64) {
        self.0.fetch_max(position, Ordering::AcqRel);
    }
}

/// Up to `limit` facts after position `after`, in the usage order.
pub(super) async fn read(
    shared: &Shared,
    after: u64,
    limit: usize,
) -> Result<Vec<UsageEntry>, StoreError> {
    read_rows(shared, after, limit)
        .await
        .map_err(PgError::into_store)
}

async fn read_rows(shared: &Shared, after: u64, limit: usize) -> Result<Vec<UsageEntry>, PgError> {
    let own = shared.kept.0.load(Ordering::Acquire);
    let rows = shared
        .on_connection(async |client| {
            if own > after {
                let horizon = client.prepare_cached(HORIZON).await?;
                let deadline = Instant::now() + OWN_FACTS;
                loop {
                    let below: i64 = client.query_one(&horizon, &[]).await?.try_get(0)?;
                    if below.cast_unsigned() > own || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            let statement = client.prepare_cached(READ).await?;
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            Ok(client.query(&statement, &[&after, &limit]).await?)
        })
        .await?;
    let mut entries = Vec::with_capacity(rows.len().min(limit));
    let mut events = Vec::new();
    for row in rows {
        if entries.len() == limit {
            break;
        }
        let id: uuid::Uuid = row.try_get(0)?;
        let execution_id = ExecutionId::from_bytes(id.into_bytes());
        let labels = labels_of(row.try_get(1)?)?;
        events.clear();
        facts_of(&row, 2, &labels, &mut events)?;
        let mut facts = 0;
        for event in events.drain(..) {
            let EventPayload::Usage(fact) = event.payload else {
                continue;
            };
            facts += 1;
            if fact.position > after && entries.len() < limit {
                entries.push(UsageEntry {
                    fact,
                    execution_id,
                    sequence: event.sequence,
                    time: event.time,
                });
            }
        }
        if facts == 0 {
            return Err(RowError::NotUsage.into());
        }
    }
    Ok(entries)
}
