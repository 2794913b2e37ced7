//! The usual chunk read by hand: a text delta (or a role, a refusal, the finish) of the one
//! choice, with the fields every server adds around it. serde's typed decoding of such a
//! chunk went through a visitor per key and value and scanned every string twice.
//!
//! It reads only that shape, and answers `None` for anything else (an escape outside the
//! delta's text, or a `\u` escape in it; another field, a second choice, a tool call, usage,
//! a number it does not expect, a field twice), which serde then reads as before. So what it
//! accepts it decodes to the very `Chunk` serde would (a test holds the two to that, on
//! arbitrary chunks), and what it does not is no concern of its own.

use std::borrow::Cow;

use crate::execution::Text;

use super::content::Content;
use super::{Choice, Chunk, Delta};

/// `data`, if it is a chunk of the usual shape.
pub(super) fn chunk(data: &str) -> Option<Chunk> {
    let mut at = Cursor { text: data, pos: 0 };
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
            chunk.choices = at.choices()?;
            Some(())
        }
        "usage" => seen.first(7).and_then(|()| at.null()),
        _ => None,
    })?;
    at.end()?;
    Some(chunk)
}

/// The fields of one object read so far, a bit each: serde refuses an object that names one
/// of its fields twice.
#[derive(Default)]
struct Seen(u16);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        let bit = 1 << bit;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a [u8] {
        &self.text.as_bytes()[self.pos..]
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.rest().first() {
            self.pos += 1;
        }
    }

    /// The next byte after any whitespace, taken if it is `byte`.
    fn eat(&mut self, byte: u8) -> bool {
        self.space();
        let hit = self.rest().first() == Some(&byte);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// Nothing but whitespace left.
    fn end(&mut self) -> Option<()> {
        self.space();
        self.rest().is_empty().then_some(())
    }

    /// An object, each of its fields read by `field` (which reads the value, or gives up).
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            self.space();
            let key = self.text()?;
            self.expect(b':')?;
            self.space();
            field(self, key)?;
            if self.eat(b'}') {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    /// A string without escapes or control characters (serde refuses the latter; the former
    /// it decodes, and so does it here, by declining: but see `content`). One pass: the
    /// strings of a chunk are short, and a search's set-up cost more than the loop.
    fn text(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        if rest.first() != Some(&b'"') {
            return None;
        }
        let mut len = 0;
        loop {
            match *rest.get(1 + len)? {
                b'"' => break,
                b'\\' | 0..0x20 => return None,
                _ => len += 1,
            }
        }
        let start = self.pos + 1;
        self.pos = start + len + 1;
        // Cut at ASCII quotes: on character boundaries.
        self.text.get(start..start + len)
    }

    /// A delta's content: borrowed when it has no escapes, with the simple escapes decoded
    /// when it has (a `\u` escape, and any escape serde would refuse, is left to serde). Only
    /// here: text is where escapes come (a newline in the answer), and the other strings keep
    /// the plain borrow, which costs less.
    fn content(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null().is_some() {
            return Some(None);
        }
        let rest = self.rest();
        if rest.first() != Some(&b'"') {
            return None;
        }
        let mut at = 1;
        loop {
            match *rest.get(at)? {
                b'"' => break,
                b'\\' => return self.escaped(at).map(|t| Some(Cow::Owned(t))),
                0..0x20 => return None,
                _ => at += 1,
            }
        }
        let text = self.text.get(self.pos + 1..self.pos + at)?;
        self.pos += at + 1;
        Some(Some(Cow::Borrowed(text)))
    }

    /// The rest of a string whose first escape is `at` bytes in, decoded. Apart, so the usual
    /// string's path stays small.
    #[inline(never)]
    fn escaped(&mut self, mut at: usize) -> Option<String> {
        let (text, base) = (self.text, self.pos);
        let rest = &text.as_bytes()[base..];
        // Cut at ASCII bytes throughout: on character boundaries.
        let piece = |from: usize, to: usize| text.get(base + from..base + to);
        let mut decoded = String::with_capacity(rest.len().min(2 * at));
        let mut run = 1;
        loop {
            match *rest.get(at)? {
                b'"' => {
                    decoded.push_str(piece(run, at)?);
                    self.pos += at + 1;
                    return Some(decoded);
                }
                b'\\' => {
                    decoded.push_str(piece(run, at)?);
                    decoded.push(match *rest.get(at + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    });
                    at += 2;
                    run = at;
                }
                0..0x20 => return None,
                _ => at += 1,
            }
        }
    }

    fn ignored_text(&mut self) -> Option<()> {
        self.text_or_null().map(drop)
    }

    fn null(&mut self) -> Option<()> {
        self.rest().starts_with(b"null").then(|| self.pos += 4)
    }

    fn text_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.null().is_some() {
            return Some(None);
        }
        self.text().map(Some)
    }

    /// An integer of plain digits (no sign, fraction, exponent or leading zero, which JSON
    /// does not allow) that fits a `u64`.
    fn integer(&mut self) -> Option<u64> {
        if self.rest().starts_with(b"0") && self.rest().get(1).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        let mut value: u64 = 0;
        let mut digits = 0;
        for &b in self.rest() {
            if !b.is_ascii_digit() {
                // A fraction or an exponent follows: not this reader's.
                if matches!(b, b'.' | b'e' | b'E') {
                    return None;
                }
                break;
            }
            value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            digits += 1;
        }
        if digits == 0 {
            return None;
        }
        self.pos += digits;
        Some(value)
    }

    /// `choices`: null, empty, or one choice.
    fn choices(&mut self) -> Option<Option<Vec<Choice>>> {
        if self.null().is_some() {
            return Some(None);
        }
        self.expect(b'[')?;
        if self.eat(b']') {
            return Some(Some(Vec::new()));
        }
        let choice = self.choice()?;
        self.expect(b']')?;
        Some(Some(vec![choice]))
    }

    fn choice(&mut self) -> Option<Choice> {
        let mut choice = Choice {
            index: 0,
            delta: None,
            finish_reason: None,
            content_filter_results: None,
        };
        let mut seen = Seen::default();
        self.object(|at, key| {
            match key {
                "index" => {
                    seen.first(0)?;
                    choice.index = u32::try_from(at.integer()?).ok()?;
                }
                "delta" => {
                    seen.first(1)?;
                    if at.null().is_none() {
                        choice.delta = Some(at.delta()?);
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

    fn delta(&mut self) -> Option<Delta> {
        let mut delta = Delta {
            content: None,
            refusal: None,
            reasoning_content: None,
            reasoning: None,
            tool_calls: None,
        };
        let mut seen = Seen::default();
        self.object(|at, key| {
            match key {
                "role" => {
                    seen.first(0)?;
                    at.ignored_text()?;
                }
                "content" => {
                    seen.first(1)?;
                    delta.content = at.content()?.map(|t| Content::Text(Text::from(&*t)));
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
}

#[cfg(test)]
mod tests;
