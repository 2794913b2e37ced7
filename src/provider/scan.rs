//! A JSON text read by hand, forward, for the few shapes a provider sends thousands of times
//! a reply (a text delta and the fields around it): serde's typed decoding of such an event
//! went through a visitor per key and value and scanned every string twice.
//!
//! A reader built of these answers `None` for anything it does not expect (an escape it does
//! not decode, a number of another form, a field twice), and serde then reads the text as
//! before: what a reader accepts, it must decode to what serde would, which each adapter's
//! tests hold it to on arbitrary events.

use std::borrow::Cow;

/// The fields of one object read so far, a bit each: serde refuses an object that names one
/// of its fields twice.
#[derive(Default)]
pub(in crate::provider) struct Seen(u16);

impl Seen {
    pub(in crate::provider) fn first(&mut self, bit: u32) -> Option<()> {
        let bit = 1 << bit;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }

    /// Whether field `bit` was read.
    pub(in crate::provider) fn has(&self, bit: u32) -> bool {
        self.0 & (1 << bit) != 0
    }

    /// Whether each of the fields `0..count` was read.
    pub(in crate::provider) fn all(&self, count: u32) -> bool {
        self.0 == (1 << count) - 1
    }
}

/// A place in one JSON text, read forward.
pub(in crate::provider) struct Cursor<'a> {
    text: &'a str,
    /// The offset of the next byte to read.
    pub(in crate::provider) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(in crate::provider) fn new(text: &'a str, pos: usize) -> Self {
        Self { text, pos }
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
    pub(in crate::provider) fn eat(&mut self, byte: u8) -> bool {
        self.space();
        let hit = self.rest().first() == Some(&byte);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(in crate::provider) fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// Nothing but whitespace left.
    pub(in crate::provider) fn end(&mut self) -> Option<()> {
        self.space();
        self.rest().is_empty().then_some(())
    }

    /// An object, each of its fields read by `field` (which reads the value, or gives up).
    pub(in crate::provider) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
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
    pub(in crate::provider) fn text(&mut self) -> Option<&'a str> {
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

    /// A string a model wrote (a delta's text): borrowed when it has no escapes, with the
    /// simple escapes decoded when it has (a `\u` escape, and any escape serde would refuse,
    /// is left to serde). Only for such text: that is where escapes come (a newline in the
    /// answer), and the other strings keep the plain borrow, which costs less.
    #[inline]
    pub(in crate::provider) fn written(&mut self) -> Option<Cow<'a, str>> {
        match self.plain()? {
            (end, b'"') => self.take(end).map(Cow::Borrowed),
            (at, b'\\') => self.escaped(at).map(Cow::Owned),
            _ => None,
        }
    }

    /// [`written`](Self::written) text, or null.
    pub(in crate::provider) fn content(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null().is_some() {
            return Some(None);
        }
        self.written().map(Some)
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

    /// An empty array (`[]`, maybe with whitespace within).
    pub(in crate::provider) fn empty_array(&mut self) -> Option<()> {
        self.expect(b'[')?;
        self.expect(b']')
    }

    pub(in crate::provider) fn ignored_text(&mut self) -> Option<()> {
        self.text_or_null().map(drop)
    }

    pub(in crate::provider) fn null(&mut self) -> Option<()> {
        self.rest().starts_with(b"null").then(|| self.pos += 4)
    }

    pub(in crate::provider) fn text_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.null().is_some() {
            return Some(None);
        }
        self.text().map(Some)
    }

    /// A plain string that is `expected` (an event's `type`, say).
    pub(in crate::provider) fn tag(&mut self, expected: &str) -> Option<()> {
        (self.text()? == expected).then_some(())
    }

    /// An [`integer`](Self::integer) that fits a `u32` (an index, as serde reads it).
    pub(in crate::provider) fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.integer()?).ok()
    }

    /// An integer of plain digits (no sign, fraction, exponent or leading zero, which JSON
    /// does not allow) that fits a `u64`.
    pub(in crate::provider) fn integer(&mut self) -> Option<u64> {
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

/// Pieces of arbitrary JSON for the readers' property tests.
#[cfg(test)]
pub(in crate::provider) mod arbitrary {
    use proptest::prelude::*;

    /// A string value a reader may or may not take: mostly plain or with the escapes it
    /// decodes, now and then not ASCII, with a `\u` escape, or null.
    pub(in crate::provider) fn text() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            6 => "[ a-z]{0,8}".prop_map(|t| format!("\"{t}\"")),
            2 => Just(r#""a\"b\\c\n\td\/""#.to_owned()),
            1 => Just("\"é\"".to_owned()),
            1 => Just(r#""\u0041""#.to_owned()),
            1 => Just("null".to_owned()),
        ]
    }

    /// A number a reader may or may not take: mostly a plain integer, now and then one with a
    /// leading zero or a sign, a fraction, an exponent, one past a `u32`, or null.
    pub(in crate::provider) fn number() -> impl Strategy<Value = &'static str> + Clone {
        prop_oneof![
            8 => Just("0"),
            6 => Just("7"),
            4 => Just("123"),
            1 => Just("01"),
            1 => Just("-1"),
            1 => Just("1.5"),
            1 => Just("1e0"),
            1 => Just("4294967296"),
            1 => Just("null"),
        ]
    }

    /// An object of the `usual` fields (each `"key":value`) in any order, each left out now
    /// and then, and now and then an `odd` field among them: mostly the shape a reader takes,
    /// and its near misses.
    pub(in crate::provider) fn shaped(
        usual: Vec<BoxedStrategy<String>>,
        odd: impl Strategy<Value = String> + 'static,
    ) -> BoxedStrategy<String> {
        let kept = proptest::collection::vec(proptest::bool::weighted(0.95), usual.len());
        let odd = proptest::option::weighted(0.2, odd);
        let space = prop_oneof![Just(""), Just(" "), Just("\n")];
        let fields = (usual, kept, odd)
            .prop_map(|(usual, kept, odd)| {
                let kept = usual
                    .into_iter()
                    .zip(kept)
                    .filter_map(|(f, k)| k.then_some(f));
                kept.chain(odd).collect::<Vec<String>>()
            })
            .prop_shuffle();
        (fields, space)
            .prop_map(|(fields, space)| {
                format!("{{{space}{}{space}}}", fields.join(&format!(",{space}")))
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::special;

    proptest! {
        #[test]
        fn the_string_search_finds_what_a_byte_loop_finds(
            bytes in proptest::collection::vec(
                prop_oneof![
                    4 => 0x20u8..0x80,
                    1 => 0x80u8..,
                    1 => Just(b'"'),
                    1 => Just(b'\\'),
                    1 => 0u8..0x20,
                ],
                0..40,
            )
        ) {
            let want = bytes.iter().position(|&b| matches!(b, b'"' | b'\\' | 0..0x20));
            prop_assert_eq!(special(&bytes), want);
        }
    }
}
