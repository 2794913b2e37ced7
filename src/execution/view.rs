//! The materialized view of an execution, folded from its events by [`Execution::apply`].
//! Every store keeps one per execution with this same function, so `GetExecution` says
//! exactly what the event sequence says.

use std::sync::Arc;
use std::time::SystemTime;

use crate::execution::{
    AttemptRecord, EffectiveLimits, Event, EventPayload, ExecutionError, ExecutionId,
    ExecutionResult, ExecutionState, Labels, Outcome, Output, RoutingPlan, UsageFact,
};

/// Status, target, attempts, result or error, and usage of one execution.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// Its id.
    pub id: ExecutionId,
    /// The state after the last event.
    pub state: ExecutionState,
    /// The ability requested.
    pub ability: Arc<str>,
    /// The policy in effect.
    pub policy: Arc<str>,
    /// When it was accepted.
    pub created_at: SystemTime,
    /// When the last event was appended.
    pub updated_at: SystemTime,
    /// The limits in effect.
    pub limits: EffectiveLimits,
    /// Sequence of the last event.
    pub last_sequence: u64,
    /// The routing plan, once made.
    pub plan: Option<Arc<RoutingPlan>>,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The resolved target: the latest attempt that ran.
    pub target: Option<(Arc<str>, Arc<str>)>,
    /// Set when SUCCEEDED.
    pub result: Option<ExecutionResult>,
    /// Set when FAILED or CANCELLED.
    pub error: Option<ExecutionError>,
    /// Output streamed so far by the current attempt; after a failure, the evidence.
    pub partial_output: Output,
    /// Every usage fact.
    pub usage: Vec<UsageFact>,
    /// The request's labels.
    pub labels: Arc<Labels>,
    /// The request's idempotency key.
    pub idempotency_key: Option<String>,
}

impl Execution {
    /// The view after the first event, `execution.accepted`; `None` for any other event.
    pub fn from_accepted(
        event: &Event,
        id: ExecutionId,
        labels: Arc<Labels>,
        idempotency_key: Option<String>,
    ) -> Option<Self> {
        let EventPayload::Accepted(accepted) = &event.payload else {
            return None;
        };
        Some(Self {
            id,
            state: event.state,
            ability: accepted.ability.clone(),
            policy: accepted.policy.clone(),
            created_at: event.time,
            updated_at: event.time,
            limits: accepted.limits.clone(),
            last_sequence: event.sequence,
            plan: None,
            attempts: Vec::new(),
            target: None,
            result: None,
            error: None,
            partial_output: Output::default(),
            usage: Vec::new(),
            labels,
            idempotency_key,
        })
    }

    /// Folds one more event into the view. The store has already checked it against the
    /// state machine.
    pub fn apply(&mut self, event: &Event) {
        self.state = event.state;
        self.updated_at = event.time;
        self.last_sequence = event.sequence;
        match &event.payload {
            EventPayload::Accepted(_) => {}
            EventPayload::Routing(plan) => self.plan = Some(plan.clone()),
            EventPayload::AttemptStarted(started) => {
                self.target = Some((started.provider.clone(), started.model.clone()));
                self.partial_output = Output::default();
                self.attempts.push(AttemptRecord {
                    number: started.attempt,
                    provider: started.provider.clone(),
                    model: started.model.clone(),
                    started_at: started.started_at,
                    duration: None,
                    error: None,
                    output_committed: false,
                    outcome: None,
                    next_action: None,
                    admitted: true,
                    held_output: Output::default(),
                });
            }
            EventPayload::AttemptFailed(record) => {
                match self.attempts.iter_mut().find(|a| a.number == record.number) {
                    Some(slot) => slot.clone_from(record),
                    None => self.attempts.push(AttemptRecord::clone(record)),
                }
            }
            output @ (EventPayload::TextDelta { attempt, .. }
            | EventPayload::ToolCallArgumentsDelta { attempt, .. }) => {
                self.partial_output.absorb(output);
                if output.commits_output() {
                    self.mark_committed(*attempt);
                }
            }
            started @ EventPayload::ToolCallStarted(call) => {
                self.partial_output.absorb(started);
                self.mark_committed(call.attempt);
            }
            // The result and a failure's partial output carry the reasoning of the attempt
            // that produced them; the view does not mix in failed attempts' reasoning.
            EventPayload::ReasoningDelta { .. } | EventPayload::Progress { .. } => {}
            EventPayload::Usage(fact) => self.usage.push(UsageFact::clone(fact)),
            EventPayload::Completed(result) => {
                self.partial_output = Output::default();
                self.target = Some((result.provider.clone(), result.model.clone()));
                if let Some(a) = self
                    .attempts
                    .iter_mut()
                    .find(|a| a.number == result.attempt)
                {
                    a.outcome = Some(Outcome::Completed);
                    a.duration = event.time.duration_since(a.started_at).ok();
                }
                self.result = Some(ExecutionResult::clone(result));
            }
            EventPayload::Failed(failure) => {
                self.partial_output = failure.partial_output.clone();
                self.error = Some(failure.error.clone());
            }
        }
    }

    fn mark_committed(&mut self, attempt: u32) {
        if let Some(a) = self.attempts.iter_mut().rev().find(|a| a.number == attempt) {
            a.output_committed = true;
        }
    }
}
