//! An incremental parser of Server-Sent Events (the WHATWG HTML "event stream" format) over
//! a byte stream that arrives in arbitrary pieces: lines end in CRLF, LF or CR, an event may
//! be split across any number of pieces, `:` lines are comments, and an event ends at a
//! blank line. Each byte is scanned once, so a multi-megabyte event costs linear time.

/// Upper bound on one event: its data so far and the line being received, together. Past it
/// the stream is malformed rather than a reason to exhaust memory. Every running call may
/// hold this much, so the bound is what one misbehaving upstream can pin per call (times
/// `max_concurrency`): 1 MiB is far above any real event (a chunk carries a token or a few;
/// even a whole long reply sent as one event is a few hundred KiB).
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// How much of an offending line an error keeps for the log.
const OFFENDING_BYTES: usize = 256;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; `None` is the default type, `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why the bytes are not an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A line is not UTF-8.
    InvalidUtf8 {
        /// The line, lossily decoded, for the log.
        line: String,
    },
    /// A line or an event's data passed [`MAX_EVENT_BYTES`].
    TooLarge,
}

impl SseError {
    /// A short description for the error message.
    pub fn what(&self) -> &'static str {
        match self {
            Self::InvalidUtf8 { .. } => "an event-stream line is not UTF-8",
            Self::TooLarge => "an event-stream event is larger than the limit",
        }
    }

    /// The offending text, for the log.
    pub fn offending(&self) -> &str {
        match self {
            Self::InvalidUtf8 { line } => line,
            Self::TooLarge => "",
        }
    }
}

/// The parser's state between pieces.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// Bytes of the line being received (complete lines are consumed at once).
    buf: Vec<u8>,
    /// How far `buf` has been searched for a line end.
    scanned: usize,
    /// The `event:` field of the event being built.
    event: Option<String>,
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
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            event: None,
            data: String::new(),
            at_start: true,
            limit,
        }
    }

    /// Feeds the next piece of the stream, appending every event it completes to `out`.
    pub fn push(&mut self, piece: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        // A piece that ends no line and would take the event past its budget is refused
        // before it is taken in: the buffer never grows past the budget for it.
        // (Not when the buffer ends in a CR held back as a possible CRLF half: that CR ends
        // a line, which may dispatch the event and empty its data.)
        if self.buf.len() + self.data.len() + piece.len() > self.limit
            && self.buf.last() != Some(&b'\r')
            && !piece.iter().any(|b| *b == b'\n' || *b == b'\r')
        {
            return Err(SseError::TooLarge);
        }
        self.buf.extend_from_slice(piece);
        // Where the line being looked at begins; lines before it are consumed.
        let mut start = 0;
        loop {
            let Some(offset) = self.buf[self.scanned..]
                .iter()
                .position(|b| *b == b'\n' || *b == b'\r')
            else {
                self.scanned = self.buf.len();
                break;
            };
            let end = self.scanned + offset;
            let terminator = match (self.buf[end], self.buf.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A CR that ends the piece may be the first half of a CRLF: wait for more.
                (b'\r', None) => {
                    self.scanned = end;
                    break;
                }
                _ => 1,
            };
            // Lend the buffer out (a move, not a copy) so the line can borrow from it.
            let buf = std::mem::take(&mut self.buf);
            let result = self.line(&buf[start..end], out);
            self.buf = buf;
            result?;
            start = end + terminator;
            self.scanned = start;
        }
        self.buf.drain(..start);
        self.scanned -= start;
        // One budget for the event: what it has gathered and the line still coming.
        if self.buf.len() + self.data.len() > self.limit {
            return Err(SseError::TooLarge);
        }
        Ok(())
    }

    /// Ends the stream: a CR held back as a possible CRLF half ends its line after all. An
    /// event not closed by a blank line is dropped, as the format requires.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.buf.get(self.scanned) == Some(&b'\r') {
            let buf = std::mem::take(&mut self.buf);
            self.line(&buf[..self.scanned], out)?;
            self.scanned = 0;
        }
        Ok(())
    }

    /// Handles one complete line (without its terminator).
    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut line = std::str::from_utf8(line).map_err(|_| SseError::InvalidUtf8 {
            line: String::from_utf8_lossy(&line[..line.len().min(OFFENDING_BYTES)]).into_owned(),
        })?;
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => {
                if self.data.len() + value.len() >= self.limit {
                    return Err(SseError::TooLarge);
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id` and `retry` steer browser reconnection, which a model call never does;
            // unknown fields are ignored, as the format requires.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        out.push(SseEvent { event, data });
    }
}

#[cfg(test)]
mod tests;
