//! Usage facts: what the provider reported is reported as such, what it did not is never
//! passed off as reported; and the usage export resumes after a cursor without a gap.

use futures_util::StreamExt;

use crate::observe::{Ctx, WAIT};
use crate::pb;
use crate::verdict::Verdict;

pub async fn reported(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("quiet")).await;
    let tokens: Vec<&pb::UsageFact> = run
        .usage()
        .into_iter()
        .filter(|f| f.unit.ends_with("tokens"))
        .collect();
    if tokens.is_empty() && run.result().is_some() {
        return vec![Verdict::unsupported(
            case,
            "USAGE-3",
            "the provider reported no usage, and the implementation measured or estimated none",
        )];
    }
    let claimed: Vec<String> = tokens
        .iter()
        .filter(|f| f.source == pb::UsageSource::ProviderReported as i32)
        .map(|f| format!("{}={}", f.unit, f.quantity))
        .collect();
    vec![Verdict::check(
        case,
        "USAGE-3",
        claimed.is_empty() && run.result().is_some(),
        || format!("the provider reported no usage; facts say it reported {claimed:?}"),
        || ctx.evidence(&run),
    )]
}

/// A usage record's identity in the order.
fn key(record: &pb::UsageRecord) -> (String, String, u64) {
    (
        record.cursor.clone(),
        record.execution_id.clone(),
        record.sequence,
    )
}

/// Reads the export after `cursor` until `done` says enough, within the kit's wait.
async fn export_after(
    ctx: &Ctx,
    cursor: &str,
    mut done: impl FnMut(&[pb::UsageRecord]) -> bool,
) -> Result<Vec<pb::UsageRecord>, tonic::Status> {
    let request = pb::StreamUsageRequest {
        after_cursor: cursor.to_owned(),
    };
    let mut stream = ctx.client.clone().stream_usage(request).await?.into_inner();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut records = Vec::new();
    while !done(&records) {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(record))) => records.push(record),
            Ok(Some(Err(status))) => return Err(status),
            Ok(None) | Err(_) => break,
        }
    }
    Ok(records)
}

pub async fn export(ctx: &Ctx, case: &'static str) -> Vec<Verdict> {
    let run = ctx.execute(case, ctx.request("answer")).await;
    let id = run.id().to_owned();
    let facts = run.usage().len();
    let mine =
        |records: &[pb::UsageRecord]| records.iter().filter(|r| r.execution_id == id).count();
    let fail = |message: String| vec![Verdict::fail(case, "USAGE-5", message, ctx.evidence(&run))];
    let whole = match export_after(ctx, "", |r| mine(r) >= facts).await {
        Ok(records) => records,
        Err(status) => {
            return fail(format!(
                "StreamUsage failed: {:?} {}",
                status.code(),
                status.message()
            ));
        }
    };
    if facts == 0 || mine(&whole) != facts {
        return fail(format!(
            "the execution reported {facts} facts; the export held {} of them",
            mine(&whole)
        ));
    }
    let first = whole
        .iter()
        .position(|r| r.execution_id == id)
        .unwrap_or_default();
    let cursor = first
        .checked_sub(1)
        .map(|i| whole[i].cursor.clone())
        .unwrap_or_default();
    let rest = &whole[first..];
    let resumed = match export_after(ctx, &cursor, |r| r.len() >= rest.len()).await {
        Ok(records) => records,
        Err(status) => {
            return fail(format!(
                "StreamUsage after a cursor failed: {:?} {}",
                status.code(),
                status.message()
            ));
        }
    };
    let same = rest.iter().map(key).eq(resumed.iter().map(key));
    vec![Verdict::check(
        case,
        "USAGE-5",
        same,
        || {
            format!(
                "resumed after cursor {cursor:?}, the export gave {} records that are not the {} it gave the first time",
                resumed.len(),
                rest.len()
            )
        },
        || ctx.evidence(&run),
    )]
}
