//! Where an HTTP/1.1 response body ends (RFC 9112 section 6): a chunked body is decoded here,
//! a sized one is counted, and one without either ends when the server closes. The decoder
//! works on whatever slice of the connection's buffer is at hand and hands out the body's
//! data as sub-slices of it: nothing is copied on the way to the event-stream parser.

/// The longest chunk-size line (size, extensions) or trailer section accepted. Real servers
/// send a few bytes; the bound keeps a hostile one from growing the buffer without end.
const MAX_CONTROL_BYTES: usize = 16 * 1024;

/// How the body of one response is delimited, and how far it has been read.
#[derive(Debug)]
pub(crate) enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
    /// `Content-Length`: this many bytes are still to come.
    Length(u64),
    /// Neither: the body is everything until the server closes.
    UntilClose,
}

/// Why the bytes are not a well-formed body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// A chunk size with a digit that is not hexadecimal.
    #[error("a chunk size is not hexadecimal")]
    BadSize,
    /// A chunk size past what a length holds.
    #[error("a chunk size overflows")]
    SizeOverflow,
    /// A chunk's data not followed by CRLF.
    #[error("a chunk does not end in CRLF")]
    BadChunkEnd,
    /// A chunk-size or trailer line ended otherwise than by CRLF.
    #[error("a chunk-size or trailer line does not end in CRLF")]
    BadLineEnd,
    /// A chunk-size line or the trailers too long.
    #[error("a chunk-size line or the trailers pass {MAX_CONTROL_BYTES} bytes")]
    ControlTooLong,
}

/// Where a chunked decoder is. Every line of the framing ends in CRLF, and a CR or LF
/// anywhere else is an error: no bare LF ends a line, no bare CR hides in one (RFC 9112
/// section 7.1 has no exception, unlike heads in section 2.2). A recipient that took
/// either would find the chunks' ends where another on the path (a proxy) does not, and read
/// part of one response as the next (`docs/h1.md`).
#[derive(Debug, Default)]
pub(crate) enum Chunked {
    /// Before a chunk size's first digit.
    #[default]
    SizeStart,
    /// Inside a chunk size: its value, and the line's bytes so far (as below).
    Size { value: u64, seen: usize },
    /// Whitespace after the size, before a `;` or the line's end.
    SizeSpace { value: u64, seen: usize },
    /// A chunk extension (after its `;`), up to the line's end; it is not kept.
    Extension { value: u64, seen: usize },
    /// After the CR that ends a size line: its LF.
    SizeLf(u64),
    /// Inside a chunk's data: this many bytes left.
    Data(u64),
    /// After a chunk's data: its CR.
    DataEnd,
    /// After the CR that ends a chunk's data: its LF.
    DataLf,
    /// After the last chunk: trailer lines; `line` bytes into the current one, `seen` in
    /// all of them.
    Trailers { line: usize, seen: usize },
    /// After a CR in the trailers: the LF that ends its line (the trailers, and the body, if
    /// the line is empty).
    TrailersLf { line: usize, seen: usize },
    /// The body is complete.
    Done,
}

impl Framing {
    /// Decodes what `input` holds of the body, handing each piece of data to `data`, and
    /// returns how many bytes it took. It stops at the body's end (bytes after it are not
    /// taken) or when `input` runs out.
    pub(crate) fn decode<'a>(
        &mut self,
        input: &'a [u8],
        data: &mut dyn FnMut(&'a [u8]),
    ) -> Result<usize, FramingError> {
        match self {
            Self::Chunked(chunked) => chunked.decode(input, data),
            Self::Length(left) => {
                let take = usize::try_from(*left).map_or(input.len(), |l| l.min(input.len()));
                if take > 0 {
                    data(&input[..take]);
                }
                *left -= take as u64;
                Ok(take)
            }
            Self::UntilClose => {
                if !input.is_empty() {
                    data(input);
                }
                Ok(input.len())
            }
        }
    }

    /// Whether the whole body has been read.
    pub(crate) fn is_done(&self) -> bool {
        match self {
            Self::Chunked(chunked) => matches!(chunked, Chunked::Done),
            Self::Length(left) => *left == 0,
            Self::UntilClose => false,
        }
    }

    /// Whether the server closing the connection ends the body (rather than cutting it).
    pub(crate) fn ends_at_close(&self) -> bool {
        matches!(self, Self::UntilClose)
    }
}

