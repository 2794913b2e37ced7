//! Words as the scripted provider cuts and counts them: whitespace as `char::is_whitespace`
//! has it, ASCII read a byte (or 128 bytes) at a time, the rest decoded.

/// Whether an ASCII byte is whitespace as `char::is_whitespace` has it (tab, line feed,
/// vertical tab, form feed, carriage return, space: the vertical tab too, unlike
/// `u8::is_ascii_whitespace`), so ends a word.
pub(super) fn ends_word(byte: u8) -> bool {
    matches!(byte, b'\t'..=b'\r' | b' ')
}

/// How many words `text` has, as `split_whitespace` counts them: for ASCII text, the bytes
/// that follow whitespace (or start the text) and are not whitespace.
pub(super) fn count_words(text: &str) -> usize {
    if !text.is_ascii() {
        return text.split_whitespace().count();
    }
    tally(text.as_bytes(), |before, byte| {
        ends_word(before) & !ends_word(byte)
    })
}

/// How many of `bytes`, each with the byte before it (a space before the first), `hit`
/// counts. In byte-sized counts over 128 bytes at a time, which the compiler keeps 16 to a
/// register: about 3 instructions a byte, where a count byte by byte takes 10 or more.
pub(super) fn tally(bytes: &[u8], hit: impl Fn(u8, u8) -> bool) -> usize {
    let first = bytes
        .first()
        .map_or(0, |&byte| usize::from(hit(b' ', byte)));
    let after = bytes.get(1..).unwrap_or_default();
    let pairs = bytes.chunks(128).zip(after.chunks(128));
    let counts = pairs.map(|(before, after)| {
        let hits = before.iter().zip(after);
        usize::from(hits.fold(0u8, |n, (&before, &byte)| n + u8::from(hit(before, byte))))
    });
    first + counts.sum::<usize>()
}

/// The length of the first word of `text` with the whitespace character after it, as
/// `split_inclusive(char::is_whitespace)` cuts: ASCII a byte at a time, the rest decoded.
pub(super) fn word_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte.is_ascii() {
            if ends_word(byte) {
                return i + 1;
            }
            i += 1;
        } else {
            let c = text[i..].chars().next().unwrap_or_default();
            i += c.len_utf8();
            if c.is_whitespace() {
                return i;
            }
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_counted_as_split_whitespace_counts_them() {
        let texts = [
            "",
            " ",
            "a",
            " a",
            "a ",
            "hello big  world ",
            "\t\n\x0b\x0c\r x\x0by\x1cz",
            "é ü\tß\n",
            "nb\u{a0}sp\u{3000}wide\u{2028}line\u{85}next",
        ];
        for text in texts {
            let want = text.split_whitespace().count();
            assert_eq!(count_words(text), want, "{text:?}");
        }
        // Words on either side of the 128-byte blocks the count goes by.
        for n in 120..=136 {
            for text in [
                format!("{} {}  c", "a".repeat(n), "b".repeat(n)),
                format!("{}x{}", " ".repeat(n), " y".repeat(n)),
            ] {
                assert_eq!(count_words(&text), text.split_whitespace().count(), "{n}");
            }
        }
        // Every ASCII byte beside every other, so each one's class is checked both ways.
        for a in 0..=127u8 {
            for b in 0..=127u8 {
                let text = String::from_utf8(vec![b'w', a, b, b'w']).unwrap();
                assert_eq!(
                    count_words(&text),
                    text.split_whitespace().count(),
                    "{text:?}"
                );
            }
        }
    }
}
