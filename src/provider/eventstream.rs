//! An incremental parser of AWS's event stream (`application/vnd.amazon.eventstream`), the
//! binary framing of Bedrock's streaming replies. Each message is
//!
//! ```text
//! total length u32 | headers length u32 | prelude CRC u32 | headers | payload | message CRC u32
//! ```
//!
//! big-endian, both CRCs CRC-32 (IEEE): the prelude's over the two lengths, the message's over
//! everything before it. A header is a name (u8 length, UTF-8), a type byte and a value whose
//! size the type fixes or a u16 length gives.
//!
//! The runtime's own rather than `aws-smithy-eventstream`'s decoder (measured in
//! BENCHMARKS.md, "The event-stream decoder"): that one checks a message's prelude CRC and
//! lengths only once the whole message has arrived, so a prelude claiming 4 GiB is buffered
//! for as long as bytes keep coming (64 MiB held and still waiting, in the measurement). This
//! one checks the prelude as soon as its 12 bytes are in and refuses a message longer than the
//! bound before it keeps any of it; a message is lent out of the bytes it arrived in, never
//! copied (70-75 ns per Bedrock delta against the crate's 415-427 ns).

use super::framing::{Framing, Malformed};
use super::sse::MAX_EVENT_BYTES;

/// The prelude: two lengths and their CRC.
const PRELUDE: usize = 12;

/// The smallest message: a prelude and a message CRC.
const MIN_MESSAGE: usize = PRELUDE + 4;

/// The longest message taken: the same bound on one event as server-sent events have, plus
/// room for its headers. (The format allows 16 MiB; Bedrock's events are a few hundred bytes.)
const MAX_MESSAGE: usize = MAX_EVENT_BYTES + 64 * 1024;

/// The most memory a parser keeps between messages (a large one's is let go once it is out).
const KEPT_BYTES: usize = 64 * 1024;

/// One message, lent out of the parser for as long as its handler runs: the headers Bedrock's
/// messages are told apart by, and the payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    /// `:message-type`: `event`, `exception` or `error`.
    pub message_type: &'a str,
    /// `:event-type` (an event's, e.g. `contentBlockDelta`).
    pub event_type: &'a str,
    /// `:exception-type` (an exception's, e.g. `throttlingException`).
    pub exception_type: &'a str,
    /// `:error-code` (an error message's).
    pub error_code: &'a str,
    /// The payload: JSON for every Bedrock message.
    pub payload: &'a [u8],
}

/// Why the bytes are not an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventStreamError {
    /// The prelude's CRC does not match its lengths.
    PreludeChecksum,
    /// The message's CRC does not match its bytes.
    MessageChecksum,
    /// A total length below the smallest message, or headers longer than the message holds.
    Length,
    /// A message longer than the bound.
    TooLarge,
    /// A header runs past the headers, has an unknown type, or a name or string value that
    /// is not UTF-8.
    Header,
}

impl EventStreamError {
    /// A short description for the error message.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Self::PreludeChecksum => "an event-stream message's prelude fails its CRC",
            Self::MessageChecksum => "an event-stream message fails its CRC",
            Self::Length => "an event-stream message's lengths do not fit together",
            Self::TooLarge => "an event-stream message is larger than the limit",
            Self::Header => "an event-stream message has a malformed header",
        }
    }
}

impl From<EventStreamError> for Malformed {
    fn from(error: EventStreamError) -> Self {
        Self {
            what: error.what(),
            offending: String::new(),
        }
    }
}

/// The parser's state between pieces: the start of a message not yet whole.
#[derive(Debug)]
pub(crate) struct EventStreamParser {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for EventStreamParser {
    fn default() -> Self {
        Self::with_limit(MAX_MESSAGE)
    }
}

impl Framing for EventStreamParser {
    type Event<'a> = Message<'a>;

    const MEDIA_TYPE: &'static str = "application/vnd.amazon.eventstream";

    fn push(
        &mut self,
        piece: &[u8],
        on: &mut dyn for<'a> FnMut(Message<'a>),
    ) -> Result<(), Malformed> {
        Ok(EventStreamParser::push(self, piece, on)?)
    }

    /// A message cut short by the body's end is dropped, as a server-sent event not closed
    /// by a blank line is: the reply is then interrupted unless it was already complete.
    fn finish(&mut self, _: &mut dyn for<'a> FnMut(Message<'a>)) -> Result<(), Malformed> {
        self.buf = Vec::new();
        Ok(())
    }
}