impl Chunked {
    #[allow(
        clippy::too_many_lines,
        reason = "one transition per state, in one match: apart, a state would be far from where it leads"
    )]
    fn decode<'a>(
        &mut self,
        input: &'a [u8],
        data: &mut dyn FnMut(&'a [u8]),
    ) -> Result<usize, FramingError> {
        let mut at = 0;
        while at < input.len() {
            if let Some(len) = self.at_once(&input[at..]) {
                at += len;
                continue;
            }
            let byte = input[at];
            *self = match *self {
                Self::Done => return Ok(at),
                Self::Data(left) => {
                    let take =
                        usize::try_from(left).map_or(input.len() - at, |l| l.min(input.len() - at));
                    data(&input[at..at + take]);
                    at += take;
                    let left = left - take as u64;
                    *self = if left == 0 {
                        Self::DataEnd
                    } else {
                        Self::Data(left)
                    };
                    continue;
                }
                Self::SizeStart => Self::Size {
                    value: u64::from(hex(byte).ok_or(FramingError::BadSize)?),
                    seen: 1,
                },
                Self::Size { value, seen } => match hex(byte) {
                    Some(digit) => Self::Size {
                        value: value
                            .checked_mul(16)
                            .map(|v| v + u64::from(digit))
                            .ok_or(FramingError::SizeOverflow)?,
                        // Leading zeros count towards the line's bound.
                        seen: counted(seen)?,
                    },
                    None => Self::after_size(value, seen, byte)?,
                },
                Self::SizeSpace { value, seen } => Self::after_size(value, seen, byte)?,
                Self::Extension { value, seen } => match byte {
                    b'\r' => Self::SizeLf(value),
                    b'\n' => return Err(FramingError::BadLineEnd),
                    _ => Self::Extension {
                        value,
                        seen: counted(seen)?,
                    },
                },
                Self::SizeLf(value) => match byte {
                    b'\n' if value == 0 => Self::Trailers { line: 0, seen: 0 },
                    b'\n' => Self::Data(value),
                    _ => return Err(FramingError::BadLineEnd),
                },
                Self::DataEnd => match byte {
                    b'\r' => Self::DataLf,
                    _ => return Err(FramingError::BadChunkEnd),
                },
                Self::DataLf => match byte {
                    b'\n' => Self::SizeStart,
                    _ => return Err(FramingError::BadChunkEnd),
                },
                Self::Trailers { line, seen } => {
                    let seen = counted(seen)?;
                    match byte {
                        b'\r' => Self::TrailersLf { line, seen },
                        b'\n' => return Err(FramingError::BadLineEnd),
                        _ => Self::Trailers {
                            line: line + 1,
                            seen,
                        },
                    }
                }
                Self::TrailersLf { line, seen } => match byte {
                    // An empty line ends the trailers, and the body.
                    b'\n' if line == 0 => Self::Done,
                    b'\n' => Self::Trailers {
                        line: 0,
                        seen: counted(seen)?,
                    },
                    _ => return Err(FramingError::BadLineEnd),
                },
            };
            at += 1;
        }
        Ok(at)
    }

    /// A whole size line, or the CRLF after a chunk's data, at the start of `input`, taken
    /// at once: how many bytes it was. A byte at a time (`decode`) costs some 30 instructions
    /// a byte, and every chunk has six or more; this comes to the same state. Anything else
    /// (a line cut short, an extension, the last chunk's line) is left to `decode`.
    fn at_once(&mut self, input: &[u8]) -> Option<usize> {
        match *self {
            Self::DataEnd if input.starts_with(b"\r\n") => {
                *self = Self::SizeStart;
                Some(2)
            }
            Self::SizeStart => {
                let (size, len) = size_line(input)?;
                *self = Self::Data(size);
                Some(len)
            }
            _ => None,
        }
    }

    /// A byte of a size line after its digits: whitespace, the `;` of an extension, or the
    /// CR of the line's end; anything else (another digit after whitespace, a bare LF) is an
    /// error.
    fn after_size(value: u64, seen: usize, byte: u8) -> Result<Self, FramingError> {
        let seen = counted(seen)?;
        match byte {
            b' ' | b'\t' => Ok(Self::SizeSpace { value, seen }),
            b';' => Ok(Self::Extension { value, seen }),
            b'\r' => Ok(Self::SizeLf(value)),
            b'\n' => Err(FramingError::BadLineEnd),
            _ => Err(FramingError::BadSize),
        }
    }
}

/// The size and length of a size line at the start of `bytes` that is one to sixteen
/// hexadecimal digits (which a u64 holds, within the line's bound) and CRLF, and not the
/// last chunk's.
fn size_line(bytes: &[u8]) -> Option<(u64, usize)> {
    let digits = bytes
        .iter()
        .take(17)
        .take_while(|&&b| hex(b).is_some())
        .count();
    if digits == 0 || digits > 16 || bytes.get(digits..digits + 2) != Some(b"\r\n") {
        return None;
    }
    let size = bytes[..digits]
        .iter()
        .fold(0, |size, &b| size << 4 | u64::from(hex(b).unwrap_or(0)));
    (size != 0).then_some((size, digits + 2))
}

