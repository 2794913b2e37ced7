//! An incremental parser of Server-Sent Events (the WHATWG HTML "event stream" format) over
//! a byte stream that arrives in arbitrary pieces: lines end in CRLF, LF or CR, an event may
//! be split across any number of pieces, `:` lines are comments, and an event ends at a
//! blank line. Each byte is scanned once, so a multi-megabyte event costs linear time.

use super::framing::{Framing, Malformed};

/// Upper bound on one event: its data so far and the line being received, together. Past it
/// the stream is malformed rather than a reason to exhaust memory. Every running call may
/// hold this much, so the bound is what one misbehaving upstream can pin per call (times
/// `max_concurrency`): 1 MiB is far above any real event (a chunk carries a token or a few;
/// even a whole long reply sent as one event is a few hundred KiB).
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// The most memory a parser keeps between events (a large event's is let go once it is out).
const KEPT_BYTES: usize = 64 * 1024;

/// How much of an offending line an error keeps for the log.
const OFFENDING_BYTES: usize = 256;

/// One dispatched event, lent out of the parser for as long as its handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SseEvent<'a> {
    /// The `event:` field; `None` is the default type, `message`.
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
}

/// An event copied out of the parser, for tests and the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedEvent {
    pub event: Option<String>,
    pub data: String,
}

#[cfg(any(test, feature = "fuzzing"))]
impl OwnedEvent {
    pub(super) fn of(event: SseEvent<'_>) -> Self {
        Self {
            event: event.event.map(str::to_owned),
            data: event.data.to_owned(),
        }
    }

    pub(super) fn view(&self) -> SseEvent<'_> {
        SseEvent {
            event: self.event.as_deref(),
            data: &self.data,
        }
    }
}

/// Why the bytes are not an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A `data` or `event` value is not UTF-8 (the bytes of a line the format ignores are
    /// not looked at).
    InvalidUtf8 {
        /// The line, lossily decoded, for the log.
        line: String,
    },
    /// A line or an event's data passed [`MAX_EVENT_BYTES`].
    TooLarge,
}

impl SseError {
    /// A short description for the error message.
    pub(super) fn what(&self) -> &'static str {
        match self {
            Self::InvalidUtf8 { .. } => "an event-stream data or event value is not UTF-8",
            Self::TooLarge => "an event-stream event is larger than the limit",
        }
    }
}

impl From<SseError> for Malformed {
    fn from(error: SseError) -> Self {
        Self {
            what: error.what(),
            offending: match error {
                SseError::InvalidUtf8 { line } => line,
                SseError::TooLarge => String::new(),
            },
        }
    }
}

impl Framing for SseParser {
    type Event<'a> = SseEvent<'a>;

    const MEDIA_TYPE: &'static str = "text/event-stream";

    fn push(
        &mut self,
        piece: &[u8],
        on: &mut dyn for<'a> FnMut(SseEvent<'a>),
    ) -> Result<(), Malformed> {
        Ok(SseParser::push(self, piece, on)?)
    }

    fn finish(&mut self, on: &mut dyn for<'a> FnMut(SseEvent<'a>)) -> Result<(), Malformed> {
        Ok(SseParser::finish(self, on)?)
    }
}

/// The parser's state between pieces.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// Bytes of the line being received (complete lines are consumed at once).
    buf: Vec<u8>,
    /// How far `buf` has been searched for a line end.
    scanned: usize,
    /// The `event:` field of the event being built, if it has one (`event` keeps its memory
    /// from one event to the next).
    has_event: bool,
    event: String,
    /// The `data:` of the event being built, each line followed by `\n`.
    data: String,
    /// Whether the first line (which may start with a byte-order mark) is still ahead.
    at_start: bool,
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

