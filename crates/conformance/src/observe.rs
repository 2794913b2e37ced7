//! The caller's side: requests the kit sends, the events it receives, and the record of each
//! execution (events, the provider's requests for it, its timing) that cases and the
//! invariants judge.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use futures_util::StreamExt;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

use crate::pb::model_runtime_client::ModelRuntimeClient;
use crate::pb::{self, execution_event::Payload};
use crate::provider::{Log, Received, fresh_nonce};
use crate::setup::Setup;
use crate::verdict::Evidence;

/// The longest the kit waits for any one stream or call.
pub const WAIT: Duration = Duration::from_secs(20);

/// The label every kit request carries, and the usage facts must carry back.
pub const LABEL: (&str, &str) = ("conformance-tenant", "kit");

/// What a case works with.
pub struct Ctx {
    pub client: ModelRuntimeClient<Channel>,
    /// A second replica sharing the first's store, when one was given.
    pub replica: Option<ModelRuntimeClient<Channel>>,
    /// The implementation's store retention, when the operator told the kit.
    pub retention: Option<Duration>,
    pub log: Arc<Log>,
    runs: Mutex<Vec<Run>>,
}

/// One execution as the kit saw it.
#[derive(Debug, Clone)]
pub struct Run {
    pub case: &'static str,
    pub nonce: String,
    /// When the kit sent the request.
    pub sent: Instant,
    /// Every event received, in order.
    pub events: Vec<pb::ExecutionEvent>,
    /// How the stream ended: `None` when it ended cleanly.
    pub error: Option<Status>,
    /// Whether the kit read the stream to its end (a case may drop it on purpose).
    pub whole: bool,
    /// What a `Watch` from the start gave once the execution had ended (EXEC-5), read at
    /// once, before retention can expire it.
    pub replay: Option<Result<Vec<pb::ExecutionEvent>, Status>>,
}

impl Ctx {
    pub fn new(
        client: ModelRuntimeClient<Channel>,
        replica: Option<ModelRuntimeClient<Channel>>,
        retention: Option<Duration>,
        log: Arc<Log>,
    ) -> Self {
        Self {
            client,
            replica,
            retention,
            log,
            runs: Mutex::new(Vec::new()),
        }
    }

    /// A request for `kit-{setup}` whose prompt carries a fresh nonce.
    pub fn request(&self, setup: &str) -> pb::ExecuteRequest {
        let prompt = format!(
            "A conformance check; answer as you are scripted. {}",
            fresh_nonce()
        );
        let mut request = model_runtime_client::text_request(&Setup::ability(setup), &prompt);
        request.labels = HashMap::from([(LABEL.0.to_owned(), LABEL.1.to_owned())]);
        request
    }

    /// Runs `request` with `Execute` and reads its stream to the end.
    pub async fn execute(&self, case: &'static str, request: pb::ExecuteRequest) -> Run {
        let mut run = Run::new(case, nonce_of(&request));
        match tokio::time::timeout(WAIT, self.client.clone().execute(request)).await {
            Ok(Ok(stream)) => read(stream.into_inner(), &mut run, usize::MAX).await,
            Ok(Err(status)) => run.error = Some(status),
            Err(_) => run.error = Some(Status::deadline_exceeded("the kit's wait ran out")),
        }
        self.keep(&run).await;
        run
    }

    /// Keeps `run` for the invariants, with its replay when it has ended.
    pub async fn keep(&self, run: &Run) {
        let mut kept = run.clone();
        if run.terminal().is_some() {
            kept.replay = Some(self.watch(&self.client, run.id(), 0).await);
        }
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(kept);
    }

    /// Every run kept.
    pub fn runs(&self) -> Vec<Run> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the provider received for `run`.
    pub fn received(&self, run: &Run) -> Vec<Received> {
        self.log.for_nonce(&run.nonce)
    }

