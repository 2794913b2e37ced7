//! Just enough of PostgreSQL's wire protocol (version 3) for the fault proxy: message framing in
//! both directions, the statement a client runs, and where an answer ends.
//!
//! A client's first packet has no tag (the start-up message, or a request for TLS or a
//! cancel); every later message in either direction is a tag byte and a big-endian length that
//! counts itself. A statement runs when the client sends `Q` (a simple query, its text inside)
//! or `B` (a bind of a statement prepared earlier by `P`, which named it and carried its text).
//! Every `Q` and every `S` (sync) is answered by exactly one `Z` (ready for query), so counting
//! them pairs each statement with the end of its answer, also when a client sends the next
//! before the last is answered.

use std::collections::HashMap;

/// What a client sends that the proxy looks at.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// A packet without a tag (start-up, TLS or cancel request).
    Untagged,
    /// A statement runs: its kind.
    Runs(String),
    /// The end of an extended-protocol group, answered by one `Z`.
    Sync,
    /// Anything else.
    Other,
}

/// Requests for TLS or GSS encryption, answered by one byte without a tag.
const SSL_REQUEST: u32 = 80_877_103;
const GSS_REQUEST: u32 = 80_877_104;

/// The client's side of one connection: its statements by name.
#[derive(Debug, Default)]
pub struct Frontend {
    started: bool,
    statements: HashMap<String, String>,
}

impl Frontend {
    /// The length of the first whole message at the front of `buffer`, if one is there.
    pub fn next_len(&self, buffer: &[u8]) -> Option<usize> {
        if self.started {
            tagged_len(buffer)
        } else {
            let len = u32::from_be_bytes(buffer.get(..4)?.try_into().ok()?) as usize;
            (buffer.len() >= len).then_some(len)
        }
    }

    /// What `message` (one whole message) does; for a TLS request, the one raw byte the
    /// server answers with comes next (`true`).
    pub fn read(&mut self, message: &[u8]) -> (Sent, bool) {
        if !self.started {
            let code = message
                .get(4..8)
                .map_or(0, |c| u32::from_be_bytes(c.try_into().unwrap()));
            let encryption = code == SSL_REQUEST || code == GSS_REQUEST;
            // After an encryption request the client sends its start-up packet, untagged too.
            self.started = !encryption;
            return (Sent::Untagged, encryption);
        }
        let body = &message[5..];
        let sent = match message[0] {
            b'P' => {
                let (name, rest) = cstr(body);
                let (query, _) = cstr(rest);
                self.statements.insert(name.to_owned(), kind(query));
                Sent::Other
            }
            b'B' => {
                let (_portal, rest) = cstr(body);
                let (name, _) = cstr(rest);
                Sent::Runs(
                    self.statements
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| "other".into()),
                )
            }
            b'Q' => Sent::Runs(kind(cstr(body).0)),
            b'S' => Sent::Sync,
            _ => Sent::Other,
        };
        (sent, false)
    }
}

/// The length of the first whole tagged message at the front of `buffer`, if one is there.
pub fn tagged_len(buffer: &[u8]) -> Option<usize> {
    let len = u32::from_be_bytes(buffer.get(1..5)?.try_into().ok()?) as usize + 1;
    (buffer.len() >= len).then_some(len)
}

/// Whether a whole server message is `Z` (ready for query): the end of one answer.
pub fn ends_answer(message: &[u8]) -> bool {
    message.first() == Some(&b'Z')
}

/// A statement's kind: its `/* model-runtime: KIND */` tag; `commit`, `begin` and `rollback`
/// for those; `other` for the rest.
pub fn kind(query: &str) -> String {
    const TAG: &str = "/* model-runtime: ";
    if let Some(at) = query.find(TAG) {
        let rest = &query[at + TAG.len()..];
        if let Some(end) = rest.find(" */") {
            return rest[..end].to_owned();
        }
    }
    match query.trim().to_ascii_uppercase().as_str() {
        "COMMIT" => "commit".into(),
        "BEGIN" => "begin".into(),
        "ROLLBACK" => "rollback".into(),
        _ => "other".into(),
    }
}

/// A NUL-terminated string at the front of `bytes`, and what follows it.
fn cstr(bytes: &[u8]) -> (&str, &[u8]) {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).unwrap_or("");
    (text, bytes.get(end + 1..).unwrap_or(&[]))
}