impl SseParser {
    /// A parser whose lines and events may not exceed `limit` bytes.
    pub(super) fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            has_event: false,
            event: String::new(),
            data: String::new(),
            at_start: true,
            limit,
        }
    }

    /// Feeds the next piece of the stream, handing every event it completes to `on`. After
    /// an error the stream is malformed and the parser spent: it is not fed again.
    pub(super) fn push(
        &mut self,
        piece: &[u8],
        on: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        // A piece that ends no line and would take the event past its budget is refused
        // before it is taken in: the buffer never grows past the budget for it.
        // (Not when the buffer ends in a CR held back as a possible CRLF half: that CR ends
        // a line, which may dispatch the event and empty its data.)
        if self.buf.len() + self.data.len() + piece.len() > self.limit
            && self.buf.last() != Some(&b'\r')
            && memchr::memchr2(b'\n', b'\r', piece).is_none()
        {
            return Err(SseError::TooLarge);
        }
        if self.buf.is_empty() {
            // The usual case: lines are read from the piece itself, and only an unfinished
            // one is kept.
            let (start, scanned) = self.lines(piece, 0, on)?;
            self.buf.extend_from_slice(&piece[start..]);
            self.scanned = scanned - start;
        } else {
            self.buf.extend_from_slice(piece);
            // Lend the buffer out (a move, not a copy) so the lines can borrow from it.
            let buf = std::mem::take(&mut self.buf);
            let read = self.lines(&buf, self.scanned, on);
            self.buf = buf;
            let (start, scanned) = read?;
            self.buf.drain(..start);
            self.scanned = scanned - start;
            if self.buf.is_empty() && self.buf.capacity() > KEPT_BYTES {
                self.buf = Vec::new();
            }
        }
        // One budget for the event: what it has gathered and the line still coming (up to
        // `scanned`: a CR held back as a possible CRLF half ends the line, it is not in it).
        if self.scanned + self.data.len() > self.limit {
            return Err(SseError::TooLarge);
        }
        Ok(())
    }

    /// Handles the complete lines of `bytes`, searching for line ends from `scanned` on:
    /// where the unfinished rest begins, and how far it has been searched.
    fn lines(
        &mut self,
        bytes: &[u8],
        mut scanned: usize,
        on: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(usize, usize), SseError> {
        // Where the line being looked at begins; lines before it are consumed.
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &bytes[scanned..]) {
            let end = scanned + offset;
            let terminator = match (bytes[end], bytes.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A CR that ends the piece may be the first half of a CRLF: wait for more.
                (b'\r', None) => return Ok((start, end)),
                _ => 1,
            };
            let line = &bytes[start..end];
            self.fits(line)?;
            start = end + terminator;
            // The usual event, one `data` line and the blank line after it, both here: its
            // value goes out from where it lies, without a copy or another search.
            let blank = match &bytes[start..] {
                [b'\n', ..] => 1,
                [b'\r', b'\n', ..] => 2,
                _ => 0,
            };
            if blank > 0
                && self.data.is_empty()
                && !self.at_start
                && let Some(value) = line.strip_prefix(b"data:")
            {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                on(SseEvent {
                    event: self.has_event.then_some(self.event.as_str()),
                    data: utf8(line, value)?,
                });
                self.reset();
                start += blank;
            } else {
                self.line(line, on)?;
            }
            scanned = start;
        }
        Ok((start, bytes.len()))
    }

    /// Ends the stream, which its framing ended whole (a cut connection is never finished):
    /// a CR held back as a possible CRLF half ends its line after all, and an event whose
    /// last line is complete goes out though no blank line closed it (servers end their
    /// last event that way, Google's blocked-prompt replies among them). An event whose last
    /// line was cut short is dropped.
    pub(super) fn finish(&mut self, on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        if self.buf.get(self.scanned) == Some(&b'\r') {
            let buf = std::mem::take(&mut self.buf);
            self.fits(&buf[..self.scanned])?;
            self.line(&buf[..self.scanned], on)?;
            self.scanned = 0;
        }
        if self.buf.is_empty() {
            self.dispatch(on);
        }
        Ok(())
    }

    /// Whether the complete `line` fits beside the event's data so far: the bound a line
    /// still coming is held to in `push`, so a stream is refused whatever its pieces.
    fn fits(&self, line: &[u8]) -> Result<(), SseError> {
        if self.data.len() + line.len() > self.limit {
            return Err(SseError::TooLarge);
        }
        Ok(())
    }

    /// Handles one complete line (without its terminator). The field's name is found in
    /// the bytes; only a kept value (`data`, `event`) must be UTF-8, so the bytes of an
    /// ignored line (a comment, `id`, an unknown field) are not checked, as the format
    /// ignores them whatever they hold.
    fn line(&mut self, line: &[u8], on: &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        let mut line = line;
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(0) => return Ok(()),
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None if line.is_empty() => {
                self.dispatch(on);
                return Ok(());
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => {
                let value = utf8(line, value)?;
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            b"data" => {
                self.data.push_str(utf8(line, value)?);
                self.data.push('\n');
            }
            // `id` and `retry` steer browser reconnection, which a model call never does;
            // unknown fields are ignored, as the format requires.
            _ => {}
        }
        Ok(())
    }

    /// A blank line: the event gathered so far goes out, if it has data.
    fn dispatch(&mut self, on: &mut dyn FnMut(SseEvent<'_>)) {
        if let Some(data) = self.data.strip_suffix('\n') {
            on(SseEvent {
                event: self.has_event.then_some(self.event.as_str()),
                data,
            });
        }
        self.reset();
    }

    /// The next event begins.
    fn reset(&mut self) {
        self.has_event = false;
        self.data.clear();
        // Memory kept for the next event is bounded by what a usual one needs, not by the
        // largest this upstream ever sent.
        if self.data.capacity() > KEPT_BYTES {
            self.data = String::new();
        }
        if self.event.capacity() > KEPT_BYTES {
            self.event = String::new();
        }
    }
}

/// `value`, a kept value of `line`, as text; the line (its start) for the log if it is not
/// UTF-8.
fn utf8<'a>(line: &[u8], value: &'a [u8]) -> Result<&'a str, SseError> {
    std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8 {
        line: String::from_utf8_lossy(&line[..line.len().min(OFFENDING_BYTES)]).into_owned(),
    })
}

#[cfg(test)]
mod tests;