    /// The evidence of `run`: its events and the provider's requests.
    pub fn evidence(&self, run: &Run) -> Evidence {
        Evidence {
            events: run.events.iter().map(describe).collect(),
            received: self
                .received(run)
                .iter()
                .map(|r| {
                    let key = r
                        .idempotency
                        .as_ref()
                        .map(|k| format!(" idempotency {k}"))
                        .unwrap_or_default();
                    format!(
                        "+{} ms {}{key}",
                        r.at.saturating_duration_since(run.sent).as_millis(),
                        r.target()
                    )
                })
                .collect(),
        }
    }

    /// `GetExecution` of `id`.
    pub async fn get(&self, id: &str) -> Result<pb::Execution, Status> {
        let request = pb::GetExecutionRequest {
            execution_id: id.to_owned(),
        };
        Ok(self
            .client
            .clone()
            .get_execution(request)
            .await?
            .into_inner())
    }

    /// `Watch` from `after` to the end, by `client`.
    pub async fn watch(
        &self,
        client: &ModelRuntimeClient<Channel>,
        id: &str,
        after: u64,
    ) -> Result<Vec<pb::ExecutionEvent>, Status> {
        let request = pb::WatchRequest {
            execution_id: id.to_owned(),
            after_sequence: after,
        };
        let stream = tokio::time::timeout(WAIT, client.clone().watch(request))
            .await
            .map_err(|_| Status::deadline_exceeded("the kit's wait ran out"))??;
        let mut run = Run::new("", String::new());
        read(stream.into_inner(), &mut run, usize::MAX).await;
        match run.error {
            Some(status) => Err(status),
            None => Ok(run.events),
        }
    }
}

/// Reads `stream` into `run` until it ends, fails, or `limit` events were read.
pub async fn read(mut stream: Streaming<pb::ExecutionEvent>, run: &mut Run, limit: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while run.events.len() < limit {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(event))) => run.events.push(event),
            Ok(Some(Err(status))) => {
                run.error = Some(status);
                return;
            }
            Ok(None) => return,
            Err(_) => {
                run.error = Some(Status::deadline_exceeded("the kit's wait ran out"));
                return;
            }
        }
    }
    run.whole = false;
}