impl EventStreamParser {
    /// A parser refusing messages longer than `limit` bytes.
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            limit,
        }
    }

    /// Feeds the next piece of the stream, handing every message it completes to `on`. After
    /// an error the stream is malformed and the parser spent: it is not fed again.
    pub(crate) fn push(
        &mut self,
        piece: &[u8],
        on: &mut dyn for<'a> FnMut(Message<'a>),
    ) -> Result<(), EventStreamError> {
        if self.buf.is_empty() {
            // The usual case: messages are read from the piece itself, and only an
            // unfinished one is kept.
            let used = self.messages(piece, on)?;
            self.buf.extend_from_slice(&piece[used..]);
        } else {
            self.buf.extend_from_slice(piece);
            // Lend the buffer out (a move, not a copy) so the messages can borrow from it.
            let buf = std::mem::take(&mut self.buf);
            let read = self.messages(&buf, on);
            self.buf = buf;
            self.buf.drain(..read?);
            if self.buf.is_empty() && self.buf.capacity() > KEPT_BYTES {
                self.buf = Vec::new();
            }
        }
        Ok(())
    }

    /// Hands over the whole messages at the start of `bytes`: how many bytes they took. The
    /// prelude of the unfinished one after them, once it is in, is checked at once.
    fn messages(
        &self,
        bytes: &[u8],
        on: &mut dyn for<'a> FnMut(Message<'a>),
    ) -> Result<usize, EventStreamError> {
        let mut used = 0;
        while let Some(prelude) = bytes.get(used..used + PRELUDE) {
            let (total, headers) = self.prelude(prelude)?;
            let Some(message) = bytes.get(used..used + total) else {
                break;
            };
            on(parse(message, headers)?);
            used += total;
        }
        Ok(used)
    }

    /// The total and headers lengths a prelude gives, checked against its CRC and each other.
    fn prelude(&self, prelude: &[u8]) -> Result<(usize, usize), EventStreamError> {
        let total = read_u32(prelude, 0) as usize;
        let headers = read_u32(prelude, 4) as usize;
        if crc32fast::hash(&prelude[..8]) != read_u32(prelude, 8) {
            return Err(EventStreamError::PreludeChecksum);
        }
        if total < MIN_MESSAGE || headers > total - MIN_MESSAGE {
            return Err(EventStreamError::Length);
        }
        if total > self.limit {
            return Err(EventStreamError::TooLarge);
        }
        Ok((total, headers))
    }
}

/// One whole message (its prelude checked) with `headers` bytes of headers.
fn parse(message: &[u8], headers: usize) -> Result<Message<'_>, EventStreamError> {
    let crc_at = message.len() - 4;
    if crc32fast::hash(&message[..crc_at]) != read_u32(message, crc_at) {
        return Err(EventStreamError::MessageChecksum);
    }
    let mut parsed = Message {
        payload: &message[PRELUDE + headers..crc_at],
        ..Message::default()
    };
    let mut rest = &message[PRELUDE..PRELUDE + headers];
    while !rest.is_empty() {
        let ((name, value), after) = header(rest).ok_or(EventStreamError::Header)?;
        let utf8 = |bytes| std::str::from_utf8(bytes).map_err(|_| EventStreamError::Header);
        // The names read are known to be UTF-8; only another's is checked.
        let field = match name {
            b":message-type" => Some(&mut parsed.message_type),
            b":event-type" => Some(&mut parsed.event_type),
            b":exception-type" => Some(&mut parsed.exception_type),
            b":error-code" => Some(&mut parsed.error_code),
            _ => utf8(name).map(|_| None)?,
        };
        if let Some(value) = value {
            let value = utf8(value)?;
            if let Some(field) = field {
                *field = value;
            }
        }
        rest = after;
    }
    Ok(parsed)
}

/// One header: its name, and its value if it is a string.
type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// The first header of `bytes`, and the bytes after it; `None` if it runs past `bytes` or its
/// type is unknown.
fn header(bytes: &[u8]) -> Option<(Header<'_>, &[u8])> {
    let (&name_len, rest) = bytes.split_first()?;
    let (name, rest) = rest.split_at_checked(usize::from(name_len))?;
    let (&kind, rest) = rest.split_first()?;
    let fixed = match kind {
        // true, false
        0 | 1 => 0,
        // byte, i16, i32, i64, timestamp, uuid
        2 => 1,
        3 => 2,
        4 => 4,
        5 | 8 => 8,
        9 => 16,
        // byte array, string: a u16 length, then the bytes
        6 | 7 => {
            let (len, rest) = rest.split_at_checked(2)?;
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            let (value, rest) = rest.split_at_checked(len)?;
            return Some(((name, (kind == 7).then_some(value)), rest));
        }
        _ => return None,
    };
    let (_, rest) = rest.split_at_checked(fixed)?;
    Some(((name, None), rest))
}

/// The big-endian u32 at `at` (the caller has checked the length).
fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// A message of `headers` (string values) and `payload`, framed: for tests, the fuzz seeds
/// and the mock upstream.
#[cfg(test)]
pub(crate) fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = u32::try_from(MIN_MESSAGE + head.len() + payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&u32::try_from(head.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}

#[cfg(test)]
mod tests;
