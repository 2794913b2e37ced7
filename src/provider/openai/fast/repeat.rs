//! A chunk like the last one, read at once: the bytes around its text compared with the
//! last chunk's.

use super::read;
use crate::execution::Text;
use crate::provider::openai::Chunk;
use crate::provider::openai::content::Content;
#[cfg(test)]
use crate::provider::openai::{Choice, Delta};
use crate::provider::scan::Cursor;

/// The chunks of one reply differ in their text and little else: after a chunk of a text
/// delta is read, the bytes around its text are kept, and a chunk that has the very same
/// bytes around a string is that chunk with that string for its text. It is read without
/// reading the rest again, which cost 3 000 instructions a chunk: the same bytes up to the
/// string put the reader at the same place, and the same bytes after it end it the same way.
/// OpenAI's padding, after the text, may be any plain string in each.
#[derive(Debug, Default)]
pub(in crate::provider::openai) struct Repeat {
    around: Option<Around>,
}

#[derive(Debug)]
struct Around {
    /// Up to the text's opening quote.
    before: Box<str>,
    /// After its closing quote: up to the padding's opening quote when there is padding.
    between: Box<str>,
    /// After the padding's closing quote, if there is padding.
    after: Option<Box<str>>,
}

impl Repeat {
    /// `data`, if it is a chunk of the usual shape ([`read`]); the bytes around its text
    /// kept when it is a chunk of text alone.
    pub(in crate::provider::openai) fn chunk(&mut self, data: &str) -> Option<Chunk> {
        let (chunk, spans) = read(data)?;
        if let Some((start, end)) = spans.text
            && only_text(&chunk)
        {
            let (between, after) = match spans.pad {
                None => (&data[end..], None),
                Some((pad, past)) if pad >= end => (&data[end..pad], Some(data[past..].into())),
                // Padding before the text: not kept.
                Some(_) => return Some(chunk),
            };
            self.around = Some(Around {
                before: data[..start].into(),
                between: between.into(),
                after,
            });
        }
        Some(chunk)
    }

    /// The text of `data`, if it is the kept chunk with another text: a chunk with nothing
    /// else a decoder has not already seen (its model, which the kept chunk also named).
    pub(in crate::provider::openai) fn again(&self, data: &str) -> Option<Text> {
        let around = self.around.as_ref()?;
        let rest = data.strip_prefix(&*around.before)?;
        let mut at = Cursor::new(data, data.len() - rest.len());
        let text = at.content()??;
        let rest = data[at.pos..].strip_prefix(&*around.between)?;
        let rest = match &around.after {
            None => rest,
            Some(after) => {
                at.pos = data.len() - rest.len();
                at.text()?;
                data[at.pos..].strip_prefix(&**after)?
            }
        };
        if !rest.is_empty() {
            return None;
        }
        Some(Text::from(&*text))
    }
}

/// A chunk of one choice's text delta and nothing else.
#[cfg(test)]
pub(super) fn text_chunk(model: Option<Text>, text: Text) -> Chunk {
    Chunk {
        model,
        choices: Some(vec![Choice {
            index: 0,
            delta: Some(Delta {
                content: Some(Content::Text(text)),
                refusal: None,
                reasoning_content: None,
                reasoning: None,
                tool_calls: None,
            }),
            finish_reason: None,
            content_filter_results: None,
        }]),
        usage: None,
        x_groq: None,
        error: None,
    }
}

/// Whether `chunk` holds one choice's text delta and nothing else.
fn only_text(chunk: &Chunk) -> bool {
    let Some([choice]) = chunk.choices.as_deref() else {
        return false;
    };
    let Some(delta) = &choice.delta else {
        return false;
    };
    chunk.usage.is_none()
        && chunk.x_groq.is_none()
        && chunk.error.is_none()
        && choice.index == 0
        && choice.finish_reason.is_none()
        && choice.content_filter_results.is_none()
        && matches!(delta.content, Some(Content::Text(_)))
        && delta.refusal.is_none()
        && delta.reasoning_content.is_none()
        && delta.reasoning.is_none()
        && delta.tool_calls.is_none()
}
