//! HPACK's Huffman code (RFC 7541 §5.2 and Appendix B), decoding only: the shim reads a
//! client's `:authority` value and never writes a Huffman string.
//!
//! The code is canonical (within a length, codes count up in symbol order; each longer
//! length continues from the last shorter code, shifted), so the bit length of each symbol
//! determines every code. [`LENGTHS`] is Appendix B's "len in bits" column; the tests check
//! codes built from it against Appendix B and strings against Appendix C.4.

/// The longest code, in bits (EOS and a few control bytes).
const MAX_BITS: usize = 30;

/// The end-of-string symbol: never part of a string; its leading bits pad the last byte.
const EOS: u16 = 256;

/// Each symbol's code length in bits: bytes 0 to 255, then EOS (RFC 7541 Appendix B).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

/// The canonical code's shape: how many codes each length has, and the symbols in code
/// order (by length, then by symbol).
struct Canonical {
    counts: [u16; MAX_BITS + 1],
    symbols: [u16; 257],
}

const CODE: Canonical = canonical();

const fn canonical() -> Canonical {
    let mut counts = [0u16; MAX_BITS + 1];
    let mut symbol = 0;
    while symbol < LENGTHS.len() {
        counts[LENGTHS[symbol] as usize] += 1;
        symbol += 1;
    }
    let mut symbols = [0u16; 257];
    let mut next = 0;
    let mut length = 1;
    while length <= MAX_BITS {
        let mut symbol = 0;
        while symbol < LENGTHS.len() {
            if LENGTHS[symbol] as usize == length {
                symbols[next] = symbol as u16;
                next += 1;
            }
            symbol += 1;
        }
        length += 1;
    }
    Canonical { counts, symbols }
}

/// A Huffman string that RFC 7541 §5.2 says to treat as a decoding error.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Invalid {
    #[error("the string holds the EOS symbol")]
    Eos,
    #[error("the padding is longer than 7 bits or not the leading bits of EOS")]
    Padding,
}

/// Appends the bytes `encoded` stands for to `out`.
pub(super) fn decode(encoded: &[u8], out: &mut Vec<u8>) -> Result<(), Invalid> {
    // The bits of the symbol being read, how many, and where codes of that length begin
    // (`first`, their first code; `index`, their first place in the symbol list).
    let mut code: u32 = 0;
    let mut length = 0;
    let mut first: u32 = 0;
    let mut index: usize = 0;
    for &byte in encoded {
        for shift in (0..8).rev() {
            code |= u32::from(byte >> shift) & 1;
            length += 1;
            // The code is complete, so a symbol is found by MAX_BITS bits at the latest, and
            // `code` is never below the first code of its length.
            let count = u32::from(CODE.counts[length]);
            let offset = code.wrapping_sub(first);
            if offset < count {
                let symbol = CODE.symbols[index + offset as usize];
                if symbol == EOS {
                    return Err(Invalid::Eos);
                }
                out.push(symbol as u8);
                (code, length, first, index) = (0, 0, 0, 0);
            } else {
                index += count as usize;
                first = (first + count) << 1;
                code <<= 1;
            }
        }
    }
    // What is left must be fewer than 8 bits, all ones (the start of EOS). `code` was
    // shifted once past the last bit read.
    let pending = code >> 1;
    if length > 0 && (length > 7 || pending != (1 << length) - 1) {
        return Err(Invalid::Padding);
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    fn decoded(encoded: &[u8]) -> Result<Vec<u8>, Invalid> {
        let mut out = Vec::new();
        decode(encoded, &mut out).map(|()| out)
    }

    /// Each symbol's code, built from the lengths as the canonical code assigns them.
    fn codes() -> Vec<(u32, u8)> {
        let mut by_code: Vec<usize> = (0..LENGTHS.len()).collect();
        by_code.sort_by_key(|&s| (LENGTHS[s], s));
        let mut codes = vec![(0, 0); LENGTHS.len()];
        let mut code = 0u32;
        let mut previous = LENGTHS[by_code[0]];
        for (i, &symbol) in by_code.iter().enumerate() {
            if i > 0 {
                code = (code + 1) << (LENGTHS[symbol] - previous);
            }
            previous = LENGTHS[symbol];
            codes[symbol] = (code, LENGTHS[symbol]);
        }
        codes
    }

    #[test]
    fn the_lengths_give_appendix_b_codes() {
        let codes = codes();
        // (symbol, code, bits) rows of RFC 7541 Appendix B, from every length group.
        for (symbol, code, bits) in [
            (0, 0x1ff8, 13),
            (1, 0x7f_ffd8, 23),
            (10, 0x3fff_fffc, 30),
            (b' ' as usize, 0x14, 6),
            (b'%' as usize, 0x15, 6),
            (b'0' as usize, 0x0, 5),
            (b'A' as usize, 0x21, 6),
            (b'a' as usize, 0x3, 5),
            (b'z' as usize, 0x7b, 7),
            (b'<' as usize, 0x7ffc, 15),
            (b'\\' as usize, 0x7fff0, 19),
            (128, 0xfffe6, 20),
            (200, 0x3ff_ffe2, 26),
            (255, 0x3ff_ffee, 26),
            (256, 0x3fff_ffff, 30),
        ] {
            assert_eq!(codes[symbol], (code, bits), "symbol {symbol}");
        }
        // The code is complete (Kraft's sum is exactly 1), so every 30-bit run decodes.
        let kraft: u64 = LENGTHS
            .iter()
            .map(|&l| 1u64 << (MAX_BITS - l as usize))
            .sum();
        assert_eq!(kraft, 1 << MAX_BITS);
    }

    #[test]
    fn appendix_c4_strings_decode() {
        for (encoded, text) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            // C.6.1: a 26-byte date.
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
        ] {
            assert_eq!(decoded(&hex(encoded)).unwrap(), text.as_bytes(), "{text}");
        }
    }

    #[test]
    fn every_byte_round_trips_through_its_code() {
        let codes = codes();
        for symbol in 0..=255u8 {
            // The symbol's code, then ones to the byte's end.
            let (code, bits) = codes[usize::from(symbol)];
            let total = u32::from(bits).div_ceil(8) * 8;
            let padded = (u64::from(code) << (total - u32::from(bits)))
                | ((1u64 << (total - u32::from(bits))) - 1);
            let bytes = padded.to_be_bytes();
            let encoded = &bytes[8 - (total / 8) as usize..];
            assert_eq!(decoded(encoded).unwrap(), [symbol], "symbol {symbol}");
        }
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        // "a" is 00011: three bits of padding that are not all ones.
        assert_eq!(decoded(&[0b0001_1000]), Err(Invalid::Padding));
        // A whole byte of ones after a byte-aligned end.
        assert_eq!(decoded(&hex("a8eb 1064 9cbf ff")), Err(Invalid::Padding));
        // EOS itself: thirty ones.
        assert_eq!(decoded(&hex("ffff ffff")), Err(Invalid::Eos));
        assert_eq!(decoded(&[]), Ok(Vec::new()));
    }
}
