//! The usual `contentBlockDelta` read by hand: a text delta of one block, with Bedrock's
//! padding, `{"contentBlockIndex":0,"delta":{"text":"..."},"p":"..."}`. serde's typed
//! decoding of it went through a visitor per key and value, each string checked as UTF-8
//! once more.
//!
//! It reads only that shape, its fields once each in any order, and answers `None` for
//! anything else (another field, a tool's input or reasoning in the delta, text with a `\u`
//! escape, an index that is not a plain integer), which serde then reads as before: what it
//! accepts it decodes to what serde would (a test holds the two to that, on arbitrary
//! payloads, in `tests.rs`).

use crate::execution::Text;
use crate::provider::scan::{Cursor, Seen};

/// The block index and the text of `payload`, if it is a text delta of the usual shape.
pub(super) fn text_delta(payload: &[u8]) -> Option<(u32, Text)> {
    let data = std::str::from_utf8(payload).ok()?;
    let mut at = Cursor::new(data, 0);
    let (mut index, mut text) = (None, None);
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "contentBlockIndex" => {
            seen.first(0)?;
            index = Some(at.u32()?);
            Some(())
        }
        "delta" => {
            seen.first(1)?;
            let mut inner = Seen::default();
            at.object(|at, key| match key {
                "text" => {
                    inner.first(0)?;
                    text = Some(Text::from(&*at.written()?));
                    Some(())
                }
                _ => None,
            })
        }
        // Bedrock's padding, a string of random length on every event.
        "p" => seen.first(2).and_then(|()| at.text().map(drop)),
        _ => None,
    })?;
    at.end()?;
    Some((index?, text?))
}