/// A control line's (or the trailers') count of bytes with one more, within the bound.
fn counted(seen: usize) -> Result<usize, FramingError> {
    if seen >= MAX_CONTROL_BYTES {
        return Err(FramingError::ControlTooLong);
    }
    Ok(seen + 1)
}

fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// Decodes `input` cut at every `cut`-th byte; the data and whether the body ended.
    fn decode_in_pieces(framing: &mut Framing, input: &[u8], cut: usize) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut taken = 0;
        for piece in input.chunks(cut) {
            let n = framing
                .decode(piece, &mut |d| out.extend_from_slice(d))
                .unwrap();
            taken += n;
            if n < piece.len() {
                break;
            }
        }
        (out, taken)
    }

    #[test]
    fn a_chunked_body_decodes_whole_however_it_is_cut() {
        let body = b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nx-t: 1\r\n\r\nNEXT";
        for cut in 1..body.len() {
            let mut framing = Framing::Chunked(Chunked::default());
            let (data, taken) = decode_in_pieces(&mut framing, body, cut);
            assert_eq!(data, b"hello 0123456789", "cut {cut}");
            assert!(framing.is_done(), "cut {cut}");
            assert_eq!(&body[taken..], b"NEXT", "cut {cut}");
        }
    }

    #[test]
    fn every_line_of_the_framing_ends_in_crlf() {
        // These were taken: a bare LF ended a line and a bare CR hid in one, so a proxy that
        // reads them as RFC 9112 does would find other chunk ends than the client.
        let cases: [(&[u8], FramingError); 10] = [
            (b"2\rxx\nhi\r\n", FramingError::BadLineEnd),
            (b"2;a\rb\r\nhi\r\n", FramingError::BadLineEnd),
            (b"2\nhi\r\n", FramingError::BadLineEnd),
            (b"2 \nhi\r\n", FramingError::BadLineEnd),
            (b"2;a\nhi\r\n", FramingError::BadLineEnd),
            (b"2\r\nhi\n0\r\n\r\n", FramingError::BadChunkEnd),
            (b"0\r\nX: a\rb\r\n\r\n", FramingError::BadLineEnd),
            (b"0\r\nX: a\nY: b\r\n\r\n", FramingError::BadLineEnd),
            (b"0\r\n\n", FramingError::BadLineEnd),
            // Nor does anything but whitespace, `;` or the line's end follow a size.
            (b"2 3\r\nhi\r\n", FramingError::BadSize),
        ];
        for (input, expected) in cases {
            let mut framing = Framing::Chunked(Chunked::default());
            let error = framing.decode(input, &mut |_| {}).unwrap_err();
            assert_eq!(error, expected, "{}", input.escape_ascii());
        }
    }

    #[test]
    fn malformed_chunks_are_refused() {
        let cases: [(&[u8], FramingError); 6] = [
            (b"zz\r\n", FramingError::BadSize),
            (b"5x\r\nhello\r\n", FramingError::BadSize),
            (
                &b"0".repeat(MAX_CONTROL_BYTES + 1),
                FramingError::ControlTooLong,
            ),
            (b"2\r\nhiX", FramingError::BadChunkEnd),
            (b"11111111111111111\r\n", FramingError::SizeOverflow),
            (
                &[b'1', b';'].repeat(MAX_CONTROL_BYTES),
                FramingError::ControlTooLong,
            ),
        ];
        for (input, expected) in cases {
            let mut framing = Framing::Chunked(Chunked::default());
            let error = framing.decode(input, &mut |_| {}).unwrap_err();
            assert_eq!(error, expected);
        }
        let mut trailers = b"0\r\n".to_vec();
        trailers.extend(std::iter::repeat_n(b'x', MAX_CONTROL_BYTES + 1));
        let mut framing = Framing::Chunked(Chunked::default());
        let error = framing.decode(&trailers, &mut |_| {}).unwrap_err();
        assert_eq!(error, FramingError::ControlTooLong);
    }

    #[test]
    fn a_sized_body_stops_at_its_length() {
        let mut framing = Framing::Length(5);
        let (data, taken) = decode_in_pieces(&mut framing, b"helloNEXT", 2);
        assert_eq!((data.as_slice(), taken), (&b"hello"[..], 5));
        assert!(framing.is_done() && !framing.ends_at_close());
    }

    #[test]
    fn a_body_until_close_takes_everything_and_ends_only_at_the_close() {
        let mut framing = Framing::UntilClose;
        let (data, _) = decode_in_pieces(&mut framing, b"all of it", 3);
        assert_eq!(data, b"all of it");
        assert!(!framing.is_done() && framing.ends_at_close());
        assert!(!Framing::Length(1).ends_at_close());
    }
}
