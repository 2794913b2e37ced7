//! The usual `response.output_text.delta` read by hand: a piece of output text with the
//! fields OpenAI sends around it,
//! `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_…",
//! "output_index":0,"content_index":0,"delta":"…","logprobs":[],"obfuscation":"…"}`.
//! serde's typed decoding of it went through a visitor per key and value, and every field
//! any event has.
//!
//! It reads only that shape, its fields once each in any order, and answers `None` for
//! anything else (another event type, another field or a value of another form, text with a
//! `\u` escape), which serde then reads as before: what it accepts it decodes to what serde
//! would (a test holds the two to that, on arbitrary events).

use crate::execution::Text;
use crate::provider::scan::{Cursor, Seen};

/// The text of `data`, if it is an output text delta of the usual shape.
pub(super) fn text_delta(data: &str) -> Option<Text> {
    let mut at = Cursor::new(data, 0);
    let mut text = None;
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "type" => seen
            .first(0)
            .and_then(|()| at.tag("response.output_text.delta")),
        "delta" => {
            seen.first(1)?;
            text = Some(Text::from(&*at.written()?));
            Some(())
        }
        // serde reads it as a `u32`.
        "output_index" => seen.first(2).and_then(|()| at.u32().map(drop)),
        "sequence_number" => seen.first(3).and_then(|()| at.integer().map(drop)),
        "content_index" => seen.first(4).and_then(|()| at.integer().map(drop)),
        "item_id" => seen.first(5).and_then(|()| at.text().map(drop)),
        "logprobs" => seen.first(6).and_then(|()| at.empty_array()),
        // OpenAI's padding, a string of random length on every event.
        "obfuscation" => seen.first(7).and_then(|()| at.text().map(drop)),
        _ => None,
    })?;
    at.end()?;
    // The event's type, or serde's to read.
    seen.has(0).then_some(())?;
    text
}

#[cfg(test)]
mod tests;
