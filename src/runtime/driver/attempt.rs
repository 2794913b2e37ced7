//! One attempt on one target: admission (the provider's permit, its health probe), the
//! provider's call, and its stream, recorded as it comes under the commit rule.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::evidence::{AttemptEnd, EndKind, Tally, attempt_error};
use super::stop::Race;
use super::{Driver, ProviderSlot};
use super::{batch, span};
use crate::execution::{
    AttemptCode, AttemptStart, CommitTracker, EventPayload, Output, PlanTarget,
};
use crate::provider::{ProviderCall, ProviderError};
use crate::routing::Permit;
use crate::store::StoreError;

impl Driver {
    /// [`attempt`](Self::attempt), inside its span.
    pub(super) async fn admit_and_stream(
        &mut self,
        slot: Option<&ProviderSlot>,
        target: &PlanTarget,
        tally: &mut Tally,
        race: &mut Race,
    ) -> Result<AttemptEnd, StoreError> {
        let started_at = SystemTime::now();
        self.began_at = self.deps.metrics.is_some().then(Instant::now);
        let not_admitted = |kind| AttemptEnd {
            started_at,
            admitted: false,
            sent: false,
            committed: false,
            output: Output::default(),
            held: Output::default(),
            probe: None,
            kind,
        };
        let Some(slot) = slot else {
            let error =
                ProviderError::rejected(AttemptCode::ProviderMissing, "provider is not configured");
            return Ok(not_admitted(EndKind::Failed(attempt_error(error))));
        };
        // A target ejected again since the plan was made, or half-open with every probe
        // taken, is refused here at no cost; a half-open one with a probe free is probed.
        let admitted = if self.job.health_gate {
            slot.health.admit(&target.model, Instant::now())
        } else {
            Ok(None)
        };
        let probe = match admitted {
            Ok(probe) => probe,
            Err(ejected) => {
                // Not the provider's answer: the same target may serve later.
                let message = format!("its health has it ejected: {}", ejected.reason);
                let error = ProviderError::retryable(AttemptCode::TargetEjected, message);
                return Ok(not_admitted(EndKind::Failed(attempt_error(error))));
            }
        };
        // Cancellation and the stop time come first, then a free permit; only when the
        // attempt must queue does what happened so far become visible first.
        let permit = match self
            .wait(race, slot.admission.acquire(self.job.priority))
            .await?
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(rejected)) => {
                let error =
                    ProviderError::retryable(AttemptCode::AdmissionRejected, rejected.to_string());
                return Ok(not_admitted(EndKind::Failed(attempt_error(error))));
            }
            Err(code) => return Ok(not_admitted(EndKind::Cut(code))),
        };
        if let (Some(metrics), Some(began_at)) = (&self.deps.metrics, self.began_at) {
            metrics.queued(&target.provider, self.job.priority, began_at.elapsed());
        }
        self.record(EventPayload::AttemptStarted(Arc::new(AttemptStart {
            attempt: tally.attempts,
            provider: target.provider.clone(),
            model: target.model.clone(),
            started_at,
        })));
        tally.on_target += 1;
        // The attempt is sent: from here the retry budget no longer bounds it, only the
        // deadline (and the adapter's timeouts) do.
        let (at, code) = self.job.budget.once_sent();
        race.reset(at, code);
        // Time to first output counts from here, for the provider that answers.
        self.sent_at = self.deps.metrics.is_some().then(Instant::now);
        let mut tracker = CommitTracker::new(self.job.delivery);
        let (kind, sent) = self
            .stream(slot, target, tally, race, permit, &mut tracker)
            .await?;
        let mut output = tracker.take_output();
        let held = self.drop_held(&mut output);
        Ok(AttemptEnd {
            started_at,
            admitted: true,
            sent,
            committed: tracker.committed(),
            output,
            held,
            probe,
            kind,
        })
    }

    /// Forwards one provider stream into the store, holding `permit` until it ends, and on
    /// success appends `execution.completed`; with how it ended, whether its request may have
    /// reached the provider (a call cut while it awaited its credentials sent nothing). The stream (and with it the provider call) is
    /// dropped on every way out. The race stops it at the deadline (or a cancellation): the
    /// retry budget bounds trying, not an attempt already sent. A cut call's unreported usage
    /// is recorded before the attempt ends.
    ///
    /// What the provider has ready at once is taken as one batch and recorded; it reaches the
    /// store with the events recorded before it, before the driver next waits or when it
    /// ends. Nothing waits to fill a batch.
    async fn stream(
        &mut self,
        slot: &ProviderSlot,
        target: &PlanTarget,
        tally: &Tally,
        race: &mut Race,
        permit: Permit,
        tracker: &mut CommitTracker,
    ) -> Result<(EndKind, bool), StoreError> {
        let attempt = tally.attempts;
        let mut stream = slot.adapter.call(ProviderCall {
            execution_id: self.job.id,
            attempt,
            target_attempt: tally.on_target,
            model: target.model.clone(),
            input: self.job.input.clone(),
            deadline: self.job.budget.deadline,
            trace: crate::runtime::trace::outgoing(&self.span, self.job.trace.as_ref()),
        });
        // Sized by `batch::ready` as items come, from what the stream says it holds ready: a
        // stream that knows its length (the scripted provider) fills it without growing it.
        let mut items = Vec::new();
        loop {
            let ready = self
                .wait(race, batch::ready(&mut stream, &mut items))
                .await?;
            let committed = tracker.committed();
            let (end, recorded) = match ready {
                Err(code) => (Some(EndKind::Cut(code)), 0),
                Ok(()) => self.record_batch(&mut items, target, attempt, tracker),
            };
            if let (Some(metrics), Some(sent_at)) = (&self.deps.metrics, self.sent_at)
                && !committed
                && tracker.committed()
            {
                // Output commits once per execution: there is no attempt after it.
                metrics.first_output(&target.provider, sent_at.elapsed());
            }
            match end {
                Some(EndKind::Cut(code)) => {
                    // A cut attempt reports its usage too: take what the call knows, abort
                    // it (and free its permit) at once, then record.
                    let known = stream.as_mut().unreported_usage();
                    let sent = stream.sent();
                    drop(stream);
                    drop(permit);
                    for quantity in known {
                        let usage = self.usage(target, attempt, quantity);
                        self.record(usage);
                    }
                    return Ok((EndKind::Cut(code), sent));
                }
                Some(EndKind::Succeeded(finish_reason)) => {
                    span::response_model(&self.span, target, &*stream);
                    // Before the terminal event goes out: whoever sees it sees this counted.
                    if let (Some(metrics), Some(began_at)) = (&self.deps.metrics, self.began_at) {
                        metrics.attempt_succeeded(&target.provider, began_at.elapsed());
                    }
                    // The permit and the provider stream go first, so whoever sees the
                    // terminal event also sees the provider's capacity back.
                    drop(stream);
                    drop(permit);
                    self.flush().await?;
                    return Ok((EndKind::Succeeded(finish_reason), true));
                }
                // A call that failed before it could send (its credentials) started nothing.
                Some(end) => return Ok((end, stream.sent())),
                // A provider that never makes the driver wait still gets its output out in
                // batches of bounded size.
                None if recorded >= batch::MAX => self.flush().await?,
                None => {}
            }
        }
    }
}
