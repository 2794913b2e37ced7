//! The header block side of the shim: finds each `:authority` a literal field carries
//! (RFC 7541 §6.2) and, when its value is not a valid authority, writes the same literal
//! with a valid value of the same decoded length.
//!
//! Only a literal's value changes, and never its length: the representation (with
//! incremental indexing, without, never indexed) and the name (static index 1, or the
//! literal name as the client wrote it) are copied, so the entry it adds to h2's dynamic
//! table, if any, has the size the client's encoder counted. The new value is written raw
//! (H = 0), which any decoder takes in place of a Huffman string.

use std::borrow::Cow;

use http::uri::Authority;

use super::huffman;

/// The static table's index of `:authority` (RFC 7541 Appendix A).
const AUTHORITY_INDEX: usize = 1;

const AUTHORITY: &[u8] = b":authority";

/// The replacement, cut or lengthened (with `FILL`) to the value's length. Any reg-name
/// would do: the runtime never reads the authority.
const REPLACEMENT: &[u8] = b"localhost";
const FILL: u8 = b'x';

/// Continuation bytes an integer may take (RFC 7541 §5.1): up to 2^28, far beyond any
/// block the shim holds; a longer one does not parse and the block is left to h2.
const MAX_INTEGER_BYTES: usize = 4;

/// The block with every `:authority` value h2 would refuse replaced, or `None` when it
/// has none. A block that does not parse is left as it is (`None`): h2 refuses it, with
/// the error HTTP/2 prescribes.
///
/// A literal whose name is an index into the dynamic table is not followed (knowing which
/// name an index holds would mean keeping the table): no client known to the runtime
/// names `:authority` that way (grpcio writes the name literally, h2 and grpc-go use the
/// static index). Nor is an empty value replaced: no valid authority is empty.
pub(super) fn rewrite(block: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    // `block[..copied]` is in `out` already.
    let mut copied = 0;
    let mut at = 0;
    while let Some(&first) = block.get(at) {
        if first & 0x80 != 0 {
            // An indexed field: only what a literal added earlier, which h2 holds as
            // rewritten.
            at = integer(block, at, 7)?.1;
            continue;
        }
        if first & 0xe0 == 0x20 {
            // A dynamic table size update.
            at = integer(block, at, 5)?.1;
            continue;
        }
        // A literal: with incremental indexing (01), or without or never indexed (000x).
        let prefix = if first & 0x40 != 0 { 6 } else { 4 };
        let (index, after_name) = integer(block, at, prefix)?;
        let (authority, value_at) = if index == 0 {
            let name = string(block, after_name)?;
            (is_authority(&name), name.end)
        } else {
            (index == AUTHORITY_INDEX, after_name)
        };
        let value = string(block, value_at)?;
        if authority && let Some(valid) = replacement(&value) {
            let out = out.get_or_insert_with(|| Vec::with_capacity(block.len() + valid.len()));
            out.extend_from_slice(&block[copied..value_at]);
            integer_into(out, 0, 7, valid.len());
            out.extend_from_slice(&valid);
            copied = value.end;
        }
        at = value.end;
    }
    let mut out = out?;
    out.extend_from_slice(&block[copied..]);
    Some(out)
}

/// A string literal (RFC 7541 §5.2) as it is in the block.
struct Str<'a> {
    huffman: bool,
    bytes: &'a [u8],
    /// Where the next representation begins.
    end: usize,
}

impl Str<'_> {
    /// What it stands for; `None` if its Huffman code is invalid.
    fn decoded(&self) -> Option<Cow<'_, [u8]>> {
        if !self.huffman {
            return Some(Cow::Borrowed(self.bytes));
        }
        let mut out = Vec::with_capacity(self.bytes.len() * 8 / 5);
        huffman::decode(self.bytes, &mut out).ok()?;
        Some(Cow::Owned(out))
    }
}

