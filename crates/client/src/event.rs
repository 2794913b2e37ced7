//! What a resuming stream needs of an event: its sequence, its execution's id, and whether it
//! is the last. [`pb::ExecutionEvent`] has them all; a caller that reads only part of each
//! event (a load tool decoding a few fields and skipping the rest, as protobuf lets any reader)
//! gives its own message with these fields' tags.

use crate::pb;
use crate::pb::execution_event::Payload;

/// An event as a resuming stream reads it off the wire.
pub trait Event: prost::Message + Default + Send + 'static {
    /// `ExecutionEvent.sequence`.
    fn sequence(&self) -> u64;
    /// `ExecutionEvent.execution_id` (read from the first event only).
    fn execution_id(&self) -> String;
    /// Whether it is `execution.completed` or `execution.failed`.
    fn is_terminal(&self) -> bool;
}

impl Event for pb::ExecutionEvent {
    fn sequence(&self) -> u64 {
        self.sequence
    }

    fn execution_id(&self) -> String {
        self.execution_id.clone()
    }

    fn is_terminal(&self) -> bool {
        matches!(
            self.payload,
            Some(Payload::Completed(_) | Payload::Failed(_))
        )
    }
}
