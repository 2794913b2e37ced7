//! The usual chunk read by hand: a text delta (or a role, a refusal, the finish) of the one
//! choice, with the fields every server adds around it. serde's typed decoding of such a
//! chunk went through a visitor per key and value and scanned every string twice.
//!
//! It reads only that shape, and the last chunk's token counts, and answers `None` for
//! anything else (an escape outside the delta's text, or a `\u` escape in it; another field,
//! a second choice, a tool call, a count that is not a plain integer, a number it does not
//! expect, a known field twice), which serde then reads as before. So what it
//! accepts it decodes to the very `Chunk` serde would (a test holds the two to that, on
//! arbitrary chunks), and what it does not is no concern of its own.

use crate::execution::Text;
use crate::provider::scan::{Cursor, Seen};

use super::content::Content;
use super::{Choice, Chunk, CompletionDetails, Delta, PromptDetails, Usage};

/// `data`, if it is a chunk of the usual shape, and where its delta's text is (from its
/// opening quote to past its closing one), if it has one.
fn read(data: &str) -> Option<(Chunk, Spans)> {
    let mut at = Cursor::new(data, 0);
    let mut spans = Spans::default();
    let mut chunk = Chunk {
        model: None,
        choices: None,
        usage: None,
        x_groq: None,
        error: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "id" => seen.first(0).and_then(|()| at.ignored_text()),
        "object" => seen.first(1).and_then(|()| at.ignored_text()),
        "system_fingerprint" => seen.first(2).and_then(|()| at.ignored_text()),
        "service_tier" => seen.first(3).and_then(|()| at.ignored_text()),
        "created" => seen.first(4).and_then(|()| at.integer().map(drop)),
        "model" => {
            seen.first(5)?;
            chunk.model = at.text_or_null()?.map(Text::from);
            Some(())
        }
        "choices" => {
            seen.first(6)?;
            chunk.choices = choices(at, &mut spans.text)?;
            Some(())
        }
        "usage" => {
            seen.first(7)?;
            chunk.usage = usage(at)?;
            Some(())
        }
        // OpenAI's padding, a string of random length on every chunk.
        "obfuscation" => {
            seen.first(8)?;
            let start = at.pos;
            at.ignored_text()?;
            spans.pad = Some((start, at.pos));
            Some(())
        }
        _ => None,
    })?;
    at.end()?;
    Some((chunk, spans))
}

/// Where a chunk's delta text and its padding are, each from its opening quote to past its
/// closing one.
#[derive(Debug, Default)]
struct Spans {
    text: Option<(usize, usize)>,
    pad: Option<(usize, usize)>,
}

/// `choices`: null, empty, or one choice; where its delta's text is read, in `text_at`.
fn choices(
    at: &mut Cursor<'_>,
    text_at: &mut Option<(usize, usize)>,
) -> Option<Option<Vec<Choice>>> {
    if at.null().is_some() {
        return Some(None);
    }
    at.expect(b'[')?;
    if at.eat(b']') {
        return Some(Some(Vec::new()));
    }
    let choice = choice(at, text_at)?;
    at.expect(b']')?;
    Some(Some(vec![choice]))
}

fn choice(at: &mut Cursor<'_>, text_at: &mut Option<(usize, usize)>) -> Option<Choice> {
    let mut choice = Choice {
        index: 0,
        delta: None,
        finish_reason: None,
        content_filter_results: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| {
        match key {
            "index" => {
                seen.first(0)?;
                choice.index = at.u32()?;
            }
            "delta" => {
                seen.first(1)?;
                if at.null().is_none() {
                    choice.delta = Some(delta(at, text_at)?);
                }
            }
            "finish_reason" => {
                seen.first(2)?;
                choice.finish_reason = at.text_or_null()?.map(str::to_owned);
            }
            "logprobs" => {
                seen.first(3)?;
                at.null()?;
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(choice)
}

fn delta(at: &mut Cursor<'_>, text_at: &mut Option<(usize, usize)>) -> Option<Delta> {
    let mut delta = Delta {
        content: None,
        refusal: None,
        reasoning_content: None,
        reasoning: None,
        tool_calls: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| {
        match key {
            "role" => {
                seen.first(0)?;
                at.ignored_text()?;
            }
            "content" => {
                seen.first(1)?;
                let start = at.pos;
                delta.content = at.content()?.map(|t| Content::Text(Text::from(&*t)));
                if delta.content.is_some() {
                    *text_at = Some((start, at.pos));
                }
            }
            "refusal" => {
                seen.first(2)?;
                delta.refusal = at.text_or_null()?.map(Text::from);
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(delta)
}

/// `usage`: null, or the token counts (and their details) as plain integers. Any other
/// field (`total_tokens`, `audio_tokens`) must be an integer too, and is skipped as serde
/// skips it.
fn usage(at: &mut Cursor<'_>) -> Option<Option<Usage>> {
    if at.null().is_some() {
        return Some(None);
    }
    let mut usage = Usage {
        prompt_tokens: None,
        completion_tokens: None,
        prompt_tokens_details: None,
        completion_tokens_details: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| {
        match key {
            "prompt_tokens" => {
                seen.first(0)?;
                usage.prompt_tokens = Some(at.integer()?);
            }
            "completion_tokens" => {
                seen.first(1)?;
                usage.completion_tokens = Some(at.integer()?);
            }
            "prompt_tokens_details" => {
                seen.first(2)?;
                let cached_tokens = counts(at, "cached_tokens")?;
                usage.prompt_tokens_details = Some(PromptDetails { cached_tokens });
            }
            "completion_tokens_details" => {
                seen.first(3)?;
                let reasoning_tokens = counts(at, "reasoning_tokens")?;
                usage.completion_tokens_details = Some(CompletionDetails { reasoning_tokens });
            }
            _ => {
                at.integer()?;
            }
        }
        Some(())
    })?;
    Some(Some(usage))
}

/// An object of counts, each a plain integer: the one named `kept`, if it is there (once).
fn counts(at: &mut Cursor<'_>, kept: &str) -> Option<Option<u64>> {
    let mut count = None;
    at.object(|at, key| {
        let n = at.integer()?;
        if key == kept {
            if count.is_some() {
                return None;
            }
            count = Some(n);
        }
        Some(())
    })?;
    Some(count)
}

mod repeat;
#[cfg(test)]
mod tests;

pub(super) use repeat::Repeat;