fn string(block: &[u8], at: usize) -> Option<Str<'_>> {
    let huffman = block.get(at)? & 0x80 != 0;
    let (length, start) = integer(block, at, 7)?;
    let end = start.checked_add(length)?;
    Some(Str {
        huffman,
        bytes: block.get(start..end)?,
        end,
    })
}

/// Whether a literal name is `:authority`. Huffman codes are at least 5 bits a byte, so
/// only a string of at most ten bytes needs decoding.
fn is_authority(name: &Str<'_>) -> bool {
    name.bytes.len() <= AUTHORITY.len() && name.decoded().is_some_and(|n| *n == *AUTHORITY)
}

/// A valid authority of `value`'s length, if `value` is not one.
fn replacement(value: &Str<'_>) -> Option<Vec<u8>> {
    // A string whose Huffman code is invalid is h2's to refuse.
    let decoded = value.decoded()?;
    if decoded.is_empty() || Authority::try_from(&*decoded).is_ok() {
        return None;
    }
    tracing::debug!(
        authority = %String::from_utf8_lossy(&decoded),
        "an :authority h2 would refuse, on a Unix socket: replaced by a valid one of its length"
    );
    Some(
        REPLACEMENT
            .iter()
            .copied()
            .chain(std::iter::repeat(FILL))
            .take(decoded.len())
            .collect(),
    )
}

/// An integer with an `prefix`-bit prefix at `block[at]` (RFC 7541 §5.1), and where it ends.
fn integer(block: &[u8], at: usize, prefix: u32) -> Option<(usize, usize)> {
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(*block.get(at)?) & max;
    let mut at = at + 1;
    if value < max {
        return Some((value, at));
    }
    for shift in (0..MAX_INTEGER_BYTES).map(|i| 7 * i) {
        let byte = *block.get(at)?;
        at += 1;
        value += usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((value, at));
        }
    }
    None
}

