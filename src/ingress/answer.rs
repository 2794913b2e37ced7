//! How an API's request is answered, the same for every API: the execution submitted (a
//! retry under its `Idempotency-Key` attaches), its caller's hold taken (`detach.rs`), then
//! either the whole answer once the execution ended (buffered delivery) or its events as the
//! API streams them. A streamed answer's status waits for the first event the API shows, so a
//! failure before any output is still a real status.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use http::StatusCode;
use serde_json::Value;

use super::Shared;
use super::body::{self, Answer};
use super::detach::Watching;
use super::error::{Api, Refusal};
use super::stream::{Encoder, Events};
use super::tokens::{Tally, Tokens};
use crate::execution::{Event, EventPayload, ExecuteRequest, ExecutionId, ExecutionResult};

/// What a streamed answer showed so far: the target under way, whether anything was written,
/// and the failure that ended the execution before anything was (the answer's status then).
#[derive(Debug)]
pub(super) struct Shown {
    api: Api,
    /// `provider/model` of the attempt under way; empty before one started.
    pub(super) target: Arc<str>,
    /// Whether anything was written.
    pub(super) began: bool,
    refused: Option<Refusal>,
}

impl Shown {
    pub(super) fn new(api: Api) -> Self {
        Self {
            api,
            target: Arc::from(""),
            began: false,
            refused: None,
        }
    }

    /// The stream ends with `refusal`: after output, the API's error event and no normal end;
    /// before it, the answer's status.
    pub(super) fn end_with(&mut self, refusal: Refusal, out: &mut BytesMut) {
        if self.began {
            out.put_slice(&refusal.event(self.api));
        } else {
            self.refused = Some(refusal);
        }
    }
}

/// An encoder of a streamed answer, with what it showed.
pub(super) trait Streamed: Encoder {
    fn shown(&self) -> &Shown;
}

/// How one API answers.
pub(super) struct Answering<S, W> {
    pub(super) api: Api,
    /// The stream's encoder for an execution, when the caller asked for a stream.
    pub(super) stream: Option<S>,
    /// The whole answer of an execution that succeeded.
    pub(super) whole: W,
    /// Events up to this sequence the caller saw already (`Last-Event-ID`).
    pub(super) after: u64,
}

/// Answers `request` as `answering` says.
pub(super) async fn answer<S, W>(
    shared: &Arc<Shared>,
    request: ExecuteRequest,
    answering: Answering<impl FnOnce(ExecutionId) -> S, W>,
) -> Result<Answer, Refusal>
where
    S: Streamed,
    W: FnOnce(ExecutionId, &ExecutionResult, Tokens) -> Value,
{
    let keyed = request.idempotency_key.is_some();
    let events = shared
        .runtime
        .execute(request)
        .await
        .map_err(|e| Refusal::of_runtime(&e))?;
    let id = events.execution_id();
    let watching = Some(Watching::new(shared.clone(), id, keyed));
    if let Some(stream) = answering.stream {
        let mut events = Events::new(events, stream(id), answering.after, watching);
        events.shown().await;
        let shown = events.encoder().shown();
        let target = shown.target.to_string();
        let mut answer = match &shown.refused {
            Some(refused) => refused.answer(answering.api),
            None => body::events(events),
        };
        body::tag(&mut answer, id, &target);
        return Ok(answer);
    }
    let mut events = Events::new(events, Whole::default(), 0, watching);
    events.shown().await;
    let whole = events.encoder();
    let (mut answer, target) = match &whole.result {
        Some(result) => {
            let tokens = whole.tally.of(result.attempt);
            let answer = body::json(StatusCode::OK, &(answering.whole)(id, result, tokens));
            (answer, format!("{}/{}", result.provider, result.model))
        }
        // The events end with the execution's end, or are cut: one of the two is here.
        None => {
            let refused = whole.refused.clone().unwrap_or_else(Refusal::cut);
            (refused.answer(answering.api), String::new())
        }
    };
    body::tag(&mut answer, id, &target);
    Ok(answer)
}

/// Reads an execution to its end, writing nothing: what a whole answer is made of.
#[derive(Debug, Default)]
struct Whole {
    result: Option<Arc<ExecutionResult>>,
    refused: Option<Refusal>,
    tally: Tally,
}

impl Encoder for Whole {
    fn event(&mut self, event: &Event, _: &mut BytesMut) -> bool {
        match &event.payload {
            EventPayload::Usage(fact) => self.tally.add(fact),
            EventPayload::Completed(result) => {
                self.result = Some(result.clone());
                return true;
            }
            EventPayload::Failed(failure) => {
                self.refused = Some(Refusal::of_failure(&failure.error));
                return true;
            }
            _ => {}
        }
        false
    }

    fn cut(&mut self, _: &mut BytesMut) {
        self.refused = Some(Refusal::cut());
    }
}

/// Seconds since the epoch, as `created` gives them.
pub(super) fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
