//! What a reply's body has said so far: the framing's parser, the adapter's decoder, the
//! usage tally and the items ready for the caller. The exchange feeds it the body's data as
//! it arrives and reads off how the reply ended.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::{Decoder, Item, bound};
use crate::execution::{AttemptCode, ErrorClass, FinishReason, ReasoningPiece, UsageQuantity};
use crate::provider::framing::Framing;
use crate::provider::http::Upstream;
use crate::provider::tally::UsageTally;
use crate::provider::{ProviderError, ProviderEvent};

/// What the body has said so far, and the items it made.
pub(super) struct Reply<D: Decoder> {
    pub(super) upstream: Upstream,
    deadline: Instant,
    pub(super) decoder: D,
    parser: D::Framing,
    pub(super) usage: UsageTally,
    /// Items ready for the caller.
    pub(super) pending: VecDeque<Item>,
    /// Whether an output event has been handed out (for error wording; the driver applies
    /// the commit rule itself).
    pub(super) output_started: bool,
    /// How the reply ended, once the decoder says so: anything after it is not read.
    pub(super) settled: Option<Result<FinishReason, ProviderError>>,
    /// What the decoder made of one event (kept to reuse its memory).
    out: Vec<ProviderEvent>,
}

impl<D: Decoder> Reply<D> {
    pub(super) fn new(upstream: Upstream, deadline: Instant, decoder: D) -> Self {
        Self {
            upstream,
            deadline,
            decoder,
            parser: D::Framing::default(),
            usage: UsageTally::default(),
            // A reply's events often come several to a piece of the body (all of them, from
            // a quick upstream): room for a usual burst at once, not grown from four.
            pending: VecDeque::with_capacity(16),
            output_started: false,
            settled: None,
            out: Vec::new(),
        }
    }

    /// Takes a piece of the body, unless the reply has already ended.
    pub(super) fn feed(&mut self, piece: &[u8]) {
        if self.settled.is_none() {
            self.settled = self.parse(Some(piece)).transpose();
        }
    }

    /// The body ended without the reply's end marker: complete if the decoder can tell,
    /// interrupted otherwise.
    pub(super) fn end_of_body(&mut self) -> Result<FinishReason, ProviderError> {
        if let Some(reason) = self.parse(None)? {
            return Ok(reason);
        }
        match self
            .decoder
            .finished_at_eof(&self.upstream)
            .map_err(after_the_status_line)?
        {
            Some(reason) => Ok(reason),
            None => Err(self
                .upstream
                .interrupted("ended before the reply was complete", self.output_started)),
        }
    }

    /// Feeds the next piece of the body (`None`: its end) through the framing and the
    /// decoder; `Some(reason)` once the reply is complete. Events after the one that ended
    /// the reply are not decoded; a malformed stream after it does not matter either.
    fn parse(&mut self, piece: Option<&[u8]>) -> Result<Option<FinishReason>, ProviderError> {
        // Lent out (it holds no memory by default), so its events can go to `self.decode`.
        let mut parser = std::mem::take(&mut self.parser);
        let mut outcome = Ok(None);
        let mut on = |event: <D::Framing as Framing>::Event<'_>| {
            if matches!(outcome, Ok(None)) {
                outcome = self.decode(event);
            }
        };
        let parsed = match piece {
            Some(piece) => parser.push(piece, &mut on),
            None => parser.finish(&mut on),
        };
        self.parser = parser;
        match (outcome, parsed) {
            (Ok(None), Err(e)) => Err(after_the_status_line(
                self.upstream.protocol_error(e.what, &e.offending),
            )),
            (outcome, _) => outcome,
        }
    }

    /// One event through the decoder; the SPI events it yields are queued even when it then
    /// fails, so output that arrived before an error is not lost.
    fn decode(
        &mut self,
        event: <D::Framing as Framing>::Event<'_>,
    ) -> Result<Option<FinishReason>, ProviderError> {
        let mut out = std::mem::take(&mut self.out);
        let result = self
            .decoder
            .event(&self.upstream, event, &mut self.usage, &mut out);
        for event in out.drain(..) {
            match &event {
                ProviderEvent::TextDelta(_) | ProviderEvent::ToolCallArgumentsDelta { .. } => {
                    self.usage.count_piece();
                    self.output_started = true;
                }
                ProviderEvent::ToolCallStarted { .. } => self.output_started = true,
                ProviderEvent::Reasoning(ReasoningPiece::Text, _) => self.usage.count_reasoning(),
                _ => {}
            }
            self.pending.push_back(Ok(event));
        }
        self.out = out;
        result.map_err(after_the_status_line)
    }

    /// The reply is complete: the usage it reported goes out ahead of `Finished`.
    pub(super) fn complete(&mut self) {
        self.pending
            .extend(self.usage.drain(true).into_iter().map(Ok));
    }

    /// The call failed: the usage known so far goes out ahead of the error.
    pub(super) fn fail(&mut self, error: ProviderError) {
        self.pending
            .extend(self.usage.drain(false).into_iter().map(Ok));
        self.pending.push_back(Err(error));
    }

    /// Usage events queued but not handed out yet, then what the tally holds.
    pub(super) fn unreported_usage(&self) -> Vec<UsageQuantity> {
        let queued = self.pending.iter().filter_map(|item| match item {
            Ok(ProviderEvent::Usage(quantity)) => Some(quantity.clone()),
            _ => None,
        });
        queued.chain(self.usage.known()).collect()
    }

    /// A timer of `limit` from now, cut to the attempt's deadline.
    pub(super) fn bound(&self, limit: Duration) -> (Instant, Duration) {
        bound(limit, self.deadline)
    }
}

/// A malformed event in a response's body came after its status line: the response began and
/// broke, so it ran and was ended (`interrupted`, retried or fallen back from before commit),
/// unlike a malformed head, which says the target cannot serve (`rejected`).
fn after_the_status_line(mut error: ProviderError) -> ProviderError {
    if error.code == AttemptCode::ProtocolError {
        error.class = ErrorClass::Interrupted;
    }
    error
}