/// Writes `value` with a `prefix`-bit prefix, the byte's other bits being `high`.
fn integer_into(out: &mut Vec<u8>, high: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

#[cfg(test)]
pub(super) mod tests {

    use super::*;

    /// A raw (H = 0) string literal.
    pub(in crate::server::authority) fn raw(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        integer_into(&mut out, 0, 7, text.len());
        out.extend_from_slice(text);
        out
    }

    /// `first` (a representation's first byte, its index in the low bits), then the name
    /// (if literal) and the value, raw.
    pub(in crate::server::authority) fn literal(
        first: u8,
        name: Option<&[u8]>,
        value: &[u8],
    ) -> Vec<u8> {
        let mut out = vec![first];
        if let Some(name) = name {
            out.extend(raw(name));
        }
        out.extend(raw(value));
        out
    }

    /// What grpcio 1.85 sent as its first request's block on `unix:/tmp/h23cap/mr.sock`:
    /// every field a literal with incremental indexing, names written out, nothing
    /// Huffman-coded.
    pub(in crate::server::authority) const GRPCIO: &str = "40053a706174681c2f677270632e6865616c74682e76312e4865616c74682f436865636b400a3a617574686f7269747916746d702532466832336361702532466d722e736f636b8386400c636f6e74656e742d74797065106170706c69636174696f6e2f677270634002746508747261696c6572734014677270632d6163636570742d656e636f64696e67176964656e746974792c206465666c6174652c20677a6970400c677270632d74696d656f7574023553400a757365722d6167656e7430677270632d707974686f6e2f312e38352e3320677270632d632f35382e302e3020286c696e75783b2063687474703229";

    pub(in crate::server::authority) fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn grpcios_socket_path_is_replaced_in_place() {
        let block = hex(GRPCIO);
        let out = rewrite(&block).unwrap();
        let sent = literal(0x40, Some(b":authority"), b"tmp%2Fh23cap%2Fmr.sock");
        let valid = literal(0x40, Some(b":authority"), b"localhostxxxxxxxxxxxxx");
        let at = block.windows(sent.len()).position(|w| w == sent).unwrap();
        let mut expected = block.clone();
        expected.splice(at..at + sent.len(), valid);
        assert_eq!(out, expected);
        assert!(Authority::try_from("tmp%2Fh23cap%2Fmr.sock").is_err());
        // Rewritten once, nothing is left to rewrite.
        assert_eq!(rewrite(&out), None);
    }

    #[test]
    fn every_literal_form_keeps_its_form_and_name() {
        // Static name index 1 in each literal form, and a literal name, each with a Huffman
        // value (`%2Ftmp%2Fmr.sock`, 16 bytes decoded, 12 coded).
        let coded = hex("5458534d6a8b0d362e8393af");
        for (first, name) in [
            (0x41, None),
            (0x01, None),
            (0x11, None),
            (0x00, Some(&b":authority"[..])),
            (0x10, Some(&b":authority"[..])),
        ] {
            let mut block = vec![0x82, 0x86, 0x84]; // :method GET, :scheme http, :path /
            let prefix = block.len();
            block.push(first);
            if let Some(name) = name {
                block.extend(raw(name));
            }
            block.push(0x80 | coded.len() as u8);
            block.extend(&coded);
            block.extend(literal(0x40, Some(b"x-after"), b"kept"));
            let out = rewrite(&block).unwrap();
            let mut expected = block[..prefix].to_vec();
            expected.extend(literal(first, name, b"localhostxxxxxxx"));
            expected.extend(literal(0x40, Some(b"x-after"), b"kept"));
            assert_eq!(out, expected, "{first:#x}");
        }
        // A Huffman-coded name.
        let mut block = vec![0x40, 0x88];
        block.extend(hex("b83b5339ec327d7f")); // ":authority"
        block.extend(raw(b"a%b"));
        assert_eq!(
            rewrite(&block).unwrap(),
            [&[0x40, 0x88][..], &hex("b83b5339ec327d7f"), &raw(b"loc")].concat()
        );
    }

    #[test]
    fn valid_missing_or_unreadable_authorities_are_left() {
        let valid = [
            literal(0x41, None, b"localhost:50051"),
            literal(0x41, None, b"mr.sock"),
            literal(0x40, Some(b":authority"), b"[::1]:8080"),
        ];
        for block in valid {
            assert_eq!(rewrite(&block), None);
        }
        // No authority at all: indexed fields, a size update, other literals.
        let mut block = vec![0x3f, 0xe1, 0x1f, 0x82, 0x86, 0x84, 0xbe];
        block.extend(literal(0x40, Some(b"authority"), b"%%%"));
        block.extend(literal(0x44, None, b"/%%%"));
        assert_eq!(rewrite(&block), None);
        // An empty value has no valid replacement of its length.
        assert_eq!(rewrite(&literal(0x41, None, b"")), None);
        // A name as a dynamic-table index is not followed.
        assert_eq!(rewrite(&literal(0x7e, None, b"%2F")), None);
        // Cut short, or an integer too long: left for h2 to refuse.
        let cut = literal(0x41, None, b"%2Ftmp");
        assert_eq!(rewrite(&cut[..cut.len() - 1]), None);
        assert_eq!(rewrite(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
        // A value whose Huffman code is invalid (EOS).
        assert_eq!(rewrite(&[0x41, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn long_values_keep_their_length() {
        let long = vec![b'%'; 300];
        let out = rewrite(&literal(0x41, None, &long)).unwrap();
        let mut value = b"localhost".to_vec();
        value.resize(300, b'x');
        assert_eq!(out, literal(0x41, None, &value));
        assert_eq!(
            &out[1..4],
            [0x7f, 0xad, 0x01],
            "300 as a 7-bit-prefix integer"
        );
    }

    #[test]
    fn integers_round_trip() {
        for prefix in [4, 5, 6, 7] {
            for value in [
                0,
                1,
                14,
                15,
                16,
                30,
                31,
                62,
                63,
                126,
                127,
                128,
                1337,
                1 << 20,
            ] {
                let mut out = Vec::new();
                integer_into(&mut out, 0, prefix, value);
                assert_eq!(integer(&out, 0, prefix), Some((value, out.len())));
            }
        }
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        integer_into(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }
}
