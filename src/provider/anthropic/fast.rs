//! The usual `content_block_delta` read by hand: a text delta of one block,
//! `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"..."}}`.
//! serde's typed decoding of it went through a visitor per key and value, and every field any
//! event has.
//!
//! It reads only that shape, its fields once each in any order, and answers `None` for
//! anything else (another event or delta type, another field, text with a `\u` escape, an
//! index that is not a plain integer), which serde then reads as before: what it accepts it
//! decodes to what serde would (a test holds the two to that, on arbitrary events).

use crate::execution::Text;
use crate::provider::scan::{Cursor, Seen};

/// The block index and the text of `data`, if it is a text delta of the usual shape.
pub(super) fn text_delta(data: &str) -> Option<(u32, Text)> {
    let mut at = Cursor::new(data, 0);
    let (mut index, mut text) = (None, None);
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "type" => seen.first(0).and_then(|()| at.tag("content_block_delta")),
        "index" => {
            seen.first(1)?;
            index = Some(at.u32()?);
            Some(())
        }
        "delta" => {
            seen.first(2)?;
            let mut inner = Seen::default();
            at.object(|at, key| match key {
                "type" => inner.first(0).and_then(|()| at.tag("text_delta")),
                "text" => {
                    inner.first(1)?;
                    text = Some(Text::from(&*at.written()?));
                    Some(())
                }
                _ => None,
            })?;
            // Both, or serde's to read.
            inner.all(2).then_some(())
        }
        _ => None,
    })?;
    at.end()?;
    // The event's type, its index and its delta, or serde's to read.
    seen.all(3).then_some(())?;
    Some((index?, text?))
}

#[cfg(test)]
mod tests;
