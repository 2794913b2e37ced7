//! The usual events read by hand. A text delta of one block,
//! `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"..."}}`,
//! straight to its text; and the events around a reply's text (`message_start`, a text
//! block's start and stop, `message_delta`, `message_stop`, `ping`) into the typed [`Event`].
//! serde's typed decoding of them went through a visitor per key and value, and every field
//! any event has.
//!
//! They read only those fields, each once in any order, and answer `None` for anything else
//! (another field, text with a `\u` escape, a number that is not a plain integer; and for
//! the text delta, another event or delta type), which serde then reads as before: what they
//! accept they decode to what serde would (tests hold them to that, on arbitrary events).

use std::borrow::Cow;

use super::{Block, Delta, Event, MessageStart, Usage};
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

/// `data` as serde reads it into an [`Event`], if it is one of the usual shapes around a
/// reply's text (above).
pub(super) fn event(data: &str) -> Option<Event<'_>> {
    let mut at = Cursor::new(data, 0);
    let mut event = Event {
        kind: Cow::Borrowed(""),
        message: None,
        index: None,
        content_block: None,
        delta: None,
        usage: None,
        error: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "type" => {
            seen.first(0)?;
            let kind = at.text()?;
            // A block's deltas are not read here: a text delta is `text_delta`'s, and the
            // others (thinking, tool arguments, signatures) are serde's, not read twice.
            (kind != "content_block_delta").then_some(())?;
            event.kind = Cow::Borrowed(kind);
            Some(())
        }
        "index" => {
            seen.first(1)?;
            event.index = Some(at.u32()?);
            Some(())
        }
        "content_block" => {
            seen.first(2)?;
            event.content_block = Some(block(at)?);
            Some(())
        }
        "delta" => {
            seen.first(3)?;
            event.delta = Some(delta(at)?);
            Some(())
        }
        "message" => {
            seen.first(4)?;
            event.message = Some(message(at)?);
            Some(())
        }
        "usage" => {
            seen.first(5)?;
            event.usage = Some(usage(at)?);
            Some(())
        }
        _ => None,
    })?;
    at.end()?;
    // serde requires the type.
    seen.has(0).then_some(event)
}

/// A text block as `content_block_start` opens it.
fn block(at: &mut Cursor<'_>) -> Option<Block> {
    let (mut kind, mut text) = (None, None);
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "type" => {
            seen.first(0)?;
            kind = Some(at.text()?.to_owned());
            Some(())
        }
        "text" => {
            seen.first(1)?;
            text = at.content()?.map(|t| Text::from(&*t));
            Some(())
        }
        _ => None,
    })?;
    Some(Block {
        kind: kind?,
        text,
        id: None,
        name: None,
        input: None,
        thinking: None,
        data: None,
    })
}

/// The message's delta: its stop reason.
fn delta(at: &mut Cursor<'_>) -> Option<Delta> {
    let mut delta = Delta {
        kind: None,
        text: None,
        partial_json: None,
        thinking: None,
        signature: None,
        stop_reason: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "type" => {
            seen.first(0)?;
            delta.kind = at.text_or_null()?.map(str::to_owned);
            Some(())
        }
        "stop_reason" => {
            seen.first(1)?;
            delta.stop_reason = at.text_or_null()?.map(str::to_owned);
            Some(())
        }
        // Not read: serde skips it.
        "stop_sequence" => seen.first(2).and_then(|()| at.ignored_text()),
        _ => None,
    })?;
    Some(delta)
}

/// `message_start`'s message: its model and usage (the rest serde skips).
fn message(at: &mut Cursor<'_>) -> Option<MessageStart> {
    let (mut model, mut usage_read) = (None, None);
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "model" => {
            seen.first(0)?;
            model = at.text_or_null()?.map(Text::from);
            Some(())
        }
        "usage" => {
            seen.first(1)?;
            usage_read = Some(usage(at)?);
            Some(())
        }
        "content" => seen.first(2).and_then(|()| at.empty_array()),
        "id" => seen.first(3).and_then(|()| at.ignored_text()),
        "type" => seen.first(4).and_then(|()| at.ignored_text()),
        "role" => seen.first(5).and_then(|()| at.ignored_text()),
        "stop_reason" => seen.first(6).and_then(|()| at.ignored_text()),
        "stop_sequence" => seen.first(7).and_then(|()| at.ignored_text()),
        _ => None,
    })?;
    Some(MessageStart {
        model,
        usage: usage_read,
    })
}

/// Token counts as plain integers (or null); a service tier, which serde skips.
fn usage(at: &mut Cursor<'_>) -> Option<Usage> {
    let mut counts: [Option<u64>; 4] = [None; 4];
    let mut seen = Seen::default();
    at.object(|at, key| {
        let slot = match key {
            "input_tokens" => 0,
            "output_tokens" => 1,
            "cache_creation_input_tokens" => 2,
            "cache_read_input_tokens" => 3,
            "service_tier" => return seen.first(4).and_then(|()| at.ignored_text()),
            _ => return None,
        };
        seen.first(slot)?;
        counts[slot as usize] = if at.null().is_some() {
            None
        } else {
            Some(at.integer()?)
        };
        Some(())
    })?;
    let [
        input_tokens,
        output_tokens,
        cache_creation_input_tokens,
        cache_read_input_tokens,
    ] = counts;
    Some(Usage {
        input_tokens,
        output_tokens,
        cache_creation_input_tokens,
        cache_read_input_tokens,
        server_tool_use: None,
    })
}

#[cfg(test)]
mod tests;
