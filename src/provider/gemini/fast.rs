//! The usual chunk read by hand: one candidate's text part, with the fields Gemini sends
//! around it, `{"candidates":[{"content":{"parts":[{"text":"…"}],"role":"model"},"index":0}],
//! "usageMetadata":{…},"modelVersion":"…","responseId":"…"}`. serde's typed decoding of it went
//! through a visitor per key and value, and a vector per candidate and part.
//!
//! It reads only that shape, its fields once each in any order, and answers `None` for
//! anything else (another field, a second candidate or part, a finish reason, a thought, a
//! tool call, text with a `\u` escape), which serde then reads as before: what it accepts it
//! decodes to what serde would (a test holds the two to that, on arbitrary chunks).

use super::Usage;
use crate::execution::Text;
use crate::provider::scan::{Cursor, Seen};

/// A chunk of one text part: the text, the model version and the usage it names.
#[derive(Debug)]
pub(super) struct TextChunk {
    pub text: Text,
    pub model: Option<Text>,
    pub usage: Option<Usage>,
}

/// `data`, if it is a chunk of the usual shape.
pub(super) fn text_chunk(data: &str) -> Option<TextChunk> {
    let mut at = Cursor::new(data, 0);
    let (mut text, mut model, mut usage) = (None, None, None);
    let mut seen = Seen::default();
    at.object(|at, key| {
        match key {
            "candidates" => {
                seen.first(0)?;
                at.expect(b'[')?;
                text = Some(candidate(at)?);
                at.expect(b']')?;
            }
            "modelVersion" => {
                seen.first(1)?;
                model = Some(Text::from(at.text()?));
            }
            "usageMetadata" => {
                seen.first(2)?;
                usage = Some(usage_metadata(at)?);
            }
            "responseId" => seen.first(3).and_then(|()| at.text().map(drop))?,
            _ => return None,
        }
        Some(())
    })?;
    at.end()?;
    Some(TextChunk {
        text: text?,
        model,
        usage,
    })
}

/// A candidate of index 0 (or none given) whose content is one text part.
fn candidate(at: &mut Cursor<'_>) -> Option<Text> {
    let mut text = None;
    let mut seen = Seen::default();
    at.object(|at, key| match key {
        "content" => {
            seen.first(0)?;
            let mut inner = Seen::default();
            at.object(|at, key| match key {
                "parts" => {
                    inner.first(0)?;
                    at.expect(b'[')?;
                    text = Some(part(at)?);
                    at.expect(b']')
                }
                "role" => inner.first(1).and_then(|()| at.text().map(drop)),
                _ => None,
            })
        }
        // Only the first candidate is this call's reply.
        "index" => seen
            .first(1)
            .and_then(|()| (at.integer()? == 0).then_some(())),
        _ => None,
    })?;
    text
}

/// A part of text alone.
fn part(at: &mut Cursor<'_>) -> Option<Text> {
    let mut text = None;
    at.object(|at, key| match key {
        "text" if text.is_none() => {
            text = Some(Text::from(&*at.written()?));
            Some(())
        }
        _ => None,
    })?;
    text
}

/// `usageMetadata`: its counts, and the counts by modality, which the adapter does not use.
fn usage_metadata(at: &mut Cursor<'_>) -> Option<Usage> {
    let mut usage = Usage {
        prompt_token_count: None,
        candidates_token_count: None,
        thoughts_token_count: None,
        cached_content_token_count: None,
    };
    let mut seen = Seen::default();
    at.object(|at, key| {
        match key {
            "promptTokenCount" => {
                seen.first(0)?;
                usage.prompt_token_count = Some(at.integer()?);
            }
            "candidatesTokenCount" => {
                seen.first(1)?;
                usage.candidates_token_count = Some(at.integer()?);
            }
            "thoughtsTokenCount" => {
                seen.first(2)?;
                usage.thoughts_token_count = Some(at.integer()?);
            }
            "cachedContentTokenCount" => {
                seen.first(3)?;
                usage.cached_content_token_count = Some(at.integer()?);
            }
            "totalTokenCount" => seen.first(4).and_then(|()| at.integer().map(drop))?,
            "promptTokensDetails" => seen.first(5).and_then(|()| by_modality(at))?,
            "candidatesTokensDetails" => seen.first(6).and_then(|()| by_modality(at))?,
            _ => return None,
        }
        Some(())
    })?;
    Some(usage)
}

/// A list of counts by modality, `[{"modality":"TEXT","tokenCount":9}]`, read past.
fn by_modality(at: &mut Cursor<'_>) -> Option<()> {
    at.expect(b'[')?;
    if at.eat(b']') {
        return Some(());
    }
    loop {
        let mut seen = Seen::default();
        at.object(|at, key| match key {
            "modality" => seen.first(0).and_then(|()| at.text().map(drop)),
            "tokenCount" => seen.first(1).and_then(|()| at.integer().map(drop)),
            _ => None,
        })?;
        if at.eat(b']') {
            return Some(());
        }
        at.expect(b',')?;
    }
}

#[cfg(test)]
mod tests;