pub fn nonce_of(request: &pb::ExecuteRequest) -> String {
    let text = request
        .input
        .as_ref()
        .and_then(|i| i.messages.first())
        .and_then(|m| m.content.first())
        .and_then(|c| match &c.part {
            Some(pb::content_part::Part::Text(text)) => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    text.split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// One line for `event`: sequence, type, state and what matters of its payload.
pub fn describe(event: &pb::ExecutionEvent) -> String {
    let state = pb::ExecutionState::try_from(event.state)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("EXECUTION_STATE_")
                .to_owned()
        })
        .unwrap_or_else(|_| event.state.to_string());
    let detail = match &event.payload {
        Some(Payload::AttemptStarted(a)) => {
            format!("attempt {} {}/{}", a.attempt, a.provider, a.model)
        }
        Some(Payload::AttemptFailed(f)) => f
            .attempt
            .as_ref()
            .map(|a| {
                let code = a
                    .error
                    .as_ref()
                    .map(|e| e.code.as_str())
                    .unwrap_or_default();
                format!(
                    "attempt {} {}/{} {code} committed={} admitted={}",
                    a.number, a.provider, a.model, a.output_committed, a.admitted
                )
            })
            .unwrap_or_default(),
        Some(Payload::TextDelta(d)) => format!("attempt {} {:?}", d.attempt, d.text),
        Some(Payload::ToolCallStarted(t)) => format!("attempt {} {}", t.attempt, t.name),
        Some(Payload::ToolCallArgumentsDelta(d)) => format!("attempt {} {:?}", d.attempt, d.delta),
        Some(Payload::UsageReported(u)) => u
            .fact
            .as_ref()
            .map(|f| {
                let source = pb::UsageSource::try_from(f.source)
                    .map(|s| {
                        s.as_str_name()
                            .trim_start_matches("USAGE_SOURCE_")
                            .to_owned()
                    })
                    .unwrap_or_else(|_| f.source.to_string());
                format!("attempt {} {}={} {source}", f.attempt, f.unit, f.quantity)
            })
            .unwrap_or_default(),
        Some(Payload::Completed(c)) => c
            .result
            .as_ref()
            .map(|r| {
                format!(
                    "{}/{} {:?}",
                    r.provider,
                    r.model,
                    text_of(r.output.as_ref())
                )
            })
            .unwrap_or_default(),
        Some(Payload::Failed(f)) => f
            .error
            .as_ref()
            .map(|e| {
                let outcome = pb::Outcome::try_from(e.outcome)
                    .map(|o| o.as_str_name().trim_start_matches("OUTCOME_").to_owned())
                    .unwrap_or_else(|_| e.outcome.to_string());
                format!("{} outcome {outcome}", e.code)
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    format!("{} {} {state} {detail}", event.sequence, event.r#type)
        .trim_end()
        .to_owned()
}

/// The text of an output.
pub fn text_of(output: Option<&pb::Output>) -> &str {
    output.map(|o| o.text.as_str()).unwrap_or_default()
}

impl Run {
    /// A run of `case` for the execution whose prompt carries `nonce`, sent now.
    pub fn new(case: &'static str, nonce: String) -> Self {
        Self {
            case,
            nonce,
            sent: Instant::now(),
            events: Vec::new(),
            error: None,
            whole: true,
            replay: None,
        }
    }

    /// The execution's id, from its first event.
    pub fn id(&self) -> &str {
        self.events
            .first()
            .map(|e| e.execution_id.as_str())
            .unwrap_or_default()
    }

    /// The last event, if it is terminal.
    pub fn terminal(&self) -> Option<&pb::ExecutionEvent> {
        self.events
            .last()
            .filter(|e| matches!(e.payload, Some(Payload::Completed(_) | Payload::Failed(_))))
    }

    /// The result, when the execution completed.
    pub fn result(&self) -> Option<&pb::ExecutionResult> {
        match self.terminal()?.payload.as_ref()? {
            Payload::Completed(c) => c.result.as_ref(),
            _ => None,
        }
    }

    /// The terminal failure, when the execution failed.
    pub fn failure(&self) -> Option<&pb::ExecutionFailed> {
        match self.terminal()?.payload.as_ref()? {
            Payload::Failed(f) => Some(f),
            _ => None,
        }
    }

    /// The failure's code, or "".
    pub fn failed_code(&self) -> &str {
        self.failure()
            .and_then(|f| f.error.as_ref())
            .map(|e| e.code.as_str())
            .unwrap_or_default()
    }

    /// `provider/model` of every attempt started, in order.
    pub fn attempts(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.payload {
                Some(Payload::AttemptStarted(a)) => Some(format!("{}/{}", a.provider, a.model)),
                _ => None,
            })
            .collect()
    }

    /// Every attempt that failed, as the runtime recorded it.
    pub fn failed_attempts(&self) -> Vec<&pb::Attempt> {
        self.events
            .iter()
            .filter_map(|e| match &e.payload {
                Some(Payload::AttemptFailed(f)) => f.attempt.as_ref(),
                _ => None,
            })
            .collect()
    }

    /// Every usage fact reported.
    pub fn usage(&self) -> Vec<&pb::UsageFact> {
        self.events
            .iter()
            .filter_map(|e| match &e.payload {
                Some(Payload::UsageReported(u)) => u.fact.as_ref(),
                _ => None,
            })
            .collect()
    }

    /// The routing plan of the first `execution.routing` event.
    pub fn plan(&self) -> Option<&pb::RoutingPlan> {
        self.events.iter().find_map(|e| match &e.payload {
            Some(Payload::Routing(r)) => r.plan.as_ref(),
            _ => None,
        })
    }

    /// The index of the first event that exposes output, if any.
    pub fn first_output(&self) -> Option<usize> {
        self.events.iter().position(exposes_output)
    }

    /// The text of every text delta, concatenated.
    pub fn streamed_text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match &e.payload {
                Some(Payload::TextDelta(d)) => Some(d.text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A text delta, a tool call or a tool-argument delta.
pub fn exposes_output(event: &pb::ExecutionEvent) -> bool {
    matches!(
        event.payload,
        Some(
            Payload::TextDelta(_)
                | Payload::ToolCallStarted(_)
                | Payload::ToolCallArgumentsDelta(_)
        )
    )
}
