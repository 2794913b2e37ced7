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

/// `data`, if it is a chunk of the usual shape, and where its delta's text is (from its
/// opening quote to past its closing one), if it has one.
fn read(data: &str) -> Option<(Chunk, Spans)> {
    let mut at = Cursor::new(data, 0);
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
        // OpenAI's padding, a string of random length on every chunk.
        "obfuscation" => {
            seen.first(8)?;
            let start = at.pos;
            at.ignored_text()?;
            at.pad_at = Some((start, at.pos));
            Some(())
        }
        _ => None,
    })?;
    at.end()?;
    let spans = Spans {
        text: at.text_at,
        pad: at.pad_at,
    };
    Some((chunk, spans))
}

/// Where a chunk's delta text and its padding are, each from its opening quote to past its
/// closing one.
#[derive(Debug, Default)]
struct Spans {
    text: Option<(usize, usize)>,
    pad: Option<(usize, usize)>,
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
    /// Where the delta's text was read, if it was (see [`Repeat`]).
    text_at: Option<(usize, usize)>,
    /// Where the padding was.
    pad_at: Option<(usize, usize)>,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str, pos: usize) -> Self {
        Self {
            text,
            pos,
            text_at: None,
            pad_at: None,
        }
    }

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
    /// it decodes, and so does it here, by declining: but see `content`).
    fn text(&mut self) -> Option<&'a str> {
        match self.plain()? {
            (end, b'"') => self.take(end),
            _ => None,
        }
    }

    /// Where the string at the cursor stops being plain: the offset (from its opening quote)
    /// of its first quote, backslash or control byte, and that byte. (Inlined, as `take`:
    /// as calls, the two cost the provider path 0.8% more instructions.)
    #[inline(always)]
    fn plain(&self) -> Option<(usize, u8)> {
        let rest = self.rest();
        if rest.first() != Some(&b'"') {
            return None;
        }
        let at = 1 + special(&rest[1..])?;
        Some((at, rest[at]))
    }

    /// The plain string at the cursor, whose closing quote is `end` bytes in.
    #[inline(always)]
    fn take(&mut self, end: usize) -> Option<&'a str> {
        let start = self.pos + 1;
        self.pos += end + 1;
        // Cut at ASCII quotes: on character boundaries.
        self.text.get(start..start + end - 1)
    }

    /// A delta's content: borrowed when it has no escapes, with the simple escapes decoded
    /// when it has (a `\u` escape, and any escape serde would refuse, is left to serde). Only
    /// here: text is where escapes come (a newline in the answer), and the other strings keep
    /// the plain borrow, which costs less.
    fn content(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null().is_some() {
            return Some(None);
        }
        match self.plain()? {
            (end, b'"') => self.take(end).map(|t| Some(Cow::Borrowed(t))),
            (at, b'\\') => self.escaped(at).map(|t| Some(Cow::Owned(t))),
            _ => None,
        }
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
        let rest = self.rest();
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        // A fraction or an exponent follows: not this reader's.
        if digits == 0 || matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        if digits > 1 && rest[0] == b'0' {
            return None;
        }
        let digit = |b: &u8| u64::from(b - b'0');
        // Nineteen digits always fit a u64; only a longer number is checked as it grows.
        let value = if digits <= 19 {
            rest[..digits]
                .iter()
                .fold(0, |value, b| value * 10 + digit(b))
        } else {
            rest[..digits].iter().try_fold(0u64, |value, b| {
                value.checked_mul(10)?.checked_add(digit(b))
            })?
        };
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
                    let start = at.pos;
                    delta.content = at.content()?.map(|t| Content::Text(Text::from(&*t)));
                    if delta.content.is_some() {
                        at.text_at = Some((start, at.pos));
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
}

/// Where the first `"`, `\\` or control character of `bytes` is, if anywhere: eight bytes at
/// a time, since a chunk's strings are read a byte at a time otherwise (five instructions
/// each, a third of all the reader cost).
fn special(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES * 0x80;
    // The high bit of each zero byte of `v`. Past the first zero byte a borrow may mark more,
    // so only the lowest mark is exact, which is the one wanted.
    let zeros = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut at = 0;
    while let Some(eight) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(eight.try_into().ok()?);
        let quote = zeros(word ^ (ONES * u64::from(b'"')));
        let backslash = zeros(word ^ (ONES * u64::from(b'\\')));
        // Below 0x20: the subtraction borrows, and the byte's own high bit is clear.
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        let hits = quote | backslash | control;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = bytes[at..]
        .iter()
        .position(|&b| matches!(b, b'"' | b'\\' | 0..0x20))?;
    Some(at + tail)
}

mod repeat;
#[cfg(test)]
mod tests;

pub(super) use repeat::Repeat;
